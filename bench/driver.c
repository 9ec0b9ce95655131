/* SPDX-License-Identifier: MIT */
/*
 * Owns the bench's client side: connecting and registering clients, the
 * session set-up, and the load patterns (flood, paced, QEMU-style, read
 * only, handshakes), all from one epoll loop with snapshots for the runs.
 */
#include "driver.h"
#include "fd-write.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define SETUP_WINDOW 32
/* REQs whose REP has not come, per client: half the daemon's default
 * inbound queue, so that a burst of REPs is never dropped as queue-full. */
#define SETUP_REP_WINDOW 512
#define HS_IDLE 0
#define UNREACHABLE_GIDS 16 /* ::ffff:10.9.0.1 .. .16: no port has them */

/* The run's comm id and TID counters (see driver.h). */
static uint32_t comm_id_next = 1;
static uint64_t tid_next;

uint32_t driver_comm_ids(uint32_t n)
{
	uint32_t base;

	if (n == 0)
		n = 1;
	if (comm_id_next + n < comm_id_next) /* would wrap through 0 */
		comm_id_next = 1;
	base = comm_id_next;
	comm_id_next += n;
	return base;
}

uint64_t driver_next_tid(void)
{
	/* only the low 32 bits survive the kernel: those must differ */
	return ++tid_next;
}

static int read_all_blocking(int fd, void *p, size_t len, int timeout_ms)
{
	uint8_t *b = p;

	while (len > 0) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		ssize_t r;

		if (poll(&pfd, 1, timeout_ms) <= 0)
			return -ETIMEDOUT;
		r = read(fd, b, len);
		if (r == 0)
			return -EPIPE;
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		b += r;
		len -= (size_t)r;
	}
	return 0;
}

static void set_events(Driver *d, Conn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };

	if (c->slow)
		ev.events &= ~(uint32_t)EPOLLIN;
	if (ev.events == c->events)
		return;
	c->events = ev.events;
	epoll_ctl(d->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void frame_template(Conn *c, const uint8_t dest[16])
{
	struct rdmacm_mux_msg *m = &c->tmpl;

	memset(m, 0, sizeof(*m));
	m->hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
	m->hdr.op_code = RDMACM_MUX_OP_CODE_MAD;
	memcpy(m->hdr.sgid.raw, c->gid, 16);
	m->umad_len = 256;
	m->umad.hdr.addr.qpn = htonl(1);
	m->umad.hdr.addr.qkey = htonl(QP1_QKEY);
	m->umad.hdr.addr.grh_present = 1;
	m->umad.hdr.addr.gid_index = (uint8_t)c->gid_index; /* what the probe sends with */
	m->umad.hdr.addr.hop_limit = 64;
	memcpy(m->umad.hdr.addr.gid, dest, 16);
	mad_build(m->umad.mad, CM_RTU, 0, 0, 0);
}

int driver_connect(Driver *d, const char *sock_path, unsigned first, unsigned n, bool reg,
		   const uint8_t (*gids)[16], const int *gid_index)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	if (d->ep < 0)
		d->ep = epoll_create1(EPOLL_CLOEXEC);
	d->conns = realloc(d->conns, (d->n + n) * sizeof(*d->conns));
	for (unsigned i = 0; i < n; i++) {
		Conn *c = calloc(1, sizeof(*c));
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		int e;

		c->idx = d->n;
		c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			fprintf(stderr, "bench: client %u cannot connect to %s: %s\n", i, sock_path,
				strerror(errno));
			if (c->fd >= 0)
				close(c->fd);
			free(c);
			return -errno;
		}
		memcpy(c->gid, gids[first + i], 16);
		c->gid_index = gid_index[first + i];
		c->rng = BENCH_SEED ^ ((uint64_t)(first + i + 1) * 0x9e3779b97f4a7c15ull);
		frame_template(c, d->sink_gid);
		if (reg) {
			struct rdmacm_mux_msg m = { 0 };

			m.hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
			m.hdr.op_code = RDMACM_MUX_OP_CODE_REG;
			memcpy(m.hdr.sgid.raw, c->gid, 16);
			e = fd_write_all(c->fd, &m, FRAME_SIZE, -1);
			if (e == 0)
				e = read_all_blocking(c->fd, &m, FRAME_SIZE, 5000);
			if (e < 0 || m.hdr.msg_type != RDMACM_MUX_MSG_TYPE_RESP || m.hdr.err_code != 0) {
				fprintf(stderr, "bench: REG of client %u failed (%d, err_code %d)\n", i,
					e, m.hdr.err_code);
				close(c->fd);
				free(c);
				return e < 0 ? e : -EPROTO;
			}
		}
		fcntl(c->fd, F_SETFL, O_NONBLOCK);
		c->events = EPOLLIN;
		epoll_ctl(d->ep, EPOLL_CTL_ADD, c->fd, &ev);
		d->conns[d->n++] = c;
	}
	return 0;
}

void driver_close_all(Driver *d)
{
	for (unsigned i = 0; i < d->n; i++) {
		close(d->conns[i]->fd);
		free(d->conns[i]->peer);
		free(d->conns[i]);
	}
	free(d->conns);
	d->conns = NULL;
	d->n = d->n_a = 0;
	if (d->ep >= 0)
		close(d->ep);
	d->ep = -1;
}

/* Write what is buffered; EPOLLOUT stays on while something is left. */
static void conn_flush(Driver *d, Conn *c, uint32_t base_events)
{
	while (c->out_off < c->out_len) {
		ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				d->write_errors++;
			break;
		}
		c->out_off += (size_t)w;
	}
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	set_events(d, c, base_events | (c->out_len ? (uint32_t)EPOLLOUT : 0u));
}

/* Room for one more frame at the end of the output buffer? */
static struct rdmacm_mux_msg *conn_append(Conn *c)
{
	struct rdmacm_mux_msg *m;

	if (c->out_len + FRAME_SIZE > sizeof(c->out)) {
		if (c->out_off == 0)
			return NULL;
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	m = (struct rdmacm_mux_msg *)(void *)(c->out + c->out_len);
	c->out_len += FRAME_SIZE;
	return m;
}

/* The peer comm id of session @id (1-based), or 0 while its REP is not in. */
static uint32_t session_peer(const Conn *c, uint32_t id)
{
	return c->peer && id >= 1 && id <= c->n_sess ? c->peer[id - 1] : 0;
}

/* A REP for one of this client's sessions: learn its peer's comm id. */
static void note_rep(Conn *c, const uint8_t *mad)
{
	uint32_t k = mad_remote(mad) - c->id_base - 1;

	if (c->peer && k < c->n_sess && !c->peer[k]) {
		c->peer[k] = mad_local(mad);
		c->reps++;
	}
}

/* An RTU on one of this client's sessions (it changes nothing once established). */
static void put_rtu(Conn *c, struct rdmacm_mux_msg *m, uint64_t stamp)
{
	uint32_t id = c->n_sess ? 1u + (uint32_t)(rng_next(&c->rng) % c->n_sess) : 1u;

	memcpy(m, &c->tmpl, FRAME_SIZE);
	mad_set_local(m->umad.mad, c->id_base + id);
	mad_set_remote(m->umad.mad, session_peer(c, id));
	mad_set_tid(m->umad.mad, driver_next_tid());
	c->sent++;
	memcpy(m->umad.mad + MAD_OFF_STAMP, &stamp, sizeof(stamp));
}

static void send_hs(Driver *d, Conn *c, uint16_t attr, uint32_t local, uint32_t remote,
		    const uint8_t dest[16])
{
	struct rdmacm_mux_msg *m = conn_append(c);

	if (!m) {
		d->write_errors++;
		return;
	}
	memcpy(m, &c->tmpl, FRAME_SIZE);
	memcpy(m->umad.hdr.addr.gid, dest, 16);
	if (attr == CM_REQ)
		mad_build_req(m->umad.mad, local, c->gid, dest, driver_next_tid());
	else
		mad_build(m->umad.mad, attr, local, remote, driver_next_tid());
	c->sent++;
	conn_flush(d, c, EPOLLIN);
}

/* A handshake's own comm id: new for each connection, never another client's. */
static uint32_t next_comm_id(Conn *c)
{
	c->hs_local = driver_comm_ids(1);
	return c->hs_local;
}

/* One REQ to the next of the GIDs no port has; its answer starts the next. */
static void send_unreachable(Driver *d, Conn *c)
{
	struct rdmacm_mux_msg *m = conn_append(c);
	uint8_t dest[IB_GID_LEN] = { [10] = 0xff, [11] = 0xff, [12] = 10, [13] = 9 };

	if (!m) {
		d->write_errors++;
		return;
	}
	dest[15] = (uint8_t)(1 + c->unreach_sent++ % UNREACHABLE_GIDS);
	memcpy(m, &c->tmpl, FRAME_SIZE);
	memcpy(m->umad.hdr.addr.gid, dest, IB_GID_LEN);
	mad_build_req(m->umad.mad, driver_comm_ids(1), c->gid, dest, driver_next_tid());
	c->unreach_busy = true;
	conn_flush(d, c, EPOLLIN);
}

static void hs_start(Driver *d, Conn *a)
{
	Conn *b = d->conns[d->n_a + a->idx];

	send_hs(d, a, CM_REQ, next_comm_id(a), 0, b->gid);
}

static void hs_inbound(Driver *d, Conn *c, const struct rdmacm_mux_msg *m)
{
	const uint8_t *mad = m->umad.mad;
	uint16_t attr = mad_attr(mad);
	bool side_a = c->idx < d->n_a;

	if (!side_a && attr == CM_REQ) {
		c->hs_peer_wire = mad_local(mad);
		memcpy(c->hs_peer_gid, m->umad.hdr.addr.gid, 16);
		send_hs(d, c, CM_REP, next_comm_id(c), c->hs_peer_wire, c->hs_peer_gid);
	} else if (side_a && attr == CM_REP) {
		c->hs_peer_wire = mad_local(mad);
		send_hs(d, c, CM_RTU, c->hs_local, c->hs_peer_wire,
			d->conns[d->n_a + c->idx]->gid);
	} else if (!side_a && attr == CM_RTU) {
		Conn *a = d->conns[c->idx - d->n_a];

		send_hs(d, a, CM_DREQ, a->hs_local, a->hs_peer_wire, c->gid);
	} else if (!side_a && attr == CM_DREQ) {
		send_hs(d, c, CM_DREP, c->hs_local, c->hs_peer_wire, c->hs_peer_gid);
	} else if (side_a && attr == CM_DREP) {
		d->cycles++;
		hs_start(d, c);
	}
}

static void send_qemu(Driver *d, Conn *c)
{
	struct rdmacm_mux_msg *m = conn_append(c);

	if (!m)
		return;
	put_rtu(c, m, 0);
	c->busy = true;
	conn_flush(d, c, EPOLLIN);
}

static void conn_read(Driver *d, Conn *c, DriveMode mode)
{
	for (;;) {
		ssize_t r = read(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len);
		size_t off = 0;
		uint64_t now = 0;

		if (r <= 0) {
			if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
				d->write_errors++;
				set_events(d, c, 0);
			}
			return;
		}
		c->in_len += (size_t)r;
		while (c->in_len - off >= FRAME_SIZE) {
			const struct rdmacm_mux_msg *m =
				(const struct rdmacm_mux_msg *)(const void *)(c->in + off);

			off += FRAME_SIZE;
			if (m->hdr.msg_type == RDMACM_MUX_MSG_TYPE_RESP) {
				if (m->hdr.err_code == 0)
					c->resp_ok++;
				else
					c->resp_err++;
				if (c->unreach_busy) {
					c->unreach_busy = false;
					c->unreach_answered++;
					if (d->running && c->unreachable)
						send_unreachable(d, c);
					continue;
				}
				if (mode == DRIVE_QEMU && c->busy) {
					c->busy = false;
					send_qemu(d, c);
				}
				continue;
			}
			c->inbound++;
			if (c->peer && mad_attr(m->umad.mad) == CM_REP)
				note_rep(c, m->umad.mad);
			if (mode == DRIVE_HANDSHAKE) {
				hs_inbound(d, c, m);
			} else if (d->lat_on) {
				uint64_t stamp;

				memcpy(&stamp, m->umad.mad + MAD_OFF_STAMP, sizeof(stamp));
				if (!now)
					now = now_ns();
				if (stamp && stamp <= now)
					hist_add(d->lat, now - stamp);
			}
		}
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
		if ((size_t)r < sizeof(c->in) - c->in_len)
			return;
	}
}

static unsigned driver_active(const Driver *d)
{
	return d->n_active && d->n_active < d->n ? d->n_active : d->n;
}

/*
 * The REQs of @c's sessions whose REP has not come, sent again, as a CM
 * resends a REQ that got no answer (same comm id; the daemon keeps the
 * session, the sink answers with the same REP). A REP can be lost on the
 * way when the driver reads more slowly than a million REPs arrive: the
 * simulator drops a MAD after its queue was full for 200 ms, the daemon
 * one for a client whose queue is full. What does not fit the output
 * buffer goes in the next round.
 */
static unsigned resend_missing_reqs(Driver *d, Conn *c, uint32_t sent)
{
	unsigned n = 0;

	for (uint32_t k = 0; k < sent && k < c->n_sess; k++) {
		struct rdmacm_mux_msg *m;

		if (c->peer[k])
			continue;
		m = conn_append(c);
		if (!m)
			break;
		memcpy(m, &c->tmpl, FRAME_SIZE);
		mad_build_req(m->umad.mad, c->id_base + k + 1, c->gid, d->sink_gid,
			      driver_next_tid());
		n++;
	}
	conn_flush(d, c, EPOLLIN);
	return n;
}

/*
 * One message per session and client, SETUP_WINDOW in flight: REQs that
 * create the sessions, or (@rtu) one RTU each, which establishes them, so
 * that the measured runs only ever see established sessions, whatever the
 * table size (otherwise at 1M sessions most first RTUs fall in the runs).
 */
static int setup_pass(Driver *d, bool rtu, uint64_t *errors)
{
	uint64_t deadline = now_ns() + 300ull * 1000000000ull;
	unsigned done = 0;

	for (unsigned i = 0; i < d->n; i++) {
		Conn *c = d->conns[i];

		c->sent = c->resp_ok = c->resp_err = 0;
		if (c->n_sess == 0)
			done++;
		set_events(d, c, EPOLLIN | EPOLLOUT);
	}
	while (done < d->n) {
		struct epoll_event evs[256];
		int n = epoll_wait(d->ep, evs, 256, 1000);

		if (now_ns() > deadline) {
			fprintf(stderr, "bench: session set-up timed out\n");
			return -ETIMEDOUT;
		}
		for (int k = 0; k < n; k++) {
			Conn *c = evs[k].data.ptr;
			uint64_t before = c->resp_ok + c->resp_err;

			if (evs[k].events & EPOLLIN)
				conn_read(d, c, DRIVE_RX);
			if (c->resp_ok + c->resp_err >= c->n_sess && before < c->n_sess)
				done++;
			while (c->sent < c->n_sess && c->sent - (c->resp_ok + c->resp_err) < SETUP_WINDOW &&
			       (rtu || c->sent - c->reps < SETUP_REP_WINDOW)) {
				struct rdmacm_mux_msg *m = conn_append(c);

				if (!m)
					break;
				memcpy(m, &c->tmpl, FRAME_SIZE);
				c->sent++;
				if (rtu) {
					mad_set_local(m->umad.mad, c->id_base + (uint32_t)c->sent);
					mad_set_remote(m->umad.mad, session_peer(c, (uint32_t)c->sent));
					mad_set_tid(m->umad.mad, driver_next_tid());
				} else {
					mad_build_req(m->umad.mad, c->id_base + (uint32_t)c->sent, c->gid,
						      d->sink_gid, driver_next_tid());
				}
			}
			conn_flush(d, c, c->sent < c->n_sess ? (uint32_t)(EPOLLIN | EPOLLOUT) : EPOLLIN);
		}
	}
	for (unsigned i = 0; i < d->n; i++) {
		*errors += d->conns[i]->resp_err;
		d->conns[i]->sent = 0;
		set_events(d, d->conns[i], EPOLLIN);
	}
	return 0;
}

void driver_plan_sessions(Driver *d, uint32_t total)
{
	unsigned na = driver_active(d);

	for (unsigned i = 0; i < d->n; i++) {
		Conn *c = d->conns[i];

		c->n_sess = i < na ? total / na + (i < total % na ? 1 : 0) : 0;
		c->id_base = driver_comm_ids(c->n_sess) - 1;
		free(c->peer);
		c->peer = c->n_sess ? calloc(c->n_sess, sizeof(uint32_t)) : NULL;
		c->reps = 0;
	}
}

static void drain(Driver *d, unsigned quiet_ms);

/* Read until @total REPs came (sending again the REQs of those that do
 * not come for a second), or 30 s passed. */
static int wait_reps(Driver *d, uint32_t total)
{
	uint64_t deadline = now_ns() + 30000000000ull;
	uint64_t last_reps = 0, last_progress = now_ns();
	unsigned resent = 0;

	for (;;) {
		struct epoll_event evs[256];
		uint64_t reps = 0;
		int n;

		for (unsigned i = 0; i < d->n; i++)
			reps += d->conns[i]->reps;
		if (reps >= total) {
			if (resent) {
				fprintf(stderr, "bench: %u REQs sent again for REPs lost on the way\n",
					resent);
				/* their responses, before the RTU pass counts its own */
				drain(d, 200);
			}
			return 0;
		}
		if (now_ns() > deadline) {
			fprintf(stderr, "bench: %llu of %u REPs came\n", (unsigned long long)reps, total);
			return -ETIMEDOUT;
		}
		if (reps > last_reps) {
			last_reps = reps;
			last_progress = now_ns();
		} else if (now_ns() - last_progress > 1000000000ull) {
			for (unsigned i = 0; i < d->n; i++)
				if (d->conns[i]->peer)
					resent += resend_missing_reqs(d, d->conns[i],
								      d->conns[i]->n_sess);
			last_progress = now_ns();
		}
		n = epoll_wait(d->ep, evs, 256, 100);
		for (int k = 0; k < n; k++)
			conn_read(d, evs[k].data.ptr, DRIVE_RX);
	}
}

int driver_setup_sessions(Driver *d, uint32_t total, uint64_t *errors)
{
	int e;

	*errors = 0;
	driver_plan_sessions(d, total);
	/* The sink answers the REQs as a peer's CM would. */
	__atomic_store_n(&d->sh->answer_reqs, 1, __ATOMIC_RELEASE);
	e = setup_pass(d, false, errors);
	/* The RTUs name the peers' comm ids: wait for every REP. */
	if (e >= 0)
		e = wait_reps(d, total);
	__atomic_store_n(&d->sh->answer_reqs, 0, __ATOMIC_RELEASE);
	return e < 0 ? e : setup_pass(d, true, errors);
}

static void snap(Driver *d, Snap *s)
{
	s->t = now_ns();
	s->sink = __atomic_load_n(&d->sh->sink_count, __ATOMIC_RELAXED);
	s->inbound = s->resp_ok = 0;
	for (unsigned i = 0; i < d->n; i++) {
		if (!d->conns[i]->slow && !d->conns[i]->uncounted)
			s->inbound += d->conns[i]->inbound;
		s->resp_ok += d->conns[i]->resp_ok;
	}
	s->cycles = d->cycles;
}

/* Read until nothing arrives for @quiet_ms: the next run starts clean. */
static void drain(Driver *d, unsigned quiet_ms)
{
	for (unsigned i = 0; i < d->n; i++) {
		d->conns[i]->out_len = d->conns[i]->out_off = 0;
		set_events(d, d->conns[i], EPOLLIN);
	}
	for (;;) {
		struct epoll_event evs[256];
		int n = epoll_wait(d->ep, evs, 256, (int)quiet_ms);

		if (n <= 0)
			break;
		for (int k = 0; k < n; k++)
			conn_read(d, evs[k].data.ptr, DRIVE_RX);
	}
	for (unsigned i = 0; i < d->n; i++)
		d->conns[i]->busy = false;
}

int driver_run(Driver *d, const DriveSpec *spec, DriveOut *out)
{
	uint64_t start = now_ns(), period = 0, next_send = 0;
	uint64_t t0 = start + (uint64_t)spec->warm_ms * 1000000ull;
	uint64_t step = (uint64_t)spec->run_ms * 1000000ull;
	uint64_t err0 = 0;
	unsigned rr = 0;

	memset(out, 0, sizeof(*out));
	d->lat = &out->lat;
	d->lat_on = false;
	d->write_errors = 0;
	d->cycles = 0;
	for (unsigned i = 0; i < d->n; i++) {
		Conn *c = d->conns[i];

		if (!c->uncounted)
			err0 += c->resp_err;
		c->busy = false;
		c->hs_state = HS_IDLE;
		set_events(d, c,
			   spec->mode == DRIVE_TX && i < driver_active(d) ? (uint32_t)(EPOLLIN | EPOLLOUT)
									   : EPOLLIN);
	}
	if (spec->mode == DRIVE_QEMU)
		for (unsigned i = 0; i < driver_active(d); i++)
			send_qemu(d, d->conns[i]);
	if (spec->mode == DRIVE_HANDSHAKE)
		for (unsigned i = 0; i < d->n_a; i++)
			hs_start(d, d->conns[i]);
	if (spec->mode == DRIVE_TX_PACED) {
		period = (uint64_t)(1e9 / spec->rate);
		next_send = start;
	}
	d->running = true;
	for (unsigned i = 0; i < d->n; i++)
		if (d->conns[i]->unreachable && !d->conns[i]->unreach_busy)
			send_unreachable(d, d->conns[i]);

	while (out->nsnap <= spec->runs) {
		struct epoll_event evs[256];
		uint64_t now = now_ns(), boundary = t0 + step * out->nsnap, wake = boundary;
		struct timespec ts;
		int n;

		if (now >= boundary) {
			snap(d, &out->snaps[out->nsnap++]);
			if (out->nsnap == 1) {
				/* warm-up over: latency counts from here */
				hist_reset(&out->lat);
				__atomic_store_n(&d->sh->lat_on, 0, __ATOMIC_RELAXED);
				hist_reset(&d->sh->sink_lat);
				__atomic_store_n(&d->sh->lat_on, spec->latency ? 1u : 0u,
						 __ATOMIC_RELAXED);
				d->lat_on = spec->latency;
			}
			continue;
		}
		if (period) {
			while (next_send <= now) {
				Conn *c = d->conns[rr++ % driver_active(d)];
				struct rdmacm_mux_msg *m = c->slow ? NULL : conn_append(c);

				next_send += period;
				if (!m)
					continue;
				put_rtu(c, m, now_ns());
				conn_flush(d, c, EPOLLIN);
			}
			if (next_send < wake)
				wake = next_send;
		}
		ts.tv_sec = (time_t)((wake - now) / 1000000000ull);
		ts.tv_nsec = (long)((wake - now) % 1000000000ull);
		n = epoll_pwait2(d->ep, evs, 256, &ts, NULL);
		for (int k = 0; k < n; k++) {
			Conn *c = evs[k].data.ptr;

			if (evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				conn_read(d, c, spec->mode);
			if (evs[k].events & EPOLLOUT) {
				if (spec->mode == DRIVE_TX && c->out_len == 0) {
					for (unsigned f = 0; f < CONN_OUT_FRAMES; f++)
						put_rtu(c, conn_append(c), 0);
				}
				conn_flush(d, c,
					   spec->mode == DRIVE_TX ? (uint32_t)(EPOLLIN | EPOLLOUT) : EPOLLIN);
			}
		}
	}
	d->lat_on = false;
	d->running = false;
	__atomic_store_n(&d->sh->lat_on, 0, __ATOMIC_RELAXED);
	/* The blaster polls its mode on every send: stop it before draining. */
	__atomic_store_n(&d->sh->wire_mode, WIRE_SINK, __ATOMIC_RELEASE);
	drain(d, 100);
	for (unsigned i = 0; i < d->n; i++)
		if (!d->conns[i]->uncounted)
			out->resp_err += d->conns[i]->resp_err;
	out->resp_err -= err0;
	out->write_errors = d->write_errors;
	d->lat = NULL;
	return 0;
}

int driver_wait_answers(Driver *d, unsigned timeout_ms)
{
	uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000ull;

	for (;;) {
		struct epoll_event evs[256];
		bool busy = false;
		int n;

		for (unsigned i = 0; i < d->n; i++)
			busy |= d->conns[i]->unreach_busy;
		if (!busy)
			return 0;
		if (now_ns() >= end)
			return -ETIMEDOUT;
		n = epoll_wait(d->ep, evs, 256, 20);
		for (int k = 0; k < n; k++)
			conn_read(d, evs[k].data.ptr, DRIVE_RX);
	}
}

/* ---- counted runs (--cost): a fixed number of MADs, however long it takes ---- */

static uint64_t count_metric(const Driver *d, DriveMode mode)
{
	uint64_t v = 0;

	if (mode == DRIVE_TX)
		return __atomic_load_n(&d->sh->sink_count, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < d->n; i++)
		v += mode == DRIVE_QEMU ? d->conns[i]->resp_ok : d->conns[i]->inbound;
	return v;
}

uint64_t driver_run_count(Driver *d, DriveMode mode, uint64_t count, unsigned quiet_ms)
{
	unsigned na = driver_active(d);
	uint64_t base = count_metric(d, mode), issued = 0, last = base, moved = now_ns();
	bool tx = mode == DRIVE_TX, qemu = mode == DRIVE_QEMU;

	d->write_errors = 0;
	for (unsigned i = 0; i < d->n; i++) {
		d->conns[i]->busy = false;
		set_events(d, d->conns[i], tx && i < na ? (uint32_t)(EPOLLIN | EPOLLOUT) : EPOLLIN);
	}
	for (unsigned i = 0; qemu && i < na && issued < count; i++, issued++)
		send_qemu(d, d->conns[i]);
	for (;;) {
		struct epoll_event evs[256];
		uint64_t now, got;
		int n = epoll_wait(d->ep, evs, 256, 20);

		for (int k = 0; k < n; k++) {
			Conn *c = evs[k].data.ptr;

			if (evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
				uint64_t sent = c->sent;

				/* conn_read sends the next request itself (one at a
				 * time per client): only while some are left */
				conn_read(d, c, qemu && issued < count ? DRIVE_QEMU : DRIVE_RX);
				issued += c->sent - sent;
			}
			if (tx && (evs[k].events & EPOLLOUT)) {
				if (c->out_len == 0)
					for (unsigned f = 0; f < CONN_OUT_FRAMES && issued < count; f++, issued++)
						put_rtu(c, conn_append(c), 0);
				conn_flush(d, c, issued < count ? (uint32_t)(EPOLLIN | EPOLLOUT) : EPOLLIN);
			}
		}
		now = now_ns();
		got = count_metric(d, mode) - base;
		if (got >= count)
			return got;
		if (got != last) {
			last = got;
			moved = now;
		} else if (now - moved > (uint64_t)quiet_ms * 1000000ull) {
			return got;
		}
	}
}
