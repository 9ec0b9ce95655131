/* SPDX-License-Identifier: MIT */
/*
 * Owns the crash-loop guard (relay-guard.h): the count of unsettled
 * starts in the hand-off state, the wait for this start to settle, and
 * the decision to drop the sessions a crash loop keeps handing over.
 */
#include "relay-guard.h"

#include <glib.h>

#include "log.h"

struct RelayGuard {
	HandoffState *state;
	RelayGuardProgressFn progress;
	void *userdata;
	uint64_t mark; /* the progress at the start */
	sd_event_source *post;
	sd_event_source *timer;
};

/* Stop waiting. Return: whether the guard was waiting. */
static bool relay_guard_stop_waiting(RelayGuard *g)
{
	bool waiting = g->post || g->timer;

	g->post = sd_event_source_disable_unref(g->post);
	g->timer = sd_event_source_disable_unref(g->timer);
	return waiting;
}

void relay_guard_settle(RelayGuard *g, const char *how)
{
	if (!g)
		return;
	handoff_state_guard_set_starts(g->state, 0);
	if (relay_guard_stop_waiting(g))
		log_debug("the state taken over at start has settled (%s)", how);
}

/* After each dispatch until settled: has the daemon done work with the
 * state it took over, and lived? */
static int relay_guard_on_post(sd_event_source *s, void *userdata)
{
	RelayGuard *g = userdata;

	(void)s;
	if (g->progress(g->userdata) != g->mark)
		relay_guard_settle(g, "it relayed a MAD");
	return 0;
}

static int relay_guard_on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	(void)s;
	(void)usec;
	relay_guard_settle(userdata, "it ran long enough");
	return 0;
}

RelayGuard *relay_guard_new(sd_event *event, HandoffState *state, RelayGuardProgressFn progress,
			    void *userdata, bool *ret_trip)
{
	RelayGuard *g = g_new0(RelayGuard, 1);
	uint32_t starts = handoff_state_guard_starts(state);

	g->state = state;
	g->progress = progress;
	g->userdata = userdata;
	*ret_trip = starts >= RELAY_GUARD_STARTS;
	if (*ret_trip) {
		log_error("the last %u starts died before they settled, each after taking over "
			  "this state: dropping the sessions it holds (its clients and their GIDs "
			  "stay) to end a crash loop",
			  starts);
		starts = 0;
	}
	handoff_state_guard_set_starts(state, starts + 1);
	g->mark = progress(userdata);
	if (sd_event_add_post(event, &g->post, relay_guard_on_post, g) < 0 ||
	    sd_event_add_time_relative(event, &g->timer, CLOCK_MONOTONIC, RELAY_GUARD_SETTLE_USEC,
				       0, relay_guard_on_timer, g) < 0)
		relay_guard_settle(g, "no event source to wait with");
	return g;
}

void relay_guard_free(RelayGuard *g)
{
	if (g)
		(void)relay_guard_stop_waiting(g);
	g_free(g);
}
