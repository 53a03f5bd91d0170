// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * cases_conn.c - conformance cases for connections: refusal, rejection,
 * private data, probe, 1,000 connections at once between two processes, and
 * several threads each driving their own endpoints.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf.h"

int case_connect_refused(void)
{
	struct sockaddr_in sin;
	struct sdp_module m;
	uint16_t port = conf_port();
	struct side *s;
	int pending, rc;

	TRY(conf_load(&m));
	s = calloc(1, sizeof(*s));
	CHECK(s, "out of memory");
	TRY(side_init(s, &m, "client"));
	conf_addr(&sin, port);
	rc = m.ops.probe(m.prov, (struct sockaddr *)&sin, sizeof(sin));
	CHECK(rc == -ECONNREFUSED, "probe of a port nobody listens on "
	      "answered %s, expected -ECONNREFUSED", conf_err(rc));
	rc = side_connect_start(s, port, NULL, 0, &pending);
	if (rc == 0) {
		rc = side_connect_finish(s, pending, 10000);
		CHECK(!conf_aborted(), "%s", conf_sh->fail);
		CHECK(rc == -ECONNREFUSED, "connect to nobody: its completion "
		      "says %s, expected -ECONNREFUSED", conf_err(rc));
		m.ops.ep_close(s->ep);
	} else {
		CHECK(rc == -ECONNREFUSED, "connect to nobody answered %s, "
		      "expected -ECONNREFUSED", conf_err(rc));
	}
	side_fini(s);
	free(s);
	sdp_module_unload(&m);
	return 0;
}

/* Takes one request from l within ms; -1 on timeout. */
static int take_request(struct side *s, struct sdp_listener *l,
			struct sdp_conn_req **req, void *priv, size_t *plen,
			int ms)
{
	uint64_t end = conf_now_us() + (uint64_t)ms * 1000;
	struct pollfd pfd = { .fd = s->m->ops.listener_fd(l),
			      .events = POLLIN };
	int rc;

	for (;;) {
		rc = s->m->ops.get_request(l, req, priv, plen);
		if (rc == 0)
			return 0;
		CHECK(rc == -EAGAIN, "get_request: %s", conf_err(rc));
		CHECK(conf_now_us() < end, "no connection request within %d ms",
		      ms);
		if (s->buddy)
			side_count(s->buddy, &(struct match){ 1, 1, 0, NULL },
				   0);
		poll(&pfd, 1, 1);
	}
}

int case_reject(void)
{
	struct side *srv, *cli, *cli2;
	struct sdp_listener *l;
	struct sdp_conn_req *req;
	uint8_t priv[SDP_MAX_PRIVATE_DATA];
	uint16_t port = conf_port();
	struct sdp_module m;
	size_t plen;
	int pending, rc;
	char msg[3];

	TRY(conf_load(&m));
	srv = calloc(1, sizeof(*srv));
	cli = calloc(1, sizeof(*cli));
	cli2 = calloc(1, sizeof(*cli2));
	CHECK(srv && cli && cli2, "out of memory");
	TRY(side_init(srv, &m, "server"));
	TRY(side_init(cli, &m, "client"));
	TRY(side_init(cli2, &m, "client2"));
	srv->buddy = cli;
	cli->buddy = srv;
	TRY(side_listen(srv, port, &l));
	rc = side_connect_start(cli, port, NULL, 0, &pending);
	CHECK(rc == 0, "connect: %s", conf_err(rc));
	plen = sizeof(priv);
	TRY(take_request(srv, l, &req, priv, &plen, 10000));
	rc = m.ops.reject(req);
	CHECK(rc == 0, "reject: %s", conf_err(rc));
	CHECK(pending, "connect answered 0 (connected) although the request "
	      "was still waiting to be accepted or rejected");
	rc = side_connect_finish(cli, pending, 10000);
	CHECK(!conf_aborted(), "%s", conf_sh->fail);
	CHECK(rc == -ECONNREFUSED, "rejected connect completed with %s, "
	      "expected -ECONNREFUSED", conf_err(rc));
	side_close(cli);	/* its endpoint and early receive buffers */

	/* The listener still works. */
	srv->buddy = cli2;
	cli2->buddy = srv;
	rc = side_connect_start(cli2, port, NULL, 0, &pending);
	CHECK(rc == 0, "connect after a reject: %s", conf_err(rc));
	TRY(side_accept(srv, l, NULL, 0, NULL, NULL, 10000));
	rc = side_connect_finish(cli2, pending, 10000);
	CHECK(rc == 0, "connect after a reject completed with %s",
	      conf_err(rc));
	TRY(side_ctl_init(srv));
	TRY(side_ctl_init(cli2));
	TRY(side_send(cli2, "hi", 3));
	TRY(side_recv(srv, msg, 3, NULL, 5000));
	CHECK(!memcmp(msg, "hi", 3), "message after the reject corrupted");
	side_fini(cli);
	conf_local_unpair(srv, cli2, l);
	free(srv);
	free(cli);
	free(cli2);
	sdp_module_unload(&m);
	return 0;
}

static int priv_round(struct sdp_module *m, size_t clen, size_t slen)
{
	uint8_t cp[SDP_MAX_PRIVATE_DATA], sp[SDP_MAX_PRIVATE_DATA];
	uint8_t got[SDP_MAX_PRIVATE_DATA];
	struct sdp_conn_req *req;
	struct sdp_listener *l;
	struct side *srv, *cli;
	uint16_t port = conf_port();
	size_t glen = sizeof(got);
	int pending, rc;

	srv = calloc(1, sizeof(*srv));
	cli = calloc(1, sizeof(*cli));
	CHECK(srv && cli, "out of memory");
	pat_fill(cp, sizeof(cp), 61, 0);
	pat_fill(sp, sizeof(sp), 62, 0);
	TRY(side_init(srv, m, "server"));
	TRY(side_init(cli, m, "client"));
	srv->buddy = cli;
	cli->buddy = srv;
	TRY(side_listen(srv, port, &l));
	rc = side_connect_start(cli, port, clen ? cp : NULL, clen, &pending);
	CHECK(rc == 0, "connect with %zu bytes of private data: %s", clen,
	      conf_err(rc));
	memset(got, 0, sizeof(got));
	TRY(take_request(srv, l, &req, got, &glen, 10000));
	CHECK(glen == clen && !memcmp(got, cp, clen), "get_request gave %zu "
	      "bytes of private data, the client sent %zu%s", glen, clen,
	      glen == clen ? " (different bytes)" : "");
	rc = m->ops.accept(req, srv->cq, slen ? sp : NULL, slen, srv,
			   &srv->ep);
	CHECK(rc == 0 || rc == SDP_PENDING, "accept with %zu bytes of private "
	      "data: %s", slen, conf_err(rc));
	TRY(side_connect_finish(srv, rc == SDP_PENDING, 10000));
	rc = side_connect_finish(cli, pending, 10000);
	CHECK(rc == 0, "connect completion: %s", conf_err(rc));
	TRY(side_ctl_init(srv));
	TRY(side_ctl_init(cli));
	CHECK(cli->attr.peer_priv_len == slen &&
	      !memcmp(cli->attr.peer_priv, sp, slen), "client's ep_query "
	      "peer_priv has %u bytes, the server sent %zu%s",
	      cli->attr.peer_priv_len, slen,
	      cli->attr.peer_priv_len == slen ? " (different bytes)" : "");
	CHECK(srv->attr.peer_priv_len == clen &&
	      !memcmp(srv->attr.peer_priv, cp, clen), "server's ep_query "
	      "peer_priv has %u bytes, the client sent %zu%s",
	      srv->attr.peer_priv_len, clen,
	      srv->attr.peer_priv_len == clen ? " (different bytes)" : "");
	conf_local_unpair(srv, cli, l);
	free(srv);
	free(cli);
	return 0;
}

int case_private_data(void)
{
	uint8_t big[SDP_MAX_PRIVATE_DATA + 1] = { 0 };
	struct sdp_module m;
	struct side *s;
	int pending, rc;

	TRY(conf_load(&m));
	TRY(priv_round(&m, SDP_MAX_PRIVATE_DATA, SDP_MAX_PRIVATE_DATA));
	TRY(priv_round(&m, 0, 0));
	TRY(priv_round(&m, 5, 37));
	s = calloc(1, sizeof(*s));
	CHECK(s, "out of memory");
	TRY(side_init(s, &m, "client"));
	rc = side_connect_start(s, conf_port(), big, sizeof(big), &pending);
	CHECK(rc == -EINVAL, "connect with %zu bytes of private data (more "
	      "than SDP_MAX_PRIVATE_DATA) answered %s, expected -EINVAL",
	      sizeof(big), conf_err(rc));
	side_fini(s);
	free(s);
	sdp_module_unload(&m);
	return 0;
}

int case_probe(void)
{
	struct sdp_listener *l;
	struct sdp_conn_req *req;
	struct sockaddr_in sin;
	struct sdp_module m;
	uint16_t port = conf_port();
	uint8_t priv[SDP_MAX_PRIVATE_DATA];
	size_t plen = sizeof(priv);
	struct side *s;
	int rc;

	TRY(conf_load(&m));
	s = calloc(1, sizeof(*s));
	CHECK(s, "out of memory");
	TRY(side_init(s, &m, "server"));
	conf_addr(&sin, port);
	rc = m.ops.probe(m.prov, (struct sockaddr *)&sin, sizeof(sin));
	CHECK(rc == -ECONNREFUSED, "probe before listen answered %s, expected "
	      "-ECONNREFUSED", conf_err(rc));
	TRY(side_listen(s, port, &l));
	rc = m.ops.probe(m.prov, (struct sockaddr *)&sin, sizeof(sin));
	CHECK(rc == 0, "probe of a listener answered %s, expected 0",
	      conf_err(rc));
	rc = m.ops.probe(m.prov, (struct sockaddr *)&sin, sizeof(sin));
	CHECK(rc == 0, "second probe of a listener answered %s, expected 0",
	      conf_err(rc));
	usleep(100000);
	rc = m.ops.get_request(l, &req, priv, &plen);
	CHECK(rc == -EAGAIN, "get_request after two probes answered %s, "
	      "expected -EAGAIN: a probe must not leave a request",
	      conf_err(rc));
	rc = m.ops.listener_close(l);
	CHECK(rc == 0, "listener_close: %s", conf_err(rc));
	rc = m.ops.probe(m.prov, (struct sockaddr *)&sin, sizeof(sin));
	CHECK(rc == -ECONNREFUSED, "probe after listener_close answered %s, "
	      "expected -ECONNREFUSED", conf_err(rc));
	side_fini(s);
	free(s);
	sdp_module_unload(&m);
	return 0;
}

/* ---- 1,000 connections --------------------------------------------------- */

#define NCONN 1000
#define CMSG 64

struct many {
	struct sdp_module m;
	struct side *s;
	struct sdp_ep **eps;
	uint8_t *rbuf, *sbuf;
	struct sdp_mr *rmr, *smr;
	uint16_t port;
	int sync[2], back[2];
};

static int many_setup(struct many *w, const char *who)
{
	size_t len = (size_t)NCONN * CMSG;
	int rc;

	TRY(conf_load(&w->m));
	w->s = calloc(1, sizeof(*w->s));
	w->eps = calloc(NCONN, sizeof(*w->eps));
	w->rbuf = calloc(1, len);
	w->sbuf = calloc(1, len);
	CHECK(w->s && w->eps && w->rbuf && w->sbuf, "out of memory");
	w->s->who = who;
	w->s->m = &w->m;
	rc = w->m.ops.cq_create(w->m.prov, 4 * NCONN, &w->s->cq);
	CHECK(rc == 0, "%s: cq_create(depth %d): %s", who, 4 * NCONN,
	      conf_err(rc));
	rc = w->m.ext.register_memory(w->m.prov, w->rbuf, len,
				      SDP_ACCESS_LOCAL_WRITE, &w->rmr);
	CHECK(rc == 0, "RegisterMemory: %s", conf_err(rc));
	rc = w->m.ext.register_memory(w->m.prov, w->sbuf, len, 0, &w->smr);
	CHECK(rc == 0, "RegisterMemory: %s", conf_err(rc));
	return 0;
}

static void many_teardown(struct many *w)
{
	int i;

	for (i = 0; i < NCONN; i++)
		if (w->eps[i])
			w->m.ops.ep_close(w->eps[i]);
	w->m.ext.deregister_memory(w->m.prov, w->rmr);
	w->m.ext.deregister_memory(w->m.prov, w->smr);
	w->m.ops.cq_destroy(w->s->cq);
	conf_reg_free(&w->m, w->rbuf, (size_t)NCONN * CMSG);
	conf_reg_free(&w->m, w->sbuf, (size_t)NCONN * CMSG);
	sdp_module_unload(&w->m);
	free(w->s);
	free(w->eps);
}

static int many_post_recv(struct many *w, int i)
{
	struct sdp_sge sge = { w->rbuf + (size_t)i * CMSG, CMSG, w->rmr };
	int rc;

	rc = w->m.ops.post_recv(w->eps[i], &sge, 1,
				CTX_TAG(TAG_USER) | (uint64_t)i);
	CHECK(rc == SDP_PENDING || rc == 0, "%s: post_recv on connection "
	      "%d: %s", w->s->who, i, conf_err(rc));
	return 0;
}

static int many_send(struct many *w, int i, uint32_t seed)
{
	uint8_t *b = w->sbuf + (size_t)i * CMSG;
	struct sdp_sge sge = { b, CMSG, w->smr };
	uint64_t ctx = CTX_TAG(TAG_STREAM_SEND) | (uint64_t)i;
	int rc;

	pat_fill(b, CMSG, seed + (uint32_t)i, 0);
	rc = w->m.ops.post_send(w->eps[i], &sge, 1, ctx, 0);
	rc = side_finish(w->s, rc, SDP_OP_SEND, ctx, 10000);
	CHECK(rc == 0, "%s: post_send on connection %d: %s", w->s->who, i,
	      conf_err(rc));
	return 0;
}

static int many_recv_check(struct many *w, uint32_t seed, int *idx)
{
	struct match mt = { .mask = CTX_MASK, .value = CTX_TAG(TAG_USER),
			    .op = SDP_OP_RECV };
	struct sdp_completion c;
	int i;

	TRY(side_wait(w->s, &mt, &c, 20000));
	i = (int)(c.context & 0xffff);
	CHECK(c.status == 0 && c.bytes == CMSG, "%s: receive on connection "
	      "%d: status %s, %llu bytes", w->s->who, i, conf_err(c.status),
	      (unsigned long long)c.bytes);
	CHECK(i < NCONN && c.ep == w->eps[i] &&
	      c.ep_context == (void *)(uintptr_t)(i + 1),
	      "%s: receive completion names connection %d but ep %p context "
	      "%p", w->s->who, i, (void *)c.ep, c.ep_context);
	CHECK(pat_check(w->rbuf + (size_t)i * CMSG, CMSG, seed + (uint32_t)i,
			0) < 0, "%s: connection %d carried wrong bytes",
	      w->s->who, i);
	*idx = i;
	return 0;
}

static int pipe_wait(int fd, const char *what)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char one;

	CHECK(poll(&pfd, 1, 120000) == 1 && read(fd, &one, 1) == 1,
	      "peer never signalled: %s", what);
	return 0;
}

static int many_client(struct many *w)
{
	struct match mt = { .op = SDP_OP_CONNECT };
	struct sdp_completion c;
	struct sockaddr_in sin;
	int i, rc, pending = 0, idx;
	uint32_t id;

	TRY(many_setup(w, "client"));
	TRY(pipe_wait(w->sync[0], "listening"));
	conf_addr(&sin, w->port);
	for (i = 0; i < NCONN; i++) {
		id = (uint32_t)i;
		rc = w->m.ops.connect(w->m.prov, w->s->cq,
				      (struct sockaddr *)&sin, sizeof(sin),
				      &id, sizeof(id),
				      (void *)(uintptr_t)(i + 1),
				      &w->eps[i]);
		CHECK(rc == 0 || rc == SDP_PENDING, "client: connect number %d"
		      ": %s", i, conf_err(rc));
		pending += rc == SDP_PENDING;
	}
	while (pending--) {
		TRY(side_wait(w->s, &mt, &c, 60000));
		CHECK(c.status == 0, "client: connect completion for "
		      "connection %p: %s", c.ep_context, conf_err(c.status));
	}
	for (i = 0; i < NCONN; i++)
		TRY(many_post_recv(w, i));
	CHECK(write(w->back[1], "c", 1) == 1, "pipe write failed");
	TRY(pipe_wait(w->sync[0], "server receives posted"));
	for (i = 0; i < NCONN; i++)
		TRY(many_send(w, i, 7000));
	for (i = 0; i < NCONN; i++)
		TRY(many_recv_check(w, 9000, &idx));
	many_teardown(w);
	return 0;
}

static int many_server(struct many *w)
{
	struct match mt = { .op = SDP_OP_CONNECT };
	struct sdp_completion c;
	struct sdp_conn_req *req;
	struct sdp_listener *l;
	int i, rc, pending = 0, idx;
	uint32_t id;
	size_t plen;

	TRY(many_setup(w, "server"));
	TRY(side_listen(w->s, w->port, &l));
	CHECK(write(w->sync[1], "l", 1) == 1, "pipe write failed");
	for (i = 0; i < NCONN; i++) {
		plen = sizeof(id);
		TRY(take_request(w->s, l, &req, &id, &plen, 30000));
		CHECK(plen == sizeof(id) && id < NCONN && !w->eps[id],
		      "server: request %d carries private data %u (%zu "
		      "bytes): not a fresh connection number", i, id, plen);
		rc = w->m.ops.accept(req, w->s->cq, NULL, 0,
				     (void *)(uintptr_t)(id + 1), &w->eps[id]);
		CHECK(rc == 0 || rc == SDP_PENDING, "server: accept number %d"
		      ": %s", i, conf_err(rc));
		pending += rc == SDP_PENDING;
	}
	while (pending--) {
		TRY(side_wait(w->s, &mt, &c, 60000));
		CHECK(c.status == 0, "server: accept completion: %s",
		      conf_err(c.status));
	}
	for (i = 0; i < NCONN; i++)
		TRY(many_post_recv(w, i));
	TRY(pipe_wait(w->back[0], "client receives posted"));
	CHECK(write(w->sync[1], "r", 1) == 1, "pipe write failed");
	for (i = 0; i < NCONN; i++) {
		TRY(many_recv_check(w, 7000, &idx));
		TRY(many_send(w, idx, 9000));
	}
	w->m.ops.listener_close(l);
	many_teardown(w);
	return 0;
}

int case_many_connections(void)
{
	struct many w;
	pid_t pid;
	int rc;

	conf_raise_nofile(20000);
	memset(&w, 0, sizeof(w));
	w.port = conf_port();
	CHECK(pipe(w.sync) == 0 && pipe(w.back) == 0, "pipe: %s",
	      strerror(errno));
	pid = conf_fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(many_client(&w) < 0 ? 1 : 0);
	rc = many_server(&w);
	if (rc < 0)
		kill(pid, SIGKILL);
	if (conf_reap(pid, 60000, "client process") < 0)
		rc = -1;
	return rc;
}

/* ---- threads ------------------------------------------------------------- */

#define TRDMA (256 * 1024 + 5)

static int thr_server(struct side *s, void *arg)
{
	struct sdp_rdma_desc d;
	struct sdp_rmr *rmr;
	uint32_t seed;
	uint8_t *t;
	int64_t bad;
	char done;
	int rc;

	TRY(msg_role_server(s, arg));
	t = malloc(TRDMA);
	CHECK(t, "out of memory");
	rc = s->m->ext.register_rdma_memory(s->ep, t, TRDMA,
					    SDP_ACCESS_REMOTE_WRITE, &d, &rmr);
	CHECK(rc == 0, "RegisterRdmaMemory: %s", conf_err(rc));
	seed = (uint32_t)conf_now_us();	/* differs per thread */
	TRY(side_send(s, &d, sizeof(d)));
	TRY(side_send(s, &seed, sizeof(seed)));
	TRY(side_recv(s, &done, 1, NULL, 30000));
	bad = pat_check(t, TRDMA, seed, 0);
	CHECK(bad < 0, "thread's RdmaWrite: byte %lld wrong", (long long)bad);
	CHECK(s->m->ext.deregister_rdma_memory(s->ep, rmr) == 0,
	      "DeregisterRdmaMemory failed");
	TRY(conf_reg_free(s->m, t, TRDMA));
	return side_send(s, "k", 1);
}

static int thr_client(struct side *s, void *arg)
{
	struct sdp_rdma_desc d;
	struct sdp_mr *mr;
	uint8_t *w;
	uint32_t seed;
	char done;
	int rc;

	TRY(msg_role_client(s, arg));
	TRY(side_recv(s, &d, sizeof(d), NULL, 30000));
	w = malloc(TRDMA);
	CHECK(w, "out of memory");
	rc = s->m->ext.register_memory(s->m->prov, w, TRDMA, 0, &mr);
	CHECK(rc == 0, "RegisterMemory: %s", conf_err(rc));
	TRY(side_recv(s, &seed, sizeof(seed), NULL, 30000));
	pat_fill(w, TRDMA, seed, 0);
	rc = side_rdma(s, 1, &(struct sdp_sge){ w, TRDMA, mr }, 1, &d, 0,
		       30000);
	CHECK(rc == 0, "thread's RdmaWrite of %d bytes: %s", TRDMA,
	      conf_err(rc));
	CHECK(s->m->ext.deregister_memory(s->m->prov, mr) == 0,
	      "DeregisterMemory failed");
	TRY(conf_reg_free(s->m, w, TRDMA));
	TRY(side_send(s, "d", 1));
	return side_recv(s, &done, 1, NULL, 30000);
}

int case_threads(void)
{
	struct stream st = { 300, 3000 };

	return conf_run_pairs(PAIR_FORK, 4, thr_server, &st,
			      thr_client, &st);
}
