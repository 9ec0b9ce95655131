/* SPDX-License-Identifier: MIT */
/*
 * A umad port with no device, for in-process drivers (unit tests and
 * fuzzers; the daemon never links it): its fd is an eventfd that never
 * becomes readable, its sends (and those of sender processes forked from
 * the test) go to a callback, and its GID table is read from sysfs as
 * usual (SYSFS_PATH) or kept in memory.
 */
#ifndef RDMACM_MUX_UMAD_PORT_FAKE_H
#define RDMACM_MUX_UMAD_PORT_FAKE_H

#include "umad-port.h"

/* A send: 0, or the negative errno the kernel's write would return. */
typedef int (*UmadPortFakeSendFn)(void *userdata, UmadBuffer *buf, size_t mad_len);

/* @send NULL: every send succeeds and goes nowhere.
 * Return: 0 or a negative errno. */
int umad_port_new_fake(const char *dev, int port, bool roce, UmadPortFakeSendFn send,
		       void *userdata, UmadPort **ret);
/* The same, with the GID table in memory: @gids[i] at index i, RoCE v2
 * (copied). No sysfs is read, ever: for fuzzers, which make a port per
 * input. */
int umad_port_new_fake_gids(const char *dev, int port, bool roce, const uint8_t (*gids)[16],
			    unsigned n_gids, UmadPortFakeSendFn send, void *userdata,
			    UmadPort **ret);

/* A fake port (RoCE) on @fd, taken over: the umad fd a fake port of an
 * earlier daemon stored, as umad_port_adopt() takes a kernel one. */
int umad_port_fake_adopt(const char *dev, int port, int fd, UmadPortFakeSendFn send,
			 void *userdata, UmadPort **ret);

#endif /* RDMACM_MUX_UMAD_PORT_FAKE_H */
