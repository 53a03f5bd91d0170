/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * stats.h - the statistics a process publishes for sdp-stat: a file named
 * sdp-stat.<pid> in $SDP_STAT_DIR, else in the per-user directory
 * /dev/shm/sdp-stat-<uid>/, mapped shared, with process counters, the
 * connection states and one slot per connection. The layout is versioned;
 * every reader (tools/sdp_stat.c, the tests) uses this header.
 */
#ifndef SDP_STATS_H
#define SDP_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <unistd.h>

#define SW_STATS_MAGIC 0x53445053u /* "SPDS" */
#define SW_STATS_VERSION 4
/* 10,000 idle connections per process must each get a slot. The file
 * holds only the slots handed out so far: it grows by SW_STATS_GROW bytes
 * of slots at a time, each allocated before it is used (nslots counts the
 * slots the file holds). */
#define SW_STATS_SLOTS 16384
#define SW_STATS_GROW (64 * 1024)
#define SW_STATS_FB_MAX 32

/* Where the files are when $SDP_STAT_DIR is not set: one directory per
 * user, mode 0700, so no other user can read or plant anything there. */
#define SW_STATS_ROOT "/dev/shm"
#define SW_STATS_USER_DIR "sdp-stat-"

/*
 * The state of a connection. The program's bytes travel on TCP in every
 * state but SW_SAN; there, ours go on the SAN, and the peer's come from TCP
 * until its switch point. Values are published: append only.
 */
enum sw_state {
	SW_LISTENER,	/* TCP listener with provider listeners beside it */
	SW_TCP,		/* plain TCP: fallen back or downgraded */
	SW_CONNECTING,	/* client: TCP connect in progress */
	SW_HELLO_SENT,	/* client: hello sent; the server's is awaited */
	SW_UPGRADING,	/* provider connection and SETUPs under way */
	SW_SAN,		/* SWITCH sent: our bytes go on the SAN */
	SW_HELLO_PENDING, /* client: connected; the hello goes with the
			 * program's first bytes or its first read */
	SW_HELLO_WAIT,	/* server: accepted; the client's hello (or the
			 * program's bytes) will tell */
	SW_NSTATES
};

/* The name sdp-stat prints for a state. */
static inline const char *sw_state_name(uint32_t s)
{
	static const char *const names[SW_NSTATES] = {
		[SW_LISTENER] = "LISTENER",
		[SW_TCP] = "TCP",
		[SW_CONNECTING] = "CONNECTING",
		[SW_HELLO_SENT] = "HELLO_SENT",
		[SW_UPGRADING] = "UPGRADING",
		[SW_SAN] = "SAN",
		[SW_HELLO_PENDING] = "HELLO_PENDING",
		[SW_HELLO_WAIT] = "HELLO_WAIT",
	};

	return s < SW_NSTATES ? names[s] : "UNKNOWN";
}

/* The directory a process's file is in: $SDP_STAT_DIR, else the user's
 * own directory under /dev/shm. */
static inline void sw_stats_dir(char *buf, size_t len)
{
	const char *d = getenv("SDP_STAT_DIR");

	if (d && *d)
		snprintf(buf, len, "%s", d);
	else
		snprintf(buf, len, "%s/%s%u", SW_STATS_ROOT,
			 SW_STATS_USER_DIR, (unsigned int)geteuid());
}

/* The path of process pid's file. */
static inline void sw_stats_path(char *buf, size_t len, int pid)
{
	char dir[256];

	sw_stats_dir(dir, sizeof(dir));
	snprintf(buf, len, "%s/sdp-stat.%d", dir, pid);
}

struct sw_conn_stats {
	uint32_t in_use;	/* 1 while the connection lives */
	int32_t fd;
	uint32_t state;		/* enum sw_state */
	uint32_t fb_reason;	/* enum sdp_fallback_reason, 0 = none */
	char provider[16];
	char peer[48];		/* "ip:port" */
	uint16_t local_port;
	uint16_t is_client;
	uint32_t flags;		/* SW_CONN_* */
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
	uint64_t sock_ino;	/* the socket's inode (SW_CONN_TCP_ONLY) */
};

/*
 * A connection the switch left on TCP before it managed it (a rule, no
 * switch at the peer, no provider): listed with its reason, but its bytes
 * never pass through the switch; sdp-stat asks the kernel for them
 * (sock_diag, by sock_ino) and hides the slot once that socket is gone.
 */
#define SW_CONN_TCP_ONLY 1u
/* How large receives came when the two ends may not each reach the other
 * (across users): the peer wrote whole offers into our buffers, since we
 * may not read it; or we pulled whole ones alone, with the copy spread
 * over our CPUs (SDP_RDMA_SPREAD), since it may not write us. */
#define SW_CONN_RX_PUSHED 2u
#define SW_CONN_RX_ALONE 4u

struct sw_proc_stats {
	uint32_t magic;
	uint32_t version;
	int32_t pid;
	uint32_t nslots;	/* slots the file holds now (it grows) */
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
/* A forked child's copy of a record that is not the child's: gone from
 * its file, its bytes not counted (they are the parent's). */
void sw_stats_conn_drop(struct sw_conn_stats *c);
struct sw_proc_stats *sw_stats_proc(void);
void sw_stats_init(void);
/* Why the process publishes no statistics ("" when it does). */
const char *sw_stats_off_reason(void);
/* Lists connection fd, left on TCP for reason before the switch managed
 * it; counts it. peer may be NULL (asked of the kernel). */
void sw_stats_tcp_only(int fd, int reason, bool client,
		       const struct sockaddr *peer, socklen_t peerlen);
/* Adds to a counter; cheap, not atomic across threads of one connection
 * (each connection is locked by its owner). */
#define SW_STAT_ADD(c, field, n) do { if (c) (c)->field += (n); } while (0)
/* Counts one in a process counter (conns_san, conns_tcp, fallbacks[]):
 * atomic, since connections of different threads fall back or are carried
 * at the same moment (two threads' connects to a plain server: a plain
 * ++ lost one of them now and then). */
#define SW_STAT_COUNT(ctr) __atomic_add_fetch(&(ctr), 1, __ATOMIC_RELAXED)

#endif /* SDP_STATS_H */
