/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the crash-loop guard (relay-guard.h): a start counts as
 * unsettled in the state until it makes progress or is settled; the
 * start after RELAY_GUARD_STARTS unsettled ones trips, and counts anew.
 */
#include <glib.h>

#include "relay-guard.h"
#include "unit-test.h"

typedef struct Fixture {
	sd_event *event;
	HandoffState *state;
	uint64_t relayed;
	uint64_t step;
} Fixture;

static uint64_t progress(void *userdata)
{
	return ((Fixture *)userdata)->relayed;
}

/* One dispatch of the loop in which the daemon relays @relayed MADs: the
 * guard looks after each dispatch. */
static int on_work(sd_event_source *s, void *userdata)
{
	Fixture *f = userdata;

	f->relayed += f->step;
	return sd_event_source_set_enabled(s, SD_EVENT_OFF);
}

static void dispatch(Fixture *f, uint64_t relayed)
{
	sd_event_source *s = NULL;

	f->step = relayed;
	g_assert_cmpint(sd_event_add_defer(f->event, &s, on_work, f), >=, 0);
	g_assert_cmpint(sd_event_run(f->event, 0), >, 0);
	/* The post sources that dispatch made pending run in the next
	 * iteration. */
	g_assert_cmpint(sd_event_run(f->event, 0), >=, 0);
	sd_event_source_disable_unref(s);
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
	static const char *const names[] = { "tx.REQ" };
	HandoffShape shape = { .dev = "fake0", .port = 1, .n_clients = 1, .max_gids = 1,
			       .counter_names = names, .n_counters = 1 };
	(void)data;

	f->relayed = 0;
	g_assert_cmpint(sd_event_new(&f->event), >=, 0);
	g_assert_cmpint(handoff_state_new(&shape, 1, &f->state), ==, 0);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	handoff_state_free(f->state);
	sd_event_unref(f->event);
}

/* Starts that die unsettled add up; the one after RELAY_GUARD_STARTS of
 * them trips and counts itself as the first of a new run. */
UNIT_FIXTURE_TEST("/relay-guard/trips-after-unsettled-starts", NULL, fixture_setup, test_trips)
{
	bool trip;
	(void)data;

	for (uint32_t i = 0; i < RELAY_GUARD_STARTS; i++) {
		/* A start that dies before it settles: freed, never settled. */
		relay_guard_free(relay_guard_new(f->event, f->state, progress, f, &trip));
		g_assert_false(trip);
		g_assert_cmpuint(handoff_state_guard_starts(f->state), ==, i + 1);
	}
	relay_guard_free(relay_guard_new(f->event, f->state, progress, f, &trip));
	g_assert_true(trip);
	g_assert_cmpuint(handoff_state_guard_starts(f->state), ==, 1);
}

/* A start that relays a MAD has settled after that dispatch; one that
 * relays nothing stays unsettled however often the loop runs. */
UNIT_FIXTURE_TEST("/relay-guard/settles-on-progress", NULL, fixture_setup, test_progress)
{
	RelayGuard *g;
	bool trip;
	(void)data;

	handoff_state_guard_set_starts(f->state, RELAY_GUARD_STARTS - 1);
	g = relay_guard_new(f->event, f->state, progress, f, &trip);
	g_assert_false(trip);
	for (int i = 0; i < 3; i++)
		dispatch(f, 0);
	g_assert_cmpuint(handoff_state_guard_starts(f->state), ==, RELAY_GUARD_STARTS);
	dispatch(f, 1);
	g_assert_cmpuint(handoff_state_guard_starts(f->state), ==, 0);
	relay_guard_free(g);
}

/* A planned hand-off settles the start; no guard (nothing taken over) is
 * nothing to settle. */
UNIT_FIXTURE_TEST("/relay-guard/planned-hand-off", NULL, fixture_setup, test_planned)
{
	RelayGuard *g;
	bool trip;
	(void)data;

	g = relay_guard_new(f->event, f->state, progress, f, &trip);
	g_assert_cmpuint(handoff_state_guard_starts(f->state), ==, 1);
	relay_guard_settle(g, "a planned hand-off");
	g_assert_cmpuint(handoff_state_guard_starts(f->state), ==, 0);
	relay_guard_settle(NULL, "nothing taken over");
	relay_guard_free(g);
}

UNIT_TEST_MAIN()
