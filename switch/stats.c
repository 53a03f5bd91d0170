/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * stats.c - publishing statistics for sdp-stat: one file per process in a
 * directory no other user controls, created new (never adopted), readable
 * by its owner only, its backing store allocated before it is touched and
 * grown as slots are handed out; removed at exit. Slots are handed out
 * under a lock; a slot's counters are written by the connection's owner
 * only, the process's counters by every thread, atomically.
 * Connections left on TCP before the switch managed them get a slot too.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fallback.h"
#include "fork_exec.h"
#include "log.h"
#include "stats.h"
#include "sys.h"
#include "util.h"

#define HDR_SIZE offsetof(struct sw_proc_stats, conn)
#define SLOT_SIZE sizeof(struct sw_conn_stats)
/* slots added by one growth of the file */
#define GROW_SLOTS (SW_STATS_GROW / SLOT_SIZE)

static struct sw_proc_stats *proc;
static struct sw_proc_stats proc_private; /* when the file cannot be made */
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static char stat_path[300];
static pid_t stat_pid;
static dev_t stat_dev;		/* the file we made: growth reopens it */
static ino_t stat_ino;
static uint64_t grow_failed_ns;	/* last failed growth (retried 1 s on) */
static char off_reason[1024];

static bool sandboxed;

/* A seccomp filter may kill the process for an unlink: the file then
 * stays, and the next process that starts the switch collects it
 * (stats_collect_stale), as it does the files of killed processes. */
void sw_sandboxed(void)
{
	sandboxed = true;
}

const char *sw_stats_off_reason(void)
{
	return off_reason;
}

/*
 * At exit. A connection whose upgrade was still under way ends with the
 * process (the kernel closes its descriptor; an exec keeps it going in
 * the new program, and runs no exit handler): its slot says so, as a
 * close would have, for whoever reads the file last. Then the file goes.
 */
static void stats_at_exit(void)
{
	uint32_t i;

	if (!stat_path[0] || getpid() != stat_pid || sandboxed)
		return;
	for (i = 0; i < proc->nslots; i++) {
		struct sw_conn_stats *c = &proc->conn[i];
		uint32_t st = __atomic_load_n(&c->state, __ATOMIC_RELAXED);

		if (!__atomic_load_n(&c->in_use, __ATOMIC_RELAXED) ||
		    st == SW_LISTENER || st == SW_TCP || st == SW_SAN ||
		    st >= SW_NSTATES)
			continue;
		c->fb_reason = SDP_FB_ENDED;
		__atomic_store_n(&c->state, SW_TCP, __ATOMIC_RELAXED);
		SW_STAT_COUNT(proc->conns_tcp);
		SW_STAT_COUNT(proc->fallbacks[SDP_FB_ENDED]);
	}
	unlink(stat_path);
}

static size_t file_size(uint32_t nslots)
{
	return HDR_SIZE + (size_t)nslots * SLOT_SIZE;
}

/* Does a live process map the file? Its maker holds a shared flock on it
 * for as long as the file is mapped (stats_file_create). A pid alone
 * cannot tell: from inside a pid namespace every process outside looks
 * gone. */
static bool stats_file_held(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	bool held;

	if (fd < 0)
		return errno != ENOENT;
	held = flock(fd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK;
	sdp_sys.close(fd);
	return held;
}

/* Files of processes that died without running their exit handlers
 * (killed) would pile up: remove ours whose process is gone (no such pid,
 * and nobody holds the file's lock). */
static void stats_collect_stale(int dfd)
{
	DIR *d;
	struct dirent *e;
	/* listed only where we may read the directory */
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		sdp_sys.close(fd);
		return;
	}
	while ((e = readdir(d))) {
		struct stat st;
		char *end;
		long pid;

		if (strncmp(e->d_name, "sdp-stat.", 9))
			continue;
		pid = strtol(e->d_name + 9, &end, 10);
		if (*end || pid <= 0 || pid == getpid())
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    st.st_uid != geteuid() || stats_file_held(dfd, e->d_name))
			continue;
		unlinkat(dfd, e->d_name, 0);
	}
	closedir(d);
}

/*
 * Opens the directory of the files, checked: $SDP_STAT_DIR (the user's
 * choice; refused when others may replace files in it), else the user's
 * own /dev/shm/sdp-stat-<uid>, made here with mode 0700, and refused
 * unless it is a real directory of ours that nobody else can enter.
 * Returns the directory's fd, or -1 with off_reason set.
 */
static int stats_dir_open(const char *dir, bool chosen)
{
	struct stat st;
	int dfd;

	if (!chosen && mkdir(dir, 0700) && errno != EEXIST) {
		snprintf(off_reason, sizeof(off_reason),
			 "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	/* O_PATH: a directory others may write but not list (a shared
	 * one of mode 1733) serves as well; the fd is only a base for
	 * openat and unlinkat */
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC |
			(chosen ? 0 : O_NOFOLLOW));
	if (dfd < 0) {
		snprintf(off_reason, sizeof(off_reason), "cannot open %s: %s%s",
			 dir, strerror(errno),
			 errno == ELOOP || errno == ENOTDIR ?
				 " (a symbolic link or a file is in its place: remove it)" :
				 "");
		return -1;
	}
	if (fstat(dfd, &st))
		goto bad;
	if (!chosen && (st.st_uid != geteuid() || (st.st_mode & 077))) {
		snprintf(off_reason, sizeof(off_reason),
			 "%s belongs to uid %u with mode %04o; it must be ours (uid %u) with mode 0700: remove it",
			 dir, (unsigned int)st.st_uid,
			 (unsigned int)(st.st_mode & 07777),
			 (unsigned int)geteuid());
		goto close_dir;
	}
	if (chosen && (st.st_mode & 022) && !(st.st_mode & S_ISVTX)) {
		snprintf(off_reason, sizeof(off_reason),
			 "SDP_STAT_DIR=%s is writable by other users and not sticky (mode %04o): they could replace the files; use a directory of your own",
			 dir, (unsigned int)(st.st_mode & 07777));
		goto close_dir;
	}
	return dfd;
bad:
	snprintf(off_reason, sizeof(off_reason), "%s: %s", dir,
		 strerror(errno));
close_dir:
	sdp_sys.close(dfd);
	return -1;
}

/*
 * Creates this process's file, new, of nslots slots, its backing store
 * allocated. A leftover of ours with the same name (a dead process with a
 * recycled pid) is replaced; anything else in the way is left alone and
 * the process publishes nothing. Returns the fd or -1 with off_reason.
 */
static int stats_file_create(uint32_t nslots)
{
	char dir[256], *slash;
	const char *name;
	struct stat st;
	int dfd, fd = -1, err, tries;
	bool live = false;

	sw_stats_dir(dir, sizeof(dir));
	dfd = stats_dir_open(dir, getenv("SDP_STAT_DIR") &&
				  *getenv("SDP_STAT_DIR"));
	if (dfd < 0)
		return -1;
	stats_collect_stale(dfd);
	stat_pid = getpid();
	snprintf(stat_path, sizeof(stat_path), "%s/sdp-stat.%d", dir,
		 (int)stat_pid);
	slash = strrchr(stat_path, '/');
	name = slash + 1;
	if (!sw_fsize_room(file_size(nslots))) {
		/* not even created: a reader never sees it half made */
		snprintf(off_reason, sizeof(off_reason),
			 "%s would need %zu bytes: File too large for this "
			 "process's file size limit (RLIMIT_FSIZE, ulimit -f); "
			 "raise the limit to have statistics", stat_path,
			 file_size(nslots));
		goto fail;
	}
	for (tries = 0; tries < 2; tries++) {
		fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
				       O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			break;
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
		    (live = stats_file_held(dfd, name))) {
			errno = EEXIST;
			break;
		}
		unlinkat(dfd, name, 0);
	}
	if (fd < 0) {
		snprintf(off_reason, sizeof(off_reason),
			 "cannot create %s: %s%s", stat_path, strerror(errno),
			 errno == EEXIST ?
				 (live ? " (a live process's, of another pid namespace)" :
				  " (something of another user's is in the way)") :
				 "");
		goto fail;
	}
	/* held while the file is mapped (the mapping keeps the open file
	 * and its lock after the descriptor closes): the mark of a live
	 * file, whatever its name's pid says (stats_file_held) */
	flock(fd, LOCK_SH);
	err = posix_fallocate(fd, 0, file_size(nslots));
	if (err) {
		snprintf(off_reason, sizeof(off_reason),
			 "cannot allocate %zu bytes for %s: %s",
			 file_size(nslots), stat_path, strerror(err));
		sdp_sys.close(fd);
		unlinkat(dfd, name, 0);
		goto fail;
	}
	if (fstat(fd, &st) == 0) {
		stat_dev = st.st_dev;
		stat_ino = st.st_ino;
	}
	sdp_sys.close(dfd);
	return fd;
fail:
	sdp_sys.close(dfd);
	stat_path[0] = 0;
	return -1;
}

static void stats_map(void)
{
	uint32_t n = GROW_SLOTS;
	void *p;
	int fd;

	fd = stats_file_create(n);
	if (fd < 0)
		goto private;
	/* the whole layout is mapped; only what the file holds is touched */
	p = mmap(NULL, sizeof(*proc), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 0);
	sdp_sys.close(fd);
	if (p == MAP_FAILED) {
		snprintf(off_reason, sizeof(off_reason), "cannot map %s: %s",
			 stat_path, strerror(errno));
		unlink(stat_path);
		stat_path[0] = 0;
		goto private;
	}
	proc = p;
	memset(proc, 0, HDR_SIZE);
	proc->nslots = n;
	return;
private:
	SW_WARN("statistics: %s; this process runs without them (sdp-stat will not show it)",
		off_reason);
	proc = &proc_private;
	proc->nslots = SW_STATS_SLOTS;
}

void sw_stats_init(void)
{
	static bool registered;
	uint32_t nslots;

	if (getenv("SDP_STAT_OFF")) {
		snprintf(off_reason, sizeof(off_reason), "SDP_STAT_OFF is set");
		proc = &proc_private;
		proc->nslots = SW_STATS_SLOTS;
	} else {
		stats_map();
	}
	nslots = proc->nslots;
	memset(proc, 0, HDR_SIZE);
	proc->magic = SW_STATS_MAGIC;
	proc->version = SW_STATS_VERSION;
	proc->pid = getpid();
	proc->ppid = getppid();
	proc->nslots = nslots;
	proc->start_ns = sw_now_ns();
	snprintf(proc->program, sizeof(proc->program), "%s",
		 program_invocation_short_name);
	if (!registered) {
		registered = true;
		atexit(stats_at_exit);
	}
}

/* After fork the child publishes its own file (its connections too). The
 * new file is mapped over the old address, so every pointer into the
 * statistics stays valid. */
void sw_stats_after_fork_child(void);
void sw_stats_after_fork_child(void)
{
	struct sw_proc_stats *copy;
	size_t size;
	bool ok;
	int fd;

	if (!proc || proc == &proc_private)
		return;
	stat_pid = getpid();
	/* in a pid namespace of its own (getppid() is 0 there), a file
	 * named by its pid would name another process to readers outside,
	 * and the others' files would all look stale from inside */
	if (sandboxed || getppid() == 0)
		goto keep;
	size = file_size(proc->nslots);
	fd = stats_file_create(proc->nslots);
	if (fd < 0)
		goto keep;
	/* the mapping is still the parent's file: write a copy */
	copy = malloc(size);
	if (!copy) {
		sdp_sys.close(fd);
		unlink(stat_path);
		goto keep;
	}
	memcpy(copy, proc, size);
	copy->pid = stat_pid;
	copy->ppid = getppid();
	copy->closed_tx_san = copy->closed_rx_san = 0;
	copy->closed_tx_tcp = copy->closed_rx_tcp = 0;
	ok = pwrite(fd, copy, size, 0) == (ssize_t)size;
	free(copy);
	if (!ok || mmap(proc, sizeof(*proc), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
		sdp_sys.close(fd);
		unlink(stat_path);
		goto keep;
	}
	sdp_sys.close(fd);
	return;
keep:
	/* no file of its own: stop writing into the parent's (the private
	 * copy starts empty: the counters restart) */
	stat_path[0] = 0;
	if (mmap(proc, sizeof(*proc), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
		return;
	proc->nslots = SW_STATS_SLOTS;
}

struct sw_proc_stats *sw_stats_proc(void)
{
	return proc;
}

/*
 * Adds room for more slots to the file (slot_lock held): the backing store
 * is allocated before nslots says the slots exist, so a full /dev/shm
 * means connections without a slot, never a fault.
 */
static bool stats_grow(void)
{
	uint32_t n = proc->nslots + GROW_SLOTS;
	uint64_t now = sw_now_ns();
	struct stat st;
	bool ok = false;
	int fd, err;

	if (proc == &proc_private || !stat_path[0] ||
	    proc->nslots >= SW_STATS_SLOTS)
		return false;
	if (grow_failed_ns && now - grow_failed_ns < 1000000000ull)
		return false;
	if (n > SW_STATS_SLOTS)
		n = SW_STATS_SLOTS;
	fd = open(stat_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		goto out;
	}
	if (fstat(fd, &st) || st.st_dev != stat_dev || st.st_ino != stat_ino) {
		err = ESTALE;
		goto close_fd;
	}
	err = sw_fsize_room(file_size(n)) ?
		      posix_fallocate(fd, 0, file_size(n)) : EFBIG;
	if (!err) {
		proc->nslots = n;
		ok = true;
	}
close_fd:
	sdp_sys.close(fd);
out:
	if (!ok) {
		if (!grow_failed_ns)
			SW_WARN("statistics: cannot grow %s to %u slots: %s; new connections are not listed by sdp-stat",
				stat_path, n, strerror(err));
		grow_failed_ns = now;
	}
	return ok;
}

struct sw_conn_stats *sw_stats_conn_new(void)
{
	static uint32_t hint;	/* where the last free slot was found */
	uint32_t i, k;

	if (!proc)
		return NULL;
	pthread_mutex_lock(&slot_lock);
	for (;;) {
		for (k = 0; k < proc->nslots; k++) {
			i = (hint + k) % proc->nslots;
			if (!proc->conn[i].in_use) {
				memset(&proc->conn[i], 0,
				       sizeof(proc->conn[i]));
				proc->conn[i].in_use = 1;
				hint = i + 1;
				pthread_mutex_unlock(&slot_lock);
				return &proc->conn[i];
			}
		}
		if (!stats_grow())
			break;
	}
	pthread_mutex_unlock(&slot_lock);
	/* more connections than slots: count nothing per connection */
	return NULL;
}

/* slot_lock held */
static void conn_free_locked(struct sw_conn_stats *c)
{
	if (proc) {
		proc->closed_tx_san += sw_stats_tx_san(c);
		proc->closed_rx_san += sw_stats_rx_san(c);
		proc->closed_tx_tcp += c->tx_tcp;
		proc->closed_rx_tcp += c->rx_tcp;
	}
	c->in_use = 0;
}

void sw_stats_conn_drop(struct sw_conn_stats *c)
{
	/* single-threaded (a forked child's handler): no slot_lock */
	c->in_use = 0;
}

void sw_stats_conn_free(struct sw_conn_stats *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&slot_lock);
	conn_free_locked(c);
	pthread_mutex_unlock(&slot_lock);
}

/*
 * The switch does not see a TCP-only connection close: each new one looks
 * at a few of the others, and frees those whose fd no longer holds that
 * socket. sdp-stat hides them meanwhile (it finds the socket gone).
 */
static void tcp_only_sweep(void)
{
	static uint32_t cursor;
	struct stat st;
	uint32_t k, looked = 0;

	/* at most 64 slots a time: a connect or accept pays a few fstat
	 * calls at worst, and the whole table is covered in turn */
	pthread_mutex_lock(&slot_lock);
	for (k = 0; k < proc->nslots && k < 64 && looked < 4; k++) {
		struct sw_conn_stats *c = &proc->conn[cursor++ % proc->nslots];

		if (!c->in_use || !(c->flags & SW_CONN_TCP_ONLY))
			continue;
		looked++;
		if (fstat(c->fd, &st) || !S_ISSOCK(st.st_mode) ||
		    (uint64_t)st.st_ino != c->sock_ino)
			conn_free_locked(c);
	}
	pthread_mutex_unlock(&slot_lock);
}

static void addr_text(const struct sockaddr *a, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)a;

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		port = ntohs(in->sin_port);
	} else if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)a;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		port = ntohs(in6->sin6_port);
	}
	snprintf(buf, len, "%s:%d", ip, port);
}

void sw_stats_tcp_only(int fd, int reason, bool client,
		       const struct sockaddr *peer, socklen_t peerlen)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct sw_conn_stats *c;
	struct stat st;

	if (!proc)
		return;
	SW_STAT_COUNT(proc->conns_tcp);
	if (reason > 0 && reason < SW_STATS_FB_MAX)
		SW_STAT_COUNT(proc->fallbacks[reason]);
	if (fstat(fd, &st) || !S_ISSOCK(st.st_mode))
		return;
	tcp_only_sweep();
	c = sw_stats_conn_new();
	if (!c)
		return;
	c->fd = fd;
	c->state = SW_TCP;
	c->fb_reason = reason;
	c->is_client = client;
	c->flags = SW_CONN_TCP_ONLY;
	c->sock_ino = st.st_ino;
	if (!getsockname(fd, (struct sockaddr *)&ss, &len))
		c->local_port = ntohs(ss.ss_family == AF_INET6 ?
				      ((struct sockaddr_in6 *)&ss)->sin6_port :
				      ((struct sockaddr_in *)&ss)->sin_port);
	len = sizeof(ss);
	if (!peer || peerlen < sizeof(struct sockaddr_in)) {
		peer = (struct sockaddr *)&ss;
		if (getpeername(fd, (struct sockaddr *)&ss, &len))
			return;
	}
	addr_text(peer, c->peer, sizeof(c->peer));
}

