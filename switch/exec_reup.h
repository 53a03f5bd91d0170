/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * exec_reup.h - what a connection back on TCP needs to be upgraded again,
 * handed to the program exec'd on it in a memory file (exec_reup.c).
 */
#ifndef SW_EXEC_REUP_H
#define SW_EXEC_REUP_H

#include <stddef.h>
#include <stdint.h>

#include "sock.h"

/* Bumped when the layout of struct sw_exec_rec changes. */
#define SW_EXEC_REC_MAGIC 0x58504453u	/* "SDPX" */
#define SW_EXEC_REC_VERSION 1
#define SW_EXEC_PROV_NAME 32

/*
 * The head of the memory file (docs/protocol.md 2.8, "Across exec"),
 * written and read by the switch of one process before and after its
 * exec; explicit widths, so that a program of another word size (whose
 * library reads it) sees the same fields, and refuses the buffer by its
 * buf_hdr when its struct sw_fork_buf differs.
 */
struct sw_exec_rec {
	uint32_t magic;		/* SW_EXEC_REC_MAGIC */
	uint16_t version;	/* SW_EXEC_REC_VERSION */
	uint16_t rec_size;	/* sizeof(struct sw_exec_rec): 516 */
	uint64_t ino;		/* the socket's inode */
	uint64_t buf_off;	/* where the buffer starts: a page multiple */
	uint32_t buf_hdr;	/* the writer's sizeof(struct sw_fork_buf) */
	uint32_t flags;		/* SW_EXEC_F_* */
	int32_t family;		/* AF_INET or AF_INET6 */
	int32_t up_prov;	/* server: the provider chosen (index), or -1 */
	uint32_t lsn_provs;	/* server: its listener's providers (bits) */
	uint32_t cand_provs;	/* client: providers that see the server */
	uint16_t local_port;	/* host order */
	uint16_t peerlen;	/* bytes of peer used */
	uint32_t reup_n;	/* upgrades again so far (the back-off) */
	uint64_t dg_tx_base;	/* the kernel's count of our bytes written
				 * at our downgrade marker */
	uint64_t dg_rx_base;	/* and of the peer's read at its marker */
	uint8_t key[16];	/* the connection's key K */
	uint8_t hello[96];	/* server: the client's hello (its sizes) */
	uint8_t peer[128];	/* struct sockaddr_storage of the peer */
	uint32_t nprov;		/* the writer's providers, by index: */
	char prov[SW_MAX_PROVIDERS][SW_EXEC_PROV_NAME]; /* their names */
	/* SW_EXEC_F_PENDING: the upgrade not finished, as it stood */
	uint32_t state;		/* enum sw_state (stats.h) */
	uint32_t pflags;	/* SW_EXEC_P_* */
	uint32_t connect_tries;	/* server: connects refused so far */
	uint32_t hello_got;	/* bytes of hello (the client's, at a server)
				 * in hello */
	uint32_t prefix_off;	/* hello[prefix_off, prefix_len): the
				 * program's bytes taken while looking for a
				 * hello, to deliver first */
	uint32_t prefix_len;
	uint64_t tcp_tx;	/* the program's bytes on TCP since the
				 * hellos, ours sent */
	uint64_t tcp_rx;	/* and the peer's read */
	uint64_t born_ns;	/* client: when connect() made it */
	uint64_t upgrade_at_ns;	/* server: its connect is due then */
	uint64_t deadline_ns;	/* the step under way is given up then */
	uint64_t spoke_first_ns; /* server: its program wrote first then */
} __attribute__((packed));
_Static_assert(sizeof(struct sw_exec_rec) == 516, "exec record is 516 bytes");

#define SW_EXEC_F_CLIENT 0x1	/* this end is the client (connect()) */
#define SW_EXEC_F_PENDING 0x2	/* an upgrade under way (not the one again
				 * after a downgrade): the fields above */
#define SW_EXEC_P_SKIP_HELLO 0x1
#define SW_EXEC_P_KEY_REFUSED 0x2
#define SW_EXEC_P_SPOKE_FIRST 0x4

/*
 * Before exec (s locked, on TCP after its downgrade, its peer's marker
 * read): a memory file for the new program holding what an upgrade again
 * needs and the bytes that came on the SAN and were not read (they move
 * there from s->fork_buf, which maps them from then on); its descriptor
 * and the holders' record's are made inheritable. Writes the entry
 * "FD:INO:rMFD:MINO[:HFD:HINO]" (after prefix) into item. Returns its
 * length; 0 when s is not such a connection; -errno when it could not be
 * made (nothing of s changed: the caller gives the upgrade again up).
 */
int sw_exec_reup_item(struct sw_sock *s, char *item, size_t len,
		      const char *prefix);

/*
 * Before exec (s locked, before any connection returns to TCP), with
 * SDP_REUPGRADE=1: a connection left on a standard stream of the new
 * program (fd 0, 1 or 2: its stdio is out of the switch's sight) is
 * never carried there (reup_never). Otherwise an upgrade still pending
 * and uncommitted, with nothing of the provider's yet, goes on in the new
 * program: its state is written now, as sw_exec_reup_item does (the entry
 * into s->exec_item), and this program's copy stops driving it (plain TCP
 * here: the exec'd program holds it). No-op for any other connection.
 */
void sw_exec_keep_pending(struct sw_sock *s);


#endif /* SW_EXEC_REUP_H */
