/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer for the CM codec (daemon/cm/cm-codec.h) on arbitrary bytes and
 * lengths: cm_mad_check() must classify every input with one of its
 * documented results; on a MAD it accepts, every getter and setter that
 * the relay may use for that attribute must stay inside the checked length
 * (the buffer is an exact-size copy, so ASan sees any read past it), and
 * setters must change exactly their own bytes. cm_cma_dst_gid() runs on
 * every length from the MAD header on and must decode what it claims.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm-codec.h"
#include "fuzz-support.h"

static void check_set32(uint8_t *mad, size_t len, size_t off, uint32_t v,
			void (*set)(uint8_t *, uint32_t), uint32_t (*get)(const uint8_t *),
			const char *what)
{
	uint8_t *before = malloc(len);

	if (!before)
		abort();
	memcpy(before, mad, len);
	set(mad, v);
	fuzz_check(get(mad) == v, "%s: set 0x%x, got 0x%x", what, v, get(mad));
	for (size_t i = 0; i < len; i++)
		fuzz_check(i - off < 4 || mad[i] == before[i], "%s changed byte %zu", what, i);
	memcpy(mad, before, len);
	free(before);
}

static void check_cma(const uint8_t *mad, size_t len)
{
	uint8_t gid[16];
	uint16_t attr = cm_mad_attr(mad);
	size_t off = attr == CM_ATTR_REQ ? CM_OFF_REQ_PRIVATE : CM_OFF_SIDR_REQ_PRIVATE;
	int e = cm_cma_dst_gid(mad, len, gid);

	if (e == -ENOENT)
		return;
	fuzz_check(e == 0, "cm_cma_dst_gid returned %d", e);
	fuzz_check(attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ,
		   "cm_cma_dst_gid decoded attribute 0x%x", attr);
	fuzz_check(len >= off + 36, "cm_cma_dst_gid decoded a cut-off cma_hdr (len %zu)", len);
	fuzz_check(mad[off] == 0, "cm_cma_dst_gid accepted cma_hdr version %u", mad[off]);
	if (mad[off + 1] >> 4 == 4) {
		static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

		fuzz_check(memcmp(gid, prefix, 12) == 0 && memcmp(gid + 12, mad + off + 32, 4) == 0,
			   "cm_cma_dst_gid: wrong IPv4-mapped GID");
	} else {
		fuzz_check(mad[off + 1] >> 4 == 6, "cm_cma_dst_gid accepted ip_version %u",
			   mad[off + 1] >> 4);
		fuzz_check(memcmp(gid, mad + off + 20, 16) == 0, "cm_cma_dst_gid: wrong IPv6 GID");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *mad;
	uint16_t attr = 0xffff;
	char name[16];
	int e;

	/* The names and indexes are total functions of any attribute value. */
	if (size >= 2) {
		uint16_t any = (uint16_t)(data[0] << 8 | data[1]);
		CmAttrIndex idx = cm_attr_to_index(any);

		fuzz_check(idx < CM_IDX_COUNT, "cm_attr_to_index(0x%x) = %d", any, idx);
		fuzz_check(cm_attr_name(any, name) != NULL, "no name");
		fuzz_check(cm_attr_index_name((CmAttrIndex)(data[1] % 32)) != NULL, "no name");
		(void)cm_attr_has_comm_ids(any);
	}

	mad = malloc(size ? size : 1);
	if (!mad)
		abort();
	memcpy(mad, data, size);
	e = cm_mad_check(size ? mad : NULL, size, &attr);
	if (size < MAD_HDR_LEN || size > MAD_LEN) {
		fuzz_check(e == -EMSGSIZE, "length %zu: cm_mad_check returned %d", size, e);
		free(mad);
		return 0;
	}
	fuzz_check(attr == cm_mad_attr(mad), "cm_mad_check reported attribute 0x%x", attr);
	fuzz_check(e == 0 || e == -EPROTO || e == -EOPNOTSUPP || e == -EBADMSG,
		   "cm_mad_check returned %d", e);
	if (e == -EPROTO)
		fuzz_check(mad[0] != MAD_BASE_VERSION || mad[1] != CM_MGMT_CLASS ||
				   mad[2] != CM_CLASS_VERSION || mad[3] != CM_METHOD_SEND,
			   "-EPROTO for a CM Send header");
	/* cm_cma_dst_gid() takes a length: it must honour any from 24 on. */
	check_cma(mad, size);
	if (e < 0) {
		free(mad);
		return 0;
	}
	fuzz_check(mad[0] == MAD_BASE_VERSION && mad[1] == CM_MGMT_CLASS &&
			   mad[2] == CM_CLASS_VERSION && mad[3] == CM_METHOD_SEND,
		   "accepted a non-CM header");
	fuzz_check(attr != CM_ATTR_CLASS_PORT_INFO, "accepted ClassPortInfo");
	fuzz_check(cm_attr_to_index(attr) != CM_IDX_OTHER, "accepted attribute 0x%x", attr);

	/* Everything the relay reads or writes on any accepted MAD. */
	(void)cm_get_tid(mad);
	{
		uint8_t tid_before[8];

		memcpy(tid_before, mad + 8, 8);
		cm_set_tid_low(mad, 0xa5a5a5a5u);
		fuzz_check((cm_get_tid(mad) & 0xffffffffu) == 0xa5a5a5a5u &&
				   memcmp(mad + 8, tid_before, 4) == 0,
			   "cm_set_tid_low");
		memcpy(mad + 8, tid_before, 8);
	}
	switch (attr) {
	case CM_ATTR_SIDR_REQ:
	case CM_ATTR_SIDR_REP:
		fuzz_check(!cm_attr_has_comm_ids(attr), "SIDR has no comm ids");
		check_set32(mad, size, 24, 0x01020304u, cm_set_sidr_request_id,
			    cm_get_sidr_request_id, "sidr request id");
		break;
	default:
		fuzz_check(cm_attr_has_comm_ids(attr), "attribute 0x%x has comm ids", attr);
		check_set32(mad, size, CM_OFF_LOCAL_COMM_ID, 0xdeadbeefu, cm_set_local_comm_id,
			    cm_get_local_comm_id, "local comm id");
		check_set32(mad, size, CM_OFF_REMOTE_COMM_ID, 0x0badcafeu, cm_set_remote_comm_id,
			    cm_get_remote_comm_id, "remote comm id");
		fuzz_check(cm_mra_msg_mraed(mad) <= 3, "MessageMRAed out of range");
		break;
	}
	if (attr == CM_ATTR_REJ) {
		fuzz_check(cm_rej_msg_rejected(mad) <= 3, "MessageRejected out of range");
		(void)cm_rej_reason(mad);
	}
	if (attr == CM_ATTR_REQ) {
		uint8_t g[32];

		/* Copy, so that an out-of-range pointer is dereferenced here. */
		memcpy(g, cm_req_remote_gid(mad), 16);
		memcpy(g + 16, cm_req_local_gid(mad), 16);
		fuzz_check(memcmp(g, mad + CM_OFF_REQ_REMOTE_GID, 16) == 0, "REQ remote GID");
	}
	free(mad);
	return 0;
}
