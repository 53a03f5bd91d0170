// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * verbs_cq.c - completion queues of the verbs provider: one ibv_cq with a
 * completion channel per device, the rdma_cm event channel of the CQ's
 * endpoints, one epoll fd over both as the notification fd, and the
 * translation of work completions into SPI completions and error codes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include "verbs.h"

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int epoll_add(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

int verbs_cq_create(struct sdp_provider *p, uint32_t depth,
		    struct sdp_cq **cqp)
{
	struct verbs_provider *vp = (struct verbs_provider *)p;
	struct sdp_cq *cq;
	int i, ret;

	if (!cqp || !depth)
		return -EINVAL;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	cq->vp = vp;
	cq->depth = depth;
	pthread_mutex_init(&cq->lock, NULL);
	cq->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (cq->epfd < 0) {
		ret = -errno;
		goto free_cq;
	}
	cq->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (cq->evfd < 0) {
		ret = -errno;
		goto close_epfd;
	}
	ret = epoll_add(cq->epfd, cq->evfd);
	if (ret)
		goto close_evfd;
	cq->cm_ch = rdma_create_event_channel();
	if (!cq->cm_ch) {
		ret = verbs_errno(ENODEV);
		goto close_evfd;
	}
	ret = set_nonblock(cq->cm_ch->fd);
	if (!ret)
		ret = epoll_add(cq->epfd, cq->cm_ch->fd);
	if (ret)
		goto destroy_channels;
	for (i = 0; i < vp->ndev; i++) {
		struct verbs_cq_dev *d = &cq->dev[i];
		int cqe = depth;

		if (cqe > vp->dev[i].attr.max_cqe)
			cqe = vp->dev[i].attr.max_cqe;
		d->ch = ibv_create_comp_channel(vp->dev[i].ctx);
		if (!d->ch) {
			ret = verbs_errno(ENOMEM);
			goto destroy_channels;
		}
		d->cq = ibv_create_cq(vp->dev[i].ctx, cqe, cq, d->ch, 0);
		if (!d->cq) {
			ret = verbs_errno(ENOMEM);
			vlog(vp, 3, "ibv_create_cq(%d entries) failed: %s",
			     cqe, strerror(-ret));
			goto destroy_channels;
		}
		ret = set_nonblock(d->ch->fd);
		if (!ret)
			ret = epoll_add(cq->epfd, d->ch->fd);
		if (ret)
			goto destroy_channels;
	}
	pthread_mutex_lock(&vp->cq_list_lock);
	cq->next = vp->cqs;
	vp->cqs = cq;
	pthread_mutex_unlock(&vp->cq_list_lock);
	*cqp = cq;
	return 0;

destroy_channels:
	for (i = 0; i < vp->ndev; i++) {
		if (cq->dev[i].cq)
			ibv_destroy_cq(cq->dev[i].cq);
		if (cq->dev[i].ch)
			ibv_destroy_comp_channel(cq->dev[i].ch);
	}
	if (cq->cm_ch)
		rdma_destroy_event_channel(cq->cm_ch);
close_evfd:
	close(cq->evfd);
close_epfd:
	close(cq->epfd);
free_cq:
	pthread_mutex_destroy(&cq->lock);
	free(cq);
	return ret;
}

int verbs_cq_destroy(struct sdp_cq *cq)
{
	struct verbs_backlog *b;
	struct sdp_cq **pp;
	int i;

	if (!cq)
		return -EINVAL;
	if (cq->neps)
		return -EBUSY;
	pthread_mutex_lock(&cq->vp->cq_list_lock);
	for (pp = &cq->vp->cqs; *pp; pp = &(*pp)->next)
		if (*pp == cq) {
			*pp = cq->next;
			break;
		}
	pthread_mutex_unlock(&cq->vp->cq_list_lock);
	while ((b = cq->bl_head)) {
		cq->bl_head = b->next;
		free(b);
	}
	for (i = 0; i < cq->vp->ndev; i++) {
		ibv_destroy_cq(cq->dev[i].cq);
		ibv_destroy_comp_channel(cq->dev[i].ch);
	}
	rdma_destroy_event_channel(cq->cm_ch);
	close(cq->evfd);
	close(cq->epfd);
	pthread_mutex_destroy(&cq->lock);
	free(cq);
	return 0;
}

void verbs_cq_push(struct sdp_cq *cq, const struct sdp_completion *c)
{
	struct verbs_backlog *b = malloc(sizeof(*b));

	if (!b) {
		vlog(cq->vp, 3, "out of memory: a completion was lost");
		return;
	}
	b->c = *c;
	b->next = NULL;
	if (cq->bl_tail)
		cq->bl_tail->next = b;
	else
		cq->bl_head = b;
	cq->bl_tail = b;
	if (eventfd_write(cq->evfd, 1))
		vlog(cq->vp, 3, "eventfd_write: %s", strerror(errno));
}

/*
 * Work completion status to SPI error. Bounds and rights are checked
 * against the descriptor before posting (verbs_rdma.c), so a remote access
 * error that still happens means the key is unknown, stale or forged.
 *
 * iWARP: a target refuses a key by ending the stream (TERMINATE, then
 * close). A write still being sent when that happens fails on the local
 * side (siw: IBV_WC_LOC_QP_OP_ERR): the connection ended, and that is what
 * the caller is told, as for a flushed request.
 */
static int wc_status_errno(enum ibv_wc_status s, bool iwarp)
{
	switch (s) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_LOC_QP_OP_ERR:
		return iwarp ? -ECONNRESET : -EIO;
	case IBV_WC_WR_FLUSH_ERR:
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
	case IBV_WC_RESP_TIMEOUT_ERR:
		return -ECONNRESET;
	case IBV_WC_REM_ACCESS_ERR:
		return -SDP_EBADKEY;
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_MW_BIND_ERR:
		return -SDP_ERIGHTS;
	case IBV_WC_LOC_LEN_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
		return -EMSGSIZE;
	default:
		return -EIO;
	}
}

/* Turns one CQE into a completion; false when it is to be dropped. */
static bool convert_wc(struct sdp_cq *cq, const struct ibv_wc *wc,
		       struct sdp_completion *c)
{
	struct verbs_op *op = (struct verbs_op *)(uintptr_t)wc->wr_id;
	struct sdp_ep *ep = op->ep;
	bool keep, reported;

	if (!op->status)
		op->status = wc_status_errno(wc->status,
					     cq->vp->dev[ep->devi].iwarp);
	if (--op->pieces > 0)
		return false;	/* the last piece reports the transfer */
	pthread_mutex_lock(&ep->ops_lock);
	verbs_op_unlink(ep, op);
	reported = op->reported;
	pthread_mutex_unlock(&ep->ops_lock);
	if (reported) {
		/* verbs_flush_ep told the caller already */
		free(op);
		return false;
	}
	if (op->op == VERBS_OP_HELLO) {
		/* the iWARP start: the passive side may send now (or the
		 * connection failed before it could) */
		if (!ep->active) {
			ep->hello = NULL;
			verbs_gate_open(ep, !op->status);
		}
		free(op);
		return false;
	}
	c->context = op->context;
	c->ep = ep;
	c->ep_context = ep->ep_context;
	c->status = op->status;
	c->op = op->op;
	c->bytes = 0;
	if (!c->status)
		c->bytes = op->op == SDP_OP_RECV ? wc->byte_len : op->bytes;
	if (c->status && wc->status != IBV_WC_WR_FLUSH_ERR &&
	    ep->state == VERBS_EP_CONNECTED) {
		vlog(cq->vp, 4, "connection %p failed: %s (opcode %d, vendor "
		     "error %#x); the QP is in the error state now",
		     (void *)ep, ibv_wc_status_str(wc->status), op->op,
		     wc->vendor_err);
		ep->state = VERBS_EP_DEAD;
	}
	keep = !ep->closed;
	free(op);
	return keep;
}

/*
 * Completes a chain of work requests that never reached the QP (held on
 * an iWARP passive side when its connection failed) as the QP would have:
 * with status. Called with the cq lock held.
 */
void verbs_fail_wr(struct sdp_cq *cq, struct ibv_send_wr *wr,
		   enum ibv_wc_status status)
{
	struct sdp_completion c;

	for (; wr; wr = wr->next) {
		struct ibv_wc wc = { .wr_id = wr->wr_id, .status = status };

		if (convert_wc(cq, &wc, &c))
			verbs_cq_push(cq, &c);
	}
}

static void process_cm_events(struct sdp_cq *cq)
{
	struct rdma_cm_event *ev;

	while (!rdma_get_cm_event(cq->cm_ch, &ev))
		verbs_cm_event(cq, ev);
}

static int poll_hw(struct sdp_cq *cq, struct sdp_completion *c, int max)
{
	struct ibv_wc wc[16];
	int i, j, n, got = 0;

	for (i = 0; i < cq->vp->ndev && got < max; i++) {
		do {
			int want = max - got;

			if (want > 16)
				want = 16;
			n = ibv_poll_cq(cq->dev[i].cq, want, wc);
			if (n < 0)
				return got ? got : -EIO;
			for (j = 0; j < n; j++)
				if (convert_wc(cq, &wc[j], &c[got]))
					got++;
		} while (n > 0 && got < max);
	}
	return got;
}

static int take_backlog(struct sdp_cq *cq, struct sdp_completion *c, int max)
{
	int got = 0;

	while (cq->bl_head && got < max) {
		struct verbs_backlog *b = cq->bl_head;

		cq->bl_head = b->next;
		if (!cq->bl_head)
			cq->bl_tail = NULL;
		c[got++] = b->c;
		free(b);
	}
	return got;
}

/*
 * librdmacm completes a handshake step only when the event is read (the
 * active side sends its RTU then): when one thread drives both ends of a
 * connection through two CQs, polling either must move both. Other CQs'
 * events land in their backlog and wake their sleepers through the eventfd.
 */
static void drive_other_cqs(struct sdp_cq *cq)
{
	struct verbs_provider *vp = cq->vp;
	struct sdp_cq *o;

	if (pthread_mutex_trylock(&vp->cq_list_lock))
		return;
	for (o = vp->cqs; o; o = o->next) {
		if (o == cq || pthread_mutex_trylock(&o->lock))
			continue;
		o->foreign = true;
		process_cm_events(o);
		o->foreign = false;
		pthread_mutex_unlock(&o->lock);
	}
	pthread_mutex_unlock(&vp->cq_list_lock);
}

int verbs_cq_poll(struct sdp_cq *cq, struct sdp_completion *c, int max)
{
	int got, n;

	if (!cq || !c || max < 0)
		return -EINVAL;
	pthread_mutex_lock(&cq->lock);
	verbs_run_accepts(cq, false);
	process_cm_events(cq);
	verbs_run_hellos(cq);
	got = take_backlog(cq, c, max);
	if (got < max) {
		n = poll_hw(cq, c + got, max - got);
		if (n < 0 && !got)
			got = n;
		else if (n > 0)
			got += n;
	}
	pthread_mutex_unlock(&cq->lock);
	if (!got)
		drive_other_cqs(cq);
	return got;
}

int verbs_cq_notify_fd(struct sdp_cq *cq)
{
	return cq ? cq->epfd : -EINVAL;
}

/* Moves every completion the device CQs hold into the backlog. Called with
 * the cq lock held, outside any poll. */
static void poll_all(struct sdp_cq *cq)
{
	struct sdp_completion c[16];
	int i, n;

	do {
		n = poll_hw(cq, c, 16);
		for (i = 0; i < n; i++)
			verbs_cq_push(cq, &c[i]);
	} while (n > 0);
}

/*
 * Arms every device CQ. A completion that came before the arm raises no
 * event, so what already waits is moved to the backlog, whose eventfd
 * makes the notification fd readable at once: a caller that armed after
 * its last poll (the switch's sleep during an upgrade) does not sleep on
 * a message that is already there.
 */
int verbs_cq_arm(struct sdp_cq *cq)
{
	int i, ret;

	if (!cq)
		return -EINVAL;
	for (i = 0; i < cq->vp->ndev; i++) {
		ret = ibv_req_notify_cq(cq->dev[i].cq, 0);
		if (ret)
			return ret < 0 ? ret : -ret;
	}
	pthread_mutex_lock(&cq->lock);
	poll_all(cq);
	if (cq->bl_head && eventfd_write(cq->evfd, 1))
		vlog(cq->vp, 3, "eventfd_write: %s", strerror(errno));
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

int verbs_cq_ack(struct sdp_cq *cq)
{
	struct ibv_cq *ev_cq;
	eventfd_t n;
	void *ev_ctx;
	int i;

	if (!cq)
		return -EINVAL;
	pthread_mutex_lock(&cq->lock);
	eventfd_read(cq->evfd, &n);
	for (i = 0; i < cq->vp->ndev; i++)
		while (!ibv_get_cq_event(cq->dev[i].ch, &ev_cq, &ev_ctx))
			ibv_ack_cq_events(ev_cq, 1);
	/* CM events (connected, peer gone) keep the fd readable: move
	 * them into the backlog so the fd quiets down. */
	process_cm_events(cq);
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

/*
 * ep's connection ended and its QP is in the error state. A device need
 * not complete work posted after its QP failed (libsiw and librxe put a
 * receive into a ring that the kernel flushed already; nothing flushes it
 * again), so a caller waiting for it would wait for ever. What the device
 * completed is taken first, in order; ep's work still out is then
 * completed here as flushed, and a device completion that still comes for
 * it is dropped; work posted from now on is refused. Called with the cq
 * lock held, outside any poll.
 */
void verbs_flush_ep(struct sdp_cq *cq, struct sdp_ep *ep)
{
	struct sdp_completion c;
	struct verbs_op *op;
	bool hello = false;

	poll_all(cq);
	pthread_mutex_lock(&ep->ops_lock);
	ep->ops_flushed = true;
	for (op = ep->ops; op; op = op->next) {
		if (op->reported)
			continue;
		op->reported = true;
		if (op->op == VERBS_OP_HELLO) {
			hello = hello || op == ep->hello;
			continue;
		}
		if (ep->closed)
			continue;
		c = (struct sdp_completion){
			.context = op->context,
			.ep = ep,
			.ep_context = ep->ep_context,
			.status = op->status ? op->status : -ECONNRESET,
			.op = op->op,
		};
		verbs_cq_push(cq, &c);
	}
	pthread_mutex_unlock(&ep->ops_lock);
	if (hello) {
		ep->hello = NULL;
		verbs_gate_open(ep, false);
	}
}

/*
 * ep's QP is destroyed: no completion of it can come any more but those
 * the CQs hold, which are taken now (others' into the backlog, ep's
 * dropped). The work that never completed is freed with it. Called with
 * the cq lock held.
 */
void verbs_cq_forget_ep(struct sdp_cq *cq, struct sdp_ep *ep)
{
	struct verbs_op *op;
	int n = 0;

	poll_all(cq);
	pthread_mutex_lock(&ep->ops_lock);
	ep->ops_flushed = true;
	while ((op = ep->ops)) {
		verbs_op_unlink(ep, op);
		free(op);
		n++;
	}
	pthread_mutex_unlock(&ep->ops_lock);
	if (n)
		vlog(cq->vp, 6, "endpoint %p closed with %d work requests the "
		     "device never completed", (void *)ep, n);
}
