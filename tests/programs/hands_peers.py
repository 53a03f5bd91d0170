#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# hands_peers.py - peers whose connections change hands: a
# socketserver.ForkingTCPServer echo server, a client that connects and
# then forks (the child talks, the parent closes its copy), and an echo
# server that hands each accepted socket to a worker process with
# SCM_RIGHTS. Each prints JSON lines with byte counts and SHA-256.
#   hands_peers.py fork-server PORT
#   hands_peers.py scm-server PORT
#   hands_peers.py fork-client PORT BYTES
#   hands_peers.py carried-fork-client PORT FIRST REST
#   hands_peers.py scm-carried-server PORT FIRST
import hashlib
import os
import socket
import socketserver
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import (HOST, chunks, drain, echo_conn,  # noqa: E402
		   echo_through, out)


class EchoHandler(socketserver.BaseRequestHandler):
	def handle(self):
		c = self.request
		n, sha = drain(c.recv, c.sendall)
		c.shutdown(socket.SHUT_WR)
		out({'pid': os.getpid(), 'echoed': n, 'sha': sha})


class ForkingEcho(socketserver.ForkingTCPServer):
	allow_reuse_address = True


def cmd_fork_server(port):
	with ForkingEcho((HOST, port), EchoHandler) as srv:
		srv.serve_forever()


def scm_server(port, first=None):
	"""The acceptor passes each connection to one worker process over a
	unix socket (SCM_RIGHTS) and closes its own copy; the worker echoes.
	With first, the acceptor echoes that many bytes itself before it
	passes the socket on."""
	a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
	pid = os.fork()
	if pid == 0:
		a.close()
		while True:
			msg, fds, _, _ = socket.recv_fds(b, 16, 1)
			if not msg:
				os._exit(0)
			c = socket.socket(fileno=fds[0])
			threading.Thread(target=echo_conn, args=(c,),
					 daemon=True).start()
	b.close()
	ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
	ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
	ls.bind((HOST, port))
	ls.listen(16)
	while True:
		c, _ = ls.accept()
		if first is not None:
			d = read_exact(c, first, c.sendall)
			out({'pid': os.getpid(), 'echoed': len(d),
			     'sha': hashlib.sha256(d).hexdigest()})
		socket.send_fds(a, [b'c'], [c.fileno()])
		c.close()


def cmd_scm_server(port):
	scm_server(port)


def cmd_fork_client(port, nbytes):
	"""Connects, forks: the child sends nbytes and reads the echo; the
	parent closes its copy at once and waits for the child."""
	s = socket.create_connection((HOST, port), timeout=60)
	pid = os.fork()
	if pid:
		s.close()
		_, st = os.waitpid(pid, 0)
		sys.exit(os.waitstatus_to_exitcode(st))
	sent, sha, got, rsha = echo_through(s, nbytes, 1)
	out({'pid': os.getpid(), 'sent': sent, 'sha_sent': sha,
	     'got': got, 'sha_got': rsha, 'ok': got == sent and rsha == sha})
	sys.stdout.flush()
	os._exit(0)


def read_exact(s, n, each=None):
	"""Reads exactly n bytes of s (fewer only at EOF); returns them."""
	got = []
	left = n
	while left:
		d = s.recv(min(left, 1 << 20))
		if not d:
			break
		got.append(d)
		left -= len(d)
		if each:
			each(d)
	return b''.join(got)


def cmd_carried_fork_client(port, first, rest):
	"""Echoes first bytes through the connection (long enough for it to
	be carried), then forks: the parent closes its copy at once, the
	child echoes rest bytes more. The child prints the hashes of
	everything sent and received."""
	s = socket.create_connection((HOST, port), timeout=60)
	sh, rh = hashlib.sha256(), hashlib.sha256()
	sent = [0]

	def send(n, seed):
		for d in chunks(n, seed):
			sh.update(d)
			s.sendall(d)
			sent[0] += len(d)
	th = threading.Thread(target=send, args=(first, 1))
	th.start()
	got = len(read_exact(s, first, rh.update))
	th.join()
	pid = os.fork()
	if pid:
		s.close()
		_, st = os.waitpid(pid, 0)
		sys.exit(os.waitstatus_to_exitcode(st))

	def sender():
		send(rest, 2)
		s.shutdown(socket.SHUT_WR)
	th = threading.Thread(target=sender)
	th.start()
	n, _ = drain(s.recv, rh.update)
	th.join()
	s.close()
	got += n
	out({'pid': os.getpid(), 'sent': sent[0], 'sha_sent': sh.hexdigest(),
	     'got': got, 'sha_got': rh.hexdigest(),
	     'ok': got == sent[0] and rh.hexdigest() == sh.hexdigest()})
	sys.stdout.flush()
	os._exit(0)


def cmd_scm_carried_server(port, first):
	"""The acceptor echoes the first bytes of each connection itself,
	then passes the socket to a worker process with SCM_RIGHTS and closes
	its copy; the worker echoes the rest."""
	scm_server(port, first)


def main():
	cmd, port = sys.argv[1], int(sys.argv[2])
	if cmd == 'fork-server':
		cmd_fork_server(port)
	elif cmd == 'scm-server':
		cmd_scm_server(port)
	elif cmd == 'fork-client':
		cmd_fork_client(port, int(sys.argv[3]))
	elif cmd == 'carried-fork-client':
		cmd_carried_fork_client(port, int(sys.argv[3]),
					int(sys.argv[4]))
	elif cmd == 'scm-carried-server':
		cmd_scm_carried_server(port, int(sys.argv[3]))
	else:
		sys.exit('hands_peers.py: unknown command %r' % cmd)


if __name__ == '__main__':
	main()
