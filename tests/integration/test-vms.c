/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of the operator's GID assignments (rdmacm-muxctl vm
 * add/set/del, vms.d, --gid-policy): two VMs under one uid, as every QEMU
 * runs under libvirt, each a raw QEMU-protocol client on its own socket.
 * VM B plays the attacker: it asks for VM A's GID while A has not
 * registered it, after A is removed, while the daemon restarts (fd-store
 * hand-off, crash, re-execution), and through the shared socket. Every
 * attempt is refused and counted, and A then registers and finishes a CM
 * handshake with a peer on the other host as if nothing had happened. A
 * local user who may read the control socket must not change a VM. The
 * libvirt hook of examples/libvirt runs as libvirt would run it, with the
 * example domain's XML on its stdin.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <gio/gio.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <grp.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "prom-text.h"
#include "unit-test.h"

#define GID_A "::ffff:10.0.1.1" /* on simA's port */
#define GID_B "::ffff:10.0.1.2"
#define GID_C "::ffff:10.0.1.3"
#define GID_FREE "::ffff:10.0.1.7"  /* on the port, nobody's */
#define GID_NOWHERE "::ffff:10.9.9.9" /* no port has it */
#define GID_PEER "::ffff:10.0.2.1"  /* on simB */

typedef struct Fixture {
	Fabric *fabric;
	Supervisor *sup; /* for the restart tests */
	Daemon *da, *db;
	Vm *peer; /* on simB */
	uint8_t a[IB_GID_LEN], b[IB_GID_LEN], free_gid[IB_GID_LEN], nowhere[IB_GID_LEN];
	uint32_t tid;
	uint32_t comm_id;
} Fixture;

/* @data: NULL, or a NULL-terminated list of daemon A's options, whose
 * first may be "supervised" (A under the test's fd-store supervisor). */
static void fixture_setup(Fixture *f, gconstpointer data)
{
	const char *const *opts = data;

	f->fabric = fabric_new("two-hosts");
	/* Other users reach the sockets in it (their modes decide the rest). */
	g_assert_cmpint(chmod(f->fabric->dir, 0711), ==, 0);
	if (opts && opts[0] && strcmp(opts[0], "supervised") == 0) {
		f->sup = supervisor_new(f->fabric->dir);
		f->da = daemon_start_supervised(f->sup, f->fabric, "simA", opts + 1);
	} else {
		f->da = daemon_start(f->fabric, "simA", opts);
	}
	f->db = daemon_start(f->fabric, "simB", NULL);
	f->peer = vm_new(f->db, GID_PEER, "peer");
	gid_parse(GID_A, f->a);
	gid_parse(GID_B, f->b);
	gid_parse(GID_FREE, f->free_gid);
	gid_parse(GID_NOWHERE, f->nowhere);
	f->tid = 0x7000;
	f->comm_id = 0x100;
}

static const char *const supervised_opts[] = { "supervised", NULL };

/* The fixture for the cases whose data is a signal: supervised unless
 * the signal is SIGHUP. */
static void fixture_setup_for_signal(Fixture *f, gconstpointer data)
{
	fixture_setup(f, GPOINTER_TO_INT(data) == SIGHUP ? NULL : supervised_opts);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	vm_free(f->peer);
	daemon_free(f->da);
	if (f->sup)
		supervisor_free(f->sup);
	hosts_free(f->fabric, NULL, f->db, NULL, 0);
}

/* ---- rdmacm-muxctl ---- */

/* Run rdmacm-muxctl on @d with @args; its exit status, and its output. */
static int muxctl(const Daemon *d, const char *const *args, char **out, char **err_out)
{
	g_autoptr(GPtrArray) argv = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	int status;

	g_ptr_array_add(argv, (char *)harness_env_bin("RDMACM_MUXCTL_BIN"));
	g_ptr_array_add(argv, (char *)"--socket");
	g_ptr_array_add(argv, d->socket);
	for (; *args; args++)
		g_ptr_array_add(argv, (char *)*args);
	g_ptr_array_add(argv, NULL);
	if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, out,
			  err_out, &status, &err))
		g_error("cannot run rdmacm-muxctl: %s", err->message);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* rdmacm-muxctl that must succeed; its output. Not inlined: gcc -O3
 * takes the address of out, given to g_spawn_sync(), for one its callers
 * may use after the return (-Wdangling-pointer, a false positive). */
static G_GNUC_NO_INLINE char *muxctl_ok(const Daemon *d, const char *const *args)
{
	char *out = NULL;
	g_autofree char *err = NULL;

	if (muxctl(d, args, &out, &err) != 0)
		g_error("rdmacm-muxctl %s %s failed: %s", args[0], args[1] ? args[1] : "", err);
	return out;
}

static void vm_add(const Daemon *d, const char *name, const char *gid)
{
	g_free(muxctl_ok(d, (const char *const[]){ "vm", "add", name, "--gid", gid, NULL }));
}

static JsonNode *vms_json(const Daemon *d)
{
	g_autofree char *out = muxctl_ok(d, (const char *const[]){ "vms", "--json", NULL });
	g_autoptr(JsonParser) p = json_parser_new();
	g_autoptr(GError) err = NULL;

	if (!json_parser_load_from_data(p, out, -1, &err))
		g_error("vms --json is not JSON (%s):\n%s", err->message, out);
	return json_node_copy(json_parser_get_root(p));
}

/* VM @name of `vms --json`, or NULL ("" : the clients without a VM). */
static JsonObject *vm_of(JsonNode *root, const char *name)
{
	JsonObject *o = json_node_get_object(root);
	JsonArray *a = json_object_get_array_member(o, "vms");

	if (!*name)
		return json_object_get_object_member(o, "unassigned");
	for (guint i = 0; i < json_array_get_length(a); i++) {
		JsonObject *vm = json_array_get_object_element(a, i);

		if (strcmp(json_object_get_string_member(vm, "name"), name) == 0)
			return vm;
	}
	return NULL;
}

/* A counter of VM @name: @group ("cm_tx_msgs", "gid_refused") and @key. */
static int64_t vm_counter(JsonNode *root, const char *name, const char *group, const char *key)
{
	JsonObject *vm = vm_of(root, name);
	JsonObject *k;

	g_assert_nonnull(vm);
	k = json_object_get_object_member(vm, "counters");
	return json_object_get_int_member(json_object_get_object_member(k, group), key);
}

/* Whether VM @name's GID @gid is registered, as `vms` says. */
static bool vm_gid_registered(JsonNode *root, const char *name, const char *gid)
{
	JsonArray *a = json_object_get_array_member(vm_of(root, name), "gids");

	for (guint i = 0; i < json_array_get_length(a); i++) {
		JsonObject *g = json_array_get_object_element(a, i);

		if (strcmp(json_object_get_string_member(g, "gid"), gid) == 0)
			return json_object_get_boolean_member(g, "registered");
	}
	g_error("VM %s has no GID %s", name, gid);
}

static char *vm_socket(const Daemon *d, const char *name)
{
	return g_strdup_printf("%s.vm/%s.sock", d->socket, name);
}

/* ---- QEMU on a socket ---- */

static int qemu_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	g_assert_cmpint(fd, >=, 0);
	g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		g_error("cannot connect to %s: %s", path, g_strerror(errno));
	return fd;
}

static int qemu_connect_vm(const Daemon *d, const char *name)
{
	g_autofree char *path = vm_socket(d, name);

	return qemu_connect(path);
}

/* REG @gid, QEMU style; the err_code. */
static int32_t qemu_reg(int fd, const uint8_t gid[IB_GID_LEN])
{
	struct rdmacm_mux_msg m;

	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, gid);
	return raw_request(fd, &m);
}

/* The answer to a REG sent earlier. */
static int32_t qemu_answer(int fd)
{
	struct rdmacm_mux_msg m;

	g_assert_cmpint(raw_recv(fd, &m, 10000), ==, 0);
	g_assert_cmpuint(m.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
	return m.hdr.err_code;
}

/* A QEMU on VM @name's socket that registered @gid there. */
static int qemu_vm_up(Fixture *f, const char *name, const uint8_t gid[IB_GID_LEN])
{
	int fd = qemu_connect_vm(f->da, name);

	g_assert_cmpint(qemu_reg(fd, gid), ==, 0);
	return fd;
}

/* REQ, REP, RTU between the QEMU on @fd (GID @own) and the peer: the
 * connection a VM that got its GID sets up. */
static void handshake(Fixture *f, int fd, const uint8_t own[IB_GID_LEN])
{
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux_msg m;
	uint8_t mad[256];
	uint32_t local = ++f->comm_id, wire, peer_wire;

	mad_build_req(mad, local, own, f->peer->gid, ++f->tid);
	qemu_send(fd, own, mad);
	vm_expect(f->peer, CM_REQ, &in);
	g_assert_cmpmem(in.addr.gid, IB_GID_LEN, own, IB_GID_LEN);
	wire = mad_local(in.mad);
	mad_build(mad, CM_REP, 0x900 + local, wire, ++f->tid);
	g_assert_cmpint(vm_send(f->peer, own, mad), ==, 0);
	qemu_expect(fd, own, CM_REP, &m);
	g_assert_cmpuint(mad_remote(m.umad.mad), ==, local);
	peer_wire = mad_local(m.umad.mad);
	mad_build(mad, CM_RTU, local, peer_wire, ++f->tid);
	qemu_send(fd, own, mad);
	vm_expect(f->peer, CM_RTU, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, 0x900 + local);
}

/* VM a's QEMU, on its own socket, registers its GID and sets up a
 * connection: whatever happened before, a still works. */
static void vm_a_connects(Fixture *f)
{
	int qa = qemu_vm_up(f, "a", f->a);

	handshake(f, qa, f->a);
	close(qa);
}

/* ---- two VMs, one uid ---- */

/* Before A's QEMU ever registered its GID, B asks for it, on its own socket
 * and on the shared one: both refused. */
UNIT_FIXTURE_TEST("/vms/unregistered", NULL, fixture_setup, test_unregistered)
{
	g_autoptr(JsonNode) v = NULL;
	int qb, shared, qa;
	(void)data;

	vm_add(f->da, "a", GID_A);
	vm_add(f->da, "b", GID_B);
	qb = qemu_vm_up(f, "b", f->b);
	g_assert_cmpint(qemu_reg(qb, f->a), ==, RDMACM_MUX_ERR_CODE_EACCES);
	shared = raw_connect(f->da);
	g_assert_cmpint(qemu_reg(shared, f->a), ==, RDMACM_MUX_ERR_CODE_EACCES);
	/* B may not take a GID nobody has either: only its own. */
	g_assert_cmpint(qemu_reg(qb, f->free_gid), ==, RDMACM_MUX_ERR_CODE_EACCES);
	/* Nor B's through the shared socket (open policy: anything else is). */
	g_assert_cmpint(qemu_reg(shared, f->b), ==, RDMACM_MUX_ERR_CODE_EACCES);
	g_assert_cmpint(qemu_reg(shared, f->free_gid), ==, 0);

	v = vms_json(f->da);
	g_assert_false(vm_gid_registered(v, "a", GID_A));
	g_assert_true(vm_gid_registered(v, "b", GID_B));
	g_assert_cmpint(vm_counter(v, "b", "gid_refused", "other-vm"), ==, 1);
	g_assert_cmpint(vm_counter(v, "b", "gid_refused", "not-assigned"), ==, 1);
	g_assert_cmpint(vm_counter(v, "", "gid_refused", "other-vm"), ==, 2);
	g_clear_pointer(&v, json_node_unref);

	/* A comes, registers, and connects. */
	qa = qemu_vm_up(f, "a", f->a);
	handshake(f, qa, f->a);
	v = vms_json(f->da);
	g_assert_true(vm_gid_registered(v, "a", GID_A));
	g_assert_cmpint(json_object_get_int_member(vm_of(v, "a"), "clients"), ==, 1);
	g_assert_cmpint(json_object_get_int_member(vm_of(v, "a"), "sessions"), ==, 1);
	g_assert_cmpint(vm_counter(v, "a", "cm_tx_msgs", "req"), ==, 1);
	g_assert_cmpint(vm_counter(v, "a", "cm_rx_msgs", "rep"), ==, 1);
	g_assert_cmpint(vm_counter(v, "a", "cm_tx_msgs", "rtu"), ==, 1);
	g_assert_cmpint(vm_counter(v, "b", "cm_tx_msgs", "req"), ==, 0);
	close(qa);
	close(qb);
	close(shared);
}

/* vm del A disconnects A's QEMU and frees its GID, but not for B: B's
 * socket still registers B's GIDs only. A added again connects anew. */
UNIT_FIXTURE_TEST("/vms/after-del", NULL, fixture_setup, test_after_del)
{
	g_autofree char *a_path = vm_socket(f->da, "a");
	g_autofree char *out = NULL;
	struct rdmacm_mux_msg m;
	int qa, qb;
	(void)data;

	vm_add(f->da, "a", GID_A);
	vm_add(f->da, "b", GID_B);
	qa = qemu_connect_vm(f->da, "a");
	qb = qemu_connect_vm(f->da, "b");
	g_assert_cmpint(qemu_reg(qa, f->a), ==, 0);
	g_assert_cmpint(qemu_reg(qb, f->b), ==, 0);
	handshake(f, qa, f->a);

	out = muxctl_ok(f->da, (const char *const[]){ "vm", "del", "a", NULL });
	g_assert_nonnull(strstr(out, "VM a removed: 1 clients disconnected"));
	g_assert_cmpint(raw_recv(qa, &m, 5000), ==, -EPIPE);
	close(qa);
	g_assert_false(g_file_test(a_path, G_FILE_TEST_EXISTS));
	g_assert_cmpint(qemu_reg(qb, f->a), ==, RDMACM_MUX_ERR_CODE_EACCES);
	{
		g_autoptr(JsonNode) v = vms_json(f->da);

		g_assert_null(vm_of(v, "a"));
		g_assert_cmpint(vm_counter(v, "b", "gid_refused", "not-assigned"), ==, 1);
	}

	vm_add(f->da, "a", GID_A);
	vm_a_connects(f);
	close(qb);
}

/* --gid-policy=assigned: the shared socket registers nothing that is not
 * assigned (to it: nothing), nor a GID the port does not have. */
static const char *const assigned_opts[] = { "--gid-policy=assigned", NULL };

UNIT_FIXTURE_TEST("/vms/shared-socket-assigned", assigned_opts, fixture_setup,
		  test_shared_socket_assigned)
{
	g_autoptr(JsonNode) v = NULL;
	int shared, qb;
	(void)data;

	vm_add(f->da, "a", GID_A);
	vm_add(f->da, "b", GID_B);
	qb = qemu_connect_vm(f->da, "b");
	shared = raw_connect(f->da);
	g_assert_cmpint(qemu_reg(shared, f->a), ==, RDMACM_MUX_ERR_CODE_EACCES);
	g_assert_cmpint(qemu_reg(shared, f->free_gid), ==, RDMACM_MUX_ERR_CODE_EACCES);
	g_assert_cmpint(qemu_reg(shared, f->nowhere), ==, -EADDRNOTAVAIL);
	g_assert_cmpint(qemu_reg(qb, f->a), ==, RDMACM_MUX_ERR_CODE_EACCES);
	/* A VM's own GID before the host has its address: QEMU registers a
	 * guest's GID first. */
	g_free(muxctl_ok(f->da, (const char *const[]){ "vm", "set", "b", "--gid", GID_B, "--gid",
						       GID_NOWHERE, NULL }));
	g_assert_cmpint(qemu_reg(qb, f->nowhere), ==, 0);

	v = vms_json(f->da);
	g_assert_cmpstr(json_object_get_string_member(json_node_get_object(v), "gid_policy"), ==,
			"assigned");
	g_assert_cmpint(vm_counter(v, "", "gid_refused", "other-vm"), ==, 1);
	g_assert_cmpint(vm_counter(v, "", "gid_refused", "unassigned"), ==, 1);
	g_assert_cmpint(vm_counter(v, "", "gid_refused", "not-on-port"), ==, 1);
	g_assert_cmpint(vm_counter(v, "b", "gid_refused", "other-vm"), ==, 1);

	vm_a_connects(f);
	close(qb);
	close(shared);
}

/* ---- restarts ---- */

/*
 * While daemon A is down (SIGTERM hand-off, SIGKILL crash) or executing
 * itself again (SIGHUP), B's QEMU asks for A's GID on its own socket, a
 * newcomer on B's socket and one on the shared socket do too. The next
 * process knows the VMs and their sockets, and refuses all three. @data:
 * the signal (a test case's data).
 */
static void restart_attack(Fixture *f, gconstpointer data)
{
	const int sig = GPOINTER_TO_INT(data);
	g_autofree char *b_path = vm_socket(f->da, "b");
	g_autoptr(JsonNode) v = NULL;
	struct rdmacm_mux_msg m;
	struct stat before, after;
	int qb, shared, newcomer;

	vm_add(f->da, "a", GID_A);
	g_free(muxctl_ok(f->da, (const char *const[]){ "vm", "add", "b", "--gid", GID_B, "--mode",
						       "0600", NULL }));
	g_assert_cmpint(stat(b_path, &before), ==, 0);
	qb = qemu_vm_up(f, "b", f->b);
	shared = raw_connect(f->da);
	/* An answer: the daemon took this connection in (a crash between its
	 * accept() and storing it would close it, whatever the VMs). */
	raw_frame(&m, RDMACM_MUX_OP_CODE_UNREG, f->free_gid);
	g_assert_cmpint(raw_request(shared, &m), ==, RDMACM_MUX_ERR_CODE_ENOTFOUND);

	if (sig == SIGHUP) {
		g_assert_cmpint(kill(f->da->pid, SIGHUP), ==, 0);
	} else if (sig == SIGKILL) {
		daemon_kill(f->da);
	} else {
		g_assert_cmpint(daemon_stop(f->da), ==, 0);
	}
	/* Nobody (or an image in the middle of its exec) reads these yet. */
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, f->a);
	raw_send(qb, &m);
	raw_send(shared, &m);
	newcomer = qemu_connect(b_path); /* the socket waits in the store */
	raw_send(newcomer, &m);
	if (sig != SIGHUP)
		daemon_restart(f->da);

	g_assert_cmpint(qemu_answer(qb), ==, RDMACM_MUX_ERR_CODE_EACCES);
	g_assert_cmpint(qemu_answer(shared), ==, RDMACM_MUX_ERR_CODE_EACCES);
	g_assert_cmpint(qemu_answer(newcomer), ==, RDMACM_MUX_ERR_CODE_EACCES);
	/* B kept its GID, its socket (the same file) and its mode. */
	g_assert_cmpint(stat(b_path, &after), ==, 0);
	g_assert_cmpuint(after.st_ino, ==, before.st_ino);
	g_assert_cmpuint(after.st_mode & 0777, ==, 0600);
	v = vms_json(f->da);
	g_assert_true(vm_gid_registered(v, "b", GID_B));
	g_assert_false(vm_gid_registered(v, "a", GID_A));
	g_assert_cmpint(json_object_get_int_member(vm_of(v, "b"), "clients"), ==, 2);
	g_assert_cmpint(vm_counter(v, "b", "gid_refused", "other-vm"), ==, 2);
	g_assert_cmpint(vm_counter(v, "", "gid_refused", "other-vm"), ==, 1);

	vm_a_connects(f);
	close(qb);
	close(shared);
	close(newcomer);
}

UNIT_FIXTURE_TEST("/vms/restart-sigterm", supervised_opts, fixture_setup, test_restart_sigterm)
{
	(void)data;
	restart_attack(f, GINT_TO_POINTER(SIGTERM));
	/* The store holds each VM's socket, and one state: the VMs' rides in
	 * the relay's. */
	g_assert_cmpuint(supervisor_stored(f->sup, "vm."), ==, 2);
	g_assert_cmpuint(supervisor_stored(f->sup, "state"), ==, 1);
}

UNIT_FIXTURE_CASE("/vms/restart-sigkill", GINT_TO_POINTER(SIGKILL), fixture_setup_for_signal,
		  restart_attack, restart_sigkill)
UNIT_FIXTURE_CASE("/vms/restart-sighup", GINT_TO_POINTER(SIGHUP), fixture_setup_for_signal,
		  restart_attack, restart_sighup)

/* A restart holds what every client held to the next process's
 * assignments and policy: a GID that a vms.d file now gives a VM, and any
 * GID of the shared socket under --gid-policy=assigned, are taken back
 * from the shared socket's client that kept its connection. Another
 * --max-vms converts the hand-off state: a VM added live comes through. */
UNIT_FIXTURE_TEST("/vms/restart-applies-assignments", supervised_opts, fixture_setup,
		  test_restart_applies_assignments)
{
	g_autofree char *dir = g_build_filename(f->fabric->dir, "vms.d", NULL);
	g_autofree char *conf = g_build_filename(dir, "c.conf", NULL);
	g_autoptr(GPtrArray) argv = g_ptr_array_new();
	g_autoptr(JsonNode) v = NULL;
	g_autofree char *log = NULL;
	struct rdmacm_mux_msg m;
	uint8_t c[IB_GID_LEN];
	int shared, qc, qa;
	(void)data;

	gid_parse(GID_C, c);
	vm_add(f->da, "a", GID_A);
	shared = raw_connect(f->da);
	g_assert_cmpint(qemu_reg(shared, c), ==, 0);
	g_assert_cmpint(qemu_reg(shared, f->free_gid), ==, 0);

	/* The operator assigns C to a VM in a file, and turns the policy on. */
	g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
	g_assert_true(g_file_set_contents(conf, "gid = " GID_C "\n", -1, NULL));
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	for (char **a = f->da->argv; *a; a++)
		g_ptr_array_add(argv, g_strdup(*a));
	g_ptr_array_add(argv, g_strdup_printf("--vms-dir=%s", dir));
	g_ptr_array_add(argv, g_strdup("--gid-policy=assigned"));
	g_ptr_array_add(argv, g_strdup("--max-vms=100"));
	g_ptr_array_add(argv, NULL);
	g_strfreev(f->da->argv);
	f->da->argv = (char **)g_ptr_array_free(g_steal_pointer(&argv), FALSE);
	daemon_restart(f->da);

	v = vms_json(f->da);
	g_assert_cmpint(json_object_get_int_member(vm_of(v, ""), "clients"), ==, 1);
	g_assert_cmpint(json_array_get_length(json_object_get_array_member(vm_of(v, ""), "gids")), ==,
			0);
	g_assert_nonnull(vm_of(v, "c"));
	log = daemon_output(f->da);
	g_assert_nonnull(strstr(log, "converted into this version's format"));
	g_assert_nonnull(vm_of(v, "a"));
	qa = qemu_vm_up(f, "a", f->a);
	close(qa);
	/* The client is still there, and holds nothing. */
	raw_frame(&m, RDMACM_MUX_OP_CODE_UNREG, c);
	g_assert_cmpint(raw_request(shared, &m), ==, RDMACM_MUX_ERR_CODE_ENOTFOUND);
	g_assert_cmpint(qemu_reg(shared, f->free_gid), ==, RDMACM_MUX_ERR_CODE_EACCES);
	qc = qemu_connect_vm(f->da, "c");
	g_assert_cmpint(qemu_reg(qc, c), ==, 0);
	handshake(f, qc, c);
	close(qc);
	close(shared);
}

/* ---- live changes ---- */

/* vm set takes back what an assignment no longer has (and its sessions);
 * vm add takes a GID back from the shared socket's client that held it. */
UNIT_FIXTURE_TEST("/vms/set", NULL, fixture_setup, test_set)
{
	g_autoptr(JsonNode) v = NULL;
	g_autofree char *out = NULL;
	uint8_t c[IB_GID_LEN];
	int qa, shared;
	(void)data;

	gid_parse(GID_C, c);
	vm_add(f->da, "a", GID_A);
	qa = qemu_vm_up(f, "a", f->a);
	handshake(f, qa, f->a);
	shared = raw_connect(f->da);
	g_assert_cmpint(qemu_reg(shared, c), ==, 0);

	out = muxctl_ok(f->da, (const char *const[]){ "vm", "set", "a", "--gid", GID_C, NULL });
	g_assert_nonnull(strstr(out, "VM a set"));
	/* A's old GID from A, C from the shared socket's client. */
	g_assert_nonnull(strstr(out, "2 GIDs taken back"));
	v = vms_json(f->da);
	/* A lost GID_A and its session, C went from the shared client to
	 * nobody (A may register it now). */
	g_assert_cmpint(json_object_get_int_member(vm_of(v, "a"), "sessions"), ==, 0);
	g_assert_false(vm_gid_registered(v, "a", GID_C));
	g_assert_cmpint(json_array_get_length(json_object_get_array_member(vm_of(v, ""), "gids")), ==,
			0);
	g_assert_cmpint(qemu_reg(shared, f->a), ==, 0); /* free now, open policy */
	g_assert_cmpint(qemu_reg(qa, c), ==, 0);
	handshake(f, qa, c);
	close(qa);
	close(shared);
}

/* ---- bounds ---- */

static const char *const bound_opts[] = { "--max-vms", "2", "--max-vm-clients", "1", NULL };

UNIT_FIXTURE_TEST("/vms/bounds", bound_opts, fixture_setup, test_bounds)
{
	g_autofree char *out = NULL, *err = NULL;
	g_autoptr(JsonNode) v = NULL;
	struct rdmacm_mux_msg m;
	int qa, second;
	(void)data;

	vm_add(f->da, "a", GID_A);
	vm_add(f->da, "b", GID_B);
	g_assert_cmpint(muxctl(f->da, (const char *const[]){ "vm", "add", "c", "--gid", GID_C, NULL },
			       &out, &err),
			==, 1);
	g_assert_nonnull(strstr(err, "2 VMs is the limit (--max-vms)"));
	qa = qemu_vm_up(f, "a", f->a);
	/* A second connection on A's socket: closed at once. */
	second = qemu_connect_vm(f->da, "a");
	g_assert_cmpint(raw_recv(second, &m, 5000), ==, -EPIPE);
	close(second);
	v = vms_json(f->da);
	g_assert_cmpint(json_object_get_int_member(vm_of(v, "a"), "clients"), ==, 1);
	g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(vm_of(v, "a"),
										 "counters"),
						   "clients_refused"),
			==, 1);
	close(qa);
}

/* ---- bad input ---- */

static char *vms_dir_of(const Fabric *fabric)
{
	return g_build_filename(fabric->dir, "vms.d", NULL);
}

/* The control socket, spoken to directly: the daemon's own checks, past
 * rdmacm-muxctl's. */
static char *ctl_ask(const Daemon *d, const char *line)
{
	g_autofree char *path = g_strdup_printf("%s.ctl", d->socket);
	GString *out = g_string_new(NULL);
	int fd = qemu_connect(path);
	char buf[4096];
	ssize_t n;

	g_assert_cmpint(send(fd, line, strlen(line), MSG_NOSIGNAL), ==, (ssize_t)strlen(line));
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		g_string_append_len(out, buf, n);
	close(fd);
	return g_string_free(out, FALSE);
}

UNIT_FIXTURE_TEST("/vms/bad-input", NULL, fixture_setup, test_bad_input)
{
	g_autofree char *dir = vms_dir_of(f->fabric);
	g_autofree char *good = g_build_filename(dir, "good.conf", NULL);
	g_autofree char *bad = g_build_filename(dir, "bad.conf", NULL);
	g_autofree char *vms_opt = g_strdup_printf("--vms-dir=%s", dir);
	g_autofree char *log = NULL, *before = NULL, *after = NULL, *ans = NULL;
	g_autofree char *out = NULL, *err = NULL;
	Daemon *d;
	int q;
	(void)data;

	g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
	g_assert_true(g_file_set_contents(good, "# a static VM\ngid = " GID_C "\nmode = 0600\n", -1,
					  NULL));
	g_assert_true(g_file_set_contents(bad, "gid = " GID_B "\n\ngid = ::ffff:10.0.1.300\n", -1,
					  NULL));
	daemon_stop(f->da);
	d = daemon_start(f->fabric, "simA", (const char *const[]){ vms_opt, NULL });
	/* The socket answers from its listen() on; the files are read after
	 * that, before the first connection is served. */
	for (int i = 0; i < 1000; i++) {
		g_free(log);
		log = daemon_output(d);
		if (strstr(log, "bad.conf: line 3: '::ffff:10.0.1.300' is not a GID"))
			break;
		g_usleep(10000);
	}
	if (!strstr(log, "bad.conf: line 3: '::ffff:10.0.1.300' is not a GID"))
		g_error("no line naming bad.conf's line 3 in:\n%s", log);
	before = muxctl_ok(d, (const char *const[]){ "vms", NULL });
	g_assert_nonnull(strstr(before, "VM good ("));
	g_assert_null(strstr(before, "VM bad"));
	q = qemu_connect_vm(d, "good");
	{
		uint8_t c[IB_GID_LEN];

		gid_parse(GID_C, c);
		g_assert_cmpint(qemu_reg(q, c), ==, 0);
	}
	close(q);
	/* A file's VM changes only through its file. */
	g_assert_cmpint(muxctl(d, (const char *const[]){ "vm", "del", "good", NULL }, &out, &err), ==,
			1);
	g_assert_nonnull(strstr(err, "comes from"));
	g_clear_pointer(&out, g_free);
	g_clear_pointer(&err, g_free);

	/* Arguments: the tool refuses what it can check, the daemon the rest;
	 * each error names the argument, and nothing changes. */
	g_assert_cmpint(muxctl(d, (const char *const[]){ "vm", "add", "x", "--gid", "zz", NULL }, &out,
			       &err),
			==, 2);
	g_assert_nonnull(strstr(err, "--gid 'zz' is not a GID"));
	ans = ctl_ask(d, "vm add x gid=fe80::1 prefix=2001:db8::1/64\n");
	g_assert_cmpstr(ans, ==,
			"error: argument 2 'prefix=2001:db8::1/64': '2001:db8::1/64' has bits set past "
			"its length /64\n");
	g_free(ans);
	ans = ctl_ask(d, "vm add x gid=fe80::1 colour=blue\n");
	g_assert_cmpstr(ans, ==,
			"error: argument 2 'colour=blue': unknown key 'colour' (gid, prefix, owner, "
			"group, mode, domain)\n");
	g_free(ans);
	ans = ctl_ask(d, "vm add ../x gid=fe80::1\n");
	g_assert_nonnull(strstr(ans, "'../x' is not a valid VM name"));
	g_free(ans);
	ans = ctl_ask(d, "vm add y gid=" GID_C "\n");
	g_assert_cmpstr(ans, ==, "error: GID " GID_C " is assigned to VM good already\n");
	after = muxctl_ok(d, (const char *const[]){ "vms", NULL });
	/* The VMs as they were (the shared socket's clients come and go: the
	 * harness's own probe of the socket is one). */
	*strstr(before, "\nno VM (the shared socket)") = '\0';
	*strstr(after, "\nno VM (the shared socket)") = '\0';
	g_assert_cmpstr(after, ==, before);
	g_assert_cmpint(daemon_stop(d), ==, 0);
	daemon_free(d);
}

/* ---- who may change VMs ---- */

/* Run @line on @d's control socket as uid 65534; the answer. */
static char *ctl_ask_as_nobody(const Daemon *d, const char *line)
{
	int pipefd[2];
	pid_t pid;
	GString *out = g_string_new(NULL);
	char buf[4096];
	ssize_t n;
	int status;

	g_assert_cmpint(pipe(pipefd), ==, 0);
	pid = fork();
	g_assert_cmpint(pid, >=, 0);
	if (pid == 0) {
		g_autofree char *path = g_strdup_printf("%s.ctl", d->socket);
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int fd;

		close(pipefd[0]);
		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
			_exit(10);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			_exit(11);
		if (send(fd, line, strlen(line), MSG_NOSIGNAL) != (ssize_t)strlen(line))
			_exit(12);
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			if (write(pipefd[1], buf, (size_t)n) != n)
				_exit(13);
		_exit(0);
	}
	close(pipefd[1]);
	while ((n = read(pipefd[0], buf, sizeof(buf))) > 0)
		g_string_append_len(out, buf, n);
	close(pipefd[0]);
	g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
	g_assert_true(WIFEXITED(status));
	g_assert_cmpint(WEXITSTATUS(status), ==, 0);
	return g_string_free(out, FALSE);
}

/* Whether uid 65533 may connect to @path (the socket's mode decides). */
static bool connects_as_stranger(const char *path)
{
	pid_t pid = fork();
	int status;

	g_assert_cmpint(pid, >=, 0);
	if (pid == 0) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int fd;

		if (setgroups(0, NULL) < 0 || setgid(65533) < 0 || setuid(65533) < 0)
			_exit(10);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
		_exit(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : 1);
	}
	g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
	g_assert_true(WIFEXITED(status));
	g_assert_cmpint(WEXITSTATUS(status), <, 2);
	return WEXITSTATUS(status) == 0;
}

static const char *const open_control_opts[] = { "--control-mode", "0666", NULL };

UNIT_FIXTURE_TEST("/vms/local-user", open_control_opts, fixture_setup, test_local_user)
{
	g_autofree char *ans = NULL, *a_path = NULL;
	struct stat st;
	(void)data;

	if (geteuid() != 0) {
		g_test_skip("needs root, to become another user");
		return;
	}
	/* Anyone the socket lets in may look... */
	ans = ctl_ask_as_nobody(f->da, "vms\n");
	g_assert_true(g_str_has_prefix(ans, "0 VMs"));
	g_free(ans);
	/* ...and nobody but root may change anything. */
	ans = ctl_ask_as_nobody(f->da, "vm add evil gid=" GID_A "\n");
	g_assert_cmpstr(ans, ==,
			"error: permission denied: only root (or the daemon's user) may change VMs\n");
	g_free(ans);
	vm_add(f->da, "a", GID_A);
	ans = ctl_ask_as_nobody(f->da, "vm del a\n");
	g_assert_true(g_str_has_prefix(ans, "error: permission denied"));
	g_free(ans);
	ans = ctl_ask_as_nobody(f->da, "vm set a gid=" GID_B "\n");
	g_assert_true(g_str_has_prefix(ans, "error: permission denied"));
	g_free(ans);
	ans = muxctl_ok(f->da, (const char *const[]){ "vms", NULL });
	g_assert_nonnull(strstr(ans, "VM a ("));
	g_assert_null(strstr(ans, "VM evil"));
	g_assert_nonnull(strstr(ans, GID_A));

	/* The VM's socket: its owner and mode, changed live. */
	a_path = vm_socket(f->da, "a");
	g_free(muxctl_ok(f->da, (const char *const[]){ "vm", "set", "a", "--owner", "65534", "--mode",
						       "0600", NULL }));
	g_assert_cmpint(stat(a_path, &st), ==, 0);
	g_assert_cmpuint(st.st_uid, ==, 65534);
	g_assert_cmpuint(st.st_mode & 0777, ==, 0600);
	g_assert_false(connects_as_stranger(a_path));
	g_free(muxctl_ok(f->da, (const char *const[]){ "vm", "set", "a", "--mode", "0666", NULL }));
	g_assert_true(connects_as_stranger(a_path));
}

/* ---- metrics ---- */

static PromPage *metrics_page(const Daemon *d)
{
	g_autofree char *text = muxctl_ok(d, (const char *const[]){ "metrics", NULL });
	g_autofree char *error = NULL, *rule = NULL;
	PromPage *p = prom_page_parse(text, &error);

	if (!p)
		g_error("the page does not read: %s\n%s", error, text);
	rule = prom_page_check(p, "rdmacm_mux_", (const char *const[]){ "device", "port", NULL });
	if (rule)
		g_error("the page breaks a rule: %s", rule);
	return p;
}

/* A QEMU that sends its REQ again, and a peer whose REP comes twice: the
 * ib_cm groups count a retry and a duplicate, under the VM's label; the
 * page has a vm label per VM and one vm="", and no more. */
UNIT_FIXTURE_TEST("/vms/metrics", NULL, fixture_setup, test_metrics)
{
	g_autoptr(PromPage) p = NULL, gone = NULL;
	g_autoptr(JsonNode) v = NULL;
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux_msg m;
	uint8_t mad[256];
	uint32_t wire;
	int qa;
	(void)data;

	vm_add(f->da, "a", GID_A);
	vm_add(f->da, "b", GID_B);
	qa = qemu_vm_up(f, "a", f->a);
	mad_build_req(mad, 0x42, f->a, f->peer->gid, 0x4242);
	qemu_send(qa, f->a, mad);
	qemu_send(qa, f->a, mad); /* its CM's retry: the same TID */
	mad_set_tid(mad, 0x4343); /* the same REQ with a TID of its own: no retry */
	qemu_send(qa, f->a, mad);
	vm_expect(f->peer, CM_REQ, &in);
	vm_expect(f->peer, CM_REQ, &in);
	vm_expect(f->peer, CM_REQ, &in);
	wire = mad_local(in.mad);
	mad_build(mad, CM_REP, 0x77, wire, 0x5151);
	g_assert_cmpint(vm_send(f->peer, f->a, mad), ==, 0);
	g_assert_cmpint(vm_send(f->peer, f->a, mad), ==, 0);
	qemu_expect(qa, f->a, CM_REP, &m);
	qemu_expect(qa, f->a, CM_REP, &m);

	v = vms_json(f->da);
	g_assert_cmpint(vm_counter(v, "a", "cm_tx_msgs", "req"), ==, 3);
	g_assert_cmpint(vm_counter(v, "a", "cm_tx_retries", "req"), ==, 1);
	g_assert_cmpint(vm_counter(v, "a", "cm_rx_msgs", "rep"), ==, 2);
	g_assert_cmpint(vm_counter(v, "a", "cm_rx_duplicates", "rep"), ==, 1);
	p = metrics_page(f->da);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_cm_tx_retries_total",
					  (const char *const[]){ "vm", "a", "attribute", "req", NULL }),
			  ==, 1);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_cm_rx_duplicates_total",
					  (const char *const[]){ "vm", "a", "attribute", "rep", NULL }),
			  ==, 1);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_cm_tx_msgs_total",
					  (const char *const[]){ "vm", "b", "attribute", "req", NULL }),
			  ==, 0);
	g_assert_cmpfloat(prom_page_value(p, "rdmacm_mux_vm_clients",
					  (const char *const[]){ "vm", "", NULL }),
			  ==, 0);
	g_assert_cmpuint(prom_page_find(p, "rdmacm_mux_vm_clients", NULL, NULL), ==, 3);
	/* A VM that goes takes its series along. */
	g_free(muxctl_ok(f->da, (const char *const[]){ "vm", "del", "b", NULL }));
	gone = metrics_page(f->da);
	g_assert_cmpuint(prom_page_find(gone, "rdmacm_mux_vm_clients", NULL, NULL), ==, 2);
	g_assert_cmpuint(gone->samples->len, <, p->samples->len);
	close(qa);
}

/* Across a restart the ib_cm groups go on: the VM's counts come back
 * (the VMs' section of the hand-off state), and a REQ its CM sends again
 * after the restart is a retry, a REP the peer sends again a duplicate
 * (each session's record keeps its last MAD each way). */
UNIT_FIXTURE_TEST("/vms/metrics-restart", supervised_opts, fixture_setup, test_metrics_restart)
{
	g_autoptr(JsonNode) v = NULL;
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux_msg m;
	uint8_t req[256], rep[256];
	int qa;
	(void)data;

	vm_add(f->da, "a", GID_A);
	qa = qemu_vm_up(f, "a", f->a);
	mad_build_req(req, 0x42, f->a, f->peer->gid, 0x4242);
	qemu_send(qa, f->a, req);
	vm_expect(f->peer, CM_REQ, &in);
	mad_build(rep, CM_REP, 0x77, mad_local(in.mad), 0x5151);
	g_assert_cmpint(vm_send(f->peer, f->a, rep), ==, 0);
	qemu_expect(qa, f->a, CM_REP, &m);

	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	daemon_restart(f->da);
	qemu_send(qa, f->a, req);
	vm_expect(f->peer, CM_REQ, &in);
	g_assert_cmpint(vm_send(f->peer, f->a, rep), ==, 0);
	qemu_expect(qa, f->a, CM_REP, &m);

	v = vms_json(f->da);
	g_assert_cmpint(vm_counter(v, "a", "cm_tx_msgs", "req"), ==, 2);
	g_assert_cmpint(vm_counter(v, "a", "cm_tx_retries", "req"), ==, 1);
	g_assert_cmpint(vm_counter(v, "a", "cm_rx_msgs", "rep"), ==, 2);
	g_assert_cmpint(vm_counter(v, "a", "cm_rx_duplicates", "rep"), ==, 1);
	close(qa);
}

/* ---- the libvirt hook ---- */

/* The example domain, pointed at @d instead of mlx5_0's daemon. */
static char *example_domain(const Daemon *d)
{
	g_autofree char *path = g_build_filename(harness_env_bin("LIBVIRT_EXAMPLES"), "domain.xml",
						 NULL);
	g_autofree char *xml = NULL;
	g_auto(GStrv) a = NULL, b = NULL;

	g_assert_true(g_file_get_contents(path, &xml, NULL, NULL));
	/* QEMU's socket path for the daemon of mlx5_0 port 1, and the device. */
	a = g_strsplit(xml, "/run/rdmacm-mux-mlx5_0-1", -1);
	g_free(xml);
	xml = g_strjoinv(d->socket, a);
	b = g_strsplit(xml, "mlx5_0", -1);
	return g_strjoinv("simA", b);
}

/* The socket QEMU's -chardev names in @xml. */
static char *chardev_path(const char *xml)
{
	const char *p = strstr(xml, "socket,path=");
	const char *end;

	g_assert_nonnull(p);
	p += strlen("socket,path=");
	end = strchr(p, ',');
	g_assert_nonnull(end);
	return g_strndup(p, (gsize)(end - p));
}

/* Run the hook as libvirt does: qemu DOMAIN OP SUBOP -, the XML on stdin.
 * Its exit status; its stderr in *@err_out. */
static int run_hook(const Fabric *fabric, const char *domain, const char *op, const char *sub,
		    const char *xml, char **err_out)
{
	g_autofree char *hook = g_build_filename(harness_env_bin("LIBVIRT_EXAMPLES"), "qemu-hook",
						 NULL);
	g_autofree char *prefix = g_build_filename(fabric->dir, "mux", NULL);
	g_autofree char *aa_dir = g_build_filename(fabric->dir, "apparmor", NULL);
	g_autoptr(GSubprocessLauncher) l = g_subprocess_launcher_new(
		G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_SILENCE |
		G_SUBPROCESS_FLAGS_STDERR_PIPE);
	g_autoptr(GSubprocess) p = NULL;
	g_autoptr(GError) err = NULL;
	g_autofree char *out = NULL;

	g_subprocess_launcher_setenv(l, "RDMACM_MUXCTL", harness_env_bin("RDMACM_MUXCTL_BIN"), TRUE);
	g_subprocess_launcher_setenv(l, "RDMACM_MUX_PREFIX", prefix, TRUE);
	g_subprocess_launcher_setenv(l, "RDMACM_MUX_QEMU_USER", "nobody", TRUE);
	g_subprocess_launcher_setenv(l, "RDMACM_MUX_APPARMOR_DIR", aa_dir, TRUE);
	p = g_subprocess_launcher_spawn(l, &err, hook, domain, op, sub, "-", NULL);
	g_assert_no_error(err);
	g_assert_true(g_subprocess_communicate_utf8(p, xml, NULL, &out, err_out, &err));
	g_assert_no_error(err);
	g_assert_true(g_subprocess_get_if_exited(p));
	return g_subprocess_get_exit_status(p);
}

UNIT_FIXTURE_TEST("/vms/libvirt-hook", NULL, fixture_setup, test_libvirt_hook)
{
	g_autofree char *xml = example_domain(f->da);
	g_autofree char *path = chardev_path(xml);
	g_autofree char *said = NULL;
	g_autoptr(JsonNode) v = NULL;
	struct rdmacm_mux_msg m;
	uint8_t own[IB_GID_LEN];
	struct stat st;
	JsonObject *vm;
	int q;
	(void)data;

	/* Nothing to do for other operations, or for a domain without ours. */
	g_assert_cmpint(run_hook(f->fabric, "web-1", "started", "begin", xml, &said), ==, 0);
	g_clear_pointer(&said, g_free);
	g_assert_cmpint(run_hook(f->fabric, "plain", "prepare", "begin",
				 "<domain><name>plain</name><metadata/></domain>", &said),
			==, 0);
	g_clear_pointer(&said, g_free);
	v = vms_json(f->da);
	g_assert_cmpint(json_array_get_length(json_object_get_array_member(json_node_get_object(v),
									  "vms")),
			==, 0);
	g_clear_pointer(&v, json_node_unref);

	/* prepare: the VM, its GIDs, its socket where the XML's chardev is. */
	if (run_hook(f->fabric, "web-1", "prepare", "begin", xml, &said) != 0)
		g_error("the hook failed at prepare: %s", said);
	g_clear_pointer(&said, g_free);
	v = vms_json(f->da);
	vm = vm_of(v, "web-1");
	g_assert_nonnull(vm);
	g_assert_cmpstr(json_object_get_string_member(vm, "socket"), ==, path);
	g_assert_cmpint(json_array_get_length(json_object_get_array_member(vm, "gids")), ==, 2);
	g_assert_cmpint(json_array_get_length(json_object_get_array_member(vm, "prefixes")), ==, 1);
	g_assert_cmpint(stat(path, &st), ==, 0);
	g_assert_cmpuint(st.st_uid, ==, 65534);
	g_assert_cmpuint(st.st_mode & 0777, ==, 0600);
	g_clear_pointer(&v, json_node_unref);

	/* QEMU on that socket: its GIDs, and nothing else. */
	q = qemu_connect(path);
	gid_parse("::ffff:10.0.1.5", own);
	g_assert_cmpint(qemu_reg(q, own), ==, 0);
	g_assert_cmpint(qemu_reg(q, f->a), ==, RDMACM_MUX_ERR_CODE_EACCES);
	handshake(f, q, own);

	/* libvirtd restarted: the same again changes nothing and keeps QEMU. */
	if (run_hook(f->fabric, "web-1", "reconnect", "begin", xml, &said) != 0)
		g_error("the hook failed at reconnect: %s", said);
	g_clear_pointer(&said, g_free);
	v = vms_json(f->da);
	g_assert_true(vm_gid_registered(v, "web-1", "::ffff:10.0.1.5"));
	g_clear_pointer(&v, json_node_unref);

	/* A domain whose metadata does not hold up does not start. */
	{
		g_auto(GStrv) parts = g_strsplit(xml, "::ffff:10.0.1.5", -1);
		g_autofree char *bad = g_strjoinv("fe80::zz", parts);
		g_auto(GStrv) parts2 = g_strsplit(bad, "<name>web-1</name>", -1);
		g_autofree char *bad2 = g_strjoinv("<name>web-2</name>", parts2);

		g_assert_cmpint(run_hook(f->fabric, "web-2", "prepare", "begin", bad2, &said), ==, 1);
		/* The tool names the bad GID; the hook, the domain. */
		g_assert_nonnull(strstr(said, "fe80::zz"));
		g_assert_nonnull(strstr(said, "web-2"));
		g_clear_pointer(&said, g_free);
	}

	/* release: the VM goes, its QEMU is disconnected. */
	if (run_hook(f->fabric, "web-1", "release", "end", xml, &said) != 0)
		g_error("the hook failed at release: %s", said);
	g_clear_pointer(&said, g_free);
	g_assert_cmpint(raw_recv(q, &m, 5000), ==, -EPIPE);
	close(q);
	v = vms_json(f->da);
	g_assert_null(vm_of(v, "web-1"));
	g_assert_null(vm_of(v, "web-2"));
	g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
	/* A release of what is gone already is no error. */
	g_assert_cmpint(run_hook(f->fabric, "web-1", "release", "end", xml, &said), ==, 0);
}

/* ---- the boundary against a careless operator and a hostile neighbour ---- */

/* A connection to @path made by uid @uid (gid @uid), handed back: its
 * SO_PEERCRED stays @uid's. -1 when the socket refused it. */
static int connect_as(uid_t uid, const char *path)
{
	int sv[2], fd = -1, status;
	pid_t pid;

	g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
	pid = fork();
	g_assert_cmpint(pid, >=, 0);
	if (pid == 0) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		char byte = 'x';
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
		struct cmsghdr *cm;
		int c;

		if (setgroups(0, NULL) < 0 || setgid(uid) < 0 || setuid(uid) < 0)
			_exit(10);
		c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
		if (c < 0 || connect(c, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			_exit(1);
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = sizeof(u.buf);
		cm = CMSG_FIRSTHDR(&msg);
		if (!cm)
			_exit(13);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &c, sizeof(int));
		_exit(sendmsg(sv[1], &msg, 0) == 1 ? 0 : 12);
	}
	close(sv[1]);
	g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
	g_assert_true(WIFEXITED(status));
	g_assert_cmpint(WEXITSTATUS(status), <, 2);
	if (WEXITSTATUS(status) == 0) {
		char byte;
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };

		struct cmsghdr *cm;

		g_assert_cmpint(recvmsg(sv[0], &msg, MSG_CMSG_CLOEXEC), ==, 1);
		cm = CMSG_FIRSTHDR(&msg);
		if (!cm)
			g_error("no fd came back");
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	}
	close(sv[0]);
	return fd;
}

/* Whether the daemon closed @fd (EOF within a few seconds). */
static bool closed_by_daemon(int fd)
{
	struct rdmacm_mux_msg m;

	return raw_recv(fd, &m, 5000) == -EPIPE;
}

/* @d's argv with @opt (a "--name=value" option) set to @opt, replacing any
 * of the same name. */
static void daemon_set_opt(Daemon *d, const char *opt)
{
	g_autoptr(GPtrArray) argv = g_ptr_array_new();
	size_t n = strcspn(opt, "=") + 1;

	for (char **a = d->argv; *a; a++)
		if (strncmp(*a, opt, n) != 0)
			g_ptr_array_add(argv, g_strdup(*a));
	g_ptr_array_add(argv, g_strdup(opt));
	g_ptr_array_add(argv, NULL);
	g_strfreev(d->argv);
	d->argv = (char **)g_ptr_array_free(g_steal_pointer(&argv), FALSE);
}

/* Leak 1: the operator changes a VM's file from owner=65534 mode=0666 to
 * owner=65532 mode=0600 and restarts (SIGTERM hand-off, or SIGKILL under
 * the fd store). The socket the store kept must get the new owner and
 * mode, a stranger must no longer connect, and the old owner's open
 * connection must be closed rather than go on as the VM. @data: the
 * signal. */
static void restart_applies_perms(Fixture *f, gconstpointer data)
{
	const int sig = GPOINTER_TO_INT(data);
	g_autofree char *dir = vms_dir_of(f->fabric);
	g_autofree char *conf = g_build_filename(dir, "a.conf", NULL);
	g_autofree char *vms_opt = g_strdup_printf("--vms-dir=%s", dir);
	g_autofree char *path = vm_socket(f->da, "a");
	g_autoptr(JsonNode) v = NULL;
	struct stat before, after;
	int old_owner;

	if (geteuid() != 0) {
		g_test_skip("needs root, to become other users");
		return;
	}
	g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
	g_assert_true(g_file_set_contents(conf, "gid = " GID_A "\nowner = 65534\nmode = 0666\n", -1,
					  NULL));
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	daemon_set_opt(f->da, vms_opt);
	daemon_restart(f->da);
	g_assert_cmpint(stat(path, &before), ==, 0);
	g_assert_cmpuint(before.st_uid, ==, 65534);
	g_assert_cmpuint(before.st_mode & 0777, ==, 0666);
	g_assert_true(connects_as_stranger(path));
	old_owner = connect_as(65534, path);
	g_assert_cmpint(old_owner, >=, 0);
	g_assert_cmpint(qemu_reg(old_owner, f->a), ==, 0);

	/* The operator's change, as the man page says: edit, restart. */
	g_assert_true(g_file_set_contents(conf, "gid = " GID_A "\nowner = 65532\nmode = 0600\n", -1,
					  NULL));
	if (sig == SIGKILL)
		daemon_kill(f->da);
	else
		g_assert_cmpint(daemon_stop(f->da), ==, 0);
	daemon_restart(f->da);

	g_assert_cmpint(stat(path, &after), ==, 0);
	g_test_message("after the restart: %s is uid %u mode %04o (inode %s)", path,
		       (unsigned)after.st_uid, (unsigned)(after.st_mode & 0777),
		       after.st_ino == before.st_ino ? "the same" : "a new one");
	g_assert_cmpuint(after.st_uid, ==, 65532);
	g_assert_cmpuint(after.st_mode & 0777, ==, 0600);
	g_assert_false(connects_as_stranger(path));
	g_assert_true(closed_by_daemon(old_owner));
	v = vms_json(f->da);
	g_assert_false(vm_gid_registered(v, "a", GID_A));
	close(old_owner);
}

UNIT_FIXTURE_CASE("/vms/restart-applies-perms-sigterm", GINT_TO_POINTER(SIGTERM),
		  fixture_setup_for_signal, restart_applies_perms, restart_applies_perms_sigterm)
UNIT_FIXTURE_CASE("/vms/restart-applies-perms-sigkill", GINT_TO_POINTER(SIGKILL),
		  fixture_setup_for_signal, restart_applies_perms, restart_applies_perms_sigkill)

/* Live: vm set gives the socket another owner; the old owner's connection
 * is closed (it registered the VM's GID, and would register the new ones).
 * A change that still lets it in keeps it. */
UNIT_FIXTURE_TEST("/vms/set-owner-closes", NULL, fixture_setup, test_set_owner_closes)
{
	g_autofree char *path = vm_socket(f->da, "a");
	g_autoptr(JsonNode) v = NULL;
	int q;
	(void)data;

	if (geteuid() != 0) {
		g_test_skip("needs root, to become other users");
		return;
	}
	g_free(muxctl_ok(f->da, (const char *const[]){ "vm", "add", "a", "--gid", GID_A, "--owner",
						       "65534", "--mode", "0600", NULL }));
	q = connect_as(65534, path);
	g_assert_cmpint(q, >=, 0);
	g_assert_cmpint(qemu_reg(q, f->a), ==, 0);
	/* Wider: it still gets in; kept. */
	g_free(muxctl_ok(f->da, (const char *const[]){ "vm", "set", "a", "--mode", "0660", NULL }));
	v = vms_json(f->da);
	g_assert_cmpint(json_object_get_int_member(vm_of(v, "a"), "clients"), ==, 1);
	g_assert_true(vm_gid_registered(v, "a", GID_A));
	g_clear_pointer(&v, json_node_unref);
	/* Another owner: it would not get in; closed, the GID free. */
	g_free(muxctl_ok(f->da, (const char *const[]){ "vm", "set", "a", "--owner", "65532", "--gid",
						       GID_B, NULL }));
	g_assert_true(closed_by_daemon(q));
	v = vms_json(f->da);
	g_assert_cmpint(json_object_get_int_member(vm_of(v, "a"), "clients"), ==, 0);
	g_assert_false(vm_gid_registered(v, "a", GID_B));
	close(q);
	g_assert_cmpint(connect_as(65534, path), ==, -1);
	q = connect_as(65532, path);
	g_assert_cmpint(q, >=, 0);
	g_assert_cmpint(qemu_reg(q, f->b), ==, 0);
	close(q);
}

/* vm add without --owner: a socket of the daemon's user, mode 0600; never
 * one open to a whole group. */
UNIT_FIXTURE_TEST("/vms/default-socket", NULL, fixture_setup, test_default_socket)
{
	g_autofree char *path = vm_socket(f->da, "a");
	struct stat st;
	(void)data;

	vm_add(f->da, "a", GID_A);
	g_assert_cmpint(stat(path, &st), ==, 0);
	g_test_message("vm add without --owner: %s is uid %u gid %u mode %04o", path,
		       (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)(st.st_mode & 0777));
	g_assert_cmpuint(st.st_uid, ==, geteuid());
	g_assert_cmpuint(st.st_mode & 0777, ==, 0600);
}

/* A root-only file for a planted symlink to point at. */
static char *secret_file(const Fabric *fabric)
{
	g_autofree char *path = g_build_filename(fabric->dir, "secret", NULL);

	g_assert_true(g_file_set_contents(path, "root only\n", -1, NULL));
	g_assert_cmpint(chmod(path, 0600), ==, 0);
	g_assert_cmpint(chown(path, 0, 0), ==, 0);
	return g_steal_pointer(&path);
}

static void assert_secret_untouched(const char *secret)
{
	struct stat st;

	g_assert_cmpint(stat(secret, &st), ==, 0);
	g_test_message("%s: uid %u mode %04o", secret, (unsigned)st.st_uid,
		       (unsigned)(st.st_mode & 0777));
	g_assert_cmpuint(st.st_uid, ==, 0);
	g_assert_cmpuint(st.st_mode & 0777, ==, 0600);
}

/* Leak 2: a --vm-dir another uid owns. That uid renames a VM's socket
 * away, puts a symlink to a root-only file in its place, and waits for
 * the next "vm set" (which the libvirt hook runs too). The daemon must
 * refuse the directory at start (exit 2, naming its path, owner and
 * mode), as it must one anybody may write and one that is a symlink. */
UNIT_FIXTURE_TEST("/vms/vm-dir-foreign", NULL, fixture_setup, test_vm_dir_foreign)
{
	g_autofree char *secret = secret_file(f->fabric);
	g_autofree char *dir = g_build_filename(f->fabric->dir, "foreign.vm", NULL);
	g_autofree char *open_dir = g_build_filename(f->fabric->dir, "open.vm", NULL);
	g_autofree char *link = g_build_filename(f->fabric->dir, "link.vm", NULL);
	g_autofree char *good = g_build_filename(f->fabric->dir, "good.vm", NULL);
	const char *const dirs[] = { dir, open_dir, link };
	(void)data;

	if (geteuid() != 0) {
		g_test_skip("needs root, to give a directory to another user");
		return;
	}
	g_assert_cmpint(mkdir(dir, 0755), ==, 0);
	g_assert_cmpint(chown(dir, 65534, 65534), ==, 0);
	g_assert_cmpint(mkdir(open_dir, 0777), ==, 0);
	g_assert_cmpint(chmod(open_dir, 0777), ==, 0);
	g_assert_cmpint(mkdir(good, 0755), ==, 0);
	g_assert_cmpint(symlink(good, link), ==, 0);
	daemon_stop(f->da);
	for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
		g_autofree char *opt = g_strdup_printf("--vm-dir=%s", dirs[i]);
		g_autofree char *log = NULL;
		Daemon *d = daemon_launch(f->fabric, "simA", (const char *const[]){ opt, NULL });
		int status = daemon_wait_exit(d, 10000);

		log = daemon_output(d);
		if (status == -ETIMEDOUT) {
			/* It serves: play the attacker (uid 65534 owns the
			 * first directory) to show what that costs. */
			g_autofree char *sock = g_build_filename(dirs[i], "a.sock", NULL);
			g_autofree char *away = g_build_filename(dirs[i], "a.old", NULL);
			struct stat st;

			g_free(muxctl_ok(d, (const char *const[]){ "vm", "add", "a", "--gid", GID_A,
								   NULL }));
			g_assert_cmpint(rename(sock, away), ==, 0);
			g_assert_cmpint(symlink(secret, sock), ==, 0);
			g_free(muxctl_ok(d, (const char *const[]){ "vm", "set", "a", "--owner", "65534",
								   "--mode", "0600", NULL }));
			g_assert_cmpint(stat(secret, &st), ==, 0);
			g_error("the daemon serves --vm-dir %s (uid %u); after vm set, the root-only "
				"%s is uid %u mode %04o",
				dirs[i], i == 0 ? 65534u : 0u, secret, (unsigned)st.st_uid,
				(unsigned)(st.st_mode & 0777));
		}
		g_test_message("--vm-dir %s: exit %d: %s", dirs[i], status, log);
		g_assert_cmpint(status, ==, 2);
		g_assert_nonnull(strstr(log, dirs[i]));
		if (i == 0)
			g_assert_nonnull(strstr(log, "owned by uid 65534, mode 0755"));
		else if (i == 1)
			g_assert_nonnull(strstr(log, "mode 0777"));
		else
			g_assert_nonnull(strstr(log, "symbolic link"));
		daemon_free(d);
	}
	assert_secret_untouched(secret);
}

/* A symlink or a FIFO where the daemon makes or changes a socket: the VM's
 * socket at vm add, at vm set (the file swapped after it was made), the
 * main socket and the control socket at start. Each is refused and left
 * alone; nothing follows the link. */
UNIT_FIXTURE_TEST("/vms/planted", NULL, fixture_setup, test_planted)
{
	g_autofree char *secret = secret_file(f->fabric);
	g_autofree char *a = vm_socket(f->da, "a"), *b = vm_socket(f->da, "b");
	g_autofree char *c = vm_socket(f->da, "c");
	g_autofree char *out = NULL, *err = NULL;
	struct stat st;
	(void)data;

	/* vm add where a symlink and a FIFO wait. */
	vm_add(f->da, "a", GID_A);
	g_assert_cmpint(symlink(secret, b), ==, 0);
	g_assert_cmpint(mkfifo(c, 0600), ==, 0);
	g_assert_cmpint(muxctl(f->da, (const char *const[]){ "vm", "add", "b", "--gid", GID_B,
							     "--owner", "65534", NULL },
			       &out, &err),
			==, 1);
	g_test_message("vm add over a symlink: %s", err);
	g_assert_nonnull(strstr(err, "not a socket"));
	g_clear_pointer(&err, g_free);
	g_clear_pointer(&out, g_free);
	g_assert_cmpint(muxctl(f->da, (const char *const[]){ "vm", "add", "c", "--gid", GID_C,
							     "--owner", "65534", NULL },
			       &out, &err),
			==, 1);
	g_assert_nonnull(strstr(err, "not a socket"));
	g_clear_pointer(&err, g_free);
	g_clear_pointer(&out, g_free);
	g_assert_cmpint(lstat(c, &st), ==, 0);
	g_assert_true(S_ISFIFO(st.st_mode));

	/* vm set after A's socket became a symlink. */
	g_assert_cmpint(unlink(a), ==, 0);
	g_assert_cmpint(symlink(secret, a), ==, 0);
	g_assert_cmpint(muxctl(f->da, (const char *const[]){ "vm", "set", "a", "--owner", "65534",
							     "--mode", "0666", NULL },
			       &out, &err),
			==, 1);
	g_test_message("vm set over a symlink: %s", err);
	g_assert_nonnull(strstr(err, "symbolic link"));
	assert_secret_untouched(secret);
	g_assert_cmpint(daemon_stop(f->da), ==, 0);

	/* The main socket at start (fatal: exit), and the control socket (the
	 * daemon runs without it). */
	for (int i = 0; i < 4; i++) {
		g_autofree char *sock = g_build_filename(f->fabric->dir, "planted", NULL);
		g_autofree char *opt = g_strdup_printf("--socket=%s", sock);
		g_autofree char *ctl = g_strdup_printf("%s.ctl", sock);
		const char *at = i < 2 ? sock : ctl;
		Daemon *d;
		int status;

		(void)unlink(sock);
		(void)unlink(ctl);
		if (i % 2 == 0)
			g_assert_cmpint(symlink(secret, at), ==, 0);
		else
			g_assert_cmpint(mkfifo(at, 0600), ==, 0);
		d = daemon_launch(f->fabric, "simA",
				  (const char *const[]){ opt, "--group", "65534", NULL });
		status = daemon_wait_exit(d, i < 2 ? 10000 : 0);
		if (status == -ETIMEDOUT && i < 2)
			g_error("the daemon serves with a %s at %s", i % 2 ? "FIFO" : "symlink", at);
		if (i >= 2) {
			g_autofree char *serving = g_strdup_printf("on %s\n", sock);

			/* The log file is the CA's: one line per daemon so far. */
			daemon_wait_output(d, serving, (unsigned)i - 1);
			g_assert_cmpuint(daemon_output_count(d, "is not a socket"), >=, 1);
			g_assert_cmpint(daemon_stop(d), ==, 0);
		}
		g_assert_cmpint(lstat(at, &st), ==, 0);
		g_assert_true(i % 2 ? S_ISFIFO(st.st_mode) : S_ISLNK(st.st_mode));
		daemon_free(d);
	}
	assert_secret_untouched(secret);
}

/* Leak 3: a VM's file is deleted and --vm-dir moves across a restart. The
 * connection the store kept came in on the VM's socket: it must be closed,
 * not taken for a client of the shared socket with the GIDs it had. */
UNIT_FIXTURE_TEST("/vms/removed-vm-connection", supervised_opts, fixture_setup,
		  test_removed_vm_connection)
{
	g_autofree char *dir = vms_dir_of(f->fabric);
	g_autofree char *conf = g_build_filename(dir, "a.conf", NULL);
	g_autofree char *vms_opt = g_strdup_printf("--vms-dir=%s", dir);
	g_autofree char *moved = g_build_filename(f->fabric->dir, "moved.vm", NULL);
	g_autofree char *moved_opt = g_strdup_printf("--vm-dir=%s", moved);
	g_autoptr(JsonNode) v = NULL;
	JsonArray *shared_gids;
	int q;
	(void)data;

	g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
	g_assert_true(g_file_set_contents(conf, "gid = " GID_A "\n", -1, NULL));
	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	daemon_set_opt(f->da, vms_opt);
	daemon_restart(f->da);
	q = qemu_vm_up(f, "a", f->a);

	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	g_assert_cmpint(unlink(conf), ==, 0);
	daemon_set_opt(f->da, moved_opt);
	daemon_restart(f->da);

	v = vms_json(f->da);
	shared_gids = json_object_get_array_member(vm_of(v, ""), "gids");
	g_test_message("after the restart: the shared socket's clients hold %u GIDs",
		       json_array_get_length(shared_gids));
	g_assert_cmpint(json_array_get_length(shared_gids), ==, 0);
	g_assert_true(closed_by_daemon(q));
	close(q);
	/* Anyone on the shared socket may have GID_A now: it is nobody's. */
	q = raw_connect(f->da);
	g_assert_cmpint(qemu_reg(q, f->a), ==, 0);
	close(q);
}

/* Leak 5: prefixes of any width. fe80::/10 holds the port's own GID 0,
 * ::/8 every IPv4-mapped RoCE GID; a prefix that takes in an address the
 * port has now is someone's. Each refusal names the prefix or the GID. */
UNIT_FIXTURE_TEST("/vms/wide-prefix", NULL, fixture_setup, test_wide_prefix)
{
	static const char *const fe80_10[] = { "vm", "add", "x", "--prefix", "fe80::/10", NULL };
	static const char *const all_8[] = { "vm", "add", "x", "--prefix", "::/8", NULL };
	static const char *const gid0_exact[] = { "vm", "add", "x", "--gid", "fe80::a", NULL };
	static const char *const fe80_64[] = { "vm", "add", "x", "--prefix", "fe80::/64", NULL };
	static const char *const v4_120[] = { "vm", "add", "x", "--prefix", "::ffff:10.0.1.0/120",
					      NULL };
	static const struct {
		const char *const *args;
		const char *says;
	} cases[] = {
		{ fe80_10, "prefix fe80::/10 is wider than /64" },
		{ all_8, "prefix ::/8 is wider than /64" },
		{ gid0_exact, "GID fe80::a is the port's GID 0" },
		{ fe80_64, "GID fe80::a is the port's GID 0" },
		{ v4_120, "takes in GID ::ffff:10.0.1.1, which the port has" },
	};
	g_autoptr(JsonNode) v = NULL;
	uint8_t gid0[IB_GID_LEN];
	(void)data;

	gid_parse("fe80::a", gid0);
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_autofree char *out = NULL, *err = NULL;
		int rc = muxctl(f->da, cases[i].args, &out, &err);

		g_test_message("%s %s: exit %d: %s%s", cases[i].args[3], cases[i].args[4], rc, out,
			       err);
		if (rc == 0) {
			/* Accepted: what its QEMU gets from it. */
			int q = qemu_connect_vm(f->da, "x");

			g_error("vm add x %s %s was accepted; its QEMU registers fe80::a, the "
				"port's GID 0: err_code %d",
				cases[i].args[3], cases[i].args[4], qemu_reg(q, gid0));
		}
		g_assert_cmpint(rc, ==, 1);
		g_assert_nonnull(strstr(err, cases[i].says));
	}
	v = vms_json(f->da);
	g_assert_null(vm_of(v, "x"));
}

/* --allow-wide-prefix lets a VM have a /48, never the port's GID 0. */
static const char *const wide_opts[] = { "--allow-wide-prefix", NULL };

UNIT_FIXTURE_TEST("/vms/allow-wide-prefix", wide_opts, fixture_setup, test_allow_wide_prefix)
{
	g_autofree char *out = NULL, *err = NULL;
	(void)data;

	g_free(muxctl_ok(f->da, (const char *const[]){ "vm", "add", "x", "--prefix", "2001:db8::/48",
						       NULL }));
	g_assert_cmpint(muxctl(f->da, (const char *const[]){ "vm", "add", "y", "--prefix",
							     "fe80::/10", NULL },
			       &out, &err),
			==, 1);
	g_assert_nonnull(strstr(err, "GID fe80::a is the port's GID 0"));
}

/* @text with every @from replaced by @to. */
static char *replace_all(const char *text, const char *from, const char *to)
{
	g_auto(GStrv) parts = g_strsplit(text, from, -1);

	return g_strjoinv(to, parts);
}

#define WEB1_UUID "9b5d6cf8-8e9a-4b8e-9d3e-3f6c2b1a7e01" /* examples/libvirt/domain.xml's */
#define EVIL_UUID "5f0c1e2d-3a4b-4c5d-8e6f-708192a3b4c5"

/* A domain profile as libvirt's virt-aa-helper makes it from TEMPLATE.qemu. */
static char *domain_profile(const Fabric *fabric, const char *uuid)
{
	g_autofree char *dir = g_build_filename(fabric->dir, "apparmor", NULL);
	g_autofree char *path = NULL;
	g_autofree char *text = g_strdup_printf(
		"#\n# This profile is for the domain whose UUID matches this file.\n#\n\n"
		"#include <tunables/global>\n\nprofile libvirt-%s flags=(attach_disconnected) {\n"
		"  #include <abstractions/libvirt-qemu>\n  #include <libvirt/libvirt-%s.files>\n}\n",
		uuid, uuid);

	g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
	path = g_strdup_printf("%s/libvirt-%s", dir, uuid);
	g_assert_true(g_file_set_contents(path, text, -1, NULL));
	return g_steal_pointer(&path);
}

/* Leak 4: a second domain whose metadata names <rdmacm:vm name="web-1">.
 * Its prepare must fail and name the domain that made web-1 (not fall
 * back to vm set, which took web-1's GIDs away from its running QEMU); its
 * release must leave web-1 alone (it ran vm del web-1). Each domain's
 * AppArmor profile gets a rule for its own VM's socket, and only that. */
UNIT_FIXTURE_TEST("/vms/libvirt-hook-two-domains", NULL, fixture_setup, test_hook_two_domains)
{
	g_autofree char *xml = example_domain(f->da);
	g_autofree char *path = chardev_path(xml);
	g_autofree char *evil1 = replace_all(xml, "<name>web-1</name>", "<name>evil</name>");
	g_autofree char *evil2 = replace_all(evil1, WEB1_UUID, EVIL_UUID);
	g_autofree char *evil3 = replace_all(evil2, "device=\"simA\"", "name=\"web-1\" device=\"simA\"");
	g_autofree char *evil = replace_all(evil3, "::ffff:10.0.1.5", "::ffff:10.0.1.6");
	g_autofree char *web_profile = domain_profile(f->fabric, WEB1_UUID);
	g_autofree char *evil_profile = domain_profile(f->fabric, EVIL_UUID);
	g_autofree char *said = NULL, *text = NULL, *rule = NULL;
	g_autoptr(JsonNode) v = NULL;
	uint8_t own[IB_GID_LEN];
	int q, rc;
	(void)data;

	g_assert_nonnull(strstr(evil, "name=\"web-1\""));
	if (run_hook(f->fabric, "web-1", "prepare", "begin", xml, &said) != 0)
		g_error("the hook failed at prepare: %s", said);
	g_clear_pointer(&said, g_free);
	q = qemu_connect(path);
	gid_parse("::ffff:10.0.1.5", own);
	g_assert_cmpint(qemu_reg(q, own), ==, 0);

	/* The other domain: refused, naming web-1's domain. */
	rc = run_hook(f->fabric, "evil", "prepare", "begin", evil, &said);
	g_test_message("hook prepare of domain evil naming web-1: exit %d: %s", rc, said);
	g_assert_cmpint(rc, ==, 1);
	g_assert_nonnull(strstr(said, WEB1_UUID));
	g_assert_nonnull(strstr(said, "web-1"));
	g_clear_pointer(&said, g_free);
	v = vms_json(f->da);
	g_assert_true(vm_gid_registered(v, "web-1", "::ffff:10.0.1.5"));
	g_assert_cmpstr(json_object_get_string_member(vm_of(v, "web-1"), "domain"), ==, WEB1_UUID);
	g_clear_pointer(&v, json_node_unref);

	/* libvirtd restarted while it ran: its reconnect says so, changes
	 * nothing, and does not fail (libvirt would stop it). */
	rc = run_hook(f->fabric, "evil", "reconnect", "begin", evil, &said);
	g_assert_cmpint(rc, ==, 0);
	g_assert_nonnull(strstr(said, WEB1_UUID));
	g_clear_pointer(&said, g_free);
	v = vms_json(f->da);
	g_assert_true(vm_gid_registered(v, "web-1", "::ffff:10.0.1.5"));
	g_clear_pointer(&v, json_node_unref);

	/* Its release leaves web-1 and its QEMU alone. */
	rc = run_hook(f->fabric, "evil", "release", "end", evil, &said);
	g_test_message("hook release of domain evil: exit %d: %s", rc, said);
	g_assert_cmpint(rc, ==, 0);
	g_clear_pointer(&said, g_free);
	v = vms_json(f->da);
	g_assert_nonnull(vm_of(v, "web-1"));
	g_assert_true(vm_gid_registered(v, "web-1", "::ffff:10.0.1.5"));
	g_assert_cmpint(json_object_get_int_member(vm_of(v, "web-1"), "clients"), ==, 1);
	g_clear_pointer(&v, json_node_unref);

	/* AppArmor: web-1's profile names its socket; evil's nothing. */
	rule = g_strdup_printf("  \"%s\" rw,\n", path);
	g_assert_true(g_file_get_contents(web_profile, &text, NULL, NULL));
	g_test_message("%s:\n%s", web_profile, text);
	g_assert_nonnull(strstr(text, rule));
	g_assert_true(g_str_has_suffix(text, "}\n"));
	g_clear_pointer(&text, g_free);
	g_assert_true(g_file_get_contents(evil_profile, &text, NULL, NULL));
	g_assert_null(strstr(text, ".sock"));
	g_clear_pointer(&text, g_free);

	/* web-1's own release: the VM, its QEMU's connection and the rule go. */
	if (run_hook(f->fabric, "web-1", "release", "end", xml, &said) != 0)
		g_error("the hook failed at release: %s", said);
	g_assert_true(closed_by_daemon(q));
	close(q);
	g_assert_true(g_file_get_contents(web_profile, &text, NULL, NULL));
	g_assert_null(strstr(text, ".sock"));
	g_assert_null(strstr(text, "rdmacm-mux hook"));
}

UNIT_TEST_MAIN()
