/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the relay's deferred sends, through relay-driver.h: a MAD
 * that may wait goes to a (stand-in) sender, its response keeps its place
 * among the client's answers, and every way a write can end is answered
 * with the code the protocol documents: written, failed, the sender lost,
 * stopped at its deadline, cut short at a hand-off, no sender at all; and
 * a failed write is logged once. No sockets, no device, no processes; time
 * is the test's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cm-mad.h"
#include "log.h"
#include "protocol-err-codes.h"
#include "relay-driver.h"
#include "test-log-capture.h"
#include "umad-port-fake.h"
#include "unit-test.h"
#include "util.h"

#define MAX_SLOW_SENDS 2

typedef struct Fixture {
	char *sysfs;
	sd_event *event;
	Relay *relay;
	unsigned n_sent;
	int send_result; /* what the port's next write returns */
	struct rdmacm_mux_msg got[64];
	unsigned n_got;
	uint8_t gid[16], peer[16], peer2[16];
	uint32_t c;
} Fixture;

static int port_send(void *userdata, UmadBuffer *buf, size_t len)
{
	Fixture *f = userdata;

	(void)buf;
	(void)len;
	f->n_sent++;
	return f->send_result;
}

static void collect(void *userdata, const struct rdmacm_mux_msg *m)
{
	Fixture *f = userdata;

	g_assert_cmpuint(f->n_got, <, G_N_ELEMENTS(f->got));
	f->got[f->n_got++] = *m;
}

/* Take what the client has queued into f->got. Return: how many. */
static unsigned drain(Fixture *f)
{
	f->n_got = 0;
	relay_driver_drain(f->relay, f->c, collect, f);
	g_assert_null(relay_check_invariants(f->relay));
	return f->n_got;
}

static void send_frame(Fixture *f, const struct rdmacm_mux_msg *m)
{
	g_assert_cmpint(relay_driver_request(f->relay, f->c, m), ==, 0);
	g_assert_null(relay_check_invariants(f->relay));
}

static void reg(Fixture *f, const uint8_t gid[16])
{
	struct rdmacm_mux_msg m = { .hdr.op_code = RDMACM_MUX_OP_CODE_REG };

	memcpy(m.hdr.sgid.raw, gid, 16);
	send_frame(f, &m);
}

/* A REQ from the client's GID to @dest, with comm id @local (the TID's
 * high half carries it too: responses echo the request). */
static void req(Fixture *f, uint32_t local, const uint8_t dest[16])
{
	struct rdmacm_mux_msg m = { .hdr.op_code = RDMACM_MUX_OP_CODE_MAD, .umad_len = 256 };

	memcpy(m.hdr.sgid.raw, f->gid, 16);
	mad_build_req(m.umad.mad, local, f->gid, dest, (uint64_t)local << 32);
	m.umad.hdr.addr.grh_present = 1;
	memcpy(m.umad.hdr.addr.gid, dest, 16);
	send_frame(f, &m);
}

/* The next frame got is the answer to the REQ with comm id @local. */
static void expect_answer(const struct rdmacm_mux_msg *m, uint32_t local, int err)
{
	g_assert_cmpuint(m->hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
	g_assert_cmpuint(m->hdr.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
	g_assert_cmpuint(mad_tid(m->umad.mad) >> 32, ==, local);
	g_assert_cmpint(m->hdr.err_code, ==, err);
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
	const char *const gids[] = { UNIT_TEST_GID_LINK_LOCAL, UNIT_TEST_GID_10_0_1_1, NULL };
	RelayConfig cfg;
	(void)data;

	relay_driver_config(&cfg, 8, 4, 16, 8);
	cfg.max_pending = 16, cfg.max_slow_sends = MAX_SLOW_SENDS, cfg.send_fail_ms = 500;
	for (int i = SESSION_TIMER_NONE + 1; i < SESSION_TIMER_COUNT; i++)
		cfg.timeouts_ms[i] = 60000;

	memset(f, 0, sizeof(*f));
	f->sysfs = unit_test_fake_sysfs("relay-sends-XXXXXX", "fake0", gids);
	g_assert_cmpint(relay_driver_new_fake(&cfg, port_send, f, &f->event, &f->relay), ==, 0);
	g_assert_cmpint(inet_pton(AF_INET6, "::ffff:10.0.1.1", f->gid), ==, 1);
	g_assert_cmpint(inet_pton(AF_INET6, "::ffff:10.0.2.1", f->peer), ==, 1);
	g_assert_cmpint(inet_pton(AF_INET6, "::ffff:10.0.2.2", f->peer2), ==, 1);
	f->c = relay_driver_add_client(f->relay);
	reg(f, f->gid);
	g_assert_cmpuint(drain(f), ==, 1);
	g_assert_cmpint(f->got[0].hdr.err_code, ==, 0);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;

	g_assert_null(relay_check_invariants(f->relay));
	relay_driver_free_fake(f->relay, f->event);
	unit_test_remove_tree(f->sysfs);
}

/* The lines the relay logs (every level) while @f's client sends a REQ
 * that goes to a sender, whose write then fails with @err. */
typedef struct FailedSend {
	Fixture *f;
	int err;
} FailedSend;

static void failed_send(void *arg)
{
	FailedSend *s = arg;

	req(s->f, 7, s->f->peer);
	g_assert_cmpint(relay_driver_send_end(s->f->relay, 0, RELAY_DRIVER_SEND_FAIL, s->err), ==,
			0);
}

static char *log_of_failed_send(Fixture *f, int err)
{
	return test_log_capture(failed_send, &(FailedSend){ f, err });
}

/*
 * A write that fails is said once, as a warning that names the message,
 * the client and the errno; it is counted and answered as usual. (First
 * in this file: the line is rate limited per call site, and later tests
 * fail many writes.)
 */
UNIT_FIXTURE_TEST("/relay-sends/failed-write-logged-once", NULL, fixture_setup,
		  test_failed_write_logged_once)
{
	g_autofree char *said = log_of_failed_send(f, -ENETUNREACH);
	g_auto(GStrv) lines = g_strsplit(said, "\n", -1);
	(void)data;

	g_assert_cmpuint(g_strv_length(lines), ==, 2); /* one line, then "" */
	g_assert_true(g_str_has_prefix(lines[0], "rdmacm-mux: warning: send of REQ for client "));
	g_assert_nonnull(strstr(lines[0], strerror(ENETUNREACH)));
	g_assert_nonnull(strstr(lines[0], "ATTR=REQ"));
	g_assert_cmpuint(drain(f), ==, 1);
	expect_answer(&f->got[0], 7, -ENETUNREACH);
	g_assert_cmpuint(relay_counters(f->relay)->tx_reject[TX_REJECT_SEND_FAILED], ==, 1);
}

/*
 * A first MAD to a destination waits for a sender. Its response keeps its
 * place: the answer to a later request and a MAD from the wire for the
 * client wait behind it, and come in order once the write is done. The
 * next MAD to that destination is written at once, by the loop.
 */
UNIT_FIXTURE_TEST("/relay-sends/response-keeps-its-place", NULL, fixture_setup,
		  test_response_keeps_its_place)
{
	UmadBuffer in = { 0 };
	(void)data;

	req(f, 1, f->peer);
	g_assert_cmpuint(relay_driver_sends_in_flight(f->relay), ==, 1);
	g_assert_cmpuint(relay_sender_queued(f->relay), ==, 1);
	g_assert_cmpuint(f->n_sent, ==, 0);
	/* A REG answered at once, and a REQ for the client from the wire. */
	reg(f, f->peer2);
	in.hdr.addr.grh_present = 1;
	in.hdr.addr.gid_index = 1;
	memcpy(in.hdr.addr.gid, f->peer, 16);
	mad_build_req(in.mad, 0x77, f->peer, f->gid, 0x55);
	relay_driver_wire_mad(f->relay, &in, 256);
	g_assert_cmpuint(drain(f), ==, 0);

	g_assert_cmpint(relay_driver_send_end(f->relay, 0, RELAY_DRIVER_SEND_WRITE, 0), ==, 0);
	g_assert_cmpuint(f->n_sent, ==, 1);
	g_assert_cmpuint(relay_sender_queued(f->relay), ==, 0);
	g_assert_cmpuint(drain(f), ==, 3);
	expect_answer(&f->got[0], 1, 0);
	g_assert_cmpuint(f->got[1].hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
	g_assert_cmpuint(f->got[1].hdr.op_code, ==, RDMACM_MUX_OP_CODE_REG);
	g_assert_cmpuint(f->got[2].hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_REQ);
	g_assert_cmpuint(relay_sender_written(f->relay), ==, 1);

	/* Fast now: the loop writes it itself. */
	req(f, 2, f->peer);
	g_assert_cmpuint(relay_driver_sends_in_flight(f->relay), ==, 0);
	g_assert_cmpuint(f->n_sent, ==, 2);
	g_assert_cmpuint(drain(f), ==, 1);
	expect_answer(&f->got[0], 2, 0);
}

/*
 * Each way a sender's write ends has its answer: the write's own errno,
 * EIO when the sender died in the middle, ETIMEDOUT when it was stopped
 * at its deadline. A refused MAD's new session is undone.
 */
UNIT_FIXTURE_TEST("/relay-sends/every-end-answered", NULL, fixture_setup, test_every_end_answered)
{
	static const struct {
		RelayDriverSendEnd how;
		int err, answer;
	} ends[] = {
		{ RELAY_DRIVER_SEND_FAIL, -EINVAL, RDMACM_MUX_ERR_CODE_EINVAL },
		{ RELAY_DRIVER_SEND_FAIL, -ENODATA, -ENODATA },
		{ RELAY_DRIVER_SEND_LOSE, 0, -EIO },
		{ RELAY_DRIVER_SEND_TIMEOUT, 0, -ETIMEDOUT },
	};
	(void)data;

	for (unsigned i = 0; i < G_N_ELEMENTS(ends); i++) {
		uint8_t dest[16];

		memcpy(dest, f->peer, 16);
		dest[15] = (uint8_t)(0x40 + i); /* a new destination each time */
		req(f, 10 + i, dest);
		g_assert_cmpuint(relay_session_count(f->relay), ==, 1);
		g_assert_cmpuint(relay_driver_sends_in_flight(f->relay), ==, 1);
		g_assert_cmpint(relay_driver_send_end(f->relay, 0, ends[i].how, ends[i].err), ==, 0);
		g_assert_cmpuint(drain(f), ==, 1);
		expect_answer(&f->got[0], 10 + i, ends[i].answer);
		g_assert_cmpuint(relay_session_count(f->relay), ==, 0);
	}
	g_assert_cmpuint(f->n_sent, ==, 0);
	g_assert_cmpuint(relay_counters(f->relay)->tx_reject[TX_REJECT_SEND_FAILED], ==, 4);
	{
		UmadSenderStats st;

		relay_sender_stats(f->relay, &st);
		g_assert_cmpuint(st.lost, ==, 1);
		g_assert_cmpuint(st.timeouts, ==, 1);
	}
}

/*
 * A destination that did not answer in time: the MADs queued behind the
 * one that found out answer ETIMEDOUT with it, and new ones for a while
 * (the negative cache), without a sender.
 */
UNIT_FIXTURE_TEST("/relay-sends/stuck-destination", NULL, fixture_setup, test_stuck_destination)
{
	(void)data;

	req(f, 1, f->peer);
	req(f, 2, f->peer);
	g_assert_cmpuint(relay_driver_sends_in_flight(f->relay), ==, 1);
	g_assert_cmpuint(relay_sender_queued(f->relay), ==, 2);
	g_assert_cmpint(relay_driver_send_end(f->relay, 0, RELAY_DRIVER_SEND_TIMEOUT, 0), ==, 0);
	g_assert_cmpuint(relay_driver_sends_in_flight(f->relay), ==, 0);
	g_assert_cmpuint(drain(f), ==, 2);
	expect_answer(&f->got[0], 1, -ETIMEDOUT);
	expect_answer(&f->got[1], 2, -ETIMEDOUT);
	req(f, 3, f->peer);
	g_assert_cmpuint(relay_driver_sends_in_flight(f->relay), ==, 0);
	g_assert_cmpuint(drain(f), ==, 1);
	expect_answer(&f->got[0], 3, -ETIMEDOUT);
	/* Past the negative cache (500 ms here) it gets a sender again. */
	relay_driver_set_time(f->relay, 1000000 + 600000);
	req(f, 4, f->peer);
	g_assert_cmpuint(relay_driver_sends_in_flight(f->relay), ==, 1);
	g_assert_cmpint(relay_driver_send_end(f->relay, 0, RELAY_DRIVER_SEND_WRITE, 0), ==, 0);
	g_assert_cmpuint(drain(f), ==, 1);
	expect_answer(&f->got[0], 4, 0);
	g_assert_cmpuint(f->n_sent, ==, 1);
}

/* REQ 1 to the peer and REQ 2 to another destination, @d2 (set here), the
 * client's MAX_SLOW_SENDS: it is not read any more, and REQ 3 and a REG
 * wait unread. */
static void fill_slow_sends(Fixture *f, uint8_t d2[16])
{
	memcpy(d2, f->peer, 16);
	d2[15] = 0x99;
	req(f, 1, f->peer);
	req(f, 2, d2);
	g_assert_true(relay_driver_client_paused(f->relay, f->c));
	req(f, 3, f->peer2);
	reg(f, f->peer2);
	g_assert_cmpuint(relay_driver_client_unread(f->relay, f->c), ==, 2);
}

/*
 * A client has at most MAX_SLOW_SENDS MADs with the senders; past them
 * its frames wait unread, and are read and answered, in order, when one
 * is done.
 */
UNIT_FIXTURE_TEST("/relay-sends/slow-sends-pause-reading", NULL, fixture_setup,
		  test_slow_sends_pause_reading)
{
	uint8_t d2[16];
	(void)data;

	fill_slow_sends(f, d2);
	g_assert_cmpuint(relay_driver_sends_in_flight(f->relay), ==, 2);
	/* The second write ends first: its answer waits for the first's,
	 * and the client is read again: REQ 3 takes the free sender. */
	g_assert_cmpint(relay_driver_send_end(f->relay, 1, RELAY_DRIVER_SEND_WRITE, 0), ==, 0);
	g_assert_cmpuint(relay_driver_client_unread(f->relay, f->c), ==, 1);
	g_assert_cmpuint(relay_driver_sends_in_flight(f->relay), ==, 2);
	g_assert_true(relay_driver_client_paused(f->relay, f->c));
	/* The first ends: the REG is read and answered, behind REQ 3's place. */
	g_assert_cmpint(relay_driver_send_end(f->relay, 0, RELAY_DRIVER_SEND_WRITE, 0), ==, 0);
	g_assert_cmpuint(relay_driver_client_unread(f->relay, f->c), ==, 0);
	g_assert_cmpuint(drain(f), ==, 2);
	expect_answer(&f->got[0], 1, 0);
	expect_answer(&f->got[1], 2, 0);
	g_assert_cmpint(relay_driver_send_end(f->relay, 0, RELAY_DRIVER_SEND_WRITE, 0), ==, 0);
	g_assert_cmpuint(drain(f), ==, 2);
	expect_answer(&f->got[0], 3, 0);
	g_assert_cmpuint(f->got[1].hdr.op_code, ==, RDMACM_MUX_OP_CODE_REG);
	g_assert_cmpint(f->got[1].hdr.err_code, ==, 0);
	g_assert_cmpuint(f->n_sent, ==, 3);
}

/* A client that leaves while its MAD is with a sender: the write ends
 * all the same and is counted, and nothing is answered to anyone. */
UNIT_FIXTURE_TEST("/relay-sends/client-leaves-mid-send", NULL, fixture_setup,
		  test_client_leaves_mid_send)
{
	uint64_t tx_before = relay_counters(f->relay)->tx[CM_IDX_REQ];
	(void)data;

	req(f, 1, f->peer);
	req(f, 2, f->peer2);
	relay_driver_remove_client(f->relay, f->c);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 0);
	g_assert_cmpint(relay_driver_send_end(f->relay, 0, RELAY_DRIVER_SEND_WRITE, 0), ==, 0);
	g_assert_cmpint(relay_driver_send_end(f->relay, 0, RELAY_DRIVER_SEND_LOSE, 0), ==, 0);
	g_assert_cmpuint(f->n_sent, ==, 1);
	g_assert_cmpuint(relay_counters(f->relay)->tx[CM_IDX_REQ], ==, tx_before + 1);
	g_assert_cmpuint(relay_counters(f->relay)->tx_reject[TX_REJECT_SEND_FAILED], ==, 1);
	g_assert_cmpuint(relay_sender_queued(f->relay), ==, 0);
}

/*
 * No sender live (none could start): a MAD that would wait for one
 * answers EAGAIN at once (send it again), counted as the senders being
 * busy; a destination the loop writes to itself still works.
 */
UNIT_FIXTURE_TEST("/relay-sends/no-sender", NULL, fixture_setup, test_no_sender)
{
	uint8_t d3[16];
	(void)data;

	memcpy(d3, f->peer, 16);
	d3[15] = 0x33;
	req(f, 1, f->peer);
	g_assert_cmpint(relay_driver_send_end(f->relay, 0, RELAY_DRIVER_SEND_WRITE, 0), ==, 0);
	g_assert_cmpuint(drain(f), ==, 1);
	relay_driver_set_senders(f->relay, 0);
	req(f, 2, f->peer); /* fast: written by the loop */
	req(f, 3, d3);	    /* new: no sender to take it */
	g_assert_cmpuint(relay_driver_sends_in_flight(f->relay), ==, 0);
	g_assert_cmpuint(f->n_sent, ==, 2);
	g_assert_cmpuint(drain(f), ==, 2);
	expect_answer(&f->got[0], 2, 0);
	expect_answer(&f->got[1], 3, -EAGAIN);
	g_assert_cmpuint(relay_counters(f->relay)->tx_reject[TX_REJECT_SEND_BUSY], ==, 1);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 2);
}

/* Queued for a sender when the last one went: EAGAIN, in order. */
UNIT_FIXTURE_TEST("/relay-sends/queued-when-senders-go", NULL, fixture_setup,
		  test_queued_when_senders_go)
{
	(void)data;

	relay_driver_set_senders(f->relay, 1);
	req(f, 1, f->peer);
	req(f, 2, f->peer2); /* waits for the one sender */
	g_assert_cmpuint(relay_sender_queued(f->relay), ==, 2);
	relay_driver_set_senders(f->relay, 0);
	g_assert_cmpuint(relay_sender_queued(f->relay), ==, 1);
	g_assert_cmpint(relay_driver_send_end(f->relay, 0, RELAY_DRIVER_SEND_WRITE, 0), ==, 0);
	g_assert_cmpuint(drain(f), ==, 2);
	expect_answer(&f->got[0], 1, 0);
	expect_answer(&f->got[1], 2, -EAGAIN);
}

/*
 * A planned restart: a write that stalls is cut short (ETIMEDOUT: it may
 * or may not have gone out), a MAD queued behind it was not sent
 * (EAGAIN), and so were the frames the client sent that the relay had not
 * read (EAGAIN). Every request is answered once, in order.
 */
UNIT_FIXTURE_TEST("/relay-sends/handoff-answers-everything", NULL, fixture_setup,
		  test_handoff_answers_everything)
{
	uint8_t d2[16];
	(void)data;

	relay_driver_set_senders(f->relay, 1);
	fill_slow_sends(f, d2); /* REQ 1 stalls in the sender, REQ 2 is queued for it */
	relay_driver_handoff(f->relay);
	g_assert_cmpuint(relay_sender_queued(f->relay), ==, 0);
	g_assert_cmpuint(relay_driver_client_unread(f->relay, f->c), ==, 0);
	g_assert_cmpuint(drain(f), ==, 4);
	expect_answer(&f->got[0], 1, -ETIMEDOUT);
	expect_answer(&f->got[1], 2, -EAGAIN);
	expect_answer(&f->got[2], 3, -EAGAIN);
	g_assert_cmpuint(f->got[3].hdr.op_code, ==, RDMACM_MUX_OP_CODE_REG);
	g_assert_cmpint(f->got[3].hdr.err_code, ==, -EAGAIN);
	g_assert_cmpuint(f->n_sent, ==, 0);
	/* Nothing more goes to a sender afterwards. */
	req(f, 4, d2);
	g_assert_cmpuint(drain(f), ==, 1);
	expect_answer(&f->got[0], 4, -EAGAIN);
}

/* The wire id (LocalCommID) of write @i in flight. */
static uint32_t in_flight_wire_id(Fixture *f, unsigned i)
{
	const UmadBuffer *b = relay_driver_send_peek(f->relay, i, NULL);

	g_assert_nonnull(b);
	return get_be32(b->mad + 24);
}

/*
 * relay_driver_reset(), a fuzzer's way from one input to the next, leaves
 * nothing of the run before: no client, GID, session or count; client ids,
 * wire ids (from the same seed) and the clock start over as in a new
 * relay; the senders' policy forgot the destination that timed out (its
 * negative cache would still refuse it at 1 s); the senders are as many
 * as at the start. A relay it cannot bring back (handed off) says so.
 */
UNIT_FIXTURE_TEST("/relay-sends/reset-as-new", NULL, fixture_setup, test_reset_as_new)
{
	const RelayCounters zero = { 0 };
	uint32_t first = f->c, wire;
	(void)data;

	relay_driver_seed_wire_ids(f->relay, 1);
	req(f, 1, f->peer);
	g_assert_cmpuint(relay_driver_sends_in_flight(f->relay), ==, 1);
	wire = in_flight_wire_id(f, 0);
	g_assert_cmpint(relay_driver_send_end(f->relay, 0, RELAY_DRIVER_SEND_TIMEOUT, 0), ==, 0);
	g_assert_cmpuint(drain(f), ==, 1);
	expect_answer(&f->got[0], 1, -ETIMEDOUT);
	relay_driver_set_senders(f->relay, 1);
	relay_driver_set_time(f->relay, 1000000 + 300000);

	g_assert_cmpint(relay_driver_reset(f->relay), ==, 0);
	g_assert_null(relay_check_invariants(f->relay));
	g_assert_cmpuint(relay_client_count(f->relay), ==, 0);
	g_assert_cmpuint(relay_gid_count(f->relay), ==, 0);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 0);
	g_assert_cmpint(memcmp(relay_counters(f->relay), &zero, sizeof(zero)), ==, 0);

	relay_driver_seed_wire_ids(f->relay, 1);
	f->c = relay_driver_add_client(f->relay);
	g_assert_cmpuint(f->c, ==, first);
	reg(f, f->gid);
	g_assert_cmpuint(drain(f), ==, 1);
	g_assert_cmpint(f->got[0].hdr.err_code, ==, 0);
	req(f, 1, f->peer);
	g_assert_cmpuint(relay_driver_sends_in_flight(f->relay), ==, 1);
	g_assert_cmpuint(in_flight_wire_id(f, 0), ==, wire);
	req(f, 2, f->peer2);
	g_assert_cmpuint(relay_driver_sends_in_flight(f->relay), ==, 2);
	while (relay_driver_sends_in_flight(f->relay) > 0)
		g_assert_cmpint(relay_driver_send_end(f->relay, 0, RELAY_DRIVER_SEND_WRITE, 0), ==, 0);
	g_assert_cmpuint(drain(f), ==, 2);
	expect_answer(&f->got[0], 1, 0);
	expect_answer(&f->got[1], 2, 0);

	relay_driver_handoff(f->relay);
	g_assert_cmpint(relay_driver_reset(f->relay), ==, -EBUSY);
}

/* The answer PROTOCOL.md's err_code table gives a base-protocol client
 * for -@errnum. */
static int32_t protocol_answer(int errnum)
{
	for (size_t i = 0; i < G_N_ELEMENTS(protocol_err_codes); i++)
		if (protocol_err_codes[i].errnum == errnum)
			return protocol_err_codes[i].code;
	return -errnum;
}

/*
 * Whatever errno a write ends with, the client gets the err_code that
 * PROTOCOL.md's table says: a positive code for the errnos it lists, the
 * negative errno for any other; and with CAP_ERRNO the negative errno
 * always.
 */
UNIT_FIXTURE_TEST("/relay-sends/answers-as-protocol-md-says", NULL, fixture_setup,
		  test_answers_as_protocol_md_says)
{
	struct rdmacm_mux_msg hello = { .hdr.op_code = RDMACM_MUX_OP_CODE_HELLO, .umad_len = 32 };
	struct rdmacm_mux_hello h = { .magic = RDMACM_MUX_HELLO_MAGIC, .version_major = 1,
				      .capabilities = RDMACM_MUX_CAP_ERRNO };
	unsigned k = 0;
	(void)data;

	for (int dialect = 0; dialect < 2; dialect++) {
		if (dialect == 1) {
			memcpy(hello.umad.mad, &h, sizeof(h));
			send_frame(f, &hello);
			g_assert_cmpuint(drain(f), ==, 1);
			g_assert_cmpint(f->got[0].hdr.err_code, ==, 0);
		}
		for (int errnum = 1; errnum < 134; errnum++, k++) {
			uint8_t dest[16];

			memcpy(dest, f->peer, 16);
			dest[13] = (uint8_t)(k >> 8);
			dest[14] = (uint8_t)k;
			req(f, 0x1000 + k, dest);
			g_assert_cmpint(relay_driver_send_end(f->relay, 0, RELAY_DRIVER_SEND_FAIL, -errnum),
					==, 0);
			g_assert_cmpuint(drain(f), ==, 1);
			expect_answer(&f->got[0], 0x1000 + k, dialect ? -errnum : protocol_answer(errnum));
		}
	}
}

UNIT_TEST_MAIN()
