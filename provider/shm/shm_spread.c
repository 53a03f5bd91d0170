// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * shm_spread.c - one large process_vm_* copy on two threads of this
 * process. Across users only one side may reach the other (root may read
 * and write an unprivileged peer, not the reverse), so every byte of a
 * large send crosses on that side's core while the peer waits. Told so by
 * the switch (SDP_RDMA_SPREAD), such a copy is cut into chunks that the
 * caller and a second thread, the copier, take in turn from a shared
 * counter. The caller starts at once and never waits for the copier to
 * wake: a copier that comes late finds fewer chunks, or none.
 *
 * One copier per process, made at the first such copy and kept (it sleeps
 * on a futex between copies). One copy at a time uses it; another one at
 * the same moment is done by its caller alone. A child of fork() has no
 * copier thread: it finds its parent's structure (the owner pid differs)
 * and makes its own, keeping the old one only to free it at clean-up.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shm.h"

struct shm_copier {
	pid_t owner;			/* the process the thread runs in */
	struct shm_copier *parent;	/* the one this replaced (a fork) */
	bool broken;			/* no thread: copies go unspread */
	pthread_t thread;
	_Atomic int inuse;		/* a caller has the copier (0/1) */
	/* (generation << 1) | open: the copier joins an open job once */
	_Atomic uint32_t job;
	_Atomic uint32_t asleep;	/* the copier waits on job's futex */
	_Atomic int active;		/* the copier is inside a job */
	_Atomic bool stop;
	/* the job: read by the copier only while it is open */
	_Atomic uint64_t next;		/* next chunk's offset */
	_Atomic int err;		/* first error of either thread */
	pid_t pid;
	bool write;
	const struct sdp_sge *sgl;
	int nsge;
	uint64_t raddr, len;
};

static void futex_wait(_Atomic uint32_t *w, uint32_t v)
{
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Takes chunks of the open job until none is left or a copy failed. */
static void take_chunks(struct shm_copier *c)
{
	for (;;) {
		uint64_t off = atomic_fetch_add(&c->next, SHM_SPREAD_CHUNK);
		uint64_t n;
		int r;

		if (off >= c->len || atomic_load(&c->err))
			return;
		n = c->len - off < SHM_SPREAD_CHUNK ? c->len - off :
						      SHM_SPREAD_CHUNK;
		r = shm_cma_copy(c->pid, c->write, c->sgl, c->nsge, off,
				 c->raddr + off, n);
		if (r) {
			int none = 0;

			atomic_compare_exchange_strong(&c->err, &none, r);
			return;
		}
	}
}

/* The copier: joins each open job once, then waits for the next one (a
 * short spin first: a stream's copies come back to back). */
static void *copier_main(void *arg)
{
	struct shm_copier *c = arg;
	uint32_t done = 0;

	for (;;) {
		uint32_t j = atomic_load(&c->job);
		unsigned spins;

		if (atomic_load(&c->stop))
			return NULL;
		if ((j & 1) && j != done) {
			atomic_fetch_add(&c->active, 1);
			/* closed meanwhile: the caller may be setting up the
			 * next job, whose fields are not ours yet */
			if (atomic_load(&c->job) == j)
				take_chunks(c);
			atomic_fetch_sub(&c->active, 1);
			done = j;
			continue;
		}
		for (spins = 0; spins < 512; spins++) {
			if (atomic_load_explicit(&c->job,
						 memory_order_relaxed) != j)
				break;
			__builtin_ia32_pause();
		}
		if (atomic_load(&c->job) != j)
			continue;
		atomic_store(&c->asleep, 1);
		if (atomic_load(&c->job) == j && !atomic_load(&c->stop))
			futex_wait(&c->job, j);
		atomic_store(&c->asleep, 0);
	}
}

/* Is this process under a seccomp filter? Such a filter may kill the
 * process at the clone() of a thread it did not expect (OpenSSH's pre-auth
 * sandbox does), so no copier is made there. Unknown counts as yes. */
static bool seccomp_filtered(void)
{
	char buf[4096], *p;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	p = strstr(buf, "\nSeccomp:");
	if (!p)
		return false;	/* a kernel without seccomp */
	p += strlen("\nSeccomp:");
	while (*p == ' ' || *p == '\t')
		p++;
	return *p != '0';
}

/* A copier for this process, made at the first need. NULL: none can be
 * made here (one CPU, a seccomp filter, or no thread), copies go
 * unspread. */
static struct shm_copier *copier_get(struct shm_provider *p)
{
	struct shm_copier *c = atomic_load(&p->copier), *n;
	pid_t me = getpid();
	sigset_t all, old;
	cpu_set_t cpus;
	int r;

	if (c && c->owner == me)
		return c->broken ? NULL : c;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->owner = me;
	n->parent = c;
	if (sched_getaffinity(0, sizeof(cpus), &cpus) ||
	    CPU_COUNT(&cpus) < 2 || seccomp_filtered()) {
		n->broken = true;
	} else {
		/* signals are the program's: none comes to the copier */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		r = pthread_create(&n->thread, NULL, copier_main, n);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (r) {
			shm_log(p, 5,
				"no second copier thread (%s): large copies to an unprivileged peer run on one core",
				strerror(r));
			n->broken = true;
		} else {
			pthread_setname_np(n->thread, "sdp-copy");
		}
	}
	/* a parent's copier (c, owner another pid) has no thread here: it is
	 * replaced, its memory kept (another thread may still be reading its
	 * owner) */
	if (!atomic_compare_exchange_strong(&p->copier, &c, n)) {
		/* another thread of ours made one first */
		if (!n->broken) {
			atomic_store(&n->stop, true);
			atomic_fetch_add(&n->job, 2);
			futex_wake(&n->job);
			pthread_join(n->thread, NULL);
		}
		free(n);
		return c && c->owner == me && !c->broken ? c : NULL;
	}
	return n->broken ? NULL : n;
}

int shm_spread_copy(struct shm_provider *p, pid_t pid, bool write,
		    const struct sdp_sge *sgl, int nsge, uint64_t raddr,
		    uint64_t len)
{
	struct shm_copier *c;
	unsigned spins = 0;
	uint32_t j;
	int free_ = 0, r;

	if (len < SHM_SPREAD_MIN)
		return shm_cma_copy(pid, write, sgl, nsge, 0, raddr, len);
	c = copier_get(p);
	if (!c || !atomic_compare_exchange_strong(&c->inuse, &free_, 1))
		return shm_cma_copy(pid, write, sgl, nsge, 0, raddr, len);
	c->pid = pid;
	c->write = write;
	c->sgl = sgl;
	c->nsge = nsge;
	c->raddr = raddr;
	c->len = len;
	atomic_store(&c->err, 0);
	atomic_store(&c->next, 0);
	j = (atomic_load(&c->job) + 2) | 1;
	atomic_store(&c->job, j);
	if (atomic_load(&c->asleep))
		futex_wake(&c->job);
	take_chunks(c);
	/* close the job, then wait for a copier inside it: one that joins
	 * after the close sees it closed and takes nothing */
	atomic_store(&c->job, j & ~1u);
	while (atomic_load(&c->active)) {
		/* the copier is inside its last chunk, or was preempted
		 * there: the core may be ours to give */
		if (!(++spins & 63))
			sched_yield();
		else
			__builtin_ia32_pause();
	}
	r = atomic_load(&c->err);
	atomic_store(&c->inuse, 0);
	return r;
}

void shm_spread_free(struct shm_provider *p)
{
	struct shm_copier *c = atomic_exchange(&p->copier, NULL), *up;

	for (; c; c = up) {
		up = c->parent;
		if (c->owner == getpid() && !c->broken) {
			atomic_store(&c->stop, true);
			atomic_fetch_add(&c->job, 2);
			futex_wake(&c->job);
			pthread_join(c->thread, NULL);
		}
		free(c);
	}
}
