/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * core.c - the switch's process-wide state: start-up (settings, providers
 * from the catalog), the life of struct sw_sock, and small helpers (clock,
 * randomness, waiting on an fd) the other files share.
 */
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "sw_internal.h"

struct sw_provider sw_providers[SW_MAX_PROVIDERS];
int sw_nproviders;
static bool sw_active;
static pthread_once_t sw_once = PTHREAD_ONCE_INIT;

void sw_log_open(void);

static void provider_log(int level, const char *line)
{
	sw_log(level, "provider: %s", line);
}

static void load_providers(void)
{
	struct sdp_catalog_entry ents[SDP_CATALOG_MAX];
	char err[512];
	struct sw_proc_stats *ps = sw_stats_proc();
	int n, i;
	size_t used = 0;

	sdp_loader_set_log(provider_log);
	n = sdp_catalog_read(ents, SDP_CATALOG_MAX, err, sizeof(err));
	if (n < 0) {
		SW_ERR("provider catalog: %s; the switch stays off (all TCP)",
		       err);
		return;
	}
	for (i = 0; i < n && sw_nproviders < SW_MAX_PROVIDERS; i++) {
		struct sw_provider *p = &sw_providers[sw_nproviders];
		char opts[300];

		snprintf(opts, sizeof(opts), "%s", ents[i].options);
		if (sdp_module_load(ents[i].name, ents[i].path,
				    opts[0] ? opts : NULL, &p->mod, err,
				    sizeof(err)) < 0) {
			/* a catalog entry whose module is absent is common
			 * (verbs without rdma-core): log at info level */
			SW_INFO("%s", err);
			continue;
		}
		p->index = sw_nproviders++;
		p->usable = p->mod.status == 0;
		if (!p->usable)
			SW_INFO("provider %s: %s; connections fall back to TCP",
				p->mod.name, p->mod.status_msg);
		if (ps && used < sizeof(ps->providers) - 1)
			used += snprintf(ps->providers + used,
					 sizeof(ps->providers) - used,
					 "%s%s%s", used ? "," : "",
					 p->mod.name,
					 p->usable ? "" : "(no device)");
	}
}

static void sw_init_once(void)
{
	int i;

	sw_config_load();
	sw_log_open();
	sw_stats_init();
	load_providers();
	for (i = 0; i < sw_nproviders; i++)
		if (sw_providers[i].usable)
			sw_active = true;
	SW_DBG("switch %s with %d provider(s)", sw_active ? "on" : "off",
	       sw_nproviders);
}

bool sw_init(void)
{
	pthread_once(&sw_once, sw_init_once);
	return sw_active;
}

struct sw_provider *sw_provider_by_name(const char *name)
{
	int i;

	for (i = 0; i < sw_nproviders; i++)
		if (sw_providers[i].usable &&
		    !strncmp(sw_providers[i].mod.name, name,
			     SDP_PROVIDER_NAME_LEN))
			return &sw_providers[i];
	return NULL;
}

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sw_sock *list_head;

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
		sw_sock_ref(s);
		v[n++] = s;
	}
	pthread_mutex_unlock(&list_lock);
	*out = v;
	return n;
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
	sw_listeners_close(s);
	sw_session_free(s);
	free(s->ptx);
	sw_stats_conn_free(s->st);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

uint64_t sw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Randomness comes from getrandom in blocks, handed out per thread: one
 * system call per 32 keys rather than per key. A forked child must not
 * hand out what its parent does: the block is tied to the process. */
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
