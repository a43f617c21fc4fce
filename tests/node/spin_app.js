'use strict';
// A plain Node.js app (no corral code) whose handlers can keep the event
// loop busy, for the worker page's tests: which request is being served,
// and the main thread's stack while its loop is stuck.
//   GET /spin?ms=N     spins in spinFor() for N ms (a JS loop: interruptible)
//   GET /native?ms=N   one crypto.pbkdf2Sync call of about N ms: native code
//                      that never checks V8's interrupts (the stack cannot
//                      be taken until it returns)
//   GET /wait?ms=N     answers after N ms without blocking (a timer)
//   GET /throw         throws from the handler: an uncaught exception
//   GET /objects?n=N   keeps N x 10000 more small objects (a heap of many
//                      objects: what makes a heap snapshot big)
//   GET /              {"pid": ...}
//   GET /expect/on     the app takes Expect requests itself from now on: a
//                      'checkContinue' listener that answers 100 Continue
//                      and handles the request (or, for a target holding
//                      "reemit", passes it on as 'request', as Node's
//                      documentation shows), and a 'checkExpectation' one
//                      that handles any other Expect (prepended with
//                      ?prepend); /expect/off removes both
//   GET /request/replace   removeAllListeners('request'), then the handler
//                      again (a reload idiom)
//   GET /request/synthetic emits 'request' with objects of its own (no
//                      headers, no socket), as some apps do

const crypto = require('node:crypto');
const http = require('node:http');

let usPerIteration = 0;
const kept = [];

function spinFor(ms) {
  const end = Date.now() + ms;
  let n = 0;
  while (Date.now() < end) n++;
  return n;
}

// One native call for about ms milliseconds (its rate measured once).
function nativeFor(ms) {
  if (!usPerIteration) {
    const t0 = process.hrtime.bigint();
    crypto.pbkdf2Sync('corral', 'salt', 20000, 32, 'sha256');
    usPerIteration = Math.max(0.01, Number(process.hrtime.bigint() - t0) / 1e3 / 20000);
  }
  return crypto.pbkdf2Sync('corral', 'salt', Math.ceil((ms * 1000) / usPerIteration), 32, 'sha256').length;
}

function handle(req, res) {
  const url = new URL(req.url, 'http://localhost');
  const ms = Math.min(Number(url.searchParams.get('ms')) || 0, 120000);
  if (url.pathname === '/spin') {
    res.end(`spun ${spinFor(ms)}\n`);
  } else if (url.pathname === '/native') {
    res.end(`derived ${nativeFor(ms)} bytes\n`);
  } else if (url.pathname === '/wait') {
    setTimeout(() => res.end('waited\n'), ms);
  } else if (url.pathname === '/objects') {
    const n = Math.min(Number(url.searchParams.get('n')) || 1, 1000) * 10000;
    for (let i = 0; i < n; i++) kept.push({ id: kept.length, name: `n${kept.length}`, tags: [i] });
    res.end(`kept ${kept.length}\n`);
  } else if (url.pathname === '/expect/on') {
    const add = url.searchParams.has('prepend') ? 'prependListener' : 'on';
    server[add]('checkContinue', checkContinue);
    server[add]('checkExpectation', handle);
    res.end(`checkContinue listeners: ${server.listenerCount('checkContinue')}\n`);
  } else if (url.pathname === '/expect/off') {
    server.removeListener('checkContinue', checkContinue);
    server.removeListener('checkExpectation', handle);
    res.end(`checkContinue listeners: ${server.listenerCount('checkContinue')}\n`);
  } else if (url.pathname === '/request/replace') {
    server.removeAllListeners('request');
    server.on('request', handle);
    res.end('replaced\n');
  } else if (url.pathname === '/request/synthetic') {
    server.emit('request', { method: 'GET', url: '/wait?ms=0&synthetic' }, { end() {} });
    res.end('emitted\n');
  } else if (url.pathname === '/throw') {
    throw new Error('thrown by the handler of /throw');
  } else {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ pid: process.pid }) + '\n');
  }
}

function checkContinue(req, res) {
  res.writeContinue();
  if (req.url.includes('reemit')) server.emit('request', req, res);
  else handle(req, res);
}

const server = http.createServer(handle);
server.listen({ fd: 3 });
process.on('SIGTERM', () => server.close(() => process.exit(0)));
