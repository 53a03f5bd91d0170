/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sock_setup.c - wrappers that create, name and control sockets: connect,
 * listen, accept, close, dup, fcntl, ioctl, socket options. They decide
 * which fds the switch manages and keep the fd table in step with the
 * kernel's fd numbers.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/resource.h>

#include "shim.h"
#include "blind.h"
#include "fdtable.h"
#include "ownfd.h"
#include "readiness.h"

/* The switch considers only IPv4/IPv6 TCP sockets: their family, or 0.
 * (IPPROTO_TCP is a stream protocol: SO_TYPE adds nothing.) Known without
 * a system call for the sockets the program made with socket(). */
int shim_tcp_family(int fd)
{
	int saved = errno, v, family = fdi_get(fd);
	socklen_t len = sizeof(v);
	int (*gso)(int, int, int, void *, socklen_t *) = REAL(getsockopt);

	if (family)
		return family < 0 ? 0 : family;
	if (gso(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) ||
	    (v != AF_INET && v != AF_INET6))
		goto out;
	family = v;
	len = sizeof(v);
	if (gso(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) || v != IPPROTO_TCP)
		family = 0;
	fdi_set(fd, family ? family : FDI_OTHER);
out:
	errno = saved;
	return family;
}

/* Records a socket the switch returned for fd. Without memory for the
 * table the socket cannot be followed: it is closed the switch's way and
 * the call fails with ENOMEM. */
static int shim_adopt(int fd, struct sw_sock *s)
{
	if (!fdt_install(fd, s))
		return 0;
	shim_enter();
	sw_close(s, fd);
	sw_sock_unref(s);
	shim_leave();
	errno = ENOMEM;
	return -1;
}

SHIM_EXPORT int socket(int domain, int type, int protocol)
{
	int fd;

	shim_on();	/* make sure init ran before the first socket */
	fd = REAL(socket)(domain, type, protocol);
	if (sdp_inside())
		return shim_switch_fd(fd);	/* a provider's */
	if (fd < 0 && (errno == EMFILE || errno == ENFILE) && shim_on()) {
		int shed, e = errno;

		/* the switch's descriptors must not be what failed it */
		shim_enter();
		shed = sw_fd_shed();
		shim_leave();
		errno = e;
		if (shed)
			fd = REAL(socket)(domain, type, protocol);
	}
	if (fd >= 0)
		fdi_set(fd, (domain == AF_INET || domain == AF_INET6) &&
				    (type & 0xf) == SOCK_STREAM &&
				    (protocol == 0 || protocol == IPPROTO_TCP) ?
			    domain : FDI_OTHER);
	return fd;
}

SHIM_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct sw_sock *s, *out = NULL;
	int ret, saved, family;
	bool plain;

	if (!shim_on())
		return REAL(connect)(fd, addr, len);
	s = fdt_get(fd);
	if (s) {
		shim_enter();
		ret = sw_connect_again(s, addr, len);
		sw_sock_unref(s);
		shim_leave();
		return ret;
	}
	if (!addr || len < sizeof(sa_family_t) ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    !(family = shim_tcp_family(fd)))
		return REAL(connect)(fd, addr, len);
	shim_enter();
	ret = sw_connect(fd, family, addr, len, &out, &plain);
	shim_leave();
	if (plain) {
		/* TCP's for good: the completion check of a non-blocking
		 * connect, and any connect after it, go to the kernel
		 * without a second discovery */
		saved = errno;
		fdi_set_plain(fd);
		errno = saved;
	}
	if (out) {
		saved = errno;
		if (shim_adopt(fd, out))
			return -1;
		errno = saved;
	}
	return ret;
}

SHIM_EXPORT int listen(int fd, int backlog)
{
	struct sw_sock *s, *out = NULL;
	int ret, saved, family;

	if (!shim_on())
		return REAL(listen)(fd, backlog);
	s = fdt_get(fd);
	if (s) {
		/* Already a switch listener: a new backlog is the kernel's. */
		shim_unref(s);
		return REAL(listen)(fd, backlog);
	}
	family = shim_tcp_family(fd);
	if (!family)
		return REAL(listen)(fd, backlog);
	shim_enter();
	ret = sw_listen(fd, family, backlog, &out);
	shim_leave();
	if (out) {
		saved = errno;
		if (shim_adopt(fd, out))
			return -1;
		errno = saved;
	}
	return ret;
}

static int shim_accept(struct sw_sock *s, struct sockaddr *addr,
		       socklen_t *alen, int flags)
{
	struct sw_sock *out = NULL;
	int nfd, saved;

	shim_enter();
	nfd = sw_accept(s, addr, alen, flags, &out);
	sw_sock_unref(s);
	shim_leave();
	if (nfd >= 0 && out) {
		saved = errno;
		if (shim_adopt(nfd, out))
			return -1;
		errno = saved;
	}
	return nfd;
}

SHIM_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *alen,
			int flags)
{
	struct sw_sock *s = shim_on() ? fdt_get(fd) : NULL;

	int nfd;

	if (!s) {
		nfd = REAL(accept4)(fd, addr, alen, flags);
		if (sdp_inside())
			return shim_switch_fd(nfd);	/* a provider's */
		fdi_clear(nfd, nfd);
		return nfd;
	}
	nfd = shim_accept(s, addr, alen, flags);
	fdi_clear(nfd, nfd);
	return nfd;
}

SHIM_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *alen)
{
	struct sw_sock *s = shim_on() ? fdt_get(fd) : NULL;

	int nfd;

	if (!s) {
		nfd = REAL(accept)(fd, addr, alen);
		if (sdp_inside())
			return shim_switch_fd(nfd);	/* a provider's */
		fdi_clear(nfd, nfd);
		return nfd;
	}
	nfd = shim_accept(s, addr, alen, 0);
	fdi_clear(nfd, nfd);
	return nfd;
}

SHIM_EXPORT int shutdown(int fd, int how)
{
	struct sw_sock *s = shim_on() ? fdt_get(fd) : NULL;
	int ret;

	if (!s)
		return REAL(shutdown)(fd, how);
	shim_enter();
	ret = sw_shutdown(s, how);
	sw_sock_unref(s);
	shim_leave();
	return ret;
}

/* close(2) of one fd by the program: the last fd naming a switch socket
 * closes it through the switch. */
int shim_close_fd(int fd)
{
	struct sw_sock *s;
	int ret, primary;
	bool last;

	/* the fd's registrations in the program's epoll sets end as the
	 * kernel ends them, with the last fd of the file anywhere (a forked
	 * child that closes what it inherited leaves its parent's, in the
	 * set both share); only a connection whose file the switch may keep
	 * after this close is taken out of the sets here */
	s = fdt_get(fd);
	if (s && sw_close_may_keep(s))
		rd_sock_closed(fd);
	else
		rd_fds_closed(fd, fd);
	if (s)
		sw_sock_unref(s);
	fdi_clear(fd, fd);
	s = fdt_remove(fd, &last, &primary);
	if (!s)
		return REAL(close)(fd);
	shim_enter();
	if (primary >= 0 && sw_sock_set_fd)
		sw_sock_set_fd(s, primary);
	if (last)
		ret = sw_close(s, fd);
	else
		ret = REAL(close)(fd);
	sw_sock_unref(s);
	shim_leave();
	return ret;
}

SHIM_EXPORT int close(int fd)
{
	if (sdp_inside()) {
		/* the switch or a provider lets go of one of its own */
		sw_fd_forget(fd);
		return REAL(close)(fd);
	}
	if (sw_fd_is_own(fd)) {
		/* the switch's: not open, as far as the program can tell */
		errno = EBADF;
		return -1;
	}
	if (!shim_on())
		return REAL(close)(fd);
	return shim_close_fd(fd);
}

/* close_range for the program: the kernel's, on the parts of [first,
 * last] between the switch's own descriptors. */
static int shim_close_range_around(unsigned int first, unsigned int last,
				   int flags)
{
	int own, ret = 0, saved = 0;

	if (sdp_inside())
		return REAL(close_range)(first, last, flags);
	while (first <= last && (own = sw_fd_next_own(first, last)) >= 0) {
		if ((unsigned int)own > first &&
		    REAL(close_range)(first, (unsigned int)own - 1, flags)) {
			ret = -1;
			saved = errno;
		}
		if ((unsigned int)own == last)
			goto out;
		first = (unsigned int)own + 1;
	}
	if (first <= last && REAL(close_range)(first, last, flags)) {
		ret = -1;
		saved = errno;
	}
out:
	if (ret)
		errno = saved;
	return ret;
}

/* Closes the managed fds of [first, last] the switch's way before the
 * kernel closes the rest. */
void shim_closed_range(unsigned int first, unsigned int last)
{
	int fd, to;

	to = last > (unsigned int)fdt_size() ? fdt_size() - 1 : (int)last;
	/* the switch sockets first: their epoll registrations go with them
	 * (shim_close_fd) */
	for (fd = (int)first; fd >= 0 && fd <= to; fd++) {
		fd = fdt_next_managed(fd, to);
		if (fd < 0)
			break;
		shim_close_fd(fd);
	}
	rd_fds_closed(first, last);
	fdi_clear(first, last);
}

SHIM_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	if (shim_on() && !(flags & CLOSE_RANGE_CLOEXEC) && first <= last)
		shim_closed_range(first, last);
	return shim_close_range_around(first, last, flags);
}

SHIM_EXPORT void closefrom(int lowfd)
{
	struct rlimit rl;
	int fd;

	if (shim_on() && lowfd >= 0)
		shim_closed_range((unsigned int)lowfd, ~0u);
	if (lowfd < 0 || sdp_inside() ||
	    sw_fd_next_own((unsigned int)lowfd, ~0u) < 0) {
		REAL(closefrom)(lowfd);
		return;
	}
	if (!shim_close_range_around((unsigned int)lowfd, ~0u, 0) ||
	    errno != ENOSYS)
		return;
	/* a kernel without close_range: one number at a time, as the C
	 * library does then */
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur > INT_MAX)
		rl.rlim_cur = 1 << 20;
	for (fd = lowfd; fd < (int)rl.rlim_cur; fd++)
		if (!sw_fd_is_own(fd))
			REAL(close)(fd);
}

/* newfd (just made by the kernel) names the same socket as s. */
static int shim_dup_made(int newfd, struct sw_sock *s)
{
	sw_sock_ref(s);
	if (!fdt_install(newfd, s))
		return newfd;
	shim_unref(s);
	REAL(close)(newfd);
	errno = ENOMEM;
	return -1;
}

SHIM_EXPORT int dup(int fd)
{
	struct sw_sock *s;
	int nfd;

	if (!sdp_inside() && sw_fd_is_own(fd)) {
		errno = EBADF;	/* the switch's: not open, for the program */
		return -1;
	}
	s = shim_on() ? fdt_get(fd) : NULL;
	nfd = REAL(dup)(fd);
	fdi_copy(fd, nfd);
	if (!s)
		return nfd;
	if (nfd >= 0)
		nfd = shim_dup_made(nfd, s);
	shim_unref(s);
	return nfd;
}

/*
 * A connection put where stdio reads and writes it (a stream made with
 * fdopen, or fd 0, 1 or 2) is out of the switch's sight: stdio calls the
 * kernel from inside the C library, past every wrapper. It goes back to
 * plain TCP for good first (sw_blind_sock).
 */
static void shim_stdio_sock(int fd, const char *why)
{
	struct sw_sock *s = shim_on() ? fdt_get(fd) : NULL;

	if (!s)
		return;
	shim_enter();
	sw_blind_sock(s, why);
	shim_leave();
	shim_unref(s);
}

/* dup2/dup3: a managed newfd is closed the switch's way first (this gives
 * up dup2's atomicity for that one case: the switch may need the fd to
 * finish the connection, so it must still name the old socket then). */
static int shim_dup3(int oldfd, int newfd, int flags, bool is_dup2)
{
	struct sw_sock *s = NULL;
	bool moved = false, on;
	int ret;

	if (sw_fd_is_own(oldfd)) {
		errno = EBADF;	/* not open, for the program */
		return -1;
	}
	if (oldfd != newfd && sw_fd_is_own(newfd)) {
		/* the program takes a number the switch holds: the
		 * switch's descriptor moves elsewhere first */
		ret = sw_fd_make_room(newfd);
		if (ret) {
			errno = -ret;
			return -1;
		}
		moved = true;
	}
	on = shim_on();
	if (on && oldfd != newfd && fdt_next_managed(newfd, newfd) == newfd) {
		/* Do not close newfd when the call must fail anyway. */
		if (REAL(fcntl)(oldfd, F_GETFD) < 0)
			return -1;
		shim_close_fd(newfd);
	}
	if (on && oldfd != newfd)
		s = fdt_get(oldfd);
	ret = is_dup2 ? REAL(dup2)(oldfd, newfd) :
		REAL(dup3)(oldfd, newfd, flags);
	if (ret < 0 && moved) {
		/* the old copy of the switch's descriptor is nobody's */
		int saved = errno;

		REAL(close)(newfd);
		errno = saved;
	}
	if (!on || oldfd == newfd)
		return ret;
	if (ret >= 0) {
		rd_fds_closed(newfd, newfd);
		fdi_copy(oldfd, newfd);
	}
	if (ret >= 0 && s)
		ret = shim_dup_made(ret, s);
	if (ret >= 0 && ret <= 2 && s) {
		shim_enter();
		sw_sock_to_std(s);
		shim_leave();
	}
	if (s)
		shim_unref(s);
	return ret;
}

SHIM_EXPORT FILE *fdopen(int fd, const char *mode)
{
	if (!sdp_inside())
		shim_stdio_sock(fd, "fdopen");
	return REAL(fdopen)(fd, mode);
}

/*
 * fclose of a stream made on a switch socket: the C library closes the fd
 * itself, past the close wrapper. The switch lets go of the socket after
 * it, as close would have (else the table would still name the socket
 * when the number is reused, by a file or a pipe, and the switch would
 * answer for it). Nothing is done when the number names another socket
 * already (another thread's).
 */
SHIM_EXPORT int fclose(FILE *f)
{
	struct sw_sock *s = NULL, *gone;
	int fd = -1, ret, saved, primary;
	bool last;

	if (f && !sdp_inside() && shim_on()) {
		fd = fileno(f);
		s = fd >= 0 ? fdt_get(fd) : NULL;
	}
	ret = REAL(fclose)(f);
	if (!s)
		return ret;
	saved = errno;
	gone = fdt_remove_if(fd, s, &last, &primary);
	if (gone) {
		rd_fds_closed(fd, fd);
		fdi_clear(fd, fd);
		shim_enter();
		if (primary >= 0 && sw_sock_set_fd)
			sw_sock_set_fd(gone, primary);
		if (last)
			sw_close_gone(gone);
		sw_sock_unref(gone);
		shim_leave();
	}
	shim_unref(s);
	errno = saved;
	return ret;
}

SHIM_EXPORT int dup2(int oldfd, int newfd)
{
	if (sdp_inside())
		return REAL(dup2)(oldfd, newfd);
	return shim_dup3(oldfd, newfd, 0, true);
}

SHIM_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	if (sdp_inside())
		return REAL(dup3)(oldfd, newfd, flags);
	return shim_dup3(oldfd, newfd, flags, false);
}

static int shim_fcntl(int (*real)(int, int, ...), int fd, int cmd,
		      void *arg)
{
	struct sw_sock *s;
	int ret;

	if (!sdp_inside() && sw_fd_is_own(fd)) {
		errno = EBADF;	/* the switch's: not open, for the program */
		return -1;
	}
	s = shim_on() ? fdt_get(fd) : NULL;

	ret = real(fd, cmd, arg);
	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && ret >= 0)
		fdi_copy(fd, ret);
	if (!s)
		return ret;
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		if (ret >= 0)
			ret = shim_dup_made(ret, s);
		break;
	case F_SETFL:
		if (ret == 0) {
			shim_enter();
			sw_set_nonblock(s, ((long)arg & O_NONBLOCK) != 0);
			shim_leave();
		}
		break;
	}
	shim_unref(s);
	return ret;
}

/* The third argument is an int, a long or a pointer depending on cmd; on
 * the ABIs glibc supports it travels in the same register either way. */
SHIM_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return shim_fcntl(REAL(fcntl), fd, cmd, arg);
}

SHIM_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return shim_fcntl(REAL(fcntl64), fd, cmd, arg);
}

SHIM_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	struct sw_sock *s;
	va_list ap;
	void *arg;
	int ret;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	s = shim_on() ? fdt_get(fd) : NULL;
	if (!s)
		return REAL(ioctl)(fd, req, arg);
	shim_enter();
	if (req == FIONBIO) {
		ret = REAL(ioctl)(fd, req, arg);
		if (ret == 0 && arg)
			sw_set_nonblock(s, *(int *)arg != 0);
	} else if (!sw_ioctl(s, req, arg, &ret)) {
		ret = REAL(ioctl)(fd, req, arg);
	}
	sw_sock_unref(s);
	shim_leave();
	return ret;
}

SHIM_EXPORT int getsockopt(int fd, int level, int name, void *val,
			   socklen_t *len)
{
	struct sw_sock *s = shim_on() ? fdt_get(fd) : NULL;
	int ret;

	if (!s)
		return REAL(getsockopt)(fd, level, name, val, len);
	shim_enter();
	if (!sw_getsockopt(s, level, name, val, len, &ret))
		ret = REAL(getsockopt)(fd, level, name, val, len);
	sw_sock_unref(s);
	shim_leave();
	return ret;
}

SHIM_EXPORT int setsockopt(int fd, int level, int name, const void *val,
			   socklen_t len)
{
	bool on = shim_on();
	struct sw_sock *s = on ? fdt_get(fd) : NULL;
	int ret;

	if (!s) {
		ret = REAL(setsockopt)(fd, level, name, val, len);
		/* before connect, or on a listener the switch does not
		 * serve: the connections it makes look (sw_ts_tx_new) */
		if (on && !ret)
			sw_ts_tx_option(level, name, val, len);
		return ret;
	}
	shim_enter();
	if (!sw_setsockopt(s, level, name, val, len, &ret))
		ret = REAL(setsockopt)(fd, level, name, val, len);
	sw_sock_unref(s);
	shim_leave();
	return ret;
}
