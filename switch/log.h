/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * log.h - the switch's log (log.c), by level.
 */
#ifndef SW_LOG_H
#define SW_LOG_H

#include <stdbool.h>

/* Opens the log sink named in the settings (log.c). */
void sw_log_open(void);
/* Where the log goes, for sdp-run --check. */
const char *sw_log_place(void);
/* stderr may take the log's lines: not a socket, or the journal's
 * (log.c). */
bool sw_stderr_is_log(void);
void sw_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define SW_ERR(...) sw_log(3, __VA_ARGS__)

#define SW_WARN(...) sw_log(4, __VA_ARGS__)

#define SW_INFO(...) sw_log(6, __VA_ARGS__)

#define SW_DBG(...) sw_log(7, __VA_ARGS__)

#endif /* SW_LOG_H */
