/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of `rdmacm-muxctl metrics` against real daemons on the
 * simulated fabric:
 *   - after a handshake, a SIDR query, a rejected REQ, a refused MAD and a
 *     client whose answers pile up, the page reads with the tests' strict
 *     reader (tests/support/prom-text.h) and every number on it equals
 *     what `counters --json`, `status --json` and `clients --json` say;
 *   - the page of a daemon with 1024 clients has the same series as with
 *     one: nothing per client;
 *   - MADs waiting for an unreachable address show as the sender queue;
 *   - metrics obeys the control socket's rules: no json form, and the
 *     allow-list refuses it like any command;
 *   - the example service for node_exporter (systemd/examples) writes the
 *     page whole, and keeps the last one when the daemon is gone.
 * Run with the argument "promtool", the program instead checks the page
 * with `promtool check metrics`, and exits 77 (skipped) when promtool is
 * not installed.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "prom-text.h"
#include "unit-test.h"

#define MANY_CLIENTS 1024
#define UNREACHABLE 6

typedef struct Fixture {
	Fabric *fabric;
	Daemon *da, *db;
	Vm *a1, *a2, *b1;
	uint32_t tid;
	int stuck; /* a raw client that does not read, or -1 */
} Fixture;

static const char *const required_labels[] = { "device", "port", NULL };

/* A CA whose name needs escaping in a label value: a quote and a
 * backslash (sysfs names cannot hold a line feed; the unit test has one). */
#define ODD_CA "sim\"Q\\x"

static void fixture_setup(Fixture *f, gconstpointer data)
{
	const char *const fabric[] = { "--preset", "two-hosts", "--roce-ca",
				       ODD_CA "=::ffff:10.0.3.1", NULL };

	f->fabric = fabric_new_args(fabric);
	/* Other users reach the sockets in it (their modes decide the rest). */
	g_assert_cmpint(chmod(f->fabric->dir, 0711), ==, 0);
	hosts_start(f->fabric, data, NULL, &f->da, &f->db);
	hosts_vms(f->da, f->db, "a1 a2 b1", (Vm **const[]){ &f->a1, &f->a2, &f->b1 });
	f->tid = 0x5100;
	f->stuck = -1;
}

/* A fabric where a write to an address nobody has stalls until the test
 * releases it, as the kernel's address resolution does (see
 * test-bounds.c); one client may have all of UNREACHABLE MADs with the
 * sender processes. */
static void unreachable_setup(Fixture *f, gconstpointer data)
{
	/* Held writes are not stuck: past the default deadline (4 s) on a
	 * loaded machine, within this one. */
	const char *const opts[] = { "--max-slow-sends", G_STRINGIFY(UNREACHABLE), "--send-timeout",
				     "60000", NULL };

	(void)data;
	f->fabric = fabric_new("two-hosts");
	fabric_hold_unreachable(f->fabric, true);
	f->da = daemon_start(f->fabric, "simA", opts);
	f->a1 = vm_new(f->da, "::ffff:10.0.1.1", "a1");
	f->stuck = -1;
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	if (f->stuck >= 0)
		close(f->stuck);
	hosts_free(f->fabric, f->da, f->db, (Vm *const[]){ f->a1, f->a2, f->b1 }, 3);
}

/* Run rdmacm-muxctl --socket D's socket ARGS...; its stdout in *@out and
 * its stderr appended. Return: its exit status. */
static int muxctl(const Daemon *d, const char *const *args, char **out)
{
	g_autoptr(GPtrArray) argv = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	g_autofree char *errout = NULL;
	char *stdout_text = NULL;
	int status;

	g_ptr_array_add(argv, (gpointer)harness_env_bin("RDMACM_MUXCTL_BIN"));
	g_ptr_array_add(argv, (gpointer) "--socket");
	g_ptr_array_add(argv, d->socket);
	for (; *args; args++)
		g_ptr_array_add(argv, (gpointer)*args);
	g_ptr_array_add(argv, NULL);
	if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
			  &stdout_text, &errout, &status, &err))
		g_error("cannot run rdmacm-muxctl: %s", err->message);
	*out = g_strconcat(stdout_text, errout, NULL);
	g_free(stdout_text);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The metrics page of @d as text (asserts muxctl succeeded). */
static char *page_text(const Daemon *d)
{
	g_autofree char *out = NULL;

	if (muxctl(d, (const char *const[]){ "metrics", NULL }, &out) != 0)
		g_error("rdmacm-muxctl metrics failed: %s", out);
	return g_steal_pointer(&out);
}

/* The page of @d, read and checked against the format and our rules. */
static PromPage *page_read(const Daemon *d, char **text_out)
{
	g_autofree char *text = page_text(d);
	g_autofree char *error = NULL, *policy = NULL;
	PromPage *p = prom_page_parse(text, &error);

	if (!p)
		g_error("the page does not read: %s\n%s", error, text);
	policy = prom_page_check(p, "rdmacm_mux_", required_labels);
	if (policy)
		g_error("the page breaks a rule: %s\n%s", policy, text);
	if (text_out)
		*text_out = g_steal_pointer(&text);
	return p;
}

static JsonNode *json_answer(const Daemon *d, const char *command)
{
	g_autofree char *out = NULL;
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) err = NULL;

	if (muxctl(d, (const char *const[]){ command, "--json", NULL }, &out) != 0)
		g_error("rdmacm-muxctl %s --json failed: %s", command, out);
	if (!json_parser_load_from_data(parser, out, -1, &err))
		g_error("rdmacm-muxctl %s --json is not JSON (%s):\n%s", command, err->message, out);
	return json_node_copy(json_parser_get_root(parser));
}

static int64_t member_int(JsonObject *o, const char *name)
{
	if (!json_object_has_member(o, name))
		g_error("no member %s", name);
	return json_object_get_int_member(o, name);
}

/* The sum of @name's samples whose label @label is @value (or all). */
static double metric_sum(const PromPage *p, const char *name, const char *label,
			 const char *value)
{
	double sum = 0;

	for (guint i = 0; i < p->samples->len; i++) {
		const PromSample *s = p->samples->pdata[i];
		bool match = strcmp(s->name, name) == 0;

		for (guint j = 0; match && label && j < s->labels->len; j++) {
			const PromLabel *l = &g_array_index(s->labels, PromLabel, j);

			if (strcmp(l->name, label) == 0)
				match = strcmp(l->value, value) == 0;
		}
		if (match)
			sum += s->value;
	}
	return sum;
}

static void expect_metric(const PromPage *p, const char *name, const char *const *labels,
			  int64_t want)
{
	double got = prom_page_value(p, name, labels);

	if (got != (double)want)
		g_error("%s%s%s = %.0f on the page, %" G_GINT64_FORMAT " in the JSON", name,
			labels && labels[0] ? " " : "", labels && labels[0] ? labels[1] : "", got,
			want);
}

/* ---- traffic ---- */

/*
 * On daemon A: a1 -> b1 established, a SIDR query a2 -> b1 answered, a2's
 * REQ rejected by b1 (closing), one MAD refused (not CM), one UNREG
 * refused.
 */
static void make_traffic(Fixture *f)
{
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];
	uint32_t wa, wp, ws;
	uint32_t ticket;
	struct rdmacm_mux_response resp;

	mad_build_req(mad, 7, f->a1->gid, f->b1->gid, ++f->tid);
	vm_send_expect(f->a1, f->b1, mad, &in);
	wa = mad_local(in.mad);
	mad_build(mad, CM_REP, 9, wa, ++f->tid);
	vm_send_expect(f->b1, f->a1, mad, &in);
	wp = mad_local(in.mad);
	mad_build(mad, CM_RTU, 7, wp, ++f->tid);
	vm_send_expect(f->a1, f->b1, mad, &in);

	mad_build(mad, CM_SIDR_REQ, 33, 0, ++f->tid);
	vm_send_expect(f->a2, f->b1, mad, &in);
	ws = mad_local(in.mad);
	mad_build(mad, CM_SIDR_REP, ws, 0, ++f->tid);
	vm_send_expect(f->b1, f->a2, mad, &in);

	(void)vm_req_rejected(f->a2, f->b1, 44, f->tid + 1);
	f->tid += 2;

	mad_build(mad, CM_DREQ, 7, wp, ++f->tid);
	mad[1] = 0x99; /* not the CM class: refused */
	g_assert_cmpint(vm_send(f->a1, f->b1->gid, mad), ==, -EPROTO);

	g_assert_cmpint(rdmacm_mux_unregister_gid(f->a2->mux, f->b1->gid, &ticket), ==, 0);
	g_assert_cmpint(rdmacm_mux_wait(f->a2->mux, ticket, 5000, &resp), ==, 0);
	g_assert_cmpint(resp.error, ==, -ENOENT);
}

/*
 * A raw client that registers @gid and then asks without reading: the
 * daemon's answers fill the socket, then the client's queue, then the
 * daemon stops reading it. Return: the socket (kept open).
 */
static int stuck_client(Daemon *d, const char *gid)
{
	struct rdmacm_mux_msg m;
	uint8_t g[16], other[16];
	int fd = raw_connect(d);
	unsigned sent = 0;

	gid_parse(gid, g);
	gid_parse("::ffff:10.9.9.9", other);
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, g);
	g_assert_cmpint(raw_request(fd, &m), ==, 0);
	/* UNREGs (each answered, the answers never read) until the daemon
	 * holds a full batch of answers for it (64, --max-pending's default)
	 * and so stops reading it: its metrics say so, however slowly it
	 * got there. */
	for (;;) {
		/* Writable means a quarter of the send buffer at most is used:
		 * a whole frame fits, and raw_send() does not block. */
		struct pollfd p = { fd, POLLOUT, 0 };

		g_assert_cmpuint(sent, <, 20000);
		if (poll(&p, 1, 10) <= 0) {
			g_autoptr(PromPage) page = page_read(d, NULL);

			if (prom_page_value(page, "rdmacm_mux_client_queued_frames_max", NULL) == 64)
				break;
			continue;
		}
		raw_frame(&m, RDMACM_MUX_OP_CODE_UNREG, other);
		raw_send(fd, &m);
		sent++;
	}
	g_test_message("the stuck client sent %u requests before the daemon stopped reading",
		       sent);
	return fd;
}

/* ---- the page equals the JSON ---- */

/* Where each scalar of "counters" is on the page. */
typedef struct CounterPlace {
	const char *key;
	const char *name;
	const char *label, *value;
} CounterPlace;

static const CounterPlace counter_places[] = {
	{ "requests", "rdmacm_mux_requests_total", NULL, NULL },
	{ "reg_ok", "rdmacm_mux_gid_registrations_total", "result", "ok" },
	{ "reg_refused", "rdmacm_mux_gid_registrations_total", "result", "refused" },
	{ "unreg_ok", "rdmacm_mux_gid_unregistrations_total", "result", "ok" },
	{ "unreg_refused", "rdmacm_mux_gid_unregistrations_total", "result", "refused" },
	{ "bad_frames", "rdmacm_mux_bad_frames_total", NULL, NULL },
	{ "truncated_frames", "rdmacm_mux_truncated_frames_total", NULL, NULL },
	{ "clients_accepted", "rdmacm_mux_client_connections_total", "result", "accepted" },
	{ "clients_refused", "rdmacm_mux_client_connections_total", "result", "refused" },
	{ "clients_dropped", "rdmacm_mux_clients_dropped_total", NULL, NULL },
	{ "sessions_created", "rdmacm_mux_sessions_created_total", NULL, NULL },
	{ "sessions_expired", "rdmacm_mux_sessions_expired_total", NULL, NULL },
	{ "recv_errors", "rdmacm_mux_umad_recv_errors_total", NULL, NULL },
	{ "handoff_guard_trips", "rdmacm_mux_handoff_guard_trips_total", NULL, NULL },
	{ "handoff_items_dropped", "rdmacm_mux_handoff_items_dropped_total", NULL, NULL },
	{ "handoff_owed_answered", "rdmacm_mux_handoff_owed_answered_total", NULL, NULL },
};

/* The per-name objects of "counters" and the family and label of each. */
static const struct {
	const char *key;
	const char *name;
	const char *label;
	const char *extra, *extra_value; /* a second label, or NULL */
} counter_groups[] = {
	{ "tx", "rdmacm_mux_mads_total", "attribute", "direction", "tx" },
	{ "rx", "rdmacm_mux_mads_total", "attribute", "direction", "rx" },
	{ "rx_dropped", "rdmacm_mux_rx_dropped_total", "reason", NULL, NULL },
	{ "tx_refused", "rdmacm_mux_tx_refused_total", "reason", NULL, NULL },
};

/* The counters of one VM of `vms --json` (or of "unassigned": @vm "")
 * on @p. Return: how many counter samples that was. */
static unsigned compare_vm(const PromPage *p, const char *vm, JsonObject *o)
{
	JsonObject *k = json_object_get_object_member(o, "counters");
	g_autoptr(GList) groups = json_object_get_members(k);
	unsigned compared = 0;

	expect_metric(p, "rdmacm_mux_vm_clients", (const char *const[]){ "vm", vm, NULL },
		      member_int(o, "clients"));
	expect_metric(p, "rdmacm_mux_vm_sessions", (const char *const[]){ "vm", vm, NULL },
		      member_int(o, "sessions"));
	for (GList *g = groups; g; g = g->next) {
		const char *group = g->data;
		g_autofree char *name = NULL;
		const char *label = "attribute";
		JsonObject *values;
		g_autoptr(GList) keys = NULL;

		if (strcmp(group, "clients_refused") == 0) {
			expect_metric(p, "rdmacm_mux_vm_connections_refused_total",
				      (const char *const[]){ "vm", vm, NULL }, member_int(k, group));
			compared++;
			continue;
		}
		if (strcmp(group, "gid_refused") == 0) {
			name = g_strdup("rdmacm_mux_vm_gid_refused_total");
			label = "reason";
		} else {
			name = g_strdup_printf("rdmacm_mux_%s_total", group);
		}
		values = json_object_get_object_member(k, group);
		keys = json_object_get_members(values);
		for (GList *v = keys; v; v = v->next) {
			expect_metric(p, name, (const char *const[]){ "vm", vm, label, v->data, NULL },
				      member_int(values, v->data));
			compared++;
		}
	}
	return compared;
}

/* Every VM of `vms --json`, and the clients without one, on @p. The ib_cm
 * groups add up to the daemon's own per-attribute counts. Return: how
 * many counter samples were compared. */
static unsigned compare_vms(const PromPage *p, JsonObject *vms)
{
	JsonArray *a = json_object_get_array_member(vms, "vms");
	unsigned compared = compare_vm(p, "", json_object_get_object_member(vms, "unassigned"));
	static const char *const attrs[] = { "REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP",
					     "SIDR_REQ", "SIDR_REP", "LAP", "APR" };

	for (guint i = 0; i < json_array_get_length(a); i++) {
		JsonObject *vm = json_array_get_object_element(a, i);

		compared += compare_vm(p, json_object_get_string_member(vm, "name"), vm);
	}
	for (size_t i = 0; i < G_N_ELEMENTS(attrs); i++) {
		g_autofree char *lower = g_ascii_strdown(attrs[i], -1);

		g_assert_cmpfloat(metric_sum(p, "rdmacm_mux_cm_tx_msgs_total", "attribute", lower), ==,
				  prom_page_value(p, "rdmacm_mux_mads_total",
						  (const char *const[]){ "attribute", attrs[i],
									 "direction", "tx", NULL }));
		g_assert_cmpfloat(metric_sum(p, "rdmacm_mux_cm_rx_msgs_total", "attribute", lower), ==,
				  prom_page_value(p, "rdmacm_mux_mads_total",
						  (const char *const[]){ "attribute", attrs[i],
									 "direction", "rx", NULL }));
	}
	return compared;
}

/* Every number of `counters --json` (and of `vms --json`) is on @p, with
 * the same value; the page has no sample that the JSON does not account
 * for. */
static void compare_counters(const PromPage *p, JsonObject *counters, JsonObject *vms)
{
	g_autoptr(GList) keys = json_object_get_members(counters);
	unsigned compared = compare_vms(p, vms);

	for (GList *l = keys; l; l = l->next) {
		const char *key = l->data;
		bool placed = false;

		for (size_t g = 0; g < G_N_ELEMENTS(counter_groups); g++) {
			JsonObject *o;
			g_autoptr(GList) names = NULL;

			if (strcmp(key, counter_groups[g].key) != 0)
				continue;
			o = json_object_get_object_member(counters, key);
			names = json_object_get_members(o);
			for (GList *n = names; n; n = n->next) {
				const char *labels[] = { counter_groups[g].label, n->data,
							 counter_groups[g].extra,
							 counter_groups[g].extra_value, NULL };

				expect_metric(p, counter_groups[g].name, labels,
					      member_int(o, n->data));
				compared++;
			}
			placed = true;
		}
		for (size_t c = 0; c < G_N_ELEMENTS(counter_places); c++) {
			const CounterPlace *cp = &counter_places[c];
			const char *labels[] = { cp->label, cp->value, NULL };

			if (strcmp(key, cp->key) != 0)
				continue;
			expect_metric(p, cp->name, cp->label ? labels : NULL, member_int(counters, key));
			compared++;
			placed = true;
		}
		if (strcmp(key, "sessions_live") == 0) {
			g_assert_cmpfloat(metric_sum(p, "rdmacm_mux_sessions", NULL, NULL), ==,
					  member_int(counters, key));
			placed = true;
		}
		if (!placed)
			g_error("counters has '%s', which the page does not show", key);
	}
	/* Each JSON number above is one counter sample, and the page's other
	 * counters are the control socket's, the re-executions and the sender
	 * processes' (this process's, not the hand-off state's). */
	{
		unsigned page_counters = 0;

		for (guint i = 0; i < p->samples->len; i++) {
			const PromSample *s = p->samples->pdata[i];

			if (strcmp(prom_page_family(p, s->family)->type, "counter") == 0 &&
			    !g_str_has_prefix(s->name, "rdmacm_mux_control_") &&
			    strcmp(s->name, "rdmacm_mux_reexecutions_total") != 0 &&
			    !g_str_has_prefix(s->name, "rdmacm_mux_sender_"))
				page_counters++;
		}
		g_assert_cmpuint(page_counters, ==, compared);
	}
}

/* Every number of `status --json` is on @p (uptime: no later than status
 * said, as the page came first). */
static void compare_status(const PromPage *p, JsonObject *st)
{
	JsonObject *mads = json_object_get_object_member(st, "mads");
	JsonObject *ctl = json_object_get_object_member(st, "control");
	const char *info[] = { "version", json_object_get_string_member(st, "version"),
			       "link_layer", json_object_get_string_member(st, "link_layer"),
			       "device", json_object_get_string_member(st, "device"), NULL };
	g_autofree char *port = g_strdup_printf("%" G_GINT64_FORMAT, member_int(st, "port"));
	double uptime = prom_page_value(p, "rdmacm_mux_uptime_seconds", NULL);

	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_info", info), ==, 1);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_info", (const char *const[]){ "port", port, NULL }),
			  ==, 1);
	g_assert_cmpfloat(uptime, >, 0);
	g_assert_cmpfloat(uptime * 1000, <=, member_int(st, "uptime_ms") + 1);
	expect_metric(p, "rdmacm_mux_port_lid", NULL, member_int(st, "lid"));
	expect_metric(p, "rdmacm_mux_process_id", NULL, member_int(st, "pid"));
	expect_metric(p, "rdmacm_mux_reexecutions_total", NULL, member_int(st, "generation"));
	expect_metric(p, "rdmacm_mux_clients", NULL, member_int(st, "clients"));
	expect_metric(p, "rdmacm_mux_gids", NULL, member_int(st, "gids"));
	g_assert_cmpfloat(metric_sum(p, "rdmacm_mux_sessions", NULL, NULL), ==,
			  member_int(st, "sessions"));
	expect_metric(p, "rdmacm_mux_session_memory_bytes", NULL,
		      member_int(st, "session_memory_bytes"));
	g_assert_cmpfloat(metric_sum(p, "rdmacm_mux_mads_total", "direction", "tx"), ==,
			  member_int(mads, "tx"));
	g_assert_cmpfloat(metric_sum(p, "rdmacm_mux_mads_total", "direction", "rx"), ==,
			  member_int(mads, "rx"));
	g_assert_cmpfloat(metric_sum(p, "rdmacm_mux_rx_dropped_total", NULL, NULL), ==,
			  member_int(mads, "rx_dropped"));
	g_assert_cmpfloat(metric_sum(p, "rdmacm_mux_tx_refused_total", NULL, NULL), ==,
			  member_int(mads, "tx_refused"));
	expect_metric(p, "rdmacm_mux_control_trace_readers", NULL,
		      member_int(ctl, "trace_readers"));
	expect_metric(p, "rdmacm_mux_control_trace_readers_max", NULL,
		      member_int(ctl, "max_trace_readers"));
	expect_metric(p, "rdmacm_mux_control_trace_readers_refused_total", NULL,
		      member_int(ctl, "trace_readers_refused"));
	expect_metric(p, "rdmacm_mux_control_trace_readers_shed_total", NULL,
		      member_int(ctl, "trace_readers_shed"));
	expect_metric(p, "rdmacm_mux_control_closed_for_sending_total", NULL,
		      member_int(ctl, "closed_for_sending"));
}

/* The queue figures are the sum and the maximum of the clients' own. */
static void compare_clients(const PromPage *p, JsonObject *clients)
{
	JsonArray *list = json_object_get_array_member(clients, "clients");
	int64_t sum = 0, max = 0;

	for (guint i = 0; i < json_array_get_length(list); i++) {
		int64_t q = member_int(json_array_get_object_element(list, i), "queued");

		sum += q;
		max = MAX(max, q);
	}
	expect_metric(p, "rdmacm_mux_client_queued_frames", NULL, sum);
	expect_metric(p, "rdmacm_mux_client_queued_frames_max", NULL, max);
}

UNIT_FIXTURE_TEST("/metrics/page-matches-json", NULL, fixture_setup, test_page_matches_json)
{
	g_autoptr(PromPage) p = NULL;
	g_autoptr(JsonNode) counters = NULL, status = NULL, clients = NULL, vms = NULL;
	(void)data;

	make_traffic(f);
	f->stuck = stuck_client(f->da, "::ffff:10.0.1.7");

	p = page_read(f->da, NULL);
	counters = json_answer(f->da, "counters");
	status = json_answer(f->da, "status");
	clients = json_answer(f->da, "clients");
	vms = json_answer(f->da, "vms");
	compare_counters(p, json_node_get_object(counters), json_node_get_object(vms));
	compare_status(p, json_node_get_object(status));
	compare_clients(p, json_node_get_object(clients));

	/* And what this traffic must have made, in the page's own terms. */
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_mads_total",
				 (const char *const[]){ "attribute", "REQ", "direction", "tx",
							NULL }),
			  ==, 2);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_mads_total",
				 (const char *const[]){ "attribute", "REJ", "direction", "rx",
							NULL }),
			  ==, 1);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_tx_refused_total",
				 (const char *const[]){ "reason", "not-cm", NULL }),
			  ==, 1);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_sessions",
				 (const char *const[]){ "state", "established", NULL }),
			  ==, 1);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_sessions",
				 (const char *const[]){ "state", "closing", NULL }),
			  ==, 1);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_clients", NULL), ==, 3);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_gid_unregistrations_total",
				 (const char *const[]){ "result", "refused", NULL }),
			  >, 1);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_client_queued_frames_max", NULL), >, 0);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_sender_queued_mads", NULL), ==, 0);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_info",
				 (const char *const[]){ "device", "simA", "port", "1", NULL }),
			  ==, 1);
}

/* ---- bounded ---- */

static const char *const many_opts[] = { "--max-clients-per-uid", "1024", NULL };

/*
 * 1024 clients, each with a GID: the page has exactly the series it had
 * with three, and only its numbers changed.
 */
UNIT_FIXTURE_TEST("/metrics/many-clients", many_opts, fixture_setup, test_many_clients)
{
	g_autofree char *before_text = NULL, *after_text = NULL;
	g_autoptr(PromPage) before = page_read(f->da, &before_text);
	g_autoptr(PromPage) after = NULL;
	g_autofree int *fds = g_new(int, MANY_CLIENTS);
	struct rlimit rl;
	(void)data;

	g_assert_cmpint(getrlimit(RLIMIT_NOFILE, &rl), ==, 0);
	if (rl.rlim_cur < MANY_CLIENTS + 64) {
		rl.rlim_cur = MIN(rl.rlim_max, (rlim_t)MANY_CLIENTS * 2);
		g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &rl), ==, 0);
	}
	for (unsigned i = 0; i < MANY_CLIENTS - 2; i++) {
		g_autofree char *gid = g_strdup_printf("::ffff:10.1.%u.%u", i / 250, i % 250 + 1);
		struct rdmacm_mux_msg m;
		uint8_t g[16];

		fds[i] = raw_connect(f->da);
		gid_parse(gid, g);
		raw_frame(&m, RDMACM_MUX_OP_CODE_REG, g);
		g_assert_cmpint(raw_request(fds[i], &m), ==, 0);
	}
	after = page_read(f->da, &after_text);
	g_assert_cmpfloat(prom_page_value(after, "rdmacm_mux_clients", NULL), ==, MANY_CLIENTS);
	g_assert_cmpfloat(prom_page_value(after, "rdmacm_mux_gids", NULL), ==, MANY_CLIENTS);
	g_assert_cmpuint(after->samples->len, ==, before->samples->len);
	g_assert_cmpuint(after->families->len, ==, before->families->len);
	for (guint i = 0; i < before->samples->len; i++)
		g_assert_cmpstr(((PromSample *)after->samples->pdata[i])->series, ==,
				((PromSample *)before->samples->pdata[i])->series);
	g_assert_cmpuint(strlen(after_text), <, strlen(before_text) + 256);
	g_test_message("page: %zu bytes with %d clients, %zu with 2", strlen(after_text),
		       MANY_CLIENTS, strlen(before_text));
	for (unsigned i = 0; i < MANY_CLIENTS - 2; i++)
		close(fds[i]);
}

/* ---- label values ---- */

/* The page of a daemon on ODD_CA; its device label reads back as the
 * name. Return: the page's text. */
static char *odd_device_page(Fixture *f)
{
	Daemon *d = daemon_start(f->fabric, ODD_CA, NULL);
	g_autofree char *text = NULL;
	g_autoptr(PromPage) p = page_read(d, &text);

	for (guint i = 0; i < p->samples->len; i++) {
		const PromSample *s = p->samples->pdata[i];
		const PromLabel *device = &g_array_index(s->labels, PromLabel, 0);

		g_assert_cmpstr(device->name, ==, "device");
		g_assert_cmpstr(device->value, ==, ODD_CA);
	}
	g_assert_nonnull(strstr(text, "device=\"sim\\\"Q\\\\x\""));
	g_assert_cmpint(daemon_stop(d), ==, 0);
	daemon_free(d);
	return g_steal_pointer(&text);
}

UNIT_FIXTURE_TEST("/metrics/odd-device", NULL, fixture_setup, test_odd_device)
{
	(void)data;
	g_free(odd_device_page(f));
}

/* ---- the node_exporter example ---- */

/* @s with every @from replaced by @to. */
static char *replace_all(const char *s, const char *from, const char *to)
{
	g_auto(GStrv) parts = g_strsplit(s, from, -1);

	return g_strjoinv(to, parts);
}

/*
 * The shell line of the example service (systemd/examples), as systemd
 * would hand it to /bin/sh for instance simA-1, but with this test's
 * socket, directory and binary.
 */
static char *example_script(const Daemon *d, const char *dir)
{
	g_autofree char *unit = NULL, *line = NULL, *a = NULL, *b = NULL, *c = NULL, *e = NULL;
	g_autofree char *muxctl_path = g_strdup_printf("%s/rdmacm-muxctl",
						       harness_env_bin("METRICS_UNIT_SBINDIR"));
	const char *start, *end;

	g_assert_true(g_file_get_contents(harness_env_bin("METRICS_SERVICE_UNIT"), &unit, NULL,
					  NULL));
	start = strstr(unit, "\nExecStart=/bin/sh -c '");
	g_assert_nonnull(start);
	start += strlen("\nExecStart=/bin/sh -c '");
	end = strchr(start, '\n');
	g_assert_nonnull(end);
	g_assert_cmpint(end[-1], ==, '\'');
	line = g_strndup(start, (gsize)(end - 1 - start));
	/* A lone $ would be systemd's to expand (an environment variable),
	 * not the shell's. */
	for (const char *p = line; *p; p++)
		if (*p == '$' && *++p != '$')
			g_error("the example's ExecStart= has a lone $ (systemd expands it): %s",
				line);
	/* systemd's part: specifiers and $$. */
	a = replace_all(line, "/run/rdmacm-mux-%i", d->socket);
	b = replace_all(a, "%i", "simA-1");
	c = replace_all(b, "$$", "$");
	e = replace_all(c, "/var/lib/prometheus/node-exporter", dir);
	g_assert_null(strchr(e, '%'));
	return replace_all(e, muxctl_path, harness_env_bin("RDMACM_MUXCTL_BIN"));
}

static int run_script(const char *script)
{
	g_autoptr(GError) err = NULL;
	const char *argv[] = { "/bin/sh", "-c", script, NULL };
	int status;

	if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL |
			  G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, NULL, NULL, &status, &err))
		g_error("cannot run /bin/sh: %s", err->message);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The files in @dir, sorted, joined by spaces. */
static char *dir_listing(const char *dir)
{
	g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	const char *n;

	g_assert_nonnull(d);
	while ((n = g_dir_read_name(d)))
		g_ptr_array_add(names, g_strdup(n));
	g_ptr_array_sort(names, (GCompareFunc)(void (*)(void))g_strcmp0);
	g_ptr_array_add(names, NULL);
	return g_strjoinv(" ", (char **)names->pdata);
}

/*
 * The example service's command writes the page whole under its final
 * name, leaves no temporary file, and when the daemon is gone fails and
 * keeps the last page.
 */
UNIT_FIXTURE_TEST("/metrics/textfile-example", NULL, fixture_setup, test_textfile_example)
{
	g_autofree char *dir = g_dir_make_tmp("metrics-textfile-XXXXXX", NULL);
	g_autofree char *script = example_script(f->da, dir);
	g_autofree char *path = g_build_filename(dir, "rdmacm-mux-simA-1.prom", NULL);
	g_autofree char *text = NULL, *error = NULL, *listing = NULL, *again = NULL;
	g_autoptr(PromPage) p = NULL;
	(void)data;

	g_assert_cmpint(run_script(script), ==, 0);
	listing = dir_listing(dir);
	g_assert_cmpstr(listing, ==, "rdmacm-mux-simA-1.prom");
	g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
	p = prom_page_parse(text, &error);
	if (!p)
		g_error("the example wrote a page that does not read: %s\n%s", error, text);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_clients", NULL), ==, 2);

	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	g_assert_cmpint(run_script(script), !=, 0);
	g_free(listing);
	listing = dir_listing(dir);
	g_assert_cmpstr(listing, ==, "rdmacm-mux-simA-1.prom");
	g_assert_true(g_file_get_contents(path, &again, NULL, NULL));
	g_assert_cmpstr(again, ==, text);

	g_assert_cmpint(g_unlink(path), ==, 0);
	g_assert_cmpint(g_rmdir(dir), ==, 0);
}

/* ---- the sender queue ---- */

/* UNREACHABLE REQs from a1 to GIDs no port has (::ffff:10.0.5.1 for all
 * with @one_dest, else .1, .2, ...), comm ids from @comm and TIDs from
 * @tid: the daemon takes them all in and they wait with the senders while
 * the fabric holds them; released, each fails with -ETIMEDOUT. */
static void held_reqs_time_out(Fixture *f, bool one_dest, uint32_t comm, uint64_t tid)
{
	struct rdmacm_mux_mad_addr addr = { .grh_present = 1, .hop_limit = 64 };
	struct rdmacm_mux_response resp;
	uint32_t tickets[UNREACHABLE];
	uint8_t mad[256];

	for (unsigned i = 0; i < UNREACHABLE; i++) {
		g_autofree char *text = g_strdup_printf("::ffff:10.0.5.%u", one_dest ? 1 : i + 1);

		gid_parse(text, addr.gid);
		mad_build_req(mad, comm + i, f->a1->gid, addr.gid, tid + i);
		g_assert_cmpint(rdmacm_mux_send_mad(f->a1->mux, f->a1->gid, &addr, mad, 256,
						    &tickets[i]),
				==, 0);
	}
	(void)rdmacm_mux_process(f->a1->mux);
	daemon_wait_metric(f->da, "rdmacm_mux_sender_queued_mads", NULL, UNREACHABLE);
	fabric_hold_unreachable(f->fabric, false);
	for (unsigned i = 0; i < UNREACHABLE; i++) {
		g_assert_cmpint(rdmacm_mux_wait(f->a1->mux, tickets[i], 20000, &resp), ==, 0);
		g_assert_cmpint(resp.error, ==, -ETIMEDOUT);
	}
}

UNIT_FIXTURE_TEST("/metrics/sender-queue", NULL, unreachable_setup, test_sender_queue)
{
	(void)data;

	/* Each write stalls until released: all are with the sender
	 * processes until then. */
	held_reqs_time_out(f, false, 0x100, 0x900);
	{
		g_autoptr(PromPage) p = page_read(f->da, NULL);

		g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_sender_queued_mads", NULL), ==, 0);
		g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_sender_written_mads_total", NULL),
				  ==, UNREACHABLE);
		g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_tx_refused_total",
					 (const char *const[]){ "reason", "send-failed", NULL }),
				  ==, UNREACHABLE);
	}
}

/*
 * MADs queued behind one to a destination that does not answer fail with
 * it, as new ones to it do for a while (the negative cache): one write
 * waits for the address, not one per MAD (each took the whole address
 * timeout, in turn).
 */
UNIT_FIXTURE_TEST("/metrics/sender-unreachable-once", NULL, unreachable_setup,
		  test_sender_unreachable_once)
{
	g_autoptr(PromPage) p = NULL;
	(void)data;

	/* All six wait behind the one write, which ends when released. */
	held_reqs_time_out(f, true, 0x400, 0xa00);
	p = page_read(f->da, NULL);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_sender_written_mads_total", NULL), ==, 1);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_tx_refused_total",
					  (const char *const[]){ "reason", "send-failed", NULL }),
			  ==, UNREACHABLE);
}

#define BURST 64 /* the client library's most requests in flight */

/*
 * A destination goes through a sender process only until a write to it
 * went through: a client that keeps MADs in flight to it from the first
 * one on (as every client does after a restart, when the daemon knows no
 * destination) is not held on the slow path by its own MADs, each queued
 * behind the one before. (It was, for good, at a third of the rate.)
 */
UNIT_FIXTURE_TEST("/metrics/sender-first-write-only", NULL, fixture_setup,
		  test_sender_first_write_only)
{
	struct rdmacm_mux_mad_addr addr = { .grh_present = 1, .hop_limit = 64 };
	struct rdmacm_mux_response resp;
	struct rdmacm_mux_inbound in;
	g_autoptr(PromPage) p = NULL;
	uint32_t tickets[BURST];
	uint8_t mad[256];
	double written;
	(void)data;

	memcpy(addr.gid, f->b1->gid, 16);
	for (unsigned i = 0; i < BURST; i++) {
		mad_build_req(mad, 0x2000 + i, f->a1->gid, f->b1->gid, ++f->tid);
		g_assert_cmpint(rdmacm_mux_send_mad(f->a1->mux, f->a1->gid, &addr, mad, 256,
						    &tickets[i]),
				==, 0);
	}
	for (unsigned i = 0; i < BURST; i++) {
		g_assert_cmpint(rdmacm_mux_wait(f->a1->mux, tickets[i], 10000, &resp), ==, 0);
		g_assert_cmpint(resp.error, ==, 0);
	}
	for (unsigned i = 0; i < BURST; i++)
		vm_expect(f->b1, CM_REQ, &in);
	p = page_read(f->da, NULL);
	written = prom_page_value(p, "rdmacm_mux_sender_written_mads_total", NULL);
	g_test_message("%d REQs to one destination: %.0f written by a sender process", BURST,
		       written);
	g_assert_cmpfloat(written, ==, 1);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_mads_total",
					  (const char *const[]){ "attribute", "REQ", "direction",
								 "tx", NULL }),
			  ==, BURST);
}

/* ---- the control socket's rules ---- */

/* Connect to @d's control socket, send @command, read until EOF. */
static char *ctl_ask(const Daemon *d, const char *command)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	g_autoptr(GString) out = g_string_new(NULL);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char buf[4096];

	if (fd < 0)
		return g_strdup("");
	g_snprintf(sa.sun_path, sizeof(sa.sun_path), "%s.ctl", d->socket);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(fd, command, strlen(command), MSG_NOSIGNAL) < 0) {
		close(fd);
		return g_strdup("");
	}
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;

		if (poll(&p, 1, 3000) <= 0)
			break;
		n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		g_string_append_len(out, buf, n);
	}
	close(fd);
	return g_strdup(out->str);
}

/* In a child as uid/gid 65534: ask for metrics. Exit status: 0 got a
 * page, 1 got nothing. */
static int ask_metrics(const Daemon *d, const void *unused)
{
	g_autofree char *out = ctl_ask(d, "metrics\n");

	(void)unused;
	return strstr(out, "rdmacm_mux_clients") ? 0 : 1;
}

static int metrics_as_nobody(const Daemon *d)
{
	return harness_as_nobody(ask_metrics, d, NULL);
}

static const char *const allow_open_opts[] = { "--mode", "0666", "--control-mode", "0666",
					       "--allow-uid", "0", NULL };

UNIT_FIXTURE_TEST("/metrics/control-rules", allow_open_opts, fixture_setup, test_control_rules)
{
	g_autofree char *out = NULL, *json = NULL, *raw = NULL, *extra = NULL, *page = NULL;
	(void)data;

	/* The file mode lets anyone connect; the allow-list still refuses. */
	g_assert_cmpint(metrics_as_nobody(f->da), ==, 1);
	page = ctl_ask(f->da, "metrics\n");
	g_assert_true(g_str_has_prefix(page, "# HELP rdmacm_mux_"));

	/* No json form, from the daemon or from the tool. */
	json = ctl_ask(f->da, "metrics json\n");
	g_assert_cmpstr(json, ==,
			"error: metrics has no json form (it is the Prometheus text format)\n");
	g_assert_cmpint(muxctl(f->da, (const char *const[]){ "metrics", "--json", NULL }, &out),
			==, 2);
	g_assert_nonnull(strstr(out, "no --json form"));
	extra = ctl_ask(f->da, "metrics now\n");
	g_assert_true(g_str_has_prefix(extra, "error: "));
	/* help lists it. */
	raw = ctl_ask(f->da, "help\n");
	g_assert_nonnull(strstr(raw, "  metrics "));
}

/* ---- promtool ---- */

/* promtool check metrics on @text. Return: its exit status; its output
 * in *@out. (The page goes in through a file, not a pipe that GSubprocess
 * would feed from a glib worker thread: the test stays one thread, and
 * ThreadSanitizer runs of the suite see only our own code.) */
static int promtool_check(const char *promtool, const char *text, char **out)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *path = NULL, *stdout_text = NULL, *stderr_text = NULL;
	int fd = g_file_open_tmp("promtool-page-XXXXXX", &path, &err), status = -1;
	const char *argv[] = { "/bin/sh", "-c", "exec \"$0\" check metrics < \"$1\"", promtool,
			       NULL, NULL };

	if (fd < 0)
		g_error("cannot make a file for promtool: %s", err->message);
	close(fd);
	if (!g_file_set_contents(path, text, -1, &err))
		g_error("cannot write %s: %s", path, err->message);
	argv[4] = path;
	if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &stdout_text,
			  &stderr_text, &status, &err))
		g_error("cannot run %s: %s", promtool, err->message);
	(void)g_unlink(path);
	*out = g_strconcat(stdout_text ? stdout_text : "", stderr_text ? stderr_text : "", NULL);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static const char *promtool_path;

UNIT_FIXTURE_TEST("/metrics/promtool", NULL, fixture_setup, test_promtool)
{
	g_autofree char *text = NULL, *out = NULL, *bad_out = NULL;
	(void)data;

	make_traffic(f);
	text = page_text(f->da);
	if (promtool_check(promtool_path, text, &out) != 0 || *out)
		g_error("promtool check metrics refused the page:\n%s\n---\n%s", out, text);
	g_clear_pointer(&out, g_free);
	g_clear_pointer(&text, g_free);
	text = odd_device_page(f);
	if (promtool_check(promtool_path, text, &out) != 0 || *out)
		g_error("promtool check metrics refused the page of %s:\n%s\n---\n%s", ODD_CA, out,
			text);
	/* promtool does check: a counter without _total is refused. */
	g_assert_cmpint(promtool_check(promtool_path,
				       "# HELP rdmacm_mux_x X.\n# TYPE rdmacm_mux_x counter\n"
				       "rdmacm_mux_x 1\n",
				       &bad_out),
			!=, 0);
	g_assert_nonnull(strstr(bad_out, "_total"));
}

/* The promtool run (argv[1] "promtool") is its own meson test, one that
 * skips where promtool is missing; it runs only /metrics/promtool. */
static gboolean promtool_only(const char *path)
{
	return strcmp(path, "/metrics/promtool") == 0;
}

static gboolean all_but_promtool(const char *path)
{
	return !promtool_only(path);
}

int main(int argc, char **argv)
{
	bool promtool = argc > 1 && strcmp(argv[1], "promtool") == 0;

	if (promtool) {
		promtool_path = g_find_program_in_path("promtool");
		if (!promtool_path) {
			fprintf(stderr, "SKIP: promtool is not installed, the page is not checked "
					"by it (Debian package prometheus; scripts/setup.sh "
					"installs it)\n");
			return 77; /* meson: skipped */
		}
		argv[1] = argv[0];
		argc--;
		argv++;
	}
	g_test_init(&argc, &argv, NULL);
	unit_test_add_registered_if(promtool ? promtool_only : all_but_promtool);
	return g_test_run();
}
