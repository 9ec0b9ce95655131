/* SPDX-License-Identifier: MIT */
/*
 * The "sessions" memfd of the hand-off format, as a whole: a
 * predecessor's session table taken over in place when it has exactly
 * this build's layout, else its records converted into a fresh memfd
 * (another minor's, or 0.1.0's). The table itself is daemon/sessions/.
 */
#ifndef RDMACM_MUX_HANDOFF_SESSIONS_H
#define RDMACM_MUX_HANDOFF_SESSIONS_H

#include "session-table.h"

/**
 * handoff_sessions_adopt() - the session table a predecessor left in @fd.
 * The caller keeps @fd. In place, the table lives in @fd and *@ret_fd is
 * @fd; converted, it lives in a new memfd *@ret_fd (the caller's, as @fd
 * is), and @fd is unchanged. @owner_of, @dropped and @userdata are
 * session_table_adopt()'s. A sessions memfd of this format whose pair id
 * is not @owner's belongs to another state: refused.
 * Return: 0; -EPROTO when it is no session table this version reads, or
 * another state's; -EBADMSG when its header does not hold up; another
 * negative errno. @why (may be NULL) gets a static reason on failure.
 */
int handoff_sessions_adopt(int fd, const SessionFileOwner *owner,
			   const uint32_t timeouts_ms[SESSION_TIMER_COUNT], uint64_t now,
			   SessionOwnerFn owner_of, SessionDroppedFn dropped, void *userdata,
			   SessionTable **ret, int *ret_fd, const char **why);

#endif
