/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of the control socket and rdmacm-muxctl: during a live
 * scenario on the simulated fabric, what the tool reports (parsed as JSON
 * with json-glib) must match what the clients saw; trace must show a
 * handshake live; hostile control clients must not hurt the daemon.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "unit-test.h"

typedef struct Fixture {
	Fabric *fabric;
	Daemon *da, *db;
	Vm *a1, *a2, *b1;
	uint64_t tid;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
	(void)data;
	f->fabric = hosts_open(NULL, NULL, &f->da, &f->db);
	hosts_vms(f->da, f->db, "a1 a2 b1", (Vm **const[]){ &f->a1, &f->a2, &f->b1 });
	f->tid = 0x100;
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	hosts_free(f->fabric, f->da, f->db, (Vm *const[]){ f->a1, f->a2, f->b1 }, 3);
}

static char *ctl_path(const Daemon *d)
{
	return g_strdup_printf("%s.ctl", d->socket);
}

/* Run rdmacm-muxctl; assert it succeeded; return its stdout. */
static char *muxctl(const Daemon *d, const char *command, bool json)
{
	g_autoptr(GError) err = NULL;
	char *out = NULL;
	g_autofree char *errout = NULL;
	int status;
	const char *argv[] = { g_getenv("RDMACM_MUXCTL_BIN"), "--socket", d->socket, command,
			       json ? "--json" : NULL, NULL };

	g_assert_nonnull(argv[0]);
	if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &errout,
			  &status, &err))
		g_error("cannot run rdmacm-muxctl: %s", err->message);
	if (!g_spawn_check_wait_status(status, &err))
		g_error("rdmacm-muxctl %s failed: %s\n%s", command, err->message, errout);
	return out;
}

static JsonNode *muxctl_json(const Daemon *d, const char *command)
{
	g_autofree char *out = muxctl(d, command, true);
	g_autoptr(JsonParser) p = json_parser_new();
	g_autoptr(GError) err = NULL;

	if (!json_parser_load_from_data(p, out, -1, &err))
		g_error("rdmacm-muxctl %s --json is not JSON (%s):\n%s", command, err->message, out);
	return json_node_copy(json_parser_get_root(p));
}

static int64_t member_int(JsonObject *o, const char *name)
{
	g_assert_true(json_object_has_member(o, name));
	return json_object_get_int_member(o, name);
}

static const char *member_str(JsonObject *o, const char *name)
{
	g_assert_true(json_object_has_member(o, name));
	return json_object_get_string_member(o, name);
}

static char *gid_text(const uint8_t gid[IB_GID_LEN])
{
	char buf[INET6_ADDRSTRLEN];

	g_assert_nonnull(inet_ntop(AF_INET6, gid, buf, sizeof(buf)));
	return g_strdup(buf);
}

/* The one session of @client_id in @d's sessions answer (asserts one). */
static JsonObject *find_session(JsonNode *root, int64_t client_id, int64_t client_comm_id)
{
	JsonArray *a = json_object_get_array_member(json_node_get_object(root), "sessions");
	JsonObject *hit = NULL;

	for (guint i = 0; i < json_array_get_length(a); i++) {
		JsonObject *s = json_array_get_object_element(a, i);

		if (member_int(s, "client_id") == client_id &&
		    (client_comm_id < 0 || member_int(s, "client_comm_id") == client_comm_id)) {
			g_assert_null(hit);
			hit = s;
		}
	}
	g_assert_nonnull(hit);
	return hit;
}

/* @d's "sessions" (read again into *@listing) lists client @client_id's
 * session @comm with wire id @wire, in @state with @timer armed. */
static void expect_session(const Daemon *d, JsonNode **listing, int64_t client_id, int64_t comm,
			   int64_t wire, const char *state, const char *timer)
{
	JsonObject *s;

	g_clear_pointer(listing, json_node_unref);
	*listing = muxctl_json(d, "sessions");
	s = find_session(*listing, client_id, comm);

	g_assert_cmpint(member_int(s, "wire_comm_id"), ==, wire);
	g_assert_cmpstr(member_str(s, "state"), ==, state);
	g_assert_cmpstr(member_str(s, "timer"), ==, timer);
}

static const char *const attrs[] = { "REQ", "MRA", "REJ", "REP", "RTU", "DREQ",
				     "DREP", "SIDR_REQ", "SIDR_REP", "LAP", "APR", "other" };

/* Counters: exactly @tx and @rx per attribute (index 0 = REQ), nothing
 * dropped or refused. */
static void check_counters(const Daemon *d, const int64_t tx[12], const int64_t rx[12])
{
	g_autoptr(JsonNode) root = muxctl_json(d, "counters");
	JsonObject *o = json_node_get_object(root);
	JsonObject *t = json_object_get_object_member(o, "tx");
	JsonObject *r = json_object_get_object_member(o, "rx");
	JsonObject *drop = json_object_get_object_member(o, "rx_dropped");
	JsonObject *refused = json_object_get_object_member(o, "tx_refused");
	g_autoptr(GList) names = NULL;

	for (int i = 0; i < 12; i++) {
		if (member_int(t, attrs[i]) != tx[i] || member_int(r, attrs[i]) != rx[i])
			g_error("%s %s: tx %" G_GINT64_FORMAT " rx %" G_GINT64_FORMAT
				", expected %" G_GINT64_FORMAT " %" G_GINT64_FORMAT,
				d->ca, attrs[i], member_int(t, attrs[i]), member_int(r, attrs[i]),
				tx[i], rx[i]);
	}
	names = json_object_get_members(drop);
	g_assert_cmpuint(g_list_length(names), ==, 12);
	for (GList *l = names; l; l = l->next)
		g_assert_cmpint(member_int(drop, l->data), ==, 0);
	g_clear_pointer(&names, g_list_free);
	names = json_object_get_members(refused);
	g_assert_cmpuint(g_list_length(names), ==, 13);
	for (GList *l = names; l; l = l->next)
		g_assert_cmpint(member_int(refused, l->data), ==, 0);
	g_assert_cmpint(member_int(o, "reg_ok"), ==, d->ca[3] == 'A' ? 2 : 1);
}

UNIT_FIXTURE_TEST("/admin/state", NULL, fixture_setup, test_state)
{
	g_autoptr(JsonNode) status = NULL, clients = NULL, sa = NULL, sb = NULL;
	g_autofree char *comm = NULL, *ga1 = gid_text(f->a1->gid), *gb1 = gid_text(f->b1->gid);
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];
	uint32_t wa, wp, ws, wr;
	int64_t id_a1 = -1, id_a2 = -1, id_b1;
	JsonObject *o, *s;
	JsonArray *list;
	(void)data;

	/* status, before any MAD */
	status = muxctl_json(f->da, "status");
	o = json_node_get_object(status);
	g_assert_cmpstr(member_str(o, "device"), ==, "simA");
	g_assert_cmpint(member_int(o, "port"), ==, 1);
	g_assert_cmpstr(member_str(o, "socket"), ==, f->da->socket);
	g_assert_cmpint(member_int(o, "pid"), ==, f->da->pid);
	g_assert_cmpint(member_int(o, "clients"), ==, 2);
	g_assert_cmpint(member_int(o, "gids"), ==, 2);
	g_assert_cmpint(member_int(o, "sessions"), ==, 0);

	/* clients: our pid and uid, our comm, each its GID */
	g_assert_true(g_file_get_contents("/proc/self/comm", &comm, NULL, NULL));
	g_strchomp(comm);
	clients = muxctl_json(f->da, "clients");
	list = json_object_get_array_member(json_node_get_object(clients), "clients");
	g_assert_cmpuint(json_array_get_length(list), ==, 2);
	for (guint i = 0; i < 2; i++) {
		JsonObject *c = json_array_get_object_element(list, i);
		JsonArray *gids = json_object_get_array_member(c, "gids");
		const char *gid;

		g_assert_cmpint(member_int(c, "pid"), ==, getpid());
		g_assert_cmpint(member_int(c, "uid"), ==, getuid());
		g_assert_cmpint(member_int(c, "gid"), ==, getgid());
		g_assert_cmpstr(member_str(c, "comm"), ==, comm);
		g_assert_cmpuint(json_array_get_length(gids), ==, 1);
		gid = json_array_get_string_element(gids, 0);
		if (g_strcmp0(gid, ga1) == 0)
			id_a1 = member_int(c, "id");
		else if (g_strcmp0(gid, "::ffff:10.0.1.2") == 0)
			id_a2 = member_int(c, "id");
		else
			g_error("unexpected GID %s", gid);
		g_assert_cmpint(member_int(c, "sessions"), ==, 0);
		g_assert_cmpint(member_int(c, "queued"), ==, 0);
	}
	g_assert_cmpint(id_a1, >, 0);
	g_assert_cmpint(id_a2, >, 0);
	g_assert_cmpint(id_a1, !=, id_a2);
	g_clear_pointer(&clients, json_node_unref);
	clients = muxctl_json(f->db, "clients");
	list = json_object_get_array_member(json_node_get_object(clients), "clients");
	g_assert_cmpuint(json_array_get_length(list), ==, 1);
	id_b1 = member_int(json_array_get_object_element(list, 0), "id");

	/* REQ a1 -> b1, client comm id 7 */
	mad_build_req(mad, 7, f->a1->gid, f->b1->gid, ++f->tid);
	vm_send_expect(f->a1, f->b1, mad, &in);
	wa = mad_local(in.mad);
	sa = muxctl_json(f->da, "sessions");
	s = find_session(sa, id_a1, 7);
	g_assert_cmpint(member_int(s, "wire_comm_id"), ==, wa);
	g_assert_cmpint(member_int(s, "peer_comm_id"), ==, 0);
	g_assert_cmpstr(member_str(s, "state"), ==, "req-sent");
	g_assert_cmpstr(member_str(s, "local_gid"), ==, ga1);
	g_assert_cmpstr(member_str(s, "peer_gid"), ==, gb1);
	g_assert_cmpstr(member_str(s, "timer"), ==, "handshake");
	g_assert_cmpint(member_int(s, "timer_left_ms"), >, 0);
	g_assert_cmpint(member_int(s, "age_ms"), <, 60000);
	sb = muxctl_json(f->db, "sessions");
	s = find_session(sb, id_b1, -1);
	g_assert_cmpint(member_int(s, "peer_comm_id"), ==, wa);
	g_assert_cmpstr(member_str(s, "state"), ==, "req-rcvd");
	g_assert_cmpstr(member_str(s, "peer_gid"), ==, ga1);

	/* REP b1 -> a1, client comm id 9 */
	mad_build(mad, CM_REP, 9, wa, ++f->tid);
	vm_send_expect(f->b1, f->a1, mad, &in);
	wp = mad_local(in.mad);
	g_assert_cmpuint(mad_remote(in.mad), ==, 7);
	g_clear_pointer(&sa, json_node_unref);
	g_clear_pointer(&sb, json_node_unref);
	sa = muxctl_json(f->da, "sessions");
	s = find_session(sa, id_a1, 7);
	g_assert_cmpint(member_int(s, "peer_comm_id"), ==, wp);
	g_assert_cmpstr(member_str(s, "state"), ==, "rep-rcvd");
	sb = muxctl_json(f->db, "sessions");
	s = find_session(sb, id_b1, 9);
	g_assert_cmpint(member_int(s, "wire_comm_id"), ==, wp);
	g_assert_cmpint(member_int(s, "peer_comm_id"), ==, wa);
	g_assert_cmpstr(member_str(s, "state"), ==, "rep-sent");

	/* RTU: established on both sides, no timer */
	mad_build(mad, CM_RTU, 7, wp, ++f->tid);
	vm_send_expect(f->a1, f->b1, mad, &in);
	g_clear_pointer(&sa, json_node_unref);
	g_clear_pointer(&sb, json_node_unref);
	sa = muxctl_json(f->da, "sessions");
	s = find_session(sa, id_a1, 7);
	g_assert_cmpstr(member_str(s, "state"), ==, "established");
	g_assert_cmpstr(member_str(s, "timer"), ==, "none");
	g_assert_true(json_object_get_null_member(s, "timer_left_ms"));
	sb = muxctl_json(f->db, "sessions");
	g_assert_cmpstr(member_str(find_session(sb, id_b1, 9), "state"), ==, "established");

	/* SIDR a2 -> b1, request id 33 */
	mad_build(mad, CM_SIDR_REQ, 33, 0, ++f->tid);
	vm_send_expect(f->a2, f->b1, mad, &in);
	ws = mad_local(in.mad);
	expect_session(f->da, &sa, id_a2, 33, ws, "sidr-sent", "sidr");
	mad_build(mad, CM_SIDR_REP, ws, 0, ++f->tid);
	vm_send_expect(f->b1, f->a2, mad, &in);
	g_assert_cmpuint(mad_local(in.mad), ==, 33);

	/* A REQ a2 -> b1 that b1 rejects: closing */
	wr = vm_req_rejected(f->a2, f->b1, 44, f->tid + 1);
	f->tid += 2;
	expect_session(f->da, &sa, id_a2, 44, wr, "closing", "closing");

	/* Counters and totals: exactly what the clients saw. */
	{
		const int64_t tx_a[12] = { [0] = 2, [4] = 1, [7] = 1 };
		const int64_t rx_a[12] = { [2] = 1, [3] = 1, [8] = 1 };

		check_counters(f->da, tx_a, rx_a);
		check_counters(f->db, rx_a, tx_a);
	}
	g_clear_pointer(&status, json_node_unref);
	status = muxctl_json(f->da, "status");
	o = json_node_get_object(status);
	g_assert_cmpint(member_int(json_object_get_object_member(o, "mads"), "tx"), ==, 4);
	g_assert_cmpint(member_int(json_object_get_object_member(o, "mads"), "rx"), ==, 3);
	g_assert_cmpint(member_int(o, "sessions"), ==,
			json_array_get_length(json_object_get_array_member(
				json_node_get_object(sa), "sessions")));

	/* Per-client stats agree with the library's own view. */
	g_clear_pointer(&clients, json_node_unref);
	clients = muxctl_json(f->da, "clients");
	list = json_object_get_array_member(json_node_get_object(clients), "clients");
	for (guint i = 0; i < json_array_get_length(list); i++) {
		JsonObject *c = json_array_get_object_element(list, i);
		JsonObject *st = json_object_get_object_member(c, "stats");
		Vm *vm = member_int(c, "id") == id_a1 ? f->a1 : f->a2;
		struct rdmacm_mux_client_stats lib = vm_stats(vm);

		g_assert_cmpint(member_int(st, "tx"), ==, lib.tx_mads);
		g_assert_cmpint(member_int(st, "rx"), ==, lib.rx_mads);
		g_assert_cmpint(member_int(c, "sessions"), ==, lib.sessions);
		g_assert_cmpint(member_int(st, "tx"), ==, 2); /* each sent two */
	}

	/* The text forms carry the same facts. */
	{
		g_autofree char *text = muxctl(f->da, "sessions", false);
		g_autofree char *needle = g_strdup_printf("0x%08x 0x%08x 0x%08x established", 7, wa,
							  wp);

		g_assert_nonnull(strstr(text, needle));
		g_free(text);
		text = muxctl(f->da, "status", false);
		g_assert_nonnull(strstr(text, "clients:        2\n"));
		g_free(text);
		text = muxctl(f->da, "counters", false);
		g_assert_true(g_regex_match_simple("\nREQ +2 +0\n", text, 0, 0));
	}
}

/* ---- trace ---- */

typedef struct Reader {
	GPid pid;
	int fd;
	GString *buf;
} Reader;

static void reader_start(Reader *r, const Daemon *d, bool json)
{
	g_autoptr(GError) err = NULL;
	const char *argv[] = { g_getenv("RDMACM_MUXCTL_BIN"), "--socket", d->socket, "trace",
			       json ? "--json" : NULL, NULL };

	r->buf = g_string_new(NULL);
	if (!g_spawn_async_with_pipes(NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
				      NULL, &r->pid, NULL, &r->fd, NULL, &err))
		g_error("cannot run rdmacm-muxctl trace: %s", err->message);
}

/* The next whole line (without its newline), waiting up to 5 s. */
static char *reader_line(Reader *r)
{
	gint64 end = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;

	for (;;) {
		char *nl = memchr(r->buf->str, '\n', r->buf->len);
		struct pollfd pfd = { r->fd, POLLIN, 0 };
		char chunk[4096];
		ssize_t n;

		if (nl) {
			char *line = g_strndup(r->buf->str, (gsize)(nl - r->buf->str));
			g_string_erase(r->buf, 0, nl - r->buf->str + 1);
			return line;
		}
		if (g_get_monotonic_time() > end)
			g_error("trace: no line within 5 s (have '%s')", r->buf->str);
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		n = read(r->fd, chunk, sizeof(chunk));
		if (n <= 0)
			g_error("trace: the stream ended (have '%s')", r->buf->str);
		g_string_append_len(r->buf, chunk, n);
	}
}

static void reader_stop(Reader *r)
{
	kill(r->pid, SIGTERM);
	g_assert_cmpint(waitpid(r->pid, NULL, 0), ==, r->pid);
	g_spawn_close_pid(r->pid);
	close(r->fd);
	g_string_free(r->buf, TRUE);
}

UNIT_FIXTURE_TEST("/admin/trace", NULL, fixture_setup, test_trace)
{
	Reader text, json;
	g_autofree char *line = NULL;
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];
	uint32_t wa, wp;
	(void)data;

	reader_start(&text, f->da, false);
	reader_start(&json, f->da, true);
	/* The first line says the daemon is listening for events. */
	line = reader_line(&text);
	g_assert_cmpstr(line, ==, "# tracing simA port 1");
	g_free(line);
	line = reader_line(&json);
	g_assert_nonnull(strstr(line, "\"tracing\""));
	g_clear_pointer(&line, g_free);

	mad_build_req(mad, 5, f->a1->gid, f->b1->gid, 0x77);
	vm_send_expect(f->a1, f->b1, mad, &in);
	wa = mad_local(in.mad);
	mad_build(mad, CM_REP, 6, wa, 0x78);
	vm_send_expect(f->b1, f->a1, mad, &in);
	wp = mad_local(in.mad);
	mad_build(mad, CM_RTU, 5, wp, 0x79);
	vm_send_expect(f->a1, f->b1, mad, &in);

	/* text: time, direction, attribute, ids both ways, live */
	{
		const char *want[] = { "\\] TX +REQ ", "\\] RX +REP ", "\\] TX +RTU " };
		g_autofree char *ids0 = g_strdup_printf("comm 0x%08x -> wire 0x%08x", 5, wa);
		/* The ids are the session's: our client's comm id and the wire
		 * id the daemon gave it (the REP's RemoteCommID on the way in). */
		g_autofree char *ids1 = g_strdup_printf("wire 0x%08x -> comm 0x%08x", wa, 5);
		g_autofree char *ids2 = g_strdup_printf("comm 0x%08x -> wire 0x%08x", 5, wa);
		const char *ids[] = { ids0, ids1, ids2 };

		for (int i = 0; i < 3; i++) {
			line = reader_line(&text);
			g_assert_true(g_regex_match_simple(
				"^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}\\.[0-9]{6} \\[simA:1\\] ", line,
				0, 0));
			if (!g_regex_match_simple(want[i], line, 0, 0) || !strstr(line, ids[i]))
				g_error("trace line %d: want '%s' and '%s' in '%s'", i, want[i],
					ids[i], line);
			g_clear_pointer(&line, g_free);
		}
	}
	/* json: one valid object per line, the same facts */
	{
		const char *attr[] = { "REQ", "REP", "RTU" };
		const char *dir[] = { "tx", "rx", "tx" };
		const int64_t wire[] = { wa, wa, wa };

		for (int i = 0; i < 3; i++) {
			g_autoptr(JsonParser) p = json_parser_new();
			JsonObject *o;

			line = reader_line(&json);
			g_assert_true(json_parser_load_from_data(p, line, -1, NULL));
			o = json_node_get_object(json_parser_get_root(p));
			g_assert_cmpstr(member_str(o, "attr"), ==, attr[i]);
			g_assert_cmpstr(member_str(o, "dir"), ==, dir[i]);
			g_assert_cmpint(member_int(o, "client_comm_id"), ==, 5);
			g_assert_cmpint(member_int(o, "wire_comm_id"), ==, wire[i]);
			g_assert_true(json_object_get_null_member(o, "dropped"));
			g_assert_cmpint(member_int(o, "time_usec"), >, 0);
			g_clear_pointer(&line, g_free);
		}
	}
	reader_stop(&text);
	reader_stop(&json);
}

/* ---- hostile control clients ---- */

static int ctl_connect(const Daemon *d)
{
	g_autofree char *path = ctl_path(d);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	g_assert_cmpint(fd, >=, 0);
	g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	g_assert_cmpint(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
	return fd;
}

/* Everything until EOF (asserts it comes within @ms). */
static char *read_to_eof(int fd, int ms)
{
	GString *s = g_string_new(NULL);
	gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;

	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		char chunk[65536];
		ssize_t n;

		if (g_get_monotonic_time() > end)
			g_error("no EOF within %d ms (have %zu bytes)", ms, s->len);
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == ECONNRESET)
			break;
		g_assert_cmpint(n, >=, 0);
		if (n == 0)
			break;
		g_string_append_len(s, chunk, n);
	}
	return g_string_free(s, FALSE);
}

static void expect_error(const Daemon *d, const void *req, size_t len, const char *msg)
{
	int fd = ctl_connect(d);
	g_autofree char *ans = NULL;

	g_assert_cmpint(send(fd, req, len, MSG_NOSIGNAL), ==, (ssize_t)len);
	ans = read_to_eof(fd, 3000);
	if (!g_str_has_prefix(ans, "error: ") || !strstr(ans, msg))
		g_error("expected 'error: ...%s', got '%s'", msg, ans);
	close(fd);
}

/* The daemon still relays and still answers. */
static void check_alive(Fixture *f)
{
	g_autoptr(JsonNode) st = muxctl_json(f->da, "status");
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];

	g_assert_cmpint(member_int(json_node_get_object(st), "clients"), ==, 2);
	mad_build(mad, CM_SIDR_REQ, 99, 0, ++f->tid);
	vm_send_expect(f->a1, f->b1, mad, &in);
}

UNIT_FIXTURE_TEST("/admin/hostile", NULL, fixture_setup, test_hostile)
{
	char big[4096];
	uint8_t mad[256];
	int stalled, idle, fds[32];
	int nfds = 0;
	unsigned open_fds;
	(void)data;

	expect_error(f->da, "\x01\x02\xff garbage\n", 12, "printable");
	expect_error(f->da, "status\0json\n", 12, "printable");
	expect_error(f->da, "frobnicate\n", 11, "unknown command");
	expect_error(f->da, "status yaml\n", 12, "json");
	memset(big, 'a', sizeof(big));
	expect_error(f->da, big, sizeof(big), "too long");
	check_alive(f);

	/* A trace reader that never reads: the daemon goes on, the reader
	 * loses events and is told how many. Refused MADs make events fast. */
	stalled = ctl_connect(f->da);
	g_assert_cmpint(send(stalled, "trace\n", 6, MSG_NOSIGNAL), ==, 6);
	daemon_wait_metric(f->da, "rdmacm_mux_control_trace_readers", NULL, 1);
	mad_build(mad, CM_REQ, 1, 0, 1);
	mad[1] = 0x99; /* not CM: refused, traced */
	for (int i = 0; i < 6000; i++)
		g_assert_cmpint(vm_send(f->a2, f->b1->gid, mad), ==, -EPROTO);
	check_alive(f);
	{
		GString *got = g_string_new(NULL);
		gint64 end = g_get_monotonic_time() + HARNESS_WAIT_MS * (gint64)1000;
		bool lost = false;

		/* Drain what was buffered, then one more event brings the note. */
		for (int round = 0; !lost && g_get_monotonic_time() < end; round++) {
			struct pollfd pfd = { stalled, POLLIN, 0 };
			char chunk[65536];

			while (poll(&pfd, 1, 200) > 0) {
				ssize_t n = read(stalled, chunk, sizeof(chunk));
				g_assert_cmpint(n, >, 0);
				g_string_append_len(got, chunk, n);
			}
			g_assert_cmpint(vm_send(f->a2, f->b1->gid, mad), ==, -EPROTO);
			lost = g_regex_match_simple("\n# [1-9][0-9]* events lost\n", got->str, 0, 0);
		}
		if (!lost)
			g_error("no '# N events lost' line in %zu bytes", got->len);
		g_string_free(got, TRUE);
	}
	close(stalled);

	/* A client that never sends a command is closed (after 5 s). */
	idle = ctl_connect(f->da);
	g_free(read_to_eof(idle, HARNESS_WAIT_MS));
	close(idle);

	/* At most 16 control connections; the next is told why. */
	open_fds = daemon_open_fds(f->da);
	for (nfds = 0; nfds < 16; nfds++)
		fds[nfds] = ctl_connect(f->da);
	{
		int fd = ctl_connect(f->da);
		g_autofree char *ans = read_to_eof(fd, 3000);

		g_assert_cmpstr(ans, ==, "error: too many control connections\n");
		close(fd);
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	/* The daemon saw them go (its fd table) before status asks. */
	for (gint64 end = g_get_monotonic_time() + HARNESS_WAIT_MS * (gint64)1000;
	     daemon_open_fds(f->da) > open_fds;) {
		g_assert_cmpint(g_get_monotonic_time(), <, end);
		g_usleep(2000);
	}
	check_alive(f);

	/* A clean stop removes the control socket. */
	{
		g_autofree char *path = ctl_path(f->da);

		g_assert_true(g_file_test(path, G_FILE_TEST_EXISTS));
		g_assert_cmpint(daemon_stop(f->da), ==, 0);
		g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
	}
}

UNIT_TEST_MAIN()
