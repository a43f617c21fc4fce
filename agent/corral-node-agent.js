'use strict';
// corral-node-agent: zero-code instrumentation for an unmodified Node.js app
// run as a corral worker. corrald preloads it (`node --require=<this file>
// app.js`) with --node-agent, and by default with --node-heap when the
// program is node. It speaks the stream form of the worker protocol
// (docs/worker-protocol.md) on the inherited CORRAL_NOTIFY_FD:
//
//   READY=1     once the app's server listens on fd 3 (at once when it
//               cannot tell: no listening socket of ours on fd 3);
//   WATCHDOG=1  every report interval, from the event loop, with the same
//               report keys as the reference worker: heap used/total/limit,
//               external (Buffers included), RSS, loop delay p50/p99/max,
//               ELU, requests and in-flight requests of that server;
//   STOPPING=1  when that server closes (the app began to drain).
//
// Rules it keeps:
// - The app comes first. Nothing here may throw into the app, keep its loop
//   alive, install a signal handler or change what it serves. A broken
//   channel (EPIPE, EBADF, fd not a socket, ...) turns reporting off with one
//   line on stderr; the app carries on.
// - An app that speaks the protocol itself (it reads CORRAL_NOTIFY_FD or
//   NOTIFY_SOCKET) is left to do so: the agent falls silent, so a message is
//   never sent twice and the stream is never written by two writers.
// - A warm spare (CORRAL_SPARE=1) serves one request to itself, from the
//   preload on, while the app loads; its READY=1 waits for that, so that
//   the request which corrald thaws it for is not its first (see warmUp).
// - A V8 heap-limit death cannot be reported from JavaScript (V8 aborts
//   without running any). corrald recognises it from V8's own stderr line
//   ("Reached heap limit") and the last heap report, which this sends.
//
// Standard library only; Node.js >= 16.

(function corralNodeAgent() {
  const LISTEN_FD = 3;
  const MAX_MESSAGE = 4096;
  const RESOLUTION_MS = 10;
  const TAG = 'corral-node-agent';
  // Far above a warm-up's usual 5-30 ms, far below corrald's start timeout.
  const WARM_UP_MS = 1000;
  // How long a spare may keep accepting while it waits for its requests
  // in flight to end before its READY=1 (see readyWhenQuiet).
  const QUIET_MS = 1000;
  const WARM_UP_REQUEST = 'GET /corral-warm-up HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n';

  let fs, net, v8, perf;
  try {
    fs = require('node:fs');
    net = require('node:net');
    v8 = require('node:v8');
    perf = require('node:perf_hooks');
  } catch (e) {
    return;
  }
  const realEnv = process.env;
  const spare = realEnv.CORRAL_SPARE === '1';

  function warn(text) {
    try {
      fs.writeSync(2, `${TAG}: ${text}\n`);
    } catch (e) {
      // stderr is gone too: nothing left to tell.
    }
  }

  // Why fd is unusable as a socket (EBADF, "not a socket"), or null.
  function notSocket(fd) {
    try {
      return fs.fstatSync(fd).isSocket() ? null : 'not a socket';
    } catch (e) {
      return e.code || e.message;
    }
  }

  // The notify channel: an inherited stream socket named by CORRAL_NOTIFY_FD.
  function channelFd() {
    const raw = realEnv.CORRAL_NOTIFY_FD;
    if (raw === undefined || raw === '') return -1;
    const fd = Number(raw);
    if (!Number.isInteger(fd) || fd < 0 || fd > 65535) {
      warn(`CORRAL_NOTIFY_FD=${raw} is not a descriptor; reporting off`);
      return -1;
    }
    const why = notSocket(fd);
    if (why) {
      warn(`notify fd ${fd}: ${why}; reporting off`);
      return -1;
    }
    return fd;
  }

  // Whether fd 3 is a listening socket passed to this very process
  // (sd_listen_fds rules: LISTEN_FDS >= 1 and LISTEN_PID, when set, is us).
  function listenFdIsOurs() {
    const n = Number(realEnv.LISTEN_FDS || 0);
    const pid = realEnv.LISTEN_PID;
    if (!(n >= 1)) return false;
    if (pid !== undefined && pid !== '' && Number(pid) !== process.pid) return false;
    return notSocket(LISTEN_FD) === null;
  }

  function intervalMs() {
    const n = Number(realEnv.CORRAL_REPORT_INTERVAL_MS || 1000);
    return Number.isInteger(n) && n >= 10 && n <= 600000 ? n : 1000;
  }

  const state = {
    fd: channelFd(),
    appSpeaks: false, // the app reads the channel's variables: it is its own reporter
    ready: false,
    warming: false,   // a spare's warm-up is under way
    warmed: '',       // the warm-up's outcome, once over
    afterWarmUp: null, // READY=1, deferred until the warm-up is over
    server: null,     // the app's server on fd 3
    http: false,      // it is an HTTP(S) server: its requests are counted
    requests: 0,
    inflight: 0,
    dropped: 0,
  };
  if (state.fd < 0) return; // not under corrald, or nothing to write to

  // Writes one message whole (one write() in the common case). A channel
  // left non-blocking by someone else may be full: drop whole messages, never
  // half of one. Any other error ends reporting, not the app.
  function send(fields) {
    if (state.fd < 0 || state.appSpeaks) return false;
    const text = Object.entries(fields).map(([k, v]) => `${k}=${v}\n`).join('') + '\n';
    const buf = Buffer.from(text, 'utf8');
    if (buf.length > MAX_MESSAGE) return false;
    let off = 0;
    let spins = 0;
    while (off < buf.length) {
      try {
        off += fs.writeSync(state.fd, buf, off, buf.length - off);
      } catch (e) {
        if (e.code === 'EAGAIN' && off === 0) {
          state.dropped++;
          return false;
        }
        if (e.code === 'EAGAIN' && ++spins < 1000) continue;
        warn(`notify fd ${state.fd}: ${e.code || e.message}; reporting off`);
        state.fd = -1;
        return false;
      }
    }
    return true;
  }

  // Sees whether the app reaches for the channel itself. Enumeration does
  // not count (a `{...process.env}` copy for a child process reads every
  // key): the channel's variables are left out of it, so children do not
  // inherit a channel that is not theirs either.
  function watchEnv() {
    const own = new Set(['CORRAL_NOTIFY_FD', 'NOTIFY_SOCKET']);
    const proxy = new Proxy(realEnv, {
      get(target, key, receiver) {
        if (own.has(key)) state.appSpeaks = true;
        return Reflect.get(target, key);
      },
      has(target, key) {
        if (own.has(key)) state.appSpeaks = true;
        return Reflect.has(target, key);
      },
      ownKeys(target) {
        return Reflect.ownKeys(target).filter((k) => !own.has(k));
      },
    });
    try {
      process.env = proxy;
    } catch (e) {
      // Cannot watch: a self-reporting app would be reported twice, which
      // corrald tolerates; the app itself is unaffected.
    }
  }

  class Reporter {
    constructor(ms) {
      this.ms = ms;
      this.delay = perf.monitorEventLoopDelay({ resolution: RESOLUTION_MS });
      this.elu = perf.performance.eventLoopUtilization();
      this.timer = null;
    }

    start() {
      this.delay.enable();
      // Our own lateness probe beside the histogram: resetting Node's
      // histogram also restarts its delta, so a stall whose end the report
      // timer sees first (both were due during it) would be lost from its
      // max. The probe's max is reset without touching its clock.
      this.prev = process.hrtime.bigint();
      this.stallNs = 0;
      this.probe = setInterval(() => {
        const now = process.hrtime.bigint();
        const late = Number(now - this.prev) - RESOLUTION_MS * 1e6;
        if (late > this.stallNs) this.stallNs = late;
        this.prev = now;
      }, RESOLUTION_MS);
      this.probe.unref();
      this.timer = setInterval(() => this.report(), this.ms);
      this.timer.unref(); // never keeps the app alive
      this.report();
    }

    // Node's histogram records whole timer periods; the protocol wants the
    // lateness past the period, as corral-worker reports it.
    lateUs(ns) {
      if (!Number.isFinite(ns) || this.delay.count === 0) return 0;
      return Math.max(0, Math.round((ns - RESOLUTION_MS * 1e6) / 1000));
    }

    report() {
      if (state.fd < 0 || state.appSpeaks) {
        this.stop();
        return;
      }
      const m = process.memoryUsage();
      const d = this.delay;
      const elu = perf.performance.eventLoopUtilization(this.elu);
      this.elu = perf.performance.eventLoopUtilization();
      const fields = {
        WATCHDOG: 1,
        X_HEAP_USED: m.heapUsed,
        X_HEAP_TOTAL: m.heapTotal,
        X_HEAP_LIMIT: v8.getHeapStatistics().heap_size_limit,
        X_EXTERNAL: m.external,
        X_RSS: m.rss,
        X_LOOP_DELAY_P50_US: this.lateUs(d.percentile(50)),
        X_LOOP_DELAY_P99_US: this.lateUs(d.percentile(99)),
        X_LOOP_DELAY_MAX_US: Math.max(this.lateUs(d.max), this.stallUs()),
        X_ELU: elu.utilization.toFixed(4),
      };
      if (state.http) {
        fields.X_INFLIGHT = state.inflight;
        fields.X_REQUESTS = state.requests;
      }
      send(fields);
      d.reset();
      this.stallNs = 0;
    }

    // The probe's longest lateness since the last report, including a
    // stall that is still going on (the report timer runs after it ends).
    stallUs() {
      const open = Number(process.hrtime.bigint() - this.prev) - RESOLUTION_MS * 1e6;
      return Math.max(0, Math.round(Math.max(this.stallNs, open) / 1000));
    }

    stop() {
      if (this.probe) clearInterval(this.probe);
      this.probe = null;
      if (this.timer) clearInterval(this.timer);
      this.timer = null;
      this.delay.disable();
    }
  }

  const reporter = new Reporter(intervalMs());

  // A warm spare's warm-up. corrald freezes a spare on its READY=1 and
  // thaws it when it inherits a dead worker's slot; the first HTTP request
  // a Node process serves costs ~8 ms (V8 compiles the http server's code
  // lazily, on first use), the next ones ~1 ms. That first request would be
  // the heir's, right when it matters. So a spare serves one request first,
  // on a private server: its own handler (never the app's: side effects),
  // 127.0.0.1 port 0 (never the shared fd 3), the server side only (raw
  // socket client). The compiled code is shared by every http.Server of
  // the process, the app's included. Calls done(outcome) exactly once:
  // after the answer, on any error, or after WARM_UP_MS.
  function warmUp(done) {
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
    try {
      server = require('node:http').createServer((req, res) => res.end('warm\n'));
      server.on('error', (e) => finish(`failed (${e.code || e.message})`));
      server.listen(0, '127.0.0.1', () => {
        try {
          client = net.connect(server.address().port, '127.0.0.1');
          client.setEncoding('latin1');
          client.on('data', (text) => { if (answer.length < 64) answer += text; });
          client.on('error', (e) => finish(`failed (${e.code || e.message})`));
          client.on('end', () => finish(answer.startsWith('HTTP/1.1 200') ? '' : 'failed (bad answer)'));
          client.end(WARM_UP_REQUEST);
        } catch (e) {
          finish(`failed (${e.message})`);
        }
      });
    } catch (e) {
      finish(`failed (${e.message})`);
    }
  }

  // The first report goes before READY=1: corrald freezes a spare on
  // READY=1, and what the process still had to do then runs after the thaw,
  // in the heir's first milliseconds (a first report, its code compiled on
  // first use, takes 2-5 ms). Its WATCHDOG=1 before READY=1 is harmless:
  // corrald arms the watchdog at READY=1.
  function becomeReady(status) {
    if (state.ready) return;
    state.ready = true;
    reporter.start();
    send({ READY: 1, STATUS: status });
  }

  // Counts the requests of an HTTP(S) server; a bare net.Server has none.
  function countRequests(server) {
    server.on('request', (req, res) => {
      state.requests++;
      state.inflight++;
      res.once('close', () => {
        state.inflight--;
      });
    });
  }

  function adopt(server) {
    if (state.server) return;
    state.server = server;
    // http.Server and https.Server (not one another's instances) both
    // carry maxHeadersCount; a bare net.Server has no requests to count.
    if ('maxHeadersCount' in server) {
      state.http = true;
      countRequests(server);
    }
    server.once('close', () => send({ STOPPING: 1 }));
    // On the next tick: after the app's own 'listening' callbacks, for the
    // same reason as the report goes first (becomeReady).
    const announce = () => becomeReady(state.warmed
      ? `serving (corral-node-agent; ${state.warmed})`
      : 'serving (corral-node-agent)');
    // A server closed meanwhile (the app began to drain, STOPPING=1 went
    // out) is not made ready.
    const ready = () => {
      if (!server.listening) return;
      if (spare) readyWhenQuiet(server, announce);
      else announce();
    };
    process.nextTick(() => {
      if (state.warming) state.afterWarmUp = ready;
      else ready();
    });
  }

  // A spare warms up once the app's main module has run (a CommonJS app
  // loads in one synchronous stretch: nothing async can run before it
  // ends), and its READY=1, on which corrald freezes it, waits for the
  // warm-up. The app's listen is never held: listen({fd: 3}) keeps its
  // synchronous effects (address(), listening). A regular worker does not
  // warm up: it becomes capacity at once, and its cold first request is one
  // of its first ones, not the answer to a death. An app that speaks the
  // protocol itself sends its own READY=1, which the agent cannot hold:
  // it is left alone (examples/node/server.js warms itself up).
  function startWarmUp() {
    const over = (how) => {
      state.warmed = how;
      state.warming = false;
      const ready = state.afterWarmUp;
      state.afterWarmUp = null;
      if (ready) ready();
    };
    if (state.appSpeaks) return over('');
    send({ STATUS: 'warming up (corral-node-agent)' });
    warmUp(over);
  }

  // A spare that has spoken is killed by corrald if it is not READY=1
  // within its start timeout, counted from its spawn; one whose app never
  // listens on fd 3 (a queue consumer, say) says READY=1 itself at half of
  // it, less the time Node took to get here.
  function noListenFallback() {
    const timeout = Number(realEnv.CORRAL_START_TIMEOUT_MS);
    const ms = Number.isFinite(timeout) && timeout >= 2 ? Math.floor(timeout / 2) : 15000;
    const left = Math.max(0, ms - Math.round(process.uptime() * 1000));
    setTimeout(() => {
      if (!state.server) becomeReady(`running (corral-node-agent; no listen on fd 3 after ${ms} ms)`);
    }, left).unref();
  }

  // A spare's server accepts from the shared fd 3 like any worker until
  // corrald freezes it on READY=1; a keep-alive connection it holds then
  // would wait, frozen, until the spare is promoted. So before READY=1 the
  // spare lets its requests in flight finish (at most QUIET_MS) and closes
  // its idle connections (the client opens a new one, as after any
  // keep-alive close). Nothing is left but what arrives in the moment
  // between this and the freeze.
  function readyWhenQuiet(server, ready, since = perf.performance.now()) {
    if (state.inflight > 0 && perf.performance.now() - since < QUIET_MS) {
      setTimeout(() => readyWhenQuiet(server, ready, since), 1);
      return;
    }
    if (typeof server.closeIdleConnections === 'function') server.closeIdleConnections();
    ready();
  }

  // Wraps net.Server#listen (http, https and express servers all use it) to
  // learn when the app's server listens, and on which descriptor.
  function watchListen() {
    const listen = net.Server.prototype.listen;
    net.Server.prototype.listen = function corralListen(...args) {
      try {
        this.once('listening', () => {
          try {
            if (this._handle && this._handle.fd === LISTEN_FD) adopt(this);
          } catch (e) {
            warn(`cannot follow the server: ${e.message}`);
          }
        });
      } catch (e) {
        // Not an EventEmitter after all: listen as if we were not here.
      }
      return listen.apply(this, args);
    };
  }

  try {
    watchEnv();
    // A spare speaks at once: under --ready auto, corrald takes a worker
    // silent for 1 s as ready, and would freeze a spare whose Node start-up
    // (app modules included) takes longer, before its warm-up, and even
    // before it listens. A spoken worker gets the start timeout instead.
    if (spare) send({ STATUS: 'starting (corral-node-agent)' });
    if (listenFdIsOurs()) {
      watchListen();
      if (spare) {
        // Pending from here: a listen in the main module waits for it.
        state.warming = true;
        setImmediate(startWarmUp);
        noListenFallback();
      }
    } else {
      // Nothing on fd 3 to watch: ready once the main module has run.
      setImmediate(() => becomeReady('running (corral-node-agent; no listening fd 3)'));
    }
  } catch (e) {
    warn(`disabled: ${e.message}`);
    state.fd = -1;
  }
})();
