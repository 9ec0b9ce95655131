/* SPDX-License-Identifier: MIT */
/*
 * rdmacm-mux: main. Owns the command line and nothing else: the options,
 * their checks and help, and the log level they ask for. What they mean
 * is a DaemonConfig, whose defaults are daemon_config_init()'s (the
 * relay's, relay_config_init()'s): the help shows those, so that a
 * default is written in one place. The daemon object (daemon.h) does the
 * rest.
 *
 * Exit status: 0 after a clean shutdown; 1 for a failure at start or at run
 * time; 2 for a bad command line; 3 when the CM class is already owned on
 * the port (ib_cm is loaded); 4 when the device or port does not exist or
 * went away.
 */
#include <errno.h>
#include <glib.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "control.h"
#include "daemon.h"
#include "log.h"
#include "util.h"

/*
 * A numeric option: the DaemonConfig field it sets (a uint32_t, or the
 * int port, which its unsigned type may read and write), its range, and
 * its help, which ends with the default the configuration holds:
 * " (default N)", " (UNIT, default N)", and what 0 means: "; 0: ZERO",
 * or ": ZERO" when 0 is the default.
 */
typedef struct IntOption {
	const char *name;
	char short_name;
	size_t offset; /* in DaemonConfig */
	uint32_t min, max;
	const char *help;
	const char *unit; /* or NULL */
	const char *zero; /* or NULL */
	const char *arg;  /* NULL: "MS" with the unit ms, else "N" */
	const char *alias_of; /* a hidden second name of that option */
} IntOption;

#define CFG(field) offsetof(DaemonConfig, field)
#define DAY_MS (24 * 3600 * 1000)
#define TIMER(t) CFG(relay.timeouts_ms[SESSION_TIMER_##t])

static const IntOption int_options[] = {
	{ "port", 'p', CFG(port), 1, 255, "Port number", .arg = "PORT" },
	{ "max-trace-readers", 0, CFG(max_trace_readers), 0, CONTROL_MAX_CONNECTIONS,
	  "Most 'rdmacm-muxctl trace' readers at once" },
	{ "max-clients", 0, CFG(relay.max_clients), 1, 1 << 20, "Most clients at once" },
	{ "max-clients-per-uid", 0, CFG(relay.max_clients_per_uid), 0, 1 << 20,
	  "Most clients of one user at once", .zero = "half of --max-clients" },
	{ "register-timeout", 0, CFG(relay.register_timeout_ms), 0, DAY_MS,
	  "Close a connection that registers no GID within this time", "ms", "never" },
	{ "max-gids", 0, CFG(relay.max_gids), 1, 4096, "Most GIDs per client" },
	{ "max-sessions", 0, CFG(relay.max_sessions), 1, 1 << 24,
	  "Most CM sessions a client starts or has established" },
	{ "max-half-open", 0, CFG(relay.max_half_open), 1, 1 << 24,
	  "Most peer-started sessions per client not yet established" },
	{ "max-half-open-per-peer", 0, CFG(relay.max_half_open_per_peer), 1, 1 << 24,
	  "Most of those one peer GID may hold" },
	{ "max-total-sessions", 0, CFG(relay.max_total_sessions), 1, 1 << 26,
	  "Most CM sessions of all clients together" },
	{ "max-total-half-open", 0, CFG(relay.max_total_half_open), 1, 1 << 26,
	  "Most peer-started half-open sessions of all clients" },
	{ "max-queue", 0, CFG(relay.max_queued), 1, 1 << 20,
	  "Inbound MADs queued per client before drops" },
	{ "senders", 0, CFG(relay.senders), 1, 64,
	  "Processes for sends that may wait for address resolution" },
	/* its name before the senders were processes */
	{ "send-threads", 0, CFG(relay.senders), 1, 64, .alias_of = "senders" },
	{ "max-slow-sends", 0, CFG(relay.max_slow_sends), 1, 64,
	  "Such sends one client may have at once" },
	{ "unreachable-cache", 0, CFG(relay.send_fail_ms), 1, 60 * 1000,
	  "A destination that did not answer fails at once for this long", "ms" },
	{ "send-timeout", 0, CFG(relay.send_timeout_ms), 100, 600 * 1000,
	  "A sender's write that takes longer is stopped, its MAD answers ETIMEDOUT", "ms" },
	{ "handshake-timeout", 0, TIMER(HANDSHAKE), 1, DAY_MS,
	  "Idle time before a half-open handshake is forgotten", "ms" },
	{ "closing-timeout", 0, TIMER(CLOSING), 1, DAY_MS,
	  "Time a session is kept after DREQ/DREP/REJ", "ms" },
	{ "sidr-timeout", 0, TIMER(SIDR), 1, DAY_MS, "Lifetime of a SIDR query", "ms" },
	{ "wait-for-device", 0, CFG(wait_for_device_s), 0, 3600,
	  "When DEV port PORT does not exist yet, wait this long for it", "s", "exit 4 at once",
	  "SECONDS" },
	{ "max-vms", 0, CFG(max_vms), 0, 1024, "Most VMs at once" },
	{ "max-vm-clients", 0, CFG(max_vm_clients), 1, 64,
	  "Most connections on one VM's socket at once" },
};
#define N_INT_OPTIONS G_N_ELEMENTS(int_options)

/* What the command line says that is not a DaemonConfig field as it is
 * (its strings are parsed into the config's fields, and owned here). */
typedef struct Options {
	char **allow_uids;
	char **allow_gids;
	char *gid_policy;
	gboolean allow_wide_prefix;
	gboolean require_port_gid;
	gboolean no_fd_store;
	gboolean trace;
	char *log_level;
	gboolean version;
	gint ints[N_INT_OPTIONS];
	GPtrArray *help; /* the generated help texts */
	GArray *uids, *gids;
	char *exe;   /* this binary's path, for a re-execution */
	char **argv; /* the command line as given */
} Options;

static void options_clear(Options *o, DaemonConfig *cfg)
{
	/* The strings the parser put into @cfg. */
	const char **strings[] = { &cfg->device, &cfg->socket_prefix, &cfg->socket_path,
				   &cfg->group, &cfg->mode, &cfg->control_group,
				   &cfg->control_mode, &cfg->vm_dir, &cfg->vms_dir,
				   &cfg->trace_pcap };

	for (size_t i = 0; i < G_N_ELEMENTS(strings); i++)
		g_free((char *)*strings[i]);
	g_free(o->gid_policy);
	g_free(o->log_level);
	g_free(o->exe);
	g_clear_pointer(&o->allow_uids, g_strfreev);
	g_clear_pointer(&o->allow_gids, g_strfreev);
	g_clear_pointer(&o->argv, g_strfreev);
	g_clear_pointer(&o->help, g_ptr_array_unref);
	g_clear_pointer(&o->uids, g_array_unref);
	g_clear_pointer(&o->gids, g_array_unref);
}

G_STATIC_ASSERT(sizeof(int) == sizeof(uint32_t));

/* The field of @cfg that @opt sets. */
static uint32_t *int_option_field(DaemonConfig *cfg, const IntOption *opt)
{
	return (uint32_t *)(void *)((char *)cfg + opt->offset);
}

/* @opt's help, with @def as its default. */
static char *int_option_help(const IntOption *opt, uint32_t def)
{
	GString *s = g_string_new(opt->help);

	g_string_append(s, " (");
	if (opt->unit)
		g_string_append_printf(s, "%s, ", opt->unit);
	g_string_append_printf(s, "default %u", def);
	if (opt->zero) {
		g_string_append(s, def == 0 ? ": " : "; 0: ");
		g_string_append(s, opt->zero);
	}
	g_string_append_c(s, ')');
	return g_string_free(s, FALSE);
}

/* The index of the numeric option @name, one of int_options[]'s. */
static size_t int_option_index(const char *name)
{
	size_t i = 0;

	while (strcmp(int_options[i].name, name) != 0)
		i++;
	return i;
}

/* Fill in @e, the place of a numeric option: its slot, set to the default
 * in @cfg, and its help, which says it. */
static void int_option_entry(Options *o, const DaemonConfig *cfg, GOptionEntry *e)
{
	size_t i = int_option_index(e->long_name);
	const IntOption *opt = &int_options[i];
	uint32_t def = *int_option_field((DaemonConfig *)cfg, opt);

	o->ints[i] = (gint)def;
	e->short_name = opt->short_name;
	e->arg_description = opt->arg ? opt->arg : opt->unit && !strcmp(opt->unit, "ms") ? "MS" : "N";
	if (opt->alias_of) {
		e->flags = G_OPTION_FLAG_HIDDEN;
		e->arg_data = &o->ints[int_option_index(opt->alias_of)];
		return;
	}
	e->arg_data = &o->ints[i];
	e->description = int_option_help(opt, def);
	g_ptr_array_add(o->help, (gpointer)e->description);
}

/* The numeric options into @cfg, each in its range. */
static int int_options_store(const Options *o, DaemonConfig *cfg)
{
	for (size_t i = 0; i < N_INT_OPTIONS; i++) {
		const IntOption *opt = &int_options[i];
		gint v = o->ints[i];

		if (opt->alias_of)
			continue;
		if (v < 0 || (uint32_t)v < opt->min || (uint32_t)v > opt->max) {
			fprintf(stderr, "rdmacm-mux: --%s must be %u..%u, not %d\n", opt->name,
				opt->min, opt->max, v);
			return -EINVAL;
		}
		*int_option_field(cfg, opt) = (uint32_t)v;
	}
	return 0;
}

static int parse_id_list(char **list, GArray **ret, const char *what)
{
	g_autoptr(GArray) a = g_array_new(FALSE, FALSE, sizeof(guint));

	for (char **p = list; p && *p; p++) {
		char *end;
		unsigned long v = strtoul(*p, &end, 10);

		if (!**p || *end || v > UINT32_MAX) {
			fprintf(stderr, "rdmacm-mux: bad %s '%s'\n", what, *p);
			return -EINVAL;
		}
		guint id = (guint)v;
		g_array_append_val(a, id);
	}
	*ret = g_steal_pointer(&a);
	return 0;
}

/* What the rest says, checked, into @cfg (pointing into @o). */
static int options_store(Options *o, DaemonConfig *cfg)
{
	/* The VMs' state keeps the paths, and a successor refuses a relative
	 * one: it may run elsewhere (systemd starts us in /). */
	const char **dirs[] = { &cfg->vm_dir, &cfg->vms_dir };

	if (!cfg->device || !*cfg->device) {
		fprintf(stderr, "rdmacm-mux: missing RDMA device name (-d DEV)\n"
				"Try 'rdmacm-mux --help'.\n");
		return -EINVAL;
	}
	if (int_options_store(o, cfg) < 0)
		return -EINVAL;
	for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
		if (*dirs[i] && !g_path_is_absolute(*dirs[i])) {
			char *abs = g_canonicalize_filename(*dirs[i], NULL);

			g_free((char *)*dirs[i]);
			*dirs[i] = abs;
		}
	}
	if (o->gid_policy && vm_gid_policy_from_string(o->gid_policy, &cfg->gid_policy) < 0) {
		fprintf(stderr, "rdmacm-mux: --gid-policy must be open or assigned, not '%s'\n",
			o->gid_policy);
		return -EINVAL;
	}
	if (parse_id_list(o->allow_uids, &o->uids, "--allow-uid") < 0 ||
	    parse_id_list(o->allow_gids, &o->gids, "--allow-gid") < 0)
		return -EINVAL;
	cfg->allow_uids = o->uids;
	cfg->allow_gids = o->gids;
	cfg->relay.require_port_gid = o->require_port_gid;
	cfg->allow_wide_prefix = o->allow_wide_prefix;
	cfg->fd_store = !o->no_fd_store;
	cfg->trace = o->trace;
	cfg->exe = o->exe;
	cfg->argv = o->argv;
	return 0;
}

/* A numeric option's place in --help; the rest is int_options[]'s. */
#define INT_OPTION(name) { name, 0, 0, G_OPTION_ARG_INT, NULL, NULL, NULL }

static int parse_options(int argc, char **argv, Options *o, DaemonConfig *cfg)
{
	g_autofree char *mode_help = g_strdup_printf("Socket mode (default %04o)", DAEMON_SOCKET_MODE);
	g_autofree char *control_mode_help =
		g_strdup_printf("Control socket mode (default %04o)", DAEMON_CONTROL_MODE);
	GOptionEntry entries[] = {
		{ "device", 'd', 0, G_OPTION_ARG_STRING, &cfg->device,
		  "RDMA device (required), e.g. mlx5_0 or rxe0", "DEV" },
		INT_OPTION("port"),
		{ "socket-prefix", 's', 0, G_OPTION_ARG_STRING, &cfg->socket_prefix,
		  "Socket path prefix; the socket is PREFIX-DEV-PORT (default "
		  RDMACM_MUX_SOCKET_PREFIX ")", "PREFIX" },
		{ "socket", 0, 0, G_OPTION_ARG_FILENAME, &cfg->socket_path,
		  "Full socket path (overrides the prefix rule)", "PATH" },
		{ "group", 0, 0, G_OPTION_ARG_STRING, &cfg->group,
		  "Group that owns the socket (e.g. kvm)", "GROUP" },
		{ "mode", 0, 0, G_OPTION_ARG_STRING, &cfg->mode, mode_help, "MODE" },
		{ "control-group", 0, 0, G_OPTION_ARG_STRING, &cfg->control_group,
		  "Group that owns the control socket (default: root's only)", "GROUP" },
		{ "control-mode", 0, 0, G_OPTION_ARG_STRING, &cfg->control_mode, control_mode_help,
		  "MODE" },
		INT_OPTION("max-trace-readers"),
		{ "allow-uid", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->allow_uids,
		  "Accept only clients with this uid (repeatable)", "UID" },
		{ "allow-gid", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->allow_gids,
		  "Accept only clients with this primary gid (repeatable)", "GID" },
		INT_OPTION("max-clients"), INT_OPTION("max-clients-per-uid"),
		INT_OPTION("register-timeout"), INT_OPTION("max-gids"), INT_OPTION("max-sessions"),
		INT_OPTION("max-half-open"), INT_OPTION("max-half-open-per-peer"),
		INT_OPTION("max-total-sessions"), INT_OPTION("max-total-half-open"),
		INT_OPTION("max-queue"), INT_OPTION("senders"), INT_OPTION("send-threads"),
		INT_OPTION("max-slow-sends"), INT_OPTION("unreachable-cache"),
		INT_OPTION("send-timeout"), INT_OPTION("handshake-timeout"),
		INT_OPTION("closing-timeout"), INT_OPTION("sidr-timeout"),
		INT_OPTION("wait-for-device"),
		{ "require-port-gid", 0, 0, G_OPTION_ARG_NONE, &o->require_port_gid,
		  "Refuse REG of a GID the port does not have", NULL },
		{ "gid-policy", 0, 0, G_OPTION_ARG_STRING, &o->gid_policy,
		  "Who may register a GID no VM is assigned, through the shared socket: open "
		  "(anyone, the default) or assigned (nobody)", "POLICY" },
		{ "vm-dir", 0, 0, G_OPTION_ARG_FILENAME, &cfg->vm_dir,
		  "Where the VMs' sockets go, NAME.sock (default: the socket's path + .vm)", "DIR" },
		{ "vms-dir", 0, 0, G_OPTION_ARG_FILENAME, &cfg->vms_dir,
		  "Static VM assignments, NAME.conf each (default " RDMACM_MUX_VMS_DIR "; empty: "
		  "none)", "DIR" },
		INT_OPTION("max-vms"), INT_OPTION("max-vm-clients"),
		{ "allow-wide-prefix", 0, 0, G_OPTION_ARG_NONE, &o->allow_wide_prefix,
		  "Let a VM have a prefix shorter than /64", NULL },
		{ "no-fd-store", 0, 0, G_OPTION_ARG_NONE, &o->no_fd_store,
		  "Do not keep clients and state in the service manager's fd store (a restart "
		  "then disconnects every client)", NULL },
		{ "trace", 0, 0, G_OPTION_ARG_NONE, &o->trace,
		  "Print a line for every relayed or dropped MAD on stdout", NULL },
		{ "trace-pcap", 0, 0, G_OPTION_ARG_FILENAME, &cfg->trace_pcap,
		  "Write every relayed MAD to FILE as InfiniBand packets (pcap, for Wireshark)",
		  "FILE" },
		{ "log-level", 0, 0, G_OPTION_ARG_STRING, &o->log_level,
		  "err, warning, notice, info (default) or debug", "LEVEL" },
		{ "version", 0, 0, G_OPTION_ARG_NONE, &o->version, "Print the version and exit", NULL },
		{ NULL },
	};
	g_autoptr(GOptionContext) ctx = g_option_context_new("- relay IB CM MADs between one RDMA port and many clients");
	g_autoptr(GError) error = NULL;

	o->help = g_ptr_array_new_with_free_func(g_free);
	for (GOptionEntry *e = entries; e->long_name; e++)
		if (e->arg == G_OPTION_ARG_INT && !e->arg_data)
			int_option_entry(o, cfg, e);
	g_option_context_add_main_entries(ctx, entries, NULL);
	g_option_context_set_description(ctx,
		"Compatible with QEMU's rdmacm-mux (-d, -p, -s, -h). See rdmacm-mux(8).");
	if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
		fprintf(stderr, "rdmacm-mux: %s\nTry 'rdmacm-mux --help'.\n", error->message);
		return -EINVAL;
	}
	if (o->version)
		return 0;
	if (argc > 1) {
		fprintf(stderr, "rdmacm-mux: unexpected argument '%s'\n", argv[1]);
		return -EINVAL;
	}
	return options_store(o, cfg);
}

int main(int argc, char **argv)
{
	Options o = { 0 };
	DaemonConfig cfg;
	Daemon *d;
	int level = LOG_INFO, rc;

	daemon_config_init(&cfg);
	/* Before the options parser takes its arguments out. */
	o.argv = g_strdupv(argv);
	o.exe = g_file_read_link("/proc/self/exe", NULL);
	/* Set by a re-execution for the next image, and only for it. */
	if (getenv("RDMACM_MUX_GENERATION")) {
		cfg.generation = (unsigned)strtoul(getenv("RDMACM_MUX_GENERATION"), NULL, 10);
		unsetenv("RDMACM_MUX_GENERATION");
	}
	if (parse_options(argc, argv, &o, &cfg) < 0) {
		options_clear(&o, &cfg);
		return DAEMON_EXIT_USAGE;
	}
	if (o.version) {
		printf("rdmacm-mux %s\n", PACKAGE_VERSION);
		options_clear(&o, &cfg);
		return EXIT_SUCCESS;
	}
	if (o.log_level) {
		level = log_level_from_string(o.log_level);
		if (level < 0) {
			fprintf(stderr, "rdmacm-mux: bad --log-level '%s'\n", o.log_level);
			options_clear(&o, &cfg);
			return DAEMON_EXIT_USAGE;
		}
	}
	log_setup(level, false);

	d = daemon_new(&cfg);
	rc = daemon_run(d);
	daemon_free(d);
	options_clear(&o, &cfg);
	return rc;
}
