/* SPDX-License-Identifier: MIT */
/*
 * librdmacm-mux's 1.2 calls against the fake daemon (test-fake-daemon.h):
 * the version, rdmacm_mux_open_ex() with and without RDMACM_MUX_OPEN_ASYNC,
 * rdmacm_mux_submit() and the user_data of its answers, the extensible
 * output structs (sizes, zeroed tails, reserved space), the 1.2 events and
 * rdmacm_mux_query_info(). The daemon side stays hostile: a refused or
 * garbled handshake is a failed attempt, never a connected handle.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm-mad.h"
#include "rdmacm-mux.h"
#include "test-fake-daemon.h"
#include "test-golden.h"

/* A caller built against a newer header: its structs are bigger. */
#define NEWER_TAIL 40
#define POISON 0xa5

/* An ASYNC handle on the fixture's socket, with exact delays. */
static struct rdmacm_mux *open_async(Fixture *f, unsigned flags,
				     uint32_t initial_ms, uint32_t max_ms)
{
	const struct rdmacm_mux_open_attr attr = {
		.comp_mask = RDMACM_MUX_OPEN_ATTR_BACKOFF,
		.flags = RDMACM_MUX_OPEN_RECONNECT | RDMACM_MUX_OPEN_ASYNC | flags,
		.socket_path = f->path,
		.backoff_initial_ms = initial_ms,
		.backoff_max_ms = max_ms,
	};
	struct rdmacm_mux *m = NULL;

	g_assert_cmpint(rdmacm_mux_open_ex(&attr, &m), ==, 0);
	g_assert_nonnull(m);
	f->m = m;
	return m;
}

/* Process until an event comes, the fd alone waking the loop; return it. */
static void pump_event_ex(struct rdmacm_mux *m, struct rdmacm_mux_event_ex *ev)
{
	gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;

	while (rdmacm_mux_next_event_ex(m, ev, sizeof(*ev)) != 0) {
		g_assert_cmpint(g_get_monotonic_time(), <, end);
		pump_once(m, FALSE);
	}
}

static void expect_event_ex(struct rdmacm_mux *m, uint32_t type,
			    struct rdmacm_mux_event_ex *ev)
{
	pump_event_ex(m, ev);
	if (ev->type != type)
		g_error("expected event %u, got %u (error %d)", type, ev->type,
			ev->error);
	g_assert_cmpuint(ev->comp_mask, ==, 0);
	for (size_t i = 0; i < G_N_ELEMENTS(ev->reserved); i++)
		g_assert_cmpuint(ev->reserved[i], ==, 0);
}

static struct rdmacm_mux_info query_info(struct rdmacm_mux *m)
{
	struct rdmacm_mux_info info;

	memset(&info, POISON, sizeof(info));
	g_assert_cmpint(rdmacm_mux_query_info(m, &info, sizeof(info)), ==, 0);
	g_assert_cmpuint(info.comp_mask, ==, 0);
	g_assert_cmpuint(info.reserved0, ==, 0);
	for (size_t i = 0; i < G_N_ELEMENTS(info.reserved); i++)
		g_assert_cmpuint(info.reserved[i], ==, 0);
	return info;
}

static void assert_zero(const uint8_t *p, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			g_error("%s: byte %zu is 0x%02x, not 0", what, i, p[i]);
}

/* ---- the version ---- */

static void test_version(void)
{
	/* 1.2.0 is the version that brought the macros; the library says
	 * what its header says. */
	G_STATIC_ASSERT(RDMACM_MUX_CHECK_VERSION(1, 2, 0));
	G_STATIC_ASSERT(!RDMACM_MUX_CHECK_VERSION(1, 255, 0));
	G_STATIC_ASSERT(!RDMACM_MUX_CHECK_VERSION(2, 0, 0));
	G_STATIC_ASSERT(RDMACM_MUX_VERSION_ENCODE(1, 2, 0) == 0x010200);
	G_STATIC_ASSERT(RDMACM_MUX_VERSION_ENCODE(1, 10, 0) > RDMACM_MUX_VERSION_ENCODE(1, 9, 99));
#if !RDMACM_MUX_CHECK_VERSION(1, 2, 0)
#error "RDMACM_MUX_CHECK_VERSION must work in #if"
#endif
	g_assert_cmphex(rdmacm_mux_version(), ==, RDMACM_MUX_VERSION);
	g_assert_cmpuint(rdmacm_mux_version() >> 16, ==, RDMACM_MUX_VERSION_MAJOR);
	g_assert_cmpuint((rdmacm_mux_version() >> 8) & 0xff, ==, RDMACM_MUX_VERSION_MINOR);
	g_assert_cmpuint(rdmacm_mux_version() & 0xff, ==, RDMACM_MUX_VERSION_MICRO);
}

/* ---- rdmacm_mux_open_ex() ---- */

static void open_ex_fails(const struct rdmacm_mux_open_attr *attr, int err, const char *why)
{
	struct rdmacm_mux *m = NULL;

	g_assert_cmpint(rdmacm_mux_open_ex(attr, &m), ==, err);
	g_assert_null(m);
	if (!strstr(rdmacm_mux_last_error(NULL), why))
		g_error("open_ex error \"%s\" lacks \"%s\"", rdmacm_mux_last_error(NULL), why);
}

static void test_open_ex_args(Fixture *f, gconstpointer data)
{
	const unsigned rc = RDMACM_MUX_OPEN_RECONNECT;
	struct rdmacm_mux_open_attr attr;
	struct rdmacm_mux *m = NULL;

	(void)data;
	attr = (struct rdmacm_mux_open_attr){ .socket_path = f->path };
	g_assert_cmpint(rdmacm_mux_open_ex(&attr, NULL), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_open_ex(NULL, &m), ==, -EINVAL);
	g_assert_null(m);

	/* A caller built against a newer header asked for something this
	 * library cannot do: it must hear so, not be half obeyed. */
	attr = (struct rdmacm_mux_open_attr){ .comp_mask = 1u << 31, .socket_path = f->path };
	open_ex_fails(&attr, -EOPNOTSUPP, "comp_mask 0x80000000");
	attr = (struct rdmacm_mux_open_attr){ .flags = 1u << 7, .socket_path = f->path };
	open_ex_fails(&attr, -EINVAL, "unknown flags 0x80");
	attr = (struct rdmacm_mux_open_attr){ .flags = RDMACM_MUX_OPEN_ASYNC,
					      .socket_path = f->path };
	open_ex_fails(&attr, -EINVAL, "needs RDMACM_MUX_OPEN_RECONNECT");
	attr = (struct rdmacm_mux_open_attr){ .comp_mask = RDMACM_MUX_OPEN_ATTR_BACKOFF,
					      .socket_path = f->path,
					      .backoff_initial_ms = 10,
					      .backoff_max_ms = 10 };
	open_ex_fails(&attr, -EINVAL, "needs RDMACM_MUX_OPEN_RECONNECT");
	attr.flags = rc;
	attr.backoff_initial_ms = 0;
	open_ex_fails(&attr, -EINVAL, "initial (0)");
	attr.backoff_initial_ms = 20;
	open_ex_fails(&attr, -EINVAL, "max (10)");
	attr.backoff_max_ms = 3600 * 1000 + 1;
	open_ex_fails(&attr, -EINVAL, "3600000");
	attr.backoff_max_ms = 20;
	attr.backoff_jitter_percent = 101;
	open_ex_fails(&attr, -EINVAL, "jitter 101%");
	attr = (struct rdmacm_mux_open_attr){ .flags = rc | RDMACM_MUX_OPEN_ASYNC };
	open_ex_fails(&attr, -EINVAL, "no socket path");

	/* The 1.0 call takes 1.1's flags only: a program that wants ASYNC
	 * must use the 1.2 symbol, which an older library does not have. */
	g_assert_cmpint(rdmacm_mux_open(f->path, rc | RDMACM_MUX_OPEN_ASYNC, 0, &m), ==,
			-EINVAL);
	g_assert_null(m);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(NULL), "unknown flags 0x4"));
}

/* Without ASYNC, open_ex() is open(): it blocks for the handshake. */
static void test_open_ex_blocking(Fixture *f, gconstpointer data)
{
	const struct rdmacm_mux_open_attr attr = {
		.socket_path = f->path,
		.timeout_ms = OPEN_TIMEOUT_MS,
	};
	struct rdmacm_mux_info info;
	struct rdmacm_mux *m = NULL;
	int type;
	socklen_t len = sizeof(type);

	(void)data;
	server_start(f, script_grant_errno_and_unknown);
	g_assert_cmpint(rdmacm_mux_open_ex(&attr, &m), ==, 0);
	f->m = m;
	/* The fd is the socket itself, as with rdmacm_mux_open(). */
	g_assert_cmpint(getsockopt(rdmacm_mux_get_fd(m), SOL_SOCKET, SO_TYPE, &type, &len), ==,
			0);
	info = query_info(m);
	g_assert_cmpuint(info.state, ==, RDMACM_MUX_STATE_CONNECTED);
	g_assert_cmpint(info.error, ==, 0);
	/* A bit nobody asked for is never granted; the quotas are the
	 * HELLO answer's. */
	g_assert_cmpuint(info.capabilities, ==, RDMACM_MUX_CAP_ERRNO);
	g_assert_cmpuint(info.max_gids, ==, 8);
	g_assert_cmpuint(info.max_sessions, ==, 100);
	g_assert_cmpuint(info.max_queued, ==, 64);
	g_assert_cmpuint(info.requests, ==, 0);
	g_assert_cmpuint(info.gids, ==, 0);
}

static void script_async_later(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd;

	/* Nobody is there until the client says so. */
	wait_queue(f->to_server);
	srv_listen_again(f);
	fd = srv_accept_granting(f, req, 3);
	srv_expect_reg(fd, gid_a, 0);
	srv_expect_eof(fd);
}

/* The daemon is not there: the open succeeds at once and the handle
 * connects when it comes. */
static void test_open_async_no_daemon(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_event_ex ev;
	struct rdmacm_mux_event old;
	struct rdmacm_mux_info info;
	struct rdmacm_mux *m;
	struct pollfd pfd;
	gint64 start;
	int timeout, type;
	socklen_t len = sizeof(type);

	(void)data;
	srv_stop_listening(f);
	server_start(f, script_async_later);
	start = g_get_monotonic_time();
	m = open_async(f, 0, 20, 80);
	g_assert_cmpint(g_get_monotonic_time() - start, <, G_USEC_PER_SEC);

	/* The stable epoll fd from the start, readable now: an attempt is
	 * due. Nothing flows yet. */
	g_assert_cmpint(getsockopt(rdmacm_mux_get_fd(m), SOL_SOCKET, SO_TYPE, &type, &len), ==,
			-1);
	g_assert_cmpint(errno, ==, ENOTSOCK);
	g_assert_true(fcntl(rdmacm_mux_get_fd(m), F_GETFD) & FD_CLOEXEC);
	pfd = (struct pollfd){ .fd = rdmacm_mux_get_fd(m), .events = POLLIN };
	g_assert_cmpint(poll(&pfd, 1, 1000), ==, 1);
	g_assert_cmpint(rdmacm_mux_get_timeout(m, &timeout), ==, 0);
	g_assert_cmpint(timeout, ==, 0);
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, NULL), ==, -ENOTCONN);
	info = query_info(m);
	g_assert_cmpuint(info.state, ==, RDMACM_MUX_STATE_CONNECTING);
	g_assert_cmpint(info.error, ==, 0);
	g_assert_cmpuint(info.attempts, ==, 0);

	/* Each failed attempt is an event, with the delay before the next:
	 * the initial one, then doubled (no jitter here). */
	expect_event_ex(m, RDMACM_MUX_EVENT_ATTEMPT_FAILED, &ev);
	g_assert_cmpint(ev.error, ==, -ENOENT);
	g_assert_cmpuint(ev.attempts, ==, 1);
	g_assert_cmpint(ev.retry_ms, ==, 20);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(m), f->path));
	expect_event_ex(m, RDMACM_MUX_EVENT_ATTEMPT_FAILED, &ev);
	g_assert_cmpuint(ev.attempts, ==, 2);
	g_assert_cmpint(ev.retry_ms, ==, 40);
	info = query_info(m);
	g_assert_cmpuint(info.state, ==, RDMACM_MUX_STATE_CONNECTING);
	g_assert_cmpint(info.error, ==, -ENOENT);
	g_assert_cmpuint(info.attempts, ==, 2);

	/* The daemon comes: CONNECTED, with what it granted. The 1.0 call
	 * hands out the same events; drain the failures with it. */
	signal_queue(f->to_server);
	do {
		PROCESS_UNTIL(m, rdmacm_mux_next_event(m, &old) == 0);
		if (old.type != RDMACM_MUX_EVENT_ATTEMPT_FAILED)
			break;
		g_assert_cmpint(old.error, ==, -ENOENT);
	} while (TRUE);
	g_assert_cmpuint(old.type, ==, RDMACM_MUX_EVENT_CONNECTED);
	g_assert_cmpuint(old.attempts, >=, 3);
	g_assert_cmpint(rdmacm_mux_next_event_ex(m, &ev, sizeof(ev)), ==, -EAGAIN);
	g_assert_cmpuint(rdmacm_mux_get_capabilities(m), ==, RDMACM_MUX_CAP_ALL);
	info = query_info(m);
	g_assert_cmpuint(info.state, ==, RDMACM_MUX_STATE_CONNECTED);
	g_assert_cmpint(info.error, ==, 0);
	g_assert_cmpuint(info.reconnects, ==, 0);
	g_assert_cmpint(rdmacm_mux_get_timeout(m, &timeout), ==, 0);
	g_assert_cmpint(timeout, ==, -1);
	register_ok(m, gid_a);
}

static void script_async_slow_hello(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd;

	/* The open must be over before the daemon even accepts. */
	wait_queue(f->to_server);
	fd = srv_accept_granting(f, req, 0);
	srv_expect_eof(fd);
}

static void test_open_async_never_blocks(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_event_ex ev;
	struct rdmacm_mux *m;

	(void)data;
	server_start(f, script_async_slow_hello);
	m = open_async(f, 0, 10, 10);
	signal_queue(f->to_server);
	expect_event_ex(m, RDMACM_MUX_EVENT_CONNECTED, &ev);
	g_assert_cmpuint(ev.attempts, ==, 1);
	g_assert_cmpuint(ev.gids_registered, ==, 0);
	g_assert_cmpuint(ev.capabilities, ==, 0);
	g_assert_cmpint(ev.retry_ms, ==, -1);
}

/* Daemons that refuse or garble the handshake, then one that does not. */
static void script_async_hostile(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_expect_hello(fd, req);
	srv_answer(fd, req, -EACCES);
	srv_expect_eof(fd);

	fd = srv_accept(f);
	srv_expect_hello(fd, req);
	srv_answer_bad_magic(fd, req);
	srv_expect_eof(fd);

	/* An answer to another question. */
	fd = srv_accept(f);
	srv_expect_hello(fd, req);
	gold_put_u32(req, GOLD_OFF_MSG_TYPE, GOLD_MSG_RESP);
	gold_put_u32(req, GOLD_OFF_OP_CODE, GOLD_OP_REG);
	srv_write(fd, req, sizeof(req));
	srv_expect_eof(fd);

	/* An inbound MAD for a GID nobody registered yet, then the HELLO
	 * answer: the MAD is queued, the handshake goes on. */
	fd = srv_accept(f);
	srv_expect_hello(fd, req);
	srv_send_inbound(fd, gid_c, 64, 5);
	srv_answer_hello(fd, req, 2);
	srv_expect_eof(fd);
}

static void test_open_async_hostile_handshake(Fixture *f, gconstpointer data)
{
	static const int errs[] = { -EACCES, -EPROTO, -EPROTO };
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux_event_ex ev;
	struct rdmacm_mux *m;

	(void)data;
	server_start(f, script_async_hostile);
	m = open_async(f, 0, 5, 5);
	for (size_t i = 0; i < G_N_ELEMENTS(errs); i++) {
		expect_event_ex(m, RDMACM_MUX_EVENT_ATTEMPT_FAILED, &ev);
		g_assert_cmpint(ev.error, ==, errs[i]);
		g_assert_cmpuint(ev.attempts, ==, i + 1);
		/* Never connected in between. */
		g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, NULL), ==, -ENOTCONN);
	}
	expect_event_ex(m, RDMACM_MUX_EVENT_CONNECTED, &ev);
	g_assert_cmpuint(ev.attempts, ==, 4);
	g_assert_cmpuint(ev.capabilities, ==, RDMACM_MUX_CAP_CLIENT_STATS);
	g_assert_cmpint(rdmacm_mux_recv_mad(m, &in), ==, 0);
	check_inbound(&in, gid_c, 64, 5);
}

/* ---- rdmacm_mux_submit() ---- */

static void script_submit(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE], golden[GOLD_FRAME_SIZE] = { 0 };
	uint8_t resp[GOLD_FRAME_SIZE] = { 0 };
	int fd = srv_accept_granting(f, req, 3);

	srv_expect_reg(fd, gid_b, 0);
	/* The same frame as rdmacm_mux_send_mad()'s, byte for byte. */
	srv_read_frame(fd, req);
	expect_mad_request(req, 100);
	srv_answer(fd, req, -EIO);
	srv_read_frame(fd, req);
	gold_frame_hdr(golden, GOLD_MSG_REQ, GOLD_OP_CLIENT_STATS, NULL, 0, 0);
	expect_bytes(golden, req, "CLIENT_STATS");
	gold_frame_hdr(resp, GOLD_MSG_RESP, GOLD_OP_CLIENT_STATS, NULL, 0, GOLD_STATS_SIZE);
	gold_put_stats(resp + GOLD_OFF_MAD, (const uint64_t[8]){ 11, 12, 13, 14, 15, 16, 17, 18 });
	srv_write(fd, resp, sizeof(resp));
	/* A daemon that sends fewer counters than it should: the rest are
	 * not made up. */
	srv_read_frame(fd, req);
	gold_put_u32(resp, GOLD_OFF_UMAD_LEN, 16);
	srv_write(fd, resp, sizeof(resp));
	srv_read_frame(fd, req);
	expect_gid_request(req, GOLD_OP_UNREG, gid_b);
	srv_answer(fd, req, 4);
	srv_wait_eof(fd);
}

static void check_response_ex(const struct rdmacm_mux_response_ex *r, uint32_t ticket,
			      uint32_t op, int err, uint64_t user_data)
{
	g_assert_cmpuint(r->comp_mask, ==, 0);
	g_assert_cmpuint(r->ticket, ==, ticket);
	g_assert_cmpuint(r->op_code, ==, op);
	g_assert_cmpint(r->error, ==, err);
	g_assert_cmphex(r->user_data, ==, user_data);
	g_assert_cmpuint(r->reserved0, ==, 0);
	assert_zero((const uint8_t *)r->reserved, sizeof(r->reserved), "reserved");
}

static void test_submit(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_request req = { .op_code = RDMACM_MUX_OP_CODE_REG };
	struct rdmacm_mux_response_ex r;
	struct rdmacm_mux_response old;
	struct rdmacm_mux_mad_addr addr;
	struct rdmacm_mux *m;
	uint8_t mad[100];
	uint32_t t[5];

	(void)data;
	server_start(f, script_submit);
	m = open_with(f, 0);
	fill_addr(&addr);
	fill_mad(mad, sizeof(mad));

	memcpy(req.gid, gid_b, 16);
	req.user_data = 0x1111111111111111ull;
	g_assert_cmpint(rdmacm_mux_submit(m, &req, &t[0]), ==, 0);
	req = (struct rdmacm_mux_request){ .op_code = RDMACM_MUX_OP_CODE_MAD,
					   .user_data = UINT64_MAX,
					   .addr = &addr,
					   .mad = mad,
					   .mad_len = sizeof(mad) };
	memcpy(req.gid, gid_b, 16);
	g_assert_cmpint(rdmacm_mux_submit(m, &req, &t[1]), ==, 0);
	req = (struct rdmacm_mux_request){ .op_code = RDMACM_MUX_OP_CODE_CLIENT_STATS,
					   .user_data = 3 };
	g_assert_cmpint(rdmacm_mux_submit(m, &req, &t[2]), ==, 0);
	req.user_data = 4;
	g_assert_cmpint(rdmacm_mux_submit(m, &req, &t[3]), ==, 0);
	/* A 1.0 call in between: its answer has user_data 0. */
	g_assert_cmpint(rdmacm_mux_unregister_gid(m, gid_b, &t[4]), ==, 0);

	/* Out of order with wait_ex(), in order with next_response_ex(). */
	memset(&r, POISON, sizeof(r));
	g_assert_cmpint(rdmacm_mux_wait_ex(m, t[1], WAIT_TIMEOUT_MS, &r, sizeof(r)), ==, 0);
	check_response_ex(&r, t[1], RDMACM_MUX_OP_CODE_MAD, -EIO, UINT64_MAX);
	assert_zero((const uint8_t *)&r.tx_mads, offsetof(struct rdmacm_mux_response_ex, reserved0) -
				 offsetof(struct rdmacm_mux_response_ex, tx_mads), "counters");
	g_assert_cmpint(rdmacm_mux_wait_ex(m, t[4], WAIT_TIMEOUT_MS, &r, sizeof(r)), ==, 0);
	check_response_ex(&r, t[4], RDMACM_MUX_OP_CODE_UNREG, -ENOENT, 0);

	memset(&r, POISON, sizeof(r));
	g_assert_cmpint(rdmacm_mux_next_response_ex(m, &r, sizeof(r)), ==, 0);
	check_response_ex(&r, t[0], RDMACM_MUX_OP_CODE_REG, 0, 0x1111111111111111ull);
	g_assert_cmpint(rdmacm_mux_next_response_ex(m, &r, sizeof(r)), ==, 0);
	check_response_ex(&r, t[2], RDMACM_MUX_OP_CODE_CLIENT_STATS, 0, 3);
	g_assert_cmpuint(r.tx_mads, ==, 11);
	g_assert_cmpuint(r.tx_rejected, ==, 12);
	g_assert_cmpuint(r.rx_mads, ==, 13);
	g_assert_cmpuint(r.rx_dropped, ==, 14);
	g_assert_cmpuint(r.requests, ==, 15);
	g_assert_cmpuint(r.gids, ==, 16);
	g_assert_cmpuint(r.sessions, ==, 17);
	g_assert_cmpuint(r.queued, ==, 18);
	/* The short answer, through the 1.0 call: two counters, no more. */
	g_assert_cmpint(rdmacm_mux_next_response(m, &old), ==, 0);
	g_assert_cmpuint(old.ticket, ==, t[3]);
	g_assert_cmpuint(old.stats.tx_mads, ==, 11);
	g_assert_cmpuint(old.stats.tx_rejected, ==, 12);
	g_assert_cmpuint(old.stats.rx_mads, ==, 0);
	g_assert_cmpuint(old.stats.queued, ==, 0);
	g_assert_cmpint(rdmacm_mux_next_response_ex(m, &r, sizeof(r)), ==, -EAGAIN);
}

static void test_submit_args(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_request req = { .op_code = RDMACM_MUX_OP_CODE_REG };
	struct rdmacm_mux_mad_addr addr = { 0 };
	struct rdmacm_mux *m;
	uint8_t mad[257] = { 0 };
	uint32_t ticket = 77;

	(void)data;
	g_assert_cmpint(rdmacm_mux_submit(NULL, &req, NULL), ==, -EINVAL);
	server_start(f, script_grant_errno_and_unknown);
	m = open_with(f, 0);
	g_assert_cmpint(rdmacm_mux_submit(m, NULL, NULL), ==, -EINVAL);
	req.comp_mask = 1;
	g_assert_cmpint(rdmacm_mux_submit(m, &req, &ticket), ==, -EOPNOTSUPP);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(m), "comp_mask 0x1"));
	req.comp_mask = 0;
	/* HELLO is the library's own; anything else is no request at all. */
	req.op_code = RDMACM_MUX_OP_CODE_HELLO;
	g_assert_cmpint(rdmacm_mux_submit(m, &req, &ticket), ==, -EINVAL);
	req.op_code = 7;
	g_assert_cmpint(rdmacm_mux_submit(m, &req, &ticket), ==, -EINVAL);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(m), "op_code 0x7"));
	req = (struct rdmacm_mux_request){ .op_code = RDMACM_MUX_OP_CODE_MAD, .mad = mad,
					   .mad_len = 24 };
	g_assert_cmpint(rdmacm_mux_submit(m, &req, &ticket), ==, -EINVAL);
	req.addr = &addr;
	req.mad_len = 257;
	g_assert_cmpint(rdmacm_mux_submit(m, &req, &ticket), ==, -EINVAL);
	req.mad_len = 23;
	g_assert_cmpint(rdmacm_mux_submit(m, &req, &ticket), ==, -EINVAL);
	req.mad = NULL;
	req.mad_len = 24;
	g_assert_cmpint(rdmacm_mux_submit(m, &req, &ticket), ==, -EINVAL);
	/* This daemon granted ERRNO only. */
	req = (struct rdmacm_mux_request){ .op_code = RDMACM_MUX_OP_CODE_CLIENT_STATS };
	g_assert_cmpint(rdmacm_mux_submit(m, &req, &ticket), ==, -EOPNOTSUPP);
	/* Nothing was queued, no ticket handed out. */
	g_assert_cmpuint(ticket, ==, 77);
	g_assert_cmpuint(query_info(m).requests, ==, 0);
}

/* ---- sizes of the output structs ---- */

typedef struct {
	struct rdmacm_mux_response_ex r;
	uint8_t tail[NEWER_TAIL];
} NewerResponse;

typedef struct {
	struct rdmacm_mux_inbound_ex in;
	uint8_t tail[NEWER_TAIL];
} NewerInbound;

typedef struct {
	struct rdmacm_mux_info info;
	uint8_t tail[NEWER_TAIL];
} NewerInfo;

static void script_two_mads(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_read_frame(fd, req);
	srv_send_inbound(fd, gid_a, 256, 1);
	srv_send_inbound(fd, gid_b, 24, 2);
	srv_answer(fd, req, 0);
	srv_wait_eof(fd);
}

static void test_sizes(Fixture *f, gconstpointer data)
{
	NewerResponse nr;
	NewerInbound ni;
	NewerInfo info;
	struct rdmacm_mux_inbound_ex in;
	struct rdmacm_mux_event_ex ev;
	struct rdmacm_mux *m;
	uint32_t ticket;

	(void)data;
	server_start(f, script_two_mads);
	m = open_base(f);
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, &ticket), ==, 0);

	/* Too small for 1.2's struct, or no struct: refused, nothing taken. */
	g_assert_cmpint(rdmacm_mux_wait_ex(m, ticket, WAIT_TIMEOUT_MS, &nr.r, sizeof(nr.r) - 1),
			==, -EINVAL);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(m), "ret_size"));
	g_assert_cmpint(rdmacm_mux_wait_ex(m, ticket, WAIT_TIMEOUT_MS, NULL, sizeof(nr.r)), ==,
			-EINVAL);
	g_assert_cmpint(rdmacm_mux_next_response_ex(m, &nr.r, 0), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_recv_mad_ex(m, &in, sizeof(in) - 8), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_next_event_ex(m, &ev, sizeof(ev) - 8), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_query_info(m, &info.info, sizeof(info.info) - 8), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_query_info(m, NULL, sizeof(info.info)), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_query_info(NULL, &info.info, sizeof(info.info)), ==, -EINVAL);

	/* A newer caller's bigger structs: what this library does not know
	 * reads as zero, never as what was in the caller's memory. */
	memset(&nr, POISON, sizeof(nr));
	g_assert_cmpint(rdmacm_mux_wait_ex(m, ticket, WAIT_TIMEOUT_MS, &nr.r, sizeof(nr)), ==, 0);
	check_response_ex(&nr.r, ticket, RDMACM_MUX_OP_CODE_REG, 0, 0);
	assert_zero(nr.tail, sizeof(nr.tail), "response tail");

	memset(&ni, POISON, sizeof(ni));
	g_assert_cmpint(rdmacm_mux_recv_mad_ex(m, &ni.in, sizeof(ni)), ==, 0);
	g_assert_cmpuint(ni.in.comp_mask, ==, 0);
	g_assert_cmpuint(ni.in.mad_len, ==, 256);
	g_assert_cmpmem(ni.in.local_gid, 16, gid_a, 16);
	g_assert_cmpmem(ni.in.addr.gid, 16, gid_remote, 16);
	g_assert_cmpuint(g_ntohl(ni.in.addr.qpn), ==, 1);
	g_assert_cmpuint(g_ntohl(ni.in.addr.flow_label), ==, 0x12345);
	g_assert_cmpuint(mad_attr(ni.in.mad), ==, CM_REP);
	g_assert_cmpuint(mad_local(ni.in.mad), ==, 1);
	g_assert_cmpuint(ni.in.reserved0, ==, 0);
	assert_zero((const uint8_t *)ni.in.reserved, sizeof(ni.in.reserved), "reserved");
	assert_zero(ni.tail, sizeof(ni.tail), "inbound tail");
	/* The exact size, and a short MAD: zero past mad_len. */
	memset(&in, POISON, sizeof(in));
	g_assert_cmpint(rdmacm_mux_recv_mad_ex(m, &in, sizeof(in)), ==, 0);
	g_assert_cmpuint(in.mad_len, ==, 24);
	g_assert_cmpmem(in.local_gid, 16, gid_b, 16);
	assert_zero(in.mad + 24, sizeof(in.mad) - 24, "MAD past mad_len");
	g_assert_cmpint(rdmacm_mux_recv_mad_ex(m, &in, sizeof(in)), ==, -EAGAIN);

	memset(&info, POISON, sizeof(info));
	g_assert_cmpint(rdmacm_mux_query_info(m, &info.info, sizeof(info)), ==, 0);
	g_assert_cmpuint(info.info.state, ==, RDMACM_MUX_STATE_CONNECTED);
	g_assert_cmpuint(info.info.max_gids, ==, 0); /* base protocol: unknown */
	assert_zero(info.tail, sizeof(info.tail), "info tail");
}

/* ---- 1.2's events of a reconnecting handle ---- */

static void script_outage(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd = srv_accept_granting(f, req, 3);

	srv_expect_reg(fd, gid_a, 0);
	srv_expect_reg(fd, gid_b, 0);
	wait_queue(f->to_server);
	srv_stop_listening(f);
	close(fd);

	wait_queue(f->to_server);
	srv_listen_again(f);
	fd = srv_accept_granting(f, req, 1);
	srv_expect_reg(fd, gid_a, 0);
	srv_expect_reg(fd, gid_b, 3); /* another client took it */
	srv_expect_eof(fd);
}

static void test_events_ex_outage(Fixture *f, gconstpointer data)
{
	const struct rdmacm_mux_open_attr attr = {
		.comp_mask = RDMACM_MUX_OPEN_ATTR_BACKOFF,
		.flags = RDMACM_MUX_OPEN_RECONNECT,
		.socket_path = f->path,
		.timeout_ms = OPEN_TIMEOUT_MS,
		.backoff_initial_ms = 30,
		.backoff_max_ms = 60,
		.backoff_jitter_percent = 50,
	};
	struct rdmacm_mux_event_ex ev;
	struct rdmacm_mux_info info;
	struct rdmacm_mux *m = NULL;

	(void)data;
	server_start(f, script_outage);
	g_assert_cmpint(rdmacm_mux_open_ex(&attr, &m), ==, 0);
	f->m = m;
	register_ok(m, gid_a);
	register_ok(m, gid_b);
	g_assert_cmpuint(query_info(m).gids, ==, 2);
	signal_queue(f->to_server);

	/* The break, with the first delay: 30 ms less up to half of it. */
	expect_event_ex(m, RDMACM_MUX_EVENT_DISCONNECTED, &ev);
	g_assert_cmpint(ev.error, ==, -ECONNRESET);
	g_assert_cmpint(ev.retry_ms, >=, 15);
	g_assert_cmpint(ev.retry_ms, <=, 30);
	g_assert_cmpuint(ev.capabilities, ==, 0);
	/* Then failed attempts, each a 1.2 event, capped at 60 ms. */
	for (uint32_t i = 1; i <= 3; i++) {
		expect_event_ex(m, RDMACM_MUX_EVENT_ATTEMPT_FAILED, &ev);
		g_assert_cmpint(ev.error, ==, -ENOENT);
		g_assert_cmpuint(ev.attempts, ==, i);
		g_assert_cmpint(ev.retry_ms, >=, 30);
		g_assert_cmpint(ev.retry_ms, <=, 60);
	}
	info = query_info(m);
	g_assert_cmpuint(info.state, ==, RDMACM_MUX_STATE_CONNECTING);
	g_assert_cmpint(info.error, ==, -ENOENT);
	g_assert_cmpuint(info.attempts, >=, 3);
	signal_queue(f->to_server);

	do
		pump_event_ex(m, &ev);
	while (ev.type == RDMACM_MUX_EVENT_ATTEMPT_FAILED);
	g_assert_cmpuint(ev.type, ==, RDMACM_MUX_EVENT_GID_LOST);
	g_assert_cmpmem(ev.gid, 16, gid_b, 16);
	g_assert_cmpint(ev.error, ==, -EACCES);
	g_assert_cmpint(ev.retry_ms, ==, -1);
	expect_event_ex(m, RDMACM_MUX_EVENT_RECONNECTED, &ev);
	g_assert_cmpuint(ev.gids_registered, ==, 1);
	g_assert_cmpuint(ev.gids_failed, ==, 1);
	g_assert_cmpuint(ev.capabilities, ==, RDMACM_MUX_CAP_ERRNO);
	g_assert_cmpint(ev.retry_ms, ==, -1);
	info = query_info(m);
	g_assert_cmpuint(info.state, ==, RDMACM_MUX_STATE_CONNECTED);
	g_assert_cmpuint(info.reconnects, ==, 1);
	g_assert_cmpuint(info.gids, ==, 1);
	g_assert_cmpuint(info.events, ==, 0);
}

static void script_close_soon(Fixture *f)
{
	int fd = srv_accept(f);

	wait_queue(f->to_server);
	close(fd);
}

/* Without RECONNECT a broken connection is BROKEN, with its error. */
static void test_info_broken(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_info info;
	struct rdmacm_mux *m;

	(void)data;
	server_start(f, script_close_soon);
	m = open_base(f);
	signal_queue(f->to_server);
	PROCESS_UNTIL(m, rdmacm_mux_process(m) == -ECONNRESET);
	info = query_info(m);
	g_assert_cmpuint(info.state, ==, RDMACM_MUX_STATE_BROKEN);
	g_assert_cmpint(info.error, ==, -ECONNRESET);
	g_assert_cmpuint(info.attempts, ==, 0);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);

	g_test_add_func("/client-lib-ex/version", test_version);
#define ADD(path, fn)                                                          \
	g_test_add("/client-lib-ex/" path, Fixture, NULL, fixture_setup, fn,   \
		   fixture_teardown)
	ADD("open-ex/arguments", test_open_ex_args);
	ADD("open-ex/blocking-with-quotas", test_open_ex_blocking);
	ADD("open-ex/async-before-the-daemon", test_open_async_no_daemon);
	ADD("open-ex/async-never-blocks", test_open_async_never_blocks);
	ADD("open-ex/async-hostile-handshakes", test_open_async_hostile_handshake);
	ADD("submit/user-data", test_submit);
	ADD("submit/arguments", test_submit_args);
	ADD("ex/sizes-and-zeroed-tails", test_sizes);
	ADD("events-ex/outage", test_events_ex_outage);
	ADD("info/broken", test_info_broken);
#undef ADD
	return g_test_run();
}
