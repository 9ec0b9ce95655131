/* SPDX-License-Identifier: MIT */
/* Owns the send policy (send-policy.h): the destinations, their standing
 * and queues, and the order in which queued MADs go to the workers. */
#include "send-policy.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "util.h"

/* Slots of the cache of destinations looked up last (SendPolicy.recent). */
#define SEND_POLICY_RECENT 16

/* Where a MAD goes: the source GID index and destination GID, or the DLID. */
typedef struct SendKey {
	uint8_t gid[GID_LEN];
	uint16_t dlid;
	uint8_t gid_index;
	uint8_t grh;
} SendKey;

struct SendDest {
	SendKey key;
	uint64_t fast_until;
	uint64_t fail_until;
	int fail_err;
	unsigned pending; /* jobs queued for it and not finished */
	GQueue jobs;	/* UmadSendJob, not handed out yet */
	bool busy;	/* one of its MADs is being written */
	bool ready;	/* on the ready list */
	GList ready_link;
};

struct SendPolicy {
	SendPolicyConfig cfg;
	GHashTable *dests; /* SendKey -> SendDest (owned) */
	/* The destinations looked up last, by a cheap slot of their key: every
	 * MAD the loop sends looks its destination up (send_policy_route()),
	 * and a hash lookup of a 20-byte key is most of what that costs. */
	SendDest *recent[SEND_POLICY_RECENT];
	unsigned pending;
	GQueue ready; /* SendDest with a MAD to hand out, by ready_link */
};

static guint send_key_hash(gconstpointer p)
{
	const SendKey *k = p;

	return gid_hash(k->gid) ^ ((guint)k->dlid << 8) ^ k->gid_index ^ ((guint)k->grh << 24);
}

static gboolean send_key_equal(gconstpointer a, gconstpointer b)
{
	return memcmp(a, b, sizeof(SendKey)) == 0;
}

static SendKey send_key(const UmadBuffer *buf)
{
	SendKey k = { .grh = buf->hdr.addr.grh_present ? 1 : 0 };

	if (k.grh) {
		memcpy(k.gid, buf->hdr.addr.gid, GID_LEN);
		k.gid_index = buf->hdr.addr.gid_index;
	} else {
		k.dlid = buf->hdr.addr.lid;
	}
	return k;
}

/* Whether @err says the destination did not answer (ARP, ND, or a write
 * that did not finish in time). */
static bool send_unreachable(int err)
{
	return err == -ETIMEDOUT || err == -EHOSTUNREACH || err == -ENETUNREACH;
}

SendPolicy *send_policy_new(const SendPolicyConfig *cfg)
{
	SendPolicy *p = g_new0(SendPolicy, 1);

	p->cfg = *cfg;
	if (p->cfg.max_dests == 0)
		p->cfg.max_dests = 4096;
	p->dests = g_hash_table_new_full(send_key_hash, send_key_equal, NULL, g_free);
	return p;
}

void send_policy_free(SendPolicy *p)
{
	if (!p)
		return;
	g_hash_table_destroy(p->dests);
	g_free(p);
}

static void send_policy_update(SendPolicy *p, SendDest *d, int result, uint64_t now)
{
	if (result == 0) {
		d->fast_until = now + p->cfg.fast_usec;
		d->fail_until = 0;
	} else if (send_unreachable(result)) {
		d->fast_until = 0;
		d->fail_until = now + p->cfg.fail_usec;
		d->fail_err = result;
	}
}

/* Forget idle destinations whose standing ran out, when there are many. */
static void send_policy_prune(SendPolicy *p, uint64_t now)
{
	GHashTableIter it;
	gpointer value;

	if (g_hash_table_size(p->dests) < p->cfg.max_dests)
		return;
	memset(p->recent, 0, sizeof(p->recent));
	g_hash_table_iter_init(&it, p->dests);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		SendDest *d = value;

		if (d->pending == 0 && d->fast_until <= now && d->fail_until <= now)
			g_hash_table_iter_remove(&it);
	}
	/* Still too many that are fresh: forget the idle ones anyway. */
	if (g_hash_table_size(p->dests) >= p->cfg.max_dests) {
		g_hash_table_iter_init(&it, p->dests);
		while (g_hash_table_iter_next(&it, NULL, &value))
			if (((SendDest *)value)->pending == 0)
				g_hash_table_iter_remove(&it);
	}
}

/* The destination of @k, or NULL: the recent slot first, then the table. */
static SendDest *send_policy_find(SendPolicy *p, const SendKey *k)
{
	unsigned slot = (k->gid[15] ^ k->gid_index ^ k->dlid) % SEND_POLICY_RECENT;
	SendDest *d = p->recent[slot];

	if (d && memcmp(&d->key, k, sizeof(*k)) == 0)
		return d;
	d = g_hash_table_lookup(p->dests, k);
	if (d)
		p->recent[slot] = d;
	return d;
}

int send_policy_route(SendPolicy *p, const UmadBuffer *buf, uint64_t now, SendDest **dest)
{
	SendKey k = send_key(buf);
	SendDest *d = send_policy_find(p, &k);

	*dest = NULL;
	if (!d)
		return SEND_ROUTE_QUEUE;
	/* Behind MADs still queued for it: keep their order. */
	if (d->pending > 0)
		return SEND_ROUTE_QUEUE;
	if (now < d->fail_until)
		return d->fail_err;
	if (now >= d->fast_until)
		return SEND_ROUTE_QUEUE;
	*dest = d;
	return SEND_ROUTE_NOW;
}

void send_policy_note(SendPolicy *p, SendDest *dest, int result, uint64_t now)
{
	send_policy_update(p, dest, result, now);
}

/* The queues link their items through a GList each embeds: nothing is
 * allocated per MAD. */
static void send_policy_push_ready(SendPolicy *p, SendDest *d)
{
	d->ready = true;
	d->ready_link.data = d;
	g_queue_push_tail_link(&p->ready, &d->ready_link);
}

static SendDest *send_policy_pop_ready(SendPolicy *p)
{
	SendDest *d = g_queue_pop_head_link(&p->ready)->data;

	d->ready = false;
	return d;
}

/* Take @d's head job off its queue. */
static UmadSendJob *send_policy_pop_head(SendDest *d)
{
	return g_queue_pop_head_link(&d->jobs)->data;
}

int send_policy_queue(SendPolicy *p, UmadSendJob *job, uint64_t now)
{
	SendKey k = send_key(&job->buf);
	SendDest *d;

	if (p->pending >= p->cfg.max_queued)
		return -EAGAIN;
	d = g_hash_table_lookup(p->dests, &k);
	if (!d) {
		/* Room first: a destination is forgotten only here, so one
		 * that a caller holds (a job's, a route's) stays valid. */
		send_policy_prune(p, now);
		d = g_new0(SendDest, 1);
		d->key = k;
		g_hash_table_insert(p->dests, &d->key, d);
	}
	job->dest = d;
	job->link.data = job;
	d->pending++;
	p->pending++;
	g_queue_push_tail_link(&d->jobs, &job->link);
	if (!d->busy && !d->ready)
		send_policy_push_ready(p, d);
	return 0;
}

UmadSendJob *send_policy_next(SendPolicy *p)
{
	SendDest *d;

	if (g_queue_is_empty(&p->ready))
		return NULL;
	d = send_policy_pop_ready(p);
	d->busy = true;
	return send_policy_pop_head(d);
}

void send_policy_finish(SendPolicy *p, UmadSendJob *job, int result, uint64_t now)
{
	SendDest *d = job->dest;

	job->result = result;
	d->busy = false;
	d->pending--;
	p->pending--;
	send_policy_update(p, d, result, now);
	/* What is left waits for a worker, unless send_policy_next_behind()
	 * takes it first. */
	if (!g_queue_is_empty(&d->jobs) && !d->ready)
		send_policy_push_ready(p, d);
}

/* Take @d off the ready list. */
static void send_policy_unready(SendPolicy *p, SendDest *d)
{
	g_queue_unlink(&p->ready, &d->ready_link);
	d->ready = false;
}

UmadSendJob *send_policy_next_behind(SendPolicy *p, const UmadSendJob *job, int result,
				     uint64_t now, bool *write)
{
	SendDest *d = job->dest;
	UmadSendJob *next;

	*write = false;
	if (g_queue_is_empty(&d->jobs) || d->busy)
		return NULL;
	if (result == 0 && now < d->fast_until) {
		*write = true;
	} else if (send_unreachable(result) && now < d->fail_until) {
		*write = false;
	} else {
		return NULL;
	}
	if (d->ready)
		send_policy_unready(p, d);
	next = send_policy_pop_head(d);
	d->busy = true;
	if (!*write)
		next->result = d->fail_err;
	return next;
}

UmadSendJob *send_policy_cancel(SendPolicy *p)
{
	UmadSendJob *job;
	SendDest *d;

	if (g_queue_is_empty(&p->ready))
		return NULL;
	d = g_queue_peek_head(&p->ready);
	job = send_policy_pop_head(d);
	if (g_queue_is_empty(&d->jobs))
		(void)send_policy_pop_ready(p);
	/* As if handed out: send_policy_finish() makes it not busy again. */
	d->busy = true;
	return job;
}

unsigned send_policy_pending(const SendPolicy *p)
{
	return p->pending;
}

unsigned send_policy_dest_count(const SendPolicy *p)
{
	return g_hash_table_size(p->dests);
}
