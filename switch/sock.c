/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sock.c - the life of struct sw_sock: creation, the list of every socket
 * of the process, references, and the provider listeners it holds.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>

#include "hello_token.h"
#include <unistd.h>

#include "fork_exec.h"
#include "holders.h"
#include "providers.h"
#include "session.h"
#include "ownfd.h"
#include "sock.h"
#include "stats.h"
#include "util.h"

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sw_sock *list_head;

/* A reference to s unless its last one is being dropped: the unref that
 * reached zero unlinks s under list_lock, after the fact, so the list may
 * show a socket that is about to be freed. Called with list_lock held. */
static bool ref_live(struct sw_sock *s)
{
	int r = atomic_load(&s->refs);

	while (r > 0)
		if (atomic_compare_exchange_weak(&s->refs, &r, r + 1))
			return true;
	return false;
}

bool sw_sock_lock_by(struct sw_sock *s, uint64_t deadline)
{
	while (pthread_mutex_trylock(&s->lock)) {
		if (sw_now_ns() > deadline)
			return false;
		sw_wait_fd(-1, 0, 1);
	}
	return true;
}

int sw_sock_list(struct sw_sock ***out)
{
	struct sw_sock *s, **v = NULL;
	int n = 0, cap = 0;

	pthread_mutex_lock(&list_lock);
	for (s = list_head; s; s = s->list_next) {
		if (n == cap) {
			struct sw_sock **nv;

			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		if (!ref_live(s))
			continue;	/* its last reference is going */
		v[n++] = s;
	}
	pthread_mutex_unlock(&list_lock);
	*out = v;
	return n;
}

/*
 * fork: a program thread may hold a socket's lock while another thread
 * forks (a reader in its call while the main thread spawns a helper); the
 * child's copy of that lock would stay locked for ever, and the child's
 * switch waits on it (before exec, at its first call). So the list stays
 * locked across the fork (its holders never wait for anything), and the
 * child, which has one thread, initialises every socket's lock anew, as
 * shim/epoll.c does for its sets. A socket another thread was changing at
 * the fork keeps what it had then: the child gives such upgrades up (exec,
 * or holders.c) and loses nothing by it, since nothing is committed.
 */
void sw_sock_atfork_prepare(void)
{
	pthread_mutex_lock(&list_lock);
}

void sw_sock_atfork_parent(void)
{
	pthread_mutex_unlock(&list_lock);
}

void sw_sock_atfork_child(void)
{
	struct sw_sock *s;

	for (s = list_head; s; s = s->list_next) {
		pthread_mutex_init(&s->lock, NULL);
		/* the parent's threads, not ours */
		memset(s->sib_fd1, 0, sizeof(s->sib_fd1));
		atomic_store(&s->sleepers, 0);
	}
	pthread_mutex_unlock(&list_lock);
}

struct sw_sock *sw_sock_new(int fd, enum sw_state state)
{
	struct sw_sock *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_lock(&list_lock);
	s->list_next = list_head;
	if (list_head)
		list_head->list_prev = s;
	list_head = s;
	pthread_mutex_unlock(&list_lock);
	pthread_mutex_init(&s->lock, NULL);
	atomic_init(&s->refs, 1);
	s->fd = fd;
	s->state = state;
	s->tcp_rx_limit = SW_NO_LIMIT;
	s->tok_fd = -1;
	s->exec_buf_fd = -1;
	s->holders_fd = -1;
	s->st = sw_stats_conn_new();
	if (s->st) {
		s->st->fd = fd;
		s->st->state = state;
	}
	return s;
}

void sw_listeners_close(struct sw_sock *s)
{
	int i;

	for (i = 0; i < SW_MAX_PROVIDERS; i++) {
		if (s->plisten[i] && sw_providers[i].mod.prov)
			sw_providers[i].mod.ops.listener_close(s->plisten[i]);
		s->plisten[i] = NULL;
	}
}

void sw_sock_set_fd(struct sw_sock *s, int fd)
{
	pthread_mutex_lock(&s->lock);
	s->fd = fd;
	if (s->st)
		s->st->fd = fd;
	pthread_mutex_unlock(&s->lock);
}

bool sw_sock_taken(struct sw_sock *s)
{
	/* read without the lock, which a signal handler's thread may hold
	 * in the frame it interrupted */
	return __atomic_load_n(&s->state, __ATOMIC_RELAXED) != SW_TCP ||
	       __atomic_load_n(&s->dg_marker, __ATOMIC_RELAXED);
}

void sw_sock_child_stats(void)
{
	struct sw_sock *s;

	pthread_mutex_lock(&list_lock);
	for (s = list_head; s; s = s->list_next)
		if (s->closed && s->st) {
			sw_stats_conn_drop(s->st);
			s->st = NULL;
		}
	pthread_mutex_unlock(&list_lock);
}

void sw_sock_ref(struct sw_sock *s)
{
	atomic_fetch_add(&s->refs, 1);
}

void sw_sock_unref(struct sw_sock *s)
{
	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	pthread_mutex_lock(&list_lock);
	if (s->list_prev)
		s->list_prev->list_next = s->list_next;
	else
		list_head = s->list_next;
	if (s->list_next)
		s->list_next->list_prev = s->list_prev;
	pthread_mutex_unlock(&list_lock);
	if (s->fork_buf)
		munmap(s->fork_buf, s->fork_buf->map_len);
	if (s->exec_buf_fd >= 0) {
		sw_fd_forget(s->exec_buf_fd);
		sdp_sys.close(s->exec_buf_fd);
	}
	sw_holders_unmap(s);
	sw_listeners_close(s);
	sw_hello_token_drop(s);
	sw_session_free(s);
	free(s->ptx);
	sw_stats_conn_free(s->st);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
