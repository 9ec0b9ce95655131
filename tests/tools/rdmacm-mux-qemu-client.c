/* SPDX-License-Identifier: MIT */
/*
 * rdmacm-mux-qemu-client: a raw client of the base protocol that behaves
 * exactly like QEMU 4.0-9.0's pvrdma backend, for tests on any fabric.
 *
 * It uses libc, the protocol header and the tests' CM MAD helpers only (no
 * client library), and it copies QEMU's habits on purpose:
 *   - AF_UNIX stream, fixed 360-byte frames, no HELLO;
 *   - after each request frame, ONE read that must be the RESP (msg_type 1,
 *     same op_code); anything else there is a protocol failure;
 *   - inbound MADs are frames with msg_type 0 and op_code 2, with the full
 *     local GID in hdr.sgid;
 *   - a MAD it sends carries its OWN GID in umad.hdr.addr.gid (QEMU's bug
 *     C1), addr.qpn = 1, grh_present = 1, hop_limit = 0xff and a host
 *     gid_index that the daemon must ignore (--gid-index, default 0: the
 *     port's fe80 GID, so a daemon that trusted it would send from the
 *     wrong GID and the peer would see it).
 *
 *   rdmacm-mux-qemu-client -S SOCK -g GID [-n NAME] connect DEST_GID [-c N] [--service SID]
 *                          [--hold MS]   (established this long before DREQ;
 *                                         SIGUSR1 ends the wait early)
 *                          [--tries N]   (sends of a MAD before it gives up,
 *                                         one a second; default 5)
 *   rdmacm-mux-qemu-client -S SOCK -g GID [-n NAME] serve [-c N] [-t SECS]
 *   rdmacm-mux-qemu-client -S SOCK -g GID [-n NAME] sidr DEST_IPV4 [--service SID]
 *
 * The output lines follow examples/rdmacm-mux-pingpong.c, so that the same
 * test scripts can read both:
 *   [q1] -> REQ      to ::ffff:10.0.2.1  comm 0x00000001
 *   [q1] <- REP      from ::ffff:10.0.2.1  comm 0x853fe038 remote 0x00000001
 * Exit status: 0 done, 1 a failure (refused request, protocol error, no
 * answer), 2 a bad command line.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cm-mad.h"
#include "rdmacm-mux-bytes.h"
#include "rdmacm-mux-proto.h"

#define OFF_CMA_HDR 40 /* SIDR_REQ private data: rdma_cm's cma_hdr */

#define RETRY_MS 1000
#define MAX_TRIES 5
#define RESP_TIMEOUT_MS 10000 /* QEMU blocks forever; a test must not */

/* A REQ this client answered, so a retransmitted REQ gets the same REP. */
struct answered {
	uint8_t peer_gid[IB_GID_LEN];
	uint32_t peer_id;
	uint32_t our_id;
};

#define MAX_ANSWERED 64

struct qclient {
	const char *name;
	int fd;
	uint8_t gid[IB_GID_LEN];
	uint8_t gid_index;
	uint32_t next_id;
	uint32_t tid;
	struct answered answered[MAX_ANSWERED];
	unsigned n_answered;
	unsigned hold_ms; /* connect: established this long before DREQ */
	int max_tries;	  /* sends of a MAD that gets no answer, one per RETRY_MS */
};

static const char *gid_str(const uint8_t gid[IB_GID_LEN])
{
	static char buf[4][INET6_ADDRSTRLEN];
	static int i;

	i = (i + 1) % 4;
	return inet_ntop(AF_INET6, gid, buf[i], sizeof(buf[i]));
}

static const char *op_name(uint32_t op)
{
	switch (op) {
	case RDMACM_MUX_OP_CODE_REG: return "REG";
	case RDMACM_MUX_OP_CODE_UNREG: return "UNREG";
	case RDMACM_MUX_OP_CODE_MAD: return "MAD";
	default: return "?";
	}
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- framing ---- */

static int write_frame(int fd, const struct rdmacm_mux_msg *m)
{
	const uint8_t *p = (const uint8_t *)m;
	size_t done = 0;

	while (done < sizeof(*m)) {
		ssize_t n = write(fd, p + done, sizeof(*m) - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}

/*
 * Read one whole frame. 0, -ETIMEDOUT when nothing at all arrived within
 * @timeout_ms, -ECONNRESET on end of file, -EPROTO for a partial frame
 * that never completed, or another negative errno.
 */
static int read_frame(int fd, struct rdmacm_mux_msg *m, int timeout_ms)
{
	uint8_t *p = (uint8_t *)m;
	size_t done = 0;
	int64_t deadline = now_ms() + timeout_ms;

	while (done < sizeof(*m)) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		ssize_t n;
		int r;

		if (left < 0)
			left = 0;
		r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return done ? -EPROTO : -ETIMEDOUT;
		n = read(fd, p + done, sizeof(*m) - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return done ? -EPROTO : -ECONNRESET;
		done += (size_t)n;
	}
	return 0;
}

/* A request frame with everything QEMU leaves zero at zero. */
static void frame_init(struct rdmacm_mux_msg *m, uint32_t op, const uint8_t gid[IB_GID_LEN])
{
	memset(m, 0, sizeof(*m));
	m->hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
	m->hdr.op_code = op;
	memcpy(m->hdr.sgid.raw, gid, IB_GID_LEN);
}

/*
 * Send a request and do what QEMU does: one read, which must be its RESP.
 * Returns the RESP's err_code (0 is success), or -EPROTO/-errno when the
 * protocol broke; both are reported here.
 */
static int request(struct qclient *q, struct rdmacm_mux_msg *m, const char *what)
{
	uint32_t op = m->hdr.op_code;
	struct rdmacm_mux_msg resp;
	int r = write_frame(q->fd, m);

	if (r == 0)
		r = read_frame(q->fd, &resp, RESP_TIMEOUT_MS);
	if (r < 0) {
		fprintf(stderr, "[%s] PROTOCOL ERROR: no response to %s (%s): %s\n", q->name,
			op_name(op), what, strerror(-r));
		return -EPROTO;
	}
	if (resp.hdr.msg_type != RDMACM_MUX_MSG_TYPE_RESP || resp.hdr.op_code != op) {
		fprintf(stderr,
			"[%s] PROTOCOL ERROR: expected the RESP to %s (%s), got msg_type %u op_code %u\n",
			q->name, op_name(op), what, resp.hdr.msg_type, resp.hdr.op_code);
		return -EPROTO;
	}
	return resp.hdr.err_code;
}

static const char *err_text(int err)
{
	switch (err) {
	case RDMACM_MUX_ERR_CODE_EINVAL: return "EINVAL";
	case RDMACM_MUX_ERR_CODE_EEXIST: return "EEXIST";
	case RDMACM_MUX_ERR_CODE_EACCES: return "EACCES";
	case RDMACM_MUX_ERR_CODE_ENOTFOUND: return "ENOTFOUND";
	default: return err < 0 ? strerror(-err) : "?";
	}
}

static int gid_op(struct qclient *q, uint32_t op)
{
	struct rdmacm_mux_msg m;
	int r;

	frame_init(&m, op, q->gid);
	r = request(q, &m, gid_str(q->gid));
	if (r == -EPROTO)
		return r;
	if (r != 0) {
		fprintf(stderr, "[%s] %s %s failed: err_code %d (%s)\n", q->name, op_name(op),
			gid_str(q->gid), r, err_text(r));
		return -EIO;
	}
	printf("[%s] %s %s\n", q->name,
	       op == RDMACM_MUX_OP_CODE_REG ? "registered" : "unregistered", gid_str(q->gid));
	return 0;
}

/* ---- MADs ---- */

/* A CM MAD of @attr with this client's next TID, all else zero. */
static void mad_init(struct qclient *q, uint8_t mad[256], uint16_t attr)
{
	mad_build(mad, attr, 0, 0, ++q->tid);
}

/*
 * Send a MAD the way QEMU's mad_send() does. @intended is only printed: the
 * frame itself names our own GID as the destination. Returns 0, or -EIO
 * when the daemon refused it, or -EPROTO.
 */
static int send_mad(struct qclient *q, const uint8_t *intended, const uint8_t mad[256])
{
	struct rdmacm_mux_msg m;
	int r;

	frame_init(&m, RDMACM_MUX_OP_CODE_MAD, q->gid);
	m.umad_len = 256;
	m.umad.hdr.addr.qpn = htonl(1);
	m.umad.hdr.addr.grh_present = 1;
	m.umad.hdr.addr.gid_index = q->gid_index;
	m.umad.hdr.addr.hop_limit = 0xff;
	memcpy(m.umad.hdr.addr.gid, q->gid, IB_GID_LEN); /* QEMU's bug C1 */
	memcpy(m.umad.mad, mad, 256);
	r = request(q, &m, mad_attr_name(mad_attr(mad)));
	if (r == -EPROTO)
		return r;
	if (r != 0) {
		fprintf(stderr, "[%s] sending %s failed: err_code %d (%s)\n", q->name,
			mad_attr_name(mad_attr(mad)), r, err_text(r));
		return -EIO;
	}
	printf("[%s] -> %-8s to %s  comm 0x%08x\n", q->name, mad_attr_name(mad_attr(mad)),
	       intended ? gid_str(intended) : "(session)", mad_local(mad));
	return 0;
}

/*
 * Wait up to @timeout_ms for an inbound MAD; 0 with *m filled, -ETIMEDOUT,
 * or -EPROTO when the daemon sent anything but an inbound MAD frame for our
 * GID (QEMU would misread it).
 */
static int recv_mad(struct qclient *q, struct rdmacm_mux_msg *m, int timeout_ms)
{
	static const uint8_t zero[4];
	int r = read_frame(q->fd, m, timeout_ms);

	if (r == -ETIMEDOUT)
		return r;
	if (r < 0) {
		fprintf(stderr, "[%s] PROTOCOL ERROR: reading an inbound MAD: %s\n", q->name,
			strerror(-r));
		return -EPROTO;
	}
	if (m->hdr.msg_type != RDMACM_MUX_MSG_TYPE_REQ || m->hdr.op_code != RDMACM_MUX_OP_CODE_MAD) {
		fprintf(stderr, "[%s] PROTOCOL ERROR: unsolicited frame msg_type %u op_code %u\n",
			q->name, m->hdr.msg_type, m->hdr.op_code);
		return -EPROTO;
	}
	if (m->umad_len < RDMACM_MUX_MAD_HDR_SIZE + 8 || m->umad_len > RDMACM_MUX_MAD_SIZE) {
		fprintf(stderr, "[%s] PROTOCOL ERROR: inbound MAD with umad_len %d\n", q->name,
			m->umad_len);
		return -EPROTO;
	}
	/* QEMU uses all 16 bytes of hdr.sgid as the local GID. */
	if (memcmp(m->hdr.sgid.raw, q->gid, IB_GID_LEN) != 0) {
		fprintf(stderr, "[%s] PROTOCOL ERROR: inbound MAD for %s, we are %s\n", q->name,
			gid_str(m->hdr.sgid.raw), gid_str(q->gid));
		return -EPROTO;
	}
	if (m->hdr.err_code != 0 ||
	    (sizeof(*m) == 360 && (memcmp((uint8_t *)m + 28, zero, 4) != 0 ||
				   memcmp((uint8_t *)m + 356, zero, 4) != 0))) {
		fprintf(stderr, "[%s] PROTOCOL ERROR: inbound MAD with err_code %d or dirty padding\n",
			q->name, m->hdr.err_code);
		return -EPROTO;
	}
	printf("[%s] <- %-8s from %s  comm 0x%08x remote 0x%08x\n", q->name,
	       mad_attr_name(mad_attr(m->umad.mad)), gid_str(m->umad.hdr.addr.gid),
	       mad_local(m->umad.mad), mad_remote(m->umad.mad));
	return 0;
}

/*
 * Send @mad until an answer of one of @want arrives that carries our id
 * (in RemoteCommID, or in RequestID for SIDR); other MADs are printed and
 * ignored.
 */
static int exchange(struct qclient *q, const uint8_t *intended, const uint8_t *mad,
		    const unsigned *want, int nwant, bool by_request_id, struct rdmacm_mux_msg *in)
{
	uint32_t id = mad_local(mad);

	for (int tries = 0; tries < q->max_tries; tries++) {
		int64_t deadline;
		int r = send_mad(q, intended, mad);

		if (r < 0)
			return r;
		deadline = now_ms() + RETRY_MS;
		while ((r = recv_mad(q, in, (int)(deadline > now_ms() ? deadline - now_ms() : 0))) == 0) {
			uint32_t echo = by_request_id ? mad_local(in->umad.mad) : mad_remote(in->umad.mad);

			for (int i = 0; i < nwant; i++)
				if (mad_attr(in->umad.mad) == want[i] && echo == id)
					return 0;
			printf("[%s] ignoring %s (id 0x%08x, ours 0x%08x)\n", q->name,
			       mad_attr_name(mad_attr(in->umad.mad)), echo, id);
		}
		if (r != -ETIMEDOUT)
			return r;
		printf("[%s] no answer, sending %s again\n", q->name, mad_attr_name(mad_attr(mad)));
	}
	fprintf(stderr, "[%s] no answer to %s after %d tries\n", q->name, mad_attr_name(mad_attr(mad)),
		q->max_tries);
	return -ETIMEDOUT;
}

/* --hold: SIGUSR1 ends the wait, so that a test can keep a session for as
 * long as some action of its own takes, however slow the host. */
static volatile sig_atomic_t hold_ended;

static void end_hold(int sig)
{
	(void)sig;
	hold_ended = 1;
}

static void hold(unsigned ms)
{
	for (unsigned waited = 0; waited < ms && !hold_ended; waited += 10)
		usleep(10 * 1000);
}

static int do_connect(struct qclient *q, const uint8_t dest[IB_GID_LEN], uint64_t service)
{
	static const unsigned want_rep[] = { CM_REP, CM_REJ };
	static const unsigned want_drep[] = { CM_DREP };
	struct rdmacm_mux_msg in;
	uint8_t mad[256], peer[IB_GID_LEN];
	uint32_t local = ++q->next_id, remote;
	int r;

	mad_init(q, mad, CM_REQ);
	mad_set_local(mad, local);
	mad_set_service_id(mad, service);
	put_be64(mad + 40, 0x0002c90300000003ull); /* LocalCAGUID */
	put_be32(mad + 52, 0x80010000);		 /* LocalQKey */
	put_be32(mad + 56, 0x000400 << 8);		 /* LocalQPN 0x400 */
	put_be32(mad + 68, 0x0abcde << 8);		 /* StartingPSN */
	mad[72] = 0xff, mad[73] = 0xff;		 /* P_Key */
	mad[74] = 3 << 4;			 /* PathMTU 1024 */
	mad[75] = 15 << 4;			 /* MaxCMRetries */
	mad_set_req_gids(mad, q->gid, dest);	 /* the peer's is the only place naming it */
	mad[117] = 64;				 /* HopLimit */

	r = exchange(q, dest, mad, want_rep, 2, false, &in);
	if (r < 0)
		return r;
	memcpy(peer, in.umad.hdr.addr.gid, IB_GID_LEN);
	if (memcmp(peer, dest, IB_GID_LEN) != 0) {
		fprintf(stderr, "[%s] the answer came from %s, not from %s\n", q->name,
			gid_str(peer), gid_str(dest));
		return -EPROTO;
	}
	if (mad_attr(in.umad.mad) == CM_REJ) {
		printf("[%s] connection %u rejected, reason %u\n", q->name, local,
		       mad_rej_reason(in.umad.mad));
		return 1;
	}
	remote = mad_local(in.umad.mad);

	/* RTU and DREQ name no destination at all: the daemon's session does. */
	mad_init(q, mad, CM_RTU);
	mad_set_local(mad, local);
	mad_set_remote(mad, remote);
	r = send_mad(q, dest, mad);
	if (r < 0)
		return r;
	printf("[%s] connection %u established with %s (their comm id 0x%08x)\n", q->name, local,
	       gid_str(dest), remote);
	if (q->hold_ms)
		hold(q->hold_ms);

	mad_init(q, mad, CM_DREQ);
	mad_set_local(mad, local);
	mad_set_remote(mad, remote);
	r = exchange(q, dest, mad, want_drep, 1, false, &in);
	if (r < 0)
		return r;
	printf("[%s] connection %u closed\n", q->name, local);
	return 0;
}

static int do_sidr(struct qclient *q, const uint8_t dest_ip[4], uint64_t service)
{
	static const unsigned want[] = { CM_SIDR_REP };
	struct rdmacm_mux_msg in;
	uint8_t mad[256], dest[IB_GID_LEN] = { [10] = 0xff, [11] = 0xff };
	int r;

	memcpy(dest + 12, dest_ip, 4);
	mad_init(q, mad, CM_SIDR_REQ);
	mad_set_local(mad, ++q->next_id); /* RequestID */
	mad[28] = 0xff, mad[29] = 0xff; /* P_Key */
	mad_set_service_id(mad, service);
	/* rdma_cm's cma_hdr: version 0, IPv4, port, src and dst addresses. */
	mad[OFF_CMA_HDR + 0] = 0;
	mad[OFF_CMA_HDR + 1] = 4 << 4;
	mad[OFF_CMA_HDR + 2] = (uint8_t)(service >> 8);
	mad[OFF_CMA_HDR + 3] = (uint8_t)service;
	memcpy(mad + OFF_CMA_HDR + 16, q->gid + 12, 4); /* src IPv4 (bytes 56..59) */
	memcpy(mad + OFF_CMA_HDR + 32, dest_ip, 4);	/* dst IPv4 (bytes 72..75) */
	r = exchange(q, dest, mad, want, 1, true, &in);
	if (r < 0)
		return r;
	if (memcmp(in.umad.hdr.addr.gid, dest, IB_GID_LEN) != 0) {
		fprintf(stderr, "[%s] the SIDR_REP came from %s, not from %s\n", q->name,
			gid_str(in.umad.hdr.addr.gid), gid_str(dest));
		return -EPROTO;
	}
	printf("[%s] SIDR resolved: status %u, QPN 0x%06x, Q_Key 0x%08x\n", q->name,
	       in.umad.mad[28], get_be32(in.umad.mad + 32) >> 8, get_be32(in.umad.mad + 44));
	return 0;
}

/* The REQ of (@peer_gid, @peer_id) as answered before, or NULL. */
static struct answered *find_answered(struct qclient *q, const uint8_t peer_gid[IB_GID_LEN],
				      uint32_t peer_id)
{
	for (unsigned i = 0; i < q->n_answered && i < MAX_ANSWERED; i++)
		if (q->answered[i].peer_id == peer_id &&
		    memcmp(q->answered[i].peer_gid, peer_gid, IB_GID_LEN) == 0)
			return &q->answered[i];
	return NULL;
}

/*
 * Our comm id for the REQ of (@peer_gid, @peer_id): a new one, or the one we
 * answered it with before, so that a retransmitted REQ (the peer missed
 * our REP) gets the same REP again, as a real CM does.
 */
static uint32_t answer_id(struct qclient *q, const uint8_t peer_gid[IB_GID_LEN], uint32_t peer_id)
{
	struct answered *a = find_answered(q, peer_gid, peer_id);

	if (a) {
		printf("[%s] REQ 0x%08x again: answering with comm 0x%08x again\n", q->name,
		       peer_id, a->our_id);
		return a->our_id;
	}
	a = &q->answered[q->n_answered++ % MAX_ANSWERED];
	memcpy(a->peer_gid, peer_gid, IB_GID_LEN);
	a->peer_id = peer_id;
	a->our_id = ++q->next_id;
	return a->our_id;
}

/* Answer like the pingpong server; every reply names our own GID (C1). */
static int do_serve(struct qclient *q, int count, int timeout_s)
{
	int done = 0;

	while (done < count) {
		struct rdmacm_mux_msg in;
		uint8_t mad[256];
		const uint8_t *im = in.umad.mad;
		uint32_t peer;
		int r = recv_mad(q, &in, timeout_s * 1000);

		if (r == -ETIMEDOUT) {
			fprintf(stderr, "[%s] waiting for peers: %s\n", q->name, strerror(-r));
			return r;
		}
		if (r < 0)
			return r;
		peer = mad_local(im);
		switch (mad_attr(im)) {
		case CM_REQ:
			mad_init(q, mad, CM_REP);
			mad_set_tid(mad, mad_tid(im)); /* a reply copies the TID */
			mad_set_local(mad, answer_id(q, in.umad.hdr.addr.gid, peer));
			mad_set_remote(mad, peer);
			put_be32(mad + 32, 0x80010000);		/* LocalQKey */
			put_be32(mad + 36, 0x000500 << 8);		/* LocalQPN 0x500 */
			put_be32(mad + 44, 0x0fedcb << 8);		/* StartingPSN */
			put_be64(mad + 52, 0x0002c90300000004ull); /* LocalCAGUID */
			r = send_mad(q, in.umad.hdr.addr.gid, mad);
			break;
		case CM_RTU:
			printf("[%s] connection 0x%08x established\n", q->name,
			       mad_remote(im));
			break;
		case CM_DREQ:
			mad_init(q, mad, CM_DREP);
			mad_set_tid(mad, mad_tid(im));
			mad_set_local(mad, mad_remote(im));
			mad_set_remote(mad, peer);
			r = send_mad(q, in.umad.hdr.addr.gid, mad);
			done++;
			break;
		case CM_SIDR_REQ:
			mad_init(q, mad, CM_SIDR_REP);
			mad_set_tid(mad, mad_tid(im));
			mad_set_local(mad, peer);		     /* RequestID echoed */
			mad[28] = 0;			     /* Status: success */
			mad_set_sidr_rep_qpn(mad, 0x000600);	     /* QPN 0x600 */
			memcpy(mad + 36, im + MAD_OFF_SERVICE_ID, 8); /* ServiceID */
			put_be32(mad + 44, 0x22222222);	     /* Q_Key */
			r = send_mad(q, in.umad.hdr.addr.gid, mad);
			done++;
			break;
		default:
			break;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int connect_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rdmacm-mux-qemu-client -S SOCKET -g GID [-n NAME] [--gid-index N] connect DEST_GID [-c N] [--service SID] [--hold MS (SIGUSR1 ends it)] [--tries N]\n"
		"       rdmacm-mux-qemu-client -S SOCKET -g GID [-n NAME] [--gid-index N] serve [-c N] [-t SECONDS]\n"
		"       rdmacm-mux-qemu-client -S SOCKET -g GID [-n NAME] [--gid-index N] sidr DEST_IPV4 [--service SID]\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "gid", required_argument, NULL, 'g' },
		{ "name", required_argument, NULL, 'n' },
		{ "count", required_argument, NULL, 'c' },
		{ "service", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "gid-index", required_argument, NULL, 'i' },
		{ "hold", required_argument, NULL, 'H' },
		{ "tries", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct qclient q = { .name = "qemu", .fd = -1, .max_tries = MAX_TRIES };
	const char *socket_path = NULL, *gid = NULL, *mode;
	uint64_t service = 0x0000000001064e20ull; /* rdma_cm TCP port 20000 */
	int count = 1, timeout_s = 30, opt, r;
	uint8_t dest[IB_GID_LEN];

	while ((opt = getopt_long(argc, argv, "S:g:n:c:s:t:i:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'S': socket_path = optarg; break;
		case 'g': gid = optarg; break;
		case 'n': q.name = optarg; break;
		case 'c': count = atoi(optarg); break;
		case 's': service = strtoull(optarg, NULL, 0); break;
		case 't': timeout_s = atoi(optarg); break;
		case 'i': q.gid_index = (uint8_t)atoi(optarg); break;
		case 'H': q.hold_ms = (unsigned)atoi(optarg); break;
		case 'T': q.max_tries = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!socket_path || !gid || optind >= argc || count < 1 || timeout_s < 1 || q.max_tries < 1 ||
	    inet_pton(AF_INET6, gid, q.gid) != 1) {
		usage(stderr);
		return 2;
	}
	mode = argv[optind];
	if (strcmp(mode, "connect") == 0) {
		if (optind + 1 >= argc || inet_pton(AF_INET6, argv[optind + 1], dest) != 1) {
			usage(stderr);
			return 2;
		}
	} else if (strcmp(mode, "sidr") == 0) {
		if (optind + 1 >= argc || inet_pton(AF_INET, argv[optind + 1], dest) != 1) {
			usage(stderr);
			return 2;
		}
	} else if (strcmp(mode, "serve") != 0) {
		usage(stderr);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (q.hold_ms) {
		struct sigaction sa = { .sa_handler = end_hold };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR1, &sa, NULL);
	}

	q.fd = connect_socket(socket_path);
	if (q.fd < 0) {
		fprintf(stderr, "[%s] cannot connect to %s: %s\n", q.name, socket_path,
			strerror(-q.fd));
		return 1;
	}
	q.tid = (uint32_t)getpid() << 8;
	r = gid_op(&q, RDMACM_MUX_OP_CODE_REG);
	if (r == 0) {
		if (strcmp(mode, "serve") == 0)
			r = do_serve(&q, count, timeout_s);
		else if (strcmp(mode, "connect") == 0)
			for (int i = 0; i < count && r >= 0; i++)
				r = do_connect(&q, dest, service);
		else
			r = do_sidr(&q, dest, service);
		if (r == 1)
			r = 0; /* a rejection is an answer too */
		/* QEMU unregisters when the guest removes the GID. */
		if (r != -EPROTO && gid_op(&q, RDMACM_MUX_OP_CODE_UNREG) < 0)
			r = -EIO;
	}
	close(q.fd);
	return r < 0 ? 1 : 0;
}
