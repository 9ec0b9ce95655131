/* SPDX-License-Identifier: MIT */
/*
 * The fake daemon of the client library's tests: a UNIX socket in a fresh
 * temporary directory, a short server script in a thread, and the frames it
 * reads and writes built and checked with test-golden.h, i.e. from the wire
 * table and not from our structs, so that the tests also pin what the
 * library puts on the wire. Plus the client-side steps the tests share.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "test-fake-daemon.h"
#include "test-golden.h"

const uint8_t gid_a[IB_GID_LEN] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1,
};
const uint8_t gid_b[IB_GID_LEN] = {
	0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0xaa, 0xbb, 0xff, 0xfe, 0xcc, 0xdd, 0xee,
};
const uint8_t gid_remote[IB_GID_LEN] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2,
};
const uint8_t gid_c[IB_GID_LEN] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 3,
};

void fixture_setup(Fixture *f, gconstpointer data)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	GError *error = NULL;

	(void)data;
	memset(f, 0, sizeof(*f));
	f->dir = g_dir_make_tmp("rdmacm-mux-test-XXXXXX", &error);
	g_assert_no_error(error);
	f->path = g_build_filename(f->dir, "sock", NULL);
	g_assert_cmpuint(strlen(f->path), <, sizeof(sa.sun_path));
	strcpy(sa.sun_path, f->path);

	f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	g_assert_cmpint(f->listen_fd, >=, 0);
	g_assert_cmpint(bind(f->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
	g_assert_cmpint(listen(f->listen_fd, 8), ==, 0);
	f->to_server = g_async_queue_new();
	f->to_client = g_async_queue_new();
}

void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	rdmacm_mux_close(f->m);
	if (f->thread)
		g_thread_join(f->thread);
	close(f->listen_fd);
	unlink(f->path);
	g_assert_cmpint(rmdir(f->dir), ==, 0);
	g_async_queue_unref(f->to_server);
	g_async_queue_unref(f->to_client);
	g_free(f->path);
	g_free(f->dir);
}

static gpointer server_thread(gpointer data)
{
	Fixture *f = data;

	f->script(f);
	return NULL;
}

void server_start(Fixture *f, ServerScript script)
{
	f->script = script;
	f->thread = g_thread_new("fake-daemon", server_thread, f);
}

void signal_queue(GAsyncQueue *q)
{
	g_async_queue_push(q, GINT_TO_POINTER(1));
}

void wait_queue(GAsyncQueue *q)
{
	gpointer p = g_async_queue_timeout_pop(q, 10 * G_USEC_PER_SEC);

	g_assert_nonnull(p);
}

int srv_accept(Fixture *f)
{
	int fd = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);

	g_assert_cmpint(fd, >=, 0);
	return fd;
}

void srv_write(int fd, const uint8_t *b, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, b, len, MSG_NOSIGNAL);

		g_assert_cmpint(n, >, 0);
		b += n;
		len -= (size_t)n;
	}
}

/* One byte per write, with a pause, so the client sees every split. */
void srv_write_dribble(int fd, const uint8_t *b, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		g_assert_cmpint(send(fd, b + i, 1, MSG_NOSIGNAL), ==, 1);
		g_usleep(50);
	}
}

void srv_read_frame_chunked(int fd, uint8_t *b, size_t chunk)
{
	size_t got = 0;

	while (got < GOLD_FRAME_SIZE) {
		size_t want = MIN(chunk, GOLD_FRAME_SIZE - got);
		ssize_t n = read(fd, b + got, want);

		g_assert_cmpint(n, >, 0);
		got += (size_t)n;
	}
}

void srv_read_frame(int fd, uint8_t *b)
{
	srv_read_frame_chunked(fd, b, GOLD_FRAME_SIZE);
}

/* Keep the connection until the client closes it. */
void srv_wait_eof(int fd)
{
	uint8_t b[GOLD_FRAME_SIZE];

	while (read(fd, b, sizeof(b)) > 0)
		;
	close(fd);
}

void expect_bytes(const uint8_t *golden, const uint8_t *got,
			 const char *what)
{
	long off = gold_first_diff(golden, got, GOLD_FRAME_SIZE);

	if (off >= 0)
		g_error("%s: byte %ld is 0x%02x, expected 0x%02x", what, off,
			got[off], golden[off]);
}

void expect_gid_request(const uint8_t *got, uint32_t op,
			       const uint8_t *gid)
{
	uint8_t golden[GOLD_FRAME_SIZE] = { 0 };

	gold_frame_hdr(golden, GOLD_MSG_REQ, op, gid, 0, 0);
	expect_bytes(golden, got, op == GOLD_OP_REG ? "REG" : "UNREG");
}

/* A RESP is the request echoed with msg_type RESP and err_code set. */
void srv_answer(int fd, const uint8_t *req, int32_t err)
{
	uint8_t resp[GOLD_FRAME_SIZE];

	memcpy(resp, req, sizeof(resp));
	gold_put_u32(resp, GOLD_OFF_MSG_TYPE, GOLD_MSG_RESP);
	gold_put_u32(resp, GOLD_OFF_ERR_CODE, (uint32_t)err);
	srv_write(fd, resp, sizeof(resp));
}

/* Read one REG for @gid and answer it with @err. */
void srv_expect_reg(int fd, const uint8_t *gid, int32_t err)
{
	uint8_t req[GOLD_FRAME_SIZE];

	srv_read_frame(fd, req);
	expect_gid_request(req, GOLD_OP_REG, gid);
	srv_answer(fd, req, err);
}

void srv_expect_hello(int fd, uint8_t *req)
{
	uint8_t golden[GOLD_FRAME_SIZE] = { 0 };

	srv_read_frame(fd, req);
	gold_frame_hdr(golden, GOLD_MSG_REQ, GOLD_OP_HELLO, NULL, 0,
		       GOLD_HELLO_SIZE);
	gold_put_u32(golden + GOLD_OFF_MAD, GOLD_HELLO_MAGIC,
		     GOLD_HELLO_MAGIC_VALUE);
	gold_put_u16(golden + GOLD_OFF_MAD, GOLD_HELLO_VERSION_MAJOR, 1);
	gold_put_u16(golden + GOLD_OFF_MAD, GOLD_HELLO_VERSION_MINOR, 0);
	gold_put_u64(golden + GOLD_OFF_MAD, GOLD_HELLO_CAPABILITIES, 3);
	expect_bytes(golden, req, "HELLO");
}

void srv_answer_hello(int fd, const uint8_t *req, uint64_t caps)
{
	uint8_t resp[GOLD_FRAME_SIZE];
	uint8_t *p = resp + GOLD_OFF_MAD;

	memcpy(resp, req, sizeof(resp));
	gold_put_u32(resp, GOLD_OFF_MSG_TYPE, GOLD_MSG_RESP);
	gold_put_u16(p, GOLD_HELLO_VERSION_MINOR, 3);
	gold_put_u64(p, GOLD_HELLO_CAPABILITIES, caps);
	gold_put_u32(p, GOLD_HELLO_MAX_GIDS, 8);
	gold_put_u32(p, GOLD_HELLO_MAX_SESSIONS, 100);
	gold_put_u32(p, GOLD_HELLO_MAX_QUEUED, 64);
	srv_write(fd, resp, sizeof(resp));
}

/* Accept the library's next connection and answer its HELLO with no
 * capabilities, as the daemon does. */
void srv_answer_bad_magic(int fd, uint8_t *req)
{
	gold_put_u32(req, GOLD_OFF_MSG_TYPE, GOLD_MSG_RESP);
	gold_put_u32(req + GOLD_OFF_MAD, GOLD_HELLO_MAGIC, 0xdeadbeef);
	srv_write(fd, req, GOLD_FRAME_SIZE);
}

int srv_accept_granting(Fixture *f, uint8_t *req, uint64_t caps)
{
	int fd = srv_accept(f);

	srv_expect_hello(fd, req);
	srv_answer_hello(fd, req, caps);
	return fd;
}

int srv_accept_greeted(Fixture *f, uint8_t *req)
{
	return srv_accept_granting(f, req, 0);
}

void script_grant_errno_and_unknown(Fixture *f)
{
	uint8_t req[GOLD_FRAME_SIZE];
	int fd = srv_accept_granting(f, req, 1ull | 1ull << 40);

	srv_wait_eof(fd);
}

/* An inbound MAD as the daemon routes it: REQ/MAD, sgid = our GID. */
void build_inbound(uint8_t *b, const uint8_t *local_gid, int32_t len,
			  uint32_t tag)
{
	uint8_t *mad = b + GOLD_OFF_MAD;

	memset(b, 0, GOLD_FRAME_SIZE);
	gold_frame_hdr(b, GOLD_MSG_REQ, GOLD_OP_MAD, local_gid, 0, len);
	gold_put_u32(b, GOLD_OFF_AGENT_ID, 1);
	gold_put_be32(b, GOLD_OFF_QPN, 1);
	gold_put_be16(b, GOLD_OFF_LID, 0x0022);
	b[GOLD_OFF_GRH_PRESENT] = 1;
	b[GOLD_OFF_HOP_LIMIT] = 64;
	memcpy(b + GOLD_OFF_ADDR_GID, gid_remote, IB_GID_LEN);
	gold_put_be32(b, GOLD_OFF_FLOW_LABEL, 0x12345);
	if (len >= 24) {
		mad_set_cm_header(mad);
		mad_set_attr(mad, CM_REP);
	}
	if (len >= 28)
		mad_set_local(mad, tag);
	if (len > 0 && len <= GOLD_MAD_SIZE)
		mad[len - 1] ^= 0x5a;
}

void srv_send_inbound(int fd, const uint8_t *local_gid, int32_t len, uint32_t tag)
{
	uint8_t b[GOLD_FRAME_SIZE];

	build_inbound(b, local_gid, len, tag);
	srv_write(fd, b, sizeof(b));
}

void check_inbound(const struct rdmacm_mux_inbound *in,
			  const uint8_t *local_gid, uint32_t len, uint32_t tag)
{
	uint8_t golden[GOLD_FRAME_SIZE];

	build_inbound(golden, local_gid, (int32_t)len, tag);
	g_assert_cmpmem(in->local_gid, IB_GID_LEN, local_gid, IB_GID_LEN);
	g_assert_cmpuint(in->mad_len, ==, len);
	g_assert_cmpmem(in->mad, len, golden + GOLD_OFF_MAD, len);
	for (size_t i = len; i < sizeof(in->mad); i++)
		g_assert_cmpuint(in->mad[i], ==, 0);
	g_assert_cmpuint(g_ntohl(in->addr.qpn), ==, 1);
	g_assert_cmpuint(g_ntohs(in->addr.lid), ==, 0x22);
	g_assert_cmpuint(in->addr.grh_present, ==, 1);
	g_assert_cmpuint(in->addr.hop_limit, ==, 64);
	g_assert_cmpmem(in->addr.gid, IB_GID_LEN, gid_remote, IB_GID_LEN);
	g_assert_cmpuint(g_ntohl(in->addr.flow_label), ==, 0x12345);
}

/* Open the fixture's socket with @flags; the fixture closes the handle. */
struct rdmacm_mux *open_with(Fixture *f, unsigned flags)
{
	struct rdmacm_mux *m = NULL;

	g_assert_cmpint(rdmacm_mux_open(f->path, flags, OPEN_TIMEOUT_MS, &m), ==, 0);
	g_assert_nonnull(m);
	f->m = m;
	return m;
}

struct rdmacm_mux *open_base(Fixture *f)
{
	return open_with(f, RDMACM_MUX_OPEN_BASE_PROTOCOL);
}

int wait_ok(struct rdmacm_mux *m, uint32_t ticket)
{
	struct rdmacm_mux_response resp;

	g_assert_cmpint(rdmacm_mux_wait(m, ticket, WAIT_TIMEOUT_MS, &resp), ==, 0);
	g_assert_cmpuint(resp.ticket, ==, ticket);
	return resp.error;
}

/* Register @gid and wait: the daemon must accept it. */
void register_ok(struct rdmacm_mux *m, const uint8_t gid[16])
{
	uint32_t ticket;

	g_assert_cmpint(rdmacm_mux_register_gid(m, gid, &ticket), ==, 0);
	g_assert_cmpint(wait_ok(m, ticket), ==, 0);
}

void fill_addr(struct rdmacm_mux_mad_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->qpn = g_htonl(1);
	a->lid = g_htons(0x0101);
	a->sl = 3;
	a->grh_present = 1;
	a->gid_index = 9; /* ignored by the daemon, passed as given */
	a->hop_limit = 0xff;
	a->traffic_class = 0x10;
	memcpy(a->gid, gid_remote, IB_GID_LEN);
	a->flow_label = g_htonl(0x54321);
	a->pkey_index = 1;
	memset(a->reserved, 0xee, sizeof(a->reserved)); /* must not leak out */
}

void fill_mad(uint8_t *mad, size_t len)
{
	for (size_t i = 0; i < len; i++)
		mad[i] = (uint8_t)(0x40 + i);
	mad_set_cm_header(mad);
}

void expect_mad_request(const uint8_t *got, size_t len)
{
	uint8_t golden[GOLD_FRAME_SIZE] = { 0 };

	gold_frame_hdr(golden, GOLD_MSG_REQ, GOLD_OP_MAD, gid_b, 0, (int32_t)len);
	gold_put_addr(golden, &(GoldAddr){ .qpn = 1, .lid = 0x0101, .sl = 3, .grh_present = 1,
					   .gid_index = 9, .hop_limit = 0xff, .traffic_class = 0x10,
					   .gid = gid_remote, .flow_label = 0x54321,
					   .pkey_index = 1 });
	fill_mad(golden + GOLD_OFF_MAD, len);
	expect_bytes(golden, got, "MAD request");
}

/* The daemon is gone: no socket file, nothing listening. */
void srv_stop_listening(Fixture *f)
{
	close(f->listen_fd);
	f->listen_fd = -1;
	g_assert_cmpint(unlink(f->path), ==, 0);
}

/* A new daemon on the same path. */
void srv_listen_again(Fixture *f)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	strcpy(sa.sun_path, f->path);
	f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	g_assert_cmpint(f->listen_fd, >=, 0);
	g_assert_cmpint(bind(f->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
	g_assert_cmpint(listen(f->listen_fd, 8), ==, 0);
}

/* The client sends nothing more (in particular resends nothing) and closes. */
void srv_expect_eof(int fd)
{
	uint8_t b[GOLD_FRAME_SIZE];

	g_assert_cmpint(read(fd, b, sizeof(b)), ==, 0);
	close(fd);
}

/* The client connects again, registers @gid alone, sends nothing more and
 * closes. */
void srv_expect_back_with(Fixture *f, const uint8_t gid[16])
{
	int fd = srv_accept(f);

	srv_expect_reg(fd, gid, 0);
	srv_expect_eof(fd);
}

void pump_once(struct rdmacm_mux *m, gboolean use_timeout)
{
	struct pollfd pfd = {
		.fd = rdmacm_mux_get_fd(m),
		.events = rdmacm_mux_get_events(m),
	};
	int timeout;

	g_assert_cmpint(rdmacm_mux_get_timeout(m, &timeout), ==, 0);
	if (use_timeout) {
		if (timeout < 0 || timeout > 1000)
			timeout = 1000;
		g_assert_cmpint(poll(&pfd, 1, timeout), >=, 0);
	} else {
		g_assert_cmpint(poll(&pfd, 1, 5000), ==, 1);
	}
	g_assert_cmpint(rdmacm_mux_process(m), >=, 0);
}
