/* SPDX-License-Identifier: MIT */
/*
 * Owns the fabric directory layout: fabric.conf (GKeyFile) <-> struct
 * sim_fabric, the sysfs tree generated from it, DIR/state (the shared
 * generation counter) and the names of registry entries and FIFOs.
 */
#include "fabric.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONF_NAME "fabric.conf"

static int set_error(GError **err, int rc, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

static int set_error(GError **err, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && !*err) {
		va_start(ap, fmt);
		g_autofree char *msg = g_strdup_vprintf(fmt, ap);
		va_end(ap);
		g_set_error_literal(err, G_FILE_ERROR, g_file_error_from_errno(-rc), msg);
	}
	return rc;
}

struct sim_fabric *sim_fabric_new(void)
{
	return g_new0(struct sim_fabric, 1);
}

void sim_fabric_free(struct sim_fabric *f)
{
	if (!f)
		return;
	for (unsigned i = 0; i < f->nca; i++) {
		for (unsigned p = 0; p < f->cas[i].nports; p++)
			g_free(f->cas[i].ports[p].gids);
		g_free(f->cas[i].ports);
	}
	g_free(f->cas);
	g_free(f->faults);
	g_free(f);
}

bool sim_gid_is_zero(const uint8_t gid[16])
{
	static const uint8_t zero[16];

	return memcmp(gid, zero, 16) == 0;
}

int sim_gid_parse(const char *s, uint8_t gid[16])
{
	if (!s || inet_pton(AF_INET6, s, gid) != 1)
		return -EINVAL;
	return 0;
}

void sim_gid_format_sysfs(const uint8_t gid[16], char *buf)
{
	for (int i = 0; i < 8; i++)
		sprintf(buf + i * 5, "%02x%02x%s", gid[2 * i], gid[2 * i + 1], i < 7 ? ":" : "");
}

void sim_gid_format(const uint8_t gid[16], char *buf)
{
	if (!inet_ntop(AF_INET6, gid, buf, 46))
		strcpy(buf, "?");
}

struct sim_ca *sim_fabric_find_ca(const struct sim_fabric *f, const char *name)
{
	for (unsigned i = 0; name && i < f->nca; i++)
		if (strcmp(f->cas[i].name, name) == 0)
			return &f->cas[i];
	return NULL;
}

struct sim_port *sim_fabric_find_port(const struct sim_fabric *f, const char *ca, int num)
{
	struct sim_ca *c = sim_fabric_find_ca(f, ca);

	if (!c || num < 1 || (unsigned)num > c->nports)
		return NULL;
	return &c->ports[num - 1];
}

int sim_port_find_gid(const struct sim_port *p, const uint8_t gid[16])
{
	if (sim_gid_is_zero(gid))
		return -1;
	for (unsigned i = 0; i < p->gid_len; i++)
		if (memcmp(p->gids[i].gid, gid, 16) == 0)
			return (int)i;
	return -1;
}

void sim_fabric_number_ports(struct sim_fabric *f)
{
	int id = 0;

	for (unsigned i = 0; i < f->nca; i++)
		for (unsigned p = 0; p < f->cas[i].nports; p++)
			f->cas[i].ports[p].umad_id = id++;
}

static struct sim_ca *add_ca(struct sim_fabric *f, const char *name, unsigned nports,
			     unsigned gid_len)
{
	struct sim_ca *ca;

	f->cas = g_renew(struct sim_ca, f->cas, f->nca + 1);
	ca = &f->cas[f->nca++];
	memset(ca, 0, sizeof(*ca));
	g_strlcpy(ca->name, name, sizeof(ca->name));
	/* A GUID unique within the fabric, stable for a given config order. */
	ca->node_guid = 0x0002c90300000000ull | (uint64_t)(0x100 + f->nca);
	ca->nports = nports;
	ca->ports = g_new0(struct sim_port, nports);
	for (unsigned p = 0; p < nports; p++) {
		struct sim_port *port = &ca->ports[p];

		g_strlcpy(port->ca_name, name, sizeof(port->ca_name));
		port->num = (int)p + 1;
		port->present = true;
		port->cap_mask = 0x00010000;
		port->gid_len = gid_len;
		port->gids = g_new0(struct sim_gid_entry, gid_len);
	}
	sim_fabric_number_ports(f);
	return ca;
}

static int check_new_ca(const struct sim_fabric *f, const char *name, unsigned gid_len)
{
	if (!name || !*name || strlen(name) >= SIM_CA_NAME_LEN || strchr(name, '.') ||
	    strchr(name, '/') || strchr(name, ' '))
		return -EINVAL;
	if (sim_fabric_find_ca(f, name))
		return -EEXIST;
	if (gid_len < 1 || gid_len > SIM_MAX_GID_LEN)
		return -EINVAL;
	return 0;
}

int sim_fabric_add_roce_ca(struct sim_fabric *f, const char *name,
			   const char *const *gids, unsigned ngids, unsigned gid_len)
{
	struct sim_ca *ca;
	struct sim_port *p;
	int rc = check_new_ca(f, name, gid_len);

	if (rc < 0)
		return rc;
	if (ngids > gid_len)
		return -ENOSPC;
	for (unsigned i = 0; i < ngids; i++) {
		uint8_t g[16];

		if (sim_gid_parse(gids[i], g) < 0)
			return -EINVAL;
	}
	ca = add_ca(f, name, 1, gid_len);
	p = &ca->ports[0];
	p->link = SIM_LINK_ETH;
	for (unsigned i = 0; i < ngids; i++) {
		sim_gid_parse(gids[i], p->gids[i].gid);
		g_strlcpy(p->gids[i].type, SIM_GID_TYPE_V2, sizeof(p->gids[i].type));
		g_snprintf(p->gids[i].ndev, sizeof(p->gids[i].ndev), "%s0", name);
	}
	return 0;
}

int sim_fabric_add_ib_ca(struct sim_fabric *f, const char *name, uint16_t lid, unsigned gid_len)
{
	struct sim_ca *ca;
	struct sim_port *p;
	uint64_t guid;
	int rc = check_new_ca(f, name, gid_len);

	if (rc < 0)
		return rc;
	if (lid == 0 || lid >= 0xc000)
		return -EINVAL;
	ca = add_ca(f, name, 1, gid_len);
	p = &ca->ports[0];
	p->link = SIM_LINK_IB;
	p->lid = lid;
	p->sm_lid = 1;
	/* The port GID is the default subnet prefix plus a port GUID made from the LID. */
	guid = 0x0002c90300000000ull | lid;
	p->gids[0].gid[0] = 0xfe;
	p->gids[0].gid[1] = 0x80;
	for (int i = 0; i < 8; i++)
		p->gids[0].gid[8 + i] = (uint8_t)(guid >> (56 - 8 * i));
	g_strlcpy(p->gids[0].type, SIM_GID_TYPE_V1, sizeof(p->gids[0].type));
	return 0;
}

int sim_fabric_add_preset(struct sim_fabric *f, const char *preset)
{
	if (g_strcmp0(preset, "two-hosts") == 0) {
		for (int h = 0; h < 2; h++) {
			char *gids[10];
			int rc;

			gids[0] = g_strdup(h == 0 ? "fe80::a" : "fe80::b");
			gids[1] = g_strdup_printf("::ffff:10.0.0.%d", h + 1);
			for (int i = 0; i < 8; i++)
				gids[2 + i] = g_strdup_printf("::ffff:10.0.%d.%d", h + 1, i + 1);
			rc = sim_fabric_add_roce_ca(f, h == 0 ? "simA" : "simB",
						    (const char *const *)gids, 10,
						    SIM_DEFAULT_GID_LEN);
			for (int i = 0; i < 10; i++)
				g_free(gids[i]);
			if (rc < 0)
				return rc;
		}
		return 0;
	}
	if (g_strcmp0(preset, "ib") == 0) {
		int rc = sim_fabric_add_ib_ca(f, "simC", 3, SIM_DEFAULT_GID_LEN);

		return rc < 0 ? rc : sim_fabric_add_ib_ca(f, "simD", 4, SIM_DEFAULT_GID_LEN);
	}
	return -ENOENT;
}

static char *ca_group(const char *ca)
{
	return g_strdup_printf("ca %s", ca);
}

static char *port_group(const char *ca, int port)
{
	return g_strdup_printf("port %s %d", ca, port);
}

static int load_port(GKeyFile *kf, struct sim_port *p, GError **err)
{
	g_autofree char *grp = port_group(p->ca_name, p->num);
	g_autofree char *ll = g_key_file_get_string(kf, grp, "link_layer", NULL);
	g_autofree char *present = g_key_file_get_string(kf, grp, "present", NULL);
	g_autofree char *cap = g_key_file_get_string(kf, grp, "cap_mask", NULL);
	gint64 len = g_key_file_get_int64(kf, grp, "gid_table_len", NULL);

	if (!ll)
		return set_error(err, -EINVAL, "[%s]: no link_layer", grp);
	if (strcmp(ll, "Ethernet") == 0)
		p->link = SIM_LINK_ETH;
	else if (strcmp(ll, "InfiniBand") == 0)
		p->link = SIM_LINK_IB;
	else
		return set_error(err, -EINVAL, "[%s]: bad link_layer %s", grp, ll);
	p->lid = (uint16_t)g_key_file_get_integer(kf, grp, "lid", NULL);
	p->sm_lid = (uint16_t)g_key_file_get_integer(kf, grp, "sm_lid", NULL);
	p->cap_mask = cap ? (uint32_t)g_ascii_strtoull(cap, NULL, 0) : 0x00010000;
	p->present = !present || strcmp(present, "false") != 0;
	p->epoch = (uint32_t)g_key_file_get_int64(kf, grp, "epoch", NULL);
	p->stall_ms = (uint32_t)g_key_file_get_int64(kf, grp, "stall_ms", NULL);
	p->stall_serial = (uint32_t)g_key_file_get_int64(kf, grp, "stall_serial", NULL);
	p->send_stall_ms = (uint32_t)g_key_file_get_int64(kf, grp, "send_stall_ms", NULL);
	p->send_stall_serial = (uint32_t)g_key_file_get_int64(kf, grp, "send_stall_serial", NULL);
	p->fail_register = g_key_file_get_integer(kf, grp, "fail_register", NULL);
	if (len < 1 || len > SIM_MAX_GID_LEN)
		len = SIM_DEFAULT_GID_LEN;
	p->gid_len = (unsigned)len;
	p->gids = g_new0(struct sim_gid_entry, p->gid_len);
	for (unsigned i = 0; i < p->gid_len; i++) {
		char key[16];
		gsize n = 0;

		g_snprintf(key, sizeof(key), "gid%u", i);
		g_auto(GStrv) v = g_key_file_get_string_list(kf, grp, key, &n, NULL);
		if (!v)
			continue;
		if (n < 1 || sim_gid_parse(v[0], p->gids[i].gid) < 0)
			return set_error(err, -EINVAL, "[%s] %s: bad GID", grp, key);
		g_strlcpy(p->gids[i].type,
			  n > 1 && *v[1] ? v[1]
				       : (p->link == SIM_LINK_ETH ? SIM_GID_TYPE_V2 : SIM_GID_TYPE_V1),
			  sizeof(p->gids[i].type));
		if (n > 2)
			g_strlcpy(p->gids[i].ndev, v[2], sizeof(p->gids[i].ndev));
	}
	return 0;
}

int sim_fabric_load(const char *dir, struct sim_fabric **out, GError **err)
{
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_autofree char *path = g_build_filename(dir, CONF_NAME, NULL);
	g_autoptr(sim_fabric) f = sim_fabric_new();
	g_auto(GStrv) cas = NULL;
	gsize nca = 0;
	int rc;

	if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, err))
		return -ENOENT;
	cas = g_key_file_get_string_list(kf, "fabric", "cas", &nca, NULL);
	f->faults = g_key_file_get_string(kf, "fabric", "faults", NULL);
	f->unreachable_delay_ms =
		(unsigned)g_key_file_get_integer(kf, "fabric", "unreachable_delay_ms", NULL);
	f->cas = g_new0(struct sim_ca, nca);
	for (gsize i = 0; i < nca; i++) {
		g_autofree char *grp = ca_group(cas[i]);
		g_autofree char *guid = g_key_file_get_string(kf, grp, "node_guid", NULL);
		struct sim_ca *ca = &f->cas[f->nca++];
		gint64 np = g_key_file_get_int64(kf, grp, "ports", NULL);

		if (strlen(cas[i]) >= SIM_CA_NAME_LEN || np < 1 || np > 9)
			return set_error(err, -EINVAL, "[%s]: bad name or port count", grp);
		g_strlcpy(ca->name, cas[i], sizeof(ca->name));
		ca->node_guid = guid ? g_ascii_strtoull(guid, NULL, 0) : 0;
		ca->nports = (unsigned)np;
		ca->ports = g_new0(struct sim_port, ca->nports);
		for (unsigned p = 0; p < ca->nports; p++) {
			g_strlcpy(ca->ports[p].ca_name, ca->name, sizeof(ca->ports[p].ca_name));
			ca->ports[p].num = (int)p + 1;
			rc = load_port(kf, &ca->ports[p], err);
			if (rc < 0)
				return rc;
		}
	}
	sim_fabric_number_ports(f);
	*out = g_steal_pointer(&f);
	return 0;
}

int sim_fabric_save(const char *dir, const struct sim_fabric *f, GError **err)
{
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_autofree char *path = g_build_filename(dir, CONF_NAME, NULL);
	g_autofree const char **names = g_new0(const char *, f->nca + 1);
	g_autofree char *data = NULL;
	gsize len = 0;

	for (unsigned i = 0; i < f->nca; i++)
		names[i] = f->cas[i].name;
	g_key_file_set_comment(kf, NULL, NULL,
			       " Simulated umad fabric (tests/sim). Edit with umad-sim.", NULL);
	g_key_file_set_string_list(kf, "fabric", "cas", names, f->nca);
	g_key_file_set_integer(kf, "fabric", "unreachable_delay_ms", (int)f->unreachable_delay_ms);
	if (f->faults)
		g_key_file_set_string(kf, "fabric", "faults", f->faults);
	for (unsigned i = 0; i < f->nca; i++) {
		const struct sim_ca *ca = &f->cas[i];
		g_autofree char *grp = ca_group(ca->name);
		g_autofree char *guid = g_strdup_printf("0x%016" G_GINT64_MODIFIER "x", ca->node_guid);

		g_key_file_set_string(kf, grp, "node_guid", guid);
		g_key_file_set_integer(kf, grp, "ports", (int)ca->nports);
		for (unsigned p = 0; p < ca->nports; p++) {
			const struct sim_port *port = &ca->ports[p];
			g_autofree char *pg = port_group(ca->name, port->num);
			g_autofree char *cap = g_strdup_printf("0x%08x", port->cap_mask);

			g_key_file_set_string(kf, pg, "link_layer",
					      port->link == SIM_LINK_ETH ? "Ethernet" : "InfiniBand");
			g_key_file_set_integer(kf, pg, "lid", port->lid);
			g_key_file_set_integer(kf, pg, "sm_lid", port->sm_lid);
			g_key_file_set_string(kf, pg, "cap_mask", cap);
			g_key_file_set_boolean(kf, pg, "present", port->present);
			g_key_file_set_int64(kf, pg, "epoch", port->epoch);
			if (port->fail_register)
				g_key_file_set_integer(kf, pg, "fail_register", port->fail_register);
			if (port->send_stall_serial) {
				g_key_file_set_int64(kf, pg, "send_stall_ms", port->send_stall_ms);
				g_key_file_set_int64(kf, pg, "send_stall_serial",
						     port->send_stall_serial);
			}
			if (port->stall_serial) {
				g_key_file_set_int64(kf, pg, "stall_ms", port->stall_ms);
				g_key_file_set_int64(kf, pg, "stall_serial", port->stall_serial);
			}
			g_key_file_set_integer(kf, pg, "gid_table_len", (int)port->gid_len);
			for (unsigned k = 0; k < port->gid_len; k++) {
				const struct sim_gid_entry *e = &port->gids[k];
				char key[16], txt[46];
				const char *v[3] = { txt, e->type, e->ndev };

				if (sim_gid_is_zero(e->gid))
					continue;
				sim_gid_format(e->gid, txt);
				g_snprintf(key, sizeof(key), "gid%u", k);
				g_key_file_set_string_list(kf, pg, key, v, 3);
			}
		}
	}
	data = g_key_file_to_data(kf, &len, NULL);
	if (!g_file_set_contents_full(path, data, (gssize)len, G_FILE_SET_CONTENTS_CONSISTENT,
				      0644, err))
		return -EIO;
	return 0;
}

/* Rewrites a file only when its content differs, atomically (rename). */
static int put_file(const char *path, const char *content, GError **err)
{
	g_autofree char *old = NULL;
	g_autofree char *parent = g_path_get_dirname(path);
	gsize len = 0;

	if (g_file_get_contents(path, &old, &len, NULL) && len == strlen(content) &&
	    memcmp(old, content, len) == 0)
		return 0;
	if (g_mkdir_with_parents(parent, 0755) < 0)
		return set_error(err, -errno, "mkdir %s: %s", parent, g_strerror(errno));
	if (!g_file_set_contents_full(path, content, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0644, err))
		return -EIO;
	return 0;
}

static char *fmt_guid(uint64_t g)
{
	return g_strdup_printf("%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
			       (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff,
			       (unsigned)g & 0xffff);
}

static int write_port_sysfs(const char *pdir, const struct sim_port *p, GError **err)
{
	bool up = p->present;
	bool eth = p->link == SIM_LINK_ETH;
	struct {
		const char *name;
		char *value;
	} files[] = {
		{ "lid", g_strdup_printf("0x%x\n", eth ? 0 : p->lid) },
		{ "sm_lid", g_strdup_printf("0x%x\n", eth ? 0 : p->sm_lid) },
		{ "sm_sl", g_strdup("0\n") },
		{ "lid_mask_count", g_strdup("0\n") },
		{ "state", g_strdup(up ? "4: ACTIVE\n" : "1: DOWN\n") },
		{ "phys_state", g_strdup(up ? "5: LinkUp\n" : "3: Disabled\n") },
		{ "rate", g_strdup(eth ? "10 Gb/sec (1X QDR)\n" : "100 Gb/sec (4X EDR)\n") },
		{ "cap_mask", g_strdup_printf("0x%08x\n", p->cap_mask) },
		{ "link_layer", g_strdup(eth ? "Ethernet\n" : "InfiniBand\n") },
		{ "pkeys/0", g_strdup("0xffff\n") },
	};
	int rc = 0;

	for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
		g_autofree char *path = g_build_filename(pdir, files[i].name, NULL);

		if (rc == 0)
			rc = put_file(path, files[i].value, err);
		g_free(files[i].value);
	}
	for (unsigned k = 0; rc == 0 && k < p->gid_len; k++) {
		const struct sim_gid_entry *e = &p->gids[k];
		/* A removed port shows an empty table, so routing and sysfs agree. */
		bool valid = up && !sim_gid_is_zero(e->gid);
		static const uint8_t zero[16];
		char name[64], gid[48], type[24], ndev[40];
		g_autofree char *gpath = NULL, *tpath = NULL, *npath = NULL;

		sim_gid_format_sysfs(valid ? e->gid : zero, gid);
		strcat(gid, "\n");
		g_snprintf(type, sizeof(type), "%s\n", e->type);
		g_snprintf(ndev, sizeof(ndev), "%s\n", e->ndev);
		g_snprintf(name, sizeof(name), "gids/%u", k);
		gpath = g_build_filename(pdir, name, NULL);
		g_snprintf(name, sizeof(name), "gid_attrs/types/%u", k);
		tpath = g_build_filename(pdir, name, NULL);
		g_snprintf(name, sizeof(name), "gid_attrs/ndevs/%u", k);
		npath = g_build_filename(pdir, name, NULL);
		rc = put_file(gpath, gid, err);
		if (rc == 0)
			rc = put_file(tpath, valid ? type : "", err);
		if (rc == 0)
			rc = put_file(npath, valid && *e->ndev ? ndev : "", err);
	}
	return rc;
}

int sim_fabric_write_sysfs(const char *dir, const struct sim_fabric *f, GError **err)
{
	g_autofree char *mad = g_build_filename(dir, "sys/class/infiniband_mad", NULL);
	g_autofree char *abi = g_build_filename(mad, "abi_version", NULL);
	int rc = put_file(abi, "5\n", err);

	for (unsigned i = 0; rc == 0 && i < f->nca; i++) {
		const struct sim_ca *ca = &f->cas[i];
		g_autofree char *cdir = g_build_filename(dir, "sys/class/infiniband", ca->name, NULL);
		g_autofree char *guid = fmt_guid(ca->node_guid);
		g_autofree char *guidnl = g_strconcat(guid, "\n", NULL);
		g_autofree char *desc = g_strdup_printf("%s simulated HCA\n", ca->name);
		const char *names[] = { "node_type", "node_guid", "sys_image_guid", "fw_ver",
					"hw_rev",    "hca_type",  "node_desc" };
		const char *values[] = { "1: CA\n", guidnl, guidnl, "1.0.0\n", "0x0\n", "SIM\n", desc };

		for (size_t k = 0; rc == 0 && k < G_N_ELEMENTS(names); k++) {
			g_autofree char *path = g_build_filename(cdir, names[k], NULL);

			rc = put_file(path, values[k], err);
		}
		for (unsigned p = 0; rc == 0 && p < ca->nports; p++) {
			const struct sim_port *port = &ca->ports[p];
			char num[16];
			g_autofree char *pdir = NULL, *udir = NULL, *ibdev = NULL, *uport = NULL;
			g_autofree char *cname = g_strconcat(ca->name, "\n", NULL);
			g_autofree char *pnum = g_strdup_printf("%d\n", port->num);

			g_snprintf(num, sizeof(num), "%d", port->num);
			pdir = g_build_filename(cdir, "ports", num, NULL);
			rc = write_port_sysfs(pdir, port, err);
			g_snprintf(num, sizeof(num), "umad%d", port->umad_id);
			udir = g_build_filename(mad, num, NULL);
			ibdev = g_build_filename(udir, "ibdev", NULL);
			uport = g_build_filename(udir, "port", NULL);
			if (rc == 0)
				rc = put_file(ibdev, cname, err);
			if (rc == 0)
				rc = put_file(uport, pnum, err);
		}
	}
	return rc;
}

int sim_shared_map(const char *dir, struct sim_shared **out)
{
	g_autofree char *path = g_build_filename(dir, "state", NULL);
	struct stat st;
	void *m;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	/* Growing to the same size is idempotent, so racing creators are harmless. */
	if ((fstat(fd, &st) < 0 || st.st_size < 4096) && ftruncate(fd, 4096) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	*out = m;
	return 0;
}

void sim_shared_bump(struct sim_shared *sh)
{
	__atomic_add_fetch(&sh->generation, 1, __ATOMIC_SEQ_CST);
}

int sim_fabric_lock(const char *dir)
{
	g_autofree char *path = g_build_filename(dir, "lock", NULL);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

int sim_fabric_commit(const char *dir, const struct sim_fabric *f, GError **err)
{
	struct sim_shared *sh = NULL;
	g_autofree char *agents = g_build_filename(dir, "agents", NULL);
	g_autofree char *sock = g_build_filename(dir, "sock", NULL);
	int rc;

	if (g_mkdir_with_parents(agents, 0755) < 0 || g_mkdir_with_parents(sock, 0755) < 0)
		return set_error(err, -errno, "mkdir in %s: %s", dir, g_strerror(errno));
	rc = sim_fabric_save(dir, f, err);
	if (rc == 0)
		rc = sim_fabric_write_sysfs(dir, f, err);
	if (rc == 0)
		rc = sim_shared_map(dir, &sh);
	if (rc < 0)
		return set_error(err, rc, "%s: %s", dir, g_strerror(-rc));
	sim_shared_bump(sh);
	munmap(sh, 4096);
	return 0;
}

char *sim_reg_method_path(const char *dir, const char *ca, int port, unsigned mclass,
			  unsigned version, unsigned method, uint32_t oui)
{
	if (oui)
		return g_strdup_printf("%s/agents/%s.%d.c%02x.v%u.m%02x.o%06x", dir, ca, port,
				       mclass, version, method, oui);
	return g_strdup_printf("%s/agents/%s.%d.c%02x.v%u.m%02x", dir, ca, port, mclass, version,
			       method);
}

char *sim_reg_tid_path(const char *dir, const char *ca, int port, unsigned hi_tid)
{
	return g_strdup_printf("%s/agents/%s.%d.t%06x", dir, ca, port, hi_tid);
}

int sim_reg_read(const char *path, struct sim_reg *out)
{
	char buf[256];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	memset(out, 0, sizeof(*out));
	if (sscanf(buf, "pid=%d fifo=%127s agent=%u serial=%u hi_tid=%u", &out->pid, out->fifo,
		   &out->agent, &out->serial, &out->hi_tid) != 5)
		return -EIO;
	return 0;
}

bool sim_fifo_is_orphan(const char *dir, const char *fifo)
{
	g_autofree char *path = g_strdup_printf("%s/sock/%s", dir, fifo);
	int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	bool orphan;

	if (fd < 0)
		return true;
	/* Every holder keeps a shared lock on the fd's open file: an
	 * exclusive one is had only when nobody holds it. (Closing our fd
	 * drops the lock again.) */
	orphan = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return orphan;
}

bool sim_reg_is_stale(const char *dir, const struct sim_reg *r)
{
	return sim_fifo_is_orphan(dir, r->fifo);
}

int sim_wake_port(const char *dir, const char *ca, int port)
{
	g_autofree char *sdir = g_build_filename(dir, "sock", NULL);
	g_autofree char *prefix = g_strdup_printf("%s.%d.", ca, port);
	union {
		uint8_t bytes[SIM_PKT_SIZE];
		struct sim_pkt_hdr hdr;
	} pkt = { 0 };
	DIR *d = opendir(sdir);
	struct dirent *de;
	int count = 0;

	if (!d)
		return -errno;
	pkt.hdr.magic = SIM_PKT_MAGIC;
	pkt.hdr.kind = SIM_PKT_WAKE;
	while ((de = readdir(d))) {
		g_autofree char *path = NULL;
		int fd;

		if (!g_str_has_prefix(de->d_name, prefix))
			continue;
		path = g_build_filename(sdir, de->d_name, NULL);
		/* O_WRONLY|O_NONBLOCK fails with ENXIO when nobody reads: a dead process. */
		fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (write(fd, pkt.bytes, sizeof(pkt.bytes)) == (ssize_t)sizeof(pkt.bytes))
			count++;
		close(fd);
	}
	closedir(d);
	return count;
}
