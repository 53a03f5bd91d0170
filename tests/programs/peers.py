#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# peers.py - small Python peers for the program tests: echo servers (threads,
# asyncio, pre-fork), an echo client, a sender and a sink. Each prints JSON
# lines with byte counts and SHA-256 of what it sent and received.
#   peers.py echo-server PORT --mode threads|asyncio|prefork [--workers N]
#   peers.py echo-client PORT --conns K --bytes B --mode threads|asyncio
#   peers.py send PORT BYTES [--forever]      peers.py sink PORT [--send B]
#   peers.py side BYTES SEED RESULT   (stdin/stdout are the stream: socat)
#   peers.py stop-idle PORT PID --proto http|line   (SIGTERM to an idle server)
import argparse
import asyncio
import errno
import hashlib
import http.client
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

HOST = '127.0.0.1'
CHUNK = 65536


def out(obj):
	sys.stdout.write(json.dumps(obj) + '\n')
	sys.stdout.flush()


def chunks(nbytes, seed):
	"""Pseudo-random data in pieces of varying size (1 B .. 256 KiB)."""
	rnd = random.Random(seed)
	left = nbytes
	while left > 0:
		n = min(left, rnd.choice((1, 7, 100, 1500, 4096, 65536, 262144,
					  rnd.randint(1, 262144))))
		yield rnd.randbytes(n)
		left -= n


def drain(read, each=None):
	"""Reads with READ until it returns no bytes (EOF), hashing what came
	and handing each piece to EACH; returns (byte count, sha256 hex)."""
	h = hashlib.sha256()
	n = 0
	while True:
		d = read(CHUNK)
		if not d:
			break
		h.update(d)
		n += len(d)
		if each:
			each(d)
	return n, h.hexdigest()


def listener(port):
	s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
	s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
	s.bind((HOST, port))
	s.listen(64)
	return s


# set by echo-server --spawn: each connection starts a program first
SPAWN = False


def spawn():
	"""Runs a program as Python's subprocess does (vfork where it can; the
	child closes every descriptor it inherited, then execs)."""
	subprocess.run(['true'], close_fds=True, check=True)


def echo_conn(c):
	"""Echoes until EOF, half-closes, reports what passed through (with
	--spawn, after running a program)."""
	n, sha = drain(c.recv, c.sendall)
	c.shutdown(socket.SHUT_WR)
	c.close()
	if SPAWN:
		spawn()
	out({'pid': os.getpid(), 'echoed': n, 'sha': sha})


def serve_threads(ls):
	while True:
		c, _ = ls.accept()
		threading.Thread(target=echo_conn, args=(c,), daemon=True).start()


def serve_prefork(ls, workers):
	kids = []
	for _ in range(workers):
		pid = os.fork()
		if pid == 0:
			signal.signal(signal.SIGTERM, signal.SIG_DFL)
			while True:
				c, _ = ls.accept()
				echo_conn(c)
		kids.append(pid)
	ls.close()

	def stop(*_):
		for k in kids:
			try:
				os.kill(k, signal.SIGTERM)
			except ProcessLookupError:
				pass
	signal.signal(signal.SIGTERM, stop)
	for k in kids:
		while True:
			try:
				os.waitpid(k, 0)
				break
			except InterruptedError:
				continue
			except ChildProcessError:
				break


async def adrain(reader, echo=None):
	"""drain() for asyncio: reads READER to EOF, hashing, and writes each
	piece to the stream writer ECHO if given; returns (count, sha256)."""
	h = hashlib.sha256()
	n = 0
	while True:
		d = await reader.read(CHUNK)
		if not d:
			break
		h.update(d)
		n += len(d)
		if echo:
			echo.write(d)
			await echo.drain()
	return n, h.hexdigest()


async def aecho(reader, writer):
	n, sha = await adrain(reader, writer)
	writer.write_eof()
	await writer.drain()
	writer.close()
	await writer.wait_closed()
	if SPAWN:
		spawn()
	out({'pid': os.getpid(), 'echoed': n, 'sha': sha})


async def serve_asyncio(port):
	srv = await asyncio.start_server(aecho, HOST, port, reuse_address=True)
	async with srv:
		await srv.serve_forever()


def cmd_echo_server(a):
	global SPAWN
	SPAWN = a.spawn
	if a.exit_on_term:
		# a Python handler: it runs once the interpreter's wait
		# returns EINTR, as a C server's loop sees its flag
		signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
	if a.mode == 'asyncio':
		asyncio.run(serve_asyncio(a.port))
		return 0
	ls = listener(a.port)
	if a.drop_to:
		# listen as root, serve as another user (lighttpd, ...)
		import pwd
		pw = pwd.getpwnam(a.drop_to)
		os.setgroups([])
		os.setgid(pw.pw_gid)
		os.setuid(pw.pw_uid)
	time.sleep(a.accept_delay)
	if a.mode == 'threads':
		serve_threads(ls)
	else:
		serve_prefork(ls, a.workers)
	return 0


def client_result(i, sent_h, sent_n, got_h, got_n, t0):
	return {'conn': i, 'sent': sent_n, 'got': got_n,
		'ok': sent_n == got_n and sent_h == got_h,
		'sha_sent': sent_h, 'sha_got': got_h,
		'secs': round(time.monotonic() - t0, 3)}


def echo_through(s, nbytes, seed):
	"""Sends nbytes of stream SEED on socket s from a thread, then shuts
	down its sending side, while reading the echo to EOF; closes s.
	Returns (bytes sent, their sha256 hex, bytes received, theirs)."""
	sh = hashlib.sha256()
	sent = [0]

	def sender():
		for d in chunks(nbytes, seed):
			sh.update(d)
			s.sendall(d)
			sent[0] += len(d)
		s.shutdown(socket.SHUT_WR)
	th = threading.Thread(target=sender)
	th.start()
	got, rsha = drain(s.recv)
	th.join()
	s.close()
	return sent[0], sh.hexdigest(), got, rsha


def tclient(port, i, nbytes, results):
	t0 = time.monotonic()
	s = socket.create_connection((HOST, port), timeout=60)
	sent, sha, got, rsha = echo_through(s, nbytes, i)
	results[i] = client_result(i, sha, sent, rsha, got, t0)


async def aclient(port, i, nbytes):
	t0 = time.monotonic()
	reader, writer = await asyncio.open_connection(HOST, port)
	sh = hashlib.sha256()
	sent = 0

	async def sender():
		nonlocal sent
		for d in chunks(nbytes, i):
			sh.update(d)
			writer.write(d)
			sent += len(d)
			await writer.drain()
		writer.write_eof()
	task = asyncio.create_task(sender())
	got, rsha = await adrain(reader)
	await task
	writer.close()
	await writer.wait_closed()
	return client_result(i, sh.hexdigest(), sent, rsha, got, t0)


async def aclients(a):
	return await asyncio.gather(*(aclient(a.port, i, a.bytes)
				      for i in range(a.conns)))


def cmd_echo_client(a):
	if a.mode == 'asyncio':
		results = asyncio.run(aclients(a))
	else:
		results = [None] * a.conns
		ths = [threading.Thread(target=tclient,
					args=(a.port, i, a.bytes, results))
		       for i in range(a.conns)]
		for t in ths:
			t.start()
		for t in ths:
			t.join()
	bad = 0
	for r in results:
		if r is None:
			r = {'ok': False, 'error': 'connection thread failed'}
		bad += not r['ok']
		out(r)
	return 1 if bad else 0


def splice_out(s, pieces, h, timeout):
	"""Sends pieces through a pipe with os.splice (pipe to socket): a
	thread writes them into the pipe, this one splices; s may be
	non-blocking (a timeout set), when splice says EAGAIN. Returns the
	bytes sent."""
	r, w = os.pipe()

	def feed():
		for d in pieces:
			v = memoryview(d)
			while v:
				v = v[os.write(w, v):]
			h.update(d)
		os.close(w)
	t = threading.Thread(target=feed, daemon=True)
	t.start()
	n = 0
	while True:
		try:
			k = os.splice(r, s.fileno(), 1 << 20)
		except BlockingIOError:
			if not select.select([], [s], [], timeout)[1]:
				raise OSError(errno.ETIMEDOUT, 'splice timed out')
			continue
		if k == 0:
			break
		n += k
	t.join()
	os.close(r)
	return n


def splice_in(c, each, timeout):
	"""Reads the stream until EOF with os.splice (socket to pipe), two
	splices to each read of the pipe; c may be non-blocking."""
	r, w = os.pipe()
	eof = False
	while not eof:
		k = 0
		# 16 KiB, then up to 1 MiB into the pipe that holds them, and
		# only then the pipe read (a pipe with bytes in it still has
		# room: the second call must not wait for this reader)
		for ask in (16 << 10, 1 << 20):
			try:
				j = os.splice(c.fileno(), w, ask)
			except BlockingIOError:
				if k:
					break
				if not select.select([c], [], [], timeout)[0]:
					raise OSError(errno.ETIMEDOUT,
						      'splice timed out')
				continue
			if j == 0:
				eof = True
				break
			k += j
		while k:
			d = os.read(r, k)
			each(d)
			k -= len(d)
	os.close(r)
	os.close(w)


def cmd_send(a):
	"""Sends BYTES (or until an error with --forever), then half-closes
	and reads what the peer sends back until EOF."""
	s = socket.create_connection((HOST, a.port), timeout=a.io_timeout)
	h = hashlib.sha256()
	n = 0
	end = 'done'
	try:
		if a.forever:
			blk = os.urandom(1 << 20)
			while True:
				s.sendall(blk)
				h.update(blk)
				n += len(blk)
		pieces = chunks(a.bytes, a.seed)
		if a.splice:
			# a first piece by send (the connection is carried
			# after it), the rest by splice
			d = next(pieces, b'')
			s.sendall(d)
			h.update(d)
			n += len(d)
			time.sleep(0.3)
			n += splice_out(s, pieces, h, a.io_timeout)
		for d in pieces:
			s.sendall(d)
			h.update(d)
			n += len(d)
		if a.drain_first:
			# the peer's stream to its end first, then ours
			got, rsha = drain(s.recv)
		s.shutdown(socket.SHUT_WR)
	except OSError as e:
		end = 'error:' + errno.errorcode.get(e.errno, str(e))
		out({'sent': n, 'sha': h.hexdigest(), 'end': end,
		     't': time.time()})
		return 3
	if not a.drain_first:
		got, rsha = drain(s.recv)
	out({'sent': n, 'sha': h.hexdigest(), 'end': end, 'got': got,
	     'sha_got': rsha, 't': time.time()})
	return 0


def cmd_sink(a):
	"""Accepts one connection, optionally sends --send bytes, reads until
	EOF or an error, and reports when and how the stream ended."""
	ls = listener(a.port)
	c, _ = ls.accept()
	ls.close()
	c.settimeout(a.io_timeout)
	if a.send:
		sh = hashlib.sha256()
		sent = 0
		try:
			if a.send < 0:
				blk = os.urandom(1 << 20)
				while True:
					c.sendall(blk)
					sent += len(blk)
			for d in chunks(a.send, a.seed):
				c.sendall(d)
				sh.update(d)
				sent += len(d)
		except OSError as e:
			out({'sent': sent, 'end': 'error:' + errno.errorcode.get(
				e.errno, str(e)), 't': time.time()})
			return 3
		c.shutdown(socket.SHUT_WR)
		out({'sent': sent, 'sha_sent': sh.hexdigest()})
	h = hashlib.sha256()
	n = [0]

	def count(d):
		h.update(d)
		n[0] += len(d)
	end = 'eof'
	try:	# counted as it comes: an error keeps what arrived before it
		if a.splice:
			# a first read by recv, the rest by splice
			count(c.recv(1000))
			time.sleep(0.3)
			splice_in(c, count, a.io_timeout)
		else:
			drain(c.recv, count)
	except OSError as e:
		end = 'error:' + errno.errorcode.get(e.errno, str(e))
	out({'bytes': n[0], 'sha': h.hexdigest(), 'end': end,
	     't': time.time()})
	c.close()
	return 0


def cmd_side(a):
	"""One end of a stream run by socat: writes BYTES to stdout and shuts
	it down (socat half-closes the TCP connection), reads stdin until EOF, and writes
	both hashes to RESULT. socat signals its child when both directions
	ended, which may come before RESULT is written: ignore that."""
	signal.signal(signal.SIGTERM, signal.SIG_IGN)
	sh = hashlib.sha256()
	sent = [0]

	wfd = os.open(a.tx, os.O_WRONLY) if a.tx else 1
	rfd = os.open(a.rx, os.O_RDONLY) if a.rx else 0

	def writer():
		for d in chunks(a.bytes, a.seed):
			sh.update(d)
			v = memoryview(d)
			while v:
				v = v[os.write(wfd, v):]
			sent[0] += len(d)
		try:	# socat's default: one socketpair for stdin and stdout
			socket.socket(fileno=os.dup(wfd)).shutdown(socket.SHUT_WR)
		except OSError:
			pass
		os.close(wfd)
	th = threading.Thread(target=writer)
	th.start()
	got, rsha = drain(lambda n: os.read(rfd, n))
	th.join()
	with open(a.result + '.tmp', 'w') as f:
		json.dump({'sent': sent[0], 'sha_sent': sh.hexdigest(),
			   'got': got, 'sha_got': rsha}, f)
	os.rename(a.result + '.tmp', a.result)
	return 0


def cmd_http_get(a):
	"""GETs url into a file, as curl -o would (used where curl cannot run:
	under ASan's runtime it hangs in setlocale, with or without the
	switch)."""
	u = urllib.parse.urlsplit(a.url)
	c = http.client.HTTPConnection(u.hostname, u.port, timeout=a.timeout)
	first = None
	# --count N: N requests in turn on the one keep-alive connection,
	# each answered with the same body
	for i in range(a.count):
		c.request('GET', u.path or '/')
		r = c.getresponse()
		if r.status != 200:
			print('http-get: status %d' % r.status, file=sys.stderr)
			return 22
		h = hashlib.sha256()
		with open(a.output, 'wb') as f:
			while True:
				d = r.read(1 << 20)
				if not d:
					break
				h.update(d)
				f.write(d)
		if first is None:
			first = h.hexdigest()
		elif h.hexdigest() != first:
			print('http-get: response %d differs from the first' %
			      (i + 1), file=sys.stderr)
			return 23
	c.close()
	return 0


def gone(pid):
	"""pid has exited: no such process, or a zombie its parent (the test
	runner) has not reaped yet."""
	try:
		with open('/proc/%d/stat' % pid) as f:
			return f.read().rsplit(')', 1)[1].split()[0] == 'Z'
	except OSError:
		return True


def round_trip(s, proto, rfile):
	if proto == 'line':
		s.sendall(b'ping ' * 8 + b'\n')
		line = rfile.readline()
		if not line.endswith(b'\n'):
			raise OSError('the echo ended')
		return
	s.sendall(b'GET /small.bin HTTP/1.1\r\nHost: x\r\n\r\n')
	size = None
	while True:
		h = rfile.readline()
		if not h:
			raise OSError('the response ended')
		if h in (b'\r\n', b'\n'):
			break
		k, _, v = h.partition(b':')
		if k.strip().lower() == b'content-length':
			size = int(v)
	if rfile.read(size or 0) is None:
		raise OSError('no body')


def cmd_stop_idle(a):
	"""Requests in turn on one connection, then SIGTERM to the server,
	the connection left open and idle: the server's wait (epoll_wait,
	poll) must return EINTR for its loop to see the handler's flag. The
	kill follows the last response at once, while the server's wait
	may still be busy-polling."""
	s = socket.create_connection((HOST, a.port), timeout=10)
	rfile = s.makefile('rb')
	for _ in range(a.rounds):
		round_trip(s, a.proto, rfile)
	os.kill(a.pid, signal.SIGTERM)
	t0 = time.monotonic()
	while not gone(a.pid) and time.monotonic() - t0 < a.wait:
		time.sleep(0.01)
	out({'exited': gone(a.pid), 'secs': round(time.monotonic() - t0, 3),
	     'rounds': a.rounds})
	s.close()
	return 0


def main():
	p = argparse.ArgumentParser(description=__doc__)
	sub = p.add_subparsers(dest='cmd', required=True)
	s = sub.add_parser('echo-server')
	s.add_argument('port', type=int)
	s.add_argument('--mode', choices=('threads', 'asyncio', 'prefork'),
		       default='threads')
	s.add_argument('--workers', type=int, default=4)
	s.add_argument('--exit-on-term', action='store_true',
		       help='exit by a Python SIGTERM handler')
	s.add_argument('--drop-to', metavar='USER',
		       help='become USER once listening (threads, prefork)')
	s.add_argument('--spawn', action='store_true',
		       help='start a program (subprocess) for each connection')
	s.add_argument('--accept-delay', type=float, default=0,
		       help='seconds between listen and the first accept')
	s = sub.add_parser('echo-client')
	s.add_argument('port', type=int)
	s.add_argument('--conns', type=int, default=4)
	s.add_argument('--bytes', type=int, default=1 << 20)
	s.add_argument('--mode', choices=('threads', 'asyncio'),
		       default='threads')
	s = sub.add_parser('send')
	s.add_argument('port', type=int)
	s.add_argument('bytes', type=int)
	s.add_argument('--seed', type=int, default=1)
	s.add_argument('--forever', action='store_true')
	s.add_argument('--io-timeout', type=float, default=60)
	s.add_argument('--splice', action='store_true',
		       help='send all but the first piece with splice')
	s.add_argument('--drain-first', action='store_true',
		       help='read the peer\'s stream to EOF before the '
		       'half-close')
	s = sub.add_parser('sink')
	s.add_argument('port', type=int)
	s.add_argument('--send', type=int, default=0,
		       help='bytes to send first (-1: until an error)')
	s.add_argument('--seed', type=int, default=2)
	s.add_argument('--io-timeout', type=float, default=60)
	s.add_argument('--splice', action='store_true',
		       help='read all but the first bytes with splice')
	s = sub.add_parser('side')
	s.add_argument('bytes', type=int)
	s.add_argument('seed', type=int)
	s.add_argument('result')
	s.add_argument('--tx', help='a FIFO to write instead of stdout')
	s.add_argument('--rx', help='a FIFO to read instead of stdin')
	s = sub.add_parser('http-get')
	s.add_argument('url')
	s.add_argument('output')
	s.add_argument('--timeout', type=float, default=60)
	s.add_argument('--count', type=int, default=1)
	s = sub.add_parser('stop-idle')
	s.add_argument('port', type=int)
	s.add_argument('pid', type=int)
	s.add_argument('--proto', choices=('http', 'line'), default='http')
	s.add_argument('--rounds', type=int, default=200)
	s.add_argument('--wait', type=float, default=5)
	a = p.parse_args()
	fn = {'echo-server': cmd_echo_server, 'echo-client': cmd_echo_client,
	      'send': cmd_send, 'sink': cmd_sink, 'side': cmd_side,
	      'http-get': cmd_http_get, 'stop-idle': cmd_stop_idle}[a.cmd]
	try:
		return fn(a)
	except KeyboardInterrupt:
		return 130


if __name__ == '__main__':
	sys.exit(main())
