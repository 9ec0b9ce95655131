/* SPDX-License-Identifier: MIT */
/*
 * Soak helpers on the orchestrator's side: spawning rdmacm-mux on the
 * simulated fabric without --trace (a long soak would write gigabytes),
 * reading its counter dumps (SIGUSR1 while it runs, SIGTERM at the end),
 * sampling /proc for RSS and open fds, and replaying the fabric's seeded
 * fault generator to count what it injected.
 */
#include "soak.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faults.h"
#include "harness.h"

SoakDaemon *soak_daemon_start(const char *dir, const char *fabric_dir, const char *ca,
			      const char *const *extra)
{
	SoakDaemon *d = g_new0(SoakDaemon, 1);
	g_autoptr(GPtrArray) argv = g_ptr_array_new();
	g_autofree char *sys = g_build_filename(fabric_dir, "sys", NULL);
	g_autoptr(GError) err = NULL;
	const char *pre;
	int fd;

	d->ca = g_strdup(ca);
	d->socket = g_strdup_printf("%s/mux-%s-1", dir, ca);
	d->log = g_strdup_printf("%s/daemon-%s.log", dir, ca);
	g_ptr_array_add(argv, g_strdup(harness_env_bin("RDMACM_MUX_BIN")));
	g_ptr_array_add(argv, g_strdup("-d"));
	g_ptr_array_add(argv, g_strdup(ca));
	g_ptr_array_add(argv, g_strdup("-s"));
	g_ptr_array_add(argv, g_strdup_printf("%s/mux", dir));
	for (size_t i = 0; extra && extra[i]; i++)
		g_ptr_array_add(argv, g_strdup(extra[i]));
	g_ptr_array_add(argv, NULL);
	d->argv = (char **)g_ptr_array_free(g_steal_pointer(&argv), FALSE);

	d->envp = g_get_environ();
	d->envp = g_environ_setenv(d->envp, "UMAD_SIM_FABRIC", fabric_dir, TRUE);
	d->envp = g_environ_setenv(d->envp, "SYSFS_PATH", sys, TRUE);
	pre = g_environ_getenv(d->envp, "LD_PRELOAD");
	{
		/* Behind whatever is preloaded already (gcc's ASan runtime). */
		g_autofree char *v = pre && *pre
					     ? g_strdup_printf("%s:%s", pre, harness_env_bin("UMAD_SIM_LIB"))
					     : g_strdup(harness_env_bin("UMAD_SIM_LIB"));
		d->envp = g_environ_setenv(d->envp, "LD_PRELOAD", v, TRUE);
	}

	fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	g_assert_cmpint(fd, >=, 0);
	if (!g_spawn_async_with_fds(NULL, d->argv, d->envp, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL,
				    &d->pid, -1, fd, fd, &err))
		g_error("cannot start rdmacm-mux: %s", err->message);
	close(fd);
	for (int i = 0; i < 1000; i++) {
		if (harness_socket_serves(d->socket))
			return d;
		if (!soak_daemon_alive(d)) {
			g_autofree char *out = soak_daemon_output(d);
			g_error("rdmacm-mux %s exited at start (status %d):\n%s", ca,
				d->exit_status, out);
		}
		g_usleep(10000);
	}
	g_error("rdmacm-mux %s did not start serving %s", ca, d->socket);
}

bool soak_daemon_alive(SoakDaemon *d)
{
	int status;

	if (!d->pid)
		return false;
	if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
		d->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		d->pid = 0;
		return false;
	}
	return true;
}

char *soak_daemon_output(const SoakDaemon *d)
{
	char *text = NULL;

	if (!g_file_get_contents(d->log, &text, NULL, NULL))
		text = g_strdup("");
	return text;
}

static unsigned count_dumps(const char *out)
{
	unsigned n = 0;

	for (const char *p = out; (p = strstr(p, "counters for ")); p++)
		n++;
	return n;
}

const char *soak_last_dump(const char *output)
{
	const char *p = output, *hit = NULL;

	while ((p = strstr(p, "counters for "))) {
		hit = p;
		p++;
	}
	/* Complete only once its last line ("... live N\n") is there. */
	if (!hit || !strstr(hit, " live ") || !strchr(strstr(hit, " live "), '\n'))
		return NULL;
	return hit;
}

int64_t soak_dump_value(const char *dump, const char *label)
{
	const char *p = strstr(dump, label);

	if (!p)
		return -1;
	p += strlen(label);
	while (*p == ' ')
		p++;
	return g_ascii_strtoll(p, NULL, 10);
}

char *soak_daemon_dump(SoakDaemon *d, int timeout_ms)
{
	g_autofree char *before = soak_daemon_output(d);
	unsigned n = count_dumps(before);

	if (!soak_daemon_alive(d))
		return NULL;
	kill(d->pid, SIGUSR1);
	for (int waited = 0; waited <= timeout_ms; waited += 5) {
		g_autofree char *out = soak_daemon_output(d);
		const char *last = soak_last_dump(out);

		if (count_dumps(out) > n && last)
			return g_strdup(last);
		g_usleep(5000);
	}
	return NULL;
}

int soak_daemon_stop(SoakDaemon *d)
{
	if (!d->pid)
		return d->exit_status;
	kill(d->pid, SIGTERM);
	for (int i = 0; i < 1000; i++) {
		if (!soak_daemon_alive(d))
			return d->exit_status;
		g_usleep(10000);
	}
	kill(d->pid, SIGKILL);
	(void)waitpid(d->pid, NULL, 0);
	d->pid = 0;
	d->exit_status = 128 + SIGKILL;
	return d->exit_status;
}

void soak_daemon_free(SoakDaemon *d)
{
	if (!d)
		return;
	if (d->pid) {
		kill(d->pid, SIGKILL);
		(void)waitpid(d->pid, NULL, 0);
	}
	g_strfreev(d->argv);
	g_strfreev(d->envp);
	g_free(d->ca);
	g_free(d->socket);
	g_free(d->log);
	g_free(d);
}

long soak_proc_rss_kb(pid_t pid)
{
	g_autofree char *path = g_strdup_printf("/proc/%d/status", (int)pid);
	g_autofree char *text = NULL;
	const char *p;

	if (!g_file_get_contents(path, &text, NULL, NULL))
		return -1;
	p = strstr(text, "\nVmRSS:");
	return p ? strtol(p + 7, NULL, 10) : -1;
}

int soak_proc_fds(pid_t pid, const char *fabric_dir, SoakFds *out)
{
	g_autofree char *path = g_strdup_printf("/proc/%d/fd", (int)pid);
	DIR *dir = opendir(path);
	struct dirent *e;

	memset(out, 0, sizeof(*out));
	if (!dir)
		return -1;
	while ((e = readdir(dir))) {
		g_autofree char *link = NULL, *target = NULL;

		if (e->d_name[0] == '.')
			continue;
		link = g_build_filename(path, e->d_name, NULL);
		target = g_file_read_link(link, NULL);
		/* Closed between readdir() and here: not open. Counting it as
		 * "other" once made a daemon busy closing its clients' sockets
		 * look as if it had closed them all and leaked as many fds. */
		if (!target)
			continue;
		out->total++;
		if (g_str_has_prefix(target, "socket:"))
			out->sockets++;
		else if (g_str_has_prefix(target, fabric_dir))
			out->fabric++;
		else
			out->other++;
	}
	closedir(dir);
	return 0;
}

int soak_fault_replay(const char *spec, const char *port_salt, uint64_t sends,
		      SoakFaultTally *out)
{
	struct sim_faults f;
	struct sim_rng rng;
	g_autoptr(GError) err = NULL;

	memset(out, 0, sizeof(*out));
	if (sim_faults_parse(spec, &f, &err) < 0)
		return -EINVAL;
	sim_rng_seed(&rng, f.seed, port_salt);
	out->sends = sends;
	if (!f.any) {
		/* The fabric draws nothing then. */
		out->arrivals = sends;
		return 0;
	}
	for (uint64_t i = 0; i < sends; i++) {
		struct sim_fault_decision dec;

		sim_faults_decide(&f, &rng, &dec);
		if (dec.fail_errno) {
			out->failed++;
			continue;
		}
		if (dec.drop) {
			out->dropped++;
			continue;
		}
		out->duplicated += dec.dup;
		out->reordered += dec.reorder;
		out->delayed += dec.delay_ms != 0;
		out->arrivals += dec.dup ? 2 : 1;
	}
	return 0;
}
