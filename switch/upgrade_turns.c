/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * upgrade_turns.c - at most SDP_UPGRADE_MAX upgrades of a process hold
 * what an upgrade costs at once (a provider listener, a provider connection
 * being made); the others wait on TCP and get their turn in order. The
 * per-process upgrade thread moves the upgrades that hold a turn on, so
 * that they need no call of the program. docs/protocol.md 2.7.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "connect.h"
#include "log.h"
#include "providers.h"
#include "sock.h"
#include "sys.h"
#include "upgrade.h"
#include "upgrade_turns.h"
#include "util.h"

/*
 * Locks: a program thread takes or gives a turn with the socket's lock
 * held, then turn_lock (order: socket, then turns). The thread takes a
 * socket's lock only with trylock: a socket whose lock is held is inside a
 * call of the program, which moves its upgrade on itself. work_lock is held
 * while the thread works (all but its sleeps), so that fork and exit keep
 * it away from the sockets and from the allocator: a child forked while
 * it allocated would inherit an allocator lock that no thread of the child
 * lets go (AddressSanitizer's has no fork handler). The thread takes
 * work_lock before turn_lock, never while it holds turn_lock.
 *
 * The thread reads no byte of any TCP stream: it takes only the steps
 * after the client's hello (SW_UPGRADING, and a client's SW_HELLO_SENT:
 * the provider connection, the SETUPs and the SWITCH), which touch the
 * provider and nothing the program can see.
 */
static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t work_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cond;
/* sockets holding a turn, each with a reference; an entry whose turn went
 * is dropped by the thread */
static struct sw_sock **held;
static int held_n, held_cap;
static unsigned int held_live;	/* of them, still holding it */
/* sockets waiting for one, in order (a ring), each with a reference */
static struct sw_sock **wq;
static size_t wq_head, wq_n, wq_cap;
static unsigned int wq_live;	/* of them, still waiting */
static bool running;		/* the thread exists in this process */
static bool hooks_done;
static bool start_failed;	/* no thread: the program's calls move all */
static __thread bool in_thread;

/*
 * How the thread looks at upgrades whose next step no descriptor tells of
 * (a server's connect answered, the peer's SETUP or SWITCH on a local
 * provider): LOOK_FIRST_NS after each step it saw, then twice as long each
 * time nothing moved, up to LOOK_MAX_NS. The peer's thread answers a step
 * within a few tens of microseconds, and each look is one trylock and one
 * CQ poll, so a handshake takes a few looks; a peer whose program holds it
 * up costs a look a millisecond. LOOK_BUSY_NS: again after a trylock that
 * failed (the program's call moves the upgrade on itself meanwhile).
 * SLEEP_MAX_MS: at most how long it sleeps while any upgrade holds a turn
 * (a client's wait for the server's connection runs out, a turn is given
 * back).
 */
#define LOOK_FIRST_NS 100000ull
#define LOOK_MAX_NS 1000000ull
#define LOOK_BUSY_NS 250000ull
#define SLEEP_MAX_MS 10
/* How many waiting connections, from the head of the line, the thread
 * looks at in a pass (twice SDP_UPGRADE_MAX's default: the client's turns
 * are near the head of the server's line, in the same order). */
#define WALK 128

static int push(struct sw_sock ***v, int *n, int *cap, struct sw_sock *s)
{
	if (*n == *cap) {
		int c = *cap ? *cap * 2 : 64;
		struct sw_sock **nv = realloc(*v, c * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = s;
	return 0;
}

static int wq_push(struct sw_sock *s)
{
	if (wq_n == wq_cap) {
		size_t c = wq_cap ? wq_cap * 2 : 256, i;
		struct sw_sock **nv = malloc(c * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		for (i = 0; i < wq_n; i++)
			nv[i] = wq[(wq_head + i) % wq_cap];
		free(wq);
		wq = nv;
		wq_cap = c;
		wq_head = 0;
	}
	wq[(wq_head + wq_n++) % wq_cap] = s;
	return 0;
}

static struct sw_sock *wq_pop(void)
{
	struct sw_sock *s = wq[wq_head];

	wq_head = (wq_head + 1) % wq_cap;
	wq_n--;
	return s;
}

static int thread_start(void);

bool sw_turn_take(struct sw_sock *s, bool wait)
{
	int t = atomic_load(&s->turn);
	bool r = false;

	if (t != SW_TURN_NONE)
		return t == SW_TURN_HELD;
	pthread_mutex_lock(&turn_lock);
	if (!running && !start_failed)
		thread_start();
	/* a server's connection waits in line even with turns free: the
	 * thread gives it one once its client listens (turns_settle) */
	if (held_live < sw_cfg.upgrade_max && (!wq_live || start_failed) &&
	    (s->is_client || !running)) {
		/* without the thread nobody would drop the entry: the
		 * count alone bounds the upgrades then */
		if (running) {
			if (push(&held, &held_n, &held_cap, s))
				goto unlock;
			sw_sock_ref(s);
		}
		held_live++;
		atomic_store(&s->turn, SW_TURN_HELD);
		r = true;
		if (running)
			pthread_cond_signal(&turn_cond);
	} else if (wait && running && !wq_push(s)) {
		sw_sock_ref(s);
		wq_live++;
		atomic_store(&s->turn, SW_TURN_WAITING);
		pthread_cond_signal(&turn_cond);
		SW_DBG("fd %d: %u upgrades under way: waits its turn", s->fd,
		       held_live);
	}
unlock:
	pthread_mutex_unlock(&turn_lock);
	return r;
}

void sw_turn_give(struct sw_sock *s)
{
	int t;

	if (atomic_load(&s->turn) == SW_TURN_NONE)
		return;
	pthread_mutex_lock(&turn_lock);
	t = atomic_load(&s->turn);
	if (t == SW_TURN_HELD)
		held_live--;
	else if (t == SW_TURN_WAITING)
		wq_live--;
	atomic_store(&s->turn, SW_TURN_NONE);
	if (t == SW_TURN_HELD && wq_live)
		pthread_cond_signal(&turn_cond);
	pthread_mutex_unlock(&turn_lock);
}

bool sw_turn_claim(struct sw_sock *s)
{
	bool r = false, alone;

	/* the first look as soon as the upgrade is due, the next ones at
	 * the pace sw_upgrade_client_ready sets */
	if (s->is_client || atomic_load(&s->turn) != SW_TURN_WAITING ||
	    (s->connect_tries && sw_now_ns() < s->turn_look_ns))
		return false;
	/* Only for a connection alone in line with a turn free: the order
	 * of the line decides nothing then. A line is the thread's to serve
	 * in order: a look here would start the connection's
	 * SDP_UPGRADE_TIMEOUT_MS before its client's turn (its listener)
	 * can come, and a server that opens many connections at once (a
	 * pool) lost some of them to that. */
	pthread_mutex_lock(&turn_lock);
	alone = wq_live == 1 && held_live < sw_cfg.upgrade_max;
	pthread_mutex_unlock(&turn_lock);
	if (!alone || !sw_upgrade_client_ready(s, true))
		return false;
	pthread_mutex_lock(&turn_lock);
	if (atomic_load(&s->turn) != SW_TURN_WAITING) {
		r = atomic_load(&s->turn) == SW_TURN_HELD;
	} else if (held_live < sw_cfg.upgrade_max &&
		   !push(&held, &held_n, &held_cap, s)) {
		/* as turns_settle gives it: held's reference; the line's
		 * entry leaves when it reaches the head */
		sw_sock_ref(s);
		s->turn_ready = false;
		atomic_store(&s->turn, SW_TURN_HELD);
		wq_live--;
		held_live++;
		pthread_cond_signal(&turn_cond);
		r = true;
	} else {
		/* no turn free: the thread gives it the next, in order */
		s->turn_ready = true;
		pthread_cond_signal(&turn_cond);
	}
	pthread_mutex_unlock(&turn_lock);
	return r;
}

bool sw_turn_in_thread(void)
{
	return in_thread;
}

bool sw_turn_driven(const struct sw_sock *s)
{
	return running && (s->state == SW_UPGRADING ||
			   (s->is_client && s->state == SW_HELLO_SENT)) &&
	       atomic_load(&s->turn) != SW_TURN_NONE;
}

/*
 * Under turn_lock: waiting sockets take the turns that are free, and the
 * entries of sockets that gave theirs up move to drop (their references
 * are dropped without the lock). Turns go in the order of the line, to a
 * client's connection as it comes, to a server's only once its client's
 * listener is there (the client's turn came: a look outside the lock,
 * cand), so that the two ends' turns stay on the same connections even
 * when one end gave some up or runs behind. The server's wait for a
 * listener runs (SDP_UPGRADE_TIMEOUT_MS) only for its first
 * SDP_UPGRADE_MAX connections in line: a client holds at most that many
 * turns, taken in the order it connected, which is this line's order, so
 * the ones further back cannot have a listener due yet, however long a
 * client that connected thousands of times at once takes to reach them.
 */
static void turns_settle(struct sw_sock ***drop, int *ndrop, int *dcap,
			 struct sw_sock ***cand, int *ncand, int *ccap,
			 uint64_t *next_ns)
{
	uint64_t now = sw_now_ns();
	struct sw_sock *s;
	size_t k;
	int i, seen = 0;
	uint32_t servers = 0;	/* server connections before s in line */

	for (i = 0; i < held_n; i++) {
		s = held[i];
		if (atomic_load(&s->turn) == SW_TURN_HELD)
			continue;
		if (push(drop, ndrop, dcap, s))
			return;	/* memory short: next time */
		held[i--] = held[--held_n];
	}
	for (k = 0; k < wq_n && seen < WALK && k < 4 * WALK; k++) {
		s = wq[(wq_head + k) % wq_cap];
		if (atomic_load(&s->turn) != SW_TURN_WAITING)
			continue;
		seen++;
		if (!s->is_client)
			s->turn_clock = servers++ < sw_cfg.upgrade_max;
		if (s->is_client || s->turn_ready) {
			if (held_live >= sw_cfg.upgrade_max ||
			    push(&held, &held_n, &held_cap, s))
				continue;
			sw_sock_ref(s);	/* held's (the line's: below) */
			s->turn_ready = false;
			atomic_store(&s->turn, SW_TURN_HELD);
			wq_live--;
			held_live++;
		} else if (now < s->turn_look_ns) {
			/* its next look at the client's listener */
			if (s->turn_look_ns < *next_ns)
				*next_ns = s->turn_look_ns;
		} else if (held_live < sw_cfg.upgrade_max &&
			   !push(cand, ncand, ccap, s)) {
			sw_sock_ref(s);
		}
	}
	/* entries given up or served leave the head of the line */
	while (wq_n && atomic_load(&wq[wq_head]->turn) != SW_TURN_WAITING) {
		if (push(drop, ndrop, dcap, wq[wq_head]))
			return;
		wq_pop();
	}
}

/* A server's connection waiting in line: is its client's listener there?
 * *next_ns is lowered to when s needs the next look. (work_lock held) */
static void look_waiting(struct sw_sock *s, uint64_t *next_ns)
{
	uint64_t now = sw_now_ns();

	if (pthread_mutex_trylock(&s->lock)) {
		/* the program is in a call on s (which looks itself when
		 * s is alone in line, sw_turn_claim) */
		if (now + LOOK_BUSY_NS < *next_ns)
			*next_ns = now + LOOK_BUSY_NS;
		return;
	}
	if (s->state == SW_UPGRADING && !s->is_client && !s->ss.ep &&
	    atomic_load(&s->turn) == SW_TURN_WAITING &&
	    now >= s->turn_look_ns)
		s->turn_ready = sw_upgrade_client_ready(s, s->turn_clock);
	if (s->turn_ready)
		*next_ns = 0;	/* its turn, at once */
	else if (s->state == SW_UPGRADING &&
		 atomic_load(&s->turn) == SW_TURN_WAITING &&
		 s->turn_look_ns < *next_ns)
		*next_ns = s->turn_look_ns;
	pthread_mutex_unlock(&s->lock);
}

/* Which step of the handshake s is at (s->lock held). */
static uint32_t stage_of(const struct sw_sock *s)
{
	const struct sw_session *ss = &s->ss;

	return (uint32_t)s->state << 8 | (ss->ep != NULL) |
	       (uint32_t)ss->connected << 1 | (uint32_t)ss->setup_sent << 2 |
	       (uint32_t)ss->setup_rcvd << 3 | (uint32_t)ss->switch_rcvd << 4;
}

/* When the thread next looks at s for a step only a look sees: soon after
 * each step, less often while nothing moves (LOOK_FIRST_NS). */
static uint64_t look_pace(struct sw_sock *s, uint64_t now)
{
	uint32_t st = stage_of(s);

	if (st != s->turn_stage || !s->turn_gap_ns) {
		s->turn_stage = st;
		s->turn_gap_ns = LOOK_FIRST_NS;
	} else if (s->turn_gap_ns < LOOK_MAX_NS) {
		s->turn_gap_ns *= 2;
		if (s->turn_gap_ns > LOOK_MAX_NS)
			s->turn_gap_ns = LOOK_MAX_NS;
	}
	return now + s->turn_gap_ns;
}

/*
 * One look at s, which holds a turn: its upgrade's next steps, then what
 * the thread's sleep watches for it (the client's provider listeners) into
 * pf. Returns the number of pollfds added; *next_ns is lowered to when s
 * needs another look if a step is seen only by looking.
 */
static int look(struct sw_sock *s, struct pollfd *pf, int max,
		uint64_t *next_ns)
{
	int fds[SW_MAX_PROVIDERS], n, i, cq;
	uint64_t now = sw_now_ns(), at;

	if (pthread_mutex_trylock(&s->lock)) {
		/* the program is in a call on s */
		if (now + LOOK_BUSY_NS < *next_ns)
			*next_ns = now + LOOK_BUSY_NS;
		return 0;
	}
	if (s->closed || !sw_pending(s)) {
		sw_turn_give(s);
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	if (s->state != SW_UPGRADING &&
	    !(s->is_client && s->state == SW_HELLO_SENT)) {
		/* before the client's hello is through: the program's
		 * calls */
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	/* a client waiting on its listeners is looked at when they wake
	 * (each look is a system call), or now and then for its deadline */
	if (!(s->is_client && !s->ss.ep && sw_client_listening(s) &&
	      !s->turn_woken && now < s->turn_look_ns))
		sw_upgrade_progress(s);
	s->turn_woken = false;
	n = 0;
	if (s->state == SW_UPGRADING ||
	    (s->is_client && s->state == SW_HELLO_SENT)) {
		if (s->is_client && !s->ss.ep && sw_client_listening(s)) {
			if (now >= s->turn_look_ns)
				s->turn_look_ns = now + SLEEP_MAX_MS *
							1000000ull;
			n = sw_upgrade_fds(s, fds, max < SW_MAX_PROVIDERS ?
					   max : SW_MAX_PROVIDERS, &cq);
			for (i = 0; i < n; i++) {
				pf[i].fd = fds[i];
				pf[i].events = POLLIN;
			}
		} else {
			/* a server's connect waits for its time (a refused
			 * one, connect_again), else the peer's next step */
			at = !s->is_client && !s->ss.ep ?
			     sw_upgrade_server_at(s) : 0;
			if (at <= now)
				at = look_pace(s, sw_now_ns());
			if (at < *next_ns)
				*next_ns = at;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* The thread's scratch vectors, grown as needed and kept for its life.
 * Static, not on its stack: a child forked while the thread runs has no
 * such thread, and memory its stack alone pointed to would be a leak there
 * (a later thread of the child takes them over). */
static struct sw_sock **v, **drop, **cand;
static struct pollfd *pf;
static int *pfi;	/* v[i]'s first pollfd */
static int vcap, dcap, pcap, icap, ccap;

static void *thread_main(void *arg)
{
	(void)arg;
	/* provider code runs here: its calls go to libc, not the shim */
	sdp_guard_enter();
	in_thread = true;
	pthread_mutex_lock(&work_lock);
	pthread_mutex_lock(&turn_lock);
	for (;;) {
		int n = 0, ndrop = 0, np = 0, nc = 0, i, k;
		uint64_t now = sw_now_ns(), next = now + SLEEP_MAX_MS *
							  1000000ull;
		struct timespec ts;

		turns_settle(&drop, &ndrop, &dcap, &cand, &nc, &ccap, &next);
		if (!held_n && !ndrop && !nc && !wq_live) {
			/* a turn taken, or given while others wait, signals;
			 * meanwhile a fork or an exit need not wait for us */
			pthread_mutex_unlock(&work_lock);
			pthread_cond_wait(&turn_cond, &turn_lock);
			pthread_mutex_unlock(&turn_lock);
			pthread_mutex_lock(&work_lock);
			pthread_mutex_lock(&turn_lock);
			continue;
		}
		for (i = 0; i < held_n; i++) {
			if (push(&v, &n, &vcap, held[i]))
				break;
			sw_sock_ref(held[i]);
		}
		/* connections wait in line: a turn given back meanwhile
		 * wakes nobody in the poll below */
		if (wq_live && next > now + LOOK_MAX_NS)
			next = now + LOOK_MAX_NS;
		pthread_mutex_unlock(&turn_lock);
		for (i = 0; i < ndrop; i++)
			sw_sock_unref(drop[i]);
		if (icap < n) {
			int *ni = realloc(pfi, n * sizeof(*ni));

			if (ni) {
				pfi = ni;
				icap = n;
			}
		}
		if (pcap < n * SW_MAX_PROVIDERS) {
			struct pollfd *np2 = realloc(pf, n * SW_MAX_PROVIDERS *
							 sizeof(*pf));

			if (np2) {
				pf = np2;
				pcap = n * SW_MAX_PROVIDERS;
			}
		}
		if (icap < n) {
			/* memory short: the program's calls move them on
			 * meanwhile; try again later */
			for (i = 0; i < n; i++)
				sw_sock_unref(v[i]);
			for (i = 0; i < nc; i++)
				sw_sock_unref(cand[i]);
			pthread_mutex_unlock(&work_lock);
			sdp_sys.poll(NULL, 0, SLEEP_MAX_MS);
			pthread_mutex_lock(&work_lock);
			pthread_mutex_lock(&turn_lock);
			continue;
		}
		for (i = 0; i < nc; i++)
			look_waiting(cand[i], &next);
		for (i = 0; i < n; i++) {
			pfi[i] = np;
			np += look(v[i], pf + np, pcap - np, &next);
		}
		pthread_mutex_unlock(&work_lock);
		now = sw_now_ns();
		next = next > now ? next - now : 0;
		ts.tv_sec = (time_t)(next / 1000000000ull);
		ts.tv_nsec = (long)(next % 1000000000ull);
		if (sdp_sys.ppoll(pf, np, &ts, NULL) > 0) {
			for (i = 0; i < n; i++)
				for (k = pfi[i]; k < (i + 1 < n ? pfi[i + 1] :
							  np); k++)
					if (pf[k].revents)
						v[i]->turn_woken = true;
		}
		pthread_mutex_lock(&work_lock);
		for (i = 0; i < n; i++)
			sw_sock_unref(v[i]);
		for (i = 0; i < nc; i++)
			sw_sock_unref(cand[i]);
		pthread_mutex_lock(&turn_lock);
	}
	return NULL;
}

static void cond_setup(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&turn_cond, &ca);
	pthread_condattr_destroy(&ca);
}

/* fork: the child has no upgrade thread (its next turn starts one); the
 * thread must not hold a socket's lock across the fork. Not turn_lock:
 * the switch's own preparation for the fork (fork_exec.c) may settle
 * upgrades, which gives their turns back; the thread never holds
 * turn_lock while it waits for work_lock. */
static void turns_prepare(void)
{
	pthread_mutex_lock(&work_lock);
}

static void turns_parent(void)
{
	pthread_mutex_unlock(&work_lock);
}

static void turns_child(void)
{
	pthread_mutex_init(&work_lock, NULL);
	pthread_mutex_init(&turn_lock, NULL);
	cond_setup();
	running = false;
}

/* exit: the thread stays away from the sockets while the process ends */
static void turns_exit(void)
{
	pthread_mutex_lock(&work_lock);
}

/* Under turn_lock. */
static int thread_start(void)
{
	int r;

	if (!hooks_done) {
		cond_setup();
		sw_atfork(turns_prepare, turns_parent, turns_child);
		atexit(turns_exit);
		hooks_done = true;
	}
	r = sw_thread_start(thread_main);
	if (r) {
		SW_WARN("cannot start the upgrade thread (%s): upgrades move on in the program's calls only",
			strerror(r));
		start_failed = true;
		return -r;
	}
	running = true;
	return 0;
}
