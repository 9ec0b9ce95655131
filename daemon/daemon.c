/* SPDX-License-Identifier: MIT */
/*
 * Owns the daemon's life cycle (daemon.h): the start order, which sockets
 * to serve (those passed, else our own: the listener unit does the work),
 * taking the port, the clients and the VMs over from the fd store, the fd
 * budget, signals, systemd notification, the one sd-event loop that
 * drives everything else, the hand-off at SIGTERM and the re-execution at
 * SIGHUP. The wait for the port, and what is said about who holds the CM
 * class, are port-startup's; the command line is main.c's.
 */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "config.h"
#include "control.h"
#include "handoff-fd-store.h"
#include "listener.h"
#include "log.h"
#include "pcap-writer.h"
#include "port-startup.h"
#include "relay-handoff.h"
#include "sender-pool.h"
#include "util.h"
#include "vm-host.h"

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

struct Daemon {
	DaemonConfig cfg;
	char *socket_path;
	bool socket_bound; /* we created the socket file, so we remove it */
	int listen_fd;
	char *control_path;
	bool control_bound;
	int control_fd; /* until control_new() takes it */
	int control_copy; /* a copy of it, for a re-execution */
	bool started;
	int exit_status; /* of a start that failed */
	Control *control;
	PcapWriter *pcap;
	sd_event *event;
	Listener *listener;
	GHashTable *stored; /* fds a predecessor left in the fd store: name -> fd */
	int activated;	    /* listening sockets passed at start */
	bool handing_off;   /* SIGTERM with the fd store: the successor takes over */
	char umad_name[FD_STORE_NAME_MAX]; /* the umad fd's in the store, or "" */
	sd_event_source *status_timer;
	Relay *relay;
	VmHost *vms;
};

/* The control socket is optional: without it the daemon still relays. */
static void control_bind(Daemon *d)
{
	g_autofree char *why = NULL;
	ListenerPerms perms;

	/* It shows every client and their MADs: root's only, unless asked. */
	if (listener_perms_parse(d->cfg.control_mode, d->cfg.control_group, DAEMON_CONTROL_MODE,
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
	const DaemonFds *p = d->cfg.edges.passed;
	int n = p ? listener_take_passed((unsigned)p->fds->len, (const int *)(void *)p->fds->data,
					 (const char *const *)p->names->pdata, is_stored_fd_name,
					 d->stored, &d->listen_fd, &d->control_fd)
		  : listener_take_activated(is_stored_fd_name, d->stored, &d->listen_fd,
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
 * the port's opener (umad_port_open()), or here.
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
		if (port || strcmp(dev, d->cfg.device) != 0 || portnum != d->cfg.port) {
			log_notice("dropping the umad fd %s that the store kept: this daemon serves "
				   "%s port %d",
				   name, d->cfg.device, d->cfg.port);
			close(fd);
			umad_fd_unstore(name);
			continue;
		}
		r = d->cfg.edges.port_adopt(d->cfg.edges.userdata, dev, portnum, fd, agent, &port);
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
	r = d->cfg.edges.port_open(d->cfg.edges.userdata, d->cfg.device, d->cfg.port, &port);
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

		r = listener_perms_parse(d->cfg.mode, d->cfg.group, DAEMON_SOCKET_MODE, "--mode", &perms,
					 &why);
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
	g_autofree char *vm_dir = d->cfg.vm_dir ? g_strdup(d->cfg.vm_dir)
						: g_strdup_printf("%s.vm", d->socket_path);
	const char *conf = d->cfg.vms_dir ? d->cfg.vms_dir : RDMACM_MUX_VMS_DIR;
	VmHostConfig cfg = {
		.vm_dir = vm_dir,
		.conf_dir = *conf ? conf : NULL,
		.max_vms = d->cfg.max_vms,
		.max_clients_per_vm = d->cfg.max_vm_clients,
		.policy = d->cfg.gid_policy,
		.default_group = (gid_t)-1,
		.allow = { .uids = d->cfg.allow_uids, .gids = d->cfg.allow_gids },
		.retry_ms = LISTENER_RETRY_MS,
		.main_fd = d->listen_fd,
		.allow_wide_prefix = d->cfg.allow_wide_prefix,
	};
	gpointer state, state_alt;
	RelayHandoffFds peek = { -1, -1, -1, -1, NULL };
	g_autoptr(GBytes) kept = NULL;
	ListenerPerms perms;

	/* The VMs' sockets get the main socket's group unless they name one. */
	if (d->cfg.group &&
	    listener_perms_parse(NULL, d->cfg.group, DAEMON_SOCKET_MODE, "--group", &perms, NULL) == 0)
		cfg.default_group = perms.gid;
	/* The VMs' state rides in the relay's, which handoff_setup() takes. */
	if (g_hash_table_lookup_extended(d->stored, FD_STORE_STATE, NULL, &state))
		peek.state = GPOINTER_TO_INT(state);
	if (g_hash_table_lookup_extended(d->stored, FD_STORE_STATE_ALT, NULL, &state_alt))
		peek.state_alt = GPOINTER_TO_INT(state_alt);
	kept = relay_handoff_peek_vms(d->relay, &peek);
	return vm_host_new(d->event, d->relay, &cfg, d->stored, kept, &d->vms);
}

/* ---- re-execution ---- */

static void reexec_add(void *userdata, const char *name, int fd)
{
	DaemonFds *x = userdata;

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

/* The real re-execution (DaemonEdges.reexec): @fds become 3.. of the new
 * image, with LISTEN_FDS and LISTEN_FDNAMES as socket activation sets
 * them. */
static int daemon_exec_image(void *userdata, const char *exe, char **argv, const DaemonFds *fds,
			     unsigned generation)
{
	g_autofree char *joined = NULL;
	char buf[32];
	/* Out of the way of fds 3..: copies above everything open. */
	int base = highest_fd() + 1;

	(void)userdata;
	for (guint i = 0; i < fds->fds->len; i++)
		if (fcntl(g_array_index(fds->fds, int, i), F_DUPFD_CLOEXEC, base + (int)i) < 0) {
			int e = errno;

			/* The copies made so far are nobody's but ours. */
			while (i-- > 0)
				close(base + (int)i);
			return -e;
		}
	g_ptr_array_add(fds->names, NULL);
	joined = g_strjoinv(":", (char **)fds->names->pdata);
	g_ptr_array_remove_index(fds->names, fds->names->len - 1);
	snprintf(buf, sizeof(buf), "%d", (int)getpid());
	setenv("LISTEN_PID", buf, 1);
	snprintf(buf, sizeof(buf), "%u", fds->fds->len);
	setenv("LISTEN_FDS", buf, 1);
	setenv("LISTEN_FDNAMES", joined, 1);
	snprintf(buf, sizeof(buf), "%u", generation);
	setenv("RDMACM_MUX_GENERATION", buf, 1);
	/* From here the fds 3.. are the successor's: no way back. */
	for (guint i = 0; i < fds->fds->len; i++)
		(void)dup2(base + (int)i, 3 + (int)i);
	execv(exe, argv);
	log_error("cannot re-execute %s: %s; exiting (a restart takes the clients over)", exe,
		  strerror(errno));
	_exit(EXIT_FAILURE);
}

void daemon_reexec(Daemon *d)
{
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GArray) fds = g_array_new(FALSE, FALSE, sizeof(int));
	DaemonFds x = { names, fds };
	int r;

	if (!d->cfg.exe || access(d->cfg.exe, X_OK) < 0) {
		log_error("cannot re-execute %s: %s; going on as we are",
			  d->cfg.exe ? d->cfg.exe : "the daemon", strerror(errno));
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
	log_info("re-executing %s with %u fds (the sockets, %s)", d->cfg.exe, fds->len,
		 fds->len > 1 ? "the clients and their state" : "no client");
	(void)sd_notify(0, "RELOADING=1");
	r = d->cfg.edges.reexec(d->cfg.edges.userdata, d->cfg.exe, d->cfg.argv, &x,
				d->cfg.generation + 1);
	if (r == 0) {
		/* The new image has it all: this one only ends. */
		d->handing_off = true;
		(void)sd_event_exit(d->event, 0);
		return;
	}
	log_error("cannot re-execute: %s; going on as we are", strerror(-r));
	/* The senders stopped for the hand-off: new ones. */
	r = relay_resume_sends(d->relay);
	if (r < 0)
		log_error("cannot start the sender processes again (%s): MADs that need one are "
			  "answered EAGAIN",
			  strerror(-r));
}

/* ---- signals and systemd ---- */

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	(void)s;
	(void)si;
	daemon_reexec(userdata);
	return 0;
}

void daemon_stop(Daemon *d)
{
	if (fd_store_enabled()) {
		d->handing_off = true;
		/* The answers to MADs still being written go out with the rest. */
		relay_stop_sends(d->relay, STOP_SENDS_WAIT_MS);
		relay_handoff_prepare(d->relay, HANDOFF_FLUSH_MS);
		vm_host_handoff(d->vms);
		log_info("stopping: the clients, their GIDs and sessions stay in the fd store "
			 "for the next start");
	}
	(void)sd_event_exit(d->event, 0);
}

/* SIGTERM: with the fd store, what is queued goes out and the successor
 * (a restart) takes the rest over; without it, a plain stop. */
static int on_sigterm(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	(void)s;
	(void)si;
	daemon_stop(userdata);
	return 0;
}

static void on_accept(int fd, const struct ucred *cred, void *userdata)
{
	Daemon *d = userdata;

	(void)cred;
	/* A refusal is logged and counted by the relay. */
	(void)relay_add_client(d->relay, fd);
}

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

/* ---- the fd budget ---- */

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
static void clamp_max_clients(DaemonConfig *c)
{
	const uint64_t reserve = 64 + CONTROL_MAX_CONNECTIONS + (uint64_t)c->relay.senders;
	struct rlimit rl;
	uint64_t room;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return;
	room = rl.rlim_cur > reserve + 1 ? rl.rlim_cur - reserve : 1;
	if ((uint64_t)c->relay.max_clients + c->max_vms > room && (uint64_t)c->max_vms > room / 8) {
		log_warning("--max-vms %u does not fit the fd limit (RLIMIT_NOFILE %llu) beside the "
			    "clients: serving at most %llu VMs",
			    c->max_vms, (unsigned long long)rl.rlim_cur,
			    (unsigned long long)(room / 8));
		c->max_vms = (uint32_t)(room / 8);
	}
	room -= MIN(room - 1, (uint64_t)c->max_vms);
	if ((uint64_t)c->relay.max_clients <= room)
		return;
	log_warning("--max-clients %u does not fit the fd limit (RLIMIT_NOFILE %llu, of which "
		    "%llu are kept for the daemon's own fds): serving at most %llu clients",
		    c->relay.max_clients, (unsigned long long)rl.rlim_cur,
		    (unsigned long long)reserve, (unsigned long long)room);
	c->relay.max_clients = (uint32_t)room;
	if (c->relay.max_clients_per_uid > c->relay.max_clients)
		c->relay.max_clients_per_uid = c->relay.max_clients;
}

/* ---- life cycle ---- */

static int daemon_port_open(void *userdata, const char *dev, int port, UmadPort **ret)
{
	(void)userdata;
	return umad_port_open(dev, port, ret);
}

static int daemon_port_adopt(void *userdata, const char *dev, int port, int fd, int agent,
			     UmadPort **ret)
{
	(void)userdata;
	return umad_port_adopt(dev, port, fd, agent, ret);
}

void daemon_config_init(DaemonConfig *cfg)
{
	*cfg = (DaemonConfig){
		.port = 1,
		.max_trace_readers = CONTROL_MAX_TRACE_READERS,
		.gid_policy = VM_GID_POLICY_OPEN,
		.max_vms = VM_HOST_MAX_VMS,
		.max_vm_clients = VM_HOST_MAX_VM_CLIENTS,
		.fd_store = true,
		.edges = { .port_open = daemon_port_open,
			   .port_adopt = daemon_port_adopt,
			   .reexec = daemon_exec_image },
	};
	relay_config_init(&cfg->relay);
	cfg->relay.send_workers = &sender_pool_ops;
}

Daemon *daemon_new(const DaemonConfig *cfg)
{
	Daemon *d = g_new0(Daemon, 1);
	sigset_t mask;

	d->cfg = *cfg;
	d->listen_fd = d->control_fd = d->control_copy = -1;
	d->exit_status = EXIT_FAILURE;
	d->stored = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	d->socket_path = cfg->socket_path ? g_strdup(cfg->socket_path)
					  : g_strdup_printf("%s-%s-%d",
							    cfg->socket_prefix ? cfg->socket_prefix
									       : RDMACM_MUX_SOCKET_PREFIX,
							    cfg->device, cfg->port);
	d->control_path = g_strdup_printf("%s.ctl", d->socket_path);
	/* Writes to a vanished client must fail with EPIPE, never kill us. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	raise_fd_limit();
	clamp_max_clients(&d->cfg);
	return d;
}

/* The listening sockets go: closed, and their files removed unless a
 * successor takes them over (the fd store holds them, bound). */
static void daemon_close_sockets(Daemon *d)
{
	int *fds[] = { &d->listen_fd, &d->control_fd, &d->control_copy };

	for (size_t i = 0; i < G_N_ELEMENTS(fds); i++)
		if (*fds[i] >= 0)
			close(fd_steal(fds[i]));
	if (d->socket_bound && !d->handing_off)
		(void)unlink(d->socket_path);
	if (d->control_bound && !d->handing_off)
		(void)unlink(d->control_path);
	g_clear_pointer(&d->socket_path, g_free);
	g_clear_pointer(&d->control_path, g_free);
}

void daemon_free(Daemon *d)
{
	if (!d)
		return;
	listener_free(d->listener);
	sd_event_source_disable_unref(d->status_timer);
	/* Both remove their event sinks: before the relay goes. */
	control_free(d->control);
	if (d->pcap && d->relay)
		relay_remove_event_sink(d->relay, pcap_writer_sink, d->pcap);
	pcap_writer_free(d->pcap);
	/* The relay's clients point into the VMs' table: the relay first. */
	relay_free(d->relay);
	vm_host_free(d->vms);
	daemon_close_sockets(d);
	close_fd_values(d->stored);
	g_hash_table_destroy(d->stored);
	sd_event_unref(d->event);
	g_free(d);
}

/* The loop's own sources: the signals, the status timer. */
static int daemon_watch(Daemon *d)
{
	uint64_t now;
	int r;

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
	if (r < 0)
		log_error("cannot set up the event loop: %s", strerror(-r));
	return r;
}

/* The port, then the loop and the relay on it (the relay takes the
 * port over). Failures are logged, and set what the process exits with. */
static int daemon_start_relay(Daemon *d)
{
	UmadPort *port = NULL;
	RelayConfig cfg = d->cfg.relay;
	int r;

	r = port_startup_wait(d->cfg.device, d->cfg.port, (int)d->cfg.wait_for_device_s);
	if (r < 0) {
		d->exit_status = EXIT_SUCCESS; /* stopped while waiting */
		return r;
	}
	r = port_setup(d, &port);
	if (r == -EBUSY) {
		port_startup_log_refused(d->cfg.device, d->cfg.port);
		d->exit_status = DAEMON_EXIT_CM_OWNED;
		return r;
	}
	if (r == -ENODEV || r == -ENOENT) {
		d->exit_status = DAEMON_EXIT_NO_DEVICE;
		return -ENODEV;
	}
	if (r < 0)
		return r;
	port_startup_log_owners(d->cfg.device, d->cfg.port);
	r = sd_event_new(&d->event);
	if (r < 0) {
		umad_port_close(port);
		log_error("cannot create the event loop: %s", strerror(-r));
		return r;
	}
	cfg.trace = d->cfg.trace ? stdout : NULL;
	r = relay_new(d->event, port, &cfg, &d->relay);
	if (r < 0) {
		log_error("cannot start the relay: %s", strerror(-r));
		return r;
	}
	if (d->cfg.trace_pcap) {
		r = pcap_writer_open(d->cfg.trace_pcap, relay_port(d->relay)->lid, &d->pcap);
		if (r < 0) {
			log_error("cannot create %s (--trace-pcap): %s", d->cfg.trace_pcap,
				  strerror(-r));
			return r;
		}
		relay_add_event_sink(d->relay, pcap_writer_sink, d->pcap);
	}
	return 0;
}

/* The control socket served, when there is one: a failure is said, and
 * the daemon relays without it. */
static void daemon_start_control(Daemon *d)
{
	ControlConfig ccfg;
	int r;

	if (d->control_fd < 0)
		return;
	control_config_init(&ccfg, d->socket_path, d->control_path);
	ccfg.generation = d->cfg.generation;
	ccfg.vms = d->vms;
	ccfg.allow = (ListenerAllow){ .uids = d->cfg.allow_uids, .gids = d->cfg.allow_gids };
	ccfg.max_trace_readers = d->cfg.max_trace_readers;
	d->control_copy = fcntl(d->control_fd, F_DUPFD_CLOEXEC, 3);
	r = control_new(d->event, d->relay, fd_steal(&d->control_fd), &ccfg, &d->control);
	if (r < 0)
		log_warning("running without the control socket: cannot watch it: %s", strerror(-r));
}

int daemon_start(Daemon *d)
{
	ListenerAllow allow = { .uids = d->cfg.allow_uids, .gids = d->cfg.allow_gids };
	int r;

	if (d->started)
		return 0;
	d->started = true;
	(void)fd_store_setup(d->cfg.fd_store);
	if (d->cfg.trace)
		setvbuf(stdout, NULL, _IOLBF, 0);
	r = passed_fds_take(d);
	if (r >= 0)
		r = daemon_start_relay(d);
	if (r >= 0)
		r = listener_setup(d);
	if (r >= 0) {
		r = vms_setup(d);
		if (r == -EPERM)
			d->exit_status = DAEMON_EXIT_USAGE; /* an unsafe --vm-dir */
	}
	if (r < 0)
		return r;
	handoff_setup(d);
	/* What the predecessor's clients held is held again under this
	 * process's assignments and policy. */
	relay_vms_changed(d->relay);
	daemon_start_control(d);
	/* Last: every stored client is back before a new one comes. */
	r = listener_new(d->event, d->listen_fd, "main", &allow, LISTENER_RETRY_MS, on_accept, d,
			 &d->listener);
	if (r < 0) {
		log_error("cannot watch the main socket: %s", strerror(-r));
		return r;
	}
	r = daemon_watch(d);
	if (r < 0)
		return r;
	log_info("serving %s port %d (%s) on %s", d->cfg.device, d->cfg.port,
		 relay_port(d->relay)->roce ? "RoCE" : "InfiniBand",
		 d->socket_bound ? d->socket_path : "the socket passed by systemd");
	(void)sd_notify(0, "READY=1");
	notify_status(d);
	/* Enabling the watchdog pings at once: only after READY=1. */
	r = sd_event_set_watchdog(d->event, true);
	if (r < 0) {
		log_error("cannot set up the watchdog: %s", strerror(-r));
		return r;
	}
	d->exit_status = EXIT_SUCCESS;
	return 0;
}

int daemon_run(Daemon *d)
{
	int r = d->started ? 0 : daemon_start(d);

	if (r < 0 || d->exit_status != EXIT_SUCCESS)
		return d->exit_status;
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
		return DAEMON_EXIT_NO_DEVICE;
	if (r < 0) {
		/* Logged once: by the relay when it ended the loop. */
		if (!relay_ended_loop(d->relay))
			log_error("event loop failed: %s", strerror(-r));
		return EXIT_FAILURE;
	}
	log_info("shut down cleanly");
	return EXIT_SUCCESS;
}

sd_event *daemon_get_event(Daemon *d)
{
	return d->event;
}

Relay *daemon_get_relay(Daemon *d)
{
	return d->relay;
}
