/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by every daemon unit, and the error contract.
 *
 * Error contract (the whole daemon follows it):
 *   - A function that can fail returns 0 (or a non-negative result) on
 *     success and a negative errno on failure. It never sets errno as its
 *     way of reporting, and it never returns -1 meaning "look at errno".
 *   - A failure is logged exactly once, by the code that decides what to do
 *     about it (drop a MAD, answer a client with an error, exit). Lower
 *     layers return the errno and stay quiet, unless they hold context the
 *     caller cannot have; then they log and the caller does not.
 *   - Client and wire input is hostile: a bad input is an expected outcome
 *     with a counter and an error response, not an assertion.
 *   - assert() is only for our own invariants.
 *
 * Naming: types are CamelCase, functions are unit_verb_object().
 */
#ifndef RDMACM_MUX_UTIL_H
#define RDMACM_MUX_UTIL_H

#include <errno.h>
#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "rdmacm-mux-bytes.h" /* get_be16() and friends, for MAD fields */

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* Room for "ffff:ffff:...": inet_ntop's IPv6 maximum. */
#define GID_STR_LEN 46

static inline void close_fdp(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		(void)close(*fd);
		errno = saved;
	}
}
/* A GID: 16 bytes, network order, everywhere in the daemon. */
#define GID_LEN 16

/* An fd closed when it goes out of scope; -1 means "no fd". */
#define _cleanup_fd_ __attribute__((cleanup(close_fdp)))

/* Hand an owned fd over, leaving -1 behind so the cleanup skips it. */
static inline int fd_steal(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}

static inline bool gid_is_zero(const uint8_t gid[GID_LEN])
{
	static const uint8_t zero[GID_LEN];
	return memcmp(gid, zero, GID_LEN) == 0;
}

static inline bool gid_equal(const uint8_t a[GID_LEN], const uint8_t b[GID_LEN])
{
	return memcmp(a, b, GID_LEN) == 0;
}

/* GHashTable callbacks for keys that point at 16-byte GIDs. */
guint gid_hash(gconstpointer gid);
gboolean gid_hash_equal(gconstpointer a, gconstpointer b);

/**
 * gid_to_string() - format a GID the way inet_ntop formats IPv6.
 * @gid: 16 bytes, network order
 * @buf: at least GID_STR_LEN bytes
 *
 * Return: @buf, always NUL-terminated.
 */
const char *gid_to_string(const uint8_t gid[GID_LEN], char buf[GID_STR_LEN]);

/**
 * gid_from_string() - parse an IPv6-style GID ("::ffff:10.0.0.1",
 * "fe80::1", or sysfs's "fe80:0000:...:0001").
 *
 * Return: 0, or -EINVAL.
 */
int gid_from_string(const char *s, uint8_t gid[GID_LEN]);

/* The sysfs root: $SYSFS_PATH (tests, the simulated fabric), else /sys.
 * libibumad reads the same variable. */
const char *sysfs_root(void);

/* Monotonic clock in microseconds. */
uint64_t now_usec(void);
/* @event's now (one value per dispatch), or now_usec() before its loop
 * first ran (sd_event_now() fails then). */
uint64_t event_now_usec(sd_event *event);

/*
 * A monotonic clock in microseconds, chosen by whoever builds the unit
 * that reads it: the event loop's (usec_clock_of_event()), or a test's.
 */
typedef struct UsecClock {
	uint64_t (*now)(void *userdata);
	void *userdata;
} UsecClock;

static inline uint64_t usec_clock_now(const UsecClock *c)
{
	return c->now(c->userdata);
}

/* @event's clock (event_now_usec()); @event must outlive it. */
UsecClock usec_clock_of_event(sd_event *event);

#endif /* RDMACM_MUX_UTIL_H */
