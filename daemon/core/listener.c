/* SPDX-License-Identifier: MIT */
/*
 * Listening sockets: socket activation by name, our own bind (mode, group,
 * stale files), the allow-lists and the accept loop. Owns nothing but the
 * listening side; an accepted fd goes straight to the caller.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "listener.h"
#include "log.h"
#include "util.h"

/* Fail with @err, saying why in *@why (when asked) for the caller to log. */
static int G_GNUC_PRINTF(3, 4) listener_fail(char **why, int err, const char *fmt, ...)
{
	va_list ap;

	if (why) {
		va_start(ap, fmt);
		*why = g_strdup_vprintf(fmt, ap);
		va_end(ap);
	}
	return err;
}

int listener_perms_parse(const char *mode, const char *group, mode_t default_mode,
			 const char *what, ListenerPerms *ret, char **why)
{
	unsigned long m = default_mode;
	gid_t gid = (gid_t)-1;

	if (mode) {
		char *end;

		m = strtoul(mode, &end, 8);
		if (!*mode || *end || m > 0777)
			return listener_fail(why, -EINVAL, "bad %s '%s': use octal, e.g. 0660", what,
					     mode);
	}
	/* An empty group (an unset variable in the config) keeps the default. */
	if (group && *group) {
		struct group *g = getgrnam(group);
		char *end;
		unsigned long v = strtoul(group, &end, 10);

		if (g)
			gid = g->gr_gid;
		else if (!*end && v < (gid_t)-1)
			gid = (gid_t)v;
		else
			return listener_fail(why, -ENOENT, "no such group '%s' (%s)", group, what);
	}
	*ret = (ListenerPerms){ .mode = (mode_t)m, .uid = (uid_t)-1, .gid = gid, .group = group };
	return 0;
}

int listener_remove_stale_socket(const char *path, char **why)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	_cleanup_fd_ int fd = -1;

	if (strlen(path) >= sizeof(sa.sun_path))
		return listener_fail(why, -ENAMETOOLONG,
				     "socket path %s is too long (%zu bytes, the limit is %zu)", path,
				     strlen(path), sizeof(sa.sun_path) - 1);
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		return listener_fail(why, -errno, "cannot look at %s: %s", path, strerror(errno));
	}
	if (!S_ISSOCK(st.st_mode))
		return listener_fail(why, -EEXIST, "%s exists and is not a socket; not touching it",
				     path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return listener_fail(why, -errno, "cannot create a socket: %s", strerror(errno));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return listener_fail(why, -EADDRINUSE,
				     "another rdmacm-mux is serving %s; stop it first", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return listener_fail(why, -errno, "cannot remove the stale socket %s: %s", path,
				     strerror(errno));
	log_info("removed the stale socket %s", path);
	return 0;
}

/* chmod() of what the O_PATH fd @fd names: fchmod() refuses O_PATH fds,
 * and the kernel's magic link names the inode itself, never a path that
 * could be swapped in between. */
static int listener_chmod_fd(int fd, mode_t mode)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return chmod(proc, mode) < 0 ? -errno : 0;
}

static int listener_chown_fd(int fd, uid_t uid, gid_t gid)
{
	return fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0 ? -errno : 0;
}

int listener_set_perms(const char *path, const ListenerPerms *perms, char **why)
{
	_cleanup_fd_ int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	uid_t me = geteuid();
	uid_t uid = perms->uid != (uid_t)-1 ? perms->uid : me;
	gid_t gid = perms->gid != (gid_t)-1 ? perms->gid : getegid();
	mode_t mode = perms->mode & 0777;
	struct stat st;
	int r = 0;

	if (fd < 0)
		return listener_fail(why, -errno, "cannot open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0)
		return listener_fail(why, -errno, "cannot look at %s: %s", path, strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return listener_fail(why, -EEXIST,
				     "%s is not a socket (%s): someone put it there; not touching it",
				     path, S_ISLNK(st.st_mode)	? "a symbolic link"
					   : S_ISFIFO(st.st_mode) ? "a FIFO"
					   : S_ISREG(st.st_mode)  ? "a regular file"
								  : "not a socket");
	if (st.st_uid == uid && st.st_gid == gid) {
		/* One step: the old mode or the new one, nothing between. */
		if ((st.st_mode & 0777) != mode)
			r = listener_chmod_fd(fd, mode);
	} else {
		/* Owner and group change too. The daemon's first (the mode of
		 * another user's file needs CAP_FOWNER, which the units do not
		 * grant), then owner bits alone, then the group, the mode and
		 * the owner: at every step the file lets in no one but the
		 * daemon and whom the old or the new permissions let in. */
		if (st.st_uid != me)
			r = listener_chown_fd(fd, me, (gid_t)-1);
		if (r == 0)
			r = listener_chmod_fd(fd, mode & 0700);
		if (r == 0 && st.st_gid != gid)
			r = listener_chown_fd(fd, (uid_t)-1, gid);
		if (r == 0)
			r = listener_chmod_fd(fd, mode);
		if (r == 0 && uid != me)
			r = listener_chown_fd(fd, uid, (gid_t)-1);
	}
	if (r < 0) {
		if (perms->uid != (uid_t)-1 || perms->gid == (gid_t)-1)
			return listener_fail(why, r, "cannot give %s to uid %d gid %d, mode %04o: %s",
					     path, (int)uid, (int)gid, (unsigned)mode, strerror(-r));
		return listener_fail(why, r, "cannot give %s to group %s, mode %04o: %s", path,
				     perms->group, (unsigned)mode, strerror(-r));
	}
	return 0;
}

int listener_bind(const char *path, const ListenerPerms *perms, int *ret_fd, bool *bound,
		  char **why)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_fd_ int fd = -1;
	mode_t old_umask;
	int r;

	r = listener_remove_stale_socket(path, why);
	if (r < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return listener_fail(why, -errno, "cannot create a socket for %s: %s", path,
				     strerror(errno));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	/* The file comes into being with the owner's bits alone (the kernel
	 * takes the socket inode's 0777 less the umask): group and others
	 * get theirs only once the file has its group. */
	old_umask = umask(0777 & ~(perms->mode & 0700));
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old_umask);
	if (r < 0) {
		r = -errno;
		return listener_fail(why, r, "cannot bind %s: %s", path, strerror(-r));
	}
	*bound = true;
	r = listener_set_perms(path, perms, why);
	if (r < 0)
		return r;
	if (listen(fd, SOMAXCONN) < 0) {
		r = -errno;
		return listener_fail(why, r, "cannot listen on %s: %s", path, strerror(-r));
	}
	*ret_fd = fd_steal(&fd);
	return 0;
}

/* A passed socket: check it and make it non-blocking. */
static int listener_take_one(int fd, const char *what)
{
	int flags;

	if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
		log_error("the %s socket systemd passed is not a listening UNIX stream socket",
			  what);
		return -EINVAL;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		log_error("cannot make the %s socket non-blocking: %s", what, strerror(errno));
		return -errno;
	}
	return 0;
}

int listener_take_activated(ListenerAsideFn aside, GHashTable *aside_fds, int *ret_main,
			    int *ret_control)
{
	g_auto(GStrv) names = NULL;
	g_autofree int *fds = NULL;
	int n = sd_listen_fds_with_names(1, &names);

	*ret_main = -1;
	*ret_control = -1;
	if (n < 0) {
		log_error("cannot take the fds systemd passed: %s", strerror(-n));
		return n;
	}
	fds = g_new(int, MAX(n, 1));
	for (int i = 0; i < n; i++)
		fds[i] = SD_LISTEN_FDS_START + i;
	return listener_take_passed((unsigned)n, fds, (const char *const *)names, aside, aside_fds,
				    ret_main, ret_control);
}

int listener_take_passed(unsigned n, const int *fds, const char *const *names,
			 ListenerAsideFn aside, GHashTable *aside_fds, int *ret_main,
			 int *ret_control)
{
	int main_fd = -1, control_fd = -1, sockets = 0, r;

	*ret_main = -1;
	*ret_control = -1;
	for (unsigned i = 0; i < n; i++) {
		int fd = fds[i];
		const char *name = names && names[i] ? names[i] : "";
		bool is_control = strcmp(name, "control") == 0;
		int *slot = is_control ? &control_fd : &main_fd;

		if (aside && aside(name)) {
			(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
			g_hash_table_replace(aside_fds, g_strdup(name), GINT_TO_POINTER(fd));
			continue;
		}
		if (++sockets > 2) {
			log_error("systemd passed more than two sockets; rdmacm-mux serves one, "
				  "and a second named \"control\"");
			return -EINVAL;
		}
		r = listener_take_one(fd, is_control ? "control" : "main");
		if (r < 0)
			return r;
		if (*slot >= 0) {
			log_error("systemd passed two %s sockets; name the control socket "
				  "\"control\" (FileDescriptorName=control)",
				  is_control ? "control" : "main");
			return -EINVAL;
		}
		*slot = fd;
	}
	if (sockets > 0 && main_fd < 0) {
		log_error("systemd passed only a control socket; the main socket is missing");
		return -EINVAL;
	}
	*ret_main = main_fd;
	*ret_control = control_fd;
	return sockets;
}

static bool id_listed(const GArray *list, guint id)
{
	if (!list || list->len == 0)
		return true;
	for (guint i = 0; i < list->len; i++)
		if (g_array_index(list, guint, i) == id)
			return true;
	return false;
}

bool listener_allows(const ListenerAllow *allow, const struct ucred *cred)
{
	return id_listed(allow->uids, cred->uid) && id_listed(allow->gids, cred->gid);
}

struct Listener {
	int fd;
	char *what;
	ListenerAllow allow;
	unsigned retry_ms;
	ListenerAcceptFn fn;
	void *userdata;
	sd_event_source *io;
	sd_event_source *retry;
	bool paused; /* out of fds, until an accept() finds room */
};

/* Out of fds: a level-triggered socket would wake us at once, forever.
 * Stop watching it and look again a little later. */
static void listener_pause(Listener *l, int err)
{
	uint64_t now;

	if (!l->paused)
		log_warning("out of file descriptors (%s): not accepting on the %s socket until "
			    "one is free (clients wait in the backlog)",
			    strerror(err), l->what);
	l->paused = true;
	(void)sd_event_source_set_enabled(l->io, SD_EVENT_OFF);
	(void)sd_event_now(sd_event_source_get_event(l->retry), CLOCK_MONOTONIC, &now);
	(void)sd_event_source_set_time(l->retry, now + (uint64_t)l->retry_ms * 1000);
	(void)sd_event_source_set_enabled(l->retry, SD_EVENT_ONESHOT);
}

static int listener_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	Listener *l = userdata;

	(void)s;
	(void)revents;
	for (;;) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ucred cred = { .pid = 0 };
		socklen_t len = sizeof(cred);

		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				listener_pause(l, errno);
				return 0;
			}
			if (errno != EAGAIN)
				log_ratelimited(LOG_WARNING, NULL, "accept on the %s socket failed: %s",
						l->what, strerror(errno));
			else if (l->paused) {
				/* Linux finds a free fd before it looks at the
				 * backlog: EAGAIN means there is room again. */
				log_info("accepting on the %s socket again", l->what);
				l->paused = false;
			}
			return 0;
		}
		if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
			log_ratelimited(LOG_WARNING, NULL,
					"refusing a connection on the %s socket: no credentials: %s",
					l->what, strerror(errno));
			close(cfd);
			continue;
		}
		if (!listener_allows(&l->allow, &cred)) {
			log_ratelimited(LOG_WARNING, NULL,
					"refusing a connection on the %s socket (pid %d uid %d gid %d): "
					"not in the allow-lists",
					l->what, (int)cred.pid, (int)cred.uid, (int)cred.gid);
			close(cfd);
			continue;
		}
		l->fn(cfd, &cred, l->userdata);
	}
}

static int listener_on_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
	Listener *l = userdata;

	(void)s;
	(void)usec;
	/* Look now rather than wait for the socket to be readable: with
	 * nobody waiting, EAGAIN is how we learn that there is room again. */
	(void)sd_event_source_set_enabled(l->io, SD_EVENT_ON);
	return listener_on_io(l->io, l->fd, EPOLLIN, l);
}

int listener_new(sd_event *event, int fd, const char *what, const ListenerAllow *allow,
		 unsigned retry_ms, ListenerAcceptFn fn, void *userdata, Listener **ret)
{
	Listener *l = g_new0(Listener, 1);
	int r;

	l->fd = fd;
	l->what = g_strdup(what);
	l->allow = *allow;
	l->retry_ms = retry_ms ? retry_ms : 1;
	l->fn = fn;
	l->userdata = userdata;
	r = sd_event_add_io(event, &l->io, fd, EPOLLIN, listener_on_io, l);
	if (r >= 0)
		r = sd_event_add_time(event, &l->retry, CLOCK_MONOTONIC, 0, 0, listener_on_retry, l);
	if (r >= 0)
		r = sd_event_source_set_enabled(l->retry, SD_EVENT_OFF);
	if (r < 0) {
		listener_free(l);
		return r;
	}
	*ret = l;
	return 0;
}

bool listener_paused(const Listener *l)
{
	return l->paused;
}

void listener_free(Listener *l)
{
	if (!l)
		return;
	sd_event_source_disable_unref(l->io);
	sd_event_source_disable_unref(l->retry);
	g_free(l->what);
	g_free(l);
}
