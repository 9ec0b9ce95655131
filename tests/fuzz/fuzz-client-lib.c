/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer for librdmacm-mux's parser of daemon->client frames. The harness
 * is the daemon: it listens on a UNIX socket in a temporary directory
 * (created once), the library connects with rdmacm_mux_open(), and the
 * input decides what the "daemon" writes and how it is cut up.
 *
 * Input: byte 0 selects the mode. Bit 1 set: the handshake of a handle
 * opened with RDMACM_MUX_OPEN_ASYNC (the reconnection state machine, which
 * parses the HELLO answer in rdmacm_mux_process()): the same server as for
 * bit 0, the library driven by poll and process, everything collected with
 * the 1.2 calls. Else bit 0 set: the handshake: a server thread accepts,
 * reads the HELLO request, writes the rest of the input and shuts its side
 * down, so rdmacm_mux_open() parses a hostile HELLO answer. Else: base
 * protocol, then a program of steps: a step byte with bit 7 set submits a
 * request (bits 0-1: REG, UNREG, MAD, STATS; bit 2: wait for the oldest
 * ticket with timeout 0; bit 3: through the 1.2 calls, rdmacm_mux_submit()
 * with a user_data, rdmacm_mux_wait_ex()); otherwise the step byte is a
 * length and that many input bytes are written to the socket, then the
 * library runs rdmacm_mux_process() and everything it queued is collected
 * (with the 1.2 calls when byte 0 has bit 2 set).
 *
 * Checked: answers come back for the oldest outstanding ticket with its
 * op_code, its user_data and an error that is 0 or a negative errno;
 * inbound MADs have a length in 24..256; never more frames than whole
 * frames written; a broken connection stays broken with the same error;
 * the library survives EOF; the 1.2 structs' comp_mask and reserved words
 * are zero; query_info agrees with the model; an ASYNC handle reports
 * events in a possible order, grants no capability it did not ask for, and
 * notices the end of its connection.
 */
#include <errno.h>
#include <glib.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "rdmacm-mux.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FRAME ((size_t)sizeof(struct rdmacm_mux_msg))

static char *dir;
static char *path;
static int listen_fd = -1;

static void fail(const char *what, long a, long b)
{
	fprintf(stderr, "FUZZ CHECK FAILED: %s (%ld, %ld)\n", what, a, b);
	abort();
}

#define check(cond, what, a, b)                                                \
	do {                                                                   \
		if (!(cond))                                                   \
			fail(what, (long)(a), (long)(b));                      \
	} while (0)

static void cleanup(void)
{
	if (listen_fd >= 0)
		close(listen_fd);
	if (path)
		(void)unlink(path);
	if (dir)
		(void)rmdir(dir);
	g_free(path);
	g_free(dir);
}

static void server_init(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (listen_fd >= 0)
		return;
	dir = g_dir_make_tmp("rdmacm-mux-fuzz-lib-XXXXXX", NULL);
	check(dir != NULL, "mkdtemp", 0, 0);
	path = g_build_filename(dir, "mux", NULL);
	g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	check(listen_fd >= 0, "socket", errno, 0);
	check(bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind", errno, 0);
	check(listen(listen_fd, 8) == 0, "listen", errno, 0);
	atexit(cleanup);
}

static void write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) /* the library hung up after a protocol error */
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* ---- handshake mode ---- */

typedef struct Hello {
	const uint8_t *data;
	size_t size;
} Hello;

static void *hello_server(void *userdata)
{
	Hello *h = userdata;
	uint8_t req[FRAME];
	size_t got = 0;
	int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

	check(fd >= 0, "accept", errno, 0);
	while (got < FRAME) {
		ssize_t n = read(fd, req + got, FRAME - got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	write_all(fd, h->data, h->size);
	(void)shutdown(fd, SHUT_WR);
	/* Keep the fd open until the client is done reading. */
	{
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint8_t sink[4096];

		while (poll(&p, 1, 5000) > 0 && read(fd, sink, sizeof(sink)) > 0)
			;
	}
	close(fd);
	return NULL;
}

static void fuzz_handshake(const uint8_t *data, size_t size)
{
	Hello h = { data, size };
	struct rdmacm_mux *m = NULL;
	pthread_t t;
	int r;

	check(pthread_create(&t, NULL, hello_server, &h) == 0, "pthread_create", 0, 0);
	r = rdmacm_mux_open(path, 0, 5000, &m);
	if (r == 0) {
		check((rdmacm_mux_get_capabilities(m) & ~RDMACM_MUX_CAP_ALL) == 0,
		      "granted unknown capabilities", 0, 0);
		/* The rest of the stream, up to EOF. */
		for (int i = 0; i < 64; i++) {
			struct rdmacm_mux_inbound in;

			r = rdmacm_mux_process(m);
			while (rdmacm_mux_recv_mad(m, &in) == 0)
				check(in.mad_len >= 24 && in.mad_len <= 256, "inbound length",
				      in.mad_len, 0);
			if (r < 0 && r != -ENOBUFS)
				break;
			(void)poll(&(struct pollfd){ .fd = rdmacm_mux_get_fd(m), .events = POLLIN },
				   1, 100);
		}
		check(r < 0 && r != -ENOBUFS, "no error after EOF", r, 0);
		rdmacm_mux_close(m);
	} else {
		check(r < 0 && r >= -4095, "open error", r, 0);
		check(rdmacm_mux_last_error(NULL)[0] != '\0', "no error text", r, 0);
	}
	pthread_join(t, NULL);
}

/* ---- base-protocol mode ---- */

typedef struct Model {
	uint32_t ticket[RDMACM_MUX_MAX_REQUESTS];
	uint32_t op[RDMACM_MUX_MAX_REQUESTS];
	uint64_t user_data[RDMACM_MUX_MAX_REQUESTS];
	unsigned n;
	uint64_t next_user_data;
	bool ex; /* collect with the 1.2 calls */
} Model;

static void model_remove(Model *md, unsigned i)
{
	memmove(&md->ticket[i], &md->ticket[i + 1], (md->n - i - 1) * sizeof(md->ticket[0]));
	memmove(&md->op[i], &md->op[i + 1], (md->n - i - 1) * sizeof(md->op[0]));
	memmove(&md->user_data[i], &md->user_data[i + 1],
		(md->n - i - 1) * sizeof(md->user_data[0]));
	md->n--;
}

static void check_zero(const void *p, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		check(((const uint8_t *)p)[i] == 0, what, i, ((const uint8_t *)p)[i]);
}

/* An answer from either kind of call, as the model expects the oldest. */
static void check_answer(Model *md, unsigned i, uint32_t ticket, uint32_t op, int error,
			 uint64_t user_data, bool ex)
{
	check(ticket == md->ticket[i], "answered the wrong ticket", ticket, md->ticket[i]);
	check(op == md->op[i], "answer op_code", op, md->op[i]);
	check(error <= 0 && error >= -4095, "answer error", error, 0);
	if (ex)
		check(user_data == md->user_data[i], "answer user_data", user_data,
		      md->user_data[i]);
	model_remove(md, i);
}

static void check_response_ex(const struct rdmacm_mux_response_ex *r)
{
	check(r->comp_mask == 0, "response comp_mask", r->comp_mask, 0);
	check(r->reserved0 == 0, "response reserved0", r->reserved0, 0);
	check_zero(r->reserved, sizeof(r->reserved), "response reserved");
}

static void check_inbound_ex(const struct rdmacm_mux_inbound_ex *in)
{
	check(in->mad_len >= 24 && in->mad_len <= 256, "inbound length", in->mad_len, 0);
	check(in->comp_mask == 0, "inbound comp_mask", in->comp_mask, 0);
	check_zero(in->mad + in->mad_len, sizeof(in->mad) - in->mad_len, "inbound past mad_len");
	check_zero(in->reserved, sizeof(in->reserved), "inbound reserved");
}

static struct rdmacm_mux_info info_of(struct rdmacm_mux *m)
{
	struct rdmacm_mux_info info;

	memset(&info, 0xa5, sizeof(info));
	check(rdmacm_mux_query_info(m, &info, sizeof(info)) == 0, "query_info", 0, 0);
	check(info.comp_mask == 0, "info comp_mask", info.comp_mask, 0);
	check(info.reserved0 == 0, "info reserved0", info.reserved0, 0);
	check_zero(info.reserved, sizeof(info.reserved), "info reserved");
	check((info.capabilities & ~RDMACM_MUX_CAP_ALL) == 0, "granted unknown capabilities",
	      0, 0);
	return info;
}

static void submit(struct rdmacm_mux *m, Model *md, uint8_t step)
{
	static const uint32_t ops[] = { RDMACM_MUX_OP_CODE_REG, RDMACM_MUX_OP_CODE_UNREG,
					RDMACM_MUX_OP_CODE_MAD, RDMACM_MUX_OP_CODE_CLIENT_STATS };
	uint8_t gid[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 1, step };
	uint8_t mad[256] = { 1, 7, 2, 3 };
	struct rdmacm_mux_mad_addr addr = { .grh_present = 1 };
	uint32_t op = ops[step & 3], ticket = 0;
	int r;

	if (step & 4) {
		struct rdmacm_mux_response_ex rx;
		struct rdmacm_mux_response resp;

		if (md->n == 0)
			return;
		if (step & 8) {
			r = rdmacm_mux_wait_ex(m, md->ticket[0], 0, &rx, sizeof(rx));
			if (r == 0) {
				check_response_ex(&rx);
				check_answer(md, 0, rx.ticket, rx.op_code, rx.error, rx.user_data,
					     true);
			}
			return;
		}
		r = rdmacm_mux_wait(m, md->ticket[0], 0, &resp);
		if (r == 0)
			check_answer(md, 0, resp.ticket, resp.op_code, resp.error, 0, false);
		return;
	}
	if (step & 8) {
		struct rdmacm_mux_request req = {
			.op_code = op,
			.user_data = ++md->next_user_data | 0xabc0000000000000ull,
			.addr = &addr,
			.mad = mad,
			.mad_len = 24 + (step & 0x1f) * 7,
		};

		memcpy(req.gid, gid, sizeof(gid));
		r = rdmacm_mux_submit(m, &req, &ticket);
		if (op == RDMACM_MUX_OP_CODE_CLIENT_STATS) {
			check(r == -EOPNOTSUPP, "stats without the capability", r, 0);
			return;
		}
		if (r == 0) {
			check(md->n < RDMACM_MUX_MAX_REQUESTS, "more requests than the limit",
			      md->n, 0);
			md->ticket[md->n] = ticket;
			md->user_data[md->n] = req.user_data;
			md->op[md->n++] = op;
		}
		return;
	}
	switch (op) {
	case RDMACM_MUX_OP_CODE_REG:
		r = rdmacm_mux_register_gid(m, gid, &ticket);
		break;
	case RDMACM_MUX_OP_CODE_UNREG:
		r = rdmacm_mux_unregister_gid(m, gid, &ticket);
		break;
	case RDMACM_MUX_OP_CODE_MAD:
		r = rdmacm_mux_send_mad(m, gid, &addr, mad, 24 + (step & 0x1f) * 7, &ticket);
		break;
	default:
		r = rdmacm_mux_query_stats(m, &ticket);
		check(r == -EOPNOTSUPP, "stats without the capability", r, 0);
		return;
	}
	if (r == 0) {
		check(md->n < RDMACM_MUX_MAX_REQUESTS, "more requests than the limit", md->n, 0);
		check(md->n == 0 || ticket > md->ticket[md->n - 1], "tickets not increasing", ticket,
		      0);
		md->ticket[md->n] = ticket;
		md->user_data[md->n] = 0;
		md->op[md->n++] = op;
	} else {
		check(r == -ENOBUFS || r < 0, "submit", r, 0);
	}
}

static void collect(struct rdmacm_mux *m, Model *md)
{
	struct rdmacm_mux_response_ex rx;
	struct rdmacm_mux_inbound_ex inx;
	struct rdmacm_mux_response resp;
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux_info info;

	if (md->ex) {
		while (rdmacm_mux_next_response_ex(m, &rx, sizeof(rx)) == 0) {
			check(md->n > 0, "an answer with nothing outstanding", rx.ticket, 0);
			check_response_ex(&rx);
			check_answer(md, 0, rx.ticket, rx.op_code, rx.error, rx.user_data, true);
		}
		while (rdmacm_mux_recv_mad_ex(m, &inx, sizeof(inx)) == 0)
			check_inbound_ex(&inx);
	} else {
		while (rdmacm_mux_next_response(m, &resp) == 0) {
			check(md->n > 0, "an answer with nothing outstanding", resp.ticket, 0);
			check_answer(md, 0, resp.ticket, resp.op_code, resp.error, 0, false);
		}
		while (rdmacm_mux_recv_mad(m, &in) == 0)
			check(in.mad_len >= 24 && in.mad_len <= 256, "inbound length", in.mad_len,
			      0);
	}
	/* Everything answered was collected: the rest is still out. */
	info = info_of(m);
	check(info.requests == md->n, "query_info requests", info.requests, md->n);
	check(info.inbound == 0, "query_info inbound", info.inbound, 0);
	check(info.max_gids == 0 && info.capabilities == 0, "base protocol quotas", info.max_gids,
	      info.capabilities);
}

static void fuzz_stream(const uint8_t *data, size_t size, bool ex)
{
	struct rdmacm_mux *m = NULL;
	Model md = { .n = 0, .ex = ex };
	size_t written = 0, off = 0;
	long frames = 0;
	int broken = 0, r, fd;

	r = rdmacm_mux_open(path, RDMACM_MUX_OPEN_BASE_PROTOCOL, 1000, &m);
	check(r == 0, "open (base protocol)", r, 0);
	fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	check(fd >= 0, "accept", errno, 0);

	while (off < size) {
		uint8_t step = data[off++];

		if (step & 0x80) {
			submit(m, &md, step);
		} else {
			size_t len = step;
			uint8_t sink[4096];

			if (len > size - off)
				len = size - off;
			write_all(fd, data + off, len);
			off += len;
			written += len;
			/* Take the requests off the socket: a daemon reads. */
			while (read(fd, sink, sizeof(sink)) > 0)
				;
		}
		r = rdmacm_mux_process(m);
		if (r >= 0)
			frames += r;
		if (broken)
			check(r == broken, "a broken connection came back", r, broken);
		else if (r < 0 && r != -ENOBUFS)
			broken = r;
		if (broken) {
			struct rdmacm_mux_info info = info_of(m);

			check(info.state == RDMACM_MUX_STATE_BROKEN && info.error == broken,
			      "query_info of a broken handle", info.state, info.error);
		}
		check(frames <= (long)(written / FRAME), "more frames than were written", frames,
		      written);
		collect(m, &md);
	}
	close(fd);
	for (int i = 0; i < 4 && !broken; i++) {
		r = rdmacm_mux_process(m);
		if (r < 0 && r != -ENOBUFS)
			broken = r;
	}
	check(broken < 0, "EOF went unnoticed", broken, 0);
	collect(m, &md);
	rdmacm_mux_close(m);
}

/* ---- a handle that connects in the background ---- */

static void fuzz_async(const uint8_t *data, size_t size)
{
	/* No second attempt while this input runs: one connection, whose
	 * end the handle must notice. */
	const struct rdmacm_mux_open_attr attr = {
		.comp_mask = RDMACM_MUX_OPEN_ATTR_BACKOFF,
		.flags = RDMACM_MUX_OPEN_RECONNECT | RDMACM_MUX_OPEN_ASYNC,
		.socket_path = path,
		.backoff_initial_ms = 3600 * 1000,
		.backoff_max_ms = 3600 * 1000,
	};
	Hello h = { data, size };
	struct rdmacm_mux *m = NULL;
	bool connected = false, ended = false;
	pthread_t t;
	int r;

	check(pthread_create(&t, NULL, hello_server, &h) == 0, "pthread_create", 0, 0);
	r = rdmacm_mux_open_ex(&attr, &m);
	check(r == 0, "open_ex (async)", r, 0);
	for (int i = 0; i < 64 && !ended; i++) {
		struct rdmacm_mux_inbound_ex in;
		struct rdmacm_mux_event_ex ev;
		struct rdmacm_mux_info info;
		int timeout;

		check(rdmacm_mux_get_timeout(m, &timeout) == 0, "get_timeout", 0, 0);
		(void)poll(&(struct pollfd){ .fd = rdmacm_mux_get_fd(m), .events = POLLIN }, 1,
			   timeout >= 0 && timeout < 100 ? timeout : 100);
		r = rdmacm_mux_process(m);
		check(r >= 0 || r == -ENOBUFS, "a reconnecting handle's process failed", r, 0);
		while (rdmacm_mux_next_event_ex(m, &ev, sizeof(ev)) == 0) {
			check(ev.comp_mask == 0, "event comp_mask", ev.comp_mask, 0);
			check_zero(ev.reserved, sizeof(ev.reserved), "event reserved");
			check(ev.error <= 0 && ev.error >= -4095, "event error", ev.error, 0);
			check((ev.capabilities & ~RDMACM_MUX_CAP_ALL) == 0, "event capabilities",
			      0, 0);
			switch (ev.type) {
			case RDMACM_MUX_EVENT_CONNECTED:
				check(!connected, "CONNECTED twice", 0, 0);
				connected = true;
				break;
			case RDMACM_MUX_EVENT_ATTEMPT_FAILED:
				check(!connected, "ATTEMPT_FAILED after CONNECTED", 0, 0);
				check(ev.error < 0 && ev.retry_ms >= 0, "ATTEMPT_FAILED", ev.error,
				      ev.retry_ms);
				ended = true;
				break;
			case RDMACM_MUX_EVENT_DISCONNECTED:
				check(connected, "DISCONNECTED before CONNECTED", 0, 0);
				ended = true;
				break;
			default:
				/* No GID was registered: no GID_LOST; no
				 * second attempt: no RECONNECTED. */
				check(0, "event type", ev.type, 0);
			}
		}
		while (rdmacm_mux_recv_mad_ex(m, &in, sizeof(in)) == 0)
			check_inbound_ex(&in);
		info = info_of(m);
		check(info.state == (connected && !ended ? RDMACM_MUX_STATE_CONNECTED :
							     RDMACM_MUX_STATE_CONNECTING),
		      "query_info state", info.state, connected);
	}
	check(ended, "the end of the connection went unnoticed", connected, 0);
	rdmacm_mux_close(m);
	pthread_join(t, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	server_init();
	if (data[0] & 2)
		fuzz_async(data + 1, size - 1);
	else if (data[0] & 1)
		fuzz_handshake(data + 1, size - 1);
	else
		fuzz_stream(data + 1, size - 1, data[0] & 4);
	return 0;
}
