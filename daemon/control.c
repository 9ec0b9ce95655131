/* SPDX-License-Identifier: MIT */
/*
 * Owns the control socket (control.h): its connections, their bounded
 * buffers and deadlines, the command parser, and the status, clients,
 * sessions, counters and trace answers in text and JSON.
 *
 * Everything a control client sends is hostile until checked: the line is
 * bounded and must be printable ASCII, and a client that does not send or
 * does not read is closed by a deadline. Client-controlled strings that we
 * echo (a client's comm) are escaped in JSON and sanitized in text.
 */
#include "control.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "json-writer.h"
#include "log.h"
#include "util.h"

/* The longest command name a client's info can carry (Client.comm). */
#define CONTROL_COMM_MAX 32

typedef enum ConnState {
	CONN_READING,	/* waiting for the command line */
	CONN_ANSWERING, /* writing a snapshot answer (or an error), then close */
	CONN_TRACING,	/* streaming events until the client closes */
} ConnState;

typedef struct ControlConn {
	Control *ctl;
	int fd;
	sd_event_source *io;
	sd_event_source *timer;
	ConnState state;
	bool json;
	bool sink_added;
	bool eof; /* the client shut down its sending side */
	char in[CONTROL_MAX_LINE + 1];
	size_t in_len;
	GString *out;
	size_t out_off; /* bytes of out already written */
	uint64_t lost;	/* trace events dropped since the last "lost" line */
} ControlConn;

struct Control {
	sd_event *event;
	Relay *relay;
	ControlConfig cfg;
	int listen_fd;
	sd_event_source *listen_src;
	GPtrArray *conns; /* ControlConn* (owned) */
};

void control_config_init(ControlConfig *cfg, const char *socket_path, const char *control_path)
{
	*cfg = (ControlConfig){
		.socket_path = socket_path,
		.control_path = control_path,
		.started_usec = now_usec(),
		.max_connections = CONTROL_MAX_CONNECTIONS,
		.max_answer = CONTROL_MAX_ANSWER,
		.max_trace_buffer = CONTROL_MAX_TRACE_BUFFER,
		.command_timeout_usec = 5 * 1000000u,
		.answer_timeout_usec = 30 * 1000000u,
	};
}

/* ---- connections ---- */

static void conn_trace_sink(void *userdata, const RelayEvent *ev);

static void conn_free(ControlConn *k)
{
	if (!k)
		return;
	if (k->sink_added)
		relay_remove_event_sink(k->ctl->relay, conn_trace_sink, k);
	sd_event_source_disable_unref(k->io);
	sd_event_source_disable_unref(k->timer);
	if (k->fd >= 0) {
		char junk[512];

		/* Read what the client sent beyond its command, so closing does
		 * not turn into a reset that could discard our answer. */
		while (recv(k->fd, junk, sizeof(junk), MSG_DONTWAIT) > 0)
			;
		close(k->fd);
	}
	if (k->out)
		g_string_free(k->out, TRUE);
	g_free(k);
}

/* Remove @k from its Control and free it. */
static void conn_close(ControlConn *k)
{
	g_ptr_array_remove_fast(k->ctl->conns, k); /* frees through the array */
}

static size_t conn_pending(const ControlConn *k)
{
	return k->out->len - k->out_off;
}

static void conn_update_events(ControlConn *k)
{
	uint32_t events = conn_pending(k) ? EPOLLOUT : 0;

	/* Reading stops once the command is in; a trace reader is still read
	 * (and its bytes discarded) to notice when it goes away. */
	if (k->state != CONN_ANSWERING && !k->eof)
		events |= EPOLLIN;
	(void)sd_event_source_set_io_events(k->io, events);
}

/* Write what is buffered. Return: 0 when all is written, -EAGAIN when
 * some remains, another negative errno when the client is gone. */
static int conn_flush(ControlConn *k)
{
	while (conn_pending(k)) {
		ssize_t n = send(k->fd, k->out->str + k->out_off, conn_pending(k),
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -EAGAIN : -errno;
		}
		k->out_off += (size_t)n;
	}
	g_string_truncate(k->out, 0);
	k->out_off = 0;
	return 0;
}

/* Flush, and close when an answer is complete or the client is gone.
 * Return: false when @k was freed. */
static bool conn_progress(ControlConn *k)
{
	int r = conn_flush(k);

	if (r < 0 && r != -EAGAIN) {
		log_debug("control connection on fd %d: %s", k->fd, strerror(-r));
		conn_close(k);
		return false;
	}
	if (r == 0 && k->state == CONN_ANSWERING) {
		conn_close(k);
		return false;
	}
	conn_update_events(k);
	return true;
}

static void conn_error(ControlConn *k, const char *msg)
{
	g_string_truncate(k->out, 0);
	k->out_off = 0;
	g_string_append_printf(k->out, "error: %s\n", msg);
	k->state = CONN_ANSWERING;
}

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

static void answer_status(Control *ctl, GString *out, bool json)
{
	const UmadPort *port = relay_port(ctl->relay);
	const RelayCounters *k = relay_counters(ctl->relay);
	uint64_t tx = 0, rx = 0, dropped = 0, refused = 0;
	uint64_t uptime_ms = (now_usec() - ctl->cfg.started_usec) / 1000;
	const char *link_layer = port->roce ? "Ethernet" : "InfiniBand";

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
		json_string(&j, "socket", ctl->cfg.socket_path);
		json_string(&j, "control_socket", ctl->cfg.control_path);
		json_u64(&j, "pid", (uint64_t)getpid());
		json_string(&j, "version", PACKAGE_VERSION);
		json_u64(&j, "uptime_ms", uptime_ms);
		json_u64(&j, "generation", ctl->cfg.generation);
		json_u64(&j, "clients", relay_client_count(ctl->relay));
		json_u64(&j, "gids", relay_gid_count(ctl->relay));
		json_u64(&j, "sessions", relay_session_count(ctl->relay));
		json_u64(&j, "session_memory_bytes", relay_session_memory(ctl->relay));
		json_begin_object(&j, "mads");
		json_u64(&j, "tx", tx);
		json_u64(&j, "rx", rx);
		json_u64(&j, "rx_dropped", dropped);
		json_u64(&j, "tx_refused", refused);
		json_end_object(&j);
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
			       "MADs refused:   %" PRIu64 " sent, %" PRIu64 " received\n",
			       port->dev, port->port, link_layer, ctl->cfg.socket_path,
			       ctl->cfg.control_path, (int)getpid(), PACKAGE_VERSION, up,
			       relay_client_count(ctl->relay), relay_gid_count(ctl->relay),
			       relay_session_count(ctl->relay), relay_session_memory(ctl->relay), tx,
			       rx, refused, dropped);
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

static void answer_clients(Control *ctl, GString *out, bool json)
{
	g_autoptr(GArray) rows = g_array_new(FALSE, FALSE, sizeof(ControlClientRow));
	uint64_t now = now_usec();
	size_t omitted = 0;
	JsonWriter j;

	g_array_set_clear_func(rows, control_client_row_clear);
	relay_foreach_client(ctl->relay, control_collect_client, rows);
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

		if (out->len >= ctl->cfg.max_answer) {
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
	Control *ctl;
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

	if (w->out->len >= w->ctl->cfg.max_answer) {
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

static void answer_sessions(Control *ctl, GString *out, bool json)
{
	JsonWriter j;
	SessionWalk w = { .ctl = ctl, .out = out, .j = json ? &j : NULL, .now = now_usec() };

	if (json) {
		json_writer_init(&j, out);
		json_begin_object(&j, NULL);
		json_begin_array(&j, "sessions");
	} else {
		g_string_append_printf(out, "%-6s %-10s %-10s %-10s %-12s %10s %-10s %8s  %s  %s\n",
				       "CLIENT", "COMM-ID", "WIRE-ID", "PEER-ID", "STATE", "AGE-MS",
				       "TIMER", "LEFT-MS", "LOCAL-GID", "PEER-GID");
	}
	relay_foreach_session(ctl->relay, format_session, &w);
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

#define COUNTER_FIELDS(X)                                                                     \
	X(requests) X(reg_ok) X(reg_refused) X(unreg_ok) X(unreg_refused) X(bad_frames)      \
	X(truncated_frames) X(clients_accepted) X(clients_refused) X(clients_dropped)        \
	X(sessions_created) X(sessions_expired) X(recv_errors)

static void answer_counters(Control *ctl, GString *out, bool json)
{
	const RelayCounters *k = relay_counters(ctl->relay);

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
#define X(f) json_u64(&j, #f, k->f);
		COUNTER_FIELDS(X)
#undef X
		json_u64(&j, "sessions_live", relay_session_count(ctl->relay));
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
#define X(f) g_string_append_printf(out, "%-18s %12" PRIu64 "\n", #f, k->f);
	COUNTER_FIELDS(X)
#undef X
	g_string_append_printf(out, "%-18s %12u\n", "sessions_live",
			       relay_session_count(ctl->relay));
}

/* ---- trace ---- */

/* Append one event line, or count it lost when the reader is too far
 * behind. Never writes to the socket here: the relay is mid-event. */
static void conn_trace_sink(void *userdata, const RelayEvent *ev)
{
	ControlConn *k = userdata;
	g_autoptr(GString) line = g_string_sized_new(384);
	char when[64], name[16], gid[GID_STR_LEN];
	time_t sec = (time_t)(ev->realtime_usec / 1000000u);
	struct tm tm;

	if (!localtime_r(&sec, &tm) || !strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(when, sizeof(when), "%lld", (long long)sec);

	if (k->lost) {
		if (k->json)
			g_string_append_printf(line, "{\"lost\":%" PRIu64 "}\n", k->lost);
		else
			g_string_append_printf(line, "# %" PRIu64 " events lost\n", k->lost);
	}
	if (k->json) {
		JsonWriter j;
		char tid[24];

		json_writer_init(&j, line);
		json_begin_object(&j, NULL);
		json_u64(&j, "time_usec", ev->realtime_usec);
		g_string_append_printf(line, ",\"time\":\"%s.%06u\"", when,
				       (unsigned)(ev->realtime_usec % 1000000u));
		json_string(&j, "dev", ev->dev);
		json_i64(&j, "port", ev->port);
		json_string(&j, "dir", ev->rx ? "rx" : "tx");
		json_string(&j, "attr", cm_attr_name(ev->attr, name));
		json_u64(&j, "attr_id", ev->attr);
		if (ev->client_id) {
			json_u64(&j, "client", ev->client_id);
			json_i64(&j, "pid", ev->client_pid);
		} else {
			json_null(&j, "client");
			json_null(&j, "pid");
		}
		json_u64(&j, "client_comm_id", ev->client_comm_id);
		json_u64(&j, "wire_comm_id", ev->wire_id);
		/* A string: a 64-bit TID does not survive a double. */
		snprintf(tid, sizeof(tid), "0x%016" PRIx64, ev->tid);
		json_string(&j, "tid", tid);
		json_string(&j, "local_gid", ev->local_gid ? gid_to_string(ev->local_gid, gid) : NULL);
		json_string(&j, "remote_gid",
			    ev->remote_gid ? gid_to_string(ev->remote_gid, gid) : NULL);
		json_string(&j, "dropped", ev->drop);
		json_end_object(&j);
		g_string_append_c(line, '\n');
	} else {
		char text[512];

		relay_format_event(ev, text, sizeof(text));
		g_string_append_printf(line, "%s.%06u %s\n", when,
				       (unsigned)(ev->realtime_usec % 1000000u), text);
	}

	if (conn_pending(k) + line->len > k->ctl->cfg.max_trace_buffer) {
		k->lost++;
		return;
	}
	/* Give back the written prefix before it grows the buffer. */
	if (k->out_off > k->out->len / 2) {
		g_string_erase(k->out, 0, (gssize)k->out_off);
		k->out_off = 0;
	}
	g_string_append_len(k->out, line->str, (gssize)line->len);
	k->lost = 0;
	conn_update_events(k);
}

static void conn_start_trace(ControlConn *k)
{
	const UmadPort *port = relay_port(k->ctl->relay);
	relay_add_event_sink(k->ctl->relay, conn_trace_sink, k);
	k->sink_added = true;
	k->state = CONN_TRACING;
	if (k->json) {
		JsonWriter j;

		json_writer_init(&j, k->out);
		json_begin_object(&j, NULL);
		json_begin_object(&j, "tracing");
		json_string(&j, "dev", port->dev);
		json_i64(&j, "port", port->port);
		json_end_object(&j);
		json_end_object(&j);
		g_string_append_c(k->out, '\n');
	} else {
		g_string_append_printf(k->out, "# tracing %s port %d\n", port->dev, port->port);
	}
	/* Trace readers may stay as long as they like. */
	(void)sd_event_source_set_enabled(k->timer, SD_EVENT_OFF);
}

/* ---- commands ---- */

static const char help_text[] =
	"commands (one per connection, optionally followed by ' json'):\n"
	"  status     the daemon, the port and totals\n"
	"  clients    every client: credentials, GIDs, queue, sessions, stats\n"
	"  sessions   every CM session: comm ids, GIDs, state, timer\n"
	"  counters   every relay counter\n"
	"  trace      a line per MAD event, until the client closes\n";

static void conn_command(ControlConn *k, char *line)
{
	Control *ctl = k->ctl;
	char *words[3] = { 0 };
	int n = 0;

	for (char *p = line; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c < 0x20 || c > 0x7e) {
			conn_error(k, "the command line must be printable ASCII");
			return;
		}
	}
	for (char *save = NULL, *w = strtok_r(line, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		if (n == 2) {
			conn_error(k, "too many words; usage: COMMAND [json]");
			return;
		}
		words[n++] = w;
	}
	if (n == 0) {
		conn_error(k, "empty command; try 'help'");
		return;
	}
	if (n == 2) {
		if (strcmp(words[1], "json") != 0) {
			conn_error(k, "the only option is 'json'");
			return;
		}
		k->json = true;
	}

	k->state = CONN_ANSWERING;
	if (strcmp(words[0], "status") == 0)
		answer_status(ctl, k->out, k->json);
	else if (strcmp(words[0], "clients") == 0)
		answer_clients(ctl, k->out, k->json);
	else if (strcmp(words[0], "sessions") == 0)
		answer_sessions(ctl, k->out, k->json);
	else if (strcmp(words[0], "counters") == 0)
		answer_counters(ctl, k->out, k->json);
	else if (strcmp(words[0], "help") == 0 && !k->json)
		g_string_append(k->out, help_text);
	else if (strcmp(words[0], "trace") == 0) {
		conn_start_trace(k);
		return;
	} else {
		conn_error(k, "unknown command; try 'help'");
		return;
	}
	(void)sd_event_source_set_time_relative(k->timer, ctl->cfg.answer_timeout_usec);
	(void)sd_event_source_set_enabled(k->timer, SD_EVENT_ONESHOT);
}

/* Read input. Return: false when @k was freed. */
static bool conn_read(ControlConn *k)
{
	for (;;) {
		char junk[512];
		char *buf = k->state == CONN_READING ? k->in + k->in_len : junk;
		size_t room = k->state == CONN_READING ? sizeof(k->in) - 1 - k->in_len : sizeof(junk);
		ssize_t n = recv(k->fd, buf, room, MSG_DONTWAIT);
		char *nl;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return true;
			conn_close(k);
			return false;
		}
		if (n == 0) {
			if (k->state != CONN_READING) {
				/* The client is done sending, maybe not done reading
				 * (nc, socat); a full close shows up as EPOLLHUP or as a
				 * failed send. */
				k->eof = true;
				return true;
			}
			if (k->in_len == 0 || memchr(k->in, '\0', k->in_len)) {
				conn_close(k);
				return false;
			}
			/* A command without its newline still counts at EOF. */
			k->eof = true;
			k->in[k->in_len] = '\0';
			conn_command(k, k->in);
			return true;
		}
		if (k->state != CONN_READING)
			continue; /* a trace reader's chatter is ignored */

		k->in_len += (size_t)n;
		k->in[k->in_len] = '\0';
		nl = memchr(k->in, '\n', k->in_len);
		if (nl) {
			/* A NUL would hide the rest of the line from the parser. */
			if (memchr(k->in, '\0', (size_t)(nl - k->in))) {
				conn_error(k, "the command line must be printable ASCII");
				return true;
			}
			*nl = '\0';
			if (nl > k->in && nl[-1] == '\r')
				nl[-1] = '\0';
			conn_command(k, k->in);
			return true;
		}
		if (k->in_len == sizeof(k->in) - 1) {
			conn_error(k, "command line too long");
			return true;
		}
	}
}

static int on_conn_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	ControlConn *k = userdata;

	(void)s;
	(void)fd;
	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		if (!conn_read(k))
			return 0;
		/* Both directions are gone: nobody will read an answer. */
		if (revents & (EPOLLHUP | EPOLLERR)) {
			conn_close(k);
			return 0;
		}
	}
	(void)conn_progress(k);
	return 0;
}

static int on_conn_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	ControlConn *k = userdata;

	(void)s;
	(void)usec;
	log_debug("closing control connection on fd %d: %s", k->fd,
		  k->state == CONN_READING ? "no command in time" : "answer not read in time");
	conn_close(k);
	return 0;
}

/* ---- listener ---- */

static void control_refuse(int fd, const char *msg)
{
	(void)send(fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
}

static int control_add_conn(Control *ctl, int fd)
{
	ControlConn *k = g_new0(ControlConn, 1);
	int r;

	k->ctl = ctl;
	k->fd = fd;
	k->out = g_string_sized_new(256);
	g_ptr_array_add(ctl->conns, k);
	r = sd_event_add_io(ctl->event, &k->io, fd, EPOLLIN, on_conn_io, k);
	if (r >= 0)
		r = sd_event_add_time_relative(ctl->event, &k->timer, CLOCK_MONOTONIC,
					       ctl->cfg.command_timeout_usec, 0, on_conn_timeout, k);
	if (r < 0) {
		conn_close(k);
		return r;
	}
	return 0;
}

static int on_control_listen(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	Control *ctl = userdata;

	(void)s;
	(void)revents;
	for (;;) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int r;

		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN)
				log_ratelimited(LOG_WARNING, NULL, "control accept failed: %s",
						strerror(errno));
			return 0;
		}
		if (ctl->conns->len >= ctl->cfg.max_connections) {
			log_ratelimited(LOG_WARNING, NULL,
					"refusing a control connection: %u are open already",
					ctl->conns->len);
			control_refuse(cfd, "error: too many control connections\n");
			continue;
		}
		r = control_add_conn(ctl, cfd);
		if (r < 0)
			log_ratelimited(LOG_WARNING, NULL, "cannot serve a control connection: %s",
					strerror(-r));
	}
}

int control_new(sd_event *event, Relay *relay, int listen_fd, const ControlConfig *cfg,
		Control **ret)
{
	_cleanup_fd_ int fd = listen_fd;
	Control *ctl = g_new0(Control, 1);
	int r;

	ctl->event = sd_event_ref(event);
	ctl->relay = relay;
	ctl->cfg = *cfg;
	ctl->conns = g_ptr_array_new_with_free_func((GDestroyNotify)conn_free);
	ctl->listen_fd = fd_steal(&fd);
	r = sd_event_add_io(event, &ctl->listen_src, ctl->listen_fd, EPOLLIN, on_control_listen,
			    ctl);
	if (r < 0) {
		control_free(ctl);
		return r;
	}
	*ret = ctl;
	return 0;
}

void control_free(Control *ctl)
{
	if (!ctl)
		return;
	if (ctl->conns)
		g_ptr_array_free(ctl->conns, TRUE);
	sd_event_source_disable_unref(ctl->listen_src);
	if (ctl->listen_fd >= 0)
		close(ctl->listen_fd);
	sd_event_unref(ctl->event);
	g_free(ctl);
}
