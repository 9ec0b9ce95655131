/* SPDX-License-Identifier: MIT */
/* Owns the fuzzers' relay set-up on a fake port (fuzz-support.h). */
#include "fuzz-support.h"

#include <glib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "umad-port-fake.h"

const uint8_t fuzz_port_gid[FUZZ_PORT_GIDS][16] = {
	{ 0xfe, 0x80, [15] = 0x01 },			      /* fe80::1 */
	{ [10] = 0xff, [11] = 0xff, 10, 0, 1, 1 },	      /* ::ffff:10.0.1.1 */
	{ [10] = 0xff, [11] = 0xff, 10, 0, 1, 2 },	      /* ::ffff:10.0.1.2 */
	{ [10] = 0xff, [11] = 0xff, 10, 0, 1, 3 },	      /* ::ffff:10.0.1.3 */
};

static sd_event *event;

_Noreturn void fuzz_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("FUZZ CHECK FAILED: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	abort();
}

static void env_cleanup(void)
{
	event = sd_event_unref(event);
}

void fuzz_env_init(void)
{
	if (event)
		return;
	/* Quiet unless asked: the relay logs every refused frame. */
	log_setup(g_getenv("FUZZ_LOG") ? LOG_DEBUG : LOG_CRIT, true);
	if (sd_event_new(&event) < 0)
		fuzz_fail("sd_event_new failed");
	atexit(env_cleanup);
}

/* The relay of the inputs so far, and the setup it was made from. */
static Relay *kept;
static const FuzzRelaySetup *kept_setup;

static void kept_cleanup(void)
{
	relay_free(kept);
	kept = NULL;
}

static Relay *relay_make(const FuzzRelaySetup *setup)
{
	UmadPort *port = NULL;
	Relay *r = NULL;
	RelayConfig cfg;
	int e;

	relay_config_init(&cfg);
	setup->configure(&cfg);
	e = umad_port_new_fake_gids("fuzz0", 1, true, fuzz_port_gid, FUZZ_PORT_GIDS, setup->send,
				    setup->userdata, &port);
	if (e < 0)
		fuzz_fail("umad_port_new_fake_gids: %s", g_strerror(-e));
	e = relay_driver_new(event, port, &cfg, setup->senders, &r);
	if (e < 0)
		fuzz_fail("relay_driver_new: %s", g_strerror(-e));
	if (setup->sink)
		relay_add_event_sink(r, setup->sink, setup->userdata);
	return r;
}

Relay *fuzz_relay_begin(const FuzzRelaySetup *setup)
{
	static bool registered;

	fuzz_env_init();
	if (!registered) {
		atexit(kept_cleanup);
		registered = true;
	}
	if (kept && kept_setup != setup)
		kept_cleanup();
	if (!kept)
		kept = relay_make(setup);
	kept_setup = setup;
	relay_driver_set_time(kept, 1000000);
	/* The same input must give the same wire ids, or a crash that
	 * depends on one would not reproduce. */
	relay_driver_seed_wire_ids(kept, 1);
	return kept;
}

void fuzz_relay_end(Relay *r)
{
	if (r != kept)
		fuzz_fail("fuzz_relay_end() of a relay fuzz_relay_begin() did not give");
	if (relay_driver_reset(r) < 0)
		kept_cleanup();
}
