/* SPDX-License-Identifier: MIT */
/*
 * Integration test harness: a simulated fabric in a temp dir, real
 * rdmacm-mux daemons on it (spawned with the sim preloaded), "VM" clients
 * built on librdmacm-mux and raw QEMU-protocol clients. The CM MAD builders
 * and readers come from tests/support/cm-mad.h.
 *
 * The binaries come from the environment that meson sets:
 * RDMACM_MUX_BIN, UMAD_SIM_LIB, UMAD_SIM_CLI, PINGPONG_BIN.
 */
#ifndef RDMACM_MUX_TEST_HARNESS_H
#define RDMACM_MUX_TEST_HARNESS_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "cm-mad.h"
#include "prom-text.h"
#include "rdmacm-mux.h"
#include "supervisor.h"

typedef struct Fabric {
	char *dir;
} Fabric;

typedef struct Daemon {
	Fabric *fabric;
	Supervisor *sup; /* NULL: started without a supervisor */
	char *ca;
	char *socket;
	char *log;
	char **argv;
	GPid pid;
} Daemon;

typedef struct Vm {
	char *name;
	struct rdmacm_mux *mux;
	uint8_t gid[IB_GID_LEN];
	uint32_t tid;
} Vm;

/* The path in environment variable @name (set by meson), or abort. */
const char *harness_env_bin(const char *name);
/* Run @argv to completion; abort with its output unless it exits 0. */
void harness_run_sync(char **argv);
/* Whether something accepts connections on the UNIX socket @path. */
bool harness_socket_serves(const char *path);

/* A fabric from `umad-sim create DIR --preset NAME`. */
Fabric *fabric_new(const char *preset);
/* Hold every send to a GID that no port has (while @hold), until it is
 * released: such a write stalls in the sender that makes it, as in the
 * kernel's address resolution, for as long as the test decides. */
void fabric_hold_unreachable(Fabric *f, bool hold);
/* A fabric from `umad-sim create DIR ARGS...` (presets, extra CAs). */
Fabric *fabric_new_args(const char *const *args);
void fabric_free(Fabric *f);
/* Run the umad-sim CLI on this fabric: umad-sim VERB DIR ARGS... */
void fabric_cli(Fabric *f, const char *verb, const char *const *args);

/* Start rdmacm-mux on @ca port 1 with @extra options; waits until it
 * serves its socket and its control socket. */
Daemon *daemon_start(Fabric *f, const char *ca, const char *const *extra);
/* Start rdmacm-mux as daemon_start() does, without waiting for it. */
Daemon *daemon_launch(Fabric *f, const char *ca, const char *const *extra);
/* Wait up to @timeout_ms until @d serves its socket and its control
 * socket. Return: false when it exited first (its status is lost) or the
 * time ran out. */
bool daemon_wait_serving(Daemon *d, int timeout_ms);
/* SIGTERM and wait. Return: the exit status (or 128 + signal). */
int daemon_stop(Daemon *d);
/* SIGKILL and wait. */
void daemon_kill(Daemon *d);
/* Start the same daemon again (after a kill or stop). */
void daemon_restart(Daemon *d);
/* daemon_restart() without waiting for it to serve (or for its READY=1). */
void daemon_restart_unwaited(Daemon *d);
void daemon_free(Daemon *d);

/* The daemon's child processes (its senders), zombies included. */
GArray *daemon_children(const Daemon *d);
/* Whether @pid runs (a zombie waiting for its reaper does not). */
bool pid_running(int pid);
/* The daemon's threads (/proc's count). */
int daemon_threads(const Daemon *d);
/* The daemon's open fds, and its CPU time so far in seconds. */
unsigned daemon_open_fds(const Daemon *d);
double daemon_cpu_seconds(const Daemon *d);

/* ---- a supervisor with an fd store, as systemd is (supervisor.h) ---- */

/* Start rdmacm-mux under @s: $NOTIFY_SOCKET is its, and every (re)start
 * passes what the store holds; a start is done at READY=1. */
Daemon *daemon_start_supervised(Supervisor *s, Fabric *f, const char *ca,
				const char *const *extra);
/* The two-hosts fabric's daemons: A on simA with @opts_a, B on simB with
 * @opts_b. */
void hosts_start(Fabric *f, const char *const *opts_a, const char *const *opts_b, Daemon **da,
		 Daemon **db);
/* A new two-hosts fabric and its daemons (hosts_start()). */
Fabric *hosts_open(const char *const *opts_a, const char *const *opts_b, Daemon **da,
		   Daemon **db);
/* VMs by name, space-separated in @names: "aN" is a client of @da with
 * GID ::ffff:10.0.1.N, "bN" one of @db with ::ffff:10.0.2.N; the i-th is
 * stored in *@ret[i]. */
void hosts_vms(Daemon *da, Daemon *db, const char *names, Vm **const *ret);
/* A fixture's teardown: the @n VMs of @vms (NULL ones skipped), then both
 * daemons (either may be NULL), then the fabric. */
void hosts_free(Fabric *fabric, Daemon *da, Daemon *db, Vm *const *vms, size_t n);
/* Everything the daemon printed so far (trace, log, counters). */
char *daemon_output(const Daemon *d);
/* The fd number the daemon's log says its @nth client (1-based) got. */
int daemon_client_fd(const Daemon *d, unsigned client_id);
/* A counter from the dump a stopped daemon printed, e.g.
 * daemon_output_counter(out, "tx refused, foreign-sgid"). -1 if absent. */
int64_t daemon_output_counter(const char *output, const char *label);
/* A row of the per-attribute table: tx or rx count of @attr ("REQ"). */
int64_t daemon_output_attr(const char *output, const char *attr, bool rx);

/* A client of @d that registered @gid (text), through the library. */
Vm *vm_new(Daemon *d, const char *gid, const char *name);
/* The same, opened with @flags (rdmacm_mux_open()'s). */
Vm *vm_new_flags(Daemon *d, const char *gid, const char *name, unsigned flags);
void vm_free(Vm *vm);
/* @n VMs on each daemon, opened with @flags: a[i], named a<i+1>, a client
 * of @da with GID ::ffff:10.0.1.<i+1>; b[i] one of @db with 10.0.2. */
void hosts_vm_pairs(Daemon *da, Daemon *db, unsigned n, unsigned flags, Vm **a, Vm **b);
/* vm_free() each of the @n VMs of @vms (NULL ones skipped). */
void vms_free(Vm *const *vms, size_t n);
/* Send a MAD from the VM's GID to @dest; returns the daemon's verdict. */
int vm_send(Vm *vm, const uint8_t dest[IB_GID_LEN], const uint8_t mad[256]);
/* Wait up to @timeout_ms for an inbound MAD (0: take one only if the
 * socket holds it now). 0 or -ETIMEDOUT. */
int vm_recv(Vm *vm, struct rdmacm_mux_inbound *in, int timeout_ms);
/* Assert the next inbound MAD is @attr; return it in *in. */
void vm_expect(Vm *vm, uint16_t attr, struct rdmacm_mux_inbound *in);
/* @from sends @mad to @to, which must get it (its attribute) next. */
void vm_send_expect(Vm *from, Vm *to, const uint8_t mad[256], struct rdmacm_mux_inbound *in);
/* @from sends a REQ with comm id @comm and TID @tid to @to, which rejects
 * it (REJ, reason 28, TID @tid + 1): the session is closing. Return: the
 * wire comm id @to saw. */
uint32_t vm_req_rejected(Vm *from, Vm *to, uint32_t comm, uint64_t tid);
/* Assert the VM holds no MAD now: none is buffered in the library or
 * readable on its socket. It does not wait: call it once the daemon has
 * shown (daemon_wait_metric()) that it dealt with everything that could
 * have come, so that a MAD on its way would already be there. */
void vm_expect_empty(Vm *vm);
struct rdmacm_mux_client_stats vm_stats(Vm *vm);

/* A connected raw socket to the daemon, for QEMU-style and hostile tests. */
int raw_connect(const Daemon *d);
/* Write one whole frame (blocking). */
void raw_send(int fd, const struct rdmacm_mux_msg *m);
/* Read one whole frame: 0, -ETIMEDOUT, or -EPIPE at end of stream. */
int raw_recv(int fd, struct rdmacm_mux_msg *m, int timeout_ms);
/* A REQ/REG/UNREG frame, everything else zero. */
void raw_frame(struct rdmacm_mux_msg *m, uint32_t op, const uint8_t sgid[IB_GID_LEN]);
/* REG over a raw socket, QEMU style: write, then one blocking read. */
int32_t raw_request(int fd, struct rdmacm_mux_msg *m);

/* ---- raw clients that act as QEMU does ---- */

/* A MAD frame as QEMU builds it: its own GID @own in hdr.sgid and in
 * addr.gid (with a GRH, hop limit 255), QP1, 256 bytes of @mad. */
void qemu_frame(struct rdmacm_mux_msg *m, const uint8_t own[IB_GID_LEN], const uint8_t mad[256]);
/* Send it as QEMU does: write, then wait for the answer, which must be 0. */
void qemu_send(int fd, const uint8_t own[IB_GID_LEN], const uint8_t mad[256]);
/* Assert the next frame @fd reads (within 5 s) is an inbound MAD @attr
 * for @own; return it in *m. -EPIPE here means the client lost its
 * connection to the daemon. */
void qemu_expect(int fd, const uint8_t own[IB_GID_LEN], uint16_t attr, struct rdmacm_mux_msg *m);
/*
 * Raw QEMU clients and their peers on the two-hosts fabric, the hosts of
 * the restart tests: daemon A (simA, the caller starts it, under
 * supervisor @sup or not) serves client i, which registered
 * ::ffff:10.0.1.(i+1) over its socket q[i]; daemon B (simB) serves its
 * peer b[i], a VM with ::ffff:10.0.2.(i+1).
 */
#define QEMU_PAIRS_MAX 8 /* the two-hosts fabric has 8 client GIDs a side */
typedef struct QemuPairs {
	Fabric *fabric;
	Supervisor *sup; /* NULL: A runs without one */
	Daemon *da, *db;
	unsigned n;
	int q[QEMU_PAIRS_MAX]; /* < 0: closed by the test */
	uint8_t qgid[QEMU_PAIRS_MAX][IB_GID_LEN];
	Vm *b[QEMU_PAIRS_MAX];
} QemuPairs;

/* Start daemon B on @p->fabric and @n pairs between @p->da and B. */
void qemu_pairs_open(QemuPairs *p, unsigned n);
/* Wait until neither daemon holds a frame for a client, then assert that
 * no client and no peer has anything more to read: nothing came twice. */
void qemu_pairs_expect_quiet(const QemuPairs *p);
/* Client @i of @p writes @n REQs to GIDs no port has (::ffff:10.0.5.1
 * on), comm ids from @comm and TIDs from @tid, in one write: a QEMU whose
 * guest sends faster than answers come. */
void qemu_pairs_write_to_nowhere(const QemuPairs *p, unsigned i, unsigned n, uint32_t comm,
				 uint64_t tid);
/* Client @i of @p sends @mad to its peer b[i], which must get it next
 * (its attribute); return it in *in. */
void qemu_pairs_to_peer(const QemuPairs *p, unsigned i, const uint8_t mad[256],
			struct rdmacm_mux_inbound *in);
/* Peer b[i] sends @mad to client @i of @p, which must get it next;
 * return it in *m. */
void qemu_pairs_to_client(const QemuPairs *p, unsigned i, const uint8_t mad[256],
			  struct rdmacm_mux_msg *m);
/* Free all @p holds: the pairs, both daemons, the supervisor, the fabric. */
void qemu_pairs_free(QemuPairs *p);

/* Run @fn(@d, @arg) in a child process as uid and gid 65534 (nobody), a
 * local user without privileges. Return: the child's exit status, @fn's
 * return value (3: the child could not drop its privileges). */
int harness_as_nobody(int (*fn)(const Daemon *d, const void *arg), const Daemon *d,
		      const void *arg);

/* A GID from its text form, or abort. */
void gid_parse(const char *text, uint8_t gid[IB_GID_LEN]);

/*
 * A hostile host on the fabric: `umad-probe forge` on CA @ca (port 1),
 * the port's one CM agent there, sending whatever MADs it is given and
 * printing every MAD it receives.
 */
typedef struct Forger {
	GPid pid;
	int in;		/* its stdin: one line per MAD to send */
	char *out_path; /* its stdout */
} Forger;

/* A MAD the forger received. */
typedef struct ForgedRx {
	uint8_t sender[16];
	unsigned gid_index;
	uint8_t mad[256];
} ForgedRx;

/* Start a forger on @ca; returns once its agent is registered. */
Forger *forger_start(Fabric *f, const char *ca);
/* Send @count copies of @mad from @sgid (a GID of its CA) to @dgid, the
 * 32-bit field at @step_offset (28: RemoteCommID, 24: LocalCommID) and
 * the TID counting up from @mad's. */
void forger_send(Forger *g, const uint8_t sgid[16], const uint8_t dgid[16], unsigned count,
		 unsigned step_offset, const uint8_t mad[256]);
/* Stop sending, wait until nothing has come for 300 ms, and return what
 * it received (ForgedRx, owned by the caller); *@sent counts the sends
 * that succeeded. The forger is freed. */
GArray *forger_finish(Forger *g, unsigned *sent);

/* ---- what a running daemon shows (its control socket) ---- */

/* The label list of a sample: LABELS("reason", "no-session"). */
#define LABELS(...) ((const char *const[]){ __VA_ARGS__, NULL })
/* How long the waits below allow before they fail: a bound for a broken
 * daemon, never part of a verdict (a loaded machine only makes them take
 * longer). */
#define HARNESS_WAIT_MS 20000

/* The daemon's metrics page (rdmacm-muxctl metrics), parsed. */
PromPage *daemon_metrics(const Daemon *d);
/* One sample of it: @name with @labels (NULL for none); it must exist. */
double daemon_metric(const Daemon *d, const char *name, const char *const *labels);
/* The sum of every sample of @name that has @labels (NULL: all of them). */
double daemon_metric_sum(const Daemon *d, const char *name, const char *const *labels);
/* Wait until daemon_metric() is @want; fail with its last value after
 * HARNESS_WAIT_MS. */
void daemon_wait_metric(const Daemon *d, const char *name, const char *const *labels,
			double want);
/* Wait until every MAD that the @n daemons wrote to the wire was read by
 * one of them (relayed or counted as dropped), and none of them holds a
 * frame for a client: then each client's socket has all it will get. Only
 * for a fabric where no other program sends MADs to these daemons. */
void daemons_wait_quiet(Daemon *const *d, size_t n);
/* daemons_wait_quiet() on a fabric where other programs (forgers) take
 * part: @foreign is the MADs they wrote to these daemons less those these
 * daemons wrote to them. */
void daemons_wait_quiet_plus(Daemon *const *d, size_t n, double foreign);
/* Wait until the daemon's output holds @needle @count times or more. */
void daemon_wait_output(const Daemon *d, const char *needle, unsigned count);
/* How often @needle occurs in the daemon's output so far. */
unsigned daemon_output_count(const Daemon *d, const char *needle);

/* Wait up to @timeout_ms for a daemon to exit on its own (no signal).
 * Return: its exit status (or 128 + signal), or -ETIMEDOUT. */
int daemon_wait_exit(Daemon *d, int timeout_ms);

/* ---- a program whose output the test reads line by line ---- */

typedef struct Child {
	char *name;
	GPid pid;
	int out; /* its stdout; its stderr goes to the test's */
	GString *buf;
} Child;

/* Start @argv (a path, not looked up) with @envp (NULL: the test's). */
Child *child_spawn(const char *name, const char *const *argv, char **envp);
/* The next line it prints, without the newline; fail at EOF or when it
 * prints nothing for HARNESS_CHILD_LINE_MS. Each line is logged. */
char *child_line(Child *c);
#define HARNESS_CHILD_LINE_MS 20000
/* Read lines until one starts with @prefix, and return it. */
char *child_expect(Child *c, const char *prefix);
/* Wait for it to exit and free @c. Return: its exit status, or 128 +
 * the signal that killed it. */
int child_wait(Child *c);

#endif
