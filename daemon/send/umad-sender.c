/* SPDX-License-Identifier: MIT */
/* Owns the sender processes, the per-destination queues that feed them, and
 * the standing of each destination (umad-sender.h). */
#include "umad-sender.h"

#include <errno.h>
#include <glib.h>
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

/* Past this many destinations, idle ones are forgotten. */
#define UMAD_SENDER_MAX_DESTS 4096u

/* Slots of the cache of destinations looked up last (UmadSender.recent). */
#define UMAD_SENDER_RECENT 16

/* How long umad_sender_new() waits for a new sender to open its umad fd. */
#define UMAD_SENDER_START_MS 5000

/* The fd a sender process reads its MADs from. */
#define UMAD_SENDER_SOCK_FD 3

/* Where a MAD goes: the source GID index and destination GID, or the DLID. */
typedef struct UmadSendKey {
	uint8_t gid[GID_LEN];
	uint16_t dlid;
	uint8_t gid_index;
	uint8_t grh;
} UmadSendKey;

struct UmadSendDest {
	UmadSendKey key;
	uint64_t fast_until;
	uint64_t fail_until;
	int fail_err;
	unsigned pending; /* jobs queued for it and not finished */
	UmadSendJob *head, *tail; /* not handed to a sender yet */
	bool busy;		  /* a sender writes one of its MADs */
	bool ready;		  /* on the ready list */
	struct UmadSendDest *next_ready;
};

/* One sender process, seen from the loop. */
typedef struct UmadSenderWorker {
	UmadSender *sender;
	pid_t pid;    /* 0 for an empty slot */
	int sock;     /* our end of its socket, -1 for an empty slot */
	bool started; /* it said that its umad fd is open */
	sd_event_source *src;
	UmadSendJob *job; /* the MAD it writes now, or NULL */
} UmadSenderWorker;

struct UmadSender {
	sd_event *event;
	UmadPort *port;
	UmadSenderConfig cfg;
	UmadSendDoneFn done;
	void *userdata;
	GHashTable *dests; /* UmadSendKey -> UmadSendDest (owned) */
	/* The destinations looked up last, by a cheap slot of their key: every
	 * MAD the loop sends looks its destination up (umad_sender_route()), and
	 * a hash lookup of a 20-byte key is most of what that costs. */
	UmadSendDest *recent[UMAD_SENDER_RECENT];
	unsigned pending;
	uint64_t written; /* MADs the sender processes wrote, since the start */
	UmadSenderWorker *workers; /* cfg.senders slots */
	unsigned live;		   /* slots with a process */
	UmadSendDest *ready_head, *ready_tail; /* destinations with a MAD to hand out */
	bool stopping;
};

static guint umad_sender_key_hash(gconstpointer p)
{
	const UmadSendKey *k = p;

	return gid_hash(k->gid) ^ ((guint)k->dlid << 8) ^ k->gid_index ^ ((guint)k->grh << 24);
}

static gboolean umad_sender_key_equal(gconstpointer a, gconstpointer b)
{
	return memcmp(a, b, sizeof(UmadSendKey)) == 0;
}

static UmadSendKey umad_sender_key(const UmadBuffer *buf)
{
	UmadSendKey k = { .grh = buf->hdr.addr.grh_present ? 1 : 0 };

	if (k.grh) {
		memcpy(k.gid, buf->hdr.addr.gid, GID_LEN);
		k.gid_index = buf->hdr.addr.gid_index;
	} else {
		k.dlid = buf->hdr.addr.lid;
	}
	return k;
}

/* Whether @err says the destination did not answer (ARP, ND). */
static bool umad_sender_unreachable(int err)
{
	return err == -ETIMEDOUT || err == -EHOSTUNREACH || err == -ENETUNREACH;
}

static void umad_sender_update(UmadSender *s, UmadSendDest *d, int result, uint64_t now)
{
	if (result == 0) {
		d->fast_until = now + s->cfg.fast_usec;
		d->fail_until = 0;
	} else if (umad_sender_unreachable(result)) {
		d->fast_until = 0;
		d->fail_until = now + s->cfg.fail_usec;
		d->fail_err = result;
	}
}

/* Forget idle destinations whose standing ran out, when there are many. */
static void umad_sender_prune(UmadSender *s, uint64_t now)
{
	GHashTableIter it;
	gpointer value;

	if (g_hash_table_size(s->dests) < UMAD_SENDER_MAX_DESTS)
		return;
	memset(s->recent, 0, sizeof(s->recent));
	g_hash_table_iter_init(&it, s->dests);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		UmadSendDest *d = value;

		if (d->pending == 0 && d->fast_until <= now && d->fail_until <= now)
			g_hash_table_iter_remove(&it);
	}
	/* Still too many that are fresh: forget the idle ones anyway. */
	if (g_hash_table_size(s->dests) >= UMAD_SENDER_MAX_DESTS) {
		g_hash_table_iter_init(&it, s->dests);
		while (g_hash_table_iter_next(&it, NULL, &value))
			if (((UmadSendDest *)value)->pending == 0)
				g_hash_table_iter_remove(&it);
	}
}

/* The destination of @k, or NULL: the recent slot first, then the table. */
static UmadSendDest *umad_sender_find(UmadSender *s, const UmadSendKey *k)
{
	unsigned slot = (k->gid[15] ^ k->gid_index ^ k->dlid) % UMAD_SENDER_RECENT;
	UmadSendDest *d = s->recent[slot];

	if (d && memcmp(&d->key, k, sizeof(*k)) == 0)
		return d;
	d = g_hash_table_lookup(s->dests, k);
	if (d)
		s->recent[slot] = d;
	return d;
}

int umad_sender_route(UmadSender *s, const UmadBuffer *buf, uint64_t now, UmadSendDest **dest)
{
	UmadSendKey k = umad_sender_key(buf);
	UmadSendDest *d = umad_sender_find(s, &k);

	*dest = NULL;
	if (!d)
		return UMAD_SEND_QUEUE;
	/* Behind MADs still queued for it: keep their order. */
	if (d->pending > 0)
		return UMAD_SEND_QUEUE;
	if (now < d->fail_until)
		return d->fail_err;
	if (now >= d->fast_until)
		return UMAD_SEND_QUEUE;
	*dest = d;
	return UMAD_SEND_NOW;
}

void umad_sender_note(UmadSender *s, UmadSendDest *dest, int result, uint64_t now)
{
	umad_sender_update(s, dest, result, now);
}

unsigned umad_sender_pending(const UmadSender *s)
{
	return s->pending;
}

uint64_t umad_sender_written(const UmadSender *s)
{
	return s->written;
}

/* ---- the sender processes ---- */

static void umad_sender_push_ready(UmadSender *s, UmadSendDest *d)
{
	d->ready = true;
	d->next_ready = NULL;
	if (s->ready_tail)
		s->ready_tail->next_ready = d;
	else
		s->ready_head = d;
	s->ready_tail = d;
}

static UmadSendDest *umad_sender_pop_ready(UmadSender *s)
{
	UmadSendDest *d = s->ready_head;

	s->ready_head = d->next_ready;
	if (!s->ready_head)
		s->ready_tail = NULL;
	d->ready = false;
	return d;
}

/*
 * A sender process: open a umad fd of its own, say how that went, then
 * write each MAD that comes on its socket and answer with the write's
 * result, until the socket ends. It never returns.
 */
static G_GNUC_NORETURN void umad_sender_process_main(const UmadPort *port, int sock, pid_t parent)
{
	static const int daemon_signals[] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1 };
	UmadSendFd fd = { .fd = -1 };
	UmadBuffer buf;
	sigset_t none;
	int32_t r;

	/* The daemon's signals are the daemon's: systemd's SIGTERM reaches
	 * every process of the unit, and a sender ends only when the daemon
	 * closes its socket, after the write it is in, whose result the
	 * daemon then passes on before it exits or hands over. */
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
	if (sock != UMAD_SENDER_SOCK_FD && dup2(sock, UMAD_SENDER_SOCK_FD) < 0)
		_exit(1);
	if (close_range(UMAD_SENDER_SOCK_FD + 1, ~0u, 0) < 0) {
		/* A kernel before 5.9, or a filter that refuses it. */
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
			_exit(1);
		for (rlim_t n = UMAD_SENDER_SOCK_FD + 1; n < rl.rlim_cur; n++)
			(void)close((int)n);
	}
	r = umad_port_open_send_fd(port, &fd);
	if (send(UMAD_SENDER_SOCK_FD, &r, sizeof(r), MSG_NOSIGNAL) != sizeof(r) || r < 0)
		_exit(1);
	for (;;) {
		ssize_t n = recv(UMAD_SENDER_SOCK_FD, &buf, sizeof(buf), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= (ssize_t)offsetof(UmadBuffer, mad))
			break;
		r = umad_port_send_on(&fd, &buf, (size_t)n - offsetof(UmadBuffer, mad));
		if (send(UMAD_SENDER_SOCK_FD, &r, sizeof(r), MSG_NOSIGNAL) != sizeof(r))
			break;
	}
	umad_port_close_send_fd(&fd);
	_exit(0);
}

static int umad_sender_on_worker(sd_event_source *src, int fd, uint32_t revents, void *userdata);

/* Start a sender process in the empty slot @w. Return: 0 or a negative errno. */
static int umad_sender_spawn(UmadSender *s, UmadSenderWorker *w)
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
		umad_sender_process_main(s->port, sv[1], parent);
	}
	close(sv[1]);
	r = sd_event_add_io(s->event, &w->src, sv[0], EPOLLIN, umad_sender_on_worker, w);
	if (r < 0) {
		close(sv[0]);
		(void)kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		return r;
	}
	w->sender = s;
	w->pid = pid;
	w->sock = sv[0];
	w->started = false;
	w->job = NULL;
	s->live++;
	return 0;
}

/* Empty the slot of @w: its process ends (it has nothing of ours left). */
static void umad_sender_reap(UmadSender *s, UmadSenderWorker *w)
{
	w->src = sd_event_source_disable_unref(w->src);
	close(w->sock);
	w->sock = -1;
	/* Mostly it is gone already (its socket ended); one that broke the
	 * protocol may not be. */
	(void)kill(w->pid, SIGKILL);
	(void)waitpid(w->pid, NULL, 0);
	w->pid = 0;
	s->live--;
}

/* Finish @list, jobs taken off their destinations (which know it already). */
static void umad_sender_finish(UmadSender *s, UmadSendJob *list, uint64_t now)
{
	while (list) {
		UmadSendJob *job = list;
		UmadSendDest *d = job->dest;

		list = job->next;
		job->next = NULL;
		d->pending--;
		s->pending--;
		umad_sender_update(s, d, job->result, now);
		s->done(s->userdata, job);
	}
	umad_sender_prune(s, now);
}

/*
 * @d's write by a sender just went through: the MADs queued behind it go
 * out from the loop now, in order, as new MADs to @d will
 * (umad_sender_route()). Handed to the senders one at a time instead, they
 * would keep @d's queue from ever draining while its client keeps sending
 * (each new MAD waits behind the last), and @d would stay on the slow path
 * for good: after a restart, every destination did, at a third of the rate.
 * Return: the jobs written, in order, to be finished after the first one.
 */
static UmadSendJob *umad_sender_write_queued(UmadSender *s, UmadSendDest *d)
{
	UmadSendJob *list = NULL, **tail = &list;

	while (d->head) {
		UmadSendJob *job = d->head;

		d->head = job->next;
		if (!d->head)
			d->tail = NULL;
		job->next = NULL;
		job->result = umad_port_send(s->port, &job->buf, job->len);
		*tail = job;
		tail = &job->next;
		/* A failure is for the senders to retry the rest with. */
		if (job->result < 0)
			break;
	}
	return list;
}

/*
 * @d did not answer: the MADs queued behind the one that found out fail
 * the same way at once, as new ones to @d do for a while (the negative
 * cache), instead of waiting their turn for a sender and the same timeout
 * each. Return: those jobs, in order.
 */
static UmadSendJob *umad_sender_fail_queued(UmadSendDest *d, int err)
{
	UmadSendJob *list = d->head;

	for (UmadSendJob *j = list; j; j = j->next)
		j->result = err;
	d->head = d->tail = NULL;
	return list;
}

/* Take @w's job back from it, finished with @result; the MADs queued
 * behind it go along when @result says how they would go
 * (umad_sender_write_queued(), umad_sender_fail_queued()). */
static UmadSendJob *umad_sender_take_job(UmadSender *s, UmadSenderWorker *w, int result)
{
	UmadSendJob *job = w->job;
	UmadSendDest *d = job->dest;

	w->job = NULL;
	d->busy = false;
	job->result = result;
	job->next = NULL;
	if (result == 0 && !s->stopping)
		job->next = umad_sender_write_queued(s, d);
	else if (umad_sender_unreachable(result))
		job->next = umad_sender_fail_queued(d, result);
	if (d->head && !d->ready)
		umad_sender_push_ready(s, d);
	return job;
}

/* Every job not handed out yet, taken off its destination, finished with @err. */
static void umad_sender_cancel_queued(UmadSender *s, int err)
{
	UmadSendJob *left = NULL, **tail = &left;
	GHashTableIter it;
	gpointer value;

	g_hash_table_iter_init(&it, s->dests);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		UmadSendDest *d = value;

		for (UmadSendJob *j = d->head; j; j = j->next) {
			j->result = err;
			*tail = j;
			tail = &j->next;
		}
		*tail = NULL;
		d->head = d->tail = NULL;
		d->ready = false;
	}
	s->ready_head = s->ready_tail = NULL;
	umad_sender_finish(s, left, event_now_usec(s->event));
}

/*
 * The process of @w ended or broke its protocol: its MAD fails (it may or
 * may not have gone out), and a new process takes the slot. Without any
 * sender left, the queued MADs fail too rather than wait for ever.
 */
static void umad_sender_lost(UmadSender *s, UmadSenderWorker *w, const char *why)
{
	UmadSendJob *job = w->job ? umad_sender_take_job(s, w, -EIO) : NULL;
	pid_t pid = w->pid;
	int r;

	umad_sender_reap(s, w);
	r = s->stopping ? -ECANCELED : umad_sender_spawn(s, w);
	if (r < 0 && r != -ECANCELED)
		log_error("sender process %d on %s port %d %s, and no new one starts: %s", (int)pid,
			  s->port->dev, s->port->port, why, strerror(-r));
	else if (r == 0)
		log_warning("sender process %d on %s port %d %s; process %d replaces it", (int)pid,
			    s->port->dev, s->port->port, why, (int)w->pid);
	if (job)
		umad_sender_finish(s, job, event_now_usec(s->event));
	if (s->live == 0 && !s->stopping)
		umad_sender_cancel_queued(s, -EIO);
}

/* Hand the ready destinations' next MADs to the idle senders. */
static void umad_sender_dispatch(UmadSender *s)
{
	for (unsigned i = 0; i < s->cfg.senders && s->ready_head; i++) {
		UmadSenderWorker *w = &s->workers[i];
		UmadSendDest *d;
		UmadSendJob *job;
		size_t len;

		if (w->sock < 0 || !w->started || w->job)
			continue;
		d = umad_sender_pop_ready(s);
		job = d->head;
		d->head = job->next;
		if (!d->head)
			d->tail = NULL;
		d->busy = true;
		w->job = job;
		/* One MAD at a time per sender: its socket always has room. */
		len = offsetof(UmadBuffer, mad) + job->len;
		if (send(w->sock, &job->buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len)
			umad_sender_lost(s, w, "cannot take a MAD");
	}
}

static int umad_sender_on_worker(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	UmadSenderWorker *w = userdata;
	UmadSender *s = w->sender;
	int32_t result;
	ssize_t n;

	(void)src;
	(void)revents;
	n = recv(fd, &result, sizeof(result), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n != sizeof(result)) {
		umad_sender_lost(s, w, n == 0 ? "ended" : "failed");
	} else if (!w->started) {
		/* The first word: how opening its umad fd went. */
		if (result < 0) {
			log_error("a sender process cannot open a umad fd on %s port %d: %s",
				  s->port->dev, s->port->port, strerror(-result));
			umad_sender_reap(s, w);
			if (s->live == 0)
				umad_sender_cancel_queued(s, -EIO);
		} else {
			w->started = true;
		}
	} else if (w->job) {
		s->written++;
		umad_sender_finish(s, umad_sender_take_job(s, w, result), event_now_usec(s->event));
	} else {
		umad_sender_lost(s, w, "answered nothing asked");
	}
	umad_sender_dispatch(s);
	return 0;
}

int umad_sender_queue(UmadSender *s, UmadSendJob *job)
{
	UmadSendKey k = umad_sender_key(&job->buf);
	UmadSendDest *d;

	if (s->pending >= s->cfg.max_queued || s->live == 0)
		return -EAGAIN;
	d = g_hash_table_lookup(s->dests, &k);
	if (!d) {
		d = g_new0(UmadSendDest, 1);
		d->key = k;
		g_hash_table_insert(s->dests, &d->key, d);
	}
	job->dest = d;
	job->next = NULL;
	d->pending++;
	s->pending++;
	if (d->tail)
		d->tail->next = job;
	else
		d->head = job;
	d->tail = job;
	if (!d->busy && !d->ready)
		umad_sender_push_ready(s, d);
	umad_sender_dispatch(s);
	return 0;
}

/* Wait (before the loop runs) for @w's first word. Return: 0 or a negative errno. */
static int umad_sender_wait_started(UmadSenderWorker *w)
{
	struct pollfd p = { .fd = w->sock, .events = POLLIN };
	int32_t result;
	ssize_t n;
	int r;

	do
		r = poll(&p, 1, UMAD_SENDER_START_MS);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return -ETIMEDOUT;
	n = recv(w->sock, &result, sizeof(result), MSG_DONTWAIT);
	if (n != sizeof(result))
		return n < 0 ? -errno : -EPIPE;
	if (result < 0)
		return result;
	w->started = true;
	return 0;
}

int umad_sender_new(sd_event *event, UmadPort *port, const UmadSenderConfig *cfg,
		    UmadSendDoneFn done, void *userdata, UmadSender **ret)
{
	UmadSender *s = g_new0(UmadSender, 1);
	int r = 0;

	s->event = sd_event_ref(event);
	s->port = port;
	s->cfg = *cfg;
	if (s->cfg.senders == 0)
		s->cfg.senders = 1;
	s->done = done;
	s->userdata = userdata;
	s->dests = g_hash_table_new_full(umad_sender_key_hash, umad_sender_key_equal, NULL, g_free);
	s->workers = g_new0(UmadSenderWorker, s->cfg.senders);
	for (unsigned i = 0; i < s->cfg.senders; i++)
		s->workers[i].sock = -1;
	/* All at once: the daemon's fd count stays the same from the start
	 * (the fd limit and leak checks see them), and an idle sender costs
	 * a few pages. */
	for (unsigned i = 0; i < s->cfg.senders; i++) {
		UmadSenderWorker *w = &s->workers[i];

		r = umad_sender_spawn(s, w);
		if (r < 0)
			break;
		r = umad_sender_wait_started(w);
		if (r < 0) {
			umad_sender_reap(s, w);
			break;
		}
	}
	if (s->live == 0) {
		log_error("cannot start a sender process with a umad fd on %s port %d: %s",
			  port->dev, port->port, strerror(-r));
		umad_sender_free(s);
		return r;
	}
	if (s->live < s->cfg.senders)
		log_warning("only %u of %u sender processes on %s port %d: %s", s->live,
			    s->cfg.senders, port->dev, port->port, strerror(-r));
	*ret = s;
	return 0;
}

void umad_sender_free(UmadSender *s)
{
	if (!s)
		return;
	s->stopping = true;
	/* No more MADs: each sender ends after the one it writes, which may be
	 * waiting for an address. */
	for (unsigned i = 0; s->workers && i < s->cfg.senders; i++)
		if (s->workers[i].sock >= 0)
			(void)shutdown(s->workers[i].sock, SHUT_WR);
	for (unsigned i = 0; s->workers && i < s->cfg.senders; i++) {
		UmadSenderWorker *w = &s->workers[i];
		int32_t result;
		ssize_t n;

		if (w->sock < 0)
			continue;
		/* What was written is reported as it went. */
		if (w->job) {
			do
				n = recv(w->sock, &result, sizeof(result), 0);
			while (n < 0 && errno == EINTR);
			umad_sender_finish(s,
					   umad_sender_take_job(s, w,
								n == sizeof(result) ? result : -EIO),
					   event_now_usec(s->event));
		}
		umad_sender_reap(s, w);
	}
	/* The rest is cancelled. */
	if (s->dests) {
		umad_sender_cancel_queued(s, -ECANCELED);
		g_hash_table_destroy(s->dests);
	}
	g_free(s->workers);
	sd_event_unref(s->event);
	g_free(s);
}
