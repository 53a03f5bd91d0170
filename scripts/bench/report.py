# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# report.py - turns the suite's records into results.csv, summary.md (the
# switch/TCP ratios with min/median/max, the performance targets) and the PNG
# plots drawn by gnuplot from scripts/bench/*.gp.
import csv
import json
import os
import subprocess

from benchlib import MODES, median
from tools import METRICS

# Headline metrics shown in the summary, per tool/test, in order.
HEADLINE = {
	('iperf3', None): ['gbit_s', 'cpu_s_per_gib'],
	('sockperf', 'pingpong'): ['p50_us', 'p99_us', 'p999_us',
				   'cpu_ms_per_kmsg'],
	('sockperf', 'throughput'): ['msg_s', 'cpu_ms_per_kmsg'],
	('qperf', 'tcp_bw'): ['gbit_s', 'cpu_s_per_gib'],
	('qperf', 'tcp_lat'): ['avg_us', 'cpu_ms_per_kmsg'],
	('qperf', 'tcp_bw-1cpu'): ['gbit_s', 'cpu_s_per_gib'],
	('qperf', 'tcp_lat-1cpu'): ['avg_us', 'cpu_ms_per_kmsg'],
	('connrate', None): ['conn_s', 'cpu_ms_per_kmsg'],
	('redis', None): ['set_rps', 'get_rps', 'cpu_ms_per_kmsg'],
	('nginx', None): ['req_s', 'p50_us', 'p99_us', 'cpu_ms_per_kmsg',
			  'cpu_s_per_gib'],
	('haproxy', None): ['gbit_s', 'cpu_s_per_gib'],
	('users', None): ['gbit_s', 'cpu_s_per_gib'],
	# (the backends' CPU is counted only once the postmaster reaped
	# them, which may come after the look: not shown)
	('pgbench', None): ['tps'],
}


def headline(tool, test):
	return HEADLINE.get((tool, test)) or HEADLINE.get((tool, None)) or []


def points(recs):
	"""Ordered unique (tool, test, param, x) of the records."""
	seen = []
	for r in recs:
		k = (r['tool'], r['test'], r['param'], r['x'])
		if k not in seen:
			seen.append(k)
	return seen


def stats(recs, tool, test, param, mode, metric):
	v = [r['metrics'][metric] for r in recs
	     if r['tool'] == tool and r['test'] == test and
	     r['param'] == param and r['mode'] == mode and
	     r['metrics'].get(metric) is not None]
	if not v:
		return None
	return {'min': min(v), 'median': median(v), 'max': max(v), 'n': len(v)}


def summarize(recs):
	rows = []
	for tool, test, param, x in points(recs):
		for metric in headline(tool, test):
			sw = stats(recs, tool, test, param, 'switch', metric)
			tcp = stats(recs, tool, test, param, 'tcp', metric)
			if not sw and not tcp:
				continue
			unit, higher = METRICS.get(metric, ('', True))
			ratio = None
			if sw and tcp and tcp['median']:
				ratio = sw['median'] / tcp['median']
			better = None
			if ratio is not None:
				better = ratio > 1 if higher else ratio < 1
			nerr = sum(1 for r in recs if r['tool'] == tool and
				   r['test'] == test and r['param'] == param and
				   r['mode'] == 'switch' and r['error'])
			rows.append({'tool': tool, 'test': test, 'param': param,
				     'x': x, 'metric': metric, 'unit': unit,
				     'higher_is_better': higher, 'switch': sw,
				     'tcp': tcp, 'ratio': ratio,
				     'switch_better': better,
				     'switch_failed_runs': nerr})
	return rows


def fmt(v):
	if v is None:
		return '-'
	if abs(v) >= 1000:
		return '%.0f' % v
	if abs(v) >= 10:
		return '%.1f' % v
	return '%.3g' % v


def cell(s):
	if not s:
		return 'failed'
	return '%s [%s-%s]' % (fmt(s['median']), fmt(s['min']), fmt(s['max']))


def find(rows, tool, test, param, metric):
	for r in rows:
		if (r['tool'], r['test'], r['param'], r['metric']) == \
		   (tool, test, param, metric):
			return r
	return None


def targets(rows):
	"""The performance targets: (name, wanted, measured ratio, met)."""
	out = []

	def one(name, key, want, ok):
		r = find(rows, *key)
		if not r or r['ratio'] is None:
			out.append((name, want, 'not measured', None))
		else:
			out.append((name, want, r['ratio'], ok(r['ratio'])))

	one('iperf3 1 stream 1 MiB', ('iperf3', '1stream', '1M', 'gbit_s'),
	    '>= 3.5x', lambda v: v >= 3.5)
	one('sockperf ping-pong 64 B p50', ('sockperf', 'pingpong', '64',
	    'p50_us'), '<= 1/15 (0.067)', lambda v: v <= 1 / 15)
	one('sockperf ping-pong 64 B p99', ('sockperf', 'pingpong', '64',
	    'p99_us'), '<= 1/5 (0.2)', lambda v: v <= 0.2)
	one('sockperf throughput 64 B', ('sockperf', 'throughput', '64',
	    'msg_s'), '>= 5x', lambda v: v >= 5)
	one('redis GET', ('redis', 'plain', '50conn', 'get_rps'), '>= 1.5x',
	    lambda v: v >= 1.5)
	one('redis SET', ('redis', 'plain', '50conn', 'set_rps'), '>= 1.5x',
	    lambda v: v >= 1.5)
	for page in ('small', '1M'):
		one('nginx/wrk %s' % page, ('nginx', 'wrk', page, 'req_s'),
		    '>= 1.4x', lambda v: v >= 1.4)
	one('nginx/wrk 1M, sendfile on', ('nginx', 'wrk', '1M-sendfile',
	    'req_s'), '>= 1.0x', lambda v: v >= 1.0)
	one('connection set-up', ('connrate', 'connect', '1B', 'conn_s'),
	    '>= 0.7x', lambda v: v >= 0.7)
	speed = [r for r in rows if not r['metric'].startswith('cpu_')
		 and r['ratio'] is not None]
	slower = [r for r in speed if not r['switch_better']]
	out.append(('no size/tool slower than TCP', '0 slower',
		    '%d of %d slower' % (len(slower), len(speed)),
		    not slower and bool(speed)))
	gib = [r for r in rows if r['metric'] == 'cpu_s_per_gib'
	       and r['ratio'] is not None]
	worse = [r for r in gib if r['ratio'] >= 1]
	out.append(('CPU per GiB lower than TCP', 'all < 1x',
		    '%d of %d higher' % (len(worse), len(gib)),
		    not worse and bool(gib)))
	return out, slower


def write_csv(ctx):
	keys = set()
	for r in ctx.records:
		keys.update(r['metrics'])
	keys = sorted(keys)
	with open(os.path.join(ctx.out, 'results.csv'), 'w', newline='') as fh:
		w = csv.writer(fh)
		w.writerow(['tool', 'test', 'param', 'x', 'mode', 'run',
			    'client_cpu_s', 'server_cpu_s', 'wall_s', 'error']
			   + keys)
		for r in ctx.records:
			w.writerow([r['tool'], r['test'], r['param'], r['x'],
				    r['mode'], r['run'],
				    r['cpu'].get('client_s'),
				    r['cpu'].get('server_s'), r.get('wall_s'),
				    r['error'] or ''] +
				   [r['metrics'].get(k) for k in keys])


def write_summary(ctx, rows):
	L = ['# sdp-switch vs TCP: summary', '',
	     'Provider %s; %d runs per mode and point, alternating; '
	     'cells are median [min-max]. ratio = switch/TCP of the medians; '
	     'for latency and CPU lower is better. See env.txt.' %
	     (ctx.provider, ctx.runs), '',
	     '| tool | test | size | metric | switch | TCP | ratio | '
	     'better |', '|---|---|---|---|---|---|---|---|']
	for r in rows:
		L.append('| %s | %s | %s | %s (%s) | %s | %s | %s | %s |' % (
		    r['tool'], r['test'], r['param'], r['metric'], r['unit'],
		    cell(r['switch']), cell(r['tcp']),
		    ('%.2fx' % r['ratio']) if r['ratio'] is not None else '-',
		    {True: 'yes', False: '**no**', None: '-'}
		    [r['switch_better']]))
	tg, slower = targets(rows)
	L += ['', '## Performance targets', '', '| target | wanted | measured | '
	      'met |', '|---|---|---|---|']
	for name, want, got, ok in tg:
		g = ('%.3fx' % got) if isinstance(got, float) else (got or '-')
		L.append('| %s | %s | %s | %s |' % (
		    name, want, g, {True: 'yes', False: '**no**',
				    None: 'n/a'}[ok]))
	if slower:
		L += ['', 'Where the switch is slower than TCP:', '']
		for r in slower:
			L.append('- %s %s %s %s: %.2fx' % (
			    r['tool'], r['test'], r['param'], r['metric'],
			    r['ratio']))
	if ctx.failures:
		L += ['', '## Failed runs', '']
		L += ['- ' + f for f in ctx.failures]
	errs = {}
	for r in ctx.records:
		if r['metrics'].get('errors'):
			errs[r['mode']] = errs.get(r['mode'], 0) + \
				r['metrics']['errors']
	if errs:
		L += ['', 'Failed connections inside connrate runs: %s.' %
		      ', '.join('%s %d' % kv for kv in sorted(errs.items()))]
	L += san_section(ctx)
	with open(os.path.join(ctx.out, 'summary.md'), 'w') as fh:
		fh.write('\n'.join(L) + '\n')


FB_MEANING = {
	'ended': 'connections that closed before their upgrade began '
		 '(each side upgrades a connection from 1 ms or 64 KiB on)',
	'cut': 'connections shut down, forked or given urgent data before '
	       'their upgrade finished',
	'no-peer-switch': 'connections from a program without the switch '
			  '(the suite\'s own readiness probe)',
}


def san_section(ctx):
	"""Where the switch runs' bytes went: SAN or TCP, from the servers'
	sdp-stat (the server and the processes it forked), and the
	fallbacks they counted."""
	L = ['', '## Did the switch carry the data?', '']
	runs = [r for r in ctx.records if r['mode'] == 'switch' and
		r.get('san') and r['san'].get('san_share') is not None]
	if not runs:
		return L + ['No server statistics were read (sdp-stat missing '
			    'or no switch run).']
	pts = {}
	for r in runs:
		k = '%s %s %s' % (r['tool'], r['test'], r['param'])
		pts.setdefault(k, []).append(r['san'])
	L += ['Bytes each switch run\'s server sent and received (the server '
	      'and the processes it forked, closed connections included, '
	      'from sdp-stat at 75% of the run and after it), and the share '
	      'that went through the provider rather than TCP:', '',
	      '| point | runs | bytes (median) | on the SAN (min) |',
	      '|---|---|---|---|']
	for k in sorted(pts):
		v = pts[k]
		tot = sorted(x['bytes_san'] + x['bytes_tcp'] for x in v)
		share = min(x['san_share'] for x in v)
		L.append('| %s | %d | %s | %.2f%% |' %
			 (k, len(v), human_bytes(tot[len(tot) // 2]),
			  100.0 * share))
	fb = {}
	for r in runs:
		for k, v in (r['san'].get('fallbacks') or {}).items():
			fb[k] = fb.get(k, 0) + v
	if fb:
		L += ['', 'Connections the servers left on TCP, by reason '
		      '(docs/fallback-reasons.md):', '']
		for k, v in sorted(fb.items()):
			L.append('- %s: %d%s' % (k, v, (': ' + FB_MEANING[k])
						 if k in FB_MEANING else ''))
	return L


def human_bytes(n):
	for unit in ('B', 'KiB', 'MiB', 'GiB'):
		if n < 1024 or unit == 'GiB':
			return ('%d %s' % (n, unit) if unit == 'B'
				else '%.1f %s' % (n, unit))
		n /= 1024.0
	return str(n)


def plot(ctx, rows, name, title, ylabel, series, logy):
	"""series: list of (label prefix, tool, test, metric)."""
	dat = os.path.join(ctx.out, name + '.dat')
	blocks = []
	with open(dat, 'w') as fh:
		for label, tool, test, metric in series:
			for mode in MODES:
				pts = []
				for r in rows:
					if (r['tool'], r['test'], r['metric']) != \
					   (tool, test, metric):
						continue
					s = r['switch' if mode == 'switch'
					      else 'tcp']
					if s:
						pts.append((r['x'], s['median'],
							    s['min'], s['max']))
				if not pts:
					continue
				fh.write('# %s %s\n' % (label, mode))
				for p in sorted(pts):
					fh.write('%d %g %g %g\n' % p)
				fh.write('\n\n')
				blocks.append('%s %s' % (label,
					      'switch' if mode == 'switch'
					      else 'TCP'))
	if not blocks:
		os.unlink(dat)
		return None
	png = os.path.join(ctx.out, name + '.png')
	gp = os.path.join(ctx.here, 'plot.gp')
	# gnuplot's word() keeps double-quoted titles whole
	titles = ' '.join('\\"%s\\"' % b for b in blocks)
	r = subprocess.run(['gnuplot', '-e',
			    'datafile="%s"; outfile="%s"; ttl="%s"; '
			    'ylab="%s"; titles="%s"; nblocks=%d; logy=%d'
			    % (dat, png, title, ylabel, titles, len(blocks),
			       1 if logy else 0), gp],
			   capture_output=True, text=True)
	if r.returncode:
		ctx.failures.append('plot %s: gnuplot: %s' % (name,
					r.stderr.strip()[-300:]))
		return None
	return png


def write_plots(ctx, rows):
	plot(ctx, rows, 'throughput', 'Throughput vs message size',
	     'Gbit/s', [('iperf3 1 stream', 'iperf3', '1stream', 'gbit_s'),
			('iperf3 4 streams', 'iperf3', '4stream', 'gbit_s'),
			('sockperf tp', 'sockperf', 'throughput', 'gbit_s')],
	     False)
	plot(ctx, rows, 'msgrate', 'sockperf throughput: message rate',
	     'messages/s', [('sockperf tp', 'sockperf', 'throughput',
			     'msg_s')], True)
	plot(ctx, rows, 'latency', 'sockperf ping-pong latency (one way)',
	     'microseconds', [('p50', 'sockperf', 'pingpong', 'p50_us'),
			      ('p99', 'sockperf', 'pingpong', 'p99_us')], True)
	plot(ctx, rows, 'cpu', 'CPU cost of iperf3 (both sides)',
	     'CPU seconds per GiB', [('iperf3 1 stream', 'iperf3', '1stream',
				       'cpu_s_per_gib')], True)


def write_all(ctx):
	rows = summarize(ctx.records)
	write_csv(ctx)
	with open(os.path.join(ctx.out, 'results.json'), 'w') as fh:
		json.dump({'records': ctx.records, 'summary': rows,
			   'failures': ctx.failures}, fh, indent=1)
	write_plots(ctx, rows)
	write_summary(ctx, rows)
	with open(os.path.join(ctx.out, 'results.json'), 'w') as fh:
		json.dump({'records': ctx.records, 'summary': rows,
			   'targets': [list(t) for t in targets(rows)[0]],
			   'failures': ctx.failures}, fh, indent=1)
