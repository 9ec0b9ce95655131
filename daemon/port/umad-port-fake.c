/* SPDX-License-Identifier: MIT */
/*
 * Owns the fake umad port (umad_port_new_fake()): a port with no device for
 * in-process drivers, whose sends go to a callback. Linked into unit tests
 * and fuzzers only, never into the daemon.
 */
#include <sys/eventfd.h>

#include "umad-port-fake.h"
#include "util.h"

typedef struct UmadPortFake {
	UmadPortFakeSendFn send;
	void *userdata;
} UmadPortFake;

static int umad_port_fake_send(UmadPort *p, UmadBuffer *buf, size_t mad_len)
{
	UmadPortFake *f = p->ops_data;

	return f->send(f->userdata, buf, mad_len);
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
	UmadPortFake *f = s->port->ops_data;

	return f->send(f->userdata, buf, mad_len);
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

static const UmadPortOps umad_port_fake_ops = {
	.send = umad_port_fake_send,
	.recv = umad_port_fake_recv,
	.open_send_fd = umad_port_fake_open_send_fd,
	.send_on = umad_port_fake_send_on,
	.close_send_fd = umad_port_fake_close_send_fd,
	.release = umad_port_fake_release,
};

int umad_port_new_fake(const char *dev, int port, bool roce, UmadPortFakeSendFn send,
		       void *userdata, UmadPort **ret)
{
	UmadPortFake *f = g_new0(UmadPortFake, 1);
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	if (fd < 0) {
		g_free(f);
		return -errno;
	}
	f->send = send;
	f->userdata = userdata;
	/* The port owns @f from here, and frees it when it goes. */
	return umad_port_new(dev, port, roce, fd, &umad_port_fake_ops, f, ret);
}
