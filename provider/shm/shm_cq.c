// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * shm_cq.c - completion queues: progress of every endpoint on the CQ,
 * the queue of ready completions, peer death (pidfds, or sockets where no
 * pidfd can be had) and interrupt mode (an epoll fd, made only when asked
 * for, over the CQ's eventfd, the process bell and the peers' pidfds).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shm.h"

bool shm_cq_room(struct shm_cq *cq)
{
	return cq->cnt < cq->depth;
}

/* Queues one completion (cq->lock held). The queue grows past depth only
 * for failures reported at peer death, so none is ever lost. */
void shm_cq_push(struct shm_cq *cq, struct shm_ep *ep, uint32_t op,
		 uint64_t context, int32_t status, uint64_t bytes)
{
	struct sdp_completion *c;
	uint32_t cap = cq->depth * 2;

	if (cq->cnt == cap) {
		shm_log(cq->prov, 3,
			"completion queue overflow (depth %u): completion of op %u dropped; create the CQ deeper",
			cq->depth, op);
		return;
	}
	c = &cq->q[(cq->head + cq->cnt) % cap];
	c->context = context;
	c->ep = (struct sdp_ep *)ep;
	c->ep_context = ep ? ep->ep_context : NULL;
	c->status = status;
	c->op = op;
	c->bytes = bytes;
	cq->cnt++;
}

/* What tells about ep's peer: its socket while connecting (or when no
 * pidfd could be had), else the peer process's pidfd; -1 for none. */
static int ep_watch_fd(struct shm_ep *ep)
{
	if (ep->sock >= 0)
		return ep->sock;
	return ep->pe ? ep->pe->pidfd : -1;
}

/* Puts ep's socket or peer pidfd in the CQ's epoll set, or takes it out.
 * A pidfd is shared by the endpoints to one process: it leaves the set
 * with the last of them. cq->lock held (or the CQ not yet shared). */
static void watch(struct shm_cq *cq, struct shm_ep *ep, bool on)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	struct shm_ep *o;
	int fd = ep_watch_fd(ep);

	if (cq->epfd < 0 || fd < 0 || ep->watched == on)
		return;
	if (on) {
		if (!epoll_ctl(cq->epfd, EPOLL_CTL_ADD, fd, &ev) ||
		    errno == EEXIST)
			ep->watched = true;
		return;
	}
	ep->watched = false;
	if (fd != ep->sock)
		for (o = cq->eps; o; o = o->next)
			if (o != ep && o->watched && o->pe == ep->pe &&
			    o->sock < 0)
				return;
	epoll_ctl(cq->epfd, EPOLL_CTL_DEL, fd, &ev);
}

void shm_ep_watch(struct shm_ep *ep, bool on)
{
	watch(ep->cq, ep, on);
}

/* Was an endpoint of this armed CQ rung (its armed flag cleared by the
 * peer)? cq->lock held. */
bool shm_cq_rung(struct shm_cq *cq)
{
	struct shm_ep *ep;

	for (ep = cq->eps; ep; ep = ep->next)
		if (ep->own && !atomic_load(&ep->own->armed))
			return true;
	return false;
}

void shm_cq_add_ep(struct shm_cq *cq, struct shm_ep *ep)
{
	pthread_mutex_lock(&cq->lock);
	ep->cq = cq;
	ep->prev = NULL;
	ep->next = cq->eps;
	if (cq->eps)
		cq->eps->prev = ep;
	cq->eps = ep;
	watch(cq, ep, true);
	cq->check_now = true;
	pthread_mutex_unlock(&cq->lock);
}

/* Unlinks ep and forgets its completions not yet handed out. */
void shm_cq_del_ep(struct shm_cq *cq, struct shm_ep *ep)
{
	uint32_t cap = cq->depth * 2, i, n = 0;

	pthread_mutex_lock(&cq->lock);
	watch(cq, ep, false);
	if (ep->prev)
		ep->prev->next = ep->next;
	else
		cq->eps = ep->next;
	if (ep->next)
		ep->next->prev = ep->prev;
	if (cq->rr == ep)
		cq->rr = NULL;
	for (i = 0; i < cq->cnt; i++) {
		struct sdp_completion *c = &cq->q[(cq->head + i) % cap];

		if (c->ep != (struct sdp_ep *)ep)
			cq->q[(cq->head + n++) % cap] = *c;
	}
	cq->cnt = n;
	pthread_mutex_unlock(&cq->lock);
}

/* The peer is gone (or broke the protocol): every pending operation
 * completes with status, later calls fail with it. cq->lock and ep->lock
 * held. */
void shm_ep_fail(struct shm_ep *ep, int32_t status)
{
	struct shm_cq *cq = ep->cq;

	if (ep->state == SHM_EP_DEAD)
		return;
	ep->state = SHM_EP_DEAD;
	ep->dead_status = status;
	watch(cq, ep, false);
	for (; ep->recv_cnt; ep->recv_cnt--) {
		shm_cq_push(cq, ep, SDP_OP_RECV,
			    ep->recv[ep->recv_head].context, status, 0);
		ep->recv_head = (ep->recv_head + 1) % SHM_MAX_RECV;
	}
	for (; ep->send_cnt; ep->send_cnt--) {
		shm_cq_push(cq, ep, SDP_OP_SEND,
			    ep->send[ep->send_head].context, status, 0);
		ep->send_head = (ep->send_head + 1) % SHM_MAX_SEND;
	}
	for (; ep->wr_cnt; ep->wr_cnt--) {
		shm_cq_push(cq, ep, SDP_OP_RDMA_WRITE,
			    ep->wr[ep->wr_head].wr.context, status, 0);
		ep->wr_head = (ep->wr_head + 1) % SHM_MAX_WRITES;
	}
}

/* A CQ holds no fd until cq_notify_fd asks for one: the switch keeps one
 * CQ per connection and sleeps on the program's socket instead. */
int shm_cq_create(struct sdp_provider *p, uint32_t depth, struct sdp_cq **out)
{
	struct shm_cq *cq;

	if (!out || !depth || depth > (1u << 24))
		return -EINVAL;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	cq->prov = shm_prov(p);
	cq->depth = depth < 16 ? 16 : depth;
	cq->q = calloc(cq->depth * 2, sizeof(*cq->q));
	if (!cq->q) {
		free(cq);
		return -ENOMEM;
	}
	cq->epfd = cq->evfd = -1;
	pthread_mutex_init(&cq->lock, NULL);
	*out = (struct sdp_cq *)cq;
	return 0;
}

int shm_cq_destroy(struct sdp_cq *c)
{
	struct shm_cq *cq = (struct shm_cq *)c;

	if (!cq)
		return -EINVAL;
	if (cq->eps) {
		shm_log(cq->prov, 3,
			"cq_destroy: endpoints still use this CQ; close them first");
		return -EBUSY;
	}
	if (cq->epfd >= 0) {
		shm_ncq_del(cq->prov, cq);
		close(cq->epfd);
		close(cq->evfd);
	}
	pthread_mutex_destroy(&cq->lock);
	free(cq->q);
	free(cq);
	return 0;
}

/* Progress of one connected endpoint; returns > 0 when something moved. */
static int ep_progress(struct shm_ep *ep)
{
	int n, moved = 0;

	if (ep->state != SHM_EP_CONNECTED)
		return 0;
	n = shm_ring_rx(ep);
	if (n < 0)
		goto corrupt;
	moved += n;
	n = shm_stage_rx(ep);
	if (n < 0)
		goto corrupt;
	moved += n;
	if (ep->peer_gone) {
		/* the dead peer's last messages are out: now fail */
		if (shm_ep_drained(ep))
			shm_ep_fail(ep, -ECONNRESET);
		return moved;
	}
	shm_send_progress(ep);
	n = shm_stage_tx_progress(ep);
	if (n < 0)
		goto corrupt;
	return moved + n;

corrupt:
	shm_log(ep->prov, 3,
		"peer %d broke the shared ring protocol; connection reset",
		(int)ep->peer_pid);
	shm_ep_fail(ep, -ECONNRESET);
	return 1;
}

/*
 * Nothing to do for ep? Read without ep->lock so that a poll over many
 * quiet endpoints costs a few loads each: the cursors and state change only
 * under cq->lock (held), the shared indices are atomics, and a queue count
 * read stale only delays that endpoint to the next poll.
 */
bool shm_ep_drained(struct shm_ep *ep)
{
	return atomic_load_explicit(&ep->own->ring_prod,
				    memory_order_acquire) == ep->rx_cons &&
	       atomic_load_explicit(&ep->own->stage_prod,
				    memory_order_acquire) == ep->stage_cons;
}


static bool ep_idle(struct shm_ep *ep)
{
	if (ep->state != SHM_EP_CONNECTED)
		return true;
	if (ep->peer_gone)
		return false;
	if (atomic_load_explicit(&ep->own->ring_prod, memory_order_relaxed) !=
	    ep->rx_cons ||
	    atomic_load_explicit(&ep->own->stage_prod, memory_order_relaxed) !=
	    ep->stage_cons)
		return false;
	return !__atomic_load_n(&ep->send_cnt, __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&ep->wr_cnt, __ATOMIC_RELAXED);
}

#define CHECK_BATCH 64

/* One poll() over a batch: sockets answer for their endpoint at once,
 * readable pidfds mark their peer process gone. cq->lock held. */
static void check_batch(struct pollfd *pf, struct shm_ep **who,
			struct shm_peer **pe, int n)
{
	int i;

	if (poll(pf, (nfds_t)n, 0) <= 0)
		return;
	for (i = 0; i < n; i++) {
		if (!pf[i].revents)
			continue;
		if (pe[i]) {
			atomic_store(&pe[i]->gone, true);
			continue;
		}
		pthread_mutex_lock(&who[i]->lock);
		shm_cm_sock_event(who[i]);
		pthread_mutex_unlock(&who[i]->lock);
	}
}

/* Looks for news that shared memory does not carry: the answer to a
 * pending connect, a peer process that exited (its pidfd, one per
 * process), a hang-up on a liveness socket. cq->lock held. */
static void check_peers(struct shm_cq *cq)
{
	struct pollfd pf[CHECK_BATCH];
	struct shm_ep *who[CHECK_BATCH], *ep;
	struct shm_peer *pe[CHECK_BATCH];
	int n = 0, i;

	for (ep = cq->eps; ep; ep = ep->next) {
		if (ep->state == SHM_EP_DEAD || ep->peer_gone)
			continue;
		if (ep->sock < 0 && (!ep->pe || ep->pe->pidfd < 0 ||
				     atomic_load(&ep->pe->gone)))
			continue;
		if (ep->sock < 0) {
			for (i = 0; i < n && pe[i] != ep->pe; i++)
				;
			if (i < n)
				continue;
		}
		pf[n].fd = ep_watch_fd(ep);
		pf[n].events = POLLIN | POLLRDHUP;
		pf[n].revents = 0;
		who[n] = ep;
		pe[n] = ep->sock < 0 ? ep->pe : NULL;
		if (++n == CHECK_BATCH) {
			check_batch(pf, who, pe, n);
			n = 0;
		}
	}
	if (n)
		check_batch(pf, who, pe, n);
	/* a closed flag is looked at here too, not on every poll: the
	 * peer's close reads as a hang-up would, at the same pace */
	for (ep = cq->eps; ep; ep = ep->next) {
		if (ep->state != SHM_EP_CONNECTED || ep->peer_gone)
			continue;
		if (!atomic_load_explicit(&ep->own->closed,
					  memory_order_acquire) &&
		    (ep->sock >= 0 || !ep->pe || !atomic_load(&ep->pe->gone)))
			continue;
		pthread_mutex_lock(&ep->lock);
		shm_ep_peer_gone(ep);
		pthread_mutex_unlock(&ep->lock);
	}
}

int shm_cq_poll(struct sdp_cq *c, struct sdp_completion *out, int max)
{
	struct shm_cq *cq = (struct shm_cq *)c;
	uint32_t cap, k = 0;
	struct shm_ep *ep, *start;
	bool connecting = false;

	if (!cq || max < 0 || (max && !out))
		return -EINVAL;
	pthread_mutex_lock(&cq->lock);
	cap = cq->depth * 2;
	start = cq->rr ? cq->rr : cq->eps;
	ep = start;
	while (ep && shm_cq_room(cq)) {
		/* a pending connect is answered on its socket: look at
		 * once, not every 32nd poll */
		if (ep->state == SHM_EP_CONNECTING)
			connecting = true;
		if (!ep_idle(ep)) {
			pthread_mutex_lock(&ep->lock);
			ep_progress(ep);
			pthread_mutex_unlock(&ep->lock);
		}
		ep = ep->next ? ep->next : cq->eps;
		if (ep == start)
			break;
	}
	cq->rr = ep;
	if (cq->check_now || connecting || !(++cq->idle & 31)) {
		cq->check_now = false;
		check_peers(cq);
	}
	while (k < (uint32_t)max && cq->cnt) {
		out[k++] = cq->q[cq->head];
		cq->head = (cq->head + 1) % cap;
		cq->cnt--;
	}
	pthread_mutex_unlock(&cq->lock);
	return (int)k;
}

/* Made on first use: the CQ's eventfd, the process bell and the peers'
 * pidfds (and pending connects' sockets) in one epoll set. */
int shm_cq_notify_fd(struct sdp_cq *c)
{
	struct shm_cq *cq = (struct shm_cq *)c;
	struct epoll_event ev = { .events = EPOLLIN };
	struct shm_ep *ep;
	uint64_t id;
	int bell, epfd, evfd, ret;

	if (!cq)
		return -EINVAL;
	pthread_mutex_lock(&cq->lock);
	epfd = cq->epfd;
	pthread_mutex_unlock(&cq->lock);
	if (epfd >= 0)
		return epfd;
	bell = shm_bell_get(cq->prov, &id);
	if (bell < 0)
		return bell;
	evfd = shm_fd_keep(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	if (evfd < 0)
		return evfd;
	epfd = shm_fd_keep(epoll_create1(EPOLL_CLOEXEC));
	if (epfd < 0) {
		ret = epfd;
		goto close_evfd;
	}
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, evfd, &ev) ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, bell, &ev)) {
		ret = -errno;
		goto close_epfd;
	}
	pthread_mutex_lock(&cq->lock);
	if (cq->epfd >= 0) {	/* another thread was first */
		ret = cq->epfd;
		pthread_mutex_unlock(&cq->lock);
		close(epfd);
		close(evfd);
		return ret;
	}
	cq->epfd = epfd;
	cq->evfd = evfd;
	for (ep = cq->eps; ep; ep = ep->next)
		if (ep->state != SHM_EP_DEAD && !ep->peer_gone)
			watch(cq, ep, true);
	pthread_mutex_unlock(&cq->lock);
	shm_ncq_add(cq->prov, cq);
	return epfd;

close_epfd:
	close(epfd);
close_evfd:
	close(evfd);
	return ret;
}

/* Asks every peer to ring our process bell at its next send, consumption
 * or staged completion; the bell's dispatch then signals this CQ. Exits
 * and pending connects report through the epoll set by themselves. */
int shm_cq_arm(struct sdp_cq *c)
{
	struct shm_cq *cq = (struct shm_cq *)c;
	struct shm_ep *ep;

	if (!cq)
		return -EINVAL;
	if (cq->epfd >= 0)
		shm_bell_dispatch(cq->prov);	/* stale rings out */
	pthread_mutex_lock(&cq->lock);
	for (ep = cq->eps; ep; ep = ep->next)
		if (ep->own)
			atomic_store(&ep->own->armed, 1);
	atomic_store(&cq->waiting, true);
	atomic_thread_fence(memory_order_seq_cst);
	cq->check_now = true;
	if (cq->cnt && cq->evfd >= 0) {
		atomic_store(&cq->waiting, false);
		shm_bell_ring(cq->evfd);
	}
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

int shm_cq_ack(struct sdp_cq *c)
{
	struct shm_cq *cq = (struct shm_cq *)c;
	uint64_t v;

	if (!cq)
		return -EINVAL;
	atomic_store(&cq->waiting, false);
	if (cq->epfd >= 0) {
		/* rings meant for other CQs of this process go to them */
		shm_bell_dispatch(cq->prov);
		while (read(cq->evfd, &v, sizeof(v)) == sizeof(v))
			;
	}
	pthread_mutex_lock(&cq->lock);
	cq->check_now = true;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}
