// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * shm_cm.c - connection management on the shm address space: the handshake
 * over a rendezvous socket (shm_rendezvous.c) that passes the shared regions
 * and process bells, and the endpoint's send and receive calls. The socket
 * is closed once connected: the peer process's pidfd (shm_peer.c) and the
 * region's closed flag tell of its end.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shm.h"

int shm_hs_send(int fd, uint16_t type, uint32_t flags, const void *priv,
		size_t privlen, const int *fds, int nfds, uint64_t bell_id)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SHM_HS_FDS)];
		struct cmsghdr align;
	} u;
	struct shm_hs hs = { .magic = SHM_MAGIC,
			     .version = SHM_LAYOUT_VERSION,
			     .type = type, .flags = flags,
			     .priv_len = (uint32_t)privlen,
			     .bell_id = bell_id };
	struct iovec iov = { &hs, sizeof(hs) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	int tries;

	if (privlen)
		memcpy(hs.priv, priv, privlen);
	shm_hs_put_fds(&m, u.buf, sizeof(u), fds, nfds);
	for (tries = 0;; tries++) {
		if (sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT) == sizeof(hs))
			return 0;
		if (errno == EINTR)
			continue;
		/* the socket's queue is momentarily full (many connections
		 * set up at once): it drains as the peer reads; a bounded
		 * wait, never a failed connection for it */
		if ((errno == EAGAIN || errno == EWOULDBLOCK) && tries < 50) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };

			poll(&p, 1, 10);
			continue;
		}
		return errno == EPIPE ? -ECONNRESET : -errno;
	}
}

/* The fds each message type carries: HELLO 2 (memfd, bell), or 3 with the
 * sender's TCP socket (connect_bound); ACCEPT 2; PROVE 1 (the listener's
 * TCP socket); REJECT and WATCH none. */
static bool fds_fit(uint16_t type, int nfds)
{
	switch (type) {
	case SHM_HELLO:
		return nfds == 2 || nfds == 3;
	case SHM_ACCEPT:
		return nfds == 2;
	case SHM_PROVE:
		return nfds == 1;
	case SHM_REJECT:
	case SHM_WATCH:
		return nfds == 0;
	}
	return false;
}

/* Receives one handshake message with its fds (unused slots -1). Returns
 * 0, -EAGAIN, or -EPROTO / -ECONNRESET (the peer closed or sent garbage);
 * -EMFILE when the fds it carried would eat into the program's reserve. */
int shm_hs_recv(int fd, struct shm_hs *hs, int fds[SHM_HS_FDS], pid_t *pid)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4) +
			 CMSG_SPACE(sizeof(struct ucred))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { hs, sizeof(*hs) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c;
	ssize_t n;
	int nfds = 0, i, ret = -EPROTO;

	for (i = 0; i < SHM_HS_FDS; i++)
		fds[i] = -1;
	n = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN ? -EAGAIN : -ECONNRESET;
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_RIGHTS) {
			int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int got[4];

			if (k > 4)
				k = 4;
			memcpy(got, CMSG_DATA(c), sizeof(int) * k);
			for (i = 0; i < k; i++) {
				if (nfds < SHM_HS_FDS) {
					fds[nfds++] = got[i];
				} else {
					close(got[i]);
					nfds = SHM_HS_FDS + 1;
				}
			}
		} else if (c->cmsg_type == SCM_CREDENTIALS && pid) {
			struct ucred cr;

			memcpy(&cr, CMSG_DATA(c), sizeof(cr));
			*pid = cr.pid;
		}
	}
	if (n == 0)
		goto bad;
	if (n != sizeof(*hs) || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    hs->magic != SHM_MAGIC || hs->version != SHM_LAYOUT_VERSION ||
	    hs->priv_len > SDP_MAX_PRIVATE_DATA || !fds_fit(hs->type, nfds))
		goto bad;
	/* what a peer sends us takes descriptors too: never the last ones */
	for (i = 0; i < nfds; i++)
		if (!shm_fd_ok(fds[i])) {
			ret = -EMFILE;
			goto bad;
		}
	return 0;

bad:
	for (i = 0; i < nfds && i < SHM_HS_FDS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	for (i = 0; i < SHM_HS_FDS; i++)
		fds[i] = -1;
	return n == 0 ? -ECONNRESET : ret;
}

static struct shm_ep *ep_alloc(struct shm_provider *p, void *ep_context)
{
	struct shm_ep *ep = malloc(sizeof(*ep));

	if (!ep)
		return NULL;
	/* the queues at the end are not cleared: 27 KiB of memset, every
	 * page of it a fault in a fresh heap */
	memset(ep, 0, offsetof(struct shm_ep, recv));
	ep->prov = p;
	ep->ep_context = ep_context;
	ep->sock = -1;
	ep->tcp_fd = -1;
	ep->hello_memfd = -1;
	ep->memfd = -1;
	ep->owner_pid = getpid();
	pthread_mutex_init(&ep->lock, NULL);
	return ep;
}

static void ep_free(struct shm_ep *ep)
{
	if (ep->hello_memfd >= 0)
		shm_region_sent(ep, ep->hello_memfd);
	shm_region_release(ep);
	shm_rmr_free_all(ep);
	if (ep->sock >= 0)
		close(ep->sock);
	shm_peer_put(ep->prov, ep->pe);
	pthread_mutex_destroy(&ep->lock);
	free(ep);
}

static void req_free(struct shm_conn_req *req)
{
	if (req->sock >= 0)
		close(req->sock);
	if (req->memfd >= 0)
		close(req->memfd);
	if (req->bell >= 0)
		close(req->bell);
	free(req);
}

/* On failure the request is consumed too: the client sees a refusal. */
int shm_accept(struct sdp_conn_req *r, struct sdp_cq *c, const void *priv,
	       size_t privlen, void *ep_context, struct sdp_ep **out)
{
	struct shm_conn_req *req = (struct shm_conn_req *)r;
	struct shm_cq *cq = (struct shm_cq *)c;
	struct shm_ep *ep;
	int memfd, ret, fds[2];
	uint64_t bell_id;

	if (!req)
		return -EINVAL;
	if (!cq || !out || privlen > SDP_MAX_PRIVATE_DATA ||
	    (privlen && !priv)) {
		ret = -EINVAL;
		goto free_req;
	}
	ep = ep_alloc(req->prov, ep_context);
	if (!ep) {
		ret = -ENOMEM;
		goto free_req;
	}
	/* the client's process: -ESRCH if it is gone already */
	ret = shm_peer_get(req->prov, req->pid, req->bell_id, req->bell,
			   &ep->pe);
	req->bell = -1;
	if (ret)
		goto free_ep;
	ret = shm_region_get(req->prov, ep, ep->pe, 0, &memfd);
	if (ret)
		goto free_ep;
	ret = shm_region_map_peer(ep, req->memfd);
	if (ret) {
		shm_log(req->prov, 3,
			"accept: client %d sent an invalid shared region (%s)",
			(int)req->pid, strerror(-ret));
		goto close_memfd;
	}
	shm_cma_publish(ep);
	/* this side's own verdict: the client may be reachable by us and
	 * not we by it (another uid, a worker that dropped privileges) */
	ep->cma = (req->flags & SHM_F_CMA) && shm_cma_check(ep, req->pid);
	fds[0] = memfd;
	fds[1] = shm_bell_get(req->prov, &bell_id);
	if (fds[1] < 0) {
		ret = fds[1];
		goto close_memfd;
	}
	ret = shm_hs_send(req->sock, SHM_ACCEPT, req->prov->cma ? SHM_F_CMA : 0, priv,
		      privlen, fds, 2, bell_id);
	if (ret)
		goto close_memfd;
	shm_region_sent(ep, memfd);
	/* a pidfd watches the client from now on; without one, the socket
	 * stays as the liveness channel */
	if (ep->pe->pidfd < 0 && req->pid != getpid()) {
		ep->sock = req->sock;
		req->sock = -1;
	}
	ep->peer_pid = req->pid;
	ep->same_pid = req->pid == getpid();
	ep->peer_priv_len = req->priv_len;
	memcpy(ep->peer_priv, req->priv, req->priv_len);
	req_free(req);
	ep->state = SHM_EP_CONNECTED;
	shm_cq_add_ep(cq, ep);
	*out = (struct sdp_ep *)ep;
	return 0;

close_memfd:
	shm_region_sent(ep, memfd);
free_ep:
	ep->retire = true;
	ep_free(ep);
free_req:
	req_free(req);
	return ret;
}

int shm_reject(struct sdp_conn_req *r)
{
	struct shm_conn_req *req = (struct shm_conn_req *)r;

	if (!req)
		return -EINVAL;
	shm_hs_send(req->sock, SHM_REJECT, 0, NULL, 0, NULL, 0, 0);
	req_free(req);
	return 0;
}

/* The HELLO's region and bell: lsn_pid is the listener's creator, for
 * whom a pooled region may serve again. No lock held (the bell's lock
 * comes before any cq->lock). */
static int hello_prepare(struct shm_ep *ep, pid_t lsn_pid)
{
	struct shm_provider *sp = ep->prov;
	int ret;

	ret = shm_region_get(sp, ep, NULL, lsn_pid, &ep->hello_memfd);
	if (ret) {
		ep->hello_memfd = -1;
		return ret;
	}
	shm_cma_publish(ep);
	ep->hello_bell = shm_bell_get(sp, &ep->hello_bell_id);
	return ep->hello_bell < 0 ? ep->hello_bell : 0;
}

/* The HELLO on ep->sock: our region, our bell and, for a bound connect,
 * our TCP socket as proof (shm_tcp_proof at the listener). */
static int send_hello(struct shm_ep *ep, const void *priv, size_t privlen)
{
	struct shm_provider *sp = ep->prov;
	int fds[SHM_HS_FDS], n = 2, ret;

	fds[0] = ep->hello_memfd;
	fds[1] = ep->hello_bell;
	if (ep->tcp_fd >= 0)
		fds[n++] = ep->tcp_fd;
	ret = shm_hs_send(ep->sock, SHM_HELLO, sp->cma ? SHM_F_CMA : 0, priv,
			  privlen, fds, n, ep->hello_bell_id);
	shm_region_sent(ep, ep->hello_memfd);
	ep->hello_memfd = -1;
	return ret;
}

static int connect_args(struct sdp_cq *c, const void *priv, size_t privlen,
			struct sdp_ep **out)
{
	return !c || !out || privlen > SDP_MAX_PRIVATE_DATA ||
			       (privlen && !priv) ? -EINVAL : 0;
}

/* The end of a connect: ep pending on cq, in *out (ret 0), or freed and
 * the error ret returned. */
static int connect_done(struct shm_cq *cq, struct shm_ep *ep, int ret,
			struct sdp_ep **out)
{
	if (ret) {
		ep->retire = true;
		ep_free(ep);
		return ret;
	}
	ep->state = SHM_EP_CONNECTING;
	shm_cq_add_ep(cq, ep);
	*out = (struct sdp_ep *)ep;
	return SDP_PENDING;
}

int shm_connect(struct sdp_provider *p, struct sdp_cq *c,
		const struct sockaddr *dst, socklen_t dstlen, const void *priv,
		size_t privlen, void *ep_context, struct sdp_ep **out)
{
	struct shm_provider *sp = shm_prov(p);
	struct shm_cq *cq = (struct shm_cq *)c;
	struct shm_ep *ep;
	struct ucred cr = { 0 };
	socklen_t crlen = sizeof(cr);
	int ret;

	ret = connect_args(c, priv, privlen, out);
	if (ret)
		return ret;
	ep = ep_alloc(sp, ep_context);
	if (!ep)
		return -ENOMEM;
	/* Between the rendezvous and our HELLO the peer's listener holds a
	 * connection it cannot use yet: everything slow comes before (a new
	 * region, made ahead) or after (the next one). */
	shm_region_spare_fill(sp);
	ret = shm_rendezvous(dst, dstlen, true, false, &ep->sock);
	if (ret)
		goto done;
	/* the listener's creator: a region it had before may serve again,
	 * if the ACCEPT comes from that same process (connect_answer) */
	if (getsockopt(ep->sock, SOL_SOCKET, SO_PEERCRED, &cr, &crlen))
		cr.pid = 0;
	ret = hello_prepare(ep, cr.pid);
	if (!ret)
		ret = send_hello(ep, priv, privlen);
	if (ret)
		goto done;
	shm_region_spare_fill(sp);
done:
	return connect_done(cq, ep, ret, out);
}

/*
 * connect, bound to TCP connection tcp_fd (docs/security.md, "Binding"):
 * only the exact name of the other end's address is tried (a name any user
 * may create, so never trusted by itself); its creator must be the user
 * that owns the other end's socket, and before our HELLO (key, region,
 * bell) goes, the listener must send that very socket (PROVE), which
 * connect_answer checks. Nothing of ours reaches anyone else.
 */
int shm_connect_bound(struct sdp_provider *p, struct sdp_cq *c, int tcp_fd,
		      const void *priv, size_t privlen, void *ep_context,
		      struct sdp_ep **out)
{
	struct shm_provider *sp = shm_prov(p);
	struct shm_cq *cq = (struct shm_cq *)c;
	struct sockaddr_storage local, peer;
	struct shm_ep *ep;
	struct ucred cr = { 0 };
	socklen_t crlen = sizeof(cr);
	int ret;

	ret = connect_args(c, priv, privlen, out);
	if (!ret)
		ret = shm_tcp_ends(tcp_fd, &local, &peer);
	if (ret)
		return ret;
	ep = ep_alloc(sp, ep_context);
	if (!ep)
		return -ENOMEM;
	ret = shm_tcp_peer(tcp_fd, &ep->tp);
	if (ret) {
		shm_log(sp, 4, "connect: cannot learn who holds the other end of the TCP connection (sock_diag: %s): not connecting",
			strerror(-ret));
		goto done;
	}
	shm_region_spare_fill(sp);
	ret = shm_rendezvous((struct sockaddr *)&peer, sizeof(peer), true,
			     true, &ep->sock);
	if (ret)
		goto done;
	if (getsockopt(ep->sock, SOL_SOCKET, SO_PEERCRED, &cr, &crlen)) {
		ret = -errno;
		goto done;
	}
	if (cr.uid != ep->tp.uid) {
		shm_log_limited(sp, 4, "connect: the provider name of port %u belongs to uid %u (pid %d), not to the owner (uid %u) of the other end of the TCP connection: refused",
			ntohs(((struct sockaddr_in *)&peer)->sin_port),
			(unsigned)cr.uid, (int)cr.pid, (unsigned)ep->tp.uid);
		ret = -ECONNREFUSED;
		goto done;
	}
	ret = hello_prepare(ep, cr.pid);
	if (ret)
		goto done;
	ep->tcp_fd = tcp_fd;
	ep->proving = true;
	ep->hello_priv_len = (uint32_t)privlen;
	if (privlen)
		memcpy(ep->hello_priv, priv, privlen);
done:
	return connect_done(cq, ep, ret, out);
}

static void close_fds(int fds[SHM_HS_FDS])
{
	int i;

	for (i = 0; i < SHM_HS_FDS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* A bound connect: the listener's proof (PROVE, its TCP socket), then our
 * HELLO. 0: the HELLO went, wait for the ACCEPT; -EAGAIN: nothing yet;
 * else refused. */
static int connect_proof(struct shm_ep *ep)
{
	struct shm_hs hs;
	int fds[SHM_HS_FDS], ret;

	ret = shm_hs_recv(ep->sock, &hs, fds, NULL);
	if (ret)
		return ret;
	if (hs.type != SHM_PROVE) {
		close_fds(fds);
		return -EPROTO;
	}
	ret = shm_tcp_proof(fds[0], ep->tcp_fd, &ep->tp);
	close_fds(fds);
	if (ret) {
		shm_log_limited(ep->prov, 4, "connect: the process that answered does not hold the other end of this TCP connection: refused");
		return ret;
	}
	ep->proving = false;
	ret = send_hello(ep, ep->hello_priv, ep->hello_priv_len);
	ep->tcp_fd = -1;	/* the caller's; not needed any more */
	return ret;
}

/* The connecting side learns the answer to its hello. */
static void connect_answer(struct shm_ep *ep)
{
	struct shm_hs hs;
	int fds[SHM_HS_FDS], ret;
	pid_t pid = 0;

	if (ep->proving) {
		ret = connect_proof(ep);
		if (!ret || ret == -EAGAIN)
			return;
		goto refused;
	}
	ret = shm_hs_recv(ep->sock, &hs, fds, &pid);
	if (ret == -EAGAIN)
		return;
	if (!ret && hs.type == SHM_ACCEPT && pid > 0) {
		ret = shm_peer_get(ep->prov, pid, hs.bell_id, fds[1], &ep->pe);
		fds[1] = -1;
		if (!ret && ep->pool_pe && ep->pool_pe != ep->pe) {
			/* our region, reused for the listener's creator,
			 * went to another process: never offered again */
			shm_log(ep->prov, 4,
				"connect: accepted by process %d, not by the listener's creator %d: connection refused, retry it",
				(int)pid, (int)ep->pool_pe->pid);
			ep->retire = true;
			ret = -EPERM;
		}
		if (!ret)
			ret = shm_region_map_peer(ep, fds[0]);
		close(fds[0]);
		if (!ret) {
			/* the server's pidfd watches it from now on */
			if (ep->pe->pidfd >= 0 || pid == getpid()) {
				shm_ep_watch(ep, false);
				close(ep->sock);
				ep->sock = -1;
				shm_ep_watch(ep, true);
			}
			ep->peer_pid = pid;
			ep->same_pid = pid == getpid();
			ep->cma = (hs.flags & SHM_F_CMA) &&
				  shm_cma_check(ep, pid);
			ep->peer_priv_len = hs.priv_len;
			memcpy(ep->peer_priv, hs.priv, hs.priv_len);
			ep->state = SHM_EP_CONNECTED;
			shm_cq_push(ep->cq, ep, SDP_OP_CONNECT, 0, 0, 0);
			return;
		}
		if (ret != -ESRCH && ret != -EPERM)
			shm_log(ep->prov, 3,
				"connect: server %d sent an invalid shared region (%s)",
				(int)pid, strerror(-ret));
	} else if (!ret) {
		close_fds(fds);
	}
refused:
	ep->retire = true;
	shm_cq_push(ep->cq, ep, SDP_OP_CONNECT, 0, -ECONNREFUSED, 0);
	shm_ep_fail(ep, -ECONNREFUSED);
}

/* The rendezvous socket is readable (cq->lock and ep->lock held). */
void shm_cm_sock_event(struct shm_ep *ep)
{
	char b;
	ssize_t n;

	if (ep->state == SHM_EP_CONNECTING) {
		connect_answer(ep);
		return;
	}
	if (ep->state != SHM_EP_CONNECTED)
		return;
	n = recv(ep->sock, &b, 1, MSG_DONTWAIT | MSG_PEEK);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	/* hang-up (or a byte the protocol never sends): the peer is gone */
	shm_ep_peer_gone(ep);
}

/* The peer closed its endpoint or its process exited (cq->lock and
 * ep->lock held). Hand out what it sent before, then fail the rest. What
 * does not fit the receives posted now stays in the ring (its memory is
 * ours too) until more are posted, as a socket keeps data after FIN. */
void shm_ep_peer_gone(struct shm_ep *ep)
{
	if (ep->state != SHM_EP_CONNECTED || ep->peer_gone)
		return;
	while (shm_ring_rx(ep) > 0)
		;
	shm_stage_rx(ep);
	if (!shm_ep_drained(ep)) {
		ep->peer_gone = true;
		shm_ep_watch(ep, false);
		return;
	}
	shm_ep_fail(ep, -ECONNRESET);
}

int shm_ep_query(struct sdp_ep *e, struct sdp_ep_attr *attr)
{
	struct shm_ep *ep = (struct shm_ep *)e;
	struct sdp_ep_attr a = { 0 };
	size_t size;

	if (!ep || !attr || attr->size < offsetof(struct sdp_ep_attr,
						  max_send))
		return -EINVAL;
	size = attr->size < sizeof(a) ? attr->size : sizeof(a);
	pthread_mutex_lock(&ep->lock);
	a.size = size;
	a.max_msg_size = ep->peer ? ep->pg.msg_size : ep->prov->opt.msg_size;
	a.max_send = SHM_MAX_SEND;
	a.max_recv = SHM_MAX_RECV;
	a.max_sge = SHM_MAX_SGE;
	a.max_rdma_size = SHM_MAX_RDMA;
	a.peer_priv_len = ep->peer_priv_len;
	memcpy(a.peer_priv, ep->peer_priv, ep->peer_priv_len);
	/* the kernel refused us the peer's memory (shm_cma_check) */
	if (ep->state == SHM_EP_CONNECTED && !ep->cma && !ep->same_pid)
		a.flags = SDP_EP_F_NO_RDMA_READ | SDP_EP_F_WRITE_STAGED;
	pthread_mutex_unlock(&ep->lock);
	memcpy(attr, &a, size);
	return 0;
}

/* SharedArea: the area in my region and the one in the peer's, which
 * both processes map MAP_SHARED (coherent; atomics work across them). */
int shm_shared_area(struct sdp_ep *e, void **mine, void **peers, size_t *len)
{
	struct shm_ep *ep = (struct shm_ep *)e;
	int r = 0;

	if (!ep || !mine || !peers || !len)
		return -EINVAL;
	pthread_mutex_lock(&ep->lock);
	if (ep->state != SHM_EP_CONNECTED || !ep->own || !ep->peer) {
		r = -ENOTCONN;
	} else {
		*mine = ep->own->area;
		*peers = ep->peer->area;
		*len = sizeof(ep->own->area);
	}
	pthread_mutex_unlock(&ep->lock);
	return r;
}

/* Pending operations are dropped silently with the endpoint. */
int shm_ep_close(struct sdp_ep *e)
{
	struct shm_ep *ep = (struct shm_ep *)e;

	if (!ep)
		return -EINVAL;
	/* an orderly close tells the peer through its region; a forked
	 * child closing its copy of the endpoint tells nobody */
	if (ep->peer && ep->owner_pid == getpid() &&
	    ep->state == SHM_EP_CONNECTED) {
		atomic_store_explicit(&ep->peer->closed, 1,
				      memory_order_release);
		shm_doorbell(ep);
	}
	if (ep->cq)
		shm_cq_del_ep(ep->cq, ep);
	/* this process touches the peer's region no more: the peer may
	 * give it to our next endpoint (shm_pool.c) */
	if (ep->peer && ep->owner_pid == getpid())
		atomic_store_explicit(&ep->peer->closed, SHM_CLOSED_DONE,
				      memory_order_release);
	ep_free(ep);
	return 0;
}

static int ep_usable(struct shm_ep *ep)
{
	if (ep->peer_gone)
		return -ECONNRESET;
	if (ep->state == SHM_EP_CONNECTED)
		return 0;
	return ep->state == SHM_EP_DEAD ? ep->dead_status : -ENOTCONN;
}

int shm_post_send(struct sdp_ep *e, const struct sdp_sge *sgl, int nsge,
		  uint64_t context, uint32_t flags)
{
	struct shm_ep *ep = (struct shm_ep *)e;
	struct shm_wr *w;
	uint64_t len;
	int ret;

	if (!ep)
		return -EINVAL;
	/* an inline send is copied into the ring now, from any memory of
	 * ours: registration only promises the memory lives until a
	 * completion, and there is none */
	ret = (flags & SDP_SEND_INLINE) ?
		      (nsge < 0 || nsge > SHM_MAX_SGE || (nsge && !sgl) ?
			       -EINVAL : 0) :
		      shm_sge_check(sgl, nsge);
	if (ret)
		return ret;
	len = shm_sge_len(sgl, nsge);
	pthread_mutex_lock(&ep->lock);
	ret = ep_usable(ep);
	if (ret)
		goto unlock;
	if (len > ep->pg.msg_size) {
		ret = -EMSGSIZE;
		goto unlock;
	}
	if (!ep->send_cnt) {
		ret = shm_ring_put(ep, sgl, nsge, len);
		if (ret != -EAGAIN || (flags & SDP_SEND_INLINE))
			goto unlock;
	} else if (flags & SDP_SEND_INLINE) {
		ret = -EAGAIN;	/* behind queued sends: in order, later */
		goto unlock;
	}
	if (ep->send_cnt == SHM_MAX_SEND) {
		ret = -ENOBUFS;
		goto unlock;
	}
	w = &ep->send[(ep->send_head + ep->send_cnt++) % SHM_MAX_SEND];
	memcpy(w->sge, sgl, sizeof(*sgl) * nsge);
	w->nsge = nsge;
	w->context = context;
	w->len = len;
	ret = SDP_PENDING;
unlock:
	pthread_mutex_unlock(&ep->lock);
	return ret == -EPROTO ? -ECONNRESET : ret;
}

/* Queued sends move as the peer frees ring slots (cq->lock, ep->lock). */
void shm_send_progress(struct shm_ep *ep)
{
	while (ep->send_cnt && shm_cq_room(ep->cq)) {
		struct shm_wr *w = &ep->send[ep->send_head];
		int ret = shm_ring_put(ep, w->sge, w->nsge, w->len);

		if (ret == -EAGAIN)
			return;
		shm_cq_push(ep->cq, ep, SDP_OP_SEND, w->context,
			    ret ? -ECONNRESET : 0, ret ? 0 : w->len);
		ep->send_head = (ep->send_head + 1) % SHM_MAX_SEND;
		ep->send_cnt--;
		if (ret) {
			shm_ep_fail(ep, -ECONNRESET);
			return;
		}
	}
}

int shm_post_recv(struct sdp_ep *e, const struct sdp_sge *sgl, int nsge,
		  uint64_t context)
{
	struct shm_ep *ep = (struct shm_ep *)e;
	struct shm_wr *w;
	int ret;

	if (!ep)
		return -EINVAL;
	ret = shm_sge_check(sgl, nsge);
	if (ret)
		return ret;
	pthread_mutex_lock(&ep->lock);
	if (ep->state == SHM_EP_DEAD) {
		ret = ep->dead_status;
	} else if (ep->recv_cnt == SHM_MAX_RECV) {
		ret = -ENOBUFS;
	} else {
		w = &ep->recv[(ep->recv_head + ep->recv_cnt++) %
			      SHM_MAX_RECV];
		memcpy(w->sge, sgl, sizeof(*sgl) * nsge);
		w->nsge = nsge;
		w->context = context;
		w->len = shm_sge_len(sgl, nsge);
		ret = SDP_PENDING;
	}
	pthread_mutex_unlock(&ep->lock);
	return ret;
}
