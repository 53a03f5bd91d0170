/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * status.c - text for the switch's internal return codes (status.h): the
 * C library's for -errno, the switch's own for the codes above it.
 */
#include <string.h>

#include "status.h"

const char *sw_strerror(int r)
{
	switch (r) {
	case SW_HEAD_SWITCHED:
		return "all the peer's TCP bytes are read";
	case SW_NO_HELLO:
		return "no hello is due";
	case SW_HEAD_FELL_BACK:
		return "fell back before a byte was read";
	case SW_HELLO_OTHER:
		return "not the peer's hello";
	case SW_RX_DOWNGRADE:
		return "the peer's stream continues on TCP";
	case SW_TX_DOWNGRADE:
		return "our stream continues on TCP";
	}
	if (r < 0 && r > -4096)
		return strerror(-r);
	return r ? "unknown status" : "success";
}
