/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the tests' Prometheus text reader (prom-text.h): a good
 * page reads back with its values and unescaped labels, and a page that
 * breaks any one rule is refused with a message naming the rule. Without
 * these, a reader that accepted anything would let the metrics tests pass
 * on a broken page.
 */
#include <glib.h>
#include <string.h>

#include "prom-text.h"

static const char *const required[] = { "device", "port", NULL };

static const char good[] =
	"# A comment.\n"
	"# HELP x_requests_total Frames, with a \\\\ and a \\n in the help.\n"
	"# TYPE x_requests_total counter\n"
	"x_requests_total{device=\"d\",port=\"1\"} 7\n"
	"\n"
	"# HELP x_up Up.\n"
	"# TYPE x_up gauge\n"
	"x_up{device=\"a\\\\b\\\"c\\nd\",port=\"1\",state=\"s\"} 1.5e3 1700000000000\n"
	"x_up{ device = \"a\" , port=\"1\", } -Inf\n";

static void test_good(void)
{
	g_autofree char *error = NULL;
	g_autoptr(PromPage) p = prom_page_parse(good, &error);
	const PromFamily *f;
	double v = 0;

	if (!p)
		g_error("refused: %s", error);
	g_assert_null(prom_page_check(p, "x_", required));
	g_assert_cmpuint(p->families->len, ==, 2);
	g_assert_cmpuint(p->samples->len, ==, 3);
	f = prom_page_family(p, "x_requests_total");
	g_assert_nonnull(f);
	g_assert_cmpstr(f->type, ==, "counter");
	g_assert_cmpstr(f->help, ==, "Frames, with a \\ and a \n in the help.");
	g_assert_cmpuint(prom_page_find(p, "x_requests_total", NULL, &v), ==, 1);
	g_assert_cmpfloat(v, ==, 7);
	g_assert_cmpuint(prom_page_find(p, "x_up", (const char *const[]){ "device", "a\\b\"c\nd",
									   NULL },
					&v),
			 ==, 1);
	g_assert_cmpfloat(v, ==, 1500);
	g_assert_cmpuint(prom_page_find(p, "x_up", (const char *const[]){ "port", "1", NULL }, &v),
			 ==, 2);
	g_assert_cmpuint(prom_page_find(p, "x_down", NULL, &v), ==, 0);
}

/* Each page breaks one rule; @why is part of the reader's message. */
typedef struct BadPage {
	const char *text;
	const char *why;
	bool check; /* a rule of prom_page_check(), not of the grammar */
} BadPage;

static const BadPage bad_pages[] = {
	{ "x_a{device=\"d\",port=\"1\"} 1", "line feed", false },
	{ "x_a{device=\"d\",port=\"1\"} 1\n\xff\n", "UTF-8", false },
	{ "x_a{device=\"d\",port=\"1\"}\n", "no value", false },
	{ "x_a{device=\"d\",port=\"1\"} one\n", "not a value", false },
	{ "x_a{device=\"d\",port=\"1\"} 1 2 3\n", "more than", false },
	{ "x_a{device=\"d\",port=\"1\"} 1 1.5\n", "timestamp", false },
	{ "x_a{device=\"d,port=\"1\"} 1\n", "expected ','", false },
	{ "x_a{device=\"d\\t\",port=\"1\"} 1\n", "bad escape", false },
	{ "x_a{device=\"d,port=1} 1\n", "closing quote", false },
	{ "x_a{device=d,port=\"1\"} 1\n", "not quoted", false },
	{ "x_a{device=\"d\",device=\"e\",port=\"1\"} 1\n", "twice", false },
	{ "x_a{__name=\"d\"} 1\n", "reserved", false },
	{ "x_a{1device=\"d\"} 1\n", "valid name", false },
	{ "x-a 1\n", "value should start", false },
	{ "9x 1\n", "no valid metric name", false },
	{ "# HELP x_a A.\n# HELP x_a B.\n", "second HELP", false },
	{ "# TYPE x_a gauge\n# TYPE x_a gauge\n", "second TYPE", false },
	{ "# TYPE x_a thing\n", "not a type", false },
	{ "# HELP x_a A \\t.\n", "bad escape", false },
	{ "x_a{device=\"d\",port=\"1\"} 1\n# TYPE x_a gauge\n", "after its samples", false },
	{ "x_a{device=\"d\",port=\"1\"} 1\nx_b{device=\"d\",port=\"1\"} 1\n"
	  "x_a{device=\"d\",port=\"2\"} 1\n",
	  "ended earlier", false },
	{ "x_a{device=\"d\",port=\"1\"} 1\nx_a{port=\"1\",device=\"d\"} 2\n", "twice", false },
	/* The project's rules. */
	{ "# TYPE x_a gauge\nx_a{device=\"d\",port=\"1\"} 1\n", "no HELP", true },
	{ "# HELP x_a A.\nx_a{device=\"d\",port=\"1\"} 1\n", "no TYPE", true },
	{ "# HELP y_a A.\n# TYPE y_a gauge\ny_a{device=\"d\",port=\"1\"} 1\n", "start with", true },
	{ "# HELP x_a A.\n# TYPE x_a counter\nx_a{device=\"d\",port=\"1\"} 1\n", "_total", true },
	{ "# HELP x_a A.\n# TYPE x_a gauge\nx_a{device=\"d\"} 1\n", "no label port", true },
	{ "# HELP x_a A.\n# TYPE x_a gauge\n", "no sample", true },
};

static void test_bad(gconstpointer data)
{
	const BadPage *b = data;
	g_autofree char *error = NULL;
	g_autoptr(PromPage) p = prom_page_parse(b->text, &error);

	if (b->check) {
		if (!p)
			g_error("the grammar refused it: %s", error);
		error = prom_page_check(p, "x_", required);
	} else {
		g_assert_null(p);
	}
	if (!error || !strstr(error, b->why))
		g_error("page '%s': expected an error about '%s', got '%s'", b->text, b->why,
			error ? error : "(none)");
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/prom-text/good", test_good);
	for (size_t i = 0; i < G_N_ELEMENTS(bad_pages); i++) {
		g_autofree char *path = g_strdup_printf("/prom-text/bad/%zu", i);

		g_test_add_data_func(path, &bad_pages[i], test_bad);
	}
	return g_test_run();
}
