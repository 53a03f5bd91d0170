// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * verbs_cm.c - connection management of the verbs provider on librdmacm:
 * address and route resolution, listeners on RDMA_PS_TCP (the TCP port
 * numbers), connect / accept / reject with private data, probes, the CM
 * events of connected endpoints, and endpoint teardown.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include "verbs.h"

static int cm_event_errno(enum rdma_cm_event_type t)
{
	switch (t) {
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		return -ENETUNREACH;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return -ENODEV;
	default:
		return -EPROTO;
	}
}

/* Waits up to ms for the next event on a private (blocking) channel. */
static int wait_event(struct rdma_event_channel *ch, int ms,
		      struct rdma_cm_event **ev)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	int n;

	do
		n = poll(&pfd, 1, ms);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ETIMEDOUT;
	if (rdma_get_cm_event(ch, ev))
		return verbs_errno(EIO);
	return 0;
}

/* Expects one event of type want; anything else becomes an error. */
static int expect_event(struct rdma_event_channel *ch, int ms,
			enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	int ret = wait_event(ch, ms, &ev);

	if (ret)
		return ret == -ETIMEDOUT ? -ENETUNREACH : ret;
	if (ev->event != want)
		ret = cm_event_errno(ev->event);
	rdma_ack_cm_event(ev);
	return ret;
}

/* The RDMA port of TCP port P on an iWARP device (VERBS_IWARP_PORT_XOR). */
static void iwarp_port(struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port ^=
			htons(VERBS_IWARP_PORT_XOR);
	else
		((struct sockaddr_in6 *)ss)->sin6_port ^=
			htons(VERBS_IWARP_PORT_XOR);
}

static int resolve_once(struct verbs_provider *vp, struct sockaddr_storage *ss,
			void *ctx, struct rdma_event_channel **chp,
			struct rdma_cm_id **idp);

/*
 * Resolves address and route of dst on a fresh id of a private channel.
 * The device is known only then: one that follows iWARP rules is resolved
 * again with the port it uses for dst's (iwarp_port).
 */
static int resolve(struct verbs_provider *vp, const struct sockaddr *dst,
		   socklen_t dstlen, void *ctx, struct rdma_event_channel **chp,
		   struct rdma_cm_id **idp)
{
	struct sockaddr_storage ss;
	int ret;

	ret = verbs_map_addr(vp, dst, dstlen, &ss);
	if (ret)
		return ret;
	ret = resolve_once(vp, &ss, ctx, chp, idp);
	if (ret || !vp->dev[verbs_dev_index(vp, (*idp)->verbs)].iwarp)
		return ret;
	rdma_destroy_id(*idp);
	rdma_destroy_event_channel(*chp);
	iwarp_port(&ss);
	return resolve_once(vp, &ss, ctx, chp, idp);
}

static int resolve_once(struct verbs_provider *vp, struct sockaddr_storage *ss,
			void *ctx, struct rdma_event_channel **chp,
			struct rdma_cm_id **idp)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	int ret;

	ch = rdma_create_event_channel();
	if (!ch)
		return verbs_errno(ENODEV);
	if (rdma_create_id(ch, &id, ctx, RDMA_PS_TCP)) {
		ret = verbs_errno(ENOMEM);
		goto destroy_channel;
	}
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)ss,
			      vp->opt.resolve_ms)) {
		ret = verbs_errno(ENETUNREACH);
		goto destroy_id;
	}
	ret = expect_event(ch, vp->opt.resolve_ms + 500,
			   RDMA_CM_EVENT_ADDR_RESOLVED);
	if (ret)
		goto destroy_id;
	if (rdma_resolve_route(id, vp->opt.resolve_ms)) {
		ret = verbs_errno(ENETUNREACH);
		goto destroy_id;
	}
	ret = expect_event(ch, vp->opt.resolve_ms + 500,
			   RDMA_CM_EVENT_ROUTE_RESOLVED);
	if (ret)
		goto destroy_id;
	if (verbs_dev_index(vp, id->verbs) < 0) {
		ret = -ENETUNREACH;
		goto destroy_id;
	}
	*chp = ch;
	*idp = id;
	return 0;

destroy_id:
	rdma_destroy_id(id);
destroy_channel:
	rdma_destroy_event_channel(ch);
	return ret;
}

static void put_priv(uint8_t *buf, enum verbs_priv_kind kind,
		     const void *priv, size_t len)
{
	struct verbs_priv_hdr h = {
		.magic = { VERBS_PRIV_MAGIC0, VERBS_PRIV_MAGIC1 },
		.kind = kind,
		.len = len,
	};

	memcpy(buf, &h, sizeof(h));
	if (len)
		memcpy(buf + sizeof(h), priv, len);
}

/* Returns the kind and copies the caller data; -EPROTO if not ours. */
static int get_priv(const void *data, size_t datalen, uint8_t *out,
		    uint32_t *outlen)
{
	struct verbs_priv_hdr h;

	if (!data || datalen < sizeof(h))
		return -EPROTO;
	memcpy(&h, data, sizeof(h));
	if (h.magic[0] != VERBS_PRIV_MAGIC0 ||
	    h.magic[1] != VERBS_PRIV_MAGIC1 ||
	    h.len > SDP_MAX_PRIVATE_DATA || sizeof(h) + h.len > datalen)
		return -EPROTO;
	if (out) {
		memcpy(out, (const uint8_t *)data + sizeof(h), h.len);
		*outlen = h.len;
	}
	return h.kind;
}

static uint8_t rd_atom(struct verbs_dev *d)
{
	int n = d->attr.max_qp_rd_atom;

	if (d->attr.max_qp_init_rd_atom < n)
		n = d->attr.max_qp_init_rd_atom;
	return n > 16 ? 16 : n;
}

/* An RC QP on the id's device whose both queues complete on cq. */
static int create_qp(struct sdp_ep *ep)
{
	struct verbs_provider *vp = ep->vp;
	struct verbs_dev *d = &vp->dev[ep->devi];
	struct ibv_qp_init_attr qa;
	uint32_t maxwr = d->attr.max_qp_wr;

	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	qa.send_cq = ep->cq->dev[ep->devi].cq;
	qa.recv_cq = ep->cq->dev[ep->devi].cq;
	qa.cap.max_send_wr = vp->opt.qp_send < maxwr ? vp->opt.qp_send : maxwr;
	qa.cap.max_recv_wr = vp->opt.qp_recv < maxwr ? vp->opt.qp_recv : maxwr;
	qa.cap.max_send_sge = d->max_sge;
	qa.cap.max_recv_sge = d->max_sge;
	if (rdma_create_qp(ep->id, d->pd, &qa)) {
		int ret = verbs_errno(ENOMEM);

		vlog(vp, 3, "rdma_create_qp on device %d failed: %s (id on %s, "
		     "pd on %s, cq %p, %u send / %u recv WRs, device max %u)",
		     ep->devi, strerror(-ret),
		     ep->id->verbs ? ep->id->verbs->device->name : "none",
		     d->pd->context->device->name, (void *)qa.send_cq,
		     qa.cap.max_send_wr, qa.cap.max_recv_wr, maxwr);
		return ret;
	}
	ep->max_send = qa.cap.max_send_wr;
	ep->max_recv = qa.cap.max_recv_wr;
	ep->max_rdma = d->max_msg_sz * VERBS_MAX_PIECES;
	if (ep->max_rdma > UINT32_MAX)
		ep->max_rdma = UINT32_MAX;
	return 0;
}

static struct sdp_ep *ep_new(struct verbs_provider *vp, struct sdp_cq *cq,
			     void *ep_context)
{
	struct sdp_ep *ep = calloc(1, sizeof(*ep));

	if (!ep)
		return NULL;
	ep->vp = vp;
	ep->cq = cq;
	ep->ep_context = ep_context;
	ep->state = VERBS_EP_CONNECTING;
	pthread_mutex_init(&ep->gate_lock, NULL);
	pthread_mutex_init(&ep->ops_lock, NULL);
	return ep;
}

void verbs_ep_free(struct sdp_ep *ep)
{
	pthread_mutex_destroy(&ep->gate_lock);
	pthread_mutex_destroy(&ep->ops_lock);
	free(ep);
}

int verbs_connect(struct sdp_provider *p, struct sdp_cq *cq,
		  const struct sockaddr *dst, socklen_t dstlen,
		  const void *priv, size_t privlen, void *ep_context,
		  struct sdp_ep **epp)
{
	struct verbs_provider *vp = (struct verbs_provider *)p;
	uint8_t buf[sizeof(struct verbs_priv_hdr) + SDP_MAX_PRIVATE_DATA];
	struct rdma_conn_param cp;
	struct rdma_event_channel *ch;
	struct sdp_ep *ep;
	int ret;

	if (!cq || !epp || (privlen && !priv))
		return -EINVAL;
	if (privlen > SDP_MAX_PRIVATE_DATA) {
		vlog(vp, 3, "connect private data of %zu bytes exceeds the "
		     "SPI limit of %d (SDP_MAX_PRIVATE_DATA)", privlen,
		     SDP_MAX_PRIVATE_DATA);
		return -EINVAL;
	}
	ep = ep_new(vp, cq, ep_context);
	if (!ep)
		return -ENOMEM;
	ep->active = true;
	ret = resolve(vp, dst, dstlen, ep, &ch, &ep->id);
	if (ret)
		goto free_ep;
	ep->devi = verbs_dev_index(vp, ep->id->verbs);
	ret = create_qp(ep);
	if (ret)
		goto destroy_id;

	pthread_mutex_lock(&cq->lock);
	if (rdma_migrate_id(ep->id, cq->cm_ch)) {
		ret = verbs_errno(EIO);
		pthread_mutex_unlock(&cq->lock);
		goto destroy_qp;
	}
	rdma_destroy_event_channel(ch);
	ch = NULL;
	put_priv(buf, VERBS_PRIV_CONNECT, priv, privlen);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = buf;
	cp.private_data_len = sizeof(struct verbs_priv_hdr) + privlen;
	cp.responder_resources = rd_atom(&vp->dev[ep->devi]);
	cp.initiator_depth = cp.responder_resources;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (rdma_connect(ep->id, &cp)) {
		ret = verbs_errno(ECONNREFUSED);
		pthread_mutex_unlock(&cq->lock);
		goto destroy_qp;
	}
	cq->neps++;
	*epp = ep;
	pthread_mutex_unlock(&cq->lock);
	return SDP_PENDING;

destroy_qp:
	rdma_destroy_qp(ep->id);
destroy_id:
	rdma_destroy_id(ep->id);
	if (ch)
		rdma_destroy_event_channel(ch);
free_ep:
	verbs_ep_free(ep);
	return ret;
}

struct probe_reap {
	struct verbs_provider *vp;
	struct rdma_cm_id *id;
	struct rdma_event_channel *ch;
};

static void *probe_reap(void *arg)
{
	struct probe_reap *r = arg;

	rdma_destroy_qp(r->id);
	rdma_destroy_id(r->id);
	rdma_destroy_event_channel(r->ch);
	__atomic_sub_fetch(&r->vp->reapers, 1, __ATOMIC_SEQ_CST);
	free(r);
	return NULL;
}

/*
 * iWARP cannot cancel a connect in flight: destroying its id waits for the
 * answer or the peer's MPA timeout (siw: 10 s). A probe left unanswered is
 * destroyed by a thread of its own, so the caller goes on at probe_ms.
 * False when that thread could not start (the caller destroys it).
 */
static bool probe_reap_later(struct verbs_provider *vp, struct rdma_cm_id *id,
			     struct rdma_event_channel *ch)
{
	struct probe_reap *r = malloc(sizeof(*r));
	pthread_attr_t attr;
	pthread_t t;
	bool ok;

	if (!r)
		return false;
	*r = (struct probe_reap){ .vp = vp, .id = id, .ch = ch };
	__atomic_add_fetch(&vp->reapers, 1, __ATOMIC_SEQ_CST);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ok = !pthread_create(&t, &attr, probe_reap, r);
	pthread_attr_destroy(&attr);
	if (!ok) {
		__atomic_sub_fetch(&vp->reapers, 1, __ATOMIC_SEQ_CST);
		free(r);
	}
	return ok;
}

/*
 * probe: a real connection attempt marked as a probe. A listener of this
 * provider answers with a reject carrying a probe acknowledgement (0); the
 * peer's CM rejects at once when nothing listens (-ECONNREFUSED). When the
 * answer does not come within probe_ms, something does hold the port but
 * its owner has not looked at its listener yet: that counts as present.
 */
int verbs_probe(struct sdp_provider *p, const struct sockaddr *addr,
		socklen_t addrlen)
{
	struct verbs_provider *vp = (struct verbs_provider *)p;
	uint8_t buf[sizeof(struct verbs_priv_hdr)];
	struct rdma_event_channel *ch;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qa;
	struct rdma_cm_id *id;
	int ret;

	ret = resolve(vp, addr, addrlen, NULL, &ch, &id);
	if (ret)
		return ret;
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 1;
	qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	/* librdmacm creates (and later frees) the CQs it is not given */
	if (rdma_create_qp(id, vp->dev[verbs_dev_index(vp, id->verbs)].pd,
			   &qa)) {
		ret = verbs_errno(ENOMEM);
		goto destroy_id;
	}
	put_priv(buf, VERBS_PRIV_PROBE, NULL, 0);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = buf;
	cp.private_data_len = sizeof(buf);
	cp.retry_count = 7;
	if (rdma_connect(id, &cp)) {
		ret = verbs_errno(ECONNREFUSED);
		goto destroy_qp;
	}
	ret = wait_event(ch, vp->opt.probe_ms, &ev);
	if (ret == -ETIMEDOUT) {
		if (vp->dev[verbs_dev_index(vp, id->verbs)].iwarp &&
		    probe_reap_later(vp, id, ch))
			return 0;
		ret = 0;
		goto destroy_qp;
	}
	if (ret)
		goto destroy_qp;
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		ret = get_priv(ev->param.conn.private_data,
			       ev->param.conn.private_data_len, NULL, NULL) ==
		      VERBS_PRIV_PROBE_ACK ? 0 : -ECONNREFUSED;
	else if (ev->event == RDMA_CM_EVENT_ESTABLISHED)
		ret = 0;	/* accepted by something that is not us */
	else
		ret = cm_event_errno(ev->event);
	rdma_ack_cm_event(ev);
	if (!ret)
		rdma_disconnect(id);
destroy_qp:
	rdma_destroy_qp(id);
destroy_id:
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return ret;
}

/* The IPv6 wildcard address (a dual-stack program's listener, [::]). */
static bool iwarp_any6(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET6 &&
	       IN6_IS_ADDR_UNSPECIFIED(
		       &((const struct sockaddr_in6 *)ss)->sin6_addr);
}

/* An id bound to :: that takes IPv6 peers only (set before the bind). */
static int iwarp_afonly(struct rdma_cm_id *id)
{
	int one = 1;

	return rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY,
			       &one, sizeof(one)) ? verbs_errno(EINVAL) : 0;
}

/*
 * iWARP, listener on [::] (iperf3's): the kernel's iWARP listener on the
 * IPv6 wildcard accepts an IPv4 peer's TCP connection, but rdma_cm then
 * finds no device for the local address it is given, ::ffff:a.b.c.d, and
 * drops the request, so no IPv4 client could connect (nor probe: it counts
 * as no switch listening). The [::] id takes IPv6 peers only, and a second
 * id on 0.0.0.0, same port and event channel, takes the IPv4 ones. Without
 * it (the IPv4 port taken) the listener still serves IPv6 peers.
 */
static void iwarp_listen_v4(struct sdp_listener *l,
			    const struct sockaddr_storage *any6, int backlog)
{
	struct sockaddr_in a = { .sin_family = AF_INET };

	a.sin_port = ((const struct sockaddr_in6 *)any6)->sin6_port;
	if (rdma_create_id(l->ch, &l->id4, l, RDMA_PS_TCP)) {
		l->id4 = NULL;
		return;
	}
	if (rdma_bind_addr(l->id4, (struct sockaddr *)&a) ||
	    rdma_listen(l->id4, backlog > 0 ? backlog : 128)) {
		vlog(l->vp, 4, "iWARP listener on [::] port %u: no IPv4 "
		     "listener beside it (%s): IPv4 peers stay on TCP",
		     ntohs(a.sin_port), strerror(errno));
		rdma_destroy_id(l->id4);
		l->id4 = NULL;
	}
}

int verbs_listen(struct sdp_provider *p, const struct sockaddr *addr,
		 socklen_t addrlen, int backlog, struct sdp_listener **lp)
{
	struct verbs_provider *vp = (struct verbs_provider *)p;
	struct sockaddr_storage ss;
	struct sdp_listener *l;
	int fl, ret;

	if (!lp)
		return -EINVAL;
	ret = verbs_map_addr(vp, addr, addrlen, &ss);
	if (ret)
		return ret;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->vp = vp;
	l->ch = rdma_create_event_channel();
	if (!l->ch) {
		ret = verbs_errno(ENODEV);
		goto free_l;
	}
	fl = fcntl(l->ch->fd, F_GETFL);
	if (fl < 0 || fcntl(l->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		ret = -errno;
		goto destroy_channel;
	}
	if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP)) {
		ret = verbs_errno(ENOMEM);
		goto destroy_channel;
	}
	if (rdma_bind_addr(l->id, (struct sockaddr *)&ss)) {
		ret = verbs_errno(EADDRNOTAVAIL);
		goto destroy_id;
	}
	/* an iWARP device (or, bound to any address, a host with one)
	 * listens on the port of iwarp_port: the program holds this one */
	if (l->id->verbs ? vp->dev[verbs_dev_index(vp, l->id->verbs)].iwarp :
			   vp->any_iwarp) {
		rdma_destroy_id(l->id);
		iwarp_port(&ss);
		if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP)) {
			ret = verbs_errno(ENOMEM);
			goto destroy_channel;
		}
		ret = iwarp_any6(&ss) ? iwarp_afonly(l->id) : 0;
		if (ret)
			goto destroy_id;
		if (rdma_bind_addr(l->id, (struct sockaddr *)&ss)) {
			ret = verbs_errno(EADDRNOTAVAIL);
			goto destroy_id;
		}
	}
	if (rdma_listen(l->id, backlog > 0 ? backlog : 128)) {
		ret = verbs_errno(EADDRINUSE);
		if (vp->any_iwarp)
			vlog(vp, 4, "iWARP listener on TCP port %u: %s (the "
			     "port is taken on this host)",
			     ntohs(ss.ss_family == AF_INET ?
				   ((struct sockaddr_in *)&ss)->sin_port :
				   ((struct sockaddr_in6 *)&ss)->sin6_port),
			     strerror(-ret));
		goto destroy_id;
	}
	if (iwarp_any6(&ss) && l->id->verbs == NULL && vp->any_iwarp)
		iwarp_listen_v4(l, &ss, backlog);
	*lp = l;
	return 0;

destroy_id:
	rdma_destroy_id(l->id);
destroy_channel:
	rdma_destroy_event_channel(l->ch);
free_l:
	free(l);
	return ret;
}

int verbs_listener_fd(struct sdp_listener *l)
{
	return l ? l->ch->fd : -EINVAL;
}

int verbs_get_request(struct sdp_listener *l, struct sdp_conn_req **reqp,
		      void *priv, size_t *privlen)
{
	struct rdma_cm_event *ev;
	struct sdp_conn_req *req;
	uint8_t ack[sizeof(struct verbs_priv_hdr)];
	int kind;

	if (!l || !reqp)
		return -EINVAL;
	verbs_run_all_accepts(l->vp);
	for (;;) {
		if (rdma_get_cm_event(l->ch, &ev)) {
			int ret = verbs_errno(EAGAIN);

			return ret == -EWOULDBLOCK ? -EAGAIN : ret;
		}
		vlog(l->vp, 7, "listener: %s", rdma_event_str(ev->event));
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			rdma_ack_cm_event(ev);
			continue;
		}
		req = calloc(1, sizeof(*req));
		if (!req) {
			struct rdma_cm_id *id = ev->id;

			rdma_reject(id, NULL, 0);
			rdma_ack_cm_event(ev);
			rdma_destroy_id(id);
			return -ENOMEM;
		}
		kind = get_priv(ev->param.conn.private_data,
				ev->param.conn.private_data_len, req->priv,
				&req->priv_len);
		vlog(l->vp, 7, "listener: request of kind %d", kind);
		if (kind != VERBS_PRIV_CONNECT) {
			/* a probe (acknowledged) or not one of ours; a
			 * probe that gave up already makes reject fail */
			struct rdma_cm_id *id = ev->id;

			put_priv(ack, VERBS_PRIV_PROBE_ACK, NULL, 0);
			if (kind == VERBS_PRIV_PROBE)
				rdma_reject(id, ack, sizeof(ack));
			else
				rdma_reject(id, NULL, 0);
			rdma_ack_cm_event(ev);
			rdma_destroy_id(id);
			free(req);
			continue;
		}
		req->vp = l->vp;
		req->id = ev->id;
		req->initiator_depth = ev->param.conn.initiator_depth;
		req->responder_resources = ev->param.conn.responder_resources;
		rdma_ack_cm_event(ev);
		break;
	}
	if (privlen) {
		size_t n = *privlen < req->priv_len ? *privlen : req->priv_len;

		if (n && priv)
			memcpy(priv, req->priv, n);
		*privlen = req->priv_len;
	}
	*reqp = req;
	return 0;
}

int verbs_accept(struct sdp_conn_req *req, struct sdp_cq *cq,
		 const void *priv, size_t privlen, void *ep_context,
		 struct sdp_ep **epp)
{
	uint8_t buf[sizeof(struct verbs_priv_hdr) + SDP_MAX_PRIVATE_DATA];
	struct rdma_conn_param cp;
	struct sdp_ep *ep;
	uint8_t rd;
	int ret;

	if (!req || !cq || !epp || (privlen && !priv))
		return -EINVAL;
	if (privlen > SDP_MAX_PRIVATE_DATA)
		return -EINVAL;
	ep = ep_new(req->vp, cq, ep_context);
	if (!ep)
		return -ENOMEM;
	ep->id = req->id;
	ep->devi = verbs_dev_index(req->vp, ep->id->verbs);
	if (ep->devi < 0) {
		ret = -ENODEV;
		goto reject;
	}
	memcpy(ep->peer_priv, req->priv, req->priv_len);
	ep->peer_priv_len = req->priv_len;
	ret = create_qp(ep);
	if (ret)
		goto reject;
	if (req->vp->dev[ep->devi].iwarp) {
		/* first in the receive queue: the active side's hello */
		ep->gate_closed = true;
		ret = verbs_hello_post(ep);
		if (ret)
			goto destroy_qp;
	}

	pthread_mutex_lock(&cq->lock);
	ep->id->context = ep;
	if (rdma_migrate_id(ep->id, cq->cm_ch)) {
		ret = verbs_errno(EIO);
		pthread_mutex_unlock(&cq->lock);
		goto destroy_qp;
	}
	put_priv(buf, VERBS_PRIV_ACCEPT, priv, privlen);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = buf;
	cp.private_data_len = sizeof(struct verbs_priv_hdr) + privlen;
	rd = rd_atom(&req->vp->dev[ep->devi]);
	cp.responder_resources = rd < req->initiator_depth ?
				 rd : req->initiator_depth;
	cp.initiator_depth = rd < req->responder_resources ?
			     rd : req->responder_resources;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (ep->gate_closed && req->vp->opt.iwarp_defer_accept) {
		/* iWARP: accepted at the next poll of cq, after the
		 * caller's receives (verbs_run_accepts) */
		memcpy(ep->accept_priv, buf, cp.private_data_len);
		ep->accept_cp = cp;
		ep->accept_cp.private_data = ep->accept_priv;
		ep->accept_due = true;
		ep->accept_thread = pthread_self();
		ep->accept_next = cq->accepts;
		cq->accepts = ep;
		if (eventfd_write(cq->evfd, 1))
			vlog(req->vp, 3, "eventfd_write: %s", strerror(errno));
	} else if (rdma_accept(ep->id, &cp)) {
		ret = verbs_errno(ECONNABORTED);
		pthread_mutex_unlock(&cq->lock);
		goto destroy_qp;
	}
	cq->neps++;
	pthread_mutex_unlock(&cq->lock);
	free(req);
	*epp = ep;
	return SDP_PENDING;

destroy_qp:
	/* the posted hello may be in the CQ: taken (and dropped) once the
	 * QP is gone */
	pthread_mutex_lock(&cq->lock);
	ep->closed = true;
	rdma_destroy_qp(req->id);
	verbs_cq_forget_ep(cq, ep);
	pthread_mutex_unlock(&cq->lock);
reject:
	rdma_reject(req->id, NULL, 0);
	rdma_destroy_id(req->id);
	free(req);
	if (ep)
		verbs_ep_free(ep);
	return ret;
}

int verbs_reject(struct sdp_conn_req *req)
{
	int ret = 0;

	if (!req)
		return -EINVAL;
	if (rdma_reject(req->id, NULL, 0))
		ret = verbs_errno(EIO);
	rdma_destroy_id(req->id);
	free(req);
	return ret;
}

int verbs_listener_close(struct sdp_listener *l)
{
	if (!l)
		return -EINVAL;
	if (l->id4)
		rdma_destroy_id(l->id4);
	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->ch);
	free(l);
	return 0;
}

int verbs_ep_query(struct sdp_ep *ep, struct sdp_ep_attr *attr)
{
	struct sdp_ep_attr a;
	size_t n;

	if (!ep || !attr || attr->size < offsetof(struct sdp_ep_attr,
						   max_msg_size))
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	n = attr->size < sizeof(a) ? attr->size : sizeof(a);
	a.size = n;
	a.max_msg_size = VERBS_MAX_MSG;
	a.max_send = ep->max_send;
	a.max_recv = ep->max_recv;
	a.max_sge = ep->vp->dev[ep->devi].max_sge;
	a.max_rdma_size = ep->max_rdma;
	memcpy(a.peer_priv, ep->peer_priv, ep->peer_priv_len);
	a.peer_priv_len = ep->peer_priv_len;
	memcpy(attr, &a, n);
	return 0;
}

static void push_connect(struct sdp_cq *cq, struct sdp_ep *ep, int status)
{
	struct sdp_completion c = {
		.ep = ep,
		.ep_context = ep->ep_context,
		.status = status,
		.op = SDP_OP_CONNECT,
	};

	if (!ep->closed)
		verbs_cq_push(cq, &c);
}

/* The due iWARP hellos of cq and their connect completions (cq lock held,
 * the owner's poll). */
void verbs_run_hellos(struct sdp_cq *cq)
{
	struct sdp_ep *ep;
	int ret;

	while ((ep = cq->hellos)) {
		cq->hellos = ep->hello_next;
		ep->hello_next = NULL;
		ep->hello_due = false;
		if (ep->closed || ep->state != VERBS_EP_CONNECTED)
			continue;
		ret = verbs_hello_post(ep);
		if (ret) {
			vlog(cq->vp, 3, "iWARP hello: %s", strerror(-ret));
			ep->state = VERBS_EP_DEAD;
		}
		push_connect(cq, ep, ret);
	}
}

/*
 * A thread back at a listener for the next request has posted the receives
 * of the connections it accepted before: their deferred accepts go out
 * (the CQs whose owner is polling right now do it themselves). Other
 * threads' accepts wait for their own poll or listener.
 */
void verbs_run_all_accepts(struct verbs_provider *vp)
{
	struct sdp_cq *cq;

	if (!vp->any_iwarp || pthread_mutex_trylock(&vp->cq_list_lock))
		return;
	for (cq = vp->cqs; cq; cq = cq->next) {
		if (!cq->accepts || pthread_mutex_trylock(&cq->lock))
			continue;
		verbs_run_accepts(cq, true);
		pthread_mutex_unlock(&cq->lock);
	}
	pthread_mutex_unlock(&vp->cq_list_lock);
}

/*
 * The deferred iWARP accepts of cq (cq lock held): an iWARP sender that
 * finds no posted receive ends the connection, and the active side may
 * send as soon as it is accepted, so the passive side accepts only when
 * its caller polls again, its receives (posted after accept returned)
 * in place.
 */
void verbs_run_accepts(struct sdp_cq *cq, bool mine_only)
{
	struct sdp_ep *ep, **pp = &cq->accepts;

	while ((ep = *pp)) {
		if (mine_only &&
		    !pthread_equal(ep->accept_thread, pthread_self())) {
			pp = &ep->accept_next;
			continue;
		}
		*pp = ep->accept_next;
		ep->accept_next = NULL;
		ep->accept_due = false;
		if (ep->closed || ep->state != VERBS_EP_CONNECTING)
			continue;
		if (rdma_accept(ep->id, &ep->accept_cp)) {
			int ret = verbs_errno(ECONNABORTED);

			vlog(cq->vp, 4, "rdma_accept: %s", strerror(-ret));
			ep->state = VERBS_EP_DEAD;
			push_connect(cq, ep, ret);
		}
	}
}

void verbs_cm_event(struct sdp_cq *cq, struct rdma_cm_event *ev)
{
	struct sdp_ep *ep = ev->id->context;

	vlog(cq->vp, 7, "connection: %s (status %d)",
	     rdma_event_str(ev->event), ev->status);
	switch (ev->event) {
	case RDMA_CM_EVENT_ESTABLISHED:
		if (ep->state != VERBS_EP_CONNECTING)
			break;
		if (ev->param.conn.private_data_len && !ep->peer_priv_len)
			get_priv(ev->param.conn.private_data,
				 ev->param.conn.private_data_len,
				 ep->peer_priv, &ep->peer_priv_len);
		ep->state = VERBS_EP_CONNECTED;
		if (ep->active && cq->vp->dev[ep->devi].iwarp) {
			/* MPA: the initiator speaks first, but only once the
			 * caller's receives are up: the peer may answer at
			 * once. Another thread's poll leaves it to ours. */
			ep->hello_due = true;
			ep->hello_next = cq->hellos;
			cq->hellos = ep;
			if (cq->foreign)
				eventfd_write(cq->evfd, 1);
			else
				verbs_run_hellos(cq);
			break;
		}
		push_connect(cq, ep, 0);
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		if (ep->state != VERBS_EP_CONNECTING)
			break;
		ep->state = VERBS_EP_DEAD;
		ibv_modify_qp(ep->id->qp, &(struct ibv_qp_attr){
			.qp_state = IBV_QPS_ERR }, IBV_QP_STATE);
		push_connect(cq, ep, cm_event_errno(ev->event));
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (ep->state == VERBS_EP_CONNECTING)
			push_connect(cq, ep, -ECONNRESET);
		ep->state = VERBS_EP_DEAD;
		/* our side of the disconnect moves the QP to the error
		 * state: pending work flushes as -ECONNRESET */
		rdma_disconnect(ev->id);
		verbs_flush_ep(cq, ep);
		break;
	default:
		break;
	}
	rdma_ack_cm_event(ev);
}

int verbs_ep_close(struct sdp_ep *ep)
{
	struct sdp_cq *cq;

	if (!ep)
		return -EINVAL;
	cq = ep->cq;
	pthread_mutex_lock(&cq->lock);
	if (ep->accept_due) {
		struct sdp_ep **pp;

		for (pp = &cq->accepts; *pp; pp = &(*pp)->accept_next)
			if (*pp == ep) {
				*pp = ep->accept_next;
				break;
			}
		ep->accept_due = false;
	}
	if (ep->hello_due) {
		struct sdp_ep **pp;

		for (pp = &cq->hellos; *pp; pp = &(*pp)->hello_next)
			if (*pp == ep) {
				*pp = ep->hello_next;
				break;
			}
		ep->hello_due = false;
	}
	ep->closed = true;
	if (ep->state != VERBS_EP_DEAD)
		rdma_disconnect(ep->id);
	ep->state = VERBS_EP_DEAD;
	if (ep->id->qp)
		ibv_modify_qp(ep->id->qp, &(struct ibv_qp_attr){
			.qp_state = IBV_QPS_ERR }, IBV_QP_STATE);
	verbs_gate_open(ep, false);	/* held work completes as flushed */
	rdma_destroy_qp(ep->id);
	verbs_cq_forget_ep(cq, ep);
	rdma_destroy_id(ep->id);
	ep->id = NULL;
	cq->neps--;
	verbs_ep_free(ep);
	pthread_mutex_unlock(&cq->lock);
	return 0;
}
