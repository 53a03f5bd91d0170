#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# run.py - programs that do I/O the shim cannot see, or close what they do
# not know, against preloaded peers: every byte checked, no hang, and the
# path each connection took (carried, or plain TCP with the reason logged).
#   PYTHONPATH=tests/lib run.py --lib LIBSDP_SWITCH.so --bin DIR [TEST...]
# A TEST argument selects the tests whose name starts with it.
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import sdptest  # tests/lib, on PYTHONPATH
from sdptest import Fail, Skip, check, free_port, listening

HERE = os.path.dirname(os.path.abspath(__file__))
SAN, TCP, UPGRADING = 5, 1, 4	# enum sw_state (switch/stats.h)
FB_NONE, FB_BLIND = 0, 18	# enum sdp_fallback_reason (switch/fallback.h)


class Case:
	def __init__(self, opts, name):
		self.opts = opts
		self.dir = tempfile.mkdtemp(prefix='sdp-sight.')
		self.procs = []

	def env(self, preload, name, **extra):
		e = {k: v for k, v in os.environ.items()
		     if not k.startswith('SDP_') and k != 'LD_PRELOAD'}
		if preload:
			e['LD_PRELOAD'] = self.opts.preload
			e['SDP_STAT_DIR'] = self.dir
			e['SDP_PROVIDERS'] = 'shm'
			e['SDP_LOG'] = 'info'
			e['SDP_LOG_FILE'] = self.log(name)
		e.update({k: str(v) for k, v in extra.items()})
		return e

	def log(self, name):
		return os.path.join(self.dir, name + '.log')

	def logtext(self, name):
		try:
			with open(self.log(name)) as f:
				return f.read()
		except OSError:
			return ''

	def spawn(self, name, argv, preload, **extra):
		out = open(os.path.join(self.dir, name + '.out'), 'w+')
		argv = [str(a) for a in argv]
		p = subprocess.Popen(argv, env=self.env(preload, name, **extra),
				     stdout=out, stderr=subprocess.STDOUT,
				     cwd=self.dir, start_new_session=True)
		p.name, p.outf = name, out
		self.procs.append(p)
		return p

	def finish(self, p, timeout):
		try:
			rc = p.wait(timeout)
		except subprocess.TimeoutExpired:
			p.kill()
			p.wait()
			raise Fail('%s hangs (killed after %d s): %s' %
				   (p.name, timeout, self.output(p)[-600:]))
		if rc:
			raise Fail('%s exited %d: %s; log: %s' %
				   (p.name, rc, self.output(p)[-600:],
				    self.logtext(p.name)[-600:]))
		return self.output(p)

	def output(self, p):
		p.outf.seek(0)
		return p.outf.read()

	def wait_listen(self, port, p, timeout=20):
		end = time.monotonic() + timeout
		while time.monotonic() < end:
			if listening(port):
				return
			if p.poll() is not None:
				raise Fail('%s exited before listening: %s' %
					   (p.name, self.output(p)[-600:]))
			time.sleep(0.02)
		raise Fail('%s does not listen on %d' % (p.name, port))

	def cleanup(self, failed):
		for p in self.procs:
			if p.poll() is None:
				p.kill()
				p.wait()
			p.outf.close()
		if failed and os.environ.get('SDP_TEST_KEEP'):
			print('    kept %s' % self.dir)
		else:
			shutil.rmtree(self.dir, ignore_errors=True)


def state_of(out):
	"""'state S fb R' from a test program's output: (S, R), or None when
	the switch kept no record of the connection (it never took it on)."""
	for line in out.splitlines():
		w = line.split()
		if w[:1] == ['state']:
			return None if w[1] == 'none' else (int(w[1]), int(w[3]))
	raise Fail('no state line in %r' % out[-300:])


# ---- liburing ---------------------------------------------------------------

def uring_pair(c, smode, cmode, spre, cpre, nbytes, family):
	"""uring_peer's server and client in the modes given; returns their
	outputs (server, client)."""
	port = free_port()
	prog = os.path.join(c.opts.bin, 'uring_peer')
	s = c.spawn('server', [prog, 'server', port, smode, nbytes, family],
		    spre)
	c.wait_listen(port, s)
	k = c.spawn('client', [prog, 'client', port, cmode, nbytes, family],
		    cpre)
	kout = c.finish(k, 120)
	return c.finish(s, 30), kout


def uring_case(c, smode, cmode, spre, cpre, nbytes=16 << 20, family=4):
	sout, kout = uring_pair(c, smode, cmode, spre, cpre, nbytes, family)
	ends = [('server', smode, spre, sout), ('client', cmode, cpre, kout)]
	ring = any(m in ('uring', 'mixed') for _, m, pre, _ in ends if pre)
	late = any(m == 'late' for _, m, pre, _ in ends if pre)
	early = any(m == 'early' for _, m, pre, _ in ends if pre)
	both = spre and cpre
	for name, mode, pre, out in ends:
		st = state_of(out)
		if not pre:
			continue
		if mode in ('uring', 'mixed'):
			# never taken on: the switch saw the ring coming
			check(st is None or st == (TCP, FB_BLIND),
			      '%s (%s) has switch state %s' % (name, mode, st))
			check('blind' in c.logtext(name) and 'io_uring' in
			      c.logtext(name), '%s logs no "blind"' % name)
		elif mode == 'early':
			# the hellos under way when the ring came: the upgrade
			# is given up, and every byte stays on TCP
			check(st is None or st[0] == TCP,
			      '%s (early): not TCP (%s)' % (name, st))
			check('blind' in c.logtext(name),
			      '%s logs no "blind"' % name)
		elif both and not ring and not late and not early:
			check(st is not None and st[0] == SAN,
			      '%s: not carried (%s)' % (name, st))
		elif late and both and not ring and mode == 'late':
			# carried, then back on TCP when the ring came
			check(st is not None and st[0] == TCP,
			      '%s: not back on TCP (%s)' % (name, st))
		elif late and both and not ring:
			# its peer's ring returned it to TCP; held by this
			# process alone, it upgrades again (docs/protocol.md
			# 2.8), which the blind peer never answers: pending,
			# or given up by timeout, never carried again
			check(st is not None and
			      (st[0] == TCP or st == (UPGRADING, FB_NONE)),
			      '%s: not back on TCP (%s)' % (name, st))
		elif early:
			# its peer gave the upgrade up: never carried (it may
			# still wait for the peer's provider connection)
			check(st is None or st[0] != SAN,
			      '%s: carried (%s)' % (name, st))
		else:
			check(st is None or st[0] == TCP,
			      '%s: not TCP (%s)' % (name, st))


def accept_case(c, smode, cmode, spre=1, cpre=1, family=4):
	"""A server that makes its ring right after accept(), before its
	client's first bytes, and reads and writes with it: the client's hello
	(sent at once, after the ring, or alone before a read of the server's
	greeting) never reaches the ring (docs/protocol.md 2.2b)."""
	sout, kout = uring_pair(c, smode, cmode, spre, cpre, 4 << 20, family)
	sst, kst = state_of(sout), state_of(kout)
	if spre:
		check(sst is None or sst[0] == TCP,
		      'server: not TCP (%s)' % (sst,))
		check('blind' in c.logtext('server'),
		      'server logs no "blind"')
	if cpre:
		check(kst is None or kst[0] != SAN,
		      'client: carried (%s)' % (kst,))
	if spre and cpre and smode == 'lring':
		check('accepted after the process stopped carrying' in
		      c.logtext('server'), 'server: the connection accepted '
		      'after its ring was not kept: %s' %
		      c.logtext('server')[-600:])
	if spre and cpre and cmode in ('slow', 'sgreet'):
		# the ring came first: the server's switch took the name, and
		# the client's hello never went
		check('name for its hello is taken' in c.logtext('client'),
		      'client: its hello went after the ring: %s' %
		      c.logtext('client')[-600:])


def tp_stream(sid, off, n):
	"""Bytes off..off+n of test stream sid (tprog.h tp_byte)."""
	return bytes((((i * 2654435761) ^ (sid * 40503)) & 0xffffffff) >> 13
		     & 0xff for i in range(off, off + n))


def under_way_case(c):
	"""The client's hello under way while the server makes its ring: a
	client that holds the name of its connection (as a client's switch
	does right before its hello goes) and sends its hello only once the
	server's switch waits for it. The server's switch must take that hello
	before its ring exists: the ring reads the program's bytes only."""
	import socket
	port = free_port()
	prog = os.path.join(c.opts.bin, 'uring_peer')
	nbytes = 256 << 10
	half = nbytes // 2
	s = c.spawn('server', [prog, 'server', port, 'accept', nbytes], True,
		    SDP_LOG='debug')
	c.wait_listen(port, s)
	k = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
	tok = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
	try:
		# the name before the connection: the server's ring comes right
		# after its accept()
		k.bind(('127.0.0.1', 0))
		cport = k.getsockname()[1]
		tok.bind('\0sdp-hello/127.0.0.1:%d>127.0.0.1:%d' % (cport, port))
		tok.listen(1)
		k.connect(('127.0.0.1', port))
		end = time.monotonic() + 20
		while 'hello is on its way' not in c.logtext('server'):
			check(time.monotonic() < end and s.poll() is None,
			      'the server did not wait for the hello under way: '
			      '%s %s' % (c.output(s)[-300:],
					 c.logtext('server')[-600:]))
			time.sleep(0.01)
		time.sleep(0.2)
		k.sendall(CLIENT_HELLO + tp_stream(1, 0, half))
		k.settimeout(30)
		check(k.recv(1) == b'A', 'no ack from the server')
		k.sendall(tp_stream(1, half, nbytes - half))
		got = bytearray()
		while len(got) < nbytes:
			b = k.recv(1 << 16)
			check(b, 'the server ended after %d bytes' % len(got))
			got += b
		check(hashlib.sha256(got).digest() ==
		      hashlib.sha256(tp_stream(2, 0, nbytes)).digest(),
		      'the server\'s bytes differ')
		k.shutdown(socket.SHUT_WR)
		check(k.recv(1) == b'', 'more bytes after the stream')
	finally:
		k.close()
		tok.close()
	sout = c.finish(s, 30)
	st = state_of(sout)
	check(st is None or st[0] == TCP, 'server: not TCP (%s)' % (st,))


FB_PEER_FALLBACK = 15


def v3_server_case(c, alone):
	"""A server of protocol version 3 (played here: its shm listener's
	name, its TCP listener, its refusal on TCP) against a preloaded client
	of this version: the client takes the refusal (status version) in
	front of the server's first bytes, or alone before them, and its
	program reads only the server's bytes."""
	import socket
	port = free_port()
	prog = os.path.join(c.opts.bin, 'uring_peer')
	nbytes = 256 << 10
	half = nbytes // 2
	l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
	u = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
	t = None
	try:
		l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
		l.bind(('127.0.0.1', port))
		l.listen(4)
		# a switch's listener there: the client's look finds its owner,
		# who holds the TCP listener
		u.bind('\0sdp-shm/127.0.0.1:%d' % port)
		u.listen(16)
		k = c.spawn('client', [prog, 'client', port, 'libc', nbytes],
			    True)
		l.settimeout(30)
		t, _ = l.accept()
		t.settimeout(30)

		def take(n):
			got = bytearray()
			while len(got) < n:
				b = t.recv(n - len(got))
				check(b, 'the client ended after %d of %d bytes' %
				      (len(got), n))
				got += b
			return bytes(got)
		h = take(96)
		check(h[:8] == b'\xd5SDPSW\r\n' and h[8] == 1 and h[9] >= 4,
		      'not a client hello of version 4 or later: %r' % h[:16])
		# a version 3 server's refusal: SERVER, version 3, status
		# version (6), key zero
		refusal = (b'\xd5SDPSW\r\n' + bytes([2, 3, 6, 0]) + bytes(4) +
			   bytes(16) + bytes(32) + (0).to_bytes(4, 'little') +
			   (0).to_bytes(4, 'little') + bytes(24))
		if alone:
			t.sendall(refusal)
		check(take(half) == tp_stream(1, 0, half),
		      'the client\'s first half differs')
		t.sendall((b'' if alone else refusal) + b'A')
		check(take(nbytes - half) == tp_stream(1, half, nbytes - half),
		      'the client\'s second half differs')
		t.sendall(tp_stream(2, 0, nbytes))
		check(t.recv(1) == b'', 'more bytes from the client')
	finally:
		if t:
			t.close()
		l.close()
		u.close()
	kout = c.finish(k, 60)
	st = state_of(kout)
	check(st == (TCP, FB_PEER_FALLBACK),
	      'client: not TCP by peer-fallback (%s)' % (st,))
	check('version' in c.logtext('client'),
	      'client: the refusal\'s reason is not logged: %s' %
	      c.logtext('client')[-400:])


def d5_case(c, after_us):
	"""A server whose first byte is a lone 0xd5 (the magic's first byte)
	and then waits for an answer: the client's read of one byte gets it at
	once, not after more bytes or the server's provider connect."""
	port = free_port()
	prog = os.path.join(c.opts.bin, 'uring_peer')
	nbytes = 4 << 20
	s = c.spawn('server', [prog, 'server', port, 'd5', nbytes], True,
		    SDP_UPGRADE_AFTER_US=after_us)
	c.wait_listen(port, s)
	k = c.spawn('client', [prog, 'client', port, 'd5', nbytes], True)
	kout = c.finish(k, 120)
	sout = c.finish(s, 30)
	ms = [int(l.split()[2]) for l in kout.splitlines()
	      if l.startswith('d5 after ')]
	check(ms and ms[0] < 1000,
	      'the lone 0xd5 took %s ms to reach the program' % ms)
	if after_us < 1000000:
		for name, out in (('server', sout), ('client', kout)):
			st = state_of(out)
			check(st is not None and st[0] == SAN,
			      '%s: not carried (%s)' % (name, st))


def accept_tests():
	out = []
	for sm, cm in (('accept', 'libc'), ('accept', 'slow'),
		       ('acceptg', 'greet'), ('acceptg', 'sgreet')):
		out.append(('uring-accept-%s-%s' % (sm, cm),
			    lambda c, sm=sm, cm=cm: accept_case(c, sm, cm)))
	for cm in ('libc', 'slow'):
		out.append(('uring-accept-lring-%s' % cm,
			    lambda c, cm=cm: accept_case(c, 'lring', cm)))
	out.append(('uring6-accept-accept-libc',
		    lambda c: accept_case(c, 'accept', 'libc', family=6)))
	out.append(('uring-accept-server-only',
		    lambda c: accept_case(c, 'accept', 'libc', cpre=0)))
	out.append(('uring-accept-hello-under-way', under_way_case))
	out.append(('v3-server-refusal-ahead',
		    lambda c: v3_server_case(c, False)))
	out.append(('v3-server-refusal-alone',
		    lambda c: v3_server_case(c, True)))
	out.append(('d5-first-byte', lambda c: d5_case(c, 1000)))
	out.append(('d5-first-byte-late-connect',
		    lambda c: d5_case(c, 5000000)))
	return out


def uring_tests():
	modes = ('libc', 'uring', 'mixed', 'late', 'early')
	out = []
	for spre, cpre, tag in ((1, 1, 'both'), (1, 0, 'server-only'),
				(0, 1, 'client-only')):
		for sm in modes:
			for cm in modes:
				out.append(('uring-%s-%s-%s' % (tag, sm, cm),
					    lambda c, sm=sm, cm=cm, s=spre,
					    k=cpre: uring_case(c, sm, cm, s, k)))
	# the early cases over IPv6 as well (hellos under way at the ring)
	for sm, cm in (('libc', 'early'), ('early', 'libc'),
		       ('early', 'early')):
		out.append(('uring6-both-%s-%s' % (sm, cm),
			    lambda c, sm=sm, cm=cm: uring_case(c, sm, cm, 1, 1,
							      family=6)))
	return out


# ---- descriptors the program closes -----------------------------------------

def closer_case(c, how):
	prog = os.path.join(c.opts.bin, 'fd_closer')
	p = c.spawn('closer', [prog, how, 8 << 20], True, SDP_LOG='debug')
	out = c.finish(p, 60)
	st = state_of(out)
	log = c.logtext('closer')
	check('switch on' in log, 'the log lost its first lines: %r' %
	      log[:300])
	# the switch keeps working: the connection made after the closing is
	# carried, and its log lines still reach the log file
	check(st is not None and st[0] == SAN, 'not carried (%s)' % (st,))
	check('fd_closer' not in log and 'PASS' not in log,
	      'the program wrote into the log')
	for line in out.splitlines():
		if line.startswith('busy '):
			check('asked for fd %s,' % line.split()[1] in log,
			      'dup2 onto fd %s refused without a word in the '
			      'log' % line.split()[1])
	if how.startswith('dup2'):
		check('the switch\'s descriptor moved to' in log,
		      'the log file did not move out of the way of dup2')


def closer_tests():
	return [('closer-%s' % h, lambda c, h=h: closer_case(c, h))
		for h in ('loop', 'range', 'rawrange', 'from', 'dup2',
			  'dup2all')]


# ---- Node.js with libuv's io_uring backend ------------------------------------

def node_case(c, suring, curing, nreq):
	if not shutil.which('node'):
		raise Skip('node not installed (Debian: nodejs)')
	port = free_port()
	js = os.path.join(HERE, 'node_http.js')
	s = c.spawn('server', ['node', js, 'server', port], True,
		    UV_USE_IO_URING=int(suring))
	c.wait_listen(port, s)
	k = c.spawn('client', ['node', js, 'client', port, nreq, 1 << 20],
		    True, UV_USE_IO_URING=int(curing))
	out = c.finish(k, 180)
	check('ok %d requests' % nreq in out, 'client: %r' % out[-300:])
	check(s.poll() is None, 'the server died: %s' % c.output(s)[-300:])
	uv = [int(x) for x in out.split('libuv ')[1].split()[0].split('.')]
	if uv < [1, 45]:
		raise Skip('libuv %s of this node has no io_uring sockets; '
			   'the bytes were exact' % '.'.join(map(str, uv)))
	for name, uring in (('server', suring), ('client', curing)):
		if uring:
			check('blind' in c.logtext(name),
			      '%s used io_uring and logs no "blind"' % name)


def node_tests():
	return [('node-both-uring', lambda c: node_case(c, 1, 1, 1000)),
		('node-server-uring', lambda c: node_case(c, 1, 0, 200)),
		('node-client-uring', lambda c: node_case(c, 0, 1, 200))]


# ---- a statically linked Go program (never preloaded) ----------------------

def go_peer(c):
	"""tests/sight/go_peer.go built statically (once per run)."""
	out = os.path.join(c.opts.bin, 'go_peer')
	src = os.path.join(HERE, 'go_peer.go')
	if not shutil.which('go'):
		raise Skip('go not installed (Debian: golang-go)')
	if (not os.path.exists(out) or
	    os.path.getmtime(out) < os.path.getmtime(src)):
		env = dict(os.environ, CGO_ENABLED='0',
			   GOCACHE=os.path.join(c.opts.bin, 'gocache'))
		r = subprocess.run(['go', 'build', '-o', out, src], env=env,
				   capture_output=True, text=True, timeout=300)
		check(r.returncode == 0, 'go build: %s' % r.stderr[-500:])
	return out


def go_case(c, go_server, nbytes=16 << 20):
	gp = go_peer(c)
	up = os.path.join(c.opts.bin, 'uring_peer')
	port = free_port()
	if go_server:
		s = c.spawn('server', [gp, 'server', port, nbytes], False)
		c.wait_listen(port, s)
		k = c.spawn('client', [up, 'client', port, 'libc', nbytes], True)
		ours = k
	else:
		s = c.spawn('server', [up, 'server', port, 'libc', nbytes], True)
		c.wait_listen(port, s)
		k = c.spawn('client', [gp, 'client', port, nbytes], False)
		ours = s
	outs = {'client': c.finish(k, 120), 'server': c.finish(s, 30)}
	st = state_of(outs[ours.name])
	check(st is None or st[0] == TCP,
	      'the preloaded end is not on TCP (%s)' % (st,))


def go_tests():
	return [('go-server', lambda c: go_case(c, True)),
		('go-client', lambda c: go_case(c, False))]


# ---- ssh against a preloaded sshd -------------------------------------------

def sha_file(path):
	h = hashlib.sha256()
	with open(path, 'rb') as f:
		for b in iter(lambda: f.read(1 << 20), b''):
			h.update(b)
	return h.hexdigest()


# A client switch's hello (docs/protocol.md 2.2), as a preloaded client
# sends it in front of its first bytes or alone when it reads first.
CLIENT_HELLO = (b'\xd5SDPSW\r\n' + bytes([1, 3, 0, 1]) + bytes(4) +
		bytes(16) + b'shm'.ljust(32, b'\0') +
		(65536).to_bytes(4, 'little') + (64).to_bytes(4, 'little') +
		bytes(24))


LATE_CLIENT = r"""
import os, socket, sys, time
s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
while not os.path.exists(sys.argv[2]):
	time.sleep(0.02)
s.sendall(b'SSH-2.0-sdp_late_hello\r\n')
s.settimeout(5)
got = b''
try:
	while b'\n' not in got or len(got) < 200:
		b = s.recv(4096)
		if not b:
			break
		got += b
except (socket.timeout, ConnectionResetError):
	pass
ok = got.startswith(b'SSH-2.0-') and b'Invalid' not in got
sys.stdout.write(('OK ' if ok else 'BAD ') + repr(got[:120]))
"""


def late_hello(c, port):
	"""A preloaded client whose first bytes go only after sshd forked and
	put the connection on its fds 0 and 1 to re-exec itself: the switch
	there took the connection's hello name (docs/protocol.md 2.2b) and
	keeps it across the exec; the new sshd closes every descriptor at
	start, the name too, and its switch drops the client's hello that
	then goes. sshd reads the client's version line first, and no
	switch waits for a hello that cannot come."""
	flag = os.path.join(c.dir, 'late-go')
	p = c.spawn('late', [sys.executable, '-c', LATE_CLIENT, port, flag],
		    True, SDP_LOG='debug')
	end = time.monotonic() + 20
	while 'on a standard stream' not in c.logtext('sshd'):
		check(time.monotonic() < end,
		      'sshd\'s switch did not take the connection off the '
		      'SAN when sshd put it on its standard streams: %s' %
		      c.logtext('sshd')[-600:])
		time.sleep(0.02)
	open(flag, 'w').close()
	got = c.finish(p, 30)
	check(got.startswith('OK '),
	      'sshd read a hello that came after its exec: %s' % got[:200])
	check('did not come within' not in c.logtext('sshd'),
	      'sshd\'s switch waited for a hello that could not come: %s' %
	      c.logtext('sshd')[-600:])
	check('name for its hello is taken' in c.logtext('late') or
	      'still to drop' in c.logtext('sshd'),
	      'the late client sent a hello that nobody drops: %s' %
	      c.logtext('sshd')[-400:])


SCP_BYTES = 200 << 20
SSH_RUNS = 8


def ssh_case(c):
	sshd = shutil.which('sshd') or '/usr/sbin/sshd'
	if not os.path.exists(sshd) or not shutil.which('ssh'):
		raise Skip('openssh-server/openssh-client not installed')
	if os.geteuid() != 0:
		raise Skip('sshd runs as root (its privilege separation)')
	os.makedirs('/run/sshd', mode=0o755, exist_ok=True)
	d = c.dir
	for k in ('host', 'user'):
		subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '',
				'-f', os.path.join(d, k)], check=True)
	shutil.copy(os.path.join(d, 'user.pub'), os.path.join(d, 'auth'))
	port = free_port()
	with open(os.path.join(d, 'sshd_config'), 'w') as f:
		f.write('Port %d\nListenAddress 127.0.0.1\nHostKey %s/host\n'
			'AuthorizedKeysFile %s/auth\nPidFile %s/sshd.pid\n'
			'UsePAM no\nStrictModes no\nPermitRootLogin yes\n'
			'PasswordAuthentication no\n'
			'Subsystem sftp internal-sftp\n' % (port, d, d, d))
	s = c.spawn('sshd', [sshd, '-D', '-e', '-f',
			     os.path.join(d, 'sshd_config')], True,
		    SDP_LOG='debug')
	c.wait_listen(port, s)
	# a hello that comes after the exec: dropped by the new program
	late_hello(c, port)
	data = os.path.join(d, 'data')
	with open(data, 'wb') as f:
		for _ in range(SCP_BYTES >> 20):
			f.write(os.urandom(1 << 20))
	want = sha_file(data)
	opts = ['-F', '/dev/null', '-o', 'StrictHostKeyChecking=no', '-o',
		'UserKnownHostsFile=%s/known' % d, '-o', 'BatchMode=yes',
		'-i', os.path.join(d, 'user')]
	clients = []
	# short sessions, whose hellos come before or after sshd's exec
	for i in range(SSH_RUNS):
		name = 'ssh-short%d' % i
		p = c.spawn(name, ['ssh'] + opts + ['-p', str(port),
			    'root@127.0.0.1', 'echo', 'sdp-token-%d' % i], True,
			    SDP_LOG='debug')
		got = c.finish(p, 60)
		check('sdp-token-%d' % i in got, '%s: %r' % (name, got[-300:]))
		clients.append((name, p))
	# a command whose output is hashed, 24 MiB of the file on stdin
	part = os.path.join(d, 'part')
	with open(data, 'rb') as f, open(part, 'wb') as g:
		g.write(f.read(24 << 20))
	with open(part, 'rb') as inp:
		out = open(os.path.join(d, 'ssh.out'), 'w+')
		p = subprocess.Popen(['ssh'] + opts + ['-p', str(port),
				     'root@127.0.0.1', 'sha256sum'],
				     stdin=inp, stdout=out,
				     stderr=subprocess.STDOUT,
				     env=c.env(True, 'ssh', SDP_LOG='debug'))
		p.name, p.outf = 'ssh', out
		c.procs.append(p)
		got = c.finish(p, 120)
	check(sha_file(part) in got, 'sha256sum over ssh: %r' % got[-300:])
	clients.append(('ssh', p))
	# scp there and back, 200 MiB each way
	copy, back = os.path.join(d, 'copy'), os.path.join(d, 'back')
	p = c.spawn('scp', ['scp'] + opts + ['-P', str(port), data,
		    'root@127.0.0.1:' + copy], True, SDP_LOG='debug')
	c.finish(p, 120)
	clients.append(('scp', p))
	p = c.spawn('scp2', ['scp'] + opts + ['-P', str(port),
		    'root@127.0.0.1:' + copy, back], True, SDP_LOG='debug')
	c.finish(p, 120)
	clients.append(('scp2', p))
	check(sha_file(copy) == want, 'scp to sshd changed the file')
	check(sha_file(back) == want, 'scp from sshd changed the file')
	# the path: sshd re-execs itself with the connection on fds 0 and 1
	# and moves it off them, its pre-auth child stands by in its sandbox,
	# and the monitor left alone carries it (docs/protocol.md 2.7, rule
	# 5): the transfers are carried; a short session may end on TCP first
	for name, p in clients:
		log = c.logtext(name)
		check('plain TCP' in log or 'carried by shm' in log,
		      '%s: neither "plain TCP" nor "carried by shm" in its log: '
		      '%s' % (name, log[-600:]))
		check('carried by shm' in log or name.startswith('ssh-short'),
		      '%s: not carried: %s' % (name, log[-600:]))
		check('sdp-switch' not in c.output(p),
		      'a log line in the output of %s' % name)
	check('sdp-switch' in c.logtext('sshd'),
	      'sshd: the switch logged nothing to its file')
	check('sdp-switch' not in c.output(s), 'a log line in sshd\'s output')
	for bad in ('invalid protocol identifier', 'Bad packet length'):
		check(bad not in c.output(s),
		      'sshd: %r in its output: %s' % (bad, c.output(s)[-600:]))
	ssh_norexec(c, sshd, opts, part)


def ssh_norexec(c, sshd, opts, part):
	"""sshd -r: no re-exec, so the process that accepted keeps the
	connection's switch state into the pre-auth child, which enters a
	seccomp sandbox that allows read and write but not the switch's
	sendmsg, recvmsg or kill: the switch steps aside before the filter."""
	d = c.dir
	port = free_port()
	conf = os.path.join(d, 'sshd_config_r')
	with open(os.path.join(d, 'sshd_config')) as f:
		text = f.read()
	with open(conf, 'w') as f:
		f.write(text.replace('Port ', 'Port %d\n#' % port, 1).replace(
			'sshd.pid', 'sshd_r.pid'))
	s = c.spawn('sshd-r', [sshd, '-r', '-D', '-e', '-f', conf], True,
		    SDP_LOG='debug')
	c.wait_listen(port, s)
	want = sha_file(part)
	for i in range(2):
		name = 'ssh-r%d' % i
		with open(part, 'rb') as inp:
			out = open(os.path.join(d, name + '.out'), 'w+')
			p = subprocess.Popen(['ssh'] + opts + ['-p', str(port),
					     'root@127.0.0.1', 'sha256sum'],
					     stdin=inp, stdout=out,
					     stderr=subprocess.STDOUT,
					     env=c.env(True, name, SDP_LOG='debug'))
			p.name, p.outf = name, out
			c.procs.append(p)
			got = c.finish(p, 120)
		check(want in got, 'sshd -r, sha256sum over ssh: %r' %
		      got[-300:])


def ssh_tests():
	return [('ssh', ssh_case)]


def main():
	ap = argparse.ArgumentParser()
	ap.add_argument('--lib', required=True)
	ap.add_argument('--bin', required=True)
	ap.add_argument('only', nargs='*')
	opts = ap.parse_args()
	opts.lib = os.path.abspath(opts.lib)
	opts.bin = os.path.abspath(opts.bin)
	opts.preload = sdptest.preload(opts.lib)
	tests = uring_tests() + accept_tests() + closer_tests() + node_tests() + \
		go_tests() + ssh_tests()
	failed = 0
	t0 = time.monotonic()
	for name, fn in tests:
		if opts.only and not any(name.startswith(o)
					 for o in opts.only):
			continue
		c = Case(opts, name)
		bad = False
		try:
			t = time.monotonic()
			fn(c)
			print('PASS %s (%.1f s)' % (name, time.monotonic() - t))
		except Skip as e:
			print('SKIP %s: %s' % (name, e))
		except Fail as e:
			print('FAIL %s: %s' % (name, e))
			bad = True
		except Exception:
			print('FAIL %s:' % name)
			traceback.print_exc()
			bad = True
		c.cleanup(bad)
		failed += bad
		sys.stdout.flush()
	print('sight: %d failed, %.0f s' % (failed, time.monotonic() - t0))
	return 1 if failed else 0


if __name__ == '__main__':
	sys.exit(main())
