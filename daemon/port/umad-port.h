/* SPDX-License-Identifier: MIT */
/*
 * The umad port: the daemon's one agent for the CM class on DEV/PORT.
 *
 * Wraps libibumad: open the port, register CM class 0x07 version 2 with the
 * Send method, send with timeout_ms=0 (the kernel then never queues the
 * header-only ETIMEDOUT echo), and receive without blocking. Also knows the
 * port's link layer and its GID table.
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

typedef struct UmadPort {
	char *dev;
	int port;
	int fd; /* libibumad's portid, which is the fd */
	int agent_id;
	bool roce;    /* Ethernet link layer: every send needs a GRH */
	uint16_t lid; /* IB only */
	GidTable *gids;
	/* In-process drivers (fuzzers) only: no device, sends go here. */
	int (*fake_send)(void *userdata, UmadBuffer *buf, size_t mad_len);
	void *fake_userdata;
} UmadPort;

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
void umad_port_close(UmadPort *p);

/**
 * umad_port_new_fake() - a port with no device, for in-process drivers
 * (umad-port-fake.c: tests and fuzzers only). The GID table is read from
 * sysfs as usual (SYSFS_PATH); the fd is an eventfd that never becomes
 * readable; sends go to @send.
 */
int umad_port_new_fake(const char *dev, int port, bool roce,
		       int (*send)(void *userdata, UmadBuffer *buf, size_t mad_len),
		       void *userdata, UmadPort **ret);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(UmadPort, umad_port_close)

/**
 * umad_port_send() - send one MAD; @buf->hdr.addr must be complete.
 * Return: 0, or the negative errno of the kernel's write().
 */
int umad_port_send(UmadPort *p, UmadBuffer *buf, size_t mad_len);

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
	int fd;
	int agent_id;
} UmadSendFd;

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
