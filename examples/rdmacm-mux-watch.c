/* SPDX-License-Identifier: MIT */
/*
 * rdmacm-mux-watch: the example of librdmacm-mux(3), which shows this file
 * as it is; the build compiles it and an integration test runs it, so the
 * page's code works.
 *
 * It claims one GID and prints what happens: the connection coming and
 * going (the daemon may start after it and restart under it) and the CM
 * MADs routed to the GID, until COUNT of them came.
 *
 *   rdmacm-mux-watch SOCKET GID [COUNT]
 *
 * Build: cc -o watch rdmacm-mux-watch.c $(pkg-config --cflags --libs rdmacm-mux)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmacm-mux.h>

/* What a request was, handed back with its answer (user_data). */
enum { REQ_REGISTER = 1 };

static uint8_t gid[16];
/* The daemon said yes once: from then on the library registers the GID
 * again after each reconnection, until GID_LOST. */
static bool registered;

static void register_gid(struct rdmacm_mux *m)
{
	struct rdmacm_mux_request req = {
		.op_code = RDMACM_MUX_OP_CODE_REG,
		.user_data = REQ_REGISTER,
	};

	memcpy(req.gid, gid, sizeof(gid));
	if (rdmacm_mux_submit(m, &req, NULL) < 0)
		fprintf(stderr, "register: %s\n", rdmacm_mux_last_error(m));
}

static void on_event(struct rdmacm_mux *m, const struct rdmacm_mux_event_ex *ev)
{
	switch (ev->type) {
	case RDMACM_MUX_EVENT_CONNECTED:
		printf("connected, capabilities 0x%llx\n",
		       (unsigned long long)ev->capabilities);
		register_gid(m);
		break;
	case RDMACM_MUX_EVENT_ATTEMPT_FAILED:
		printf("attempt %u failed: %s; next in %d ms\n", ev->attempts,
		       strerror(-ev->error), ev->retry_ms);
		break;
	case RDMACM_MUX_EVENT_DISCONNECTED:
		/* Requests in flight complete with -ECONNRESET. */
		printf("disconnected: %s; next attempt in %d ms\n",
		       strerror(-ev->error), ev->retry_ms);
		break;
	case RDMACM_MUX_EVENT_GID_LOST:
		printf("GID lost: %s\n", strerror(-ev->error));
		registered = false;
		break;
	case RDMACM_MUX_EVENT_RECONNECTED:
		printf("reconnected after %u attempts, %u GIDs registered again\n",
		       ev->attempts, ev->gids_registered);
		if (!registered)
			register_gid(m);
		break;
	default:
		break; /* a later library may report more */
	}
}

static void on_answer(const struct rdmacm_mux_response_ex *r)
{
	if (r->user_data != REQ_REGISTER)
		return;
	if (r->error == -ECONNRESET)
		return; /* the connection broke first: after RECONNECTED */
	if (r->error < 0 && r->error != -EEXIST) {
		printf("register refused: %s\n", strerror(-r->error));
		return;
	}
	registered = true;
	printf("registered\n");
}

int main(int argc, char **argv)
{
	struct rdmacm_mux_open_attr attr = {
		/* Never block, not even for the first connection. */
		.flags = RDMACM_MUX_OPEN_RECONNECT | RDMACM_MUX_OPEN_ASYNC,
	};
	struct rdmacm_mux *m;
	long count = argc > 3 ? strtol(argv[3], NULL, 10) : -1;
	int r;

	if (argc < 3 || inet_pton(AF_INET6, argv[2], gid) != 1) {
		fprintf(stderr, "usage: rdmacm-mux-watch SOCKET GID [COUNT]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	attr.socket_path = argv[1];
	r = rdmacm_mux_open_ex(&attr, &m);
	if (r < 0) {
		fprintf(stderr, "%s\n", rdmacm_mux_last_error(NULL));
		return 1;
	}

	while (count != 0) {
		/* The fd is an epoll fd: POLLIN alone, whatever the socket
		 * behind it waits for. The timeout is optional (the fd also
		 * wakes up when an attempt is due), but cheap. */
		struct pollfd pfd = { .fd = rdmacm_mux_get_fd(m), .events = POLLIN };
		struct rdmacm_mux_response_ex resp;
		struct rdmacm_mux_inbound_ex in;
		struct rdmacm_mux_event_ex ev;
		char from[INET6_ADDRSTRLEN];
		int timeout;

		rdmacm_mux_get_timeout(m, &timeout);
		if (poll(&pfd, 1, timeout) < 0 && errno != EINTR)
			break;
		r = rdmacm_mux_process(m);
		if (r == -ENOBUFS)
			fprintf(stderr, "%s\n", rdmacm_mux_last_error(m));

		while (rdmacm_mux_next_event_ex(m, &ev, sizeof(ev)) == 0)
			on_event(m, &ev);
		while (rdmacm_mux_next_response_ex(m, &resp, sizeof(resp)) == 0)
			on_answer(&resp);
		while (count != 0 && rdmacm_mux_recv_mad_ex(m, &in, sizeof(in)) == 0) {
			inet_ntop(AF_INET6, in.addr.gid, from, sizeof(from));
			printf("MAD 0x%02x%02x from %s, %u bytes\n", in.mad[16],
			       in.mad[17], from, in.mad_len);
			if (count > 0)
				count--;
		}
	}
	rdmacm_mux_close(m);
	return 0;
}
