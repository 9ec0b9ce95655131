/* SPDX-License-Identifier: MIT */
/* Owns the umad port: the libibumad calls (open, register, adopt, send,
 * receive, close), which no other unit includes <infiniband/umad.h> for
 * (the build enforces it), and the calls through a port's operations. */
#include "umad-port.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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

static const UmadPortOps umad_port_kernel_ops;

/* A port of @ops with nothing open yet. */
static UmadPort *umad_port_alloc(const char *dev, int port, const UmadPortOps *ops)
{
	UmadPort *p = g_new0(UmadPort, 1);

	p->ops = ops;
	p->dev = g_strdup(dev);
	p->port = port;
	p->fd = -1;
	p->agent_id = -1;
	return p;
}

/* The link layer and LID, and the GID table. Logs what it cannot read. */
static int umad_port_read_all(UmadPort *p)
{
	int r;

	if (umad_init() < 0) {
		log_error("cannot initialise libibumad");
		return -EIO;
	}
	r = umad_port_read_info(p);
	if (r < 0) {
		log_error("there is no RDMA device %s with a port %d; check the name "
			  "with 'rdma link' or 'ibv_devices'", p->dev, p->port);
		return -ENODEV;
	}
	r = gid_table_open(p->dev, p->port, &p->gids);
	if (r < 0) {
		log_error("cannot read the GID table of %s port %d from sysfs: %s",
			  p->dev, p->port, strerror(-r));
		return r;
	}
	return 0;
}

int umad_port_open(const char *dev, int port, UmadPort **ret)
{
	g_autoptr(UmadPort) p = umad_port_alloc(dev, port, &umad_port_kernel_ops);
	long method_mask[2] = { 1L << 3, 0 }; /* bit 3: method Send (0x03) */
	int r;

	r = umad_port_read_all(p);
	if (r < 0)
		return r;
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

/*
 * Whether the character device @rdev is the umad device of @dev/@port:
 * /sys/class/infiniband_mad/umadN names its device and port, and "dev"
 * its numbers.
 */
static bool umad_port_is_device_of(dev_t rdev, const char *dev, int port)
{
	g_autofree char *root = g_strdup_printf("%s/class/infiniband_mad", sysfs_root());
	g_autoptr(GDir) dir = g_dir_open(root, 0, NULL);
	const char *name;

	while (dir && (name = g_dir_read_name(dir))) {
		g_autofree char *ibdev = NULL, *portnum = NULL, *numbers = NULL;
		g_autofree char *base = g_build_filename(root, name, NULL);
		g_autofree char *ibdev_path = g_build_filename(base, "ibdev", NULL);
		g_autofree char *port_path = g_build_filename(base, "port", NULL);
		g_autofree char *dev_path = g_build_filename(base, "dev", NULL);
		unsigned maj, min;

		if (!g_str_has_prefix(name, "umad") ||
		    !g_file_get_contents(ibdev_path, &ibdev, NULL, NULL) ||
		    !g_file_get_contents(port_path, &portnum, NULL, NULL) ||
		    !g_file_get_contents(dev_path, &numbers, NULL, NULL))
			continue;
		if (strcmp(g_strstrip(ibdev), dev) != 0 || atoi(portnum) != port)
			continue;
		return sscanf(numbers, "%u:%u", &maj, &min) == 2 && rdev == makedev(maj, min);
	}
	return false;
}

int umad_port_adopt(const char *dev, int port, int fd, int agent_id, UmadPort **ret)
{
	g_autoptr(UmadPort) p = umad_port_alloc(dev, port, &umad_port_kernel_ops);
	struct stat st;
	int flags, r;

	p->fd = fd;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || (flags & O_ACCMODE) != O_RDWR || fstat(fd, &st) < 0 || agent_id < 0 ||
	    agent_id > 255)
		return -EBADF;
	/* The kernel's umad fds are character devices; a stand-in's may be
	 * something else, and then the name the store kept it by is all
	 * there is to go by. */
	if (S_ISCHR(st.st_mode) && !umad_port_is_device_of(st.st_rdev, dev, port))
		return -EBADF;
	if (umad_init() < 0 || umad_port_read_info(p) < 0)
		return -ENODEV;
	/* libibumad reads and writes with the old ABI's 56-byte header until
	 * this process opens a port itself (umad_open_port() enables the
	 * pkey ABI on its fd, and switches a process-wide flag); the adopted
	 * file speaks the new one, and the kernel would refuse every read and
	 * write. An open, closed at once, switches it. */
	r = umad_open_port(dev, port);
	if (r < 0)
		return r == -EIO ? -EACCES : r;
	(void)umad_close_port(r);
	r = gid_table_open(dev, port, &p->gids);
	if (r < 0)
		return r;
	(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	p->agent_id = agent_id;
	*ret = g_steal_pointer(&p);
	return 0;
}

int umad_port_new(const char *dev, int port, bool roce, int fd, const UmadPortOps *ops,
		  void *ops_data, GidTable *gids, UmadPort **ret)
{
	g_autoptr(UmadPort) p = umad_port_alloc(dev, port, ops);
	int r;

	p->fd = fd;
	p->ops_data = ops_data;
	p->roce = roce;
	p->agent_id = 0;
	p->gids = gids;
	if (!p->gids) {
		r = gid_table_open(dev, port, &p->gids);
		if (r < 0)
			return r;
	}
	*ret = g_steal_pointer(&p);
	return 0;
}

void umad_port_close(UmadPort *p)
{
	if (!p)
		return;
	if (p->ops)
		p->ops->release(p);
	gid_table_free(p->gids);
	g_free(p->dev);
	g_free(p);
}

/* ---- through the port's operations ---- */

int umad_port_send(UmadPort *p, UmadBuffer *buf, size_t mad_len)
{
	return p->ops->send(p, buf, mad_len);
}

int umad_port_recv(UmadPort *p, UmadBuffer *buf, size_t *mad_len)
{
	return p->ops->recv(p, buf, mad_len);
}

int umad_port_open_send_fd(const UmadPort *p, UmadSendFd *ret)
{
	ret->port = p;
	ret->fd = -1;
	ret->agent_id = -1;
	return p->ops->open_send_fd(p, ret);
}

void umad_port_close_send_fd(UmadSendFd *s)
{
	if (s->port)
		s->port->ops->close_send_fd(s);
	s->fd = -1;
}

int umad_port_send_on(const UmadSendFd *s, UmadBuffer *buf, size_t mad_len)
{
	return s->port->ops->send_on(s, buf, mad_len);
}

/* ---- libibumad's ---- */

/*
 * Only the fd: its agent ends with the file, that is with the last copy of
 * the fd. An explicit unregister would end it even while the fd store
 * keeps a copy for a successor.
 */
static void umad_port_kernel_release(UmadPort *p)
{
	if (p->fd >= 0)
		(void)umad_close_port(p->fd);
	p->fd = -1;
}

/* libibumad's send, as 0 or the negative errno of the kernel's write(). */
static int umad_port_write(int fd, int agent_id, UmadBuffer *buf, size_t mad_len)
{
	errno = 0;
	if (umad_send(fd, agent_id, buf, (int)mad_len, 0, 0) < 0)
		return errno ? -errno : -EIO;
	return 0;
}

static int umad_port_kernel_send(UmadPort *p, UmadBuffer *buf, size_t mad_len)
{
	return umad_port_write(p->fd, p->agent_id, buf, mad_len);
}

static int umad_port_kernel_open_send_fd(const UmadPort *p, UmadSendFd *ret)
{
	int fd, agent;

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

static void umad_port_kernel_close_send_fd(UmadSendFd *s)
{
	if (s->fd < 0)
		return;
	(void)umad_close_port(s->fd);
}

static int umad_port_kernel_send_on(const UmadSendFd *s, UmadBuffer *buf, size_t mad_len)
{
	return umad_port_write(s->fd, s->agent_id, buf, mad_len);
}

static int umad_port_kernel_recv(UmadPort *p, UmadBuffer *buf, size_t *mad_len)
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

static const UmadPortOps umad_port_kernel_ops = UMAD_PORT_OPS(umad_port_kernel);
