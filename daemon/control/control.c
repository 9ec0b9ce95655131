/* SPDX-License-Identifier: MIT */
/*
 * Owns the control socket (control.h): its connections, their bounded
 * buffers and deadlines, the command parser and the trace stream; the
 * snapshot answers are control-answers.c.
 *
 * Everything a control client sends is hostile until checked: the line is
 * bounded and must be printable ASCII, and a client that does not send or
 * does not read is closed by a deadline. Client-controlled strings that we
 * echo (a client's comm) are escaped in JSON and sanitized in text.
 */
#include "control.h"
#include "control-answers.h"
#include "control-vms.h"

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
#include "metrics.h"
#include "util.h"

/* The longest command name a client's info can carry (Client.comm). */
#define CONTROL_COMM_MAX 32
/* Room kept for one trace line (JSON, with the "lost" line before it). */
#define CONTROL_TRACE_LINE_MAX 1024u

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
	uint64_t full_since; /* monotonic usec its trace buffer filled up, or 0 */
	size_t after_command; /* bytes it sent after its command */
	bool shed;	      /* a trace reader too slow to keep: closing */
	struct ucred cred;    /* as accepted, for log lines */
} ControlConn;

struct Control {
	sd_event *event;
	Relay *relay;
	ControlConfig cfg;
	int listen_fd;
	Listener *listener;
	GPtrArray *conns; /* ControlConn* (owned) */
	ControlStats stats;
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
		.max_trace_readers = CONTROL_MAX_TRACE_READERS,
		.trace_shed_usec = CONTROL_TRACE_SHED_USEC,
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
	if (k->state == CONN_TRACING)
		k->ctl->stats.trace_readers--;
	if (k->fd >= 0) {
		char junk[4096];

		/* Take what the client sent beyond its command (once, never in a
		 * loop: a client that keeps sending must not hold the loop), so
		 * that closing does not turn into a reset that discards the
		 * answer of a client that sent a little more. */
		(void)recv(k->fd, junk, sizeof(junk), MSG_DONTWAIT);
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

	/* Read in every state: after the command, to notice a client that
	 * goes away or keeps sending (its bytes are counted and dropped). */
	if (!k->eof)
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

/* Its buffer cannot take another line: count the event as lost without
 * formatting it, and close a reader that stays this far behind. */
static bool conn_trace_full(ControlConn *k)
{
	uint64_t now;

	if (conn_pending(k) + CONTROL_TRACE_LINE_MAX <= k->ctl->cfg.max_trace_buffer) {
		k->full_since = 0;
		return false;
	}
	k->lost++;
	now = now_usec();
	if (!k->full_since)
		k->full_since = now;
	else if (!k->shed && now - k->full_since >= k->ctl->cfg.trace_shed_usec) {
		/* Not from inside the relay's walk over its sinks: the timer. */
		k->shed = true;
		(void)sd_event_source_set_time_relative(k->timer, 0);
		(void)sd_event_source_set_enabled(k->timer, SD_EVENT_ONESHOT);
	}
	return true;
}

static void conn_trace_sink(void *userdata, const RelayEvent *ev)
{
	ControlConn *k = userdata;
	g_autoptr(GString) line = NULL;
	char when[64], name[16], gid[GID_STR_LEN];
	time_t sec = (time_t)(ev->realtime_usec / 1000000u);
	struct tm tm;

	if (k->shed || conn_trace_full(k))
		return;
	line = g_string_sized_new(384);

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

	/* Each reader costs the relay a formatted line per MAD. */
	if (k->ctl->stats.trace_readers >= k->ctl->cfg.max_trace_readers) {
		char msg[64];

		k->ctl->stats.trace_readers_refused++;
		log_ratelimited(LOG_WARNING, NULL,
				"refusing a trace reader (pid %d uid %d): %u trace already",
				(int)k->cred.pid, (int)k->cred.uid, k->ctl->stats.trace_readers);
		snprintf(msg, sizeof(msg), "too many trace readers (%u)", k->ctl->cfg.max_trace_readers);
		conn_error(k, msg);
		return;
	}
	k->ctl->stats.trace_readers++;
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
	"  metrics    the counters and totals in the Prometheus text format (no json)\n"
	"  trace      a line per MAD event, until the client closes\n"
	"  vms        every VM: socket, GIDs (registered or not), clients, counters\n"
	"root (or the daemon's user) only, one line in answer:\n"
	"  vm add NAME gid=GID... [prefix=GID/LEN...] [owner=UID] [group=GID] [mode=MODE]\n"
	"  vm set NAME key=value...   change what is given (gid and prefix: the whole list)\n"
	"  vm del NAME                disconnect its clients, free its GIDs and socket\n";

/* "vm add|set|del ...": a privileged peer only, and a line in answer. */
static void conn_vm_command(ControlConn *k, char **words, int n)
{
	Control *ctl = k->ctl;

	if (!ctl->cfg.vms) {
		conn_error(k, "this daemon serves no VMs");
		return;
	}
	if (!control_vm_privileged(&k->cred)) {
		log_ratelimited(LOG_WARNING, NULL,
				"refused 'vm %s' from pid %d uid %d: only root (or the daemon's user) "
				"may change VMs",
				n > 1 ? words[1] : "", (int)k->cred.pid, (int)k->cred.uid);
		conn_error(k, "permission denied: only root (or the daemon's user) may change VMs");
		return;
	}
	log_info("control (pid %d uid %d): vm %s %s", (int)k->cred.pid, (int)k->cred.uid,
		 n > 1 ? words[1] : "", n > 2 ? words[2] : "");
	k->state = CONN_ANSWERING;
	control_vm_command(ctl->cfg.vms, words + 1, (unsigned)n - 1, k->out);
	(void)sd_event_source_set_time_relative(k->timer, ctl->cfg.answer_timeout_usec);
	(void)sd_event_source_set_enabled(k->timer, SD_EVENT_ONESHOT);
}

static void conn_command(ControlConn *k, char *line)
{
	Control *ctl = k->ctl;
	char *words[CONTROL_MAX_WORDS] = { 0 };
	int n = 0;

	for (char *p = line; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c < 0x20 || c > 0x7e) {
			conn_error(k, "the command line must be printable ASCII");
			return;
		}
	}
	for (char *save = NULL, *w = strtok_r(line, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		if (n == CONTROL_MAX_WORDS) {
			conn_error(k, "too many words");
			return;
		}
		words[n++] = w;
	}
	if (n == 0) {
		conn_error(k, "empty command; try 'help'");
		return;
	}
	if (strcmp(words[0], "vm") == 0) {
		conn_vm_command(k, words, n);
		return;
	}
	if (n > 2) {
		conn_error(k, "too many words; usage: COMMAND [json]");
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
		control_answer_status(ctl->relay, &ctl->cfg, &ctl->stats, k->out, k->json);
	else if (strcmp(words[0], "clients") == 0)
		control_answer_clients(ctl->relay, &ctl->cfg, k->out, k->json);
	else if (strcmp(words[0], "sessions") == 0)
		control_answer_sessions(ctl->relay, &ctl->cfg, k->out, k->json);
	else if (strcmp(words[0], "counters") == 0)
		control_answer_counters(ctl->relay, k->out, k->json);
	else if (strcmp(words[0], "vms") == 0 && ctl->cfg.vms)
		control_answer_vms(ctl->relay, ctl->cfg.vms, &ctl->cfg, k->out, k->json);
	else if (strcmp(words[0], "metrics") == 0) {
		MetricsSnapshot m;

		/* The format is the answer: there is no JSON form of it. */
		if (k->json) {
			conn_error(k, "metrics has no json form (it is the Prometheus text format)");
			return;
		}
		metrics_snapshot(ctl->relay, &ctl->cfg, &ctl->stats, &m);
		metrics_format(&m, k->out);
		metrics_snapshot_clear(&m);
	} else if (strcmp(words[0], "help") == 0 && !k->json)
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
		if (k->state != CONN_READING) {
			/* One command per connection: a line's worth more is
			 * forgiven (a stray newline, a script's second line),
			 * whatever state the answer is in; past that the client is
			 * not talking our protocol and keeps the loop busy. */
			k->after_command += (size_t)n;
			if (k->after_command > CONTROL_MAX_AFTER_COMMAND) {
				k->ctl->stats.closed_for_sending++;
				log_ratelimited(LOG_WARNING, NULL,
						"closing a control connection (pid %d uid %d) that "
						"keeps sending after its command",
						(int)k->cred.pid, (int)k->cred.uid);
				conn_close(k);
				return false;
			}
			continue;
		}

		k->in_len += (size_t)n;
		k->in[k->in_len] = '\0';
		nl = memchr(k->in, '\n', k->in_len);
		if (!nl && k->in_len < sizeof(k->in) - 1)
			continue;
		/* An error goes out before anything more is read: it is short,
		 * and the connection closes once it is written. */
		if (!nl) {
			conn_error(k, "command line too long");
			return true;
		}
		/* A NUL would hide the rest of the line from the parser. */
		if (memchr(k->in, '\0', (size_t)(nl - k->in))) {
			conn_error(k, "the command line must be printable ASCII");
			return true;
		}
		k->after_command = k->in_len - (size_t)(nl + 1 - k->in);
		*nl = '\0';
		if (nl > k->in && nl[-1] == '\r')
			nl[-1] = '\0';
		conn_command(k, k->in);
		/* Read on (bytes after the command are counted above), so that a
		 * client that floods is closed before its answer goes out. */
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
	if (k->shed) {
		k->ctl->stats.trace_readers_shed++;
		log_warning("closing a trace reader (pid %d uid %d) that stayed %" PRIu64
			    " ms behind (%" PRIu64 " events lost)",
			    (int)k->cred.pid, (int)k->cred.uid, k->ctl->cfg.trace_shed_usec / 1000,
			    k->lost);
	} else {
		log_debug("closing control connection on fd %d: %s", k->fd,
			  k->state == CONN_READING ? "no command in time" : "answer not read in time");
	}
	conn_close(k);
	return 0;
}

/* ---- listener ---- */

static void control_refuse(int fd, const char *msg)
{
	(void)send(fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
}

static int control_add_conn(Control *ctl, int fd, const struct ucred *cred)
{
	ControlConn *k = g_new0(ControlConn, 1);
	int r;

	k->ctl = ctl;
	k->fd = fd;
	k->cred = *cred;
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

static void control_on_accept(int fd, const struct ucred *cred, void *userdata)
{
	Control *ctl = userdata;
	int r;

	if (ctl->conns->len >= ctl->cfg.max_connections) {
		log_ratelimited(LOG_WARNING, NULL, "refusing a control connection: %u are open already",
				ctl->conns->len);
		control_refuse(fd, "error: too many control connections\n");
		return;
	}
	r = control_add_conn(ctl, fd, cred);
	if (r < 0)
		log_ratelimited(LOG_WARNING, NULL, "cannot serve a control connection: %s",
				strerror(-r));
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
	r = listener_new(event, ctl->listen_fd, "control", &ctl->cfg.allow, 100, control_on_accept,
			 ctl, &ctl->listener);
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
	listener_free(ctl->listener);
	if (ctl->listen_fd >= 0)
		close(ctl->listen_fd);
	sd_event_unref(ctl->event);
	g_free(ctl);
}
