#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# grpc_peer.py - a gRPC server and client (Debian's python3-grpcio: gRPC's
# C core, which registers each connection once with EPOLLIN|EPOLLOUT|
# EPOLLET and sets SO_ZEROCOPY) for run.py grpc-python. No generated code:
# generic handlers on bytes.
#   grpc_peer.py server PORT
#   grpc_peer.py client PORT CALLS MIB
# The client prints one JSON line: ok, calls, bad, stream and sink bytes,
# seconds of each part.
import hashlib
import json
import os
import sys
import time
from concurrent import futures

import grpc


def ident(b):
	return b


def block(i):
	"""1 MiB block i of a stream, the same at both ends."""
	return hashlib.sha256(b'%d' % i).digest() * (1 << 15)


def echo(req, ctx):
	return req


def stream(req, ctx):
	for i in range(int(req.decode())):
		yield block(i)


def sink(it, ctx):
	h = hashlib.sha256()
	for b in it:
		h.update(b)
	return h.hexdigest().encode()


def server(port):
	s = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
	s.add_generic_rpc_handlers((grpc.method_handlers_generic_handler('t', {
		'echo': grpc.unary_unary_rpc_method_handler(echo, ident, ident),
		'stream': grpc.unary_stream_rpc_method_handler(stream, ident,
							       ident),
		'sink': grpc.stream_unary_rpc_method_handler(sink, ident,
							     ident)}),))
	s.add_insecure_port('127.0.0.1:%d' % port)
	s.start()
	s.wait_for_termination()


def client(port, calls, mib):
	ch = grpc.insecure_channel('127.0.0.1:%d' % port)
	e = ch.unary_unary('/t/echo', ident, ident)
	st = ch.unary_stream('/t/stream', ident, ident)
	sk = ch.stream_unary('/t/sink', ident, ident)
	t0 = time.monotonic()
	bad = 0
	for i in range(calls):
		# mostly small requests, every 50th up to 300 KB
		n = 1 + (i * 7919) % (300000 if i % 50 == 0 else 3000)
		b = os.urandom(n)
		if e(b, timeout=30) != b:
			bad += 1
	t1 = time.monotonic()
	want = hashlib.sha256()
	got = hashlib.sha256()
	n = 0
	for i, b in enumerate(st(b'%d' % mib, timeout=60)):
		got.update(b)
		n += len(b)
	for i in range(mib):
		want.update(block(i))
	stream_ok = got.digest() == want.digest() and n == mib << 20
	t2 = time.monotonic()
	r = sk(iter([block(i) for i in range(mib)]), timeout=60)
	sink_ok = r.decode() == want.hexdigest()
	t3 = time.monotonic()
	ch.close()
	print(json.dumps({'ok': not bad and stream_ok and sink_ok,
			  'calls': calls, 'bad': bad, 'stream_bytes': n,
			  'stream_ok': stream_ok, 'sink_ok': sink_ok,
			  'calls_s': round(t1 - t0, 3),
			  'stream_s': round(t2 - t1, 3),
			  'sink_s': round(t3 - t2, 3)}))


def main(argv):
	if argv[1] == 'server':
		server(int(argv[2]))
	else:
		client(int(argv[2]), int(argv[3]), int(argv[4]))
	return 0


if __name__ == '__main__':
	sys.exit(main(sys.argv))
