/* SPDX-License-Identifier: MIT */
/*
 * Owns the "metrics" answer of the control socket (metrics.h): the metric
 * names, their help texts and labels, and the Prometheus text format
 * (0.0.4) they are written in.
 *
 * Why the daemon writes the page itself rather than rdmacm-muxctl
 * converting the JSON of "counters" and "status": the names are defined
 * with the counters they show (relay-counters.h), so there is one source
 * of truth; nothing is parsed and re-printed on the way;
 * rdmacm-muxctl stays a libc-only pipe with no JSON parser; and anything
 * that speaks the control socket gets the same page.
 *
 * Why no per-client, per-GID or per-session series: a daemon serves up to
 * --max-clients (1024 by default) clients, each with up to --max-gids
 * GIDs and thousands of sessions, whose ids come and go. As labels they
 * would make a series per id, unbounded for the time series database and
 * for the page. The page has aggregates instead (sums, the deepest queue,
 * sessions by state), so its size is fixed: it needs none of the output
 * limits that "clients" and "sessions" apply. VMs are the exception: the
 * operator names them, they last, and there are at most --max-vms, so the
 * per-VM families carry a vm label (vm="" for the shared socket's
 * clients), and add up to the daemon's totals.
 */
#include "metrics.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "util.h"

/* One label of a sample beyond device and port. */
typedef struct MetricsLabel {
	const char *name;
	const char *value;
} MetricsLabel;

/* The page being written, and the device and port labels every sample
 * carries, escaped once. */
typedef struct MetricsPage {
	GString *out;
	GString *base;
} MetricsPage;

/* The RelayCounters that are neither per attribute nor per reason: where
 * each goes, as a sample of a family (rows of one family are adjacent;
 * its first row's help is the family's). */
typedef struct MetricsCounterRow {
	const char *name;
	const char *label; /* NULL: the family has one sample */
	const char *label_value;
	size_t offset; /* in RelayCounters */
	const char *help;
} MetricsCounterRow;

#define METRICS_COUNTER_ROW(field, metric, label, value, help)                                \
	{ metric, label, value, offsetof(RelayCounters, field), help },

static const MetricsCounterRow metrics_counter_rows[] = { RELAY_COUNTERS(METRICS_COUNTER_ROW) };

/* U+FFFD, in UTF-8. */
#define METRICS_REPLACEMENT "\xef\xbf\xbd"

void metrics_append_label_value(GString *out, const char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		unsigned char c = (unsigned char)s[i];
		gunichar u;

		if (c == '\\' || c == '"') {
			g_string_append_c(out, '\\');
			g_string_append_c(out, (char)c);
			i++;
			continue;
		}
		if (c == '\n') {
			g_string_append(out, "\\n");
			i++;
			continue;
		}
		if (c < 0x20 || c == 0x7f) {
			g_string_append(out, METRICS_REPLACEMENT);
			i++;
			continue;
		}
		if (c < 0x80) {
			g_string_append_c(out, (char)c);
			i++;
			continue;
		}
		u = g_utf8_get_char_validated(s + i, (gssize)(len - i));
		if (u == (gunichar)-1 || u == (gunichar)-2) {
			g_string_append(out, METRICS_REPLACEMENT);
			i++;
			continue;
		}
		/* A valid sequence: copied as it is. */
		{
			size_t n = (size_t)(g_utf8_next_char(s + i) - (s + i));

			g_string_append_len(out, s + i, (gssize)n);
			i += n;
		}
	}
}

/* Help text: the format escapes backslash and line feed there (and only
 * those). Ours are constants, but the rule holds for any of them. */
static void metrics_append_help(GString *out, const char *help)
{
	for (const char *p = help; *p; p++) {
		if (*p == '\\')
			g_string_append(out, "\\\\");
		else if (*p == '\n')
			g_string_append(out, "\\n");
		else
			g_string_append_c(out, *p);
	}
}

static void page_family(MetricsPage *p, const char *name, const char *type, const char *help)
{
	g_string_append_printf(p->out, "# HELP %s ", name);
	metrics_append_help(p->out, help);
	g_string_append_printf(p->out, "\n# TYPE %s %s\n", name, type);
}

/* One sample: @name{device,port,@labels} @value. */
static void page_sample(MetricsPage *p, const char *name, const MetricsLabel *labels,
			size_t n_labels, const char *value)
{
	g_string_append(p->out, name);
	g_string_append_c(p->out, '{');
	g_string_append_len(p->out, p->base->str, (gssize)p->base->len);
	for (size_t i = 0; i < n_labels; i++) {
		g_string_append_printf(p->out, ",%s=\"", labels[i].name);
		metrics_append_label_value(p->out, labels[i].value, strlen(labels[i].value));
		g_string_append_c(p->out, '"');
	}
	g_string_append_printf(p->out, "} %s\n", value);
}

static void page_u64(MetricsPage *p, const char *name, const MetricsLabel *labels,
		     size_t n_labels, uint64_t value)
{
	char text[24];

	snprintf(text, sizeof(text), "%" PRIu64, value);
	page_sample(p, name, labels, n_labels, text);
}

/* A family of one sample with no label of its own. */
static void page_single(MetricsPage *p, const char *name, const char *type, const char *help,
			uint64_t value)
{
	page_family(p, name, type, help);
	page_u64(p, name, NULL, 0, value);
}

/* A family with one sample per reason, from @values[0..@n). */
static void page_by_reason(MetricsPage *p, const char *name, const char *help,
			   const uint64_t *values, int n, const char *(*reason)(int))
{
	page_family(p, name, "counter", help);
	for (int i = 0; i < n; i++)
		page_u64(p, name, &(MetricsLabel){ "reason", reason(i) }, 1, values[i]);
}

static const char *metrics_rx_drop_name(int i)
{
	return relay_rx_drop_name((RxDrop)i);
}

static const char *metrics_tx_reject_name(int i)
{
	return relay_tx_reject_name((TxReject)i);
}

static void page_counter_rows(MetricsPage *p, const RelayCounters *k)
{
	for (size_t i = 0; i < G_N_ELEMENTS(metrics_counter_rows); i++) {
		const MetricsCounterRow *row = &metrics_counter_rows[i];
		uint64_t value;

		memcpy(&value, (const char *)k + row->offset, sizeof(value));
		if (row->help)
			page_family(p, row->name, "counter", row->help);
		if (row->label)
			page_u64(p, row->name, &(MetricsLabel){ row->label, row->label_value }, 1,
				 value);
		else
			page_u64(p, row->name, NULL, 0, value);
	}
}

/* The per-VM families: one sample per VM (and vm="") each. */
static void page_vms(MetricsPage *p, const GArray *vms)
{
	static const char *const cm_help[VM_CM_GROUP_COUNT] = {
		[VM_CM_TX_MSGS] = "CM MADs the VM's clients sent, by attribute, retries included "
				  "(the kernel's ib_cm group cm_tx_msgs).",
		[VM_CM_TX_RETRIES] = "Of those, MADs a client sent again: the same attribute and "
				     "TID as its session's last (cm_tx_retries).",
		[VM_CM_RX_MSGS] = "CM MADs delivered to the VM's clients, by attribute, duplicates "
				  "included (cm_rx_msgs).",
		[VM_CM_RX_DUPLICATES] = "Of those, MADs its session had seen: the same attribute "
					"and TID as the last one in (cm_rx_duplicates).",
	};
	char name[64];

	if (!vms)
		return;
	page_family(p, "rdmacm_mux_vm_clients", "gauge",
		    "Clients connected on each VM's socket (vm=\"\": on the shared socket).");
	for (guint i = 0; i < vms->len; i++) {
		const MetricsVm *v = &g_array_index(vms, MetricsVm, i);

		page_u64(p, "rdmacm_mux_vm_clients", &(MetricsLabel){ "vm", v->name }, 1, v->clients);
	}
	page_family(p, "rdmacm_mux_vm_sessions", "gauge", "Live CM sessions of each VM's clients.");
	for (guint i = 0; i < vms->len; i++) {
		const MetricsVm *v = &g_array_index(vms, MetricsVm, i);

		page_u64(p, "rdmacm_mux_vm_sessions", &(MetricsLabel){ "vm", v->name }, 1,
			 v->sessions);
	}
	page_family(p, "rdmacm_mux_vm_gids", "gauge", "GIDs each VM's clients registered.");
	for (guint i = 0; i < vms->len; i++) {
		const MetricsVm *v = &g_array_index(vms, MetricsVm, i);

		page_u64(p, "rdmacm_mux_vm_gids", &(MetricsLabel){ "vm", v->name }, 1, v->gids);
	}
	for (int g = 0; g < VM_CM_GROUP_COUNT; g++) {
		snprintf(name, sizeof(name), "rdmacm_mux_%s_total", vm_cm_group_name((VmCmGroup)g));
		page_family(p, name, "counter", cm_help[g]);
		for (guint i = 0; i < vms->len; i++) {
			const MetricsVm *v = &g_array_index(vms, MetricsVm, i);

			for (int a = 0; a < CM_IDX_OTHER; a++)
				page_u64(p, name,
					 (MetricsLabel[]){ { "vm", v->name },
							   { "attribute",
							     vm_cm_attr_name((CmAttrIndex)a) } },
					 2, v->counters.cm[g][a]);
		}
	}
	page_family(p, "rdmacm_mux_vm_gid_refused_total", "counter",
		    "Registrations refused for the VMs' assignments, by the asking client's VM and "
		    "reason.");
	for (guint i = 0; i < vms->len; i++) {
		const MetricsVm *v = &g_array_index(vms, MetricsVm, i);

		for (int r = 0; r < VM_REFUSAL_COUNT; r++)
			page_u64(p, "rdmacm_mux_vm_gid_refused_total",
				 (MetricsLabel[]){ { "vm", v->name },
						   { "reason", vm_refusal_name((VmRefusal)r) } },
				 2, v->counters.gid_refused[r]);
	}
	page_family(p, "rdmacm_mux_vm_connections_refused_total", "counter",
		    "Connections refused on each VM's socket: over --max-vm-clients.");
	for (guint i = 0; i < vms->len; i++) {
		const MetricsVm *v = &g_array_index(vms, MetricsVm, i);

		page_u64(p, "rdmacm_mux_vm_connections_refused_total",
			 &(MetricsLabel){ "vm", v->name }, 1, v->counters.clients_refused);
	}
}

void metrics_format(const MetricsSnapshot *m, GString *out)
{
	g_autoptr(GString) base = g_string_new("device=\"");
	MetricsPage p = { .out = out, .base = base };
	const RelayCounters *k = &m->counters;
	char text[32];

	metrics_append_label_value(base, m->device, strlen(m->device));
	g_string_append_printf(base, "\",port=\"%d\"", m->port);

	/* The daemon and its port. */
	page_family(&p, "rdmacm_mux_info", "gauge",
		    "The daemon's version and its port's link layer, as labels; always 1.");
	page_sample(&p, "rdmacm_mux_info",
		    (MetricsLabel[]){ { "version", m->version }, { "link_layer", m->link_layer } },
		    2, "1");
	page_single(&p, "rdmacm_mux_port_lid", "gauge", "The port's LID (0 on Ethernet).",
		    m->lid);
	page_single(&p, "rdmacm_mux_process_id", "gauge",
		    "The daemon's process id (a re-execution keeps it).", (uint64_t)m->pid);
	page_family(&p, "rdmacm_mux_uptime_seconds", "gauge",
		    "Seconds since this process image started.");
	snprintf(text, sizeof(text), "%" PRIu64 ".%03u", m->uptime_ms / 1000,
		 (unsigned)(m->uptime_ms % 1000));
	page_sample(&p, "rdmacm_mux_uptime_seconds", NULL, 0, text);
	page_single(&p, "rdmacm_mux_reexecutions_total", "counter",
		    "Hand-offs by re-execution (SIGHUP, rdmacm-muxctl restart) behind this "
		    "process image: the generation of status.",
		    m->generation);

	/* What the daemon holds now. */
	page_single(&p, "rdmacm_mux_clients", "gauge", "Clients connected.", m->clients);
	page_single(&p, "rdmacm_mux_gids", "gauge", "GIDs the clients registered.", m->gids);
	page_family(&p, "rdmacm_mux_sessions", "gauge",
		    "Live CM sessions and SIDR queries, by state.");
	for (int i = 0; i < SESSION_STATE_COUNT; i++)
		page_u64(&p, "rdmacm_mux_sessions",
			 &(MetricsLabel){ "state", session_state_name((SessionState)i) }, 1,
			 m->sessions[i]);
	page_single(&p, "rdmacm_mux_session_memory_bytes", "gauge",
		    "Bytes the session table holds.", m->session_memory_bytes);

	/* MADs. */
	page_family(&p, "rdmacm_mux_mads_total", "counter",
		    "CM MADs relayed, by attribute and direction (tx: from a client to the "
		    "wire; rx: from the wire to a client).");
	for (int dir = 0; dir < 2; dir++)
		for (int i = 0; i < CM_IDX_COUNT; i++)
			page_u64(&p, "rdmacm_mux_mads_total",
				 (MetricsLabel[]){
					 { "attribute", cm_attr_index_name((CmAttrIndex)i) },
					 { "direction", dir ? "rx" : "tx" } },
				 2, dir ? k->rx[i] : k->tx[i]);
	page_by_reason(&p, "rdmacm_mux_rx_dropped_total",
		       "MADs from the wire that no client got, by reason.", k->rx_drop,
		       RX_DROP_COUNT, metrics_rx_drop_name);
	page_by_reason(&p, "rdmacm_mux_tx_refused_total",
		       "MADs from the clients that the daemon did not send, by reason.",
		       k->tx_reject, TX_REJECT_COUNT, metrics_tx_reject_name);
	page_counter_rows(&p, k);

	/* Queues. */
	page_single(&p, "rdmacm_mux_client_queued_frames", "gauge",
		    "Frames (responses and inbound MADs) waiting to be written to the clients, "
		    "all together.",
		    m->client_queued_frames);
	page_single(&p, "rdmacm_mux_client_queued_frames_max", "gauge",
		    "Frames waiting to be written to the client with the most.",
		    m->client_queued_frames_max);
	page_single(&p, "rdmacm_mux_sender_queued_mads", "gauge",
		    "MADs handed to the sender processes and not written yet.", m->sender_queued);
	page_single(&p, "rdmacm_mux_sender_written_mads_total", "counter",
		    "MADs the sender processes wrote (first MADs to a destination, and to one "
		    "that was slow), since this process started.",
		    m->sender_written);
	page_single(&p, "rdmacm_mux_senders_live", "gauge",
		    "Sender processes that take MADs now (rdmacm_mux_senders_wanted when all is "
		    "well).", m->senders_live);
	page_single(&p, "rdmacm_mux_senders_wanted", "gauge",
		    "Sender processes the daemon keeps (--senders).", m->senders_wanted);
	page_single(&p, "rdmacm_mux_sender_timeouts_total", "counter",
		    "Sender writes stopped at their deadline (--send-timeout) or cut short at a stop; "
		    "their MADs answered ETIMEDOUT.", m->sender_timeouts);
	page_single(&p, "rdmacm_mux_sender_start_failures_total", "counter",
		    "Sender processes that could not start (the daemon tries again, with backoff).",
		    m->sender_start_failures);

	/* The control socket. */
	page_single(&p, "rdmacm_mux_control_trace_readers", "gauge",
		    "rdmacm-muxctl trace readers now.", m->control.trace_readers);
	page_single(&p, "rdmacm_mux_control_trace_readers_max", "gauge",
		    "Trace readers allowed at once (--max-trace-readers).", m->max_trace_readers);
	page_single(&p, "rdmacm_mux_control_trace_readers_refused_total", "counter",
		    "Trace readers refused: as many were tracing already.",
		    m->control.trace_readers_refused);
	page_single(&p, "rdmacm_mux_control_trace_readers_shed_total", "counter",
		    "Trace readers closed for staying behind.", m->control.trace_readers_shed);
	page_single(&p, "rdmacm_mux_control_closed_for_sending_total", "counter",
		    "Control connections closed for sending more than their command.",
		    m->control.closed_for_sending);

	/* Per VM. */
	page_vms(&p, m->vms);
}

/* ---- the snapshot ---- */

/* The snapshot being taken, and where each VM's row is. */
typedef struct MetricsWalk {
	MetricsSnapshot *m;
	GHashTable *rows; /* const VmEntry* -> row index + 1 */
} MetricsWalk;

static void metrics_count_client(void *userdata, const RelayClientInfo *c)
{
	MetricsWalk *w = userdata;
	MetricsSnapshot *m = w->m;

	m->client_queued_frames += c->queued;
	m->client_queued_frames_max = MAX(m->client_queued_frames_max, c->queued);
	if (m->vms) {
		guint row = GPOINTER_TO_UINT(g_hash_table_lookup(w->rows, c->vm));
		MetricsVm *v = row ? &g_array_index(m->vms, MetricsVm, row - 1) : NULL;

		if (v) {
			v->clients++;
			v->sessions += c->sessions;
			v->gids += c->n_gids;
		}
	}
}

/* The rows of the VMs of @vms, vm="" first. */
static void metrics_vm_rows(VmHost *vms, MetricsWalk *w)
{
	VmTable *t = vm_host_table(vms);
	g_autoptr(GPtrArray) list = vm_table_list(t);
	MetricsVm none = { .name = "", .counters = *vm_table_unassigned(t) };

	w->m->vms = g_array_sized_new(FALSE, TRUE, sizeof(MetricsVm), list->len + 1);
	g_array_append_val(w->m->vms, none);
	g_hash_table_insert(w->rows, NULL, GUINT_TO_POINTER(1));
	for (guint i = 0; i < list->len; i++) {
		const VmEntry *vm = list->pdata[i];
		MetricsVm v = { .name = vm->spec.name, .counters = vm->counters };

		g_array_append_val(w->m->vms, v);
		g_hash_table_insert(w->rows, (gpointer)vm, GUINT_TO_POINTER(w->m->vms->len));
	}
}

void metrics_snapshot_clear(MetricsSnapshot *m)
{
	if (m->vms)
		g_array_free(m->vms, TRUE);
	m->vms = NULL;
}

static void metrics_count_session(void *userdata, const Session *s)
{
	MetricsSnapshot *m = userdata;

	if (s->state < SESSION_STATE_COUNT)
		m->sessions[s->state]++;
}

void metrics_snapshot(Relay *relay, const ControlConfig *cfg, const ControlStats *stats,
		      MetricsSnapshot *ret)
{
	const UmadPort *port = relay_port(relay);
	UmadSenderStats senders;

	relay_sender_stats(relay, &senders);
	*ret = (MetricsSnapshot){
		.device = port->dev,
		.port = port->port,
		.link_layer = port->roce ? "Ethernet" : "InfiniBand",
		.version = PACKAGE_VERSION,
		.lid = port->lid,
		.pid = (int64_t)getpid(),
		.uptime_ms = (now_usec() - cfg->started_usec) / 1000,
		.generation = cfg->generation,
		.clients = relay_client_count(relay),
		.gids = relay_gid_count(relay),
		.session_memory_bytes = relay_session_memory(relay),
		.counters = *relay_counters(relay),
		.sender_queued = relay_sender_queued(relay),
		.sender_written = senders.written,
		.senders_live = senders.live,
		.senders_wanted = senders.wanted,
		.sender_timeouts = senders.timeouts,
		.sender_start_failures = senders.start_failures,
		.control = *stats,
		.max_trace_readers = cfg->max_trace_readers,
	};
	g_autoptr(GHashTable) rows = g_hash_table_new(g_direct_hash, g_direct_equal);
	MetricsWalk w = { .m = ret, .rows = rows };

	if (cfg->vms)
		metrics_vm_rows(cfg->vms, &w);
	relay_foreach_client(relay, metrics_count_client, &w);
	relay_foreach_session(relay, metrics_count_session, ret);
}
