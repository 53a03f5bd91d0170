// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * rxe_stat.c - reads the calling process's own sdp-stat file to tell which
 * path (a provider or TCP) the switch gave a socket, so a lab test proves
 * its bytes went where it meant them to go.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stats.h"
#include "rxe_stat.h"

/* the two end states of enum sw_state (stats.h) */
#define RXE_STATE_TCP SW_TCP
#define RXE_STATE_SAN SW_SAN

int rxe_path_of(int fd, struct rxe_path *p)
{
	const struct sw_proc_stats *ps;
	const struct sw_conn_stats *c;
	char path[512];
	unsigned int i;
	int sfd;

	memset(p, 0, sizeof(*p));
	sw_stats_path(path, sizeof(path), (int)getpid());
	sfd = open(path, O_RDONLY);
	if (sfd < 0)
		return 0;
	ps = mmap(NULL, sizeof(*ps), PROT_READ, MAP_SHARED, sfd, 0);
	close(sfd);
	if (ps == MAP_FAILED)
		return -1;
	p->preloaded = ps->magic == SW_STATS_MAGIC;
	p->conns_tcp = p->preloaded ? ps->conns_tcp : 0;
	for (i = 0; p->preloaded && i < ps->nslots && i < SW_STATS_SLOTS;
	     i++) {
		c = &ps->conn[i];
		if (!c->in_use || c->fd != fd || c->state == 0)
			continue;
		p->found = true;
		snprintf(p->provider, sizeof(p->provider), "%.15s",
			 c->provider);
		p->state = c->state;
		p->tx_san = c->tx_copy + c->tx_rdma_read + c->tx_rdma_write;
		p->rx_san = c->rx_copy + c->rx_rdma_read + c->rx_rdma_write;
		p->tx_tcp = c->tx_tcp;
		p->rx_tcp = c->rx_tcp;
		p->tx_copy = c->tx_copy;
		p->rx_copy = c->rx_copy;
		p->tx_read = c->tx_rdma_read;
		p->rx_read = c->rx_rdma_read;
		p->tx_write = c->tx_rdma_write;
		p->rx_write = c->rx_rdma_write;
		p->msgs_tx = c->msgs_tx;
		p->msgs_rx = c->msgs_rx;
		p->stalls = c->credit_stalls;
		p->doorbells = c->doorbells;
		p->wakeups = c->wakeups;
		break;
	}
	munmap((void *)ps, sizeof(*ps));
	return 0;
}

int rxe_path_check(int fd, const char *who, const char *want)
{
	struct rxe_path p;
	const char *got;

	if (rxe_path_of(fd, &p) < 0) {
		fprintf(stderr, "%s: cannot map own sdp-stat file\n", who);
		return -1;
	}
	if (!p.preloaded)
		got = "tcp";
	else if (!p.found)
		/* a connection left on TCP gives its slot back at once */
		got = p.conns_tcp ? "tcp" : "unknown";
	else if (p.state == RXE_STATE_SAN)
		got = p.provider;
	else if (p.state == RXE_STATE_TCP)
		got = "tcp";
	else
		got = "unfinished";
	printf("%s: path %s (switch %s, state %u, san tx %llu rx %llu, "
	       "tcp tx %llu rx %llu)\n", who, got,
	       p.preloaded ? "loaded" : "not loaded", p.state, p.tx_san,
	       p.rx_san, p.tx_tcp, p.rx_tcp);
	if (p.found)
		printf("%s: bytes copy %llu/%llu read %llu/%llu write %llu/%llu "
		       "(tx/rx); msgs %llu/%llu; credit stalls %llu; "
		       "doorbells sent %llu, received %llu\n", who,
		       p.tx_copy, p.rx_copy, p.tx_read, p.rx_read,
		       p.tx_write, p.rx_write, p.msgs_tx, p.msgs_rx,
		       p.stalls, p.doorbells, p.wakeups);
	if (want && strcmp(want, got)) {
		fprintf(stderr, "%s: the connection went over %s, expected "
			"%s\n", who, got, want);
		return -1;
	}
	return 0;
}
