/* SPDX-License-Identifier: MIT */
/*
 * Owns the bench's no-op syslog: preloaded into QEMU's contrib/rdmacm-mux
 * (the peer rows, see bench/README.md), it makes every syslog() call free,
 * so that the "qemu-nolog" rows show the peer at its best: QEMU's mux logs
 * each MAD and each poll event at LOG_DEBUG, which costs a syscall or more
 * per call whether or not anything listens on /dev/log.
 *
 * glibc's fortified builds (QEMU's, with _FORTIFY_SOURCE) call the _chk
 * variants, so those are covered too.
 */
#include <stdarg.h>
#include <syslog.h>

void syslog(int prio, const char *fmt, ...)
{
	(void)prio;
	(void)fmt;
}

void vsyslog(int prio, const char *fmt, va_list ap)
{
	(void)prio;
	(void)fmt;
	(void)ap;
}

void __syslog_chk(int prio, int flag, const char *fmt, ...);
void __syslog_chk(int prio, int flag, const char *fmt, ...)
{
	(void)prio;
	(void)flag;
	(void)fmt;
}

void __vsyslog_chk(int prio, int flag, const char *fmt, va_list ap);
void __vsyslog_chk(int prio, int flag, const char *fmt, va_list ap)
{
	(void)prio;
	(void)flag;
	(void)fmt;
	(void)ap;
}

void openlog(const char *ident, int option, int facility)
{
	(void)ident;
	(void)option;
	(void)facility;
}

void closelog(void)
{
}
