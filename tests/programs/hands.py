#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# hands.py - connections that change hands (fork after accept, connect then
# fork, fd passing, inetd-style servers, PostgreSQL) under the switch: the
# bytes hashed, and the process left holding each connection proven to
# carry it on shm from its sdp-stat counters. Same options as run.py:
#   PYTHONPATH=tests/lib hands.py --lib LIB --stat SDP_STAT [TEST...]
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402
from run import (MIB, PY, Skip, check, fmt_conn, san_rx,  # noqa: E402
		 san_tx, by_pid, need, free_port)

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


def echo_clients(ctx, port, conns, nbytes):
	cli = ctx.run('echo-client', [PY, run.PEERS, 'echo-client', str(port),
				      '--conns', str(conns), '--bytes',
				      str(nbytes), '--mode', 'threads'], 120,
		      ok=None)
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
	to, as the client, must hold every connection on shm. Returns their
	pids."""
	port = free_port()
	srv = ctx.spawn(cmd, [PY, HANDS, cmd, str(port)])
	ctx.wait_listen(port, srv)
	cli = echo_clients(ctx, port, conns, nbytes)
	ctx.stop(srv)
	kids = server_children(ctx, srv, conns, nbytes, what)
	check(srv.pid not in kids, parent_msg)
	st = ctx.stats()
	for c in by_pid(st, cli.pid):
		on_san(c, 'client', nbytes, nbytes)
	held = held_by(st, kids)
	check(len(held) == conns, '%s: %d connections held, expected %d: %s' %
	      (what, len(held), conns, '; '.join(
		      fmt_conn(c) for c in conns_of(st, kids))))
	for c in held:
		on_san(c, what, nbytes, nbytes)
	return kids


@run.test('forking-tcp-server')
def t_forking(ctx):
	"""socketserver.ForkingTCPServer: the parent accepts and forks, the
	child echoes. The child, left alone with the connection, upgrades."""
	conns, nbytes = 4, 16 * MIB
	kids = handed_echo(ctx, 'fork-server', conns, nbytes,
			   'ForkingTCPServer child', 'the parent echoed: no fork?')
	return '%d x %d MiB echoed by %d forked children, all on shm' % (
		conns, nbytes >> 20, len(kids))


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
	handed_echo(ctx, 'scm-server', conns, nbytes, 'SCM_RIGHTS worker',
		    'the acceptor echoed: nothing passed?')
	return '%d x %d MiB echoed by a worker given the sockets, on shm' % (
		conns, nbytes >> 20)


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
	env = ['env'] + (['LD_PRELOAD=' + lib,
			  'SDP_STAT_DIR=' + ctx.statdir, 'SDP_PROVIDERS=shm']
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
	for c in held:
		a, t = on_san(c, 'backend')
		san += a
		tcp += t
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
		'equal; %d backends on shm, %.2f%% of their bytes' %
		(tps or 0, size // 1000000, len(held),
		 100.0 * san / (san + tcp)))


if __name__ == '__main__':
	run.TESTS[:] = [t for t in run.TESTS if t[0] in
			('forking-tcp-server', 'connect-then-fork', 'socat-fork',
			 'scm-rights', 'postgresql')]
	sys.exit(run.main())
