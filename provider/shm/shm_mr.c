// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * shm_mr.c - registrations: local buffers (RegisterMemory) and RDMA regions
 * published to the peer in the endpoint's registration table (slot = key,
 * generation = tag), and the checks made before any RDMA byte moves.
 */
#include <errno.h>
#include <stdlib.h>

#include "shm.h"

static struct shm_ent *own_ent(struct shm_ep *ep, uint32_t slot)
{
	return (struct shm_ent *)((uint8_t *)ep->own + ep->og.table_off) +
	       slot;
}

int shm_register_memory(struct sdp_provider *p, void *addr, size_t len,
			uint32_t access, struct sdp_mr **out)
{
	struct shm_mr *mr;

	if (!p || !addr || !len || !out || (access & ~SDP_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (shm_fault_reg(shm_prov(p)))
		return -ENOMEM;
	mr = malloc(sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->addr = addr;
	mr->len = len;
	mr->access = access;
	*out = (struct sdp_mr *)mr;
	return 0;
}

int shm_deregister_memory(struct sdp_provider *p, struct sdp_mr *mr)
{
	if (!mr)
		return -EINVAL;
	free(mr);
	return 0;
}

int shm_register_rdma_memory(struct sdp_ep *e, void *addr, size_t len,
			     uint32_t access, struct sdp_rdma_desc *desc,
			     struct sdp_rmr **out)
{
	const uint32_t remote = SDP_ACCESS_REMOTE_READ |
				SDP_ACCESS_REMOTE_WRITE;
	struct shm_ep *ep = (struct shm_ep *)e;
	struct shm_rmr *rmr;
	struct shm_ent *ent;
	uint32_t i, n;
	int ret;

	if (!ep || !addr || !len || !desc || !out ||
	    (access & ~(remote | SDP_ACCESS_LOCAL_WRITE)) ||
	    !(access & remote) || (uintptr_t)addr + len < (uintptr_t)addr)
		return -EINVAL;
	if (shm_fault_reg(ep->prov))
		return -ENOMEM;
	access &= remote;
	pthread_mutex_lock(&ep->lock);
	ret = ep->state == SHM_EP_DEAD ? ep->dead_status : 0;
	if (ret || !ep->own) {
		ret = ret ? ret : -ENOTCONN;
		goto unlock;
	}
	n = ep->og.table_ents;
	if (!ep->rmr) {
		ep->rmr = calloc(n, sizeof(*ep->rmr));
		if (!ep->rmr) {
			ret = -ENOMEM;
			goto unlock;
		}
	}
	for (i = 0; i < n && ep->rmr[i]; i++)
		;
	if (i == n) {
		shm_log(ep->prov, 4,
			"registration table full (%u entries); raise option rdma_regs",
			n);
		ret = -ENOMEM;
		goto unlock;
	}
	rmr = malloc(sizeof(*rmr));
	if (!rmr) {
		ret = -ENOMEM;
		goto unlock;
	}
	ent = own_ent(ep, i);
	rmr->ep = ep;
	rmr->slot = i;
	rmr->gen = atomic_load_explicit(&ent->gen, memory_order_relaxed) + 1;
	rmr->addr = (uintptr_t)addr;
	rmr->len = len;
	rmr->access = access;
	ep->rmr[i] = rmr;
	ent->addr = rmr->addr;
	ent->len = rmr->len;
	atomic_store_explicit(&ent->gen, rmr->gen, memory_order_release);
	atomic_store_explicit(&ent->access, access, memory_order_release);
	desc->addr = rmr->addr;
	desc->length = len;
	desc->key = i;
	desc->access = access;
	desc->tag = rmr->gen;
	*out = (struct sdp_rmr *)rmr;
unlock:
	pthread_mutex_unlock(&ep->lock);
	return ret;
}

/* The descriptor dies at once: rights cleared, then the generation moves. */
int shm_deregister_rdma_memory(struct sdp_ep *e, struct sdp_rmr *r)
{
	struct shm_ep *ep = (struct shm_ep *)e;
	struct shm_rmr *rmr = (struct shm_rmr *)r;
	struct shm_ent *ent;

	if (!ep || !rmr || rmr->ep != ep)
		return -EINVAL;
	pthread_mutex_lock(&ep->lock);
	if (!ep->rmr || rmr->slot >= ep->og.table_ents ||
	    ep->rmr[rmr->slot] != rmr) {
		pthread_mutex_unlock(&ep->lock);
		return -EINVAL;
	}
	ent = own_ent(ep, rmr->slot);
	atomic_store_explicit(&ent->access, 0, memory_order_release);
	atomic_store_explicit(&ent->gen, rmr->gen + 1, memory_order_release);
	ep->rmr[rmr->slot] = NULL;
	pthread_mutex_unlock(&ep->lock);
	free(rmr);
	return 0;
}

void shm_rmr_free_all(struct shm_ep *ep)
{
	uint32_t i;

	if (!ep->rmr)
		return;
	for (i = 0; i < ep->og.table_ents; i++)
		free(ep->rmr[i]);
	free(ep->rmr);
	ep->rmr = NULL;
}

/* shm keeps no registration cache: every registration is a table entry
 * that costs nothing to keep, so there is nothing to drop. */
int shm_mr_cache_callback(struct sdp_provider *p, void *addr, size_t len)
{
	return 0;
}

static int range_check(uint64_t base, uint64_t blen, uint64_t start,
		       uint64_t len)
{
	if (start < base || start + len < start || start + len > base + blen)
		return -SDP_EBOUNDS;
	return 0;
}

/* Checks an access to the peer's region against the table it published
 * (mapped read-only here); *addr is where the bytes go in the peer. */
int shm_peer_validate(struct shm_ep *ep, const struct sdp_rdma_desc *d,
		      uint64_t offset, uint64_t len, uint32_t right,
		      uint64_t *addr)
{
	const struct shm_ent *ent;
	uint64_t g1, g2, base, blen, start;
	uint32_t a1, a2;

	if (d->key >= ep->pg.table_ents || !d->tag)
		return -SDP_EBADKEY;
	ent = (const struct shm_ent *)((const uint8_t *)ep->peer +
				       ep->pg.table_off) + d->key;
	a1 = atomic_load_explicit(&ent->access, memory_order_acquire);
	g1 = atomic_load_explicit(&ent->gen, memory_order_acquire);
	base = ent->addr;
	blen = ent->len;
	atomic_thread_fence(memory_order_acquire);
	g2 = atomic_load_explicit(&ent->gen, memory_order_relaxed);
	a2 = atomic_load_explicit(&ent->access, memory_order_relaxed);
	if (!a1 || g1 != d->tag || g1 != g2 || a1 != a2)
		return -SDP_EBADKEY;
	if (!(a1 & right))
		return -SDP_ERIGHTS;
	start = d->addr + offset;
	if (start < d->addr)
		return -SDP_EBOUNDS;
	*addr = start;
	return range_check(base, blen, start, len);
}

/* Checks a staged write arriving in our own region against our private
 * (authoritative) copy of the table. */
int shm_own_validate(struct shm_ep *ep, uint32_t key, uint64_t tag,
		     uint64_t addr, uint64_t len, uint32_t right)
{
	const struct shm_rmr *r;

	if (!ep->rmr || key >= ep->og.table_ents)
		return -SDP_EBADKEY;
	r = ep->rmr[key];
	if (!r || r->gen != tag)
		return -SDP_EBADKEY;
	if (!(r->access & right))
		return -SDP_ERIGHTS;
	return range_check(r->addr, r->len, addr, len);
}
