/* SPDX-License-Identifier: MIT */
/*
 * The daemon (daemon.c): the object at the top of daemon/, which main.c
 * makes from the command line. It owns the life cycle: the start order
 * (the passed fds, the wait for the port, the port from the fd store or
 * new, the relay, the listening sockets, the VMs, the clients the store
 * kept, the control socket, the main socket last), the fd budget, the
 * signals, systemd's notifications, the one sd-event loop, the hand-off at
 * SIGTERM and the re-execution at SIGHUP.
 *
 * Where it meets the system (the port, the fds passed at start, the new
 * image at a re-execution) is a table of edges in its configuration:
 * daemon_config_init() gives the real ones, and a unit test its own
 * (test-daemon.c drives the whole life cycle in-process).
 *
 * Functions return 0 or a negative errno (core/util.h), but daemon_run(),
 * which returns what the process exits with.
 */
#ifndef RDMACM_MUX_DAEMON_H
#define RDMACM_MUX_DAEMON_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "relay.h"
#include "umad-port.h"
#include "vm-spec.h"

/* The listening sockets' modes, unless --mode or --control-mode say. */
#define DAEMON_SOCKET_MODE 0660
/* The control socket shows every client and their MADs: root's only. */
#define DAEMON_CONTROL_MODE 0600

/* Exit statuses beyond EXIT_SUCCESS and EXIT_FAILURE (rdmacm-mux(8)). */
#define DAEMON_EXIT_USAGE 2
#define DAEMON_EXIT_CM_OWNED 3
#define DAEMON_EXIT_NO_DEVICE 4

/* Named fds: what a start is passed, what a re-execution passes on. */
typedef struct DaemonFds {
	GPtrArray *names; /* char *, owned */
	GArray *fds;	  /* int, one per name */
} DaemonFds;

/* Where the daemon meets the system. */
typedef struct DaemonEdges {
	/* Open @dev/@port and register the CM agent: umad_port_open(). */
	int (*port_open)(void *userdata, const char *dev, int port, UmadPort **ret);
	/* Take a stored umad fd over: umad_port_adopt(). */
	int (*port_adopt)(void *userdata, const char *dev, int port, int fd, int agent,
			  UmadPort **ret);
	/*
	 * Replace the process image with @exe (@argv), @fds passed under their
	 * names as socket activation would, @generation its re-executions.
	 * The real one returns only when it could not, with a negative errno
	 * (the daemon goes on as it was). A test's may take copies and return
	 * 0: the loop then ends as at a hand-off.
	 */
	int (*reexec)(void *userdata, const char *exe, char **argv, const DaemonFds *fds,
		      unsigned generation);
	/* The fds passed at start, taken over; NULL: socket activation's
	 * (LISTEN_FDS, LISTEN_FDNAMES). */
	const DaemonFds *passed;
	void *userdata;
} DaemonEdges;

/*
 * What the daemon is made with: main.c's options. The strings and arrays
 * are the caller's, and outlive the daemon. daemon_config_init() gives
 * every default (the relay's are relay_config_init()'s).
 */
typedef struct DaemonConfig {
	const char *device;
	int port;
	const char *socket_path;   /* NULL: socket_prefix-DEV-PORT */
	const char *socket_prefix; /* NULL: RDMACM_MUX_SOCKET_PREFIX */
	const char *group;	   /* of the main socket (and the VMs'), or NULL */
	const char *mode;	   /* of the main socket, octal, or NULL: 0660 */
	const char *control_group; /* NULL: root's only */
	const char *control_mode;  /* NULL: 0600 */
	uint32_t max_trace_readers;
	const GArray *allow_uids; /* guint; NULL or empty: anyone */
	const GArray *allow_gids;
	RelayConfig relay; /* its send_workers, trace and clock are the daemon's */
	uint32_t wait_for_device_s;
	const char *vm_dir;  /* NULL: the main socket's path + ".vm" */
	const char *vms_dir; /* NULL: RDMACM_MUX_VMS_DIR; "": none */
	VmGidPolicy gid_policy;
	uint32_t max_vms;
	uint32_t max_vm_clients;
	bool allow_wide_prefix; /* a VM's prefix may be shorter than /64 */
	bool fd_store;	       /* keep state in the supervisor's fd store, when there is one */
	bool trace;	       /* a line per MAD on stdout */
	const char *trace_pcap; /* or NULL */
	const char *exe;       /* this binary, for a re-execution (NULL: none) */
	char **argv;	       /* the command line as given, for it */
	unsigned generation;   /* re-executions behind this image */
	DaemonEdges edges;
} DaemonConfig;

/* Fill @cfg with every default and the real edges. */
void daemon_config_init(DaemonConfig *cfg);

typedef struct Daemon Daemon;

/**
 * daemon_new() - a daemon of @cfg (copied; see DaemonConfig for what it
 * points to): raises the fd limit and fits --max-clients and --max-vms
 * into it (said when it must), blocks the signals the loop handles.
 * Nothing is opened yet.
 */
Daemon *daemon_new(const DaemonConfig *cfg);
void daemon_free(Daemon *d);

/**
 * daemon_start() - everything up to READY=1, in the start order
 * (ARCHITECTURE.md). Failures are logged.
 * Return: 0; -EINTR when a signal ended the wait for the port; -EBUSY
 * when the CM class is owned; -ENODEV when the device or port is not
 * there; -EPERM when --vm-dir is not safe; another negative errno.
 */
int daemon_start(Daemon *d);
/**
 * daemon_run() - daemon_start() unless done, the loop until a signal or
 * the relay ends it, and the last steps (the senders' last answers, the
 * umad fd out of the store unless handing off, the counters).
 * Return: what the process exits with (like main(), not an errno):
 * EXIT_SUCCESS after a clean stop (or one while waiting for the port),
 * DAEMON_EXIT_USAGE (an unsafe --vm-dir), DAEMON_EXIT_CM_OWNED,
 * DAEMON_EXIT_NO_DEVICE (at start, or the device went away), or
 * EXIT_FAILURE.
 */
int daemon_run(Daemon *d);

/* SIGTERM's work: with the fd store, hand off (the successor takes the
 * rest over); without, a plain stop. Ends the loop. */
void daemon_stop(Daemon *d);
/* SIGHUP's work: the new image of the binary takes everything over in
 * this process; goes on as it was when it cannot. */
void daemon_reexec(Daemon *d);

/* For tests: the loop to turn, and the relay to look at. */
sd_event *daemon_get_event(Daemon *d);
Relay *daemon_get_relay(Daemon *d);

#endif /* RDMACM_MUX_DAEMON_H */
