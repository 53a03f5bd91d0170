/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * probe_answer.c - a client's switch probes the server's provider listener
 * before it sends its hello (discovery.c), and the probe is answered when
 * the server's switch looks at that listener. accept() looks, but the
 * client probes around its TCP connect, so its probe comes while the
 * program is not in accept and waits there until the next connection:
 * across a wire every new client process waited out the provider's whole
 * probe wait (verbs: probe_ms, one second). A thread of the switch answers
 * them as they come, for the listeners of providers whose probes cross a
 * wire (a same-host provider answers by the owner query, which needs no
 * listener's call). It reads no byte of any TCP stream.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "ownfd.h"
#include "probe_answer.h"
#include "providers.h"
#include "sock.h"
#include "sys.h"
#include "util.h"

/* Looked for at most once a millisecond while none come, in accept:
 * clients that keep a watch on the listener probe once, not per
 * connection, and an empty look is a system call per accept. */
#define DRAIN_EVERY_NS 1000000ull

static pthread_mutex_t pa_lock = PTHREAD_MUTEX_INITIALIZER;
/* held by the thread while it touches sockets; fork and exit take it so
 * that no socket's lock is held by the thread then */
static pthread_mutex_t pa_work = PTHREAD_MUTEX_INITIALIZER;
static bool pa_running, pa_failed, pa_hooks;
static int pa_wake = -1;	/* eventfd: the set of listeners changed */

void sw_probes_drain(struct sw_sock *ls, bool force)
{
	uint64_t now = sw_now_ns();
	int i;

	if (!force && !ls->drain_found &&
	    now - ls->drained_ns < DRAIN_EVERY_NS)
		return;
	ls->drained_ns = now;
	ls->drain_found = false;
	for (i = 0; i < sw_nproviders; i++) {
		struct sdp_conn_req *req;
		uint8_t priv[SDP_MAX_PRIVATE_DATA];
		size_t plen;

		if (!ls->plisten[i])
			continue;
		for (;;) {
			plen = sizeof(priv);
			if (sw_providers[i].mod.ops.get_request(ls->plisten[i],
								&req, priv,
								&plen))
				break;
			/* the provider acknowledges a probe in its refusal;
			 * anything else here is not ours to take */
			sw_providers[i].mod.ops.reject(req);
			ls->drain_found = true;
		}
	}
}

static bool wire_provider(int i)
{
	return sw_providers[i].usable &&
	       !(sw_providers[i].mod.info.caps & SDP_CAP_LOCAL_ONLY) &&
	       sw_providers[i].mod.ops.listener_fd;
}

/* s is a listener with a provider listener that takes probes across a
 * wire. Called with s->lock held, or from its own listen and accept. */
static bool takes_wire_probes(const struct sw_sock *s)
{
	int k;

	if (s->state != SW_LISTENER || s->closed)
		return false;
	for (k = 0; k < sw_nproviders; k++)
		if (s->plisten[k] && wire_provider(k))
			return true;
	return false;
}

/* The descriptors of s's provider listeners that take probes across a
 * wire, appended to pf (at most max); how many. Called with s->lock
 * held. */
static int wire_fds(struct sw_sock *s, struct pollfd *pf, int max)
{
	int k, n = 0;

	if (!takes_wire_probes(s))
		return 0;
	for (k = 0; k < sw_nproviders && n < max; k++) {
		int fd;

		if (!s->plisten[k] || !wire_provider(k))
			continue;
		fd = sw_providers[k].mod.ops.listener_fd(s->plisten[k]);
		if (fd >= 0) {
			pf[n].fd = fd;
			pf[n].events = POLLIN;
			pf[n].revents = 0;
			n++;
		}
	}
	return n;
}

/*
 * Each round looks at the listeners as they are now and holds none of
 * them while it sleeps: a listener closes as it would without this thread
 * (its provider listener with it, so its port can be listened on again at
 * once). A descriptor of one closed meanwhile is at worst a wake-up for
 * nothing, and the next round no longer has it.
 */
static void *pa_main(void *arg)
{
	struct pollfd *pf = NULL;
	int cap = 0;

	(void)arg;
	/* provider code runs here: its calls go to libc, not the shim */
	sdp_guard_enter();
	for (;;) {
		struct sw_sock **v;
		int n, i, np = 1, r;
		uint64_t x;

		pthread_mutex_lock(&pa_work);
		n = sw_sock_list(&v);

		if (cap < n * SW_MAX_PROVIDERS + 1) {
			struct pollfd *npf = realloc(pf, ((size_t)n *
				SW_MAX_PROVIDERS + 1) * sizeof(*npf));

			if (npf) {
				pf = npf;
				cap = n * SW_MAX_PROVIDERS + 1;
			}
		}
		for (i = 0; i < n; i++) {
			if (pf) {
				pthread_mutex_lock(&v[i]->lock);
				np += wire_fds(v[i], pf + np, cap - np);
				pthread_mutex_unlock(&v[i]->lock);
			}
			sw_sock_unref(v[i]);
		}
		free(v);
		pthread_mutex_unlock(&pa_work);
		if (!pf) {
			sdp_sys.poll(NULL, 0, 100);	/* memory short */
			continue;
		}
		pf[0].fd = __atomic_load_n(&pa_wake, __ATOMIC_ACQUIRE);
		pf[0].events = POLLIN;
		pf[0].revents = 0;
		r = sdp_sys.poll(pf, (nfds_t)np, -1);
		if (r <= 0)
			continue;
		if (pf[0].revents)
			while (sdp_sys.read(pf[0].fd, &x, sizeof(x)) > 0)
				;
		for (i = 1; i < np && !pf[i].revents; i++)
			;
		if (i == np)
			continue;
		/* a probe came (or a listener went): every listener that
		 * takes them answers what it has */
		pthread_mutex_lock(&pa_work);
		n = sw_sock_list(&v);
		for (i = 0; i < n; i++) {
			pthread_mutex_lock(&v[i]->lock);
			if (takes_wire_probes(v[i]))
				sw_probes_drain(v[i], true);
			pthread_mutex_unlock(&v[i]->lock);
			sw_sock_unref(v[i]);
		}
		free(v);
		pthread_mutex_unlock(&pa_work);
	}
	return NULL;
}

/* fork: the child has no such thread; its next listener, or its next
 * accept on an inherited one (a daemon whose parent exits), starts one.
 * The wake-up is the parent's thread's: the child makes its own (the
 * inherited one stays among the switch's descriptors). */
static void pa_prepare(void)
{
	pthread_mutex_lock(&pa_work);
}

static void pa_parent(void)
{
	pthread_mutex_unlock(&pa_work);
}

static void pa_child(void)
{
	pthread_mutex_init(&pa_lock, NULL);
	pthread_mutex_init(&pa_work, NULL);
	__atomic_store_n(&pa_running, false, __ATOMIC_RELAXED);
	pa_wake = -1;
}

void sw_probe_answer_ensure(struct sw_sock *ls)
{
	if (!__atomic_load_n(&pa_running, __ATOMIC_RELAXED) && !pa_failed)
		sw_probe_answer_watch(ls);
}

void sw_probe_answer_watch(struct sw_sock *ls)
{
	uint64_t one = 1;
	int r;

	if (!takes_wire_probes(ls))
		return;
	pthread_mutex_lock(&pa_lock);
	if (pa_wake < 0) {
		/* the system call itself: the shim's eventfd would make it
		 * the switch's already, with no place to follow a move */
		int fd = (int)syscall(SYS_eventfd2, 0,
				      EFD_CLOEXEC | EFD_NONBLOCK);

		/* the switch's own, out of the program's reach (moved when
		 * the program dup2s onto it) */
		if (fd >= 0)
			sw_fd_own_at(fd, &pa_wake);
	}
	if (!pa_hooks) {
		sw_atfork(pa_prepare, pa_parent, pa_child);
		atexit(pa_prepare);	/* away from the sockets at exit */
		pa_hooks = true;
	}
	if (pa_wake >= 0 && !pa_running && !pa_failed) {
		r = sw_thread_start(pa_main);
		if (r) {
			SW_WARN("cannot start the thread that answers discovery probes (%s): a client across a wire waits up to its provider's probe time before each new connection",
				strerror(r));
			pa_failed = true;
		} else {
			__atomic_store_n(&pa_running, true, __ATOMIC_RELAXED);
		}
	}
	if (pa_wake >= 0 &&
	    sdp_sys.write(__atomic_load_n(&pa_wake, __ATOMIC_ACQUIRE), &one,
			  sizeof(one)) < 0)
		SW_DBG("probe answers: wake-up: %s", strerror(errno));
	pthread_mutex_unlock(&pa_lock);
}
