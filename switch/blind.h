/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * blind.h - I/O the switch cannot see (blind.c): a process with an io_uring
 * instance carries no connection (DESIGN.md section 4, "sight"); one
 * connection whose I/O may go through stdio, or that sends with
 * MSG_ZEROCOPY, leaves the SAN.
 */
#ifndef SW_BLIND_H
#define SW_BLIND_H

#include <stdbool.h>
#include <sys/socket.h>

/* True once the process is known to do I/O around libc. */
bool sw_blind(void);

/*
 * The process has (or is about to have) an io_uring instance; why names
 * the call that told. From now on no connection is carried: provider
 * listeners close, pending upgrades are given up, carried connections
 * return to TCP (downgrade.c). Runs once; callers hold the guard.
 */
void sw_blind_set(const char *why);

/* Looks for an io_uring descriptor among the process's descriptors
 * (/proc/self/fd) and calls sw_blind_set when it finds one. force: look
 * now; otherwise at most once per SW_BLIND_SCAN_NS. Returns sw_blind(). */
bool sw_blind_check(bool force);

#define SW_BLIND_SCAN_NS 1000000000ull

struct sw_sock;
/*
 * One connection whose I/O is about to go where no wrapper sees it: the
 * program made a stdio stream of it (fdopen), or put it on fd 0, 1 or 2
 * (dup2, dup3) where sw_sock_to_std cannot hold it; stdio reads and writes
 * through the C library's internal calls. It returns to TCP for good, as
 * in a blind process: a pending upgrade given up, a carried connection
 * downgraded, the peer's hello dropped or fenced off; why names the call.
 * Bytes that came on the SAN and were not read stay for read and recv,
 * which stdio does not call (a warning says so). Callers hold the guard
 * and no lock of s.
 */
void sw_blind_sock(struct sw_sock *s, const char *why);

/*
 * The same for a connection whose program asks for what only the
 * kernel's socket gives. how: SW_SIGHT_STDIO (sw_blind_sock); SW_SIGHT_SEND
 * (MSG_ZEROCOPY, transmit timestamps: the completions or stamps of its
 * sends come on the kernel's error queue; its reads still pass the
 * wrappers, which drop the peer's hello, so no fence); SW_SIGHT_ZC_RECV (TCP_ZEROCOPY_RECEIVE: its reads map or
 * copy the kernel's queue past the switch: fenced as for stdio, and the
 * bytes that came on the SAN are left to recv, sw_getsockopt).
 */
enum sw_sight { SW_SIGHT_STDIO, SW_SIGHT_SEND, SW_SIGHT_ZC_RECV };
void sw_sight_off(struct sw_sock *s, const char *why, enum sw_sight how);

/*
 * A send with MSG_ZEROCOPY on s (no lock held): if the kernel says
 * SO_ZEROCOPY is on, the connection leaves the SAN for good (sw_sight_off)
 * before the send, which then goes to the kernel, whose error queue
 * completes it.
 */
void sw_zerocopy_send(struct sw_sock *s);

/*
 * Transmit timestamps (SO_TIMESTAMPING with a TX flag): the kernel stamps
 * the bytes its TCP sends, which a carried connection's are not, so such
 * a connection leaves the SAN for good (sw_sight_off) before the option
 * acts. sw_ts_tx_option: is this setsockopt (or a send's control message)
 * a request for them? Notes that the process asked. sw_ts_tx_sock: s (no
 * lock held) leaves the SAN. sw_ts_tx_new: a connection just made or
 * accepted, in a process that asked anywhere: asks the kernel whether it
 * has them on (inherited from its listener, set before connect) and
 * leaves the SAN if so. sw_ts_tx_send: a send whose control messages ask
 * for them.
 */
bool sw_ts_tx_option(int level, int name, const void *val, socklen_t len);
void sw_ts_tx_sock(struct sw_sock *s);
void sw_ts_tx_new(struct sw_sock *s);
void sw_ts_tx_send(struct sw_sock *s, const struct msghdr *msg);

/* getsockopt(TCP_ZEROCOPY_RECEIVE) on s (no lock held; val and len the
 * program's): 1 with *ret set when the switch answered, 0 when the kernel
 * is to answer. */
int sw_zc_receive(struct sw_sock *s, void *val, socklen_t *len, int *ret);

/*
 * One connection put on fd 0, 1 or 2 (dup2, dup3): held rather than given
 * up when its upgrade may wait, pending and uncommitted (a server's client
 * hello taken first: sw_hello_await) or back on TCP to be upgraded again.
 * Anything else goes the way of sw_blind_sock. Callers hold the guard and
 * no lock of s.
 */
void sw_sock_to_std(struct sw_sock *s);

/*
 * s (locked) may not be committed to the SAN now: a standard stream names
 * it (looked at every 10 ms at most), or some of its bytes on TCP went
 * past the switch and the kernel's count of them cannot be taken yet
 * (another thread inside a call; the upgrade thread). A pending upgrade
 * whose count is taken goes on with it (docs/protocol.md 2.7, "Byte by
 * byte"); one whose count cannot be had at all is given up (cut).
 */
bool sw_upgrade_held(struct sw_sock *s);

#endif /* SW_BLIND_H */
