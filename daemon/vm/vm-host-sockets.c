/* SPDX-License-Identifier: MIT */
/*
 * Owns the VMs' listening sockets (vm-host.h): the directory they live in
 * and its safety, binding each with the owner, group and mode its
 * assignment names, taking the ones a predecessor kept over, and which VM
 * a connection is, from the socket it came in on.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "handoff-fd-store.h"
#include "log.h"
#include "util.h"
#include "vm-host-internal.h"

void vm_socket_free(gpointer p)
{
	VmSocket *s = p;

	listener_free(s->listener);
	if (s->fd >= 0)
		close(s->fd);
	g_free(s->name);
	g_free(s->path);
	g_free(s);
}

static void vm_host_on_accept(int fd, const struct ucred *cred, void *userdata)
{
	VmSocket *s = userdata;

	(void)cred;
	/* The relay learns the VM from the socket (vm_host_vm_of()); a
	 * refusal is logged and counted there. */
	if (relay_add_client(s->host->relay, fd) == 0)
		log_debug("a connection for VM %s", s->name);
}

/* Serve @fd (taken over) as @name's socket at @path. */
static int vm_host_serve(VmHost *h, const char *name, const char *path, int fd)
{
	VmSocket *s = g_new0(VmSocket, 1);
	g_autofree char *what = g_strdup_printf("VM %s", name);
	int r;

	s->host = h;
	s->name = g_strdup(name);
	s->path = g_strdup(path);
	s->fd = fd;
	r = listener_new(h->event, fd, what, &h->cfg.allow, h->cfg.retry_ms, vm_host_on_accept, s,
			 &s->listener);
	if (r < 0) {
		vm_socket_free(s);
		return r;
	}
	g_hash_table_replace(h->sockets, s->name, s);
	g_hash_table_replace(h->by_path, s->path, s);
	return 0;
}

/* What @spec's socket gets: no owner named is the daemon's user, no mode
 * its owner alone (VM_DEFAULT_MODE), never a whole group by default. */
void vm_host_perms(const VmHost *h, const VmSpec *spec, ListenerPerms *ret)
{
	*ret = (ListenerPerms){
		.mode = spec->mode != VM_ID_NONE ? (mode_t)spec->mode : VM_DEFAULT_MODE,
		.uid = spec->owner != VM_ID_NONE ? (uid_t)spec->owner : (uid_t)-1,
		.gid = spec->group != VM_ID_NONE ? (gid_t)spec->group : h->cfg.default_group,
		.group = "the VM's group",
	};
}

/* Whether @a and @b give a socket the same owner, group and mode. */
bool vm_host_same_perms(const VmSpec *a, const VmSpec *b)
{
	return a->owner == b->owner && a->group == b->group && a->mode == b->mode;
}

/* Whether directory @st may hold, or lead to, the VMs' sockets: the
 * daemon's (or, for one above it, root's) and writable by nobody else,
 * unless sticky (/tmp: nobody else may rename or remove what is ours). */
static bool vm_host_dir_safe(const struct stat *st, bool ancestor)
{
	if (st->st_uid != geteuid() && !(ancestor && st->st_uid == 0))
		return false;
	return !(st->st_mode & 022) || (ancestor && (st->st_mode & S_ISVTX));
}

/* Check the VMs' directory as sshd's StrictModes checks a home: the
 * directory itself (not a symlink), and every directory above it.
 * Return: 0, or a negative errno with why in @msg. */
int vm_host_check_dir(const VmHost *h, GString *msg)
{
	_cleanup_fd_ int fd = open(h->vm_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	g_autofree char *real = NULL;
	struct stat st;
	int e;

	if (fd < 0 || fstat(fd, &st) < 0) {
		e = errno;
		if (e == ELOOP || e == ENOTDIR) {
			/* Whoever may change the link chooses where the sockets go. */
			g_string_append_printf(msg, "the VMs' socket directory %s is not a directory "
						    "(a symbolic link, or a file): refusing it; give "
						    "the directory itself",
					       h->vm_dir);
			return -EPERM;
		}
		g_string_append_printf(msg, "cannot open the VMs' socket directory %s: %s", h->vm_dir,
				       strerror(e));
		return -e;
	}
	if (!vm_host_dir_safe(&st, false)) {
		g_string_append_printf(msg, "the VMs' socket directory %s is owned by uid %u, mode %04o: "
					    "it must be the daemon's (uid %u) and writable by nobody "
					    "else, or another user could put a socket or a symbolic "
					    "link where a VM's socket is; fix it (chown %u, chmod "
					    "0755) or give another --vm-dir",
				       h->vm_dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
				       (unsigned)geteuid(), (unsigned)geteuid());
		return -EPERM;
	}
	real = realpath(h->vm_dir, NULL);
	if (!real) {
		e = errno;
		g_string_append_printf(msg, "cannot resolve %s: %s", h->vm_dir, strerror(e));
		return -e;
	}
	for (char *slash = strrchr(real, '/'); slash; slash = strrchr(real, '/')) {
		*slash = '\0';
		if (stat(*real ? real : "/", &st) < 0) {
			e = errno;
			g_string_append_printf(msg, "cannot look at %s: %s", *real ? real : "/",
					       strerror(e));
			return -e;
		}
		if (!vm_host_dir_safe(&st, true)) {
			g_string_append_printf(msg, "%s, above the VMs' socket directory %s, is owned "
						    "by uid %u, mode %04o: another user could move the "
						    "directory away; it must be root's or the daemon's "
						    "and writable by nobody else (or sticky)",
					       *real ? real : "/", h->vm_dir, (unsigned)st.st_uid,
					       (unsigned)(st.st_mode & 07777));
			return -EPERM;
		}
	}
	return 0;
}

/* The VMs' directory: made if missing (searchable by all: QEMU runs as
 * another user; writable by the daemon alone, whatever the umask), and
 * checked (vm_host_check_dir()). */
static int vm_host_make_dir(const VmHost *h, GString *msg)
{
	struct stat st;

	if (lstat(h->vm_dir, &st) < 0 && errno == ENOENT &&
	    (g_mkdir_with_parents(h->vm_dir, 0755) < 0 || chmod(h->vm_dir, 0755) < 0)) {
		g_string_append_printf(msg, "cannot make the VMs' socket directory %s: %s",
				       h->vm_dir, strerror(errno));
		return -errno;
	}
	return vm_host_check_dir(h, msg);
}

/* Bind @vm's socket. Return: 0, or a negative errno with why in @msg
 * (not logged: at start it is an error, for "vm add" the operator's
 * answer). */
int vm_host_bind(VmHost *h, const VmEntry *vm, GString *msg)
{
	g_autofree char *path = g_strdup_printf("%s/%s.sock", h->vm_dir, vm->spec.name);
	struct sockaddr_un sa;
	g_autofree char *why = NULL;
	ListenerPerms perms;
	bool bound = false;
	char store[64];
	int fd = -1, r;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		g_string_append_printf(msg, "its socket path %s is too long (%zu bytes, the "
					    "limit is %zu): use a shorter name or --vm-dir",
				       path, strlen(path), sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	r = vm_host_make_dir(h, msg);
	if (r < 0)
		return r;
	vm_host_perms(h, &vm->spec, &perms);
	r = listener_bind(path, &perms, &fd, &bound, &why);
	if (r < 0) {
		if (bound)
			(void)unlink(path);
		g_string_append(msg, why);
		return r;
	}
	r = vm_host_serve(h, vm->spec.name, path, fd);
	if (r < 0) {
		(void)unlink(path);
		g_string_append_printf(msg, "cannot serve %s: %s", path, strerror(-r));
		return r;
	}
	snprintf(store, sizeof(store), VM_HOST_STORE_PREFIX "%s", vm->spec.name);
	(void)fd_store_put(store, fd);
	log_info("VM %s: serving %s (mode %04o)", vm->spec.name, path, (unsigned)perms.mode);
	return 0;
}

/* Take @store out of the fd store. A failure leaves the listening socket
 * there: a successor gets it back and drops it as no VM's, and until then
 * connections wait in its backlog. Said here, once: no caller can do more. */
static void vm_host_store_remove(const char *store)
{
	int r = fd_store_remove(store);

	if (r < 0)
		log_warning("cannot take %s out of the fd store: %s", store, strerror(-r));
}

/* Stop serving @name's socket, out of the store; its file goes. */
void vm_host_unbind(VmHost *h, const char *name)
{
	VmSocket *s = g_hash_table_lookup(h->sockets, name);
	char store[64];

	if (!s)
		return;
	snprintf(store, sizeof(store), VM_HOST_STORE_PREFIX "%s", name);
	vm_host_store_remove(store);
	(void)unlink(s->path);
	g_hash_table_remove(h->by_path, s->path);
	g_hash_table_remove(h->sockets, name);
}

/* The address a socket is bound to, or NULL. */
char *vm_socket_address(int fd)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	size_t n;

	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0 || sa.sun_family != AF_UNIX ||
	    len <= offsetof(struct sockaddr_un, sun_path) || sa.sun_path[0] == '\0')
		return NULL;
	n = MIN(len - offsetof(struct sockaddr_un, sun_path), sizeof(sa.sun_path));
	return g_strndup(sa.sun_path, n);
}

/* Where VM @name's socket belongs (g_free()). */
static char *vm_host_path(const VmHost *h, const char *name)
{
	return g_strdup_printf("%s/%s.sock", h->vm_dir, name);
}

/* RelayVmOfFn: the VM whose socket @fd was accepted on; none for the
 * shared socket; -ENOENT for any other address (a VM removed, renamed, or
 * its directory moved while the connection was kept): a connection never
 * becomes the shared socket's for want of its VM. */
int vm_host_vm_of(void *userdata, int fd, VmEntry **ret)
{
	VmHost *h = userdata;
	g_autofree char *path = vm_socket_address(fd);
	VmSocket *s = path ? g_hash_table_lookup(h->by_path, path) : NULL;

	*ret = NULL;
	if (s) {
		*ret = vm_table_find(h->table, s->name);
		return *ret ? 0 : -ENOENT;
	}
	if (g_strcmp0(path, h->main_address) == 0)
		return 0;
	log_ratelimited(LOG_WARNING, NULL,
			"a connection came in on %s, which is neither a VM's socket nor the shared "
			"socket (%s): its VM is gone, or its directory moved",
			path ? path : "an unnamed socket",
			h->main_address ? h->main_address : "unnamed");
	return -ENOENT;
}

/* Drop the listening socket the store kept as @key (@fd, whose address is
 * @path): close it, out of the store; its file goes if it is in our
 * directory (only a socket, never what replaced it). */
static void vm_host_drop_stored(VmHost *h, const char *key, int fd, const char *path)
{
	struct stat st;
	size_t n = strlen(h->vm_dir);

	if (path && strncmp(path, h->vm_dir, n) == 0 && path[n] == '/' && !strchr(path + n + 1, '/') &&
	    lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		(void)unlink(path);
	vm_host_store_remove(key);
	close(fd);
}

/* The listening sockets a predecessor left (name -> fd, taken over). Each
 * is served only where its VM's socket belongs now, and only once its file
 * has the owner, group and mode its VM's assignment names now. */
void vm_host_adopt_sockets(VmHost *h, GHashTable *fds)
{
	GHashTableIter it;
	gpointer key, value;

	g_hash_table_iter_init(&it, fds);
	while (g_hash_table_iter_next(&it, &key, &value)) {
		const char *name = (const char *)key + strlen(VM_HOST_STORE_PREFIX);
		int fd = GPOINTER_TO_INT(value);
		g_autofree char *path = vm_socket_address(fd);
		g_autofree char *want = vm_host_path(h, name);
		g_autofree char *why = NULL;
		VmEntry *vm = vm_table_find(h->table, name);
		ListenerPerms perms;
		int r;

		if (!vm || !path || sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
			/* Not a VM any more (removed while we were down, its
			 * state lost), or not a socket at all. */
			if (!vm)
				log_info("VM %s is no more: its socket %s goes", name,
					 path ? path : "(unbound)");
			else
				log_warning("VM %s: what the fd store kept is not its listening "
					    "socket; binding a new one",
					    name);
			vm_host_drop_stored(h, key, fd, vm ? NULL : path);
			continue;
		}
		if (strcmp(path, want) != 0) {
			/* --vm-dir moved: the old directory is not checked, and
			 * the connections made there are closed (vm_host_vm_of()). */
			log_notice("VM %s: its kept socket %s is not where its socket belongs now (%s): "
				   "binding that one instead; connections made on the old one are "
				   "closed",
				   name, path, want);
			vm_host_drop_stored(h, key, fd, NULL);
			continue;
		}
		vm_host_perms(h, &vm->spec, &perms);
		r = listener_set_perms(path, &perms, &why);
		if (r < 0) {
			log_error("VM %s: cannot give its kept socket the owner and mode its assignment "
				  "names (%s); binding a new one",
				  name, why);
			vm_host_store_remove(key);
			close(fd);
			continue;
		}
		(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
		r = vm_host_serve(h, name, path, fd);
		if (r < 0) {
			log_warning("VM %s: cannot serve the socket the fd store kept (%s); binding a "
				    "new one",
				    name, strerror(-r));
			/* vm_host_serve() closed the fd: it took it over. */
			vm_host_store_remove(key);
			continue;
		}
	}
	g_hash_table_remove_all(fds);
}
