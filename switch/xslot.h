/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * xslot.h - the transfer slot: XOFFER, claim and drop (xslot.c).
 */
#ifndef SW_XSLOT_H
#define SW_XSLOT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

/* A read that found its offer taken back waits this long at most for the
 * bytes the sender sends instead at once: only a descheduled sender (a busy
 * machine) takes more than microseconds. */
#define SW_XSLOT_REFILL_NS (50 * 1000000ull)

/* Receiver: claims an offer and copies its part into dst. */
ssize_t sw_xslot_take(struct sw_sock *s, struct rx_item *it, uint8_t *dst,
		      size_t len, uint64_t skip, bool consume);

/* Receiver: an offer that ended before the program read all of it (the
 * sender took the rest back and sends it again). */
void sw_xslot_drop(struct sw_session *ss, struct rx_item *it,
		   struct rx_item **peek_it, uint64_t *peek_off);

/* Sender: sets whether the peer takes our offers (its SETUP, and what the
 * kernel lets each side do to the other), and says so in the debug log. */
void sw_xslot_decide(struct sw_sock *s);

/* Attaches the transfer slots in the provider's shared area, when it
 * has one (SharedArea extension). */
void sw_xslot_attach(struct sw_sock *s);

/* Sender: offers [p, p+len) in our slot until the receiver took it all:
 * the bytes it took (0: none, send them another way), or -errno. */
ssize_t sw_xslot_send(struct sw_sock *s, uint8_t *p, size_t len,
		      bool nb);

/*
 * A lent offer (sendfile): the file's pages stay offered after the call
 * returns, and the receiver copies them once, when its program reads.
 * Nothing of the stream may go after it until it ends (session_tx.c
 * sw_lend_settle): only then could the rest go again, in order.
 */
/* Sender: may a lend be made now (slot free, nothing kept back, a
 * credit for XOFFER)? */
bool sw_xslot_can_lend(struct sw_sock *s);
/* Sender: lends [p, p+len), inside map (unmapped when it ends). 0 or < 0
 * (nothing lent; the mapping stays the caller's). */
int sw_xslot_lend(struct sw_sock *s, uint8_t *p, size_t len, void *map,
		  size_t map_len);
enum { SW_LEND_NONE, SW_LEND_OUT, SW_LEND_ENDED };
/* Sender: none, still out (the receiver has bytes left to take), or
 * ended (taken whole, refused, the peer gone): a look, nothing changes. */
int sw_xslot_lend_state(struct sw_sock *s);
/* Sender: bytes of the lend the receiver has not taken (a hint: the
 * count is the peer's). */
uint64_t sw_xslot_lend_left(struct sw_sock *s);
/* Sender: ends lend o (taken out of s->ss.lend by the caller, so that
 * no other thread ends it too while a later step releases the lock),
 * taking back at once what the receiver has not taken (a claim in
 * progress is waited for); the bytes the receiver took, or < 0. The
 * mapping stays until sw_xslot_lend_free. */
ssize_t sw_xslot_lend_end(struct sw_sock *s, struct sw_xoffer *o);
/* Sender: forgets lend o, its registration and its mapping. */
void sw_xslot_lend_free(struct sw_sock *s, struct sw_xoffer *o);

/* An XOFFER from the peer: queues the offer to be claimed when read. */
int sw_xslot_on_offer(struct sw_sock *s, uint32_t idx,
		      const struct sdp_msg_hdr *h, const void *body);

#endif /* SW_XSLOT_H */
