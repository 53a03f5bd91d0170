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
#include <stddef.h>
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
	.crowd_pct = 20,
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
	.orphan_timeout_ms = 60000,
	.xslot = 1,
	.xslot_nb_us = 100,
	.xslot_block_us = 2000,
	.xslot_split = 128 * 1024,
	.xslot_claim_ms = 5000,
	.sendfile_lend = 4 << 20,
	.upgrade_after_us = 1000,
	.upgrade_after_bytes = 65536,
	.upgrade_turns = 3,
	.upgrade_timeout_ms = 2000,
	.upgrade_max = 64,
	.reupgrade = 1,
	.path = SW_PATH_AUTO,
};

static struct sdp_rule rules[SDP_RULES_MAX];
static int nrules;
static int rules_default = SDP_RULE_BOTH;
static bool rules_broken;
static int rules_inline;	/* the first ones, from SDP_RULE */

/*
 * The numeric settings: variable, field, bounds, meaning. Each is checked
 * as it is read; a bad value is said once, with the accepted range, and the
 * default applies. sdp-run --check prints this table with the effective
 * values.
 */
struct num_var {
	const char *name;
	size_t off, size;	/* the field in struct sw_config */
	unsigned long min, max;
	const char *what;
};

#define NUM(var, field, lo, hi, text) \
	{ var, offsetof(struct sw_config, field), \
	  sizeof(((struct sw_config *)0)->field), lo, hi, text }

static const struct num_var num_vars[] = {
	NUM("SDP_SPIN_US", spin_us, 0, 4000000,
	    "busy-poll before sleeping, floor, in us"),
	NUM("SDP_SPIN_MAX_US", spin_max_us, 0, 4000000,
	    "busy-poll ceiling, in us"),
	NUM("SDP_CROWD_PCT", crowd_pct, 0, 100,
	    "a thread kept waiting for a CPU this share of the time stops busy-polling, 0 = never, in %"),
	NUM("SDP_MSG_SIZE", msg_size, 256, 1 << 20,
	    "control message size, in bytes"),
	NUM("SDP_RECV_BUFS", recv_bufs, 2, SW_MAX_BUFS,
	    "receive buffers of a busy connection"),
	NUM("SDP_RECV_BUFS_IDLE", recv_bufs_idle, 2, SW_MAX_BUFS,
	    "receive buffers an idle connection keeps"),
	NUM("SDP_IDLE_MS", idle_ms, 1, 86400000,
	    "quiet time before buffers are given back, in ms"),
	NUM("SDP_SEND_BUFS", send_bufs, 2, SW_MAX_BUFS,
	    "send buffers per connection"),
	NUM("SDP_RDMA_MIN", rdma_min, 1, 1ul << 40,
	    "smallest send moved by RDMA, in bytes"),
	NUM("SDP_STAGING_SIZE", staging_size, 4096, 1ul << 32,
	    "RDMA-write staging ring per connection, in bytes"),
	NUM("SDP_WDATA_PIECE", wdata_piece, 0, 1ul << 32,
	    "RDMA-write piece, 0 = chosen per connection, in bytes"),
	NUM("SDP_COALESCE", coalesce_max, 0, SW_PTX_MAX,
	    "small sends kept while the peer is behind, 0 = off, 1 = on, in bytes"),
	NUM("SDP_COALESCE_US", coalesce_us, 1, 1000000,
	    "kept bytes leave within, in us"),
	NUM("SDP_ORPHAN_TIMEOUT_MS", orphan_timeout_ms, 1, 86400000,
	    "a closed connection's bytes wait for a peer that reads none, in ms"),
	NUM("SDP_XSLOT", xslot, 0, 1, "transfer slots, 0 = off"),
	NUM("SDP_XSLOT_NB_US", xslot_nb_us, 0, 1000000,
	    "non-blocking send: wait for a claim, in us"),
	NUM("SDP_XSLOT_BLOCK_US", xslot_block_us, 0, 10000000,
	    "blocking send: wait for a claim, in us"),
	NUM("SDP_XSLOT_SPLIT", xslot_split, 4096, 1ul << 40,
	    "a read this large is copied by both sides, in bytes"),
	NUM("SDP_XSLOT_CLAIM_MS", xslot_claim_ms, 10, 600000,
	    "a claim or push may stand, in ms"),
	NUM("SDP_SENDFILE_LEND", sendfile_lend, 0, 64ul << 20,
	    "largest sendfile piece lent from the file's pages, 0 = off, in bytes"),
	NUM("SDP_UPGRADE_AFTER_US", upgrade_after_us, 0, 600000000,
	    "provider connection once a connection is this old, in us"),
	NUM("SDP_UPGRADE_AFTER_BYTES", upgrade_after_bytes, 0, 1ul << 40,
	    "... or once this much went on TCP, in bytes"),
	NUM("SDP_UPGRADE_TURNS", upgrade_turns, 0, 1000,
	    "... and once its calls changed direction this often, 0 = any"),
	NUM("SDP_UPGRADE_TIMEOUT_MS", upgrade_timeout_ms, 1, 600000,
	    "the peer's silence an upgrade waits out, in ms"),
	NUM("SDP_UPGRADE_MAX", upgrade_max, 1, 65536,
	    "upgrades under way at once in a process"),
	NUM("SDP_REUPGRADE", reupgrade, 0, 1,
	    "1: a connection returned to TCP by a change of hands is upgraded again"),
};

static int config_errors;

/* Problems found in the configuration (sdp-run --check's exit status). */
int sw_config_errors(void)
{
	return config_errors;
}

static unsigned long field_get(const struct num_var *v)
{
	const char *p = (const char *)&sw_cfg + v->off;

	if (v->size == sizeof(unsigned))
		return *(const unsigned *)p;
	return *(const size_t *)p;
}

static void field_set(const struct num_var *v, unsigned long x)
{
	char *p = (char *)&sw_cfg + v->off;

	if (v->size == sizeof(unsigned))
		*(unsigned *)p = (unsigned)x;
	else
		*(size_t *)p = x;
}

/* Reads one numeric variable into its field; a bad value is said. */
static void num_load(const struct num_var *v)
{
	const char *s = getenv(v->name);
	unsigned long x;
	char *end;

	if (!s || !*s)
		return;
	errno = 0;
	x = strtoul(s, &end, 0);
	if (errno || *end || end == s || s[0] == '-' || x < v->min ||
	    x > v->max) {
		SW_ERR("%s=%s: expected a number from %lu to %lu (%s); using the default %lu",
		       v->name, s, v->min, v->max, v->what, field_get(v));
		config_errors++;
		return;
	}
	field_set(v, x);
}

/* SDP_LOG: names or 0..7. Read first, so that what follows is said at the
 * level asked for; a bad value is said whatever the level. */
static void log_level_load(void)
{
	const char *v = getenv("SDP_LOG");
	int lvl;

	if (!v || !*v)
		return;
	lvl = sdp_log_level_parse(v);
	if (lvl < 0) {
		SW_ERR("SDP_LOG=%s: expected off, error, warn, notice, info, debug or a number 0..7; using warn",
		       v);
		config_errors++;
		return;
	}
	sw_cfg.log_level = lvl;
}

/* A variable that takes one of some words. Returns the index or -1. */
static int word_load(const char *name, const char *const *words, int n,
		     const char *accepted, const char *fallback)
{
	const char *v = getenv(name);
	int i;

	if (!v || !*v)
		return -1;
	for (i = 0; i < n; i++)
		if (!strcmp(v, words[i]))
			return i;
	SW_ERR("%s=%s: expected %s; using %s", name, v, accepted, fallback);
	config_errors++;
	return -1;
}

/* Logs each line of a multi-line message from the rules parser. */
static void rules_errors_log(char *err)
{
	char *line, *save = NULL;

	for (line = strtok_r(err, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		SW_ERR("%s", line);
		config_errors++;
	}
}

void sw_config_load(void)
{
	static const char *const paths[] = { "auto", "copy", "read", "write" };
	char err[4096];
	const char *v;
	size_t i;
	int n;

	log_level_load();
	for (i = 0; i < sizeof(num_vars) / sizeof(num_vars[0]); i++)
		num_load(&num_vars[i]);
	if (sw_cfg.recv_bufs_idle > sw_cfg.recv_bufs) {
		SW_ERR("SDP_RECV_BUFS_IDLE=%u is more than the %u receive buffers of a busy connection (SDP_RECV_BUFS); using %u",
		       sw_cfg.recv_bufs_idle, sw_cfg.recv_bufs,
		       sw_cfg.recv_bufs);
		config_errors++;
		sw_cfg.recv_bufs_idle = sw_cfg.recv_bufs;
	}
	/* set by hand, the staging ring is the same on every provider */
	v = getenv("SDP_STAGING_SIZE");
	if (v && *v)
		sw_cfg.staging_size_wire = sw_cfg.staging_size;
	/* 1 means on, with the default amount */
	if (sw_cfg.coalesce_max == 1)
		sw_cfg.coalesce_max = 65536;
	n = word_load("SDP_PATH", paths, 4, "auto, copy, read or write",
		      "auto");
	if (n >= 0)
		sw_cfg.path = (enum sw_path_force)n;

	/* rules: SDP_RULES names a file; SDP_RULE holds rules inline */
	v = getenv("SDP_RULES");
	if (!v || !*v)
		v = "/etc/sdp-switch/rules.conf";
	snprintf(sw_cfg.rules_file, sizeof(sw_cfg.rules_file), "%s", v);
	err[0] = 0;
	nrules = sdp_rules_parse_file(sw_cfg.rules_file, rules, SDP_RULES_MAX,
				      getenv("SDP_RULES") != NULL, err,
				      sizeof(err));
	if (nrules < 0) {
		rules_errors_log(err);
		nrules = 0;
		rules_broken = true;
	}
	v = getenv("SDP_RULE");
	if (v && *v) {
		err[0] = 0;
		n = sdp_rules_parse_string(v, "SDP_RULE", rules + nrules,
					   SDP_RULES_MAX - nrules, err,
					   sizeof(err));
		if (n < 0) {
			rules_errors_log(err);
			rules_broken = true;
		} else if (n) {
			/* inline rules come first: they override the file */
			struct sdp_rule tmp[SDP_RULES_MAX];

			memcpy(tmp, rules + nrules, n * sizeof(*tmp));
			memmove(rules + n, rules, nrules * sizeof(*tmp));
			memcpy(rules, tmp, n * sizeof(*tmp));
			nrules += n;
			rules_inline = n;
		}
	}
	v = getenv("SDP_DEFAULT");
	if (v && *v) {
		int a = sdp_rule_action(v);

		if (a < 0) {
			SW_ERR("SDP_DEFAULT=%s: expected san, tcp or both", v);
			config_errors++;
			rules_broken = true;
		} else {
			rules_default = a;
		}
	}
	if (rules_broken) {
		/* a bad rule must not silently change what runs where: keep
		 * every connection on TCP and say why */
		SW_ERR("because of the rule errors above, every connection stays on TCP until they are fixed");
		nrules = 0;
	}
}

/* ---- for sdp-run --check and --explain ------------------------------- */

static const char *action_name(int a)
{
	return a == SDP_RULE_SAN ? "san" : a == SDP_RULE_TCP ? "tcp" : "both";
}

/* A rule as written: "ACTION ROLE PROGRAM ADDRESS PORTS", from where. */
static void rule_text(int i, char *buf, size_t len)
{
	const struct sdp_rule *r = &rules[i];
	char addr[INET6_ADDRSTRLEN + 8] = "*", ports[16] = "*";
	char ip[INET6_ADDRSTRLEN];

	if (r->family && inet_ntop(r->family, r->addr, ip, sizeof(ip)))
		snprintf(addr, sizeof(addr), "%s/%d", ip, r->prefix);
	if (r->port_lo == r->port_hi)
		snprintf(ports, sizeof(ports), "%u", r->port_lo);
	else if (r->port_lo || r->port_hi != 65535)
		snprintf(ports, sizeof(ports), "%u-%u", r->port_lo,
			 r->port_hi);
	snprintf(buf, len, "%s %s %s %s %s  (%s:%d)",
		 action_name(r->action),
		 r->role == 'c' ? "connect" : r->role == 's' ? "listen" : "*",
		 r->program, addr, ports,
		 i < rules_inline ? "SDP_RULE" : sw_cfg.rules_file, r->line);
}

/* Prints the effective settings: each variable, its value, where from. */
void sw_config_report(FILE *f)
{
	static const char *const paths[] = { "auto", "copy", "read", "write" };
	size_t i;

	fprintf(f, "settings (variable, effective value, origin, meaning):\n");
	fprintf(f, "  %-24s %-12s %-8s %s\n", "SDP_LOG",
		(const char *[]){ "off", "alert", "crit", "error", "warn",
				  "notice", "info", "debug" }[sw_cfg.log_level & 7],
		getenv("SDP_LOG") && *getenv("SDP_LOG") ? "set" : "default",
		"log level");
	for (i = 0; i < sizeof(num_vars) / sizeof(num_vars[0]); i++) {
		const char *v = getenv(num_vars[i].name);

		fprintf(f, "  %-24s %-12lu %-8s %s\n", num_vars[i].name,
			field_get(&num_vars[i]), v && *v ? "set" : "default",
			num_vars[i].what);
	}
	fprintf(f, "  %-24s %-12s %-8s %s\n", "SDP_PATH", paths[sw_cfg.path],
		getenv("SDP_PATH") && *getenv("SDP_PATH") ? "set" : "default",
		"large-send path forced");
	fprintf(f, "rules (first match decides; %s):\n",
		rules_broken ? "BROKEN: every connection stays on TCP" :
			       "in effect");
	fprintf(f, "  file %s%s\n", sw_cfg.rules_file,
		getenv("SDP_RULES") && *getenv("SDP_RULES") ? " (SDP_RULES)" :
							       "");
	for (i = 0; i < (size_t)nrules; i++) {
		char text[512];

		rule_text((int)i, text, sizeof(text));
		fprintf(f, "  %zu. %s\n", i + 1, text);
	}
	if (!rules_broken)
		fprintf(f, "  otherwise: %s (SDP_DEFAULT)\n",
			action_name(rules_default));
}

/*
 * Which rule decides for PROGRAM connecting to (role 'c') or listening on
 * (role 's') addr; prints it and what the switch would do. Returns the
 * action.
 */
int sw_rules_explain(FILE *f, const char *prog, char role,
		     const struct sockaddr *addr)
{
	int i;

	if (rules_broken) {
		fprintf(f, "  the rules have errors: every connection stays on TCP\n");
		return SDP_RULE_TCP;
	}
	for (i = 0; i < nrules; i++) {
		char text[512];

		if (!sdp_rule_match(&rules[i], prog, role, addr))
			continue;
		rule_text(i, text, sizeof(text));
		fprintf(f, "  rule %d matches: %s\n", i + 1, text);
		return rules[i].action;
	}
	fprintf(f, "  no rule matches: the default applies: %s\n",
		action_name(rules_default));
	return rules_default;
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
