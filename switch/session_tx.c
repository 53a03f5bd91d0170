/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * session_tx.c - the sending side of the session protocol: small sends are
 * copied into control messages (DATA); large sends from a blocking socket
 * expose the program's buffer for the receiver to pull (RDATA, RdmaRead)
 * when the receiver can; otherwise large sends are RDMA-written into the
 * receiver's staging ring (WDATA). Registration failures fall back to copy.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "sw_internal.h"

uint64_t sw_rdma_ctx_new(struct sw_session *ss);

static size_t iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;
	int i;

	for (i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

/* The contiguous piece of the iovec at byte offset off. */
static void iov_at(const struct iovec *iov, int n, size_t off, uint8_t **p,
		   size_t *len)
{
	int i;

	for (i = 0; i < n; i++) {
		if (off < iov[i].iov_len) {
			*p = (uint8_t *)iov[i].iov_base + off;
			*len = iov[i].iov_len - off;
			return;
		}
		off -= iov[i].iov_len;
	}
	*p = NULL;
	*len = 0;
}

/* A sub-iovec [off, off+len) of iov, at most 16 pieces. */
static int iov_slice(const struct iovec *iov, int n, size_t off, size_t len,
		     struct iovec *out)
{
	int i, k = 0;

	for (i = 0; i < n && len && k < 16; i++) {
		size_t l;

		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		l = iov[i].iov_len - off;
		if (l > len)
			l = len;
		out[k].iov_base = (uint8_t *)iov[i].iov_base + off;
		out[k].iov_len = l;
		k++;
		len -= l;
		off = 0;
	}
	return k;
}

static size_t inline_max(struct sw_session *ss)
{
	return ss->peer_msg_size - sizeof(struct sdp_msg_hdr);
}

/* RDATA: expose [p, p+len) read-only, let the receiver pull it, wait for
 * XFER_DONE. Returns bytes sent (len) or < 0 (-ENOBUFS: registration
 * failed, nothing sent). */
static ssize_t send_rdata(struct sw_sock *s, uint8_t *p, size_t len)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *pv = ss->prov;
	struct sdp_msg_rdata rd;
	struct sdp_rdma_desc desc;
	struct sdp_rmr *rmr;
	int r;

	memset(&rd, 0, sizeof(rd));
	r = pv->mod.ext.register_rdma_memory(ss->ep, p, len,
					     SDP_ACCESS_REMOTE_READ, &desc,
					     &rmr);
	rd.region = desc;
	if (r) {
		if (s->st)
			s->st->reg_failures++;
		return -ENOBUFS;
	}
	rd.xfer_id = ++ss->next_xfer_id ? ss->next_xfer_id : ++ss->next_xfer_id;
	rd.total = len;
	r = sw_send_ctrl(s, SDP_MSG_RDATA, &rd, sizeof(rd), NULL, 0, 0);
	if (r) {
		pv->mod.ext.deregister_rdma_memory(ss->ep, rmr);
		return r;
	}
	ss->xfer_wait_id = rd.xfer_id;
	ss->xfer_done = false;
	while (!ss->xfer_done) {
		if (ss->error || ss->peer_dead || ss->abort_rcvd ||
		    s->tcp_eof) {
			r = -ECONNRESET;
			break;
		}
		/* exposed memory cannot be taken back while the peer may be
		 * reading it: a signal does not end this wait */
		r = sw_session_wait(s, POLLIN, 0);
		if (r < 0 && r != -ETIMEDOUT && r != -EINTR)
			break;
		r = 0;
	}
	ss->xfer_wait_id = 0;
	/* the descriptor dies now, whatever the peer still holds */
	pv->mod.ext.deregister_rdma_memory(ss->ep, rmr);
	if (r)
		return r;
	if (s->st)
		s->st->tx_rdma_read += len;
	return len;
}

/* WDATA: write up to len bytes from p into the peer's staging ring.
 * Returns bytes written (> 0), 0 when the ring is full, or < 0. */
static ssize_t send_wdata(struct sw_sock *s, uint8_t *p, size_t len)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *pv = ss->prov;
	uint64_t ring = ss->peer_staging.length;
	uint64_t used = ss->peer_staging_head - ss->peer_staging_freed;
	uint64_t off = ss->peer_staging_head % ring;
	struct sdp_msg_wdata wd;
	struct sdp_sge sge;
	struct sdp_mr *mr;
	uint64_t ctx;
	size_t n = len;
	int r;

	if (used >= ring)
		return 0;
	if (n > ring - used)
		n = ring - used;
	if (n > ring - off)
		n = ring - off;
	r = pv->mod.ext.register_memory(pv->mod.prov, p, n, 0, &mr);
	if (r) {
		if (s->st)
			s->st->reg_failures++;
		return -ENOBUFS;
	}
	sge.addr = p;
	sge.length = n;
	sge.mr = mr;
	ctx = sw_rdma_ctx_new(ss);
	r = pv->mod.ext.rdma_write(ss->ep, &sge, 1, &ss->peer_staging, off,
				   ctx, 0);
	if (r == SDP_PENDING) {
		if (ss->peer_wants_wake)
			sw_doorbell_ring(s);
		r = sw_rdma_wait(s, ctx);
	}
	pv->mod.ext.deregister_memory(pv->mod.prov, mr);
	if (r < 0)
		return r == -EIO || r == -ENOMEM ? -ENOBUFS : r;
	wd.offset = off;
	wd.bytes = n;
	r = sw_send_ctrl(s, SDP_MSG_WDATA, &wd, sizeof(wd), NULL, 0, 0);
	if (r)
		return r;
	ss->peer_staging_head += n;
	if (s->st)
		s->st->tx_rdma_write += n;
	return n;
}

static int tx_error(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	if (ss->abort_rcvd || ss->error)
		return ECONNRESET;
	if (ss->fin_sent || ss->fin_pending)
		return EPIPE;
	if (ss->peer_dead || s->tcp_eof)
		return EPIPE;
	return 0;
}

ssize_t sw_session_send(struct sw_sock *s, const struct iovec *iov,
			int iovcnt, int flags)
{
	struct sw_session *ss = &s->ss;
	size_t total = iov_total(iov, iovcnt), sent = 0;
	ssize_t n = 0;
	bool stalled = false;
	bool nb = sw_nonblocking(s, flags);
	bool copy_only = sw_cfg.path == SW_PATH_COPY;
	int e;

	if (total == 0)
		return 0;
	sw_progress(s);
	while (sent < total) {
		size_t left = total - sent;
		uint8_t *p;
		size_t plen;

		e = tx_error(s);
		if (e) {
			if (sent)
				break;
			errno = e;
			return -1;
		}
		if (!sw_credit_can_send(ss, SDP_MSG_DATA)) {
			if (s->st && !stalled)
				s->st->credit_stalls++;
			stalled = true;
			if (nb)
				break;
			if (sw_session_wait(s, POLLOUT, 0) == -EINTR) {
				if (sent)
					break;
				errno = EINTR;
				return -1;
			}
			continue;
		}
		iov_at(iov, iovcnt, sent, &p, &plen);
		if (!copy_only && left >= sw_cfg.rdma_min &&
		    plen >= sw_cfg.rdma_min) {
			/* RDATA holds the sender until the receiver pulls:
			 * only when the receiver is waiting for data (or
			 * the path is forced), else it would stall a
			 * sender TCP lets go on */
			bool use_read = ss->peer_can_read && !nb &&
					(ss->peer_waiting ||
					 sw_cfg.path == SW_PATH_READ) &&
					sw_cfg.path != SW_PATH_WRITE;

			if (use_read) {
				n = send_rdata(s, p, plen);
				if (n > 0) {
					sent += n;
					continue;
				}
				if (n != -ENOBUFS)
					goto fail;
			} else if (ss->peer_staging.length &&
				   sw_cfg.path == SW_PATH_WRITE) {
				/* WDATA only when asked for (SDP_PATH=write):
				 * an echo test under asyncio loses two writes
				 * at close on this path (docs/performance.md,
				 * known problems); copying is exact */
				n = send_wdata(s, p, plen);
				if (n > 0) {
					sent += n;
					continue;
				}
				if (n == 0 && !nb) {
					/* staging full: wait for STAGING_FREE */
					if (s->st && !stalled)
						s->st->credit_stalls++;
					stalled = true;
					sw_session_wait(s, POLLOUT, 0);
					continue;
				}
				/* non-blocking and the ring is full: what the
				 * credits allow goes by copy (writable means
				 * some bytes go) */
				if (n == 0)
					goto copy;
				if (n != -ENOBUFS)
					goto fail;
			}
			/* registration failed: the bytes go by copy */
		}
copy:
		{
			struct iovec part[16];
			size_t chunk = left < inline_max(ss) ? left :
							       inline_max(ss);
			int k = iov_slice(iov, iovcnt, sent, chunk, part);
			size_t got = 0;
			int i, r;

			for (i = 0; i < k; i++)
				got += part[i].iov_len;
			r = sw_send_ctrl(s, SDP_MSG_DATA, NULL, 0, part, k, got);
			if (r) {
				n = r;
				goto fail;
			}
			sent += got;
			if (s->st)
				s->st->tx_copy += got;
		}
	}
	if (!sent) {
		errno = EAGAIN;
		return -1;
	}
	return sent;
fail:
	if (sent)
		return sent;
	errno = n == -ENOBUFS ? ENOBUFS : (n == -ECONNRESET ? EPIPE : -n);
	return -1;
}
