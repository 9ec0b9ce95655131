/* SPDX-License-Identifier: MIT */
/* Owns the bench's latency histogram and the CM MAD builders it sends. */
#include <string.h>

#include "bench.h"

static unsigned hist_index(uint64_t v)
{
	unsigned msb, shift;

	if (v < HIST_SUB)
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	shift = msb - HIST_SUB_BITS;
	return (shift + 1u) * HIST_SUB + ((unsigned)(v >> shift) & (HIST_SUB - 1u));
}

/* The middle of bucket @i. */
static uint64_t hist_value(unsigned i)
{
	unsigned shift;

	if (i < HIST_SUB)
		return i;
	shift = i / HIST_SUB - 1u;
	return ((uint64_t)(HIST_SUB + i % HIST_SUB) << shift) + ((1ull << shift) >> 1);
}

void hist_reset(Hist *h)
{
	memset(h, 0, sizeof(*h));
}

void hist_add(Hist *h, uint64_t ns)
{
	h->b[hist_index(ns)]++;
	h->n++;
}

uint64_t hist_quantile(const Hist *h, double q)
{
	uint64_t n = 0, want;

	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		n += h->b[i];
	if (n == 0)
		return 0;
	want = (uint64_t)(q * (double)n);
	if (want >= n)
		want = n - 1;
	for (unsigned i = 0, seen = 0; i < HIST_BUCKETS; i++) {
		seen += (unsigned)h->b[i];
		if (seen > want)
			return hist_value(i);
	}
	return hist_value(HIST_BUCKETS - 1);
}

void mad_init(uint8_t mad[256], uint16_t attr, uint32_t local, uint32_t remote, uint64_t tid)
{
	memset(mad, 0, 256);
	mad[0] = 1;
	mad[1] = 0x07;
	mad[2] = 2;
	mad[3] = 0x03;
	put_be32(mad + 8, (uint32_t)(tid >> 32));
	put_be32(mad + 12, (uint32_t)tid);
	mad[16] = (uint8_t)(attr >> 8);
	mad[17] = (uint8_t)attr;
	put_be32(mad + MAD_OFF_LOCAL, local);
	put_be32(mad + MAD_OFF_REMOTE, remote);
}

void mad_init_req(uint8_t mad[256], uint32_t local, const uint8_t sgid[16],
		  const uint8_t dgid[16], uint64_t tid)
{
	mad_init(mad, CM_ATTR_REQ, local, 0, tid);
	put_be32(mad + 36, 0x01064e20); /* ServiceID */
	mad[72] = 0xff;			/* Primary local/remote LID: permissive */
	mad[73] = 0xff;
	memcpy(mad + 80, sgid, 16);	/* Primary LocalPortGID */
	memcpy(mad + 96, dgid, 16);	/* Primary RemotePortGID */
}
