/* SPDX-License-Identifier: MIT */
/* Owns the bench's latency histogram. */
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
