/* SPDX-License-Identifier: MIT */
/*
 * The control socket: operator access for rdmacm-muxctl; read-only but for
 * the VM commands, which only root (or the daemon's own user) may run.
 *
 * A UNIX stream socket next to the main one, "<main socket path>.ctl",
 * root's only (mode 0600) unless --control-mode/--control-group say
 * otherwise, and behind the main socket's uid/gid allow-lists too: it
 * shows every client's pid, uid and GIDs, and a live trace of their MADs.
 * The daemon serves it on its own sd-event loop, every fd non-blocking and
 * CLOEXEC.
 *
 * Protocol (text, one command per connection):
 *
 *   client -> daemon   one line: COMMAND [json] "\n"
 *                      COMMAND is status, clients, sessions, counters,
 *                      metrics, trace, vms or help; "\r\n" is accepted; at
 *                      most CONTROL_MAX_LINE bytes, printable ASCII only.
 *                      Or one of the privileged VM commands, answered with
 *                      one line (control-vms.h):
 *                        vm add NAME key=value...
 *                        vm set NAME key=value...
 *                        vm del NAME
 *   daemon -> client   the answer, then the daemon closes the connection.
 *                      Text answers are tables; with "json", one JSON
 *                      document followed by "\n". metrics is text only:
 *                      the Prometheus text format (metrics.h), aggregates
 *                      only, so its size does not grow with the clients.
 *                      trace streams one line per MAD event (text, or one
 *                      JSON object per line) until the client closes. Its
 *                      first line is "# tracing DEV port N" (JSON:
 *                      {"tracing":{...}}), written once the daemon is
 *                      listening for events. A reader that falls behind by
 *                      more than the output buffer loses events; the next
 *                      line it gets says how many: "# N events lost" (JSON:
 *                      {"lost":N}).
 *   errors             a single line "error: MESSAGE\n", then close: an
 *                      unknown command, a line that is too long or not
 *                      printable, too many control connections, too many
 *                      trace readers, a VM command from a peer that is
 *                      neither root nor the daemon's user, a VM command
 *                      that changed nothing (the message says why).
 *
 * Limits: CONTROL_MAX_CONNECTIONS at once, of which max_trace_readers may
 * trace; the command must arrive within 5 s and a snapshot answer must be
 * read within 30 s, or the connection is closed; a client that sends more
 * than CONTROL_MAX_AFTER_COMMAND bytes after its command is closed, even
 * before its answer is out; closing never waits for a client's input to
 * end; a trace reader whose buffer stays full for trace_shed_usec is
 * closed (it loses events before that, and formatting them costs the relay
 * nothing); a snapshot answer is cut at the output limit (what was left
 * out is counted in the answer: "# N more ... not shown", JSON "omitted").
 */
#ifndef RDMACM_MUX_CONTROL_H
#define RDMACM_MUX_CONTROL_H

#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "listener.h"
#include "relay.h"
#include "vm-host.h"

/* Room for "vm add" with VM_MAX_GIDS GIDs and VM_MAX_PREFIXES prefixes. */
#define CONTROL_MAX_LINE 4096
#define CONTROL_MAX_WORDS 128
#define CONTROL_MAX_CONNECTIONS 16
#define CONTROL_MAX_ANSWER (8u << 20)	   /* bytes of one snapshot answer */
#define CONTROL_MAX_TRACE_BUFFER (256u << 10) /* bytes a trace reader may lag */
#define CONTROL_MAX_TRACE_READERS 4
/* A trace reader whose buffer stays full this long is closed. */
#define CONTROL_TRACE_SHED_USEC (2 * 1000000u)
/* Bytes a client may send after its command before it is closed: one
 * more line's worth. */
#define CONTROL_MAX_AFTER_COMMAND CONTROL_MAX_LINE

typedef struct ControlConfig {
	const char *socket_path;  /* the main socket, shown by status */
	const char *control_path; /* this socket, shown by status */
	uint64_t started_usec;	  /* monotonic start of the daemon, for uptime */
	unsigned generation;	  /* re-executions (SIGHUP) behind this process image */
	ListenerAllow allow;	  /* who may connect: the main socket's allow-lists */
	VmHost *vms;		  /* the VMs (vms, vm add/set/del); NULL: none */
	uint32_t max_trace_readers;
	uint64_t trace_shed_usec;
	uint32_t max_connections;
	size_t max_answer;
	size_t max_trace_buffer;
	uint64_t command_timeout_usec;
	uint64_t answer_timeout_usec;
} ControlConfig;

/* The defaults above, for @socket_path and @control_path. */
void control_config_init(ControlConfig *cfg, const char *socket_path, const char *control_path);

/* What the control socket did, for status. */
typedef struct ControlStats {
	uint32_t trace_readers;		/* tracing now */
	uint64_t trace_readers_refused; /* over max_trace_readers */
	uint64_t trace_readers_shed;	/* closed for staying behind */
	uint64_t closed_for_sending;	/* kept sending after the command */
} ControlStats;

typedef struct Control Control;

/**
 * control_new() - serve the listening socket @listen_fd (taken over, also
 * on failure) on @event, answering from @relay.
 *
 * @cfg's strings must outlive the Control. Must be freed before @relay.
 * Return: 0 or a negative errno (not logged: the caller decides what
 * serving without a control socket means).
 */
int control_new(sd_event *event, Relay *relay, int listen_fd, const ControlConfig *cfg,
		Control **ret);
/* Close every control connection and the listener. NULL-safe. */
void control_free(Control *c);

#endif /* RDMACM_MUX_CONTROL_H */
