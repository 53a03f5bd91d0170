/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * holders.c - a connection whose upgrade was pending at a fork is kept for
 * the process left holding it alone (the child of a server that forks
 * after accept, of a client that connects then forks): a page the fork
 * tree shares names the holders; the first process that uses the
 * connection drives the upgrade, and commits only once it is the last
 * holder alive (docs/protocol.md section 2.7).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "connect.h"
#include "fallback.h"
#include "fork_exec.h"
#include "hello_token.h"
#include "holders.h"
#include "log.h"
#include "ownfd.h"
#include "sdp_switch.h"
#include "providers.h"
#include "reupgrade.h"
#include "sock.h"
#include "upgrade.h"
#include "util.h"

#define HOLDERS_MAX 32

/* A reserved place whose child never came (its fork failed) is free again
 * after this; one for the receiver of an fd in flight (SCM_RIGHTS), after
 * TRANSIT_NS. */
#define BIRTH_NS 1000000000ull
#define TRANSIT_NS 10000000000ull
#define IN_TRANSIT INT32_MIN

#define PASS_MAGIC 0x53445048u	/* "HPDS" */
/* a connection returned to TCP for the pass: the bytes that had come on
 * the SAN and were not read follow the record's first pages */
#define PASS_MAGIC_TCP 0x54445048u	/* "HPDT" */

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
	/* an fd passed with SCM_RIGHTS: the upgrade as the sender left it,
	 * for the receiver (sw_holders_received) */
	struct sw_pass {
		uint32_t magic;
		uint32_t ino_lo, ino_hi;
		int32_t state;
		int32_t family;
		uint8_t is_client, skip_hello, key_refused, spoke_first;
		uint8_t pad[4];
		int32_t up_prov;
		uint32_t lsn_provs, cand_provs, connect_tries;
		uint16_t local_port;
		uint32_t peerlen;
		struct sockaddr_storage peer;
		uint8_t key[16];
		uint8_t hello_buf[sizeof(struct sdp_hello)];
		uint64_t hello_got, prefix_off, prefix_len;
		uint64_t tcp_tx, tcp_rx;
		uint64_t born_ns, upgrade_at_ns, deadline_ns, spoke_first_ns;
		/* a connection back on TCP (PASS_MAGIC_TCP) */
		uint64_t dg_tx_base, dg_rx_base;
		uint8_t dg_rx_based, reup;
		uint32_t reup_n;
	} pass;
	/* a holder stepped aside (a seccomp sandbox) and may do its I/O
	 * past its switch: the bytes on TCP are the kernel's count */
	_Atomic uint32_t unseen;
};

/* kill(pid, 0) says a zombie lives: its fds are closed all the same. */
static bool alive(pid_t pid)
{
	char path[32], buf[256], *p;

	if (kill(pid, 0) && errno != EPERM)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (sw_read_small(path, buf, sizeof(buf)) < 0)
		return true;
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
				    (p == IN_TRANSIT ? TRANSIT_NS : BIRTH_NS) :
			    alive(p)) {
			n++;
			continue;
		}
		atomic_compare_exchange_strong(&h->pid[i], &p, 0);
	}
	return n;
}

/* Holders other than this process in the list, alive or not. */
static int listed(struct sw_holders *h)
{
	int32_t me = getpid(), p;
	int i, n = 0;

	for (i = 0; i < HOLDERS_MAX; i++) {
		p = atomic_load(&h->pid[i]);
		n += p && p != me;
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
	int fd = __atomic_load_n(&s->holders_fd, __ATOMIC_RELAXED);

	if (s->holders)
		munmap(s->holders, sizeof(*s->holders));
	s->holders = NULL;
	if (fd >= 0) {
		sw_fd_forget(fd);
		sdp_sys.close(fd);
	}
	__atomic_store_n(&s->holders_fd, -1, __ATOMIC_RELAXED);
}

/* fd, a file holding a record, kept as the switch's (above the program's
 * numbers, close-on-exec) for a program exec'd on s; -1 if it cannot be. */
static void keep_fd(struct sw_sock *s, int fd)
{
	sw_fd_own_at(fd, &s->holders_fd);
}

/*
 * A new record for s. One for a connection back on TCP (or carried: it
 * returns to TCP at this fork) lives in a memory file whose descriptor is
 * kept: a process of the tree may exec a new program on the connection,
 * whose switch maps the same record from it (sw_holders_adopt); so is
 * one for a pending upgrade with SDP_REUPGRADE=1 (exec_reup.c keeps such
 * an upgrade for the new program). Without, a pending upgrade's record
 * is anonymous (an exec gives that upgrade up), as is any when no memory
 * file can be made (the exec then gives the upgrade up).
 */
static struct sw_holders *holders_new(struct sw_sock *s)
{
	struct sw_holders *h;
	int fd = -1;

	if ((!sw_pending(s) || sw_cfg.reupgrade) &&
	    sw_fsize_room(sizeof(*h))) {
		fd = memfd_create("sdp-holders", MFD_CLOEXEC);
		if (fd >= 0 && ftruncate(fd, sizeof(*h))) {
			sdp_sys.close(fd);
			fd = -1;
		}
	}
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE,
		 MAP_SHARED | (fd < 0 ? MAP_ANONYMOUS : 0), fd, 0);
	if (h == MAP_FAILED) {
		if (fd >= 0)
			sdp_sys.close(fd);
		return NULL;
	}
	if (fd >= 0)
		keep_fd(s, fd);
	return h;
}

/* Where the record of a socket in flight is found: by its owner's uid and
 * the socket's inode. */
static void pass_path(char *buf, size_t len, unsigned long long ino)
{
	snprintf(buf, len, "/dev/shm/sdp-pass.%u.%llu", (unsigned)geteuid(),
		 ino);
}

/* A record for the receiver, made new. The fd, or -1. */
static int pass_create(const char *path)
{
	return open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    0600);
}

/* This process's copy stays plain TCP, with nothing of the upgrade's: the
 * connection (and the peer's hello, the bytes looked at) is another
 * process's. reason: SDP_FB_HANDED when this process does not use it
 * (counted nowhere: the connection is the other's), SDP_FB_CUT when it
 * does, beside another (its bytes are counted here). holds: this process
 * stays among the holders (it keeps its copy: sw_holders_stand_by). */
static void quiet_as(struct sw_sock *s, int reason, bool holds)
{
	s->reup_never = true;
	if (!holds)
		drop_pid(s->holders, getpid());
	sw_holders_unmap(s);
	if (!sw_pending(s) || s->ss.ep)
		return;	/* fell back already, for its own reason; or
			 * (never with a record) further than it can keep */
	s->state = SW_TCP;
	s->fb_reason = reason;
	s->skip_hello = false;
	s->prefix_len = s->prefix_off = 0;
	if (s->st) {
		s->st->state = SW_TCP;
		s->st->fb_reason = reason;
	}
	sw_event(s);
}

static void quiet(struct sw_sock *s, int reason)
{
	quiet_as(s, reason, false);
}

/* What a fork keeps a record for: a pending upgrade with nothing of the
 * provider's yet; a carried connection (returned to TCP for the fork) or
 * one back on TCP that may be upgraded again, for the process that will
 * hold it alone (reupgrade.c). */
static bool sw_holders_keeps(struct sw_sock *s)
{
	if (sw_pending(s))
		return !s->ss.ep && !s->ptx_len;
	return sw_cfg.reupgrade && !s->reup_never &&
	       (s->state == SW_SAN || (s->state == SW_TCP && s->reup));
}

bool sw_holders_park(struct sw_sock *s)
{
	struct sw_holders *h = s->holders;
	int i;

	if (!h) {
		if (!sw_holders_keeps(s))
			return false;
		h = holders_new(s);
		if (!h)
			return false;
		atomic_store(&h->pid[0], getpid());
		s->holders = h;
	}
	/* nothing of the provider's may be copied into the child, at this
	 * fork or a later one: a client's listener (which the driver may
	 * have opened again since the first) would keep its name bound in
	 * the child, and the driver could not open it again; it opens again
	 * when due, in the process that drives the upgrade */
	if (sw_pending(s))
		sw_listeners_close(s);
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
	 * parent may have changed meanwhile (its copy handed over, closed,
	 * the slot even taken again): this process's entry is its own */
	if (s->st) {
		s->st->in_use = 1;
		s->st->fd = s->fd;
		s->st->state = s->state;
		s->st->fb_reason = s->fb_reason;
		s->st->is_client = s->is_client;
		s->st->local_port = s->local_port;
		if (s->peerlen)
			sw_peer_text(s, s->st->peer, sizeof(s->st->peer));
	}
	/* a child in a pid namespace of its own (a raw clone with
	 * CLONE_NEWPID, shim/around.c): its pid names another process to
	 * the others and theirs nothing to it, so no one could tell when
	 * one holder is left; the connection stays TCP in every process */
	if (getppid() == 0) {
		atomic_store(&h->state, H_CUT);
		quiet(s, SDP_FB_CUT);
		return;
	}
	for (i = 0; i < HOLDERS_MAX; i++) {
		int32_t p = -(int32_t)getppid();

		if (atomic_compare_exchange_strong(&h->pid[i], &p, getpid()))
			return;
	}
	/* our place was given away (the fork took longer than BIRTH_NS):
	 * the others may already count on being alone */
	quiet(s, SDP_FB_HANDED);
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
	quiet(s, SDP_FB_CUT);
}

bool sw_holders_others(struct sw_sock *s)
{
	return s->holders && others(s->holders);
}

bool sw_holders_alone(struct sw_sock *s)
{
	struct sw_holders *h = s->holders;
	uint32_t st;

	if (!h)
		return true;
	st = atomic_load(&h->state);
	if (st == H_TAKEN && !others(h)) {
		if (atomic_load(&h->unseen))
			s->io_unseen = true;
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

int sw_holders_reup(struct sw_sock *s)
{
	struct sw_holders *h = s->holders;
	uint32_t st;

	if (!h)
		return 1;
	st = atomic_load(&h->state);
	if (st == H_CUT) {
		drop_pid(h, getpid());
		sw_holders_unmap(s);
		return -1;
	}
	if (st != H_TAKEN || atomic_load(&h->driver) != getpid())
		return 0;
	/* a holder that closed its copy has left the list: seen at once;
	 * one that may have exited is looked for in /proc, not at every
	 * call */
	if (listed(h)) {
		uint64_t now = sw_now_ns();

		if (now < s->holders_look_ns)
			return 0;
		if (others(h)) {
			s->holders_look_ns = now + 10000000ull;
			return 0;
		}
	}
	drop_pid(h, getpid());
	sw_holders_unmap(s);
	SW_DBG("fd %d: the last holder of a connection back on TCP", s->fd);
	return 1;
}

void sw_holders_leave(struct sw_sock *s)
{
	if (!s->holders)
		return;
	quiet(s, SDP_FB_HANDED);
}

/*
 * Some fd of the socket fd names stays open across exec. The program may
 * have put the socket on other numbers (socat's nofork and inetd dup2 it
 * onto 0 and 1, which are inherited, while its own fd is close-on-exec),
 * so every fd naming the same socket counts. When that cannot be told,
 * it is taken as kept (the connection then stays TCP everywhere).
 */
bool sw_fd_survives_exec(int fd)
{
	int fl = sdp_sys.fcntl(fd, F_GETFD), n;
	struct stat sb, ob;
	struct dirent *de;
	bool kept = false;
	DIR *d;

	if (fl < 0 || !(fl & FD_CLOEXEC) || fstat(fd, &sb))
		return true;
	d = opendir("/proc/self/fd");
	if (!d)
		return true;
	while (!kept && (de = readdir(d))) {
		char *end;
		long l = strtol(de->d_name, &end, 10);

		if (*end || end == de->d_name || l < 0 || l > INT_MAX)
			continue;
		n = (int)l;
		if (n == fd || n == dirfd(d) || fstat(n, &ob) ||
		    !S_ISSOCK(ob.st_mode) || ob.st_ino != sb.st_ino ||
		    ob.st_dev != sb.st_dev)
			continue;
		fl = sdp_sys.fcntl(n, F_GETFD);
		kept = fl < 0 || !(fl & FD_CLOEXEC);
	}
	closedir(d);
	return kept;
}

void sw_holders_exec(struct sw_sock *s)
{
	if (!s->holders)
		return;
	if (!sw_fd_survives_exec(s->fd)) {
		/* the fd goes with the old program */
		quiet(s, SDP_FB_HANDED);
		return;
	}
	/* back on TCP, or its upgrade kept for the new program, its record
	 * in a file: this process (its pid goes on) stays a holder, and the
	 * new program's switch maps the record from that file
	 * (exec_reup.c, sw_holders_adopt) */
	if (__atomic_load_n(&s->holders_fd, __ATOMIC_RELAXED) >= 0 &&
	    (s->exec_item[0] ||
	     (s->state == SW_TCP && s->reup && !s->reup_never)))
		return;
	/* the new program holds it: TCP for good, in every process */
	atomic_store(&s->holders->state, H_CUT);
	drop_pid(s->holders, getpid());
	sw_holders_unmap(s);
	s->reup_never = true;
}

/* hfd, inherited across exec: a record of ours, the file named by hino
 * (mapped), or NULL with why set. */
static struct sw_holders *exec_record(int hfd, unsigned long long hino,
				      const char **why)
{
	struct sw_holders *h;
	struct stat sb;

	if (fstat(hfd, &sb) || !S_ISREG(sb.st_mode) ||
	    (unsigned long long)sb.st_ino != hino) {
		*why = "its holders' record is not the file named";
		return NULL;
	}
	if (sb.st_uid != geteuid() || sb.st_size < (off_t)sizeof(*h)) {
		*why = "its holders' record is not one of ours";
		return NULL;
	}
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, hfd, 0);
	if (h == MAP_FAILED) {
		*why = "its holders' record cannot be mapped";
		return NULL;
	}
	return h;
}

int sw_holders_adopt(struct sw_sock *s, int hfd, unsigned long long hino,
		     const char **why)
{
	struct sw_holders *h = exec_record(hfd, hino, why);
	int32_t me = getpid();
	int i;

	if (!h)
		return -EINVAL;
	for (i = 0; i < HOLDERS_MAX && atomic_load(&h->pid[i]) != me; i++)
		;
	if (i == HOLDERS_MAX) {
		/* others may count on being alone: TCP everywhere */
		atomic_store(&h->state, H_CUT);
		munmap(h, sizeof(*h));
		*why = "this process is not among its holders";
		return -ESRCH;
	}
	sw_holders_unmap(s);
	s->holders = h;
	keep_fd(s, hfd);
	return 0;
}

void sw_holders_exec_drop(int hfd, unsigned long long hino, bool cut)
{
	const char *why;
	struct sw_holders *h = exec_record(hfd, hino, &why);

	if (!h)
		return;
	if (cut)
		atomic_store(&h->state, H_CUT);
	drop_pid(h, getpid());
	munmap(h, sizeof(*h));
	sdp_sys.close(hfd);
}

void sw_holders_stand_by(struct sw_sock *s)
{
	struct sw_holders *h = s->holders;
	int32_t me = getpid();
	uint32_t st = H_TAKEN;

	if (!h)
		return;
	/* a client hello still to come would reach this process's reads,
	 * which go to the kernel from here on: taken now if it is here
	 * whole, else the upgrade is given up everywhere, as before a
	 * sandbox the switch cannot follow */
	if (!s->is_client && s->state == SW_HELLO_WAIT && !s->hello_got)
		sw_upgrade_server_hello_in(s, false);
	if (!s->is_client && (s->state == SW_HELLO_WAIT ||
			      (s->state == SW_TCP && s->skip_hello))) {
		sw_holders_cut(s);
		return;
	}
	atomic_store(&h->unseen, 1);
	if (atomic_load(&h->driver) == me)
		atomic_compare_exchange_strong(&h->state, &st, H_OPEN);
	quiet_as(s, SDP_FB_HANDED, true);
}

void sw_holders_cut(struct sw_sock *s)
{
	if (!s->holders)
		return;
	atomic_store(&s->holders->state, H_CUT);
	drop_pid(s->holders, getpid());
	sw_holders_unmap(s);
}

/* The state of s's pending upgrade, for the receiver of its fd. */
static void pass_save(struct sw_sock *s, struct sw_pass *p,
		      unsigned long long ino)
{
	p->ino_lo = (uint32_t)ino;
	p->ino_hi = (uint32_t)(ino >> 32);
	p->state = s->state;
	p->family = s->family;
	p->is_client = s->is_client;
	p->skip_hello = s->skip_hello;
	p->key_refused = s->key_refused;
	p->spoke_first = s->spoke_first;
	p->spoke_first_ns = s->spoke_first_ns;
	p->up_prov = s->up_prov ? s->up_prov->index : -1;
	p->lsn_provs = s->lsn_provs;
	p->cand_provs = s->cand_provs;
	p->connect_tries = s->connect_tries;
	p->local_port = s->local_port;
	p->peerlen = s->peerlen;
	memcpy(&p->peer, &s->peer, sizeof(p->peer));
	memcpy(p->key, s->key, sizeof(p->key));
	memcpy(p->hello_buf, s->hello_buf, sizeof(p->hello_buf));
	p->hello_got = s->hello_got;
	p->prefix_off = s->prefix_off;
	p->prefix_len = s->prefix_len;
	p->tcp_tx = s->tcp_tx;
	p->tcp_rx = s->tcp_rx;
	p->born_ns = s->born_ns;
	p->upgrade_at_ns = s->upgrade_at_ns;
	p->deadline_ns = s->deadline_ns;
	atomic_thread_fence(memory_order_release);
	p->magic = PASS_MAGIC;
}

static bool sw_holders_pass(struct sw_sock *s)
{
	struct sw_holders *h;
	char path[64];
	struct stat sb;
	int fd, i;

	if (s->holders || !sw_pending(s) || s->ss.ep || s->ptx_len ||
	    fstat(s->fd, &sb))
		return false;
	pass_path(path, sizeof(path), (unsigned long long)sb.st_ino);
	fd = pass_create(path);
	if (fd < 0)
		return false;
	if (!sw_fsize_room(sizeof(*h)) || ftruncate(fd, sizeof(*h))) {
		unlink(path);
		close(fd);
		return false;
	}
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (h == MAP_FAILED) {
		unlink(path);
		return false;
	}
	sw_listeners_close(s);
	atomic_store(&h->pid[0], getpid());
	atomic_store(&h->born_ns[1], sw_now_ns());
	atomic_store(&h->pid[1], IN_TRANSIT);
	for (i = 2; i < HOLDERS_MAX; i++)
		atomic_store(&h->pid[i], 0);
	pass_save(s, &h->pass, (unsigned long long)sb.st_ino);
	s->holders = h;
	SW_DBG("fd %d: passed to another process with its upgrade pending",
	       s->fd);
	return true;
}

/* Where the bytes of a connection returned to TCP start in its record. */
static size_t pass_buf_off(void)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (sizeof(struct sw_holders) + pg - 1) / pg * pg;
}

/*
 * A carried connection passed with SCM_RIGHTS (s locked, on TCP now, its
 * peer's marker read): the receiver reads first what had come on the SAN
 * and not been read here. Those bytes move into the record, after its
 * first pages, as a buffer sender and receiver share from then on, as a
 * parent and child share theirs (fork_exec.c). Returns 0 or -errno.
 */
static int pass_tcp(struct sw_sock *s)
{
	struct sw_fork_buf *old = s->fork_buf, *nb;
	size_t off = pass_buf_off(), left = 0, map_len;
	struct sw_holders *h;
	struct stat sb;
	char path[64];
	int fd, i, tries = 0;

	if (fstat(s->fd, &sb))
		return -errno;
	pass_path(path, sizeof(path), (unsigned long long)sb.st_ino);
	if (old) {
		pthread_mutex_lock(&old->lock);
		left = old->len - old->off;
	}
	map_len = sizeof(*nb) + left;
	do {
		fd = pass_create(path);
		/* one of ours that nobody took (its receiver never came):
		 * the sticky directory lets only us remove it */
	} while (fd < 0 && errno == EEXIST && !tries++ && !unlink(path));
	if (fd < 0)
		goto err_unlock;
	if (!sw_fsize_room(off + map_len) || ftruncate(fd, off + map_len))
		goto err_file;
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		goto err_file;
	nb = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
	if (nb == MAP_FAILED) {
		munmap(h, sizeof(*h));
		goto err_file;
	}
	sw_fork_buf_init(nb, map_len, left);
	/* the receiver's (and ours) now */
	sw_fork_buf_move(s, nb);
	atomic_store(&h->pid[0], getpid());
	atomic_store(&h->born_ns[1], sw_now_ns());
	atomic_store(&h->pid[1], IN_TRANSIT);
	for (i = 2; i < HOLDERS_MAX; i++)
		atomic_store(&h->pid[i], 0);
	h->pass.ino_lo = (uint32_t)sb.st_ino;
	h->pass.ino_hi = (uint32_t)((unsigned long long)sb.st_ino >> 32);
	h->pass.state = SW_TCP;
	h->pass.family = s->family;
	h->pass.is_client = s->is_client;
	h->pass.local_port = s->local_port;
	h->pass.peerlen = s->peerlen;
	memcpy(&h->pass.peer, &s->peer, sizeof(h->pass.peer));
	/* what an upgrade again needs (reupgrade.c) */
	memcpy(h->pass.key, s->key, sizeof(h->pass.key));
	memcpy(h->pass.hello_buf, s->hello_buf, sizeof(h->pass.hello_buf));
	h->pass.up_prov = s->up_prov ? s->up_prov->index : -1;
	h->pass.lsn_provs = s->lsn_provs;
	h->pass.cand_provs = s->cand_provs;
	h->pass.dg_tx_base = s->dg_tx_base;
	h->pass.dg_rx_base = s->dg_rx_base;
	h->pass.dg_rx_based = s->dg_rx_based;
	h->pass.reup = s->reup && !s->reup_never;
	h->pass.reup_n = s->reup_n;
	atomic_thread_fence(memory_order_release);
	h->pass.magic = PASS_MAGIC_TCP;
	/* who holds it, as after a fork (sw_holders_reup); the file is
	 * kept for a program this process may exec on the connection */
	if (!h->pass.reup) {
		munmap(h, sizeof(*h));
		close(fd);
	} else {
		sw_holders_unmap(s);
		s->holders = h;
		keep_fd(s, fd);
	}
	SW_DBG("fd %d: passed to another process on TCP, with %zu byte(s) that came on the SAN",
	       s->fd, left);
	return 0;

err_file:
	i = -errno;
	if (fd >= 0)
		close(fd);
	unlink(path);
	errno = -i;
err_unlock:
	i = -errno;
	if (old)
		pthread_mutex_unlock(&old->lock);
	return i;
}

/* The receiving end of pass_tcp: fd, with the record h (the file rfd of
 * size bytes), checked to be ours and for this socket. */
static struct sw_sock *received_tcp(int fd, struct sw_holders *h, int rfd,
				    off_t size)
{
	struct sw_pass *p = &h->pass;
	size_t off = pass_buf_off(), map_len;
	struct sw_fork_buf *nb;
	struct sw_sock *s;
	int i;

	if (size < (off_t)(off + sizeof(*nb)) ||
	    p->peerlen > sizeof(p->peer) || p->up_prov >= sw_nproviders)
		goto err;
	map_len = (size_t)size - off;
	nb = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, rfd, off);
	if (nb == MAP_FAILED)
		goto err;
	if (nb->map_len != map_len || nb->len > map_len - sizeof(*nb) ||
	    nb->off > nb->len) {
		munmap(nb, map_len);
		goto err;
	}
	s = sw_sock_new(fd, SW_TCP);
	if (!s) {
		munmap(nb, map_len);
		goto err;
	}
	s->fork_buf = nb;
	s->family = p->family;
	s->nonblock = fcntl(fd, F_GETFL) & O_NONBLOCK;
	s->is_client = p->is_client;
	s->local_port = p->local_port;
	s->peerlen = p->peerlen;
	memcpy(&s->peer, &p->peer, sizeof(s->peer));
	if (s->st) {
		s->st->local_port = s->local_port;
		s->st->is_client = s->is_client;
	}
	if (s->peerlen)
		sw_peer_known(s);
	memcpy(s->key, p->key, sizeof(s->key));
	memcpy(s->hello_buf, p->hello_buf, sizeof(s->hello_buf));
	s->hello_got = sizeof(s->hello_buf);
	s->up_prov = p->up_prov >= 0 ? &sw_providers[p->up_prov] : NULL;
	s->lsn_provs = p->lsn_provs;
	s->cand_provs = p->cand_provs;
	s->dg_tx_base = p->dg_tx_base;
	s->dg_rx_base = p->dg_rx_base;
	s->dg_rx_based = p->dg_rx_based;
	s->reup_n = p->reup_n;
	if (p->reup && (s->is_client || s->up_prov)) {
		sw_reup_arm(s);
		s->holders = h;
		/* for a program this process may exec on the connection */
		i = fcntl(rfd, F_DUPFD_CLOEXEC, 0);
		if (i >= 0)
			keep_fd(s, i);
	} else {
		s->reup_never = true;
		munmap(h, sizeof(*h));
	}
	SW_DBG("fd %d: received from another process on TCP, with %zu byte(s) that came on the SAN",
	       fd, nb->len - nb->off);
	return s;
err:
	atomic_store(&h->state, H_CUT);
	munmap(h, sizeof(*h));
	return NULL;
}

struct sw_sock *sw_holders_received(int fd)
{
	struct sw_holders *h;
	struct sw_pass *p;
	struct sw_sock *s;
	struct stat sb, fb;
	unsigned long long ino;
	char path[64];
	int rfd, i;

	if (fstat(fd, &sb) || !S_ISSOCK(sb.st_mode))
		return NULL;
	pass_path(path, sizeof(path), (unsigned long long)sb.st_ino);
	rfd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0)
		return NULL;
	/* only a record our own uid made, and no one else may write */
	if (fstat(rfd, &fb) || !S_ISREG(fb.st_mode) ||
	    fb.st_uid != geteuid() || (fb.st_mode & 077) ||
	    fb.st_size < (off_t)sizeof(*h)) {
		close(rfd);
		return NULL;
	}
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, rfd,
		 0);
	if (h == MAP_FAILED) {
		close(rfd);
		return NULL;
	}
	p = &h->pass;
	ino = (unsigned long long)p->ino_hi << 32 | p->ino_lo;
	for (i = 0; i < HOLDERS_MAX; i++) {
		int32_t t = IN_TRANSIT;

		if (atomic_compare_exchange_strong(&h->pid[i], &t, getpid()))
			break;
	}
	if (p->magic == PASS_MAGIC_TCP && i < HOLDERS_MAX &&
	    ino == (unsigned long long)sb.st_ino) {
		s = received_tcp(fd, h, rfd, fb.st_size);
		close(rfd);
		if (s)
			unlink(path);	/* taken: no other receiver */
		return s;
	}
	close(rfd);
	if (p->magic != PASS_MAGIC || ino != (unsigned long long)sb.st_ino ||
	    i == HOLDERS_MAX || p->hello_got > sizeof(p->hello_buf) ||
	    p->prefix_len > sizeof(p->hello_buf) ||
	    p->prefix_off > p->prefix_len ||
	    p->up_prov >= sw_nproviders || p->peerlen > sizeof(p->peer) ||
	    (p->state != SW_CONNECTING && p->state != SW_HELLO_PENDING &&
	     p->state != SW_HELLO_SENT && p->state != SW_HELLO_WAIT &&
	     p->state != SW_UPGRADING)) {
		if (i < HOLDERS_MAX)
			atomic_store(&h->state, H_CUT);
		munmap(h, sizeof(*h));
		return NULL;
	}
	unlink(path);	/* taken: no other receiver */
	s = sw_sock_new(fd, p->state);
	if (!s) {
		atomic_store(&h->state, H_CUT);
		munmap(h, sizeof(*h));
		return NULL;
	}
	s->family = p->family;
	s->nonblock = fcntl(fd, F_GETFL) & O_NONBLOCK;
	s->is_client = p->is_client;
	s->skip_hello = p->skip_hello;
	s->key_refused = p->key_refused;
	s->spoke_first = p->spoke_first;
	s->spoke_first_ns = p->spoke_first_ns;
	s->up_prov = p->up_prov >= 0 ? &sw_providers[p->up_prov] : NULL;
	s->lsn_provs = p->lsn_provs;
	s->cand_provs = p->cand_provs;
	s->connect_tries = p->connect_tries;
	s->local_port = p->local_port;
	s->peerlen = p->peerlen;
	memcpy(&s->peer, &p->peer, sizeof(s->peer));
	memcpy(s->key, p->key, sizeof(s->key));
	memcpy(s->hello_buf, p->hello_buf, sizeof(s->hello_buf));
	s->hello_got = p->hello_got;
	s->prefix_off = p->prefix_off;
	s->prefix_len = p->prefix_len;
	s->tcp_tx = p->tcp_tx;
	s->tcp_rx = p->tcp_rx;
	s->born_ns = p->born_ns;
	s->upgrade_at_ns = p->upgrade_at_ns;
	s->deadline_ns = p->deadline_ns;
	s->holders = h;
	if (s->st) {
		s->st->local_port = s->local_port;
		s->st->is_client = s->is_client;
	}
	if (s->peerlen)
		sw_peer_known(s);
	SW_DBG("fd %d: received from another process with its upgrade pending",
	       fd);
	return s;
}

/*
 * Can the process at the other end of the UNIX socket via (SO_PEERCRED)
 * take what this switch keeps for it? It runs the switch (its memory maps
 * this library) and is of our uid, the only one whose records it takes.
 * False: a socket with no peer of its own (not connected), a program
 * without the switch, another user (never given a record: a file this
 * process maps that another user could truncate would fault here), or
 * one we may not look at. The receiver is taken to be that process; a
 * UNIX socket handed on meanwhile is not followed.
 */
static bool pass_receiver(int via)
{
	static char lib[256];
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	char path[64], line[1024];
	bool sw = false;
	FILE *f;

	if (via < 0 ||
	    getsockopt(via, SOL_SOCKET, SO_PEERCRED, &cr, &cl) || cr.pid <= 0)
		return false;
	if (cr.uid != geteuid())
		return false;
	if (cr.pid == getpid())
		return true;
	if (!lib[0]) {
		Dl_info di;
		const char *b;

		if (!dladdr((void *)pass_receiver, &di) || !di.dli_fname)
			return false;
		b = strrchr(di.dli_fname, '/');
		snprintf(lib, sizeof(lib), "/%s", b ? b + 1 : di.dli_fname);
	}
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)cr.pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!sw && fgets(line, sizeof(line), f))
		sw = strstr(line, lib) != NULL;
	fclose(f);
	return sw;
}

/*
 * To a receiver whose switch cannot take the connection (s locked): it is
 * plain TCP from here on in every process, and nothing of the switch's may
 * reach the receiver's reads. A server whose client hello may still come
 * is fenced as before an exec (a hello here or on its way dropped, the
 * name for one taken), and the name is held as long as the client could
 * send one (hello_token.c), whatever this process's copy does. Bytes that
 * came on the SAN and were not read here cannot be given to the receiver:
 * they stay with this copy, and the loss is logged.
 */
static void pass_blind(struct sw_sock *s)
{
	size_t left = 0;
	bool carried;

	if (s->state == SW_LISTENER)
		return;	/* its provider listeners are this process's */
	if (sw_pending(s) && !s->closed)
		sw_upgrade_cut(s);
	if (!s->is_client && s->state == SW_TCP && s->skip_hello) {
		pthread_mutex_unlock(&s->lock);
		sw_hello_fence_sock(s);
		pthread_mutex_lock(&s->lock);
	}
	if (!s->is_client)
		sw_hello_name_outlive(s);
	s->reup_never = true;
	carried = s->state == SW_SAN || sw_pending(s);
	if (carried) {
		pthread_mutex_unlock(&s->lock);
		sw_downgrade_one(s);
		pthread_mutex_lock(&s->lock);
	}
	if (s->fork_buf) {
		pthread_mutex_lock(&s->fork_buf->lock);
		left = s->fork_buf->len - s->fork_buf->off;
		pthread_mutex_unlock(&s->fork_buf->lock);
	}
	if (carried && s->state != SW_TCP && !s->closed)
		SW_ERR("fd %d: passed to a process without the switch (or another user's) while still carried (the peer did not answer its return to TCP): that process sees neither the bytes the SAN carries nor the end",
		       s->fd);
	else if (left)
		SW_ERR("fd %d: passed to a process without the switch (or another user's): %zu byte(s) that came on the SAN and were not read here cannot reach it; run the receiving program with the switch, or read them before passing the socket",
		       s->fd, left);
}

void sw_pass(struct sw_sock *s, int via)
{
	bool sure = pass_receiver(via);
	bool carried;
	int r;

	pthread_mutex_lock(&s->lock);
	if (!sure) {
		if (!s->closed)
			pass_blind(s);
		pthread_mutex_unlock(&s->lock);
		return;
	}
	/* not kept for the receiver: given up, as before a fork */
	if (sw_pending(s) && !s->holders && !sw_holders_pass(s))
		sw_upgrade_cut(s);
	/* carried (or committed): the receiver's switch cannot follow the
	 * provider connection, which is this process's */
	carried = !s->closed && !s->holders &&
		  (s->state == SW_SAN || sw_pending(s));
	if (!carried && !s->closed && s->state == SW_TCP && s->reup &&
	    !s->reup_never) {
		/* back on TCP already: the receiver may upgrade it again */
		if (s->holders || (r = pass_tcp(s)))
			s->reup_never = true;
		pthread_mutex_unlock(&s->lock);
		return;
	}
	pthread_mutex_unlock(&s->lock);
	if (!carried)
		return;
	sw_downgrade_one(s);
	pthread_mutex_lock(&s->lock);
	if (s->state != SW_TCP)
		SW_WARN("fd %d: passed to another process while still carried (the peer did not answer its return to TCP): the receiver may see neither the bytes the SAN carries nor the end",
			s->fd);
	else if ((r = pass_tcp(s)))
		SW_WARN("fd %d: passed to another process, which cannot be given the bytes that came on the SAN and were not read here (%s)",
			s->fd, strerror(-r));
	pthread_mutex_unlock(&s->lock);
}

struct sw_sock *sw_received(int fd)
{
	return sw_holders_received(fd);
}
