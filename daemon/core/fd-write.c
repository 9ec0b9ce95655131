/* SPDX-License-Identifier: MIT */
/* Owns fd_write_all() (fd-write.h), for the daemon, the tools and the
 * bench alike. */
#include "fd-write.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

int fd_write_all(int fd, const void *buf, size_t len, off_t offset)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = offset < 0 ? write(fd, p, len) : pwrite(fd, p, len, offset);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENOSPC;
		p += n;
		len -= (size_t)n;
		if (offset >= 0)
			offset += n;
	}
	return 0;
}
