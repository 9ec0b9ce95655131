/* SPDX-License-Identifier: MIT */
/*
 * Owns the choice between taking a predecessor's sessions memfd over in
 * place and converting its records (handoff-sessions.h), and reading the
 * records of a memfd of another version.
 */
#include "handoff-sessions.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff-format.h"
#include "handoff-legacy.h"
#include "util.h"

/*
 * The session records of another version's table in @fd, mapped
 * read-only into *@map (*@map_len bytes).
 */
static int foreign_records(int fd, const SessionFileOwner *owner, void **map, size_t *map_len,
			   const void **records, uint32_t *record_size, uint32_t *n,
			   const char **why)
{
	const HandoffSection *sec;
	const HandoffHeader *h;
	struct stat st;
	int e;

	*map = NULL;
	if (fstat(fd, &st) < 0) {
		*why = "it cannot be read";
		return -errno;
	}
	if (st.st_size < (off_t)HANDOFF_PAGE) {
		*why = "it is too short for a session table";
		return -EPROTO;
	}
	*map_len = (size_t)st.st_size;
	*map = mmap(NULL, *map_len, PROT_READ, MAP_SHARED, fd, 0);
	if (*map == MAP_FAILED) {
		*map = NULL;
		*why = "it cannot be mapped";
		return -errno;
	}
	e = handoff_legacy_sessions(*map, *map_len, records, record_size, n, why);
	if (e != -EPROTO)
		return e;
	e = handoff_header_check(*map, *map_len, *map_len, HANDOFF_KIND_SESSIONS, why);
	if (e < 0)
		return e;
	h = *map;
	if (h->pair_id != owner->pair_id) {
		*why = "it belongs to another state than the clients'";
		return -EPROTO;
	}
	sec = handoff_header_find(*map, HANDOFF_SECTION_SESSIONS);
	if (!sec || sec->record_size == 0) {
		*why = "it has no session records";
		return -EBADMSG;
	}
	*records = (const uint8_t *)*map + sec->offset;
	*record_size = sec->record_size;
	*n = sec->n_records;
	return 0;
}

int handoff_sessions_adopt(int fd, const SessionFileOwner *owner,
			   const uint32_t timeouts_ms[SESSION_TIMER_COUNT], uint64_t now,
			   SessionOwnerFn owner_of, SessionDroppedFn dropped, void *userdata,
			   SessionTable **ret, int *ret_fd, const char **why)
{
	const void *records = NULL;
	uint32_t record_size = 0, n = 0;
	size_t map_len = 0;
	void *map = NULL;
	const char *dummy;
	HandoffHeader h;
	int new_fd, e;

	if (!why)
		why = &dummy;
	*ret_fd = -1;
	/* Another state's sessions are not these clients' to have. */
	if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
	    memcmp(h.magic, HANDOFF_MAGIC, sizeof(h.magic)) == 0 && h.pair_id != owner->pair_id) {
		*why = "it belongs to another state than the clients'";
		return -EPROTO;
	}
	e = session_table_adopt(timeouts_ms, fd, now, owner_of, dropped, userdata, NULL, ret);
	if (e == 0) {
		*ret_fd = fd;
		return 0;
	}
	if (e != -EBADMSG) {
		*why = "it cannot be mapped";
		return e;
	}
	e = foreign_records(fd, owner, &map, &map_len, &records, &record_size, &n, why);
	if (e == 0) {
		/* One conversion more than its source. */
		SessionFileOwner next = *owner;

		next.generation = (uint64_t)MAX(handoff_memfd_generation(fd, HANDOFF_KIND_SESSIONS), 0) + 1;
		new_fd = memfd_create("rdmacm-mux-sessions", MFD_CLOEXEC);
		e = new_fd < 0 ? -errno
			       : session_table_import(timeouts_ms, records, record_size, n, new_fd,
						      &next, now, owner_of, dropped, userdata, NULL,
						      ret);
		if (e < 0) {
			*why = "a fresh memfd could not be made";
			if (new_fd >= 0)
				close(new_fd);
		} else {
			*ret_fd = new_fd;
		}
	}
	if (map)
		munmap(map, map_len);
	return e;
}
