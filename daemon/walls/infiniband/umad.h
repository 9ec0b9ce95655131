/* SPDX-License-Identifier: MIT */
/*
 * A wall, not a header: every daemon unit but umad-port.c is compiled with
 * this directory ahead of the system's include path, so that reaching for
 * libibumad anywhere else fails to build. The kernel's user-MAD interface
 * belongs to the umad port (umad-port.h); go through it.
 */
#error "only daemon/port/umad-port.c may include <infiniband/umad.h>; use umad-port.h"
