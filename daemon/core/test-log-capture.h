/* SPDX-License-Identifier: MIT */
/*
 * For the daemon's unit tests: what a piece of code logs. The logger
 * writes to stderr; a test reads what one call wrote there, at every
 * level, to assert that a failure is said once and how.
 */
#ifndef RDMACM_MUX_TEST_LOG_CAPTURE_H
#define RDMACM_MUX_TEST_LOG_CAPTURE_H

#include <glib.h>
#include <stdio.h>
#include <sys/mman.h>
#include <syslog.h>
#include <unistd.h>

#include "log.h"

/* What @fn(@arg) writes to stderr (the first 4 KiB), every level logged;
 * the log level is the caller's again afterwards. */
static inline char *test_log_capture(void (*fn)(void *arg), void *arg)
{
	int mem = memfd_create("stderr", MFD_CLOEXEC), saved = dup(2), level = log_get_max_level();
	char buf[4096];
	ssize_t n;

	g_assert_cmpint(mem, >=, 0);
	g_assert_cmpint(saved, >=, 0);
	fflush(stderr);
	g_assert_cmpint(dup2(mem, 2), ==, 2);
	log_setup(LOG_DEBUG, true);
	fn(arg);
	fflush(stderr);
	log_setup(level, true);
	g_assert_cmpint(dup2(saved, 2), ==, 2);
	close(saved);
	n = pread(mem, buf, sizeof(buf) - 1, 0);
	g_assert_cmpint(n, >=, 0);
	buf[n] = '\0';
	close(mem);
	return g_strdup(buf);
}

#endif
