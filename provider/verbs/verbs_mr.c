// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * verbs_mr.c - memory registration of the verbs provider: local
 * registrations (one ibv_mr per device) kept in a registration cache that
 * MemoryRegistrationCacheCallback invalidates, and RDMA registrations
 * exposed to one peer, never cached, dead the moment they are deregistered.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "verbs.h"

static int ibv_access_of(uint32_t access)
{
	int a = 0;

	if (access & SDP_ACCESS_LOCAL_WRITE)
		a |= IBV_ACCESS_LOCAL_WRITE;
	if (access & SDP_ACCESS_REMOTE_READ)
		a |= IBV_ACCESS_REMOTE_READ;
	if (access & SDP_ACCESS_REMOTE_WRITE)
		a |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
	return a;
}

static void mr_release(struct verbs_provider *vp, struct verbs_mr *m)
{
	int i;

	for (i = 0; i < vp->ndev; i++)
		if (m->mr[i])
			ibv_dereg_mr(m->mr[i]);
	free(m);
}

static void cache_unlink(struct verbs_provider *vp, struct verbs_mr *m)
{
	if (m->prev)
		m->prev->next = m->next;
	else
		vp->cache_head = m->next;
	if (m->next)
		m->next->prev = m->prev;
	m->prev = m->next = NULL;
	vp->cache_count--;
}

static void cache_push_front(struct verbs_provider *vp, struct verbs_mr *m)
{
	m->prev = NULL;
	m->next = vp->cache_head;
	if (m->next)
		m->next->prev = m;
	vp->cache_head = m;
	vp->cache_count++;
}

/* Drops unused entries from the tail until the cache fits its limit. */
static void cache_trim(struct verbs_provider *vp)
{
	struct verbs_mr *m, *prev, *tail = vp->cache_head;

	while (tail && tail->next)
		tail = tail->next;
	for (m = tail; m && vp->cache_count > vp->opt.cache_max_entries;
	     m = prev) {
		prev = m->prev;
		if (m->refs)
			continue;
		cache_unlink(vp, m);
		mr_release(vp, m);
	}
}

int verbs_register_memory(struct sdp_provider *p, void *addr, size_t len,
			  uint32_t access, struct sdp_mr **mrp)
{
	struct verbs_provider *vp = (struct verbs_provider *)p;
	struct verbs_mr *m;
	int i, ret;

	if (!addr || !len || !mrp || (access & ~SDP_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	access &= SDP_ACCESS_LOCAL_WRITE;
	pthread_mutex_lock(&vp->cache_lock);
	if (vp->opt.mr_cache) {
		for (m = vp->cache_head; m; m = m->next) {
			if (m->stale || (m->access & access) != access ||
			    (char *)addr < (char *)m->addr ||
			    (char *)addr + len > (char *)m->addr + m->len)
				continue;
			m->refs++;
			cache_unlink(vp, m);
			cache_push_front(vp, m);
			pthread_mutex_unlock(&vp->cache_lock);
			*mrp = (struct sdp_mr *)m;
			return 0;
		}
	}
	pthread_mutex_unlock(&vp->cache_lock);

	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->addr = addr;
	m->len = len;
	m->access = access;
	m->refs = 1;
	for (i = 0; i < vp->ndev; i++) {
		int a = ibv_access_of(access);

		/* iWARP: an RDMA read's response is placed like a remote
		 * write, so its sink needs remote-write access */
		if (vp->dev[i].iwarp && (access & SDP_ACCESS_LOCAL_WRITE))
			a |= IBV_ACCESS_REMOTE_WRITE;
		m->mr[i] = ibv_reg_mr(vp->dev[i].pd, addr, len, a);
		if (!m->mr[i]) {
			ret = verbs_errno(ENOMEM);
			vlog(vp, 6, "ibv_reg_mr(%p, %zu) failed: %s", addr,
			     len, strerror(-ret));
			goto release;
		}
	}
	pthread_mutex_lock(&vp->cache_lock);
	if (vp->opt.mr_cache) {
		cache_push_front(vp, m);
		cache_trim(vp);
	}
	pthread_mutex_unlock(&vp->cache_lock);
	*mrp = (struct sdp_mr *)m;
	return 0;

release:
	mr_release(vp, m);
	return ret;
}

/*
 * The cache always shares a registration among holders of the same range.
 * With cache_keep, a registration whose last holder lets go also stays
 * registered for the next RegisterMemory of the range, until the cache
 * callback says the memory goes away or the cache is over its limit: only
 * safe when the caller reports every free/munmap of registered memory
 * through the callback (a cached MR pins the old pages, and memory mapped
 * again at the same address would silently not be the registered memory).
 */
int verbs_deregister_memory(struct sdp_provider *p, struct sdp_mr *mr)
{
	struct verbs_provider *vp = (struct verbs_provider *)p;
	struct verbs_mr *m = (struct verbs_mr *)mr;

	if (!m)
		return -EINVAL;
	pthread_mutex_lock(&vp->cache_lock);
	if (m->refs <= 0) {
		pthread_mutex_unlock(&vp->cache_lock);
		return -EINVAL;
	}
	if (--m->refs == 0 &&
	    (!vp->opt.mr_cache || !vp->opt.cache_keep || m->stale)) {
		if (vp->opt.mr_cache)
			cache_unlink(vp, m);
		pthread_mutex_unlock(&vp->cache_lock);
		mr_release(vp, m);
		return 0;
	}
	if (!m->refs)
		cache_trim(vp);
	pthread_mutex_unlock(&vp->cache_lock);
	return 0;
}

int verbs_mr_cache_callback(struct sdp_provider *p, void *addr, size_t len)
{
	struct verbs_provider *vp = (struct verbs_provider *)p;
	struct verbs_mr *m, *next;
	char *lo = addr, *hi = (char *)addr + len;

	if (!len)
		return 0;
	pthread_mutex_lock(&vp->cache_lock);
	for (m = vp->cache_head; m; m = next) {
		next = m->next;
		if ((char *)m->addr >= hi || (char *)m->addr + m->len <= lo)
			continue;
		if (m->refs) {
			/* released by its last holder */
			m->stale = true;
			continue;
		}
		cache_unlink(vp, m);
		mr_release(vp, m);
	}
	pthread_mutex_unlock(&vp->cache_lock);
	return 0;
}

void verbs_mr_cache_flush(struct verbs_provider *vp)
{
	struct verbs_mr *m;

	pthread_mutex_lock(&vp->cache_lock);
	while ((m = vp->cache_head)) {
		cache_unlink(vp, m);
		mr_release(vp, m);
	}
	pthread_mutex_unlock(&vp->cache_lock);
}

int verbs_register_rdma_memory(struct sdp_ep *ep, void *addr, size_t len,
			       uint32_t access, struct sdp_rdma_desc *desc,
			       struct sdp_rmr **rmrp)
{
	uint32_t remote = SDP_ACCESS_REMOTE_READ | SDP_ACCESS_REMOTE_WRITE;
	struct sdp_rmr *r;
	int ret;

	if (!ep || !addr || !len || !desc || !rmrp || !(access & remote))
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->ep = ep;
	r->mr = ibv_reg_mr(ep->vp->dev[ep->devi].pd, addr, len,
			   ibv_access_of(access));
	if (!r->mr) {
		ret = verbs_errno(ENOMEM);
		free(r);
		return ret;
	}
	desc->addr = (uintptr_t)addr;
	desc->length = len;
	desc->key = r->mr->rkey;
	desc->access = access & remote;
	desc->tag = verbs_desc_tag(desc);
	*rmrp = r;
	return 0;
}

int verbs_deregister_rdma_memory(struct sdp_ep *ep, struct sdp_rmr *rmr)
{
	int ret;

	if (!ep || !rmr || rmr->ep != ep)
		return -EINVAL;
	ret = ibv_dereg_mr(rmr->mr);
	if (ret)
		return -ret;
	free(rmr);
	return 0;
}
