/* SPDX-License-Identifier: MIT */
/* Owns the fuzzers' fake sysfs port and relay set-up (fuzz-support.h). */
#include "fuzz-support.h"

#include <ftw.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "umad-port-fake.h"

const uint8_t fuzz_port_gid[FUZZ_PORT_GIDS][16] = {
	{ 0xfe, 0x80, [15] = 0x01 },			      /* fe80::1 */
	{ [10] = 0xff, [11] = 0xff, 10, 0, 1, 1 },	      /* ::ffff:10.0.1.1 */
	{ [10] = 0xff, [11] = 0xff, 10, 0, 1, 2 },	      /* ::ffff:10.0.1.2 */
	{ [10] = 0xff, [11] = 0xff, 10, 0, 1, 3 },	      /* ::ffff:10.0.1.3 */
};

static char *sysfs_dir;
static sd_event *event;

_Noreturn void fuzz_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("FUZZ CHECK FAILED: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	abort();
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void env_cleanup(void)
{
	if (sysfs_dir)
		(void)nftw(sysfs_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	g_free(sysfs_dir);
	sysfs_dir = NULL;
	event = sd_event_unref(event);
}

static void write_file(const char *dir, const char *name, const char *text)
{
	g_autofree char *path = g_build_filename(dir, name, NULL);
	g_autofree char *parent = g_path_get_dirname(path);

	if (g_mkdir_with_parents(parent, 0755) < 0 || !g_file_set_contents(path, text, -1, NULL))
		fuzz_fail("cannot write %s", path);
}

void fuzz_env_init(void)
{
	g_autofree char *port = NULL;
	char text[64];

	if (sysfs_dir)
		return;
	/* Quiet unless asked: the relay logs every refused frame. */
	log_setup(g_getenv("FUZZ_LOG") ? LOG_DEBUG : LOG_CRIT, true);
	sysfs_dir = g_dir_make_tmp("rdmacm-mux-fuzz-XXXXXX", NULL);
	if (!sysfs_dir)
		fuzz_fail("cannot make a temporary directory");
	port = g_build_filename(sysfs_dir, "class/infiniband/fuzz0/ports/1", NULL);
	for (int i = 0; i < FUZZ_PORT_GIDS; i++) {
		const uint8_t *g = fuzz_port_gid[i];
		char name[32];

		snprintf(text, sizeof(text),
			 "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x\n",
			 g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11],
			 g[12], g[13], g[14], g[15]);
		snprintf(name, sizeof(name), "gids/%d", i);
		write_file(port, name, text);
		snprintf(name, sizeof(name), "gid_attrs/types/%d", i);
		write_file(port, name, "RoCE v2\n");
	}
	g_setenv("SYSFS_PATH", sysfs_dir, TRUE);
	if (sd_event_new(&event) < 0)
		fuzz_fail("sd_event_new failed");
	atexit(env_cleanup);
}

Relay *fuzz_relay_new(const RelayConfig *cfg, unsigned senders,
		      int (*send)(void *userdata, UmadBuffer *buf, size_t mad_len),
		      void *userdata)
{
	UmadPort *port = NULL;
	Relay *r = NULL;
	int e;

	fuzz_env_init();
	e = umad_port_new_fake("fuzz0", 1, true, send, userdata, &port);
	if (e < 0)
		fuzz_fail("umad_port_new_fake: %s", g_strerror(-e));
	e = relay_driver_new(event, port, cfg, senders, &r);
	if (e < 0)
		fuzz_fail("relay_driver_new: %s", g_strerror(-e));
	relay_driver_set_time(r, 1000000);
	/* The same input must give the same wire ids, or a crash that
	 * depends on one would not reproduce. */
	relay_driver_seed_wire_ids(r, 1);
	return r;
}

void fuzz_relay_free(Relay *r)
{
	relay_free(r);
}
