/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fallback_names.c - the name of each fallback reason, as logs, sdp-stat and
 * docs/fallback-reasons.md spell it. Depends on nothing else of the switch,
 * so sdp-stat links this object instead of keeping a copy of the table.
 */
#include "fallback.h"

const char *sdp_fallback_name(int reason)
{
	static const char *const names[SDP_FB_MAX] = {
		[SDP_FB_NONE] = "none",
		[SDP_FB_RULE] = "rule",
		[SDP_FB_NO_PROVIDER] = "no-provider",
		[SDP_FB_NO_DEVICE] = "no-device",
		[SDP_FB_NO_PEER_SWITCH] = "no-peer-switch",
		[SDP_FB_NO_COMMON] = "no-common-provider",
		[SDP_FB_VERSION] = "version",
		[SDP_FB_LOCAL_SETUP] = "local-setup",
		[SDP_FB_PROVIDER_CONNECT] = "provider-connect",
		[SDP_FB_AUTH] = "auth",
		[SDP_FB_TIMEOUT] = "timeout",
		[SDP_FB_REGISTRATION] = "registration",
		[SDP_FB_PEER_ABANDONED] = "peer-abandoned",
		[SDP_FB_BAD_HELLO] = "bad-hello",
		[SDP_FB_RESERVED] = "reserved",
		[SDP_FB_PEER_FALLBACK] = "peer-fallback",
		[SDP_FB_CUT] = "cut",
		[SDP_FB_ENDED] = "ended",
		[SDP_FB_BLIND] = "blind",
		[SDP_FB_DESCRIPTORS] = "descriptors",
		[SDP_FB_HANDED] = "handed-over",
	};

	if (reason < 0 || reason >= SDP_FB_MAX || !names[reason])
		return "unknown";
	return names[reason];
}
