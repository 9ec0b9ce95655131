/* SPDX-License-Identifier: MIT */
/*
 * Sends that never block the event loop: the send policy (send-policy.h)
 * carried out by workers that write MADs away from the loop.
 *
 * The loop writes a MAD itself only when the policy says that it will not
 * wait; every other MAD is queued, and its destination's queue hands it to
 * a worker when one is free. The result comes back to the loop, and the
 * caller's done() answers for it. The workers are an interface chosen at
 * construction: the daemon's are sender processes (sender-pool.h), each
 * with a umad fd of its own, with a deadline on every write and a bounded
 * wait at a stop.
 *
 * Every MAD queued is finished exactly once (done()), with one of:
 *   - the write's own result;
 *   - -ETIMEDOUT when the write did not finish in time (its worker was
 *     stopped at the deadline or at a stop; it may or may not have gone
 *     out), and for the MADs queued behind it, which fail at once;
 *   - -EIO when its worker died in the middle of it;
 *   - -EAGAIN when it was never handed to a worker: no worker was left to
 *     take it, or the sender stopped (send it again).
 */
#ifndef RDMACM_MUX_UMAD_SENDER_H
#define RDMACM_MUX_UMAD_SENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "send-policy.h"
#include "umad-port.h"
#include "util.h"

typedef struct UmadSender UmadSender;

/* A job is finished: called on the loop, once per queued job. */
typedef void (*UmadSendDoneFn)(void *userdata, UmadSendJob *job);

/* What the workers tell the sender, on the loop. */
typedef struct UmadSendWorkerEvents {
	/* @job's write ended with @result (see above for the codes). */
	void (*done)(void *userdata, UmadSendJob *job, int result);
	/* A worker may take a job now, or the last one is gone: look again. */
	void (*changed)(void *userdata);
	void *userdata;
} UmadSendWorkerEvents;

/* The workers' numbers, for status and metrics. */
typedef struct UmadSenderStats {
	unsigned wanted;	 /* workers there should be */
	unsigned live;		 /* workers that can take a job */
	unsigned starting;	 /* workers on their way */
	uint64_t written;	 /* MADs the workers wrote since the start */
	uint64_t timeouts;	 /* writes stopped at their deadline */
	uint64_t lost;		 /* workers that died alone */
	uint64_t start_failures; /* workers that could not start */
} UmadSenderStats;

typedef struct UmadSenderConfig UmadSenderConfig;

/* The workers: an implementation chosen at construction. */
typedef struct UmadSendWorkersOps {
	/**
	 * start() - workers for @port on @event, reporting through @events.
	 * @arg: the implementation's (UmadSenderConfig.workers_arg)
	 * *@ret is set before any event is reported: a worker that fails
	 * to start at once is reported during start() itself.
	 * Return: 0 with *@ret set (workers may still be starting), or a
	 * negative errno, not logged (umad_sender_new()'s caller says it).
	 */
	int (*start)(sd_event *event, UmadPort *port, const UmadSenderConfig *cfg,
		     const UmadSendWorkerEvents *events, void *arg, void **ret);
	/* Whether a worker can take a job now. */
	bool (*idle)(void *w);
	/* Whether any worker is live or starting: jobs may wait for one. */
	bool (*available)(void *w);
	/* Hand @job to an idle worker. Return: 0, or a negative errno (the
	 * job was not taken; done() is not called for it). */
	int (*submit)(void *w, UmadSendJob *job);
	/* Take no more jobs; wait up to @wait_usec for the writes in flight,
	 * then end the rest (-ETIMEDOUT). done() is called for each. */
	void (*stop)(void *w, uint64_t wait_usec);
	void (*stats)(void *w, UmadSenderStats *ret);
	void (*free)(void *w);
} UmadSendWorkersOps;

/* The ops of an implementation that names each function after the op it
 * fills: UMAD_SEND_WORKERS_OPS(sender_pool) takes sender_pool_start, ... */
#define UMAD_SEND_WORKERS_OPS(prefix)                                                    \
	{ .start = prefix##_start, .idle = prefix##_idle, .available = prefix##_available, \
	  .submit = prefix##_submit, .stop = prefix##_stop, .stats = prefix##_stats,       \
	  .free = prefix##_free }

struct UmadSenderConfig {
	unsigned senders;	/* workers */
	uint64_t fast_usec;	/* a good destination stays fast this long */
	uint64_t fail_usec;	/* an unreachable one fails at once this long */
	uint64_t deadline_usec; /* a write that takes longer is stopped */
	unsigned max_queued;	/* jobs queued or being written, in all */
	/* The caller's clock, the one of the times it passes in (.now NULL:
	 * the loop's). */
	UsecClock clock;
	const UmadSendWorkersOps *workers;
	void *workers_arg;
};

/**
 * umad_sender_new() - a sender for @port, on @event; @done reports every
 * queued job. The workers start now (cfg->workers).
 * Return: 0 or a negative errno (not logged: its caller says what it
 * means).
 */
int umad_sender_new(sd_event *event, UmadPort *port, const UmadSenderConfig *cfg,
		    UmadSendDoneFn done, void *userdata, UmadSender **ret);
/**
 * umad_sender_stop() - take no more jobs: the workers get @wait_usec for
 * the writes in flight, the rest finish as said above, and every job
 * queued finishes -EAGAIN. Idempotent.
 */
void umad_sender_stop(UmadSender *s, uint64_t wait_usec);
/* Free a stopped sender (one not stopped is stopped at once). NULL-safe. */
void umad_sender_free(UmadSender *s);

/**
 * umad_sender_route() - see send_policy_route(): how to send the MAD in
 * @buf at @now; for SEND_ROUTE_NOW, *@dest is for umad_sender_note().
 */
int umad_sender_route(UmadSender *s, const UmadBuffer *buf, uint64_t now, SendDest **dest);
/* How a write the loop made itself to @dest went. */
void umad_sender_note(UmadSender *s, SendDest *dest, int result, uint64_t now);
/**
 * umad_sender_queue() - hand @job (buf and len set) to the workers.
 * Return: 0, or -EAGAIN when max_queued jobs wait already, no worker is
 * live or starting, or the sender stopped (the job is not taken).
 */
int umad_sender_queue(UmadSender *s, UmadSendJob *job);
/* Jobs queued and not finished yet. */
unsigned umad_sender_pending(const UmadSender *s);
/* The workers' numbers. */
void umad_sender_stats(const UmadSender *s, UmadSenderStats *ret);

#endif /* RDMACM_MUX_UMAD_SENDER_H */
