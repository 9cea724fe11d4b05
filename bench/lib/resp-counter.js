'use strict';
/**
 * A TCP pass-through in front of Redis that counts the commands a client sends (it parses
 * the RESP arrays of the client-to-server stream). Used only to count round trips, never
 * while timing. Inline commands (not RESP arrays) are counted one per line.
 */

const net = require('node:net');

function commandCounter(target) {
  const counts = new Map();
  let total = 0;
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    upstream.pipe(client);
    let buf = Buffer.alloc(0);
    client.on('data', (chunk) => {
      upstream.write(chunk);
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      for (;;) {
        const used = parseOne(buf);
        if (used === 0) break;
        buf = buf.subarray(used.length);
        total += 1;
        counts.set(used.name, (counts.get(used.name) ?? 0) + 1);
      }
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', end);
    upstream.on('error', end);
  });
  return {
    listen: () => new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port))),
    snapshot: () => ({ total, counts: Object.fromEntries(counts) }),
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Parses one command at the start of `buf`: { length, name }, or 0 if incomplete. */
function parseOne(buf) {
  if (buf.length === 0) return 0;
  if (buf[0] !== 0x2a /* '*' */) {
    const eol = buf.indexOf('\r\n');
    if (eol < 0) return 0;
    return { length: eol + 2, name: buf.subarray(0, eol).toString().split(' ')[0].toUpperCase() };
  }
  let eol = buf.indexOf('\r\n');
  if (eol < 0) return 0;
  const n = Number(buf.subarray(1, eol).toString());
  let at = eol + 2;
  let name = '';
  for (let i = 0; i < n; i++) {
    eol = buf.indexOf('\r\n', at);
    if (eol < 0) return 0;
    const len = Number(buf.subarray(at + 1, eol).toString());
    const start = eol + 2;
    if (buf.length < start + len + 2) return 0;
    if (i === 0) name = buf.subarray(start, start + len).toString().toUpperCase();
    at = start + len + 2;
  }
  return { length: at, name };
}

module.exports = { commandCounter };
