# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# sdptest.py - what the Python tests and the benchmark suite share: a
# test's Fail, Skip and check, free ports, "is it listening yet", the
# LD_PRELOAD value for the switch (from tests/lib/lib.sh, the one
# definition) and reading sdp-stat --json.
# Found through PYTHONPATH=tests/lib, which the make targets set.
import json
import os
import socket
import subprocess

LIB_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib.sh')


class Fail(Exception):
	"""A test's check failed: the message says what was seen."""


class Skip(Exception):
	"""A test cannot run here: the message says what it needs."""


def check(cond, msg):
	if not cond:
		raise Fail(msg)


def free_port():
	"""A TCP port of 127.0.0.1 that nothing uses now (the kernel's pick)."""
	s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
	s.bind(('127.0.0.1', 0))
	port = s.getsockname()[1]
	s.close()
	return port


def listening(port):
	"""True when some socket listens on PORT (read from /proc, so that no
	probe connection reaches the server)."""
	want = ':%04X' % port
	for f in ('/proc/net/tcp', '/proc/net/tcp6'):
		try:
			with open(f) as fh:
				next(fh)
				for line in fh:
					x = line.split()
					if x[1].endswith(want) and x[3] == '0A':
						return True
		except OSError:
			pass
	return False


def preload(lib):
	"""The LD_PRELOAD value for LIB, as sdp_preload in lib.sh makes it (the
	ASan runtime first under SANITIZE=1); sets ASAN_OPTIONS in os.environ
	as it does, unless already set."""
	r = subprocess.run(['bash', '-c', '. "$1"; sdp_preload "$2"; '
			    'printf "%s\\n%s" "$preload" "${ASAN_OPTIONS:-}"',
			    'sh', LIB_SH, lib],
			   capture_output=True, text=True, check=True)
	value, _, asan = r.stdout.partition('\n')
	if asan:
		os.environ.setdefault('ASAN_OPTIONS', asan)
	return value


def sdp_stat_json(statbin, args, timeout=60):
	"""Runs `sdp-stat ARGS --json` and returns its parsed output; raises
	RuntimeError with sdp-stat's message when it fails."""
	out = subprocess.run([statbin] + list(args) + ['--json'],
			     capture_output=True, text=True, timeout=timeout)
	if out.returncode:
		raise RuntimeError('sdp-stat %s failed: %s' %
				   (' '.join(args), out.stderr.strip()))
	return json.loads(out.stdout)
