/* SPDX-License-Identifier: MIT */
/*
 * A strict reader of the Prometheus text exposition format (version
 * 0.0.4), for the tests of rdmacm-mux's metrics page: the daemon's unit
 * test and the integration test read the page with it, so that a page
 * that is not what the format says fails there even where promtool is not
 * installed, and so that values can be looked up by name and labels.
 *
 * prom_page_parse() checks the grammar: every line is a comment, a HELP or
 * TYPE line, or a sample (name, labels, value, optional timestamp); label
 * values use only the escapes \\ \" \n; the page is UTF-8 and ends with a
 * line feed; a family's HELP and TYPE come at most once and before its
 * samples, and its samples are not split by another family; no series
 * (name and label set) appears twice.
 * prom_page_check() adds the project's rules: every family has a HELP and
 * a TYPE, every name has the prefix, every counter ends in _total, and
 * every sample has the required labels.
 */
#ifndef RDMACM_MUX_TEST_PROM_TEXT_H
#define RDMACM_MUX_TEST_PROM_TEXT_H

#include <glib.h>
#include <stdbool.h>

typedef struct PromLabel {
	char *name;
	char *value; /* unescaped */
} PromLabel;

typedef struct PromSample {
	char *name;
	char *family;
	GArray *labels; /* PromLabel, in page order */
	double value;
	char *series;	/* name and sorted labels: what must be unique */
	unsigned line;
} PromSample;

typedef struct PromFamily {
	char *name;
	char *type; /* NULL: no TYPE line */
	char *help; /* NULL: no HELP line; unescaped */
	unsigned samples;
} PromFamily;

typedef struct PromPage {
	GPtrArray *families; /* PromFamily*, in page order */
	GPtrArray *samples;  /* PromSample*, in page order */
	GHashTable *series;  /* series -> PromSample* (not owned) */
} PromPage;

/* Parse @text. Return: the page, or NULL with *@error saying which line
 * breaks which rule (free it with g_free). */
PromPage *prom_page_parse(const char *text, char **error);
void prom_page_free(PromPage *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PromPage, prom_page_free)

/* The project's rules (see above); @required_labels is NULL-terminated.
 * Return: NULL, or what is wrong (free it with g_free). */
char *prom_page_check(const PromPage *p, const char *prefix, const char *const *required_labels);

/*
 * prom_page_find() - the samples named @name that have every label of
 * @labels, a NULL-terminated list of name, value, name, value...
 * Return: how many match; with exactly one, *@value is its value.
 */
unsigned prom_page_find(const PromPage *p, const char *name, const char *const *labels,
			double *value);
/* The value of the one sample prom_page_find() matches; a test that finds
 * none or several fails at once (g_error). */
double prom_page_value(const PromPage *p, const char *name, const char *const *labels);

/* The family named @name, or NULL. */
const PromFamily *prom_page_family(const PromPage *p, const char *name);

#endif
