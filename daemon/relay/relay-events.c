/* SPDX-License-Identifier: MIT */
/*
 * Owns the relay's events: the sinks that see every MAD crossing the
 * daemon (trace, pcap, the control socket's trace readers) and the text
 * form of an event. The reasons' names are relay-counters.c's.
 */
#include <inttypes.h>
#include <stdio.h>

#include "relay-internal.h"
#include "util.h"

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
