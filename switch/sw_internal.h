/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sw_internal.h - the switch engine's shared state: the per-socket object,
 * the per-process globals (providers, settings), and the functions the
 * engine's files offer each other. Nothing outside switch/ includes this.
 */
#ifndef SW_INTERNAL_H
#define SW_INTERNAL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fallback.h"
#include "spin.h"
#include "sdp_loader.h"
#include "sdp_switch.h"
#include "stats.h"
#include "sys.h"
#include "wire.h"

#define SW_MAX_PROVIDERS 4
#define SW_MAX_BUFS 64

/* One registered control buffer. */
struct sw_buf_slot {
	uint8_t *mem;
	struct sdp_mr *mr;
};

/* ---- settings (config.c) -------------------------------------------------- */

enum sw_path_force { SW_PATH_AUTO, SW_PATH_COPY, SW_PATH_READ, SW_PATH_WRITE };

struct sw_config {
	int log_level;		/* 0 off .. 3 error .. 6 info .. 7 debug */
	unsigned spin_us;	/* busy-poll budget before sleeping: floor */
	unsigned spin_max_us;	/* ceiling of the adaptive budget (spin.c) */
	unsigned msg_size;	/* control message (receive buffer) size */
	unsigned recv_bufs;	/* receive buffers posted per busy connection */
	unsigned recv_bufs_idle; /* what an idle connection keeps */
	unsigned idle_ms;	/* quiet this long: give buffers back */
	unsigned send_bufs;	/* send buffers per connection */
	size_t rdma_min;	/* smallest send moved by RDMA instead of copy */
	size_t staging_size;	/* WDATA staging ring per connection */
	size_t staging_size_wire; /* the same, provider not local-only */
	size_t wdata_piece;	/* WDATA piece; 0: chosen per connection */
	size_t coalesce_max;	/* small sends kept while the peer is behind */
	unsigned coalesce_us;	/* kept bytes leave within this (flusher) */
	unsigned xslot;		/* 1: transfer slots where the provider can */
	unsigned xslot_nb_us;	/* non-blocking send: wait for a claim */
	unsigned xslot_block_us; /* blocking send: wait for a claim */
	size_t xslot_split;	/* a read this large is copied by both */
	unsigned xslot_claim_ms; /* a claim or a push may stand this long */
	unsigned upgrade_after_us;  /* provider connection once this old */
	size_t upgrade_after_bytes; /* ... or once this much went on TCP */
	unsigned upgrade_timeout_ms; /* the rest of an upgrade, once begun */
	enum sw_path_force path;
	char rules_file[256];
};
extern struct sw_config sw_cfg;

void sw_config_load(void);
/* Rules: 1 = SAN allowed, 0 = TCP only. role 'c' connect, 's' listen. */
int sw_rules_decide(char role, const struct sockaddr *addr);

/* ---- logging (log.c) -------------------------------------------------------- */

void sw_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define SW_ERR(...) sw_log(3, __VA_ARGS__)
#define SW_WARN(...) sw_log(4, __VA_ARGS__)
#define SW_INFO(...) sw_log(6, __VA_ARGS__)
#define SW_DBG(...) sw_log(7, __VA_ARGS__)

/* ---- providers (core.c) ------------------------------------------------------ */

struct sw_provider {
	struct sdp_module mod;
	int index;		/* position in sw_providers */
	bool usable;
};
extern struct sw_provider sw_providers[SW_MAX_PROVIDERS];
extern int sw_nproviders;
struct sw_provider *sw_provider_by_name(const char *name);

/* ---- per-socket state ----------------------------------------------------- */

/* enum sw_state is published: it is in stats.h */

/* A received piece of the byte stream, queued until the program reads it. */
enum rx_kind { RX_INLINE, RX_STAGING, RX_REMOTE, RX_DOWNGRADE, RX_XSLOT };
struct rx_item {
	struct rx_item *next;
	enum rx_kind kind;
	uint32_t buf;		/* INLINE: receive buffer index */
	uint32_t xfer_id;	/* REMOTE: transfer to acknowledge;
				 * XSLOT: the offer's sequence number */
	uint64_t off;		/* INLINE: offset in buffer; STAGING: ring
				 * offset; REMOTE, XSLOT: offset in region */
	uint64_t len;		/* bytes left */
	struct sdp_rdma_desc desc; /* REMOTE */
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
	uint64_t last_rx_ns;	/* last message that carried data */

	/* credit deltas (credits.c) */
	uint32_t release_expect;	/* receiver: releases still to come */
	uint32_t release_free;		/* receiver: of those, buffers to free */
	bool revoke_pending;		/* receiver: staging goes at release */
	bool staging_dead;		/* receiver: free staging once read */
	uint32_t release_owed;		/* sender: releases still to send */
	bool big;			/* holds more than an idle one */
	bool grow_wanted;		/* data arrived with the peer short */
	uint32_t release_drop;		/* sender: credits they give up */

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

	/* transfer slots (SharedArea; session_tx.c, session_rx.c) */
	struct sdp_xslot *xs_mine;	/* ours: we offer in it */
	struct sdp_xslot *xs_peer;	/* the peer's: we claim in it */
	bool peer_xslot;		/* the peer takes XOFFER */
	bool peer_takes_xoffer;		/* its SETUP said so */
	uint32_t xs_seq;		/* our last offer */
	bool xs_dropped;		/* an offer ended unread (session_rx.c) */
	uint32_t xs_backoff;		/* large sends left without offers */

	bool peer_can_read;	/* peer can RdmaRead: RDATA allowed */
	bool can_read;		/* our provider offers RdmaRead */
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

	/* outstanding RDATA we sent */
	uint32_t next_xfer_id;
	uint32_t xfer_wait_id;
	bool xfer_done;

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

	/* end of stream */
	bool fin_rcvd, fin_sent, abort_rcvd, peer_dead;
	int error;		/* sticky error (protocol violation etc.) */
	uint8_t oob_byte;
	bool oob_valid;
};

struct sw_sock {
	pthread_mutex_t lock;
	atomic_int refs;
	struct sw_sock *list_next, *list_prev; /* all sockets (core.c) */
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
	bool linger0;		/* SO_LINGER with 0: abort on close */
	bool rule_tcp;		/* listener a rule keeps on TCP */
	int fb_reason;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	uint16_t local_port;

	/* upgrade (upgrade.c) */
	uint8_t key[16];
	uint8_t hello_buf[sizeof(struct sdp_hello)];
	size_t hello_got;
	/* TCP bytes read while looking for a hello that were the program's:
	 * hello_buf[prefix_off, prefix_len) is delivered before the socket */
	size_t prefix_off, prefix_len;
	struct sdp_listener *plisten[SW_MAX_PROVIDERS];
	/* listener: when probes were last drained, and whether that found
	 * any (upgrade.c drain_probes) */
	uint64_t drained_ns;
	bool drain_found;
	uint64_t deadline_ns;	/* client: the server's provider connection
				 * is given up after this; server: its
				 * connect is tried no more after this */
	uint64_t born_ns;	/* client: when connect() made it */
	uint32_t cand_provs;	/* client: providers that see a switch at
				 * the peer (bits): its listeners' */
	uint32_t connect_tries;	/* server: connects refused so far */
	struct sw_provider *up_prov; /* server: the provider chosen */
	uint32_t lsn_provs;	/* server: providers its listener has (bits) */
	bool hello_out;		/* server: our hello went */
	bool skip_hello;	/* TCP: the peer's stream may start with its
				 * hello (sw_hello_skip) */
	uint64_t upgrade_at_ns;	/* server: its connection is made then
				 * (again, after a refusal) */

	/* the program's bytes on TCP before each side's switch point
	 * (tcp_head.c; docs/protocol.md 2.5), counted after the hellos */
	uint64_t tcp_tx;	/* ours, sent */
	uint64_t tcp_rx;	/* the peer's, read */
	uint64_t tcp_rx_limit;	/* the peer's switch point (SW_NO_LIMIT
				 * until its SWITCH) */
	bool tx_san;		/* SWITCH sent: our bytes go on the SAN */
	bool rx_san;		/* all the peer's TCP bytes read: its bytes
				 * come from the SAN */
	uint32_t nap_ms;	/* a sleep's bound while only looking sees the
				 * next step (sw_upgrade_nap_ms) */

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
	/* busy-poll budget of the blocking calls on s (spin.c) */
	struct sw_spin spin;
	/* threads inside a data call on s: with more than one, a thread
	 * may take the doorbell another sleeps for, so sleeps are short */
	atomic_int users;
	struct sw_conn_stats *st;
};

/* ---- core.c ----------------------------------------------------------------- */

struct sw_sock *sw_sock_new(int fd, enum sw_state state);
/* Closes the provider listeners s holds (listener or pending client). */
void sw_listeners_close(struct sw_sock *s);
/* s->peer filled (getpeername once, for an accepted connection); false
 * when the kernel cannot tell (fallback.c). */
bool sw_peer_known(struct sw_sock *s);
uint64_t sw_now_ns(void);
void sw_random(void *buf, size_t len);
/* Blocks until fd has events or timeout_ms passes (-1 = forever). */
int sw_wait_fd(int fd, short events, int timeout_ms);
/* Writes all of buf on a TCP fd (blocking as needed). */
int sw_tcp_write_all(int fd, const void *buf, size_t len);
#define SW_PTX_MAX (4 * 1024 * 1024)

/* ---- flusher.c ---------------------------------------------------------------- */

/* Has the flusher watch s, whose bytes are about to be kept back (called
 * with s->lock held; starts the thread the first time). Returns 0, or < 0
 * when no flusher can run: the bytes must not be kept. */
int sw_flusher_watch(struct sw_sock *s);

/* ---- fallback.c --------------------------------------------------------------- */

/* The only way into fallback: records and counts reason, logs it, frees the
 * upgrade or session resources. One-way. */
void sw_fallback(struct sw_sock *s, int reason, const char *detail);

/* ---- upgrade.c ------------------------------------------------------------------ */

#define SW_NO_LIMIT UINT64_MAX

/* A connection whose upgrade has not reached SW_SAN and TCP. */
static inline bool sw_pending(const struct sw_sock *s)
{
	return s->state == SW_CONNECTING || s->state == SW_HELLO_SENT ||
	       s->state == SW_UPGRADING || s->state == SW_HELLO_PENDING ||
	       s->state == SW_HELLO_WAIT;
}

/* No byte of the program's can be read yet: the peer's hello comes first. */
static inline bool sw_hello_ahead(const struct sw_sock *s)
{
	return s->state == SW_CONNECTING || s->state == SW_HELLO_SENT ||
	       s->state == SW_HELLO_PENDING || s->state == SW_HELLO_WAIT;
}

/* Takes the upgrade's next steps that need no waiting. Returns 0. */
int sw_upgrade_progress(struct sw_sock *s);
#define SW_NO_HELLO (-1001)
/* Sends our hello if it is due now, with the program's bytes in msg (NULL:
 * alone). Returns the program's bytes sent, -errno, or SW_NO_HELLO when no
 * hello is due (the caller sends as it would). */
ssize_t sw_upgrade_hello(struct sw_sock *s, const struct msghdr *msg,
			 int flags);
/* A plain read of the program's can take the peer's hello and the bytes
 * behind it in one go (sw_upgrade_read_hello). */
static inline bool sw_hello_read_merges(const struct sw_sock *s, int flags)
{
	return !(flags & (MSG_PEEK | MSG_OOB)) &&
	       ((s->state == SW_HELLO_WAIT && !s->is_client) ||
		(s->state == SW_HELLO_SENT && !s->hello_got));
}
#define SW_HELLO_OTHER (-1003)
ssize_t sw_upgrade_read_hello(struct sw_sock *s, struct msghdr *msg,
			      int flags, bool block);
/* TCP after a fallback: drops the peer's hello if its stream starts with
 * one. 0 when the program's bytes are next, -EAGAIN (!wait). */
int sw_hello_skip(struct sw_sock *s, bool wait);
/* Gives a pending upgrade up if that loses nothing (docs/protocol.md 2.5):
 * returns true when it is still pending (a committed server). */
bool sw_upgrade_cut(struct sw_sock *s);
/* Settles a pending upgrade for good before something it cannot follow
 * (shutdown, urgent data, fork, exec): gives it up while our SETUP is not
 * out, else waits (bounded, lock released while sleeping) for the switch.
 * Returns with the state SW_TCP or SW_SAN. */
void sw_upgrade_settle(struct sw_sock *s);
/* Takes the step the handshake allows now (after the provider connection
 * came up, a SETUP or a SWITCH arrived): our SETUP, or our SWITCH, after
 * which our bytes go on the SAN. Returns 0 or < 0 when a send failed. */
int sw_upgrade_step(struct sw_sock *s);
/* True while this side may still give the upgrade up without losing a byte
 * (docs/protocol.md 2.5): the client until the server's SETUP came, the
 * server until its own SETUP went. */
bool sw_upgrade_can_give_up(const struct sw_sock *s);
/* How long a sleep of the program may last before the switch looks again
 * at a pending upgrade (ms; growing while nothing changes), or 0: some of
 * the handshake's steps come with no wake-up (sw_upgrade_nap_ms). */
int sw_upgrade_nap_ms(struct sw_sock *s);

/* ---- tcp_head.c: the program's bytes on TCP before the switch points ---------- */

#define SW_HEAD_SWITCHED (-1000)	/* all the peer's TCP bytes are read */
/* Reads the peer's TCP bytes (never past its switch point), without
 * waiting: > 0 bytes, 0 at EOF, SW_HEAD_SWITCHED, or -errno (-EAGAIN). */
ssize_t sw_head_recv(struct sw_sock *s, struct msghdr *msg, int flags);
/* Sends on TCP and counts what went, without waiting: bytes or -errno. */
ssize_t sw_head_send(struct sw_sock *s, const struct msghdr *msg, int flags);
/* POLLIN for the program from the peer's TCP bytes (kernel_revents: the
 * kernel's report for the fd); SW_HEAD_SWITCHED when they are all read. */
int sw_head_readable(struct sw_sock *s, short kernel_revents);

/* ---- session.c (set-up, progress, dispatch) -------------------------------------- */

/* Sends our SETUP (buffers, staging ring, transfer slot). */
int sw_session_send_setup(struct sw_sock *s);
/* Sends WAKE_ME (the caller checked the credit). */
int sw_session_arm(struct sw_sock *s);
/* Posts every receive buffer: as soon as the endpoint exists. */
int sw_session_post_recvs(struct sw_sock *s);
/* The peer's buffer size and credits, from its hello. */
int sw_session_peer_params(struct sw_sock *s, uint32_t msg_size,
			   uint32_t recv_credits);
void sw_session_free(struct sw_sock *s);
/* Polls the CQ and handles what arrived. Returns < 0 on a fatal error. */
int sw_progress(struct sw_sock *s);
/* Sends one control message (header + body + payload from iov). */
int sw_send_ctrl(struct sw_sock *s, uint8_t type, const void *body,
		 size_t bodylen, const struct iovec *iov, int iovcnt,
		 size_t paylen);
/* Reads doorbells from the TCP fd; notes EOF. */
void sw_doorbell_drain(struct sw_sock *s);
/* True once the peer's stream has ended without more to come from the
 * provider: the provider reported the peer gone, or TCP ended and the
 * provider handed over nothing more for SW_EOF_GRACE_NS. */
bool sw_peer_ended(struct sw_sock *s);
void sw_doorbell_ring(struct sw_sock *s);
/* The first bytes after our switch point go now: wakes the peer once. */
void sw_switch_bell(struct sw_sock *s);
/* Across a wire, the CQ's notify fd, armed, for a sleep to watch besides
 * TCP (a doorbell can overtake the message it announces); -1 for a local
 * provider, whose messages are in place before its doorbells. */
int sw_cq_sleep_fd(struct sw_sock *s);
/* Waits (lock released) until progress may have happened: spins, then arms
 * wake-me and sleeps on the TCP fd. events: POLLIN or POLLOUT interest. */
int sw_session_wait(struct sw_sock *s, short events, uint64_t deadline_ns);
void sw_rx_item_free(struct sw_session *ss, struct rx_item *it);
struct rx_item *sw_rx_item_new(struct sw_session *ss);
/* Releases a receive buffer back to the provider (repost + credit owed). */
int sw_recv_repost(struct sw_sock *s, uint32_t idx);
uint8_t *sw_buf(struct sw_session *ss, uint32_t idx);

/* ---- buffers.c --------------------------------------------------------------- */

int sw_recv_slot_add(struct sw_sock *s, uint32_t idx);
void sw_recv_slot_drop(struct sw_sock *s, uint32_t idx);
/* A free send slot (allocating one if all are busy and room is left). */
int sw_send_slot_get(struct sw_sock *s, uint32_t *idx);
void sw_send_slots_trim(struct sw_sock *s, uint32_t keep);
void sw_bufs_free(struct sw_sock *s);
bool sw_sends_pending(const struct sw_session *ss);
/* Registered bytes this connection holds (buffers and staging). */
size_t sw_bufs_registered(const struct sw_session *ss);
int sw_staging_create(struct sw_sock *s);
void sw_staging_drop(struct sw_sock *s);
/* Waits for an RDMA operation that answered SDP_PENDING. */
int sw_rdma_wait(struct sw_sock *s, uint64_t ctx);

/* ---- downgrade.c ------------------------------------------------------------ */

/* Bytes received on the SAN before a fork, readable once by either process. */
struct sw_fork_buf {
	pthread_mutex_t lock;	/* process-shared */
	size_t len, off;
	size_t map_len;
	uint8_t data[];
};

/* Starts our side's return to TCP: DOWNGRADE message, then the marker. */
int sw_downgrade_start(struct sw_sock *s);
/* The rx queue reached the peer's DOWNGRADE: finish if both sides are done. */
void sw_downgrade_rx_point(struct sw_sock *s);
/* Reads from the fork buffer; returns bytes or 0 when it is empty. */
ssize_t sw_fork_buf_read(struct sw_sock *s, struct msghdr *msg, int flags);
/* TCP after a downgrade: skips doorbells and the peer's marker. */
int sw_dg_marker_skip(struct sw_sock *s, bool wait);
/* Every managed socket of the process (fork, exec). */
int sw_sock_list(struct sw_sock ***out);

/* ---- credits.c ------------------------------------------------------------------ */

/* Credits needed before sending a message of this type. */
bool sw_credit_can_send(struct sw_session *ss, uint8_t type);
/* POLLOUT for the program: credits and room in the peer's staging ring. */
bool sw_credit_writable(struct sw_session *ss);
void sw_credit_consume(struct sw_session *ss);
void sw_credit_returned(struct sw_session *ss, uint16_t n);
/* Called after reposting: sends a CREDIT message when enough is owed. */
int sw_credit_maybe_update(struct sw_sock *s);
/* Receiver: grows the buffers when the peer runs short, shrinks them (and
 * drops the staging ring) when the connection has been idle. */
void sw_credit_adapt(struct sw_sock *s);
/* Keeps the count of connections holding more than idle buffers. */
void sw_credit_note_size(struct sw_session *ss);
/* Handlers for CREDIT_DELTA and CREDIT_RELEASE. */
int sw_credit_on_delta(struct sw_sock *s, const struct sdp_msg_delta *d);
int sw_credit_on_release(struct sw_sock *s, uint32_t idx,
			 const struct sdp_msg_release *rl);
uint16_t sw_credit_take_owed(struct sw_session *ss);
/* Before this side sleeps: returns the buffers it owes (two or more). */
void sw_credit_return_owed(struct sw_sock *s);

/* ---- session_tx.c / session_rx.c ------------------------------------------------- */

ssize_t sw_session_send(struct sw_sock *s, const struct iovec *iov, int iovcnt,
			int flags);
ssize_t sw_session_recv(struct sw_sock *s, struct iovec *iov, int iovcnt,
			int flags);
/* Sends the bytes kept in s->ptx as far as credits allow, never waiting. */
int sw_ptx_flush(struct sw_sock *s);

static inline bool sw_nonblocking(struct sw_sock *s, int flags)
{
	return s->nonblock || (flags & MSG_DONTWAIT);
}

static inline void sw_event(struct sw_sock *s)
{
	atomic_fetch_add_explicit(&s->event_seq, 1, memory_order_relaxed);
}

#endif /* SW_INTERNAL_H */
