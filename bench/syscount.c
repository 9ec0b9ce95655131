/* SPDX-License-Identifier: MIT */
/*
 * Owns rdmacm-mux-bench's --syscalls counting: finding a relay's threads
 * (and its child processes'), reading their voluntary context switches,
 * and running and reading one `strace -c` per thread. See syscount.h.
 */
#include "syscount.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>

/* A field of /proc/PID/task/TID/status ("voluntary_ctxt_switches:"); 0 if gone. */
static uint64_t status_field(pid_t tid, const char *key)
{
	g_autofree char *path = g_strdup_printf("/proc/%d/task/%d/status", (int)tid, (int)tid);
	g_autofree char *text = NULL;
	const char *p;

	if (!g_file_get_contents(path, &text, NULL, NULL) || !(p = strstr(text, key)))
		return 0;
	return g_ascii_strtoull(p + strlen(key), NULL, 10);
}

void syscount_sched_times(pid_t tid, uint64_t *run, uint64_t *wait)
{
	g_autofree char *path = g_strdup_printf("/proc/%d/task/%d/schedstat", (int)tid, (int)tid);
	g_autofree char *text = NULL;
	char *end;

	*run = *wait = 0;
	if (!g_file_get_contents(path, &text, NULL, NULL))
		return;
	*run = g_ascii_strtoull(text, &end, 10);
	*wait = g_ascii_strtoull(end, NULL, 10);
}

static SysGroup thread_group(pid_t tid, bool main)
{
	g_autofree char *path = g_strdup_printf("/proc/%d/task/%d/comm", (int)tid, (int)tid);
	g_autofree char *comm = NULL;

	if (g_file_get_contents(path, &comm, NULL, NULL) && g_str_has_prefix(comm, "umad-sim"))
		return SYS_FABRIC;
	return main ? SYS_MAIN : SYS_OTHER;
}

/* Every thread of @pid, then (depth first) of each child process. */
static void add_process(SysCount *sc, pid_t pid, unsigned depth)
{
	g_autofree char *task = g_strdup_printf("/proc/%d/task", (int)pid);
	g_autoptr(GDir) dir = g_dir_open(task, 0, NULL);
	g_autoptr(GArray) children = g_array_new(FALSE, FALSE, sizeof(pid_t));
	const char *name;

	while (dir && (name = g_dir_read_name(dir))) {
		pid_t tid = (pid_t)atoi(name);
		g_autofree char *kids_path = g_strdup_printf("%s/%d/children", task, (int)tid);
		g_autofree char *kids = NULL;

		if (tid <= 0 || sc->n == SYSCOUNT_MAX_THREADS)
			continue;
		sc->tid[sc->n] = tid;
		sc->group[sc->n] = thread_group(tid, depth == 0 && tid == pid);
		sc->n++;
		if (g_file_get_contents(kids_path, &kids, NULL, NULL)) {
			g_auto(GStrv) list = g_strsplit(g_strstrip(kids), " ", -1);

			for (unsigned i = 0; list[i]; i++) {
				pid_t c = (pid_t)atoi(list[i]);

				if (c > 0)
					g_array_append_val(children, c);
			}
		}
	}
	for (guint i = 0; depth < 4 && i < children->len; i++)
		add_process(sc, g_array_index(children, pid_t, i), depth + 1);
}

static pid_t start_tracer(pid_t tid, const char *out)
{
	g_autofree char *tid_s = g_strdup_printf("%d", (int)tid);
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		/* the simulator is for the relay, not its tracer */
		unsetenv("LD_PRELOAD");
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
		}
		execlp("strace", "strace", "-qq", "-c", "-o", out, "-p", tid_s, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Until the kernel says @tid is traced (or @tracer died, or 10 s). */
static bool wait_traced(pid_t tid, pid_t tracer)
{
	for (int i = 0; i < 2000; i++) {
		int status;

		if (status_field(tid, "TracerPid:") != 0)
			return true;
		if (waitpid(tracer, &status, WNOHANG) == tracer)
			return false;
		g_usleep(5000);
	}
	return false;
}

int syscount_begin(SysCount *sc, pid_t pid, const char *trace_dir)
{
	unsigned traced = 0;

	memset(sc, 0, sizeof(*sc));
	add_process(sc, pid, 0);
	if (!sc->n)
		return -ESRCH;
	for (unsigned i = 0; trace_dir && i < sc->n; i++) {
		sc->out[i] = g_strdup_printf("%s/strace-%d", trace_dir, (int)sc->tid[i]);
		sc->tracer[i] = start_tracer(sc->tid[i], sc->out[i]);
		if (sc->tracer[i] > 0 && wait_traced(sc->tid[i], sc->tracer[i]))
			traced++;
		else
			sc->tracer[i] = 0;
	}
	/* after the tracers: attaching wakes the threads */
	for (unsigned i = 0; i < sc->n; i++) {
		sc->vcsw[i] = status_field(sc->tid[i], "voluntary_ctxt_switches:");
		syscount_sched_times(sc->tid[i], &sc->run_ns[i], &sc->wait_ns[i]);
	}
	return !trace_dir || traced ? 0 : -ENOENT;
}

static void add_call(SysResult *res, SysGroup g, const char *name, double per_mad)
{
	unsigned i;

	for (i = 0; i < res->ntop[g]; i++)
		if (!strcmp(res->top[g][i].name, name))
			break;
	if (i == res->ntop[g]) {
		if (i == SYSCOUNT_MAX_CALLS) {
			/* full: the least frequent goes if this one is more */
			i = SYSCOUNT_MAX_CALLS - 1;
			if (res->top[g][i].per_mad >= per_mad)
				return;
			res->top[g][i].per_mad = 0;
		} else {
			res->ntop[g]++;
		}
		snprintf(res->top[g][i].name, sizeof(res->top[g][i].name), "%s", name);
	}
	res->top[g][i].per_mad += per_mad;
	/* keep them sorted, most frequent first */
	for (; i > 0 && res->top[g][i].per_mad > res->top[g][i - 1].per_mad; i--) {
		SysCall t = res->top[g][i];

		res->top[g][i] = res->top[g][i - 1];
		res->top[g][i - 1] = t;
	}
}

/*
 * strace -c's summary: a header, a dashed line, one row per call
 * ("% time  seconds  usecs/call  calls  [errors]  syscall"), a dashed line
 * and the total, which is left out (the rows add up to it).
 */
static void read_summary(const char *path, SysGroup g, uint64_t mads, SysResult *res)
{
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;
	bool in_rows = false;

	if (!g_file_get_contents(path, &text, NULL, NULL))
		return;
	lines = g_strsplit(text, "\n", -1);
	for (unsigned i = 0; lines[i]; i++) {
		g_auto(GStrv) split = NULL;
		const char *f[8];
		unsigned nf = 0;
		double calls;

		if (g_str_has_prefix(lines[i], "------")) {
			in_rows = !in_rows;
			continue;
		}
		if (!in_rows)
			continue;
		split = g_strsplit_set(g_strstrip(lines[i]), " \t", -1);
		for (unsigned k = 0; split[k] && nf < G_N_ELEMENTS(f); k++)
			if (split[k][0])
				f[nf++] = split[k];
		if (nf < 5)
			continue;
		calls = g_ascii_strtod(f[3], NULL);
		res->calls[g] += calls / (double)mads;
		add_call(res, g, f[nf - 1], calls / (double)mads);
	}
}

void syscount_end(SysCount *sc, uint64_t mads, SysResult *res)
{
	bool traced = false;

	if (!mads)
		mads = 1;
	for (unsigned i = 0; i < sc->n; i++)
		if (sc->tracer[i])
			traced = true;
	if (!traced)
		for (unsigned g = 0; g < SYS_GROUPS; g++)
			res->wakeups[g] = res->cpu_us[g] = res->wait_us[g] = 0;
	/* traced threads stop for their tracer: no wake-ups or times from them */
	for (unsigned i = 0; !traced && i < sc->n; i++) {
		uint64_t now = status_field(sc->tid[i], "voluntary_ctxt_switches:");
		uint64_t run, wait;

		syscount_sched_times(sc->tid[i], &run, &wait);

		if (now >= sc->vcsw[i])
			res->wakeups[sc->group[i]] += (double)(now - sc->vcsw[i]) / (double)mads;
		if (run >= sc->run_ns[i])
			res->cpu_us[sc->group[i]] += (double)(run - sc->run_ns[i]) / 1e3 / (double)mads;
		if (wait >= sc->wait_ns[i])
			res->wait_us[sc->group[i]] += (double)(wait - sc->wait_ns[i]) / 1e3 / (double)mads;
	}
	if (traced) {
		for (unsigned g = 0; g < SYS_GROUPS; g++) {
			res->calls[g] = 0;
			res->ntop[g] = 0;
		}
		for (unsigned i = 0; i < sc->n; i++) {
			int status;

			if (!sc->tracer[i])
				continue;
			/* strace detaches on SIGINT and writes its summary */
			kill(sc->tracer[i], SIGINT);
			waitpid(sc->tracer[i], &status, 0);
			read_summary(sc->out[i], sc->group[i], mads, res);
			unlink(sc->out[i]);
		}
	}
	for (unsigned i = 0; i < sc->n; i++)
		g_free(sc->out[i]);
	memset(sc, 0, sizeof(*sc));
}
