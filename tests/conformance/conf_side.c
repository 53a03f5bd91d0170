// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * conf_side.c - one side of a connection as the conformance cases drive it:
 * CQ polling with a queue of completions not yet asked for, listen / accept /
 * connect through the SPI, and small lock-step control messages.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"

int side_init(struct side *s, struct sdp_module *m, const char *who)
{
	int rc;

	s->who = who;
	s->m = m;
	s->early_ctl = true;
	rc = m->ops.cq_create(m->prov, 1024, &s->cq);
	if (rc < 0)
		return FAIL("%s: cq_create(depth 1024): %s", who, conf_err(rc));
	return 0;
}

void side_fini(struct side *s)
{
	if (s->cq)
		s->m->ops.cq_destroy(s->cq);
	s->cq = NULL;
}

static bool matches(const struct match *mt, const struct sdp_completion *c)
{
	if ((c->context & mt->mask) != mt->value)
		return false;
	if (mt->op && c->op != mt->op)
		return false;
	if (mt->ep && c->ep != mt->ep)
		return false;
	return true;
}

static int take_queued(struct side *s, const struct match *mt,
		       struct sdp_completion *c)
{
	int i;

	for (i = 0; i < s->qn; i++) {
		if (!matches(mt, &s->q[i]))
			continue;
		*c = s->q[i];
		memmove(&s->q[i], &s->q[i + 1],
			(size_t)(s->qn - i - 1) * sizeof(s->q[0]));
		s->qn--;
		return 1;
	}
	return 0;
}

/* Moves whatever the CQ holds into the side's queue: > 0 if anything. */
static int drain(struct side *s)
{
	struct sdp_completion c[32];
	int n, i;

	n = s->m->ops.cq_poll(s->cq, c, 32);
	if (n < 0)
		return FAIL("%s: cq_poll: %s", s->who, conf_err(n));
	if (n > 32)
		return FAIL("%s: cq_poll returned %d completions for room 32",
			    s->who, n);
	for (i = 0; i < n; i++) {
		if (s->qn == CONF_QCAP)
			return FAIL("%s: more than %d unclaimed completions "
				    "(context %#llx op %u)", s->who, CONF_QCAP,
				    (unsigned long long)c[i].context, c[i].op);
		s->q[s->qn++] = c[i];
	}
	return n;
}

int side_wait(struct side *s, const struct match *mt, struct sdp_completion *c,
	      int ms)
{
	uint64_t end = conf_now_us() + (uint64_t)ms * 1000;
	unsigned int idle = 0;
	int n;

	for (;;) {
		if (take_queued(s, mt, c))
			return 0;
		if (conf_aborted())
			return -1;
		n = drain(s);
		if (n < 0)
			return -1;
		if (s->buddy && drain(s->buddy) < 0)
			return -1;
		if (n > 0)
			continue;
		if (conf_now_us() > end)
			return FAIL("%s: no completion (context %#llx/%#llx, "
				    "op %u) within %d ms", s->who,
				    (unsigned long long)mt->value,
				    (unsigned long long)mt->mask, mt->op, ms);
		if (++idle < 2000)
			sched_yield();
		else
			usleep(50);
	}
}

int side_count(struct side *s, const struct match *mt, int ms)
{
	uint64_t end = conf_now_us() + (uint64_t)ms * 1000;
	struct sdp_completion c;
	int count = 0;

	do {
		if (drain(s) < 0)
			return -1;
		if (s->buddy && drain(s->buddy) < 0)
			return -1;
		while (take_queued(s, mt, &c))
			count++;
		usleep(500);
	} while (conf_now_us() < end);
	return count;
}

int side_finish(struct side *s, int rc, uint32_t op, uint64_t ctx, int ms)
{
	struct match mt = { .mask = ~0ull, .value = ctx, .op = op };
	struct sdp_completion c;

	if (rc <= 0)
		return rc;
	if (rc != SDP_PENDING)
		return FAIL("%s: operation returned %d: neither 0, "
			    "SDP_PENDING nor a negative error", s->who, rc);
	if (side_wait(s, &mt, &c, ms) < 0)
		return -ETIMEDOUT;
	return c.status;
}

/* ---- connection set-up --------------------------------------------------- */

int side_listen(struct side *s, uint16_t port, struct sdp_listener **l)
{
	struct sockaddr_in sin;
	int rc;

	conf_addr(&sin, port);
	rc = s->m->ops.listen(s->m->prov, (struct sockaddr *)&sin, sizeof(sin),
			      1024, l);
	if (rc < 0)
		return FAIL("%s: listen(127.0.0.1:%u): %s", s->who, port,
			    conf_err(rc));
	return 0;
}

int side_accept(struct side *s, struct sdp_listener *l, const void *priv,
		size_t privlen, void *req_priv, size_t *req_privlen, int ms)
{
	uint64_t end = conf_now_us() + (uint64_t)ms * 1000;
	uint8_t scratch[SDP_MAX_PRIVATE_DATA];
	struct sdp_conn_req *req;
	struct pollfd pfd;
	size_t plen;
	int rc, pending;

	pfd.fd = s->m->ops.listener_fd(l);
	pfd.events = POLLIN;
	if (pfd.fd < 0)
		return FAIL("%s: listener_fd: %s", s->who, conf_err(pfd.fd));
	for (;;) {
		plen = req_priv ? *req_privlen : sizeof(scratch);
		rc = s->m->ops.get_request(l, &req, req_priv ? req_priv :
					   scratch, &plen);
		if (rc == 0)
			break;
		if (rc != -EAGAIN)
			return FAIL("%s: get_request: %s", s->who,
				    conf_err(rc));
		if (conf_aborted())
			return -1;
		if (conf_now_us() > end)
			return FAIL("%s: no connection request within %d ms",
				    s->who, ms);
		/* one thread: keep the connector moving */
		if (s->buddy) {
			if (drain(s->buddy) < 0)
				return -1;
			poll(&pfd, 1, 1);
		} else {
			poll(&pfd, 1, 10);
		}
	}
	if (req_privlen)
		*req_privlen = plen;
	rc = s->m->ops.accept(req, s->cq, priv, privlen, s, &s->ep);
	if (rc < 0)
		return FAIL("%s: accept: %s", s->who, conf_err(rc));
	pending = rc == SDP_PENDING;
	if (s->early_ctl)
		TRY(side_ctl_init(s));
	return side_connect_finish(s, pending, ms);
}

int side_connect_start(struct side *s, uint16_t port, const void *priv,
		       size_t privlen, int *pending)
{
	struct sockaddr_in sin;
	int rc;

	conf_addr(&sin, port);
	rc = s->m->ops.connect(s->m->prov, s->cq, (struct sockaddr *)&sin,
			       sizeof(sin), priv, privlen, s, &s->ep);
	if (rc < 0)
		return rc;
	if (rc != 0 && rc != SDP_PENDING)
		return FAIL("%s: connect returned %d", s->who, rc);
	*pending = rc == SDP_PENDING;
	return s->early_ctl ? side_ctl_init(s) : 0;
}

int side_connect_finish(struct side *s, int pending, int ms)
{
	struct match mt = { .op = SDP_OP_CONNECT, .ep = s->ep };
	struct sdp_completion c;

	if (!pending)
		return 0;
	if (side_wait(s, &mt, &c, ms) < 0)
		return -1;
	if (c.status < 0)
		return c.status;
	if (c.ep_context != s)
		return FAIL("%s: connect completion carries ep_context %p, "
			    "expected %p", s->who, c.ep_context, (void *)s);
	return 0;
}

int side_connect(struct side *s, uint16_t port, const void *priv,
		 size_t privlen, int ms)
{
	int pending, rc;

	rc = side_connect_start(s, port, priv, privlen, &pending);
	if (rc < 0)
		return conf_aborted() ? -1 :
			FAIL("%s: connect(127.0.0.1:%u): %s", s->who, port,
			     conf_err(rc));
	rc = side_connect_finish(s, pending, ms);
	if (rc < 0)
		return conf_aborted() ? -1 :
			FAIL("%s: connect completion: %s", s->who,
			     conf_err(rc));
	return 0;
}

static int post_ctl_recv(struct side *s, int slot)
{
	struct sdp_sge sge = {
		.addr = s->ctl + (size_t)slot * s->slot,
		.length = s->slot,
		.mr = s->ctl_mr,
	};
	int rc;

	rc = s->m->ops.post_recv(s->ep, &sge, 1,
				 CTX_TAG(TAG_CTL_RECV) | (uint64_t)slot);
	if (rc != SDP_PENDING && rc != 0)
		return FAIL("%s: post_recv: %s", s->who, conf_err(rc));
	return 0;
}

int side_ctl_init(struct side *s)
{
	size_t len;
	int rc, i;

	if (s->ctl) {
		/* receives went up when the connection started; what the
		 * peer sent with its accept is known only now */
		s->attr.size = sizeof(s->attr);
		rc = s->m->ops.ep_query(s->ep, &s->attr);
		return rc < 0 ? FAIL("%s: ep_query: %s", s->who,
				     conf_err(rc)) : 0;
	}
	memset(&s->attr, 0, sizeof(s->attr));
	s->attr.size = sizeof(s->attr);
	rc = s->m->ops.ep_query(s->ep, &s->attr);
	if (rc < 0)
		return FAIL("%s: ep_query: %s", s->who, conf_err(rc));
	if (s->attr.max_msg_size < CONF_CTL_SIZE || s->attr.max_recv <
	    CONF_CTL_SLOTS || s->attr.max_send < 1 || s->attr.max_sge < 1)
		return FAIL("%s: ep_query: limits too small to test (msg %u, "
			    "recv %u, send %u, sge %u; need %d, %d, 1, 1)",
			    s->who, s->attr.max_msg_size, s->attr.max_recv,
			    s->attr.max_send, s->attr.max_sge, CONF_CTL_SIZE,
			    CONF_CTL_SLOTS);
	s->slot = s->attr.max_msg_size < CONF_SLOT_MAX ?
		  s->attr.max_msg_size : CONF_SLOT_MAX;
	len = (size_t)(CONF_CTL_SLOTS + 1) * s->slot;
	s->ctl_len = (len + 4095) & ~(size_t)4095;
	s->ctl = aligned_alloc(4096, s->ctl_len);
	if (!s->ctl)
		return FAIL("out of memory");
	memset(s->ctl, 0, len);
	rc = s->m->ext.register_memory(s->m->prov, s->ctl, len,
				       SDP_ACCESS_LOCAL_WRITE, &s->ctl_mr);
	if (rc < 0) {
		free(s->ctl);
		s->ctl = NULL;
		return FAIL("%s: RegisterMemory(%zu bytes): %s", s->who, len,
			    conf_err(rc));
	}
	for (i = 0; i < CONF_CTL_SLOTS; i++)
		TRY(post_ctl_recv(s, i));
	return 0;
}

void side_close(struct side *s)
{
	if (s->ep)
		s->m->ops.ep_close(s->ep);
	s->ep = NULL;
	if (s->ctl_mr)
		s->m->ext.deregister_memory(s->m->prov, s->ctl_mr);
	s->ctl_mr = NULL;
	conf_reg_free(s->m, s->ctl, s->ctl_len);
	s->ctl = NULL;
}

uint8_t *side_send_buf(struct side *s)
{
	return s->ctl + (size_t)CONF_CTL_SLOTS * s->slot;
}

int side_send(struct side *s, const void *buf, size_t len)
{
	uint8_t *slot = side_send_buf(s);
	struct sdp_sge sge = { .addr = slot, .length = len, .mr = s->ctl_mr };
	uint64_t ctx = CTX_TAG(TAG_CTL_SEND) | len;
	int rc;

	if (len > s->slot)
		return FAIL("%s: message of %zu bytes longer than the %zu-byte"
			    " slot", s->who, len, s->slot);
	if (buf != slot)
		memcpy(slot, buf, len);
	rc = s->m->ops.post_send(s->ep, &sge, 1, ctx, 0);
	rc = side_finish(s, rc, SDP_OP_SEND, ctx, 10000);
	if (rc < 0)
		return conf_aborted() ? -1 :
			FAIL("%s: post_send(%zu bytes): %s", s->who, len,
			     conf_err(rc));
	return 0;
}

int side_recv_ptr(struct side *s, uint8_t **buf, uint64_t *len, int *slot,
		  int ms)
{
	struct match mt = { .mask = CTX_MASK, .value = CTX_TAG(TAG_CTL_RECV),
			    .op = SDP_OP_RECV };
	struct sdp_completion c;

	if (side_wait(s, &mt, &c, ms) < 0)
		return -1;
	if (c.status < 0)
		return FAIL("%s: receive completed with %s", s->who,
			    conf_err(c.status));
	if (c.ep != s->ep || c.ep_context != s)
		return FAIL("%s: receive completion names ep %p context %p, "
			    "expected %p %p", s->who, (void *)c.ep,
			    c.ep_context, (void *)s->ep, (void *)s);
	*slot = (int)(c.context & 0xffff);
	if (*slot >= CONF_CTL_SLOTS || c.bytes > s->slot)
		return FAIL("%s: receive completion with context %#llx and "
			    "%llu bytes: not what was posted", s->who,
			    (unsigned long long)c.context,
			    (unsigned long long)c.bytes);
	*buf = s->ctl + (size_t)*slot * s->slot;
	*len = c.bytes;
	return 0;
}

int side_repost(struct side *s, int slot)
{
	struct sdp_sge sge = { s->ctl + (size_t)slot * s->slot, s->slot,
			       s->ctl_mr };
	int rc;

	rc = s->m->ops.post_recv(s->ep, &sge, 1,
				 CTX_TAG(TAG_CTL_RECV) | (uint64_t)slot);
	/* The peer may close as soon as its last message is out: a failed
	 * repost then is not an error; the next receive would report it. */
	if (rc != SDP_PENDING && rc != 0 && rc != -ECONNRESET)
		return FAIL("%s: post_recv: %s", s->who, conf_err(rc));
	return 0;
}

int side_recv_or_end(struct side *s, void *buf, size_t max, size_t *len,
		     int ms)
{
	struct match mt = { .mask = CTX_MASK, .value = CTX_TAG(TAG_CTL_RECV),
			    .op = SDP_OP_RECV };
	struct sdp_completion c;
	size_t i;

	/* Look at the oldest receive completion without consuming it: a
	 * message goes through side_recv, an error status ends here. */
	for (;;) {
		for (i = 0; i < (size_t)s->qn; i++) {
			c = s->q[i];
			if (matches(&mt, &c))
				break;
		}
		if (i < (size_t)s->qn)
			break;
		if (side_wait(s, &mt, &c, ms) < 0)
			return -1;
		/* put it back at the front for side_recv to take (no
		 * other receive completion is queued: it is the oldest) */
		if (s->qn == CONF_QCAP)
			return FAIL("%s: completion queue of the suite full",
				    s->who);
		memmove(&s->q[1], &s->q[0], sizeof(s->q[0]) * (size_t)s->qn);
		s->q[0] = c;
		s->qn++;
	}
	if (c.status == -ECONNRESET || c.status == -ECANCELED)
		return 1;
	return side_recv(s, buf, max, len, ms) < 0 ? -1 : 0;
}

int side_recv(struct side *s, void *buf, size_t max, size_t *len, int ms)
{
	uint64_t got;
	uint8_t *p;
	int slot;

	TRY(side_recv_ptr(s, &p, &got, &slot, ms));
	if (got > max)
		return FAIL("%s: message of %llu bytes, expected at most %zu",
			    s->who, (unsigned long long)got, max);
	memcpy(buf, p, got);
	if (len)
		*len = got;
	else if (got != max)
		return FAIL("%s: message of %llu bytes, expected %zu", s->who,
			    (unsigned long long)got, max);
	return side_repost(s, slot);
}

int side_rdma(struct side *s, int write, const struct sdp_sge *sgl, int n,
	      const struct sdp_rdma_desc *d, uint64_t off, int ms)
{
	static atomic_uint seq;
	uint64_t ctx = CTX_TAG(TAG_RDMA) | atomic_fetch_add(&seq, 1);
	int rc;

	if (write)
		rc = s->m->ext.rdma_write(s->ep, sgl, n, d, off, ctx,
					  s->rdma_flags);
	else
		rc = s->m->ext.rdma_read(s->ep, sgl, n, d, off, ctx,
					 s->rdma_flags);
	return side_finish(s, rc, write ? SDP_OP_RDMA_WRITE : SDP_OP_RDMA_READ,
			   ctx, ms);
}

int conf_local_pair(struct sdp_module *m, struct side *srv, struct side *cli,
		    struct sdp_listener **l, const void *cpriv, size_t cplen,
		    const void *spriv, size_t splen)
{
	uint16_t port = conf_port();
	int pending, rc;

	TRY(side_init(srv, m, "server"));
	TRY(side_init(cli, m, "client"));
	/* the cases on one local pair post receives of their own */
	srv->early_ctl = false;
	cli->early_ctl = false;
	srv->buddy = cli;
	cli->buddy = srv;
	TRY(side_listen(srv, port, l));
	rc = side_connect_start(cli, port, cpriv, cplen, &pending);
	if (rc < 0)
		return FAIL("connect to own listener 127.0.0.1:%u: %s", port,
			    conf_err(rc));
	TRY(side_accept(srv, *l, spriv, splen, NULL, NULL, 10000));
	rc = side_connect_finish(cli, pending, 10000);
	if (rc < 0)
		return conf_aborted() ? -1 :
			FAIL("connect completion: %s", conf_err(rc));
	return 0;
}

void conf_local_unpair(struct side *srv, struct side *cli,
		       struct sdp_listener *l)
{
	side_close(cli);
	side_close(srv);
	if (l)
		srv->m->ops.listener_close(l);
	side_fini(cli);
	side_fini(srv);
}
