/* SPDX-License-Identifier: MIT */
/*
 * The one write-all loop of the tree: libc only, so that the tools and the
 * bench, which link nothing of the daemon's, use it too.
 */
#ifndef RDMACM_MUX_FD_WRITE_H
#define RDMACM_MUX_FD_WRITE_H

#include <stddef.h>
#include <sys/types.h>

/**
 * fd_write_all() - write all @len bytes of @buf to @fd, at @offset, or at
 * the file position when @offset is negative, resuming after short writes
 * and EINTR.
 * Return: 0, -ENOSPC when the fd took nothing more (a full disk), or the
 * write's negative errno.
 */
int fd_write_all(int fd, const void *buf, size_t len, off_t offset);

#endif /* RDMACM_MUX_FD_WRITE_H */
