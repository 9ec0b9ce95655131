/* SPDX-License-Identifier: MIT */
/*
 * rdmacm-mux: main. Owns the command line, which sockets to serve (those
 * systemd passed, else our own: the listener unit does the work), the fd
 * budget, signals, systemd notification, and the one sd-event loop that
 * drives everything else. The wait for the port, and what is said about
 * who holds the CM class, are port-startup's.
 *
 * Exit status: 0 after a clean shutdown; 1 for a failure at start or at run
 * time; 2 for a bad command line; 3 when the CM class is already owned on
 * the port (ib_cm is loaded); 4 when the device or port does not exist or
 * went away.
 */
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <fcntl.h>
#include <unistd.h>

#include "config.h"
#include "control.h"
#include "handoff-fd-store.h"
#include "listener.h"
#include "log.h"
#include "pcap-writer.h"
#include "port-startup.h"
#include "relay-handoff.h"
#include "relay.h"
#include "sender-pool.h"
#include "umad-port.h"
#include "util.h"
#include "vm-host.h"

#define EXIT_USAGE 2
#define EXIT_CM_OWNED 3
#define EXIT_NO_DEVICE 4

#define STATUS_INTERVAL_USEC (2 * 1000000u)
/* Out of fds, look again this often. */
#define LISTENER_RETRY_MS 100
/* At a hand-off, queued frames may take this long to go out. */
#define HANDOFF_FLUSH_MS 1000
/* At a hand-off or a stop, the senders' writes in flight may take this
 * long; one still unfinished is answered ETIMEDOUT (a write that waits
 * for an address takes up to a second, most far less), and the successor
 * starts within a second of SIGTERM whatever the kernel does. */
#define STOP_SENDS_WAIT_MS 600

typedef struct Options {
	char *device;
	int port;
	char *socket_prefix;
	char *socket_path;
	char *group;
	char *mode;
	char *control_group;
	char *control_mode;
	int max_trace_readers;
	char **allow_uids;
	char **allow_gids;
	int max_clients;
	int max_clients_per_uid;
	int register_timeout_ms;
	int max_gids;
	int max_sessions;
	int max_half_open;
	int max_half_open_per_peer;
	int max_total_sessions;
	int max_total_half_open;
	int max_queue;
	int senders;
	int max_slow_sends;
	int unreachable_cache_ms;
	int send_timeout_ms;
	int handshake_timeout_ms;
	int closing_timeout_ms;
	int sidr_timeout_ms;
	int wait_for_device_s;
	char *vm_dir;
	char *vms_dir;
	char *gid_policy;
	int max_vms;
	int max_vm_clients;
	gboolean allow_wide_prefix;
	gboolean require_port_gid;
	gboolean no_fd_store;
	gboolean trace;
	char *trace_pcap;
	char *log_level;
	gboolean version;
	char *exe;   /* this binary's path, for a re-execution */
	char **argv; /* the command line as given */
} Options;

typedef struct Daemon {
	Options opt;
	char *socket_path;
	bool socket_bound; /* we created the socket file, so we remove it */
	int listen_fd;
	char *control_path;
	bool control_bound;
	int control_fd; /* until control_new() takes it */
	int control_copy; /* a copy of it, for a re-execution */
	unsigned generation; /* re-executions behind this image */
	Control *control;
	PcapWriter *pcap;
	sd_event *event;
	Listener *listener;
	GHashTable *stored; /* fds a predecessor left in the fd store: name -> fd */
	int activated;	    /* listening sockets systemd passed */
	bool handing_off;   /* SIGTERM with the fd store: the successor takes over */
	char umad_name[FD_STORE_NAME_MAX]; /* the umad fd's in the store, or "" */
	sd_event_source *status_timer;
	Relay *relay;
	VmHost *vms;
	GArray *allow_uids;
	GArray *allow_gids;
} Daemon;

static void options_clear(Options *o)
{
	g_free(o->device);
	g_free(o->socket_prefix);
	g_free(o->socket_path);
	g_free(o->group);
	g_free(o->mode);
	g_free(o->control_group);
	g_free(o->control_mode);
	g_strfreev(o->allow_uids);
	g_strfreev(o->allow_gids);
	g_free(o->trace_pcap);
	g_free(o->vm_dir);
	g_free(o->vms_dir);
	g_free(o->gid_policy);
	g_free(o->log_level);
	g_free(o->exe);
	g_strfreev(o->argv);
}

static int parse_options(int argc, char **argv, Options *o)
{
	const GOptionEntry entries[] = {
		{ "device", 'd', 0, G_OPTION_ARG_STRING, &o->device,
		  "RDMA device (required), e.g. mlx5_0 or rxe0", "DEV" },
		{ "port", 'p', 0, G_OPTION_ARG_INT, &o->port, "Port number (default 1)", "PORT" },
		{ "socket-prefix", 's', 0, G_OPTION_ARG_STRING, &o->socket_prefix,
		  "Socket path prefix; the socket is PREFIX-DEV-PORT (default "
		  RDMACM_MUX_SOCKET_PREFIX ")", "PREFIX" },
		{ "socket", 0, 0, G_OPTION_ARG_FILENAME, &o->socket_path,
		  "Full socket path (overrides the prefix rule)", "PATH" },
		{ "group", 0, 0, G_OPTION_ARG_STRING, &o->group,
		  "Group that owns the socket (e.g. kvm)", "GROUP" },
		{ "mode", 0, 0, G_OPTION_ARG_STRING, &o->mode, "Socket mode (default 0660)", "MODE" },
		{ "control-group", 0, 0, G_OPTION_ARG_STRING, &o->control_group,
		  "Group that owns the control socket (default: root's only)", "GROUP" },
		{ "control-mode", 0, 0, G_OPTION_ARG_STRING, &o->control_mode,
		  "Control socket mode (default 0600)", "MODE" },
		{ "max-trace-readers", 0, 0, G_OPTION_ARG_INT, &o->max_trace_readers,
		  "Most 'rdmacm-muxctl trace' readers at once (default 4)", "N" },
		{ "allow-uid", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->allow_uids,
		  "Accept only clients with this uid (repeatable)", "UID" },
		{ "allow-gid", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->allow_gids,
		  "Accept only clients with this primary gid (repeatable)", "GID" },
		{ "max-clients", 0, 0, G_OPTION_ARG_INT, &o->max_clients,
		  "Most clients at once (default 1024)", "N" },
		{ "max-clients-per-uid", 0, 0, G_OPTION_ARG_INT, &o->max_clients_per_uid,
		  "Most clients of one user at once (default: half of --max-clients)", "N" },
		{ "register-timeout", 0, 0, G_OPTION_ARG_INT, &o->register_timeout_ms,
		  "Close a connection that registers no GID within this time (ms, default "
		  "900000; 0: never)", "MS" },
		{ "max-gids", 0, 0, G_OPTION_ARG_INT, &o->max_gids,
		  "Most GIDs per client (default 32)", "N" },
		{ "max-sessions", 0, 0, G_OPTION_ARG_INT, &o->max_sessions,
		  "Most CM sessions a client starts or has established (default 16384)", "N" },
		{ "max-half-open", 0, 0, G_OPTION_ARG_INT, &o->max_half_open,
		  "Most peer-started sessions per client not yet established (default 1024)", "N" },
		{ "max-half-open-per-peer", 0, 0, G_OPTION_ARG_INT, &o->max_half_open_per_peer,
		  "Most of those one peer GID may hold (default 256)", "N" },
		{ "max-total-sessions", 0, 0, G_OPTION_ARG_INT, &o->max_total_sessions,
		  "Most CM sessions of all clients together (default 1048576)", "N" },
		{ "max-total-half-open", 0, 0, G_OPTION_ARG_INT, &o->max_total_half_open,
		  "Most peer-started half-open sessions of all clients (default 65536)", "N" },
		{ "max-queue", 0, 0, G_OPTION_ARG_INT, &o->max_queue,
		  "Inbound MADs queued per client before drops (default 1024)", "N" },
		{ "senders", 0, 0, G_OPTION_ARG_INT, &o->senders,
		  "Processes for sends that may wait for address resolution (default 8)", "N" },
		/* its name before the senders were processes */
		{ "send-threads", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &o->senders, NULL,
		  NULL },
		{ "max-slow-sends", 0, 0, G_OPTION_ARG_INT, &o->max_slow_sends,
		  "Such sends one client may have at once (default 2)", "N" },
		{ "unreachable-cache", 0, 0, G_OPTION_ARG_INT, &o->unreachable_cache_ms,
		  "A destination that did not answer fails at once for this long (ms, default 1000)",
		  "MS" },
		{ "send-timeout", 0, 0, G_OPTION_ARG_INT, &o->send_timeout_ms,
		  "A sender's write that takes longer is stopped, its MAD answers ETIMEDOUT (ms, "
		  "default 4000)", "MS" },
		{ "handshake-timeout", 0, 0, G_OPTION_ARG_INT, &o->handshake_timeout_ms,
		  "Idle time before a half-open handshake is forgotten (ms, default 120000)", "MS" },
		{ "closing-timeout", 0, 0, G_OPTION_ARG_INT, &o->closing_timeout_ms,
		  "Time a session is kept after DREQ/DREP/REJ (ms, default 150000)", "MS" },
		{ "sidr-timeout", 0, 0, G_OPTION_ARG_INT, &o->sidr_timeout_ms,
		  "Lifetime of a SIDR query (ms, default 60000)", "MS" },
		{ "wait-for-device", 0, 0, G_OPTION_ARG_INT, &o->wait_for_device_s,
		  "When DEV port PORT does not exist yet, wait this long for it (s, default 0: "
		  "exit 4 at once)", "SECONDS" },
		{ "require-port-gid", 0, 0, G_OPTION_ARG_NONE, &o->require_port_gid,
		  "Refuse REG of a GID the port does not have", NULL },
		{ "gid-policy", 0, 0, G_OPTION_ARG_STRING, &o->gid_policy,
		  "Who may register a GID no VM is assigned, through the shared socket: open "
		  "(anyone, the default) or assigned (nobody)", "POLICY" },
		{ "vm-dir", 0, 0, G_OPTION_ARG_FILENAME, &o->vm_dir,
		  "Where the VMs' sockets go, NAME.sock (default: the socket's path + .vm)", "DIR" },
		{ "vms-dir", 0, 0, G_OPTION_ARG_FILENAME, &o->vms_dir,
		  "Static VM assignments, NAME.conf each (default " RDMACM_MUX_VMS_DIR "; empty: "
		  "none)", "DIR" },
		{ "max-vms", 0, 0, G_OPTION_ARG_INT, &o->max_vms, "Most VMs at once (default 256)",
		  "N" },
		{ "max-vm-clients", 0, 0, G_OPTION_ARG_INT, &o->max_vm_clients,
		  "Most connections on one VM's socket at once (default 4)", "N" },
		{ "allow-wide-prefix", 0, 0, G_OPTION_ARG_NONE, &o->allow_wide_prefix,
		  "Let a VM have a prefix shorter than /64", NULL },
		{ "no-fd-store", 0, 0, G_OPTION_ARG_NONE, &o->no_fd_store,
		  "Do not keep clients and state in the service manager's fd store (a restart "
		  "then disconnects every client)", NULL },
		{ "trace", 0, 0, G_OPTION_ARG_NONE, &o->trace,
		  "Print a line for every relayed or dropped MAD on stdout", NULL },
		{ "trace-pcap", 0, 0, G_OPTION_ARG_FILENAME, &o->trace_pcap,
		  "Write every relayed MAD to FILE as InfiniBand packets (pcap, for Wireshark)",
		  "FILE" },
		{ "log-level", 0, 0, G_OPTION_ARG_STRING, &o->log_level,
		  "err, warning, notice, info (default) or debug", "LEVEL" },
		{ "version", 0, 0, G_OPTION_ARG_NONE, &o->version, "Print the version and exit", NULL },
		{ NULL },
	};
	g_autoptr(GOptionContext) ctx = g_option_context_new("- relay IB CM MADs between one RDMA port and many clients");
	g_autoptr(GError) error = NULL;
	RelayConfig d;

	/* The defaults (the relay's are relay_config_init()'s); what main()
	 * took before the parser keeps. */
	relay_config_init(&d);
	*o = (Options){
		.exe = o->exe,
		.argv = o->argv,
		.port = 1,
		.max_clients = (int)d.max_clients,
		.max_clients_per_uid = (int)d.max_clients_per_uid,
		.max_trace_readers = CONTROL_MAX_TRACE_READERS,
		.register_timeout_ms = (int)d.register_timeout_ms,
		.max_gids = (int)d.max_gids,
		.max_sessions = (int)d.max_sessions,
		.max_half_open = (int)d.max_half_open,
		.max_half_open_per_peer = (int)d.max_half_open_per_peer,
		.max_total_sessions = (int)d.max_total_sessions,
		.max_total_half_open = (int)d.max_total_half_open,
		.max_queue = (int)d.max_queued,
		.senders = (int)d.senders,
		.max_slow_sends = (int)d.max_slow_sends,
		.unreachable_cache_ms = (int)d.send_fail_ms,
		.send_timeout_ms = (int)d.send_timeout_ms,
		.handshake_timeout_ms = (int)d.timeouts_ms[SESSION_TIMER_HANDSHAKE],
		.closing_timeout_ms = (int)d.timeouts_ms[SESSION_TIMER_CLOSING],
		.sidr_timeout_ms = (int)d.timeouts_ms[SESSION_TIMER_SIDR],
		.max_vms = VM_HOST_MAX_VMS,
		.max_vm_clients = VM_HOST_MAX_VM_CLIENTS,
	};

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
	if (!o->device || !*o->device) {
		fprintf(stderr, "rdmacm-mux: missing RDMA device name (-d DEV)\n"
				"Try 'rdmacm-mux --help'.\n");
		return -EINVAL;
	}
	if (o->port < 1 || o->port > 255) {
		fprintf(stderr, "rdmacm-mux: port must be 1..255, not %d\n", o->port);
		return -EINVAL;
	}
	struct {
		const char *name;
		int value, min, max;
	} ranges[] = {
		{ "--max-clients", o->max_clients, 1, 1 << 20 },
		{ "--max-trace-readers", o->max_trace_readers, 0, CONTROL_MAX_CONNECTIONS },
		{ "--max-clients-per-uid", o->max_clients_per_uid, 0, 1 << 20 },
		{ "--register-timeout", o->register_timeout_ms, 0, 24 * 3600 * 1000 },
		{ "--max-gids", o->max_gids, 1, 4096 },
		{ "--max-sessions", o->max_sessions, 1, 1 << 24 },
		{ "--max-half-open", o->max_half_open, 1, 1 << 24 },
		{ "--max-half-open-per-peer", o->max_half_open_per_peer, 1, 1 << 24 },
		{ "--max-total-sessions", o->max_total_sessions, 1, 1 << 26 },
		{ "--max-total-half-open", o->max_total_half_open, 1, 1 << 26 },
		{ "--max-queue", o->max_queue, 1, 1 << 20 },
		{ "--senders", o->senders, 1, 64 },
		{ "--max-slow-sends", o->max_slow_sends, 1, 64 },
		{ "--unreachable-cache", o->unreachable_cache_ms, 1, 60 * 1000 },
		{ "--send-timeout", o->send_timeout_ms, 100, 600 * 1000 },
		{ "--handshake-timeout", o->handshake_timeout_ms, 1, 24 * 3600 * 1000 },
		{ "--closing-timeout", o->closing_timeout_ms, 1, 24 * 3600 * 1000 },
		{ "--sidr-timeout", o->sidr_timeout_ms, 1, 24 * 3600 * 1000 },
		{ "--wait-for-device", o->wait_for_device_s, 0, 3600 },
		{ "--max-vms", o->max_vms, 0, 1024 },
		{ "--max-vm-clients", o->max_vm_clients, 1, 64 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(ranges); i++) {
		if (ranges[i].value < ranges[i].min || ranges[i].value > ranges[i].max) {
			fprintf(stderr, "rdmacm-mux: %s must be %d..%d, not %d\n", ranges[i].name,
				ranges[i].min, ranges[i].max, ranges[i].value);
			return -EINVAL;
		}
	}
	/* The VMs' state keeps the paths, and a successor refuses a relative
	 * one: it may run elsewhere (systemd starts us in /). */
	char **dirs[] = { &o->vm_dir, &o->vms_dir };

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		if (*dirs[i] && !g_path_is_absolute(*dirs[i])) {
			char *abs = g_canonicalize_filename(*dirs[i], NULL);

			g_free(*dirs[i]);
			*dirs[i] = abs;
		}
	}
	if (o->gid_policy) {
		VmGidPolicy p;

		if (vm_gid_policy_from_string(o->gid_policy, &p) < 0) {
			fprintf(stderr, "rdmacm-mux: --gid-policy must be open or assigned, not '%s'\n",
				o->gid_policy);
			return -EINVAL;
		}
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

/* ---- listening sockets ---- */

/* The control socket is optional: without it the daemon still relays. */
static void control_bind(Daemon *d)
{
	g_autofree char *why = NULL;
	ListenerPerms perms;

	/* It shows every client and their MADs: root's only, unless asked. */
	if (listener_perms_parse(d->opt.control_mode, d->opt.control_group, 0600,
				 "--control-mode/--control-group", &perms, &why) < 0 ||
	    listener_bind(d->control_path, &perms, &d->control_fd, &d->control_bound, &why) < 0) {
		log_warning("%s: running without the control socket %s (rdmacm-muxctl will not "
			    "work)",
			    why, d->control_path);
		if (d->control_bound && unlink(d->control_path) == 0)
			d->control_bound = false;
	}
}

/* Close every fd a table holds as its values. */
static void close_fd_values(GHashTable *t)
{
	GHashTableIter it;
	gpointer value;

	g_hash_table_iter_init(&it, t);
	while (g_hash_table_iter_next(&it, NULL, &value))
		close(GPOINTER_TO_INT(value));
}

static bool is_stored_fd_name(const char *name)
{
	const char *dev;
	uint32_t id;
	int port, agent;

	return strcmp(name, FD_STORE_STATE) == 0 || strcmp(name, FD_STORE_SESSIONS) == 0 ||
	       strcmp(name, FD_STORE_STATE_ALT) == 0 ||
	       strcmp(name, FD_STORE_SESSIONS_ALT) == 0 || fd_store_parse_client_name(name, &id) ||
	       fd_store_parse_umad_name(name, &port, &agent, &dev) || vm_host_is_stored_name(name);
}

/* What systemd (or this process before a re-execution) passed: the
 * listening sockets, and the stored fds, put aside in d->stored. A
 * failure is logged where it happens. */
static int passed_fds_take(Daemon *d)
{
	int n = listener_take_activated(is_stored_fd_name, d->stored, &d->listen_fd,
					&d->control_fd);

	if (n < 0)
		return n;
	d->activated = n;
	return 0;
}

/*
 * Take the umad fd @name out of the fd store. When the store keeps it, its
 * CM agent stays registered for as long as the store holds it: said once,
 * here, since nothing else can be done about it.
 */
static void umad_fd_unstore(const char *name)
{
	int r = fd_store_remove(name);

	if (r < 0)
		log_warning("cannot take %s out of the fd store (%s): its CM agent stays "
			    "registered while the store keeps it",
			    name, strerror(-r));
}

/*
 * The port: the previous process's umad fd when the store kept it (its CM
 * agent never went away, and the MADs that came since wait on it), or a
 * new registration, whose fd goes to the store. Failures are logged by
 * umad_port_open(), or here.
 */
static int port_setup(Daemon *d, UmadPort **ret)
{
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	GHashTableIter it;
	gpointer key, value;
	UmadPort *port = NULL;
	int r;

	g_hash_table_iter_init(&it, d->stored);
	while (g_hash_table_iter_next(&it, &key, &value)) {
		const char *dev;
		int portnum, agent;

		if (fd_store_parse_umad_name(key, &portnum, &agent, &dev))
			g_ptr_array_add(names, g_strdup(key));
	}
	for (guint i = 0; i < names->len; i++) {
		const char *name = names->pdata[i], *dev;
		int fd = GPOINTER_TO_INT(g_hash_table_lookup(d->stored, name)), portnum, agent;

		g_hash_table_remove(d->stored, name);
		(void)fd_store_parse_umad_name(name, &portnum, &agent, &dev);
		if (port || strcmp(dev, d->opt.device) != 0 || portnum != d->opt.port) {
			log_notice("dropping the umad fd %s that the store kept: this daemon serves "
				   "%s port %d",
				   name, d->opt.device, d->opt.port);
			close(fd);
			umad_fd_unstore(name);
			continue;
		}
		r = umad_port_adopt(dev, portnum, fd, agent, &port);
		if (r < 0) {
			log_warning("the umad fd %s that the store kept does not hold up (%s): "
				    "registering the CM agent anew",
				    name, strerror(-r));
			umad_fd_unstore(name);
			port = NULL;
			continue;
		}
		g_strlcpy(d->umad_name, name, sizeof(d->umad_name));
		log_info("took over the CM agent %d on %s port %d from the previous process: the "
			 "class was never free, and the MADs that came meanwhile are read now",
			 agent, dev, portnum);
	}
	if (port) {
		*ret = port;
		return 0;
	}
	r = umad_port_open(d->opt.device, d->opt.port, &port);
	if (r < 0)
		return r;
	if (fd_store_umad_name(port->dev, port->port, port->agent_id, d->umad_name) &&
	    fd_store_put(d->umad_name, port->fd) < 0)
		d->umad_name[0] = '\0';
	*ret = port;
	return 0;
}

/* The sockets systemd passed, or our own: a failure is logged where it
 * happens. The control socket first: a client that finds the main one
 * serving finds it too. */
static int listener_setup(Daemon *d)
{
	ListenerPerms perms;
	int r;

	if (d->control_fd < 0) {
		control_bind(d);
		if (d->control_bound)
			(void)fd_store_put("control", d->control_fd);
	}
	if (d->activated > 0)
		log_info("serving the socket passed by systemd");
	else {
		g_autofree char *why = NULL;

		r = listener_perms_parse(d->opt.mode, d->opt.group, 0660, "--mode", &perms, &why);
		if (r == 0)
			r = listener_bind(d->socket_path, &perms, &d->listen_fd, &d->socket_bound,
					  &why);
		if (r < 0) {
			log_error("%s", why);
			return r;
		}
		/* Kept with the clients: a successor serves the same socket. */
		(void)fd_store_put("main", d->listen_fd);
	}
	return 0;
}

/* The relay's state from the fd store, or a fresh one. */
static void handoff_setup(Daemon *d)
{
	g_autoptr(GHashTable) clients = g_hash_table_new(g_direct_hash, g_direct_equal);
	RelayHandoffFds fds = { -1, -1, -1, -1, clients };
	GHashTableIter it;
	gpointer key, value;

	g_hash_table_iter_init(&it, d->stored);
	while (g_hash_table_iter_next(&it, &key, &value)) {
		int *slot = NULL;
		uint32_t id;

		if (strcmp(key, FD_STORE_STATE) == 0)
			slot = &fds.state;
		else if (strcmp(key, FD_STORE_STATE_ALT) == 0)
			slot = &fds.state_alt;
		else if (strcmp(key, FD_STORE_SESSIONS) == 0)
			slot = &fds.sessions;
		else if (strcmp(key, FD_STORE_SESSIONS_ALT) == 0)
			slot = &fds.sessions_alt;
		else if (fd_store_parse_client_name(key, &id))
			g_hash_table_insert(clients, GUINT_TO_POINTER(id), value);
		if (slot)
			*slot = GPOINTER_TO_INT(value);
	}
	g_hash_table_remove_all(d->stored);
	/* Without a store, a predecessor's state still counts: it came from a
	 * re-execution (SIGHUP). */
	if (!fd_store_enabled() && fds.state < 0 && fds.state_alt < 0) {
		/* Passed, but nobody would keep them from now on. */
		close_fd_values(clients);
		if (fds.sessions >= 0)
			close(fds.sessions);
		if (fds.sessions_alt >= 0)
			close(fds.sessions_alt);
		return;
	}
	(void)relay_handoff_start(d->relay, &fds);
}

/* The VMs: their assignments and sockets, before any client is served. */
static int vms_setup(Daemon *d)
{
	g_autofree char *vm_dir = d->opt.vm_dir ? g_strdup(d->opt.vm_dir)
						: g_strdup_printf("%s.vm", d->socket_path);
	const char *conf = d->opt.vms_dir ? d->opt.vms_dir : RDMACM_MUX_VMS_DIR;
	VmHostConfig cfg = {
		.vm_dir = vm_dir,
		.conf_dir = *conf ? conf : NULL,
		.max_vms = (uint32_t)d->opt.max_vms,
		.max_clients_per_vm = (uint32_t)d->opt.max_vm_clients,
		.policy = VM_GID_POLICY_OPEN,
		.default_group = (gid_t)-1,
		.allow = { .uids = d->allow_uids, .gids = d->allow_gids },
		.retry_ms = LISTENER_RETRY_MS,
		.main_fd = d->listen_fd,
		.allow_wide_prefix = d->opt.allow_wide_prefix,
	};
	gpointer state, state_alt;
	RelayHandoffFds peek = { -1, -1, -1, -1, NULL };
	g_autoptr(GBytes) kept = NULL;
	ListenerPerms perms;

	if (d->opt.gid_policy)
		(void)vm_gid_policy_from_string(d->opt.gid_policy, &cfg.policy); /* checked */
	/* The VMs' sockets get the main socket's group unless they name one. */
	if (d->opt.group && listener_perms_parse(NULL, d->opt.group, 0660, "--group", &perms, NULL) == 0)
		cfg.default_group = perms.gid;
	/* The VMs' state rides in the relay's, which handoff_setup() takes. */
	if (g_hash_table_lookup_extended(d->stored, FD_STORE_STATE, NULL, &state))
		peek.state = GPOINTER_TO_INT(state);
	if (g_hash_table_lookup_extended(d->stored, FD_STORE_STATE_ALT, NULL, &state_alt))
		peek.state_alt = GPOINTER_TO_INT(state_alt);
	kept = relay_handoff_peek_vms(d->relay, &peek);
	return vm_host_new(d->event, d->relay, &cfg, d->stored, kept, &d->vms);
}

typedef struct ReexecFds {
	GPtrArray *names;
	GArray *fds;
} ReexecFds;

static void reexec_add(void *userdata, const char *name, int fd)
{
	ReexecFds *x = userdata;

	g_ptr_array_add(x->names, g_strdup(name));
	g_array_append_val(x->fds, fd);
}

/* The highest fd this process has open. */
static int highest_fd(void)
{
	g_autoptr(GDir) dir = g_dir_open("/proc/self/fd", 0, NULL);
	const char *e;
	int max = 2;

	while (dir && (e = g_dir_read_name(dir)))
		max = MAX(max, atoi(e));
	return max;
}

/*
 * SIGHUP: execute the daemon's binary again (an upgrade takes effect) in
 * this process, handing the sockets, the clients and the state over as
 * socket activation would. For hosts without systemd's fd store; under
 * systemd it works the same. Returns only if it could not.
 */
static void daemon_reexec(Daemon *d)
{
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GArray) fds = g_array_new(FALSE, FALSE, sizeof(int));
	ReexecFds x = { names, fds };
	g_autofree char *joined = NULL;
	char buf[32];
	int base;

	if (!d->opt.exe || access(d->opt.exe, X_OK) < 0) {
		log_error("cannot re-execute %s: %s; going on as we are",
			  d->opt.exe ? d->opt.exe : "the daemon", strerror(errno));
		return;
	}
	/* The senders end, and the answers to the MADs they were writing go
	 * out with the rest. */
	relay_stop_sends(d->relay, STOP_SENDS_WAIT_MS);
	relay_handoff_prepare(d->relay, HANDOFF_FLUSH_MS);
	reexec_add(&x, "main", d->listen_fd);
	if (d->control_copy >= 0)
		reexec_add(&x, "control", d->control_copy);
	/* The CM agent goes along: the class is never free. */
	{
		const UmadPort *port = relay_port(d->relay);
		char name[FD_STORE_NAME_MAX];

		if (fd_store_umad_name(port->dev, port->port, port->agent_id, name))
			reexec_add(&x, name, port->fd);
	}
	relay_handoff_export(d->relay, reexec_add, &x);
	vm_host_export(d->vms, reexec_add, &x);
	g_ptr_array_add(names, NULL);
	joined = g_strjoinv(":", (char **)names->pdata);
	log_info("re-executing %s with %u fds (the sockets, %s)", d->opt.exe, fds->len,
		 fds->len > 1 ? "the clients and their state" : "no client");
	(void)sd_notify(0, "RELOADING=1");
	/* Out of the way of fds 3..: copies above everything open. */
	base = highest_fd() + 1;
	for (guint i = 0; i < fds->len; i++)
		if (fcntl(g_array_index(fds, int, i), F_DUPFD_CLOEXEC, base + (int)i) < 0) {
			int e = errno, r;

			/* The copies made so far are nobody's but ours. */
			while (i-- > 0)
				close(base + (int)i);
			log_error("cannot re-execute: %s; going on as we are", strerror(e));
			/* The senders stopped for the hand-off: new ones. */
			r = relay_resume_sends(d->relay);
			if (r < 0)
				log_error("cannot start the sender processes again (%s): MADs that "
					  "need one are answered EAGAIN",
					  strerror(-r));
			return;
		}
	snprintf(buf, sizeof(buf), "%d", (int)getpid());
	setenv("LISTEN_PID", buf, 1);
	snprintf(buf, sizeof(buf), "%u", fds->len);
	setenv("LISTEN_FDS", buf, 1);
	setenv("LISTEN_FDNAMES", joined, 1);
	snprintf(buf, sizeof(buf), "%u", d->generation + 1);
	setenv("RDMACM_MUX_GENERATION", buf, 1);
	/* From here the fds 3.. are the successor's: no way back. */
	for (guint i = 0; i < fds->len; i++)
		(void)dup2(base + (int)i, 3 + (int)i);
	execv(d->opt.exe, d->opt.argv);
	log_error("cannot re-execute %s: %s; exiting (a restart takes the clients over)", d->opt.exe,
		  strerror(errno));
	_exit(EXIT_FAILURE);
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	(void)s;
	(void)si;
	daemon_reexec(userdata);
	return 0;
}

/* SIGTERM: with the fd store, what is queued goes out and the successor
 * (a restart) takes the rest over; without it, a plain stop. */
static int on_sigterm(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	Daemon *d = userdata;

	(void)si;
	if (fd_store_enabled()) {
		d->handing_off = true;
		/* The answers to MADs still being written go out with the rest. */
		relay_stop_sends(d->relay, STOP_SENDS_WAIT_MS);
		relay_handoff_prepare(d->relay, HANDOFF_FLUSH_MS);
		vm_host_handoff(d->vms);
		log_info("stopping: the clients, their GIDs and sessions stay in the fd store "
			 "for the next start");
	}
	return sd_event_exit(sd_event_source_get_event(s), 0);
}

static void on_accept(int fd, const struct ucred *cred, void *userdata)
{
	Daemon *d = userdata;

	(void)cred;
	/* A refusal is logged and counted by the relay. */
	(void)relay_add_client(d->relay, fd);
}

/* ---- systemd ---- */

static void notify_status(Daemon *d)
{
	const RelayCounters *k = relay_counters(d->relay);
	uint64_t tx = 0, rx = 0;

	for (int i = 0; i < CM_IDX_COUNT; i++) {
		tx += k->tx[i];
		rx += k->rx[i];
	}
	(void)sd_notifyf(0, "STATUS=%u clients, %u GIDs, %u sessions; MADs relayed: %" PRIu64
			    " sent, %" PRIu64 " received",
			 relay_client_count(d->relay), relay_gid_count(d->relay),
			 relay_session_count(d->relay), tx, rx);
}

static int on_status_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	notify_status(userdata);
	(void)sd_event_source_set_time(s, usec + STATUS_INTERVAL_USEC);
	(void)sd_event_source_set_enabled(s, SD_EVENT_ON);
	return 0;
}

static int on_sigusr1(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	Daemon *d = userdata;

	(void)s;
	(void)si;
	relay_dump_counters(d->relay, stderr);
	return 0;
}

static void daemon_clear(Daemon *d)
{
	listener_free(d->listener);
	d->listener = NULL;
	sd_event_source_disable_unref(d->status_timer);
	/* Both remove their event sinks: before the relay goes. */
	control_free(d->control);
	if (d->pcap && d->relay)
		relay_remove_event_sink(d->relay, pcap_writer_sink, d->pcap);
	pcap_writer_free(d->pcap);
	/* The relay's clients point into the VMs' table: the relay first. */
	relay_free(d->relay);
	vm_host_free(d->vms);
	if (d->listen_fd >= 0)
		close(d->listen_fd);
	if (d->control_fd >= 0)
		close(d->control_fd);
	if (d->control_copy >= 0)
		close(d->control_copy);
	/* Handing off, the sockets stay for the successor (the fd store
	 * holds them, bound). */
	if (d->socket_bound && !d->handing_off)
		(void)unlink(d->socket_path);
	if (d->control_bound && !d->handing_off)
		(void)unlink(d->control_path);
	if (d->stored) {
		close_fd_values(d->stored);
		g_hash_table_destroy(d->stored);
	}
	sd_event_unref(d->event);
	if (d->allow_uids)
		g_array_unref(d->allow_uids);
	if (d->allow_gids)
		g_array_unref(d->allow_gids);
	g_free(d->socket_path);
	g_free(d->control_path);
	options_clear(&d->opt);
}

/* Many clients each hold an fd: use the whole hard limit. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/*
 * Every client holds an fd; so do stdio, the umad port, each sender
 * process's socket, the two listening sockets, the control connections,
 * the event loop and the pcap file; and each VM's listening socket, out of
 * the clients' room. A --max-clients that the fd limit cannot hold would
 * end in EMFILE for everyone: clamp it, and say so. --max-vms gives way
 * first, to an eighth of the room: a VM without clients is no use.
 */
static void clamp_max_clients(Options *o)
{
	const uint64_t reserve = 64 + CONTROL_MAX_CONNECTIONS + (uint64_t)o->senders;
	struct rlimit rl;
	uint64_t room;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return;
	room = rl.rlim_cur > reserve + 1 ? rl.rlim_cur - reserve : 1;
	if ((uint64_t)o->max_clients + (uint64_t)o->max_vms > room &&
	    (uint64_t)o->max_vms > room / 8) {
		log_warning("--max-vms %d does not fit the fd limit (RLIMIT_NOFILE %llu) beside the "
			    "clients: serving at most %llu VMs",
			    o->max_vms, (unsigned long long)rl.rlim_cur,
			    (unsigned long long)(room / 8));
		o->max_vms = (int)(room / 8);
	}
	room -= MIN(room - 1, (uint64_t)o->max_vms);
	if ((uint64_t)o->max_clients <= room)
		return;
	log_warning("--max-clients %d does not fit the fd limit (RLIMIT_NOFILE %llu, of which "
		    "%llu are kept for the daemon's own fds): serving at most %llu clients",
		    o->max_clients, (unsigned long long)rl.rlim_cur,
		    (unsigned long long)reserve, (unsigned long long)room);
	o->max_clients = (int)room;
	if (o->max_clients_per_uid > o->max_clients)
		o->max_clients_per_uid = o->max_clients;
}

static int run(Daemon *d)
{
	UmadPort *port = NULL;
	RelayConfig cfg;
	ListenerAllow allow;
	uint64_t now;
	int r;

	if (passed_fds_take(d) < 0)
		return EXIT_FAILURE;
	if (port_startup_wait(d->opt.device, d->opt.port, d->opt.wait_for_device_s) < 0)
		return EXIT_SUCCESS;
	r = port_setup(d, &port);
	if (r == -EBUSY) {
		port_startup_log_refused(d->opt.device, d->opt.port);
		return EXIT_CM_OWNED;
	}
	if (r == -ENODEV || r == -ENOENT)
		return EXIT_NO_DEVICE;
	if (r < 0)
		return EXIT_FAILURE;
	port_startup_log_owners(d->opt.device, d->opt.port);

	relay_config_init(&cfg);
	cfg.max_clients = (uint32_t)d->opt.max_clients;
	cfg.max_clients_per_uid = (uint32_t)d->opt.max_clients_per_uid;
	cfg.register_timeout_ms = (uint32_t)d->opt.register_timeout_ms;
	cfg.max_gids = (uint32_t)d->opt.max_gids;
	cfg.max_sessions = (uint32_t)d->opt.max_sessions;
	cfg.max_half_open = (uint32_t)d->opt.max_half_open;
	cfg.max_half_open_per_peer = (uint32_t)d->opt.max_half_open_per_peer;
	cfg.max_total_sessions = (uint32_t)d->opt.max_total_sessions;
	cfg.max_total_half_open = (uint32_t)d->opt.max_total_half_open;
	cfg.max_queued = (uint32_t)d->opt.max_queue;
	cfg.senders = (uint32_t)d->opt.senders;
	cfg.max_slow_sends = (uint32_t)d->opt.max_slow_sends;
	cfg.send_fail_ms = (uint32_t)d->opt.unreachable_cache_ms;
	cfg.send_timeout_ms = (uint32_t)d->opt.send_timeout_ms;
	cfg.send_workers = &sender_pool_ops;
	cfg.timeouts_ms[SESSION_TIMER_HANDSHAKE] = (uint32_t)d->opt.handshake_timeout_ms;
	cfg.timeouts_ms[SESSION_TIMER_CLOSING] = (uint32_t)d->opt.closing_timeout_ms;
	cfg.timeouts_ms[SESSION_TIMER_SIDR] = (uint32_t)d->opt.sidr_timeout_ms;
	cfg.require_port_gid = d->opt.require_port_gid;
	cfg.trace = d->opt.trace ? stdout : NULL;

	r = sd_event_new(&d->event);
	if (r < 0) {
		umad_port_close(port);
		log_error("cannot create the event loop: %s", strerror(-r));
		return EXIT_FAILURE;
	}
	r = relay_new(d->event, port, &cfg, &d->relay);
	if (r < 0) {
		log_error("cannot start the relay: %s", strerror(-r));
		return EXIT_FAILURE;
	}
	if (d->opt.trace_pcap) {
		r = pcap_writer_open(d->opt.trace_pcap, relay_port(d->relay)->lid, &d->pcap);
		if (r < 0) {
			log_error("cannot create %s (--trace-pcap): %s", d->opt.trace_pcap,
				  strerror(-r));
			return EXIT_FAILURE;
		}
		relay_add_event_sink(d->relay, pcap_writer_sink, d->pcap);
	}
	r = listener_setup(d);
	if (r < 0)
		return EXIT_FAILURE;
	r = vms_setup(d);
	if (r < 0)
		return r == -EPERM ? EXIT_USAGE : EXIT_FAILURE; /* -EPERM: an unsafe --vm-dir */
	handoff_setup(d);
	/* What the predecessor's clients held is held again under this
	 * process's assignments and policy. */
	relay_vms_changed(d->relay);
	if (d->control_fd >= 0) {
		ControlConfig ccfg;

		control_config_init(&ccfg, d->socket_path, d->control_path);
		ccfg.generation = d->generation;
		ccfg.vms = d->vms;
		ccfg.allow = (ListenerAllow){ .uids = d->allow_uids, .gids = d->allow_gids };
		ccfg.max_trace_readers = (uint32_t)d->opt.max_trace_readers;
		d->control_copy = fcntl(d->control_fd, F_DUPFD_CLOEXEC, 3);
		r = control_new(d->event, d->relay, fd_steal(&d->control_fd), &ccfg, &d->control);
		if (r < 0)
			log_warning("running without the control socket: cannot watch it: %s",
				    strerror(-r));
	}

	allow = (ListenerAllow){ .uids = d->allow_uids, .gids = d->allow_gids };
	r = listener_new(d->event, d->listen_fd, "main", &allow, LISTENER_RETRY_MS, on_accept, d,
			 &d->listener);
	if (r < 0) {
		log_error("cannot watch the main socket: %s", strerror(-r));
		return EXIT_FAILURE;
	}
	r = sd_event_add_signal(d->event, NULL, SIGTERM, on_sigterm, d);
	if (r >= 0)
		r = sd_event_add_signal(d->event, NULL, SIGINT, NULL, NULL);
	if (r >= 0)
		r = sd_event_add_signal(d->event, NULL, SIGUSR1, on_sigusr1, d);
	if (r >= 0)
		r = sd_event_add_signal(d->event, NULL, SIGHUP, on_sighup, d);
	if (r >= 0) {
		(void)sd_event_now(d->event, CLOCK_MONOTONIC, &now);
		r = sd_event_add_time(d->event, &d->status_timer, CLOCK_MONOTONIC,
				      now + STATUS_INTERVAL_USEC, 0, on_status_timer, d);
	}
	if (r < 0) {
		log_error("cannot set up the event loop: %s", strerror(-r));
		return EXIT_FAILURE;
	}

	log_info("serving %s port %d (%s) on %s", d->opt.device, d->opt.port,
		 port->roce ? "RoCE" : "InfiniBand",
		 d->socket_bound ? d->socket_path : "the socket passed by systemd");
	(void)sd_notify(0, "READY=1");
	notify_status(d);
	/* Enabling the watchdog pings at once: only after READY=1. */
	r = sd_event_set_watchdog(d->event, true);
	if (r < 0) {
		log_error("cannot set up the watchdog: %s", strerror(-r));
		return EXIT_FAILURE;
	}

	r = sd_event_loop(d->event);
	(void)sd_notify(0, "STOPPING=1");
	/* Writes still in the sender processes count in the last counters. */
	relay_stop_sends(d->relay, STOP_SENDS_WAIT_MS);
	/* No successor: the class is free once this process closes its fd. */
	if (!d->handing_off && d->umad_name[0])
		umad_fd_unstore(d->umad_name);
	if (log_get_max_level() >= LOG_INFO)
		relay_dump_counters(d->relay, stderr);
	if (r == -ENODEV)
		return EXIT_NO_DEVICE;
	if (r < 0) {
		/* Logged once: by the relay when it ended the loop. */
		if (!relay_ended_loop(d->relay))
			log_error("event loop failed: %s", strerror(-r));
		return EXIT_FAILURE;
	}
	log_info("shut down cleanly");
	return EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
	Daemon d = { .listen_fd = -1, .control_fd = -1, .control_copy = -1 };
	sigset_t mask;
	int level = LOG_INFO, rc;

	/* Before the options parser takes its arguments out. */
	d.opt.argv = g_strdupv(argv);
	d.opt.exe = g_file_read_link("/proc/self/exe", NULL);
	/* Set by a re-execution for the next image, and only for it. */
	if (getenv("RDMACM_MUX_GENERATION")) {
		d.generation = (unsigned)strtoul(getenv("RDMACM_MUX_GENERATION"), NULL, 10);
		unsetenv("RDMACM_MUX_GENERATION");
	}
	if (parse_options(argc, argv, &d.opt) < 0) {
		options_clear(&d.opt);
		return EXIT_USAGE;
	}
	if (d.opt.version) {
		printf("rdmacm-mux %s\n", PACKAGE_VERSION);
		options_clear(&d.opt);
		return EXIT_SUCCESS;
	}
	if (d.opt.log_level) {
		level = log_level_from_string(d.opt.log_level);
		if (level < 0) {
			fprintf(stderr, "rdmacm-mux: bad --log-level '%s'\n", d.opt.log_level);
			options_clear(&d.opt);
			return EXIT_USAGE;
		}
	}
	if (parse_id_list(d.opt.allow_uids, &d.allow_uids, "--allow-uid") < 0 ||
	    parse_id_list(d.opt.allow_gids, &d.allow_gids, "--allow-gid") < 0) {
		daemon_clear(&d);
		return EXIT_USAGE;
	}
	log_setup(level, false);
	(void)fd_store_setup(!d.opt.no_fd_store);
	d.stored = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	if (d.opt.trace)
		setvbuf(stdout, NULL, _IOLBF, 0);

	d.socket_path = d.opt.socket_path
				? g_strdup(d.opt.socket_path)
				: g_strdup_printf("%s-%s-%d",
						  d.opt.socket_prefix ? d.opt.socket_prefix
								      : RDMACM_MUX_SOCKET_PREFIX,
						  d.opt.device, d.opt.port);
	d.control_path = g_strdup_printf("%s.ctl", d.socket_path);

	/* Writes to a vanished client must fail with EPIPE, never kill us. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	raise_fd_limit();
	clamp_max_clients(&d.opt);

	rc = run(&d);
	daemon_clear(&d);
	return rc;
}
