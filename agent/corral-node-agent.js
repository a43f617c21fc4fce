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
// And it keeps the worker page (CORRAL_PAGE_FD, docs/worker-protocol.md,
// "The worker page"): the request being served, from that server's
// 'request' events (kept in shared memory by the main thread, copied into
// the page by a helper thread), and the JS stack of the main thread on
// corrald's request, which that helper (worker_threads) takes through the
// inspector even while the main thread is stuck in a loop.
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
//   ("Reached heap limit") and the last heap report, which this sends with
//   the heap's spaces (X_HEAP_SPACES), and finds V8's fatal-error report
//   in the directory it gave node (--report-on-fatalerror).
//
// Standard library only; Node.js >= 16.

(function corralNodeAgent() {
  // The worker page's layout (common/wpage.h; docs/worker-protocol.md).
  const PAGE = {
    SIZE: 16384,
    MAGIC: 0x50575243,
    F_REQUEST: 1,
    F_STACK: 2,
    OFF_FEATURES: 8,
    OFF_REQ: 64,       // the request record, 436 bytes (writeRecord):
    REQ_LEN: 436,      //   relative offsets below
    R_INFLIGHT: 4,
    R_STARTED: 8,
    R_COUNT: 16,
    R_METHOD_LEN: 24,
    R_TARGET_LEN: 26,
    R_METHOD: 32,
    R_TARGET: 48,
    R_SEQ_END: 432,
    METHOD_MAX: 16,
    TARGET_MAX: 384,
    OFF_STACK_REQ: 512,
    OFF_STACK_ANS: 516,
    OFF_STACK_LEN: 520,
    OFF_SOURCE: 528,
    SOURCE_MAX: 32,
    OFF_STACK: 1024,
    STACK_MAX: 15360,
  };

  // The request record the main thread shares with the stack helper
  // (makePage): the record's bytes, then control words (Int32 indexes).
  const SHARED = {
    LEN: 456,
    SEQ_END: 108,  // the record's second sequence number (its first is index 0)
    MIRROR: 110,   // 0: the main thread writes the page; 1: the helper mirrors; 2: nobody
    WAITING: 111,  // 1 while the helper sleeps until the record changes
    FEATURES: 112, // the page's features: each thread sets its own bit (setFeatures)
    CLAIMED: 113,  // 1 once the app keeps the page itself: the features are 0
  };

  // The page's features, from either thread: the main thread's bit 0 (once
  // the server of fd 3 had a request), the helper's bit 1 (once it
  // answers; it must not wait for the main thread, which may be stuck
  // already). Each sets or clears its bit in the shared word, writes the
  // word, and looks again: a thread that wrote a stale word sees the change
  // and writes again, so the page ends with the word. Once the app claimed
  // the page (CLAIMED; not MIRROR 2, which an exit sets too) the word
  // written is 0. io: that thread's fs.
  function setFeatures(io, fd, i32, set, clear) {
    if (set) Atomics.or(i32, SHARED.FEATURES, set);
    if (clear) Atomics.and(i32, SHARED.FEATURES, ~clear);
    const now = () =>
      (Atomics.load(i32, SHARED.CLAIMED) === 1 ? 0 : Atomics.load(i32, SHARED.FEATURES));
    const b = Buffer.alloc(4);
    for (let tries = 0; tries < 8; tries++) {
      const v = now();
      b.writeUInt32LE(v >>> 0, 0);
      io.writeSync(fd, b, 0, 4, PAGE.OFF_FEATURES);
      if (now() === v) return;
    }
  }

  // Writes the record rec (PAGE.REQ_LEN bytes) to the page in three
  // pwrites, in the order its readers rely on: the first sequence number,
  // the fields, the last one. One pwrite of the whole would not do: the
  // kernel copies it with `rep movs`, whose stores another CPU may see out
  // of order, so corrald could take a half-written record for a whole one.
  // io: the fs module (the helper thread has its own).
  function writeRecord(io, fd, rec) {
    io.writeSync(fd, rec, 0, 4, PAGE.OFF_REQ);
    io.writeSync(fd, rec, 4, PAGE.R_SEQ_END - 4, PAGE.OFF_REQ + 4);
    io.writeSync(fd, rec, PAGE.R_SEQ_END, 4, PAGE.OFF_REQ + PAGE.R_SEQ_END);
  }

  let threads = null;
  try {
    threads = require('node:worker_threads');
  } catch (e) {
    // No worker threads: no stack helper; the rest works without.
  }
  // --require is inherited by the app's own worker threads (execArgv): the
  // agent is the main thread's, and only its stack helper runs elsewhere.
  if (threads && !threads.isMainThread) {
    const data = threads.workerData;
    if (data && typeof data === 'object' && data.corralStackHelper === true) stackHelper(data);
    return;
  }

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
    dropped: 0,
    appPage: false,   // the app reads CORRAL_PAGE_FD: it keeps the page itself
  };

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
    const own = new Set(['CORRAL_NOTIFY_FD', 'NOTIFY_SOCKET', 'CORRAL_PAGE_FD']);
    const claim = (key) => {
      if (key === 'CORRAL_PAGE_FD') page.claimed();
      else state.appSpeaks = true;
    };
    const proxy = new Proxy(realEnv, {
      get(target, key, receiver) {
        if (own.has(key)) claim(key);
        return Reflect.get(target, key);
      },
      has(target, key) {
        if (own.has(key)) claim(key);
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
        X_HEAP_SPACES: heapSpaces(),
      };
      if (state.http) {
        fields.X_INFLIGHT = page.inflight;
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

  // V8's heap spaces, compact: "new:used/size,old:used/size,..." in bytes,
  // each space's name without its "_space" (10 spaces: about 300 bytes).
  // corrald keeps the last one for the post-mortem: at a heap-limit abort
  // it says which space filled up.
  function heapSpaces() {
    // corrald refuses the whole key for one name it cannot keep (over 31
    // bytes, or not [a-z0-9_]) or a 17th space: such a space is left out.
    let out = '';
    let n = 0;
    for (const sp of v8.getHeapSpaceStatistics()) {
      const name = String(sp.space_name).replace(/_space$/, '');
      if (n === 16 || !/^[a-z0-9_]{1,31}$/.test(name)) continue;
      out += `${out ? ',' : ''}${name}:${sp.space_used_size}/${sp.space_size}`;
      n++;
    }
    return out;
  }

  const reporter = state.fd >= 0 ? new Reporter(intervalMs()) : null;

  // The page named by CORRAL_PAGE_FD, checked (a regular file of the
  // page's size with corrald's magic), or -1 with one line on stderr.
  function pageFd() {
    const raw = realEnv.CORRAL_PAGE_FD;
    if (raw === undefined || raw === '') return -1;
    const fd = Number(raw);
    if (!Number.isInteger(fd) || fd < 0 || fd > 65535) {
      warn(`CORRAL_PAGE_FD=${raw} is not a descriptor; not saying what it serves`);
      return -1;
    }
    try {
      const magic = Buffer.alloc(4);
      if (!fs.fstatSync(fd).isFile() || fs.fstatSync(fd).size < PAGE.SIZE ||
          fs.readSync(fd, magic, 0, 4, 0) !== 4 || magic.readUInt32LE(0) !== PAGE.MAGIC) {
        warn(`page fd ${fd}: not a worker page; not saying what it serves`);
        return -1;
      }
    } catch (e) {
      warn(`page fd ${fd}: ${e.code || e.message}; not saying what it serves`);
      return -1;
    }
    return fd;
  }

  // The worker page, the main thread's side: the request record, and the
  // stack helper it starts.
  //
  // The record names the newest request started and not finished (a
  // handler that blocks the loop blocks inside it). The requests are those
  // of the app's server on fd 3: the agent's own 'request' listener, put
  // first (prependListener, so it runs before the app's handler), calls
  // began(); the response's 'close' (emitted once it finished, or when the
  // connection went away) calls ended(). Both listeners, and the list of
  // requests in flight they keep, are there with or without the page (they
  // count X_REQUESTS and X_INFLIGHT): what the page adds per request is the
  // record's stores. Pipelined responses still queued when their socket
  // closes get no 'close' of their own: they end at their socket's, which
  // the agent watches once per connection. Requests with an Expect header
  // that the app takes through its own 'checkContinue' or
  // 'checkExpectation' listener are followed there (followRequests).
  //
  // diagnostics_channel's http.server.request.start/response.finish would
  // see every http server of the process, but cost an unmodified app +2-4 %
  // CPU per /light request with empty subscribers (Node builds a message
  // object per publish), as much again as the record's own work: a server
  // the app makes on another port is not named (docs/worker-protocol.md).
  //
  // Node cannot map the page, and a pwrite per change costs the main
  // thread too much: the fs.writeSync of the 436-byte record took 1.8-2.2
  // us in a tight loop, and two per request cost an app's main thread +22
  // us per /light request (+39 %, docs/worker-protocol.md). So the main
  // thread writes the record into shared memory (a SharedArrayBuffer: plain
  // stores) and the stack helper's thread copies it into
  // the page with one pwrite, at its 50 ms looks and at once after a look
  // that found nothing new (it then sleeps in Atomics.waitAsync; the main
  // thread wakes it only then). The copy is whole:
  // the sequence number is stored first and last, and the helper copies
  // until both ends match, so the page's own check holds. On 'exit' (an
  // uncaught exception, process.exit) the main thread writes the record
  // itself, and it writes every change itself while no helper mirrors.
  //
  // Per request on the main thread: a list node (from a free list: nothing
  // is allocated per request once as many were in flight) linked in the
  // list and on its socket's chain (the socket's newest, under a Symbol,
  // and one 'close' listener per connection); with the page, two record
  // fills in shared memory and two atomic loads.
  function makePage(fd) {
    // The shared record: PAGE.REQ_LEN bytes, then the control words.
    const shared = typeof SharedArrayBuffer === 'function' && typeof Atomics === 'object'
      ? new SharedArrayBuffer(SHARED.LEN) : null;
    const rec = shared ? Buffer.from(shared, 0, PAGE.REQ_LEN) : Buffer.alloc(PAGE.REQ_LEN);
    const i32 = shared ? new Int32Array(shared) : null;
    // The record's own views on a little-endian host (the page's byte
    // order): plain stores, where Buffer#writeUInt32LE checks its
    // arguments first (a record filled with these took half the time).
    const le = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
    const u32 = le ? new Uint32Array(rec.buffer, rec.byteOffset, PAGE.REQ_LEN >> 2) : null;
    const u16 = le ? new Uint16Array(rec.buffer, rec.byteOffset, PAGE.REQ_LEN >> 1) : null;
    // A node per request in flight, in a list by age; a socket carries the
    // newest node in flight on it (HTTP/1 pipelining may queue more: .older
    // links them) and whether its 'close' is watched.
    const SOCKET_NEWEST = Symbol('corralPageNewest');
    let tail = null;        // newest in flight (the record names it); .prev: older ones
    let head = null;        // oldest in flight; .next: newer ones
    let spare = null;       // free nodes, at most FREE_MAX
    let spareCount = 0;
    const FREE_MAX = 256;
    let inflight = 0;
    let count = 0;   // requests started: also each node's id
    let named = -1;  // the id of the request the record names; 0: none
    let seq = 0;
    // The method and target whose bytes the record holds, and their lengths.
    let heldMethod = null;
    let heldUrl = null;
    let heldMl = 0;
    let heldTl = 0;
    let helper = null;
    let httpSeen = false; // the server has had a request: the record is real
    // CLOCK_MONOTONIC ns, as corrald reads it: performance.now() runs on
    // the same clock (uv_hrtime) and allocates nothing, unlike hrtime().
    const base = Number(process.hrtime.bigint()) - perf.performance.now() * 1e6;

    function put32(at, v) {
      if (u32 !== null) u32[at >> 2] = v;
      else rec.writeUInt32LE(v, at);
    }

    function put16(at, v) {
      if (u16 !== null) u16[at >> 1] = v;
      else rec.writeUInt16LE(v, at);
    }

    function putU64(at, v) {
      const hi = Math.floor(v / 4294967296);
      put32(at, Math.floor(v - hi * 4294967296));
      put32(at + 4, hi);
    }

    function broken(e) {
      warn(`page fd ${fd}: ${e.code || e.message}; not saying what it serves`);
      stop();
    }

    function pwrite() {
      try {
        writeRecord(fs, fd, rec);
      } catch (e) {
        broken(e);
      }
    }

    // The record of the newest request in flight, into the shared copy;
    // the helper mirrors it, else it goes out here.
    function write() {
      seq = (seq + 1) | 0; // the bytes of a u32 that wraps
      if (i32) Atomics.store(i32, 0, seq);
      else rec.writeInt32LE(seq, 0);
      put32(PAGE.R_INFLIGHT, inflight);
      // The request named is often the one named last time (another one
      // ended): its method and target are in the record already. And the
      // bytes stay past a "none" (lengths 0): the next request's method and
      // target are often the same strings, which are not encoded again (a
      // Buffer write is a call into C++, 0.1 us each).
      const id = tail !== null ? tail.id : 0;
      if (id !== named) {
        named = id;
        let ml = 0;
        let tl = 0;
        if (tail !== null) {
          putU64(PAGE.R_STARTED, tail.t);
          if (tail.method !== heldMethod) {
            heldMl = rec.write(tail.method, PAGE.R_METHOD, PAGE.METHOD_MAX, 'latin1');
            heldMethod = tail.method;
          }
          if (tail.url !== heldUrl) {
            // Node's parser gives the target's bytes one char each
            // (latin1): written back as latin1, the page holds the bytes
            // the client sent.
            heldTl = rec.write(tail.url, PAGE.R_TARGET, PAGE.TARGET_MAX, 'latin1');
            heldUrl = tail.url;
          }
          ml = heldMl;
          tl = heldTl;
        } else {
          putU64(PAGE.R_STARTED, 0);
        }
        put16(PAGE.R_METHOD_LEN, ml);
        put16(PAGE.R_TARGET_LEN, tl);
        // Only a start changes the count, and a start names a new request.
        putU64(PAGE.R_COUNT, count);
      }
      if (i32) {
        Atomics.store(i32, SHARED.SEQ_END, seq);
        if (Atomics.load(i32, SHARED.MIRROR) === 1) {
          // Wakes the helper only when it sleeps, i.e. not while it is busy.
          if (Atomics.load(i32, SHARED.WAITING) === 1) Atomics.notify(i32, SHARED.SEQ_END, 1);
          return;
        }
      } else {
        rec.writeInt32LE(seq, PAGE.R_SEQ_END);
      }
      pwrite();
    }

    // A request of the app's server, before the app's handler sees it. The
    // list is kept with or without the page (it is X_INFLIGHT's count);
    // only the record's stores need the page.
    function began(req, res) {
      if (fd >= 0 && !httpSeen) {
        httpSeen = true;
        offer();
      }
      let n = spare;
      if (n !== null) {
        spare = n.next;
        spareCount--;
      } else {
        n = { prev: null, next: null, id: 0, method: '', url: '', t: 0,
          res: null, socket: null, older: null, newer: null };
      }
      n.method = typeof req.method === 'string' ? req.method : '';
      n.url = typeof req.url === 'string' ? req.url : '';
      n.t = base + perf.performance.now() * 1e6;
      n.prev = tail;
      n.next = null;
      if (tail !== null) tail.next = n;
      else head = n;
      tail = n;
      n.res = res;
      inflight++;
      n.id = ++count;
      const socket = req.socket;
      if (socket !== null && typeof socket === 'object' && typeof socket.once === 'function') {
        const newest = socket[SOCKET_NEWEST];
        if (newest === undefined) {
          socket.once('close', onSocketClose);
        } else if (newest !== null) {
          n.older = newest;
          newest.newer = n;
        }
        socket[SOCKET_NEWEST] = n;
        n.socket = socket;
      }
      if (fd >= 0) write();
    }

    // The response's 'close': it finished, or its connection went away.
    // Found on its socket's chain (res.req.socket: res.socket is gone by
    // then), as deep as that connection's pipelining, usually one node: a
    // walk of the whole list would cost every request as many steps as
    // there are long-polls and streams held open (4000 held: 4x the CPU
    // per request). Not on the chain: the socket's 'close' ended it
    // already. Nothing is stored on the response: a property added to
    // every ServerResponse gives Node's own http code objects of two
    // shapes to handle.
    function ended(res) {
      const req = res.req;
      const socket = req !== null && typeof req === 'object' ? req.socket : null;
      // A socket began() linked (it has a chain, maybe emptied: null).
      if (socket !== null && typeof socket === 'object' && socket[SOCKET_NEWEST] !== undefined) {
        for (let n = socket[SOCKET_NEWEST]; n !== null; n = n.older) {
          if (n.res === res) {
            endNode(n);
            return;
          }
        }
        return;
      }
      for (let n = head; n !== null; n = n.next) { // not on a socket's chain
        if (n.res === res) {
          endNode(n);
          return;
        }
      }
    }

    function endNode(n) {
      if (n.socket !== null) {
        if (n.older !== null) n.older.newer = n.newer;
        if (n.newer !== null) n.newer.older = n.older;
        else n.socket[SOCKET_NEWEST] = n.older;
        n.socket = n.older = n.newer = null;
      }
      n.res = null;
      if (n.prev !== null) n.prev.next = n.next;
      else head = n.next;
      if (n.next !== null) n.next.prev = n.prev;
      else tail = n.prev;
      n.prev = null;
      n.method = n.url = '';
      if (spareCount < FREE_MAX) {
        n.next = spare;
        spare = n;
        spareCount++;
      } else {
        n.next = null;
      }
      inflight--;
      if (fd >= 0) write();
    }

    // The socket closed: its responses still in flight never finish.
    function onSocketClose() {
      for (let n = this[SOCKET_NEWEST]; n !== null && n !== undefined; n = this[SOCKET_NEWEST]) {
        endNode(n);
      }
    }

    // The last word goes out from here: the helper may be gone already.
    function onExit() {
      if (fd < 0 || !i32) return;
      Atomics.store(i32, SHARED.MIRROR, 2);
      pwrite();
    }

    function putFeaturesTo(to, bits) {
      const b = Buffer.alloc(4);
      b.writeUInt32LE(bits, 0);
      fs.writeSync(to, b, 0, 4, PAGE.OFF_FEATURES);
    }

    function putFeatures(bits) {
      putFeaturesTo(fd, bits);
    }

    // The request record is offered once the server of fd 3 had a
    // request (an app serving net or http2 has no record, and corrald
    // reads unknown, not "none being served").
    function offer() {
      if (fd < 0) return;
      try {
        if (i32) setFeatures(fs, fd, i32, PAGE.F_REQUEST, 0);
        else putFeatures(PAGE.F_REQUEST);
      } catch (e) {
        broken(e);
      }
    }

    // The stack helper: a worker thread of the agent's own (this very
    // file, without the app's execArgv), which never keeps the app alive.
    // Should it end, the main thread writes the record itself again.
    function startHelper(features) {
      if (!threads) return;
      try {
        helper = new threads.Worker(__filename, {
          workerData: { corralStackHelper: true, fd, features, shared },
          execArgv: [],
          env: {},
          stdin: false,
        });
        helper.unref();
        helper.on('error', (e) => warn(`stack helper failed: ${e && e.message}; stacks not answered`));
        helper.on('exit', () => {
          if (i32 && Atomics.load(i32, SHARED.MIRROR) === 1) {
            Atomics.store(i32, SHARED.MIRROR, 0);
            if (fd >= 0) pwrite(); // the record as it is now, not as last mirrored
          }
          if (fd >= 0 && i32) {
            try {
              setFeatures(fs, fd, i32, 0, PAGE.F_STACK); // no more answers
            } catch (e) {
              broken(e);
            }
          }
        });
      } catch (e) {
        helper = null;
        warn(`cannot start the stack helper: ${e.message}; stacks not answered`);
      }
    }

    function start() {
      if (fd < 0) return;
      write(); // none being served yet
      if (fd < 0) return;
      try {
        putFeatures(0); // offered as they come true (offer())
      } catch (e) {
        broken(e);
        return;
      }
      process.on('exit', onExit);
      startHelper(PAGE.F_REQUEST); // the helper mirrors the record
    }

    // No more writes: the page is broken, or the app keeps it itself.
    function stop() {
      fd = -1;
      if (i32) Atomics.store(i32, SHARED.MIRROR, 2);
      if (helper) {
        try {
          helper.postMessage('stop');
        } catch (e) {
          // It is gone already.
        }
        helper = null;
      }
    }

    return {
      get fd() {
        return fd;
      },
      // Requests started and not ended (X_INFLIGHT).
      get inflight() {
        return inflight;
      },
      start,
      began,
      ended,
      claimed() {
        if (state.appPage) return;
        state.appPage = true;
        const was = fd;
        if (i32) Atomics.store(i32, SHARED.CLAIMED, 1); // a helper's setFeatures writes 0
        stop(); // fd -1 first: nothing offers after this
        if (was < 0) return;
        // The page is the app's: it offers nothing the agent would answer.
        try {
          putFeaturesTo(was, 0);
        } catch (e) {
          // The app's descriptor now; it says what it offers.
        }
      },
    };
  }

  const page = makePage(pageFd());

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
    if (reporter) reporter.start();
    send({ READY: 1, STATUS: status });
  }

  // A response's end: it finished, or its connection went away.
  function onResponseClose() {
    page.ended(this);
  }

  // Counts the requests of an HTTP(S) server (a bare net.Server has none)
  // and names them in the worker page: the first 'request' listener, so it
  // runs before the app's handler (makePage).
  //
  // A request with an Expect header comes as 'checkContinue' (100-continue)
  // or 'checkExpectation' (any other), not 'request', when the app listens
  // for those: the agent then listens there too, first, and only while the
  // app does (its own listener alone would stop Node's automatic 100
  // Continue, and turn other expectations' 417 into silence). A request
  // the app passes on as 'request' afterwards (Node's documented way) is
  // the same request: counted once. The set of them is made with the app's
  // first such listener; until then 'request' costs one more comparison.
  function followRequests(server) {
    const EXPECT_EVENTS = ['checkContinue', 'checkExpectation'];
    let expected = null; // requests with an Expect header already followed
    const follow = (req, res) => {
      state.requests++;
      page.began(req, res);
      if (res !== null && typeof res === 'object' && typeof res.once === 'function') {
        res.once('close', onResponseClose);
      }
    };
    // Node reads req.headers.expect for every request itself: no cost. An
    // app may emit 'request' with an object of its own: never a throw here,
    // before the app's handler.
    const onRequest = (req, res) => {
      if (expected !== null && req !== null && typeof req === 'object') {
        const h = req.headers;
        if (h !== null && typeof h === 'object' && h.expect !== undefined) {
          if (expected.has(req)) return;
          expected.add(req);
        }
      }
      follow(req, res);
    };
    server.prependListener('request', onRequest);
    const isExpect = (event) => event === EXPECT_EVENTS[0] || event === EXPECT_EVENTS[1];
    const theirs = (event) => server.listeners(event).filter((l) => l !== onRequest).length;
    // First among the event's listeners: added before the app's (the
    // newListener event comes before the listener is added), and put back
    // in front once the app's own prependListener has run.
    const front = (event) => {
      if (theirs(event) === 0) return;
      const ls = server.listeners(event);
      if (ls[0] === onRequest) return;
      if (ls.includes(onRequest)) server.removeListener(event, onRequest);
      server.prependListener(event, onRequest);
    };
    server.on('newListener', (event, listener) => {
      if (listener === onRequest) return;
      // The app's 'request' listeners replaced (removeAllListeners('request'),
      // then on('request', …): a reload idiom): the agent's goes first again.
      if (event === 'request') {
        if (!server.listeners('request').includes(onRequest)) {
          server.prependListener('request', onRequest);
        }
        queueMicrotask(() => front('request'));
        return;
      }
      if (!isExpect(event)) return;
      if (expected === null) expected = new WeakSet();
      if (!server.listeners(event).includes(onRequest)) server.prependListener(event, onRequest);
      queueMicrotask(() => front(event));
    });
    server.on('removeListener', (event, listener) => {
      if (listener !== onRequest && isExpect(event) && theirs(event) === 0) {
        server.removeListener(event, onRequest);
      }
    });
    for (const event of EXPECT_EVENTS) {
      if (theirs(event) > 0) {
        if (expected === null) expected = new WeakSet();
        front(event);
      }
    }
  }

  function adopt(server) {
    if (state.server) return;
    state.server = server;
    // http.Server and https.Server (not one another's instances) both
    // carry maxHeadersCount; a bare net.Server has no requests to count.
    if ('maxHeadersCount' in server) {
      state.http = true;
      followRequests(server);
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
    if (page.inflight > 0 && perf.performance.now() - since < QUIET_MS) {
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

  if (state.fd < 0 && page.fd < 0) return; // not under corrald, or nothing to write to
  try {
    watchEnv();
    page.start();
  } catch (e) {
    warn(`disabled: ${e.message}`);
    return;
  }
  if (state.fd < 0) {
    // The page without the channel: the record still follows fd 3's server.
    try {
      if (listenFdIsOurs()) watchListen();
    } catch (e) {
      warn(`cannot follow the server: ${e.message}`);
    }
    return;
  }
  try {
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

  // The stack helper, in a worker thread of its own: the main thread may be
  // the one that is stuck. It looks at the page's stack-request word every
  // POLL_MS (a pread of a memfd returns at once; Node cannot sleep on the
  // futex corrald wakes) and answers a new request with the main thread's
  // JavaScript stack, taken through the inspector: a session connected to
  // the main thread posts Runtime.evaluate, which V8 runs on the main
  // thread at its next interrupt check — inside a busy loop too (function
  // entries and loop back-edges check) — so the expression captures the
  // stack it interrupted. No Debugger domain: no pause, no script events,
  // nothing a user's own DevTools session would see. A session is
  // connected per request: one left connected makes Node print "Waiting
  // for the debugger to disconnect..." when the app exits.
  //
  // What it cannot do: a main thread inside one long native call that
  // never checks interrupts (a single huge JSON.parse, a loop whose body is
  // only such a call) is not interrupted until the call returns; corrald
  // then records the stack missing and kills the worker anyway. Nothing of
  // the app is touched but Error.stackTraceLimit and Error.prepareStackTrace,
  // set for the capture and restored at once.
  function stackHelper(data) {
    const POLL_MS = 50;
    const SOURCE = 'node-inspector';
    const FRAMES_MAX = 200;
    const FN = 'corralNodeAgentStack';
    // Runs on the main thread; returns [function, file, line, column] per
    // frame, innermost first: this function's own frame and its script's
    // come first (both without a file).
    const EXPR = `(function ${FN}() {
      const E = Error;
      const limit = E.stackTraceLimit;
      const prepare = E.prepareStackTrace;
      try {
        E.stackTraceLimit = ${FRAMES_MAX};
        E.prepareStackTrace = (_, sites) => sites.map((s) => [
          (s.isAsync && s.isAsync() ? 'async ' : '') + (s.getFunctionName() || ''),
          s.getFileName() || '', s.getLineNumber() || 0, s.getColumnNumber() || 0]);
        const o = {};
        E.captureStackTrace(o);
        return o.stack;
      } finally {
        E.stackTraceLimit = limit;
        E.prepareStackTrace = prepare;
      }
    })()`;
    let fs;
    let inspector;
    const say = (text) => {
      try {
        fs.writeSync(2, `corral-node-agent: ${text}\n`);
      } catch (e) {
        // stderr is gone too.
      }
    };
    try {
      fs = require('node:fs');
      inspector = require('node:inspector');
    } catch (e) {
      say(`no inspector (${e.code || e.message}); stacks not answered`);
      return;
    }
    if (typeof inspector.Session !== 'function' ||
        typeof inspector.Session.prototype.connectToMainThread !== 'function') {
      say('this node cannot inspect its main thread from a worker; stacks not answered');
      return;
    }
    const fd = data.fd;
    const word = Buffer.alloc(4);
    const readRequest = () => {
      fs.readSync(fd, word, 0, 4, PAGE.OFF_STACK_REQ);
      return word.readUInt32LE(0);
    };
    let timer = null;
    let seen;
    const stop = (why) => {
      if (why) say(`page fd ${fd}: ${why}; stacks not answered`);
      if (timer) clearInterval(timer);
      timer = null;
      threads.parentPort.removeAllListeners('message');
    };
    try {
      // The word before stacks are offered: a request made between this
      // and the first look is still answered.
      seen = readRequest();
      if (data.shared) {
        setFeatures(fs, fd, new Int32Array(data.shared), PAGE.F_STACK, 0);
      } else {
        const f = Buffer.alloc(4);
        f.writeUInt32LE((data.features | PAGE.F_STACK) >>> 0, 0);
        fs.writeSync(fd, f, 0, 4, PAGE.OFF_FEATURES);
      }
    } catch (e) {
      stop(e.code || e.message);
      return;
    }

    // One line per frame, "function (file:line:column)", innermost first,
    // cut whole lines to the page's 15360 bytes.
    const format = (frames) => {
      let i = 0;
      if (frames[i] && frames[i][0] === FN && !frames[i][1]) i++;
      if (frames[i] && !frames[i][0] && !frames[i][1]) i++;
      if (i >= frames.length) return 'idle: the main thread runs no JavaScript\n';
      let text = '';
      let bytes = 0;
      for (let k = i; k < frames.length; k++) {
        const [fn, file, line, col] = frames[k];
        const l = `${fn || '<anonymous>'} (${file || '<anonymous>'}:${line}:${col})\n`;
        const n = Buffer.byteLength(l);
        if (bytes + n > PAGE.STACK_MAX - 64) {
          text += `... ${frames.length - k} more frames\n`;
          break;
        }
        text += l;
        bytes += n;
      }
      return text;
    };

    const answer = (req, text) => {
      try {
        let b = Buffer.from(text, 'utf8');
        if (b.length > PAGE.STACK_MAX) b = b.subarray(0, PAGE.STACK_MAX);
        fs.writeSync(fd, b, 0, b.length, PAGE.OFF_STACK);
        const head = Buffer.alloc(PAGE.OFF_SOURCE + PAGE.SOURCE_MAX - PAGE.OFF_STACK_LEN);
        head.writeUInt32LE(b.length, 0);
        head.write(SOURCE, PAGE.OFF_SOURCE - PAGE.OFF_STACK_LEN, 'latin1');
        fs.writeSync(fd, head, 0, head.length, PAGE.OFF_STACK_LEN);
        word.writeUInt32LE(req >>> 0, 0);
        fs.writeSync(fd, word, 0, 4, PAGE.OFF_STACK_ANS);
      } catch (e) {
        stop(e.code || e.message);
      }
    };

    let capturing = false;
    const capture = (req) => {
      capturing = true;
      let session = null;
      const done = (text) => {
        if (!capturing) return;
        capturing = false;
        try {
          if (session) session.disconnect();
        } catch (e) {
          // Already gone.
        }
        answer(req, text);
      };
      try {
        session = new inspector.Session();
        session.connectToMainThread();
        session.post('Runtime.evaluate', { expression: EXPR, returnByValue: true, silent: true },
          (err, r) => {
            try {
              if (err) done(`(no stack: ${err.message})\n`);
              else if (r.exceptionDetails) done(`(no stack: ${r.exceptionDetails.text})\n`);
              else if (!Array.isArray(r.result.value)) {
                // Error.prepareStackTrace could not be set (frozen
                // intrinsics, a lockdown): no frames, which is not idle.
                done('(no stack: the stack trace could not be read as frames)\n');
              } else done(format(r.result.value));
            } catch (e) {
              done(`(no stack: ${e.message})\n`);
            }
          });
      } catch (e) {
        done(`(no stack: ${e.message})\n`);
      }
    };

    // One capture at a time: a request made meanwhile is seen on a later
    // look and answered by a capture of its own.
    const look = () => {
      if (capturing) return;
      let req;
      try {
        req = readRequest();
      } catch (e) {
        stop(e.code || e.message);
        return;
      }
      if (req === seen) return;
      seen = req;
      capture(req);
    };
    // The request record: copied into the page at each look when it
    // changed, and at once when it changes after a quiet look (the helper
    // then sleeps in Atomics.waitAsync, and the main thread wakes it). Each
    // wake-up of a Node thread costs 150-250 us of CPU on the test machine
    // (an idle node with a 50 ms setInterval: 3 ms/s), and under load it
    // takes the main thread's core: under steady load the record is copied
    // at the looks only, 20 a second, at most 50 ms behind.
    const record = data.shared && typeof Atomics.waitAsync === 'function' &&
      (data.features & PAGE.F_REQUEST) ? mirror(data.shared) : null;
    timer = setInterval(() => {
      look();
      if (record) record.tick();
    }, POLL_MS);
    threads.parentPort.on('message', (m) => {
      if (m === 'stop') stop('');
    });
    if (record) record.tick();

    // Copies the main thread's request record into the page (makePage),
    // whole: its sequence numbers match at both ends.
    function mirror(shared) {
      const i32 = new Int32Array(shared);
      const src = Buffer.from(shared, 0, PAGE.REQ_LEN);
      const out = Buffer.alloc(PAGE.REQ_LEN);
      if (Atomics.compareExchange(i32, SHARED.MIRROR, 0, 1) !== 0) return null;
      let done = -1; // the sequence number last written; none yet
      let armed = false;
      // Writes the record if it changed since the last copy: true if so.
      const copy = () => {
        if (timer === null || Atomics.load(i32, SHARED.MIRROR) !== 1) return false;
        if (Atomics.load(i32, SHARED.SEQ_END) === done) return false;
        let copied = false;
        for (let tries = 0; tries < 8 && !copied; tries++) {
          const end = Atomics.load(i32, SHARED.SEQ_END);
          src.copy(out);
          copied = Atomics.load(i32, 0) === end;
          if (copied) done = end;
        }
        if (!copied || Atomics.load(i32, SHARED.MIRROR) !== 1) return copied;
        try {
          writeRecord(fs, fd, out);
        } catch (e) {
          Atomics.store(i32, SHARED.MIRROR, 0); // the main thread tries itself
          stop(e.code || e.message);
        }
        return true;
      };
      const woken = () => {
        armed = false;
        Atomics.store(i32, SHARED.WAITING, 0);
        copy();
      };
      // Sleeps until the record changes (the main thread notifies while
      // WAITING is 1: a store it makes after this one is seen either way).
      const arm = () => {
        if (armed || timer === null) return;
        Atomics.store(i32, SHARED.WAITING, 1);
        const w = Atomics.waitAsync(i32, SHARED.SEQ_END, done);
        if (!w.async) {
          woken();
          return;
        }
        armed = true;
        w.value.then(woken, woken);
      };
      return {
        tick() {
          if (!armed && !copy()) arm();
        },
      };
    }
  }
})();
