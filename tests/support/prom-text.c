/* SPDX-License-Identifier: MIT */
/*
 * Owns the tests' reader of the Prometheus text format (prom-text.h): the
 * line grammar, the family bookkeeping and the lookups. It is strict on
 * purpose: where the format allows a thing that rdmacm-mux never writes
 * it is accepted, but anything the format forbids is an error naming the
 * line, so that a test failure says what the page got wrong.
 */
#include "prom-text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The parser's position and what it has read so far. */
typedef struct PromReader {
	PromPage *page;
	PromFamily *current; /* the family the last line belonged to */
	GHashTable *seen;    /* family name -> PromFamily* (not owned) */
	unsigned line;
	char *error;
} PromReader;

static void prom_label_clear(gpointer p)
{
	PromLabel *l = p;

	g_free(l->name);
	g_free(l->value);
}

static void prom_sample_free(gpointer p)
{
	PromSample *s = p;

	g_free(s->name);
	g_free(s->family);
	g_array_unref(s->labels);
	g_free(s->series);
	g_free(s);
}

static void prom_family_free(gpointer p)
{
	PromFamily *f = p;

	g_free(f->name);
	g_free(f->type);
	g_free(f->help);
	g_free(f);
}

void prom_page_free(PromPage *p)
{
	if (!p)
		return;
	g_hash_table_unref(p->series);
	g_ptr_array_unref(p->samples);
	g_ptr_array_unref(p->families);
	g_free(p);
}

static bool prom_fail(PromReader *r, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* Record the first error, with its line. Return: false, for the callers'
 * "return prom_fail(...)". */
static bool prom_fail(PromReader *r, const char *fmt, ...)
{
	g_autofree char *msg = NULL;
	va_list ap;

	if (r->error)
		return false;
	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	r->error = g_strdup_printf("line %u: %s", r->line, msg);
	return false;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static const char *skip_blanks(const char *p)
{
	while (is_blank(*p))
		p++;
	return p;
}

/* A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) at @p: its length, 0 if none. */
static size_t metric_name_len(const char *p)
{
	size_t n = 0;

	if (!(g_ascii_isalpha(p[0]) || p[0] == '_' || p[0] == ':'))
		return 0;
	while (g_ascii_isalnum(p[n]) || p[n] == '_' || p[n] == ':')
		n++;
	return n;
}

/* A label name ([a-zA-Z_][a-zA-Z0-9_]*) at @p: its length, 0 if none. */
static size_t label_name_len(const char *p)
{
	size_t n = 0;

	if (!(g_ascii_isalpha(p[0]) || p[0] == '_'))
		return 0;
	while (g_ascii_isalnum(p[n]) || p[n] == '_')
		n++;
	return n;
}

/* A sample value as the format writes floats: NaN, +Inf, -Inf or a
 * decimal number with an optional exponent. */
static bool parse_value(const char *text, double *ret)
{
	static const char *const special[] = { "NaN", "+Inf", "-Inf", "Inf" };
	char *end;

	for (size_t i = 0; i < G_N_ELEMENTS(special); i++)
		if (strcmp(text, special[i]) == 0) {
			*ret = g_ascii_strtod(text, NULL);
			return true;
		}
	if (!g_regex_match_simple("^[+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?$", text, 0,
				  0))
		return false;
	errno = 0;
	*ret = g_ascii_strtod(text, &end);
	return *end == '\0' && errno == 0;
}

static bool parse_timestamp(const char *text)
{
	return g_regex_match_simple("^-?[0-9]+$", text, 0, 0);
}

static PromFamily *family_new(PromReader *r, const char *name)
{
	PromFamily *f = g_new0(PromFamily, 1);

	f->name = g_strdup(name);
	g_ptr_array_add(r->page->families, f);
	g_hash_table_insert(r->seen, f->name, f);
	r->current = f;
	return f;
}

/* The family of a HELP or TYPE line for @name: the current one, or a new
 * one when @name was never seen. */
static PromFamily *family_for_meta(PromReader *r, const char *name, const char *what)
{
	PromFamily *f = g_hash_table_lookup(r->seen, name);

	if (!f)
		return family_new(r, name);
	if (f != r->current) {
		prom_fail(r, "%s for %s, whose family ended earlier", what, name);
		return NULL;
	}
	if (f->samples) {
		prom_fail(r, "%s for %s after its samples", what, name);
		return NULL;
	}
	return f;
}

/* "# HELP name text" or "# TYPE name type"; other comments are ignored. */
static bool parse_comment(PromReader *r, const char *line)
{
	const char *p = skip_blanks(line + 1);
	bool help = g_str_has_prefix(p, "HELP") && is_blank(p[4]);
	bool type = g_str_has_prefix(p, "TYPE") && is_blank(p[4]);
	g_autofree char *name = NULL;
	PromFamily *f;
	size_t n;

	if (!help && !type)
		return true;
	p = skip_blanks(p + 4);
	n = metric_name_len(p);
	if (!n)
		return prom_fail(r, "%s without a valid metric name", help ? "HELP" : "TYPE");
	name = g_strndup(p, n);
	p += n;
	if (*p && !is_blank(*p))
		return prom_fail(r, "bad character '%c' in the name %s...", *p, name);
	p = skip_blanks(p);
	f = family_for_meta(r, name, help ? "HELP" : "TYPE");
	if (!f)
		return false;
	if (help) {
		GString *text = g_string_new(NULL);

		if (f->help) {
			g_string_free(text, TRUE);
			return prom_fail(r, "a second HELP for %s", name);
		}
		for (; *p; p++) {
			if (*p != '\\') {
				g_string_append_c(text, *p);
				continue;
			}
			p++;
			if (*p == '\\' || *p == 'n') {
				g_string_append_c(text, *p == 'n' ? '\n' : '\\');
			} else {
				g_string_free(text, TRUE);
				return prom_fail(r, "HELP of %s: bad escape '\\%c'", name, *p ? *p : ' ');
			}
		}
		f->help = g_string_free(text, FALSE);
		return true;
	}
	if (f->type)
		return prom_fail(r, "a second TYPE for %s", name);
	{
		static const char *const types[] = { "counter", "gauge", "histogram", "summary",
						     "untyped" };
		g_autofree char *t = g_strdup(p);
		bool known = false;

		g_strchomp(t);
		for (size_t i = 0; i < G_N_ELEMENTS(types); i++)
			known |= strcmp(t, types[i]) == 0;
		if (!known)
			return prom_fail(r, "TYPE of %s is '%s', not a type", name, t);
		f->type = g_steal_pointer(&t);
	}
	return true;
}

/* Whether a sample named @name belongs to family @f. */
static bool family_has_sample_name(const PromFamily *f, const char *name)
{
	const char *suffix;

	if (strcmp(f->name, name) == 0)
		return !f->type || strcmp(f->type, "histogram") != 0;
	if (!f->type || !g_str_has_prefix(name, f->name))
		return false;
	suffix = name + strlen(f->name);
	if (strcmp(f->type, "histogram") == 0)
		return !strcmp(suffix, "_bucket") || !strcmp(suffix, "_sum") ||
		       !strcmp(suffix, "_count");
	if (strcmp(f->type, "summary") == 0)
		return !strcmp(suffix, "_sum") || !strcmp(suffix, "_count");
	return false;
}

/* A quoted label value at *@pp (after the opening quote), unescaped into
 * @out; *@pp ends after the closing quote. */
static bool parse_label_value(PromReader *r, const char **pp, GString *out)
{
	const char *p = *pp;

	for (;; p++) {
		if (*p == '\0')
			return prom_fail(r, "a label value without its closing quote");
		if (*p == '"')
			break;
		if (*p != '\\') {
			g_string_append_c(out, *p);
			continue;
		}
		p++;
		if (*p == '\\' || *p == '"')
			g_string_append_c(out, *p);
		else if (*p == 'n')
			g_string_append_c(out, '\n');
		else
			return prom_fail(r, "bad escape '\\%c' in a label value", *p ? *p : ' ');
	}
	*pp = p + 1;
	return true;
}

static gint label_cmp(gconstpointer a, gconstpointer b)
{
	return strcmp(((const PromLabel *)a)->name, ((const PromLabel *)b)->name);
}

/* The series key: the name and the labels sorted by name, escaped again
 * so that no two label sets can give the same key. */
static char *series_key(const PromSample *s)
{
	g_autoptr(GArray) sorted = g_array_copy(s->labels);
	GString *key = g_string_new(s->name);

	g_array_set_clear_func(sorted, NULL);
	g_array_sort(sorted, label_cmp);
	g_string_append_c(key, '{');
	for (guint i = 0; i < sorted->len; i++) {
		const PromLabel *l = &g_array_index(sorted, PromLabel, i);
		g_autofree char *v = g_strescape(l->value, NULL);

		g_string_append_printf(key, "%s%s=\"%s\"", i ? "," : "", l->name, v);
	}
	g_string_append_c(key, '}');
	return g_string_free(key, FALSE);
}

/* "{name="value",...}" at *@pp into @s's labels. */
static bool parse_labels(PromReader *r, const char **pp, PromSample *s)
{
	const char *p = *pp + 1;

	for (;;) {
		PromLabel l = { 0 };
		GString *value;
		size_t n;

		p = skip_blanks(p);
		if (*p == '}')
			break;
		n = label_name_len(p);
		if (!n)
			return prom_fail(r, "%s: a label without a valid name at '%.10s'", s->name, p);
		l.name = g_strndup(p, n);
		p = skip_blanks(p + n);
		if (g_str_has_prefix(l.name, "__")) {
			prom_fail(r, "%s: label %s is reserved (starts with __)", s->name, l.name);
			g_free(l.name);
			return false;
		}
		for (guint i = 0; i < s->labels->len; i++)
			if (strcmp(g_array_index(s->labels, PromLabel, i).name, l.name) == 0) {
				prom_fail(r, "%s: label %s twice", s->name, l.name);
				g_free(l.name);
				return false;
			}
		if (*p != '=') {
			prom_fail(r, "%s: label %s without '='", s->name, l.name);
			g_free(l.name);
			return false;
		}
		p = skip_blanks(p + 1);
		if (*p != '"') {
			prom_fail(r, "%s: label %s's value is not quoted", s->name, l.name);
			g_free(l.name);
			return false;
		}
		p++;
		value = g_string_new(NULL);
		if (!parse_label_value(r, &p, value)) {
			g_string_free(value, TRUE);
			g_free(l.name);
			return false;
		}
		l.value = g_string_free(value, FALSE);
		g_array_append_val(s->labels, l);
		p = skip_blanks(p);
		if (*p == ',') {
			p++;
			continue;
		}
		if (*p != '}')
			return prom_fail(r, "%s: expected ',' or '}' after label %s", s->name, l.name);
	}
	*pp = p + 1;
	return true;
}

/* "name{labels} value [timestamp]". */
static bool parse_sample(PromReader *r, const char *line)
{
	PromSample *s = g_new0(PromSample, 1);
	const char *p = line;
	g_auto(GStrv) rest = NULL;
	size_t n = metric_name_len(p);
	g_autofree char *tail = NULL;
	PromFamily *f;

	s->labels = g_array_new(FALSE, TRUE, sizeof(PromLabel));
	g_array_set_clear_func(s->labels, prom_label_clear);
	s->line = r->line;
	g_ptr_array_add(r->page->samples, s);
	if (!n)
		return prom_fail(r, "not a comment and no valid metric name: '%.20s'", line);
	s->name = g_strndup(p, n);
	p = skip_blanks(p + n);
	if (*p == '{' && !parse_labels(r, &p, s))
		return false;
	if (*p && !is_blank(*p))
		return prom_fail(r, "%s: '%c' where the value should start", s->name, *p);
	tail = g_strstrip(g_strdup(p));
	rest = g_strsplit_set(tail, " \t", -1);
	{
		/* Blanks may repeat between the value and the timestamp. */
		g_autoptr(GPtrArray) words = g_ptr_array_new();

		for (char **w = rest; *w; w++)
			if (**w)
				g_ptr_array_add(words, *w);
		if (words->len == 0)
			return prom_fail(r, "%s: no value", s->name);
		if (words->len > 2)
			return prom_fail(r, "%s: more than a value and a timestamp", s->name);
		if (!parse_value(words->pdata[0], &s->value))
			return prom_fail(r, "%s: '%s' is not a value", s->name,
					 (char *)words->pdata[0]);
		if (words->len == 2 && !parse_timestamp(words->pdata[1]))
			return prom_fail(r, "%s: '%s' is not a timestamp", s->name,
					 (char *)words->pdata[1]);
	}
	/* Its family: the current one, or a new untyped one. */
	f = r->current;
	if (!f || !family_has_sample_name(f, s->name)) {
		PromFamily *old = g_hash_table_lookup(r->seen, s->name);

		if (old)
			return prom_fail(r, "%s: its family %s ended earlier", s->name, old->name);
		f = family_new(r, s->name);
	}
	f->samples++;
	s->family = g_strdup(f->name);
	s->series = series_key(s);
	if (g_hash_table_contains(r->page->series, s->series))
		return prom_fail(r, "series %s appears twice", s->series);
	g_hash_table_insert(r->page->series, s->series, s);
	return true;
}

PromPage *prom_page_parse(const char *text, char **error)
{
	g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
	PromPage *page = g_new0(PromPage, 1);
	PromReader r = { .page = page, .seen = seen };
	g_auto(GStrv) lines = NULL;
	size_t len = strlen(text);

	page->families = g_ptr_array_new_with_free_func(prom_family_free);
	page->samples = g_ptr_array_new_with_free_func(prom_sample_free);
	page->series = g_hash_table_new(g_str_hash, g_str_equal);
	if (!g_utf8_validate(text, (gssize)len, NULL))
		prom_fail(&r, "the page is not UTF-8");
	else if (len == 0 || text[len - 1] != '\n')
		prom_fail(&r, "the page does not end with a line feed");
	if (!r.error) {
		lines = g_strsplit(text, "\n", -1);
		/* The last element is what follows the final line feed: "". */
		for (char **l = lines; l[1] && !r.error; l++) {
			r.line++;
			if (**l == '\0')
				continue; /* the format ignores empty lines */
			if (**l == '#')
				parse_comment(&r, *l);
			else
				parse_sample(&r, *l);
		}
	}
	if (r.error) {
		*error = r.error;
		prom_page_free(page);
		return NULL;
	}
	return page;
}

char *prom_page_check(const PromPage *p, const char *prefix, const char *const *required_labels)
{
	for (guint i = 0; i < p->families->len; i++) {
		const PromFamily *f = p->families->pdata[i];

		if (!f->help || !*f->help)
			return g_strdup_printf("family %s has no HELP text", f->name);
		if (!f->type)
			return g_strdup_printf("family %s has no TYPE", f->name);
		if (!g_str_has_prefix(f->name, prefix))
			return g_strdup_printf("family %s does not start with %s", f->name, prefix);
		if (strcmp(f->type, "counter") == 0 && !g_str_has_suffix(f->name, "_total"))
			return g_strdup_printf("counter %s does not end in _total", f->name);
		if (f->samples == 0)
			return g_strdup_printf("family %s has no sample", f->name);
	}
	for (guint i = 0; i < p->samples->len; i++) {
		const PromSample *s = p->samples->pdata[i];

		for (const char *const *want = required_labels; *want; want++) {
			bool found = false;

			for (guint j = 0; j < s->labels->len; j++)
				found |= strcmp(g_array_index(s->labels, PromLabel, j).name, *want) == 0;
			if (!found)
				return g_strdup_printf("line %u: %s has no label %s", s->line, s->name,
						       *want);
		}
	}
	return NULL;
}

static bool sample_has_label(const PromSample *s, const char *name, const char *value)
{
	for (guint i = 0; i < s->labels->len; i++) {
		const PromLabel *l = &g_array_index(s->labels, PromLabel, i);

		if (strcmp(l->name, name) == 0)
			return strcmp(l->value, value) == 0;
	}
	return false;
}

unsigned prom_page_find(const PromPage *p, const char *name, const char *const *labels,
			double *value)
{
	const PromSample *hit = NULL;
	unsigned n = 0;

	for (guint i = 0; i < p->samples->len; i++) {
		const PromSample *s = p->samples->pdata[i];
		bool match = strcmp(s->name, name) == 0;

		for (const char *const *l = labels; match && l && *l; l += 2)
			match = sample_has_label(s, l[0], l[1]);
		if (match) {
			hit = s;
			n++;
		}
	}
	if (n == 1)
		*value = hit->value;
	return n;
}

double prom_page_value(const PromPage *p, const char *name, const char *const *labels)
{
	double v = -1;
	unsigned n = prom_page_find(p, name, labels, &v);

	if (n != 1)
		g_error("%u samples of %s with those labels, expected 1", n, name);
	return v;
}

const PromFamily *prom_page_family(const PromPage *p, const char *name)
{
	for (guint i = 0; i < p->families->len; i++) {
		const PromFamily *f = p->families->pdata[i];

		if (strcmp(f->name, name) == 0)
			return f;
	}
	return NULL;
}
