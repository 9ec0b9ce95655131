/* SPDX-License-Identifier: MIT */
/* Owns the sender processes (sender-pool.h): forking them, handing them
 * MADs, their deadlines, replacing and reaping them, and the bounded stop. */
#include "sender-pool.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* The fd a sender process reads its MADs from. */
#define SENDER_SOCK_FD 3
/* A new sender says within this whether its umad fd opened. */
#define SENDER_START_USEC (5 * 1000000ull)
/* The pause before starting senders again after a failed start, doubled
 * at each failure in a row, up to the maximum. */
#define SENDER_BACKOFF_MIN_USEC 250000ull
#define SENDER_BACKOFF_MAX_USEC (30 * 1000000ull)
/* How often killed processes are looked for while some are not reaped. */
#define SENDER_REAP_RETRY_USEC 50000ull
/* A stop waits this long for the processes it killed to be reaped. */
#define SENDER_STOP_REAP_USEC 100000ull

typedef enum SenderState {
	SENDER_EMPTY,	 /* no process */
	SENDER_STARTING, /* forked, its umad fd not open yet */
	SENDER_IDLE,
	SENDER_BUSY, /* writing @job */
} SenderState;

typedef struct SenderPool SenderPool;

typedef struct Sender {
	SenderPool *pool;
	SenderState state;
	pid_t pid;
	bool reaped; /* its pid was reaped already: never signal it */
	int sock;    /* our end of its socket */
	sd_event_source *src;
	UmadSendJob *job;
	uint64_t since; /* STARTING: forked at; BUSY: its write began at */
} Sender;

struct SenderPool {
	sd_event *event;
	UmadPort *port;
	UmadSendWorkerEvents events;
	unsigned wanted;
	uint64_t deadline_usec;
	Sender *senders; /* @wanted slots */
	GArray *dying;	 /* pid_t: killed, not reaped yet */
	sd_event_source *timer;
	unsigned failures;   /* rounds of starts that failed in a row */
	uint64_t respawn_at; /* empty slots start again from then */
	bool stopping;
	UmadSenderStats stats;
};

/* ---- the sender process ---- */

/*
 * Open a umad fd of its own, say how that went, then write each MAD that
 * comes on the socket and answer with the write's result, until the socket
 * ends. It never returns.
 */
static G_GNUC_NORETURN void sender_process_main(const UmadPort *port, int sock, pid_t parent)
{
	static const int daemon_signals[] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1 };
	UmadSendFd fd = { .fd = -1 };
	UmadBuffer buf;
	sigset_t none;
	int32_t r;

	/* The daemon's signals are the daemon's: systemd's SIGTERM reaches
	 * every process of the unit, and a sender ends when the daemon
	 * closes its socket or kills it, never on its own. */
	for (size_t i = 0; i < G_N_ELEMENTS(daemon_signals); i++)
		(void)signal(daemon_signals[i], SIG_IGN);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	/* It holds a umad fd and an agent of the port: never past the daemon. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(1);
	/* Nothing of the daemon's stays open here: a copy of a client's socket
	 * would keep that connection up after the daemon closed it, and a copy
	 * of the port's fd its CM agent. */
	if (sock != SENDER_SOCK_FD && dup2(sock, SENDER_SOCK_FD) < 0)
		_exit(1);
	if (close_range(SENDER_SOCK_FD + 1, ~0u, 0) < 0) {
		/* A kernel before 5.9, or a filter that refuses it. */
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
			_exit(1);
		for (rlim_t n = SENDER_SOCK_FD + 1; n < rl.rlim_cur; n++)
			(void)close((int)n);
	}
	r = umad_port_open_send_fd(port, &fd);
	if (send(SENDER_SOCK_FD, &r, sizeof(r), MSG_NOSIGNAL) != sizeof(r) || r < 0)
		_exit(1);
	for (;;) {
		ssize_t n = recv(SENDER_SOCK_FD, &buf, sizeof(buf), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= (ssize_t)offsetof(UmadBuffer, mad))
			break;
		r = umad_port_send_on(&fd, &buf, (size_t)n - offsetof(UmadBuffer, mad));
		if (send(SENDER_SOCK_FD, &r, sizeof(r), MSG_NOSIGNAL) != sizeof(r))
			break;
	}
	umad_port_close_send_fd(&fd);
	_exit(0);
}

/* ---- processes ---- */

static uint64_t sender_pool_now(SenderPool *p)
{
	return event_now_usec(p->event);
}

/*
 * Reap every child that ended: those killed (off the dying list), and any
 * other, which is a sender whose end its socket is about to tell (it is
 * then never signalled: its pid may be someone else's soon), or one of a
 * process image before a re-execution.
 */
static void sender_pool_reap(SenderPool *p)
{
	pid_t pid;

	while ((pid = waitpid(-1, NULL, WNOHANG)) > 0) {
		bool known = false;

		for (guint i = 0; i < p->dying->len && !known; i++)
			if (g_array_index(p->dying, pid_t, i) == pid) {
				g_array_remove_index_fast(p->dying, i);
				known = true;
			}
		for (unsigned i = 0; i < p->wanted && !known; i++)
			if (p->senders[i].state != SENDER_EMPTY && p->senders[i].pid == pid) {
				p->senders[i].reaped = true;
				known = true;
			}
	}
}

/* Empty the slot of @s: its process is killed (it has nothing of ours
 * left to finish) and reaped later. */
static void sender_pool_release(SenderPool *p, Sender *s)
{
	s->src = sd_event_source_disable_unref(s->src);
	if (s->sock >= 0)
		close(s->sock);
	s->sock = -1;
	if (s->pid > 0 && !s->reaped) {
		(void)kill(s->pid, SIGKILL);
		g_array_append_val(p->dying, s->pid);
	}
	s->pid = 0;
	s->reaped = false;
	s->job = NULL;
	s->state = SENDER_EMPTY;
	sender_pool_reap(p);
}

/* Arm the timer for the earliest of: a start or a write past its
 * deadline, the next try at starting senders, a look for the dying. */
static void sender_pool_arm(SenderPool *p)
{
	uint64_t at = UINT64_MAX;
	bool empty = false;

	if (p->stopping) {
		(void)sd_event_source_set_enabled(p->timer, SD_EVENT_OFF);
		return;
	}
	for (unsigned i = 0; i < p->wanted; i++) {
		const Sender *s = &p->senders[i];

		if (s->state == SENDER_STARTING)
			at = MIN(at, s->since + SENDER_START_USEC);
		else if (s->state == SENDER_BUSY)
			at = MIN(at, s->since + p->deadline_usec);
		else if (s->state == SENDER_EMPTY)
			empty = true;
	}
	if (empty)
		at = MIN(at, p->respawn_at);
	if (p->dying->len > 0)
		at = MIN(at, sender_pool_now(p) + SENDER_REAP_RETRY_USEC);
	if (at == UINT64_MAX) {
		(void)sd_event_source_set_enabled(p->timer, SD_EVENT_OFF);
		return;
	}
	(void)sd_event_source_set_time(p->timer, at);
	(void)sd_event_source_set_enabled(p->timer, SD_EVENT_ONESHOT);
}

static int sender_pool_on_sender(sd_event_source *src, int fd, uint32_t revents, void *userdata);

/* Start a sender process in the empty slot @s. Return: 0 or a negative errno. */
static int sender_pool_spawn(SenderPool *p, Sender *s)
{
	pid_t parent = getpid(), pid;
	int sv[2], r;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(sv[0]);
		close(sv[1]);
		return r;
	}
	if (pid == 0) {
		close(sv[0]);
		sender_process_main(p->port, sv[1], parent);
	}
	close(sv[1]);
	s->pool = p;
	s->pid = pid;
	s->reaped = false;
	s->sock = sv[0];
	s->job = NULL;
	s->state = SENDER_STARTING;
	s->since = sender_pool_now(p);
	r = sd_event_add_io(p->event, &s->src, sv[0], EPOLLIN, sender_pool_on_sender, s);
	if (r < 0) {
		sender_pool_release(p, s);
		return r;
	}
	return 0;
}

static void sender_pool_start_failed(SenderPool *p, Sender *s, const char *why);

/* Start a process in every empty slot, unless a failed start asked for a
 * pause or too many killed ones are not reaped yet. */
static void sender_pool_fill(SenderPool *p)
{
	if (p->stopping || sender_pool_now(p) < p->respawn_at)
		return;
	for (unsigned i = 0; i < p->wanted; i++) {
		Sender *s = &p->senders[i];
		int r;

		if (s->state != SENDER_EMPTY)
			continue;
		if (p->dying->len >= p->wanted)
			break;
		r = sender_pool_spawn(p, s);
		if (r < 0) {
			sender_pool_start_failed(p, s, strerror(-r));
			break;
		}
	}
}

/*
 * @s could not start: logged once for a run of failures, and the empty
 * slots wait a pause that doubles with each round of tries that failed
 * (the senders of one round start, and fail, together).
 */
static void sender_pool_start_failed(SenderPool *p, Sender *s, const char *why)
{
	uint64_t now = sender_pool_now(p);

	p->stats.start_failures++;
	sender_pool_release(p, s);
	if (p->failures == 0)
		log_error("a sender process cannot start on %s port %d: %s; trying again, less and "
			  "less often ('rdmacm-muxctl status' shows the senders live)",
			  p->port->dev, p->port->port, why);
	if (now >= p->respawn_at) {
		unsigned shift = MIN(p->failures, 16u);

		p->failures++;
		p->respawn_at = now + MIN(SENDER_BACKOFF_MIN_USEC << shift, SENDER_BACKOFF_MAX_USEC);
	}
	sender_pool_arm(p);
	/* With none left, what waits for one must not wait for ever. */
	p->events.changed(p->events.userdata);
}

static unsigned sender_pool_count(const SenderPool *p, SenderState state)
{
	unsigned n = 0;

	for (unsigned i = 0; i < p->wanted; i++)
		n += p->senders[i].state == state;
	return n;
}

static void sender_pool_started(SenderPool *p, Sender *s)
{
	s->state = SENDER_IDLE;
	if (p->failures > 0) {
		p->failures = 0;
		p->respawn_at = 0;
		sender_pool_fill(p);
		log_notice("sender processes start again on %s port %d: %u of %u live",
			   p->port->dev, p->port->port,
			   sender_pool_count(p, SENDER_IDLE) + sender_pool_count(p, SENDER_BUSY),
			   p->wanted);
	}
	sender_pool_arm(p);
	p->events.changed(p->events.userdata);
}

/*
 * The process of @s ended or broke its protocol: its MAD fails (it may or
 * may not have gone out), and a new process takes the slot at once.
 */
static void sender_pool_lost(SenderPool *p, Sender *s, const char *why)
{
	UmadSendJob *job = s->job;
	pid_t pid = s->pid;

	p->stats.lost++;
	sender_pool_release(p, s);
	sender_pool_fill(p);
	log_ratelimited(LOG_WARNING, NULL, "sender process %d on %s port %d %s; %s", (int)pid,
			p->port->dev, p->port->port, why,
			s->state == SENDER_EMPTY ? "no new one starts yet" : "a new one replaces it");
	sender_pool_arm(p);
	if (job)
		p->events.done(p->events.userdata, job, -EIO);
	else
		p->events.changed(p->events.userdata);
}

/* @s's write is past its deadline: stuck in the kernel. */
static void sender_pool_stuck(SenderPool *p, Sender *s)
{
	UmadSendJob *job = s->job;
	pid_t pid = s->pid;

	p->stats.timeouts++;
	sender_pool_release(p, s);
	sender_pool_fill(p);
	log_ratelimited(LOG_WARNING, NULL,
			"sender process %d on %s port %d: a write did not finish in %" PRIu64
			" ms (--send-timeout); the process is killed and replaced, and the MAD "
			"answers ETIMEDOUT",
			(int)pid, p->port->dev, p->port->port, p->deadline_usec / 1000);
	sender_pool_arm(p);
	p->events.done(p->events.userdata, job, -ETIMEDOUT);
}

/* The job @s finished with @result: back to idle. */
static void sender_pool_job_done(SenderPool *p, Sender *s, int result)
{
	UmadSendJob *job = s->job;

	s->job = NULL;
	s->state = SENDER_IDLE;
	p->stats.written++;
	sender_pool_arm(p);
	p->events.done(p->events.userdata, job, result);
}

static int sender_pool_on_sender(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	Sender *s = userdata;
	SenderPool *p = s->pool;
	int32_t result;
	ssize_t n;

	(void)src;
	(void)revents;
	n = recv(fd, &result, sizeof(result), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n != sizeof(result)) {
		if (s->state == SENDER_STARTING)
			sender_pool_start_failed(p, s, "it ended before it opened a umad fd");
		else
			sender_pool_lost(p, s, n == 0 ? "ended" : "failed");
	} else if (s->state == SENDER_STARTING) {
		/* The first word: how opening its umad fd went. */
		if (result < 0)
			sender_pool_start_failed(p, s, strerror(-result));
		else
			sender_pool_started(p, s);
	} else if (s->state == SENDER_BUSY) {
		sender_pool_job_done(p, s, result);
	} else {
		sender_pool_lost(p, s, "answered nothing asked");
	}
	return 0;
}

static int sender_pool_on_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	SenderPool *p = userdata;

	(void)src;
	sender_pool_reap(p);
	for (unsigned i = 0; i < p->wanted; i++) {
		Sender *s = &p->senders[i];

		if (s->state == SENDER_STARTING && usec >= s->since + SENDER_START_USEC)
			sender_pool_start_failed(p, s, "it did not open a umad fd within 5 s");
		else if (s->state == SENDER_BUSY && usec >= s->since + p->deadline_usec)
			sender_pool_stuck(p, s);
	}
	sender_pool_fill(p);
	sender_pool_arm(p);
	return 0;
}

/* ---- the workers' operations ---- */

static int sender_pool_start(sd_event *event, UmadPort *port, const UmadSenderConfig *cfg,
			     const UmadSendWorkerEvents *events, void *arg, void **ret)
{
	SenderPool *p = g_new0(SenderPool, 1);
	int r;

	(void)arg;
	p->event = sd_event_ref(event);
	p->port = port;
	p->events = *events;
	p->wanted = MAX(cfg->senders, 1u);
	p->deadline_usec = cfg->deadline_usec;
	p->senders = g_new0(Sender, p->wanted);
	for (unsigned i = 0; i < p->wanted; i++)
		p->senders[i].sock = -1;
	p->dying = g_array_new(FALSE, FALSE, sizeof(pid_t));
	r = sd_event_add_time(event, &p->timer, CLOCK_MONOTONIC, UINT64_MAX, 10000,
			      sender_pool_on_timer, p);
	if (r < 0) {
		/* Said by the caller (the relay's start, or a resume). */
		g_array_free(p->dying, TRUE);
		g_free(p->senders);
		sd_event_unref(p->event);
		g_free(p);
		return r;
	}
	(void)sd_event_source_set_enabled(p->timer, SD_EVENT_OFF);
	/* Handed back first: a sender that cannot even be forked is reported
	 * now, through @events, to a caller that must know its pool. */
	*ret = p;
	/* Children of a process image before a re-execution. */
	sender_pool_reap(p);
	/* All at once: the daemon's fd count stays the same from the start
	 * (the fd limit and leak checks see them), and an idle sender costs a
	 * few pages. They say whether they started on the loop. */
	sender_pool_fill(p);
	sender_pool_arm(p);
	return 0;
}

static bool sender_pool_idle(void *w)
{
	SenderPool *p = w;

	return !p->stopping && sender_pool_count(p, SENDER_IDLE) > 0;
}

static bool sender_pool_available(void *w)
{
	SenderPool *p = w;

	return !p->stopping && sender_pool_count(p, SENDER_EMPTY) < p->wanted;
}

static int sender_pool_submit(void *w, UmadSendJob *job)
{
	SenderPool *p = w;
	size_t len = offsetof(UmadBuffer, mad) + job->len;

	for (unsigned i = 0; i < p->wanted; i++) {
		Sender *s = &p->senders[i];

		if (s->state != SENDER_IDLE)
			continue;
		/* One MAD at a time per sender: its socket always has room. */
		if (send(s->sock, &job->buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len) {
			sender_pool_lost(p, s, "cannot take a MAD");
			return -EIO;
		}
		s->state = SENDER_BUSY;
		s->job = job;
		s->since = sender_pool_now(p);
		sender_pool_arm(p);
		return 0;
	}
	return -EBUSY;
}

/* Wait up to @deadline (now_usec()) for the busy senders' answers, and
 * pass on those that come. */
static void sender_pool_collect(SenderPool *p, uint64_t deadline)
{
	for (;;) {
		struct pollfd pfd[64];
		Sender *who[64];
		unsigned n = 0;
		uint64_t now = now_usec();
		int r;

		for (unsigned i = 0; i < p->wanted && n < G_N_ELEMENTS(pfd); i++)
			if (p->senders[i].state == SENDER_BUSY) {
				pfd[n] = (struct pollfd){ .fd = p->senders[i].sock, .events = POLLIN };
				who[n++] = &p->senders[i];
			}
		if (n == 0 || now >= deadline)
			return;
		r = poll(pfd, n, (int)MIN((deadline - now + 999) / 1000, 1000u));
		if (r < 0 && errno != EINTR)
			return;
		for (unsigned i = 0; r > 0 && i < n; i++) {
			Sender *s = who[i];
			UmadSendJob *job = s->job;
			int32_t result;

			if (!pfd[i].revents)
				continue;
			if (recv(s->sock, &result, sizeof(result), MSG_DONTWAIT) == sizeof(result)) {
				p->stats.written++;
			} else {
				p->stats.lost++;
				result = -EIO;
			}
			sender_pool_release(p, s);
			p->events.done(p->events.userdata, job, result);
		}
	}
}

static void sender_pool_stop(void *w, uint64_t wait_usec)
{
	SenderPool *p = w;
	uint64_t reap_until;
	unsigned cut = 0;

	if (p->stopping)
		return;
	p->stopping = true;
	sender_pool_arm(p);
	for (unsigned i = 0; i < p->wanted; i++)
		if (p->senders[i].state == SENDER_STARTING || p->senders[i].state == SENDER_IDLE)
			sender_pool_release(p, &p->senders[i]);
	sender_pool_collect(p, now_usec() + wait_usec);
	for (unsigned i = 0; i < p->wanted; i++) {
		Sender *s = &p->senders[i];
		UmadSendJob *job = s->job;

		if (s->state != SENDER_BUSY)
			continue;
		p->stats.timeouts++;
		cut++;
		sender_pool_release(p, s);
		p->events.done(p->events.userdata, job, -ETIMEDOUT);
	}
	if (cut > 0)
		log_warning("%u writes of sender processes on %s port %d did not finish within %" PRIu64
			    " ms of the stop: their MADs answer ETIMEDOUT (they may or may not have "
			    "gone out)",
			    cut, p->port->dev, p->port->port, wait_usec / 1000);
	/* Killed processes end at once unless the kernel holds them in a
	 * write; those are reaped later (by init, or by the next process
	 * image after a re-execution). */
	reap_until = now_usec() + SENDER_STOP_REAP_USEC;
	while (p->dying->len > 0 && now_usec() < reap_until) {
		sender_pool_reap(p);
		if (p->dying->len > 0)
			(void)poll(NULL, 0, 5);
	}
}

static void sender_pool_stats(void *w, UmadSenderStats *ret)
{
	SenderPool *p = w;

	*ret = p->stats;
	ret->wanted = p->wanted;
	ret->live = sender_pool_count(p, SENDER_IDLE) + sender_pool_count(p, SENDER_BUSY);
	ret->starting = sender_pool_count(p, SENDER_STARTING);
}

static void sender_pool_free(void *w)
{
	SenderPool *p = w;

	if (!p)
		return;
	sender_pool_stop(p, 0);
	sd_event_source_disable_unref(p->timer);
	g_array_free(p->dying, TRUE);
	g_free(p->senders);
	sd_event_unref(p->event);
	g_free(p);
}

const UmadSendWorkersOps sender_pool_ops = UMAD_SEND_WORKERS_OPS(sender_pool);
