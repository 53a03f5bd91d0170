/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * seccomp_exit.c - sshd's pre-auth child: a forked process that holds a
 * connection enters a seccomp sandbox whose filter kills it for unlink (as
 * for any call it does not list), works, and exits normally. The switch's
 * exit handlers must not make it die by SIGSYS.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "tprog.h"

static void sandbox(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_unlink, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_unlinkat, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL),
	};
	struct sock_fprog prog = {
		.len = sizeof(f) / sizeof(f[0]),
		.filter = f,
	};

	TP_CHECK(!prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs");
	TP_CHECK(!prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog),
		 "PR_SET_SECCOMP");
}

int main(int argc, char **argv)
{
	int family = argc > 1 ? AF_INET6 : AF_INET;
	int c, s, st;
	pid_t ch;

	tp_start("seccomp_exit", 30);
	tp_pair(family, &c, &s);
	tp_send(c, 1, 0, 1000);
	ch = fork();
	TP_CHECK(ch >= 0, "fork");
	if (ch == 0) {
		tp_name = "seccomp_exit (sandboxed child)";
		close(c);
		sandbox();
		tp_recv(s, 1, 0, 1000);
		tp_send(s, 2, 0, 1000);
		exit(0);	/* atexit handlers run */
	}
	close(s);
	TP_CHECK(waitpid(ch, &st, 0) == ch, "waitpid");
	TP_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		 "the sandboxed child did not exit normally (status 0x%x%s)",
		 st, WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS ?
		 ": killed by SIGSYS" : "");
	tp_recv(c, 2, 0, 1000);
	close(c);
	tp_pass();
}
