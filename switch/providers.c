/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * providers.c - the switch's start-up in a process: settings, then the
 * provider modules of the catalog, loaded once (sw_init).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "providers.h"
#include "sock.h"
#include "stats.h"
#include "wire.h"

struct sw_provider sw_providers[SW_MAX_PROVIDERS];
int sw_nproviders;
static bool sw_active;
static pthread_once_t sw_once = PTHREAD_ONCE_INIT;

static void provider_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void provider_log(int level, const char *fmt, ...)
{
	char buf[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	sw_log(level, "provider: %s", buf);
}

static void load_providers(void)
{
	struct sdp_catalog_entry ents[SDP_CATALOG_MAX];
	char err[512];
	struct sw_proc_stats *ps = sw_stats_proc();
	int n, i;
	size_t used = 0;

	n = sdp_catalog_read(ents, SDP_CATALOG_MAX, err, sizeof(err));
	if (n < 0) {
		SW_ERR("provider catalog: %s; the switch stays off (all TCP)",
		       err);
		return;
	}
	for (i = 0; i < n && sw_nproviders < SW_MAX_PROVIDERS; i++) {
		struct sw_provider *p = &sw_providers[sw_nproviders];
		char opts[300];

		snprintf(opts, sizeof(opts), "%s", ents[i].options);
		if (sdp_module_load(ents[i].name, ents[i].path,
				    opts[0] ? opts : NULL, &p->mod, err,
				    sizeof(err)) < 0) {
			/* a catalog entry whose module is absent is common
			 * (verbs without rdma-core): log at info level */
			SW_INFO("%s", err);
			continue;
		}
		p->index = sw_nproviders++;
		p->usable = p->mod.status == 0;
		if (!p->usable)
			SW_INFO("provider %s: %s; connections fall back to TCP",
				p->mod.name, p->mod.status_msg);
		if (ps && used < sizeof(ps->providers) - 1)
			used += snprintf(ps->providers + used,
					 sizeof(ps->providers) - used,
					 "%s%s%s", used ? "," : "",
					 p->mod.name,
					 p->usable ? "" : "(no device)");
	}
	(void)provider_log;
}

static void sw_init_once(void)
{
	int i;

	sw_config_load();
	sw_log_open();
	sw_stats_init();
	load_providers();
	for (i = 0; i < sw_nproviders; i++)
		if (sw_providers[i].usable)
			sw_active = true;
	SW_DBG("switch %s with %d provider(s)", sw_active ? "on" : "off",
	       sw_nproviders);
}

bool sw_init(void)
{
	pthread_once(&sw_once, sw_init_once);
	return sw_active;
}

struct sw_provider *sw_provider_by_name(const char *name)
{
	int i;

	for (i = 0; i < sw_nproviders; i++)
		if (sw_providers[i].usable &&
		    !strncmp(sw_providers[i].mod.name, name,
			     SDP_PROVIDER_NAME_LEN))
			return &sw_providers[i];
	return NULL;
}
