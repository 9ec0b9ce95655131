/* SPDX-License-Identifier: MIT */
/*
 * Owns rdmacm-mux-bench's orchestration: the simulated fabric, starting and
 * stopping the daemons and the helpers, the sequence of measurements, and
 * the table, JSON and plot it prints. See bench/README.md for the method.
 *
 *   rdmacm-mux-bench [--quick] [--json FILE] [--plot FILE] [--daemon PATH]
 *                    [--sim-lib PATH] [--runs N] [--run-ms MS] [--check]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>

#include "driver.h"
#include "fabric.h"

#define A_CLIENT_GIDS 1010  /* simA: fe80::a, ::ffff:10.0.1.1, then clients at 2.. */
#define B_CLIENT_GIDS 120   /* simB: fe80::b, ::ffff:10.0.2.1 (the sink), then clients */
#define MAX_ROWS 128

typedef struct Opts {
	bool quick, check;
	const char *json, *plot, *daemon, *sim_lib;
	unsigned runs, run_ms, warm_ms;
} Opts;

typedef struct Row {
	char name[48];
	char relay[8];	   /* daemon, probe */
	char unit[12];	   /* MADs/s, cycles/s */
	unsigned clients;
	uint32_t sessions;
	double med, min, max;
	double ratio;	   /* med / the probe's, 0 when there is none */
	uint64_t p50, p99, p999; /* latency rows (ns) */
	uint64_t errors;
	char note[96];
} Row;

static struct {
	Opts o;
	char *dir, *fabric, *sock_a, *sock_b, *sock_p;
	Shared *sh;
	int ctl;
	pid_t wire, probe, daemon_a, daemon_b;
	uint8_t a_gid[A_CLIENT_GIDS][16], b_gid[B_CLIENT_GIDS][16], sink_gid[16], a_port_gid[16];
	int a_idx[A_CLIENT_GIDS], b_idx[B_CLIENT_GIDS];
	Row rows[MAX_ROWS];
	unsigned nrows;
	uint64_t total_errors;
	/* memory */
	double rss_per_client, rss_per_session, rss_1m_mb, rss_base_mb;
	unsigned rss_clients;
	uint32_t rss_sessions;
	double tx_peak10;
	double rx_peak10;
} B = { .ctl = -1 };

static void die(const char *what)
{
	fprintf(stderr, "rdmacm-mux-bench: %s\n", what);
	exit(1);
}

static void kick(void)
{
	uint64_t one = 1;

	if (write(B.ctl, &one, sizeof(one)) < 0)
		die("eventfd");
}

static void wait_flag(const uint32_t *flag, const char *what)
{
	for (int i = 0; i < 1000 && !__atomic_load_n(flag, __ATOMIC_ACQUIRE); i++)
		g_usleep(5000);
	if (!__atomic_load_n(flag, __ATOMIC_ACQUIRE))
		die(what);
}

/* ---- fabric ---- */

static void gid_v4(uint8_t g[16], unsigned a, unsigned b, unsigned c, unsigned d)
{
	memset(g, 0, 16);
	g[10] = g[11] = 0xff;
	g[12] = (uint8_t)a;
	g[13] = (uint8_t)b;
	g[14] = (uint8_t)c;
	g[15] = (uint8_t)d;
}

static void make_fabric(void)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(sim_fabric) f = sim_fabric_new();
	g_autoptr(GPtrArray) ga = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GPtrArray) gb = g_ptr_array_new_with_free_func(g_free);
	char text[64];

	/* simB first: the simulator finds a destination GID by a linear scan over
	 * the CAs in order, and the sink's GID should cost the same few compares
	 * for everybody (see README: fabric costs). */
	g_ptr_array_add(gb, g_strdup("fe80::b"));
	g_ptr_array_add(gb, g_strdup("::ffff:10.0.2.1"));
	gid_v4(B.sink_gid, 10, 0, 2, 1);
	for (unsigned i = 0; i < B_CLIENT_GIDS; i++) {
		gid_v4(B.b_gid[i], 10, 2, i / 250, i % 250 + 1);
		sim_gid_format(B.b_gid[i], text);
		g_ptr_array_add(gb, g_strdup(text));
		B.b_idx[i] = (int)i + 2;
	}
	g_ptr_array_add(ga, g_strdup("fe80::a"));
	g_ptr_array_add(ga, g_strdup("::ffff:10.0.1.1"));
	gid_v4(B.a_port_gid, 10, 0, 1, 1);
	for (unsigned i = 0; i < A_CLIENT_GIDS; i++) {
		gid_v4(B.a_gid[i], 10, 1, i / 250, i % 250 + 1);
		sim_gid_format(B.a_gid[i], text);
		g_ptr_array_add(ga, g_strdup(text));
		B.a_idx[i] = (int)i + 2;
	}
	if (sim_fabric_add_roce_ca(f, "simB", (const char *const *)gb->pdata, gb->len, 128) < 0 ||
	    sim_fabric_add_roce_ca(f, "simA", (const char *const *)ga->pdata, ga->len, 1024) < 0)
		die("cannot build the fabric model");
	sim_fabric_number_ports(f);
	if (sim_fabric_commit(B.fabric, f, &err) < 0) {
		fprintf(stderr, "rdmacm-mux-bench: fabric: %s\n", err ? err->message : "?");
		exit(1);
	}
}

/* ---- processes ---- */

static bool socket_serves(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

static pid_t daemon_start(const char *ca, const char *sock)
{
	g_autofree char *log = g_strdup_printf("%s/daemon-%s.log", B.dir, ca);
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		const char *argv[] = { B.o.daemon, "-d", ca, "--socket", sock,
				       "--max-clients", "4096", "--max-sessions", "16777216",
				       "--handshake-timeout", "86400000", "--closing-timeout", "2000",
				       "--log-level", "warning", NULL };

		dup2(fd, 1);
		dup2(fd, 2);
		execv(B.o.daemon, (char **)argv);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		int status;

		if (socket_serves(sock))
			return pid;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			fprintf(stderr, "rdmacm-mux-bench: %s exited at start, see %s\n", B.o.daemon, log);
			exit(1);
		}
		g_usleep(5000);
	}
	die("the daemon did not start serving its socket");
	return -1;
}

static void stop(pid_t *pid, int sig)
{
	int status;

	if (*pid <= 0)
		return;
	kill(*pid, sig);
	waitpid(*pid, &status, 0);
	*pid = 0;
}

static pid_t probe_start(void)
{
	pid_t pid;

	__atomic_store_n(&B.sh->probe_ready, 0, __ATOMIC_RELEASE);
	pid = fork();
	if (pid == 0)
		probe_main(B.sh, B.ctl, B.sock_p);
	wait_flag(&B.sh->probe_ready, "the probe did not start");
	return pid;
}

static double rss_mb(pid_t pid)
{
	g_autofree char *path = g_strdup_printf("/proc/%d/status", (int)pid);
	g_autofree char *text = NULL;
	const char *p;

	if (!g_file_get_contents(path, &text, NULL, NULL) || !(p = strstr(text, "VmRSS:")))
		return 0;
	return g_ascii_strtod(p + 6, NULL) / 1024.0;
}

static void set_wire(enum WireMode m)
{
	__atomic_store_n(&B.sh->wire_mode, (uint32_t)m, __ATOMIC_RELEASE);
	kick();
}

/* Wait until the sink counted @n MADs (or 10 s). */
static void sink_wait(uint64_t n)
{
	for (int i = 0; i < 2000 && __atomic_load_n(&B.sh->sink_count, __ATOMIC_RELAXED) < n; i++)
		g_usleep(5000);
}

/* ---- measurements ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static uint64_t snap_metric(const Snap *s, DriveMode mode)
{
	switch (mode) {
	case DRIVE_TX:
	case DRIVE_TX_PACED:
		return s->sink;
	case DRIVE_QEMU:
		return s->resp_ok;
	case DRIVE_RX:
		return s->inbound;
	case DRIVE_HANDSHAKE:
		return s->cycles;
	}
	return 0;
}

static Row *row_new(const char *name, const char *relay, unsigned clients, uint32_t sessions)
{
	Row *r;

	if (B.nrows == MAX_ROWS)
		die("too many rows");
	r = &B.rows[B.nrows++];
	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	snprintf(r->relay, sizeof(r->relay), "%s", relay);
	snprintf(r->unit, sizeof(r->unit), "MADs/s");
	r->clients = clients;
	r->sessions = sessions;
	return r;
}

static Row *find_row(const char *name, const char *relay, unsigned clients)
{
	for (unsigned i = 0; i < B.nrows; i++)
		if (!strcmp(B.rows[i].name, name) && !strcmp(B.rows[i].relay, relay) &&
		    B.rows[i].clients == clients)
			return &B.rows[i];
	return NULL;
}

/* One measurement: warm-up, then o.runs runs; the row gets median/min/max. */
static void measure(Driver *d, Row *r, DriveMode mode, double rate, bool latency)
{
	DriveSpec spec = { .mode = mode, .rate = rate, .warm_ms = B.o.warm_ms,
			   .run_ms = B.o.run_ms, .runs = B.o.runs, .latency = latency };
	static DriveOut out;
	double v[MAX_RUNS];
	const Hist *h;

	if (mode == DRIVE_RX)
		set_wire(WIRE_BLAST);
	driver_run(d, &spec, &out);
	if (mode == DRIVE_RX) {
		set_wire(WIRE_SINK);
		g_usleep(20000);
	}
	for (unsigned k = 0; k + 1 < out.nsnap; k++) {
		double secs = (double)(out.snaps[k + 1].t - out.snaps[k].t) / 1e9;

		v[k] = (double)(snap_metric(&out.snaps[k + 1], mode) - snap_metric(&out.snaps[k], mode)) /
		       secs;
	}
	if (getenv("BENCH_DEBUG"))
		for (unsigned k = 0; k < out.nsnap; k++)
			fprintf(stderr, "    snap %u: t %.3f sink %llu inbound %llu resp %llu sent %llu\n", k,
				(double)out.snaps[k].t / 1e9, (unsigned long long)out.snaps[k].sink,
				(unsigned long long)out.snaps[k].inbound,
				(unsigned long long)out.snaps[k].resp_ok,
				(unsigned long long)__atomic_load_n(&B.sh->blast_sent, __ATOMIC_RELAXED));
	qsort(v, out.nsnap - 1, sizeof(double), cmp_double);
	r->min = v[0];
	r->max = v[out.nsnap - 2];
	r->med = v[(out.nsnap - 1) / 2];
	r->errors = out.resp_err + out.write_errors;
	B.total_errors += r->errors;
	if (latency) {
		h = mode == DRIVE_RX ? &out.lat : &B.sh->sink_lat;
		r->p50 = hist_quantile(h, 0.5);
		r->p99 = hist_quantile(h, 0.99);
		r->p999 = hist_quantile(h, 0.999);
	}
	fprintf(stderr, "  %-22s %-6s %5u clients %8u sessions: %12.0f %s (min %.0f max %.0f)%s\n",
		r->name, r->relay, r->clients, r->sessions, r->med, r->unit, r->min, r->max,
		r->errors ? " ERRORS" : "");
}

static void blast_setup(uint32_t n_ids)
{
	B.sh->blast_ids = n_ids;
	B.sh->blast_rate = 0;
	memcpy(B.sh->blast_dgid, B.a_port_gid, 16);
}

static void driver_init(Driver *d)
{
	memset(d, 0, sizeof(*d));
	d->sh = B.sh;
	d->ep = -1;
	memcpy(d->sink_gid, B.sink_gid, 16);
}

/* Connect, register and give @sessions sessions to @clients clients of daemon A. */
static double rss_idle, rss_connected;

static void daemon_clients(Driver *d, unsigned clients, uint32_t sessions)
{
	uint64_t errs = 0, before;

	driver_init(d);
	if (driver_connect(d, B.sock_a, 0, clients, true, B.a_gid, B.a_idx) < 0)
		die("cannot connect the clients");
	if (B.daemon_a > 0 && clients >= 100 && rss_connected == 0) {
		/* per client: the first time this daemon sees this many clients */
		rss_connected = rss_mb(B.daemon_a);
		B.rss_clients = clients;
		B.rss_per_client = (rss_connected - rss_idle) * 1024.0 * 1024.0 / clients;
	}
	before = __atomic_load_n(&B.sh->sink_count, __ATOMIC_RELAXED);
	B.sh->n_ids = 0;
	__atomic_store_n(&B.sh->record_ids, 1, __ATOMIC_RELEASE);
	if (driver_setup_sessions(d, sessions, &errs) < 0 || errs)
		die("session set-up failed");
	sink_wait(before + sessions);
	__atomic_store_n(&B.sh->record_ids, 0, __ATOMIC_RELEASE);
	if (B.sh->n_ids != sessions)
		fprintf(stderr, "rdmacm-mux-bench: the sink saw %u of %u REQs\n", B.sh->n_ids, sessions);
}

static void probe_clients(Driver *d, unsigned clients, uint32_t sessions)
{
	driver_init(d);
	if (driver_connect(d, B.sock_p, 0, clients, true, B.a_gid, B.a_idx) < 0)
		die("cannot connect the clients to the probe");
	for (unsigned i = 0; i < d->n; i++)
		d->conns[i]->n_sess = sessions / clients + (i < sessions % clients ? 1 : 0);
}

static void ratio(Row *r, const Row *probe)
{
	if (probe && probe->med > 0)
		r->ratio = r->med / probe->med;
}

/* Clients sweep: TX, RX and QEMU-style through the daemon and through the probe. */
static void sweep_clients(unsigned clients)
{
	uint32_t sessions = clients > 1000 ? clients : 1000;
	bool qemu = clients <= 100;
	Driver d;
	Row *tx, *rx, *qm = NULL, *ptx, *prx, *pqm = NULL;
	double rss0, rss1;

	fprintf(stderr, "rdmacm-mux-bench: %u clients, %u sessions\n", clients, sessions);
	B.daemon_a = daemon_start("simA", B.sock_a);
	rss0 = rss_mb(B.daemon_a);
	rss_idle = rss0;
	rss_connected = 0;
	daemon_clients(&d, clients, sessions);
	rss1 = rss_mb(B.daemon_a);
	(void)rss1;
	blast_setup(sessions);
	tx = row_new("tx", "daemon", clients, sessions);
	measure(&d, tx, DRIVE_TX, 0, false);
	rx = row_new("rx", "daemon", clients, sessions);
	measure(&d, rx, DRIVE_RX, 0, false);
	if (qemu) {
		qm = row_new("qemu-style", "daemon", clients, sessions);
		measure(&d, qm, DRIVE_QEMU, 0, false);
	}
	driver_close_all(&d);
	g_usleep(50000);
	B.rss_base_mb = rss0;
	stop(&B.daemon_a, SIGTERM);

	B.probe = probe_start();
	probe_clients(&d, clients, sessions);
	ptx = row_new("tx", "probe", clients, sessions);
	measure(&d, ptx, DRIVE_TX, 0, false);
	prx = row_new("rx", "probe", clients, sessions);
	measure(&d, prx, DRIVE_RX, 0, false);
	if (qemu) {
		__atomic_store_n(&B.sh->probe_respond, 1, __ATOMIC_RELEASE);
		pqm = row_new("qemu-style", "probe", clients, sessions);
		measure(&d, pqm, DRIVE_QEMU, 0, false);
		__atomic_store_n(&B.sh->probe_respond, 0, __ATOMIC_RELEASE);
	}
	driver_close_all(&d);
	stop(&B.probe, SIGKILL);
	ratio(tx, ptx);
	ratio(rx, prx);
	if (qm)
		ratio(qm, pqm);
	if (clients == 10) {
		B.tx_peak10 = tx->med;
		B.rx_peak10 = rx->med;
	}
}

/* Sessions sweep at 10 clients: throughput and memory per session. */
static void sweep_sessions(uint32_t sessions)
{
	const Row *ptx = find_row("tx", "probe", 10), *prx = find_row("rx", "probe", 10);
	Driver d;
	Row *tx, *rx;
	double r0, r1;

	fprintf(stderr, "rdmacm-mux-bench: 10 clients, %u sessions\n", sessions);
	B.daemon_a = daemon_start("simA", B.sock_a);
	driver_init(&d);
	if (driver_connect(&d, B.sock_a, 0, 10, true, B.a_gid, B.a_idx) < 0)
		die("cannot connect the clients");
	driver_close_all(&d);
	r0 = rss_mb(B.daemon_a);
	rss_connected = 1; /* the per-client figure comes from the clients sweep */
	daemon_clients(&d, 10, sessions);
	r1 = rss_mb(B.daemon_a);
	if (sessions >= B.rss_sessions) {
		B.rss_sessions = sessions;
		B.rss_per_session = (r1 - r0) * 1024.0 * 1024.0 / sessions;
		B.rss_1m_mb = r1;
	}
	blast_setup(sessions);
	tx = row_new("tx", "daemon", 10, sessions);
	snprintf(tx->name, sizeof(tx->name), "tx-sessions");
	measure(&d, tx, DRIVE_TX, 0, false);
	rx = row_new("rx-sessions", "daemon", 10, sessions);
	measure(&d, rx, DRIVE_RX, 0, false);
	ratio(tx, ptx);
	ratio(rx, prx);
	driver_close_all(&d);
	stop(&B.daemon_a, SIGTERM);
}

/* Latency at light load and at half the peak, daemon and probe. */
static void latency_rows(void)
{
	const double light = 1000;
	double half_tx = B.tx_peak10 / 2, half_rx = B.rx_peak10 / 2;
	const char *relays[] = { "daemon", "probe" };

	for (int k = 0; k < 2; k++) {
		bool dmn = k == 0;
		Driver d;
		Row *r;

		fprintf(stderr, "rdmacm-mux-bench: latency through the %s\n", relays[k]);
		if (dmn) {
			B.daemon_a = daemon_start("simA", B.sock_a);
			rss_connected = 1;
			daemon_clients(&d, 10, 1000);
		} else {
			B.probe = probe_start();
			probe_clients(&d, 10, 1000);
		}
		blast_setup(1000);
		r = row_new("latency-tx-light", relays[k], 10, 1000);
		measure(&d, r, DRIVE_TX_PACED, light, true);
		r = row_new("latency-tx-half", relays[k], 10, 1000);
		measure(&d, r, DRIVE_TX_PACED, half_tx, true);
		B.sh->blast_rate = light;
		r = row_new("latency-rx-light", relays[k], 10, 1000);
		measure(&d, r, DRIVE_RX, 0, true);
		B.sh->blast_rate = half_rx;
		r = row_new("latency-rx-half", relays[k], 10, 1000);
		measure(&d, r, DRIVE_RX, 0, true);
		B.sh->blast_rate = 0;
		driver_close_all(&d);
		if (dmn)
			stop(&B.daemon_a, SIGTERM);
		else
			stop(&B.probe, SIGKILL);
	}
}

/* Ten clients read at full rate, an eleventh never reads (RX). */
static void slow_reader_rows(void)
{
	Driver d;
	Row *base, *slow, *lbase, *lslow;

	fprintf(stderr, "rdmacm-mux-bench: slow reader\n");
	B.daemon_a = daemon_start("simA", B.sock_a);
	rss_connected = 1;
	daemon_clients(&d, 11, 1100);
	blast_setup(1100);
	base = row_new("slow-reader-off", "daemon", 10, 1100);
	measure(&d, base, DRIVE_RX, 0, false);
	B.sh->blast_rate = B.rx_peak10 / 2;
	lbase = row_new("slow-reader-off-lat", "daemon", 10, 1100);
	measure(&d, lbase, DRIVE_RX, 0, true);
	d.conns[10]->slow = true;
	B.sh->blast_rate = 0;
	slow = row_new("slow-reader-on", "daemon", 10, 1100);
	measure(&d, slow, DRIVE_RX, 0, false);
	B.sh->blast_rate = B.rx_peak10 / 2;
	lslow = row_new("slow-reader-on-lat", "daemon", 10, 1100);
	measure(&d, lslow, DRIVE_RX, 0, true);
	B.sh->blast_rate = 0;
	if (base->med > 0)
		slow->ratio = slow->med / base->med;
	snprintf(slow->note, sizeof(slow->note), "ratio: to the same 10 clients, all reading");
	driver_close_all(&d);
	stop(&B.daemon_a, SIGTERM);
}

/* REQ/REP/RTU/DREQ/DREP across two daemons. Ends the wire process. */
static void handshake_rows(const unsigned *pairs, unsigned n)
{
	set_wire(WIRE_EXIT);
	stop(&B.wire, 0);
	fprintf(stderr, "rdmacm-mux-bench: handshakes across two daemons\n");
	B.daemon_a = daemon_start("simA", B.sock_a);
	B.daemon_b = daemon_start("simB", B.sock_b);
	for (unsigned i = 0; i < n; i++) {
		Driver d;
		Row *r;

		driver_init(&d);
		if (driver_connect(&d, B.sock_a, 0, pairs[i], true, B.a_gid, B.a_idx) < 0 ||
		    driver_connect(&d, B.sock_b, 0, pairs[i], true, B.b_gid, B.b_idx) < 0)
			die("cannot connect the handshake clients");
		d.n_a = pairs[i];
		r = row_new("handshake", "daemon", pairs[i] * 2, 0);
		snprintf(r->unit, sizeof(r->unit), "cycles/s");
		snprintf(r->note, sizeof(r->note), "%u client pairs, REQ/REP/RTU/DREQ/DREP", pairs[i]);
		measure(&d, r, DRIVE_HANDSHAKE, 0, false);
		driver_close_all(&d);
	}
	stop(&B.daemon_a, SIGTERM);
	stop(&B.daemon_b, SIGTERM);
}

/* ---- output ---- */

static void print_table(FILE *f)
{
	fprintf(f, "\n%-20s %-6s %7s %8s %12s %12s %12s %6s %9s %9s %9s %s\n", "row", "relay",
		"clients", "sessions", "median", "min", "max", "ratio", "p50 us", "p99 us",
		"p99.9 us", "unit");
	for (unsigned i = 0; i < B.nrows; i++) {
		const Row *r = &B.rows[i];
		char ratio_s[16] = "-", l50[16] = "-", l99[16] = "-", l999[16] = "-";

		if (r->ratio > 0)
			snprintf(ratio_s, sizeof(ratio_s), "%.2f", r->ratio);
		if (r->p50 || r->p99) {
			snprintf(l50, sizeof(l50), "%.1f", (double)r->p50 / 1e3);
			snprintf(l99, sizeof(l99), "%.1f", (double)r->p99 / 1e3);
			snprintf(l999, sizeof(l999), "%.1f", (double)r->p999 / 1e3);
		}
		fprintf(f, "%-20s %-6s %7u %8u %12.0f %12.0f %12.0f %6s %9s %9s %9s %s%s%s%s\n",
			r->name, r->relay, r->clients, r->sessions, r->med, r->min, r->max, ratio_s, l50,
			l99, l999, r->unit, r->errors ? "  ERRORS " : "", r->errors ? "!" : "",
			r->note[0] ? "" : "");
	}
	fprintf(f, "\nmemory: daemon RSS %.1f MiB idle; %.0f bytes per client (%u clients); "
		   "%.1f bytes per live session and %.1f MiB total at %u sessions\n",
		B.rss_base_mb, B.rss_per_client, B.rss_clients, B.rss_per_session, B.rss_1m_mb,
		B.rss_sessions);
	for (unsigned i = 0; i < B.nrows; i++)
		if (B.rows[i].note[0])
			fprintf(f, "note: %s/%u: %s\n", B.rows[i].name, B.rows[i].clients,
				B.rows[i].note);
	fprintf(f, "errors: %llu\n", (unsigned long long)B.total_errors);
}

static void write_json(const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f)
		die("cannot write the JSON file");
	fprintf(f, "{\n  \"bench\": \"rdmacm-mux-bench\",\n  \"mode\": \"%s\",\n"
		   "  \"runs\": %u,\n  \"run_ms\": %u,\n  \"warm_ms\": %u,\n  \"seed\": %llu,\n"
		   "  \"rows\": [\n",
		B.o.quick ? "quick" : "full", B.o.runs, B.o.run_ms, B.o.warm_ms,
		(unsigned long long)BENCH_SEED);
	for (unsigned i = 0; i < B.nrows; i++) {
		const Row *r = &B.rows[i];

		fprintf(f, "    {\"row\": \"%s\", \"relay\": \"%s\", \"clients\": %u, \"sessions\": %u, "
			   "\"unit\": \"%s\", \"median\": %.1f, \"min\": %.1f, \"max\": %.1f, "
			   "\"ratio\": %.3f, \"p50_ns\": %llu, \"p99_ns\": %llu, \"p999_ns\": %llu, "
			   "\"errors\": %llu}%s\n",
			r->name, r->relay, r->clients, r->sessions, r->unit, r->med, r->min, r->max,
			r->ratio, (unsigned long long)r->p50, (unsigned long long)r->p99,
			(unsigned long long)r->p999, (unsigned long long)r->errors,
			i + 1 < B.nrows ? "," : "");
	}
	fprintf(f, "  ],\n  \"memory\": {\"idle_rss_mib\": %.2f, \"bytes_per_client\": %.0f, "
		   "\"clients\": %u, \"bytes_per_session\": %.1f, \"rss_mib_at_sessions\": %.1f, "
		   "\"sessions\": %u},\n  \"errors\": %llu\n}\n",
		B.rss_base_mb, B.rss_per_client, B.rss_clients, B.rss_per_session, B.rss_1m_mb,
		B.rss_sessions, (unsigned long long)B.total_errors);
	fclose(f);
}

static void write_plot(const char *path)
{
	g_autofree char *data = g_strdup_printf("%s/plot.dat", B.dir);
	g_autofree char *script = g_strdup_printf("%s/plot.gp", B.dir);
	FILE *f = fopen(data, "w");
	bool png = g_str_has_suffix(path, ".png");
	int status;

	if (!f)
		die("cannot write the plot data");
	fprintf(f, "# clients tx rx probe_tx probe_rx qemu probe_qemu\n");
	for (unsigned i = 0; i < B.nrows; i++) {
		const Row *r = &B.rows[i], *p;

		if (strcmp(r->name, "tx") || strcmp(r->relay, "daemon"))
			continue;
		fprintf(f, "%u", r->clients);
		fprintf(f, " %.0f", r->med);
		p = find_row("rx", "daemon", r->clients);
		fprintf(f, " %.0f", p ? p->med : 0);
		p = find_row("tx", "probe", r->clients);
		fprintf(f, " %.0f", p ? p->med : 0);
		p = find_row("rx", "probe", r->clients);
		fprintf(f, " %.0f", p ? p->med : 0);
		p = find_row("qemu-style", "daemon", r->clients);
		fprintf(f, p ? " %.0f" : " NaN", p ? p->med : 0.0);
		p = find_row("qemu-style", "probe", r->clients);
		fprintf(f, p ? " %.0f\n" : " NaN\n", p ? p->med : 0.0);
	}
	fprintf(f, "\n\n# sessions tx rx\n");
	for (unsigned i = 0; i < B.nrows; i++) {
		const Row *r = &B.rows[i], *p;

		if (strcmp(r->name, "tx-sessions"))
			continue;
		p = find_row("rx-sessions", "daemon", 10);
		for (unsigned j = 0; j < B.nrows; j++)
			if (!strcmp(B.rows[j].name, "rx-sessions") && B.rows[j].sessions == r->sessions)
				p = &B.rows[j];
		fprintf(f, "%u %.0f %.0f\n", r->sessions, r->med, p ? p->med : 0);
	}
	fclose(f);
	f = fopen(script, "w");
	if (!f)
		die("cannot write the plot script");
	fprintf(f, "set terminal %s size 1100,450\nset output '%s'\n",
		png ? "png" : "svg dynamic", path);
	fprintf(f, "set multiplot layout 1,2 title 'rdmacm-mux on the simulated fabric (median of %u runs)'\n",
		B.o.runs);
	fprintf(f, "set logscale x\nset grid\nset key left bottom\nset ylabel 'MADs/s'\n"
		   "set format y '%%.0s%%c'\nset yrange [0:*]\n");
	fprintf(f, "set xlabel 'clients (1k sessions)'\n"
		   "plot '%s' index 0 using 1:2 with linespoints title 'TX daemon', "
		   "'' index 0 using 1:4 with linespoints dt 2 title 'TX probe', "
		   "'' index 0 using 1:3 with linespoints title 'RX daemon', "
		   "'' index 0 using 1:5 with linespoints dt 2 title 'RX probe', "
		   "'' index 0 using 1:6 with linespoints title 'QEMU-style daemon', "
		   "'' index 0 using 1:7 with linespoints dt 2 title 'QEMU-style probe'\n",
		data);
	fprintf(f, "set xlabel 'live sessions (10 clients)'\n"
		   "plot '%s' index 1 using 1:2 with linespoints title 'TX daemon', "
		   "'' index 1 using 1:3 with linespoints title 'RX daemon'\n"
		   "unset multiplot\n",
		data);
	fclose(f);
	{
		g_autofree char *cmd = g_strdup_printf("gnuplot '%s'", script);

		status = system(cmd);
	}
	if (status != 0)
		fprintf(stderr, "rdmacm-mux-bench: gnuplot failed (install gnuplot-nox); no plot\n");
	else
		fprintf(stderr, "rdmacm-mux-bench: plot written to %s\n", path);
}

/* ---- main ---- */

/* 1000 clients need 1000 fds here and in the daemon: raise the soft limit to
 * the hard one, and the hard one too when we may (root). */
static void raise_nofile(rlim_t want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_max < want) {
		struct rlimit up = { want, want };

		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			return;
	}
	rl.rlim_cur = rl.rlim_max;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < want)
		fprintf(stderr, "rdmacm-mux-bench: RLIMIT_NOFILE is %llu, below the %llu that 1000 "
				"clients need; raise it (ulimit -Hn) or expect errors\n",
			(unsigned long long)rl.rlim_cur, (unsigned long long)want);
}

static void usage(void)
{
	fprintf(stderr, "usage: rdmacm-mux-bench [--quick] [--json FILE] [--plot FILE.svg|png]\n"
			"                        [--daemon PATH] [--sim-lib PATH] [--runs N]\n"
			"                        [--run-ms MS] [--check]\n");
	exit(2);
}

static void parse(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' },   { "json", required_argument, NULL, 'j' },
		{ "plot", required_argument, NULL, 'p' }, { "daemon", required_argument, NULL, 'd' },
		{ "sim-lib", required_argument, NULL, 'l' }, { "runs", required_argument, NULL, 'r' },
		{ "run-ms", required_argument, NULL, 'm' }, { "check", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },	{ NULL, 0, NULL, 0 },
	};
	int c;

	B.o.daemon = getenv("RDMACM_MUX_BIN");
	B.o.sim_lib = getenv("UMAD_SIM_LIB");
	B.o.runs = 5;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'q': B.o.quick = true; break;
		case 'j': B.o.json = optarg; break;
		case 'p': B.o.plot = optarg; break;
		case 'd': B.o.daemon = optarg; break;
		case 'l': B.o.sim_lib = optarg; break;
		case 'r': B.o.runs = (unsigned)atoi(optarg); break;
		case 'm': B.o.run_ms = (unsigned)atoi(optarg); break;
		case 'c': B.o.check = true; break;
		default: usage();
		}
	}
	if (!B.o.daemon || !B.o.sim_lib) {
		fprintf(stderr, "rdmacm-mux-bench: give --daemon and --sim-lib (or RDMACM_MUX_BIN "
				"and UMAD_SIM_LIB)\n");
		exit(2);
	}
	if (B.o.runs < 5 || B.o.runs > MAX_RUNS)
		die("--runs must be 5..16");
	if (!B.o.run_ms)
		B.o.run_ms = B.o.quick ? 100 : 1000;
	B.o.warm_ms = B.o.quick ? 150 : 500;
}

/* The helpers and the daemons need the simulator preloaded: re-exec with it. */
static void ensure_preload(char **argv)
{
	const char *pre = getenv("LD_PRELOAD");
	g_autofree char *abs = g_canonicalize_filename(B.o.sim_lib, NULL);

	if (pre && strstr(pre, "umad-sim"))
		return;
	if (pre && *pre) {
		g_autofree char *v = g_strdup_printf("%s:%s", pre, abs);
		setenv("LD_PRELOAD", v, 1);
	} else {
		setenv("LD_PRELOAD", abs, 1);
	}
	execv("/proc/self/exe", argv);
	die("cannot re-exec with the simulator preloaded");
}

int main(int argc, char **argv)
{
	static const unsigned full_clients[] = { 1, 10, 100, 1000 }, quick_clients[] = { 1, 10, 100 };
	static const uint32_t full_sessions[] = { 100000, 1000000 }, quick_sessions[] = { 100000 };
	static const unsigned full_pairs[] = { 1, 10, 100 }, quick_pairs[] = { 1, 10 };
	const unsigned *cl;
	uint64_t t_start = now_ns();
	unsigned ncl;

	parse(argc, argv);
	ensure_preload(argv);
	cl = B.o.quick ? quick_clients : full_clients;
	ncl = B.o.quick ? G_N_ELEMENTS(quick_clients) : G_N_ELEMENTS(full_clients);
	signal(SIGPIPE, SIG_IGN);
	raise_nofile(4 * 1000 + 256);

	B.dir = g_dir_make_tmp("rdmacm-mux-bench-XXXXXX", NULL);
	if (!B.dir)
		die("cannot make a temp dir");
	B.fabric = g_strdup_printf("%s/fabric", B.dir);
	B.sock_a = g_strdup_printf("%s/mux-simA", B.dir);
	B.sock_b = g_strdup_printf("%s/mux-simB", B.dir);
	B.sock_p = g_strdup_printf("%s/probe", B.dir);
	mkdir(B.fabric, 0755);
	make_fabric();
	{
		g_autofree char *sys = g_strdup_printf("%s/sys", B.fabric);
		setenv("UMAD_SIM_FABRIC", B.fabric, 1);
		setenv("SYSFS_PATH", sys, 1);
		unsetenv("UMAD_SIM_FAULTS");
	}

	B.sh = mmap(NULL, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (B.sh == MAP_FAILED)
		die("mmap");
	B.ctl = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	B.wire = fork();
	if (B.wire == 0)
		wire_main(B.sh, B.ctl);
	wait_flag(&B.sh->wire_ready, "the wire process did not start");

	if (getenv("BENCH_ONLY_CLIENTS")) {
		sweep_clients((unsigned)atoi(getenv("BENCH_ONLY_CLIENTS")));
		print_table(stdout);
		return 0;
	}
	for (unsigned i = 0; i < ncl; i++)
		sweep_clients(cl[i]);
	if (B.o.quick) {
		for (unsigned i = 0; i < G_N_ELEMENTS(quick_sessions); i++)
			sweep_sessions(quick_sessions[i]);
	} else {
		for (unsigned i = 0; i < G_N_ELEMENTS(full_sessions); i++)
			sweep_sessions(full_sessions[i]);
	}
	latency_rows();
	slow_reader_rows();
	if (B.o.quick)
		handshake_rows(quick_pairs, G_N_ELEMENTS(quick_pairs));
	else
		handshake_rows(full_pairs, G_N_ELEMENTS(full_pairs));

	print_table(stdout);
	printf("elapsed: %.1f s\n", (double)(now_ns() - t_start) / 1e9);
	if (B.o.json)
		write_json(B.o.json);
	if (B.o.plot)
		write_plot(B.o.plot);
	{
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", B.dir);
		if (!getenv("BENCH_KEEP") && system(cmd) != 0)
			fprintf(stderr, "rdmacm-mux-bench: cannot remove %s\n", B.dir);
	}
	if (B.o.check) {
		for (unsigned i = 0; i < B.nrows; i++)
			if (!(B.rows[i].med > 0)) {
				fprintf(stderr, "rdmacm-mux-bench: check: row %s/%s/%u is zero\n",
					B.rows[i].name, B.rows[i].relay, B.rows[i].clients);
				return 1;
			}
		if (B.total_errors || !(B.rss_per_session > 0)) {
			fprintf(stderr, "rdmacm-mux-bench: check: errors or no memory figures\n");
			return 1;
		}
	}
	return 0;
}
