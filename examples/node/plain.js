'use strict';
// An ordinary Node.js HTTP server with no corral code at all: it serves the
// listening socket it inherits as fd 3 (systemd's and corrald's convention)
// and shuts down gracefully on SIGTERM, as any well-behaved server does.
// corrald runs it as is:
//   corrald --workers 2 --memory-max 256M --node-heap -- node examples/node/plain.js
// (--node-heap also preloads corral-node-agent.js, which reports its heap and
// event loop without a line changed here.)
//
// Two deliberate leaks and a stall show what corral tells apart:
//   GET /leak?mb=N    keeps N MB of JavaScript objects (V8 heap: dies 134)
//   GET /buffer?mb=N  keeps N MB of Buffers (off-heap: the kernel kills, 137)
//   GET /block?ms=N   computes for N ms on the event loop (loop delay)
// and a long poll, held without the loop:
//   GET /wait?ms=N    answers after N ms (a timer)

const http = require('node:http');

const kept = [];

function megabyteOfObjects(seed) {
  const chunk = [];
  for (let j = 0; j < 128; j++) {
    const a = new Array(1024);
    for (let k = 0; k < 1024; k++) a[k] = seed + j * 1024 + k + 0.5;
    chunk.push(a);
  }
  return chunk;
}

function param(url, name, top) {
  const n = Number(url.searchParams.get(name) || 1);
  return Number.isInteger(n) && n >= 1 && n <= top ? n : 0;
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  if (url.pathname === '/block') {
    const ms = param(url, 'ms', 60000);
    const end = Date.now() + ms;
    while (Date.now() < end);
  } else if (url.pathname === '/wait') {
    const ms = param(url, 'ms', 600000);
    setTimeout(() => res.end(JSON.stringify({ pid: process.pid, waited_ms: ms }) + '\n'), ms);
    return;
  } else if (url.pathname === '/leak' || url.pathname === '/buffer') {
    const mb = param(url, 'mb', 1024);
    if (!mb) {
      res.writeHead(400).end('mb: 1..1024\n');
      return;
    }
    for (let i = 0; i < mb; i++) {
      kept.push(url.pathname === '/leak' ? megabyteOfObjects(kept.length) : Buffer.alloc(1 << 20, 1));
    }
  }
  res.setHeader('Content-Type', 'application/json');
  res.end(JSON.stringify({ pid: process.pid, kept_mb: kept.length }) + '\n');
});

server.listen({ fd: 3 });
process.on('SIGTERM', () => server.close(() => process.exit(0)));
