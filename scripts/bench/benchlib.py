# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# benchlib.py - the benchmark suite's machinery: the two environments (switch
# and plain TCP), pinned server/client processes, CPU time of both sides from
# /proc and wait4, a look at sdp-stat to prove the switch carried the data,
# and the record of every run.
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from sdptest import free_port, listening, sdp_stat_json  # tests/lib

CLK_TCK = os.sysconf('SC_CLK_TCK')
GIB = float(1 << 30)
MODES = ('switch', 'tcp')
_live = set()


def kill_all():
	"""Ends the server processes this suite started (by their ids)."""
	for p in list(_live):
		stop_proc(p)


_tmpdirs = []


def remove_tmp():
	"""Removes the private folders (nginx root, configs) of this run."""
	for d in _tmpdirs:
		shutil.rmtree(d, ignore_errors=True)


def stop_proc(p):
	if p.poll() is None:
		try:
			os.killpg(p.pid, signal.SIGTERM)
		except ProcessLookupError:
			pass
		try:
			p.wait(3)
		except subprocess.TimeoutExpired:
			try:
				os.killpg(p.pid, signal.SIGKILL)
			except ProcessLookupError:
				pass
			p.wait()
	_live.discard(p)


def proc_cpu(pid):
	"""CPU seconds of PID, all its threads and the children it reaped."""
	try:
		with open('/proc/%d/stat' % pid) as fh:
			st = fh.read()
	except OSError:
		return None
	f = st[st.rindex(')') + 2:].split()
	# fields 14..17 of stat(5): utime stime cutime cstime
	return sum(int(v) for v in f[11:15]) / CLK_TCK


def median(v):
	s = sorted(v)
	n = len(s)
	if not n:
		return None
	return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


class Context:
	def __init__(self, a, here):
		self.args = a
		self.here = here
		self.root = os.path.dirname(os.path.dirname(here))
		self.quick = a.quick
		self.runs = a.runs or (3 if a.quick else 5)
		self.provider = a.provider
		self.pin = not a.no_pin
		build = a.build or os.path.join(self.root, 'build')
		self.build = os.path.abspath(build)
		self.lib = os.path.join(self.build, 'lib', 'libsdp_switch.so')
		self.provider_dir = os.path.join(self.build, 'lib', 'sdp')
		self.connrate = os.path.join(self.build, 'bin',
					     'sdp-bench-connrate')
		self.sdp_stat = os.path.join(self.build, 'bin', 'sdp-stat')
		out = a.out or os.path.join(self.root, 'bench-results',
					    time.strftime('%Y%m%d-%H%M%S'))
		self.out = os.path.abspath(out)
		os.makedirs(os.path.join(self.out, 'logs'), exist_ok=True)
		self.tmp = tempfile.mkdtemp(prefix='sdp-bench-')
		_tmpdirs.append(self.tmp)
		self.records = []
		self.failures = []
		self.t0 = time.time()
		base = {k: v for k, v in os.environ.items()
			if k != 'LD_PRELOAD'}
		self.env = {'tcp': dict(base), 'switch': dict(base)}
		sw = self.env['switch']
		sw['LD_PRELOAD'] = self.lib
		sw['SDP_PROVIDERS'] = self.provider
		sw.setdefault('SDP_PROVIDER_DIR', self.provider_dir)
		self.nlog = 0
		self.server_cpu = 1

	# -- prerequisites and environment --------------------------------
	def check_prereqs(self, only):
		import tools
		miss = []
		for f, what in ((self.lib, 'the preload library'),
				(os.path.join(self.provider_dir,
					      'libsdp-%s.so' % self.provider),
				 'the %s provider' % self.provider)):
			if not os.path.exists(f):
				miss.append('%s %s is missing: build it with '
					    "'make %s'" % (what, f,
							   os.path.relpath(f, self.root)))
		for t in only:
			for prog in tools.NEEDS.get(t, ()):
				if prog == 'connrate':
					if not os.path.exists(self.connrate):
						miss.append(
						    '%s is missing: build it with '
						    "'make %s'" % (self.connrate,
						    os.path.relpath(self.connrate,
								    self.root)))
				elif not shutil.which(prog):
					miss.append("%s needs '%s' in PATH: "
						    'apt-get install %s' %
						    (t, prog,
						     tools.PKG.get(prog, prog)))
		if self.pin and (os.cpu_count() or 1) < 2:
			self.pin = False
		return miss

	def sh(self, cmd):
		try:
			return subprocess.run(cmd, shell=True, capture_output=True,
					      text=True, timeout=20).stdout.strip()
		except Exception as e:  # noqa: BLE001
			return 'unknown (%s)' % e

	def write_env(self):
		cpu = ''
		with open('/proc/cpuinfo') as fh:
			for line in fh:
				if line.startswith('model name'):
					cpu = line.split(':', 1)[1].strip()
					break
		lines = [
		    'date: ' + time.strftime('%Y-%m-%d %H:%M:%S %z'),
		    'command: ' + ' '.join(sys.argv),
		    'kernel: ' + platform.release() + ' ' + platform.version(),
		    'cpu: ' + cpu,
		    'cores: %d online' % (os.cpu_count() or 0),
		    'loadavg at start: ' + open('/proc/loadavg').read().strip(),
		    'pinning: ' + ('client cpu 0, server cpu 1' if self.pin
				   else 'none'),
		    'runs per mode and point: %d%s' % (self.runs,
			' (quick)' if self.quick else ''),
		    'provider: ' + self.provider,
		    'preload: ' + self.lib,
		    'yama ptrace_scope: ' +
		    self.sh('cat /proc/sys/kernel/yama/ptrace_scope'),
		    'git commit: ' + self.sh('git -C %s rev-parse HEAD' %
					     self.root) +
		    (' (tree modified)' if self.sh(
			'git -C %s status --porcelain -uno' % self.root)
		     else ''),
		    'SDP_* settings (switch runs):',
		]
		for k in sorted(self.env['switch']):
			if k.startswith('SDP_'):
				lines.append('  %s=%s' % (k, self.env['switch'][k]))
		lines.append('tool versions:')
		for cmd in ('iperf3 --version | head -1',
			    'sockperf --version 2>&1 | head -1',
			    'qperf --version 2>&1', 'redis-server --version',
			    'redis-benchmark --version 2>&1',
			    'nginx -v 2>&1', 'wrk -v 2>&1 | head -1',
			    'gnuplot --version', 'gcc --version | head -1'):
			lines.append('  ' + self.sh(cmd))
		with open(os.path.join(self.out, 'env.txt'), 'w') as fh:
			fh.write('\n'.join(lines) + '\n')

	# -- processes ---------------------------------------------------
	def _logf(self, tag):
		self.nlog += 1
		name = '%04d-%s' % (self.nlog, re.sub(r'[^\w.-]', '_', tag))
		return os.path.join(self.out, 'logs', name)

	def _cmd(self, cmd, cpu):
		if self.pin:
			return ['taskset', '-c', str(cpu)] + cmd
		return cmd

	def start_server(self, mode, cmd, port, tag, wait=10.0):
		log = self._logf(tag + '-server')
		fh = open(log, 'w')
		p = subprocess.Popen(self._cmd(cmd, self.server_cpu),
				     env=self.env[mode],
				     stdout=fh, stderr=subprocess.STDOUT,
				     stdin=subprocess.DEVNULL, cwd=self.tmp,
				     start_new_session=True)
		fh.close()
		p.log = log
		_live.add(p)
		end = time.time() + wait
		while time.time() < end:
			if p.poll() is not None:
				stop_proc(p)
				raise RuntimeError(
				    'server %s exited with %s before listening; '
				    'see %s' % (cmd[0], p.returncode, log))
			if listening(port):
				return p
			time.sleep(0.02)
		stop_proc(p)
		raise RuntimeError('server %s did not listen on port %d '
				   'within %.0f s; see %s' %
				   (cmd[0], port, wait, log))

	def stat_of(self, pid):
		"""sdp-stat's view of PID and the processes it forked (a
		server's workers): connections, fallbacks, and the bytes they
		moved on the SAN and on TCP, closed connections included."""
		if not os.path.exists(self.sdp_stat):
			return None
		try:
			j = sdp_stat_json(self.sdp_stat, [], timeout=5)
		except Exception:  # noqa: BLE001
			return None
		procs = {pr.get('pid'): pr for pr in j.get('processes', [])}
		if pid not in procs:
			return None
		tree = {pid}
		grew = True
		while grew:
			grew = False
			for p, pr in procs.items():
				if p not in tree and pr.get('ppid') in tree:
					tree.add(p)
					grew = True
		out = {'pids': len(tree), 'conns_san': 0, 'conns_tcp': 0,
		       'fallbacks': {}, 'bytes_san': 0, 'bytes_tcp': 0}
		for p in tree:
			pr = procs[p]
			out['conns_san'] += pr.get('conns_san', 0)
			out['conns_tcp'] += pr.get('conns_tcp', 0)
			for k, v in (pr.get('fallbacks') or {}).items():
				out['fallbacks'][k] = out['fallbacks'].get(k, 0) + v
			b = pr.get('bytes') or {}
			out['bytes_san'] += b.get('san_tx', 0) + b.get('san_rx', 0)
			out['bytes_tcp'] += b.get('tcp_tx', 0) + b.get('tcp_rx', 0)
		return out

	def run_client(self, mode, cmd, tag, timeout, peek_at=None,
		       server=None):
		"""Runs CMD pinned to cpu 0; returns (rc, output, cpu seconds,
		wall seconds, sdp-stat peek of the server during the run)."""
		log = self._logf(tag + '-client')
		fh = open(log, 'w+')
		t0 = time.time()
		p = subprocess.Popen(self._cmd(cmd, 0), env=self.env[mode],
				     stdout=fh, stderr=subprocess.STDOUT,
				     stdin=subprocess.DEVNULL, cwd=self.tmp,
				     start_new_session=True)
		peek = None
		ru = None
		rc = None
		while True:
			pid, status, ru = os.wait4(p.pid, os.WNOHANG)
			if pid:
				rc = os.waitstatus_to_exitcode(status)
				p.returncode = rc
				break
			el = time.time() - t0
			if (peek is None and peek_at is not None and
			    el >= peek_at and server is not None and
			    mode == 'switch'):
				peek = self.stat_of(server.pid)
			if el > timeout:
				os.killpg(p.pid, signal.SIGKILL)
				pid, status, ru = os.wait4(p.pid, 0)
				rc = 'timeout'
				break
			time.sleep(0.01)
		wall = time.time() - t0
		fh.seek(0)
		outp = fh.read()
		fh.close()
		cpu = ru.ru_utime + ru.ru_stime if ru else None
		return rc, outp, cpu, wall, peek, log

	# -- one measurement ----------------------------------------------
	def measure(self, tool, test, param, x, mode, run, server_cmd,
		    client_cmd, parse, duration, port, server_setup=None):
		"""Starts the server, runs the client, records one run."""
		tag = '%s-%s-%s-%s-%d' % (tool, test, param, mode, run)
		rec = {'tool': tool, 'test': test, 'param': str(param),
		       'x': x, 'mode': mode, 'run': run, 'metrics': {},
		       'cpu': {}, 'error': None}
		srv = None
		try:
			srv = self.start_server(mode, server_cmd, port, tag)
			s_cpu0 = proc_cpu(srv.pid)
			rc, outp, c_cpu, wall, peek, clog = self.run_client(
			    mode, client_cmd, tag, duration + 30,
			    peek_at=duration * 0.75, server=srv)
			s_cpu1 = proc_cpu(srv.pid)
			after = (self.stat_of(srv.pid) if mode == 'switch'
				 else None)
			rec['wall_s'] = round(wall, 3)
			if rc == 'timeout':
				raise RuntimeError(
				    'client hung: killed after %.0f s; see %s' %
				    (duration + 30, clog))
			m = parse(outp)
			if m is None or rc != 0:
				raise RuntimeError(
				    'client exited %s and printed no result; '
				    'see %s' % (rc, clog))
			rec['metrics'] = m
			if s_cpu0 is not None and s_cpu1 is not None:
				rec['cpu']['server_s'] = round(s_cpu1 - s_cpu0, 4)
			if c_cpu is not None:
				rec['cpu']['client_s'] = round(c_cpu, 4)
			self._cpu_metrics(rec)
			if mode == 'switch':
				rec['san'] = self._san_summary(peek, after)
		except RuntimeError as e:
			rec['error'] = str(e)
			self.failures.append('%s: %s' % (tag, e))
			print('bench: FAIL %s: %s' % (tag, e), file=sys.stderr)
		finally:
			if srv is not None:
				stop_proc(srv)
		self.records.append(rec)
		return rec

	def _san_summary(self, peek, after):
		s = {}
		for name, pr in (('during', peek), ('after', after)):
			if pr is None:
				continue
			s[name + '_conns_san'] = pr.get('conns_san')
			s[name + '_conns_tcp'] = pr.get('conns_tcp')
			if pr.get('fallbacks'):
				s['fallbacks'] = pr.get('fallbacks')
		# bytes only grow while a process lives, but a worker that
		# exited took its count along: the larger look is the truer one
		looks = [pr for pr in (peek, after) if pr is not None]
		if looks:
			best = max(looks, key=lambda pr: pr['bytes_san'] +
				   pr['bytes_tcp'])
			s['bytes_san'] = best['bytes_san']
			s['bytes_tcp'] = best['bytes_tcp']
			tot = best['bytes_san'] + best['bytes_tcp']
			s['san_share'] = (round(best['bytes_san'] / tot, 6)
					  if tot else None)
		s['fell_back'] = bool(s.get('fallbacks'))
		return s

	def _cpu_metrics(self, rec):
		m, c = rec['metrics'], rec['cpu']
		if 'client_s' not in c or 'server_s' not in c:
			return
		tot = c['client_s'] + c['server_s']
		nbytes = m.pop('_bytes', None)
		nmsgs = m.pop('_msgs', None)
		if nbytes:
			g = nbytes / GIB
			m['cpu_s_per_gib'] = round(tot / g, 4)
			m['cpu_s_per_gib_client'] = round(c['client_s'] / g, 4)
			m['cpu_s_per_gib_server'] = round(c['server_s'] / g, 4)
		if nmsgs:
			k = nmsgs / 1000.0
			m['cpu_ms_per_kmsg'] = round(tot / k * 1000, 4)
			m['cpu_ms_per_kmsg_client'] = round(
			    c['client_s'] / k * 1000, 4)
			m['cpu_ms_per_kmsg_server'] = round(
			    c['server_s'] / k * 1000, 4)

	def pair(self, tool, test, param, x, make_cmds, parse, duration,
		 same_cpu=False):
		"""Runs one point RUNS times in each mode, alternating which
		mode goes first, each run on fresh ports. same_cpu: the server
		on the client's cpu 0 too (a point that shows what busy-polling
		does when both ends share one CPU)."""
		self.server_cpu = 0 if same_cpu else 1
		try:
			self._pair(tool, test, param, x, make_cmds, parse,
				   duration)
		finally:
			self.server_cpu = 1

	def _pair(self, tool, test, param, x, make_cmds, parse, duration):
		for i in range(self.runs):
			order = MODES if i % 2 == 0 else MODES[::-1]
			for mode in order:
				port = free_port()
				srv, cli = make_cmds(port)
				self.measure(tool, test, param, x, mode, i, srv,
					     cli, parse, duration, port)
		self.progress(tool, test, param)

	def progress(self, tool, test, param):
		recs = [r for r in self.records if r['tool'] == tool and
			r['test'] == test and r['param'] == str(param)]
		key = None
		for r in recs:
			if r['metrics']:
				key = next(iter(r['metrics']))
				break
		parts = []
		for mode in MODES:
			v = [r['metrics'][key] for r in recs if r['mode'] == mode
			     and key and key in r['metrics']]
			parts.append('%s %s' % (mode, ('%.4g' % median(v))
						 if v else 'FAILED'))
		print('bench: [%4.0fs] %-9s %-10s %-6s %s: %s' %
		      (time.time() - self.t0, tool, test, param, key or '-',
		       ', '.join(parts)), flush=True)

	def load(self):
		"""Reads back the records of an earlier run (--report)."""
		with open(os.path.join(self.out, 'results.json')) as fh:
			j = json.load(fh)
		self.records = j['records']
		self.failures = [f for f in j.get('failures', [])
				 if not f.startswith('plot ')]
		self.runs = max([r['run'] for r in self.records] + [0]) + 1

	def save(self):
		with open(os.path.join(self.out, 'results.json'), 'w') as fh:
			json.dump({'records': self.records,
				   'failures': self.failures}, fh, indent=1)
