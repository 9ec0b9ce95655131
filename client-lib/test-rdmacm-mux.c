/* SPDX-License-Identifier: MIT */
/*
 * librdmacm-mux's 1.0 and 1.1 calls against a fake daemon
 * (test-fake-daemon.h). Each test binds a UNIX socket in a fresh temporary
 * directory and runs a short server script in a thread; the test body
 * drives the library through its public API only (the test links the
 * shared library, so it sees exactly the exported ABI). The 1.2 calls are
 * tested in test-rdmacm-mux-ex.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cm-mad.h"
#include "rdmacm-mux.h"
#include "test-fake-daemon.h"
#include "test-golden.h"

/* ---- open and the handshake ---- */

static void script_base(Fixture *f)
{
	int fd = srv_accept(f);

	/* No HELLO: the first frame is the REG. */
	srv_expect_reg(fd, gid_a, 0);
	srv_wait_eof(fd);
}

static void test_open_base(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux *m;
	uint32_t ticket = 0, t2;
	int fd, fl;

	(void)data;
	server_start(f, script_base);
	m = open_base(f);

	fd = rdmacm_mux_get_fd(m);
	g_assert_cmpint(fd, >=, 0);
	fl = fcntl(fd, F_GETFD);
	g_assert_true(fl & FD_CLOEXEC);
	fl = fcntl(fd, F_GETFL);
	g_assert_true(fl & O_NONBLOCK);

	g_assert_cmpuint(rdmacm_mux_get_capabilities(m), ==, 0);
	g_assert_cmpint(rdmacm_mux_query_stats(m, &t2), ==, -EOPNOTSUPP);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(m), "CLIENT_STATS"));

	g_assert_cmpint(rdmacm_mux_get_events(m), ==, POLLIN);
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, &ticket), ==, 0);
	g_assert_cmpuint(ticket, ==, 1);
	g_assert_cmpint(rdmacm_mux_get_events(m), ==, POLLIN | POLLOUT);
	g_assert_cmpint(wait_ok(m, ticket), ==, 0);
	g_assert_cmpint(rdmacm_mux_get_events(m), ==, POLLIN);
}

static void script_hello_stats(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE], golden[GOLD_FRAME_SIZE] = { 0 };
	uint8_t resp[GOLD_FRAME_SIZE] = { 0 };
	uint8_t *p = resp + GOLD_OFF_MAD;
	int fd = srv_accept(f);

	srv_expect_hello(fd, req);
	srv_answer_hello(fd, req, 3);

	srv_read_frame(fd, req);
	gold_frame_hdr(golden, GOLD_MSG_REQ, GOLD_OP_CLIENT_STATS, NULL, 0, 0);
	expect_bytes(golden, req, "CLIENT_STATS");
	gold_frame_hdr(resp, GOLD_MSG_RESP, GOLD_OP_CLIENT_STATS, NULL, 0,
		       GOLD_STATS_SIZE);
	gold_put_stats(p, (const uint64_t[8]){ 11, 12, 13, 14, 15, 16, 17, 18 });
	srv_write(fd, resp, sizeof(resp));

	/* A failed stats query carries no counters. */
	srv_read_frame(fd, req);
	srv_answer(fd, req, -EDQUOT);
	srv_wait_eof(fd);
}

/* Open with HELLO against @script: the daemon grants @caps, and a handle
 * without CLIENT_STATS among them refuses a stats query at once. */
static struct rdmacm_mux *open_granted(Fixture *f, ServerScript script, uint64_t caps)
{
	struct rdmacm_mux *m;

	server_start(f, script);
	m = open_with(f, 0);
	g_assert_cmpuint(rdmacm_mux_get_capabilities(m), ==, caps);
	if (!(caps & RDMACM_MUX_CAP_CLIENT_STATS))
		g_assert_cmpint(rdmacm_mux_query_stats(m, NULL), ==, -EOPNOTSUPP);
	return m;
}

static void test_open_hello(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_response resp;
	struct rdmacm_mux *m = open_granted(f, script_hello_stats, RDMACM_MUX_CAP_ALL);
	uint32_t ticket;

	(void)data;

	g_assert_cmpint(rdmacm_mux_query_stats(m, &ticket), ==, 0);
	g_assert_cmpint(rdmacm_mux_wait(m, ticket, WAIT_TIMEOUT_MS, &resp), ==, 0);
	g_assert_cmpint(resp.error, ==, 0);
	g_assert_cmpuint(resp.op_code, ==, RDMACM_MUX_OP_CODE_CLIENT_STATS);
	g_assert_cmpuint(resp.stats.tx_mads, ==, 11);
	g_assert_cmpuint(resp.stats.tx_rejected, ==, 12);
	g_assert_cmpuint(resp.stats.rx_mads, ==, 13);
	g_assert_cmpuint(resp.stats.rx_dropped, ==, 14);
	g_assert_cmpuint(resp.stats.requests, ==, 15);
	g_assert_cmpuint(resp.stats.gids, ==, 16);
	g_assert_cmpuint(resp.stats.sessions, ==, 17);
	g_assert_cmpuint(resp.stats.queued, ==, 18);

	g_assert_cmpint(rdmacm_mux_query_stats(m, &ticket), ==, 0);
	g_assert_cmpint(rdmacm_mux_wait(m, ticket, WAIT_TIMEOUT_MS, &resp), ==, 0);
	g_assert_cmpint(resp.error, ==, -EDQUOT);
	g_assert_cmpuint(resp.stats.tx_mads, ==, 0);
}

static void test_open_hello_partial(Fixture *f, gconstpointer data)
{
	(void)data;
	open_granted(f, script_grant_errno_and_unknown, RDMACM_MUX_CAP_ERRNO);
}

/* QEMU's mux: an unknown op_code is echoed with err_code EINVAL. */
static void script_qemu(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_expect_hello(fd, req);
	srv_answer(fd, req, 1);
	srv_expect_reg(fd, gid_b, 0);
	srv_wait_eof(fd);
}

static void test_open_hello_fallback(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux *m;

	(void)data;
	m = open_granted(f, script_qemu, 0);
	register_ok(m, gid_b);
}

static void script_hello_refused(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_expect_hello(fd, req);
	srv_answer(fd, req, 3);
	srv_wait_eof(fd);

	/* Second connection: a reply with the wrong magic. */
	fd = srv_accept(f);
	srv_expect_hello(fd, req);
	srv_answer_bad_magic(fd, req);
	srv_wait_eof(fd);
}

static void test_open_hello_refused(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux *m = NULL;

	(void)data;
	server_start(f, script_hello_refused);
	g_assert_cmpint(rdmacm_mux_open(f->path, 0, OPEN_TIMEOUT_MS, &m), ==,
			-EACCES);
	g_assert_null(m);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(NULL), "HELLO"));

	g_assert_cmpint(rdmacm_mux_open(f->path, 0, OPEN_TIMEOUT_MS, &m), ==,
			-EPROTO);
	g_assert_null(m);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(NULL), "magic"));
}

static void script_silent(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_expect_hello(fd, req);
	srv_wait_eof(fd);
}

static void test_open_hello_timeout(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux *m = NULL;
	gint64 start = g_get_monotonic_time();

	(void)data;
	server_start(f, script_silent);
	g_assert_cmpint(rdmacm_mux_open(f->path, 0, 200, &m), ==, -ETIMEDOUT);
	g_assert_null(m);
	g_assert_cmpint(g_get_monotonic_time() - start, >=, 150 * 1000);
	g_assert_cmpint(g_get_monotonic_time() - start, <, 5 * G_USEC_PER_SEC);
}

static void test_open_no_daemon(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux *m = NULL;
	char *path = g_build_filename(f->dir, "nobody-here", NULL);

	(void)data;
	g_assert_cmpint(rdmacm_mux_open(path, 0, OPEN_TIMEOUT_MS, &m), ==, -ENOENT);
	g_assert_null(m);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(NULL), path));
	g_free(path);
}

/* ---- argument checks ---- */

static void test_bad_args(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_mad_addr addr = { 0 };
	struct rdmacm_mux_response resp;
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux *m = NULL;
	char longpath[200];
	uint8_t mad[257] = { 0 };

	(void)data;
	/* open */
	g_assert_cmpint(rdmacm_mux_open(f->path, 0, 0, NULL), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_open(NULL, 0, 0, &m), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_open("", 0, 0, &m), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_open(f->path, 0x80, 0, &m), ==, -EINVAL);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(NULL), "flags"));
	memset(longpath, 'x', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	g_assert_cmpint(rdmacm_mux_open(longpath, 0, 0, &m), ==, -ENAMETOOLONG);
	g_assert_null(m);

	/* NULL handle: everything fails cleanly */
	rdmacm_mux_close(NULL);
	g_assert_cmpint(rdmacm_mux_get_fd(NULL), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_get_events(NULL), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_process(NULL), ==, -EINVAL);
	g_assert_cmpuint(rdmacm_mux_get_capabilities(NULL), ==, 0);
	g_assert_cmpuint(rdmacm_mux_get_dropped(NULL), ==, 0);
	g_assert_cmpint(rdmacm_mux_register_gid(NULL, gid_a, NULL), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_unregister_gid(NULL, gid_a, NULL), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_send_mad(NULL, gid_a, &addr, mad, 24, NULL), ==,
			-EINVAL);
	g_assert_cmpint(rdmacm_mux_query_stats(NULL, NULL), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_next_response(NULL, &resp), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_recv_mad(NULL, &in), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_wait(NULL, 1, 0, &resp), ==, -EINVAL);
	g_assert_nonnull(rdmacm_mux_last_error(NULL));

	/* A live handle with bad arguments; nothing reaches the daemon. */
	server_start(f, script_base);
	m = open_base(f);
	g_assert_cmpstr(rdmacm_mux_last_error(m), ==, "");
	g_assert_cmpint(rdmacm_mux_register_gid(m, NULL, NULL), ==, -EINVAL);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(m), "gid"));
	g_assert_cmpint(rdmacm_mux_unregister_gid(m, NULL, NULL), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_send_mad(m, NULL, &addr, mad, 24, NULL), ==,
			-EINVAL);
	g_assert_cmpint(rdmacm_mux_send_mad(m, gid_a, NULL, mad, 24, NULL), ==,
			-EINVAL);
	g_assert_cmpint(rdmacm_mux_send_mad(m, gid_a, &addr, NULL, 24, NULL), ==,
			-EINVAL);
	g_assert_cmpint(rdmacm_mux_send_mad(m, gid_a, &addr, mad, 23, NULL), ==,
			-EINVAL);
	g_assert_cmpint(rdmacm_mux_send_mad(m, gid_a, &addr, mad, 257, NULL), ==,
			-EINVAL);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(m), "257"));
	g_assert_cmpint(rdmacm_mux_send_mad(m, gid_a, &addr, mad, SIZE_MAX, NULL),
			==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_next_response(m, NULL), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_recv_mad(m, NULL), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_wait(m, 1, 0, NULL), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_wait(m, 0, 0, &resp), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_wait(m, 42, 0, &resp), ==, -ENOENT);
	g_assert_cmpint(rdmacm_mux_next_response(m, &resp), ==, -EAGAIN);
	g_assert_cmpint(rdmacm_mux_recv_mad(m, &in), ==, -EAGAIN);
	g_assert_cmpint(rdmacm_mux_get_events(m), ==, POLLIN);

	/* The script still expects its REG. */
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, NULL), ==, 0);
	g_assert_cmpint(wait_ok(m, 1), ==, 0);
}

/* ---- responses ---- */

static const int32_t wire_codes[] = {
	0, 1, 2, 3, 4, -EIO, -EDQUOT, 5, 99, -5000, INT32_MIN,
};
static const int mapped_codes[] = {
	0, -EINVAL, -EEXIST, -EACCES, -ENOENT, -EIO, -EDQUOT,
	-EPROTO, -EPROTO, -EPROTO, -EPROTO,
};

/* The base err_codes 0..4 as the library reports them. */
static const int small_errs[] = { 0, -EINVAL, -EEXIST, -EACCES, -ENOENT };

static void script_err_codes(Fixture *f)
{
	int fd = srv_accept(f);

	for (size_t i = 0; i < G_N_ELEMENTS(wire_codes); i++)
		srv_expect_reg(fd, gid_a, wire_codes[i]);
	srv_wait_eof(fd);
}

static void test_err_codes(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux *m;

	(void)data;
	G_STATIC_ASSERT(G_N_ELEMENTS(wire_codes) == G_N_ELEMENTS(mapped_codes));
	server_start(f, script_err_codes);
	m = open_base(f);
	for (size_t i = 0; i < G_N_ELEMENTS(wire_codes); i++) {
		uint32_t ticket;

		g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, &ticket), ==, 0);
		g_assert_cmpint(wait_ok(m, ticket), ==, mapped_codes[i]);
	}
}

static void script_send_mad(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_read_frame(fd, req);
	expect_mad_request(req, 256);
	srv_answer(fd, req, -EIO);
	srv_read_frame(fd, req);
	expect_mad_request(req, 24);
	srv_answer(fd, req, 0);
	srv_wait_eof(fd);
}

static void test_send_mad(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_mad_addr addr;
	struct rdmacm_mux_response resp;
	struct rdmacm_mux *m;
	uint8_t mad[256];
	uint32_t t1, t2;

	(void)data;
	server_start(f, script_send_mad);
	m = open_base(f);
	fill_addr(&addr);
	fill_mad(mad, sizeof(mad));
	g_assert_cmpint(rdmacm_mux_send_mad(m, gid_b, &addr, mad, 256, &t1), ==, 0);
	fill_mad(mad, 24);
	g_assert_cmpint(rdmacm_mux_send_mad(m, gid_b, &addr, mad, 24, &t2), ==, 0);
	g_assert_cmpuint(t2, >, t1);

	g_assert_cmpint(rdmacm_mux_wait(m, t1, WAIT_TIMEOUT_MS, &resp), ==, 0);
	g_assert_cmpuint(resp.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
	g_assert_cmpint(resp.error, ==, -EIO);
	g_assert_cmpint(wait_ok(m, t2), ==, 0);
}

/* Five requests in flight; the daemon answers only after reading them all. */
static void script_in_flight(Fixture *f)
{
	static const uint32_t ops[] = { GOLD_OP_REG, GOLD_OP_UNREG, GOLD_OP_MAD,
					GOLD_OP_REG, GOLD_OP_UNREG };
	uint8_t req[G_N_ELEMENTS(ops)][GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	for (size_t i = 0; i < G_N_ELEMENTS(ops); i++) {
		srv_read_frame(fd, req[i]);
		g_assert_cmpuint(gold_get_u32(req[i], GOLD_OFF_OP_CODE), ==, ops[i]);
	}
	for (size_t i = 0; i < G_N_ELEMENTS(ops); i++)
		srv_answer(fd, req[i], (int32_t)i);
	srv_wait_eof(fd);
}

static void test_in_flight(Fixture *f, gconstpointer data)
{
	static const uint32_t ops[] = {
		RDMACM_MUX_OP_CODE_REG, RDMACM_MUX_OP_CODE_UNREG,
		RDMACM_MUX_OP_CODE_MAD, RDMACM_MUX_OP_CODE_REG,
		RDMACM_MUX_OP_CODE_UNREG,
	};
	const int *errs = small_errs;
	struct rdmacm_mux_mad_addr addr;
	struct rdmacm_mux_response resp;
	struct rdmacm_mux *m;
	uint32_t t[5];
	uint8_t mad[64];

	(void)data;
	server_start(f, script_in_flight);
	m = open_base(f);
	fill_addr(&addr);
	fill_mad(mad, sizeof(mad));
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, &t[0]), ==, 0);
	g_assert_cmpint(rdmacm_mux_unregister_gid(m, gid_a, &t[1]), ==, 0);
	g_assert_cmpint(rdmacm_mux_send_mad(m, gid_b, &addr, mad, sizeof(mad), &t[2]),
			==, 0);
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_b, &t[3]), ==, 0);
	g_assert_cmpint(rdmacm_mux_unregister_gid(m, gid_b, &t[4]), ==, 0);
	for (size_t i = 1; i < 5; i++)
		g_assert_cmpuint(t[i], ==, t[i - 1] + 1);

	/* Waiting for the middle one leaves the others for next_response. */
	g_assert_cmpint(rdmacm_mux_wait(m, t[2], WAIT_TIMEOUT_MS, &resp), ==, 0);
	g_assert_cmpuint(resp.ticket, ==, t[2]);
	g_assert_cmpuint(resp.op_code, ==, ops[2]);
	g_assert_cmpint(resp.error, ==, errs[2]);
	g_assert_cmpint(rdmacm_mux_wait(m, t[2], 0, &resp), ==, -ENOENT);

	/* Then the last one; the rest stay queued, in order. */
	g_assert_cmpint(rdmacm_mux_wait(m, t[4], WAIT_TIMEOUT_MS, &resp), ==, 0);
	g_assert_cmpuint(resp.ticket, ==, t[4]);
	g_assert_cmpint(resp.error, ==, errs[4]);
	for (size_t i = 0; i < 4; i++) {
		if (i == 2)
			continue;
		g_assert_cmpint(rdmacm_mux_next_response(m, &resp), ==, 0);
		g_assert_cmpuint(resp.ticket, ==, t[i]);
		g_assert_cmpuint(resp.op_code, ==, ops[i]);
		g_assert_cmpint(resp.error, ==, errs[i]);
	}
	g_assert_cmpint(rdmacm_mux_next_response(m, &resp), ==, -EAGAIN);
}

/* ---- inbound MADs ---- */

/* Two MADs arrive before the RESP the client waits for. */
static void script_interleave(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE], in[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_read_frame(fd, req);
	expect_gid_request(req, GOLD_OP_REG, gid_a);
	build_inbound(in, gid_a, 256, 1);
	srv_write(fd, in, sizeof(in));
	build_inbound(in, gid_b, 100, 2);
	srv_write(fd, in, sizeof(in));
	srv_answer(fd, req, 0);
	build_inbound(in, gid_a, 24, 3);
	srv_write(fd, in, sizeof(in));
	srv_wait_eof(fd);
}

static void test_interleave(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux *m;

	(void)data;
	server_start(f, script_interleave);
	m = open_base(f);
	register_ok(m, gid_a);

	/* The MADs read while waiting were queued, in order. */
	g_assert_cmpint(rdmacm_mux_recv_mad(m, &in), ==, 0);
	check_inbound(&in, gid_a, 256, 1);
	g_assert_cmpint(rdmacm_mux_recv_mad(m, &in), ==, 0);
	check_inbound(&in, gid_b, 100, 2);
	PROCESS_UNTIL(m, rdmacm_mux_recv_mad(m, &in) == 0);
	check_inbound(&in, gid_a, 24, 3);
	g_assert_cmpint(rdmacm_mux_recv_mad(m, &in), ==, -EAGAIN);
	g_assert_cmpuint(rdmacm_mux_get_dropped(m), ==, 0);
}

/* Every byte in its own write: RESP and MADs must still come out whole. */
static void script_dribble(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE], in[GOLD_FRAME_SIZE];
	uint8_t both[2 * GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_read_frame_chunked(fd, req, 1);
	expect_gid_request(req, GOLD_OP_REG, gid_a);
	build_inbound(in, gid_a, 200, 7);
	srv_write_dribble(fd, in, sizeof(in));
	memcpy(both, req, GOLD_FRAME_SIZE);
	gold_put_u32(both, GOLD_OFF_MSG_TYPE, GOLD_MSG_RESP);
	gold_put_u32(both, GOLD_OFF_ERR_CODE, 2);
	build_inbound(both + GOLD_FRAME_SIZE, gid_a, 256, 8);
	/* A frame boundary in the middle of a write, too. */
	srv_write_dribble(fd, both, 100);
	srv_write(fd, both + 100, GOLD_FRAME_SIZE);
	srv_write_dribble(fd, both + 100 + GOLD_FRAME_SIZE, GOLD_FRAME_SIZE - 100);
	srv_wait_eof(fd);
}

static void test_dribble(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux *m;
	uint32_t ticket;

	(void)data;
	server_start(f, script_dribble);
	m = open_base(f);
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, &ticket), ==, 0);
	g_assert_cmpint(wait_ok(m, ticket), ==, -EEXIST);
	g_assert_cmpint(rdmacm_mux_recv_mad(m, &in), ==, 0);
	check_inbound(&in, gid_a, 200, 7);
	PROCESS_UNTIL(m, rdmacm_mux_recv_mad(m, &in) == 0);
	check_inbound(&in, gid_a, 256, 8);
}

/* The client's socket buffer is tiny and the daemon reads slowly. */
static void script_slow_reader(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	wait_queue(f->to_server);
	for (int i = 0; i < RDMACM_MUX_MAX_REQUESTS; i++) {
		srv_read_frame_chunked(fd, req, 7);
		expect_gid_request(req, i % 2 ? GOLD_OP_UNREG : GOLD_OP_REG,
				   gid_b);
		srv_answer(fd, req, i % 5);
	}
	srv_wait_eof(fd);
}

static void test_partial_write(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_response resp;
	struct rdmacm_mux *m;
	uint32_t first = 0, last = 0;
	int sndbuf = 1;

	(void)data;
	server_start(f, script_slow_reader);
	m = open_base(f);
	g_assert_cmpint(setsockopt(rdmacm_mux_get_fd(m), SOL_SOCKET, SO_SNDBUF,
				   &sndbuf, sizeof(sndbuf)),
			==, 0);
	for (int i = 0; i < RDMACM_MUX_MAX_REQUESTS; i++) {
		uint32_t t;

		if (i % 2)
			g_assert_cmpint(rdmacm_mux_unregister_gid(m, gid_b, &t), ==, 0);
		else
			g_assert_cmpint(rdmacm_mux_register_gid(m, gid_b, &t), ==, 0);
		if (!first)
			first = t;
		last = t;
	}
	/* Full: the 65th request has no room. */
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_b, NULL), ==, -ENOBUFS);

	/* 64 frames do not fit in the minimum send buffer. */
	g_assert_cmpint(rdmacm_mux_process(m), ==, 0);
	g_assert_cmpint(rdmacm_mux_get_events(m), ==, POLLIN | POLLOUT);
	signal_queue(f->to_server);

	g_assert_cmpint(wait_ok(m, last), ==,
			small_errs[(RDMACM_MUX_MAX_REQUESTS - 1) % 5]);
	for (int i = 0; i < RDMACM_MUX_MAX_REQUESTS - 1; i++) {
		g_assert_cmpint(rdmacm_mux_next_response(m, &resp), ==, 0);
		g_assert_cmpuint(resp.ticket, ==, first + (uint32_t)i);
		g_assert_cmpint(resp.error, ==, small_errs[i % 5]);
	}
	g_assert_cmpint(rdmacm_mux_next_response(m, &resp), ==, -EAGAIN);
	g_assert_cmpint(rdmacm_mux_get_events(m), ==, POLLIN);
}

/* ---- the daemon goes away ---- */

static void script_close_mid_frame(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE], in[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_read_frame(fd, req);
	build_inbound(in, gid_a, 256, 5);
	srv_write(fd, in, sizeof(in));
	gold_put_u32(req, GOLD_OFF_MSG_TYPE, GOLD_MSG_RESP);
	srv_write(fd, req, 100);
	close(fd);
}

static void test_close_mid_frame(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_response resp;
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux *m;
	uint32_t ticket;

	(void)data;
	server_start(f, script_close_mid_frame);
	m = open_base(f);
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, &ticket), ==, 0);
	g_assert_cmpint(rdmacm_mux_wait(m, ticket, WAIT_TIMEOUT_MS, &resp), ==,
			-ECONNRESET);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(m), "middle of a frame"));

	/* What arrived whole is still there; then the error, for good. */
	g_assert_cmpint(rdmacm_mux_recv_mad(m, &in), ==, 0);
	check_inbound(&in, gid_a, 256, 5);
	g_assert_cmpint(rdmacm_mux_recv_mad(m, &in), ==, -ECONNRESET);
	g_assert_cmpint(rdmacm_mux_next_response(m, &resp), ==, -ECONNRESET);
	g_assert_cmpint(rdmacm_mux_process(m), ==, -ECONNRESET);
	g_assert_cmpint(rdmacm_mux_wait(m, ticket, 0, &resp), ==, -ECONNRESET);
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, NULL), ==, -ECONNRESET);
	g_assert_cmpint(rdmacm_mux_get_events(m), ==, POLLIN);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(m), "middle of a frame"));
}

static void script_close_at_once(Fixture *f)
{
	close(srv_accept(f));
	signal_queue(f->to_client);
}

/* Writing to a closed peer must give -EPIPE, never SIGPIPE. */
static void test_close_no_sigpipe(Fixture *f, gconstpointer data)
{
	struct sigaction sa = { .sa_handler = SIG_DFL }, old;
	struct rdmacm_mux *m;
	struct pollfd pfd;
	int r;

	(void)data;
	g_assert_cmpint(sigaction(SIGPIPE, &sa, &old), ==, 0);
	server_start(f, script_close_at_once);
	m = open_base(f);
	wait_queue(f->to_client);
	pfd = (struct pollfd){ .fd = rdmacm_mux_get_fd(m), .events = POLLIN };
	g_assert_cmpint(poll(&pfd, 1, 5000), ==, 1);

	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, NULL), ==, 0);
	r = rdmacm_mux_process(m);
	g_assert_true(r == -EPIPE || r == -ECONNRESET);
	g_assert_cmpint(rdmacm_mux_process(m), ==, r);
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, NULL), ==, r);
	g_assert_cmpint(sigaction(SIGPIPE, &old, NULL), ==, 0);
}

static void script_answer_then_close(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_read_frame(fd, req);
	wait_queue(f->to_server);
	srv_answer(fd, req, 2);
	close(fd);
	signal_queue(f->to_client);
}

/* The daemon answered and died before our next write: the answer that
 * made it into the socket is still delivered. */
static void test_close_answer_survives(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_response resp;
	struct rdmacm_mux *m;
	uint32_t t1, t2;
	int r;

	(void)data;
	server_start(f, script_answer_then_close);
	m = open_base(f);
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, &t1), ==, 0);
	/* The request is out; only then may the daemon answer and die. */
	g_assert_cmpint(rdmacm_mux_process(m), ==, 0);
	g_assert_cmpint(rdmacm_mux_get_events(m), ==, POLLIN);
	signal_queue(f->to_server);
	wait_queue(f->to_client);

	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_b, &t2), ==, 0);
	r = rdmacm_mux_process(m);
	g_assert_true(r == -EPIPE || r == -ECONNRESET);
	g_assert_cmpint(rdmacm_mux_next_response(m, &resp), ==, 0);
	g_assert_cmpuint(resp.ticket, ==, t1);
	g_assert_cmpint(resp.error, ==, -EEXIST);
	g_assert_cmpint(rdmacm_mux_next_response(m, &resp), ==, r);
	g_assert_cmpint(rdmacm_mux_wait(m, t2, 0, &resp), ==, r);
}

/* ---- protocol violations from the daemon ---- */

enum bad_frame {
	BAD_MSG_TYPE,
	BAD_REQ_OP,
	BAD_RESP_OP,
	BAD_UNSOLICITED_RESP,
	BAD_INBOUND_LEN_LONG,
	BAD_INBOUND_LEN_SHORT,
	BAD_RESP_LEN,
	BAD_COUNT
};

static void script_bad_frames(Fixture *f)
{
	for (int kind = 0; kind < BAD_COUNT; kind++) {
		uint8_t req[GOLD_FRAME_SIZE], bad[GOLD_FRAME_SIZE] = { 0 };
		int fd = srv_accept(f);

		srv_read_frame(fd, req);
		switch (kind) {
		case BAD_MSG_TYPE:
			gold_frame_hdr(bad, 7, GOLD_OP_REG, gid_a, 0, 0);
			break;
		case BAD_REQ_OP:
			gold_frame_hdr(bad, GOLD_MSG_REQ, GOLD_OP_REG, gid_a, 0, 0);
			break;
		case BAD_RESP_OP:
			memcpy(bad, req, sizeof(bad));
			gold_put_u32(bad, GOLD_OFF_MSG_TYPE, GOLD_MSG_RESP);
			gold_put_u32(bad, GOLD_OFF_OP_CODE, GOLD_OP_UNREG);
			break;
		case BAD_UNSOLICITED_RESP:
			srv_answer(fd, req, 0);
			memcpy(bad, req, sizeof(bad));
			gold_put_u32(bad, GOLD_OFF_MSG_TYPE, GOLD_MSG_RESP);
			break;
		case BAD_INBOUND_LEN_LONG:
			build_inbound(bad, gid_a, 300, 0);
			break;
		case BAD_INBOUND_LEN_SHORT:
			build_inbound(bad, gid_a, 23, 0);
			break;
		default:
			memcpy(bad, req, sizeof(bad));
			gold_put_u32(bad, GOLD_OFF_MSG_TYPE, GOLD_MSG_RESP);
			gold_put_u32(bad, GOLD_OFF_UMAD_LEN, (uint32_t)-1);
			break;
		}
		srv_write(fd, bad, sizeof(bad));
		srv_wait_eof(fd);
	}
}

static void test_bad_frames(Fixture *f, gconstpointer data)
{
	static const char *const why[BAD_COUNT] = {
		"msg_type 7", "request with op_code", "answered op_code",
		"no request outstanding", "umad_len 300", "umad_len 23",
		"umad_len -1",
	};

	(void)data;
	server_start(f, script_bad_frames);
	for (int kind = 0; kind < BAD_COUNT; kind++) {
		struct rdmacm_mux_response resp;
		struct rdmacm_mux *m;
		uint32_t ticket;
		int r;

		m = open_base(f);
		g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, &ticket), ==, 0);
		r = rdmacm_mux_wait(m, ticket, WAIT_TIMEOUT_MS, &resp);
		if (kind == BAD_UNSOLICITED_RESP) {
			g_assert_cmpint(r, ==, 0);
			PROCESS_UNTIL(m, rdmacm_mux_process(m) == -EPROTO);
		} else {
			g_assert_cmpint(r, ==, -EPROTO);
		}
		if (!strstr(rdmacm_mux_last_error(m), why[kind]))
			g_error("case %d: last_error \"%s\" lacks \"%s\"", kind,
				rdmacm_mux_last_error(m), why[kind]);
		/* Sticky, and the fd wakes pollers up. */
		g_assert_cmpint(rdmacm_mux_process(m), ==, -EPROTO);
		g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, NULL), ==, -EPROTO);
		rdmacm_mux_close(m);
		f->m = NULL;
	}
}

/* ---- bounded queues ---- */

#define OVERFLOW_EXTRA 10

static void script_flood(Fixture *f)
{
	uint8_t in[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	for (uint32_t i = 0; i < RDMACM_MUX_MAX_INBOUND + OVERFLOW_EXTRA; i++) {
		build_inbound(in, gid_a, 256, i);
		srv_write(fd, in, sizeof(in));
	}
	wait_queue(f->to_server);
	build_inbound(in, gid_a, 64, 9999);
	srv_write(fd, in, sizeof(in));
	srv_wait_eof(fd);
}

static void test_inbound_overflow(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux *m;
	gboolean saw_enobufs = FALSE;
	gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;

	(void)data;
	server_start(f, script_flood);
	m = open_base(f);
	while (rdmacm_mux_get_dropped(m) < OVERFLOW_EXTRA) {
		struct pollfd pfd = { .fd = rdmacm_mux_get_fd(m), .events = POLLIN };
		int r;

		g_assert_cmpint(g_get_monotonic_time(), <, end);
		g_assert_cmpint(poll(&pfd, 1, 1000), >=, 0);
		r = rdmacm_mux_process(m);
		if (r == -ENOBUFS) {
			saw_enobufs = TRUE;
			g_assert_nonnull(strstr(rdmacm_mux_last_error(m), "dropped"));
		} else {
			g_assert_cmpint(r, >=, 0);
		}
	}
	/* If the last drop came with the last read, it is reported now. */
	if (!saw_enobufs)
		g_assert_cmpint(rdmacm_mux_process(m), ==, -ENOBUFS);
	g_assert_cmpint(rdmacm_mux_process(m), ==, 0);
	g_assert_cmpuint(rdmacm_mux_get_dropped(m), ==, OVERFLOW_EXTRA);

	/* The oldest ones were kept, in order. */
	for (uint32_t i = 0; i < RDMACM_MUX_MAX_INBOUND; i++) {
		g_assert_cmpint(rdmacm_mux_recv_mad(m, &in), ==, 0);
		check_inbound(&in, gid_a, 256, i);
	}
	g_assert_cmpint(rdmacm_mux_recv_mad(m, &in), ==, -EAGAIN);

	/* Drained: the handle works as before. */
	signal_queue(f->to_server);
	PROCESS_UNTIL(m, rdmacm_mux_recv_mad(m, &in) == 0);
	check_inbound(&in, gid_a, 64, 9999);
	g_assert_cmpuint(rdmacm_mux_get_dropped(m), ==, OVERFLOW_EXTRA);
}

/* ---- waiting ---- */

static void script_late_answer(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_read_frame(fd, req);
	wait_queue(f->to_server);
	srv_answer(fd, req, 4);
	srv_wait_eof(fd);
}

static void test_wait_timeout(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_response resp;
	struct rdmacm_mux *m;
	gint64 start;
	uint32_t ticket;

	(void)data;
	server_start(f, script_late_answer);
	m = open_base(f);
	g_assert_cmpint(rdmacm_mux_unregister_gid(m, gid_a, &ticket), ==, 0);

	start = g_get_monotonic_time();
	g_assert_cmpint(rdmacm_mux_wait(m, ticket, 100, &resp), ==, -ETIMEDOUT);
	g_assert_cmpint(g_get_monotonic_time() - start, >=, 90 * 1000);
	g_assert_cmpint(rdmacm_mux_next_response(m, &resp), ==, -EAGAIN);

	/* Still pending: the answer comes to a second wait. */
	signal_queue(f->to_server);
	g_assert_cmpint(rdmacm_mux_wait(m, ticket, -1, &resp), ==, 0);
	g_assert_cmpuint(resp.op_code, ==, RDMACM_MUX_OP_CODE_UNREG);
	g_assert_cmpint(resp.error, ==, -ENOENT);
}

/* An event-loop caller: poll, process, collect; never rdmacm_mux_wait(). */
static void script_event_loop(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE], in[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_expect_hello(fd, req);
	srv_answer_hello(fd, req, 3);
	for (uint32_t i = 0; i < 20; i++) {
		srv_read_frame(fd, req);
		build_inbound(in, gid_b, 256, i);
		srv_write(fd, in, sizeof(in));
		srv_answer(fd, req, 0);
	}
	srv_wait_eof(fd);
}

static void test_event_loop(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_response resp;
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux *m = NULL;
	uint32_t answers = 0, mads = 0, next = 0;

	(void)data;
	server_start(f, script_event_loop);
	m = open_with(f, 0);

	while (answers < 20 || mads < 20) {
		struct pollfd pfd = {
			.fd = rdmacm_mux_get_fd(m),
			.events = rdmacm_mux_get_events(m),
		};

		/* Two requests in flight at a time. */
		while (next < 20 && next < answers + 2) {
			g_assert_cmpint(rdmacm_mux_register_gid(m, gid_b, NULL), ==, 0);
			next++;
			pfd.events = rdmacm_mux_get_events(m);
			g_assert_true(pfd.events & POLLOUT);
		}
		g_assert_cmpint(poll(&pfd, 1, 5000), >, 0);
		g_assert_cmpint(rdmacm_mux_process(m), >=, 0);
		while (rdmacm_mux_next_response(m, &resp) == 0) {
			/* The HELLO used ticket 1. */
			g_assert_cmpuint(resp.ticket, ==, answers + 2);
			g_assert_cmpint(resp.error, ==, 0);
			answers++;
		}
		while (rdmacm_mux_recv_mad(m, &in) == 0) {
			check_inbound(&in, gid_b, 256, mads);
			mads++;
		}
	}
}

/* ---- reconnection (RDMACM_MUX_OPEN_RECONNECT) ---- */

#define OPEN_RECONNECT RDMACM_MUX_OPEN_RECONNECT

static struct rdmacm_mux *open_reconnect(Fixture *f, unsigned flags,
					 uint32_t initial_ms, uint32_t max_ms,
					 uint32_t jitter)
{
	struct rdmacm_mux *m = NULL;

	g_assert_cmpint(rdmacm_mux_open(f->path, OPEN_RECONNECT | flags,
					OPEN_TIMEOUT_MS, &m),
			==, 0);
	f->m = m;
	g_assert_cmpint(rdmacm_mux_set_reconnect_backoff(m, initial_ms, max_ms,
							 jitter),
			==, 0);
	return m;
}

/*
 * Run an event loop on @m until it reports an event. With @use_timeout the
 * loop sleeps for rdmacm_mux_get_timeout(), as an sd-bus style caller does;
 * without, it polls the fd alone, which must then wake up by itself.
 */
static void pump_event(struct rdmacm_mux *m, gboolean use_timeout,
		       struct rdmacm_mux_event *ev)
{
	gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;

	while (rdmacm_mux_next_event(m, ev) != 0) {
		g_assert_cmpint(g_get_monotonic_time(), <, end);
		pump_once(m, use_timeout);
	}
}

static void expect_event(struct rdmacm_mux *m, gboolean use_timeout,
			 uint32_t type, struct rdmacm_mux_event *ev)
{
	pump_event(m, use_timeout, ev);
	if (ev->type != type)
		g_error("expected event %u, got %u (error %d)", type, ev->type,
			ev->error);
}

static void script_reconnect(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE], in[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_expect_hello(fd, req);
	srv_answer_hello(fd, req, 3);
	srv_expect_reg(fd, gid_a, 0);
	srv_expect_reg(fd, gid_b, 0);
	srv_expect_reg(fd, gid_c, 0);
	srv_expect_reg(fd, gid_remote, 3); /* EACCES: not ours */
	srv_read_frame(fd, req);
	expect_gid_request(req, GOLD_OP_UNREG, gid_c);
	srv_answer(fd, req, 0);

	/* A MAD, then the daemon dies. */
	wait_queue(f->to_server);
	build_inbound(in, gid_a, 256, 77);
	srv_write(fd, in, sizeof(in));
	srv_stop_listening(f);
	close(fd);
	signal_queue(f->to_client);

	/* A new daemon, once the client saw the break. */
	wait_queue(f->to_server);
	srv_listen_again(f);
	fd = srv_accept(f);
	srv_expect_hello(fd, req);
	srv_answer_hello(fd, req, 1); /* it grants less this time */
	/* What was registered, in order; not gid_c, not gid_remote. */
	srv_expect_reg(fd, gid_a, 0);
	srv_expect_reg(fd, gid_b, 0);
	/* Then the client's own requests again. */
	srv_expect_reg(fd, gid_c, 0);
	srv_expect_eof(fd);
}

static void test_reconnect(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_event ev;
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux *m;
	uint32_t t;
	int fd, timeout;

	(void)data;
	server_start(f, script_reconnect);
	m = open_reconnect(f, 0, 50, 200, 0);
	fd = rdmacm_mux_get_fd(m);
	g_assert_cmpuint(rdmacm_mux_get_capabilities(m), ==, RDMACM_MUX_CAP_ALL);

	register_ok(m, gid_a);
	register_ok(m, gid_b);
	register_ok(m, gid_c);
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_remote, &t), ==, 0);
	g_assert_cmpint(wait_ok(m, t), ==, -EACCES);
	g_assert_cmpint(rdmacm_mux_unregister_gid(m, gid_c, &t), ==, 0);
	g_assert_cmpint(wait_ok(m, t), ==, 0);
	g_assert_cmpint(rdmacm_mux_get_timeout(m, &timeout), ==, 0);
	g_assert_cmpint(timeout, ==, -1);
	signal_queue(f->to_server);

	wait_queue(f->to_client);
	/* The break is an event, not an error. */
	expect_event(m, FALSE, RDMACM_MUX_EVENT_DISCONNECTED, &ev);
	g_assert_cmpint(ev.error, ==, -ECONNRESET);
	g_assert_cmpuint(ev.requests_failed, ==, 0);
	g_assert_cmpint(rdmacm_mux_next_event(m, &ev), ==, -EAGAIN);
	/* The MAD that came before the break is still there. */
	g_assert_cmpint(rdmacm_mux_recv_mad(m, &in), ==, 0);
	check_inbound(&in, gid_a, 256, 77);
	g_assert_cmpint(rdmacm_mux_recv_mad(m, &in), ==, -EAGAIN);
	/* No requests while away; a timer instead of a socket to watch. */
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_c, NULL), ==, -ENOTCONN);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(m), "reconnecting"));
	g_assert_cmpint(rdmacm_mux_get_timeout(m, &timeout), ==, 0);
	g_assert_cmpint(timeout, >=, 0);
	g_assert_cmpint(timeout, <=, 50);
	g_assert_cmpint(rdmacm_mux_get_events(m), ==, POLLIN);

	/* Failed attempts (no socket file) go unreported... */
	for (int i = 0; i < 3; i++) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		g_assert_cmpint(poll(&pfd, 1, 5000), ==, 1);
		g_assert_cmpint(rdmacm_mux_process(m), ==, 0);
	}
	if (!strstr(rdmacm_mux_last_error(m), f->path))
		g_error("last error: %s", rdmacm_mux_last_error(m));
	g_assert_cmpint(rdmacm_mux_next_event(m, &ev), ==, -EAGAIN);

	/* ...until the new daemon is there. The fd alone wakes the loop. */
	signal_queue(f->to_server);
	expect_event(m, FALSE, RDMACM_MUX_EVENT_RECONNECTED, &ev);
	g_assert_cmpint(ev.error, ==, 0);
	g_assert_cmpuint(ev.gids_registered, ==, 2);
	g_assert_cmpuint(ev.gids_failed, ==, 0);
	g_assert_cmpuint(ev.attempts, >=, 4);
	g_assert_cmpint(rdmacm_mux_next_event(m, &ev), ==, -EAGAIN);
	g_assert_cmpint(rdmacm_mux_get_fd(m), ==, fd);
	g_assert_cmpuint(rdmacm_mux_get_capabilities(m), ==, RDMACM_MUX_CAP_ERRNO);
	g_assert_cmpint(rdmacm_mux_get_timeout(m, &timeout), ==, 0);
	g_assert_cmpint(timeout, ==, -1);

	register_ok(m, gid_c);
}

static void script_in_flight_fail(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE], r2[GOLD_FRAME_SIZE];
	int fd = srv_accept(f);

	srv_expect_reg(fd, gid_a, 0);
	/* Three requests arrive; only the first is answered. */
	srv_expect_reg(fd, gid_b, 0);
	srv_read_frame(fd, req);
	expect_gid_request(req, GOLD_OP_UNREG, gid_a);
	srv_read_frame(fd, r2);
	g_assert_cmpuint(gold_get_u32(r2, GOLD_OFF_OP_CODE), ==, GOLD_OP_MAD);
	wait_queue(f->to_server);
	close(fd);

	/* Base protocol: no HELLO; gid_a was being unregistered, so only
	 * gid_b comes back; and the MAD is not resent. */
	srv_expect_back_with(f, gid_b);
}

static void test_reconnect_in_flight(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_mad_addr addr;
	struct rdmacm_mux_response resp;
	struct rdmacm_mux_event ev;
	struct rdmacm_mux *m;
	uint8_t mad[64];
	uint32_t t[3];

	(void)data;
	server_start(f, script_in_flight_fail);
	m = open_reconnect(f, RDMACM_MUX_OPEN_BASE_PROTOCOL, 20, 100, 0);
	register_ok(m, gid_a);

	fill_addr(&addr);
	fill_mad(mad, sizeof(mad));
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_b, &t[0]), ==, 0);
	g_assert_cmpint(rdmacm_mux_unregister_gid(m, gid_a, &t[1]), ==, 0);
	g_assert_cmpint(rdmacm_mux_send_mad(m, gid_a, &addr, mad, sizeof(mad), &t[2]),
			==, 0);
	/* The first answer arrives, the other two are in flight. */
	PROCESS_UNTIL(m, rdmacm_mux_next_response(m, &resp) == 0);
	g_assert_cmpuint(resp.ticket, ==, t[0]);
	g_assert_cmpint(resp.error, ==, 0);
	signal_queue(f->to_server);

	expect_event(m, TRUE, RDMACM_MUX_EVENT_DISCONNECTED, &ev);
	g_assert_cmpuint(ev.requests_failed, ==, 2);
	/* They completed with -ECONNRESET, in or out of order. */
	g_assert_cmpint(rdmacm_mux_wait(m, t[2], 0, &resp), ==, 0);
	g_assert_cmpuint(resp.ticket, ==, t[2]);
	g_assert_cmpuint(resp.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
	g_assert_cmpint(resp.error, ==, -ECONNRESET);
	g_assert_cmpint(rdmacm_mux_next_response(m, &resp), ==, 0);
	g_assert_cmpuint(resp.ticket, ==, t[1]);
	g_assert_cmpuint(resp.op_code, ==, RDMACM_MUX_OP_CODE_UNREG);
	g_assert_cmpint(resp.error, ==, -ECONNRESET);
	g_assert_cmpint(rdmacm_mux_next_response(m, &resp), ==, -EAGAIN);

	expect_event(m, TRUE, RDMACM_MUX_EVENT_RECONNECTED, &ev);
	g_assert_cmpuint(ev.gids_registered, ==, 1);
	g_assert_cmpuint(ev.gids_failed, ==, 0);
	g_assert_cmpuint(ev.attempts, ==, 1);
	g_assert_cmpuint(rdmacm_mux_get_capabilities(m), ==, 0);
	/* The re-registration is internal: no response for it. */
	g_assert_cmpint(rdmacm_mux_next_response(m, &resp), ==, -EAGAIN);
	g_assert_cmpint(rdmacm_mux_next_event(m, &ev), ==, -EAGAIN);
}

static void script_unreg_away(Fixture *f)
{
	int fd = srv_accept(f);

	srv_expect_reg(fd, gid_a, 0);
	srv_expect_reg(fd, gid_b, 0);
	wait_queue(f->to_server);
	srv_stop_listening(f);
	close(fd);

	/* Back once the client gave gid_a up while it was away: only gid_b
	 * is registered again. */
	wait_queue(f->to_server);
	srv_listen_again(f);
	srv_expect_back_with(f, gid_b);
}

/* A GID given up while reconnecting (the call fails with -ENOTCONN, as QEMU
 * sees when a guest drops an address during a daemon restart) must not come
 * back with the reconnection. */
static void test_reconnect_unreg_away(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_event ev;
	struct rdmacm_mux *m;
	uint32_t t;

	(void)data;
	server_start(f, script_unreg_away);
	m = open_reconnect(f, RDMACM_MUX_OPEN_BASE_PROTOCOL, 10, 50, 0);
	register_ok(m, gid_a);
	register_ok(m, gid_b);
	signal_queue(f->to_server);

	expect_event(m, TRUE, RDMACM_MUX_EVENT_DISCONNECTED, &ev);
	g_assert_cmpint(rdmacm_mux_unregister_gid(m, gid_a, &t), ==, -ENOTCONN);
	signal_queue(f->to_server);
	expect_event(m, TRUE, RDMACM_MUX_EVENT_RECONNECTED, &ev);
	g_assert_cmpuint(ev.gids_registered, ==, 1);
	g_assert_cmpuint(ev.gids_failed, ==, 0);
	g_assert_cmpint(rdmacm_mux_next_event(m, &ev), ==, -EAGAIN);
}

typedef struct {
	uint32_t initial_ms, max_ms, jitter;
	int crashes; /* connections the daemon drops before it stays up */
} BackoffCase;

static const BackoffCase backoff_exact = { 20, 80, 0, 6 };
static const BackoffCase backoff_jitter = { 40, 40, 50, 5 };

static void script_crash_loop(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd = srv_accept(f), crashes;

	srv_expect_hello(fd, req);
	srv_answer_hello(fd, req, 3);
	srv_expect_reg(fd, gid_a, 0);
	crashes = GPOINTER_TO_INT(g_async_queue_pop(f->to_server));
	f->closed_at = g_get_monotonic_time();
	close(fd);

	/* A daemon that dies right after accepting, again and again. */
	for (int i = 0; i <= crashes; i++) {
		fd = srv_accept(f);
		f->accepted_at[f->n_accepted++] = g_get_monotonic_time();
		if (i < crashes)
			close(fd);
	}
	srv_expect_hello(fd, req);
	srv_answer_hello(fd, req, 3);
	srv_expect_reg(fd, gid_a, 0);
	srv_expect_eof(fd);
}

static void test_reconnect_backoff(Fixture *f, gconstpointer data)
{
	const BackoffCase *c = data;
	struct rdmacm_mux_event ev;
	struct rdmacm_mux *m;
	gint64 prev;

	server_start(f, script_crash_loop);
	m = open_reconnect(f, 0, c->initial_ms, c->max_ms, c->jitter);
	register_ok(m, gid_a);
	g_async_queue_push(f->to_server, GINT_TO_POINTER(c->crashes));

	expect_event(m, TRUE, RDMACM_MUX_EVENT_DISCONNECTED, &ev);
	/* Each crash is a failed attempt, not a new outage. */
	expect_event(m, TRUE, RDMACM_MUX_EVENT_RECONNECTED, &ev);
	g_assert_cmpuint(ev.attempts, ==, (uint32_t)c->crashes + 1);
	g_assert_cmpuint(ev.gids_registered, ==, 1);
	g_assert_cmpint(rdmacm_mux_next_event(m, &ev), ==, -EAGAIN);
	g_assert_cmpint(f->n_accepted, ==, c->crashes + 1);

	/* Attempt n comes no earlier than min(initial * 2^(n-1), max) less
	 * the jitter after the previous failure (1 ms for clock rounding),
	 * and the cap holds. */
	prev = f->closed_at;
	for (int i = 0; i < f->n_accepted; i++) {
		uint64_t base = c->initial_ms;
		gint64 gap_ms = (f->accepted_at[i] - prev) / 1000;

		for (int k = 0; k < i && base < c->max_ms; k++)
			base *= 2;
		base = MIN(base, c->max_ms);
		if (gap_ms < (gint64)(base - base * c->jitter / 100) - 1)
			g_error("attempt %d came %" G_GINT64_FORMAT " ms after "
				"the previous failure; the backoff is %" G_GUINT64_FORMAT
				" ms less %u%%",
				i + 1, gap_ms, base, c->jitter);
		/* Without the cap the last delay would be 1280 ms. */
		if (i == f->n_accepted - 1 && c->max_ms < 100)
			g_assert_cmpint(gap_ms, <, 1000);
		prev = f->accepted_at[i];
	}
}

static void script_gid_lost(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd = srv_accept_greeted(f, req);

	srv_expect_reg(fd, gid_a, 0);
	srv_expect_reg(fd, gid_b, 0);
	wait_queue(f->to_server);
	close(fd);

	/* Another client took gid_a meanwhile. */
	fd = srv_accept_greeted(f, req);
	srv_expect_reg(fd, gid_a, 3);
	srv_expect_reg(fd, gid_b, 0);
	wait_queue(f->to_server);
	close(fd);

	/* This one dies in the middle of the re-registration. */
	fd = srv_accept_greeted(f, req);
	srv_read_frame(fd, req);
	expect_gid_request(req, GOLD_OP_REG, gid_b);
	close(fd);

	/* gid_a is forgotten for good. */
	fd = srv_accept_greeted(f, req);
	srv_expect_reg(fd, gid_b, 2); /* EEXIST counts as registered */
	srv_expect_eof(fd);
}

static void test_reconnect_gid_lost(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_event ev;
	struct rdmacm_mux *m;

	(void)data;
	server_start(f, script_gid_lost);
	m = open_reconnect(f, 0, 10, 50, 10);
	register_ok(m, gid_a);
	register_ok(m, gid_b);
	signal_queue(f->to_server);

	expect_event(m, TRUE, RDMACM_MUX_EVENT_DISCONNECTED, &ev);
	expect_event(m, TRUE, RDMACM_MUX_EVENT_GID_LOST, &ev);
	g_assert_cmpmem(ev.gid, IB_GID_LEN, gid_a, IB_GID_LEN);
	g_assert_cmpint(ev.error, ==, -EACCES);
	expect_event(m, TRUE, RDMACM_MUX_EVENT_RECONNECTED, &ev);
	g_assert_cmpuint(ev.gids_registered, ==, 1);
	g_assert_cmpuint(ev.gids_failed, ==, 1);
	g_assert_cmpuint(ev.attempts, ==, 1);
	signal_queue(f->to_server);

	/* A break during the re-registration is one more attempt. */
	expect_event(m, TRUE, RDMACM_MUX_EVENT_DISCONNECTED, &ev);
	expect_event(m, TRUE, RDMACM_MUX_EVENT_RECONNECTED, &ev);
	g_assert_cmpuint(ev.attempts, ==, 2);
	g_assert_cmpuint(ev.gids_registered, ==, 1);
	g_assert_cmpuint(ev.gids_failed, ==, 0);
	g_assert_cmpint(rdmacm_mux_next_event(m, &ev), ==, -EAGAIN);
}

static void script_close_then_listen(Fixture *f)
{
	struct pollfd pfd;

	close(srv_accept(f));
	signal_queue(f->to_client);
	/* The client had its chance to come back; it must not have. */
	wait_queue(f->to_server);
	pfd = (struct pollfd){ .fd = f->listen_fd, .events = POLLIN };
	g_assert_cmpint(poll(&pfd, 1, 0), ==, 0);
}

/* Without the flag a broken connection stays broken, as in 1.0. */
static void test_reconnect_off_by_default(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_event ev;
	struct rdmacm_mux *m;
	gint64 end;
	int timeout, r;

	(void)data;
	server_start(f, script_close_then_listen);
	m = open_base(f);
	g_assert_cmpint(rdmacm_mux_set_reconnect_backoff(m, 1, 1, 0), ==,
			-EOPNOTSUPP);
	g_assert_cmpint(rdmacm_mux_next_event(m, &ev), ==, -EAGAIN);
	wait_queue(f->to_client);
	end = g_get_monotonic_time() + 300 * 1000;
	while (g_get_monotonic_time() < end) {
		struct pollfd pfd = { .fd = rdmacm_mux_get_fd(m), .events = POLLIN };

		(void)poll(&pfd, 1, 50);
		r = rdmacm_mux_process(m);
		g_assert_cmpint(r, ==, -ECONNRESET);
	}
	g_assert_cmpint(rdmacm_mux_next_event(m, &ev), ==, -ECONNRESET);
	g_assert_cmpint(rdmacm_mux_get_timeout(m, &timeout), ==, 0);
	g_assert_cmpint(timeout, ==, -1);
	signal_queue(f->to_server);
}

static void test_reconnect_args(Fixture *f, gconstpointer data)
{
	struct rdmacm_mux_event ev;
	struct rdmacm_mux *m;
	int timeout, type;
	socklen_t len = sizeof(type);

	(void)data;
	g_assert_cmpint(rdmacm_mux_next_event(NULL, &ev), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_get_timeout(NULL, &timeout), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_set_reconnect_backoff(NULL, 1, 1, 0), ==, -EINVAL);

	server_start(f, script_base);
	m = open_reconnect(f, RDMACM_MUX_OPEN_BASE_PROTOCOL, 1, 1, 0);
	g_assert_cmpint(rdmacm_mux_next_event(m, NULL), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_get_timeout(m, NULL), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_set_reconnect_backoff(m, 0, 10, 0), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_set_reconnect_backoff(m, 20, 10, 0), ==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_set_reconnect_backoff(m, 1, 3600 * 1000 + 1, 0),
			==, -EINVAL);
	g_assert_cmpint(rdmacm_mux_set_reconnect_backoff(m, 1, 10, 101), ==, -EINVAL);
	g_assert_nonnull(strstr(rdmacm_mux_last_error(m), "jitter"));
	g_assert_cmpint(rdmacm_mux_set_reconnect_backoff(m, 3600 * 1000,
							 3600 * 1000, 100),
			==, 0);
	g_assert_cmpint(rdmacm_mux_next_event(m, &ev), ==, -EAGAIN);

	/* The fd is an epoll set, not the socket, and asks for POLLIN only,
	 * even with output queued. */
	g_assert_cmpint(getsockopt(rdmacm_mux_get_fd(m), SOL_SOCKET, SO_TYPE,
				   &type, &len),
			==, -1);
	g_assert_cmpint(errno, ==, ENOTSOCK);
	g_assert_true(fcntl(rdmacm_mux_get_fd(m), F_GETFD) & FD_CLOEXEC);
	g_assert_cmpint(rdmacm_mux_register_gid(m, gid_a, NULL), ==, 0);
	g_assert_cmpint(rdmacm_mux_get_events(m), ==, POLLIN);
	g_assert_cmpint(wait_ok(m, 1), ==, 0);
	g_assert_cmpint(rdmacm_mux_get_timeout(m, &timeout), ==, 0);
	g_assert_cmpint(timeout, ==, -1);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);

#define ADD(path, fn)                                                          \
	g_test_add("/client-lib/" path, Fixture, NULL, fixture_setup, fn,     \
		   fixture_teardown)
	ADD("open/base-protocol", test_open_base);
	ADD("open/hello", test_open_hello);
	ADD("open/hello-partial-grant", test_open_hello_partial);
	ADD("open/hello-fallback-qemu", test_open_hello_fallback);
	ADD("open/hello-refused", test_open_hello_refused);
	ADD("open/hello-timeout", test_open_hello_timeout);
	ADD("open/no-daemon", test_open_no_daemon);
	ADD("args/bad-arguments", test_bad_args);
	ADD("response/err-code-mapping", test_err_codes);
	ADD("response/send-mad", test_send_mad);
	ADD("response/in-flight", test_in_flight);
	ADD("inbound/interleaved-with-response", test_interleave);
	ADD("io/partial-reads", test_dribble);
	ADD("io/partial-writes-and-request-limit", test_partial_write);
	ADD("close/mid-frame", test_close_mid_frame);
	ADD("close/no-sigpipe", test_close_no_sigpipe);
	ADD("close/answer-before-close-survives", test_close_answer_survives);
	ADD("protocol/bad-frames", test_bad_frames);
	ADD("inbound/overflow", test_inbound_overflow);
	ADD("wait/timeout", test_wait_timeout);
	ADD("wait/event-loop", test_event_loop);
	ADD("reconnect/re-register", test_reconnect);
	ADD("reconnect/in-flight-requests-fail", test_reconnect_in_flight);
	ADD("reconnect/gid-lost", test_reconnect_gid_lost);
	ADD("reconnect/unregister-while-away", test_reconnect_unreg_away);
	ADD("reconnect/off-by-default", test_reconnect_off_by_default);
	ADD("reconnect/arguments", test_reconnect_args);
#undef ADD
	g_test_add("/client-lib/reconnect/backoff-exponential-capped", Fixture,
		   &backoff_exact, fixture_setup, test_reconnect_backoff,
		   fixture_teardown);
	g_test_add("/client-lib/reconnect/backoff-jitter", Fixture,
		   &backoff_jitter, fixture_setup, test_reconnect_backoff,
		   fixture_teardown);

	return g_test_run();
}
