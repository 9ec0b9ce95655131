/* SPDX-License-Identifier: MIT */
/*
 * Where each MAD the loop sends goes, decided without any I/O: the send
 * policy of umad-sender.h, a pure data structure with its own unit tests.
 *
 * On RoCE the kernel resolves the destination's MAC inside the umad
 * write(); for an address that does not answer that takes about a second.
 * So the loop writes a MAD itself only to a destination that took a write
 * without waiting a moment ago ("fast"). Every other MAD is queued for a
 * worker (a sender process), in its destination's queue: MADs to one
 * destination go one at a time and in order, so a destination that does
 * not answer holds up only its own MADs. A destination whose write just
 * failed for want of an answer fails again at once for a short while (the
 * negative cache) instead of taking a worker again.
 *
 * A destination is the source GID index and the destination GID, or the
 * DLID without a GRH. The policy owns the destinations (a bounded table:
 * idle ones are forgotten) and the queues; the jobs are the caller's.
 */
#ifndef RDMACM_MUX_SEND_POLICY_H
#define RDMACM_MUX_SEND_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "umad-port.h"

typedef struct SendPolicy SendPolicy;
/* A destination's standing, the policy's; valid until the caller next
 * queues a job or finishes one. */
typedef struct SendDest SendDest;

/* One MAD to send; the caller embeds it in its own job. */
typedef struct UmadSendJob {
	UmadBuffer buf;
	size_t len;
	int result; /* 0 or the write's negative errno, once finished */
	/* the policy's */
	GList link; /* in its destination's queue */
	SendDest *dest;
} UmadSendJob;

typedef struct SendPolicyConfig {
	uint64_t fast_usec;  /* a good destination stays fast this long */
	uint64_t fail_usec;  /* an unreachable one fails at once this long */
	unsigned max_queued; /* jobs queued or being written, in all */
	unsigned max_dests;  /* past this many destinations, idle ones go */
} SendPolicyConfig;

/* What to do with a MAD (send_policy_route()). */
typedef enum SendRoute {
	SEND_ROUTE_NOW,	  /* the loop writes it now: it will not wait */
	SEND_ROUTE_QUEUE, /* give it to send_policy_queue() */
} SendRoute;

SendPolicy *send_policy_new(const SendPolicyConfig *cfg);
/* Free the policy; jobs still queued are the caller's to finish first
 * (send_policy_cancel()). NULL-safe. */
void send_policy_free(SendPolicy *p);

/**
 * send_policy_route() - how to send the MAD in @buf (its address complete)
 * at @now (monotonic usec). For SEND_ROUTE_NOW, *@dest is the destination
 * to pass to send_policy_note() after the write.
 * Return: a SendRoute, or the negative errno of a write to the same
 * destination that failed a moment ago (the MAD is not to be sent).
 */
int send_policy_route(SendPolicy *p, const UmadBuffer *buf, uint64_t now, SendDest **dest);
/* How a write the loop made itself to @dest went (one lookup per MAD,
 * not two: this runs for every MAD a client sends). */
void send_policy_note(SendPolicy *p, SendDest *dest, int result, uint64_t now);

/**
 * send_policy_queue() - queue @job (buf and len set) at @now behind the
 * MADs its destination has already. A new destination may make the table
 * forget idle ones: a SendDest from send_policy_route() is stale then.
 * Return: 0, or -EAGAIN when max_queued jobs are queued or being written
 * (the job is not taken).
 */
int send_policy_queue(SendPolicy *p, UmadSendJob *job, uint64_t now);
/**
 * send_policy_next() - the job a worker writes next: the head of the
 * destination that waited longest, which is busy until the job finishes.
 * Return: the job, or NULL when no destination has one to hand out.
 */
UmadSendJob *send_policy_next(SendPolicy *p);
/**
 * send_policy_finish() - @job (from send_policy_next() or
 * send_policy_next_behind()) was written, or failed, with @result at
 * @now: its destination's standing follows, and it is no longer queued.
 */
void send_policy_finish(SendPolicy *p, UmadSendJob *job, int result, uint64_t now);
/**
 * send_policy_next_behind() - after a job of @job's destination finished
 * with @result (send_policy_finish(), @job not used otherwise), the next
 * MAD queued behind it that the loop deals with at once, in order:
 *   - @result 0 and the destination fast: the loop writes it now
 *     (*@write true), as new MADs to it will be; handed to the workers
 *     one at a time instead, a destination whose client keeps sending
 *     would never leave the slow path;
 *   - @result says the destination did not answer: it fails the same way
 *     now (*@write false, its result set), as new MADs to it do for a
 *     while, instead of waiting its turn for a worker and the same
 *     timeout;
 *   - otherwise none: the rest waits for a worker.
 * Call it again with the result of the job it returned.
 * Return: the job (busy, as from send_policy_next()), or NULL.
 */
UmadSendJob *send_policy_next_behind(SendPolicy *p, const UmadSendJob *job, int result,
				     uint64_t now, bool *write);
/**
 * send_policy_cancel() - take one job that no worker has, off its queue,
 * for the caller to finish (send_policy_finish()) without writing it.
 * Return: the job, or NULL when none is left.
 */
UmadSendJob *send_policy_cancel(SendPolicy *p);

/* Jobs queued or being written. */
unsigned send_policy_pending(const SendPolicy *p);
/* Destinations known (for tests of the table's bound). */
unsigned send_policy_dest_count(const SendPolicy *p);

#endif /* RDMACM_MUX_SEND_POLICY_H */
