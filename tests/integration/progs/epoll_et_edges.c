/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * epoll_et_edges.c - edge-triggered epoll on the two ends of a connection
 * reports what the kernel reports for a plain TCP pair, wait by wait: the
 * same steps run on a pair the switch never sees (raw system calls, epoll
 * included) and on a preloaded pair, right after connect (while the
 * upgrade runs underneath) and once carried. EPOLLOUT once after
 * registration, then nothing while nothing changes; bytes arriving report
 * EPOLLIN (and, as the kernel's wake-up of the socket does, EPOLLOUT with
 * it); after the bytes are read, nothing again.
 */
#include <sys/epoll.h>
#include <sys/syscall.h>
#include "tp_stats.h"

#define EE_WAIT_MS 150

struct ee_pair {
	int fd[2];
	int ep;
	bool raw;
};

static void ee_add(struct ee_pair *p)
{
	struct epoll_event ev;
	int i;

	p->ep = p->raw ? (int)syscall(SYS_epoll_create1, EPOLL_CLOEXEC) :
			 epoll_create1(EPOLL_CLOEXEC);
	TP_CHECK(p->ep >= 0, "epoll_create1");
	for (i = 0; i < 2; i++) {
		ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
		ev.data.u32 = (uint32_t)i;
		TP_CHECK(!(p->raw ? syscall(SYS_epoll_ctl, p->ep, EPOLL_CTL_ADD,
					    p->fd[i], &ev) :
				    epoll_ctl(p->ep, EPOLL_CTL_ADD, p->fd[i],
					      &ev)),
			 "epoll_ctl");
	}
}

/* One wait: the events of each end (0: not reported). */
static void ee_wait(struct ee_pair *p, uint32_t got[2])
{
	struct epoll_event out[4];
	int n, i;

	got[0] = got[1] = 0;
	n = p->raw ? (int)syscall(SYS_epoll_pwait, p->ep, out, 4, EE_WAIT_MS,
				  NULL, 8) :
		     epoll_wait(p->ep, out, 4, EE_WAIT_MS);
	TP_CHECK(n >= 0, "epoll_wait: %s", strerror(errno));
	for (i = 0; i < n; i++) {
		TP_CHECK(out[i].data.u32 < 2, "unknown event");
		TP_CHECK(!got[out[i].data.u32], "an end reported twice");
		got[out[i].data.u32] = out[i].events;
	}
}

static void ee_same(const char *step, struct ee_pair *k, struct ee_pair *c)
{
	uint32_t gk[2], gc[2];

	ee_wait(k, gk);
	ee_wait(c, gc);
	TP_CHECK(gk[0] == gc[0] && gk[1] == gc[1],
		 "%s: reported 0x%x (client) 0x%x (server); the kernel reports "
		 "0x%x 0x%x", step, gc[0], gc[1], gk[0], gk[1]);
}

static void ee_steps(const char *when, struct ee_pair *k, struct ee_pair *c)
{
	char step[160], b[100];
	int i;

	ee_add(k);
	ee_add(c);
	snprintf(step, sizeof(step), "%s: first wait", when);
	ee_same(step, k, c);
	for (i = 0; i < 3; i++) {
		snprintf(step, sizeof(step), "%s: wait %d, nothing changed",
			 when, i + 2);
		ee_same(step, k, c);
	}
	/* bytes from the client: the server's end reports */
	tp_fill(3, 0, b, sizeof(b));
	TP_CHECK(send(k->fd[0], b, sizeof(b), 0) == sizeof(b) &&
		 send(c->fd[0], b, sizeof(b), 0) == sizeof(b), "send");
	usleep(20 * 1000);
	snprintf(step, sizeof(step), "%s: after 100 bytes", when);
	ee_same(step, k, c);
	tp_recv(k->fd[1], 3, 0, sizeof(b));
	tp_recv(c->fd[1], 3, 0, sizeof(b));
	snprintf(step, sizeof(step), "%s: after they were read", when);
	ee_same(step, k, c);
	snprintf(step, sizeof(step), "%s: and again", when);
	ee_same(step, k, c);
	close(k->ep);
	close(c->ep);
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	struct ee_pair k = { .raw = true }, c = { .raw = false };
	int round;

	tp_start("epoll_et_edges", 60);
	for (round = 0; round < 3; round++) {
		tp_raw_pair(family, &k.fd[0], &k.fd[1]);
		tp_pair(family, &c.fd[0], &c.fd[1]);
		/* at once: the upgrade runs underneath */
		ee_steps("right after connect", &k, &c);
		tp_carry_both(c.fd[0], c.fd[1]);
		ee_steps("carried", &k, &c);
		close(k.fd[0]);
		close(k.fd[1]);
		close(c.fd[0]);
		close(c.fd[1]);
	}
	tp_pass();
	return 0;
}
