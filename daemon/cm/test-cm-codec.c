/* SPDX-License-Identifier: MIT */
/* Unit tests of the CM codec: classification, field access, rewriting. */
#include <glib.h>
#include <string.h>

#include "cm-codec.h"
#include "unit-test.h"

static void mad_init(uint8_t mad[MAD_LEN], uint16_t attr)
{
	memset(mad, 0, MAD_LEN);
	mad[0] = 1;
	mad[1] = 0x07;
	mad[2] = 2;
	mad[3] = 0x03;
	mad[16] = (uint8_t)(attr >> 8);
	mad[17] = (uint8_t)attr;
}

UNIT_TEST("/cm-codec/check/accepts-every-attribute", test_check_accepts_every_attribute)
{
	const uint16_t attrs[] = { CM_ATTR_REQ, CM_ATTR_MRA, CM_ATTR_REJ, CM_ATTR_REP,
				   CM_ATTR_RTU, CM_ATTR_DREQ, CM_ATTR_DREP, CM_ATTR_SIDR_REQ,
				   CM_ATTR_SIDR_REP, CM_ATTR_LAP, CM_ATTR_APR };
	uint8_t mad[MAD_LEN];
	uint16_t attr = 0;

	for (size_t i = 0; i < G_N_ELEMENTS(attrs); i++) {
		mad_init(mad, attrs[i]);
		g_assert_cmpint(cm_mad_check(mad, MAD_LEN, &attr), ==, 0);
		g_assert_cmpuint(attr, ==, attrs[i]);
		g_assert_cmpint(cm_attr_to_index(attrs[i]), ==, (int)i);
	}
}

UNIT_TEST("/cm-codec/check/refuses", test_check_refuses)
{
	uint8_t mad[MAD_LEN];

	mad_init(mad, CM_ATTR_REQ);
	g_assert_cmpint(cm_mad_check(mad, 23, NULL), ==, -EMSGSIZE);
	g_assert_cmpint(cm_mad_check(mad, 257, NULL), ==, -EMSGSIZE);
	g_assert_cmpint(cm_mad_check(NULL, 256, NULL), ==, -EMSGSIZE);
	/* REQ needs its destination GID, bytes 96..111. */
	g_assert_cmpint(cm_mad_check(mad, 111, NULL), ==, -EBADMSG);
	g_assert_cmpint(cm_mad_check(mad, 112, NULL), ==, 0);

	mad[1] = 0x03; /* SA class */
	g_assert_cmpint(cm_mad_check(mad, MAD_LEN, NULL), ==, -EPROTO);
	mad_init(mad, CM_ATTR_REQ);
	mad[2] = 1;
	g_assert_cmpint(cm_mad_check(mad, MAD_LEN, NULL), ==, -EPROTO);
	mad_init(mad, CM_ATTR_REQ);
	mad[3] = 0x01; /* Get */
	g_assert_cmpint(cm_mad_check(mad, MAD_LEN, NULL), ==, -EPROTO);
	mad_init(mad, CM_ATTR_REQ);
	mad[0] = 2;
	g_assert_cmpint(cm_mad_check(mad, MAD_LEN, NULL), ==, -EPROTO);

	mad_init(mad, CM_ATTR_CLASS_PORT_INFO);
	g_assert_cmpint(cm_mad_check(mad, MAD_LEN, NULL), ==, -EOPNOTSUPP);
	mad_init(mad, 0x001b); /* SAP */
	g_assert_cmpint(cm_mad_check(mad, MAD_LEN, NULL), ==, -EOPNOTSUPP);
	mad_init(mad, CM_ATTR_REJ);
	g_assert_cmpint(cm_mad_check(mad, 35, NULL), ==, -EBADMSG);
	mad_init(mad, CM_ATTR_SIDR_REP);
	g_assert_cmpint(cm_mad_check(mad, 27, NULL), ==, -EBADMSG);
	g_assert_cmpint(cm_mad_check(mad, 28, NULL), ==, 0);
}

UNIT_TEST("/cm-codec/comm-ids", test_comm_ids_are_big_endian_at_24_and_28)
{
	uint8_t mad[MAD_LEN];

	mad_init(mad, CM_ATTR_REP);
	cm_set_local_comm_id(mad, 0x11223344);
	cm_set_remote_comm_id(mad, 0xa1b2c3d4);
	g_assert_cmpuint(mad[24], ==, 0x11);
	g_assert_cmpuint(mad[27], ==, 0x44);
	g_assert_cmpuint(mad[28], ==, 0xa1);
	g_assert_cmpuint(mad[31], ==, 0xd4);
	g_assert_cmpuint(cm_get_local_comm_id(mad), ==, 0x11223344);
	g_assert_cmpuint(cm_get_remote_comm_id(mad), ==, 0xa1b2c3d4);

	mad_init(mad, CM_ATTR_SIDR_REQ);
	cm_set_sidr_request_id(mad, 0xdeadbeef);
	g_assert_cmpuint(mad[24], ==, 0xde);
	g_assert_cmpuint(cm_get_sidr_request_id(mad), ==, 0xdeadbeef);
	g_assert_false(cm_attr_has_comm_ids(CM_ATTR_SIDR_REQ));
	g_assert_true(cm_attr_has_comm_ids(CM_ATTR_APR));
}

UNIT_TEST("/cm-codec/tid", test_tid_low_half)
{
	uint8_t mad[MAD_LEN];

	mad_init(mad, CM_ATTR_REQ);
	for (int i = 0; i < 8; i++)
		mad[8 + i] = (uint8_t)(0x10 + i);
	cm_set_tid_low(mad, 0xcafef00d);
	g_assert_cmphex(cm_get_tid(mad), ==, 0x10111213cafef00dull);
}

UNIT_TEST("/cm-codec/rej-mra", test_rej_and_mra_fields)
{
	uint8_t mad[MAD_LEN];

	mad_init(mad, CM_ATTR_REJ);
	mad[32] = (uint8_t)(CM_MSG_REP << 6);
	mad[34] = 0;
	mad[35] = CM_REJ_REASON_TIMEOUT;
	g_assert_cmpuint(cm_rej_msg_rejected(mad), ==, CM_MSG_REP);
	g_assert_cmpuint(cm_rej_reason(mad), ==, 4);
	mad_init(mad, CM_ATTR_MRA);
	mad[32] = (uint8_t)(CM_MSG_OTHER << 6) | 0x15;
	g_assert_cmpuint(cm_mra_msg_mraed(mad), ==, CM_MSG_OTHER);
}

UNIT_TEST("/cm-codec/req-gids", test_req_gids)
{
	uint8_t mad[MAD_LEN];

	mad_init(mad, CM_ATTR_REQ);
	for (int i = 0; i < 16; i++) {
		mad[80 + i] = (uint8_t)(0x80 + i);
		mad[96 + i] = (uint8_t)(0x60 + i);
	}
	g_assert_cmpuint(cm_req_local_gid(mad)[0], ==, 0x80);
	g_assert_cmpuint(cm_req_remote_gid(mad)[15], ==, 0x6f);
}

UNIT_TEST("/cm-codec/cma-dst-gid", test_cma_dst_gid)
{
	uint8_t mad[MAD_LEN], gid[16];
	const uint8_t v4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 2, 2 };

	/* SIDR_REQ private data at 40: cma_hdr version 0, IPv4. */
	mad_init(mad, CM_ATTR_SIDR_REQ);
	mad[41] = 4 << 4;
	mad[72] = 10, mad[73] = 0, mad[74] = 2, mad[75] = 2; /* dst at 60..75 */
	g_assert_cmpint(cm_cma_dst_gid(mad, MAD_LEN, gid), ==, 0);
	g_assert_cmpmem(gid, 16, v4, 16);

	/* IPv6 in a REQ: private data at 164, dst at 184..199. */
	mad_init(mad, CM_ATTR_REQ);
	mad[165] = 6 << 4;
	for (int i = 0; i < 16; i++)
		mad[184 + i] = (uint8_t)i;
	g_assert_cmpint(cm_cma_dst_gid(mad, MAD_LEN, gid), ==, 0);
	g_assert_cmpuint(gid[15], ==, 15);

	/* Not a cma_hdr: bad version, bad IP version, too short, wrong attr. */
	mad[164] = 1;
	g_assert_cmpint(cm_cma_dst_gid(mad, MAD_LEN, gid), ==, -ENOENT);
	mad[164] = 0;
	mad[165] = 5 << 4;
	g_assert_cmpint(cm_cma_dst_gid(mad, MAD_LEN, gid), ==, -ENOENT);
	mad[165] = 6 << 4;
	g_assert_cmpint(cm_cma_dst_gid(mad, 199, gid), ==, -ENOENT);
	mad_init(mad, CM_ATTR_REP);
	g_assert_cmpint(cm_cma_dst_gid(mad, MAD_LEN, gid), ==, -ENOENT);
}

UNIT_TEST("/cm-codec/names", test_names)
{
	char buf[16];

	g_assert_cmpstr(cm_attr_name(CM_ATTR_SIDR_REP, buf), ==, "SIDR_REP");
	g_assert_cmpstr(cm_attr_name(CM_ATTR_CLASS_PORT_INFO, buf), ==, "ClassPortInfo");
	g_assert_cmpstr(cm_attr_name(0x1234, buf), ==, "attr-0x1234");
	g_assert_cmpstr(cm_attr_index_name(CM_IDX_APR), ==, "APR");
}

UNIT_TEST_MAIN()
