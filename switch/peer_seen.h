/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * peer_seen.h - the peers across a wire whose switch was seen lately
 * (peer_seen.c): discovery's memory for providers that cannot name a
 * listener's owner.
 */
#ifndef SW_PEER_SEEN_H
#define SW_PEER_SEEN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* How long a sighting stands (ns): as long as a same-host proof. */
#define SW_SEEN_TTL_NS 1000000000ull

/* Was a switch seen at addr (address and port) through provider prov
 * within SW_SEEN_TTL_NS before now? */
bool sw_seen_fresh(int prov, const struct sockaddr *addr, socklen_t len,
		   uint64_t now);
/* A switch was seen at addr through prov at now (a probe's answer, or its
 * provider connection came with the proof of a TCP connection to addr). */
void sw_seen_note(int prov, const struct sockaddr *addr, socklen_t len,
		  uint64_t now);
/* What was seen at addr through prov no longer stands. */
void sw_seen_drop(int prov, const struct sockaddr *addr, socklen_t len);

#endif /* SW_PEER_SEEN_H */
