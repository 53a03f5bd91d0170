/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * rxe_stat.h - lets a lab test program ask the switch (when preloaded) which
 * path carried one of its sockets, from its own sdp-stat file
 * ($SDP_STAT_DIR/sdp-stat.<pid>, layout switch/stats.h), and check it.
 */
#ifndef SDP_RXE_STAT_H
#define SDP_RXE_STAT_H

#include <stdbool.h>

/* What the switch published for fd; preloaded is false without a file. */
struct rxe_path {
	bool preloaded;
	bool found;
	char provider[16];
	unsigned int state;	/* enum sw_state (switch/sw_internal.h) */
	unsigned long long tx_san, rx_san, tx_tcp, rx_tcp;
	unsigned long long conns_tcp;	/* process: conns left on TCP */
	/* where the time went: bytes by path, messages, waits */
	unsigned long long tx_copy, rx_copy, tx_read, rx_read;
	unsigned long long tx_write, rx_write;
	unsigned long long msgs_tx, msgs_rx, stalls, doorbells, wakeups;
};

int rxe_path_of(int fd, struct rxe_path *p);
/* Prints "path: ..." for fd and checks it against want ("tcp", a provider
 * name, or NULL for no check): 0 when it matches, -1 with a message. */
int rxe_path_check(int fd, const char *who, const char *want);

#endif /* SDP_RXE_STAT_H */
