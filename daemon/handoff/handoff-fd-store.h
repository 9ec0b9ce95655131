/* SPDX-License-Identifier: MIT */
/*
 * The service manager's file descriptor store: the fds a successor gets
 * back after a restart or a crash (systemd's FileDescriptorStoreMax=, or
 * any supervisor speaking the same notify protocol). The daemon keeps its
 * client sockets and its state there, so that a restart loses nothing.
 *
 * Names: "state" or "state~", and "sessions" or "sessions~" (the hand-off
 * memfds, handoff-format.h: a memfd converted from another version's goes
 * under the other name of its kind, see daemon/relay/relay-handoff.c), and "client.N"
 * for the socket of client N.
 * A listening socket the daemon bound itself is kept as "main" or
 * "control", so that it comes back as if passed by socket activation. The
 * umad fd is "umad.PORT.AGENT.DEV": while the store holds it, the CM agent
 * AGENT stays registered on DEV/PORT and the kernel queues the MADs that
 * come for it; the next process reads them on it and registers nothing.
 * A VM's listening socket is "vm.NAME" (daemon/vm/vm-host.h names it).
 */
#ifndef RDMACM_MUX_FD_STORE_H
#define RDMACM_MUX_FD_STORE_H

#include <stdbool.h>
#include <stdint.h>

#define FD_STORE_STATE "state"
#define FD_STORE_SESSIONS "sessions"
/* The other name of each: a converted memfd is stored under it before
 * the one it replaces is removed. */
#define FD_STORE_STATE_ALT "state~"
#define FD_STORE_SESSIONS_ALT "sessions~"
#define FD_STORE_CLIENT_PREFIX "client."
#define FD_STORE_UMAD_PREFIX "umad."
/* Room for any name the daemon stores (a device name is at most 64 bytes). */
#define FD_STORE_NAME_MAX 96

/**
 * fd_store_setup() - use the store when @wanted and a supervisor listens
 * ($NOTIFY_SOCKET is set). Return: whether the store is used.
 */
bool fd_store_setup(bool wanted);
bool fd_store_enabled(void);

/**
 * fd_store_put() - keep a copy of @fd under @name. Failures are logged
 * (rate limited): the daemon runs on without the guarantee.
 * Return: 0 or a negative errno; 0 without doing anything when the store
 * is not used.
 */
int fd_store_put(const char *name, int fd);
/**
 * fd_store_remove() - drop every fd kept under @name. A failure is not
 * logged here: the caller knows what it means (a client socket the store
 * keeps stays open through the store's copy), and must look (the
 * compiler checks that it does).
 * Return: 0 (also when the store is not used) or a negative errno.
 */
int fd_store_remove(const char *name) __attribute__((warn_unused_result));

/* "client.N" for client @id, in @buf. */
const char *fd_store_client_name(uint32_t id, char buf[32]);
/**
 * fd_store_parse_client_name() - the client id of a "client.N" name.
 * Return: true with *@ret_id set, or false for another name.
 */
bool fd_store_parse_client_name(const char *name, uint32_t *ret_id);

/* "umad.PORT.AGENT.DEV" for the umad fd of @dev/@port whose CM agent is
 * @agent_id, in @buf; NULL when @dev does not fit. */
const char *fd_store_umad_name(const char *dev, int port, int agent_id,
			       char buf[FD_STORE_NAME_MAX]);
/**
 * fd_store_parse_umad_name() - the port, agent id and device of a
 * "umad.PORT.AGENT.DEV" name (*@ret_dev points into @name).
 * Return: true, or false for another name.
 */
bool fd_store_parse_umad_name(const char *name, int *ret_port, int *ret_agent,
			      const char **ret_dev);

#endif
