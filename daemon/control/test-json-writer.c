/* SPDX-License-Identifier: MIT */
/* Unit tests of the control socket's JSON emitter: its output must parse
 * (json-glib) and give back exactly what went in, hostile strings too. */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "json-writer.h"
#include "unit-test.h"

static JsonNode *parse(const char *text)
{
	g_autoptr(JsonParser) p = json_parser_new();
	g_autoptr(GError) err = NULL;

	if (!json_parser_load_from_data(p, text, -1, &err))
		g_error("invalid JSON (%s): %s", err->message, text);
	return json_node_copy(json_parser_get_root(p));
}

UNIT_TEST("/json-writer/structure", test_structure)
{
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(JsonNode) root = NULL;
	JsonWriter j;
	JsonObject *o;
	JsonArray *a;

	json_writer_init(&j, out);
	json_begin_object(&j, NULL);
	json_u64(&j, "big", UINT64_MAX);
	json_i64(&j, "neg", -5);
	json_bool(&j, "yes", true);
	json_null(&j, "nothing");
	json_string(&j, "null-string", NULL);
	json_begin_array(&j, "list");
	json_u64(&j, NULL, 1);
	json_begin_object(&j, NULL);
	json_end_object(&j);
	json_begin_array(&j, NULL);
	json_end_array(&j);
	json_string(&j, NULL, "x");
	json_end_array(&j);
	json_begin_object(&j, "empty");
	json_end_object(&j);
	json_end_object(&j);
	g_assert_cmpuint(j.depth, ==, 0);

	root = parse(out->str);
	o = json_node_get_object(root);
	g_assert_cmpstr(json_object_get_string_member(o, "null-string"), ==, NULL);
	g_assert_true(json_object_get_null_member(o, "nothing"));
	g_assert_cmpint(json_object_get_int_member(o, "neg"), ==, -5);
	g_assert_true(json_object_get_boolean_member(o, "yes"));
	a = json_object_get_array_member(o, "list");
	g_assert_cmpuint(json_array_get_length(a), ==, 4);
	g_assert_cmpstr(json_array_get_string_element(a, 3), ==, "x");
	g_assert_nonnull(strstr(out->str, "\"big\":18446744073709551615"));
}

static void check_string_roundtrip(const char *in, size_t len, const char *expect)
{
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(JsonNode) root = NULL;
	JsonWriter j;

	json_writer_init(&j, out);
	json_begin_object(&j, NULL);
	json_string_len(&j, "s", in, len);
	json_end_object(&j);
	root = parse(out->str);
	g_assert_cmpstr(json_object_get_string_member(json_node_get_object(root), "s"), ==,
			expect);
	/* Nothing raw below 0x20 ever reaches the output. */
	for (const char *p = out->str; *p; p++)
		g_assert_cmpint((unsigned char)*p, >=, 0x20);
}

UNIT_TEST("/json-writer/escaping", test_escaping)
{
	static const char ctl[] = "a\"b\\c\nd\re\tf\001g\037h\177i";

	check_string_roundtrip(ctl, sizeof(ctl) - 1, ctl);
	check_string_roundtrip("héllo", strlen("héllo"), "héllo");
	/* An embedded NUL survives as \u0000... which json-glib then cuts
	 * at, as C strings do; the point is that the document is valid. */
	check_string_roundtrip("a\0b", 3, "a");
	/* Invalid UTF-8 (a hostile comm) becomes Latin-1 code points. */
	check_string_roundtrip("x\xff\xfey", 4, "x\xc3\xbf\xc3\xbey");
}

UNIT_TEST_MAIN()
