/* SPDX-License-Identifier: MIT */
/*
 * Owns umad-pingpong-plain: a CM REQ/REP ping-pong written only against
 * <infiniband/umad.h> and libc, linked with -libumad and nothing else. It
 * knows nothing of the simulator, so running two copies of it under
 * LD_PRELOAD=libumad-sim.so shows that an unmodified umad program works there.
 *
 *   umad-pingpong-plain server CA PORT COUNT
 *   umad-pingpong-plain client CA PORT SGID_INDEX DGID COUNT
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/umad.h>

#define CM_CLASS 0x07
#define CM_VERSION 2
#define METHOD_SEND 0x03
#define ATTR_REQ 0x0010
#define ATTR_REP 0x0013
#define MAD_LEN 256

static long mask_send[16 / sizeof(long)] = { 1L << METHOD_SEND };

static void build_cm(uint8_t *mad, uint16_t attr, uint32_t tid_low, uint32_t seq)
{
	uint64_t tid = htobe64(tid_low);
	uint16_t a = htobe16(attr);
	uint32_t s = htobe32(seq);

	memset(mad, 0, MAD_LEN);
	mad[0] = 1; /* base version */
	mad[1] = CM_CLASS;
	mad[2] = CM_VERSION;
	mad[3] = METHOD_SEND;
	memcpy(mad + 8, &tid, 8);
	memcpy(mad + 16, &a, 2);
	memcpy(mad + 24, &s, 4); /* LocalCommID carries the sequence number */
}

static uint16_t attr_of(const uint8_t *mad)
{
	uint16_t a;

	memcpy(&a, mad + 16, 2);
	return be16toh(a);
}

static uint32_t seq_of(const uint8_t *mad)
{
	uint32_t s;

	memcpy(&s, mad + 24, 4);
	return be32toh(s);
}

static int open_cm(const char *ca, int port, int *agent)
{
	int fd = umad_open_port(ca, port);

	if (fd < 0) {
		fprintf(stderr, "umad_open_port(%s, %d): %d\n", ca, port, fd);
		return -1;
	}
	*agent = umad_register(fd, CM_CLASS, CM_VERSION, 0, mask_send);
	if (*agent < 0) {
		fprintf(stderr, "umad_register: %d (%s)\n", *agent, strerror(errno));
		return -1;
	}
	return fd;
}

static int server(const char *ca, int port, unsigned count)
{
	/* Open first: umad_size() is 56 until an open switches to the 64-byte header. */
	int agent, fd = open_cm(ca, port, &agent);
	void *buf = umad_alloc(1, umad_size() + MAD_LEN);
	void *out = umad_alloc(1, umad_size() + MAD_LEN);

	if (fd < 0 || !buf || !out)
		return 1;
	printf("server: %s:%d agent %d\n", ca, port, agent);
	fflush(stdout);
	for (;;) {
		int len = MAD_LEN, rc = umad_recv(fd, buf, &len, 10000);
		uint8_t *mad = umad_get_mad(buf);
		ib_mad_addr_t *from = umad_get_mad_addr(buf);
		uint64_t tid;

		if (rc < 0) {
			fprintf(stderr, "server: umad_recv: %d (%s)\n", rc, strerror(errno));
			return 1;
		}
		if (umad_status(buf) != 0 || len != MAD_LEN || attr_of(mad) != ATTR_REQ)
			continue;
		memcpy(&tid, mad + 8, 8);
		build_cm(umad_get_mad(out), ATTR_REP, (uint32_t)be64toh(tid), seq_of(mad));
		/* Answer to where the REQ came from, from the GID it was sent to. */
		memcpy(umad_get_mad_addr(out), from, sizeof(*from));
		umad_set_addr(out, be16toh(from->lid), 1, 0, 0x80010000);
		if (umad_send(fd, agent, out, MAD_LEN, 0, 0) < 0) {
			fprintf(stderr, "server: umad_send: %s\n", strerror(errno));
			return 1;
		}
		if (seq_of(mad) + 1 >= count)
			break;
	}
	umad_close_port(fd);
	umad_free(buf);
	umad_free(out);
	printf("server: done\n");
	return 0;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int client(const char *ca, int port, int sgid_index, const char *dgid, unsigned count)
{
	int agent, fd = open_cm(ca, port, &agent);
	void *req = umad_alloc(1, umad_size() + MAD_LEN);
	void *buf = umad_alloc(1, umad_size() + MAD_LEN);
	ib_mad_addr_t *a;
	uint8_t peer[16];
	double total = 0;

	if (fd < 0 || !req || !buf)
		return 1;
	if (inet_pton(AF_INET6, dgid, peer) != 1) {
		fprintf(stderr, "client: bad GID %s\n", dgid);
		return 1;
	}
	for (unsigned seq = 0; seq < count; seq++) {
		double t0 = now_us();
		int tries = 0;

		for (;;) {
			int len = MAD_LEN, rc;

			if (tries++ == 50) {
				fprintf(stderr, "client: no REP for %u\n", seq);
				return 1;
			}
			build_cm(umad_get_mad(req), ATTR_REQ, 0x1000 + seq, seq);
			umad_set_addr(req, 0xffff, 1, 0, 0x80010000);
			a = umad_get_mad_addr(req);
			a->grh_present = 1;
			a->gid_index = (uint8_t)sgid_index;
			a->hop_limit = 64;
			memcpy(a->gid, peer, 16);
			if (umad_send(fd, agent, req, MAD_LEN, 0, 0) < 0) {
				fprintf(stderr, "client: umad_send: %s\n", strerror(errno));
				return 1;
			}
			/* The server may not be registered yet: then the REQ is lost, so retry. */
			rc = umad_recv(fd, buf, &len, 200);
			if (rc == -ETIMEDOUT)
				continue;
			if (rc < 0) {
				fprintf(stderr, "client: umad_recv: %d\n", rc);
				return 1;
			}
			a = umad_get_mad_addr(buf);
			if (attr_of(umad_get_mad(buf)) != ATTR_REP ||
			    seq_of(umad_get_mad(buf)) != seq)
				continue;
			if (rc != agent || len != MAD_LEN || umad_status(buf) != 0 ||
			    be32toh(a->qpn) != 1 || !a->grh_present ||
			    a->gid_index != sgid_index || memcmp(a->gid, peer, 16) != 0) {
				fprintf(stderr, "client: REP %u has a wrong address\n", seq);
				return 1;
			}
			break;
		}
		total += now_us() - t0;
	}
	printf("client: %u round trips, %.1f us average\n", count, total / count);
	umad_close_port(fd);
	umad_free(req);
	umad_free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (umad_init() < 0)
		return 1;
	if (argc == 5 && strcmp(argv[1], "server") == 0)
		return server(argv[2], atoi(argv[3]), (unsigned)atoi(argv[4]));
	if (argc == 7 && strcmp(argv[1], "client") == 0)
		return client(argv[2], atoi(argv[3]), atoi(argv[4]), argv[5],
			      (unsigned)atoi(argv[6]));
	fprintf(stderr, "usage: %s server CA PORT COUNT\n"
			"       %s client CA PORT SGID_INDEX DGID COUNT\n",
		argv[0], argv[0]);
	return 2;
}
