/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * buffers.c - the connection's control-message buffers and the only owner
 * of the process's buffer pool: one registration per buffer so the set can
 * grow and shrink (credits.c decides), receives posted and reposted.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "buffers.h"
#include "config.h"
#include "log.h"
#include "providers.h"
#include "sock.h"

uint8_t *sw_buf(struct sw_session *ss, uint32_t idx)
{
	return ss->rslot[idx].mem;
}

static int post_recv(struct sw_sock *s, uint32_t idx)
{
	struct sw_session *ss = &s->ss;
	struct sdp_sge sge = { ss->rslot[idx].mem, ss->msg_size,
			       ss->rslot[idx].mr };
	int r = ss->prov->mod.ops.post_recv(ss->ep, &sge, 1, idx);

	return r == SDP_PENDING ? 0 : r;
}

/* Posts a buffer added by a credit increase. */
int sw_recv_post_new(struct sw_sock *s, uint32_t idx)
{
	return post_recv(s, idx);
}

int sw_recv_repost(struct sw_sock *s, uint32_t idx)
{
	struct sw_session *ss = &s->ss;
	int r;

	ss->recv_held[idx] = 0;
	r = post_recv(s, idx);
	if (r == -ENOBUFS || r == -EINVAL)
		return r;	/* our accounting is wrong: an error */
	if (r) {
		/* the endpoint takes no more receives: the provider has
		 * ended the connection (it hands out what arrived before,
		 * which is already in its completion queue) */
		if (!ss->peer_dead)
			SW_DBG("fd %d: provider refuses receives: %s", s->fd,
			       sdp_strerror(r));
		ss->peer_dead = true;
		sw_event(s);
		return 0;
	}
	ss->credits_owed++;
	return 0;
}

int sw_session_post_recvs(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	uint32_t i;
	int r;

	for (i = 0; i < ss->nrecv; i++) {
		r = post_recv(s, i);
		if (r)
			return r;
	}
	ss->peer_credits = ss->nrecv;
	return 0;
}

/*
 * Message buffers of closed connections, kept for the next ones: a
 * connection takes 17 or more at set-up, and an mmap, its page faults and
 * its munmap cost more than the whole rest of a short connection's life
 * in this process. Only buffers of the configured size are kept (one
 * size per process), at most BUF_CACHE of them. Registrations are not
 * kept: they belong to a provider and are cheap on shm.
 */
#define BUF_CACHE 64

static void *buf_cache[BUF_CACHE];
static unsigned int buf_cached;
static pthread_mutex_t buf_cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void *buf_get(size_t len)
{
	void *m = NULL;

	if (len == sw_cfg.msg_size) {
		pthread_mutex_lock(&buf_cache_lock);
		if (buf_cached)
			m = buf_cache[--buf_cached];
		pthread_mutex_unlock(&buf_cache_lock);
		if (m)
			return m;
	}
	m = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return m == MAP_FAILED ? NULL : m;
}

static void buf_put(void *m, size_t len)
{
	if (len == sw_cfg.msg_size) {
		pthread_mutex_lock(&buf_cache_lock);
		if (buf_cached < BUF_CACHE) {
			buf_cache[buf_cached++] = m;
			m = NULL;
		}
		pthread_mutex_unlock(&buf_cache_lock);
	}
	if (m)
		munmap(m, len);
}

static int slot_alloc(struct sw_sock *s, struct sw_buf_slot *sl)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *p = ss->prov;
	void *m;
	int r = 0, tries;

	m = buf_get(ss->msg_size);
	if (!m)
		return -ENOMEM;
	/* a registration that fails may succeed again (resources come
	 * back): a few tries before the connection does without */
	for (tries = 0; tries < 3; tries++) {
		r = p->mod.ext.register_memory(p->mod.prov, m, ss->msg_size,
					       SDP_ACCESS_LOCAL_WRITE,
					       &sl->mr);
		if (!r)
			break;
		if (s->st)
			s->st->reg_failures++;
	}
	if (r) {
		buf_put(m, ss->msg_size);
		return r;
	}
	sl->mem = m;
	return 0;
}

static void slot_release(struct sw_sock *s, struct sw_buf_slot *sl)
{
	struct sw_session *ss = &s->ss;

	if (!sl->mem)
		return;
	ss->prov->mod.ext.deregister_memory(ss->prov->mod.prov, sl->mr);
	buf_put(sl->mem, ss->msg_size);
	sl->mem = NULL;
	sl->mr = NULL;
}

int sw_recv_slot_add(struct sw_sock *s, uint32_t idx)
{
	struct sw_session *ss = &s->ss;
	int r;

	if (idx >= SW_MAX_BUFS || ss->rslot[idx].mem)
		return -EINVAL;
	r = slot_alloc(s, &ss->rslot[idx]);
	if (r)
		return r;
	ss->nrecv++;
	return 0;
}

void sw_recv_slot_drop(struct sw_sock *s, uint32_t idx)
{
	struct sw_session *ss = &s->ss;

	if (idx >= SW_MAX_BUFS || !ss->rslot[idx].mem)
		return;
	slot_release(s, &ss->rslot[idx]);
	ss->recv_held[idx] = 0;
	ss->nrecv--;
}

int sw_send_slot_get(struct sw_sock *s, uint32_t *idx)
{
	struct sw_session *ss = &s->ss;
	uint32_t i, k, free_slot = SW_MAX_BUFS;

	/* the common case: the next slot is there and idle */
	k = ss->send_next;
	if (ss->sslot[k].mem && !ss->send_busy[k]) {
		ss->send_next = (k + 1) % SW_MAX_BUFS;
		if (!ss->sslot[ss->send_next].mem)
			ss->send_next = 0;
		*idx = k;
		return 0;
	}
	for (i = 0; i < SW_MAX_BUFS; i++) {
		k = (ss->send_next + i) % SW_MAX_BUFS;
		if (ss->sslot[k].mem && !ss->send_busy[k]) {
			ss->send_next = (k + 1) % SW_MAX_BUFS;
			*idx = k;
			return 0;
		}
		if (!ss->sslot[k].mem && free_slot == SW_MAX_BUFS)
			free_slot = k;
	}
	if (ss->nsend >= sw_cfg.send_bufs || free_slot == SW_MAX_BUFS)
		return -EAGAIN;
	i = slot_alloc(s, &ss->sslot[free_slot]);
	if (i)
		return (int)i;
	ss->nsend++;
	*idx = free_slot;
	return 0;
}

void sw_send_slots_trim(struct sw_sock *s, uint32_t keep)
{
	struct sw_session *ss = &s->ss;
	uint32_t k;

	for (k = 0; k < SW_MAX_BUFS && ss->nsend > keep; k++) {
		if (ss->sslot[k].mem && !ss->send_busy[k]) {
			slot_release(s, &ss->sslot[k]);
			ss->nsend--;
		}
	}
}

void sw_bufs_free(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	uint32_t k;

	for (k = 0; k < SW_MAX_BUFS; k++) {
		slot_release(s, &ss->rslot[k]);
		slot_release(s, &ss->sslot[k]);
	}
	ss->nrecv = 0;
	ss->nsend = 0;
}

bool sw_sends_pending(const struct sw_session *ss)
{
	uint32_t k;

	for (k = 0; k < SW_MAX_BUFS; k++)
		if (ss->send_busy[k])
			return true;
	return false;
}

size_t sw_bufs_registered(const struct sw_session *ss)
{
	return (size_t)(ss->nrecv + ss->nsend) * ss->msg_size +
	       (ss->staging ? ss->staging_len : 0);
}
