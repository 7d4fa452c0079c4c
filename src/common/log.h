/* SPDX-License-Identifier: MIT */
/*
 * log: leveled logging for the three programs (the tmux model).
 *
 * One line per call, written with a single write(2) so lines from several
 * threads never interleave. The sink is stderr (the default), a log file
 * or syslog.
 * Callers must never pass a credential: nothing here redacts.
 *
 * Thread-safe.
 */
#ifndef SBFS_LOG_H
#define SBFS_LOG_H

#include <stdarg.h>
#include <stdbool.h>

enum log_level {
	LOG_LEVEL_ERROR = 0,
	LOG_LEVEL_WARN,
	LOG_LEVEL_NOTICE, /* normal but worth telling: shown by default */
	LOG_LEVEL_INFO,
	LOG_LEVEL_DEBUG,
};

/* Set the program name shown in each line (borrowed: must outlive logging). */
void log_init(const char *progname, enum log_level level);
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Send further lines to syslog (daemon facility) instead of stderr. */
void log_use_syslog(bool on);
/* Send further lines to fd (a log file, opened O_APPEND by the caller),
 * each with its time (UTC) and pid, instead of stderr or syslog; -1 goes
 * back. */
void log_use_fd(int fd);

void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Log and exit(1); fatal() appends strerror(errno). For startup failures
 * and broken invariants only. */
void fatal(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

#endif
