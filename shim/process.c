/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * process.c - exec wrappers: before a new program replaces this one, the
 * switch returns every SAN connection to plain TCP so the new program
 * inherits ordinary TCP fds. fork is followed through pthread_atfork
 * (shim/preload.c).
 */
#include <errno.h>
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"
#include "fdtable.h"

extern char **environ;

/* Returns NULL, or the environment entry for the new program's switch
 * (sw_before_exec), which the caller frees. */
static char *shim_before_exec(void)
{
	char *e;

	if (!shim_on())
		return NULL;
	shim_enter();
	e = sw_before_exec();
	shim_leave();
	return e;
}

/* The exec did not happen: what went to the new program is the switch's. */
static void shim_exec_failed(void)
{
	shim_enter();
	sw_exec_failed();
	shim_leave();
}

/* envp with entry added (an older one of the same name left out), or NULL
 * without memory; the caller frees the array (not the strings). */
static char **env_with(char *const envp[], char *entry)
{
	size_t n = 0, k = 0, nlen = strchr(entry, '=') - entry + 1;
	char **v;

	while (envp && envp[n])
		n++;
	v = malloc((n + 2) * sizeof(*v));
	if (!v)
		return NULL;
	for (n = 0; envp && envp[n]; n++)
		if (strncmp(envp[n], entry, nlen))
			v[k++] = envp[n];
	v[k++] = entry;
	v[k] = NULL;
	return v;
}

/* The exec calls below: with the entry, if any, in the environment of the
 * new program; the entry is freed when exec fails. */
#define EXEC_WITH_ENV(envp, call_env, call_plain) do {			\
	char *e_ = shim_before_exec(), **v_;				\
	int r_, saved_;							\
									\
	if (!e_)							\
		return call_plain;					\
	v_ = env_with(envp, e_);					\
	r_ = v_ ? call_env(v_) : call_plain;				\
	saved_ = errno;							\
	free(v_);							\
	free(e_);							\
	shim_exec_failed();						\
	errno = saved_;							\
	return r_;							\
} while (0)

SHIM_EXPORT int execve(const char *path, char *const argv[],
		       char *const envp[])
{
#define CALL_ENV(v) REAL(execve)(path, argv, v)
	EXEC_WITH_ENV(envp, CALL_ENV, REAL(execve)(path, argv, envp));
#undef CALL_ENV
}

SHIM_EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

SHIM_EXPORT int execvp(const char *file, char *const argv[])
{
#define CALL_ENV(v) REAL(execvpe)(file, argv, v)
	EXEC_WITH_ENV(environ, CALL_ENV, REAL(execvp)(file, argv));
#undef CALL_ENV
}

SHIM_EXPORT int execvpe(const char *file, char *const argv[],
			char *const envp[])
{
#define CALL_ENV(v) REAL(execvpe)(file, argv, v)
	EXEC_WITH_ENV(envp, CALL_ENV, REAL(execvpe)(file, argv, envp));
#undef CALL_ENV
}

SHIM_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
#define CALL_ENV(v) REAL(fexecve)(fd, argv, v)
	EXEC_WITH_ENV(envp, CALL_ENV, REAL(fexecve)(fd, argv, envp));
#undef CALL_ENV
}

/*
 * After exec: the sockets the previous program's switch named in
 * SW_EXEC_ENV (FD:INO:GOT,...) still have their peer's hello to drop.
 * A socket is known by its inode, not by the fd the entry names: the old
 * program may have put it on other numbers too (sshd dup2s it onto 0 and
 * 1 before it re-execs itself, then reads a dup of 0 and puts /dev/null
 * on 0 and 1), and the named fd may have been close-on-exec. So every
 * inherited fd that names such a socket is managed here, all as one
 * socket that drops the hello (sw_sock_inherit), whichever fd or dup the
 * program reads it through. The entry is removed from the environment:
 * it is about this process's fds only.
 */
#define INHERIT_MAX 64
#define INHERIT_SCAN_NO_PROC 1024

struct inherit {
	unsigned long long ino;
	size_t got;
	int mfd;			/* bytes to read first, or -1 */
	unsigned long long mino;	/* mfd's inode */
	bool reup;			/* mfd also holds what an upgrade
					 * again needs */
	int hfd;			/* its holders' record, or -1 */
	unsigned long long hino;	/* hfd's inode */
	bool tried;
	struct sw_sock *s;
};

static void inherit_fd(int fd, struct inherit *v, int n)
{
	struct stat sb;
	int i;

	if (fstat(fd, &sb) || !S_ISSOCK(sb.st_mode))
		return;
	for (i = 0; i < n; i++) {
		struct sw_sock *s = v[i].s;

		if (v[i].ino != (unsigned long long)sb.st_ino)
			continue;
		if (!s) {
			if (v[i].tried)
				return;
			v[i].tried = true;
			if (v[i].reup)
				s = sw_sock_inherit_reup(fd, v[i].ino, v[i].mfd,
							 v[i].mino, v[i].hfd,
							 v[i].hino);
			else if (v[i].mfd >= 0)
				s = sw_sock_inherit_bytes(fd, v[i].ino,
							  v[i].mfd, v[i].mino);
			else
				s = sw_sock_inherit(fd, v[i].ino, v[i].got);
			if (!s)
				return;
			v[i].s = s;
		} else {
			sw_sock_ref(s);
		}
		if (fdt_install(fd, s))
			sw_sock_unref(s);
		return;
	}
}

void shim_inherit(void)
{
	const char *p = getenv(SW_EXEC_ENV);
	struct inherit v[INHERIT_MAX];
	struct dirent *de;
	int n = 0, fd;
	DIR *d;

	while (p && *p && n < INHERIT_MAX) {
		unsigned long long ino, mino = 0, hino = 0;
		int used = 0, mfd = -1, hfd = -1;
		bool reup = false;
		size_t got = 0;

		if (sscanf(p, "%d:%llu:%n", &fd, &ino, &used) != 2 || !used)
			break;
		p += used;
		used = 0;
		if (*p == 'b' || *p == 'r') {
			reup = *p == 'r';
			if (sscanf(p + 1, "%d:%llu%n", &mfd, &mino, &used) != 2 ||
			    !used || mfd < 0)
				break;
			p += 1 + used;
			used = 0;
			/* r: its holders' record may follow */
			if (reup && *p == ':' &&
			    (sscanf(p, ":%d:%llu%n", &hfd, &hino, &used) != 2 ||
			     !used || hfd < 0))
				break;
		} else if (sscanf(p, "%zu%n", &got, &used) != 1 || !used) {
			break;
		}
		p += used;
		if (*p == ',')
			p++;
		v[n].ino = ino;
		v[n].got = got;
		v[n].mfd = mfd;
		v[n].mino = mino;
		v[n].reup = reup;
		v[n].hfd = hfd;
		v[n].hino = hino;
		v[n].tried = false;
		v[n].s = NULL;
		n++;
	}
	unsetenv(SW_EXEC_ENV);
	if (!n)
		return;
	shim_enter();
	d = opendir("/proc/self/fd");
	if (d) {
		while ((de = readdir(d))) {
			char *end;
			long l = strtol(de->d_name, &end, 10);

			if (*end || end == de->d_name || l < 0 ||
			    l > INT_MAX || (int)l == dirfd(d))
				continue;
			inherit_fd((int)l, v, n);
		}
		closedir(d);
	} else {
		/* no /proc: the low numbers, where inherited fds are */
		for (fd = 0; fd < INHERIT_SCAN_NO_PROC; fd++)
			inherit_fd(fd, v, n);
	}
	/* the memory files of bytes to read first are mapped now (or of no
	 * use): closed, once they are surely what the entry named; a
	 * holders' record of a socket no fd here names is left */
	for (fd = 0; fd < n; fd++) {
		struct stat mb;

		if (v[fd].hfd >= 0 && !v[fd].tried)
			sw_exec_record_left(v[fd].hfd, v[fd].hino);

		if (v[fd].mfd >= 0 && !fstat(v[fd].mfd, &mb) &&
		    S_ISREG(mb.st_mode) && mb.st_ino == v[fd].mino)
			REAL(close)(v[fd].mfd);
	}
	shim_leave();
}

/* The fds of msg's SCM_RIGHTS messages, each passed to fn, with via (the
 * UNIX socket they go through). */
static void scm_fds(const struct msghdr *msg, int via,
		    void (*fn)(int fd, int via))
{
	struct cmsghdr *c;

	if (!msg || !msg->msg_control || !msg->msg_controllen)
		return;
	for (c = CMSG_FIRSTHDR((struct msghdr *)msg); c;
	     c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
		size_t i, n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			fn(fd, via);
		}
	}
}

static void fd_sending(int fd, int via)
{
	struct sw_sock *s = fdt_get(fd);

	if (!s)
		return;
	shim_enter();
	sw_pass(s, via);
	sw_sock_unref(s);
	shim_leave();
}

static void fd_received(int fd, int via)
{
	(void)via;
	struct sw_sock *s = fdt_get(fd);

	if (s) {
		shim_unref(s);
		return;
	}
	if (!shim_tcp_family(fd))
		return;
	shim_enter();
	s = sw_received(fd);
	if (s && fdt_install(fd, s))
		sw_sock_unref(s);
	shim_leave();
}

/*
 * SCM_RIGHTS: a managed socket sent to another process keeps its pending
 * upgrade for the receiver (which drives it once it holds the connection
 * alone); a socket received that the sender's switch kept so is managed
 * from here on (switch/holders.c).
 */
void shim_fds_sending(int via, const struct msghdr *msg)
{
	if (shim_on())
		scm_fds(msg, via, fd_sending);
}

void shim_fds_received(const struct msghdr *msg)
{
	if (shim_on())
		scm_fds(msg, -1, fd_received);
}

/* The execl family: gathers the variadic arguments into an argv on the
 * stack (bounded like the kernel's argument count), NULL-terminated, and
 * calls the vector form. */
#define SHIM_EXECL_MAX 4096

static int shim_collect(const char *arg0, va_list ap, char **argv)
{
	int n = 0;

	argv[n++] = (char *)arg0;
	while (arg0 && n < SHIM_EXECL_MAX) {
		argv[n] = va_arg(ap, char *);
		if (!argv[n])
			return n;
		n++;
	}
	if (!arg0)
		return 0;	/* argv[0] is the NULL */
	errno = E2BIG;
	return -1;
}

SHIM_EXPORT int execl(const char *path, const char *arg, ...)
{
	char *argv[SHIM_EXECL_MAX + 1];
	va_list ap;
	int n;

	va_start(ap, arg);
	n = shim_collect(arg, ap, argv);
	va_end(ap);
	return n < 0 ? -1 : execve(path, argv, environ);
}

SHIM_EXPORT int execlp(const char *file, const char *arg, ...)
{
	char *argv[SHIM_EXECL_MAX + 1];
	va_list ap;
	int n;

	va_start(ap, arg);
	n = shim_collect(arg, ap, argv);
	va_end(ap);
	return n < 0 ? -1 : execvp(file, argv);
}

SHIM_EXPORT int execle(const char *path, const char *arg, ...)
{
	char *argv[SHIM_EXECL_MAX + 1];
	char **envp;
	va_list ap;
	int n;

	va_start(ap, arg);
	n = shim_collect(arg, ap, argv);
	envp = n >= 0 ? va_arg(ap, char **) : NULL;
	va_end(ap);
	return n < 0 ? -1 : execve(path, argv, envp);
}

/*
 * prctl: a program that puts itself in a seccomp sandbox (sshd's pre-auth
 * child) may be killed for any system call its filter does not list. So,
 * before the filter is in place, its connections return to plain TCP and
 * the switch lets go of every socket it is done with (sw_before_sandbox,
 * shim_let_go_all): the program's read and write reach the kernel as
 * they are. After, the switch is told, and leaves out at exit what such a
 * filter would not allow (sw_sandboxed).
 */
SHIM_EXPORT int prctl(int option, ...)
{
	unsigned long a2, a3, a4, a5;
	va_list ap;
	int r;

	va_start(ap, option);
	a2 = va_arg(ap, unsigned long);
	a3 = va_arg(ap, unsigned long);
	a4 = va_arg(ap, unsigned long);
	a5 = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_SECCOMP && shim_on()) {
		int saved = errno;

		shim_enter();
		sw_before_sandbox();
		shim_leave();
		shim_let_go_all();
		errno = saved;
	}
	r = REAL(prctl)(option, a2, a3, a4, a5);
	if (option == PR_SET_SECCOMP && !r && shim_on())
		sw_sandboxed();
	return r;
}

/*
 * _exit skips the exit handlers, and with them the switch's wait for the
 * bytes it still keeps (kept for credits, a sendfile's lend, connections
 * closed just before): a forked child that writes its answer, closes and
 * calls _exit (Python's ForkingTCPServer, a prefork worker) would end its
 * stream short, where TCP's kernel sends the rest after the process. They
 * go first, as at exit. _Exit is the same function.
 */
SHIM_EXPORT void _exit(int status)
{
	if (shim_on()) {
		shim_enter();
		sw_before_exit();
		shim_leave();
	}
	REAL(_exit)(status);
	for (;;)
		;
}

SHIM_EXPORT void _Exit(int status)
{
	_exit(status);
}

/*
 * vfork(2) runs the child in the parent's memory until it execs or exits,
 * so what the child's calls change in the switch's tables changes them for
 * the parent: a child that closes the descriptors it inherited before its
 * exec (Python's subprocess does, with close_fds) took the parent's
 * listeners out of the fd table, and the parent then accepted connections
 * the switch never saw, whose hello the program read. The child is made
 * with fork instead, which POSIX allows vfork to be: it gets memory of its
 * own, the fork handlers run, and its closes and its exec are those of any
 * forked child. A vfork cannot be wrapped by a function that returns in
 * both processes, which is the other reason for fork. The cost is the copy
 * of the page tables, which vfork saves.
 */
SHIM_EXPORT pid_t vfork(void)
{
	return fork();
}

pid_t __vfork(void);

SHIM_EXPORT pid_t __vfork(void)
{
	return fork();
}
