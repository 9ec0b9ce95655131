/* SPDX-License-Identifier: MIT */
/* Unit tests of --trace-pcap: the synthesized InfiniBand packet, its CRCs,
 * the file layout, and what a write error does. */
#include <arpa/inet.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "pcap-writer.h"
#include "util.h"
#include "unit-test.h"

#define REC_LEN (16 + PCAP_ERF_HDR_LEN + PCAP_IB_PACKET_LEN)
/* See test_crcs(). */
#define ICRC_EXPECTED 0xbe5764fcu
#define VCRC_EXPECTED 0x1106u

typedef struct Sample {
	uint8_t mad[256];
	uint8_t local[16], remote[16];
	struct rdmacm_mux_umad_hdr hdr;
	RelayEvent ev;
} Sample;

/* A relayed TX REP from ::ffff:10.0.1.1 to ::ffff:10.0.2.1. */
static void sample_init(Sample *s, bool rx)
{
	memset(s, 0, sizeof(*s));
	s->mad[0] = 1;
	s->mad[1] = 0x07;
	s->mad[2] = 2;
	s->mad[3] = 0x03;
	put_be32(s->mad + 12, 0x1234);
	s->mad[17] = 0x13;
	put_be32(s->mad + 24, 0xaabbccdd);
	put_be32(s->mad + 28, 0x11223344);
	g_assert_cmpint(gid_from_string("::ffff:10.0.1.1", s->local), ==, 0);
	g_assert_cmpint(gid_from_string("::ffff:10.0.2.1", s->remote), ==, 0);
	s->hdr.addr.lid = htons(7);
	s->hdr.addr.sl = 3;
	s->hdr.addr.hop_limit = 0; /* the daemon's default applies */
	s->hdr.addr.traffic_class = 0x20;
	s->hdr.addr.flow_label = htonl(0x12345);
	s->ev = (RelayEvent){ .dev = "simA", .port = 1, .realtime_usec = 1700000000123456ull,
			      .rx = rx, .client_id = 1, .attr = 0x13, .local_gid = s->local,
			      .remote_gid = s->remote, .hdr = &s->hdr, .mad = s->mad,
			      .mad_len = 256 };
}

UNIT_TEST("/pcap-writer/packet-layout", test_packet_layout)
{
	Sample s;
	uint8_t p[PCAP_IB_PACKET_LEN];
	const uint8_t *grh = p + 8, *bth = grh + 40, *deth = bth + 12, *mad = deth + 8;

	sample_init(&s, false);
	g_assert_cmpuint(pcap_ib_packet_build(&s.ev, 5, 42, p), ==, PCAP_IB_PACKET_LEN);
	/* LRH: SL 3, LNH = GRH; TX goes from our LID 5 to the peer's 7;
	 * PktLen counts 4-byte words up to the VCRC. */
	g_assert_cmpuint(p[0], ==, 0x00);
	g_assert_cmpuint(p[1], ==, 0x33);
	g_assert_cmpuint(get_be16(p + 2), ==, 7);
	g_assert_cmpuint(get_be16(p + 4), ==, (PCAP_IB_PACKET_LEN - 2) / 4);
	g_assert_cmpuint(get_be16(p + 6), ==, 5);
	/* GRH */
	g_assert_cmpuint(get_be32(grh), ==, 6u << 28 | 0x20u << 20 | 0x12345u);
	g_assert_cmpuint(get_be16(grh + 4), ==, 12 + 8 + 256 + 4);
	g_assert_cmpuint(grh[6], ==, 0x1b);
	g_assert_cmpuint(grh[7], ==, 64);
	g_assert_cmpmem(grh + 8, 16, s.local, 16);
	g_assert_cmpmem(grh + 24, 16, s.remote, 16);
	/* BTH: UD SEND only, P_Key 0xffff, QP 1, PSN */
	g_assert_cmpuint(bth[0], ==, 0x64);
	g_assert_cmpuint(get_be16(bth + 2), ==, 0xffff);
	g_assert_cmpuint(get_be32(bth + 4), ==, 1);
	g_assert_cmpuint(get_be32(bth + 8), ==, 42);
	/* DETH */
	g_assert_cmpuint(get_be32(deth), ==, 0x80010000u);
	g_assert_cmpuint(get_be32(deth + 4), ==, 1);
	g_assert_cmpmem(mad, 256, s.mad, 256);

	/* RX: the GIDs and LIDs swap. */
	sample_init(&s, true);
	pcap_ib_packet_build(&s.ev, 5, 0, p);
	g_assert_cmpuint(get_be16(p + 2), ==, 5);
	g_assert_cmpuint(get_be16(p + 6), ==, 7);
	g_assert_cmpmem(grh + 8, 16, s.remote, 16);
	g_assert_cmpmem(grh + 24, 16, s.local, 16);
}

/*
 * The CRCs against values computed independently (Python's zlib.crc32 over
 * 8 0xff bytes + the GRH and BTH with their variant fields set to ones +
 * the rest; and a bitwise CRC-16/0x100B), for the TX sample packet. Both
 * are stored least significant byte first.
 */
UNIT_TEST("/pcap-writer/crcs", test_crcs)
{
	Sample s;
	uint8_t p[PCAP_IB_PACKET_LEN];
	uint32_t icrc;
	uint16_t vcrc;

	sample_init(&s, false);
	pcap_ib_packet_build(&s.ev, 5, 42, p);
	icrc = (uint32_t)p[PCAP_IB_PACKET_LEN - 6] | (uint32_t)p[PCAP_IB_PACKET_LEN - 5] << 8 |
	       (uint32_t)p[PCAP_IB_PACKET_LEN - 4] << 16 | (uint32_t)p[PCAP_IB_PACKET_LEN - 3] << 24;
	vcrc = (uint16_t)(p[PCAP_IB_PACKET_LEN - 2] | p[PCAP_IB_PACKET_LEN - 1] << 8);
	g_assert_cmphex(icrc, ==, ICRC_EXPECTED);
	g_assert_cmphex(vcrc, ==, VCRC_EXPECTED);
	/* The ICRC covers no variant field: changing them keeps it. */
	p[1] ^= 0xf0;	   /* SL */
	p[8 + 7] = 1;	   /* hop limit */
	p[8 + 40 + 4] = 7; /* BTH reserved byte */
	g_assert_cmphex(pcap_ib_icrc(p, PCAP_IB_PACKET_LEN - 6), ==, icrc);
	/* ...and an invariant one changes it. */
	p[8 + 40 + 20 + 30] ^= 1;
	g_assert_cmphex(pcap_ib_icrc(p, PCAP_IB_PACKET_LEN - 6), !=, icrc);
}

static uint8_t *read_file(const char *path, gsize *len)
{
	gchar *data = NULL;

	g_assert_true(g_file_get_contents(path, &data, len, NULL));
	return (uint8_t *)data;
}

UNIT_TEST("/pcap-writer/file", test_file)
{
	g_autofree char *dir = g_dir_make_tmp("pcap-XXXXXX", NULL);
	g_autofree char *path = g_build_filename(dir, "t.pcap", NULL);
	g_autofree uint8_t *data = NULL;
	PcapWriter *w = NULL;
	Sample s;
	gsize len;
	uint32_t v;

	g_assert_cmpint(pcap_writer_open(path, 5, &w), ==, 0);
	sample_init(&s, false);
	g_assert_cmpint(pcap_writer_write(w, &s.ev), ==, 1);
	/* Refused or dropped MADs are not written. */
	s.ev.drop = "foreign-sgid";
	g_assert_cmpint(pcap_writer_write(w, &s.ev), ==, 0);
	sample_init(&s, true);
	s.ev.realtime_usec += 1000;
	g_assert_cmpint(pcap_writer_write(w, &s.ev), ==, 1);
	g_assert_cmpuint(pcap_writer_packets(w), ==, 2);

	/* Readable while the writer is still open: nothing is buffered. */
	data = read_file(path, &len);
	g_assert_cmpuint(len, ==, 24 + 2 * REC_LEN);
	memcpy(&v, data, 4);
	g_assert_cmphex(v, ==, 0xa1b2c3d4u);
	memcpy(&v, data + 20, 4);
	g_assert_cmpuint(v, ==, PCAP_LINKTYPE_ERF);
	for (int i = 0; i < 2; i++) {
		const uint8_t *rec = data + 24 + i * REC_LEN, *erf = rec + 16;
		uint32_t h[4];

		memcpy(h, rec, sizeof(h));
		g_assert_cmpuint(h[0], ==, 1700000000u);
		g_assert_cmpuint(h[1], ==, 123456u + 1000u * (unsigned)i);
		g_assert_cmpuint(h[2], ==, PCAP_ERF_HDR_LEN + PCAP_IB_PACKET_LEN);
		g_assert_cmpuint(h[3], ==, PCAP_ERF_HDR_LEN + PCAP_IB_PACKET_LEN);
		/* ERF: seconds in the high word of a little-endian timestamp */
		g_assert_cmpuint(erf[4] | erf[5] << 8 | erf[6] << 16 | (uint32_t)erf[7] << 24, ==,
				 1700000000u);
		g_assert_cmpuint(erf[8], ==, PCAP_ERF_TYPE_INFINIBAND);
		g_assert_cmpuint(get_be16(erf + 10), ==, PCAP_ERF_HDR_LEN + PCAP_IB_PACKET_LEN);
		g_assert_cmpuint(get_be16(erf + 14), ==, PCAP_IB_PACKET_LEN);
		g_assert_cmpuint(get_be32(erf + 16 + 8 + 40 + 8), ==, (uint32_t)i); /* PSN */
	}
	pcap_writer_free(w);
	g_assert_cmpint(g_unlink(path), ==, 0);
	g_assert_cmpint(g_rmdir(dir), ==, 0);
}

/* A write error (here: the file size limit) disables the writer and
 * leaves only whole records behind. */
UNIT_TEST("/pcap-writer/write-error", test_write_error)
{
	if (g_test_subprocess()) {
		g_autofree char *dir = g_dir_make_tmp("pcap-XXXXXX", NULL);
		g_autofree char *path = g_build_filename(dir, "t.pcap", NULL);
		struct rlimit rl = { 24 + REC_LEN + 100, 24 + REC_LEN + 100 };
		PcapWriter *w = NULL;
		GStatBuf st;
		Sample s;

		signal(SIGXFSZ, SIG_IGN);
		g_assert_cmpint(setrlimit(RLIMIT_FSIZE, &rl), ==, 0);
		g_assert_cmpint(pcap_writer_open(path, 0, &w), ==, 0);
		sample_init(&s, false);
		g_assert_cmpint(pcap_writer_write(w, &s.ev), ==, 1);
		g_assert_false(pcap_writer_disabled(w));
		g_assert_cmpint(pcap_writer_write(w, &s.ev), ==, -EFBIG);
		g_assert_true(pcap_writer_disabled(w));
		g_assert_cmpint(pcap_writer_write(w, &s.ev), ==, 0);
		g_assert_cmpuint(pcap_writer_packets(w), ==, 1);
		pcap_writer_free(w);
		g_assert_cmpint(g_stat(path, &st), ==, 0);
		g_assert_cmpint(st.st_size, ==, 24 + REC_LEN);
		g_assert_cmpint(g_unlink(path), ==, 0);
		g_assert_cmpint(g_rmdir(dir), ==, 0);
		return;
	}
	g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
	g_test_trap_assert_passed();
}

UNIT_TEST_MAIN()
