/* SPDX-License-Identifier: MIT */
/*
 * A main() for builds without libFuzzer (gcc, or clang without -Dfuzz):
 * runs LLVMFuzzerTestOneInput once on every file named on the command line,
 * and on every regular file inside a directory named there (one level, in
 * name order). A crash or failed check aborts as it would under libFuzzer.
 * Exit status: 0 when every input ran, 1 when an input could not be read.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f) {
		perror(path);
		return -1;
	}
	do {
		if (len == cap) {
			uint8_t *nb;

			cap = cap ? cap * 2 : 4096;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	/* An exact-size copy, so that ASan sees reads past the end. */
	{
		uint8_t *exact = malloc(len ? len : 1);

		if (!exact) {
			free(buf);
			return -1;
		}
		if (len)
			memcpy(exact, buf, len);
		free(buf);
		(void)LLVMFuzzerTestOneInput(exact, len);
		free(exact);
	}
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int run_path(const char *path, unsigned *count)
{
	struct stat st;
	struct dirent **names;
	int n, rc = 0;

	if (stat(path, &st) < 0) {
		perror(path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (run_file(path) < 0)
			return -1;
		(*count)++;
		return 0;
	}
	n = scandir(path, &names, NULL, by_name);
	if (n < 0) {
		perror(path);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char *child = NULL;

		if (names[i]->d_name[0] != '.' &&
		    asprintf(&child, "%s/%s", path, names[i]->d_name) >= 0) {
			if (stat(child, &st) == 0 && S_ISREG(st.st_mode)) {
				if (run_file(child) < 0)
					rc = -1;
				else
					(*count)++;
			}
		}
		free(child);
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		if (argv[i][0] == '-') /* libFuzzer flags: meaningless here */
			continue;
		if (run_path(argv[i], &count) < 0)
			rc = 1;
	}
	printf("%s: replayed %u inputs\n", argv[0], count);
	return rc;
}
