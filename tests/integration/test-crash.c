/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of crashes under a supervisor with an fd store, as
 * systemd runs the daemon:
 *  - answers owed survive a crash: QEMU writes a request and blocks for
 *    its answer (holding its big lock). Requests whose sends wait in the
 *    sender processes (a destination that takes 30 s to fail) are in
 *    flight when the daemon is killed; the successor answers each of them
 *    at once, exactly once, before anything else reaches the client;
 *  - the crash-loop guard: a daemon killed right after each start, before
 *    it relayed anything with the state it took over, looks like a state
 *    that crashes it. After RELAY_GUARD_STARTS such starts the
 *    next one drops the sessions, keeps the clients and their GIDs, and
 *    says so (log line, counter);
 *  - a client the daemon drops while the fd store cannot take its socket
 *    back (the supervisor went away) still sees its connection end: the
 *    store's copy would keep it open; and so does one a successor does not
 *    take back at its start (fewer clients allowed now); and a daemon
 *    that ends without a hand-off, whose umad fd the store does not let
 *    go, says so once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <glib.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "unit-test.h"

#define N_Q 3
#define GUARD_STARTS 3 /* RELAY_GUARD_STARTS */

typedef struct Fixture {
	QemuPairs p; /* A's raw QEMU clients q[i], their peers b[i] on B */
	uint64_t tid;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
	/* A send to a GID no port has waits this long for its address. */
	const char *const fabric[] = { "--preset", "two-hosts", "--unreachable-delay-ms", "30000",
				       NULL };

	(void)data;
	f->p.fabric = fabric_new_args(fabric);
	f->p.sup = supervisor_new(f->p.fabric->dir);
	f->p.da = daemon_start_supervised(f->p.sup, f->p.fabric, "simA", NULL);
	qemu_pairs_open(&f->p, N_Q);
	f->tid = 0xc000;
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	qemu_pairs_free(&f->p);
}

/* Wait up to @ms until the store holds @n fds named @prefix*. */
static bool wait_for_stored(Supervisor *s, const char *prefix, unsigned n, int ms)
{
	gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;

	do {
		if (supervisor_stored(s, prefix) == n)
			return true;
		g_usleep(10000);
	} while (g_get_monotonic_time() < end);
	return false;
}

static void kill_and_restart(Fixture *f)
{
	unsigned ready = supervisor_ready_count(f->p.sup);

	daemon_kill(f->p.da);
	daemon_restart(f->p.da);
	g_assert_true(supervisor_wait_ready(f->p.sup, ready, 10000));
}

/*
 * Each client writes a REQ to a GID no port has, as QEMU does, and waits:
 * its send waits 30 s in a sender process. The daemon dies. The successor
 * owes each client its answer: -EAGAIN (a QEMU logs it and its guest's CM
 * sends again on its own timeout), at once, once, and before any MAD.
 */
UNIT_FIXTURE_TEST("/crash/owed-answers", NULL, fixture_setup, test_owed_answers)
{
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux_msg m, rtu;
	uint8_t mad[256];
	uint32_t wire;
	gint64 t0;
	(void)data;

	for (int i = 0; i < N_Q; i++) {
		g_autofree char *text = g_strdup_printf("::ffff:10.0.9.%d", i + 1);
		uint8_t nowhere[IB_GID_LEN];

		gid_parse(text, nowhere);
		mad_build_req(mad, 0x900u + (uint32_t)i, f->p.qgid[i], nowhere, ++f->tid);
		qemu_frame(&m, f->p.qgid[i], mad);
		m.hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
		g_assert_cmpint(write(f->p.q[i], &m, sizeof(m)), ==, (ssize_t)sizeof(m));
	}
	/* Every send waits in a sender: nobody has an answer. */
	daemon_wait_metric(f->p.da, "rdmacm_mux_sender_queued_mads", NULL, N_Q);
	for (int i = 0; i < N_Q; i++)
		g_assert_cmpint(raw_recv(f->p.q[i], &m, 0), ==, -ETIMEDOUT);

	kill_and_restart(f);
	t0 = g_get_monotonic_time();
	/* A peer's MAD for client 0 right away: it must come after the
	 * answer, which QEMU reads first. */
	mad_build_req(mad, 0x77, f->p.b[0]->gid, f->p.qgid[0], ++f->tid);
	g_assert_cmpint(vm_send(f->p.b[0], f->p.qgid[0], mad), ==, 0);
	for (int i = 0; i < N_Q; i++) {
		/* On time: long before the 30 s the stalled send takes. */
		g_assert_cmpint(raw_recv(f->p.q[i], &m, 5000), ==, 0);
		g_assert_cmpuint(m.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
		g_assert_cmpuint(m.hdr.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
		g_assert_cmpint(m.hdr.err_code, ==, -EAGAIN);
		/* The echo is the request's own. */
		g_assert_cmpuint(mad_local(m.umad.mad), ==, 0x900u + (uint32_t)i);
	}
	g_assert_cmpint(g_get_monotonic_time() - t0, <, 5 * G_USEC_PER_SEC);
	g_assert_cmpfloat(daemon_metric(f->p.da, "rdmacm_mux_handoff_owed_answered_total", NULL), ==, N_Q);
	/* Then the peer's REQ, routed as ever. */
	g_assert_cmpint(raw_recv(f->p.q[0], &m, 5000), ==, 0);
	g_assert_cmpuint(m.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_REQ);
	g_assert_cmpuint(mad_attr(m.umad.mad), ==, CM_REQ);
	wire = mad_local(m.umad.mad);
	/* Exactly one answer each: the next request gets the next answer. */
	for (int i = 0; i < N_Q; i++) {
		raw_frame(&m, RDMACM_MUX_OP_CODE_REG, f->p.qgid[i]);
		g_assert_cmpint(raw_request(f->p.q[i], &m), ==, RDMACM_MUX_ERR_CODE_EEXIST);
		g_assert_cmpint(raw_recv(f->p.q[i], &m, i == 0 ? 300 : 0), ==, -ETIMEDOUT);
	}
	/* And the client goes on: it answers the peer's REQ. */
	mad_build(mad, CM_REP, 0x55, wire, ++f->tid);
	qemu_send(f->p.q[0], f->p.qgid[0], mad);
	vm_expect(f->p.b[0], CM_REP, &in);
	mad_build(rtu.umad.mad, CM_RTU, 0x77, mad_local(in.mad), ++f->tid);
	g_assert_cmpint(vm_send(f->p.b[0], f->p.qgid[0], rtu.umad.mad), ==, 0);
	g_assert_cmpint(raw_recv(f->p.q[0], &m, 5000), ==, 0);
	g_assert_cmpuint(mad_attr(m.umad.mad), ==, CM_RTU);
	g_assert_cmpuint(daemon_output_count(f->p.da, "answered Resource temporarily unavailable now"),
			 ==, N_Q);
}

/*
 * A client that pipelines (librdmacm-mux does) writes twelve REQs to a GID
 * no port has in one write: the daemon reads all twelve, two go to sender
 * processes (--max-slow-sends 2) and the client's reading pauses with ten
 * read and not handled. The daemon dies. Those ten were neither in the
 * socket nor answered: the successor answers all twelve, -EAGAIN, in the
 * order sent, once each. A library client matches answers to requests in
 * order, so one missing answer would shift every later one.
 */
UNIT_FIXTURE_TEST("/crash/buffered-requests", NULL, fixture_setup, test_buffered_requests)
{
	enum { N = 12, SLOW = 2 };
	struct rdmacm_mux_msg m;
	(void)data;

	qemu_pairs_write_to_nowhere(&f->p, 0, N, 0x300, f->tid + 1);
	f->tid += N;
	daemon_wait_metric(f->p.da, "rdmacm_mux_sender_queued_mads", NULL, SLOW);
	g_assert_cmpint(raw_recv(f->p.q[0], &m, 0), ==, -ETIMEDOUT);

	kill_and_restart(f);
	for (unsigned i = 0; i < N; i++) {
		if (raw_recv(f->p.q[0], &m, HARNESS_WAIT_MS) != 0)
			g_error("answer %u of %u did not come; the daemon said:\n%s", i + 1, N,
				daemon_output(f->p.da));
		g_assert_cmpuint(m.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
		g_assert_cmpuint(m.hdr.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
		g_assert_cmpint(m.hdr.err_code, ==, -EAGAIN);
		g_assert_cmpuint(mad_local(m.umad.mad), ==, 0x300u + i);
	}
	g_assert_cmpfloat(daemon_metric(f->p.da, "rdmacm_mux_handoff_owed_answered_total", NULL), ==, N);
	/* Exactly once: the next request gets the next answer. */
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, f->p.qgid[0]);
	g_assert_cmpint(raw_request(f->p.q[0], &m), ==, RDMACM_MUX_ERR_CODE_EEXIST);
	g_assert_cmpint(raw_recv(f->p.q[0], &m, 300), ==, -ETIMEDOUT);
}

/* Client i holds an established session with its peer. */
static void establish(Fixture *f, int i, uint32_t comm)
{
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux_msg m;
	uint8_t mad[256];

	mad_build_req(mad, comm, f->p.qgid[i], f->p.b[i]->gid, ++f->tid);
	qemu_pairs_to_peer(&f->p, (unsigned)i, mad, &in);
	mad_build(mad, CM_REP, comm + 0x100, mad_local(in.mad), ++f->tid);
	g_assert_cmpint(vm_send(f->p.b[i], f->p.qgid[i], mad), ==, 0);
	g_assert_cmpint(raw_recv(f->p.q[i], &m, 5000), ==, 0);
	g_assert_cmpuint(mad_attr(m.umad.mad), ==, CM_REP);
	mad_build(mad, CM_RTU, comm, mad_local(m.umad.mad), ++f->tid);
	qemu_pairs_to_peer(&f->p, (unsigned)i, mad, &in);
}

UNIT_FIXTURE_TEST("/crash/loop-guard", NULL, fixture_setup, test_loop_guard)
{
	struct rdmacm_mux_msg m;
	(void)data;

	for (int i = 0; i < N_Q; i++)
		establish(f, i, 0xa00u + (uint32_t)i);
	/* The first starts in a crash loop keep everything. */
	for (int k = 0; k < GUARD_STARTS; k++) {
		kill_and_restart(f);
		g_assert_cmpfloat(daemon_metric_sum(f->p.da, "rdmacm_mux_sessions", NULL), ==, N_Q);
	}
	/* The next drops the sessions: the clients and their GIDs stay. */
	kill_and_restart(f);
	g_assert_cmpfloat(daemon_metric_sum(f->p.da, "rdmacm_mux_sessions", NULL), ==, 0);
	g_assert_cmpfloat(daemon_metric(f->p.da, "rdmacm_mux_clients", NULL), ==, N_Q);
	g_assert_cmpfloat(daemon_metric(f->p.da, "rdmacm_mux_handoff_guard_trips_total", NULL), ==, 1);
	g_assert_cmpuint(daemon_output_count(f->p.da, "to end a crash loop"), ==, 1);
	for (int i = 0; i < N_Q; i++) {
		raw_frame(&m, RDMACM_MUX_OP_CODE_REG, f->p.qgid[i]);
		g_assert_cmpint(raw_request(f->p.q[i], &m), ==, RDMACM_MUX_ERR_CODE_EEXIST);
	}
	/* A new session, then a crash: a start that relayed a MAD settled, so
	 * the next start keeps what it is given. */
	establish(f, 0, 0xb00);
	kill_and_restart(f);
	g_assert_cmpfloat(daemon_metric_sum(f->p.da, "rdmacm_mux_sessions", NULL), ==, 1);
	g_assert_cmpfloat(daemon_metric(f->p.da, "rdmacm_mux_handoff_guard_trips_total", NULL), ==, 1);
}

/* @d's next start runs with its arguments so far and then @extra
 * (NULL-terminated). */
static void daemon_add_args(Daemon *d, const char *const *extra)
{
	GPtrArray *argv = g_ptr_array_new();

	for (char **a = d->argv; *a; a++)
		g_ptr_array_add(argv, *a);
	for (; *extra; extra++)
		g_ptr_array_add(argv, g_strdup(*extra));
	g_ptr_array_add(argv, NULL);
	g_free(d->argv);
	d->argv = (char **)g_ptr_array_free(argv, FALSE);
}

UNIT_FIXTURE_TEST("/fd-store/remove-fails", NULL, fixture_setup, test_remove_fails)
{
	g_autofree char *moved = NULL;
	struct rdmacm_mux_msg m;
	unsigned ready = supervisor_ready_count(f->p.sup);
	int fd;
	(void)data;

	/* The same daemon, now closing connections that register no GID
	 * within 500 ms (a planned restart keeps the clients). */
	daemon_add_args(f->p.da, (const char *const[]){ "--register-timeout", "500", NULL });
	g_assert_cmpint(daemon_stop(f->p.da), ==, 0);
	daemon_restart(f->p.da);
	g_assert_true(supervisor_wait_ready(f->p.sup, ready, 10000));

	/* The supervisor's socket goes away: FDSTOREREMOVE fails from now on,
	 * and the store keeps its copy of every client's socket. */
	fd = raw_connect(f->p.da);
	g_assert_true(wait_for_stored(f->p.sup, "client.", N_Q + 1, 5000));
	moved = g_strdup_printf("%s.moved", supervisor_notify_path(f->p.sup));
	g_assert_cmpint(rename(supervisor_notify_path(f->p.sup), moved), ==, 0);
	/* The daemon drops the silent connection: it must see the end. */
	g_assert_cmpint(raw_recv(fd, &m, 5000), ==, -EPIPE);
	g_assert_cmpint(rename(moved, supervisor_notify_path(f->p.sup)), ==, 0);
	g_assert_cmpuint(daemon_output_count(f->p.da, "cannot take its socket out of the fd store"), ==, 1);
	close(fd);
}

/*
 * A successor allowed fewer clients than its predecessor had cannot take
 * two of them back, while the store cannot let their sockets go: one has
 * no slot in the converted state (--max-clients), the other is refused
 * when it comes back (--max-clients-per-uid). Each must still see its
 * connection end (the store's copy would keep it open, and it would wait
 * on nobody), and the first client is served.
 */
UNIT_FIXTURE_TEST("/fd-store/remove-fails-at-restore", NULL, fixture_setup,
		  test_remove_fails_at_restore)
{
	g_autofree char *moved = NULL, *max_clients = NULL;
	struct pollfd p[N_Q];
	struct rdmacm_mux_msg m;
	gint64 end = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
	bool ended[N_Q] = { false };
	unsigned n_ended = 0;
	(void)data;

	max_clients = g_strdup_printf("%d", N_Q - 1);
	daemon_add_args(f->p.da, (const char *const[]){ "--max-clients", max_clients,
						      "--max-clients-per-uid", "1", NULL });
	g_assert_cmpint(daemon_stop(f->p.da), ==, 0);
	g_assert_cmpuint(supervisor_stored(f->p.sup, "client."), ==, N_Q);
	moved = g_strdup_printf("%s.moved", supervisor_notify_path(f->p.sup));
	g_assert_cmpint(rename(supervisor_notify_path(f->p.sup), moved), ==, 0);
	daemon_restart_unwaited(f->p.da);

	/* Two connections end, the second and the third; nothing else comes. */
	for (int i = 0; i < N_Q; i++)
		p[i] = (struct pollfd){ .fd = f->p.q[i], .events = POLLIN };
	while (n_ended < N_Q - 1 && g_get_monotonic_time() < end) {
		g_assert_cmpint(poll(p, N_Q, 100), >=, 0);
		for (int i = 0; i < N_Q; i++)
			if (p[i].revents && !ended[i]) {
				g_assert_cmpint(i, !=, 0);
				g_assert_cmpint(raw_recv(f->p.q[i], &m, 0), ==, -EPIPE);
				ended[i] = true;
				n_ended++;
				p[i].fd = -1;
			}
	}
	g_assert_cmpuint(n_ended, ==, N_Q - 1);
	g_assert_cmpint(rename(moved, supervisor_notify_path(f->p.sup)), ==, 0);
	g_assert_cmpuint(daemon_output_count(f->p.da, "cannot take it out of the fd store"), ==, N_Q - 1);
	/* The first is served. */
	{
		uint8_t gid[IB_GID_LEN];

		memcpy(gid, f->p.qgid[0], IB_GID_LEN);
		gid[IB_GID_LEN - 1] += 100;
		raw_frame(&m, RDMACM_MUX_OP_CODE_REG, gid);
		g_assert_cmpint(raw_request(f->p.q[0], &m), ==, 0);
	}
}

/*
 * A daemon that ends without a hand-off (SIGINT) takes its umad fd out of
 * the store, so that the CM class is free. When the store cannot let it
 * go, the daemon says so once: the agent stays registered meanwhile.
 */
UNIT_FIXTURE_TEST("/fd-store/umad-remove-fails", NULL, fixture_setup, test_umad_remove_fails)
{
	g_autofree char *moved = NULL;
	(void)data;

	g_assert_cmpuint(supervisor_stored(f->p.sup, "umad."), ==, 1);
	moved = g_strdup_printf("%s.moved", supervisor_notify_path(f->p.sup));
	g_assert_cmpint(rename(supervisor_notify_path(f->p.sup), moved), ==, 0);
	g_assert_cmpint(kill(f->p.da->pid, SIGINT), ==, 0);
	g_assert_cmpint(daemon_wait_exit(f->p.da, 20000), ==, 0);
	g_assert_cmpint(rename(moved, supervisor_notify_path(f->p.sup)), ==, 0);
	g_assert_cmpuint(daemon_output_count(f->p.da, "out of the fd store"), ==, 1);
	g_assert_cmpuint(daemon_output_count(f->p.da, "cannot take umad.1.0.simA out of the fd store"),
			 ==, 1);
}

UNIT_TEST_MAIN()
