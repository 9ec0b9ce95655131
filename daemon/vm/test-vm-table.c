/* SPDX-License-Identifier: MIT */
/* Unit tests of the VM table: whose is a GID, no two VMs share one, the
 * bound on VMs, and the verdict on every kind of registration. */
#include <glib.h>
#include <string.h>

#include "util.h"
#include "vm-table.h"
#include "unit-test.h"

static void gid(const char *text, uint8_t out[GID_LEN])
{
	g_assert_cmpint(gid_from_string(text, out), ==, 0);
}

/* A spec from "gid=..." tokens separated by spaces. */
static VmSpec spec(const char *name, const char *tokens)
{
	g_auto(GStrv) args = g_strsplit(tokens, " ", -1);
	g_autoptr(GString) err = g_string_new(NULL);
	unsigned given;
	VmSpec s;

	if (vm_spec_parse_args(name, (const char *const *)args, g_strv_length(args), &s, &given, err) < 0 ||
	    vm_spec_check(&s, err) < 0)
		g_error("bad test spec %s: %s", tokens, err->str);
	return s;
}

static VmEntry *add(VmTable *t, const char *name, const char *tokens)
{
	g_autoptr(GString) err = g_string_new(NULL);
	VmSpec s = spec(name, tokens);
	VmEntry *vm = NULL;

	if (vm_table_add(t, &s, NULL, err, &vm) < 0)
		g_error("cannot add %s: %s", name, err->str);
	return vm;
}

/* vm_table_add() must fail with @want_err and say @want. */
static void add_refused(VmTable *t, const char *name, const char *tokens, int want_err,
			const char *want)
{
	g_autoptr(GString) err = g_string_new(NULL);
	VmSpec s = spec(name, tokens);
	VmEntry *vm = NULL;
	uint32_t before = vm_table_count(t);

	g_assert_cmpint(vm_table_add(t, &s, NULL, err, &vm), ==, want_err);
	if (!strstr(err->str, want))
		g_error("error '%s' does not say '%s'", err->str, want);
	g_assert_cmpuint(vm_table_count(t), ==, before);
}

UNIT_TEST("/vm-table/owner-of-gid", test_owner_of_gid)
{
	g_autoptr(VmTable) t = vm_table_new(8);
	VmEntry *a = add(t, "a", "gid=fe80::a gid=::ffff:10.0.1.1");
	VmEntry *b = add(t, "b", "prefix=2001:db8:b::/64 gid=fe80::b");
	uint8_t g[GID_LEN];

	gid("fe80::a", g);
	g_assert_true(vm_table_gid_vm(t, g) == a);
	gid("::ffff:10.0.1.1", g);
	g_assert_true(vm_table_gid_vm(t, g) == a);
	gid("2001:db8:b::1234", g);
	g_assert_true(vm_table_gid_vm(t, g) == b);
	gid("2001:db8:c::1", g);
	g_assert_null(vm_table_gid_vm(t, g));
	g_assert_true(vm_table_find(t, "b") == b);
	g_assert_null(vm_table_find(t, "c"));

	vm_table_remove(t, a);
	gid("fe80::a", g);
	g_assert_null(vm_table_gid_vm(t, g));
	g_assert_cmpuint(vm_table_count(t), ==, 1);
}

UNIT_TEST("/vm-table/no-sharing", test_no_sharing)
{
	g_autoptr(VmTable) t = vm_table_new(8);
	VmEntry *a = add(t, "a", "gid=fe80::a prefix=::ffff:10.0.1.0/120");

	add_refused(t, "a", "gid=fe80::99", -EEXIST, "VM a exists already");
	add_refused(t, "b", "gid=fe80::a", -EADDRINUSE, "GID fe80::a is assigned to VM a already");
	add_refused(t, "b", "gid=::ffff:10.0.1.77", -EADDRINUSE,
		    "GID ::ffff:10.0.1.77 is assigned to VM a already");
	add_refused(t, "b", "prefix=fe80::/64", -EADDRINUSE,
		    "prefix fe80::/64 holds GID fe80::a of VM a");
	add_refused(t, "b", "prefix=::ffff:10.0.0.0/112", -EADDRINUSE,
		    "prefix ::ffff:10.0.0.0/112 meets prefix ::ffff:10.0.1.0/120 of VM a");
	add_refused(t, "b", "gid=fe80::b prefix=::ffff:10.0.1.128/121", -EADDRINUSE, "meets prefix");
	add(t, "b", "gid=fe80::b prefix=::ffff:10.0.2.0/120");

	/* Replacing a VM's assignment is checked against the others only. */
	{
		g_autoptr(GString) err = g_string_new(NULL);
		VmSpec s = spec("a", "gid=fe80::a gid=fe80::aa");
		uint8_t g[GID_LEN];

		g_assert_cmpint(vm_table_replace(t, a, &s, NULL, err), ==, 0);
		gid("::ffff:10.0.1.5", g);
		g_assert_null(vm_table_gid_vm(t, g));
		gid("fe80::aa", g);
		g_assert_true(vm_table_gid_vm(t, g) == a);
		s = spec("a", "gid=fe80::b");
		g_assert_cmpint(vm_table_replace(t, a, &s, NULL, err), ==, -EADDRINUSE);
		g_assert_nonnull(strstr(err->str, "assigned to VM b"));
		/* Refused: the old assignment stands. */
		g_assert_true(vm_table_gid_vm(t, g) == a);
	}
}

UNIT_TEST("/vm-table/max-vms", test_max_vms)
{
	g_autoptr(VmTable) t = vm_table_new(2);

	add(t, "a", "gid=fe80::a");
	add(t, "b", "gid=fe80::b");
	add_refused(t, "c", "gid=fe80::c", -ENOSPC, "2 VMs is the limit (--max-vms)");
	vm_table_remove(t, vm_table_find(t, "a"));
	add(t, "c", "gid=fe80::c");
	{
		g_autoptr(GPtrArray) list = vm_table_list(t);

		g_assert_cmpuint(list->len, ==, 2);
		g_assert_cmpstr(((VmEntry *)list->pdata[0])->spec.name, ==, "b");
		g_assert_cmpstr(((VmEntry *)list->pdata[1])->spec.name, ==, "c");
	}
}

UNIT_TEST("/vm-table/may-register", test_may_register)
{
	enum { BOTH = -1 }; /* either policy */
	static const struct {
		const char *who; /* a VM's name, or NULL: the shared socket */
		const char *gid;
		int policy;
		bool on_port;
		VmRefusal want;
		const char *why;
	} cases[] = {
		{ "a", "fe80::a", BOTH, false, VM_REFUSAL_COUNT, "its own GID, not on the port yet" },
		{ "a", "2001:db8:a::5", BOTH, true, VM_REFUSAL_COUNT, "its own prefix" },
		{ "b", "fe80::a", BOTH, true, VM_REFUSAL_OTHER_VM, "never another VM's" },
		{ "b", "2001:db8:a::5", BOTH, true, VM_REFUSAL_OTHER_VM, "nor in its prefix" },
		{ "a", "fe80::f", BOTH, true, VM_REFUSAL_NOT_ASSIGNED, "never an unassigned one" },
		{ NULL, "fe80::b", BOTH, true, VM_REFUSAL_OTHER_VM, "the shared socket: no VM's" },
		/* The shared socket and a GID no VM has: the policy decides. */
		{ NULL, "fe80::f", VM_GID_POLICY_OPEN, false, VM_REFUSAL_COUNT, "open" },
		{ NULL, "fe80::f", VM_GID_POLICY_ASSIGNED, true, VM_REFUSAL_UNASSIGNED, "assigned" },
		{ NULL, "fe80::f", VM_GID_POLICY_ASSIGNED, false, VM_REFUSAL_NOT_ON_PORT,
		  "assigned, not on the port" },
	};
	g_autoptr(VmTable) t = vm_table_new(8);

	add(t, "a", "gid=fe80::a prefix=2001:db8:a::/64");
	add(t, "b", "gid=fe80::b");
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		VmEntry *who = cases[i].who ? vm_table_find(t, cases[i].who) : NULL;
		uint8_t g[GID_LEN];

		gid(cases[i].gid, g);
		for (int policy = 0; policy < 2; policy++) {
			if (cases[i].policy != BOTH && cases[i].policy != policy)
				continue;
			g_test_message("%s (policy %d)", cases[i].why, policy);
			g_assert_cmpint(vm_table_may_register(t, who, g, policy, cases[i].on_port), ==,
					cases[i].want);
		}
	}
}

UNIT_TEST("/vm-table/names", test_names)
{
	VmGidPolicy p;

	g_assert_cmpstr(vm_cm_group_name(VM_CM_RX_DUPLICATES), ==, "cm_rx_duplicates");
	g_assert_cmpstr(vm_cm_attr_name(CM_IDX_SIDR_REQ), ==, "sidr_req");
	g_assert_cmpstr(vm_refusal_name(VM_REFUSAL_OTHER_VM), ==, "other-vm");
	g_assert_cmpint(vm_gid_policy_from_string("assigned", &p), ==, 0);
	g_assert_cmpint(p, ==, VM_GID_POLICY_ASSIGNED);
	g_assert_cmpstr(vm_gid_policy_name(p), ==, "assigned");
	g_assert_cmpint(vm_gid_policy_from_string("Assigned", &p), ==, -EINVAL);
}

UNIT_TEST_MAIN()
