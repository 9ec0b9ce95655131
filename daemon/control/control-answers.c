/* SPDX-License-Identifier: MIT */
/*
 * Owns the control socket's snapshot answers: status (with who holds the
 * CM class on every RDMA port), clients, sessions and counters, in text
 * and JSON. Client-controlled strings that we echo
 * (a client's comm) are escaped in JSON and sanitized in text.
 */
#include "control-answers.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cm-class-owners.h"
#include "config.h"
#include "json-writer.h"
#include "util.h"

/* The longest command name a client's info can carry (Client.comm). */
#define CONTROL_COMM_MAX 32

/* ---- text helpers ---- */

/* A client-chosen string for a text table: printable ASCII only. */
static void text_sanitized(GString *out, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	if (n == 0) {
		g_string_append_c(out, '-');
		return;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		g_string_append_c(out, c > 0x20 && c < 0x7f ? (char)c : '?');
	}
}

static void format_duration(char *buf, size_t len, uint64_t ms)
{
	uint64_t s = ms / 1000;

	if (s >= 86400)
		snprintf(buf, len, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, s % 86400 / 3600);
	else if (s >= 3600)
		snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s % 3600 / 60);
	else if (s >= 60)
		snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else
		snprintf(buf, len, "%" PRIu64 ".%03" PRIu64 "s", s, ms % 1000);
}

static const char *caps_text(uint64_t caps, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s", caps & RDMACM_MUX_CAP_ERRNO ? "errno" : "",
		 (caps & RDMACM_MUX_CAP_ERRNO) && (caps & RDMACM_MUX_CAP_CLIENT_STATS) ? "," : "",
		 caps & RDMACM_MUX_CAP_CLIENT_STATS ? "stats" : "");
	if (!*buf)
		snprintf(buf, len, "-");
	return buf;
}

/* ---- status ---- */

/*
 * Who holds the CM class on every RDMA port, read from sysfs at each
 * status (cm-class-owners.h): the daemon's port, ib_cm's, and the rest. "cm_owners"
 * in JSON; in text, a line per port after the totals.
 */
static void status_cm_owners(const UmadPort *port, GString *out, JsonWriter *j)
{
	g_autoptr(CmClassOwners) owners = NULL;
	int r = cm_class_owners_scan(sysfs_root(), port->dev, (uint32_t)port->port, &owners);
	unsigned device_ports = owners ? cm_class_owners_device_ports(owners, port->dev) : 0;

	if (j) {
		json_begin_object(j, "cm_owners");
		if (r < 0) {
			json_string(j, "error", strerror(-r));
			json_end_object(j);
			return;
		}
		json_bool(j, "ib_cm_loaded", owners->ib_cm_loaded);
		json_u64(j, "device_ports", device_ports);
		json_begin_array(j, "ports");
		for (guint i = 0; i < owners->ports->len; i++) {
			const CmClassPortOwner *p = &g_array_index(owners->ports, CmClassPortOwner, i);

			json_begin_object(j, NULL);
			json_string(j, "device", p->dev);
			json_u64(j, "port", p->port);
			json_string(j, "owner", cm_class_owner_name(p->owner));
			json_end_object(j);
		}
		json_end_array(j);
		json_end_object(j);
		return;
	}
	if (r < 0) {
		g_string_append_printf(out, "CM class owners: cannot read sysfs (%s)\n", strerror(-r));
		return;
	}
	if (device_ports > 1)
		g_string_append_printf(out,
				       "whole device:   %s has %u ports; ib_cm takes a device whole "
				       "or not at all, so the host's CM has none of them\n",
				       port->dev, device_ports);
	g_string_append_printf(out, "CM class owners (ib_cm %s):\n",
			       owners->ib_cm_loaded ? "is loaded" : "is not loaded");
	for (guint i = 0; i < owners->ports->len; i++) {
		const CmClassPortOwner *p = &g_array_index(owners->ports, CmClassPortOwner, i);
		g_autofree char *name = g_strdup_printf("%s port %u", p->dev, p->port);

		g_string_append_printf(out, "  %-20s %s\n", name, cm_class_owner_text(p->owner));
	}
}

void control_answer_status(Relay *relay, const ControlConfig *cfg, const ControlStats *stats,
			   GString *out, bool json)
{
	const UmadPort *port = relay_port(relay);
	const RelayCounters *k = relay_counters(relay);
	uint64_t tx = 0, rx = 0, dropped = 0, refused = 0;
	uint64_t uptime_ms = (now_usec() - cfg->started_usec) / 1000;
	const char *link_layer = port->roce ? "Ethernet" : "InfiniBand";
	UmadSenderStats senders;

	relay_sender_stats(relay, &senders);
	for (int i = 0; i < CM_IDX_COUNT; i++) {
		tx += k->tx[i];
		rx += k->rx[i];
	}
	for (int i = 0; i < RX_DROP_COUNT; i++)
		dropped += k->rx_drop[i];
	for (int i = 0; i < TX_REJECT_COUNT; i++)
		refused += k->tx_reject[i];

	if (json) {
		JsonWriter j;

		json_writer_init(&j, out);
		json_begin_object(&j, NULL);
		json_string(&j, "device", port->dev);
		json_u64(&j, "port", (uint64_t)port->port);
		json_string(&j, "link_layer", link_layer);
		json_u64(&j, "lid", port->lid);
		json_string(&j, "socket", cfg->socket_path);
		json_string(&j, "control_socket", cfg->control_path);
		json_u64(&j, "pid", (uint64_t)getpid());
		json_string(&j, "version", PACKAGE_VERSION);
		json_u64(&j, "uptime_ms", uptime_ms);
		json_u64(&j, "generation", cfg->generation);
		json_u64(&j, "clients", relay_client_count(relay));
		json_u64(&j, "gids", relay_gid_count(relay));
		json_u64(&j, "sessions", relay_session_count(relay));
		json_u64(&j, "session_memory_bytes", relay_session_memory(relay));
		json_begin_object(&j, "mads");
		json_u64(&j, "tx", tx);
		json_u64(&j, "rx", rx);
		json_u64(&j, "rx_dropped", dropped);
		json_u64(&j, "tx_refused", refused);
		json_end_object(&j);
		json_begin_object(&j, "senders");
		json_u64(&j, "live", senders.live);
		json_u64(&j, "wanted", senders.wanted);
		json_u64(&j, "starting", senders.starting);
		json_u64(&j, "queued", relay_sender_queued(relay));
		json_u64(&j, "written", senders.written);
		json_u64(&j, "timeouts", senders.timeouts);
		json_u64(&j, "lost", senders.lost);
		json_u64(&j, "start_failures", senders.start_failures);
		json_end_object(&j);
		json_begin_object(&j, "control");
		json_u64(&j, "trace_readers", stats->trace_readers);
		json_u64(&j, "max_trace_readers", cfg->max_trace_readers);
		json_u64(&j, "trace_readers_refused", stats->trace_readers_refused);
		json_u64(&j, "trace_readers_shed", stats->trace_readers_shed);
		json_u64(&j, "closed_for_sending", stats->closed_for_sending);
		json_end_object(&j);
		status_cm_owners(port, out, &j);
		json_end_object(&j);
		g_string_append_c(out, '\n');
		return;
	}

	char up[32];

	format_duration(up, sizeof(up), uptime_ms);
	g_string_append_printf(out,
			       "device:         %s\n"
			       "port:           %d\n"
			       "link layer:     %s\n"
			       "socket:         %s\n"
			       "control socket: %s\n"
			       "pid:            %d\n"
			       "version:        %s\n"
			       "uptime:         %s\n"
			       "clients:        %u\n"
			       "GIDs:           %u\n"
			       "sessions:       %u (%zu bytes)\n"
			       "MADs relayed:   %" PRIu64 " sent, %" PRIu64 " received\n"
			       "MADs refused:   %" PRIu64 " sent, %" PRIu64 " received\n"
			       "senders:        %u of %u live, %u MADs queued (%" PRIu64 " stopped "
			       "at the deadline, %" PRIu64 " could not start)\n"
			       "trace readers:  %u of %u (%" PRIu64 " refused, %" PRIu64 " shed)\n"
			       "control closed: %" PRIu64 " (sent more than their command)\n",
			       port->dev, port->port, link_layer, cfg->socket_path,
			       cfg->control_path, (int)getpid(), PACKAGE_VERSION, up,
			       relay_client_count(relay), relay_gid_count(relay),
			       relay_session_count(relay), relay_session_memory(relay), tx,
			       rx, refused, dropped, senders.live, senders.wanted,
			       relay_sender_queued(relay), senders.timeouts, senders.start_failures,
			       stats->trace_readers, cfg->max_trace_readers,
			       stats->trace_readers_refused, stats->trace_readers_shed,
			       stats->closed_for_sending);
	status_cm_owners(port, out, NULL);
}

/* ---- clients ---- */

/* A client's row, copied out of the relay's walk (whose info lives only
 * during the callback). */
typedef struct ControlClientRow {
	RelayClientInfo info;
	uint8_t *gids;
} ControlClientRow;

static void control_collect_client(void *userdata, const RelayClientInfo *c)
{
	GArray *rows = userdata;
	ControlClientRow row = { .info = *c, .gids = g_memdup2(c->gids, (gsize)c->n_gids * GID_LEN) };

	row.info.gids = row.gids;
	g_array_append_val(rows, row);
}

static void control_client_row_clear(gpointer p)
{
	g_free(((ControlClientRow *)p)->gids);
}

static gint control_client_row_cmp(gconstpointer a, gconstpointer b)
{
	const ControlClientRow *x = a, *y = b;

	return x->info.id < y->info.id ? -1 : x->info.id > y->info.id;
}

void control_answer_clients(Relay *relay, const ControlConfig *cfg, GString *out, bool json)
{
	g_autoptr(GArray) rows = g_array_new(FALSE, FALSE, sizeof(ControlClientRow));
	uint64_t now = now_usec();
	size_t omitted = 0;
	JsonWriter j;

	g_array_set_clear_func(rows, control_client_row_clear);
	relay_foreach_client(relay, control_collect_client, rows);
	g_array_sort(rows, control_client_row_cmp);

	if (json) {
		json_writer_init(&j, out);
		json_begin_object(&j, NULL);
		json_begin_array(&j, "clients");
	} else {
		g_string_append_printf(out, "%-6s %-8s %-6s %-6s %-16s %-10s %6s %8s %-12s %8s %8s %8s %8s  %s\n",
				       "ID", "PID", "UID", "GID", "COMMAND", "CONNECTED", "QUEUED",
				       "SESSIONS", "EXTENSIONS", "TX", "RX", "REFUSED", "DROPPED", "GIDS");
	}
	for (guint i = 0; i < rows->len; i++) {
		const RelayClientInfo *c = &g_array_index(rows, ControlClientRow, i).info;
		uint64_t connected_ms = (now - c->connected_usec) / 1000;
		char gid[GID_STR_LEN], caps[32];

		if (out->len >= cfg->max_answer) {
			omitted++;
			continue;
		}
		if (json) {
			json_begin_object(&j, NULL);
			json_u64(&j, "id", c->id);
			json_i64(&j, "pid", c->cred.pid);
			json_i64(&j, "uid", c->cred.uid == (uid_t)-1 ? -1 : (int64_t)c->cred.uid);
			json_i64(&j, "gid", c->cred.gid == (gid_t)-1 ? -1 : (int64_t)c->cred.gid);
			json_string_len(&j, "comm", c->comm, strnlen(c->comm, CONTROL_COMM_MAX));
			json_u64(&j, "connected_ms", connected_ms);
			json_begin_array(&j, "gids");
			for (uint32_t g = 0; g < c->n_gids; g++)
				json_string(&j, NULL, gid_to_string(c->gids + g * GID_LEN, gid));
			json_end_array(&j);
			json_u64(&j, "queued", c->queued);
			json_u64(&j, "sessions", c->sessions);
			json_u64(&j, "extension_caps", c->caps);
			json_bool(&j, "extension_hello", c->hello_done);
			json_begin_object(&j, "stats");
			json_u64(&j, "tx", c->stats.tx_mads);
			json_u64(&j, "rx", c->stats.rx_mads);
			json_u64(&j, "tx_refused", c->stats.tx_rejected);
			json_u64(&j, "rx_dropped", c->stats.rx_dropped);
			json_u64(&j, "requests", c->stats.requests);
			json_end_object(&j);
			json_end_object(&j);
			continue;
		}

		char conn[32];

		format_duration(conn, sizeof(conn), connected_ms);
		g_string_append_printf(out, "%-6u %-8d %-6d %-6d ", c->id, (int)c->cred.pid,
				       (int)c->cred.uid, (int)c->cred.gid);
		size_t start = out->len;
		text_sanitized(out, c->comm, CONTROL_COMM_MAX);
		for (size_t w = out->len - start; w < 16; w++)
			g_string_append_c(out, ' ');
		g_string_append_printf(out,
				       " %-10s %6u %8u %-12s %8" PRIu64 " %8" PRIu64 " %8" PRIu64
				       " %8" PRIu64 "  ",
				       conn, c->queued, c->sessions,
				       c->hello_done ? caps_text(c->caps, caps, sizeof(caps)) : "-",
				       c->stats.tx_mads, c->stats.rx_mads, c->stats.tx_rejected,
				       c->stats.rx_dropped);
		for (uint32_t g = 0; g < c->n_gids; g++)
			g_string_append_printf(out, "%s%s", g ? "," : "",
					       gid_to_string(c->gids + g * GID_LEN, gid));
		if (c->n_gids == 0)
			g_string_append_c(out, '-');
		g_string_append_c(out, '\n');
	}
	if (json) {
		json_end_array(&j);
		json_u64(&j, "omitted", omitted);
		json_end_object(&j);
		g_string_append_c(out, '\n');
	} else if (omitted) {
		g_string_append_printf(out, "# %zu more clients not shown (answer limit)\n", omitted);
	}
}

/* ---- sessions ---- */

typedef struct SessionWalk {
	const ControlConfig *cfg;
	GString *out;
	JsonWriter *j; /* NULL for text */
	uint64_t now;
	size_t omitted;
} SessionWalk;

static void format_session(void *userdata, const Session *s)
{
	SessionWalk *w = userdata;
	char local[GID_STR_LEN], peer[GID_STR_LEN];
	int64_t left = session_timer_left_ms(s, w->now);
	const char *timer = session_timer_name((SessionTimer)s->timer);

	if (w->out->len >= w->cfg->max_answer) {
		w->omitted++;
		return;
	}
	gid_to_string(s->local_gid, local);
	gid_to_string(s->peer_gid, peer);
	if (w->j) {
		JsonWriter *j = w->j;

		json_begin_object(j, NULL);
		json_u64(j, "client_id", s->client_id);
		json_u64(j, "client_comm_id", s->client_comm_id);
		json_u64(j, "wire_comm_id", s->wire_id);
		json_u64(j, "peer_comm_id", s->peer_comm_id);
		json_string(j, "local_gid", local);
		if (gid_is_zero(s->peer_gid))
			json_null(j, "peer_gid");
		else
			json_string(j, "peer_gid", peer);
		json_string(j, "state", session_state_name((SessionState)s->state));
		json_u64(j, "age_ms", session_age_ms(s, w->now));
		json_string(j, "timer", timer);
		if (left < 0)
			json_null(j, "timer_left_ms");
		else
			json_i64(j, "timer_left_ms", left);
		json_end_object(j);
		return;
	}
	char left_text[24];

	if (left < 0)
		snprintf(left_text, sizeof(left_text), "-");
	else
		snprintf(left_text, sizeof(left_text), "%" PRId64, left);
	g_string_append_printf(w->out,
			       "%-6u 0x%08x 0x%08x 0x%08x %-12s %10u %-10s %8s  %s  %s\n",
			       s->client_id, s->client_comm_id, s->wire_id, s->peer_comm_id,
			       session_state_name((SessionState)s->state), session_age_ms(s, w->now),
			       timer, left_text, local,
			       gid_is_zero(s->peer_gid) ? "-" : peer);
}

void control_answer_sessions(Relay *relay, const ControlConfig *cfg, GString *out, bool json)
{
	JsonWriter j;
	SessionWalk w = { .cfg = cfg, .out = out, .j = json ? &j : NULL, .now = now_usec() };

	if (json) {
		json_writer_init(&j, out);
		json_begin_object(&j, NULL);
		json_begin_array(&j, "sessions");
	} else {
		g_string_append_printf(out, "%-6s %-10s %-10s %-10s %-12s %10s %-10s %8s  %s  %s\n",
				       "CLIENT", "COMM-ID", "WIRE-ID", "PEER-ID", "STATE", "AGE-MS",
				       "TIMER", "LEFT-MS", "LOCAL-GID", "PEER-GID");
	}
	relay_foreach_session(relay, format_session, &w);
	if (json) {
		json_end_array(&j);
		json_u64(&j, "omitted", w.omitted);
		json_end_object(&j);
		g_string_append_c(out, '\n');
	} else if (w.omitted) {
		g_string_append_printf(out, "# %zu more sessions not shown (answer limit)\n",
				       w.omitted);
	}
}

/* ---- counters ---- */

void control_answer_counters(Relay *relay, GString *out, bool json)
{
	const RelayCounters *k = relay_counters(relay);

	if (json) {
		JsonWriter j;

		json_writer_init(&j, out);
		json_begin_object(&j, NULL);
		json_begin_object(&j, "tx");
		for (int i = 0; i < CM_IDX_COUNT; i++)
			json_u64(&j, cm_attr_index_name((CmAttrIndex)i), k->tx[i]);
		json_end_object(&j);
		json_begin_object(&j, "rx");
		for (int i = 0; i < CM_IDX_COUNT; i++)
			json_u64(&j, cm_attr_index_name((CmAttrIndex)i), k->rx[i]);
		json_end_object(&j);
		json_begin_object(&j, "rx_dropped");
		for (int i = 0; i < RX_DROP_COUNT; i++)
			json_u64(&j, relay_rx_drop_name((RxDrop)i), k->rx_drop[i]);
		json_end_object(&j);
		json_begin_object(&j, "tx_refused");
		for (int i = 0; i < TX_REJECT_COUNT; i++)
			json_u64(&j, relay_tx_reject_name((TxReject)i), k->tx_reject[i]);
		json_end_object(&j);
#define X(f, metric, label, value, help) json_u64(&j, #f, k->f);
		RELAY_COUNTERS(X)
#undef X
		json_u64(&j, "sessions_live", relay_session_count(relay));
		json_end_object(&j);
		g_string_append_c(out, '\n');
		return;
	}

	g_string_append_printf(out, "%-18s %12s %12s\n", "ATTRIBUTE", "TX", "RX");
	for (int i = 0; i < CM_IDX_COUNT; i++)
		g_string_append_printf(out, "%-18s %12" PRIu64 " %12" PRIu64 "\n",
				       cm_attr_index_name((CmAttrIndex)i), k->tx[i], k->rx[i]);
	g_string_append(out, "\nRX DROPPED\n");
	for (int i = 0; i < RX_DROP_COUNT; i++)
		g_string_append_printf(out, "%-18s %12" PRIu64 "\n", relay_rx_drop_name((RxDrop)i),
				       k->rx_drop[i]);
	g_string_append(out, "\nTX REFUSED\n");
	for (int i = 0; i < TX_REJECT_COUNT; i++)
		g_string_append_printf(out, "%-18s %12" PRIu64 "\n", relay_tx_reject_name((TxReject)i),
				       k->tx_reject[i]);
	g_string_append(out, "\nOTHER\n");
#define X(f, metric, label, value, help) g_string_append_printf(out, "%-21s %9" PRIu64 "\n", #f, k->f);
	RELAY_COUNTERS(X)
#undef X
	g_string_append_printf(out, "%-18s %12u\n", "sessions_live",
			       relay_session_count(relay));
}

/* ---- trace ---- */

/* Append one event line, or count it lost when the reader is too far
 * behind. Never writes to the socket here: the relay is mid-event. */
