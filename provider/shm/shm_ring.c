// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * shm_ring.c - the shared region of an endpoint (memfd: header, inbound
 * control ring, inbound staging ring, registration table) and the control
 * ring itself: single producer / single consumer, whole messages in slots.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm.h"

#define PAGE 4096ull

_Static_assert(sizeof(struct shm_hdr) <= PAGE, "header fits one page");
_Static_assert(sizeof(struct shm_ent) == 32, "table entry is 32 bytes");
_Static_assert(sizeof(struct shm_stage) == 32, "stage header is 32 bytes");
_Static_assert(offsetof(struct shm_hdr, closed) == 1472,
	      "docs/provider-shm.md gives closed at 1472");
_Static_assert(sizeof(struct shm_hs) == 72, "handshake is 72 bytes");

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

uint64_t shm_sge_len(const struct sdp_sge *sgl, int nsge)
{
	uint64_t len = 0;
	int i;

	for (i = 0; i < nsge; i++)
		len += sgl[i].length;
	return len;
}

/* Every element must lie inside the local registration it names. */
int shm_sge_check(const struct sdp_sge *sgl, int nsge)
{
	int i;

	if (nsge < 0 || nsge > SHM_MAX_SGE || (nsge && !sgl))
		return -EINVAL;
	for (i = 0; i < nsge; i++) {
		const struct shm_mr *mr = (const void *)sgl[i].mr;
		uintptr_t a = (uintptr_t)sgl[i].addr;

		if (!sgl[i].length)
			continue;
		if (!mr || a < (uintptr_t)mr->addr ||
		    a + sgl[i].length < a ||
		    a + sgl[i].length > (uintptr_t)mr->addr + mr->len)
			return -EINVAL;
	}
	return 0;
}

/* A new region of ours (its memfd in *memfd, mapped at *out, geometry in
 * *og), not yet shared. */
int shm_region_new(struct shm_provider *p, struct shm_hdr **out,
		   struct shm_geom *og, int *memfd)
{
	const struct shm_opts *o = &p->opt;
	struct shm_geom g = { .magic = SHM_MAGIC,
			      .version = SHM_LAYOUT_VERSION };
	struct shm_hdr *h;
	int fd, ret;

	g.ring_off = PAGE;
	g.ring_slots = o->ring_slots;
	g.slot_stride = round_up(sizeof(struct shm_slot) + o->msg_size,
				 SHM_CL);
	g.msg_size = o->msg_size;
	g.stage_off = round_up(g.ring_off +
			       (uint64_t)g.ring_slots * g.slot_stride, PAGE);
	g.stage_slots = o->stage_slots;
	g.stage_chunk = o->stage_chunk;
	g.stage_stride = round_up(sizeof(struct shm_stage) + o->stage_chunk,
				  SHM_CL);
	g.table_off = round_up(g.stage_off +
			       (uint64_t)g.stage_slots * g.stage_stride, PAGE);
	g.table_ents = o->rdma_regs;
	g.size = g.table_off +
		 round_up((uint64_t)g.table_ents * sizeof(struct shm_ent),
			  PAGE);
	g.owner_pid = getpid();
	if (!shm_fsize_room(g.size))
		return -EFBIG;	/* below the program's RLIMIT_FSIZE */

	fd = shm_fd_keep(memfd_create("sdp-shm", MFD_CLOEXEC |
					      MFD_ALLOW_SEALING));
	if (fd < 0)
		return fd;
	if (ftruncate(fd, g.size)) {
		ret = -errno;
		goto close_fd;
	}
	/* backing store before the mapping: a set-up that cannot have it
	 * fails here (the switch stays on TCP), never a later store */
	ret = fallocate(fd, 0, 0, shm_commit_all() ? g.size : PAGE);
	if (ret) {
		ret = -errno;
		goto close_fd;
	}
	ret = shm_region_seal(fd);
	if (ret)
		goto close_fd;
	h = mmap(NULL, g.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		ret = -errno;
		goto close_fd;
	}
	h->g = g;	/* the rest of a fresh memfd reads as zero */
	*out = h;
	*og = g;
	*memfd = fd;
	return 0;

close_fd:
	close(fd);
	return ret;
}

int shm_region_create(struct shm_provider *p, struct shm_ep *ep, int *memfd)
{
	return shm_region_new(p, &ep->own, &ep->og, memfd);
}

/* Maps the peer's region: everything before the table read-write, the
 * table read-only. The geometry is checked against the file once and
 * kept privately, so the peer cannot move it afterwards. */
int shm_region_map(struct shm_ep *ep, int memfd)
{
	struct shm_geom g;
	struct stat st;
	const char *why;
	void *base;

	if (fstat(memfd, &st))
		return -errno;
	if (shm_region_trust(memfd, &why)) {
		shm_log_limited(ep->prov, 3, "peer %d's shared region is %s: refused",
			(int)ep->peer_pid, why);
		return -EPERM;
	}
	if (st.st_size < (off_t)PAGE)
		return -EPROTO;
	if (pread(memfd, &g, sizeof(g), 0) != sizeof(g))
		return -EPROTO;
	if (g.magic != SHM_MAGIC || g.version != SHM_LAYOUT_VERSION ||
	    g.size != (uint64_t)st.st_size || g.ring_off < PAGE ||
	    !g.ring_slots || (g.ring_slots & (g.ring_slots - 1)) ||
	    g.ring_slots > 4096 || g.msg_size > (16u << 20) ||
	    g.slot_stride < sizeof(struct shm_slot) + g.msg_size ||
	    g.slot_stride > (17u << 20) ||
	    g.stage_off < g.ring_off + (uint64_t)g.ring_slots * g.slot_stride ||
	    !g.stage_slots || (g.stage_slots & (g.stage_slots - 1)) ||
	    g.stage_slots > SHM_STAGE_MAX || g.stage_chunk > (16u << 20) ||
	    g.stage_stride < sizeof(struct shm_stage) + g.stage_chunk ||
	    g.stage_stride > (17u << 20) ||
	    g.table_off < g.stage_off +
			  (uint64_t)g.stage_slots * g.stage_stride ||
	    g.table_off % PAGE || g.table_ents > (1u << 20) ||
	    g.table_off + (uint64_t)g.table_ents * sizeof(struct shm_ent) >
		    g.size)
		return -EPROTO;
	base = mmap(NULL, g.size, PROT_READ, MAP_SHARED, memfd, 0);
	if (base == MAP_FAILED)
		return -errno;
	if (mprotect(base, g.table_off, PROT_READ | PROT_WRITE)) {
		int ret = -errno;

		munmap(base, g.size);
		return ret;
	}
	ep->peer = base;
	ep->pg = g;
	return 0;
}

void shm_region_unmap(struct shm_ep *ep)
{
	if (ep->own)
		munmap(ep->own, ep->og.size);
	if (ep->peer)
		munmap(ep->peer, ep->pg.size);
	ep->own = ep->peer = NULL;
}

/* Wakes the peer's CQ, only if the peer armed it: the common case is a
 * fence and a load, no system call. The peer process's bell is rung; its
 * dispatch finds which CQ by the cleared armed flag. */
void shm_doorbell(struct shm_ep *ep)
{
	struct shm_hdr *h = ep->peer;

	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_explicit(&h->armed, memory_order_relaxed))
		return;
	if (atomic_exchange(&h->armed, 0) && ep->pe)
		shm_bell_ring(ep->pe->bell);
}

/* Copies one message into the peer's ring: 0, or -EAGAIN when full,
 * -EPROTO when the peer's consumer index makes no sense. */
int shm_ring_put(struct shm_ep *ep, const struct sdp_sge *sgl, int nsge,
		 uint64_t len)
{
	const struct shm_geom *g = &ep->pg;
	struct shm_slot *s;
	uint8_t *dst;
	int i;

	if (ep->tx_prod - ep->tx_cons >= g->ring_slots) {
		uint64_t c = atomic_load_explicit(&ep->peer->ring_cons,
						  memory_order_acquire);

		if (c > ep->tx_prod || ep->tx_prod - c > g->ring_slots)
			return -EPROTO;
		ep->tx_cons = c;
		if (ep->tx_prod - c >= g->ring_slots)
			return -EAGAIN;
	}
	s = (void *)((uint8_t *)ep->peer + g->ring_off +
		     (ep->tx_prod & (g->ring_slots - 1)) * g->slot_stride);
	dst = s->data;
	for (i = 0; i < nsge; i++) {
		memcpy(dst, sgl[i].addr, sgl[i].length);
		dst += sgl[i].length;
	}
	s->len = (uint32_t)len;
	ep->tx_prod++;
	atomic_store_explicit(&ep->peer->ring_prod, ep->tx_prod,
			      memory_order_release);
	shm_doorbell(ep);
	return 0;
}

/* Moves arrived messages into posted receives while the CQ has room.
 * Returns how many were delivered, or -EPROTO for a corrupt ring. */
int shm_ring_rx(struct shm_ep *ep)
{
	const struct shm_geom *g = &ep->og;
	uint64_t prod;
	int n = 0;

	if (!ep->recv_cnt)
		return 0;
	prod = atomic_load_explicit(&ep->own->ring_prod,
				    memory_order_acquire);
	if (prod == ep->rx_cons)
		return 0;
	if (prod < ep->rx_cons || prod - ep->rx_cons > g->ring_slots)
		return -EPROTO;
	while (ep->rx_cons != prod && ep->recv_cnt && shm_cq_room(ep->cq)) {
		struct shm_slot *s = (void *)((uint8_t *)ep->own + g->ring_off +
			(ep->rx_cons & (g->ring_slots - 1)) * g->slot_stride);
		struct shm_wr *r = &ep->recv[ep->recv_head];
		uint32_t len = s->len, left, done = 0;
		int32_t status = 0;
		int i;

		if (len > g->msg_size)
			return -EPROTO;
		left = len;
		for (i = 0; i < r->nsge && left; i++) {
			uint32_t k = left < r->sge[i].length ?
				     left : (uint32_t)r->sge[i].length;

			memcpy(r->sge[i].addr, s->data + done, k);
			done += k;
			left -= k;
		}
		if (left)
			status = -EMSGSIZE;
		ep->rx_cons++;
		atomic_store_explicit(&ep->own->ring_cons, ep->rx_cons,
				      memory_order_release);
		ep->recv_head = (ep->recv_head + 1) % SHM_MAX_RECV;
		ep->recv_cnt--;
		shm_cq_push(ep->cq, ep, SDP_OP_RECV, r->context, status, done);
		n++;
	}
	if (n)
		shm_doorbell(ep);	/* a blocked sender may wait for room */
	return n;
}
