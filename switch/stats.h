/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * stats.h - the statistics a process publishes for sdp-stat: a file in
 * $SDP_STAT_DIR (default /dev/shm) named sdp-stat.<pid>, mapped shared, with
 * process counters and one slot per connection. Layout is versioned; the
 * reader (scripts/sdp-stat, tools/sdp_stat.c) uses this header.
 */
#ifndef SDP_STATS_H
#define SDP_STATS_H

#include <stdint.h>

#define SW_STATS_MAGIC 0x53445053u /* "SPDS" */
#define SW_STATS_VERSION 3
/* 10,000 idle connections per process must each get a slot (issue 3); the
 * file is sparse, so unused slots cost no memory */
#define SW_STATS_SLOTS 16384
#define SW_STATS_FB_MAX 32

struct sw_conn_stats {
	uint32_t in_use;	/* 1 while the connection lives */
	int32_t fd;
	uint32_t state;		/* enum sw_state */
	uint32_t fb_reason;	/* enum sdp_fallback_reason, 0 = none */
	char provider[16];
	char peer[48];		/* "ip:port" */
	uint16_t local_port;
	uint16_t is_client;
	uint32_t reserved;
	uint64_t tx_copy, rx_copy;	/* bytes inline in control messages */
	uint64_t tx_rdma_read, rx_rdma_read;	/* bytes by RDATA (peer pulled / we pulled) */
	uint64_t tx_rdma_write, rx_rdma_write;	/* bytes by WDATA */
	uint64_t tx_tcp, rx_tcp;	/* bytes on plain TCP (fallen back) */
	uint64_t msgs_tx, msgs_rx;
	uint64_t credit_stalls;	/* sends that waited for credits/space */
	uint64_t wakeups;	/* doorbells received */
	uint64_t doorbells;	/* doorbells sent */
	uint64_t reg_failures;	/* registrations that failed (copy used) */
	uint64_t reg_bytes;	/* registered memory held now (buffers and
				 * staging ring) */
	uint32_t recv_bufs;	/* receive buffers posted now */
	uint32_t reserved2;
};

struct sw_proc_stats {
	uint32_t magic;
	uint32_t version;
	int32_t pid;
	uint32_t nslots;
	char program[64];
	uint64_t start_ns;
	uint64_t conns_san;	/* connections carried by a provider */
	uint64_t conns_tcp;	/* connections left on TCP */
	uint64_t fallbacks[SW_STATS_FB_MAX]; /* by enum sdp_fallback_reason */
	char providers[64];	/* "shm,verbs(no device)" */
	int32_t ppid;		/* parent process, to find a server's
				 * forked workers */
	uint32_t reserved;
	/* bytes of the connections that have closed, by path: a reader adds
	 * the live slots to get the process's lifetime totals. A forked
	 * child starts these at zero (its parent keeps the history). */
	uint64_t closed_tx_san, closed_rx_san;	/* copy + RDMA read + write */
	uint64_t closed_tx_tcp, closed_rx_tcp;
	struct sw_conn_stats conn[SW_STATS_SLOTS];
};

/* Bytes a connection moved through the provider, by direction. */
static inline uint64_t sw_stats_tx_san(const struct sw_conn_stats *c)
{
	return c->tx_copy + c->tx_rdma_read + c->tx_rdma_write;
}

static inline uint64_t sw_stats_rx_san(const struct sw_conn_stats *c)
{
	return c->rx_copy + c->rx_rdma_read + c->rx_rdma_write;
}

struct sw_conn_stats *sw_stats_conn_new(void);
void sw_stats_conn_free(struct sw_conn_stats *c);
struct sw_proc_stats *sw_stats_proc(void);
void sw_stats_init(void);
/* Adds to a counter; cheap, not atomic across threads of one connection
 * (each connection is locked by its owner). */
#define SW_STAT_ADD(c, field, n) do { if (c) (c)->field += (n); } while (0)

#endif /* SDP_STATS_H */
