/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the metrics page (metrics.h): label values are escaped as
 * the format says, whatever the device is called; the page of a snapshot
 * reads back with the tests' strict reader (tests/support/prom-text.h)
 * with every counter exactly once, and with promtool where it is
 * installed; its size does not depend on the numbers, and grows with the
 * VMs by the same series per VM and no more; and a snapshot of a relay
 * driven in-process (relay-driver.h) counts its clients, queues and
 * sessions.
 */
#include <arpa/inet.h>
#include <gio/gio.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "control-answers.h"
#include "metrics.h"
#include "prom-text.h"
#include "relay-driver.h"
#include "umad-port-fake.h"
#include "util.h"
#include "unit-test.h"

static const char *const required_labels[] = { "device", "port", NULL };

static char *label_value(const char *s, size_t len)
{
	g_autoptr(GString) out = g_string_new(NULL);

	metrics_append_label_value(out, s, len);
	return g_strdup(out->str);
}

UNIT_TEST("/metrics/escape", test_escape)
{
	static const struct {
		const char *in;
		size_t len;
		const char *out;
	} cases[] = {
		{ "mlx5_0", 6, "mlx5_0" },
		{ "a\\b", 3, "a\\\\b" },
		{ "a\"b", 3, "a\\\"b" },
		{ "a\nb", 3, "a\\nb" },
		{ "\\\"\n", 3, "\\\\\\\"\\n" },
		/* other control characters and bytes that are not UTF-8 */
		{ "a\tb", 3, "a\xef\xbf\xbd" "b" },
		{ "a\0b", 3, "a\xef\xbf\xbd" "b" },
		{ "a\x7f", 2, "a\xef\xbf\xbd" },
		{ "\xff\xfe", 2, "\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xc3", 1, "\xef\xbf\xbd" },		/* cut short */
		{ "\xc3\xbc" "b", 3, "\xc3\xbc" "b" }, /* valid UTF-8 stays */
		{ "", 0, "" },
	};

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_autofree char *got = label_value(cases[i].in, cases[i].len);

		if (strcmp(got, cases[i].out) != 0)
			g_error("case %zu: '%s' became '%s', not '%s'", i, cases[i].in, got,
				cases[i].out);
		g_assert_true(g_utf8_validate(got, -1, NULL));
	}
}

/* A snapshot whose every counter has its own value: 1000, 1001, ...
 * @device may be hostile. */
static void snapshot_fill(MetricsSnapshot *m, const char *device)
{
	uint64_t words[sizeof(RelayCounters) / sizeof(uint64_t)];

	*m = (MetricsSnapshot){
		.device = device,
		.port = 2,
		.link_layer = "Ethernet",
		.version = "9.8.7",
		.lid = 0,
		.pid = 4321,
		.uptime_ms = 61234,
		.generation = 3,
		.clients = 5,
		.gids = 7,
		.session_memory_bytes = 65536,
		.client_queued_frames = 12,
		.client_queued_frames_max = 9,
		.sender_queued = 4,
		.senders_live = 6,
		.senders_wanted = 8,
		.sender_timeouts = 2,
		.sender_start_failures = 5,
		.control = { .trace_readers = 1,
			     .trace_readers_refused = 2,
			     .trace_readers_shed = 3,
			     .closed_for_sending = 4 },
		.max_trace_readers = 4,
	};
	for (int i = 0; i < SESSION_STATE_COUNT; i++)
		m->sessions[i] = (uint32_t)(i + 1) * 10;
	for (size_t i = 0; i < G_N_ELEMENTS(words); i++)
		words[i] = 1000 + i;
	memcpy(&m->counters, words, sizeof(words));
}

static PromPage *format_and_read(const MetricsSnapshot *m, char **text)
{
	g_autoptr(GString) out = g_string_new(NULL);
	g_autofree char *error = NULL, *policy = NULL;
	PromPage *p;

	metrics_format(m, out);
	p = prom_page_parse(out->str, &error);
	if (!p)
		g_error("the page does not read: %s\n%s", error, out->str);
	policy = prom_page_check(p, "rdmacm_mux_", required_labels);
	if (policy)
		g_error("the page breaks a rule: %s\n%s", policy, out->str);
	if (text)
		*text = g_strdup(out->str);
	return p;
}

UNIT_TEST("/metrics/page", test_page)
{
	static const char device[] = "mlx\"5\\0\nx";
	MetricsSnapshot m;
	g_autoptr(PromPage) p = NULL;
	g_autoptr(GHashTable) counter_values = g_hash_table_new(g_int64_hash, g_int64_equal);
	g_autofree gint64 *keys = NULL;
	size_t n_words = sizeof(RelayCounters) / sizeof(uint64_t);

	snapshot_fill(&m, device);
	p = format_and_read(&m, NULL);

	/* The hostile device name reads back as it was, on every sample. */
	for (guint i = 0; i < p->samples->len; i++) {
		const PromSample *s = p->samples->pdata[i];

		g_assert_cmpstr(g_array_index(s->labels, PromLabel, 0).name, ==, "device");
		g_assert_cmpstr(g_array_index(s->labels, PromLabel, 0).value, ==, device);
		g_assert_cmpstr(g_array_index(s->labels, PromLabel, 1).value, ==, "2");
	}

	/* Every RelayCounters word is one counter sample, and only once; the
	 * other counters are the control socket's and the generation. */
	keys = g_new0(gint64, p->samples->len);
	for (guint i = 0; i < p->samples->len; i++) {
		const PromSample *s = p->samples->pdata[i];
		const PromFamily *f = prom_page_family(p, s->family);

		if (strcmp(f->type, "counter") != 0 || s->value < 1000)
			continue;
		keys[i] = (gint64)s->value;
		if (g_hash_table_contains(counter_values, &keys[i]))
			g_error("counter value %" G_GINT64_FORMAT " twice (%s)", keys[i], s->name);
		g_hash_table_add(counter_values, &keys[i]);
	}
	g_assert_cmpuint(g_hash_table_size(counter_values), ==, n_words);
	for (size_t i = 0; i < n_words; i++) {
		gint64 want = 1000 + (gint64)i;

		g_assert_true(g_hash_table_contains(counter_values, &want));
	}

	/* Where some of them went, by name and labels. */
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_mads_total",
				   (const char *const[]){ "attribute", "REQ", "direction", "tx",
							  NULL }),
			  ==, m.counters.tx[CM_IDX_REQ]);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_mads_total",
				   (const char *const[]){ "attribute", "RTU", "direction", "rx",
							  NULL }),
			  ==, m.counters.rx[CM_IDX_RTU]);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_rx_dropped_total",
				   (const char *const[]){ "reason", "spoofed", NULL }),
			  ==, m.counters.rx_drop[RX_DROP_SPOOFED]);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_tx_refused_total",
				   (const char *const[]){ "reason", "send-busy", NULL }),
			  ==, m.counters.tx_reject[TX_REJECT_SEND_BUSY]);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_gid_registrations_total",
				   (const char *const[]){ "result", "refused", NULL }),
			  ==, m.counters.reg_refused);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_umad_recv_errors_total", NULL), ==,
			  m.counters.recv_errors);

	/* The gauges and the rest. */
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_info",
				   (const char *const[]){ "version", "9.8.7", "link_layer",
							  "Ethernet", NULL }),
			  ==, 1);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_uptime_seconds", NULL), ==, 61.234);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_reexecutions_total", NULL), ==, 3);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_process_id", NULL), ==, 4321);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_clients", NULL), ==, 5);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_gids", NULL), ==, 7);
	for (int i = 0; i < SESSION_STATE_COUNT; i++)
		g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_sessions",
					   (const char *const[]){
						   "state", session_state_name((SessionState)i),
						   NULL }),
				  ==, m.sessions[i]);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_session_memory_bytes", NULL), ==, 65536);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_client_queued_frames", NULL), ==, 12);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_client_queued_frames_max", NULL), ==, 9);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_sender_queued_mads", NULL), ==, 4);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_senders_live", NULL), ==, 6);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_senders_wanted", NULL), ==, 8);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_sender_timeouts_total", NULL), ==, 2);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_sender_start_failures_total", NULL), ==, 5);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_control_trace_readers", NULL), ==, 1);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_control_trace_readers_max", NULL), ==, 4);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_control_trace_readers_refused_total", NULL), ==,
			  2);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_control_trace_readers_shed_total", NULL), ==, 3);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_control_closed_for_sending_total", NULL), ==, 4);
}

/* Where promtool is installed, it must take @page without a word; the
 * test is skipped without it. */
static void promtool_check(const GString *page)
{
	g_autofree char *promtool = g_find_program_in_path("promtool");
	g_autofree char *out = NULL, *err_text = NULL;
	g_autoptr(GSubprocess) proc = NULL;
	g_autoptr(GError) err = NULL;

	if (!promtool) {
		g_test_skip("promtool is not installed (Debian package prometheus)");
		return;
	}
	proc = g_subprocess_new(G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE |
					G_SUBPROCESS_FLAGS_STDERR_PIPE,
				&err, promtool, "check", "metrics", NULL);
	g_assert_no_error(err);
	g_assert_true(g_subprocess_communicate_utf8(proc, page->str, NULL, &out, &err_text, &err));
	g_assert_no_error(err);
	if (!g_subprocess_get_if_exited(proc) || g_subprocess_get_exit_status(proc) != 0 || *out ||
	    *err_text)
		g_error("promtool check metrics refused the page:\n%s%s\n---\n%s", out, err_text,
			page->str);
}

/* promtool takes the page of a device named with every character that
 * needs escaping. (The integration test's promtool run covers a real
 * daemon, whose device name cannot hold a line feed.) */
UNIT_TEST("/metrics/promtool", test_promtool)
{
	g_autoptr(GString) page = g_string_new(NULL);
	MetricsSnapshot m;

	snapshot_fill(&m, "mlx\"5\\0\nx\xff");
	metrics_format(&m, page);
	promtool_check(page);
}

/* The page has the same lines for any numbers, and stays small: it never
 * needs the control socket's answer limit. */
UNIT_TEST("/metrics/bounded", test_bounded)
{
	MetricsSnapshot small, big;
	g_autofree char *text_small = NULL, *text_big = NULL;
	g_autoptr(PromPage) ps = NULL, pb = NULL;
	char device[65];

	snapshot_fill(&small, "a");
	memset(device, 'x', sizeof(device) - 1);
	device[sizeof(device) - 1] = '\0';
	snapshot_fill(&big, device);
	memset(&big.counters, 0xff, sizeof(big.counters));
	big.clients = big.gids = UINT32_MAX;
	big.client_queued_frames = UINT64_MAX;
	big.uptime_ms = UINT64_MAX;
	big.pid = INT32_MAX;
	ps = format_and_read(&small, &text_small);
	pb = format_and_read(&big, &text_big);
	g_assert_cmpuint(ps->samples->len, ==, pb->samples->len);
	g_assert_cmpuint(ps->families->len, ==, pb->families->len);
	g_assert_cmpuint(strlen(text_big), <, 32 * 1024);
	g_test_message("page: %zu bytes, %u families, %u samples", strlen(text_big),
		       pb->families->len, pb->samples->len);
}

/* ---- per VM ---- */

/* @n VMs (vm-0, vm-1, ...) and vm="" in @m, each counter of VM k a value
 * of its own: 100000 * (k + 1) + the counter's place. */
static void snapshot_vms(MetricsSnapshot *m, unsigned n, char names[][16])
{
	m->vms = g_array_new(FALSE, TRUE, sizeof(MetricsVm));
	for (unsigned k = 0; k <= n; k++) {
		MetricsVm v = { .name = k ? names[k - 1] : "", .clients = k, .sessions = 2 * k,
				.gids = 3 * k };
		uint64_t *words = (uint64_t *)&v.counters;

		if (k)
			snprintf(names[k - 1], 16, "vm-%u", k - 1);
		for (size_t i = 0; i < sizeof(v.counters) / sizeof(uint64_t); i++)
			words[i] = 100000u * (k + 1) + i;
		g_array_append_val(m->vms, v);
	}
}

UNIT_TEST("/metrics/vms", test_vms)
{
	static const char *const groups[] = { "cm_tx_msgs", "cm_tx_retries", "cm_rx_msgs",
					      "cm_rx_duplicates" };
	char names[2][16];
	MetricsSnapshot m;
	g_autoptr(PromPage) p = NULL;

	snapshot_fill(&m, "mlx5_0");
	snapshot_vms(&m, 2, names);
	p = format_and_read(&m, NULL);
	for (unsigned k = 0; k <= 2; k++) {
		const MetricsVm *v = &g_array_index(m.vms, MetricsVm, k);

		g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_vm_clients",
						  (const char *const[]){ "vm", v->name, NULL }),
				  ==, k);
		g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_vm_gids",
						  (const char *const[]){ "vm", v->name, NULL }),
				  ==, 3 * k);
		/* The kernel's groups, with its attribute names. */
		for (int g = 0; g < VM_CM_GROUP_COUNT; g++) {
			g_autofree char *name = g_strdup_printf("rdmacm_mux_%s_total", groups[g]);

			g_assert_cmpfloat(prom_page_value(p, name,
							  (const char *const[]){ "vm", v->name,
										 "attribute", "sidr_req",
										 NULL }),
					  ==, v->counters.cm[g][CM_IDX_SIDR_REQ]);
			/* No "other": the kernel has none, and the relay never counts one. */
			g_assert_cmpuint(prom_page_find(p, name,
							(const char *const[]){ "attribute", "other",
									       NULL },
							NULL),
					 ==, 0);
		}
		g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_vm_gid_refused_total",
						  (const char *const[]){ "vm", v->name, "reason",
									 "other-vm", NULL }),
				  ==, v->counters.gid_refused[VM_REFUSAL_OTHER_VM]);
		g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_vm_connections_refused_total",
						  (const char *const[]){ "vm", v->name, NULL }),
				  ==, v->counters.clients_refused);
	}
	metrics_snapshot_clear(&m);
}

/* The page grows by the same series for each VM, and by nothing else. */
UNIT_TEST("/metrics/vms-bounded", test_vms_bounded)
{
	g_autofree char *one_text = NULL, *many_text = NULL;
	g_autoptr(PromPage) one = NULL, many = NULL;
	char names[256][16];
	MetricsSnapshot a, b;
	unsigned per_vm;

	snapshot_fill(&a, "mlx5_0");
	snapshot_fill(&b, "mlx5_0");
	snapshot_vms(&a, 1, names);
	snapshot_vms(&b, 256, names);
	one = format_and_read(&a, &one_text);
	many = format_and_read(&b, &many_text);
	g_assert_cmpuint(many->families->len, ==, one->families->len);
	/* vm=""'s and one VM's series, against 256 VMs'. */
	g_assert_cmpuint((many->samples->len - one->samples->len) % 255, ==, 0);
	per_vm = (many->samples->len - one->samples->len) / 255;
	g_assert_cmpuint(per_vm, ==, 3 + VM_CM_GROUP_COUNT * (CM_IDX_COUNT - 1) + VM_REFUSAL_COUNT + 1);
	g_assert_cmpuint(strlen(many_text) - strlen(one_text), <, 255u * 6 * 1024);
	g_test_message("%u series and %zu bytes per VM", per_vm,
		       (strlen(many_text) - strlen(one_text)) / 255);
	metrics_snapshot_clear(&a);
	metrics_snapshot_clear(&b);
}

/* promtool takes a page with VMs too. */
UNIT_TEST("/metrics/vms-promtool", test_vms_promtool)
{
	g_autoptr(GString) page = g_string_new(NULL);
	char names[3][16];
	MetricsSnapshot m;

	snapshot_fill(&m, "mlx5_0");
	snapshot_vms(&m, 3, names);
	metrics_format(&m, page);
	metrics_snapshot_clear(&m);
	promtool_check(page);
}

/* ---- a snapshot of a relay ---- */

typedef struct Fixture {
	char *sysfs;
	sd_event *event;
	Relay *relay;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
	const char *const gids[] = { UNIT_TEST_GID_LINK_LOCAL, UNIT_TEST_GID_10_0_1_1, NULL };
	RelayConfig cfg;
	(void)data;

	relay_driver_config(&cfg, 8, 4, 4, 4);
	cfg.max_pending = 16, cfg.max_bad_frames = 4, cfg.max_half_open = 4;
	cfg.max_half_open_per_peer = 4, cfg.max_total_half_open = 16;
	cfg.max_total_sessions = 64, cfg.max_clients_per_uid = 8;

	f->sysfs = unit_test_fake_sysfs("metrics-XXXXXX", "fake0", gids);
	g_assert_cmpint(relay_driver_new_fake(&cfg, NULL, NULL, &f->event, &f->relay), ==, 0);
	relay_driver_set_send_at_once(f->relay, true);
	relay_driver_set_time(f->relay, 1000000);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;

	relay_driver_free_fake(f->relay, f->event);
	unit_test_remove_tree(f->sysfs);
}

static void request(Fixture *f, uint32_t client, uint32_t op, const char *sgid_text,
		    const uint8_t *mad, const char *dest_text)
{
	struct rdmacm_mux_msg m = { 0 };

	m.hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
	m.hdr.op_code = op;
	g_assert_cmpint(inet_pton(AF_INET6, sgid_text, m.hdr.sgid.raw), ==, 1);
	if (mad) {
		m.umad_len = 256;
		memcpy(m.umad.mad, mad, 256);
		m.umad.hdr.addr.grh_present = 1;
		g_assert_cmpint(inet_pton(AF_INET6, dest_text, m.umad.hdr.addr.gid), ==, 1);
	}
	g_assert_cmpint(relay_driver_request(f->relay, client, &m), ==, 0);
}

/* A REQ with LocalCommID @comm_id to @peer. */
static void req_mad(uint8_t mad[256], uint32_t comm_id, const char *peer)
{
	memset(mad, 0, 256);
	mad[0] = 1, mad[1] = 7, mad[2] = 2, mad[3] = 3; /* CM, version 2, Send */
	mad[16] = 0x00, mad[17] = 0x10;			/* REQ */
	put_be32(mad + 24, comm_id);
	g_assert_cmpint(inet_pton(AF_INET6, peer, mad + 96), ==, 1);
}

UNIT_FIXTURE_TEST("/metrics/snapshot", NULL, fixture_setup, test_snapshot)
{
	ControlConfig cfg;
	ControlStats stats = { .trace_readers = 2, .closed_for_sending = 5 };
	MetricsSnapshot m;
	uint32_t c1 = relay_driver_add_client(f->relay);
	uint32_t c2 = relay_driver_add_client(f->relay);
	uint32_t c3 = relay_driver_add_client(f->relay);
	uint8_t mad[256];
	(void)data;

	control_config_init(&cfg, "/x", "/x.ctl");
	cfg.generation = 6;
	/* Two GIDs; their responses stay queued (drivers' clients are read
	 * only when drained): c1 one frame, c2 one, c3 none. */
	request(f, c1, RDMACM_MUX_OP_CODE_REG, "::ffff:10.0.1.1", NULL, NULL);
	request(f, c2, RDMACM_MUX_OP_CODE_REG, "::ffff:10.0.1.2", NULL, NULL);
	/* c1 starts a session; its response queues behind the first. */
	req_mad(mad, 7, "::ffff:10.0.2.9");
	request(f, c1, RDMACM_MUX_OP_CODE_MAD, "::ffff:10.0.1.1", mad, "::ffff:10.0.2.9");
	(void)c3;

	metrics_snapshot(f->relay, &cfg, &stats, &m);
	g_assert_cmpstr(m.device, ==, "fake0");
	g_assert_cmpint(m.port, ==, 1);
	g_assert_cmpstr(m.link_layer, ==, "Ethernet");
	g_assert_cmpuint(m.clients, ==, 3);
	g_assert_cmpuint(m.gids, ==, 2);
	g_assert_cmpuint(m.sessions[SESSION_REQ_SENT], ==, 1);
	for (int i = 0; i < SESSION_STATE_COUNT; i++)
		if (i != SESSION_REQ_SENT)
			g_assert_cmpuint(m.sessions[i], ==, 0);
	g_assert_cmpuint(m.client_queued_frames, ==, 3);
	g_assert_cmpuint(m.client_queued_frames_max, ==, 2);
	g_assert_cmpuint(m.sender_queued, ==, 0);
	g_assert_cmpmem(&m.counters, sizeof(m.counters), relay_counters(f->relay),
			sizeof(RelayCounters));
	g_assert_cmpuint(m.counters.tx[CM_IDX_REQ], ==, 1);
	g_assert_cmpuint(m.counters.reg_ok, ==, 2);
	g_assert_cmpuint(m.generation, ==, 6);
	g_assert_cmpuint(m.control.trace_readers, ==, 2);
	g_assert_cmpuint(m.control.closed_for_sending, ==, 5);
	g_assert_cmpuint(m.max_trace_readers, ==, CONTROL_MAX_TRACE_READERS);
	g_assert_cmpint(m.pid, ==, getpid());
	g_assert_cmpuint(m.uptime_ms, <, 60000);

	/* And its page reads. */
	prom_page_free(format_and_read(&m, NULL));
}

/* Every number of at least @min in @text, each once: a table of them. */
static GHashTable *numbers_in(const char *text, uint64_t min)
{
	GHashTable *t = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);

	for (const char *p = text; *p; p++) {
		gint64 *v;

		if (!g_ascii_isdigit(*p) || (p > text && (g_ascii_isalnum(p[-1]) || p[-1] == '.')))
			continue;
		v = g_new(gint64, 1);
		*v = g_ascii_strtoll(p, NULL, 10);
		while (g_ascii_isdigit(p[1]))
			p++;
		if ((uint64_t)*v < min) {
			g_free(v);
			continue;
		}
		if (g_hash_table_contains(t, v))
			g_error("%" G_GINT64_FORMAT " twice in:\n%s", *v, text);
		g_hash_table_add(t, v);
	}
	return t;
}

/* "rdmacm-muxctl counters", as text and as JSON, shows every RelayCounters
 * word, each once. */
UNIT_FIXTURE_TEST("/metrics/counters-answer", NULL, fixture_setup, test_counters_answer)
{
	uint64_t *words = (uint64_t *)(void *)relay_counters(f->relay);
	(void)data;

	for (size_t i = 0; i < RELAY_COUNTER_WORDS; i++)
		words[i] = 1000 + i;
	for (int json = 0; json < 2; json++) {
		g_autoptr(GString) out = g_string_new(NULL);
		g_autoptr(GHashTable) seen = NULL;

		control_answer_counters(f->relay, out, json);
		seen = numbers_in(out->str, 1000);
		for (size_t i = 0; i < RELAY_COUNTER_WORDS; i++) {
			gint64 want = 1000 + (gint64)i;

			if (!g_hash_table_contains(seen, &want))
				g_error("counter %s (%" G_GINT64_FORMAT ") is not in:\n%s",
					relay_counter_names()[i], want, out->str);
		}
		g_assert_cmpuint(g_hash_table_size(seen), ==, RELAY_COUNTER_WORDS);
	}
}

UNIT_TEST_MAIN()
