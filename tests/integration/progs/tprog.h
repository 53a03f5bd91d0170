/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tprog.h - helpers for the integration test programs: loopback TCP pairs
 * (IPv4 or IPv6), a byte pattern each test checks on arrival, and failing
 * loudly with the reason. The programs run under LD_PRELOAD of the switch.
 */
#ifndef TPROG_H
#define TPROG_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *tp_name = "test";

__attribute__((noreturn, format(printf, 1, 2)))
static inline void tp_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL %s: ", tp_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno));
	exit(1);
}

#define TP_CHECK(cond, ...) do { if (!(cond)) tp_fail(__VA_ARGS__); } \
	while (0)

/*
 * For a test about stalls: a watchdog thread fails the run (exit 3) when
 * none of its byte counters moved for a number of seconds, and names them.
 * A run that is only slow (a loaded host stretches it many times over)
 * keeps moving and is not failed for it. The test's threads publish their
 * counts with tp_progress.
 */
#define TP_WATCH_MAX 2
static struct {
	const char *what[TP_WATCH_MAX];
	uint64_t *ctr[TP_WATCH_MAX];
	int n;
	unsigned int seconds;
	uint64_t total;
} tp_watched;

static inline void tp_progress(uint64_t *ctr, uint64_t bytes)
{
	__atomic_store_n(ctr, bytes, __ATOMIC_RELAXED);
}

static inline void *tp_watch_main(void *arg)
{
	uint64_t seen[TP_WATCH_MAX] = { 0 };
	unsigned int still = 0;
	int i;

	(void)arg;
	for (;;) {
		uint64_t now[TP_WATCH_MAX];
		bool moved = false;

		for (i = 0; i < tp_watched.n; i++)
			now[i] = __atomic_load_n(tp_watched.ctr[i],
						 __ATOMIC_RELAXED);
		sleep(1);
		for (i = 0; i < tp_watched.n; i++)
			if (now[i] != seen[i]) {
				seen[i] = now[i];
				moved = true;
			}
		if (moved) {
			still = 0;
		} else if (++still == tp_watched.seconds) {
			fprintf(stderr, "FAIL %s: no byte moved for %u s (of "
				"%llu:", tp_name, tp_watched.seconds,
				(unsigned long long)tp_watched.total);
			for (i = 0; i < tp_watched.n; i++)
				fprintf(stderr, " %llu %s",
					(unsigned long long)seen[i],
					tp_watched.what[i]);
			fprintf(stderr, "): a stall\n");
			_exit(3);
		}
	}
	return NULL;
}

/* Watches ctr0 (and ctr1 unless NULL), called what0 and what1 in the
 * failure, counting towards total. */
static inline void tp_watch(unsigned int seconds, uint64_t total,
			    const char *what0, uint64_t *ctr0,
			    const char *what1, uint64_t *ctr1)
{
	pthread_t t;

	tp_watched.seconds = seconds;
	tp_watched.total = total;
	tp_watched.what[0] = what0;
	tp_watched.ctr[0] = ctr0;
	tp_watched.what[1] = what1;
	tp_watched.ctr[1] = ctr1;
	tp_watched.n = ctr1 ? 2 : 1;
	TP_CHECK(!pthread_create(&t, NULL, tp_watch_main, NULL),
		 "pthread_create");
}

static void tp_alarm(int sig)
{
	static const char m[] = ": not done in its time bound (a hang?)\n";

	(void)sig;
	if (write(2, "FAIL ", 5) < 0 ||
	    write(2, tp_name, strlen(tp_name)) < 0 ||
	    write(2, m, sizeof(m) - 1) < 0)
		_exit(3);
	_exit(3);
}

/* Every test run is bounded: a run that outlives its bound says so. */
static inline void tp_start(const char *name, unsigned int seconds)
{
	tp_name = name;
	signal(SIGALRM, tp_alarm);
	alarm(seconds);
}

static inline void tp_pass(void)
{
	printf("PASS %s\n", tp_name);
	exit(0);
}

/* Byte i of stream number id: the receiver checks each byte's position. */
static inline unsigned char tp_byte(unsigned int id, size_t i)
{
	uint32_t x = (uint32_t)(i * 2654435761u) ^ (id * 40503u);

	return (unsigned char)(x >> 13);
}

static inline void tp_fill(unsigned int id, size_t off, void *buf, size_t n)
{
	unsigned char *p = buf;
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = tp_byte(id, off + i);
}

static inline void tp_verify(unsigned int id, size_t off, const void *buf,
			     size_t n)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != tp_byte(id, off + i))
			tp_fail("stream %u: byte %zu is 0x%02x, not 0x%02x",
				id, off + i, p[i], tp_byte(id, off + i));
}

/* Sends n pattern bytes of stream id starting at off; blocking fd. */
static inline void tp_send(int fd, unsigned int id, size_t off, size_t n)
{
	char buf[8192];
	size_t done = 0, k;
	ssize_t r;

	while (done < n) {
		k = n - done < sizeof(buf) ? n - done : sizeof(buf);
		tp_fill(id, off + done, buf, k);
		r = send(fd, buf, k, MSG_NOSIGNAL);
		TP_CHECK(r > 0, "send of %zu bytes on fd %d", k, fd);
		done += (size_t)r;
		/* a short send: resend the rest with the right offsets */
	}
}

/* Receives exactly n bytes of stream id at off (blocking), checking them. */
static inline void tp_recv(int fd, unsigned int id, size_t off, size_t n)
{
	char buf[8192];
	size_t done = 0, k;
	ssize_t r;

	while (done < n) {
		k = n - done < sizeof(buf) ? n - done : sizeof(buf);
		r = recv(fd, buf, k, 0);
		TP_CHECK(r > 0, "recv on fd %d after %zu of %zu bytes (%zd)",
			 fd, done, n, r);
		tp_verify(id, off + done, buf, (size_t)r);
		done += (size_t)r;
	}
}

/* How a test waits for its non-blocking fd: until it is writable (out) or
 * readable, failing on a stall; ctx is the test's own (its epoll set). */
typedef void tp_wait_fn(void *ctx, int fd, bool out);

/* Sends n pattern bytes of stream id from off in one buffer on a
 * non-blocking fd: each send as large as the socket takes, waiting with
 * wait whenever it is full. */
static inline void tp_send_nb(int fd, unsigned int id, size_t off, size_t n,
			      tp_wait_fn *wait, void *ctx)
{
	char *buf = malloc(n ? n : 1);
	size_t done = 0;
	ssize_t r;

	TP_CHECK(buf != NULL, "malloc of %zu bytes", n);
	tp_fill(id, off, buf, n);
	while (done < n) {
		r = send(fd, buf + done, n - done, MSG_NOSIGNAL);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		TP_CHECK(r < 0 && errno == EAGAIN, "send on fd %d", fd);
		wait(ctx, fd, true);
	}
	free(buf);
}

/* Receives exactly n bytes of stream id at off on a non-blocking fd,
 * checking them: waits with wait, then reads until EAGAIN. */
static inline void tp_recv_nb(int fd, unsigned int id, size_t off, size_t n,
			      tp_wait_fn *wait, void *ctx)
{
	char buf[65536];
	size_t done = 0;
	ssize_t r;

	while (done < n) {
		wait(ctx, fd, false);
		for (;;) {
			r = recv(fd, buf, n - done < sizeof(buf) ?
				 n - done : sizeof(buf), 0);
			if (r < 0 && errno == EAGAIN)
				break;
			TP_CHECK(r > 0, "recv on fd %d after %zu of %zu bytes "
				 "(%zd)", fd, done, n, r);
			tp_verify(id, off + done, buf, (size_t)r);
			done += (size_t)r;
			if (done == n)
				break;
		}
	}
}

/* Waits for child pid, which must have exited with status 0; else fails
 * with the message fmt and the status. */
__attribute__((format(printf, 2, 3)))
static inline void tp_reap(pid_t pid, const char *fmt, ...)
{
	char what[256];
	va_list ap;
	int st;

	TP_CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	tp_fail("%s (status 0x%x)", what, st);
}

/* One run of a program that runs itself once per step: its name, and a
 * setting ("NAME=value") the switch reads at start, or NULL. */
struct tp_step {
	const char *name;
	const char *env;
};

/* In the first process: runs this program again (same arguments) once per
 * step, in turn, each with TP_STEP=name and the step's setting in its
 * environment; returns NULL when every run passed, and exits with status 1
 * at the first that did not (the run printed why). In such a run: returns
 * its step's name. */
static inline const char *tp_steps(char **argv, const struct tp_step *steps,
				   int n)
{
	const char *me = getenv("TP_STEP");
	int i, st;

	if (me)
		return me;
	for (i = 0; i < n; i++) {
		pid_t p = fork();

		TP_CHECK(p >= 0, "fork");
		if (!p) {
			setenv("TP_STEP", steps[i].name, 1);
			if (steps[i].env)
				putenv((char *)steps[i].env);
			execv("/proc/self/exe", argv);
			tp_fail("execv: %s", strerror(errno));
		}
		TP_CHECK(waitpid(p, &st, 0) == p, "waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			exit(1);
	}
	return NULL;
}

/* The loopback address of family (port 0) in *ss, its length in *len. */
static inline void tp_loopback(int family, struct sockaddr_storage *ss,
			       socklen_t *len)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET6) {
		in6->sin6_family = AF_INET6;
		in6->sin6_addr = in6addr_loopback;
		*len = sizeof(*in6);
	} else {
		in4->sin_family = AF_INET;
		in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		*len = sizeof(*in4);
	}
}

/* A listening loopback TCP socket of family (AF_INET or AF_INET6) on a
 * port the kernel picks; *ss and *len receive its address. */
static inline int tp_listener(int family, int backlog,
			      struct sockaddr_storage *ss, socklen_t *len)
{
	int l, one = 1;

	tp_loopback(family, ss, len);
	l = socket(family, SOCK_STREAM, 0);
	TP_CHECK(l >= 0, "socket");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	TP_CHECK(!bind(l, (struct sockaddr *)ss, *len), "bind loopback");
	TP_CHECK(!listen(l, backlog), "listen");
	TP_CHECK(!getsockname(l, (struct sockaddr *)ss, len), "getsockname");
	return l;
}

/* A socket connected to the listener at ss (of either family). */
static inline int tp_connect(const struct sockaddr_storage *ss, socklen_t len)
{
	int c = socket(ss->ss_family, SOCK_STREAM, 0);

	TP_CHECK(c >= 0, "socket");
	TP_CHECK(!connect(c, (const struct sockaddr *)ss, len), "connect");
	return c;
}

/* A connected loopback TCP pair: *c the connecting end, *s the accepted
 * one. family AF_INET or AF_INET6. */
static inline void tp_pair(int family, int *c, int *s)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l, one = 1;

	l = tp_listener(family, 16, &ss, &len);
	*c = tp_connect(&ss, len);
	*s = accept(l, NULL, NULL);
	TP_CHECK(*s >= 0, "accept");
	setsockopt(*c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	close(l);
}

/* A loopback listener made with raw system calls (never the switch's). */
static inline int tp_raw_listener(int family, int backlog,
				  struct sockaddr_storage *ss, socklen_t *len)
{
	long l;

	tp_loopback(family, ss, len);
	l = syscall(SYS_socket, family, SOCK_STREAM, 0);
	TP_CHECK(l >= 0, "raw socket");
	TP_CHECK(!syscall(SYS_bind, l, ss, *len), "raw bind");
	TP_CHECK(!syscall(SYS_listen, l, backlog), "raw listen");
	TP_CHECK(!syscall(SYS_getsockname, l, ss, len), "raw getsockname");
	return (int)l;
}

/* A socket connected with raw system calls. */
static inline int tp_raw_connect(const struct sockaddr_storage *ss,
				 socklen_t len)
{
	int c = (int)syscall(SYS_socket, ss->ss_family, SOCK_STREAM, 0);

	TP_CHECK(c >= 0, "raw socket");
	TP_CHECK(!syscall(SYS_connect, c, ss, len), "raw connect");
	return c;
}

/* A connected loopback TCP pair that the switch never sees, made with raw
 * system calls only (no libc socket call the preload could catch): the
 * reference a test compares a carried pair's answers with. *c is the
 * connecting end (TCP_NODELAY, as tp_pair's), *s the accepted one. */
static inline void tp_raw_pair(int family, int *c, int *s)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l, one = 1;

	l = tp_raw_listener(family, 4, &ss, &len);
	*c = tp_raw_connect(&ss, len);
	*s = (int)syscall(SYS_accept4, l, NULL, NULL, 0);
	TP_CHECK(*s >= 0, "raw accept");
	syscall(SYS_setsockopt, *c, IPPROTO_TCP, TCP_NODELAY, &one,
		sizeof(one));
	syscall(SYS_close, l);
}

/* Sends all n bytes at p (MSG_NOSIGNAL); on a non-blocking fd waits in
 * poll (10 s at most) whenever the socket is full. */
static inline void tp_write_all(int fd, const void *buf, size_t n)
{
	struct pollfd pf = { .fd = fd, .events = POLLOUT };
	const uint8_t *p = buf;
	ssize_t r;

	while (n) {
		r = send(fd, p, n, MSG_NOSIGNAL);
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			TP_CHECK(poll(&pf, 1, 10000) == 1,
				 "never writable again (10 s)");
			continue;
		}
		TP_CHECK(r > 0, "send of %zu bytes", n);
		p += r;
		n -= (size_t)r;
	}
}

static inline void tp_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	TP_CHECK(fl >= 0 && !fcntl(fd, F_SETFL, fl | O_NONBLOCK),
		 "fcntl O_NONBLOCK on fd %d", fd);
}

/* Forks a server: the child makes its own non-blocking loopback listener
 * (one inherited across fork is another test's subject), tells the parent
 * its address through a pipe and runs serve(l) as NAME. The parent gets the
 * address in *ss, *len and the child's pid. */
static inline pid_t tp_fork_server(int family, const char *name,
				   void (*serve)(int l),
				   struct sockaddr_storage *ss, socklen_t *len)
{
	int l, pp[2];
	pid_t pid;

	TP_CHECK(!pipe(pp), "pipe");
	pid = fork();
	TP_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		tp_name = name;
		close(pp[0]);
		l = tp_listener(family, 4, ss, len);
		tp_nonblock(l);
		TP_CHECK(write(pp[1], ss, sizeof(*ss)) == sizeof(*ss) &&
			 write(pp[1], len, sizeof(*len)) == sizeof(*len),
			 "write the address");
		close(pp[1]);
		serve(l);
		_exit(0);
	}
	close(pp[1]);
	TP_CHECK(read(pp[0], ss, sizeof(*ss)) == sizeof(*ss) &&
		 read(pp[0], len, sizeof(*len)) == sizeof(*len),
		 "the server's address");
	close(pp[0]);
	return pid;
}

/* A connection between this process (the server) and a child (the
 * client), one end sending: ready(fd), if given, runs on the sender's
 * socket before the connection exists (the listener when the server
 * sends, the client's socket before connect when the client does); then
 * send(fd) runs on the sender's end and recv(fd) on the other's. */
typedef void tp_fd_fn(int fd);
static inline void tp_sender_pair(int family, bool client_sends,
				  tp_fd_fn *ready, tp_fd_fn *send,
				  tp_fd_fn *recv)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int l, s, c;
	pid_t kid;

	l = tp_listener(family, 4, &ss, &len);
	if (!client_sends && ready)
		ready(l);
	kid = fork();
	TP_CHECK(kid >= 0, "fork");
	if (!kid) {
		close(l);
		c = socket(family, SOCK_STREAM, 0);
		TP_CHECK(c >= 0, "socket");
		if (client_sends && ready)
			ready(c);
		TP_CHECK(!connect(c, (struct sockaddr *)&ss, len), "connect");
		(client_sends ? send : recv)(c);
		close(c);
		_exit(0);
	}
	s = accept(l, NULL, NULL);
	TP_CHECK(s >= 0, "accept");
	close(l);
	(client_sends ? recv : send)(s);
	close(s);
	tp_reap(kid, client_sends ? "the sender failed" :
				    "the receiver failed");
}

/* Forks a client process, named NAME, that runs client(ss, len, family, i)
 * for i = 0 .. rounds - 1 against the listener l (which it closes) and
 * exits; returns its pid. */
static inline pid_t tp_fork_client(int l, const char *name, int rounds,
				   void (*client)(const struct sockaddr_storage *,
						  socklen_t, int, int),
				   const struct sockaddr_storage *ss,
				   socklen_t len, int family)
{
	pid_t pid = fork();
	int i;

	TP_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		tp_name = name;
		close(l);
		for (i = 0; i < rounds; i++)
			client(ss, len, family, i);
		_exit(0);
	}
	return pid;
}

static inline long tp_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether thread tid of this process sleeps ('S' in its stat). */
static inline bool tp_asleep(pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] == 'S';
}

/* Reads what a non-blocking fd has until EAGAIN, checking the bytes;
 * returns how many arrived. Waits up to 2 s for at least `least`. */
static inline size_t tp_drain(int fd, unsigned int id, size_t off,
			      size_t least)
{
	char buf[4096];
	size_t got = 0;
	long end = tp_ms() + 2000;
	ssize_t r;

	for (;;) {
		r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r > 0) {
			tp_verify(id, off + got, buf, (size_t)r);
			got += (size_t)r;
			continue;
		}
		TP_CHECK(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
			 "recv while draining fd %d (got %zd)", fd, r);
		if (got >= least || tp_ms() > end)
			return got;
		usleep(1000);
	}
}

/* Takes what FIONREAD says fd has, at once (MSG_DONTWAIT), checking the
 * bytes as stream id from off: the count must be the program's bytes,
 * all of them there now. Returns the count. */
static inline size_t tp_take_inq(int fd, unsigned int id, size_t off)
{
	char buf[8192];
	size_t got = 0;
	ssize_t r;
	int q = -1;

	TP_CHECK(!ioctl(fd, FIONREAD, &q) && q >= 0, "FIONREAD on fd %d",
		 fd);
	while (got < (size_t)q) {
		size_t k = (size_t)q - got < sizeof(buf) ?
				   (size_t)q - got : sizeof(buf);

		r = recv(fd, buf, k, MSG_DONTWAIT);
		TP_CHECK(r > 0, "FIONREAD said %d bytes, %zu were there (%zd)",
			 q, got, r);
		tp_verify(id, off + got, buf, (size_t)r);
		got += (size_t)r;
	}
	return got;
}

#endif /* TPROG_H */
