/* SPDX-License-Identifier: MIT */
/*
 * rdmacm-mux wire protocol: the frame that crosses the daemon's UNIX socket.
 *
 * The base protocol is QEMU's pvrdma "rdmacm-mux" protocol (QEMU 4.0 to 9.0),
 * reproduced byte for byte: one fixed-size frame per message in both
 * directions, no length prefix, host byte order for the header integers,
 * network byte order for GIDs and everything inside the MAD. The frame is
 * a plain C struct whose size depends on the ABI: 360 bytes where 64-bit
 * integers are 8-byte aligned inside structs (x86_64, aarch64, ...), 352
 * bytes on i386. Both ends always run on the same host, so this is safe.
 *
 * On top of it sits an extension that only rdmacm-mux's own client library
 * uses: a version and capability handshake (RDMACM_MUX_OP_CODE_HELLO) and a
 * per-client statistics query. Extension op codes live in a range that QEMU
 * never sends, and the daemon never sends an extension frame to a client
 * that did not complete the handshake, so an old QEMU client sees exactly
 * the protocol it was written for. See proto/PROTOCOL.md.
 *
 * This header depends on libc only. Do not add libibumad or glib types.
 */
#ifndef RDMACM_MUX_PROTO_H
#define RDMACM_MUX_PROTO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#define RDMACM_MUX_STATIC_ASSERT static_assert
#else
#define RDMACM_MUX_STATIC_ASSERT _Static_assert
#endif

/* hdr.msg_type */
#define RDMACM_MUX_MSG_TYPE_REQ 0u  /* client request, or an inbound MAD */
#define RDMACM_MUX_MSG_TYPE_RESP 1u /* the daemon's answer to a request */

/* hdr.op_code: the QEMU-compatible operations */
#define RDMACM_MUX_OP_CODE_REG 0u   /* register hdr.sgid to this client */
#define RDMACM_MUX_OP_CODE_UNREG 1u /* unregister hdr.sgid */
#define RDMACM_MUX_OP_CODE_MAD 2u   /* a CM MAD, either direction */

/*
 * Extension op codes (rdmacm-mux only). They start far above anything QEMU
 * defined. A daemon that does not know them (QEMU's own mux) answers with
 * RDMACM_MUX_ERR_CODE_EINVAL, which lets a client fall back to the base
 * protocol.
 */
#define RDMACM_MUX_OP_CODE_EXT_FIRST 0x00010000u
#define RDMACM_MUX_OP_CODE_HELLO 0x00010000u	    /* version/capabilities */
#define RDMACM_MUX_OP_CODE_CLIENT_STATS 0x00010001u /* this client's counters */
#define RDMACM_MUX_OP_CODE_EXT_LAST 0x0001ffffu

/*
 * hdr.err_code in a RESP frame. The base protocol uses these small positive
 * values, except for a MAD that the kernel refused to send, which carries a
 * negative errno (QEMU's mux passed umad_send()'s -EIO). A client that was
 * granted RDMACM_MUX_CAP_ERRNO gets a negative errno for every failure
 * instead, which says more (for example -EDQUOT for a quota).
 */
#define RDMACM_MUX_ERR_CODE_OK 0
#define RDMACM_MUX_ERR_CODE_EINVAL 1
#define RDMACM_MUX_ERR_CODE_EEXIST 2
#define RDMACM_MUX_ERR_CODE_EACCES 3
#define RDMACM_MUX_ERR_CODE_ENOTFOUND 4

/* The largest MAD the frame carries: one IB MAD. */
#define RDMACM_MUX_MAD_SIZE 256
/* The common MAD header at the start of every MAD. */
#define RDMACM_MUX_MAD_HDR_SIZE 24

/*
 * A GID, 16 bytes in network order. The 64-bit member exists only to give
 * the union QEMU's alignment (union ibv_gid), which decides the frame size.
 */
union rdmacm_mux_gid {
	uint8_t raw[16];
	struct {
		uint64_t subnet_prefix; /* network order */
		uint64_t interface_id;	/* network order */
	} global;
};

/* Same layout as libibumad's ib_mad_addr_t and the kernel's ABI, 44 bytes. */
struct rdmacm_mux_mad_addr {
	uint32_t qpn;	     /* network order */
	uint32_t qkey;	     /* network order */
	uint16_t lid;	     /* network order */
	uint8_t sl;
	uint8_t path_bits;
	uint8_t grh_present;
	uint8_t gid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t gid[16];     /* network order; TX: destination, RX: sender */
	uint32_t flow_label; /* network order */
	uint16_t pkey_index; /* host order */
	uint8_t reserved[6];
};

/* Same layout as libibumad's struct ib_user_mad header, 64 bytes. */
struct rdmacm_mux_umad_hdr {
	uint32_t agent_id;
	uint32_t status;
	uint32_t timeout_ms;
	uint32_t retries;
	uint32_t length;
	struct rdmacm_mux_mad_addr addr;
};

struct rdmacm_mux_hdr {
	uint32_t msg_type; /* RDMACM_MUX_MSG_TYPE_* */
	uint32_t op_code;  /* RDMACM_MUX_OP_CODE_* */
	union rdmacm_mux_gid sgid;
	int32_t err_code; /* RDMACM_MUX_ERR_CODE_* or a negative errno */
};

/* One frame. sizeof() is the exact number of bytes on the socket. */
struct rdmacm_mux_msg {
	struct rdmacm_mux_hdr hdr;
	int32_t umad_len; /* MAD bytes in umad.mad (extension payload bytes) */
	struct {
		struct rdmacm_mux_umad_hdr hdr;
		uint8_t mad[RDMACM_MUX_MAD_SIZE];
	} umad;
};

#define RDMACM_MUX_FRAME_SIZE (sizeof(struct rdmacm_mux_msg))

/*
 * Layout pins. The offsets of the fields inside the frame are the same on
 * every ABI up to sgid; from err_code on, i386 differs by the 4 bytes of
 * padding that x86_64 inserts after err_code.
 */
#define RDMACM_MUX_PROTO_ASSERT_OFF(field, off)                                \
	RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_msg, field) == (off),        \
		       "frame offset of " #field)

RDMACM_MUX_PROTO_ASSERT_OFF(hdr.msg_type, 0);
RDMACM_MUX_PROTO_ASSERT_OFF(hdr.op_code, 4);
RDMACM_MUX_PROTO_ASSERT_OFF(hdr.sgid, 8);
RDMACM_MUX_PROTO_ASSERT_OFF(hdr.err_code, 24);
RDMACM_MUX_STATIC_ASSERT(sizeof(struct rdmacm_mux_mad_addr) == 44, "ib_mad_addr size");
RDMACM_MUX_STATIC_ASSERT(sizeof(struct rdmacm_mux_umad_hdr) == 64, "ib_user_mad size");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_umad_hdr, addr) == 20, "addr");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_mad_addr, gid) == 16, "addr.gid");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_mad_addr, flow_label) == 32,
	       "addr.flow_label");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_mad_addr, pkey_index) == 36,
	       "addr.pkey_index");

#if defined(__x86_64__) || defined(__aarch64__) || defined(__powerpc64__) ||  \
	defined(__s390x__) || (defined(__riscv) && __riscv_xlen == 64)
#define RDMACM_MUX_FRAME_SIZE_EXPECTED 360
RDMACM_MUX_PROTO_ASSERT_OFF(umad_len, 32);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr, 36);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.agent_id, 36);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.status, 40);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.timeout_ms, 44);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.retries, 48);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.length, 52);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr, 56);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.qpn, 56);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.qkey, 60);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.lid, 64);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.sl, 66);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.path_bits, 67);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.grh_present, 68);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.gid_index, 69);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.hop_limit, 70);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.traffic_class, 71);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.gid, 72);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.flow_label, 88);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.pkey_index, 92);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.reserved, 94);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.mad, 100);
RDMACM_MUX_STATIC_ASSERT(sizeof(struct rdmacm_mux_msg) == 360, "frame size (LP64)");
#elif defined(__i386__)
#define RDMACM_MUX_FRAME_SIZE_EXPECTED 352
RDMACM_MUX_PROTO_ASSERT_OFF(umad_len, 28);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr, 32);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.hdr.addr.gid, 68);
RDMACM_MUX_PROTO_ASSERT_OFF(umad.mad, 96);
RDMACM_MUX_STATIC_ASSERT(sizeof(struct rdmacm_mux_msg) == 352, "frame size (i386)");
#endif

/* ---- extension payloads (carried in umad.mad, length in umad_len) ---- */

#define RDMACM_MUX_HELLO_MAGIC 0x524d5558u /* "RMUX", host order */
#define RDMACM_MUX_PROTO_VERSION_MAJOR 1u
#define RDMACM_MUX_PROTO_VERSION_MINOR 0u

/*
 * Capability bits. The client asks for a set in HELLO; the daemon answers
 * with the subset it grants. Unknown bits are ignored and never granted.
 */
#define RDMACM_MUX_CAP_ERRNO (1ull << 0)	/* err_code is always -errno */
#define RDMACM_MUX_CAP_CLIENT_STATS (1ull << 1) /* CLIENT_STATS is allowed */
#define RDMACM_MUX_CAP_ALL (RDMACM_MUX_CAP_ERRNO | RDMACM_MUX_CAP_CLIENT_STATS)

/* HELLO request and response payload (umad_len = sizeof). */
struct rdmacm_mux_hello {
	uint32_t magic;		/* RDMACM_MUX_HELLO_MAGIC */
	uint16_t version_major; /* the sender's protocol version */
	uint16_t version_minor;
	uint64_t capabilities; /* request: wanted; response: granted */
	uint32_t max_gids;     /* response: this client's GID quota */
	uint32_t max_sessions; /* response: this client's session quota */
	uint32_t max_queued;   /* response: output queue quota, in frames */
	uint32_t reserved;
};
RDMACM_MUX_STATIC_ASSERT(sizeof(struct rdmacm_mux_hello) == 32, "hello payload");

/* CLIENT_STATS response payload (umad_len = sizeof); all host order. */
struct rdmacm_mux_client_stats {
	uint64_t tx_mads;	  /* MADs this client sent to the wire */
	uint64_t tx_rejected;	  /* MADs refused (validation, quota, send) */
	uint64_t rx_mads;	  /* inbound MADs queued to this client */
	uint64_t rx_dropped;	  /* inbound MADs dropped: output queue full */
	uint64_t requests;	  /* request frames answered */
	uint32_t gids;		  /* GIDs registered now */
	uint32_t sessions;	  /* live sessions now */
	uint32_t queued;	  /* frames waiting in the output queue now */
	uint32_t reserved;
};
RDMACM_MUX_STATIC_ASSERT(sizeof(struct rdmacm_mux_client_stats) == 56, "client stats");

#ifdef __cplusplus
}
#endif

#endif /* RDMACM_MUX_PROTO_H */
