/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * holders.c - a connection whose upgrade was pending at a fork is kept for
 * the process left holding it alone (the child of a server that forks
 * after accept, of a client that connects then forks): a page the fork
 * tree shares names the holders; the first process that uses the
 * connection drives the upgrade, and commits only once it is the last
 * holder alive (docs/protocol.md section 2.7).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "connect.h"
#include "fallback.h"
#include "holders.h"
#include "log.h"
#include "sock.h"
#include "upgrade.h"
#include "util.h"

#define HOLDERS_MAX 32

/* A reserved place whose child never came (its fork failed) is free again
 * after this. */
#define BIRTH_NS 1000000000ull

enum { H_OPEN, H_TAKEN, H_CUT };

/*
 * One page per kept connection, MAP_SHARED and anonymous: made before the
 * first fork, so every process of the tree maps the same one. pid[i] > 0
 * is a holder; -ppid a child of ppid being born (since born_ns[i]); 0 free.
 */
struct sw_holders {
	_Atomic uint32_t state;		/* H_OPEN, H_TAKEN, H_CUT */
	_Atomic int32_t driver;		/* H_TAKEN: the process driving it */
	_Atomic uint64_t taken_ns;	/* H_TAKEN: since when */
	_Atomic int32_t pid[HOLDERS_MAX];
	_Atomic uint64_t born_ns[HOLDERS_MAX];
};

/* kill(pid, 0) says a zombie lives: its fds are closed all the same. */
static bool alive(pid_t pid)
{
	char path[32], buf[256], *p;
	ssize_t n;
	int fd;

	if (kill(pid, 0) && errno != EPERM)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

/* Holders other than this process still alive; the dead are forgotten. */
static int others(struct sw_holders *h)
{
	int32_t me = getpid(), p;
	int i, n = 0;

	for (i = 0; i < HOLDERS_MAX; i++) {
		p = atomic_load(&h->pid[i]);
		if (!p || p == me)
			continue;
		if (p < 0 ? sw_now_ns() - atomic_load(&h->born_ns[i]) <
				    BIRTH_NS :
			    alive(p)) {
			n++;
			continue;
		}
		atomic_compare_exchange_strong(&h->pid[i], &p, 0);
	}
	return n;
}

static void drop_pid(struct sw_holders *h, int32_t pid)
{
	int i;

	for (i = 0; i < HOLDERS_MAX; i++) {
		int32_t p = pid;

		if (atomic_compare_exchange_strong(&h->pid[i], &p, 0))
			return;
	}
}

void sw_holders_unmap(struct sw_sock *s)
{
	if (s->holders)
		munmap(s->holders, sizeof(*s->holders));
	s->holders = NULL;
}

/* This process's copy stays plain TCP, with nothing of the upgrade's: the
 * connection (and the peer's hello, the bytes looked at) is another
 * process's. Counted nowhere: the connection is the other's. */
static void quiet(struct sw_sock *s)
{
	drop_pid(s->holders, getpid());
	sw_holders_unmap(s);
	if (s->state == SW_TCP)
		return;	/* fell back already, for its own reason */
	s->state = SW_TCP;
	s->fb_reason = SDP_FB_HANDED;
	s->skip_hello = false;
	s->prefix_len = s->prefix_off = 0;
	if (s->st) {
		s->st->state = SW_TCP;
		s->st->fb_reason = SDP_FB_HANDED;
	}
	sw_event(s);
}

bool sw_holders_park(struct sw_sock *s)
{
	struct sw_holders *h = s->holders;
	int i;

	if (!h) {
		/* nothing of the provider's may be copied into the child:
		 * a client's listener opens again when due, in the process
		 * that drives the upgrade */
		if (!sw_pending(s) || s->ss.ep || s->ptx_len)
			return false;
		h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (h == MAP_FAILED)
			return false;
		atomic_store(&h->pid[0], getpid());
		s->holders = h;
		sw_listeners_close(s);
	}
	for (i = 0; i < HOLDERS_MAX; i++) {
		int32_t p = 0;

		atomic_store(&h->born_ns[i], sw_now_ns());
		if (atomic_compare_exchange_strong(&h->pid[i], &p,
						   -(int32_t)getpid()))
			return true;
	}
	/* a tree too wide to follow: TCP in every process */
	atomic_store(&h->state, H_CUT);
	sw_holders_unmap(s);
	return false;
}

void sw_holders_child(struct sw_sock *s)
{
	struct sw_holders *h = s->holders;
	int i;

	if (!h)
		return;
	/* the statistics were copied from the parent's file, which the
	 * parent may have changed meanwhile (its copy handed over) */
	if (s->st) {
		s->st->state = s->state;
		s->st->fb_reason = s->fb_reason;
	}
	for (i = 0; i < HOLDERS_MAX; i++) {
		int32_t p = -(int32_t)getppid();

		if (atomic_compare_exchange_strong(&h->pid[i], &p, getpid()))
			return;
	}
	/* our place was given away (the fork took longer than BIRTH_NS):
	 * the others may already count on being alone */
	quiet(s);
}

void sw_holders_settle(struct sw_sock *s)
{
	struct sw_holders *h = s->holders;
	uint32_t st = H_OPEN;

	if (!h)
		return;
	if (atomic_compare_exchange_strong(&h->state, &st, H_TAKEN)) {
		atomic_store(&h->driver, getpid());
		atomic_store(&h->taken_ns, sw_now_ns());
		SW_DBG("fd %d: this process drives the upgrade of a connection it shares",
		       s->fd);
		return;
	}
	if (st == H_TAKEN && atomic_load(&h->driver) == getpid())
		return;
	/* another process uses it: it stays TCP everywhere */
	if (st == H_TAKEN)
		atomic_compare_exchange_strong(&h->state, &st, H_CUT);
	SW_DBG("fd %d: another process uses this connection: plain TCP here",
	       s->fd);
	quiet(s);
}

bool sw_holders_alone(struct sw_sock *s)
{
	struct sw_holders *h = s->holders;
	uint32_t st;

	if (!h)
		return true;
	st = atomic_load(&h->state);
	if (st == H_TAKEN && !others(h)) {
		drop_pid(h, getpid());
		sw_holders_unmap(s);
		SW_DBG("fd %d: the last holder: the upgrade goes on", s->fd);
		return true;
	}
	if (st == H_TAKEN &&
	    sw_now_ns() - atomic_load(&h->taken_ns) <
		    (uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull)
		return false;
	/* used by two processes, or shared for too long: nothing is
	 * committed, so TCP loses nothing */
	atomic_store(&h->state, H_CUT);
	drop_pid(h, getpid());
	sw_holders_unmap(s);
	sw_fallback(s, SDP_FB_CUT, st == H_CUT ?
		    "another process uses the connection" :
		    "another process still holds the connection");
	return false;
}

void sw_holders_leave(struct sw_sock *s)
{
	if (!s->holders)
		return;
	quiet(s);
}

void sw_holders_exec(struct sw_sock *s)
{
	int fl;

	if (!s->holders)
		return;
	fl = fcntl(s->fd, F_GETFD);
	if (fl >= 0 && (fl & FD_CLOEXEC)) {
		/* the fd goes with the old program */
		quiet(s);
		return;
	}
	/* the new program holds it: as before any exec, TCP for good,
	 * in every process */
	atomic_store(&s->holders->state, H_CUT);
	drop_pid(s->holders, getpid());
	sw_holders_unmap(s);
}
