/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of restarts: the daemon under a supervisor with an fd
 * store, as systemd runs it, is stopped (SIGTERM, a planned hand-off) or
 * killed (SIGKILL, a crash) in the middle of its clients' handshakes, and
 * started again with what the store kept; or, without a supervisor, told
 * to execute itself again (SIGHUP). Raw QEMU-protocol clients, which
 * never reconnect and never register again, must finish every connection:
 * no EOF, no misrouted or repeated MAD, no fd left behind. And a stop that
 * clears the store still disconnects everyone.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <glib.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "harness.h"
#include "unit-test.h"

#define PAIRS 8 /* the two-hosts fabric has 8 client GIDs a side */
#define ROUNDS 10

typedef struct Fixture {
	QemuPairs p; /* A's raw QEMU clients q[i], their peers b[i] on B */
	uint32_t tid;
	unsigned sighups;
} Fixture;

/* Without a supervisor: a write the test holds is not stuck (past the
 * default deadline, 4 s, on a loaded machine; within this one). */
static const char *const held_opts[] = { "--send-timeout", "60000", NULL };

/* @data non-NULL: no supervisor (a host without systemd). */
static void fixture_setup(Fixture *f, gconstpointer data)
{
	f->p.fabric = fabric_new("two-hosts");
	if (!data) {
		f->p.sup = supervisor_new(f->p.fabric->dir);
		f->p.da = daemon_start_supervised(f->p.sup, f->p.fabric, "simA", NULL);
	} else {
		f->p.da = daemon_start(f->p.fabric, "simA", held_opts);
	}
	qemu_pairs_open(&f->p, PAIRS);
	f->tid = 0xa000;
}

/* The fixture for the cases whose data is a signal: a supervisor unless
 * the signal is SIGHUP. */
static void fixture_setup_for_signal(Fixture *f, gconstpointer data)
{
	fixture_setup(f, GPOINTER_TO_INT(data) == SIGHUP ? "no supervisor" : NULL);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	qemu_pairs_free(&f->p);
}

/* Stop or kill the daemon, and start it again from the store; or have it
 * execute itself again (SIGHUP). */
static void bounce(Fixture *f, int sig)
{
	if (sig == SIGHUP) {
		unsigned before = daemon_output_count(f->p.da, "serving simA port 1");
		GPid pid = f->p.da->pid;
		int i;

		/* Every other time through the admin tool, as an operator would. */
		if (++f->sighups % 2) {
			g_autofree char *ctl = g_strdup_printf("%s.ctl", f->p.da->socket);
			g_autofree char *out = NULL;
			const char *argv[] = { harness_env_bin("RDMACM_MUXCTL_BIN"), "--socket", ctl,
					       "restart", NULL };
			int status;

			g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
						   &out, NULL, &status, NULL));
			g_assert_cmpint(status, ==, 0);
			g_assert_nonnull(strstr(out, "running its binary again"));
		} else {
			g_assert_cmpint(kill(pid, SIGHUP), ==, 0);
		}
		daemon_wait_output(f->p.da, "serving simA port 1", before + 1);
		/* The same process, a new image. */
		g_assert_cmpint(f->p.da->pid, ==, pid);
		g_assert_cmpint(kill(pid, 0), ==, 0);
		/* The old image's senders were reaped before the exec: its
		 * children are the new image's eight senders, no zombie. */
		for (i = 0; i < 500; i++) {
			g_autoptr(GArray) kids = daemon_children(f->p.da);
			unsigned running = 0;

			for (guint k = 0; k < kids->len; k++)
				running += pid_running(g_array_index(kids, int, k));
			if (kids->len == 8 && running == 8)
				break;
			g_usleep(10000);
		}
		g_assert_cmpint(i, <, 500);
		return;
	}
	if (sig == SIGKILL)
		daemon_kill(f->p.da);
	else
		g_assert_cmpint(daemon_stop(f->p.da), ==, 0);
	daemon_restart(f->p.da);
}

/*
 * Every connection q[i] -> b[i] goes REQ | restart | REP, RTU | restart |
 * DREQ, DREP, with a restart at each "|": the sessions, the GIDs and the
 * sockets all cross it. @data: the signal (a test case's data).
 */
static void restart_during_handshakes(Fixture *f, gconstpointer data)
{
	const int sig = GPOINTER_TO_INT(data);
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux_msg m;
	uint8_t mad[256];
	uint32_t wq[PAIRS], wp[PAIRS];
	unsigned fds_first = 0;

	for (int round = 0; round < ROUNDS; round++) {
		uint32_t base = 0x1000u * (uint32_t)(round + 1);

		for (int i = 0; i < PAIRS; i++) {
			mad_build_req(mad, base + (uint32_t)i, f->p.qgid[i], f->p.b[i]->gid, ++f->tid);
			qemu_pairs_to_peer(&f->p, (unsigned)i, mad, &in);
			g_assert_cmpmem(in.addr.gid, IB_GID_LEN, f->p.qgid[i], IB_GID_LEN);
			wq[i] = mad_local(in.mad);
		}
		bounce(f, sig);
		for (int i = 0; i < PAIRS; i++) {
			mad_build(mad, CM_REP, 0x500u + (uint32_t)i, wq[i], ++f->tid);
			qemu_pairs_to_client(&f->p, (unsigned)i, mad, &m);
			/* The session crossed the restart: the REP carries the
			 * client's own comm id, and only this client got it. */
			g_assert_cmpuint(mad_remote(m.umad.mad), ==, base + (uint32_t)i);
			wp[i] = mad_local(m.umad.mad);
			mad_build(mad, CM_RTU, base + (uint32_t)i, wp[i], ++f->tid);
			qemu_pairs_to_peer(&f->p, (unsigned)i, mad, &in);
			g_assert_cmpuint(mad_remote(in.mad), ==, 0x500u + (uint32_t)i);
		}
		bounce(f, sig);
		for (int i = 0; i < PAIRS; i++) {
			mad_build(mad, CM_DREQ, 0x500u + (uint32_t)i, wq[i], ++f->tid);
			qemu_pairs_to_client(&f->p, (unsigned)i, mad, &m);
			g_assert_cmpuint(mad_remote(m.umad.mad), ==, base + (uint32_t)i);
			mad_build(mad, CM_DREP, base + (uint32_t)i, wp[i], ++f->tid);
			qemu_pairs_to_peer(&f->p, (unsigned)i, mad, &in);
		}
		/* Nothing is left behind: one stored socket per client, and the
		 * daemon's fd count does not grow from round to round. */
		if (f->p.sup)
			g_assert_cmpuint(supervisor_stored(f->p.sup, "client."), ==, PAIRS);
		if (round == 0)
			fds_first = daemon_open_fds(f->p.da);
		else
			g_assert_cmpuint(daemon_open_fds(f->p.da), ==, fds_first);
	}
	/* No MAD came twice, and none went astray: daemon B relayed each
	 * of the test's MADs once, both ways, and both daemons have written
	 * everything to their clients. */
	for (int i = 0; i < 5; i++) {
		static const char *const attrs[] = { "REQ", "REP", "RTU", "DREQ", "DREP" };
		static const bool from_b[] = { false, true, false, true, false };

		g_assert_cmpfloat(daemon_metric(f->p.db, "rdmacm_mux_mads_total",
						LABELS("attribute", attrs[i], "direction",
						       from_b[i] ? "tx" : "rx")),
				  ==, ROUNDS * PAIRS);
		g_assert_cmpfloat(daemon_metric(f->p.db, "rdmacm_mux_mads_total",
						LABELS("attribute", attrs[i], "direction",
						       from_b[i] ? "rx" : "tx")),
				  ==, 0);
	}
	g_assert_cmpfloat(daemon_metric_sum(f->p.db, "rdmacm_mux_rx_dropped_total", NULL), ==, 0);
	qemu_pairs_expect_quiet(&f->p);
}

UNIT_FIXTURE_CASE("/restart/sigterm-handoff", GINT_TO_POINTER(SIGTERM), fixture_setup_for_signal,
		  restart_during_handshakes, sigterm_handoff)
UNIT_FIXTURE_CASE("/restart/sigkill-restart", GINT_TO_POINTER(SIGKILL), fixture_setup_for_signal,
		  restart_during_handshakes, sigkill_restart)

/* Without systemd: SIGHUP (rdmacm-muxctl restart) executes the binary
 * again in the same process, with the same guarantee. */
UNIT_FIXTURE_CASE("/restart/sighup-reexec", GINT_TO_POINTER(SIGHUP), fixture_setup_for_signal,
		  restart_during_handshakes, sighup_reexec)

/* A stop that clears the store (systemctl stop) still disconnects. */
UNIT_FIXTURE_TEST("/restart/stop-means-stop", NULL, fixture_setup, test_stop_means_stop)
{
	struct rdmacm_mux_msg m;
	(void)data;

	g_assert_cmpint(daemon_stop(f->p.da), ==, 0);
	/* Held by the store, the clients still see no EOF: the daemon has
	 * exited, so without the store's copies EOF would be there now. */
	g_assert_cmpuint(supervisor_stored(f->p.sup, "client."), ==, PAIRS);
	for (int i = 0; i < PAIRS; i++)
		g_assert_cmpint(raw_recv(f->p.q[i], &m, 0), ==, -ETIMEDOUT);
	/* ...until the store goes. */
	supervisor_clear(f->p.sup);
	for (int i = 0; i < PAIRS; i++)
		g_assert_cmpint(raw_recv(f->p.q[i], &m, 2000), ==, -EPIPE);
}

/*
 * A state of another format version is refused with a log line, and the
 * daemon starts clean: its clients see EOF (and can register anew) rather
 * than being served with state it does not understand.
 */
UNIT_FIXTURE_TEST("/restart/other-version-refused", NULL, fixture_setup, test_other_version_refused)
{
	struct rdmacm_mux_msg m;
	uint32_t version = 0x7fff;
	g_autofree char *out = NULL;
	int fd;
	(void)data;

	g_assert_cmpint(daemon_stop(f->p.da), ==, 0);
	fd = supervisor_stored_fd(f->p.sup, "state");
	g_assert_cmpint(fd, >=, 0);
	g_assert_cmpint(pwrite(fd, &version, sizeof(version), 8), ==, (ssize_t)sizeof(version));
	daemon_restart(f->p.da);
	for (int i = 0; i < PAIRS; i++)
		g_assert_cmpint(raw_recv(f->p.q[i], &m, 2000), ==, -EPIPE);
	g_assert_cmpuint(supervisor_stored(f->p.sup, "client."), ==, 0);
	out = daemon_output(f->p.da);
	g_assert_nonnull(strstr(out, "this daemon reads version"));
}

/*
 * A client sends many requests in one write: the daemon takes them all in,
 * the first two wait for an address (slow sends, the most one client may
 * have) and pause its reading, and the rest stay in the daemon's buffer.
 * A restart now must not lose them: every request gets its answer, those
 * the old image never handled EAGAIN (send it again), none is left
 * unanswered for the client to time out on.
 */
UNIT_FIXTURE_TEST("/restart/buffered-requests-answered", "no supervisor", fixture_setup, test_buffered_requests_answered)
{
	enum { N = 12, SLOW = 2 };
	struct rdmacm_mux_msg m;
	unsigned serving = daemon_output_count(f->p.da, "serving simA port 1");
	(void)data;

	/* The writes to nowhere stall until the test releases them. One
	 * write of twelve frames: the daemon takes all of it in at once. */
	fabric_hold_unreachable(f->p.fabric, true);
	qemu_pairs_write_to_nowhere(&f->p, 0, N, 0x300, f->tid + 1);
	f->tid += N;
	daemon_wait_metric(f->p.da, "rdmacm_mux_sender_queued_mads", NULL, SLOW);
	g_assert_cmpint(raw_recv(f->p.q[0], &m, 0), ==, -ETIMEDOUT);
	/* SIGHUP: the daemon stops its senders, gives the two writes a
	 * moment, and answers them -ETIMEDOUT as they still wait (the test
	 * holds them); the ten it never handled -EAGAIN. */
	g_assert_cmpint(kill(f->p.da->pid, SIGHUP), ==, 0);
	daemon_wait_output(f->p.da, "serving simA port 1", serving + 1);
	/* The two writes' answers, the kernel's error; then the ten the old
	 * image never handled, EAGAIN (send it again), in the order sent. */
	for (unsigned i = 0; i < N; i++) {
		g_assert_cmpint(raw_recv(f->p.q[0], &m, HARNESS_WAIT_MS), ==, 0);
		g_assert_cmpuint(m.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
		g_assert_cmpuint(m.hdr.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
		g_assert_cmpint(m.hdr.err_code, ==, i < SLOW ? -ETIMEDOUT : -EAGAIN);
	}
	daemon_wait_metric(f->p.da, "rdmacm_mux_client_queued_frames", NULL, 0);
	g_assert_cmpint(raw_recv(f->p.q[0], &m, 0), ==, -ETIMEDOUT);
	g_assert_cmpuint(daemon_output_count(f->p.da, "answered EAGAIN, to be sent again"), ==, 1);
	fabric_hold_unreachable(f->p.fabric, false);
}

/* What each of @pid's fds is (their /proc links), counted: target -> n. */
static GHashTable *fd_targets(int pid, int *ret_max)
{
	g_autofree char *dir_path = g_strdup_printf("/proc/%d/fd", pid);
	g_autoptr(GDir) dir = g_dir_open(dir_path, 0, NULL);
	GHashTable *t = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	const char *e;

	g_assert_nonnull(dir);
	*ret_max = 0;
	while ((e = g_dir_read_name(dir))) {
		g_autofree char *link = g_build_filename(dir_path, e, NULL);
		char *target = g_file_read_link(link, NULL);

		if (!target)
			continue; /* closed meanwhile */
		*ret_max = MAX(*ret_max, atoi(e));
		g_hash_table_replace(t, target,
				     GUINT_TO_POINTER(GPOINTER_TO_UINT(g_hash_table_lookup(t, target)) + 1));
	}
	return t;
}

/*
 * A re-execution that cannot copy every fd it hands on (here: the fd
 * limit, lowered under the daemon, stops the copies part of the way) goes
 * on as it was, and leaves none of the copies it made behind: no socket,
 * memfd or device the daemon had is open once more than before.
 */
UNIT_FIXTURE_TEST("/restart/sighup-fails-cleanly", "no supervisor", fixture_setup,
		  test_sighup_fails_cleanly)
{
	g_autoptr(GHashTable) before = NULL, after = NULL;
	struct rlimit old, low;
	struct rdmacm_mux_msg m;
	uint8_t gid[IB_GID_LEN];
	GHashTableIter it;
	gpointer target, n;
	int max, max_after;
	(void)data;

	before = fd_targets(f->p.da->pid, &max);
	g_assert_cmpint(prlimit(f->p.da->pid, RLIMIT_NOFILE, NULL, &old), ==, 0);
	/* Room for the state's two memfds and a look at /proc/self/fd above
	 * every fd open now, and for a few of the 13 copies: not for all. */
	low = old;
	low.rlim_cur = (rlim_t)max + 6;
	g_assert_cmpint(prlimit(f->p.da->pid, RLIMIT_NOFILE, &low, NULL), ==, 0);
	g_assert_cmpint(kill(f->p.da->pid, SIGHUP), ==, 0);
	for (int i = 0; i < 2000 && !daemon_output_count(f->p.da, "cannot re-execute: "); i++)
		g_usleep(10000);
	g_assert_cmpuint(daemon_output_count(f->p.da, "cannot re-execute: "), ==, 1);
	g_assert_cmpint(prlimit(f->p.da->pid, RLIMIT_NOFILE, &old, NULL), ==, 0);
	g_assert_true(pid_running(f->p.da->pid));
	after = fd_targets(f->p.da->pid, &max_after);
	g_hash_table_iter_init(&it, before);
	while (g_hash_table_iter_next(&it, &target, &n)) {
		guint now = GPOINTER_TO_UINT(g_hash_table_lookup(after, target));

		if (now > GPOINTER_TO_UINT(n))
			g_error("%s is open %u times after the failed re-execution, %u before",
				(const char *)target, now, GPOINTER_TO_UINT(n));
	}
	/* Still serving its clients. */
	memcpy(gid, f->p.qgid[0], IB_GID_LEN);
	gid[IB_GID_LEN - 1] += 100;
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, gid);
	g_assert_cmpint(raw_request(f->p.q[0], &m), ==, 0);
}

UNIT_TEST_MAIN()
