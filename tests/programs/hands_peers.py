#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# hands_peers.py - peers whose connections change hands: a
# socketserver.ForkingTCPServer echo server, a client that connects and
# then forks (the child talks, the parent closes its copy), and an echo
# server that hands each accepted socket to a worker process with
# SCM_RIGHTS, a server whose child steps into a seccomp sandbox as sshd's
# pre-auth child does, a client that reads only after poll, and a server
# that forks while its client writes, then shuts down. Each
# prints JSON lines with byte counts and SHA-256.
#   hands_peers.py fork-server PORT
#   hands_peers.py scm-server PORT
#   hands_peers.py fork-client PORT BYTES
#   hands_peers.py carried-fork-client PORT FIRST REST [fork|raw|raw-newpid|
#							   raw-clone3]
#   hands_peers.py scm-carried-server PORT FIRST
#   hands_peers.py sandbox-server PORT FIRST
#   hands_peers.py sandbox-self-server PORT FIRST
#   hands_peers.py poll-client PORT FIRST REST
#   hands_peers.py fork-sink-server PORT FIRST
#   hands_peers.py send-shut-client PORT FIRST REST
#   hands_peers.py exec-again-server PORT FIRST
#   hands_peers.py exec-self-server PORT FIRST
#   hands_peers.py exec-pending-server PORT
#   hands_peers.py stale-env-client PORT
#   hands_peers.py stdio-echo 0
#   hands_peers.py unix-worker PATH COUNT
#   hands_peers.py pass-acceptor PORT PATH FIRST COUNT
#   hands_peers.py idle-echo-client PORT IDLE_MS BYTES
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


def raw_fork(how):
	"""fork as vsftpd makes its session processes: clone ('raw', and
	'raw-newpid': the child is pid 1 of a pid namespace of its own) or
	clone3 ('raw-clone3') through the C library's syscall(), which runs
	no pthread_atfork handler."""
	import ctypes
	import platform
	import signal
	libc = ctypes.CDLL(None, use_errno=True)
	libc.syscall.restype = ctypes.c_long
	if how == 'raw-clone3':
		# struct clone_args: flags, pidfd, child_tid, parent_tid,
		# exit_signal, stack, stack_size, tls, set_tid,
		# set_tid_size, cgroup
		args = (ctypes.c_uint64 * 11)(0, 0, 0, 0, signal.SIGCHLD)
		pid = libc.syscall(ctypes.c_long(435), ctypes.byref(args),
				   ctypes.c_size_t(ctypes.sizeof(args)))
	else:
		nr = {'x86_64': 56, 'aarch64': 220}[platform.machine()]
		flags = signal.SIGCHLD | (0x20000000 if how == 'raw-newpid'
					  else 0)  # CLONE_NEWPID
		pid = libc.syscall(ctypes.c_long(nr), ctypes.c_long(flags),
				   ctypes.c_long(0), ctypes.c_long(0),
				   ctypes.c_long(0), ctypes.c_long(0))
	if pid < 0:
		raise OSError(ctypes.get_errno(), 'raw clone')
	return pid


def cmd_carried_fork_client(port, first, rest, how='fork'):
	"""Echoes first bytes through the connection (long enough for it to
	be carried), then forks (os.fork, or a raw clone: raw_fork): the
	parent closes its copy at once, the child echoes rest bytes more.
	The child prints the hashes of everything sent and received, and its
	pid as its parent knows it."""
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
	pid = os.fork() if how == 'fork' else raw_fork(how)
	if pid:
		s.close()
		_, st = os.waitpid(pid, 0)
		sys.exit(os.waitstatus_to_exitcode(st))
	kid = os.getpid() if how != 'raw-newpid' else None

	def sender():
		send(rest, 2)
		s.shutdown(socket.SHUT_WR)
	th = threading.Thread(target=sender)
	th.start()
	n, _ = drain(s.recv, rh.update)
	th.join()
	s.close()
	got += n
	out({'pid': kid, 'sent': sent[0], 'sha_sent': sh.hexdigest(),
	     'got': got, 'sha_got': rh.hexdigest(),
	     'ok': got == sent[0] and rh.hexdigest() == sh.hexdigest()})
	sys.stdout.flush()
	os._exit(0)


def cmd_scm_carried_server(port, first):
	"""The acceptor echoes the first bytes of each connection itself,
	then passes the socket to a worker process with SCM_RIGHTS and closes
	its copy; the worker echoes the rest."""
	scm_server(port, first)


def accept_echo(port, first):
	"""Accepts one connection and echoes its first bytes in 64 KiB round
	trips (the SAN carries them); returns the connection."""
	ls = socket.socket()
	ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
	ls.bind((HOST, port))
	ls.listen(1)
	c, _ = ls.accept()
	ls.close()
	read_exact(c, first, c.sendall)
	return c


def seccomp_sandbox():
	"""Enters a seccomp filter that kills the process on sendmsg, recvmsg
	and kill, as sshd's pre-auth sandbox does (its filter allows read,
	write and the calls Python's recv and sendall make)."""
	import ctypes
	import struct
	ld, jeq, ret = 0x20, 0x15, 0x06	# BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_RET
	insns = [(ld, 0, 0, 4),			# arch
		 (jeq, 0, 5, 0xc000003e),	# x86_64, else allow
		 (ld, 0, 0, 0),			# syscall number
		 (jeq, 3, 0, 46),		# sendmsg
		 (jeq, 2, 0, 47),		# recvmsg
		 (jeq, 1, 0, 62),		# kill
		 (ret, 0, 0, 0x7fff0000),	# SECCOMP_RET_ALLOW
		 (ret, 0, 0, 0x80000000)]	# SECCOMP_RET_KILL_PROCESS
	code = b''.join(struct.pack('HBBI', *i) for i in insns)
	buf = ctypes.create_string_buffer(code, len(code))
	prog = struct.pack('HxxxxxxP', len(insns), ctypes.addressof(buf))
	pbuf = ctypes.create_string_buffer(prog, len(prog))
	libc = ctypes.CDLL(None, use_errno=True)
	if libc.prctl(38, 1, 0, 0, 0) or \
	   libc.prctl(22, 2, ctypes.byref(pbuf), 0, 0):
		raise OSError(ctypes.get_errno(), 'seccomp filter refused')


def cmd_sandbox_server(port, first, fork=True):
	"""sshd -r in miniature: the process that accepted echoes the first
	bytes (the SAN carries them), lets the client's next bytes pile up
	on the SAN (sshd's client sends its KEXINIT unasked), then forks a
	child and waits for it holding its copy; the child, as sshd's
	pre-auth child, steps into a seccomp sandbox that kills it on the
	calls sshd's filter forbids (the switch returns its connections to
	TCP first, and keeps the bytes that came on the SAN for the child to
	read) and echoes the rest, writing while those bytes are still
	unread. One connection. Without fork the process that accepted steps
	into the sandbox itself."""
	import time
	c = accept_echo(port, first)
	time.sleep(0.3)
	pid = os.fork() if fork else 0
	if pid:
		_, st = os.waitpid(pid, 0)
		c.close()
		if st:
			sys.stderr.write('sandboxed child: wait status 0x%x\n'
					 % st)
		return
	seccomp_sandbox()
	n, sha = drain(lambda k: c.recv(min(k, 4096)), c.sendall)
	c.shutdown(socket.SHUT_WR)
	out({'pid': os.getpid(), 'echoed': n, 'sha': sha})
	sys.stdout.flush()
	c.close()
	os._exit(0)


def cmd_poll_client(port, first, rest):
	"""Echoes first bytes blocking (64 KiB round trips), then rest more with the socket
	non-blocking, each read made only after poll said POLLIN, as ssh's
	packet reader does: a read that then answers EAGAIN is counted
	(TCP never does that to a lone reader)."""
	import select
	s = socket.create_connection((HOST, port), timeout=60)
	sh, rh = hashlib.sha256(), hashlib.sha256()
	data = b''.join(chunks(first + rest, 3))
	sh.update(data)
	# in round trips, so that the upgrade is done before the fork
	got = 0
	while got < first:
		s.sendall(data[got:min(first, got + 65536)])
		got += len(read_exact(s, min(first, got + 65536) - got,
				      rh.update))
	s.setblocking(False)
	p = select.poll()
	p.register(s, select.POLLIN)
	sent, eagain, shut = first, 0, False
	while True:
		if sent < len(data):
			try:
				sent += s.send(data[sent:sent + 65536])
			except BlockingIOError:
				pass
		elif not shut:
			s.shutdown(socket.SHUT_WR)
			shut = True
		if not any(ev & select.POLLIN for _, ev in p.poll(10)):
			continue
		try:
			d = s.recv(1 << 16)
		except BlockingIOError:
			eagain += 1
			continue
		if not d:
			break
		rh.update(d)
		got += len(d)
	s.close()
	out({'pid': os.getpid(), 'sent': sent, 'got': got, 'eagain': eagain,
	     'ok': got == sent and rh.hexdigest() == sh.hexdigest()})


def sink_accept(port, first):
	"""accept_echo, then the client's next bytes pile up for half a
	second; returns the connection."""
	import time
	c = accept_echo(port, first)
	time.sleep(0.5)
	return c


def cmd_fork_sink_server(port, first):
	"""Echoes the first bytes of one connection in 64 KiB round trips
	(the SAN carries them), lets the client's next bytes pile up for
	half a second, then forks: the child reads to the end of the stream
	and answers its length and SHA-256 in one line, the parent closes
	its copy."""
	c = sink_accept(port, first)
	pid = os.fork()
	if pid:
		c.close()
		os.waitpid(pid, 0)
		return
	n, sha = drain(c.recv, lambda d: None)
	c.sendall(('%d %s\n' % (n, sha)).encode())
	c.close()
	os._exit(0)


def cmd_exec_sink_server(port, first):
	"""As fork-sink-server, but the server execs a new program on the
	connection instead of forking: bytes that came on the SAN before the
	exec and were not read must reach the new program."""
	c = sink_accept(port, first)
	os.set_inheritable(c.fileno(), True)
	os.execv(sys.executable, [sys.executable, __file__, 'exec-sink-reader',
				  '0', str(c.fileno())])


def cmd_exec_sink_reader(fd):
	"""The program exec'd: reads to the end of the stream, answers its
	length and SHA-256."""
	c = socket.socket(fileno=fd)
	n, sha = drain(c.recv, lambda d: None)
	c.sendall(('%d %s\n' % (n, sha)).encode())
	c.close()


def cmd_exec_again_server(port, first):
	"""Echoes the first bytes of one connection (the SAN carries them),
	then forks: the child execs a new program on the connection, which
	echoes the rest (exec-echo); the parent holds its copy until that
	program echoed its first MiB (told by a pipe), then closes it. Each
	prints what it echoed."""
	c = accept_echo_hashed(port, first)
	os.set_inheritable(c.fileno(), True)
	r, w = os.pipe()
	pid = os.fork()
	if pid == 0:
		os.close(r)
		os.set_inheritable(w, True)
		os.execv(sys.executable, [sys.executable, __file__, 'exec-echo',
					  '0', str(c.fileno()), str(w)])
	os.close(w)
	os.read(r, 1)
	c.close()
	os.waitpid(pid, 0)


def cmd_exec_self_server(port, first):
	"""Echoes the first bytes of one connection (the SAN carries them),
	then execs a new program on it with no fork (exec-echo echoes the
	rest): the process holds it alone across the exec."""
	c = accept_echo_hashed(port, first)
	os.set_inheritable(c.fileno(), True)
	os.execv(sys.executable, [sys.executable, __file__, 'exec-echo', '0',
				  str(c.fileno()), '-1'])


def cmd_exec_pending_server(port):
	"""Accepts one connection and at once forks a child that execs a new
	program on it (exec-echo, the socket on a number of its own, not a
	standard stream), before its first upgrade can be done; the parent
	closes its copy and waits."""
	ls = socket.socket()
	ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
	ls.bind((HOST, port))
	ls.listen(1)
	c, _ = ls.accept()
	ls.close()
	os.set_inheritable(c.fileno(), True)
	pid = os.fork()
	if pid == 0:
		os.execv(sys.executable, [sys.executable, __file__, 'exec-echo',
					  '0', str(c.fileno()), '-1'])
	c.close()
	os.waitpid(pid, 0)


def accept_echo_hashed(port, first):
	"""accept_echo, printing the length and SHA-256 of what it echoed."""
	ls = socket.socket()
	ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
	ls.bind((HOST, port))
	ls.listen(1)
	c, _ = ls.accept()
	ls.close()
	d = read_exact(c, first, c.sendall)
	out({'pid': os.getpid(), 'echoed': len(d),
	     'sha': hashlib.sha256(d).hexdigest()})
	sys.stdout.flush()
	return c


def cmd_exec_echo(fd, told):
	"""The program exec'd on a connection: echoes to the end of the
	stream, and writes a byte to the pipe told (unless -1) once it
	echoed 1 MiB."""
	c = socket.socket(fileno=fd)
	sha = hashlib.sha256()
	n = 0
	while True:
		d = c.recv(1 << 16)
		if not d:
			break
		c.sendall(d)
		sha.update(d)
		if told >= 0 and n < 1 << 20 <= n + len(d):
			os.write(told, b'x')
			os.close(told)
		n += len(d)
	sha = sha.hexdigest()
	c.shutdown(socket.SHUT_WR)
	out({'pid': os.getpid(), 'echoed': n, 'sha': sha})
	c.close()


# SDP_EXEC_HELLO_SKIP entries a stale or hostile environment may hold, each
# given to one exec of stale-env-client: (name, function of the socket's fd
# and inode returning the entry). The state's head is docs/protocol.md 2.8,
# "Across exec".
def exec_state(fd, ino, family=socket.AF_INET, map_len=None, flags=0,
	       state=1):
	"""A memory file with the head of an exec state (provider list empty,
	so never usable) and an empty buffer of this machine's layout (a
	40-byte pthread mutex, three size_t); returns (fd, inode)."""
	import struct
	buf_hdr = 40 + 3 * 8
	m = os.memfd_create('stale-state', 0)
	head = struct.pack('<IHHQQIIiiIIHHIQQ16s96s128sI128sIIIIIIQQQQQQ',
			   0x58504453, 1, 516, ino, 4096, buf_hdr, flags,
			   family, -1, 0, 0, 0, 0, 0, 0, 0, b'k' * 16, b'',
			   b'', 0, b'', state, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	buf = struct.pack('<40sQQQ', b'', 0, 0,
			  buf_hdr if map_len is None else map_len)
	os.write(m, head.ljust(4096, b'\0') + buf)
	os.set_inheritable(m, True)
	return m, os.fstat(m).st_ino


def junk_memfd(n):
	m = os.memfd_create('stale-junk', 0)
	os.write(m, os.urandom(n))
	os.set_inheritable(m, True)
	return m, os.fstat(m).st_ino


def stale_garbage(fd, ino):
	m, mi = junk_memfd(8192)
	return '%d:%d:r%d:%d' % (fd, ino, m, mi)


def stale_inode(fd, ino):
	m, mi = exec_state(fd, ino)
	return '%d:%d:r%d:%d' % (fd, ino, m, mi + 1)


def stale_fields(fd, ino):
	m, mi = exec_state(fd, ino, family=0)
	h = os.memfd_create('stale-record', 0)
	os.write(h, bytes(16384))
	os.set_inheritable(h, True)
	return '%d:%d:r%d:%d:%d:%d' % (fd, ino, m, mi, h,
				       os.fstat(h).st_ino)


def stale_buffer(fd, ino):
	m, mi = exec_state(fd, ino, map_len=1 << 40)
	return '%d:%d:r%d:%d' % (fd, ino, m, mi)


def stale_pending(fd, ino):
	m, mi = exec_state(fd, ino, flags=2, state=99)
	return '%d:%d:r%d:%d' % (fd, ino, m, mi)


def stale_providers(fd, ino):
	m, mi = exec_state(fd, ino)
	return '%d:%d:r%d:%d' % (fd, ino, m, mi)


STALE = [
	('garbage', stale_garbage),
	('inode', stale_inode),
	('fields', stale_fields),
	('buffer', stale_buffer),
	('providers', stale_providers),
	('pending', stale_pending),
	('cut-short', lambda fd, ino: '%d:%d:r' % (fd, ino)),
	('negative', lambda fd, ino: '%d:%d:r-1:5' % (fd, ino)),
	('record-negative', lambda fd, ino: '%d:%d:r5:6:-3:1' % (fd, ino)),
	('overflow', lambda fd, ino: '%d9999999999999999999999:%d:r1:1' %
	 (fd, ino)),
	('other-socket', lambda fd, ino: '%d:%d:r%d:%d' % ((fd, ino + 7) +
							   junk_memfd(4096))),
]


def stale_echo(s, n):
	"""n bytes echoed in 64 KiB round trips; returns True when exact."""
	ok = True
	left = n
	while left:
		d = os.urandom(min(left, 65536))
		s.sendall(d)
		ok = read_exact(s, len(d)) == d and ok
		left -= len(d)
	return ok


def cmd_stale_env_client(port, stage=0, fd=None, ok=True):
	"""Echoes 1 MiB, then execs itself with the next of STALE in
	SDP_EXEC_HELLO_SKIP (the switch has nothing of its own to say: no
	byte is left unread), the socket inheritable; the last image echoes
	1 MiB more and prints whether every echo was exact."""
	s = (socket.create_connection((HOST, port)) if fd is None else
	     socket.socket(fileno=fd))
	ok = stale_echo(s, 1 << 20) and ok
	if stage == len(STALE):
		out({'pid': os.getpid(), 'stages': stage, 'ok': ok})
		return
	os.set_inheritable(s.fileno(), True)
	os.environ['SDP_EXEC_HELLO_SKIP'] = STALE[stage][1](
		s.fileno(), os.fstat(s.fileno()).st_ino)
	sys.stdout.flush()
	os.execv(sys.executable, [sys.executable, __file__, 'stale-env-stage',
				  str(port), str(stage + 1), str(s.fileno()),
				  '1' if ok else '0'])


def cmd_stdio_echo():
	"""inetd's program: echoes its standard input (the connection, on fd
	0) to its standard output (the same connection, on fd 1)."""
	while True:
		d = os.read(0, 1 << 16)
		if not d:
			break
		while d:
			d = d[os.write(1, d):]


def cmd_send_shut_client(port, first, rest):
	"""Echoes first bytes in 64 KiB round trips, then sends rest bytes,
	shuts its sending side down without reading, and checks the
	server's answer (length and SHA-256 of the rest). Its socket is
	blocking (no timeout): the write waits in the switch for credits."""
	s = socket.create_connection((HOST, port))
	got = 0
	while got < first:
		n = min(first, got + 65536) - got
		s.sendall(b'x' * n)
		got += len(read_exact(s, n))
	data = b''.join(chunks(rest, 4))
	s.sendall(data)
	s.shutdown(socket.SHUT_WR)
	answer = read_exact(s, 1 << 10).decode(errors='replace').strip()
	want = '%d %s' % (rest, hashlib.sha256(data).hexdigest())
	out({'pid': os.getpid(), 'answer': answer, 'ok': answer == want})


def cmd_unix_worker(path, count):
	"""Listens on the UNIX socket PATH (any user may connect), takes
	COUNT sockets passed with SCM_RIGHTS over one connection and echoes
	each in a thread (echo_conn prints its count and hash)."""
	try:
		os.unlink(path)
	except FileNotFoundError:
		pass
	ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
	ls.bind(path)
	os.chmod(path, 0o777)
	ls.listen(1)
	out({'listening': path, 'uid': os.getuid()})
	u, _ = ls.accept()
	ths = []
	for _ in range(count):
		_, fds, _, _ = socket.recv_fds(u, 16, 1)
		c = socket.socket(fileno=fds[0])
		th = threading.Thread(target=echo_conn, args=(c,))
		th.start()
		ths.append(th)
	for th in ths:
		th.join()


def cmd_pass_acceptor(port, path, first, count):
	"""Connects to the worker's UNIX socket PATH, accepts COUNT
	connections on PORT, echoes the FIRST bytes of each itself (none:
	passed at once, its upgrade still pending), passes it to the worker
	with SCM_RIGHTS and closes its own copy."""
	u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
	u.connect(path)
	ls = socket.socket()
	ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
	ls.bind((HOST, port))
	ls.listen(16)
	for _ in range(count):
		c, _ = ls.accept()
		if first:
			d = read_exact(c, first, c.sendall)
			out({'pid': os.getpid(), 'echoed': len(d),
			     'sha': hashlib.sha256(d).hexdigest()})
		socket.send_fds(u, [b'c'], [c.fileno()])
		c.close()
	u.close()


def cmd_idle_echo_client(port, idle_ms, nbytes):
	"""Connects, does nothing for IDLE_MS (a server may hand the
	connection on meanwhile), then echoes nbytes through it."""
	import time
	s = socket.create_connection((HOST, port), timeout=60)
	time.sleep(idle_ms / 1000.0)
	sent, sha, got, rsha = echo_through(s, nbytes, 1)
	out({'sent': sent, 'sha_sent': sha, 'got': got, 'sha_got': rsha,
	     'ok': got == sent and rsha == sha})


def main():
	cmd = sys.argv[1]
	if cmd == 'unix-worker':
		return cmd_unix_worker(sys.argv[2], int(sys.argv[3]))
	port = int(sys.argv[2])
	if cmd == 'pass-acceptor':
		return cmd_pass_acceptor(port, sys.argv[3], int(sys.argv[4]),
					 int(sys.argv[5]))
	if cmd == 'idle-echo-client':
		return cmd_idle_echo_client(port, int(sys.argv[3]),
					    int(sys.argv[4]))
	if cmd == 'fork-server':
		cmd_fork_server(port)
	elif cmd == 'scm-server':
		cmd_scm_server(port)
	elif cmd == 'fork-client':
		cmd_fork_client(port, int(sys.argv[3]))
	elif cmd == 'carried-fork-client':
		cmd_carried_fork_client(port, int(sys.argv[3]),
					int(sys.argv[4]), *sys.argv[5:6])
	elif cmd == 'sandbox-server':
		cmd_sandbox_server(port, int(sys.argv[3]))
	elif cmd == 'sandbox-self-server':
		cmd_sandbox_server(port, int(sys.argv[3]), False)
	elif cmd == 'poll-client':
		cmd_poll_client(port, int(sys.argv[3]), int(sys.argv[4]))
	elif cmd == 'fork-sink-server':
		cmd_fork_sink_server(port, int(sys.argv[3]))
	elif cmd == 'exec-sink-server':
		cmd_exec_sink_server(port, int(sys.argv[3]))
	elif cmd == 'exec-sink-reader':
		cmd_exec_sink_reader(int(sys.argv[3]))
	elif cmd == 'exec-again-server':
		cmd_exec_again_server(port, int(sys.argv[3]))
	elif cmd == 'exec-self-server':
		cmd_exec_self_server(port, int(sys.argv[3]))
	elif cmd == 'exec-pending-server':
		cmd_exec_pending_server(port)
	elif cmd == 'exec-echo':
		cmd_exec_echo(int(sys.argv[3]), int(sys.argv[4]))
	elif cmd == 'stdio-echo':
		cmd_stdio_echo()
	elif cmd == 'stale-env-client':
		cmd_stale_env_client(port)
	elif cmd == 'stale-env-stage':
		cmd_stale_env_client(port, int(sys.argv[3]), int(sys.argv[4]),
				     sys.argv[5] == '1')
	elif cmd == 'send-shut-client':
		cmd_send_shut_client(port, int(sys.argv[3]), int(sys.argv[4]))
	elif cmd == 'scm-carried-server':
		cmd_scm_carried_server(port, int(sys.argv[3]))
	else:
		sys.exit('hands_peers.py: unknown command %r' % cmd)


if __name__ == '__main__':
	main()
