/* SPDX-License-Identifier: MIT */
/*
 * Owns the VMs' life (vm-host.h): the vms.d files, the live add/set/del,
 * and keeping the state where a successor finds it. Their sockets are
 * vm-host-sockets.c's.
 */
#include "vm-host-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "config.h"
#include "handoff-fd-store.h"
#include "log.h"
#include "util.h"
#include "vm-state.h"

#define VM_HOST_SAVE_USEC (10 * 1000000u)

bool vm_host_is_stored_name(const char *name)
{
	return g_str_has_prefix(name, VM_HOST_STORE_PREFIX) &&
	       vm_name_valid(name + strlen(VM_HOST_STORE_PREFIX));
}

VmTable *vm_host_table(const VmHost *h)
{
	return h->table;
}

VmGidPolicy vm_host_policy(const VmHost *h)
{
	return h->cfg.policy;
}

const char *vm_host_dir(const VmHost *h)
{
	return h->vm_dir;
}

const char *vm_host_socket(const VmHost *h, const VmEntry *vm)
{
	VmSocket *s = g_hash_table_lookup(h->sockets, vm->spec.name);

	return s ? s->path : NULL;
}

/* ---- the state ---- */

/* Whether two states differ in nothing but their sequence (bytes 24..31). */
static bool vm_host_same_state(GBytes *a, GBytes *b)
{
	size_t n, m;
	const uint8_t *x = g_bytes_get_data(a, &n), *y = g_bytes_get_data(b, &m);

	return n == m && n >= 32 && memcmp(x, y, 24) == 0 && memcmp(x + 32, y + 32, n - 32) == 0;
}

/* Keep the state as it is now, if it changed, in the hand-off state
 * (none kept without the fd store, until a re-execution asks). */
static void vm_host_save(VmHost *h)
{
	g_autoptr(GBytes) bytes = vm_state_write(h->table, h->sequence + 1, PACKAGE_VERSION);
	const void *data;
	size_t len;
	int e;

	if (h->state_bytes && vm_host_same_state(h->state_bytes, bytes))
		return;
	data = g_bytes_get_data(bytes, &len);
	e = relay_handoff_write_vms(h->relay, data, len);
	if (e == -ENODEV)
		return;
	if (e < 0) {
		log_ratelimited(LOG_WARNING, NULL,
				"cannot keep the VMs' state (%zu bytes) for a restart: %s", len,
				strerror(-e));
		return;
	}
	h->sequence++;
	if (h->state_bytes)
		g_bytes_unref(h->state_bytes);
	h->state_bytes = g_steal_pointer(&bytes);
}

static int vm_host_on_save_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	VmHost *h = userdata;

	vm_host_save(h);
	(void)sd_event_source_set_time(s, usec + VM_HOST_SAVE_USEC);
	(void)sd_event_source_set_enabled(s, SD_EVENT_ON);
	return 0;
}

static int vm_host_check_gids(VmHost *h, const VmSpec *spec, const VmSpec *old, bool strict,
			      GString *msg);

/* The VMs of the state the previous process kept (@bytes, may be NULL). */
static void vm_host_adopt_state(VmHost *h, GBytes *bytes)
{
	g_autoptr(GString) err = g_string_new(NULL);
	g_autoptr(VmState) s = NULL;
	const uint8_t *data;
	size_t len;

	if (!bytes)
		return;
	data = g_bytes_get_data(bytes, &len);
	if (vm_state_read(data, len, &s, err) < 0) {
		log_warning("ignoring the VMs' state the previous process kept: %s", err->str);
		return;
	}
	h->sequence = s->sequence;
	for (guint i = 0; i < s->dropped->len; i++)
		log_warning("the VMs' state (written by %s): %s", s->writer,
			    (const char *)s->dropped->pdata[i]);
	*vm_table_unassigned(h->table) = s->unassigned;
	for (guint i = 0; i < s->vms->len; i++) {
		VmStateVm *v = &g_array_index(s->vms, VmStateVm, i);
		VmEntry *vm;

		g_string_truncate(err, 0);
		if (vm_host_check_gids(h, &v->spec, NULL, false, err) < 0 ||
		    vm_table_add(h->table, &v->spec, v->source, err, &vm) < 0) {
			log_warning("the VMs' state: VM %s dropped: %s", v->spec.name, err->str);
			continue;
		}
		vm->counters = v->counters;
	}
	log_info("took over %u VMs from the previous process (state %" G_GUINT64_FORMAT
		 " written by %s)",
		 vm_table_count(h->table), s->sequence, s->writer);
}

/* ---- what an assignment may hold ---- */

/* Whether @spec (replacing @old, or NULL) may hold what it names on this
 * port: no prefix shorter than /64 (but with --allow-wide-prefix); nothing
 * that takes in the port's GID 0; and, when @strict (vm add and set), no
 * prefix that takes in a GID the port has now and @old did not have: an
 * address the host or another VM uses. Return: 0, or -EACCES with the GID
 * named in @msg. */
static int vm_host_check_gids(VmHost *h, const VmSpec *spec, const VmSpec *old, bool strict,
			      GString *msg)
{
	GidTable *gids = relay_port(h->relay)->gids;
	char text[GID_STR_LEN], prefix[50];
	const uint8_t *g0;
	unsigned n;

	for (uint32_t i = 0; i < spec->n_prefixes; i++)
		if (spec->prefixes[i].len < VM_PREFIX_FLOOR && !h->cfg.allow_wide_prefix) {
			g_string_append_printf(msg, "prefix %s is wider than /%d: it would take in "
						    "addresses that are not the VM's (a whole subnet "
						    "is /64; --allow-wide-prefix allows wider ones)",
					       vm_prefix_to_string(&spec->prefixes[i], prefix),
					       VM_PREFIX_FLOOR);
			return -EACCES;
		}
	(void)gid_table_reload(gids);
	n = gid_table_size(gids);
	g0 = gid_table_peek(gids, 0);
	if (g0 && vm_spec_has_gid(spec, g0)) {
		g_string_append_printf(msg, "GID %s is the port's GID 0 (its own address, which "
					    "the host's CM uses): no VM may have it",
				       gid_to_string(g0, text));
		return -EACCES;
	}
	for (unsigned k = 1; strict && k < n; k++) {
		const uint8_t *g = gid_table_peek(gids, k);

		if (!g || (old && vm_spec_has_gid(old, g)))
			continue;
		for (uint32_t i = 0; i < spec->n_prefixes; i++)
			if (vm_prefix_contains(&spec->prefixes[i], g)) {
				g_string_append_printf(
					msg, "prefix %s takes in GID %s, which the port has (index %u): "
					     "an address the host or another VM uses; assign the "
					     "VM's own GIDs with gid=, or a prefix of its own",
					vm_prefix_to_string(&spec->prefixes[i], prefix),
					gid_to_string(g, text), k);
				return -EACCES;
			}
	}
	return 0;
}

/* ---- vms.d ---- */

static int vm_host_resolve(const char *name, bool group, uint32_t *ret)
{
	if (group) {
		struct group *g = getgrnam(name);

		if (!g)
			return -ENOENT;
		*ret = g->gr_gid;
	} else {
		struct passwd *p = getpwnam(name);

		if (!p)
			return -ENOENT;
		*ret = p->pw_uid;
	}
	return 0;
}

/* Read @path (at most VM_CONF_MAX_BYTES + 1 bytes, to notice more). */
static int vm_host_read_file(const char *path, char **ret, size_t *ret_len)
{
	_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	g_autofree char *buf = NULL;
	size_t len = 0;
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	buf = g_malloc(VM_CONF_MAX_BYTES + 2);
	while (len < VM_CONF_MAX_BYTES + 1) {
		ssize_t n = read(fd, buf + len, VM_CONF_MAX_BYTES + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*ret = g_steal_pointer(&buf);
	*ret_len = len;
	return 0;
}

/* One vms.d file: the VM it defines, added or replaced; a file that does
 * not hold up changes nothing. Return: whether the VM is (still) the file's. */
static bool vm_host_load_file(VmHost *h, const char *file, const char *name)
{
	g_autofree char *path = g_build_filename(h->conf_dir, file, NULL);
	g_autoptr(GString) err = g_string_new(NULL);
	g_autofree char *text = NULL;
	VmEntry *vm = vm_table_find(h->table, name);
	size_t len = 0;
	VmSpec spec;
	int r = vm_host_read_file(path, &text, &len);

	if (r < 0) {
		log_error("%s: cannot read it: %s; VM %s %s", path, strerror(-r), name,
			  vm ? "stays as it was" : "is not added");
		return vm && vm->source;
	}
	if (vm_spec_parse_conf(name, text, len, vm_host_resolve, &spec, err) < 0) {
		log_error("%s: %s; VM %s %s", path, err->str, name,
			  vm ? "stays as it was" : "is not added");
		return vm && vm->source;
	}
	r = vm_host_check_gids(h, &spec, NULL, false, err);
	if (r < 0) {
	} else if (vm) {
		if (!vm->source)
			log_warning("%s defines VM %s, which was added through rdmacm-muxctl: the file "
				    "wins",
				    path, name);
		r = vm_table_replace(h->table, vm, &spec, path, err);
	} else {
		r = vm_table_add(h->table, &spec, path, err, &vm);
	}
	if (r < 0) {
		log_error("%s: %s; VM %s %s", path, err->str, name,
			  vm ? "stays as it was" : "is not added");
		return vm && vm->source;
	}
	return true;
}

static gint vm_str_cmp(gconstpointer a, gconstpointer b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every NAME.conf of the vms.d directory, in name order; the VMs that
 * came from files that are gone (or from a directory no longer read) go
 * too. */
static void vm_host_load_conf_dir(VmHost *h)
{
	g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GHashTable) kept = g_hash_table_new(g_direct_hash, g_direct_equal);
	g_autoptr(GPtrArray) list = NULL;
	DIR *dir = NULL;
	struct dirent *e;

	if (h->conf_dir)
		dir = opendir(h->conf_dir);
	if (h->conf_dir && !dir && errno != ENOENT)
		log_warning("cannot read %s: %s; no VM comes from there", h->conf_dir,
			    strerror(errno));
	while (dir && (e = readdir(dir)))
		if (g_str_has_suffix(e->d_name, ".conf") && e->d_name[0] != '.')
			g_ptr_array_add(files, g_strdup(e->d_name));
	if (dir)
		closedir(dir);
	g_ptr_array_sort(files, vm_str_cmp);
	for (guint i = 0; i < files->len; i++) {
		const char *file = files->pdata[i];
		g_autofree char *name = g_strndup(file, strlen(file) - strlen(".conf"));

		if (!vm_name_valid(name)) {
			log_error("%s/%s: '%s' is not a valid VM name (1..%d of A-Z a-z 0-9 _ . + -); "
				  "ignored",
				  h->conf_dir, file, name, VM_NAME_MAX);
			continue;
		}
		if (vm_host_load_file(h, file, name))
			g_hash_table_add(kept, vm_table_find(h->table, name));
	}
	/* A file that is gone takes its VM along. */
	list = vm_table_list(h->table);
	for (guint i = 0; i < list->len; i++) {
		VmEntry *vm = list->pdata[i];

		if (vm->source && !g_hash_table_contains(kept, vm)) {
			log_info("VM %s is no more: %s is gone", vm->spec.name, vm->source);
			vm_table_remove(h->table, vm);
		}
	}
}

/* ---- life ---- */

int vm_host_new(sd_event *event, Relay *relay, const VmHostConfig *cfg, GHashTable *stored,
		GBytes *state, VmHost **ret)
{
	g_autoptr(GHashTable) socket_fds = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
								  NULL);
	g_autoptr(GHashTable) before = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	g_autoptr(GPtrArray) list = NULL;
	GHashTableIter it;
	gpointer key, value;
	VmHost *h = g_new0(VmHost, 1);
	int r;

	h->event = sd_event_ref(event);
	h->relay = relay;
	h->cfg = *cfg;
	h->vm_dir = g_strdup(cfg->vm_dir);
	h->conf_dir = g_strdup(cfg->conf_dir);
	h->cfg.vm_dir = h->vm_dir;
	h->cfg.conf_dir = h->conf_dir;
	h->table = vm_table_new(cfg->max_vms);
	h->sockets = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, vm_socket_free);
	h->by_path = g_hash_table_new(g_str_hash, g_str_equal);
	h->main_address = cfg->main_fd >= 0 ? vm_socket_address(cfg->main_fd) : NULL;

	/* A directory another user may write is no place for the VMs'
	 * sockets: refuse to start, rather than serve what someone put there.
	 * (One that does not exist yet is made at the first VM's bind.) */
	if (access(h->vm_dir, F_OK) == 0 || errno != ENOENT) {
		g_autoptr(GString) why = g_string_new(NULL);

		r = vm_host_check_dir(h, why);
		if (r < 0) {
			log_error("%s", why->str);
			vm_host_free(h);
			return r;
		}
	}

	/* What the previous process left. */
	g_hash_table_iter_init(&it, stored);
	while (g_hash_table_iter_next(&it, &key, &value)) {
		if (!vm_host_is_stored_name(key))
			continue;
		g_hash_table_insert(socket_fds, g_strdup(key), value);
		g_hash_table_iter_remove(&it);
	}
	vm_host_adopt_state(h, state);
	list = vm_table_list(h->table);
	for (guint i = 0; i < list->len; i++) {
		const VmEntry *vm = list->pdata[i];

		g_hash_table_insert(before, g_strdup(vm->spec.name), g_memdup2(&vm->spec, sizeof(VmSpec)));
	}
	g_clear_pointer(&list, g_ptr_array_unref);
	/* Files first: a file's VM may replace one the state had. */
	vm_host_load_conf_dir(h);
	vm_host_adopt_sockets(h, socket_fds);
	/* A VM whose socket changed owner, group or mode while we were down
	 * (its file edited, or replaced by another tenant's) keeps only the
	 * connections the socket would let in now (relay_vms_changed(), once
	 * the clients are back); a VM the state did not have, all of them. */
	list = vm_table_list(h->table);
	for (guint i = 0; i < list->len; i++) {
		VmEntry *vm = list->pdata[i];
		const VmSpec *was = g_hash_table_lookup(before, vm->spec.name);

		vm->recheck_peers = !was || !vm_host_same_perms(was, &vm->spec);
	}
	g_clear_pointer(&list, g_ptr_array_unref);
	list = vm_table_list(h->table);
	for (guint i = 0; i < list->len; i++) {
		const VmEntry *vm = list->pdata[i];
		g_autoptr(GString) why = g_string_new(NULL);

		if (!g_hash_table_contains(h->sockets, vm->spec.name) &&
		    vm_host_bind(h, vm, why) < 0)
			log_error("VM %s has no socket (%s): its GIDs stay reserved for it",
				  vm->spec.name, why->str);
	}
	relay_set_vms(relay, &(RelayVms){ .table = h->table,
					  .policy = cfg->policy,
					  .max_clients = cfg->max_clients_per_vm,
					  .state_room = (uint32_t)vm_state_room(cfg->max_vms),
					  .own_uid = geteuid(),
					  .own_gid = cfg->default_group != (gid_t)-1
							     ? cfg->default_group
							     : getegid(),
					  .vm_of = vm_host_vm_of,
					  .userdata = h });
	/* First at once: the relay keeps its state from its start on, which
	 * comes after this. */
	r = sd_event_add_time_relative(event, &h->save_timer, CLOCK_MONOTONIC, 0, 1000000,
				       vm_host_on_save_timer, h);
	if (r < 0) {
		log_error("cannot set up the VMs' state timer: %s", strerror(-r));
		vm_host_free(h);
		return r;
	}
	if (vm_table_count(h->table))
		log_info("%u VMs, their sockets in %s; --gid-policy=%s", vm_table_count(h->table),
			 h->vm_dir, vm_gid_policy_name(cfg->policy));
	*ret = h;
	return 0;
}

void vm_host_free(VmHost *h)
{
	GHashTableIter it;
	gpointer value;

	if (!h)
		return;
	sd_event_source_disable_unref(h->save_timer);
	g_hash_table_iter_init(&it, h->sockets);
	while (g_hash_table_iter_next(&it, NULL, &value))
		if (!h->keep_files)
			(void)unlink(((VmSocket *)value)->path);
	g_hash_table_destroy(h->by_path);
	g_hash_table_destroy(h->sockets);
	vm_table_free(h->table);
	if (h->state_bytes)
		g_bytes_unref(h->state_bytes);
	sd_event_unref(h->event);
	g_free(h->main_address);
	g_free(h->vm_dir);
	g_free(h->conf_dir);
	g_free(h);
}

void vm_host_handoff(VmHost *h)
{
	if (!h)
		return;
	h->keep_files = true;
	vm_host_save(h);
}

void vm_host_export(VmHost *h, RelayHandoffFdFn fn, void *userdata)
{
	GHashTableIter it;
	gpointer value;
	char name[64];

	if (!h)
		return;
	h->keep_files = true;
	/* Into the state relay_handoff_export() passed on. */
	vm_host_save(h);
	g_hash_table_iter_init(&it, h->sockets);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		VmSocket *s = value;

		snprintf(name, sizeof(name), VM_HOST_STORE_PREFIX "%s", s->name);
		fn(userdata, name, s->fd);
	}
}

/* ---- add, set, del ---- */

static void vm_host_describe(VmHost *h, const VmEntry *vm, GString *msg)
{
	const char *path = vm_host_socket(h, vm);

	g_string_append_printf(msg, "%u GIDs, %u prefixes; socket %s", vm->spec.n_gids,
			       vm->spec.n_prefixes, path ? path : "none");
}

/* "made by domain U" for @vm, or "made without a domain". */
static void vm_host_whose(const VmEntry *vm, GString *msg)
{
	if (vm->spec.domain[0])
		g_string_append_printf(msg, "libvirt domain %s made it", vm->spec.domain);
	else
		g_string_append(msg, "no libvirt domain made it (rdmacm-muxctl vm add without "
				     "--domain)");
}

int vm_host_add(VmHost *h, const VmSpec *spec, GString *msg)
{
	VmEntry *vm = vm_table_find(h->table, spec->name);
	unsigned taken;
	int r;

	if (vm && vm->source) {
		g_string_append_printf(msg, "VM %s exists already, from %s", spec->name, vm->source);
		return -EEXIST;
	}
	if (vm) {
		g_string_append_printf(msg, "VM %s exists already: ", spec->name);
		vm_host_whose(vm, msg);
		return -EEXIST;
	}
	r = vm_spec_check(spec, msg);
	if (r == 0)
		r = vm_host_check_gids(h, spec, NULL, true, msg);
	if (r < 0)
		return r;
	r = vm_table_add(h->table, spec, NULL, msg, &vm);
	if (r < 0)
		return r;
	r = vm_host_bind(h, vm, msg);
	if (r < 0) {
		vm_table_remove(h->table, vm);
		return r;
	}
	taken = relay_vms_changed(h->relay);
	vm_host_save(h);
	log_info("VM %s added (rdmacm-muxctl%s%s): %u GIDs, %u prefixes; %u GIDs taken back from "
		 "other clients",
		 spec->name, spec->domain[0] ? ", libvirt domain " : "", spec->domain, spec->n_gids,
		 spec->n_prefixes, taken);
	g_string_append_printf(msg, "VM %s added: ", spec->name);
	vm_host_describe(h, vm, msg);
	if (taken)
		g_string_append_printf(msg, "; %u GIDs taken back from clients (see the log)", taken);
	return 0;
}

/* Refuse to change a VM its file defines (the file would undo it), or,
 * given @domain, one that domain did not make. */
static int vm_host_editable(const VmEntry *vm, const char *name, const char *domain, GString *msg)
{
	if (!vm) {
		g_string_append_printf(msg, "no VM %s", name);
		return -ENOENT;
	}
	if (vm->source) {
		g_string_append_printf(msg, "VM %s comes from %s: edit the file and restart the "
					    "daemon (systemctl restart keeps every client)",
				       name, vm->source);
		return -EPERM;
	}
	if (domain && strcmp(domain, vm->spec.domain) != 0) {
		g_string_append_printf(msg, "VM %s is not libvirt domain %s's: ", name, domain);
		vm_host_whose(vm, msg);
		return -EPERM;
	}
	return 0;
}

/* Give @s's file @spec's owner, group and mode. Return: 0, or a negative
 * errno with why in @msg. */
static int vm_host_apply_perms(VmHost *h, VmSocket *s, const VmSpec *spec, GString *msg)
{
	g_autofree char *why = NULL;
	ListenerPerms perms;
	int r;

	vm_host_perms(h, spec, &perms);
	r = listener_set_perms(s->path, &perms, &why);
	if (r < 0)
		g_string_append(msg, why);
	return r;
}

int vm_host_set(VmHost *h, const VmSpec *edit, unsigned given, GString *msg)
{
	VmEntry *vm = vm_table_find(h->table, edit->name);
	VmSocket *s;
	VmSpec spec, old;
	unsigned taken;
	int r = vm_host_editable(vm, edit->name,
				 (given & VM_SPEC_HAS_DOMAIN) ? edit->domain : NULL, msg);

	if (r < 0)
		return r;
	if (!(given & ~VM_SPEC_HAS_DOMAIN)) {
		g_string_append(msg, "vm set NAME needs at least one key=value besides domain");
		return -EINVAL;
	}
	old = vm->spec;
	spec = vm->spec;
	vm_spec_apply(&spec, edit, given);
	r = vm_spec_check(&spec, msg);
	if (r == 0)
		r = vm_host_check_gids(h, &spec, &old, true, msg);
	if (r < 0)
		return r;
	r = vm_table_replace(h->table, vm, &spec, NULL, msg);
	if (r < 0)
		return r;
	s = g_hash_table_lookup(h->sockets, vm->spec.name);
	if (!vm_host_same_perms(&old, &spec)) {
		/* The file first: a VM whose socket kept its old owner is no
		 * change at all. */
		if (s && vm_host_apply_perms(h, s, &spec, msg) < 0) {
			g_autoptr(GString) ignored = g_string_new(NULL);

			log_warning("VM %s stays as it was: %s", vm->spec.name, msg->str);
			(void)vm_table_replace(h->table, vm, &old, NULL, ignored);
			return -EPERM;
		}
		vm->recheck_peers = true;
	}
	taken = relay_vms_changed(h->relay);
	vm_host_save(h);
	log_info("VM %s changed (rdmacm-muxctl): %u GIDs, %u prefixes; %u GIDs taken back",
		 vm->spec.name, vm->spec.n_gids, vm->spec.n_prefixes, taken);
	g_string_append_printf(msg, "VM %s set: ", vm->spec.name);
	vm_host_describe(h, vm, msg);
	if (taken)
		g_string_append_printf(msg, "; %u GIDs taken back from clients (see the log)", taken);
	return 0;
}

int vm_host_del(VmHost *h, const char *name, const char *domain, GString *msg)
{
	VmEntry *vm = vm_table_find(h->table, name);
	unsigned dropped;
	int r = vm_host_editable(vm, name, domain, msg);

	if (r < 0)
		return r;
	/* Its socket first, so that nothing new connects in between. */
	vm_host_unbind(h, name);
	dropped = relay_drop_vm_clients(h->relay, vm);
	vm_table_remove(h->table, vm);
	vm_host_save(h);
	log_info("VM %s removed (rdmacm-muxctl): %u clients disconnected", name, dropped);
	g_string_append_printf(msg, "VM %s removed: %u clients disconnected, its GIDs free", name,
			       dropped);
	return 0;
}
