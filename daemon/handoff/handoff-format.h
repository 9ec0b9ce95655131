/* SPDX-License-Identifier: MIT */
/*
 * The hand-off format: what one daemon process leaves in its memfds for
 * the next one (an upgrade, a downgrade, a restart or a crash). It is a
 * format, not the structs' memory: every field has a fixed offset and
 * size (checked by static asserts), enums are stored as the wire numbers
 * below (never the compiler's numbering), counters by name, and sections
 * and records carry their type and length, so that a reader of another
 * version takes what it knows and skips the rest.
 *
 * Two memfds, each starting with the same header page (4096 bytes):
 *
 *   "state"     kind 1: the clients, the counters, the answers owed, the
 *               crash-loop guard, the VMs (handoff-state.c)
 *   "sessions"  kind 2: the session table (daemon/sessions/, one section
 *               whose records are the live sessions, written in place)
 *
 * Header (HandoffHeader, little-endian host order, 256 bytes):
 *
 *   off size field
 *     0    8 magic "RMUXHOFF"
 *     8    2 major: a reader refuses another major
 *    10    2 minor: a reader reads every minor of its major (older ones
 *              have fewer fields and sections, newer ones more)
 *    12    4 header_size: bytes of this header (256); the directory follows
 *    16    4 kind: HANDOFF_KIND_*
 *    20    4 n_sections: entries in the directory
 *    24    8 pair_id: the same random value in both memfds of one writer
 *    32   32 writer: the writer's version, e.g. "rdmacm-mux 0.2.0"
 *    64   64 dev: the device, NUL-terminated
 *   128    4 port
 *   132    4 reserved (zero)
 *   136    8 generation: how many conversions made it (0.1.0's count as
 *              0, a fresh one is 0, a conversion is its source's + 1): of
 *              two memfds of one kind in the store, the higher is current
 *   144  112 reserved (zero)
 *
 * Section directory: n_sections entries (HandoffSection, 40 bytes) from
 * offset header_size, all inside the first page:
 *
 *   off size field
 *     0    4 type: HANDOFF_SECTION_*; a reader skips types it does not know
 *     4    4 flags (zero)
 *     8    8 offset: of the section's bytes, from the start of the memfd
 *    16    8 length: the section's bytes
 *    24    4 record_size: bytes per record, a multiple of 4 (0: not an
 *              array of records)
 *    28    4 n_records: records in use (or the array's size, see below)
 *    32    4 arg0 \ what they mean is the section's
 *    36    4 arg1 /
 *
 * Sections of the state memfd:
 *
 *   CLIENTS   n_records slots (the writer's max clients), record_size
 *             bytes each; arg0 = bytes before the GIDs (24 in 2.0),
 *             arg1 = GIDs a slot holds. A slot:
 *               0  4 id (0: free)          16 4 n_gids
 *               4  4 flags (HANDOFF_CLIENT_F_*)  20 4 reserved
 *               8  8 caps              arg0 .. GIDs, 16 bytes each
 *   COUNTERS  arg0 = n counters: n u64 values from the section's start,
 *             then (from offset ALIGN64(8n)) n names of
 *             HANDOFF_COUNTER_NAME_LEN bytes, NUL-padded. Value i is
 *             the counter named by name i.
 *   OWED      n_records slots of record_size bytes; arg0 = frame size,
 *             arg1 = the mark: records from it on were never written
 *             (raised before a record past it is; a reader reads below it).
 *             An answer this process owes a client (HandoffOwed):
 *               0  4 client_id (0: free)    8 8 seq (order per client)
 *               4  4 reserved              16 .. the request's frame
 *   GUARD     one HandoffGuard: starts since the last settled run.
 *   VMS       the VMs' assignments and counters: an image of daemon/vm/'s
 *             own self-describing format (vm-state.h: magic, version,
 *             typed records), of variable length, so kept twice:
 *             n_records = 2 copies of record_size bytes (arg0, arg1 zero).
 *             A copy (HandoffCopy):
 *               0  8 sequence (0: never written)   12 4 reserved
 *               8  4 length: the image's bytes     16 .. the image
 *             The current copy is the one of higher sequence whose length
 *             fits its record. A writer rewrites the other one: its
 *             sequence zeroed first, the image and length written, the
 *             sequence (the current's + 1) set last.
 *
 * The sessions memfd holds one SESSIONS section at offset 4096: its
 * length is the table's capacity times record_size, n_records the slots
 * ever used (session-table.h describes a record).
 *
 * Writing: everything is written in place, in an order that leaves a
 * usable state whatever instant a SIGKILL picks (a field before the count
 * or id that makes it count; an id cleared before its slot is reused).
 * The header and directory are written once, when the memfd is made; only
 * the SESSIONS entry's length and n_records (growth) and the OWED entry's
 * mark change afterwards.
 *
 * Reading (handoff-state.c, handoff-legacy.c): a reader uses a memfd in
 * place when its layout is exactly the reader's own (same sections, record
 * sizes, counter names and sizes); otherwise it converts what it can into
 * a fresh memfd of its own format (one generation up), field by field and
 * counter by name, stores it under the kind's other name ("state" and
 * "state~", "sessions" and "sessions~") and only then removes the old
 * one: a crash at any step leaves the store a usable memfd, the highest
 * generation (daemon/relay/relay-handoff.c). The store never holds one memfd under two
 * names: systemd keeps one copy of a file, whatever its names. What does not hold up is dropped item by
 * item (one client, one session, one answer), each with a log line.
 *
 * Versions read: 2.x (this format; a newer minor's extra fields, records
 * and sections are ignored), and 1, the raw layout of 0.1.0
 * ("RMUXSTAT"/"RMUXSESS" version 1, handoff-legacy.c).
 *
 * Minors: 2.0; 2.1 appends last_tx and last_rx to a session record (100
 * bytes) and adds the VMS section.
 *
 * How to change it:
 *  - a counter: nothing here. The writer gives its counters as a vector
 *    of names (HandoffShape), and they go by name (the relay's are
 *    daemon/relay/relay-counters.h's).
 *  - an enum value (a session state or timer, a CM attribute): a new wire
 *    number in the tables of handoff-format.c; never reuse or renumber
 *    one (the unit test checks the tables are whole and unique).
 *  - a session field: append it to Session (session-table.h), give its
 *    offset a static assert, bump HANDOFF_MINOR and give the new minor
 *    its row of record sizes in test-handoff-state.c (which fails until
 *    it has one). Zero must mean "not known": a record written by an
 *    older minor reads as zero there.
 *  - a client field: append it to HandoffClientSlot before the GIDs (the
 *    GIDs move: readers find them at arg0), bump HANDOFF_MINOR, as above.
 *  - a section: a new HANDOFF_SECTION_* number, and an entry in the
 *    section table of handoff-state.c (its size in a fresh state, whether
 *    a predecessor's is usable in place, how to convert one). The readers
 *    of the other sections do not change; an older reader skips it.
 *  - anything an older reader of the same major cannot skip: a new major.
 */
#ifndef RDMACM_MUX_HANDOFF_FORMAT_H
#define RDMACM_MUX_HANDOFF_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdmacm-mux-proto.h"

#define HANDOFF_MAGIC "RMUXHOFF"
#define HANDOFF_MAJOR 2u
#ifdef RDMACM_MUX_HANDOFF_FUTURE
/* The test-only "future" build (meson option handoff_future). */
#define HANDOFF_MINOR 2u
#else
#define HANDOFF_MINOR 1u
#endif
#define HANDOFF_PAGE 4096u
#define HANDOFF_HEADER_SIZE 256u
#define HANDOFF_MAX_SECTIONS ((HANDOFF_PAGE - HANDOFF_HEADER_SIZE) / 40u)

#define HANDOFF_KIND_STATE 1u
#define HANDOFF_KIND_SESSIONS 2u

/* Section types: never reuse a number. */
#define HANDOFF_SECTION_CLIENTS 1u
#define HANDOFF_SECTION_COUNTERS 2u
#define HANDOFF_SECTION_OWED 3u
#define HANDOFF_SECTION_GUARD 4u
#define HANDOFF_SECTION_VMS 5u

/* A copy of the VMs' state longer than this is not one of ours. */
#define HANDOFF_VMS_MAX_BYTES (64u << 20)
/* Copies a reader looks at, at most (2 are written). */
#define HANDOFF_MAX_COPIES 16u
/* A copy's sequence no writer reaches: the taker numbers it anew. */
#define HANDOFF_COPY_SEQUENCE_MAX (1ull << 62)
#define HANDOFF_SECTION_SESSIONS 16u

typedef struct HandoffHeader {
	char magic[8];
	uint16_t major;
	uint16_t minor;
	uint32_t header_size;
	uint32_t kind;
	uint32_t n_sections;
	uint64_t pair_id;
	char writer[32];
	char dev[64];
	uint32_t port;
	uint32_t reserved0;
	uint64_t generation;
	uint8_t reserved[112];
} HandoffHeader;

typedef struct HandoffSection {
	uint32_t type;
	uint32_t flags;
	uint64_t offset;
	uint64_t length;
	uint32_t record_size;
	uint32_t n_records;
	uint32_t arg0;
	uint32_t arg1;
} HandoffSection;

#define HANDOFF_CLIENT_F_HELLO 0x1u
#define HANDOFF_CLIENT_F_C1_LOGGED 0x2u /* its "own GID in addr.gid" was logged */
#define HANDOFF_CLIENT_F_KNOWN (HANDOFF_CLIENT_F_HELLO | HANDOFF_CLIENT_F_C1_LOGGED)

typedef struct HandoffClientSlot {
	uint32_t id; /* 0: free */
	uint32_t flags;
	uint64_t caps;
	uint32_t n_gids;
	uint32_t reserved;
	uint8_t gids[][16]; /* arg1 of them, at arg0 */
} HandoffClientSlot;

#define HANDOFF_COUNTER_NAME_LEN 48u

typedef struct HandoffOwed {
	uint32_t client_id; /* 0: free */
	uint32_t reserved;
	uint64_t seq;
	struct rdmacm_mux_msg frame; /* the request, as the client sent it */
} HandoffOwed;

typedef struct HandoffGuard {
	uint32_t unsettled_starts; /* starts that took state over and did not settle */
	uint32_t reserved;
	uint64_t reserved2;
} HandoffGuard;

/* One copy of a section kept twice (VMS). */
typedef struct HandoffCopy {
	uint64_t sequence; /* 0: never written */
	uint32_t length;
	uint32_t reserved;
	uint8_t bytes[];
} HandoffCopy;

#define HANDOFF_ASSERT_FIELD(type, field, off, size)                                     \
	_Static_assert(offsetof(type, field) == (off) &&                                 \
			       sizeof(((type *)0)->field) == (size),                     \
		       #type "." #field " is at " #off ", " #size " bytes")

HANDOFF_ASSERT_FIELD(HandoffHeader, magic, 0, 8);
HANDOFF_ASSERT_FIELD(HandoffHeader, major, 8, 2);
HANDOFF_ASSERT_FIELD(HandoffHeader, minor, 10, 2);
HANDOFF_ASSERT_FIELD(HandoffHeader, header_size, 12, 4);
HANDOFF_ASSERT_FIELD(HandoffHeader, kind, 16, 4);
HANDOFF_ASSERT_FIELD(HandoffHeader, n_sections, 20, 4);
HANDOFF_ASSERT_FIELD(HandoffHeader, pair_id, 24, 8);
HANDOFF_ASSERT_FIELD(HandoffHeader, writer, 32, 32);
HANDOFF_ASSERT_FIELD(HandoffHeader, dev, 64, 64);
HANDOFF_ASSERT_FIELD(HandoffHeader, port, 128, 4);
HANDOFF_ASSERT_FIELD(HandoffHeader, generation, 136, 8);
_Static_assert(sizeof(HandoffHeader) == HANDOFF_HEADER_SIZE, "HandoffHeader is 256 bytes");
HANDOFF_ASSERT_FIELD(HandoffSection, type, 0, 4);
HANDOFF_ASSERT_FIELD(HandoffSection, flags, 4, 4);
HANDOFF_ASSERT_FIELD(HandoffSection, offset, 8, 8);
HANDOFF_ASSERT_FIELD(HandoffSection, length, 16, 8);
HANDOFF_ASSERT_FIELD(HandoffSection, record_size, 24, 4);
HANDOFF_ASSERT_FIELD(HandoffSection, n_records, 28, 4);
HANDOFF_ASSERT_FIELD(HandoffSection, arg0, 32, 4);
HANDOFF_ASSERT_FIELD(HandoffSection, arg1, 36, 4);
_Static_assert(sizeof(HandoffSection) == 40, "HandoffSection is 40 bytes");
HANDOFF_ASSERT_FIELD(HandoffClientSlot, id, 0, 4);
HANDOFF_ASSERT_FIELD(HandoffClientSlot, flags, 4, 4);
HANDOFF_ASSERT_FIELD(HandoffClientSlot, caps, 8, 8);
HANDOFF_ASSERT_FIELD(HandoffClientSlot, n_gids, 16, 4);
HANDOFF_ASSERT_FIELD(HandoffClientSlot, reserved, 20, 4);
_Static_assert(offsetof(HandoffClientSlot, gids) == 24, "client GIDs at 24");
HANDOFF_ASSERT_FIELD(HandoffOwed, client_id, 0, 4);
HANDOFF_ASSERT_FIELD(HandoffOwed, seq, 8, 8);
_Static_assert(offsetof(HandoffOwed, frame) == 16, "owed frame at 16");
HANDOFF_ASSERT_FIELD(HandoffGuard, unsettled_starts, 0, 4);
_Static_assert(sizeof(HandoffGuard) == 16, "HandoffGuard is 16 bytes");
HANDOFF_ASSERT_FIELD(HandoffCopy, sequence, 0, 8);
HANDOFF_ASSERT_FIELD(HandoffCopy, length, 8, 4);
HANDOFF_ASSERT_FIELD(HandoffCopy, reserved, 12, 4);
_Static_assert(offsetof(HandoffCopy, bytes) == 16, "a copy's bytes at 16");

/* ---- the memfds' first page ---- */

/**
 * handoff_header_init() - write a header of @kind with @n sections (their
 * entries zeroed, to be filled) into @page (HANDOFF_PAGE bytes, zeroed).
 * Return: the directory's first entry.
 */
HandoffSection *handoff_header_init(void *page, uint32_t kind, uint32_t n, uint64_t pair_id,
				    const char *dev, int port);

/**
 * handoff_header_check() - whether @page (the first @len bytes of a memfd
 * of @file_size bytes) holds a header of this major and @kind whose
 * directory lies inside the page and whose sections lie inside the file,
 * without overlapping each other or the page. Nothing else is trusted.
 * Return: 0; -EPROTO when it is not a hand-off header of this major (or of
 * another kind); -EBADMSG when it is, but its header or directory does
 * not hold up. @why (may be NULL) gets a static reason.
 */
int handoff_header_check(const void *page, size_t len, uint64_t file_size, uint32_t kind,
			 const char **why);

/**
 * handoff_memfd_generation() - the generation of the hand-off memfd @fd of
 * @kind: its header's for this major, 0 for 0.1.0's layout.
 * Return: it, or -1 for anything else (unreadable, not ours).
 */
int64_t handoff_memfd_generation(int fd, uint32_t kind);

/**
 * handoff_header_find() - the first directory entry of @type, or NULL.
 * The header was checked (handoff_header_check()). A second entry of the
 * same type is ignored.
 */
const HandoffSection *handoff_header_find(const void *page, uint32_t type);

/* ---- enums as wire numbers ---- */

/* One enum value's stable wire number and name. */
typedef struct HandoffWire {
	uint32_t wire; /* never 0 */
	const char *name;
} HandoffWire;

/*
 * The mapping tables, indexed by the daemon's enum value: SessionState,
 * SessionTimer, CmAttrIndex (a session record holds the last attribute
 * each way; the relay names its per-attribute counters by these names). A
 * value without an entry, or two with one wire number, fails the unit
 * test; a wire number this build does not know maps to -1
 * (handoff_wire_to_enum()).
 */
typedef enum HandoffEnum {
	HANDOFF_ENUM_SESSION_STATE,
	HANDOFF_ENUM_SESSION_TIMER,
	HANDOFF_ENUM_CM_ATTR,
	HANDOFF_ENUM_COUNT,
} HandoffEnum;

/* The table of @e and its size. */
const HandoffWire *handoff_wire_table(HandoffEnum e, unsigned *ret_n);
/* The enum value of wire number @wire, or -1. */
int handoff_wire_to_enum(HandoffEnum e, uint32_t wire);

/* The writer string of this build. */
const char *handoff_writer(void);

#define HANDOFF_ALIGN64(x) (((x) + 63u) & ~(uint64_t)63u)
#define HANDOFF_ALIGN8(x) (((x) + 7u) & ~(uint64_t)7u)

#endif
