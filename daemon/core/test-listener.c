/* SPDX-License-Identifier: MIT */
/* Unit tests of the listening sockets: --mode/--group parsing, stale-socket
 * removal (never a live socket, never a file that is not a socket), the
 * mode a bound socket gets, socket activation by name (in a child, as
 * systemd would start us), the allow-lists, accept() at the fd limit:
 * it pauses instead of spinning, and resumes once an fd is free; and a
 * socket the loop cannot watch, left to the caller to log. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "listener.h"
#include "log.h"
#include "test-log-capture.h"
#include "unit-test.h"

typedef struct Dir {
	char *path;
} Dir;

static void dir_setup(Dir *d, gconstpointer data)
{
	(void)data;
	d->path = g_dir_make_tmp("test-listener-XXXXXX", NULL);
	g_assert_nonnull(d->path);
}

static void dir_teardown(Dir *d, gconstpointer data)
{
	g_autoptr(GDir) dir = g_dir_open(d->path, 0, NULL);
	const char *name;

	(void)data;
	while (dir && (name = g_dir_read_name(dir))) {
		g_autofree char *p = g_build_filename(d->path, name, NULL);
		(void)unlink(p);
	}
	(void)rmdir(d->path);
	g_free(d->path);
}

/* A listening socket at @path; return its fd. */
static int listen_at(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	g_assert_cmpint(fd, >=, 0);
	g_assert_cmpuint(strlen(path), <, sizeof(sa.sun_path));
	strcpy(sa.sun_path, path);
	g_assert_cmpint(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
	g_assert_cmpint(listen(fd, 16), ==, 0);
	return fd;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	g_assert_cmpint(fd, >=, 0);
	strcpy(sa.sun_path, path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -errno;
	}
	return fd;
}

UNIT_TEST("/listener/perms-parse", test_perms_parse)
{
	ListenerPerms p;

	g_assert_cmpint(listener_perms_parse(NULL, NULL, 0660, "--mode", &p, NULL), ==, 0);
	g_assert_cmpuint(p.mode, ==, 0660);
	g_assert_cmpuint(p.gid, ==, (gid_t)-1);
	/* The owner stays the daemon's unless a caller sets one. */
	g_assert_cmpuint(p.uid, ==, (uid_t)-1);
	g_assert_cmpint(listener_perms_parse("0600", "", 0660, "--mode", &p, NULL), ==, 0);
	g_assert_cmpuint(p.mode, ==, 0600);
	g_assert_cmpuint(p.gid, ==, (gid_t)-1);
	g_assert_cmpint(listener_perms_parse("0660", "root", 0660, "--mode", &p, NULL), ==, 0);
	g_assert_cmpuint(p.gid, ==, 0);
	g_assert_cmpint(listener_perms_parse(NULL, "4242", 0660, "--mode", &p, NULL), ==, 0);
	g_assert_cmpuint(p.gid, ==, 4242);
	g_assert_cmpint(listener_perms_parse("rw", NULL, 0660, "--mode", &p, NULL), ==, -EINVAL);
	g_assert_cmpint(listener_perms_parse("0800", NULL, 0660, "--mode", &p, NULL), ==, -EINVAL);
	g_assert_cmpint(listener_perms_parse("", NULL, 0660, "--mode", &p, NULL), ==, -EINVAL);
	g_assert_cmpint(listener_perms_parse("01777", NULL, 0660, "--mode", &p, NULL), ==, -EINVAL);
	g_assert_cmpint(listener_perms_parse(NULL, "no-such-group-xyzzy", 0660, "--group", &p, NULL),
			==, -ENOENT);
}

static void test_stale_socket(Dir *d, gconstpointer data)
{
	g_autofree char *path = g_build_filename(d->path, "s", NULL);
	g_autofree char *file = g_build_filename(d->path, "f", NULL);
	g_autofree char *missing = g_build_filename(d->path, "none", NULL);
	struct stat st;
	int fd;

	(void)data;
	/* Nothing there: nothing to do. */
	g_assert_cmpint(listener_remove_stale_socket(missing, NULL), ==, 0);

	/* A live socket stays, and so does its file. */
	fd = listen_at(path);
	g_assert_cmpint(listener_remove_stale_socket(path, NULL), ==, -EADDRINUSE);
	g_assert_cmpint(lstat(path, &st), ==, 0);

	/* Its server gone, the file is stale and goes. */
	close(fd);
	g_assert_cmpint(listener_remove_stale_socket(path, NULL), ==, 0);
	g_assert_cmpint(lstat(path, &st), ==, -1);

	/* A regular file at the path is never removed. */
	g_assert_true(g_file_set_contents(file, "keep", -1, NULL));
	g_assert_cmpint(listener_remove_stale_socket(file, NULL), ==, -EEXIST);
	g_assert_cmpint(lstat(file, &st), ==, 0);
	g_assert_true(S_ISREG(st.st_mode));
}

static void test_bind(Dir *d, gconstpointer data)
{
	g_autofree char *path = g_build_filename(d->path, "s", NULL);
	g_autofree char *file = g_build_filename(d->path, "f", NULL);
	char long_path[200];
	ListenerPerms p;
	struct stat st;
	bool bound = false;
	int fd = -1, second = -1, c;

	(void)data;
	/* A stale file from a dead daemon is replaced. */
	close(listen_at(path));
	g_assert_cmpint(listener_perms_parse("0640", NULL, 0660, "--mode", &p, NULL), ==, 0);
	g_assert_cmpint(listener_bind(path, &p, &fd, &bound, NULL), ==, 0);
	g_assert_true(bound);
	g_assert_cmpint(stat(path, &st), ==, 0);
	g_assert_cmpuint(st.st_mode & 0777, ==, 0640);
	g_assert_cmpint(fcntl(fd, F_GETFL) & O_NONBLOCK, !=, 0);
	g_assert_cmpint(fcntl(fd, F_GETFD) & FD_CLOEXEC, !=, 0);
	c = connect_to(path);
	g_assert_cmpint(c, >=, 0);
	close(c);

	/* An owner (a VM's socket): the file is the user's. Root only. */
	if (geteuid() == 0) {
		g_autofree char *owned = g_build_filename(d->path, "owned", NULL);
		int ofd = -1;

		p.uid = 65534;
		bound = false;
		g_assert_cmpint(listener_bind(owned, &p, &ofd, &bound, NULL), ==, 0);
		g_assert_cmpint(stat(owned, &st), ==, 0);
		g_assert_cmpuint(st.st_uid, ==, 65534);
		g_assert_cmpuint(st.st_mode & 0777, ==, 0640);
		close(ofd);
		p.uid = (uid_t)-1;
	}

	/* A second daemon on the same path refuses and leaves ours alone. */
	bound = false;
	g_assert_cmpint(listener_bind(path, &p, &second, &bound, NULL), ==, -EADDRINUSE);
	g_assert_false(bound);
	g_assert_cmpint(second, ==, -1);
	c = connect_to(path);
	g_assert_cmpint(c, >=, 0);
	close(c);
	close(fd);

	g_assert_true(g_file_set_contents(file, "keep", -1, NULL));
	g_assert_cmpint(listener_bind(file, &p, &second, &bound, NULL), ==, -EEXIST);

	memset(long_path, 'x', sizeof(long_path) - 1);
	long_path[0] = '/';
	long_path[sizeof(long_path) - 1] = 0;
	g_assert_cmpint(listener_bind(long_path, &p, &second, &bound, NULL), ==, -ENAMETOOLONG);
}

/*
 * Socket activation in a child, as systemd starts us: @n listening sockets
 * at fd 3 on, LISTEN_FDNAMES=@names (NULL: unset). The child exits with
 * 100 + the fd taken as main, 10 * (control fd) added; or with 1 for a
 * refusal. A socket at @plain_index is a plain unconnected one instead.
 */
static int activated(const char *dir, int n, const char *names, int plain_index)
{
	pid_t pid = fork();
	int status;

	g_assert_cmpint(pid, >=, 0);
	if (pid == 0) {
		char buf[32];
		int main_fd, control_fd, r;

		for (int i = 0; i < n; i++) {
			g_autofree char *p = g_strdup_printf("%s/a%d", dir, i);
			int fd;

			(void)unlink(p);
			fd = i == plain_index ? socket(AF_UNIX, SOCK_STREAM, 0) : listen_at(p);

			if (fd != 3 + i) {
				if (dup2(fd, 3 + i) < 0)
					_exit(90);
				close(fd);
			}
		}
		snprintf(buf, sizeof(buf), "%d", (int)getpid());
		setenv("LISTEN_PID", buf, 1);
		snprintf(buf, sizeof(buf), "%d", n);
		setenv("LISTEN_FDS", buf, 1);
		if (n == 0) {
			unsetenv("LISTEN_PID");
			unsetenv("LISTEN_FDS");
		}
		if (names)
			setenv("LISTEN_FDNAMES", names, 1);
		else
			unsetenv("LISTEN_FDNAMES");
		r = listener_take_activated(NULL, NULL, &main_fd, &control_fd);
		if (r < 0)
			_exit(1);

		if (r != n)
			_exit(91);
		if (n > 0 && !(fcntl(main_fd, F_GETFL) & O_NONBLOCK))
			_exit(92);
		_exit(100 + (main_fd < 0 ? 0 : main_fd) + 10 * (control_fd < 0 ? 0 : control_fd));
	}
	g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
	g_assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void test_activation_names(Dir *d, gconstpointer data)
{
	(void)data;
	/* Not activated: nothing taken. */
	g_assert_cmpint(activated(d->path, 0, NULL, -1), ==, 100);
	/* One unnamed socket is the main one. */
	g_assert_cmpint(activated(d->path, 1, NULL, -1), ==, 103);
	g_assert_cmpint(activated(d->path, 1, "main", -1), ==, 103);
	/* Named, in either order. */
	g_assert_cmpint(activated(d->path, 2, "main:control", -1), ==, 100 + 3 + 40);
	g_assert_cmpint(activated(d->path, 2, "control:main", -1), ==, 100 + 4 + 30);
	/* A socket systemd names something else counts as the main one. */
	g_assert_cmpint(activated(d->path, 2, "rdmacm-mux.socket:control", -1), ==, 100 + 3 + 40);
	/* Refused: two main sockets, two control sockets, only a control
	 * socket, three sockets, a socket that does not listen. */
	g_assert_cmpint(activated(d->path, 2, "main:main", -1), ==, 1);
	g_assert_cmpint(activated(d->path, 2, NULL, -1), ==, 1);
	g_assert_cmpint(activated(d->path, 2, "control:control", -1), ==, 1);
	g_assert_cmpint(activated(d->path, 1, "control", -1), ==, 1);
	g_assert_cmpint(activated(d->path, 3, "main:control:x", -1), ==, 1);
	g_assert_cmpint(activated(d->path, 1, "main", 0), ==, 1);
}

/* listener_set_perms() acts on the socket file itself: a symlink or a FIFO
 * put where the socket was is refused and left as it was, and so is what a
 * symlink points at; a socket gets the mode (and, as root, the owner). */
static void test_set_perms(Dir *d, gconstpointer data)
{
	g_autofree char *sock = g_build_filename(d->path, "s", NULL);
	g_autofree char *target = g_build_filename(d->path, "target", NULL);
	g_autofree char *link = g_build_filename(d->path, "link", NULL);
	g_autofree char *fifo = g_build_filename(d->path, "fifo", NULL);
	ListenerPerms perms = { .mode = 0606, .uid = (uid_t)-1, .gid = (gid_t)-1, .group = "-" };
	g_autofree char *why = NULL;
	struct stat st;
	int fd = listen_at(sock);

	(void)data;
	g_assert_true(g_file_set_contents(target, "x", 1, NULL));
	g_assert_cmpint(chmod(target, 0600), ==, 0);
	g_assert_cmpint(symlink(target, link), ==, 0);
	g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);

	g_assert_cmpint(listener_set_perms(link, &perms, &why), ==, -EEXIST);
	g_assert_nonnull(strstr(why, "a symbolic link"));
	g_clear_pointer(&why, g_free);
	g_assert_cmpint(listener_set_perms(fifo, &perms, &why), ==, -EEXIST);
	g_assert_nonnull(strstr(why, "a FIFO"));
	g_clear_pointer(&why, g_free);
	g_assert_cmpint(stat(target, &st), ==, 0);
	g_assert_cmpuint(st.st_mode & 0777, ==, 0600);
	g_assert_cmpint(lstat(fifo, &st), ==, 0);
	g_assert_cmpuint(st.st_mode & 0777, ==, 0600);

	g_assert_cmpint(listener_set_perms(sock, &perms, &why), ==, 0);
	g_assert_cmpint(stat(sock, &st), ==, 0);
	g_assert_cmpuint(st.st_mode & 0777, ==, 0606);
	if (geteuid() == 0) {
		perms.uid = 65534;
		perms.gid = 65533;
		perms.mode = 0660;
		g_assert_cmpint(listener_set_perms(sock, &perms, &why), ==, 0);
		g_assert_cmpint(stat(sock, &st), ==, 0);
		g_assert_cmpuint(st.st_uid, ==, 65534);
		g_assert_cmpuint(st.st_gid, ==, 65533);
		g_assert_cmpuint(st.st_mode & 0777, ==, 0660);
		/* Back to the daemon's, from another user's file (no CAP_FOWNER
		 * needed: the owner comes back first). */
		perms = (ListenerPerms){ .mode = 0600, .uid = (uid_t)-1, .gid = (gid_t)-1 };
		g_assert_cmpint(listener_set_perms(sock, &perms, &why), ==, 0);
		g_assert_cmpint(stat(sock, &st), ==, 0);
		g_assert_cmpuint(st.st_uid, ==, 0);
		g_assert_cmpuint(st.st_mode & 0777, ==, 0600);
	}
	close(fd);
}

UNIT_TEST("/listener/allows", test_allows)
{
	g_autoptr(GArray) uids = g_array_new(FALSE, FALSE, sizeof(guint));
	g_autoptr(GArray) gids = g_array_new(FALSE, FALSE, sizeof(guint));
	ListenerAllow none = { 0 }, empty = { .uids = uids, .gids = gids };
	ListenerAllow allow = { .uids = uids, .gids = gids };
	struct ucred root = { .uid = 0, .gid = 0 }, nobody = { .uid = 65534, .gid = 65534 };
	guint v = 0;

	g_assert_true(listener_allows(&none, &nobody));
	g_assert_true(listener_allows(&empty, &nobody));
	g_array_append_val(uids, v);
	g_assert_true(listener_allows(&allow, &root));
	g_assert_false(listener_allows(&allow, &nobody));
	/* Both lists must pass. */
	v = 65534;
	g_array_append_val(uids, v);
	v = 0;
	g_array_append_val(gids, v);
	g_assert_true(listener_allows(&allow, &root));
	g_assert_false(listener_allows(&allow, &nobody));
}

typedef struct Accepts {
	GArray *fds;
} Accepts;

static void on_accept(int fd, const struct ucred *cred, void *userdata)
{
	Accepts *a = userdata;

	g_assert_cmpint(cred->pid, ==, getpid());
	g_array_append_val(a->fds, fd);
}

/* Run @e for @ms; return the number of times the loop woke up. */
static unsigned run_for(sd_event *e, unsigned ms)
{
	gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;
	unsigned turns = 0;

	while (g_get_monotonic_time() < end) {
		g_assert_cmpint(sd_event_run(e, 10 * 1000), >=, 0);
		turns++;
	}
	return turns;
}

/*
 * At the fd limit, a readable listening socket would wake the loop at
 * once, forever. The listener pauses instead (the loop then only turns on
 * its own timeouts), and accepts the waiting connection once an fd is free.
 */
static void test_emfile_pauses(Dir *d, gconstpointer data)
{
	g_autofree char *path = g_build_filename(d->path, "s", NULL);
	g_autoptr(GArray) clients = g_array_new(FALSE, FALSE, sizeof(int));
	Accepts a = { .fds = g_array_new(FALSE, FALSE, sizeof(int)) };
	ListenerAllow allow = { 0 };
	struct rlimit saved, low;
	Listener *l = NULL;
	sd_event *e = NULL;
	int fd, spare, c;
	unsigned turns;

	(void)data;
	g_assert_cmpint(sd_event_new(&e), >=, 0);
	fd = listen_at(path);
	g_assert_cmpint(fcntl(fd, F_SETFL, O_NONBLOCK), ==, 0);
	g_assert_cmpint(listener_new(e, fd, "test", &allow, 50, on_accept, &a, &l), ==, 0);

	/* One connection is accepted normally. */
	c = connect_to(path);
	g_assert_cmpint(c, >=, 0);
	g_array_append_val(clients, c);
	(void)run_for(e, 30);
	g_assert_cmpuint(a.fds->len, ==, 1);

	/* fds are handed out lowest first: every fd below @spare is taken, so
	 * with the limit at @spare + 1 the table is full until it is closed.
	 * The client end is opened before the limit bites. */
	g_assert_cmpint(getrlimit(RLIMIT_NOFILE, &saved), ==, 0);
	spare = dup(fd);
	g_assert_cmpint(spare, >=, 0);
	low = saved;
	low.rlim_cur = (rlim_t)spare + 1;
	c = connect_to(path);
	g_assert_cmpint(c, >=, 0);
	g_array_append_val(clients, c);
	g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &low), ==, 0);
	turns = run_for(e, 300);
	g_assert_true(listener_paused(l));
	g_assert_cmpuint(a.fds->len, ==, 1);
	/* Paused, the loop wakes for the 50 ms retries and run_for's 10 ms
	 * timeouts; spinning on the socket would be many thousands. */
	g_assert_cmpuint(turns, <, 100);

	/* An fd comes free: the waiting client is served. That fills the
	 * table again, so the listener stays paused... */
	close(spare);
	(void)run_for(e, 200);
	g_assert_cmpuint(a.fds->len, ==, 2);
	g_assert_true(listener_paused(l));
	/* ...until there is room and nobody waits. */
	g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &saved), ==, 0);
	(void)run_for(e, 200);
	g_assert_false(listener_paused(l));

	listener_free(l);
	for (guint i = 0; i < a.fds->len; i++)
		close(g_array_index(a.fds, int, i));
	for (guint i = 0; i < clients->len; i++)
		close(g_array_index(clients, int, i));
	g_array_unref(a.fds);
	close(fd);
	sd_event_unref(e);
}

typedef struct WatchUnwatchable {
	sd_event *e;
	int fd;
	int r;
	Listener *l;
} WatchUnwatchable;

static void watch_unwatchable(void *arg)
{
	WatchUnwatchable *w = arg;
	ListenerAllow allow = { 0 };

	w->r = listener_new(w->e, w->fd, "test", &allow, 50, on_accept, NULL, &w->l);
}

/*
 * A socket the loop cannot watch (here a regular file: epoll refuses it)
 * is an error for the caller to log, once, at its own level: the main
 * socket's is fatal, the control socket's a warning. listener_new() says
 * nothing itself, and leaves the fd to its caller.
 */
UNIT_TEST("/listener/new-fails-quietly", test_new_fails_quietly)
{
	g_autofree char *tmp = g_build_filename(g_get_tmp_dir(), "test-listener-XXXXXX", NULL);
	WatchUnwatchable w = { .fd = g_mkstemp(tmp), .r = 1 };
	g_autofree char *said = NULL;

	g_assert_cmpint(w.fd, >=, 0);
	g_assert_cmpint(g_unlink(tmp), ==, 0);
	g_assert_cmpint(sd_event_new(&w.e), >=, 0);
	said = test_log_capture(watch_unwatchable, &w);
	g_assert_cmpint(w.r, ==, -EPERM);
	g_assert_null(w.l);
	g_assert_cmpstr(said, ==, "");
	g_assert_cmpint(fcntl(w.fd, F_GETFD), >=, 0);
	close(w.fd);
	sd_event_unref(w.e);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	unit_test_add_registered();
	log_setup(LOG_CRIT, true);
	g_test_add("/listener/stale-socket", Dir, NULL, dir_setup, test_stale_socket, dir_teardown);
	g_test_add("/listener/bind", Dir, NULL, dir_setup, test_bind, dir_teardown);
	g_test_add("/listener/set-perms", Dir, NULL, dir_setup, test_set_perms, dir_teardown);
	g_test_add("/listener/activation-names", Dir, NULL, dir_setup, test_activation_names,
		   dir_teardown);
	g_test_add("/listener/emfile-pauses", Dir, NULL, dir_setup, test_emfile_pauses,
		   dir_teardown);
	return g_test_run();
}
