/* SPDX-License-Identifier: MIT */
/*
 * Owns the talk with the service manager's fd store (FDSTORE=1,
 * FDSTOREREMOVE=1, FDNAME=) and the names of what the daemon keeps there
 * (but "vm.NAME", which daemon/vm/vm-host.c names).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "handoff-fd-store.h"
#include "log.h"

static bool fd_store_on;

bool fd_store_setup(bool wanted)
{
	const char *sock = getenv("NOTIFY_SOCKET");

	fd_store_on = wanted && sock && *sock;
	return fd_store_on;
}

bool fd_store_enabled(void)
{
	return fd_store_on;
}

int fd_store_put(const char *name, int fd)
{
	char msg[96];
	int r;

	if (!fd_store_on)
		return 0;
	snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s", name);
	r = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
	if (r > 0)
		return 0;
	r = r < 0 ? r : -ENOTCONN;
	log_ratelimited(LOG_WARNING, NULL,
			"cannot keep %s in the service manager's fd store (%s): a restart "
			"now would lose it",
			name, strerror(-r));
	return r;
}

int fd_store_remove(const char *name)
{
	char msg[96];
	int r;

	if (!fd_store_on)
		return 0;
	snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
	r = sd_pid_notify(0, 0, msg);
	if (r > 0)
		return 0;
	return r < 0 ? r : -ENOTCONN;
}

const char *fd_store_client_name(uint32_t id, char buf[32])
{
	snprintf(buf, 32, FD_STORE_CLIENT_PREFIX "%u", id);
	return buf;
}

bool fd_store_parse_client_name(const char *name, uint32_t *ret_id)
{
	size_t n = strlen(FD_STORE_CLIENT_PREFIX);
	unsigned long v;
	char *end;

	if (strncmp(name, FD_STORE_CLIENT_PREFIX, n) != 0 || !name[n] || name[n] == '-' ||
	    name[n] == '+')
		return false;
	errno = 0;
	v = strtoul(name + n, &end, 10);
	if (errno || *end || v == 0 || v > UINT32_MAX)
		return false;
	*ret_id = (uint32_t)v;
	return true;
}

const char *fd_store_umad_name(const char *dev, int port, int agent_id,
			       char buf[FD_STORE_NAME_MAX])
{
	int n = snprintf(buf, FD_STORE_NAME_MAX, FD_STORE_UMAD_PREFIX "%d.%d.%s", port, agent_id,
			 dev);

	return n > 0 && n < FD_STORE_NAME_MAX ? buf : NULL;
}

/* A decimal number of 1 to 3 digits at *@p, followed by '.'. */
static bool fd_store_parse_small(const char **p, int *ret)
{
	int v = 0, digits = 0;

	while (**p >= '0' && **p <= '9' && digits < 3) {
		v = v * 10 + (**p - '0');
		(*p)++;
		digits++;
	}
	if (digits == 0 || **p != '.')
		return false;
	(*p)++;
	*ret = v;
	return true;
}

bool fd_store_parse_umad_name(const char *name, int *ret_port, int *ret_agent,
			      const char **ret_dev)
{
	const char *p = name + strlen(FD_STORE_UMAD_PREFIX);
	int port, agent;

	if (strncmp(name, FD_STORE_UMAD_PREFIX, strlen(FD_STORE_UMAD_PREFIX)) != 0 ||
	    !fd_store_parse_small(&p, &port) || !fd_store_parse_small(&p, &agent) || !*p)
		return false;
	*ret_port = port;
	*ret_agent = agent;
	*ret_dev = p;
	return true;
}
