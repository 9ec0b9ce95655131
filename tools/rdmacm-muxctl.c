/* SPDX-License-Identifier: MIT */
/*
 * rdmacm-muxctl: ask a running rdmacm-mux what it is doing.
 *
 * Owns the command line and the client side of the control protocol
 * (daemon/control/control.h): connect to PREFIX-DEV-PORT.ctl, send one command
 * line, copy the answer to stdout. An answer that is an "error: ..." line
 * goes to stderr and the exit status is 1. The VM commands' user and group
 * names are resolved here, where the system's user database is (the
 * daemon's sandbox may not reach LDAP), and sent as numbers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "fd-write.h"

#define CTL_SUFFIX ".ctl"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: rdmacm-muxctl [--socket PATH | -d DEV [-p PORT] [-s PREFIX]] COMMAND [--json]\n"
		"\n"
		"Commands:\n"
		"  status     the daemon, its port and totals, and who holds the CM class\n"
		"             (this daemon, ib_cm, ...) on every RDMA port\n"
		"  clients    every client: pid, uid, command, GIDs, queue, sessions, stats\n"
		"  sessions   every CM session: comm ids (client, wire, peer), GIDs, state, timer\n"
		"  counters   every relay counter\n"
		"  metrics    the counters and totals in the Prometheus text format, for\n"
		"             node_exporter's textfile collector (no --json)\n"
		"  trace      every CM MAD the daemon relays or refuses, live, until interrupted\n"
		"  restart    have the daemon execute its binary again (an upgrade takes effect),\n"
		"             keeping every client, GID and session (root; also SIGHUP)\n"
		"  vms        every VM: its socket, GIDs (registered or not), clients,\n"
		"             sessions and counters\n"
		"  vm add NAME --gid GID... [--prefix GID/LEN...] [--owner USER] [--group GROUP]\n"
		"             [--mode MODE] [--domain UUID]\n"
		"             a VM, and its socket DIR/NAME.sock (the daemon's socket path\n"
		"             + .vm by default): only its connections may register its GIDs\n"
		"  vm set NAME [--gid GID...] [--prefix GID/LEN...] [--owner USER] [--group GROUP]\n"
		"             [--mode MODE] [--domain UUID]\n"
		"             change what is given (--gid and --prefix replace both lists);\n"
		"             its clients lose the GIDs it no longer has, and its connections\n"
		"             that a new owner, group or mode would refuse\n"
		"  vm del NAME [--domain UUID]\n"
		"             disconnect the VM's clients, free its GIDs, remove its socket\n"
		"             (vm add, set and del: root, or the daemon's user)\n"
		"\n"
		"Options:\n"
		"  -d, --device DEV      the daemon's RDMA device\n"
		"  -p, --port PORT       its port (default 1)\n"
		"  -s, --socket-prefix PREFIX\n"
		"                        its socket prefix (default " RDMACM_MUX_SOCKET_PREFIX ")\n"
		"      --socket PATH     the daemon's socket, or its control socket (PATH" CTL_SUFFIX ")\n"
		"  -j, --json            JSON instead of tables (trace: one object per line)\n"
		"      --gid GID         (vm add, set) a GID of the VM, e.g. fe80::5054:ff:fe12:3456\n"
		"      --prefix GID/LEN  (vm add, set) a range of GIDs, e.g. 2001:db8:1::/64\n"
		"      --owner USER      (vm add, set) the VM socket's owner (name or uid)\n"
		"      --group GROUP     (vm add, set) its group (name or gid)\n"
		"      --mode MODE       (vm add, set) its mode (octal; default 0600)\n"
		"      --domain UUID     (vm add) the libvirt domain that makes the VM; (vm set,\n"
		"                        del) only if that domain made it\n"
		"  -h, --help            this text\n"
		"\n"
		"Without --socket or -d, the one daemon under the default prefix is used.\n"
		"The control socket has the main socket's owner, group and mode: only root\n"
		"and the socket's group may use it.\n");
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The one control socket under @prefix, or NULL with a message. */
static char *find_single_daemon(const char *prefix)
{
	char *pattern = NULL, *path = NULL;
	glob_t g;

	if (asprintf(&pattern, "%s-*" CTL_SUFFIX, prefix) < 0)
		return NULL;
	if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
		fprintf(stderr, "rdmacm-muxctl: no rdmacm-mux control socket matches %s; "
				"is the daemon running? (use -d DEV [-p PORT] or --socket PATH)\n",
			pattern);
	} else if (g.gl_pathc > 1) {
		fprintf(stderr, "rdmacm-muxctl: %zu daemons are running; pick one with -d DEV "
				"[-p PORT] or --socket PATH:\n", g.gl_pathc);
		for (size_t i = 0; i < g.gl_pathc; i++)
			fprintf(stderr, "  %s\n", g.gl_pathv[i]);
	} else {
		path = strdup(g.gl_pathv[0]);
	}
	if (g.gl_pathc || path)
		globfree(&g);
	free(pattern);
	return path;
}

static const char *connect_hint(int err)
{
	switch (err) {
	case EACCES:
	case EPERM:
		return " (only root and the socket's group may use it)";
	case ENOENT:
		return " (is rdmacm-mux running for that device and port?)";
	case ECONNREFUSED:
		return " (nothing serves it: the daemon is gone and left its socket file)";
	default:
		return "";
	}
}

/* Connect to the control socket; @quiet: no message when that fails. */
static int ctl_connect_as(const char *path, bool quiet)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "rdmacm-muxctl: socket path %s is too long\n", path);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "rdmacm-muxctl: socket: %s\n", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = errno;

		if (!quiet)
			fprintf(stderr, "rdmacm-muxctl: cannot connect to %s: %s%s\n", path,
				strerror(err), connect_hint(err));
		close(fd);
		return -1;
	}
	return fd;
}

static int ctl_connect(const char *path)
{
	return ctl_connect_as(path, false);
}

/* Copy the answer to stdout. Return: the exit status. */
static int copy_answer(int fd, const char *path)
{
	static const char err_prefix[] = "error: ";
	char buf[65536];
	size_t got = 0;
	bool is_error = false, first = true;

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* A reset after a complete answer is still an answer. */
			if (errno == ECONNRESET && got > 0)
				break;
			fprintf(stderr, "rdmacm-muxctl: reading from %s: %s\n", path, strerror(errno));
			return 1;
		}
		if (n == 0)
			break;
		if (first) {
			is_error = (size_t)n >= sizeof(err_prefix) - 1 &&
				   memcmp(buf, err_prefix, sizeof(err_prefix) - 1) == 0;
			first = false;
		}
		got += (size_t)n;
		if (is_error) {
			if (got == (size_t)n)
				fputs("rdmacm-muxctl: ", stderr);
			fwrite(buf, 1, (size_t)n, stderr);
			continue;
		}
		if (fd_write_all(STDOUT_FILENO, buf, (size_t)n, -1) < 0)
			return errno == EPIPE ? 0 : 1; /* e.g. `| head` */
	}
	if (got == 0) {
		fprintf(stderr, "rdmacm-muxctl: %s closed the connection without an answer\n",
			path);
		return 1;
	}
	return is_error ? 1 : 0;
}

/* The VM commands' options, as the command line gave them. */
typedef struct VmArgs {
	char *tokens; /* " gid=... prefix=..." for the daemon */
	size_t len;
	bool given;
	bool domain; /* --domain: a check, not a change */
	unsigned n;  /* options given */
} VmArgs;

static int vm_args_add(VmArgs *v, const char *key, const char *value)
{
	char *t = NULL;

	if (asprintf(&t, "%s %s=%s", v->tokens ? v->tokens : "", key, value) < 0)
		return -ENOMEM;
	free(v->tokens);
	v->tokens = t;
	v->given = true;
	v->n++;
	return 0;
}

/* A user or group name, or a number, as a number in @buf. */
static bool vm_id_text(const char *value, bool group, char buf[16])
{
	char *end;
	unsigned long v = strtoul(value, &end, 10);

	if (*value && !*end && v < UINT32_MAX) {
		snprintf(buf, 16, "%lu", v);
		return true;
	}
	if (group) {
		struct group *g = getgrnam(value);

		if (g) {
			snprintf(buf, 16, "%u", (unsigned)g->gr_gid);
			return true;
		}
	} else {
		struct passwd *p = getpwnam(value);

		if (p) {
			snprintf(buf, 16, "%u", (unsigned)p->pw_uid);
			return true;
		}
	}
	fprintf(stderr, "rdmacm-muxctl: no such %s '%s' (--%s)\n", group ? "group" : "user", value,
		group ? "group" : "owner");
	return false;
}

/* One VM option; false for a bad value (said on stderr). */
static bool vm_option(VmArgs *v, int opt, const char *value)
{
	uint8_t gid[16];
	char num[16];

	switch (opt) {
	case 'G':
		if (inet_pton(AF_INET6, value, gid) != 1) {
			fprintf(stderr, "rdmacm-muxctl: --gid '%s' is not a GID (IPv6 form, e.g. "
					"fe80::1 or ::ffff:10.0.0.1)\n", value);
			return false;
		}
		return vm_args_add(v, "gid", value) == 0;
	case 'P': {
		const char *slash = strchr(value, '/');
		char addr[64];

		if (!slash || (size_t)(slash - value) >= sizeof(addr) || !slash[1]) {
			fprintf(stderr, "rdmacm-muxctl: --prefix '%s' is not GID/LENGTH, e.g. "
					"2001:db8::/64\n", value);
			return false;
		}
		memcpy(addr, value, (size_t)(slash - value));
		addr[slash - value] = '\0';
		if (inet_pton(AF_INET6, addr, gid) != 1) {
			fprintf(stderr, "rdmacm-muxctl: --prefix '%s': '%s' is not a GID\n", value,
				addr);
			return false;
		}
		return vm_args_add(v, "prefix", value) == 0;
	}
	case 'O':
	case 'R':
		return vm_id_text(value, opt == 'R', num) &&
		       vm_args_add(v, opt == 'R' ? "group" : "owner", num) == 0;
	case 'D':
		/* The daemon checks the form; this keeps it one token. */
		if (!*value || strlen(value) > 64 || strpbrk(value, " \t\r\n")) {
			fprintf(stderr, "rdmacm-muxctl: --domain '%s' is not a UUID\n", value);
			return false;
		}
		v->domain = true;
		return vm_args_add(v, "domain", value) == 0;
	case 'M':
		if (strspn(value, "01234567") != strlen(value) || !*value || strlen(value) > 4) {
			fprintf(stderr, "rdmacm-muxctl: --mode '%s' is not an octal mode, e.g. 0660\n",
				value);
			return false;
		}
		return vm_args_add(v, "mode", value) == 0;
	default:
		return false;
	}
}

/* Ask @fd for its status (JSON) and read two numbers from it; -1 for a
 * field that is not there. */
static int status_numbers(int fd, long *pid, long *generation)
{
	char buf[8192];
	size_t got = 0;
	const char *p;

	if (fd_write_all(fd, "status json\n", strlen("status json\n"), -1) < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (got += (size_t)n) == sizeof(buf) - 1)
			break;
	}
	buf[got] = '\0';
	p = strstr(buf, "\"pid\":");
	*pid = p ? strtol(p + strlen("\"pid\":"), NULL, 10) : -1;
	p = strstr(buf, "\"generation\":");
	*generation = p ? strtol(p + strlen("\"generation\":"), NULL, 10) : -1;
	return 0;
}

/*
 * restart: SIGHUP to the daemon's pid (from its status), then wait until
 * the new image answers (its generation is one more).
 */
static int restart_daemon(int fd, const char *path)
{
	long pid, gen, pid2, gen2;

	if (status_numbers(fd, &pid, &gen) < 0 || pid <= 1 || gen < 0) {
		fprintf(stderr, "rdmacm-muxctl: %s did not say its pid\n", path);
		return 1;
	}
	if (kill((pid_t)pid, SIGHUP) < 0) {
		fprintf(stderr, "rdmacm-muxctl: cannot signal rdmacm-mux (pid %ld): %s%s\n", pid,
			strerror(errno), errno == EPERM ? " (run as root)" : "");
		return 1;
	}
	for (int i = 0; i < 100; i++) {
		int c;

		usleep(50000);
		c = ctl_connect_as(path, true);
		if (c < 0)
			continue;
		if (status_numbers(c, &pid2, &gen2) == 0 && pid2 == pid && gen2 > gen) {
			close(c);
			printf("rdmacm-mux (pid %ld) is running its binary again, with its clients\n",
			       pid);
			return 0;
		}
		close(c);
	}
	fprintf(stderr, "rdmacm-muxctl: rdmacm-mux (pid %ld) did not come back on %s\n", pid, path);
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "port", required_argument, NULL, 'p' },
		{ "socket-prefix", required_argument, NULL, 's' },
		{ "socket", required_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "gid", required_argument, NULL, 'G' },
		{ "prefix", required_argument, NULL, 'P' },
		{ "owner", required_argument, NULL, 'O' },
		{ "group", required_argument, NULL, 'R' },
		{ "mode", required_argument, NULL, 'M' },
		{ "domain", required_argument, NULL, 'D' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const commands[] = { "status", "clients", "sessions", "counters",
						 "metrics", "trace", "restart", "vms", "vm" };
	const char *device = NULL, *prefix = RDMACM_MUX_SOCKET_PREFIX, *socket_opt = NULL;
	const char *command = NULL, *vm_verb = NULL, *vm_name = NULL;
	char *path = NULL, *line = NULL;
	bool json = false, known = false;
	VmArgs vm = { 0 };
	long port = 1;
	int c, fd, rc;

	while ((c = getopt_long(argc, argv, "d:p:s:jh", opts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'd':
			device = optarg;
			break;
		case 'p':
			port = strtol(optarg, &end, 10);
			if (!*optarg || *end || port < 1 || port > 255) {
				fprintf(stderr, "rdmacm-muxctl: port must be 1..255, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 's':
			prefix = optarg;
			break;
		case 'S':
			socket_opt = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'G':
		case 'P':
		case 'O':
		case 'R':
		case 'M':
		case 'D':
			if (!vm_option(&vm, c, optarg))
				return 2;
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	/* The command, and --json after it (getopt permutes, so both work);
	 * "vm" takes a verb and a name. */
	for (int i = optind; i < argc; i++) {
		if (command && strcmp(command, "vm") == 0 && !vm_verb) {
			vm_verb = argv[i];
			continue;
		}
		if (command && strcmp(command, "vm") == 0 && !vm_name) {
			vm_name = argv[i];
			continue;
		}
		if (command) {
			fprintf(stderr, "rdmacm-muxctl: unexpected argument '%s'\n", argv[i]);
			return 2;
		}
		command = argv[i];
	}
	if (!command) {
		usage(stderr);
		return 2;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		known |= strcmp(command, commands[i]) == 0;
	if (!known) {
		fprintf(stderr, "rdmacm-muxctl: unknown command '%s' (status, clients, sessions, "
				"counters, metrics, trace, restart, vms, vm)\n", command);
		return 2;
	}
	if (strcmp(command, "vm") == 0) {
		if (!vm_verb || !vm_name ||
		    (strcmp(vm_verb, "add") && strcmp(vm_verb, "set") && strcmp(vm_verb, "del"))) {
			fprintf(stderr, "rdmacm-muxctl: usage: vm add|set|del NAME [--gid GID]... "
					"(see --help)\n");
			return 2;
		}
		if (json) {
			fprintf(stderr, "rdmacm-muxctl: vm %s has no --json form\n", vm_verb);
			return 2;
		}
		if (strcmp(vm_verb, "del") == 0 && vm.given && !(vm.domain && vm.n == 1)) {
			fprintf(stderr, "rdmacm-muxctl: vm del takes only the VM's name (and --domain)\n");
			return 2;
		}
		if (strcmp(vm_verb, "del") != 0 && (!vm.given || (vm.domain && vm.n == 1))) {
			fprintf(stderr, "rdmacm-muxctl: vm %s %s: give at least %s\n", vm_verb, vm_name,
				strcmp(vm_verb, "add") == 0 ? "one --gid or --prefix"
							    : "one --gid, --prefix, --owner, --group "
							      "or --mode");
			return 2;
		}
		/* The daemon checks the name; spaces would split it here. */
		if (strpbrk(vm_name, " \t\r\n")) {
			fprintf(stderr, "rdmacm-muxctl: '%s' is not a valid VM name\n", vm_name);
			return 2;
		}
	} else if (vm.given) {
		fprintf(stderr, "rdmacm-muxctl: --gid, --prefix, --owner, --group, --mode and --domain "
				"are for the vm commands\n");
		return 2;
	}
	/* Its format is the answer; the daemon would refuse it too. */
	if (json && strcmp(command, "metrics") == 0) {
		fprintf(stderr, "rdmacm-muxctl: metrics has no --json form (it is the Prometheus "
				"text format)\n");
		return 2;
	}
	if (socket_opt && device) {
		fprintf(stderr, "rdmacm-muxctl: give --socket or -d, not both\n");
		return 2;
	}

	if (socket_opt) {
		if (asprintf(&path, has_suffix(socket_opt, CTL_SUFFIX) ? "%s" : "%s" CTL_SUFFIX,
			     socket_opt) < 0)
			return 1;
	} else if (device) {
		if (asprintf(&path, "%s-%s-%ld" CTL_SUFFIX, prefix, device, port) < 0)
			return 1;
	} else {
		path = find_single_daemon(prefix);
		if (!path)
			return 1;
	}

	/* stdout going away (| head) ends us through EPIPE, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	fd = ctl_connect(path);
	if (fd < 0) {
		free(path);
		return 1;
	}
	if (strcmp(command, "restart") == 0)
		rc = restart_daemon(fd, path);
	else if (strcmp(command, "vm") == 0
			 ? asprintf(&line, "vm %s %s%s\n", vm_verb, vm_name, vm.tokens ? vm.tokens : "") < 0
			 : asprintf(&line, "%s%s\n", command, json ? " json" : "") < 0)
		rc = 1;
	else if ((rc = fd_write_all(fd, line, strlen(line), -1)) < 0 && rc != -EPIPE &&
		 rc != -ECONNRESET) {
		fprintf(stderr, "rdmacm-muxctl: cannot send to %s: %s\n", path, strerror(-rc));
		rc = 1;
	} else {
		/* Refused at once (too many connections, not allowed), the daemon
		 * wrote why before it closed: that is the answer to show, not
		 * the broken pipe our write ran into. */
		rc = copy_answer(fd, path);
	}
	close(fd);
	free(line);
	free(path);
	free(vm.tokens);
	return rc;
}
