/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * providers.h - the provider modules the switch loaded at start-up
 * (providers.c).
 */
#ifndef SW_PROVIDERS_H
#define SW_PROVIDERS_H

#include <stdbool.h>

#include "sdp_loader.h"
#include "sock.h"

struct sw_provider {
	struct sdp_module mod;
	int index;		/* position in sw_providers */
	bool usable;
};

extern struct sw_provider sw_providers[SW_MAX_PROVIDERS];
extern int sw_nproviders;

/* A loaded provider by its name, or NULL. */
struct sw_provider *sw_provider_by_name(const char *name);

#endif /* SW_PROVIDERS_H */
