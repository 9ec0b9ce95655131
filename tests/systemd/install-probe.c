/* SPDX-License-Identifier: MIT */
/*
 * Built by test-install.sh against an installed rdmacm-mux (its .pc, its
 * headers, its library), never against the source tree. Calls the library
 * for real (rdmacm_mux_open() on a path with no daemon must fail with
 * -ENOENT and say why) and prints the librdmacm-mux it was loaded from, so
 * that the test can check it is the installed copy, and the version its
 * header and the library say, for the test to compare with the .pc's.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rdmacm-mux.h>
#include <rdmacm-mux-proto.h>

int main(int argc, char **argv)
{
	struct rdmacm_mux *m = NULL;
	char line[4096];
	FILE *maps;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: install-probe NO-SUCH-SOCKET\n");
		return 2;
	}
	r = rdmacm_mux_open(argv[1], 0, 1000, &m);
	if (r != -ENOENT || m) {
		fprintf(stderr, "rdmacm_mux_open() gave %d, not -ENOENT\n", r);
		return 1;
	}
	if (!*rdmacm_mux_last_error(NULL)) {
		fprintf(stderr, "rdmacm_mux_last_error() is empty after a failure\n");
		return 1;
	}
	printf("open: %s\n", rdmacm_mux_last_error(NULL));
	printf("header: %d.%d.%d\n", RDMACM_MUX_VERSION_MAJOR, RDMACM_MUX_VERSION_MINOR,
	       RDMACM_MUX_VERSION_MICRO);
	printf("library: %u.%u.%u\n", rdmacm_mux_version() >> 16,
	       (rdmacm_mux_version() >> 8) & 0xff, rdmacm_mux_version() & 0xff);

	maps = fopen("/proc/self/maps", "re");
	if (!maps)
		return 1;
	while (fgets(line, sizeof(line), maps)) {
		char *path = strchr(line, '/');

		if (path && strstr(path, "librdmacm-mux.so")) {
			printf("loaded: %s", path);
			break;
		}
	}
	fclose(maps);
	return 0;
}
