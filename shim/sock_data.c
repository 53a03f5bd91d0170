/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sock_data.c - wrappers that move bytes: the read, recv and write, send
 * families, recvmmsg/sendmmsg and sendfile. On a managed fd each becomes
 * one struct msghdr for sw_recvmsg or sw_sendmsg; otherwise libc's call.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

#include "shim.h"
#include "fdtable.h"

/*
 * A socket the switch has nothing more to do with (sw_sock_inherit_done:
 * inherited across exec only for its peer's hello to be dropped, or any
 * once the process stepped aside for a seccomp sandbox) is let go: every
 * fd naming it leaves the table, with no close, and the program's later
 * calls go to the kernel unchanged, as on a socket the switch never knew.
 * A sandboxed process (sshd's pre-auth child) may be allowed read and
 * write but not the recvmsg and sendmsg the switch would make for them.
 */
void shim_let_go(struct sw_sock *s)
{
	int fd, primary, saved = errno;
	bool last;

	if (!sw_sock_inherit_done(s))
		return;
	for (fd = fdt_next_managed(0, INT_MAX); fd >= 0;
	     fd = fdt_next_managed(fd + 1, INT_MAX)) {
		struct sw_sock *o = fdt_get(fd), *t = NULL;

		if (o == s)
			t = fdt_remove(fd, &last, &primary);
		/* the table's reference; another socket that came to fd
		 * meanwhile stays */
		if (t && (t == s || fdt_install(fd, t)))
			sw_sock_unref(t);
		if (o)
			sw_sock_unref(o);
		if (fd == INT_MAX)
			break;
	}
	errno = saved;
}

/* Every managed socket that may go (shim_let_go). */
void shim_let_go_all(void)
{
	int fd;

	for (fd = fdt_next_managed(0, INT_MAX); fd >= 0;
	     fd = fdt_next_managed(fd + 1, INT_MAX)) {
		struct sw_sock *s = fdt_get(fd);

		if (s) {
			shim_let_go(s);
			sw_sock_unref(s);
		}
		if (fd == INT_MAX)
			break;
	}
}

static ssize_t shim_recv(struct sw_sock *s, struct msghdr *m, int flags)
{
	ssize_t ret;

	shim_enter();
	ret = sw_recvmsg(s, m, flags);
	shim_let_go(s);
	sw_sock_unref(s);
	shim_leave();
	return ret;
}

static ssize_t shim_send(struct sw_sock *s, const struct msghdr *m,
			 int flags)
{
	ssize_t ret;

	shim_enter();
	ret = sw_sendmsg(s, m, flags);
	sw_sock_unref(s);
	shim_leave();
	return ret;
}

static ssize_t shim_recv_buf(struct sw_sock *s, void *buf, size_t n,
			     int flags, struct sockaddr *addr,
			     socklen_t *alen)
{
	struct iovec iov = { .iov_base = buf, .iov_len = n };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t ret;

	if (addr && alen) {
		m.msg_name = addr;
		m.msg_namelen = *alen;
	}
	ret = shim_recv(s, &m, flags);
	if (ret >= 0 && addr && alen)
		*alen = m.msg_namelen;
	return ret;
}

static ssize_t shim_send_buf(struct sw_sock *s, const void *buf, size_t n,
			     int flags, const struct sockaddr *addr,
			     socklen_t alen)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = n };
	struct msghdr m = {
		.msg_name = (void *)addr,
		.msg_namelen = addr ? alen : 0,
		.msg_iov = &iov,
		.msg_iovlen = 1,
	};

	return shim_send(s, &m, flags);
}

static struct sw_sock *shim_sock(int fd)
{
	return shim_on() ? fdt_get(fd) : NULL;
}

/*
 * The socket for a call that sends, or NULL when the kernel takes the
 * call as the program made it: unmanaged, or (sw_send_by_kernel) in a
 * process that stepped aside for a sandbox and still holds the socket
 * only for bytes to read from memory. Its filter may allow write but not
 * the sendmsg the switch would make of it.
 */
static struct sw_sock *shim_send_sock(int fd)
{
	struct sw_sock *s = shim_sock(fd);

	if (s && sw_send_by_kernel(s)) {
		sw_sock_unref(s);
		return NULL;
	}
	return s;
}

/*
 * A signal handler that runs while this thread is inside the switch, and
 * not waiting there holding no lock (shim_on), cannot go through the
 * switch: the frame it interrupted may hold the locks the call needs. Nor
 * may its call reach the TCP socket of a connection the switch has a part
 * in, where the switch's markers travel and the program's bytes are not.
 * It fails with EAGAIN (docs/semantics.md, "Socket calls inside signal
 * handlers").
 */
static bool shim_refused(int fd)
{
	struct sw_sock *s;

	if (!sdp_inside() ||
	    !__atomic_load_n(&shim_active, __ATOMIC_ACQUIRE))
		return false;
	s = fdt_peek(fd);
	if (!s || !sw_sock_taken(s))
		return false;
	errno = EAGAIN;
	return true;
}

SHIM_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	struct sw_sock *s = shim_sock(fd);

	if (!s) {
		if (shim_refused(fd))
			return -1;
		return REAL(read)(fd, buf, n);
	}
	return shim_recv_buf(s, buf, n, 0, NULL, NULL);
}

SHIM_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	struct sw_sock *s;

	if (n > buflen)
		__chk_fail();
	s = shim_sock(fd);
	if (!s) {
		if (shim_refused(fd))
			return -1;
		return REAL(__read_chk)(fd, buf, n, buflen);
	}
	return shim_recv_buf(s, buf, n, 0, NULL, NULL);
}

SHIM_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct sw_sock *s = shim_sock(fd);
	struct msghdr m = { .msg_iov = (struct iovec *)iov };

	if (!s) {
		if (shim_refused(fd))
			return -1;
		return REAL(readv)(fd, iov, iovcnt);
	}
	if (iovcnt < 0) {
		shim_unref(s);
		errno = EINVAL;
		return -1;
	}
	m.msg_iovlen = (size_t)iovcnt;
	return shim_recv(s, &m, 0);
}

SHIM_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	struct sw_sock *s = shim_sock(fd);

	if (!s) {
		if (shim_refused(fd))
			return -1;
		return REAL(recv)(fd, buf, n, flags);
	}
	return shim_recv_buf(s, buf, n, flags, NULL, NULL);
}

SHIM_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen,
			       int flags)
{
	struct sw_sock *s;

	if (n > buflen)
		__chk_fail();
	s = shim_sock(fd);
	if (!s) {
		if (shim_refused(fd))
			return -1;
		return REAL(__recv_chk)(fd, buf, n, buflen, flags);
	}
	return shim_recv_buf(s, buf, n, flags, NULL, NULL);
}

SHIM_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags,
			     struct sockaddr *addr, socklen_t *alen)
{
	struct sw_sock *s = shim_sock(fd);

	if (!s) {
		if (shim_refused(fd))
			return -1;
		return REAL(recvfrom)(fd, buf, n, flags, addr, alen);
	}
	return shim_recv_buf(s, buf, n, flags, addr, alen);
}

SHIM_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n,
				   size_t buflen, int flags,
				   struct sockaddr *addr, socklen_t *alen)
{
	struct sw_sock *s;

	if (n > buflen)
		__chk_fail();
	s = shim_sock(fd);
	if (!s) {
		if (shim_refused(fd))
			return -1;
		return REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, addr,
					    alen);
	}
	return shim_recv_buf(s, buf, n, flags, addr, alen);
}

/* Descriptors a provider received (SCM_RIGHTS) become the switch's. */
static void shim_switch_rights(struct msghdr *msg)
{
	struct cmsghdr *c;
	size_t i, n;
	int fd;

	for (c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			fd = shim_switch_fd(fd);
			memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof(fd));
		}
	}
}

SHIM_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct sw_sock *s = shim_sock(fd);
	ssize_t r;

	if (!s) {
		if (shim_refused(fd))
			return -1;
		r = REAL(recvmsg)(fd, msg, flags);
		if (r < 0 || !msg || !msg->msg_controllen)
			return r;
		if (sdp_inside())
			shim_switch_rights(msg);	/* a provider's */
		else if (!(flags & MSG_PEEK))
			shim_fds_received(msg);
		return r;
	}
	return shim_recv(s, msg, flags);
}

/*
 * recvmmsg(2) on a stream: each message takes what the stream has, as the
 * kernel does for TCP; after the first, MSG_WAITFORONE makes the rest
 * non-blocking. An error after some messages ends the batch with the
 * count. The timeout is checked between messages only, as in the kernel.
 */
SHIM_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
			 int flags, struct timespec *timeout)
{
	struct sw_sock *s = shim_sock(fd);
	struct timespec end, now;
	unsigned int i;
	ssize_t r = -1;

	if (!s) {
		if (shim_refused(fd))
			return -1;
		return REAL(recvmmsg)(fd, vec, vlen, flags, timeout);
	}
	if (timeout) {
		clock_gettime(CLOCK_MONOTONIC, &end);
		end.tv_sec += timeout->tv_sec;
		end.tv_nsec += timeout->tv_nsec;
		if (end.tv_nsec >= 1000000000) {
			end.tv_sec++;
			end.tv_nsec -= 1000000000;
		}
	}
	shim_enter();
	for (i = 0; i < vlen; i++) {
		r = sw_recvmsg(s, &vec[i].msg_hdr, flags & ~MSG_WAITFORONE);
		if (r < 0)
			break;
		vec[i].msg_len = (unsigned int)r;
		if (r == 0)
			break;
		if (flags & MSG_WAITFORONE)
			flags |= MSG_DONTWAIT;
		if (timeout) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec > end.tv_sec ||
			    (now.tv_sec == end.tv_sec &&
			     now.tv_nsec >= end.tv_nsec)) {
				i++;
				break;
			}
		}
	}
	if (i < vlen && r == 0)
		i++;
	shim_let_go(s);
	sw_sock_unref(s);
	shim_leave();
	if (i == 0 && vlen > 0)
		return -1;
	return (int)i;
}

SHIM_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct sw_sock *s = shim_send_sock(fd);

	if (!s) {
		if (shim_refused(fd))
			return -1;
		return REAL(write)(fd, buf, n);
	}
	return shim_send_buf(s, buf, n, 0, NULL, 0);
}

SHIM_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct sw_sock *s = shim_send_sock(fd);
	struct msghdr m = { .msg_iov = (struct iovec *)iov };

	if (!s) {
		if (shim_refused(fd))
			return -1;
		return REAL(writev)(fd, iov, iovcnt);
	}
	if (iovcnt < 0) {
		shim_unref(s);
		errno = EINVAL;
		return -1;
	}
	m.msg_iovlen = (size_t)iovcnt;
	return shim_send(s, &m, 0);
}

SHIM_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	struct sw_sock *s = shim_send_sock(fd);

	if (!s) {
		if (shim_refused(fd))
			return -1;
		return REAL(send)(fd, buf, n, flags);
	}
	return shim_send_buf(s, buf, n, flags, NULL, 0);
}

SHIM_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			   const struct sockaddr *addr, socklen_t alen)
{
	struct sw_sock *s = shim_send_sock(fd);

	if (!s) {
		if (shim_refused(fd))
			return -1;
		return REAL(sendto)(fd, buf, n, flags, addr, alen);
	}
	return shim_send_buf(s, buf, n, flags, addr, alen);
}

SHIM_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct sw_sock *s = shim_send_sock(fd);

	if (!s) {
		if (shim_refused(fd))
			return -1;
		if (msg && msg->msg_controllen)
			shim_fds_sending(fd, msg);
		return REAL(sendmsg)(fd, msg, flags);
	}
	return shim_send(s, msg, flags);
}

/* sendmmsg(2): the messages in order; an error after some were sent ends
 * the batch with the count, as the kernel does. */
SHIM_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
			 int flags)
{
	struct sw_sock *s = shim_send_sock(fd);
	unsigned int i;
	ssize_t r;

	if (!s) {
		if (shim_refused(fd))
			return -1;
		return REAL(sendmmsg)(fd, vec, vlen, flags);
	}
	shim_enter();
	for (i = 0; i < vlen; i++) {
		r = sw_sendmsg(s, &vec[i].msg_hdr, flags);
		if (r < 0)
			break;
		vec[i].msg_len = (unsigned int)r;
	}
	sw_sock_unref(s);
	shim_leave();
	if (i == 0 && vlen > 0)
		return -1;
	return (int)i;
}

static ssize_t shim_sendfile(ssize_t (*real)(int, int, off_t *, size_t),
			     int out_fd, int in_fd, off_t *off, size_t count)
{
	struct sw_sock *s = shim_sock(out_fd);
	ssize_t ret;

	if (!s)
		return real(out_fd, in_fd, off, count);
	shim_enter();
	ret = sw_sendfile(s, in_fd, off, count);
	sw_sock_unref(s);
	shim_leave();
	return ret;
}

SHIM_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *off, size_t count)
{
	return shim_sendfile(REAL(sendfile), out_fd, in_fd, off, count);
}

/*
 * splice(2): when one side is a switch socket (the other is then a pipe, or
 * the kernel refuses the call), the switch moves the bytes; a socket given
 * an offset is refused as the kernel does.
 */
SHIM_EXPORT ssize_t splice(int fd_in, loff_t *off_in, int fd_out,
			   loff_t *off_out, size_t len, unsigned int flags)
{
	struct sw_sock *in = shim_sock(fd_in), *out = shim_send_sock(fd_out);
	ssize_t ret;

	if (!in && !out)
		return REAL(splice)(fd_in, off_in, fd_out, off_out, len,
				    flags);
	shim_enter();
	if ((in && off_in) || (out && off_out)) {
		errno = ESPIPE;
		ret = -1;
	} else if (in && out) {
		errno = EINVAL;		/* neither is a pipe */
		ret = -1;
	} else if (in) {
		ret = sw_splice_read(in, fd_out, len, flags);
	} else {
		ret = sw_splice_write(out, fd_in, len, flags);
	}
	if (in)
		sw_sock_unref(in);
	if (out)
		sw_sock_unref(out);
	shim_leave();
	return ret;
}

SHIM_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off_t *off,
			       size_t count)
{
	return shim_sendfile(REAL(sendfile64), out_fd, in_fd, off, count);
}
