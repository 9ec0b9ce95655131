/* SPDX-License-Identifier: MIT */
/*
 * Sends that never block the event loop.
 *
 * On RoCE the kernel resolves the destination's MAC inside the umad
 * write(); for an address that does not answer that takes about a second.
 * So the loop writes a MAD itself only to a destination that took a write
 * without waiting a moment ago (fast: the loop's own fd, no hand-off).
 * Every other MAD goes to a sender process that writes it on a umad fd of
 * its own (see UmadSendFd for why not the loop's), and the result comes
 * back to the loop on the socket it came by.
 *
 * MADs to one destination are written one at a time and in order, so a
 * destination that does not answer holds up only its own MADs; a
 * destination whose write just failed that way fails again at once for a
 * short while (the negative cache) instead of taking a sender again.
 *
 * Processes, not threads: the loop owns all state and the senders own
 * nothing but the write, so they share no memory at all. A process with a
 * second thread pays for it in every system call of the loop: glibc's
 * cancellation bookkeeping around each read and write, locked instructions
 * in every mutex, and the kernel's reference counting of each fd used.
 * That was 15% of the relay's throughput. A sender is forked at start and
 * holds nothing of the daemon's but its socket; it dies with the daemon
 * (PR_SET_PDEATHSIG) and is replaced when it dies alone.
 */
#ifndef RDMACM_MUX_UMAD_SENDER_H
#define RDMACM_MUX_UMAD_SENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "umad-port.h"

typedef struct UmadSender UmadSender;
/* A destination's standing, the sender's; valid until the loop next
 * queues a job. */
typedef struct UmadSendDest UmadSendDest;

/* One MAD for a sender process; the caller embeds it in its own job. */
typedef struct UmadSendJob {
	UmadBuffer buf;
	size_t len;
	int result; /* 0 or the write's negative errno; set before done() */
	/* the sender's */
	struct UmadSendJob *next;
	void *dest;
} UmadSendJob;

/* A job is finished: called on the loop, once per queued job. */
typedef void (*UmadSendDoneFn)(void *userdata, UmadSendJob *job);

typedef struct UmadSenderConfig {
	unsigned senders;    /* sender processes (one fd each, in the daemon) */
	uint64_t fast_usec;  /* a good destination stays fast this long */
	uint64_t fail_usec;  /* an unreachable one fails at once this long */
	unsigned max_queued; /* jobs waiting or being written, in all */
} UmadSenderConfig;

/* What to do with a MAD (umad_sender_route()). */
typedef enum UmadSendRoute {
	UMAD_SEND_NOW,	  /* write it on the loop's fd now: it will not wait */
	UMAD_SEND_QUEUE,  /* give it to umad_sender_queue() */
} UmadSendRoute;

/**
 * umad_sender_new() - a sender for @port, on @event; @done reports every
 * queued job. The senders start now, each with its own umad fd.
 * Return: 0 (with at least one sender; a shortfall is logged), or a
 * negative errno (logged).
 */
int umad_sender_new(sd_event *event, UmadPort *port, const UmadSenderConfig *cfg,
		    UmadSendDoneFn done, void *userdata, UmadSender **ret);
/* Stop the senders, after the writes they are in (which may wait for an
 * address); jobs not handed out finish with -ECANCELED. NULL-safe. */
void umad_sender_free(UmadSender *s);

/**
 * umad_sender_route() - how to send the MAD in @buf (its address
 * complete) at @now (monotonic usec). For UMAD_SEND_NOW, *@dest is the
 * destination to pass to umad_sender_note() after the write.
 * Return: a UmadSendRoute, or the negative errno of a write to the same
 * destination that failed a moment ago (the MAD is not to be sent).
 */
int umad_sender_route(UmadSender *s, const UmadBuffer *buf, uint64_t now, UmadSendDest **dest);
/* Tell the sender how a write the loop made itself to @dest went (one
 * lookup per MAD, not two: this runs for every MAD a client sends). */
void umad_sender_note(UmadSender *s, UmadSendDest *dest, int result, uint64_t now);
/**
 * umad_sender_queue() - hand @job (buf and len set) to a sender process.
 * Return: 0, or -EAGAIN when max_queued jobs wait already or no sender is
 * left (the job is not taken).
 */
int umad_sender_queue(UmadSender *s, UmadSendJob *job);
/* Jobs queued and not finished yet. */
unsigned umad_sender_pending(const UmadSender *s);
/* MADs the sender processes wrote since the start. */
uint64_t umad_sender_written(const UmadSender *s);

#endif /* RDMACM_MUX_UMAD_SENDER_H */
