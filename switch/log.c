/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * log.c - the switch's log, which the providers' lines join: levels from
 * SDP_LOG (config.c), written to stderr or to $SDP_LOG_FILE, one line per
 * event, prefixed with the pid so lines of both ends can be told apart.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "sdp_loader.h"
#include "sys.h"
#include "util.h"

static int log_fd = 2;

/* A provider's line (sdp_loader_set_log): the switch's level and place. */
static void provider_line(int level, const char *line)
{
	sw_log(level, "provider: %s", line);
}

/* Where the log goes: $SDP_LOG_FILE (appended to, made owner-only), else
 * stderr. A file that cannot be opened is said on stderr, once. */
void sw_log_open(void)
{
	const char *f = getenv("SDP_LOG_FILE");

	sdp_loader_set_log(provider_line);
	if (f && *f) {
		int fd = open(f, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
			      0600);

		if (fd >= 0)
			log_fd = fd;
		else
			SW_ERR("SDP_LOG_FILE=%s: cannot open: %s; logging to stderr instead",
			       f, strerror(errno));
	}
}

/* The log's destination, for sdp-run --check. */
const char *sw_log_place(void)
{
	return log_fd == 2 ? "stderr" : getenv("SDP_LOG_FILE");
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
