/* SPDX-License-Identifier: MIT */
/*
 * log: one line per call to stderr or syslog. It does not buffer, rotate or
 * redact; callers keep credentials out of the format arguments.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

static const char *log_progname = "sandboxfs";
static volatile int log_level_cur = LOG_LEVEL_WARN;
static volatile bool log_syslog;
static volatile int log_fd = -1; /* a log file, when set */

static const char *const level_names[] = {"error", "warning", "notice", "info",
					  "debug"};

void log_init(const char *progname, enum log_level level)
{
	if (progname != NULL)
		log_progname = progname;
	log_level_cur = level;
}

void log_set_level(enum log_level level)
{
	log_level_cur = level;
}

enum log_level log_get_level(void)
{
	return (enum log_level)log_level_cur;
}

void log_use_syslog(bool on)
{
	if (on && !log_syslog)
		openlog(log_progname, LOG_PID, LOG_DAEMON);
	log_syslog = on;
}

void log_use_fd(int fd)
{
	log_fd = fd;
}

static void log_vlog(enum log_level level, const char *fmt, va_list ap)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO,
				   LOG_DEBUG};
	char line[2048], stamp[40] = "";
	int n, m, fd = log_fd;

	if ((int)level > log_level_cur)
		return;
	if (log_syslog && fd < 0) {
		vsyslog(prio[level], fmt, ap);
		return;
	}
	if (fd >= 0) {
		/* A file outlives the terminal: each line says when and
		 * who. */
		struct timespec ts;
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = (int)strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S",
				  &tm);
		snprintf(stamp + n, sizeof(stamp) - (size_t)n, ".%03ldZ [%d] ",
			 ts.tv_nsec / 1000000, (int)getpid());
	} else {
		fd = STDERR_FILENO;
	}
	n = snprintf(line, sizeof(line), "%s%s: %s: ", stamp, log_progname,
		     level_names[level]);
	if (n < 0)
		return;
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* One write keeps lines from several threads whole. */
	if (write(fd, line, (size_t)n) < 0)
		return;
}

#define LOG_FN(name, lvl)               \
	void name(const char *fmt, ...) \
	{                               \
		va_list ap;             \
		va_start(ap, fmt);      \
		log_vlog(lvl, fmt, ap); \
		va_end(ap);             \
	}
LOG_FN(log_error, LOG_LEVEL_ERROR)
LOG_FN(log_warn, LOG_LEVEL_WARN)
LOG_FN(log_notice, LOG_LEVEL_NOTICE)
LOG_FN(log_info, LOG_LEVEL_INFO)
LOG_FN(log_debug, LOG_LEVEL_DEBUG)

void fatal(const char *fmt, ...)
{
	char msg[1024];
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s: %s", msg, strerror(saved));
	exit(1);
}

void fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vlog(LOG_LEVEL_ERROR, fmt, ap);
	va_end(ap);
	exit(1);
}
