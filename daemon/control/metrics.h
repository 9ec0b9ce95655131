/* SPDX-License-Identifier: MIT */
/*
 * The control socket's "metrics" answer (metrics.c): the daemon's numbers
 * in the Prometheus text exposition format, version 0.0.4, for a scraper
 * such as node_exporter's textfile collector (through rdmacm-muxctl
 * metrics).
 *
 * Two steps, so that the formatting can be tested without a daemon:
 * metrics_snapshot() copies the numbers out of the relay and the control
 * socket, metrics_format() writes the page of a snapshot.
 *
 * The page holds aggregates: nothing per client, per GID or per session,
 * so its size does not depend on how many there are. The one exception is
 * the label vm on the per-VM families (the ib_cm groups per attribute,
 * refusals, clients, sessions, GIDs): one series per VM the operator
 * assigned (at most --max-vms) and one, vm="", for the clients of the
 * shared socket, so that the page stays bounded by the assignments (a few
 * KiB, plus about 5 KiB per VM). Every sample carries the labels device
 * and port; every name starts with rdmacm_mux_.
 */
#ifndef RDMACM_MUX_METRICS_H
#define RDMACM_MUX_METRICS_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

#include "control.h"
#include "relay.h"
#include "session-table.h"

/* One VM's numbers (or, with name "", those of the shared socket). */
typedef struct MetricsVm {
	const char *name; /* not owned */
	uint32_t clients;
	uint32_t sessions;
	uint32_t gids; /* registered by its clients */
	VmCounters counters;
} MetricsVm;

/* Every number the page shows, as at one moment. */
typedef struct MetricsSnapshot {
	const char *device; /* not owned; any bytes (escaped on the page) */
	int port;
	const char *link_layer; /* "InfiniBand" or "Ethernet" */
	const char *version;
	uint16_t lid;
	int64_t pid;
	uint64_t uptime_ms;
	unsigned generation; /* re-executions behind this process image */
	uint32_t clients;
	uint32_t gids;
	uint32_t sessions[SESSION_STATE_COUNT]; /* live sessions by state */
	uint64_t session_memory_bytes;
	RelayCounters counters;
	uint64_t client_queued_frames;	   /* frames waiting for all clients */
	uint32_t client_queued_frames_max; /* for the client with the most */
	uint32_t sender_queued;		   /* MADs with the sender processes */
	uint64_t sender_written;	   /* MADs they wrote, since the start */
	uint32_t senders_live;		   /* sender processes that take MADs */
	uint32_t senders_wanted;	   /* --senders */
	uint64_t sender_timeouts;	   /* writes stopped at the deadline */
	uint64_t sender_start_failures;	   /* senders that could not start */
	ControlStats control;
	uint32_t max_trace_readers;
	GArray *vms; /* MetricsVm: vm="" first, then by name; NULL: no VM families */
} MetricsSnapshot;

/**
 * metrics_snapshot() - fill @ret from @relay and the control socket's
 * @cfg and @stats. Walks every client and every session once (the counts
 * by state are not kept anywhere else): linear in their number, a few
 * milliseconds for a million sessions, and the answer stays small.
 * @ret->device points into the relay's port, the VMs' names into the VM
 * table: valid until the loop runs on. Free with metrics_snapshot_clear().
 */
void metrics_snapshot(Relay *relay, const ControlConfig *cfg, const ControlStats *stats,
		      MetricsSnapshot *ret);
void metrics_snapshot_clear(MetricsSnapshot *m);

/**
 * metrics_format() - append the page for @m to @out: every family with its
 * "# HELP" and "# TYPE" lines before its samples, counters named *_total,
 * label values escaped.
 */
void metrics_format(const MetricsSnapshot *m, GString *out);

/**
 * metrics_append_label_value() - append the @len bytes at @s to @out as
 * the inside of a label value: backslash, double quote and line feed
 * escaped as the format says; bytes that are not UTF-8, and the other
 * control characters, become U+FFFD (a page must be UTF-8 throughout).
 */
void metrics_append_label_value(GString *out, const char *s, size_t len);

#endif /* RDMACM_MUX_METRICS_H */
