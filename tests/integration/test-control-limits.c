/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of the control socket as a hostile local user sees
 * it: it obeys the main socket's allow-lists and is root's only by
 * default; a client that floods after its command neither stalls the loop
 * nor stays; trace readers are capped, with a clear error, and one that
 * does not read is shed; a refused rdmacm-muxctl says why instead of
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
	f->da = daemon_start(f->fabric, "simA", data);
	f->db = daemon_start(f->fabric, "simB", NULL);
	f->a1 = vm_new(f->da, "::ffff:10.0.1.1", "a1");
	f->b1 = vm_new(f->db, "::ffff:10.0.2.1", "b1");
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
static int status_as_nobody(const Daemon *d)
{
	pid_t pid = fork();
	int status;

	g_assert_cmpint(pid, >=, 0);
	if (pid == 0) {
		g_autofree char *out = NULL;
		int fd;

		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(3);
		fd = ctl_connect(d);
		if (fd < 0)
			_exit(2);
		out = ctl_ask(fd, "status\n", 3000);
		_exit(strstr(out, "simA") ? 0 : 1);
	}
	g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
	g_assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static const char *const allow_opts[] = { "--mode", "0666", "--allow-uid", "0", NULL };
static const char *const allow_open_opts[] = { "--mode", "0666", "--control-mode", "0666",
					       "--allow-uid", "0", NULL };

/*
 * The main socket is root's by its allow-list: so is the control socket.
 * uid 65534 read every client's pid and GIDs and a live trace before.
 */
static void test_allow_lists(Fixture *f, gconstpointer data)
{
	(void)data;
	g_assert_cmpint(status_as_nobody(f->da), !=, 0);
}

/* Even when its file mode lets anyone connect (--control-mode 0666), the
 * allow-list refuses, with a log line; root is served. */
static void test_allow_lists_open_mode(Fixture *f, gconstpointer data)
{
	g_autofree char *out = NULL, *log = NULL;
	int fd;
	(void)data;

	g_assert_cmpint(status_as_nobody(f->da), ==, 1);
	fd = ctl_connect(f->da);
	g_assert_cmpint(fd, >=, 0);
	out = ctl_ask(fd, "status\n", 3000);
	close(fd);
	g_assert_nonnull(strstr(out, "simA"));
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	log = daemon_output(f->da);
	g_assert_nonnull(strstr(log, "refusing a connection on the control socket (pid"));
}

/* Without --control-mode the control socket is root's only: 0600, even
 * where the main socket is open to a group. */
static void test_default_mode(Fixture *f, gconstpointer data)
{
	g_autofree char *ctl = g_strdup_printf("%s.ctl", f->db->socket);
	struct stat st;
	(void)data;

	g_assert_cmpint(stat(ctl, &st), ==, 0);
	g_assert_cmpuint(st.st_mode & 0777, ==, 0600);
	g_assert_cmpint(stat(f->db->socket, &st), ==, 0);
	g_assert_cmpuint(st.st_mode & 0777, ==, 0660);
}

typedef struct Flooder {
	const char *command;
	int fd;
	gint64 until;
	gint stopped_by_daemon;
} Flooder;

static gpointer flood(gpointer data)
{
	Flooder *fl = data;
	char junk[65536];

	memset(junk, 'x', sizeof(junk));
	/* The command, and straight after it more bytes than the daemon can
	 * read: they are in flight when it answers and closes. */
	if (send(fl->fd, fl->command, strlen(fl->command), MSG_NOSIGNAL) < 0)
		return NULL;
	while (g_get_monotonic_time() < fl->until) {
		if (send(fl->fd, junk, sizeof(junk), MSG_NOSIGNAL) < 0) {
			g_atomic_int_set(&fl->stopped_by_daemon, 1);
			break;
		}
	}
	return NULL;
}

/*
 * A control client sends its command and then bytes as fast as it can:
 * the daemon closes it (after its answer, or after 64 KiB of chatter from
 * a trace reader) and keeps serving the others; it read and dropped such
 * bytes for as long as they came, in a loop, for seconds at a time.
 */
static void flood_after(Fixture *f, const char *command)
{
	Flooder fl = { .command = command, .until = g_get_monotonic_time() + 2500000 };
	gint64 worst = 0;
	GThread *t;

	fl.fd = ctl_connect(f->da);
	g_assert_cmpint(fl.fd, >=, 0);
	t = g_thread_new("flood", flood, &fl);
	/* Meanwhile a client's requests are answered. */
	for (gint64 end = g_get_monotonic_time() + 2000000; g_get_monotonic_time() < end;) {
		gint64 t0 = g_get_monotonic_time();

		g_assert_cmpuint(vm_stats(f->a1).gids, ==, 1);
		worst = MAX(worst, g_get_monotonic_time() - t0);
		g_usleep(20000);
	}
	g_thread_join(t);
	close(fl.fd);
	g_test_message("slowest request during the flood: %" G_GINT64_FORMAT " us", worst);
	g_assert_cmpint(worst, <, 500000);
	g_assert_true(g_atomic_int_get(&fl.stopped_by_daemon));
}

static void test_flood_after_command(Fixture *f, gconstpointer data)
{
	g_autofree char *log = NULL;
	(void)data;

	flood_after(f, "status\n");
	flood_after(f, "trace\n");
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	log = daemon_output(f->da);
	g_assert_nonnull(strstr(log, "keeps sending after its command"));
}

#define READERS 4 /* --max-trace-readers' default */

/*
 * Four trace readers at most: the fifth is told so, and the others (and
 * rdmacm-muxctl status) go on working. A reader that does not read while
 * MADs flow is closed, not kept at the relay's expense.
 */
static void test_trace_readers(Fixture *f, gconstpointer data)
{
	g_autofree char *extra = NULL, *out = NULL, *log = NULL;
	uint8_t mad[256];
	int r[READERS], r1, late;
	char buf[64];
	gint64 end;
	bool shed = false;
	(void)data;

	for (int i = 0; i < READERS; i++) {
		r[i] = ctl_connect(f->da);
		g_assert_cmpint(write(r[i], "trace\n", 6), ==, 6);
		g_assert_cmpint(read(r[i], buf, sizeof(buf)), >, 0);
	}
	late = ctl_connect(f->da);
	extra = ctl_ask(late, "trace\n", 3000);
	close(late);
	g_assert_cmpstr(extra, ==, "error: too many trace readers (4)\n");
	g_assert_cmpint(muxctl(f->da, "status", &out), ==, 0);
	g_assert_nonnull(strstr(out, "simA"));
	for (int i = 1; i < READERS; i++)
		close(r[i]);
	r1 = r[0];

	/* r1 never reads again: MADs flow until the daemon gives up on it. */
	end = g_get_monotonic_time() + 15000000;
	while (!shed && g_get_monotonic_time() < end) {
		struct pollfd p = { r1, POLLRDHUP, 0 };

		for (int i = 0; i < 50; i++) {
			uint32_t tid = ++f->tid;

			mad_build_req(mad, 0x100 + (tid & 0xffff), f->a1->gid, f->b1->gid, tid);
			(void)vm_send(f->a1, f->b1->gid, mad);
		}
		shed = poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP));
	}
	close(r1);
	g_assert_true(shed);
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	log = daemon_output(f->da);
	g_assert_nonnull(strstr(log, "closing a trace reader (pid"));
}

/*
 * With every control slot taken, rdmacm-muxctl shows the daemon's reason
 * ("too many control connections"), not the "Broken pipe" its write ran
 * into.
 */
static void test_refusal_is_explained(Fixture *f, gconstpointer data)
{
	g_autofree char *out = NULL;
	int held[16];
	(void)data;

	for (unsigned i = 0; i < G_N_ELEMENTS(held); i++)
		held[i] = ctl_connect(f->da);
	g_usleep(100000);
	g_assert_cmpint(muxctl(f->da, "status", &out), ==, 1);
	g_assert_nonnull(strstr(out, "too many control connections"));
	g_assert_null(strstr(out, "Broken pipe"));
	for (unsigned i = 0; i < G_N_ELEMENTS(held); i++)
		close(held[i]);
}

int main(int argc, char **argv)
{
	static const HarnessTest tests[] = {
		HARNESS_TEST("/control/allow-lists", allow_opts, fixture_setup, test_allow_lists),
		HARNESS_TEST("/control/allow-lists-open-mode", allow_open_opts, fixture_setup, test_allow_lists_open_mode),
		HARNESS_TEST("/control/default-mode", NULL, fixture_setup, test_default_mode),
		HARNESS_TEST("/control/flood-after-command", NULL, fixture_setup, test_flood_after_command),
		HARNESS_TEST("/control/trace-readers", NULL, fixture_setup, test_trace_readers),
		HARNESS_TEST("/control/refusal-is-explained", NULL, fixture_setup, test_refusal_is_explained),
	};

	g_test_init(&argc, &argv, NULL);
	harness_add_fixture_tests(tests, G_N_ELEMENTS(tests), sizeof(Fixture),
				  (GTestFixtureFunc)(void (*)(void))fixture_teardown);
	return g_test_run();
}
