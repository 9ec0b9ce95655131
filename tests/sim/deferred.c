/* SPDX-License-Identifier: MIT */
/* Owns the helper thread and its job list for delayed writes into FIFOs. */
#include "deferred.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

enum job_kind { JOB_DELIVER, JOB_TIMEOUT, JOB_HELD };

struct job {
	enum job_kind kind;
	uint64_t owner;
	uint64_t due_ns;
	uint64_t tid;
	uint8_t mclass;
	unsigned period_ms;
	unsigned retries_left;
	char dst[PATH_MAX];      /* empty: nowhere to (re)send */
	char own_fifo[PATH_MAX]; /* JOB_TIMEOUT: where the echo goes */
	uint8_t pkt[SIM_PKT_SIZE];
	uint8_t echo[SIM_PKT_SIZE];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;
static GList *jobs; /* sorted by due_ns */
static bool started;
static bool atfork_set;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int sim_fifo_open_writer(const char *path)
{
	int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int sim_fifo_put(int fd, const void *pkt)
{
	uint64_t deadline = now_ns() + SIM_FULL_WAIT_MS * 1000000ull;

	for (;;) {
		ssize_t n = write(fd, pkt, SIM_PKT_SIZE);
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		uint64_t now;

		/* Writes up to PIPE_BUF are atomic: a packet is all there or not at all. */
		if (n == SIM_PKT_SIZE)
			return 0;
		if (n >= 0)
			return -EIO;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		now = now_ns();
		if (now >= deadline)
			return -EAGAIN;
		poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
	}
}

static void put_path(const char *path, const void *pkt)
{
	int fd;

	if (!*path)
		return;
	fd = sim_fifo_open_writer(path);
	if (fd < 0)
		return;
	sim_fifo_put(fd, pkt);
	close(fd);
}

static gint by_due(gconstpointer a, gconstpointer b)
{
	const struct job *x = a, *y = b;

	return x->due_ns < y->due_ns ? -1 : x->due_ns > y->due_ns;
}

static void *worker(void *arg)
{
	static char dst[PATH_MAX];
	static uint8_t pkt[SIM_PKT_SIZE];

	(void)arg;
	/* Named, so that a count of a process's system calls and wake-ups
	 * (rdmacm-mux-bench --syscalls) can tell the simulator's stand-in
	 * for the kernel's MAD timers from the program's own threads. */
	pthread_setname_np(pthread_self(), "umad-sim-defer");
	pthread_mutex_lock(&lock);
	for (;;) {
		struct job *j;
		uint64_t now = now_ns();

		if (!jobs) {
			pthread_cond_wait(&cond, &lock);
			continue;
		}
		j = jobs->data;
		if (j->due_ns > now) {
			struct timespec ts = { .tv_sec = (time_t)(j->due_ns / 1000000000ull),
					       .tv_nsec = (long)(j->due_ns % 1000000000ull) };

			pthread_cond_timedwait(&cond, &lock, &ts);
			continue;
		}
		jobs = g_list_delete_link(jobs, jobs);
		if (j->kind == JOB_TIMEOUT && j->retries_left > 0) {
			/* A retransmission: the kernel re-posts the same MAD, same TID. */
			/* The job stays listed (cancel may free it), so send from a copy. */
			memcpy(dst, j->dst, sizeof(dst));
			memcpy(pkt, j->pkt, sizeof(pkt));
			j->retries_left--;
			j->due_ns += (uint64_t)j->period_ms * 1000000ull;
			jobs = g_list_insert_sorted(jobs, j, by_due);
			pthread_mutex_unlock(&lock);
			put_path(dst, pkt);
			pthread_mutex_lock(&lock);
			continue;
		}
		/* The job left the list, so nothing else can reach it while unlocked. */
		pthread_mutex_unlock(&lock);
		if (j->kind == JOB_TIMEOUT)
			put_path(j->own_fifo, j->echo);
		else
			put_path(j->dst, j->pkt);
		g_free(j);
		pthread_mutex_lock(&lock);
	}
	return NULL;
}

/*
 * At exit, MADs already "on the wire" (delayed or held back) still arrive, as
 * they would on a real fabric; pending timeouts die with the fds.
 */
static void drain_at_exit(void)
{
	GList *mine = NULL;

	pthread_mutex_lock(&lock);
	for (GList *l = jobs, *next; l; l = next) {
		struct job *j = l->data;

		next = l->next;
		if (j->kind != JOB_TIMEOUT) {
			jobs = g_list_remove_link(jobs, l);
			mine = g_list_concat(mine, l);
		}
	}
	pthread_mutex_unlock(&lock);
	for (GList *l = mine; l; l = l->next) {
		struct job *j = l->data;
		uint64_t now = now_ns();

		if (j->due_ns > now)
			g_usleep((gulong)((j->due_ns - now) / 1000));
		put_path(j->dst, j->pkt);
	}
	g_list_free_full(mine, g_free);
}

static void after_fork_child(void)
{
	/* The thread does not exist in the child; its jobs belong to the parent. */
	pthread_mutex_init(&lock, NULL);
	jobs = NULL;
	started = false;
}

/* Called with the lock held. */
static void ensure_started(void)
{
	pthread_condattr_t ca;
	pthread_t t;
	sigset_t all, old;

	if (started)
		return;
	if (!atfork_set) {
		pthread_atfork(NULL, NULL, after_fork_child);
		atexit(drain_at_exit);
		atfork_set = true;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cond, &ca);
	pthread_condattr_destroy(&ca);
	/* The helper must never take the host program's signals. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&t, NULL, worker, NULL) == 0) {
		pthread_detach(t);
		started = true;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void add_job(struct job *j)
{
	ensure_started();
	jobs = g_list_insert_sorted(jobs, j, by_due);
	pthread_cond_signal(&cond);
}

static struct job *new_job(enum job_kind kind, uint64_t owner, unsigned delay_ms)
{
	struct job *j = g_new0(struct job, 1);

	j->kind = kind;
	j->owner = owner;
	j->due_ns = now_ns() + (uint64_t)delay_ms * 1000000ull;
	return j;
}

/* Queue a packet for @fifo: delivered (JOB_DELIVER) or held (JOB_HELD)
 * once @ms have passed. */
static void add_packet_job(enum job_kind kind, uint64_t owner, const char *fifo, const void *pkt,
			   unsigned ms)
{
	struct job *j = new_job(kind, owner, ms);

	g_strlcpy(j->dst, fifo, sizeof(j->dst));
	memcpy(j->pkt, pkt, SIM_PKT_SIZE);
	pthread_mutex_lock(&lock);
	add_job(j);
	pthread_mutex_unlock(&lock);
}

void sim_defer_deliver(uint64_t owner, const char *fifo, const void *pkt, unsigned delay_ms)
{
	add_packet_job(JOB_DELIVER, owner, fifo, pkt, delay_ms);
}

int sim_defer_timeout(uint64_t owner, uint64_t tid, uint8_t mclass, const char *dst,
		      const void *data, const char *own_fifo, const void *echo,
		      unsigned timeout_ms, unsigned retries)
{
	struct job *j;

	pthread_mutex_lock(&lock);
	for (GList *l = jobs; l; l = l->next) {
		const struct job *o = l->data;

		if (o->kind == JOB_TIMEOUT && o->owner == owner && o->tid == tid &&
		    o->mclass == mclass) {
			pthread_mutex_unlock(&lock);
			return -EINVAL;
		}
	}
	j = new_job(JOB_TIMEOUT, owner, timeout_ms);
	j->tid = tid;
	j->mclass = mclass;
	j->period_ms = timeout_ms;
	j->retries_left = retries;
	if (dst)
		g_strlcpy(j->dst, dst, sizeof(j->dst));
	g_strlcpy(j->own_fifo, own_fifo, sizeof(j->own_fifo));
	memcpy(j->pkt, data, SIM_PKT_SIZE);
	memcpy(j->echo, echo, SIM_PKT_SIZE);
	add_job(j);
	pthread_mutex_unlock(&lock);
	return 0;
}

static void remove_matching(uint64_t owner, bool timeouts_only, uint64_t tid, uint8_t mclass)
{
	GList *l = jobs;

	while (l) {
		GList *next = l->next;
		struct job *j = l->data;

		if (j->owner == owner &&
		    (!timeouts_only || (j->kind == JOB_TIMEOUT && j->tid == tid && j->mclass == mclass))) {
			jobs = g_list_delete_link(jobs, l);
			g_free(j);
		}
		l = next;
	}
}

bool sim_defer_in_flight(uint64_t owner, uint64_t tid, uint8_t mclass)
{
	bool found = false;

	pthread_mutex_lock(&lock);
	for (GList *l = jobs; l && !found; l = l->next) {
		const struct job *o = l->data;

		found = o->kind == JOB_TIMEOUT && o->owner == owner && o->tid == tid &&
			o->mclass == mclass;
	}
	pthread_mutex_unlock(&lock);
	return found;
}

bool sim_defer_has_held(uint64_t owner)
{
	bool found = false;

	pthread_mutex_lock(&lock);
	for (GList *l = jobs; l && !found; l = l->next) {
		const struct job *o = l->data;

		found = o->kind == JOB_HELD && o->owner == owner;
	}
	pthread_mutex_unlock(&lock);
	return found;
}

void sim_defer_cancel(uint64_t owner, uint64_t tid, uint8_t mclass)
{
	pthread_mutex_lock(&lock);
	remove_matching(owner, true, tid, mclass);
	pthread_mutex_unlock(&lock);
}

void sim_defer_forget(uint64_t owner)
{
	pthread_mutex_lock(&lock);
	remove_matching(owner, false, 0, 0);
	pthread_mutex_unlock(&lock);
}

void sim_defer_hold(uint64_t owner, const char *fifo, const void *pkt, unsigned window_ms)
{
	add_packet_job(JOB_HELD, owner, fifo, pkt, window_ms);
}

bool sim_defer_take_held(uint64_t owner, char *fifo, void *pkt)
{
	bool found = false;

	pthread_mutex_lock(&lock);
	for (GList *l = jobs; l; l = l->next) {
		struct job *j = l->data;

		if (j->kind == JOB_HELD && j->owner == owner) {
			jobs = g_list_delete_link(jobs, l);
			g_strlcpy(fifo, j->dst, PATH_MAX);
			memcpy(pkt, j->pkt, SIM_PKT_SIZE);
			g_free(j);
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return found;
}
