/* SPDX-License-Identifier: MIT */
/* Owns the libibumad calls: open, register, send, receive, close. The only
 * unit that includes <infiniband/umad.h> (the build enforces it). */
#include "umad-port.h"

#include <fcntl.h>
#include <infiniband/umad.h>
#include <stdio.h>
#include <string.h>

#include "cm-codec.h"
#include "log.h"
#include "util.h"

/* Our frame's umad header must be libibumad's, byte for byte. */
_Static_assert(sizeof(struct ib_user_mad) == sizeof(struct rdmacm_mux_umad_hdr),
	       "ib_user_mad header size");
_Static_assert(offsetof(struct ib_user_mad, addr) ==
		       offsetof(struct rdmacm_mux_umad_hdr, addr),
	       "ib_user_mad addr");
_Static_assert(offsetof(ib_mad_addr_t, gid_index) ==
		       offsetof(struct rdmacm_mux_mad_addr, gid_index),
	       "gid_index");
_Static_assert(offsetof(ib_mad_addr_t, pkey_index) ==
		       offsetof(struct rdmacm_mux_mad_addr, pkey_index),
	       "pkey_index");

static int umad_port_read_info(UmadPort *p)
{
	umad_port_t info;
	int r;

	memset(&info, 0, sizeof(info));
	r = umad_get_port(p->dev, p->port, &info);
	if (r < 0)
		return r;
	p->roce = strcmp(info.link_layer, "Ethernet") == 0;
	p->lid = (uint16_t)info.base_lid;
	umad_release_port(&info);
	return 0;
}

int umad_port_open(const char *dev, int port, UmadPort **ret)
{
	g_autoptr(UmadPort) p = g_new0(UmadPort, 1);
	long method_mask[2] = { 1L << 3, 0 }; /* bit 3: method Send (0x03) */
	int r;

	p->dev = g_strdup(dev);
	p->port = port;
	p->fd = -1;
	p->agent_id = -1;

	if (umad_init() < 0) {
		log_error("cannot initialise libibumad");
		return -EIO;
	}
	r = umad_port_read_info(p);
	if (r < 0) {
		log_error("there is no RDMA device %s with a port %d; check the name "
			  "with 'rdma link' or 'ibv_devices'", dev, port);
		return -ENODEV;
	}
	r = gid_table_open(dev, port, &p->gids);
	if (r < 0) {
		log_error("cannot read the GID table of %s port %d from sysfs: %s",
			  dev, port, strerror(-r));
		return r;
	}

	p->fd = umad_open_port(dev, port);
	if (p->fd < 0) {
		r = p->fd;
		p->fd = -1;
		if (r == -EOPNOTSUPP)
			log_error("the kernel's umad ABI is too old or ib_umad is not "
				  "loaded: run 'modprobe ib_umad'");
		else
			log_error("cannot open the umad device of %s port %d (%s): is "
				  "ib_umad loaded and /dev/infiniband/umad* readable?",
				  dev, port, strerror(-r));
		return r == -EIO ? -EACCES : r;
	}

	/* libibumad opens the device without O_CLOEXEC. */
	(void)fcntl(p->fd, F_SETFD, FD_CLOEXEC);

	errno = 0;
	p->agent_id = umad_register(p->fd, CM_MGMT_CLASS, CM_CLASS_VERSION, 0, method_mask);
	if (p->agent_id < 0) {
		/* libibumad flattens every failure to -EPERM; errno has the
		 * kernel's reason, and EINVAL means "method already in use". */
		int e = errno;
		p->agent_id = -1;
		if (e == EINVAL)
			return -EBUSY;
		log_error("cannot register the CM agent on %s port %d: %s", dev, port,
			  strerror(e ? e : EPERM));
		return -(e ? e : EPERM);
	}

	*ret = g_steal_pointer(&p);
	return 0;
}

void umad_port_close(UmadPort *p)
{
	if (!p)
		return;
	if (p->fake_send) {
		if (p->fd >= 0)
			close(p->fd);
	} else if (p->fd >= 0) {
		if (p->agent_id >= 0)
			(void)umad_unregister(p->fd, p->agent_id);
		(void)umad_close_port(p->fd);
	}
	gid_table_free(p->gids);
	g_free(p->dev);
	g_free(p);
}

/* libibumad's send, as 0 or the negative errno of the kernel's write(). */
static int umad_port_write(int fd, int agent_id, UmadBuffer *buf, size_t mad_len)
{
	errno = 0;
	if (umad_send(fd, agent_id, buf, (int)mad_len, 0, 0) < 0)
		return errno ? -errno : -EIO;
	return 0;
}

int umad_port_send(UmadPort *p, UmadBuffer *buf, size_t mad_len)
{
	if (p->fake_send)
		return p->fake_send(p->fake_userdata, buf, mad_len);
	return umad_port_write(p->fd, p->agent_id, buf, mad_len);
}

int umad_port_open_send_fd(const UmadPort *p, UmadSendFd *ret)
{
	int fd, agent;

	if (p->fake_send)
		return -EOPNOTSUPP;
	fd = umad_open_port(p->dev, p->port);
	if (fd < 0)
		return fd;
	(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	errno = 0;
	agent = umad_register(fd, CM_MGMT_CLASS, CM_CLASS_VERSION, 0, NULL);
	if (agent < 0) {
		int e = errno ? errno : EPERM;

		(void)umad_close_port(fd);
		return -e;
	}
	ret->fd = fd;
	ret->agent_id = agent;
	return 0;
}

void umad_port_close_send_fd(UmadSendFd *s)
{
	if (s->fd < 0)
		return;
	(void)umad_unregister(s->fd, s->agent_id);
	(void)umad_close_port(s->fd);
	s->fd = -1;
}

int umad_port_send_on(const UmadSendFd *s, UmadBuffer *buf, size_t mad_len)
{
	return umad_port_write(s->fd, s->agent_id, buf, mad_len);
}

int umad_port_recv(UmadPort *p, UmadBuffer *buf, size_t *mad_len)
{
	int len = RDMACM_MUX_MAD_SIZE;
	int r;

	errno = 0;
	r = umad_recv(p->fd, buf, &len, 0);
	if (r < 0) {
		/* libibumad garbles len on errors; only r matters here. */
		if (r == -EWOULDBLOCK || r == -EAGAIN || r == -ETIMEDOUT)
			return -EAGAIN;
		return r;
	}
	if (len < 0 || len > RDMACM_MUX_MAD_SIZE)
		return -EBADMSG;
	*mad_len = (size_t)len;
	return 0;
}
