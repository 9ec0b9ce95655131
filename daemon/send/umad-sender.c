/* SPDX-License-Identifier: MIT */
/* Owns carrying out the send policy with the workers chosen at
 * construction (umad-sender.h): queueing, handing out, the writes the loop
 * makes for a destination that just turned fast, and finishing every job
 * exactly once. */
#include "umad-sender.h"

#include <errno.h>
#include <glib.h>

#include "util.h"

struct UmadSender {
	UmadPort *port;
	UsecClock clock;
	SendPolicy *policy;
	const UmadSendWorkersOps *ops;
	void *workers;
	UmadSendWorkerEvents events;
	UmadSendDoneFn done;
	void *userdata;
	bool stopped;
	/* umad_sender_dispatch() runs (a worker's event may come from
	 * inside it), and was asked to look again. */
	bool dispatching, dispatch_again;
};

/*
 * @job ended with @result: the policy learns it, and the MADs queued
 * behind it that the loop deals with at once follow it (written now, or
 * failed with it), in order. Each is handed to done(), which may free it.
 */
static void umad_sender_finish(UmadSender *s, UmadSendJob *job, int result)
{
	uint64_t now = usec_clock_now(&s->clock);

	for (;;) {
		UmadSendJob *next = NULL;
		bool write = false;

		send_policy_finish(s->policy, job, result, now);
		if (!s->stopped)
			next = send_policy_next_behind(s->policy, job, result, now, &write);
		s->done(s->userdata, job);
		if (!next)
			return;
		job = next;
		result = write ? umad_port_send(s->port, &job->buf, job->len) : job->result;
	}
}

/* Every job no worker has finishes with @err. */
static void umad_sender_cancel_queued(UmadSender *s, int err)
{
	UmadSendJob *job;

	while ((job = send_policy_cancel(s->policy)))
		umad_sender_finish(s, job, err);
}

/* Hand queued jobs to the idle workers; with no worker live or on its
 * way, nothing queued would ever leave: it fails now. */
static void umad_sender_dispatch(UmadSender *s)
{
	if (s->dispatching) {
		s->dispatch_again = true;
		return;
	}
	s->dispatching = true;
	do {
		s->dispatch_again = false;
		while (!s->stopped && s->ops->idle(s->workers)) {
			UmadSendJob *job = send_policy_next(s->policy);
			int r;

			if (!job)
				break;
			r = s->ops->submit(s->workers, job);
			if (r < 0)
				umad_sender_finish(s, job, r);
		}
		if (!s->stopped && !s->ops->available(s->workers))
			umad_sender_cancel_queued(s, -EAGAIN);
	} while (s->dispatch_again);
	s->dispatching = false;
}

static void umad_sender_on_done(void *userdata, UmadSendJob *job, int result)
{
	UmadSender *s = userdata;

	umad_sender_finish(s, job, result);
	umad_sender_dispatch(s);
}

static void umad_sender_on_changed(void *userdata)
{
	umad_sender_dispatch(userdata);
}

int umad_sender_new(sd_event *event, UmadPort *port, const UmadSenderConfig *cfg,
		    UmadSendDoneFn done, void *userdata, UmadSender **ret)
{
	UmadSender *s;
	SendPolicyConfig pcfg = {
		.fast_usec = cfg->fast_usec,
		.fail_usec = cfg->fail_usec,
		.max_queued = cfg->max_queued,
	};
	int r;

	if (!cfg->workers)
		return -EINVAL;
	s = g_new0(UmadSender, 1);
	s->port = port;
	s->clock = cfg->clock.now ? cfg->clock : usec_clock_of_event(event);
	s->policy = send_policy_new(&pcfg);
	s->ops = cfg->workers;
	s->done = done;
	s->userdata = userdata;
	s->events = (UmadSendWorkerEvents){
		.done = umad_sender_on_done,
		.changed = umad_sender_on_changed,
		.userdata = s,
	};
	r = s->ops->start(event, port, cfg, &s->events, cfg->workers_arg, &s->workers);
	if (r < 0) {
		send_policy_free(s->policy);
		g_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

void umad_sender_stop(UmadSender *s, uint64_t wait_usec)
{
	if (s->stopped)
		return;
	s->stopped = true;
	s->ops->stop(s->workers, wait_usec);
	umad_sender_cancel_queued(s, -EAGAIN);
}

void umad_sender_free(UmadSender *s)
{
	if (!s)
		return;
	umad_sender_stop(s, 0);
	s->ops->free(s->workers);
	send_policy_free(s->policy);
	g_free(s);
}

int umad_sender_route(UmadSender *s, const UmadBuffer *buf, uint64_t now, SendDest **dest)
{
	return send_policy_route(s->policy, buf, now, dest);
}

void umad_sender_note(UmadSender *s, SendDest *dest, int result, uint64_t now)
{
	send_policy_note(s->policy, dest, result, now);
}

int umad_sender_queue(UmadSender *s, UmadSendJob *job)
{
	int r;

	if (s->stopped || !s->ops->available(s->workers))
		return -EAGAIN;
	r = send_policy_queue(s->policy, job, usec_clock_now(&s->clock));
	if (r < 0)
		return r;
	umad_sender_dispatch(s);
	return 0;
}

unsigned umad_sender_pending(const UmadSender *s)
{
	return send_policy_pending(s->policy);
}

void umad_sender_stats(const UmadSender *s, UmadSenderStats *ret)
{
	s->ops->stats(s->workers, ret);
}
