/* SPDX-License-Identifier: MIT */
/*
 * Logging: to the journal with structured fields when stderr is connected
 * to it (systemd sets JOURNAL_STREAM), to stderr otherwise.
 *
 * Structured fields are passed as a NULL-terminated list of "KEY=value"
 * strings so that call sites stay short; the common ones have helpers.
 * Repeated messages from one call site go through a LogRateLimit so that a
 * hostile client or a broken port cannot flood the log.
 */
#ifndef RDMACM_MUX_LOG_H
#define RDMACM_MUX_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>

/* Select the output and the threshold; call once at start-up. */
void log_setup(int max_level, bool force_stderr);
int log_get_max_level(void);
/* Parse "err", "warning", "notice", "info", "debug" (or 0-7). */
int log_level_from_string(const char *s);

/**
 * log_structured() - log one message.
 * @level: syslog level
 * @fields: NULL, or a NULL-terminated array of "KEY=value" journal fields
 * @fmt: printf format of MESSAGE
 */
void log_structured(int level, const char *const *fields, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_error(...) log_structured(LOG_ERR, NULL, __VA_ARGS__)
#define log_warning(...) log_structured(LOG_WARNING, NULL, __VA_ARGS__)
#define log_notice(...) log_structured(LOG_NOTICE, NULL, __VA_ARGS__)
#define log_info(...) log_structured(LOG_INFO, NULL, __VA_ARGS__)
#define log_debug(...)                                                         \
	do {                                                                   \
		if (log_get_max_level() >= LOG_DEBUG)                          \
			log_structured(LOG_DEBUG, NULL, __VA_ARGS__);          \
	} while (0)

/* Allow @burst messages per @interval_usec; count what was suppressed. */
typedef struct LogRateLimit {
	uint64_t interval_usec;
	unsigned burst;
	uint64_t window_start;
	unsigned in_window;
	unsigned suppressed;
} LogRateLimit;

#define LOG_RATELIMIT_INIT(interval, n) { .interval_usec = (interval), .burst = (n) }

/* True when the caller may log now. Reports suppressed messages once. */
bool log_ratelimit_pass(LogRateLimit *rl);

/* log_structured() behind a per-call-site rate limit (10 per 5 s). */
#define log_ratelimited(level, fields, ...)                                    \
	do {                                                                   \
		static LogRateLimit _rl = LOG_RATELIMIT_INIT(5000000, 10);     \
		if (log_get_max_level() >= (level) && log_ratelimit_pass(&_rl))\
			log_structured((level), (fields), __VA_ARGS__);        \
	} while (0)

#endif /* RDMACM_MUX_LOG_H */
