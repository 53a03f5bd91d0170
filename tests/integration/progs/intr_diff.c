/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * intr_diff.c - a blocked socket call interrupted by a signal handler
 * answers on a carried connection as the kernel answers on a plain one:
 * recv, recv(MSG_WAITALL) with part of the bytes there, send with no room,
 * poll, epoll_wait, select, accept, connect and splice (from the socket
 * into a full pipe, from an empty pipe to the socket), each with the handler
 * installed without and with SA_RESTART, and recv/send with a timeout set
 * (never restarted). The return value, errno and the bytes are compared.
 *
 * Then the program runs itself again with a busy-poll floor of 300 ms
 * (SDP_SPIN_US), and the signal goes 50 ms into each call without waiting
 * for the thread to sleep: the handler runs while the switch polls, in no
 * system call, and the call must answer all the same.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include "diff_pair.h"

#define BIG (64 << 10)

static int family;
static int fds[4];		/* plain client, plain server, carried ... */
static pthread_t main_thr;
static pid_t main_tid;
static volatile sig_atomic_t hits;
static atomic_bool call_done;	/* the main thread's call returned */
static bool restart;
static bool during_spin;	/* the signal comes while the switch polls */
static int pair;		/* 0: the plain pair's call, 1: the carried */

static void on_sig(int sig)
{
	(void)sig;
	hits++;
}

static void handler(bool with_restart)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sa.sa_flags = with_restart ? SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	TP_CHECK(!sigaction(SIGUSR1, &sa, NULL), "sigaction");
	restart = with_restart;
}

/* The helper thread: the signal 50 ms into the main thread's call, then,
 * if the call goes on 50 ms later, what lets it finish. */
struct act {
	void (*fn)(struct act *a);
	int fd;
	int fd2;
	struct sockaddr_storage ss;
	socklen_t len;
	bool raw;
	int made;	/* an fd the act made, closed afterwards */
};

static void *helper(void *arg)
{
	struct act *a = arg;
	long end;

	/* the signal goes to the call, never before it: on a loaded machine
	 * the main thread may not reach the call within 50 ms, and a
	 * handler that ran before the call interrupts nothing */
	usleep(50 * 1000);
	end = tp_ms() + 5000;
	while (!(during_spin && pair) && !tp_asleep(main_tid) && tp_ms() < end)
		usleep(1000);
	pthread_kill(main_thr, SIGUSR1);
	end = tp_ms() + 50;
	while (tp_ms() < end && !atomic_load(&call_done))
		usleep(1000);
	if (a->fn && !atomic_load(&call_done))
		a->fn(a);
	return NULL;
}

static pthread_t start(struct act *a)
{
	pthread_t t;

	a->made = -1;
	atomic_store(&call_done, false);
	TP_CHECK(!pthread_create(&t, NULL, helper, a), "thread");
	return t;
}

static void finish(pthread_t t, int h0, const char *what)
{
	atomic_store(&call_done, true);
	pthread_join(t, NULL);
	TP_CHECK(hits == h0 + 1, "%s: the handler ran %d times", what,
		 (int)(hits - h0));
}

static void act_send10(struct act *a)
{
	TP_CHECK(send(a->fd, "0123456789", 10, MSG_NOSIGNAL) == 10, "send 10");
}

static void act_send100(struct act *a)
{
	static char b[100];

	TP_CHECK(send(a->fd, b, 100, MSG_NOSIGNAL) == 100, "send 100");
}

/* Reads what comes until the blocked send returned (2 s at most). */
static void act_drain(struct act *a)
{
	static char b[1 << 16];
	long end = tp_ms() + 2000;

	while (!atomic_load(&call_done) && tp_ms() < end)
		if (recv(a->fd, b, sizeof(b), MSG_DONTWAIT) <= 0)
			usleep(1000);
}

/* Reads the pipe a->fd (non-blocking) until the blocked call returned. */
static void act_drain_pipe(struct act *a)
{
	static char b[1 << 16];
	long end = tp_ms() + 2000;

	while (!atomic_load(&call_done) && tp_ms() < end)
		if (read(a->fd, b, sizeof(b)) <= 0)
			usleep(1000);
}

static void act_write10(struct act *a)
{
	TP_CHECK(write(a->fd, "0123456789", 10) == 10, "write 10");
}

static void act_connect(struct act *a)
{
	a->made = a->raw ? tp_raw_connect(&a->ss, a->len) :
			   tp_connect(&a->ss, a->len);
}

/* Takes one connection off the listener, room for the blocked one. */
static void act_accept(struct act *a)
{
	a->made = accept(a->fd, NULL, NULL);
	TP_CHECK(a->made >= 0, "accept");
}

/* Everything still in flight on both pairs is read, and both pairs are
 * idle again. */
static void settle(void)
{
	static char b[1 << 16];
	int i, idle;

	for (idle = 0; idle < 20; ) {
		int got = 0;

		for (i = 0; i < 4; i++)
			while (recv(fds[i], b, sizeof(b), MSG_DONTWAIT) > 0)
				got = 1;
		idle = got ? 0 : idle + 1;
		usleep(2000);
	}
}

/* A blocked send: the peer reads nothing, the sender has no room. The
 * kernel finds room for more while the receiver's queue settles (it
 * collapses its buffers): full means a round that took nothing. */
static void fill(int fd)
{
	static char b[1 << 16];
	long end = tp_ms() + 5000;
	size_t round;
	ssize_t w;

	do {
		round = 0;
		while ((w = send(fd, b, sizeof(b),
				 MSG_DONTWAIT | MSG_NOSIGNAL)) > 0)
			round += (size_t)w;
		usleep(30 * 1000);
	} while (round && tp_ms() < end);
}

static bool send_timeo;	/* SO_SNDTIMEO is set: a send is never restarted */

/* A send's result as the program sees it: interrupted (EINTR, or the
 * bytes it wrote before the signal, when the kernel found room for a
 * few more by the time the call came), or all of it. Under SA_RESTART a
 * send that wrote some bytes before the signal returns them and one that
 * wrote none is restarted and then writes all: which of the two depends
 * on whether room trickled in before the signal, on either pair, so both
 * count as "bytes sent"; an EINTR there would be the error. */
static int send_class(int r)
{
	if (r > 0 && r < BIG)
		return restart && !send_timeo ? BIG : -EINTR;
	return r;
}

static int do_recv(int p, int *ret)
{
	static char b[512];
	struct act a = { .fn = restart ? act_send10 : NULL, .fd = fds[2 * p] };
	int h0 = hits;
	pthread_t t = start(&a);

	*ret = RES((int)recv(fds[2 * p + 1], b, sizeof(b), 0));
	finish(t, h0, "recv");
	return 0;
}

static int do_waitall(int p, int *ret)
{
	static char b[200];
	struct act a = { .fn = act_send100, .fd = fds[2 * p] };
	pthread_t t;
	int h0 = hits;

	act_send100(&a);
	usleep(20 * 1000);
	t = start(&a);
	*ret = RES((int)recv(fds[2 * p + 1], b, sizeof(b), MSG_WAITALL));
	finish(t, h0, "recv MSG_WAITALL");
	return 0;
}

static int do_send(int p, int *ret)
{
	static char b[BIG];
	struct act a = { .fn = act_drain, .fd = fds[2 * p + 1] };
	pthread_t t;
	int h0 = hits;

	fill(fds[2 * p]);
	t = start(&a);
	*ret = send_class(RES((int)send(fds[2 * p], b, sizeof(b),
					MSG_NOSIGNAL)));
	finish(t, h0, "send");
	return 0;
}

/* splice from the socket, which holds 10 bytes, into a full pipe: the
 * call waits for room in the pipe */
static int do_splice_in(int p, int *ret)
{
	static char b[1 << 16];
	struct act a = { .fn = act_drain_pipe };
	int pp[2], h0 = hits;
	pthread_t t;

	TP_CHECK(!pipe2(pp, O_NONBLOCK), "pipe");
	while (write(pp[1], b, sizeof(b)) > 0)
		;
	fcntl(pp[1], F_SETFL, 0);
	a.fd = pp[0];
	act_send10(&(struct act){ .fd = fds[2 * p] });
	usleep(20 * 1000);
	t = start(&a);
	*ret = RES((int)splice(fds[2 * p + 1], NULL, pp[1], NULL, 10, 0));
	finish(t, h0, "splice into a full pipe");
	close(pp[0]);
	close(pp[1]);
	return 0;
}

/* splice from an empty pipe to the socket: the call waits for bytes */
static int do_splice_out(int p, int *ret)
{
	struct act a = { .fn = act_write10 };
	int pp[2], h0 = hits;
	pthread_t t;

	TP_CHECK(!pipe2(pp, 0), "pipe");
	a.fd = pp[1];
	t = start(&a);
	*ret = RES((int)splice(pp[0], NULL, fds[2 * p], NULL, 10, 0));
	finish(t, h0, "splice from an empty pipe");
	close(pp[0]);
	close(pp[1]);
	return 0;
}

static int do_poll(int p, int *ret)
{
	struct act a = { .fn = act_send10, .fd = fds[2 * p] };
	struct pollfd pf = { .fd = fds[2 * p + 1], .events = POLLIN };
	int h0 = hits;
	pthread_t t = start(&a);

	*ret = RES(poll(&pf, 1, 2000));
	finish(t, h0, "poll");
	return 0;
}

static int do_epoll(int p, int *ret)
{
	struct act a = { .fn = act_send10, .fd = fds[2 * p] };
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC), h0 = hits;
	pthread_t t;

	TP_CHECK(ep >= 0 && !epoll_ctl(ep, EPOLL_CTL_ADD, fds[2 * p + 1], &ev),
		 "epoll");
	t = start(&a);
	*ret = RES(epoll_wait(ep, &ev, 1, 2000));
	finish(t, h0, "epoll_wait");
	close(ep);
	return 0;
}

static int do_select(int p, int *ret)
{
	struct act a = { .fn = act_send10, .fd = fds[2 * p] };
	struct timeval tv = { 2, 0 };
	fd_set r;
	int h0 = hits;
	pthread_t t;

	FD_ZERO(&r);
	FD_SET(fds[2 * p + 1], &r);
	t = start(&a);
	*ret = RES(select(fds[2 * p + 1] + 1, &r, NULL, NULL, &tv));
	finish(t, h0, "select");
	return 0;
}

static int do_accept(int p, int *ret)
{
	struct act a = { .fn = act_connect, .raw = !p };
	int l, c, h0 = hits;
	pthread_t t;

	l = p ? tp_listener(family, 4, &a.ss, &a.len) :
		tp_raw_listener(family, 4, &a.ss, &a.len);
	t = start(&a);
	c = accept(l, NULL, NULL);
	*ret = c >= 0 ? 1 : -errno;
	finish(t, h0, "accept");
	if (c >= 0)
		close(c);
	close(a.made);
	close(l);
	return 0;
}

/* connect() to a listener whose queue is full: the SYN goes unanswered
 * until the act takes a connection off it (and the retransmitted SYN,
 * a second later, finds room). */
static int do_connect(int p, int *ret)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct act a = { .fn = act_accept };
	int l, first, c, h0 = hits;
	pthread_t t;

	l = p ? tp_listener(family, 0, &ss, &len) :
		tp_raw_listener(family, 0, &ss, &len);
	a.fd = l;
	first = p ? tp_connect(&ss, len) : tp_raw_connect(&ss, len);
	usleep(20 * 1000);
	c = p ? socket(family, SOCK_STREAM, 0) :
		(int)syscall(SYS_socket, family, SOCK_STREAM, 0);
	TP_CHECK(c >= 0, "socket");
	t = start(&a);
	*ret = RES(connect(c, (struct sockaddr *)&ss, len));
	finish(t, h0, "connect");
	close(c);
	close(first);
	close(a.made);
	close(l);
	return 0;
}

static void timeo(int opt, int sec)
{
	struct timeval tv = { sec, 0 };
	int i;

	for (i = 0; i < 4; i++)
		TP_CHECK(!setsockopt(fds[i], SOL_SOCKET, opt, &tv, sizeof(tv)),
			 "setsockopt timeout");
}

static int do_recv_timeo(int p, int *ret)
{
	static char b[512];
	struct act a = { .fn = act_send10, .fd = fds[2 * p] };
	int h0 = hits;
	pthread_t t;

	timeo(SO_RCVTIMEO, 5);
	t = start(&a);
	*ret = RES((int)recv(fds[2 * p + 1], b, sizeof(b), 0));
	finish(t, h0, "recv with SO_RCVTIMEO");
	timeo(SO_RCVTIMEO, 0);
	return 0;
}

static int do_send_timeo(int p, int *ret)
{
	timeo(SO_SNDTIMEO, 5);
	send_timeo = true;
	do_send(p, ret);
	send_timeo = false;
	timeo(SO_SNDTIMEO, 0);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(int p, int *ret);
} cases[] = {
	{ "recv", do_recv },
	{ "recv MSG_WAITALL, half there", do_waitall },
	{ "send with no room", do_send },
	{ "poll", do_poll },
	{ "epoll_wait", do_epoll },
	{ "select", do_select },
	{ "accept", do_accept },
	{ "connect to a full queue", do_connect },
	{ "splice into a full pipe", do_splice_in },
	{ "splice from an empty pipe", do_splice_out },
	{ "recv with SO_RCVTIMEO", do_recv_timeo },
	{ "send with SO_SNDTIMEO", do_send_timeo },
};

int main(int argc, char **argv)
{
	char what[128];
	size_t i;
	int m, res[2];

	family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	during_spin = getenv("INTR_DIFF_SPIN") != NULL;
	tp_start("intr_diff", during_spin ? 30 : 25);
	main_thr = pthread_self();
	main_tid = (pid_t)syscall(SYS_gettid);
	tp_raw_pair(family, &fds[0], &fds[1]);
	tp_pair(family, &fds[2], &fds[3]);
	tp_carry_both(fds[2], fds[3]);
	/* small queues, whose room does not trickle in while the receiver
	 * keeps them full */
	for (i = 0; i < 4; i++) {
		m = 32 << 10;
		TP_CHECK(!setsockopt(fds[i], SOL_SOCKET, i & 1 ? SO_RCVBUF :
				     SO_SNDBUF, &m, sizeof(m)), "buffers");
	}
	for (m = 0; m < 2; m++) {
		handler(m);
		for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			pair = 0;
			cases[i].fn(0, &res[0]);
			settle();
			pair = 1;
			cases[i].fn(1, &res[1]);
			settle();
			snprintf(what, sizeof(what), "%s interrupted (%s%s)",
				 cases[i].name,
				 m ? "SA_RESTART" : "no SA_RESTART",
				 during_spin ? ", while the switch polls" : "");
			same(what, res[0], res[1]);
			if (getenv("DIFF_VERBOSE"))
				fprintf(stderr, "%s: %d\n", what, res[0]);
		}
	}
	for (i = 2; i < 4; i++) {
		const struct sw_conn_stats *st = tp_conn_stats(fds[i]);

		TP_CHECK(st && st->state == TP_STATE_SAN,
			 "the connection is no longer carried (state %d)",
			 st ? (int)st->state : -1);
	}
	for (i = 0; i < 4; i++)
		close(fds[i]);
	if (!during_spin) {
		setenv("INTR_DIFF_SPIN", "1", 1);
		setenv("SDP_SPIN_US", "300000", 1);
		setenv("SDP_SPIN_MAX_US", "0", 1);
		execv("/proc/self/exe", argv);
		TP_CHECK(0, "exec of itself: %s", strerror(errno));
	}
	tp_pass();
	return 0;
}
