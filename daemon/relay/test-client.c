/* SPDX-License-Identifier: MIT */
/* Unit tests of a client's input framing over a real socket pair: whole
 * frames only, read ahead of time or on demand, and the end of the stream
 * reported only after every whole frame before it. */
#include <errno.h>
#include <glib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "unit-test.h"

typedef struct Pair {
	Client c;
	int peer;
} Pair;

static void pair_open(Pair *p)
{
	int sv[2];

	g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
	client_init(&p->c, sv[0], 16, 16);
	p->peer = sv[1];
}

static void pair_close(Pair *p)
{
	client_deinit(&p->c);
	if (p->peer >= 0)
		close(p->peer);
}

/* Write @n frames whose op codes are @first, @first + 1, ... */
static void send_frames(int fd, uint32_t first, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct rdmacm_mux_msg m;

		memset(&m, 0, sizeof(m));
		m.hdr.op_code = first + i;
		g_assert_cmpint(write(fd, &m, sizeof(m)), ==, (ssize_t)sizeof(m));
	}
}

/* The next whole frame, copied out: client_next_frame() as the relay
 * calls it, with the frame kept past the next read. */
static int read_frame(Client *c, struct rdmacm_mux_msg *out)
{
	struct rdmacm_mux_msg *frame;
	int e = client_next_frame(c, &frame);

	if (e == 1)
		memcpy(out, frame, sizeof(*out));
	return e;
}

UNIT_TEST("/client/read-ahead-then-frames", test_read_ahead_then_frames)
{
	Pair p;
	struct rdmacm_mux_msg m;
	const struct rdmacm_mux_msg *peeked;

	pair_open(&p);
	send_frames(p.peer, 100, 3);
	g_assert_cmpint(client_fill_input(&p.c), ==, 0);
	g_assert_true(client_take_refill(&p.c));
	g_assert_cmpuint(client_peek_frames(&p.c, &peeked), ==, 3);
	g_assert_cmpuint(peeked[2].hdr.op_code, ==, 102);
	/* a second fill with whole frames buffered reads nothing */
	send_frames(p.peer, 103, 1);
	g_assert_cmpint(client_fill_input(&p.c), ==, 0);
	g_assert_false(client_take_refill(&p.c));
	g_assert_cmpuint(client_peek_frames(&p.c, &peeked), ==, 3);
	for (uint32_t op = 100; op < 103; op++) {
		g_assert_cmpint(read_frame(&p.c, &m), ==, 1);
		g_assert_cmpuint(m.hdr.op_code, ==, op);
	}
	/* the read ahead came back short: the batch ends here ... */
	g_assert_cmpint(read_frame(&p.c, &m), ==, 0);
	/* ... and the next one reads the frame that came since */
	g_assert_cmpint(read_frame(&p.c, &m), ==, 1);
	g_assert_cmpuint(m.hdr.op_code, ==, 103);
	g_assert_cmpint(read_frame(&p.c, &m), ==, 0);
	pair_close(&p);
}

UNIT_TEST("/client/end-after-buffered-frames", test_end_after_buffered_frames)
{
	Pair p;
	struct rdmacm_mux_msg m;

	pair_open(&p);
	send_frames(p.peer, 1, 2);
	close(p.peer);
	p.peer = -1;
	g_assert_cmpint(client_fill_input(&p.c), ==, 0);
	g_assert_cmpint(read_frame(&p.c, &m), ==, 1);
	g_assert_cmpint(read_frame(&p.c, &m), ==, 1);
	g_assert_cmpuint(m.hdr.op_code, ==, 2);
	/* the short read ended one batch; the next finds the end */
	g_assert_cmpint(read_frame(&p.c, &m), ==, 0);
	g_assert_cmpint(read_frame(&p.c, &m), ==, -EPIPE);
	g_assert_false(client_has_partial_input(&p.c));
	/* and keeps reporting it */
	g_assert_cmpint(client_fill_input(&p.c), ==, -EPIPE);
	g_assert_cmpint(read_frame(&p.c, &m), ==, -EPIPE);
	pair_close(&p);
}

UNIT_TEST("/client/cut-frame-at-end", test_cut_frame_at_end)
{
	Pair p;
	struct rdmacm_mux_msg m;
	uint8_t half[sizeof(m) / 2];

	pair_open(&p);
	send_frames(p.peer, 1, 1);
	memset(half, 0xab, sizeof(half));
	g_assert_cmpint(write(p.peer, half, sizeof(half)), ==, (ssize_t)sizeof(half));
	close(p.peer);
	p.peer = -1;
	g_assert_cmpint(read_frame(&p.c, &m), ==, 1);
	g_assert_cmpint(read_frame(&p.c, &m), ==, 0);
	g_assert_cmpint(read_frame(&p.c, &m), ==, -EPIPE);
	g_assert_true(client_has_partial_input(&p.c));
	pair_close(&p);
}

UNIT_TEST("/client/frame-in-pieces", test_frame_in_pieces)
{
	Pair p;
	struct rdmacm_mux_msg m, out;
	const uint8_t *bytes = (const uint8_t *)&m;

	pair_open(&p);
	memset(&m, 0, sizeof(m));
	m.hdr.op_code = 42;
	/* a piece at a time: no frame, no fresh input, no error */
	for (size_t off = 0; off < sizeof(m); off += 100) {
		size_t n = MIN((size_t)100, sizeof(m) - off);

		g_assert_cmpint(client_fill_input(&p.c), ==, 0);
		g_assert_false(client_take_refill(&p.c));
		g_assert_cmpint(read_frame(&p.c, &out), ==, 0);
		g_assert_cmpint(write(p.peer, bytes + off, n), ==, (ssize_t)n);
	}
	g_assert_cmpint(client_fill_input(&p.c), ==, 0);
	g_assert_true(client_take_refill(&p.c));
	g_assert_cmpint(read_frame(&p.c, &out), ==, 1);
	g_assert_cmpuint(out.hdr.op_code, ==, 42);
	pair_close(&p);
}

/*
 * Part of a frame is never taken from the socket: if this process died
 * now, a successor given the same socket would read the whole frame.
 */
UNIT_TEST("/client/partial-frame-stays-in-socket", test_partial_frame_stays_in_socket)
{
	Pair p;
	struct rdmacm_mux_msg m, out;
	const uint8_t *bytes = (const uint8_t *)&m;
	int waiting = 0, fd;

	pair_open(&p);
	memset(&m, 0, sizeof(m));
	m.hdr.op_code = 7;
	g_assert_cmpint(write(p.peer, bytes, 100), ==, 100);
	g_assert_cmpint(read_frame(&p.c, &out), ==, 0);
	g_assert_cmpint(client_fill_input(&p.c), ==, 0);
	g_assert_true(p.c.input_partial);
	g_assert_cmpint(ioctl(p.c.fd, FIONREAD, &waiting), ==, 0);
	g_assert_cmpint(waiting, ==, 100);
	g_assert_false(client_has_partial_input(&p.c));

	/* A successor with a fresh Client on the same socket (a copy of the
	 * fd, as the fd store keeps one). */
	fd = dup(p.c.fd);
	g_assert_cmpint(fd, >=, 0);
	client_deinit(&p.c);
	client_init(&p.c, fd, 16, 16);
	g_assert_cmpint(write(p.peer, bytes + 100, sizeof(m) - 100), ==,
			(ssize_t)(sizeof(m) - 100));
	g_assert_cmpint(read_frame(&p.c, &out), ==, 1);
	g_assert_false(p.c.input_partial);
	g_assert_cmpuint(out.hdr.op_code, ==, 7);
	pair_close(&p);
}

/* A client that sends one frame at a time keeps the small buffer; one that
 * keeps many waiting gets the big one, and each fill takes a whole batch,
 * in order, with the rest left in the socket. */
UNIT_TEST("/client/input-grows-for-a-busy-client", test_input_grows_for_a_busy_client)
{
	Pair p;
	const struct rdmacm_mux_msg *peeked;
	struct rdmacm_mux_msg *f;
	unsigned next = 0;
	int waiting = 0;

	pair_open(&p);
	g_assert_cmpuint(client_peek_frames(&p.c, &peeked), ==, 0);
	send_frames(p.peer, 0, 1);
	g_assert_cmpint(client_fill_input(&p.c), ==, 0);
	g_assert_cmpuint(client_peek_frames(&p.c, &peeked), ==, 1);
	g_assert_cmpuint(p.c.in_cap, ==, CLIENT_INPUT_FRAMES_FIRST);
	g_assert_cmpint(client_next_frame(&p.c, &f), ==, 1);
	g_assert_cmpuint(f->hdr.op_code, ==, next++);

	send_frames(p.peer, next, 100);
	g_assert_cmpint(client_fill_input(&p.c), ==, 0);
	g_assert_cmpuint(p.c.in_cap, ==, CLIENT_INPUT_FRAMES);
	g_assert_cmpuint(client_peek_frames(&p.c, &peeked), ==, CLIENT_INPUT_FRAMES);
	g_assert_cmpint(ioctl(p.c.fd, FIONREAD, &waiting), ==, 0);
	g_assert_cmpint(waiting, ==, (101 - 1 - CLIENT_INPUT_FRAMES) * (int)sizeof(*f));
	/* All 100, in order, over two fills. */
	while (next < 101) {
		int r = client_next_frame(&p.c, &f);

		g_assert_cmpint(r, ==, 1);
		g_assert_cmpuint(f->hdr.op_code, ==, next++);
	}
	g_assert_cmpint(client_next_frame(&p.c, &f), ==, 0);
	g_assert_cmpuint(p.c.in_cap, ==, CLIENT_INPUT_FRAMES);
	pair_close(&p);
}

UNIT_TEST_MAIN()
