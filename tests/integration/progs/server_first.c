/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * server_first.c - protocols where the server speaks first (a banner, as
 * SMTP, FTP or SSH send): the server writes right after accept, while the
 * client's switch has sent no hello yet (it goes with the client's first
 * read or write) and may not even have its provider listener up. Whether
 * the connection is then upgraded or stays on TCP, no byte of the switch's
 * may reach either program: every byte both ways is checked, over many
 * connections, some with the server forking a child to answer right after
 * accept (inetd's way) and some where the client writes first after all.
 * Run under LD_PRELOAD of the switch.
 */
#include <sys/wait.h>
#include "tprog.h"

#define SF_CONNS 40
#define SF_BANNER 200
#define SF_REQ 3000
#define SF_ANSWER 70000

static void sf_serve(int s, int i)
{
	tp_send(s, 1 + 4 * i, 0, SF_BANNER);
	tp_recv(s, 2 + 4 * i, 0, SF_REQ);
	tp_send(s, 3 + 4 * i, 0, SF_ANSWER);
	tp_recv(s, 4 + 4 * i, 0, SF_REQ);
}

static void sf_server(int l)
{
	int i;

	for (i = 0; i < SF_CONNS; i++) {
		int s = accept(l, NULL, NULL);
		pid_t kid;

		TP_CHECK(s >= 0, "accept");
		if (i % 3) {
			sf_serve(s, i);
			close(s);
			continue;
		}
		/* the child answers; the parent lets go at once */
		kid = fork();
		TP_CHECK(kid >= 0, "fork");
		if (!kid) {
			tp_name = "server_first (server child)";
			sf_serve(s, i);
			close(s);
			_exit(0);
		}
		close(s);
		tp_reap(kid, "connection %d: the server's child failed", i);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	int family = argc > 1 ? AF_INET6 : AF_INET;
	socklen_t len = sizeof(ss);
	int l, i;
	pid_t srv;

	tp_start("server_first", 50);
	l = tp_listener(family, 64, &ss, &len);
	srv = fork();
	TP_CHECK(srv >= 0, "fork");
	if (!srv) {
		tp_name = "server_first (server)";
		sf_server(l);
		_exit(0);
	}
	close(l);
	for (i = 0; i < SF_CONNS; i++) {
		int c = tp_connect(&ss, len);

		if (i % 4 == 3) {
			/* the client's request goes before it reads: its
			 * hello with it, while the server writes its banner */
			tp_send(c, 2 + 4 * i, 0, SF_REQ);
			tp_recv(c, 1 + 4 * i, 0, SF_BANNER);
		} else {
			if (i % 2)
				usleep(2000);	/* the banner waits for us */
			tp_recv(c, 1 + 4 * i, 0, SF_BANNER);
			tp_send(c, 2 + 4 * i, 0, SF_REQ);
		}
		tp_recv(c, 3 + 4 * i, 0, SF_ANSWER);
		tp_send(c, 4 + 4 * i, 0, SF_REQ);
		close(c);
	}
	tp_reap(srv, "the server failed");
	tp_pass();
}
