/* SPDX-License-Identifier: MIT */
/*
 * umad-probe: a small libibumad client used by the real-kernel VM tests
 * (tests/vm). It owns the guest-side checks that need only the kernel's
 * umad interface, not rdmacm-mux: CM agent registration (and its refusal
 * when the class is already owned), and sending and receiving CM MADs
 * between two soft-RoCE ports by GID, checking the address the kernel
 * reports. The daemon scenarios reuse it as the "far side" peer.
 *
 * Every command prints what it saw and exits 0 when the check passed,
 * 1 when it failed and 2 on a usage error. See usage() for the commands.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/umad.h>

#include "cm-mad.h"
#include "rdmacm-mux-bytes.h"

#define CM_QKEY 0x80010000u
#define MAD_LEN 256
#define MAX_GID_INDEX 256 /* ib_mad_addr_t.gid_index is a u8 */

/* Offsets in the 256-byte MAD's common header that cm-mad.h does not name. */
#define OFF_CLASS 1
#define OFF_METHOD 3

static const char *prog = "umad-probe";

static void usage(void)
{
	fprintf(stderr,
		"usage:\n"
		"  %1$s register DEV PORT\n"
		"      a Send-mask CM agent registers; a second one on the same port\n"
		"      fails with EINVAL; after unregistering the first, it succeeds\n"
		"  %1$s expect-owned DEV PORT\n"
		"      a Send-mask CM agent registration must fail with EINVAL\n"
		"  %1$s hold DEV PORT\n"
		"      register a Send-mask CM agent, print 'holding', wait for stdin EOF\n"
		"  %1$s gid-index DEV GID\n"
		"      print the port-1 GID table index of GID\n"
		"  %1$s xfer SDEV SGID DDEV DGID\n"
		"      REQ from SGID on SDEV to DGID on DDEV, REP back; check addresses\n"
		"  %1$s send-fail SDEV SGID DGID\n"
		"      a send from SGID to DGID must fail\n"
		"  %1$s send SDEV SGID DGID COMM_ID\n"
		"      send one REQ carrying COMM_ID (no agent-side checks)\n"
		"  %1$s recv DEV TIMEOUT_MS [reply]\n"
		"      receive one CM MAD, print it; with 'reply', answer with a REP\n"
		"  %1$s forge DEV IDLE_MS\n"
		"      a host that sends whatever it is told: register a Send-mask CM\n"
		"      agent, print 'listening', then send the MADs of each stdin line\n"
		"      'SGID DGID COUNT OFFSET HEX' (HEX: the 256-byte MAD; COUNT copies,\n"
		"      the 32-bit field at OFFSET and the TID counting up)\n"
		"      and print every MAD received as 'mad SENDER_GID GID_INDEX HEX';\n"
		"      after stdin ends and IDLE_MS pass with nothing received, print\n"
		"      'forged SENT FAILED RECEIVED' and exit\n"
		"All ports are port 1 except where PORT is given.\n",
		prog);
}

static bool parse_gid(const char *s, uint8_t gid[IB_GID_LEN])
{
	if (inet_pton(AF_INET6, s, gid) != 1) {
		fprintf(stderr, "%s: not a GID: %s\n", prog, s);
		return false;
	}
	return true;
}

static const char *gid_str(const uint8_t gid[IB_GID_LEN], char buf[INET6_ADDRSTRLEN])
{
	if (!inet_ntop(AF_INET6, gid, buf, INET6_ADDRSTRLEN))
		snprintf(buf, INET6_ADDRSTRLEN, "?");
	return buf;
}

/* Reads a sysfs GID ("0000:0000:...:0a00:0001") into 16 bytes. */
static bool read_sysfs_gid(const char *path, uint8_t gid[IB_GID_LEN])
{
	unsigned int w[8];
	FILE *f = fopen(path, "re");
	int n;

	if (!f)
		return false;
	n = fscanf(f, "%4x:%4x:%4x:%4x:%4x:%4x:%4x:%4x", &w[0], &w[1], &w[2],
		   &w[3], &w[4], &w[5], &w[6], &w[7]);
	fclose(f);
	if (n != 8)
		return false;
	for (int i = 0; i < 8; i++)
		put_be16(gid + 2 * i, (uint16_t)w[i]);
	return true;
}

/* The index of GID in DEV's port-1 table, or -1 (with a message). */
static int gid_index(const char *dev, const uint8_t gid[IB_GID_LEN])
{
	const char *root = getenv("UMAD_PROBE_SYSFS");
	char path[512], buf[INET6_ADDRSTRLEN];
	uint8_t g[IB_GID_LEN];

	if (!root)
		root = "/sys";
	for (int i = 0; i < MAX_GID_INDEX; i++) {
		snprintf(path, sizeof(path),
			 "%s/class/infiniband/%s/ports/1/gids/%d", root, dev, i);
		if (read_sysfs_gid(path, g) && memcmp(g, gid, IB_GID_LEN) == 0)
			return i;
	}
	fprintf(stderr, "%s: GID %s is not in %s port 1's table\n", prog,
		gid_str(gid, buf), dev);
	return -1;
}

static int open_port(const char *dev, int port)
{
	int fd = umad_open_port(dev, port);

	if (fd < 0)
		fprintf(stderr, "%s: umad_open_port(%s, %d) = %d\n", prog, dev,
			port, fd);
	return fd;
}

/* Registers a CM agent whose method mask is Send; sets errno on failure. */
static int register_send_agent(int fd)
{
	long mask[16 / sizeof(long)] = { 0 };

	mask[0] = 1L << CM_MAD_METHOD_SEND;
	errno = 0;
	return umad_register(fd, CM_MAD_CLASS, CM_MAD_CLASS_VERSION, 0, mask);
}

/* Opens @dev/@port and registers a Send-mask CM agent on it, saying on
 * stderr what failed. Returns the fd (the agent id in *agent), or -1. */
static int open_agent(const char *dev, int port, int *agent)
{
	int fd = open_port(dev, port);

	if (fd < 0)
		return -1;
	*agent = register_send_agent(fd);
	if (*agent < 0) {
		fprintf(stderr, "%s: registration failed: %s\n", prog, strerror(errno));
		umad_close_port(fd);
		return -1;
	}
	return fd;
}

static int cmd_register(const char *dev, int port)
{
	int fd1, fd2, a1, a2, err;

	fd1 = open_port(dev, port);
	fd2 = open_port(dev, port);
	if (fd1 < 0 || fd2 < 0)
		return 1;
	a1 = register_send_agent(fd1);
	if (a1 < 0) {
		fprintf(stderr, "%s: first Send-mask registration failed: %s\n",
			prog, strerror(errno));
		return 1;
	}
	printf("register %s/%d: first agent id %d\n", dev, port, a1);
	a2 = register_send_agent(fd2);
	err = errno;
	if (a2 >= 0) {
		fprintf(stderr,
			"%s: second Send-mask registration succeeded (agent %d)\n",
			prog, a2);
		return 1;
	}
	if (err != EINVAL) {
		fprintf(stderr,
			"%s: second registration failed with %s, want EINVAL\n",
			prog, strerror(err));
		return 1;
	}
	printf("register %s/%d: second agent refused: EINVAL\n", dev, port);
	if (umad_unregister(fd1, a1) != 0) {
		fprintf(stderr, "%s: umad_unregister failed: %s\n", prog,
			strerror(errno));
		return 1;
	}
	a2 = register_send_agent(fd2);
	if (a2 < 0) {
		fprintf(stderr,
			"%s: registration after unregister failed: %s\n", prog,
			strerror(errno));
		return 1;
	}
	printf("register %s/%d: after unregister, agent id %d\n", dev, port,
	       a2);
	umad_close_port(fd2);
	umad_close_port(fd1);
	return 0;
}

static int cmd_expect_owned(const char *dev, int port)
{
	int fd = open_port(dev, port), a, err;

	if (fd < 0)
		return 1;
	a = register_send_agent(fd);
	err = errno;
	if (a >= 0) {
		fprintf(stderr,
			"%s: Send-mask registration on %s/%d succeeded (agent %d), but the class should be owned\n",
			prog, dev, port, a);
		return 1;
	}
	if (err != EINVAL) {
		fprintf(stderr, "%s: registration failed with %s, want EINVAL\n",
			prog, strerror(err));
		return 1;
	}
	printf("expect-owned %s/%d: refused with EINVAL\n", dev, port);
	umad_close_port(fd);
	return 0;
}

static int cmd_hold(const char *dev, int port)
{
	int a, fd = open_agent(dev, port, &a);
	char c;

	if (fd < 0)
		return 1;
	printf("holding %s/%d agent %d\n", dev, port, a);
	fflush(stdout);
	while (read(STDIN_FILENO, &c, 1) > 0)
		;
	umad_close_port(fd);
	return 0;
}

/* Fills a CM MAD and its send address (QP1, CM qkey, GRH from sgid_index). */
static void build_mad(void *umad, int sgid_index, const uint8_t dgid[IB_GID_LEN],
		      uint16_t attr, uint64_t tid, uint32_t comm_id)
{
	ib_user_mad_t *u = umad;
	uint8_t *mad = umad_get_mad(umad);

	memset(umad, 0, umad_size() + MAD_LEN);
	umad_set_addr(umad, 0xffff, 1, 0, (int)CM_QKEY);
	u->addr.grh_present = 1;
	u->addr.gid_index = (uint8_t)sgid_index;
	u->addr.hop_limit = 64;
	memcpy(u->addr.gid, dgid, IB_GID_LEN);
	mad_build(mad, attr, comm_id, 0, tid);
}

static void print_received(const char *what, int agent, const void *umad)
{
	const ib_user_mad_t *u = umad;
	const uint8_t *mad = umad_get_mad((void *)umad);
	char buf[INET6_ADDRSTRLEN];

	printf("%s: agent=%d status=%u qpn=%u grh=%u gid_index=%u gid=%s "
	       "class=0x%02x method=0x%02x attr=0x%04x tid=0x%016" PRIx64
	       " comm_id=0x%08x\n",
	       what, agent, u->status, ntohl(u->addr.qpn), u->addr.grh_present,
	       u->addr.gid_index, gid_str(u->addr.gid, buf), mad[OFF_CLASS],
	       mad[OFF_METHOD], mad_attr(mad),
	       mad_tid(mad), mad_local(mad));
}

/* Receives one MAD; returns the agent id, or -1 after a message. */
static int recv_one(int fd, void *umad, int timeout_ms, const char *what)
{
	int len = MAD_LEN, agent;

	agent = umad_recv(fd, umad, &len, timeout_ms);
	if (agent < 0) {
		fprintf(stderr, "%s: %s: nothing received within %d ms (%d)\n",
			prog, what, timeout_ms, agent);
		return -1;
	}
	print_received(what, agent, umad);
	return agent;
}

/* Checks a received MAD against what was sent; returns the error count. */
static int check_received(const void *umad, int want_agent, int agent,
			  int want_gid_index, const uint8_t want_gid[IB_GID_LEN],
			  uint16_t attr, uint64_t tid, uint32_t comm_id)
{
	const ib_user_mad_t *u = umad;
	const uint8_t *mad = umad_get_mad((void *)umad);
	char b1[INET6_ADDRSTRLEN], b2[INET6_ADDRSTRLEN];
	int bad = 0;

#define CHECK(cond, ...)                                          \
	do {                                                      \
		if (!(cond)) {                                    \
			fprintf(stderr, "%s: FAIL: ", prog);      \
			fprintf(stderr, __VA_ARGS__);             \
			fputc('\n', stderr);                      \
			bad++;                                    \
		}                                                 \
	} while (0)
	CHECK(agent == want_agent, "agent %d, want %d", agent, want_agent);
	CHECK(u->status == 0, "status %u, want 0", u->status);
	CHECK(u->addr.grh_present == 1, "no GRH");
	CHECK(ntohl(u->addr.qpn) == 1, "qpn %u, want 1", ntohl(u->addr.qpn));
	CHECK(u->addr.gid_index == want_gid_index, "gid_index %u, want %d",
	      u->addr.gid_index, want_gid_index);
	CHECK(memcmp(u->addr.gid, want_gid, IB_GID_LEN) == 0, "gid %s, want %s",
	      gid_str(u->addr.gid, b1), gid_str(want_gid, b2));
	CHECK(mad[OFF_CLASS] == CM_MAD_CLASS && mad[OFF_METHOD] == CM_MAD_METHOD_SEND,
	      "class 0x%02x method 0x%02x", mad[OFF_CLASS], mad[OFF_METHOD]);
	CHECK(mad_attr(mad) == attr, "attr 0x%04x, want 0x%04x",
	      mad_attr(mad), attr);
	/* The kernel rewrites the upper 32 TID bits with the agent's hi_tid. */
	CHECK((uint32_t)mad_tid(mad) == (uint32_t)tid,
	      "tid low bits 0x%08x, want 0x%08x",
	      (uint32_t)mad_tid(mad), (uint32_t)tid);
	CHECK(mad_local(mad) == comm_id,
	      "comm_id 0x%08x, want 0x%08x", mad_local(mad),
	      comm_id);
#undef CHECK
	return bad;
}

static int send_mad(int fd, int agent, void *umad)
{
	int ret = umad_send(fd, agent, umad, MAD_LEN, 0, 0);

	if (ret < 0)
		return -(errno ? errno : EIO);
	return 0;
}

/*
 * One leg of a handshake: send @sbuf through agent @sagent on @sfd and take
 * it off @dfd into @dbuf within 5 s, checked as agent @dagent must receive
 * it from @from_gid at gid_index @didx (check_received()). Return: the
 * number of wrong fields, or -1 (said on stderr) when it was not sent or
 * did not come.
 */
static int exchange(const char *name, int sfd, int sagent, void *sbuf, int dfd,
		    int dagent, void *dbuf, int didx,
		    const uint8_t from_gid[IB_GID_LEN], uint16_t attr, uint64_t tid,
		    uint32_t comm_id)
{
	char what[32];
	int ret = send_mad(sfd, sagent, sbuf), got;

	if (ret < 0) {
		fprintf(stderr, "%s: %s send failed: %s\n", prog, name,
			strerror(-ret));
		return -1;
	}
	snprintf(what, sizeof(what), "%s received", name);
	got = recv_one(dfd, dbuf, 5000, what);
	if (got < 0)
		return -1;
	return check_received(dbuf, dagent, got, didx, from_gid, attr, tid,
			      comm_id);
}

static int cmd_xfer(const char *sdev, const char *sgid_s, const char *ddev,
		    const char *dgid_s)
{
	uint8_t sgid[IB_GID_LEN], dgid[IB_GID_LEN];
	int sidx, didx, sfd, dfd, sagent, dagent, ret, bad;
	void *sbuf, *dbuf;
	uint32_t comm_id = 0x11220000u ^ (uint32_t)getpid();
	uint64_t tid = 0xfeed000000000000ull | ((uint64_t)(uint32_t)getpid() << 8);

	if (!parse_gid(sgid_s, sgid) || !parse_gid(dgid_s, dgid))
		return 2;
	sidx = gid_index(sdev, sgid);
	didx = gid_index(ddev, dgid);
	if (sidx < 0 || didx < 0)
		return 1;
	printf("xfer: %s %s is gid_index %d; %s %s is gid_index %d\n", sdev,
	       sgid_s, sidx, ddev, dgid_s, didx);

	sfd = open_port(sdev, 1);
	dfd = open_port(ddev, 1);
	if (sfd < 0 || dfd < 0)
		return 1;
	sagent = register_send_agent(sfd);
	dagent = register_send_agent(dfd);
	if (sagent < 0 || dagent < 0) {
		fprintf(stderr, "%s: registration failed: %s\n", prog,
			strerror(errno));
		return 1;
	}
	sbuf = umad_alloc(1, umad_size() + MAD_LEN);
	dbuf = umad_alloc(1, umad_size() + MAD_LEN);
	if (!sbuf || !dbuf)
		return 1;

	build_mad(sbuf, sidx, dgid, CM_REQ, tid, comm_id);
	bad = exchange("REQ", sfd, sagent, sbuf, dfd, dagent, dbuf, didx, sgid,
		       CM_REQ, tid, comm_id);
	if (bad < 0)
		return 1;

	/* Reply through the received address, as a CM peer would. */
	{
		ib_user_mad_t *u = dbuf;
		uint8_t *mad = umad_get_mad(dbuf);

		u->addr.qpn = htonl(1);
		u->addr.qkey = htonl(CM_QKEY);
		mad_set_attr(mad, CM_REP);
		mad_set_local(mad, ~comm_id);
	}
	ret = exchange("REP", dfd, dagent, dbuf, sfd, sagent, sbuf, sidx, dgid,
		       CM_REP, tid, ~comm_id);
	if (ret < 0)
		return 1;
	bad += ret;
	umad_free(sbuf);
	umad_free(dbuf);
	umad_close_port(sfd);
	umad_close_port(dfd);
	if (bad)
		return 1;
	printf("xfer %s -> %s: OK\n", sgid_s, dgid_s);
	return 0;
}

/* Sends one REQ from SGID on SDEV through a NULL-mask agent. */
static int send_one(const char *sdev, const char *sgid_s, const char *dgid_s,
		    uint32_t comm_id, int *err)
{
	uint8_t sgid[IB_GID_LEN], dgid[IB_GID_LEN];
	int sidx, fd, agent, ret;
	void *buf;

	if (!parse_gid(sgid_s, sgid) || !parse_gid(dgid_s, dgid))
		return 2;
	sidx = gid_index(sdev, sgid);
	if (sidx < 0)
		return 1;
	fd = open_port(sdev, 1);
	if (fd < 0)
		return 1;
	/* A NULL mask: this agent only sends, so it never competes with
	 * the port's Send-mask owner. */
	agent = umad_register(fd, CM_MAD_CLASS, CM_MAD_CLASS_VERSION, 0, NULL);
	if (agent < 0) {
		fprintf(stderr, "%s: registration failed: %s\n", prog,
			strerror(errno));
		return 1;
	}
	buf = umad_alloc(1, umad_size() + MAD_LEN);
	if (!buf)
		return 1;
	build_mad(buf, sidx, dgid, CM_REQ, 0x5e5d00000000ull | comm_id,
		  comm_id);
	errno = 0;
	ret = send_mad(fd, agent, buf);
	*err = -ret;
	umad_free(buf);
	umad_close_port(fd);
	return ret < 0 ? 1 : 0;
}

static int cmd_send_fail(const char *sdev, const char *sgid_s,
			 const char *dgid_s)
{
	int err = 0, ret = send_one(sdev, sgid_s, dgid_s, 0xbad0bad0u, &err);

	if (ret == 2)
		return 2;
	if (ret == 0) {
		fprintf(stderr, "%s: send to %s succeeded, want a failure\n",
			prog, dgid_s);
		return 1;
	}
	if (err == 0) {
		fprintf(stderr, "%s: setup failed before the send\n", prog);
		return 1;
	}
	printf("send-fail %s -> %s: failed as expected: %s\n", sgid_s, dgid_s,
	       strerror(err));
	return 0;
}

static int cmd_send(const char *sdev, const char *sgid_s, const char *dgid_s,
		    const char *comm_s)
{
	int err = 0, ret;
	char *end;
	unsigned long comm_id = strtoul(comm_s, &end, 0);

	if (*comm_s == '\0' || *end != '\0' || comm_id > UINT32_MAX) {
		fprintf(stderr, "%s: bad COMM_ID %s\n", prog, comm_s);
		return 2;
	}
	ret = send_one(sdev, sgid_s, dgid_s, (uint32_t)comm_id, &err);
	if (ret == 1 && err)
		fprintf(stderr, "%s: send failed: %s\n", prog, strerror(err));
	if (ret == 0)
		printf("sent REQ comm_id=0x%08lx %s -> %s\n", comm_id, sgid_s,
		       dgid_s);
	return ret;
}

static int cmd_recv(const char *dev, const char *timeout_s, bool reply)
{
	int agent, fd = open_agent(dev, 1, &agent), got, ret, timeout_ms;
	void *buf;

	timeout_ms = atoi(timeout_s);
	if (fd < 0)
		return 1;
	printf("listening %s/1 agent %d\n", dev, agent);
	fflush(stdout);
	buf = umad_alloc(1, umad_size() + MAD_LEN);
	if (!buf)
		return 1;
	got = recv_one(fd, buf, timeout_ms, "received");
	if (got < 0)
		return 1;
	if (reply) {
		ib_user_mad_t *u = buf;
		uint8_t *mad = umad_get_mad(buf);

		u->addr.qpn = htonl(1);
		u->addr.qkey = htonl(CM_QKEY);
		mad_set_attr(mad, CM_REP);
		ret = send_mad(fd, agent, buf);
		if (ret < 0) {
			fprintf(stderr, "%s: reply failed: %s\n", prog,
				strerror(-ret));
			return 1;
		}
		printf("replied REP\n");
	}
	umad_free(buf);
	umad_close_port(fd);
	return 0;
}

/* Parse 512 hex digits into a 256-byte MAD. */
static bool parse_mad_hex(const char *hex, uint8_t mad[MAD_LEN])
{
	if (strlen(hex) != 2 * MAD_LEN)
		return false;
	for (int i = 0; i < MAD_LEN; i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return false;
		mad[i] = (uint8_t)v;
	}
	return true;
}

/* One 'SGID DGID COUNT OFFSET HEX' line: send COUNT MADs. Counts into
 * @sent and @failed; returns false for a line it cannot parse. */
static bool forge_line(const char *dev, int fd, int agent, void *buf, char *line,
		       unsigned long *sent, unsigned long *failed)
{
	char *sgid_s = strtok(line, " \n"), *dgid_s = strtok(NULL, " \n");
	char *count_s = strtok(NULL, " \n"), *offset_s = strtok(NULL, " \n");
	char *hex = strtok(NULL, " \n");
	uint8_t sgid[16], dgid[16], mad[MAD_LEN];
	unsigned long count, offset;
	int sidx;

	if (!sgid_s || !dgid_s || !count_s || !offset_s || !hex || !parse_gid(sgid_s, sgid) ||
	    !parse_gid(dgid_s, dgid) || !parse_mad_hex(hex, mad))
		return false;
	count = strtoul(count_s, NULL, 10);
	offset = strtoul(offset_s, NULL, 10);
	if (offset > MAD_LEN - 4)
		return false;
	sidx = gid_index(dev, sgid);
	if (sidx < 0)
		return false;
	for (unsigned long i = 0; i < count; i++) {
		ib_user_mad_t *u = buf;

		memset(buf, 0, umad_size() + MAD_LEN);
		umad_set_addr(buf, 0xffff, 1, 0, (int)CM_QKEY);
		u->addr.grh_present = 1;
		u->addr.gid_index = (uint8_t)sidx;
		u->addr.hop_limit = 64;
		memcpy(u->addr.gid, dgid, 16);
		memcpy(umad_get_mad(buf), mad, MAD_LEN);
		put_be32((uint8_t *)umad_get_mad(buf) + offset, get_be32(mad + offset) + (uint32_t)i);
		put_be64((uint8_t *)umad_get_mad(buf) + MAD_OFF_TID, get_be64(mad + MAD_OFF_TID) + i);
		if (send_mad(fd, agent, buf) < 0)
			(*failed)++;
		else
			(*sent)++;
	}
	return true;
}

static int cmd_forge(const char *dev, const char *idle_s)
{
	int agent, fd = open_agent(dev, 1, &agent), idle_ms = atoi(idle_s);
	unsigned long sent = 0, failed = 0, received = 0;
	bool input = true;
	char line[1024];
	void *buf, *rbuf;

	if (fd < 0)
		return 1;
	buf = umad_alloc(1, umad_size() + MAD_LEN);
	rbuf = umad_alloc(1, umad_size() + MAD_LEN);
	if (!buf || !rbuf)
		return 1;
	printf("listening %s/1 agent %d\n", dev, agent);
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
				       { .fd = STDIN_FILENO, .events = POLLIN } };
		int n = poll(p, input ? 2 : 1, input ? -1 : idle_ms);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (p[0].revents & POLLIN) {
			int len = MAD_LEN;
			const ib_user_mad_t *u = rbuf;
			char gbuf[INET6_ADDRSTRLEN];

			if (umad_recv(fd, rbuf, &len, 0) >= 0 && len == MAD_LEN) {
				const uint8_t *mad = umad_get_mad(rbuf);

				printf("mad %s %u ", gid_str(u->addr.gid, gbuf), u->addr.gid_index);
				for (int i = 0; i < MAD_LEN; i++)
					printf("%02x", mad[i]);
				printf("\n");
				received++;
			}
		}
		if (input && (p[1].revents & (POLLIN | POLLHUP))) {
			if (!fgets(line, sizeof(line), stdin)) {
				input = false;
				continue;
			}
			if (!forge_line(dev, fd, agent, buf, line, &sent, &failed)) {
				fprintf(stderr, "%s: bad forge line\n", prog);
				return 2;
			}
		}
	}
	printf("forged %lu %lu %lu\n", sent, failed, received);
	umad_free(buf);
	umad_free(rbuf);
	umad_close_port(fd);
	return 0;
}

static int parse_port(const char *s)
{
	int port = atoi(s);

	if (port < 1 || port > 255) {
		fprintf(stderr, "%s: bad port %s\n", prog, s);
		return -1;
	}
	return port;
}

int main(int argc, char **argv)
{
	const char *cmd;
	int port;

	if (argc < 2) {
		usage();
		return 2;
	}
	cmd = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (umad_init() < 0) {
		fprintf(stderr, "%s: umad_init failed\n", prog);
		return 1;
	}
	if (!strcmp(cmd, "register") && argc == 4) {
		port = parse_port(argv[3]);
		return port < 0 ? 2 : cmd_register(argv[2], port);
	}
	if (!strcmp(cmd, "expect-owned") && argc == 4) {
		port = parse_port(argv[3]);
		return port < 0 ? 2 : cmd_expect_owned(argv[2], port);
	}
	if (!strcmp(cmd, "hold") && argc == 4) {
		port = parse_port(argv[3]);
		return port < 0 ? 2 : cmd_hold(argv[2], port);
	}
	if (!strcmp(cmd, "gid-index") && argc == 4) {
		uint8_t gid[IB_GID_LEN];
		int idx;

		if (!parse_gid(argv[3], gid))
			return 2;
		idx = gid_index(argv[2], gid);
		if (idx < 0)
			return 1;
		printf("%d\n", idx);
		return 0;
	}
	if (!strcmp(cmd, "xfer") && argc == 6)
		return cmd_xfer(argv[2], argv[3], argv[4], argv[5]);
	if (!strcmp(cmd, "send-fail") && argc == 5)
		return cmd_send_fail(argv[2], argv[3], argv[4]);
	if (!strcmp(cmd, "send") && argc == 6)
		return cmd_send(argv[2], argv[3], argv[4], argv[5]);
	if (!strcmp(cmd, "forge") && argc == 4)
		return cmd_forge(argv[2], argv[3]);
	if (!strcmp(cmd, "recv") && (argc == 4 || argc == 5)) {
		bool reply = argc == 5 && !strcmp(argv[4], "reply");

		if (argc == 5 && !reply) {
			usage();
			return 2;
		}
		return cmd_recv(argv[2], argv[3], reply);
	}
	usage();
	return 2;
}
