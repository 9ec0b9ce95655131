/* SPDX-License-Identifier: MIT */
/*
 * The umad port: the daemon's one agent for the CM class on DEV/PORT.
 *
 * Wraps libibumad: open the port, register CM class 0x07 version 2 with the
 * Send method, send with timeout_ms=0 (the kernel then never queues the
 * header-only ETIMEDOUT echo), and receive without blocking. Also knows the
 * port's link layer and its GID table.
 *
 * What a port does with MADs is a table of operations chosen when it is
 * made: libibumad's for a port of the kernel (umad_port_open(),
 * umad_port_adopt()), or another implementation's for a port made
 * elsewhere (the tests' stand-in, which the daemon never links). Callers
 * go through the functions below either way.
 */
#ifndef RDMACM_MUX_UMAD_PORT_H
#define RDMACM_MUX_UMAD_PORT_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gid-table.h"
#include "rdmacm-mux-proto.h"

/* A umad buffer: the 64-byte header followed by one MAD. */
typedef struct UmadBuffer {
	struct rdmacm_mux_umad_hdr hdr;
	uint8_t mad[RDMACM_MUX_MAD_SIZE];
} UmadBuffer;

typedef struct UmadPort UmadPort;

/*
 * A umad fd of its own for one sender process, with a send-only CM agent
 * (no method mask: it never competes for the class, and replies still
 * come to the port's agent, because CM messages are all Sends). The kernel
 * holds a fd's mutex for a whole write, address resolution included
 * (about a second for an unreachable RoCE destination), so senders that
 * shared a fd would wait for each other, and the loop's own reads and
 * polls on it would wait too.
 */
typedef struct UmadSendFd {
	const UmadPort *port;
	int fd;
	int agent_id;
} UmadSendFd;

/* What a port does; every function as the umad_port_*() that calls it. */
typedef struct UmadPortOps {
	int (*send)(UmadPort *p, UmadBuffer *buf, size_t mad_len);
	int (*recv)(UmadPort *p, UmadBuffer *buf, size_t *mad_len);
	int (*open_send_fd)(const UmadPort *p, UmadSendFd *ret);
	int (*send_on)(const UmadSendFd *s, UmadBuffer *buf, size_t mad_len);
	void (*close_send_fd)(UmadSendFd *s);
	/* Release the device side (the fd and what hangs on it). */
	void (*release)(UmadPort *p);
} UmadPortOps;

/* The ops of an implementation that names each function after the op it
 * fills: UMAD_PORT_OPS(umad_port_kernel) takes umad_port_kernel_send, ... */
#define UMAD_PORT_OPS(prefix)                                                              \
	{ .send = prefix##_send, .recv = prefix##_recv, .open_send_fd = prefix##_open_send_fd, \
	  .send_on = prefix##_send_on, .close_send_fd = prefix##_close_send_fd,                \
	  .release = prefix##_release }

struct UmadPort {
	const UmadPortOps *ops;
	void *ops_data; /* the implementation's */
	char *dev;
	int port;
	int fd; /* the fd the loop polls (libibumad's portid is the fd) */
	int agent_id;
	bool roce;    /* Ethernet link layer: every send needs a GRH */
	uint16_t lid; /* IB only */
	GidTable *gids;
};

/**
 * umad_port_open() - open @dev/@port and register as its CM agent.
 *
 * Logs the reason on failure, with what the operator can do about it,
 * because only this function knows which step failed; all but -EBUSY,
 * whose message depends on who holds the class (the caller finds out).
 *
 * Return: 0; -EBUSY when the CM class is already owned (ib_cm, another
 * agent); -ENODEV when the device or port does not exist; another
 * negative errno.
 */
int umad_port_open(const char *dev, int port, UmadPort **ret);

/**
 * umad_port_adopt() - take over @fd, a umad fd of @dev/@port on which a
 * previous process of the daemon registered the CM agent @agent_id (the fd
 * store kept it over a restart): no new registration, so the class was
 * never free and the MADs that came meanwhile wait in the fd's queue.
 * Checks what can be checked of @fd (open for reading and writing; when it
 * is a character device, the umad device of @dev/@port); @fd is closed
 * when it does not hold up.
 * Return: 0; -EBADF when @fd is not that port's; another negative errno
 * as umad_port_open() (the port's information could not be read).
 * Nothing is logged: the caller says what it does instead.
 */
int umad_port_adopt(const char *dev, int port, int fd, int agent_id, UmadPort **ret);

/* Close the port. Its agent ends with the last copy of its fd (the fd
 * store may keep one for a successor). NULL-safe. */
void umad_port_close(UmadPort *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(UmadPort, umad_port_close)

/**
 * umad_port_new() - a port whose operations are @ops (@ops_data theirs),
 * with @fd for the loop to poll, and @gids as its GID table, or, when NULL,
 * the one of @dev/@port read from sysfs (SYSFS_PATH). For implementations
 * other than libibumad's. @fd and @gids are taken over.
 * Return: 0 or a negative errno (@fd and @gids are freed).
 */
int umad_port_new(const char *dev, int port, bool roce, int fd, const UmadPortOps *ops,
		  void *ops_data, GidTable *gids, UmadPort **ret);

/**
 * umad_port_send() - send one MAD; @buf->hdr.addr must be complete.
 * Return: 0, or the negative errno of the kernel's write().
 */
int umad_port_send(UmadPort *p, UmadBuffer *buf, size_t mad_len);

/* Open a send fd on @p's device and port. Return: 0 or a negative errno. */
int umad_port_open_send_fd(const UmadPort *p, UmadSendFd *ret);
void umad_port_close_send_fd(UmadSendFd *s);
/* Send one MAD on @s (see umad_port_send()); may block in the kernel. */
int umad_port_send_on(const UmadSendFd *s, UmadBuffer *buf, size_t mad_len);

/**
 * umad_port_recv() - take one received MAD without blocking.
 * @mad_len: out, MAD bytes (24 for a header-only status packet)
 * Return: 0; -EAGAIN when the queue is empty; -EIO when the device is
 * gone; another negative errno.
 */
int umad_port_recv(UmadPort *p, UmadBuffer *buf, size_t *mad_len);

#endif /* RDMACM_MUX_UMAD_PORT_H */
