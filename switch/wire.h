/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * wire.h - every byte the switch puts on a wire: the upgrade handshake that
 * travels on the program's TCP connection (hellos, doorbell, downgrade
 * marker) and the session protocol's control messages on the provider
 * connection.
 * docs/protocol.md describes the same layout in prose; keep them together.
 * All integers are little-endian; structures are packed, sizes asserted.
 */
#ifndef SDP_WIRE_H
#define SDP_WIRE_H

#include <stdint.h>

#include "sdp_provider.h"

#define SDP_PROTO_VERSION 4	/* 2: transfer slots (XOFFER); 3: the
				 * asynchronous upgrade (SWITCH); 4: no
				 * server hello on TCP, its fields go with
				 * the provider connect */

/* The structures below are the wire layout as they sit in memory: this
 * code is for little-endian hosts (x86-64, arm64, ppc64le, riscv64). */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "sdp-switch's wire structures assume a little-endian host"
#endif

/* ---- on the TCP connection (docs/protocol.md section 2) ------------------- */

/* First byte is not printable ASCII, so no text protocol starts with it. */
#define SDP_HELLO_MAGIC "\xd5SDPSW\r\n"
#define SDP_MAGIC_LEN 8

enum sdp_hello_type {
	SDP_HELLO_CLIENT = 1,
	SDP_HELLO_SERVER = 2,
};

#define SDP_MAX_HELLO_PROVIDERS 4
#define SDP_PROVIDER_NAME_LEN 8

/* CLIENT_HELLO: 96 bytes, once, at the head of the client's stream. A
 * SERVER_HELLO is sent only by servers of versions 1 to 3, on TCP; from
 * version 4 on its fields travel with the provider connect
 * (struct sdp_connect_priv_hello), and a client takes one on TCP only as
 * an older server's refusal (docs/protocol.md 2.2). */
struct sdp_hello {
	uint8_t magic[SDP_MAGIC_LEN];	/* SDP_HELLO_MAGIC */
	uint8_t type;			/* enum sdp_hello_type */
	uint8_t version;		/* SDP_PROTO_VERSION of the sender */
	uint8_t status;			/* server: 0 = upgrade, else enum
					 * sdp_fallback_reason; client: 0 */
	uint8_t nproviders;		/* client: names that follow;
					 * server: 1 (the chosen one) or 0 */
	uint32_t flags;			/* SDP_HELLO_F_* */
	uint8_t key[16];		/* client: random key K; server: zero */
	char providers[SDP_MAX_HELLO_PROVIDERS][SDP_PROVIDER_NAME_LEN];
					/* NUL-padded provider names, best first */
	uint32_t msg_size;		/* size of each receive buffer the
					 * sender will post (256 .. 1 MiB) */
	uint32_t recv_credits;		/* receive buffers it will post: the
					 * peer's initial credits (2 .. 4096) */
	uint8_t reserved[24];		/* zero */
} __attribute__((packed));
_Static_assert(sizeof(struct sdp_hello) == 96, "hello is 96 bytes");

#define SDP_HELLO_F_RDMA_READ 0x1	/* sender's provider offers RdmaRead */

/* After its DOWNGRADE message, a side writes this marker on TCP; its data
 * follows on TCP. Magic + the connection's key K. */
struct sdp_marker {
	uint8_t magic[SDP_MAGIC_LEN];	/* SDP_DOWNGRADE_MAGIC */
	uint8_t key[16];		/* the client's key K */
} __attribute__((packed));
_Static_assert(sizeof(struct sdp_marker) == 24, "marker is 24 bytes");
#define SDP_DOWNGRADE_MAGIC "\xd5SDPDG\r\n"

/* After its switch point (SWITCH), a side's TCP stream carries only
 * doorbell bytes (wake-ups), until a downgrade marker. */
#define SDP_DOORBELL 0x44

/* Private data of the server's provider connect: proves knowledge of K. */
struct sdp_connect_priv {
	uint8_t magic[4];		/* "SDPc" */
	uint8_t version;
	uint8_t flags;			/* SDP_CONNECT_F_* */
	uint8_t reserved[2];		/* zero */
	uint8_t key[16];		/* K from the client's hello */
} __attribute__((packed));
_Static_assert(sizeof(struct sdp_connect_priv) == 24, "connect priv");

/* What a server hello would say comes with the connect: set on every
 * connect of version 4, whose servers never write a hello on TCP (their
 * stream starts with the program's bytes; docs/protocol.md 2.4). */
#define SDP_CONNECT_F_HELLO 0x1

struct sdp_connect_priv_hello {
	struct sdp_connect_priv base;	/* flags: SDP_CONNECT_F_HELLO */
	uint32_t hello_flags;		/* the hello's flags (SDP_HELLO_F_*) */
	uint32_t msg_size;		/* the hello's msg_size */
	uint32_t recv_credits;		/* the hello's recv_credits */
	uint32_t reserved;		/* zero */
} __attribute__((packed));
_Static_assert(sizeof(struct sdp_connect_priv_hello) == 40,
	       "connect priv with hello");
_Static_assert(sizeof(struct sdp_connect_priv_hello) <= SDP_MAX_PRIVATE_DATA,
	       "connect priv fits the SPI's private data");

/* ---- session protocol on the provider connection (section 3) ---------------- */

enum sdp_msg_type {
	SDP_MSG_SETUP = 1,	/* first message each way: buffers, staging */
	SDP_MSG_DATA,		/* payload inline */
	SDP_MSG_RDATA,		/* inline head + rest by RdmaRead from sender */
	SDP_MSG_WDATA,		/* payload already RdmaWritten into staging */
	SDP_MSG_XFER_DONE,	/* receiver pulled an RDATA transfer fully */
	SDP_MSG_STAGING_FREE,	/* receiver freed staging bytes (WDATA path) */
	SDP_MSG_CREDIT,		/* credit update only */
	SDP_MSG_WAKE_ME,	/* sender sleeps: ring the doorbell on news */
	SDP_MSG_FIN,		/* sender shut down its sending side */
	SDP_MSG_ABORT,		/* sender reset the connection */
	SDP_MSG_OOB,		/* one byte of urgent data */
	SDP_MSG_DOWNGRADE,	/* sender's data continues on TCP after this */
	SDP_MSG_CREDIT_DELTA,	/* receiver grants (+) or takes back (-) buffers */
	SDP_MSG_CREDIT_RELEASE,	/* sender gives one taken-back buffer up */
	SDP_MSG_XOFFER,		/* bytes offered in the sender's transfer slot */
	SDP_MSG_SWITCH,		/* sender's data continues here, after the
				 * bytes it sent on TCP (section 2.5) */
	SDP_MSG_TYPE_MAX
};

/* Every control message starts with this 16-byte header. */
struct sdp_msg_hdr {
	uint8_t type;		/* enum sdp_msg_type */
	uint8_t flags;		/* SDP_MSG_F_* */
	uint16_t credits;	/* receive buffers the sender reposted since
				 * its previous message (credit return) */
	uint32_t len;		/* inline payload bytes after the body */
	uint32_t seq;		/* message number, from 0, per direction */
	uint32_t reserved;	/* zero */
} __attribute__((packed));
_Static_assert(sizeof(struct sdp_msg_hdr) == 16, "header is 16 bytes");

#define SDP_MSG_F_WAKE_ME 0x01	/* also: sender wants a doorbell on news */
#define SDP_MSG_F_SWITCHED 0x02	/* sender has taken the receiver's SWITCH:
				 * the receiver's doorbells are no longer
				 * read as its TCP data */

/* SETUP body (after the header). Buffer size and credits travelled in the
 * hellos already; these repeat them and must match. */
struct sdp_msg_setup {
	uint32_t msg_size;	/* as in the sender's hello */
	uint32_t recv_credits;	/* as in the sender's hello */
	uint32_t flags;		/* SDP_SETUP_F_* */
	uint32_t reserved;
	struct sdp_rdma_desc staging; /* WDATA target (length 0: none) */
} __attribute__((packed));
_Static_assert(sizeof(struct sdp_msg_setup) == 48, "setup body");
#define SDP_SETUP_F_RDMA_READ 0x1	/* sender can RdmaRead: offer RDATA */
#define SDP_SETUP_F_XSLOT 0x2	/* sender has a shared area and takes
				 * XOFFER (section 4.10); without
				 * RDMA_READ it has every byte pushed */

/* RDATA body: the rest of the data is in the sender's region. */
struct sdp_msg_rdata {
	uint32_t xfer_id;	/* echoed in XFER_DONE */
	uint32_t reserved;
	uint64_t total;		/* bytes in the region (after inline head) */
	struct sdp_rdma_desc region;
} __attribute__((packed));
_Static_assert(sizeof(struct sdp_msg_rdata) == 48, "rdata body");

/* WDATA body: len bytes were written at offset of the receiver's staging. */
struct sdp_msg_wdata {
	uint64_t offset;	/* in the staging ring (mod its length) */
	uint64_t bytes;
} __attribute__((packed));
_Static_assert(sizeof(struct sdp_msg_wdata) == 16, "wdata body");

/* XFER_DONE / STAGING_FREE body. */
struct sdp_msg_ack {
	uint32_t xfer_id;	/* XFER_DONE: the transfer; else 0 */
	uint32_t reserved;
	uint64_t bytes;		/* bytes pulled / staging bytes freed */
} __attribute__((packed));
_Static_assert(sizeof(struct sdp_msg_ack) == 16, "ack body");

/* WAKE_ME body: how far the sender had read when it decided to sleep. A
 * receiver that has sent more since rings the doorbell at once; otherwise
 * it rings after its next message. */
struct sdp_msg_wake {
	uint32_t seen_seq;	/* the sender's next expected sequence number */
	uint32_t reserved;	/* zero */
} __attribute__((packed));
_Static_assert(sizeof(struct sdp_msg_wake) == 8, "wake body");

/* CREDIT_DELTA body (seed 003's delta credit message). delta > 0: the
 * sender posted delta more receive buffers (credits for the peer); a
 * staging ring may be offered with it. delta <= 0: the peer must give up
 * -delta credits by sending that many CREDIT_RELEASE messages (one if
 * delta is 0), whose buffers the sender then frees; with
 * SDP_DELTA_F_REVOKE_STAGING the peer stops writing into the staging ring
 * before its first CREDIT_RELEASE. */
struct sdp_msg_delta {
	int32_t delta;
	uint32_t flags;		/* SDP_DELTA_F_* */
	struct sdp_rdma_desc staging;	/* with SDP_DELTA_F_STAGING */
} __attribute__((packed));
_Static_assert(sizeof(struct sdp_msg_delta) == 40, "delta body");
#define SDP_DELTA_F_STAGING 0x1		/* staging holds a new ring */
#define SDP_DELTA_F_REVOKE_STAGING 0x2	/* the current ring goes away */

/* CREDIT_RELEASE body. */
struct sdp_msg_release {
	uint32_t last;		/* 1 on the last release of a delta */
	uint32_t reserved;	/* zero */
} __attribute__((packed));
_Static_assert(sizeof(struct sdp_msg_release) == 8, "release body");

/* OOB body: the urgent byte is the one inline payload byte. */

/* SWITCH body: the sender's program bytes that went on TCP after its
 * hello; the receiver reads exactly that many there, then this stream. */
struct sdp_msg_switch {
	uint64_t tcp_bytes;
	uint64_t reserved;	/* zero */
} __attribute__((packed));
_Static_assert(sizeof(struct sdp_msg_switch) == 16, "switch body");

/* XOFFER body: the layout of RDATA's. xfer_id is the offer's sequence
 * number in the sender's transfer slot (never 0); total bytes are in
 * region, readable from offset 0. No XFER_DONE answers it: the slot does. */

/* ---- the transfer slot (section 4.6) ---------------------------------------
 * Each side's slot is at the start of its provider's shared area
 * (SharedArea extension): the side that sends offers in its own slot; the
 * receiver claims the offer and writes its progress there. Changed only
 * with atomic operations; everything in it is the peer's to overwrite. */
enum sdp_xslot_state {
	SDP_XS_IDLE = 0,	/* no offer */
	SDP_XS_OFFERED = 1,	/* sender: bytes wait; receiver may claim */
	SDP_XS_CLAIMED = 2,	/* receiver is copying (bounded) */
	SDP_XS_CANCELLED = 3,	/* sender took the offer back */
	SDP_XS_REFUSED = 4,	/* receiver: its RdmaRead was refused since
				 * SETUP; the sender takes the offer back
				 * and makes no more */
};
enum sdp_xslot_push {
	SDP_XP_NONE = 0,
	SDP_XP_REQ = 1,		/* receiver: write push_len bytes into sink */
	SDP_XP_STARTED = 2,	/* sender is writing them */
	SDP_XP_DONE = 3,	/* sender wrote them */
	SDP_XP_FAILED = 4,	/* sender could not: the receiver pulls them */
};
/* state and push words: offer sequence number << 32 | state */
#define SDP_XS_WORD(seq, st) (((uint64_t)(seq) << 32) | (uint32_t)(st))

struct sdp_xslot {
	_Atomic uint64_t state;		/* sender: IDLE->OFFERED, OFFERED->
					 * CANCELLED; receiver: OFFERED<->
					 * CLAIMED, CLAIMED->REFUSED */
	_Atomic uint64_t consumed;	/* receiver: offer bytes taken so
					 * far, written while CLAIMED */
	_Atomic uint64_t push;		/* receiver: NONE->REQ, REQ->NONE
					 * (taken back); sender: REQ->
					 * STARTED->DONE or FAILED */
	uint64_t push_off;		/* receiver: offset in the offer */
	uint64_t push_len;		/* receiver: bytes to write */
	uint64_t reserved;
	struct sdp_rdma_desc sink;	/* receiver: where they go */
};
_Static_assert(sizeof(struct sdp_xslot) == 80, "xslot is 80 bytes");

#endif /* SDP_WIRE_H */
