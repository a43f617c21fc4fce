'use strict';
// A plain Node.js app with no corral code, for tests/node/test_warm.py: it
// serves fd 3, and its handler counts its own calls and names its pid (also
// in X-Worker-Pid, so that bench/lib's probes can use it), which shows
// whether anyone but a client ever ran it.
//
// WARM_APP_CONNECT makes it hostile to the agent's warm-up by breaking
// outgoing TCP connects (a server needs none): `fail` never starts them, so
// a write fails at once; `stall` leaves them connecting forever, so writes
// wait forever and only the warm-up's time bound can end it.

const http = require('node:http');
const net = require('node:net');

const mode = process.env.WARM_APP_CONNECT;
if (mode === 'fail' || mode === 'stall') {
  net.Socket.prototype.connect = function brokenConnect() {
    if (mode === 'stall') this.connecting = true;
    return this;
  };
}

let calls = 0;
const server = http.createServer((req, res) => {
  calls++;
  res.setHeader('X-Worker-Pid', String(process.pid));
  res.setHeader('Content-Type', 'application/json');
  res.end(JSON.stringify({ pid: process.pid, calls }) + '\n');
});
server.listen({ fd: 3 });
process.on('SIGTERM', () => server.close(() => process.exit(0)));
