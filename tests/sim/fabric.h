/* SPDX-License-Identifier: MIT */
/*
 * The simulated umad fabric as data: the CAs, ports and GID tables read from
 * DIR/fabric.conf, the sysfs tree derived from them, the shared generation
 * counter and the agent registry layout. Shared by libumad-sim.so and the
 * umad-sim CLI so that both always agree on the layout of a fabric directory.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_CA_NAME_LEN 20 /* UMAD_CA_NAME_LEN: libibumad's limit */
#define SIM_MAX_GID_LEN 1024
#define SIM_DEFAULT_GID_LEN 16
#define SIM_MAD_SIZE 256
#define SIM_UMAD_HDR 64
#define SIM_MAD_HDR 24

#define SIM_GID_TYPE_V1 "IB/RoCE v1"
#define SIM_GID_TYPE_V2 "RoCE v2"

enum sim_link { SIM_LINK_IB, SIM_LINK_ETH };

struct sim_gid_entry {
	uint8_t gid[16];
	char type[16];
	char ndev[32];
};

struct sim_port {
	char ca_name[SIM_CA_NAME_LEN];
	int num;
	int umad_id;
	enum sim_link link;
	uint16_t lid;
	uint16_t sm_lid;
	uint32_t cap_mask;
	bool present;
	uint32_t epoch; /* bumped by remove-port: fds opened before it stay dead */
	uint32_t stall_ms;     /* `stall`: how long the next receive waits */
	uint32_t stall_serial; /* bumped by every `stall`: each is served once */
	uint32_t send_stall_ms;	    /* `stall-send`: how long the next write waits */
	uint32_t send_stall_serial; /* bumped by every `stall-send`: one write serves each */
	int fail_register; /* `fail-register`: errno of send-only registrations, or 0 */
	unsigned gid_len;
	struct sim_gid_entry *gids;
};

struct sim_ca {
	char name[SIM_CA_NAME_LEN];
	uint64_t node_guid;
	unsigned nports;
	struct sim_port *ports; /* ports[i] is port number i + 1 */
};

struct sim_fabric {
	unsigned nca;
	struct sim_ca *cas;
	char *faults;                  /* default fault spec, NULL for none */
	unsigned unreachable_delay_ms; /* how long a send to a missing GID stalls */
};

/* The first page of DIR/state, mapped shared by every process on the fabric. */
struct sim_shared {
	uint64_t generation; /* bumped on every change of config or agent registry */
	uint32_t next_hi_tid;
	uint32_t reserved[13];
};

/** Frees a fabric model (NULL is fine). */
void sim_fabric_free(struct sim_fabric *f);
typedef struct sim_fabric sim_fabric;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(sim_fabric, sim_fabric_free)

/** Returns a new, empty fabric model. */
struct sim_fabric *sim_fabric_new(void);

/** Loads DIR/fabric.conf. Returns 0 or a negative errno; *err gets a message. */
int sim_fabric_load(const char *dir, struct sim_fabric **out, GError **err);

/** Writes DIR/fabric.conf atomically. */
int sim_fabric_save(const char *dir, const struct sim_fabric *f, GError **err);

/** Brings DIR/sys in line with @f; only changed files are rewritten (atomically). */
int sim_fabric_write_sysfs(const char *dir, const struct sim_fabric *f, GError **err);

/**
 * Publishes @f: saves the config, rewrites the sysfs tree, then bumps the
 * shared generation so that every process reloads. Call with the fabric lock.
 */
int sim_fabric_commit(const char *dir, const struct sim_fabric *f, GError **err);

/** Takes the fabric's edit lock (flock on DIR/lock). Returns the fd or -errno. */
int sim_fabric_lock(const char *dir);

/** Adds a RoCE CA with one Ethernet port whose GID table holds @gids (text). */
int sim_fabric_add_roce_ca(struct sim_fabric *f, const char *name,
			   const char *const *gids, unsigned ngids, unsigned gid_len);

/** Adds an InfiniBand CA with one port at @lid and the port GID at index 0. */
int sim_fabric_add_ib_ca(struct sim_fabric *f, const char *name, uint16_t lid,
			 unsigned gid_len);

/** Adds the CAs of a named preset ("two-hosts"). */
int sim_fabric_add_preset(struct sim_fabric *f, const char *preset);

/** Numbers the umad devices (umadN) in config order. */
void sim_fabric_number_ports(struct sim_fabric *f);

struct sim_ca *sim_fabric_find_ca(const struct sim_fabric *f, const char *name);
struct sim_port *sim_fabric_find_port(const struct sim_fabric *f, const char *ca, int num);

/** Returns the index of @gid in @p's table, or -1. */
int sim_port_find_gid(const struct sim_port *p, const uint8_t gid[16]);

/** True when the entry holds no GID (all zeros), as the kernel shows it. */
bool sim_gid_is_zero(const uint8_t gid[16]);

/** Parses any IPv6 text form, including the sysfs 8x4 form. */
int sim_gid_parse(const char *s, uint8_t gid[16]);

/** Formats as sysfs does: 8 groups of 4 lower-case hex digits. buf >= 40. */
void sim_gid_format_sysfs(const uint8_t gid[16], char *buf);

/** Formats the short inet_ntop form. buf >= 46. */
void sim_gid_format(const uint8_t gid[16], char *buf);

/** Maps DIR/state, creating it if needed. */
int sim_shared_map(const char *dir, struct sim_shared **out);

/** Bumps the generation; every process sees the change on its next call. */
void sim_shared_bump(struct sim_shared *sh);

/*
 * Agent registry: one file per (port, class, version, method), created with
 * link(). An entry is live while some process holds the umad fd (the FIFO)
 * it names: the fd's open file carries a shared flock, as the kernel's
 * agents live as long as their file, in whatever process its copies are.
 */
struct sim_reg {
	int pid;
	char fifo[128];
	unsigned agent;
	unsigned serial;
	unsigned hi_tid;
};

/** Path of the registry entry for a method of a class on a port. */
char *sim_reg_method_path(const char *dir, const char *ca, int port, unsigned mclass,
			  unsigned version, unsigned method, uint32_t oui);

/** Path of the registry entry that routes responses by hi_tid. */
char *sim_reg_tid_path(const char *dir, const char *ca, int port, unsigned hi_tid);

/** Reads a registry entry. Returns 0 or -errno. */
int sim_reg_read(const char *path, struct sim_reg *out);

/** True when no process holds the umad fd that @r's agent lives on. */
bool sim_reg_is_stale(const char *dir, const struct sim_reg *r);

/** True when no process holds the umad fd of FIFO @fifo (in DIR/sock). */
bool sim_fifo_is_orphan(const char *dir, const char *fifo);

/** Fixed size of every packet written into a port's FIFO. */
#define SIM_PKT_SIZE (16 + SIM_UMAD_HDR + SIM_MAD_SIZE)
#define SIM_PKT_MAGIC 0x554d5331u /* "UMS1" */

enum sim_pkt_kind { SIM_PKT_DATA = 1, SIM_PKT_ECHO = 2, SIM_PKT_WAKE = 3 };

struct sim_pkt_hdr {
	uint32_t magic;
	uint16_t kind;
	uint16_t mad_len; /* MAD bytes after the umad header: 256, or 24 for an echo */
	uint32_t serial;  /* registration serial of the receiving agent */
	uint32_t reserved;
};

/** Writes a WAKE packet into every FIFO of (ca, port); returns the count. */
int sim_wake_port(const char *dir, const char *ca, int port);
