/* SPDX-License-Identifier: MIT */
/*
 * Owns the umad-sim CLI: creates a fabric directory, shows it, and changes it
 * at run time (GIDs come and go, ports go away and come back). Every change
 * goes through sim_fabric_commit(), so config, sysfs tree and the processes'
 * routing caches move together.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "fabric.h"
#include "faults.h"

static int usage(void)
{
	fputs("usage:\n"
	      "  umad-sim create DIR [--preset two-hosts|ib] [--roce-ca NAME=GID,GID...]\n"
	      "                      [--ib-ca NAME=LID] [--gid-table-len N] [--faults SPEC]\n"
	      "                      [--unreachable-delay-ms MS] [--force]\n"
	      "  umad-sim show DIR\n"
	      "  umad-sim add-gid DIR CA PORT GID [TYPE NDEV]\n"
	      "  umad-sim del-gid DIR CA PORT GID\n"
	      "  umad-sim remove-port DIR CA PORT\n"
	      "  umad-sim restore-port DIR CA PORT\n"
	      "  umad-sim stall DIR CA PORT MS                 # the next receive waits MS\n"
	      "  umad-sim stall-send DIR CA PORT MS            # the next write waits MS\n"
	      "  umad-sim fail-register DIR CA PORT ERRNO|0    # send-only agents fail\n",
	      stderr);
	return 2;
}

static int fail(const char *what, int rc, const GError *err)
{
	fprintf(stderr, "umad-sim: %s: %s\n", what, err ? err->message : g_strerror(-rc));
	return 1;
}

static void show_agents(const char *dir)
{
	g_autofree char *adir = g_build_filename(dir, "agents", NULL);
	g_autoptr(GDir) d = g_dir_open(adir, 0, NULL);
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	const char *n;

	printf("agents (%s):\n", adir);
	while (d && (n = g_dir_read_name(d)))
		if (*n != '.')
			g_ptr_array_add(names, g_strdup(n));
	g_ptr_array_sort(names, (GCompareFunc)(void (*)(void))g_strcmp0);
	for (guint i = 0; i < names->len; i++) {
		const char *name = *(char **)&names->pdata[i];
		g_autofree char *path = g_build_filename(adir, name, NULL);
		struct sim_reg r;

		if (sim_reg_read(path, &r) < 0)
			continue;
		printf("  %-28s pid %d agent %u hi_tid %u %s\n", name, r.pid, r.agent, r.hi_tid,
		       sim_reg_is_stale(dir, &r) ? "stale" : "live");
	}
}

static void show(const char *dir, const struct sim_fabric *f)
{
	printf("fabric %s\n", dir);
	printf("  config   %s/fabric.conf\n", dir);
	printf("  sysfs    %s/sys (run programs with SYSFS_PATH=%s/sys)\n", dir, dir);
	printf("  fifos    %s/sock\n", dir);
	printf("  faults   %s\n", f->faults ? f->faults : "(none; UMAD_SIM_FAULTS overrides)");
	printf("  unreachable_delay_ms %u\n", f->unreachable_delay_ms);
	for (unsigned i = 0; i < f->nca; i++) {
		const struct sim_ca *ca = &f->cas[i];

		printf("ca %s node_guid 0x%016" G_GINT64_MODIFIER "x\n", ca->name, ca->node_guid);
		for (unsigned p = 0; p < ca->nports; p++) {
			const struct sim_port *port = &ca->ports[p];

			printf("  port %d umad%d %s lid 0x%x %s\n", port->num, port->umad_id,
			       port->link == SIM_LINK_ETH ? "Ethernet" : "InfiniBand", port->lid,
			       port->present ? "ACTIVE" : "REMOVED");
			for (unsigned k = 0; k < port->gid_len; k++) {
				const struct sim_gid_entry *e = &port->gids[k];
				char gid[46];

				if (sim_gid_is_zero(e->gid))
					continue;
				sim_gid_format(e->gid, gid);
				printf("    gid[%u] %-22s %-10s %s\n", k, gid, e->type, e->ndev);
			}
		}
	}
	show_agents(dir);
}

static int cmd_create(int argc, char **argv)
{
	g_auto(GStrv) presets = NULL, roce = NULL, ib = NULL;
	g_autofree char *faults = NULL;
	gint gid_len = SIM_DEFAULT_GID_LEN, delay = 0;
	gboolean force = FALSE;
	GOptionEntry entries[] = {
		{ "preset", 0, 0, G_OPTION_ARG_STRING_ARRAY, &presets, "Add a preset", "NAME" },
		{ "roce-ca", 0, 0, G_OPTION_ARG_STRING_ARRAY, &roce, "Add a RoCE CA", "NAME=GID,..." },
		{ "ib-ca", 0, 0, G_OPTION_ARG_STRING_ARRAY, &ib, "Add an IB CA", "NAME=LID" },
		{ "gid-table-len", 0, 0, G_OPTION_ARG_INT, &gid_len, "GID table size", "N" },
		{ "faults", 0, 0, G_OPTION_ARG_STRING, &faults, "Default fault spec", "SPEC" },
		{ "unreachable-delay-ms", 0, 0, G_OPTION_ARG_INT, &delay,
		  "Stall of a send to an unknown GID", "MS" },
		{ "force", 0, 0, G_OPTION_ARG_NONE, &force, "Overwrite an existing fabric", NULL },
		{ NULL },
	};
	g_autoptr(GOptionContext) ctx = g_option_context_new("DIR");
	g_autoptr(GError) err = NULL;
	g_autoptr(sim_fabric) f = sim_fabric_new();
	g_autofree char *conf = NULL;
	const char *dir;
	struct sim_faults check;
	int rc, lock;

	g_option_context_add_main_entries(ctx, entries, NULL);
	if (!g_option_context_parse(ctx, &argc, &argv, &err))
		return fail("create", -EINVAL, err);
	if (argc != 2)
		return usage();
	dir = argv[1];
	if (faults && sim_faults_parse(faults, &check, &err) < 0)
		return fail("--faults", -EINVAL, err);
	f->faults = g_steal_pointer(&faults);
	f->unreachable_delay_ms = (unsigned)MAX(delay, 0);
	for (char **p = presets; p && *p; p++) {
		rc = sim_fabric_add_preset(f, *p);
		if (rc < 0)
			return fail(*p, rc, NULL);
	}
	for (char **p = roce; p && *p; p++) {
		g_auto(GStrv) kv = g_strsplit(*p, "=", 2);
		g_auto(GStrv) gids = g_strsplit(kv[1] ? kv[1] : "", ",", -1);

		rc = sim_fabric_add_roce_ca(f, kv[0], (const char *const *)gids,
					    kv[1] && *kv[1] ? g_strv_length(gids) : 0,
					    (unsigned)gid_len);
		if (rc < 0)
			return fail(*p, rc, NULL);
	}
	for (char **p = ib; p && *p; p++) {
		g_auto(GStrv) kv = g_strsplit(*p, "=", 2);
		guint64 lid = 0;

		if (!kv[1] || !g_ascii_string_to_unsigned(kv[1], 10, 1, 0xbfff, &lid, NULL))
			return fail(*p, -EINVAL, NULL);
		rc = sim_fabric_add_ib_ca(f, kv[0], (uint16_t)lid, (unsigned)gid_len);
		if (rc < 0)
			return fail(*p, rc, NULL);
	}
	if (f->nca == 0)
		return fail("create", -EINVAL, NULL);
	if (g_mkdir_with_parents(dir, 0755) < 0)
		return fail(dir, -errno, NULL);
	conf = g_build_filename(dir, "fabric.conf", NULL);
	if (!force && g_file_test(conf, G_FILE_TEST_EXISTS)) {
		fprintf(stderr, "umad-sim: %s exists (use --force)\n", conf);
		return 1;
	}
	lock = sim_fabric_lock(dir);
	if (lock < 0)
		return fail(dir, lock, NULL);
	rc = sim_fabric_commit(dir, f, &err);
	close(lock);
	if (rc < 0)
		return fail("create", rc, err);
	show(dir, f);
	return 0;
}

/* Loads the fabric under its lock, lets @edit change it, then commits. */
static int edit(const char *dir, int (*fn)(struct sim_fabric *, char **, void *), char **args,
		void *data)
{
	g_autoptr(sim_fabric) f = NULL;
	g_autoptr(GError) err = NULL;
	int rc, lock = sim_fabric_lock(dir);

	if (lock < 0)
		return fail(dir, lock, NULL);
	rc = sim_fabric_load(dir, &f, &err);
	if (rc == 0)
		rc = fn(f, args, data);
	if (rc == 0)
		rc = sim_fabric_commit(dir, f, &err);
	close(lock);
	if (rc < 0)
		return fail(args[0], rc, err);
	return 0;
}

static struct sim_port *arg_port(struct sim_fabric *f, char **args)
{
	guint64 num = 0;

	if (!g_ascii_string_to_unsigned(args[1], 10, 1, 9, &num, NULL))
		return NULL;
	return sim_fabric_find_port(f, args[0], (int)num);
}

static int do_add_gid(struct sim_fabric *f, char **args, void *data)
{
	struct sim_port *p = arg_port(f, args);
	uint8_t gid[16];
	const char *ndev = NULL;

	(void)data;
	if (!p)
		return -ENODEV;
	if (sim_gid_parse(args[2], gid) < 0 || sim_gid_is_zero(gid))
		return -EINVAL;
	if (sim_port_find_gid(p, gid) >= 0)
		return -EEXIST;
	/* The kernel takes the first free slot. */
	for (unsigned k = 0; k < p->gid_len; k++) {
		struct sim_gid_entry *e = &p->gids[k];

		if (!sim_gid_is_zero(e->gid))
			continue;
		memcpy(e->gid, gid, 16);
		g_strlcpy(e->type,
			  args[3] ? args[3]
				  : (p->link == SIM_LINK_ETH ? SIM_GID_TYPE_V2 : SIM_GID_TYPE_V1),
			  sizeof(e->type));
		if (args[3] && args[4])
			ndev = args[4];
		for (unsigned j = 0; !ndev && j < p->gid_len; j++)
			if (*p->gids[j].ndev)
				ndev = p->gids[j].ndev;
		g_strlcpy(e->ndev, ndev ? ndev : "", sizeof(e->ndev));
		printf("%s %d gid[%u] %s\n", p->ca_name, p->num, k, args[2]);
		return 0;
	}
	return -ENOSPC;
}

static int do_del_gid(struct sim_fabric *f, char **args, void *data)
{
	struct sim_port *p = arg_port(f, args);
	uint8_t gid[16];
	int k;

	(void)data;
	if (!p)
		return -ENODEV;
	if (sim_gid_parse(args[2], gid) < 0)
		return -EINVAL;
	k = sim_port_find_gid(p, gid);
	if (k < 0)
		return -ENOENT;
	memset(&p->gids[k], 0, sizeof(p->gids[k]));
	printf("%s %d gid[%d] deleted\n", p->ca_name, p->num, k);
	return 0;
}

/* A kernel that holds a reader up (@data NULL: the port's next
 * umad_recv() sleeps) or a writer (non-NULL: the port's next write, by
 * whichever process and fd, sleeps). */
static int do_stall(struct sim_fabric *f, char **args, void *data)
{
	struct sim_port *p = arg_port(f, args);

	if (!p)
		return -ENODEV;
	if (data) {
		p->send_stall_ms = (uint32_t)atoi(args[2]);
		p->send_stall_serial++;
	} else {
		p->stall_ms = (uint32_t)atoi(args[2]);
		p->stall_serial++;
	}
	return 0;
}

/* Registrations of send-only agents (no method: a daemon's sender
 * processes) on the port fail with ERRNO (a name or a number; 0 stops it),
 * as on a kernel that is out of memory. */
static int do_fail_register(struct sim_fabric *f, char **args, void *data)
{
	struct sim_port *p = arg_port(f, args);
	int e = strcmp(args[2], "0") == 0 ? 0 : sim_errno_from_name(args[2]);

	(void)data;
	if (!p)
		return -ENODEV;
	if (e < 0)
		return -EINVAL;
	p->fail_register = e;
	return 0;
}

static int do_set_present(struct sim_fabric *f, char **args, void *data)
{
	struct sim_port *p = arg_port(f, args);
	bool present = data != NULL;

	if (!p)
		return -ENODEV;
	if (p->present == present)
		return 0;
	p->present = present;
	if (!present)
		p->epoch++; /* fds opened before stay dead even after a restore */
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd;

	/* Writing into a FIFO whose reader just died must not kill the CLI. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 3)
		return usage();
	cmd = argv[1];
	if (strcmp(cmd, "create") == 0)
		return cmd_create(argc - 1, argv + 1);
	if (strcmp(cmd, "show") == 0) {
		g_autoptr(sim_fabric) f = NULL;
		g_autoptr(GError) err = NULL;
		int rc = sim_fabric_load(argv[2], &f, &err);

		if (rc < 0)
			return fail(argv[2], rc, err);
		show(argv[2], f);
		return 0;
	}
	if (strcmp(cmd, "add-gid") == 0 && (argc == 6 || argc == 8))
		return edit(argv[2], do_add_gid, argv + 3, NULL);
	if (strcmp(cmd, "del-gid") == 0 && argc == 6)
		return edit(argv[2], do_del_gid, argv + 3, NULL);
	if (strcmp(cmd, "stall") == 0 && argc == 6) {
		int rc = edit(argv[2], do_stall, argv + 3, NULL);

		/* A wake-up makes an epoll loop call umad_recv() at once. */
		if (rc == 0)
			(void)sim_wake_port(argv[2], argv[3], atoi(argv[4]));
		return rc;
	}
	if (strcmp(cmd, "fail-register") == 0 && argc == 6)
		return edit(argv[2], do_fail_register, argv + 3, NULL);
	if (strcmp(cmd, "stall-send") == 0 && argc == 6)
		return edit(argv[2], do_stall, argv + 3, (void *)1);
	if (strcmp(cmd, "restore-port") == 0 && argc == 5)
		return edit(argv[2], do_set_present, argv + 3, (void *)1);
	if (strcmp(cmd, "remove-port") == 0 && argc == 5) {
		int rc = edit(argv[2], do_set_present, argv + 3, NULL);

		if (rc == 0) {
			/* Wake every reader of the port so that an epoll loop notices. */
			int n = sim_wake_port(argv[2], argv[3], atoi(argv[4]));

			printf("%s %s removed, %d fd(s) woken\n", argv[3], argv[4], MAX(n, 0));
		}
		return rc;
	}
	return usage();
}
