/* SPDX-License-Identifier: MIT */
/*
 * Claiming the daemon's port, around umad_port_open(): the wait for a port
 * that is not there yet (at boot the unit starts before the drivers have
 * made every device), and the words about who holds the CM class.
 */
#ifndef RDMACM_MUX_PORT_CLAIM_H
#define RDMACM_MUX_PORT_CLAIM_H

/**
 * port_claim_wait() - wait up to @wait_s seconds (0: not at all) for @dev
 * port @port to exist, with its umad device when ib_umad is loaded.
 * SIGTERM and SIGINT must be blocked; either ends the wait.
 * Return: 0 (the port is there, or the time is up), or -EINTR.
 */
int port_claim_wait(const char *dev, int port, int wait_s);
/* The kernel refused the CM class on @dev port @port (exit 3): one line
 * saying who holds it and what to do. */
void port_claim_log_refused(const char *dev, int port);
/* At start: who holds the CM class on each port, and that holding @port
 * takes its whole device from the host's CM. */
void port_claim_log_owners(const char *dev, int port);

#endif /* RDMACM_MUX_PORT_CLAIM_H */
