/* SPDX-License-Identifier: MIT */
/*
 * Owns the relay's side of the VMs' assignments (vm-table.h): which VM a
 * connection belongs to and the bound on each VM's connections, the check
 * before every REG, taking GIDs back when an assignment changes, and the
 * disconnection of a removed VM's clients. (The per-MAD count in the
 * ib_cm groups is relay_vm_count(), inline in relay-internal.h.)
 */
#include <glib.h>
#include <string.h>

#include "log.h"
#include "relay-internal.h"
#include "util.h"

void relay_set_vms(Relay *r, const RelayVms *vms)
{
	r->vms = *vms;
}

static VmCounters *relay_vm_counters(Relay *r, VmEntry *vm)
{
	if (vm)
		return &vm->counters;
	return r->vms.table ? vm_table_unassigned(r->vms.table) : &r->vm_none;
}

int relay_vm_attach(Relay *r, RelayClient *c)
{
	VmEntry *vm = NULL;
	int e;

	c->vm = NULL;
	c->vmc = relay_vm_counters(r, NULL);
	if (c->conn.fd < 0 || !r->vms.vm_of)
		return 0;
	e = r->vms.vm_of(r->vms.userdata, c->conn.fd, &vm);
	if (e < 0) {
		log_ratelimited(LOG_WARNING, NULL,
				"refusing a connection (pid %d uid %d): it came in on the socket of a "
				"VM that is gone",
				(int)c->conn.cred.pid, (int)c->conn.cred.uid);
		return e;
	}
	if (vm && vm->clients >= r->vms.max_clients) {
		vm->counters.clients_refused++;
		log_ratelimited(LOG_WARNING, NULL,
				"refusing a connection of VM %s (pid %d): it has %u, the limit per VM "
				"(--max-vm-clients)",
				vm->spec.name, (int)c->conn.cred.pid, vm->clients);
		return -EUSERS;
	}
	if (vm) {
		vm->clients++;
		c->vm = vm;
		c->vmc = &vm->counters;
	}
	return 0;
}

void relay_vm_detach(Relay *r, RelayClient *c)
{
	(void)r;
	if (c->vm)
		c->vm->clients--;
	c->vm = NULL;
}

int relay_vm_check_reg(Relay *r, RelayClient *c, const uint8_t gid[GID_LEN])
{
	char text[GID_STR_LEN], pid[32], gidf[64], vmf[80];
	const char *fields[] = { pid, gidf, vmf, NULL };
	const VmEntry *holder;
	VmRefusal why;
	bool on_port;

	if (!r->vms.table)
		return 0;
	/* The port's table matters only to the shared socket under the
	 * assigned policy; a lookup that misses re-reads it, so only then. */
	on_port = c->vm || r->vms.policy == VM_GID_POLICY_OPEN ||
		  gid_table_find(r->port->gids, gid) >= 0;
	why = vm_table_may_register(r->vms.table, c->vm, gid, r->vms.policy, on_port);
	if (why == VM_REFUSAL_COUNT)
		return 0;
	c->vmc->gid_refused[why]++;
	holder = vm_table_gid_vm(r->vms.table, gid);
	snprintf(pid, sizeof(pid), "CLIENT_PID=%d", (int)c->conn.cred.pid);
	snprintf(gidf, sizeof(gidf), "GID=%s", gid_to_string(gid, text));
	snprintf(vmf, sizeof(vmf), "VM=%s", c->vm ? c->vm->spec.name : "");
	switch (why) {
	case VM_REFUSAL_OTHER_VM:
		log_ratelimited(LOG_WARNING, fields,
				"client %u (pid %d, %s) asked for GID %s, which is assigned to VM %s: "
				"refused",
				c->id, (int)c->conn.cred.pid,
				c->vm ? c->vm->spec.name : "the shared socket", text,
				holder ? holder->spec.name : "?");
		break;
	case VM_REFUSAL_NOT_ASSIGNED:
		log_ratelimited(LOG_WARNING, fields,
				"client %u (pid %d) of VM %s asked for GID %s, which is not assigned "
				"to it: refused",
				c->id, (int)c->conn.cred.pid, c->vm->spec.name, text);
		break;
	default:
		log_ratelimited(LOG_NOTICE, fields,
				"client %u (pid %d) asked the shared socket for GID %s, which %s: "
				"refused (--gid-policy=assigned)",
				c->id, (int)c->conn.cred.pid, text,
				why == VM_REFUSAL_NOT_ON_PORT ? "the port does not have"
							      : "is assigned to no VM");
		break;
	}
	return why == VM_REFUSAL_NOT_ON_PORT ? -EADDRNOTAVAIL : -EACCES;
}

/* Take GID number @i back from @c, and the sessions it holds on it. */
static void relay_vm_revoke(Relay *r, RelayClient *c, uint32_t i, const char *why)
{
	uint8_t gid[GID_LEN];
	char text[GID_STR_LEN], pid[32], gidf[64];
	const char *fields[] = { pid, gidf, NULL };
	unsigned sessions = 0;

	memcpy(gid, c->gids[i].gid, GID_LEN);
	g_hash_table_remove(r->gid_owners, gid);
	c->gids[i] = c->gids[c->n_gids - 1];
	c->n_gids--;
	for (uint32_t h = c->sessions.head; h;) {
		Session *s = session_table_get(r->sessions, h);
		uint32_t next = s ? s->owner_next : 0;

		if (s && gid_equal(s->local_gid, gid)) {
			session_table_remove(r->sessions, &c->sessions, h);
			sessions++;
		}
		h = next;
	}
	c->stats.sessions = c->sessions.count;
	relay_handoff_client_gids(r, c);
	snprintf(pid, sizeof(pid), "CLIENT_PID=%d", (int)c->conn.cred.pid);
	snprintf(gidf, sizeof(gidf), "GID=%s", gid_to_string(gid, text));
	log_structured(LOG_NOTICE, fields,
		       "client %u (pid %d%s%s) lost GID %s and its %u sessions: %s", c->id,
		       (int)c->conn.cred.pid, c->vm ? ", VM " : "", c->vm ? c->vm->spec.name : "",
		       text, sessions, why);
}

/* Disconnect the clients of VMs whose socket changed that it would not
 * let in now: whoever connected under the old owner or mode is not the
 * VM under the new one. Return: the GIDs they held. */
static unsigned relay_vm_recheck_peers(Relay *r)
{
	g_autoptr(GPtrArray) gone = g_ptr_array_new();
	g_autoptr(GPtrArray) list = vm_table_list(r->vms.table);
	GHashTableIter it;
	gpointer value;
	unsigned taken = 0;

	g_hash_table_iter_init(&it, r->clients);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		RelayClient *c = value;

		if (c->vm && c->vm->recheck_peers &&
		    !vm_spec_admits(&c->vm->spec, r->vms.own_uid, r->vms.own_gid, c->conn.cred.uid,
				    c->conn.cred.gid))
			g_ptr_array_add(gone, c);
	}
	for (guint i = 0; i < gone->len; i++) {
		RelayClient *c = gone->pdata[i];
		g_autofree char *why = g_strdup_printf(
			"VM %s's socket does not let uid %d gid %d in any more (its owner, group or "
			"mode changed)",
			c->vm->spec.name, (int)c->conn.cred.uid, (int)c->conn.cred.gid);

		taken += c->n_gids;
		r->counters->clients_dropped++;
		relay_drop_client(r, c, why);
	}
	for (guint i = 0; i < list->len; i++)
		((VmEntry *)list->pdata[i])->recheck_peers = false;
	return taken;
}

unsigned relay_vms_changed(Relay *r)
{
	GHashTableIter it;
	gpointer value;
	unsigned taken;

	if (!r->vms.table)
		return 0;
	taken = relay_vm_recheck_peers(r);
	g_hash_table_iter_init(&it, r->clients);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		RelayClient *c = value;

		for (uint32_t i = 0; i < c->n_gids;) {
			/* Held GIDs are not taken back for leaving the port:
			 * addresses come and go. */
			VmRefusal why = vm_table_may_register(r->vms.table, c->vm, c->gids[i].gid,
							      r->vms.policy, true);

			if (why == VM_REFUSAL_COUNT) {
				i++;
				continue;
			}
			relay_vm_revoke(r, c, i,
					why == VM_REFUSAL_OTHER_VM
						? "it is assigned to another VM now"
					: why == VM_REFUSAL_NOT_ASSIGNED
						? "its VM's assignment does not have it"
						: "no VM has it (--gid-policy=assigned)");
			taken++;
		}
	}
	relay_schedule_timer(r);
	return taken;
}

unsigned relay_drop_vm_clients(Relay *r, const VmEntry *vm)
{
	g_autoptr(GPtrArray) gone = g_ptr_array_new();
	GHashTableIter it;
	gpointer value;

	g_hash_table_iter_init(&it, r->clients);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		RelayClient *c = value;

		if (c->vm == vm)
			g_ptr_array_add(gone, c);
	}
	for (guint i = 0; i < gone->len; i++) {
		RelayClient *c = gone->pdata[i];

		/* What it was owed goes out first, if the socket takes it. */
		if (c->conn.fd >= 0)
			(void)client_flush(&c->conn);
		r->counters->clients_dropped++;
		relay_drop_client(r, c, "its VM was removed (rdmacm-muxctl vm del)");
	}
	return gone->len;
}
