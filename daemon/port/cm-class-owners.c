/* SPDX-License-Identifier: MIT */
/* Owns the sysfs scan of who holds the CM class on each RDMA port, and its
 * words for the journal, status and the exit-3 message (cm-class-owners.h). */
#include "cm-class-owners.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void closedir_p(DIR **d)
{
	if (*d)
		(void)closedir(*d);
}
#define _cleanup_dir_ __attribute__((cleanup(closedir_p)))

static void cm_port_owner_clear(gpointer p)
{
	g_free(((CmClassPortOwner *)p)->dev);
}

void cm_class_owners_free(CmClassOwners *o)
{
	if (!o)
		return;
	if (o->ports)
		g_array_unref(o->ports);
	g_free(o);
}

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A port directory's name: a decimal number, 1..255. */
static bool parse_port(const char *name, uint32_t *port)
{
	char *end;
	unsigned long v;

	if (name[0] < '1' || name[0] > '9')
		return false;
	v = strtoul(name, &end, 10);
	if (*end || v > 255)
		return false;
	*port = (uint32_t)v;
	return true;
}

/*
 * Does the CM class exist on this device's ports? node_type reads "1: CA"
 * (2 and 3 are switches and routers, InfiniBand too); 4 and up are iWARP
 * and usNIC devices, whose connections go through iw_cm or nothing. An
 * unreadable node_type counts as a CA: better a wrong "not ib_cm" than
 * hiding a port.
 */
static bool device_has_cm(const char *dev_dir)
{
	g_autofree char *path = g_build_filename(dev_dir, "node_type", NULL);
	g_autofree char *text = NULL;

	if (!g_file_get_contents(path, &text, NULL, NULL))
		return true;
	return atoi(text) < 4;
}

/* ib_cm's counters for @dev port @port, in either layout. */
static bool ib_cm_holds(const char *root, const char *dev, uint32_t port)
{
	char num[16];
	g_autofree char *now = NULL, *old = NULL;

	snprintf(num, sizeof(num), "%u", port);
	now = g_build_filename(root, "class", "infiniband", dev, "ports", num, "cm_rx_msgs", NULL);
	old = g_build_filename(root, "class", "infiniband_cm", dev, num, NULL);
	return is_dir(now) || is_dir(old);
}

static gint port_owner_cmp(gconstpointer a, gconstpointer b)
{
	const CmClassPortOwner *x = a, *y = b;
	int c = strverscmp(x->dev, y->dev);

	if (c)
		return c;
	return x->port < y->port ? -1 : x->port > y->port;
}

/* Every port of one device, with ib_cm's counters or not (owner
 * CM_OWNER_IB_CM or CM_OWNER_UNKNOWN for now), or CM_OWNER_NO_CM. */
static int scan_device(const char *root, const char *dev, GArray *ports)
{
	g_autofree char *dev_dir = g_build_filename(root, "class", "infiniband", dev, NULL);
	g_autofree char *ports_dir = g_build_filename(dev_dir, "ports", NULL);
	_cleanup_dir_ DIR *d = opendir(ports_dir);
	bool has_cm = device_has_cm(dev_dir);
	struct dirent *e;

	/* A device that went away during the scan has no ports. */
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		CmClassPortOwner p = { .owner = CM_OWNER_NO_CM };

		if (!parse_port(e->d_name, &p.port))
			continue;
		if (has_cm)
			p.owner = ib_cm_holds(root, dev, p.port) ? CM_OWNER_IB_CM : CM_OWNER_UNKNOWN;
		p.dev = g_strdup(dev);
		g_array_append_val(ports, p);
	}
	return 0;
}

int cm_class_owners_scan(const char *sysfs_root, const char *self_dev, uint32_t self_port,
		   CmClassOwners **ret)
{
	g_autoptr(CmClassOwners) o = g_new0(CmClassOwners, 1);
	g_autofree char *class_dir = g_build_filename(sysfs_root, "class", "infiniband", NULL);
	g_autofree char *module_dir = g_build_filename(sysfs_root, "module", "ib_cm", NULL);
	g_autofree char *old_class = g_build_filename(sysfs_root, "class", "infiniband_cm", NULL);
	_cleanup_dir_ DIR *d = NULL;
	struct dirent *e;
	int r;

	o->ports = g_array_new(FALSE, FALSE, sizeof(CmClassPortOwner));
	g_array_set_clear_func(o->ports, cm_port_owner_clear);
	/* A built-in ib_cm may have no /sys/module entry, but its counters
	 * still show it. */
	o->ib_cm_loaded = is_dir(module_dir) || is_dir(old_class);

	d = opendir(class_dir);
	if (!d && errno != ENOENT)
		return -errno;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		r = scan_device(sysfs_root, e->d_name, o->ports);
		if (r < 0)
			return r;
	}
	g_array_sort(o->ports, port_owner_cmp);

	for (guint i = 0; i < o->ports->len; i++)
		if (g_array_index(o->ports, CmClassPortOwner, i).owner == CM_OWNER_IB_CM)
			o->ib_cm_loaded = true;
	for (guint i = 0; i < o->ports->len; i++) {
		CmClassPortOwner *p = &g_array_index(o->ports, CmClassPortOwner, i);

		if (self_dev && p->port == self_port && strcmp(p->dev, self_dev) == 0)
			p->owner = CM_OWNER_DAEMON;
		else if (p->owner == CM_OWNER_UNKNOWN && o->ib_cm_loaded)
			p->owner = CM_OWNER_NOT_IB_CM;
	}
	*ret = g_steal_pointer(&o);
	return 0;
}

CmClassOwner cm_class_owners_get(const CmClassOwners *o, const char *dev, uint32_t port)
{
	for (guint i = 0; i < o->ports->len; i++) {
		const CmClassPortOwner *p = &g_array_index(o->ports, CmClassPortOwner, i);

		if (p->port == port && strcmp(p->dev, dev) == 0)
			return p->owner;
	}
	return CM_OWNER_UNKNOWN;
}

unsigned cm_class_owners_device_ports(const CmClassOwners *o, const char *dev)
{
	unsigned n = 0;

	for (guint i = 0; i < o->ports->len; i++)
		n += strcmp(g_array_index(o->ports, CmClassPortOwner, i).dev, dev) == 0;
	return n;
}

/* Each owner's JSON name and its few words for people, by CmClassOwner:
 * one row to add with a new owner. */
static const struct {
	const char *name;
	const char *text;
} cm_class_owner_words[] = {
	[CM_OWNER_UNKNOWN] = { "unknown", "unknown (ib_cm is not loaded)" },
	[CM_OWNER_IB_CM] = { "ib_cm", "ib_cm (the host's CM)" },
	[CM_OWNER_NOT_IB_CM] = { "not_ib_cm", "not ib_cm (it left the device alone)" },
	[CM_OWNER_DAEMON] = { "daemon", "this rdmacm-mux" },
	[CM_OWNER_NO_CM] = { "no_cm", "no CM class (iWARP or usNIC)" },
};
_Static_assert(G_N_ELEMENTS(cm_class_owner_words) == CM_OWNER_NO_CM + 1,
	       "cm_class_owner_words has a row for each CmClassOwner");

/* @owner's row; a value outside the enum reads as CM_OWNER_UNKNOWN. */
static unsigned cm_class_owner_row(CmClassOwner owner)
{
	return (unsigned)owner < G_N_ELEMENTS(cm_class_owner_words) ? (unsigned)owner
								     : CM_OWNER_UNKNOWN;
}

const char *cm_class_owner_name(CmClassOwner owner)
{
	return cm_class_owner_words[cm_class_owner_row(owner)].name;
}

const char *cm_class_owner_text(CmClassOwner owner)
{
	return cm_class_owner_words[cm_class_owner_row(owner)].text;
}

char *cm_class_owners_summary(const CmClassOwners *o)
{
	GString *s = g_string_new(NULL);

	for (guint i = 0; i < o->ports->len; i++) {
		const CmClassPortOwner *p = &g_array_index(o->ports, CmClassPortOwner, i);

		g_string_append_printf(s, "%s%s:%u %s", i ? ", " : "", p->dev, p->port,
				       cm_class_owner_name(p->owner));
	}
	if (o->ports->len == 0)
		g_string_append(s, "no RDMA port");
	g_string_append_printf(s, "; ib_cm is %sloaded", o->ib_cm_loaded ? "" : "not ");
	return g_string_free(s, FALSE);
}
