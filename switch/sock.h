/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sock.h - struct sw_sock, the switch's per-socket object, with its session
 * (struct sw_session) and states; its life is in sock.c.
 */
#ifndef SW_SOCK_H
#define SW_SOCK_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fallback.h"
#include "sdp_loader.h"
#include "sdp_switch.h"
#include "spin.h"
#include "stats.h"

#include "sys.h"
#include "wire.h"

/* Threads of one process that may sleep on one socket at once, each woken
 * by the others' news (wakeup.c); one more sleeps with a bound. */
#define SW_SIB_MAX 4

#define SW_MAX_PROVIDERS 4

#define SW_MAX_BUFS 64

/* One registered control buffer. */
struct sw_buf_slot {
	uint8_t *mem;
	struct sdp_mr *mr;
};

/* enum sw_state, the published connection states, is in stats.h. */

/* A received piece of the byte stream, queued until the program reads it. */
enum rx_kind { RX_INLINE, RX_STAGING, RX_REMOTE, RX_DOWNGRADE, RX_XSLOT,
	       RX_SPILL };

struct rx_item {
	struct rx_item *next;
	enum rx_kind kind;
	uint32_t buf;		/* INLINE: receive buffer index */
	uint8_t *mem;		/* SPILL: our copy of an INLINE item's bytes,
				 * its buffer given back (session_rx.c) */
	uint32_t xfer_id;	/* REMOTE: transfer to acknowledge;
				 * XSLOT: the offer's sequence number */
	uint64_t off;		/* INLINE: offset in buffer; STAGING: ring
				 * offset; REMOTE, XSLOT: offset in region;
				 * SPILL: offset in mem */
	uint64_t len;		/* bytes left */
	struct sdp_rdma_desc desc; /* REMOTE */
	bool no_push;		/* XSLOT: the sender left a push request
				 * unanswered: it lent the offer and
				 * returned (sendfile); pull it all */
};

/* One offer in our transfer slot (xslot.c): made, then ended when the
 * receiver took it all or the sender took the rest back. A lent one (a
 * sendfile's file pages) outlives the call that made it. */
struct sw_xoffer {
	uint8_t *p;
	size_t len;		/* 0: none */
	uint32_t seq;
	struct sdp_mr *mr;
	struct sdp_rmr *rmr;
	void *map;		/* lent: the file mapping, unmapped at the end */
	size_t map_len;
};

struct sw_session {
	struct sw_provider *prov;
	struct sdp_cq *cq;
	struct sdp_ep *ep;
	bool connected;		/* the provider connection is up */
	bool setup_sent;	/* our SETUP is out */
	bool setup_rcvd;
	bool switch_rcvd;	/* the peer's SWITCH: its switch point known */
	bool peer_knows_switch;	/* the peer took our SWITCH (its messages
				 * say so): doorbells are safe on any wire */
	bool switch_bell;	/* ring with our first stream message after
				 * SWITCH: the peer may sleep on TCP */

	/* control buffers (buffers.c), each registered on its own so that
	 * memory can be given back when credits shrink */
	uint32_t msg_size;	/* our receive buffer size */
	uint32_t peer_msg_size;	/* the peer's: our largest send */
	struct sw_buf_slot rslot[SW_MAX_BUFS]; /* receive: present if mem */
	uint8_t recv_held[SW_MAX_BUFS];	/* 1 while its data is queued */
	uint32_t nrecv;		/* receive buffers present */
	struct sw_buf_slot sslot[SW_MAX_BUFS]; /* send: allocated on demand */
	uint8_t send_busy[SW_MAX_BUFS];	/* 1 while a send is pending */
	uint32_t sends_pending;		/* how many of send_busy are 1 */
	uint32_t nsend;		/* send slots present */
	uint32_t send_next;
	/* a message of ours waits for a send slot (its provider's sends
	 * are pending): the progress of that wait sends nothing else, which
	 * would take the credit the waiting message was allowed to use */
	uint32_t send_waiting;
	uint64_t last_rx_ns;	/* last message that carried data */

	/* credit deltas (credits.c) */
	uint32_t release_expect;	/* receiver: releases still to come */
	uint32_t release_free;		/* receiver: of those, buffers to free */
	bool revoke_pending;		/* receiver: staging goes at release */
	bool staging_dead;		/* receiver: free staging once read */
	uint32_t release_owed;		/* sender: releases still to send */
	bool big;			/* holds more than an idle one */
	bool grow_wanted;		/* data arrived with the peer short */
	bool lone_return;		/* data came since our last lone
					 * buffer return (credits.c) */
	uint32_t release_drop;		/* sender: credits they give up */
	bool updating;			/* in sw_credit_maybe_update */

	/* credits (credits.c) */
	int32_t credits;	/* peer receive buffers we may fill */
	uint32_t credits_owed;	/* our reposted buffers not yet announced */
	int32_t peer_credits;	/* our view of the peer's credits */
	uint32_t peer_nrecv;	/* receive buffers the peer posts */

	/* control messages owed to the peer, sent when credits allow */
	bool xfer_ack_pending;
	uint32_t xfer_ack_id;
	uint64_t xfer_ack_bytes;
	bool fin_pending;

	/* sequence numbers */
	uint32_t tx_seq, rx_seq;

	/* receive queue */
	struct rx_item *rxq, *rxq_tail;
	uint64_t rx_queued;	/* bytes queued */
	uint64_t rx_spilled;	/* of which in RX_SPILL items */
	struct rx_item *rx_free;

	/* our staging ring (target of the peer's WDATA) */
	uint8_t *staging;
	size_t staging_len;
	struct sdp_rmr *staging_rmr;
	struct sdp_rdma_desc staging_desc;
	uint64_t staging_recv_head;	/* bytes announced by WDATA in total */
	uint64_t staging_consumed;	/* bytes the program read in total */
	uint64_t staging_freed_unsent;

	/* the peer's staging ring (target of our WDATA) */
	struct sdp_rdma_desc peer_staging;
	uint64_t peer_staging_head;	/* bytes written in total */
	uint64_t peer_staging_freed;	/* bytes freed by the peer in total */

	/* transfer slots (SharedArea; xslot.c) */
	struct sdp_xslot *xs_mine;	/* ours: we offer in it */
	struct sdp_xslot *xs_peer;	/* the peer's: we claim in it */
	bool peer_xslot;		/* the peer takes XOFFER */
	bool peer_takes_xoffer;		/* its SETUP said so */
	uint32_t xs_seq;		/* our last offer */
	bool xs_dropped;		/* an offer ended unread (xslot.c) */
	uint32_t xs_backoff;		/* large sends left without offers */
	uint8_t xs_nap_missed_tx;	/* claims of ours ended unwoken */
	uint8_t xs_nap_missed_rx;	/* pushes to us ended unwoken */
	struct sw_xoffer lend;		/* our offer a sendfile left lent */
	uint32_t lend_backoff;		/* sendfile calls left without lends */
	/* the peer's offer pulled ahead of small reads (session_rx.c):
	 * bytes [ahead_at, ahead_at + ahead_len) of offer ahead_seq */
	uint8_t *ahead;
	uint64_t ahead_at;
	size_t ahead_len;
	uint32_t ahead_seq;

	bool peer_can_read;	/* peer can RdmaRead: RDATA allowed */
	bool can_read;		/* our provider offers RdmaRead */
	bool write_staged;	/* our RdmaWrite costs an extra copy */
	bool offer_read;	/* SETUP invites the peer's RDATA */
	size_t staging_size;	/* our staging ring's size when offered */
	size_t wdata_piece;	/* largest RDMA write into the peer's ring */

	/* wake-ups */
	uint32_t tx_news_seq;	/* tx_seq after our last message that is
				 * news to the peer (anything but WAKE_ME and
				 * a CREDIT to a peer that was not short) */
	bool peer_waiting;	/* peer sleeps waiting for data: RDATA pays */
	bool peer_wants_wake;	/* peer asked for a doorbell */
	bool wake_armed;	/* we asked the peer for one */
	bool bell_unasked;	/* a doorbell came that we had not asked
				 * for: the peer may want its buffers back
				 * (credits.c, sw_credit_on_bell) */
	bool quiet_return;	/* the CREDIT being sent answers such a
				 * doorbell: it rings none of its own */
	bool wake_refund;	/* the peer's last WAKE_ME took one of our
				 * buffers: returning that one is no news */
	uint32_t ask_rx_seq;	/* rx_seq at our last such doorbell */
	uint64_t ask_ns;	/* and when it went */

	/* outstanding RDATA we sent */
	uint32_t next_xfer_id;
	uint32_t xfer_wait_id;
	uint64_t xfer_wait_len;		/* its length */
	bool xfer_done;
	uint64_t xfer_done_bytes;	/* XFER_DONE: bytes the receiver took */

	/* RDMA op completion (PENDING ones) */
	uint64_t rdma_ctx_next;
	uint64_t rdma_ctx_done;
	int rdma_status;
	bool rdma_waiting;	/* in sw_rdma_wait: a PENDING op finishes
				 * with the peer's progress (shm staging),
				 * told by the provider's CQ, not TCP */

	/* return to TCP (downgrade.c) */
	bool dg_sent;		/* our data goes on TCP now */
	bool dg_rcvd;		/* the peer's DOWNGRADE arrived */
	/* a message of ours is being made (its progress calls may take
	 * the peer's DOWNGRADE): ours waits, so that it never precedes a
	 * message begun before it */
	uint32_t dg_hold;

	/* end of stream */
	bool fin_rcvd, fin_sent, abort_rcvd, peer_dead;
	bool peer_fin;		/* the peer's FIN came (fin_rcvd is
				 * also set by this side's SHUT_RD) */
	int error;		/* sticky error (protocol violation etc.) */
	uint8_t oob_byte;
	bool oob_valid;
};

struct sw_sock {
	pthread_mutex_t lock;
	atomic_int refs;
	struct sw_sock *list_next, *list_prev; /* all sockets (sock.c) */
	int fd;			/* the program's TCP fd */
	int family;
	enum sw_state state;
	bool nonblock;
	bool is_client;
	bool closed;
	bool tcp_eof;		/* TCP gave EOF or an error (peer gone) */
	uint64_t tcp_eof_ns;	/* when tcp_eof was first seen */
	bool dg_marker;		/* TCP: doorbells, then the peer's downgrade
				 * marker, precede its data */
	struct sw_fork_buf *fork_buf; /* data that arrived on the SAN before a
				 * fork, shared by parent and child */
	int exec_buf_fd;	/* the memfd under fork_buf made before an
				 * exec, for the new program, or -1 */
	struct sw_holders *holders; /* a pending upgrade kept across fork:
				 * who holds the connection (holders.c) */
	int holders_fd;		/* the file under holders, kept for a
				 * program exec'd on the connection, or -1
				 * (read with __atomic_load_n: ownfd.h) */
	/* upgraded again after a downgrade (reupgrade.c): the kernel's
	 * counts of our bytes and the peer's at the downgrade markers, and
	 * when it may be */
	uint64_t dg_tx_base, dg_rx_base;
	bool dg_rx_based;	/* the peer's marker was read */
	bool reup;		/* a downgrade completed: may upgrade again */
	bool reup_never;	/* something of it cannot be known */
	bool sight_lost;	/* its I/O may go through stdio, or it sends
				 * with MSG_ZEROCOPY: TCP for good (blind.c) */
	bool zc_off;		/* the kernel said SO_ZEROCOPY is off
				 * (api_ctl.c, sw_zerocopy_send) */
	bool inq_known, inq_on;	/* TCP_INQ as the kernel said (sw_inq_cmsg) */
	bool std_seen;		/* was on fd 0, 1 or 2 (sw_sock_to_std) */
	bool std_off;		/* and is no longer */
	bool io_unseen;		/* some of its TCP bytes went past the
				 * switch: counted by the kernel before a
				 * pending upgrade commits (blind.c) */
	uint64_t std_look_ns;	/* when to look at 0, 1 and 2 again */
	uint32_t reup_n;	/* upgrades again so far (back-off) */
	uint64_t reup_at_ns;
	uint64_t holders_look_ns;	/* the next look for live holders */
	bool linger0;		/* SO_LINGER with 0: abort on close */
	uint64_t linger_ns;	/* SO_LINGER with a time: close waits */
	/* closed with bytes or its FIN still to go: the flusher sends them
	 * (orphan.c); fd is then the switch's own copy of the TCP fd */
	bool orphan;
	bool orphan_ended;	/* its session and fd are gone */
	int orphan_prog_fd;	/* the number the program closed (logs) */
	uint64_t orphan_moved_ns; /* when it last made progress */
	size_t orphan_kept;	/* ptx_len then */
	int32_t orphan_credits;	/* credits then */
	uint32_t orphan_sends;	/* sends the provider held then */
	bool orphan_peer_here;	/* at exit or exec: its peer's end is in
				 * this process, which will read no more */
	bool rule_tcp;		/* listener a rule keeps on TCP */
	uint64_t quiet_ns;	/* listener: when its provider listeners
				 * closed for io_uring (blind.c); a client
				 * that saw them may still connect */
	bool fd_shed;		/* listener: its provider listeners went
				 * back for the program's descriptors (and
				 * a connection it accepted since) */
	int fb_reason;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	uint16_t local_port;

	/* upgrade (listen.c, connect.c, upgrade.c, tcp_inband.c) */
	uint8_t key[16];
	uint8_t hello_buf[sizeof(struct sdp_hello)];
	size_t hello_got;
	/* TCP bytes read while looking for a hello that were the program's:
	 * hello_buf[prefix_off, prefix_len) is delivered before the socket */
	size_t prefix_off, prefix_len;
	struct sdp_listener *plisten[SW_MAX_PROVIDERS];
	/* listener: when probes were last drained, and whether that found
	 * any (listen.c drain_probes) */
	uint64_t drained_ns;
	bool drain_found;
	uint64_t deadline_ns;	/* client: the server's provider connection
				 * is given up after this; server: its
				 * connect is tried no more after this */
	uint64_t born_ns;	/* client: when connect() made it */
	uint32_t cand_provs;	/* client: providers that see a switch at
				 * the peer (bits): its listeners' */
	uint32_t connect_tries;	/* server: connects refused so far */
	bool key_refused;	/* client: a provider connection without
				 * this connection's key was refused */
	struct sw_provider *up_prov; /* server: the provider chosen */
	uint32_t lsn_provs;	/* server: providers its listener has (bits) */
	bool spoke_first;	/* server: its program wrote before the
				 * client's hello came (which must come
				 * within SDP_UPGRADE_TIMEOUT_MS then);
				 * client: the server's bytes or connect
				 * came, so its stream holds no hello */
	uint64_t spoke_first_ns; /* server: since then */
	bool skip_hello;	/* TCP: the peer's stream may start with its
				 * hello (sw_hello_skip) */
	char exec_item[128];	/* before exec: the environment entry of a
				 * pending upgrade kept for the new program
				 * (exec_reup.c), or "" */
	bool exec_hello_wait;	/* that upgrade waited for the client's
				 * hello: dropped here should exec fail */
	bool exec_skip;		/* managed after exec only to drop that
				 * hello (sw_sock_inherit) */
	int tok_fd;		/* the name of this connection's client
				 * hello (hello_token.c), or -1 */
	bool tok_kept;		/* tok_fd moved out of the program's way */
	uint64_t upgrade_at_ns;	/* server: its connection is made then
				 * (again, after a refusal) */

	/* the program's bytes on TCP before each side's switch point
	 * (tcp_head.c; docs/protocol.md 2.5), counted after the hellos */
	uint64_t tcp_tx;	/* ours, sent */
	uint64_t tcp_rx;	/* the peer's, read */
	/* the program's calls that moved bytes on TCP before the switch
	 * points, and how often their direction changed (a request
	 * answered is one change, the next request another): signs that
	 * the connection lives on (sw_upgrade_lively) */
	uint32_t head_calls;
	uint32_t head_turns;
	int8_t head_dir;	/* 1: the last such call sent, -1: read */
	uint64_t tcp_rx_limit;	/* the peer's switch point (SW_NO_LIMIT
				 * until its SWITCH) */
	bool tx_san;		/* SWITCH sent: our bytes go on the SAN */
	bool rx_san;		/* all the peer's TCP bytes read: its bytes
				 * come from the SAN */
	/* a fork's or exec's downgrade (fork_exec.c), in thread
	 * rx_held_by, is taking the peer's SAN bytes aside: no other thread
	 * delivers any until they are in fork_buf, in order */
	bool rx_held;
	pthread_t rx_held_by;
	uint32_t nap_ms;	/* a sleep's bound while only looking sees the
				 * next step (sw_upgrade_nap_ms) */
	/* its turn among the process's pending upgrades (upgrade_turns.c):
	 * SW_TURN_NONE, _WAITING (queued) or _HELD; changed under the turns'
	 * lock */
	_Atomic int turn;
	/* the upgrade thread's own: when it next looks at s while s waits
	 * on its listeners (0: at its next pass), and whether they woke */
	uint64_t turn_look_ns;
	/* its looks at a handshake step no descriptor tells of: the gap
	 * to the next (short after each step, longer while nothing moves),
	 * and the step it saw last */
	uint64_t turn_gap_ns;
	uint32_t turn_stage;
	bool turn_woken;
	/* a server's connection in line: near enough to its head that the
	 * client's listener may be due (sw_upgrade_client_ready's clock) */
	bool turn_clock;
	bool turn_ready;	/* server: its client listens: next turn */

	/* session (when state == SW_SAN or SW_UPGRADING) */
	struct sw_session ss;

	/* small sends kept back to coalesce (session_tx.c) */
	uint8_t *ptx;
	size_t ptx_len, ptx_cap;
	/* coalescing (session_tx.c, flusher.c): when the oldest byte kept
	 * back was kept (0: none is), whether the flusher watches s (under
	 * lock), and when the flusher looks again at bytes it could not send */
	_Atomic uint64_t ptx_since_ns;
	bool flush_listed;
	_Atomic uint64_t flush_retry_ns;

	_Atomic uint64_t event_seq;
	/* sends that found no room (EAGAIN), as the kernel's SOCK_NOSPACE:
	 * the next room is an edge-triggered EPOLLOUT (shim/epoll.c) */
	_Atomic uint64_t nospace_seq;
	/* the program's SO_RCVLOWAT (also set on the TCP fd); 0: 1 */
	_Atomic int rcvlowat;
	/* busy-poll budget of the blocking calls on s (spin.c) */
	struct sw_spin spin;
	/* threads inside a data call on s: with more than one, a thread
	 * may take the doorbell another sleeps for, so sleeps are short */
	atomic_int users;
	/* threads between arming a sleep on the TCP fd and waking from it
	 * (poll, select, blocking calls): a doorbell is left in place for
	 * them, so that no thread takes the one another sleeps for */
	atomic_int sleepers;
	/* the eventfds of those sleepers, as fd + 1 (0: free), so that the
	 * thread that takes news for the socket wakes the others (wakeup.c);
	 * under lock */
	int sib_fd1[SW_SIB_MAX];
	struct sw_conn_stats *st;
};

/* A new socket object in state, with one reference (sock.c). */
struct sw_sock *sw_sock_new(int fd, enum sw_state state);

/* Closes the provider listeners s holds (listener or pending client). */
void sw_listeners_close(struct sw_sock *s);

/* s->peer filled (getpeername once, for an accepted connection); false
 * when the kernel cannot tell (fallback.c). */
bool sw_peer_known(struct sw_sock *s);

#define SW_NO_LIMIT UINT64_MAX

/* A connection whose upgrade has not reached SW_SAN and TCP. */
static inline bool sw_pending(const struct sw_sock *s)
{
	return s->state == SW_CONNECTING || s->state == SW_HELLO_SENT ||
	       s->state == SW_UPGRADING || s->state == SW_HELLO_PENDING ||
	       s->state == SW_HELLO_WAIT;
}

/* Is another thread (a fork's downgrade) taking the peer's SAN bytes
 * aside (s locked)? Then no byte of the peer's, its DOWNGRADE included,
 * is this thread's to take. */
static inline bool sw_rx_held_elsewhere(const struct sw_sock *s)
{
	return s->rx_held && !pthread_equal(s->rx_held_by, pthread_self());
}

/* No byte of the program's can be read yet: the peer's hello comes first. */
static inline bool sw_hello_ahead(const struct sw_sock *s)
{
	return s->state == SW_CONNECTING || s->state == SW_HELLO_SENT ||
	       s->state == SW_HELLO_PENDING || s->state == SW_HELLO_WAIT;
}

/* Every managed socket of the process (fork, exec). */
int sw_sock_list(struct sw_sock ***out);

/* Locks s at exit, where another thread of the program may still be
 * inside a call on it (exit does not stop the others): waits for it until
 * deadline (sw_now_ns); false when s stayed locked. */
bool sw_sock_lock_by(struct sw_sock *s, uint64_t deadline);
/* A forked child: the statistics records of sockets the program closed
 * (the parent's orphans, or kept by a reference a while) leave the
 * child's copy of the file. */
void sw_sock_child_stats(void);

/* fork (pthread_atfork, after every other prepare handler and before every
 * other child handler): the socket list stays locked across the fork, and
 * the child's copy of every socket's lock is initialised anew. */
void sw_sock_atfork_prepare(void);
void sw_sock_atfork_parent(void);
void sw_sock_atfork_child(void);

/* Do the kernel's send calls (sendfile, splice) carry the program's bytes
 * as they are? Plain TCP, or a connect still under way. */
static inline bool sw_tx_by_kernel(const struct sw_sock *s)
{
	return s->state == SW_TCP || s->state == SW_CONNECTING;
}

static inline bool sw_nonblocking(struct sw_sock *s, int flags)
{
	return s->nonblock || (flags & MSG_DONTWAIT);
}

static inline void sw_event(struct sw_sock *s)
{
	atomic_fetch_add_explicit(&s->event_seq, 1, memory_order_relaxed);
}

/* The peer's address as text, for logs (fallback.c). */
void sw_peer_text(const struct sw_sock *s, char *buf, size_t len);

#endif /* SW_SOCK_H */
