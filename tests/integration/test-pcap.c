/* SPDX-License-Identifier: MIT */
/*
 * Integration test of --trace-pcap: two daemons on the simulated fabric
 * write capture files during a handshake with disconnect, a SIDR query and
 * a rejected REQ; tshark must decode every packet as the right CM message,
 * in order, with the wire comm ids and the GIDs in the direction the MAD
 * travelled. One daemon is killed with SIGKILL first: its file must still
 * be whole. Skipped (exit 77) only when tshark is not installed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "unit-test.h"

typedef struct Frame {
	char *cm;	 /* "ConnectRequest", ... */
	char *src, *dst; /* GIDs from the GRH */
	int64_t local, remote; /* comm ids, -1 when the dissector shows none */
	char *payload;	 /* "MAD Data Payload" hex, for the SIDR messages */
} Frame;

static void frame_free(gpointer p)
{
	Frame *f = p;

	g_free(f->cm);
	g_free(f->src);
	g_free(f->dst);
	g_free(f->payload);
	g_free(f);
}

static char *field(const char *frame, const char *label)
{
	g_autofree char *re = g_strdup_printf("^ +%s: (\\S+)", label);
	g_autoptr(GRegex) r = g_regex_new(re, G_REGEX_MULTILINE, 0, NULL);
	g_autoptr(GMatchInfo) m = NULL;

	if (!g_regex_match(r, frame, 0, &m))
		return NULL;
	return g_match_info_fetch(m, 1);
}

static int64_t hex_field(const char *frame, const char *label)
{
	g_autofree char *v = field(frame, label);

	return v ? (int64_t)g_ascii_strtoull(v, NULL, 16) : -1;
}

/* Run `tshark -r FILE -V` and pick the facts out of every frame. */
static GPtrArray *tshark_frames(const char *file)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *out = NULL, *errout = NULL;
	g_auto(GStrv) frames = NULL;
	GPtrArray *list = g_ptr_array_new_with_free_func(frame_free);
	const char *argv[] = { "tshark", "-r", file, "-V", NULL };
	int status;

	if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out,
			  &errout, &status, &err))
		g_error("cannot run tshark: %s", err->message);
	if (!g_spawn_check_wait_status(status, &err))
		g_error("tshark -r %s failed: %s\n%s", file, err->message, errout);
	if (strstr(out, "Malformed") || strstr(out, "[Expert Info (Error"))
		g_error("tshark reports a malformed packet:\n%s", out);

	frames = g_regex_split_simple("^Frame \\d+: ", out, G_REGEX_MULTILINE, 0);
	for (char **p = frames; *p; p++) {
		g_autoptr(GRegex) r = NULL;
		g_autoptr(GMatchInfo) m = NULL;
		Frame *f;

		if (!strstr(*p, "InfiniBand"))
			continue; /* text before the first frame */
		f = g_new0(Frame, 1);
		r = g_regex_new("^    CM (\\w+)", G_REGEX_MULTILINE, 0, NULL);
		if (!g_regex_match(r, *p, 0, &m))
			g_error("a frame without a CM message:\n%s", *p);
		f->cm = g_match_info_fetch(m, 1);
		f->src = field(*p, "Source GID");
		f->dst = field(*p, "Destination GID");
		f->local = hex_field(*p, "Local Communication ID");
		f->remote = hex_field(*p, "Remote Communication ID");
		f->payload = field(*p, "MAD Data Payload");
		g_assert_true(strstr(*p, "Opcode: Unreliable Datagram (UD) - SEND only") != NULL);
		g_assert_true(strstr(*p, "Queue Key: 0x0000000080010000") != NULL);
		g_assert_true(strstr(*p, "Management Class: 0x07") != NULL);
		g_ptr_array_add(list, f);
	}
	return list;
}

typedef struct Expect {
	const char *cm;
	bool from_a; /* sent by the VM on host A */
	int64_t local, remote;
	int64_t request_id; /* SIDR: the RequestID at the start of the payload */
} Expect;

static void check_file(const char *file, const Expect *want, size_t n, const Vm *a, const Vm *b)
{
	g_autoptr(GPtrArray) frames = tshark_frames(file);
	char ga[64], gb[64];

	g_assert_nonnull(inet_ntop(AF_INET6, a->gid, ga, sizeof(ga)));
	g_assert_nonnull(inet_ntop(AF_INET6, b->gid, gb, sizeof(gb)));
	if (frames->len != n)
		g_error("%s: %u frames, expected %zu", file, frames->len, n);
	for (size_t i = 0; i < n; i++) {
		const Frame *f = g_ptr_array_index(frames, i);
		const Expect *e = &want[i];

		if (g_strcmp0(f->cm, e->cm) != 0)
			g_error("%s frame %zu: CM %s, expected %s", file, i + 1, f->cm, e->cm);
		g_assert_cmpstr(f->src, ==, e->from_a ? ga : gb);
		g_assert_cmpstr(f->dst, ==, e->from_a ? gb : ga);
		if (e->request_id >= 0) {
			g_autofree char *id = g_strdup_printf("%08" G_GINT64_MODIFIER "x",
							      e->request_id);
			g_assert_nonnull(f->payload);
			g_assert_true(g_str_has_prefix(f->payload, id));
			continue;
		}
		if (e->local >= 0)
			g_assert_cmphex(f->local, ==, e->local);
		if (e->remote >= 0)
			g_assert_cmphex(f->remote, ==, e->remote);
	}
}

static void xfer(Vm *from, Vm *to, const uint8_t mad[256], struct rdmacm_mux_inbound *in)
{
	g_assert_cmpint(vm_send(from, to->gid, mad), ==, 0);
	vm_expect(to, mad_attr(mad), in);
}

UNIT_TEST("/pcap/tshark-decodes", test_pcap)
{
	Fabric *fab = fabric_new("two-hosts");
	g_autofree char *pa = g_build_filename(fab->dir, "a.pcap", NULL);
	g_autofree char *pb = g_build_filename(fab->dir, "b.pcap", NULL);
	const char *xa[] = { "--trace-pcap", pa, NULL };
	const char *xb[] = { "--trace-pcap", pb, NULL };
	Daemon *da = daemon_start(fab, "simA", xa);
	Daemon *db = daemon_start(fab, "simB", xb);
	Vm *a = vm_new(da, "::ffff:10.0.1.1", "a");
	Vm *b = vm_new(db, "::ffff:10.0.2.1", "b");
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];
	uint32_t wa, wp, ws, wr;

	/* handshake and disconnect */
	mad_build_req(mad, 7, a->gid, b->gid, 0x10);
	xfer(a, b, mad, &in);
	wa = mad_local(in.mad);
	mad_build(mad, CM_REP, 9, wa, 0x11);
	xfer(b, a, mad, &in);
	wp = mad_local(in.mad);
	mad_build(mad, CM_RTU, 7, wp, 0x12);
	xfer(a, b, mad, &in);
	mad_build(mad, CM_DREQ, 7, wp, 0x13);
	xfer(a, b, mad, &in);
	mad_build(mad, CM_DREP, 9, wa, 0x14);
	xfer(b, a, mad, &in);
	/* a refused MAD is not in the file */
	mad_build(mad, CM_RTU, 1234, 5678, 0x15);
	g_assert_cmpint(vm_send(a, b->gid, mad), ==, -ENOENT);
	/* SIDR */
	mad_build(mad, CM_SIDR_REQ, 33, 0, 0x16);
	xfer(a, b, mad, &in);
	ws = mad_local(in.mad);
	mad_build(mad, CM_SIDR_REP, ws, 0, 0x17);
	mad_set_sidr_rep_qpn(mad, 0x03);
	xfer(b, a, mad, &in);
	/* a rejected REQ */
	mad_build_req(mad, 8, a->gid, b->gid, 0x18);
	xfer(a, b, mad, &in);
	wr = mad_local(in.mad);
	mad_build(mad, CM_REJ, 0, wr, 0x19);
	mad_set_rej(mad, 0, 28);
	xfer(b, a, mad, &in);

	/* The same conversation in both files, wire ids only. */
	const Expect want[] = {
		/* A REQ has no RemoteCommID field. */
		{ "ConnectRequest", true, wa, -1, -1 },
		{ "ConnectReply", false, wp, wa, -1 },
		{ "ReadyToUse", true, wa, wp, -1 },
		{ "DisconnectRequest", true, wa, wp, -1 },
		{ "DisconnectReply", false, wp, wa, -1 },
		{ "ServiceIDResReq", true, -1, -1, ws },
		{ "ServiceIDResReqResp", false, -1, -1, ws },
		{ "ConnectRequest", true, wr, -1, -1 },
		{ "ConnectReject", false, -1, wr, -1 },
	};

	/* Killed without warning: the file is whole all the same. */
	daemon_kill(da);
	check_file(pa, want, G_N_ELEMENTS(want), a, b);
	g_assert_cmpint(daemon_stop(db), ==, 0);
	check_file(pb, want, G_N_ELEMENTS(want), a, b);

	vm_free(a);
	vm_free(b);
	daemon_free(da);
	daemon_free(db);
	fabric_free(fab);
}

int main(int argc, char **argv)
{
	g_autofree char *tshark = g_find_program_in_path("tshark");

	if (!tshark) {
		fprintf(stderr, "SKIP: tshark is not installed (scripts/setup.sh installs it)\n");
		return 77; /* meson: skipped */
	}
	g_test_init(&argc, &argv, NULL);
	unit_test_add_registered();
	return g_test_run();
}
