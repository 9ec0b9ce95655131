/* SPDX-License-Identifier: MIT */
/*
 * fd-store-keeper: the part of systemd that the daemon's restarts need,
 * for the real-kernel tests (the guest has no systemd): a notify socket,
 * the file descriptor store, and starting the daemon again with what the
 * store holds.
 *
 *   fd-store-keeper NOTIFY_PATH OUT ERR DAEMON [ARG...]
 *
 * Starts DAEMON with $NOTIFY_SOCKET at NOTIFY_PATH, its stdout appended to
 * OUT and its stderr to ERR. Keeps every fd it stores (FDSTORE=1 with
 * FDNAME=; FDSTOREREMOVE=1 drops them), whatever becomes of the daemon.
 *   SIGUSR1: SIGTERM to the daemon, then wait for it: the store stays;
 *   SIGUSR2: SIGKILL to the daemon, then wait for it: the store stays;
 *   SIGHUP:  start the daemon again, passing the store as systemd does
 *            (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES, the fds from 3 on);
 *   SIGTERM: stop the daemon and exit, closing the store.
 * One line on stdout per event: "started PID", "ready N" (READY=1 so far),
 * "stored NAME", "removed NAME", "exited STATUS" (128 + signal when
 * killed). Exit status 0, or 1 for a failure of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_STORED 256
#define MAX_FDS_PER_MESSAGE 16

static struct {
	char name[256];
	int fd;
} store[MAX_STORED];
static unsigned n_stored;
static pid_t daemon_pid;
static unsigned ready;

/* One event line: "EVENT NAME" or "EVENT N". */
static void say(const char *event, const char *name, long n)
{
	if (name)
		printf("%s %s\n", event, name);
	else
		printf("%s %ld\n", event, n);
	fflush(stdout);
}

static void store_remove(const char *name)
{
	for (unsigned i = n_stored; i-- > 0;)
		if (strcmp(store[i].name, name) == 0) {
			close(store[i].fd);
			store[i] = store[--n_stored];
			say("removed", name, 0);
		}
}

/* One notify datagram: its lines and the fds it carried. */
static void on_notify(int sock)
{
	char buf[4096], cbuf[CMSG_SPACE(sizeof(int) * MAX_FDS_PER_MESSAGE)];
	struct iovec iov = { buf, sizeof(buf) - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	char name[256] = "stored";
	int fds[MAX_FDS_PER_MESSAGE], store_them = 0, remove = 0;
	unsigned n_fds = 0;
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

	if (n < 0)
		return;
	buf[n] = '\0';
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) &&
				   n_fds < MAX_FDS_PER_MESSAGE;
		     k++)
			memcpy(&fds[n_fds++], CMSG_DATA(c) + k * sizeof(int), sizeof(int));
	}
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		if (strcmp(line, "FDSTORE=1") == 0)
			store_them = 1;
		else if (strcmp(line, "FDSTOREREMOVE=1") == 0)
			remove = 1;
		else if (strncmp(line, "FDNAME=", 7) == 0)
			snprintf(name, sizeof(name), "%s", line + 7);
		else if (strcmp(line, "READY=1") == 0)
			say("ready", NULL, ++ready);
	}
	if (remove)
		store_remove(name);
	for (unsigned i = 0; i < n_fds; i++) {
		if (!store_them || n_stored == MAX_STORED) {
			close(fds[i]);
			continue;
		}
		snprintf(store[n_stored].name, sizeof(store[n_stored].name), "%s", name);
		store[n_stored++].fd = fds[i];
		say("stored", name, 0);
	}
}

/* Start the daemon with the store passed on. Return: 0 or -1. */
static int start(char **argv, const char *notify, const char *out, const char *err)
{
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		char names[8192] = "", num[32];
		int o = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		int e = open(err, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		int base = 3 + (int)n_stored + 16;
		sigset_t none;

		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(127);
		/* Out of the way of fds 3.., then into place. */
		for (unsigned i = 0; i < n_stored; i++)
			if (fcntl(store[i].fd, F_DUPFD_CLOEXEC, base + (int)i) < 0)
				_exit(127);
		for (unsigned i = 0, len = 0; i < n_stored; i++) {
			int n;

			if (dup2(base + (int)i, 3 + (int)i) < 0)
				_exit(127);
			n = snprintf(names + len, sizeof(names) - len, "%s%s", i ? ":" : "",
				     store[i].name);
			if (n < 0 || (size_t)n >= sizeof(names) - len)
				_exit(127); /* the names do not fit: never pass them cut */
			len += (unsigned)n;
		}
		setenv("NOTIFY_SOCKET", notify, 1);
		if (n_stored) {
			snprintf(num, sizeof(num), "%d", (int)getpid());
			setenv("LISTEN_PID", num, 1);
			snprintf(num, sizeof(num), "%u", n_stored);
			setenv("LISTEN_FDS", num, 1);
			setenv("LISTEN_FDNAMES", names, 1);
		}
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execvp(argv[0], argv);
		_exit(127);
	}
	daemon_pid = pid;
	say("started", NULL, pid);
	return 0;
}

/* Wait for the daemon to exit, after @sig. */
static void stop(int sig)
{
	int status;

	if (!daemon_pid)
		return;
	kill(daemon_pid, sig);
	while (waitpid(daemon_pid, &status, 0) < 0 && errno == EINTR)
		;
	daemon_pid = 0;
	say("exited", NULL, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	sigset_t mask;
	int sock, sfd;

	if (argc < 5) {
		fprintf(stderr, "usage: fd-store-keeper NOTIFY_PATH OUT ERR DAEMON [ARG...]\n");
		return 2;
	}
	if (strlen(argv[1]) >= sizeof(sa.sun_path))
		return 2;
	strcpy(sa.sun_path, argv[1]);
	unlink(argv[1]);
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || bind(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("fd-store-keeper: notify socket");
		return 1;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGUSR2);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0 || start(argv + 4, argv[1], argv[2], argv[3]) < 0) {
		perror("fd-store-keeper");
		return 1;
	}
	for (;;) {
		struct pollfd p[2] = { { sock, POLLIN, 0 }, { sfd, POLLIN, 0 } };
		struct signalfd_siginfo si;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return 1;
		if (p[0].revents & POLLIN)
			on_notify(sock);
		if (!(p[1].revents & POLLIN) || read(sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		switch (si.ssi_signo) {
		case SIGUSR1:
			stop(SIGTERM);
			break;
		case SIGUSR2:
			stop(SIGKILL);
			break;
		case SIGHUP:
			if (!daemon_pid && start(argv + 4, argv[1], argv[2], argv[3]) < 0)
				return 1;
			break;
		case SIGCHLD:
			if (daemon_pid) {
				int status;

				if (waitpid(daemon_pid, &status, WNOHANG) == daemon_pid) {
					daemon_pid = 0;
					say("exited", NULL,
					    WIFEXITED(status) ? WEXITSTATUS(status)
							      : 128 + WTERMSIG(status));
				}
			}
			/* Its sender processes are not ours; nothing else is. */
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
			break;
		default: /* SIGTERM */
			stop(SIGTERM);
			for (unsigned i = 0; i < n_stored; i++)
				close(store[i].fd);
			unlink(argv[1]);
			return 0;
		}
	}
}
