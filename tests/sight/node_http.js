// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// node_http.js - an HTTP server and client in Node.js (run with
// UV_USE_IO_URING=1, so libuv registers sockets with io_uring): each
// request carries BYTES of a seeded stream, the answer the same length of
// another; both sides check a SHA-256 of what arrived.
//   node node_http.js server PORT
//   node node_http.js client PORT REQUESTS BYTES
'use strict';
console.log('libuv ' + process.versions.uv);
const http = require('http');
const crypto = require('crypto');

function body(seed, n) {
	// deterministic bytes: SHA-256 in counter mode
	const out = Buffer.alloc(n);
	let off = 0;
	for (let i = 0; off < n; i++) {
		const h = crypto.createHash('sha256')
			.update(seed + ':' + i).digest();
		off += h.copy(out, off);
	}
	return out;
}

function sha(b) {
	return crypto.createHash('sha256').update(b).digest('hex');
}

const [mode, port] = [process.argv[2], +process.argv[3]];
if (mode === 'server') {
	const cache = new Map();
	const srv = http.createServer((req, res) => {
		const parts = [];
		req.on('data', (d) => parts.push(d));
		req.on('end', () => {
			const got = Buffer.concat(parts);
			const n = got.length;
			if (!cache.has(n))
				cache.set(n, body('answer', n));
			res.writeHead(200, {
				'content-length': n,
				'x-request-sha': sha(got),
			});
			res.end(cache.get(n));
		});
	});
	// Node closes a keep-alive connection idle for 5 s by default, and a
	// client may just then reuse it (EPIPE): on a loaded machine that is
	// Node's race, not the path's; the connections stay for the run
	srv.keepAliveTimeout = 600000;
	srv.headersTimeout = 601000;
	srv.listen(port, '127.0.0.1', () => console.log('listening'));
} else {
	const nreq = +process.argv[4], nbytes = +process.argv[5];
	const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
	const reqBody = body('request', nbytes), reqSha = sha(reqBody);
	const ansSha = sha(body('answer', nbytes));
	let done = 0, started = 0, failed = false;
	const fail = (m) => { if (!failed) { failed = true;
		console.error('FAIL ' + m); process.exit(1); } };
	const one = () => {
		if (started >= nreq)
			return;
		const i = started++;
		const req = http.request({ host: '127.0.0.1', port, agent,
			method: 'POST', path: '/' + i,
			headers: { 'content-length': nbytes } }, (res) => {
			const parts = [];
			res.on('data', (d) => parts.push(d));
			res.on('end', () => {
				const got = Buffer.concat(parts);
				if (res.headers['x-request-sha'] !== reqSha)
					fail('request ' + i + ': the server got other bytes');
				if (got.length !== nbytes || sha(got) !== ansSha)
					fail('request ' + i + ': answer of ' + got.length +
					     ' bytes, not the expected ' + nbytes);
				if (++done === nreq) {
					console.log('ok ' + done + ' requests');
					agent.destroy();
				} else {
					one();
				}
			});
		});
		req.on('error', (e) => fail('request ' + i + ': ' + e));
		req.end(reqBody);
	};
	for (let k = 0; k < 4; k++)
		one();
}
