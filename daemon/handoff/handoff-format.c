/* SPDX-License-Identifier: MIT */
/*
 * Owns the hand-off format's shared parts (handoff-format.h): the header
 * and section directory of both memfds and their checks, and the wire
 * numbers of the enums the session records hold.
 */
#include "handoff-format.h"

#include <errno.h>
#include <glib.h>
#include <string.h>
#include <unistd.h>

#include "cm-codec.h"
#include "config.h"
#include "session-table.h"

/* ---- header ---- */

HandoffSection *handoff_header_init(void *page, uint32_t kind, uint32_t n, uint64_t pair_id,
				    const char *dev, int port)
{
	HandoffHeader *h = page;

	/* Every field not named here, the reserved ones too, is zero. */
	*h = (HandoffHeader){
		.major = HANDOFF_MAJOR,
		.minor = HANDOFF_MINOR,
		.header_size = HANDOFF_HEADER_SIZE,
		.kind = kind,
		.n_sections = n,
		.pair_id = pair_id,
		.port = (uint32_t)port,
	};
	memcpy(h->magic, HANDOFF_MAGIC, sizeof(h->magic));
	g_strlcpy(h->writer, handoff_writer(), sizeof(h->writer));
	g_strlcpy(h->dev, dev, sizeof(h->dev));
	return (HandoffSection *)(void *)((uint8_t *)page + HANDOFF_HEADER_SIZE);
}

static const HandoffSection *handoff_directory(const void *page)
{
	const HandoffHeader *h = page;

	return (const HandoffSection *)(const void *)((const uint8_t *)page + h->header_size);
}

int handoff_header_check(const void *page, size_t len, uint64_t file_size, uint32_t kind,
			 const char **why)
{
	const HandoffHeader *h = page;
	const HandoffSection *dir;
	const char *dummy;

	if (!why)
		why = &dummy;
	if (len < HANDOFF_PAGE || file_size < HANDOFF_PAGE ||
	    memcmp(h->magic, HANDOFF_MAGIC, sizeof(h->magic)) != 0) {
		*why = "not a hand-off memfd";
		return -EPROTO;
	}
	if (h->major != HANDOFF_MAJOR) {
		*why = "of another major version";
		return -EPROTO;
	}
	if (h->kind != kind) {
		*why = "of another kind";
		return -EPROTO;
	}
	/* The header may grow in a later minor; the directory follows it,
	 * 8-byte aligned, inside the first page. */
	if (h->header_size < HANDOFF_HEADER_SIZE || h->header_size % 8 ||
	    h->n_sections > HANDOFF_MAX_SECTIONS ||
	    (uint64_t)h->header_size + (uint64_t)h->n_sections * sizeof(HandoffSection) >
		    HANDOFF_PAGE) {
		*why = "its header or section directory does not fit its first page";
		return -EBADMSG;
	}
	if (memchr(h->dev, 0, sizeof(h->dev)) == NULL || memchr(h->writer, 0, sizeof(h->writer)) == NULL) {
		*why = "its device or writer name is not terminated";
		return -EBADMSG;
	}
	dir = handoff_directory(page);
	for (uint32_t i = 0; i < h->n_sections; i++) {
		const HandoffSection *s = &dir[i];

		if (s->offset < HANDOFF_PAGE || s->offset % 8 || s->length > file_size ||
		    s->offset > file_size - s->length) {
			*why = "a section lies outside the memfd";
			return -EBADMSG;
		}
		if (s->record_size &&
		    (s->record_size % 4 || (uint64_t)s->record_size * s->n_records > s->length)) {
			*why = "a section's records do not fit it";
			return -EBADMSG;
		}
		for (uint32_t j = 0; j < i; j++) {
			const HandoffSection *o = &dir[j];

			if (s->length && o->length && s->offset < o->offset + o->length &&
			    o->offset < s->offset + s->length) {
				*why = "two sections overlap";
				return -EBADMSG;
			}
		}
	}
	return 0;
}

int64_t handoff_memfd_generation(int fd, uint32_t kind)
{
	HandoffHeader h;

	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return -1;
	if (memcmp(h.magic, HANDOFF_MAGIC, sizeof(h.magic)) == 0)
		return h.major == HANDOFF_MAJOR && h.kind == kind && h.generation < INT64_MAX
			       ? (int64_t)h.generation
			       : -1;
	/* 0.1.0's: its magic, version 1. */
	if (memcmp(h.magic, kind == HANDOFF_KIND_STATE ? "RMUXSTAT" : "RMUXSESS", 8) == 0 &&
	    h.major == 1 && h.minor == 0)
		return 0;
	return -1;
}

const HandoffSection *handoff_header_find(const void *page, uint32_t type)
{
	const HandoffHeader *h = page;
	const HandoffSection *dir = handoff_directory(page);

	for (uint32_t i = 0; i < h->n_sections; i++)
		if (dir[i].type == type)
			return &dir[i];
	return NULL;
}

const char *handoff_writer(void)
{
#ifdef RDMACM_MUX_HANDOFF_FUTURE
	return "rdmacm-mux " PACKAGE_VERSION "+future";
#else
	return "rdmacm-mux " PACKAGE_VERSION;
#endif
}

/* ---- wire numbers ---- */

/*
 * Session states and timers are stored in the session records as they
 * are, so their enum values are the wire numbers: these asserts stop a
 * renumbered enum from building.
 */
_Static_assert(SESSION_REQ_SENT == 0 && SESSION_REQ_RCVD == 1 && SESSION_REP_SENT == 2 &&
		       SESSION_REP_RCVD == 3 && SESSION_ESTABLISHED == 4 && SESSION_CLOSING == 5 &&
		       SESSION_SIDR_SENT == 6 && SESSION_SIDR_RCVD == 7,
	       "SessionState values are wire numbers: never renumber them");
_Static_assert(SESSION_TIMER_NONE == 0 && SESSION_TIMER_HANDSHAKE == 1 &&
		       SESSION_TIMER_CLOSING == 2 && SESSION_TIMER_SIDR == 3,
	       "SessionTimer values are wire numbers: never renumber them");

static const HandoffWire wire_session_state[SESSION_STATE_COUNT] = {
	[SESSION_REQ_SENT] = { 0, "req-sent" },
	[SESSION_REQ_RCVD] = { 1, "req-rcvd" },
	[SESSION_REP_SENT] = { 2, "rep-sent" },
	[SESSION_REP_RCVD] = { 3, "rep-rcvd" },
	[SESSION_ESTABLISHED] = { 4, "established" },
	[SESSION_CLOSING] = { 5, "closing" },
	[SESSION_SIDR_SENT] = { 6, "sidr-sent" },
	[SESSION_SIDR_RCVD] = { 7, "sidr-rcvd" },
};

static const HandoffWire wire_session_timer[SESSION_TIMER_COUNT] = {
	[SESSION_TIMER_NONE] = { 0, "none" },
	[SESSION_TIMER_HANDSHAKE] = { 1, "handshake" },
	[SESSION_TIMER_CLOSING] = { 2, "closing" },
	[SESSION_TIMER_SIDR] = { 3, "sidr" },
};

static const HandoffWire wire_cm_attr[CM_IDX_COUNT] = {
	[CM_IDX_REQ] = { 1, "REQ" },	   [CM_IDX_MRA] = { 2, "MRA" },
	[CM_IDX_REJ] = { 3, "REJ" },	   [CM_IDX_REP] = { 4, "REP" },
	[CM_IDX_RTU] = { 5, "RTU" },	   [CM_IDX_DREQ] = { 6, "DREQ" },
	[CM_IDX_DREP] = { 7, "DREP" },	   [CM_IDX_SIDR_REQ] = { 8, "SIDR_REQ" },
	[CM_IDX_SIDR_REP] = { 9, "SIDR_REP" }, [CM_IDX_LAP] = { 10, "LAP" },
	[CM_IDX_APR] = { 11, "APR" },	   [CM_IDX_OTHER] = { 12, "other" },
};

const HandoffWire *handoff_wire_table(HandoffEnum e, unsigned *ret_n)
{
	switch (e) {
	case HANDOFF_ENUM_SESSION_STATE:
		*ret_n = G_N_ELEMENTS(wire_session_state);
		return wire_session_state;
	case HANDOFF_ENUM_SESSION_TIMER:
		*ret_n = G_N_ELEMENTS(wire_session_timer);
		return wire_session_timer;
	case HANDOFF_ENUM_CM_ATTR:
		*ret_n = G_N_ELEMENTS(wire_cm_attr);
		return wire_cm_attr;
	default:
		*ret_n = 0;
		return NULL;
	}
}

int handoff_wire_to_enum(HandoffEnum e, uint32_t wire)
{
	unsigned n;
	const HandoffWire *t = handoff_wire_table(e, &n);

	for (unsigned i = 0; i < n; i++)
		if (t[i].name && t[i].wire == wire)
			return (int)i;
	return -1;
}
