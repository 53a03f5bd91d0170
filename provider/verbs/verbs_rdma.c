// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * verbs_rdma.c - the data path of the verbs provider: control messages
 * (send / receive) and RDMA write / read on the endpoint's RC QP, with the
 * descriptor checks done before posting and ibv_post_* errors normalised.
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

static struct verbs_op *op_new(struct sdp_ep *ep, uint32_t kind,
			       uint64_t context, uint64_t bytes)
{
	struct verbs_op *op = malloc(sizeof(*op));

	if (!op)
		return NULL;
	op->ep = ep;
	op->context = context;
	op->bytes = bytes;
	op->op = kind;
	op->pieces = 1;
	op->status = 0;
	return op;
}

static int post_send_wr(struct sdp_ep *ep, struct ibv_send_wr *wr,
			struct verbs_op *op)
{
	struct ibv_send_wr *bad;
	int ret;

	wr->wr_id = (uintptr_t)op;
	wr->send_flags = IBV_SEND_SIGNALED;
	__atomic_add_fetch(&ep->outstanding, 1, __ATOMIC_SEQ_CST);
	ret = ibv_post_send(ep->id->qp, wr, &bad);
	if (ret) {
		__atomic_sub_fetch(&ep->outstanding, 1, __ATOMIC_SEQ_CST);
		free(op);
		/* positive errno; ENOMEM means the send queue is full */
		return ret == ENOMEM ? -ENOBUFS : -ret;
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
	ret = build_sgl(ep, sgl, nsge, false, sge, &total);
	if (ret)
		return ret;
	if (total > VERBS_MAX_MSG)
		return -EMSGSIZE;
	op = op_new(ep, SDP_OP_SEND, context, total);
	if (!op)
		return -ENOMEM;
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
	ret = build_sgl(ep, sgl, nsge, true, sge, &total);
	if (ret)
		return ret;
	op = op_new(ep, SDP_OP_RECV, context, total);
	if (!op)
		return -ENOMEM;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uintptr_t)op;
	wr.sg_list = sge;
	wr.num_sge = nsge;
	__atomic_add_fetch(&ep->outstanding, 1, __ATOMIC_SEQ_CST);
	ret = ibv_post_recv(ep->id->qp, &wr, &bad);
	if (ret) {
		__atomic_sub_fetch(&ep->outstanding, 1, __ATOMIC_SEQ_CST);
		free(op);
		return ret == ENOMEM ? -ENOBUFS : -ret;
	}
	return SDP_PENDING;
}

/*
 * Posts one RDMA transfer as a chain of work requests of at most the port's
 * max_msg_sz each (a piece may take parts of several SGEs); all share op.
 */
static int post_pieces(struct sdp_ep *ep, const struct ibv_sge *sge, int nsge,
		       uint64_t total, uint64_t raddr, uint32_t rkey,
		       bool is_read, struct verbs_op *op)
{
	uint64_t chunk = ep->vp->dev[ep->devi].max_msg_sz, done = 0;
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
		while (want && si < nsge) {
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
	if (done < total) {
		free(op);
		return -EMSGSIZE;
	}
	op->pieces = n;
	__atomic_add_fetch(&ep->outstanding, n, __ATOMIC_SEQ_CST);
	ret = ibv_post_send(ep->id->qp, wr, &bad);
	if (ret) {
		int posted = bad - wr;

		__atomic_sub_fetch(&ep->outstanding, n - posted,
				   __ATOMIC_SEQ_CST);
		if (!posted) {
			free(op);
			return ret == ENOMEM ? -ENOBUFS : -ret;
		}
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
		    context, total);
	if (!op)
		return -ENOMEM;
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
