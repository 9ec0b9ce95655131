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
 * A test is named where it is written, so a file has no list of its
 * tests to keep in step with the functions (and no such list repeats
 * itself from file to file). Tests run in the order they are written.
 * For GTest programs of one source file each: the list is the file's.
 */
#ifndef RDMACM_MUX_TESTS_UNIT_TEST_H
#define RDMACM_MUX_TESTS_UNIT_TEST_H

#include <glib.h>

typedef struct UnitTestEntry {
	const char *path;
	GTestFunc fn;
} UnitTestEntry;

/* Filled by the constructors UNIT_TEST() makes, before main() runs, when
 * g_test_add_func() may not be called yet. */
static UnitTestEntry unit_tests[128];
static unsigned unit_tests_len;

static inline void unit_test_register(const char *path, GTestFunc fn)
{
	if (unit_tests_len == G_N_ELEMENTS(unit_tests))
		g_error("more than %u unit tests in one program: raise unit_tests[]",
			(unsigned)G_N_ELEMENTS(unit_tests));
	unit_tests[unit_tests_len++] = (UnitTestEntry){ path, fn };
}

/* Declares test function @fn, registered as @path; the body follows. */
#define UNIT_TEST(path, fn)                                                   \
	static void fn(void);                                                 \
	static void __attribute__((constructor)) fn##_register(void)          \
	{                                                                     \
		unit_test_register(path, fn);                                 \
	}                                                                     \
	static void fn(void)

/* Adds every registered test after g_test_init(). */
static inline void unit_test_add_registered(void)
{
	for (unsigned i = 0; i < unit_tests_len; i++)
		g_test_add_func(unit_tests[i].path, unit_tests[i].fn);
}

/* main() for a program whose tests are all UNIT_TEST()s. */
#define UNIT_TEST_MAIN()                                  \
	int main(int argc, char **argv)                   \
	{                                                 \
		g_test_init(&argc, &argv, NULL);          \
		unit_test_add_registered();               \
		return g_test_run();                      \
	}

#endif /* RDMACM_MUX_TESTS_UNIT_TEST_H */
