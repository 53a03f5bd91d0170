/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * log.c - the switch's log, which the providers' lines join: levels from
 * SDP_LOG (config.c), written to stderr or to $SDP_LOG_FILE, one line per
 * event, prefixed with the pid so lines of both ends can be told apart;
 * never to a stderr that is a connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "ownfd.h"
#include "sdp_loader.h"
#include "sys.h"
#include "util.h"

static int log_fd = 2;
/* $JOURNAL_STREAM's device and inode: systemd's journal, when stderr is
 * the socket it names */
static unsigned long long journal_dev, journal_ino;
static bool journal_known;
/* the log file's identity: a number the program took over (a close the
 * shim did not see, then a new file on that number) is not written to */
static dev_t log_dev;
static ino_t log_ino;

/* A provider's line (sdp_loader_set_log): the switch's level and place. */
static void provider_line(int level, const char *line)
{
	sw_log(level, "provider: %s", line);
}

static bool journal_stream(unsigned long long *dev, unsigned long long *ino)
{
	const char *js = getenv("JOURNAL_STREAM");

	return js && sscanf(js, "%llu:%llu", dev, ino) == 2;
}

/*
 * stderr takes the log's lines unless it is a socket: an inetd-style
 * server (vsftpd, xinetd's and inetd's services, socat EXEC) has its
 * connection on 0, 1 and 2, and a line there would reach the peer as the
 * program's bytes. The one socket that is a log is systemd's journal,
 * which names itself in $JOURNAL_STREAM (device:inode).
 */
bool sw_stderr_is_log(void)
{
	unsigned long long dev, ino;
	struct stat sb;

	if (fstat(2, &sb))
		return false;
	if (!S_ISSOCK(sb.st_mode))
		return true;
	if (journal_known) {
		dev = journal_dev;
		ino = journal_ino;
	} else if (!journal_stream(&dev, &ino)) {
		return false;
	}
	return dev == (unsigned long long)sb.st_dev &&
	       ino == (unsigned long long)sb.st_ino;
}

/* Where the log goes: $SDP_LOG_FILE (appended to, made owner-only), else
 * stderr. A file that cannot be opened is said on stderr, once. */
void sw_log_open(void)
{
	const char *f = getenv("SDP_LOG_FILE");

	sdp_loader_set_log(provider_line);
	journal_known = journal_stream(&journal_dev, &journal_ino);
	if (f && *f) {
		int fd = open(f, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
			      0600);
		struct stat sb;

		if (fd >= 0 && !fstat(fd, &sb)) {
			log_dev = sb.st_dev;
			log_ino = sb.st_ino;
			__atomic_store_n(&log_fd, sw_fd_own(fd, &log_fd),
					 __ATOMIC_RELEASE);
		} else if (fd >= 0) {
			sdp_sys.close(fd);
		} else {
			SW_ERR("SDP_LOG_FILE=%s: cannot open: %s; logging to stderr instead",
			       f, strerror(errno));
		}
	}
}

/* The log's destination, for sdp-run --check. */
const char *sw_log_place(void)
{
	return log_fd == 2 ? "stderr" : getenv("SDP_LOG_FILE");
}

static bool log_fd_ok(int fd)
{
	struct stat sb;

	return sw_fd_is_own(fd) && !fstat(fd, &sb) && sb.st_dev == log_dev &&
	       sb.st_ino == log_ino;
}

/* A line of n bytes fits under the program's RLIMIT_FSIZE (a regular file
 * grown past it sends SIGXFSZ, which would kill the program: the line is
 * dropped instead). */
static bool log_room(int fd, int n)
{
	struct stat sb;

	return fstat(fd, &sb) || !S_ISREG(sb.st_mode) ||
	       sw_fsize_room((uint64_t)sb.st_size + (uint64_t)n);
}

void sw_log(int level, const char *fmt, ...)
{
	static const char *names[] = { "emerg", "alert", "crit", "error",
				       "warn", "notice", "info", "debug" };
	char line[1024];
	va_list ap;
	int n, fd;

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
	/* the real write: never the program's wrapper, and only to the log
	 * file itself (or stderr), never to a number the program now owns */
	fd = __atomic_load_n(&log_fd, __ATOMIC_ACQUIRE);
	if ((fd != 2 && !log_fd_ok(fd)) || (fd == 2 && !sw_stderr_is_log()) ||
	    !log_room(fd, n))
		return;
	if (sdp_sys.write(fd, line, n) < 0)
		return;
}
