/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * reupgrade.c - a connection returned to TCP for a change of hands (fork,
 * SCM_RIGHTS) is upgraded again once one process holds it: a new provider
 * connection and the SETUP and SWITCH exchange of the first upgrade, with
 * each side's TCP bytes counted by the kernel from its downgrade marker,
 * so that bytes other processes moved meanwhile are counted too
 * (docs/protocol.md 2.8). Nothing travels on TCP for it.
 */
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/ioctl.h>

#include "config.h"
#include "connect.h"
#include "fork_exec.h"
#include "holders.h"
#include "log.h"
#include "reupgrade.h"
#include "sock.h"
#include "sys.h"
#include "upgrade_turns.h"
#include "util.h"

/* struct tcp_info (linux/tcp.h): tcpi_bytes_acked and tcpi_bytes_received,
 * which glibc's copy of the structure may not have */
#define TI_BYTES_ACKED 120
#define TI_BYTES_RECEIVED 128
#define TI_MIN_LEN 136

/* The first upgrade again at least this long after the downgrade, then
 * four times as long after each one (a connection passed back and forth
 * is not upgraded at every pass), at most REUP_MAX_NS. */
#define REUP_FIRST_NS 1000000ull
#define REUP_MAX_NS 16000000000ull

int sw_tcp_counts(int fd, uint64_t *written, uint64_t *read)
{
	uint8_t ti[256];
	socklen_t len = sizeof(ti);
	uint64_t acked, rcvd;
	int outq = 0, inq = 0;

	memset(ti, 0, sizeof(ti));
	if (sdp_sys.getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len))
		return -errno;
	if (len < TI_MIN_LEN)
		return -EOPNOTSUPP;
	/* a FIN either way counts as a byte; no upgrade then anyway */
	if (ti[0] != TCP_ESTABLISHED)
		return -ENOTCONN;
	if (sdp_sys.ioctl(fd, SIOCOUTQ, &outq) ||
	    sdp_sys.ioctl(fd, SIOCINQ, &inq))
		return -errno;
	memcpy(&acked, ti + TI_BYTES_ACKED, sizeof(acked));
	memcpy(&rcvd, ti + TI_BYTES_RECEIVED, sizeof(rcvd));
	/* sent and acknowledged, plus not yet; arrived, less not yet read.
	 * An active opener's count also holds its SYN: the difference of
	 * two counts (from a marker on) never does. */
	*written = acked + (uint64_t)outq;
	*read = rcvd - (uint64_t)inq;
	return 0;
}

void sw_reup_tx_base(struct sw_sock *s)
{
	uint64_t rd;

	if (sw_tcp_counts(s->fd, &s->dg_tx_base, &rd))
		s->reup_never = true;
	SW_DBG("fd %d: our marker out at %llu", s->fd,
	       (unsigned long long)s->dg_tx_base);
}

void sw_reup_rx_base(struct sw_sock *s, bool ok)
{
	uint64_t wr;

	if (!ok || sw_tcp_counts(s->fd, &wr, &s->dg_rx_base))
		s->reup_never = true;
	else
		s->dg_rx_based = true;
	SW_DBG("fd %d: the peer's marker read at %llu", s->fd,
	       (unsigned long long)s->dg_rx_base);
}

void sw_reup_arm(struct sw_sock *s)
{
	uint64_t wait = REUP_FIRST_NS << (2 * (s->reup_n < 8 ? s->reup_n : 8));

	if (wait > REUP_MAX_NS)
		wait = REUP_MAX_NS;
	if (!sw_cfg.reupgrade) {
		s->reup_never = true;
		return;
	}
	s->reup = true;
	s->reup_at_ns = sw_now_ns() + wait;
}

/* Everything of the last upgrade's that says where the stream was. */
static void begin(struct sw_sock *s, uint64_t tx, uint64_t rx)
{
	uint64_t now = sw_now_ns();

	s->tcp_tx = tx;
	s->tcp_rx = rx;
	s->tcp_rx_limit = SW_NO_LIMIT;
	s->tx_san = s->rx_san = false;
	s->connect_tries = 0;
	s->key_refused = false;
	s->nap_ms = 0;
	s->turn_look_ns = 0;
	s->turn_woken = s->turn_ready = false;
	s->upgrade_at_ns = now;
	s->deadline_ns = now + (uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull;
	s->fb_reason = SDP_FB_NONE;
	/* the hellos went long ago: none goes again */
	s->hello_got = sizeof(s->hello_buf);
	s->state = SW_UPGRADING;
	s->reup = false;
	s->reup_n++;
	if (s->st) {
		s->st->state = SW_UPGRADING;
		s->st->fb_reason = SDP_FB_NONE;
	}
	SW_DBG("fd %d: held by this process alone: upgraded again (%llu and %llu bytes on TCP since the downgrade)",
	       s->fd, (unsigned long long)tx, (unsigned long long)rx);
	sw_event(s);
	/* in line for a turn, as after the hellos of a first upgrade; the
	 * steps follow as there (upgrade.c) */
	sw_turn_take(s, true);
}

void sw_reup_maybe(struct sw_sock *s)
{
	uint64_t wr, rd;
	int alone;

	if (s->state != SW_TCP || !s->reup || s->reup_never || s->closed ||
	    sw_now_ns() < s->reup_at_ns)
		return;
	/* a call in the kernel would take or add bytes nobody counts */
	if (atomic_load(&s->users) != 1)
		return;
	/* what is left of the last session, and of the peer's marker */
	if (s->dg_marker || !s->dg_rx_based || s->skip_hello ||
	    s->prefix_len || s->ptx_len || s->tcp_eof ||
	    (s->fork_buf && s->fork_buf->off < s->fork_buf->len))
		return;
	alone = sw_holders_reup(s);
	if (alone < 0)
		s->reup_never = true;
	if (alone <= 0)
		return;
	if (sw_tcp_counts(s->fd, &wr, &rd) || wr < s->dg_tx_base ||
	    rd < s->dg_rx_base) {
		s->reup_never = true;
		return;
	}
	SW_DBG("fd %d: counts %llu/%llu bases %llu/%llu", s->fd,
	       (unsigned long long)wr, (unsigned long long)rd,
	       (unsigned long long)s->dg_tx_base,
	       (unsigned long long)s->dg_rx_base);
	begin(s, wr - s->dg_tx_base, rd - s->dg_rx_base);
}
