/* SPDX-License-Identifier: MIT */
/*
 * The fake daemon of the client library's tests (test-fake-daemon.c):
 * fixtures with a listening socket and a server script in a thread, the
 * script's steps (srv_*), and the client-side steps the tests share.
 */
#ifndef RDMACM_MUX_TEST_FAKE_DAEMON_H
#define RDMACM_MUX_TEST_FAKE_DAEMON_H

#include <glib.h>
#include <poll.h>
#include <stdint.h>

#include "cm-mad.h"
#include "rdmacm-mux.h"

#define OPEN_TIMEOUT_MS 5000
#define WAIT_TIMEOUT_MS 5000

/* GIDs of the tests: ours (a, b, c) and a peer's. */
extern const uint8_t gid_a[IB_GID_LEN];
extern const uint8_t gid_b[IB_GID_LEN];
extern const uint8_t gid_remote[IB_GID_LEN];
extern const uint8_t gid_c[IB_GID_LEN];

typedef struct Fixture Fixture;
typedef void (*ServerScript)(Fixture *f);

struct Fixture {
	char *dir;
	char *path;
	int listen_fd;
	GThread *thread;
	ServerScript script;
	GAsyncQueue *to_server; /* the client tells the script to go on */
	GAsyncQueue *to_client; /* and the other way round */
	struct rdmacm_mux *m;	/* closed by the teardown */
	/* Reconnection tests: when the fake daemon closed and accepted. */
	gint64 closed_at;
	gint64 accepted_at[16];
	int n_accepted;
};

/* g_test_add() fixture functions: a socket in a fresh temporary dir. */
void fixture_setup(Fixture *f, gconstpointer data);
void fixture_teardown(Fixture *f, gconstpointer data);
/* Run @script in the fake daemon's thread (joined by the teardown). */
void server_start(Fixture *f, ServerScript script);
/* One step of hand-shaking between the test and its script. */
void signal_queue(GAsyncQueue *q);
void wait_queue(GAsyncQueue *q);

/* ---- the script's steps ---- */

int srv_accept(Fixture *f);
void srv_write(int fd, const uint8_t *b, size_t len);
/* One byte per write, with a pause, so the client sees every split. */
void srv_write_dribble(int fd, const uint8_t *b, size_t len);
void srv_read_frame_chunked(int fd, uint8_t *b, size_t chunk);
void srv_read_frame(int fd, uint8_t *b);
/* Keep the connection until the client closes it. */
void srv_wait_eof(int fd);
/* The client sends nothing more (in particular resends nothing) and closes. */
void srv_expect_eof(int fd);
/* A RESP is the request echoed with msg_type RESP and err_code set. */
void srv_answer(int fd, const uint8_t *req, int32_t err);
/* Read one REG for @gid and answer it with @err. */
void srv_expect_reg(int fd, const uint8_t *gid, int32_t err);
/* Read the library's HELLO into @req (checked byte by byte). */
void srv_expect_hello(int fd, uint8_t *req);
/* Grant @caps, with the quotas 8 GIDs, 100 sessions, 64 frames. */
void srv_answer_hello(int fd, const uint8_t *req, uint64_t caps);
/* Answer the HELLO in @req (and overwrite it) with the wrong magic. */
void srv_answer_bad_magic(int fd, uint8_t *req);
/* Accept the library's next connection and answer its HELLO with @caps
 * granted, or with none, as the daemon does. */
int srv_accept_granting(Fixture *f, uint8_t *req, uint64_t caps);
int srv_accept_greeted(Fixture *f, uint8_t *req);
/* A script: grant ERRNO and a bit nobody asked for, then wait for EOF. */
void script_grant_errno_and_unknown(Fixture *f);
/* The daemon is gone: no socket file, nothing listening. */
void srv_stop_listening(Fixture *f);
/* A new daemon on the same path. */
void srv_listen_again(Fixture *f);
/* The client connects again, registers @gid alone, sends nothing more and
 * closes. */
void srv_expect_back_with(Fixture *f, const uint8_t gid[16]);

/* ---- frames ---- */

/* Fail with the first byte where @got differs from @golden. */
void expect_bytes(const uint8_t *golden, const uint8_t *got, const char *what);
/* @got is a REG or UNREG (@op) of @gid. */
void expect_gid_request(const uint8_t *got, uint32_t op, const uint8_t *gid);
/* An inbound MAD as the daemon routes it: REQ/MAD, sgid = our GID, @len
 * bytes of MAD tagged with @tag (its local comm id). */
void build_inbound(uint8_t *b, const uint8_t *local_gid, int32_t len,
		   uint32_t tag);
/* Write what build_inbound() builds. */
void srv_send_inbound(int fd, const uint8_t *local_gid, int32_t len, uint32_t tag);
/* @in is what build_inbound() built. */
void check_inbound(const struct rdmacm_mux_inbound *in,
		   const uint8_t *local_gid, uint32_t len, uint32_t tag);
/* The address and MAD the send tests use, and the frame they make. */
void fill_addr(struct rdmacm_mux_mad_addr *a);
void fill_mad(uint8_t *mad, size_t len);
void expect_mad_request(const uint8_t *got, size_t len);

/* ---- the client's steps ---- */

/* Open the fixture's socket with @flags; the fixture closes the handle. */
struct rdmacm_mux *open_with(Fixture *f, unsigned flags);
struct rdmacm_mux *open_base(Fixture *f);
/* Wait for @ticket's answer; return its error. */
int wait_ok(struct rdmacm_mux *m, uint32_t ticket);
/* Register @gid and wait: the daemon must accept it. */
void register_ok(struct rdmacm_mux *m, const uint8_t gid[16]);

/* One turn of a reconnecting handle's event loop: wait (with @use_timeout
 * for rdmacm_mux_get_timeout(), as an sd-bus style caller does; without,
 * for the fd alone, which must then wake up by itself), then process. */
void pump_once(struct rdmacm_mux *m, gboolean use_timeout);

/* poll + process until @cond holds, as an event-loop caller would. */
#define PROCESS_UNTIL(m, cond)                                                 \
	do {                                                                   \
		gint64 end_ = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;    \
		while (!(cond)) {                                              \
			struct pollfd pfd_ = {                                 \
				.fd = rdmacm_mux_get_fd(m),                    \
				.events = rdmacm_mux_get_events(m),            \
			};                                                     \
			g_assert_cmpint(g_get_monotonic_time(), <, end_);      \
			g_assert_cmpint(poll(&pfd_, 1, 1000), >=, 0);          \
			(void)rdmacm_mux_process(m);                           \
		}                                                              \
	} while (0)

#endif /* RDMACM_MUX_TEST_FAKE_DAEMON_H */
