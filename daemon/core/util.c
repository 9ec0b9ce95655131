/* SPDX-License-Identifier: MIT */
/* Owns the small shared helpers declared in util.h: GID text, the sysfs
 * root, time and clocks. */
#include "util.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

const char *gid_to_string(const uint8_t gid[GID_LEN], char buf[GID_STR_LEN])
{
	if (!inet_ntop(AF_INET6, gid, buf, GID_STR_LEN))
		snprintf(buf, GID_STR_LEN, "<bad gid>");
	return buf;
}

int gid_from_string(const char *s, uint8_t gid[GID_LEN])
{
	if (!s || inet_pton(AF_INET6, s, gid) != 1)
		return -EINVAL;
	return 0;
}

guint gid_hash(gconstpointer gid)
{
	const uint8_t *g = gid;
	uint32_t h = 2166136261u; /* FNV-1a */

	for (int i = 0; i < GID_LEN; i++)
		h = (h ^ g[i]) * 16777619u;
	return h;
}

gboolean gid_hash_equal(gconstpointer a, gconstpointer b)
{
	return memcmp(a, b, GID_LEN) == 0;
}

const char *sysfs_root(void)
{
	const char *root = getenv("SYSFS_PATH");

	return root && *root ? root : "/sys";
}

uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t event_now_usec(sd_event *event)
{
	uint64_t now;

	if (sd_event_now(event, CLOCK_MONOTONIC, &now) < 0)
		now = now_usec();
	return now;
}

static uint64_t usec_clock_event_now(void *userdata)
{
	return event_now_usec(userdata);
}

UsecClock usec_clock_of_event(sd_event *event)
{
	return (UsecClock){ .now = usec_clock_event_now, .userdata = event };
}
