/* SPDX-License-Identifier: MIT */
/*
 * Unit tests that register themselves.
 *
 *   UNIT_TEST("/cm-codec/tid", test_tid_low_half)
 *   {
 *           g_assert_cmpuint(...);
 *   }
 *   UNIT_TEST_MAIN()
 *
 * and with a fixture: a type named Fixture and a fixture_teardown()
 * declared before the tests, each test naming its data and setup:
 *
 *   UNIT_FIXTURE_TEST("/control/default-mode", NULL, fixture_setup, test_default_mode)
 *   {
 *           ... f, data ...
 *   }
 *
 * A test is named where it is written, so a file has no list of its
 * tests to keep in step with the functions (and no such list repeats
 * itself from file to file). Tests run in the order they are written.
 * For GTest programs of one source file each: the list is the file's.
 */
#ifndef RDMACM_MUX_TESTS_UNIT_TEST_H
#define RDMACM_MUX_TESTS_UNIT_TEST_H

#include <glib.h>
#include <stdlib.h>

typedef struct UnitTestEntry {
	const char *path;
	GTestFunc fn; /* a plain test, or NULL for a fixture test: */
	const void *data;
	gsize fixture_size;
	GTestFixtureFunc setup, test, teardown;
} UnitTestEntry;

/* Filled by the constructors the macros make, before main() runs, when
 * g_test_add_func() may not be called yet. */
static UnitTestEntry unit_tests[128];
static unsigned unit_tests_len;

static inline void unit_test_register(const UnitTestEntry *e)
{
	if (unit_tests_len == G_N_ELEMENTS(unit_tests))
		g_error("more than %u unit tests in one program: raise unit_tests[]",
			(unsigned)G_N_ELEMENTS(unit_tests));
	unit_tests[unit_tests_len++] = *e;
}

/* Declares test function @tfn, registered as @tpath; the body follows. */
#define UNIT_TEST(tpath, tfn)                                                      \
	static void tfn(void);                                                     \
	static void __attribute__((constructor)) tfn##_register(void)              \
	{                                                                          \
		unit_test_register(&(UnitTestEntry){ .path = (tpath), .fn = tfn }); \
	}                                                                          \
	static void tfn(void)

/* GTest's cast for a fixture function. */
#define UNIT_FIXTURE_FUNC(fn) ((GTestFixtureFunc)(void (*)(void))(fn))

/* Registers fixture test function @tfn (Fixture *f, gconstpointer data)
 * as @tpath with @tdata, @tsetup and fixture_teardown. Written on its own
 * for a function that serves several cases, which differ in their data
 * only; @tcase names the registration (unique in the file). */
#define UNIT_FIXTURE_CASE(tpath, tdata, tsetup, tfn, tcase)                        \
	static void __attribute__((constructor)) tcase##_register(void)            \
	{                                                                          \
		unit_test_register(&(UnitTestEntry){                               \
			.path = (tpath), .data = (tdata), .fixture_size = sizeof(Fixture), \
			.setup = UNIT_FIXTURE_FUNC(tsetup), .test = UNIT_FIXTURE_FUNC(tfn), \
			.teardown = UNIT_FIXTURE_FUNC(fixture_teardown) });         \
	}

/* Declares fixture test @tfn (Fixture *f, gconstpointer data), registered
 * as @tpath with @tdata, @tsetup and fixture_teardown; the body follows. */
#define UNIT_FIXTURE_TEST(tpath, tdata, tsetup, tfn)                               \
	static void tfn(Fixture *f, gconstpointer data);                           \
	UNIT_FIXTURE_CASE(tpath, tdata, tsetup, tfn, tfn)                          \
	static void tfn(Fixture *f, gconstpointer data)

/* Adds the registered tests that @keep accepts (every one for NULL), after
 * g_test_init(). */
static inline void unit_test_add_registered_if(gboolean (*keep)(const char *path))
{
	for (unsigned i = 0; i < unit_tests_len; i++) {
		const UnitTestEntry *e = &unit_tests[i];

		if (keep && !keep(e->path))
			continue;
		if (e->fn)
			g_test_add_func(e->path, e->fn);
		else
			g_test_add_vtable(e->path, e->fixture_size, e->data, e->setup, e->test,
					  e->teardown);
	}
}

static inline void unit_test_add_registered(void)
{
	unit_test_add_registered_if(NULL);
}

/* Write @text to @dir/@name, making the directories on the way (a fake
 * sysfs, for one). */
static inline void unit_test_write_file(const char *dir, const char *name, const char *text)
{
	g_autofree char *path = g_build_filename(dir, name, NULL);
	g_autofree char *parent = g_path_get_dirname(path);

	g_assert_cmpint(g_mkdir_with_parents(parent, 0755), ==, 0);
	g_assert_true(g_file_set_contents(path, text, -1, NULL));
}

/* The GIDs of the fake ports below, in sysfs's form. */
#define UNIT_TEST_GID_LINK_LOCAL "fe80:0000:0000:0000:0000:0000:0000:0001"
#define UNIT_TEST_GID_10_0_1_1 "0000:0000:0000:0000:0000:ffff:0a00:0101"
#define UNIT_TEST_GID_10_0_1_2 "0000:0000:0000:0000:0000:ffff:0a00:0102"

/* A fake sysfs in a new temp dir named after @tmpl, which $SYSFS_PATH now
 * names: port 1 of RDMA device @dev, with entry i of its GID table @gids[i]
 * (sysfs's form, NULL-terminated), each of type RoCE v2. Return: the dir,
 * for unit_test_remove_tree(). */
static inline char *unit_test_fake_sysfs(const char *tmpl, const char *dev,
					 const char *const *gids)
{
	char *root = g_dir_make_tmp(tmpl, NULL);
	g_autofree char *port = NULL;

	g_assert_nonnull(root);
	port = g_strdup_printf("%s/class/infiniband/%s/ports/1", root, dev);
	for (unsigned i = 0; gids[i]; i++) {
		g_autofree char *gid = g_strdup_printf("gids/%u", i);
		g_autofree char *type = g_strdup_printf("gid_attrs/types/%u", i);
		g_autofree char *line = g_strdup_printf("%s\n", gids[i]);

		unit_test_write_file(port, gid, line);
		unit_test_write_file(port, type, "RoCE v2\n");
	}
	g_setenv("SYSFS_PATH", root, TRUE);
	return root;
}

/* Remove the tree at @dir (a temp dir of the test's) and free @dir. */
static inline void unit_test_remove_tree(char *dir)
{
	g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", dir);

	g_assert_cmpint(system(cmd), ==, 0);
	g_free(dir);
}

/* main() for a program whose tests are all registered ones. */
#define UNIT_TEST_MAIN()                                  \
	int main(int argc, char **argv)                   \
	{                                                 \
		g_test_init(&argc, &argv, NULL);          \
		unit_test_add_registered();               \
		return g_test_run();                      \
	}

#endif /* RDMACM_MUX_TESTS_UNIT_TEST_H */
