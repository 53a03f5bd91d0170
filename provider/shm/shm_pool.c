// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * shm_pool.c - reuse of shared regions between connections to the same peer
 * process: a closed endpoint's own region (with its memfd) and its mapping
 * of the peer's region are kept a few seconds, so that the next connection
 * costs no memfd_create, ftruncate, mmap, page faults or munmap
 * (docs/provider-shm.md, "Region reuse").
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void pooled_free(struct shm_provider *p, struct shm_pooled *e,
			bool put)
{
	munmap(e->h, e->g.size);
	if (e->memfd >= 0)
		close(e->memfd);
	if (put)
		shm_peer_put(p, e->pe);
}

static void pool_remove(struct shm_pooled *pool, uint32_t *n, uint32_t i)
{
	memmove(&pool[i], &pool[i + 1], (*n - i - 1) * sizeof(pool[0]));
	(*n)--;
}

/*
 * pool_lock held. A forked child finds its parent's pools: they are not its
 * own (the parent may reuse any of them), so the child only drops its
 * copies. Then entries past their time or whose peer process is known gone
 * go.
 */
static void pool_tidy(struct shm_provider *p)
{
	uint64_t now = mono_ns();
	uint32_t i;

	if (p->pool_pid != getpid()) {
		for (i = 0; i < p->n_own; i++)
			pooled_free(p, &p->own_pool[i], false);
		for (i = 0; i < p->n_map; i++)
			pooled_free(p, &p->map_pool[i], false);
		if (p->spare.h)
			pooled_free(p, &p->spare, false);
		p->spare.h = NULL;
		p->n_own = p->n_map = 0;
		p->memfds_kept = 0;
		p->pool_pid = getpid();
		return;
	}
	for (i = 0; i < p->n_own;) {
		struct shm_pooled *e = &p->own_pool[i];

		if (e->expires > now && !atomic_load(&e->pe->gone)) {
			i++;
			continue;
		}
		pooled_free(p, e, true);
		pool_remove(p->own_pool, &p->n_own, i);
	}
	for (i = 0; i < p->n_map;) {
		struct shm_pooled *e = &p->map_pool[i];

		if (e->expires > now && !atomic_load(&e->pe->gone)) {
			i++;
			continue;
		}
		pooled_free(p, e, true);
		pool_remove(p->map_pool, &p->n_map, i);
	}
}

/* Puts e in pool (pool_lock held), making room by dropping the oldest. */
static void pool_add(struct shm_provider *p, struct shm_pooled *pool,
		     uint32_t *n, const struct shm_pooled *e)
{
	if (*n == SHM_POOL) {
		pooled_free(p, &pool[0], true);
		pool_remove(pool, n, 0);
	}
	pool[(*n)++] = *e;
}

/* The region as new: the owner's geometry written again (the peer maps
 * the header writable, and one that wrote over it would read its own
 * scribbles as the next connection's geometry), cursors, flags and
 * verdicts zero; the table was cleared at release. */
static void region_reset(struct shm_hdr *h, const struct shm_geom *g)
{
	uint32_t i;

	memcpy(&h->g, g, sizeof(*g));
	atomic_store(&h->ring_prod, 0);
	atomic_store(&h->ring_cons, 0);
	atomic_store(&h->armed, 0);
	atomic_store(&h->stage_prod, 0);
	atomic_store(&h->stage_cons, 0);
	for (i = 0; i < SHM_STAGE_MAX; i++)
		atomic_store_explicit(&h->stage_result[i], 0,
				      memory_order_relaxed);
	atomic_store(&h->closed, 0);
	/* the area a new connection starts with is zero */
	memset(h->area, 0, sizeof(h->area));
	atomic_thread_fence(memory_order_release);
}

/*
 * The region of a new endpoint: a pooled one last shared with the same peer
 * process, once that process has let go of it (closed = SHM_CLOSED_DONE),
 * or a new one. The peer is pe when known (accept), else only the pid of
 * the listener's creator (connect): the ACCEPT must then come from that
 * very process (ep->pool_pe, checked in shm_cm.c). *memfd is what to send;
 * shm_region_sent() after sending.
 */
int shm_region_get(struct shm_provider *p, struct shm_ep *ep,
		   struct shm_peer *pe, pid_t pid, int *memfd)
{
	struct shm_pooled e = { .memfd = -1 };
	bool found = false;
	uint32_t i;
	int ret;

	pthread_mutex_lock(&p->pool_lock);
	pool_tidy(p);
	for (i = 0; i < p->n_own && !found; i++) {
		struct shm_pooled *c = &p->own_pool[i];

		if ((pe ? c->pe != pe : c->pe->pid != pid) ||
		    atomic_load_explicit(&c->h->closed, memory_order_acquire) !=
			    SHM_CLOSED_DONE)
			continue;
		e = *c;
		pool_remove(p->own_pool, &p->n_own, i);
		found = true;
	}
	pthread_mutex_unlock(&p->pool_lock);
	/* by pid alone: the pidfd tells whether it is still that process */
	if (found && !pe && shm_peer_gone(e.pe)) {
		pooled_free(p, &e, true);
		found = false;
	}
	if (found) {
		region_reset(e.h, &e.g);
		ep->own = e.h;
		ep->og = e.g;
		ep->memfd = e.memfd;
		if (pe)
			shm_peer_put(p, e.pe);
		else
			ep->pool_pe = e.pe;
		pthread_mutex_lock(&p->pool_lock);
		p->memfds_kept++;
		pthread_mutex_unlock(&p->pool_lock);
		*memfd = e.memfd;
		return 0;
	}
	/* a connect takes the region made ahead, if there is one: the peer
	 * waits on its listener meanwhile (shm_region_spare_fill) */
	pthread_mutex_lock(&p->pool_lock);
	if (!pe && p->spare.h) {
		e = p->spare;
		p->spare.h = NULL;
		found = true;
	}
	pthread_mutex_unlock(&p->pool_lock);
	if (found) {
		ep->own = e.h;
		ep->og = e.g;
		*memfd = e.memfd;
		ret = 0;
	} else {
		ret = shm_region_create(p, ep, memfd);
	}
	if (ret)
		return ret;
	/* only so many live endpoints keep an fd for reuse: 10,000 idle
	 * connections must not cost 10,000 fds */
	pthread_mutex_lock(&p->pool_lock);
	if (p->memfds_kept < SHM_MEMFD_KEEP && shm_fd_spare(*memfd)) {
		ep->memfd = *memfd;
		p->memfds_kept++;
	}
	pthread_mutex_unlock(&p->pool_lock);
	return 0;
}

/* The memfd went to the peer: closed unless the endpoint keeps it. */
void shm_region_sent(struct shm_ep *ep, int memfd)
{
	if (memfd >= 0 && ep->memfd != memfd)
		close(memfd);
}

/*
 * Maps the peer's region (ep->pe known): the mapping kept from an earlier
 * endpoint with this peer process when the memfd is the same file and its
 * geometry unchanged, else a new one (shm_region_map checks it).
 */
int shm_region_map_peer(struct shm_ep *ep, int memfd)
{
	struct shm_provider *p = ep->prov;
	struct shm_pooled e = { .memfd = -1 };
	struct shm_geom g;
	struct stat st;
	const char *why;
	bool found = false;
	uint32_t i;

	if (fstat(memfd, &st))
		return -errno;
	/* a kept mapping stays safe only while its file cannot shrink:
	 * checked on every file the peer sends, kept or not */
	if (shm_region_trust(memfd, &why)) {
		shm_log_limited(p, 3, "peer %d's shared region is %s: refused",
			(int)(ep->pe ? ep->pe->pid : 0), why);
		return -EPERM;
	}
	ep->peer_dev = st.st_dev;
	ep->peer_ino = st.st_ino;
	pthread_mutex_lock(&p->pool_lock);
	pool_tidy(p);
	for (i = 0; i < p->n_map && !found; i++) {
		struct shm_pooled *c = &p->map_pool[i];

		if (c->pe != ep->pe || c->dev != st.st_dev ||
		    c->ino != st.st_ino)
			continue;
		e = *c;
		pool_remove(p->map_pool, &p->n_map, i);
		found = true;
	}
	pthread_mutex_unlock(&p->pool_lock);
	if (found) {
		if (pread(memfd, &g, sizeof(g), 0) == sizeof(g) &&
		    !memcmp(&g, &e.g, sizeof(g)) &&
		    (uint64_t)st.st_size == e.g.size) {
			ep->peer = e.h;
			ep->pg = e.g;
			shm_peer_put(p, e.pe);
			return 0;
		}
		pooled_free(p, &e, true);
	}
	return shm_region_map(ep, memfd);
}

/* Our table as the next connection must see it: every entry without
 * rights, its generation moved on, so no descriptor given out survives. */
static void table_clear(struct shm_ep *ep)
{
	struct shm_ent *t = (struct shm_ent *)((uint8_t *)ep->own +
					       ep->og.table_off);
	uint32_t i;

	if (!ep->rmr)
		return;
	for (i = 0; i < ep->og.table_ents; i++) {
		if (!ep->rmr[i])
			continue;
		atomic_store_explicit(&t[i].access, 0, memory_order_release);
		atomic_store_explicit(&t[i].gen, ep->rmr[i]->gen + 1,
				      memory_order_release);
	}
}

/*
 * The endpoint is going (before its registrations are freed): its regions
 * go to the pools when it was connected to a live peer process, by the
 * process that made it, and nothing about its set-up was suspicious; else
 * they are unmapped.
 */
void shm_region_release(struct shm_ep *ep)
{
	struct shm_provider *p = ep->prov;
	bool ok = ep->pe && !ep->retire && ep->owner_pid == getpid() &&
		  !atomic_load(&ep->pe->gone);
	struct shm_pooled e = { .memfd = -1, .pe = ep->pe,
				.expires = mono_ns() + SHM_POOL_TTL_NS };
	bool keep_own = ok && ep->own && ep->memfd >= 0;
	bool keep_map = ok && ep->peer && ep->peer_ino;

	if (keep_own)
		table_clear(ep);
	pthread_mutex_lock(&p->pool_lock);
	pool_tidy(p);
	if (ep->memfd >= 0 && ep->owner_pid == getpid() && p->memfds_kept)
		p->memfds_kept--;
	if (keep_own) {
		e.h = ep->own;
		e.g = ep->og;
		e.memfd = ep->memfd;
		shm_peer_hold(p, ep->pe);
		pool_add(p, p->own_pool, &p->n_own, &e);
		ep->own = NULL;
		ep->memfd = -1;
	}
	if (keep_map) {
		e.h = ep->peer;
		e.g = ep->pg;
		e.memfd = -1;
		e.dev = ep->peer_dev;
		e.ino = ep->peer_ino;
		shm_peer_hold(p, ep->pe);
		pool_add(p, p->map_pool, &p->n_map, &e);
		ep->peer = NULL;
	}
	pthread_mutex_unlock(&p->pool_lock);
	if (ep->memfd >= 0)
		close(ep->memfd);
	ep->memfd = -1;
	if (ep->pool_pe)
		shm_peer_put(p, ep->pool_pe);
	ep->pool_pe = NULL;
	shm_region_unmap(ep);
}

/* Makes a region ahead for the next connect, so that its handshake sends
 * HELLO right after the rendezvous (the peer's listener has accepted and
 * waits for it) instead of after a memfd_create, ftruncate and mmap. */
void shm_region_spare_fill(struct shm_provider *p)
{
	struct shm_pooled e = { .memfd = -1 };
	bool have;

	pthread_mutex_lock(&p->pool_lock);
	pool_tidy(p);
	have = p->spare.h != NULL;
	pthread_mutex_unlock(&p->pool_lock);
	if (have || shm_region_new(p, &e.h, &e.g, &e.memfd))
		return;
	pthread_mutex_lock(&p->pool_lock);
	if (!p->spare.h && p->pool_pid == getpid()) {
		p->spare = e;
		e.h = NULL;
	}
	pthread_mutex_unlock(&p->pool_lock);
	if (e.h)
		pooled_free(p, &e, false);
}

/* At cleanup: everything pooled goes. */
void shm_pool_free(struct shm_provider *p)
{
	uint32_t i;

	pthread_mutex_lock(&p->pool_lock);
	if (p->pool_pid == getpid()) {
		for (i = 0; i < p->n_own; i++)
			pooled_free(p, &p->own_pool[i], true);
		for (i = 0; i < p->n_map; i++)
			pooled_free(p, &p->map_pool[i], true);
		if (p->spare.h)
			pooled_free(p, &p->spare, false);
	}
	p->spare.h = NULL;
	p->n_own = p->n_map = 0;
	pthread_mutex_unlock(&p->pool_lock);
	pthread_mutex_destroy(&p->pool_lock);
}
