/* SPDX-License-Identifier: MIT */
/*
 * cm-responder: the passive side of a CM connection, built on librdmacm-mux,
 * good enough for a real guest's ib_cm and rdma_cm (tests/qemu).
 *
 *   cm-responder -S SOCKET -g GID [-t SECONDS]
 *
 * It registers GID with the daemon and, until SIGTERM or the time limit:
 * answers REQ with REP, notes MRA and RTU (the connection is then
 * ESTABLISHED), answers DREQ with DREP and SIDR_REQ with SIDR_REP. One line
 * per MAD on stdout; a summary line at exit.
 *
 * Why not examples/rdmacm-mux-pingpong: this responder must run until the
 * guest is done rather than for a count of connections, and it states in
 * one place what a real rdma_cm peer needs: the guest's rdma_cm has already
 * given its UD QP the rdma_cm Q_Key (0x01234567) when its SIDR_REP arrives
 * and turns any other Q_Key into RDMA_CM_EVENT_ADDR_ERROR (cma_set_qkey),
 * and a REQ retried by the guest must get the same REP again, not a second
 * connection.
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
#include <time.h>

#include <rdmacm-mux.h>

#include "cm-mad.h"
#include "mux-send.h"
#include "rdmacm-mux-bytes.h"

/* Byte offsets inside the 256-byte MAD (the CM message starts at 24) that
 * cm-mad.h has no name for. */
#define OFF_REQ_LOCAL_QPN 56
#define OFF_REQ_STARTING_PSN 68
#define OFF_REP_LOCAL_QKEY 32
#define OFF_REP_LOCAL_QPN 36
#define OFF_REP_STARTING_PSN 44
#define OFF_REP_RESP_RESOURCES 48
#define OFF_REP_INIT_DEPTH 49
#define OFF_REP_ACK_DELAY_FAILOVER 50
#define OFF_REP_RNR_RETRY 51
#define OFF_REP_CA_GUID 52
#define OFF_SIDR_STATUS 28
#define OFF_SIDR_REP_SERVICE_ID 36
#define OFF_SIDR_REP_QKEY 44

/* What a real rdma_cm UD endpoint uses (RDMA_UDP_QKEY in the kernel). */
#define RDMA_CM_UDP_QKEY 0x01234567u
/* The QPNs and PSN we claim. Valid numbers; no such QP exists. */
#define OUR_RC_QPN 0x000211u
#define OUR_UD_QPN 0x000212u
#define OUR_PSN 0x5a5a5au
#define OUR_CA_GUID 0x0002c903000000aaull

#define MAX_CONNS 32

struct conn {
	bool used;
	uint8_t peer_gid[IB_GID_LEN];
	uint32_t peer_id; /* the peer's comm id */
	uint32_t our_id;
	uint8_t rep[RDMACM_MUX_MAD_SIZE]; /* sent again for a retried REQ */
};

struct responder {
	struct rdmacm_mux *mux;
	uint8_t gid[IB_GID_LEN];
	uint32_t next_id;
	struct conn conns[MAX_CONNS];
	unsigned n_sidr, n_req, n_mra, n_rtu, n_dreq, n_rej, n_other;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char *gid_str(const uint8_t gid[IB_GID_LEN])
{
	static char buf[2][INET6_ADDRSTRLEN];
	static int i;

	i ^= 1;
	return inet_ntop(AF_INET6, gid, buf[i], sizeof(buf[i]));
}

/* A reply to @req: the request's TID, everything but the header zero. */
static void reply_init(uint8_t mad[RDMACM_MUX_MAD_SIZE], const uint8_t *req, uint16_t attr)
{
	mad_build(mad, attr, 0, 0, mad_tid(req));
}

static int send_to(struct responder *rs, const uint8_t dest[IB_GID_LEN], const uint8_t *mad)
{
	int verdict = 0;
	int r = mux_send_mad_wait(rs->mux, rs->gid, dest, mad, RDMACM_MUX_MAD_SIZE, 5000, &verdict);

	if (r == 0)
		r = verdict;
	if (r < 0)
		printf("send of attr 0x%02x to %s failed: %s (%s)\n", mad_attr(mad), gid_str(dest),
		       strerror(-r), rdmacm_mux_last_error(rs->mux));
	return r;
}

/* The connection a peer's REQ started (its comm id and GID). */
static struct conn *conn_find_peer(struct responder *rs, const uint8_t gid[IB_GID_LEN], uint32_t peer_id)
{
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = &rs->conns[i];

		if (c->used && c->peer_id == peer_id && memcmp(c->peer_gid, gid, IB_GID_LEN) == 0)
			return c;
	}
	return NULL;
}

/* The connection with our comm id @our_id. */
static struct conn *conn_find_ours(struct responder *rs, uint32_t our_id)
{
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = &rs->conns[i];

		if (c->used && c->our_id == our_id)
			return c;
	}
	return NULL;
}

static int on_req(struct responder *rs, const struct rdmacm_mux_inbound *in)
{
	uint32_t peer = mad_local(in->mad);
	struct conn *c = conn_find_peer(rs, in->addr.gid, peer);

	if (c) {
		printf("REQ from %s comm 0x%08x (a retry) -> REP again, comm 0x%08x\n",
		       gid_str(in->addr.gid), peer, c->our_id);
		return send_to(rs, in->addr.gid, c->rep);
	}
	for (int i = 0; i < MAX_CONNS && !c; i++)
		if (!rs->conns[i].used)
			c = &rs->conns[i];
	if (!c) {
		printf("REQ from %s comm 0x%08x: no room, ignored\n", gid_str(in->addr.gid), peer);
		return 0;
	}
	c->used = true;
	memcpy(c->peer_gid, in->addr.gid, IB_GID_LEN);
	c->peer_id = peer;
	c->our_id = rs->next_id++;

	reply_init(c->rep, in->mad, CM_REP);
	mad_set_local(c->rep, c->our_id);
	mad_set_remote(c->rep, peer);
	put_be32(c->rep + OFF_REP_LOCAL_QKEY, 0);
	put_be32(c->rep + OFF_REP_LOCAL_QPN, OUR_RC_QPN << 8);
	put_be32(c->rep + OFF_REP_STARTING_PSN, OUR_PSN << 8);
	c->rep[OFF_REP_RESP_RESOURCES] = 0; /* no RDMA reads or atomics */
	c->rep[OFF_REP_INIT_DEPTH] = 0;
	/* Target ACK delay 15 (~134 ms), failover: not supported (1), no E2E flow control. */
	c->rep[OFF_REP_ACK_DELAY_FAILOVER] = (uint8_t)(15 << 3 | 1 << 1);
	c->rep[OFF_REP_RNR_RETRY] = 7 << 5; /* RNR retry count 7, no SRQ */
	put_be64(c->rep + OFF_REP_CA_GUID, OUR_CA_GUID);
	rs->n_req++;
	printf("REQ from %s comm 0x%08x service 0x%016llx QPN 0x%06x PSN 0x%06x"
	       " -> REP comm 0x%08x QPN 0x%06x PSN 0x%06x\n",
	       gid_str(in->addr.gid), peer,
	       (unsigned long long)mad_service_id(in->mad),
	       get_be32(in->mad + OFF_REQ_LOCAL_QPN) >> 8, get_be32(in->mad + OFF_REQ_STARTING_PSN) >> 8,
	       c->our_id, OUR_RC_QPN, OUR_PSN);
	return send_to(rs, in->addr.gid, c->rep);
}

static int on_sidr_req(struct responder *rs, const struct rdmacm_mux_inbound *in)
{
	uint8_t mad[RDMACM_MUX_MAD_SIZE];
	uint32_t request = mad_local(in->mad);

	reply_init(mad, in->mad, CM_SIDR_REP);
	mad_set_local(mad, request);
	mad[OFF_SIDR_STATUS] = 0; /* success */
	mad_set_sidr_rep_qpn(mad, OUR_UD_QPN);
	memcpy(mad + OFF_SIDR_REP_SERVICE_ID, in->mad + MAD_OFF_SERVICE_ID, 8);
	put_be32(mad + OFF_SIDR_REP_QKEY, RDMA_CM_UDP_QKEY);
	rs->n_sidr++;
	printf("SIDR_REQ from %s request 0x%08x service 0x%016llx -> SIDR_REP QPN 0x%06x"
	       " Q_Key 0x%08x\n",
	       gid_str(in->addr.gid), request,
	       (unsigned long long)mad_service_id(in->mad), OUR_UD_QPN,
	       RDMA_CM_UDP_QKEY);
	return send_to(rs, in->addr.gid, mad);
}

static int on_dreq(struct responder *rs, const struct rdmacm_mux_inbound *in)
{
	uint8_t mad[RDMACM_MUX_MAD_SIZE];
	uint32_t peer = mad_local(in->mad), ours = mad_remote(in->mad);
	struct conn *c = conn_find_ours(rs, ours);

	reply_init(mad, in->mad, CM_DREP);
	mad_set_local(mad, ours);
	mad_set_remote(mad, peer);
	rs->n_dreq++;
	printf("DREQ from %s comm 0x%08x for 0x%08x -> DREP, connection %s\n",
	       gid_str(in->addr.gid), peer, ours, c ? "closed" : "unknown (answered anyway)");
	if (c)
		c->used = false;
	return send_to(rs, in->addr.gid, mad);
}

static int handle(struct responder *rs, const struct rdmacm_mux_inbound *in)
{
	uint32_t local = mad_local(in->mad), remote = mad_remote(in->mad);
	struct conn *c;

	switch (mad_attr(in->mad)) {
	case CM_REQ:
		return on_req(rs, in);
	case CM_SIDR_REQ:
		return on_sidr_req(rs, in);
	case CM_DREQ:
		return on_dreq(rs, in);
	case CM_MRA:
		rs->n_mra++;
		printf("MRA from %s comm 0x%08x for 0x%08x (the peer needs more time)\n",
		       gid_str(in->addr.gid), local, remote);
		return 0;
	case CM_RTU:
		c = conn_find_ours(rs, remote);
		rs->n_rtu++;
		printf("RTU from %s comm 0x%08x for 0x%08x -> connection %s\n",
		       gid_str(in->addr.gid), local, remote,
		       c && c->peer_id == local ? "ESTABLISHED" : "unknown");
		return 0;
	case CM_REJ:
		rs->n_rej++;
		printf("REJ from %s comm 0x%08x for 0x%08x reason %u\n", gid_str(in->addr.gid),
		       local, remote, (unsigned)mad_rej_reason(in->mad));
		c = conn_find_ours(rs, remote);
		if (c)
			c->used = false;
		return 0;
	default:
		rs->n_other++;
		printf("attr 0x%02x from %s ignored\n", mad_attr(in->mad), gid_str(in->addr.gid));
		return 0;
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: cm-responder -S SOCKET -g GID [-t SECONDS]\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 'S' }, { "gid", required_argument, NULL, 'g' },
		{ "timeout", required_argument, NULL, 't' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct responder rs = { .next_id = 0x5e000001u };
	const char *socket_path = NULL, *gid = NULL;
	struct rdmacm_mux_response resp;
	struct sigaction sa = { .sa_handler = on_signal };
	struct timespec start, now;
	int timeout_s = 600, opt, r, rc = 0;
	uint32_t ticket;

	while ((opt = getopt_long(argc, argv, "S:g:t:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'S': socket_path = optarg; break;
		case 'g': gid = optarg; break;
		case 't': timeout_s = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!socket_path || !gid || optind != argc || timeout_s < 1 ||
	    inet_pton(AF_INET6, gid, rs.gid) != 1) {
		usage(stderr);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	r = rdmacm_mux_open(socket_path, 0, 5000, &rs.mux);
	if (r < 0) {
		printf("cannot connect to %s: %s\n", socket_path, rdmacm_mux_last_error(NULL));
		return 1;
	}
	r = rdmacm_mux_register_gid(rs.mux, rs.gid, &ticket);
	if (r == 0)
		r = rdmacm_mux_wait(rs.mux, ticket, 5000, &resp);
	if (r == 0)
		r = resp.error;
	if (r < 0) {
		printf("cannot register %s: %s\n", gid, strerror(-r));
		rdmacm_mux_close(rs.mux);
		return 1;
	}
	printf("registered %s on %s\n", gid, socket_path);

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct pollfd pfd = { rdmacm_mux_get_fd(rs.mux), rdmacm_mux_get_events(rs.mux), 0 };
		struct rdmacm_mux_inbound in;

		/* A failed answer is logged by send_to(); the peer retries. */
		while ((r = rdmacm_mux_recv_mad(rs.mux, &in)) == 0)
			(void)handle(&rs, &in);
		if (r != -EAGAIN) {
			printf("connection to the daemon failed: %s\n", strerror(-r));
			rc = 1;
			break;
		}
		if (stop)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= timeout_s) {
			printf("time limit of %d s reached\n", timeout_s);
			break;
		}
		if (poll(&pfd, 1, 500) < 0 && errno != EINTR) {
			printf("poll: %s\n", strerror(errno));
			rc = 1;
			break;
		}
		r = rdmacm_mux_process(rs.mux);
		if (r < 0 && r != -ENOBUFS) {
			printf("connection to the daemon failed: %s\n", strerror(-r));
			rc = 1;
			break;
		}
	}
	printf("summary: sidr_req=%u req=%u mra=%u rtu=%u dreq=%u rej=%u other=%u\n", rs.n_sidr,
	       rs.n_req, rs.n_mra, rs.n_rtu, rs.n_dreq, rs.n_rej, rs.n_other);
	rdmacm_mux_close(rs.mux);
	return rc;
}
