/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sock_poll.c - wrappers for the readiness calls: poll, ppoll, select,
 * pselect and epoll. With the switch active they go to poll.c and epoll.c,
 * which pass sets without managed fds straight to the kernel.
 */
#include <errno.h>
#include <limits.h>

#include "shim.h"
#include "readiness.h"

static struct timespec *ms_to_ts(int ms, struct timespec *ts)
{
	if (ms < 0)
		return NULL;
	ts->tv_sec = ms / 1000;
	ts->tv_nsec = (long)(ms % 1000) * 1000000;
	return ts;
}

static int shim_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t,
		      const sigset_t *mask)
{
	int ret;

	shim_enter();
	ret = rd_ppoll(fds, n, t, mask);
	shim_leave();
	return ret;
}

SHIM_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	struct timespec ts;

	if (!shim_on())
		return REAL(poll)(fds, n, timeout);
	return shim_ppoll(fds, n, ms_to_ts(timeout, &ts), NULL);
}

SHIM_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout,
			   size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		__chk_fail();
	return poll(fds, n, timeout);
}

SHIM_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t,
		      const sigset_t *mask)
{
	if (!shim_on())
		return REAL(ppoll)(fds, n, t, mask);
	return shim_ppoll(fds, n, t, mask);
}

SHIM_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n,
			    const struct timespec *t, const sigset_t *mask,
			    size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		__chk_fail();
	return ppoll(fds, n, t, mask);
}

SHIM_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e,
		       struct timeval *tv)
{
	struct timespec ts, *tp = NULL;
	int ret;

	if (!shim_on())
		return REAL(select)(nfds, r, w, e, tv);
	if (tv) {
		if (tv->tv_sec < 0 || tv->tv_usec < 0) {
			errno = EINVAL;
			return -1;
		}
		ts.tv_sec = tv->tv_sec + tv->tv_usec / 1000000;
		ts.tv_nsec = (tv->tv_usec % 1000000) * 1000;
		tp = &ts;
	}
	shim_enter();
	ret = rd_pselect(nfds, r, w, e, tp, true, NULL);
	shim_leave();
	if (tv) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return ret;
}

SHIM_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e,
			const struct timespec *t, const sigset_t *mask)
{
	struct timespec ts;
	int ret;

	if (!shim_on())
		return REAL(pselect)(nfds, r, w, e, t, mask);
	if (t)
		ts = *t;
	shim_enter();
	ret = rd_pselect(nfds, r, w, e, t ? &ts : NULL, false, mask);
	shim_leave();
	return ret;
}

static int shim_epoll_made(int epfd)
{
	if (sdp_inside())
		return shim_switch_fd(epfd);	/* a provider's */
	if (epfd >= 0 && shim_on()) {
		shim_enter();
		rd_epoll_created(epfd);
		shim_leave();
	}
	return epfd;
}

SHIM_EXPORT int epoll_create(int size)
{
	return shim_epoll_made(REAL(epoll_create)(size));
}

SHIM_EXPORT int epoll_create1(int flags)
{
	return shim_epoll_made(REAL(epoll_create1)(flags));
}

SHIM_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int ret;

	if (!shim_on())
		return REAL(epoll_ctl)(epfd, op, fd, ev);
	shim_enter();
	ret = rd_epoll_ctl(epfd, op, fd, ev);
	shim_leave();
	return ret;
}

static int shim_epoll_wait(int epfd, struct epoll_event *evs, int max,
			   const struct timespec *t, const sigset_t *mask)
{
	int ret;

	shim_enter();
	ret = rd_epoll_wait(epfd, evs, max, t, mask);
	shim_leave();
	return ret;
}

SHIM_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max,
			   int timeout)
{
	struct timespec ts;

	if (!shim_on())
		return REAL(epoll_wait)(epfd, evs, max, timeout);
	return shim_epoll_wait(epfd, evs, max, ms_to_ts(timeout, &ts), NULL);
}

SHIM_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max,
			    int timeout, const sigset_t *mask)
{
	struct timespec ts;

	if (!shim_on())
		return REAL(epoll_pwait)(epfd, evs, max, timeout, mask);
	return shim_epoll_wait(epfd, evs, max, ms_to_ts(timeout, &ts), mask);
}

SHIM_EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max,
			     const struct timespec *t, const sigset_t *mask)
{
	if (!shim_on())
		return REAL(epoll_pwait2)(epfd, evs, max, t, mask);
	return shim_epoll_wait(epfd, evs, max, t, mask);
}
