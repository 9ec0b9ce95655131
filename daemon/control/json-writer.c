/* SPDX-License-Identifier: MIT */
/* Owns the JSON emitter of the control socket (json-writer.h). */
#include "json-writer.h"

#include <assert.h>
#include <inttypes.h>
#include <string.h>

void json_writer_init(JsonWriter *j, GString *out)
{
	*j = (JsonWriter){ .out = out };
}

void json_append_escaped(GString *out, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	/* Invalid UTF-8 is escaped byte by byte (as Latin-1 code points), so
	 * the output stays valid JSON whatever the input was. */
	bool utf8 = g_utf8_validate_len(s, len, NULL);

	g_string_append_c(out, '"');
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		switch (c) {
		case '"':
			g_string_append(out, "\\\"");
			break;
		case '\\':
			g_string_append(out, "\\\\");
			break;
		case '\n':
			g_string_append(out, "\\n");
			break;
		case '\r':
			g_string_append(out, "\\r");
			break;
		case '\t':
			g_string_append(out, "\\t");
			break;
		default:
			if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8)) {
				g_string_append(out, "\\u00");
				g_string_append_c(out, hex[c >> 4]);
				g_string_append_c(out, hex[c & 15]);
			} else {
				g_string_append_c(out, (char)c);
			}
		}
	}
	g_string_append_c(out, '"');
}

/* Comma and key before a value or a container. */
static void json_prefix(JsonWriter *j, const char *key)
{
	if (j->need_comma[j->depth])
		g_string_append_c(j->out, ',');
	j->need_comma[j->depth] = true;
	if (key) {
		json_append_escaped(j->out, key, strlen(key));
		g_string_append_c(j->out, ':');
	}
}

static void json_open(JsonWriter *j, const char *key, char bracket)
{
	json_prefix(j, key);
	g_string_append_c(j->out, bracket);
	assert(j->depth < JSON_MAX_DEPTH);
	j->depth++;
	j->need_comma[j->depth] = false;
}

static void json_close(JsonWriter *j, char bracket)
{
	assert(j->depth > 0);
	j->depth--;
	g_string_append_c(j->out, bracket);
}

void json_begin_object(JsonWriter *j, const char *key)
{
	json_open(j, key, '{');
}

void json_end_object(JsonWriter *j)
{
	json_close(j, '}');
}

void json_begin_array(JsonWriter *j, const char *key)
{
	json_open(j, key, '[');
}

void json_end_array(JsonWriter *j)
{
	json_close(j, ']');
}

void json_string_len(JsonWriter *j, const char *key, const char *value, size_t len)
{
	json_prefix(j, key);
	json_append_escaped(j->out, value, len);
}

void json_string(JsonWriter *j, const char *key, const char *value)
{
	if (!value) {
		json_null(j, key);
		return;
	}
	json_string_len(j, key, value, strlen(value));
}

void json_u64(JsonWriter *j, const char *key, uint64_t value)
{
	json_prefix(j, key);
	g_string_append_printf(j->out, "%" PRIu64, value);
}

void json_i64(JsonWriter *j, const char *key, int64_t value)
{
	json_prefix(j, key);
	g_string_append_printf(j->out, "%" PRId64, value);
}

void json_bool(JsonWriter *j, const char *key, bool value)
{
	json_prefix(j, key);
	g_string_append(j->out, value ? "true" : "false");
}

void json_null(JsonWriter *j, const char *key)
{
	json_prefix(j, key);
	g_string_append(j->out, "null");
}
