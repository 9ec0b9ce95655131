/* SPDX-License-Identifier: MIT */
/*
 * Owns the fake umad port (umad_port_new_fake()): a port with no device for
 * in-process drivers, whose sends go to a callback. Linked into unit tests
 * and fuzzers only, never into the daemon.
 */
#include <string.h>
#include <sys/eventfd.h>

#include "umad-port-fake.h"
#include "util.h"

typedef struct UmadPortFake {
	UmadPortFakeSendFn send;
	void *userdata;
} UmadPortFake;

/* A send through the callback; with none, every send succeeds unseen. */
static int umad_port_fake_call(const UmadPortFake *f, UmadBuffer *buf, size_t mad_len)
{
	return f->send ? f->send(f->userdata, buf, mad_len) : 0;
}

static int umad_port_fake_send(UmadPort *p, UmadBuffer *buf, size_t mad_len)
{
	return umad_port_fake_call(p->ops_data, buf, mad_len);
}

static int umad_port_fake_recv(UmadPort *p, UmadBuffer *buf, size_t *mad_len)
{
	(void)p;
	(void)buf;
	(void)mad_len;
	return -EAGAIN;
}

/* A sender process of a fake port sends through the same callback (a
 * copy of it, in the forked process). */
static int umad_port_fake_open_send_fd(const UmadPort *p, UmadSendFd *ret)
{
	(void)p;
	ret->agent_id = 0;
	return 0;
}

static int umad_port_fake_send_on(const UmadSendFd *s, UmadBuffer *buf, size_t mad_len)
{
	return umad_port_fake_call(s->port->ops_data, buf, mad_len);
}

static void umad_port_fake_close_send_fd(UmadSendFd *s)
{
	(void)s;
}

static void umad_port_fake_release(UmadPort *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	g_free(p->ops_data);
	p->ops_data = NULL;
}

static const UmadPortOps umad_port_fake_ops = UMAD_PORT_OPS(umad_port_fake);

/* A fake port on @fd (taken over), or on a new eventfd when @fd is -1. */
static int umad_port_new_fake_with(const char *dev, int port, bool roce, int fd, GidTable *gids,
				   UmadPortFakeSendFn send, void *userdata, UmadPort **ret)
{
	UmadPortFake *f = g_new0(UmadPortFake, 1);

	if (fd < 0)
		fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0) {
		g_free(f);
		gid_table_free(gids);
		return -errno;
	}
	f->send = send;
	f->userdata = userdata;
	/* The port owns @f from here, and frees it when it goes. */
	return umad_port_new(dev, port, roce, fd, &umad_port_fake_ops, f, gids, ret);
}

int umad_port_new_fake(const char *dev, int port, bool roce, UmadPortFakeSendFn send,
		       void *userdata, UmadPort **ret)
{
	return umad_port_new_fake_with(dev, port, roce, -1, NULL, send, userdata, ret);
}

int umad_port_fake_adopt(const char *dev, int port, int fd, UmadPortFakeSendFn send,
			 void *userdata, UmadPort **ret)
{
	return umad_port_new_fake_with(dev, port, true, fd, NULL, send, userdata, ret);
}

/* ---- a GID table in memory ---- */

typedef struct UmadPortFakeGids {
	unsigned n;
	uint8_t (*gids)[GID_LEN];
} UmadPortFakeGids;

static int umad_port_fake_gids_count(void *userdata)
{
	return (int)((UmadPortFakeGids *)userdata)->n;
}

static int umad_port_fake_gids_read(void *userdata, unsigned index, const uint8_t expect[GID_LEN],
				    uint8_t gid[GID_LEN])
{
	UmadPortFakeGids *g = userdata;

	(void)expect;
	if (index >= g->n)
		return -ENOENT;
	memcpy(gid, g->gids[index], GID_LEN);
	return 0;
}

static GidType umad_port_fake_gids_type(void *userdata, unsigned index)
{
	(void)userdata;
	(void)index;
	return GID_TYPE_ROCE_V2;
}

static void umad_port_fake_gids_free(void *userdata)
{
	UmadPortFakeGids *g = userdata;

	g_free(g->gids);
	g_free(g);
}

int umad_port_new_fake_gids(const char *dev, int port, bool roce, const uint8_t (*gids)[16],
			    unsigned n_gids, UmadPortFakeSendFn send, void *userdata,
			    UmadPort **ret)
{
	UmadPortFakeGids *g = g_new0(UmadPortFakeGids, 1);
	GidTableSource src = GID_TABLE_SOURCE(umad_port_fake_gids, g);
	GidTable *t = NULL;
	int r;

	g->n = n_gids;
	g->gids = g_memdup2(gids, (gsize)n_gids * GID_LEN);
	r = gid_table_new(&src, &t);
	if (r < 0)
		return r;
	return umad_port_new_fake_with(dev, port, roce, -1, t, send, userdata, ret);
}
