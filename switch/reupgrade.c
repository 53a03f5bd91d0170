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

#include "blind.h"
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

/* TCP_INFO of fd: its state and the two monotonic counts, 0 or -errno. */
static int tcp_info_counts(int fd, uint8_t *state, uint64_t *acked,
			   uint64_t *rcvd)
{
	uint8_t ti[256];
	socklen_t len = sizeof(ti);

	memset(ti, 0, sizeof(ti));
	if (sdp_sys.getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len))
		return -errno;
	if (len < TI_MIN_LEN)
		return -EOPNOTSUPP;
	*state = ti[0];
	memcpy(acked, ti + TI_BYTES_ACKED, sizeof(*acked));
	memcpy(rcvd, ti + TI_BYTES_RECEIVED, sizeof(*rcvd));
	return 0;
}

/*
 * The kernel gives each count in two halves by two calls: the bytes
 * acknowledged (TCP_INFO) and those not yet (SIOCOUTQ); the bytes arrived
 * (TCP_INFO) and those not yet read (SIOCINQ). An ACK or a segment that
 * lands between the two calls moves a byte from one half to the other
 * unseen, and the count is off by up to a segment: a SWITCH would then
 * name a switch point the peer's count never reaches (it waits for ever)
 * or has passed (the bytes after it are lost to the program). So each
 * ioctl is read between two TCP_INFOs and kept only when the monotonic
 * half did not move meanwhile (the other half moves only by the
 * program's own writes and reads, made under the lock the caller holds);
 * a peer or ACKs moving it every time cannot go on for long on an
 * established connection, and after COUNT_TRIES the count is not known.
 */
#define COUNT_TRIES 64

int sw_tcp_counts(int fd, uint64_t *written, uint64_t *read)
{
	uint64_t acked, rcvd, acked2, rcvd2;
	bool got_tx = false, got_rx = false;
	uint8_t state;
	int outq = 0, inq = 0, i, r;

	r = tcp_info_counts(fd, &state, &acked, &rcvd);
	for (i = 0; !r && i < COUNT_TRIES && !(got_tx && got_rx); i++) {
		/* a FIN either way counts as a byte; no upgrade then anyway */
		if (state != TCP_ESTABLISHED)
			return -ENOTCONN;
		if ((!got_tx && sdp_sys.ioctl(fd, SIOCOUTQ, &outq)) ||
		    (!got_rx && sdp_sys.ioctl(fd, SIOCINQ, &inq)))
			return -errno;
		r = tcp_info_counts(fd, &state, &acked2, &rcvd2);
		if (r)
			break;
		/* sent and acknowledged, plus not yet; arrived, less not
		 * yet read. An active opener's count also holds its SYN:
		 * the difference of two counts (from a marker on) never
		 * does. */
		if (!got_tx && acked2 == acked) {
			*written = acked + (uint64_t)outq;
			got_tx = true;
		}
		if (!got_rx && rcvd2 == rcvd) {
			*read = rcvd - (uint64_t)inq;
			got_rx = true;
		}
		acked = acked2;
		rcvd = rcvd2;
	}
	if (r)
		return r;
	if (state != TCP_ESTABLISHED)
		return -ENOTCONN;
	return got_tx && got_rx ? 0 : -EAGAIN;
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
	/* a process with I/O the switch cannot see never carries again,
	 * nor one in a seccomp sandbox (its filter may kill it for a
	 * provider's system call) */
	if (!sw_cfg.reupgrade || sw_blind() || sw_stepped_aside()) {
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
	/* the kernel's counts from the downgrade on: nothing unseen */
	s->io_unseen = false;
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
	int alone, r;

	if (s->state != SW_TCP || !s->reup || s->reup_never || s->closed ||
	    sw_now_ns() < s->reup_at_ns)
		return;
	if (sw_blind() || sw_stepped_aside()) {
		s->reup_never = true;
		return;
	}
	/* a call in the kernel would take or add bytes nobody counts */
	if (atomic_load(&s->users) != 1)
		return;
	/* what is left of the last session, and of the peer's marker */
	if (s->dg_marker || !s->dg_rx_based || s->skip_hello ||
	    s->prefix_len || s->ptx_len || s->tcp_eof ||
	    sw_fork_buf_unread(s))
		return;
	if (sw_upgrade_held(s))
		return;
	alone = sw_holders_reup(s);
	if (alone < 0)
		s->reup_never = true;
	if (alone <= 0)
		return;
	r = sw_tcp_counts(s->fd, &wr, &rd);
	if (r == -EAGAIN)
		return;	/* the counts kept moving: at a later call */
	if (r || wr < s->dg_tx_base || rd < s->dg_rx_base) {
		s->reup_never = true;
		return;
	}
	SW_DBG("fd %d: counts %llu/%llu bases %llu/%llu", s->fd,
	       (unsigned long long)wr, (unsigned long long)rd,
	       (unsigned long long)s->dg_tx_base,
	       (unsigned long long)s->dg_rx_base);
	begin(s, wr - s->dg_tx_base, rd - s->dg_rx_base);
}
