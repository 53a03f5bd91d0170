// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * shm_guard.c - the kernel facts the shm provider trusts instead of names:
 * the descriptor reserve (the provider never takes a program's last fds),
 * the seals and file system of a shared region, and the proof that a
 * process holds the other end of a given TCP connection (sock_diag for the
 * peer socket's owner and inode, the socket itself passed by SCM_RIGHTS).
 * docs/security.md, "Binding", and docs/provider-shm.md, "Trust".
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/magic.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

/* ---- the descriptor reserve ---------------------------------------------- */

/*
 * The kernel hands out the lowest free descriptor, so the number a new
 * descriptor would get tells how full the table is. It is asked with a
 * raw system call: a descriptor the provider makes through libc may be
 * moved by the switch to a range of its own at the top of the table,
 * whose numbers say nothing of the program's. The provider keeps what it
 * needs only while that number is below RLIMIT_NOFILE less a reserve (a
 * quarter, at least 16), and what it keeps only for speed (a memfd to
 * pass again, a watch) below a quarter of the limit: the program's own
 * calls find their descriptors as without us.
 */
static bool fd_below(int fd, bool optional)
{
	struct rlimit rl;
	uint64_t lim, reserve;
	int probe;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return true;
	probe = (int)syscall(SYS_eventfd2, 0, EFD_CLOEXEC);
	if (probe >= 0) {
		syscall(SYS_close, probe);
		if (probe < fd)
			fd = probe;
	}
	lim = rl.rlim_cur;
	if (optional)
		return (uint64_t)fd < lim / 4;
	reserve = lim / 4 < 16 ? 16 : lim / 4;
	return lim > reserve && (uint64_t)fd < lim - reserve;
}

int shm_fd_keep(int fd)
{
	if (fd < 0)
		return -errno;
	if (fd_below(fd, false))
		return fd;
	close(fd);
	return -EMFILE;
}

bool shm_fd_ok(int fd)
{
	return fd >= 0 && fd_below(fd, false);
}

bool shm_fd_spare(int fd)
{
	return fd >= 0 && fd_below(fd, true);
}

bool shm_log_due(_Atomic uint64_t *last)
{
	struct timespec ts;
	uint64_t now, prev;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 1;
	prev = atomic_load_explicit(last, memory_order_relaxed);
	if (prev && now - prev < 1000000000ull)
		return false;
	return atomic_compare_exchange_strong(last, &prev, now);
}

/* ---- shared regions ------------------------------------------------------ */

/*
 * Whether a region's whole backing store is taken at set-up. A memfd lives
 * on the kernel's internal tmpfs, which has no size limit (a full /dev/shm
 * is another mount and does not touch it): a page first touched later can
 * only lack memory, which ends as memory exhaustion ends for any page of
 * the program. Under strict overcommit (vm.overcommit_memory=2) the same
 * page fails its commit charge instead, and the store would SIGBUS: there
 * the whole region is allocated at set-up. Elsewhere only the header page,
 * which set-up writes (3 MiB per region for 10,000 idle connections would
 * not fit).
 */
bool shm_commit_all(void)
{
	static int strict = -1;

	if (strict < 0) {
		int fd = open("/proc/sys/vm/overcommit_memory",
			      O_RDONLY | O_CLOEXEC);
		char c = '0';

		if (fd >= 0) {
			if (read(fd, &c, 1) != 1)
				c = '0';
			close(fd);
		}
		strict = c == '2';
	}
	return strict;
}

/*
 * May this process make a file reach size bytes? Growing a file past
 * RLIMIT_FSIZE (ftruncate, fallocate, even of a memfd) sends SIGXFSZ,
 * which kills a program that does not handle it: a program that set the
 * limit low for its own reasons must never die of the provider's memory.
 */
bool shm_fsize_room(uint64_t size)
{
	struct rlimit rl;

	return getrlimit(RLIMIT_FSIZE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	       size <= rl.rlim_cur;
}

/* Seals our new region so that no process holding the memfd (the peer)
 * can shrink or grow it: a mapping of it can never fault. */
int shm_region_seal(int fd)
{
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		return -errno;
	return 0;
}

/*
 * A peer's region may be mapped only if nobody can make the mapping fault:
 * a memfd of the kernel's own tmpfs (no size limit, so a hole a peer
 * punches reads back as zeros: hugetlbfs, where it faults, is refused)
 * sealed against shrinking. Returns 0 or -EPERM with *why set.
 */
int shm_region_trust(int fd, const char **why)
{
	struct statfs sf;
	int seals;

	if (fstatfs(fd, &sf) || sf.f_type != TMPFS_MAGIC) {
		*why = "not a memfd of the kernel's tmpfs";
		return -EPERM;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		*why = "not sealed against shrinking (F_SEAL_SHRINK)";
		return -EPERM;
	}
	return 0;
}

/* ---- TCP connections ----------------------------------------------------- */

/* An address as IPv4 when it is one (an IPv4-mapped IPv6 address too). */
static void norm(struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in s4 = { .sin_family = AF_INET };

	if (ss->ss_family != AF_INET6 ||
	    !IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
		return;
	s4.sin_port = s6->sin6_port;
	memcpy(&s4.sin_addr, &s6->sin6_addr.s6_addr[12], 4);
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, &s4, sizeof(s4));
}

static bool same(const struct sockaddr_storage *a,
		 const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a,
					 *y = (const void *)b;

		return x->sin_port == y->sin_port &&
		       x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a,
					  *y = (const void *)b;

		return x->sin6_port == y->sin6_port &&
		       !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
	}
	return false;
}

/* Is fd a TCP socket of ours, connected? Its two addresses, normalised. */
int shm_tcp_ends(int fd, struct sockaddr_storage *local,
		 struct sockaddr_storage *peer)
{
	socklen_t l = sizeof(int);
	int v;

	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &l) ||
	    v != IPPROTO_TCP)
		return -ENOTSOCK;
	l = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) ||
	    (v != AF_INET && v != AF_INET6))
		return -ENOTSOCK;
	memset(local, 0, sizeof(*local));
	memset(peer, 0, sizeof(*peer));
	l = sizeof(*local);
	if (getsockname(fd, (struct sockaddr *)local, &l))
		return -errno;
	l = sizeof(*peer);
	if (getpeername(fd, (struct sockaddr *)peer, &l))
		return -errno;
	norm(local);
	norm(peer);
	return 0;
}

/* An address as /proc/net/tcp{,6} prints it: each 32-bit word of the
 * address as the machine holds it, in hex, then the port. mapped: an IPv4
 * address as a dual-stack IPv6 socket holds it (tcp6). */
static void proc_addr(const struct sockaddr_storage *ss, bool mapped,
		      char *out, size_t len)
{
	uint32_t w[4];

	if (ss->ss_family == AF_INET && !mapped) {
		const struct sockaddr_in *a = (const void *)ss;

		memcpy(w, &a->sin_addr, 4);
		snprintf(out, len, "%08X:%04X", w[0], ntohs(a->sin_port));
		return;
	}
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;
		uint8_t b[16] = { [10] = 0xff, [11] = 0xff };

		memcpy(b + 12, &a->sin_addr, 4);
		memcpy(w, b, 16);
		snprintf(out, len, "%08X%08X%08X%08X:%04X", w[0], w[1], w[2],
			 w[3], ntohs(a->sin_port));
		return;
	}
	memcpy(w, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	snprintf(out, len, "%08X%08X%08X%08X:%04X", w[0], w[1], w[2], w[3],
		 ntohs(((const struct sockaddr_in6 *)ss)->sin6_port));
}

/* The same answer from /proc/net/tcp{,6}, where sock_diag is not to be had
 * (a kernel without inet_diag, a filter on netlink): a read of the whole
 * table, so only then. */
static int tcp_peer_proc(const struct sockaddr_storage *local,
			 const struct sockaddr_storage *peer,
			 struct shm_tcp_peer *out)
{
	static const char *const files[2] = { "/proc/net/tcp",
					       "/proc/net/tcp6" };
	char want_l[64], want_r[64], line[512], l[64], r[64];
	unsigned long uid, ino;
	int f;

	for (f = 0; f < 2; f++) {
		FILE *fp;

		if (f == 0 && peer->ss_family != AF_INET)
			continue;
		/* the other end's socket: its local address is our peer */
		proc_addr(peer, f == 1, want_l, sizeof(want_l));
		proc_addr(local, f == 1, want_r, sizeof(want_r));
		fp = fopen(files[f], "re");
		if (!fp)
			continue;
		while (fgets(line, sizeof(line), fp)) {
			if (sscanf(line, "%*s %63s %63s %*s %*s %*s %*s %lu %*s %lu",
				   l, r, &uid, &ino) != 4 ||
			    strcmp(l, want_l) || strcmp(r, want_r))
				continue;
			fclose(fp);
			out->uid = (uint32_t)uid;
			out->ino = ino;
			return 0;
		}
		fclose(fp);
	}
	return -ENOENT;
}

/*
 * The socket at the other end of TCP connection fd, as this network
 * namespace's kernel knows it (NETLINK_SOCK_DIAG, an exact lookup by the
 * four addresses: the peer's local address is our peer address): its
 * owner's uid and its inode. 0, or -errno (-ENOENT: no such socket here,
 * so the peer is not on this host).
 */
int shm_tcp_peer(int fd, struct shm_tcp_peer *out)
{
	struct sockaddr_storage local, peer;
	struct {
		struct nlmsghdr nh;
		struct inet_diag_req_v2 r;
	} req;
	union {
		struct nlmsghdr nh;
		char buf[1024];
	} ans;
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	struct inet_diag_msg *m;
	struct nlmsghdr *h;
	ssize_t n;
	int s, ret;

	ret = shm_tcp_ends(fd, &local, &peer);
	if (ret)
		return ret;
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = sizeof(req);
	req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.nh.nlmsg_seq = 1;
	req.r.sdiag_family = peer.ss_family;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = ~0u;
	req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	/* the peer's socket: its source is our peer, its destination us */
	if (peer.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)&peer,
					 *b = (const void *)&local;

		req.r.id.idiag_sport = a->sin_port;
		req.r.id.idiag_dport = b->sin_port;
		memcpy(req.r.id.idiag_src, &a->sin_addr, 4);
		memcpy(req.r.id.idiag_dst, &b->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *a = (const void *)&peer,
					  *b = (const void *)&local;

		req.r.id.idiag_sport = a->sin6_port;
		req.r.id.idiag_dport = b->sin6_port;
		memcpy(req.r.id.idiag_src, &a->sin6_addr, 16);
		memcpy(req.r.id.idiag_dst, &b->sin6_addr, 16);
	}
	s = shm_fd_keep(socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC,
			       NETLINK_SOCK_DIAG));
	if (s == -EMFILE)
		return s;
	if (s < 0)
		return tcp_peer_proc(&local, &peer, out);
	if (sendto(s, &req, sizeof(req), 0, (struct sockaddr *)&nl,
		   sizeof(nl)) != sizeof(req)) {
		ret = -errno;
		goto out;
	}
	do
		n = recv(s, &ans, sizeof(ans), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		ret = -errno;
		goto out;
	}
	ret = -ENOENT;
	for (h = &ans.nh; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == NLMSG_ERROR) {
			struct nlmsgerr *e = NLMSG_DATA(h);

			ret = e->error ? e->error : -ENOENT;
			break;
		}
		if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
		    h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
			continue;
		m = NLMSG_DATA(h);
		/* inode 0: the peer has not accepted the connection yet
		 * (a socket gets its inode at accept); its owner is known */
		out->uid = m->idiag_uid;
		out->ino = m->idiag_inode;
		ret = 0;
		break;
	}
out:
	close(s);
	/* no answer at all, or no inet_diag handler here: the slow way */
	if (ret && ret != -EMFILE)
		ret = tcp_peer_proc(&local, &peer, out);
	return ret;
}

/*
 * Is got (a descriptor a process sent us) the socket at the other end of
 * our TCP connection fd? A TCP socket whose local address is our peer's
 * and whose peer is us, and whose inode is the one this namespace's kernel
 * gives for that socket (want, from shm_tcp_peer, asked again if the peer
 * had not accepted then): a socket made in another network namespace with
 * the same addresses is not it.
 */
int shm_tcp_proof(int got, int fd, struct shm_tcp_peer *want)
{
	struct sockaddr_storage ml, mp, gl, gp;
	struct stat st;

	/* learnt before the peer accepted: it holds a socket by now */
	if (!want->ino && shm_tcp_peer(fd, want))
		return -EPERM;
	if (!want->ino)
		return -EPERM;

	if (shm_tcp_ends(fd, &ml, &mp) || shm_tcp_ends(got, &gl, &gp))
		return -EPERM;
	if (!same(&gl, &mp) || !same(&gp, &ml))
		return -EPERM;
	if (fstat(got, &st) || !S_ISSOCK(st.st_mode) ||
	    (uint64_t)st.st_ino != want->ino)
		return -EPERM;
	return 0;
}

/*
 * Does process pid hold the socket of inode ino? Asked when the process
 * that connects to a bound listener is not of the user that made the other
 * end's socket: a server whose master (root) listens and whose workers
 * (another user) accept hold sockets the kernel counts as root's. Its
 * descriptor table says so, where we may read it (/proc/PID/fd: root, or
 * the same user); elsewhere the answer is no.
 */
bool shm_pid_holds_socket(pid_t pid, uint64_t ino)
{
	char dir[64], path[64 + 256], link[64], want[48];
	struct dirent *e;
	bool found = false;
	ssize_t n;
	DIR *d;

	if (pid <= 0 || !ino)
		return false;
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof(want), "socket:[%llu]", (unsigned long long)ino);
	d = opendir(dir);
	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		found = !strcmp(link, want);
	}
	closedir(d);
	return found;
}
