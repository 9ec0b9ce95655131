/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the daemon object (daemon.h), its whole life cycle in
 * this process: a fake port (umad-port-fake.h) on a fake sysfs, the real
 * sender processes, the tests' stand-in for systemd's fd store
 * (tests/support/supervisor.h) and a re-execution edge that keeps the fds
 * the new image would get. A start from an empty store stores what a
 * successor needs; a start from a full one takes the port, the client and
 * its GID over, and the client, connected all along, is served on; a
 * start from a partial one keeps what holds up and lets the rest go; a
 * re-execution without a store passes everything on.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon.h"
#include "supervisor.h"
#include "umad-port-fake.h"
#include "unit-test.h"

#define TURNS 2000

typedef struct Fixture {
	char *dir;
	char *sysfs;
	char *socket;
	Supervisor *sup;
	DaemonConfig cfg;
	Daemon *d;
	/* What the re-execution edge was given: copies of the fds. */
	GPtrArray *reexec_names;
	GArray *reexec_fds;
	unsigned reexec_generation;
	/* The fds a start is passed, and what they are made of. */
	DaemonFds passed;
} Fixture;

static int port_open(void *userdata, const char *dev, int port, UmadPort **ret)
{
	(void)userdata;
	return umad_port_new_fake(dev, port, true, NULL, NULL, ret);
}

static int port_adopt(void *userdata, const char *dev, int port, int fd, int agent,
		      UmadPort **ret)
{
	(void)userdata;
	(void)agent;
	return umad_port_fake_adopt(dev, port, fd, NULL, NULL, ret);
}

/* The new image "starts": the test keeps copies of what it would get. */
static int reexec(void *userdata, const char *exe, char **argv, const DaemonFds *fds,
		  unsigned generation)
{
	Fixture *f = userdata;

	(void)exe;
	(void)argv;
	for (guint i = 0; i < fds->fds->len; i++) {
		int copy = fcntl(g_array_index(fds->fds, int, i), F_DUPFD_CLOEXEC, 3);

		g_assert_cmpint(copy, >=, 0);
		g_array_append_val(f->reexec_fds, copy);
		g_ptr_array_add(f->reexec_names, g_strdup(fds->names->pdata[i]));
	}
	f->reexec_generation = generation;
	return 0;
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
	const char *const gids[] = { UNIT_TEST_GID_LINK_LOCAL, UNIT_TEST_GID_10_0_1_1, NULL };
	(void)data;

	memset(f, 0, sizeof(*f));
	f->dir = g_dir_make_tmp("test-daemon-XXXXXX", NULL);
	f->sysfs = unit_test_fake_sysfs("test-daemon-sysfs-XXXXXX", "fake0", gids);
	f->socket = g_build_filename(f->dir, "sock", NULL);
	f->sup = supervisor_new(f->dir);
	/* libc's: the supervisor's thread reads no environment */
	setenv("NOTIFY_SOCKET", supervisor_notify_path(f->sup), 1);
	f->reexec_names = g_ptr_array_new_with_free_func(g_free);
	f->reexec_fds = g_array_new(FALSE, FALSE, sizeof(int));
	f->passed.names = g_ptr_array_new_with_free_func(g_free);
	f->passed.fds = g_array_new(FALSE, FALSE, sizeof(int));
	daemon_config_init(&f->cfg);
	f->cfg.device = "fake0";
	f->cfg.socket_path = f->socket;
	f->cfg.vms_dir = "";
	f->cfg.relay.senders = 1;
	f->cfg.exe = "/proc/self/exe";
	f->cfg.edges = (DaemonEdges){ .port_open = port_open, .port_adopt = port_adopt,
				      .reexec = reexec, .userdata = f };
}

/* Close what the next start would have been passed. */
static void clear_passed(Fixture *f)
{
	for (guint i = 0; i < f->passed.fds->len; i++)
		close(g_array_index(f->passed.fds, int, i));
	g_array_set_size(f->passed.fds, 0);
	g_ptr_array_set_size(f->passed.names, 0);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	daemon_free(f->d);
	for (guint i = 0; i < f->reexec_fds->len; i++)
		close(g_array_index(f->reexec_fds, int, i));
	g_array_unref(f->reexec_fds);
	g_ptr_array_unref(f->reexec_names);
	clear_passed(f);
	g_array_unref(f->passed.fds);
	g_ptr_array_unref(f->passed.names);
	supervisor_free(f->sup);
	unsetenv("NOTIFY_SOCKET");
	unit_test_remove_tree(f->sysfs);
	unit_test_remove_tree(f->dir);
	g_free(f->socket);
}

/* Start a daemon, passed the fds of f->passed (it takes them over) or
 * none. */
static void start(Fixture *f, bool with_passed)
{
	g_assert_null(f->d);
	f->cfg.edges.passed = with_passed ? &f->passed : NULL;
	f->d = daemon_new(&f->cfg);
	g_assert_cmpint(daemon_start(f->d), ==, 0);
	g_array_set_size(f->passed.fds, 0);
	g_ptr_array_set_size(f->passed.names, 0);
}

/* End the daemon's loop as @end does, and the daemon with it. */
static void finish(Fixture *f, void (*end)(Daemon *d))
{
	end(f->d);
	g_assert_cmpint(daemon_run(f->d), ==, EXIT_SUCCESS);
	daemon_free(f->d);
	f->d = NULL;
}

/* What the supervisor would pass the next start (the store's copies). */
static void take_store(Fixture *f)
{
	supervisor_passed(f->sup, 3, f->passed.names, f->passed.fds);
}

/* Remove the fds named @name from what the next start is passed. */
static void drop_passed(Fixture *f, const char *name)
{
	for (guint i = f->passed.names->len; i-- > 0;)
		if (strcmp(f->passed.names->pdata[i], name) == 0) {
			close(g_array_index(f->passed.fds, int, i));
			g_array_remove_index(f->passed.fds, i);
			g_ptr_array_remove_index(f->passed.names, i);
		}
}

static bool passed_has(const GPtrArray *names, const char *name)
{
	return g_ptr_array_find_with_equal_func((GPtrArray *)names, name, g_str_equal, NULL);
}

static void turn(Fixture *f)
{
	g_assert_cmpint(sd_event_run(daemon_get_event(f->d), 0), >=, 0);
}

static int connect_client(Fixture *f)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	g_assert_cmpint(fd, >=, 0);
	g_strlcpy(sa.sun_path, f->socket, sizeof(sa.sun_path));
	g_assert_cmpint(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
	/* The loop accepts it. */
	for (int i = 0; i < TURNS && relay_client_count(daemon_get_relay(f->d)) == 0; i++)
		turn(f);
	return fd;
}

/* Send REG or UNREG of @gid on @fd; the response's error code (the loop
 * turns until it comes), or 1 when the daemon hung up. */
static int request(Fixture *f, int fd, uint32_t op, const char *gid)
{
	struct rdmacm_mux_msg m = { 0 };
	size_t got = 0;

	m.hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
	m.hdr.op_code = op;
	g_assert_cmpint(inet_pton(AF_INET6, gid, m.hdr.sgid.raw), ==, 1);
	g_assert_cmpint(send(fd, &m, sizeof(m), MSG_NOSIGNAL), ==, (ssize_t)sizeof(m));
	for (int i = 0; i < TURNS && got < sizeof(m); i++) {
		ssize_t n;

		turn(f);
		n = recv(fd, (uint8_t *)&m + got, sizeof(m) - got, MSG_DONTWAIT);
		if (n == 0)
			return 1;
		if (n > 0)
			got += (size_t)n;
	}
	g_assert_cmpuint(got, ==, sizeof(m));
	g_assert_cmpuint(m.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
	return m.hdr.err_code;
}

/* Whether @fd's connection ends within 5 s, the loop turning meanwhile
 * (the end may wait for the supervisor's thread to drop its copy). */
static bool hung_up(Fixture *f, int fd)
{
	gint64 end = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
	char c;

	while (g_get_monotonic_time() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EAGAIN))
			return true;
		turn(f);
		(void)poll(&p, 1, 10);
	}
	return false;
}

/* Whether @a and @b are one fake umad fd (one eventfd: what is written
 * to one is read from the other). */
static bool same_eventfd(int a, int b)
{
	uint64_t v = 7;

	g_assert_cmpint(write(a, &v, sizeof(v)), ==, (ssize_t)sizeof(v));
	v = 0;
	return read(b, &v, sizeof(v)) == (ssize_t)sizeof(v) && v == 7;
}

/* A daemon started on an empty store, with one client that registered a
 * GID: everything a successor needs is in the store. Return: the
 * client's socket. */
static int first_daemon(Fixture *f)
{
	int fd;

	start(f, false);
	g_assert_true(supervisor_wait_ready(f->sup, 0, 5000));
	fd = connect_client(f);
	g_assert_cmpint(request(f, fd, RDMACM_MUX_OP_CODE_REG, "::ffff:10.0.1.1"), ==, 0);
	g_assert_cmpuint(relay_counters(daemon_get_relay(f->d))->reg_ok, ==, 1);
	take_store(f);
	for (const char *const *n = (const char *const[]){ "main", "control", "umad.1.0.fake0",
							    "state", "sessions", "client.1", NULL };
	     *n; n++)
		if (!passed_has(f->passed.names, *n))
			g_error("the store lacks %s", *n);
	g_assert_cmpuint(f->passed.fds->len, ==, 6);
	clear_passed(f);
	return fd;
}

/* first_daemon(), stopped by SIGTERM's work, and a successor started
 * from what the store then holds but the fds named in @missing (NULL or
 * NULL-terminated). Return: the first daemon's client's socket. */
static int restart_from_store(Fixture *f, const char *const *missing)
{
	int fd = first_daemon(f);

	finish(f, daemon_stop);
	take_store(f);
	for (; missing && *missing; missing++)
		drop_passed(f, *missing);
	start(f, true);
	return fd;
}

/* A new client on the main socket gets @gid. */
static void new_client_registers(Fixture *f, const char *gid)
{
	int fd = connect_client(f);

	g_assert_cmpint(request(f, fd, RDMACM_MUX_OP_CODE_REG, gid), ==, 0);
	close(fd);
}

UNIT_FIXTURE_TEST("/daemon/empty-store", NULL, fixture_setup, test_empty_store)
{
	int fd;
	(void)data;

	fd = first_daemon(f);
	g_assert_cmpuint(supervisor_ready_count(f->sup), ==, 1);
	close(fd);
}

/* SIGTERM with a store, and a start from all it holds: the same umad fd,
 * the client served on with its GID, the counters counting on. */
UNIT_FIXTURE_TEST("/daemon/full-store", NULL, fixture_setup, test_full_store)
{
	int fd, umad;
	(void)data;

	fd = restart_from_store(f, NULL);
	umad = supervisor_stored_fd(f->sup, "umad.1.0.fake0");
	g_assert_cmpint(umad, >=, 0);
	g_assert_true(same_eventfd(umad, relay_port(daemon_get_relay(f->d))->fd));
	g_assert_cmpuint(relay_client_count(daemon_get_relay(f->d)), ==, 1);
	g_assert_cmpuint(relay_gid_count(daemon_get_relay(f->d)), ==, 1);
	/* The GID is still the client's: a second REG of it is EEXIST. */
	g_assert_cmpint(request(f, fd, RDMACM_MUX_OP_CODE_REG, "::ffff:10.0.1.1"), ==,
			RDMACM_MUX_ERR_CODE_EEXIST);
	g_assert_cmpint(request(f, fd, RDMACM_MUX_OP_CODE_REG, "::ffff:10.0.1.2"), ==, 0);
	g_assert_cmpuint(relay_counters(daemon_get_relay(f->d))->reg_ok, ==, 2);
	g_assert_true(supervisor_wait_ready(f->sup, 1, 5000));
	close(fd);
}

/* A store that lost the state memfds: its clients cannot be served as
 * they were, and see their socket close; a fresh state is stored, and
 * the port and the main socket are taken over all the same. */
UNIT_FIXTURE_TEST("/daemon/partial-store-no-state", NULL, fixture_setup, test_partial_no_state)
{
	int fd = restart_from_store(f, (const char *const[]){ "state", "sessions", NULL });
	(void)data;

	g_assert_true(hung_up(f, fd));
	g_assert_cmpuint(relay_client_count(daemon_get_relay(f->d)), ==, 0);
	g_assert_cmpuint(supervisor_stored(f->sup, "client."), ==, 0);
	g_assert_cmpint(supervisor_stored_fd(f->sup, "state"), >=, 0);
	/* The GID is free again, for a new client on the main socket. */
	new_client_registers(f, "::ffff:10.0.1.1");
	close(fd);
}

/* A store whose client socket went (the client hung up before the
 * crash): its slot and GID go, the rest is taken over. */
UNIT_FIXTURE_TEST("/daemon/partial-store-no-client", NULL, fixture_setup,
		  test_partial_no_client)
{
	int fd = restart_from_store(f, (const char *const[]){ "client.1", NULL });
	(void)data;

	g_assert_cmpuint(relay_client_count(daemon_get_relay(f->d)), ==, 0);
	g_assert_cmpuint(relay_gid_count(daemon_get_relay(f->d)), ==, 0);
	g_assert_cmpuint(relay_counters(daemon_get_relay(f->d))->reg_ok, ==, 1);
	new_client_registers(f, "::ffff:10.0.1.1");
	close(fd);
}

/* SIGHUP without a store: the new image is passed the sockets, the
 * umad fd, the state written down then, and the client, which it serves
 * on with its GID. */
UNIT_FIXTURE_TEST("/daemon/reexec", NULL, fixture_setup, test_reexec)
{
	int fd;
	(void)data;

	f->cfg.fd_store = false;
	start(f, false);
	g_assert_cmpuint(supervisor_stored(f->sup, ""), ==, 0);
	fd = connect_client(f);
	g_assert_cmpint(request(f, fd, RDMACM_MUX_OP_CODE_REG, "::ffff:10.0.1.1"), ==, 0);
	finish(f, daemon_reexec);
	for (const char *const *n = (const char *const[]){ "main", "control", "umad.1.0.fake0",
							    "state", "sessions", "client.1", NULL };
	     *n; n++)
		if (!passed_has(f->reexec_names, *n))
			g_error("the re-execution does not pass %s", *n);
	g_assert_cmpuint(f->reexec_generation, ==, 1);

	g_ptr_array_extend_and_steal(f->passed.names, g_steal_pointer(&f->reexec_names));
	g_array_append_vals(f->passed.fds, f->reexec_fds->data, f->reexec_fds->len);
	g_array_set_size(f->reexec_fds, 0);
	f->reexec_names = g_ptr_array_new_with_free_func(g_free);
	f->cfg.generation = 1;
	start(f, true);
	g_assert_cmpuint(relay_client_count(daemon_get_relay(f->d)), ==, 1);
	g_assert_cmpint(request(f, fd, RDMACM_MUX_OP_CODE_REG, "::ffff:10.0.1.1"), ==,
			RDMACM_MUX_ERR_CODE_EEXIST);
	g_assert_cmpint(request(f, fd, RDMACM_MUX_OP_CODE_UNREG, "::ffff:10.0.1.1"), ==, 0);
	close(fd);
}

UNIT_TEST_MAIN()
