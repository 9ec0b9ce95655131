/* SPDX-License-Identifier: MIT */
/* Owns where log lines go (journal or stderr), the level, rate limiting. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include "util.h"

static int log_max_level = LOG_INFO;
static bool log_to_journal;

/* stderr is the journal when JOURNAL_STREAM names the same device:inode. */
static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return st.st_dev == (dev_t)dev && st.st_ino == (ino_t)ino;
}

void log_setup(int max_level, bool force_stderr)
{
	log_max_level = max_level;
	log_to_journal = !force_stderr && stderr_is_journal();
}

int log_get_max_level(void)
{
	return log_max_level;
}

int log_level_from_string(const char *s)
{
	static const char *const names[] = {
		"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
	};

	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (strcasecmp(s, names[i]) == 0)
			return (int)i;
	if (strcasecmp(s, "error") == 0)
		return LOG_ERR;
	if (strcasecmp(s, "warn") == 0)
		return LOG_WARNING;
	if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0')
		return s[0] - '0';
	return -EINVAL;
}

static const char *level_prefix(int level)
{
	switch (level) {
	case LOG_EMERG:
	case LOG_ALERT:
	case LOG_CRIT:
	case LOG_ERR:
		return "error: ";
	case LOG_WARNING:
		return "warning: ";
	case LOG_DEBUG:
		return "debug: ";
	default:
		return "";
	}
}

void log_structured(int level, const char *const *fields, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int saved = errno;

	if (level > log_max_level)
		return;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	if (log_to_journal) {
		char message[sizeof(msg) + 16], priority[16];
		struct iovec iov[16];
		size_t n = 0;

		snprintf(message, sizeof(message), "MESSAGE=%s", msg);
		snprintf(priority, sizeof(priority), "PRIORITY=%d", level);
		iov[n++] = (struct iovec){ message, strlen(message) };
		iov[n++] = (struct iovec){ priority, strlen(priority) };
		iov[n++] = (struct iovec){ (char *)"SYSLOG_IDENTIFIER=rdmacm-mux",
					   strlen("SYSLOG_IDENTIFIER=rdmacm-mux") };
		for (size_t i = 0; fields && fields[i] && n < ARRAY_SIZE(iov); i++)
			iov[n++] = (struct iovec){ (char *)fields[i], strlen(fields[i]) };
		if (sd_journal_sendv(iov, (int)n) >= 0) {
			errno = saved;
			return;
		}
	}

	fprintf(stderr, "rdmacm-mux: %s%s", level_prefix(level), msg);
	for (size_t i = 0; fields && fields[i]; i++)
		fprintf(stderr, "%s%s", i == 0 ? " [" : " ", fields[i]);
	fprintf(stderr, "%s\n", fields && fields[0] ? "]" : "");
	errno = saved;
}

bool log_ratelimit_pass(LogRateLimit *rl)
{
	uint64_t now = now_usec();

	if (rl->window_start == 0 || now - rl->window_start >= rl->interval_usec) {
		if (rl->suppressed > 0)
			log_structured(LOG_WARNING, NULL,
				       "%u similar messages suppressed",
				       rl->suppressed);
		rl->window_start = now;
		rl->in_window = 0;
		rl->suppressed = 0;
	}
	if (rl->in_window < rl->burst) {
		rl->in_window++;
		return true;
	}
	rl->suppressed++;
	return false;
}
