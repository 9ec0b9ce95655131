/* SPDX-License-Identifier: MIT */
/* Owns the sender threads, their per-destination queues and the standing
 * of each destination (umad-sender.h). */
#include "umad-sender.h"

#include <errno.h>
#include <glib.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* Past this many destinations, idle ones are forgotten. */
#define UMAD_SENDER_MAX_DESTS 4096u

/* Slots of the cache of destinations looked up last (UmadSender.recent). */
#define UMAD_SENDER_RECENT 16

/* Where a MAD goes: the source GID index and destination GID, or the DLID. */
typedef struct UmadSendKey {
	uint8_t gid[GID_LEN];
	uint16_t dlid;
	uint8_t gid_index;
	uint8_t grh;
} UmadSendKey;

struct UmadSendDest {
	UmadSendKey key;
	/* the loop's */
	uint64_t fast_until;
	uint64_t fail_until;
	int fail_err;
	unsigned pending; /* jobs queued for it and not finished */
	/* under the sender's lock */
	UmadSendJob *head, *tail;
	bool busy;  /* a thread writes its head */
	bool ready; /* on the ready list */
	struct UmadSendDest *next_ready;
};

typedef struct UmadSenderThread {
	UmadSender *sender;
	pthread_t tid;
	UmadSendFd fd;
} UmadSenderThread;

struct UmadSender {
	sd_event *event;
	UmadPort *port;
	UmadSenderConfig cfg;
	UmadSendDoneFn done;
	void *userdata;
	/* the loop's */
	GHashTable *dests; /* UmadSendKey -> UmadSendDest (owned) */
	/* The destinations looked up last, by a cheap slot of their key: every
	 * MAD the loop sends looks its destination up (umad_sender_route()), and
	 * a hash lookup of a 20-byte key is most of what that costs. */
	UmadSendDest *recent[UMAD_SENDER_RECENT];
	unsigned pending;
	unsigned n_threads;
	UmadSenderThread *threads;
	int efd;
	sd_event_source *efd_src;
	/* shared, under @lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	UmadSendDest *ready_head, *ready_tail;
	UmadSendJob *done_head, *done_tail;
	unsigned idle_threads;
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

/* ---- the threads ---- */

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

static void *umad_sender_thread_main(void *arg)
{
	UmadSenderThread *th = arg;
	UmadSender *s = th->sender;
	uint64_t one = 1;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		UmadSendDest *d;
		UmadSendJob *job;

		while (!s->stopping && !s->ready_head) {
			s->idle_threads++;
			pthread_cond_wait(&s->cond, &s->lock);
			s->idle_threads--;
		}
		if (s->stopping)
			break;
		d = s->ready_head;
		s->ready_head = d->next_ready;
		if (!s->ready_head)
			s->ready_tail = NULL;
		d->ready = false;
		job = d->head;
		d->head = job->next;
		if (!d->head)
			d->tail = NULL;
		d->busy = true;
		pthread_mutex_unlock(&s->lock);

		job->result = umad_port_send_on(&th->fd, &job->buf, job->len);

		pthread_mutex_lock(&s->lock);
		job->next = NULL;
		if (s->done_tail)
			s->done_tail->next = job;
		else
			s->done_head = job;
		s->done_tail = job;
		d->busy = false;
		if (d->head)
			umad_sender_push_ready(s, d);
		/* eventfd writes are thread-safe; outside the lock is enough,
		 * but inside keeps the order simple */
		(void)!write(s->efd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* One more thread, with its own umad fd. Return: 0 or a negative errno. */
static int umad_sender_spawn(UmadSender *s)
{
	UmadSenderThread *th = &s->threads[s->n_threads];
	int r;

	th->sender = s;
	th->fd.fd = -1;
	r = umad_port_open_send_fd(s->port, &th->fd);
	if (r < 0)
		return r;
	r = -pthread_create(&th->tid, NULL, umad_sender_thread_main, th);
	if (r < 0) {
		umad_port_close_send_fd(&th->fd);
		return r;
	}
	s->n_threads++;
	return 0;
}

int umad_sender_queue(UmadSender *s, UmadSendJob *job)
{
	UmadSendKey k = umad_sender_key(&job->buf);
	UmadSendDest *d;

	if (s->pending >= s->cfg.max_queued)
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

	pthread_mutex_lock(&s->lock);
	if (d->tail)
		d->tail->next = job;
	else
		d->head = job;
	d->tail = job;
	if (!d->busy && !d->ready)
		umad_sender_push_ready(s, d);
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* Finish the jobs the threads are done with, on the loop. */
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

static int umad_sender_on_done(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	UmadSender *s = userdata;
	UmadSendJob *list;
	uint64_t count, now;

	(void)src;
	(void)revents;
	(void)!read(fd, &count, sizeof(count));
	pthread_mutex_lock(&s->lock);
	list = s->done_head;
	s->done_head = s->done_tail = NULL;
	pthread_mutex_unlock(&s->lock);
	if (sd_event_now(s->event, CLOCK_MONOTONIC, &now) < 0)
		now = now_usec();
	umad_sender_finish(s, list, now);
	return 0;
}

int umad_sender_new(sd_event *event, UmadPort *port, const UmadSenderConfig *cfg,
		    UmadSendDoneFn done, void *userdata, UmadSender **ret)
{
	UmadSender *s = g_new0(UmadSender, 1);
	int r;

	s->event = sd_event_ref(event);
	s->port = port;
	s->cfg = *cfg;
	if (s->cfg.threads == 0)
		s->cfg.threads = 1;
	s->done = done;
	s->userdata = userdata;
	s->dests = g_hash_table_new_full(umad_sender_key_hash, umad_sender_key_equal, NULL, g_free);
	s->threads = g_new0(UmadSenderThread, s->cfg.threads);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->efd < 0) {
		r = -errno;
		umad_sender_free(s);
		return r;
	}
	r = sd_event_add_io(event, &s->efd_src, s->efd, EPOLLIN, umad_sender_on_done, s);
	if (r < 0) {
		umad_sender_free(s);
		return r;
	}
	/* All at once: the daemon's fd count stays the same from the start
	 * (the fd limit and leak checks see them), and an idle thread costs
	 * only its stack. */
	while (s->n_threads < s->cfg.threads) {
		r = umad_sender_spawn(s);
		if (r < 0)
			break;
	}
	if (s->n_threads == 0) {
		log_error("cannot open a umad fd for a sender thread on %s port %d: %s",
			  port->dev, port->port, strerror(-r));
		umad_sender_free(s);
		return r;
	}
	if (s->n_threads < s->cfg.threads)
		log_warning("only %u of %u sender threads on %s port %d: %s", s->n_threads,
			    s->cfg.threads, port->dev, port->port, strerror(-r));
	*ret = s;
	return 0;
}

void umad_sender_free(UmadSender *s)
{
	UmadSendJob *left = NULL, **tail = &left;
	GHashTableIter it;
	gpointer value;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	/* A thread in a write that waits for an address ends with it. */
	for (unsigned i = 0; i < s->n_threads; i++) {
		pthread_join(s->threads[i].tid, NULL);
		umad_port_close_send_fd(&s->threads[i].fd);
	}
	/* What was written is reported as it went; the rest is cancelled. */
	if (s->dests) {
		g_hash_table_iter_init(&it, s->dests);
		while (g_hash_table_iter_next(&it, NULL, &value)) {
			UmadSendDest *d = value;

			for (UmadSendJob *j = d->head; j; j = j->next) {
				j->result = -ECANCELED;
				*tail = j;
				tail = &j->next;
			}
			*tail = NULL;
			d->head = d->tail = NULL;
		}
		*tail = s->done_head;
		s->done_head = s->done_tail = NULL;
		umad_sender_finish(s, left, now_usec());
		g_hash_table_destroy(s->dests);
	}
	sd_event_source_disable_unref(s->efd_src);
	if (s->efd >= 0)
		close(s->efd);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	g_free(s->threads);
	sd_event_unref(s->event);
	g_free(s);
}
