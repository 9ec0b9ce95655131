/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for systemd as the daemon's supervisor: the notify socket,
 * the file descriptor store (FDSTORE=1, FDSTOREREMOVE=1, FDNAME=) and
 * starting the daemon again with the stored fds passed the way systemd
 * passes them (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES, fds from 3 on),
 * and, as systemd, keeping one copy of a file whatever its names. A
 * thread of its own reads the notify socket, so that the store is current
 * whatever the test is doing; and a start first takes in every message
 * sent before it, as systemd handles a dead service's notifications before
 * its SIGCHLD: a daemon killed right after it stored an fd still hands it
 * over.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "supervisor.h"

#define MAX_FDS_PER_MESSAGE 16

typedef struct StoredFd {
	char *name;
	int fd;
} StoredFd;

struct Supervisor {
	char *path;
	int sock;
	GThread *thread;
	/* pthread, not GMutex: ThreadSanitizer sees through it */
	pthread_mutex_t lock;
	pthread_cond_t changed;
	GArray *store; /* StoredFd */
	unsigned ready; /* READY=1 messages so far */
	gint stop;
};

static void stored_fd_clear(gpointer p)
{
	StoredFd *s = p;

	g_free(s->name);
	close(s->fd);
}

/* Whether the store holds @fd's file already (under any name). systemd
 * compares with kcmp(), the same open file: an fd passed again is one. */
static bool supervisor_holds_file(Supervisor *s, int fd)
{
	struct stat a, b;

	if (fstat(fd, &a) < 0)
		return false;
	for (guint i = 0; i < s->store->len; i++)
		if (fstat(g_array_index(s->store, StoredFd, i).fd, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino)
			return true;
	return false;
}

/* One datagram: its lines, and the fds it carried. Under s->lock. */
static void supervisor_handle(Supervisor *s, const char *text, const int *fds, unsigned n_fds)
{
	g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
	const char *name = "stored";
	bool store = false, remove = false;

	for (char **l = lines; *l; l++) {
		if (strcmp(*l, "FDSTORE=1") == 0)
			store = true;
		else if (strcmp(*l, "FDSTOREREMOVE=1") == 0)
			remove = true;
		else if (g_str_has_prefix(*l, "FDNAME="))
			name = *l + strlen("FDNAME=");
	}
	for (char **l = lines; *l; l++)
		if (strcmp(*l, "READY=1") == 0)
			s->ready++;
	if (remove) {
		for (guint i = s->store->len; i-- > 0;)
			if (strcmp(g_array_index(s->store, StoredFd, i).name, name) == 0)
				g_array_remove_index(s->store, i);
	}
	for (unsigned i = 0; i < n_fds; i++) {
		if (store && supervisor_holds_file(s, fds[i])) {
			/* As systemd: a file it holds already is not stored
			 * again, whatever name it comes with. */
			close(fds[i]);
		} else if (store) {
			StoredFd e = { g_strdup(name), fds[i] };

			(void)fcntl(fds[i], F_SETFD, FD_CLOEXEC);
			g_array_append_val(s->store, e);
		} else {
			close(fds[i]);
		}
	}
	pthread_cond_broadcast(&s->changed);
}

/* Take in one waiting datagram, under s->lock (so that a message is
 * never half read when a start looks at the store). Return: false when
 * none was waiting. */
static bool supervisor_receive(Supervisor *s)
{
	char buf[4096], cbuf[CMSG_SPACE(sizeof(int) * MAX_FDS_PER_MESSAGE)];
	struct iovec iov = { buf, sizeof(buf) - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	int fds[MAX_FDS_PER_MESSAGE];
	unsigned n_fds = 0;
	ssize_t n = recvmsg(s->sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

	if (n < 0)
		return false;
	buf[n] = '\0';
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0;
		     k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) && n_fds < MAX_FDS_PER_MESSAGE; k++)
			memcpy(&fds[n_fds++], CMSG_DATA(c) + k * sizeof(int), sizeof(int));
	}
	supervisor_handle(s, buf, fds, n_fds);
	return true;
}

static gpointer supervisor_thread(gpointer data)
{
	Supervisor *s = data;

	while (!g_atomic_int_get(&s->stop)) {
		struct pollfd p = { .fd = s->sock, .events = POLLIN };

		if (poll(&p, 1, 50) <= 0)
			continue;
		pthread_mutex_lock(&s->lock);
		(void)supervisor_receive(s);
		pthread_mutex_unlock(&s->lock);
	}
	return NULL;
}

Supervisor *supervisor_new(const char *dir)
{
	Supervisor *s = g_new0(Supervisor, 1);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	s->path = g_strdup_printf("%s/notify-%p", dir, (void *)s);
	s->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	g_assert_cmpint(s->sock, >=, 0);
	g_assert_cmpuint(strlen(s->path), <, sizeof(sa.sun_path));
	strcpy(sa.sun_path, s->path);
	g_assert_cmpint(bind(s->sock, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
	pthread_mutex_init(&s->lock, NULL);
	{
		pthread_condattr_t a;

		pthread_condattr_init(&a);
		pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
		pthread_cond_init(&s->changed, &a);
		pthread_condattr_destroy(&a);
	}
	s->store = g_array_new(FALSE, FALSE, sizeof(StoredFd));
	g_array_set_clear_func(s->store, stored_fd_clear);
	s->thread = g_thread_new("supervisor", supervisor_thread, s);
	return s;
}

void supervisor_free(Supervisor *s)
{
	if (!s)
		return;
	g_atomic_int_set(&s->stop, 1);
	g_thread_join(s->thread);
	g_array_unref(s->store);
	close(s->sock);
	unlink(s->path);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->changed);
	g_free(s->path);
	g_free(s);
}

const char *supervisor_notify_path(const Supervisor *s)
{
	return s->path;
}

unsigned supervisor_ready_count(Supervisor *s)
{
	unsigned n;

	pthread_mutex_lock(&s->lock);
	n = s->ready;
	pthread_mutex_unlock(&s->lock);
	return n;
}

bool supervisor_wait_ready(Supervisor *s, unsigned after, int timeout_ms)
{
	struct timespec end;
	bool ok;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += timeout_ms / 1000;
	end.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&s->lock);
	while (s->ready <= after && pthread_cond_timedwait(&s->changed, &s->lock, &end) == 0)
		;
	ok = s->ready > after;
	pthread_mutex_unlock(&s->lock);
	return ok;
}

unsigned supervisor_stored(Supervisor *s, const char *prefix)
{
	unsigned n = 0;

	pthread_mutex_lock(&s->lock);
	/* What was sent before counts, however late the thread is on a
	 * loaded machine. */
	while (supervisor_receive(s))
		;
	for (guint i = 0; i < s->store->len; i++)
		if (g_str_has_prefix(g_array_index(s->store, StoredFd, i).name, prefix))
			n++;
	pthread_mutex_unlock(&s->lock);
	return n;
}

int supervisor_stored_fd(Supervisor *s, const char *name)
{
	int fd = -1;

	pthread_mutex_lock(&s->lock);
	while (supervisor_receive(s))
		;
	for (guint i = 0; i < s->store->len && fd < 0; i++)
		if (strcmp(g_array_index(s->store, StoredFd, i).name, name) == 0)
			fd = g_array_index(s->store, StoredFd, i).fd;
	pthread_mutex_unlock(&s->lock);
	return fd;
}

void supervisor_clear(Supervisor *s)
{
	pthread_mutex_lock(&s->lock);
	g_array_set_size(s->store, 0);
	pthread_mutex_unlock(&s->lock);
}

void supervisor_passed(Supervisor *s, int min_fd, GPtrArray *names, GArray *fds)
{
	pthread_mutex_lock(&s->lock);
	/* What was sent before this start counts for it. */
	while (supervisor_receive(s))
		;
	for (guint i = 0; i < s->store->len; i++) {
		const StoredFd *e = &g_array_index(s->store, StoredFd, i);
		/* Copies: the store keeps its own, as systemd's does. */
		int fd = fcntl(e->fd, F_DUPFD_CLOEXEC, min_fd + (int)s->store->len);

		g_assert_cmpint(fd, >=, 0);
		g_array_append_val(fds, fd);
		g_ptr_array_add(names, g_strdup(e->name));
	}
	pthread_mutex_unlock(&s->lock);
}

GPid supervisor_exec(Supervisor *s, char **argv, char **envp, int log_fd)
{
	g_autoptr(GPtrArray) env = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GPtrArray) stored = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GArray) copies = g_array_new(FALSE, FALSE, sizeof(int));
	g_autofree char *names = NULL;
	const int *fds;
	char listen_pid[32] = "LISTEN_PID=";
	unsigned n;
	pid_t pid;

	/* Above the fds 3.. they go to in the child. */
	supervisor_passed(s, 3 + 16, stored, copies);
	n = copies->len;
	fds = (const int *)(void *)copies->data;
	g_ptr_array_add(stored, NULL);
	names = g_strjoinv(":", (char **)stored->pdata);
	for (char **e = envp; *e; e++)
		if (!g_str_has_prefix(*e, "LISTEN_") && !g_str_has_prefix(*e, "NOTIFY_SOCKET="))
			g_ptr_array_add(env, g_strdup(*e));
	g_ptr_array_add(env, g_strdup_printf("NOTIFY_SOCKET=%s", s->path));
	if (n > 0) {
		g_ptr_array_add(env, g_strdup_printf("LISTEN_FDS=%u", n));
		g_ptr_array_add(env, g_strdup_printf("LISTEN_FDNAMES=%s", names));
		g_ptr_array_add(env, NULL); /* LISTEN_PID, set in the child */
	}
	g_ptr_array_add(env, NULL);

	pid = fork();
	g_assert_cmpint(pid, >=, 0);
	if (pid == 0) {
		/* Only async-signal-safe calls from here: the parent has threads. */
		char digits[16];
		int k = 0;
		unsigned v = (unsigned)getpid();

		do
			digits[k++] = (char)('0' + v % 10);
		while ((v /= 10) && k < 15);
		for (size_t j = strlen(listen_pid); k > 0 && j < sizeof(listen_pid) - 1; j++)
			listen_pid[j] = digits[--k];
		if (n > 0)
			env->pdata[env->len - 2] = listen_pid;
		if (dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0)
			_exit(126);
		for (unsigned i = 0; i < n; i++)
			if (dup2(fds[i], 3 + (int)i) < 0)
				_exit(126);
		execve(argv[0], argv, (char **)env->pdata);
		_exit(127);
	}
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
	return pid;
}

void supervisor_store_fd(Supervisor *s, const char *name, int fd)
{
	StoredFd e = { g_strdup(name), fcntl(fd, F_DUPFD_CLOEXEC, 3) };

	g_assert_cmpint(e.fd, >=, 0);
	pthread_mutex_lock(&s->lock);
	g_array_append_val(s->store, e);
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
}
