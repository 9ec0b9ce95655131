/* SPDX-License-Identifier: MIT */
/*
 * The daemon's workers for umad-sender.h: sender processes.
 *
 * Processes, not threads: the loop owns all state and the senders own
 * nothing but the write, so they share no memory at all. A process with a
 * second thread pays for it in every system call of the loop: glibc's
 * cancellation bookkeeping around each read and write, locked instructions
 * in every mutex, and the kernel's reference counting of each fd used.
 * That was 15% of the relay's throughput.
 *
 * Each sender is forked with nothing of the daemon's but its socket, opens
 * a umad fd of its own (umad-port.h, UmadSendFd), says how that went, and
 * then writes the MADs that come on its socket, one at a time, answering
 * each with the write's result. It ignores the daemon's signals and dies
 * with the daemon (PR_SET_PDEATHSIG).
 *
 * Bounds:
 *   - a write that takes longer than the deadline (UmadSenderConfig's
 *     deadline_usec) is stuck: its process is killed and replaced, and
 *     the MAD answers -ETIMEDOUT;
 *   - a stop waits the time it is given for the writes in flight, then
 *     kills their processes (their MADs answer -ETIMEDOUT);
 *   - a sender that cannot start (its umad fd does not open, it does not
 *     say so within 5 s, fork fails) is logged once, and the pool tries
 *     again with a growing pause (0.25 s to 30 s), logging again when
 *     senders start once more. A sender that dies alone (-EIO for its
 *     MAD) is replaced at once.
 *   - a killed process is reaped without waiting for it (the kernel may
 *     hold it in a write for a while); at most as many as there are
 *     senders wait to be reaped before replacements wait too.
 */
#ifndef RDMACM_MUX_SENDER_POOL_H
#define RDMACM_MUX_SENDER_POOL_H

#include "umad-sender.h"

/* The sender processes, as UmadSenderConfig.workers (no workers_arg). */
extern const UmadSendWorkersOps sender_pool_ops;

#endif /* RDMACM_MUX_SENDER_POOL_H */
