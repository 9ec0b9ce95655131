/* SPDX-License-Identifier: MIT */
/* Owns what the daemon does about its port before the relay starts: the
 * wait for a port that is not there yet, and what it says about who holds
 * the CM class, at start and when the kernel refuses the registration
 * (port-startup.h). The registration itself is umad-port.c's; the sysfs
 * reading is cm-class-owners.c's. */
#include "port-startup.h"

#include <errno.h>
#include <glib.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "cm-class-owners.h"
#include "log.h"
#include "util.h"

/* Does @dev port @port exist, with its umad device if ib_umad is loaded?
 * (ib_umad adds a device just after the device shows in sysfs.) */
static bool port_present(const char *dev, int port)
{
	const char *root = sysfs_root();
	g_autofree char *port_dir = g_strdup_printf("%s/class/infiniband/%s/ports/%d", root, dev,
						    port);
	g_autofree char *mad_dir = g_strdup_printf("%s/class/infiniband_mad", root);
	g_autofree char *abi = g_strdup_printf("%s/abi_version", mad_dir);
	g_autoptr(GDir) dir = NULL;
	const char *e;

	if (!g_file_test(port_dir, G_FILE_TEST_IS_DIR))
		return false;
	/* Without ib_umad there is nothing more to wait for: the open says
	 * what is missing. */
	if (!g_file_test(abi, G_FILE_TEST_EXISTS))
		return true;
	dir = g_dir_open(mad_dir, 0, NULL);
	while (dir && (e = g_dir_read_name(dir))) {
		g_autofree char *ibdev_path = g_strdup_printf("%s/%s/ibdev", mad_dir, e);
		g_autofree char *port_path = g_strdup_printf("%s/%s/port", mad_dir, e);
		g_autofree char *ibdev = NULL, *num = NULL;

		if (g_file_get_contents(ibdev_path, &ibdev, NULL, NULL) &&
		    g_file_get_contents(port_path, &num, NULL, NULL) &&
		    strcmp(g_strchomp(ibdev), dev) == 0 && atoi(num) == port)
			return true;
	}
	return false;
}

/*
 * --wait-for-device: at boot the units start before the drivers have
 * made every device (a PCI function's RDMA driver, a VF, an rxe link), and
 * before rdma-core loads ib_cm, which waits for the daemon to be ready.
 * Waiting here keeps that order; failing at once would let ib_cm take the
 * device while the unit waits for its restart. Return: 0 (the port is
 * there, or the time is up), or -EINTR when SIGTERM or SIGINT came.
 */
int port_startup_wait(const char *dev, int port, int wait_s)
{
	uint64_t end = now_usec() + (uint64_t)wait_s * 1000000u;
	struct timespec tick = { .tv_nsec = 100 * 1000 * 1000 };
	sigset_t stop;

	if (wait_s == 0 || port_present(dev, port))
		return 0;
	log_info("waiting up to %d s for %s port %d to appear", wait_s, dev,
		 port);
	(void)sd_notifyf(0, "STATUS=waiting for %s port %d", dev, port);
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	while (now_usec() < end && !port_present(dev, port)) {
		/* The signals are blocked: this is the sleep, and SIGTERM ends it. */
		if (sigtimedwait(&stop, NULL, &tick) > 0) {
			log_info("stopped while waiting for %s port %d", dev, port);
			return -EINTR;
		}
	}
	return 0;
}

/* ---- the CM class: who holds it ---- */

/*
 * Exit 3: the kernel refused the CM class. Say who holds it and what to do,
 * in one line. ib_cm tries a device only when the device appears or ib_cm
 * loads, so it cannot be made to let go but by unloading it.
 */
void port_startup_log_refused(const char *dev, int port)
{
	g_autoptr(CmClassOwners) owners = NULL;
	CmClassOwner owner = CM_OWNER_UNKNOWN;

	if (cm_class_owners_scan(sysfs_root(), NULL, 0, &owners) == 0)
		owner = cm_class_owners_get(owners, dev, (uint32_t)port);
	if (owner == CM_OWNER_IB_CM)
		log_error("the CM class is already owned on %s port %d by ib_cm, which took %s "
			  "because it was loaded before rdmacm-mux started: start rdmacm-mux "
			  "before ib_cm loads (enable its unit and reboot), or unload ib_cm and "
			  "its users, start rdmacm-mux, then load them again; see README 'Host "
			  "preparation'", dev, port, dev);
	else if (owners)
		log_error("the CM class is already owned on %s port %d, not by ib_cm: another "
			  "rdmacm-mux or umad program holds it; stop that one first", dev, port);
	else
		log_error("the CM class is already owned on %s port %d, by ib_cm or another "
			  "rdmacm-mux: see README 'Host preparation'", dev, port);
}

/*
 * At start: who holds the CM class where, and that the daemon's port takes
 * its whole device from the host's CM (ib_cm adds a device whole or not at
 * all). Only words: the relay works the same without them.
 */
void port_startup_log_owners(const char *dev, int port)
{
	g_autoptr(CmClassOwners) owners = NULL;
	g_autofree char *summary = NULL;
	unsigned ports;
	int r;

	r = cm_class_owners_scan(sysfs_root(), dev, (uint32_t)port, &owners);
	if (r < 0) {
		log_warning("cannot tell from sysfs who holds the CM class on the other ports: %s",
			    strerror(-r));
		return;
	}
	summary = cm_class_owners_summary(owners);
	log_info("CM class owners: %s", summary);
	ports = cm_class_owners_device_ports(owners, dev);
	if (ports > 1)
		log_notice("%s has %u ports: holding port %d keeps the host's ib_cm off all of "
			   "them (it takes a device whole or not at all), so the host cannot use "
			   "rdma_cm, IPoIB or storage over RDMA on any port of %s",
			   dev, ports, port, dev);
}

