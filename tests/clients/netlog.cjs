// Preloaded into a CLI under test (NODE_OPTIONS=--require): writes every outgoing connection
// and name lookup the process (or a Node process it starts) makes, one JSON line each, to
// $CLIENTS_NETLOG, so a case can assert the CLI talked to Switchyard and to nothing else.
'use strict';
const fs = require('node:fs');
const net = require('node:net');
const dns = require('node:dns');

const file = process.env.CLIENTS_NETLOG;
if (file) {
  const note = (entry) => fs.appendFileSync(file, JSON.stringify({ pid: process.pid, ...entry }) + '\n');
  const connect = net.Socket.prototype.connect;
  net.Socket.prototype.connect = function (...args) {
    const first = args[0];
    const options = Array.isArray(first) ? first[0] : first;
    if (typeof options === 'object' && options !== null) {
      if (options.path) note({ kind: 'ipc', path: String(options.path) });
      else note({ kind: 'tcp', host: options.host ?? 'localhost', port: Number(options.port) });
    } else if (typeof options === 'string' && !/^\d+$/.test(options)) {
      note({ kind: 'ipc', path: options });
    } else {
      note({ kind: 'tcp', host: typeof args[1] === 'string' ? args[1] : 'localhost', port: Number(options) });
    }
    return connect.apply(this, args);
  };
  for (const name of ['lookup', 'resolve', 'resolve4', 'resolve6']) {
    const original = dns[name];
    dns[name] = function (host, ...rest) {
      note({ kind: 'dns', host: String(host) });
      return original.call(this, host, ...rest);
    };
  }
}
