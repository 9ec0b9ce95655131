/* SPDX-License-Identifier: MIT */
/*
 * Test helper: builds and reads rdmacm-mux frames byte by byte from the
 * wire format's offset table (proto/PROTOCOL.md, as QEMU's rdmacm-mux
 * laid it out on x86_64).
 *
 * Every offset below is a literal number copied from that table, never
 * offsetof() or sizeof() of our structs: the point is to check the structs
 * in rdmacm-mux-proto.h against an independent description of the wire, so
 * that a layout bug in the header cannot hide itself. Tests that act as a
 * fake daemon use the same helpers, so they too check the client library
 * against the table rather than against the header.
 */
#ifndef RDMACM_MUX_TEST_GOLDEN_H
#define RDMACM_MUX_TEST_GOLDEN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Absolute offsets in the frame. i386 lacks the 4 bytes of padding that
 * x86_64 (and every ABI with 8-byte aligned uint64_t) puts after err_code. */
#define GOLD_OFF_MSG_TYPE 0
#define GOLD_OFF_OP_CODE 4
#define GOLD_OFF_SGID 8
#define GOLD_OFF_ERR_CODE 24
#if defined(__i386__)
#define GOLD_FRAME_SIZE 352
#define GOLD_OFF_UMAD_LEN 28
#define GOLD_OFF_AGENT_ID 32
#define GOLD_OFF_STATUS 36
#define GOLD_OFF_TIMEOUT_MS 40
#define GOLD_OFF_RETRIES 44
#define GOLD_OFF_LENGTH 48
#define GOLD_OFF_QPN 52
#define GOLD_OFF_QKEY 56
#define GOLD_OFF_LID 60
#define GOLD_OFF_SL 62
#define GOLD_OFF_PATH_BITS 63
#define GOLD_OFF_GRH_PRESENT 64
#define GOLD_OFF_GID_INDEX 65
#define GOLD_OFF_HOP_LIMIT 66
#define GOLD_OFF_TRAFFIC_CLASS 67
#define GOLD_OFF_ADDR_GID 68
#define GOLD_OFF_FLOW_LABEL 84
#define GOLD_OFF_PKEY_INDEX 88
#define GOLD_OFF_ADDR_RESERVED 90
#define GOLD_OFF_MAD 96
#else
#define GOLD_FRAME_SIZE 360
#define GOLD_OFF_UMAD_LEN 32
#define GOLD_OFF_AGENT_ID 36
#define GOLD_OFF_STATUS 40
#define GOLD_OFF_TIMEOUT_MS 44
#define GOLD_OFF_RETRIES 48
#define GOLD_OFF_LENGTH 52
#define GOLD_OFF_QPN 56
#define GOLD_OFF_QKEY 60
#define GOLD_OFF_LID 64
#define GOLD_OFF_SL 66
#define GOLD_OFF_PATH_BITS 67
#define GOLD_OFF_GRH_PRESENT 68
#define GOLD_OFF_GID_INDEX 69
#define GOLD_OFF_HOP_LIMIT 70
#define GOLD_OFF_TRAFFIC_CLASS 71
#define GOLD_OFF_ADDR_GID 72
#define GOLD_OFF_FLOW_LABEL 88
#define GOLD_OFF_PKEY_INDEX 92
#define GOLD_OFF_ADDR_RESERVED 94
#define GOLD_OFF_MAD 100
#endif
#define GOLD_MAD_SIZE 256

/* HELLO payload, relative to GOLD_OFF_MAD; 32 bytes. */
#define GOLD_HELLO_MAGIC 0
#define GOLD_HELLO_VERSION_MAJOR 4
#define GOLD_HELLO_VERSION_MINOR 6
#define GOLD_HELLO_CAPABILITIES 8
#define GOLD_HELLO_MAX_GIDS 16
#define GOLD_HELLO_MAX_SESSIONS 20
#define GOLD_HELLO_MAX_QUEUED 24
#define GOLD_HELLO_SIZE 32

/* CLIENT_STATS payload, relative to GOLD_OFF_MAD; 56 bytes. */
#define GOLD_STATS_TX_MADS 0
#define GOLD_STATS_TX_REJECTED 8
#define GOLD_STATS_RX_MADS 16
#define GOLD_STATS_RX_DROPPED 24
#define GOLD_STATS_REQUESTS 32
#define GOLD_STATS_GIDS 40
#define GOLD_STATS_SESSIONS 44
#define GOLD_STATS_QUEUED 48
#define GOLD_STATS_SIZE 56

/* The wire constants, again from the table and not from the header. */
#define GOLD_MSG_REQ 0u
#define GOLD_MSG_RESP 1u
#define GOLD_OP_REG 0u
#define GOLD_OP_UNREG 1u
#define GOLD_OP_MAD 2u
#define GOLD_OP_HELLO 0x10000u
#define GOLD_OP_CLIENT_STATS 0x10001u
#define GOLD_HELLO_MAGIC_VALUE 0x524d5558u

#if !defined(__BYTE_ORDER__) || (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__ && \
				 __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__)
#error "unknown byte order"
#endif

/* Host-order integers, written one byte at a time. */
static inline void gold_put_uint(uint8_t *b, size_t off, uint64_t v,
				 unsigned size)
{
	for (unsigned i = 0; i < size; i++) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		b[off + i] = (uint8_t)(v >> (8 * i));
#else
		b[off + i] = (uint8_t)(v >> (8 * (size - 1 - i)));
#endif
	}
}

static inline uint64_t gold_get_uint(const uint8_t *b, size_t off,
				     unsigned size)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < size; i++) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		v |= (uint64_t)b[off + i] << (8 * i);
#else
		v |= (uint64_t)b[off + i] << (8 * (size - 1 - i));
#endif
	}
	return v;
}

static inline void gold_put_u16(uint8_t *b, size_t off, uint16_t v)
{
	gold_put_uint(b, off, v, 2);
}

static inline void gold_put_u32(uint8_t *b, size_t off, uint32_t v)
{
	gold_put_uint(b, off, v, 4);
}

static inline void gold_put_u64(uint8_t *b, size_t off, uint64_t v)
{
	gold_put_uint(b, off, v, 8);
}

/* A CLIENT_STATS answer's payload at @p: @v in the layout's order,
 * tx_mads, tx_rejected, rx_mads, rx_dropped, requests (64 bits each),
 * gids, sessions, queued (32 bits each). */
static inline void gold_put_stats(uint8_t *p, const uint64_t v[8])
{
	static const size_t off[8] = { GOLD_STATS_TX_MADS, GOLD_STATS_TX_REJECTED,
				       GOLD_STATS_RX_MADS, GOLD_STATS_RX_DROPPED,
				       GOLD_STATS_REQUESTS, GOLD_STATS_GIDS,
				       GOLD_STATS_SESSIONS, GOLD_STATS_QUEUED };

	for (size_t i = 0; i < 8; i++)
		gold_put_uint(p, off[i], v[i], i < 5 ? 8 : 4);
}

static inline uint16_t gold_get_u16(const uint8_t *b, size_t off)
{
	return (uint16_t)gold_get_uint(b, off, 2);
}

static inline uint32_t gold_get_u32(const uint8_t *b, size_t off)
{
	return (uint32_t)gold_get_uint(b, off, 4);
}

static inline uint64_t gold_get_u64(const uint8_t *b, size_t off)
{
	return gold_get_uint(b, off, 8);
}

/* Network-order (big endian) integers, as inside addr and the MAD. */
static inline void gold_put_be16(uint8_t *b, size_t off, uint16_t v)
{
	b[off] = (uint8_t)(v >> 8);
	b[off + 1] = (uint8_t)v;
}

static inline void gold_put_be32(uint8_t *b, size_t off, uint32_t v)
{
	b[off] = (uint8_t)(v >> 24);
	b[off + 1] = (uint8_t)(v >> 16);
	b[off + 2] = (uint8_t)(v >> 8);
	b[off + 3] = (uint8_t)v;
}

/* A MAD request's address, in host order: what gold_put_addr() writes. */
typedef struct GoldAddr {
	uint32_t qpn, qkey, flow_label;
	uint16_t lid, pkey_index;
	uint8_t sl, path_bits, grh_present, gid_index, hop_limit, traffic_class;
	const uint8_t *gid; /* 16 bytes */
} GoldAddr;

/* Write @a into the frame @golden: network order inside it but for the
 * pkey index, which is the host's (as struct ib_mad_addr has it). */
static inline void gold_put_addr(uint8_t *golden, const GoldAddr *a)
{
	gold_put_be32(golden, GOLD_OFF_QPN, a->qpn);
	gold_put_be32(golden, GOLD_OFF_QKEY, a->qkey);
	gold_put_be16(golden, GOLD_OFF_LID, a->lid);
	golden[GOLD_OFF_SL] = a->sl;
	golden[GOLD_OFF_PATH_BITS] = a->path_bits;
	golden[GOLD_OFF_GRH_PRESENT] = a->grh_present;
	golden[GOLD_OFF_GID_INDEX] = a->gid_index;
	golden[GOLD_OFF_HOP_LIMIT] = a->hop_limit;
	golden[GOLD_OFF_TRAFFIC_CLASS] = a->traffic_class;
	memcpy(golden + GOLD_OFF_ADDR_GID, a->gid, 16);
	gold_put_be32(golden, GOLD_OFF_FLOW_LABEL, a->flow_label);
	gold_put_u16(golden, GOLD_OFF_PKEY_INDEX, a->pkey_index);
}

static inline uint32_t gold_get_be32(const uint8_t *b, size_t off)
{
	return (uint32_t)b[off] << 24 | (uint32_t)b[off + 1] << 16 |
	       (uint32_t)b[off + 2] << 8 | b[off + 3];
}

static inline uint16_t gold_get_be16(const uint8_t *b, size_t off)
{
	return (uint16_t)(b[off] << 8 | b[off + 1]);
}

/* A frame header: everything else stays as the caller zeroed it. */
static inline void gold_frame_hdr(uint8_t *b, uint32_t msg_type,
				  uint32_t op_code, const uint8_t *sgid,
				  int32_t err_code, int32_t umad_len)
{
	gold_put_u32(b, GOLD_OFF_MSG_TYPE, msg_type);
	gold_put_u32(b, GOLD_OFF_OP_CODE, op_code);
	if (sgid)
		memcpy(b + GOLD_OFF_SGID, sgid, 16);
	gold_put_u32(b, GOLD_OFF_ERR_CODE, (uint32_t)err_code);
	gold_put_u32(b, GOLD_OFF_UMAD_LEN, (uint32_t)umad_len);
}

/* The index of the first byte where @a and @b differ, or -1. */
static inline long gold_first_diff(const void *a, const void *b, size_t n)
{
	const uint8_t *x = (const uint8_t *)a, *y = (const uint8_t *)b;

	for (size_t i = 0; i < n; i++)
		if (x[i] != y[i])
			return (long)i;
	return -1;
}

#endif /* RDMACM_MUX_TEST_GOLDEN_H */
