/* SPDX-License-Identifier: MIT */
/*
 * The daemon's port at start, around umad_port_open() (which registers the
 * agent): the wait for a port that is not there yet (at boot the unit
 * starts before the drivers have made every device), and the words about
 * who holds the CM class.
 */
#ifndef RDMACM_MUX_PORT_STARTUP_H
#define RDMACM_MUX_PORT_STARTUP_H

/**
 * port_startup_wait() - wait up to @wait_s seconds (0: not at all) for @dev
 * port @port to exist, with its umad device when ib_umad is loaded.
 * SIGTERM and SIGINT must be blocked; either ends the wait.
 * Return: 0 (the port is there, or the time is up), or -EINTR.
 */
int port_startup_wait(const char *dev, int port, int wait_s);
/* The kernel refused the CM class on @dev port @port (exit 3): one line
 * saying who holds it and what to do. */
void port_startup_log_refused(const char *dev, int port);
/* At start: who holds the CM class on each port, and that holding @port
 * takes its whole device from the host's CM. */
void port_startup_log_owners(const char *dev, int port);

#endif /* RDMACM_MUX_PORT_STARTUP_H */
