/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * upgrade.c - connection set-up (DESIGN.md section 4): the TCP connection is
 * made first; discovery through the providers' listeners; the client's hello
 * on TCP carries a fresh key K; the server's switch connects through the
 * chosen provider to a listener the client holds for this connection and
 * proves K; the server's hello tells the client. Any failure before data
 * moves ends in sw_fallback(). docs/protocol.md section 2 is the reference.
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

#include "rules.h"
#include "session.h"
#include "sw_internal.h"

void sw_peer_text(const struct sw_sock *s, char *buf, size_t len);

/* ---- helpers ---------------------------------------------------------------- */

static bool is_tcp_socket(int fd, int *family)
{
	int v;
	socklen_t l = sizeof(v);

	if (sdp_sys.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) ||
	    (v != AF_INET && v != AF_INET6))
		return false;
	*family = v;
	l = sizeof(v);
	if (sdp_sys.getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) ||
	    v != SOCK_STREAM)
		return false;
	l = sizeof(v);
	if (sdp_sys.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &l) ||
	    v != IPPROTO_TCP)
		return false;
	return true;
}

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

static int ms_left(uint64_t deadline)
{
	uint64_t now = sw_now_ns();

	if (now >= deadline)
		return 0;
	if ((deadline - now) / 1000000 >= (uint64_t)INT_MAX)
		return INT_MAX;
	return (int)((deadline - now + 999999) / 1000000);
}

static void addr_port(const struct sockaddr_storage *ss, uint16_t *port)
{
	if (ss->ss_family == AF_INET)
		*port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
	else
		*port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

static void note_peer(struct sw_sock *s)
{
	s->peerlen = sizeof(s->peer);
	if (getpeername(s->fd, (struct sockaddr *)&s->peer, &s->peerlen))
		s->peerlen = 0;
	if (s->st) {
		sw_peer_text(s, s->st->peer, sizeof(s->st->peer));
		s->st->is_client = s->is_client;
		s->st->local_port = s->local_port;
	}
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

static void send_abandon(struct sw_sock *s)
{
	struct sdp_abandon ab;

	memcpy(ab.magic, SDP_ABANDON_MAGIC, SDP_MAGIC_LEN);
	memcpy(ab.key, s->key, sizeof(ab.key));
	if (sw_tcp_write_all(s->fd, &ab, sizeof(ab)))
		SW_WARN("fd %d: could not send the abandon marker", s->fd);
}

void sw_upgrade_abandon(struct sw_sock *s, int reason, const char *why)
{
	if (s->state == SW_HELLO_SENT || s->state == SW_UPGRADING) {
		send_abandon(s);
		s->marker_check = true;
		if (s->state == SW_HELLO_SENT &&
		    s->hello_got < sizeof(struct sdp_hello))
			s->expect_server_hello = true;
	}
	sw_fallback(s, reason, why);
}

/* ---- listen / accept (server) --------------------------------------------- */

int sw_listen(int fd, int backlog, struct sw_sock **out)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	struct sw_sock *s = NULL;
	int family, i, n = 0, r;

	*out = NULL;
	r = sdp_sys.listen(fd, backlog);
	if (r)
		return r;
	if (!sw_init() || !is_tcp_socket(fd, &family))
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

/* Discovery probes land on the server's provider listeners: discard them. */
static void drain_probes(struct sw_sock *ls)
{
	int i;

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
		}
	}
}

/*
 * Waits for the client's hello at the head of the TCP stream without
 * consuming anything that is not one. Returns 1 with the hello in s->hello_buf,
 * 0 when the stream does not start with a hello (nothing consumed), < 0 on
 * timeout.
 */
static int server_read_hello(struct sw_sock *s, struct sw_provider *p)
{
	uint64_t deadline = sw_now_ns() +
			    (uint64_t)sw_cfg.hello_timeout_ms * 1000000ull;
	uint64_t next_probe = sw_now_ns() + 50000000ull;

	for (;;) {
		ssize_t n = sdp_sys.recv(s->fd, s->hello_buf,
					 sizeof(s->hello_buf),
					 MSG_PEEK | MSG_DONTWAIT);

		if (n > 0) {
			size_t cmp = n < SDP_MAGIC_LEN ? (size_t)n : SDP_MAGIC_LEN;

			if (memcmp(s->hello_buf, SDP_HELLO_MAGIC, cmp))
				return 0;
			if ((size_t)n == sizeof(struct sdp_hello))
				break;
		} else if (n == 0) {
			return 0; /* EOF: let the program see it */
		} else if (errno != EAGAIN && errno != EWOULDBLOCK &&
			   errno != EINTR) {
			return 0;
		}
		if (!ms_left(deadline))
			return -ETIMEDOUT;
		/* a client that gave up before sending closes its listener */
		if (n <= 0 && sw_now_ns() > next_probe) {
			if (p->mod.ops.probe(p->mod.prov,
					     (struct sockaddr *)&s->peer,
					     s->peerlen))
				return 0;
			next_probe = sw_now_ns() + 50000000ull;
		}
		sw_wait_fd(s->fd, POLLIN, ms_left(deadline) < 10 ?
						  ms_left(deadline) : 10);
	}
	/* consume exactly the hello */
	if (sdp_sys.recv(s->fd, s->hello_buf, sizeof(struct sdp_hello),
			 MSG_WAITALL) != sizeof(struct sdp_hello))
		return -EIO;
	return 1;
}

static void server_hello_send(struct sw_sock *s, int status,
			      struct sw_provider *p)
{
	struct sdp_hello h;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, SDP_HELLO_MAGIC, SDP_MAGIC_LEN);
	h.type = SDP_HELLO_SERVER;
	h.version = SDP_PROTO_VERSION;
	h.status = status;
	h.msg_size = sw_cfg.msg_size;
	h.recv_credits = sw_cfg.recv_bufs;
	if (p && !status) {
		h.nproviders = 1;
		name_copy(h.providers[0], p->mod.name);
		if (p->mod.ext.rdma_read)
			h.flags |= SDP_HELLO_F_RDMA_READ;
	}
	if (sw_tcp_write_all(s->fd, &h, sizeof(h)))
		SW_WARN("fd %d: could not send the server hello", s->fd);
}

/* The accepted connection s: find out whether a switch is at the other end
 * and start the upgrade. Returns true when s stays managed. */
static bool server_upgrade(struct sw_sock *ls, struct sw_sock *s)
{
	struct sdp_hello *h = (struct sdp_hello *)s->hello_buf;
	struct sdp_connect_priv cp;
	struct sw_provider *p = NULL, *chosen = NULL;
	int i, r;

	/* a hello already here settles it (its client may have given up
	 * and closed its listener since: the upgrade then fails cleanly) */
	{
		uint8_t head[SDP_MAGIC_LEN];
		ssize_t n = sdp_sys.recv(s->fd, head, sizeof(head),
					 MSG_PEEK | MSG_DONTWAIT);

		if (n > 0 && memcmp(head, SDP_HELLO_MAGIC, n)) {
			SW_DBG("fd %d: accepted, first bytes are no hello: plain TCP",
			       s->fd);
			count_tcp(SDP_FB_NO_PEER_SWITCH);
			return false;
		}
		if (n > 0) {
			for (i = 0; i < sw_nproviders && !p; i++)
				if (ls->plisten[i] && sw_providers[i].usable)
					p = &sw_providers[i];
			if (p)
				goto hello;
		}
	}
	/* discovery: does the client hold a provider listener for this
	 * connection? Only then can a hello be on its way. */
	for (i = 0; i < sw_nproviders && !p; i++) {
		if (!ls->plisten[i] || !sw_providers[i].usable)
			continue;
		if (!sw_providers[i].mod.ops.probe(sw_providers[i].mod.prov,
						   (struct sockaddr *)&s->peer,
						   s->peerlen))
			p = &sw_providers[i];
	}
	if (!p) {
		SW_DBG("fd %d: accepted, no provider listener at the client: plain TCP",
		       s->fd);
		count_tcp(SDP_FB_NO_PEER_SWITCH);
		return false;
	}
hello:
	r = server_read_hello(s, p);
	if (r <= 0) {
		count_tcp(r < 0 ? SDP_FB_TIMEOUT : SDP_FB_NO_PEER_SWITCH);
		SW_INFO("fd %d: client listener found but no hello (%s); plain TCP",
			s->fd, r < 0 ? "timeout" : "other data");
		return false;
	}
	/* from here on the client is a switch and expects a server hello */
	s->state = SW_UPGRADING;
	if (h->type != SDP_HELLO_CLIENT || h->nproviders == 0 ||
	    h->nproviders > SDP_MAX_HELLO_PROVIDERS || h->status ||
	    (h->version == SDP_PROTO_VERSION &&
	     memcmp(h->reserved, (const uint8_t[24]){ 0 },
		    sizeof(h->reserved)))) {
		server_hello_send(s, SDP_FB_BAD_HELLO, NULL);
		s->marker_check = true;
		sw_fallback(s, SDP_FB_BAD_HELLO, "malformed client hello");
		return true;
	}
	memcpy(s->key, h->key, sizeof(s->key));
	if (h->version != SDP_PROTO_VERSION) {
		server_hello_send(s, SDP_FB_VERSION, NULL);
		s->marker_check = true;
		sw_fallback(s, SDP_FB_VERSION, "client speaks another version");
		return true;
	}
	for (i = 0; i < h->nproviders && !chosen; i++) {
		char name[SDP_PROVIDER_NAME_LEN + 1] = { 0 };
		struct sw_provider *c;

		memcpy(name, h->providers[i], SDP_PROVIDER_NAME_LEN);
		c = sw_provider_by_name(name);
		if (c && ls->plisten[c->index])
			chosen = c;
	}
	if (!chosen) {
		server_hello_send(s, SDP_FB_NO_COMMON, NULL);
		s->marker_check = true;
		sw_fallback(s, SDP_FB_NO_COMMON, NULL);
		return true;
	}
	s->ss.peer_can_read = h->flags & SDP_HELLO_F_RDMA_READ;
	r = sw_session_prepare(s, chosen);
	if (!r)
		r = sw_session_peer_params(s, h->msg_size, h->recv_credits);
	if (r) {
		server_hello_send(s, SDP_FB_REGISTRATION, NULL);
		s->marker_check = true;
		sw_fallback(s, SDP_FB_REGISTRATION, sdp_strerror(r));
		return true;
	}
	memset(&cp, 0, sizeof(cp));
	memcpy(cp.magic, "SDPc", 4);
	cp.version = SDP_PROTO_VERSION;
	memcpy(cp.key, s->key, sizeof(cp.key));
	r = chosen->mod.ops.connect(chosen->mod.prov, s->ss.cq,
				    (struct sockaddr *)&s->peer, s->peerlen,
				    &cp, sizeof(cp), s, &s->ss.ep);
	if (r >= 0) {
		/* receives go up at once: the client may send as soon as it
		 * takes the connection, before this side sees it complete */
		int e = sw_session_post_recvs(s);

		if (e)
			r = e;
	}
	if (r < 0) {
		server_hello_send(s, SDP_FB_PROVIDER_CONNECT, NULL);
		s->marker_check = true;
		sw_fallback(s, SDP_FB_PROVIDER_CONNECT, sdp_strerror(r));
		return true;
	}
	server_hello_send(s, 0, chosen);
	SW_DBG("fd %d: accepted, server hello sent, %s connect %s", s->fd,
	       chosen->mod.name, r ? "pending" : "done");
	s->deadline_ns = sw_now_ns() +
			 (uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull;
	if (r == 0) {
		r = sw_session_start(s);
		if (r) {
			send_abandon(s);
			s->marker_check = true;
			sw_fallback(s, SDP_FB_PROVIDER_CONNECT,
				    sdp_strerror(r));
		}
	}
	return true;
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
	note_peer(s);
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

static void client_hello_send(struct sw_sock *s)
{
	struct sdp_hello h;
	int i, n = 0;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, SDP_HELLO_MAGIC, SDP_MAGIC_LEN);
	h.type = SDP_HELLO_CLIENT;
	h.version = SDP_PROTO_VERSION;
	h.msg_size = sw_cfg.msg_size;
	h.recv_credits = sw_cfg.recv_bufs;
	memcpy(h.key, s->key, sizeof(h.key));
	for (i = 0; i < sw_nproviders && n < SDP_MAX_HELLO_PROVIDERS; i++) {
		if (!s->plisten[i])
			continue;
		name_copy(h.providers[n++], sw_providers[i].mod.name);
		if (sw_providers[i].mod.ext.rdma_read)
			h.flags |= SDP_HELLO_F_RDMA_READ;
	}
	h.nproviders = n;
	s->state = SW_HELLO_SENT;
	s->hello_got = 0;
	s->deadline_ns = sw_now_ns() +
			 (uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull;
	if (sw_tcp_write_all(s->fd, &h, sizeof(h))) {
		/* the connection is broken; the program will see it */
		sw_fallback(s, SDP_FB_LOCAL_SETUP, "cannot send hello");
	}
}

/* Ensures the socket has a local port, binding an ephemeral one if the
 * program did not bind; the client's provider listener uses that port. */
static int ensure_bound(struct sw_sock *s, struct sockaddr_storage *local,
			socklen_t *len)
{
	*len = sizeof(*local);
	if (getsockname(s->fd, (struct sockaddr *)local, len))
		return -errno;
	addr_port(local, &s->local_port);
	if (s->local_port)
		return 0;
	memset(local, 0, sizeof(*local));
	local->ss_family = s->family;
	*len = s->family == AF_INET ? sizeof(struct sockaddr_in) :
				      sizeof(struct sockaddr_in6);
	if (sdp_sys.bind(s->fd, (struct sockaddr *)local, *len))
		return -errno;
	*len = sizeof(*local);
	if (getsockname(s->fd, (struct sockaddr *)local, len))
		return -errno;
	addr_port(local, &s->local_port);
	return 0;
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

int sw_connect(int fd, const struct sockaddr *addr, socklen_t len,
	       struct sw_sock **out)
{
	struct sockaddr_storage local;
	socklen_t llen;
	struct sw_sock *s;
	int family, i, r, ncand = 0, nlisten = 0, saved = errno;
	bool cand[SW_MAX_PROVIDERS] = { false };
	int rule;

	*out = NULL;
	if (!addr || !is_tcp_socket(fd, &family) ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
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
	/* discovery: which providers see a switch listening at addr? */
	for (i = 0; i < sw_nproviders; i++) {
		if (!sw_providers[i].usable)
			continue;
		if (switch_listens_at(&sw_providers[i], addr, len)) {
			cand[i] = true;
			ncand++;
		}
	}
	if (!ncand) {
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
	s = sw_sock_new(fd, SW_CONNECTING);
	if (!s)
		return sdp_sys.connect(fd, addr, len);
	s->family = family;
	s->is_client = true;
	s->nonblock = fd_nonblocking(fd);
	memcpy(&s->peer, addr, len < sizeof(s->peer) ? len : sizeof(s->peer));
	s->peerlen = len;
	r = ensure_bound(s, &local, &llen);
	if (r) {
		SW_INFO("fd %d: cannot bind a local port for the upgrade: %s",
			fd, sdp_strerror(r));
		goto plain;
	}
	for (i = 0; i < sw_nproviders; i++) {
		if (!cand[i])
			continue;
		r = sw_providers[i].mod.ops.listen(sw_providers[i].mod.prov,
						   (struct sockaddr *)&local,
						   llen, 4, &s->plisten[i]);
		if (r) {
			s->plisten[i] = NULL;
			SW_INFO("fd %d: provider %s: cannot listen on port %u: %s",
				fd, sw_providers[i].mod.name, s->local_port,
				sdp_strerror(r));
			continue;
		}
		nlisten++;
	}
	if (!nlisten)
		goto plain;
	sw_random(s->key, sizeof(s->key));
	if (s->st) {
		s->st->is_client = 1;
		s->st->local_port = s->local_port;
		sw_peer_text(s, s->st->peer, sizeof(s->st->peer));
	}

	r = sdp_sys.connect(fd, addr, len);
	if (r == 0) {
		/* no waiting here: the server's program may accept only
		 * later (even in this thread); the first I/O settles it */
		client_hello_send(s);
		*out = s;
		errno = saved;
		return 0;
	}
	if (errno == EINPROGRESS) {
		int e = errno;

		/* same-host handshakes finish in microseconds: finishing
		 * here lets the hello leave at once */
		if (sw_wait_fd(fd, POLLOUT, 1) > 0)
			sw_upgrade_progress(s, false);
		*out = s;
		errno = e;
		return -1;
	}
	/* connect failed: nothing to upgrade */
	{
		int e = errno;

		sw_listeners_close(s);
		sw_sock_unref(s);
		errno = e;
		return -1;
	}
plain:
	sw_listeners_close(s);
	sw_sock_unref(s);
	count_tcp(SDP_FB_LOCAL_SETUP);
	errno = saved;
	return sdp_sys.connect(fd, addr, len);
}

int sw_connect_again(struct sw_sock *s, const struct sockaddr *addr,
		     socklen_t len)
{
	int r;

	pthread_mutex_lock(&s->lock);
	r = sdp_sys.connect(s->fd, addr, len);
	if ((r == 0 || errno == EISCONN) && s->state == SW_CONNECTING) {
		int e = errno;

		sw_upgrade_progress(s, false);
		errno = e;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

/* ---- progress of a pending upgrade ---------------------------------------- */

/* Client: the TCP connect of a non-blocking socket may have finished. */
static int client_connecting(struct sw_sock *s, bool wait)
{
	struct pollfd pf = { .fd = s->fd, .events = POLLOUT };
	int r;

	do
		r = sdp_sys.poll(&pf, 1, wait ? -1 : 0);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return -EAGAIN;
	if (pf.revents & (POLLERR | POLLHUP)) {
		/* the connect failed; SO_ERROR stays for the program */
		sw_fallback(s, SDP_FB_NONE, "connect failed");
		return 0;
	}
	client_hello_send(s);
	return 0;
}

/* Client: the server hello, then the provider connection proving K. */
static int client_hello_sent(struct sw_sock *s, bool wait)
{
	struct sdp_hello *h = (struct sdp_hello *)s->hello_buf;
	struct sw_provider *p;
	char name[SDP_PROVIDER_NAME_LEN + 1] = { 0 };
	bool bell;
	int r;

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
				 * program's; deliver them first */
				s->prefix_off = 0;
				s->prefix_len = s->hello_got;
				sw_fallback(s, SDP_FB_BAD_HELLO,
					    "peer answered without a server hello");
				return 0;
			}
			continue;
		}
		if (n == 0) {
			s->tcp_eof = true;
			sw_fallback(s, SDP_FB_BAD_HELLO,
				    "peer closed during the upgrade");
			return 0;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			sw_fallback(s, SDP_FB_BAD_HELLO, strerror(errno));
			return 0;
		}
		if (!wait)
			return -EAGAIN;
		if (!ms_left(s->deadline_ns))
			goto abandon;
		sw_wait_fd(s->fd, POLLIN, ms_left(s->deadline_ns));
	}
	if (h->type != SDP_HELLO_SERVER) {
		sw_fallback(s, SDP_FB_BAD_HELLO, "unexpected hello type");
		return 0;
	}
	if (h->status) {
		sw_fallback(s, SDP_FB_PEER_FALLBACK,
			    sdp_fallback_name(h->status));
		return 0;
	}
	memcpy(name, h->providers[0], SDP_PROVIDER_NAME_LEN);
	p = sw_provider_by_name(name);
	if (!p || !s->plisten[p->index]) {
		send_abandon(s);
		s->marker_check = true;
		sw_fallback(s, SDP_FB_NO_COMMON, "server chose an unknown provider");
		return 0;
	}
	s->ss.peer_can_read = h->flags & SDP_HELLO_F_RDMA_READ;
	if (!s->ss.cq) {
		r = sw_session_prepare(s, p);
		if (!r)
			r = sw_session_peer_params(s, h->msg_size,
						   h->recv_credits);
		if (r) {
			send_abandon(s);
			s->marker_check = true;
			sw_fallback(s, SDP_FB_REGISTRATION, sdp_strerror(r));
			return 0;
		}
	}
	/* the server connected before sending its hello: its request is
	 * waiting (or about to be) on our listener; anyone else's is not */
	for (;;) {
		struct sdp_conn_req *req;
		struct sdp_connect_priv cp;
		size_t plen = sizeof(cp);

		r = p->mod.ops.get_request(s->plisten[p->index], &req, &cp,
					   &plen);
		if (r == 0) {
			if (plen != sizeof(cp) || memcmp(cp.magic, "SDPc", 4) ||
			    memcmp(cp.key, s->key, sizeof(s->key))) {
				SW_WARN("fd %d: provider connection without the key of this TCP connection: refused",
					s->fd);
				p->mod.ops.reject(req);
				continue;
			}
			r = p->mod.ops.accept(req, s->ss.cq, NULL, 0, s,
					      &s->ss.ep);
			if (r >= 0) {
				int e = sw_session_post_recvs(s);

				if (e)
					r = e;
			}
			if (r < 0) {
				send_abandon(s);
				s->marker_check = true;
				sw_fallback(s, SDP_FB_PROVIDER_CONNECT,
					    sdp_strerror(r));
				return 0;
			}
			break;
		}
		if (r != -EAGAIN) {
			send_abandon(s);
			s->marker_check = true;
			sw_fallback(s, SDP_FB_PROVIDER_CONNECT, sdp_strerror(r));
			return 0;
		}
		/* the server may have given up: its marker is on TCP. A
		 * doorbell is not one: a server whose provider connect
		 * completed rings, and on a provider whose connection
		 * requests travel apart from TCP (verbs) the ring can
		 * overtake the request; it stays for the session. */
		bell = false;
		{
			uint8_t b;
			ssize_t n = sdp_sys.recv(s->fd, &b, 1,
						 MSG_PEEK | MSG_DONTWAIT);

			if (n > 0 && b == SDP_DOORBELL) {
				bell = true;
			} else if (n > 0 || n == 0) {
				SW_DBG("fd %d: waiting for the server's provider connection, TCP has %s (byte 0x%02x)",
				       s->fd, n ? "data" : "EOF",
				       n ? b : 0);
				s->marker_check = true;
				sw_fallback(s, SDP_FB_PEER_ABANDONED, NULL);
				return 0;
			}
		}
		if (wait && !ms_left(s->deadline_ns)) {
			send_abandon(s);
			s->marker_check = true;
			sw_fallback(s, SDP_FB_TIMEOUT,
				    "no provider connection from the server");
			return 0;
		}
		if (!wait)
			return -EAGAIN;
		{
			struct pollfd pf[2] = {
				{ .fd = p->mod.ops.listener_fd(
					  s->plisten[p->index]),
				  .events = POLLIN },
				{ .fd = s->fd, .events = POLLIN },
			};
			int nfd = pf[0].fd >= 0 ? 2 : 1;

			/* a doorbell keeps TCP readable: watch the listener
			 * alone (or sleep briefly when it has no fd) */
			if (bell) {
				nfd = pf[0].fd >= 0 ? 1 : 0;
				if (!nfd)
					pf[0].fd = -1;
			}
			sdp_sys.poll(pf, nfd ? (nfds_t)nfd : 1,
				     ms_left(s->deadline_ns) < (bell ? 1 : 10) ?
					     ms_left(s->deadline_ns) :
					     (bell ? 1 : 10));
		}
	}
	sw_listeners_close(s);
	SW_DBG("fd %d: took the server's %s connection (%s)", s->fd,
	       p->mod.name, r == SDP_PENDING ? "pending" : "done");
	if (r == SDP_PENDING) {
		/* the provider finishes the connection later: wait for its
		 * completion as the server side does */
		s->state = SW_UPGRADING;
		return 0;
	}
	r = sw_session_start(s);
	if (r) {
		send_abandon(s);
		s->marker_check = true;
		sw_fallback(s, SDP_FB_PROVIDER_CONNECT, sdp_strerror(r));
	}
	return 0;

abandon:
	/* the server did not answer in time (its program has not accepted
	 * yet): give up; its hello, when it comes, is skipped */
	send_abandon(s);
	s->expect_server_hello = true;
	s->marker_check = true;
	sw_fallback(s, SDP_FB_TIMEOUT, "no server hello");
	return 0;
}

/* Server: the provider connect to the client's listener is pending. */
static int server_upgrading(struct sw_sock *s, bool wait)
{
	for (;;) {
		int r = sw_progress(s);
		uint8_t b;
		ssize_t n;

		if (s->state != SW_UPGRADING)
			return 0;
		if (r < 0) {
			s->marker_check = true;
			sw_fallback(s, SDP_FB_PROVIDER_CONNECT, sdp_strerror(r));
			return 0;
		}
		/* TCP bytes now: a doorbell (the client took the connection:
		 * its completion is on the way) or the client's abandon
		 * marker */
		n = sdp_sys.recv(s->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n == 1 && b == SDP_DOORBELL) {
			/* the client carries the connection already: its
			 * bytes may be in our ring, so there is no way back
			 * to TCP; the provider completes (or reports the
			 * client gone) */
			if (!wait)
				return -EAGAIN;
			sw_wait_fd(s->fd, 0, 1);
			continue;
		} else if (n >= 0) {
			SW_DBG("fd %d: upgrade pending, TCP has %s (byte 0x%02x)",
			       s->fd, n ? "data" : "EOF", n ? b : 0);
			s->marker_check = true;
			sw_fallback(s, SDP_FB_PEER_ABANDONED, NULL);
			return 0;
		}
		if (wait && !ms_left(s->deadline_ns)) {
			send_abandon(s);
			s->marker_check = true;
			sw_fallback(s, SDP_FB_TIMEOUT,
				    "client did not take the provider connection");
			return 0;
		}
		if (!wait)
			return -EAGAIN;
		/* Sleep on the TCP fd only: the client rings a doorbell on
		 * it as soon as it takes the provider connection, and the
		 * 5 ms cap covers a client that does not. The CQ's notify
		 * fd is not used: a provider may make it on first use, and
		 * with one CQ per connection that would cost fds for the
		 * life of every connection (docs/provider-shm.md). */
		{
			struct pollfd pf = { .fd = s->fd, .events = POLLIN };

			sdp_sys.poll(&pf, 1, ms_left(s->deadline_ns) < 5 ?
						     ms_left(s->deadline_ns) :
						     5);
		}
	}
}

int sw_upgrade_progress(struct sw_sock *s, bool wait)
{
	int r = 0;

	/* Only a caller that must have the answer (a blocking read, a write
	 * that no longer fits the pending buffer) gives the peer a deadline;
	 * the peer's program may simply not have run yet, and that is no
	 * reason to give up: polls and non-blocking calls just look. */
	if (wait)
		s->deadline_ns = s->wait_forever ? UINT64_MAX :
			sw_now_ns() +
			(uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull;

	if (s->state == SW_CONNECTING) {
		r = client_connecting(s, wait);
		if (r)
			return r;
	}
	if (s->state == SW_HELLO_SENT)
		r = client_hello_sent(s, wait);
	if (s->state == SW_UPGRADING)
		r = server_upgrading(s, wait);
	if (s->st)
		s->st->state = s->state;
	return r;
}

/* ---- TCP after a failed upgrade ----------------------------------------------- */

int sw_tcp_marker_skip(struct sw_sock *s, bool wait)
{
	uint8_t buf[sizeof(struct sdp_hello)];
	struct sdp_abandon want;
	ssize_t n;

	if (s->expect_server_hello) {
		/* finish reading the server hello we gave up waiting for */
		while (s->hello_got < sizeof(struct sdp_hello)) {
			n = sdp_sys.recv(s->fd, s->hello_buf + s->hello_got,
					 sizeof(struct sdp_hello) - s->hello_got,
					 wait ? 0 : MSG_DONTWAIT);
			if (n > 0) {
				s->hello_got += n;
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n == 0) {
				s->expect_server_hello = false;
				s->marker_check = false;
				return 0;
			}
			return -errno;
		}
		s->expect_server_hello = false;
		if (memcmp(s->hello_buf, SDP_HELLO_MAGIC, SDP_MAGIC_LEN)) {
			/* not a hello: the program's bytes after all */
			s->prefix_off = 0;
			s->prefix_len = s->hello_got;
			s->marker_check = false;
			return 0;
		}
	}
	if (!s->marker_check)
		return 0;
	memcpy(want.magic, SDP_ABANDON_MAGIC, SDP_MAGIC_LEN);
	memcpy(want.key, s->key, sizeof(want.key));
	for (;;) {
		n = sdp_sys.recv(s->fd, buf, sizeof(want),
				 MSG_PEEK | MSG_DONTWAIT);
		if (n > 0) {
			if (memcmp(buf, &want, n)) {
				s->marker_check = false;
				return 0;
			}
			if ((size_t)n == sizeof(want)) {
				sdp_sys.recv(s->fd, buf, sizeof(want),
					     MSG_WAITALL);
				s->marker_check = false;
				return 0;
			}
		} else if (n == 0) {
			s->marker_check = false;
			return 0;
		} else if (errno != EAGAIN && errno != EWOULDBLOCK &&
			   errno != EINTR) {
			s->marker_check = false;
			return 0;
		}
		if (!wait)
			return -EAGAIN;
		sw_wait_fd(s->fd, POLLIN, -1);
	}
}
