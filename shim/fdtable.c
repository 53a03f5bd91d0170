/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fdtable.c - the fd -> struct sw_sock table of the interposer. Lookups of
 * unmanaged fds cost one atomic load; references are taken under a striped
 * lock so a concurrent close cannot free a socket between load and ref.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "fdtable.h"
#include "readiness.h"

#define FDT_STRIPES 64
#define FDT_MIN_SIZE 1024
#define FDT_MAX_SIZE (1 << 24)
#define CNT_BUCKETS 1024

struct fdt_table {
	int size;
	struct sw_sock *_Atomic slot[];
};

/* The fds that name one socket (dup); the last close calls sw_close.
 * fds[0] is the one the switch makes its real calls on. */
struct fdt_count {
	struct sw_sock *s;
	int nfds;
	int cap;
	int *fds;
	struct fdt_count *next;
};

static struct fdt_table *_Atomic fdt_cur;
static pthread_mutex_t fdt_stripe[FDT_STRIPES];
static pthread_mutex_t fdt_cnt_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fdt_count *fdt_cnt[CNT_BUCKETS];

static struct fdt_table *fdt_alloc(int size)
{
	struct fdt_table *t;

	t = calloc(1, sizeof(*t) + (size_t)size * sizeof(t->slot[0]));
	if (!t)
		return NULL;
	t->size = size;
	return t;
}

static int fdt_want_size(int fd)
{
	struct rlimit rl;
	long n = FDT_MIN_SIZE;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		n = (long)rl.rlim_cur;
	if (n < FDT_MIN_SIZE)
		n = FDT_MIN_SIZE;
	if (n > FDT_MAX_SIZE)
		n = FDT_MAX_SIZE;
	if (fd >= n)
		n = (long)fd + 1;
	return (int)n;
}

int fdt_init(void)
{
	struct fdt_table *t;
	int i;

	for (i = 0; i < FDT_STRIPES; i++)
		pthread_mutex_init(&fdt_stripe[i], NULL);
	t = fdt_alloc(fdt_want_size(0));
	if (!t)
		return -ENOMEM;
	atomic_store_explicit(&fdt_cur, t, memory_order_release);
	return 0;
}

static void fdt_lock_all(void)
{
	int i;

	for (i = 0; i < FDT_STRIPES; i++)
		pthread_mutex_lock(&fdt_stripe[i]);
}

static void fdt_unlock_all(void)
{
	int i;

	for (i = FDT_STRIPES - 1; i >= 0; i--)
		pthread_mutex_unlock(&fdt_stripe[i]);
}

/* Grows the table to hold fd (RLIMIT_NOFILE was raised). The old table is
 * kept: a reader may still be looking at it, and it only ever answers
 * "not managed" for fds it is too small for. */
static int fdt_grow(int fd)
{
	struct fdt_table *old, *t;
	int size, i;

	if (fd >= FDT_MAX_SIZE)
		return -EMFILE;
	fdt_lock_all();
	old = atomic_load(&fdt_cur);
	if (old && fd < old->size) {
		fdt_unlock_all();
		return 0;
	}
	size = fdt_want_size(fd);
	if (old && size < 2 * old->size)
		size = 2 * old->size < FDT_MAX_SIZE ? 2 * old->size : size;
	t = fdt_alloc(size);
	if (!t) {
		fdt_unlock_all();
		return -ENOMEM;
	}
	for (i = 0; old && i < old->size; i++)
		t->slot[i] = atomic_load(&old->slot[i]);
	atomic_store_explicit(&fdt_cur, t, memory_order_release);
	fdt_unlock_all();
	return 0;
}

struct sw_sock *fdt_peek(int fd)
{
	struct fdt_table *t = atomic_load_explicit(&fdt_cur,
						   memory_order_acquire);

	if (!t || fd < 0 || fd >= t->size)
		return NULL;
	return atomic_load_explicit(&t->slot[fd], memory_order_acquire);
}

struct sw_sock *fdt_get(int fd)
{
	struct fdt_table *t;
	struct sw_sock *s;
	pthread_mutex_t *m;

	t = atomic_load_explicit(&fdt_cur, memory_order_acquire);
	if (!t || fd < 0 || fd >= t->size)
		return NULL;
	if (!atomic_load_explicit(&t->slot[fd], memory_order_relaxed))
		return NULL;
	/* Managed: take the reference under the fd's stripe, re-reading the
	 * slot from the current table. */
	m = &fdt_stripe[fd % FDT_STRIPES];
	pthread_mutex_lock(m);
	t = atomic_load(&fdt_cur);
	s = fd < t->size ? atomic_load(&t->slot[fd]) : NULL;
	if (s)
		sw_sock_ref(s);
	pthread_mutex_unlock(m);
	return s;
}

static unsigned int cnt_hash(struct sw_sock *s)
{
	uintptr_t v = (uintptr_t)s;

	v ^= v >> 17;
	v *= 0x9e3779b97f4a7c15ull;
	return (unsigned int)(v >> 32) % CNT_BUCKETS;
}

/* fd starts naming s (add) or stops (remove). Returns the number of fds
 * left naming s (or -ENOMEM); *primary receives the fd the switch should
 * now use when that changed, else -1. */
static int cnt_update(struct sw_sock *s, int fd, bool add, int *primary)
{
	struct fdt_count **pp, *c;
	int n, i, *nf;

	*primary = -1;
	pthread_mutex_lock(&fdt_cnt_lock);
	for (pp = &fdt_cnt[cnt_hash(s)]; *pp; pp = &(*pp)->next)
		if ((*pp)->s == s)
			break;
	c = *pp;
	if (!c && !add) {
		pthread_mutex_unlock(&fdt_cnt_lock);
		return 0;
	}
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			goto fail;
		c->s = s;
		*pp = c;
	}
	if (add) {
		if (c->nfds == c->cap) {
			nf = realloc(c->fds, (size_t)(c->cap ? 2 * c->cap : 2) *
				     sizeof(*nf));
			if (!nf) {
				if (!c->nfds) {
					*pp = c->next;
					free(c);
				}
				goto fail;
			}
			c->fds = nf;
			c->cap = c->cap ? 2 * c->cap : 2;
		}
		c->fds[c->nfds++] = fd;
	} else {
		for (i = 0; i < c->nfds && c->fds[i] != fd; i++)
			;
		if (i < c->nfds) {
			c->fds[i] = c->fds[--c->nfds];
			if (i == 0 && c->nfds)
				*primary = c->fds[0];
		}
	}
	n = c->nfds;
	if (n <= 0) {
		*pp = c->next;
		free(c->fds);
		free(c);
	}
	pthread_mutex_unlock(&fdt_cnt_lock);
	return n;
fail:
	pthread_mutex_unlock(&fdt_cnt_lock);
	return -ENOMEM;
}

int fdt_install(int fd, struct sw_sock *s)
{
	struct fdt_table *t;
	struct sw_sock *old;
	pthread_mutex_t *m;
	int ret, primary;

	if (fd < 0)
		return -EBADF;
	t = atomic_load(&fdt_cur);
	if (!t || fd >= t->size) {
		ret = fdt_grow(fd);
		if (ret)
			return ret;
	}
	ret = cnt_update(s, fd, true, &primary);
	if (ret < 0)
		return ret;
	m = &fdt_stripe[fd % FDT_STRIPES];
	pthread_mutex_lock(m);
	t = atomic_load(&fdt_cur);
	old = atomic_exchange(&t->slot[fd], s);
	pthread_mutex_unlock(m);
	if (old) {
		/* The fd was closed behind our back (raw syscall): forget the
		 * stale socket; its fd is gone, so no sw_close. So are its
		 * epoll registrations, which the kernel dropped with the file:
		 * a kept one answered EEXIST to the new socket's ADD and the
		 * kernel ENOENT to the MOD that follows (libuv, which closes
		 * with syscall(SYS_close), then aborts: node's http server
		 * died on the first connection after a closed one's fd). */
		cnt_update(old, fd, false, &primary);
		sw_sock_unref(old);
		rd_fds_closed(fd, fd);
	}
	return 0;
}

struct sw_sock *fdt_remove(int fd, bool *last, int *primary)
{
	return fdt_remove_if(fd, NULL, last, primary);
}

struct sw_sock *fdt_remove_if(int fd, struct sw_sock *expect, bool *last,
			      int *primary)
{
	struct fdt_table *t;
	struct sw_sock *s;
	pthread_mutex_t *m;

	*last = false;
	*primary = -1;
	t = atomic_load(&fdt_cur);
	if (!t || fd < 0 || fd >= t->size ||
	    !atomic_load_explicit(&t->slot[fd], memory_order_relaxed))
		return NULL;
	m = &fdt_stripe[fd % FDT_STRIPES];
	pthread_mutex_lock(m);
	t = atomic_load(&fdt_cur);
	s = atomic_load(&t->slot[fd]);
	if (expect && s != expect)
		s = NULL;
	else
		s = atomic_exchange(&t->slot[fd], NULL);
	pthread_mutex_unlock(m);
	if (s)
		*last = cnt_update(s, fd, false, primary) == 0;
	return s;
}

int fdt_next_managed(int from, int to)
{
	struct fdt_table *t = atomic_load(&fdt_cur);
	int fd;

	if (!t || from < 0)
		return -1;
	if (to >= t->size)
		to = t->size - 1;
	for (fd = from; fd <= to; fd++)
		if (atomic_load_explicit(&t->slot[fd], memory_order_relaxed))
			return fd;
	return -1;
}

static _Atomic uint8_t fdi[FDI_SIZE];

void fdi_set(int fd, int family)
{
	uint8_t v = family == AF_INET ? 4 : family == AF_INET6 ? 6 :
		    family ? FDI_OTHER : 0;

	if (fd >= 0 && fd < FDI_SIZE)
		atomic_store_explicit(&fdi[fd], v, memory_order_relaxed);
}

void fdi_set_plain(int fd)
{
	if (fd >= 0 && fd < FDI_SIZE)
		atomic_store_explicit(&fdi[fd], FDI_PLAIN,
				      memory_order_relaxed);
}

int fdi_get(int fd)
{
	uint8_t v;

	if (fd < 0 || fd >= FDI_SIZE)
		return 0;
	v = atomic_load_explicit(&fdi[fd], memory_order_relaxed);
	return v == 4 ? AF_INET : v == 6 ? AF_INET6 : v ? -1 : 0;
}

void fdi_copy(int oldfd, int newfd)
{
	if (newfd >= 0 && newfd < FDI_SIZE)
		atomic_store_explicit(&fdi[newfd],
				      oldfd >= 0 && oldfd < FDI_SIZE ?
				      atomic_load_explicit(&fdi[oldfd],
							   memory_order_relaxed) :
				      0, memory_order_relaxed);
}

void fdi_clear(unsigned int first, unsigned int last)
{
	unsigned int fd;

	if (last >= FDI_SIZE)
		last = FDI_SIZE - 1;
	if (first > last)
		return;	/* also an fd of -1 */
	for (fd = first; fd <= last; fd++)
		if (atomic_load_explicit(&fdi[fd], memory_order_relaxed))
			atomic_store_explicit(&fdi[fd], 0,
					      memory_order_relaxed);
}

int fdt_size(void)
{
	struct fdt_table *t = atomic_load(&fdt_cur);

	return t ? t->size : 0;
}

void fdt_atfork_prepare(void)
{
	fdt_lock_all();
	pthread_mutex_lock(&fdt_cnt_lock);
}

void fdt_atfork_parent(void)
{
	pthread_mutex_unlock(&fdt_cnt_lock);
	fdt_unlock_all();
}

void fdt_atfork_child(void)
{
	pthread_mutex_unlock(&fdt_cnt_lock);
	fdt_unlock_all();
}
