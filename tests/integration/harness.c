/* SPDX-License-Identifier: MIT */
/* Owns the integration-test plumbing described in harness.h. */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mux-send.h"

const char *harness_env_bin(const char *name)
{
	const char *v = g_getenv(name);

	if (!v)
		g_error("%s is not set; run the test through meson", name);
	return v;
}

void gid_parse(const char *text, uint8_t gid[IB_GID_LEN])
{
	if (inet_pton(AF_INET6, text, gid) != 1)
		g_error("bad GID %s", text);
}

void harness_run_sync(char **argv)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *out = NULL, *errout = NULL;
	int status;

	if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &errout, &status,
			  &err))
		g_error("cannot run %s: %s", argv[0], err->message);
	if (!g_spawn_check_wait_status(status, &err))
		g_error("%s %s failed: %s\n%s%s", argv[0], argv[1], err->message, out, errout);
}

Fabric *fabric_new_args(const char *const *args)
{
	Fabric *f = g_new0(Fabric, 1);
	g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);

	f->dir = g_dir_make_tmp("rdmacm-mux-it-XXXXXX", NULL);
	g_assert_nonnull(f->dir);
	g_ptr_array_add(argv, g_strdup(harness_env_bin("UMAD_SIM_CLI")));
	g_ptr_array_add(argv, g_strdup("create"));
	g_ptr_array_add(argv, g_build_filename(f->dir, "fabric", NULL));
	for (size_t i = 0; args[i]; i++)
		g_ptr_array_add(argv, g_strdup(args[i]));
	g_ptr_array_add(argv, NULL);
	harness_run_sync((char **)argv->pdata);
	return f;
}

Fabric *fabric_new(const char *preset)
{
	const char *const args[] = { "--preset", preset, NULL };

	return fabric_new_args(args);
}

void fabric_cli(Fabric *f, const char *verb, const char *const *args)
{
	g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);

	g_ptr_array_add(argv, g_strdup(harness_env_bin("UMAD_SIM_CLI")));
	g_ptr_array_add(argv, g_strdup(verb));
	g_ptr_array_add(argv, g_build_filename(f->dir, "fabric", NULL));
	for (size_t i = 0; args && args[i]; i++)
		g_ptr_array_add(argv, g_strdup(args[i]));
	g_ptr_array_add(argv, NULL);
	harness_run_sync((char **)argv->pdata);
}

void fabric_hold_unreachable(Fabric *f, bool hold)
{
	g_autofree char *path = g_build_filename(f->dir, "fabric", "hold-unreachable", NULL);

	if (hold)
		g_assert_true(g_file_set_contents(path, "", 0, NULL));
	else
		g_assert_cmpint(unlink(path), ==, 0);
}

void fabric_free(Fabric *f)
{
	if (!f)
		return;
	if (!g_getenv("KEEP_FABRIC")) {
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", f->dir);
		g_assert_cmpint(system(cmd), ==, 0);
	} else {
		g_printerr("# fabric kept in %s\n", f->dir);
	}
	g_free(f->dir);
	g_free(f);
}

bool harness_socket_serves(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* In the daemon's child, before exec: a test that fails (abort) leaves no
 * daemon behind, nor the daemon's senders. */
static void die_with_the_test(gpointer unused)
{
	(void)unused;
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* Start @d; unless @wait is false, wait until it serves (or is ready, under
 * a supervisor). */
static void daemon_spawn(Daemon *d, bool wait)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *fabric = g_build_filename(d->fabric->dir, "fabric", NULL);
	g_autofree char *sys = g_build_filename(fabric, "sys", NULL);
	g_auto(GStrv) envp = g_get_environ();
	const char *wrapper = g_getenv("RDMACM_MUX_WRAPPER");
	GPtrArray *argv;
	int fd;

	envp = g_environ_setenv(envp, "UMAD_SIM_FABRIC", fabric, TRUE);
	envp = g_environ_setenv(envp, "SYSFS_PATH", sys, TRUE);
	/* Preload the sim behind whatever is preloaded already (ASan). */
	{
		const char *pre = g_environ_getenv(envp, "LD_PRELOAD");
		g_autofree char *v = pre && *pre
					     ? g_strdup_printf("%s:%s", pre, harness_env_bin("UMAD_SIM_LIB"))
					     : g_strdup(harness_env_bin("UMAD_SIM_LIB"));
		envp = g_environ_setenv(envp, "LD_PRELOAD", v, TRUE);
	}
	fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	g_assert_cmpint(fd, >=, 0);
	if (d->sup) {
		unsigned ready = supervisor_ready_count(d->sup);
		g_autoptr(GPtrArray) av = g_ptr_array_new_with_free_func(g_free);
		g_auto(GStrv) words = NULL;
		int status;

		if (wrapper && *wrapper)
			g_assert_true(g_shell_parse_argv(wrapper, NULL, &words, NULL));
		for (char **w = words; w && *w; w++)
			g_ptr_array_add(av, g_strdup(*w));
		for (char **a = d->argv; *a; a++)
			g_ptr_array_add(av, g_strdup(*a));
		if (!g_path_is_absolute(av->pdata[0])) {
			char *abs = g_find_program_in_path(av->pdata[0]);

			g_assert_nonnull(abs);
			g_free(av->pdata[0]);
			av->pdata[0] = abs;
		}
		g_ptr_array_add(av, NULL);
		d->pid = supervisor_exec(d->sup, (char **)av->pdata, envp, fd);
		close(fd);
		if (!wait)
			return;
		if (!supervisor_wait_ready(d->sup, ready, wrapper && *wrapper ? 60000 : 5000)) {
			g_autofree char *out = daemon_output(d);

			if (waitpid(d->pid, &status, WNOHANG) == d->pid)
				g_error("rdmacm-mux exited at start (status %d):\n%s", status, out);
			g_error("rdmacm-mux sent no READY=1:\n%s", out);
		}
		return;
	}
	/* RDMACM_MUX_WRAPPER runs the daemon under e.g. valgrind. */
	if (wrapper && *wrapper) {
		g_auto(GStrv) words = NULL;
		g_assert_true(g_shell_parse_argv(wrapper, NULL, &words, NULL));
		argv = g_ptr_array_new();
		for (char **w = words; *w; w++)
			g_ptr_array_add(argv, *w);
		for (char **a = d->argv; *a; a++)
			g_ptr_array_add(argv, *a);
		g_ptr_array_add(argv, NULL);
		if (!g_spawn_async_with_fds(NULL, (char **)argv->pdata, envp,
					    G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH,
					    die_with_the_test, NULL, &d->pid, -1, fd, fd, &err))
			g_error("cannot start rdmacm-mux under %s: %s", wrapper, err->message);
		g_ptr_array_unref(argv);
	} else if (!g_spawn_async_with_fds(NULL, d->argv, envp, G_SPAWN_DO_NOT_REAP_CHILD,
					   die_with_the_test, NULL, &d->pid, -1, fd, fd, &err)) {
		g_error("cannot start rdmacm-mux: %s", err->message);
	}
	close(fd);
	if (!wait)
		return;

	/* Under a wrapper start-up is many times slower. */
	if (!daemon_wait_serving(d, wrapper && *wrapper ? 60000 : 5000)) {
		g_autofree char *out = daemon_output(d);

		if (!d->pid)
			g_error("rdmacm-mux exited at start:\n%s", out);
		g_error("rdmacm-mux did not start serving %s:\n%s", d->socket, out);
	}
}

/* Whether the control socket at @path answers: a whole answer to "help",
 * read to its end, so that the daemon has closed its side when this
 * returns (a connection it still held would take an fd that a test
 * counts on). */
static bool control_answers(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	gint64 end = g_get_monotonic_time() + (gint64)HARNESS_WAIT_MS * 1000;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = false;

	g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    send(fd, "help\n", 5, MSG_NOSIGNAL) == 5) {
		while (g_get_monotonic_time() < end) {
			struct pollfd pfd = { fd, POLLIN, 0 };
			char chunk[4096];
			ssize_t n;

			if (poll(&pfd, 1, 100) <= 0)
				continue;
			n = read(fd, chunk, sizeof(chunk));
			if (n <= 0) {
				ok = n == 0;
				break;
			}
		}
	}
	close(fd);
	return ok;
}

/*
 * The daemon binds its main socket, then its control socket: a test that
 * asked the control socket as soon as the main one served was refused on
 * a loaded machine. Serving means both (or the log saying that there is
 * no control socket). The main socket is probed once, after the control
 * socket answered, and the probe's client must be gone before the daemon
 * counts as started: each probe is a client with an id and an fd, and
 * tests count on both (the fd a new client gets, client 2's id).
 */
bool daemon_wait_serving(Daemon *d, int timeout_ms)
{
	g_autofree char *ctl = g_strdup_printf("%s.ctl", d->socket);
	gint64 end = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
	unsigned gone = 0;
	bool probed = false;

	while (g_get_monotonic_time() < end) {
		int status;

		if (d->pid && waitpid(d->pid, &status, WNOHANG) == d->pid) {
			d->pid = 0;
			return false;
		}
		if (probed) {
			if (daemon_output_count(d, ") gone: ") > gone)
				return true;
		} else if (control_answers(ctl) ||
			   daemon_output_count(d, "running without the control socket") > 0) {
			gone = daemon_output_count(d, ") gone: ");
			probed = harness_socket_serves(d->socket);
			continue;
		}
		g_usleep(probed ? 2000 : 10000);
	}
	return false;
}

static Daemon *daemon_start_under(Supervisor *sup, Fabric *f, const char *ca,
				  const char *const *extra, bool wait)
{
	Daemon *d = g_new0(Daemon, 1);
	g_autoptr(GPtrArray) argv = g_ptr_array_new();

	d->sup = sup;
	d->fabric = f;
	d->ca = g_strdup(ca);
	d->socket = g_strdup_printf("%s/mux-%s-1", f->dir, ca);
	d->log = g_strdup_printf("%s/daemon-%s.log", f->dir, ca);
	g_ptr_array_add(argv, g_strdup(harness_env_bin("RDMACM_MUX_BIN")));
	g_ptr_array_add(argv, g_strdup("-d"));
	g_ptr_array_add(argv, g_strdup(ca));
	g_ptr_array_add(argv, g_strdup("-s"));
	g_ptr_array_add(argv, g_strdup_printf("%s/mux", f->dir));
	g_ptr_array_add(argv, g_strdup("--trace"));
	for (size_t i = 0; extra && extra[i]; i++)
		g_ptr_array_add(argv, g_strdup(extra[i]));
	g_ptr_array_add(argv, NULL);
	d->argv = (char **)g_ptr_array_free(g_steal_pointer(&argv), FALSE);
	daemon_spawn(d, wait);
	return d;
}

Daemon *daemon_start(Fabric *f, const char *ca, const char *const *extra)
{
	return daemon_start_under(NULL, f, ca, extra, true);
}

Daemon *daemon_launch(Fabric *f, const char *ca, const char *const *extra)
{
	return daemon_start_under(NULL, f, ca, extra, false);
}

Daemon *daemon_start_supervised(Supervisor *s, Fabric *f, const char *ca,
				const char *const *extra)
{
	return daemon_start_under(s, f, ca, extra, true);
}

/* The exit status (or 128 + signal), or -ETIMEDOUT. */
static int wait_exit_for(Daemon *d, int timeout_ms)
{
	gint64 end = g_get_monotonic_time() + (gint64)timeout_ms * 1000;

	g_assert_cmpint(d->pid, !=, 0);
	for (;;) {
		int status;

		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			d->pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		if (g_get_monotonic_time() >= end)
			return -ETIMEDOUT;
		g_usleep(10000);
	}
}

static int wait_exit(Daemon *d)
{
	const char *wrapper = g_getenv("RDMACM_MUX_WRAPPER");
	int status = wait_exit_for(d, wrapper && *wrapper ? 60000 : 10000);

	if (status == -ETIMEDOUT)
		g_error("rdmacm-mux did not exit");
	return status;
}

int daemon_stop(Daemon *d)
{
	if (!d->pid)
		return -1;
	kill(d->pid, SIGTERM);
	return wait_exit(d);
}

void daemon_kill(Daemon *d)
{
	g_autoptr(GArray) senders = NULL;

	if (!d->pid)
		return;
	senders = daemon_children(d);
	kill(d->pid, SIGKILL);
	(void)wait_exit(d);
	/* Its sender processes end on their own when it dies, and hold its
	 * umad fd (its CM agent) until they have. systemd starts a killed
	 * service again only once its cgroup is empty: so does this, or a
	 * successor that registers finds the class still held (on a loaded
	 * machine, for a moment). A sender that never ends is the caller's
	 * to find (test-bounds checks they do). */
	for (guint i = 0; i < senders->len; i++)
		for (int k = 0;
		     k < HARNESS_WAIT_MS / 10 && pid_running(g_array_index(senders, int, i)); k++)
			g_usleep(10000);
}

void daemon_restart(Daemon *d)
{
	g_assert_cmpint(d->pid, ==, 0);
	daemon_spawn(d, true);
}

void daemon_restart_unwaited(Daemon *d)
{
	g_assert_cmpint(d->pid, ==, 0);
	daemon_spawn(d, false);
}

/* The process state letter of @pid ('R', 'S', 'Z', ...), and its parent. */
static bool proc_stat(int pid, char *state, int *ppid)
{
	g_autofree char *path = g_strdup_printf("/proc/%d/stat", pid);
	g_autofree char *stat = NULL;
	const char *close_paren;

	if (!g_file_get_contents(path, &stat, NULL, NULL))
		return false;
	/* "pid (comm) state ppid ...": comm may hold anything but the last ')'. */
	close_paren = strrchr(stat, ')');
	return close_paren && sscanf(close_paren + 1, " %c %d", state, ppid) == 2;
}

GArray *daemon_children(const Daemon *d)
{
	GArray *pids = g_array_new(FALSE, FALSE, sizeof(int));
	g_autoptr(GDir) dir = g_dir_open("/proc", 0, NULL);
	const char *name;

	g_assert_nonnull(dir);
	while ((name = g_dir_read_name(dir))) {
		int pid = atoi(name), ppid;
		char state;

		if (pid > 0 && proc_stat(pid, &state, &ppid) && ppid == d->pid)
			g_array_append_val(pids, pid);
	}
	return pids;
}

bool pid_running(int pid)
{
	int ppid;
	char state;

	return proc_stat(pid, &state, &ppid) && state != 'Z' && state != 'X';
}

int daemon_threads(const Daemon *d)
{
	g_autofree char *path = g_strdup_printf("/proc/%d/status", (int)d->pid);
	g_autofree char *status = NULL;
	const char *line;

	g_assert_true(g_file_get_contents(path, &status, NULL, NULL));
	line = strstr(status, "\nThreads:");
	g_assert_nonnull(line);
	return atoi(line + strlen("\nThreads:"));
}

unsigned daemon_open_fds(const Daemon *d)
{
	g_autofree char *path = g_strdup_printf("/proc/%d/fd", (int)d->pid);
	g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);
	unsigned n = 0;

	g_assert_nonnull(dir);
	while (g_dir_read_name(dir))
		n++;
	return n;
}

double daemon_cpu_seconds(const Daemon *d)
{
	g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)d->pid);
	g_autofree char *text = NULL;
	unsigned long utime = 0, stime = 0;
	const char *p;

	g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
	/* The fields after the command name, which may hold spaces. */
	p = strrchr(text, ')');
	g_assert_nonnull(p);
	g_assert_cmpint(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
			       &utime, &stime), ==, 2);
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

void hosts_start(Fabric *f, const char *const *opts_a, const char *const *opts_b, Daemon **da,
		 Daemon **db)
{
	*da = daemon_start(f, "simA", opts_a);
	*db = daemon_start(f, "simB", opts_b);
}

Fabric *hosts_open(const char *const *opts_a, const char *const *opts_b, Daemon **da,
		   Daemon **db)
{
	Fabric *f = fabric_new("two-hosts");

	hosts_start(f, opts_a, opts_b, da, db);
	return f;
}

void hosts_vms(Daemon *da, Daemon *db, const char *names, Vm **const *ret)
{
	g_auto(GStrv) each = g_strsplit(names, " ", -1);

	for (size_t i = 0; each[i]; i++) {
		const char *name = each[i];
		g_autofree char *gid = NULL;

		g_assert_true(name[0] == 'a' || name[0] == 'b');
		gid = g_strdup_printf("::ffff:10.0.%d.%s", name[0] == 'a' ? 1 : 2, name + 1);
		*ret[i] = vm_new(name[0] == 'a' ? da : db, gid, name);
	}
}

void hosts_free(Fabric *fabric, Daemon *da, Daemon *db, Vm *const *vms, size_t n)
{
	vms_free(vms, n);
	daemon_free(da);
	daemon_free(db);
	fabric_free(fabric);
}

void daemon_free(Daemon *d)
{
	if (!d)
		return;
	/* A clean stop first, so that leak checkers see the daemon exit. */
	if (d->pid) {
		kill(d->pid, SIGTERM);
		if (wait_exit_for(d, 10000) == -ETIMEDOUT)
			daemon_kill(d);
	}
	g_strfreev(d->argv);
	g_free(d->ca);
	g_free(d->socket);
	g_free(d->log);
	g_free(d);
}

char *daemon_output(const Daemon *d)
{
	char *text = NULL;

	if (!g_file_get_contents(d->log, &text, NULL, NULL))
		text = g_strdup("");
	return text;
}

int64_t daemon_output_counter(const char *output, const char *label)
{
	const char *p = output, *hit = NULL;

	/* The last dump wins (a restarted daemon prints again). */
	while ((p = strstr(p, label))) {
		hit = p;
		p += strlen(label);
	}
	if (!hit)
		return -1;
	return g_ascii_strtoll(hit + strlen(label), NULL, 10);
}

int64_t daemon_output_attr(const char *output, const char *attr, bool rx)
{
	g_auto(GStrv) lines = g_strsplit(output, "\n", -1);
	int64_t found = -1;

	for (char **l = lines; *l; l++) {
		char name[32];
		long long tx_n, rx_n;

		if (sscanf(*l, " %31s %lld %lld", name, &tx_n, &rx_n) == 3 && strcmp(name, attr) == 0)
			found = rx ? rx_n : tx_n;
	}
	return found;
}

/* ---- VMs ---- */

Vm *vm_new(Daemon *d, const char *gid, const char *name)
{
	return vm_new_flags(d, gid, name, 0);
}

void hosts_vm_pairs(Daemon *da, Daemon *db, unsigned n, unsigned flags, Vm **a, Vm **b)
{
	for (unsigned i = 0; i < n; i++) {
		g_autofree char *ga = g_strdup_printf("::ffff:10.0.1.%u", i + 1);
		g_autofree char *gb = g_strdup_printf("::ffff:10.0.2.%u", i + 1);
		g_autofree char *na = g_strdup_printf("a%u", i + 1);
		g_autofree char *nb = g_strdup_printf("b%u", i + 1);

		a[i] = vm_new_flags(da, ga, na, flags);
		b[i] = vm_new_flags(db, gb, nb, flags);
	}
}

void vms_free(Vm *const *vms, size_t n)
{
	for (size_t i = 0; i < n; i++)
		vm_free(vms[i]);
}

Vm *vm_new_flags(Daemon *d, const char *gid, const char *name, unsigned flags)
{
	Vm *vm = g_new0(Vm, 1);
	struct rdmacm_mux_response resp;
	uint32_t ticket;

	vm->name = g_strdup(name);
	gid_parse(gid, vm->gid);
	g_assert_cmpint(rdmacm_mux_open(d->socket, flags, 5000, &vm->mux), ==, 0);
	g_assert_cmpint(rdmacm_mux_register_gid(vm->mux, vm->gid, &ticket), ==, 0);
	g_assert_cmpint(rdmacm_mux_wait(vm->mux, ticket, 5000, &resp), ==, 0);
	g_assert_cmpint(resp.error, ==, 0);
	return vm;
}

void vm_free(Vm *vm)
{
	if (!vm)
		return;
	rdmacm_mux_close(vm->mux);
	g_free(vm->name);
	g_free(vm);
}

int vm_send(Vm *vm, const uint8_t dest[IB_GID_LEN], const uint8_t mad[256])
{
	int verdict = 0;
	int r = mux_send_mad_wait(vm->mux, vm->gid, dest, mad, 256, 5000, &verdict);

	/* Both the send and the wait for its answer must succeed. */
	g_assert_cmpint(r, ==, 0);
	return verdict;
}

int vm_recv(Vm *vm, struct rdmacm_mux_inbound *in, int timeout_ms)
{
	gint64 end = g_get_monotonic_time() + (gint64)timeout_ms * 1000;

	for (;;) {
		struct pollfd pfd = { rdmacm_mux_get_fd(vm->mux), rdmacm_mux_get_events(vm->mux), 0 };
		int r = rdmacm_mux_recv_mad(vm->mux, in);
		gint64 left;

		if (r != -EAGAIN)
			return r;
		/* Past the deadline, what the socket holds still counts: a
		 * timeout of 0 reads it without waiting. */
		left = end - g_get_monotonic_time();
		if (poll(&pfd, 1, left > 0 ? (int)((left + 999) / 1000) : 0) == 0 && left <= 0)
			return -ETIMEDOUT;
		r = rdmacm_mux_process(vm->mux);
		g_assert_true(r >= 0 || r == -ENOBUFS);
	}
}

void vm_expect(Vm *vm, uint16_t attr, struct rdmacm_mux_inbound *in)
{
	int r = vm_recv(vm, in, 5000);

	if (r < 0)
		g_error("%s: expected attr 0x%x, got %s", vm->name, attr, g_strerror(-r));
	if (mad_attr(in->mad) != attr)
		g_error("%s: expected attr 0x%x, got 0x%x", vm->name, attr, mad_attr(in->mad));
	/* Every inbound MAD is addressed to this VM's own GID. */
	g_assert_cmpmem(in->local_gid, IB_GID_LEN, vm->gid, IB_GID_LEN);
}

void vm_send_expect(Vm *from, Vm *to, const uint8_t mad[256], struct rdmacm_mux_inbound *in)
{
	g_assert_cmpint(vm_send(from, to->gid, mad), ==, 0);
	vm_expect(to, mad_attr(mad), in);
}

uint32_t vm_req_rejected(Vm *from, Vm *to, uint32_t comm, uint64_t tid)
{
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];
	uint32_t wire;

	mad_build_req(mad, comm, from->gid, to->gid, tid);
	vm_send_expect(from, to, mad, &in);
	wire = mad_local(in.mad);
	mad_build(mad, CM_REJ, 0, wire, tid + 1);
	mad_set_rej(mad, 0, 28);
	vm_send_expect(to, from, mad, &in);
	return wire;
}

void vm_expect_empty(Vm *vm)
{
	struct rdmacm_mux_inbound in;
	int r = vm_recv(vm, &in, 0);

	if (r == 0)
		g_error("%s: expected nothing, got attr 0x%x", vm->name, mad_attr(in.mad));
	g_assert_cmpint(r, ==, -ETIMEDOUT);
}

struct rdmacm_mux_client_stats vm_stats(Vm *vm)
{
	struct rdmacm_mux_response resp;
	uint32_t ticket;

	g_assert_cmpint(rdmacm_mux_query_stats(vm->mux, &ticket), ==, 0);
	g_assert_cmpint(rdmacm_mux_wait(vm->mux, ticket, 5000, &resp), ==, 0);
	g_assert_cmpint(resp.error, ==, 0);
	return resp.stats;
}

int raw_connect(const Daemon *d)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	g_assert_cmpint(fd, >=, 0);
	g_strlcpy(sa.sun_path, d->socket, sizeof(sa.sun_path));
	g_assert_cmpint(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
	return fd;
}

/* ---- raw frames ---- */

void raw_frame(struct rdmacm_mux_msg *m, uint32_t op, const uint8_t sgid[IB_GID_LEN])
{
	memset(m, 0, sizeof(*m));
	m->hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
	m->hdr.op_code = op;
	if (sgid)
		memcpy(m->hdr.sgid.raw, sgid, IB_GID_LEN);
}

void raw_send(int fd, const struct rdmacm_mux_msg *m)
{
	const uint8_t *p = (const uint8_t *)m;
	size_t done = 0;

	while (done < sizeof(*m)) {
		ssize_t n = send(fd, p + done, sizeof(*m) - done, MSG_NOSIGNAL);
		g_assert_cmpint(n, >, 0);
		done += (size_t)n;
	}
}

int raw_recv(int fd, struct rdmacm_mux_msg *m, int timeout_ms)
{
	uint8_t *p = (uint8_t *)m;
	size_t done = 0;

	while (done < sizeof(*m)) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		ssize_t n;

		if (poll(&pfd, 1, timeout_ms) == 0)
			return -ETIMEDOUT;
		n = recv(fd, p + done, sizeof(*m) - done, 0);
		if (n == 0)
			return -EPIPE;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}

int32_t raw_request(int fd, struct rdmacm_mux_msg *m)
{
	struct rdmacm_mux_msg resp;
	uint32_t op = m->hdr.op_code;

	raw_send(fd, m);
	/* QEMU: one blocking read right after the request, which must be
	 * the response. */
	g_assert_cmpint(raw_recv(fd, &resp, 5000), ==, 0);
	g_assert_cmpuint(resp.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
	g_assert_cmpuint(resp.hdr.op_code, ==, op);
	return resp.hdr.err_code;
}

/* ---- raw clients that act as QEMU does ---- */

void qemu_frame(struct rdmacm_mux_msg *m, const uint8_t own[IB_GID_LEN], const uint8_t mad[256])
{
	raw_frame(m, RDMACM_MUX_OP_CODE_MAD, own);
	m->umad_len = 256;
	m->umad.hdr.addr.qpn = htonl(1);
	m->umad.hdr.addr.grh_present = 1;
	m->umad.hdr.addr.hop_limit = 0xff;
	memcpy(m->umad.hdr.addr.gid, own, IB_GID_LEN);
	memcpy(m->umad.mad, mad, 256);
}

void qemu_send(int fd, const uint8_t own[IB_GID_LEN], const uint8_t mad[256])
{
	struct rdmacm_mux_msg m;

	qemu_frame(&m, own, mad);
	g_assert_cmpint(raw_request(fd, &m), ==, 0);
}

void qemu_expect(int fd, const uint8_t own[IB_GID_LEN], uint16_t attr, struct rdmacm_mux_msg *m)
{
	g_assert_cmpint(raw_recv(fd, m, 5000), ==, 0);
	g_assert_cmpuint(m->hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_REQ);
	g_assert_cmpuint(m->hdr.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
	g_assert_cmpmem(m->hdr.sgid.raw, IB_GID_LEN, own, IB_GID_LEN);
	g_assert_cmpuint(mad_attr(m->umad.mad), ==, attr);
}

void qemu_pairs_open(QemuPairs *p, unsigned n)
{
	g_assert_cmpuint(n, <=, QEMU_PAIRS_MAX);
	p->db = daemon_start(p->fabric, "simB", NULL);
	for (p->n = 0; p->n < n; p->n++) {
		g_autofree char *qg = g_strdup_printf("::ffff:10.0.1.%u", p->n + 1);
		g_autofree char *bg = g_strdup_printf("::ffff:10.0.2.%u", p->n + 1);
		g_autofree char *name = g_strdup_printf("b%u", p->n);
		struct rdmacm_mux_msg m;

		gid_parse(qg, p->qgid[p->n]);
		p->q[p->n] = raw_connect(p->da);
		raw_frame(&m, RDMACM_MUX_OP_CODE_REG, p->qgid[p->n]);
		g_assert_cmpint(raw_request(p->q[p->n], &m), ==, 0);
		p->b[p->n] = vm_new(p->db, bg, name);
	}
}

void qemu_pairs_to_peer(const QemuPairs *p, unsigned i, const uint8_t mad[256],
			struct rdmacm_mux_inbound *in)
{
	qemu_send(p->q[i], p->qgid[i], mad);
	vm_expect(p->b[i], mad_attr(mad), in);
}

void qemu_pairs_to_client(const QemuPairs *p, unsigned i, const uint8_t mad[256],
			  struct rdmacm_mux_msg *m)
{
	g_assert_cmpint(vm_send(p->b[i], p->qgid[i], mad), ==, 0);
	qemu_expect(p->q[i], p->qgid[i], mad_attr(mad), m);
}

void qemu_pairs_expect_quiet(const QemuPairs *p)
{
	daemon_wait_metric(p->da, "rdmacm_mux_client_queued_frames", NULL, 0);
	daemon_wait_metric(p->db, "rdmacm_mux_client_queued_frames", NULL, 0);
	for (unsigned i = 0; i < p->n; i++) {
		struct rdmacm_mux_msg m;

		g_assert_cmpint(raw_recv(p->q[i], &m, 0), ==, -ETIMEDOUT);
		vm_expect_empty(p->b[i]);
	}
}

void qemu_pairs_write_to_nowhere(const QemuPairs *p, unsigned i, unsigned n, uint32_t comm,
				 uint64_t tid)
{
	g_autofree struct rdmacm_mux_msg *frames = g_new0(struct rdmacm_mux_msg, n);
	ssize_t len = (ssize_t)(n * sizeof(*frames));

	for (unsigned k = 0; k < n; k++) {
		g_autofree char *text = g_strdup_printf("::ffff:10.0.5.%u", k + 1);
		uint8_t nowhere[IB_GID_LEN], mad[256];

		gid_parse(text, nowhere);
		mad_build_req(mad, comm + k, p->qgid[i], nowhere, tid + k);
		qemu_frame(&frames[k], p->qgid[i], mad);
	}
	g_assert_cmpint(write(p->q[i], frames, (size_t)len), ==, len);
}

void qemu_pairs_free(QemuPairs *p)
{
	for (unsigned i = 0; i < p->n; i++) {
		if (p->q[i] >= 0)
			close(p->q[i]);
		vm_free(p->b[i]);
	}
	daemon_free(p->da);
	if (p->sup)
		supervisor_free(p->sup);
	hosts_free(p->fabric, NULL, p->db, NULL, 0);
}

int harness_as_nobody(int (*fn)(const Daemon *d, const void *arg), const Daemon *d,
		      const void *arg)
{
	pid_t pid = fork();
	int status;

	g_assert_cmpint(pid, >=, 0);
	if (pid == 0) {
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(3);
		_exit(fn(d, arg));
	}
	g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
	g_assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

int daemon_client_fd(const Daemon *d, unsigned client_id)
{
	g_autofree char *out = daemon_output(d);
	g_autofree char *needle = g_strdup_printf("client %u connected on fd ", client_id);
	const char *p = strstr(out, needle);

	return p ? atoi(p + strlen(needle)) : -1;
}

int daemon_wait_exit(Daemon *d, int timeout_ms)
{
	return wait_exit_for(d, timeout_ms);
}

/* ---- a hostile host ---- */

/* The environment of a program that runs on the simulated fabric. */
static GStrv harness_fabric_environ(const Fabric *f)
{
	g_autofree char *fabric = g_build_filename(f->dir, "fabric", NULL);
	g_autofree char *sys = g_build_filename(fabric, "sys", NULL);
	GStrv envp = g_get_environ();
	const char *pre = g_environ_getenv(envp, "LD_PRELOAD");
	g_autofree char *preload = pre && *pre
					   ? g_strdup_printf("%s:%s", pre, harness_env_bin("UMAD_SIM_LIB"))
					   : g_strdup(harness_env_bin("UMAD_SIM_LIB"));

	envp = g_environ_setenv(envp, "UMAD_SIM_FABRIC", fabric, TRUE);
	envp = g_environ_setenv(envp, "UMAD_PROBE_SYSFS", sys, TRUE);
	envp = g_environ_setenv(envp, "LD_PRELOAD", preload, TRUE);
	return envp;
}

Forger *forger_start(Fabric *f, const char *ca)
{
	g_autoptr(GError) err = NULL;
	g_auto(GStrv) envp = harness_fabric_environ(f);
	/* It ends 300 ms after its input, once nothing more comes. */
	char *argv[] = { (char *)harness_env_bin("UMAD_PROBE_BIN"), (char *)"forge", (char *)ca,
			 (char *)"300", NULL };
	Forger *g = g_new0(Forger, 1);
	gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
	int out;

	/* Its output goes to a file, so that a forger that receives a lot
	 * never waits for the test to read. */
	g->out_path = g_strdup_printf("%s/forger-%d.out", f->dir, g_random_int_range(0, 1 << 30));
	out = open(g->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	g_assert_cmpint(out, >=, 0);
	if (!g_spawn_async_with_pipes_and_fds(NULL, (const char *const *)argv,
					      (const char *const *)envp, G_SPAWN_DO_NOT_REAP_CHILD,
					      NULL, NULL, -1, out, -1, NULL, NULL, 0, &g->pid,
					      &g->in, NULL, NULL, &err))
		g_error("cannot start umad-probe forge: %s", err->message);
	close(out);
	for (;;) {
		g_autofree char *text = NULL;

		if (g_file_get_contents(g->out_path, &text, NULL, NULL) &&
		    g_str_has_prefix(text, "listening"))
			return g;
		if (g_get_monotonic_time() > end)
			g_error("umad-probe forge on %s did not start", ca);
		g_usleep(5000);
	}
}

void forger_send(Forger *g, const uint8_t sgid[16], const uint8_t dgid[16], unsigned count,
		 unsigned step_offset, const uint8_t mad[256])
{
	char s[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN];
	GString *line = g_string_new(NULL);

	inet_ntop(AF_INET6, sgid, s, sizeof(s));
	inet_ntop(AF_INET6, dgid, d, sizeof(d));
	g_string_append_printf(line, "%s %s %u %u ", s, d, count, step_offset);
	for (int i = 0; i < 256; i++)
		g_string_append_printf(line, "%02x", mad[i]);
	g_string_append_c(line, '\n');
	for (size_t off = 0; off < line->len;) {
		ssize_t n = write(g->in, line->str + off, line->len - off);

		g_assert_cmpint(n, >, 0);
		off += (size_t)n;
	}
	g_string_free(line, TRUE);
}

GArray *forger_finish(Forger *g, unsigned *sent)
{
	GArray *rx = g_array_new(FALSE, TRUE, sizeof(ForgedRx));
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;
	unsigned long ok = 0, failed = 0, received = 0;
	bool done = false;
	int status;

	close(g->in);
	g_assert_cmpint(waitpid(g->pid, &status, 0), ==, g->pid);
	g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	g_spawn_close_pid(g->pid);
	g_assert_true(g_file_get_contents(g->out_path, &text, NULL, NULL));
	lines = g_strsplit(text, "\n", -1);
	for (char **l = lines; *l; l++) {
		char gid[64], hex[600];
		unsigned index;
		ForgedRx r;

		if (!**l || g_str_has_prefix(*l, "listening"))
			continue;
		if (sscanf(*l, "forged %lu %lu %lu", &ok, &failed, &received) == 3) {
			done = true;
			continue;
		}
		if (sscanf(*l, "mad %63s %u %599s", gid, &index, hex) != 3)
			g_error("umad-probe forge printed: %s", *l);
		memset(&r, 0, sizeof(r));
		gid_parse(gid, r.sender);
		r.gid_index = index;
		for (int i = 0; i < 256; i++) {
			unsigned v;

			g_assert_cmpint(sscanf(hex + 2 * i, "%2x", &v), ==, 1);
			r.mad[i] = (uint8_t)v;
		}
		g_array_append_val(rx, r);
	}
	g_assert_true(done);
	g_assert_cmpuint(received, ==, rx->len);
	if (sent)
		*sent = (unsigned)ok;
	unlink(g->out_path);
	g_free(g->out_path);
	g_free(g);
	return rx;
}

/* ---- what a running daemon shows ---- */

PromPage *daemon_metrics(const Daemon *d)
{
	g_autofree char *path = g_strdup_printf("%s.ctl", d->socket);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	g_autoptr(GString) text = g_string_new(NULL);
	gint64 end = g_get_monotonic_time() + (gint64)HARNESS_WAIT_MS * 1000;
	g_autofree char *error = NULL;
	PromPage *page;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	g_assert_cmpint(fd, >=, 0);
	g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		g_error("cannot reach %s: %s", path, g_strerror(errno));
	g_assert_cmpint(send(fd, "metrics\n", 8, MSG_NOSIGNAL), ==, 8);
	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		char chunk[16384];
		ssize_t n;
		gint64 left = end - g_get_monotonic_time();

		if (left <= 0)
			g_error("%s: no whole metrics answer (have %zu bytes)", path, text->len);
		if (poll(&pfd, 1, (int)((left + 999) / 1000)) <= 0)
			continue;
		n = read(fd, chunk, sizeof(chunk));
		g_assert_cmpint(n, >=, 0);
		if (n == 0)
			break;
		g_string_append_len(text, chunk, n);
	}
	close(fd);
	page = prom_page_parse(text->str, &error);
	if (!page)
		g_error("%s: the metrics page does not parse: %s\n%s", path, error, text->str);
	return page;
}

double daemon_metric(const Daemon *d, const char *name, const char *const *labels)
{
	g_autoptr(PromPage) page = daemon_metrics(d);

	return prom_page_value(page, name, labels);
}

/* The sum of the samples of @name with @labels on @page. */
static double page_sum(const PromPage *page, const char *name, const char *const *labels)
{
	double sum = 0;

	for (guint i = 0; i < page->samples->len; i++) {
		const PromSample *s = page->samples->pdata[i];
		bool all = true;

		if (strcmp(s->name, name) != 0)
			continue;
		for (size_t k = 0; labels && labels[k]; k += 2) {
			bool has = false;

			for (guint j = 0; j < s->labels->len; j++) {
				const PromLabel *l = &g_array_index(s->labels, PromLabel, j);

				has |= strcmp(l->name, labels[k]) == 0 &&
				       strcmp(l->value, labels[k + 1]) == 0;
			}
			all &= has;
		}
		if (all)
			sum += s->value;
	}
	return sum;
}

double daemon_metric_sum(const Daemon *d, const char *name, const char *const *labels)
{
	g_autoptr(PromPage) page = daemon_metrics(d);

	return page_sum(page, name, labels);
}

void daemon_wait_metric(const Daemon *d, const char *name, const char *const *labels,
			double want)
{
	gint64 end = g_get_monotonic_time() + (gint64)HARNESS_WAIT_MS * 1000;
	double have;

	while ((have = daemon_metric(d, name, labels)) != want) {
		if (g_get_monotonic_time() > end) {
			g_autoptr(GString) what = g_string_new(name);

			for (size_t k = 0; labels && labels[k]; k += 2)
				g_string_append_printf(what, " %s=%s", labels[k], labels[k + 1]);
			g_error("%s: %s is %g, not %g after %d ms", d->ca, what->str, have, want,
				HARNESS_WAIT_MS);
		}
		g_usleep(2000);
	}
}

void daemons_wait_quiet(Daemon *const *d, size_t n)
{
	daemons_wait_quiet_plus(d, n, 0);
}

void daemons_wait_quiet_plus(Daemon *const *d, size_t n, double foreign)
{
	gint64 end = g_get_monotonic_time() + (gint64)HARNESS_WAIT_MS * 1000;

	for (;;) {
		double tx = 0, rx = 0, dropped = 0, queued = 0;

		for (size_t i = 0; i < n; i++) {
			g_autoptr(PromPage) page = daemon_metrics(d[i]);

			tx += page_sum(page, "rdmacm_mux_mads_total", LABELS("direction", "tx"));
			rx += page_sum(page, "rdmacm_mux_mads_total", LABELS("direction", "rx"));
			dropped += page_sum(page, "rdmacm_mux_rx_dropped_total", NULL);
			queued += prom_page_value(page, "rdmacm_mux_client_queued_frames", NULL);
		}
		if (tx + foreign == rx + dropped && queued == 0)
			return;
		if (g_get_monotonic_time() > end)
			g_error("the daemons wrote %g MADs to the wire (and others %g) and read %g (%g "
				"relayed, %g dropped), %g frames queued for clients, after %d ms",
				tx, foreign, rx + dropped, rx, dropped, queued, HARNESS_WAIT_MS);
		g_usleep(2000);
	}
}

unsigned daemon_output_count(const Daemon *d, const char *needle)
{
	g_autofree char *out = daemon_output(d);
	unsigned n = 0;

	for (const char *p = out; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

void daemon_wait_output(const Daemon *d, const char *needle, unsigned count)
{
	gint64 end = g_get_monotonic_time() + (gint64)HARNESS_WAIT_MS * 1000;

	while (daemon_output_count(d, needle) < count) {
		if (g_get_monotonic_time() > end) {
			g_autofree char *out = daemon_output(d);

			g_error("%s: \"%s\" not %u times in the output after %d ms:\n%s", d->ca,
				needle, count, HARNESS_WAIT_MS, out);
		}
		g_usleep(5000);
	}
}

Child *child_spawn(const char *name, const char *const *argv, char **envp)
{
	g_autoptr(GError) err = NULL;
	Child *c = g_new0(Child, 1);

	c->name = g_strdup(name);
	c->buf = g_string_new(NULL);
	if (!g_spawn_async_with_pipes(NULL, (char **)argv, envp, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
				      NULL, &c->pid, NULL, &c->out, NULL, &err))
		g_error("spawning %s: %s", argv[0], err->message);
	return c;
}

char *child_line(Child *c)
{
	gint64 end = g_get_monotonic_time() + HARNESS_CHILD_LINE_MS * 1000;

	for (;;) {
		char *nl = strchr(c->buf->str, '\n');
		struct pollfd pfd = { .fd = c->out, .events = POLLIN };
		char chunk[512];
		ssize_t n;

		if (nl) {
			char *line = g_strndup(c->buf->str, (gsize)(nl - c->buf->str));

			g_string_erase(c->buf, 0, nl - c->buf->str + 1);
			g_test_message("%s: %s", c->name, line);
			return line;
		}
		if (g_get_monotonic_time() >= end)
			g_error("%s said nothing for %d ms (so far: \"%s\")", c->name,
				HARNESS_CHILD_LINE_MS, c->buf->str);
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		n = read(c->out, chunk, sizeof(chunk));
		if (n <= 0)
			g_error("%s ended its output before a whole line (\"%s\")", c->name,
				c->buf->str);
		g_string_append_len(c->buf, chunk, n);
	}
}

char *child_expect(Child *c, const char *prefix)
{
	for (;;) {
		char *line = child_line(c);

		if (g_str_has_prefix(line, prefix))
			return line;
		g_free(line);
	}
}

int child_wait(Child *c)
{
	int status;

	g_assert_cmpint(waitpid(c->pid, &status, 0), ==, c->pid);
	g_spawn_close_pid(c->pid);
	close(c->out);
	g_string_free(c->buf, TRUE);
	g_free(c->name);
	g_free(c);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
