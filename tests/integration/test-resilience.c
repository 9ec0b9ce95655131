/* SPDX-License-Identifier: MIT */
/*
 * Client resilience: librdmacm-mux clients opened with
 * RDMACM_MUX_OPEN_RECONNECT against real daemons on the simulated fabric.
 * A daemon is killed under load (SIGKILL) or loses its device, comes back,
 * and every client of it must report DISCONNECTED then RECONNECTED, have its
 * GID registered again (a fresh CM handshake through the new daemon works),
 * and see its in-flight requests fail with -ECONNRESET; the other daemon's
 * clients must not notice anything.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <glib.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "unit-test.h"

#define N_PAIRS 4
#define ROUNDS 6

typedef struct Fixture {
	Fabric *fabric;
	Daemon *da, *db;
	Vm *a[N_PAIRS]; /* clients of da (simA) */
	Vm *b[N_PAIRS]; /* clients of db (simB) */
	uint32_t tid;
	uint32_t comm;
} Fixture;

/* N_PAIRS clients on each daemon that reconnect, with short delays to keep
 * the test fast. */
static void fixture_setup(Fixture *f, gconstpointer data)
{
	(void)data;
	f->fabric = hosts_open(NULL, NULL, &f->da, &f->db);
	f->tid = 0x7000;
	f->comm = 0x100;
	hosts_vm_pairs(f->da, f->db, N_PAIRS, RDMACM_MUX_OPEN_RECONNECT, f->a, f->b);
	for (int i = 0; i < N_PAIRS; i++) {
		g_assert_cmpint(rdmacm_mux_set_reconnect_backoff(f->a[i]->mux, 20, 200, 20), ==, 0);
		g_assert_cmpint(rdmacm_mux_set_reconnect_backoff(f->b[i]->mux, 20, 200, 20), ==, 0);
	}
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	vms_free(f->a, N_PAIRS);
	hosts_free(f->fabric, f->da, f->db, f->b, N_PAIRS);
}

/* A whole CM connection, REQ to DREP, between @a and @b. */
static void handshake(Fixture *f, Vm *a, Vm *b)
{
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];
	uint32_t la = ++f->comm, lb = ++f->comm, wa, wb;

	mad_build_req(mad, la, a->gid, b->gid, ++f->tid);
	vm_send_expect(a, b, mad, &in);
	wa = mad_local(in.mad);
	mad_build(mad, CM_REP, lb, wa, ++f->tid);
	vm_send_expect(b, a, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, la);
	wb = mad_local(in.mad);
	mad_build(mad, CM_RTU, la, wb, ++f->tid);
	vm_send_expect(a, b, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, lb);
	mad_build(mad, CM_DREQ, la, wb, ++f->tid);
	vm_send_expect(a, b, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, lb);
	mad_build(mad, CM_DREP, lb, wa, ++f->tid);
	vm_send_expect(b, a, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, la);
}

/*
 * Run the event loops of @n clients together (poll on all fds, for the
 * shortest rdmacm_mux_get_timeout()) until each reported one event; it must
 * be of @type. The events land in @evs.
 */
static void expect_events(Vm *const *v, size_t n, uint32_t type, struct rdmacm_mux_event *evs)
{
	gint64 end = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
	bool done[2 * N_PAIRS] = { false };
	size_t left = n;

	g_assert_cmpuint(n, <=, G_N_ELEMENTS(done));
	while (left > 0) {
		struct pollfd pfd[2 * N_PAIRS];
		int timeout = 1000;

		g_assert_cmpint(g_get_monotonic_time(), <, end);
		for (size_t i = 0; i < n; i++) {
			int t;

			pfd[i] = (struct pollfd){ .fd = rdmacm_mux_get_fd(v[i]->mux),
						  .events = rdmacm_mux_get_events(v[i]->mux) };
			if (done[i])
				pfd[i].fd = -1;
			g_assert_cmpint(rdmacm_mux_get_timeout(v[i]->mux, &t), ==, 0);
			if (!done[i] && t >= 0 && t < timeout)
				timeout = t;
		}
		g_assert_cmpint(poll(pfd, n, timeout), >=, 0);
		for (size_t i = 0; i < n; i++) {
			int r;

			if (done[i])
				continue;
			r = rdmacm_mux_process(v[i]->mux);
			g_assert_true(r >= 0 || r == -ENOBUFS);
			if (rdmacm_mux_next_event(v[i]->mux, &evs[i]) != 0)
				continue;
			if (evs[i].type != type)
				g_error("%s: expected event %u, got %u (error %d)", v[i]->name, type,
					evs[i].type, evs[i].error);
			done[i] = true;
			left--;
		}
	}
}

static void expect_no_event(Vm *vm)
{
	struct rdmacm_mux_event ev;

	g_assert_cmpint(rdmacm_mux_process(vm->mux), >=, 0);
	if (rdmacm_mux_next_event(vm->mux, &ev) == 0)
		g_error("%s: unexpected event %u (error %d)", vm->name, ev.type, ev.error);
}

/* Every client of the dead daemon reports the break; a request fails. */
static void expect_disconnected(Fixture *f, uint32_t in_flight)
{
	struct rdmacm_mux_event evs[N_PAIRS];
	uint8_t mad[256];

	expect_events(f->a, N_PAIRS, RDMACM_MUX_EVENT_DISCONNECTED, evs);
	for (int i = 0; i < N_PAIRS; i++) {
		struct rdmacm_mux_mad_addr addr = { 0 };

		g_assert_true(evs[i].error == -ECONNRESET || evs[i].error == -EPIPE);
		g_assert_cmpuint(evs[i].requests_failed, ==, in_flight);
		mad_build_req(mad, 1, f->a[i]->gid, f->b[i]->gid, ++f->tid);
		g_assert_cmpint(rdmacm_mux_send_mad(f->a[i]->mux, f->a[i]->gid, &addr, mad, 256, NULL),
				==, -ENOTCONN);
	}
}

/* ...and comes back with its GID; a fresh handshake goes through. */
static void expect_reconnected(Fixture *f)
{
	struct rdmacm_mux_event evs[N_PAIRS];

	expect_events(f->a, N_PAIRS, RDMACM_MUX_EVENT_RECONNECTED, evs);
	for (int i = 0; i < N_PAIRS; i++) {
		g_assert_cmpuint(evs[i].gids_registered, ==, 1);
		g_assert_cmpuint(evs[i].gids_failed, ==, 0);
		g_assert_cmpuint(evs[i].attempts, >=, 1);
		expect_no_event(f->a[i]);
		/* The new daemon knows the GID: this client, nobody else. */
		g_assert_cmpuint(vm_stats(f->a[i]).gids, ==, 1);
	}
	for (int i = 0; i < N_PAIRS; i++)
		handshake(f, f->a[i], f->b[i]);
}

UNIT_FIXTURE_TEST("/resilience/sigkill-under-load", NULL, fixture_setup, test_sigkill_under_load)
{
	uint32_t tickets[N_PAIRS];
	(void)data;

	for (int cycle = 0; cycle < 2; cycle++) {
		double reqs;

		/* Handshakes through both daemons, round after round. */
		for (int round = 0; round < ROUNDS; round++)
			for (int i = 0; i < N_PAIRS; i++)
				handshake(f, f->a[(i + round) % N_PAIRS], f->b[i]);
		reqs = daemon_metric(f->db, "rdmacm_mux_mads_total",
				     LABELS("attribute", "REQ", "direction", "rx"));

		/* Freeze daemon A with a REQ of every client of it in its
		 * socket, unanswered, then kill it. */
		g_assert_cmpint(kill(f->da->pid, SIGSTOP), ==, 0);
		for (int i = 0; i < N_PAIRS; i++) {
			struct rdmacm_mux_mad_addr addr = { 0 };
			uint8_t mad[256];

			addr.qpn = htonl(1);
			addr.grh_present = 1;
			addr.hop_limit = 64;
			memcpy(addr.gid, f->b[i]->gid, IB_GID_LEN);
			mad_build_req(mad, ++f->comm, f->a[i]->gid, f->b[i]->gid, ++f->tid);
			g_assert_cmpint(rdmacm_mux_send_mad(f->a[i]->mux, f->a[i]->gid, &addr, mad,
							    256, &tickets[i]),
					==, 0);
			g_assert_cmpint(rdmacm_mux_process(f->a[i]->mux), >=, 0);
		}
		daemon_kill(f->da);

		expect_disconnected(f, 1);
		for (int i = 0; i < N_PAIRS; i++) {
			struct rdmacm_mux_response resp;

			/* Failed, not lost and not resent. */
			g_assert_cmpint(rdmacm_mux_wait(f->a[i]->mux, tickets[i], 0, &resp), ==, 0);
			g_assert_cmpint(resp.error, ==, -ECONNRESET);
			g_assert_cmpuint(resp.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
		}
		/* Daemon B's clients carry on among themselves. */
		for (int i = 0; i + 1 < N_PAIRS; i += 2)
			handshake(f, f->b[i], f->b[i + 1]);
		/* The frozen REQs never reached the fabric: daemon B, which
		 * reads the wire in order, got only its own clients' REQs
		 * after the last round's. */
		g_assert_cmpfloat(daemon_metric(f->db, "rdmacm_mux_mads_total",
						LABELS("attribute", "REQ", "direction", "rx")),
				  ==, reqs + N_PAIRS / 2);
		daemon_wait_metric(f->db, "rdmacm_mux_client_queued_frames", NULL, 0);
		for (int i = 0; i < N_PAIRS; i++)
			vm_expect_empty(f->b[i]);
		for (int i = 0; i < N_PAIRS; i++)
			expect_no_event(f->b[i]);

		daemon_restart(f->da);
		expect_reconnected(f);
		for (int i = 0; i < N_PAIRS; i++)
			expect_no_event(f->b[i]);
	}
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	g_assert_cmpint(daemon_stop(f->db), ==, 0);
}

/* Another client takes a GID while its owner is away. */
UNIT_FIXTURE_TEST("/resilience/gid-taken-meanwhile", NULL, fixture_setup, test_gid_taken_meanwhile)
{
	struct rdmacm_mux_response resp;
	struct rdmacm_mux_event ev;
	struct rdmacm_mux_msg m;
	Vm *a0 = f->a[0];
	uint32_t ticket;
	int fd;
	(void)data;

	daemon_kill(f->da);
	daemon_restart(f->da);
	/* a0 has not been driven since: it has not even seen the break. */
	fd = raw_connect(f->da);
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, a0->gid);
	g_assert_cmpint(raw_request(fd, &m), ==, 0);

	expect_events(&a0, 1, RDMACM_MUX_EVENT_DISCONNECTED, &ev);
	expect_events(&a0, 1, RDMACM_MUX_EVENT_GID_LOST, &ev);
	g_assert_cmpmem(ev.gid, IB_GID_LEN, a0->gid, IB_GID_LEN);
	g_assert_cmpint(ev.error, ==, -EACCES);
	expect_events(&a0, 1, RDMACM_MUX_EVENT_RECONNECTED, &ev);
	g_assert_cmpuint(ev.gids_registered, ==, 0);
	g_assert_cmpuint(ev.gids_failed, ==, 1);
	g_assert_cmpuint(vm_stats(a0).gids, ==, 0);

	/* The other clients of A got theirs back. */
	expect_events(f->a + 1, N_PAIRS - 1, RDMACM_MUX_EVENT_DISCONNECTED, (struct rdmacm_mux_event[N_PAIRS]){ 0 });
	expect_events(f->a + 1, N_PAIRS - 1, RDMACM_MUX_EVENT_RECONNECTED, (struct rdmacm_mux_event[N_PAIRS]){ 0 });
	handshake(f, f->a[1], f->b[1]);

	/* Once the squatter leaves (the daemon's GID count shows it), the
	 * owner may claim it again itself. */
	g_assert_cmpfloat(daemon_metric(f->da, "rdmacm_mux_gids", NULL), ==, N_PAIRS);
	close(fd);
	daemon_wait_metric(f->da, "rdmacm_mux_gids", NULL, N_PAIRS - 1);
	g_assert_cmpint(rdmacm_mux_register_gid(a0->mux, a0->gid, &ticket), ==, 0);
	g_assert_cmpint(rdmacm_mux_wait(a0->mux, ticket, 5000, &resp), ==, 0);
	g_assert_cmpint(resp.error, ==, 0);
	handshake(f, a0, f->b[0]);
}

/* The port disappears under the daemon, then comes back. */
UNIT_FIXTURE_TEST("/resilience/device-loss", NULL, fixture_setup, test_device_loss)
{
	static const char *const port[] = { "simA", "1", NULL };
	g_autofree char *out = NULL;
	(void)data;

	handshake(f, f->a[0], f->b[0]);
	fabric_cli(f->fabric, "remove-port", port);
	g_assert_cmpint(daemon_wait_exit(f->da, 10000), ==, 4);
	out = daemon_output(f->da);
	if (!strstr(out, "went away"))
		g_error("the daemon's exit does not say why:\n%s", out);
	/* Said once, by the relay that ended the loop (main.c adds nothing). */
	{
		unsigned errors = 0;

		for (const char *p = out; (p = strstr(p, "rdmacm-mux: error: ")); p++)
			errors++;
		if (errors != 1)
			g_error("the daemon's exit is said %u times:\n%s", errors, out);
	}

	expect_disconnected(f, 0);
	for (int i = 0; i < N_PAIRS; i++)
		expect_no_event(f->b[i]);
	handshake(f, f->b[0], f->b[1]);

	fabric_cli(f->fabric, "restore-port", port);
	daemon_restart(f->da);
	expect_reconnected(f);
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
}

UNIT_TEST_MAIN()
