/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * log.c - the switch's log: levels from SDP_LOG (error, warn, info, debug or
 * 0-7), written to stderr or to $SDP_LOG_FILE, one line per event, prefixed
 * with the pid so lines of both ends of a connection can be told apart.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "sys.h"
#include "util.h"

static int log_fd = 2;

void sw_log_open(void);
void sw_log_open(void)
{
	const char *f = getenv("SDP_LOG_FILE");

	if (f && *f) {
		int fd = open(f, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

		if (fd >= 0)
			log_fd = fd;
	}
}

void sw_log(int level, const char *fmt, ...)
{
	static const char *names[] = { "emerg", "alert", "crit", "error",
				       "warn", "notice", "info", "debug" };
	char line[1024];
	va_list ap;
	int n;

	if (level > sw_cfg.log_level)
		return;
	if (sw_cfg.log_level >= 7) {
		/* at debug level, when: lines of both ends can be merged */
		uint64_t t = sw_now_ns();

		n = snprintf(line, sizeof(line), "%llu.%06llu sdp-switch[%d] %s: ",
			     (unsigned long long)(t / 1000000000),
			     (unsigned long long)(t % 1000000000 / 1000),
			     (int)getpid(), names[level & 7]);
	} else {
		n = snprintf(line, sizeof(line), "sdp-switch[%d] %s: ",
			     (int)getpid(), names[level & 7]);
	}
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* the real write: never the program's wrapper */
	if (sdp_sys.write(log_fd, line, n) < 0)
		return;
}
