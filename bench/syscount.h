/* SPDX-License-Identifier: MIT */
/*
 * rdmacm-mux-bench --syscalls: the system calls and the wake-ups of a relay
 * process (every thread, and every thread of its child processes) over a
 * stretch of MADs. System calls come from strace -c, one tracer per thread;
 * wake-ups are the threads' voluntary context switches (each one a sleep in
 * epoll_wait, poll, read, a futex ... that something ended). Both are counts,
 * not times: they hold on a loaded machine, where rates do not. Next to
 * them, the threads' CPU time (/proc/.../schedstat): a time, but the
 * relay's own, not the wall clock's.
 */
#ifndef RDMACM_MUX_BENCH_SYSCOUNT_H
#define RDMACM_MUX_BENCH_SYSCOUNT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SYSCOUNT_MAX_THREADS 128
#define SYSCOUNT_MAX_CALLS 16

/*
 * Whose the counts are. The simulator runs a helper thread in every process
 * that uses it ("umad-sim-defer"): it stands in for the kernel's MAD timers
 * (a umad_send() with a timeout, as QEMU's mux makes, echoes the MAD back
 * with ETIMEDOUT after it), so its work is the fabric's, shown apart.
 */
typedef enum SysGroup {
	SYS_MAIN,   /* the relay process's main thread (where a loop runs) */
	SYS_OTHER,  /* its other threads, and its child processes' */
	SYS_FABRIC, /* the simulator's helper threads */
	SYS_GROUPS
} SysGroup;

typedef struct SysCall {
	char name[24];
	double per_mad;
} SysCall;

typedef struct SysResult {
	double wakeups[SYS_GROUPS]; /* per MAD */
	double calls[SYS_GROUPS];   /* per MAD, every system call */
	double cpu_us[SYS_GROUPS];  /* per MAD, CPU time on all the threads */
	double wait_us[SYS_GROUPS]; /* per MAD, time runnable but waiting for a CPU */
	SysCall top[SYS_GROUPS][SYSCOUNT_MAX_CALLS]; /* the most frequent, per MAD */
	unsigned ntop[SYS_GROUPS];
} SysResult;

typedef struct SysCount {
	unsigned n;
	pid_t tid[SYSCOUNT_MAX_THREADS];
	SysGroup group[SYSCOUNT_MAX_THREADS];
	uint64_t vcsw[SYSCOUNT_MAX_THREADS];   /* voluntary switches at the start */
	uint64_t run_ns[SYSCOUNT_MAX_THREADS]; /* CPU time at the start */
	uint64_t wait_ns[SYSCOUNT_MAX_THREADS]; /* run-queue time at the start */
	pid_t tracer[SYSCOUNT_MAX_THREADS];    /* its strace, or 0 */
	char *out[SYSCOUNT_MAX_THREADS];       /* that strace's summary file */
} SysCount;

/* A thread's CPU time and run-queue time (runnable, not running) so far, in
 * ns (/proc/PID/task/TID/schedstat); 0 when it is gone. */
void syscount_sched_times(pid_t tid, uint64_t *run_ns, uint64_t *runq_ns);

/*
 * Start counting for @pid, its threads and its child processes' threads.
 * @trace_dir: trace every thread with its own `strace -c` writing into this
 * directory (and return once each is attached); NULL: wake-ups only.
 * Return: 0, or a negative errno (no strace, no thread could be traced).
 */
int syscount_begin(SysCount *sc, pid_t pid, const char *trace_dir);
/*
 * Stop counting: wake-ups and CPU time (a thread that exited meanwhile
 * counts none), or with tracing the system calls, per MAD of @mads.
 * Fills @res (the fields of a mode not counted are left alone).
 */
void syscount_end(SysCount *sc, uint64_t mads, SysResult *res);

#endif
