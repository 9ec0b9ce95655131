/* SPDX-License-Identifier: MIT */
/*
 * librdmacm-mux: one connection to the daemon. This file owns the handle,
 * the framing of the byte stream, the matching of responses to requests,
 * the inbound MAD queue and the HELLO handshake.
 *
 * Design notes:
 * - The protocol has no request id. The daemon answers requests strictly in
 *   order, so the oldest unanswered request is the one a RESP belongs to.
 *   Requests therefore live in one array in submission order, and three
 *   counters cut it into answered | sent | unsent parts:
 *       [0, n_answered)          answered, waiting to be collected
 *       [n_answered, n_sent)     written, waiting for the daemon
 *       [n_sent, n_requests)     queued; out_off bytes of the first written
 *   Collecting an answer out of order (rdmacm_mux_wait) removes it from the
 *   answered part, which keeps the three parts contiguous.
 * - Each request keeps its frame until it is answered, so the output queue
 *   needs no storage of its own and is bounded by RDMACM_MUX_MAX_REQUESTS.
 *   After the answer the same storage holds the daemon's RESP frame, which
 *   is how the HELLO handshake reads the reply payload.
 * - Any failure of the connection (EOF, socket error, protocol violation) is
 *   sticky: the fd is shut down so that pollers wake, already received
 *   answers and MADs can still be collected, everything else returns the
 *   error that broke the connection.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "rdmacm-mux.h"

#define _public_ __attribute__((visibility("default")))
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _printf_(a, b) __attribute__((format(printf, a, b)))

#define FRAME_SIZE (sizeof(struct rdmacm_mux_msg))
/* Frames the input buffer holds: a few per recv() saves system calls. */
#define IN_BUF_FRAMES 8
/* Frames one rdmacm_mux_process() reads at most, so that a flood from the
 * daemon cannot keep the caller's thread in here forever. */
#define MAX_FRAMES_PER_PROCESS 1024
/* Frames one sendmsg() carries at most. */
#define MAX_IOV 16
/* The kernel's errno range; a negative err_code beyond it is garbage. */
#define MAX_ERRNO 4095

struct request {
	uint32_t ticket;
	uint32_t op_code;
	/* The request until it is answered, then the daemon's answer. */
	struct rdmacm_mux_msg frame;
	struct rdmacm_mux_response resp;
};

struct rdmacm_mux {
	int fd;
	int broken; /* 0, or the negative errno that ended the connection */
	uint64_t caps;
	uint32_t next_ticket;

	struct request requests[RDMACM_MUX_MAX_REQUESTS];
	size_t n_requests;
	size_t n_answered;
	size_t n_sent;
	size_t out_off;

	struct rdmacm_mux_inbound *inbound; /* ring, RDMACM_MUX_MAX_INBOUND */
	size_t inbound_head;
	size_t n_inbound;
	uint64_t dropped;
	uint64_t dropped_unreported;

	uint8_t in_buf[FRAME_SIZE * IN_BUF_FRAMES];
	size_t in_len;

	char error[256];
};

/* rdmacm_mux_open() has no handle to report through when it fails. */
static _Thread_local char open_error[256];

static void closep(int *fd)
{
	if (*fd >= 0)
		(void)close(*fd);
}

static void vformat_error(char *buf, size_t size, int r, const char *fmt,
			  va_list ap) _printf_(4, 0);

static void vformat_error(char *buf, size_t size, int r, const char *fmt,
			  va_list ap)
{
	char errbuf[128];
	int n;

	n = vsnprintf(buf, size, fmt, ap);
	if (n < 0 || (size_t)n >= size || r >= 0)
		return;
	/* GNU strerror_r: thread-safe, returns a pointer to the text. */
	snprintf(buf + n, size - (size_t)n, ": %s",
		 strerror_r(-r, errbuf, sizeof(errbuf)));
}

/* Record why a call on @m failed and pass @r through. */
static int set_error(struct rdmacm_mux *m, int r, const char *fmt, ...)
	_printf_(3, 4);

static int set_error(struct rdmacm_mux *m, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vformat_error(m->error, sizeof(m->error), r, fmt, ap);
	va_end(ap);
	return r;
}

static int set_open_error(int r, const char *fmt, ...) _printf_(2, 3);

static int set_open_error(int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vformat_error(open_error, sizeof(open_error), r, fmt, ap);
	va_end(ap);
	return r;
}

/*
 * The connection is unusable from now on. Shutting the socket down (rather
 * than closing it) keeps the fd number valid in the caller's event loop and
 * makes it readable, so the caller wakes up and sees the error.
 */
static int break_connection(struct rdmacm_mux *m, int r, const char *fmt, ...)
	_printf_(3, 4);

static int break_connection(struct rdmacm_mux *m, int r, const char *fmt, ...)
{
	va_list ap;

	if (m->broken)
		return m->broken;
	m->broken = r;
	(void)shutdown(m->fd, SHUT_RDWR);
	va_start(ap, fmt);
	vformat_error(m->error, sizeof(m->error), r, fmt, ap);
	va_end(ap);
	return r;
}

/* err_code of a RESP frame to 0 or a negative errno. */
static int err_code_to_errno(int32_t err_code)
{
	switch (err_code) {
	case RDMACM_MUX_ERR_CODE_OK:
		return 0;
	case RDMACM_MUX_ERR_CODE_EINVAL:
		return -EINVAL;
	case RDMACM_MUX_ERR_CODE_EEXIST:
		return -EEXIST;
	case RDMACM_MUX_ERR_CODE_EACCES:
		return -EACCES;
	case RDMACM_MUX_ERR_CODE_ENOTFOUND:
		return -ENOENT;
	default:
		/* Already a negative errno (a failed umad_send, or any error
		 * under RDMACM_MUX_CAP_ERRNO). */
		if (err_code < 0 && err_code >= -MAX_ERRNO)
			return err_code;
		return -EPROTO;
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* UINT64_MAX stands for "no deadline". */
static uint64_t deadline_from_timeout(int timeout_ms)
{
	if (timeout_ms < 0)
		return UINT64_MAX;
	return now_ms() + (uint64_t)timeout_ms;
}

/* Milliseconds left for poll(): -1 without a deadline, 0 once it passed. */
static int remaining_ms(uint64_t deadline)
{
	uint64_t now;

	if (deadline == UINT64_MAX)
		return -1;
	now = now_ms();
	if (now >= deadline)
		return 0;
	if (deadline - now > (uint64_t)INT32_MAX)
		return INT32_MAX;
	return (int)(deadline - now);
}

static ssize_t find_request(const struct rdmacm_mux *m, uint32_t ticket)
{
	for (size_t i = 0; i < m->n_requests; i++)
		if (m->requests[i].ticket == ticket)
			return (ssize_t)i;
	return -1;
}

/* Drop an answered request; only answered ones are ever removed. */
static void remove_request(struct rdmacm_mux *m, size_t idx)
{
	memmove(&m->requests[idx], &m->requests[idx + 1],
		(m->n_requests - idx - 1) * sizeof(m->requests[0]));
	m->n_requests--;
	m->n_answered--;
	m->n_sent--;
}

/* Queue one request frame. @payload goes into umad.mad. */
static int submit(struct rdmacm_mux *m, uint32_t op_code, const uint8_t *sgid,
		  const struct rdmacm_mux_mad_addr *addr, const void *payload,
		  size_t payload_len, uint32_t *ret_ticket)
{
	struct request *req;

	if (m->broken)
		return m->broken;
	if (m->n_requests >= RDMACM_MUX_MAX_REQUESTS)
		return set_error(m, -ENOBUFS,
				 "%d requests outstanding or uncollected",
				 RDMACM_MUX_MAX_REQUESTS);

	req = &m->requests[m->n_requests];
	/* Every byte we do not set goes out as zero, padding included. */
	memset(req, 0, sizeof(*req));
	req->ticket = m->next_ticket;
	req->op_code = op_code;
	req->frame.hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
	req->frame.hdr.op_code = op_code;
	if (sgid)
		memcpy(req->frame.hdr.sgid.raw, sgid, 16);
	if (addr) {
		req->frame.umad.hdr.addr = *addr;
		memset(req->frame.umad.hdr.addr.reserved, 0,
		       sizeof(req->frame.umad.hdr.addr.reserved));
	}
	if (payload_len)
		memcpy(req->frame.umad.mad, payload, payload_len);
	req->frame.umad_len = (int32_t)payload_len;

	m->n_requests++;
	if (++m->next_ticket == 0)
		m->next_ticket = 1;
	if (ret_ticket)
		*ret_ticket = req->ticket;
	return 0;
}

/* Write queued frames until done or EAGAIN. Returns -errno on a dead
 * socket without breaking the connection: do_io() decides. */
static int flush_output(struct rdmacm_mux *m)
{
	while (m->n_sent < m->n_requests) {
		struct iovec iov[MAX_IOV];
		struct msghdr mh = { .msg_iov = iov };
		size_t n_iov = 0;
		ssize_t n;

		for (size_t i = m->n_sent; i < m->n_requests && n_iov < MAX_IOV;
		     i++) {
			size_t off = i == m->n_sent ? m->out_off : 0;

			iov[n_iov].iov_base = (uint8_t *)&m->requests[i].frame + off;
			iov[n_iov].iov_len = FRAME_SIZE - off;
			n_iov++;
		}
		mh.msg_iovlen = n_iov;

		n = sendmsg(m->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			/* The caller breaks the connection, after reading
			 * whatever the daemon sent before it went away. */
			return -errno;
		}

		/* Partial writes leave out_off inside the first unsent frame. */
		for (size_t done = (size_t)n; done > 0;) {
			size_t rest = FRAME_SIZE - m->out_off;

			if (done >= rest) {
				done -= rest;
				m->out_off = 0;
				m->n_sent++;
			} else {
				m->out_off += done;
				done = 0;
			}
		}
	}
	return 0;
}

static int handle_response(struct rdmacm_mux *m,
			   const struct rdmacm_mux_msg *msg)
{
	struct request *req;
	int32_t len = msg->umad_len;

	/* A RESP for a request we have not fully written cannot be ours. */
	if (m->n_answered >= m->n_sent)
		return break_connection(m, -EPROTO,
					"daemon sent a response (op_code 0x%x) "
					"with no request outstanding",
					msg->hdr.op_code);
	req = &m->requests[m->n_answered];
	if (msg->hdr.op_code != req->op_code)
		return break_connection(m, -EPROTO,
					"daemon answered op_code 0x%x to "
					"request %u with op_code 0x%x",
					msg->hdr.op_code, req->ticket,
					req->op_code);
	if (len < 0 || len > RDMACM_MUX_MAD_SIZE)
		return break_connection(m, -EPROTO,
					"daemon sent a response with umad_len %d",
					(int)len);

	req->frame = *msg;
	req->resp.ticket = req->ticket;
	req->resp.op_code = req->op_code;
	req->resp.error = err_code_to_errno(msg->hdr.err_code);
	if (req->op_code == RDMACM_MUX_OP_CODE_CLIENT_STATS &&
	    req->resp.error == 0) {
		/* A newer daemon may append counters; an older one may send
		 * fewer. Take what both sides know, zero the rest. */
		size_t n = (size_t)len < sizeof(req->resp.stats) ?
				   (size_t)len :
				   sizeof(req->resp.stats);
		memcpy(&req->resp.stats, msg->umad.mad, n);
	}
	m->n_answered++;
	return 0;
}

static int handle_inbound(struct rdmacm_mux *m, const struct rdmacm_mux_msg *msg)
{
	struct rdmacm_mux_inbound *in;
	int32_t len = msg->umad_len;

	if (len < RDMACM_MUX_MAD_HDR_SIZE || len > RDMACM_MUX_MAD_SIZE)
		return break_connection(m, -EPROTO,
					"daemon sent an inbound MAD with umad_len %d",
					(int)len);
	if (m->n_inbound >= RDMACM_MUX_MAX_INBOUND) {
		m->dropped++;
		m->dropped_unreported++;
		return 0;
	}

	in = &m->inbound[(m->inbound_head + m->n_inbound) %
			 RDMACM_MUX_MAX_INBOUND];
	memset(in, 0, sizeof(*in));
	memcpy(in->local_gid, msg->hdr.sgid.raw, sizeof(in->local_gid));
	in->addr = msg->umad.hdr.addr;
	in->mad_len = (uint32_t)len;
	memcpy(in->mad, msg->umad.mad, (size_t)len);
	m->n_inbound++;
	return 0;
}

static int handle_frame(struct rdmacm_mux *m, const uint8_t *bytes)
{
	struct rdmacm_mux_msg msg;

	/* Copy out: the input buffer has no alignment guarantee. */
	memcpy(&msg, bytes, FRAME_SIZE);

	switch (msg.hdr.msg_type) {
	case RDMACM_MUX_MSG_TYPE_RESP:
		return handle_response(m, &msg);
	case RDMACM_MUX_MSG_TYPE_REQ:
		if (msg.hdr.op_code == RDMACM_MUX_OP_CODE_MAD)
			return handle_inbound(m, &msg);
		return break_connection(m, -EPROTO,
					"daemon sent a request with op_code 0x%x",
					msg.hdr.op_code);
	default:
		return break_connection(m, -EPROTO,
					"daemon sent a frame with msg_type %u",
					msg.hdr.msg_type);
	}
}

/* Read and dispatch what is there. Returns the number of frames. */
static int read_input(struct rdmacm_mux *m)
{
	int frames = 0;

	while (frames < MAX_FRAMES_PER_PROCESS) {
		size_t off = 0;
		ssize_t n;
		int r;

		n = recv(m->fd, m->in_buf + m->in_len,
			 sizeof(m->in_buf) - m->in_len, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return break_connection(m, -errno,
						"receiving from the daemon failed");
		}
		if (n == 0) {
			if (m->in_len > 0)
				return break_connection(
					m, -ECONNRESET,
					"daemon closed the connection in the "
					"middle of a frame (%zu of %zu bytes)",
					m->in_len, FRAME_SIZE);
			return break_connection(m, -ECONNRESET,
						"daemon closed the connection");
		}

		m->in_len += (size_t)n;
		for (; m->in_len - off >= FRAME_SIZE; off += FRAME_SIZE) {
			r = handle_frame(m, m->in_buf + off);
			if (r < 0)
				return r;
			frames++;
		}
		memmove(m->in_buf, m->in_buf + off, m->in_len - off);
		m->in_len -= off;
	}
	return frames;
}

/* One round of non-blocking I/O. Drops are left for process() to report. */
static int do_io(struct rdmacm_mux *m)
{
	int r;

	if (m->broken)
		return m->broken;
	r = flush_output(m);
	if (r < 0) {
		/* Answers and MADs the daemon wrote before it died are
		 * still worth delivering. */
		(void)read_input(m);
		return break_connection(m, r, "sending to the daemon failed");
	}
	return read_input(m);
}

/* A broken handle asks for POLLIN only: the shut-down fd is readable. */
static short events_of(const struct rdmacm_mux *m)
{
	if (!m->broken && m->n_sent < m->n_requests)
		return POLLIN | POLLOUT;
	return POLLIN;
}

/*
 * Block until @ticket is answered and return its index, leaving it in the
 * array (the handshake reads the reply frame from there).
 */
static int wait_answered(struct rdmacm_mux *m, uint32_t ticket,
			 uint64_t deadline, size_t *ret_idx)
{
	for (;;) {
		struct pollfd pfd = { .fd = m->fd };
		ssize_t idx;
		int r, io;

		io = do_io(m);

		idx = find_request(m, ticket);
		if (idx < 0)
			return set_error(m, -ENOENT, "no request with ticket %u",
					 ticket);
		if ((size_t)idx < m->n_answered) {
			*ret_idx = (size_t)idx;
			return 0;
		}
		if (io < 0)
			return io;

		pfd.events = events_of(m);
		r = poll(&pfd, 1, remaining_ms(deadline));
		if (r < 0 && errno != EINTR)
			return set_error(m, -errno, "poll failed");
		if (r == 0)
			return set_error(m, -ETIMEDOUT,
					 "no answer to request %u in time",
					 ticket);
	}
}

static int connect_socket(struct rdmacm_mux *m, const char *path,
			  uint64_t deadline)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_(closep) int fd = -1;

	memcpy(sa.sun_path, path, strlen(path) + 1);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return set_error(m, -errno, "socket");

	for (;;) {
		int r = connect(fd, (const struct sockaddr *)&sa, sizeof(sa));

		if (r == 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			/* The listen backlog is full; AF_UNIX gives no event
			 * for it to clear, so retry at a gentle pace. */
			struct timespec ts = { .tv_nsec = 10 * 1000 * 1000 };

			if (remaining_ms(deadline) == 0)
				return set_error(m, -ETIMEDOUT,
						 "connect to %s: backlog full",
						 path);
			(void)nanosleep(&ts, NULL);
			continue;
		}
		if (errno == EINPROGRESS) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			int err = 0;
			socklen_t len = sizeof(err);

			r = poll(&pfd, 1, remaining_ms(deadline));
			if (r < 0)
				return set_error(m, -errno, "poll");
			if (r == 0)
				return set_error(m, -ETIMEDOUT, "connect to %s",
						 path);
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
				return set_error(m, -errno, "getsockopt");
			if (err)
				return set_error(m, -err, "connect to %s", path);
			break;
		}
		return set_error(m, -errno, "connect to %s", path);
	}

	m->fd = fd;
	fd = -1;
	return 0;
}

static int handshake(struct rdmacm_mux *m, uint64_t deadline)
{
	struct rdmacm_mux_hello hello = {
		.magic = RDMACM_MUX_HELLO_MAGIC,
		.version_major = RDMACM_MUX_PROTO_VERSION_MAJOR,
		.version_minor = RDMACM_MUX_PROTO_VERSION_MINOR,
		.capabilities = RDMACM_MUX_CAP_ALL,
	};
	const struct request *req;
	uint32_t ticket;
	size_t idx;
	int r;

	r = submit(m, RDMACM_MUX_OP_CODE_HELLO, NULL, NULL, &hello,
		   sizeof(hello), &ticket);
	if (r < 0)
		return r;
	r = wait_answered(m, ticket, deadline, &idx);
	if (r < 0)
		return r;

	req = &m->requests[idx];
	r = req->resp.error;
	if (r == -EINVAL) {
		/* An old, QEMU-style mux: it knows no extension. */
		m->caps = 0;
		r = 0;
	} else if (r < 0) {
		set_error(m, r, "daemon refused the HELLO handshake");
	} else if ((size_t)req->frame.umad_len < sizeof(hello)) {
		r = set_error(m, -EPROTO, "HELLO answer too short (%d bytes)",
			      (int)req->frame.umad_len);
	} else {
		memcpy(&hello, req->frame.umad.mad, sizeof(hello));
		if (hello.magic != RDMACM_MUX_HELLO_MAGIC)
			r = set_error(m, -EPROTO,
				      "HELLO answer has magic 0x%08x",
				      hello.magic);
		else
			/* Never trust a grant we did not ask for. */
			m->caps = hello.capabilities & RDMACM_MUX_CAP_ALL;
	}
	remove_request(m, idx);
	return r;
}

_public_ int rdmacm_mux_open(const char *socket_path, unsigned flags,
			     int timeout_ms, struct rdmacm_mux **ret)
{
	_cleanup_(rdmacm_mux_closep) struct rdmacm_mux *m = NULL;
	uint64_t deadline = deadline_from_timeout(timeout_ms);
	int r;

	if (!ret)
		return set_open_error(-EINVAL, "ret is NULL");
	if (!socket_path || !*socket_path)
		return set_open_error(-EINVAL, "no socket path");
	if (strlen(socket_path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
		return set_open_error(-ENAMETOOLONG, "socket path too long");
	if (flags & ~RDMACM_MUX_OPEN_BASE_PROTOCOL)
		return set_open_error(-EINVAL, "unknown flags 0x%x",
				      flags & ~RDMACM_MUX_OPEN_BASE_PROTOCOL);

	m = calloc(1, sizeof(*m));
	if (!m)
		return set_open_error(-ENOMEM, "out of memory");
	m->fd = -1;
	m->next_ticket = 1;
	m->inbound = calloc(RDMACM_MUX_MAX_INBOUND, sizeof(*m->inbound));
	if (!m->inbound)
		return set_open_error(-ENOMEM, "out of memory");

	r = connect_socket(m, socket_path, deadline);
	if (r >= 0 && !(flags & RDMACM_MUX_OPEN_BASE_PROTOCOL))
		r = handshake(m, deadline);
	if (r < 0) {
		/* m->error already carries the errno text. */
		snprintf(open_error, sizeof(open_error), "%s", m->error);
		return r;
	}

	m->error[0] = '\0';
	*ret = m;
	m = NULL;
	return 0;
}

_public_ void rdmacm_mux_close(struct rdmacm_mux *m)
{
	if (!m)
		return;
	if (m->fd >= 0)
		(void)close(m->fd);
	free(m->inbound);
	free(m);
}

_public_ int rdmacm_mux_get_fd(const struct rdmacm_mux *m)
{
	if (!m)
		return -EINVAL;
	return m->fd;
}

_public_ short rdmacm_mux_get_events(const struct rdmacm_mux *m)
{
	if (!m)
		return -EINVAL;
	return events_of(m);
}

_public_ int rdmacm_mux_process(struct rdmacm_mux *m)
{
	int r;

	if (!m)
		return -EINVAL;
	r = do_io(m);
	if (r < 0)
		return r;
	if (m->dropped_unreported) {
		uint64_t n = m->dropped_unreported;

		m->dropped_unreported = 0;
		return set_error(m, -ENOBUFS,
				 "inbound queue full (%d MADs): dropped %llu",
				 RDMACM_MUX_MAX_INBOUND, (unsigned long long)n);
	}
	return r;
}

_public_ uint64_t rdmacm_mux_get_capabilities(const struct rdmacm_mux *m)
{
	return m ? m->caps : 0;
}

_public_ uint64_t rdmacm_mux_get_dropped(const struct rdmacm_mux *m)
{
	return m ? m->dropped : 0;
}

_public_ int rdmacm_mux_register_gid(struct rdmacm_mux *m, const uint8_t gid[16],
				     uint32_t *ret_ticket)
{
	if (!m)
		return -EINVAL;
	if (!gid)
		return set_error(m, -EINVAL, "register: gid is NULL");
	return submit(m, RDMACM_MUX_OP_CODE_REG, gid, NULL, NULL, 0, ret_ticket);
}

_public_ int rdmacm_mux_unregister_gid(struct rdmacm_mux *m,
				       const uint8_t gid[16],
				       uint32_t *ret_ticket)
{
	if (!m)
		return -EINVAL;
	if (!gid)
		return set_error(m, -EINVAL, "unregister: gid is NULL");
	return submit(m, RDMACM_MUX_OP_CODE_UNREG, gid, NULL, NULL, 0,
		      ret_ticket);
}

_public_ int rdmacm_mux_send_mad(struct rdmacm_mux *m, const uint8_t sgid[16],
				 const struct rdmacm_mux_mad_addr *addr,
				 const void *mad, size_t mad_len,
				 uint32_t *ret_ticket)
{
	if (!m)
		return -EINVAL;
	if (!sgid)
		return set_error(m, -EINVAL, "send_mad: sgid is NULL");
	if (!addr)
		return set_error(m, -EINVAL, "send_mad: addr is NULL");
	if (!mad)
		return set_error(m, -EINVAL, "send_mad: mad is NULL");
	if (mad_len < RDMACM_MUX_MAD_HDR_SIZE || mad_len > RDMACM_MUX_MAD_SIZE)
		return set_error(m, -EINVAL,
				 "send_mad: mad_len %zu not in %d..%d", mad_len,
				 RDMACM_MUX_MAD_HDR_SIZE, RDMACM_MUX_MAD_SIZE);
	return submit(m, RDMACM_MUX_OP_CODE_MAD, sgid, addr, mad, mad_len,
		      ret_ticket);
}

_public_ int rdmacm_mux_query_stats(struct rdmacm_mux *m, uint32_t *ret_ticket)
{
	if (!m)
		return -EINVAL;
	/* An old mux would answer EINVAL, and one that did not grant the
	 * capability never expects the frame: do not send it at all. */
	if (!(m->caps & RDMACM_MUX_CAP_CLIENT_STATS))
		return set_error(m, -EOPNOTSUPP,
				 "daemon did not grant CLIENT_STATS");
	return submit(m, RDMACM_MUX_OP_CODE_CLIENT_STATS, NULL, NULL, NULL, 0,
		      ret_ticket);
}

_public_ int rdmacm_mux_next_response(struct rdmacm_mux *m,
				      struct rdmacm_mux_response *ret)
{
	if (!m)
		return -EINVAL;
	if (!ret)
		return set_error(m, -EINVAL, "next_response: ret is NULL");
	if (m->n_answered == 0) {
		if (m->broken)
			return m->broken;
		return set_error(m, -EAGAIN, "no response waiting");
	}
	*ret = m->requests[0].resp;
	remove_request(m, 0);
	return 0;
}

_public_ int rdmacm_mux_recv_mad(struct rdmacm_mux *m,
				 struct rdmacm_mux_inbound *ret)
{
	if (!m)
		return -EINVAL;
	if (!ret)
		return set_error(m, -EINVAL, "recv_mad: ret is NULL");
	if (m->n_inbound == 0) {
		if (m->broken)
			return m->broken;
		return set_error(m, -EAGAIN, "no inbound MAD waiting");
	}
	*ret = m->inbound[m->inbound_head];
	m->inbound_head = (m->inbound_head + 1) % RDMACM_MUX_MAX_INBOUND;
	m->n_inbound--;
	return 0;
}

_public_ int rdmacm_mux_wait(struct rdmacm_mux *m, uint32_t ticket,
			     int timeout_ms, struct rdmacm_mux_response *ret)
{
	size_t idx;
	int r;

	if (!m)
		return -EINVAL;
	if (!ret)
		return set_error(m, -EINVAL, "wait: ret is NULL");
	if (ticket == 0)
		return set_error(m, -EINVAL, "wait: ticket 0 is never issued");

	r = wait_answered(m, ticket, deadline_from_timeout(timeout_ms), &idx);
	if (r < 0)
		return r;
	*ret = m->requests[idx].resp;
	remove_request(m, idx);
	return 0;
}

_public_ const char *rdmacm_mux_last_error(const struct rdmacm_mux *m)
{
	return m ? m->error : open_error;
}
