/* SPDX-License-Identifier: MIT */
/*
 * Owns the text forms of a VM's assignment (vm-spec.h): the vms.d file
 * and the control socket's arguments, and the rules every assignment
 * follows. Everything here is input from an operator's file or a control
 * client: bounded, checked byte by byte, never trusted.
 */
#include "vm-spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

bool vm_name_valid(const char *name)
{
	size_t n = strnlen(name, VM_NAME_MAX + 1);

	if (n == 0 || n > VM_NAME_MAX || name[0] == '.' || name[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!g_ascii_isalnum(c) && c != '_' && c != '.' && c != '+' && c != '-')
			return false;
	}
	return true;
}

void vm_spec_init(VmSpec *spec, const char *name)
{
	memset(spec, 0, sizeof(*spec));
	g_strlcpy(spec->name, name, sizeof(spec->name));
	spec->owner = VM_ID_NONE;
	spec->group = VM_ID_NONE;
	spec->mode = VM_ID_NONE;
	spec->domain[0] = '\0';
}

bool vm_domain_valid(const char *text)
{
	if (strnlen(text, VM_DOMAIN_LEN + 1) != VM_DOMAIN_LEN)
		return false;
	for (int i = 0; i < VM_DOMAIN_LEN; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? text[i] != '-' : !g_ascii_isxdigit(text[i]))
			return false;
	}
	return true;
}

bool vm_spec_admits(const VmSpec *spec, uint32_t own_uid, uint32_t own_gid, uint32_t uid,
		    uint32_t gid)
{
	uint32_t mode = spec->mode != VM_ID_NONE ? spec->mode : VM_DEFAULT_MODE;
	uint32_t owner = spec->owner != VM_ID_NONE ? spec->owner : own_uid;
	uint32_t group = spec->group != VM_ID_NONE ? spec->group : own_gid;

	if (uid == 0)
		return true;
	if (uid == owner)
		return mode & 0200;
	if (gid == group)
		return mode & 0020;
	return mode & 0002;
}

/* ---- GIDs and prefixes ---- */

static bool vm_gid_parse(const char *text, uint8_t gid[GID_LEN], GString *err)
{
	if (gid_from_string(text, gid) < 0) {
		g_string_append_printf(err, "'%s' is not a GID (IPv6 form, e.g. fe80::1 or "
					    "::ffff:10.0.0.1)",
				       text);
		return false;
	}
	if (gid_is_zero(gid)) {
		g_string_append(err, "the zero GID cannot be assigned");
		return false;
	}
	return true;
}

int vm_prefix_parse(const char *text, VmPrefix *ret, GString *err)
{
	g_autofree char *copy = g_strdup(text);
	char *slash = strchr(copy, '/'), *end;
	unsigned long len;
	VmPrefix p = { 0 };

	if (!slash) {
		g_string_append_printf(err, "'%s' is not a prefix (GID/LENGTH, e.g. 2001:db8::/64)",
				       text);
		return -EINVAL;
	}
	*slash = '\0';
	errno = 0;
	len = strtoul(slash + 1, &end, 10);
	if (!slash[1] || *end || errno || !g_ascii_isdigit(slash[1]) || len > 128) {
		g_string_append_printf(err, "'%s': the length after '/' must be a number, 0..128",
				       text);
		return -EINVAL;
	}
	if (len < VM_PREFIX_MIN_LEN) {
		g_string_append_printf(err, "'%s': a prefix must be at least /%d long", text,
				       VM_PREFIX_MIN_LEN);
		return -EINVAL;
	}
	if (gid_from_string(copy, p.gid) < 0) {
		g_string_append_printf(err, "'%s': '%s' is not a GID (IPv6 form)", text, copy);
		return -EINVAL;
	}
	p.len = (uint8_t)len;
	for (unsigned bit = p.len; bit < 128; bit++)
		if (p.gid[bit / 8] & (0x80u >> (bit % 8))) {
			g_string_append_printf(err, "'%s' has bits set past its length /%u", text,
					       p.len);
			return -EINVAL;
		}
	*ret = p;
	return 0;
}

/* Whether @a and @b agree on their first @bits bits. */
static bool vm_bits_equal(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;

	if (memcmp(a, b, whole) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((a[whole] ^ b[whole]) & (uint8_t)(0xffu << (8 - rest))) == 0;
}

bool vm_prefix_contains(const VmPrefix *p, const uint8_t gid[GID_LEN])
{
	return vm_bits_equal(p->gid, gid, p->len);
}

bool vm_prefix_overlaps(const VmPrefix *a, const VmPrefix *b)
{
	return vm_bits_equal(a->gid, b->gid, MIN(a->len, b->len));
}

const char *vm_prefix_to_string(const VmPrefix *p, char buf[50])
{
	char text[GID_STR_LEN];

	snprintf(buf, 50, "%s/%u", gid_to_string(p->gid, text), p->len);
	return buf;
}

bool vm_spec_has_gid(const VmSpec *spec, const uint8_t gid[GID_LEN])
{
	for (uint32_t i = 0; i < spec->n_gids; i++)
		if (gid_equal(spec->gids[i], gid))
			return true;
	for (uint32_t i = 0; i < spec->n_prefixes; i++)
		if (vm_prefix_contains(&spec->prefixes[i], gid))
			return true;
	return false;
}

/* ---- one key = value ---- */

typedef enum VmKey {
	VM_KEY_GID,
	VM_KEY_PREFIX,
	VM_KEY_OWNER,
	VM_KEY_GROUP,
	VM_KEY_MODE,
	VM_KEY_DOMAIN,
	VM_KEY_UNKNOWN,
} VmKey;

static VmKey vm_key_from_name(const char *key)
{
	static const char *const names[] = { "gid", "prefix", "owner", "group", "mode", "domain" };

	for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
		if (strcmp(key, names[i]) == 0)
			return (VmKey)i;
	return VM_KEY_UNKNOWN;
}

/* A uid or gid: a decimal number below VM_ID_NONE, or a name through
 * @resolve. */
static bool vm_id_parse(const char *value, bool group, VmSpecResolveFn resolve, uint32_t *ret,
			GString *err)
{
	const char *what = group ? "group" : "owner";
	unsigned long v;
	char *end;

	if (g_ascii_isdigit(value[0])) {
		errno = 0;
		v = strtoul(value, &end, 10);
		if (*end || errno || v >= VM_ID_NONE) {
			g_string_append_printf(err, "%s '%s' is not a number below %u", what, value,
					       VM_ID_NONE);
			return false;
		}
		*ret = (uint32_t)v;
		return true;
	}
	if (!resolve) {
		g_string_append_printf(err, "%s '%s' must be a number here (rdmacm-muxctl "
					    "resolves names)",
				       what, value);
		return false;
	}
	for (const char *p = value; *p; p++)
		if (!g_ascii_isalnum(*p) && *p != '_' && *p != '-' && *p != '.') {
			g_string_append_printf(err, "%s '%s' is not a valid name", what, value);
			return false;
		}
	if (resolve(value, group, ret) < 0) {
		g_string_append_printf(err, "no such %s '%s'", group ? "group" : "user", value);
		return false;
	}
	return true;
}

/* Apply one key and value to @spec; @given collects VM_SPEC_HAS_*;
 * @file: from a vms.d file (which no domain owns). */
static bool vm_spec_take(VmSpec *spec, unsigned *given, const char *key, const char *value,
			 VmSpecResolveFn resolve, bool file, GString *err)
{
	uint8_t gid[GID_LEN];
	VmPrefix p;
	unsigned long mode;
	char *end;

	if (!*value) {
		g_string_append_printf(err, "'%s' needs a value", key);
		return false;
	}
	switch (vm_key_from_name(key)) {
	case VM_KEY_GID:
		if (!vm_gid_parse(value, gid, err))
			return false;
		for (uint32_t i = 0; i < spec->n_gids; i++)
			if (gid_equal(spec->gids[i], gid)) {
				g_string_append_printf(err, "GID %s is given twice", value);
				return false;
			}
		if (spec->n_gids >= VM_MAX_GIDS) {
			g_string_append_printf(err, "more than %d GIDs", VM_MAX_GIDS);
			return false;
		}
		memcpy(spec->gids[spec->n_gids++], gid, GID_LEN);
		*given |= VM_SPEC_HAS_GIDS;
		return true;
	case VM_KEY_PREFIX:
		if (vm_prefix_parse(value, &p, err) < 0)
			return false;
		for (uint32_t i = 0; i < spec->n_prefixes; i++)
			if (spec->prefixes[i].len == p.len &&
			    gid_equal(spec->prefixes[i].gid, p.gid)) {
				g_string_append_printf(err, "prefix %s is given twice", value);
				return false;
			}
		if (spec->n_prefixes >= VM_MAX_PREFIXES) {
			g_string_append_printf(err, "more than %d prefixes", VM_MAX_PREFIXES);
			return false;
		}
		spec->prefixes[spec->n_prefixes++] = p;
		*given |= VM_SPEC_HAS_GIDS;
		return true;
	case VM_KEY_OWNER:
	case VM_KEY_GROUP: {
		bool group = vm_key_from_name(key) == VM_KEY_GROUP;
		unsigned bit = group ? VM_SPEC_HAS_GROUP : VM_SPEC_HAS_OWNER;

		if (*given & bit) {
			g_string_append_printf(err, "'%s' is given twice", key);
			return false;
		}
		if (!vm_id_parse(value, group, resolve, group ? &spec->group : &spec->owner, err))
			return false;
		*given |= bit;
		return true;
	}
	case VM_KEY_MODE:
		if (*given & VM_SPEC_HAS_MODE) {
			g_string_append(err, "'mode' is given twice");
			return false;
		}
		errno = 0;
		mode = strtoul(value, &end, 8);
		if (*end || errno || !g_ascii_isdigit(value[0]) || mode > 0777) {
			g_string_append_printf(err, "mode '%s' is not an octal mode, e.g. 0660", value);
			return false;
		}
		spec->mode = (uint32_t)mode;
		*given |= VM_SPEC_HAS_MODE;
		return true;
	case VM_KEY_DOMAIN:
		/* A file is no domain's: only the control socket takes it. */
		if (file) {
			g_string_append(err, "'domain' is for rdmacm-muxctl vm add (the libvirt hook), "
					     "not for a file");
			return false;
		}
		if (*given & VM_SPEC_HAS_DOMAIN) {
			g_string_append(err, "'domain' is given twice");
			return false;
		}
		if (!vm_domain_valid(value)) {
			g_string_append_printf(err, "domain '%s' is not a UUID (8-4-4-4-12 hex digits)",
					       value);
			return false;
		}
		for (int i = 0; i <= VM_DOMAIN_LEN; i++)
			spec->domain[i] = g_ascii_tolower(value[i]);
		*given |= VM_SPEC_HAS_DOMAIN;
		return true;
	case VM_KEY_UNKNOWN:
		break;
	}
	g_string_append_printf(err, "unknown key '%s' (gid, prefix, owner, group, mode%s)", key,
			       file ? "" : ", domain");
	return false;
}

int vm_spec_check(const VmSpec *spec, GString *err)
{
	if (!vm_name_valid(spec->name)) {
		g_string_append_printf(err, "'%s' is not a valid VM name (1..%d of A-Z a-z 0-9 _ . + -, "
					    "not starting with '.' or '-')",
				       spec->name, VM_NAME_MAX);
		return -EINVAL;
	}
	if (spec->n_gids == 0 && spec->n_prefixes == 0) {
		g_string_append(err, "no GID assigned: give at least one gid or prefix");
		return -EINVAL;
	}
	return 0;
}

/* ---- the vms.d file ---- */

int vm_spec_parse_conf(const char *name, const char *text, size_t len, VmSpecResolveFn resolve,
		       VmSpec *ret, GString *err)
{
	g_autofree VmSpec *spec = g_new(VmSpec, 1);
	unsigned given = 0, line_no = 0;
	size_t pos = 0;

	vm_spec_init(spec, name);
	if (!vm_name_valid(name)) {
		g_string_append_printf(err, "'%s' is not a valid VM name (1..%d of A-Z a-z 0-9 _ . + -, "
					    "not starting with '.' or '-')",
				       name, VM_NAME_MAX);
		return -EINVAL;
	}
	if (len > VM_CONF_MAX_BYTES) {
		g_string_append_printf(err, "larger than %d bytes", VM_CONF_MAX_BYTES);
		return -EINVAL;
	}
	while (pos < len) {
		const char *start = text + pos, *nl = memchr(start, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - start) : len - pos;
		char buf[VM_CONF_MAX_LINE + 1], *key, *value, *eq;
		size_t mark;

		pos += n + (nl ? 1 : 0);
		line_no++;
		if (n > VM_CONF_MAX_LINE) {
			g_string_append_printf(err, "line %u: longer than %d bytes", line_no,
					       VM_CONF_MAX_LINE);
			return -EINVAL;
		}
		memcpy(buf, start, n);
		buf[n] = '\0';
		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)buf[i];

			if (c == '\r' && i == n - 1) {
				buf[i] = '\0';
				break;
			}
			if (c != '\t' && (c < 0x20 || c > 0x7e)) {
				g_string_append_printf(err, "line %u: byte 0x%02x is not printable ASCII",
						       line_no, c);
				return -EINVAL;
			}
		}
		key = g_strstrip(buf);
		if (!*key || *key == '#')
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			g_string_append_printf(err, "line %u: expected 'key = value', got '%s'",
					       line_no, key);
			return -EINVAL;
		}
		*eq = '\0';
		value = g_strstrip(eq + 1);
		g_strstrip(key);
		mark = err->len;
		g_string_append_printf(err, "line %u: ", line_no);
		if (!vm_spec_take(spec, &given, key, value, resolve, true, err))
			return -EINVAL;
		g_string_truncate(err, mark);
	}
	if (vm_spec_check(spec, err) < 0)
		return -EINVAL;
	*ret = *spec;
	return 0;
}

/* ---- the control socket's arguments ---- */

int vm_spec_parse_args(const char *name, const char *const *args, unsigned n, VmSpec *ret,
		       unsigned *ret_given, GString *err)
{
	g_autofree VmSpec *spec = g_new(VmSpec, 1);
	unsigned given = 0;

	vm_spec_init(spec, name);
	for (unsigned i = 0; i < n; i++) {
		g_autofree char *key = g_strdup(args[i]);
		char *eq = strchr(key, '=');
		size_t mark = err->len;

		g_string_append_printf(err, "argument %u '%s': ", i + 1, args[i]);
		if (!eq) {
			g_string_append(err, "expected key=value (gid, prefix, owner, group, mode, "
					     "domain)");
			return -EINVAL;
		}
		*eq = '\0';
		if (!vm_spec_take(spec, &given, key, eq + 1, NULL, false, err))
			return -EINVAL;
		g_string_truncate(err, mark);
	}
	*ret = *spec;
	*ret_given = given;
	return 0;
}

void vm_spec_apply(VmSpec *spec, const VmSpec *edit, unsigned given)
{
	if (given & VM_SPEC_HAS_GIDS) {
		memcpy(spec->gids, edit->gids, sizeof(spec->gids));
		spec->n_gids = edit->n_gids;
		memcpy(spec->prefixes, edit->prefixes, sizeof(spec->prefixes));
		spec->n_prefixes = edit->n_prefixes;
	}
	if (given & VM_SPEC_HAS_OWNER)
		spec->owner = edit->owner;
	if (given & VM_SPEC_HAS_GROUP)
		spec->group = edit->group;
	if (given & VM_SPEC_HAS_MODE)
		spec->mode = edit->mode;
}
