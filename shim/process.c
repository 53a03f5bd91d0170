/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * process.c - exec wrappers: before a new program replaces this one, the
 * switch returns every SAN connection to plain TCP so the new program
 * inherits ordinary TCP fds. fork is followed through pthread_atfork
 * (shim/preload.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#include "shim.h"

extern char **environ;

static void shim_before_exec(void)
{
	if (!shim_on())
		return;
	shim_enter();
	sw_before_exec();
	shim_leave();
}

SHIM_EXPORT int execve(const char *path, char *const argv[],
		       char *const envp[])
{
	shim_before_exec();
	return REAL(execve)(path, argv, envp);
}

SHIM_EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

SHIM_EXPORT int execvp(const char *file, char *const argv[])
{
	shim_before_exec();
	return REAL(execvp)(file, argv);
}

SHIM_EXPORT int execvpe(const char *file, char *const argv[],
			char *const envp[])
{
	shim_before_exec();
	return REAL(execvpe)(file, argv, envp);
}

SHIM_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	shim_before_exec();
	return REAL(fexecve)(fd, argv, envp);
}

/* The execl family: gathers the variadic arguments into an argv on the
 * stack (bounded like the kernel's argument count) and calls the vector
 * form. */
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
		return 0;
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
	if (n < 0)
		return -1;
	argv[n] = NULL;
	return execve(path, argv, environ);
}

SHIM_EXPORT int execlp(const char *file, const char *arg, ...)
{
	char *argv[SHIM_EXECL_MAX + 1];
	va_list ap;
	int n;

	va_start(ap, arg);
	n = shim_collect(arg, ap, argv);
	va_end(ap);
	if (n < 0)
		return -1;
	argv[n] = NULL;
	return execvp(file, argv);
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
	if (n < 0)
		return -1;
	argv[n] = NULL;
	return execve(path, argv, envp);
}
