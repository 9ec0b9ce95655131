/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of the loop and the daemon's bounds under a hostile
 * tenant: sends to unreachable destinations (the kernel resolves the MAC
 * inside write(); the simulated fabric stalls such a write until the test
 * releases it, fabric_hold_unreachable()) never hold up other clients and
 * keep a QEMU client's responses in order; one user cannot take every
 * client slot; a connection that never registers a GID does not keep its
 * slot. Every verdict waits on what the daemon shows (its metrics, its
 * log), never on a sleep; how fast the others are served meanwhile is the
 * bench's unreachable row (bench/README.md), not a pass/fail here.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <glib.h>
#include <string.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "unit-test.h"

#define UNREACHABLE 10

typedef struct Fixture {
	Fabric *fabric;
	Daemon *da, *db;
	uint32_t tid;
} Fixture;

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	hosts_free(f->fabric, f->da, f->db, NULL, 0);
}

static void unreachable_setup(Fixture *f, gconstpointer data)
{
	const char *const fabric[] = { "--preset", "two-hosts", "--unreachable-delay-ms", "1000",
				       NULL };

	/* A write the test holds is not stuck: past the default deadline
	 * (4 s) on a loaded machine, within this one. */
	const char *const opts[] = { "--send-timeout", "60000", NULL };

	(void)data;
	f->fabric = fabric_new_args(fabric);
	hosts_start(f->fabric, opts, opts, &f->da, &f->db);
	f->tid = 0x7000;
}

/*
 * REQs from @u to @n unreachable GIDs, ::ffff:10.0.5.@first and on, with
 * comm ids from @comm_id; their tickets in @tickets. The daemon is not
 * waited for.
 */
static void send_to_nowhere(Fixture *f, Vm *u, unsigned first, unsigned n, uint32_t comm_id,
			    uint32_t *tickets)
{
	struct rdmacm_mux_mad_addr addr = { .grh_present = 1, .hop_limit = 64 };
	uint8_t mad[256];

	for (unsigned i = 0; i < n; i++) {
		g_autofree char *text = g_strdup_printf("::ffff:10.0.5.%u", first + i);

		gid_parse(text, addr.gid);
		mad_build_req(mad, comm_id + i, u->gid, addr.gid, ++f->tid);
		g_assert_cmpint(rdmacm_mux_send_mad(u->mux, u->gid, &addr, mad, 256, &tickets[i]),
				==, 0);
	}
}

/* None of @u's @n tickets is answered yet. */
static void expect_no_answers(Vm *u, const uint32_t *tickets, unsigned n)
{
	struct rdmacm_mux_response resp;

	for (unsigned i = 0; i < n; i++)
		g_assert_cmpint(rdmacm_mux_wait(u->mux, tickets[i], 0, &resp), ==, -ETIMEDOUT);
}

/* Each of @u's @n tickets is answered within @timeout_ms, with @error. */
static void expect_answers(Vm *u, const uint32_t *tickets, unsigned n, int timeout_ms, int error)
{
	struct rdmacm_mux_response resp;

	for (unsigned i = 0; i < n; i++) {
		g_assert_cmpint(rdmacm_mux_wait(u->mux, tickets[i], timeout_ms, &resp), ==, 0);
		g_assert_cmpint(resp.error, ==, error);
	}
}

/*
 * Ten REQs to ten unreachable GIDs are in flight (each write waits until
 * the test releases it; two at a time, the rest in line behind them);
 * meanwhile another client's requests are answered and relayed, and the
 * ten fail with ETIMEDOUT as before.
 */
UNIT_FIXTURE_TEST("/bounds/unreachable-holds-up-nobody", NULL, unreachable_setup, test_unreachable_holds_up_nobody)
{
	Vm *u = vm_new(f->da, "::ffff:10.0.1.3", "u");
	Vm *a1 = vm_new(f->da, "::ffff:10.0.1.1", "a1");
	Vm *b1 = vm_new(f->db, "::ffff:10.0.2.1", "b1");
	struct rdmacm_mux_inbound in;
	uint32_t tickets[UNREACHABLE];
	uint8_t mad[256];
	g_autofree char *out = NULL;
	(void)data;

	fabric_hold_unreachable(f->fabric, true);
	send_to_nowhere(f, u, 1, UNREACHABLE, 0x100, tickets);
	/* The daemon handed the first two to its senders (the most slow
	 * sends one client may have); the rest wait behind them. */
	(void)rdmacm_mux_process(u->mux);
	daemon_wait_metric(f->da, "rdmacm_mux_sender_queued_mads", NULL, 2);

	/* While all ten writes stall, another client's REQs go through. */
	for (unsigned i = 0; i < 5; i++) {
		mad_build_req(mad, 0x200 + i, a1->gid, b1->gid, ++f->tid);
		vm_send_expect(a1, b1, mad, &in);
	}
	expect_no_answers(u, tickets, UNREACHABLE);
	g_assert_cmpfloat(daemon_metric(f->da, "rdmacm_mux_sender_queued_mads", NULL), ==, 2);

	/* Released, the ten get their answer, each the kernel's error. */
	fabric_hold_unreachable(f->fabric, false);
	expect_answers(u, tickets, UNREACHABLE, 20000, -ETIMEDOUT);
	vm_free(u);
	vm_free(a1);
	vm_free(b1);
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	out = daemon_output(f->da);
	g_assert_cmpint(daemon_output_counter(out, "tx refused, send-failed"), ==, UNREACHABLE);
	g_assert_cmpint(daemon_output_attr(out, "REQ", false), ==, 5);
}

/*
 * A QEMU-style client (one blocking read for each answer) whose MAD waits
 * for an address: a MAD routed to it meanwhile comes after the answer,
 * never before, and its next request's answer after that one.
 */
UNIT_FIXTURE_TEST("/bounds/qemu-order-behind-a-slow-send", NULL, unreachable_setup, test_qemu_order_behind_a_slow_send)
{
	Vm *b1 = vm_new(f->db, "::ffff:10.0.2.1", "b1");
	uint8_t qgid[16], nowhere[16], mad[256];
	struct rdmacm_mux_msg m;
	int fd = raw_connect(f->da);
	(void)data;

	gid_parse("::ffff:10.0.1.4", qgid);
	gid_parse("::ffff:10.0.5.77", nowhere);
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, qgid);
	g_assert_cmpint(raw_request(fd, &m), ==, 0);

	/* Its REQ to nowhere (QEMU's own GID in addr.gid), not waiting. */
	raw_frame(&m, RDMACM_MUX_OP_CODE_MAD, qgid);
	mad_build_req(mad, 0x31, qgid, nowhere, ++f->tid);
	memcpy(m.umad.mad, mad, 256);
	m.umad_len = 256;
	m.umad.hdr.addr.grh_present = 1;
	memcpy(m.umad.hdr.addr.gid, qgid, 16);
	fabric_hold_unreachable(f->fabric, true);
	raw_send(fd, &m);
	daemon_wait_metric(f->da, "rdmacm_mux_sender_queued_mads", NULL, 1);
	/* A REQ for it arrives meanwhile, and it asks to UNREG a GID it
	 * does not own; the daemon has dealt with both before the write
	 * ends. */
	mad_build_req(mad, 0x41, b1->gid, qgid, ++f->tid);
	g_assert_cmpint(vm_send(b1, qgid, mad), ==, 0);
	raw_frame(&m, RDMACM_MUX_OP_CODE_UNREG, nowhere);
	raw_send(fd, &m);
	daemon_wait_metric(f->da, "rdmacm_mux_mads_total",
			   LABELS("attribute", "REQ", "direction", "rx"), 1);
	daemon_wait_metric(f->da, "rdmacm_mux_gid_unregistrations_total",
			   LABELS("result", "refused"), 1);
	g_assert_cmpint(raw_recv(fd, &m, 0), ==, -ETIMEDOUT);
	fabric_hold_unreachable(f->fabric, false);

	/* First the REQ's answer (once its write ends), then the other
	 * answer, then the inbound REQ. */
	g_assert_cmpint(raw_recv(fd, &m, 5000), ==, 0);
	g_assert_cmpuint(m.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
	g_assert_cmpuint(m.hdr.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
	g_assert_cmpint(m.hdr.err_code, ==, -ETIMEDOUT);
	g_assert_cmpint(raw_recv(fd, &m, 5000), ==, 0);
	g_assert_cmpuint(m.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
	g_assert_cmpuint(m.hdr.op_code, ==, RDMACM_MUX_OP_CODE_UNREG);
	g_assert_cmpint(m.hdr.err_code, ==, RDMACM_MUX_ERR_CODE_ENOTFOUND);
	g_assert_cmpint(raw_recv(fd, &m, 5000), ==, 0);
	g_assert_cmpuint(m.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_REQ);
	g_assert_cmpuint(m.hdr.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
	g_assert_cmphex(mad_attr(m.umad.mad), ==, CM_REQ);
	close(fd);
	vm_free(b1);
}

/* ---- the sender processes ---- */

/* The sockets among @pid's open fds. */
static unsigned sockets_of(int pid)
{
	g_autofree char *path = g_strdup_printf("/proc/%d/fd", pid);
	g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);
	const char *name;
	unsigned n = 0;

	g_assert_nonnull(dir);
	while ((name = g_dir_read_name(dir))) {
		g_autofree char *fd = g_build_filename(path, name, NULL);
		g_autofree char *target = g_file_read_link(fd, NULL);

		n += target && g_str_has_prefix(target, "socket:");
	}
	return n;
}

/*
 * The daemon is one thread (a second one would tax every system call of
 * the loop) with its sender processes beside it. Killed in the middle of
 * slow writes, the senders' MADs get an error answer instead of hanging,
 * new senders take their places and send, and they all end with the
 * daemon, stopped or killed.
 */
UNIT_FIXTURE_TEST("/bounds/sender-processes", NULL, unreachable_setup, test_sender_processes)
{
	static const char *const senders3[] = { "--senders", "3", NULL };
	Vm *u = vm_new(f->da, "::ffff:10.0.1.3", "u");
	Vm *a1 = vm_new(f->da, "::ffff:10.0.1.1", "a1");
	Vm *b1 = vm_new(f->db, "::ffff:10.0.2.1", "b1");
	struct rdmacm_mux_inbound in;
	g_autoptr(GArray) before = daemon_children(f->da);
	g_autoptr(GArray) after = NULL;
	g_autoptr(GArray) third = NULL;
	uint32_t tickets[2];
	uint8_t mad[256];
	g_autofree char *out = NULL;
	Daemon *dc;
	(void)data;

	g_assert_cmpint(daemon_threads(f->da), ==, 1);
	g_assert_cmpuint(before->len, ==, 8); /* --senders' default */

	/* Two writes that stall until released, in two senders. */
	fabric_hold_unreachable(f->fabric, true);
	send_to_nowhere(f, u, 1, G_N_ELEMENTS(tickets), 0x300, tickets);
	(void)rdmacm_mux_process(u->mux);
	daemon_wait_metric(f->da, "rdmacm_mux_sender_queued_mads", NULL, G_N_ELEMENTS(tickets));
	for (unsigned i = 0; i < before->len; i++)
		g_assert_cmpint(kill(g_array_index(before, int, i), SIGKILL), ==, 0);
	/* Their MADs fail now (the write may or may not have been made),
	 * while the writes would still stall. */
	expect_answers(u, tickets, G_N_ELEMENTS(tickets), 5000, -EIO);
	fabric_hold_unreachable(f->fabric, false);

	/* Eight new senders, running, and the old ones reaped (no zombies).
	 * The respawn backoff and the reaping take what a loaded machine
	 * gives them: wait for that state, as long as any harness wait. */
	for (int i = 0; i < HARNESS_WAIT_MS / 20; i++) {
		bool old_left = false, new_running = true;

		g_clear_pointer(&after, g_array_unref);
		after = daemon_children(f->da);
		for (unsigned j = 0; j < before->len; j++) {
			g_autofree char *proc =
				g_strdup_printf("/proc/%d", g_array_index(before, int, j));

			old_left |= g_file_test(proc, G_FILE_TEST_EXISTS);
		}
		for (unsigned j = 0; j < after->len; j++)
			new_running &= pid_running(g_array_index(after, int, j));
		if (after->len == 8 && !old_left && new_running)
			break;
		g_usleep(20000);
	}
	g_assert_cmpuint(after->len, ==, 8);
	for (unsigned i = 0; i < after->len; i++) {
		g_assert_true(pid_running(g_array_index(after, int, i)));
		for (unsigned j = 0; j < before->len; j++)
			g_assert_cmpint(g_array_index(after, int, i), !=, g_array_index(before, int, j));
	}
	/* Forked with three clients connected, a new sender keeps none of
	 * their sockets (nor the listeners): its own only, once it is past
	 * its first steps. A copy would keep a client's connection up after
	 * the daemon closed it. */
	for (unsigned i = 0; i < after->len; i++) {
		int pid = g_array_index(after, int, i);

		for (int k = 0; k < HARNESS_WAIT_MS / 20 && sockets_of(pid) != 1; k++)
			g_usleep(20000);
		g_assert_cmpuint(sockets_of(pid), ==, 1);
	}
	/* A first MAD to a destination goes through a sender: the new ones
	 * write it, and an unreachable one still fails as the kernel says. */
	mad_build_req(mad, 0x310, a1->gid, b1->gid, ++f->tid);
	vm_send_expect(a1, b1, mad, &in);
	send_to_nowhere(f, u, 9, 1, 0x311, tickets);
	expect_answers(u, tickets, 1, 5000, -ETIMEDOUT);
	vm_free(u);
	vm_free(a1);
	vm_free(b1);

	/* Stopped, the daemon takes its senders with it. */
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	out = daemon_output(f->da);
	g_assert_nonnull(strstr(out, "replaces it"));
	for (unsigned i = 0; i < after->len; i++)
		g_assert_false(pid_running(g_array_index(after, int, i)));

	/* Killed, too (--senders sets how many). */
	dc = daemon_start(f->fabric, "simA", senders3);
	third = daemon_children(dc);
	g_assert_cmpuint(third->len, ==, 3);
	daemon_kill(dc);
	/* (Ending a process takes a while under the sanitizers.) */
	for (unsigned i = 0; i < third->len; i++) {
		for (int k = 0; k < HARNESS_WAIT_MS / 20 && pid_running(g_array_index(third, int, i));
		     k++)
			g_usleep(20000);
		g_assert_false(pid_running(g_array_index(third, int, i)));
	}
	daemon_free(dc);
}

/* ---- one user, many connections ---- */

static void limits_setup(Fixture *f, gconstpointer data)
{
	f->fabric = fabric_new("two-hosts");
	/* Other users reach the socket in it (its mode decides the rest). */
	g_assert_cmpint(chmod(f->fabric->dir, 0711), ==, 0);
	f->da = daemon_start(f->fabric, "simA", data);
	f->tid = 0x7100;
}

/* Connect to @d and REG @gid (text). Return: 0 when accepted, 1 when
 * not, 4 without a connection. */
static int connect_and_reg(const Daemon *d, const void *gid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct rdmacm_mux_msg m;
	uint8_t g[16];
	int fd;

	g_strlcpy(sa.sun_path, d->socket, sizeof(sa.sun_path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return 4;
	gid_parse(gid, g);
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, g);
	raw_send(fd, &m);
	return raw_recv(fd, &m, 3000) == 0 && m.hdr.err_code == 0 ? 0 : 1;
}

/* Connect as uid/gid 65534 and REG @gid; exit status 0 when accepted. */
static int connect_as_nobody(const Daemon *d, const char *gid)
{
	return harness_as_nobody(connect_and_reg, d, gid);
}

static const char *const per_uid_opts[] = { "--mode", "0666", "--max-clients", "8",
					    "--max-clients-per-uid", "3", NULL };

UNIT_FIXTURE_TEST("/bounds/per-uid-limit", per_uid_opts, limits_setup, test_per_uid_limit)
{
	struct rdmacm_mux_msg m;
	int fds[4];
	uint8_t g[16];
	(void)data;

	/* One user's fourth connection is closed at once. (One at a time,
	 * each answered: daemon_start()'s own probe connection is gone by
	 * then.) */
	for (int i = 0; i < 3; i++) {
		g_autofree char *gid = g_strdup_printf("::ffff:10.0.1.%d", i + 1);

		fds[i] = raw_connect(f->da);
		gid_parse(gid, g);
		raw_frame(&m, RDMACM_MUX_OP_CODE_REG, g);
		g_assert_cmpint(raw_request(fds[i], &m), ==, 0);
	}
	fds[3] = raw_connect(f->da);
	g_assert_cmpint(raw_recv(fds[3], &m, 2000), ==, -EPIPE);
	/* ...while another user still gets in. */
	g_assert_cmpint(connect_as_nobody(f->da, "::ffff:10.0.1.5"), ==, 0);
	/* A slot that frees is the user's again (once the daemon saw both
	 * that one and nobody's go). */
	close(fds[0]);
	daemon_wait_metric(f->da, "rdmacm_mux_clients", NULL, 2);
	fds[0] = raw_connect(f->da);
	gid_parse("::ffff:10.0.1.6", g);
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, g);
	g_assert_cmpint(raw_request(fds[0], &m), ==, 0);
	for (int i = 0; i < 4; i++)
		close(fds[i]);
}

static const char *const register_opts[] = { "--register-timeout", "300", NULL };

/* A connection that registers nothing is closed; one that does stays. */
UNIT_FIXTURE_TEST("/bounds/register-timeout", register_opts, limits_setup, test_register_timeout)
{
	Vm *vm = vm_new(f->da, "::ffff:10.0.1.1", "a1");
	struct rdmacm_mux_msg m;
	int idle = raw_connect(f->da);
	int64_t t0 = g_get_monotonic_time();
	g_autofree char *out = NULL;
	(void)data;

	g_assert_cmpint(raw_recv(idle, &m, 5000), ==, -EPIPE);
	g_assert_cmpint(g_get_monotonic_time() - t0, >=, 250000);
	close(idle);
	/* The registered one is still served. */
	g_assert_cmpuint(vm_stats(vm).gids, ==, 1);
	vm_free(vm);
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	out = daemon_output(f->da);
	g_assert_nonnull(strstr(out, "registered no GID in time"));
}

/*
 * At its fd limit the daemon stops watching the listening socket instead
 * of waking on it without end (it burnt a whole CPU; the listener's unit
 * test, /listener/emfile-pauses, proves the pause and the retry); the
 * clients that wait are served once fds are free again, and the
 * registered ones are served all along.
 */
UNIT_FIXTURE_TEST("/bounds/fd-exhaustion", NULL, limits_setup, test_fd_exhaustion)
{
	Vm *vm = vm_new(f->da, "::ffff:10.0.1.1", "a1");
	struct rlimit saved, low;
	struct rdmacm_mux_msg m;
	int waiting[6];
	uint8_t g[16];
	(void)data;

	g_assert_cmpint(prlimit(f->da->pid, RLIMIT_NOFILE, NULL, &saved), ==, 0);
	low = saved;
	low.rlim_cur = daemon_open_fds(f->da);
	g_assert_cmpint(prlimit(f->da->pid, RLIMIT_NOFILE, &low, NULL), ==, 0);
	for (unsigned i = 0; i < G_N_ELEMENTS(waiting); i++)
		waiting[i] = raw_connect(f->da);
	daemon_wait_output(f->da, "not accepting on the main socket", 1);
	/* A registered client is still served. (Not through the control
	 * socket: that one is out of fds too.) */
	g_assert_cmpuint(vm_stats(vm).gids, ==, 1);

	g_assert_cmpint(prlimit(f->da->pid, RLIMIT_NOFILE, &saved, NULL), ==, 0);
	for (unsigned i = 0; i < G_N_ELEMENTS(waiting); i++) {
		g_autofree char *gid = g_strdup_printf("::ffff:10.0.2.%u", i + 1);

		gid_parse(gid, g);
		raw_frame(&m, RDMACM_MUX_OP_CODE_REG, g);
		g_assert_cmpint(raw_request(waiting[i], &m), ==, 0);
		close(waiting[i]);
	}
	vm_free(vm);
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	{
		g_autofree char *out = daemon_output(f->da);

		g_assert_cmpuint(daemon_output_count(f->da, "not accepting on the main socket"), ==, 1);
		g_assert_nonnull(strstr(out, "accepting on the main socket again"));
	}
}

/*
 * A --max-clients that the fd limit cannot hold is clamped, with a
 * warning, instead of ending in EMFILE for everyone.
 */
UNIT_FIXTURE_TEST("/bounds/max-clients-clamped", NULL, limits_setup, test_max_clients_clamped)
{
	const char *const opts[] = { "--max-clients", "100000", NULL };
	g_autofree char *out = NULL;
	Vm *vm;
	(void)data;

	if (g_getenv("RDMACM_MUX_WRAPPER")) {
		g_test_skip("the daemon already runs under a wrapper");
		return;
	}
	/* util-linux's prlimit lowers the hard limit in the daemon only. */
	g_setenv("RDMACM_MUX_WRAPPER", "prlimit --nofile=256:256", TRUE);
	f->db = daemon_start(f->fabric, "simB", opts);
	g_unsetenv("RDMACM_MUX_WRAPPER");
	vm = vm_new(f->db, "::ffff:10.0.2.1", "b1");
	vm_free(vm);
	g_assert_cmpint(daemon_stop(f->db), ==, 0);
	out = daemon_output(f->db);
	g_assert_nonnull(strstr(out, "--max-clients 100000 does not fit the fd limit"));
}

UNIT_TEST_MAIN()
