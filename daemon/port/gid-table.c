/* SPDX-License-Identifier: MIT */
/* Owns a port's GID table (gid-table.h): reading it from its source (sysfs
 * here), looking GIDs up in it, and re-reading the entries the relay is
 * about to act on. */
#include "gid-table.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef struct GidEntry {
	uint8_t raw[GID_LEN];
	uint64_t verified_epoch; /* the caller's epoch in which it was last read */
} GidEntry;

/* The sysfs source's: the port's directory. */
typedef struct GidSysfs {
	char *dir;	/* .../ports/N */
	char *gids_dir; /* .../ports/N/gids */
} GidSysfs;

struct GidTable {
	GidTableSource src;
	unsigned size;
	GidEntry *gids;
	uint8_t *types;
	GHashTable *by_gid; /* GID key (points into gids) -> index + 1 */
	uint64_t last_reload;
	uint64_t epoch; /* the latest epoch a caller named */
	unsigned generation;
};

/* Read a small sysfs file into @buf, without the trailing newline. */
static int read_small_file(const char *path, char *buf, size_t len)
{
	_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static GidType parse_type(const char *s)
{
	if (strcmp(s, "RoCE v2") == 0)
		return GID_TYPE_ROCE_V2;
	if (strcmp(s, "IB/RoCE v1") == 0)
		return GID_TYPE_IB_ROCE_V1;
	return GID_TYPE_UNKNOWN;
}

int gid_table_reload(GidTable *t)
{
	static const uint8_t none[GID_LEN];
	g_autoptr(GHashTable) by_gid = NULL;
	g_autofree GidEntry *gids = NULL;
	g_autofree uint8_t *types = NULL;
	int n = t->src.count(t->src.userdata);
	unsigned size;

	t->last_reload = now_usec();
	if (n < 0)
		return n;
	size = (unsigned)n;
	gids = g_new0(GidEntry, size ? size : 1);
	for (unsigned k = 0; k < size; k++)
		gids[k].verified_epoch = t->epoch;
	types = g_new0(uint8_t, size ? size : 1);
	by_gid = g_hash_table_new(gid_hash, gid_hash_equal);
	for (unsigned k = 0; k < size; k++) {
		if (t->src.read(t->src.userdata, k, none, gids[k].raw) < 0 ||
		    gid_is_zero(gids[k].raw)) {
			memset(gids[k].raw, 0, GID_LEN);
			continue;
		}
		/* An entry whose type cannot be read is not usable (the
		 * kernel answers EINVAL for entries being torn down). */
		types[k] = (uint8_t)t->src.type(t->src.userdata, k);
	}
	for (unsigned k = 0; k < size; k++) {
		gpointer old;

		if (gid_is_zero(gids[k].raw))
			continue;
		old = g_hash_table_lookup(by_gid, gids[k].raw);
		/* First entry wins, except that RoCE v2 beats v1. */
		if (!old || (types[k] == GID_TYPE_ROCE_V2 &&
			     types[GPOINTER_TO_UINT(old) - 1] != GID_TYPE_ROCE_V2))
			g_hash_table_insert(by_gid, gids[k].raw, GUINT_TO_POINTER(k + 1));
	}

	/* Any change to what gid_table_find() answers (an entry, or the type
	 * that decides between two entries) is a new generation: callers
	 * cache indexes by it. */
	if (size != t->size || (size && memcmp(types, t->types, size) != 0))
		t->generation++;
	for (unsigned k = 0; k < size && k < t->size; k++)
		if (!gid_equal(gids[k].raw, t->gids[k].raw)) {
			t->generation++;
			break;
		}
	g_free(t->gids);
	g_free(t->types);
	if (t->by_gid)
		g_hash_table_unref(t->by_gid);
	t->gids = g_steal_pointer(&gids);
	t->types = g_steal_pointer(&types);
	t->by_gid = g_steal_pointer(&by_gid);
	t->size = size;
	return 0;
}

int gid_table_new(const GidTableSource *src, GidTable **ret)
{
	g_autoptr(GidTable) t = g_new0(GidTable, 1);
	int r;

	t->src = *src;
	r = gid_table_reload(t);
	if (r < 0)
		return r;
	*ret = g_steal_pointer(&t);
	return 0;
}

void gid_table_free(GidTable *t)
{
	if (!t)
		return;
	if (t->by_gid)
		g_hash_table_unref(t->by_gid);
	g_free(t->gids);
	g_free(t->types);
	if (t->src.free)
		t->src.free(t->src.userdata);
	g_free(t);
}

/* ---- the sysfs source ---- */

static int gid_sysfs_count(void *userdata)
{
	GidSysfs *fs = userdata;
	unsigned size = 0;
	struct dirent *de;
	DIR *d = opendir(fs->gids_dir);

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		unsigned long k = strtoul(de->d_name, &end, 10);

		if (de->d_name[0] >= '0' && de->d_name[0] <= '9' && *end == '\0' &&
		    k < 65536 && k + 1 > size)
			size = (unsigned)k + 1;
	}
	closedir(d);
	return (int)size;
}

static GidType gid_sysfs_type(void *userdata, unsigned index)
{
	GidSysfs *fs = userdata;
	char path[4096], text[128];

	snprintf(path, sizeof(path), "%s/gid_attrs/types/%u", fs->dir, index);
	return read_small_file(path, text, sizeof(text)) == 0 ? parse_type(text) : GID_TYPE_UNKNOWN;
}

static void gid_sysfs_free(void *userdata)
{
	GidSysfs *fs = userdata;

	g_free(fs->dir);
	g_free(fs->gids_dir);
	g_free(fs);
}

static int gid_sysfs_read(void *userdata, unsigned index, const uint8_t expect[GID_LEN],
			  uint8_t gid[GID_LEN]);

int gid_table_open(const char *dev, int port, GidTable **ret)
{
	GidSysfs *fs = g_new0(GidSysfs, 1);
	GidTableSource src = GID_TABLE_SOURCE(gid_sysfs, fs);

	fs->dir = g_strdup_printf("%s/class/infiniband/%s/ports/%d", sysfs_root(), dev, port);
	fs->gids_dir = g_strdup_printf("%s/gids", fs->dir);
	return gid_table_new(&src, ret);
}

static bool may_reload(const GidTable *t)
{
	return now_usec() - t->last_reload >= GID_TABLE_RELOAD_MIN_USEC;
}

int gid_table_find(GidTable *t, const uint8_t gid[GID_LEN])
{
	gpointer v = g_hash_table_lookup(t->by_gid, gid);

	if (!v && may_reload(t) && gid_table_reload(t) == 0)
		v = g_hash_table_lookup(t->by_gid, gid);
	return v ? (int)GPOINTER_TO_UINT(v) - 1 : -ENOENT;
}

/* The GID as sysfs prints it: eight groups of four hex digits, no
 * newline ("0000:...:ffff:0a00:0101"); @buf holds GID_SYSFS_LEN + 1. */
#define GID_SYSFS_LEN 39
static void gid_sysfs_text(const uint8_t raw[GID_LEN], char *buf)
{
	static const char hex[] = "0123456789abcdef";
	char *p = buf;

	for (unsigned i = 0; i < GID_LEN; i++) {
		*p++ = hex[raw[i] >> 4];
		*p++ = hex[raw[i] & 15];
		if (i % 2 && i < GID_LEN - 1)
			*p++ = ':';
	}
	*p = '\0';
}

/* ".../gids/INDEX" in @buf, without snprintf: this runs per MAD batch. */
static const char *gid_entry_path(const GidSysfs *fs, unsigned index, char *buf, size_t len)
{
	char digits[12];
	size_t n = 0, dir = strlen(fs->gids_dir);

	do
		digits[n++] = (char)('0' + index % 10);
	while ((index /= 10) && n < sizeof(digits));
	if (dir + 1 + n + 1 > len)
		return NULL;
	memcpy(buf, fs->gids_dir, dir);
	buf[dir++] = '/';
	while (n)
		buf[dir++] = digits[--n];
	buf[dir] = '\0';
	return buf;
}

static int gid_sysfs_read(void *userdata, unsigned index, const uint8_t expect[GID_LEN],
			  uint8_t gid[GID_LEN])
{
	GidSysfs *fs = userdata;
	char path[4096], text[128], had[GID_SYSFS_LEN + 1];
	int r;

	if (!gid_entry_path(fs, index, path, sizeof(path)))
		return -ENAMETOOLONG;
	r = read_small_file(path, text, sizeof(text));
	if (r < 0)
		return r;
	/* Unchanged, the text is what we would print: no parse. */
	gid_sysfs_text(expect, had);
	if (strcmp(text, had) == 0) {
		memcpy(gid, expect, GID_LEN);
		return 0;
	}
	return gid_from_string(text, gid);
}

/* The slow part of gid_table_refresh_entry(), out of line: the sysfs
 * source's buffers would otherwise make every call probe the stack. */
static __attribute__((noinline)) void gid_table_reread_entry(GidTable *t, unsigned index,
								 uint64_t epoch)
{
	uint8_t now[GID_LEN];

	if (index >= t->size) {
		if (may_reload(t))
			(void)gid_table_reload(t);
		return;
	}
	if (t->src.read(t->src.userdata, index, t->gids[index].raw, now) < 0)
		memset(now, 0, GID_LEN);
	if (gid_equal(now, t->gids[index].raw)) {
		t->gids[index].verified_epoch = epoch;
		return;
	}
	(void)gid_table_reload(t);
}

/*
 * Make entry @index current for @epoch: re-read its sysfs file unless that
 * was done in this epoch already; when it changed, re-read the whole table
 * (an address that moved changes more than one entry, and the index
 * lookup must follow).
 */
static inline void gid_table_refresh_entry(GidTable *t, unsigned index, uint64_t epoch)
{
	t->epoch = epoch;
	if (index < t->size && t->gids[index].verified_epoch == epoch)
		return;
	gid_table_reread_entry(t, index, epoch);
}

const uint8_t *gid_table_get(GidTable *t, unsigned index, uint64_t epoch)
{
	gid_table_refresh_entry(t, index, epoch);
	if (index >= t->size || gid_is_zero(t->gids[index].raw))
		return NULL;
	return t->gids[index].raw;
}

const uint8_t *gid_table_peek(const GidTable *t, unsigned index)
{
	if (index >= t->size || gid_is_zero(t->gids[index].raw))
		return NULL;
	return t->gids[index].raw;
}

bool gid_table_holds(GidTable *t, unsigned index, const uint8_t gid[GID_LEN], uint64_t epoch)
{
	const uint8_t *now = gid_table_get(t, index, epoch);

	return now && gid_equal(now, gid);
}

bool gid_table_matches_index8(GidTable *t, const uint8_t gid[GID_LEN], uint8_t index8)
{
	/* The zero GID is no GID: an empty entry is not its place. */
	if (gid_is_zero(gid))
		return false;
	for (unsigned k = index8; k < t->size; k += GID_TABLE_UMAD_INDEXES)
		if (gid_equal(t->gids[k].raw, gid))
			return true;
	return false;
}

unsigned gid_table_size(const GidTable *t)
{
	return t->size;
}

unsigned gid_table_generation(const GidTable *t)
{
	return t->generation;
}
