/* SPDX-License-Identifier: MIT */
/*
 * old-client: a librdmacm-mux client written against the 1.0 API, and
 * against 1.1's reconnection where the header has it. It is never built
 * against this tree's header: build-old-client.sh compiles it with the
 * header of an old release, taken from git history, and links it with that
 * release's library, so the binary is what a program built then would be.
 * test-old-clients.c runs it against today's library and the real daemon.
 *
 *   old-client SOCKET OWN_GID PEER_GID [reconnect]
 *
 * It registers OWN_GID, sends a CM REQ to PEER_GID, receives the REP the
 * peer answers with, and checks its counters (query_stats: the 1.0 answer
 * struct with the wire's stats in it). With "reconnect" (a 1.1 header
 * only) it then waits for the daemon to go away and come back, and for a
 * new REQ from the peer. Each step prints a line the test waits for; the
 * last names the librdmacm-mux it ran with. Exit 0 when all went as it
 * should. The CM MADs come from the tests' cm-mad.h, which is libc-only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmacm-mux.h>

#include "cm-mad.h"

#define TIMEOUT_MS 10000
#define COMM_ID 0x0c1d0001u

static struct rdmacm_mux *m;

static void die(const char *what, int r)
{
	printf("failed: %s: %d (%s)\n", what, r, m ? rdmacm_mux_last_error(m) : "");
	exit(1);
}

static void step(const char *line)
{
	printf("%s\n", line);
	fflush(stdout);
}

static void wait_ok(uint32_t ticket, const char *what)
{
	struct rdmacm_mux_response resp;
	int r = rdmacm_mux_wait(m, ticket, TIMEOUT_MS, &resp);

	if (r < 0)
		die(what, r);
	if (resp.ticket != ticket)
		die("answer to another ticket", (int)resp.ticket);
	if (resp.error)
		die(what, resp.error);
}

/* One turn of the event loop: poll up to 100 ms, then process. @waited
 * adds up the turns; past @limit_ms the probe gives up waiting for @what. */
static void turn(int *waited, int limit_ms, const char *what)
{
	struct pollfd pfd = { rdmacm_mux_get_fd(m), rdmacm_mux_get_events(m), 0 };
	int timeout = 100, r;

#ifdef RDMACM_MUX_OPEN_RECONNECT
	if (rdmacm_mux_get_timeout(m, &timeout) < 0)
		die("get_timeout", -EINVAL);
	if (timeout < 0 || timeout > 100)
		timeout = 100;
#endif
	if (*waited >= limit_ms)
		die(what, -ETIMEDOUT);
	if (poll(&pfd, 1, timeout) < 0)
		die("poll", -errno);
	*waited += 100;
	r = rdmacm_mux_process(m);
	if (r < 0 && r != -ENOBUFS)
		die("process", r);
}

/* Poll, process and take the next inbound MAD, which must be @attr from
 * @peer to @own; a REP must answer our REQ. */
static void expect_mad(const uint8_t own[16], const uint8_t peer[16], uint16_t attr)
{
	struct rdmacm_mux_inbound in;
	int waited = 0, r;

	while ((r = rdmacm_mux_recv_mad(m, &in)) == -EAGAIN)
		turn(&waited, TIMEOUT_MS, "no MAD came");
	if (r < 0)
		die("recv_mad", r);
	if (memcmp(in.local_gid, own, 16) || memcmp(in.addr.gid, peer, 16))
		die("a MAD for someone else or from someone else", 0);
	if (in.mad_len != 256 || mad_attr(in.mad) != attr)
		die("not the MAD expected", (int)in.mad_len);
	/* The daemon maps the peer's answer back to our comm id. */
	if (attr == CM_REP && mad_remote(in.mad) != COMM_ID)
		die("remote comm id", (int)mad_remote(in.mad));
	printf("received %s\n", mad_attr_name(attr));
	fflush(stdout);
}

#ifdef RDMACM_MUX_OPEN_RECONNECT
static void expect_event(uint32_t type)
{
	struct rdmacm_mux_event ev;
	int waited = 0, r;

	while ((r = rdmacm_mux_next_event(m, &ev)) == -EAGAIN)
		turn(&waited, 3 * TIMEOUT_MS, "no event came");
	if (r < 0)
		die("next_event", r);
	if (ev.type != type)
		die("another event", (int)ev.type);
	if (type == RDMACM_MUX_EVENT_RECONNECTED && (ev.gids_registered != 1 || ev.gids_failed))
		die("GIDs registered again", (int)ev.gids_registered);
	printf("event %u\n", type);
	fflush(stdout);
}
#endif

/* The librdmacm-mux.so this process mapped. */
static void print_loaded(void)
{
	char line[4096];
	FILE *maps = fopen("/proc/self/maps", "re");

	while (maps && fgets(line, sizeof(line), maps)) {
		char *path = strchr(line, '/');

		if (path && strstr(path, "librdmacm-mux.so")) {
			printf("loaded: %s", path);
			break;
		}
	}
	if (maps)
		fclose(maps);
}

int main(int argc, char **argv)
{
	struct rdmacm_mux_mad_addr addr;
	struct rdmacm_mux_response resp;
	uint8_t own[16], peer[16], mad[256];
	unsigned flags = 0;
	uint32_t ticket;
	int r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((argc != 4 && argc != 5) || inet_pton(AF_INET6, argv[2], own) != 1 ||
	    inet_pton(AF_INET6, argv[3], peer) != 1) {
		fprintf(stderr, "usage: old-client SOCKET OWN_GID PEER_GID [reconnect]\n");
		return 2;
	}
	if (argc == 5) {
#ifdef RDMACM_MUX_OPEN_RECONNECT
		flags |= RDMACM_MUX_OPEN_RECONNECT;
#else
		step("failed: this header has no reconnection");
		return 1;
#endif
	}

	r = rdmacm_mux_open(argv[1], flags, TIMEOUT_MS, &m);
	if (r < 0) {
		printf("failed: open: %d (%s)\n", r, rdmacm_mux_last_error(NULL));
		return 1;
	}
	if (!(rdmacm_mux_get_capabilities(m) & RDMACM_MUX_CAP_CLIENT_STATS))
		die("the daemon granted no CLIENT_STATS", 0);
	r = rdmacm_mux_register_gid(m, own, &ticket);
	if (r < 0)
		die("register", r);
	wait_ok(ticket, "register");
	step("registered");

	mad_build_req(mad, COMM_ID, own, peer, 1);
	memset(&addr, 0, sizeof(addr));
	addr.qpn = htonl(1);
	addr.grh_present = 1;
	addr.hop_limit = 64;
	memcpy(addr.gid, peer, 16);
	r = rdmacm_mux_send_mad(m, own, &addr, mad, sizeof(mad), &ticket);
	if (r < 0)
		die("send_mad", r);
	wait_ok(ticket, "send_mad");
	step("sent");
	expect_mad(own, peer, CM_REP);

	r = rdmacm_mux_query_stats(m, &ticket);
	if (r < 0)
		die("query_stats", r);
	r = rdmacm_mux_wait(m, ticket, TIMEOUT_MS, &resp);
	if (r < 0 || resp.error)
		die("stats", r < 0 ? r : resp.error);
	if (resp.stats.tx_mads != 1 || resp.stats.rx_mads != 1 || resp.stats.gids != 1)
		die("counters", (int)resp.stats.tx_mads);
	printf("stats tx=%llu rx=%llu gids=%u\n", (unsigned long long)resp.stats.tx_mads,
	       (unsigned long long)resp.stats.rx_mads, resp.stats.gids);

#ifdef RDMACM_MUX_OPEN_RECONNECT
	if (flags & RDMACM_MUX_OPEN_RECONNECT) {
		step("restart the daemon");
		expect_event(RDMACM_MUX_EVENT_DISCONNECTED);
		expect_event(RDMACM_MUX_EVENT_RECONNECTED);
		expect_mad(own, peer, CM_REQ);
	}
#endif
	print_loaded();
	rdmacm_mux_close(m);
	step("done");
	return 0;
}
