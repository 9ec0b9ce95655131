/* SPDX-License-Identifier: MIT */
/*
 * The control socket's VM commands (control-vms.c):
 *
 *   vms [json]                     every VM: socket, GIDs (registered or
 *                                  not), clients, sessions, counters; and
 *                                  the same for the clients without a VM
 *   vm add NAME key=value...       privileged: a new VM (vm-spec.h's keys:
 *   vm set NAME key=value...       gid, prefix, owner, group, mode, domain;
 *   vm del NAME [domain=UUID]      owner and group as numbers), a change, a
 *                                  removal; with domain=, set and del act
 *                                  only on a VM that domain made
 *
 * Privileged means: the peer is root, or runs as the daemon's own user.
 * Everybody else the control socket admits (its group, its mode, the
 * allow-lists) may read, never change.
 */
#ifndef RDMACM_MUX_CONTROL_VMS_H
#define RDMACM_MUX_CONTROL_VMS_H

#include <glib.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "control.h"
#include "relay.h"
#include "vm-host.h"

/* Whether @cred may run the privileged commands. */
bool control_vm_privileged(const struct ucred *cred);

/* The answer to "vms", appended to @out; cut at cfg->max_answer. */
void control_answer_vms(Relay *relay, VmHost *vms, const ControlConfig *cfg, GString *out,
			bool json);

/**
 * control_vm_command() - run "vm add|set|del NAME ..." (@words[0] is
 * "add", "set" or "del"; @n words), answering in @out: one line saying
 * what was done, or "error: ..." saying why nothing was.
 */
void control_vm_command(VmHost *vms, char *const *words, unsigned n, GString *out);

#endif /* RDMACM_MUX_CONTROL_VMS_H */
