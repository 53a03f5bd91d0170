# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# users.py - program tests across users and through proxies: iperf3 and a
# hashed transfer between root and nobody both ways, nginx with workers as
# www-data, a third user against the two programs' switch objects, and
# haproxy in tcp and http mode with client, proxy and server preloaded.
# run.py calls register(run module); the tests join its list.
import json
import os
import pwd
import socket
import subprocess
import sys
import time

R = None		# the run.py module, set by register()
NOPRE = {'LD_PRELOAD': None}	# as_user preloads after setpriv
# the Python other users run (the runner's may live in root's home)
UPY = '/usr/bin/python3' if os.access('/usr/bin/python3', os.X_OK) else \
	sys.executable
HOSTILE_USER = 'sdp-outsider'


def as_user(user, argv):
	"""argv run as user (its own group, no supplementary groups). The
	switch is preloaded after the change of user (env), not into
	setpriv: a root process's stats file for the same pid would be left
	in the way of the program's."""
	pw = pwd.getpwnam(user)
	pre = [] if R.OPTS.plain else ['LD_PRELOAD=' + R.OPTS.preload]
	return ['setpriv', '--reuid=%d' % pw.pw_uid, '--regid=%d' % pw.pw_gid,
		'--clear-groups', 'env'] + pre + argv


def need_root():
	if os.geteuid() != 0:
		raise R.Skip('needs root (it runs programs as other users)')
	R.need('setpriv')


def ensure_user(name):
	"""A system user with no login and no home, made once."""
	try:
		pwd.getpwnam(name)
	except KeyError:
		r = subprocess.run(['useradd', '--system', '--no-create-home',
				    '--shell', '/usr/sbin/nologin', name],
				   capture_output=True, text=True)
		if r.returncode:
			raise R.Fail('useradd %s: %s' % (name, r.stderr.strip()))
	return name


def open_dirs(ctx):
	"""Other users must reach the test directory (cwd, files to serve)
	and create their stats files; they may not list what others made."""
	os.chmod(ctx.dir, 0o711)
	os.chmod(ctx.statdir, 0o1733)


def stat_path_checks(c, what, want_read, offers=False):
	"""The data path each side chose at set-up: a receiver the kernel
	lets read its peer pulls (RdmaRead), alone, since its peer may not
	write it; one it does not has the bytes written by its peer (into its
	buffer when it takes the offer, else into its staging ring), and never
	tries a pull. With offers (a transfer of many large sends, each
	offered for the receiver to take if it reads in time), some are taken
	whole by the one side that may reach the other."""
	if want_read:
		R.check(c['rx_rdma_read'] > 0, '%s: nothing came by RdmaRead '
			'although this side may read its peer: %s' %
			(what, R.fmt_conn(c)))
		R.check(not offers or c['rx_alone'], '%s: no offer was '
			'pulled whole by this side alone: %s' %
			(what, R.fmt_conn(c)))
	else:
		R.check(c['rx_rdma_read'] == 0 and c['rx_rdma_write'] > 0,
			'%s: this side may not read its peer, so the bytes come '
			'by RDMA write: %s' % (what, R.fmt_conn(c)))
		R.check(not offers or c['rx_pushed'], '%s: no offer was '
			'pushed whole into this side, which may not read its '
			'peer: %s' % (what, R.fmt_conn(c)))


def large_paths_check(c, what):
	"""A non-blocking sender (an nginx worker) offers each large send in
	its transfer slot: a receiver waiting in recv pulls it (RdmaRead), one
	that is not gets the bytes written into its staging ring. Which of the
	two happens is a matter of timing; that the large bytes go by one of
	them is not. One exception is timing's too: a sendfile lends the
	file's pages (up to nginx's 2 MiB chunk), and a lend the receiver has
	not taken by the worker's next call is taken back whole or in part,
	and across users its rest goes by copy through DATA messages
	(semantics.md, "sendfile and splice"; session_tx.c sw_lend_settle).
	With curl writing the file to disk between reads, runs of this test
	saw 2 to 6 such rests (2 MiB, 0.36-1.8 MiB) in 100 MiB: 10-13% of the
	bytes by copy in one run of four to eight, under 10% in the others.
	So at least 80% by RdmaRead or RdmaWrite."""
	big = c['rx_rdma_read'] + c['rx_rdma_write']
	R.check(big >= 0.8 * R.san_rx(c), '%s: less than 80%% of the bytes came '
		'by RdmaRead or RdmaWrite: %s' % (what, R.fmt_conn(c)))


def cross_iperf3(ctx, suser, cuser, extra):
	port = R.free_port()
	sargv = ['iperf3', '-s', '-1', '-B', '127.0.0.1', '-p', str(port)]
	cargv = ['iperf3', '-c', '127.0.0.1', '-p', str(port), '-t', '2',
		 '-l', '1M', '-J'] + extra
	srv = ctx.spawn('iperf3-s-' + (suser or 'root') + ''.join(extra),
			as_user(suser, sargv) if suser else sargv,
			env=NOPRE if suser else None)
	ctx.wait_listen(port, srv)
	cli = ctx.run('iperf3-c-' + (cuser or 'root') + ''.join(extra),
		      as_user(cuser, cargv) if cuser else cargv, 40,
		      env=NOPRE if cuser else None)
	rc = srv.wait(15)
	R.check(rc == 0, 'iperf3 server as %s exited %d: %s' %
		(suser or 'root', rc, srv.err()[-400:] + srv.out()[-400:]))
	try:
		j = json.loads(cli.out())
		rcvd = j['end']['sum_received']['bytes']
		bps = j['end']['sum_received']['bits_per_second']
	except (ValueError, KeyError) as e:
		raise R.Fail('iperf3 -J output unreadable (%s): %s' %
			     (e, cli.out()[-600:]))
	R.check(rcvd > 64 * R.MIB, 'iperf3 moved only %d bytes' % rcvd)
	return srv.pid, cli.pid, bps


def cross_hash(ctx, suser, cuser, nbytes):
	"""peers.py send (nbytes) to sink, each hashing what it sent and got
	(client to server: a server that speaks first would race its
	client's hello, a different test)."""
	port = R.free_port()
	sargv = [UPY, R.PEERS, 'sink', str(port)]
	cargv = [UPY, R.PEERS, 'send', str(port), str(nbytes)]
	srv = ctx.spawn('sink-' + (suser or 'root'),
			as_user(suser, sargv) if suser else sargv,
			env=NOPRE if suser else None)
	ctx.wait_listen(port, srv)
	cli = ctx.run('send-' + (cuser or 'root'),
		      as_user(cuser, cargv) if cuser else cargv, 120,
		      env=NOPRE if cuser else None)
	R.check(srv.wait(30) == 0, 'sink failed: %s' % srv.err()[-600:])
	s = srv.json_lines()
	c = cli.json_lines()
	R.check(len(s) == 1 and len(c) == 1, 'peers printed %s / %s' % (s, c))
	got, c = s[0], c[0]
	R.check(c['sent'] == nbytes and got['bytes'] == nbytes and
		got['sha'] == c['sha'] and got['end'] == 'eof',
		'client to server: sent %d sha %s, got %d sha %s (%s)' %
		(c['sent'], c['sha'][:16], got['bytes'], got['sha'][:16],
		 got['end']))
	return srv.pid, cli.pid


def cross_users(ctx, suser, cuser):
	"""iperf3 (1 MiB writes) each way and a hashed transfer between a
	server as suser and a client as cuser (None: root); every connection
	on shm; the receiver that may read its peer pulls, the other is
	written to (the choice made at set-up, not by failing)."""
	need_root()
	R.need('iperf3')
	open_dirs(ctx)
	ispid, icpid, bps = cross_iperf3(ctx, suser, cuser, [])
	rspid, rcpid, rbps = cross_iperf3(ctx, suser, cuser, ['-R'])
	hspid, hcpid = cross_hash(ctx, suser, cuser, 160 * R.MIB)
	st = ctx.stats()
	srv_reads = suser is None	# root may read nobody, not the reverse
	for spid, cpid, what in ((ispid, icpid, 'iperf3'),
				 (rspid, rcpid, 'iperf3 -R'),
				 (hspid, hcpid, 'hashed transfer')):
		cs_c = R.by_pid(st, cpid)
		cs_s = R.by_pid(st, spid)
		# every connection carried (at most HEAD_MAX on TCP before
		# its switch point), and one that moved 64 MiB or more moved
		# 95% of it or more on shm
		R.check_all_san(cs_c + cs_s, what)
		for c in cs_c + cs_s:
			san = R.san_tx(c) + R.san_rx(c)
			tot = san + c['tx_tcp'] + c['rx_tcp']
			R.check(tot < 64 * R.MIB or 20 * san >= 19 * tot,
				'%s: %.1f%% of %d bytes on shm, not 95%%: %s' %
				(what, 100.0 * san / tot, tot,
				 R.fmt_conn(c)))
		R.check_pairs(cs_c, cs_s, what)
	# the receiving end of each data connection (iperf3's last)
	stat_path_checks(R.by_pid(st, ispid)[-1], 'iperf3 server', srv_reads)
	stat_path_checks(R.by_pid(st, rcpid)[-1], 'iperf3 -R client',
			 not srv_reads)
	stat_path_checks(R.by_pid(st, hspid)[-1], 'hashed transfer server',
			 srv_reads, offers=True)
	return 'iperf3 %.1f Gbit/s, -R %.1f Gbit/s' % (bps / 1e9, rbps / 1e9)


def t_users_nobody_server(ctx):
	return cross_users(ctx, 'nobody', None)


def t_users_nobody_client(ctx):
	return cross_users(ctx, None, 'nobody')


# nginx as Debian ships it: master root, workers www-data; a private
# prefix, port and document root.
NGINX_USERS_CONF = """
user www-data;
worker_processes 2;
daemon off;
pid %(dir)s/nginx.pid;
error_log %(dir)s/nginx-error.log warn;
events { worker_connections 768; }
http {
	sendfile on;
	tcp_nopush on;
	access_log off;
	client_body_temp_path %(dir)s/tmp;
	proxy_temp_path %(dir)s/tmp;
	fastcgi_temp_path %(dir)s/tmp;
	uwsgi_temp_path %(dir)s/tmp;
	scgi_temp_path %(dir)s/tmp;
	default_type application/octet-stream;
	server {
		listen %(port)d default_server;
		root %(dir)s/www;
	}
}
"""


def fetch(ctx, name, url, out):
	if os.environ.get('SANITIZE') == '1':
		# curl hangs in setlocale under ASan's runtime (run.py t_nginx)
		return ctx.run(name, [R.PY, R.PEERS, 'http-get', url, out], 60)
	return ctx.run(name, ['curl', '-sS', '--fail', '-o', out, url], 60)


def t_nginx_users(ctx):
	"""nginx with workers as www-data sends a 100 MiB file with
	sendfile to curl (hashed) and to wrk as root: every connection is
	carried by shm, the large bytes by RdmaRead or RdmaWrite."""
	need_root()
	R.need('nginx', 'curl', 'wrk')
	ensure_user('www-data')
	open_dirs(ctx)
	srv, port, big = R.nginx_serving(ctx, NGINX_USERS_CONF)
	url = 'http://127.0.0.1:%d/big.bin' % port
	got = ctx.path('got.bin')
	curls = []
	for i in range(2):
		curls.append(fetch(ctx, 'curl%d' % i, url, got))
		R.check(os.path.getsize(got) == 100 * R.MIB and
			R.sha_file(got) == R.sha_file(big),
			'curl got %d bytes of the 100 MiB file, sha256 %s '
			'(want %s)' % (os.path.getsize(got),
				       R.sha_file(got)[:16], R.sha_file(big)[:16]))
		os.unlink(got)
	wrk = ctx.run('wrk', ['wrk', '-t1', '-c2', '-d2s', url], 30)
	text = wrk.out()
	R.check('Non-2xx' not in text and 'Socket errors' not in text,
		'wrk saw errors: %s' % text)
	rate = [ln.split(':', 1)[1].strip() for ln in text.splitlines()
		if ln.startswith('Requests/sec')]
	R.check(rate and float(rate[0]) > 0, 'wrk made no request: %s' % text)
	ctx.stop(srv)
	st = ctx.stats()
	www = pwd.getpwnam('www-data').pw_uid
	workers = [s for s in st if s['pid'] != srv.pid and
		   s['program'].startswith('nginx')]
	R.check(workers, 'no stats file of an nginx worker')
	for c in curls:
		cs = R.by_pid(st, c.pid)
		R.check(len(cs) == 1, 'curl: %d connections' % len(cs))
		R.check_all_san(cs, 'curl')
		large_paths_check(cs[0], 'curl')
	cs = R.by_pid(st, wrk.pid)
	probe = [c for c in cs if R.short_lived(c) or
		 c['state'] in (2,) + R.PENDING_STATES]
	R.check(len(probe) <= 1, 'wrk: unused connections %s' %
		[R.fmt_conn(c) for c in probe])
	R.check_all_san([c for c in cs if c not in probe], 'wrk')
	uids = set()
	for w in workers:
		try:
			with open('/proc/%d/status' % w['pid']) as f:
				for ln in f:
					if ln.startswith('Uid:'):
						uids.add(int(ln.split()[1]))
		except OSError:
			pass
	R.check(not uids or uids == {www}, 'nginx workers ran as uids %s, '
		'not www-data' % uids)
	return 'wrk %s req/s of 100 MiB' % rate[0]


OUTSIDER = r'''
import ctypes, json, os, socket, sys
pids = [int(p) for p in sys.argv[1].split(',')]
port = int(sys.argv[2])
statfiles = sys.argv[3].split(',') if sys.argv[3] else []
got = []
def tried(what, fn):
	try:
		r = fn()
		got.append('%s: %r' % (what, r))
	except OSError as e:
		pass
libc = ctypes.CDLL(None, use_errno=True)
class iovec(ctypes.Structure):
	_fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
for pid in pids:
	# the processes' memory: /proc/PID/mem, process_vm_readv, their
	# descriptors (memfds, sockets) and mapped files
	tried('mem of %d' % pid, lambda: open('/proc/%d/mem' % pid, 'rb').read(1))
	buf = ctypes.create_string_buffer(8)
	loc = iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
	try:
		maps = open('/proc/%d/maps' % pid).read().split('\n')
		addr = int(maps[0].split('-')[0], 16)
	except (OSError, ValueError, IndexError):
		addr = 0x400000
	rem = iovec(addr, 8)
	n = libc.process_vm_readv(pid, ctypes.byref(loc), 1, ctypes.byref(rem), 1, 0)
	if n >= 0:
		got.append('process_vm_readv of %d read %d bytes' % (pid, n))
	for d in ('fd', 'map_files'):
		try:
			names = os.listdir('/proc/%d/%s' % (pid, d))
		except OSError:
			continue
		for nm in names:
			p = '/proc/%d/%s/%s' % (pid, d, nm)
			tried('open ' + p, lambda: open(p, 'rb').read(1))
for f in statfiles:
	tried('read ' + f, lambda: open(f, 'rb').read(1))
	tried('write ' + f, lambda: open(f, 'r+b').write(b'x'))
# anything of theirs in /dev/shm (the default statistics directory)
for f in os.listdir('/dev/shm'):
	if any(f.endswith('.%d' % pid) for pid in pids):
		tried('open /dev/shm/' + f,
		      lambda: open('/dev/shm/' + f, 'rb').read(1))
# the provider's rendezvous: a forged connection gets no descriptor and
# no byte of anyone's data
for name in ('127.0.0.1:%d' % port, '*:%d' % port):
	s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
	s.settimeout(2)
	try:
		s.connect('\0sdp-shm/' + name)
	except OSError:
		continue
	try:
		s.sendall(b'\x01' * 256)
		msg, anc, fl, _ = s.recvmsg(4096, socket.CMSG_SPACE(64))
		fds = [a for a in anc if a[1] == socket.SCM_RIGHTS]
		if fds:
			got.append('rendezvous %s handed descriptors' % name)
	except OSError:
		pass
	s.close()
print(json.dumps(got))
'''


def t_users_outsider(ctx):
	"""A third user, while root and nobody move hashed bytes over shm,
	tries to read their memory, open their descriptors and mapped
	files, read or write their stats files, open /dev/shm objects and
	connect to their provider rendezvous: it gets nothing, and the
	transfer stays exact."""
	need_root()
	out = ensure_user(HOSTILE_USER)
	open_dirs(ctx)
	port = R.free_port()
	nbytes = 256 * R.MIB
	sargv = [UPY, R.PEERS, 'sink', str(port)]
	cargv = [UPY, R.PEERS, 'send', str(port), str(nbytes)]
	srv = ctx.spawn('sink-nobody', as_user('nobody', sargv), env=NOPRE)
	ctx.wait_listen(port, srv)
	cli = ctx.spawn('send-root', cargv)
	# wait for both to be carried (their stats files appear), then
	# attack while bytes flow
	end = R.time.monotonic() + 10
	while R.time.monotonic() < end and len(os.listdir(ctx.statdir)) < 2:
		R.time.sleep(0.05)
	R.time.sleep(0.3)
	stats = [os.path.join(ctx.statdir, f) for f in os.listdir(ctx.statdir)]
	script = ctx.path('outsider.py')
	with open(script, 'w') as f:
		f.write(OUTSIDER)
	os.chmod(script, 0o644)
	att = ctx.run('outsider', as_user(out, [
		UPY, script, '%d,%d' % (srv.pid, cli.pid), str(port),
		','.join(stats)]), 60, preload=False)
	alive = cli.alive() and srv.alive()
	R.check(cli.wait(120) == 0, 'sender failed: %s' % cli.err()[-600:])
	R.check(srv.wait(30) == 0, 'sink failed: %s' % srv.err()[-600:])
	try:
		got = json.loads(att.out())
	except ValueError:
		raise R.Fail('outsider printed %r' % att.out()[-400:])
	R.check(not got, 'the third user got: %s' % '; '.join(got[:8]))
	s = srv.json_lines()[0]
	c = cli.json_lines()[0]
	R.check(s['sha'] == c['sha'] and c['sent'] == nbytes and
		s['bytes'] == nbytes, 'transfer not exact: %s / %s' % (s, c))
	st = ctx.stats()
	R.check_all_san(R.by_pid(st, cli.pid) + R.by_pid(st, srv.pid),
			'transfer')
	return 'attacked %s' % ('during the transfer' if alive else
				'after the transfer (it was quick)')


# haproxy between a client and a server, all three preloaded
HAPROXY_CONF = """
global
	maxconn 64
defaults
	mode %(mode)s
	timeout connect 5s
	timeout client 60s
	timeout server 60s
%(extra)s
listen fw
	bind 127.0.0.1:%(front)d
	server s1 127.0.0.1:%(back)d
"""


def haproxy_test(ctx, mode):
	R.need('haproxy', 'nginx')
	front, back = R.free_port(), R.free_port()
	with open(ctx.path('haproxy.cfg'), 'w') as f:
		f.write(HAPROXY_CONF % {'mode': mode, 'front': front,
					'back': back, 'extra': ''})
	srv, _, big = R.nginx_serving(ctx, port=back)
	hap = ctx.spawn('haproxy', ['haproxy', '-db', '-f',
				    ctx.path('haproxy.cfg')])
	ctx.wait_listen(front, hap)
	got = ctx.path('got.bin')
	url = 'http://127.0.0.1:%d/big.bin' % front
	t0 = R.time.monotonic()
	cli = fetch(ctx, 'curl', url, got)
	secs = R.time.monotonic() - t0
	R.check(os.path.getsize(got) == 100 * R.MIB and
		R.sha_file(got) == R.sha_file(big),
		'curl got %d bytes of the 100 MiB file through haproxy, sha256 '
		'%s (want %s)' % (os.path.getsize(got), R.sha_file(got)[:16],
				  R.sha_file(big)[:16]))
	ctx.stop(hap)
	ctx.stop(srv)
	st = ctx.stats()
	cs = R.by_pid(st, cli.pid)
	R.check_all_san(cs, 'client')
	hs = R.by_pid(st, hap.pid)
	san = R.check_all_san(hs, 'haproxy', need=2)
	# each side of the proxy: the file, all of it on shm after the
	# switch point (carried: at most HEAD_MAX on TCP first)
	R.check(sum(R.san_rx(c) + c['rx_tcp'] for c in san) >= 100 * R.MIB
		and sum(R.san_tx(c) + c['tx_tcp'] for c in san) >= 100 * R.MIB,
		'haproxy moved less than the file: %s' %
		'; '.join(R.fmt_conn(c) for c in hs))
	return '100 MiB in %.2f s' % secs


def t_haproxy_splice(ctx):
	"""haproxy in tcp mode moving both directions with splice(2)
	(socket to pipe to socket), all three preloaded: 64 MiB up, then 64
	MiB down, hashed. The kernel's splice moved the TCP streams of
	carried connections (doorbells), and the server closed the
	connection at the first byte of the program's that reached TCP."""
	R.need('haproxy')
	front, back = R.free_port(), R.free_port()
	with open(ctx.path('haproxy.cfg'), 'w') as f:
		f.write(HAPROXY_CONF % {'mode': 'tcp', 'front': front,
					'back': back,
					'extra': '\toption splice-request\n'
						 '\toption splice-response'})
	n = 64 * R.MIB
	hap = ctx.spawn('haproxy', ['haproxy', '-db', '-f',
				    ctx.path('haproxy.cfg')])
	ctx.wait_listen(front, hap)
	res = []
	# down: one byte up, and the half-close only after the download (a
	# shutdown before the connection is carried leaves it on TCP: cut)
	for way, sargs, cargs in (('up', [], [str(n)]),
				  ('down', ['--send', str(n)],
				   ['1', '--drain-first'])):
		srv = ctx.spawn('sink-' + way, [R.PY, R.PEERS, 'sink', str(back),
						'--io-timeout', '20'] + sargs)
		ctx.wait_listen(back, srv)
		cli = ctx.run('send-' + way, [R.PY, R.PEERS, 'send', str(front),
					      '--io-timeout', '20'] + cargs, 60)
		R.check(srv.wait(30) == 0, 'sink failed: %s' % srv.err()[-400:])
		got, sent = srv.json_lines()[-1], cli.json_lines()[-1]
		if way == 'up':
			ok = got['bytes'] == n and got['sha'] == sent['sha']
		else:
			ok = sent['got'] == n and \
				sent['sha_got'] == srv.json_lines()[0]['sha_sent']
		R.check(ok and got['end'] == 'eof' and sent['end'] == 'done',
			'%s through haproxy: sink %s, sender %s' %
			(way, got, sent))
		res.append(cli)
	ctx.stop(hap)
	st = ctx.stats()
	hs = R.by_pid(st, hap.pid)
	san = R.check_all_san(hs, 'haproxy', need=4)
	R.check(sum(R.san_rx(c) + c['rx_tcp'] for c in san) >= 2 * n and
		sum(R.san_rx(c) for c in san) >= 2 * n * 9 // 10,
		'haproxy moved less than 2 x 64 MiB, or less than 90%% on the '
		'SAN: %s' % '; '.join(R.fmt_conn(c) for c in hs))
	return '64 MiB each way exact, %.1f%% on the SAN' % (
		100.0 * sum(R.san_rx(c) for c in san) / (2 * n))


def t_haproxy_tcp(ctx):
	return haproxy_test(ctx, 'tcp')


def t_haproxy_http(ctx):
	return haproxy_test(ctx, 'http')


def pass_worker(ctx, wuser, wpre, first, idle_ms=0, conns=2):
	"""An acceptor as root, preloaded, echoes the first bytes of each
	connection itself (0: none, its upgrade still pending) and passes it
	with SCM_RIGHTS to a worker, a separate program as wuser (None:
	root), with the switch or without (wpre), which echoes the rest. The
	clients (idle_ms: each waits that long after connect before its
	first byte, so that the acceptor passes a connection whose client has
	not spoken) compare every byte that came back with what they sent:
	a stray byte of the switch's in the worker's reads, or one lost at
	the pass, fails them. Returns (acceptor, worker, client) processes
	and the stats."""
	need_root()
	open_dirs(ctx)
	hp = os.path.join(os.path.dirname(R.PEERS), 'hands_peers.py')
	udir = ctx.path('unix')
	os.mkdir(udir)
	os.chmod(udir, 0o1777)
	path = os.path.join(udir, 'worker')
	nbytes = 48 * R.MIB
	wargv = [UPY, hp, 'unix-worker', path, str(conns)]
	if wuser:
		wargv = as_user(wuser, wargv) if wpre else \
			['setpriv', '--reuid=%d' % pwd.getpwnam(wuser).pw_uid,
			 '--regid=%d' % pwd.getpwnam(wuser).pw_gid,
			 '--clear-groups'] + wargv
		wk = ctx.spawn('worker', wargv, env=dict(NOPRE, SDP_LOG='debug'))
	else:
		wk = ctx.spawn('worker', wargv, preload=wpre,
			       env={'SDP_LOG': 'debug'})
	for _ in range(200):
		if os.path.exists(path) or wk.p.poll() is not None:
			break
		time.sleep(0.05)
	R.check(wk.p.poll() is None and os.path.exists(path),
		'worker not listening: %s' % wk.err()[-400:])
	port = R.free_port()
	acc = ctx.spawn('acceptor', [R.PY, hp, 'pass-acceptor', str(port),
				     path, str(first), str(conns)],
			env={'SDP_LOG': 'debug'})
	ctx.wait_listen(port, acc)
	if idle_ms:
		cl = [ctx.spawn('client%d' % i, [R.PY, hp, 'idle-echo-client',
						 str(port), str(idle_ms),
						 str(nbytes)],
				env={'SDP_LOG': 'info'}) for i in range(conns)]
		res = []
		for c in cl:
			R.check(c.wait(120) == 0, 'client exited: %s' %
				c.err()[-600:])
			res += c.json_lines()
	else:
		c = ctx.run('client', [R.PY, R.PEERS, 'echo-client', str(port),
				       '--conns', str(conns), '--bytes',
				       str(nbytes), '--mode', 'threads'], 120,
			    ok=None, env={'SDP_LOG': 'info'})
		res = c.json_lines()
		cl = [c]
	bad = [r for r in res if not r.get('ok') or r.get('sent') != nbytes]
	R.check(len(res) == conns and not bad,
		'through a worker %s the switch: %d results, bad %s; worker '
		'%s; acceptor %s' % ('with' if wpre else 'without', len(res),
				     bad[:2], wk.err()[-400:], acc.err()[-400:]))
	R.check(acc.wait(30) == 0, 'acceptor failed: %s' % acc.err()[-400:])
	R.check(wk.wait(60) == 0, 'worker failed: %s' % wk.err()[-400:])
	echoed = [r for r in wk.json_lines() if 'echoed' in r]
	R.check(len(echoed) == conns and
		all(r['echoed'] == nbytes - first for r in echoed),
		'worker echoed %s, expected %d connections of %d bytes' %
		([r.get('echoed') for r in echoed], conns, nbytes - first))
	return acc, wk, cl, ctx.stats()


def t_scm_worker_plain(ctx):
	"""A pending connection passed to a program without the switch: the
	client's hello never reaches it (taken by the acceptor's switch, or
	held off by the name for it), and the connection stays TCP."""
	acc, wk, cl, st = pass_worker(ctx, None, False, 0)
	R.check(not [s for s in st if s['pid'] == wk.pid],
		'the worker without the switch published statistics')
	for c in cl:
		R.check_all_tcp(R.by_pid(st, c.pid), 'client')
	return '2 x 48 MiB exact through a worker without the switch, on TCP'


def t_scm_worker_plain_idle(ctx):
	"""The same, with clients that wait 300 ms after connect: the
	acceptor passes connections whose clients have not spoken, and its
	switch holds the name for their hellos after its copy closed, so
	that none goes later."""
	acc, wk, cl, st = pass_worker(ctx, None, False, 0, idle_ms=300)
	for c in cl:
		R.check_all_tcp(R.by_pid(st, c.pid), 'client')
		R.check('the name for its hello is taken' in c.err(),
			'client: its hello was not held off: %s' %
			c.err()[-600:])
	return ('2 x 48 MiB exact, clients idle 300 ms, through a worker '
		'without the switch, no hello sent')


def t_scm_worker_nobody(ctx):
	"""Root's acceptor passes pending connections to a worker as nobody
	with the switch, which is never given root's record: the client's
	hello does not reach the worker's program, and the connection stays
	TCP in both."""
	acc, wk, cl, st = pass_worker(ctx, 'nobody', True, 0)
	# the sockets it received are plain to its switch: not managed, so
	# not listed (or listed on TCP)
	cs = R.by_pid(st, wk.pid)
	R.check(not [c for c in cs if R.san_tx(c) + R.san_rx(c)],
		'worker as nobody: a connection on the SAN: %s' %
		'; '.join(R.fmt_conn(c) for c in cs))
	for c in cl:
		R.check_all_tcp(R.by_pid(st, c.pid), 'client')
	return '2 x 48 MiB exact, passed from root to nobody, on TCP'


def t_users_drop_after_listen(ctx):
	"""A server that listens as root, then becomes nobody and accepts
	late (lighttpd, and any server that drops privileges after bind):
	its clients learnt the owner of the other end (root, the listener's)
	before the accept made the socket nobody's. The provider connection
	from nobody is the accepting server's all the same, and is let in."""
	need_root()
	open_dirs(ctx)
	# 32 MiB a connection: more than the kernel's loopback buffers take
	# before the accept, so no client has sent all and shut down before
	# its upgrade could finish (that is reason cut, by design)
	st, cli, srv, _ = R.echo_test(ctx, 'threads', 'threads', 4, 32 * R.MIB,
				      sargs=('--drop-to', 'nobody',
					     '--accept-delay', '0.5'))
	cs = R.by_pid(st, cli.pid)
	R.check_all_san(cs, 'client of a server that became nobody', need=4)
	R.check_pairs(cs, R.by_pid(st, srv.pid), 'root client, nobody server')
	return '4 x 32 MiB echoed by a server that became nobody after listen'


def register(run):
	global R
	R = run
	for name, fn in (('users-nobody-server', t_users_nobody_server),
			 ('users-nobody-client', t_users_nobody_client),
			 ('users-nginx', t_nginx_users),
			 ('users-outsider', t_users_outsider),
			 ('users-drop-after-listen', t_users_drop_after_listen),
			 ('scm-worker-plain', t_scm_worker_plain),
			 ('scm-worker-plain-idle', t_scm_worker_plain_idle),
			 ('scm-worker-nobody', t_scm_worker_nobody),
			 ('haproxy-tcp', t_haproxy_tcp),
			 ('haproxy-splice', t_haproxy_splice),
			 ('haproxy-http', t_haproxy_http)):
		run.test(name)(fn)
