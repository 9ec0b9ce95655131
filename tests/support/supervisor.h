/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for systemd as the daemon's supervisor (supervisor.c): the
 * notify socket, the file descriptor store (FDSTORE=1, FDSTOREREMOVE=1,
 * FDNAME=), and a start with the stored fds passed as systemd passes
 * them. For the integration tests, which start the real binary under it,
 * and for the daemon object's unit test, which is given the store's fds
 * in-process (supervisor_passed()).
 */
#ifndef RDMACM_MUX_TESTS_SUPERVISOR_H
#define RDMACM_MUX_TESTS_SUPERVISOR_H

#include <glib.h>
#include <stdbool.h>

typedef struct Supervisor Supervisor;

/* A supervisor whose notify socket is in @dir. */
Supervisor *supervisor_new(const char *dir);
void supervisor_free(Supervisor *s);
const char *supervisor_notify_path(const Supervisor *s);
unsigned supervisor_ready_count(Supervisor *s);
/* Wait until more than @after READY=1 came. */
bool supervisor_wait_ready(Supervisor *s, unsigned after, int timeout_ms);
/* How many stored fds have a name starting with @prefix (every message
 * sent so far taken in first, as for the two below). */
unsigned supervisor_stored(Supervisor *s, const char *prefix);
/* The store's fd named @name (still the store's), or -1. */
int supervisor_stored_fd(Supervisor *s, const char *name);
/* Store a copy of @fd under @name, as FDSTORE=1 would (a file stored
 * already is stored again: a test puts back what a crash left). */
void supervisor_store_fd(Supervisor *s, const char *name, int fd);
/* Close everything stored, as systemd does when the unit stops. */
void supervisor_clear(Supervisor *s);
/* What a start is passed, once every message sent so far is taken in:
 * copies of the stored fds (the caller's, above @min_fd plus their
 * number), appended to @fds, and their names to @names. */
void supervisor_passed(Supervisor *s, int min_fd, GPtrArray *names, GArray *fds);
/* fork and exec @argv with @envp plus the notify socket and the stored
 * fds, output to @log_fd. */
GPid supervisor_exec(Supervisor *s, char **argv, char **envp, int log_fd);

#endif /* RDMACM_MUX_TESTS_SUPERVISOR_H */
