'use strict';
// A corral worker in Node.js: serves the shared listening socket corrald
// passes as fd 3 and reports to corrald over the stream form of the worker
// protocol (docs/worker-protocol.md), because Node cannot send AF_UNIX
// datagrams. Run by corrald as
//   node --max-old-space-size=<MB> examples/node/server.js
// Standalone (no LISTEN_FDS) it listens on 127.0.0.1:$PORT (default 8080)
// and reports nothing.

const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const v8 = require('node:v8');
const { performance, monitorEventLoopDelay } = require('node:perf_hooks');
const { App, envInt } = require('./app.js');

const LISTEN_FD = 3;
const MAX_MESSAGE = 4096;
// Far longer than a request's flight, far shorter than the drain bound.
const DRAIN_IDLE_GRACE_MS = 1000;
// Far above a warm-up's usual 5-30 ms, far below corrald's start timeout.
const WARM_UP_MS = 1000;
const WARM_UP_REQUEST = 'GET /light HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n';

// Writes one protocol message. The write is blocking and made from the loop
// on purpose: a blocked loop then falls silent and corrald notices. A closed
// or broken channel turns reporting off; the worker keeps serving.
class Notifier {
  constructor(fd) {
    this.fd = fd;
    this.dropped = 0;
  }

  send(fields) {
    if (this.fd < 0) return false;
    const text = Object.entries(fields).map(([k, v]) => `${k}=${v}\n`).join('') + '\n';
    const buf = Buffer.from(text, 'utf8');
    if (buf.length > MAX_MESSAGE) throw new RangeError('notify message over 4 KiB');
    let off = 0;
    let spins = 0;
    while (off < buf.length) {
      try {
        off += fs.writeSync(this.fd, buf, off, buf.length - off);
      } catch (e) {
        // A non-blocking channel that is full: drop whole messages only, so
        // the framing stays intact; finish a started one, but not forever.
        if (e.code === 'EAGAIN' && off === 0) { this.dropped++; return false; }
        if (e.code === 'EAGAIN' && ++spins < 1000) continue;
        process.stderr.write(`corral notify fd ${this.fd}: ${e.code || e.message}; reporting off\n`);
        this.fd = -1;
        return false;
      }
    }
    return true;
  }
}

function notifyFd() {
  const raw = process.env.CORRAL_NOTIFY_FD;
  if (raw === undefined || raw === '') return -1;
  const fd = Number(raw);
  if (!Number.isInteger(fd) || fd < 0) throw new RangeError(`CORRAL_NOTIFY_FD=${raw}`);
  return fd;
}

// The periodic report: WATCHDOG=1 plus the memory and loop figures corrald
// reads together (heapUsed alone misses Buffers; max shows a stall
// p99 hides). The delay histogram and the ELU are per interval.
class Reporter {
  constructor(notifier, app, intervalMs) {
    this.notifier = notifier;
    this.app = app;
    this.intervalMs = intervalMs;
    this.delay = monitorEventLoopDelay({ resolution: 10 });
    this.elu = performance.eventLoopUtilization();
    this.timer = null;
  }

  start() {
    this.delay.enable();
    this.timer = setInterval(() => this.report(), this.intervalMs);
    this.timer.unref();
  }

  report() {
    const m = process.memoryUsage();
    const d = this.delay;
    const us = (ns) => (Number.isFinite(ns) && d.count > 0 ? Math.round(ns / 1000) : 0);
    const elu = performance.eventLoopUtilization(this.elu);
    this.elu = performance.eventLoopUtilization();
    this.notifier.send({
      WATCHDOG: 1,
      X_HEAP_USED: m.heapUsed,
      X_HEAP_TOTAL: m.heapTotal,
      X_HEAP_LIMIT: v8.getHeapStatistics().heap_size_limit,
      X_EXTERNAL: m.external,
      X_RSS: m.rss,
      X_LOOP_DELAY_P50_US: us(d.percentile(50)),
      X_LOOP_DELAY_P99_US: us(d.percentile(99)),
      X_LOOP_DELAY_MAX_US: us(d.max),
      X_ELU: elu.utilization.toFixed(4),
      X_INFLIGHT: this.app.inflight,
      X_REQUESTS: this.app.requests,
    });
    d.reset();
  }

  stop() {
    if (this.timer) clearInterval(this.timer);
    this.delay.disable();
  }
}

// A warm spare (CORRAL_SPARE=1) is frozen on its READY=1 and thawed to take
// a dead worker's slot. The first request a Node process serves costs ~8 ms
// (V8 compiles the http server's code on first use), later ones ~1 ms: the
// spare pays that before it listens on fd 3 (so before READY=1) on a private
// server (127.0.0.1 port 0, never fd 3) with the given handler, so the
// heir's first answer does not. The same warm-up as corral-node-agent.js's,
// which cannot do it for this worker: it leaves a worker that speaks for
// itself alone. Calls done(outcome) exactly once: after the answer, on an
// error, or after WARM_UP_MS.
function warmUp(handler, done) {
  const t0 = process.hrtime.bigint();
  let server = null;
  let client = null;
  let answer = '';
  let timer = null; // null again once finished
  const finish = (how) => {
    if (!timer) return;
    clearTimeout(timer);
    timer = null;
    if (client) client.destroy();
    if (server) server.close();
    const ms = Number((process.hrtime.bigint() - t0) / 1000000n);
    done(how ? `warm-up ${how} after ${ms} ms` : `warmed up in ${ms} ms`);
  };
  timer = setTimeout(() => finish('timed out'), WARM_UP_MS);
  server = http.createServer(handler);
  server.on('error', (e) => finish(`failed (${e.code || e.message})`));
  server.listen(0, '127.0.0.1', () => {
    client = net.connect(server.address().port, '127.0.0.1');
    client.setEncoding('latin1');
    client.on('data', (text) => { if (answer.length < 64) answer += text; });
    client.on('error', (e) => finish(`failed (${e.code || e.message})`));
    client.on('end', () => finish(answer.startsWith('HTTP/1.1 200') ? '' : 'failed (bad answer)'));
    client.end(WARM_UP_REQUEST);
  });
}

// corrald (like systemd) passes WATCHDOG_USEC and flags a worker blocked
// after that much silence: report at least four times per period, or timer
// jitter alone makes the worker flap blocked/unblocked.
function reportIntervalMs() {
  const ms = envInt('CORRAL_REPORT_INTERVAL_MS', 1000, 10, 600000);
  const usec = Number(process.env.WATCHDOG_USEC || 0);
  if (!Number.isFinite(usec) || usec <= 0) return ms;
  return Math.max(1, Math.min(ms, Math.floor(usec / 4000)));
}

function main() {
  const app = new App();
  const notifier = new Notifier(notifyFd());
  const reporter = new Reporter(notifier, app, reportIntervalMs());
  const drainMs = envInt('CORRAL_DRAIN_TIMEOUT_MS', 8000, 0, 3600000);
  app.openDataFile();

  const server = http.createServer(app.handle);
  server.on('clientError', (err, sock) => {
    if (sock.writable) sock.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    else sock.destroy();
  });

  const finish = (code) => {
    reporter.stop();
    app.close();
    process.exit(code);
  };

  // Drain: stop accepting, let in-flight requests finish (their connections
  // close after the response), and exit 0 once the last one is gone. Past
  // the bound, cut them and exit 1.
  //
  // An idle keep-alive socket is not closed at once: the client may have
  // sent its next request already, and closing under it answers that
  // request with a reset. http.Server#close() closes idle connections
  // immediately (Node >= 19), so only the listener is closed here
  // (net.Server#close); every request from now on is answered with
  // Connection: close, and only sockets that stayed silent for the whole
  // grace are closed, when nothing can be on its way any more.
  const drain = (sig) => {
    if (app.draining) return;
    app.startDrain();
    notifier.send({ STOPPING: 1 });
    net.Server.prototype.close.call(server, () => finish(0));
    setTimeout(() => server.closeIdleConnections(), DRAIN_IDLE_GRACE_MS).unref();
    setTimeout(() => {
      process.stderr.write(`${sig}: drain timeout, ${app.inflight} request(s) cut\n`);
      server.closeAllConnections();
      finish(1);
    }, drainMs).unref();
  };
  process.on('SIGTERM', () => drain('SIGTERM'));
  process.on('SIGINT', () => drain('SIGINT'));

  // The first report goes before READY=1: corrald freezes a spare on
  // READY=1, and what is left to do then runs after the thaw, in the heir's
  // first milliseconds (a first report, compiled on first use, takes
  // 2-5 ms). corrald arms its watchdog at READY=1.
  listen(server, notifier, app, (status) => {
    reporter.start();
    reporter.report();
    notifier.send(status ? { READY: 1, STATUS: status } : { READY: 1 });
  });
}

// Listens on fd 3 under corrald, else on 127.0.0.1:$PORT, and calls
// ready(the warm-up's outcome, or null) once listening. A spare listens only once
// warmed up: listening leads to READY=1 and so to corrald's freeze, and a
// connection taken from fd 3 during the warm-up would be stuck in the
// frozen spare.
function listen(server, notifier, app, ready) {
  let warmed = null;
  server.on('listening', () => ready(warmed));
  if (Number(process.env.LISTEN_FDS || 0) < 1) {
    const port = envInt('PORT', 8080, 0, 65535);
    server.listen(port, '127.0.0.1', () => {
      process.stdout.write(`listening ${server.address().port}\n`);
    });
  } else if (process.env.CORRAL_SPARE === '1' && notifier.fd >= 0) {
    // This first message tells corrald's --ready auto that the worker
    // speaks, so that auto's silent grace does not cut the warm-up short.
    notifier.send({ STATUS: 'warming up' });
    // A scratch App's handler: this app's own code gets warm too, and GET
    // /light touches nothing but that instance's counters.
    const scratch = new App();
    warmUp(scratch.handle, (how) => {
      scratch.close();
      warmed = how;
      if (!app.draining) server.listen({ fd: LISTEN_FD });
    });
  } else {
    server.listen({ fd: LISTEN_FD });
  }
}

main();
