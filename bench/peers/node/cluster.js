'use strict';
// The benchmark peer: the same endpoints as examples/node/server.js (the
// same handler, examples/node/app.js) behind plain node:cluster, so corral's
// numbers can be set against what Node offers out of the box.
//
//   node bench/peers/node/cluster.js [--workers N] [--port P]
//
// --workers 1 runs a single process without cluster. The balancing policy is
// node:cluster's own NODE_CLUSTER_SCHED_POLICY (rr, the default, or none =
// every worker accepts on the shared socket); UV_THREADPOOL_SIZE is inherited
// by every worker. Prints "listening <port>" once every worker listens, and
// "restarted <oldpid> <newpid>" once a replacement for a dead worker listens.
// SIGTERM/SIGINT: workers drain, then everyone exits 0.

const cluster = require('node:cluster');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { App } = require(path.join(__dirname, '..', '..', '..', 'examples', 'node', 'app.js'));

const HOST = '127.0.0.1';
const STOP_TIMEOUT_MS = 10000;

function usage(msg) {
  process.stderr.write(`cluster.js: ${msg}\nusage: cluster.js [--workers N] [--port P]\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { workers: os.availableParallelism(), port: 8080 };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2);
    const value = inline ?? argv[++i];
    const n = Number(value);
    if (flag === '--workers') {
      if (!Number.isInteger(n) || n < 1 || n > 256) usage(`--workers ${value}: want 1..256`);
      opts.workers = n;
    } else if (flag === '--port') {
      if (!Number.isInteger(n) || n < 0 || n > 65535) usage(`--port ${value}: want 0..65535`);
      opts.port = n;
    } else {
      usage(`unknown argument ${argv[i]}`);
    }
  }
  return opts;
}

// One serving process: a cluster worker, or the whole program with --workers 1.
function serve(port, workerId, onListening) {
  const app = new App({ workerId });
  app.openDataFile();
  const server = http.createServer(app.handle);
  const stop = () => {
    if (app.draining) return;
    app.startDrain();
    server.close(() => { app.close(); process.exit(0); });
    server.closeIdleConnections();
    setTimeout(() => { server.closeAllConnections(); process.exit(1); }, STOP_TIMEOUT_MS).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // The primary asks over IPC too: a worker whose primary is gone must not
  // linger either.
  if (cluster.isWorker) {
    process.on('message', (m) => { if (m === 'stop') stop(); });
    process.on('disconnect', stop);
  }
  server.listen(port, HOST, () => onListening(server.address().port));
}

function primary(opts) {
  let stopping = false;
  let announced = false;
  let listening = 0;
  const replacing = new Map(); // new worker id -> pid of the dead one

  const fork = () => cluster.fork();

  cluster.on('listening', (worker, address) => {
    const old = replacing.get(worker.id);
    if (old !== undefined) {
      replacing.delete(worker.id);
      process.stdout.write(`restarted ${old} ${worker.process.pid}\n`);
      return;
    }
    if (++listening === opts.workers && !announced) {
      announced = true;
      process.stdout.write(`listening ${address.port}\n`);
    }
  });

  cluster.on('exit', (worker, code, signal) => {
    const live = Object.keys(cluster.workers).length;
    if (stopping) {
      if (live === 0) process.exit(0);
      return;
    }
    process.stderr.write(`worker ${worker.process.pid} died (${signal || code}); forking a replacement\n`);
    const next = fork();
    // A worker lost before the first announcement is simply part of the
    // initial set; afterwards its replacement is reported when it serves.
    if (announced) replacing.set(next.id, worker.process.pid);
    else listening -= worker.state === 'listening' ? 1 : 0;
  });

  const stop = () => {
    if (stopping) return;
    stopping = true;
    const workers = Object.values(cluster.workers);
    if (workers.length === 0) process.exit(0);
    for (const w of workers) w.process.kill('SIGTERM');
    setTimeout(() => {
      for (const w of Object.values(cluster.workers)) w.process.kill('SIGKILL');
      process.exit(1);
    }, STOP_TIMEOUT_MS).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  for (let i = 0; i < opts.workers; i++) fork();
}

function main() {
  if (cluster.isWorker) {
    serve(Number(process.env.CORRAL_PEER_PORT), String(cluster.worker.id), () => {});
    return;
  }
  const opts = parseArgs(process.argv.slice(2));
  if (opts.workers === 1) {
    serve(opts.port, '1', (port) => process.stdout.write(`listening ${port}\n`));
    return;
  }
  // With port 0 every worker still gets the same port: the primary binds
  // the handle once per address key and hands it to all of them.
  cluster.setupPrimary({ silent: false });
  process.env.CORRAL_PEER_PORT = String(opts.port);
  primary(opts);
}

main();
