/* SPDX-License-Identifier: MIT */
/*
 * CM MADs for test programs: build the messages of the IB CM class (REQ,
 * MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ, SIDR_REP, LAP, APR) and read
 * their fields back. Network byte order, absolute offsets in the 256-byte
 * MAD (IBTA vol 1 ch. 12 and 16.7).
 *
 * libc and proto/ only, so that every kind of test links it: GTest unit
 * tests, the integration harness, the fuzzers, the soak, the bench, and the
 * test clients that run inside VMs. It is written apart from the daemon's
 * cm-codec on purpose: the tests check the codec, not a copy of it.
 */
#ifndef RDMACM_MUX_TEST_CM_MAD_H
#define RDMACM_MUX_TEST_CM_MAD_H

#include <stddef.h>
#include <stdint.h>

/* An InfiniBand GID: 16 bytes, as in the MAD, the frame and the GRH. */
#define IB_GID_LEN 16

/* Common MAD header values of every CM MAD. */
#define CM_MAD_BASE_VERSION 1
#define CM_MAD_CLASS 0x07
#define CM_MAD_CLASS_VERSION 2
#define CM_MAD_METHOD_SEND 0x03

/* Attribute ids. */
#define CM_REQ 0x10
#define CM_MRA 0x11
#define CM_REJ 0x12
#define CM_REP 0x13
#define CM_RTU 0x14
#define CM_DREQ 0x15
#define CM_DREP 0x16
#define CM_SIDR_REQ 0x17
#define CM_SIDR_REP 0x18
#define CM_LAP 0x19
#define CM_APR 0x1a

/* Field offsets. */
#define MAD_OFF_TID 8
#define MAD_OFF_ATTR 16
#define MAD_OFF_LOCAL_COMM_ID 24  /* SIDR_REQ, SIDR_REP: RequestID */
#define MAD_OFF_REMOTE_COMM_ID 28 /* not in SIDR messages */
#define MAD_OFF_SERVICE_ID 32	  /* REQ and SIDR_REQ */
#define MAD_OFF_REQ_PKEY 72
#define MAD_OFF_REQ_LOCAL_GID 80  /* Primary LocalPortGID */
#define MAD_OFF_REQ_REMOTE_GID 96 /* Primary RemotePortGID */
#define MAD_OFF_SIDR_REP_QPN 32

/**
 * mad_build() - a CM MAD of attribute @attr, every other byte zero.
 * @mad: 256 bytes, all written
 * @attr: attribute id (CM_REQ, ...)
 * @local: LocalCommID (SIDR: RequestID)
 * @remote: RemoteCommID; ignored for SIDR_REQ and SIDR_REP, which have none
 * @tid: TransactionID
 */
void mad_build(uint8_t mad[256], uint16_t attr, uint32_t local, uint32_t remote, uint64_t tid);

/**
 * mad_build_req() - a REQ from @sgid to @dgid: ServiceID MAD_TEST_SERVICE_ID,
 * P_Key 0xffff and the primary path's port GIDs.
 */
void mad_build_req(uint8_t mad[256], uint32_t local, const uint8_t sgid[IB_GID_LEN],
		   const uint8_t dgid[IB_GID_LEN], uint64_t tid);

/* The ServiceID mad_build_req() puts in a REQ. */
#define MAD_TEST_SERVICE_ID 0x01064e20ull

/* Only the common header: base version, class, class version, method Send.
 * Nothing else is touched (for MADs filled with a pattern first). */
void mad_set_cm_header(uint8_t *mad);
void mad_set_attr(uint8_t *mad, uint16_t attr);
void mad_set_tid(uint8_t *mad, uint64_t tid);
/* The low 32 bits of the TID, all that survives the kernel. */
void mad_set_tid_low(uint8_t *mad, uint32_t low);
void mad_set_local(uint8_t *mad, uint32_t id);
void mad_set_remote(uint8_t *mad, uint32_t id);
void mad_set_service_id(uint8_t *mad, uint64_t id);
/* REQ: Primary LocalPortGID and RemotePortGID. */
void mad_set_req_gids(uint8_t *mad, const uint8_t sgid[IB_GID_LEN],
		      const uint8_t dgid[IB_GID_LEN]);
/* REJ: MessageRejected (0 REQ, 1 REP, 2 other) and Reason. */
void mad_set_rej(uint8_t *mad, unsigned msg_rejected, uint16_t reason);
/* MRA: MessageMRAed (0 REQ, 1 REP, 2 other). */
void mad_set_mra(uint8_t *mad, unsigned msg_mraed);
/* SIDR_REP: the 24-bit QPN. */
void mad_set_sidr_rep_qpn(uint8_t *mad, uint32_t qpn);

/* Where an attribute's PrivateData starts, and how long it is (0 for an
 * attribute that is not one of the eleven). */
size_t mad_private_data_offset(uint16_t attr);
size_t mad_private_data_len(uint16_t attr);
/* Copy @len bytes (at most the attribute's PrivateData) to the start of the
 * PrivateData of the attribute already in @mad. Return: bytes copied. */
size_t mad_set_private_data(uint8_t *mad, const void *data, size_t len);

uint16_t mad_attr(const uint8_t *mad);
uint64_t mad_tid(const uint8_t *mad);
uint32_t mad_tid_low(const uint8_t *mad);
uint32_t mad_local(const uint8_t *mad);
uint32_t mad_remote(const uint8_t *mad);
uint64_t mad_service_id(const uint8_t *mad);
/* REJ Reason. */
uint16_t mad_rej_reason(const uint8_t *mad);

/* "REQ", ..., "APR", or "?" for another attribute. */
const char *mad_attr_name(uint16_t attr);

#endif
