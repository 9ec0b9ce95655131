/* SPDX-License-Identifier: MIT */
/*
 * Owns the control socket's VM commands (control-vms.h): the "vms" answer
 * in text and JSON, and running vm add, set and del for a privileged peer.
 */
#include "control-vms.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "json-writer.h"
#include "util.h"

bool control_vm_privileged(const struct ucred *cred)
{
	return cred->uid == 0 || cred->uid == geteuid();
}

/* ---- vms ---- */

/* What the clients of one VM (or of none) hold now. */
typedef struct ControlVmLive {
	uint32_t clients;
	uint32_t sessions;
	GArray *pids; /* int */
	GArray *gids; /* uint8_t[GID_LEN] each: registered by its clients */
} ControlVmLive;

typedef struct ControlVmWalk {
	GHashTable *live; /* const VmEntry* (NULL: none) -> ControlVmLive* */
} ControlVmWalk;

static void control_vm_live_free(gpointer p)
{
	ControlVmLive *l = p;

	g_array_free(l->pids, TRUE);
	g_array_free(l->gids, TRUE);
	g_free(l);
}

static ControlVmLive *control_vm_live(GHashTable *live, const VmEntry *vm)
{
	ControlVmLive *l = g_hash_table_lookup(live, vm);

	if (!l) {
		l = g_new0(ControlVmLive, 1);
		l->pids = g_array_new(FALSE, FALSE, sizeof(int));
		l->gids = g_array_new(FALSE, FALSE, GID_LEN);
		g_hash_table_insert(live, (gpointer)vm, l);
	}
	return l;
}

static void control_vm_collect(void *userdata, const RelayClientInfo *c)
{
	ControlVmWalk *w = userdata;
	ControlVmLive *l = control_vm_live(w->live, c->vm);
	int pid = c->cred.pid;

	l->clients++;
	l->sessions += c->sessions;
	g_array_append_val(l->pids, pid);
	g_array_append_vals(l->gids, c->gids, c->n_gids);
}

static bool control_vm_has(const ControlVmLive *l, const uint8_t gid[GID_LEN])
{
	for (guint i = 0; l && i < l->gids->len; i++)
		if (gid_equal((const uint8_t *)l->gids->data + (size_t)i * GID_LEN, gid))
			return true;
	return false;
}

/* The counters of one VM as JSON members. */
static void control_vm_json_counters(JsonWriter *j, const VmCounters *k)
{
	json_begin_object(j, "counters");
	for (int g = 0; g < VM_CM_GROUP_COUNT; g++) {
		json_begin_object(j, vm_cm_group_name((VmCmGroup)g));
		for (int a = 0; a < CM_IDX_OTHER; a++)
			json_u64(j, vm_cm_attr_name((CmAttrIndex)a), k->cm[g][a]);
		json_end_object(j);
	}
	json_begin_object(j, "gid_refused");
	for (int r = 0; r < VM_REFUSAL_COUNT; r++)
		json_u64(j, vm_refusal_name((VmRefusal)r), k->gid_refused[r]);
	json_end_object(j);
	json_u64(j, "clients_refused", k->clients_refused);
	json_end_object(j);
}

static void control_vm_json_live(JsonWriter *j, const ControlVmLive *l)
{
	json_u64(j, "clients", l ? l->clients : 0);
	json_begin_array(j, "pids");
	for (guint i = 0; l && i < l->pids->len; i++)
		json_i64(j, NULL, g_array_index(l->pids, int, i));
	json_end_array(j);
	json_u64(j, "sessions", l ? l->sessions : 0);
}

static void control_vm_json(JsonWriter *j, VmHost *vms, const VmEntry *vm,
			    const ControlVmLive *l)
{
	const VmSpec *s = &vm->spec;
	char text[GID_STR_LEN], prefix[50];

	json_begin_object(j, NULL);
	json_string(j, "name", s->name);
	json_string(j, "source", vm->source);
	json_string(j, "socket", vm_host_socket(vms, vm));
	if (s->owner != VM_ID_NONE)
		json_u64(j, "owner", s->owner);
	else
		json_null(j, "owner");
	if (s->group != VM_ID_NONE)
		json_u64(j, "group", s->group);
	else
		json_null(j, "group");
	if (s->mode != VM_ID_NONE)
		json_u64(j, "mode", s->mode);
	else
		json_null(j, "mode");
	if (s->domain[0])
		json_string(j, "domain", s->domain);
	else
		json_null(j, "domain");
	control_vm_json_live(j, l);
	json_begin_array(j, "gids");
	for (uint32_t i = 0; i < s->n_gids; i++) {
		json_begin_object(j, NULL);
		json_string(j, "gid", gid_to_string(s->gids[i], text));
		json_bool(j, "registered", control_vm_has(l, s->gids[i]));
		json_end_object(j);
	}
	json_end_array(j);
	json_begin_array(j, "prefixes");
	for (uint32_t i = 0; i < s->n_prefixes; i++) {
		json_begin_object(j, NULL);
		json_string(j, "prefix", vm_prefix_to_string(&s->prefixes[i], prefix));
		json_begin_array(j, "registered");
		for (guint k = 0; l && k < l->gids->len; k++) {
			const uint8_t *g = (const uint8_t *)l->gids->data + (size_t)k * GID_LEN;

			if (vm_prefix_contains(&s->prefixes[i], g))
				json_string(j, NULL, gid_to_string(g, text));
		}
		json_end_array(j);
		json_end_object(j);
	}
	json_end_array(j);
	control_vm_json_counters(j, &vm->counters);
	json_end_object(j);
}

/* "tx 12 (1 retry), rx 10 (0 duplicates)" per attribute that moved. */
static void control_vm_text_counters(GString *out, const VmCounters *k)
{
	bool any = false;

	g_string_append(out, "  CM messages:");
	for (int a = 0; a < CM_IDX_OTHER; a++) {
		if (!k->cm[VM_CM_TX_MSGS][a] && !k->cm[VM_CM_RX_MSGS][a])
			continue;
		g_string_append_printf(out,
				       "%s %s tx %" PRIu64 " (%" PRIu64 " retries) rx %" PRIu64
				       " (%" PRIu64 " duplicates)",
				       any ? "," : "", vm_cm_attr_name((CmAttrIndex)a),
				       k->cm[VM_CM_TX_MSGS][a], k->cm[VM_CM_TX_RETRIES][a],
				       k->cm[VM_CM_RX_MSGS][a], k->cm[VM_CM_RX_DUPLICATES][a]);
		any = true;
	}
	g_string_append_printf(out, "%s\n  refused:     ", any ? "" : " none");
	for (int r = 0; r < VM_REFUSAL_COUNT; r++)
		g_string_append_printf(out, "%s%s %" PRIu64, r ? ", " : "GIDs ",
				       vm_refusal_name((VmRefusal)r), k->gid_refused[r]);
	g_string_append_printf(out, "; connections %" PRIu64 "\n", k->clients_refused);
}

static void control_vm_text_live(GString *out, const ControlVmLive *l)
{
	g_string_append_printf(out, "  clients:     %u", l ? l->clients : 0);
	for (guint i = 0; l && i < l->pids->len; i++)
		g_string_append_printf(out, "%s%d", i ? ", " : " (pid ", g_array_index(l->pids, int, i));
	g_string_append_printf(out, "%s\n  sessions:    %u\n", l && l->pids->len ? ")" : "",
			       l ? l->sessions : 0);
}

static void control_vm_text(GString *out, VmHost *vms, const VmEntry *vm, const ControlVmLive *l)
{
	const VmSpec *s = &vm->spec;
	const char *path = vm_host_socket(vms, vm);
	char text[GID_STR_LEN], prefix[50], owner[16], group[16], mode[16];
	bool first = true;

	snprintf(owner, sizeof(owner), s->owner == VM_ID_NONE ? "-" : "%u", s->owner);
	snprintf(group, sizeof(group), s->group == VM_ID_NONE ? "-" : "%u", s->group);
	snprintf(mode, sizeof(mode), "%04o", s->mode == VM_ID_NONE ? VM_DEFAULT_MODE : s->mode);
	g_string_append_printf(out, "VM %s (%s%s%s)\n", s->name,
			       vm->source ? vm->source : "rdmacm-muxctl",
			       s->domain[0] ? ", libvirt domain " : "", s->domain);
	g_string_append_printf(out, "  socket:      %s (owner %s, group %s, mode %s)\n",
			       path ? path : "none: it could not be bound (see the log)", owner,
			       group, mode);
	control_vm_text_live(out, l);
	for (uint32_t i = 0; i < s->n_gids; i++, first = false)
		g_string_append_printf(out, "  %-12s %-40s %s\n", first ? "GIDs:" : "",
				       gid_to_string(s->gids[i], text),
				       control_vm_has(l, s->gids[i]) ? "registered" : "not registered");
	for (uint32_t i = 0; i < s->n_prefixes; i++, first = false) {
		unsigned n = 0;

		g_string_append_printf(out, "  %-12s %-40s", first ? "GIDs:" : "",
				       vm_prefix_to_string(&s->prefixes[i], prefix));
		for (guint k = 0; l && k < l->gids->len; k++) {
			const uint8_t *g = (const uint8_t *)l->gids->data + (size_t)k * GID_LEN;

			if (vm_prefix_contains(&s->prefixes[i], g))
				g_string_append_printf(out, "%s%s", n++ ? ", " : " registered: ",
						       gid_to_string(g, text));
		}
		g_string_append_printf(out, "%s\n", n ? "" : " none registered");
	}
	control_vm_text_counters(out, &vm->counters);
}

void control_answer_vms(Relay *relay, VmHost *vms, const ControlConfig *cfg, GString *out,
			bool json)
{
	g_autoptr(GHashTable) live = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
							   control_vm_live_free);
	ControlVmWalk w = { .live = live };
	g_autoptr(GPtrArray) list = NULL;
	VmTable *t = vm_host_table(vms);
	const ControlVmLive *none;
	size_t omitted = 0;
	JsonWriter j;
	char text[GID_STR_LEN];

	relay_foreach_client(relay, control_vm_collect, &w);
	list = vm_table_list(t);
	none = g_hash_table_lookup(live, NULL);
	if (json) {
		json_writer_init(&j, out);
		json_begin_object(&j, NULL);
		json_string(&j, "gid_policy", vm_gid_policy_name(vm_host_policy(vms)));
		json_string(&j, "vm_dir", vm_host_dir(vms));
		json_u64(&j, "max_vms", vm_table_max(t));
		json_begin_array(&j, "vms");
	} else {
		g_string_append_printf(out, "%u VMs (at most %u), sockets in %s; --gid-policy=%s\n",
				       list->len, vm_table_max(t), vm_host_dir(vms),
				       vm_gid_policy_name(vm_host_policy(vms)));
	}
	for (guint i = 0; i < list->len; i++) {
		const VmEntry *vm = list->pdata[i];
		const ControlVmLive *l = g_hash_table_lookup(live, vm);

		if (out->len >= cfg->max_answer) {
			omitted++;
			continue;
		}
		if (json) {
			control_vm_json(&j, vms, vm, l);
		} else {
			g_string_append_c(out, '\n');
			control_vm_text(out, vms, vm, l);
		}
	}
	if (json) {
		json_end_array(&j);
		json_begin_object(&j, "unassigned");
		control_vm_json_live(&j, none);
		json_begin_array(&j, "gids");
		for (guint k = 0; none && k < none->gids->len; k++)
			json_string(&j, NULL,
				    gid_to_string((const uint8_t *)none->gids->data + (size_t)k * GID_LEN,
						  text));
		json_end_array(&j);
		control_vm_json_counters(&j, vm_table_unassigned(t));
		json_end_object(&j);
		json_u64(&j, "omitted", omitted);
		json_end_object(&j);
		g_string_append_c(out, '\n');
		return;
	}
	g_string_append(out, "\nno VM (the shared socket)\n");
	control_vm_text_live(out, none);
	g_string_append(out, "  GIDs:        ");
	for (guint k = 0; none && k < none->gids->len; k++)
		g_string_append_printf(out, "%s%s", k ? ", " : "",
				       gid_to_string((const uint8_t *)none->gids->data + (size_t)k * GID_LEN,
						     text));
	g_string_append_printf(out, "%s\n", none && none->gids->len ? "" : "-");
	control_vm_text_counters(out, vm_table_unassigned(t));
	if (omitted)
		g_string_append_printf(out, "# %zu more VMs not shown (answer limit)\n", omitted);
}

/* ---- vm add, set, del ---- */

void control_vm_command(VmHost *vms, char *const *words, unsigned n, GString *out)
{
	g_autoptr(GString) msg = g_string_new(NULL);
	g_autofree VmSpec *spec = g_new(VmSpec, 1);
	const char *verb = n > 0 ? words[0] : "";
	unsigned given = 0;
	int r;

	if (n < 2 || (strcmp(verb, "add") && strcmp(verb, "set") && strcmp(verb, "del"))) {
		g_string_append(out, "error: usage: vm add|set NAME key=value...; vm del NAME "
				     "[domain=UUID]\n");
		return;
	}
	if (!vm_name_valid(words[1])) {
		g_string_append_printf(out, "error: '%s' is not a valid VM name (1..%d of A-Z a-z 0-9 "
					    "_ . + -, not starting with '.' or '-')\n",
				       words[1], VM_NAME_MAX);
		return;
	}
	if (strcmp(verb, "set") == 0 && n == 2) {
		g_string_append(out, "error: vm set NAME needs at least one key=value\n");
		return;
	}
	r = vm_spec_parse_args(words[1], (const char *const *)words + 2, n - 2, spec, &given, msg);
	if (r == 0 && strcmp(verb, "del") == 0) {
		if (given & ~VM_SPEC_HAS_DOMAIN) {
			g_string_append(out, "error: vm del takes only the VM's name, and domain=UUID\n");
			return;
		}
		r = vm_host_del(vms, words[1], spec->domain[0] ? spec->domain : NULL, msg);
	} else if (r == 0 && strcmp(verb, "add") == 0) {
		r = vm_host_add(vms, spec, msg);
	} else if (r == 0) {
		r = vm_host_set(vms, spec, given, msg);
	}
	if (r < 0)
		g_string_append_printf(out, "error: %s\n", msg->str);
	else
		g_string_append_printf(out, "%s\n", msg->str);
}
