/* SPDX-License-Identifier: MIT */
/*
 * Owns the state memfd's VMS section (handoff-format.h): the VMs' state,
 * bytes daemon/vm/ writes and reads, kept in two copies so that a rewrite
 * never leaves none; which copy is current, the crash-safe rewrite, the
 * peek before a take-over, and carrying a predecessor's copy over.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "handoff-state-internal.h"
#include "util.h"

void handoff_vms_shape(const HandoffShape *shape, HandoffSection *e)
{
	uint64_t room = MIN(shape->vms_bytes, HANDOFF_VMS_MAX_BYTES);

	e->record_size = (uint32_t)HANDOFF_ALIGN8(sizeof(HandoffCopy) + room);
	e->n_records = 2;
	e->length = (uint64_t)e->record_size * e->n_records;
}

/* Copy @i of the twice-kept section @e whose bytes are at @bytes. */
static const HandoffCopy *copy_at(const HandoffSection *e, const uint8_t *bytes, uint32_t i)
{
	return (const HandoffCopy *)(const void *)(bytes + (size_t)i * e->record_size);
}

/*
 * The current copy of the twice-kept section @e (checked to lie inside
 * the memfd, its bytes at @bytes): of the copies whose length fits their
 * record, the one of the highest sequence. Return: its index, or -1.
 */
static int copy_current(const HandoffSection *e, const uint8_t *bytes)
{
	uint64_t best = 0;
	int found = -1;

	if (e->record_size < sizeof(HandoffCopy) || e->record_size % 8 ||
	    e->n_records > HANDOFF_MAX_COPIES ||
	    (uint64_t)e->record_size * e->n_records > e->length)
		return -1;
	for (uint32_t i = 0; i < e->n_records; i++) {
		const HandoffCopy *c = copy_at(e, bytes, i);
		uint64_t seq = __atomic_load_n(&c->sequence, __ATOMIC_ACQUIRE);

		if (seq > best && c->length <= e->record_size - sizeof(HandoffCopy) &&
		    c->length <= HANDOFF_VMS_MAX_BYTES) {
			best = seq;
			found = (int)i;
		}
	}
	return found;
}

/* Which of this state's VMs' copies is current (after a take-over). */
void handoff_vms_rebuild(HandoffState *s)
{
	uint8_t *bytes = (uint8_t *)s->map + s->sec_vms->offset;
	int i = copy_current(s->sec_vms, bytes);
	HandoffCopy *c;

	s->vms_current = i < 0 ? 1 : (uint32_t)i; /* none: the first write goes to copy 0 */
	s->vms_sequence = 0;
	if (i < 0)
		return;
	c = (HandoffCopy *)(void *)(bytes + (size_t)i * s->sec_vms->record_size);
	s->vms_sequence = c->sequence;
	/* A sequence no writer reaches would wrap to 0 on the next write,
	 * which then would never count: numbered anew, the other copy out
	 * of the choice first. */
	if (s->vms_sequence >= HANDOFF_COPY_SEQUENCE_MAX) {
		HandoffCopy *other = (HandoffCopy *)(void *)(bytes + (size_t)(i ^ 1) *
								       s->sec_vms->record_size);

		__atomic_store_n(&other->sequence, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&c->sequence, 1, __ATOMIC_RELEASE);
		s->vms_sequence = 1;
	}
}

void handoff_vms_convert(HandoffState *s, const HandoffSection *src, const uint8_t *bytes,
			 HandoffDroppedFn dropped, void *userdata)
{
	HandoffCopy *to = (HandoffCopy *)(void *)((uint8_t *)s->map + s->sec_vms->offset);
	int i = copy_current(src, bytes);
	const HandoffCopy *from;

	if (i < 0)
		return;
	from = copy_at(src, bytes, (uint32_t)i);
	if (from->length > s->sec_vms->record_size - sizeof(HandoffCopy)) {
		handoff_state_drop(dropped, userdata, "the VMs' state",
		     "larger than this daemon's room for it (--max-vms is lower now)");
		return;
	}
	/* Into the first copy, its sequence going on. */
	memcpy(to->bytes, from->bytes, from->length);
	to->length = from->length;
	to->sequence = from->sequence;
}

int handoff_state_vms_peek(int fd, const char *dev, int port, GBytes **ret, const char **why)
{
	const char *dummy;
	const HandoffHeader *h;
	const HandoffSection *e;
	/* Set by handoff_state_map_ro() when it succeeds; optimising compilers
	 * cannot always see that across it. */
	void *ro = NULL;
	size_t bytes = 0;
	int r, i;

	if (!why)
		why = &dummy;
	*ret = NULL;
	r = handoff_state_map_ro(fd, &ro, &bytes, why);
	if (r < 0)
		return r;
	/* 0.1.0's raw layout (or anything else) has no VMs. */
	r = handoff_header_check(ro, bytes, bytes, HANDOFF_KIND_STATE, why);
	h = ro;
	if (r == 0 && (strcmp(h->dev, dev) != 0 || h->port != (uint32_t)port)) {
		*why = "it is of another device or port";
		r = -EPROTO;
	}
	e = r == 0 ? handoff_header_find(ro, HANDOFF_SECTION_VMS) : NULL;
	i = e ? copy_current(e, (const uint8_t *)ro + e->offset) : -1;
	if (i >= 0) {
		const HandoffCopy *c = copy_at(e, (const uint8_t *)ro + e->offset, (uint32_t)i);

		*ret = g_bytes_new(c->bytes, c->length);
	}
	munmap(ro, bytes);
	return r;
}

int handoff_state_vms_write(HandoffState *s, const void *data, size_t len)
{
	uint32_t next = s->vms_current ^ 1u;
	HandoffCopy *to;

	if (len > s->sec_vms->record_size - sizeof(HandoffCopy))
		return -ENOSPC;
	to = (HandoffCopy *)(void *)((uint8_t *)s->map + s->sec_vms->offset +
				     (size_t)next * s->sec_vms->record_size);
	/* Out of the reader's choice while it is rewritten; current last. */
	__atomic_store_n(&to->sequence, 0, __ATOMIC_RELEASE);
	memcpy(to->bytes, data, len);
	to->length = (uint32_t)len;
	__atomic_store_n(&to->sequence, s->vms_sequence + 1, __ATOMIC_RELEASE);
	s->vms_sequence++;
	s->vms_current = next;
	return 0;
}
