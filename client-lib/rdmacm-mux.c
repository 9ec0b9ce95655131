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
 * - Unless the handle reconnects (RDMACM_MUX_OPEN_RECONNECT). Then the fd the
 *   caller sees is an epoll set holding the current socket and a timerfd,
 *   and the connection runs through a small state machine:
 *       UP -> (break) -> BACKOFF -> (attempt) -> HELLO -> REREG -> UP
 *   with any failure after the break going back to BACKOFF. The HELLO and
 *   the REGs of a reconnection are "internal" requests: they sit in the same
 *   ordered array (the protocol needs the order), get ticket 0 and are
 *   consumed where their answer is read. There is at most one at a time,
 *   and only while no caller request is unanswered (callers get -ENOTCONN
 *   outside UP), so one spare slot past RDMACM_MUX_MAX_REQUESTS holds it.
 * - Memory for what a reconnection will need (events, the GID set) is
 *   reserved before the state that needs it, so that the state machine
 *   itself never fails on allocation.
 * - A handle opened with RDMACM_MUX_OPEN_ASYNC is a reconnecting handle
 *   that starts in BACKOFF with its first attempt due at once and no
 *   connection behind it yet; its first success says CONNECTED instead of
 *   RECONNECTED.
 * - The extensible (1.2) calls share everything with the 1.0 ones: the
 *   library keeps the richer form (a request's user_data, an event with its
 *   retry delay and capabilities) and the 1.0 calls hand out the part their
 *   structs have room for.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
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

/* The comp_mask bits this library reads (see rdmacm-mux.h). */
#define OPEN_ATTR_KNOWN RDMACM_MUX_OPEN_ATTR_BACKOFF
#define REQUEST_KNOWN 0u

/* The header is the library's version; meson's is the .so's and the .pc's.
 * They must agree. */
_Static_assert(RDMACM_MUX_VERSION_MAJOR == LIBRARY_VERSION_MAJOR &&
		       RDMACM_MUX_VERSION_MINOR == LIBRARY_VERSION_MINOR &&
		       RDMACM_MUX_VERSION_MICRO == LIBRARY_VERSION_MICRO,
	       "rdmacm-mux.h's RDMACM_MUX_VERSION_* differ from the version "
	       "in client-lib/meson.build");

/* Reconnection defaults and limits (see rdmacm-mux.h). */
#define BACKOFF_INITIAL_MS 100
#define BACKOFF_MAX_MS 5000
#define BACKOFF_JITTER_PERCENT 20
#define BACKOFF_LIMIT_MS (3600u * 1000u)
#define RECONNECT_HANDSHAKE_MS 5000
/* No reconnection attempt while this many events wait uncollected. */
#define EVENT_BACKLOG 64

#define NO_DEADLINE UINT64_MAX

struct request {
	uint32_t ticket; /* 0 for the library's own (internal) requests */
	uint32_t op_code;
	bool internal;
	uint64_t user_data; /* rdmacm_mux_submit()'s, for the answer */
	uint8_t gid[16]; /* REG/UNREG: the GID, kept past the answer */
	/* The request until it is answered, then the daemon's answer. */
	struct rdmacm_mux_msg frame;
	struct rdmacm_mux_response resp;
};

enum conn_state {
	CONN_UP,      /* connected; requests flow */
	CONN_BACKOFF, /* no socket; the next attempt is due at deadline */
	CONN_HELLO,   /* connected again, the HELLO is out */
	CONN_REREG,   /* registering gids[rereg_next] again */
};

struct rdmacm_mux {
	int fd;	  /* what the caller polls: sock, or the epoll set */
	int sock; /* the daemon connection, -1 while there is none */
	int broken; /* 0, or the negative errno that ended the connection */
	uint64_t caps;
	uint32_t next_ticket;
	unsigned flags;

	/* The last slot is for one internal request (reconnection). */
	struct request requests[RDMACM_MUX_MAX_REQUESTS + 1];
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

	/* Reconnection; all unused unless 'reconnect'. */
	bool reconnect;
	char *path;
	int timer_fd;
	uint32_t sock_events; /* sock's interest in the epoll set */
	enum conn_state state;
	uint64_t deadline;    /* BACKOFF: next attempt; HELLO/REREG: give up */
	uint64_t timer_armed; /* what timer_fd is set to */
	uint32_t backoff_initial_ms;
	uint32_t backoff_max_ms;
	uint32_t jitter_percent;
	uint32_t attempts; /* in the current outage */
	uint32_t delays;   /* backoff delays taken in it: the next doubles */
	int down_error;	   /* why the last attempt failed or the link broke */
	bool connected_once; /* false until an ASYNC handle first connects */
	bool ex_events;	     /* opened with rdmacm_mux_open_ex(): 1.2 events */
	uint64_t reconnects;
	uint64_t rng;

	/* The daemon's quotas from the last HELLO answer; 0 if unknown. */
	uint32_t max_gids;
	uint32_t max_sessions;
	uint32_t max_queued;

	uint8_t (*gids)[16]; /* registered, in order: what REREG restores */
	size_t n_gids;
	size_t gids_cap;
	size_t rereg_next;
	uint32_t rereg_ok;
	uint32_t rereg_failed;

	struct rdmacm_mux_event_ex *events; /* ring of events_cap */
	size_t events_head;
	size_t n_events;
	size_t events_cap;

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

static void lose_connection(struct rdmacm_mux *m, int r);

/*
 * The connection is unusable from now on. Shutting the socket down (rather
 * than closing it) keeps the fd number valid in the caller's event loop and
 * makes it readable, so the caller wakes up and sees the error. A handle
 * that reconnects closes it and goes into backoff instead.
 */
static int break_connection(struct rdmacm_mux *m, int r, const char *fmt, ...)
	_printf_(3, 4);

static int break_connection(struct rdmacm_mux *m, int r, const char *fmt, ...)
{
	va_list ap;

	if (m->broken)
		return m->broken;
	if (m->sock < 0)
		return r; /* reconnecting, and this break was handled already */
	va_start(ap, fmt);
	vformat_error(m->error, sizeof(m->error), r, fmt, ap);
	va_end(ap);
	if (m->reconnect) {
		lose_connection(m, r);
		return r;
	}
	m->broken = r;
	(void)shutdown(m->sock, SHUT_RDWR);
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

/* The library's own requests in the array: at most one (reconnection). */
static size_t count_internal(const struct rdmacm_mux *m)
{
	size_t n = 0;

	for (size_t i = 0; i < m->n_requests; i++)
		n += m->requests[i].internal;
	return n;
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

/* ---- reconnection: bookkeeping ---- */

/* Keep the socket's interest in the epoll set in line with the output. */
static void sync_epoll(struct rdmacm_mux *m)
{
	struct epoll_event ev = { .events = EPOLLIN };

	if (!m->reconnect || m->sock < 0)
		return;
	if (m->n_sent < m->n_requests)
		ev.events |= EPOLLOUT;
	if (ev.events == m->sock_events)
		return;
	ev.data.fd = m->sock;
	/* Cannot fail for a member of the set; if it did, the output would
	 * go with the next process() instead. */
	if (epoll_ctl(m->fd, EPOLL_CTL_MOD, m->sock, &ev) == 0)
		m->sock_events = ev.events;
}

/* When process() has timed work to do; NO_DEADLINE for none. */
static uint64_t next_deadline(const struct rdmacm_mux *m)
{
	if (!m->reconnect || m->state == CONN_UP)
		return NO_DEADLINE;
	if (m->state == CONN_BACKOFF && m->n_events >= EVENT_BACKLOG)
		return NO_DEADLINE;
	return m->deadline;
}

/* Arm the timerfd in the epoll set for next_deadline(). */
static void update_timer(struct rdmacm_mux *m)
{
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	uint64_t deadline = next_deadline(m), ticks;
	ssize_t n;

	if (!m->reconnect)
		return;
	/* Clear an expiry that the caller's loop woke up for. */
	n = read(m->timer_fd, &ticks, sizeof(ticks));
	(void)n;
	if (deadline == m->timer_armed)
		return;
	if (deadline != NO_DEADLINE) {
		its.it_value.tv_sec = (time_t)(deadline / 1000u);
		its.it_value.tv_nsec = (long)(deadline % 1000u) * 1000000L;
		if (deadline == 0)
			its.it_value.tv_nsec = 1; /* all zero would disarm it */
	}
	if (timerfd_settime(m->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		m->timer_armed = deadline;
}

/* xorshift64*: only for the jitter, which need not be unpredictable. */
static uint64_t next_random(struct rdmacm_mux *m)
{
	uint64_t x = m->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	m->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* The next delay of this outage: the initial one, doubled for each taken
 * before it, capped, less the jitter. */
static uint64_t backoff_delay(struct rdmacm_mux *m)
{
	uint64_t d = m->backoff_initial_ms;

	for (uint32_t i = 0; i < m->delays && d < m->backoff_max_ms; i++)
		d *= 2;
	if (d > m->backoff_max_ms)
		d = m->backoff_max_ms;
	if (m->jitter_percent)
		d -= next_random(m) % (d * m->jitter_percent / 100u + 1u);
	if (m->delays < UINT32_MAX)
		m->delays++;
	return d;
}

/* Wait @delay before the next attempt. Returns @delay for the event. */
static int32_t schedule_attempt(struct rdmacm_mux *m, uint64_t delay)
{
	m->deadline = now_ms() + delay;
	return (int32_t)delay; /* at most BACKOFF_LIMIT_MS */
}

/* Make room for @n more events. */
static int reserve_events(struct rdmacm_mux *m, size_t n)
{
	struct rdmacm_mux_event_ex *ev;
	size_t cap;

	if (m->events_cap - m->n_events >= n)
		return 0;
	cap = m->events_cap ? m->events_cap : 8;
	while (cap - m->n_events < n)
		cap *= 2;
	ev = calloc(cap, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_events; i++)
		ev[i] = m->events[(m->events_head + i) % m->events_cap];
	free(m->events);
	m->events = ev;
	m->events_cap = cap;
	m->events_head = 0;
	return 0;
}

static void push_event(struct rdmacm_mux *m,
		       const struct rdmacm_mux_event_ex *ev)
{
	/* Room was reserved before entering the state that queues @ev; this
	 * is only a guard. */
	if (m->n_events >= m->events_cap && reserve_events(m, 1) < 0)
		return;
	m->events[(m->events_head + m->n_events) % m->events_cap] = *ev;
	m->n_events++;
}

static ssize_t gid_find(const struct rdmacm_mux *m, const uint8_t gid[16])
{
	for (size_t i = 0; i < m->n_gids; i++)
		if (memcmp(m->gids[i], gid, 16) == 0)
			return (ssize_t)i;
	return -1;
}

static int reserve_gids(struct rdmacm_mux *m, size_t n)
{
	uint8_t(*gids)[16];
	size_t cap;

	if (m->gids_cap - m->n_gids >= n)
		return 0;
	cap = m->gids_cap ? m->gids_cap * 2 : 8;
	if (cap - m->n_gids < n)
		cap = m->n_gids + n;
	gids = realloc(m->gids, cap * sizeof(*gids));
	if (!gids)
		return -ENOMEM;
	m->gids = gids;
	m->gids_cap = cap;
	return 0;
}

static void gid_add(struct rdmacm_mux *m, const uint8_t gid[16])
{
	/* Capacity was reserved when the REG was submitted. */
	if (gid_find(m, gid) >= 0 || m->n_gids >= m->gids_cap)
		return;
	memcpy(m->gids[m->n_gids++], gid, 16);
}

static void gid_remove_at(struct rdmacm_mux *m, size_t idx)
{
	memmove(&m->gids[idx], &m->gids[idx + 1],
		(m->n_gids - idx - 1) * sizeof(m->gids[0]));
	m->n_gids--;
}

/* ---- requests ---- */

/* Append one request frame. @payload goes into umad.mad. The caller checked
 * that there is room. */
static struct request *queue_frame(struct rdmacm_mux *m, uint32_t op_code,
				   const uint8_t *sgid,
				   const struct rdmacm_mux_mad_addr *addr,
				   const void *payload, size_t payload_len,
				   bool internal)
{
	struct request *req = &m->requests[m->n_requests];

	/* Every byte we do not set goes out as zero, padding included. */
	memset(req, 0, sizeof(*req));
	req->internal = internal;
	req->ticket = internal ? 0 : m->next_ticket;
	req->op_code = op_code;
	req->frame.hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
	req->frame.hdr.op_code = op_code;
	if (sgid) {
		memcpy(req->frame.hdr.sgid.raw, sgid, 16);
		memcpy(req->gid, sgid, 16);
	}
	if (addr) {
		req->frame.umad.hdr.addr = *addr;
		memset(req->frame.umad.hdr.addr.reserved, 0,
		       sizeof(req->frame.umad.hdr.addr.reserved));
	}
	if (payload_len)
		memcpy(req->frame.umad.mad, payload, payload_len);
	req->frame.umad_len = (int32_t)payload_len;

	m->n_requests++;
	if (!internal && ++m->next_ticket == 0)
		m->next_ticket = 1;
	sync_epoll(m);
	return req;
}

/* Queue one request of the caller's. */
static int submit(struct rdmacm_mux *m, uint32_t op_code, const uint8_t *sgid,
		  const struct rdmacm_mux_mad_addr *addr, const void *payload,
		  size_t payload_len, uint64_t user_data, uint32_t *ret_ticket)
{
	struct request *req;

	if (m->broken)
		return m->broken;
	if (m->reconnect && m->state != CONN_UP)
		return set_error(m, -ENOTCONN,
				 "not connected to the daemon: reconnecting");
	if (m->n_requests >= RDMACM_MUX_MAX_REQUESTS)
		return set_error(m, -ENOBUFS,
				 "%d requests outstanding or uncollected",
				 RDMACM_MUX_MAX_REQUESTS);

	req = queue_frame(m, op_code, sgid, addr, payload, payload_len, false);
	req->user_data = user_data;
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

		n = sendmsg(m->sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
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

static int on_internal_answer(struct rdmacm_mux *m, size_t idx);

/* A REG that succeeded joins the set a reconnection restores, unless an
 * UNREG of the same GID was submitted after it. */
static void track_answer(struct rdmacm_mux *m, size_t idx)
{
	const struct request *req = &m->requests[idx];

	if (req->op_code != RDMACM_MUX_OP_CODE_REG ||
	    (req->resp.error != 0 && req->resp.error != -EEXIST))
		return;
	for (size_t i = idx + 1; i < m->n_requests; i++)
		if (m->requests[i].op_code == RDMACM_MUX_OP_CODE_UNREG &&
		    memcmp(m->requests[i].gid, req->gid, 16) == 0)
			return;
	gid_add(m, req->gid);
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
	if (req->internal)
		return on_internal_answer(m, m->n_answered - 1);
	if (m->reconnect)
		track_answer(m, m->n_answered - 1);
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

		n = recv(m->sock, m->in_buf + m->in_len,
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
	if (m->sock < 0)
		return 0; /* reconnecting: nothing to do I/O on */
	r = flush_output(m);
	if (r < 0) {
		/* Answers and MADs the daemon wrote before it died are
		 * still worth delivering. */
		(void)read_input(m);
		return break_connection(m, r, "sending to the daemon failed");
	}
	return read_input(m);
}

/* A broken handle asks for POLLIN only: the shut-down fd is readable. An
 * epoll set is readable whenever one of its members is ready. */
static short events_of(const struct rdmacm_mux *m)
{
	if (!m->reconnect && !m->broken && m->n_sent < m->n_requests)
		return POLLIN | POLLOUT;
	return POLLIN;
}

/* ---- reconnection: the state machine ---- */

static void fill_hello(struct rdmacm_mux_hello *hello)
{
	memset(hello, 0, sizeof(*hello));
	hello->magic = RDMACM_MUX_HELLO_MAGIC;
	hello->version_major = RDMACM_MUX_PROTO_VERSION_MAJOR;
	hello->version_minor = RDMACM_MUX_PROTO_VERSION_MINOR;
	hello->capabilities = RDMACM_MUX_CAP_ALL;
}

/* Take the granted capabilities from an answered HELLO. */
static int hello_result(struct rdmacm_mux *m, const struct request *req)
{
	struct rdmacm_mux_hello hello;
	int r = req->resp.error;

	m->caps = 0;
	m->max_gids = m->max_sessions = m->max_queued = 0;
	if (r == -EINVAL)
		return 0; /* an old, QEMU-style mux: it knows no extension */
	if (r < 0)
		return set_error(m, r, "daemon refused the HELLO handshake");
	if ((size_t)req->frame.umad_len < sizeof(hello))
		return set_error(m, -EPROTO, "HELLO answer too short (%d bytes)",
				 (int)req->frame.umad_len);
	memcpy(&hello, req->frame.umad.mad, sizeof(hello));
	if (hello.magic != RDMACM_MUX_HELLO_MAGIC)
		return set_error(m, -EPROTO, "HELLO answer has magic 0x%08x",
				 hello.magic);
	/* Never trust a grant we did not ask for. */
	m->caps = hello.capabilities & RDMACM_MUX_CAP_ALL;
	m->max_gids = hello.max_gids;
	m->max_sessions = hello.max_sessions;
	m->max_queued = hello.max_queued;
	return 0;
}

/*
 * Complete every unanswered request of the caller's with -ECONNRESET (they
 * stay collectable, in order) and drop internal ones. Returns how many of
 * the caller's failed.
 */
static uint32_t fail_in_flight(struct rdmacm_mux *m)
{
	size_t keep = m->n_answered;
	uint32_t failed = 0;

	for (size_t i = m->n_answered; i < m->n_requests; i++) {
		struct request *req;

		if (m->requests[i].internal)
			continue;
		if (keep != i)
			m->requests[keep] = m->requests[i];
		req = &m->requests[keep++];
		memset(&req->resp, 0, sizeof(req->resp));
		req->resp.ticket = req->ticket;
		req->resp.op_code = req->op_code;
		req->resp.error = -ECONNRESET;
		failed++;
	}
	m->n_requests = m->n_answered = m->n_sent = keep;
	m->out_off = 0;
	return failed;
}

/* An attempt failed with @r (m->error says how): back off, and tell a
 * handle that wants 1.2's events. */
static void attempt_failed(struct rdmacm_mux *m, int r)
{
	struct rdmacm_mux_event_ex ev = {
		.type = RDMACM_MUX_EVENT_ATTEMPT_FAILED,
		.error = r,
		.attempts = m->attempts,
	};

	m->down_error = r;
	ev.retry_ms = schedule_attempt(m, backoff_delay(m));
	if (m->ex_events)
		push_event(m, &ev);
}

/* The connection broke (m->error says why): back off, then try again. */
static void lose_connection(struct rdmacm_mux *m, int r)
{
	struct rdmacm_mux_event_ex ev = {
		.type = RDMACM_MUX_EVENT_DISCONNECTED,
		.error = r,
	};
	bool outage = m->state == CONN_UP;

	ev.requests_failed = fail_in_flight(m);
	if (m->sock >= 0) {
		(void)epoll_ctl(m->fd, EPOLL_CTL_DEL, m->sock, NULL);
		(void)close(m->sock);
		m->sock = -1;
	}
	m->sock_events = 0;
	m->in_len = 0;
	m->state = CONN_BACKOFF;
	if (!outage) {
		/* A break during a reconnection is a failed attempt. */
		attempt_failed(m, r);
		return;
	}
	m->attempts = 0;
	m->delays = 0;
	m->down_error = r;
	ev.retry_ms = schedule_attempt(m, backoff_delay(m));
	push_event(m, &ev);
}

/* Register the next GID again, or finish the (re)connection. */
static void rereg_continue(struct rdmacm_mux *m)
{
	struct rdmacm_mux_event_ex ev = {
		.type = m->connected_once ? RDMACM_MUX_EVENT_RECONNECTED :
					    RDMACM_MUX_EVENT_CONNECTED,
		.retry_ms = -1,
	};

	if (m->rereg_next < m->n_gids) {
		(void)queue_frame(m, RDMACM_MUX_OP_CODE_REG,
				  m->gids[m->rereg_next], NULL, NULL, 0, true);
		return;
	}
	ev.attempts = m->attempts;
	ev.gids_registered = m->rereg_ok;
	ev.gids_failed = m->rereg_failed;
	ev.capabilities = m->caps;
	push_event(m, &ev);
	if (m->connected_once)
		m->reconnects++;
	m->connected_once = true;
	m->state = CONN_UP;
	m->attempts = 0;
	m->down_error = 0;
	m->deadline = NO_DEADLINE;
}

static void start_rereg(struct rdmacm_mux *m)
{
	m->state = CONN_REREG;
	m->rereg_next = 0;
	m->rereg_ok = 0;
	m->rereg_failed = 0;
	rereg_continue(m);
}

/* The answer to the HELLO or a REG of a reconnection. */
static int on_internal_answer(struct rdmacm_mux *m, size_t idx)
{
	const struct request *req = &m->requests[idx];
	struct rdmacm_mux_event_ex ev = {
		.type = RDMACM_MUX_EVENT_GID_LOST,
		.retry_ms = -1,
	};
	int err = req->resp.error;

	if (req->op_code == RDMACM_MUX_OP_CODE_HELLO) {
		int r = hello_result(m, req);

		remove_request(m, idx);
		if (r < 0) {
			lose_connection(m, r);
			return r;
		}
		start_rereg(m);
		return 0;
	}

	remove_request(m, idx);
	if (err == 0 || err == -EEXIST) {
		m->rereg_ok++;
		m->rereg_next++;
	} else {
		/* Not ours any more: report it and forget it. */
		ev.error = err;
		memcpy(ev.gid, m->gids[m->rereg_next], 16);
		push_event(m, &ev);
		gid_remove_at(m, m->rereg_next);
		m->rereg_failed++;
	}
	rereg_continue(m);
	return 0;
}

/* One connection attempt; AF_UNIX connects at once or fails. */
static void attempt(struct rdmacm_mux *m)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN };
	struct rdmacm_mux_hello hello;
	int fd, r;

	m->attempts++;
	memcpy(sa.sun_path, m->path, strlen(m->path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		attempt_failed(m, set_error(m, -errno, "reconnecting: socket"));
		return;
	}
	do
		r = connect(fd, (const struct sockaddr *)&sa, sizeof(sa));
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		/* EAGAIN (a full backlog) is a failed attempt like any other. */
		r = set_error(m, -errno, "%s %s (attempt %u)",
			      m->connected_once ? "reconnecting to" :
						  "connecting to",
			      m->path, m->attempts);
		(void)close(fd);
		attempt_failed(m, r);
		return;
	}
	ev.data.fd = fd;
	if (epoll_ctl(m->fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		r = set_error(m, -errno, "reconnecting: epoll_ctl");
		(void)close(fd);
		attempt_failed(m, r);
		return;
	}
	m->sock = fd;
	m->sock_events = EPOLLIN;
	m->in_len = 0;
	m->out_off = 0;
	m->deadline = now_ms() + RECONNECT_HANDSHAKE_MS;
	if (m->flags & RDMACM_MUX_OPEN_BASE_PROTOCOL) {
		m->caps = 0;
		start_rereg(m);
		return;
	}
	/* No request of the caller's is unanswered: the spare slot is free. */
	fill_hello(&hello);
	(void)queue_frame(m, RDMACM_MUX_OP_CODE_HELLO, NULL, NULL, &hello,
			  sizeof(hello), true);
	m->state = CONN_HELLO;
}

/* Whatever is due: an attempt, or giving up on a slow handshake. */
static void reconnect_step(struct rdmacm_mux *m)
{
	uint64_t now = now_ms();

	if (m->deadline == NO_DEADLINE || now < m->deadline)
		return;
	if (m->state == CONN_BACKOFF) {
		if (m->n_events >= EVENT_BACKLOG)
			return; /* until the caller collects its events */
		/* Room for everything this attempt may report (a
		 * GID_LOST per GID, then RECONNECTED or ATTEMPT_FAILED),
		 * and the next DISCONNECTED. */
		if (reserve_events(m, m->n_gids + 2) < 0) {
			set_error(m, -ENOMEM, "reconnecting: out of memory");
			(void)schedule_attempt(m, backoff_delay(m));
			return;
		}
		attempt(m);
	} else if (m->state == CONN_HELLO || m->state == CONN_REREG) {
		set_error(m, -ETIMEDOUT,
			  "daemon did not complete the %s handshake in %d ms",
			  m->connected_once ? "reconnection" : "connection",
			  RECONNECT_HANDSHAKE_MS);
		lose_connection(m, -ETIMEDOUT);
	}
}

/* do_io(), and for a handle that reconnects, its state machine. */
static int run(struct rdmacm_mux *m)
{
	int r = do_io(m);

	if (!m->reconnect)
		return r;
	if (r < 0)
		r = 0; /* the break is an event now, queued by lose_connection */
	reconnect_step(m);
	if (m->sock >= 0 && m->n_sent < m->n_requests) {
		/* Send what an attempt or an answer just queued. */
		int r2 = do_io(m);

		if (r2 > 0)
			r += r2;
	}
	sync_epoll(m);
	update_timer(m);
	return r;
}

/* poll() timeout for waiting until @deadline with the handle's own timer. */
static int poll_timeout(const struct rdmacm_mux *m, uint64_t deadline)
{
	uint64_t own = next_deadline(m);

	return remaining_ms(own < deadline ? own : deadline);
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

		io = run(m);

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
		r = poll(&pfd, 1, poll_timeout(m, deadline));
		if (r < 0 && errno != EINTR)
			return set_error(m, -errno, "poll failed");
		if (r == 0 && remaining_ms(deadline) == 0)
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

	m->sock = fd;
	m->fd = fd;
	fd = -1;
	return 0;
}

static int handshake(struct rdmacm_mux *m, uint64_t deadline)
{
	struct rdmacm_mux_hello hello;
	uint32_t ticket = 0;
	size_t idx;
	int r;

	fill_hello(&hello);
	r = submit(m, RDMACM_MUX_OP_CODE_HELLO, NULL, NULL, &hello,
		   sizeof(hello), 0, &ticket);
	if (r < 0)
		return r;
	r = wait_answered(m, ticket, deadline, &idx);
	if (r < 0)
		return r;
	r = hello_result(m, &m->requests[idx]);
	remove_request(m, idx);
	return r;
}

/* Turn a handle into one that reconnects: the caller's fd becomes an epoll
 * set with the timer and the socket, if there is one yet, in it. */
static int setup_reconnect(struct rdmacm_mux *m, const char *path)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct timespec ts;
	int ep;

	m->path = strdup(path);
	if (!m->path)
		return set_error(m, -ENOMEM, "out of memory");
	/* The first DISCONNECTED always has its place. */
	if (reserve_events(m, 1) < 0)
		return set_error(m, -ENOMEM, "out of memory");
	m->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (m->timer_fd < 0)
		return set_error(m, -errno, "timerfd_create");
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return set_error(m, -errno, "epoll_create1");
	ev.data.fd = m->timer_fd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, m->timer_fd, &ev) < 0) {
		int r = -errno;

		(void)close(ep);
		return set_error(m, r, "epoll_ctl");
	}
	ev.data.fd = m->sock;
	if (m->sock >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, m->sock, &ev) < 0) {
		int r = -errno;

		(void)close(ep);
		return set_error(m, r, "epoll_ctl");
	}
	m->fd = ep;
	m->sock_events = m->sock >= 0 ? EPOLLIN : 0;
	m->reconnect = true;
	m->state = CONN_UP;
	m->deadline = NO_DEADLINE;
	m->timer_armed = NO_DEADLINE;
	m->backoff_initial_ms = BACKOFF_INITIAL_MS;
	m->backoff_max_ms = BACKOFF_MAX_MS;
	m->jitter_percent = BACKOFF_JITTER_PERCENT;
	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	m->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
		 ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)m;
	if (m->rng == 0)
		m->rng = 1;
	return 0;
}

/* Check reconnection delays; 0, or -EINVAL with the reason in @why. */
static int check_backoff(uint32_t initial_ms, uint32_t max_ms,
			 uint32_t jitter_percent, char *why, size_t why_size)
{
	if (initial_ms < 1 || max_ms < initial_ms || max_ms > BACKOFF_LIMIT_MS) {
		snprintf(why, why_size,
			 "backoff: need 1 <= initial (%u) <= max (%u) <= %u ms",
			 initial_ms, max_ms, BACKOFF_LIMIT_MS);
		return -EINVAL;
	}
	if (jitter_percent > 100) {
		snprintf(why, why_size, "backoff: jitter %u%% over 100%%",
			 jitter_percent);
		return -EINVAL;
	}
	return 0;
}

/* Everything but the connection: arguments, memory, the handle. */
static int check_open_attr(const struct rdmacm_mux_open_attr *attr,
			   uint32_t known_flags)
{
	char why[128];

	if (!attr->socket_path || !*attr->socket_path)
		return set_open_error(-EINVAL, "no socket path");
	if (strlen(attr->socket_path) >=
	    sizeof(((struct sockaddr_un *)NULL)->sun_path))
		return set_open_error(-ENAMETOOLONG, "socket path too long");
	if (attr->flags & ~known_flags)
		return set_open_error(-EINVAL, "unknown flags 0x%x",
				      attr->flags & ~known_flags);
	if ((attr->flags & RDMACM_MUX_OPEN_ASYNC) &&
	    !(attr->flags & RDMACM_MUX_OPEN_RECONNECT))
		return set_open_error(-EINVAL, "RDMACM_MUX_OPEN_ASYNC needs "
					       "RDMACM_MUX_OPEN_RECONNECT");
	if (!(attr->comp_mask & RDMACM_MUX_OPEN_ATTR_BACKOFF))
		return 0;
	if (!(attr->flags & RDMACM_MUX_OPEN_RECONNECT))
		return set_open_error(-EINVAL, "a backoff needs "
					       "RDMACM_MUX_OPEN_RECONNECT");
	if (check_backoff(attr->backoff_initial_ms, attr->backoff_max_ms,
			  attr->backoff_jitter_percent, why, sizeof(why)) < 0)
		return set_open_error(-EINVAL, "%s", why);
	return 0;
}

/* The connection of a handle that connects now (blocking). */
static int open_now(struct rdmacm_mux *m,
		    const struct rdmacm_mux_open_attr *attr)
{
	uint64_t deadline = deadline_from_timeout(attr->timeout_ms);
	int r;

	r = connect_socket(m, attr->socket_path, deadline);
	if (r >= 0 && !(attr->flags & RDMACM_MUX_OPEN_BASE_PROTOCOL))
		r = handshake(m, deadline);
	if (r >= 0 && (attr->flags & RDMACM_MUX_OPEN_RECONNECT))
		r = setup_reconnect(m, attr->socket_path);
	return r;
}

/* A handle that connects in rdmacm_mux_process(): in backoff, with the
 * first attempt due now. */
static int open_async(struct rdmacm_mux *m,
		      const struct rdmacm_mux_open_attr *attr)
{
	int r = setup_reconnect(m, attr->socket_path);

	if (r < 0)
		return r;
	m->connected_once = false;
	m->state = CONN_BACKOFF;
	m->deadline = now_ms();
	update_timer(m);
	return 0;
}

static int open_handle(const struct rdmacm_mux_open_attr *attr,
		       bool ex_events, struct rdmacm_mux **ret)
{
	_cleanup_(rdmacm_mux_closep) struct rdmacm_mux *m = NULL;
	int r;

	m = calloc(1, sizeof(*m));
	if (!m)
		return set_open_error(-ENOMEM, "out of memory");
	m->fd = -1;
	m->sock = -1;
	m->timer_fd = -1;
	m->flags = attr->flags;
	m->next_ticket = 1;
	m->connected_once = true;
	m->ex_events = ex_events;
	m->inbound = calloc(RDMACM_MUX_MAX_INBOUND, sizeof(*m->inbound));
	if (!m->inbound)
		return set_open_error(-ENOMEM, "out of memory");

	if (attr->flags & RDMACM_MUX_OPEN_ASYNC)
		r = open_async(m, attr);
	else
		r = open_now(m, attr);
	if (r < 0) {
		/* m->error already carries the errno text. */
		snprintf(open_error, sizeof(open_error), "%s", m->error);
		return r;
	}
	if (attr->comp_mask & RDMACM_MUX_OPEN_ATTR_BACKOFF) {
		m->backoff_initial_ms = attr->backoff_initial_ms;
		m->backoff_max_ms = attr->backoff_max_ms;
		m->jitter_percent = attr->backoff_jitter_percent;
	}

	m->error[0] = '\0';
	*ret = m;
	m = NULL;
	return 0;
}

_public_ int rdmacm_mux_open(const char *socket_path, unsigned flags,
			     int timeout_ms, struct rdmacm_mux **ret)
{
	const struct rdmacm_mux_open_attr attr = {
		.flags = flags,
		.socket_path = socket_path,
		.timeout_ms = timeout_ms,
	};
	int r;

	if (!ret)
		return set_open_error(-EINVAL, "ret is NULL");
	/* 1.1's flags: what 1.2 added comes with rdmacm_mux_open_ex(), so
	 * that a program using it needs the 1.2 symbols. */
	r = check_open_attr(&attr, RDMACM_MUX_OPEN_BASE_PROTOCOL |
					   RDMACM_MUX_OPEN_RECONNECT);
	if (r < 0)
		return r;
	return open_handle(&attr, false, ret);
}

_public_ int rdmacm_mux_open_ex(const struct rdmacm_mux_open_attr *attr,
				struct rdmacm_mux **ret)
{
	int r;

	if (!ret)
		return set_open_error(-EINVAL, "ret is NULL");
	if (!attr)
		return set_open_error(-EINVAL, "attr is NULL");
	if (attr->comp_mask & ~OPEN_ATTR_KNOWN)
		return set_open_error(-EOPNOTSUPP,
				      "open_attr.comp_mask 0x%x unknown to "
				      "librdmacm-mux %d.%d.%d",
				      attr->comp_mask & ~OPEN_ATTR_KNOWN,
				      RDMACM_MUX_VERSION_MAJOR,
				      RDMACM_MUX_VERSION_MINOR,
				      RDMACM_MUX_VERSION_MICRO);
	r = check_open_attr(attr, RDMACM_MUX_OPEN_BASE_PROTOCOL |
					  RDMACM_MUX_OPEN_RECONNECT |
					  RDMACM_MUX_OPEN_ASYNC);
	if (r < 0)
		return r;
	return open_handle(attr, true, ret);
}

_public_ void rdmacm_mux_close(struct rdmacm_mux *m)
{
	if (!m)
		return;
	if (m->sock >= 0)
		(void)close(m->sock);
	if (m->fd >= 0 && m->fd != m->sock)
		(void)close(m->fd);
	if (m->timer_fd >= 0)
		(void)close(m->timer_fd);
	free(m->path);
	free(m->gids);
	free(m->events);
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
	r = run(m);
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

/* ---- the four requests, for the 1.0 calls and rdmacm_mux_submit() ---- */

static int request_reg(struct rdmacm_mux *m, const uint8_t *gid,
		       uint64_t user_data, uint32_t *ret_ticket)
{
	if (!gid)
		return set_error(m, -EINVAL, "register: gid is NULL");
	/* Room to remember the GID if this and every other request in flight
	 * turns out to be a successful REG. */
	if (m->reconnect &&
	    reserve_gids(m, m->n_requests - m->n_answered + 1) < 0)
		return set_error(m, -ENOMEM, "register: out of memory");
	return submit(m, RDMACM_MUX_OP_CODE_REG, gid, NULL, NULL, 0, user_data,
		      ret_ticket);
}

static int request_unreg(struct rdmacm_mux *m, const uint8_t *gid,
			 uint64_t user_data, uint32_t *ret_ticket)
{
	ssize_t idx;
	int r;

	if (!gid)
		return set_error(m, -EINVAL, "unregister: gid is NULL");
	r = submit(m, RDMACM_MUX_OP_CODE_UNREG, gid, NULL, NULL, 0, user_data,
		   ret_ticket);
	if (!m->reconnect)
		return r;
	/* The caller wants it gone: a reconnection must not bring it back,
	 * whatever the answer, or the lack of one, or a request that could
	 * not even be queued (-ENOTCONN: the daemon that went away forgot the
	 * GID already). */
	idx = gid_find(m, gid);
	if (idx >= 0)
		gid_remove_at(m, (size_t)idx);
	return r;
}

static int request_mad(struct rdmacm_mux *m, const uint8_t *sgid,
		       const struct rdmacm_mux_mad_addr *addr, const void *mad,
		       size_t mad_len, uint64_t user_data, uint32_t *ret_ticket)
{
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
		      user_data, ret_ticket);
}

static int request_stats(struct rdmacm_mux *m, uint64_t user_data,
			 uint32_t *ret_ticket)
{
	/* An old mux would answer EINVAL, and one that did not grant the
	 * capability never expects the frame: do not send it at all. */
	if (!(m->caps & RDMACM_MUX_CAP_CLIENT_STATS))
		return set_error(m, -EOPNOTSUPP,
				 "daemon did not grant CLIENT_STATS");
	return submit(m, RDMACM_MUX_OP_CODE_CLIENT_STATS, NULL, NULL, NULL, 0,
		      user_data, ret_ticket);
}

_public_ int rdmacm_mux_register_gid(struct rdmacm_mux *m, const uint8_t gid[16],
				     uint32_t *ret_ticket)
{
	if (!m)
		return -EINVAL;
	return request_reg(m, gid, 0, ret_ticket);
}

_public_ int rdmacm_mux_unregister_gid(struct rdmacm_mux *m,
				       const uint8_t gid[16],
				       uint32_t *ret_ticket)
{
	if (!m)
		return -EINVAL;
	return request_unreg(m, gid, 0, ret_ticket);
}

_public_ int rdmacm_mux_send_mad(struct rdmacm_mux *m, const uint8_t sgid[16],
				 const struct rdmacm_mux_mad_addr *addr,
				 const void *mad, size_t mad_len,
				 uint32_t *ret_ticket)
{
	if (!m)
		return -EINVAL;
	return request_mad(m, sgid, addr, mad, mad_len, 0, ret_ticket);
}

_public_ int rdmacm_mux_query_stats(struct rdmacm_mux *m, uint32_t *ret_ticket)
{
	if (!m)
		return -EINVAL;
	return request_stats(m, 0, ret_ticket);
}

_public_ int rdmacm_mux_submit(struct rdmacm_mux *m,
			       const struct rdmacm_mux_request *req,
			       uint32_t *ret_ticket)
{
	if (!m)
		return -EINVAL;
	if (!req)
		return set_error(m, -EINVAL, "submit: req is NULL");
	if (req->comp_mask & ~REQUEST_KNOWN)
		return set_error(m, -EOPNOTSUPP,
				 "submit: comp_mask 0x%x unknown to "
				 "librdmacm-mux %d.%d.%d",
				 req->comp_mask & ~REQUEST_KNOWN,
				 RDMACM_MUX_VERSION_MAJOR,
				 RDMACM_MUX_VERSION_MINOR,
				 RDMACM_MUX_VERSION_MICRO);
	switch (req->op_code) {
	case RDMACM_MUX_OP_CODE_REG:
		return request_reg(m, req->gid, req->user_data, ret_ticket);
	case RDMACM_MUX_OP_CODE_UNREG:
		return request_unreg(m, req->gid, req->user_data, ret_ticket);
	case RDMACM_MUX_OP_CODE_MAD:
		return request_mad(m, req->gid, req->addr, req->mad,
				   req->mad_len, req->user_data, ret_ticket);
	case RDMACM_MUX_OP_CODE_CLIENT_STATS:
		return request_stats(m, req->user_data, ret_ticket);
	default:
		/* HELLO is the library's own. */
		return set_error(m, -EINVAL, "submit: op_code 0x%x is not a "
					     "request a client makes",
				 req->op_code);
	}
}

/* Nothing of a kind is waiting: a broken handle says why it is broken
 * (the caller cannot expect more); a live one -EAGAIN, with @what. */
static int nothing_waiting(struct rdmacm_mux *m, const char *what)
{
	if (m->broken)
		return m->broken;
	return set_error(m, -EAGAIN, "%s", what);
}

/*
 * The caller's extensible struct: @ret, which the caller says is
 * @ret_size bytes, for ours of @ours bytes (1.2's size is the least, which
 * stays the least when ours grows). -EINVAL for NULL or too small.
 */
static int check_out(struct rdmacm_mux *m, const void *ret, size_t ret_size,
		     size_t ours, const char *what)
{
	if (!ret)
		return set_error(m, -EINVAL, "%s: ret is NULL", what);
	if (ret_size < ours)
		return set_error(m, -EINVAL,
				 "%s: ret_size %zu is less than the %zu bytes "
				 "of librdmacm-mux %d.%d's struct",
				 what, ret_size, ours, RDMACM_MUX_VERSION_MAJOR,
				 RDMACM_MUX_VERSION_MINOR);
	return 0;
}

/* Hand @src (ours, @src_size bytes) to the caller's @dst of @dst_size:
 * a newer caller's fields that we do not know read as zero. */
static void copy_out(void *dst, size_t dst_size, const void *src,
		     size_t src_size)
{
	memcpy(dst, src, src_size);
	if (dst_size > src_size)
		memset((uint8_t *)dst + src_size, 0, dst_size - src_size);
}

static void response_ex_of(struct rdmacm_mux_response_ex *ex,
			   const struct request *req)
{
	const struct rdmacm_mux_client_stats *st = &req->resp.stats;

	memset(ex, 0, sizeof(*ex));
	ex->ticket = req->resp.ticket;
	ex->op_code = req->resp.op_code;
	ex->error = req->resp.error;
	ex->user_data = req->user_data;
	ex->tx_mads = st->tx_mads;
	ex->tx_rejected = st->tx_rejected;
	ex->rx_mads = st->rx_mads;
	ex->rx_dropped = st->rx_dropped;
	ex->requests = st->requests;
	ex->gids = st->gids;
	ex->sessions = st->sessions;
	ex->queued = st->queued;
}

_public_ int rdmacm_mux_next_response(struct rdmacm_mux *m,
				      struct rdmacm_mux_response *ret)
{
	if (!m)
		return -EINVAL;
	if (!ret)
		return set_error(m, -EINVAL, "next_response: ret is NULL");
	if (m->n_answered == 0)
		return nothing_waiting(m, "no response waiting");
	*ret = m->requests[0].resp;
	remove_request(m, 0);
	return 0;
}

_public_ int rdmacm_mux_next_response_ex(struct rdmacm_mux *m,
					 struct rdmacm_mux_response_ex *ret,
					 size_t ret_size)
{
	struct rdmacm_mux_response_ex ex;
	int r;

	if (!m)
		return -EINVAL;
	r = check_out(m, ret, ret_size, sizeof(ex), "next_response_ex");
	if (r < 0)
		return r;
	if (m->n_answered == 0)
		return nothing_waiting(m, "no response waiting");
	response_ex_of(&ex, &m->requests[0]);
	remove_request(m, 0);
	copy_out(ret, ret_size, &ex, sizeof(ex));
	return 0;
}

/* The oldest inbound MAD, or NULL with @r set to -EAGAIN or the error. */
static const struct rdmacm_mux_inbound *oldest_inbound(struct rdmacm_mux *m,
							int *r)
{
	if (m->n_inbound == 0) {
		*r = nothing_waiting(m, "no inbound MAD waiting");
		return NULL;
	}
	return &m->inbound[m->inbound_head];
}

static void drop_oldest_inbound(struct rdmacm_mux *m)
{
	m->inbound_head = (m->inbound_head + 1) % RDMACM_MUX_MAX_INBOUND;
	m->n_inbound--;
}

_public_ int rdmacm_mux_recv_mad(struct rdmacm_mux *m,
				 struct rdmacm_mux_inbound *ret)
{
	const struct rdmacm_mux_inbound *in;
	int r = 0;

	if (!m)
		return -EINVAL;
	if (!ret)
		return set_error(m, -EINVAL, "recv_mad: ret is NULL");
	in = oldest_inbound(m, &r);
	if (!in)
		return r;
	*ret = *in;
	drop_oldest_inbound(m);
	return 0;
}

_public_ int rdmacm_mux_recv_mad_ex(struct rdmacm_mux *m,
				    struct rdmacm_mux_inbound_ex *ret,
				    size_t ret_size)
{
	const struct rdmacm_mux_inbound *in;
	struct rdmacm_mux_inbound_ex ex;
	int r;

	if (!m)
		return -EINVAL;
	r = check_out(m, ret, ret_size, sizeof(ex), "recv_mad_ex");
	if (r < 0)
		return r;
	in = oldest_inbound(m, &r);
	if (!in)
		return r;
	memset(&ex, 0, sizeof(ex));
	ex.mad_len = in->mad_len;
	memcpy(ex.local_gid, in->local_gid, sizeof(ex.local_gid));
	ex.addr = in->addr;
	memcpy(ex.mad, in->mad, sizeof(ex.mad));
	drop_oldest_inbound(m);
	copy_out(ret, ret_size, &ex, sizeof(ex));
	return 0;
}

/* Block until @ticket is answered; its index in *@ret_idx. */
static int wait_ticket(struct rdmacm_mux *m, uint32_t ticket, int timeout_ms,
		       size_t *ret_idx)
{
	if (ticket == 0)
		return set_error(m, -EINVAL, "wait: ticket 0 is never issued");
	return wait_answered(m, ticket, deadline_from_timeout(timeout_ms),
			     ret_idx);
}

_public_ int rdmacm_mux_wait(struct rdmacm_mux *m, uint32_t ticket,
			     int timeout_ms, struct rdmacm_mux_response *ret)
{
	size_t idx = 0;
	int r;

	if (!m)
		return -EINVAL;
	if (!ret)
		return set_error(m, -EINVAL, "wait: ret is NULL");
	r = wait_ticket(m, ticket, timeout_ms, &idx);
	if (r < 0)
		return r;
	*ret = m->requests[idx].resp;
	remove_request(m, idx);
	return 0;
}

_public_ int rdmacm_mux_wait_ex(struct rdmacm_mux *m, uint32_t ticket,
				int timeout_ms,
				struct rdmacm_mux_response_ex *ret,
				size_t ret_size)
{
	struct rdmacm_mux_response_ex ex;
	size_t idx = 0;
	int r;

	if (!m)
		return -EINVAL;
	r = check_out(m, ret, ret_size, sizeof(ex), "wait_ex");
	if (r < 0)
		return r;
	r = wait_ticket(m, ticket, timeout_ms, &idx);
	if (r < 0)
		return r;
	response_ex_of(&ex, &m->requests[idx]);
	remove_request(m, idx);
	copy_out(ret, ret_size, &ex, sizeof(ex));
	return 0;
}

_public_ int rdmacm_mux_set_reconnect_backoff(struct rdmacm_mux *m,
					     uint32_t initial_ms,
					     uint32_t max_ms,
					     uint32_t jitter_percent)
{
	char why[128];

	if (!m)
		return -EINVAL;
	if (!m->reconnect)
		return set_error(m, -EOPNOTSUPP,
				 "the handle was not opened with "
				 "RDMACM_MUX_OPEN_RECONNECT");
	if (check_backoff(initial_ms, max_ms, jitter_percent, why,
			  sizeof(why)) < 0)
		return set_error(m, -EINVAL, "%s", why);
	m->backoff_initial_ms = initial_ms;
	m->backoff_max_ms = max_ms;
	m->jitter_percent = jitter_percent;
	return 0;
}

_public_ int rdmacm_mux_get_timeout(const struct rdmacm_mux *m,
				    int *ret_timeout_ms)
{
	if (!m || !ret_timeout_ms)
		return -EINVAL;
	*ret_timeout_ms = remaining_ms(next_deadline(m));
	return 0;
}

/* The oldest event, taken out of the ring; -EAGAIN or the error. */
static int take_event(struct rdmacm_mux *m, struct rdmacm_mux_event_ex *ret)
{
	if (m->n_events == 0)
		return nothing_waiting(m, "no event waiting");
	*ret = m->events[m->events_head];
	m->events_head = (m->events_head + 1) % m->events_cap;
	m->n_events--;
	/* Below the backlog limit again: an attempt may be due. */
	update_timer(m);
	return 0;
}

_public_ int rdmacm_mux_next_event(struct rdmacm_mux *m,
				   struct rdmacm_mux_event *ret)
{
	struct rdmacm_mux_event_ex ev;
	int r;

	if (!m)
		return -EINVAL;
	if (!ret)
		return set_error(m, -EINVAL, "next_event: ret is NULL");
	r = take_event(m, &ev);
	if (r < 0)
		return r;
	*ret = (struct rdmacm_mux_event){
		.type = ev.type,
		.error = ev.error,
		.requests_failed = ev.requests_failed,
		.attempts = ev.attempts,
		.gids_registered = ev.gids_registered,
		.gids_failed = ev.gids_failed,
	};
	memcpy(ret->gid, ev.gid, sizeof(ret->gid));
	return 0;
}

_public_ int rdmacm_mux_next_event_ex(struct rdmacm_mux *m,
				      struct rdmacm_mux_event_ex *ret,
				      size_t ret_size)
{
	struct rdmacm_mux_event_ex ev;
	int r;

	if (!m)
		return -EINVAL;
	r = check_out(m, ret, ret_size, sizeof(ev), "next_event_ex");
	if (r < 0)
		return r;
	r = take_event(m, &ev);
	if (r < 0)
		return r;
	copy_out(ret, ret_size, &ev, sizeof(ev));
	return 0;
}

_public_ int rdmacm_mux_query_info(const struct rdmacm_mux *m,
				   struct rdmacm_mux_info *ret,
				   size_t ret_size)
{
	struct rdmacm_mux_info info = { .comp_mask = 0 };

	if (!m || !ret || ret_size < sizeof(info))
		return -EINVAL;
	if (m->broken) {
		info.state = RDMACM_MUX_STATE_BROKEN;
		info.error = m->broken;
	} else if (m->reconnect && m->state != CONN_UP) {
		info.state = RDMACM_MUX_STATE_CONNECTING;
		info.error = m->down_error;
		info.attempts = m->attempts;
	} else {
		info.state = RDMACM_MUX_STATE_CONNECTED;
	}
	info.capabilities = m->caps;
	info.max_gids = m->max_gids;
	info.max_sessions = m->max_sessions;
	info.max_queued = m->max_queued;
	info.gids = (uint32_t)m->n_gids;
	info.requests = (uint32_t)(m->n_requests - count_internal(m));
	info.inbound = (uint32_t)m->n_inbound;
	info.events = (uint32_t)m->n_events;
	info.dropped = m->dropped;
	info.reconnects = m->reconnects;
	copy_out(ret, ret_size, &info, sizeof(info));
	return 0;
}

_public_ uint32_t rdmacm_mux_version(void)
{
	return RDMACM_MUX_VERSION;
}

_public_ const char *rdmacm_mux_last_error(const struct rdmacm_mux *m)
{
	return m ? m->error : open_error;
}
