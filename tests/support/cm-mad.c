/* SPDX-License-Identifier: MIT */
/* Owns the test programs' CM MAD builders and field readers (cm-mad.h). */
#include "cm-mad.h"

#include <string.h>

#include "rdmacm-mux-bytes.h"

#define MAD_SIZE 256

void mad_set_cm_header(uint8_t *mad)
{
	mad[0] = CM_MAD_BASE_VERSION;
	mad[1] = CM_MAD_CLASS;
	mad[2] = CM_MAD_CLASS_VERSION;
	mad[3] = CM_MAD_METHOD_SEND;
}

void mad_set_attr(uint8_t *mad, uint16_t attr)
{
	put_be16(mad + MAD_OFF_ATTR, attr);
}

void mad_set_tid(uint8_t *mad, uint64_t tid)
{
	put_be64(mad + MAD_OFF_TID, tid);
}

void mad_set_tid_low(uint8_t *mad, uint32_t low)
{
	put_be32(mad + MAD_OFF_TID + 4, low);
}

void mad_set_local(uint8_t *mad, uint32_t id)
{
	put_be32(mad + MAD_OFF_LOCAL_COMM_ID, id);
}

void mad_set_remote(uint8_t *mad, uint32_t id)
{
	put_be32(mad + MAD_OFF_REMOTE_COMM_ID, id);
}

void mad_set_service_id(uint8_t *mad, uint64_t id)
{
	put_be64(mad + MAD_OFF_SERVICE_ID, id);
}

void mad_set_req_gids(uint8_t *mad, const uint8_t sgid[IB_GID_LEN], const uint8_t dgid[IB_GID_LEN])
{
	memcpy(mad + MAD_OFF_REQ_LOCAL_GID, sgid, IB_GID_LEN);
	memcpy(mad + MAD_OFF_REQ_REMOTE_GID, dgid, IB_GID_LEN);
}

void mad_set_rej(uint8_t *mad, unsigned msg_rejected, uint16_t reason)
{
	mad[32] = (uint8_t)(msg_rejected << 6);
	put_be16(mad + 34, reason);
}

void mad_set_mra(uint8_t *mad, unsigned msg_mraed)
{
	mad[32] = (uint8_t)(msg_mraed << 6);
}

void mad_set_sidr_rep_qpn(uint8_t *mad, uint32_t qpn)
{
	put_be32(mad + MAD_OFF_SIDR_REP_QPN, (qpn & 0xffffff) << 8);
}

void mad_build(uint8_t mad[256], uint16_t attr, uint32_t local, uint32_t remote, uint64_t tid)
{
	memset(mad, 0, MAD_SIZE);
	mad_set_cm_header(mad);
	mad_set_tid(mad, tid);
	mad_set_attr(mad, attr);
	mad_set_local(mad, local);
	if (attr != CM_SIDR_REQ && attr != CM_SIDR_REP)
		mad_set_remote(mad, remote);
}

void mad_build_req(uint8_t mad[256], uint32_t local, const uint8_t sgid[IB_GID_LEN],
		   const uint8_t dgid[IB_GID_LEN], uint64_t tid)
{
	mad_build(mad, CM_REQ, local, 0, tid);
	mad_set_service_id(mad, MAD_TEST_SERVICE_ID);
	put_be16(mad + MAD_OFF_REQ_PKEY, 0xffff);
	mad_set_req_gids(mad, sgid, dgid);
}

/* PrivateData sizes of IBTA vol 1 16.7 (the kernel's IB_CM_*_PRIVATE_DATA_SIZE);
 * each message's PrivateData runs to the end of the MAD. */
size_t mad_private_data_len(uint16_t attr)
{
	switch (attr) {
	case CM_REQ:
		return 92;
	case CM_MRA:
		return 222;
	case CM_REJ:
		return 148;
	case CM_REP:
		return 196;
	case CM_RTU:
		return 224;
	case CM_DREQ:
		return 220;
	case CM_DREP:
		return 224;
	case CM_SIDR_REQ:
		return 216;
	case CM_SIDR_REP:
		return 136;
	case CM_LAP:
		return 168;
	case CM_APR:
		return 148;
	default:
		return 0;
	}
}

size_t mad_private_data_offset(uint16_t attr)
{
	return MAD_SIZE - mad_private_data_len(attr);
}

size_t mad_set_private_data(uint8_t *mad, const void *data, size_t len)
{
	uint16_t attr = mad_attr(mad);
	size_t room = mad_private_data_len(attr);

	if (len > room)
		len = room;
	memcpy(mad + mad_private_data_offset(attr), data, len);
	return len;
}

uint16_t mad_attr(const uint8_t *mad)
{
	return get_be16(mad + MAD_OFF_ATTR);
}

uint64_t mad_tid(const uint8_t *mad)
{
	return get_be64(mad + MAD_OFF_TID);
}

uint32_t mad_tid_low(const uint8_t *mad)
{
	return get_be32(mad + MAD_OFF_TID + 4);
}

uint32_t mad_local(const uint8_t *mad)
{
	return get_be32(mad + MAD_OFF_LOCAL_COMM_ID);
}

uint32_t mad_remote(const uint8_t *mad)
{
	return get_be32(mad + MAD_OFF_REMOTE_COMM_ID);
}

uint64_t mad_service_id(const uint8_t *mad)
{
	return get_be64(mad + MAD_OFF_SERVICE_ID);
}

uint16_t mad_rej_reason(const uint8_t *mad)
{
	return get_be16(mad + 34);
}

const char *mad_attr_name(uint16_t attr)
{
	static const char *const names[] = { "REQ",  "MRA",	 "REJ",	     "REP", "RTU", "DREQ",
					     "DREP", "SIDR_REQ", "SIDR_REP", "LAP", "APR" };

	return attr >= CM_REQ && attr <= CM_APR ? names[attr - CM_REQ] : "?";
}
