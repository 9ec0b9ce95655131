/* SPDX-License-Identifier: MIT */
/*
 * Owns sim-bench: the throughput of the simulated fabric between two
 * processes (simA -> simB, CM REQs as fast as umad_send goes) and the
 * round-trip latency of a REQ/REP ping-pong. Run it under
 * LD_PRELOAD=libumad-sim.so; it makes its own fabric in $TMPDIR.
 *
 *   sim-bench [COUNT]
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <infiniband/umad.h>

#include "cm-mad.h"
#include "fabric.h"

#define MAD_LEN 256

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void build(void *umad, uint32_t seq, int sgid_index, const uint8_t dgid[IB_GID_LEN])
{
	uint8_t *mad = (uint8_t *)umad + 64;
	ib_mad_addr_t *a = umad_get_mad_addr(umad);

	mad_set_cm_header(mad);
	mad_set_attr(mad, CM_REQ);
	mad_set_local(mad, seq);
	umad_set_addr(umad, 0xffff, 1, 0, 0x80010000);
	a->grh_present = 1;
	a->gid_index = (uint8_t)sgid_index;
	a->hop_limit = 64;
	memcpy(a->gid, dgid, IB_GID_LEN);
}

static int open_cm(const char *ca, int *agent)
{
	long mask[2] = { 1L << 3, 0 };
	int fd = umad_open_port(ca, 1);

	if (fd < 0 || (*agent = umad_register(fd, 0x07, 2, 0, mask)) < 0) {
		fprintf(stderr, "sim-bench: cannot open %s (LD_PRELOAD=libumad-sim.so?)\n", ca);
		exit(1);
	}
	return fd;
}

/* simB: counts MADs (or answers them, for the ping-pong) and reports through @out. */
static int receiver(int ready, int out, long count, bool echo)
{
	int agent, fd = open_cm("simB", &agent);
	void *buf = calloc(1, 64 + MAD_LEN);
	double first = 0, last = 0;
	long got = 0;

	if (write(ready, "R", 1) != 1)
		return 1;
	while (got < count) {
		int len = MAD_LEN, rc = umad_recv(fd, buf, &len, 2000);

		if (rc < 0)
			break;
		if (!got)
			first = now_s();
		got++;
		if (echo) {
			((uint8_t *)buf)[64 + 17] = 0x13;
			umad_set_addr(buf, 0, 1, 0, 0x80010000);
			umad_send(fd, agent, buf, MAD_LEN, 0, 0);
		}
	}
	last = now_s();
	dprintf(out, "%ld %.9f\n", got, last - first);
	umad_close_port(fd);
	free(buf);
	return 0;
}

static pid_t spawn_receiver(long count, bool echo, int *result_fd)
{
	int ready[2], res[2];
	pid_t pid;
	char c;

	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(res, O_CLOEXEC) < 0)
		exit(1);
	pid = fork();
	if (pid == 0)
		_exit(receiver(ready[1], res[1], count, echo));
	close(ready[1]);
	close(res[1]);
	if (read(ready[0], &c, 1) != 1)
		exit(1);
	close(ready[0]);
	*result_fd = res[0];
	return pid;
}

int main(int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 1000000;
	long rtts = count / 20;
	g_autoptr(GError) err = NULL;
	g_autofree char *dir = g_dir_make_tmp("sim-bench-XXXXXX", &err);
	g_autoptr(sim_fabric) f = sim_fabric_new();
	uint8_t dgid[IB_GID_LEN];
	char line[128];
	double secs = 0, t0;
	long got = 0;
	int agent, fd, res, status;
	void *buf;
	pid_t pid;
	FILE *in;

	if (!dir || sim_fabric_add_preset(f, "two-hosts") < 0 || sim_fabric_commit(dir, f, &err) < 0) {
		fprintf(stderr, "sim-bench: fabric: %s\n", err ? err->message : "?");
		return 1;
	}
	/* Before the first umad call: the preload reads it once. */
	g_setenv("UMAD_SIM_FABRIC", dir, TRUE);
	g_unsetenv("UMAD_SIM_FAULTS");
	sim_gid_parse("::ffff:10.0.0.2", dgid);

	/* 1. One-way throughput. */
	pid = spawn_receiver(count, false, &res);
	fd = open_cm("simA", &agent);
	buf = calloc(1, 64 + MAD_LEN);
	t0 = now_s();
	for (long i = 0; i < count; i++) {
		build(buf, (uint32_t)i, 1, dgid);
		if (umad_send(fd, agent, buf, MAD_LEN, 0, 0) < 0) {
			fprintf(stderr, "sim-bench: umad_send: %s\n", strerror(errno));
			return 1;
		}
	}
	in = fdopen(res, "r");
	if (!fgets(line, sizeof(line), in) || sscanf(line, "%ld %lf", &got, &secs) != 2)
		return 1;
	fclose(in);
	waitpid(pid, &status, 0);
	printf("sim-bench: one-way %ld/%ld MADs simA -> simB in %.3f s: %.0f MADs/s "
	       "(sender %.0f MADs/s)\n",
	       got, count, secs, got / secs, count / (now_s() - t0));

	/* 2. Ping-pong: REQ out, REP back, one at a time. */
	pid = spawn_receiver(rtts, true, &res);
	t0 = now_s();
	for (long i = 0; i < rtts; i++) {
		int len = MAD_LEN;

		build(buf, (uint32_t)i, 1, dgid);
		if (umad_send(fd, agent, buf, MAD_LEN, 0, 0) < 0 ||
		    umad_recv(fd, buf, &len, 2000) < 0) {
			fprintf(stderr, "sim-bench: ping-pong stalled at %ld\n", i);
			return 1;
		}
	}
	secs = now_s() - t0;
	waitpid(pid, &status, 0);
	close(res);
	printf("sim-bench: ping-pong %ld round trips in %.3f s: %.1f us per round trip\n", rtts,
	       secs, secs * 1e6 / rtts);
	umad_close_port(fd);
	free(buf);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return got == count ? 0 : 1;
}
