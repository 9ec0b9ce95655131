/* SPDX-License-Identifier: MIT */
/* Owns the parsing and rewriting of CM MAD fields (see cm-codec.h). */
#include "cm-codec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rdmacm-mux-bytes.h"

/* Bytes an attribute needs so that every field the relay reads is there. */
static size_t cm_attr_min_len(uint16_t attr)
{
	switch (attr) {
	case CM_ATTR_REQ:
		return CM_OFF_REQ_REMOTE_GID + GID_LEN;
	case CM_ATTR_REJ:
		return 36; /* Reason at 34-35 */
	case CM_ATTR_MRA:
	case CM_ATTR_REP:
	case CM_ATTR_RTU:
	case CM_ATTR_DREQ:
	case CM_ATTR_DREP:
	case CM_ATTR_LAP:
	case CM_ATTR_APR:
		return 33; /* both comm ids, and MRA's MessageMRAed at 32 */
	case CM_ATTR_SIDR_REQ:
	case CM_ATTR_SIDR_REP:
		return 28; /* RequestID */
	default:
		return 0;
	}
}

int cm_mad_check(const uint8_t *mad, size_t len, uint16_t *ret_attr)
{
	static const uint8_t cm_mad_head[4] = { MAD_BASE_VERSION, CM_MGMT_CLASS,
						CM_CLASS_VERSION, CM_METHOD_SEND };
	uint32_t head, want;
	uint16_t attr;
	size_t need;

	if (!mad || len < MAD_HDR_LEN || len > MAD_LEN)
		return -EMSGSIZE;
	attr = cm_mad_attr(mad);
	if (ret_attr)
		*ret_attr = attr;
	/* The four header bytes as one word: this runs for every MAD. */
	memcpy(&head, mad, sizeof(head));
	memcpy(&want, cm_mad_head, sizeof(want));
	if (head != want)
		return -EPROTO;
	need = cm_attr_min_len(attr);
	if (need == 0)
		return -EOPNOTSUPP;
	if (len < need)
		return -EBADMSG;
	return 0;
}

static const char *const cm_index_names[CM_IDX_COUNT] = {
	[CM_IDX_REQ] = "REQ",		[CM_IDX_MRA] = "MRA",
	[CM_IDX_REJ] = "REJ",		[CM_IDX_REP] = "REP",
	[CM_IDX_RTU] = "RTU",		[CM_IDX_DREQ] = "DREQ",
	[CM_IDX_DREP] = "DREP",		[CM_IDX_SIDR_REQ] = "SIDR_REQ",
	[CM_IDX_SIDR_REP] = "SIDR_REP", [CM_IDX_LAP] = "LAP",
	[CM_IDX_APR] = "APR",		[CM_IDX_OTHER] = "other",
};

const char *cm_attr_index_name(CmAttrIndex idx)
{
	return (unsigned)idx < CM_IDX_COUNT ? cm_index_names[idx] : "other";
}

const char *cm_attr_name(uint16_t attr, char buf[16])
{
	CmAttrIndex idx = cm_attr_to_index(attr);

	if (idx != CM_IDX_OTHER)
		return cm_index_names[idx];
	if (attr == CM_ATTR_CLASS_PORT_INFO)
		return "ClassPortInfo";
	snprintf(buf, 16, "attr-0x%04x", attr);
	return buf;
}

bool cm_attr_has_comm_ids(uint16_t attr)
{
	return attr >= CM_ATTR_REQ && attr <= CM_ATTR_APR &&
	       attr != CM_ATTR_SIDR_REQ && attr != CM_ATTR_SIDR_REP;
}

uint32_t cm_get_local_comm_id(const uint8_t *mad)
{
	return get_be32(mad + CM_OFF_LOCAL_COMM_ID);
}

void cm_set_local_comm_id(uint8_t *mad, uint32_t id)
{
	put_be32(mad + CM_OFF_LOCAL_COMM_ID, id);
}

uint32_t cm_get_remote_comm_id(const uint8_t *mad)
{
	return get_be32(mad + CM_OFF_REMOTE_COMM_ID);
}

void cm_set_remote_comm_id(uint8_t *mad, uint32_t id)
{
	put_be32(mad + CM_OFF_REMOTE_COMM_ID, id);
}

uint32_t cm_get_sidr_request_id(const uint8_t *mad)
{
	return get_be32(mad + 24);
}

void cm_set_sidr_request_id(uint8_t *mad, uint32_t id)
{
	put_be32(mad + 24, id);
}

uint64_t cm_get_tid(const uint8_t *mad)
{
	return get_be64(mad + 8);
}

void cm_set_tid_low(uint8_t *mad, uint32_t low)
{
	put_be32(mad + 12, low);
}

const uint8_t *cm_req_remote_gid(const uint8_t *mad)
{
	return mad + CM_OFF_REQ_REMOTE_GID;
}

const uint8_t *cm_req_local_gid(const uint8_t *mad)
{
	return mad + CM_OFF_REQ_LOCAL_GID;
}

unsigned cm_rej_msg_rejected(const uint8_t *mad)
{
	return mad[32] >> 6;
}

uint16_t cm_rej_reason(const uint8_t *mad)
{
	return get_be16(mad + 34);
}

unsigned cm_mra_msg_mraed(const uint8_t *mad)
{
	return mad[32] >> 6;
}

int cm_cma_dst_gid(const uint8_t *mad, size_t len, uint8_t gid[GID_LEN])
{
	size_t off;
	const uint8_t *hdr;
	unsigned ip_version;

	if (len < MAD_HDR_LEN)
		return -ENOENT;
	switch (cm_mad_attr(mad)) {
	case CM_ATTR_REQ:
		off = CM_OFF_REQ_PRIVATE;
		break;
	case CM_ATTR_SIDR_REQ:
		off = CM_OFF_SIDR_REQ_PRIVATE;
		break;
	default:
		return -ENOENT;
	}
	/* cma_hdr: version, ip_version<<4, port[2], src[16], dst[16]. */
	if (len < off + 36)
		return -ENOENT;
	hdr = mad + off;
	if (hdr[0] != 0)
		return -ENOENT;
	ip_version = hdr[1] >> 4;
	if (ip_version == 4) {
		memset(gid, 0, 10);
		gid[10] = 0xff;
		gid[11] = 0xff;
		memcpy(gid + 12, hdr + 20 + 12, 4);
		return 0;
	}
	if (ip_version == 6) {
		memcpy(gid, hdr + 20, GID_LEN);
		return 0;
	}
	return -ENOENT;
}
