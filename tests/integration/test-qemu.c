/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of a raw QEMU-protocol client (QEMU 4.0-9.0 pvrdma:
 * 360-byte frames, one blocking read of the response right after each
 * request, its own GID in addr.gid), of a daemon restart after SIGKILL,
 * and of the session timers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <glib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "unit-test.h"

typedef struct Fixture {
	Fabric *fabric;
	Daemon *da, *db;
	uint32_t tid;
} Fixture;

static const char *const short_timers[] = { "--handshake-timeout", "400", "--closing-timeout",
					    "300", "--sidr-timeout", "300", NULL };

static void fixture_setup(Fixture *f, gconstpointer data)
{
	f->fabric = hosts_open(data, data, &f->da, &f->db);
	f->tid = 0x9000;
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	hosts_free(f->fabric, f->da, f->db, NULL, 0);
}

/* A MAD frame the way QEMU's mad_send() builds it: qemu_frame()'s, with a
 * host GID index the daemon must not trust. Its addr.gid is the source
 * GID, QEMU's bug C1. */
static void qemu_mad_frame(struct rdmacm_mux_msg *m, const uint8_t own_gid[IB_GID_LEN], const uint8_t mad[256])
{
	qemu_frame(m, own_gid, mad);
	m->umad.hdr.addr.gid_index = 7;
}

/* Read one inbound MAD frame and check every byte QEMU relies on. */
static void qemu_expect_exact(int fd, const uint8_t own_gid[IB_GID_LEN], const uint8_t from[IB_GID_LEN], uint16_t attr,
			struct rdmacm_mux_msg *m)
{
	static const uint8_t zero[8];

	g_assert_cmpint(raw_recv(fd, m, 5000), ==, 0);
	g_assert_cmpuint(m->hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_REQ);
	g_assert_cmpuint(m->hdr.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
	/* All 16 bytes of the local GID: QEMU uses them as the GRH DGID. */
	g_assert_cmpmem(m->hdr.sgid.raw, IB_GID_LEN, own_gid, IB_GID_LEN);
	g_assert_cmpint(m->hdr.err_code, ==, 0);
	g_assert_cmpmem((uint8_t *)m + 28, 4, zero, 4); /* padding */
	g_assert_cmpmem((uint8_t *)m + 356, 4, zero, 4);
	g_assert_cmpint(m->umad_len, ==, 256);
	g_assert_cmpmem(m->umad.hdr.addr.gid, IB_GID_LEN, from, IB_GID_LEN);
	g_assert_cmpuint(mad_attr(m->umad.mad), ==, attr);
}

UNIT_FIXTURE_TEST("/qemu/raw-client-handshake", NULL, fixture_setup, test_qemu_client_handshake)
{
	uint8_t qgid[IB_GID_LEN], mad[256];
	struct rdmacm_mux_msg m;
	struct rdmacm_mux_inbound in;
	g_autofree char *out = NULL;
	Vm *peer = vm_new(f->db, "::ffff:10.0.2.1", "peer");
	uint32_t wq, wp;
	int fd = raw_connect(f->da);
	(void)data;

	gid_parse("::ffff:10.0.1.6", qgid);
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, qgid);
	g_assert_cmpint(raw_request(fd, &m), ==, 0);

	/* REQ: QEMU names no destination but the REQ does. */
	mad_build_req(mad, 0x3c61a776, qgid, peer->gid, ++f->tid);
	qemu_mad_frame(&m, qgid, mad);
	g_assert_cmpint(raw_request(fd, &m), ==, 0);
	vm_expect(peer, CM_REQ, &in);
	g_assert_cmpmem(in.addr.gid, IB_GID_LEN, qgid, IB_GID_LEN);
	wq = mad_local(in.mad);

	mad_build(mad, CM_REP, 0x51, wq, ++f->tid);
	g_assert_cmpint(vm_send(peer, qgid, mad), ==, 0);
	qemu_expect_exact(fd, qgid, peer->gid, CM_REP, &m);
	g_assert_cmpuint(mad_remote(m.umad.mad), ==, 0x3c61a776);
	wp = mad_local(m.umad.mad);

	/* RTU: the destination comes from the session. */
	mad_build(mad, CM_RTU, 0x3c61a776, wp, ++f->tid);
	qemu_mad_frame(&m, qgid, mad);
	g_assert_cmpint(raw_request(fd, &m), ==, 0);
	vm_expect(peer, CM_RTU, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, 0x51);

	/* The peer disconnects; QEMU answers DREQ with DREP. */
	mad_build(mad, CM_DREQ, 0x51, wq, ++f->tid);
	g_assert_cmpint(vm_send(peer, qgid, mad), ==, 0);
	qemu_expect_exact(fd, qgid, peer->gid, CM_DREQ, &m);
	g_assert_cmpuint(mad_remote(m.umad.mad), ==, 0x3c61a776);
	mad_build(mad, CM_DREP, 0x3c61a776, wp, ++f->tid);
	qemu_mad_frame(&m, qgid, mad);
	g_assert_cmpint(raw_request(fd, &m), ==, 0);
	vm_expect(peer, CM_DREP, &in);

	/* SIDR: the destination comes from rdma_cm's cma_hdr. */
	mad_build(mad, CM_SIDR_REQ, 0xc361a776, 0, ++f->tid);
	mad[41] = 4 << 4;	      /* cma_hdr: IPv4 */
	memcpy(mad + 72, peer->gid + 12, 4); /* dst address 10.0.2.1 */
	qemu_mad_frame(&m, qgid, mad);
	g_assert_cmpint(raw_request(fd, &m), ==, 0);
	vm_expect(peer, CM_SIDR_REQ, &in);
	mad_build(mad, CM_SIDR_REP, mad_local(in.mad), 0, ++f->tid);
	g_assert_cmpint(vm_send(peer, qgid, mad), ==, 0);
	qemu_expect_exact(fd, qgid, peer->gid, CM_SIDR_REP, &m);
	g_assert_cmpuint(mad_local(m.umad.mad), ==, 0xc361a776);

	/* The answer to a MAD request is the echo with msg_type RESP. */
	raw_frame(&m, RDMACM_MUX_OP_CODE_UNREG, qgid);
	g_assert_cmpint(raw_request(fd, &m), ==, 0);
	close(fd);
	vm_free(peer);

	out = daemon_output(f->da);
	/* The workaround is logged once per client. */
	g_assert_nonnull(strstr(out, "puts its own GID in addr.gid"));
	g_assert_null(strstr(strstr(out, "puts its own GID in addr.gid") + 1,
			     "puts its own GID in addr.gid"));
}

UNIT_FIXTURE_TEST("/restart/after-sigkill", NULL, fixture_setup, test_restart_after_sigkill)
{
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	Vm *a, *b;
	(void)data;

	daemon_kill(f->da);
	/* The socket file is left behind; a restart must clean it up. */
	g_assert_true(g_file_test(f->da->socket, G_FILE_TEST_EXISTS));
	daemon_restart(f->da);

	a = vm_new(f->da, "::ffff:10.0.1.1", "a");
	b = vm_new(f->db, "::ffff:10.0.2.1", "b");
	mad_build_req(mad, 1, a->gid, b->gid, ++f->tid);
	vm_send_expect(a, b, mad, &in);
	mad_build(mad, CM_REP, 2, mad_local(in.mad), ++f->tid);
	vm_send_expect(b, a, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, 1);
	vm_free(a);
	vm_free(b);
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	/* A clean stop removes the socket it made. */
	g_assert_false(g_file_test(f->da->socket, G_FILE_TEST_EXISTS));
	/* SIGINT is a clean stop too, with clients still connected. */
	daemon_restart(f->da);
	a = vm_new(f->da, "::ffff:10.0.1.1", "a");
	kill(f->da->pid, SIGINT);
	g_assert_cmpint(daemon_wait_exit(f->da, 10000), ==, 0);
	g_assert_false(g_file_test(f->da->socket, G_FILE_TEST_EXISTS));
	vm_free(a);
}

/* Both daemons removed @n sessions on a timer in all, and neither @a
 * nor @b is left with one. */
static void expect_expired(Fixture *f, Vm *a, Vm *b, double n)
{
	daemon_wait_metric(f->da, "rdmacm_mux_sessions_expired_total", NULL, n);
	daemon_wait_metric(f->db, "rdmacm_mux_sessions_expired_total", NULL, n);
	g_assert_cmpuint(vm_stats(a).sessions, ==, 0);
	g_assert_cmpuint(vm_stats(b).sessions, ==, 0);
}

/*
 * The daemon's session timers run on its loop's clock: each removal is
 * waited for in its metrics, never slept for. What each timer does and
 * when (to the microsecond, an established session kept for hours, the
 * closing grace re-armed by a duplicate DREQ) is /relay-driver/session-
 * timers, in the relay's own time.
 */
UNIT_FIXTURE_TEST("/timers/lifecycle", short_timers, fixture_setup, test_timers)
{
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	Vm *a = vm_new(f->da, "::ffff:10.0.1.1", "a");
	Vm *b = vm_new(f->db, "::ffff:10.0.2.1", "b");
	uint32_t wa, wb;
	(void)data;

	/* A half-open handshake is forgotten after the idle timeout, on
	 * both sides. */
	mad_build_req(mad, 1, a->gid, b->gid, ++f->tid);
	vm_send_expect(a, b, mad, &in);
	expect_expired(f, a, b, 1);

	/* Established, then closed: after DREQ/DREP the closing timer
	 * removes it. */
	mad_build_req(mad, 2, a->gid, b->gid, ++f->tid);
	vm_send_expect(a, b, mad, &in);
	wa = mad_local(in.mad);
	mad_build(mad, CM_REP, 3, wa, ++f->tid);
	vm_send_expect(b, a, mad, &in);
	wb = mad_local(in.mad);
	mad_build(mad, CM_RTU, 2, wb, ++f->tid);
	vm_send_expect(a, b, mad, &in);
	g_assert_cmpuint(vm_stats(a).sessions, ==, 1);
	g_assert_cmpuint(vm_stats(b).sessions, ==, 1);
	mad_build(mad, CM_DREQ, 3, wa, ++f->tid);
	vm_send_expect(b, a, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, 2);
	mad_build(mad, CM_DREP, 2, wb, ++f->tid);
	vm_send_expect(a, b, mad, &in);
	expect_expired(f, a, b, 2);

	/* A SIDR query ends with its answer on the asking side, and by its
	 * timer on the answering one. */
	mad_build(mad, CM_SIDR_REQ, 4, 0, ++f->tid);
	vm_send_expect(a, b, mad, &in);
	mad_build(mad, CM_SIDR_REP, mad_local(in.mad), 0, ++f->tid);
	vm_send_expect(b, a, mad, &in);
	g_assert_cmpuint(vm_stats(a).sessions, ==, 0);
	daemon_wait_metric(f->db, "rdmacm_mux_sessions_expired_total", NULL, 3);
	g_assert_cmpuint(vm_stats(b).sessions, ==, 0);
	g_assert_cmpfloat(daemon_metric(f->da, "rdmacm_mux_sessions_expired_total", NULL), ==, 2);

	vm_free(a);
	vm_free(b);
}

UNIT_TEST_MAIN()
