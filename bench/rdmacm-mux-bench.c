/* SPDX-License-Identifier: MIT */
/*
 * Owns rdmacm-mux-bench's orchestration: the simulated fabric, starting and
 * stopping the daemons and the helpers, the sequence of measurements, and
 * the table, JSON and plot it prints. See bench/README.md for the method.
 *
 *   rdmacm-mux-bench [--quick] [--json FILE] [--plot FILE] [--daemon PATH]
 *                    [--sim-lib PATH] [--runs N] [--run-ms MS] [--check]
 *                    [--cost] [--cost-mads N] [--only GROUP,...] [--verbose]
 *                    [--unreachable-delay-ms MS] [--peer PATH|auto|cached]
 *                    [--syscalls] [--shared-session]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
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
#include "syscount.h"

#define A_CLIENT_GIDS 1010  /* simA: fe80::a, ::ffff:10.0.1.1, then clients at 2.. */
#define B_CLIENT_GIDS 120   /* simB: fe80::b, ::ffff:10.0.2.1 (the sink), then clients */
#define MAX_ROWS 128
/* Clients whose GID index is below 256 (simA: 2..255) can send; see README. */
#define MAX_SENDERS (UMAD_GID_INDEXES - 2)
#define MAX_COST_ROWS 16
#define MAX_SYS_ROWS 16

typedef struct Opts {
	bool quick, check, cost, verbose;
	bool no_pin;	       /* --no-pin: let the scheduler place every process */
	bool shared_session;   /* --shared-session: relays stay in the bench's session */
	const char *json, *plot, *daemon, *sim_lib;
	unsigned runs, run_ms, warm_ms;
	unsigned blocks;       /* --blocks: a row's runs come in this many blocks */
	const char *only;      /* --only: a comma-separated list of row groups */
	unsigned cost_mads;    /* --cost-mads: MADs per callgrind count */
	unsigned unreach_ms;   /* --unreachable-delay-ms: the stall of a send to a missing GID */
	const char *peer;      /* --peer: QEMU's rdmacm-mux, "auto" (build it) or "cached" */
	bool syscalls;	       /* --syscalls: system calls and wake-ups per MAD */
} Opts;

/*
 * The relays a clients sweep compares: our daemon, the limit probe, and
 * with --peer QEMU's own contrib/rdmacm-mux as built (it logs every MAD
 * through syslog) and with a no-op syslog() preloaded (its best case).
 */
typedef enum RelayKind {
	RELAY_DAEMON,
	RELAY_PROBE,
	RELAY_QEMU,
	RELAY_QEMU_NOLOG,
	RELAY_KINDS
} RelayKind;

static const char *const relay_names[RELAY_KINDS] = { "daemon", "probe", "qemu", "qemu-nolog" };

/* --cost: instructions (callgrind Ir) per MAD over a fixed number of MADs. */
typedef struct CostRow {
	char name[24];
	char relay[12];
	unsigned clients;
	uint32_t sessions;
	uint64_t mads;	     /* MADs counted */
	double ir, d1, ll;   /* per MAD: instructions, L1 data misses, LL misses */
	double ratio;	     /* Ir ratio: reference Ir / this Ir (1 = as cheap) */
	char vs[24];	     /* what the ratio is against */
} CostRow;

/* --syscalls: system calls and wake-ups per MAD of one relay in one pattern. */
typedef struct SysRow {
	char name[24];
	char relay[12];
	unsigned clients;
	uint64_t mads;
	SysResult r;
	/* the bench's side of the same MADs: the client driver (this
	 * process's main thread) and the wire process, CPU and run-queue us */
	double drv_us, drv_runq_us, wire_us, wire_runq_us;
} SysRow;

typedef struct Row {
	char name[48];
	char relay[12];	   /* relay_names[] */
	char unit[12];	   /* MADs/s, cycles/s */
	unsigned clients;
	uint32_t sessions;
	double med, min, max;
	double v[MAX_RUNS]; /* every run's rate, over all blocks */
	unsigned nv;
	double ratio;	   /* med / the probe's, 0 when there is none */
	double vs_peer[2]; /* med / QEMU's mux as built, and syslog-free (--peer) */
	uint64_t p50, p99, p999; /* latency rows (ns) */
	Hist *lat_acc;	   /* a latency row measured in blocks: all blocks' samples */
	uint64_t errors;
	char note[96];
} Row;

static struct {
	Opts o;
	char *dir, *fabric, *sock_a, *sock_b, *sock_p;
	Shared *sh;
	int ctl;
	pid_t wire, probe, daemon_a, daemon_b;
	pid_t starting; /* a relay forked but not serving yet */
	char *peer_bin;	/* --peer: QEMU's rdmacm-mux, resolved */
	uint8_t a_gid[A_CLIENT_GIDS][16], b_gid[B_CLIENT_GIDS][16], sink_gid[16], a_port_gid[16];
	int a_idx[A_CLIENT_GIDS], b_idx[B_CLIENT_GIDS];
	Row rows[MAX_ROWS];
	bool pinned;
	cpu_set_t relay_cpus, other_cpus; /* --pin (default): see pin_init() */
	unsigned nrows;
	uint64_t total_errors;
	/* memory */
	double rss_per_client, rss_per_session, rss_1m_mb, rss_base_mb;
	unsigned rss_clients;
	uint32_t rss_sessions;
	bool sessions_swept;
	double tx_peak10;
	double rx_peak10;
	char *exe, *shared_path;
	CostRow cost[MAX_COST_ROWS];
	unsigned ncost;
	char *cost_dir;
	SysRow sys[MAX_SYS_ROWS];
	unsigned nsys;
	double load_before;
} B = { .ctl = -1 };

static double load_now(void)
{
	double l[1] = { 0 };

	return getloadavg(l, 1) == 1 ? l[0] : 0;
}

static void cleanup_children(void)
{
	pid_t *pids[] = { &B.wire, &B.probe, &B.daemon_a, &B.daemon_b, &B.starting };

	for (unsigned i = 0; i < G_N_ELEMENTS(pids); i++)
		if (*pids[i] > 0) {
			kill(*pids[i], SIGKILL);
			waitpid(*pids[i], NULL, 0);
			*pids[i] = 0;
		}
	if (B.dir && !getenv("BENCH_KEEP")) {
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", B.dir);

		if (system(cmd) != 0)
			fprintf(stderr, "rdmacm-mux-bench: cannot remove %s\n", B.dir);
		g_clear_pointer(&B.dir, g_free);
	}
}

/* Never leave a helper or a daemon behind (they hold the caller's pipes). */
static void die(const char *what)
{
	fprintf(stderr, "rdmacm-mux-bench: %s\n", what);
	cleanup_children();
	exit(1);
}

/* SIGINT, SIGTERM (meson's timeout), SIGHUP: the children go too. */
static void on_fatal_signal(int sig)
{
	static const char msg[] = "rdmacm-mux-bench: stopped by a signal\n";

	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing to do about it */
	}
	cleanup_children();
	signal(sig, SIG_DFL);
	raise(sig);
}

static pid_t bench_pid;

/*
 * In a freshly forked child: die with the bench, whatever kills it (even
 * SIGKILL, which leaves no handler to run). Kept across exec, so a daemon
 * under test goes too.
 */
static void child_follow_parent(void)
{
	/* the handlers are the bench's: a child must not clean up its siblings */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != bench_pid)
		_exit(1);
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

/* Client GIDs ::ffff:10.@net.x.y, 250 per /24, in table order after the
 * port's two (so client i sits at GID index i + 2). */
static void add_client_gids(GPtrArray *table, uint8_t (*gids)[16], int *idx, unsigned n,
			    unsigned net)
{
	char text[64];

	for (unsigned i = 0; i < n; i++) {
		gid_v4(gids[i], 10, net, i / 250, i % 250 + 1);
		sim_gid_format(gids[i], text);
		g_ptr_array_add(table, g_strdup(text));
		idx[i] = (int)i + 2;
	}
}

static void make_fabric(void)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(sim_fabric) f = sim_fabric_new();
	g_autoptr(GPtrArray) ga = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GPtrArray) gb = g_ptr_array_new_with_free_func(g_free);

	/* simB first: the simulator finds a destination GID by a linear scan over
	 * the CAs in order, and the sink's GID should cost the same few compares
	 * for everybody (see README: fabric costs). */
	g_ptr_array_add(gb, g_strdup("fe80::b"));
	g_ptr_array_add(gb, g_strdup("::ffff:10.0.2.1"));
	gid_v4(B.sink_gid, 10, 0, 2, 1);
	add_client_gids(gb, B.b_gid, B.b_idx, B_CLIENT_GIDS, 2);
	g_ptr_array_add(ga, g_strdup("fe80::a"));
	g_ptr_array_add(ga, g_strdup("::ffff:10.0.1.1"));
	gid_v4(B.a_port_gid, 10, 0, 1, 1);
	add_client_gids(ga, B.a_gid, B.a_idx, A_CLIENT_GIDS, 1);
	if (sim_fabric_add_roce_ca(f, "simB", (const char *const *)gb->pdata, gb->len, 128) < 0 ||
	    sim_fabric_add_roce_ca(f, "simA", (const char *const *)ga->pdata, ga->len, 1024) < 0)
		die("cannot build the fabric model");
	/* a send to a GID no port has stalls in write(), as the kernel's
	 * neighbour resolution does; only the unreachable rows send such */
	f->unreachable_delay_ms = B.o.unreach_ms;
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

/*
 * The valgrind command line of a --cost run: callgrind with its cache model,
 * dumps named after @tag; the caller appends the program and its arguments.
 */
static unsigned vg_argv(const char **argv, const char *tag, char **out_file)
{
	unsigned n = 0;

	*out_file = g_strdup_printf("--callgrind-out-file=%s/cg-%s.%%p", B.cost_dir, tag);
	argv[n++] = "valgrind";
	argv[n++] = "--tool=callgrind";
	argv[n++] = "--cache-sim=yes";
	/* This VM reports a 480 MiB L3, which would hide every miss: model a
	 * 32 MiB last level, what a server core shares. */
	argv[n++] = "--LL=33554432,16,64";
	argv[n++] = "--vgdb=yes";
	argv[n++] = "--quiet";
	argv[n++] = *out_file;
	return n;
}

/* Wait until @sock serves, or die if @pid exited; valgrind starts slowly.
 * Either way no child is left running. */
static void wait_serving(pid_t pid, const char *sock, const char *what, const char *log)
{
	B.starting = pid;
	for (int i = 0; i < 6000; i++) {
		int status;

		if (socket_serves(sock)) {
			B.starting = 0;
			return;
		}
		if (waitpid(pid, &status, WNOHANG) == pid) {
			g_autofree char *msg = g_strdup_printf("%s exited at start%s%s", what,
							       log ? ", see " : "", log ? log : "");

			B.starting = 0;
			die(msg);
		}
		g_usleep(5000);
	}
	die("a relay did not start serving its socket");
}

/*
 * Three busy processes (client driver, relay, wire) share this machine's
 * CPUs. Left to the scheduler, where they land changes from one relay
 * start to the next, and RX rates with it (bimodal: ~0.8M or ~1.3M
 * MADs/s on 2 CPUs, for the daemon and the probe alike). So the relay
 * under test (daemon A, the probe) gets the last CPU we may use, the
 * rest get the others: the same placement for every run of both relays.
 */
static void pin_init(void)
{
	cpu_set_t all;
	int last = -1;

	if (B.o.no_pin || sched_getaffinity(0, sizeof(all), &all) < 0 || CPU_COUNT(&all) < 2)
		return;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all))
			last = c;
	CPU_ZERO(&B.relay_cpus);
	CPU_SET(last, &B.relay_cpus);
	B.other_cpus = all;
	CPU_CLR(last, &B.other_cpus);
	if (sched_setaffinity(0, sizeof(B.other_cpus), &B.other_cpus) == 0)
		B.pinned = true;
}

/* In a freshly forked relay under test: move it to the relay's CPU. */
static void pin_relay(void)
{
	if (B.pinned)
		(void)sched_setaffinity(0, sizeof(B.relay_cpus), &B.relay_cpus);
}

/*
 * In a freshly forked relay under test: a session of its own, as a service
 * has (systemd starts each in its own session, and so in its own group of
 * the scheduler's, cgroup or autogroup). Left in the bench's session, the
 * relay shared one autogroup with the busy client driver and wire process:
 * the group's weight goes to each CPU by its load there, so a relay that
 * sleeps between requests got a sliver of it on its own CPU and waited
 * long to run when woken, the more so the fewer of its threads kept that
 * CPU busy (see README, Sessions). --shared-session keeps the old way.
 */
static void own_session(void)
{
	if (!B.o.shared_session)
		(void)setsid();
}

/*
 * Start a relay that takes rdmacm-mux's command line on @ca, serving @sock:
 * our daemon, or (@kind RELAY_QEMU, RELAY_QEMU_NOLOG) QEMU's mux through
 * its adapter, which translates the options and execs it.
 * @valgrind: under callgrind (--cost), dumps tagged @valgrind.
 */
static pid_t relay_start_vg(RelayKind kind, const char *ca, const char *sock,
			    const char *valgrind)
{
	g_autofree char *log = g_strdup_printf("%s/daemon-%s.log", B.dir, ca);
	const char *prog = kind == RELAY_DAEMON ? B.o.daemon
						: BENCH_PEER_DIR "/qemu-rdmacm-mux-adapter.sh";
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		const char *argv[32];
		char *vg_out = NULL;
		unsigned n = valgrind ? vg_argv(argv, valgrind, &vg_out) : 0;
		const char *args[] = { prog, "-d", ca, "--socket", sock,
				       "--max-clients", "4096", "--max-sessions", "16777216",
				       "--handshake-timeout", "86400000", "--closing-timeout", "2000",
				       "--log-level", "warning", NULL };

		for (unsigned i = 0; i < G_N_ELEMENTS(args); i++)
			argv[n++] = args[i];
		child_follow_parent();
		if (!strcmp(ca, "simA")) {
			pin_relay();
			own_session();
		}
		dup2(fd, 1);
		dup2(fd, 2);
		if (kind != RELAY_DAEMON) {
			setenv("RDMACM_MUX_PEER_BIN", B.peer_bin, 1);
			if (kind == RELAY_QEMU_NOLOG)
				setenv("RDMACM_MUX_PEER_NOSYSLOG", BENCH_NOSYSLOG_LIB, 1);
			else
				unsetenv("RDMACM_MUX_PEER_NOSYSLOG");
		}
		if (valgrind)
			execvp("valgrind", (char **)argv);
		else
			execv(prog, (char **)argv);
		_exit(127);
	}
	wait_serving(pid, sock, prog, log);
	return pid;
}

static pid_t daemon_start_vg(const char *ca, const char *sock, const char *valgrind)
{
	return relay_start_vg(RELAY_DAEMON, ca, sock, valgrind);
}

static pid_t daemon_start(const char *ca, const char *sock)
{
	return daemon_start_vg(ca, sock, NULL);
}

/* The daemon's own counters (SIGUSR1 dumps them into its log). */
typedef struct DaemonCounters {
	uint64_t created, live, tx_refused, rx_dropped; /* rx_dropped: no-session only */
} DaemonCounters;

static void daemon_counters(pid_t pid, const char *ca, DaemonCounters *k)
{
	g_autofree char *log = g_strdup_printf("%s/daemon-%s.log", B.dir, ca);
	g_autofree char *text = NULL;
	const char *p, *last = NULL;

	memset(k, 0, sizeof(*k));
	kill(pid, SIGUSR1);
	for (int i = 0; i < 200; i++) {
		g_clear_pointer(&text, g_free);
		g_usleep(10000);
		if (!g_file_get_contents(log, &text, NULL, NULL))
			continue;
		/* the last dump: from its "counters for" line on */
		for (p = text; (p = strstr(p, "counters for")); p++)
			last = p;
		if (last && strstr(last, "sessions created"))
			break;
		last = NULL;
	}
	if (!last)
		return;
	for (p = last; (p = strstr(p, "tx refused, ")); p++)
		k->tx_refused += g_ascii_strtoull(p + 12 + strcspn(p + 12, "0123456789"), NULL, 10);
	/* only the drops that say a session was not found (queue-full is the
	 * driver being slow to read, not a lookup failure) */
	for (p = last; (p = strstr(p, "rx dropped, no-session")); p++)
		k->rx_dropped += g_ascii_strtoull(p + 22, NULL, 10);
	if ((p = strstr(last, "sessions created ")))
		k->created = g_ascii_strtoull(p + 17, NULL, 10);
	if ((p = strstr(last, " live ")))
		k->live = g_ascii_strtoull(p + 6, NULL, 10);
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

/*
 * Stop daemon A, or QEMU's mux in its place: that one leaves its socket and
 * the adapter's link to it behind, which our daemon would refuse to replace.
 */
static void relay_stop(RelayKind kind)
{
	stop(&B.daemon_a, SIGTERM);
	if (kind != RELAY_DAEMON) {
		g_autofree char *target = g_file_read_link(B.sock_a, NULL);

		if (target) {
			g_autofree char *dir = g_path_get_dirname(B.sock_a);
			g_autofree char *path = g_build_filename(dir, target, NULL);

			unlink(path);
		}
		unlink(B.sock_a);
	}
}

/* @valgrind: exec the probe under callgrind (--cost), dumps tagged @valgrind. */
static pid_t probe_start_vg(const char *valgrind)
{
	pid_t pid;

	__atomic_store_n(&B.sh->probe_ready, 0, __ATOMIC_RELEASE);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		child_follow_parent();
		pin_relay();
		own_session();
	}
	if (pid == 0 && !valgrind)
		probe_main(B.sh, B.ctl, B.sock_p);
	if (pid == 0) {
		const char *argv[32];
		char *vg_out = NULL;
		unsigned n = vg_argv(argv, valgrind, &vg_out);

		argv[n++] = B.exe;
		argv[n++] = "--probe-serve";
		argv[n++] = B.sock_p;
		argv[n++] = "--shared";
		argv[n++] = B.shared_path;
		argv[n++] = NULL;
		execvp("valgrind", (char **)argv);
		_exit(127);
	}
	/* not by connecting: the probe would count that connection as a client */
	B.starting = pid;
	for (int i = 0; valgrind && i < 6000 && !__atomic_load_n(&B.sh->probe_ready, __ATOMIC_ACQUIRE);
	     i++)
		g_usleep(5000);
	wait_flag(&B.sh->probe_ready, "the probe did not start");
	B.starting = 0;
	return pid;
}

static pid_t probe_start(void)
{
	return probe_start_vg(NULL);
}

/* Stop the probe, and say how many inbound MADs it dropped: it has no
 * queue beyond one write's worth per client (the daemon's is deeper), so
 * a blaster faster than the driver reads costs it MADs, which its RX row
 * then lacks. (Responses it never drops: it reads no more requests than
 * it has room to answer.) */
static void probe_stop(int sig)
{
	uint64_t dropped;

	stop(&B.probe, sig);
	dropped = __atomic_exchange_n(&B.sh->probe_rx_dropped, 0, __ATOMIC_ACQ_REL);
	if (dropped)
		fprintf(stderr, "bench: the probe dropped %llu inbound MADs\n",
			(unsigned long long)dropped);
}

/* The bench's shared state lives in a file, so that an exec'd probe maps it too. */
static Shared *shared_map(const char *path, bool create)
{
	int fd = open(path, create ? O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC : O_RDWR | O_CLOEXEC, 0600);
	void *p;

	if (fd < 0 || (create && ftruncate(fd, sizeof(Shared)) < 0))
		die("cannot create the shared state file");
	p = mmap(NULL, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		die("mmap");
	return p;
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

/* The next of the @max slots of @size bytes at @slots, zeroed, @n of them
 * taken so far; the run ends with @full once they all are. */
static void *slot_take(void *slots, size_t size, unsigned *n, unsigned max, const char *full)
{
	if (*n == max)
		die(full);
	return memset((char *)slots + (size_t)(*n)++ * size, 0, size);
}

static Row *row_new(const char *name, const char *relay, unsigned clients, uint32_t sessions)
{
	Row *r = slot_take(B.rows, sizeof(*r), &B.nrows, MAX_ROWS, "too many rows");

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

/*
 * One measurement: warm-up, then @runs runs, added to the row's earlier
 * runs (a row measured in blocks); the row's median, min and max are over
 * all of them.
 */
static void measure(Driver *d, Row *r, DriveMode mode, double rate, bool latency, unsigned runs)
{
	DriveSpec spec = { .mode = mode, .rate = rate, .warm_ms = B.o.warm_ms,
			   .run_ms = B.o.run_ms, .runs = runs, .latency = latency };
	static DriveOut out;
	double v[MAX_RUNS];
	const Hist *h;
	unsigned n;

	if (mode == DRIVE_RX)
		set_wire(WIRE_BLAST);
	driver_run(d, &spec, &out);
	if (mode == DRIVE_RX) {
		set_wire(WIRE_SINK);
		g_usleep(20000);
	}
	for (unsigned k = 0; k + 1 < out.nsnap && r->nv < MAX_RUNS; k++) {
		double secs = (double)(out.snaps[k + 1].t - out.snaps[k].t) / 1e9;

		r->v[r->nv++] = (double)(snap_metric(&out.snaps[k + 1], mode) -
					 snap_metric(&out.snaps[k], mode)) / secs;
	}
	if (B.o.verbose)
		for (unsigned k = 0; k < out.nsnap; k++)
			fprintf(stderr, "    snap %u: t %.3f sink %llu inbound %llu resp %llu sent %llu\n", k,
				(double)out.snaps[k].t / 1e9, (unsigned long long)out.snaps[k].sink,
				(unsigned long long)out.snaps[k].inbound,
				(unsigned long long)out.snaps[k].resp_ok,
				(unsigned long long)__atomic_load_n(&B.sh->blast_sent, __ATOMIC_RELAXED));
	n = r->nv;
	memcpy(v, r->v, n * sizeof(double));
	qsort(v, n, sizeof(double), cmp_double);
	r->min = v[0];
	r->max = v[n - 1];
	r->med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	r->errors += out.resp_err + out.write_errors;
	B.total_errors += out.resp_err + out.write_errors;
	if (latency) {
		h = mode == DRIVE_RX ? &out.lat : &B.sh->sink_lat;
		if (r->lat_acc) {
			for (unsigned i = 0; i < HIST_BUCKETS; i++)
				r->lat_acc->b[i] += h->b[i];
			r->lat_acc->n += h->n;
			h = r->lat_acc;
		}
		r->p50 = hist_quantile(h, 0.5);
		r->p99 = hist_quantile(h, 0.99);
		r->p999 = hist_quantile(h, 0.999);
	}
	fprintf(stderr, "  %-22s %-10s %5u clients %8u sessions: %12.0f %s (min %.0f max %.0f, %u runs)%s\n",
		r->name, r->relay, r->clients, r->sessions, r->med, r->unit, r->min, r->max, r->nv,
		r->errors ? " ERRORS" : "");
}

/* Runs per block for a row measured in blocks. */
static unsigned block_runs(void)
{
	return (B.o.runs + B.o.blocks - 1) / B.o.blocks;
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
	d->n_active = clients < MAX_SENDERS ? clients : MAX_SENDERS;
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
	sink_wait(before + 2 * (uint64_t)sessions); /* the REQs and the RTUs */
	__atomic_store_n(&B.sh->record_ids, 0, __ATOMIC_RELEASE);
	if (B.sh->n_ids != sessions)
		fprintf(stderr, "rdmacm-mux-bench: the sink saw %u of %u REQs\n", B.sh->n_ids, sessions);
}

static void probe_clients(Driver *d, unsigned clients, uint32_t sessions)
{
	driver_init(d);
	if (driver_connect(d, B.sock_p, 0, clients, true, B.a_gid, B.a_idx) < 0)
		die("cannot connect the clients to the probe");
	/* the same senders, sessions and inbound targets as with the daemon */
	d->n_active = clients < MAX_SENDERS ? clients : MAX_SENDERS;
	driver_plan_sessions(d, sessions);
	__atomic_store_n(&B.sh->probe_route_n, d->n_active, __ATOMIC_RELEASE);
}

static void ratio(Row *r, const Row *probe)
{
	if (probe && probe->med > 0)
		r->ratio = r->med / probe->med;
}

/* The rows of one clients sweep: TX, RX, QEMU-style (or NULL). */
typedef struct RowSet {
	Row *tx, *rx, *qm;
} RowSet;

/* One block's runs of @rs's rows, through the relay @d is connected to. */
static void measure_block(Driver *d, const RowSet *rs)
{
	measure(d, rs->tx, DRIVE_TX, 0, false, block_runs());
	measure(d, rs->rx, DRIVE_RX, 0, false, block_runs());
	if (rs->qm)
		measure(d, rs->qm, DRIVE_QEMU, 0, false, block_runs());
}

/* One block of a clients sweep through a fresh daemon, or QEMU's mux. */
static void clients_block_daemon(RelayKind kind, unsigned clients, uint32_t sessions, bool first,
				 const RowSet *rs)
{
	Driver d;
	double rss0;

	B.daemon_a = relay_start_vg(kind, "simA", B.sock_a, NULL);
	rss0 = rss_mb(B.daemon_a);
	if (kind == RELAY_DAEMON && first) {
		rss_idle = rss0;
		rss_connected = 0; /* daemon_clients() takes the per-client figure */
		B.rss_base_mb = rss0;
	} else {
		rss_connected = 1;
	}
	daemon_clients(&d, clients, sessions);
	blast_setup(sessions);
	measure_block(&d, rs);
	driver_close_all(&d);
	g_usleep(50000);
	relay_stop(kind);
}

/* The same block through the limit probe. */
static void clients_block_probe(unsigned clients, uint32_t sessions, const RowSet *rs)
{
	Driver d;

	B.probe = probe_start();
	probe_clients(&d, clients, sessions);
	blast_setup(sessions);
	measure_block(&d, rs);
	driver_close_all(&d);
	probe_stop(SIGKILL);
}

static void ratio_peer(Row *r, unsigned which, const Row *peer)
{
	if (r && peer && peer->med > 0)
		r->vs_peer[which] = r->med / peer->med;
}

/*
 * Clients sweep: TX, RX and QEMU-style through the daemon, the probe and
 * (--peer) QEMU's mux as built and syslog-free. The load of a shared
 * machine drifts over tens of seconds, so the relays are measured in
 * alternating blocks, forward then backward (daemon, probe, probe,
 * daemon, ...; with the peer: daemon, probe, qemu, qemu-nolog, qemu-nolog,
 * qemu, probe, daemon, ...), and each row's median is over all its blocks'
 * runs: a ratio then compares the same stretches of time.
 */
static void sweep_clients(unsigned clients)
{
	uint32_t sessions = clients > 1000 ? clients : 1000;
	bool qemu = clients <= 100;
	unsigned nk = B.peer_bin ? RELAY_KINDS : 2;
	RowSet rs[RELAY_KINDS];

	fprintf(stderr, "rdmacm-mux-bench: %u clients, %u sessions\n", clients, sessions);
	for (unsigned k = 0; k < nk; k++) {
		rs[k].tx = row_new("tx", relay_names[k], clients, sessions);
		rs[k].rx = row_new("rx", relay_names[k], clients, sessions);
		rs[k].qm = qemu ? row_new("qemu-style", relay_names[k], clients, sessions) : NULL;
	}
	for (unsigned b = 0; b < B.o.blocks; b++)
		for (unsigned i = 0; i < nk; i++) {
			RelayKind k = b % 2 == 0 ? i : nk - 1 - i;

			if (k == RELAY_PROBE)
				clients_block_probe(clients, sessions, &rs[k]);
			else
				clients_block_daemon(k, clients, sessions, b == 0, &rs[k]);
		}
	if (clients > MAX_SENDERS)
		for (Row *r = rs[0].tx; r <= &B.rows[B.nrows - 1]; r++)
			snprintf(r->note, sizeof(r->note),
				 "the first %u clients send and receive, the rest are idle (GID index < 256)",
				 MAX_SENDERS);
	ratio(rs[RELAY_DAEMON].tx, rs[RELAY_PROBE].tx);
	ratio(rs[RELAY_DAEMON].rx, rs[RELAY_PROBE].rx);
	if (qemu)
		ratio(rs[RELAY_DAEMON].qm, rs[RELAY_PROBE].qm);
	for (unsigned k = 0; B.peer_bin && k < RELAY_QEMU; k++)
		for (unsigned w = 0; w < 2; w++) {
			const RowSet *p = &rs[RELAY_QEMU + w];

			ratio_peer(rs[k].tx, w, p->tx);
			ratio_peer(rs[k].rx, w, p->rx);
			ratio_peer(rs[k].qm, w, p->qm);
		}
	if (clients == 10) {
		B.tx_peak10 = rs[RELAY_DAEMON].tx->med;
		B.rx_peak10 = rs[RELAY_DAEMON].rx->med;
	}
}

/* One block of the sessions sweep: a fresh daemon, 10 clients, @sessions. */
static void sessions_block(uint32_t sessions, Row *tx, Row *rx, bool first)
{
	Driver d;
	DaemonCounters k0, k1;
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
	if (first && sessions >= B.rss_sessions) {
		B.rss_sessions = sessions;
		B.rss_per_session = (r1 - r0) * 1024.0 * 1024.0 / sessions;
		B.rss_1m_mb = r1;
	}
	blast_setup(sessions);
	daemon_counters(B.daemon_a, "simA", &k0);
	measure(&d, tx, DRIVE_TX, 0, false, block_runs());
	measure(&d, rx, DRIVE_RX, 0, false, block_runs());
	daemon_counters(B.daemon_a, "simA", &k1);
	/* Were the sessions really there, and did every MAD find its session? */
	snprintf(tx->note, sizeof(tx->note), "%sdaemon: %llu sessions created, %llu live",
		 sessions == 1000 ? "" : "ratio: to 1000 sessions; ",
		 (unsigned long long)k0.created, (unsigned long long)k0.live);
	snprintf(rx->note, sizeof(rx->note),
		 "%sduring the runs: %llu tx refused, %llu rx no-session",
		 sessions == 1000 ? "" : "ratio: to 1000 sessions; ",
		 (unsigned long long)(k1.tx_refused - k0.tx_refused),
		 (unsigned long long)(k1.rx_dropped - k0.rx_dropped));
	if (k0.live < sessions || k1.tx_refused != k0.tx_refused || k1.rx_dropped != k0.rx_dropped) {
		fprintf(stderr, "rdmacm-mux-bench: %u sessions: %llu live, %llu refused, %llu dropped\n",
			sessions, (unsigned long long)k0.live,
			(unsigned long long)(k1.tx_refused - k0.tx_refused),
			(unsigned long long)(k1.rx_dropped - k0.rx_dropped));
		tx->errors++;
		B.total_errors++;
	}
	driver_close_all(&d);
	stop(&B.daemon_a, SIGTERM);
}

/*
 * Sessions sweep at 10 clients: throughput and memory per session. Each
 * size is compared with the same daemon at 1000 sessions (the lookups'
 * cost at scale), measured in the same sweep: the sizes take turns in
 * blocks, in forward then reverse order, as the clients sweep does.
 */
static void sweep_sessions(const uint32_t *sizes, unsigned n)
{
	Row *tx[8], *rx[8];
	uint32_t all[8];
	unsigned m = 0;

	all[m++] = 1000;
	for (unsigned i = 0; i < n && m < G_N_ELEMENTS(all); i++)
		if (sizes[i] != 1000)
			all[m++] = sizes[i];
	B.sessions_swept = true;
	for (unsigned i = 0; i < m; i++) {
		tx[i] = row_new("tx-sessions", "daemon", 10, all[i]);
		rx[i] = row_new("rx-sessions", "daemon", 10, all[i]);
	}
	for (unsigned b = 0; b < B.o.blocks; b++)
		for (unsigned k = 0; k < m; k++) {
			unsigned i = b % 2 == 0 ? k : m - 1 - k;

			sessions_block(all[i], tx[i], rx[i], b == 0);
		}
	for (unsigned i = 1; i < m; i++) {
		ratio(tx[i], tx[0]);
		ratio(rx[i], rx[0]);
	}
}

/* Latency at light load and at half the peak, daemon and probe. */
static void latency_rows(void)
{
	const double light = 1000;
	/* without the clients sweep (--only latency): a fixed half rate */
	double half_tx = (B.tx_peak10 > 0 ? B.tx_peak10 : 200000) / 2;
	double half_rx = (B.rx_peak10 > 0 ? B.rx_peak10 : 200000) / 2;
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
		measure(&d, r, DRIVE_TX_PACED, light, true, B.o.runs);
		r = row_new("latency-tx-half", relays[k], 10, 1000);
		measure(&d, r, DRIVE_TX_PACED, half_tx, true, B.o.runs);
		B.sh->blast_rate = light;
		r = row_new("latency-rx-light", relays[k], 10, 1000);
		measure(&d, r, DRIVE_RX, 0, true, B.o.runs);
		B.sh->blast_rate = half_rx;
		r = row_new("latency-rx-half", relays[k], 10, 1000);
		measure(&d, r, DRIVE_RX, 0, true, B.o.runs);
		B.sh->blast_rate = 0;
		driver_close_all(&d);
		if (dmn)
			stop(&B.daemon_a, SIGTERM);
		else
			probe_stop(SIGKILL);
	}
}

/*
 * Ten clients read at full rate, an eleventh never reads (RX). Flat out,
 * "all reading" and "one never reads" take turns in blocks (as the
 * clients sweep does) on the same daemon and connections; the eleventh's
 * backlog is read during the warm-up of an "all reading" block. Then
 * both again, paced at half the peak, for the others' p99.
 */
static void slow_reader_rows(void)
{
	Driver d;
	Row *base, *slow, *lbase, *lslow;

	fprintf(stderr, "rdmacm-mux-bench: slow reader\n");
	B.daemon_a = daemon_start("simA", B.sock_a);
	rss_connected = 1;
	daemon_clients(&d, 11, 1100);
	blast_setup(1100);
	/* the same ten clients are counted with and without the slow one */
	d.conns[10]->uncounted = true;
	base = row_new("slow-reader-off", "daemon", 10, 1100);
	slow = row_new("slow-reader-on", "daemon", 10, 1100);
	for (unsigned b = 0; b < B.o.blocks; b++)
		for (unsigned k = 0; k < 2; k++) {
			bool on = (b % 2 == 0) == (k == 1);

			d.conns[10]->slow = on;
			measure(&d, on ? slow : base, DRIVE_RX, 0, false, block_runs());
		}
	B.sh->blast_rate = (B.rx_peak10 > 0 ? B.rx_peak10 : 200000) / 2;
	d.conns[10]->slow = false;
	lbase = row_new("slow-reader-off-lat", "daemon", 10, 1100);
	measure(&d, lbase, DRIVE_RX, 0, true, B.o.runs);
	d.conns[10]->slow = true;
	lslow = row_new("slow-reader-on-lat", "daemon", 10, 1100);
	measure(&d, lslow, DRIVE_RX, 0, true, B.o.runs);
	B.sh->blast_rate = 0;
	if (base->med > 0)
		slow->ratio = slow->med / base->med;
	snprintf(slow->note, sizeof(slow->note), "ratio: to the same 10 clients, all reading");
	driver_close_all(&d);
	stop(&B.daemon_a, SIGTERM);
}

/* Connect 11 clients to daemon A: the first ten get @sessions sessions
 * and send, the eleventh only ever sends to unreachable GIDs. */
static void unreachable_clients(Driver *d, uint32_t sessions)
{
	uint64_t errs = 0, before;

	driver_init(d);
	if (driver_connect(d, B.sock_a, 0, 11, true, B.a_gid, B.a_idx) < 0)
		die("cannot connect the clients");
	d->n_active = 10;
	before = __atomic_load_n(&B.sh->sink_count, __ATOMIC_RELAXED);
	if (driver_setup_sessions(d, sessions, &errs) < 0 || errs)
		die("session set-up failed");
	sink_wait(before + 2 * (uint64_t)sessions);
	/* its refused REQs are the point, not errors; its MADs are not counted */
	d->conns[10]->uncounted = true;
}

/* One measurement of the unreachable rows, then the last REQ's answer. */
static void unreachable_measure(Driver *d, Row *r, bool on, DriveMode mode, double rate,
				bool latency)
{
	d->conns[10]->unreachable = on;
	measure(d, r, mode, rate, latency, block_runs());
	d->conns[10]->unreachable = false;
	/* a stalled write ends the daemon's loop turn at most this late */
	if (driver_wait_answers(d, 3 * B.o.unreach_ms + 5000) < 0)
		die("the unreachable sender's REQ was never answered");
}

/*
 * One unreachable destination: ten clients send at full rate (TX) while an
 * eleventh sends REQs to GIDs no port has, one at a time (the next when the
 * daemon has answered the last), each of which stalls the umad write() for
 * --unreachable-delay-ms. "Without" and "with" the eleventh take turns in
 * blocks (ABBA) on the same daemon and connections, flat out for the ten's
 * throughput, then paced at half the peak for their p99 latency.
 */
static void unreachable_rows(void)
{
	static Hist lat_off, lat_on;
	double half = (B.tx_peak10 > 0 ? B.tx_peak10 : 200000) / 2;
	Driver d;
	Row *off, *on, *loff, *lon;

	fprintf(stderr, "rdmacm-mux-bench: one unreachable destination (%u ms stall)\n",
		B.o.unreach_ms);
	B.daemon_a = daemon_start("simA", B.sock_a);
	unreachable_clients(&d, 1000);
	off = row_new("unreachable-off", "daemon", 10, 1000);
	on = row_new("unreachable-on", "daemon", 10, 1000);
	loff = row_new("unreachable-off-lat", "daemon", 10, 1000);
	lon = row_new("unreachable-on-lat", "daemon", 10, 1000);
	hist_reset(&lat_off);
	hist_reset(&lat_on);
	loff->lat_acc = &lat_off;
	lon->lat_acc = &lat_on;
	for (unsigned b = 0; b < B.o.blocks; b++)
		for (unsigned k = 0; k < 2; k++) {
			bool with = (b % 2 == 0) == (k == 1);

			unreachable_measure(&d, with ? on : off, with, DRIVE_TX, 0, false);
		}
	for (unsigned b = 0; b < B.o.blocks; b++)
		for (unsigned k = 0; k < 2; k++) {
			bool with = (b % 2 == 0) == (k == 1);

			unreachable_measure(&d, with ? lon : loff, with, DRIVE_TX_PACED, half, true);
		}
	loff->lat_acc = lon->lat_acc = NULL;
	if (off->med > 0)
		on->ratio = on->med / off->med;
	if (loff->p99 > 0)
		lon->ratio = (double)lon->p99 / (double)loff->p99;
	snprintf(on->note, sizeof(on->note),
		 "ratio: to the same 10 clients without the 11th; %llu REQs answered",
		 (unsigned long long)d.conns[10]->unreach_answered);
	snprintf(lon->note, sizeof(lon->note),
		 "ratio: p99 against the same 10 clients without the 11th (%.0f MADs/s)", half);
	fprintf(stderr, "  unreachable: the ten's throughput %.2f of without, p99 %.2f times\n",
		on->ratio, lon->ratio);
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
		measure(&d, r, DRIVE_HANDSHAKE, 0, false, B.o.runs);
		driver_close_all(&d);
	}
	stop(&B.daemon_a, SIGTERM);
	stop(&B.daemon_b, SIGTERM);
}

/*
 * Hand-off: 1000 clients and 100k sessions on daemon A, which executes
 * itself again (SIGHUP, as rdmacm-muxctl restart does) with every client
 * and session. The pause is the time from the signal to the answer to a
 * QEMU-style MAD request written right after it (the new image relays it):
 * the longest any client waits. Then TX throughput before and after (the
 * new image keeps its sessions in a memfd).
 */
static void handoff_rows(uint32_t sessions, unsigned rounds)
{
	uint64_t errs = 0, before;
	double pauses[MAX_RUNS];
	Row *pause, *tx_before, *tx_after;
	Driver d;

	fprintf(stderr, "rdmacm-mux-bench: hand-off (SIGHUP) with 1000 clients, %u sessions\n",
		sessions);
	B.daemon_a = daemon_start("simA", B.sock_a);
	driver_init(&d);
	if (driver_connect(&d, B.sock_a, 0, 1000, true, B.a_gid, B.a_idx) < 0)
		die("cannot connect the hand-off clients");
	d.n_active = 10;
	before = __atomic_load_n(&B.sh->sink_count, __ATOMIC_RELAXED);
	if (driver_setup_sessions(&d, sessions, &errs) < 0 || errs)
		die("session set-up failed");
	sink_wait(before + 2 * (uint64_t)sessions);
	tx_before = row_new("handoff-tx-before", "daemon", 10, sessions);
	measure(&d, tx_before, DRIVE_TX, 0, false, B.o.runs);
	pause = row_new("handoff-pause", "daemon", 1000, sessions);
	snprintf(pause->unit, sizeof(pause->unit), "ms");
	rounds = MIN(rounds, MAX_RUNS);
	for (unsigned k = 0; k < rounds; k++) {
		uint64_t t0 = now_ns();

		if (kill(B.daemon_a, SIGHUP) < 0)
			die("cannot signal the daemon");
		if (driver_run_count(&d, DRIVE_QEMU, 1, 30000) != 1)
			die("no answer after the hand-off");
		pauses[k] = (double)(now_ns() - t0) / 1e6;
		pause->v[pause->nv++] = pauses[k];
		g_usleep(200000);
	}
	qsort(pauses, rounds, sizeof(double), cmp_double);
	pause->min = pauses[0];
	pause->max = pauses[rounds - 1];
	pause->med = rounds % 2 ? pauses[rounds / 2] : (pauses[rounds / 2 - 1] + pauses[rounds / 2]) / 2;
	snprintf(pause->note, sizeof(pause->note),
		 "SIGHUP to the first answer from the new image, %u hand-offs", rounds);
	tx_after = row_new("handoff-tx-after", "daemon", 10, sessions);
	measure(&d, tx_after, DRIVE_TX, 0, false, B.o.runs);
	if (tx_before->med > 0)
		tx_after->ratio = tx_after->med / tx_before->med;
	snprintf(tx_after->note, sizeof(tx_after->note),
		 "ratio: to before the hand-offs (sessions in a memfd now)");
	fprintf(stderr, "  hand-off pause: median %.1f ms (max %.1f); TX after/before %.2f\n",
		pause->med, pause->max, tx_after->ratio);
	driver_close_all(&d);
	stop(&B.daemon_a, SIGTERM);
}

/* ---- --cost: callgrind instruction counts per MAD ---- */

static void cg_control(const char *what, pid_t pid)
{
	g_autofree char *cmd = g_strdup_printf("callgrind_control %s %d >/dev/null 2>&1", what, (int)pid);

	if (system(cmd) != 0)
		die("callgrind_control failed (is valgrind installed, and may we ptrace?)");
}

/* The newest dump of @pid: Ir, L1 data misses and LL misses in it. */
static bool cg_read_dump(const char *tag, pid_t pid, double *ir, double *d1, double *ll)
{
	g_autofree char *prefix = g_strdup_printf("cg-%s.%d.", tag, (int)pid);
	g_autoptr(GDir) dir = g_dir_open(B.cost_dir, 0, NULL);
	g_autofree char *best = NULL, *text = NULL, *ev_line = NULL, *tot_line = NULL;
	g_auto(GStrv) names = NULL, vals = NULL;
	const char *name, *ev, *tot;
	long best_n = 0;

	while (dir && (name = g_dir_read_name(dir)))
		if (g_str_has_prefix(name, prefix) && atol(name + strlen(prefix)) > best_n) {
			best_n = atol(name + strlen(prefix));
			g_free(best);
			best = g_build_filename(B.cost_dir, name, NULL);
		}
	if (!best || !g_file_get_contents(best, &text, NULL, NULL))
		return false;
	ev = strstr(text, "\nevents: ");
	tot = strstr(text, "\nsummary: ");
	if (!tot)
		tot = strstr(text, "\ntotals: ");
	if (!ev || !tot)
		return false;
	ev += strlen("\nevents: ");
	tot = strchr(tot + 1, ':') + 2;
	ev_line = g_strndup(ev, strcspn(ev, "\n"));
	tot_line = g_strndup(tot, strcspn(tot, "\n"));
	names = g_strsplit(ev_line, " ", -1);
	vals = g_strsplit(tot_line, " ", -1);
	*ir = *d1 = *ll = 0;
	for (unsigned i = 0; names[i] && vals[i]; i++) {
		double v = g_ascii_strtod(vals[i], NULL);

		if (!strcmp(names[i], "Ir"))
			*ir = v;
		else if (!strcmp(names[i], "D1mr") || !strcmp(names[i], "D1mw"))
			*d1 += v;
		else if (!strcmp(names[i], "DLmr") || !strcmp(names[i], "DLmw") ||
			 !strcmp(names[i], "ILmr"))
			*ll += v;
	}
	return *ir > 0;
}

static uint64_t cost_burst(Driver *d, DriveMode mode, uint64_t n)
{
	uint64_t got;

	if (mode != DRIVE_RX)
		return driver_run_count(d, mode, n, 5000);
	__atomic_store_n(&B.sh->blast_limit, n, __ATOMIC_RELEASE);
	set_wire(WIRE_BLAST);
	got = driver_run_count(d, mode, n, 5000);
	set_wire(WIRE_SINK);
	g_usleep(20000);
	__atomic_store_n(&B.sh->blast_limit, 0, __ATOMIC_RELEASE);
	return got;
}

/* One counted row: a warm-up burst, zero the counters, @n MADs, dump. */
static CostRow *cost_row(Driver *d, pid_t pid, const char *tag, const char *name,
			 const char *relay, DriveMode mode, uint64_t n, uint32_t sessions)
{
	CostRow *c = slot_take(B.cost, sizeof(*c), &B.ncost, MAX_COST_ROWS, "too many cost rows");
	double ir = 0, d1 = 0, ll = 0;

	snprintf(c->name, sizeof(c->name), "%s", name);
	snprintf(c->relay, sizeof(c->relay), "%s", relay);
	c->clients = d->n;
	c->sessions = sessions;
	(void)cost_burst(d, mode, n / 10 > 200 ? n / 10 : 200); /* queues, caches, routes */
	cg_control("-z", pid);
	c->mads = cost_burst(d, mode, n);
	cg_control("-d", pid);
	if (!c->mads || !cg_read_dump(tag, pid, &ir, &d1, &ll))
		die("no callgrind figures");
	c->ir = ir / (double)c->mads;
	c->d1 = d1 / (double)c->mads;
	c->ll = ll / (double)c->mads;
	fprintf(stderr, "  cost %-14s %-6s %4u clients %8u sessions: %8llu MADs, %7.0f Ir/MAD, "
			"%5.1f D1 misses, %5.2f LL misses per MAD\n",
		c->name, c->relay, c->clients, c->sessions, (unsigned long long)c->mads, c->ir, c->d1,
		c->ll);
	return c;
}

static CostRow *find_cost(const char *name, const char *relay, unsigned clients, uint32_t sessions)
{
	for (unsigned i = 0; i < B.ncost; i++)
		if (!strcmp(B.cost[i].name, name) && !strcmp(B.cost[i].relay, relay) &&
		    B.cost[i].clients == clients && B.cost[i].sessions == sessions)
			return &B.cost[i];
	return NULL;
}

static void cost_ratio(CostRow *c, const CostRow *ref, const char *vs)
{
	if (c && ref && c->ir > 0) {
		c->ratio = ref->ir / c->ir;
		snprintf(c->vs, sizeof(c->vs), "%s", vs);
	}
}

/*
 * TX, RX and QEMU-style at 10 clients, then QEMU-style at 1, 1000
 * sessions, through @relay (running as @pid), whose clients @connect
 * makes: the rows that compare the daemon with the probe.
 */
static void cost_patterns(pid_t pid, const char *relay,
			  void (*connect)(Driver *d, unsigned clients, uint32_t sessions), uint64_t n)
{
	Driver d;

	connect(&d, 10, 1000);
	blast_setup(1000);
	cost_row(&d, pid, relay, "tx", relay, DRIVE_TX, n, 1000);
	cost_row(&d, pid, relay, "rx", relay, DRIVE_RX, n, 1000);
	cost_row(&d, pid, relay, "qemu-style", relay, DRIVE_QEMU, n / 2, 1000);
	driver_close_all(&d);
	connect(&d, 1, 1000);
	cost_row(&d, pid, relay, "qemu-style", relay, DRIVE_QEMU, n / 4, 1000);
	driver_close_all(&d);
}

/*
 * The same patterns as the throughput rows, each over a fixed number of
 * MADs with the relay under callgrind: instructions per MAD do not depend
 * on what else runs on the machine.
 */
static void cost_rows(uint32_t big_sessions)
{
	uint64_t n = B.o.cost_mads;
	Driver d;
	pid_t pid;

	fprintf(stderr, "rdmacm-mux-bench: --cost: callgrind, %llu MADs per row\n",
		(unsigned long long)n);
	rss_connected = 1;
	/* daemon, 1000 sessions: 10 clients, then 1 */
	pid = B.daemon_a = daemon_start_vg("simA", B.sock_a, "daemon");
	cost_patterns(pid, "daemon", daemon_clients, n);
	stop(&B.daemon_a, SIGTERM);
	/* daemon, many sessions */
	pid = B.daemon_a = daemon_start_vg("simA", B.sock_a, "daemon-big");
	daemon_clients(&d, 10, big_sessions);
	blast_setup(big_sessions);
	cost_row(&d, pid, "daemon-big", "tx", "daemon", DRIVE_TX, n, big_sessions);
	cost_row(&d, pid, "daemon-big", "rx", "daemon", DRIVE_RX, n, big_sessions);
	driver_close_all(&d);
	stop(&B.daemon_a, SIGTERM);
	/* the probe */
	pid = B.probe = probe_start_vg("probe");
	cost_patterns(pid, "probe", probe_clients, n);
	probe_stop(SIGTERM);

	cost_ratio(find_cost("tx", "daemon", 10, 1000), find_cost("tx", "probe", 10, 1000), "probe");
	cost_ratio(find_cost("rx", "daemon", 10, 1000), find_cost("rx", "probe", 10, 1000), "probe");
	cost_ratio(find_cost("qemu-style", "daemon", 10, 1000),
		   find_cost("qemu-style", "probe", 10, 1000), "probe");
	cost_ratio(find_cost("qemu-style", "daemon", 1, 1000),
		   find_cost("qemu-style", "probe", 1, 1000), "probe");
	cost_ratio(find_cost("tx", "daemon", 10, big_sessions), find_cost("tx", "daemon", 10, 1000),
		   "daemon, 1000 sessions");
	cost_ratio(find_cost("rx", "daemon", 10, big_sessions), find_cost("rx", "daemon", 10, 1000),
		   "daemon, 1000 sessions");
}

/* ---- --syscalls: system calls and wake-ups per MAD ---- */

/*
 * One pattern through one relay: a warm-up burst, @n MADs counting the
 * wake-ups (untraced: a tracer changes when threads sleep), then @n more
 * with every thread under strace -c.
 */
static void sys_row(Driver *d, pid_t pid, const char *name, RelayKind kind, DriveMode mode,
		    uint64_t n)
{
	SysCount sc;
	SysRow *s;
	uint64_t got, t[2][4];

	if (B.nsys == MAX_SYS_ROWS)
		die("too many syscall rows");
	s = &B.sys[B.nsys++];
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->relay, sizeof(s->relay), "%s", relay_names[kind]);
	s->clients = d->n;
	(void)cost_burst(d, mode, n / 10 > 200 ? n / 10 : 200);
	if (syscount_begin(&sc, pid, NULL) < 0)
		die("the relay has no threads to count");
	for (unsigned k = 0; k < 2; k++) {
		if (k == 1)
			got = cost_burst(d, mode, n);
		syscount_sched_times(getpid(), &t[k][0], &t[k][1]);
		syscount_sched_times(B.wire, &t[k][2], &t[k][3]);
	}
	syscount_end(&sc, got, &s->r);
	if (got) {
		s->drv_us = (double)(t[1][0] - t[0][0]) / 1e3 / (double)got;
		s->drv_runq_us = (double)(t[1][1] - t[0][1]) / 1e3 / (double)got;
		s->wire_us = (double)(t[1][2] - t[0][2]) / 1e3 / (double)got;
		s->wire_runq_us = (double)(t[1][3] - t[0][3]) / 1e3 / (double)got;
	}
	if (syscount_begin(&sc, pid, B.dir) < 0)
		die("cannot trace the relay (is strace installed, and may we ptrace?)");
	s->mads = cost_burst(d, mode, n);
	syscount_end(&sc, s->mads, &s->r);
	if (!got || !s->mads)
		die("no MADs moved while counting system calls");
	fprintf(stderr, "  syscalls %-10s %-10s %4u clients, per MAD: main thread %.2f calls, "
			"%.2f wake-ups, %.2f CPU us (%.2f us waiting for a CPU); others %.2f, %.2f, %.2f; "
			"simulator %.2f, %.2f, %.2f; the bench's driver %.2f CPU us (%.2f waiting), "
			"wire %.2f (%.2f)\n",
		s->name, s->relay, s->clients, s->r.calls[SYS_MAIN], s->r.wakeups[SYS_MAIN],
		s->r.cpu_us[SYS_MAIN], s->r.wait_us[SYS_MAIN], s->r.calls[SYS_OTHER],
		s->r.wakeups[SYS_OTHER], s->r.cpu_us[SYS_OTHER], s->r.calls[SYS_FABRIC],
		s->r.wakeups[SYS_FABRIC], s->r.cpu_us[SYS_FABRIC], s->drv_us, s->drv_runq_us, s->wire_us,
		s->wire_runq_us);
}

/*
 * The patterns of the --cost rows (TX, RX, QEMU-style at 10 clients,
 * QEMU-style at 1) through each relay of the clients sweep.
 */
static void syscall_rows(void)
{
	uint64_t n = B.o.quick ? 1000 : 4000;
	unsigned nk = B.peer_bin ? RELAY_KINDS : 2;

	fprintf(stderr, "rdmacm-mux-bench: --syscalls: strace -c, %llu MADs per row\n",
		(unsigned long long)n);
	for (unsigned k = 0; k < nk; k++) {
		Driver d;
		pid_t pid;

		rss_connected = 1;
		for (unsigned pass = 0; pass < 2; pass++) {
			unsigned clients = pass == 0 ? 10 : 1;

			if (k == RELAY_PROBE && clients == 10)
				pid = B.probe = probe_start();
			else if (clients == 10)
				pid = B.daemon_a = relay_start_vg(k, "simA", B.sock_a, NULL);
			if (k == RELAY_PROBE)
				probe_clients(&d, clients, 1000);
			else
				daemon_clients(&d, clients, 1000);
			blast_setup(1000);
			if (clients == 10) {
				sys_row(&d, pid, "tx", k, DRIVE_TX, n);
				sys_row(&d, pid, "rx", k, DRIVE_RX, n);
				sys_row(&d, pid, "qemu-style", k, DRIVE_QEMU, n / 2);
			} else {
				sys_row(&d, pid, "qemu-style", k, DRIVE_QEMU, n / 4);
			}
			driver_close_all(&d);
		}
		if (k == RELAY_PROBE)
			probe_stop(SIGTERM);
		else
			relay_stop(k);
	}
}

/* "name n.nn, ..." of a group's most frequent calls. */
static void sys_calls_text(GString *out, const SysResult *r, SysGroup g)
{
	for (unsigned k = 0; k < r->ntop[g]; k++)
		if (r->top[g][k].per_mad >= 0.005)
			g_string_append_printf(out, "%s%s %.2f", out->len ? ", " : "", r->top[g][k].name,
					       r->top[g][k].per_mad);
}

static void print_sys_table(FILE *f)
{
	static const char *const groups[SYS_GROUPS] = { "main", "others", "sim" };

	if (!B.nsys)
		return;
	fprintf(f, "\nsystem calls, wake-ups and CPU time per MAD: main = the relay's main thread, "
		   "others = its other threads and child processes, sim = the simulator's timer "
		   "thread (the kernel's part); calls from strace -c of every thread, wake-ups "
		   "(voluntary context switches), CPU us and the main thread's run-queue us "
		   "(runnable, waiting for a CPU) from /proc in an untraced run:\n");
	fprintf(f, "%-12s %-10s %7s %6s", "row", "relay", "clients", "MADs");
	for (unsigned g = 0; g < SYS_GROUPS; g++)
		fprintf(f, " %6s %5s %6s%s", groups[g], "wake", "us", g == SYS_MAIN ? "   runq" : "");
	fprintf(f, "  %s\n", "calls per MAD (main; others)");
	for (unsigned i = 0; i < B.nsys; i++) {
		const SysRow *s = &B.sys[i];
		g_autoptr(GString) main_calls = g_string_new(NULL);
		g_autoptr(GString) other_calls = g_string_new(NULL);

		sys_calls_text(main_calls, &s->r, SYS_MAIN);
		sys_calls_text(other_calls, &s->r, SYS_OTHER);
		fprintf(f, "%-12s %-10s %7u %6llu", s->name, s->relay, s->clients,
			(unsigned long long)s->mads);
		for (unsigned g = 0; g < SYS_GROUPS; g++) {
			fprintf(f, " %6.2f %5.2f %6.2f", s->r.calls[g], s->r.wakeups[g], s->r.cpu_us[g]);
			if (g == SYS_MAIN)
				fprintf(f, " %6.1f", s->r.wait_us[g]);
		}
		fprintf(f, "  %s%s%s\n", main_calls->str, other_calls->len ? "; " : "",
			other_calls->str);
	}
}

/* ---- output ---- */

/* The --cost row that goes with a throughput row, if any. */
static const CostRow *row_cost(const Row *r)
{
	bool sessions_row = g_str_has_suffix(r->name, "-sessions");
	const char *name = !strcmp(r->name, "tx-sessions")   ? "tx"
			   : !strcmp(r->name, "rx-sessions") ? "rx"
							     : r->name;
	const CostRow *c = find_cost(name, r->relay, r->clients, r->sessions);

	/* a sessions row's ratio is against the daemon, not the probe */
	if (c && sessions_row && strncmp(c->vs, "daemon", 6))
		return NULL;
	return c;
}

static void print_cost_table(FILE *f)
{
	if (!B.ncost)
		return;
	fprintf(f, "\ncallgrind, per MAD (%u MADs per row; qemu-style 1/2 and 1/4 of that):\n",
		B.o.cost_mads);
	fprintf(f, "%-12s %-10s %7s %8s %8s %9s %9s %9s %8s %s\n", "row", "relay", "clients",
		"sessions", "MADs", "Ir/MAD", "D1miss", "LLmiss", "Ir ratio", "against");
	for (unsigned i = 0; i < B.ncost; i++) {
		const CostRow *c = &B.cost[i];
		char ratio_s[16] = "-";

		if (c->ratio > 0)
			snprintf(ratio_s, sizeof(ratio_s), "%.2f", c->ratio);
		fprintf(f, "%-12s %-10s %7u %8u %8llu %9.0f %9.2f %9.3f %8s %s\n", c->name, c->relay,
			c->clients, c->sessions, (unsigned long long)c->mads, c->ir, c->d1, c->ll,
			ratio_s, c->vs[0] ? c->vs : "");
	}
}

/*
 * The table. "ratio" is against the probe (or what the row's note says);
 * with --peer, "x qemu" and "x nolog" are the row's median over QEMU's
 * mux's, as built and syslog-free, in the same clients sweep.
 */
static void print_table(FILE *f)
{
	fprintf(f, "\n%-20s %-10s %7s %8s %12s %12s %12s %6s", "row", "relay", "clients",
		"sessions", "median", "min", "max", "ratio");
	if (B.peer_bin)
		fprintf(f, " %7s %7s", "x qemu", "x nolog");
	fprintf(f, " %8s %9s %9s %9s %s\n", "Ir ratio", "p50 us", "p99 us", "p99.9 us", "unit");
	for (unsigned i = 0; i < B.nrows; i++) {
		const Row *r = &B.rows[i];
		const CostRow *c = row_cost(r);
		char ratio_s[16] = "-", l50[16] = "-", l99[16] = "-", l999[16] = "-", ir_s[16] = "-";
		char peer_s[2][16] = { "-", "-" };

		if (r->ratio > 0)
			snprintf(ratio_s, sizeof(ratio_s), "%.2f", r->ratio);
		for (unsigned w = 0; w < 2; w++)
			if (r->vs_peer[w] > 0)
				snprintf(peer_s[w], sizeof(peer_s[w]), "%.2f", r->vs_peer[w]);
		if (c && c->ratio > 0)
			snprintf(ir_s, sizeof(ir_s), "%.2f", c->ratio);
		if (r->p50 || r->p99) {
			snprintf(l50, sizeof(l50), "%.1f", (double)r->p50 / 1e3);
			snprintf(l99, sizeof(l99), "%.1f", (double)r->p99 / 1e3);
			snprintf(l999, sizeof(l999), "%.1f", (double)r->p999 / 1e3);
		}
		fprintf(f, "%-20s %-10s %7u %8u %12.0f %12.0f %12.0f %6s", r->name, r->relay,
			r->clients, r->sessions, r->med, r->min, r->max, ratio_s);
		if (B.peer_bin)
			fprintf(f, " %7s %7s", peer_s[0], peer_s[1]);
		fprintf(f, " %8s %9s %9s %9s %s%s\n", ir_s, l50, l99, l999, r->unit,
			r->errors ? "  ERRORS!" : "");
	}
	print_cost_table(f);
	print_sys_table(f);
	fprintf(f, "\nmemory: daemon RSS %.1f MiB idle; %.0f bytes per client (%u clients); "
		   "%.1f bytes per live session and %.1f MiB total at %u sessions\n",
		B.rss_base_mb, B.rss_per_client, B.rss_clients, B.rss_per_session, B.rss_1m_mb,
		B.rss_sessions);
	for (unsigned i = 0; i < B.nrows; i++)
		if (B.rows[i].note[0])
			fprintf(f, "note: %s, %s, %u clients, %u sessions: %s\n", B.rows[i].name,
				B.rows[i].relay, B.rows[i].clients, B.rows[i].sessions, B.rows[i].note);
	fprintf(f, "errors: %llu\n", (unsigned long long)B.total_errors);
}

static void write_json(const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f)
		die("cannot write the JSON file");
	fprintf(f, "{\n  \"bench\": \"rdmacm-mux-bench\",\n  \"mode\": \"%s\",\n"
		   "  \"runs\": %u,\n  \"blocks\": %u,\n  \"run_ms\": %u,\n  \"warm_ms\": %u,\n  \"seed\": %llu,\n",
		B.o.quick ? "quick" : "full", B.o.runs, B.o.blocks, B.o.run_ms, B.o.warm_ms,
		(unsigned long long)BENCH_SEED);
	fprintf(f, "  \"machine\": {\"cpus\": %u, \"load_before\": %.2f, \"load_after\": %.2f},\n",
		g_get_num_processors(), B.load_before, load_now());
	fprintf(f, "  \"rows\": [\n");
	for (unsigned i = 0; i < B.nrows; i++) {
		const Row *r = &B.rows[i];
		const CostRow *c = row_cost(r);

		fprintf(f, "    {\"row\": \"%s\", \"relay\": \"%s\", \"clients\": %u, \"sessions\": %u, "
			   "\"unit\": \"%s\", \"median\": %.1f, \"min\": %.1f, \"max\": %.1f, "
			   "\"ratio\": %.3f, \"ratio_qemu\": %.3f, \"ratio_qemu_nolog\": %.3f, "
			   "\"ir_ratio\": %.3f, \"p50_ns\": %llu, \"p99_ns\": %llu, "
			   "\"p999_ns\": %llu, \"errors\": %llu, \"runs\": [",
			r->name, r->relay, r->clients, r->sessions, r->unit, r->med, r->min, r->max,
			r->ratio, r->vs_peer[0], r->vs_peer[1], c ? c->ratio : 0.0, (unsigned long long)r->p50,
			(unsigned long long)r->p99, (unsigned long long)r->p999,
			(unsigned long long)r->errors);
		for (unsigned k = 0; k < r->nv; k++)
			fprintf(f, "%s%.1f", k ? ", " : "", r->v[k]);
		fprintf(f, "]}%s\n", i + 1 < B.nrows ? "," : "");
	}
	fprintf(f, "  ],\n  \"cost\": [\n");
	for (unsigned i = 0; i < B.ncost; i++) {
		const CostRow *c = &B.cost[i];

		fprintf(f, "    {\"row\": \"%s\", \"relay\": \"%s\", \"clients\": %u, \"sessions\": %u, "
			   "\"mads\": %llu, \"ir_per_mad\": %.1f, \"d1_miss_per_mad\": %.3f, "
			   "\"ll_miss_per_mad\": %.4f, \"ir_ratio\": %.3f, \"against\": \"%s\"}%s\n",
			c->name, c->relay, c->clients, c->sessions, (unsigned long long)c->mads, c->ir,
			c->d1, c->ll, c->ratio, c->vs, i + 1 < B.ncost ? "," : "");
	}
	fprintf(f, "  ],\n  \"syscalls\": [\n");
	for (unsigned i = 0; i < B.nsys; i++) {
		static const char *const groups[SYS_GROUPS] = { "main", "others", "sim" };
		const SysRow *s = &B.sys[i];

		fprintf(f, "    {\"row\": \"%s\", \"relay\": \"%s\", \"clients\": %u, \"mads\": %llu, "
			   "\"driver\": {\"cpu_us_per_mad\": %.3f, \"runq_us_per_mad\": %.3f}, "
			   "\"wire\": {\"cpu_us_per_mad\": %.3f, \"runq_us_per_mad\": %.3f}",
			s->name, s->relay, s->clients, (unsigned long long)s->mads, s->drv_us,
			s->drv_runq_us, s->wire_us, s->wire_runq_us);
		for (unsigned g = 0; g < SYS_GROUPS; g++) {
			fprintf(f, ", \"%s\": {\"calls_per_mad\": %.3f, \"wakeups_per_mad\": %.3f, "
				   "\"cpu_us_per_mad\": %.3f, \"runq_us_per_mad\": %.3f, \"calls\": {",
				groups[g], s->r.calls[g], s->r.wakeups[g], s->r.cpu_us[g], s->r.wait_us[g]);
			for (unsigned k = 0; k < s->r.ntop[g]; k++)
				fprintf(f, "%s\"%s\": %.3f", k ? ", " : "", s->r.top[g][k].name,
					s->r.top[g][k].per_mad);
			fprintf(f, "}}");
		}
		fprintf(f, "}%s\n", i + 1 < B.nsys ? "," : "");
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
	fprintf(f, "set multiplot layout 1,2 title 'rdmacm-mux on the simulated fabric "
		   "(median of %u runs in %u blocks)'\n",
		block_runs() * B.o.blocks, B.o.blocks);
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
			"                        [--blocks K] [--run-ms MS] [--check] [--cost]\n"
			"                        [--cost-mads N]\n"
			"                        [--only clients=N,sessions=N,latency,slow-reader,\n"
			"                                unreachable,handshake,handoff,cost] [--verbose]\n"
			"                        [--no-pin] [--unreachable-delay-ms MS]\n"
			"                        [--peer PATH|auto|cached] [--syscalls]\n"
			"                        [--shared-session]\n");
	exit(2);
}

/*
 * --only GROUP,...: clients=N (one clients sweep), sessions=N, latency,
 * slow-reader, unreachable, handshake, handoff, cost, syscalls. Without
 * --only: everything but cost and syscalls, which --cost and --syscalls add.
 */
static bool want(const char *group)
{
	g_auto(GStrv) list = NULL;

	if (!B.o.only)
		return (strcmp(group, "cost") != 0 || B.o.cost) &&
		       (strcmp(group, "syscalls") != 0 || B.o.syscalls);
	list = g_strsplit(B.o.only, ",", -1);
	for (unsigned i = 0; list[i]; i++)
		if (!strcmp(list[i], group))
			return true;
	return false;
}

/* --only clients=N: N, or 0 when not asked for. */
/* clients=N entries of --only that are swept (one sweep each) */
#define ONLY_CLIENTS_MAX 8

/* The values of --only's KEY=N entries, in their order: how many (at most @max). */
static unsigned only_values(const char *key, unsigned *out, unsigned max)
{
	g_auto(GStrv) list = NULL;
	size_t k = strlen(key);
	unsigned n = 0;

	if (!B.o.only)
		return 0;
	list = g_strsplit(B.o.only, ",", -1);
	for (unsigned i = 0; list[i] && n < max; i++)
		if (!strncmp(list[i], key, k) && list[i][k] == '=')
			out[n++] = (unsigned)atoi(list[i] + k + 1);
	return n;
}

/* The first KEY=N of --only, or 0. */
static unsigned only_value(const char *key)
{
	unsigned v = 0;

	return only_values(key, &v, 1) ? v : 0;
}

static void parse(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' },   { "json", required_argument, NULL, 'j' },
		{ "plot", required_argument, NULL, 'p' }, { "daemon", required_argument, NULL, 'd' },
		{ "sim-lib", required_argument, NULL, 'l' }, { "runs", required_argument, NULL, 'r' },
		{ "blocks", required_argument, NULL, 'b' },
		{ "run-ms", required_argument, NULL, 'm' }, { "check", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },	{ "cost", no_argument, NULL, 'C' },
		{ "only", required_argument, NULL, 'O' }, { "cost-mads", required_argument, NULL, 'N' },
		{ "verbose", no_argument, NULL, 'v' }, { "no-pin", no_argument, NULL, 'n' },
		{ "probe-serve", required_argument, NULL, 'P' }, { "shared", required_argument, NULL, 'S' },
		{ "unreachable-delay-ms", required_argument, NULL, 'U' },
		{ "peer", required_argument, NULL, 'Q' }, { "syscalls", no_argument, NULL, 'Y' },
		{ "shared-session", no_argument, NULL, 'G' },
		{ NULL, 0, NULL, 0 },
	};
	const char *probe_sock = NULL, *shared = NULL;
	int c;

	B.o.daemon = getenv("RDMACM_MUX_BIN");
	B.o.sim_lib = getenv("UMAD_SIM_LIB");
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'q': B.o.quick = true; break;
		case 'j': B.o.json = optarg; break;
		case 'p': B.o.plot = optarg; break;
		case 'd': B.o.daemon = optarg; break;
		case 'l': B.o.sim_lib = optarg; break;
		case 'r': B.o.runs = (unsigned)atoi(optarg); break;
		case 'b': B.o.blocks = (unsigned)atoi(optarg); break;
		case 'm': B.o.run_ms = (unsigned)atoi(optarg); break;
		case 'c': B.o.check = true; break;
		case 'C': B.o.cost = true; break;
		case 'O': B.o.only = optarg; break;
		case 'N': B.o.cost_mads = (unsigned)atoi(optarg); break;
		case 'v': B.o.verbose = true; break;
		case 'n': B.o.no_pin = true; break;
		case 'P': probe_sock = optarg; break;
		case 'S': shared = optarg; break;
		case 'U': B.o.unreach_ms = (unsigned)atoi(optarg); break;
		case 'Q': B.o.peer = optarg; break;
		case 'Y': B.o.syscalls = true; break;
		case 'G': B.o.shared_session = true; break;
		default: usage();
		}
	}
	if (probe_sock) {
		/* internal: the probe exec'd under callgrind by --cost */
		if (!shared)
			usage();
		probe_main(shared_map(shared, false), -1, probe_sock);
	}
	if (!B.o.daemon || !B.o.sim_lib) {
		fprintf(stderr, "rdmacm-mux-bench: give --daemon and --sim-lib (or RDMACM_MUX_BIN "
				"and UMAD_SIM_LIB)\n");
		exit(2);
	}
	/* full: 6 runs in 3 blocks of 2; quick: 5 runs in one block */
	if (!B.o.runs)
		B.o.runs = B.o.quick ? 5 : 6;
	if (!B.o.blocks)
		B.o.blocks = B.o.quick || B.o.runs < 6 ? 1 : 3;
	if (B.o.runs < 5 || B.o.runs > MAX_RUNS)
		die("--runs must be 5..16");
	if (B.o.blocks < 1 || B.o.blocks > B.o.runs || block_runs() * B.o.blocks > MAX_RUNS)
		die("--blocks must be 1..runs, with at most 16 runs in all");
	if (!B.o.run_ms)
		B.o.run_ms = B.o.quick ? 100 : 1000;
	B.o.warm_ms = B.o.quick ? 150 : 500;
	if (!B.o.cost_mads)
		B.o.cost_mads = B.o.quick ? 2000 : 20000;
	/* the kernel's ARP stall is ~1 s; --quick keeps its row short */
	if (!B.o.unreach_ms)
		B.o.unreach_ms = B.o.quick ? 50 : 1000;
	{
		unsigned v[ONLY_CLIENTS_MAX], n = only_values("clients", v, ONLY_CLIENTS_MAX);

		for (unsigned i = 0; i < n; i++)
			if (v[i] == 0 || v[i] > A_CLIENT_GIDS)
				die("--only clients=N: 1 to 1010");
	}
}

/*
 * --peer: QEMU's rdmacm-mux. "auto" builds it (once, cached: see
 * bench/peer/build-qemu-rdmacm-mux.sh), or says that it cannot (no source)
 * and leaves the peer rows out; "cached" takes a cached build or exits 77
 * (skipped) without one. Resolved before the re-execution with the
 * simulator preloaded (the build's compilers should not carry it), which
 * finds the path in the environment.
 */
static void peer_resolve(void)
{
	const char *resolved = getenv("RDMACM_MUX_BENCH_PEER");
	g_autofree char *out = NULL;
	g_autoptr(GError) gerr = NULL;
	g_auto(GStrv) lines = NULL;
	const char *argv[3] = { BENCH_PEER_DIR "/build-qemu-rdmacm-mux.sh", NULL, NULL };
	int status = 0;
	unsigned n;

	if (!B.o.peer)
		return;
	if (resolved) { /* empty: skipped before the re-execution */
		B.peer_bin = *resolved ? g_strdup(resolved) : NULL;
		return;
	}
	if (strcmp(B.o.peer, "auto") && strcmp(B.o.peer, "cached")) {
		B.peer_bin = g_canonicalize_filename(B.o.peer, NULL);
	} else {
		if (!strcmp(B.o.peer, "cached"))
			argv[1] = "--cached";
		fprintf(stderr, "rdmacm-mux-bench: %s\n",
			argv[1] ? "looking for a cached build of QEMU's rdmacm-mux"
				: "building QEMU's rdmacm-mux (once; cached)");
		/* its messages go straight to our stderr, its path to @out */
		if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_CHILD_INHERITS_STDERR, NULL, NULL,
				  &out, NULL, &status, &gerr))
			die(gerr->message);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
			/* "cached" is asked for by a test about the peer alone:
			 * skip it. "auto" runs every other row without it. */
			if (argv[1]) {
				fprintf(stderr, "rdmacm-mux-bench: SKIP: no cached build of QEMU's "
						"rdmacm-mux\n");
				exit(77);
			}
			fprintf(stderr, "rdmacm-mux-bench: QEMU's rdmacm-mux cannot be built (no "
					"source): the peer rows are skipped\n");
			setenv("RDMACM_MUX_BENCH_PEER", "", 1);
			return;
		}
		if (!g_spawn_check_wait_status(status, NULL))
			die("bench/peer/build-qemu-rdmacm-mux.sh failed");
		lines = g_strsplit(g_strstrip(out), "\n", -1);
		n = g_strv_length(lines);
		if (!n)
			die("bench/peer/build-qemu-rdmacm-mux.sh printed no path");
		B.peer_bin = g_strdup(lines[n - 1]);
	}
	if (access(B.peer_bin, X_OK) < 0)
		die("--peer: not an executable");
	setenv("RDMACM_MUX_BENCH_PEER", B.peer_bin, 1);
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
	peer_resolve();
	ensure_preload(argv);
	B.load_before = load_now();
	B.exe = g_file_read_link("/proc/self/exe", NULL);
	cl = B.o.quick ? quick_clients : full_clients;
	ncl = B.o.quick ? G_N_ELEMENTS(quick_clients) : G_N_ELEMENTS(full_clients);
	signal(SIGPIPE, SIG_IGN);
	bench_pid = getpid();
	signal(SIGINT, on_fatal_signal);
	signal(SIGTERM, on_fatal_signal);
	signal(SIGHUP, on_fatal_signal);
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

	B.shared_path = g_strdup_printf("%s/shared", B.dir);
	B.sh = shared_map(B.shared_path, true);
	B.cost_dir = g_strdup(B.dir);
	B.ctl = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pin_init(); /* before the wire process, which inherits it */
	B.wire = fork();
	if (B.wire < 0)
		die("fork");
	if (B.wire == 0) {
		child_follow_parent();
		wire_main(B.sh, B.ctl);
	}
	wait_flag(&B.sh->wire_ready, "the wire process did not start");

	if (only_value("clients")) {
		unsigned v[ONLY_CLIENTS_MAX], n = only_values("clients", v, ONLY_CLIENTS_MAX);

		for (unsigned i = 0; i < n; i++)
			sweep_clients(v[i]);
	} else if (!B.o.only)
		for (unsigned i = 0; i < ncl; i++)
			sweep_clients(cl[i]);
	if (only_value("sessions")) {
		uint32_t n = only_value("sessions");

		sweep_sessions(&n, 1);
	} else if (!B.o.only && B.o.quick) {
		sweep_sessions(quick_sessions, G_N_ELEMENTS(quick_sessions));
	} else if (!B.o.only) {
		sweep_sessions(full_sessions, G_N_ELEMENTS(full_sessions));
	}
	if (want("latency"))
		latency_rows();
	if (want("slow-reader"))
		slow_reader_rows();
	if (want("unreachable"))
		unreachable_rows();
	if (want("syscalls"))
		syscall_rows();
	if (want("cost"))
		cost_rows(B.o.quick ? quick_sessions[0] : full_sessions[G_N_ELEMENTS(full_sessions) - 1]);
	if (want("handoff"))
		handoff_rows(B.o.quick ? 10000 : 100000, B.o.quick ? 3 : 9);
	if (want("handshake")) {
		if (B.o.quick)
			handshake_rows(quick_pairs, G_N_ELEMENTS(quick_pairs));
		else
			handshake_rows(full_pairs, G_N_ELEMENTS(full_pairs));
	}
	set_wire(WIRE_EXIT);
	stop(&B.wire, 0);

	print_table(stdout);
	printf("load average (1 min): %.2f at the start, %.2f at the end; %u CPUs\n", B.load_before,
	       load_now(), g_get_num_processors());
	printf("elapsed: %.1f s\n", (double)(now_ns() - t_start) / 1e9);
	if (B.o.json)
		write_json(B.o.json);
	if (B.o.plot)
		write_plot(B.o.plot);
	if (getenv("BENCH_KEEP"))
		fprintf(stderr, "rdmacm-mux-bench: kept %s\n", B.dir);
	cleanup_children();
	if (B.o.check) {
		for (unsigned i = 0; i < B.nrows; i++)
			if (!(B.rows[i].med > 0)) {
				fprintf(stderr, "rdmacm-mux-bench: check: row %s/%s/%u is zero\n",
					B.rows[i].name, B.rows[i].relay, B.rows[i].clients);
				return 1;
			}
		/* the memory figures come from the sessions sweep */
		if (B.total_errors || (B.sessions_swept && !(B.rss_per_session > 0))) {
			fprintf(stderr, "rdmacm-mux-bench: check: errors or no memory figures\n");
			return 1;
		}
	}
	return 0;
}
