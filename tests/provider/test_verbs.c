// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * test_verbs.c - smoke test of the verbs provider module, loaded with dlopen
 * as the switch would: connect/accept with private data, control messages,
 * RDMA write and read with byte checks, descriptor errors, probes, the
 * registration cache and the notification fd. SKIP (exit 0) without devices.
 *
 *   test_verbs [MODULE]   (default $SDP_PROVIDER_DIR/libsdp-verbs.so)
 *   test_verbs --serve|--connect ADDR PORT   two hosts: one end each
 *   SDP_VERBS_TEST_ADDR   IPv4 address to use (default 127.0.0.1)
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "sdp_provider.h"
#include "../lib/free_port.h"

static int failures;
static char last_log[512];

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) { \
			failures++; \
			printf("FAIL %s:%d: ", __FILE__, __LINE__); \
			printf(__VA_ARGS__); \
			printf("\n"); \
		} \
	} while (0)

__attribute__((format(printf, 2, 3)))
static void test_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_log, sizeof(last_log), fmt, ap);
	va_end(ap);
	fprintf(stderr, "[log %d] %s\n", level, last_log);
}

struct ext {
	sdp_register_memory_fn reg;
	sdp_deregister_memory_fn dereg;
	sdp_register_rdma_memory_fn reg_rdma;
	sdp_deregister_rdma_memory_fn dereg_rdma;
	sdp_rdma_write_fn write;
	sdp_rdma_read_fn read;
	sdp_mr_cache_callback_fn cache_cb;
};

static struct sdp_provider *prov;
static const struct sdp_provider_ops *ops;
static struct ext x;

static int get_ext(const struct sdp_guid g, void *fnp)
{
	return ops->ioctl(prov, SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER, &g,
			  sizeof(g), fnp, sizeof(void (*)(void)));
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Polls cq until one completion arrives (10 s bound). */
static int wait_one(struct sdp_cq *cq, struct sdp_completion *c)
{
	double end = now() + 10;
	int n;

	while (now() < end) {
		n = ops->cq_poll(cq, c, 1);
		if (n)
			return n;
		usleep(100);
	}
	return -ETIMEDOUT;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 8));
}

static struct sockaddr_in addr_of(int port)
{
	const char *a = getenv("SDP_VERBS_TEST_ADDR");
	struct sockaddr_in sin = { .sin_family = AF_INET };

	sin.sin_port = htons(port);
	inet_pton(AF_INET, a ? a : "127.0.0.1", &sin.sin_addr);
	return sin;
}

struct pair {
	struct sdp_cq *ccq, *scq;
	struct sdp_ep *cep, *sep;
	struct sdp_listener *l;
	struct sockaddr_in sin;
};

static int connect_pair(struct pair *pr)
{
	const char cpriv[] = "hello from the client";
	const char spriv[] = "welcome from the server, 40+ bytes long.";
	char got[SDP_MAX_PRIVATE_DATA];
	size_t gotlen = sizeof(got);
	struct sdp_conn_req *req = NULL;
	struct sdp_completion c;
	struct sdp_ep_attr attr = { .size = sizeof(attr) };
	double end;
	int ret;

	ret = ops->connect(prov, pr->ccq, (struct sockaddr *)&pr->sin,
			   sizeof(pr->sin), cpriv, sizeof(cpriv), (void *)1,
			   &pr->cep);
	CHECK(ret == SDP_PENDING || ret == 0, "connect: %d", ret);
	if (ret < 0)
		return ret;
	end = now() + 10;
	while ((ret = ops->get_request(pr->l, &req, got, &gotlen)) == -EAGAIN &&
	       now() < end)
		usleep(1000);
	CHECK(ret == 0, "get_request: %d", ret);
	if (ret)
		return ret;
	CHECK(gotlen == sizeof(cpriv) && !memcmp(got, cpriv, gotlen),
	      "connect private data: %zu bytes", gotlen);
	ret = ops->accept(req, pr->scq, spriv, sizeof(spriv), (void *)2,
			  &pr->sep);
	CHECK(ret == SDP_PENDING || ret == 0, "accept: %d", ret);
	/* the server waits first: polling its CQ must also drive the
	 * client's half of the handshake (same provider instance) */
	if (ret == SDP_PENDING) {
		ret = wait_one(pr->scq, &c);
		CHECK(ret == 1 && c.op == SDP_OP_CONNECT && c.status == 0 &&
		      c.ep == pr->sep && c.ep_context == (void *)2,
		      "server connect completion: n=%d status=%d", ret,
		      c.status);
	}
	ret = wait_one(pr->ccq, &c);
	CHECK(ret == 1 && c.op == SDP_OP_CONNECT && c.status == 0 &&
	      c.ep == pr->cep && c.ep_context == (void *)1,
	      "client connect completion: n=%d status=%d", ret, c.status);
	if (ret != 1 || c.status)
		return -1;
	ret = ops->ep_query(pr->cep, &attr);
	CHECK(!ret && attr.peer_priv_len == sizeof(spriv) &&
	      !memcmp(attr.peer_priv, spriv, sizeof(spriv)),
	      "accept private data at the client: len %u", attr.peer_priv_len);
	CHECK(attr.max_msg_size >= 4096 && attr.max_send && attr.max_recv,
	      "ep attributes");
	return 0;
}

/* 200 control messages of varying sizes, each checked byte by byte. */
static void test_messages(struct pair *pr, struct sdp_mr **rmrp,
			  void **rbufp)
{
	enum { N = 200, SZ = 4096, DEPTH = 32 };
	unsigned char *sbuf = malloc(SZ), *rbuf = malloc(SZ * DEPTH);
	unsigned char *want = malloc(SZ);
	struct sdp_mr *smr, *rmr;
	struct sdp_completion c;
	int i, ret, ok = 0;

	CHECK(!x.reg(prov, sbuf, SZ, 0, &smr), "register send buffer");
	CHECK(!x.reg(prov, rbuf, SZ * DEPTH, SDP_ACCESS_LOCAL_WRITE, &rmr),
	      "register receive buffers");
	for (i = 0; i < DEPTH; i++) {
		struct sdp_sge g = { rbuf + i * SZ, SZ, rmr };

		ret = ops->post_recv(pr->sep, &g, 1, i);
		CHECK(ret == SDP_PENDING, "post_recv %d: %d", i, ret);
	}
	for (i = 0; i < N; i++) {
		size_t len = 1 + (i * 997) % SZ;
		struct sdp_sge g = { sbuf, len, smr };
		int slot;

		fill(sbuf, len, i);
		ret = ops->post_send(pr->cep, &g, 1, 1000 + i, 0);
		CHECK(ret == SDP_PENDING || ret == 0, "post_send %d: %d", i,
		      ret);
		if (ret == SDP_PENDING) {
			ret = wait_one(pr->ccq, &c);
			CHECK(ret == 1 && !c.status && c.op == SDP_OP_SEND &&
			      c.context == 1000u + i && c.bytes == len,
			      "send completion %d: status %d", i, c.status);
		}
		ret = wait_one(pr->scq, &c);
		if (ret != 1 || c.status || c.op != SDP_OP_RECV) {
			CHECK(0, "recv %d: n=%d status=%d", i, ret, c.status);
			break;
		}
		slot = c.context;
		fill(want, len, i);
		if (c.bytes == len && !memcmp(rbuf + slot * SZ, want, len))
			ok++;
		else
			CHECK(0, "message %d: %llu bytes, content differs", i,
			      (unsigned long long)c.bytes);
		g = (struct sdp_sge){ rbuf + slot * SZ, SZ, rmr };
		ret = ops->post_recv(pr->sep, &g, 1, slot);
		CHECK(ret == SDP_PENDING, "repost %d", ret);
	}
	printf("messages: %d/%d arrived intact\n", ok, N);
	CHECK(!x.dereg(prov, smr), "deregister");
	/* rbuf stays registered: receives are still posted on it */
	*rmrp = rmr;
	*rbufp = rbuf;
	free(sbuf);
	free(want);
}

static uint64_t prov_caps;	/* info.caps of the provider under test */

static void test_rdma(struct pair *pr)
{
	/* over 8 MiB (rxe's max_msg_sz): the provider splits it;
	 * SDP_VERBS_TEST_MIB=N sets another size */
	const char *mib = getenv("SDP_VERBS_TEST_MIB");
	const size_t len = ((size_t)(mib ? atoi(mib) : 9) << 20) + 3, off = 5;
	unsigned char *target = malloc(len + 64), *src = malloc(len + 64);
	unsigned char *back = malloc(len + 64);
	struct sdp_rdma_desc d, dro;
	struct sdp_rmr *rmr, *rmr_ro;
	struct sdp_mr *lmr, *bmr;
	struct sdp_completion c;
	struct sdp_sge g;
	double t0;
	int ret;

	memset(target, 0xee, len + 64);
	ret = x.reg_rdma(pr->sep, target, len + 64,
			 SDP_ACCESS_REMOTE_READ | SDP_ACCESS_REMOTE_WRITE, &d,
			 &rmr);
	CHECK(!ret, "register rdma memory: %d", ret);
	CHECK(!x.reg(prov, src, len + 64, 0, &lmr), "register source");
	CHECK(!x.reg(prov, back, len + 64, SDP_ACCESS_LOCAL_WRITE, &bmr),
	      "register read-back buffer");
	fill(src + 1, len, 77);

	/* RDMA write, unaligned on both sides, two SGEs */
	{
		struct sdp_sge two[2] = {
			{ src + 1, 1000, lmr },
			{ src + 1001, len - 1000, lmr },
		};

		t0 = now();
		ret = x.write(pr->cep, two, 2, &d, off, 42, 0);
		CHECK(ret == SDP_PENDING || ret == 0, "rdma_write: %d", ret);
		if (ret == SDP_PENDING) {
			ret = wait_one(pr->ccq, &c);
			CHECK(ret == 1 && !c.status &&
			      c.op == SDP_OP_RDMA_WRITE && c.context == 42 &&
			      c.bytes == len,
			      "rdma_write completion: status %d", c.status);
		}
	}
	CHECK(!memcmp(target + off, src + 1, len) && target[off - 1] == 0xee &&
	      target[off + len] == 0xee, "rdma_write: target bytes differ");
	printf("rdma write: %zu bytes in %.3f s\n", len, now() - t0);

	if (x.read) {
		memset(back, 0, len + 64);
		g = (struct sdp_sge){ back + 3, len, bmr };
		t0 = now();
		ret = x.read(pr->cep, &g, 1, &d, off, 43, 0);
		CHECK(ret == SDP_PENDING || ret == 0, "rdma_read: %d", ret);
		if (ret == SDP_PENDING) {
			ret = wait_one(pr->ccq, &c);
			CHECK(ret == 1 && !c.status &&
			      c.op == SDP_OP_RDMA_READ && c.context == 43,
			      "rdma_read completion: status %d", c.status);
		}
		CHECK(!memcmp(back + 3, src + 1, len),
		      "rdma_read: bytes differ");
		printf("rdma read: %zu bytes in %.3f s\n", len, now() - t0);
	} else {
		printf("rdma read: not offered (EOPNOTSUPP), "
		       "write path only\n");
	}

	/* bounds and rights fail at once and change nothing */
	g = (struct sdp_sge){ src, 128, lmr };
	ret = x.write(pr->cep, &g, 1, &d, len + 64 - 100, 44, 0);
	CHECK(ret == -SDP_EBOUNDS, "out-of-bounds write: %d", ret);
	ret = x.reg_rdma(pr->sep, target, 4096, SDP_ACCESS_REMOTE_READ, &dro,
			 &rmr_ro);
	CHECK(!ret, "register read-only: %d", ret);
	ret = x.write(pr->cep, &g, 1, &dro, 0, 45, 0);
	CHECK(ret == -SDP_ERIGHTS, "write to read-only: %d", ret);
	CHECK(!memcmp(target + off, src + 1, len),
	      "target changed by a refused write");
	CHECK(ops->cq_poll(pr->ccq, &c, 1) == 0,
	      "a failed op reported a completion");
	x.dereg_rdma(pr->sep, rmr_ro);

	/* a stale key: the hardware refuses it (and the QP goes to error) */
	CHECK(!x.dereg_rdma(pr->sep, rmr), "deregister rdma memory");
	memset(target, 0x11, len + 64);
	ret = x.write(pr->cep, &g, 1, &d, 0, 46, 0);
	if (ret == SDP_PENDING) {
		ret = wait_one(pr->ccq, &c);
		/* iWARP: the write completes when sent; the target refuses
		 * it and ends the connection */
		CHECK(ret == 1 && (c.status == -SDP_EBADKEY ||
				   (!c.status && (prov_caps &
				    SDP_CAP_RDMA_WRITE_UNACKED))),
		      "stale key completion: n=%d status %d", ret, c.status);
		if (!c.status)
			usleep(300000);	/* time to land, were it taken */
	} else {
		CHECK(ret == -SDP_EBADKEY, "stale key: %d", ret);
	}
	CHECK(target[0] == 0x11 && target[127] == 0x11,
	      "stale descriptor changed memory");
	x.dereg(prov, lmr);
	x.dereg(prov, bmr);
	free(src);
	free(back);
	free(target);
}

static void test_notify(struct pair *pr, struct sdp_mr *rmr, void *rbuf)
{
	struct sdp_completion c;
	struct pollfd pfd = { .fd = ops->cq_notify_fd(pr->scq),
			      .events = POLLIN };
	struct sdp_sge g;
	char msg[64] = "wake up";
	struct sdp_mr *mmr;
	int ret, n;

	CHECK(pfd.fd >= 0, "notify fd");
	CHECK(!x.reg(prov, msg, sizeof(msg), 0, &mmr), "register msg");
	ops->cq_ack(pr->scq);
	CHECK(!ops->cq_arm(pr->scq), "cq_arm");
	CHECK(ops->cq_poll(pr->scq, &c, 1) == 0, "unexpected completion");
	n = poll(&pfd, 1, 0);
	CHECK(n == 0, "notify fd readable before anything happened");
	g = (struct sdp_sge){ msg, sizeof(msg), mmr };
	ret = ops->post_send(pr->cep, &g, 1, 7, 0);
	CHECK(ret >= 0, "send: %d", ret);
	n = poll(&pfd, 1, 5000);
	CHECK(n == 1, "sleeper not woken within 5 s");
	ops->cq_ack(pr->scq);
	ret = wait_one(pr->scq, &c);
	CHECK(ret == 1 && !c.status && c.op == SDP_OP_RECV &&
	      !strcmp((char *)rbuf + c.context * 4096, "wake up"),
	      "woken receive: n=%d status=%d", ret, c.status);
	wait_one(pr->ccq, &c);
	x.dereg(prov, mmr);
}

struct probe_arg {
	struct pair *pr;
	int ret;
	double secs;
};

static void *probe_thread(void *p)
{
	struct probe_arg *a = p;
	double t0 = now();

	a->ret = ops->probe(prov, (struct sockaddr *)&a->pr->sin,
			    sizeof(a->pr->sin));
	a->secs = now() - t0;
	return NULL;
}

/* A probe answered by a listener whose owner polls it: acknowledged (not
 * the timeout path), and never surfaced as a connection request. */
static void test_probe_listener(struct pair *pr)
{
	struct probe_arg a = { .pr = pr, .ret = -1 };
	struct sdp_conn_req *req;
	pthread_t t;
	double end = now() + 3;
	int ret;

	pthread_create(&t, NULL, probe_thread, &a);
	while (now() < end) {
		ret = ops->get_request(pr->l, &req, NULL, NULL);
		CHECK(ret == -EAGAIN, "a probe surfaced as a request: %d", ret);
		usleep(1000);
	}
	pthread_join(t, NULL);
	CHECK(a.ret == 0 && a.secs < 3.5,
	      "probe with a listener: %d after %.2f s", a.ret, a.secs);
	printf("probe: listener acknowledged in %.3f s\n", a.secs);
}

static void test_cache(void)
{
	static char buf[3 * 4096];
	struct sdp_mr *a, *b, *d;

	if (!x.cache_cb) {
		printf("registration cache: not offered\n");
		return;
	}
	CHECK(!x.reg(prov, buf, sizeof(buf), 0, &a), "register");
	CHECK(!x.reg(prov, buf + 4096, 100, 0, &b), "register sub-range");
	CHECK(a == b, "cache: a covered sub-range got a new registration");
	CHECK(!x.cache_cb(prov, buf + 8192, 1), "cache callback");
	CHECK(!x.reg(prov, buf + 4096, 100, 0, &d), "register again");
	CHECK(d != a, "cache: an invalidated registration was reused");
	x.dereg(prov, a);
	x.dereg(prov, b);
	x.dereg(prov, d);
	CHECK(x.reg(prov, buf, 0, 0, &a) == -EINVAL, "zero length");
	printf("registration cache: hit, invalidate and miss checked\n");
}

/* ---- two hosts: one end per process ------------------------------------ */

enum { XH_LEN = (4 << 20) + 5, XH_MSG = 256 };

struct xh {
	struct sdp_cq *cq;
	struct sdp_ep *ep;
	struct sdp_mr *mr;	/* msgs: [0] send, [1..4] receive */
	unsigned char *msgs;
};

static int xh_send(struct xh *h, const void *m, size_t len)
{
	struct sdp_completion c;
	struct sdp_sge g = { h->msgs, len, h->mr };
	int ret;

	memcpy(h->msgs, m, len);
	ret = ops->post_send(h->ep, &g, 1, 99, 0);
	if (ret == SDP_PENDING)
		ret = wait_one(h->cq, &c) == 1 && !c.status ? 0 : -EIO;
	return ret;
}

/* Waits for a message; reposts its buffer; returns it in out. */
static int xh_recv(struct xh *h, void *out, size_t len)
{
	struct sdp_completion c;
	struct sdp_sge g;
	double end = now() + 120;
	int n;

	do
		n = ops->cq_poll(h->cq, &c, 1);
	while (!n && now() < end && !usleep(200));
	if (n != 1 || c.status || c.op != SDP_OP_RECV)
		return -EIO;
	memcpy(out, h->msgs + c.context * XH_MSG, len);
	g = (struct sdp_sge){ h->msgs + c.context * XH_MSG, XH_MSG, h->mr };
	n = ops->post_recv(h->ep, &g, 1, c.context);
	return n == SDP_PENDING ? 0 : -EIO;
}

static int xh_setup(struct xh *h)
{
	int i;

	h->msgs = calloc(5, XH_MSG);
	if (!h->msgs || x.reg(prov, h->msgs, 5 * XH_MSG,
			      SDP_ACCESS_LOCAL_WRITE, &h->mr))
		return -ENOMEM;
	for (i = 1; i <= 4; i++) {
		struct sdp_sge g = { h->msgs + i * XH_MSG, XH_MSG, h->mr };

		if (ops->post_recv(h->ep, &g, 1, i) != SDP_PENDING)
			return -EIO;
	}
	return 0;
}

/* Server: exposes a region, the client writes it, we check the bytes,
 * refill it, the client reads it back and checks. */
static int two_host_serve(struct sockaddr_in *sin)
{
	struct sdp_listener *l;
	struct sdp_conn_req *req;
	struct sdp_completion c;
	struct sdp_rdma_desc d;
	struct sdp_rmr *rmr;
	struct xh h = { 0 };
	unsigned char *reg = malloc(XH_LEN), *want = malloc(XH_LEN);
	char word[16];
	double end = now() + 300;
	int ret;

	CHECK(!ops->cq_create(prov, 64, &h.cq), "cq_create");
	ret = ops->listen(prov, (struct sockaddr *)sin, sizeof(*sin), 4, &l);
	CHECK(!ret, "listen: %d", ret);
	if (ret)
		return 1;
	printf("serve: listening\n");
	while ((ret = ops->get_request(l, &req, NULL, NULL)) == -EAGAIN &&
	       now() < end)
		usleep(2000);
	CHECK(!ret, "no connection request: %d", ret);
	if (ret)
		return 1;
	ret = ops->accept(req, h.cq, "srv", 3, NULL, &h.ep);
	CHECK(ret >= 0, "accept: %d", ret);
	CHECK(!xh_setup(&h), "message buffers");
	if (ret == SDP_PENDING)
		CHECK(wait_one(h.cq, &c) == 1 && !c.status, "connected");
	memset(reg, 0, XH_LEN);
	CHECK(!x.reg_rdma(h.ep, reg, XH_LEN, SDP_ACCESS_REMOTE_READ |
			  SDP_ACCESS_REMOTE_WRITE, &d, &rmr), "register");
	CHECK(!xh_send(&h, &d, sizeof(d)), "send descriptor");
	CHECK(!xh_recv(&h, word, 8) && !memcmp(word, "written", 8),
	      "no 'written'");
	fill(want, XH_LEN, 5);
	CHECK(!memcmp(reg, want, XH_LEN), "written bytes differ");
	fill(reg, XH_LEN, 6);
	CHECK(!xh_send(&h, "refilled", 9), "send refilled");
	CHECK(!xh_recv(&h, word, 4) && !memcmp(word, "bye", 4), "no 'bye'");
	printf("serve: %d bytes written by the peer arrived intact\n", XH_LEN);
	x.dereg_rdma(h.ep, rmr);
	ops->ep_close(h.ep);
	ops->listener_close(l);
	return failures ? 1 : 0;
}

static int two_host_connect(struct sockaddr_in *sin)
{
	struct sdp_completion c;
	struct sdp_rdma_desc d;
	struct sdp_mr *mr;
	struct sdp_sge g;
	struct xh h = { 0 };
	unsigned char *buf = malloc(XH_LEN), *want = malloc(XH_LEN);
	char word[16];
	double end = now() + 300, t0;
	int ret;

	CHECK(!ops->cq_create(prov, 64, &h.cq), "cq_create");
	/* the server VM may still be booting: retry refused connects */
	for (;;) {
		ret = ops->connect(prov, h.cq, (struct sockaddr *)sin,
				   sizeof(*sin), "cli", 3, NULL, &h.ep);
		if (ret == SDP_PENDING && wait_one(h.cq, &c) == 1 && !c.status)
			break;
		if (ret >= 0)
			ops->ep_close(h.ep);
		if (now() > end) {
			CHECK(0, "could not connect: %d", ret);
			return 1;
		}
		sleep(1);
	}
	CHECK(!xh_setup(&h), "message buffers");
	CHECK(!xh_recv(&h, &d, sizeof(d)), "no descriptor");
	CHECK(!x.reg(prov, buf, XH_LEN, SDP_ACCESS_LOCAL_WRITE, &mr), "reg");
	fill(buf, XH_LEN, 5);
	g = (struct sdp_sge){ buf, XH_LEN, mr };
	t0 = now();
	ret = x.write(h.ep, &g, 1, &d, 0, 1, 0);
	CHECK(ret == SDP_PENDING && wait_one(h.cq, &c) == 1 && !c.status,
	      "rdma write: %d", ret);
	printf("connect: rdma write %d bytes in %.3f s\n", XH_LEN, now() - t0);
	CHECK(!xh_send(&h, "written", 8), "send written");
	CHECK(!xh_recv(&h, word, 9) && !memcmp(word, "refilled", 9),
	      "no 'refilled'");
	if (x.read) {
		memset(buf, 0, XH_LEN);
		t0 = now();
		ret = x.read(h.ep, &g, 1, &d, 0, 2, 0);
		CHECK(ret == SDP_PENDING && wait_one(h.cq, &c) == 1 &&
		      !c.status, "rdma read: %d", ret);
		fill(want, XH_LEN, 6);
		CHECK(!memcmp(buf, want, XH_LEN), "read bytes differ");
		printf("connect: rdma read %d bytes in %.3f s, intact\n",
		       XH_LEN, now() - t0);
	}
	CHECK(!xh_send(&h, "bye", 4), "send bye");
	usleep(200000);
	ops->ep_close(h.ep);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	char path[4096];
	const char *dir = getenv("SDP_PROVIDER_DIR");
	struct sdp_startup_args args = {
		.size = sizeof(args),
		.version_min = SDP_SPI_VERSION,
		.version_max = SDP_SPI_VERSION,
		.options = getenv("SDP_VERBS_TEST_OPTIONS") ?
			   getenv("SDP_VERBS_TEST_OPTIONS") : "probe_ms=4000",
		.log = test_log,
	};
	struct sdp_provider_info info = { .size = sizeof(info) };
	sdp_provider_startup_fn start;
	struct sdp_mr *rmr = NULL;
	struct pair pr;
	void *dl, *rbuf = NULL;
	int port = 0, ret;
	char mode = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 3 && (!strcmp(argv[1], "--serve") ||
			 !strcmp(argv[1], "--connect"))) {
		mode = argv[1][2];
		setenv("SDP_VERBS_TEST_ADDR", argv[2], 1);
		port = atoi(argv[3]);
		argc = 1;
	}
	if (argc > 1)
		snprintf(path, sizeof(path), "%s", argv[1]);
	else
		snprintf(path, sizeof(path), "%s/libsdp-verbs.so",
			 dir ? dir : "build/lib/sdp");
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		printf("FAIL: cannot load %s: %s\n", path, dlerror());
		return 1;
	}
	start = (sdp_provider_startup_fn)dlsym(dl, SDP_PROVIDER_ENTRY_NAME);
	if (!start) {
		printf("FAIL: %s has no %s\n", path, SDP_PROVIDER_ENTRY_NAME);
		return 1;
	}
	ret = start(&args, &info, &prov);
	if (ret == -SDP_ENODEVICE) {
		CHECK(!strcmp(info.name, "verbs") && info.version ==
		      SDP_SPI_VERSION, "info not filled without a device");
		CHECK(strstr(last_log, "no RDMA device") != NULL,
		      "no \"no RDMA device\" log message");
		CHECK(prov == NULL, "provider returned without a device");
		if (failures)
			return 1;
		printf("SKIP: no RDMA device on this host (module loaded, "
		       "startup said -SDP_ENODEVICE as it must)\n");
		return 0;
	}
	CHECK(ret == 0 && prov, "startup: %d", ret);
	if (ret)
		return 1;
	ops = prov->ops;
	prov_caps = info.caps;
	printf("provider %s v%u.%u caps %#llx: %s\n", info.name,
	       SDP_SPI_MAJOR(info.version), SDP_SPI_MINOR(info.version),
	       (unsigned long long)info.caps, info.description);
	CHECK(!get_ext((struct sdp_guid)SDP_GUID_REGISTER_MEMORY, &x.reg) &&
	      !get_ext((struct sdp_guid)SDP_GUID_DEREGISTER_MEMORY, &x.dereg) &&
	      !get_ext((struct sdp_guid)SDP_GUID_REGISTER_RDMA_MEMORY,
		       &x.reg_rdma) &&
	      !get_ext((struct sdp_guid)SDP_GUID_DEREGISTER_RDMA_MEMORY,
		       &x.dereg_rdma) &&
	      !get_ext((struct sdp_guid)SDP_GUID_RDMA_WRITE, &x.write),
	      "a mandatory extension is missing");
	ret = get_ext((struct sdp_guid)SDP_GUID_RDMA_READ, &x.read);
	CHECK(ret == 0 || ret == -EOPNOTSUPP, "RdmaRead ioctl: %d", ret);
	CHECK(!!(info.caps & SDP_CAP_RDMA_READ) == (ret == 0),
	      "RdmaRead capability and ioctl disagree");
	if (ret)
		x.read = NULL;
	if (get_ext((struct sdp_guid)SDP_GUID_MR_CACHE_CALLBACK, &x.cache_cb))
		x.cache_cb = NULL;

	if (mode) {
		struct sockaddr_in sin = addr_of(port);

		ret = mode == 's' ? two_host_serve(&sin)
				  : two_host_connect(&sin);
		printf("%s: %d failures\n", failures ? "FAIL" : "PASS",
		       failures);
		return ret;
	}
	test_cache();

	port = tl_free_port();
	memset(&pr, 0, sizeof(pr));
	pr.sin = addr_of(port);
	CHECK(!ops->cq_create(prov, 512, &pr.ccq), "cq_create");
	CHECK(!ops->cq_create(prov, 512, &pr.scq), "cq_create");
	ret = ops->probe(prov, (struct sockaddr *)&pr.sin, sizeof(pr.sin));
	CHECK(ret == -ECONNREFUSED, "probe without listener: %d", ret);
	ret = ops->listen(prov, (struct sockaddr *)&pr.sin, sizeof(pr.sin), 16,
			  &pr.l);
	CHECK(!ret, "listen on port %d: %d", port, ret);
	if (ret)
		return 1;
	test_probe_listener(&pr);
	if (connect_pair(&pr)) {
		printf("FAIL: no connection; %d failures\n", failures + 1);
		return 1;
	}
	printf("connected, private data both ways\n");
	test_messages(&pr, &rmr, &rbuf);
	/* the receives test_messages left posted take the wake-up message */
	test_notify(&pr, rmr, rbuf);
	test_rdma(&pr);

	ret = ops->ep_close(pr.cep);
	CHECK(!ret, "ep_close client: %d", ret);
	ret = ops->ep_close(pr.sep);
	CHECK(!ret, "ep_close server: %d", ret);
	CHECK(!ops->listener_close(pr.l), "listener_close");
	ret = ops->probe(prov, (struct sockaddr *)&pr.sin, sizeof(pr.sin));
	CHECK(ret == -ECONNREFUSED, "probe after listener_close: %d", ret);
	CHECK(!ops->cq_destroy(pr.ccq) && !ops->cq_destroy(pr.scq),
	      "cq_destroy");
	ops->cleanup(prov);
	dlclose(dl);
	printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
