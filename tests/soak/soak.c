/* SPDX-License-Identifier: MIT */
/*
 * Fault soak, the orchestrator: two rdmacm-mux daemons on a
 * simulated two-host fabric that drops, duplicates, delays, reorders and
 * fails sends (seeded), hundreds of clients in forked worker processes
 * doing CM exchanges in a loop with churn, and random SIGKILLs of whole
 * workers mid-handshake. Then it checks:
 *
 *  1. no misrouted MAD reached any client (the workers check every MAD);
 *  2. with the remaining clients connected but idle, both session tables
 *     drain to "live 0" once the timers ran out, and every client's own
 *     stats say 0 sessions and an empty queue;
 *  3. sessions of dead clients go at once: a holder worker establishes
 *     connections (ESTABLISHED sessions have no timer), everyone is
 *     SIGKILLed, and as soon as the daemons have closed the sockets their
 *     tables say "live 0";
 *  4. the daemons' RSS is flat after warm-up and their fd counts return to
 *     what they were before the first client;
 *  5. both daemons survive and exit 0 on SIGTERM, and every MAD the fabric
 *     delivered is accounted for in their counters (replaying the fault
 *     generator gives the exact number of drops and duplicates).
 *
 * CI mode runs about 60-90 s; `--long` (10 minutes) or SOAK_SECONDS=N run
 * as long as asked. See tests/soak/README.md.
 */
#include "soak.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define DEFAULT_FAULTS "seed=42,drop=0.01,dup=0.01,delay_ms=5,delay=0.05,reorder=0.05,send_errno=EIO:0.01"
#define HANDSHAKE_MS 1500
#define CLOSING_MS 1000
#define SIDR_MS 1000
#define SAMPLE_MS 250

typedef struct Options {
	int seconds;
	int clients;
	int per_worker;
	int holders; /* connections the holder establishes */
	int kill_ms; /* mean interval between SIGKILLs */
	uint64_t seed;
	char *faults;
	gboolean long_mode;
	gboolean keep;
} Options;

typedef struct Sample {
	double t; /* seconds since the first client */
	long rss[2];
} Sample;

typedef struct Soak {
	Options o;
	char *dir, *fabric;
	SoakDaemon *d[2];
	SoakShared *sh;
	SoakWorkerConfig *cfg; /* [nworkers + 1]: the last is the holder */
	pid_t *pid;
	unsigned nworkers;
	SoakFds fd0[2];
	long rss0[2];
	GArray *samples;
	unsigned kills, respawns;
	int failures;
	GString *report;
} Soak;

static void fail(Soak *s, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void fail(Soak *s, const char *fmt, ...)
{
	va_list ap;
	g_autofree char *msg = NULL;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	printf("FAIL: %s\n", msg);
	fflush(stdout);
	s->failures++;
}

static void say(Soak *s, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void say(Soak *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	g_string_append_vprintf(s->report, fmt, ap);
	va_end(ap);
	g_string_append_c(s->report, '\n');
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int env_int(const char *name, int def)
{
	const char *v = g_getenv(name);

	return v && *v ? atoi(v) : def;
}

static void parse_options(Options *o, int argc, char **argv)
{
	GOptionEntry entries[] = {
		{ "long", 0, 0, G_OPTION_ARG_NONE, &o->long_mode, "Soak for 10 minutes (or SOAK_SECONDS)", NULL },
		{ "seconds", 0, 0, G_OPTION_ARG_INT, &o->seconds, "Length of the soak phase", "S" },
		{ "clients", 0, 0, G_OPTION_ARG_INT, &o->clients, "Client slots (both hosts)", "N" },
		{ "per-worker", 0, 0, G_OPTION_ARG_INT, &o->per_worker, "Clients per worker process", "N" },
		{ "kill-ms", 0, 0, G_OPTION_ARG_INT, &o->kill_ms, "Mean interval between SIGKILLs", "MS" },
		{ "faults", 0, 0, G_OPTION_ARG_STRING, &o->faults, "Fabric fault spec", "SPEC" },
		{ "keep", 0, 0, G_OPTION_ARG_NONE, &o->keep, "Keep the work directory", NULL },
		{ NULL },
	};
	g_autoptr(GOptionContext) ctx = g_option_context_new("- rdmacm-mux fault soak");
	g_autoptr(GError) err = NULL;

	g_option_context_add_main_entries(ctx, entries, NULL);
	if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
		fprintf(stderr, "soak: %s\n", err->message);
		exit(2);
	}
	if (o->long_mode && !o->seconds)
		o->seconds = env_int("SOAK_SECONDS", 600);
	if (!o->seconds)
		o->seconds = env_int("SOAK_SECONDS", 45);
	if (!o->clients)
		o->clients = env_int("SOAK_CLIENTS", o->long_mode ? 440 : 300);
	if (!o->per_worker)
		o->per_worker = 10;
	if (!o->kill_ms)
		o->kill_ms = 1000;
	if (!o->faults)
		o->faults = g_strdup(g_getenv("SOAK_FAULTS") ? g_getenv("SOAK_FAULTS") : DEFAULT_FAULTS);
	o->holders = 32;
	o->clients &= ~1; /* even: slots alternate hosts */
	/* A umad address carries an 8-bit gid_index: a port's GIDs past index
	 * 255 cannot be told apart (finding F2, repro-gid-index), so each host
	 * gets at most 256 client GIDs. */
	if (o->clients < 4 || o->clients / 2 + o->holders > 256 ||
	    o->clients + 2 * o->holders > SOAK_MAX_SLOTS ||
	    (o->clients + o->per_worker - 1) / o->per_worker + 1 > SOAK_MAX_WORKERS) {
		fprintf(stderr, "soak: too few or too many clients\n");
		exit(2);
	}
}

/* Both ports hold the GIDs of all their slots, holders included. */
static void make_fabric(Soak *s)
{
	unsigned total = (unsigned)(s->o.clients + 2 * s->o.holders);
	g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);

	s->fabric = g_build_filename(s->dir, "fabric", NULL);
	g_ptr_array_add(argv, g_strdup(g_getenv("UMAD_SIM_CLI")));
	g_ptr_array_add(argv, g_strdup("create"));
	g_ptr_array_add(argv, g_strdup(s->fabric));
	/* No longer than needed: the CLI writes every entry's sysfs files. */
	g_ptr_array_add(argv, g_strdup("--gid-table-len"));
	g_ptr_array_add(argv, g_strdup_printf("%u", MAX(16u, (total + 1) / 2)));
	for (unsigned host = 0; host < 2; host++) {
		GString *spec = g_string_new(host ? "simB=" : "simA=");

		for (unsigned slot = host; slot < total; slot += 2) {
			uint8_t gid[IB_GID_LEN];
			char text[64];

			soak_slot_gid(slot, gid);
			g_assert_nonnull(inet_ntop(AF_INET6, gid, text, sizeof(text)));
			g_string_append_printf(spec, "%s%s", slot > 1 ? "," : "", text);
		}
		g_ptr_array_add(argv, g_strdup("--roce-ca"));
		g_ptr_array_add(argv, g_string_free(spec, FALSE));
	}
	g_ptr_array_add(argv, g_strdup("--faults"));
	g_ptr_array_add(argv, g_strdup(s->o.faults));
	g_ptr_array_add(argv, NULL);
	if (!g_getenv("UMAD_SIM_CLI"))
		g_error("UMAD_SIM_CLI is not set; run the soak through meson");
	harness_run_sync((char **)argv->pdata);
}

static pid_t spawn_worker(Soak *s, unsigned i)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	g_assert_cmpint(pid, >=, 0);
	if (pid == 0) {
		s->cfg[i].seed = s->o.seed ^ ((uint64_t)s->respawns << 20);
		soak_worker_main(&s->cfg[i], s->sh);
	}
	s->pid[i] = pid;
	return pid;
}

static void setup_workers(Soak *s)
{
	unsigned n = (unsigned)s->o.clients, per = (unsigned)s->o.per_worker;

	s->nworkers = (n + per - 1) / per;
	s->cfg = g_new0(SoakWorkerConfig, s->nworkers + 1);
	s->pid = g_new0(pid_t, s->nworkers + 1);
	for (unsigned i = 0; i <= s->nworkers; i++) {
		SoakWorkerConfig *c = &s->cfg[i];

		c->index = i;
		c->socket[0] = s->d[0]->socket;
		c->socket[1] = s->d[1]->socket;
		c->rto_ms = 200;
		c->max_tries = 5;
		c->think_ms = 150;
		c->lifetime_ms = 6000;
		c->peer_slots = n;
		if (i < s->nworkers) {
			c->first_slot = i * per;
			c->nslots = MIN(per, n - i * per);
		} else {
			c->holder = true;
			c->first_slot = n;
			c->nslots = (unsigned)(2 * s->o.holders);
		}
	}
}

/* Reap workers that died on their own: that is a failure of the soak. */
static void reap_unexpected(Soak *s)
{
	for (unsigned i = 0; i <= s->nworkers; i++) {
		int status;

		if (s->pid[i] > 0 && waitpid(s->pid[i], &status, WNOHANG) == s->pid[i]) {
			fail(s, "worker %u (pid %d) exited on its own, status 0x%x", i, s->pid[i],
			     status);
			s->pid[i] = 0;
		}
	}
}

static void kill_worker(Soak *s, unsigned i)
{
	if (s->pid[i] <= 0)
		return;
	kill(s->pid[i], SIGKILL);
	(void)waitpid(s->pid[i], NULL, 0);
	s->pid[i] = 0;
}

static void sample(Soak *s, double t0)
{
	Sample x = { .t = now_s() - t0 };

	for (int h = 0; h < 2; h++)
		x.rss[h] = s->d[h]->pid ? soak_proc_rss_kb(s->d[h]->pid) : -1;
	g_array_append_val(s->samples, x);
}

static bool daemons_alive(Soak *s)
{
	bool ok = true;

	for (int h = 0; h < 2; h++)
		if (!soak_daemon_alive(s->d[h])) {
			g_autofree char *out = soak_daemon_output(s->d[h]);
			size_t len = strlen(out);

			fail(s, "rdmacm-mux %s died (status %d); its last output:\n%s", s->d[h]->ca,
			     s->d[h]->exit_status, out + (len > 4000 ? len - 4000 : 0));
			ok = false;
		}
	return ok;
}

static int64_t live_of(Soak *s, int h, char **dump_out)
{
	g_autofree char *dump = soak_daemon_dump(s->d[h], 2000);
	int64_t live = dump ? soak_dump_value(dump, " live ") : -1;

	if (dump_out)
		*dump_out = g_steal_pointer(&dump);
	return live;
}

static uint64_t rnd_state = 1;

static uint64_t rnd(void)
{
	uint64_t z = (rnd_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- phase 1: the soak itself ---- */

static void soak_phase(Soak *s, double t0)
{
	double end = t0 + s->o.seconds, next_kill = t0 + 2.0, next_sample = t0;

	while (now_s() < end) {
		double t = now_s();

		if (t >= next_sample) {
			sample(s, t0);
			next_sample = t + SAMPLE_MS / 1000.0;
		}
		if (t >= next_kill) {
			unsigned i = (unsigned)(rnd() % s->nworkers);

			kill_worker(s, i);
			s->kills++;
			s->respawns++;
			spawn_worker(s, i);
			next_kill = t + (double)(rnd() % (uint64_t)(2 * s->o.kill_ms)) / 1000.0;
		}
		reap_unexpected(s);
		if (!daemons_alive(s))
			return;
		g_usleep(20000);
	}
	sample(s, t0);
}

/* ---- phase 2: idle clients, timers drain the tables ---- */

static void drain_phase(Soak *s)
{
	double start = now_s();
	double limit = start + 4.0 * (HANDSHAKE_MS + CLOSING_MS + SIDR_MS) / 1000.0 + 10.0;
	int64_t live[2] = { -1, -1 };
	g_autofree char *dump[2] = { NULL, NULL };

	__atomic_store_n(&s->sh->phase, SOAK_PHASE_QUIESCE, __ATOMIC_RELEASE);
	while (now_s() < limit) {
		g_usleep(500000);
		reap_unexpected(s);
		if (!daemons_alive(s))
			return;
		for (int h = 0; h < 2; h++) {
			g_free(dump[h]);
			live[h] = live_of(s, h, &dump[h]);
		}
		if (live[0] == 0 && live[1] == 0)
			break;
	}
	say(s, "idle drain: clients connected but quiet; live sessions %" G_GINT64_FORMAT
	       " (simA) %" G_GINT64_FORMAT " (simB) after %.1f s (timers %d/%d/%d ms)",
	    live[0], live[1], now_s() - start, HANDSHAKE_MS, CLOSING_MS, SIDR_MS);
	for (int h = 0; h < 2; h++)
		if (live[h] != 0)
			fail(s, "%s: the session table did not drain to 0 after the timers: live %" G_GINT64_FORMAT
				"\n%s",
			     s->d[h]->ca, live[h], dump[h] ? dump[h] : "(no dump)");

	/* Every client's own view. */
	__atomic_store_n(&s->sh->phase, SOAK_PHASE_STATS, __ATOMIC_RELEASE);
	{
		double until = now_s() + 20.0;
		uint32_t clients = 0, sessions = 0, queued = 0, failed = 0;
		unsigned done = 0;

		while (now_s() < until) {
			done = 0;
			for (unsigned i = 0; i < s->nworkers; i++)
				done += __atomic_load_n(&s->sh->w[i].stats_done, __ATOMIC_ACQUIRE) != 0;
			if (done == s->nworkers)
				break;
			g_usleep(50000);
		}
		for (unsigned i = 0; i < s->nworkers; i++) {
			clients += s->sh->w[i].stats_clients;
			sessions += s->sh->w[i].stats_sessions;
			queued += s->sh->w[i].stats_queued;
			failed += s->sh->w[i].stats_failed;
		}
		say(s, "idle clients: %u connected, their stats say %u sessions, %u queued frames "
		       "(%u of %u workers answered, %u queries failed)",
		    clients, sessions, queued, done, s->nworkers, failed);
		if (done != s->nworkers || failed)
			fail(s, "not every idle client could query its stats");
		if (sessions || queued)
			fail(s, "idle clients still hold %u sessions / %u queued frames", sessions,
			     queued);
		if (clients < (uint32_t)s->o.clients / 2)
			fail(s, "only %u idle clients were connected", clients);
	}
}

/* ---- phase 3: dead clients' sessions go at once ---- */

static void dead_client_phase(Soak *s)
{
	unsigned hi = s->nworkers;
	uint32_t want = (uint32_t)(2 * s->o.holders);
	double until, t_kill, t_closed = -1;
	int64_t before[2], after[2];
	g_autofree char *dump[2] = { NULL, NULL };
	SoakFds fds[2];

	spawn_worker(s, hi);
	until = now_s() + 30.0;
	while (now_s() < until && s->sh->w[hi].holder_established < want) {
		reap_unexpected(s);
		g_usleep(50000);
	}
	if (s->sh->w[hi].holder_established < want)
		fail(s, "the holder established only %u of %u connection ends",
		     s->sh->w[hi].holder_established, want);
	for (int h = 0; h < 2; h++)
		before[h] = live_of(s, h, NULL);
	say(s, "holder: %d connections established (no timer runs on them); live before the "
	       "kill: %" G_GINT64_FORMAT " (simA) %" G_GINT64_FORMAT " (simB)",
	    s->o.holders, before[0], before[1]);
	for (int h = 0; h < 2; h++)
		if (before[h] < s->o.holders)
			fail(s, "%s: live %" G_GINT64_FORMAT " < %d established sessions",
			     s->d[h]->ca, before[h], s->o.holders);

	/* SIGKILL every client process at once. */
	t_kill = now_s();
	for (unsigned i = 0; i <= s->nworkers; i++)
		if (s->pid[i] > 0)
			kill(s->pid[i], SIGKILL);
	for (unsigned i = 0; i <= s->nworkers; i++)
		if (s->pid[i] > 0) {
			(void)waitpid(s->pid[i], NULL, 0);
			s->pid[i] = 0;
		}
	/* The daemons have seen every hangup once their fd count is back. */
	until = now_s() + 10.0;
	while (now_s() < until) {
		soak_proc_fds(s->d[0]->pid, s->fabric, &fds[0]);
		soak_proc_fds(s->d[1]->pid, s->fabric, &fds[1]);
		if (fds[0].sockets <= s->fd0[0].sockets && fds[1].sockets <= s->fd0[1].sockets) {
			t_closed = now_s() - t_kill;
			break;
		}
		g_usleep(2000);
	}
	for (int h = 0; h < 2; h++)
		after[h] = live_of(s, h, &dump[h]);
	say(s, "all clients SIGKILLed: sockets closed by the daemons after %.0f ms; live then "
	       "%" G_GINT64_FORMAT " (simA) %" G_GINT64_FORMAT " (simB), %.0f ms after the kill",
	    t_closed * 1000, after[0], after[1], (now_s() - t_kill) * 1000);
	for (int h = 0; h < 2; h++) {
		say(s, "fds %s: before the first client %d (%d sockets, %d fabric, %d other), "
		       "after the last %d (%d sockets, %d fabric FIFOs, %d other)",
		    s->d[h]->ca, s->fd0[h].total, s->fd0[h].sockets, s->fd0[h].fabric,
		    s->fd0[h].other, fds[h].total, fds[h].sockets, fds[h].fabric, fds[h].other);
		/* The sim keeps one FIFO open per port it sent to: at most both. */
		if (fds[h].sockets != s->fd0[h].sockets || fds[h].other != s->fd0[h].other ||
		    fds[h].fabric > s->fd0[h].fabric + 2)
			fail(s, "%s: fd leak: %d open fds before any client, %d after all left",
			     s->d[h]->ca, s->fd0[h].total, fds[h].total);
		if (after[h] != 0)
			fail(s, "%s: sessions of dead clients survive: live %" G_GINT64_FORMAT
				" with no client left\n%s",
			     s->d[h]->ca, after[h], dump[h] ? dump[h] : "(no dump)");
	}
}

/* ---- RSS ---- */

static void check_rss(Soak *s)
{
	Sample *x = (Sample *)(void *)s->samples->data;
	guint n = s->samples->len;
	double warm = MAX(10.0, s->o.seconds * 0.25);

	for (int h = 0; h < 2; h++) {
		long at_warm = -1, peak = 0, last = -1, late_max = 0;
		double sx = 0, sy = 0, sxx = 0, sxy = 0, slope;
		unsigned m = 0;

		for (guint i = 0; i < n; i++) {
			peak = MAX(peak, x[i].rss[h]);
			if (x[i].t < warm)
				continue;
			if (at_warm < 0)
				at_warm = x[i].rss[h];
			late_max = MAX(late_max, x[i].rss[h]);
			last = x[i].rss[h];
			sx += x[i].t;
			sy += (double)x[i].rss[h];
			sxx += x[i].t * x[i].t;
			sxy += x[i].t * (double)x[i].rss[h];
			m++;
		}
		if (m < 2) {
			fail(s, "too few RSS samples after warm-up");
			continue;
		}
		slope = (m * sxy - sx * sy) / (m * sxx - sx * sx) * 60.0;
		{
			long bound = MAX(at_warm / 10, 2048);

			say(s, "RSS %s: %ld kB before any client, %ld kB at the end of warm-up (%.0f s), "
			       "%ld kB max after it, %ld kB at the end of the soak, %ld kB peak; "
			       "trend after warm-up %+.1f kB/min; bound +%ld kB",
			    s->d[h]->ca, s->rss0[h], at_warm, warm, late_max, last, peak, slope, bound);
			if (late_max - at_warm > bound)
				fail(s, "%s: RSS grew %ld kB after warm-up (bound %ld kB)", s->d[h]->ca,
				     late_max - at_warm, bound);
		}
	}
}

/* ---- the final counters ---- */

static const char *const attrs[] = { "REQ", "MRA", "REJ", "REP", "RTU", "DREQ",
				     "DREP", "SIDR_REQ", "SIDR_REP", "LAP", "APR" };

static int64_t sum_labels(const char *dump, const char *prefix)
{
	int64_t sum = 0;

	for (const char *p = dump; (p = strstr(p, prefix)); p++) {
		const char *q = p + strlen(prefix);

		while (*q && *q != ' ')
			q++;
		sum += g_ascii_strtoll(q, NULL, 10);
	}
	return sum;
}

static void final_phase(Soak *s)
{
	int64_t tx[2] = { 0 }, rx[2] = { 0 }, rxdrop[2], failed[2], arrivals = 0, received = 0;
	SoakFaultTally ft[2];
	static const char *const salt[2] = { "simA/1", "simB/1" };

	g_usleep(300000); /* held and delayed MADs land */
	for (int h = 0; h < 2; h++) {
		g_autofree char *out = NULL;
		const char *dump;
		int st = soak_daemon_stop(s->d[h]);

		if (st != 0)
			fail(s, "%s exited with status %d on SIGTERM", s->d[h]->ca, st);
		out = soak_daemon_output(s->d[h]);
		dump = soak_last_dump(out);
		if (!dump) {
			fail(s, "%s printed no counters", s->d[h]->ca);
			continue;
		}
		say(s, "final %s", dump);
		for (size_t a = 0; a < G_N_ELEMENTS(attrs); a++) {
			int64_t t = daemon_output_attr(dump, attrs[a], false);
			int64_t r = daemon_output_attr(dump, attrs[a], true);

			tx[h] += MAX(t, 0);
			rx[h] += MAX(r, 0);
		}
		rxdrop[h] = sum_labels(dump, "rx dropped, ");
		failed[h] = MAX(soak_dump_value(dump, "tx refused, send-failed"), 0);
		if (soak_dump_value(dump, " live ") != 0)
			fail(s, "%s: final dump says live %" G_GINT64_FORMAT, s->d[h]->ca,
			     soak_dump_value(dump, " live "));
		soak_fault_replay(s->o.faults, salt[h], (uint64_t)(tx[h] + failed[h]), &ft[h]);
		arrivals += (int64_t)ft[h].arrivals;
		received += rx[h] + rxdrop[h];
		say(s, "%s: %" G_GINT64_FORMAT " MADs sent, %" G_GINT64_FORMAT
		       " delivered to clients, %" G_GINT64_FORMAT " received and dropped "
		       "(no owner/session: peers gone or timed out), %" G_GINT64_FORMAT " send failures",
		    s->d[h]->ca, tx[h], rx[h], rxdrop[h], failed[h]);
		say(s, "faults injected on %s (replayed from the seed): %" G_GUINT64_FORMAT
		       " send errors, %" G_GUINT64_FORMAT " drops, %" G_GUINT64_FORMAT
		       " duplicates, %" G_GUINT64_FORMAT " reorder, %" G_GUINT64_FORMAT " delays",
		    salt[h], ft[h].failed, ft[h].dropped, ft[h].duplicated, ft[h].reordered,
		    ft[h].delayed);
		if ((int64_t)ft[h].failed != failed[h])
			fail(s, "%s: %" G_GINT64_FORMAT " failed sends, but the fabric injected %" G_GUINT64_FORMAT,
			     s->d[h]->ca, failed[h], ft[h].failed);
	}
	say(s, "fabric accounting: %" G_GINT64_FORMAT " MADs arrived at the daemons, %" G_GINT64_FORMAT
	       " expected from the sends and the replayed faults",
	    received, arrivals);
	if (received != arrivals)
		fail(s, "the daemons accounted for %" G_GINT64_FORMAT " inbound MADs, the fabric delivered %" G_GINT64_FORMAT,
		     received, arrivals);
}

static void client_totals(Soak *s)
{
	SoakWorkerStats t = { 0 };

	for (unsigned i = 0; i <= s->nworkers; i++) {
		const SoakWorkerStats *w = &s->sh->w[i];

		t.sent += w->sent;
		t.send_eio += w->send_eio;
		t.send_enoent += w->send_enoent;
		t.send_other += w->send_other;
		if (w->send_other)
			t.send_other_last = w->send_other_last;
		t.retransmits += w->retransmits;
		t.received += w->received;
		t.lib_dropped += w->lib_dropped;
		t.misroutes += w->misroutes;
		t.conn_started += w->conn_started;
		t.conn_done += w->conn_done;
		t.conn_rejected += w->conn_rejected;
		t.conn_gave_up += w->conn_gave_up;
		t.sidr_started += w->sidr_started;
		t.sidr_done += w->sidr_done;
		t.sidr_gave_up += w->sidr_gave_up;
		t.passive_rep += w->passive_rep;
		t.passive_rej += w->passive_rej;
		t.passive_est += w->passive_est;
		t.sidr_answered += w->sidr_answered;
		t.opens += w->opens;
		t.closes += w->closes;
		t.open_retries += w->open_retries;
		t.broken += w->broken;
	}
	say(s, "clients: %" G_GUINT64_FORMAT " connections opened, %" G_GUINT64_FORMAT
	       " closed cleanly, %u worker SIGKILLs (about %d clients each), %" G_GUINT64_FORMAT
	       " REG retries while a killed owner was being dropped, %" G_GUINT64_FORMAT " broken",
	    t.opens, t.closes, s->kills, s->o.per_worker, t.open_retries, t.broken);
	say(s, "exchanges: %" G_GUINT64_FORMAT " REQ started, %" G_GUINT64_FORMAT
	       " connected and disconnected, %" G_GUINT64_FORMAT " rejected, %" G_GUINT64_FORMAT
	       " gave up (REJ timeout); %" G_GUINT64_FORMAT " SIDR started, %" G_GUINT64_FORMAT
	       " answered, %" G_GUINT64_FORMAT " gave up; passive: %" G_GUINT64_FORMAT " REP, %" G_GUINT64_FORMAT
	       " REJ, %" G_GUINT64_FORMAT " RTU received, %" G_GUINT64_FORMAT " SIDR_REP",
	    t.conn_started, t.conn_done, t.conn_rejected, t.conn_gave_up, t.sidr_started,
	    t.sidr_done, t.sidr_gave_up, t.passive_rep, t.passive_rej, t.passive_est,
	    t.sidr_answered);
	say(s, "client MADs: %" G_GUINT64_FORMAT " sent, %" G_GUINT64_FORMAT
	       " retransmissions, %" G_GUINT64_FORMAT " received and checked, %" G_GUINT64_FORMAT
	       " refused -EIO (injected), %" G_GUINT64_FORMAT " refused -ENOENT, %" G_GUINT64_FORMAT
	       " other refusals, %" G_GUINT64_FORMAT " dropped by the library; MISROUTES %" G_GUINT64_FORMAT,
	    t.sent, t.retransmits, t.received, t.send_eio, t.send_enoent, t.send_other,
	    t.lib_dropped, t.misroutes);
	if (t.misroutes) {
		fail(s, "%" G_GUINT64_FORMAT " misrouted MADs; the first:", t.misroutes);
		for (uint32_t i = 0; i < MIN(s->sh->n_misroute_log, SOAK_MISROUTE_LOG); i++)
			printf("  %s\n", s->sh->misroute_log[i]);
	}
	if (t.send_other)
		fail(s, "%" G_GUINT64_FORMAT " MADs refused for a reason other than -EIO/-ENOENT (last %d: %s)",
		     t.send_other, t.send_other_last, g_strerror(-t.send_other_last));
	if (t.conn_done == 0 || t.sidr_done == 0 || t.conn_rejected == 0 || t.received == 0)
		fail(s, "the soak did not exercise every exchange");
}

int main(int argc, char **argv)
{
	Soak s = { 0 };
	static const char *const extra[] = {
		"--handshake-timeout", G_STRINGIFY(HANDSHAKE_MS), "--closing-timeout",
		G_STRINGIFY(CLOSING_MS), "--sidr-timeout", G_STRINGIFY(SIDR_MS), "--max-clients",
		"8192", "--log-level", "notice", NULL
	};
	struct rlimit rl;
	double t0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse_options(&s.o, argc, argv);
	s.o.seed = (uint64_t)env_int("SOAK_SEED", 42);
	rnd_state = s.o.seed;
	s.report = g_string_new(NULL);
	s.samples = g_array_new(FALSE, TRUE, sizeof(Sample));
	signal(SIGPIPE, SIG_IGN);

	/* Each worker has a few dozen sockets, each daemon one per client. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}

	s.dir = g_dir_make_tmp("rdmacm-mux-soak-XXXXXX", NULL);
	g_assert_nonnull(s.dir);
	make_fabric(&s);
	s.d[0] = soak_daemon_start(s.dir, s.fabric, "simA", extra);
	s.d[1] = soak_daemon_start(s.dir, s.fabric, "simB", extra);
	for (int h = 0; h < 2; h++) {
		soak_proc_fds(s.d[h]->pid, s.fabric, &s.fd0[h]);
		s.rss0[h] = soak_proc_rss_kb(s.d[h]->pid);
	}
	s.sh = mmap(NULL, sizeof(SoakShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		    -1, 0);
	g_assert_true(s.sh != MAP_FAILED);
	setup_workers(&s);
	printf("soak: %d s, %d clients in %u workers (+%d holder pairs), kill every ~%d ms, "
	       "faults \"%s\", dir %s\n",
	       s.o.seconds, s.o.clients, s.nworkers, s.o.holders, s.o.kill_ms, s.o.faults, s.dir);

	t0 = now_s();
	for (unsigned i = 0; i < s.nworkers; i++)
		spawn_worker(&s, i);
	soak_phase(&s, t0);
	if (s.failures == 0) {
		say(&s, "soak phase: %.1f s", now_s() - t0);
		drain_phase(&s);
	}
	if (s.d[0]->pid && s.d[1]->pid)
		dead_client_phase(&s);
	for (unsigned i = 0; i <= s.nworkers; i++)
		kill_worker(&s, i);
	check_rss(&s);
	client_totals(&s);
	final_phase(&s);

	printf("%s", s.report->str);
	printf("soak: %s (%d failures), %.1f s in all\n", s.failures ? "FAILED" : "passed",
	       s.failures, now_s() - t0);
	for (int h = 0; h < 2; h++)
		soak_daemon_free(s.d[h]);
	if (!s.o.keep && !s.failures) {
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", s.dir);
		if (system(cmd) != 0)
			fprintf(stderr, "soak: cannot remove %s\n", s.dir);
	} else {
		printf("soak: work directory kept: %s\n", s.dir);
	}
	return s.failures ? 1 : 0;
}
