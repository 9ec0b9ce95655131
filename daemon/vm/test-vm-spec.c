/* SPDX-License-Identifier: MIT */
/* Unit tests of the VM assignment's text forms: the vms.d file and the
 * control socket's arguments, good and hostile, and the prefix rules. */
#include <glib.h>
#include <string.h>

#include "util.h"
#include "vm-spec.h"
#include "unit-test.h"

static void gid(const char *text, uint8_t out[GID_LEN])
{
	g_assert_cmpint(gid_from_string(text, out), ==, 0);
}

static int resolve(const char *name, bool group, uint32_t *ret)
{
	if (!group && strcmp(name, "libvirt-qemu") == 0) {
		*ret = 64055;
		return 0;
	}
	if (group && strcmp(name, "kvm") == 0) {
		*ret = 104;
		return 0;
	}
	return -ENOENT;
}

/* Parse @text as file @name; on failure, the error must contain @want. */
static int conf(const char *name, const char *text, VmSpec *spec, const char *want)
{
	g_autoptr(GString) err = g_string_new(NULL);
	VmSpec before;
	int r;

	memset(spec, 0x5a, sizeof(*spec));
	before = *spec;
	r = vm_spec_parse_conf(name, text, strlen(text), resolve, spec, err);
	if (want) {
		g_assert_cmpint(r, ==, -EINVAL);
		if (!strstr(err->str, want))
			g_error("error '%s' does not say '%s'", err->str, want);
		/* A bad file changes nothing. */
		g_assert_cmpmem(spec, sizeof(*spec), &before, sizeof(before));
	} else {
		if (r < 0)
			g_error("'%s' refused: %s", text, err->str);
		g_assert_cmpstr(err->str, ==, "");
	}
	return r;
}

UNIT_TEST("/vm-spec/name", test_name)
{
	static const char *const valid[] = {
		"web-1", "a", "Tenant_7.db+x",
		"123456789012345678901234567890123456789012345678", /* 48: the most */
	};
	static const char *const invalid[] = {
		"1234567890123456789012345678901234567890123456789", /* 49 */
		"", ".hidden", "..", "-rf", "a/b", "a b", "a:b", "caf\xc3\xa9",
	};

	for (size_t i = 0; i < G_N_ELEMENTS(valid); i++)
		if (!vm_name_valid(valid[i]))
			g_error("'%s' refused", valid[i]);
	for (size_t i = 0; i < G_N_ELEMENTS(invalid); i++)
		if (vm_name_valid(invalid[i]))
			g_error("'%s' taken", invalid[i]);
}

UNIT_TEST("/vm-spec/conf", test_conf)
{
	VmSpec s;
	uint8_t g[GID_LEN];

	conf("web-1",
	     "# web-1's GIDs\n"
	     "gid = fe80::5054:ff:fe12:3456\n"
	     "  gid=::ffff:10.0.1.5  \r\n"
	     "\n"
	     "prefix = 2001:db8:1::/64\n"
	     "owner = libvirt-qemu\n"
	     "group = 104\n"
	     "mode = 0600",
	     &s, NULL);
	g_assert_cmpstr(s.name, ==, "web-1");
	g_assert_cmpuint(s.n_gids, ==, 2);
	gid("::ffff:10.0.1.5", g);
	g_assert_cmpmem(s.gids[1], GID_LEN, g, GID_LEN);
	g_assert_cmpuint(s.n_prefixes, ==, 1);
	g_assert_cmpuint(s.prefixes[0].len, ==, 64);
	g_assert_cmpuint(s.owner, ==, 64055);
	g_assert_cmpuint(s.group, ==, 104);
	g_assert_cmpuint(s.mode, ==, 0600);
	gid("2001:db8:1::77", g);
	g_assert_true(vm_spec_has_gid(&s, g));
	gid("2001:db8:2::77", g);
	g_assert_false(vm_spec_has_gid(&s, g));
	gid("fe80::5054:ff:fe12:3456", g);
	g_assert_true(vm_spec_has_gid(&s, g));

	/* Defaults: no owner, group or mode. */
	conf("b", "prefix = ::ffff:10.0.2.0/120\n", &s, NULL);
	g_assert_cmpuint(s.owner, ==, VM_ID_NONE);
	g_assert_cmpuint(s.group, ==, VM_ID_NONE);
	g_assert_cmpuint(s.mode, ==, VM_ID_NONE);
	g_assert_cmpuint(s.n_gids, ==, 0);
}

UNIT_TEST("/vm-spec/conf-errors", test_conf_errors)
{
	g_autofree char *long_line = g_strnfill(VM_CONF_MAX_LINE + 1, ' ');
	g_autoptr(GString) many = g_string_new(NULL);
	VmSpec s;

	conf("a", "gid = fe80::1\nfrob = 1\n", &s, "line 2: unknown key 'frob'");
	conf("a", "gid = fe80::1\ngid fe80::2\n", &s, "line 2: expected 'key = value'");
	conf("a", "gid = zz\n", &s, "line 1: 'zz' is not a GID");
	conf("a", "gid = ::\n", &s, "line 1: the zero GID");
	conf("a", "gid = fe80::1\ngid = fe80:0::1\n", &s, "line 2: GID fe80:0::1 is given twice");
	conf("a", "gid =\n", &s, "line 1: 'gid' needs a value");
	conf("a", "prefix = 2001:db8::\n", &s, "line 1: '2001:db8::' is not a prefix");
	conf("a", "prefix = 2001:db8::/129\n", &s, "must be a number, 0..128");
	conf("a", "prefix = 2001:db8::/-1\n", &s, "must be a number");
	conf("a", "prefix = 2001:db8::/ 64\n", &s, "must be a number");
	conf("a", "prefix = ::/0\n", &s, "at least /8");
	conf("a", "prefix = 2001:db8::1/64\n", &s, "bits set past its length /64");
	conf("a", "prefix = 2001:db8::/64\nprefix = 2001:db8::/64\n", &s, "line 2: prefix");
	conf("a", "gid = fe80::1\nowner = nobody-here\n", &s, "line 2: no such user 'nobody-here'");
	conf("a", "gid = fe80::1\ngroup = wheel;rm\n", &s, "line 2: group 'wheel;rm' is not a valid name");
	conf("a", "gid = fe80::1\nowner = 4294967295\n", &s, "not a number below");
	conf("a", "gid = fe80::1\nowner = 1\nowner = 2\n", &s, "line 3: 'owner' is given twice");
	conf("a", "gid = fe80::1\nmode = 0888\n", &s, "line 2: mode '0888' is not an octal mode");
	conf("a", "gid = fe80::1\nmode = 01777\n", &s, "is not an octal mode");
	conf("a", "gid = fe80::1\nmode = 0600\nmode = 0660\n", &s, "line 3: 'mode' is given twice");
	conf("a", "gid = fe80::1\n\x01gid = fe80::2\n", &s, "line 2: byte 0x01");
	conf("a", "gid = fe80::1\ngid = fe80::\xc3\xa9\n", &s, "line 2: byte 0xc3");
	conf("a", "# nothing\n\n", &s, "no GID assigned");
	conf("a", "", &s, "no GID assigned");
	conf("-a", "gid = fe80::1\n", &s, "'-a' is not a valid VM name");
	conf("a", long_line, &s, "line 1: longer than");
	for (int i = 0; i <= VM_MAX_GIDS; i++)
		g_string_append_printf(many, "gid = fe80::%x\n", i + 1);
	conf("a", many->str, &s, "line 65: more than 64 GIDs");
	g_string_truncate(many, 0);
	for (int i = 0; i <= VM_MAX_PREFIXES; i++)
		g_string_append_printf(many, "prefix = 2001:db8:%x::/48\n", i + 1);
	conf("a", many->str, &s, "line 17: more than 16 prefixes");

	/* A NUL inside the text is not the end of it. */
	{
		static const char text[] = "gid = fe80::1\n\0gid = fe80::2\n";
		g_autoptr(GString) err = g_string_new(NULL);

		g_assert_cmpint(vm_spec_parse_conf("a", text, sizeof(text) - 1, NULL, &s, err), ==,
				-EINVAL);
		g_assert_nonnull(strstr(err->str, "line 2: byte 0x00"));
	}
	/* Names need a resolver (the control socket sends numbers). */
	{
		static const char text[] = "gid = fe80::1\nowner = root\n";
		g_autoptr(GString) err = g_string_new(NULL);

		g_assert_cmpint(vm_spec_parse_conf("a", text, strlen(text), NULL, &s, err), ==,
				-EINVAL);
		g_assert_nonnull(strstr(err->str, "must be a number here"));
	}
}

UNIT_TEST("/vm-spec/args", test_args)
{
	const char *good[] = { "gid=fe80::1", "gid=::ffff:10.0.1.7", "prefix=2001:db8:7::/64",
			 "owner=64055", "mode=0600" };
	g_autoptr(GString) err = g_string_new(NULL);
	unsigned given = 0;
	VmSpec s, base;

	g_assert_cmpint(vm_spec_parse_args("v", good, G_N_ELEMENTS(good), &s, &given, err), ==, 0);
	g_assert_cmpstr(err->str, ==, "");
	g_assert_cmpuint(given, ==, VM_SPEC_HAS_GIDS | VM_SPEC_HAS_OWNER | VM_SPEC_HAS_MODE);
	g_assert_cmpuint(s.n_gids, ==, 2);
	g_assert_cmpuint(s.n_prefixes, ==, 1);
	g_assert_cmpuint(s.owner, ==, 64055);
	g_assert_cmpuint(s.group, ==, VM_ID_NONE);
	g_assert_cmpint(vm_spec_check(&s, err), ==, 0);

	/* vm set: only what is given changes. */
	base = s;
	{
		const char *edit[] = { "group=104" };

		g_assert_cmpint(vm_spec_parse_args("v", edit, 1, &s, &given, err), ==, 0);
		g_assert_cmpuint(given, ==, VM_SPEC_HAS_GROUP);
		vm_spec_apply(&base, &s, given);
		g_assert_cmpuint(base.n_gids, ==, 2);
		g_assert_cmpuint(base.owner, ==, 64055);
		g_assert_cmpuint(base.group, ==, 104);
	}
	{
		const char *edit[] = { "gid=fe80::9" };

		g_assert_cmpint(vm_spec_parse_args("v", edit, 1, &s, &given, err), ==, 0);
		vm_spec_apply(&base, &s, given);
		g_assert_cmpuint(base.n_gids, ==, 1);
		g_assert_cmpuint(base.n_prefixes, ==, 0);
	}

	/* Each error names its argument; nothing is written. */
	{
		const char *bad[] = { "gid=fe80::1", "gid=zz" };

		memset(&s, 0x77, sizeof(s));
		base = s;
		g_assert_cmpint(vm_spec_parse_args("v", bad, 2, &s, &given, err), ==, -EINVAL);
		g_assert_cmpstr(err->str, ==,
				"argument 2 'gid=zz': 'zz' is not a GID (IPv6 form, e.g. fe80::1 or "
				"::ffff:10.0.0.1)");
		g_assert_cmpmem(&s, sizeof(s), &base, sizeof(base));
	}
	{
		const char *bad[] = { "owner=libvirt-qemu" };

		g_string_truncate(err, 0);
		g_assert_cmpint(vm_spec_parse_args("v", bad, 1, &s, &given, err), ==, -EINVAL);
		g_assert_nonnull(strstr(err->str, "argument 1 'owner=libvirt-qemu': owner"));
	}
	{
		const char *bad[] = { "gid" };

		g_string_truncate(err, 0);
		g_assert_cmpint(vm_spec_parse_args("v", bad, 1, &s, &given, err), ==, -EINVAL);
		g_assert_nonnull(strstr(err->str, "argument 1 'gid': expected key=value"));
	}
	{
		const char *bad[] = { "gid=fe80::1=2" };

		g_string_truncate(err, 0);
		g_assert_cmpint(vm_spec_parse_args("v", bad, 1, &s, &given, err), ==, -EINVAL);
		g_assert_nonnull(strstr(err->str, "'fe80::1=2' is not a GID"));
	}
}

UNIT_TEST("/vm-spec/prefix", test_prefix)
{
	g_autoptr(GString) err = g_string_new(NULL);
	VmPrefix a, b, c;
	uint8_t g[GID_LEN];
	char text[50];

	g_assert_cmpint(vm_prefix_parse("::ffff:10.0.1.0/120", &a, err), ==, 0);
	g_assert_cmpint(vm_prefix_parse("::ffff:10.0.0.0/112", &b, err), ==, 0);
	g_assert_cmpint(vm_prefix_parse("::ffff:10.0.2.0/121", &c, err), ==, 0);
	g_assert_cmpstr(vm_prefix_to_string(&a, text), ==, "::ffff:10.0.1.0/120");
	gid("::ffff:10.0.1.255", g);
	g_assert_true(vm_prefix_contains(&a, g));
	gid("::ffff:10.0.2.0", g);
	g_assert_false(vm_prefix_contains(&a, g));
	g_assert_true(vm_prefix_contains(&b, g));
	g_assert_true(vm_prefix_overlaps(&a, &b));
	g_assert_true(vm_prefix_overlaps(&b, &a));
	g_assert_false(vm_prefix_overlaps(&a, &c));
	gid("::ffff:10.0.2.127", g);
	g_assert_true(vm_prefix_contains(&c, g));
	gid("::ffff:10.0.2.128", g);
	g_assert_false(vm_prefix_contains(&c, g));
	/* A /128 is one GID. */
	g_assert_cmpint(vm_prefix_parse("fe80::1/128", &a, err), ==, 0);
	gid("fe80::1", g);
	g_assert_true(vm_prefix_contains(&a, g));
	gid("fe80::2", g);
	g_assert_false(vm_prefix_contains(&a, g));
}

/* domain=: only as an argument, one UUID, lower-cased; a file has none. */
UNIT_TEST("/vm-spec/domain", test_domain)
{
	static const char *const bad[] = { "domain=9b5d6cf8-8e9a-4b8e-9d3e-3f6c2b1a7e0",
					   "domain=9b5d6cf88e9a-4b8e-9d3e-3f6c2b1a7e011",
					   "domain=../../etc/passwd", "domain=" };
	g_autoptr(GString) err = g_string_new(NULL);
	unsigned given = 0;
	VmSpec s;

	g_assert_cmpint(vm_spec_parse_args("a",
					   (const char *const[]){
						   "gid=fe80::1",
						   "domain=9B5D6CF8-8e9a-4b8e-9d3e-3f6c2b1a7e01" },
					   2, &s, &given, err),
			==, 0);
	g_assert_cmpstr(s.domain, ==, "9b5d6cf8-8e9a-4b8e-9d3e-3f6c2b1a7e01");
	g_assert_cmpuint(given, ==, VM_SPEC_HAS_GIDS | VM_SPEC_HAS_DOMAIN);
	for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
		g_string_truncate(err, 0);
		g_assert_cmpint(vm_spec_parse_args("a", (const char *const[]){ "gid=fe80::1", bad[i] },
						   2, &s, &given, err),
				==, -EINVAL);
		g_assert_nonnull(strstr(err->str, "argument 2"));
	}
	g_string_truncate(err, 0);
	g_assert_cmpint(vm_spec_parse_args("a",
					   (const char *const[]){
						   "domain=9b5d6cf8-8e9a-4b8e-9d3e-3f6c2b1a7e01",
						   "domain=9b5d6cf8-8e9a-4b8e-9d3e-3f6c2b1a7e01" },
					   2, &s, &given, err),
			==, -EINVAL);
	g_assert_nonnull(strstr(err->str, "given twice"));
	conf("a", "gid = fe80::1\ndomain = 9b5d6cf8-8e9a-4b8e-9d3e-3f6c2b1a7e01\n", &s,
	     "line 2: 'domain' is for rdmacm-muxctl vm add");
}

/* Who a socket made for a spec lets in, as the kernel's check on the file
 * decides it: the first class the peer is in, root always. */
UNIT_TEST("/vm-spec/admits", test_admits)
{
	VmSpec s;

	vm_spec_init(&s, "a");
	/* Nothing named: the daemon's (uid 0 here, gid 0), mode 0600. */
	g_assert_true(vm_spec_admits(&s, 0, 0, 0, 0));
	g_assert_false(vm_spec_admits(&s, 0, 0, 65534, 0)); /* its group: 0600 */
	g_assert_false(vm_spec_admits(&s, 0, 0, 65534, 65534));
	s.owner = 65534;
	g_assert_true(vm_spec_admits(&s, 0, 0, 65534, 100));
	g_assert_false(vm_spec_admits(&s, 0, 0, 65532, 100));
	g_assert_true(vm_spec_admits(&s, 0, 0, 0, 0)); /* root: always */
	s.mode = 0460; /* the owner may not, its group may */
	s.group = 100;
	g_assert_false(vm_spec_admits(&s, 0, 0, 65534, 100));
	g_assert_true(vm_spec_admits(&s, 0, 0, 65532, 100));
	g_assert_false(vm_spec_admits(&s, 0, 0, 65532, 101));
	s.mode = 0602;
	g_assert_true(vm_spec_admits(&s, 0, 0, 65532, 101));
	g_assert_false(vm_spec_admits(&s, 0, 0, 65532, 100)); /* the group class says no */
}

UNIT_TEST_MAIN()
