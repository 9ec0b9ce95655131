/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the send policy (send-policy.h): which MADs the loop
 * writes itself, the order in which queued ones go to the workers, the
 * negative cache, the bounds. No I/O: jobs are handed out and finished
 * by the test.
 */
#include <errno.h>
#include <glib.h>
#include <string.h>

#include "send-policy.h"
#include "unit-test.h"

#define MS 1000ull

static const SendPolicyConfig config = {
	.fast_usec = 1000 * MS,
	.fail_usec = 500 * MS,
	.max_queued = 8,
	.max_dests = 4,
};

/* A job to the destination GID ::ffff:10.0.0.@host from GID index 1. */
static UmadSendJob *job_to(unsigned host)
{
	UmadSendJob *j = g_new0(UmadSendJob, 1);

	j->len = 256;
	j->buf.hdr.addr.grh_present = 1;
	j->buf.hdr.addr.gid_index = 1;
	j->buf.hdr.addr.gid[10] = 0xff;
	j->buf.hdr.addr.gid[11] = 0xff;
	j->buf.hdr.addr.gid[12] = 10;
	j->buf.hdr.addr.gid[15] = (uint8_t)host;
	j->buf.mad[0] = (uint8_t)host; /* tells jobs apart in failures */
	return j;
}

static int route(SendPolicy *p, unsigned host, uint64_t now, SendDest **d)
{
	g_autofree UmadSendJob *j = job_to(host);

	return send_policy_route(p, &j->buf, now, d);
}

/* A destination never written to goes to the workers; once a worker's
 * write went through it is fast, and the loop writes to it itself until
 * its standing runs out. */
UNIT_TEST("/send-policy/fast-after-a-good-write", test_fast_after_good_write)
{
	SendPolicy *p = send_policy_new(&config);
	g_autofree UmadSendJob *j = job_to(1);
	SendDest *d;

	g_assert_cmpint(route(p, 1, 0, &d), ==, SEND_ROUTE_QUEUE);
	g_assert_null(d);
	g_assert_cmpint(send_policy_queue(p, j, 0), ==, 0);
	g_assert_cmpuint(send_policy_pending(p), ==, 1);
	g_assert_true(send_policy_next(p) == j);
	/* Busy: a second MAD queues behind it. */
	g_assert_cmpint(route(p, 1, 10, &d), ==, SEND_ROUTE_QUEUE);
	send_policy_finish(p, j, 0, 100 * MS);
	g_assert_cmpint(j->result, ==, 0);
	g_assert_cmpuint(send_policy_pending(p), ==, 0);
	g_assert_cmpint(route(p, 1, 200 * MS, &d), ==, SEND_ROUTE_NOW);
	g_assert_nonnull(d);
	/* The loop's own writes keep it fast. */
	send_policy_note(p, d, 0, 900 * MS);
	g_assert_cmpint(route(p, 1, 1800 * MS, &d), ==, SEND_ROUTE_NOW);
	/* Its standing ran out: a worker again. */
	g_assert_cmpint(route(p, 1, 1901 * MS, &d), ==, SEND_ROUTE_QUEUE);
	/* Another destination knows none of it. */
	g_assert_cmpint(route(p, 2, 200 * MS, &d), ==, SEND_ROUTE_QUEUE);
	send_policy_free(p);
}

/* MADs to one destination leave in order, one at a time; another
 * destination is not held up behind them. */
UNIT_TEST("/send-policy/order-per-destination", test_order_per_destination)
{
	SendPolicy *p = send_policy_new(&config);
	UmadSendJob *a1 = job_to(1), *a2 = job_to(1), *a3 = job_to(1), *b1 = job_to(2);
	SendDest *d;

	g_assert_cmpint(send_policy_queue(p, a1, 0), ==, 0);
	g_assert_cmpint(send_policy_queue(p, a2, 0), ==, 0);
	g_assert_cmpint(send_policy_queue(p, b1, 0), ==, 0);
	g_assert_cmpint(send_policy_queue(p, a3, 0), ==, 0);
	g_assert_true(send_policy_next(p) == a1);
	g_assert_true(send_policy_next(p) == b1);
	/* a's next waits for a1. */
	g_assert_null(send_policy_next(p));
	/* While MADs are queued for it, a fast destination still queues:
	 * a MAD written by the loop would overtake them. */
	send_policy_finish(p, b1, 0, 10 * MS);
	g_assert_cmpint(route(p, 2, 20 * MS, &d), ==, SEND_ROUTE_NOW);
	g_assert_cmpint(route(p, 1, 20 * MS, &d), ==, SEND_ROUTE_QUEUE);
	/* A write that failed for another reason than an answer: the next
	 * MAD goes to a worker, not to the loop. */
	send_policy_finish(p, a1, -EINVAL, 30 * MS);
	g_assert_true(send_policy_next(p) == a2);
	g_assert_null(send_policy_next(p));
	send_policy_finish(p, a2, 0, 40 * MS);
	g_assert_true(send_policy_next(p) == a3);
	send_policy_finish(p, a3, 0, 50 * MS);
	g_assert_cmpuint(send_policy_pending(p), ==, 0);
	g_free(a1);
	g_free(a2);
	g_free(a3);
	g_free(b1);
	send_policy_free(p);
}

/* After a worker's good write, the MADs queued behind it are the loop's
 * to write now, in order, while they go through; a failure hands the rest
 * back to the workers. */
UNIT_TEST("/send-policy/behind-a-good-write", test_behind_good_write)
{
	SendPolicy *p = send_policy_new(&config);
	UmadSendJob *j[4];
	bool write;
	UmadSendJob *next;

	for (unsigned i = 0; i < 4; i++) {
		j[i] = job_to(1);
		g_assert_cmpint(send_policy_queue(p, j[i], 0), ==, 0);
	}
	g_assert_true(send_policy_next(p) == j[0]);
	send_policy_finish(p, j[0], 0, 10 * MS);
	next = send_policy_next_behind(p, j[0], 0, 10 * MS, &write);
	g_assert_true(next == j[1]);
	g_assert_true(write);
	/* Busy with the loop's write: no worker takes the rest meanwhile. */
	g_assert_null(send_policy_next(p));
	send_policy_finish(p, j[1], -EINVAL, 11 * MS);
	g_assert_null(send_policy_next_behind(p, j[1], -EINVAL, 11 * MS, &write));
	g_assert_true(send_policy_next(p) == j[2]);
	send_policy_finish(p, j[2], 0, 12 * MS);
	next = send_policy_next_behind(p, j[2], 0, 12 * MS, &write);
	g_assert_true(next == j[3]);
	g_assert_true(write);
	send_policy_finish(p, j[3], 0, 13 * MS);
	g_assert_null(send_policy_next_behind(p, j[3], 0, 13 * MS, &write));
	g_assert_cmpuint(send_policy_pending(p), ==, 0);
	for (unsigned i = 0; i < 4; i++)
		g_free(j[i]);
	send_policy_free(p);
}

/* A destination that did not answer: what is queued behind fails the same
 * way at once, and so do new MADs to it for fail_usec (the negative
 * cache); then it gets a worker again. A write stopped at its deadline
 * (-ETIMEDOUT) counts as no answer. */
UNIT_TEST("/send-policy/negative-cache", test_negative_cache)
{
	static const int unreachable[] = { -ETIMEDOUT, -EHOSTUNREACH, -ENETUNREACH };

	for (unsigned k = 0; k < G_N_ELEMENTS(unreachable); k++) {
		SendPolicy *p = send_policy_new(&config);
		UmadSendJob *j[3];
		UmadSendJob *next;
		SendDest *d;
		bool write = true;
		int err = unreachable[k];

		for (unsigned i = 0; i < 3; i++) {
			j[i] = job_to(1);
			g_assert_cmpint(send_policy_queue(p, j[i], 0), ==, 0);
		}
		g_assert_true(send_policy_next(p) == j[0]);
		send_policy_finish(p, j[0], err, 1000 * MS);
		for (unsigned i = 1; i < 3; i++) {
			next = send_policy_next_behind(p, j[i - 1], err, 1000 * MS, &write);
			g_assert_true(next == j[i]);
			g_assert_false(write);
			g_assert_cmpint(next->result, ==, err);
			send_policy_finish(p, next, next->result, 1000 * MS);
		}
		g_assert_null(send_policy_next_behind(p, j[2], err, 1000 * MS, &write));
		g_assert_cmpuint(send_policy_pending(p), ==, 0);
		g_assert_cmpint(route(p, 1, 1499 * MS, &d), ==, err);
		g_assert_cmpint(route(p, 1, 1500 * MS, &d), ==, SEND_ROUTE_QUEUE);
		for (unsigned i = 0; i < 3; i++)
			g_free(j[i]);
		send_policy_free(p);
	}
}

/* The policy holds at most max_queued jobs; cancelled ones leave in
 * order, and none that a worker holds. */
UNIT_TEST("/send-policy/bound-and-cancel", test_bound_and_cancel)
{
	SendPolicy *p = send_policy_new(&config);
	UmadSendJob *j[9];
	UmadSendJob *busy, *c;
	unsigned cancelled = 0;

	for (unsigned i = 0; i < 9; i++)
		j[i] = job_to(1 + i % 2);
	for (unsigned i = 0; i < 8; i++)
		g_assert_cmpint(send_policy_queue(p, j[i], 0), ==, 0);
	g_assert_cmpint(send_policy_queue(p, j[8], 0), ==, -EAGAIN);
	busy = send_policy_next(p);
	g_assert_true(busy == j[0]);
	while ((c = send_policy_cancel(p))) {
		g_assert_true(c != busy);
		/* Host 2's were all queued behind nothing busy. */
		send_policy_finish(p, c, -EAGAIN, 0);
		g_assert_cmpint(c->result, ==, -EAGAIN);
		cancelled++;
	}
	/* Host 1's queue waits behind the busy one. */
	g_assert_cmpuint(cancelled, ==, 4);
	send_policy_finish(p, busy, 0, 0);
	while ((c = send_policy_cancel(p))) {
		send_policy_finish(p, c, -EAGAIN, 0);
		cancelled++;
	}
	g_assert_cmpuint(cancelled, ==, 7);
	g_assert_cmpuint(send_policy_pending(p), ==, 0);
	for (unsigned i = 0; i < 9; i++)
		g_free(j[i]);
	send_policy_free(p);
}

/* The table of destinations is bounded: past max_dests, idle ones whose
 * standing ran out go first, then idle ones at all; one with MADs queued
 * stays. */
UNIT_TEST("/send-policy/bounded-table", test_bounded_table)
{
	SendPolicy *p = send_policy_new(&config);
	UmadSendJob *held = job_to(100);
	SendDest *d;

	g_assert_cmpint(send_policy_queue(p, held, 0), ==, 0);
	g_assert_true(send_policy_next(p) == held);
	for (unsigned host = 1; host <= 20; host++) {
		UmadSendJob *j = job_to(host);

		g_assert_cmpint(send_policy_queue(p, j, host * MS), ==, 0);
		g_assert_true(send_policy_next(p) == j);
		send_policy_finish(p, j, 0, host * MS);
		g_assert_cmpuint(send_policy_dest_count(p), <=, config.max_dests + 1);
		g_free(j);
	}
	/* The one with a MAD being written is still known: it finishes. */
	g_assert_cmpint(route(p, 100, 30 * MS, &d), ==, SEND_ROUTE_QUEUE);
	g_assert_cmpuint(send_policy_pending(p), ==, 1);
	send_policy_finish(p, held, 0, 31 * MS);
	g_assert_cmpint(route(p, 100, 32 * MS, &d), ==, SEND_ROUTE_NOW);
	send_policy_free(p);
	g_free(held);
}

/* LID-routed destinations (no GRH) are told apart by DLID alone. */
UNIT_TEST("/send-policy/lid-destinations", test_lid_destinations)
{
	SendPolicy *p = send_policy_new(&config);
	g_autofree UmadSendJob *a = job_to(1);
	g_autofree UmadSendJob *b = job_to(1);
	SendDest *d;

	a->buf.hdr.addr.grh_present = 0;
	a->buf.hdr.addr.lid = 3;
	b->buf.hdr.addr.grh_present = 0;
	b->buf.hdr.addr.lid = 4;
	g_assert_cmpint(send_policy_queue(p, a, 0), ==, 0);
	g_assert_true(send_policy_next(p) == a);
	send_policy_finish(p, a, 0, 0);
	g_assert_cmpint(send_policy_route(p, &a->buf, 1, &d), ==, SEND_ROUTE_NOW);
	g_assert_cmpint(send_policy_route(p, &b->buf, 1, &d), ==, SEND_ROUTE_QUEUE);
	send_policy_free(p);
}

UNIT_TEST_MAIN()
