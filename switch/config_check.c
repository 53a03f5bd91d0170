/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * config_check.c - what `sdp-run --check` and `sdp-run --explain` print: the
 * switch, started in a harmless program with SDP_CHECK set, reports the
 * configuration it loaded (settings, rules, providers, statistics, log)
 * and, for --explain, which rule decides a connection and what it does.
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_check.h"
#include "config.h"
#include "log.h"
#include "providers.h"
#include "rules.h"
#include "stats.h"

/* Every variable the switch or its providers read (docs/configuration.md). */
static const char *const known_vars[] = {
	"SDP_LOG", "SDP_LOG_FILE", "SDP_RULES", "SDP_RULE", "SDP_DEFAULT",
	"SDP_PROVIDERS", "SDP_PROVIDER_DIR", "SDP_PROVIDER_CATALOG",
	"SDP_STAT_DIR", "SDP_STAT_OFF", "SDP_PATH", "SDP_SPIN_US",
	"SDP_SPIN_MAX_US", "SDP_CROWD_PCT", "SDP_MSG_SIZE", "SDP_RECV_BUFS",
	"SDP_RECV_BUFS_IDLE", "SDP_IDLE_MS", "SDP_SEND_BUFS", "SDP_RDMA_MIN",
	"SDP_STAGING_SIZE", "SDP_WDATA_PIECE", "SDP_COALESCE",
	"SDP_COALESCE_US", "SDP_XSLOT", "SDP_XSLOT_NB_US",
	"SDP_XSLOT_BLOCK_US", "SDP_XSLOT_SPLIT", "SDP_XSLOT_CLAIM_MS",
	"SDP_UPGRADE_AFTER_US", "SDP_UPGRADE_AFTER_BYTES",
	"SDP_UPGRADE_TIMEOUT_MS", "SDP_UPGRADE_MAX", "SDP_SHM_NO_CMA", "SDP_VERBS_MR_CACHE",
	"SDP_VERBS_MR_CACHE_KEEP", "SDP_VERBS_NO_RDMA_READ",
	"SDP_CHECK", "SDP_CHECK_EXPLAIN",
};

/* SDP_* variables that nothing reads: most often a misspelt name. */
static void unknown_vars(FILE *f)
{
	extern char **environ;
	char **e;
	size_t i, n;
	int any = 0;

	for (e = environ; e && *e; e++) {
		if (strncmp(*e, "SDP_", 4))
			continue;
		n = strcspn(*e, "=");
		for (i = 0; i < sizeof(known_vars) / sizeof(known_vars[0]); i++)
			if (strlen(known_vars[i]) == n &&
			    !strncmp(known_vars[i], *e, n))
				break;
		if (i < sizeof(known_vars) / sizeof(known_vars[0]))
			continue;
		if (!any++)
			fprintf(f, "note: set but read by nothing (misspelt?):");
		fprintf(f, " %.*s", (int)n, *e);
	}
	if (any)
		fprintf(f, "\n");
}

/* The catalog's providers: loaded and usable, without a device, or not
 * loaded (and why). Returns how many are usable. */
static int providers_report(FILE *f, int *problems)
{
	struct sdp_catalog_entry ents[SDP_CATALOG_MAX];
	char err[512];
	int n, i, k, usable = 0;

	fprintf(f, "providers (directory %s):\n", sdp_provider_dir());
	n = sdp_catalog_read(ents, SDP_CATALOG_MAX, err, sizeof(err));
	if (n < 0) {
		fprintf(f, "  ERROR %s\n", err);
		(*problems)++;
		return 0;
	}
	for (i = 0; i < n; i++) {
		struct sw_provider *p = NULL;

		for (k = 0; k < sw_nproviders; k++)
			if (!strcmp(sw_providers[k].mod.name, ents[i].name))
				p = &sw_providers[k];
		if (p && p->usable) {
			fprintf(f, "  %-8s usable: %s\n", ents[i].name,
				p->mod.info.description);
			usable++;
		} else if (p) {
			fprintf(f, "  %-8s loaded, no device: %s\n",
				ents[i].name, p->mod.status_msg);
		} else {
			struct sdp_module m;

			err[0] = 0;
			if (sdp_module_load(ents[i].name, ents[i].path,
					    ents[i].options[0] ?
						    ents[i].options : NULL,
					    &m, err, sizeof(err)) == 0)
				sdp_module_unload(&m);
			fprintf(f, "  %-8s not loaded: %s\n", ents[i].name,
				err[0] ? err : "over the provider limit");
		}
	}
	if (!usable) {
		fprintf(f, "  ERROR no provider is usable: every connection stays on TCP\n");
		(*problems)++;
	}
	return usable;
}

/* SDP_CHECK_EXPLAIN="PROGRAM HOST:PORT": the rule and the outcome, for a
 * connect to each address HOST has, and for a listener on PORT. */
static void explain(FILE *f, const char *spec, int usable, int *problems)
{
	char prog[128], hostport[300], *colon, *host, *port;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int rc, action;

	if (sscanf(spec, "%127s %299s", prog, hostport) != 2 ||
	    !(colon = strrchr(hostport, ':')) || colon == hostport) {
		fprintf(f, "ERROR --explain PROGRAM HOST:PORT: got '%s'\n",
			spec);
		(*problems)++;
		return;
	}
	*colon = 0;
	host = hostport;
	port = colon + 1;
	if (host[0] == '[' && colon[-1] == ']') {
		colon[-1] = 0;
		host++;
	}
	/* the program's short name, as the rules see it */
	if (strrchr(prog, '/'))
		memmove(prog, strrchr(prog, '/') + 1,
			strlen(strrchr(prog, '/')));
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc) {
		fprintf(f, "ERROR --explain: %s:%s: %s\n", host, port,
			gai_strerror(rc));
		(*problems)++;
		return;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		char ip[64], serv[16];

		if (getnameinfo(ai->ai_addr, ai->ai_addrlen, ip, sizeof(ip),
				serv, sizeof(serv),
				NI_NUMERICHOST | NI_NUMERICSERV))
			continue;
		fprintf(f, "%s connecting to %s port %s:\n", prog, ip, serv);
		action = sw_rules_explain(f, prog, 'c', ai->ai_addr);
		if (action == SDP_RULE_TCP)
			fprintf(f, "  => plain TCP: the switch leaves this connection alone (fallback reason: rule)\n");
		else if (!usable)
			fprintf(f, "  => plain TCP: no provider is usable (fallback reason: %s)\n",
				sw_nproviders ? "no-device" : "no-provider");
		else if (action == SDP_RULE_SAN)
			fprintf(f, "  => the SAN or nothing: carried when a switch listens at the peer through a provider both share, else the connect fails with ECONNREFUSED\n");
		else
			fprintf(f, "  => the SAN when a switch listens at the peer through a provider both share (tried in catalog order), else plain TCP (fallback reason: no-peer-switch)\n");
	}
	for (ai = res; ai; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		fprintf(f, "%s listening on port %s:\n", prog, port);
		action = sw_rules_explain(f, prog, 's', ai->ai_addr);
		fprintf(f, "  => %s\n", action == SDP_RULE_TCP || !usable ?
			"plain TCP listener: accepted connections stay TCP" :
			"provider listeners beside it: each accepted connection whose client runs the switch is carried");
		break;
	}
	freeaddrinfo(res);
}

void sw_check_run(void)
{
	FILE *f = stdout;
	const char *ex = getenv("SDP_CHECK_EXPLAIN");
	const char *off = sw_stats_off_reason();
	char dir[256];
	int problems = sw_config_errors(), usable;

	fprintf(f, "sdp-switch configuration (pid %d)\n", (int)getpid());
	sw_config_report(f);
	usable = providers_report(f, &problems);
	sw_stats_dir(dir, sizeof(dir));
	if (off[0])
		fprintf(f, "statistics: off: %s\n", off);
	else
		fprintf(f, "statistics: published in %s\n", dir);
	fprintf(f, "log: %s\n", sw_log_place());
	unknown_vars(f);
	if (ex && *ex)
		explain(f, ex, usable, &problems);
	if (problems)
		fprintf(f, "%d problem%s found (the errors above, and on stderr)\n",
			problems, problems == 1 ? "" : "s");
	else
		fprintf(f, "configuration OK\n");
	fflush(f);
	_exit(problems ? 1 : 0);
}
