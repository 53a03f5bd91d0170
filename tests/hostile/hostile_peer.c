// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * hostile_peer.c - a test peer that speaks the switch's handshake and session
 * protocol itself (the provider loaded through the loader, no switch) to
 * attack a preloaded server: one malformed or hostile message sequence per
 * connection ("cases"), a forged provider connection racing a real client
 * ("forge"), and a squatter on a server's provider address ("squat").
 *   hostile_peer cases PORT LOGFILE SERVER_PID [CASE...]
 *   hostile_peer slot PORT LOGFILE SERVER_PID [CASE...]  (transfer slot)
 *   hostile_peer forge SERVER_PORT SECONDS
 *   hostile_peer squat PORT SECONDS
 * Prints PASS/FAIL/SKIP lines; exits 1 when anything failed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hostile.h"
#include "sdp_loader.h"
#include "wire.h"

#define MSG_SIZE 16384
#define NRECV 16
#define CLOSE_BOUND_MS 3000

static struct sdp_module mod;

/* One attacking connection: the TCP socket and the provider session. */
struct peer {
	int tcp;
	struct sockaddr_in local;
	struct sdp_listener *pl;
	struct sdp_cq *cq;
	struct sdp_ep *ep;
	uint8_t *bufs;		/* NRECV receive buffers, then a send one */
	struct sdp_mr *mr;
	uint8_t key[16];
	uint32_t tx_seq;
	uint32_t srv_msg_size, srv_credits;
	bool srv_can_read;
	struct sdp_msg_setup srv_setup;
	bool got_setup;
	bool got_abort;			/* the server sent ABORT */
	bool got_switch;		/* the server sent SWITCH */
	uint16_t port;			/* the server's */
	uint64_t tcp_tx, tcp_rx;	/* program bytes on TCP each way */
	unsigned int rx_msgs;
	struct sdp_xslot *my_xs;	/* ours: the server claims in it */
	struct sdp_xslot *srv_xs;	/* the server's: it offers in it */
	uint8_t *obuf;			/* what we offer, registered */
	struct sdp_rmr *ormr, *smr;	/* its registration; a sink's */
	uint8_t *sbuf;			/* a sink for pushes we ask for */
	struct sdp_rdma_desc sink;
	char err[256];
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fail(struct peer *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int fail(struct peer *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
	return -1;
}

static int load_shm(void)
{
	char err[512] = "";
	int r = sdp_module_load("shm", "libsdp-shm.so", NULL, &mod, err,
				sizeof(err));

	if (r < 0 || mod.status) {
		fprintf(stderr, "hostile_peer: cannot load the shm provider: %s (%s); set SDP_PROVIDER_DIR to the build's lib/sdp\n",
			err, sdp_strerror(r < 0 ? r : mod.status));
		return -1;
	}
	return 0;
}

/* Drains completions: reposts receives, remembers the server's SETUP. */
static int peer_poll(struct peer *p)
{
	struct sdp_completion c[16];
	int n, i;

	n = mod.ops.cq_poll(p->cq, c, 16);
	if (n < 0)
		return n;
	for (i = 0; i < n; i++) {
		if (c[i].op != SDP_OP_RECV)
			continue;
		if (c[i].status)
			return c[i].status;
		if (c[i].context < NRECV) {
			uint8_t *b = p->bufs + c[i].context * MSG_SIZE;
			struct sdp_sge sge = { b, MSG_SIZE, p->mr };

			if (!p->got_setup && b[0] == SDP_MSG_SETUP &&
			    c[i].bytes >= sizeof(struct sdp_msg_hdr) +
						  sizeof(p->srv_setup)) {
				memcpy(&p->srv_setup,
				       b + sizeof(struct sdp_msg_hdr),
				       sizeof(p->srv_setup));
				p->got_setup = true;
			}
			if (b[0] == SDP_MSG_ABORT)
				p->got_abort = true;
			if (b[0] == SDP_MSG_SWITCH)
				p->got_switch = true;
			p->rx_msgs++;
			mod.ops.post_recv(p->ep, &sge, 1, c[i].context);
		}
	}
	return n;
}

static void peer_close(struct peer *p)
{
	if (p->ormr)
		mod.ext.deregister_rdma_memory(p->ep, p->ormr);
	if (p->smr)
		mod.ext.deregister_rdma_memory(p->ep, p->smr);
	free(p->obuf);
	free(p->sbuf);
	p->ormr = p->smr = NULL;
	p->obuf = p->sbuf = NULL;
	if (p->ep)
		mod.ops.ep_close(p->ep);
	if (p->mr)
		mod.ext.deregister_memory(mod.prov, p->mr);
	if (p->cq)
		mod.ops.cq_destroy(p->cq);
	if (p->pl)
		mod.ops.listener_close(p->pl);
	if (p->tcp >= 0)
		close(p->tcp);
	free(p->bufs);
	p->ep = NULL;
	p->mr = NULL;
	p->cq = NULL;
	p->pl = NULL;
	p->tcp = -1;
	p->bufs = NULL;
}

static int read_full(int fd, void *buf, size_t len, int ms)
{
	uint64_t end = now_ms() + ms;
	size_t got = 0;

	while (got < len) {
		struct pollfd pf = { fd, POLLIN, 0 };
		ssize_t n;

		if (now_ms() >= end)
			return -ETIMEDOUT;
		poll(&pf, 1, (int)(end - now_ms()));
		n = recv(fd, (uint8_t *)buf + got, len - got, MSG_DONTWAIT);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (n > 0)
			got += n;
	}
	return 0;
}

/*
 * The client's half of the upgrade (switch/upgrade.c, docs/protocol.md 2):
 * a provider listener on the TCP connection's local address, CLIENT_HELLO
 * with a fresh key and the echo magic on TCP, the magic's echo back (the
 * server writes no hello on TCP), then the server's provider connection
 * carrying the key and what its hello would have said. The cases send
 * SETUP themselves (send_setup: then the server's SETUP, then our SWITCH).
 */
static int peer_open(struct peer *p, uint16_t port)
{
	struct sockaddr_in srv = { .sin_family = AF_INET,
				   .sin_port = htons(port) };
	socklen_t sl = sizeof(p->local);
	uint8_t echo[HOSTILE_ECHO_MAGIC_LEN];
	uint8_t first[HOSTILE_FIRST_LEN];
	uint64_t end;
	int r, i;

	memset(p, 0, sizeof(*p));
	p->port = port;
	p->tcp = socket(AF_INET, SOCK_STREAM, 0);
	srv.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	p->local = srv;
	p->local.sin_port = 0;
	if (p->tcp < 0 || bind(p->tcp, (struct sockaddr *)&p->local, sl) ||
	    getsockname(p->tcp, (struct sockaddr *)&p->local, &sl))
		return fail(p, "TCP socket: %s", strerror(errno));
	r = mod.ops.cq_create(mod.prov, 64, &p->cq);
	if (r)
		return fail(p, "cq_create: %s", sdp_strerror(r));
	p->bufs = calloc(NRECV + 1, MSG_SIZE * 2);
	if (!p->bufs)
		return fail(p, "out of memory");
	r = mod.ext.register_memory(mod.prov, p->bufs,
				    (size_t)(NRECV + 1) * MSG_SIZE * 2,
				    SDP_ACCESS_LOCAL_WRITE, &p->mr);
	if (r)
		return fail(p, "register_memory: %s", sdp_strerror(r));
	if (connect(p->tcp, (struct sockaddr *)&srv, sizeof(srv)))
		return fail(p, "connect to port %u: %s", port,
			    strerror(errno));
	/* bound to this TCP connection, as the switch's own listener is:
	 * the server's provider connect proves itself to it and it to the
	 * server */
	r = mod.ops.listen_bound(mod.prov, p->tcp, 4, &p->pl);
	if (r)
		return fail(p, "provider listen: %s", sdp_strerror(r));
	if (getrandom(p->key, sizeof(p->key), 0) != sizeof(p->key))
		return fail(p, "getrandom: %s", strerror(errno));
	/* the hello, and the program's first bytes behind it */
	hostile_first(first, p->key, MSG_SIZE, NRECV);
	if (send(p->tcp, first, sizeof(first), MSG_NOSIGNAL) != sizeof(first))
		return fail(p, "sending CLIENT_HELLO: %s", strerror(errno));
	p->tcp_tx = HOSTILE_ECHO_MAGIC_LEN;
	r = read_full(p->tcp, echo, sizeof(echo), 3000);
	if (r || memcmp(echo, HOSTILE_ECHO_MAGIC, sizeof(echo)))
		return fail(p, "the magic's echo is not the first the server sent");
	p->tcp_rx = sizeof(echo);
	end = now_ms() + 3000;
	for (;;) {
		struct sdp_conn_req *req;
		struct sdp_connect_priv_hello cp;
		size_t plen = sizeof(cp);

		r = mod.ops.get_request(p->pl, &req, &cp, &plen);
		if (r == 0) {
			if (plen != sizeof(cp) ||
			    memcmp(cp.base.key, p->key, 16) ||
			    cp.base.version != SDP_PROTO_VERSION ||
			    cp.base.flags != SDP_CONNECT_F_HELLO) {
				mod.ops.reject(req);
				return fail(p, "the server's provider connection lacks the key or the hello's fields");
			}
			p->srv_msg_size = cp.msg_size;
			p->srv_credits = cp.recv_credits;
			p->srv_can_read = cp.hello_flags &
					  SDP_HELLO_F_RDMA_READ;
			r = mod.ops.accept(req, p->cq, NULL, 0, p, &p->ep);
			if (r < 0)
				return fail(p, "accept: %s", sdp_strerror(r));
			break;
		}
		if (r != -EAGAIN || now_ms() > end)
			return fail(p, "no provider connection from the server: %s",
				    sdp_strerror(r));
		usleep(1000);
	}
	mod.ops.listener_close(p->pl);
	p->pl = NULL;
	for (i = 0; i < NRECV; i++) {
		struct sdp_sge sge = { p->bufs + i * MSG_SIZE, MSG_SIZE,
				       p->mr };

		r = mod.ops.post_recv(p->ep, &sge, 1, i);
		if (r < 0)
			return fail(p, "post_recv: %s", sdp_strerror(r));
	}
	return 0;
}

/* Sends one control message, header as given; wire_len < 0: its true
 * length, else exactly wire_len bytes of what was built. */
static int send_raw(struct peer *p, const struct sdp_msg_hdr *h,
		    const void *body, size_t blen, const void *pay,
		    size_t plen, long wire_len)
{
	uint8_t *b = p->bufs + (size_t)NRECV * MSG_SIZE * 2;
	size_t n = sizeof(*h) + blen + plen;
	struct sdp_sge sge;
	int r, tries = 0;

	if (n > (size_t)MSG_SIZE * 2)
		return fail(p, "test message too large");
	memcpy(b, h, sizeof(*h));
	if (blen)	/* body and pay may be NULL when empty */
		memcpy(b + sizeof(*h), body, blen);
	if (plen)
		memcpy(b + sizeof(*h) + blen, pay, plen);
	sge.addr = b;
	sge.length = wire_len >= 0 ? (size_t)wire_len : n;
	sge.mr = p->mr;
	do {
		r = mod.ops.post_send(p->ep, &sge, 1, 1000 + p->tx_seq, 0);
		/* a queued send copies later: wait until it went */
		if (r == SDP_PENDING) {
			struct sdp_completion c;
			uint64_t end = now_ms() + 1000;

			while (now_ms() < end) {
				if (mod.ops.cq_poll(p->cq, &c, 1) == 1 &&
				    c.op == SDP_OP_SEND) {
					r = c.status;
					break;
				}
				usleep(200);
			}
		}
	} while (r == -EAGAIN && ++tries < 100);
	if (r < 0)
		return fail(p, "post_send: %s", sdp_strerror(r));
	p->tx_seq++;
	return 0;
}

static int send_msg(struct peer *p, uint8_t type, uint8_t flags,
		    uint16_t credits, const void *body, size_t blen,
		    const void *pay, size_t plen)
{
	struct sdp_msg_hdr h = { .type = type, .flags = flags,
				 .credits = credits, .len = (uint32_t)plen,
				 .seq = p->tx_seq };

	return send_raw(p, &h, body, blen, pay, plen, -1);
}

/* Our SETUP with flags, then the server's (its commitment,
 * docs/protocol.md 2.5), waited for up to 3 s. */
static int setup_swap(struct peer *p, uint32_t flags)
{
	struct sdp_msg_setup su = { .msg_size = MSG_SIZE,
				    .recv_credits = NRECV, .flags = flags };
	uint64_t end;
	int r;

	if (send_msg(p, SDP_MSG_SETUP, 0, 0, &su, sizeof(su), NULL, 0))
		return -1;
	end = now_ms() + 3000;
	while (!p->got_setup && now_ms() < end) {
		r = peer_poll(p);
		if (r < 0)
			return fail(p, "provider connection lost before SETUP: %s",
				    sdp_strerror(r));
		usleep(500);
	}
	if (!p->got_setup)
		return fail(p, "the server sent no SETUP");
	return 0;
}

/* Our SWITCH: our bytes on TCP end after the magic; the first message of
 * the stream after it rings a doorbell, as the switch does. */
static int send_switch(struct peer *p)
{
	struct sdp_msg_switch sw = { .tcp_bytes = p->tcp_tx };

	if (send_msg(p, SDP_MSG_SWITCH, 0, 0, &sw, sizeof(sw), NULL, 0))
		return -1;
	send(p->tcp, "\x44", 1, MSG_NOSIGNAL);
	return 0;
}

static int send_setup(struct peer *p)
{
	return setup_swap(p, 0) ?: send_switch(p);
}

/* The same, telling the server we take XOFFER (SDP_SETUP_F_XSLOT) and can
 * RdmaRead, and finding both transfer slots (the SharedArea extension). */
static int send_setup_xs(struct peer *p)
{
	static const struct sdp_guid g = SDP_GUID_SHARED_AREA;
	sdp_shared_area_fn fn = NULL;
	void *mine, *peers;
	size_t len;

	if (mod.ops.ioctl(mod.prov, SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER,
			  &g, sizeof(g), &fn, sizeof(fn)) || !fn ||
	    fn(p->ep, &mine, &peers, &len) ||
	    len < sizeof(struct sdp_xslot))
		return fail(p, "SKIP: the provider has no shared area");
	p->my_xs = mine;
	p->srv_xs = peers;
	if (setup_swap(p, SDP_SETUP_F_RDMA_READ | SDP_SETUP_F_XSLOT))
		return -1;
	if (!(p->srv_setup.flags & SDP_SETUP_F_XSLOT))
		return fail(p, "SKIP: the server has no transfer slot");
	return send_switch(p);
}

/* SETUP and the server's, but no SWITCH. */
static int send_setup_only(struct peer *p)
{
	struct sdp_msg_setup su = { .msg_size = MSG_SIZE,
				    .recv_credits = NRECV };

	return send_msg(p, SDP_MSG_SETUP, 0, 0, &su, sizeof(su), NULL, 0);
}

static int send_magic(struct peer *p)
{
	return send_msg(p, SDP_MSG_DATA, 0, 0, NULL, 0, HOSTILE_ECHO_MAGIC,
			HOSTILE_ECHO_MAGIC_LEN);
}

/* ---- the cases ----------------------------------------------------------- */

static int c_bad_type(struct peer *p)
{
	struct sdp_msg_hdr h = { .type = 0x7f, .len = 4, .seq = p->tx_seq };

	return send_setup(p) ?: send_raw(p, &h, NULL, 0, "abcd", 4, -1);
}

static int c_type_zero(struct peer *p)
{
	struct sdp_msg_hdr h = { .type = 0, .seq = p->tx_seq };

	return send_setup(p) ?: send_raw(p, &h, NULL, 0, NULL, 0, -1);
}

static int c_unknown_flags(struct peer *p)
{
	return send_setup(p) ?: send_msg(p, SDP_MSG_DATA, 0x80, 0, NULL, 0,
					 HOSTILE_ECHO_MAGIC, 8);
}

static int c_reserved(struct peer *p)
{
	struct sdp_msg_hdr h = { .type = SDP_MSG_DATA, .len = 8,
				 .seq = p->tx_seq, .reserved = 0xdead };

	return send_setup(p) ?: send_raw(p, &h, NULL, 0,
					 HOSTILE_ECHO_MAGIC, 8, -1);
}

static int c_truncated(struct peer *p)
{
	struct sdp_msg_hdr h = { .type = SDP_MSG_DATA, .len = 8,
				 .seq = p->tx_seq };

	return send_setup(p) ?: send_raw(p, &h, NULL, 0, NULL, 0, 10);
}

static int c_len_mismatch(struct peer *p)
{
	struct sdp_msg_hdr h = { .type = SDP_MSG_DATA, .len = 100,
				 .seq = p->tx_seq };

	return send_setup(p) ?: send_raw(p, &h, NULL, 0,
					 HOSTILE_ECHO_MAGIC, 8, -1);
}

static int c_len_huge(struct peer *p)
{
	struct sdp_msg_hdr h = { .type = SDP_MSG_DATA, .len = 0xfffffff8u,
				 .seq = p->tx_seq };

	return send_setup(p) ?: send_raw(p, &h, NULL, 0,
					 HOSTILE_ECHO_MAGIC, 8, 24);
}

static int c_oversized(struct peer *p)
{
	static uint8_t big[MSG_SIZE + 64];

	memcpy(big, HOSTILE_ECHO_MAGIC, 8);
	return send_setup(p) ?: send_msg(p, SDP_MSG_DATA, 0, 0, NULL, 0, big,
					 sizeof(big) - 16);
}

static int c_bad_seq(struct peer *p)
{
	if (send_setup(p))
		return -1;
	p->tx_seq += 5;
	return send_magic(p);
}

static int c_no_setup(struct peer *p)
{
	return send_magic(p);
}

static int c_second_setup(struct peer *p)
{
	return send_setup(p) ?: send_magic(p) ?: send_setup(p);
}

/* Our SETUP, and the server's after it (it is committed), waited for up
 * to 3 s; no SWITCH. */
static int setup_committed(struct peer *p)
{
	uint64_t end = now_ms() + 3000;

	if (send_setup_only(p))
		return -1;
	while (!p->got_setup && now_ms() < end) {
		if (peer_poll(p) < 0)
			return fail(p, "provider connection lost before SETUP");
		usleep(500);
	}
	if (!p->got_setup)
		return fail(p, "the server sent no SETUP");
	return 0;
}

/* Stream bytes after SETUP with no SWITCH saying where the TCP ones end,
 * once the server committed (its SETUP came). */
static int c_data_before_switch(struct peer *p)
{
	return setup_committed(p) ?: send_magic(p);
}

/* A SWITCH claiming fewer TCP bytes than the server already read. */
static int c_switch_behind(struct peer *p)
{
	struct sdp_msg_switch sw = { .tcp_bytes = 3 };

	return setup_committed(p) ?:
	       send_msg(p, SDP_MSG_SWITCH, 0, 0, &sw, sizeof(sw), NULL, 0);
}

static int c_setup_mismatch(struct peer *p)
{
	struct sdp_msg_setup su = { .msg_size = MSG_SIZE * 2,
				    .recv_credits = NRECV };

	return send_msg(p, SDP_MSG_SETUP, 0, 0, &su, sizeof(su), NULL, 0);
}

static int c_setup_staging_ro(struct peer *p)
{
	struct sdp_msg_setup su = { .msg_size = MSG_SIZE,
				    .recv_credits = NRECV };

	su.staging.addr = (uintptr_t)p->bufs;
	su.staging.length = 4096;
	su.staging.key = 1;
	su.staging.access = SDP_ACCESS_REMOTE_READ;
	su.staging.tag = 1;
	return send_msg(p, SDP_MSG_SETUP, 0, 0, &su, sizeof(su), NULL, 0);
}

static int c_credits_beyond(struct peer *p)
{
	return send_setup(p) ?: send_msg(p, SDP_MSG_CREDIT, 0, 1000, NULL, 0,
					 NULL, 0);
}

/* More messages than the server has receive buffers posted for us. */
/*
 * More messages than the server granted credits for. The server gives a
 * credit back for each message it took, so a burst alone may never outrun
 * it; but its returns travel in its messages, each of which costs one of
 * our buffers, and we never give those back (every header here says
 * credits 0): after at most our NRECV messages the server can return
 * nothing more, and a message beyond what it had returned by then is an
 * overrun, however fast it takes them. A failed send means the server
 * closed the connection (the check that follows sees the close).
 */
static int c_credit_overrun(struct peer *p)
{
	struct sdp_msg_wake w = { 0 };
	int i;

	if (send_setup(p))
		return -1;
	for (i = 0; i < 4 * NRECV * NRECV; i++) {
		if (send_msg(p, SDP_MSG_WAKE_ME, 0, 0, &w, sizeof(w), NULL,
			     0))
			return 0;
		/* a server asleep on TCP must look at the ring */
		if (i % NRECV == NRECV - 1)
			send(p->tcp, "\x44", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	return 0;
}

static int c_data_after_fin(struct peer *p)
{
	return send_setup(p) ?: send_magic(p) ?:
	       send_msg(p, SDP_MSG_FIN, 0, 0, NULL, 0, NULL, 0) ?:
	       send_msg(p, SDP_MSG_DATA, 0, 0, NULL, 0, "late", 4);
}

static int c_oob_two(struct peer *p)
{
	return send_setup(p) ?: send_magic(p) ?:
	       send_msg(p, SDP_MSG_OOB, 0, 0, NULL, 0, "!!", 2);
}

static int c_wake_reserved(struct peer *p)
{
	struct sdp_msg_wake w = { .seen_seq = 0, .reserved = 3 };

	return send_setup(p) ?: send_msg(p, SDP_MSG_WAKE_ME, 0, 0, &w,
					 sizeof(w), NULL, 0);
}

/* RDATA whose descriptor names no registration of ours. */
static int c_rdata_forged(struct peer *p)
{
	struct sdp_msg_rdata rd = { .xfer_id = 1, .total = 4096 };

	rd.region.addr = (uintptr_t)p->bufs;
	rd.region.length = 4096;
	rd.region.key = 200;
	rd.region.access = SDP_ACCESS_REMOTE_READ;
	rd.region.tag = 77;
	return send_setup(p) ?: send_magic(p) ?:
	       send_msg(p, SDP_MSG_RDATA, 0, 0, &rd, sizeof(rd), NULL, 0);
}

/* RDATA naming a real registration but claiming more than it covers. */
static int c_rdata_outside(struct peer *p)
{
	struct sdp_msg_rdata rd = { .xfer_id = 1 };
	struct sdp_rdma_desc d;
	struct sdp_rmr *rmr;
	int r;

	r = mod.ext.register_rdma_memory(p->ep, p->bufs, 4096,
					 SDP_ACCESS_REMOTE_READ, &d, &rmr);
	if (r)
		return fail(p, "register_rdma_memory: %s", sdp_strerror(r));
	rd.region = d;
	rd.region.length = 1 << 20;
	rd.total = 1 << 20;
	return send_setup(p) ?: send_magic(p) ?:
	       send_msg(p, SDP_MSG_RDATA, 0, 0, &rd, sizeof(rd), NULL, 0);
}

static int c_rdata_total(struct peer *p)
{
	struct sdp_msg_rdata rd = { .xfer_id = 1, .total = 8192 };

	rd.region.length = 4096;
	rd.region.access = SDP_ACCESS_REMOTE_READ;
	return send_setup(p) ?: send_magic(p) ?:
	       send_msg(p, SDP_MSG_RDATA, 0, 0, &rd, sizeof(rd), NULL, 0);
}

/* The set-up, for a case about the server's staging ring: SKIP when it
 * offered none. */
static int setup_staged(struct peer *p)
{
	if (send_setup(p))
		return -1;
	if (!p->srv_setup.staging.length)
		return fail(p, "SKIP: the server offered no staging ring");
	return 0;
}

/* The magic, then one WDATA message. */
static int send_wdata(struct peer *p, const struct sdp_msg_wdata *wd)
{
	return send_magic(p) ?:
	       send_msg(p, SDP_MSG_WDATA, 0, 0, wd, sizeof(*wd), NULL, 0);
}

static int c_wdata_beyond(struct peer *p)
{
	struct sdp_msg_wdata wd = { .offset = 0 };

	if (setup_staged(p))
		return -1;
	wd.bytes = p->srv_setup.staging.length + 1;
	return send_wdata(p, &wd);
}

static int c_wdata_offset(struct peer *p)
{
	struct sdp_msg_wdata wd = { .offset = 4096, .bytes = 100 };

	return setup_staged(p) ?: send_wdata(p, &wd);
}

/* A byte count that wraps offset + bytes around 2^64 while some staging
 * bytes are still unread: must not pass the bounds checks. */
static int c_wdata_wrap(struct peer *p)
{
	struct sdp_msg_wdata wd = { .offset = 0, .bytes = 16 };

	if (setup_staged(p) || send_wdata(p, &wd))
		return -1;
	wd.offset = 16;
	wd.bytes = 0ull - 8;
	return send_msg(p, SDP_MSG_WDATA, 0, 0, &wd, sizeof(wd), NULL, 0);
}

static int c_staging_free(struct peer *p)
{
	struct sdp_msg_ack a = { .bytes = 100 };

	return send_setup(p) ?: send_msg(p, SDP_MSG_STAGING_FREE, 0, 0, &a,
					 sizeof(a), NULL, 0);
}

static int c_xfer_done(struct peer *p)
{
	struct sdp_msg_ack a = { .xfer_id = 1, .bytes = 100 };

	return send_setup(p) ?: send_msg(p, SDP_MSG_XFER_DONE, 0, 0, &a,
					 sizeof(a), NULL, 0);
}

static int c_tcp_garbage(struct peer *p)
{
	if (send_setup(p) || send_magic(p))
		return -1;
	usleep(20000);
	if (send(p->tcp, "X", 1, MSG_NOSIGNAL) != 1)
		return fail(p, "TCP send: %s", strerror(errno));
	return 0;
}

static int wait_closed(struct peer *p, int ms);

/* ---- the transfer slot (docs/protocol.md 4.10) --------------------------
 * Run against a server started with SDP_XSLOT_CLAIM_MS, SDP_SPIN_US and
 * SDP_XSLOT_BLOCK_US raised or lowered by run-hostile.sh, so that every
 * window the attacks need is wide and every bound short. */

#define XS_SEQ(w) ((uint32_t)((w) >> 32))
#define XS_ST(w) ((uint32_t)(w))
#define SLOT_MS 3000

/* Offers len bytes in our slot with XOFFER 1, the slot's words as given
 * (honest: state (1, OFFERED), reserved 0). */
static int offer(struct peer *p, size_t len, uint64_t state,
		 uint64_t reserved)
{
	struct sdp_msg_rdata rd = { .xfer_id = 1, .total = len };
	struct sdp_xslot *x = p->my_xs;
	struct sdp_rdma_desc d;
	size_t i;
	int r;

	p->obuf = malloc(len);
	if (!p->obuf)
		return fail(p, "out of memory");
	for (i = 0; i < len; i++)
		p->obuf[i] = (uint8_t)(i * 7);
	r = mod.ext.register_rdma_memory(p->ep, p->obuf, len,
					 SDP_ACCESS_REMOTE_READ, &d, &p->ormr);
	if (r)
		return fail(p, "register_rdma_memory: %s", sdp_strerror(r));
	rd.region = d;
	atomic_store(&x->consumed, 0);
	atomic_store(&x->push, 0);
	x->reserved = reserved;
	atomic_store(&x->state, state);
	if (send_msg(p, SDP_MSG_XOFFER, 0, 0, &rd, sizeof(rd), NULL, 0))
		return -1;
	send(p->tcp, "\x44", 1, MSG_NOSIGNAL);
	return 0;
}

/* The server offers its echo of our offer: sets up the connection,
 * offers len bytes, waits until the server took them all, then until its
 * own offer stands in its slot (spinning: it waits SDP_XSLOT_BLOCK_US for
 * a claim). Returns 0 and the offer's sequence number in *seq. */
static int server_offers(struct peer *p, uint32_t *seq)
{
	uint64_t end, w;
	unsigned long n = 0;

	if (send_setup_xs(p) || send_magic(p) ||
	    offer(p, 96 * 1024, SDP_XS_WORD(1, SDP_XS_OFFERED), 0))
		return -1;
	end = now_ms() + SLOT_MS;
	while (atomic_load(&p->my_xs->state) !=
	       SDP_XS_WORD(1, SDP_XS_OFFERED) ||
	       atomic_load(&p->my_xs->consumed) != (uint64_t)96 * 1024) {
		if (now_ms() > end)
			return fail(p, "the server did not take our offer (state 0x%llx, %llu bytes)",
				    (unsigned long long)atomic_load(&p->my_xs->state),
				    (unsigned long long)atomic_load(&p->my_xs->consumed));
		if (!(++n & 1023))
			peer_poll(p);
	}
	atomic_store(&p->my_xs->state, SDP_XS_WORD(1, SDP_XS_IDLE));
	for (;;) {
		w = atomic_load(&p->srv_xs->state);
		if (XS_SEQ(w) && XS_ST(w) == SDP_XS_OFFERED)
			break;
		if (now_ms() > end)
			return fail(p, "the server offered nothing in its slot (state 0x%llx)",
				    (unsigned long long)w);
		if (!(++n & 1023))
			peer_poll(p);
	}
	*seq = XS_SEQ(w);
	return 0;
}

/* Claims the server's offer seq as its receiver would. */
static int claim(struct peer *p, uint32_t seq)
{
	uint64_t w = SDP_XS_WORD(seq, SDP_XS_OFFERED);

	if (!atomic_compare_exchange_strong(&p->srv_xs->state, &w,
					    SDP_XS_WORD(seq, SDP_XS_CLAIMED)))
		return fail(p, "the server took its offer back before our claim (0x%llx)",
			    (unsigned long long)w);
	return 0;
}

/* Claims and asks for a push of [off, off + len) into sink. */
static int ask_push(struct peer *p, uint32_t seq, uint64_t off, uint64_t len,
		    const struct sdp_rdma_desc *sink)
{
	struct sdp_xslot *x = p->srv_xs;

	if (claim(p, seq))
		return -1;
	memcpy(&x->sink, sink, sizeof(*sink));
	x->push_off = off;
	x->push_len = len;
	atomic_store(&x->push, SDP_XS_WORD(seq, SDP_XP_REQ));
	return 0;
}

/* A real sink of ours, remote-write. */
static int make_sink(struct peer *p, size_t len)
{
	int r;

	p->sbuf = calloc(1, len);
	if (!p->sbuf)
		return fail(p, "out of memory");
	r = mod.ext.register_rdma_memory(p->ep, p->sbuf, len,
					 SDP_ACCESS_REMOTE_WRITE, &p->sink,
					 &p->smr);
	return r ? fail(p, "register_rdma_memory: %s", sdp_strerror(r)) : 0;
}

/* The server as sender: everything below is written into its slot. */

static int c_slot_state_garbage(struct peer *p)
{
	uint32_t q = 0;

	if (server_offers(p, &q))
		return -1;
	atomic_store(&p->srv_xs->state, SDP_XS_WORD(q, 7));
	return 0;
}

static int c_slot_state_seq(struct peer *p)
{
	uint32_t q = 0;
	uint64_t w;

	if (server_offers(p, &q))
		return -1;
	w = SDP_XS_WORD(q, SDP_XS_OFFERED);
	if (!atomic_compare_exchange_strong(&p->srv_xs->state, &w,
					    SDP_XS_WORD(q + 5,
							SDP_XS_CLAIMED)))
		return fail(p, "the server took its offer back first");
	return 0;
}

/* Claimed and never given back: the server must not wait forever. */
static int c_slot_claim_forever(struct peer *p)
{
	uint32_t q = 0;

	return server_offers(p, &q) ?: claim(p, q);
}

static int c_slot_count_beyond(struct peer *p)
{
	uint32_t q = 0;

	if (server_offers(p, &q) || claim(p, q))
		return -1;
	atomic_store(&p->srv_xs->consumed, 1ull << 40);
	atomic_store(&p->srv_xs->state, SDP_XS_WORD(q, SDP_XS_OFFERED));
	return 0;
}

static int c_slot_count_back(struct peer *p)
{
	uint64_t t;
	uint32_t q = 0;

	if (server_offers(p, &q) || claim(p, q))
		return -1;
	atomic_store(&p->srv_xs->consumed, 4096);
	atomic_store(&p->srv_xs->state, SDP_XS_WORD(q, SDP_XS_OFFERED));
	/* let the server see the count, then claim again and lower it */
	t = now_ms() + 20;
	while (now_ms() < t)
		;
	if (claim(p, q))
		return -1;
	atomic_store(&p->srv_xs->consumed, 1024);
	atomic_store(&p->srv_xs->state, SDP_XS_WORD(q, SDP_XS_OFFERED));
	return 0;
}

static int c_slot_push_range(struct peer *p)
{
	uint32_t q = 0;

	return server_offers(p, &q) ?: make_sink(p, 65536) ?:
	       ask_push(p, q, 1ull << 40, 4096, &p->sink);
}

/* off + len wraps 2^64 into the offer */
static int c_slot_push_wrap(struct peer *p)
{
	uint32_t q = 0;

	return server_offers(p, &q) ?: make_sink(p, 65536) ?:
	       ask_push(p, q, 4096, 0ull - 2048, &p->sink);
}

static int c_slot_push_zero(struct peer *p)
{
	uint32_t q = 0;

	return server_offers(p, &q) ?: make_sink(p, 65536) ?:
	       ask_push(p, q, 0, 0, &p->sink);
}

static int c_slot_sink_short(struct peer *p)
{
	struct sdp_rdma_desc d;
	uint32_t q = 0;

	if (server_offers(p, &q) || make_sink(p, 65536))
		return -1;
	d = p->sink;
	d.length = 4096;
	return ask_push(p, q, 0, 8192, &d);
}

static int c_slot_sink_forged(struct peer *p)
{
	struct sdp_rdma_desc d;
	uint32_t q = 0;

	if (server_offers(p, &q) || make_sink(p, 65536))
		return -1;
	d = p->sink;
	d.tag ^= 0x5a5a;
	return ask_push(p, q, 0, 4096, &d);
}

/* A sink we registered read-only. */
static int c_slot_sink_ro(struct peer *p)
{
	struct sdp_rdma_desc d;
	struct sdp_rmr *rmr;
	uint32_t q = 0;
	int r;

	if (server_offers(p, &q) || make_sink(p, 65536))
		return -1;
	r = mod.ext.register_rdma_memory(p->ep, p->sbuf, 65536,
					 SDP_ACCESS_REMOTE_READ, &d, &rmr);
	if (r)
		return fail(p, "register_rdma_memory: %s", sdp_strerror(r));
	return ask_push(p, q, 0, 4096, &d);
}

static int c_slot_push_word(struct peer *p)
{
	uint32_t q = 0;

	if (server_offers(p, &q) || claim(p, q))
		return -1;
	atomic_store(&p->srv_xs->push, SDP_XS_WORD(q, 9));
	return 0;
}

static int c_slot_reserved(struct peer *p)
{
	uint32_t q = 0;

	if (server_offers(p, &q))
		return -1;
	__atomic_store_n(&p->srv_xs->reserved, 0xbadull, __ATOMIC_RELAXED);
	return 0;
}

/* We as sender: our own slot lies to the server claiming our offer. */

static int c_xoffer_forged(struct peer *p)
{
	struct sdp_msg_rdata rd = { .xfer_id = 1, .total = 4096 };

	rd.region.addr = (uintptr_t)p->bufs;
	rd.region.length = 4096;
	rd.region.key = 200;
	rd.region.access = SDP_ACCESS_REMOTE_READ;
	rd.region.tag = 77;
	if (send_setup_xs(p) || send_magic(p))
		return -1;
	atomic_store(&p->my_xs->state, SDP_XS_WORD(1, SDP_XS_OFFERED));
	return send_msg(p, SDP_MSG_XOFFER, 0, 0, &rd, sizeof(rd), NULL, 0);
}

static int c_xoffer_total(struct peer *p)
{
	struct sdp_msg_rdata rd = { .xfer_id = 1, .total = 8192 };

	rd.region.length = 4096;
	rd.region.access = SDP_ACCESS_REMOTE_READ;
	return send_setup_xs(p) ?: send_magic(p) ?:
	       send_msg(p, SDP_MSG_XOFFER, 0, 0, &rd, sizeof(rd), NULL, 0);
}

/* XOFFER with nothing offered in the slot: must not wait for it */
static int c_xslot_never_offered(struct peer *p)
{
	return send_setup_xs(p) ?: send_magic(p) ?: offer(p, 4096, 0, 0);
}

static int c_xslot_state_garbage(struct peer *p)
{
	return send_setup_xs(p) ?: send_magic(p) ?:
	       offer(p, 4096, SDP_XS_WORD(1, 9), 0);
}

static int c_xslot_claimed(struct peer *p)
{
	return send_setup_xs(p) ?: send_magic(p) ?:
	       offer(p, 4096, SDP_XS_WORD(1, SDP_XS_CLAIMED), 0);
}

static int c_xslot_reserved(struct peer *p)
{
	return send_setup_xs(p) ?: send_magic(p) ?:
	       offer(p, 4096, SDP_XS_WORD(1, SDP_XS_OFFERED), 0xbad);
}

/* A read of 200 KiB asks us for a push (SDP_XSLOT_SPLIT): waits for the
 * request and answers it with the word given (0: CAS to STARTED). */
static int push_req(struct peer *p)
{
	uint64_t end, w;
	unsigned long n = 0;

	if (send_setup_xs(p) || send_magic(p) ||
	    offer(p, 200 * 1024, SDP_XS_WORD(1, SDP_XS_OFFERED), 0))
		return -1;
	end = now_ms() + SLOT_MS;
	for (;;) {
		w = SDP_XS_WORD(1, SDP_XP_REQ);
		if (atomic_compare_exchange_strong(&p->my_xs->push, &w,
						   SDP_XS_WORD(1,
							SDP_XP_STARTED)))
			return 0;
		if (now_ms() > end)
			return fail(p, "the server asked for no push (push 0x%llx, %llu bytes taken)",
				    (unsigned long long)w,
				    (unsigned long long)atomic_load(
					    &p->my_xs->consumed));
		if (!(++n & 1023))
			peer_poll(p);
	}
}

static int c_xslot_push_garbage(struct peer *p)
{
	if (push_req(p))
		return -1;
	atomic_store(&p->my_xs->push, SDP_XS_WORD(1, 9));
	return 0;
}

/* Started and never finished: the server must not wait forever. */
static int c_xslot_push_stuck(struct peer *p)
{
	return push_req(p);
}

/* The offer taken back while the server copies under its claim. */
static int c_xslot_flip(struct peer *p)
{
	if (push_req(p))
		return -1;
	atomic_store(&p->my_xs->state, SDP_XS_WORD(1, SDP_XS_CANCELLED));
	atomic_store(&p->my_xs->push, SDP_XS_WORD(1, SDP_XP_FAILED));
	return 0;
}

/* Both slots written after the connection closed: the server notices
 * nothing, and our next connection's offers work. Checks itself. */
static int c_slot_after_close(struct peer *p)
{
	struct sdp_xslot *mine, *srv;
	struct peer p2;
	uint32_t q = 0;
	int r;

	if (server_offers(p, &q))
		return -1;
	mine = p->my_xs;
	srv = p->srv_xs;
	send_msg(p, SDP_MSG_FIN, 0, 0, NULL, 0, NULL, 0);
	shutdown(p->tcp, SHUT_WR);
	send(p->tcp, "\x44", 1, MSG_NOSIGNAL);
	if (wait_closed(p, CLOSE_BOUND_MS) < 0)
		return fail(p, "the server did not close after our FIN");
	usleep(50000);
	/* the endpoint is still ours: its regions are still mapped */
	atomic_store(&srv->state, SDP_XS_WORD(q, SDP_XS_CLAIMED));
	atomic_store(&srv->push, SDP_XS_WORD(q, SDP_XP_REQ));
	srv->push_off = 1ull << 62;
	srv->push_len = ~0ull;
	srv->reserved = ~0ull;
	atomic_store(&mine->state, SDP_XS_WORD(1, 9));
	atomic_store(&mine->push, SDP_XS_WORD(1, SDP_XP_STARTED));
	mine->reserved = ~0ull;
	usleep(100000);
	/* the next connection from this process */
	if (peer_open(&p2, p->port)) {
		r = fail(p, "the next connection failed: %s", p2.err);
	} else if (server_offers(&p2, &q)) {
		r = fail(p, "the next connection: %s", p2.err);
	} else {
		r = 0;
	}
	peer_close(&p2);
	return r;
}

struct hcase {
	const char *name;
	int (*run)(struct peer *p);
	const char *reason;	/* expected in the server's log line; NULL:
				 * run() checks, the server must log no
				 * closing and live */
	bool on_tcp;		/* the server was not committed yet: it
				 * gives the upgrade up and the connection
				 * goes on, on TCP (bad-hello), not closed */
};

static const struct hcase cases[] = {
	{ "bad_type", c_bad_type, "unknown message type 127", false },
	{ "type_zero", c_type_zero, "unknown message type 0", false },
	{ "unknown_flags", c_unknown_flags, "unknown flags 0x80", false },
	{ "reserved_field", c_reserved, "reserved header field", false },
	{ "truncated", c_truncated, "shorter than its header", false },
	{ "length_mismatch", c_len_mismatch, "not what arrived", false },
	{ "length_huge", c_len_huge, "not what arrived", false },
	{ "oversized", c_oversized, "longer than the receive buffer", false },
	{ "wrong_seq", c_bad_seq, "sequence 7 where 2 was due", false },
	{ "no_setup", c_no_setup, "first message is not SETUP", true },
	{ "second_setup", c_second_setup, "second SETUP", false },
	{ "setup_mismatch", c_setup_mismatch, "SETUP differs", true },
	{ "setup_staging_ro", c_setup_staging_ro, "staging ring", true },
	{ "credits_beyond", c_credits_beyond, "credit return beyond", false },
	{ "credit_overrun", c_credit_overrun, "credit", false },
	{ "data_after_fin", c_data_after_fin, "DATA after FIN", false },
	{ "oob_two_bytes", c_oob_two, "OOB carries 2 bytes", false },
	{ "wake_reserved", c_wake_reserved, "malformed WAKE_ME", false },
	{ "rdata_forged", c_rdata_forged, "RDATA", false },
	{ "rdata_outside", c_rdata_outside, "RDATA", false },
	{ "rdata_total", c_rdata_total, "RDATA total", false },
	{ "wdata_beyond", c_wdata_beyond, "WDATA outside", false },
	{ "wdata_offset", c_wdata_offset, "WDATA outside", false },
	{ "wdata_wrap", c_wdata_wrap, "WDATA outside", false },
	{ "staging_free", c_staging_free, "STAGING_FREE beyond", false },
	{ "xfer_done", c_xfer_done, "XFER_DONE for no pending", false },
	{ "tcp_garbage", c_tcp_garbage, "on TCP while carried", false },
	{ "data_before_switch", c_data_before_switch, "before SWITCH", false },
	{ "switch_behind", c_switch_behind,
	  "SWITCH before bytes already read", false },
};

/* hostile_peer slot: against a server with short slot bounds */
static const struct hcase slot_cases[] = {
	{ "xoffer_total", c_xoffer_total, "malformed XOFFER", false },
	{ "xoffer_forged", c_xoffer_forged, "XOFFER region refused", false },
	{ "xslot_never_offered", c_xslot_never_offered,
	  "older than the offer", false },
	{ "xslot_state_garbage", c_xslot_state_garbage,
	  "transfer slot state the sender may not set", false },
	{ "xslot_claimed", c_xslot_claimed, "claimed by someone else", false },
	{ "xslot_reserved", c_xslot_reserved, "reserved word not zero", false },
	{ "xslot_push_garbage", c_xslot_push_garbage,
	  "push in a state the sender may not set", false },
	{ "xslot_push_stuck", c_xslot_push_stuck,
	  "push started but not finished", false },
	{ "xslot_flip", c_xslot_flip, "state changed during our claim", false },
	{ "slot_state_garbage", c_slot_state_garbage,
	  "state the receiver may not set", false },
	{ "slot_state_seq", c_slot_state_seq,
	  "state the receiver may not set", false },
	{ "slot_claim_forever", c_slot_claim_forever,
	  "claimed for longer", false },
	{ "slot_count_beyond", c_slot_count_beyond,
	  "count beyond the offer", false },
	{ "slot_count_back", c_slot_count_back, "count went back", false },
	{ "slot_push_range", c_slot_push_range,
	  "push range outside the offer", false },
	{ "slot_push_wrap", c_slot_push_wrap,
	  "push range outside the offer", false },
	{ "slot_push_zero", c_slot_push_zero,
	  "push range outside the offer", false },
	{ "slot_sink_short", c_slot_sink_short,
	  "push longer than its sink", false },
	{ "slot_sink_forged", c_slot_sink_forged,
	  "sink refused by the provider", false },
	{ "slot_sink_ro", c_slot_sink_ro,
	  "sink refused by the provider", false },
	{ "slot_push_word", c_slot_push_word,
	  "push word the receiver may not set", false },
	{ "slot_reserved", c_slot_reserved, "reserved word not zero", false },
	{ "slot_after_close", c_slot_after_close, NULL, false },
};

/* Waits for the server to close the TCP connection (EOF or RST), skipping
 * doorbells. Returns the milliseconds it took, or -1. */
static int wait_closed(struct peer *p, int ms)
{
	uint64_t t0 = now_ms(), end = t0 + ms;
	uint8_t b[512];

	while (now_ms() < end) {
		struct pollfd pf = { p->tcp, POLLIN, 0 };
		ssize_t n;

		peer_poll(p);
		poll(&pf, 1, 5);
		n = recv(p->tcp, b, sizeof(b), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return (int)(now_ms() - t0);
		/* keep ringing: a server asleep on TCP must look */
		if (n < 0 && (now_ms() - t0) % 100 < 5)
			send(p->tcp, "\x44", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	return -1;
}

static bool server_alive(pid_t pid)
{
	char path[64], st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (fscanf(f, "%*d (%*[^)]) %c", &st) != 1)
		st = 'Z';
	fclose(f);
	return st != 'Z' && st != 'X';
}

/* Looks in the log, from offset on, for a line with both strings. */
static bool log_has(const char *log, long from, const char *a, const char *b)
{
	char line[1024];
	bool found = false;
	FILE *f = fopen(log, "r");

	if (!f)
		return false;
	fseek(f, from, SEEK_SET);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, a) && strstr(line, b);
	fclose(f);
	return found;
}

static long log_size(const char *log)
{
	struct stat st;

	return stat(log, &st) ? 0 : st.st_size;
}

/*
 * An uncommitted server refused our upgrade message: its log says so and
 * that it stays on TCP, and the connection still echoes there. Returns 0,
 * or -1 with p->err set.
 */
static int stays_on_tcp(struct peer *p, const char *log, long from,
			const char *reason)
{
	static const char probe[] = "still-tcp";
	uint64_t end = now_ms() + CLOSE_BOUND_MS;
	char back[sizeof(probe) - 1];

	while (!log_has(log, from, reason, "staying on TCP") &&
	       now_ms() < end)
		usleep(2000);
	if (!log_has(log, from, reason, "staying on TCP"))
		return fail(p, "the log gives no fallback line containing \"%s\"",
			    reason);
	if (log_has(log, from, "closing", ""))
		return fail(p, "the server closed the connection");
	if (send(p->tcp, probe, sizeof(back), MSG_NOSIGNAL) != sizeof(back) ||
	    read_full(p->tcp, back, sizeof(back), CLOSE_BOUND_MS) ||
	    memcmp(back, probe, sizeof(back)))
		return fail(p, "the connection no longer echoes on TCP");
	return 0;
}

static int run_cases(int argc, char **argv, const struct hcase *table,
		     int ncases)
{
	uint16_t port = (uint16_t)atoi(argv[2]);
	const char *log = argv[3];
	pid_t spid = atoi(argv[4]);
	int i, k, npass = 0, nfail = 0, nskip = 0;

	for (i = 0; i < ncases; i++) {
		const struct hcase *c = &table[i];
		struct peer p;
		long from;
		int ms;
		bool want = argc <= 5;

		for (k = 5; k < argc; k++)
			want |= !strcmp(argv[k], c->name);
		if (!want)
			continue;
		from = log_size(log);
		if (peer_open(&p, port)) {
			printf("FAIL %s: could not set the attack up: %s\n",
			       c->name, p.err);
			nfail++;
			peer_close(&p);
			continue;
		}
		if (c->run(&p)) {
			if (!strncmp(p.err, "SKIP", 4)) {
				printf("SKIP %s: %s\n", c->name, p.err + 6);
				nskip++;
			} else {
				printf("FAIL %s: %s\n", c->name, p.err);
				nfail++;
			}
			peer_close(&p);
			continue;
		}
		if (!c->reason) {
			usleep(50000);
			if (!server_alive(spid)) {
				printf("FAIL %s: the server process died\n",
				       c->name);
				nfail++;
			} else if (log_has(log, from, "closing", "")) {
				printf("FAIL %s: the server closed a connection\n",
				       c->name);
				nfail++;
			} else {
				printf("PASS %s: nothing noticed, the next connection works\n",
				       c->name);
				npass++;
			}
			peer_close(&p);
			continue;
		}
		if (c->on_tcp) {
			if (stays_on_tcp(&p, log, from, c->reason)) {
				printf("FAIL %s: %s\n", c->name, p.err);
				nfail++;
			} else if (!server_alive(spid)) {
				printf("FAIL %s: the server process died\n",
				       c->name);
				nfail++;
			} else {
				printf("PASS %s: upgrade given up, the connection goes on on TCP\n",
				       c->name);
				npass++;
			}
			fflush(stdout);
			peer_close(&p);
			continue;
		}
		send(p.tcp, "\x44", 1, MSG_NOSIGNAL);
		ms = wait_closed(&p, CLOSE_BOUND_MS);
		usleep(50000);
		peer_poll(&p);
		if (!server_alive(spid)) {
			printf("FAIL %s: the server process died\n", c->name);
			nfail++;
		} else if (ms < 0) {
			printf("FAIL %s: the connection was still open after %d ms\n",
			       c->name, CLOSE_BOUND_MS);
			nfail++;
		} else if (!log_has(log, from, "malformed message",
				    c->reason) &&
			   !log_has(log, from, "closing", c->reason)) {
			printf("FAIL %s: closed after %d ms but the log gives no reason containing \"%s\"\n",
			       c->name, ms, c->reason);
			nfail++;
		} else if (log_has(log, from, "malformed message", c->reason) &&
			   p.got_switch && !p.got_abort) {
			printf("FAIL %s: closed for a malformed message after its SWITCH without an ABORT: a peer's program would read the cut stream as its end\n",
			       c->name);
			nfail++;
		} else {
			printf("PASS %s: closed after %d ms, reason logged\n",
			       c->name, ms);
			npass++;
		}
		fflush(stdout);
		peer_close(&p);
	}
	printf("cases: %d passed, %d failed, %d skipped\n", npass, nfail,
	       nskip);
	return nfail ? 1 : 0;
}

/* ---- forged upgrade ------------------------------------------------------ */

/* The local port of an established loopback connection to port, from
 * /proc/net/tcp; 0 when none is there yet. */
static uint16_t find_client_port(uint16_t port)
{
	char line[512];
	unsigned int lport, rport, st;
	uint16_t found = 0;
	FILE *f = fopen("/proc/net/tcp", "r");

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		if (sscanf(line, " %*d: %*x:%x %*x:%x %x", &lport, &rport,
			   &st) == 3 && rport == port && st == 1)
			found = (uint16_t)lport;
	}
	fclose(f);
	return found;
}

static int run_forge(char **argv)
{
	uint16_t sport = (uint16_t)atoi(argv[2]);
	uint64_t end = now_ms() + (uint64_t)atoi(argv[3]) * 1000;
	struct sockaddr_in dst = { .sin_family = AF_INET };
	struct sdp_connect_priv cp;
	struct sdp_completion c;
	struct sdp_cq *cq;
	struct sdp_ep *ep;
	uint16_t cport = 0;
	int r;

	while (!cport && now_ms() < end) {
		cport = find_client_port(sport);
		if (!cport)
			usleep(500);
	}
	if (!cport) {
		printf("FAIL forge: no connection to port %u appeared\n", sport);
		return 1;
	}
	/* the right 4-tuple's provider address, the wrong key */
	dst.sin_port = htons(cport);
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	memset(&cp, 0, sizeof(cp));
	memcpy(cp.magic, "SDPc", 4);
	cp.version = SDP_PROTO_VERSION;
	getrandom(cp.key, sizeof(cp.key), 0);
	r = mod.ops.cq_create(mod.prov, 64, &cq);
	if (r) {
		printf("FAIL forge: cq_create: %s\n", sdp_strerror(r));
		return 1;
	}
	/* the client opens its listener once its connection is due for the
	 * upgrade (half a millisecond of its life, or when a call of its
	 * program comes after that): until then a connect is refused */
	do {
		r = mod.ops.connect(mod.prov, cq, (struct sockaddr *)&dst,
				    sizeof(dst), &cp, sizeof(cp), NULL, &ep);
		if (r == -ECONNREFUSED)
			usleep(200);
	} while (r == -ECONNREFUSED && now_ms() < end);
	if (r < 0) {
		printf("PASS forge: the client's listener at port %u refused at once (%s)\n",
		       cport, sdp_strerror(r));
		return 0;
	}
	if (r == SDP_PENDING) {
		uint64_t cend = now_ms() + 5000;

		r = -ETIMEDOUT;
		while (now_ms() < cend) {
			if (mod.ops.cq_poll(cq, &c, 1) == 1 &&
			    c.op == SDP_OP_CONNECT) {
				r = c.status;
				break;
			}
			usleep(1000);
		}
	}
	if (r == -ECONNREFUSED) {
		printf("PASS forge: connection to the client's listener (port %u) with a wrong key refused\n",
		       cport);
		mod.ops.ep_close(ep);
		return 0;
	}
	if (r == 0) {
		/* accepted: does anything arrive? */
		static uint8_t buf[1 << 16];
		struct sdp_mr *mr;
		struct sdp_sge sge = { buf, sizeof(buf), NULL };
		uint64_t dend = now_ms() + 1000;
		unsigned long long got = 0;

		if (!mod.ext.register_memory(mod.prov, buf, sizeof(buf),
					     SDP_ACCESS_LOCAL_WRITE, &mr)) {
			sge.mr = mr;
			mod.ops.post_recv(ep, &sge, 1, 1);
			while (now_ms() < dend)
				if (mod.ops.cq_poll(cq, &c, 1) == 1 &&
				    c.op == SDP_OP_RECV && !c.status)
					got += c.bytes;
		}
		printf("FAIL forge: the forged provider connection was accepted (%llu bytes received)\n",
		       got);
		return 1;
	}
	printf("FAIL forge: no answer to the forged connect: %s\n",
	       sdp_strerror(r));
	return 1;
}

/* ---- squatting ----------------------------------------------------------- */

static int run_squat(char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	uint64_t end = now_ms() + (uint64_t)atoi(argv[3]) * 1000;
	struct sdp_listener *l;
	unsigned int n = 0;
	int r;

	a.sin_port = htons((uint16_t)atoi(argv[2]));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	r = mod.ops.listen(mod.prov, (struct sockaddr *)&a, sizeof(a), 16, &l);
	if (r) {
		fprintf(stderr, "squat: cannot listen: %s\n", sdp_strerror(r));
		return 1;
	}
	printf("squatting\n");
	fflush(stdout);
	while (now_ms() < end) {
		struct sdp_conn_req *req;
		uint8_t priv[SDP_MAX_PRIVATE_DATA];
		size_t plen = sizeof(priv);

		if (mod.ops.get_request(l, &req, priv, &plen) == 0) {
			mod.ops.reject(req);
			n++;
		}
		usleep(2000);
	}
	fprintf(stderr, "squat: %u provider connection requests refused\n", n);
	mod.ops.listener_close(l);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	bool cases_cmd = argc > 1 && (!strcmp(argv[1], "cases") ||
				      !strcmp(argv[1], "slot"));

	if (argc < 4 || (!cases_cmd && strcmp(argv[1], "forge") &&
			 strcmp(argv[1], "squat")) ||
	    (cases_cmd && argc < 5)) {
		fprintf(stderr, "usage: hostile_peer cases PORT LOGFILE SERVER_PID [CASE...]\n"
				"       hostile_peer slot PORT LOGFILE SERVER_PID [CASE...]\n"
				"       hostile_peer forge SERVER_PORT SECONDS\n"
				"       hostile_peer squat PORT SECONDS\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (load_shm())
		return 1;
	if (!strcmp(argv[1], "cases"))
		return run_cases(argc, argv, cases,
				 sizeof(cases) / sizeof(cases[0]));
	if (!strcmp(argv[1], "slot"))
		return run_cases(argc, argv, slot_cases,
				 sizeof(slot_cases) / sizeof(slot_cases[0]));
	if (!strcmp(argv[1], "forge"))
		return run_forge(argv);
	return run_squat(argv);
}
