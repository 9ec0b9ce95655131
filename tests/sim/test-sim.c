/* SPDX-License-Identifier: MIT */
/*
 * Owns the tests of the simulated fabric (suite 'sim'). Runs under
 * LD_PRELOAD=libumad-sim.so and is linked with -libumad, so every umad_* call
 * here goes through the interposed symbols. The same binary, started as
 * "test-sim peer ROLE ...", is the second (third...) host: each peer is a
 * fresh process with its own environment (fabric, faults).
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <infiniband/umad.h>
#include "unit-test.h"

#define MAD_LEN 256
#define CM 0x07
#define SEND 0x03
#define REQ 0x0010

static char *main_fabric;
static const char *self_exe;

/* ---- shared helpers ------------------------------------------------------ */

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void parse_gid(const char *s, uint8_t gid[16])
{
	g_assert_cmpint(inet_pton(AF_INET6, s, gid), ==, 1);
}

static void build_mad(void *umad, uint8_t mclass, uint8_t method, uint16_t attr, uint64_t tid,
		      uint32_t seq)
{
	uint8_t *mad = (uint8_t *)umad + 64;
	uint64_t t = htobe64(tid);
	uint16_t a = htobe16(attr);
	uint32_t s = htobe32(seq);

	memset(umad, 0, 64 + MAD_LEN);
	mad[0] = 1;
	mad[1] = mclass;
	mad[2] = 2;
	mad[3] = method;
	memcpy(mad + 8, &t, 8);
	memcpy(mad + 16, &a, 2);
	memcpy(mad + 24, &s, 4);
}

/* Addresses a MAD the way a RoCE sender must: GRH, local SGID index, DGID. */
static void address_gid(void *umad, int sgid_index, const char *dgid)
{
	ib_mad_addr_t *a = umad_get_mad_addr(umad);

	umad_set_addr(umad, 0xffff, 1, 0, 0x80010000);
	a->grh_present = 1;
	a->gid_index = (uint8_t)sgid_index;
	a->hop_limit = 64;
	parse_gid(dgid, a->gid);
}

static void address_lid(void *umad, int lid)
{
	umad_set_addr(umad, lid, 1, 0, 0x80010000);
	umad_get_mad_addr(umad)->grh_present = 0;
}

static uint64_t mad_tid(const void *umad)
{
	uint64_t t;

	memcpy(&t, (const uint8_t *)umad + 64 + 8, 8);
	return be64toh(t);
}

static uint32_t mad_seq(const void *umad)
{
	uint32_t s;

	memcpy(&s, (const uint8_t *)umad + 64 + 24, 4);
	return be32toh(s);
}

static long mask_of(const char *name)
{
	if (strcmp(name, "send") == 0)
		return 1L << SEND;
	if (strcmp(name, "get") == 0)
		return 1L << 0x01;
	return 0;
}

/* ---- peer roles (run in a child process) -------------------------------- */

static void print_mad(int rc, int len, const void *buf)
{
	const struct ib_user_mad *u = buf;
	const uint8_t *mad = (const uint8_t *)buf + 64;
	char gid[INET6_ADDRSTRLEN];
	uint16_t attr;
	int last = -1;

	for (int i = 0; i < len; i++)
		if (mad[i])
			last = i;
	memcpy(&attr, mad + 16, 2);
	inet_ntop(AF_INET6, u->addr.gid, gid, sizeof(gid));
	printf("MAD %d %d %u %u %u %u %u %u %u %s %016" PRIx64 " %04x %u %" PRIu64 " %d %02x\n",
	       rc, len, u->status, be32toh(u->addr.qpn), be32toh(u->addr.qkey),
	       be16toh(u->addr.lid), u->addr.grh_present, u->addr.gid_index, u->addr.hop_limit,
	       gid, mad_tid(buf), be16toh(attr), mad_seq(buf), mono_ms(), last, mad[3]);
}

/* Receives until nothing came for @idle_ms. */
static int receive_loop(int fd, int idle_ms)
{
	void *buf = g_malloc0(64 + MAD_LEN);
	/* Room for the sender to start; a receiver that must get nothing waits this long. */
	int n = 0, wait = MAX(idle_ms * 5, 1500);

	for (;;) {
		int len = MAD_LEN, rc = umad_recv(fd, buf, &len, wait);

		if (rc == -ETIMEDOUT)
			break;
		if (rc < 0) {
			printf("ERR %d %d\n", rc, errno);
			break;
		}
		print_mad(rc, len, buf);
		n++;
		wait = idle_ms;
	}
	printf("END %d\n", n);
	g_free(buf);
	return 0;
}

static int open_reg(const char *ca, int port, const char *mask_name, int *agent)
{
	long mask[2] = { mask_of(mask_name), 0 };
	int fd = umad_open_port(ca, port);

	if (fd < 0) {
		printf("OPEN %d\n", fd);
		exit(3);
	}
	*agent = umad_register(fd, CM, 2, 0, strcmp(mask_name, "null") ? mask : NULL);
	if (*agent < 0) {
		printf("REG %d %d\n", *agent, errno);
		exit(4);
	}
	return fd;
}

/* peer recv CA PORT MASK IDLE_MS */
static int peer_recv(char **argv)
{
	int agent, fd = open_reg(argv[0], atoi(argv[1]), argv[2], &agent);

	printf("READY %d\n", agent);
	return receive_loop(fd, atoi(argv[3]));
}

/* peer send CA PORT SGID_INDEX|-1 GID|lid:N COUNT TIMEOUT RETRIES WAIT_MS */
static int peer_send(char **argv)
{
	int agent, fd = open_reg(argv[0], atoi(argv[1]), "null", &agent);
	int src = atoi(argv[2]), count = atoi(argv[4]);
	void *umad = g_malloc0(64 + MAD_LEN);

	for (int seq = 0; seq < count; seq++) {
		uint64_t t0 = mono_ms();
		int rc;

		build_mad(umad, CM, SEND, REQ, 0x5500000000ull | (0xabc00000u + (unsigned)seq),
			  (uint32_t)seq);
		if (g_str_has_prefix(argv[3], "lid:"))
			address_lid(umad, atoi(argv[3] + 4));
		else
			address_gid(umad, src, argv[3]);
		rc = umad_send(fd, agent, umad, MAD_LEN, atoi(argv[5]), atoi(argv[6]));
		printf("SEND %d %d %d %" PRIu64 " %" PRIu64 "\n", seq, rc, rc < 0 ? errno : 0, t0,
		       mono_ms() - t0);
	}
	g_free(umad);
	if (atoi(argv[7]) > 0) {
		void *buf = g_malloc0(64 + MAD_LEN);

		for (;;) {
			int len = MAD_LEN, rc = umad_recv(fd, buf, &len, atoi(argv[7]));

			if (rc < 0)
				break;
			print_mad(rc, len, buf);
		}
		g_free(buf);
	}
	printf("END\n");
	return 0;
}

/* peer removal CA PORT: waits for the port to go away, reports what the fd does. */
static int peer_removal(char **argv)
{
	int agent, fd = open_reg(argv[0], atoi(argv[1]), "send", &agent);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN }, out;
	void *buf = g_malloc0(64 + MAD_LEN);
	int len = MAD_LEN, rc, e;

	epoll_ctl(ep, EPOLL_CTL_ADD, umad_get_fd(fd), &ev);
	printf("READY %d\n", agent);
	if (epoll_wait(ep, &out, 1, 10000) != 1) {
		printf("NOWAKE\n");
		return 1;
	}
	rc = umad_recv(fd, buf, &len, 0);
	e = errno;
	printf("RECV %d %d\n", rc, e);
	address_gid(buf, 1, "::ffff:10.0.0.1");
	build_mad(buf, CM, SEND, REQ, 1, 1);
	address_gid(buf, 1, "::ffff:10.0.0.1");
	rc = umad_send(fd, agent, buf, MAD_LEN, 0, 0);
	e = errno;
	printf("SENDRC %d %d\n", rc, e);
	printf("STILL %d\n", epoll_wait(ep, &out, 1, 0));
	printf("REOPEN %d\n", umad_open_port(argv[0], atoi(argv[1])));
	g_free(buf);
	return 0;
}

/* peer hold CA PORT MASK: registers and sleeps until killed. */
static int peer_hold(char **argv)
{
	int agent;

	open_reg(argv[0], atoi(argv[1]), argv[2], &agent);
	printf("READY %d\n", agent);
	pause();
	return 0;
}

/* peer took FD IDLE_MS: receives on umad fd FD, which it inherited and
 * never registered on. Its first read, before it opened any port itself,
 * fails as the kernel's does: libibumad reads with the old ABI's header
 * size until an open of its own switches it. */
static int peer_took(char **argv)
{
	void *buf = g_malloc0(64 + MAD_LEN);
	int len = MAD_LEN, rc = umad_recv(atoi(argv[0]), buf, &len, 0), probe;

	printf("READY %d %d\n", rc, errno);
	g_free(buf);
	probe = umad_open_port("simB", 1);
	if (probe < 0)
		return 3;
	umad_close_port(probe);
	return receive_loop(atoi(argv[0]), atoi(argv[1]));
}

static int peer_main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int nargs;
		int (*fn)(char **);
	} roles[] = {
		{ "recv", 4, peer_recv },
		{ "send", 8, peer_send },
		{ "removal", 2, peer_removal },
		{ "hold", 3, peer_hold },
		{ "took", 2, peer_took },
	};

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; i < G_N_ELEMENTS(roles); i++)
		if (argc == roles[i].nargs + 1 && strcmp(argv[0], roles[i].name) == 0)
			return roles[i].fn(argv + 1);
	fprintf(stderr, "bad peer role\n");
	return 2;
}

/* ---- driving peers from the tests --------------------------------------- */

struct peer {
	GPid pid;
	FILE *out;
};

/* Starts "test-sim peer ARGS..." with extra environment "K=V" entries (or
 * "K=" to unset), and @fd as its fd 3 unless -1. */
static struct peer *peer_start_fd(const char *fabric, const char *const *env_extra, int fd,
				  const char *role, va_list ap);

static struct peer *peer_start(const char *fabric, const char *const *env_extra,
			       const char *role, ...)
{
	struct peer *p;
	va_list ap;

	va_start(ap, role);
	p = peer_start_fd(fabric, env_extra, -1, role, ap);
	va_end(ap);
	return p;
}

static struct peer *peer_start_with_fd(int fd, const char *role, ...)
{
	struct peer *p;
	va_list ap;

	va_start(ap, role);
	p = peer_start_fd(NULL, NULL, fd, role, ap);
	va_end(ap);
	return p;
}

static struct peer *peer_start_fd(const char *fabric, const char *const *env_extra, int fd,
				  const char *role, va_list ap)
{
	g_autoptr(GPtrArray) argv = g_ptr_array_new();
	g_auto(GStrv) env = g_get_environ();
	g_autoptr(GError) err = NULL;
	struct peer *p = g_new0(struct peer, 1);
	const int source_fds[] = { fd }, target_fds[] = { 3 };
	const char *a;
	int out_fd;

	env = g_environ_unsetenv(env, "UMAD_SIM_FAULTS");
	env = g_environ_setenv(env, "UMAD_SIM_FABRIC", fabric ? fabric : main_fabric, TRUE);
	for (const char *const *e = env_extra; e && *e; e++) {
		g_auto(GStrv) kv = g_strsplit(*e, "=", 2);

		env = g_environ_setenv(env, kv[0], kv[1], TRUE);
	}
	g_ptr_array_add(argv, (char *)self_exe);
	g_ptr_array_add(argv, (char *)"peer");
	g_ptr_array_add(argv, (char *)role);
	while ((a = va_arg(ap, const char *)))
		g_ptr_array_add(argv, (char *)a);
	g_ptr_array_add(argv, NULL);
	g_assert_true(g_spawn_async_with_pipes_and_fds(
		NULL, (const char *const *)argv->pdata, (const char *const *)env,
		G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, -1, -1, -1, fd >= 0 ? source_fds : NULL,
		fd >= 0 ? target_fds : NULL, fd >= 0 ? 1 : 0, &p->pid, NULL, &out_fd, NULL,
		&err));
	g_assert_no_error(err);
	p->out = fdopen(out_fd, "r");
	return p;
}

/* Reads one line; NULL at EOF. */
static char *peer_line(struct peer *p)
{
	char buf[512];

	if (!fgets(buf, sizeof(buf), p->out))
		return NULL;
	return g_strchomp(g_strdup(buf));
}

static void peer_expect_ready(struct peer *p)
{
	g_autofree char *l = peer_line(p);

	g_assert_nonnull(l);
	g_assert_true(g_str_has_prefix(l, "READY "));
}

/* Collects every remaining line and reaps the peer, which must exit 0. */
static GPtrArray *peer_finish(struct peer *p)
{
	GPtrArray *lines = g_ptr_array_new_with_free_func(g_free);
	char *l;
	int status;

	while ((l = peer_line(p)))
		g_ptr_array_add(lines, l);
	fclose(p->out);
	g_assert_cmpint(waitpid(p->pid, &status, 0), ==, p->pid);
	g_spawn_close_pid(p->pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		for (guint i = 0; i < lines->len; i++)
			g_printerr("peer: %s\n", (char *)lines->pdata[i]);
	g_assert_true(WIFEXITED(status));
	g_assert_cmpint(WEXITSTATUS(status), ==, 0);
	g_free(p);
	return lines;
}

static void peer_kill(struct peer *p)
{
	int status;

	kill(p->pid, SIGKILL);
	waitpid(p->pid, &status, 0);
	g_spawn_close_pid(p->pid);
	fclose(p->out);
	g_free(p);
}

struct mad_line {
	int rc, len;
	unsigned status, qpn, qkey, lid, grh, gidx, hop;
	char gid[64];
	uint64_t tid;
	unsigned attr, seq;
	uint64_t t;
	int last_nz;
	unsigned method;
};

static GArray *mads_of(GPtrArray *lines)
{
	GArray *v = g_array_new(FALSE, TRUE, sizeof(struct mad_line));

	for (guint i = 0; i < lines->len; i++) {
		struct mad_line m;
		const char *l = lines->pdata[i];

		if (!g_str_has_prefix(l, "MAD "))
			continue;
		g_assert_cmpint(sscanf(l, "MAD %d %d %u %u %u %u %u %u %u %63s %" SCNx64
					  " %x %u %" SCNu64 " %d %x",
				       &m.rc, &m.len, &m.status, &m.qpn, &m.qkey, &m.lid, &m.grh,
				       &m.gidx, &m.hop, m.gid, &m.tid, &m.attr, &m.seq, &m.t,
				       &m.last_nz, &m.method),
				==, 16);
		g_array_append_val(v, m);
	}
	return v;
}

struct send_line {
	int seq, rc, err;
	uint64_t t, took;
};

static GArray *sends_of(GPtrArray *lines)
{
	GArray *v = g_array_new(FALSE, TRUE, sizeof(struct send_line));

	for (guint i = 0; i < lines->len; i++) {
		struct send_line s;

		if (sscanf(lines->pdata[i], "SEND %d %d %d %" SCNu64 " %" SCNu64, &s.seq, &s.rc,
			   &s.err, &s.t, &s.took) == 5)
			g_array_append_val(v, s);
	}
	return v;
}

static void run_cli(const char *const *args)
{
	g_autoptr(GPtrArray) argv = g_ptr_array_new();
	g_autofree char *out = NULL, *errout = NULL;
	g_autoptr(GError) err = NULL;
	int status = 0;

	g_ptr_array_add(argv, getenv("UMAD_SIM_CLI"));
	for (const char *const *a = args; *a; a++)
		g_ptr_array_add(argv, (char *)*a);
	g_ptr_array_add(argv, NULL);
	g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
				   &out, &errout, &status, &err));
	if (!g_spawn_check_wait_status(status, NULL))
		g_printerr("umad-sim %s failed: %s\n", args[0], errout);
	g_assert_true(g_spawn_check_wait_status(status, NULL));
}

static char *new_fabric(const char *const *extra)
{
	g_autoptr(GError) err = NULL;
	char *dir = g_dir_make_tmp("umad-sim-XXXXXX", &err);
	g_autoptr(GPtrArray) args = g_ptr_array_new();

	g_assert_no_error(err);
	g_ptr_array_add(args, (char *)"create");
	g_ptr_array_add(args, dir);
	g_ptr_array_add(args, (char *)"--force");
	g_ptr_array_add(args, (char *)"--preset=two-hosts");
	g_ptr_array_add(args, (char *)"--preset=ib");
	for (const char *const *e = extra; e && *e; e++)
		g_ptr_array_add(args, (char *)*e);
	g_ptr_array_add(args, NULL);
	run_cli((const char *const *)args->pdata);
	return dir;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* In-process: under a clang ASan build no uninstrumented child (rm, sh) can load the preload. */
static void rm_rf(const char *dir)
{
	g_assert_cmpint(nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS), ==, 0);
}

static char *read_sys(const char *fabric, const char *rel)
{
	g_autofree char *path = g_build_filename(fabric, "sys", rel, NULL);
	char *s = NULL;

	g_assert_true(g_file_get_contents(path, &s, NULL, NULL));
	return s;
}

static void assert_sys(const char *fabric, const char *rel, const char *expect)
{
	g_autofree char *s = read_sys(fabric, rel);

	g_assert_cmpstr(s, ==, expect);
}

/* ---- in-process helpers --------------------------------------------------- */

static int open_agent(const char *ca, long mask_bits, int *agent)
{
	long mask[2] = { mask_bits, 0 };
	int fd = umad_open_port(ca, 1);

	g_assert_cmpint(fd, >=, 0);
	*agent = umad_register(fd, CM, 2, 0, mask_bits ? mask : NULL);
	g_assert_cmpint(*agent, >=, 0);
	return fd;
}

static int recv_one(int fd, void *buf, int timeout)
{
	int len = MAD_LEN;
	int rc = umad_recv(fd, buf, &len, timeout);

	if (rc >= 0)
		g_assert_cmpint(len, ==, umad_status(buf) ? 24 : MAD_LEN);
	return rc;
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

/* ---- tests ----------------------------------------------------------------- */

UNIT_TEST("/sim/interpose", test_interpose)
{
	Dl_info info = { 0 };
	void *sym = dlsym(RTLD_DEFAULT, "umad_send");
	char cas[8][UMAD_CA_NAME_LEN];
	int fd;

	/* The versioned reference umad_send@IBUMAD_1.0 must bind to the preload. */
	g_assert_nonnull(sym);
	g_assert_true(dladdr(sym, &info));
	g_assert_nonnull(strstr(info.dli_fname, "libumad-sim"));
	g_assert_true((void *)umad_send == sym);
	g_assert_cmpint(umad_init(), ==, 0);
	g_assert_cmpint(umad_get_cas_names(cas, 8), ==, 4);
	g_assert_cmpstr(cas[0], ==, "simA");
	g_assert_cmpstr(cas[3], ==, "simD");
	/* libibumad's process-global ABI flag: 56 until an open enables P_Key support. */
	g_assert_cmpuint(umad_size(), ==, 56);
	fd = umad_open_port("simA", 1);
	g_assert_cmpint(fd, >=, 0);
	g_assert_cmpuint(umad_size(), ==, 64);
	g_assert_true(umad_get_fd(fd) == fd);
	umad_close_port(fd);
}

UNIT_TEST("/sim/discovery", test_discovery)
{
	umad_ca_t ca;
	umad_port_t port;
	uint8_t g[16];

	g_assert_cmpint(umad_get_ca("simA", &ca), ==, 0);
	g_assert_cmpstr(ca.ca_name, ==, "simA");
	g_assert_cmpint(ca.numports, ==, 1);
	g_assert_nonnull(ca.ports[1]);
	g_assert_cmpstr(ca.ports[1]->link_layer, ==, "Ethernet");
	g_assert_cmpint(ca.ports[1]->state, ==, 4);
	umad_release_ca(&ca);
	g_assert_cmpint(umad_get_port("simC", 1, &port), ==, 0);
	g_assert_cmpuint(port.base_lid, ==, 3);
	g_assert_cmpstr(port.link_layer, ==, "InfiniBand");
	parse_gid("fe80::2:c903:0:3", g);
	g_assert_cmpmem(&port.gid_prefix, 8, g, 8);
	g_assert_cmpmem(&port.port_guid, 8, g + 8, 8);
	g_assert_cmpuint(be32toh(port.capmask), ==, 0x00010000);
	umad_release_port(&port);
	g_assert_cmpint(umad_get_ca("nosuch", &ca), ==, -ENODEV);
	g_assert_cmpint(umad_open_port("nosuch", 1), ==, -ENODEV);
	g_assert_cmpint(umad_open_port("simA", 2), ==, -ENODEV);
}

UNIT_TEST("/sim/sysfs", test_sysfs)
{
	const char *f = main_fabric;
	void *out = g_malloc0(64 + MAD_LEN), *in = g_malloc0(64 + MAD_LEN);
	int a_agent, b_agent, fa, fb;

	assert_sys(f, "class/infiniband_mad/abi_version", "5\n");
	assert_sys(f, "class/infiniband_mad/umad0/ibdev", "simA\n");
	assert_sys(f, "class/infiniband_mad/umad0/port", "1\n");
	assert_sys(f, "class/infiniband_mad/umad2/ibdev", "simC\n");
	assert_sys(f, "class/infiniband/simA/ports/1/gids/0",
		   "fe80:0000:0000:0000:0000:0000:0000:000a\n");
	assert_sys(f, "class/infiniband/simA/ports/1/gids/1",
		   "0000:0000:0000:0000:0000:ffff:0a00:0001\n");
	assert_sys(f, "class/infiniband/simA/ports/1/gids/9",
		   "0000:0000:0000:0000:0000:ffff:0a00:0108\n");
	assert_sys(f, "class/infiniband/simA/ports/1/gids/10",
		   "0000:0000:0000:0000:0000:0000:0000:0000\n");
	assert_sys(f, "class/infiniband/simB/ports/1/gids/1",
		   "0000:0000:0000:0000:0000:ffff:0a00:0002\n");
	assert_sys(f, "class/infiniband/simA/ports/1/gid_attrs/types/1", "RoCE v2\n");
	assert_sys(f, "class/infiniband/simA/ports/1/gid_attrs/ndevs/1", "simA0\n");
	assert_sys(f, "class/infiniband/simA/ports/1/gid_attrs/types/10", "");
	assert_sys(f, "class/infiniband/simA/ports/1/link_layer", "Ethernet\n");
	assert_sys(f, "class/infiniband/simA/ports/1/lid", "0x0\n");
	assert_sys(f, "class/infiniband/simA/ports/1/state", "4: ACTIVE\n");
	assert_sys(f, "class/infiniband/simA/ports/1/phys_state", "5: LinkUp\n");
	assert_sys(f, "class/infiniband/simA/ports/1/cap_mask", "0x00010000\n");
	assert_sys(f, "class/infiniband/simA/ports/1/sm_lid", "0x0\n");
	assert_sys(f, "class/infiniband/simC/ports/1/link_layer", "InfiniBand\n");
	assert_sys(f, "class/infiniband/simC/ports/1/lid", "0x3\n");
	assert_sys(f, "class/infiniband/simC/ports/1/gids/0",
		   "fe80:0000:0000:0000:0002:c903:0000:0003\n");
	assert_sys(f, "class/infiniband/simC/ports/1/gid_attrs/types/0", "IB/RoCE v1\n");

	/* Routing agrees with the tree: each non-zero gids/K of simB is reached as index K. */
	fa = open_agent("simA", 0, &a_agent);
	fb = open_agent("simB", 1L << SEND, &b_agent);
	for (int k = 0; k < 16; k++) {
		g_autofree char *rel = g_strdup_printf("class/infiniband/simB/ports/1/gids/%d", k);
		g_autofree char *txt = read_sys(f, rel);
		uint8_t g[16];
		char gid[INET6_ADDRSTRLEN];
		int rc;

		parse_gid(g_strchomp(txt), g);
		inet_ntop(AF_INET6, g, gid, sizeof(gid));
		build_mad(out, CM, SEND, REQ, 7, (uint32_t)k);
		address_gid(out, 1, gid);
		rc = umad_send(fa, a_agent, out, MAD_LEN, 0, 0);
		if (strcmp(gid, "::") == 0) {
			g_assert_cmpint(rc, ==, -EIO);
			continue;
		}
		g_assert_cmpint(rc, ==, 0);
		g_assert_cmpint(recv_one(fb, in, 1000), ==, b_agent);
		g_assert_cmpuint(umad_get_mad_addr(in)->gid_index, ==, k);
	}
	umad_close_port(fa);
	umad_close_port(fb);
	g_free(out);
	g_free(in);
}

UNIT_TEST("/sim/register", test_register)
{
	long send_mask[2] = { 1L << SEND, 0 }, get_mask[2] = { 1L << 1, 0 };
	struct umad_reg_attr attr = { .mgmt_class = CM, .mgmt_class_version = 2 };
	uint8_t oui[3] = { 0, 0x14, 0x05 };
	int b1 = umad_open_port("simB", 1), b2 = umad_open_port("simB", 1);
	int a = umad_open_port("simA", 1), c = umad_open_port("simC", 1);
	uint32_t id = 0;
	int ag, ids[32];

	g_assert_cmpint(umad_register(b1, CM, 2, 0, send_mask), ==, 0);
	/* One agent per (port, class, version, method): the kernel says EINVAL. */
	errno = 0;
	g_assert_cmpint(umad_register(b2, CM, 2, 0, send_mask), ==, -EPERM);
	g_assert_cmpint(errno, ==, EINVAL);
	errno = 0;
	g_assert_cmpint(umad_register(b1, CM, 2, 0, send_mask), ==, -EPERM);
	g_assert_cmpint(errno, ==, EINVAL);
	g_assert_cmpint(umad_register(b2, CM, 2, 0, get_mask), >=, 0);
	g_assert_cmpint(umad_register(b2, CM, 1, 0, send_mask), >=, 0);
	g_assert_cmpint(umad_register(b2, CM, 2, 0, NULL), >=, 0);
	g_assert_cmpint(umad_register(a, CM, 2, 0, send_mask), ==, 0);
	errno = 0;
	g_assert_cmpint(umad_register(a, CM, 2, 1, NULL), ==, -EPERM); /* CM is not RMPP */
	g_assert_cmpint(errno, ==, EINVAL);
	errno = 0;
	g_assert_cmpint(umad_register(a, 0x01, 1, 0, NULL), ==, -EPERM); /* no QP0 on RoCE */
	g_assert_cmpint(errno, ==, EPROTONOSUPPORT);
	g_assert_cmpint(umad_register(c, 0x81, 1, 0, NULL), >=, 0);
	g_assert_cmpint(umad_register_oui(a, CM, 0, oui, NULL), ==, -EINVAL);
	g_assert_cmpint(umad_register_oui(a, 0x30, 1, oui, NULL), >=, 0);
	attr.method_mask[0] = 1u << SEND;
	g_assert_cmpint(umad_register2(b2, &attr, &id), ==, EINVAL);
	attr.flags = 0x100;
	g_assert_cmpint(umad_register2(b2, &attr, &id), ==, EINVAL);
	g_assert_cmpuint(attr.flags, ==, UMAD_USER_RMPP);
	/* The owner leaves: the method is free again. */
	errno = 0;
	g_assert_cmpint(umad_unregister(b1, 5), ==, -1);
	g_assert_cmpint(errno, ==, EINVAL);
	g_assert_cmpint(umad_unregister(b1, 0), ==, 0);
	attr.flags = 0;
	g_assert_cmpint(umad_register2(b2, &attr, &id), ==, 0);
	g_assert_cmpuint(id, ==, 3);
	/* 32 agents per fd. */
	for (int i = 0; i < 32; i++)
		ids[i] = umad_register(b1, CM, 2, 0, NULL);
	g_assert_cmpint(ids[31], ==, 31);
	errno = 0;
	g_assert_cmpint(umad_register(b1, CM, 2, 0, NULL), ==, -EPERM);
	g_assert_cmpint(errno, ==, ENOMEM);
	umad_close_port(b1);
	umad_close_port(b2);
	umad_close_port(a);
	umad_close_port(c);

	/* Across processes, and a holder that dies without unregistering is reclaimed. */
	{
		struct peer *p = peer_start(NULL, NULL, "hold", "simB", "1", "send", NULL);
		int fd = umad_open_port("simB", 1);

		peer_expect_ready(p);
		errno = 0;
		g_assert_cmpint(umad_register(fd, CM, 2, 0, send_mask), ==, -EPERM);
		g_assert_cmpint(errno, ==, EINVAL);
		peer_kill(p);
		ag = umad_register(fd, CM, 2, 0, send_mask);
		g_assert_cmpint(ag, ==, 0);
		umad_close_port(fd);
	}
}

/* Two processes: the receiver sees the sender's address the way the kernel reports it. */
UNIT_TEST("/sim/gid-routing", test_gid_routing)
{
	struct peer *p = peer_start(NULL, NULL, "recv", "simB", "1", "send", "300", NULL);
	void *m = g_malloc0(64 + MAD_LEN), *echo = g_malloc0(64 + MAD_LEN);
	int agent, fd = open_agent("simA", 0, &agent);
	g_autoptr(GPtrArray) lines = NULL;
	g_autoptr(GArray) mads = NULL;
	const struct mad_line *r;

	peer_expect_ready(p);
	/* 100 MAD bytes: the kernel pads to 256 with zeros. */
	build_mad(m, CM, SEND, REQ, 0x11223344deadbeefull, 42);
	memset((uint8_t *)m + 64 + 40, 0xee, 60);
	address_gid(m, 3, "::ffff:10.0.2.5");
	g_assert_cmpint(umad_send(fd, agent, m, 100, 0, 0), ==, 0);
	/* A second one with a timeout: its echo shows this agent's TID rewrite. */
	build_mad(m, CM, SEND, REQ, 0x99999999cafef00dull, 43);
	address_gid(m, 3, "::ffff:10.0.2.5");
	g_assert_cmpint(umad_send(fd, agent, m, MAD_LEN, 20, 0), ==, 0);
	g_assert_cmpint(recv_one(fd, echo, 2000), ==, agent);
	g_assert_cmpint(umad_status(echo), ==, ETIMEDOUT);
	g_assert_cmphex(mad_tid(echo) & 0xffffffff, ==, 0xcafef00d);
	g_assert_cmphex(mad_tid(echo) >> 56, ==, 0);
	g_assert_cmphex(mad_tid(echo) >> 32, !=, 0x99999999);

	lines = peer_finish(p);
	mads = mads_of(lines);
	g_assert_cmpuint(mads->len, ==, 2);
	r = &g_array_index(mads, struct mad_line, 0);
	g_assert_cmpint(r->rc, ==, 0);
	g_assert_cmpint(r->len, ==, MAD_LEN);
	g_assert_cmpuint(r->status, ==, 0);
	g_assert_cmpuint(r->qpn, ==, 1);
	g_assert_cmpuint(r->qkey, ==, 0);
	g_assert_cmpuint(r->lid, ==, 0);
	g_assert_cmpuint(r->grh, ==, 1);
	g_assert_cmpuint(r->gidx, ==, 6); /* ::ffff:10.0.2.5 is simB's entry 6 */
	g_assert_cmpuint(r->hop, ==, 64);
	g_assert_cmpstr(r->gid, ==, "::ffff:10.0.1.2"); /* simA's entry 3 */
	g_assert_cmpuint(r->attr, ==, REQ);
	g_assert_cmpuint(r->seq, ==, 42);
	g_assert_cmpint(r->last_nz, ==, 99);
	g_assert_cmphex(r->tid & 0xffffffff, ==, 0xdeadbeef);
	/* Both MADs carry the same hi_tid: the sending agent's, as the echo showed. */
	g_assert_cmphex(r->tid >> 32, ==, mad_tid(echo) >> 32);
	g_assert_cmphex(g_array_index(mads, struct mad_line, 1).tid, ==, mad_tid(echo));
	umad_close_port(fd);
	g_free(m);
	g_free(echo);
}

/*
 * A umad fd lives as the kernel's does: its agent stays registered while
 * any process holds a copy (here: a plain dup, as a service manager's fd
 * store holds one) after its opener closed its own, MADs for it wait in
 * its queue meanwhile, and a process that inherits the fd receives them
 * on it without opening or registering anything. The agent ends with
 * the last copy.
 */
UNIT_TEST("/sim/inherited-fd", test_inherited_fd)
{
	long send_mask[2] = { 1L << SEND, 0 };
	int a = umad_open_port("simB", 1), keep, b, agent;
	g_autoptr(GPtrArray) sent = NULL;
	g_autoptr(GPtrArray) lines = NULL;
	g_autoptr(GArray) mads = NULL;
	struct peer *p;

	agent = umad_register(a, CM, 2, 0, send_mask);
	g_assert_cmpint(agent, ==, 0);
	keep = dup(a);
	g_assert_cmpint(keep, >=, 0);
	umad_close_port(a);
	/* The class is still taken: the agent lives in the copy. */
	b = umad_open_port("simB", 1);
	errno = 0;
	g_assert_cmpint(umad_register(b, CM, 2, 0, send_mask), ==, -EPERM);
	g_assert_cmpint(errno, ==, EINVAL);
	umad_close_port(b);
	/* Sent while nobody reads: queued, not dropped. */
	p = peer_start(NULL, NULL, "send", "simA", "1", "1", "::ffff:10.0.2.5", "3", "0", "0",
		       "0", NULL);
	sent = peer_finish(p);
	g_assert_cmpuint(sent->len, ==, 4);
	for (guint i = 0; i < 3; i++)
		g_assert_true(g_str_has_prefix(sent->pdata[i], "SEND") &&
			      strstr(sent->pdata[i], " 0 0 ") != NULL);
	/* Another process takes the fd over and reads them, agent and all. */
	p = peer_start_with_fd(keep, "took", "3", "300", NULL);
	{
		g_autofree char *l = peer_line(p);

		/* Before an open of its own: EINVAL, and the MAD stays queued. */
		g_assert_cmpstr(l, ==, "READY -22 22");
	}
	lines = peer_finish(p);
	mads = mads_of(lines);
	g_assert_cmpuint(mads->len, ==, 3);
	for (guint i = 0; i < 3; i++) {
		g_assert_cmpint(g_array_index(mads, struct mad_line, i).rc, ==, agent);
		g_assert_cmpuint(g_array_index(mads, struct mad_line, i).seq, ==, i);
	}
	/* The last copy goes: so does the agent. */
	close(keep);
	b = umad_open_port("simB", 1);
	g_assert_cmpint(umad_register(b, CM, 2, 0, send_mask), ==, 0);
	umad_close_port(b);
}

UNIT_TEST("/sim/lid-routing", test_lid_routing)
{
	struct peer *p = peer_start(NULL, NULL, "recv", "simD", "1", "send", "300", NULL);
	void *m = g_malloc0(64 + MAD_LEN);
	int agent, fd = open_agent("simC", 0, &agent);
	g_autoptr(GPtrArray) lines = NULL;
	g_autoptr(GArray) mads = NULL;
	const struct mad_line *r;

	peer_expect_ready(p);
	build_mad(m, CM, SEND, REQ, 1, 1);
	address_lid(m, 4);
	g_assert_cmpint(umad_send(fd, agent, m, MAD_LEN, 0, 0), ==, 0);
	/* No port has LID 9: an IB MAD to it is lost, and the send still succeeds. */
	build_mad(m, CM, SEND, REQ, 2, 2);
	address_lid(m, 9);
	g_assert_cmpint(umad_send(fd, agent, m, MAD_LEN, 0, 0), ==, 0);
	/* With a GRH on IB, the DGID picks the port and its index is reported. */
	build_mad(m, CM, SEND, REQ, 3, 3);
	address_gid(m, 0, "fe80::2:c903:0:4");
	g_assert_cmpint(umad_send(fd, agent, m, MAD_LEN, 0, 0), ==, 0);
	lines = peer_finish(p);
	mads = mads_of(lines);
	g_assert_cmpuint(mads->len, ==, 2);
	r = &g_array_index(mads, struct mad_line, 0);
	g_assert_cmpuint(r->seq, ==, 1);
	g_assert_cmpuint(r->lid, ==, 3);
	g_assert_cmpuint(r->grh, ==, 0);
	g_assert_cmpuint(r->gidx, ==, 0);
	g_assert_cmpstr(r->gid, ==, "::");
	g_assert_cmpuint(r->qpn, ==, 1);
	r = &g_array_index(mads, struct mad_line, 1);
	g_assert_cmpuint(r->seq, ==, 3);
	g_assert_cmpuint(r->lid, ==, 3);
	g_assert_cmpuint(r->grh, ==, 1);
	g_assert_cmpuint(r->gidx, ==, 0);
	g_assert_cmpstr(r->gid, ==, "fe80::2:c903:0:3");
	umad_close_port(fd);
	g_free(m);
}

static void expect_send_fail(int fd, int agent, void *m, int len, int err)
{
	errno = 0;
	g_assert_cmpint(umad_send(fd, agent, m, len, 0, 0), ==, -EIO);
	g_assert_cmpint(errno, ==, err);
}

UNIT_TEST("/sim/send-errors", test_send_errors)
{
	void *m = g_malloc0(64 + MAD_LEN);
	int agent, fd = open_agent("simA", 0, &agent);
	uint64_t t0;

	build_mad(m, CM, SEND, REQ, 1, 1);
	address_lid(m, 2);
	expect_send_fail(fd, agent, m, MAD_LEN, EINVAL); /* RoCE needs a GRH */
	address_gid(m, 12, "::ffff:10.0.0.2");
	expect_send_fail(fd, agent, m, MAD_LEN, ENODATA); /* empty SGID entry */
	address_gid(m, 16, "::ffff:10.0.0.2");
	expect_send_fail(fd, agent, m, MAD_LEN, EINVAL); /* beyond the table */
	address_gid(m, 1, "::ffff:10.9.9.9");
	t0 = mono_ms();
	expect_send_fail(fd, agent, m, MAD_LEN, ETIMEDOUT); /* nobody owns it */
	g_assert_cmpuint(mono_ms() - t0, <, 100);
	address_gid(m, 1, "::ffff:10.0.0.2");
	expect_send_fail(fd, agent, m, 20, EINVAL);
	expect_send_fail(fd, agent, m, 300, EINVAL);
	expect_send_fail(fd, agent + 1, m, MAD_LEN, EIO); /* no such agent */
	expect_send_fail(fd, 40, m, MAD_LEN, EINVAL);
	g_assert_cmpint(umad_send(fd, agent, m, MAD_LEN, 0, 0), ==, 0);
	umad_close_port(fd);
	g_free(m);

	/* The kernel's neighbour resolution stalls before ETIMEDOUT: configurable. */
	{
		const char *extra[] = { "--unreachable-delay-ms=300", NULL };
		g_autofree char *fab = new_fabric(extra);
		struct peer *p = peer_start(fab, NULL, "send", "simA", "1", "1", "::ffff:10.9.9.9",
					    "1", "0", "0", "0", NULL);
		g_autoptr(GPtrArray) lines = peer_finish(p);
		g_autoptr(GArray) sends = sends_of(lines);
		const struct send_line *s = &g_array_index(sends, struct send_line, 0);

		g_assert_cmpuint(sends->len, ==, 1);
		g_assert_cmpint(s->rc, ==, -EIO);
		g_assert_cmpint(s->err, ==, ETIMEDOUT);
		g_assert_cmpuint(s->took, >=, 300);
		rm_rf(fab);
	}
}

UNIT_TEST("/sim/no-agent", test_no_agent)
{
	void *m = g_malloc0(64 + MAD_LEN);
	int agent, fa = open_agent("simA", 0, &agent), bagent, fb;
	struct peer *p;
	g_autoptr(GPtrArray) lines = NULL;
	g_autoptr(GArray) mads = NULL;

	/* No agent on simB at all: dropped, not queued for a later agent. */
	build_mad(m, CM, SEND, REQ, 1, 1);
	address_gid(m, 1, "::ffff:10.0.0.2");
	g_assert_cmpint(umad_send(fa, agent, m, MAD_LEN, 0, 0), ==, 0);
	fb = open_agent("simB", 1L << SEND, &bagent);
	g_assert_false(readable(fb, 100));
	umad_close_port(fb);

	/* A NULL-mask agent gets no unsolicited MADs. */
	p = peer_start(NULL, NULL, "recv", "simB", "1", "null", "300", NULL);
	peer_expect_ready(p);
	g_assert_cmpint(umad_send(fa, agent, m, MAD_LEN, 0, 0), ==, 0);
	lines = peer_finish(p);
	mads = mads_of(lines);
	g_assert_cmpuint(mads->len, ==, 0);

	/* A CM MAD with a method other than Send is dropped by validate_mad(). */
	fb = open_agent("simB", (1L << SEND) | (1L << 1), &bagent);
	build_mad(m, CM, 0x01, REQ, 2, 2);
	address_gid(m, 1, "::ffff:10.0.0.2");
	g_assert_cmpint(umad_send(fa, agent, m, MAD_LEN, 0, 0), ==, 0);
	g_assert_false(readable(fb, 100));
	umad_close_port(fb);

	/* A Get nobody registered for: the kernel answers GetResp, status 0x000C. */
	fb = open_agent("simB", 1L << SEND, &bagent);
	build_mad(m, CM, 0x01, 0x0001, 0x77, 3);
	address_gid(m, 2, "::ffff:10.0.2.1");
	g_assert_cmpint(umad_send(fa, agent, m, MAD_LEN, 0, 0), ==, 0);
	g_assert_cmpint(recv_one(fa, m, 1000), ==, agent);
	g_assert_cmphex(((uint8_t *)m)[64 + 3], ==, 0x81);
	g_assert_cmphex(((uint8_t *)m)[64 + 5], ==, 0x0c);
	g_assert_cmphex(mad_tid(m) & 0xffffffff, ==, 0x77);
	g_assert_cmpuint(umad_get_mad_addr(m)->gid_index, ==, 2);
	g_assert_false(readable(fb, 50));
	umad_close_port(fb);
	umad_close_port(fa);
	g_free(m);
}

UNIT_TEST("/sim/timeout-echo", test_timeout_echo)
{
	void *m = g_malloc0(64 + MAD_LEN), *e = g_malloc0(64 + MAD_LEN);
	int agent, fa = open_agent("simA", 0, &agent), bagent, fb;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN }, out;
	ib_mad_addr_t sent;
	uint64_t t0;
	int len, n = 0;

	fb = open_agent("simB", 1L << SEND, &bagent);
	g_assert_cmpint(epoll_ctl(ep, EPOLL_CTL_ADD, umad_get_fd(fa), &ev), ==, 0);
	build_mad(m, CM, SEND, REQ, 0x1234, 5);
	address_gid(m, 1, "::ffff:10.0.0.2");
	sent = *umad_get_mad_addr(m);
	t0 = mono_ms();
	g_assert_cmpint(umad_send(fa, agent, m, MAD_LEN, 150, 1), ==, 0);
	/* The same TID while the first is in flight is a duplicate: EINVAL. */
	expect_send_fail(fa, agent, m, MAD_LEN, EINVAL);
	/* timeout_ms * (retries + 1) = 300 ms: not readable before. */
	g_assert_cmpint(epoll_wait(ep, &out, 1, 200), ==, 0);
	g_assert_cmpint(epoll_wait(ep, &out, 1, 3000), ==, 1);
	g_assert_cmpuint(mono_ms() - t0, >=, 300);
	len = MAD_LEN;
	g_assert_cmpint(umad_recv(fa, e, &len, 0), ==, agent);
	g_assert_cmpint(len, ==, 24);
	g_assert_cmpint(umad_status(e), ==, ETIMEDOUT);
	g_assert_cmpuint(((struct ib_user_mad *)e)->timeout_ms, ==, 150);
	g_assert_cmpuint(((struct ib_user_mad *)e)->retries, ==, 1);
	g_assert_cmpmem(umad_get_mad_addr(e), sizeof(sent), &sent, sizeof(sent));
	g_assert_cmpmem((uint8_t *)e + 64, 8, (uint8_t *)m + 64, 8);
	g_assert_cmpmem((uint8_t *)e + 64 + 16, 8, (uint8_t *)m + 64 + 16, 8);
	g_assert_cmphex(mad_tid(e) & 0xffffffff, ==, 0x1234);
	len = MAD_LEN;
	g_assert_cmpint(umad_recv(fa, e, &len, 0), ==, -EAGAIN);
	/* The kernel retransmitted once: the receiver has two copies. */
	while (recv_one(fb, e, 100) == bagent) {
		g_assert_cmpuint(mad_seq(e), ==, 5);
		n++;
	}
	g_assert_cmpint(n, ==, 2);
	/* timeout_ms = 0: no echo. */
	g_assert_cmpint(umad_send(fa, agent, m, MAD_LEN, 0, 0), ==, 0);
	g_assert_false(readable(fa, 200));
	g_assert_cmpint(recv_one(fb, e, 100), ==, bagent);
	umad_close_port(fb);

	/* A response with the TID ends the wait: no retry, no echo. */
	fb = open_agent("simB", 1L << 1, &bagent);
	build_mad(m, CM, 0x01, 0x0001, 0x4321, 6);
	address_gid(m, 1, "::ffff:10.0.0.2");
	g_assert_cmpint(umad_send(fa, agent, m, MAD_LEN, 200, 3), ==, 0);
	g_assert_cmpint(recv_one(fb, e, 1000), ==, bagent);
	((uint8_t *)e)[64 + 3] = 0x81;
	umad_set_addr(e, 0, 1, 0, 0x80010000);
	g_assert_cmpint(umad_send(fb, bagent, e, MAD_LEN, 0, 0), ==, 0);
	g_assert_cmpint(recv_one(fa, e, 1000), ==, agent); /* routed back by hi_tid */
	g_assert_cmpint(umad_status(e), ==, 0);
	g_assert_cmphex(((uint8_t *)e)[64 + 3], ==, 0x81);
	g_assert_false(readable(fa, 900));
	g_assert_false(readable(fb, 0));
	umad_close_port(fb);
	umad_close_port(fa);
	close(ep);
	g_free(m);
	g_free(e);
}

struct late_send {
	int fd, agent;
};

static void *late_sender(void *arg)
{
	struct late_send *ls = arg;
	void *m = g_malloc0(64 + MAD_LEN);

	g_usleep(150000);
	build_mad(m, CM, SEND, REQ, 9, 9);
	address_gid(m, 1, "::ffff:10.0.0.2");
	umad_send(ls->fd, ls->agent, m, MAD_LEN, 0, 0);
	g_free(m);
	return NULL;
}

UNIT_TEST("/sim/recv-semantics", test_recv_semantics)
{
	void *m = g_malloc0(64 + MAD_LEN);
	struct late_send ls;
	int bagent, fb = open_agent("simB", 1L << SEND, &bagent);
	pthread_t t;
	uint64_t t0;
	int len;

	ls.fd = open_agent("simA", 0, &ls.agent);
	len = MAD_LEN;
	errno = 0;
	g_assert_cmpint(umad_recv(fb, m, &len, 0), ==, -EAGAIN);
	g_assert_cmpint(errno, ==, EAGAIN);
	t0 = mono_ms();
	g_assert_cmpint(umad_recv(fb, m, &len, 100), ==, -ETIMEDOUT);
	g_assert_cmpint(errno, ==, ETIMEDOUT);
	g_assert_cmpuint(mono_ms() - t0, >=, 100);
	g_assert_cmpint(umad_poll(fb, 10), ==, -ETIMEDOUT);
	/* A negative timeout waits for as long as it takes. */
	t0 = mono_ms();
	pthread_create(&t, NULL, late_sender, &ls);
	len = MAD_LEN;
	g_assert_cmpint(umad_recv(fb, m, &len, -1), ==, bagent);
	g_assert_cmpuint(mono_ms() - t0, >=, 140);
	pthread_join(t, NULL);
	/* Too small a buffer: EINVAL, and the MAD stays queued (fd still readable). */
	late_sender(&(struct late_send){ ls.fd, ls.agent });
	g_assert_cmpint(umad_poll(fb, 1000), ==, 0);
	len = 100;
	errno = 0;
	g_assert_cmpint(umad_recv(fb, m, &len, 0), ==, -EINVAL);
	g_assert_cmpint(errno, ==, EINVAL);
	g_assert_true(readable(fb, 0));
	len = MAD_LEN;
	g_assert_cmpint(umad_recv(fb, m, &len, 0), ==, bagent);
	g_assert_cmpint(len, ==, MAD_LEN);
	g_assert_cmpuint(mad_seq(m), ==, 9);
	g_assert_false(readable(fb, 0));
	umad_close_port(ls.fd);
	umad_close_port(fb);
	g_free(m);
}

UNIT_TEST("/sim/dynamic-gid", test_dynamic_gid)
{
	const char *add[] = { "add-gid", main_fabric, "simB", "1", "::ffff:10.0.3.7", NULL };
	const char *del[] = { "del-gid", main_fabric, "simB", "1", "::ffff:10.0.3.7", NULL };
	void *m = g_malloc0(64 + MAD_LEN);
	int agent, fa = open_agent("simA", 0, &agent), bagent;
	int fb = open_agent("simB", 1L << SEND, &bagent);

	build_mad(m, CM, SEND, REQ, 1, 1);
	address_gid(m, 1, "::ffff:10.0.3.7");
	expect_send_fail(fa, agent, m, MAD_LEN, ETIMEDOUT);
	run_cli(add);
	/* The first free slot, in the tree and in routing alike. */
	assert_sys(main_fabric, "class/infiniband/simB/ports/1/gids/10",
		   "0000:0000:0000:0000:0000:ffff:0a00:0307\n");
	assert_sys(main_fabric, "class/infiniband/simB/ports/1/gid_attrs/types/10", "RoCE v2\n");
	assert_sys(main_fabric, "class/infiniband/simB/ports/1/gid_attrs/ndevs/10", "simB0\n");
	g_assert_cmpint(umad_send(fa, agent, m, MAD_LEN, 0, 0), ==, 0);
	g_assert_cmpint(recv_one(fb, m, 1000), ==, bagent);
	g_assert_cmpuint(umad_get_mad_addr(m)->gid_index, ==, 10);
	run_cli(del);
	assert_sys(main_fabric, "class/infiniband/simB/ports/1/gids/10",
		   "0000:0000:0000:0000:0000:0000:0000:0000\n");
	assert_sys(main_fabric, "class/infiniband/simB/ports/1/gid_attrs/types/10", "");
	build_mad(m, CM, SEND, REQ, 1, 1);
	address_gid(m, 1, "::ffff:10.0.3.7");
	expect_send_fail(fa, agent, m, MAD_LEN, ETIMEDOUT);
	umad_close_port(fa);
	umad_close_port(fb);
	g_free(m);
}

/* ---- faults: a sender peer with UMAD_SIM_FAULTS, a clean receiver peer ---- */

struct fault_run {
	GArray *sends;
	GArray *mads;
};

static void fault_run_clear(struct fault_run *r)
{
	g_array_unref(r->sends);
	g_array_unref(r->mads);
}

static struct fault_run run_with_faults(const char *spec, int count)
{
	g_autofree char *env0 = g_strdup_printf("UMAD_SIM_FAULTS=%s", spec);
	const char *env[] = { env0, NULL };
	g_autofree char *n = g_strdup_printf("%d", count);
	struct peer *rx = peer_start(NULL, NULL, "recv", "simB", "1", "send", "400", NULL);
	struct peer *tx;
	g_autoptr(GPtrArray) tl = NULL, rl = NULL;
	struct fault_run r;

	peer_expect_ready(rx);
	tx = peer_start(NULL, env, "send", "simA", "1", "1", "::ffff:10.0.0.2", n, "0", "0", "0",
			NULL);
	tl = peer_finish(tx);
	rl = peer_finish(rx);
	r.sends = sends_of(tl);
	r.mads = mads_of(rl);
	g_assert_cmpuint(r.sends->len, ==, (guint)count);
	return r;
}

static GString *seq_pattern(GArray *mads)
{
	GString *s = g_string_new(NULL);

	for (guint i = 0; i < mads->len; i++)
		g_string_append_printf(s, "%u,", g_array_index(mads, struct mad_line, i).seq);
	return s;
}

UNIT_TEST("/sim/faults/drop", test_fault_drop)
{
	struct fault_run a = run_with_faults("seed=42,drop=0.3", 200);
	struct fault_run b = run_with_faults("seed=42,drop=0.3", 200);
	struct fault_run c = run_with_faults("seed=43,drop=0.3", 200);
	g_autoptr(GString) pa = seq_pattern(a.mads), pb = seq_pattern(b.mads),
			   pc = seq_pattern(c.mads);

	/* Every send reports success; some MADs never arrive; in order otherwise. */
	for (guint i = 0; i < a.sends->len; i++)
		g_assert_cmpint(g_array_index(a.sends, struct send_line, i).rc, ==, 0);
	g_assert_cmpuint(a.mads->len, >, 100);
	g_assert_cmpuint(a.mads->len, <, 170);
	for (guint i = 1; i < a.mads->len; i++)
		g_assert_cmpuint(g_array_index(a.mads, struct mad_line, i - 1).seq, <,
				 g_array_index(a.mads, struct mad_line, i).seq);
	g_assert_cmpstr(pa->str, ==, pb->str);
	g_assert_cmpstr(pa->str, !=, pc->str);
	fault_run_clear(&a);
	fault_run_clear(&b);
	fault_run_clear(&c);
}

UNIT_TEST("/sim/faults/dup", test_fault_dup)
{
	struct fault_run a = run_with_faults("seed=7,dup=0.2", 200);
	struct fault_run b = run_with_faults("seed=7,dup=0.2", 200);
	g_autoptr(GString) pa = seq_pattern(a.mads), pb = seq_pattern(b.mads);
	guint dups = 0;

	for (guint i = 1; i < a.mads->len; i++) {
		unsigned prev = g_array_index(a.mads, struct mad_line, i - 1).seq;
		unsigned cur = g_array_index(a.mads, struct mad_line, i).seq;

		g_assert_cmpuint(cur, >=, prev);
		dups += cur == prev;
	}
	g_assert_cmpuint(a.mads->len, ==, 200 + dups);
	g_assert_cmpuint(dups, >, 20);
	g_assert_cmpuint(dups, <, 65);
	g_assert_cmpstr(pa->str, ==, pb->str);
	fault_run_clear(&a);
	fault_run_clear(&b);
}

UNIT_TEST("/sim/faults/delay", test_fault_delay)
{
	struct fault_run a = run_with_faults("seed=1,delay_ms=100", 20);

	g_assert_cmpuint(a.mads->len, ==, 20);
	for (guint i = 0; i < a.mads->len; i++) {
		const struct mad_line *m = &g_array_index(a.mads, struct mad_line, i);
		const struct send_line *s = &g_array_index(a.sends, struct send_line, m->seq);

		g_assert_cmpuint(m->seq, ==, i);
		g_assert_cmpuint(m->t, >=, s->t + 100);
	}
	fault_run_clear(&a);
}

UNIT_TEST("/sim/faults/reorder", test_fault_reorder)
{
	struct fault_run a = run_with_faults("seed=5,reorder=0.2", 200);
	struct fault_run b = run_with_faults("seed=5,reorder=0.2", 200);
	g_autoptr(GString) pa = seq_pattern(a.mads), pb = seq_pattern(b.mads);
	g_autofree bool *seen = g_new0(bool, 200);
	guint swaps = 0;

	g_assert_cmpuint(a.mads->len, ==, 200);
	for (guint i = 0; i < a.mads->len; i++) {
		unsigned s = g_array_index(a.mads, struct mad_line, i).seq;

		g_assert_cmpuint(s, <, 200);
		g_assert_false(seen[s]);
		seen[s] = true;
		if (i && s < g_array_index(a.mads, struct mad_line, i - 1).seq)
			swaps++;
	}
	g_assert_cmpuint(swaps, >, 10);
	g_assert_cmpstr(pa->str, ==, pb->str);
	fault_run_clear(&a);
	fault_run_clear(&b);
}

UNIT_TEST("/sim/faults/send-errno", test_fault_send_errno)
{
	struct fault_run a = run_with_faults("seed=9,send_errno=ENOMEM:0.25", 200);
	struct fault_run b = run_with_faults("seed=9,send_errno=ENOMEM:0.25", 200);
	g_autoptr(GString) fa = g_string_new(NULL), fb = g_string_new(NULL);
	guint ok = 0, m = 0;

	for (guint i = 0; i < 200; i++) {
		const struct send_line *x = &g_array_index(a.sends, struct send_line, i);
		const struct send_line *y = &g_array_index(b.sends, struct send_line, i);

		if (x->rc) {
			g_assert_cmpint(x->rc, ==, -EIO);
			g_assert_cmpint(x->err, ==, ENOMEM);
			g_string_append_printf(fa, "%d,", x->seq);
		} else {
			/* Exactly the MADs whose send succeeded arrive. */
			g_assert_cmpuint(m, <, a.mads->len);
			g_assert_cmpuint(g_array_index(a.mads, struct mad_line, m).seq, ==, i);
			m++;
			ok++;
		}
		if (y->rc)
			g_string_append_printf(fb, "%d,", y->seq);
	}
	g_assert_cmpuint(m, ==, a.mads->len);
	g_assert_cmpuint(ok, >, 120);
	g_assert_cmpuint(ok, <, 180);
	g_assert_cmpstr(fa->str, ==, fb->str);
	fault_run_clear(&a);
	fault_run_clear(&b);
}

UNIT_TEST("/sim/faults/remove-port", test_fault_remove_port)
{
	g_autofree char *fab = new_fabric(NULL);
	const char *rm[] = { "remove-port", fab, "simB", "1", NULL };
	const char *re[] = { "restore-port", fab, "simB", "1", NULL };
	struct peer *p = peer_start(fab, NULL, "removal", "simB", "1", NULL);
	g_autoptr(GPtrArray) lines = NULL, tl = NULL, rl = NULL;
	g_autoptr(GArray) sends = NULL, mads = NULL;
	struct peer *rx, *tx;

	peer_expect_ready(p);
	run_cli(rm);
	lines = peer_finish(p);
	/* Reads fail with EIO, the fd stays readable, sends fail, a new open fails. */
	g_assert_cmpstr(lines->pdata[0], ==, "RECV -5 5");
	g_assert_cmpstr(lines->pdata[1], ==, "SENDRC -5 5");
	g_assert_cmpstr(lines->pdata[2], ==, "STILL 1");
	g_assert_cmpstr(lines->pdata[3], ==, "REOPEN -5");
	assert_sys(fab, "class/infiniband/simB/ports/1/state", "1: DOWN\n");
	assert_sys(fab, "class/infiniband/simB/ports/1/gids/1",
		   "0000:0000:0000:0000:0000:0000:0000:0000\n");
	/* Its GIDs are gone from routing too. */
	tx = peer_start(fab, NULL, "send", "simA", "1", "1", "::ffff:10.0.0.2", "1", "0", "0",
			"0", NULL);
	tl = peer_finish(tx);
	sends = sends_of(tl);
	g_assert_cmpint(g_array_index(sends, struct send_line, 0).err, ==, ETIMEDOUT);
	g_array_unref(g_steal_pointer(&sends));
	g_ptr_array_unref(g_steal_pointer(&tl));

	run_cli(re);
	assert_sys(fab, "class/infiniband/simB/ports/1/state", "4: ACTIVE\n");
	rx = peer_start(fab, NULL, "recv", "simB", "1", "send", "300", NULL);
	peer_expect_ready(rx);
	tx = peer_start(fab, NULL, "send", "simA", "1", "1", "::ffff:10.0.0.2", "3", "0", "0", "0",
			NULL);
	tl = peer_finish(tx);
	rl = peer_finish(rx);
	mads = mads_of(rl);
	g_assert_cmpuint(mads->len, ==, 3);
	rm_rf(fab);
}

UNIT_TEST("/sim/plain-pingpong", test_plain_pingpong)
{
	const char *prog = getenv("UMAD_PINGPONG_PLAIN");
	const char *srv[] = { prog, "server", "simB", "1", "200", NULL };
	const char *cli[] = { prog, "client", "simA", "1", "1", "::ffff:10.0.0.2", "200", NULL };
	g_autoptr(GError) err = NULL;
	g_autofree char *out = NULL;
	GPid spid;
	int status = -1, sstatus = -1;

	g_assert_nonnull(prog);
	g_assert_true(g_spawn_async(NULL, (char **)srv, NULL,
				    G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
				    NULL, &spid, &err));
	g_assert_true(g_spawn_sync(NULL, (char **)cli, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
				   NULL, &status, &err));
	g_assert_no_error(err);
	g_assert_true(g_spawn_check_wait_status(status, NULL));
	g_assert_nonnull(strstr(out, "client: 200 round trips"));
	g_assert_cmpint(waitpid(spid, &sstatus, 0), ==, spid);
	g_assert_true(WIFEXITED(sstatus));
	g_assert_cmpint(WEXITSTATUS(sstatus), ==, 0);
}

int main(int argc, char **argv)
{
	int rc;

	self_exe = argv[0];
	if (argc > 1 && strcmp(argv[1], "peer") == 0)
		return peer_main(argc - 2, argv + 2);
	g_test_init(&argc, &argv, NULL);
	unit_test_add_registered();
	if (!getenv("UMAD_SIM_CLI")) {
		g_printerr("run through meson test (needs UMAD_SIM_CLI and LD_PRELOAD)\n");
		return 77;
	}
	self_exe = g_canonicalize_filename(argv[0], NULL);
	/* The fabric must be chosen before the first umad call of this process. */
	main_fabric = new_fabric(NULL);
	g_setenv("UMAD_SIM_FABRIC", main_fabric, TRUE);
	g_unsetenv("UMAD_SIM_FAULTS");
	rc = g_test_run();
	rm_rf(main_fabric);
	return rc;
}
