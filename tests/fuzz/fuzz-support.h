/* SPDX-License-Identifier: MIT */
/*
 * Shared by the relay fuzzers (fuzz-frames, fuzz-relay): a relay on a fake
 * umad port with a fixed GID table, made once per process and reset
 * between inputs, and a fatal-error helper that aborts
 * with the reason so that libFuzzer (or the replay main) records the
 * input as a crash.
 */
#ifndef RDMACM_MUX_FUZZ_SUPPORT_H
#define RDMACM_MUX_FUZZ_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "relay-driver.h"

/* The fake port's GID table, index = GID index (all RoCE v2). */
#define FUZZ_PORT_GIDS 4
extern const uint8_t fuzz_port_gid[FUZZ_PORT_GIDS][16];

/* Once per process: the log's level, the event loop the relays use. */
void fuzz_env_init(void);

/* What a fuzzer's relay is made of; the same for every input of a
 * process (fuzz_relay_begin() keeps the relay it made from it). */
typedef struct FuzzRelaySetup {
	/* The fuzzer's limits, over relay_config_init()'s defaults. */
	void (*configure)(RelayConfig *cfg);
	unsigned senders; /* stand-in senders (relay-driver.h) */
	/* The fake port's writes; @userdata is the send's and the sink's. */
	int (*send)(void *userdata, UmadBuffer *buf, size_t mad_len);
	RelayEventFn sink; /* an event sink, or NULL */
	void *userdata;
} FuzzRelaySetup;

/*
 * The relay for one input: on a fake port ("fuzz0" port 1, RoCE, the GIDs
 * above, in memory: nothing is read from sysfs), at time 1 s, with wire
 * ids seeded alike for every input. It is the last input's, reset by
 * fuzz_relay_end() (relay_driver_reset()), or a new one when that could
 * not reset it. Aborts on failure: the harness, not the input, is broken
 * then.
 */
Relay *fuzz_relay_begin(const FuzzRelaySetup *setup);
/* The input is done with the relay: reset it for the next one now, so
 * that the input frees what it allocated (libFuzzer's leak check), or
 * free it. */
void fuzz_relay_end(Relay *r);

/* Report a violated property and abort (a crash for libFuzzer). */
_Noreturn void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define fuzz_check(cond, ...)                                                  \
	do {                                                                   \
		if (!(cond))                                                   \
			fuzz_fail(__VA_ARGS__);                                \
	} while (0)

/*
 * Whether @a and @b hold the same @n bytes. For the harnesses' own
 * comparisons: a memcmp() there goes through the sanitizer's interceptor
 * and libFuzzer's comparison hook, which cost more than the comparison
 * and feed libFuzzer the checks' comparisons as if they were the code
 * under test's.
 */
static inline bool fuzz_same(const void *a, const void *b, size_t n)
{
	const uint8_t *x = a, *y = b;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t u, v;

		__builtin_memcpy(&u, x + i, 8);
		__builtin_memcpy(&v, y + i, 8);
		if (u != v)
			return false;
	}
	for (; i < n; i++)
		if (x[i] != y[i])
			return false;
	return true;
}

/* libFuzzer's entry points, also called by fuzz-replay.c. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* RDMACM_MUX_FUZZ_SUPPORT_H */
