/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * peer_seen.c - discovery's memory of peers across a wire: which address and
 * port a switch answered at lately, so that many connections to one server
 * cost one probe, not one each (docs/protocol.md 2.1).
 */
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>

#include "peer_seen.h"

/*
 * A probe across a wire that its listener's program does not answer at once
 * (the program is not in accept() when it comes) counts as present only
 * after the provider's whole wait, a second on verbs, so a client that
 * opens many connections at once would wait that long in each connect().
 * A sighting (a probe's answer, or a server's provider connection carrying
 * the key of a TCP connection to that address) stands for SW_SEEN_TTL_NS;
 * a client whose server never connected drops it. The lock is only tried:
 * a busy (or, after fork, orphaned) lock is a miss, and the probe.
 */
#define SEEN_SLOTS 32

struct seen_entry {
	uint64_t seen_ns;	/* 0: free */
	int prov;
	struct sockaddr_storage addr;	/* family, address and port only */
};

static struct seen_entry seen[SEEN_SLOTS];
static unsigned int seen_next;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

/* addr reduced to family, address and port (no flow info, no scope on
 * IPv4); false for what is neither IPv4 nor IPv6. */
static bool key_of(const struct sockaddr *addr, socklen_t len,
		   struct sockaddr_storage *k)
{
	memset(k, 0, sizeof(*k));
	if (!addr)
		return false;
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
		struct sockaddr_in *o = (struct sockaddr_in *)k;

		o->sin_family = AF_INET;
		o->sin_port = a->sin_port;
		o->sin_addr = a->sin_addr;
		return true;
	}
	if (addr->sa_family == AF_INET6 &&
	    len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *a =
			(const struct sockaddr_in6 *)addr;
		struct sockaddr_in6 *o = (struct sockaddr_in6 *)k;

		o->sin6_family = AF_INET6;
		o->sin6_port = a->sin6_port;
		o->sin6_addr = a->sin6_addr;
		o->sin6_scope_id = a->sin6_scope_id;
		return true;
	}
	return false;
}

static struct seen_entry *find(int prov, const struct sockaddr_storage *k)
{
	int i;

	for (i = 0; i < SEEN_SLOTS; i++)
		if (seen[i].seen_ns && seen[i].prov == prov &&
		    !memcmp(&seen[i].addr, k, sizeof(*k)))
			return &seen[i];
	return NULL;
}

bool sw_seen_fresh(int prov, const struct sockaddr *addr, socklen_t len,
		   uint64_t now)
{
	struct sockaddr_storage k;
	struct seen_entry *e;
	bool hit = false;

	if (!key_of(addr, len, &k) || pthread_mutex_trylock(&seen_lock))
		return false;
	e = find(prov, &k);
	if (e && now >= e->seen_ns && now - e->seen_ns < SW_SEEN_TTL_NS)
		hit = true;
	pthread_mutex_unlock(&seen_lock);
	return hit;
}

void sw_seen_note(int prov, const struct sockaddr *addr, socklen_t len,
		  uint64_t now)
{
	struct sockaddr_storage k;
	struct seen_entry *e;

	if (!now || !key_of(addr, len, &k) ||
	    pthread_mutex_trylock(&seen_lock))
		return;
	e = find(prov, &k);
	if (!e)
		e = &seen[seen_next++ % SEEN_SLOTS];
	e->seen_ns = now;
	e->prov = prov;
	e->addr = k;
	pthread_mutex_unlock(&seen_lock);
}

void sw_seen_drop(int prov, const struct sockaddr *addr, socklen_t len)
{
	struct sockaddr_storage k;
	struct seen_entry *e;

	/* one lost to a busy lock still ends with SW_SEEN_TTL_NS */
	if (!key_of(addr, len, &k) || pthread_mutex_trylock(&seen_lock))
		return;
	e = find(prov, &k);
	if (e)
		e->seen_ns = 0;
	pthread_mutex_unlock(&seen_lock);
}
