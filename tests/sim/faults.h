/* SPDX-License-Identifier: MIT */
/*
 * Fault injection for the simulated fabric: the spec parser
 * ("seed=42,drop=0.01,dup=0.01,delay_ms=5,reorder=0.05,send_errno=EIO:0.01")
 * and the seeded generator that makes every decision reproducible.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct sim_faults {
	bool any;
	uint64_t seed;
	double drop;
	double dup;
	double reorder;
	double delay_rate; /* share of MADs delayed by delay_ms; 1 when only delay_ms is given */
	unsigned delay_ms;
	double err_rate;
	int err_errno;
};

struct sim_rng {
	uint64_t s;
};

/* What happens to one umad_send. */
struct sim_fault_decision {
	int fail_errno; /* 0: the send goes ahead */
	bool drop;
	bool dup;
	bool reorder;
	unsigned delay_ms;
};

/** Parses a spec; NULL or "" gives no faults. Returns 0 or -EINVAL with *err set. */
int sim_faults_parse(const char *spec, struct sim_faults *out, GError **err);

/** Seeds a generator from the spec's seed and a salt (the port), so each port has its own stream. */
void sim_rng_seed(struct sim_rng *r, uint64_t seed, const char *salt);

/** A uniform double in [0, 1). */
double sim_rng_uniform(struct sim_rng *r);

/**
 * Decides the fate of one send. It always draws the same number of values,
 * whatever the outcome, so a given seed yields the same pattern every run.
 */
void sim_faults_decide(const struct sim_faults *f, struct sim_rng *r, struct sim_fault_decision *d);

/** Maps "EIO" or "5" to 5; returns -1 when unknown. */
int sim_errno_from_name(const char *name);
