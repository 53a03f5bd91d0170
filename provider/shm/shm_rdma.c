// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * shm_rdma.c - RdmaWrite and RdmaRead: one copy with process_vm_writev /
 * process_vm_readv (memcpy within one process) after the peer's table says
 * yes, or, where the kernel forbids that, RDMA write through the staging
 * ring that the target drains from its cq_poll. Also the start-up probe and
 * the per-connection one (which of the two the kernel allows for this peer).
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

/* The local iovec of sgl, skipping the first skip bytes. */
static int iov_from(const struct sdp_sge *sgl, int nsge, uint64_t skip,
		    struct iovec *iov)
{
	int i, k = 0;

	for (i = 0; i < nsge; i++) {
		uint64_t l = sgl[i].length;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		iov[k].iov_base = (uint8_t *)sgl[i].addr + skip;
		iov[k].iov_len = l - skip;
		skip = 0;
		k++;
	}
	return k;
}

/* Copies len bytes between the local sgl, from its byte skip on, and
 * raddr in process pid. */
int shm_cma_copy(pid_t pid, bool write, const struct sdp_sge *sgl,
		 int nsge, uint64_t skip, uint64_t raddr, uint64_t len)
{
	struct iovec local[SHM_MAX_SGE], remote;
	uint64_t done = 0;

	while (done < len) {
		int k = iov_from(sgl, nsge, skip + done, local);
		ssize_t n;

		remote.iov_base = (void *)(uintptr_t)(raddr + done);
		remote.iov_len = len - done;
		n = write ? process_vm_writev(pid, local, k, &remote, 1, 0) :
			    process_vm_readv(pid, local, k, &remote, 1, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == ESRCH ? -ECONNRESET : -errno;
		}
		if (n == 0)
			return -EFAULT;
		done += n;
	}
	return 0;
}

/* One RDMA operation's copy across processes: on two threads when the
 * switch says the peer copies nothing meanwhile (shm_spread.c). */
static int cma_xfer(struct shm_ep *ep, bool write, const struct sdp_sge *sgl,
		    int nsge, uint64_t raddr, uint64_t len, uint32_t flags)
{
	if (flags & SDP_RDMA_SPREAD)
		return shm_spread_copy(ep->prov, ep->peer_pid, write, sgl,
				       nsge, raddr, len);
	return shm_cma_copy(ep->peer_pid, write, sgl, nsge, 0, raddr, len);
}

/* Within one process: plain copies, after the same validation. */
static void local_xfer(bool write, const struct sdp_sge *sgl, int nsge,
		       uint64_t raddr)
{
	uint8_t *r = (uint8_t *)(uintptr_t)raddr;
	int i;

	for (i = 0; i < nsge; i++) {
		if (write)
			memcpy(r, sgl[i].addr, sgl[i].length);
		else
			memcpy(sgl[i].addr, r, sgl[i].length);
		r += sgl[i].length;
	}
}

static int ep_usable(struct shm_ep *ep)
{
	if (ep->state == SHM_EP_CONNECTED)
		return 0;
	return ep->state == SHM_EP_DEAD ? ep->dead_status : -ENOTCONN;
}

/* Copies what fits of the queued writes into the peer's staging ring. */
static int stage_push(struct shm_ep *ep)
{
	const struct shm_geom *g = &ep->pg;
	uint32_t i;
	int n = 0;

	for (i = 0; i < ep->wr_cnt; i++) {
		struct shm_write *w =
			&ep->wr[(ep->wr_head + i) % SHM_MAX_WRITES];

		while (w->pushed < w->wr.len &&
		       ep->st_prod - ep->st_done < g->stage_slots) {
			struct shm_stage *s = (void *)((uint8_t *)ep->peer +
				g->stage_off + (ep->st_prod &
				(g->stage_slots - 1)) * g->stage_stride);
			uint64_t k = w->wr.len - w->pushed;
			struct iovec iov[SHM_MAX_SGE];
			uint8_t *dst = s->data;
			int j, cnt;

			if (k > g->stage_chunk)
				k = g->stage_chunk;
			s->key = w->remote.key;
			s->tag = w->remote.tag;
			s->addr = w->offset + w->pushed;
			s->len = (uint32_t)k;
			cnt = iov_from(w->wr.sge, w->wr.nsge, w->pushed, iov);
			for (j = 0; j < cnt && dst < s->data + k; j++) {
				size_t c = iov[j].iov_len;

				if (c > (size_t)(s->data + k - dst))
					c = s->data + k - dst;
				memcpy(dst, iov[j].iov_base, c);
				dst += c;
			}
			w->pushed += k;
			ep->st_prod++;
			if (w->pushed == w->wr.len)
				w->end_seq = ep->st_prod;
			n++;
		}
		if (w->pushed < w->wr.len)
			break;
	}
	if (n) {
		atomic_store_explicit(&ep->peer->stage_prod, ep->st_prod,
				      memory_order_release);
		shm_doorbell(ep);
	}
	return n;
}

/* Writer side: collect the target's verdicts on our chunks, complete the
 * writes whose chunks are all done, and push more. (cq->lock, ep->lock) */
int shm_stage_tx_progress(struct shm_ep *ep)
{
	uint64_t c;
	int n = 0;

	if (!ep->wr_cnt)
		return 0;
	c = atomic_load_explicit(&ep->peer->stage_cons, memory_order_acquire);
	if (c < ep->st_done || c > ep->st_prod)
		return -EPROTO;
	while (ep->st_done < c && shm_cq_room(ep->cq)) {
		struct shm_write *w = &ep->wr[ep->wr_head];
		int32_t r = atomic_load_explicit(&ep->peer->stage_result[
			ep->st_done & (ep->pg.stage_slots - 1)],
			memory_order_relaxed);

		if (!ep->wr_cnt)
			return -EPROTO;
		/* the peer's word: only an error code it may give passes */
		if (r < 0 && r <= -SDP_ERRNO_MAX)
			r = -EPROTO;
		if (r < 0 && !w->status)
			w->status = r;
		ep->st_done++;
		if (w->end_seq && ep->st_done == w->end_seq) {
			shm_cq_push(ep->cq, ep, SDP_OP_RDMA_WRITE,
				    w->wr.context, w->status,
				    w->status ? 0 : w->wr.len);
			ep->wr_head = (ep->wr_head + 1) % SHM_MAX_WRITES;
			ep->wr_cnt--;
			n++;
		}
	}
	return n + stage_push(ep);
}

/* Target side: validate each staged chunk against our own table, copy it
 * into the registered region, record the verdict. (cq->lock, ep->lock) */
int shm_stage_rx(struct shm_ep *ep)
{
	const struct shm_geom *g = &ep->og;
	uint64_t prod;
	int n = 0;

	prod = atomic_load_explicit(&ep->own->stage_prod,
				    memory_order_acquire);
	if (prod == ep->stage_cons)
		return 0;
	if (prod < ep->stage_cons || prod - ep->stage_cons > g->stage_slots)
		return -EPROTO;
	while (ep->stage_cons != prod) {
		const struct shm_stage *s = (void *)((uint8_t *)ep->own +
			g->stage_off + (ep->stage_cons &
			(g->stage_slots - 1)) * g->stage_stride);
		struct shm_stage h = *s;
		int st;

		if (h.len > g->stage_chunk)
			return -EPROTO;
		st = shm_own_validate(ep, h.key, h.tag, h.addr, h.len,
				      SDP_ACCESS_REMOTE_WRITE);
		if (!st)
			memcpy((void *)(uintptr_t)h.addr, s->data, h.len);
		atomic_store_explicit(&ep->own->stage_result[ep->stage_cons &
				      (g->stage_slots - 1)], st,
				      memory_order_relaxed);
		ep->stage_cons++;
		atomic_store_explicit(&ep->own->stage_cons, ep->stage_cons,
				      memory_order_release);
		n++;
	}
	shm_doorbell(ep);
	return n;
}

/* The kernel refused a copy it allowed at connect (the peer changed its
 * credentials or became non-dumpable since): from now on writes are staged
 * and reads answer EOPNOTSUPP, which the switch takes as "send it another
 * way" without failing the program's call. */
static void cma_denied(struct shm_ep *ep)
{
	shm_log(ep->prov, 4,
		"process_vm_* to pid %d denied (EPERM) after connect; connection continues in staging mode",
		(int)ep->peer_pid);
	ep->cma = false;
}

/* Before the region is shared: publish where, in this process, a random
 * word lies, so the peer can try to read it (shm_cma_check). */
void shm_cma_publish(struct shm_ep *ep)
{
	uint64_t w = 0;

	struct timespec ts;

	if (getrandom(&w, sizeof(w), GRND_NONBLOCK) != sizeof(w) || !w) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		w = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
		    ((uint64_t)getpid() << 40) ^ 1;
	}
	ep->own->probe_word = w;
	ep->own->probe_addr = (uint64_t)(uintptr_t)&ep->own->probe_word;
}

/*
 * Does the kernel let this process reach process pid with process_vm_*?
 * That takes ptrace rights over it, which another uid, Yama ptrace_scope,
 * a non-dumpable or setuid peer or a seccomp filter may deny, each side on
 * its own (root may read a worker that may not read root). Tried once, at
 * connect, on the word the peer published in its region: a peer that lies
 * about the address only makes us read 8 bytes of its own memory, or fail
 * and stage. Readv and writev ask the kernel for the same right.
 */
bool shm_cma_check(struct shm_ep *ep, pid_t pid)
{
	uint64_t addr, want, got = 0;
	struct iovec l = { &got, sizeof(got) }, r;
	ssize_t n;

	if (!ep->prov->cma)
		return false;
	if (pid == getpid())
		return true;
	addr = __atomic_load_n(&ep->peer->probe_addr, __ATOMIC_RELAXED);
	want = __atomic_load_n(&ep->peer->probe_word, __ATOMIC_RELAXED);
	if (!want || !addr || (addr & 7))
		return false;
	r.iov_base = (void *)(uintptr_t)addr;
	r.iov_len = sizeof(got);
	n = process_vm_readv(pid, &l, 1, &r, 1, 0);
	if (n == (ssize_t)sizeof(got) && got == want)
		return true;
	shm_log(ep->prov, 6,
		"process %d cannot be reached with process_vm_* (%s): this connection stages its RDMA writes and offers no RdmaRead",
		(int)pid, n < 0 ? strerror(errno) : "word differs");
	return false;
}

/* The start of an RDMA operation: its arguments checked, its length in
 * *len, and ep locked and connected (0); else an error, ep unlocked. */
static int rdma_lock(struct shm_ep *ep, const struct sdp_rdma_desc *remote,
		     const struct sdp_sge *sgl, int nsge, uint64_t *len)
{
	int ret;

	if (!ep || !remote)
		return -EINVAL;
	ret = shm_sge_check(sgl, nsge);
	if (ret)
		return ret;
	*len = shm_sge_len(sgl, nsge);
	pthread_mutex_lock(&ep->lock);
	ret = ep_usable(ep);
	if (ret)
		pthread_mutex_unlock(&ep->lock);
	return ret;
}

/* The peer's address of remote + offset for len bytes with access (ep
 * locked), or the reason it may not be touched (or an injected fault). */
static int rdma_target(struct shm_ep *ep, const struct sdp_rdma_desc *remote,
		       uint64_t offset, uint64_t len, uint32_t access,
		       uint64_t *addr)
{
	int ret = shm_peer_validate(ep, remote, offset, len, access, addr);

	if (ret)
		return ret;
	return shm_fault_rdma(ep->prov) ? -EIO : 0;
}

int shm_rdma_write(struct sdp_ep *e, const struct sdp_sge *sgl, int nsge,
		   const struct sdp_rdma_desc *remote, uint64_t offset,
		   uint64_t context, uint32_t flags)
{
	struct shm_ep *ep = (struct shm_ep *)e;
	struct shm_write *w;
	uint64_t len, addr;
	int ret;

	ret = rdma_lock(ep, remote, sgl, nsge, &len);
	if (ret)
		return ret;
	ret = rdma_target(ep, remote, offset, len, SDP_ACCESS_REMOTE_WRITE,
			  &addr);
	if (ret)
		goto unlock;
	if (!len)
		goto unlock;
	if (ep->cma) {
		if (ep->same_pid) {
			local_xfer(true, sgl, nsge, addr);
			goto unlock;
		}
		ret = cma_xfer(ep, true, sgl, nsge, addr, len, flags);
		if (ret != -EPERM)
			goto unlock;
		cma_denied(ep);
	}
	if (ep->wr_cnt == SHM_MAX_WRITES) {
		ret = -ENOBUFS;
		goto unlock;
	}
	w = &ep->wr[(ep->wr_head + ep->wr_cnt++) % SHM_MAX_WRITES];
	memset(w, 0, sizeof(*w));
	memcpy(w->wr.sge, sgl, sizeof(*sgl) * nsge);
	w->wr.nsge = nsge;
	w->wr.context = context;
	w->wr.len = len;
	w->remote = *remote;
	w->offset = addr;
	stage_push(ep);
	ret = SDP_PENDING;
unlock:
	pthread_mutex_unlock(&ep->lock);
	return ret;
}

int shm_rdma_read(struct sdp_ep *e, const struct sdp_sge *sgl, int nsge,
		  const struct sdp_rdma_desc *remote, uint64_t offset,
		  uint64_t context, uint32_t flags)
{
	struct shm_ep *ep = (struct shm_ep *)e;
	uint64_t len, addr;
	int ret;

	ret = rdma_lock(ep, remote, sgl, nsge, &len);
	if (ret)
		return ret;
	if (!ep->cma) {
		ret = -EOPNOTSUPP;
		goto unlock;
	}
	ret = rdma_target(ep, remote, offset, len, SDP_ACCESS_REMOTE_READ,
			  &addr);
	if (ret)
		goto unlock;
	if (!len)
		goto unlock;
	if (ep->same_pid) {
		local_xfer(false, sgl, nsge, addr);
		goto unlock;
	}
	ret = cma_xfer(ep, false, sgl, nsge, addr, len, flags);
	if (ret == -EPERM) {
		cma_denied(ep);
		ret = -EOPNOTSUPP;
	}
unlock:
	pthread_mutex_unlock(&ep->lock);
	return ret;
}

/*
 * Can an unrelated-enough process read us? A child reads its parent, which
 * Yama ptrace_scope=1 forbids (only ancestors may). The child is made with
 * a raw clone so no fork handlers (the application's, or an interposer's)
 * run, and it does nothing but system calls.
 */
bool shm_cma_probe(void)
{
	static volatile uint32_t word = 0x5a5aa5a5;
	pid_t parent = getpid(), child;
	int status;

	child = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (child < 0)
		return false;
	if (child == 0) {
		uint32_t v = 0;
		struct iovec l = { &v, sizeof(v) };
		struct iovec r = { (void *)&word, sizeof(v) };
		long n = syscall(SYS_process_vm_readv, parent, &l, 1, &r, 1,
				 0);

		syscall(SYS_exit_group, n == sizeof(v) && v == word ? 0 : 1);
	}
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR)
			return false;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
