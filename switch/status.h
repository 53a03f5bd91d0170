/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * status.h - what the switch's internal functions return: 0 or a count on
 * success, -errno on failure, or one of the codes below, which lie above
 * the errno range (4096) so that no errno can be taken for one.
 */
#ifndef SW_STATUS_H
#define SW_STATUS_H

#include <errno.h>
#include <sys/types.h>

enum sw_status {
	/* tcp_head.c: all the peer's TCP bytes are read (its switch point) */
	SW_HEAD_SWITCHED = -4097,
	/* tcp_inband.c: no hello is due; the caller sends as it would */
	SW_NO_HELLO = -4098,
	/* api_data.c: the connection fell back before a byte was read */
	SW_HEAD_FELL_BACK = -4099,
	/* tcp_inband.c: what came is not the peer's hello */
	SW_HELLO_OTHER = -4100,
	/* session_rx.c: the peer's stream continues on TCP from here */
	SW_RX_DOWNGRADE = -4101,
	/* session_tx.c: our stream continues on TCP from here (our
	 * DOWNGRADE went before a byte of this call) */
	SW_TX_DOWNGRADE = -4102,
};

/* At an entry point the shim calls: POSIX from -errno (-1, errno set;
 * errno untouched on success). */
static inline ssize_t sw_posix(ssize_t r)
{
	if (r >= 0)
		return r;
	errno = (int)-r;
	return -1;
}

/* The name of r (-errno or an enum sw_status), for logs. */
const char *sw_strerror(int r);

#endif /* SW_STATUS_H */
