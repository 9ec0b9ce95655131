/* SPDX-License-Identifier: MIT */
/*
 * A tiny JSON emitter for the control socket: appends to a GString and
 * tracks where commas go. It writes only what it is given, always valid
 * JSON: strings are escaped, and bytes that are not UTF-8 (a client's comm
 * is whatever the client's process called itself) are escaped as \u00XX
 * instead of being passed through.
 *
 * Nesting is limited to JSON_MAX_DEPTH; the callers are fixed code paths,
 * so going deeper is a bug and asserts.
 */
#ifndef RDMACM_MUX_JSON_WRITER_H
#define RDMACM_MUX_JSON_WRITER_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 8

typedef struct JsonWriter {
	GString *out;	/* not owned */
	unsigned depth;
	bool need_comma[JSON_MAX_DEPTH + 1];
} JsonWriter;

/* Start writing into @out (appends; does not clear it). */
void json_writer_init(JsonWriter *j, GString *out);

/* Containers. @key is NULL inside an array or at the top level. */
void json_begin_object(JsonWriter *j, const char *key);
void json_end_object(JsonWriter *j);
void json_begin_array(JsonWriter *j, const char *key);
void json_end_array(JsonWriter *j);

/* Members (with @key) or array elements (@key NULL). A NULL @value of
 * json_string() writes null. */
void json_string(JsonWriter *j, const char *key, const char *value);
/* @value is @len bytes, not NUL-terminated; embedded NULs are escaped. */
void json_string_len(JsonWriter *j, const char *key, const char *value, size_t len);
void json_u64(JsonWriter *j, const char *key, uint64_t value);
void json_i64(JsonWriter *j, const char *key, int64_t value);
void json_bool(JsonWriter *j, const char *key, bool value);
void json_null(JsonWriter *j, const char *key);

/* Append @s as a quoted, escaped JSON string to @out. */
void json_append_escaped(GString *out, const char *s, size_t len);

#endif /* RDMACM_MUX_JSON_WRITER_H */
