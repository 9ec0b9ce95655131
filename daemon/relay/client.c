/* SPDX-License-Identifier: MIT */
/* Owns one client connection's bytes: input framing, the two output
 * queues, writing them out, and the peer's credentials (client.h). */
#include "client.h"

#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/uio.h>

#include "util.h"

#define FRAME_SIZE sizeof(struct rdmacm_mux_msg)
/*
 * A queue that drains keeps up to this many slots (64 x 360 bytes), which
 * covers a full batch of responses (max_pending defaults to 64), so a busy
 * client does not pay malloc, free and the 4->8->16->32->64 regrowth copies
 * on every batch; only a queue that grew past it (inbound MAD bursts) gives
 * its memory back when empty.
 */
#define QUEUE_KEEP_SLOTS 64u
#define WRITEV_MAX 64
/* msg_type of a response whose place is kept while its MAD is being sent
 * (no real frame has it: RDMACM_MUX_MSG_TYPE_* are 0 and 1). */
#define CLIENT_RESERVED_FRAME 0xffffffffu

static void client_read_comm(pid_t pid, char *buf, size_t len)
{
	char path[64];
	_cleanup_fd_ int fd = -1;
	ssize_t n;

	snprintf(buf, len, "?");
	if (pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, len - 1);
	if (n <= 0)
		return;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

void client_init(Client *c, int fd, uint32_t max_queued, uint32_t max_pending)
{
	socklen_t len = sizeof(c->cred);

	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->mad.max = max_queued;
	c->resp.max = max_pending;
	c->connected_usec = now_usec();
	if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len) < 0)
		c->cred = (struct ucred){ .pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1 };
	client_read_comm(c->cred.pid, c->comm, sizeof(c->comm));
}

static void frame_queue_release(FrameQueue *q)
{
	free(q->frames);
	q->frames = NULL;
	q->cap = q->head = q->len = 0;
}

void client_deinit(Client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	frame_queue_release(&c->resp);
	frame_queue_release(&c->mad);
	free(c->in);
	c->in = NULL;
	c->in_cap = 0;
	c->in_len = c->in_off = 0;
}

/* ---- input ---- */

/*
 * The stream ended or failed with less than a frame waiting: note how,
 * without taking a byte. Return: the error, or 0 while the stream is open.
 */
static int client_check_end(Client *c, int waiting)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN | POLLRDHUP };
	int err = 0;
	socklen_t len = sizeof(err);

	if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return 0;
	if ((p.revents & POLLERR) && getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
	    err)
		c->in_error = -err;
	else
		c->in_error = -EPIPE;
	c->in_cut = waiting > 0;
	return c->in_error;
}

/*
 * Make room for @frames (one or more) more frames, up to
 * CLIENT_INPUT_FRAMES in all: a client that keeps more waiting than its
 * buffer holds gets a bigger one. Only called with no frame handed out
 * still in use (the buffer is empty).
 */
static int client_grow_input(Client *c, size_t frames)
{
	size_t need = c->in_len / FRAME_SIZE + frames;
	uint32_t cap = c->in_cap ? c->in_cap : CLIENT_INPUT_FRAMES_FIRST;
	struct rdmacm_mux_msg *in;

	while (cap < need && cap < CLIENT_INPUT_FRAMES)
		cap *= 2;
	cap = MIN(cap, CLIENT_INPUT_FRAMES);
	if (cap == c->in_cap)
		return 0;
	in = realloc(c->in, (size_t)cap * FRAME_SIZE);
	if (!in)
		return c->in_cap ? 0 : -ENOMEM; /* the old size still works */
	c->in = in;
	c->in_cap = cap;
	return 0;
}

int client_fill_input(Client *c)
{
	uint8_t *buf;
	size_t room, want;
	ssize_t n;
	int waiting = 0, e;

	if (c->in_error)
		return c->in_error;
	if (c->in_len - c->in_off >= FRAME_SIZE)
		return 0;
	if (c->in_off > 0) {
		buf = (uint8_t *)c->in;
		memmove(buf, buf + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
	}
	/* Whole frames only: a frame half taken from the socket would be lost
	 * with this process (a crash, a restart), and the successor would
	 * read the client's stream out of step. The rest stays in the socket. */
	if (ioctl(c->fd, FIONREAD, &waiting) < 0) {
		c->in_error = -errno;
		return c->in_error;
	}
	if ((size_t)waiting >= FRAME_SIZE) {
		e = client_grow_input(c, (size_t)waiting / FRAME_SIZE);
		if (e < 0)
			return e;
	}
	buf = (uint8_t *)c->in;
	room = (size_t)c->in_cap * FRAME_SIZE - c->in_len;
	want = MIN(room, (size_t)waiting / FRAME_SIZE * FRAME_SIZE);
	c->input_partial = false;
	if (want == 0) {
		e = client_check_end(c, waiting);
		if (e < 0)
			return e;
		c->input_partial = waiting > 0;
		c->input_drained = true;
		return 0;
	}
	n = recv(c->fd, buf + c->in_len, want, MSG_DONTWAIT);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		c->in_error = -errno;
		return c->in_error;
	}
	if (n == 0) {
		c->in_error = -EPIPE;
		return c->in_error;
	}
	c->in_len += (size_t)n;
	if (c->in_len >= FRAME_SIZE) {
		c->input_drained = want < room;
		c->input_refilled = true;
	}
	return 0;
}

int client_next_frame(Client *c, struct rdmacm_mux_msg **frame)
{
	if (c->in_len - c->in_off < FRAME_SIZE) {
		int e;

		/* The last recv() came back short, so the socket was empty
		 * then: end this batch instead of asking again (epoll is level
		 * triggered, so data that came since wakes us anyway). */
		if (c->input_drained) {
			c->input_drained = false;
			return 0;
		}
		e = client_fill_input(c);
		if (e < 0)
			return e;
		if (c->in_len - c->in_off < FRAME_SIZE)
			return 0;
	}
	/* Whole frames only come in (client_fill_input()), so a frame
	 * starts at a multiple of FRAME_SIZE: one of c->in[]. The next fill
	 * moves the rest to the front or writes over it, never before. */
	*frame = &c->in[c->in_off / FRAME_SIZE];
	c->in_off += FRAME_SIZE;
	if (c->in_off == c->in_len)
		c->in_off = c->in_len = 0;
	return 1;
}

bool client_has_partial_input(const Client *c)
{
	return c->in_len > c->in_off || c->in_cut;
}

unsigned client_peek_frames(const Client *c, const struct rdmacm_mux_msg **ret)
{
	if (!c->in) {
		*ret = NULL;
		return 0;
	}
	*ret = &c->in[c->in_off / FRAME_SIZE];
	return (unsigned)((c->in_len - c->in_off) / FRAME_SIZE);
}

bool client_take_refill(Client *c)
{
	bool r = c->input_refilled;

	c->input_refilled = false;
	return r;
}

/* ---- output queues ---- */

static struct rdmacm_mux_msg *frame_queue_at(FrameQueue *q, uint32_t i)
{
	return &q->frames[(q->head + i) & (q->cap - 1)];
}

/* A new last slot in @q, for the caller to fill. */
static int frame_queue_add(FrameQueue *q, bool may_exceed, struct rdmacm_mux_msg **slot)
{
	if (q->len >= q->max && !may_exceed)
		return -ENOBUFS;
	if (q->len == q->cap) {
		uint32_t cap = q->cap ? q->cap * 2 : 4;
		struct rdmacm_mux_msg *f = malloc((size_t)cap * FRAME_SIZE);

		if (!f)
			return -ENOMEM;
		/* Linearise the ring into the new array. */
		for (uint32_t i = 0; i < q->len; i++)
			memcpy(&f[i], frame_queue_at(q, i), FRAME_SIZE);
		free(q->frames);
		q->frames = f;
		q->cap = cap;
		q->head = 0;
	}
	*slot = &q->frames[(q->head + q->len) & (q->cap - 1)];
	q->len++;
	return 0;
}

static int frame_queue_push(FrameQueue *q, const struct rdmacm_mux_msg *m, bool may_exceed)
{
	struct rdmacm_mux_msg *slot;
	int e = frame_queue_add(q, may_exceed, &slot);

	if (e == 0)
		memcpy(slot, m, FRAME_SIZE);
	return e;
}

static void frame_queue_pop(FrameQueue *q)
{
	q->popped++;
	q->head = (q->head + 1) & (q->cap - 1);
	if (--q->len == 0) {
		q->head = 0;
		if (q->cap > QUEUE_KEEP_SLOTS)
			frame_queue_release(q);
	}
}

int client_queue_response(Client *c, const struct rdmacm_mux_msg *m)
{
	return frame_queue_push(&c->resp, m, true);
}

int client_reserve_response(Client *c, uint64_t *token)
{
	struct rdmacm_mux_msg placeholder;
	int r;

	memset(&placeholder, 0, sizeof(placeholder));
	placeholder.hdr.msg_type = CLIENT_RESERVED_FRAME;
	*token = c->resp.popped + c->resp.len;
	r = frame_queue_push(&c->resp, &placeholder, true);
	if (r == 0)
		c->resp.reserved++;
	return r;
}

void client_fill_response(Client *c, uint64_t token, const struct rdmacm_mux_msg *m)
{
	uint64_t i = token - c->resp.popped;
	struct rdmacm_mux_msg *f;

	/* A reserved place is never written nor dropped before it is filled. */
	if (i >= c->resp.len)
		return;
	f = frame_queue_at(&c->resp, (uint32_t)i);
	if (f->hdr.msg_type != CLIENT_RESERVED_FRAME)
		return;
	memcpy(f, m, FRAME_SIZE);
	c->resp.reserved--;
}

/* Responses that may be written now: those before the first reserved one. */
static uint32_t client_ready_responses(Client *c)
{
	uint32_t n = 0;

	if (c->resp.reserved == 0)
		return c->resp.len;
	while (n < c->resp.len && frame_queue_at(&c->resp, n)->hdr.msg_type != CLIENT_RESERVED_FRAME)
		n++;
	return n;
}

bool client_has_output(Client *c)
{
	/* Inbound MADs wait behind a reserved response: it answers a request
	 * read before them, and QEMU reads its answer first. */
	return c->out_src != 0 || client_ready_responses(c) > 0 ||
	       (c->mad.len > 0 && c->resp.reserved == 0);
}

int client_queue_mad_slot(Client *c, struct rdmacm_mux_msg **slot)
{
	return frame_queue_add(&c->mad, false, slot);
}

bool client_responses_full(const Client *c)
{
	return c->resp.len >= c->resp.max;
}

uint32_t client_queued(const Client *c)
{
	return c->resp.len + c->mad.len;
}

uint32_t client_queued_mads(const Client *c)
{
	return c->mad.len;
}

uint32_t client_mad_quota(const Client *c)
{
	return c->mad.max;
}

/*
 * Write order: the frame that is partly written (it must finish first),
 * then all responses, then inbound MADs.
 */
int client_flush(Client *c)
{
	while (client_has_output(c)) {
		struct iovec iov[WRITEV_MAX];
		FrameQueue *order[2] = { &c->resp, &c->mad };
		FrameQueue *partial = c->out_src == 1 ? &c->resp : c->out_src == 2 ? &c->mad : NULL;
		/* what may go now: responses up to a reserved one, and MADs
		 * only when no response is reserved */
		uint32_t limit[2] = { client_ready_responses(c),
				      c->resp.reserved == 0 ? c->mad.len : 0 };
		int n = 0;
		ssize_t w;

		if (partial) {
			iov[n++] = (struct iovec){ (uint8_t *)frame_queue_at(partial, 0) + c->out_off,
						   FRAME_SIZE - c->out_off };
		}
		for (int q = 0; q < 2 && n < WRITEV_MAX; q++)
			for (uint32_t i = order[q] == partial ? 1 : 0; i < limit[q] && n < WRITEV_MAX;
			     i++)
				iov[n++] = (struct iovec){ frame_queue_at(order[q], i), FRAME_SIZE };

		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		w = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -EAGAIN : -errno;
		}

		/* Retire what was written, in the same order. */
		size_t left = (size_t)w;
		if (partial) {
			size_t rest = FRAME_SIZE - c->out_off;
			if (left < rest) {
				c->out_off += left;
				return -EAGAIN;
			}
			left -= rest;
			frame_queue_pop(partial);
			c->out_src = 0;
			c->out_off = 0;
		}
		for (int q = 0; q < 2 && left > 0; q++) {
			while (order[q]->len > 0 && left > 0) {
				if (left < FRAME_SIZE) {
					c->out_src = q + 1;
					c->out_off = left;
					return -EAGAIN;
				}
				left -= FRAME_SIZE;
				frame_queue_pop(order[q]);
			}
		}
	}
	return 0;
}

unsigned client_drain(Client *c, void (*fn)(void *userdata, const struct rdmacm_mux_msg *m),
		      void *userdata)
{
	unsigned n = 0;

	/* In writing order: a reserved response holds up what follows it,
	 * inbound MADs included, as on a socket (client_has_output()). */
	while (c->resp.len > 0 && frame_queue_at(&c->resp, 0)->hdr.msg_type != CLIENT_RESERVED_FRAME) {
		fn(userdata, frame_queue_at(&c->resp, 0));
		frame_queue_pop(&c->resp);
		n++;
	}
	while (c->mad.len > 0 && c->resp.reserved == 0) {
		fn(userdata, frame_queue_at(&c->mad, 0));
		frame_queue_pop(&c->mad);
		n++;
	}
	c->out_src = 0;
	c->out_off = 0;
	return n;
}
