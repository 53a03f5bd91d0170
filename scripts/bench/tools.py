# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tools.py - what the suite runs: for each tool, the points (sizes, streams,
# tests), the server and client command lines, and the parser that turns the
# client's output into figures (plus bytes and messages for the CPU cost).
import json
import os
import re

from sdptest import free_port, listening  # tests/lib

ORDER = ['iperf3', 'sockperf', 'qperf', 'connrate', 'redis', 'nginx',
	 'haproxy', 'users', 'pgbench']
NEEDS = {'iperf3': ['iperf3'], 'sockperf': ['sockperf'], 'qperf': ['qperf'],
	 'connrate': ['connrate'],
	 'redis': ['redis-server', 'redis-benchmark'],
	 'nginx': ['nginx', 'wrk'],
	 'haproxy': ['haproxy', 'iperf3'],
	 'users': ['iperf3', 'setpriv'],
	 'pgbench': ['pgbench', 'setpriv', 'useradd']}
PKG = {'redis-server': 'redis-server', 'redis-benchmark': 'redis-tools',
       'pgbench': 'postgresql-client', 'useradd': 'passwd'}

# metric -> (unit, True when higher is better); the first of a record's
# metrics in this table is its headline in the summary.
METRICS = {
	'gbit_s': ('Gbit/s', True),
	'msg_s': ('msg/s', True),
	'p50_us': ('us', False),
	'p99_us': ('us', False),
	'p999_us': ('us', False),
	'avg_us': ('us', False),
	'conn_s': ('conn/s', True),
	'set_rps': ('req/s', True),
	'get_rps': ('req/s', True),
	'req_s': ('req/s', True),
	'tps': ('tx/s', True),
	'cpu_s_per_gib': ('CPU s/GiB', False),
	'cpu_ms_per_kmsg': ('CPU ms/1k msg', False),
}

SIZES = {'K': 1024, 'M': 1 << 20}


def nbytes(label):
	if label[-1] in SIZES:
		return int(label[:-1]) * SIZES[label[-1]]
	return int(label)


def num(pat, text, conv=float):
	m = re.search(pat, text)
	return conv(m.group(1)) if m else None


# -- iperf3 --------------------------------------------------------------
def iperf3_json(out, sent=False):
	"""The figures of iperf3 -J's output OUT: the received rate and bytes,
	and with SENT both sides' byte counts; None when it moved nothing."""
	try:
		j = json.loads(out[out.index('{'):])
		r = j['end']['sum_received']
		s = j['end']['sum_sent'] if sent else None
	except (ValueError, KeyError):
		return None
	if not r.get('bytes'):
		return None
	res = {'gbit_s': round(r['bits_per_second'] / 1e9, 3)}
	if sent:
		res.update(bytes_sent=s['bytes'], bytes_received=r['bytes'])
	res['_bytes'] = r['bytes']
	return res


def iperf3(ctx):
	t = 1 if ctx.quick else 2
	if ctx.quick:
		pts = [(1, s) for s in ('1K', '64K', '1M')] + [(4, '1M')]
	else:
		# iperf3 3.12 refuses -l above 1 MiB ("block size too large")
		sizes = ('1K', '4K', '16K', '64K', '256K', '1M')
		pts = [(1, s) for s in sizes] + [(4, s) for s in sizes]

	def parse(out):
		return iperf3_json(out, sent=True)

	for streams, size in pts:
		def cmds(port, streams=streams, size=size):
			return (['iperf3', '-s', '-p', str(port)],
				['iperf3', '-c', '127.0.0.1', '-p', str(port),
				 '-t', str(t), '-l', size, '-P', str(streams),
				 '-J'])
		ctx.pair('iperf3', '%dstream' % streams, size, nbytes(size),
			 cmds, parse, t + 1)
	# both ends on cpu 0: what busy-polling does when the peer shares
	# the CPU (a one-CPU container, more busy threads than cores)
	if ctx.pin:
		for size in (('1M',) if ctx.quick else ('64K', '1M')):
			def cmds(port, size=size):
				return (['iperf3', '-s', '-p', str(port)],
					['iperf3', '-c', '127.0.0.1', '-p',
					 str(port), '-t', str(t), '-l', size,
					 '-J'])
			ctx.pair('iperf3', '1stream-1cpu', size, nbytes(size),
				 cmds, parse, t + 1, same_cpu=True)
	# beside two CPU-bound processes in the server's session (its
	# scheduling group: the work of the host or of the program that the
	# server shares its CPU time with), nothing pinned: what a busy-poll
	# costs when the CPUs are taken. The processes are the server
	# command's children and end with it ($$ stays the server's pid).
	hog = 'while kill -0 $$ 2>/dev/null; do :; done'

	def cmds_busy(port):
		return (['sh', '-c', '(%s) & (%s) & exec iperf3 -s -p %d' %
			 (hog, hog, port)],
			['iperf3', '-c', '127.0.0.1', '-p', str(port), '-t',
			 str(t), '-l', '1M', '-J'])
	pin, ctx.pin = ctx.pin, False
	try:
		ctx.pair('iperf3', '1stream-busy', '1M', nbytes('1M'),
			 cmds_busy, parse, t + 1)
	finally:
		ctx.pin = pin


# -- sockperf --------------------------------------------------------------
# sockperf's largest TCP message is 65507 bytes; "64K" runs at that size.
def sp_size(label):
	return min(nbytes(label), 65507)


def sockperf(ctx):
	t = 1 if ctx.quick else 2
	if ctx.quick:
		# sockperf needs ~2 s beyond -t per run: two sizes each
		pp = ('64', '16K')
		tp = ('64', '16K')
	else:
		pp = ('16', '64', '256', '1K', '4K', '16K', '64K')
		tp = ('14', '64', '256', '1K', '4K', '16K', '64K')

	def parse_pp(size):
		def p(out):
			avg = num(r'avg-latency=([\d.]+)', out)
			if avg is None:
				return None
			pct = {}
			for k, pat in (('p50_us', '50.000'), ('p99_us', '99.000'),
				       ('p999_us', '99.900')):
				pct[k] = num(r'percentile %s =\s*([\d.]+)' %
					     re.escape(pat), out)
			n = num(r'ReceivedMessages=(\d+)', out, int) or 0
			m = dict(pct)
			m['avg_us'] = avg
			m['msg_s'] = None
			rt = num(r'RunTime=([\d.]+)', out)
			if rt:
				m['msg_s'] = round(n / rt, 1)
			m['dropped'] = num(r'# dropped messages = (\d+)', out,
					   int)
			m['ooo'] = num(r'# out-of-order messages = (\d+)', out,
				       int)
			m['_msgs'] = n
			m['_bytes'] = n * size * 2
			return m
		return p

	def parse_tp(size):
		def p(out):
			rate = num(r'Message Rate is (\d+)', out, int)
			if rate is None:
				return None
			n = num(r'SentMessages=(\d+)', out, int) or 0
			return {'msg_s': rate,
				'gbit_s': round(rate * size * 8 / 1e9, 4),
				'_msgs': n, '_bytes': n * size}
		return p

	# ping-pong: sockperf sizes its table of send times for its default
	# peak rate and exits ("_seqN > m_maxSequenceNo") when round trips
	# are faster; an explicit rate far above any ping-pong's sizes it and
	# never paces. Throughput runs stay unpaced (--mps max by default).
	for mode, name, labels, parse, pace in (
			('pp', 'pingpong', pp, parse_pp, ['--mps', '4000000']),
			('tp', 'throughput', tp, parse_tp, [])):
		for label in labels:
			size = sp_size(label)

			def cmds(port, size=size, mode=mode, pace=pace):
				return (['sockperf', 'sr', '--tcp', '-i',
					 '127.0.0.1', '-p', str(port)],
					['sockperf', mode, '--tcp', '-i',
					 '127.0.0.1', '-p', str(port), '-m',
					 str(size), '-t', str(t)] + pace)
			ctx.pair('sockperf', name, label, nbytes(label), cmds,
				 parse(size), t + 1)


# -- qperf ---------------------------------------------------------------
UNITS = {'bytes/sec': 1, 'KB/sec': 1e3, 'MB/sec': 1e6, 'GB/sec': 1e9,
	 'ns': 1e-3, 'us': 1, 'ms': 1e3, 'sec': 1e6}


def qperf(ctx):
	t = 1 if ctx.quick else 2

	def parse_bw(out):
		m = re.search(r'bw\s*=\s*([\d.]+)\s*(\S+)', out)
		if not m or m.group(2) not in UNITS:
			return None
		bps = float(m.group(1)) * UNITS[m.group(2)]
		# qperf moves 64 KiB messages for -t seconds
		return {'gbit_s': round(bps * 8 / 1e9, 3),
			'_bytes': bps * t}

	def parse_lat(out):
		m = re.search(r'latency\s*=\s*([\d.]+)\s*(\S+)', out)
		if not m or m.group(2) not in UNITS:
			return None
		us = float(m.group(1)) * UNITS[m.group(2)]
		return {'avg_us': round(us, 3),
			'_msgs': int(t * 1e6 / us) if us else None}

	for test, parse in (('tcp_bw', parse_bw), ('tcp_lat', parse_lat)):
		def cmds(port, test=test):
			return (['qperf', '-lp', str(port)],
				['qperf', '127.0.0.1', '-lp', str(port), '-ip',
				 str(port + 1 if port < 65535 else port - 1),
				 '-t', str(t), test])
		ctx.pair('qperf', test, '-', 0, cmds, parse, t + 1)
		if ctx.pin:
			ctx.pair('qperf', test + '-1cpu', '-', 0, cmds, parse,
				 t + 1, same_cpu=True)


# -- connection set-up rate ------------------------------------------------
def connrate(ctx):
	t = 1 if ctx.quick else 2

	def parse(out):
		try:
			j = json.loads(out[out.index('{'):].splitlines()[0])
		except ValueError:
			return None
		return {'conn_s': j['rate'], 'errors': j.get('errors', 0),
			'_msgs': j['connections']}

	# 1B: one byte each way, a connection that ends before the switch
	# would upgrade it (the handshake's cost alone); 100x64B: a hundred
	# 64-byte round trips, which outlive the upgrade's start (1 ms), so
	# every connection pays for an upgrade too
	for param, x, shape in (('1B', 1, []), ('100x64B', 6400,
						 ['100', '64'])):
		def cmds(port, shape=shape):
			return ([ctx.connrate, 'server', str(port)] + shape,
				[ctx.connrate, 'client', str(port), str(t)] +
				shape)
		ctx.pair('connrate', 'connect', param, x, cmds, parse, t + 1)


# -- redis ---------------------------------------------------------------
def redis(ctx):
	n_plain = 20000 if ctx.quick else 100000
	n_pipe = 200000 if ctx.quick else 1000000

	def parse(out):
		m = {}
		total = 0
		for line in out.splitlines():
			f = [x.strip('"') for x in line.strip().split('","')]
			if len(f) >= 5 and f[0] in ('SET', 'GET'):
				try:
					k = f[0].lower()
					m[k + '_rps'] = float(f[1])
					m[k + '_p50_ms'] = float(f[4])
					m[k + '_p99_ms'] = float(f[6])
				except (ValueError, IndexError):
					return None
		if 'set_rps' not in m or 'get_rps' not in m:
			return None
		total = nreq[0] * 2
		m['_msgs'] = total
		return m

	for test, n, extra in (('plain', n_plain, []),
			       ('pipeline16', n_pipe, ['-P', '16'])):
		nreq = [n]

		def cmds(port, n=n, extra=extra):
			return (['redis-server', '--port', str(port), '--bind',
				 '127.0.0.1', '--save', '', '--appendonly', 'no',
				 '--protected-mode', 'no', '--daemonize', 'no'],
				['redis-benchmark', '-h', '127.0.0.1', '-p',
				 str(port), '-t', 'set,get', '-n', str(n),
				 '-c', '50', '--csv'] + extra)
		ctx.pair('redis', test, '50conn', 0, cmds, parse, 20)


# -- nginx + wrk -----------------------------------------------------------
NGINX_CONF = '''daemon off;
master_process off;
worker_processes 1;
pid %(dir)s/nginx-%(port)d.pid;
error_log %(dir)s/nginx-error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	sendfile %(sendfile)s;
	client_body_temp_path %(dir)s/body;
	proxy_temp_path %(dir)s/proxy;
	fastcgi_temp_path %(dir)s/fastcgi;
	uwsgi_temp_path %(dir)s/uwsgi;
	scgi_temp_path %(dir)s/scgi;
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:%(port)d;
		root %(dir)s/www;
	}
}
'''


def nginx(ctx):
	# wrk's own default duration in the full run: wrk counts, for a
	# request held up, the requests it would have sent meanwhile, so the
	# once-per-connection cost of the upgrade weighs on a 2 s run's p99
	# five times as much as on a 10 s one (docs/performance.md)
	t = 1 if ctx.quick else 10
	d = os.path.join(ctx.tmp, 'nginx')
	www = os.path.join(d, 'www')
	os.makedirs(www, exist_ok=True)
	small = b'<html><body>' + b'sdp-switch bench page. ' * 24 + \
		b'</body></html>\n'
	with open(os.path.join(www, 'small.html'), 'wb') as fh:
		fh.write(small)
	with open(os.path.join(www, 'big.bin'), 'wb') as fh:
		fh.write(os.urandom(1 << 20))
	# 1M-sendfile: nginx as Debian configures it (sendfile on), the
	# file's pages handed to the socket
	sizes = {'small': len(small), '1M': 1 << 20, '1M-sendfile': 1 << 20}

	def parse(body):
		def p(out):
			rps = num(r'Requests/sec:\s*([\d.]+)', out)
			n = num(r'(\d+) requests in', out, int)
			rd = re.search(r'requests in [\d.]+\w+, ([\d.]+)(\w+) read',
				       out)
			if rps is None or not n:
				return None
			m = {'req_s': rps}
			for k, pat in (('p50_us', '50%'), ('p99_us', '99%')):
				mm = re.search(r'\s%s\s+([\d.]+)(us|ms|s)\b' %
					       pat, out)
				if mm:
					m[k] = float(mm.group(1)) * \
						{'us': 1, 'ms': 1e3,
						 's': 1e6}[mm.group(2)]
			m['non2xx'] = num(r'Non-2xx or 3xx responses: (\d+)',
					  out, int) or 0
			m['sock_errors'] = 1 if 'Socket errors' in out else 0
			if rd:
				unit = {'B': 1, 'KB': 1024, 'MB': 1 << 20,
					'GB': 1 << 30}.get(rd.group(2), 1)
				got = float(rd.group(1)) * unit
				# bytes per response: body plus ~250 B headers
				m['bytes_per_req'] = round(got / n)
				m['gbit_s'] = round(got * 8 / 1e9 /
						    (n / rps), 3)
				m['_bytes'] = got
			m['_msgs'] = n
			return m
		return p

	for page in ('small', '1M', '1M-sendfile'):
		fname = 'small.html' if page == 'small' else 'big.bin'
		sf = 'on' if page.endswith('sendfile') else 'off'

		def cmds(port, sf=sf, fname=fname):
			conf = os.path.join(d, 'nginx-%d.conf' % port)
			with open(conf, 'w') as fh:
				fh.write(NGINX_CONF % {'dir': d, 'port': port,
						       'sendfile': sf})
			return (['nginx', '-c', conf, '-p', d],
				['wrk', '-t1', '-c16', '-d%ds' % t, '--latency',
				 'http://127.0.0.1:%d/%s' % (port, fname)])
		ctx.pair('nginx', 'wrk', page, sizes[page], cmds,
			 parse(sizes[page]), t + 1)


# -- haproxy ---------------------------------------------------------------
# iperf3 through haproxy in tcp mode: the client, the proxy and the server
# each run the switch (or none), so every byte crosses two connections and
# the proxy reads and writes it, non-blocking, in its own buffers.
HAPROXY_CONF = '''global
	maxconn 64
defaults
	mode tcp
	timeout connect 5s
	timeout client 60s
	timeout server 60s
listen fw
	bind 127.0.0.1:%(front)d
	server s1 127.0.0.1:%(back)d
'''


def haproxy(ctx):
	t = 1 if ctx.quick else 2
	d = os.path.join(ctx.tmp, 'haproxy')
	os.makedirs(d, exist_ok=True)
	sizes = ('1M',) if ctx.quick else ('64K', '1M')

	for size in sizes:
		def cmds(port, size=size):
			back = free_port()
			cfg = os.path.join(d, 'haproxy-%d.cfg' % port)
			with open(cfg, 'w') as fh:
				fh.write(HAPROXY_CONF % {'front': port,
							 'back': back})
			# the server first, then the proxy in its place (the
			# suite stops the whole process group)
			return (['sh', '-c', 'iperf3 -s -p %d & sleep 0.3; '
				 'exec haproxy -db -f %s' % (back, cfg)],
				['iperf3', '-c', '127.0.0.1', '-p', str(port),
				 '-t', str(t), '-l', size, '-J'])
		ctx.pair('haproxy', 'iperf3-tcp', size, nbytes(size), cmds,
			 iperf3_json, t + 1)


# -- users -----------------------------------------------------------------
# iperf3 between two users: the server as root, the client as nobody, which
# the kernel keeps from root's memory (root may still read it). 1 MiB
# writes, and 64 KiB ones (the smallest that go by the transfer slot).
def users(ctx):
	t = 1 if ctx.quick else 2

	for rev, test in (([], 'nobody-to-root'), (['-R'], 'root-to-nobody')):
		for size in (('1M',) if ctx.quick else ('64K', '1M')):
			def cmds(port, rev=rev, size=size):
				return (['iperf3', '-s', '-p', str(port)],
					['setpriv', '--reuid=nobody',
					 '--regid=nogroup', '--clear-groups',
					 'iperf3', '-c', '127.0.0.1', '-p',
					 str(port), '-t', str(t), '-l', size,
					 '-J'] + rev)
			ctx.pair('users', test, size, nbytes(size), cmds,
				 iperf3_json, t + 1)


# -- pgbench -------------------------------------------------------------
# PostgreSQL over 127.0.0.1 as tests/programs/hands.py starts it: the
# postmaster accepts and forks a backend per connection, which upgrades the
# connection once it holds it alone. initdb and pgbench -i (scale 4) once,
# without the switch; then per run a postmaster and pgbench with 4 clients
# on 2 threads: select-only (-S: one small query and answer per
# transaction) and the default TPC-B-like transaction (5 statements).
PG_BIN = '/usr/lib/postgresql/15/bin'
PG_USER = 'sdp-pgtest'
PG_ENV = ['env', 'PGSSLMODE=disable', 'PGGSSENCMODE=disable',
	  'PGCONNECT_TIMEOUT=20']


def pg_user():
	"""The unprivileged user the postmaster runs as (postgres refuses
	root), made once with useradd as the tests do. (uid, gid)."""
	import pwd
	import subprocess
	try:
		pw = pwd.getpwnam(PG_USER)
	except KeyError:
		r = subprocess.run(['useradd', '--system', '--no-create-home',
				    '--shell', '/usr/sbin/nologin', PG_USER],
				   capture_output=True, text=True)
		if r.returncode:
			raise RuntimeError('useradd %s: %s' % (PG_USER,
							       r.stderr))
		pw = pwd.getpwnam(PG_USER)
	return pw.pw_uid, pw.pw_gid


def pg_server(uid, gid, data, port):
	return ['setpriv', '--reuid', str(uid), '--regid', str(gid),
		'--clear-groups', '--', os.path.join(PG_BIN, 'postgres'),
		'-D', data, '-p', str(port),
		'-c', 'listen_addresses=127.0.0.1',
		'-c', 'unix_socket_directories=' + data,
		'-c', 'fsync=off', '-c', 'synchronous_commit=off',
		'-c', 'full_page_writes=off', '-c', 'max_connections=30',
		'-c', 'shared_buffers=64MB']


def pg_client(port, extra):
	return PG_ENV + [os.path.join(PG_BIN, 'pgbench'), '-h', '127.0.0.1',
			 '-p', str(port), '-U', PG_USER] + extra + ['postgres']


def pgbench(ctx):
	import subprocess
	import time
	t = 5 if ctx.quick else 10
	if os.getuid() != 0:
		ctx.failures.append('pgbench: needs root (it runs postgres as '
				    'the user %s)' % PG_USER)
		return
	if not os.path.exists(os.path.join(PG_BIN, 'postgres')):
		ctx.failures.append('pgbench: PostgreSQL 15 is not installed '
				    '(%s); apt-get install postgresql-15' %
				    PG_BIN)
		return
	uid, gid = pg_user()
	os.chmod(ctx.tmp, 0o755)
	data = os.path.join(ctx.tmp, 'pgdata')
	os.mkdir(data, 0o700)
	os.chown(data, uid, gid)
	plain = ctx.env['tcp']

	def once(argv, what):
		r = subprocess.run(argv, env=plain, capture_output=True,
				   text=True, timeout=300)
		if r.returncode:
			raise RuntimeError('%s failed: %s' % (what,
						     (r.stdout + r.stderr)[-600:]))

	once(['setpriv', '--reuid', str(uid), '--regid', str(gid),
	      '--clear-groups', '--', os.path.join(PG_BIN, 'initdb'), '-D',
	      data, '-U', PG_USER, '--auth=trust', '-E', 'UTF8', '--no-sync'],
	     'initdb')
	port = free_port()
	pm = subprocess.Popen(pg_server(uid, gid, data, port), env=plain,
			      stdout=subprocess.DEVNULL,
			      stderr=subprocess.DEVNULL,
			      start_new_session=True)
	try:
		end = time.time() + 30
		while not listening(port) and time.time() < end:
			time.sleep(0.05)
		once(pg_client(port, ['-i', '-s', '4', '-q']), 'pgbench -i')
	finally:
		pm.terminate()
		pm.wait(30)

	def parse(out):
		tps = num(r'tps = ([0-9.]+) \(without initial', out)
		n = num(r'number of transactions actually processed: (\d+)',
			out, int)
		bad = num(r'number of failed transactions: (\d+)', out, int)
		if tps is None or not n or bad:
			return None
		return {'tps': round(tps, 1), '_msgs': 2 * n}

	for test, extra in (('select-only', ['-S']), ('tpcb-like', [])):
		def cmds(port, extra=extra):
			return (pg_server(uid, gid, data, port),
				pg_client(port, ['-c', '4', '-j', '2', '-T',
						 str(t), '-n'] + extra))
		ctx.pair('pgbench', test, 'c4', 4, cmds, parse, t)


TOOLS = {'iperf3': iperf3, 'sockperf': sockperf, 'qperf': qperf,
	 'connrate': connrate, 'redis': redis, 'nginx': nginx,
	 'haproxy': haproxy, 'users': users, 'pgbench': pgbench}
