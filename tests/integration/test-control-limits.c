/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of the control socket as a hostile local user sees
 * it: it obeys the main socket's allow-lists and is root's only by
 * default (--control-mode/--control-group open it); a client that floods
 * after its command neither stalls the relay nor stays; trace readers are
 * capped (--max-trace-readers), with a clear error, and one that does not
 * read is shed and counted; a refused rdmacm-muxctl says why instead of
 * "Broken pipe".
 */
#include <errno.h>
#include <glib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "unit-test.h"

typedef struct Fixture {
	Fabric *fabric;
	Daemon *da, *db;
	Vm *a1, *b1;
	uint32_t tid;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
	f->fabric = fabric_new("two-hosts");
	/* Other users reach the sockets in it (their modes decide the rest). */
	g_assert_cmpint(chmod(f->fabric->dir, 0711), ==, 0);
	hosts_start(f->fabric, data, NULL, &f->da, &f->db);
	hosts_vms(f->da, f->db, "a1 b1", (Vm **const[]){ &f->a1, &f->b1 });
	f->tid = 0xc000;
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	hosts_free(f->fabric, f->da, f->db, (Vm *const[]){ f->a1, f->b1 }, 2);
}

static int ctl_connect(const Daemon *d)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	g_assert_cmpint(fd, >=, 0);
	g_snprintf(sa.sun_path, sizeof(sa.sun_path), "%s.ctl", d->socket);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -errno;
	}
	return fd;
}

/* Everything the daemon writes back to @command, until it closes (or
 * @timeout_ms passes). */
static char *ctl_ask(int fd, const char *command, int timeout_ms)
{
	g_autoptr(GString) out = g_string_new(NULL);
	char buf[4096];

	if (send(fd, command, strlen(command), MSG_NOSIGNAL) < 0)
		return g_strdup("");
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;

		if (poll(&p, 1, timeout_ms) <= 0)
			break;
		n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		g_string_append_len(out, buf, n);
	}
	return g_string_free(g_steal_pointer(&out), FALSE);
}

/* rdmacm-muxctl's exit status, and what it printed (both streams). */
static int muxctl(const Daemon *d, const char *command, char **ret_out)
{
	g_autofree char *ctl = g_strdup_printf("%s.ctl", d->socket);
	const char *argv[] = { harness_env_bin("RDMACM_MUXCTL_BIN"), "--socket", ctl, command, NULL };
	g_autofree char *out = NULL, *err = NULL;
	int status;

	g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
				   &err, &status, NULL));
	*ret_out = g_strconcat(out, err, NULL);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* In a child as uid/gid 65534: ask the control socket for its status.
 * Exit status: 0 answered, 1 refused (EOF with nothing), 2 no connect. */
static int ask_status(const Daemon *d, const void *unused)
{
	g_autofree char *out = NULL;
	int fd = ctl_connect(d);

	(void)unused;
	if (fd < 0)
		return 2;
	out = ctl_ask(fd, "status\n", 3000);
	return strstr(out, "simA") ? 0 : 1;
}

static int status_as_nobody(const Daemon *d)
{
	return harness_as_nobody(ask_status, d, NULL);
}

static const char *const allow_opts[] = { "--mode", "0666", "--allow-uid", "0", NULL };
static const char *const allow_open_opts[] = { "--mode", "0666", "--control-mode", "0666",
					       "--allow-uid", "0", NULL };
static const char *const perms_opts[] = { "--control-group", "nogroup", "--control-mode", "0640",
					  NULL };
static const char *const trace2_opts[] = { "--max-trace-readers", "2", NULL };

/* The control socket file's permission bits and group. */
static void ctl_stat(const Daemon *d, mode_t *mode, gid_t *gid)
{
	g_autofree char *ctl = g_strdup_printf("%s.ctl", d->socket);
	struct stat st;

	g_assert_cmpint(stat(ctl, &st), ==, 0);
	*mode = st.st_mode & 07777;
	*gid = st.st_gid;
}

/*
 * The main socket is root's by its allow-list: so is the control socket.
 * uid 65534 read every client's pid and GIDs and a live trace before.
 */
UNIT_FIXTURE_TEST("/control/allow-lists", allow_opts, fixture_setup, test_allow_lists)
{
	(void)data;
	/* The control socket's default mode (0600) keeps it from even
	 * connecting; with an open mode the allow-list refuses it (next). */
	g_assert_cmpint(status_as_nobody(f->da), ==, 2);
}

/* Even when its file mode lets anyone connect (--control-mode 0666), the
 * allow-list refuses, with a log line; root is served. */
UNIT_FIXTURE_TEST("/control/allow-lists-open-mode", allow_open_opts, fixture_setup, test_allow_lists_open_mode)
{
	g_autofree char *out = NULL, *log = NULL;
	mode_t mode;
	gid_t gid;
	int fd;
	(void)data;

	ctl_stat(f->da, &mode, &gid);
	g_assert_cmpuint(mode, ==, 0666);
	g_assert_cmpint(status_as_nobody(f->da), ==, 1);
	fd = ctl_connect(f->da);
	g_assert_cmpint(fd, >=, 0);
	out = ctl_ask(fd, "status\n", 3000);
	close(fd);
	g_assert_nonnull(strstr(out, "simA"));
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	log = daemon_output(f->da);
	g_assert_nonnull(strstr(log, "refusing a connection on the control socket (pid"));
	g_assert_nonnull(strstr(log, " uid 65534 gid 65534)"));
}

/* @d's control socket has mode @ctl_mode and group @ctl_gid, its main
 * socket mode @mode and group @gid. */
static void expect_modes(const Daemon *d, mode_t ctl_mode, gid_t ctl_gid, mode_t mode, gid_t gid)
{
	struct stat st;
	mode_t m;
	gid_t g;

	ctl_stat(d, &m, &g);
	g_assert_cmpuint(m, ==, ctl_mode);
	g_assert_cmpuint(g, ==, ctl_gid);
	g_assert_cmpint(stat(d->socket, &st), ==, 0);
	g_assert_cmpuint(st.st_mode & 0777, ==, mode);
	g_assert_cmpuint(st.st_gid, ==, gid);
}

/* Without --control-mode the control socket is root's only: 0600, even
 * where the main socket is open to a group. */
UNIT_FIXTURE_TEST("/control/default-mode", NULL, fixture_setup, test_default_mode)
{
	(void)data;

	expect_modes(f->db, 0600, 0, 0660, 0);
}

/* --control-group and --control-mode are the control socket's; the main
 * socket keeps its own. */
UNIT_FIXTURE_TEST("/control/control-perms", perms_opts, fixture_setup, test_control_perms)
{
	(void)data;

	expect_modes(f->da, 0640, 65534, 0660, 0);
}

typedef struct Flooder {
	const char *command;
	int fd;
	gint64 until;
	gint stopped_by_daemon;
	gint done;
} Flooder;

static gpointer flood(gpointer data)
{
	Flooder *fl = data;
	char junk[65536];

	/* The command with junk behind it in the same send, so that the
	 * daemon reads both at once, and then more than it can read. */
	memset(junk, 'x', sizeof(junk));
	memcpy(junk, fl->command, strlen(fl->command));
	while (g_get_monotonic_time() < fl->until) {
		if (send(fl->fd, junk, sizeof(junk), MSG_NOSIGNAL) < 0) {
			g_atomic_int_set(&fl->stopped_by_daemon, 1);
			break;
		}
		memset(junk, 'x', strlen(fl->command));
	}
	g_atomic_int_set(&fl->done, 1);
	return NULL;
}

/* A round trip failed: say where each daemon's counters stood, so that
 * a failure on a loaded machine can be traced from its log alone. */
static G_NORETURN void round_trip_lost(Fixture *f, const char *what)
{
	g_autofree char *ca = NULL, *cb = NULL;

	(void)muxctl(f->da, "counters", &ca);
	(void)muxctl(f->db, "counters", &cb);
	g_error("%s within %d ms\nsimA's counters:\n%s\nsimA said:\n%s\nsimB's counters:\n%s\n"
		"simB said:\n%s",
		what, HARNESS_WAIT_MS, ca ? ca : "-", daemon_output(f->da), cb ? cb : "-",
		daemon_output(f->db));
}

/* A REQ from a1 to b1 and b1's REJ back, through both daemons. */
static void round_trip(Fixture *f)
{
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];
	uint32_t local = ++f->tid;

	mad_build_req(mad, local, f->a1->gid, f->b1->gid, ++f->tid);
	g_assert_cmpint(vm_send(f->a1, f->b1->gid, mad), ==, 0);
	if (vm_recv(f->b1, &in, HARNESS_WAIT_MS) != 0)
		round_trip_lost(f, "the REQ never reached b1");
	g_assert_cmpuint(mad_attr(in.mad), ==, CM_REQ);
	mad_build(mad, CM_REJ, 0, mad_local(in.mad), ++f->tid);
	mad_set_rej(mad, 0, 28); /* MessageRejected: REQ; Reason: consumer defined */
	g_assert_cmpint(vm_send(f->b1, f->a1->gid, mad), ==, 0);
	if (vm_recv(f->a1, &in, HARNESS_WAIT_MS) != 0)
		round_trip_lost(f, "the REJ never reached a1");
	g_assert_cmpuint(mad_attr(in.mad), ==, CM_REJ);
	g_assert_cmpuint(mad_remote(in.mad), ==, local);
}

/*
 * A control client sends its command and then bytes as fast as it can,
 * until the daemon closes it: the daemon does, and keeps relaying. It
 * used to read and drop such bytes for as long as they came (at close
 * after status, in the read handler for trace), relaying nothing
 * meanwhile: the flooder would go on until its own bound and the round
 * trips would wait as long.
 */
static void flood_after(Fixture *f, const char *command, unsigned closed_before)
{
	Flooder fl = { .command = command,
		       .until = g_get_monotonic_time() + HARNESS_WAIT_MS * (gint64)1000 };
	int sndbuf = 32 << 20;
	unsigned trips = 0;
	GThread *t;

	fl.fd = ctl_connect(f->da);
	g_assert_cmpint(fl.fd, >=, 0);
	/* A deep send buffer (root may force it past wmem_max), so that the
	 * daemon finds bytes waiting whenever it reads, however fast. */
	if (setsockopt(fl.fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) < 0)
		(void)setsockopt(fl.fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	t = g_thread_new("flood", flood, &fl);
	/* Meanwhile MADs go through the daemon and back, until the flooder
	 * is closed. (Every REQ stays a half-open session at simB, whose
	 * peer quota is 256: a few dozen.) How fast is the bench's
	 * business. */
	do {
		round_trip(f);
		trips++;
	} while (!g_atomic_int_get(&fl.done));
	g_thread_join(t);
	close(fl.fd);
	g_test_message("%u round trips during the '%.*s' flood", trips,
		       (int)strcspn(command, "\n"), command);
	g_assert_true(g_atomic_int_get(&fl.stopped_by_daemon));
	daemon_wait_metric(f->da, "rdmacm_mux_control_closed_for_sending_total", NULL,
			   closed_before + 1);
}

UNIT_FIXTURE_TEST("/control/flood-after-command", NULL, fixture_setup, test_flood_after_command)
{
	g_autofree char *log = NULL, *out = NULL;
	(void)data;

	flood_after(f, "status\n", 0);
	flood_after(f, "trace\n", 1);
	g_assert_cmpint(muxctl(f->da, "status", &out), ==, 0);
	g_assert_nonnull(strstr(out, "control closed: 2 "));
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	log = daemon_output(f->da);
	g_assert_nonnull(strstr(log, "keeps sending after its command"));
}

/* @n trace readers, each past its first line. */
static void start_readers(const Daemon *d, int *fds, int n)
{
	char buf[64];

	for (int i = 0; i < n; i++) {
		fds[i] = ctl_connect(d);
		g_assert_cmpint(fds[i], >=, 0);
		g_assert_cmpint(write(fds[i], "trace\n", 6), ==, 6);
		g_assert_cmpint(read(fds[i], buf, sizeof(buf)), >, 0);
		g_assert_true(g_str_has_prefix(buf, "# tracing"));
	}
}

/* @n trace readers on @d (their sockets in @r), the most it takes: the
 * next one is told so. */
static void fill_trace_readers(const Daemon *d, int *r, int n)
{
	g_autofree char *want = g_strdup_printf("error: too many trace readers (%d)\n", n);
	g_autofree char *extra = NULL;
	int late;

	start_readers(d, r, n);
	late = ctl_connect(d);
	extra = ctl_ask(late, "trace\n", 3000);
	close(late);
	g_assert_cmpstr(extra, ==, want);
}

/* Four trace readers by default: the fifth is told so. */
UNIT_FIXTURE_TEST("/control/trace-readers-default", NULL, fixture_setup, test_trace_readers_default)
{
	int r[4];
	(void)data;

	fill_trace_readers(f->da, r, 4);
	for (int i = 0; i < 4; i++)
		close(r[i]);
}

/*
 * --max-trace-readers 2: the third is told so (and rdmacm-muxctl trace
 * prints it), and rdmacm-muxctl status goes on working. A reader that
 * does not read while MADs flow is closed, counted and logged, not kept
 * at the relay's expense.
 */
UNIT_FIXTURE_TEST("/control/trace-readers", trace2_opts, fixture_setup, test_trace_readers)
{
	g_autofree char *out = NULL, *traced = NULL, *log = NULL;
	uint8_t mad[256];
	int r[2];
	gint64 end;
	bool shed = false;
	(void)data;

	fill_trace_readers(f->da, r, 2);
	g_assert_cmpint(muxctl(f->da, "trace", &traced), ==, 1);
	g_assert_nonnull(strstr(traced, "error: too many trace readers (2)"));
	g_assert_null(strstr(traced, "Broken pipe"));
	g_assert_cmpint(muxctl(f->da, "status", &out), ==, 0);
	g_assert_nonnull(strstr(out, "simA"));
	g_assert_nonnull(strstr(out, "trace readers:  2 of 2 (2 refused, 0 shed)"));
	g_clear_pointer(&out, g_free);
	close(r[1]);

	/* r[0] never reads again: MADs flow until the daemon gives up on it. */
	end = g_get_monotonic_time() + 15 * G_USEC_PER_SEC;
	while (!shed && g_get_monotonic_time() < end) {
		struct pollfd p = { r[0], POLLRDHUP, 0 };

		for (int i = 0; i < 50; i++) {
			uint32_t tid = ++f->tid;

			mad_build_req(mad, 0x100 + (tid & 0xffff), f->a1->gid, f->b1->gid, tid);
			(void)vm_send(f->a1, f->b1->gid, mad);
		}
		shed = poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP));
	}
	close(r[0]);
	g_assert_true(shed);
	daemon_wait_metric(f->da, "rdmacm_mux_control_trace_readers", NULL, 0);
	g_assert_cmpint(muxctl(f->da, "status", &out), ==, 0);
	g_assert_nonnull(strstr(out, "trace readers:  0 of 2 (2 refused, 1 shed)"));
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	log = daemon_output(f->da);
	g_assert_nonnull(strstr(log, "closing a trace reader (pid"));
}

/*
 * With every control slot taken, rdmacm-muxctl shows the daemon's reason
 * ("too many control connections"), not the "Broken pipe" its write ran
 * into.
 */
UNIT_FIXTURE_TEST("/control/refusal-is-explained", NULL, fixture_setup, test_refusal_is_explained)
{
	g_autofree char *out = NULL;
	int held[16];
	unsigned fds = daemon_open_fds(f->da);
	(void)data;

	for (unsigned i = 0; i < G_N_ELEMENTS(held); i++)
		held[i] = ctl_connect(f->da);
	/* The daemon took every one (its fd table shows them). */
	for (gint64 end = g_get_monotonic_time() + HARNESS_WAIT_MS * (gint64)1000;
	     daemon_open_fds(f->da) < fds + G_N_ELEMENTS(held);) {
		g_assert_cmpint(g_get_monotonic_time(), <, end);
		g_usleep(2000);
	}
	g_assert_cmpint(muxctl(f->da, "status", &out), ==, 1);
	g_assert_nonnull(strstr(out, "too many control connections"));
	g_assert_null(strstr(out, "Broken pipe"));
	for (unsigned i = 0; i < G_N_ELEMENTS(held); i++)
		close(held[i]);
}

UNIT_TEST_MAIN()
