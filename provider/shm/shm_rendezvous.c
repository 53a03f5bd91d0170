// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * shm_rendezvous.c - the shm address space: abstract UNIX-domain listeners
 * named by (IP, port), probes and owner queries against them, and what a
 * listener does with the connections it is offered. Nothing here blocks:
 * a connection whose first message has not come yet waits in the listener
 * (docs/provider-shm.md, "Address space and rendezvous").
 *
 * A client that asked who owns a listener keeps its rendezvous socket as a
 * watch (one per destination, a few per process): while the listener lives
 * the owner holds the other end, so a later query for the same destination
 * costs one poll instead of a rendezvous, and the listener's close (or its
 * process's end) shows as a hang-up on the watch.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

#define SHM_MAX_NAMES 3

struct shm_name {
	struct sockaddr_un sun;
	socklen_t len;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void set_name(struct shm_name *n, const char *host, unsigned port)
{
	n->len = shm_sockname(&n->sun, host, port);
}

/*
 * The rendezvous names for addr, most specific first. For listen only the
 * first is used; connect and probe try them in order: the exact address,
 * then the IPv4 wildcard "*", then the IPv6 wildcard "[::]" (a dual-stack
 * listener also takes IPv4). IPv4-mapped IPv6 addresses count as IPv4.
 */
static int addr_names(const struct sockaddr *a, socklen_t alen,
		      struct shm_name *names)
{
	char ip[INET6_ADDRSTRLEN + 2], txt[INET6_ADDRSTRLEN];
	struct in_addr v4;
	unsigned port;

	if (!a)
		return -EINVAL;
	if (a->sa_family == AF_INET && alen >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *s = (const void *)a;

		v4 = s->sin_addr;
		port = ntohs(s->sin_port);
	} else if (a->sa_family == AF_INET6 &&
		   alen >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *s = (const void *)a;

		port = ntohs(s->sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr)) {
			memcpy(&v4, &s->sin6_addr.s6_addr[12], 4);
		} else {
			if (IN6_IS_ADDR_UNSPECIFIED(&s->sin6_addr)) {
				set_name(&names[0], "[::]", port);
				return 1;
			}
			inet_ntop(AF_INET6, &s->sin6_addr, txt, sizeof(txt));
			snprintf(ip, sizeof(ip), "[%s]", txt);
			set_name(&names[0], ip, port);
			set_name(&names[1], "[::]", port);
			return 2;
		}
	} else {
		return -EAFNOSUPPORT;
	}
	if (v4.s_addr == htonl(INADDR_ANY)) {
		set_name(&names[0], "*", port);
		set_name(&names[1], "[::]", port);
		return 2;
	}
	inet_ntop(AF_INET, &v4, ip, sizeof(ip));
	set_name(&names[0], ip, port);
	set_name(&names[1], "*", port);
	set_name(&names[2], "[::]", port);
	return 3;
}

/* Connects a new socket to the first name that has a listener. creds:
 * the socket will receive the peer's SCM_CREDENTIALS (a connect's
 * answer); a probe or an owner query needs none. exact: the first name
 * only, no wildcard after it (a bound connection's listener is always at
 * its exact address, and a wildcard name is anybody's to take). One socket
 * tries the names in turn (a refused connect leaves it unconnected): a
 * client of a server without a switch pays one socket per connect, not
 * one per name. */
int shm_rendezvous(const struct sockaddr *a, socklen_t alen, bool creds,
		   bool exact, int *out)
{
	struct shm_name names[SHM_MAX_NAMES];
	int n, i, fd, one = 1, e;

	n = addr_names(a, alen, names);
	if (n < 0)
		return n;
	if (exact)
		n = 1;
	fd = shm_fd_keep(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK |
				SOCK_CLOEXEC, 0));
	if (fd < 0)
		return fd;
	if (creds)
		setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	for (i = 0; i < n; i++) {
		if (!connect(fd, (struct sockaddr *)&names[i].sun,
			     names[i].len)) {
			*out = fd;
			return 0;
		}
		/* EAGAIN: the listener's backlog is full; refuse as TCP does */
		if (errno != ECONNREFUSED && errno != ENOENT &&
		    errno != EAGAIN)
			break;
	}
	e = i < n ? errno : ECONNREFUSED;
	close(fd);
	return -e;
}

int shm_probe(struct sdp_provider *p, const struct sockaddr *addr,
	      socklen_t addrlen)
{
	int fd, ret;

	ret = shm_rendezvous(addr, addrlen, false, false, &fd);
	if (ret)
		return ret;
	close(fd);	/* the listener drops an empty connection silently */
	return 0;
}

/*
 * Does the owner of the other end of TCP connection tcp_fd hold a provider
 * listener at that end's exact address? Its creator (SO_PEERCRED) must be
 * the user that owns that socket (sock_diag): a name another user made
 * there is nobody's listener, and the caller must not take it for a
 * switch (a hello written to a program without one).
 */
int shm_probe_bound(struct sdp_provider *p, int tcp_fd)
{
	struct sockaddr_storage local, peer;
	struct shm_tcp_peer tp;
	struct ucred cr;
	socklen_t l = sizeof(cr);
	int fd, ret;

	ret = shm_tcp_ends(tcp_fd, &local, &peer);
	if (ret)
		return ret;
	ret = shm_rendezvous((struct sockaddr *)&peer, sizeof(peer), false,
			     true, &fd);
	if (ret)
		return ret;
	ret = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) ? -errno : 0;
	close(fd);
	if (!ret)
		ret = shm_tcp_peer(tcp_fd, &tp);
	if (ret)
		return ret;
	if (cr.uid != tp.uid) {
		shm_log_limited(shm_prov(p), 4, "probe: the provider name of port %u belongs to uid %u (pid %d), not to the owner (uid %u) of the other end of the TCP connection: no switch there",
			ntohs(((struct sockaddr_in *)&peer)->sin_port),
			(unsigned)cr.uid, (int)cr.pid, (unsigned)tp.uid);
		return -ECONNREFUSED;
	}
	return 0;
}

/* ---- owner queries and their watches (client side) ---------------------- */

/* A watch still stands while nothing at all is to be read on it: the
 * owner never writes there, so a hang-up, an error or a byte all mean
 * the listener it watched is gone (or never kept it). */
static bool watch_stands(int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	int r;

	do
		r = poll(&pf, 1, 0);
	while (r < 0 && errno == EINTR);
	return r == 0;
}

static bool same_addr(const struct shm_owner_ent *e,
		      const struct sockaddr *a, socklen_t alen)
{
	return e->len == alen && !memcmp(&e->addr, a, alen);
}

/* An entry for a (owner_lock held): the one for a, else a free slot, else
 * the least recently used one, emptied. */
static struct shm_owner_ent *owner_slot(struct shm_provider *p,
					const struct sockaddr *a,
					socklen_t alen)
{
	struct shm_owner_ent *e, *lru = NULL;
	uint32_t i;

	for (i = 0; i < SHM_OWNER_CACHE; i++) {
		e = &p->owners[i];
		if (e->len && same_addr(e, a, alen))
			return e;
	}
	for (i = 0; i < SHM_OWNER_CACHE; i++) {
		e = &p->owners[i];
		if (!e->len)
			return e;
		if (!lru || e->used_ns < lru->used_ns)
			lru = e;
	}
	if (lru->fd >= 0)
		close(lru->fd);
	memset(lru, 0, sizeof(*lru));
	lru->fd = -1;
	return lru;
}

/*
 * Who created the listener at addr (SO_PEERCRED, the kernel's word).
 * Answered from a standing watch on that listener when there is one. A
 * new answer comes from a rendezvous, whose socket then stays as the
 * watch: it says WATCH so that the listener keeps its end open. A listener
 * that does not keep it (too many watches) hangs up at once; its
 * destination then goes without a watch for SHM_WATCH_BACKOFF_NS.
 */
int shm_listener_owner(struct shm_provider *p, const struct sockaddr *addr,
		       socklen_t addrlen, struct sdp_listener_owner *o)
{
	struct shm_owner_ent *e = NULL;
	struct ucred cr;
	socklen_t l = sizeof(cr);
	bool locked, keep = false;
	uint64_t now = mono_ns();
	int fd, ret;

	if (addrlen > sizeof(e->addr))
		return -EINVAL;
	/* only tried: after a fork the lock may be held by a thread that
	 * is not in the child; then the query is made the plain way */
	locked = !pthread_mutex_trylock(&p->owner_lock);
	if (locked) {
		e = owner_slot(p, addr, addrlen);
		if (e->len && e->fd >= 0) {
			if (watch_stands(e->fd)) {
				e->used_ns = now;
				o->uid = e->uid;
				o->pid = e->pid;
				pthread_mutex_unlock(&p->owner_lock);
				return 0;
			}
			/* hung up: kept only briefly means the listener
			 * keeps no watch of ours; the next ones go plain */
			if (now - e->made_ns < SHM_WATCH_BACKOFF_NS)
				e->plain_until_ns = now + SHM_WATCH_BACKOFF_NS;
			close(e->fd);
			e->fd = -1;
		}
		keep = now >= e->plain_until_ns;
	}
	ret = shm_rendezvous(addr, addrlen, false, false, &fd);
	if (!ret && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l)) {
		ret = -errno;
		close(fd);
	}
	if (ret) {
		if (locked) {
			if (e->fd < 0 && !e->plain_until_ns)
				e->len = 0;	/* nothing worth keeping */
			pthread_mutex_unlock(&p->owner_lock);
		}
		return ret;
	}
	o->uid = cr.uid;
	o->pid = cr.pid;
	/* a watch is kept for speed only: not in the program's last fds */
	if (keep && shm_fd_spare(fd) &&
	    !shm_hs_send(fd, SHM_WATCH, 0, NULL, 0, NULL, 0, 0)) {
		memcpy(&e->addr, addr, addrlen);
		e->len = addrlen;
		e->fd = fd;
		e->uid = cr.uid;
		e->pid = cr.pid;
		e->made_ns = e->used_ns = now;
		fd = -1;
	}
	if (fd >= 0)
		close(fd);
	if (locked)
		pthread_mutex_unlock(&p->owner_lock);
	return 0;
}

/* Closes every watch (the provider's cleanup). */
void shm_owners_free(struct shm_provider *p)
{
	uint32_t i;

	for (i = 0; i < SHM_OWNER_CACHE; i++)
		if (p->owners[i].len && p->owners[i].fd >= 0)
			close(p->owners[i].fd);
	memset(p->owners, 0, sizeof(p->owners));
}

/* ---- listeners (server side) -------------------------------------------- */

static int listen_on(struct sdp_provider *p, const struct sockaddr *addr,
		     socklen_t addrlen, int backlog, struct shm_listener **out)
{
	struct shm_name names[SHM_MAX_NAMES];
	struct shm_listener *l;
	int ret;

	ret = addr_names(addr, addrlen, names);
	if (ret < 0)
		return ret;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->prov = shm_prov(p);
	l->tcp_fd = -1;
	l->epfd = -1;
	l->fd = shm_fd_keep(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK |
					   SOCK_CLOEXEC, 0));
	if (l->fd < 0) {
		ret = l->fd;
		goto free_l;
	}
	if (bind(l->fd, (struct sockaddr *)&names[0].sun, names[0].len) ||
	    listen(l->fd, backlog > 0 ? backlog : 128)) {
		ret = -errno;
		goto close_fd;
	}
	*out = l;
	return 0;

close_fd:
	close(l->fd);
free_l:
	free(l);
	return ret;
}

int shm_listen(struct sdp_provider *p, const struct sockaddr *addr,
	       socklen_t addrlen, int backlog, struct sdp_listener **out)
{
	if (!out)
		return -EINVAL;
	return listen_on(p, addr, addrlen, backlog,
			 (struct shm_listener **)out);
}

/*
 * A listener for TCP connection tcp_fd, at its exact local address. It
 * takes a connection only from a process of the user that owns the other
 * end's socket (SO_PEERCRED against sock_diag), sends that process our TCP
 * socket as our proof (PROVE), and then takes a HELLO only with the other
 * end's socket in it (shm_tcp_proof). docs/security.md, "Binding".
 */
int shm_listen_bound(struct sdp_provider *p, int tcp_fd, int backlog,
		     struct sdp_listener **out)
{
	struct sockaddr_storage local, peer;
	struct shm_tcp_peer tp;
	struct shm_listener *l;
	int ret;

	if (!out)
		return -EINVAL;
	ret = shm_tcp_ends(tcp_fd, &local, &peer);
	if (!ret)
		ret = shm_tcp_peer(tcp_fd, &tp);
	if (ret) {
		shm_log(shm_prov(p), 4, "listen: cannot learn who holds the other end of the TCP connection (sock_diag: %s): not listening",
			strerror(-ret));
		return ret;
	}
	ret = listen_on(p, (struct sockaddr *)&local, sizeof(local), backlog,
			&l);
	if (ret)
		return ret;
	l->bound = true;
	l->tcp_fd = tcp_fd;
	l->tp = tp;
	*out = (struct sdp_listener *)l;
	return 0;
}

/*
 * What to sleep on for this listener's next request. A bound listener's
 * request is complete when the HELLO comes on a connection it accepted
 * earlier (after its PROVE), which the listening socket never tells: an
 * epoll set over both, made on the first ask (the switch asks for the
 * client listener an upgrade waits on, one at a time per connection) and
 * kept with the listener. Without one (no descriptor to spare), the
 * listening socket, and the caller looks again now and then.
 */
int shm_listener_fd(struct sdp_listener *sl)
{
	struct shm_listener *l = (struct shm_listener *)sl;
	struct epoll_event ev = { .events = EPOLLIN };
	uint32_t i;
	int ep;

	if (!l)
		return -EINVAL;
	if (l->epfd >= 0 || !l->bound)
		return l->epfd >= 0 ? l->epfd : l->fd;
	ep = shm_fd_keep(epoll_create1(EPOLL_CLOEXEC));
	if (ep < 0)
		return l->fd;
	ev.data.fd = l->fd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, l->fd, &ev)) {
		close(ep);
		return l->fd;
	}
	for (i = 0; i < l->npend; i++) {
		ev.data.fd = l->pend[i].fd;
		epoll_ctl(ep, EPOLL_CTL_ADD, l->pend[i].fd, &ev);
	}
	l->epfd = ep;
	return ep;
}

/* A pending connection leaves the listener's epoll set (it is closed, or
 * goes on as a request's socket, which must not wake the listener). */
static void pend_unwatch(struct shm_listener *l, int fd)
{
	if (l->epfd >= 0)
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* The watches go before the listener: a client that looks at its watch
 * after this returns finds it hung up. */
int shm_listener_close(struct sdp_listener *sl)
{
	struct shm_listener *l = (struct shm_listener *)sl;
	uint32_t i;

	if (!l)
		return -EINVAL;
	for (i = 0; i < l->nwatch; i++)
		close(l->watch[i].fd);
	for (i = 0; i < l->npend; i++)
		close(l->pend[i].fd);
	if (l->epfd >= 0)
		close(l->epfd);
	close(l->fd);
	free(l->watch);
	free(l);
	return 0;
}

/* A client's watch, kept while its user keeps fewer than
 * SHM_WATCH_PER_UID here and the fd is not one of the program's last: a
 * user who floods WATCH costs this process a few descriptors, and the
 * watches of everybody else stand. Refused ones are hung up, which tells
 * the client to ask without one for a while. */
static void keep_watch(struct shm_listener *l, int fd, uint32_t uid)
{
	struct shm_watch *w;
	uint32_t i, mine = 0;

	for (i = 0; i < l->nwatch; i++)
		mine += l->watch[i].uid == uid;
	if (mine >= SHM_WATCH_PER_UID || !shm_fd_spare(fd)) {
		close(fd);
		return;
	}
	if (l->nwatch == l->cap_watch) {
		uint32_t cap = l->cap_watch ? 2 * l->cap_watch : 8;

		if (cap > SHM_MAX_WATCH ||
		    !(w = realloc(l->watch, cap * sizeof(*w)))) {
			close(fd);
			return;
		}
		l->watch = w;
		l->cap_watch = cap;
	}
	l->watch[l->nwatch].fd = fd;
	l->watch[l->nwatch].uid = uid;
	l->nwatch++;
}

static void drop_pending(struct shm_listener *l, uint32_t i)
{
	pend_unwatch(l, l->pend[i].fd);
	close(l->pend[i].fd);
	memmove(&l->pend[i], &l->pend[i + 1],
		(l->npend - i - 1) * sizeof(l->pend[0]));
	l->npend--;
}

/* Keeps fd until its first message comes. A user with SHM_PEND_PER_UID
 * waiting already loses its oldest, so silent connections of one user
 * cannot push out everybody else's; a full list loses its oldest. */
static void keep_pending(struct shm_listener *l, int fd, uint32_t uid,
			 uint64_t now)
{
	uint32_t i, mine = 0, first = 0;

	for (i = l->npend; i-- > 0;)
		if (l->pend[i].uid == uid) {
			mine++;
			first = i;
		}
	if (mine >= SHM_PEND_PER_UID)
		drop_pending(l, first);
	else if (l->npend == SHM_MAX_PENDING)
		drop_pending(l, 0);
	l->pend[l->npend].fd = fd;
	l->pend[l->npend].uid = uid;
	l->pend[l->npend].since_ns = now;
	l->npend++;
	if (l->epfd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

		epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev);
	}
}

/* A bound listener's HELLO must carry the socket at the other end of its
 * TCP connection (the connector's proof); the socket goes at once. */
static bool hello_proven(struct shm_listener *l, int fds[SHM_HS_FDS])
{
	int ret;

	if (fds[2] < 0)
		return false;
	ret = shm_tcp_proof(fds[2], l->tcp_fd, &l->tp);
	close(fds[2]);
	fds[2] = -1;
	return !ret;
}

/*
 * The first message of an accepted connection, without waiting: 1 with a
 * HELLO in *hs (its fds taken), 0 when fd was dealt with (a probe that
 * closed, a watch kept, garbage dropped), -EAGAIN when nothing came yet.
 */
static int first_message(struct shm_listener *l, int fd, uint32_t uid,
			 struct shm_hs *hs, int fds[SHM_HS_FDS])
{
	int r = shm_hs_recv(fd, hs, fds, NULL);
	int i;

	if (r == -EAGAIN)
		return -EAGAIN;
	if (!r && hs->type == SHM_WATCH && !l->bound) {
		keep_watch(l, fd, uid);
		return 0;
	}
	if (!r && hs->type == SHM_HELLO && !l->bound && fds[2] < 0)
		return 1;
	if (!r && hs->type == SHM_HELLO && l->bound) {
		if (hello_proven(l, fds))
			return 1;
		shm_log_limited(l->prov, 4, "listener: a provider connection without proof that it holds the other end of this TCP connection: dropped");
	}
	if (!r)
		for (i = 0; i < SHM_HS_FDS; i++)
			if (fds[i] >= 0)
				close(fds[i]);
	/* a probe, a dead client or garbage: dropped silently */
	close(fd);
	return 0;
}

/*
 * A connection a bound listener just accepted: from the owner of the other
 * end of its TCP connection, it gets our proof (PROVE: our TCP socket) and
 * waits for its HELLO; from anybody else, nothing. true: keep it pending.
 */
static bool bound_admit(struct shm_listener *l, int fd, const struct ucred *cr)
{
	struct shm_tcp_peer now;

	/* learnt before the other side accepted, the other end's owner was
	 * its listener's; the accept gives the socket to the accepting
	 * process's user (a server that drops privileges after listen).
	 * And the other end's socket may be another user's than its
	 * holder's (accepted by a worker from its master's listener): then
	 * the connecting process must hold that very socket. Both asked
	 * again, now that the other side has accepted. */
	if (cr->uid != l->tp.uid &&
	    !(shm_tcp_peer(l->tcp_fd, &now) == 0 && now.ino &&
	      (now.uid == cr->uid ||
	       shm_pid_holds_socket(cr->pid, now.ino)))) {
		shm_log_limited(l->prov, 4, "listener: a provider connection from uid %u (pid %d), not from the owner (uid %u) of the other end of this TCP connection: dropped",
			(unsigned)cr->uid, (int)cr->pid, (unsigned)l->tp.uid);
		return false;
	}
	return !shm_hs_send(fd, SHM_PROVE, 0, NULL, 0, &l->tcp_fd, 1, 0);
}

/*
 * The next connection request, never waiting: connections that sent
 * nothing yet (their HELLO follows the connect at once, so rarely; on a
 * bound listener it follows our PROVE) wait in the listener for
 * handshake_ms and are looked at again on every call.
 */
int shm_get_request(struct sdp_listener *sl, struct sdp_conn_req **out,
		    void *priv, size_t *privlen)
{
	struct shm_listener *l = (struct shm_listener *)sl;
	uint64_t now = mono_ns(), limit;
	struct shm_conn_req *req;
	struct shm_hs hs;
	struct ucred cr = { 0 };
	socklen_t crlen;
	int fd = -1, fds[SHM_HS_FDS], r = 0;
	uint32_t i;

	if (!l || !out || (priv && !privlen))
		return -EINVAL;
	limit = (uint64_t)l->prov->opt.handshake_ms * 1000000ull;
	for (i = 0; i < l->npend && r != 1;) {
		fd = l->pend[i].fd;
		cr.uid = l->pend[i].uid;
		r = first_message(l, fd, cr.uid, &hs, fds);
		if (r == -EAGAIN && now - l->pend[i].since_ns < limit) {
			i++;
			continue;
		}
		/* (a closed one leaves the epoll set by itself) */
		if (r == 1)
			pend_unwatch(l, fd);
		if (r == -EAGAIN)
			close(fd);	/* silent for too long */
		memmove(&l->pend[i], &l->pend[i + 1],
			(l->npend - i - 1) * sizeof(l->pend[0]));
		l->npend--;
	}
	while (r != 1) {
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		}
		crlen = sizeof(cr);
		if (!shm_fd_ok(fd) ||
		    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) ||
		    (l->bound && !bound_admit(l, fd, &cr))) {
			/* over the reserve, or not admitted */
			close(fd);
			r = 0;
			continue;
		}
		r = l->bound ? -EAGAIN : first_message(l, fd, cr.uid, &hs, fds);
		if (r == -EAGAIN)
			keep_pending(l, fd, cr.uid, now);
	}
	/* the client's pid, as the kernel gives it for this socket */
	crlen = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen)) {
		close(fds[0]);
		close(fds[1]);
		close(fd);
		return -EAGAIN;
	}
	req = calloc(1, sizeof(*req));
	if (!req) {
		close(fds[0]);
		close(fds[1]);
		close(fd);
		return -ENOMEM;
	}
	req->prov = l->prov;
	req->sock = fd;
	req->memfd = fds[0];
	req->bell = fds[1];
	req->bell_id = hs.bell_id;
	req->pid = cr.pid;
	req->uid = cr.uid;
	req->flags = hs.flags;
	req->priv_len = hs.priv_len;
	memcpy(req->priv, hs.priv, hs.priv_len);
	if (priv) {
		memcpy(priv, hs.priv, *privlen < hs.priv_len ?
					      *privlen : hs.priv_len);
		*privlen = hs.priv_len;
	} else if (privlen) {
		*privlen = hs.priv_len;
	}
	*out = (struct sdp_conn_req *)req;
	return 0;
}
