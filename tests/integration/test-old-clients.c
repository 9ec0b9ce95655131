/* SPDX-License-Identifier: MIT */
/*
 * Programs built against old releases of librdmacm-mux run with this
 * tree's library, on the real daemon and the simulated fabric: the ABI
 * promise of the soname and the version nodes, tested with binaries rather
 * than read from headers.
 *
 * build-old-client.sh builds, from git history, librdmacm-mux 1.0.0 and
 * 1.1.0 and against each the probe old-client.c (and for 1.0.0 the pingpong
 * example of that commit). Here:
 * - abi: every symbol@node the old library exports is exported by this one
 *   under the same node; the old binaries need only old nodes, and the
 *   dynamic linker resolves them to this tree's library;
 * - 1.0.0: the probe registers, sends a REQ, gets the REP and reads its
 *   counters through 1.0's structs; the old pingpong serves a whole CM
 *   exchange to today's pingpong and connects to it;
 * - 1.1.0: the probe with RDMACM_MUX_OPEN_RECONNECT lives through a restart
 *   of its daemon (DISCONNECTED, RECONNECTED through 1.1's event struct)
 *   and is reached again.
 */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "harness.h"

static const char *const versions[] = { "1.0.0", "1.1.0" };
static char *built[G_N_ELEMENTS(versions)]; /* build-old-client.sh's OUTDIR */
static char *new_lib_dir;

#define OWN_GID "::ffff:10.0.1.1"
#define PEER_GID "::ffff:10.0.2.1"

static const char *old_dir(const char *version)
{
	for (size_t i = 0; i < G_N_ELEMENTS(versions); i++)
		if (strcmp(versions[i], version) == 0)
			return built[i];
	g_assert_not_reached();
}

/* The environment the old programs run in: this tree's library first. */
static char **old_env(void)
{
	char **env = g_get_environ();

	return g_environ_setenv(env, "LD_LIBRARY_PATH", new_lib_dir, TRUE);
}

/* The old programs' output, read by the harness's Child; a "failed:" line
 * from the probe fails the test at once. */
static Child *old_spawn(const char *name, const char *const *argv)
{
	g_auto(GStrv) env = old_env();

	return child_spawn(name, argv, env);
}

static void probe_expect(Child *c, const char *prefix)
{
	for (;;) {
		g_autofree char *line = child_line(c);

		if (g_str_has_prefix(line, prefix))
			return;
		if (g_str_has_prefix(line, "failed:"))
			g_error("%s %s", c->name, line);
	}
}

/* ---- symbols ---- */

/* `nm -D` lines of @path whose symbol starts with rdmacm_mux_, as
 * name@node; @undefined picks the ones it needs instead. */
static GPtrArray *dyn_symbols(const char *path, gboolean undefined)
{
	const char *argv[] = { "nm", "-D", undefined ? "--undefined-only" : "--defined-only",
			       path, NULL };
	g_autofree char *out = NULL;
	g_auto(GStrv) lines = NULL;
	GPtrArray *syms = g_ptr_array_new_with_free_func(g_free);
	int status;

	g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
				   &out, NULL, &status, NULL));
	g_assert_true(g_spawn_check_wait_status(status, NULL));
	lines = g_strsplit(out, "\n", -1);
	for (size_t i = 0; lines[i]; i++) {
		g_auto(GStrv) f = g_strsplit_set(g_strstrip(lines[i]), " \t", -1);
		guint n = g_strv_length(f);
		char *sym;

		if (n < 2 || !g_str_has_prefix(f[n - 1], "rdmacm_mux_"))
			continue;
		sym = g_strdup(f[n - 1]);
		/* The default version is name@@node. */
		if (strstr(sym, "@@"))
			memmove(strstr(sym, "@@"), strstr(sym, "@@") + 1, strlen(strstr(sym, "@@")));
		g_ptr_array_add(syms, sym);
	}
	return syms;
}

static gboolean has(GPtrArray *syms, const char *sym)
{
	return g_ptr_array_find_with_equal_func(syms, sym, g_str_equal, NULL);
}

static void test_abi(gconstpointer data)
{
	const char *version = data, *dir = old_dir(version);
	g_autofree char *old_lib = g_build_filename(dir, "lib", "librdmacm-mux.so.1", NULL);
	g_autofree char *new_lib = g_build_filename(new_lib_dir, "librdmacm-mux.so.1", NULL);
	g_autoptr(GPtrArray) old_syms = dyn_symbols(old_lib, FALSE);
	g_autoptr(GPtrArray) new_syms = dyn_symbols(new_lib, FALSE);
	const char *progs[] = { "old-client", "rdmacm-mux-pingpong" };

	/* What the release promised is still there, under the same node. */
	g_assert_cmpuint(old_syms->len, >=, 15);
	for (guint i = 0; i < old_syms->len; i++)
		if (!has(new_syms, old_syms->pdata[i]))
			g_error("librdmacm-mux %s exported %s; this library does not", version,
				(char *)old_syms->pdata[i]);
	g_test_message("%u symbols of %s, all exported under the same node", old_syms->len,
		       version);

	for (size_t p = 0; p < G_N_ELEMENTS(progs); p++) {
		g_autofree char *prog = g_build_filename(dir, progs[p], NULL);
		g_autoptr(GPtrArray) needs = NULL;
		g_auto(GStrv) env = old_env();
		g_autofree char *out = NULL;
		const char *argv[] = { prog, NULL };
		gboolean needs_1_1 = FALSE;
		int status;

		if (!g_file_test(prog, G_FILE_TEST_EXISTS))
			continue;
		/* A binary of that time: it needs that release's nodes... */
		needs = dyn_symbols(prog, TRUE);
		g_assert_cmpuint(needs->len, >, 5);
		for (guint i = 0; i < needs->len; i++) {
			const char *s = needs->pdata[i];

			if (g_str_has_suffix(s, "@RDMACM_MUX_1.1"))
				needs_1_1 = TRUE;
			else if (!g_str_has_suffix(s, "@RDMACM_MUX_1.0"))
				g_error("%s %s needs %s", version, progs[p], s);
			if (!has(old_syms, s) || !has(new_syms, s))
				g_error("%s %s needs %s", version, progs[p], s);
		}
		g_assert_cmpint(needs_1_1, ==, strcmp(version, "1.0.0") != 0);
		/* ...and the dynamic linker gives it this tree's library. */
		env = g_environ_setenv(env, "LD_TRACE_LOADED_OBJECTS", "1", TRUE);
		g_assert_true(g_spawn_sync(NULL, (char **)argv, env, G_SPAWN_DEFAULT, NULL, NULL,
					   &out, NULL, &status, NULL));
		g_assert_true(g_spawn_check_wait_status(status, NULL));
		if (!strstr(out, new_lib))
			g_error("%s %s would not load %s:\n%s", version, progs[p], new_lib, out);
	}
}

/* ---- running them ---- */

typedef struct {
	Fabric *fabric;
	Daemon *da, *db;
	Vm *peer; /* b1, on daemon B, with this tree's library */
} Hosts;

static void hosts_setup(Hosts *h, gconstpointer data)
{
	(void)data;
	h->fabric = hosts_open(NULL, NULL, &h->da, &h->db);
	h->peer = vm_new(h->db, PEER_GID, "b1");
}

static void hosts_teardown(Hosts *h, gconstpointer data)
{
	(void)data;
	hosts_free(h->fabric, h->da, h->db, &h->peer, 1);
}

/* The probe's REQ reaches the peer, which answers with a REP. */
static void peer_answers_req(Hosts *h, uint32_t my_id)
{
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];

	vm_expect(h->peer, CM_REQ, &in);
	mad_build(mad, CM_REP, my_id, mad_local(in.mad), 2);
	g_assert_cmpint(vm_send(h->peer, in.addr.gid, mad), ==, 0);
}

static void check_loaded(Child *c)
{
	g_autofree char *loaded = child_expect(c, "loaded: ");

	if (!strstr(loaded, new_lib_dir))
		g_error("%s ran with %s, not this tree's library in %s", c->name, loaded,
			new_lib_dir);
}

static void test_probe(Hosts *h, gconstpointer data)
{
	const char *version = data;
	g_autofree char *prog = g_build_filename(old_dir(version), "old-client", NULL);
	const char *argv[] = { prog, h->da->socket, OWN_GID, PEER_GID, NULL };
	Child *c = old_spawn("old-client", argv);

	probe_expect(c, "registered");
	probe_expect(c, "sent");
	peer_answers_req(h, 0x5e55);
	probe_expect(c, "received REP");
	probe_expect(c, "stats tx=1 rx=1 gids=1");
	check_loaded(c);
	probe_expect(c, "done");
	g_assert_cmpint(child_wait(c), ==, 0);
}

static void test_probe_reconnect(Hosts *h, gconstpointer data)
{
	const char *version = data;
	g_autofree char *prog = g_build_filename(old_dir(version), "old-client", NULL);
	const char *argv[] = { prog, h->da->socket, OWN_GID, PEER_GID, "reconnect", NULL };
	Child *c = old_spawn("old-client", argv);
	uint8_t own[IB_GID_LEN], mad[256];

	probe_expect(c, "registered");
	peer_answers_req(h, 0x5e56);
	probe_expect(c, "received REP");
	probe_expect(c, "restart the daemon");
	daemon_kill(h->da);
	daemon_restart(h->da);
	probe_expect(c, "event 1"); /* DISCONNECTED */
	probe_expect(c, "event 3"); /* RECONNECTED, its GID again */
	/* It is reachable again: a new REQ from the peer gets to it. */
	gid_parse(OWN_GID, own);
	mad_build_req(mad, 0x5e57, h->peer->gid, own, 3);
	g_assert_cmpint(vm_send(h->peer, own, mad), ==, 0);
	probe_expect(c, "received REQ");
	check_loaded(c);
	probe_expect(c, "done");
	g_assert_cmpint(child_wait(c), ==, 0);
}

/* 1.0.0's own example: it serves today's pingpong, and connects to it. */
static void test_pingpong(Hosts *h, gconstpointer data)
{
	g_autofree char *old = g_build_filename(old_dir(data), "rdmacm-mux-pingpong", NULL);
	const char *now = harness_env_bin("PINGPONG_BIN");
	const char *serve_old[] = { old, "-n", "old", "-S", h->da->socket, "-g", OWN_GID,
				    "serve", "-c", "1", NULL };
	const char *connect_new[] = { now, "-n", "new", "-S", h->db->socket, "-g",
				      "::ffff:10.0.2.2", "connect", OWN_GID, NULL };
	const char *serve_new[] = { now, "-n", "new", "-S", h->db->socket, "-g",
				    "::ffff:10.0.2.2", "serve", "-c", "1", NULL };
	const char *connect_old[] = { old, "-n", "old", "-S", h->da->socket, "-g", OWN_GID,
				      "connect", "::ffff:10.0.2.2", NULL };
	const char *const *runs[2][2] = { { serve_old, connect_new }, { serve_new, connect_old } };

	for (size_t i = 0; i < G_N_ELEMENTS(runs); i++) {
		Child *server = old_spawn(i ? "new-server" : "old-server", runs[i][0]);
		Child *client;

		g_free(child_expect(server, "[")); /* "[name] registered GID" */
		client = old_spawn(i ? "old-client" : "new-client", runs[i][1]);
		g_free(child_expect(client, "[")); /* registered */
		for (;;) {
			g_autofree char *line = child_line(client);

			if (strstr(line, "closed"))
				break;
		}
		g_assert_cmpint(child_wait(client), ==, 0);
		g_assert_cmpint(child_wait(server), ==, 0);
	}
}

int main(int argc, char **argv)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *tmp = NULL;
	int r;

	g_test_init(&argc, &argv, NULL);
	new_lib_dir = g_path_get_dirname(harness_env_bin("RDMACM_MUX_LIB"));
	tmp = g_dir_make_tmp("rdmacm-mux-old-clients-XXXXXX", &err);
	g_assert_no_error(err);
	for (size_t i = 0; i < G_N_ELEMENTS(versions); i++) {
		g_autofree char *out = g_build_filename(tmp, versions[i], NULL);
		const char *build[] = { harness_env_bin("OLD_CLIENT_BUILD_SCRIPT"),
					harness_env_bin("OLD_CLIENT_SOURCE_DIR"), out, versions[i],
					NULL };

		harness_run_sync((char **)build);
		built[i] = g_steal_pointer(&out);
	}

	g_test_add_data_func("/old-clients/abi/1.0.0", "1.0.0", test_abi);
	g_test_add_data_func("/old-clients/abi/1.1.0", "1.1.0", test_abi);
	g_test_add("/old-clients/1.0.0/probe", Hosts, "1.0.0", hosts_setup, test_probe,
		   hosts_teardown);
	g_test_add("/old-clients/1.0.0/pingpong-both-ways", Hosts, "1.0.0", hosts_setup,
		   test_pingpong, hosts_teardown);
	g_test_add("/old-clients/1.1.0/probe", Hosts, "1.1.0", hosts_setup, test_probe,
		   hosts_teardown);
	g_test_add("/old-clients/1.1.0/probe-reconnect", Hosts, "1.1.0", hosts_setup,
		   test_probe_reconnect, hosts_teardown);
	r = g_test_run();

	for (size_t i = 0; i < G_N_ELEMENTS(versions); i++)
		g_free(built[i]);
	{
		const char *rm[] = { "/bin/rm", "-rf", tmp, NULL };

		harness_run_sync((char **)rm);
	}
	g_free(new_lib_dir);
	return r;
}
