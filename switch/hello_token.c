/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * hello_token.c - on one host a client's hello goes on TCP only while the
 * client holds a name bound to its TCP connection, and a server about to
 * stop seeing its connections (io_uring) takes the names of those whose
 * head it has not seen: no hello reaches a ring (docs/protocol.md 2.2b).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "config.h"
#include "fallback.h"
#include "hello_token.h"
#include "holders.h"
#include "log.h"
#include "ownfd.h"
#include "sock.h"
#include "sys.h"
#include "tcp_inband.h"
#include "upgrade.h"
#include "util.h"
#include "wire.h"

/* An IPv4-mapped IPv6 address as the IPv4 address it is. */
static void addr_norm(struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in a4;

	if (ss->ss_family != AF_INET6 ||
	    !IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr))
		return;
	memset(&a4, 0, sizeof(a4));
	a4.sin_family = AF_INET;
	a4.sin_port = a6->sin6_port;
	memcpy(&a4.sin_addr, &a6->sin6_addr.s6_addr[12], 4);
	memcpy(ss, &a4, sizeof(a4));
}

static int addr_text(const struct sockaddr_storage *ss, char *out,
		     size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;

		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		return snprintf(out, len, "%s:%u", ip, ntohs(a->sin_port));
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;

		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		return snprintf(out, len, "[%s]:%u", ip, ntohs(a->sin6_port));
	}
	return -1;
}

/* The two ends of the TCP connection on fd, mapped addresses as IPv4. */
static int tcp_ends(int fd, struct sockaddr_storage *local,
		    struct sockaddr_storage *peer)
{
	socklen_t l = sizeof(*local), p = sizeof(*peer);

	if (getsockname(fd, (struct sockaddr *)local, &l) ||
	    getpeername(fd, (struct sockaddr *)peer, &p))
		return -errno;
	addr_norm(local);
	addr_norm(peer);
	if (local->ss_family != peer->ss_family)
		return -EAFNOSUPPORT;
	return 0;
}

/* The abstract name of the connection: "sdp-hello/CLIENT>SERVER". */
static int token_name(int fd, bool client, struct sockaddr_un *sun,
		      socklen_t *len)
{
	struct sockaddr_storage local, peer;
	char c[64], sv[64];
	int r = tcp_ends(fd, &local, &peer), n;

	if (r)
		return r;
	if (addr_text(client ? &local : &peer, c, sizeof(c)) < 0 ||
	    addr_text(client ? &peer : &local, sv, sizeof(sv)) < 0)
		return -EAFNOSUPPORT;
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1,
		     "sdp-hello/%s>%s", c, sv);
	if (n < 0 || (size_t)n >= sizeof(sun->sun_path) - 1)
		return -ENAMETOOLONG;
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	return 0;
}

/* A socket bound to the name (listening, so that a server can ask the
 * kernel who holds it). The descriptor, or -errno (-EADDRINUSE: taken).
 * The switch's where it is (a client's is mostly let go within the call
 * that made it): out of reach of the program's close and dup2 meanwhile. */
static int name_take(const struct sockaddr_un *sun, socklen_t len)
{
	int fd = sdp_sys.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
						 SOCK_NONBLOCK, 0), e;

	if (fd < 0)
		return -errno;
	if (sdp_sys.bind(fd, (const struct sockaddr *)sun, len) ||
	    sdp_sys.listen(fd, 1)) {
		e = errno;
		sdp_sys.close(fd);
		return -e;
	}
	sw_fd_own_here(fd);
	return fd;
}

/* The name kept beyond this call: the descriptor becomes the switch's
 * own, out of the program's way (ownfd.c). */
static void name_keep(struct sw_sock *s)
{
	int fd;

	if (s->tok_fd < 0 || s->tok_kept)
		return;
	sw_fd_forget(s->tok_fd);
	fd = sw_fd_own(s->tok_fd, NULL);
	if (fd >= 0)
		s->tok_fd = fd;
	s->tok_kept = true;
}

int sw_hello_token_take(struct sw_sock *s)
{
	struct sockaddr_un sun;
	socklen_t len;
	int r;

	if (s->tok_fd >= 0)
		return 0;
	r = token_name(s->fd, true, &sun, &len);
	if (r)
		return r;
	r = name_take(&sun, len);
	if (r < 0)
		return r;
	s->tok_fd = r;
	return 0;
}

void sw_hello_token_drop(struct sw_sock *s)
{
	if (s->tok_fd < 0)
		return;
	sw_fd_forget(s->tok_fd);
	sdp_sys.close(s->tok_fd);
	s->tok_fd = -1;
	s->tok_kept = false;
}

void sw_hello_token_check(struct sw_sock *s)
{
	int outq;

	if (s->tok_fd < 0)
		return;
	/* the server made its provider connection: it took our hello */
	if (s->ss.ep || s->state == SW_SAN) {
		sw_hello_token_drop(s);
		return;
	}
	/* once every byte up to the end of our hello is acknowledged, the
	 * hello is in the server's socket, where a server that takes the
	 * name finds it (our bytes on TCP after it: s->tcp_tx) */
	if (sdp_sys.ioctl(s->fd, SIOCOUTQ, &outq) == 0 && outq >= 0 &&
	    (uint64_t)outq <= s->tcp_tx)
		sw_hello_token_drop(s);
	else
		name_keep(s);
}

/*
 * The uid that owns the socket at address peer whose other end is local,
 * in this network namespace and in one of the TCP states of the bit mask
 * states (NETLINK_SOCK_DIAG, an exact lookup by the four addresses), or
 * -errno (-ENOENT: none here).
 */
static long diag_uid(const struct sockaddr_storage *localp,
		     const struct sockaddr_storage *peerp, uint32_t states)
{
	struct sockaddr_storage local = *localp, peer = *peerp;
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req;
	union {
		struct nlmsghdr nlh;
		char buf[1024];
	} ans;
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	struct nlmsghdr *h;
	long uid = -ENOENT;
	ssize_t n;
	int nfd;

	memset(&req, 0, sizeof(req));
	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST;
	req.r.sdiag_family = peer.ss_family;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = states;
	req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	if (peer.ss_family == AF_INET) {
		struct sockaddr_in *a = (void *)&peer, *b = (void *)&local;

		req.r.id.idiag_sport = a->sin_port;
		req.r.id.idiag_dport = b->sin_port;
		memcpy(req.r.id.idiag_src, &a->sin_addr, 4);
		memcpy(req.r.id.idiag_dst, &b->sin_addr, 4);
	} else {
		struct sockaddr_in6 *a = (void *)&peer, *b = (void *)&local;

		req.r.id.idiag_sport = a->sin6_port;
		req.r.id.idiag_dport = b->sin6_port;
		memcpy(req.r.id.idiag_src, &a->sin6_addr, 16);
		memcpy(req.r.id.idiag_dst, &b->sin6_addr, 16);
	}
	nfd = sdp_sys.socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC,
			     NETLINK_SOCK_DIAG);
	if (nfd < 0)
		return -errno;
	if (sdp_sys.sendto(nfd, &req, sizeof(req), 0, (struct sockaddr *)&nl,
			   sizeof(nl)) != (ssize_t)sizeof(req)) {
		uid = -errno;
		goto out;
	}
	n = sdp_sys.recv(nfd, &ans, sizeof(ans), 0);
	for (h = &ans.nlh; n > 0 && NLMSG_OK(h, (size_t)n);
	     h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
		    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
			const struct inet_diag_msg *m = NLMSG_DATA(h);

			uid = (long)m->idiag_uid;
			break;
		}
		if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_DONE)
			break;
	}
out:
	sdp_sys.close(nfd);
	return uid;
}

/* The uid that owns the socket at the other end of fd's TCP connection
 * on this host, or -errno (-ENOENT: not on this host). */
static long peer_uid(int fd)
{
	struct sockaddr_storage local, peer;
	int r = tcp_ends(fd, &local, &peer);

	return r ? r : diag_uid(&local, &peer, ~0u);
}

/*
 * Names that outlive this process's copy of their connection (a socket
 * passed to a process that may not drop a hello): each is held until the
 * client's socket can send no more (gone, or in a state past its own
 * FIN), looked at whenever one more is added. Bounded by the connections
 * a process passed on while their clients had not spoken yet.
 */
struct outliving {
	int fd;
	struct sockaddr_storage local, peer;
};

static struct outliving *outl;
static int noutl, outl_cap;
static pthread_mutex_t outl_lock = PTHREAD_MUTEX_INITIALIZER;

/* The client can still send: established, opening, or having read our
 * FIN only (TCP_ESTABLISHED, TCP_SYN_SENT, TCP_CLOSE_WAIT). */
#define CLIENT_CAN_SEND ((1u << 1) | (1u << 2) | (1u << 8))

void sw_hello_name_outlive(struct sw_sock *s)
{
	struct sockaddr_storage local, peer;
	struct outliving *v;
	int i, j;

	if (s->tok_fd < 0 || tcp_ends(s->fd, &local, &peer))
		return;
	name_keep(s);	/* one of the switch's own, high */
	pthread_mutex_lock(&outl_lock);
	for (i = j = 0; i < noutl; i++) {
		if (diag_uid(&outl[i].local, &outl[i].peer,
			     CLIENT_CAN_SEND) == -ENOENT) {
			sw_fd_forget(outl[i].fd);
			sdp_sys.close(outl[i].fd);
		} else
			outl[j++] = outl[i];
	}
	noutl = j;
	if (noutl == outl_cap) {
		int cap = outl_cap ? 2 * outl_cap : 16;

		v = realloc(outl, cap * sizeof(*v));
		if (!v) {
			/* held by the copy here, as long as it lives */
			pthread_mutex_unlock(&outl_lock);
			return;
		}
		outl = v;
		outl_cap = cap;
	}
	outl[noutl].fd = s->tok_fd;
	outl[noutl].local = local;
	outl[noutl].peer = peer;
	noutl++;
	s->tok_fd = -1;
	s->tok_kept = false;
	pthread_mutex_unlock(&outl_lock);
}

/* True when a client connection of this process holds the name sun: its
 * hello goes to a server socket of this same process. */
static bool own_client_holds(const struct sockaddr_un *sun, socklen_t len)
{
	struct sockaddr_un c;
	struct sw_sock **v;
	socklen_t cl;
	bool held = false;
	int n = sw_sock_list(&v), i;

	for (i = 0; i < n; i++) {
		struct sw_sock *o = v[i];

		if (!held && o->is_client && o->tok_fd >= 0 &&
		    !token_name(o->fd, true, &c, &cl) && cl == len &&
		    !memcmp(&c, sun, len))
			held = true;
		sw_sock_unref(o);
	}
	free(v);
	return held;
}

/*
 * Server: the name of s's connection. 1 when the client's switch holds it
 * (its hello is on its way or here: wait for it), 0 when it need not be
 * waited for (taken here now, so no hello goes after this; or held by
 * another user, so not by the client's switch, which then sends none).
 */
static int fence_one(struct sw_sock *s)
{
	struct sockaddr_un sun;
	struct ucred cr;
	socklen_t len, cl = sizeof(cr);
	long uid = peer_uid(s->fd);
	int fd, r = token_name(s->fd, false, &sun, &len);

	/* a client on another host (or in another network namespace) takes
	 * its name where we cannot look: nothing to take here */
	if (r || uid == -ENOENT)
		return 0;
	fd = name_take(&sun, len);
	if (fd >= 0) {
		s->tok_fd = fd;	/* until the socket closes */
		name_keep(s);
		return 0;
	}
	if (fd != -EADDRINUSE)
		return 1;	/* cannot tell: wait, in case */
	fd = sdp_sys.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
					 SOCK_NONBLOCK, 0);
	if (fd < 0)
		return 1;
	r = sdp_sys.connect(fd, (struct sockaddr *)&sun, len) ? -errno : 0;
	if (!r)
		r = sdp_sys.getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) ?
			    -errno : 0;
	sdp_sys.close(fd);
	if (r == -ECONNREFUSED)
		return 0;	/* nobody listens: not a switch's name */
	if (r)
		return 1;	/* cannot tell (a full backlog): wait */
	if (cr.pid == getpid())
		/* the client is this process's own (its hello comes), or
		 * the name is one kept across an exec (none comes) */
		return own_client_holds(&sun, len);
	if (uid >= 0 && (uid_t)uid != cr.uid) {
		SW_WARN("fd %d: the name for its client's hello is held by uid %u, not by the client's uid %ld: no hello is waited for",
			s->fd, (unsigned int)cr.uid, uid);
		return 0;
	}
	return 1;
}

/* A client's switch takes the name of its connection right after
 * connect() returns, and its hello follows: a connection this young whose
 * name nobody holds yet may still have a client's switch at its other end. */
#define HELLO_GRACE_MS 20

/* The name of s's connection is held by someone (its client's switch, or
 * another process that squats it: fence_one tells them apart). */
static bool name_held(struct sw_sock *s)
{
	struct sockaddr_un sun;
	socklen_t len;
	int fd, r;

	if (token_name(s->fd, false, &sun, &len))
		return false;
	fd = sdp_sys.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
					 SOCK_NONBLOCK, 0);
	if (fd < 0)
		return false;
	r = sdp_sys.connect(fd, (struct sockaddr *)&sun, len) ? -errno : 0;
	sdp_sys.close(fd);
	return r != -ECONNREFUSED && r != -ENOENT;
}

/* s's connection is younger than HELLO_GRACE_MS and nothing came on it:
 * the kernel counts the time since the last byte (or the handshake). */
static bool young(struct sw_sock *s)
{
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);

	if (sdp_sys.getsockopt(s->fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) ||
	    tl < offsetof(struct tcp_info, tcpi_last_data_recv) +
			 sizeof(ti.tcpi_last_data_recv))
		return false;
	return ti.tcpi_last_data_recv < HELLO_GRACE_MS;
}

bool sw_hello_await(struct sw_sock *s)
{
	uint64_t end = sw_now_ns() +
		       (uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull;
	bool coming = false, decided = false, took;
	/* a client on another host takes its name where we cannot look:
	 * no grace is waited for there */
	bool local = peer_uid(s->fd) != -ENOENT;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		if (s->state != SW_HELLO_WAIT || s->closed)
			break;
		sw_upgrade_server_hello_in(s, false);
		/* after the decision, looked at once more: the client lets its
		 * name go once its whole hello was acknowledged, so a hello
		 * may have come just before the name was found free */
		if (s->state != SW_HELLO_WAIT || (decided && !coming) ||
		    sw_now_ns() >= end)
			break;
		/* while the name is free and the connection young, its
		 * client's switch may be about to take it: not taken from
		 * under it yet */
		if (!decided && (!local || name_held(s) || !young(s))) {
			coming = fence_one(s);
			decided = true;
			continue;
		}
		pthread_mutex_unlock(&s->lock);
		sw_wait_fd(s->fd, POLLIN, decided ? 5 : 1);
		pthread_mutex_lock(&s->lock);
	}
	took = sw_pending(s) && s->state != SW_HELLO_WAIT && !s->closed;
	if (coming)
		SW_DBG("fd %d: its client's hello was on its way: %s", s->fd,
		       took ? "taken" : "did not come");
	pthread_mutex_unlock(&s->lock);
	return took;
}

/* The fence for the n sockets of v, a reference each, dropped. */
static void fence_list(struct sw_sock **v, int n)
{
	uint64_t end = sw_now_ns() +
		       (uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull;
	int i, waiting;
	char *wait = calloc(n ? n : 1, 1);

	if (!wait) {
		for (i = 0; i < n; i++)
			sw_sock_unref(v[i]);
		return;
	}
	for (i = 0; i < n; i++) {
		struct sw_sock *s = v[i];

		pthread_mutex_lock(&s->lock);
		if (!s->is_client && s->state == SW_TCP && !s->closed &&
		    s->skip_hello && !s->exec_skip) {
			wait[i] = (char)fence_one(s);
			if (wait[i])
				SW_DBG("fd %d: its client's hello is on its way: waited for and dropped",
				       s->fd);
		}
		/* a hello that is here, or part of one, goes now */
		if (s->state == SW_TCP && s->skip_hello &&
		    sw_hello_skip(s, false) == -EAGAIN && s->hello_got)
			wait[i] = 1;	/* the rest of one is on its way */
		if (!s->skip_hello)
			wait[i] = 0;
		pthread_mutex_unlock(&s->lock);
	}
	/* the hellos the clients' switches have under way, each its own
	 * socket's first bytes: they come at once, or the connection ends */
	do {
		uint64_t now = sw_now_ns();

		waiting = 0;
		for (i = 0; i < n; i++) {
			struct sw_sock *s = v[i];
			int left;

			if (!wait[i])
				continue;
			pthread_mutex_lock(&s->lock);
			if (s->state != SW_TCP || !s->skip_hello ||
			    sw_hello_skip(s, false) == 0)
				wait[i] = 0;
			pthread_mutex_unlock(&s->lock);
			if (!wait[i])
				continue;
			if (now >= end) {
				SW_WARN("fd %d: its client's hello did not come within %u ms: it may reach reads the switch cannot see (io_uring, stdio, or the program after exec)",
					s->fd, sw_cfg.upgrade_timeout_ms);
				wait[i] = 0;
				continue;
			}
			waiting++;
			left = (int)((end - now) / 1000000) + 1;
			sw_wait_fd(s->fd, POLLIN, left < 5 ? left : 5);
		}
	} while (waiting);
	for (i = 0; i < n; i++)
		sw_sock_unref(v[i]);
	free(wait);
}

void sw_hello_fence(void)
{
	struct sw_sock **v;
	int n = sw_sock_list(&v);

	fence_list(v, n);
	free(v);
}

void sw_hello_fence_exec(void)
{
	struct sw_sock **v, **f;
	int n = sw_sock_list(&v), i, k = 0;

	f = calloc(n ? n : 1, sizeof(*f));
	for (i = 0; f && i < n; i++) {
		struct sw_sock *s = v[i];
		bool due;

		pthread_mutex_lock(&s->lock);
		due = !s->is_client && s->state == SW_TCP && !s->closed &&
		      s->skip_hello && !s->exec_skip &&
		      sw_fd_survives_exec(s->fd);
		pthread_mutex_unlock(&s->lock);
		if (due) {
			sw_sock_ref(s);
			sw_sock_ref(s);
			f[k++] = s;
		}
	}
	/* fence_list drops one reference of each */
	fence_list(f, k);
	for (i = 0; i < k; i++) {
		struct sw_sock *s = f[i];

		pthread_mutex_lock(&s->lock);
		if (s->tok_fd >= 0) {
			/* the name goes on with the new program, out of its
			 * way among the switch's own numbers, and is let go
			 * at its end; while it is open, no hello comes. A
			 * program that closes every descriptor at start (sshd
			 * re-exec'd) lets it go: the new program's switch is
			 * still told to drop a hello (sw_exec_hello_skips) */
			sdp_sys.fcntl(s->tok_fd, F_SETFD, 0);
			SW_DBG("fd %d: its client's hello cannot come after the exec: the name for it goes on with the new program",
			       s->fd);
		}
		pthread_mutex_unlock(&s->lock);
		sw_sock_unref(s);
	}
	for (i = 0; i < n; i++)
		sw_sock_unref(v[i]);
	free(f);
	free(v);
}

void sw_hello_fence_sock(struct sw_sock *s)
{
	sw_sock_ref(s);
	fence_list(&s, 1);
}
