// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * test_shm.c - quick self-test of the shm provider module, loaded with
 * dlopen + sdp_provider_startup: connect/accept in one process and across
 * fork (inherited listener), message order and bytes, RDMA read/write from
 * 1 B to 64 MiB unaligned, bad descriptors, peer death, staging mode,
 * interrupt mode, fault injection, connections bound to their TCP
 * connection and 1,000 connections.
 * Usage: test_shm path/to/libsdp-shm.so
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sdp_provider.h"
#include "../lib/free_port.h"

static sdp_provider_startup_fn startup;
static int failures;
static const char *who = "parent";

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "[%s] FAIL %s:%d: %s: ", who, __FILE__, \
			__LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		failures++; \
		if (getpid() != parent_pid) \
			_exit(1); \
		return -1; \
	} } while (0)

static pid_t parent_pid;

struct ctx {
	struct sdp_provider *p;
	const struct sdp_provider_ops *o;
	struct sdp_provider_info info;
	sdp_register_memory_fn reg;
	sdp_deregister_memory_fn dereg;
	sdp_register_rdma_memory_fn rreg;
	sdp_deregister_rdma_memory_fn rdereg;
	sdp_rdma_write_fn write;
	sdp_rdma_read_fn read;
	sdp_mr_cache_callback_fn cache;
};

static void test_log(int level, const char *fmt, ...)
{
	va_list ap;

	if (!getenv("SHM_TEST_VERBOSE") && level > 4)
		return;
	fprintf(stderr, "[%s %d] ", who, level);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int get_ext(struct ctx *c, struct sdp_guid g, void *fn)
{
	return c->o->ioctl(c->p, SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER, &g,
			   sizeof(g), fn, sizeof(void (*)(void)));
}

static int open_prov(struct ctx *c, const char *options)
{
	struct sdp_startup_args a = { .size = sizeof(a),
				      .version_min = SDP_SPI_VERSION,
				      .version_max = SDP_SPI_VERSION,
				      .options = options, .log = test_log };
	int ret;

	memset(c, 0, sizeof(*c));
	c->info.size = sizeof(c->info);
	ret = startup(&a, &c->info, &c->p);
	CHECK(ret == 0, "startup(%s) = %d", options ? options : "", ret);
	c->o = c->p->ops;
	CHECK(!get_ext(c, (struct sdp_guid)SDP_GUID_REGISTER_MEMORY, &c->reg),
	      "RegisterMemory");
	CHECK(!get_ext(c, (struct sdp_guid)SDP_GUID_DEREGISTER_MEMORY,
		       &c->dereg), "DeregisterMemory");
	CHECK(!get_ext(c, (struct sdp_guid)SDP_GUID_REGISTER_RDMA_MEMORY,
		       &c->rreg), "RegisterRdmaMemory");
	CHECK(!get_ext(c, (struct sdp_guid)SDP_GUID_DEREGISTER_RDMA_MEMORY,
		       &c->rdereg), "DeregisterRdmaMemory");
	CHECK(!get_ext(c, (struct sdp_guid)SDP_GUID_RDMA_WRITE, &c->write),
	      "RdmaWrite");
	CHECK(!get_ext(c, (struct sdp_guid)SDP_GUID_MR_CACHE_CALLBACK,
		       &c->cache), "cache callback");
	ret = get_ext(c, (struct sdp_guid)SDP_GUID_RDMA_READ, &c->read);
	CHECK(ret == 0 ? !!(c->info.caps & SDP_CAP_RDMA_READ) :
	      ret == -EOPNOTSUPP && !(c->info.caps & SDP_CAP_RDMA_READ),
	      "RdmaRead ioctl %d disagrees with caps %llx", ret,
	      (unsigned long long)c->info.caps);
	if (ret)
		c->read = NULL;
	return 0;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Polls until a completion for op arrives (10 s at most). */
static int wait_op(struct ctx *c, struct sdp_cq *cq, uint32_t op,
		   struct sdp_completion *out)
{
	double end = now() + 10;

	while (now() < end) {
		int n = c->o->cq_poll(cq, out, 1);

		if (n < 0)
			return n;
		if (n == 1) {
			if (out->op == op)
				return 0;
			fprintf(stderr, "[%s] unexpected completion op %u status %d\n",
				who, out->op, out->status);
			return -EPROTO;
		}
	}
	return -ETIMEDOUT;
}

static struct sockaddr_in addr4(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static int take_request(struct ctx *c, struct sdp_listener *l,
			struct sdp_conn_req **req, void *priv, size_t *plen)
{
	double end = now() + 10;
	int ret;

	do {
		ret = c->o->get_request(l, req, priv, plen);
	} while (ret == -EAGAIN && now() < end);
	return ret;
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	while (n--)
		h = (h ^ *p++) * 1099511628211ull;
	return h;
}

static uint8_t pat(uint64_t i, unsigned seed)
{
	return (uint8_t)(i * 131 + seed + (i >> 13));
}

/* ---- one process --------------------------------------------------------- */

struct pair {
	struct sdp_cq *ccq, *scq;
	struct sdp_ep *cep, *sep;
	struct sdp_listener *l;
};

/* A connect in one process completes through the CQ and both sides see
 * the other's private data. */
static int local_pair(struct ctx *c, struct pair *pr, int port)
{
	struct sockaddr_in a = addr4("127.0.0.1", port);
	struct sockaddr_in any = addr4("0.0.0.0", port);
	struct sdp_conn_req *req;
	struct sdp_completion comp;
	struct sdp_ep_attr attr = { .size = sizeof(attr) };
	char priv[64];
	size_t plen = sizeof(priv);
	int ret;

	CHECK(!c->o->cq_create(c->p, 256, &pr->ccq), "cq_create");
	CHECK(!c->o->cq_create(c->p, 256, &pr->scq), "cq_create");
	CHECK(c->o->probe(c->p, (void *)&a, sizeof(a)) == -ECONNREFUSED,
	      "probe without listener");
	ret = c->o->listen(c->p, (void *)&any, sizeof(any), 16, &pr->l);
	CHECK(!ret, "listen %d", ret);
	ret = c->o->probe(c->p, (void *)&a, sizeof(a));
	CHECK(ret == 0, "probe with wildcard listener %d", ret);
	ret = c->o->connect(c->p, pr->ccq, (void *)&a, sizeof(a), "hello-c", 7,
			    (void *)0x1234, &pr->cep);
	CHECK(ret == SDP_PENDING || ret == 0, "connect %d", ret);
	ret = take_request(c, pr->l, &req, priv, &plen);
	CHECK(!ret && plen == 7 && !memcmp(priv, "hello-c", 7),
	      "get_request %d plen %zu (the probe must be skipped)", ret, plen);
	ret = c->o->accept(req, pr->scq, "srv-data", 8, (void *)0x5678,
			   &pr->sep);
	CHECK(ret == 0 || ret == SDP_PENDING, "accept %d", ret);
	if (ret == SDP_PENDING)
		CHECK(!wait_op(c, pr->scq, SDP_OP_CONNECT, &comp),
		      "accept completion");
	CHECK(!wait_op(c, pr->ccq, SDP_OP_CONNECT, &comp) && !comp.status &&
	      comp.ep == pr->cep && comp.ep_context == (void *)0x1234,
	      "connect completion status %d", comp.status);
	CHECK(!c->o->ep_query(pr->cep, &attr) && attr.peer_priv_len == 8 &&
	      !memcmp(attr.peer_priv, "srv-data", 8), "client peer_priv");
	CHECK(attr.max_msg_size >= 65536, "max_msg_size %u",
	      attr.max_msg_size);
	CHECK(!c->o->ep_query(pr->sep, &attr) && attr.peer_priv_len == 7 &&
	      !memcmp(attr.peer_priv, "hello-c", 7), "server peer_priv");
	return 0;
}

static void close_pair(struct ctx *c, struct pair *pr)
{
	c->o->ep_close(pr->cep);
	c->o->ep_close(pr->sep);
	c->o->listener_close(pr->l);
	c->o->cq_destroy(pr->ccq);
	c->o->cq_destroy(pr->scq);
}

/* Messages of 0..65536 bytes arrive whole, in order, byte for byte, also
 * when the sender runs ahead of the ring (sends go PENDING). */
static int test_messages(struct ctx *c, struct pair *pr)
{
	enum { N = 90, RB = 65536 };	/* ring 32 + queue 64, less some */
	uint8_t *sbuf = malloc((size_t)N * 1024 + RB), *rbuf = malloc(RB * 8);
	struct sdp_mr *smr, *rmr;
	struct sdp_completion comp;
	int i, sent = 0, got = 0, posted = 0, pend = 0, ret;

	CHECK(!c->reg(c->p, sbuf, (size_t)N * 1024 + RB, 0, &smr), "reg");
	CHECK(!c->reg(c->p, rbuf, RB * 8, SDP_ACCESS_LOCAL_WRITE, &rmr),
	      "reg");
	for (i = 0; i < N * 1024 + RB; i++)
		sbuf[i] = pat(i, 3);
	for (posted = 0; posted < 8; posted++) {
		struct sdp_sge s = { rbuf + posted * RB, RB, rmr };

		CHECK(c->o->post_recv(pr->sep, &s, 1, posted) == SDP_PENDING,
		      "post_recv");
	}
	/* send all before receiving any: the ring fills and sends queue */
	for (sent = 0; sent < N; sent++) {
		size_t len = sent == 1 ? RB : (size_t)(sent * 37) % 3000;
		struct sdp_sge s = { sbuf + sent, len, smr };

		ret = c->o->post_send(pr->cep, &s, 1, sent, 0);
		CHECK(ret == 0 || ret == SDP_PENDING, "post_send %d: %d", sent,
		      ret);
		pend += ret == SDP_PENDING;
	}
	CHECK(pend > 0, "no send went PENDING with %d messages", N);
	{
		struct sdp_sge big = { sbuf, RB + 1, smr };

		CHECK(c->o->post_send(pr->cep, &big, 1, 0, 0) == -EMSGSIZE,
		      "oversized send");
	}
	double end = now() + 20;
	while ((got < N || pend) && now() < end) {
		if (c->o->cq_poll(pr->ccq, &comp, 1) == 1) {
			CHECK(comp.op == SDP_OP_SEND && !comp.status,
			      "send completion %u %d", comp.op, comp.status);
			pend--;
		}
		if (c->o->cq_poll(pr->scq, &comp, 1) != 1)
			continue;
		CHECK(comp.op == SDP_OP_RECV && !comp.status &&
		      comp.context == (uint64_t)(got % 8),
		      "recv completion op %u status %d ctx %llu", comp.op,
		      comp.status, (unsigned long long)comp.context);
		size_t len = got == 1 ? RB : (size_t)(got * 37) % 3000;
		CHECK(comp.bytes == len, "message %d: %llu bytes, sent %zu",
		      got, (unsigned long long)comp.bytes, len);
		CHECK(!memcmp(rbuf + (got % 8) * RB, sbuf + got, len),
		      "message %d bytes differ", got);
		struct sdp_sge s = { rbuf + (got % 8) * RB, RB, rmr };
		if (got + 8 < N)
			CHECK(c->o->post_recv(pr->sep, &s, 1, got % 8) ==
			      SDP_PENDING, "repost");
		got++;
	}
	CHECK(got == N && !pend, "received %d/%d, %d sends pending", got, N,
	      pend);
	c->dereg(c->p, smr);
	c->dereg(c->p, rmr);
	free(sbuf);
	free(rbuf);
	return 0;
}

/* RDMA within one process: bytes land, bad descriptors move nothing. */
static int test_rdma_local(struct ctx *c, struct pair *pr)
{
	size_t n = 1 << 20;
	uint8_t *tgt = calloc(1, n), *src = malloc(n + 3);
	struct sdp_mr *smr;
	struct sdp_rmr *rmr;
	struct sdp_rdma_desc d, bad;
	struct sdp_completion comp;
	size_t i;
	int ret;

	for (i = 0; i < n + 3; i++)
		src[i] = pat(i, 9);
	CHECK(!c->reg(c->p, src, n + 3, SDP_ACCESS_LOCAL_WRITE, &smr), "reg");
	CHECK(!c->rreg(pr->sep, tgt, n, SDP_ACCESS_REMOTE_WRITE |
		       SDP_ACCESS_REMOTE_READ, &d, &rmr), "rreg");
	struct sdp_sge s = { src + 3, n - 5, smr };
	ret = c->write(pr->cep, &s, 1, &d, 5, 77, 0);
	if (ret == SDP_PENDING) {
		ret = -1;
		for (i = 0; i < 1000000 && ret; i++) {
			c->o->cq_poll(pr->scq, &comp, 0);
			if (c->o->cq_poll(pr->ccq, &comp, 1) == 1)
				ret = comp.status;
		}
	}
	CHECK(ret == 0, "rdma write %d", ret);
	CHECK(!memcmp(tgt + 5, src + 3, n - 5) && !tgt[0] && !tgt[4],
	      "rdma write bytes");
	if (c->read) {
		memset(src, 0, n);
		struct sdp_sge r = { src + 1, 1000, smr };
		CHECK(!c->read(pr->cep, &r, 1, &d, 5, 1, 0), "rdma read");
		CHECK(!memcmp(src + 1, tgt + 5, 1000), "rdma read bytes");
	}
	memset(tgt, 0, n);
	bad = d;
	bad.tag++;
	CHECK(c->write(pr->cep, &s, 1, &bad, 0, 1, 0) == -SDP_EBADKEY,
	      "stale tag");
	bad = d;
	bad.key = 100000;
	CHECK(c->write(pr->cep, &s, 1, &bad, 0, 1, 0) == -SDP_EBADKEY,
	      "bad key");
	CHECK(c->write(pr->cep, &s, 1, &d, 6, 1, 0) == -SDP_EBOUNDS,
	      "one byte past the end");
	CHECK(c->write(pr->cep, &s, 1, &d, UINT64_MAX - 2, 1, 0) ==
	      -SDP_EBOUNDS, "offset overflow");
	CHECK(!c->rdereg(pr->sep, rmr), "rdereg");
	CHECK(c->write(pr->cep, &s, 1, &d, 0, 1, 0) == -SDP_EBADKEY,
	      "write after deregistration");
	CHECK(!c->rreg(pr->sep, tgt, n, SDP_ACCESS_REMOTE_READ, &d, &rmr),
	      "rreg ro");
	CHECK(c->write(pr->cep, &s, 1, &d, 0, 1, 0) == -SDP_ERIGHTS,
	      "write into read-only region");
	for (i = 0; i < n && !tgt[i]; i++)
		;
	CHECK(i == n, "a rejected write moved byte %zu", i);
	CHECK(!c->rdereg(pr->sep, rmr), "rdereg");
	c->dereg(c->p, smr);
	free(tgt);
	free(src);
	return 0;
}

/* Interrupt mode: the notify fd stays quiet while armed and idle, wakes
 * at the peer's send, and cq_ack quiets it. */
static int test_notify(struct ctx *c, struct pair *pr)
{
	struct pollfd pfd = { c->o->cq_notify_fd(pr->scq), POLLIN, 0 };
	struct sdp_completion comp;
	uint8_t b[16] = "ring", r[16];
	struct sdp_mr *mr, *mr2;

	CHECK(!c->reg(c->p, b, sizeof(b), 0, &mr), "reg");
	CHECK(!c->reg(c->p, r, sizeof(r), SDP_ACCESS_LOCAL_WRITE, &mr2),
	      "reg");
	struct sdp_sge rs = { r, sizeof(r), mr2 }, ss = { b, 4, mr };
	CHECK(c->o->post_recv(pr->sep, &rs, 1, 5) == SDP_PENDING, "recv");
	CHECK(!c->o->cq_arm(pr->scq), "arm");
	CHECK(c->o->cq_poll(pr->scq, &comp, 1) == 0, "spurious completion");
	c->o->cq_ack(pr->scq);
	CHECK(!c->o->cq_arm(pr->scq), "arm");
	CHECK(poll(&pfd, 1, 50) == 0, "notify fd readable while idle");
	CHECK(c->o->post_send(pr->cep, &ss, 1, 0, 0) == 0, "send");
	CHECK(poll(&pfd, 1, 2000) == 1, "notify fd not readable after send");
	CHECK(!c->o->cq_ack(pr->scq), "ack");
	CHECK(!wait_op(c, pr->scq, SDP_OP_RECV, &comp) && comp.bytes == 4 &&
	      !memcmp(r, "ring", 4), "recv after wake");
	CHECK(poll(&pfd, 1, 0) == 0, "notify fd readable after ack");
	c->dereg(c->p, mr);
	c->dereg(c->p, mr2);
	return 0;
}

/* reject shows as -ECONNREFUSED; a closed peer as -ECONNRESET. */
static int test_reject_close(struct ctx *c, int port)
{
	struct sockaddr_in a = addr4("127.0.0.1", port);
	struct sdp_listener *l;
	struct sdp_conn_req *req;
	struct sdp_cq *cq;
	struct sdp_ep *ep;
	struct sdp_completion comp;
	size_t plen = 0;
	struct pair pr;
	uint8_t buf[8];
	struct sdp_mr *mr;

	CHECK(!c->o->cq_create(c->p, 64, &cq), "cq");
	CHECK(!c->o->listen(c->p, (void *)&a, sizeof(a), 8, &l), "listen");
	CHECK(c->o->connect(c->p, cq, (void *)&a, sizeof(a), NULL, 0, NULL,
			    &ep) == SDP_PENDING, "connect");
	CHECK(!take_request(c, l, &req, NULL, &plen), "request");
	CHECK(!c->o->reject(req), "reject");
	CHECK(!wait_op(c, cq, SDP_OP_CONNECT, &comp) &&
	      comp.status == -ECONNREFUSED, "refused: %d", comp.status);
	c->o->ep_close(ep);
	c->o->listener_close(l);
	c->o->cq_destroy(cq);

	if (local_pair(c, &pr, port + 1))
		return -1;
	CHECK(!c->reg(c->p, buf, sizeof(buf), SDP_ACCESS_LOCAL_WRITE, &mr),
	      "reg");
	struct sdp_sge s = { buf, 8, mr };
	CHECK(c->o->post_recv(pr.cep, &s, 1, 9) == SDP_PENDING, "recv");
	c->o->ep_close(pr.sep);
	CHECK(!wait_op(c, pr.ccq, SDP_OP_RECV, &comp) &&
	      comp.status == -ECONNRESET, "recv after peer close: %d",
	      comp.status);
	CHECK(c->o->post_send(pr.cep, &s, 1, 0, 0) == -ECONNRESET,
	      "send after peer close");
	c->o->ep_close(pr.cep);
	c->o->listener_close(pr.l);
	c->o->cq_destroy(pr.ccq);
	c->o->cq_destroy(pr.scq);
	c->dereg(c->p, mr);
	return 0;
}

/* ---- across fork --------------------------------------------------- */

#define REGION (64ull << 20)

struct cmd {
	char op[8];
	uint64_t off, len, val;
	struct sdp_rdma_desc d;
};

/* The child: takes the connection from the inherited listener (pre-fork
 * server), exposes a 64 MiB region and answers commands until killed. */
static void agent(const char *options, struct sdp_listener *inherited)
{
	struct ctx c;
	struct sdp_cq *cq;
	struct sdp_conn_req *req;
	struct sdp_ep *ep;
	struct sdp_rmr *rmr = NULL;
	struct sdp_mr *mr;
	struct cmd *in = calloc(8, sizeof(*in)), out;
	uint8_t *region = malloc(REGION + 64) + 1;	/* unaligned */
	struct sdp_completion comp;
	uint64_t i;
	size_t plen = 0;
	int k, ret;

	who = "child";
	if (open_prov(&c, options))
		_exit(1);
	for (i = 0; i < REGION; i++)
		region[i] = pat(i, 1);
	if (c.o->cq_create(c.p, 64, &cq) ||
	    take_request(&c, inherited, &req, NULL, &plen) ||
	    c.o->accept(req, cq, NULL, 0, NULL, &ep) < 0)
		_exit(2);
	if (c.reg(c.p, in, 8 * sizeof(*in), SDP_ACCESS_LOCAL_WRITE, &mr))
		_exit(3);
	for (k = 0; k < 8; k++) {
		struct sdp_sge s = { &in[k], sizeof(*in), mr };

		c.o->post_recv(ep, &s, 1, k);
	}
	for (;;) {
		struct pollfd pfd = { c.o->cq_notify_fd(cq), POLLIN, 0 };

		ret = c.o->cq_poll(cq, &comp, 1);
		if (ret == 0) {
			c.o->cq_arm(cq);
			if (c.o->cq_poll(cq, &comp, 1) == 0) {
				poll(&pfd, 1, 100);
				c.o->cq_ack(cq);
				continue;
			}
		}
		if (comp.op != SDP_OP_RECV)
			continue;
		if (comp.status)
			_exit(comp.status == -ECONNRESET ? 0 : 4);
		struct cmd *m = &in[comp.context];
		memset(&out, 0, sizeof(out));
		memcpy(out.op, m->op, sizeof(out.op));
		if (!strcmp(m->op, "REG")) {
			ret = c.rreg(ep, region, REGION,
				     SDP_ACCESS_REMOTE_READ |
				     SDP_ACCESS_REMOTE_WRITE, &out.d, &rmr);
			out.val = (uint64_t)ret;
		} else if (!strcmp(m->op, "SUM")) {
			out.val = m->off + m->len <= REGION ?
				  fnv(region + m->off, m->len) : 0;
		} else if (!strcmp(m->op, "DEREG")) {
			out.val = (uint64_t)c.rdereg(ep, rmr);
		}
		struct sdp_sge rs = { m, sizeof(*m), mr };
		c.o->post_recv(ep, &rs, 1, comp.context);
		struct sdp_sge ss = { &out, sizeof(out), NULL };
		struct sdp_mr *omr;
		c.reg(c.p, &out, sizeof(out), 0, &omr);
		ss.mr = omr;
		ret = c.o->post_send(ep, &ss, 1, 0, 0);
		while (ret == SDP_PENDING && c.o->cq_poll(cq, &comp, 1) == 0)
			;
		c.dereg(c.p, omr);
	}
}

struct link {
	struct ctx *c;
	struct sdp_cq *cq;
	struct sdp_ep *ep;
	struct sdp_mr *mr;
	struct cmd req, rsp;
};

static int call(struct link *k, const char *op, uint64_t off, uint64_t len)
{
	struct sdp_completion comp;
	struct sdp_sge rs = { &k->rsp, sizeof(k->rsp), k->mr };
	struct sdp_sge ss = { &k->req, sizeof(k->req), k->mr };
	int ret;

	memset(&k->req, 0, sizeof(k->req));
	snprintf(k->req.op, sizeof(k->req.op), "%s", op);
	k->req.off = off;
	k->req.len = len;
	CHECK(k->c->o->post_recv(k->ep, &rs, 1, 0) == SDP_PENDING, "recv");
	ret = k->c->o->post_send(k->ep, &ss, 1, 0, 0);
	if (ret == SDP_PENDING)
		CHECK(!wait_op(k->c, k->cq, SDP_OP_SEND, &comp), "send");
	CHECK(ret >= 0, "send %d", ret);
	CHECK(!wait_op(k->c, k->cq, SDP_OP_RECV, &comp) && !comp.status &&
	      comp.bytes == sizeof(k->rsp) && !strcmp(k->rsp.op, op),
	      "reply to %s", op);
	return 0;
}

static int rdma_wait(struct link *k, int ret)
{
	struct sdp_completion comp;

	if (ret != SDP_PENDING)
		return ret;
	if (wait_op(k->c, k->cq, SDP_OP_RDMA_WRITE, &comp))
		return -ETIMEDOUT;
	return comp.status;
}

/* Threads of this process named name (/proc/self/task/N/comm). */
static int threads_named(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300], comm[32] = "";
		int fd;
		ssize_t r;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		r = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (r > 0 && comm[r - 1] == '\n')
			comm[r - 1] = '\0';
		if (!strcmp(comm, name))
			n++;
	}
	closedir(d);
	return n;
}

/* Could the provider make its second copier here (two CPUs or more, no
 * seccomp filter)? */
static bool may_spread(void)
{
	cpu_set_t set;
	char buf[4096], *p;
	int fd = open("/proc/self/status", O_RDONLY);
	ssize_t n;

	if (sched_getaffinity(0, sizeof(set), &set) || CPU_COUNT(&set) < 2 ||
	    fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	p = strstr(buf, "\nSeccomp:");
	return !p || strtol(p + 9, NULL, 10) == 0;
}

/* A child of a process whose copier ran: its first spread copy makes its
 * own (the parent's has no thread here) and moves the bytes exactly. */
static int spread_child(struct ctx *c, struct link *k, struct sdp_mr *bmr,
			uint8_t *b, const struct sdp_rdma_desc *d)
{
	uint64_t n = (4 << 20) + 13, j;
	struct sdp_sge s = { b, n, bmr };
	int ret;

	for (j = 0; j < n; j++)
		b[j] = pat(j, 77);
	ret = c->write(k->ep, &s, 1, d, 5, 0, SDP_RDMA_SPREAD);
	if (ret) {
		printf("  child: spread write %d\n", ret);
		return 1;
	}
	if (threads_named("sdp-copy") != (may_spread() ? 1 : 0)) {
		printf("  child: %d copier threads after a spread copy\n",
		       threads_named("sdp-copy"));
		return 1;
	}
	return 0;
}

/* Across processes: RDMA 1 B .. 64 MiB at unaligned offsets, checked by
 * the target's own checksum and by reading back; the same spread over two
 * threads (SDP_RDMA_SPREAD), also in a child of the copier's process; bad
 * descriptors; death. */
static int test_fork(const char *options, int port)
{
	static const uint64_t sizes[] = { 1, 3, 4095, 65536, 65537,
					  (1 << 20) + 7, REGION - 64 };
	struct sockaddr_in a = addr4("127.0.0.1", port);
	struct ctx c;
	struct link k = { .c = &c };
	struct sdp_listener *l;
	struct sdp_completion comp;
	struct sdp_rdma_desc d, bad;
	struct sdp_mr *bmr;
	uint8_t *buf = malloc(REGION + 16), *b = buf + 3;
	pid_t child;
	unsigned i;
	int ret, st;

	if (open_prov(&c, options))
		return -1;
	printf("  mode %s (caps %llx)\n", c.read ? "cma" : "staging",
	       (unsigned long long)c.info.caps);
	CHECK(!c.o->listen(c.p, (void *)&a, sizeof(a), 8, &l), "listen");
	child = fork();
	if (child == 0)
		agent(options, l);
	c.o->listener_close(l);		/* the child keeps it */
	CHECK(!c.o->cq_create(c.p, 64, &k.cq), "cq");
	ret = c.o->connect(c.p, k.cq, (void *)&a, sizeof(a), NULL, 0, NULL,
			   &k.ep);
	CHECK(ret >= 0, "connect %d", ret);
	if (ret == SDP_PENDING)
		CHECK(!wait_op(&c, k.cq, SDP_OP_CONNECT, &comp) &&
		      !comp.status, "connect completion %d", comp.status);
	CHECK(!c.reg(c.p, &k.req, sizeof(k.req) * 2, SDP_ACCESS_LOCAL_WRITE,
		     &k.mr), "reg");
	CHECK(!c.reg(c.p, buf, REGION + 16, SDP_ACCESS_LOCAL_WRITE, &bmr),
	      "reg");
	if (call(&k, "REG", 0, 0))
		return -1;
	d = k.rsp.d;
	CHECK(k.rsp.val == 0 && d.length == REGION, "child REG %d",
	      (int)k.rsp.val);
	for (i = 0; i < 2 * sizeof(sizes) / sizeof(sizes[0]); i++) {
		unsigned si = i % (sizeof(sizes) / sizeof(sizes[0]));
		uint64_t n = sizes[si], off = (si * 4099) % 61, j;
		/* the second round: spread over two threads, in up to four
		 * pieces (the copier takes chunks across their ends) */
		uint32_t fl = si == i ? 0 : SDP_RDMA_SPREAD;
		struct sdp_sge s[4];
		int ns = fl && n >= 4 ? 4 : 1, q;

		for (q = 0; q < ns; q++) {
			uint64_t at = q * (n / ns);

			s[q].addr = b + at;
			s[q].length = q == ns - 1 ? n - at : n / ns;
			s[q].mr = bmr;
		}
		for (j = 0; j < n; j++)
			b[j] = pat(j, 40 + i);
		ret = rdma_wait(&k, c.write(k.ep, s, ns, &d, off, i, fl));
		CHECK(ret == 0, "write %llu at %llu: %d",
		      (unsigned long long)n, (unsigned long long)off, ret);
		if (call(&k, "SUM", off, n))
			return -1;
		CHECK(k.rsp.val == fnv(b, n),
		      "target checksum after %llu-byte write",
		      (unsigned long long)n);
		if (c.read) {
			memset(b, 0, n);
			ret = c.read(k.ep, s, ns, &d, off, i, fl);
			CHECK(ret == 0, "read %d", ret);
			for (j = 0; j < n && b[j] == pat(j, 40 + i); j++)
				;
			CHECK(j == n, "read back differs at %llu",
			      (unsigned long long)j);
		}
	}
	if (c.read) {
		pid_t sc;

		CHECK(threads_named("sdp-copy") == (may_spread() ? 1 : 0),
		      "%d copier threads after spread copies (expected %d)",
		      threads_named("sdp-copy"), may_spread() ? 1 : 0);
		sc = fork();
		if (sc == 0)
			_exit(spread_child(&c, &k, bmr, b, &d));
		CHECK(sc > 0 && waitpid(sc, &st, 0) == sc && WIFEXITED(st) &&
		      WEXITSTATUS(st) == 0, "spread copy in a child failed");
		if (call(&k, "SUM", 5, (4 << 20) + 13))
			return -1;
		for (uint64_t j = 0; j < (4 << 20) + 13; j++)
			b[j] = pat(j, 77);
		CHECK(k.rsp.val == fnv(b, (4 << 20) + 13),
		      "target checksum after the child's spread write");
	}
	if (c.read) {		/* untouched bytes read as the child wrote */
		struct sdp_sge s = { b, 50, bmr };
		uint64_t j;

		CHECK(!c.read(k.ep, &s, 1, &d, REGION - 50, 0, 0), "read");
		for (j = 0; j < 50 && b[j] == pat(REGION - 50 + j, 1); j++)
			;
		CHECK(j == 50, "tail differs at %llu", (unsigned long long)j);
	}
	struct sdp_sge s = { b, 64, bmr };
	bad = d;
	bad.tag += 1;
	CHECK(c.write(k.ep, &s, 1, &bad, 0, 0, 0) == -SDP_EBADKEY, "stale tag");
	CHECK(c.write(k.ep, &s, 1, &d, REGION - 63, 0, 0) == -SDP_EBOUNDS,
	      "bounds");
	if (call(&k, "DEREG", 0, 0))
		return -1;
	CHECK(k.rsp.val == 0, "child DEREG");
	CHECK(c.write(k.ep, &s, 1, &d, 0, 0, 0) == -SDP_EBADKEY,
	      "write after the child deregistered");
	if (c.read)
		CHECK(c.read(k.ep, &s, 1, &d, 0, 0, 0) == -SDP_EBADKEY,
		      "read after the child deregistered");

	/* peer death: a pending receive fails, the notify fd wakes */
	struct sdp_sge rs = { &k.rsp, sizeof(k.rsp), k.mr };
	struct pollfd pfd = { c.o->cq_notify_fd(k.cq), POLLIN, 0 };
	CHECK(c.o->post_recv(k.ep, &rs, 1, 42) == SDP_PENDING, "recv");
	CHECK(c.o->cq_poll(k.cq, &comp, 1) == 0, "early completion");
	c.o->cq_arm(k.cq);
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	CHECK(poll(&pfd, 1, 5000) == 1, "notify fd silent after peer death");
	CHECK(!wait_op(&c, k.cq, SDP_OP_RECV, &comp) &&
	      comp.status == -ECONNRESET && comp.context == 42,
	      "pending recv after death: %d", comp.status);
	CHECK(c.o->post_send(k.ep, &s, 1, 0, 0) == -ECONNRESET,
	      "send after death");
	CHECK(c.write(k.ep, &s, 1, &d, 0, 0, 0) == -ECONNRESET,
	      "write after death");
	c.o->ep_close(k.ep);
	c.dereg(c.p, k.mr);
	c.dereg(c.p, bmr);
	c.o->cq_destroy(k.cq);
	c.o->cleanup(c.p);
	free(buf);
	return 0;
}

/* Ping-pong of 64-byte messages between two busy-polling processes: each
 * reply must carry the request's sequence number; prints the round trip. */
static int test_latency(int port)
{
	enum { ROUNDS = 20000 };
	struct sockaddr_in a = addr4("127.0.0.1", port);
	struct ctx c;
	struct sdp_listener *l;
	struct sdp_cq *cq;
	struct sdp_ep *ep;
	struct sdp_mr *mr;
	struct sdp_completion comp;
	uint64_t *m = calloc(16, sizeof(*m));
	int i, ret, st;
	pid_t child;
	double t0;

	if (open_prov(&c, NULL))
		return -1;
	CHECK(!c.o->listen(c.p, (void *)&a, sizeof(a), 4, &l), "listen");
	child = fork();
	if (child == 0) {
		struct sdp_conn_req *req;
		size_t plen = 0;

		who = "child";
		if (c.o->cq_create(c.p, 64, &cq) ||
		    take_request(&c, l, &req, NULL, &plen) ||
		    c.o->accept(req, cq, NULL, 0, NULL, &ep) ||
		    c.reg(c.p, m, 16 * sizeof(*m), SDP_ACCESS_LOCAL_WRITE, &mr))
			_exit(1);
		for (i = 0; i < ROUNDS; i++) {
			struct sdp_sge s = { m, 64, mr };

			if (c.o->post_recv(ep, &s, 1, i) != SDP_PENDING ||
			    wait_op(&c, cq, SDP_OP_RECV, &comp) ||
			    comp.status || m[0] != (uint64_t)i ||
			    c.o->post_send(ep, &s, 1, i, 0))
				_exit(2);
		}
		_exit(0);
	}
	c.o->listener_close(l);
	CHECK(!c.o->cq_create(c.p, 64, &cq), "cq");
	ret = c.o->connect(c.p, cq, (void *)&a, sizeof(a), NULL, 0, NULL, &ep);
	CHECK(ret >= 0, "connect %d", ret);
	CHECK(!wait_op(&c, cq, SDP_OP_CONNECT, &comp) && !comp.status,
	      "connected");
	CHECK(!c.reg(c.p, m, 16 * sizeof(*m), SDP_ACCESS_LOCAL_WRITE, &mr),
	      "reg");
	t0 = now();
	for (i = 0; i < ROUNDS; i++) {
		struct sdp_sge s = { m, 64, mr }, r = { m + 8, 64, mr };

		m[0] = i;
		CHECK(c.o->post_recv(ep, &r, 1, i) == SDP_PENDING, "recv");
		CHECK(c.o->post_send(ep, &s, 1, i, 0) == 0, "send");
		CHECK(!wait_op(&c, cq, SDP_OP_RECV, &comp) && !comp.status &&
		      comp.bytes == 64 && m[8] == (uint64_t)i, "reply %d", i);
	}
	printf("  round trip %.2f us (64 B, busy poll)\n",
	       (now() - t0) / ROUNDS * 1e6);
	waitpid(child, &st, 0);
	CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "child status %x", st);
	c.o->ep_close(ep);
	c.dereg(c.p, mr);
	c.o->cq_destroy(cq);
	c.o->cleanup(c.p);
	free(m);
	return 0;
}

/* 1,000 connections between two processes, one message each way. */
static int test_many(int port)
{
	enum { N = 1000 };
	struct sockaddr_in a = addr4("127.0.0.1", port);
	struct ctx c;
	struct sdp_listener *l;
	struct sdp_cq *cq;
	static struct sdp_ep *eps[N];
	struct sdp_completion comp[64];
	uint32_t *vals = calloc(N, sizeof(*vals));
	struct sdp_mr *mr;
	pid_t child;
	int i, n, got = 0, conn = 0, st;
	double end;

	if (open_prov(&c, NULL))
		return -1;
	CHECK(!c.o->listen(c.p, (void *)&a, sizeof(a), 1024, &l), "listen");
	child = fork();
	if (child == 0) {	/* echo server for N connections */
		struct sdp_conn_req *req;
		size_t plen = 0;

		who = "child";
		c.o->cq_create(c.p, 4 * N, &cq);
		c.reg(c.p, vals, N * sizeof(*vals), SDP_ACCESS_LOCAL_WRITE,
		      &mr);
		for (i = 0; i < N; i++) {
			struct sdp_sge s = { &vals[i], 4, mr };

			if (take_request(&c, l, &req, NULL, &plen) ||
			    c.o->accept(req, cq, NULL, 0, (void *)(long)i,
					&eps[i]) ||
			    c.o->post_recv(eps[i], &s, 1, i) != SDP_PENDING)
				_exit(5);
		}
		end = now() + 30;
		while (got < N && now() < end) {
			n = c.o->cq_poll(cq, comp, 64);
			for (i = 0; i < n; i++) {
				int id = (int)comp[i].context;
				struct sdp_sge s = { &vals[id], 4, mr };

				if (comp[i].op != SDP_OP_RECV ||
				    comp[i].status ||
				    vals[id] != (uint32_t)id * 7 ||
				    c.o->post_send(comp[i].ep, &s, 1, 0, 0))
					_exit(6);
				got++;
			}
		}
		sleep(2);	/* let the parent read the replies */
		_exit(got == N ? 0 : 7);
	}
	c.o->listener_close(l);
	CHECK(!c.o->cq_create(c.p, 4 * N, &cq), "cq");
	CHECK(!c.reg(c.p, vals, N * sizeof(*vals), SDP_ACCESS_LOCAL_WRITE,
		     &mr), "reg");
	for (i = 0; i < N; i++) {
		int ret = c.o->connect(c.p, cq, (void *)&a, sizeof(a), NULL, 0,
				       (void *)(long)i, &eps[i]);

		CHECK(ret >= 0, "connect %d: %d", i, ret);
		conn += ret == 0;
	}
	end = now() + 30;
	while ((conn < N || got < N) && now() < end) {
		n = c.o->cq_poll(cq, comp, 64);
		for (i = 0; i < n; i++) {
			int id = (int)(long)comp[i].ep_context;
			struct sdp_sge s = { &vals[id], 4, mr };

			if (comp[i].op == SDP_OP_CONNECT) {
				CHECK(!comp[i].status, "connect %d: %d", id,
				      comp[i].status);
				conn++;
				vals[id] = (uint32_t)id * 7;
				CHECK(c.o->post_send(eps[id], &s, 1, 0, 0) == 0,
				      "send");
				vals[id] = 0;
				CHECK(c.o->post_recv(eps[id], &s, 1, id) ==
				      SDP_PENDING, "recv");
			} else {
				CHECK(comp[i].op == SDP_OP_RECV &&
				      !comp[i].status &&
				      vals[id] == (uint32_t)id * 7,
				      "echo %d: %u", id, vals[id]);
				got++;
			}
		}
	}
	CHECK(conn == N && got == N, "%d connected, %d echoed of %d", conn,
	      got, N);
	waitpid(child, &st, 0);
	CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "child status %x", st);
	for (i = 0; i < N; i++)
		c.o->ep_close(eps[i]);
	c.dereg(c.p, mr);
	c.o->cq_destroy(cq);
	c.o->cleanup(c.p);
	free(vals);
	return 0;
}

/* Version negotiation and fault injection. */
static int test_startup(void)
{
	struct sdp_startup_args a = { .size = sizeof(a),
				      .version_min = SDP_SPI_MKVER(2, 0),
				      .version_max = SDP_SPI_MKVER(2, 3),
				      .log = test_log };
	struct sdp_provider_info info = { .size = sizeof(info) };
	struct sdp_provider *p;
	struct sockaddr_storage ss[64];
	size_t cnt = 64, i;
	struct ctx c;
	struct sdp_mr *mr;
	char x[8];
	int ret, fails = 0;
	struct sdp_guid g = { 1, 2, 3, { 4 } };
	void *fn;

	CHECK(startup(&a, &info, &p) == -SDP_EVERSION &&
	      info.low_version == SDP_SPI_MKVER(1, 0) &&
	      info.high_version == SDP_SPI_VERSION, "version 2 refused");
	a.version_min = SDP_SPI_VERSION;
	a.version_max = SDP_SPI_VERSION;
	a.options = "bogus=1";
	CHECK(startup(&a, &info, &p) == -EINVAL, "unknown option");
	if (open_prov(&c, "fail_reg_every=3"))
		return -1;
	CHECK(!strcmp(c.info.name, "shm"), "name %s", c.info.name);
	CHECK(get_ext(&c, g, &fn) == -EOPNOTSUPP, "unknown GUID");
	for (i = 0; i < 9; i++) {
		ret = c.reg(c.p, x, sizeof(x), 0, &mr);
		if (ret == -ENOMEM)
			fails++;
		else if (!ret)
			c.dereg(c.p, mr);
	}
	CHECK(fails == 3, "fail_reg_every=3 failed %d of 9", fails);
	CHECK(!c.cache(c.p, x, sizeof(x)), "cache callback");
	CHECK(!c.o->query_address_list(c.p, ss, &cnt), "address list");
	for (i = 0; i < cnt; i++) {
		struct sockaddr_in *s4 = (void *)&ss[i];

		if (s4->sin_family == AF_INET &&
		    s4->sin_addr.s_addr == htonl(INADDR_LOOPBACK))
			break;
	}
	CHECK(i < cnt, "loopback missing from %zu addresses", cnt);
	cnt = 0;
	CHECK(c.o->query_address_list(c.p, NULL, &cnt) == -ENOBUFS && cnt,
	      "address list sizing");
	c.o->cleanup(c.p);
	return 0;
}

/* fail_rdma_every=2: every second RDMA write fails with -EIO and moves
 * nothing; SDP_SHM_FAIL_REG_EVERY does the same to registrations. */
static int test_fault_rdma(int port)
{
	struct ctx c;
	struct pair pr;
	uint8_t tgt[64] = { 0 }, src[64];
	struct sdp_mr *mr;
	struct sdp_rmr *rmr;
	struct sdp_rdma_desc d;
	int i, ret, eio = 0, ok = 0, fails = 0;

	if (open_prov(&c, "fail_rdma_every=2") || local_pair(&c, &pr, port))
		return -1;
	memset(src, 0xab, sizeof(src));
	CHECK(!c.reg(c.p, src, sizeof(src), 0, &mr), "reg");
	CHECK(!c.rreg(pr.sep, tgt, sizeof(tgt), SDP_ACCESS_REMOTE_WRITE, &d,
		      &rmr), "rreg");
	for (i = 0; i < 4; i++) {
		struct sdp_sge s = { src + i, 1, mr };

		ret = c.write(pr.cep, &s, 1, &d, i, 0, 0);
		if (ret == -EIO)
			eio++;
		else if (ret == 0)
			ok++;
	}
	CHECK(eio == 2 && ok == 2, "%d -EIO, %d ok", eio, ok);
	CHECK(tgt[0] == 0xab && !tgt[1] && tgt[2] == 0xab && !tgt[3],
	      "bytes %x %x %x %x", tgt[0], tgt[1], tgt[2], tgt[3]);
	c.rdereg(pr.sep, rmr);
	c.dereg(c.p, mr);
	close_pair(&c, &pr);
	c.o->cleanup(c.p);

	setenv("SDP_SHM_FAIL_REG_EVERY", "2", 1);
	ret = open_prov(&c, NULL);
	unsetenv("SDP_SHM_FAIL_REG_EVERY");
	if (ret)
		return -1;
	for (i = 0; i < 6; i++) {
		ret = c.reg(c.p, src, sizeof(src), 0, &mr);
		if (ret == -ENOMEM)
			fails++;
		else if (!ret)
			c.dereg(c.p, mr);
	}
	CHECK(fails == 3, "SDP_SHM_FAIL_REG_EVERY=2 failed %d of 6", fails);
	c.o->cleanup(c.p);
	return 0;
}

/* Several threads send on their own endpoints while one thread polls the
 * CQ that all receiving endpoints share: every message arrives once. */
enum { TH = 4, TMSG = 2000 };
struct th_arg {
	struct ctx *c;
	struct sdp_ep *ep;
	struct sdp_cq *cq;
	int id, err;
};

static void *th_send(void *p)
{
	struct th_arg *a = p;
	uint32_t v[8];
	struct sdp_mr *mr;
	struct sdp_completion comp;
	int i, ret;

	if (a->c->reg(a->c->p, v, sizeof(v), 0, &mr)) {
		a->err = 1;
		return NULL;
	}
	for (i = 0; i < TMSG; i++) {
		struct sdp_sge s = { &v[i % 8], 4, mr };

		v[i % 8] = (uint32_t)(a->id << 24 | i);
		ret = a->c->o->post_send(a->ep, &s, 1, i, 0);
		while (ret == SDP_PENDING) {	/* wait: buffer in use */
			if (a->c->o->cq_poll(a->cq, &comp, 1) == 1)
				ret = comp.status;
		}
		if (ret) {
			a->err = 2;
			break;
		}
	}
	a->c->dereg(a->c->p, mr);
	return NULL;
}

static int test_threads(int port)
{
	struct ctx c;
	struct sdp_cq *rcq, *scq[TH];
	struct sdp_listener *l;
	struct sdp_ep *rep[TH];
	struct th_arg arg[TH];
	pthread_t t[TH];
	struct sockaddr_in a = addr4("127.0.0.1", port);
	uint32_t (*buf)[16] = calloc(TH, sizeof(*buf));
	int next[TH] = { 0 }, i, got = 0;
	struct sdp_mr *mr;
	struct sdp_completion comp[16];
	double end;

	if (open_prov(&c, NULL))
		return -1;
	CHECK(!c.o->cq_create(c.p, 256, &rcq), "cq");
	CHECK(!c.o->listen(c.p, (void *)&a, sizeof(a), 8, &l), "listen");
	CHECK(!c.reg(c.p, buf, TH * sizeof(*buf), SDP_ACCESS_LOCAL_WRITE, &mr),
	      "reg");
	for (i = 0; i < TH; i++) {
		struct sdp_conn_req *req;
		size_t plen = 0;
		int k;

		CHECK(!c.o->cq_create(c.p, 64, &scq[i]), "cq");
		CHECK(c.o->connect(c.p, scq[i], (void *)&a, sizeof(a), NULL, 0,
				   NULL, &arg[i].ep) >= 0, "connect");
		CHECK(!take_request(&c, l, &req, NULL, &plen) &&
		      !c.o->accept(req, rcq, NULL, 0, (void *)(long)i, &rep[i]),
		      "accept");
		CHECK(!wait_op(&c, scq[i], SDP_OP_CONNECT, &comp[0]), "conn");
		for (k = 0; k < 16; k++) {
			struct sdp_sge s = { &buf[i][k], 4, mr };

			c.o->post_recv(rep[i], &s, 1, k);
		}
		arg[i] = (struct th_arg){ &c, arg[i].ep, scq[i], i, 0 };
	}
	for (i = 0; i < TH; i++)
		pthread_create(&t[i], NULL, th_send, &arg[i]);
	end = now() + 30;
	while (got < TH * TMSG && now() < end) {
		int n = c.o->cq_poll(rcq, comp, 16), j;

		for (j = 0; j < n; j++) {
			int id = (int)(long)comp[j].ep_context;
			uint32_t v = buf[id][comp[j].context];
			struct sdp_sge s = { &buf[id][comp[j].context], 4, mr };

			CHECK(!comp[j].status && v == (uint32_t)(id << 24 |
							 next[id]),
			      "thread %d message %d: got %x", id, next[id], v);
			next[id]++;
			got++;
			c.o->post_recv(rep[id], &s, 1, comp[j].context);
		}
	}
	for (i = 0; i < TH; i++) {
		pthread_join(t[i], NULL);
		CHECK(!arg[i].err, "sender %d error %d", i, arg[i].err);
	}
	CHECK(got == TH * TMSG, "%d of %d messages", got, TH * TMSG);
	for (i = 0; i < TH; i++) {
		c.o->ep_close(arg[i].ep);
		c.o->ep_close(rep[i]);
		c.o->cq_destroy(scq[i]);
	}
	c.dereg(c.p, mr);
	c.o->listener_close(l);
	CHECK(!c.o->cq_destroy(rcq), "cq_destroy");
	c.o->cleanup(c.p);
	free(buf);
	return 0;
}

/* SDP_SHM_FAIL_RDMA_EVERY fails every Nth RDMA with -EIO, in one process. */
static int test_local(const char *options, int port)
{
	struct ctx c;
	struct pair pr;

	if (open_prov(&c, options))
		return -1;
	if (local_pair(&c, &pr, port) || test_messages(&c, &pr) ||
	    test_rdma_local(&c, &pr) || test_notify(&c, &pr))
		return -1;
	close_pair(&c, &pr);
	if (test_reject_close(&c, port + 10))
		return -1;
	c.o->cleanup(c.p);
	return 0;
}

static int test_ipv6(int port)
{
	struct sockaddr_in6 any = { .sin6_family = AF_INET6,
				    .sin6_port = htons(port),
				    .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_in6 lo = any;
	struct sockaddr_in v4 = addr4("127.0.0.1", port);
	struct sdp_listener *l;
	struct ctx c;

	lo.sin6_addr = in6addr_loopback;
	if (open_prov(&c, NULL))
		return -1;
	CHECK(c.o->probe(c.p, (void *)&lo, sizeof(lo)) == -ECONNREFUSED,
	      "v6 probe without listener");
	CHECK(!c.o->listen(c.p, (void *)&any, sizeof(any), 4, &l), "listen");
	CHECK(!c.o->probe(c.p, (void *)&lo, sizeof(lo)), "v6 probe");
	CHECK(!c.o->probe(c.p, (void *)&v4, sizeof(v4)),
	      "v4 probe reaches the v6 wildcard");
	c.o->listener_close(l);
	c.o->cleanup(c.p);
	return 0;
}

/* ---- connections bound to a TCP connection (SPI 1.1) ------------------ */

/* A connected TCP pair on 127.0.0.1, on a port the kernel picks as it
 * binds (a port named in advance may have become some other program's
 * meanwhile): *cl the client's end, *sv the server's accepted one. */
static int tcp_pair(int *cl, int *sv)
{
	struct sockaddr_in a = addr4("127.0.0.1", 0);
	socklen_t al = sizeof(a);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK(ls >= 0 && !bind(ls, (void *)&a, sizeof(a)) && !listen(ls, 4) &&
	      !getsockname(ls, (void *)&a, &al),
	      "TCP listener on 127.0.0.1: %s", strerror(errno));
	*cl = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(*cl >= 0 && !connect(*cl, (void *)&a, sizeof(a)), "TCP connect");
	*sv = accept(ls, NULL, NULL);
	close(ls);
	CHECK(*sv >= 0, "TCP accept");
	return 0;
}

/* The bound operations find only the listener of the other end's holder
 * at its exact name: a wildcard name there is never tried, a connect
 * without the proof is refused, and a bound pair connects and carries a
 * message. */
static int test_bound(void)
{
	struct ctx c;
	struct sdp_cq *ccq, *scq;
	struct sdp_listener *l, *wild;
	struct sdp_conn_req *req;
	struct sdp_ep *cep, *sep, *rogue;
	struct sdp_completion comp;
	struct sockaddr_in me, any;
	socklen_t ml = sizeof(me);
	char priv[64], buf[64];
	size_t plen = sizeof(priv);
	struct sdp_mr *mr;
	struct sdp_sge sge;
	int cl, sv, ret, n;
	double end;

	if (open_prov(&c, NULL) || tcp_pair(&cl, &sv))
		return -1;
	CHECK(c.info.caps & SDP_CAP_TCP_BOUND, "no SDP_CAP_TCP_BOUND");
	CHECK(!c.o->cq_create(c.p, 64, &ccq) && !c.o->cq_create(c.p, 64, &scq),
	      "cq_create");
	getsockname(cl, (void *)&me, &ml);
	/* only a wildcard name at the client's port: never used */
	any = addr4("0.0.0.0", ntohs(me.sin_port));
	CHECK(!c.o->listen(c.p, (void *)&any, sizeof(any), 4, &wild),
	      "wildcard listen");
	CHECK(c.o->probe_bound(c.p, sv) == -ECONNREFUSED,
	      "probe_bound took a wildcard name");
	ret = c.o->connect_bound(c.p, scq, sv, "k", 1, NULL, &rogue);
	CHECK(ret == -ECONNREFUSED,
	      "connect_bound fell through to a wildcard name: %d", ret);
	CHECK(c.o->get_request(wild, &req, priv, &plen) == -EAGAIN,
	      "the wildcard listener got a request");
	c.o->listener_close(wild);
	/* the client's bound listener */
	ret = c.o->listen_bound(c.p, cl, 4, &l);
	CHECK(!ret, "listen_bound %d", ret);
	CHECK(!c.o->probe_bound(c.p, sv), "probe_bound");
	/* a connect that brings no proof gets no request through */
	{
		struct sockaddr_in a = addr4("127.0.0.1", ntohs(me.sin_port));

		ret = c.o->connect(c.p, scq, (void *)&a, sizeof(a), "x", 1,
				   NULL, &rogue);
		CHECK(ret == SDP_PENDING, "plain connect %d", ret);
		end = now() + 2;
		ret = -EAGAIN;
		while (now() < end && ret == -EAGAIN) {
			plen = sizeof(priv);
			ret = c.o->get_request(l, &req, priv, &plen);
			n = c.o->cq_poll(scq, &comp, 1);
			if (n == 1)
				break;
		}
		CHECK(ret == -EAGAIN, "a HELLO without proof became a request");
		if (n != 1)
			CHECK(!wait_op(&c, scq, SDP_OP_CONNECT, &comp),
			      "plain connect answer");
		CHECK(comp.status == -ECONNREFUSED,
		      "plain connect to a bound listener: status %d",
		      comp.status);
		c.o->ep_close(rogue);
	}
	/* the real one */
	ret = c.o->connect_bound(c.p, scq, sv, "key", 3, (void *)7, &sep);
	CHECK(ret == SDP_PENDING, "connect_bound %d", ret);
	end = now() + 10;
	do {
		plen = sizeof(priv);
		ret = c.o->get_request(l, &req, priv, &plen);
		c.o->cq_poll(scq, &comp, 0);
	} while (ret == -EAGAIN && now() < end);
	CHECK(!ret && plen == 3 && !memcmp(priv, "key", 3),
	      "bound request %d", ret);
	ret = c.o->accept(req, ccq, NULL, 0, NULL, &cep);
	CHECK(ret == 0, "accept %d", ret);
	CHECK(!wait_op(&c, scq, SDP_OP_CONNECT, &comp) && !comp.status,
	      "connect_bound completion %d", comp.status);
	CHECK(!c.reg(c.p, buf, sizeof(buf), SDP_ACCESS_LOCAL_WRITE, &mr),
	      "register");
	sge = (struct sdp_sge){ buf, sizeof(buf), mr };
	CHECK(c.o->post_recv(cep, &sge, 1, 1) == SDP_PENDING, "post_recv");
	ret = c.o->post_send(sep, &(struct sdp_sge){ "bound", 5, NULL }, 1, 2,
			     SDP_SEND_INLINE);
	CHECK(ret == 0, "send %d", ret);
	CHECK(!wait_op(&c, ccq, SDP_OP_RECV, &comp) && comp.bytes == 5 &&
	      !memcmp(buf, "bound", 5), "message over the bound connection");
	c.dereg(c.p, mr);
	c.o->ep_close(cep);
	c.o->ep_close(sep);
	c.o->listener_close(l);
	c.o->cq_destroy(ccq);
	c.o->cq_destroy(scq);
	close(cl);
	close(sv);
	c.o->cleanup(c.p);
	return 0;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "build/lib/sdp/libsdp-shm.so";
	void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	int port = tl_free_port();
	struct rlimit rl;

	parent_pid = getpid();
	if (!dl) {
		fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
		return 2;
	}
	startup = (sdp_provider_startup_fn)dlsym(dl, SDP_PROVIDER_ENTRY_NAME);
	if (!startup) {
		fprintf(stderr, "%s has no %s\n", path,
			SDP_PROVIDER_ENTRY_NAME);
		return 2;
	}
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	unsetenv("SDP_SHM_NO_CMA");

#define RUN(name, expr) do { \
	int f0 = failures; \
	printf("%s\n", name); \
	fflush(stdout); \
	if ((expr) || failures != f0) { \
		failures += failures == f0; \
		printf("  FAIL\n"); \
	} else { \
		printf("  ok\n"); \
	} } while (0)

	RUN("startup, options, GUIDs, addresses", test_startup());
	RUN("one process, default mode", test_local(NULL, port));
	RUN("one process, no_cma", test_local("no_cma", port + 20));
	RUN("ipv6 and wildcards", test_ipv6(port + 40));
	RUN("bound to a TCP connection", test_bound());
	RUN("fault injection", test_fault_rdma(port + 43));
	RUN("threads sharing a CQ", test_threads(port + 45));
	RUN("fork, default mode", test_fork(NULL, port + 50));
	RUN("fork, no_cma (staging)", test_fork("no_cma", port + 60));
	setenv("SDP_SHM_NO_CMA", "1", 1);
	RUN("fork, SDP_SHM_NO_CMA=1", test_fork(NULL, port + 70));
	unsetenv("SDP_SHM_NO_CMA");
	RUN("1000 connections", test_many(port + 80));
	RUN("latency", test_latency(port + 90));
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
