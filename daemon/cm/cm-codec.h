/* SPDX-License-Identifier: MIT */
/*
 * CM codec: reads and rewrites the fields of IB CM MADs that routing needs.
 *
 * Pure functions over a MAD buffer (the 256-byte IB MAD, or a prefix of it).
 * Nothing here allocates or keeps state, so it can be fuzzed on its own.
 * All offsets are absolute offsets in the MAD (IBTA vol 1 ch. 12; the CM
 * payload starts after the 24-byte common MAD header).
 */
#ifndef RDMACM_MUX_CM_CODEC_H
#define RDMACM_MUX_CM_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h" /* GID_LEN */

#define CM_MGMT_CLASS 0x07
#define CM_CLASS_VERSION 2
#define CM_METHOD_SEND 0x03
#define MAD_BASE_VERSION 1
#define MAD_HDR_LEN 24
#define MAD_LEN 256
/* Every CM MAD goes to QP1 with the well-known GSI Q_Key. */
#define CM_QP1_QKEY 0x80010000u

typedef enum CmAttr {
	CM_ATTR_CLASS_PORT_INFO = 0x0001,
	CM_ATTR_REQ = 0x0010,
	CM_ATTR_MRA = 0x0011,
	CM_ATTR_REJ = 0x0012,
	CM_ATTR_REP = 0x0013,
	CM_ATTR_RTU = 0x0014,
	CM_ATTR_DREQ = 0x0015,
	CM_ATTR_DREP = 0x0016,
	CM_ATTR_SIDR_REQ = 0x0017,
	CM_ATTR_SIDR_REP = 0x0018,
	CM_ATTR_LAP = 0x0019,
	CM_ATTR_APR = 0x001a,
} CmAttr;

/* Dense index of the attributes above, for counter arrays. */
typedef enum CmAttrIndex {
	CM_IDX_REQ,
	CM_IDX_MRA,
	CM_IDX_REJ,
	CM_IDX_REP,
	CM_IDX_RTU,
	CM_IDX_DREQ,
	CM_IDX_DREP,
	CM_IDX_SIDR_REQ,
	CM_IDX_SIDR_REP,
	CM_IDX_LAP,
	CM_IDX_APR,
	CM_IDX_OTHER,
	CM_IDX_COUNT,
} CmAttrIndex;

/* MessageRejected / MessageMRAed values. */
#define CM_MSG_REQ 0
#define CM_MSG_REP 1
#define CM_MSG_OTHER 2

#define CM_REJ_REASON_TIMEOUT 4

/* Field offsets used outside the codec (tests, trace). */
#define CM_OFF_LOCAL_COMM_ID 24
#define CM_OFF_REMOTE_COMM_ID 28
#define CM_OFF_REQ_LOCAL_GID 80
#define CM_OFF_REQ_REMOTE_GID 96
#define CM_OFF_REQ_PRIVATE 164
#define CM_OFF_SIDR_REQ_PRIVATE 40

/**
 * cm_mad_check() - decide whether @mad is a CM MAD we can relay.
 * @mad: MAD bytes
 * @len: number of valid bytes, 24..256
 * @ret_attr: the attribute id, set when the header is readable
 *
 * Return: 0 for a CM Send MAD of a routable attribute that is long enough
 * for every field the relay reads; -EMSGSIZE for a bad length; -EPROTO for
 * the wrong base version, class, class version or method; -EOPNOTSUPP for
 * an attribute the relay does not route (ClassPortInfo, SAP, SPR, ...);
 * -EBADMSG when the MAD is too short for its attribute.
 */
int cm_mad_check(const uint8_t *mad, size_t len, uint16_t *ret_attr);

/* Name of a CM attribute ("REQ", ...), or "attr-0xNNNN" in @buf. */
const char *cm_attr_name(uint16_t attr, char buf[16]);
/* The counter slot of @attr (every MAD is counted by it). */
static inline CmAttrIndex cm_attr_to_index(uint16_t attr)
{
	if (attr >= CM_ATTR_REQ && attr <= CM_ATTR_APR)
		return (CmAttrIndex)(attr - CM_ATTR_REQ);
	return CM_IDX_OTHER;
}
const char *cm_attr_index_name(CmAttrIndex idx);

static inline uint16_t cm_mad_attr(const uint8_t *mad)
{
	return (uint16_t)((mad[16] << 8) | mad[17]);
}

/* Whether the attribute carries a LocalCommID at 24 (all but SIDR). */
bool cm_attr_has_comm_ids(uint16_t attr);

uint32_t cm_get_local_comm_id(const uint8_t *mad);
void cm_set_local_comm_id(uint8_t *mad, uint32_t id);
uint32_t cm_get_remote_comm_id(const uint8_t *mad);
void cm_set_remote_comm_id(uint8_t *mad, uint32_t id);
/* SIDR_REQ and SIDR_REP keep their RequestID at byte 24. */
uint32_t cm_get_sidr_request_id(const uint8_t *mad);
void cm_set_sidr_request_id(uint8_t *mad, uint32_t id);

uint64_t cm_get_tid(const uint8_t *mad);
/* Only the low 32 bits of a TID survive the kernel; set those. */
void cm_set_tid_low(uint8_t *mad, uint32_t low);
/* Those low 32 bits (inline: every MAD is counted by them). */
static inline uint32_t cm_get_tid_low(const uint8_t *mad)
{
	return (uint32_t)mad[12] << 24 | (uint32_t)mad[13] << 16 | (uint32_t)mad[14] << 8 | mad[15];
}

/* REQ: Primary RemotePortGID (the destination) and LocalPortGID. */
const uint8_t *cm_req_remote_gid(const uint8_t *mad);
const uint8_t *cm_req_local_gid(const uint8_t *mad);

/* REJ: MessageRejected (bits 7:6 of byte 32) and Reason (34-35). */
unsigned cm_rej_msg_rejected(const uint8_t *mad);
uint16_t cm_rej_reason(const uint8_t *mad);
/* MRA: MessageMRAed (bits 7:6 of byte 32). */
unsigned cm_mra_msg_mraed(const uint8_t *mad);

/**
 * cm_cma_dst_gid() - the destination address of rdma_cm's cma_hdr, which
 * rdma_cm puts at the start of REQ and SIDR_REQ private data, as a GID
 * (IPv4 becomes the IPv4-mapped form ::ffff:a.b.c.d).
 * @mad: a full-length REQ or SIDR_REQ
 * @len: valid bytes
 * @gid: out
 *
 * Return: 0, or -ENOENT when the private data is not a cma_hdr.
 */
int cm_cma_dst_gid(const uint8_t *mad, size_t len, uint8_t gid[GID_LEN]);

#endif /* RDMACM_MUX_CM_CODEC_H */
