'use strict';
// The control: a naive idempotency wrapper, get-then-run-then-set, with no claim, no lease
// and no fencing. A campaign run with `--control naive` uses it instead of idempotent();
// the checker must find violations (two callers that both miss the key both run, and get
// different results). A checker that never fails proves nothing.
//
// Its records live where the store under test would keep them: plain GET/SET on the
// campaign's Redis (through the fault proxy), a plain table on Postgres (through the
// proxy), and for SQLite a file per key in a folder (Node 20 has no SQLite of its own, and
// the control needs no dependency): the naivety is the protocol, not the storage.

const { existsSync, mkdirSync, readFileSync, writeFileSync } = require('node:fs');
const net = require('node:net');
const { join } = require('node:path');

/** Wraps fn naively; `table` has get(key) -> value | undefined and set(key, value). */
function naiveIdempotent(fn, table) {
  const call = async (key, args) => {
    const stored = await table.get(key);
    if (stored !== undefined) return stored;
    const result = await fn(...args);
    await table.set(key, result);
    return result;
  };
  return { withKey: (key) => (...args) => call(key, args) };
}

/** A file per key. */
function fileTable(dir) {
  mkdirSync(dir, { recursive: true });
  const path = (key) => join(dir, encodeURIComponent(key));
  return {
    async get(key) {
      return existsSync(path(key)) ? JSON.parse(readFileSync(path(key), 'utf8')) : undefined;
    },
    async set(key, value) {
      writeFileSync(path(key), JSON.stringify(value));
    },
    async close() {},
  };
}

/** GET and SET on one Redis connection (RESP by hand, enough for bulk strings and OK). */
function redisTable(url, prefix) {
  const { hostname, port } = new URL(url);
  let socket;
  let buffer = '';
  const waiting = [];
  const fail = (err) => {
    for (const w of waiting.splice(0)) w.reject(err);
    socket = undefined;
  };
  const parse = () => {
    while (waiting.length > 0) {
      const end = buffer.indexOf('\r\n');
      if (end < 0) return;
      const head = buffer.slice(0, end);
      if (head[0] === '$') {
        const n = Number(head.slice(1));
        if (n < 0) {
          buffer = buffer.slice(end + 2);
          waiting.shift().resolve(undefined);
          continue;
        }
        if (Buffer.byteLength(buffer) < end + 2 + n + 2) return; // ASCII JSON: chars are bytes
        const body = buffer.slice(end + 2, end + 2 + n);
        buffer = buffer.slice(end + 2 + n + 2);
        waiting.shift().resolve(body);
      } else {
        buffer = buffer.slice(end + 2);
        if (head[0] === '-') waiting.shift().reject(new Error(head.slice(1)));
        else waiting.shift().resolve(head.slice(1));
      }
    }
  };
  const command = (...parts) =>
    new Promise((resolve, reject) => {
      if (socket === undefined) {
        buffer = '';
        socket = net.createConnection({ host: hostname, port: Number(port) });
        const s = socket;
        s.setEncoding('utf8');
        s.on('data', (d) => {
          buffer += d;
          parse();
        });
        s.on('error', (err) => socket === s && fail(err));
        s.on('close', () => socket === s && fail(new Error('redis connection closed')));
      }
      waiting.push({ resolve, reject });
      socket.write(`*${parts.length}\r\n${parts.map((p) => `$${Buffer.byteLength(p)}\r\n${p}\r\n`).join('')}`);
    });
  return {
    async get(key) {
      const raw = await command('GET', prefix + key);
      return raw === undefined ? undefined : JSON.parse(raw);
    },
    async set(key, value) {
      await command('SET', prefix + key, JSON.stringify(value));
    },
    async close() {
      socket?.destroy();
    },
  };
}

/** A plain table on Postgres (the `pg` client, a dev dependency of this repo). */
function postgresTable(url, table) {
  const { Client } = require('pg');
  let client;
  const connect = async () => {
    if (client === undefined) {
      const c = new Client({ connectionString: url });
      c.on('error', () => {
        if (client === c) client = undefined;
      });
      client = c;
      try {
        await c.connect();
        await c.query(`CREATE TABLE IF NOT EXISTS "${table}" (key text PRIMARY KEY, value text NOT NULL)`);
      } catch (err) {
        client = undefined;
        throw err;
      }
    }
    return client;
  };
  return {
    async get(key) {
      const r = await (await connect()).query(`SELECT value FROM "${table}" WHERE key = $1`, [key]);
      return r.rows.length ? JSON.parse(r.rows[0].value) : undefined;
    },
    async set(key, value) {
      await (await connect()).query(
        `INSERT INTO "${table}" (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
        [key, JSON.stringify(value)],
      );
    },
    async close() {
      await client?.end().catch(() => {});
    },
  };
}

module.exports = { fileTable, naiveIdempotent, postgresTable, redisTable };
