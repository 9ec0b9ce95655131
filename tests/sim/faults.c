/* SPDX-License-Identifier: MIT */
/* Owns fault specs and the seeded random decisions made for each send. */
#include "faults.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	int value;
} errno_names[] = {
	{ "EIO", EIO },		  { "EINVAL", EINVAL },	      { "ENOMEM", ENOMEM },
	{ "EAGAIN", EAGAIN },	  { "ETIMEDOUT", ETIMEDOUT }, { "ENODATA", ENODATA },
	{ "EACCES", EACCES },	  { "EHOSTUNREACH", EHOSTUNREACH },
	{ "ENETUNREACH", ENETUNREACH }, { "ENODEV", ENODEV }, { "ENXIO", ENXIO },
	{ "EFAULT", EFAULT },	  { "EBUSY", EBUSY },
};

int sim_errno_from_name(const char *name)
{
	char *end = NULL;
	long v;

	for (size_t i = 0; i < G_N_ELEMENTS(errno_names); i++)
		if (g_ascii_strcasecmp(name, errno_names[i].name) == 0)
			return errno_names[i].value;
	v = strtol(name, &end, 10);
	if (end && end != name && *end == 0 && v > 0 && v < 4096)
		return (int)v;
	return -1;
}

static int parse_rate(const char *v, double *out)
{
	char *end = NULL;
	double d = g_ascii_strtod(v, &end);

	if (!end || end == v || *end || d < 0 || d > 1)
		return -EINVAL;
	*out = d;
	return 0;
}

int sim_faults_parse(const char *spec, struct sim_faults *out, GError **err)
{
	g_auto(GStrv) items = NULL;

	memset(out, 0, sizeof(*out));
	out->seed = 1;
	if (!spec || !*spec)
		return 0;
	items = g_strsplit(spec, ",", -1);
	for (char **it = items; *it; it++) {
		g_auto(GStrv) kv = g_strsplit(g_strstrip(*it), "=", 2);
		int rc = 0;

		if (!kv[0] || !*kv[0])
			continue;
		if (!kv[1]) {
			rc = -EINVAL;
		} else if (strcmp(kv[0], "seed") == 0) {
			out->seed = g_ascii_strtoull(kv[1], NULL, 0);
		} else if (strcmp(kv[0], "drop") == 0) {
			rc = parse_rate(kv[1], &out->drop);
		} else if (strcmp(kv[0], "dup") == 0) {
			rc = parse_rate(kv[1], &out->dup);
		} else if (strcmp(kv[0], "reorder") == 0) {
			rc = parse_rate(kv[1], &out->reorder);
		} else if (strcmp(kv[0], "delay") == 0) {
			rc = parse_rate(kv[1], &out->delay_rate);
		} else if (strcmp(kv[0], "delay_ms") == 0) {
			out->delay_ms = (unsigned)g_ascii_strtoull(kv[1], NULL, 10);
		} else if (strcmp(kv[0], "send_errno") == 0) {
			g_auto(GStrv) er = g_strsplit(kv[1], ":", 2);

			out->err_errno = sim_errno_from_name(er[0]);
			out->err_rate = 1;
			if (out->err_errno < 0 || (er[1] && parse_rate(er[1], &out->err_rate) < 0))
				rc = -EINVAL;
		} else {
			rc = -EINVAL;
		}
		if (rc < 0) {
			g_set_error(err, G_FILE_ERROR, G_FILE_ERROR_INVAL,
				    "bad fault item '%s' in '%s'", *it, spec);
			return rc;
		}
	}
	if (out->delay_ms && out->delay_rate == 0)
		out->delay_rate = 1;
	out->any = out->drop > 0 || out->dup > 0 || out->reorder > 0 ||
		   (out->delay_ms && out->delay_rate > 0) || out->err_rate > 0;
	return 0;
}

/* splitmix64: tiny, fast and good enough to make patterns look random. */
static uint64_t next64(struct sim_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void sim_rng_seed(struct sim_rng *r, uint64_t seed, const char *salt)
{
	/* FNV-1a of the salt, so that the same seed gives each port its own stream. */
	uint64_t h = 0xcbf29ce484222325ull;

	for (const char *p = salt; p && *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	r->s = seed ^ h;
}

double sim_rng_uniform(struct sim_rng *r)
{
	return (double)(next64(r) >> 11) * (1.0 / 9007199254740992.0);
}

void sim_faults_decide(const struct sim_faults *f, struct sim_rng *r, struct sim_fault_decision *d)
{
	double u_err = sim_rng_uniform(r);
	double u_drop = sim_rng_uniform(r);
	double u_dup = sim_rng_uniform(r);
	double u_reorder = sim_rng_uniform(r);
	double u_delay = sim_rng_uniform(r);

	memset(d, 0, sizeof(*d));
	if (u_err < f->err_rate) {
		d->fail_errno = f->err_errno;
		return;
	}
	d->drop = u_drop < f->drop;
	d->dup = u_dup < f->dup;
	d->reorder = u_reorder < f->reorder;
	if (f->delay_ms && u_delay < f->delay_rate)
		d->delay_ms = f->delay_ms;
}
