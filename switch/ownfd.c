/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ownfd.c - the descriptors of the switch and its providers (log file,
 * eventfds, unix sockets, epoll sets): moved above the program's numbers,
 * close-on-exec, and known by number so the shim keeps the program's
 * close, close_range, closefrom, dup2 and dup3 off them.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "log.h"
#include "ownfd.h"
#include "sys.h"

/* Numbers held, as a bitmap readers take without a lock: it only grows,
 * and an old one is never freed (a reader may still look at it). */
struct own_map {
	unsigned int nbits;
	_Atomic uint64_t bits[];
};

struct own_ent {
	int fd;
	int *where;
};

static struct own_map *_Atomic own_map;
static atomic_int own_count;
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static struct own_ent *own_ents;	/* under own_lock */
static int own_nents, own_cap;

bool sw_fd_is_own(int fd)
{
	struct own_map *m;

	if (fd < 0 || !atomic_load_explicit(&own_count, memory_order_relaxed))
		return false;
	m = atomic_load_explicit(&own_map, memory_order_acquire);
	if (!m || (unsigned int)fd >= m->nbits)
		return false;
	return (atomic_load_explicit(&m->bits[fd / 64],
				     memory_order_relaxed) >> (fd % 64)) & 1;
}

/* Under own_lock. */
static int map_set(int fd, bool on)
{
	struct own_map *m = atomic_load(&own_map), *n;
	unsigned int bits;
	uint64_t bit = 1ull << (fd % 64);

	if (!m || (unsigned int)fd >= m->nbits) {
		if (!on)
			return 0;
		bits = m ? m->nbits : 1024;
		while (bits <= (unsigned int)fd)
			bits *= 2;
		n = calloc(1, sizeof(*n) + bits / 64 * sizeof(n->bits[0]));
		if (!n)
			return -ENOMEM;
		n->nbits = bits;
		if (m)
			memcpy((void *)n->bits, (void *)m->bits,
			       m->nbits / 64 * sizeof(m->bits[0]));
		atomic_store_explicit(&own_map, n, memory_order_release);
		m = n;
	}
	if (on)
		atomic_fetch_or(&m->bits[fd / 64], bit);
	else
		atomic_fetch_and(&m->bits[fd / 64], ~bit);
	return 0;
}

/* Where the switch's numbers start: 256 below the soft limit (the program
 * would have to open that many more before its numbers meet them), half
 * of it when the limit is small. */
static int own_base(void)
{
	struct rlimit rl;
	rlim_t top = 1024;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY)
		top = rl.rlim_cur;
	if (top > (1u << 20))
		top = 1u << 20;
	return top > 512 ? (int)top - 256 : (int)top / 2;
}

/* A copy of fd at a high number (above floor), close-on-exec, or -1. */
static int own_place(int fd, int floor)
{
	int base = own_base(), nfd;

	while (base > floor) {
		nfd = sdp_sys.fcntl(fd, F_DUPFD_CLOEXEC, base);
		if (nfd >= 0)
			return nfd;
		if (errno != EMFILE && errno != EINVAL)
			break;
		base = floor + (base - floor) / 2;
	}
	return -1;
}

static int own_find(int fd)
{
	int i;

	for (i = 0; i < own_nents; i++)
		if (own_ents[i].fd == fd)
			return i;
	return -1;
}

/* Registers fd (where: see sw_fd_own). */
static int own_register(int fd, int *where)
{
	struct own_ent *n;
	int r;

	pthread_mutex_lock(&own_lock);
	if (own_nents == own_cap) {
		int cap = own_cap ? 2 * own_cap : 16;

		n = realloc(own_ents, (size_t)cap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&own_lock);
			return fd;	/* unregistered, yet usable */
		}
		own_ents = n;
		own_cap = cap;
	}
	r = map_set(fd, true);
	if (!r) {
		own_ents[own_nents].fd = fd;
		own_ents[own_nents++].where = where;
		atomic_fetch_add(&own_count, 1);
	}
	pthread_mutex_unlock(&own_lock);
	return fd;
}

int sw_fd_own(int fd, int *where)
{
	int nfd;

	if (fd < 0)
		return -EBADF;
	nfd = own_place(fd, fd);
	if (nfd >= 0) {
		sdp_sys.close(fd);
		fd = nfd;
	} else {
		/* stays where it is: still kept from the program */
		sdp_sys.fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
	return own_register(fd, where);
}

int sw_fd_own_at(int fd, int *where)
{
	int own;

	__atomic_store_n(where, fd, __ATOMIC_RELEASE);
	own = sw_fd_own(fd, where);
	if (own < 0) {
		sdp_sys.close(fd);
		own = -1;
	}
	__atomic_store_n(where, own, __ATOMIC_RELEASE);
	return own;
}

int sw_fd_own_here(int fd)
{
	return fd < 0 ? -EBADF : own_register(fd, NULL);
}

void sw_fd_forget(int fd)
{
	int i;

	if (!sw_fd_is_own(fd))
		return;
	pthread_mutex_lock(&own_lock);
	i = own_find(fd);
	if (i >= 0) {
		own_ents[i] = own_ents[--own_nents];
		map_set(fd, false);
		atomic_fetch_sub(&own_count, 1);
	}
	pthread_mutex_unlock(&own_lock);
}

int sw_fd_next_own(unsigned int from, unsigned int to)
{
	struct own_map *m;
	unsigned int fd, end;

	if (!atomic_load_explicit(&own_count, memory_order_relaxed))
		return -1;
	m = atomic_load_explicit(&own_map, memory_order_acquire);
	if (!m || from >= m->nbits)
		return -1;
	end = to < m->nbits - 1 ? to : m->nbits - 1;
	for (fd = from; fd <= end; fd++) {
		uint64_t w = atomic_load_explicit(&m->bits[fd / 64],
						  memory_order_relaxed);

		w >>= fd % 64;
		if (!w) {
			fd |= 63;	/* the rest of this word is free */
			continue;
		}
		fd += (unsigned int)__builtin_ctzll(w);
		return fd <= end ? (int)fd : -1;
	}
	return -1;
}

int sw_fd_make_room(int fd)
{
	int i, nfd;

	if (!sw_fd_is_own(fd))
		return 0;
	pthread_mutex_lock(&own_lock);
	i = own_find(fd);
	if (i < 0) {
		pthread_mutex_unlock(&own_lock);
		return 0;
	}
	if (!own_ents[i].where) {
		pthread_mutex_unlock(&own_lock);
		SW_WARN("the program asked for fd %d, which the switch holds and cannot move; refused with EBUSY",
			fd);
		return -EBUSY;
	}
	nfd = own_place(fd, 2);	/* anywhere but fd itself, which is taken */
	if (nfd < 0) {
		pthread_mutex_unlock(&own_lock);
		SW_WARN("the program asked for fd %d, which the switch holds; no free number to move it to: refused with EBUSY",
			fd);
		return -EBUSY;
	}
	if (map_set(nfd, true)) {
		pthread_mutex_unlock(&own_lock);
		sdp_sys.close(nfd);
		return -EBUSY;
	}
	/* from now on the switch uses nfd; the program's call replaces fd
	 * (the old copy goes with it) */
	__atomic_store_n(own_ents[i].where, nfd, __ATOMIC_RELEASE);
	own_ents[i].fd = nfd;
	map_set(fd, false);
	pthread_mutex_unlock(&own_lock);
	SW_DBG("the program takes fd %d: the switch's descriptor moved to %d",
	       fd, nfd);
	return 0;
}
