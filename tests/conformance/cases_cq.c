// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * cases_cq.c - conformance cases for completions: the three outcomes of an
 * asynchronous call, the notification fd waking a sleeper, and a killed
 * peer turning into errors rather than a hang.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf.h"

#define U(n) (CTX_TAG(TAG_USER) | (n))

int case_cq_outcomes(void)
{
	struct match any = { .mask = CTX_MASK, .value = CTX_TAG(TAG_USER) };
	struct match m1 = { .mask = ~0ull, .value = U(1) };
	struct side *srv, *cli;
	struct sdp_listener *l;
	struct sdp_completion c;
	struct sdp_rdma_desc d, bad;
	struct sdp_rmr *rmr;
	struct sdp_mr *rmr_l, *smr;
	uint8_t *rbuf, *sbuf, *tbuf;
	int rc, expect_cli = 0, n;
	struct sdp_module m;

	TRY(conf_load(&m));
	srv = calloc(1, sizeof(*srv));
	cli = calloc(1, sizeof(*cli));
	rbuf = calloc(1, 4096);
	sbuf = calloc(1, 4096);
	tbuf = calloc(1, 4096);
	CHECK(srv && cli && rbuf && sbuf && tbuf, "out of memory");
	TRY(conf_local_pair(&m, srv, cli, &l, NULL, 0, NULL, 0));
	memset(&srv->attr, 0, sizeof(srv->attr));
	srv->attr.size = sizeof(srv->attr);
	rc = m.ops.ep_query(srv->ep, &srv->attr);
	CHECK(rc == 0, "ep_query: %s", conf_err(rc));
	rc = m.ext.register_memory(m.prov, rbuf, 4096, SDP_ACCESS_LOCAL_WRITE,
				   &rmr_l);
	CHECK(rc == 0, "RegisterMemory: %s", conf_err(rc));
	rc = m.ext.register_memory(m.prov, sbuf, 4096, 0, &smr);
	CHECK(rc == 0, "RegisterMemory: %s", conf_err(rc));

	/* A receive is PENDING and reports nothing before its message. */
	rc = m.ops.post_recv(srv->ep, &(struct sdp_sge){ rbuf, 4096, rmr_l },
			     1, U(1));
	CHECK(rc == SDP_PENDING, "post_recv answered %s, expected "
	      "SDP_PENDING", conf_err(rc));
	n = side_count(srv, &any, 100);
	CHECK(n == 0, "a receive with no message yet reported %d "
	      "completion(s)", n);

	/* A send: done now (nothing reported) or PENDING (exactly one). */
	pat_fill(sbuf, 100, 5, 0);
	rc = m.ops.post_send(cli->ep, &(struct sdp_sge){ sbuf, 100, smr }, 1,
			     U(2), 0);
	CHECK(rc == 0 || rc == SDP_PENDING, "post_send answered %s",
	      conf_err(rc));
	expect_cli += rc == SDP_PENDING;
	TRY(side_wait(srv, &m1, &c, 5000));
	CHECK(c.status == 0 && c.op == SDP_OP_RECV && c.bytes == 100 &&
	      c.ep == srv->ep && c.ep_context == srv,
	      "receive completion: status %s op %u bytes %llu ep %p context "
	      "%p; expected 0, %u, 100, %p, %p", conf_err(c.status), c.op,
	      (unsigned long long)c.bytes, (void *)c.ep, c.ep_context,
	      SDP_OP_RECV, (void *)srv->ep, (void *)srv);
	CHECK(pat_check(rbuf, 100, 5, 0) < 0, "received bytes differ");

	/* Failures at once report nothing. */
	rc = m.ops.post_send(cli->ep, &(struct sdp_sge){
			     sbuf, (size_t)srv->attr.max_msg_size + 1, smr },
			     1, U(4), 0);
	CHECK(rc < 0, "oversized post_send answered %s", conf_err(rc));
	rc = m.ext.register_rdma_memory(srv->ep, tbuf, 4096,
					SDP_ACCESS_REMOTE_WRITE, &d, &rmr);
	CHECK(rc == 0, "RegisterRdmaMemory: %s", conf_err(rc));
	bad = d;
	bad.key ^= 0x77;
	rc = m.ext.rdma_write(cli->ep, &(struct sdp_sge){ sbuf, 64, smr }, 1,
			      &bad, 0, U(5), 0);
	CHECK(rc < 0 || rc == SDP_PENDING, "RdmaWrite with a bad key "
	      "answered %s", conf_err(rc));
	expect_cli += rc == SDP_PENDING;
	/* A good RDMA write: done now or exactly one completion. */
	rc = m.ext.rdma_write(cli->ep, &(struct sdp_sge){ sbuf, 64, smr }, 1,
			      &d, 0, U(6), 0);
	CHECK(rc == 0 || rc == SDP_PENDING, "RdmaWrite answered %s",
	      conf_err(rc));
	expect_cli += rc == SDP_PENDING;
	if (rc == SDP_PENDING) {
		TRY(side_wait(cli, &(struct match){ ~0ull, U(6), 0, NULL }, &c,
			      5000));
		CHECK(c.status == 0 && c.op == SDP_OP_RDMA_WRITE &&
		      c.bytes == 64 && c.ep == cli->ep && c.ep_context == cli,
		      "RdmaWrite completion: status %s op %u bytes %llu",
		      conf_err(c.status), c.op, (unsigned long long)c.bytes);
		expect_cli--;
	}
	CHECK(pat_check(tbuf, 64, 5, 0) < 0, "RdmaWrite moved wrong bytes");

	/* Drain: exactly the PENDING ones, nothing else, no duplicates. */
	n = side_count(cli, &any, 300);
	CHECK(n == expect_cli, "client reported %d completion(s) after the "
	      "fact; %d were owed by PENDING answers", n, expect_cli);
	n = side_count(srv, &any, 100);
	CHECK(n == 0, "the receive reported %d extra completion(s)", n);
	CHECK(srv->qn == 0 && cli->qn == 0, "unexpected completions: context "
	      "%#llx", (unsigned long long)(srv->qn ? srv->q[0].context :
					    cli->q[0].context));

	CHECK(m.ext.deregister_rdma_memory(srv->ep, rmr) == 0,
	      "DeregisterRdmaMemory failed");
	CHECK(m.ext.deregister_memory(m.prov, rmr_l) == 0 &&
	      m.ext.deregister_memory(m.prov, smr) == 0,
	      "DeregisterMemory failed");
	conf_local_unpair(srv, cli, l);
	free(srv);
	free(cli);
	TRY(conf_reg_free(&m, rbuf, 4096));
	TRY(conf_reg_free(&m, sbuf, 4096));
	TRY(conf_reg_free(&m, tbuf, 4096));
	sdp_module_unload(&m);
	return 0;
}

/* ---- interrupt mode ------------------------------------------------------ */

static int role_sleeper(struct side *s, void *arg)
{
	struct match any = { 0 };
	struct pollfd pfd;
	uint64_t t0, slept;
	char msg[8];
	int rc;

	pfd.fd = s->m->ops.cq_notify_fd(s->cq);
	pfd.events = POLLIN;
	CHECK(pfd.fd >= 0, "cq_notify_fd: %s", conf_err(pfd.fd));
	TRY(side_send(s, "go", 3));
	CHECK(side_count(s, &any, 10) == 0, "unexpected completion");
	rc = s->m->ops.cq_ack(s->cq);
	CHECK(rc == 0, "cq_ack: %s", conf_err(rc));
	rc = s->m->ops.cq_arm(s->cq);
	CHECK(rc == 0, "cq_arm: %s", conf_err(rc));
	/* Poll once more after arming, then sleep (the SPI's rule). */
	CHECK(side_count(s, &any, 0) == 0, "completion before the peer sent");
	t0 = conf_now_us();
	rc = poll(&pfd, 1, 5000);
	slept = conf_now_us() - t0;
	CHECK(rc == 1 && (pfd.revents & POLLIN), "notification fd not "
	      "readable within 5 s of arming although the peer sent after "
	      "300 ms (poll %d, revents %#x)", rc, pfd.revents);
	CHECK(slept >= 150000, "notification fd readable after %llu ms, "
	      "before the peer sent (after 300 ms): a wake-up without cause",
	      (unsigned long long)(slept / 1000));
	CHECK(slept < 2300000, "woken %llu ms after arming, over 2 s after "
	      "the peer sent", (unsigned long long)(slept / 1000));
	TRY(side_recv(s, msg, 6, NULL, 2000));
	CHECK(!memcmp(msg, "wake!", 6), "wrong message after the wake-up");
	rc = s->m->ops.cq_ack(s->cq);
	CHECK(rc == 0, "cq_ack: %s", conf_err(rc));
	rc = poll(&pfd, 1, 0);
	CHECK(rc == 0, "notification fd still readable after cq_ack");
	return side_send(s, "bye", 4);
}

static int role_waker(struct side *s, void *arg)
{
	char msg[4];

	TRY(side_recv(s, msg, 3, NULL, 10000));
	usleep(300000);
	TRY(side_send(s, "wake!", 6));
	return side_recv(s, msg, 4, NULL, 10000);
}

int case_notify_wakeup(void)
{
	return conf_run_pair(PAIR_FORK, role_sleeper, NULL, role_waker, NULL);
}

/* ---- peer death ---------------------------------------------------------- */

int case_peer_death(void)
{
	struct match any = { .mask = CTX_MASK, .value = CTX_TAG(TAG_CTL_RECV) };
	struct sdp_listener *l;
	struct sdp_completion c;
	struct sdp_module m;
	struct pollfd pfd;
	struct side *s;
	uint16_t port = conf_port();
	int pipefd[2], rc, late, status;
	uint64_t t0;
	pid_t pid;
	char up[3];

	CHECK(pipe(pipefd) == 0, "pipe: %s", strerror(errno));
	pid = conf_fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	s = calloc(1, sizeof(*s));
	CHECK(s, "out of memory");
	if (pid == 0) {
		struct pollfd rp = { .fd = pipefd[0], .events = POLLIN };

		if (poll(&rp, 1, 10000) != 1 || conf_load(&m) < 0 ||
		    side_init(s, &m, "peer") < 0 ||
		    side_connect(s, port, NULL, 0, 10000) < 0 ||
		    side_ctl_init(s) < 0 || side_send(s, "up", 3) < 0)
			_exit(1);
		sleep(30);	/* until killed */
		_exit(1);
	}
	if (conf_load(&m) < 0 || side_init(s, &m, "server") < 0 ||
	    side_listen(s, port, &l) < 0)
		goto kill_child;
	if (write(pipefd[1], "x", 1) != 1 ||
	    side_accept(s, l, NULL, 0, NULL, NULL, 10000) < 0 ||
	    side_ctl_init(s) < 0 || side_recv(s, up, 3, NULL, 10000) < 0)
		goto kill_child;

	pfd.fd = m.ops.cq_notify_fd(s->cq);
	pfd.events = POLLIN;
	rc = m.ops.cq_arm(s->cq);
	if (pfd.fd < 0 || rc < 0) {
		FAIL("cq_notify_fd/cq_arm: %s", conf_err(pfd.fd < 0 ? pfd.fd :
							 rc));
		goto kill_child;
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	t0 = conf_now_us();
	rc = poll(&pfd, 1, 5000);
	if (rc != 1) {
		FAIL("armed notification fd not readable within 5 s of the "
		     "peer's death");
		goto close;
	}
	/* A receive posted now, when the connection has failed but nothing
	 * was polled (the provider may not know why yet), completes with an
	 * error or is refused: a device need not flush it (libsiw). */
	late = m.ops.post_recv(s->ep, &(struct sdp_sge){
		s->ctl + CONF_CTL_SLOTS * s->slot, 64, s->ctl_mr }, 1,
		CTX_TAG(TAG_USER) | 88);
	/* The receives still posted complete with an error. */
	if (side_wait(s, &any, &c, 5000) < 0)
		goto close;
	if (c.status >= 0) {
		FAIL("a pending receive completed with %s (%llu bytes) after "
		     "the peer died; expected an error", conf_err(c.status),
		     (unsigned long long)c.bytes);
		goto close;
	}
	if (conf_now_us() - t0 > 5000000) {
		FAIL("peer death took more than 5 s to report");
		goto close;
	}
	rc = side_finish(s, late, SDP_OP_RECV, CTX_TAG(TAG_USER) | 88, 5000);
	if (conf_aborted())
		goto close;
	if (rc >= 0) {
		FAIL("a receive posted after the peer died completed with %s",
		     conf_err(rc));
		goto close;
	}
	rc = m.ops.post_send(s->ep, &(struct sdp_sge){ s->ctl, 8, s->ctl_mr },
			     1, CTX_TAG(TAG_USER), 0);
	rc = side_finish(s, rc, SDP_OP_SEND, CTX_TAG(TAG_USER), 5000);
	if (rc >= 0) {
		FAIL("post_send to a dead peer succeeded");
		goto close;
	}
	side_close(s);
	m.ops.listener_close(l);
	side_fini(s);
	free(s);
	sdp_module_unload(&m);
	return 0;
close:
	side_close(s);
	return -1;
kill_child:
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}
