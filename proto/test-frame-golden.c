/* SPDX-License-Identifier: MIT */
/*
 * Golden-frame tests for rdmacm-mux-proto.h: every frame kind is built byte
 * by byte from the wire table (test-golden.h), compared with what a filled,
 * zero-initialised struct rdmacm_mux_msg holds, and decoded back through the
 * struct. A layout change in the header fails here with the offset of the
 * first wrong byte.
 */
#include <errno.h>
#include <glib.h>
#include <string.h>

#include "rdmacm-mux-proto.h"
#include "test-golden.h"
#include "unit-test.h"

static const uint8_t gid_local[16] = {
	0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55,
};
static const uint8_t gid_remote[16] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 7, 2,
};

/* A plausible CM REQ: base 1, class 0x07, version 2, method Send. */
static void fill_cm_mad(uint8_t *mad, size_t len)
{
	for (size_t i = 0; i < len; i++)
		mad[i] = (uint8_t)(i * 7 + 3);
	mad[0] = 0x01;
	mad[1] = 0x07;
	mad[2] = 0x02;
	mad[3] = 0x03;
	mad[16] = 0x00;
	mad[17] = 0x10; /* attr_id REQ */
}

static void assert_same_bytes(const void *golden, const void *ours, size_t n,
			      const char *what)
{
	long off = gold_first_diff(golden, ours, n);

	if (off >= 0)
		g_error("%s: byte %ld is 0x%02x, the table says 0x%02x", what,
			off, ((const uint8_t *)ours)[off],
			((const uint8_t *)golden)[off]);
}

static void assert_encodes(const uint8_t *golden, const struct rdmacm_mux_msg *msg,
			   const char *what)
{
	g_assert_cmpuint(sizeof(*msg), ==, GOLD_FRAME_SIZE);
	assert_same_bytes(golden, msg, GOLD_FRAME_SIZE, what);
}

static void decode(const uint8_t *golden, struct rdmacm_mux_msg *msg)
{
	memset(msg, 0xa5, sizeof(*msg));
	memcpy(msg, golden, GOLD_FRAME_SIZE);
}

UNIT_TEST("/proto/layout/size", test_layout_size)
{
#if defined(__x86_64__)
	/* QEMU's RdmaCmMuxMsg on x86_64; the wire size must never move. */
	g_assert_cmpuint(sizeof(struct rdmacm_mux_msg), ==, 360);
#elif defined(__i386__)
	g_assert_cmpuint(sizeof(struct rdmacm_mux_msg), ==, 352);
#endif
	g_assert_cmpuint(sizeof(struct rdmacm_mux_msg), ==, GOLD_FRAME_SIZE);
	g_assert_cmpuint(RDMACM_MUX_FRAME_SIZE, ==, GOLD_FRAME_SIZE);
	g_assert_cmpuint(sizeof(struct rdmacm_mux_mad_addr), ==, 44);
	g_assert_cmpuint(sizeof(struct rdmacm_mux_umad_hdr), ==, 64);
	g_assert_cmpuint(sizeof(struct rdmacm_mux_hello), ==, GOLD_HELLO_SIZE);
	g_assert_cmpuint(sizeof(struct rdmacm_mux_client_stats), ==,
			 GOLD_STATS_SIZE);
	g_assert_cmpuint(RDMACM_MUX_MAD_SIZE, ==, GOLD_MAD_SIZE);
	g_assert_cmpuint(GOLD_OFF_MAD + GOLD_MAD_SIZE, <=, GOLD_FRAME_SIZE);
}

UNIT_TEST("/proto/layout/constants", test_constants)
{
	g_assert_cmpuint(RDMACM_MUX_MSG_TYPE_REQ, ==, GOLD_MSG_REQ);
	g_assert_cmpuint(RDMACM_MUX_MSG_TYPE_RESP, ==, GOLD_MSG_RESP);
	g_assert_cmpuint(RDMACM_MUX_OP_CODE_REG, ==, GOLD_OP_REG);
	g_assert_cmpuint(RDMACM_MUX_OP_CODE_UNREG, ==, GOLD_OP_UNREG);
	g_assert_cmpuint(RDMACM_MUX_OP_CODE_MAD, ==, GOLD_OP_MAD);
	g_assert_cmpuint(RDMACM_MUX_OP_CODE_HELLO, ==, GOLD_OP_HELLO);
	g_assert_cmpuint(RDMACM_MUX_OP_CODE_CLIENT_STATS, ==,
			 GOLD_OP_CLIENT_STATS);
	g_assert_cmpint(RDMACM_MUX_ERR_CODE_OK, ==, 0);
	g_assert_cmpint(RDMACM_MUX_ERR_CODE_EINVAL, ==, 1);
	g_assert_cmpint(RDMACM_MUX_ERR_CODE_EEXIST, ==, 2);
	g_assert_cmpint(RDMACM_MUX_ERR_CODE_EACCES, ==, 3);
	g_assert_cmpint(RDMACM_MUX_ERR_CODE_ENOTFOUND, ==, 4);
	g_assert_cmpuint(RDMACM_MUX_HELLO_MAGIC, ==, GOLD_HELLO_MAGIC_VALUE);
	g_assert_cmpuint(RDMACM_MUX_CAP_ERRNO, ==, 1);
	g_assert_cmpuint(RDMACM_MUX_CAP_CLIENT_STATS, ==, 2);
}

/* The golden helpers themselves: host order really is host order. */
UNIT_TEST("/proto/layout/byte-order", test_byte_order)
{
	uint8_t b[8] = { 0 };
	uint32_t v = 0x10000;

	gold_put_u32(b, 0, GOLD_OP_HELLO);
	g_assert_cmpint(memcmp(b, &v, 4), ==, 0);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	{
		static const uint8_t le_hello[4] = { 0x00, 0x00, 0x01, 0x00 };
		static const uint8_t le_eio[4] = { 0xfb, 0xff, 0xff, 0xff };

		g_assert_cmpmem(b, 4, le_hello, 4);
		gold_put_u32(b, 0, (uint32_t)-5);
		g_assert_cmpmem(b, 4, le_eio, 4);
	}
#endif
	gold_put_be32(b, 0, 1);
	g_assert_cmpuint(b[0], ==, 0);
	g_assert_cmpuint(b[3], ==, 1);
}

/* The struct side of gold_frame_hdr(): a frame all zero but for these
 * header fields (@sgid NULL: zero). */
static void struct_frame(struct rdmacm_mux_msg *msg, uint32_t msg_type, uint32_t op_code,
			 const uint8_t *sgid, int32_t err_code, uint32_t umad_len)
{
	memset(msg, 0, sizeof(*msg));
	msg->hdr.msg_type = msg_type;
	msg->hdr.op_code = op_code;
	if (sgid)
		memcpy(msg->hdr.sgid.raw, sgid, 16);
	msg->hdr.err_code = err_code;
	msg->umad_len = umad_len;
}

static void check_gid_request(uint32_t op_code, const char *what)
{
	uint8_t golden[GOLD_FRAME_SIZE] = { 0 };
	struct rdmacm_mux_msg msg;

	gold_frame_hdr(golden, GOLD_MSG_REQ, op_code, gid_local, 0, 0);

	struct_frame(&msg, RDMACM_MUX_MSG_TYPE_REQ, op_code, gid_local, 0, 0);
	assert_encodes(golden, &msg, what);

	decode(golden, &msg);
	g_assert_cmpuint(msg.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_REQ);
	g_assert_cmpuint(msg.hdr.op_code, ==, op_code);
	g_assert_cmpmem(msg.hdr.sgid.raw, 16, gid_local, 16);
	g_assert_cmpint(msg.hdr.err_code, ==, 0);
	g_assert_cmpint(msg.umad_len, ==, 0);
	/* QEMU's mux read only the interface id half of the GID. */
	g_assert_cmpmem(&msg.hdr.sgid.global.interface_id, 8, gid_local + 8, 8);
}

UNIT_TEST("/proto/frame/reg", test_reg)
{
	check_gid_request(RDMACM_MUX_OP_CODE_REG, "REG");
}

UNIT_TEST("/proto/frame/unreg", test_unreg)
{
	check_gid_request(RDMACM_MUX_OP_CODE_UNREG, "UNREG");
}

/* The address QEMU puts in a MAD request, plus every field set once. */
static void fill_golden_addr(uint8_t *golden)
{
	gold_put_addr(golden, &(GoldAddr){ .qpn = 1, .qkey = 0x80010000u, .lid = 0x1234, .sl = 5,
					   .path_bits = 0x7f, .grh_present = 1, .gid_index = 3,
					   .hop_limit = 0xff, .traffic_class = 0x28,
					   .gid = gid_remote, .flow_label = 0x000abcde,
					   .pkey_index = 2 });
}

static void fill_struct_addr(struct rdmacm_mux_mad_addr *a)
{
	a->qpn = g_htonl(1);
	a->qkey = g_htonl(0x80010000u);
	a->lid = g_htons(0x1234);
	a->sl = 5;
	a->path_bits = 0x7f;
	a->grh_present = 1;
	a->gid_index = 3;
	a->hop_limit = 0xff;
	a->traffic_class = 0x28;
	memcpy(a->gid, gid_remote, 16);
	a->flow_label = g_htonl(0x000abcde);
	a->pkey_index = 2;
}

static void check_addr(const struct rdmacm_mux_mad_addr *a)
{
	g_assert_cmpuint(g_ntohl(a->qpn), ==, 1);
	g_assert_cmpuint(g_ntohl(a->qkey), ==, 0x80010000u);
	g_assert_cmpuint(g_ntohs(a->lid), ==, 0x1234);
	g_assert_cmpuint(a->sl, ==, 5);
	g_assert_cmpuint(a->path_bits, ==, 0x7f);
	g_assert_cmpuint(a->grh_present, ==, 1);
	g_assert_cmpuint(a->gid_index, ==, 3);
	g_assert_cmpuint(a->hop_limit, ==, 0xff);
	g_assert_cmpuint(a->traffic_class, ==, 0x28);
	g_assert_cmpmem(a->gid, 16, gid_remote, 16);
	g_assert_cmpuint(g_ntohl(a->flow_label), ==, 0x000abcde);
	g_assert_cmpuint(a->pkey_index, ==, 2);
}

/* A 256-byte MAD frame from or to gid_local with fill_golden_addr()'s
 * address, in the golden bytes... */
static void golden_mad_frame(uint8_t *golden, uint32_t msg_type, int32_t err_code,
			     const uint8_t mad[256])
{
	gold_frame_hdr(golden, msg_type, GOLD_OP_MAD, gid_local, err_code, 256);
	fill_golden_addr(golden);
	memcpy(golden + GOLD_OFF_MAD, mad, 256);
}

/* ...and the same request in the struct (fill_struct_addr()'s address). */
static void struct_mad_frame(struct rdmacm_mux_msg *msg, const uint8_t mad[256])
{
	struct_frame(msg, RDMACM_MUX_MSG_TYPE_REQ, RDMACM_MUX_OP_CODE_MAD, gid_local, 0, 256);
	fill_struct_addr(&msg->umad.hdr.addr);
	memcpy(msg->umad.mad, mad, 256);
}

/* A decoded MAD frame carries that address and @mad. */
static void check_mad_frame(const struct rdmacm_mux_msg *msg, const uint8_t mad[256])
{
	check_addr(&msg->umad.hdr.addr);
	g_assert_cmpmem(msg->umad.mad, 256, mad, 256);
}

UNIT_TEST("/proto/frame/mad-request", test_mad_request)
{
	uint8_t golden[GOLD_FRAME_SIZE] = { 0 };
	uint8_t mad[256];
	struct rdmacm_mux_msg msg;

	fill_cm_mad(mad, sizeof(mad));
	golden_mad_frame(golden, GOLD_MSG_REQ, 0, mad);
	/* The bytes a daemon reads to route and rewrite, at absolute offsets
	 * (the MAD at 100, so the CM payload at 124, the comm id at 124..127). */
	g_assert_cmpuint(golden[GOLD_OFF_MAD + 1], ==, 0x07);
	g_assert_cmpuint(gold_get_be16(golden, GOLD_OFF_MAD + 16), ==, 0x10);
#if !defined(__i386__)
	g_assert_cmpuint(golden[125], ==, mad[25]);
	g_assert_cmpuint(golden[355], ==, mad[255]);
#endif

	struct_mad_frame(&msg, mad);
	assert_encodes(golden, &msg, "MAD request");

	decode(golden, &msg);
	g_assert_cmpuint(msg.hdr.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
	g_assert_cmpint(msg.umad_len, ==, 256);
	g_assert_cmpuint(msg.umad.hdr.agent_id, ==, 0);
	check_mad_frame(&msg, mad);
}

/* A short MAD: the bytes past umad_len stay zero on the wire. */
UNIT_TEST("/proto/frame/mad-request-short", test_mad_request_short)
{
	uint8_t golden[GOLD_FRAME_SIZE] = { 0 };
	uint8_t mad[24];
	struct rdmacm_mux_msg msg;

	fill_cm_mad(mad, sizeof(mad));
	gold_frame_hdr(golden, GOLD_MSG_REQ, GOLD_OP_MAD, gid_local, 0, 24);
	memcpy(golden + GOLD_OFF_MAD, mad, 24);

	struct_frame(&msg, 0, RDMACM_MUX_OP_CODE_MAD, gid_local, 0, 24);
	memcpy(msg.umad.mad, mad, 24);
	assert_encodes(golden, &msg, "short MAD request");
}

/* RESP: the request echoed with msg_type RESP and err_code set, including
 * a negative errno (a failed umad_send) and the CAP_ERRNO style. */
UNIT_TEST("/proto/frame/resp-err-codes", test_resp_err_codes)
{
	static const int32_t codes[] = { 0, 1, 2, 3, 4, -EIO, -EDQUOT, -EPERM };

	for (size_t i = 0; i < G_N_ELEMENTS(codes); i++) {
		uint8_t golden[GOLD_FRAME_SIZE] = { 0 };
		struct rdmacm_mux_msg msg;
		uint32_t op = i % 2 ? GOLD_OP_UNREG : GOLD_OP_REG;

		gold_frame_hdr(golden, GOLD_MSG_RESP, op, gid_local, codes[i], 0);

		struct_frame(&msg, RDMACM_MUX_MSG_TYPE_RESP, op, gid_local, codes[i], 0);
		assert_encodes(golden, &msg, "RESP");

		decode(golden, &msg);
		g_assert_cmpuint(msg.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
		g_assert_cmpint(msg.hdr.err_code, ==, codes[i]);
		g_assert_cmpint((int32_t)gold_get_u32(golden, GOLD_OFF_ERR_CODE),
				==, codes[i]);
	}
}

/* RESP to a MAD: the whole request comes back, MAD and address included. */
UNIT_TEST("/proto/frame/resp-mad-echo", test_resp_mad_echo)
{
	uint8_t golden[GOLD_FRAME_SIZE] = { 0 };
	uint8_t mad[256];
	struct rdmacm_mux_msg msg;

	fill_cm_mad(mad, sizeof(mad));
	golden_mad_frame(golden, GOLD_MSG_RESP, -EIO, mad);

	decode(golden, &msg);
	g_assert_cmpuint(msg.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
	g_assert_cmpuint(msg.hdr.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
	g_assert_cmpint(msg.hdr.err_code, ==, -EIO);
	check_mad_frame(&msg, mad);
}

/* Daemon to client: msg_type REQ, op MAD, sgid = the full local GID, addr =
 * the sender as the kernel reported it, all other bytes zero. */
UNIT_TEST("/proto/frame/inbound-mad", test_inbound_mad)
{
	uint8_t golden[GOLD_FRAME_SIZE] = { 0 };
	uint8_t mad[256];
	struct rdmacm_mux_msg msg;

	fill_cm_mad(mad, sizeof(mad));
	mad[17] = 0x13; /* REP */
	golden_mad_frame(golden, GOLD_MSG_REQ, 0, mad);
	gold_put_u32(golden, GOLD_OFF_AGENT_ID, 7);
	gold_put_u32(golden, GOLD_OFF_LENGTH, 256 + 64);

	struct_mad_frame(&msg, mad);
	msg.umad.hdr.agent_id = 7;
	msg.umad.hdr.length = 256 + 64;
	assert_encodes(golden, &msg, "inbound MAD");

	decode(golden, &msg);
	g_assert_cmpuint(msg.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_REQ);
	g_assert_cmpuint(msg.hdr.op_code, ==, RDMACM_MUX_OP_CODE_MAD);
	g_assert_cmpmem(msg.hdr.sgid.raw, 16, gid_local, 16);
	g_assert_cmpuint(msg.umad.hdr.agent_id, ==, 7);
	g_assert_cmpuint(msg.umad.hdr.length, ==, 320);
	check_addr(&msg.umad.hdr.addr);
	g_assert_cmpuint(msg.umad.mad[17], ==, 0x13);
}

UNIT_TEST("/proto/frame/hello", test_hello)
{
	uint8_t golden[GOLD_FRAME_SIZE] = { 0 };
	struct rdmacm_mux_hello hello = {
		.magic = RDMACM_MUX_HELLO_MAGIC,
		.version_major = 1,
		.version_minor = 0,
		.capabilities = RDMACM_MUX_CAP_ALL,
	};
	struct rdmacm_mux_msg msg;
	uint8_t *p = golden + GOLD_OFF_MAD;

	/* Request: no sgid, the payload in umad.mad, umad_len = 32. */
	gold_frame_hdr(golden, GOLD_MSG_REQ, GOLD_OP_HELLO, NULL, 0,
		       GOLD_HELLO_SIZE);
	gold_put_u32(p, GOLD_HELLO_MAGIC, GOLD_HELLO_MAGIC_VALUE);
	gold_put_u16(p, GOLD_HELLO_VERSION_MAJOR, 1);
	gold_put_u16(p, GOLD_HELLO_VERSION_MINOR, 0);
	gold_put_u64(p, GOLD_HELLO_CAPABILITIES, 3);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	{
		static const uint8_t magic_le[4] = { 'X', 'U', 'M', 'R' };

		g_assert_cmpmem(p, 4, magic_le, 4);
	}
#endif

	struct_frame(&msg, RDMACM_MUX_MSG_TYPE_REQ, RDMACM_MUX_OP_CODE_HELLO, NULL, 0,
		     sizeof(hello));
	memcpy(msg.umad.mad, &hello, sizeof(hello));
	assert_encodes(golden, &msg, "HELLO request");

	/* Response: granted subset and the quotas. */
	memset(golden, 0, sizeof(golden));
	gold_frame_hdr(golden, GOLD_MSG_RESP, GOLD_OP_HELLO, NULL, 0,
		       GOLD_HELLO_SIZE);
	gold_put_u32(p, GOLD_HELLO_MAGIC, GOLD_HELLO_MAGIC_VALUE);
	gold_put_u16(p, GOLD_HELLO_VERSION_MAJOR, 1);
	gold_put_u16(p, GOLD_HELLO_VERSION_MINOR, 2);
	gold_put_u64(p, GOLD_HELLO_CAPABILITIES, 2);
	gold_put_u32(p, GOLD_HELLO_MAX_GIDS, 16);
	gold_put_u32(p, GOLD_HELLO_MAX_SESSIONS, 1024);
	gold_put_u32(p, GOLD_HELLO_MAX_QUEUED, 512);

	decode(golden, &msg);
	g_assert_cmpuint(msg.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
	g_assert_cmpuint(msg.hdr.op_code, ==, RDMACM_MUX_OP_CODE_HELLO);
	g_assert_cmpint(msg.umad_len, ==, 32);
	memcpy(&hello, msg.umad.mad, sizeof(hello));
	g_assert_cmpuint(hello.magic, ==, RDMACM_MUX_HELLO_MAGIC);
	g_assert_cmpuint(hello.version_major, ==, 1);
	g_assert_cmpuint(hello.version_minor, ==, 2);
	g_assert_cmpuint(hello.capabilities, ==, RDMACM_MUX_CAP_CLIENT_STATS);
	g_assert_cmpuint(hello.max_gids, ==, 16);
	g_assert_cmpuint(hello.max_sessions, ==, 1024);
	g_assert_cmpuint(hello.max_queued, ==, 512);
	g_assert_cmpuint(hello.reserved, ==, 0);

	/* An old mux echoes the request with err_code EINVAL. */
	memset(golden, 0, sizeof(golden));
	gold_frame_hdr(golden, GOLD_MSG_RESP, GOLD_OP_HELLO, NULL, 1,
		       GOLD_HELLO_SIZE);
	decode(golden, &msg);
	g_assert_cmpint(msg.hdr.err_code, ==, RDMACM_MUX_ERR_CODE_EINVAL);
}

UNIT_TEST("/proto/frame/client-stats", test_client_stats)
{
	uint8_t golden[GOLD_FRAME_SIZE] = { 0 };
	struct rdmacm_mux_client_stats st;
	struct rdmacm_mux_msg msg;
	uint8_t *p = golden + GOLD_OFF_MAD;

	/* Request: an empty payload. */
	gold_frame_hdr(golden, GOLD_MSG_REQ, GOLD_OP_CLIENT_STATS, NULL, 0, 0);
	memset(&msg, 0, sizeof(msg));
	msg.hdr.op_code = RDMACM_MUX_OP_CODE_CLIENT_STATS;
	assert_encodes(golden, &msg, "CLIENT_STATS request");

	/* Response. */
	gold_frame_hdr(golden, GOLD_MSG_RESP, GOLD_OP_CLIENT_STATS, NULL, 0,
		       GOLD_STATS_SIZE);
	gold_put_stats(p, (const uint64_t[8]){ 0x0102030405060708ull, 2, 3, 4, 5, 6, 7, 8 });

	struct_frame(&msg, RDMACM_MUX_MSG_TYPE_RESP, RDMACM_MUX_OP_CODE_CLIENT_STATS, NULL, 0,
		     sizeof(st));
	st = (struct rdmacm_mux_client_stats){
		.tx_mads = 0x0102030405060708ull,
		.tx_rejected = 2,
		.rx_mads = 3,
		.rx_dropped = 4,
		.requests = 5,
		.gids = 6,
		.sessions = 7,
		.queued = 8,
	};
	memcpy(msg.umad.mad, &st, sizeof(st));
	assert_encodes(golden, &msg, "CLIENT_STATS response");

	decode(golden, &msg);
	memset(&st, 0, sizeof(st));
	memcpy(&st, msg.umad.mad, sizeof(st));
	g_assert_cmpuint(st.tx_mads, ==, 0x0102030405060708ull);
	g_assert_cmpuint(st.tx_rejected, ==, 2);
	g_assert_cmpuint(st.rx_mads, ==, 3);
	g_assert_cmpuint(st.rx_dropped, ==, 4);
	g_assert_cmpuint(st.requests, ==, 5);
	g_assert_cmpuint(st.gids, ==, 6);
	g_assert_cmpuint(st.sessions, ==, 7);
	g_assert_cmpuint(st.queued, ==, 8);
	g_assert_cmpuint(st.reserved, ==, 0);
}

/* Each field written alone lands exactly at its table offset and nowhere
 * else: catches two fields swapped, which whole-frame tests can miss when
 * both carry the same value. */
UNIT_TEST("/proto/layout/field-offsets", test_field_offsets)
{
	static const struct {
		size_t off, size;
	} fields[] = {
		{ GOLD_OFF_MSG_TYPE, 4 },    { GOLD_OFF_OP_CODE, 4 },
		{ GOLD_OFF_SGID, 16 },	     { GOLD_OFF_ERR_CODE, 4 },
		{ GOLD_OFF_UMAD_LEN, 4 },    { GOLD_OFF_AGENT_ID, 4 },
		{ GOLD_OFF_STATUS, 4 },	     { GOLD_OFF_TIMEOUT_MS, 4 },
		{ GOLD_OFF_RETRIES, 4 },     { GOLD_OFF_LENGTH, 4 },
		{ GOLD_OFF_QPN, 4 },	     { GOLD_OFF_QKEY, 4 },
		{ GOLD_OFF_LID, 2 },	     { GOLD_OFF_SL, 1 },
		{ GOLD_OFF_PATH_BITS, 1 },   { GOLD_OFF_GRH_PRESENT, 1 },
		{ GOLD_OFF_GID_INDEX, 1 },   { GOLD_OFF_HOP_LIMIT, 1 },
		{ GOLD_OFF_TRAFFIC_CLASS, 1 }, { GOLD_OFF_ADDR_GID, 16 },
		{ GOLD_OFF_FLOW_LABEL, 4 },  { GOLD_OFF_PKEY_INDEX, 2 },
		{ GOLD_OFF_ADDR_RESERVED, 6 }, { GOLD_OFF_MAD, 256 },
	};

	for (size_t i = 0; i < G_N_ELEMENTS(fields); i++) {
		struct rdmacm_mux_msg msg;
		uint8_t golden[GOLD_FRAME_SIZE] = { 0 };
		struct rdmacm_mux_umad_hdr *h = &msg.umad.hdr;
		void *field;

		memset(&msg, 0, sizeof(msg));
		switch (i) {
		case 0: field = &msg.hdr.msg_type; break;
		case 1: field = &msg.hdr.op_code; break;
		case 2: field = msg.hdr.sgid.raw; break;
		case 3: field = &msg.hdr.err_code; break;
		case 4: field = &msg.umad_len; break;
		case 5: field = &h->agent_id; break;
		case 6: field = &h->status; break;
		case 7: field = &h->timeout_ms; break;
		case 8: field = &h->retries; break;
		case 9: field = &h->length; break;
		case 10: field = &h->addr.qpn; break;
		case 11: field = &h->addr.qkey; break;
		case 12: field = &h->addr.lid; break;
		case 13: field = &h->addr.sl; break;
		case 14: field = &h->addr.path_bits; break;
		case 15: field = &h->addr.grh_present; break;
		case 16: field = &h->addr.gid_index; break;
		case 17: field = &h->addr.hop_limit; break;
		case 18: field = &h->addr.traffic_class; break;
		case 19: field = h->addr.gid; break;
		case 20: field = &h->addr.flow_label; break;
		case 21: field = &h->addr.pkey_index; break;
		case 22: field = h->addr.reserved; break;
		default: field = msg.umad.mad; break;
		}
		memset(field, 0xff, fields[i].size);
		memset(golden + fields[i].off, 0xff, fields[i].size);
		assert_same_bytes(golden, &msg, GOLD_FRAME_SIZE, "single field");
	}
}

UNIT_TEST_MAIN()
