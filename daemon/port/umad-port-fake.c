/* SPDX-License-Identifier: MIT */
/*
 * Owns the fake umad port (umad_port_new_fake()): a port with no device for
 * in-process drivers, whose sends go to a callback. Linked into unit tests
 * and fuzzers only, never into the daemon.
 */
#include <sys/eventfd.h>

#include "umad-port.h"
#include "util.h"

int umad_port_new_fake(const char *dev, int port, bool roce,
		       int (*send)(void *userdata, UmadBuffer *buf, size_t mad_len),
		       void *userdata, UmadPort **ret)
{
	g_autoptr(UmadPort) p = g_new0(UmadPort, 1);
	int r;

	p->dev = g_strdup(dev);
	p->port = port;
	p->roce = roce;
	p->agent_id = 0;
	p->fake_send = send;
	p->fake_userdata = userdata;
	p->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->fd < 0)
		return -errno;
	r = gid_table_open(dev, port, &p->gids);
	if (r < 0)
		return r;
	*ret = g_steal_pointer(&p);
	return 0;
}

