/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * config.c - settings from the environment and the rules that choose SAN or
 * TCP per program, role, address and port (first match wins). The rules
 * syntax is in docs/configuration.md and docs/man/sdp-rules.5.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "rules.h"
#include "session_tx.h"
#include "sock.h"

struct sw_config sw_cfg = {
	.log_level = 4,
	.spin_us = 50,
	.spin_max_us = 500,
	.msg_size = 16400,	/* 16 KiB of payload and the header */
	.recv_bufs = 16,
	.recv_bufs_idle = 2,
	.idle_ms = 2000,
	.send_bufs = 16,
	.rdma_min = 65536,
	.staging_size = 1 << 20,
	.staging_size_wire = 8 << 20,
	.coalesce_max = 65536,
	.coalesce_us = 200,
	.xslot = 1,
	.xslot_nb_us = 100,
	.xslot_block_us = 2000,
	.xslot_split = 128 * 1024,
	.xslot_claim_ms = 5000,
	.upgrade_after_us = 1000,
	.upgrade_after_bytes = 65536,
	.upgrade_timeout_ms = 2000,
	.upgrade_max = 64,
	.path = SW_PATH_AUTO,
};

static struct sdp_rule rules[SDP_RULES_MAX];
static int nrules;
static int rules_default = SDP_RULE_BOTH;
static bool rules_broken;

static unsigned long env_ul(const char *name, unsigned long def,
			    unsigned long min, unsigned long max)
{
	const char *v = getenv(name);
	char *end;
	unsigned long x;

	if (!v || !*v)
		return def;
	errno = 0;
	x = strtoul(v, &end, 0);
	if (errno || *end || x < min || x > max) {
		SW_ERR("%s=%s is not a number in [%lu, %lu]; using %lu", name,
		       v, min, max, def);
		return def;
	}
	return x;
}

static int parse_level(const char *v)
{
	static const char *names[] = { "off", "", "", "error", "warn", "",
				       "info", "debug" };
	int i;

	if (!v || !*v)
		return -1;
	if (isdigit((unsigned char)v[0]))
		return atoi(v) & 7;
	for (i = 0; i < 8; i++)
		if (names[i][0] && !strcasecmp(v, names[i]))
			return i;
	return -1;
}

void sw_config_load(void)
{
	char err[512];
	const char *v;
	int lvl;

	lvl = parse_level(getenv("SDP_LOG"));
	if (lvl >= 0)
		sw_cfg.log_level = lvl;
	sw_cfg.spin_us = env_ul("SDP_SPIN_US", sw_cfg.spin_us, 0, 4000000);
	sw_cfg.spin_max_us = env_ul("SDP_SPIN_MAX_US", sw_cfg.spin_max_us, 0,
				    4000000);
	sw_cfg.msg_size = env_ul("SDP_MSG_SIZE", sw_cfg.msg_size, 256,
				 1 << 20);
	sw_cfg.recv_bufs = env_ul("SDP_RECV_BUFS", sw_cfg.recv_bufs, 2,
				  SW_MAX_BUFS);
	sw_cfg.recv_bufs_idle = env_ul("SDP_RECV_BUFS_IDLE",
				       sw_cfg.recv_bufs_idle, 2,
				       sw_cfg.recv_bufs);
	sw_cfg.idle_ms = env_ul("SDP_IDLE_MS", sw_cfg.idle_ms, 1, 86400000);
	sw_cfg.send_bufs = env_ul("SDP_SEND_BUFS", sw_cfg.send_bufs, 2,
				  SW_MAX_BUFS);
	sw_cfg.rdma_min = env_ul("SDP_RDMA_MIN", sw_cfg.rdma_min, 1,
				 1ul << 40);
	v = getenv("SDP_STAGING_SIZE");
	if (v && *v) {
		/* set by hand: the same ring on every provider (a bad value
		 * gives the local default, as the message says) */
		sw_cfg.staging_size = env_ul("SDP_STAGING_SIZE",
					     sw_cfg.staging_size, 4096,
					     1ul << 32);
		sw_cfg.staging_size_wire = sw_cfg.staging_size;
	}
	sw_cfg.wdata_piece = env_ul("SDP_WDATA_PIECE", sw_cfg.wdata_piece, 0,
				    1ul << 32);
	sw_cfg.coalesce_max = env_ul("SDP_COALESCE", sw_cfg.coalesce_max, 0,
				     SW_PTX_MAX);
	/* 1 means on, with the default amount */
	if (sw_cfg.coalesce_max == 1)
		sw_cfg.coalesce_max = 65536;
	sw_cfg.coalesce_us = env_ul("SDP_COALESCE_US", sw_cfg.coalesce_us, 1,
				    1000000);
	sw_cfg.xslot = env_ul("SDP_XSLOT", sw_cfg.xslot, 0, 1);
	sw_cfg.xslot_nb_us = env_ul("SDP_XSLOT_NB_US", sw_cfg.xslot_nb_us, 0,
				    1000000);
	sw_cfg.xslot_block_us = env_ul("SDP_XSLOT_BLOCK_US",
				       sw_cfg.xslot_block_us, 0, 10000000);
	sw_cfg.xslot_split = env_ul("SDP_XSLOT_SPLIT", sw_cfg.xslot_split,
				    4096, 1ul << 40);
	sw_cfg.xslot_claim_ms = env_ul("SDP_XSLOT_CLAIM_MS",
				       sw_cfg.xslot_claim_ms, 10, 600000);
	sw_cfg.upgrade_after_us = env_ul("SDP_UPGRADE_AFTER_US",
					 sw_cfg.upgrade_after_us, 0, 600000000);
	sw_cfg.upgrade_after_bytes = env_ul("SDP_UPGRADE_AFTER_BYTES",
					    sw_cfg.upgrade_after_bytes, 0,
					    1ul << 40);
	sw_cfg.upgrade_timeout_ms = env_ul("SDP_UPGRADE_TIMEOUT_MS",
					   sw_cfg.upgrade_timeout_ms, 1,
					   600000);
	sw_cfg.upgrade_max = env_ul("SDP_UPGRADE_MAX", sw_cfg.upgrade_max, 1,
				    65536);
	v = getenv("SDP_PATH");
	if (v && *v) {
		if (!strcmp(v, "copy"))
			sw_cfg.path = SW_PATH_COPY;
		else if (!strcmp(v, "read"))
			sw_cfg.path = SW_PATH_READ;
		else if (!strcmp(v, "write"))
			sw_cfg.path = SW_PATH_WRITE;
		else if (strcmp(v, "auto"))
			SW_ERR("SDP_PATH=%s: expected auto, copy, read or write; using auto",
			       v);
	}

	/* rules: SDP_RULES names a file; SDP_RULE holds rules inline */
	v = getenv("SDP_RULES");
	if (!v || !*v)
		v = "/etc/sdp-switch/rules.conf";
	snprintf(sw_cfg.rules_file, sizeof(sw_cfg.rules_file), "%s", v);
	nrules = sdp_rules_parse_file(sw_cfg.rules_file, rules, SDP_RULES_MAX,
				      getenv("SDP_RULES") != NULL, err,
				      sizeof(err));
	if (nrules < 0)
		goto broken;
	v = getenv("SDP_RULE");
	if (v && *v) {
		int n = sdp_rules_parse_string(v, "SDP_RULE", rules + nrules,
					       SDP_RULES_MAX - nrules, err,
					       sizeof(err));
		if (n < 0)
			goto broken;
		/* inline rules come first: they override the file */
		if (n) {
			struct sdp_rule tmp[SDP_RULES_MAX];

			memcpy(tmp, rules + nrules, n * sizeof(*tmp));
			memmove(rules + n, rules, nrules * sizeof(*tmp));
			memcpy(rules, tmp, n * sizeof(*tmp));
			nrules += n;
		}
	}
	v = getenv("SDP_DEFAULT");
	if (v && *v) {
		int a = sdp_rule_action(v);

		if (a < 0) {
			snprintf(err, sizeof(err),
				 "SDP_DEFAULT=%s: expected san, tcp or both", v);
			goto broken;
		}
		rules_default = a;
	}
	return;
broken:
	/* a bad rule must not silently change what runs where: keep every
	 * connection on TCP and say why */
	SW_ERR("%s; every connection stays on TCP until this is fixed", err);
	rules_broken = true;
	nrules = 0;
}

int sw_rules_decide(char role, const struct sockaddr *addr)
{
	const char *prog = program_invocation_short_name;
	int i;

	if (rules_broken)
		return SDP_RULE_TCP;
	for (i = 0; i < nrules; i++)
		if (sdp_rule_match(&rules[i], prog, role, addr))
			return rules[i].action;
	return rules_default;
}
