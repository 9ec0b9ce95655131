/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the relay's client sockets in its epoll set (relay.c):
 * real socket pairs, the relay's own sd-event loop run step by step, a
 * fake umad port. What they check is that the loop goes idle when nothing
 * is left to do, and serves what comes:
 *   - a dropped client whose socket lives on in another fd (PID 1's fd
 *     store holds one) leaves nothing in the set that wakes the loop;
 *   - one client alone, with part of a frame waiting, does not keep the
 *     loop busy, and its frame is answered once the rest comes;
 *   - one client, then two, then one again is served each time.
 */
#include <arpa/inet.h>
#include <glib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "relay-driver.h"
#include "relay-internal.h"
#include "umad-port-fake.h"
#include "util.h"
#include "unit-test.h"

/* Enough turns of the loop for everything that is ready to be served. */
#define TURNS 64

typedef struct Fixture {
	sd_event *event;
	Relay *relay;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
	/* fe80::1, ::ffff:10.0.1.1, ::ffff:10.0.1.2 */
	static const uint8_t gids[3][16] = {
		{ 0xfe, 0x80, [15] = 1 },
		{ [10] = 0xff, [11] = 0xff, [12] = 10, [13] = 0, [14] = 1, [15] = 1 },
		{ [10] = 0xff, [11] = 0xff, [12] = 10, [13] = 0, [14] = 1, [15] = 2 },
	};
	UmadPort *p = NULL;
	/* a few clients, up to two GIDs each, no session */
	RelayConfig cfg;
	(void)data;

	relay_driver_config(&cfg, 4, 2, 1, 2);

	memset(f, 0, sizeof(*f));
	/* no MAD this file sends needs to be seen */
	g_assert_cmpint(umad_port_new_fake_gids("fake0", 1, true, gids, 3, NULL, NULL, &p), ==, 0);
	g_assert_cmpint(sd_event_new(&f->event), >=, 0);
	/* the relay of the daemon, with stand-in senders */
	g_assert_cmpint(relay_driver_new(f->event, p, &cfg, 1, &f->relay), ==, 0);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;

	relay_free(f->relay);
	sd_event_unref(f->event);
}

/* Turn the loop without waiting until nothing is ready: true if it got
 * there within TURNS turns (a loop kept busy never does). */
static bool run_until_idle(Fixture *f)
{
	for (int i = 0; i < TURNS; i++) {
		int r = sd_event_run(f->event, 0);

		g_assert_cmpint(r, >=, 0);
		if (r == 0)
			return true;
	}
	return false;
}

/* A client socket served by the relay; returns the test's end. */
static int connect_client(Fixture *f)
{
	int sv[2];

	g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
	g_assert_cmpint(relay_add_client(f->relay, sv[1]), ==, 0);
	return sv[0];
}

static void reg_frame(struct rdmacm_mux_msg *m, const char *gid)
{
	memset(m, 0, sizeof(*m));
	m->hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
	m->hdr.op_code = RDMACM_MUX_OP_CODE_REG;
	g_assert_cmpint(inet_pton(AF_INET6, gid, m->hdr.sgid.raw), ==, 1);
}

/* Turn the loop until @fd has a whole response to read; its error code. */
static int read_response(Fixture *f, int fd)
{
	struct rdmacm_mux_msg m;
	size_t got = 0;

	for (int i = 0; i < TURNS && got < sizeof(m); i++) {
		ssize_t n;

		g_assert_cmpint(sd_event_run(f->event, 0), >=, 0);
		n = recv(fd, (uint8_t *)&m + got, sizeof(m) - got, MSG_DONTWAIT);
		if (n > 0)
			got += (size_t)n;
	}
	g_assert_cmpuint(got, ==, sizeof(m));
	g_assert_cmpuint(m.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
	return (int)m.hdr.err_code;
}

static void send_all(int fd, const void *buf, size_t len)
{
	g_assert_cmpint(send(fd, buf, len, MSG_NOSIGNAL), ==, (ssize_t)len);
}

/* Register @gid on the client socket @fd, in one write, and see it granted. */
static void register_gid(Fixture *f, int fd, const char *gid)
{
	struct rdmacm_mux_msg m;

	reg_frame(&m, gid);
	send_all(fd, &m, sizeof(m));
	g_assert_cmpint(read_response(f, fd), ==, 0);
}

UNIT_FIXTURE_TEST("/relay-sockets/dropped-client-socket-held-elsewhere", NULL, fixture_setup,
		  test_dropped_held_elsewhere)
{
	int sv[2], copy;
	(void)data;

	g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
	/* the fd store's copy of the socket, as PID 1 keeps it */
	copy = dup(sv[1]);
	g_assert_cmpint(copy, >=, 0);
	g_assert_cmpint(relay_add_client(f->relay, sv[1]), ==, 0);
	register_gid(f, sv[0], "::ffff:10.0.1.1");
	g_assert_true(run_until_idle(f));
	/* The client hangs up: the relay reads the EOF and drops it. */
	close(sv[0]);
	g_assert_true(run_until_idle(f));
	g_assert_cmpuint(relay_client_count(f->relay), ==, 0);
	/* The hung-up socket is still open through the copy, readable for
	 * ever: nothing of it may be left in the relay's set. */
	g_assert_true(run_until_idle(f));
	close(copy);
}

UNIT_FIXTURE_TEST("/relay-sockets/one-client-part-of-a-frame", NULL, fixture_setup,
		  test_one_client_partial)
{
	struct rdmacm_mux_msg m;
	int fd = connect_client(f);
	(void)data;

	register_gid(f, fd, "::ffff:10.0.1.1");
	g_assert_true(run_until_idle(f));

	/* Half a frame: the relay takes none of it and waits for the rest
	 * without turning the loop for it again and again. */
	reg_frame(&m, "::ffff:10.0.1.2");
	send_all(fd, &m, sizeof(m) / 2);
	g_assert_true(run_until_idle(f));
	send_all(fd, (uint8_t *)&m + sizeof(m) / 2, sizeof(m) - sizeof(m) / 2);
	g_assert_cmpint(read_response(f, fd), ==, 0);
	g_assert_true(run_until_idle(f));
	close(fd);
	g_assert_true(run_until_idle(f));
	g_assert_cmpuint(relay_client_count(f->relay), ==, 0);
}

UNIT_FIXTURE_TEST("/relay-sockets/one-two-one-clients", NULL, fixture_setup, test_one_two_one)
{
	int a = connect_client(f), b;
	(void)data;

	register_gid(f, a, "::ffff:10.0.1.1");
	b = connect_client(f);
	register_gid(f, b, "::ffff:10.0.1.2");
	/* the first goes; the second, alone again, is still served */
	close(a);
	g_assert_true(run_until_idle(f));
	g_assert_cmpuint(relay_client_count(f->relay), ==, 1);
	register_gid(f, b, "::ffff:10.0.1.1");
	/* and its end is seen */
	close(b);
	g_assert_true(run_until_idle(f));
	g_assert_cmpuint(relay_client_count(f->relay), ==, 0);
}

UNIT_TEST_MAIN()
