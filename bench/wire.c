/* SPDX-License-Identifier: MIT */
/*
 * Owns the bench's two umad helpers, both run under the simulated fabric:
 *
 *  - the wire process on simB: a sink that counts what the relay under
 *    test sends (and keeps the wire ids of REQs, and the latency of stamped
 *    RTUs; while sessions are set up it answers each REQ with a REP, as a
 *    peer's CM would), and a blaster that sends RTUs to live sessions for
 *    the RX rows, as their peer (its comm id, to the session's GID);
 *  - the limit probe on simA: the least a relay must do, to compare with.
 *    It reads 360-byte frames from its clients and does one umad_send (one
 *    write into the peer's packet FIFO) per MAD; for the QEMU pattern it
 *    also writes the response. Inbound MADs become one frame each for
 *    client (RemoteCommID mod clients), gathered per client over one
 *    wake-up (up to 256 MADs, as the daemon) and written with one write()
 *    per client: the same syscall batching as the daemon. No validation,
 *    no sessions, no comm id rewrite, no queues beyond that.
 */
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

#include <infiniband/umad.h>

#include "bench.h"

#define PROBE_MAX_CLIENTS 4096
#define PROBE_IN_FRAMES 64 /* as the daemon: CLIENT_INPUT_FRAMES */
#define PROBE_OUT_FRAMES 64 /* as the daemon's writev (WRITEV_MAX) */

static int open_cm(const char *ca, int *agent)
{
	long mask[16 / sizeof(long)] = { 0 };
	int fd;

	mask[0] = 1L << 3; /* Send */
	fd = umad_open_port(ca, 1);
	if (fd < 0) {
		fprintf(stderr, "bench: cannot open %s port 1 (is libumad-sim preloaded?)\n", ca);
		_exit(1);
	}
	*agent = umad_register(fd, 0x07, 2, 0, mask);
	if (*agent < 0) {
		fprintf(stderr, "bench: cannot register the CM class on %s\n", ca);
		_exit(1);
	}
	return fd;
}

static void drain_ctl(int ctl_fd)
{
	uint64_t v;

	while (read(ctl_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		;
}

/* Answer the REQ in @rx as the peer's CM would: a REP naming the sender's
 * comm id, from the GID it was sent to. */
static void answer_req(int fd, int agent, const void *rx)
{
	static uint8_t tx[sizeof(struct ib_user_mad) + 256];
	const uint8_t *req = umad_get_mad((void *)rx);
	uint32_t wire = mad_local(req);
	ib_mad_addr_t *a;

	memcpy(tx, rx, umad_size() + 256);
	mad_build(umad_get_mad(tx), CM_REP, BENCH_PEER_ID(wire), wire, mad_tid(req));
	a = umad_get_mad_addr(tx);
	a->qpn = htobe32(1);
	a->qkey = htobe32(QP1_QKEY);
	a->grh_present = 1;
	a->gid_index = 1; /* simB's ::ffff:10.0.2.1, where the REQ went */
	a->hop_limit = 64;
	(void)umad_send(fd, agent, tx, 256, 0, 0);
}

static void sink_one(Shared *sh, int fd, int agent, const void *rx, uint64_t now)
{
	const uint8_t *mad = umad_get_mad((void *)rx);
	uint16_t attr = mad_attr(mad);

	if (attr == CM_REQ && __atomic_load_n(&sh->answer_reqs, __ATOMIC_RELAXED))
		answer_req(fd, agent, rx);
	if (attr == CM_REQ && __atomic_load_n(&sh->record_ids, __ATOMIC_RELAXED)) {
		uint32_t n = sh->n_ids;

		if (n < MAX_WIRE_IDS) {
			sh->ids[n] = mad_local(mad);
			memcpy(&sh->id_src[n], umad_get_mad_addr((void *)rx)->gid + 12, 4);
			__atomic_store_n(&sh->n_ids, n + 1, __ATOMIC_RELEASE);
		}
	} else if (attr == CM_RTU && __atomic_load_n(&sh->lat_on, __ATOMIC_RELAXED)) {
		uint64_t stamp;

		memcpy(&stamp, mad + MAD_OFF_STAMP, sizeof(stamp));
		if (stamp && stamp <= now)
			hist_add(&sh->sink_lat, now - stamp);
	}
	__atomic_store_n(&sh->sink_count, sh->sink_count + 1, __ATOMIC_RELAXED);
}

static void blast(Shared *sh, int fd, int agent, void *umad)
{
	/* the peer's TIDs: new for every MAD of the run, not per blast */
	static uint64_t tid = 1;
	uint8_t *mad = umad_get_mad(umad);
	ib_mad_addr_t *a = umad_get_mad_addr(umad);
	uint64_t rng = BENCH_SEED, next = now_ns(), pick;
	double rate = sh->blast_rate;
	uint64_t period = rate > 0 ? (uint64_t)(1e9 / rate) : 0;
	uint32_t n = sh->blast_ids;
	uint64_t limit = __atomic_load_n(&sh->blast_limit, __ATOMIC_ACQUIRE), sent = 0;

	pick = n ? rng_next(&rng) % n : 0;
	mad_build(mad, CM_RTU, 0x1234, 0, 0);
	umad_set_addr(umad, 0, 1, 0, (int)QP1_QKEY);
	a->grh_present = 1;
	a->gid_index = 1; /* simB's ::ffff:10.0.2.1 */
	a->hop_limit = 64;
	memcpy(a->gid, sh->blast_dgid, 16);
	while (__atomic_load_n(&sh->wire_mode, __ATOMIC_ACQUIRE) == WIRE_BLAST && n > 0) {
		if (limit && sent >= limit) {
			/* a counted burst (--cost) is out: wait for the mode to change */
			usleep(1000);
			continue;
		}
		for (int k = 0; k < 64 && !(limit && sent >= limit); k++, sent++) {
			uint64_t stamp;

			/* the index one step ahead, prefetched: at 1M sessions the
			 * blaster's own cache misses must not pace the RX rows */
			/* the session's peer, to the GID the session belongs to */
			mad_set_local(mad, BENCH_PEER_ID(sh->ids[pick]));
			mad_set_remote(mad, sh->ids[pick]);
			memcpy(a->gid + 12, &sh->id_src[pick], 4);
			pick = rng_next(&rng) % n;
			__builtin_prefetch(&sh->ids[pick]);
			mad_set_tid_low(mad, (uint32_t)tid++);
			if (period) {
				next += period;
				stamp = now_ns();
				if (next > stamp + 20000) {
					struct timespec ts = { (time_t)(next / 1000000000ull),
							       (long)(next % 1000000000ull) };
					clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
				} else if (stamp > next + 100000000ull) {
					next = stamp; /* far behind: do not burst to catch up */
				}
			}
			stamp = now_ns();
			memcpy(mad + MAD_OFF_STAMP, &stamp, sizeof(stamp));
			(void)umad_send(fd, agent, umad, 256, 0, 0);
			__atomic_store_n(&sh->blast_sent, sh->blast_sent + 1, __ATOMIC_RELAXED);
			if (period) {
				sent++;
				break;
			}
		}
	}
}

void wire_main(Shared *sh, int ctl_fd)
{
	int agent, fd = open_cm("simB", &agent);
	void *umad = calloc(1, umad_size() + 256);

	__atomic_store_n(&sh->wire_ready, 1, __ATOMIC_RELEASE);
	for (;;) {
		struct pollfd p[2] = { { ctl_fd, POLLIN, 0 }, { fd, POLLIN, 0 } };
		uint32_t mode = __atomic_load_n(&sh->wire_mode, __ATOMIC_ACQUIRE);

		if (mode == WIRE_EXIT)
			break;
		if (mode == WIRE_BLAST) {
			blast(sh, fd, agent, umad);
			continue;
		}
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			drain_ctl(ctl_fd);
		for (;;) {
			int len = 256;

			if (umad_recv(fd, umad, &len, 0) < 0)
				break;
			sink_one(sh, fd, agent, umad, now_ns());
		}
	}
	umad_close_port(fd);
	_exit(0);
}

/* ---- the limit probe ---- */

typedef struct ProbeClient {
	int fd;
	bool dirty;
	bool waiting_out; /* polled for EPOLLOUT: no room for more answers */
	size_t in_len;
	size_t out_len; /* bytes in out[] (a frame cut by a short write stays) */
	uint8_t in[PROBE_IN_FRAMES * FRAME_SIZE];
	uint8_t *out;	/* PROBE_OUT_FRAMES frames, allocated on first use */
} ProbeClient;

/* Write what @c has gathered; what does not fit now waits for the next time. */
static void probe_flush(ProbeClient *c)
{
	ssize_t w;

	c->dirty = false;
	if (c->fd < 0 || c->out_len == 0)
		return;
	w = write(c->fd, c->out, c->out_len);
	if (w <= 0)
		return;
	memmove(c->out, c->out + w, c->out_len - (size_t)w);
	c->out_len -= (size_t)w;
}

/* Keep @m's frame for @c's next write (the end of this wake-up), or count
 * it dropped when @c's buffer stays full (its reader is gone or slow). */
static void probe_gather(Shared *sh, ProbeClient *c, const void *m, ProbeClient **dirty,
			 unsigned *ndirty)
{
	if (!c->out)
		c->out = malloc(PROBE_OUT_FRAMES * FRAME_SIZE);
	if (c->out_len + FRAME_SIZE > PROBE_OUT_FRAMES * FRAME_SIZE)
		probe_flush(c);
	if (!c->out || c->fd < 0 || c->out_len + FRAME_SIZE > PROBE_OUT_FRAMES * FRAME_SIZE) {
		__atomic_fetch_add(&sh->probe_rx_dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	memcpy(c->out + c->out_len, m, FRAME_SIZE);
	c->out_len += FRAME_SIZE;
	if (!c->dirty) {
		c->dirty = true;
		dirty[(*ndirty)++] = c;
	}
}

/*
 * Every request gets its response, as the protocol wants of any relay
 * (QEMU waits for it): gathered like inbound MADs and written once per
 * client per wake-up, as the daemon writes them. (Until 2026-11-26 the
 * probe answered only in the QEMU-style rows, which made its TX rows the
 * limit of a relay that does less than the protocol asks.)
 */
static void probe_client_io(Shared *sh, ProbeClient *c, uint32_t id, int fd, int agent,
			    void *umad, int ep, ProbeClient **dirty, unsigned *ndirty)
{
	struct epoll_event ev = { .data.u32 = id };
	size_t off = 0, room;
	ssize_t n;

	/* Read no more requests than there is room to answer: with its
	 * client's socket full, wait for it to drain, as the daemon does. */
	if (c->out_len)
		probe_flush(c);
	room = PROBE_OUT_FRAMES * FRAME_SIZE - c->out_len;
	if (c->fd >= 0 && (room < FRAME_SIZE) != c->waiting_out) {
		c->waiting_out = room < FRAME_SIZE;
		ev.events = c->waiting_out ? EPOLLOUT : EPOLLIN;
		epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
	}
	if (c->fd < 0 || c->waiting_out)
		return;
	if (room > sizeof(c->in) - c->in_len)
		room = sizeof(c->in) - c->in_len;
	n = read(c->fd, c->in + c->in_len, room);
	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
			close(c->fd);
			c->fd = -1;
		}
		return;
	}
	c->in_len += (size_t)n;
	while (c->in_len - off >= FRAME_SIZE) {
		struct rdmacm_mux_msg *m = (struct rdmacm_mux_msg *)(void *)(c->in + off);
		int len = m->umad_len;

		if (m->hdr.op_code == RDMACM_MUX_OP_CODE_MAD && len >= 24 && len <= 256) {
			memcpy(umad, &m->umad.hdr, 64);
			memcpy(umad_get_mad(umad), m->umad.mad, (size_t)len);
			(void)umad_send(fd, agent, umad, len, 0, 0);
		}
		m->hdr.msg_type = RDMACM_MUX_MSG_TYPE_RESP;
		m->hdr.err_code = 0;
		probe_gather(sh, c, m, dirty, ndirty);
		off += FRAME_SIZE;
	}
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
}

void probe_main(Shared *sh, int ctl_fd, const char *sock_path)
{
	static ProbeClient clients[PROBE_MAX_CLIENTS];
	static ProbeClient *dirty[PROBE_MAX_CLIENTS];
	unsigned ndirty = 0;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int agent, fd = open_cm("simA", &agent);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	void *umad = calloc(1, umad_size() + 256);
	void *rx = calloc(1, umad_size() + 256);
	unsigned nclients = 0;
	struct epoll_event ev = { .events = EPOLLIN };

	(void)ctl_fd;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	unlink(sock_path);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 4096) < 0) {
		perror("bench: probe socket");
		_exit(1);
	}
	ev.data.u32 = UINT32_MAX;
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	ev.data.u32 = UINT32_MAX - 1;
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	__atomic_store_n(&sh->probe_ready, 1, __ATOMIC_RELEASE);
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, -1);

		for (int i = 0; i < n; i++) {
			uint32_t id = evs[i].data.u32;

			if (id == UINT32_MAX) {
				int cfd;

				while ((cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
					if (nclients == PROBE_MAX_CLIENTS) {
						close(cfd);
						continue;
					}
					clients[nclients] = (ProbeClient){ .fd = cfd };
					ev.data.u32 = nclients++;
					epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ev);
				}
			} else if (id == UINT32_MAX - 1) {
				for (int k = 0; k < 256; k++) {
					struct rdmacm_mux_msg m;
					int len = 256;
					unsigned route_n;
					ProbeClient *c;

					if (umad_recv(fd, rx, &len, 0) < 0 || nclients == 0)
						break;
					memset(&m, 0, sizeof(m));
					m.hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
					m.hdr.op_code = RDMACM_MUX_OP_CODE_MAD;
					m.umad_len = len;
					memcpy(&m.umad.hdr, rx, 64);
					memcpy(m.umad.mad, umad_get_mad(rx), (size_t)len);
					route_n = __atomic_load_n(&sh->probe_route_n, __ATOMIC_RELAXED);
					if (route_n == 0 || route_n > nclients)
						route_n = nclients;
					c = &clients[mad_remote(m.umad.mad) % route_n];
					probe_gather(sh, c, &m, dirty, &ndirty);
				}
			} else if (id < nclients && clients[id].fd >= 0) {
				probe_client_io(sh, &clients[id], id, fd, agent, umad, ep, dirty,
						&ndirty);
			}
		}
		while (ndirty > 0)
			probe_flush(dirty[--ndirty]);
	}
}
