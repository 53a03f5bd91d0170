/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * upgrade.c - connection set-up (DESIGN.md section 4), asynchronous: the TCP
 * connection is made first and carries the program's bytes from the start.
 * Discovery through the providers' listeners; the client's hello on TCP
 * carries a fresh key K; the server's hello answers; the server's switch
 * connects through the chosen provider to a listener the client holds for
 * this connection and proves K; both sides send SETUP on the provider
 * connection; then each side's SWITCH names how many of its bytes went on
 * TCP, and the rest follow on the provider. The program never waits for any
 * of it. A side gives up (sw_fallback) only while its SETUP is not out, so
 * that no byte is ever sent where the peer will not look for it.
 * docs/protocol.md section 2 is the reference.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bind.h"
#include "rules.h"
#include "session.h"
#include "sw_internal.h"

void sw_peer_text(const struct sw_sock *s, char *buf, size_t len);

/* ---- helpers ---------------------------------------------------------------- */

static bool fd_nonblocking(int fd)
{
	int fl = sdp_sys.fcntl(fd, F_GETFL);

	return fl >= 0 && (fl & O_NONBLOCK);
}

/* A provider name into its NUL-padded 8-byte wire field. */
static void name_copy(char dst[SDP_PROVIDER_NAME_LEN], const char *src)
{
	size_t n = strnlen(src, SDP_PROVIDER_NAME_LEN);

	memset(dst, 0, SDP_PROVIDER_NAME_LEN);
	memcpy(dst, src, n);
}

static void addr_port(const struct sockaddr_storage *ss, uint16_t *port)
{
	if (ss->ss_family == AF_INET)
		*port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
	else
		*port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

static void count_tcp(int reason)
{
	struct sw_proc_stats *ps = sw_stats_proc();

	if (!ps)
		return;
	ps->conns_tcp++;
	if (reason > 0 && reason < SW_STATS_FB_MAX)
		ps->fallbacks[reason]++;
}

/* The peer's end of TCP has come (or comes within a millisecond: a
 * process that exits closes its fds one by one): a step of the upgrade
 * that failed with it failed because the connection is ending, not for
 * the upgrade. */
static int unless_ended(struct sw_sock *s, int reason)
{
	struct pollfd pf = { .fd = s->fd, .events = POLLRDHUP };

	return sdp_sys.poll(&pf, 1, 1) == 1 &&
		       (pf.revents & (POLLRDHUP | POLLHUP | POLLERR)) ?
		       SDP_FB_ENDED : reason;
}

/* Does the client of accepted connection s hold a provider listener for it
 * (its hello is on the way)? */
static bool client_listens(struct sw_sock *s)
{
	return sw_peer_known(s) &&
	       !sw_bind_probe(s->up_prov, s->fd, (struct sockaddr *)&s->peer,
			      s->peerlen);
}

/* ---- listen / accept (server) --------------------------------------------- */

int sw_listen(int fd, int family, int backlog, struct sw_sock **out)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	struct sw_sock *s = NULL;
	int i, n = 0, r;

	*out = NULL;
	r = sdp_sys.listen(fd, backlog);
	if (r)
		return r;
	if (!sw_init())
		return 0;
	if (getsockname(fd, (struct sockaddr *)&local, &len))
		return 0;
	if (sw_rules_decide('s', (struct sockaddr *)&local) == SDP_RULE_TCP) {
		/* kept so that its connections count as TCP by rule */
		s = sw_sock_new(fd, SW_LISTENER);
		if (s) {
			s->family = family;
			s->rule_tcp = true;
		}
		*out = s;
		return 0;
	}
	for (i = 0; i < sw_nproviders; i++) {
		struct sw_provider *p = &sw_providers[i];
		struct sdp_listener *l = NULL;
		int e;

		if (!p->usable)
			continue;
		e = p->mod.ops.listen(p->mod.prov, (struct sockaddr *)&local,
				      len, backlog > 0 ? backlog : 128, &l);
		if (e) {
			SW_WARN("listener fd %d: provider %s cannot listen beside it: %s",
				fd, p->mod.name, sdp_strerror(e));
			continue;
		}
		if (!s) {
			s = sw_sock_new(fd, SW_LISTENER);
			if (!s) {
				p->mod.ops.listener_close(l);
				return 0;
			}
			s->family = family;
		}
		s->plisten[i] = l;
		n++;
	}
	if (s) {
		addr_port(&local, &s->local_port);
		if (s->st)
			s->st->local_port = s->local_port;
		SW_DBG("listener fd %d port %u: %d provider listener(s)", fd,
		       s->local_port, n);
	}
	*out = s;
	return 0;
}

/* Discovery probes land on the server's provider listeners: discard them
 * (the provider keeps the watches among them). Looked for at most once a
 * millisecond while none come: clients that keep a watch on the listener
 * probe once, not per connection, and an empty look is a system call per
 * accept. A listener's backlog holds what comes in between. */
#define DRAIN_EVERY_NS 1000000ull

static void drain_probes(struct sw_sock *ls)
{
	uint64_t now = sw_now_ns();
	int i;

	if (!ls->drain_found && now - ls->drained_ns < DRAIN_EVERY_NS)
		return;
	ls->drained_ns = now;
	ls->drain_found = false;
	for (i = 0; i < sw_nproviders; i++) {
		struct sdp_conn_req *req;
		uint8_t priv[SDP_MAX_PRIVATE_DATA];
		size_t plen;

		if (!ls->plisten[i])
			continue;
		for (;;) {
			plen = sizeof(priv);
			if (sw_providers[i].mod.ops.get_request(ls->plisten[i],
								&req, priv,
								&plen))
				break;
			sw_providers[i].mod.ops.reject(req);
			ls->drain_found = true;
		}
	}
}

/*
 * Looks for the client's hello at the head of the TCP stream without
 * consuming anything that is not one. Returns 1 with the hello consumed
 * into s->hello_buf, 0 when the stream does not start with one (nothing
 * consumed; its end counts), -EAGAIN when not all of it is there yet.
 */
static int server_read_hello(struct sw_sock *s)
{
	ssize_t n = sdp_sys.recv(s->fd, s->hello_buf, sizeof(s->hello_buf),
				 MSG_PEEK | MSG_DONTWAIT);

	if (n > 0) {
		size_t cmp = n < SDP_MAGIC_LEN ? (size_t)n : SDP_MAGIC_LEN;

		if (memcmp(s->hello_buf, SDP_HELLO_MAGIC, cmp))
			return 0;
		if ((size_t)n < sizeof(struct sdp_hello))
			return -EAGAIN;
	} else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK &&
			      errno != EINTR)) {
		return 0;	/* its end, or an error: the program's */
	} else {
		return -EAGAIN;
	}
	/* consume exactly the hello */
	if (sdp_sys.recv(s->fd, s->hello_buf, sizeof(struct sdp_hello),
			 MSG_DONTWAIT) != sizeof(struct sdp_hello))
		return 0;
	return 1;
}

/*
 * A hello on TCP, and with it (msg) the program's first bytes, in one send;
 * the rest of a partial send of the hello is written out at once (a new
 * connection has room for it). Returns the program's bytes sent, or -errno.
 */
static ssize_t hello_send(struct sw_sock *s, const struct sdp_hello *h,
			  const struct msghdr *msg, int flags)
{
	struct iovec iov[65];
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 1 };
	size_t i;
	ssize_t n;

	iov[0].iov_base = (void *)h;
	iov[0].iov_len = sizeof(*h);
	for (i = 0; msg && i < msg->msg_iovlen && i < 64; i++)
		iov[m.msg_iovlen++] = msg->msg_iov[i];
	n = sdp_sys.sendmsg(s->fd, &m, (flags & ~MSG_OOB) | MSG_DONTWAIT |
					       MSG_NOSIGNAL);
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		return -errno;
	if (n < 0)
		n = 0;
	if ((size_t)n < sizeof(*h)) {
		if (sw_tcp_write_all(s->fd, (const uint8_t *)h + n,
				     sizeof(*h) - n))
			return -EPIPE;
		return 0;
	}
	n -= sizeof(*h);
	s->tcp_tx += n;
	if (s->st)
		s->st->tx_tcp += n;
	return n;
}

/* The server's hello, then (msg) the program's first bytes. Returns the
 * program's bytes sent, or -errno. */
static ssize_t server_hello_send(struct sw_sock *s, int status,
				 const struct msghdr *msg, int flags)
{
	struct sdp_hello h;
	int i;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, SDP_HELLO_MAGIC, SDP_MAGIC_LEN);
	h.type = SDP_HELLO_SERVER;
	h.version = SDP_PROTO_VERSION;
	h.status = status;
	h.msg_size = sw_cfg.msg_size;
	h.recv_credits = sw_cfg.recv_bufs;
	for (i = 0; !status && i < sw_nproviders &&
		    h.nproviders < SDP_MAX_HELLO_PROVIDERS; i++) {
		if (!(s->lsn_provs & (1u << i)))
			continue;
		name_copy(h.providers[h.nproviders++],
			  sw_providers[i].mod.name);
		if (sw_providers[i].mod.ext.rdma_read)
			h.flags |= SDP_HELLO_F_RDMA_READ;
	}
	s->hello_out = true;
	return hello_send(s, &h, msg, flags);
}

/* A refusal: said in our hello when it has not gone yet (the client then
 * stays on TCP at once), else by never connecting (its wait runs out). */
static void refuse(struct sw_sock *s, int reason, const char *why)
{
	if (!s->hello_out)
		server_hello_send(s, reason, NULL, 0);
	sw_fallback(s, reason, why);
}

/* Server: the client's hello is in s->hello_buf. Checks it; refuses, or
 * chooses the provider and leaves the connection to it for later. */
static void server_hello_take(struct sw_sock *s)
{
	struct sdp_hello *h = (struct sdp_hello *)s->hello_buf;
	struct sw_provider *chosen = NULL;
	int i;

	/* from here on the client is a switch and reads a server hello
	 * before any byte of the program's */
	s->state = SW_UPGRADING;
	if (h->type != SDP_HELLO_CLIENT || h->nproviders == 0 ||
	    h->nproviders > SDP_MAX_HELLO_PROVIDERS || h->status ||
	    (h->version == SDP_PROTO_VERSION &&
	     memcmp(h->reserved, (const uint8_t[24]){ 0 },
		    sizeof(h->reserved)))) {
		refuse(s, SDP_FB_BAD_HELLO, "malformed client hello");
		return;
	}
	memcpy(s->key, h->key, sizeof(s->key));
	if (h->version != SDP_PROTO_VERSION) {
		refuse(s, SDP_FB_VERSION, "client speaks another version");
		return;
	}
	for (i = 0; i < h->nproviders && !chosen; i++) {
		char name[SDP_PROVIDER_NAME_LEN + 1] = { 0 };
		struct sw_provider *c;

		memcpy(name, h->providers[i], SDP_PROVIDER_NAME_LEN);
		c = sw_provider_by_name(name);
		if (c && (s->lsn_provs & (1u << c->index)))
			chosen = c;
	}
	if (!chosen) {
		refuse(s, SDP_FB_NO_COMMON, NULL);
		return;
	}
	/* The provider connection is made later (server_connect): at the
	 * program's first call on the connection once it is older than
	 * SDP_UPGRADE_AFTER_US or has moved SDP_UPGRADE_AFTER_BYTES on TCP.
	 * A connection that ends sooner never pays for it; its bytes were on
	 * TCP all along. The client takes the connection whenever it comes
	 * (within its SDP_UPGRADE_TIMEOUT_MS). */
	s->up_prov = chosen;
	s->upgrade_at_ns = sw_now_ns() +
			   (uint64_t)sw_cfg.upgrade_after_us * 1000;
	SW_DBG("fd %d: client hello taken, %s connection to follow", s->fd,
	       chosen->mod.name);
}

/*
 * Server: the first bytes of the accepted stream tell whether the client
 * runs a switch (its hello) or not (anything else, or its end). writing:
 * the program is about to send before the client's hello came: if the
 * client holds a provider listener for this connection (a hello is on its
 * way), our hello goes first with those bytes; else it is plain TCP.
 */
static void server_hello_in(struct sw_sock *s, bool writing)
{
	int r = server_read_hello(s);

	if (s->state != SW_HELLO_WAIT)
		return;
	if (r == 1) {
		server_hello_take(s);
		return;
	}
	if (r == -EAGAIN && !(writing && !s->hello_out))
		return;
	if (r == -EAGAIN && client_listens(s))
		return;
	SW_DBG("fd %d: accepted stream starts without a hello: plain TCP",
	       s->fd);
	/* nothing came yet: a client that had not opened its listener when
	 * we looked may still send its hello; it is dropped then (the
	 * client, seeing our bytes first, stays on TCP too) */
	if (r == -EAGAIN)
		s->skip_hello = true;
	sw_fallback(s, SDP_FB_NO_PEER_SWITCH, NULL);
}

/* The accepted connection s: whether a switch is at the other end is told
 * by the stream's first bytes, looked at when the program first uses the
 * connection (server_hello_in). Returns true when s stays managed. */
static bool server_upgrade(struct sw_sock *ls, struct sw_sock *s)
{
	int i;

	for (i = 0; i < sw_nproviders; i++)
		if (ls->plisten[i] && sw_providers[i].usable) {
			s->lsn_provs |= 1u << i;
			if (!s->up_prov)
				s->up_prov = &sw_providers[i];
		}
	if (!s->up_prov) {
		count_tcp(SDP_FB_NO_PEER_SWITCH);
		return false;
	}
	s->state = SW_HELLO_WAIT;
	return true;
}

/*
 * Server: the client's listener is not there (yet): a client opens it only
 * once its connection is due for the upgrade, and one asleep in a read
 * opens it when it wakes (client_listen_due). The connect is tried again
 * 1, 2, 4 .. 64 ms later, until SDP_UPGRADE_TIMEOUT_MS after the first try;
 * nothing is committed meanwhile, so giving up then loses nothing. Returns
 * 0 when another try is due, -1 when it is time to give up.
 */
#define CONNECT_AGAIN_MAX_MS 64

static int connect_again(struct sw_sock *s)
{
	uint64_t now = sw_now_ns(), wait_ms;

	if (!s->connect_tries)
		s->deadline_ns = now + (uint64_t)sw_cfg.upgrade_timeout_ms *
					       1000000ull;
	if (now >= s->deadline_ns)
		return -1;
	sw_session_free(s);
	wait_ms = s->connect_tries < 7 ? 1ull << s->connect_tries :
					 CONNECT_AGAIN_MAX_MS;
	s->connect_tries++;
	s->upgrade_at_ns = now + wait_ms * 1000000ull;
	SW_DBG("fd %d: no provider listener at the client yet: again in %llu ms",
	       s->fd, (unsigned long long)wait_ms);
	return 0;
}

/* Server: the provider connection to the client's listener, proving K. */
static void server_connect(struct sw_sock *s)
{
	struct sdp_hello *h = (struct sdp_hello *)s->hello_buf;
	struct sw_provider *chosen = s->up_prov;
	struct sdp_connect_priv cp;
	int r;

	/* the client takes the connection once our hello told it to */
	if (!s->hello_out && server_hello_send(s, 0, NULL, 0) < 0) {
		sw_fallback(s, SDP_FB_LOCAL_SETUP, "cannot send hello");
		return;
	}
	if (!sw_peer_known(s)) {
		sw_fallback(s, unless_ended(s, SDP_FB_LOCAL_SETUP),
			    "cannot learn the client's address");
		return;
	}
	s->ss.peer_can_read = h->flags & SDP_HELLO_F_RDMA_READ;
	r = sw_session_prepare(s, chosen);
	if (!r)
		r = sw_session_peer_params(s, h->msg_size, h->recv_credits);
	if (r) {
		sw_fallback(s, SDP_FB_REGISTRATION, sdp_strerror(r));
		return;
	}
	memset(&cp, 0, sizeof(cp));
	memcpy(cp.magic, "SDPc", 4);
	cp.version = SDP_PROTO_VERSION;
	memcpy(cp.key, s->key, sizeof(cp.key));
	r = sw_bind_connect(chosen, s->fd, s->ss.cq,
			    (struct sockaddr *)&s->peer, s->peerlen, &cp,
			    sizeof(cp), s, &s->ss.ep);
	if (r >= 0) {
		/* receives go up at once: the client may send as soon as it
		 * takes the connection, before this side sees it complete */
		int e = sw_session_post_recvs(s);

		if (e)
			r = e;
	}
	if (r == -ECONNREFUSED &&
	    (chosen->mod.info.caps & SDP_CAP_LOCAL_ONLY) &&
	    !connect_again(s))
		return;
	if (r < 0) {
		/* no listener at the client: it may just have left */
		sw_fallback(s, unless_ended(s, SDP_FB_PROVIDER_CONNECT),
			    sdp_strerror(r));
		return;
	}
	SW_DBG("fd %d: %s connection to the client %s", s->fd,
	       chosen->mod.name, r ? "pending" : "done");
	/* the program's bytes flow on TCP meanwhile; the handshake goes on
	 * as the provider connection completes and the client's SETUP
	 * comes (sw_progress, sw_upgrade_step) */
	if (r == 0)
		s->ss.connected = true;
}

int sw_accept(struct sw_sock *ls, struct sockaddr *addr, socklen_t *addrlen,
	      int flags, struct sw_sock **out)
{
	struct sw_sock *s;
	int fd, saved = errno;

	*out = NULL;
	fd = sdp_sys.accept4(ls->fd, addr, addrlen, flags);
	drain_probes(ls);
	if (fd < 0)
		return fd;
	if (ls->rule_tcp) {
		count_tcp(SDP_FB_RULE);
		return fd;
	}
	s = sw_sock_new(fd, SW_TCP);
	if (!s) {
		count_tcp(SDP_FB_LOCAL_SETUP);
		errno = saved;
		return fd;
	}
	s->family = ls->family;
	s->local_port = ls->local_port;
	s->nonblock = flags & SOCK_NONBLOCK;
	if (s->st)
		s->st->local_port = s->local_port;
	/* the client's address as accept gave it to the program; asked of
	 * the kernel only when needed (sw_peer_known): most connections
	 * that end soon never need it */
	if (addr && addrlen && *addrlen >= (ls->family == AF_INET6 ?
					    sizeof(struct sockaddr_in6) :
					    sizeof(struct sockaddr_in)) &&
	    addr->sa_family == ls->family) {
		s->peerlen = *addrlen < sizeof(s->peer) ? *addrlen :
							    sizeof(s->peer);
		memcpy(&s->peer, addr, s->peerlen);
		sw_peer_known(s);
	}
	if (!server_upgrade(ls, s)) {
		sw_sock_unref(s);
		errno = saved;
		return fd;
	}
	*out = s;
	errno = saved;
	return fd;
}

/* ---- connect (client) -------------------------------------------------------- */

/* The client's hello, then (msg) the program's first bytes. Returns the
 * program's bytes sent, or -errno. */
static ssize_t client_hello_send(struct sw_sock *s, const struct msghdr *msg,
				 int flags)
{
	struct sdp_hello h;
	ssize_t r;
	int i, n = 0;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, SDP_HELLO_MAGIC, SDP_MAGIC_LEN);
	h.type = SDP_HELLO_CLIENT;
	h.version = SDP_PROTO_VERSION;
	h.msg_size = sw_cfg.msg_size;
	h.recv_credits = sw_cfg.recv_bufs;
	memcpy(h.key, s->key, sizeof(h.key));
	for (i = 0; i < sw_nproviders && n < SDP_MAX_HELLO_PROVIDERS; i++) {
		if (!(s->cand_provs & (1u << i)))
			continue;
		name_copy(h.providers[n++], sw_providers[i].mod.name);
		if (sw_providers[i].mod.ext.rdma_read)
			h.flags |= SDP_HELLO_F_RDMA_READ;
	}
	h.nproviders = n;
	s->state = SW_HELLO_SENT;
	s->hello_got = 0;
	r = hello_send(s, &h, msg, flags);
	if (r < 0)
		/* the connection is broken; the program will see it */
		sw_fallback(s, SDP_FB_LOCAL_SETUP, "cannot send hello");
	return r;
}

ssize_t sw_upgrade_hello(struct sw_sock *s, const struct msghdr *msg,
			 int flags)
{
	if (s->state == SW_HELLO_PENDING)
		return client_hello_send(s, msg, flags);
	if (s->state == SW_HELLO_WAIT)
		server_hello_in(s, true);
	if ((s->state == SW_HELLO_WAIT || s->state == SW_UPGRADING) &&
	    !s->is_client && !s->hello_out)
		return server_hello_send(s, 0, msg, flags);
	return SW_NO_HELLO;
}

/*
 * The TCP listener on port in this network namespace (/proc/net/tcp{,6}):
 * its owner's user id and its socket inode. Returns 0, or -1 if none.
 */
static int tcp_listener(uint16_t port, unsigned long *uid,
			unsigned long *inode)
{
	static const char *const files[] = { "/proc/net/tcp",
					     "/proc/net/tcp6" };
	char line[512];
	unsigned i;

	for (i = 0; i < 2; i++) {
		FILE *f = fopen(files[i], "re");

		if (!f)
			continue;
		if (!fgets(line, sizeof(line), f)) {
			fclose(f);
			continue;
		}
		while (fgets(line, sizeof(line), f)) {
			char local[64], *colon;
			unsigned st, lport;

			if (sscanf(line, "%*s %63s %*s %x %*s %*s %*s %lu %*s %lu",
				   local, &st, uid, inode) != 4)
				continue;
			colon = strrchr(local, ':');
			if (!colon || st != 0x0a ||
			    sscanf(colon + 1, "%x", &lport) != 1 ||
			    lport != port)
				continue;
			fclose(f);
			return 0;
		}
		fclose(f);
	}
	return -1;
}

/* Does process pid hold the socket with this inode? -1: cannot tell. */
static int pid_holds_socket(int pid, unsigned long inode)
{
	char dir[64], path[320], link[64], want[64];
	struct dirent *e;
	DIR *d;
	int found = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	d = opendir(dir);
	if (!d)
		return -1;
	while (!found && (e = readdir(d))) {
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		found = !strcmp(link, want);
	}
	closedir(d);
	return found;
}

/*
 * Does a child of pid hold the socket with this inode? A pre-forking
 * server listens, forks the processes that accept, and often closes its
 * own copy of the TCP listener: the provider listener (made by the
 * parent, inherited by the children) still speaks for the same program.
 * -1: cannot tell.
 */
static int pid_child_holds_socket(int pid, unsigned long inode)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int found = 0, any = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return -1;
	while (!found && (e = readdir(d))) {
		char cpath[320];
		FILE *f;
		int kid;

		if (e->d_name[0] == '.')
			continue;
		snprintf(cpath, sizeof(cpath), "/proc/%d/task/%s/children",
			 pid, e->d_name);
		f = fopen(cpath, "re");
		if (!f)
			continue;
		any = 1;
		while (!found && fscanf(f, "%d", &kid) == 1)
			found = pid_holds_socket(kid, inode) == 1;
		fclose(f);
	}
	closedir(d);
	return found ? 1 : (any ? 0 : -1);
}

/*
 * Listeners proven genuine (below), remembered for a short time by the
 * identity the kernel gives for the provider listener (its creator's pid and
 * uid) and the port, so that a client making many connections to one server
 * reads /proc once, not once per connection. Only proofs are remembered: a
 * refusal is checked again every time. Within the lifetime the only way to a
 * different answer is a new process with the same pid holding the provider
 * listener while another holds the TCP listener, which takes a pid wrap.
 * The lock is only tried: a busy (or, after fork, orphaned) lock means a
 * miss, and the full check.
 */
#define GENUINE_SLOTS 16
#define GENUINE_TTL_NS 1000000000ull

struct genuine_entry {
	uint64_t expires;	/* sw_now_ns() after which it is stale */
	int32_t pid;		/* creator of the provider listener */
	uint32_t uid;
	uint16_t port;		/* TCP and provider port */
	uint8_t prov;		/* index in sw_providers */
};

static struct genuine_entry genuine_cache[GENUINE_SLOTS];
static unsigned int genuine_next;
static pthread_mutex_t genuine_lock = PTHREAD_MUTEX_INITIALIZER;

static bool genuine_cached(int prov, uint16_t port,
			   const struct sdp_listener_owner *o)
{
	uint64_t now = sw_now_ns();
	bool hit = false;
	int i;

	if (pthread_mutex_trylock(&genuine_lock))
		return false;
	for (i = 0; i < GENUINE_SLOTS && !hit; i++) {
		struct genuine_entry *e = &genuine_cache[i];

		hit = e->expires > now && e->pid == o->pid &&
		      e->uid == o->uid && e->port == port && e->prov == prov;
	}
	pthread_mutex_unlock(&genuine_lock);
	return hit;
}

static void genuine_remember(int prov, uint16_t port,
			     const struct sdp_listener_owner *o)
{
	struct genuine_entry *e;

	if (pthread_mutex_trylock(&genuine_lock))
		return;
	e = &genuine_cache[genuine_next++ % GENUINE_SLOTS];
	e->expires = sw_now_ns() + GENUINE_TTL_NS;
	e->pid = o->pid;
	e->uid = o->uid;
	e->port = port;
	e->prov = (uint8_t)prov;
	pthread_mutex_unlock(&genuine_lock);
}

/*
 * Discovery through provider p: does a switch listen at addr? Same host: a
 * provider listener answers at addr; does it belong to the process that
 * owns the TCP listener the connection goes to? Another process that took
 * the provider's name first (squatting) must not make this switch send its
 * hello to a program that runs no switch. The owner query reaches the
 * listener exactly as a probe does, so it is the probe; providers that
 * cannot tell the owner (across hosts) are probed and trusted.
 */
static bool switch_listens_at(struct sw_provider *p,
			      const struct sockaddr *addr, socklen_t len)
{
	struct sdp_listener_owner o;
	unsigned long uid, inode;
	uint16_t port;
	int r;

	r = p->mod.ops.ioctl(p->mod.prov, SDP_IOCTL_LISTENER_OWNER, addr, len,
			     &o, sizeof(o));
	if (r == -EOPNOTSUPP)
		return !p->mod.ops.probe(p->mod.prov, addr, len);
	if (r)
		return false;	/* nothing listens there */
	addr_port((const struct sockaddr_storage *)addr, &port);
	if (genuine_cached(p->index, port, &o))
		return true;
	if (tcp_listener(port, &uid, &inode) || uid != o.uid) {
		SW_WARN("provider %s: the listener for port %u is not the TCP listener's (uid %u): not upgrading",
			p->mod.name, port, o.uid);
		return false;
	}
	r = pid_holds_socket(o.pid, inode);
	if (r == 0)
		r = pid_child_holds_socket(o.pid, inode);
	if (r == 0) {
		SW_WARN("provider %s: the listener for port %u belongs to pid %d, which does not hold the TCP listener: not upgrading",
			p->mod.name, port, o.pid);
		return false;
	}
	if (r > 0)
		genuine_remember(p->index, port, &o);
	return true;	/* same user, and either proven or not visible */
}

/*
 * Destinations whose server spoke before our hello came (a banner, as SMTP
 * or FTP send): the server looked for our provider listener then, and
 * found none when it is opened only once the upgrade is due (below), so
 * that connection stayed on TCP. Later connections to them open their
 * listener at connect, as the server's look needs. A few per process; the
 * lock is only tried (after a fork it may be held by a thread that is not
 * in the child): a miss costs an upgrade, never a byte.
 */
#define SPEAKS_FIRST_SLOTS 32

struct speaks_first {
	uint16_t family, port;	/* 0 family: empty */
	uint8_t addr[16];
};

static struct speaks_first speaks_first[SPEAKS_FIRST_SLOTS];
static unsigned int speaks_first_next;
static pthread_mutex_t speaks_first_lock = PTHREAD_MUTEX_INITIALIZER;

static void dest_key(const struct sockaddr_storage *ss, struct speaks_first *k)
{
	memset(k, 0, sizeof(*k));
	k->family = ss->ss_family;
	addr_port(ss, &k->port);
	if (ss->ss_family == AF_INET)
		memcpy(k->addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	else
		memcpy(k->addr, &((const struct sockaddr_in6 *)ss)->sin6_addr,
		       16);
}

static bool speaks_first_known(const struct sockaddr_storage *ss)
{
	struct speaks_first k;
	bool hit = false;
	int i;

	dest_key(ss, &k);
	if (pthread_mutex_trylock(&speaks_first_lock))
		return false;
	for (i = 0; i < SPEAKS_FIRST_SLOTS && !hit; i++)
		hit = !memcmp(&speaks_first[i], &k, sizeof(k));
	pthread_mutex_unlock(&speaks_first_lock);
	return hit;
}

static void speaks_first_note(const struct sockaddr_storage *ss)
{
	if (speaks_first_known(ss) ||
	    pthread_mutex_trylock(&speaks_first_lock))
		return;
	dest_key(ss, &speaks_first[speaks_first_next++ % SPEAKS_FIRST_SLOTS]);
	pthread_mutex_unlock(&speaks_first_lock);
}

/*
 * Client: the provider listener the server connects to for this connection,
 * named by the connection's own local address (which connect() chose), on
 * each provider that saw a switch at the peer. Opened when the upgrade is
 * due (client_listen_due), not at connect: a connection that ends sooner
 * never pays for it. Until it exists a server that looks sees no switch
 * here (it stays on TCP and drops our hello, sw_hello_skip), and a server
 * that connects is refused and tries again (server_connect).
 */
static bool client_listen(struct sw_sock *s)
{
	struct sockaddr_storage local;
	socklen_t llen = sizeof(local);
	int i, r, n = 0;

	if (getsockname(s->fd, (struct sockaddr *)&local, &llen))
		return false;
	addr_port(&local, &s->local_port);
	if (s->st)
		s->st->local_port = s->local_port;
	for (i = 0; i < sw_nproviders; i++) {
		if (!(s->cand_provs & (1u << i)) || s->plisten[i])
			continue;
		r = sw_bind_listen(&sw_providers[i], s->fd,
				   (struct sockaddr *)&local, llen, 4,
				   &s->plisten[i]);
		if (r) {
			s->plisten[i] = NULL;
			SW_INFO("fd %d: provider %s: cannot listen on port %u: %s",
				s->fd, sw_providers[i].mod.name,
				s->local_port, sdp_strerror(r));
			continue;
		}
		n++;
	}
	return n > 0;
}

static bool client_listening(const struct sw_sock *s)
{
	int i;

	for (i = 0; i < sw_nproviders; i++)
		if (s->plisten[i])
			return true;
	return false;
}

/* When the client's listener is due: half the server's wait for its
 * connection (server_hello_take), counted from connect, so that it is
 * there before the server comes for a connection the program uses. */
static uint64_t client_listen_at(const struct sw_sock *s)
{
	return s->born_ns + (uint64_t)sw_cfg.upgrade_after_us * 500;
}

static void client_listen_due(struct sw_sock *s)
{
	if (!s->is_client || client_listening(s) || s->ss.ep ||
	    (sw_now_ns() < client_listen_at(s) &&
	     2 * (s->tcp_rx + s->tcp_tx) < sw_cfg.upgrade_after_bytes))
		return;
	if (!client_listen(s))
		sw_fallback(s, SDP_FB_LOCAL_SETUP,
			    "cannot open a provider listener");
}

int sw_connect(int fd, int family, const struct sockaddr *addr, socklen_t len,
	       struct sw_sock **out)
{
	struct sw_sock *s;
	int i, cr, e, saved = errno;
	uint32_t cand = 0;
	bool now;
	int rule;

	*out = NULL;
	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return sdp_sys.connect(fd, addr, len);
	if (!sw_init()) {
		/* providers loaded but none has a device, or none loaded */
		count_tcp(sw_nproviders ? SDP_FB_NO_DEVICE :
					  SDP_FB_NO_PROVIDER);
		return sdp_sys.connect(fd, addr, len);
	}
	rule = sw_rules_decide('c', addr);
	if (rule == SDP_RULE_TCP) {
		count_tcp(SDP_FB_RULE);
		return sdp_sys.connect(fd, addr, len);
	}
	/* discovery: which providers see a switch listening at addr? A
	 * provider whose connects cross a wire gets its listener at once: a
	 * refused connect there is not cheaply tried again. */
	now = false;
	for (i = 0; i < sw_nproviders; i++) {
		if (!sw_providers[i].usable)
			continue;
		if (switch_listens_at(&sw_providers[i], addr, len)) {
			cand |= 1u << i;
			if (!(sw_providers[i].mod.info.caps &
			      SDP_CAP_LOCAL_ONLY))
				now = true;
		}
	}
	if (!cand) {
		if (rule == SDP_RULE_SAN) {
			SW_WARN("fd %d: a rule requires the SAN but no switch listens at the peer; refusing",
				fd);
			errno = ECONNREFUSED;
			return -1;
		}
		count_tcp(SDP_FB_NO_PEER_SWITCH);
		errno = saved;
		return sdp_sys.connect(fd, addr, len);
	}
	cr = sdp_sys.connect(fd, addr, len);
	if (cr && errno != EINPROGRESS)
		return cr;	/* nothing to upgrade */
	e = cr ? errno : saved;
	s = sw_sock_new(fd, SW_CONNECTING);
	if (!s)
		goto plain;
	s->family = family;
	s->is_client = true;
	s->nonblock = fd_nonblocking(fd);
	s->born_ns = sw_now_ns();
	s->cand_provs = cand;
	memcpy(&s->peer, addr, len < sizeof(s->peer) ? len : sizeof(s->peer));
	s->peerlen = len;
	if ((now || speaks_first_known(&s->peer) ||
	     !sw_cfg.upgrade_after_us) && !client_listen(s)) {
		sw_sock_unref(s);
		goto plain;
	}
	sw_random(s->key, sizeof(s->key));
	if (s->st) {
		s->st->is_client = 1;
		sw_peer_text(s, s->st->peer, sizeof(s->st->peer));
	}
	/* no waiting, and no hello yet: it goes with the program's first
	 * bytes, or when the program first reads */
	s->state = cr ? SW_CONNECTING : SW_HELLO_PENDING;
	*out = s;
	errno = e;
	return cr;
plain:
	count_tcp(SDP_FB_LOCAL_SETUP);
	errno = e;
	return cr;
}

int sw_connect_again(struct sw_sock *s, const struct sockaddr *addr,
		     socklen_t len)
{
	int r;

	pthread_mutex_lock(&s->lock);
	r = sdp_sys.connect(s->fd, addr, len);
	if ((r == 0 || errno == EISCONN) && s->state == SW_CONNECTING) {
		int e = errno;

		sw_upgrade_progress(s);
		errno = e;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

/* ---- progress of a pending upgrade ---------------------------------------- */


/* Client: the TCP connect of a non-blocking socket may have finished. */
static void client_connecting(struct sw_sock *s)
{
	struct pollfd pf = { .fd = s->fd, .events = POLLOUT };
	int r;

	do
		r = sdp_sys.poll(&pf, 1, 0);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return;
	if (pf.revents & (POLLERR | POLLHUP)) {
		/* the connect failed; SO_ERROR stays for the program */
		sw_fallback(s, SDP_FB_NONE, "connect failed");
		return;
	}
	s->state = SW_HELLO_PENDING;
}

/* Client: the server's provider connection, which must prove K. Taken as
 * soon as it is there; given up (the listener closes, which fails the
 * server's connect) when it is not there in time. */
static void client_take_request(struct sw_sock *s)
{
	struct sdp_hello *h = (struct sdp_hello *)s->hello_buf;
	struct sw_provider *p = NULL;
	struct sdp_conn_req *req;
	int i, r = -EAGAIN;

	/* the server connects no sooner than this (server_hello_take): no
	 * use looking before */
	if (sw_now_ns() < s->upgrade_at_ns &&
	    s->tcp_rx + s->tcp_tx < sw_cfg.upgrade_after_bytes)
		return;
	/* the server chose among ours: its request tells which */
	for (i = 0; i < sw_nproviders && !p; i++) {
		if (!s->plisten[i])
			continue;
		for (;;) {
			struct sdp_connect_priv cp;
			size_t plen = sizeof(cp);

			r = sw_providers[i].mod.ops.get_request(
				s->plisten[i], &req, &cp, &plen);
			if (r)
				break;
			if (plen == sizeof(cp) &&
			    !memcmp(cp.magic, "SDPc", 4) &&
			    !memcmp(cp.key, s->key, sizeof(s->key))) {
				p = &sw_providers[i];
				break;
			}
			SW_WARN("fd %d: provider connection without the key of this TCP connection: refused",
				s->fd);
			sw_providers[i].mod.ops.reject(req);
		}
		if (r && r != -EAGAIN) {
			sw_fallback(s, SDP_FB_PROVIDER_CONNECT,
				    sdp_strerror(r));
			return;
		}
	}
	if (!p) {
		if (sw_now_ns() > s->deadline_ns)
			sw_fallback(s, SDP_FB_TIMEOUT,
				    "no provider connection from the server");
		return;
	}
	s->ss.peer_can_read = h->flags & SDP_HELLO_F_RDMA_READ;
	r = sw_session_prepare(s, p);
	if (!r)
		r = sw_session_peer_params(s, h->msg_size, h->recv_credits);
	if (r) {
		p->mod.ops.reject(req);
		sw_fallback(s, SDP_FB_REGISTRATION, sdp_strerror(r));
		return;
	}
	r = p->mod.ops.accept(req, s->ss.cq, NULL, 0, s, &s->ss.ep);
	if (r >= 0) {
		int e = sw_session_post_recvs(s);

		if (e)
			r = e;
	}
	if (r < 0) {
		sw_fallback(s, SDP_FB_PROVIDER_CONNECT, sdp_strerror(r));
		return;
	}
	sw_listeners_close(s);
	SW_DBG("fd %d: took the server's %s connection (%s)", s->fd,
	       p->mod.name, r == SDP_PENDING ? "pending" : "done");
	/* a pending accept completes in sw_progress */
	if (r == 0) {
		s->ss.connected = true;
		r = sw_upgrade_step(s);
		if (r)
			sw_fallback(s, SDP_FB_PROVIDER_CONNECT,
				    sdp_strerror(r));
	}
}

/* Client: the server's hello leads the server's TCP stream. */
static void client_hello_sent(struct sw_sock *s)
{
	struct sdp_hello *h = (struct sdp_hello *)s->hello_buf;
	struct sw_provider *p;
	char name[SDP_PROVIDER_NAME_LEN + 1] = { 0 };
	bool common = false;
	int i;

	while (s->hello_got < sizeof(struct sdp_hello)) {
		ssize_t n = sdp_sys.recv(s->fd, s->hello_buf + s->hello_got,
					 sizeof(struct sdp_hello) - s->hello_got,
					 MSG_DONTWAIT);

		if (n > 0) {
			size_t end = s->hello_got + n;
			size_t cmp = end < SDP_MAGIC_LEN ? end : SDP_MAGIC_LEN;

			s->hello_got = end;
			if (memcmp(s->hello_buf, SDP_HELLO_MAGIC, cmp)) {
				/* not a switch after all: these bytes are the
				 * program's; deliver them first. A switch
				 * listens there, so its program spoke before
				 * our hello came: next time our listener is
				 * there for its look (speaks_first). */
				s->prefix_off = 0;
				s->prefix_len = s->hello_got;
				speaks_first_note(&s->peer);
				sw_fallback(s, SDP_FB_BAD_HELLO,
					    "peer answered without a server hello");
				return;
			}
			continue;
		}
		if (n == 0) {
			/* what came before the end were hello bytes; the
			 * program sees the end */
			s->tcp_eof = true;
			sw_fallback(s, SDP_FB_BAD_HELLO,
				    "peer closed before its hello");
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			sw_fallback(s, SDP_FB_BAD_HELLO, strerror(errno));
		return;
	}
	if (h->type != SDP_HELLO_SERVER) {
		sw_fallback(s, SDP_FB_BAD_HELLO, "unexpected hello type");
		return;
	}
	if (h->status) {
		sw_fallback(s, SDP_FB_PEER_FALLBACK,
			    sdp_fallback_name(h->status));
		return;
	}
	for (i = 0; i < h->nproviders && i < SDP_MAX_HELLO_PROVIDERS &&
		    !common; i++) {
		memcpy(name, h->providers[i], SDP_PROVIDER_NAME_LEN);
		p = sw_provider_by_name(name);
		common = p && (s->cand_provs & (1u << p->index));
	}
	if (!common) {
		/* our listener closes with the fallback: the server's
		 * connect to it fails, and it stays on TCP too */
		sw_fallback(s, SDP_FB_NO_COMMON,
			    "the server listens with none of our providers");
		return;
	}
	/* its buffers, as announced; the session is made for the provider
	 * the server connects through (client_take_request) */
	if (h->msg_size < 256 || h->msg_size > (1u << 20) ||
	    h->recv_credits < 2 || h->recv_credits > 4096) {
		sw_fallback(s, SDP_FB_REGISTRATION,
			    "server hello announces unusable buffers");
		return;
	}
	s->state = SW_UPGRADING;
	s->upgrade_at_ns = sw_now_ns() +
			   (uint64_t)sw_cfg.upgrade_after_us * 1000;
	s->deadline_ns = s->upgrade_at_ns +
			 (uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull;
	client_take_request(s);
}

/*
 * Both sides: the provider connection is up or on its way, and the SETUPs
 * and SWITCHes follow (sw_progress, sw_upgrade_step). Until this side is
 * committed, the peer cannot have switched, so a failure here leaves every
 * byte on TCP; once committed, the peer's provider connection ending means
 * it gave the upgrade up before it switched (docs/protocol.md 2.5).
 */
static void upgrading(struct sw_sock *s)
{
	int r = sw_progress(s);

	if (s->state != SW_UPGRADING)
		return;
	if (r < 0)
		sw_fallback(s, unless_ended(s, SDP_FB_PROVIDER_CONNECT),
			    sdp_strerror(r));
	else if (s->ss.error)
		sw_fallback(s, SDP_FB_PROVIDER_CONNECT,
			    "protocol error during the upgrade");
	else if (s->ss.peer_dead)
		sw_fallback(s, unless_ended(s, SDP_FB_PEER_ABANDONED),
			    "the peer closed its provider connection");
	else if (s->is_client && sw_upgrade_can_give_up(s) &&
		 sw_now_ns() > s->deadline_ns)
		/* the server went quiet before it committed: it may have
		 * given up (a fork or an exec) without a word */
		sw_fallback(s, SDP_FB_TIMEOUT, "no SETUP from the server");
}

/*
 * The costly steps of an upgrade (the server's provider connect, the
 * client's accept: buffers and regions made, registered and first
 * touched; 0.4 to 1.4 ms each on a 2-CPU machine whose page faults cost
 * 11 us) take at most half of the process's time. A program that opened
 * many connections at once (wrk, a connection pool) used to run all their
 * upgrades back to back inside one call: 16 of them held every request of
 * nginx and wrk 20-30 ms, which was wrk's p99 (it adds the requests such
 * a wait held up). Now the next one waits as long as the last one took,
 * and the connections' bytes flow on TCP meanwhile; a sleeping program
 * naps no longer than a millisecond at a time until its turn.
 */
static _Atomic uint64_t costly_next_ns;

static bool costly_step_may(void)
{
	return sw_now_ns() >= atomic_load_explicit(&costly_next_ns,
						   memory_order_relaxed);
}

static void costly_step_took(uint64_t since)
{
	uint64_t now = sw_now_ns();

	atomic_store_explicit(&costly_next_ns, now + (now - since),
			      memory_order_relaxed);
}

int sw_upgrade_progress(struct sw_sock *s)
{
	uint64_t t0;

	if (s->state == SW_HELLO_WAIT)
		server_hello_in(s, false);
	if (s->state == SW_CONNECTING)
		client_connecting(s);
	if (s->state == SW_HELLO_SENT)
		client_hello_sent(s);
	if (s->state == SW_HELLO_PENDING || s->state == SW_HELLO_SENT ||
	    s->state == SW_UPGRADING)
		client_listen_due(s);
	if (s->state == SW_UPGRADING) {
		if (s->ss.ep) {
			upgrading(s);
		} else if (!costly_step_may()) {
			/* its turn comes (sw_upgrade_nap_ms) */
		} else if (s->is_client) {
			t0 = sw_now_ns();
			client_take_request(s);
			if (s->ss.ep)
				costly_step_took(t0);
		} else if (sw_now_ns() >= s->upgrade_at_ns ||
			   (!s->connect_tries && s->tcp_rx + s->tcp_tx >=
							 sw_cfg.upgrade_after_bytes)) {
			t0 = sw_now_ns();
			server_connect(s);
			costly_step_took(t0);
		}
	}
	if (s->st)
		s->st->state = s->state;
	return 0;
}

bool sw_upgrade_can_give_up(const struct sw_sock *s)
{
	return s->is_client ? !s->ss.setup_rcvd : !s->ss.setup_sent;
}

int sw_upgrade_nap_ms(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	uint64_t now;

	if (s->is_client && !ss->ep && sw_pending(s) &&
	    s->state != SW_CONNECTING && !client_listening(s)) {
		/* our listener is due then (client_listen_due) */
		now = sw_now_ns();
		return now >= client_listen_at(s) ? 1 :
		       (int)((client_listen_at(s) - now + 999999) / 1000000);
	}
	if (s->state != SW_UPGRADING) {
		s->nap_ms = 0;
		return 0;
	}
	if (!s->is_client && !ss->ep) {
		/* our provider connection is due then (server_hello_take), or
		 * when the last costly step's time is up (costly_step_may) */
		now = sw_now_ns();
		return now >= s->upgrade_at_ns ? 1 :
		       (int)((s->upgrade_at_ns - now + 999999) / 1000000);
	}
	/* No wake-up tells of the peer's next step here: the server's of
	 * the connection completing and of the client's SETUP, the client's
	 * of the server's SETUP (nothing rings before a switch point). Look
	 * now and then, less often the longer nothing changes. */
	if (!ss->ep || (s->is_client ? !ss->setup_sent || ss->setup_rcvd :
				       ss->setup_sent)) {
		s->nap_ms = 0;
		return 0;
	}
	s->nap_ms = s->nap_ms ? s->nap_ms * 2 : 1;
	if (s->nap_ms > 128)
		s->nap_ms = 128;
	return (int)s->nap_ms;
}

bool sw_upgrade_cut(struct sw_sock *s)
{
	/* a client hello already here is taken, so that the refusal can
	 * answer it */
	if (s->state == SW_HELLO_WAIT)
		server_hello_in(s, false);
	if (!sw_pending(s) || !sw_upgrade_can_give_up(s))
		return sw_pending(s);
	/* the peer cannot be sending to the provider: nothing is lost by
	 * staying on TCP; a client still waiting for our hello hears it
	 * from our hello */
	if ((s->state == SW_UPGRADING && !s->is_client && !s->hello_out) ||
	    (s->state == SW_HELLO_WAIT && !s->hello_out && client_listens(s)))
		/* the client (which holds a listener, so will read a hello
		 * first) hears it now; its own hello, still on the way, is
		 * dropped when it comes (sw_hello_skip) */
		refuse(s, SDP_FB_CUT, NULL);
	else
		sw_fallback(s, SDP_FB_CUT, NULL);
	return false;
}

/* How long a shutdown or urgent byte waits for an upgrade whose provider
 * connection is up (the rest of its stream then goes on the SAN, not TCP),
 * before it gives it up. */
#define SETTLE_FINISH_NS 20000000ull

void sw_upgrade_settle(struct sw_sock *s)
{
	uint64_t end = sw_now_ns() + SETTLE_FINISH_NS;

	/* a few steps from done: worth a short wait */
	while (sw_pending(s) && s->ss.ep && s->ss.connected &&
	       sw_now_ns() < end) {
		sw_upgrade_progress(s);
		if (!sw_pending(s))
			return;
		pthread_mutex_unlock(&s->lock);
		sw_wait_fd(s->fd, 0, 1);
		pthread_mutex_lock(&s->lock);
	}
	end = sw_now_ns() + (uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull;
	for (;;) {
		if (!sw_upgrade_cut(s))
			return;
		/* a committed server: the client's SWITCH comes as soon as
		 * its switch looks, or its provider connection ends */
		sw_upgrade_progress(s);
		if (!sw_pending(s))
			return;
		if (sw_now_ns() > end) {
			SW_WARN("fd %d: the client did not answer the upgrade within %u ms; staying on TCP (what it sends to the provider later is lost)",
				s->fd, sw_cfg.upgrade_timeout_ms);
			sw_fallback(s, SDP_FB_TIMEOUT, "no SWITCH from the client");
			return;
		}
		pthread_mutex_unlock(&s->lock);
		sw_wait_fd(s->fd, 0, 1);
		pthread_mutex_lock(&s->lock);
	}
}

int sw_upgrade_step(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_switch sw = { .tcp_bytes = s->tcp_tx };
	struct sw_proc_stats *ps = sw_stats_proc();
	int r, one = 1, zero = 0;

	if (s->state != SW_UPGRADING || !ss->connected)
		return 0;
	/* the client's SETUP says it is ready; the server's, sent once it
	 * has that, commits both */
	if (!ss->setup_sent && (s->is_client || ss->setup_rcvd)) {
		r = sw_session_send_setup(s);
		if (r)
			return r;
	}
	/* the client switches on the server's SETUP, the server on the
	 * client's SWITCH: neither switches before the other is committed */
	if (!ss->setup_sent || !(s->is_client ? ss->setup_rcvd :
					      ss->switch_rcvd))
		return 0;
	r = sw_send_ctrl(s, SDP_MSG_SWITCH, &sw, sizeof(sw), NULL, 0, 0);
	if (r)
		return r;
	s->tx_san = true;
	s->state = SW_SAN;
	/* From here our TCP stream carries only one-byte doorbells: each
	 * must leave at once, not wait behind an unacknowledged one for the
	 * peer's delayed ACK (Nagle; up to 40 ms a doorbell) nor in a cork
	 * the program set for its own bytes, which are all out of it now. */
	sdp_sys.setsockopt(s->fd, IPPROTO_TCP, TCP_CORK, &zero, sizeof(zero));
	sdp_sys.setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (ps)
		ps->conns_san++;
	if (s->st) {
		s->st->state = SW_SAN;
		snprintf(s->st->provider, sizeof(s->st->provider), "%.15s",
			 ss->prov->mod.name);
	}
	SW_DBG("fd %d: carried by %s after %llu bytes on TCP", s->fd,
	       ss->prov->mod.name, (unsigned long long)s->tcp_tx);
	sw_credit_note_size(ss);
	sw_event(s);
	/* a peer asleep on TCP in its program's read would not look at the
	 * provider: our first byte there rings it awake (sw_send_ctrl). Not
	 * now: a doorbell that the peer's program closes before reading
	 * turns its FIN into a reset, and one the peer needs only comes
	 * with data; nor before our last TCP bytes, which wake it anyway. */
	ss->switch_bell = true;
	return 0;
}

/*
 * The program reads while the peer's hello leads the TCP stream (server:
 * SW_HELLO_WAIT; client: SW_HELLO_SENT, none of it taken yet). The head is
 * looked at (block: waiting for it, the lock released, as the program's own
 * blocking read would, SO_RCVTIMEO included); when a whole hello is there,
 * one recvmsg takes it and the program's bytes behind it, which are the
 * program's since the peer cannot have switched before this side's answer.
 * Returns the program's bytes (0: only the hello came), SW_HELLO_OTHER when
 * the head is anything else (part of a hello, bytes that are no hello, the
 * end, or the state moved meanwhile: the caller goes its usual way), or
 * -errno (-EAGAIN: nothing there; with block, the program's timeout).
 */
ssize_t sw_upgrade_read_hello(struct sw_sock *s, struct msghdr *msg,
			      int flags, bool block)
{
	const size_t hl = sizeof(struct sdp_hello);
	struct iovec iov[65];
	struct msghdr m = *msg;
	size_t i, k = 1;
	ssize_t n;
	int e;

	if (!sw_hello_read_merges(s, flags))
		return SW_HELLO_OTHER;
	if (block) {
		pthread_mutex_unlock(&s->lock);
		n = sdp_sys.recv(s->fd, s->hello_buf, hl, MSG_PEEK);
		e = errno;
		pthread_mutex_lock(&s->lock);
		if (!sw_hello_read_merges(s, flags))
			return SW_HELLO_OTHER;
	} else {
		n = sdp_sys.recv(s->fd, s->hello_buf, hl,
				 MSG_PEEK | MSG_DONTWAIT);
		e = errno;
	}
	if (n < 0)
		return e == EAGAIN || e == EWOULDBLOCK || e == EINTR ? -e :
								       SW_HELLO_OTHER;
	if ((size_t)n < hl || memcmp(s->hello_buf, SDP_HELLO_MAGIC,
				     SDP_MAGIC_LEN))
		return SW_HELLO_OTHER;
	iov[0].iov_base = s->hello_buf;
	iov[0].iov_len = hl;
	for (i = 0; i < msg->msg_iovlen && k < 65; i++)
		iov[k++] = msg->msg_iov[i];
	m.msg_iov = iov;
	m.msg_iovlen = k;
	m.msg_control = NULL;
	m.msg_controllen = 0;
	n = sdp_sys.recvmsg(s->fd, &m, (flags & MSG_TRUNC) | MSG_DONTWAIT);
	if (n < (ssize_t)hl)
		/* the bytes seen a moment ago went: another reader */
		return n < 0 ? -errno : -EIO;
	n -= hl;
	s->tcp_rx += n;
	if (s->st)
		s->st->rx_tcp += n;
	if (s->is_client) {
		s->hello_got = hl;
		client_hello_sent(s);
	} else {
		server_hello_take(s);
	}
	return n;
}

/*
 * After a fallback before the peer's hello was read: the peer's stream may
 * still start with its hello (it saw ours, or our listener before it
 * closed): dropped here. Bytes that turn out to be the program's after all
 * are delivered first (prefix). Returns 0 when the program's bytes are
 * next, -EAGAIN when more must come to tell (!wait).
 */
int sw_hello_skip(struct sw_sock *s, bool wait)
{
	while (s->skip_hello) {
		size_t want = sizeof(struct sdp_hello) - s->hello_got;
		ssize_t n = sdp_sys.recv(s->fd, s->hello_buf + s->hello_got,
					 want, MSG_PEEK | MSG_DONTWAIT);
		size_t end, cmp;

		if (n == 0 || (n < 0 && errno != EAGAIN &&
			       errno != EWOULDBLOCK && errno != EINTR)) {
			/* its end: what was taken is the program's */
			s->prefix_off = 0;
			s->prefix_len = s->hello_got;
			s->skip_hello = false;
			return 0;
		}
		if (n > 0) {
			end = s->hello_got + n;
			cmp = end < SDP_MAGIC_LEN ? end : SDP_MAGIC_LEN;
			if (memcmp(s->hello_buf, SDP_HELLO_MAGIC, cmp)) {
				s->prefix_off = 0;
				s->prefix_len = s->hello_got;
				s->skip_hello = false;
				return 0;
			}
			if (end >= SDP_MAGIC_LEN) {
				/* a hello: its bytes are ours to drop */
				sdp_sys.recv(s->fd, s->hello_buf + s->hello_got,
					     n, MSG_DONTWAIT);
				s->hello_got = end;
				if (end == sizeof(struct sdp_hello)) {
					s->hello_got = 0;
					s->skip_hello = false;
				}
				continue;
			}
		}
		if (!wait)
			return -EAGAIN;
		pthread_mutex_unlock(&s->lock);
		sw_wait_fd(s->fd, POLLIN, -1);
		pthread_mutex_lock(&s->lock);
	}
	return 0;
}
