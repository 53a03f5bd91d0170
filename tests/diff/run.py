#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# run.py - the differential harness: runs another project's socket test
# suite twice, plain and with the switch preloaded, and compares the
# outcome of every test case. Any difference fails, unless this file
# lists it in KNOWN with what became of it.
#   PYTHONPATH=tests/lib run.py --lib LIBSDP_SWITCH.so [SUITE...]
# Suites: Python's own socket tests (Debian: libpython3.11-testsuite),
# run as `python3 -m test -v NAME`.
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import sdptest  # tests/lib, on PYTHONPATH

SUITES = ['test_socket', 'test_selectors']
# every case that differs is printed; KNOWN ones do not fail the run
# "test_x (module.Class.test_x) ... ok" and its variants
CASE = re.compile(r'^(test\w*) \(([\w.]+)\)(?: \.\.\.|\n)')
RESULT = re.compile(r'\.\.\. (ok|FAIL|ERROR|skipped|expected failure|'
		    r'unexpected success)')
# differences that are understood: case -> what became of it
KNOWN = {}


def outcomes(text):
	"""{case: outcome} from unittest's verbose output."""
	res = {}
	for line in text.splitlines():
		m = CASE.match(line)
		if not m:
			continue
		r = RESULT.search(line)
		res[m.group(2)] = r.group(1) if r else 'no result'
	return res


def report(text, case):
	"""The error unittest printed for case (its id), or ''."""
	name = case.rsplit('.', 1)[1]
	m = re.search(r'^(?:ERROR|FAIL): %s \(%s\)\n-+\n(.*?)(?=^=====|'
		      r'^-{20,}\nRan )' % (re.escape(name), re.escape(case)),
		      text, re.S | re.M)
	return m.group(1)[-1500:] if m else ''


def run(suite, env, timeout):
	t = time.monotonic()
	try:
		# AF_VSOCK cases concern no TCP socket, and where the machine
		# has a vsock transport but no loopback for it (a VM's guest)
		# ThreadedVSOCKSocketStreamTest blocks in accept() for good,
		# plain as well as preloaded
		p = subprocess.run([sys.executable, '-m', 'test', '-v',
				    '-i', '*VSOCK*', suite],
				   env=env, capture_output=True, text=True,
				   timeout=timeout)
		text = p.stdout + p.stderr
	except subprocess.TimeoutExpired as e:
		text = (e.stdout or b'').decode(errors='replace') + \
		       '\nTIMEOUT after %d s' % timeout
	return outcomes(text), text, time.monotonic() - t


def main():
	ap = argparse.ArgumentParser()
	ap.add_argument('--lib', required=True)
	ap.add_argument('--timeout', type=int, default=600)
	ap.add_argument('suites', nargs='*')
	opts = ap.parse_args()
	lib = os.path.abspath(opts.lib)
	preload = sdptest.preload(lib)
	plain_env = {k: v for k, v in os.environ.items()
		     if k != 'LD_PRELOAD' and not k.startswith('SDP_')}
	bad = 0
	for suite in opts.suites or SUITES:
		r = subprocess.run([sys.executable, '-c', 'import test.%s' %
				    suite], capture_output=True)
		if r.returncode:
			print('SKIP %s: not installed (Debian: '
			      'libpython3.11-testsuite)' % suite)
			continue
		statdir = tempfile.mkdtemp(prefix='sdp-diff.')
		pre_env = dict(plain_env, LD_PRELOAD=preload,
			       SDP_PROVIDERS='shm', SDP_STAT_DIR=statdir)
		a, atext, at = run(suite, plain_env, opts.timeout)
		b, btext, bt = run(suite, pre_env, opts.timeout)
		if not a:
			print('FAIL %s: no test case ran plain: %s' %
			      (suite, atext[-400:]))
			bad += 1
			continue
		diffs = sorted(c for c in set(a) | set(b)
			       if a.get(c) != b.get(c))
		unknown = [c for c in diffs if c not in KNOWN]
		for c in diffs:
			print('  %s %s: plain %s, preloaded %s%s' %
			      ('known' if c in KNOWN else 'DIFF', c,
			       a.get(c, 'absent'), b.get(c, 'absent'),
			       ' (%s)' % KNOWN[c] if c in KNOWN else ''))
			for t, txt in (('preloaded', btext), ('plain', atext)):
				e = report(txt, c)
				if e:
					print('    %s:\n      %s' % (t, e.replace(
					      '\n', '\n      ')))
		print('%s %s: %d cases, %d differ (%d known); %.0f s plain, '
		      '%.0f s preloaded' % ('FAIL' if unknown else 'PASS',
					      suite, len(a), len(diffs),
					      len(diffs) - len(unknown), at, bt))
		bad += bool(unknown)
		for c in KNOWN:
			if c.startswith('test.%s.' % suite) and c not in diffs:
				print('  note: %s no longer differs: drop it '
				      'from KNOWN' % c)
	return 1 if bad else 0


if __name__ == '__main__':
	sys.exit(main())
