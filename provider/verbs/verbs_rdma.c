// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * verbs_rdma.c - the data path of the verbs provider: control messages
 * (send / receive) and RDMA write / read on the endpoint's RC QP, with the
 * descriptor checks done before posting and ibv_post_* errors normalised;
 * the iWARP start (the active side's hello, the passive side's held work).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "verbs.h"

/* Builds the ibv SGEs; each element must lie inside its registration. */
static int build_sgl(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		     bool need_write, struct ibv_sge *out, uint64_t *total)
{
	int i;

	if (nsge < 0 || nsge > VERBS_MAX_SGE || (nsge && !sgl))
		return -EINVAL;
	*total = 0;
	for (i = 0; i < nsge; i++) {
		const struct verbs_mr *m = (const struct verbs_mr *)sgl[i].mr;
		char *a = sgl[i].addr;

		if (!m || !a || sgl[i].length > UINT32_MAX ||
		    a < (char *)m->addr ||
		    a + sgl[i].length > (char *)m->addr + m->len)
			return -EINVAL;
		if (need_write && !(m->access & SDP_ACCESS_LOCAL_WRITE))
			return -SDP_ERIGHTS;
		out[i].addr = (uintptr_t)a;
		out[i].length = sgl[i].length;
		out[i].lkey = m->mr[ep->devi]->lkey;
		*total += sgl[i].length;
	}
	return 0;
}

/*
 * A new op, on ep's list: NULL with *err set when there is no memory or
 * the connection's end was already reported (verbs_flush_ep: work posted
 * now might never complete).
 */
static struct verbs_op *op_new(struct sdp_ep *ep, uint32_t kind,
			       uint64_t context, uint64_t bytes, int *err)
{
	struct verbs_op *op = calloc(1, sizeof(*op));

	if (!op) {
		*err = -ENOMEM;
		return NULL;
	}
	op->ep = ep;
	op->context = context;
	op->bytes = bytes;
	op->op = kind;
	op->pieces = 1;
	pthread_mutex_lock(&ep->ops_lock);
	if (ep->ops_flushed) {
		pthread_mutex_unlock(&ep->ops_lock);
		free(op);
		*err = -ECONNRESET;
		return NULL;
	}
	op->next = ep->ops;
	if (ep->ops)
		ep->ops->prev = op;
	ep->ops = op;
	pthread_mutex_unlock(&ep->ops_lock);
	return op;
}

/*
 * An op that never reached the QP (or took none of its pieces there): off
 * the list and freed. If verbs_flush_ep completed it meanwhile, that
 * completion is the caller's answer (SDP_PENDING); else err.
 */
static int op_unposted(struct sdp_ep *ep, struct verbs_op *op, int err)
{
	bool reported;

	pthread_mutex_lock(&ep->ops_lock);
	verbs_op_unlink(ep, op);
	reported = op->reported;
	pthread_mutex_unlock(&ep->ops_lock);
	free(op);
	return reported ? SDP_PENDING : err;
}

/*
 * Every send-queue post goes through here. On an iWARP passive side whose
 * peer has not spoken yet (MPA: the initiator sends first; a reply frame
 * the initiator finds followed by our data fails its connection) the work
 * is copied and held, in order, until verbs_gate_open. Returns what
 * ibv_post_send does (0 or a positive errno, *bad the first not taken).
 */
int verbs_qp_post(struct sdp_ep *ep, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad)
{
	struct verbs_held *h;
	struct ibv_send_wr *w;
	int n = 0;

	if (!__atomic_load_n(&ep->gate_closed, __ATOMIC_ACQUIRE))
		return ibv_post_send(ep->id->qp, wr, bad);
	pthread_mutex_lock(&ep->gate_lock);
	if (!ep->gate_closed) {
		pthread_mutex_unlock(&ep->gate_lock);
		return ibv_post_send(ep->id->qp, wr, bad);
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		pthread_mutex_unlock(&ep->gate_lock);
		*bad = wr;
		return ENOMEM;
	}
	for (w = wr; w && n < VERBS_MAX_PIECES; w = w->next, n++) {
		h->wr[n] = *w;
		memcpy(h->sge[n], w->sg_list, w->num_sge * sizeof(*w->sg_list));
		h->wr[n].sg_list = h->sge[n];
		h->wr[n].next = NULL;
		if (n)
			h->wr[n - 1].next = &h->wr[n];
	}
	h->n = n;
	if (ep->held_tail)
		ep->held_tail->next = h;
	else
		ep->held_head = h;
	ep->held_tail = h;
	pthread_mutex_unlock(&ep->gate_lock);
	return 0;
}

/*
 * Opens the gate: the held work is posted in order (post) or completed
 * as flushed (the connection is going). Called with the cq lock held.
 */
void verbs_gate_open(struct sdp_ep *ep, bool post)
{
	struct ibv_send_wr *bad;
	struct verbs_held *h;

	pthread_mutex_lock(&ep->gate_lock);
	while ((h = ep->held_head)) {
		ep->held_head = h->next;
		bad = h->wr;
		if (post && !ibv_post_send(ep->id->qp, h->wr, &bad))
			bad = NULL;
		if (bad) {
			post = false;
			verbs_fail_wr(ep->cq, bad, IBV_WC_WR_FLUSH_ERR);
		}
		free(h);
	}
	ep->held_tail = NULL;
	__atomic_store_n(&ep->gate_closed, false, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ep->gate_lock);
}

/*
 * ibv_post_* answer a positive errno (libsiw: negative); ENOMEM means the
 * queue is full.
 */
static int post_errno(int ret)
{
	if (ret < 0)
		ret = -ret;
	return ret == ENOMEM ? -ENOBUFS : -ret;
}

/*
 * The iWARP start: the passive side posts an empty receive before it
 * accepts (the first of its receive queue), the active side fills it with
 * an empty send once connected. Neither completion is reported.
 */
int verbs_hello_post(struct sdp_ep *ep)
{
	struct verbs_op *op;
	int ret;

	op = op_new(ep, VERBS_OP_HELLO, 0, 0, &ret);
	if (!op)
		return ret;
	if (ep->active) {
		struct ibv_send_wr wr = {
			.wr_id = (uintptr_t)op,
			.opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
		}, *bad;

		ret = ibv_post_send(ep->id->qp, &wr, &bad);
	} else {
		struct verbs_dev *d = &ep->vp->dev[ep->devi];
		struct ibv_sge sge = {
			.addr = (uintptr_t)&d->hello_buf,
			.length = sizeof(d->hello_buf),
			.lkey = d->hello_mr->lkey,
		};
		struct ibv_recv_wr wr = {
			.wr_id = (uintptr_t)op,
			.sg_list = &sge,
			.num_sge = 1,
		}, *bad;

		ret = ibv_post_recv(ep->id->qp, &wr, &bad);
		if (!ret)
			ep->hello = op;
	}
	if (ret) {
		ret = op_unposted(ep, op, post_errno(ret));
		return ret == SDP_PENDING ? -ECONNRESET : ret;
	}
	return 0;
}

static int post_send_wr(struct sdp_ep *ep, struct ibv_send_wr *wr,
			struct verbs_op *op)
{
	struct ibv_send_wr *bad;
	int ret;

	wr->wr_id = (uintptr_t)op;
	wr->send_flags = IBV_SEND_SIGNALED;
	ret = verbs_qp_post(ep, wr, &bad);
	if (ret) {
		return op_unposted(ep, op, post_errno(ret));
	}
	return SDP_PENDING;
}

static int ep_usable(struct sdp_ep *ep)
{
	if (!ep || ep->closed)
		return -EINVAL;
	if (ep->state == VERBS_EP_DEAD)
		return -ECONNRESET;
	if (ep->state != VERBS_EP_CONNECTED)
		return -ENOTCONN;
	return 0;
}

int verbs_post_send(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		    uint64_t context, uint32_t flags)
{
	struct ibv_sge sge[VERBS_MAX_SGE];
	struct ibv_send_wr wr;
	struct verbs_op *op;
	uint64_t total;
	int ret;

	ret = ep_usable(ep);
	if (ret)
		return ret;
	if (nsge > ep->vp->dev[ep->devi].max_sge)
		return -EINVAL;
	ret = build_sgl(ep, sgl, nsge, false, sge, &total);
	if (ret)
		return ret;
	if (total > VERBS_MAX_MSG)
		return -EMSGSIZE;
	op = op_new(ep, SDP_OP_SEND, context, total, &ret);
	if (!op)
		return ret;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = sge;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_SEND;
	return post_send_wr(ep, &wr, op);
}

/* Receives may be posted while the connection is still being set up. */
int verbs_post_recv(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		    uint64_t context)
{
	struct ibv_sge sge[VERBS_MAX_SGE];
	struct ibv_recv_wr wr, *bad;
	struct verbs_op *op;
	uint64_t total;
	int ret;

	if (!ep || ep->closed)
		return -EINVAL;
	if (ep->state == VERBS_EP_DEAD)
		return -ECONNRESET;
	if (nsge > ep->vp->dev[ep->devi].max_sge)
		return -EINVAL;
	ret = build_sgl(ep, sgl, nsge, true, sge, &total);
	if (ret)
		return ret;
	op = op_new(ep, SDP_OP_RECV, context, total, &ret);
	if (!op)
		return ret;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uintptr_t)op;
	wr.sg_list = sge;
	wr.num_sge = nsge;
	ret = ibv_post_recv(ep->id->qp, &wr, &bad);
	if (ret) {
		return op_unposted(ep, op, post_errno(ret));
	}
	return SDP_PENDING;
}

/*
 * Posts one RDMA transfer as a chain of work requests of at most the port's
 * max_msg_sz and the device's SGE limit each (a piece may take parts of
 * several SGEs); all share op.
 */
static int post_pieces(struct sdp_ep *ep, const struct ibv_sge *sge, int nsge,
		       uint64_t total, uint64_t raddr, uint32_t rkey,
		       bool is_read, struct verbs_op *op)
{
	struct verbs_dev *d = &ep->vp->dev[ep->devi];
	/* an RDMA read's sink may take fewer SGEs (iWARP: one) */
	int maxsge = is_read ? d->max_sge_rd : d->max_sge;
	uint64_t chunk = d->max_msg_sz, done = 0;
	struct ibv_send_wr wr[VERBS_MAX_PIECES], *bad;
	struct ibv_sge psge[VERBS_MAX_PIECES][VERBS_MAX_SGE];
	uint64_t in_sge = 0;	/* bytes of sge[si] already used */
	int n = 0, si = 0, ret;

	memset(wr, 0, sizeof(wr));
	do {
		uint64_t want = total - done < chunk ? total - done : chunk;
		struct ibv_send_wr *w = &wr[n];

		w->wr_id = (uintptr_t)op;
		w->sg_list = psge[n];
		w->opcode = is_read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		w->send_flags = IBV_SEND_SIGNALED;
		w->wr.rdma.remote_addr = raddr + done;
		w->wr.rdma.rkey = rkey;
		while (want && si < nsge && w->num_sge < maxsge) {
			uint64_t take = sge[si].length - in_sge;

			if (take > want)
				take = want;
			psge[n][w->num_sge] = (struct ibv_sge){
				.addr = sge[si].addr + in_sge,
				.length = take,
				.lkey = sge[si].lkey,
			};
			w->num_sge++;
			want -= take;
			done += take;
			in_sge += take;
			if (in_sge == sge[si].length) {
				si++;
				in_sge = 0;
			}
		}
		if (n)
			wr[n - 1].next = w;
		n++;
	} while (done < total && n < VERBS_MAX_PIECES);
	if (done < total)
		return op_unposted(ep, op, -EMSGSIZE);
	op->pieces = n;
	ret = verbs_qp_post(ep, wr, &bad);
	if (ret) {
		int posted = bad - wr;

		if (!posted)
			return op_unposted(ep, op, post_errno(ret));
		/* some pieces went out: their completions report the
		 * transfer as failed */
		op->pieces = posted;
		op->status = -EIO;
	}
	return SDP_PENDING;
}

/*
 * The descriptor came from the peer; the hardware enforces it anyway, but
 * checking what it says first gives precise errors (bounds, rights) and
 * keeps the QP out of the error state an RDMA access fault would cause.
 */
static int rdma_post(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		     const struct sdp_rdma_desc *remote, uint64_t offset,
		     uint64_t context, bool is_read)
{
	struct ibv_sge sge[VERBS_MAX_SGE];
	struct verbs_op *op;
	uint64_t total;
	int ret;

	ret = ep_usable(ep);
	if (ret)
		return ret;
	if (!remote)
		return -EINVAL;
	ret = build_sgl(ep, sgl, nsge, is_read, sge, &total);
	if (ret)
		return ret;
	if (remote->tag != verbs_desc_tag(remote))
		return -SDP_EBADKEY;
	if (offset > remote->length || total > remote->length - offset ||
	    remote->addr + remote->length < remote->addr)
		return -SDP_EBOUNDS;
	if (!(remote->access & (is_read ? SDP_ACCESS_REMOTE_READ :
				SDP_ACCESS_REMOTE_WRITE)))
		return -SDP_ERIGHTS;
	if (total > ep->max_rdma)
		return -EMSGSIZE;
	op = op_new(ep, is_read ? SDP_OP_RDMA_READ : SDP_OP_RDMA_WRITE,
		    context, total, &ret);
	if (!op)
		return ret;
	return post_pieces(ep, sge, nsge, total, remote->addr + offset,
			   remote->key, is_read, op);
}

int verbs_rdma_write(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		     const struct sdp_rdma_desc *remote, uint64_t offset,
		     uint64_t context, uint32_t flags)
{
	return rdma_post(ep, sgl, nsge, remote, offset, context, false);
}

int verbs_rdma_read(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		    const struct sdp_rdma_desc *remote, uint64_t offset,
		    uint64_t context, uint32_t flags)
{
	if (ep && ep->vp->opt.no_rdma_read)
		return -EOPNOTSUPP;
	return rdma_post(ep, sgl, nsge, remote, offset, context, true);
}
