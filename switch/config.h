/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * config.h - the switch's settings (config.c) and the rules that keep
 * connections on TCP (rules.c).
 */
#ifndef SW_CONFIG_H
#define SW_CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>

enum sw_path_force { SW_PATH_AUTO, SW_PATH_COPY, SW_PATH_READ, SW_PATH_WRITE };

struct sw_config {
	int log_level;		/* 0 off .. 3 error .. 6 info .. 7 debug */
	unsigned spin_us;	/* busy-poll budget before sleeping: floor */
	unsigned spin_max_us;	/* ceiling of the adaptive budget (spin.c) */
	unsigned crowd_pct;	/* run-queue wait that stops polling; 0: never */
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
	unsigned orphan_timeout_ms; /* a closed connection's bytes wait so
				 * long for a peer that takes none */
	unsigned xslot;		/* 1: transfer slots where the provider can */
	unsigned xslot_nb_us;	/* non-blocking send: wait for a claim */
	unsigned xslot_block_us; /* blocking send: wait for a claim */
	size_t xslot_split;	/* a read this large is copied by both */
	unsigned xslot_claim_ms; /* a claim or a push may stand this long */
	size_t sendfile_lend;	/* largest sendfile piece lent from the
				 * file's pages; 0: sendfile copies */
	unsigned upgrade_after_us;  /* provider connection once this old */
	size_t upgrade_after_bytes; /* ... or once this much went on TCP */
	unsigned upgrade_turns;	    /* ... and once it turned this often */
	unsigned upgrade_timeout_ms; /* the rest of an upgrade, once begun */
	unsigned upgrade_max;	/* upgrades under way at once (process) */
	unsigned reupgrade;	/* 1: upgrade again after a change of hands */
	enum sw_path_force path;
	char rules_file[256];
};

extern struct sw_config sw_cfg;

void sw_config_load(void);

/* Rules: 1 = SAN allowed, 0 = TCP only. role 'c' connect, 's' listen. */
int sw_rules_decide(char role, const struct sockaddr *addr);

/* Errors found in the settings and rules (each reported once). */
int sw_config_errors(void);
/* The effective settings, their origin and meaning (sdp-run --check). */
void sw_config_report(FILE *f);
/* Which rule decides a connection of prog (role 'c' or 's') to addr, and
 * what the switch would do (sdp-run --explain). */
int sw_rules_explain(FILE *f, const char *prog, char role,
		     const struct sockaddr *addr);

#endif /* SW_CONFIG_H */
