/* SPDX-License-Identifier: MIT */
/*
 * rdmacm-mux-pingpong: a small CM endpoint built on librdmacm-mux.
 *
 * It plays the part of a VM's CM: it registers its GID with the daemon and
 * then either serves (answers REQ with REP or REJ, DREQ with DREP and
 * SIDR_REQ with SIDR_REP) or connects (REQ, REP, RTU, then DREQ, DREP), or
 * sends a SIDR query. It is meant to be read and copied: everything it
 * needs from the CM wire format is in this file.
 *
 *   rdmacm-mux-pingpong -S SOCKET -g GID [-n NAME] serve [-c N] [--reject SID]
 *   rdmacm-mux-pingpong -S SOCKET -g GID [-n NAME] connect DEST_GID [-c N] [--service SID]
 *   rdmacm-mux-pingpong -S SOCKET -g GID [-n NAME] sidr DEST_GID [--service SID]
 *
 * Build: cc -o pingpong rdmacm-mux-pingpong.c $(pkg-config --cflags --libs rdmacm-mux)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdmacm-mux.h>

/* CM attribute ids and the offsets used here (IBTA vol 1, ch. 12). */
enum {
	ATTR_REQ = 0x10, ATTR_REJ = 0x12, ATTR_REP = 0x13, ATTR_RTU = 0x14,
	ATTR_DREQ = 0x15, ATTR_DREP = 0x16, ATTR_SIDR_REQ = 0x17, ATTR_SIDR_REP = 0x18,
};
#define OFF_LOCAL_ID 24
#define OFF_REMOTE_ID 28
#define OFF_SERVICE_ID 32
#define REJ_REASON_INVALID_SERVICE_ID 8

#define RETRY_MS 1000
#define MAX_TRIES 5

struct endpoint {
	const char *name;
	struct rdmacm_mux *mux;
	uint8_t gid[16];
	uint32_t next_id;
	uint32_t tid;
};

static void put32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return ntohl(v);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint64_t get64(const uint8_t *p)
{
	return ((uint64_t)get32(p) << 32) | get32(p + 4);
}

static const char *attr_name(unsigned attr)
{
	static const char *const names[] = { "REQ", "MRA", "REJ", "REP", "RTU", "DREQ",
					     "DREP", "SIDR_REQ", "SIDR_REP", "LAP", "APR" };
	return attr >= 0x10 && attr <= 0x1a ? names[attr - 0x10] : "?";
}

static const char *gid_str(const uint8_t gid[16])
{
	static char buf[4][INET6_ADDRSTRLEN];
	static int i;

	i = (i + 1) % 4;
	return inet_ntop(AF_INET6, gid, buf[i], sizeof(buf[i]));
}

/* A CM MAD header: base version 1, class 0x07, version 2, method Send. */
static void mad_init(struct endpoint *ep, uint8_t mad[256], unsigned attr)
{
	memset(mad, 0, 256);
	mad[0] = 1;
	mad[1] = 0x07;
	mad[2] = 2;
	mad[3] = 0x03;
	put64(mad + 8, ++ep->tid);
	mad[16] = (uint8_t)(attr >> 8);
	mad[17] = (uint8_t)attr;
}

static int send_mad(struct endpoint *ep, const uint8_t dest[16], const uint8_t mad[256])
{
	struct rdmacm_mux_mad_addr addr = { 0 };
	struct rdmacm_mux_response resp;
	uint32_t ticket;
	int r;

	addr.qpn = htonl(1);
	addr.grh_present = 1;
	addr.hop_limit = 64;
	memcpy(addr.gid, dest, 16);
	r = rdmacm_mux_send_mad(ep->mux, ep->gid, &addr, mad, 256, &ticket);
	if (r == 0)
		r = rdmacm_mux_wait(ep->mux, ticket, 5000, &resp);
	if (r == 0)
		r = resp.error;
	if (r < 0)
		fprintf(stderr, "[%s] sending %s failed: %s (%s)\n", ep->name,
			attr_name(mad[17]), strerror(-r), rdmacm_mux_last_error(ep->mux));
	else
		printf("[%s] -> %-8s to %s  comm 0x%08x\n", ep->name, attr_name(mad[17]),
		       gid_str(dest), get32(mad + OFF_LOCAL_ID));
	return r;
}

/* Wait for a MAD, up to @timeout_ms; 0 with *in filled, or -ETIMEDOUT. */
static int recv_mad(struct endpoint *ep, struct rdmacm_mux_inbound *in, int timeout_ms)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct pollfd pfd = { rdmacm_mux_get_fd(ep->mux), rdmacm_mux_get_events(ep->mux), 0 };
		int r = rdmacm_mux_recv_mad(ep->mux, in), left;

		if (r == 0) {
			printf("[%s] <- %-8s from %s  comm 0x%08x remote 0x%08x\n", ep->name,
			       attr_name(in->mad[17]), gid_str(in->addr.gid),
			       get32(in->mad + OFF_LOCAL_ID), get32(in->mad + OFF_REMOTE_ID));
			return 0;
		}
		if (r != -EAGAIN)
			return r;
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = timeout_ms - (int)((now.tv_sec - start.tv_sec) * 1000 +
					  (now.tv_nsec - start.tv_nsec) / 1000000);
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, left) < 0 && errno != EINTR)
			return -errno;
		r = rdmacm_mux_process(ep->mux);
		if (r < 0 && r != -ENOBUFS)
			return r;
	}
}

/* Send @mad until an answer of one of @want arrives for our comm id. */
static int exchange(struct endpoint *ep, const uint8_t dest[16], const uint8_t *mad,
		    const unsigned *want, int nwant, bool by_request_id,
		    struct rdmacm_mux_inbound *in)
{
	uint32_t id = get32(mad + OFF_LOCAL_ID);

	for (int tries = 0; tries < MAX_TRIES; tries++) {
		int r = send_mad(ep, dest, mad);

		if (r < 0)
			return r;
		while ((r = recv_mad(ep, in, RETRY_MS)) == 0) {
			uint32_t echo = get32(in->mad + (by_request_id ? OFF_LOCAL_ID : OFF_REMOTE_ID));
			for (int i = 0; i < nwant; i++)
				if (in->mad[17] == want[i] && echo == id)
					return 0;
		}
		if (r != -ETIMEDOUT)
			return r;
		printf("[%s] no answer, sending %s again\n", ep->name, attr_name(mad[17]));
	}
	return -ETIMEDOUT;
}

static int do_connect(struct endpoint *ep, const uint8_t dest[16], uint64_t service)
{
	static const unsigned want_rep[] = { ATTR_REP, ATTR_REJ };
	static const unsigned want_drep[] = { ATTR_DREP };
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	uint32_t local = ++ep->next_id, remote;
	int r;

	mad_init(ep, mad, ATTR_REQ);
	put32(mad + OFF_LOCAL_ID, local);
	put64(mad + OFF_SERVICE_ID, service);
	put64(mad + 40, 0x0002c90300000001ull); /* LocalCAGUID */
	put32(mad + 52, 0x80010000);		 /* LocalQKey */
	put32(mad + 56, 0x000100 << 8);		 /* LocalQPN 0x100 */
	put32(mad + 68, 0x123456 << 8);		 /* StartingPSN */
	mad[72] = 0xff, mad[73] = 0xff;		 /* P_Key */
	mad[74] = 3 << 4;			 /* PathMTU 1024 */
	mad[75] = 15 << 4;			 /* MaxCMRetries */
	memcpy(mad + 80, ep->gid, 16);		 /* Primary LocalPortGID */
	memcpy(mad + 96, dest, 16);		 /* Primary RemotePortGID */
	mad[117] = 64;				 /* HopLimit */

	r = exchange(ep, dest, mad, want_rep, 2, false, &in);
	if (r < 0)
		return r;
	if (in.mad[17] == ATTR_REJ) {
		printf("[%s] connection %u rejected, reason %u\n", ep->name, local,
		       (in.mad[34] << 8) | in.mad[35]);
		return 1;
	}
	remote = get32(in.mad + OFF_LOCAL_ID);

	mad_init(ep, mad, ATTR_RTU);
	put32(mad + OFF_LOCAL_ID, local);
	put32(mad + OFF_REMOTE_ID, remote);
	r = send_mad(ep, dest, mad);
	if (r < 0)
		return r;
	printf("[%s] connection %u established with %s (their comm id 0x%08x)\n", ep->name,
	       local, gid_str(dest), remote);

	mad_init(ep, mad, ATTR_DREQ);
	put32(mad + OFF_LOCAL_ID, local);
	put32(mad + OFF_REMOTE_ID, remote);
	r = exchange(ep, dest, mad, want_drep, 1, false, &in);
	if (r < 0)
		return r;
	printf("[%s] connection %u closed\n", ep->name, local);
	return 0;
}

static int do_sidr(struct endpoint *ep, const uint8_t dest[16], uint64_t service)
{
	static const unsigned want[] = { ATTR_SIDR_REP };
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	int r;

	mad_init(ep, mad, ATTR_SIDR_REQ);
	put32(mad + 24, ++ep->next_id); /* RequestID */
	mad[28] = 0xff, mad[29] = 0xff; /* P_Key */
	put64(mad + OFF_SERVICE_ID, service);
	r = exchange(ep, dest, mad, want, 1, true, &in);
	if (r < 0)
		return r;
	printf("[%s] SIDR resolved: status %u, QPN 0x%06x, Q_Key 0x%08x\n", ep->name, in.mad[28],
	       get32(in.mad + 32) >> 8, get32(in.mad + 44));
	return 0;
}

/* The connections this server accepted, so that a repeated REQ (the peer
 * did not see our REP in time) gets the same answer, not a new one. */
struct accepted {
	uint8_t peer_gid[16];
	uint32_t peer_id;
	uint32_t our_id;
};

static uint32_t accepted_lookup(const struct accepted *a, int n, const uint8_t gid[16],
				uint32_t peer_id)
{
	for (int i = 0; i < n; i++)
		if (a[i].peer_id == peer_id && memcmp(a[i].peer_gid, gid, 16) == 0)
			return a[i].our_id;
	return 0;
}

static int do_serve(struct endpoint *ep, int count, uint64_t reject_service, int timeout_s)
{
	struct accepted accepted[256];
	int done = 0, n_accepted = 0;
	unsigned next_slot = 0;

	while (done < count) {
		struct rdmacm_mux_inbound in;
		uint8_t mad[256];
		uint32_t peer, ours;
		int r = recv_mad(ep, &in, timeout_s * 1000);

		if (r < 0) {
			fprintf(stderr, "[%s] waiting for peers: %s\n", ep->name, strerror(-r));
			return r;
		}
		peer = get32(in.mad + OFF_LOCAL_ID);
		switch (in.mad[17]) {
		case ATTR_REQ:
			if (get64(in.mad + OFF_SERVICE_ID) == reject_service) {
				mad_init(ep, mad, ATTR_REJ);
				put32(mad + OFF_REMOTE_ID, peer);
				mad[32] = 0 << 6; /* MessageRejected: REQ */
				mad[35] = REJ_REASON_INVALID_SERVICE_ID;
				done++;
			} else {
				ours = accepted_lookup(accepted, n_accepted, in.addr.gid, peer);
				if (!ours) {
					ours = ++ep->next_id;
					struct accepted *slot = &accepted[next_slot++ % 256];
					memcpy(slot->peer_gid, in.addr.gid, 16);
					slot->peer_id = peer;
					slot->our_id = ours;
					if (n_accepted < 256)
						n_accepted++;
				}
				mad_init(ep, mad, ATTR_REP);
				put32(mad + OFF_LOCAL_ID, ours);
				put32(mad + OFF_REMOTE_ID, peer);
				put32(mad + 32, 0x80010000);	   /* LocalQKey */
				put32(mad + 36, 0x000200 << 8);	   /* LocalQPN 0x200 */
				put32(mad + 44, 0x654321 << 8);	   /* StartingPSN */
				put64(mad + 52, 0x0002c90300000002ull); /* LocalCAGUID */
			}
			memcpy(mad + 8, in.mad + 8, 8); /* a reply copies the TID */
			r = send_mad(ep, in.addr.gid, mad);
			break;
		case ATTR_RTU:
			printf("[%s] connection 0x%08x established\n", ep->name,
			       get32(in.mad + OFF_REMOTE_ID));
			r = 0;
			break;
		case ATTR_DREQ:
			ours = get32(in.mad + OFF_REMOTE_ID);
			mad_init(ep, mad, ATTR_DREP);
			memcpy(mad + 8, in.mad + 8, 8);
			put32(mad + OFF_LOCAL_ID, ours);
			put32(mad + OFF_REMOTE_ID, peer);
			r = send_mad(ep, in.addr.gid, mad);
			done++;
			break;
		case ATTR_SIDR_REQ:
			mad_init(ep, mad, ATTR_SIDR_REP);
			memcpy(mad + 8, in.mad + 8, 8);
			put32(mad + 24, peer);			/* RequestID echoed */
			mad[28] = 0;				/* Status: success */
			put32(mad + 32, 0x000300 << 8);		/* QPN 0x300 */
			memcpy(mad + 36, in.mad + OFF_SERVICE_ID, 8); /* ServiceID */
			put32(mad + 44, 0x01234567);		/* Q_Key: rdma_cm's UDP default */
			r = send_mad(ep, in.addr.gid, mad);
			done++;
			break;
		default:
			r = 0;
			break;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: rdmacm-mux-pingpong -S SOCKET -g GID [-n NAME] serve [-c N] [--reject SID] [-t SECONDS]\n"
		   "       rdmacm-mux-pingpong -S SOCKET -g GID [-n NAME] connect DEST_GID [-c N] [--service SID]\n"
		   "       rdmacm-mux-pingpong -S SOCKET -g GID [-n NAME] sidr DEST_GID [--service SID]\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 'S' }, { "gid", required_argument, NULL, 'g' },
		{ "name", required_argument, NULL, 'n' },   { "count", required_argument, NULL, 'c' },
		{ "service", required_argument, NULL, 's' }, { "reject", required_argument, NULL, 'r' },
		{ "timeout", required_argument, NULL, 't' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct endpoint ep = { .name = "pingpong" };
	const char *socket_path = NULL, *gid = NULL, *mode;
	uint64_t service = 0x0000000001064e20ull; /* rdma_cm TCP port 20000 */
	uint64_t reject = 0x0000000001060bad;
	int count = 1, timeout_s = 30, opt, r = 0;
	uint8_t dest[16];
	struct rdmacm_mux_response resp;
	uint32_t ticket;

	while ((opt = getopt_long(argc, argv, "S:g:n:c:s:r:t:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'S': socket_path = optarg; break;
		case 'g': gid = optarg; break;
		case 'n': ep.name = optarg; break;
		case 'c': count = atoi(optarg); break;
		case 's': service = strtoull(optarg, NULL, 0); break;
		case 'r': reject = strtoull(optarg, NULL, 0); break;
		case 't': timeout_s = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!socket_path || !gid || optind >= argc || count < 1 ||
	    inet_pton(AF_INET6, gid, ep.gid) != 1) {
		usage(stderr);
		return 2;
	}
	mode = argv[optind];
	if (strcmp(mode, "serve") != 0 &&
	    (optind + 1 >= argc || inet_pton(AF_INET6, argv[optind + 1], dest) != 1)) {
		usage(stderr);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	r = rdmacm_mux_open(socket_path, 0, 5000, &ep.mux);
	if (r < 0) {
		fprintf(stderr, "[%s] cannot connect to %s: %s\n", ep.name, socket_path,
			rdmacm_mux_last_error(NULL));
		return 1;
	}
	r = rdmacm_mux_register_gid(ep.mux, ep.gid, &ticket);
	if (r == 0)
		r = rdmacm_mux_wait(ep.mux, ticket, 5000, &resp);
	if (r == 0)
		r = resp.error;
	if (r < 0) {
		fprintf(stderr, "[%s] cannot register %s: %s\n", ep.name, gid, strerror(-r));
		rdmacm_mux_close(ep.mux);
		return 1;
	}
	printf("[%s] registered %s\n", ep.name, gid);

	if (strcmp(mode, "serve") == 0) {
		r = do_serve(&ep, count, reject, timeout_s);
	} else if (strcmp(mode, "connect") == 0) {
		for (int i = 0; i < count && r >= 0; i++)
			r = do_connect(&ep, dest, service);
		if (r == 1)
			r = 0; /* a rejection is an answer too */
	} else if (strcmp(mode, "sidr") == 0) {
		r = do_sidr(&ep, dest, service);
	} else {
		usage(stderr);
		r = -EINVAL;
	}
	rdmacm_mux_close(ep.mux);
	return r < 0 ? 1 : 0;
}
