/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fallback.h - why a connection stays on (or returns to) plain TCP. One code
 * per reason; docs/fallback-reasons.md explains each and what to do.
 */
#ifndef SDP_FALLBACK_H
#define SDP_FALLBACK_H

#include <stdbool.h>
#include <sys/socket.h>

/* The numbers are published (statistics files, docs/fallback-reasons.md):
 * a code that goes away leaves its number reserved. */
enum sdp_fallback_reason {
	SDP_FB_NONE = 0,
	SDP_FB_RULE,		/* a rule says TCP for this program/address/port */
	SDP_FB_NO_PROVIDER,	/* no provider module could be loaded */
	SDP_FB_NO_DEVICE,	/* providers loaded but none has a device */
	SDP_FB_NO_PEER_SWITCH,	/* discovery found no switch at the peer */
	SDP_FB_NO_COMMON,	/* the peers share no provider */
	SDP_FB_VERSION,		/* peer speaks another protocol version */
	SDP_FB_LOCAL_SETUP,	/* bind/listen for the upgrade failed here */
	SDP_FB_PROVIDER_CONNECT,/* provider-level connect failed */
	SDP_FB_AUTH,		/* only provider connections without the key
				 * of the TCP connection came (refused) */
	SDP_FB_TIMEOUT,		/* the peer did not complete the upgrade in time */
	SDP_FB_REGISTRATION,	/* control buffers could not be registered */
	SDP_FB_PEER_ABANDONED,	/* the peer gave the upgrade up */
	SDP_FB_BAD_HELLO,	/* malformed handshake message from the peer */
	SDP_FB_RESERVED,	/* 14: never raised: the shim hands the switch
				 * IPv4/IPv6 TCP sockets only */
	SDP_FB_PEER_FALLBACK,	/* the peer chose TCP (its reason in the log) */
	SDP_FB_CUT,		/* shutdown, urgent data, fork or exec came
				 * before the upgrade finished */
	SDP_FB_ENDED,		/* the connection ended before its upgrade
				 * finished: all its bytes went on TCP */
	SDP_FB_BLIND,		/* the process does I/O around libc (an
				 * io_uring instance) the switch cannot see */
	SDP_FB_DESCRIPTORS,	/* the program is near RLIMIT_NOFILE: the
				 * switch leaves it the reserve */
	SDP_FB_HANDED,		/* another process drives the connection now
				 * (fork): this process's copy is left on TCP */
	SDP_FB_MAX
};

const char *sdp_fallback_name(int reason);

struct sw_sock;

/* Not a reason: a carried connection returns to TCP (downgrade.c). */
#define SW_FB_DOWNGRADED (-1)

/*
 * The only way a connection goes to TCP. One-way. For a connection the
 * switch manages: records and counts reason, logs it, frees the upgrade or
 * session resources, sends what was kept back. reason SW_FB_DOWNGRADED: a
 * carried connection back on TCP, which is no fallback: nothing is counted.
 */
void sw_fallback(struct sw_sock *s, int reason, const char *detail);
/* A connection the switch never took on (a rule, no device, no switch at
 * the peer, a failed set-up): listed for sdp-stat with its reason and
 * counted. peer may be NULL (asked of the kernel). */
void sw_fallback_untaken(int fd, int reason, bool client,
			 const struct sockaddr *peer, socklen_t peerlen);
/* A socket taken on already on TCP (inherited across exec): records why. */
void sw_fallback_inherited(struct sw_sock *s, int reason);

#endif /* SDP_FALLBACK_H */
