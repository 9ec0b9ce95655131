/* SPDX-License-Identifier: MIT */
/*
 * Owns the relay's reporting: the event sinks that see every MAD crossing
 * the daemon (trace, pcap, the control socket's trace readers), the text
 * form of an event, the names of the drop and refusal reasons, and the
 * counter dump.
 */
#include <inttypes.h>
#include <stdio.h>

#include "relay-internal.h"
#include "util.h"

static const char *const relay_rx_drop_names[RX_DROP_COUNT] = {
	[RX_DROP_STATUS] = "status-packet",
	[RX_DROP_NOT_CM] = "not-cm",
	[RX_DROP_UNSUPPORTED] = "unsupported-attr",
	[RX_DROP_MALFORMED] = "malformed",
	[RX_DROP_NO_OWNER] = "no-gid-owner",
	[RX_DROP_NO_SESSION] = "no-session",
	[RX_DROP_QUEUE_FULL] = "queue-full",
	[RX_DROP_SESSION_QUOTA] = "session-quota",
	[RX_DROP_SPOOFED] = "spoofed",
	[RX_DROP_BAD_STATE] = "bad-state",
	[RX_DROP_HALF_OPEN_QUOTA] = "half-open-quota",
	[RX_DROP_PEER_QUOTA] = "peer-quota",
#ifdef RDMACM_MUX_HANDOFF_FUTURE
	[RX_DROP_FUTURE] = "future-test",
#endif
};

static const char *const relay_tx_reject_names[TX_REJECT_COUNT] = {
	[TX_REJECT_BAD_LENGTH] = "bad-length",
	[TX_REJECT_NOT_CM] = "not-cm",
	[TX_REJECT_UNSUPPORTED] = "unsupported-attr",
	[TX_REJECT_MALFORMED] = "malformed",
	[TX_REJECT_FOREIGN_SGID] = "foreign-sgid",
	[TX_REJECT_NO_SESSION] = "no-session",
	[TX_REJECT_HIJACK] = "hijack",
	[TX_REJECT_SPOOFED] = "spoofed",
	[TX_REJECT_SESSION_QUOTA] = "session-quota",
	[TX_REJECT_NO_DESTINATION] = "no-destination",
	[TX_REJECT_NO_PORT_GID] = "no-port-gid",
	[TX_REJECT_SEND_FAILED] = "send-failed",
	[TX_REJECT_SEND_BUSY] = "send-busy",
};

const char *relay_rx_drop_name(RxDrop d)
{
	return (unsigned)d < RX_DROP_COUNT ? relay_rx_drop_names[d] : "?";
}

const char *relay_tx_reject_name(TxReject d)
{
	return (unsigned)d < TX_REJECT_COUNT ? relay_tx_reject_names[d] : "?";
}

void relay_format_event(const RelayEvent *ev, char *buf, size_t len)
{
	char a[GID_STR_LEN], b[GID_STR_LEN], name[16], client[16], ids[64];
	const uint8_t *from = ev->rx ? ev->remote_gid : ev->local_gid;
	const uint8_t *to = ev->rx ? ev->local_gid : ev->remote_gid;

	if (ev->client_id)
		snprintf(client, sizeof(client), "%u", ev->client_id);
	else
		snprintf(client, sizeof(client), "-");
	if (ev->rx)
		snprintf(ids, sizeof(ids), "wire 0x%08x -> comm 0x%08x", ev->wire_id,
			 ev->client_comm_id);
	else
		snprintf(ids, sizeof(ids), "comm 0x%08x -> wire 0x%08x", ev->client_comm_id,
			 ev->wire_id);
	snprintf(buf, len, "[%s:%d] %s%-3s %-8s client %-4s %s  tid 0x%016" PRIx64 "  %s -> %s%s%s",
		 ev->dev, ev->port, ev->rx ? "RX" : "TX", ev->drop ? "!" : "",
		 cm_attr_name(ev->attr, name), client, ids, ev->tid,
		 from ? gid_to_string(from, a) : "?", to ? gid_to_string(to, b) : "?",
		 ev->drop ? "  dropped: " : "", ev->drop ? ev->drop : "");
}

void relay_text_trace_sink(void *userdata, const RelayEvent *ev)
{
	FILE *f = userdata;
	char line[512];

	relay_format_event(ev, line, sizeof(line));
	fprintf(f, "%s\n", line);
	fflush(f);
}

void relay_add_event_sink(Relay *r, RelayEventFn fn, void *userdata)
{
	RelayEventSink sink = { fn, userdata };

	g_array_append_val(r->sinks, sink);
}

void relay_remove_event_sink(Relay *r, RelayEventFn fn, void *userdata)
{
	for (guint i = 0; i < r->sinks->len; i++) {
		RelayEventSink *s = &g_array_index(r->sinks, RelayEventSink, i);
		if (s->fn == fn && s->userdata == userdata) {
			g_array_remove_index(r->sinks, i);
			return;
		}
	}
}

void relay_emit(Relay *r, RelayEvent *ev, const RelayClient *c)
{
	if (r->sinks->len == 0)
		return;
	ev->dev = r->port->dev;
	ev->port = r->port->port;
	ev->realtime_usec = (uint64_t)g_get_real_time();
	if (c) {
		ev->client_id = c->id;
		ev->client_pid = (int)c->conn.cred.pid;
	}
	if (ev->mad && ev->mad_len >= MAD_HDR_LEN)
		ev->tid = cm_get_tid(ev->mad);
	/* A sink may remove itself (a trace reader that went away). */
	for (guint i = r->sinks->len; i > 0; i--) {
		RelayEventSink s = g_array_index(r->sinks, RelayEventSink, i - 1);
		s.fn(s.userdata, ev);
	}
}

void relay_dump_counters(const Relay *r, FILE *f)
{
	const RelayCounters *k = r->counters;

	fprintf(f, "counters for %s port %d:\n", r->port->dev, r->port->port);
	fprintf(f, "  %-16s %10s %10s\n", "attribute", "tx", "rx");
	for (int i = 0; i < CM_IDX_COUNT; i++)
		if (k->tx[i] || k->rx[i])
			fprintf(f, "  %-16s %10" PRIu64 " %10" PRIu64 "\n",
				cm_attr_index_name((CmAttrIndex)i), k->tx[i], k->rx[i]);
	for (int i = 0; i < RX_DROP_COUNT; i++)
		if (k->rx_drop[i])
			fprintf(f, "  rx dropped, %-16s %10" PRIu64 "\n", relay_rx_drop_names[i],
				k->rx_drop[i]);
	for (int i = 0; i < TX_REJECT_COUNT; i++)
		if (k->tx_reject[i])
			fprintf(f, "  tx refused, %-16s %10" PRIu64 "\n", relay_tx_reject_names[i],
				k->tx_reject[i]);
	fprintf(f, "  requests %" PRIu64 ", REG ok %" PRIu64 " refused %" PRIu64
		   ", UNREG ok %" PRIu64 " refused %" PRIu64 ", bad frames %" PRIu64
		   ", truncated frames %" PRIu64 "\n",
		k->requests, k->reg_ok, k->reg_refused, k->unreg_ok, k->unreg_refused,
		k->bad_frames, k->truncated_frames);
	fprintf(f, "  clients accepted %" PRIu64 " refused %" PRIu64 " dropped %" PRIu64
		   ", sessions created %" PRIu64 " expired %" PRIu64 " live %u\n",
		k->clients_accepted, k->clients_refused, k->clients_dropped,
		k->sessions_created, k->sessions_expired, session_table_count(r->sessions));
}
