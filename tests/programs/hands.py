#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# hands.py - connections that change hands (fork after accept, connect then
# fork, fd passing, inetd-style servers, PostgreSQL) under the switch: the
# bytes hashed, and the process left holding each connection proven to
# carry it on shm from its sdp-stat counters. Same options as run.py:
#   PYTHONPATH=tests/lib hands.py --lib LIB --stat SDP_STAT [TEST...]
import hashlib
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402
from peers import chunks  # noqa: E402
from run import (MIB, PY, Fail, Skip, check, fmt_conn,  # noqa: E402
		 san_rx, san_tx, by_pid, need, free_port)

HANDS = os.path.join(run.HERE, 'hands_peers.py')
# A carried connection's TCP counters hold only the program's bytes before
# its switch point (after it TCP carries doorbells, and a program byte there
# closes the connection: docs/protocol.md 2.6), so every byte after the
# switch point is on shm; the head before it is bounded, and here must be a
# small part of the whole.
SAN_SHARE = 0.75


def on_san(c, what, tx_min=0, rx_min=0, share=SAN_SHARE):
	"""c is carried by shm, with at most run.HEAD_MAX bytes each way on
	TCP before its switch point, and (a direction that moved 4 MiB or
	more) at least share of its bytes on shm."""
	check(c['state'] == run.SAN_STATE and c['provider'] == 'shm',
	      '%s: connection not on shm: %s' % (what, fmt_conn(c)))
	for name, san, tcp, least in (('tx', san_tx(c), c['tx_tcp'], tx_min),
				      ('rx', san_rx(c), c['rx_tcp'], rx_min)):
		tot = san + tcp
		check(tot >= least and tcp <= run.HEAD_MAX and
		      (tot < 4 * MIB or san >= share * tot),
		      '%s: %s %d bytes, %d on shm (%.2f%%; need %d bytes, '
		      'at most %d on TCP, %.0f%% on shm): %s' %
		      (what, name, tot, san, 100.0 * san / tot if tot else 0,
		       least, run.HEAD_MAX, 100 * share, fmt_conn(c)))
	return san_tx(c) + san_rx(c), c['tx_tcp'] + c['rx_tcp']


# The head of a connection (each side's bytes on TCP before its first
# switch point) is told only by the log (SDP_LOG=debug): the switch's
# lines "carried by PROVIDER after N bytes on TCP" (ours) and "the peer's
# bytes leave TCP after N" (the peer's), by process and fd.
DEBUG = {'SDP_LOG': 'debug'}
AFTER_SHARE = 0.99


def switch_points(*texts, every=False):
	"""{(pid, fd): [tx_head, rx_head]} from debug logs: the first switch
	point of each connection; with every, [[tx heads], [rx heads]], one
	for each switch point (an upgrade again logs its later ones, each
	counting the bytes on TCP since the downgrade before it)."""
	import re
	heads = {}
	pat = re.compile(r'sdp-switch\[(\d+)\] debug: fd (\d+): (?:carried '
			 r'by \S+ after (\d+) bytes on TCP|the peer\'s bytes '
			 r'leave TCP after (\d+))$', re.M)
	for t in texts:
		for m in pat.finditer(t):
			key = (int(m.group(1)), int(m.group(2)))
			i, v = (0, m.group(3)) if m.group(3) else (1, m.group(4))
			if every:
				heads.setdefault(key, [[], []])[i].append(int(v))
				continue
			h = heads.setdefault(key, [None, None])
			if h[i] is None:
				h[i] = int(v)
	return heads


def after_switch(c, heads, what, share=AFTER_SHARE):
	"""Of c's bytes after its switch points (heads: switch_points), at
	least share on the SAN, each way: every byte on TCP past the head is
	one the SAN did not carry. Returns (SAN bytes, bytes after)."""
	h = heads.get((c['pid'], c['fd']))
	check(h and None not in h, '%s: no switch point of pid %d fd %d in '
	      'the log: %s' % (what, c['pid'], c['fd'], fmt_conn(c)))
	san = after = 0
	for name, s, tcp, head in (('tx', san_tx(c), c['tx_tcp'], h[0]),
				   ('rx', san_rx(c), c['rx_tcp'], h[1])):
		check(tcp >= head and s >= share * (s + tcp - head),
		      '%s: %s %d bytes after the switch point (at %d), %d on '
		      'shm (%.2f%%, need %.0f%%): %s' %
		      (what, name, s + tcp - head, head, s,
		       100.0 * s / max(1, s + tcp - head), 100 * share,
		       fmt_conn(c)))
		san += s
		after += s + tcp - head
	return san, after


def conns_of(st, pids):
	return [c for p in pids for c in by_pid(st, p)]


def held_by(st, pids):
	"""The connections the processes held: a forked child's statistics
	start as a copy of its parent's file, which the parent goes on
	writing until the copy is made, so they may also list a connection
	the parent accepted meanwhile (no byte moved there) or had handed
	over (by_pid leaves those out)."""
	return [c for c in conns_of(st, pids)
		if san_tx(c) + san_rx(c) + c['tx_tcp'] + c['rx_tcp']]


def echo_clients(ctx, port, conns, nbytes, env=None, timeout=120):
	cli = ctx.run('echo-client', [PY, run.PEERS, 'echo-client', str(port),
				      '--conns', str(conns), '--bytes',
				      str(nbytes), '--mode', 'threads'], timeout,
		      ok=None, env=env)
	res = cli.json_lines()
	bad = [r for r in res if not r.get('ok')]
	check(cli.p.returncode == 0 and len(res) == conns and not bad,
	      'echo client exit %d, %d results, bad: %s; stderr %s' %
	      (cli.p.returncode, len(res), bad[:2], cli.err()[-600:]))
	return cli


def server_children(ctx, srv, conns, nbytes, what):
	"""The pids of the processes that echoed (one JSON line each), with
	the total checked."""
	served = srv.json_lines()
	check(len(served) == conns and
	      sum(r['echoed'] for r in served) == conns * nbytes,
	      '%s: %d echo results, %d bytes echoed; expected %d and %d; '
	      'stderr %s' % (what, len(served),
			     sum(r['echoed'] for r in served), conns,
			     conns * nbytes, srv.err()[-600:]))
	return sorted(set(r['pid'] for r in served))


def handed_echo(ctx, cmd, conns, nbytes, what, parent_msg):
	"""hands_peers.py CMD serves conns echo clients of nbytes each, handing
	every connection to another process (WHAT): the server process itself
	must echo nothing (else parent_msg), and the processes it handed them
	to, as the client, must hold every connection on shm, with at least
	AFTER_SHARE of the bytes after each switch point there. Returns their
	pids, and the share on shm of the bytes after the switch points of
	the connections they held, in %."""
	port = free_port()
	srv = ctx.spawn(cmd, [PY, HANDS, cmd, str(port)], env=DEBUG)
	ctx.wait_listen(port, srv)
	cli = echo_clients(ctx, port, conns, nbytes, DEBUG)
	ctx.stop(srv)
	kids = server_children(ctx, srv, conns, nbytes, what)
	check(srv.pid not in kids, parent_msg)
	st = ctx.stats()
	heads = switch_points(srv.err(), cli.err())
	# the share of all bytes depends on how long the upgrade took while
	# the echo flowed on TCP (a loaded machine, ASan: 74.58% once); the
	# share after the switch points (after_switch, 99%) does not, and
	# the head stays bounded (on_san)
	for c in by_pid(st, cli.pid):
		on_san(c, 'client', nbytes, nbytes, share=0)
		after_switch(c, heads, 'client')
	held = held_by(st, kids)
	check(len(held) == conns, '%s: %d connections held, expected %d: %s' %
	      (what, len(held), conns, '; '.join(
		      fmt_conn(c) for c in conns_of(st, kids))))
	san = after = 0
	for c in held:
		on_san(c, what, nbytes, nbytes, share=0)
		a, b = after_switch(c, heads, what)
		san += a
		after += b
	return kids, 100.0 * san / max(1, after)


@run.test('forking-tcp-server')
def t_forking(ctx):
	"""socketserver.ForkingTCPServer: the parent accepts and forks, the
	child echoes. The child, left alone with the connection, upgrades."""
	conns, nbytes = 4, 16 * MIB
	kids, after = handed_echo(ctx, 'fork-server', conns, nbytes,
				  'ForkingTCPServer child',
				  'the parent echoed: no fork?')
	return ('%d x %d MiB echoed by %d forked children, all on shm, '
		'%.2f%% of the bytes after the switch points' % (
			conns, nbytes >> 20, len(kids), after))


@run.test('connect-then-fork')
def t_connect_fork(ctx):
	"""A client connects, forks, and leaves the connection to its child."""
	nbytes = 32 * MIB
	port = free_port()
	srv = ctx.spawn('echo-server', [PY, run.PEERS, 'echo-server',
					str(port), '--mode', 'threads'])
	ctx.wait_listen(port, srv)
	cli = ctx.run('fork-client', [PY, HANDS, 'fork-client', str(port),
				      str(nbytes)], 120, ok=None)
	res = cli.json_lines()
	check(cli.p.returncode == 0 and len(res) == 1 and res[0]['ok'],
	      'fork client exit %d: %s; stderr %s' % (cli.p.returncode, res,
						      cli.err()[-600:]))
	ctx.stop(srv)
	st = ctx.stats()
	kid = res[0]['pid']
	check(kid != cli.pid, 'the client did not fork')
	held = held_by(st, [kid])
	check(len(held) == 1, 'connect-then-fork: %d connections in the '
	      'child: %s' % (len(held), '; '.join(fmt_conn(c) for c in
						  run.conns(st))))
	for c in held:
		on_san(c, 'client child', nbytes, nbytes)
	for c in by_pid(st, srv.pid):
		on_san(c, 'server', nbytes, nbytes)
	return '%d MiB echoed, the child of the client on shm' % (nbytes >> 20)


@run.test('scm-rights')
def t_scm_rights(ctx):
	"""The acceptor hands each connection to a worker process with
	SCM_RIGHTS and closes its copy; the worker, which did not create the
	socket, echoes exactly the client's bytes (not the hello before them)
	and upgrades the connection."""
	conns, nbytes = 2, 16 * MIB
	_, after = handed_echo(ctx, 'scm-server', conns, nbytes,
			       'SCM_RIGHTS worker',
			       'the acceptor echoed: nothing passed?')
	return ('%d x %d MiB echoed by a worker given the sockets, on shm, '
		'%.2f%% of the bytes after the switch points' % (
			conns, nbytes >> 20, after))


@run.test('socat-fork')
def t_socat_fork(ctx):
	"""inetd-style: socat accepts and forks a child per connection,
	which forks and execs the program behind a socketpair (EXEC); the
	client is socat with EXEC too. Each socat, left alone with its TCP
	connection, upgrades it."""
	n = 32 * MIB
	srv, cli = run.socat_exec(ctx, n, True)
	ctx.stop(srv)
	st = ctx.stats()
	held = [c for x in st if x['program'].startswith('socat')
		for c in by_pid(st, x['pid'])
		if c['fallback'] != run.HANDED]
	check(len(held) == 2, 'socat fork: %d connections held, expected 2 '
	      '(client, forked server child): %s' %
	      (len(held), '; '.join(fmt_conn(c) for c in run.conns(st))))
	check(any(c['pid'] != srv.pid and c['pid'] != cli.pid for c in held),
	      'socat fork: no connection in a forked child: %s' %
	      '; '.join(fmt_conn(c) for c in held))
	for c in held:
		on_san(c, 'socat', n, n)
	return '%d MiB each way, socat fork + EXEC on both ends, on shm' % (
		n >> 20)


@run.test('inetd-stderr')
def t_inetd_stderr(ctx):
	"""inetd's shape: socat execs sha256sum with the TCP connection on its
	0, 1 and 2 (EXEC with nofork and stderr), the program's switch
	logging at debug level to stderr. The connection is the program's
	output: not one log line may reach the client, whose reply must be
	the hash alone."""
	need('socat', 'sha256sum')
	n = 8 * MIB
	port = free_port()
	srv = ctx.spawn('socat-inetd', ['socat', 'TCP-LISTEN:%d,bind=127.0.0.1,'
			'reuseaddr' % port, 'EXEC:sha256sum,nofork,stderr'],
			env={'SDP_LOG': 'debug'})
	ctx.wait_listen(port, srv)
	data = b''.join(chunks(n, 7))
	want = ('%s  -\n' % hashlib.sha256(data).hexdigest()).encode()
	cli = ctx.run('inetd-client', [PY, '-c', INETD_CLIENT, str(port),
				       str(n)], 60)
	got = open(ctx.path('inetd-client.out'), 'rb').read()
	srv.wait(30)
	check(got == want, 'the reply of sha256sum behind socat: %r, '
	      'expected %r' % (got[:300], want))
	check(b'sdp-switch' not in got and cli.p.returncode == 0,
	      'log lines in the connection: %r' % got[:300])
	return '%d MiB hashed by a program on the connection\'s 0, 1, 2, ' \
		'its switch at debug level: the reply is the hash alone' % (
			n >> 20)


INETD_CLIENT = """
import socket, sys
sys.path.insert(0, %r)
from peers import chunks
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(('127.0.0.1', port), timeout=60)
s.sendall(b''.join(chunks(n, 7)))
s.shutdown(socket.SHUT_WR)
got = b''
while True:
	d = s.recv(65536)
	if not d:
		break
	got += d
sys.stdout.buffer.write(got)
""" % run.HERE


VSFTPD_CLIENT = """
import ftplib, hashlib, sys
port = int(sys.argv[1])
f = ftplib.FTP()
f.connect('127.0.0.1', port, timeout=60)
f.login()
h = hashlib.sha256()
n = [0]
def take(d):
	h.update(d)
	n[0] += len(d)
f.retrbinary('RETR big', take, 1 << 16)
f.quit()
print(n[0], h.hexdigest())
"""


@run.test('vsftpd')
def t_vsftpd(ctx):
	"""vsftpd, which runs each session with the control connection on
	its 0, 1 and 2 (its own processes for privilege separation, the data
	connection accepted by the privileged one and passed to the
	session's with SCM_RIGHTS), preloaded with the switch's log on
	stderr: Python's ftplib, whose reply parser takes no stray line,
	fetches a file; the bytes hashed."""
	vsftpd = '/usr/sbin/vsftpd'
	if os.environ.get('SANITIZE') == '1':
		raise Skip("vsftpd limits its session's address space, where "
			   "the ASan runtime finds no room ('500 OOPS: mmap', "
			   "without the switch as well)")
	if not os.path.exists(vsftpd):
		raise Skip('vsftpd not installed (Debian: vsftpd)')
	if os.geteuid() != 0:
		raise Skip('vsftpd runs as root')
	import pwd
	try:
		pwd.getpwnam('ftp')
	except KeyError:
		raise Skip('no user ftp (made by Debian\'s vsftpd package)')
	n = 32 * MIB
	root, empty = ctx.path('ftproot'), ctx.path('ftpempty')
	os.makedirs(root)
	os.makedirs(empty)
	data = b''.join(chunks(n, 11))
	with open(os.path.join(root, 'big'), 'wb') as f:
		f.write(data)
	os.chmod(root, 0o555)
	os.chmod(ctx.dir, 0o755)
	port = free_port()
	conf = ctx.path('vsftpd.conf')
	with open(conf, 'w') as f:
		f.write('listen=YES\nlisten_address=127.0.0.1\n'
			'listen_port=%d\nanonymous_enable=YES\nanon_root=%s\n'
			'local_enable=NO\nwrite_enable=NO\nftp_username=ftp\n'
			'secure_chroot_dir=%s\nbackground=NO\n'
			'xferlog_enable=NO\npasv_address=127.0.0.1\n'
			'seccomp_sandbox=NO\n' % (port, root, empty))
	srv = ctx.spawn('vsftpd', [vsftpd, conf], env={'SDP_LOG': 'info'})
	ctx.wait_listen(port, srv)
	cli = ctx.run('ftp-client', [PY, '-c', VSFTPD_CLIENT, str(port)], 120,
		      ok=None)
	ctx.stop(srv)
	want = '%d %s' % (n, hashlib.sha256(data).hexdigest())
	check(cli.p.returncode == 0 and cli.out().strip() == want,
	      'ftplib from vsftpd: exit %d, %r (want %r); stderr %s' % (
		      cli.p.returncode, cli.out()[-200:], want,
		      cli.err()[-600:]))
	return '%d MiB from vsftpd to ftplib, exact, no stray line on the ' \
		'control connection' % (n >> 20)


PG_USER = 'sdp-pgtest'
PG_BIN = '/usr/lib/postgresql/15/bin'


def pg_user(ctx):
	"""The unprivileged user PostgreSQL runs as (made once with useradd;
	postgres refuses to run as root). Returns (uid, gid)."""
	import pwd
	if os.getuid() != 0:
		raise Skip('needs root to make the user %s' % PG_USER)
	try:
		pw = pwd.getpwnam(PG_USER)
	except KeyError:
		r = subprocess.run(['useradd', '--system', '--no-create-home',
				    '--shell', '/usr/sbin/nologin', PG_USER],
				   capture_output=True, text=True)
		check(r.returncode == 0, 'useradd %s: %s' % (PG_USER, r.stderr))
		pw = pwd.getpwnam(PG_USER)
	return pw.pw_uid, pw.pw_gid


def as_user(uid, gid, argv):
	return ['setpriv', '--reuid', str(uid), '--regid', str(gid),
		'--clear-groups', '--'] + argv


def pg_env(port):
	return {'PGHOST': '127.0.0.1', 'PGPORT': port, 'PGUSER': PG_USER,
		'PGDATABASE': 'postgres', 'PGSSLMODE': 'disable',
		'PGGSSENCMODE': 'disable', 'PGCONNECT_TIMEOUT': 20}


def pg_start(ctx, preload=True):
	"""initdb into the test's directory and a postmaster on a free port of
	127.0.0.1, as PG_USER. Returns (postmaster, port)."""
	need('setpriv')
	if os.environ.get('SANITIZE') == '1':
		raise Skip("Debian's postgres and pgbench hang with the ASan "
			   "runtime preloaded, without the switch as well "
			   "(postgres at start in glibc's locale lock, pgbench "
			   "at exit)")
	if not os.path.exists(os.path.join(PG_BIN, 'postgres')):
		raise Skip('PostgreSQL 15 is not installed (%s)' % PG_BIN)
	uid, gid = pg_user(ctx)
	os.chmod(ctx.dir, 0o755)
	os.chown(ctx.statdir, uid, gid)
	data = ctx.path('pgdata')
	os.mkdir(data, 0o700)
	os.chown(data, uid, gid)
	ctx.run('initdb', as_user(uid, gid, [os.path.join(PG_BIN, 'initdb'),
		'-D', data, '-U', PG_USER, '--auth=trust', '-E', 'UTF8',
		'--no-sync']), 120, preload=False)
	port = free_port()
	# the switch is loaded by postgres itself, not by setpriv (whose
	# statistics file, made as root, postgres could not take over)
	lib = ctx.opts.preload
	# at debug level: the backends' switch points (after_switch)
	env = ['env'] + (['LD_PRELOAD=' + lib,
			  'SDP_STAT_DIR=' + ctx.statdir, 'SDP_PROVIDERS=shm',
			  'SDP_LOG=debug']
			 if preload and not ctx.opts.plain else [])
	pm = ctx.spawn('postgres', as_user(uid, gid, env + [
		os.path.join(PG_BIN, 'postgres'), '-D', data, '-p', str(port),
		'-c', 'listen_addresses=127.0.0.1',
		'-c', 'unix_socket_directories=' + data,
		'-c', 'fsync=off', '-c', 'synchronous_commit=off',
		'-c', 'full_page_writes=off', '-c', 'max_connections=30',
		'-c', 'shared_buffers=64MB']), preload=False)
	ctx.wait_listen(port, pm, 30)
	return pm, port


def pg_run(ctx, name, argv, port, timeout=180, preload=True, stdin=None):
	return ctx.run(name, argv, timeout, preload=preload, env=pg_env(port),
		       stdin=stdin)


def pgbench_tps(out):
	import re
	m = re.search(r'tps = ([0-9.]+) \(without initial', out)
	return float(m.group(1)) if m else None


@run.test('postgresql')
def t_postgresql(ctx):
	"""PostgreSQL over 127.0.0.1: the postmaster accepts and forks a
	backend, which upgrades once it holds the connection alone. pgbench
	with zero failed transactions; COPY of more than 100 MB out and back,
	hashes compared; every backend's connection on shm."""
	need('pgbench', 'psql')
	pm, port = pg_start(ctx)
	pg_run(ctx, 'pgbench-init', ['pgbench', '-i', '-s', '2', '-q'], port)
	b = pg_run(ctx, 'pgbench', ['pgbench', '-c', '4', '-j', '2', '-T', '10',
				    '-n'], port, 60)
	out = b.out()
	import re
	m = re.search(r'number of failed transactions: (\d+)', out)
	n = re.search(r'number of transactions actually processed: (\d+)',
		      out)
	check(m and n and int(m.group(1)) == 0 and int(n.group(1)) > 0,
	      'pgbench: failed transactions or none processed: %s' % out[-800:])
	tps = pgbench_tps(out)
	# COPY: about 105 MB of rows made by the server, out to a file
	# through the client, back into another table, out again
	pg_run(ctx, 'psql-make', ['psql', '-v', 'ON_ERROR_STOP=1', '-qc',
		'CREATE TABLE big AS SELECT i, repeat(md5(i::text), 30) AS b '
		'FROM generate_series(1, 110000) i'], port)
	f1, f2 = ctx.path('copy1.txt'), ctx.path('copy2.txt')
	pg_run(ctx, 'psql-out', ['psql', '-v', 'ON_ERROR_STOP=1', '-qc',
		'\\copy (SELECT * FROM big ORDER BY i) TO \'%s\'' % f1], port)
	size = os.path.getsize(f1)
	check(size >= 100 * 1000 * 1000, 'COPY out: only %d bytes' % size)
	pg_run(ctx, 'psql-in', ['psql', '-v', 'ON_ERROR_STOP=1', '-qc',
		'CREATE TABLE big2 (i int, b text)', '-qc',
		'\\copy big2 FROM \'%s\'' % f1], port)
	pg_run(ctx, 'psql-out2', ['psql', '-v', 'ON_ERROR_STOP=1', '-qc',
		'\\copy (SELECT * FROM big2 ORDER BY i) TO \'%s\'' % f2], port)
	h1, h2 = run.sha_file(f1), run.sha_file(f2)
	check(h1 == h2 and os.path.getsize(f2) == size,
	      'COPY out and back: %d bytes sha %s, then %d bytes sha %s' %
	      (size, h1[:16], os.path.getsize(f2), h2[:16]))
	ctx.stop(pm, 20)
	st = ctx.stats()
	backends = [x['pid'] for x in st if x['program'].startswith('postgres')
		    and x['pid'] != pm.pid]
	held = held_by(st, backends)
	check(len(held) >= 6, 'postgresql: %d backend connections in the '
	      'stats: %s' % (len(held), '; '.join(fmt_conn(c) for c in
						   held)))
	san = tcp = 0
	big = 0
	# a session of one statement that ends before its upgrade is due
	# stays TCP (run.short_lived); pgbench's four and the COPYs may not
	short = [c for c in held if run.short_lived(c)]
	held = [c for c in held if c not in short]
	heads = switch_points(pm.err())
	san_after = after = 0
	for c in held:
		a, t = on_san(c, 'backend')
		san += a
		tcp += t
		a, t = after_switch(c, heads, 'backend')
		san_after += a
		after += t
		if san_rx(c) >= 100 * 1000 * 1000 or \
		   san_tx(c) >= 100 * 1000 * 1000:
			# COPY: the head on TCP before the switch point is the
			# few ms of the upgrade (a few MB at loopback speed)
			on_san(c, 'backend of a COPY', share=0.95)
			big += 1
	check(big >= 2, 'postgresql: %d backend connections moved 100 MB on '
	      'shm (COPY out and in), expected 2' % big)
	clients = [c for x in st if x['program'].startswith(('psql',
								'pgbench'))
		   for c in by_pid(st, x['pid'])]
	for c in clients:
		if not run.short_lived(c):
			on_san(c, 'client ' + c['program'])
	return ('pgbench %.0f tps, 0 failed; COPY %d MB out and back, sha256 '
		'equal; %d backends on shm, %.2f%% of their bytes, %.2f%% after '
		'the switch point' %
		(tps or 0, size // 1000000, len(held),
		 100.0 * san / (san + tcp), 100.0 * san_after / max(1, after)))



def returned(c, what, first):
	"""c was carried by shm (at least first bytes each way there before a
	change of hands), then returned to TCP mid-stream (a downgrade: state
	TCP, fallback reason none) and stayed there (SDP_REUPGRADE=0:
	docs/protocol.md 2.8)."""
	check(c['state'] == run.TCP_STATE and c['fallback'] == 'none' and
	      c['provider'] == 'shm' and san_tx(c) + c['tx_tcp'] >= first and
	      san_rx(c) + c['rx_tcp'] >= first and
	      san_tx(c) + san_rx(c) >= first,
	      '%s: not carried first, then returned to TCP: %s' %
	      (what, fmt_conn(c)))


def again(c, what, first, rest, heads, parent=None):
	"""c was carried by shm (at least first bytes each way there before a
	change of hands), returned to TCP for it, and carried again once one
	process held it (docs/protocol.md 2.8): state SAN, first + rest bytes
	each way, a switch point of the upgrade again in the log (heads:
	switch_points(every=True)) each way, and of the bytes after it at
	least AFTER_SHARE on shm: every byte on TCP is one of a head (before
	the first switch point, or between the downgrade and the later
	one). A forked child's counters start with its parent's, whose
	switch points (parent: its pid) count too. Returns the share on shm of all its bytes, and of those after
	the switch points (the lower of the two directions), in %."""
	check(c['state'] == run.SAN_STATE and c['provider'] == 'shm',
	      '%s: not carried again: %s' % (what, fmt_conn(c)))
	h = heads.get((c['pid'], c['fd']), [[], []])
	if parent:
		p = heads.get((parent, c['fd']), [[], []])
		h = [p[0] + h[0], p[1] + h[1]]
	least = 100.0
	for name, san, tcp, hs in (('tx', san_tx(c), c['tx_tcp'], h[0]),
				   ('rx', san_rx(c), c['rx_tcp'], h[1])):
		check(hs and san + tcp >= first + rest,
		      '%s: %s %d bytes (need %d), switch points %s in the log: '
		      '%s' % (what, name, san + tcp, first + rest, hs,
			      fmt_conn(c)))
		after = tcp - sum(hs)
		check(after >= 0 and san >= AFTER_SHARE * (san + after),
		      '%s: %s %d bytes on TCP after the switch points %s, %d '
		      'on shm (need %.0f%%): %s' % (what, name, after, hs, san,
						   100 * AFTER_SHARE,
						   fmt_conn(c)))
		least = min(least, 100.0 * san / max(1, san + after))
	return 100.0 * (san_tx(c) + san_rx(c)) / max(1, moved(c)), least


def carried_fork(ctx, reup, how='fork'):
	"""A client echoes 16 MiB on a connection the SAN carries, forks,
	and its parent closes its copy; the child echoes 100 MiB more. The
	bytes are exact across the return to TCP at the fork (what had
	arrived on the SAN unread is read from the buffer both processes
	share). With reup (SDP_REUPGRADE=1 on both ends) the child, left
	alone with the connection, upgrades it again: both ends carried, 95%
	of the bytes on shm; with SDP_REUPGRADE=0 the rest goes on TCP.
	how: os.fork, or a clone or clone3 through syscall() ('raw',
	'raw-clone3'), which runs no pthread_atfork handler; 'raw-newpid'
	puts the child in a pid namespace of its own, where no holder can
	be told apart: the rest goes on TCP whatever SDP_REUPGRADE says."""
	env = dict(DEBUG, SDP_REUPGRADE=1 if reup else 0)
	first, rest = 16 * MIB, 100 * MIB
	port = free_port()
	srv = ctx.spawn('echo-server', [PY, run.PEERS, 'echo-server',
					str(port), '--mode', 'threads'], env=env)
	ctx.wait_listen(port, srv)
	cli = ctx.run('carried-fork-client', [PY, HANDS, 'carried-fork-client',
		str(port), str(first), str(rest), how], 240, ok=None, env=env)
	res = cli.json_lines()
	check(cli.p.returncode == 0 and len(res) == 1 and res[0]['ok'] and
	      res[0]['sent'] == first + rest,
	      'carried fork client exit %d: %s; stderr %s' %
	      (cli.p.returncode, res, cli.err()[-600:]))
	ctx.stop(srv)
	st = ctx.stats()
	if how == 'raw-newpid':
		# the child publishes no statistics (its pid would name
		# another process outside its namespace): the server's end
		# shows the path
		srv_conns = by_pid(st, srv.pid)
		check(len(srv_conns) == 1, 'server: %d connections: %s' % (
			len(srv_conns), '; '.join(fmt_conn(c)
						 for c in run.conns(st))))
		# the server, alone with its end, offers the upgrade again
		# and gives it up: no answer comes. Cut when the connection
		# ends first; when its deadline passes first (a slow run:
		# under ASan, on a busy host), it found no provider listener
		# at the client, which is provider-connect
		c = srv_conns[0]
		check(c['state'] == run.TCP_STATE and c['provider'] == 'shm'
		      and c['fallback'] in ('none', 'cut', 'provider-connect')
		      and
		      san_tx(c) + san_rx(c) >= first and
		      c['tx_tcp'] >= rest and c['rx_tcp'] >= rest,
		      'server: not carried first, then on TCP: %s' %
		      fmt_conn(c))
		return ('%d MiB carried, then %d MiB by a child in its own pid '
			'namespace on TCP, exact' % (first >> 20, rest >> 20))
	kid = res[0]['pid']
	check(kid != cli.pid, 'the client did not fork')
	held = held_by(st, [kid])
	check(len(held) == 1, 'carried fork: %d connections in the child: %s'
	      % (len(held), '; '.join(fmt_conn(c) for c in run.conns(st))))
	if not reup:
		returned(held[0], 'client child', first)
		for c in by_pid(st, srv.pid):
			returned(c, 'server', first)
		return '%d MiB carried, then %d MiB by the child on TCP, exact' % (
			first >> 20, rest >> 20)
	heads = switch_points(srv.err(), cli.err(), every=True)
	share, after = again(held[0], 'client child', first, rest, heads,
			     cli.pid)
	for c in by_pid(st, srv.pid):
		again(c, 'server', first, rest, heads)
	return ('%d MiB carried, then %d MiB by the child, carried again: '
		'%.2f%% on shm after the switch points, %.2f%% of all, exact' %
		(first >> 20, rest >> 20, after, share))


@run.test('carried-fork')
def t_carried_fork(ctx):
	return carried_fork(ctx, False)


@run.test('carried-fork-again')
def t_carried_fork_again(ctx):
	return carried_fork(ctx, True)


@run.test('carried-raw-clone')
def t_carried_raw_clone(ctx):
	return carried_fork(ctx, True, 'raw')


@run.test('carried-raw-clone3')
def t_carried_raw_clone3(ctx):
	return carried_fork(ctx, True, 'raw-clone3')


@run.test('carried-raw-clone-newpid')
def t_carried_raw_clone_newpid(ctx):
	if os.geteuid() != 0:
		raise Skip('a new pid namespace needs root')
	return carried_fork(ctx, True, 'raw-newpid')


def stream_shas(seed, first, total):
	"""The sha256 hex of the first bytes, and of the rest, of the stream
	of total bytes an echo client sends on its connection SEED."""
	head, tail = hashlib.sha256(), hashlib.sha256()
	at = 0
	for d in chunks(total, seed):
		cut = max(0, min(len(d), first - at))
		head.update(d[:cut])
		tail.update(d[cut:])
		at += len(d)
	return head.hexdigest(), tail.hexdigest()


def scm_carried(ctx, reup):
	"""The acceptor echoes the first 16 MiB of a connection itself (the
	SAN carries it), then passes the socket to a worker with SCM_RIGHTS
	and closes its copy; the worker echoes 100 MiB more. Exact across
	the return to TCP at the pass: the client's bytes that had come on
	the SAN when the acceptor stopped reading reach the worker first,
	and the client, blocked in a write for credits when the acceptor
	stopped reading, goes on writing on TCP. Each process's part is
	checked by its hash: the acceptor echoed exactly the client's first
	16 MiB, the worker exactly the rest, in order. With reup
	(SDP_REUPGRADE=1 on both ends), once the acceptor closed its copy
	the worker holds the connection alone and upgrades it again;
	SDP_REUPGRADE=0 keeps it on TCP."""
	env = dict(DEBUG, SDP_REUPGRADE=1 if reup else 0)
	first, rest = 16 * MIB, 100 * MIB
	port = free_port()
	srv = ctx.spawn('scm-server', [PY, HANDS, 'scm-carried-server',
				       str(port), str(first)], env=env)
	ctx.wait_listen(port, srv)
	cli = echo_clients(ctx, port, 1, first + rest, env, 240)
	ctx.stop(srv)
	served = srv.json_lines()
	check(len(served) == 2 and
	      sorted(r['echoed'] for r in served) == [first, rest],
	      'SCM_RIGHTS of a carried connection: echo results %s; stderr %s'
	      % (served, srv.err()[-600:]))
	worker = [r['pid'] for r in served if r['echoed'] == rest][0]
	check(worker != srv.pid, 'the acceptor echoed all: nothing passed?')
	want = stream_shas(0, first, first + rest)
	got = ([r['sha'] for r in served if r['pid'] == srv.pid] +
	       [r['sha'] for r in served if r['pid'] == worker])
	check(got == list(want), 'SCM_RIGHTS of a carried connection: the '
	      'acceptor and the worker did not echo the first %d bytes and '
	      'the rest: sha256 %s, expected %s' % (first, got, list(want)))
	st = ctx.stats()
	heads = switch_points(srv.err(), cli.err(), every=True)
	for c in by_pid(st, cli.pid):
		if reup:
			again(c, 'client', first, rest, heads)
		else:
			returned(c, 'client', first)
	held = held_by(st, [worker])
	check(len(held) == 1, 'SCM_RIGHTS: %d connections in the worker: %s'
	      % (len(held), '; '.join(fmt_conn(c) for c in run.conns(st))))
	# it echoes what it was given: the bytes that had come on the SAN
	# and the acceptor had not read (handed over with the socket, and not
	# counted), then the rest, carried again once the acceptor closed
	if reup:
		share, after = again(held[0], 'SCM_RIGHTS worker', 0,
				     rest - 16 * MIB, heads)
	else:
		check(held[0]['state'] == run.TCP_STATE and
		      san_tx(held[0]) + san_rx(held[0]) == 0 and
		      held[0]['tx_tcp'] == rest and
		      rest - 16 * MIB <= held[0]['rx_tcp'] <= rest,
		      'SCM_RIGHTS worker: not on TCP: %s' % fmt_conn(held[0]))
	if not reup:
		return '%d MiB carried, then %d MiB by the worker on TCP, ' \
			'exact' % (first >> 20, rest >> 20)
	return ('%d MiB carried, then %d MiB by the worker, carried again: '
		'%.2f%% on shm after the switch points, %.2f%% of all the '
		'worker\'s bytes, exact' % (first >> 20, rest >> 20, after,
					    share))


@run.test('scm-carried')
def t_scm_carried(ctx):
	return scm_carried(ctx, False)


@run.test('scm-carried-again')
def t_scm_carried_again(ctx):
	return scm_carried(ctx, True)

def sandboxed(ctx, cmd):
	"""sshd -r's shape (cmd sandbox-server): the server echoes the first
	4 MiB (carried), then forks a child that steps into a seccomp sandbox
	and echoes 32 MiB more on TCP, its parent holding a copy meanwhile;
	or (sandbox-self-server) the process that accepted steps into the
	sandbox itself. The client reads only after poll said POLLIN, its
	socket non-blocking: the peer's downgrade marker, taken by the
	switch, must not leave it told "readable" with nothing to read (an
	EAGAIN that ssh takes for a broken connection). A sandboxed process
	never upgrades again (its filter may forbid the provider's calls),
	so neither end is carried at the end: the client's upgrade again
	finds no peer and stays on TCP."""
	first, rest = 4 * MIB, 32 * MIB
	port = free_port()
	srv = ctx.spawn('sandbox-server', [PY, HANDS, cmd, str(port),
					   str(first)])
	ctx.wait_listen(port, srv)
	cli = ctx.run('poll-client', [PY, HANDS, 'poll-client', str(port),
				      str(first), str(rest)], 120, ok=None)
	srv.wait(30)
	res = cli.json_lines()
	check(cli.p.returncode == 0 and len(res) == 1 and res[0]['ok'] and
	      res[0]['sent'] == first + rest,
	      'poll client exit %d: %s; stderr %s' %
	      (cli.p.returncode, res, cli.err()[-600:]))
	served = srv.json_lines()
	check(len(served) == 1 and served[0]['echoed'] == rest and
	      (served[0]['pid'] != srv.pid) == (cmd == 'sandbox-server'),
	      'sandboxed echo: %s; stderr %s' % (served, srv.err()[-600:]))
	check(res[0]['eagain'] == 0, 'the client\'s read answered EAGAIN %d '
	      'time(s) after poll said POLLIN' % res[0]['eagain'])
	st = ctx.stats()
	cs = by_pid(st, cli.pid) + held_by(st, [served[0]['pid']])
	check(len(cs) == 2 and all(
		c['provider'] == 'shm' and c['state'] != run.SAN_STATE
		for c in cs) and san_tx(cs[0]) + san_rx(cs[0]) >= first,
	      'client and sandboxed server: not carried first, then on TCP: '
	      '%s' % '; '.join(fmt_conn(c) for c in cs))
	return ('%d MiB carried, then %d MiB on TCP from a sandboxed %s, '
		'exact, no EAGAIN after POLLIN' % (
			first >> 20, rest >> 20,
			'child' if cmd == 'sandbox-server' else 'server'))


@run.test('sandbox-fork')
def t_sandbox_fork(ctx):
	return sandboxed(ctx, 'sandbox-server')


@run.test('sandbox-self')
def t_sandbox_self(ctx):
	return sandboxed(ctx, 'sandbox-self-server')


def sink_across(ctx, server, what):
	"""4 MiB of round trips carried, then 4 MiB more that the server
	(server, a hands_peers command) lets pile up before it hands the
	connection over (what: 'fork' or 'exec'), then the client's
	shutdown; the new holder answers the length and SHA-256 of what it
	read. Returns the client's connection."""
	first, rest = 4 * MIB, 4 * MIB
	port = free_port()
	srv = ctx.spawn(server, [PY, HANDS, server, str(port), str(first)])
	ctx.wait_listen(port, srv)
	cli = ctx.run('send-shut-client', [PY, HANDS, 'send-shut-client',
		      str(port), str(first), str(rest)], 60, ok=None)
	srv.wait(30)
	res = cli.json_lines()
	check(cli.p.returncode == 0 and len(res) == 1 and res[0]['ok'],
	      'send then shutdown across a %s: %s; client stderr %s; server '
	      'stderr %s' % (what, res, cli.err()[-400:], srv.err()[-400:]))
	cs = by_pid(ctx.stats(), cli.pid)
	check(len(cs) == 1 and cs[0]['provider'] == 'shm' and
	      san_tx(cs[0]) + san_rx(cs[0]) > 0,
	      'client: not carried before the %s: %s' %
	      (what, '; '.join(fmt_conn(c) for c in cs)))
	return cs[0]


@run.test('fork-shutdown')
def t_fork_shutdown(ctx):
	"""The server forks while the client, its connection carried, is
	held by credits in a 4 MiB write; the client then shuts its sending
	side down without reading. The client answers the server's DOWNGRADE
	inside its write, so its end is still carried (the peer's DOWNGRADE
	unread) when it shuts down: the end of its stream must go on TCP,
	behind its marker (a FIN message after the DOWNGRADE is a protocol
	error that closes the connection). The server's child answers the
	length and SHA-256 of what it read."""
	sink_across(ctx, 'fork-sink-server', 'fork')
	return '4 MiB carried, 4 MiB more and a shutdown across the fork, exact'


@run.test('exec-unread')
def t_exec_unread(ctx):
	"""The server, its connection carried, lets 4 MiB of the client's
	pile up unread, then execs a new program on the connection (an
	inetd-style hand-over): the bytes that came on the SAN before the
	exec reach the new program through a memory file its switch maps,
	the rest on TCP. The new program answers the length and SHA-256 of
	what it read."""
	c = sink_across(ctx, 'exec-sink-server', 'exec')
	return ('4 MiB carried, 4 MiB more across the exec of the server, '
		'exact (%d bytes sent on the SAN)' % san_tx(c))


def exec_image(st, pid):
	"""The stats of pid's last program image: after an exec the new
	program's switch makes a file of its own (kept as sdp-stat.PID~N)."""
	def n(s):
		tail = os.path.basename(s['file']).split('~')
		return int(tail[1]) if len(tail) > 1 else 0
	mine = [s for s in st if s['pid'] == pid]
	check(mine, 'no stats file of pid %d' % pid)
	return [max(mine, key=n)]


def exec_again(ctx, fork):
	"""The server echoes the first 16 MiB of a connection (the SAN
	carries them), then a new program exec'd on the connection echoes
	100 MiB more: with fork, in the server's child, while the parent
	holds its copy until that program echoed its first MiB (so the
	program uses the connection while another process still holds it,
	then is left alone with it); without, in the server process itself.
	SDP_REUPGRADE=1 on both ends: the bytes that came on the SAN and
	were not read reach the new program first (through the memory file
	its switch maps), and that switch, given the connection's key, the
	kernel's counts at the downgrade markers and the holders' record,
	upgrades it again once it holds the connection alone: both ends
	carried at the end, 99% of the bytes after the switch points on shm,
	each part of the echo hashed."""
	env = dict(DEBUG, SDP_REUPGRADE=1)
	first, rest = 16 * MIB, 100 * MIB
	cmd = 'exec-again-server' if fork else 'exec-self-server'
	port = free_port()
	srv = ctx.spawn(cmd, [PY, HANDS, cmd, str(port), str(first)], env=env)
	ctx.wait_listen(port, srv)
	cli = echo_clients(ctx, port, 1, first + rest, env, 240)
	srv.wait(30)
	served = srv.json_lines()
	check(len(served) == 2 and
	      sorted(r['echoed'] for r in served) == [first, rest],
	      'exec of a carried connection: echo results %s; stderr %s' %
	      (served, srv.err()[-600:]))
	prog = [r['pid'] for r in served if r['echoed'] == rest][0]
	check((prog != srv.pid) == fork, 'exec of a carried connection: the '
	      'program exec\'d ran in pid %d, the server is %d' %
	      (prog, srv.pid))
	want = stream_shas(0, first, first + rest)
	got = ([r['sha'] for r in served if r['echoed'] == first] +
	       [r['sha'] for r in served if r['echoed'] == rest])
	check(got == list(want), 'exec of a carried connection: the server '
	      'and the program exec\'d did not echo the first %d bytes and '
	      'the rest: sha256 %s, expected %s' % (first, got, list(want)))
	st = ctx.stats()
	heads = switch_points(srv.err(), cli.err(), every=True)
	for c in by_pid(st, cli.pid):
		again(c, 'client', first, rest, heads)
	held = [c for c in by_pid(exec_image(st, prog), prog) if moved(c)]
	check(len(held) == 1, 'exec: %d connections in the program exec\'d: '
	      '%s' % (len(held), '; '.join(fmt_conn(c) for c in run.conns(st))))
	# its counters start at the exec: the bytes that came on the SAN
	# before it are read from the memory file (not counted), and so do
	# its switch points, logged under the pid of the server's own
	mark = 'sdp-switch[%d] debug: fd %d: inherited across exec' % (
		prog, held[0]['fd'])
	err = srv.err()
	check(mark in err, 'exec: no "%s" in the log' % mark)
	heads = switch_points(err[err.index(mark):], every=True)
	share, after = again(held[0], 'program exec\'d', 0, rest - 16 * MIB,
			     heads)
	return ('%d MiB carried, then %d MiB by a program exec\'d %s, carried '
		'again: %.2f%% on shm after the switch points, %.2f%% of all '
		'its bytes, exact' % (first >> 20, rest >> 20,
				      'in the forked child, once the parent '
				      'closed' if fork else 'in the server',
				      after, share))


@run.test('exec-again')
def t_exec_again(ctx):
	return exec_again(ctx, True)


@run.test('exec-self-again')
def t_exec_self_again(ctx):
	return exec_again(ctx, False)


def socat_nofork(ctx, reup):
	"""inetd-style with the program on the socket itself: socat accepts,
	forks a child per connection, and the child execs the program with
	the connection on its stdin and stdout (EXEC with nofork: socat's
	own fd of it is close-on-exec, the copies on 0 and 1 are not). 64
	MiB echoed exact: the client's hello, which may come after the exec,
	never reaches the program. The upgrade, pending at the exec, is given
	up there (cut), so both ends stay on TCP; with SDP_REUPGRADE=1 too
	(reup): the program has the connection on its standard streams,
	which it may use through stdio, out of the switch's sight
	(docs/protocol.md 2.8, "Across exec")."""
	need('socat')
	n = 64 * MIB
	env = dict(DEBUG, SDP_REUPGRADE=1 if reup else 0)
	port = free_port()
	srv = ctx.spawn('socat', ['socat', 'TCP-LISTEN:%d,bind=127.0.0.1,'
				  'fork,reuseaddr' % port,
				  'EXEC:%s %s stdio-echo 0,nofork' % (PY, HANDS)],
			env=env)
	ctx.wait_listen(port, srv)
	cli = echo_clients(ctx, port, 1, n, env)
	ctx.stop(srv)
	st = ctx.stats()
	for c in by_pid(st, cli.pid):
		check(c['state'] == run.TCP_STATE and moved(c) == 2 * n and
		      san_tx(c) + san_rx(c) == 0,
		      'socat nofork: client not on TCP: %s' % fmt_conn(c))
	return '%d MiB echoed exact by a program exec\'d on the socket\'s ' \
		'standard streams, on TCP' % (n >> 20)


@run.test('socat-nofork')
def t_socat_nofork(ctx):
	return socat_nofork(ctx, False)


@run.test('socat-nofork-again')
def t_socat_nofork_again(ctx):
	return socat_nofork(ctx, True)


@run.test('exec-pending')
def t_exec_pending(ctx):
	"""A server accepts and at once forks a child that execs a new
	program on the connection (on a descriptor of its own, not a
	standard stream), before the first upgrade can be done; the parent
	closes its copy. SDP_REUPGRADE=1 on both ends: the upgrade, pending
	at the exec, goes on in the new program (its state handed over in
	the exec's memory file), which finishes it once it holds the
	connection alone: 64 MiB echoed exact, both ends carried, 99% of the
	bytes after the switch points on shm."""
	env = dict(DEBUG, SDP_REUPGRADE=1)
	n = 64 * MIB
	port = free_port()
	srv = ctx.spawn('exec-pending-server', [PY, HANDS,
			'exec-pending-server', str(port)], env=env)
	ctx.wait_listen(port, srv)
	cli = echo_clients(ctx, port, 1, n, env)
	srv.wait(30)
	served = srv.json_lines()
	check(len(served) == 1 and served[0]['echoed'] == n and
	      served[0]['pid'] != srv.pid,
	      'exec of a pending upgrade: echo results %s; stderr %s' %
	      (served, srv.err()[-600:]))
	prog = served[0]['pid']
	st = ctx.stats()
	heads = switch_points(srv.err(), cli.err())
	for c in by_pid(st, cli.pid):
		on_san(c, 'client', n, n)
		after_switch(c, heads, 'client')
	held = [c for c in by_pid(exec_image(st, prog), prog) if moved(c)]
	check(len(held) == 1, 'exec: %d connections in the program exec\'d: '
	      '%s' % (len(held), '; '.join(fmt_conn(c) for c in run.conns(st))))
	on_san(held[0], 'program exec\'d', n, n)
	san, after = after_switch(held[0], heads, 'program exec\'d')
	return ('%d MiB echoed exact by a program exec\'d before the first '
		'upgrade was done, which finished it: %.2f%% of the bytes after '
		'the switch points on shm' % (n >> 20,
					      100.0 * san / max(1, after)))


@run.test('exec-stale-env')
def t_exec_stale_env(ctx):
	"""A client echoes 1 MiB, then execs itself with a stale or hostile
	SDP_EXEC_HELLO_SKIP naming its socket (a memory file of junk, one of
	another inode, an exec state with fields out of range, a buffer
	larger than its file, other providers, a pending upgrade in no
	state there is; cut short, negative and overflowing numbers,
	another socket's inode), eleven images in turn,
	each echoing 1 MiB more. Every echo is exact, no image crashes, and
	each usable-looking state that is not is refused with a warning
	naming what was wrong (docs/fallback-reasons.md, "none (0), after an
	exec")."""
	port = free_port()
	srv = ctx.spawn('echo-server', [PY, run.PEERS, 'echo-server',
					str(port), '--mode', 'threads'])
	ctx.wait_listen(port, srv)
	# no state of the client's own joins the entries given: its switch
	# makes none to hand on with SDP_REUPGRADE=0
	cli = ctx.run('stale-env-client', [PY, HANDS, 'stale-env-client',
					   str(port)], 120, ok=None,
		      env={'SDP_REUPGRADE': 0})
	ctx.stop(srv)
	res = cli.json_lines()
	check(cli.p.returncode == 0 and len(res) == 1 and res[0]['ok'] and
	      res[0]['stages'] == 11,
	      'stale environment: exit %d, %s; stderr %s' %
	      (cli.p.returncode, res, cli.err()[-800:]))
	err = cli.err()
	for why in ('not a state this switch writes',
		    'the memory file named is not there',
		    'its fields are out of range',
		    'its buffer\'s sizes do not hold',
		    'this program has other providers',
		    'its upgrade\'s fields are out of range'):
		check('with the state to upgrade it again, but %s' % why in err,
		      'stale environment: no warning "%s"; stderr %s' %
		      (why, err[-1500:]))
	return '11 execs with a stale or hostile entry, 12 MiB echoed exact, ' \
		'6 states refused by name'


def all_conns(st, prefix):
	"""Every connection (not a listener, not a handed-over copy) of the
	processes whose program name starts with prefix."""
	return [c for x in st if x['program'].startswith(prefix)
		for c in by_pid(st, x['pid'])]


def moved(c):
	return san_tx(c) + san_rx(c) + c['tx_tcp'] + c['rx_tcp']


def tree_sha(root):
	"""SHA-256 over the relative paths and contents of a directory tree."""
	import hashlib
	h = hashlib.sha256()
	for d, dirs, files in sorted(os.walk(root)):
		dirs.sort()
		for f in sorted(files):
			p = os.path.join(d, f)
			h.update(os.path.relpath(p, root).encode() + b'\0')
			h.update(run.sha_file(p).encode())
	return h.hexdigest()


@run.test('rsync-daemon')
def t_rsync_daemon(ctx):
	"""rsync --daemon (accepts, forks a child per connection) and the
	rsync client, both preloaded: a 112 MiB tree pushed and pulled
	back, hashed. The daemon's child holds its connection alone and
	upgrades it; then the receiving end of each transfer forks its
	receiver, which reads the socket while its parent (the generator)
	writes it: two processes use that end at once, so the connection
	returns to TCP (both ends: the SAN carried the start) and stays
	there, with no byte lost or added. The other end, held by one
	process, upgrades again (docs/protocol.md 2.8), which its peer never
	answers: it waits (state UPGRADING, reason none) and gives that up
	after SDP_UPGRADE_TIMEOUT_MS (state TCP, reason timeout or
	provider-connect), or when its process exits (reason ended), all
	its bytes on TCP meanwhile."""
	need('rsync')
	src, back, mod = ctx.path('src'), ctx.path('back'), ctx.path('mod')
	os.mkdir(src)
	os.mkdir(mod)
	run.make_random_file(os.path.join(src, 'big.bin'), 96 * MIB)
	os.mkdir(os.path.join(src, 'sub'))
	for i in range(16):
		run.make_random_file(os.path.join(src, 'sub', 'f%02d' % i), MIB)
	port = free_port()
	conf = ctx.path('rsyncd.conf')
	with open(conf, 'w') as f:
		f.write('use chroot = no\nuid = %d\ngid = %d\n'
			'pid file = %s\n[m]\npath = %s\nread only = false\n' %
			(os.getuid(), os.getgid(), ctx.path('rsyncd.pid'), mod))
	srv = ctx.spawn('rsyncd', ['rsync', '--daemon', '--no-detach',
		'--config=' + conf, '--address=127.0.0.1', '--port=%d' % port,
		'--log-file=' + ctx.path('rsyncd.log')])
	ctx.wait_listen(port, srv)
	url = 'rsync://127.0.0.1:%d/m/' % port
	ctx.run('rsync-push', ['rsync', '-a', '--whole-file', src + '/',
			       url + 'tree/'], 120)
	ctx.run('rsync-pull', ['rsync', '-a', '--whole-file', url + 'tree/',
			       back + '/'], 120)
	ctx.stop(srv)
	h0, h1, h2 = (tree_sha(src), tree_sha(os.path.join(mod, 'tree')),
		      tree_sha(back))
	check(h0 == h1 == h2, 'rsync: tree sha %s, pushed %s, pulled back %s'
	      % (h0[:16], h1[:16], h2[:16]))
	st = ctx.stats()
	big = [c for c in all_conns(st, 'rsync') if moved(c) >= 96 * MIB]
	check(len(big) == 4, 'rsync: %d connection ends moved the tree, '
	      'expected 4 (push and pull, client and daemon child): %s' %
	      (len(big), '; '.join(fmt_conn(c) for c in run.conns(st))))
	check(all(c['pid'] != srv.pid for c in big),
	      'rsync: the daemon itself moved a tree: no fork?')
	# carried first, then returned to TCP; or never upgraded: the
	# daemon speaks first (its greeting), and a client whose provider
	# listener was not open yet reads it where it looked for the
	# server's hello (docs/protocol.md 2.1 step 5: bad-hello and
	# no-peer-switch), or the fork came before the upgrade was done
	downgraded = 0
	for c in big:
		carried = c['provider'] == 'shm' and san_tx(c) + san_rx(c) > 0
		dg = carried and c['state'] == run.TCP_STATE and \
			c['fallback'] in ('none', 'timeout', 'provider-connect',
					  'ended')
		again = carried and c['state'] == 'UPGRADING' and \
			c['fallback'] == 'none'
		never = (c['state'] == run.TCP_STATE and
			 c['fallback'] in ('bad-hello', 'no-peer-switch', 'cut',
					   'peer-fallback') and
			 san_tx(c) + san_rx(c) == 0)
		check(dg or again or never,
		      'rsync: a connection neither returned to TCP by the fork '
		      'of its receiver nor left on TCP before its upgrade: %s'
		      % fmt_conn(c))
		downgraded += dg or again
	return ('112 MiB tree pushed and pulled back, sha256 equal; %d of 4 '
		'connection ends carried by shm until rsync forked its '
		'receiver' % downgraded)


@run.test('sshd')
def t_sshd(ctx):
	"""OpenSSH's sshd (-D, its own configuration, host key and port) and
	scp, both preloaded, as root with a key: 200 MiB up and back down,
	hashed. sshd accepts, forks, puts the connection on fds 0 and 1 and
	re-execs itself; the new sshd moves it off them (a dup of 0, then
	/dev/null on 0 and 1), forks its pre-authentication child, which
	enters a seccomp sandbox and speaks on the socket past the switch,
	and carries on alone once that child is gone (root's session is
	the monitor's own). The upgrade waits through all of it and is
	committed with the kernel's count of the bytes on TCP
	(docs/protocol.md 2.7); the session's fork for the sftp server
	returns it to TCP, and the monitor, alone again once the child
	closed its copy, upgrades it again (2.8). Each end of each transfer
	moved at least 99% of its bytes on shm."""
	need('/usr/sbin/sshd', 'scp', 'ssh', 'ssh-keygen')
	if os.geteuid() != 0:
		raise Skip('sshd runs as root here')
	d = ctx.path('ssh')
	os.mkdir(d, 0o700)
	for k in ('host', 'id'):
		subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '',
				'-f', os.path.join(d, k)], check=True)
	with open(os.path.join(d, 'id.pub')) as f, \
			open(os.path.join(d, 'authorized_keys'), 'w') as g:
		g.write(f.read())
	os.makedirs('/run/sshd', mode=0o755, exist_ok=True)
	port = free_port()
	conf = os.path.join(d, 'sshd_config')
	with open(conf, 'w') as f:
		f.write('Port %d\nListenAddress 127.0.0.1\nHostKey %s\n'
			'PidFile %s\nAuthorizedKeysFile %s\n'
			'PermitRootLogin prohibit-password\nStrictModes no\n'
			'UsePAM no\nSubsystem sftp internal-sftp\n' %
			(port, os.path.join(d, 'host'), ctx.path('sshd.pid'),
			 os.path.join(d, 'authorized_keys')))
	src, up, down = ctx.path('src'), ctx.path('up'), ctx.path('down')
	run.make_random_file(src, 200 * MIB)
	# the switch's log of every process, for the switch points
	log = ctx.path('switch.log')
	env = dict(DEBUG, SDP_LOG_FILE=log)
	srv = ctx.spawn('sshd', ['/usr/sbin/sshd', '-D', '-e', '-f', conf],
			env=env)
	ctx.wait_listen(port, srv)
	opts = ['-i', os.path.join(d, 'id'), '-P', str(port),
		'-o', 'StrictHostKeyChecking=no',
		'-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=error',
		'-o', 'BatchMode=yes']
	ctx.run('scp-up', ['scp'] + opts + [src, 'root@127.0.0.1:' + up], 120,
		env=env)
	ctx.run('scp-down', ['scp'] + opts + ['root@127.0.0.1:' + up, down],
		120, env=env)
	ctx.stop(srv)
	h0, h1, h2 = run.sha_file(src), run.sha_file(up), run.sha_file(down)
	check(h0 == h1 == h2, 'sshd: sha %s, up %s, down %s' %
	      (h0[:16], h1[:16], h2[:16]))
	st = ctx.stats()
	# scp execs ssh, and sshd itself, in the same pid: one stats file
	# per program image
	big = [dict(c, program=x['program'], pid=x['pid'])
	       for x in st if x['program'] in ('ssh', 'sshd')
	       for c in x['conns'] if c['state'] != 'LISTENER' and
	       moved(c) >= 200 * MIB]
	check(len(big) == 4, 'sshd: %d connection ends moved the file, '
	      'expected 4 (up and down, ssh and sshd): %s' %
	      (len(big), '; '.join(fmt_conn(c) for c in run.conns(st))))
	with open(log, errors='replace') as f:
		heads = switch_points(f.read(), every=True)
	# every byte on TCP is one of a head: before the first switch point,
	# or between a downgrade (a fork) and the next one. A head is the
	# kernel's count, which holds the bytes the sandboxed pre-auth child
	# moved past its switch (counted by no process): TCP less the heads
	# is the least that went on TCP after the switch points
	shares, least = [], 100.0
	for c in big:
		h = heads.get((c['pid'], c['fd']), [[], []])
		check(c['state'] == run.SAN_STATE and c['provider'] == 'shm' and
		      h[0] and h[1], 'sshd: a connection end not carried, or no '
		      'switch point of it in the log (%s): %s' % (h, fmt_conn(c)))
		for san, tcp, hs in ((san_tx(c), c['tx_tcp'], h[0]),
				     (san_rx(c), c['rx_tcp'], h[1])):
			after = max(0, tcp - sum(hs))
			check(san >= 0.99 * (san + after),
			      'sshd: %d bytes on TCP after the switch points %s, '
			      '%d on shm: %s' % (after, hs, san, fmt_conn(c)))
			least = min(least, 100.0 * san / max(1, san + after))
		shares.append((100.0 * (san_tx(c) + san_rx(c)) / moved(c),
			       sum(h[0]) + sum(h[1])))
	return ('200 MiB up and down by scp, sha256 equal; 4 connection ends '
		'carried by shm, at least %.2f%% of the bytes after the switch '
		'points (%s of all; TCP heads %s bytes)' % (least,
			', '.join('%.2f%%' % a for a, _ in shares),
			', '.join(str(b) for _, b in shares)))


@run.test('git-daemon')
def t_git_daemon(ctx):
	"""git daemon (accepts, forks and execs `git daemon --serve` with
	the socket as stdin and stdout, which runs upload-pack the same way)
	and git clone over git://, both preloaded: a repository with 24 MiB
	of incompressible history cloned, its HEAD, fsck and files compared
	with the source's. The daemon's child execs a new program with the
	connection before its upgrade is done: the upgrade is given up
	there (cut), and the server never connects, so that not one switch
	byte reaches a program that may not run the switch (docs/protocol.md
	2.2a). The client's end stays on TCP too: cut when the clone and the
	child it forked both use the connection, local-setup when its
	provider listener cannot open again meanwhile, timeout when its
	wait for the server ran out first."""
	need('git')
	repo, dst = ctx.path('repo'), ctx.path('clone')
	genv = {'GIT_CONFIG_NOSYSTEM': '1', 'HOME': ctx.dir,
		'GIT_AUTHOR_NAME': 't', 'GIT_AUTHOR_EMAIL': 't@t',
		'GIT_COMMITTER_NAME': 't', 'GIT_COMMITTER_EMAIL': 't@t'}

	def git(name, args, cwd=None):
		p = ctx.spawn(name, ['git'] + args, preload=False, env=genv,
			      cwd=cwd)
		if p.wait(120):
			raise Fail('git %s: %s' % (' '.join(args),
						   p.err()[-600:]))
		return p.out().strip()
	git('init', ['init', '-q', '-b', 'main', repo])
	for i in range(6):
		run.make_random_file(os.path.join(repo, 'blob%d' % i), 4 * MIB)
		git('add%d' % i, ['add', '-A'], repo)
		git('commit%d' % i, ['commit', '-q', '-m', 'c%d' % i], repo)
	head = git('head', ['rev-parse', 'HEAD'], repo)
	port = free_port()
	srv = ctx.spawn('git-daemon', ['git', 'daemon', '--reuseaddr',
		'--export-all', '--base-path=' + ctx.dir, '--listen=127.0.0.1',
		'--port=%d' % port, ctx.dir], env=genv)
	ctx.wait_listen(port, srv)
	cl = ctx.spawn('git-clone', ['git', 'clone', '-q',
		'git://127.0.0.1:%d/repo' % port, dst], env=genv)
	if cl.wait(120):
		raise Fail('git clone: %s' % cl.err()[-800:])
	ctx.stop(srv)
	got = git('head2', ['rev-parse', 'HEAD'], dst)
	check(got == head, 'git clone: HEAD %s, source %s' % (got, head))
	git('fsck', ['fsck', '--full', '--strict'], dst)
	for i in range(6):
		check(run.sha_file(os.path.join(repo, 'blob%d' % i)) ==
		      run.sha_file(os.path.join(dst, 'blob%d' % i)),
		      'git clone: blob%d differs' % i)
	st = ctx.stats()
	cs = [c for c in all_conns(st, 'git') if moved(c)]
	# the clone's own copy, whatever its label: git's index-pack child,
	# exec'd on the socket, held it too (a copy closed while its upgrade
	# was kept for another holder reads handed-over)
	got_pack = [dict(c, pid=cl.pid) for x in st if x['pid'] == cl.pid
		    for c in x['conns'] if c['rx_tcp'] >= 24 * MIB]
	check(len(got_pack) == 1, 'git clone: the pack did not come on the '
	      'connection of the clone process: %s' %
	      '; '.join(fmt_conn(c) for c in cs))
	for c in cs:
		check(c['state'] == run.TCP_STATE and
		      san_tx(c) + san_rx(c) == 0 and
		      c['fallback'] in ('cut', 'timeout', 'local-setup',
					'bad-hello', 'no-peer-switch',
					'peer-fallback', 'ended',
					'handed-over'),
		      'git: a connection not left on TCP by the exec: %s' %
		      fmt_conn(c))
	return 'git clone of 24 MiB of history, HEAD, fsck and files equal'


if __name__ == '__main__':
	run.TESTS[:] = [t for t in run.TESTS if t[0] in
			('forking-tcp-server', 'connect-then-fork', 'socat-fork',
			 'scm-rights', 'postgresql', 'carried-fork',
			 'carried-fork-again', 'carried-raw-clone',
			 'carried-raw-clone3', 'carried-raw-clone-newpid',
			 'scm-carried', 'scm-carried-again',
			 'sandbox-fork', 'sandbox-self', 'fork-shutdown',
			 'exec-unread', 'exec-again', 'exec-self-again',
			 'exec-pending', 'exec-stale-env', 'socat-nofork',
			 'socat-nofork-again', 'inetd-stderr', 'vsftpd',
			 'rsync-daemon', 'sshd',
			 'git-daemon')]
	sys.exit(run.main())
