'use strict';
// The request handler shared by examples/node/server.js (a corral worker) and
// bench/peers/node/cluster.js (the node:cluster benchmark peer), so the two
// serve byte-for-byte the same endpoints and only the process model differs.
// Standard library only.

const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const v8 = require('node:v8');
const { performance, monitorEventLoopDelay } = require('node:perf_hooks');

const MB = 1024 * 1024;
const MAX_MS = 60000;
const MAX_ITER = 10000000;
const MAX_MB = 4096;

function envInt(name, def, min, max) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return def;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new RangeError(`${name}=${raw}: want an integer in [${min}, ${max}]`);
  }
  return n;
}

// Parses query parameter `name` as an integer in [min, max]; an absent
// parameter gives `def`. Returns NaN on anything else, which becomes a 400.
function intParam(params, name, def, min, max) {
  const raw = params.get(name);
  if (raw === null) return def;
  if (!/^[0-9]{1,10}$/.test(raw)) return NaN;
  const n = Number(raw);
  return n >= min && n <= max ? n : NaN;
}

function boolParam(params, name, def) {
  const raw = params.get(name);
  if (raw === null) return def;
  if (raw === '1' || raw === 'true') return true;
  if (raw === '0' || raw === 'false') return false;
  return null;
}

function nowMs() {
  return performance.timeOrigin + performance.now();
}

// Retained memory. Module-level on purpose: it lives as long as the process
// (a GC frees nothing still referenced, and module state lives per process), which is exactly what /alloc and /buffer must reproduce.
const retainedHeap = [];
const retainedBuffers = [];
let counter = 0;

// One MB of V8 heap: 128 arrays of 1024 distinct doubles (8 KiB of elements
// each, stored unboxed in FixedDoubleArrays) plus a short distinct string, so
// heapUsed rises and nothing lands off-heap the way a Buffer would.
function heapMegabyte(seed) {
  const chunk = new Array(128);
  for (let j = 0; j < 128; j++) {
    const a = new Array(1024);
    for (let k = 0; k < 1024; k++) a[k] = seed + j * 1024 + k + 0.5;
    chunk[j] = a;
  }
  chunk.push(`mb-${seed}-${Math.random()}`);
  return chunk;
}

class App {
  constructor(opts = {}) {
    this.workerId = String(opts.workerId ?? process.env.CORRAL_WORKER_ID ?? '0');
    this.generation = String(process.env.CORRAL_GENERATION ?? '0');
    this.jsonMax = envInt('CORRAL_JSON_MAX_BYTES', MB, 1, 1024 * MB);
    this.fileMb = envInt('CORRAL_FILE_MB', 10, 1, 1024);
    this.inflight = 0;
    this.requests = 0;
    this.draining = false;
    this.open = new Set();
    // /metrics gets its own histogram so a scrape never resets the one the
    // corral reporter owns.
    this.loopDelay = monitorEventLoopDelay({ resolution: 10 });
    this.loopDelay.enable();
    this.fileFd = -1;
    this.filePath = null;
    this.handle = this.handle.bind(this);
  }

  // Creates the /file data file. It is unlinked at once and read back through
  // /proc/self/fd, so nothing is left in the temp directory even when the
  // process dies by SIGABRT or SIGKILL, which is what this program is for.
  openDataFile() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'corral-node-'));
    const file = path.join(dir, 'data.bin');
    try {
      this.fileFd = fs.openSync(file, 'w+', 0o600);
      const block = Buffer.alloc(MB, 0x61);
      for (let i = 0; i < this.fileMb; i++) fs.writeSync(this.fileFd, block, 0, MB, i * MB);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    this.filePath = `/proc/self/fd/${this.fileFd}`;
  }

  // From now on every response closes its connection, including those of
  // requests already in progress whose headers are not out yet, so a drain
  // never waits for a keep-alive timeout.
  startDrain() {
    this.draining = true;
    for (const res of this.open) if (!res.headersSent) res.shouldKeepAlive = false;
  }

  close() {
    this.loopDelay.disable();
    if (this.fileFd >= 0) fs.closeSync(this.fileFd);
    this.fileFd = -1;
  }

  memory() {
    const m = process.memoryUsage();
    return {
      rss: m.rss,
      heap_used: m.heapUsed,
      heap_total: m.heapTotal,
      heap_limit: v8.getHeapStatistics().heap_size_limit,
      external: m.external,
      array_buffers: m.arrayBuffers,
    };
  }

  send(res, status, body, type = 'application/json') {
    const text = typeof body === 'string' ? body : JSON.stringify(body) + '\n';
    res.statusCode = status;
    res.setHeader('Content-Type', type);
    res.setHeader('Content-Length', Buffer.byteLength(text));
    res.end(text);
  }

  bad(res, what) {
    this.send(res, 400, { error: 'bad-request', message: what });
  }

  handle(req, res) {
    this.requests++;
    this.inflight++;
    this.open.add(res);
    res.once('close', () => { this.inflight--; this.open.delete(res); });
    res.setHeader('X-Worker-Id', this.workerId);
    res.setHeader('X-Worker-Pid', String(process.pid));
    if (this.draining) res.shouldKeepAlive = false;

    let url;
    try {
      url = new URL(req.url, 'http://worker');
    } catch {
      return this.bad(res, 'bad url');
    }
    const route = ROUTES[url.pathname];
    if (!route) return this.send(res, 404, { error: 'not-found' });
    if (route.method !== req.method) {
      res.setHeader('Allow', route.method);
      return this.send(res, 405, { error: 'method-not-allowed' });
    }
    return route.fn.call(this, req, res, url.searchParams);
  }
}

function light(req, res) {
  this.send(res, 200, 'ok\n', 'text/plain');
}

function health(req, res) {
  this.send(res, 200, { status: 'ok', pid: process.pid, uptime_s: process.uptime() });
}

function count(req, res) {
  counter++;
  this.send(res, 200, { count: counter, pid: process.pid, worker: this.workerId });
}

// Burns the event loop: every other request of this process waits.
function heavy(req, res, q) {
  const ms = intParam(q, 'ms', 100, 0, MAX_MS);
  if (Number.isNaN(ms)) return this.bad(res, `ms: integer 0..${MAX_MS}`);
  const start = nowMs();
  let spins = 0;
  while (nowMs() - start < ms) spins++;
  return this.send(res, 200, { ms, spins, start, end: nowMs() });
}

// Blocks the event loop without the CPU, as a synchronous driver call,
// execSync or a sync read from slow storage does: Atomics.wait on a shared
// buffer nobody notifies sleeps the thread for ms.
const SLEEP_CELL = new Int32Array(new SharedArrayBuffer(4));
function sleepsync(req, res, q) {
  const ms = intParam(q, 'ms', 100, 0, MAX_MS);
  if (Number.isNaN(ms)) return this.bad(res, `ms: integer 0..${MAX_MS}`);
  const start = nowMs();
  Atomics.wait(SLEEP_CELL, 0, 0, ms);
  return this.send(res, 200, { ms, start, end: nowMs() });
}

// Waits without blocking anything.
function slow(req, res, q) {
  const ms = intParam(q, 'ms', 100, 0, MAX_MS);
  if (Number.isNaN(ms)) return this.bad(res, `ms: integer 0..${MAX_MS}`);
  const start = nowMs();
  setTimeout(() => this.send(res, 200, { ms, start, end: nowMs() }), ms);
}

function hashParams(q) {
  return intParam(q, 'iter', 100000, 1, MAX_ITER);
}

// pbkdf2 on the libuv thread pool.
function hash(req, res, q) {
  const iter = hashParams(q);
  if (Number.isNaN(iter)) return this.bad(res, `iter: integer 1..${MAX_ITER}`);
  const start = nowMs();
  crypto.pbkdf2('corral', 'salt', iter, 64, 'sha512', (err, key) => {
    if (err) return this.send(res, 500, { error: 'pbkdf2', message: err.message });
    const end = nowMs();
    return this.send(res, 200, { iter, start, end, ms: end - start, key: key.toString('hex', 0, 8) });
  });
}

// The same work on the loop: it blocks every request of this process.
function hashsync(req, res, q) {
  const iter = hashParams(q);
  if (Number.isNaN(iter)) return this.bad(res, `iter: integer 1..${MAX_ITER}`);
  const start = nowMs();
  const key = crypto.pbkdf2Sync('corral', 'salt', iter, 64, 'sha512');
  const end = nowMs();
  return this.send(res, 200, { iter, start, end, ms: end - start, key: key.toString('hex', 0, 8) });
}

// File reads go through the thread pool. The whole file is read
// with fs.readFile; a smaller `mb` reads a prefix with one positional read.
function file(req, res, q) {
  const mb = intParam(q, 'mb', this.fileMb, 1, this.fileMb);
  if (Number.isNaN(mb)) return this.bad(res, `mb: integer 1..${this.fileMb}`);
  if (this.fileFd < 0) return this.send(res, 503, { error: 'no-data-file' });
  const start = nowMs();
  const done = (err, bytes) => {
    if (err) return this.send(res, 500, { error: 'read', message: err.message });
    const end = nowMs();
    return this.send(res, 200, { mb, bytes, start, end, ms: end - start });
  };
  if (mb === this.fileMb) {
    fs.readFile(this.filePath, (err, buf) => done(err, buf ? buf.length : 0));
  } else {
    fs.read(this.fileFd, Buffer.allocUnsafe(mb * MB), 0, mb * MB, 0, (err, n) => done(err, n));
  }
}

// Parses a JSON body on the loop; the cap bounds how long one body can stall
// the loop.
function json(req, res) {
  const declared = Number(req.headers['content-length'] ?? 0);
  const tooBig = () => {
    res.shouldKeepAlive = false;
    this.send(res, 413, { error: 'too-large', max_bytes: this.jsonMax });
    req.resume();
  };
  if (declared > this.jsonMax) return tooBig();
  const chunks = [];
  let size = 0;
  let over = false;
  req.on('data', (c) => {
    if (over) return;
    size += c.length;
    if (size > this.jsonMax) {
      over = true;
      chunks.length = 0;
      tooBig();
      return;
    }
    chunks.push(c);
  });
  req.on('end', () => {
    if (over) return;
    const start = nowMs();
    let doc;
    try {
      doc = JSON.parse(Buffer.concat(chunks, size).toString('utf8'));
    } catch (e) {
      return this.bad(res, `json: ${e.message}`);
    }
    const end = nowMs();
    const keys = doc !== null && typeof doc === 'object' ? Object.keys(doc).length : 0;
    return this.send(res, 200, { bytes: size, keys, parse_ms: end - start });
  });
}

function memParams(q) {
  return [intParam(q, 'mb', 10, 1, MAX_MB), boolParam(q, 'retain', true)];
}

// Grows the V8 heap. Past --max-old-space-size V8 aborts: "FATAL ERROR:
// Reached heap limit Allocation failed - JavaScript heap out of memory",
// SIGABRT, 134.
function alloc(req, res, q) {
  const [mb, retain] = memParams(q);
  if (Number.isNaN(mb) || retain === null) return this.bad(res, `mb: integer 1..${MAX_MB}, retain: 0|1`);
  const got = [];
  for (let i = 0; i < mb; i++) got.push(heapMegabyte(retainedHeap.length * 1e6 + i * 1e5));
  if (retain) retainedHeap.push(got);
  return this.send(res, 200, { mb, retain, retained_heap_mb: countMb(retainedHeap), memory: this.memory() });
}

// Grows off-heap memory: rss and external rise, heapUsed stays flat; past
// the cgroup limit the kernel kills the process: SIGKILL, 137.
function buffer(req, res, q) {
  const [mb, retain] = memParams(q);
  if (Number.isNaN(mb) || retain === null) return this.bad(res, `mb: integer 1..${MAX_MB}, retain: 0|1`);
  // Filled with a non-zero byte so every page is touched and counted in rss.
  const buf = Buffer.alloc(mb * MB, 0x5a);
  if (retain) retainedBuffers.push(buf);
  const bufferMb = retainedBuffers.reduce((s, b) => s + b.length, 0) / MB;
  return this.send(res, 200, { mb, retain, retained_buffer_mb: bufferMb, memory: this.memory() });
}

function countMb(list) {
  return list.reduce((s, chunk) => s + chunk.length, 0);
}

function free(req, res) {
  const heapMb = countMb(retainedHeap);
  const bufferMb = retainedBuffers.reduce((s, b) => s + b.length, 0) / MB;
  retainedHeap.length = 0;
  retainedBuffers.length = 0;
  if (typeof global.gc === 'function') global.gc();
  this.send(res, 200, { freed_heap_mb: heapMb, freed_buffer_mb: bufferMb, memory: this.memory() });
}

function metrics(req, res) {
  const m = this.memory();
  const h = this.loopDelay;
  const us = (ns) => (Number.isFinite(ns) ? ns / 1000 : 0);
  const lines = [];
  const gauge = (name, help, value, type = 'gauge') => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name} ${value}`);
  };
  gauge('corral_worker_requests_total', 'Requests received.', this.requests, 'counter');
  gauge('corral_worker_inflight', 'Requests in progress.', this.inflight);
  gauge('corral_worker_rss_bytes', 'Resident set size.', m.rss);
  gauge('corral_worker_heap_used_bytes', 'V8 heap used.', m.heap_used);
  gauge('corral_worker_heap_total_bytes', 'V8 heap reserved.', m.heap_total);
  gauge('corral_worker_heap_limit_bytes', 'V8 heap size limit.', m.heap_limit);
  gauge('corral_worker_external_bytes', 'Off-heap memory owned by JS objects.', m.external);
  gauge('corral_worker_loop_delay_p99_us', 'Event-loop delay p99 since the last scrape.', us(h.percentile(99)));
  gauge('corral_worker_loop_delay_max_us', 'Event-loop delay max since the last scrape.', us(h.max));
  h.reset();
  this.send(res, 200, lines.join('\n') + '\n', 'text/plain; version=0.0.4');
}

const ROUTES = {
  '/light': { method: 'GET', fn: light },
  '/health': { method: 'GET', fn: health },
  '/counter': { method: 'GET', fn: count },
  '/heavy': { method: 'GET', fn: heavy },
  '/sleepsync': { method: 'GET', fn: sleepsync },
  '/slow': { method: 'GET', fn: slow },
  '/hash': { method: 'GET', fn: hash },
  '/hashsync': { method: 'GET', fn: hashsync },
  '/file': { method: 'GET', fn: file },
  '/json': { method: 'POST', fn: json },
  '/alloc': { method: 'GET', fn: alloc },
  '/buffer': { method: 'GET', fn: buffer },
  '/free': { method: 'GET', fn: free },
  '/metrics': { method: 'GET', fn: metrics },
};

module.exports = { App, envInt, MB };
