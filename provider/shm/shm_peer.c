// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * shm_peer.c - what the provider keeps per process rather than per
 * connection: its own bell (one eventfd that every peer rings), the table of
 * peer processes (their bell and one pidfd each, shared by all endpoints to
 * them), and the dispatch that turns a ring of the bell into the wake-up of
 * the CQs that were rung (docs/provider-shm.md, "Interrupt mode").
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shm.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* The process bell, made on first use and again in a forked child (the
 * parent's bell belongs to the parent's peers). prov->lock held. */
static int bell_locked(struct shm_provider *p)
{
	uint64_t id = 0;

	if (p->bell >= 0 && p->bell_pid == getpid())
		return 0;
	if (p->bell >= 0)
		close(p->bell);	/* the child's copy of the parent's bell */
	p->bell = shm_fd_keep(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	if (p->bell < 0) {
		int ret = p->bell;

		p->bell = -1;
		return ret;
	}
	p->bell_pid = getpid();
	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != sizeof(id))
		id = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)p ^
		     (uint64_t)p->bell;
	p->bell_id = id | 1;	/* never 0 */
	return 0;
}

/* The bell (an fd the caller does not own) and its id. */
int shm_bell_get(struct shm_provider *p, uint64_t *id)
{
	int ret;

	pthread_mutex_lock(&p->lock);
	ret = bell_locked(p);
	if (!ret) {
		ret = p->bell;
		*id = p->bell_id;
	}
	pthread_mutex_unlock(&p->lock);
	return ret;
}

void shm_bell_ring(int bell)
{
	uint64_t one = 1;

	if (bell >= 0)
		(void)!write(bell, &one, sizeof(one));
}

/*
 * A peer rang the bell (or may have): drain it, then signal every waiting
 * CQ one of whose endpoints was rung (its armed flag cleared by the peer).
 * Runs from cq_arm, cq_ack and cq_poll of any CQ with a notify fd; every
 * such fd watches the bell, so whoever sleeps wakes up and calls one of
 * them. Called without any cq->lock held.
 */
void shm_bell_dispatch(struct shm_provider *p)
{
	struct shm_cq *cq;
	uint64_t v;

	pthread_mutex_lock(&p->lock);
	if (p->bell < 0 || p->bell_pid != getpid() || !p->ncqs) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	(void)!read(p->bell, &v, sizeof(v));
	for (cq = p->ncqs; cq; cq = cq->nnext) {
		if (!atomic_load(&cq->waiting))
			continue;
		pthread_mutex_lock(&cq->lock);
		if (atomic_load(&cq->waiting) && shm_cq_rung(cq)) {
			atomic_store(&cq->waiting, false);
			shm_bell_ring(cq->evfd);
		}
		pthread_mutex_unlock(&cq->lock);
	}
	pthread_mutex_unlock(&p->lock);
}

void shm_ncq_add(struct shm_provider *p, struct shm_cq *cq)
{
	pthread_mutex_lock(&p->lock);
	cq->nnext = p->ncqs;
	p->ncqs = cq;
	pthread_mutex_unlock(&p->lock);
}

void shm_ncq_del(struct shm_provider *p, struct shm_cq *cq)
{
	struct shm_cq **pp;

	pthread_mutex_lock(&p->lock);
	for (pp = &p->ncqs; *pp; pp = &(*pp)->nnext)
		if (*pp == cq) {
			*pp = cq->nnext;
			break;
		}
	pthread_mutex_unlock(&p->lock);
}

/*
 * The entry of peer process (pid, bell_id), made on first sight; takes a
 * reference. bell is the peer's bell just received: kept by a new entry,
 * closed when the entry exists already. Returns 0, or -ESRCH when the
 * process is already gone.
 */
int shm_peer_get(struct shm_provider *p, pid_t pid, uint64_t bell_id,
		 int bell, struct shm_peer **out)
{
	struct shm_peer *pe;

	pthread_mutex_lock(&p->peer_lock);
	for (pe = p->peers; pe; pe = pe->next)
		if (pe->pid == pid && pe->bell_id == bell_id &&
		    !atomic_load(&pe->gone))
			break;
	if (pe) {
		pe->refs++;
		pthread_mutex_unlock(&p->peer_lock);
		close(bell);
		*out = pe;
		return 0;
	}
	pe = calloc(1, sizeof(*pe));
	if (!pe) {
		pthread_mutex_unlock(&p->peer_lock);
		close(bell);
		return -ENOMEM;
	}
	pe->pid = pid;
	pe->bell_id = bell_id;
	pe->bell = bell;
	pe->pidfd = -1;
	pe->refs = 1;
	if (pid != getpid()) {
		pe->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (pe->pidfd >= 0 && !shm_fd_ok(pe->pidfd)) {
			/* into the program's reserve: no connection */
			close(pe->pidfd);
			pthread_mutex_unlock(&p->peer_lock);
			close(bell);
			free(pe);
			return -EMFILE;
		}
		if (pe->pidfd < 0 && errno == ESRCH) {
			pthread_mutex_unlock(&p->peer_lock);
			close(bell);
			free(pe);
			return -ESRCH;
		}
		/* other errors (an old kernel, a pid namespace we cannot
		 * see into): the endpoints keep their sockets instead */
		if (pe->pidfd < 0)
			shm_log(p, 6, "no pidfd for peer %d (%d): one socket "
				"per connection watches it", (int)pid, errno);
	}
	pe->next = p->peers;
	p->peers = pe;
	pthread_mutex_unlock(&p->peer_lock);
	*out = pe;
	return 0;
}

void shm_peer_put(struct shm_provider *p, struct shm_peer *pe)
{
	struct shm_peer **pp;

	if (!pe)
		return;
	pthread_mutex_lock(&p->peer_lock);
	if (--pe->refs) {
		pthread_mutex_unlock(&p->peer_lock);
		return;
	}
	for (pp = &p->peers; *pp; pp = &(*pp)->next)
		if (*pp == pe) {
			*pp = pe->next;
			break;
		}
	pthread_mutex_unlock(&p->peer_lock);
	close(pe->bell);
	if (pe->pidfd >= 0)
		close(pe->pidfd);
	free(pe);
}

/* Another reference to an entry the caller holds one of. */
void shm_peer_hold(struct shm_provider *p, struct shm_peer *pe)
{
	pthread_mutex_lock(&p->peer_lock);
	pe->refs++;
	pthread_mutex_unlock(&p->peer_lock);
}

/* Has the peer process exited? One poll of its pidfd, remembered. */
bool shm_peer_gone(struct shm_peer *pe)
{
	struct pollfd pfd;

	if (atomic_load(&pe->gone))
		return true;
	if (pe->pidfd < 0)
		return false;
	pfd.fd = pe->pidfd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLIN | POLLHUP)))
		atomic_store(&pe->gone, true);
	return atomic_load(&pe->gone);
}

/* At cleanup: the endpoints are closed, so only the bell may be left. */
void shm_peers_free(struct shm_provider *p)
{
	struct shm_peer *pe;

	while ((pe = p->peers)) {
		p->peers = pe->next;
		close(pe->bell);
		if (pe->pidfd >= 0)
			close(pe->pidfd);
		free(pe);
	}
	if (p->bell >= 0 && p->bell_pid == getpid())
		close(p->bell);
	p->bell = -1;
	pthread_mutex_destroy(&p->peer_lock);
	pthread_mutex_destroy(&p->lock);
}
