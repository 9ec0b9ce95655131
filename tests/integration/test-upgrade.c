/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of upgrades and downgrades: the daemon under a
 * supervisor with an fd store, as systemd runs it, is replaced by another
 * version while raw QEMU-protocol clients hold a half-open session (REQ
 * sent, REP pending), an established one and one in closing (DREQ sent,
 * DREP pending): 0.1.0 (commit 1dad4e3, built from git history into this
 * build dir) to this tree, this tree to a "future" build (-Dhandoff_future:
 * one more counter, session field and rx drop reason, a newer minor) and
 * back, each with SIGTERM (a planned hand-off) and SIGKILL (a crash). QEMU
 * never reconnects and never registers again: every client keeps its
 * socket, its GIDs and its sessions, and every handshake finishes.
 *
 * The same program writes the golden state files (--write-golden, see
 * tests/handoff-golden/README.md).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "unit-test.h"

#define N_Q 3 /* half-open, established, closing */
#define GOLDEN_VM_GID "::ffff:10.0.1.5" /* the one GID of the golden files' VM */
/* From head on, a second VM, as the libvirt hook adds it: with the domain
 * that made it (the VMs' state field 9). */
#define GOLDEN_HOOKED_GID "::ffff:10.0.1.6"
#define GOLDEN_HOOKED_DOMAIN "9b5d6cf8-8e9a-4b8e-9d3e-3f6c2b1a7e01"

typedef struct Fixture {
	QemuPairs p; /* A's raw QEMU clients q[i], their peers b[i] on B */
	uint64_t tid;
	/* The sessions a round started: wire ids the peers saw, and the
	 * peers' own comm ids. */
	uint32_t wire[N_Q], peer[N_Q], base;
	uint32_t seen[N_Q]; /* the peer's comm id as the QEMU client sees it */
} Fixture;

/* The daemon binary of version @kind ("0.1.0", "future"), built on first
 * use into this build dir by build-daemon-version.sh; this tree's for
 * "head". */
static const char *daemon_binary(const char *kind)
{
	static char *bins[2];
	unsigned k = strcmp(kind, "0.1.0") == 0 ? 0 : 1;
	g_autoptr(GError) err = NULL;
	g_autofree char *out = NULL, *errout = NULL;
	g_autofree char *dir = NULL;
	int status;

	if (strcmp(kind, "head") == 0)
		return harness_env_bin("RDMACM_MUX_BIN");
	if (bins[k])
		return bins[k];
	dir = g_build_filename(harness_env_bin("UPGRADE_BUILD_DIR"), k ? "daemon-future"
								    : "daemon-0.1.0",
			       NULL);
	{
		char *argv[] = { (char *)harness_env_bin("UPGRADE_BUILD_SCRIPT"),
				 (char *)harness_env_bin("UPGRADE_SOURCE_DIR"), dir, (char *)kind,
				 NULL };

		if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &errout,
				  &status, &err))
			g_error("cannot run %s: %s", argv[0], err->message);
		/* No skip: a missing version is a failure, with the script's
		 * words (e.g. a clone without 0.1.0 in its history). */
		if (!g_spawn_check_wait_status(status, &err))
			g_error("cannot build the %s daemon: %s\n%s", kind, err->message, errout);
	}
	bins[k] = g_strdup(g_strstrip(out));
	g_assert_true(g_file_test(bins[k], G_FILE_TEST_IS_EXECUTABLE));
	return bins[k];
}

/* From now on @d runs @bin (at its next start). */
static void daemon_set_binary(Daemon *d, const char *bin)
{
	g_free(d->argv[0]);
	d->argv[0] = g_strdup(bin);
}

static void fixture_start(Fixture *f, const char *kind, const char *const *extra)
{
	const char *head = harness_env_bin("RDMACM_MUX_BIN");
	g_autofree char *saved = g_strdup(head);
	f->p.fabric = fabric_new("two-hosts");
	f->p.sup = supervisor_new(f->p.fabric->dir);
	/* The harness starts RDMACM_MUX_BIN. */
	g_setenv("RDMACM_MUX_BIN", daemon_binary(kind), TRUE);
	f->p.da = daemon_start_supervised(f->p.sup, f->p.fabric, "simA", extra);
	g_setenv("RDMACM_MUX_BIN", saved, TRUE);
	qemu_pairs_open(&f->p, N_Q);
	f->tid = 0xb000;
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
	(void)data;
	fixture_start(f, "0.1.0", NULL);
}

static void fixture_setup_head(Fixture *f, gconstpointer data)
{
	(void)data;
	fixture_start(f, "head", NULL);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	qemu_pairs_free(&f->p);
}

/*
 * Client 0: REQ sent, REP pending (half-open). Client 1: established.
 * Client 2: established, then DREQ sent, DREP pending (closing).
 */
static void start_sessions(Fixture *f, uint32_t base)
{
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux_msg m;
	uint8_t mad[256];

	f->base = base;
	for (int i = 0; i < N_Q; i++) {
		mad_build_req(mad, base + (uint32_t)i, f->p.qgid[i], f->p.b[i]->gid, ++f->tid);
		qemu_pairs_to_peer(&f->p, (unsigned)i, mad, &in);
		f->wire[i] = mad_local(in.mad);
		f->peer[i] = base + 0x100u + (uint32_t)i;
		if (i == 0)
			continue;
		mad_build(mad, CM_REP, f->peer[i], f->wire[i], ++f->tid);
		qemu_pairs_to_client(&f->p, (unsigned)i, mad, &m);
		g_assert_cmpuint(mad_remote(m.umad.mad), ==, base + (uint32_t)i);
		f->seen[i] = mad_local(m.umad.mad);
		mad_build(mad, CM_RTU, base + (uint32_t)i, f->seen[i], ++f->tid);
		qemu_pairs_to_peer(&f->p, (unsigned)i, mad, &in);
	}
	mad_build(mad, CM_DREQ, base + 2, f->seen[2], ++f->tid);
	qemu_send(f->p.q[2], f->p.qgid[2], mad);
	vm_expect(f->p.b[2], CM_DREQ, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, f->peer[2]);
}

/* Each session goes on from where it was, as only a session that crossed
 * the restart can: the client's own comm ids come back, to it alone. */
static void finish_sessions(Fixture *f)
{
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux_msg m;
	uint8_t mad[256];

	/* Half-open: the REP comes, the client answers RTU. */
	mad_build(mad, CM_REP, f->peer[0], f->wire[0], ++f->tid);
	g_assert_cmpint(vm_send(f->p.b[0], f->p.qgid[0], mad), ==, 0);
	qemu_expect(f->p.q[0], f->p.qgid[0], CM_REP, &m);
	g_assert_cmpuint(mad_remote(m.umad.mad), ==, f->base);
	mad_build(mad, CM_RTU, f->base, mad_local(m.umad.mad), ++f->tid);
	qemu_send(f->p.q[0], f->p.qgid[0], mad);
	vm_expect(f->p.b[0], CM_RTU, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, f->peer[0]);
	/* Established: the peer closes it. */
	mad_build(mad, CM_DREQ, f->peer[1], f->wire[1], ++f->tid);
	g_assert_cmpint(vm_send(f->p.b[1], f->p.qgid[1], mad), ==, 0);
	qemu_expect(f->p.q[1], f->p.qgid[1], CM_DREQ, &m);
	g_assert_cmpuint(mad_remote(m.umad.mad), ==, f->base + 1);
	mad_build(mad, CM_DREP, f->base + 1, f->seen[1], ++f->tid);
	qemu_send(f->p.q[1], f->p.qgid[1], mad);
	vm_expect(f->p.b[1], CM_DREP, &in);
	/* Closing: the DREP it waited for comes. */
	mad_build(mad, CM_DREP, f->peer[2], f->wire[2], ++f->tid);
	g_assert_cmpint(vm_send(f->p.b[2], f->p.qgid[2], mad), ==, 0);
	qemu_expect(f->p.q[2], f->p.qgid[2], CM_DREP, &m);
	g_assert_cmpuint(mad_remote(m.umad.mad), ==, f->base + 2);
}

/* Every client still owns its GID: registering it again is EEXIST
 * (another owner would be EACCES, a lost one OK). */
static void check_gids_kept(Fixture *f)
{
	struct rdmacm_mux_msg m;

	for (int i = 0; i < N_Q; i++) {
		raw_frame(&m, RDMACM_MUX_OP_CODE_REG, f->p.qgid[i]);
		g_assert_cmpint(raw_request(f->p.q[i], &m), ==, RDMACM_MUX_ERR_CODE_EEXIST);
	}
}

/* Replace da's binary by @kind's with @sig: SIGTERM a planned hand-off,
 * SIGKILL a crash. */
static void switch_version(Fixture *f, const char *kind, int sig)
{
	unsigned ready = supervisor_ready_count(f->p.sup);

	daemon_set_binary(f->p.da, daemon_binary(kind));
	if (sig == SIGKILL)
		daemon_kill(f->p.da);
	else
		g_assert_cmpint(daemon_stop(f->p.da), ==, 0);
	daemon_restart(f->p.da);
	g_assert_true(supervisor_wait_ready(f->p.sup, ready, 10000));
	/* What the store keeps is the new version's: one state, one table,
	 * nothing staged left behind, every client's socket. */
	g_assert_cmpuint(supervisor_stored(f->p.sup, "state"), ==, 1);
	g_assert_cmpuint(supervisor_stored(f->p.sup, "sessions"), ==, 1);
	g_assert_cmpuint(supervisor_stored(f->p.sup, "client."), ==, N_Q);
}

/* One version change in the middle of three handshakes. */
static void round_across(Fixture *f, const char *kind, int sig, uint32_t base)
{
	start_sessions(f, base);
	switch_version(f, kind, sig);
	check_gids_kept(f);
	finish_sessions(f);
	g_assert_cmpuint(daemon_output_count(f->p.da, "disconnecting"), ==, 0);
	g_assert_cmpuint(daemon_output_count(f->p.da, "starting clean"), ==, 0);
}

/* 0.1.0 to head to future to head. @data: the signal that replaces each
 * version (a test case's data). */
static void upgrade_chain(Fixture *f, gconstpointer data)
{
	const int sig = GPOINTER_TO_INT(data);

	round_across(f, "head", sig, 0x1000);
	round_across(f, "future", sig, 0x2000);
	round_across(f, "head", sig, 0x3000);
	g_assert_cmpuint(daemon_output_count(f->p.da, "took over the state rdmacm-mux 0.1.0 (raw layout) left"), ==,
			 1);
	/* Both ways the format was converted: a newer minor's memfd is not
	 * this build's to use in place. */
	g_assert_cmpuint(daemon_output_count(f->p.da, "converted into this version's format"), ==, 3);
	/* Nothing was dropped on the way, and nothing came twice: daemon B
	 * relayed each MAD of the three rounds once each way (per round 8
	 * from the QEMU clients, 5 from their peers) and dropped none, and
	 * with nothing queued in either daemon the clients' sockets hold all
	 * they will get. */
	g_assert_cmpuint(daemon_output_count(f->p.da, "not taken over"), ==, 0);
	g_assert_cmpfloat(daemon_metric_sum(f->p.db, "rdmacm_mux_mads_total", LABELS("direction", "rx")),
			  ==, 3 * 8);
	g_assert_cmpfloat(daemon_metric_sum(f->p.db, "rdmacm_mux_mads_total", LABELS("direction", "tx")),
			  ==, 3 * 5);
	g_assert_cmpfloat(daemon_metric_sum(f->p.db, "rdmacm_mux_rx_dropped_total", NULL), ==, 0);
	qemu_pairs_expect_quiet(&f->p);
}

UNIT_FIXTURE_CASE("/upgrade/0.1.0-head-future-head/sigterm", GINT_TO_POINTER(SIGTERM),
		  fixture_setup, upgrade_chain, upgrade_sigterm)
UNIT_FIXTURE_CASE("/upgrade/0.1.0-head-future-head/sigkill", GINT_TO_POINTER(SIGKILL),
		  fixture_setup, upgrade_chain, upgrade_sigkill)

/* The same tree, restarted: its own memfds are used in place, nothing
 * converted (the per-MAD path keeps writing where it wrote). */
UNIT_FIXTURE_TEST("/upgrade/same-version-in-place", NULL, fixture_setup_head, test_same_version)
{
	(void)data;
	round_across(f, "head", SIGKILL, 0x4000);
	round_across(f, "head", SIGTERM, 0x5000);
	g_assert_cmpuint(daemon_output_count(f->p.da, "(in place)"), ==, 2);
	g_assert_cmpuint(daemon_output_count(f->p.da, "converted"), ==, 0);
}

/* A new memfd with what @fd holds now. */
static int memfd_copy(int fd)
{
	int copy = memfd_create("copy", MFD_CLOEXEC);
	off_t size = lseek(fd, 0, SEEK_END);
	g_autofree uint8_t *buf = g_malloc((size_t)size);

	g_assert_cmpint(copy, >=, 0);
	g_assert_cmpint(pread(fd, buf, (size_t)size, 0), ==, size);
	g_assert_cmpint(pwrite(copy, buf, (size_t)size, 0), ==, size);
	return copy;
}

/*
 * A crash in the middle of replacing 0.1.0's memfds by converted ones:
 * the store holds both, the old under one name and the new, one
 * generation up, under the other. The next start reads the new one (what
 * changed after the conversion is there) and removes the old.
 */
UNIT_FIXTURE_TEST("/upgrade/crash-mid-swap", NULL, fixture_setup, test_crash_mid_swap)
{
	uint8_t extra[IB_GID_LEN];
	struct rdmacm_mux_msg m;
	int old_state, old_sessions;
	unsigned ready;
	(void)data;

	start_sessions(f, 0x6000);
	g_assert_cmpint(daemon_stop(f->p.da), ==, 0);
	old_state = memfd_copy(supervisor_stored_fd(f->p.sup, "state"));
	old_sessions = memfd_copy(supervisor_stored_fd(f->p.sup, "sessions"));
	/* This tree converts them, and a client changes its state after. */
	daemon_set_binary(f->p.da, daemon_binary("head"));
	ready = supervisor_ready_count(f->p.sup);
	daemon_restart(f->p.da);
	g_assert_true(supervisor_wait_ready(f->p.sup, ready, 10000));
	gid_parse("::ffff:10.0.1.8", extra);
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, extra);
	g_assert_cmpint(raw_request(f->p.q[0], &m), ==, 0);
	/* It dies; the old memfds are back beside the new ones. */
	daemon_kill(f->p.da);
	supervisor_store_fd(f->p.sup, "state", old_state);
	supervisor_store_fd(f->p.sup, "sessions", old_sessions);
	close(old_state);
	close(old_sessions);
	g_assert_cmpuint(supervisor_stored(f->p.sup, "state"), ==, 2);
	ready = supervisor_ready_count(f->p.sup);
	daemon_restart(f->p.da);
	g_assert_true(supervisor_wait_ready(f->p.sup, ready, 10000));
	/* The new one was read: the GID registered after the conversion is
	 * still client 0's, and the old memfds are gone from the store. */
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, extra);
	g_assert_cmpint(raw_request(f->p.q[0], &m), ==, RDMACM_MUX_ERR_CODE_EEXIST);
	g_assert_cmpuint(supervisor_stored(f->p.sup, "state"), ==, 1);
	g_assert_cmpuint(supervisor_stored(f->p.sup, "sessions"), ==, 1);
	check_gids_kept(f);
	finish_sessions(f);
}

/* ---- the golden state files (tests/handoff-golden/README.md) ---- */

static void write_file(const char *dir, const char *name, int fd, size_t *ret_size)
{
	g_autofree char *path = g_build_filename(dir, name, NULL);
	g_autofree uint8_t *buf = NULL;
	struct stat st;
	size_t len;

	g_assert_cmpint(fstat(fd, &st), ==, 0);
	buf = g_malloc((size_t)st.st_size);
	g_assert_cmpint(pread(fd, buf, (size_t)st.st_size, 0), ==, st.st_size);
	/* Trailing zeros are the file's size, given in the manifest. */
	len = (size_t)st.st_size;
	while (len > 0 && buf[len - 1] == 0)
		len--;
	g_assert_true(g_file_set_contents(path, (const char *)buf, (gssize)len, NULL));
	*ret_size = (size_t)st.st_size;
}

static void gid_text(const uint8_t gid[IB_GID_LEN], char buf[64])
{
	g_assert_nonnull(inet_ntop(AF_INET6, gid, buf, 64));
}

/* @line on @d's control socket; its answer must start with @want. */
static void control_say(const Daemon *d, const char *line, const char *want)
{
	g_autofree char *path = g_strdup_printf("%s.ctl", d->socket);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	g_autoptr(GString) out = g_string_new(NULL);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char buf[1024];
	ssize_t n;

	g_assert_cmpint(fd, >=, 0);
	g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	g_assert_cmpint(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
	g_assert_cmpint(send(fd, line, strlen(line), MSG_NOSIGNAL), ==, (ssize_t)strlen(line));
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		g_string_append_len(out, buf, n);
	close(fd);
	if (!g_str_has_prefix(out->str, want))
		g_error("'%s' answered '%s'", line, out->str);
}

/*
 * Run @kind's daemon with small limits, give it clients, GIDs and
 * sessions in several states, and write its memfds and a manifest of what
 * it holds (from what this program did and saw, not from the files) to
 * @dir.
 */
static int write_golden(const char *dir, const char *kind)
{
	/* Versions that keep VMs (all but 0.1.0) write one, from a vms.d file. */
	const bool vms = strcmp(kind, "0.1.0") != 0;
	/* This tree's daemon keeps the domain that made a VM. */
	const bool domains = strcmp(kind, "head") == 0;
	g_autofree char *vms_dir = g_build_filename(dir, "vms.d", NULL);
	g_autofree char *vms_conf = g_build_filename(vms_dir, "golden.conf", NULL);
	g_autofree char *vms_opt = g_strdup_printf("--vms-dir=%s", vms_dir);
	const char *const extra_010[] = { "--max-clients", "8", "--max-gids", "2", NULL };
	const char *const extra_vms[] = { "--max-clients", "8", "--max-gids", "2",
					  "--max-vms",	   "2", vms_opt,       NULL };
	const char *const *extra = vms ? extra_vms : extra_010;
	g_autoptr(GString) man = g_string_new(NULL);
	g_autofree char *man_path = g_build_filename(dir, "manifest", NULL);
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux_msg m;
	uint8_t second[IB_GID_LEN], lgid[IB_GID_LEN], mad[256];
	Fixture fx = { 0 }, *f = &fx;
	char text[64], text2[64];
	size_t size;
	Vm *lib, *peer;

	g_mkdir_with_parents(vms_dir, 0755);
	g_assert_true(g_file_set_contents(vms_conf, "gid = " GOLDEN_VM_GID "\n", -1, NULL));
	fixture_start(f, kind, extra);
	if (domains)
		control_say(f->p.da,
			    "vm add hooked gid=" GOLDEN_HOOKED_GID " domain=" GOLDEN_HOOKED_DOMAIN "\n",
			    "VM hooked added");
	/* Client 1 also holds a second GID. */
	gid_parse("::ffff:10.0.1.9", second);
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, second);
	g_assert_cmpint(raw_request(f->p.q[1], &m), ==, 0);
	/* A library client (HELLO done) with a session a peer started. */
	lib = vm_new(f->p.da, "::ffff:10.0.1.7", "lib");
	gid_parse("::ffff:10.0.1.7", lgid);
	peer = vm_new(f->p.db, "::ffff:10.0.2.7", "peer");
	start_sessions(f, 0x700);
	mad_build_req(mad, 0x7777, peer->gid, lgid, ++f->tid);
	g_assert_cmpint(vm_send(peer, lgid, mad), ==, 0);
	vm_expect(lib, CM_REQ, &in);

	g_string_append_printf(man, "# written by test-upgrade --write-golden with the %s daemon\n",
			       kind);
	for (int i = 0; i < N_Q; i++) {
		gid_text(f->p.qgid[i], text);
		if (i == 1) {
			gid_text(second, text2);
			g_string_append_printf(man, "client %d hello 0 gids %s,%s\n", i + 1, text,
					       text2);
		} else {
			g_string_append_printf(man, "client %d hello 0 gids %s\n", i + 1, text);
		}
	}
	gid_text(lgid, text);
	g_string_append_printf(man, "client 4 hello 1 gids %s\n", text);
	g_string_append_printf(man, "session client 1 comm 0x%x wire 0x%x state req-sent\n",
			       f->base, f->wire[0]);
	g_string_append_printf(man, "session client 2 comm 0x%x wire 0x%x state established\n",
			       f->base + 1, f->wire[1]);
	g_string_append_printf(man, "session client 3 comm 0x%x wire 0x%x state closing\n",
			       f->base + 2, f->wire[2]);
	/* The peer's comm id as it came on the wire (its daemon's id). */
	g_string_append_printf(man, "peer-session client 4 peer-comm 0x%x gid %s state req-rcvd\n",
			       mad_local(in.mad), text);
	/* What this program made the daemon count. */
	g_string_append(man, "counter tx.REQ 3\ncounter tx.RTU 2\ncounter tx.DREQ 1\n"
			     "counter rx.REP 2\ncounter rx.REQ 1\ncounter reg_ok 5\n"
			     "counter clients_accepted 4\n");
	if (vms)
		g_string_append(man, "vm golden gids " GOLDEN_VM_GID "\n");
	if (domains)
		g_string_append(man, "vm hooked gids " GOLDEN_HOOKED_GID " domain " GOLDEN_HOOKED_DOMAIN
				     "\n");
	write_file(dir, "state", supervisor_stored_fd(f->p.sup, "state"), &size);
	g_string_append_printf(man, "size state %zu\n", size);
	write_file(dir, "sessions", supervisor_stored_fd(f->p.sup, "sessions"), &size);
	g_string_append_printf(man, "size sessions %zu\n", size);
	g_assert_true(g_file_set_contents(man_path, man->str, (gssize)man->len, NULL));
	vm_free(peer);
	vm_free(lib);
	fixture_teardown(f, NULL);
	g_assert_cmpint(g_unlink(vms_conf), ==, 0);
	g_assert_cmpint(g_rmdir(vms_dir), ==, 0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--write-golden") == 0)
		return write_golden(argv[2], argv[3]);
	g_test_init(&argc, &argv, NULL);
	unit_test_add_registered_if(NULL);
	return g_test_run();
}
