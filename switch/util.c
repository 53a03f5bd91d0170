/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * util.c - small helpers the switch's files share: the clock, random keys,
 * waiting on and writing to an fd, and socket address bits.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "sys.h"
#include "util.h"
#include "wire.h"

uint64_t sw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

ssize_t sw_read_small(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return n;
}

/*
 * Keys come from a pool of getrandom() bytes, refilled 512 at a time. The
 * pool, its lock included, lives in a page the kernel wipes in a child
 * process (MADV_WIPEONFORK): a child, however it was made, finds the pool
 * empty and the lock free, and never hands out its parent's bytes. No
 * getpid() per key.
 */
struct rnd_pool {
	pthread_mutex_t lock;	/* all-zero is unlocked */
	uint32_t valid;		/* 0 in a fresh or wiped pool */
	uint32_t off;
	uint8_t b[512];
};

static struct rnd_pool *rnd;
static pthread_once_t rnd_once = PTHREAD_ONCE_INIT;

static void random_fill(void *buf, size_t len);

static void rnd_map(void)
{
	void *m = mmap(NULL, sizeof(*rnd), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return;
	if (madvise(m, sizeof(*rnd), MADV_WIPEONFORK)) {
		munmap(m, sizeof(*rnd));
		return;
	}
	rnd = m;
}

void sw_random(void *buf, size_t len)
{
	struct rnd_pool *r;

	pthread_once(&rnd_once, rnd_map);
	r = rnd;
	if (!r || len > sizeof(r->b) / 4) {
		random_fill(buf, len);
		return;
	}
	pthread_mutex_lock(&r->lock);
	if (!r->valid || r->off + len > sizeof(r->b)) {
		random_fill(r->b, sizeof(r->b));
		r->off = 0;
		r->valid = 1;
	}
	memcpy(buf, r->b + r->off, len);
	/* never handed out twice */
	memset(r->b + r->off, 0, len);
	r->off += len;
	pthread_mutex_unlock(&r->lock);
}

static void random_fill(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* no entropy source: still unpredictable enough to
			 * bind a local connection, never all-zero */
			uint64_t x = sw_now_ns() ^ ((uint64_t)getpid() << 32) ^
				     (uintptr_t)buf;
			while (len) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				*p++ = (uint8_t)x;
				len--;
			}
			return;
		}
		p += n;
		len -= n;
	}
}

int sw_tcp_write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = sdp_sys.send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				sw_wait_fd(fd, POLLOUT, 100);
				continue;
			}
			return -errno;
		}
		p += n;
		len -= n;
	}
	return 0;
}

int sw_wait_fd(int fd, short events, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int r;

	do
		r = sdp_sys.poll(&pfd, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : r;
}

int sw_wait_fd_call(int fd, short events)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int w = sdp_wait_begin(), r;

	r = sdp_sys.poll(&pfd, 1, -1);
	sdp_wait_end(w);
	return r < 0 ? -1 : 0;
}

uint8_t *sw_bounce_buf(void)
{
	static __thread uint8_t *bounce;

	if (!bounce)
		bounce = malloc(SW_BOUNCE_SIZE);
	if (!bounce)
		errno = ENOMEM;
	return bounce;
}

bool sw_fsize_room(uint64_t size)
{
	struct rlimit rl;

	return getrlimit(RLIMIT_FSIZE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	       size <= rl.rlim_cur;
}

bool sw_fd_nonblocking(int fd)
{
	int fl = sdp_sys.fcntl(fd, F_GETFL);

	return fl >= 0 && (fl & O_NONBLOCK);
}

/* A provider name into its NUL-padded 8-byte wire field. */
void sw_name_copy(char dst[SDP_PROVIDER_NAME_LEN], const char *src)
{
	size_t n = strnlen(src, SDP_PROVIDER_NAME_LEN);

	memset(dst, 0, SDP_PROVIDER_NAME_LEN);
	memcpy(dst, src, n);
}

void sw_addr_port(const struct sockaddr_storage *ss, uint16_t *port)
{
	if (ss->ss_family == AF_INET)
		*port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
	else
		*port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

struct thread_start {
	void *(*fn)(void *);
	atomic_int running;
};

static void *thread_begin(void *arg)
{
	struct thread_start *ts = arg;
	void *(*fn)(void *) = ts->fn;

	/* ts lives on the starter's stack: not touched after this */
	atomic_store(&ts->running, 1);
	return fn(NULL);
}

int sw_thread_start(void *(*fn)(void *))
{
	struct thread_start ts = { .fn = fn };
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&t, &attr, thread_begin, &ts);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* the new thread's start (the C library's and a sanitizer's set-up,
	 * which allocate) is over before the caller goes on: a fork right
	 * after must not find an allocator lock held by a thread the child
	 * will not have */
	while (!r && !atomic_load(&ts.running))
		sched_yield();
	return r;
}

/*
 * The switch's fork handlers, as registered. A few files register them,
 * some only when their thread first starts; the list only grows. A fork
 * made past the C library runs the handlers counted at its prepare, one
 * such fork at a time (raw_fork_lock, held from prepare to parent; the
 * child starts with it free), so two threads' raw clones do not interleave
 * their handlers. Registration takes only hooks_lock, never held around a
 * handler: a thread registering under a lock a prepare handler waits for
 * does not wait for the fork.
 */
#define FORK_HOOKS_MAX 8

static struct {
	void (*prepare)(void), (*parent)(void), (*child)(void);
} hooks[FORK_HOOKS_MAX];
static atomic_int nhooks;
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t raw_fork_lock = PTHREAD_MUTEX_INITIALIZER;
static int raw_fork_hooks;	/* counted at the prepare (raw_fork_lock) */

int sw_atfork(void (*prepare)(void), void (*parent)(void),
	      void (*child)(void))
{
	int r, n;

	pthread_mutex_lock(&hooks_lock);
	r = pthread_atfork(prepare, parent, child);
	n = atomic_load(&nhooks);
	/* six callers, each registering once: the list has room for all */
	if (!r && n < FORK_HOOKS_MAX) {
		hooks[n].prepare = prepare;
		hooks[n].parent = parent;
		hooks[n].child = child;
		atomic_store_explicit(&nhooks, n + 1, memory_order_release);
	}
	pthread_mutex_unlock(&hooks_lock);
	return r;
}

void sw_fork_prepare(void)
{
	int i;

	pthread_mutex_lock(&raw_fork_lock);
	raw_fork_hooks = atomic_load_explicit(&nhooks, memory_order_acquire);
	for (i = raw_fork_hooks - 1; i >= 0; i--)
		if (hooks[i].prepare)
			hooks[i].prepare();
}

void sw_fork_parent(void)
{
	int i;

	for (i = 0; i < raw_fork_hooks; i++)
		if (hooks[i].parent)
			hooks[i].parent();
	pthread_mutex_unlock(&raw_fork_lock);
}

void sw_fork_child(void)
{
	int i;

	pthread_mutex_init(&raw_fork_lock, NULL);
	for (i = 0; i < raw_fork_hooks; i++)
		if (hooks[i].child)
			hooks[i].child();
}
