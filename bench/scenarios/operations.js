'use strict';
/**
 * The operator's paths at scale (issue 40): on each store holding N completed records,
 *
 * - `listRecent({ limit: 20 })` (what `inspect --limit 20` and the page's list ask for) and
 *   `stats()`: how long each takes, the memory it adds to this process at its peak, and the
 *   longest this process's event loop waited meanwhile;
 * - then, every record made expired (each at its own time), `prune()` (SQLite, PostgreSQL; Redis expires records
 *   itself): how long it takes, and the longest a caller in this process waited for a new
 *   call meanwhile (one call every 10 ms), with the calls that failed.
 *
 * Sizes: 100k and 1M (1k and 10k with --quick); the goals are the issue's, at 1M: a listing
 * within 2 s and 300 MB, stats within 2 s, no caller waiting 200 ms or failing during a
 * prune, and 1M pruned in at most 10x the time of 100k. Nothing here is asserted.
 *
 * The records are copies of one made through the wrapper, made by the store's own server or
 * file (SQL INSERT ... SELECT, a Lua loop in Redis), each under its own key and with its own
 * last change, so that filling a million takes seconds, not the minutes of a million calls.
 */

const path = require('node:path');

const { pool } = require('../lib/compare');
const { pkg, charge, freshArgs, tempDir, rmrf } = require('../lib/common');

const MB = 1024 * 1024;
const DAY = 86_400_000;
const LIMIT = 20;

/** Runs `fn`, watching the event loop and this process's RSS while it runs. */
async function watched(fn) {
  const rssBefore = process.memoryUsage.rss();
  let peak = rssBefore;
  let maxGapMs = 0;
  let last = performance.now();
  let on = true;
  const tick = () => {
    const now = performance.now();
    maxGapMs = Math.max(maxGapMs, now - last);
    last = now;
    peak = Math.max(peak, process.memoryUsage.rss());
    if (on) setImmediate(tick);
  };
  setImmediate(tick);
  const t0 = performance.now();
  try {
    const value = await fn();
    return { value, ms: performance.now() - t0, addedMB: (peak - rssBefore) / MB, maxGapMs };
  } finally {
    on = false;
  }
}

/** A caller making a new call every 10 ms until `until` settles: its worst wait and failures. */
async function callerDuring(wrapped, until) {
  let done = false;
  until.then(() => (done = true), () => (done = true));
  let worstMs = 0;
  let calls = 0;
  let failures = 0;
  while (!done) {
    const t0 = performance.now();
    try {
      await wrapped(freshArgs('during-prune'));
    } catch {
      failures++;
    }
    worstMs = Math.max(worstMs, performance.now() - t0);
    calls++;
    await new Promise((r) => setTimeout(r, 10)); // pacing, not synchronisation
  }
  return { worstMs, calls, failures };
}

/** The listing and the stats of a store holding `size` records. */
async function reads(store) {
  const list = await watched(() => store.listRecent({ limit: LIMIT }));
  if (list.value.records.length !== LIMIT) throw new Error(`listRecent gave ${list.value.records.length} records, not ${LIMIT}`);
  const stats = await watched(() => store.stats());
  return { list, stats };
}

/** Prunes, with a caller calling meanwhile; no expired record may be left. */
async function pruneWithCaller(store, wrapped) {
  // A store in service has its connections open (PostgreSQL's pool opens them as calls
  // overlap); a cold one would time its connects here, not the prune.
  await pool(16, 16, () => wrapped(freshArgs('warm')));
  const pruning = watched(() => store.prune());
  const caller = await callerDuring(wrapped, pruning);
  const prune = await pruning;
  const { expired } = await store.stats();
  if (expired !== 0) throw new Error(`prune() removed ${prune.value} records and left ${expired} expired`);
  return { prune, caller };
}

// Every record made expired, each at its own time (a year before it was made), as records
// written one after another expire: a prune walks the expiry index in order.
const EXPIRE_ALL = 'UPDATE {table} SET expires_at = created_at - 31536000000';

// ---- SQLite -------------------------------------------------------------------------

async function sqlite(size, dir) {
  const Database = require('better-sqlite3');
  const { idempotent, SqliteStore } = pkg();
  const file = path.join(dir, `ops-${size}.db`);
  const open = () => {
    const store = new SqliteStore({ path: file, pruneIntervalMs: DAY });
    return { store, wrapped: idempotent(charge, { store, name: 'charge', ttlMs: DAY }) };
  };
  // better-sqlite3 is another copy of SQLite: two in one process must never have the file
  // open at once (POSIX locks are the process's, and one copy's close drops the other's;
  // a WAL index mapped by both was a SIGBUS here), so each writes only while the store is closed.
  const withFile = (fn) => {
    const db = new Database(file);
    try {
      fn(db);
      db.pragma('wal_checkpoint(TRUNCATE)');
    } finally {
      db.close();
    }
  };
  let s = open();
  await s.wrapped(freshArgs('model'));
  await s.store.close();

  const t0 = performance.now();
  withFile((db) => {
    const columns = db.prepare("SELECT name FROM pragma_table_info('records')").all().map((c) => c.name);
    const model = db.prepare('SELECT key FROM records LIMIT 1').get().key;
    const copy = columns.map((c) => ({ key: "r.key || '-' || i", updated_at: 'r.updated_at - i', created_at: 'r.created_at - i' })[c] ?? `r.${c}`);
    db.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
       INSERT INTO records (${columns.join(', ')}) SELECT ${copy.join(', ')} FROM n, records AS r WHERE r.key = ?`,
    ).run(size - 1, model);
  });
  const fillMs = performance.now() - t0;

  s = open();
  let r;
  try {
    r = await reads(s.store);
  } finally {
    await s.store.close();
  }
  withFile((db) => db.prepare(EXPIRE_ALL.replace('{table}', 'records')).run());
  s = open();
  try {
    return { fillMs, ...r, ...(await pruneWithCaller(s.store, s.wrapped)) };
  } finally {
    await s.store.close();
  }
}

// ---- PostgreSQL ---------------------------------------------------------------------

async function postgres(size, url) {
  const { Client } = require('pg');
  const { idempotent, PostgresStore } = pkg();
  const table = `bench_ops_${process.pid}_${size}`;
  const admin = new Client({ connectionString: url });
  await admin.connect();
  const store = new PostgresStore({ url, table, pruneIntervalMs: 0 });
  try {
    const wrapped = idempotent(charge, { store, name: 'charge', ttlMs: DAY });
    await wrapped(freshArgs('model'));
    const t0 = performance.now();
    const { rows } = await admin.query('SELECT column_name FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position', [table]);
    const columns = rows.map((r) => r.column_name);
    const copy = columns.map((c) => ({ key: "r.key || '-' || i", updated_at: 'r.updated_at - i', created_at: 'r.created_at - i' })[c] ?? `r.${c}`);
    await admin.query(
      `INSERT INTO "${table}" (${columns.join(', ')}) SELECT ${copy.join(', ')} FROM generate_series(1, $1::int) AS i, (SELECT * FROM "${table}" LIMIT 1) AS r`,
      [size - 1],
    );
    await admin.query(`VACUUM ANALYZE "${table}"`);
    const fillMs = performance.now() - t0;
    const r = await reads(store);
    await admin.query(EXPIRE_ALL.replace('{table}', `"${table}"`));
    await admin.query(`VACUUM ANALYZE "${table}"`);
    // The fill and the update wrote about a GB of WAL: without a checkpoint now, the server
    // checkpoints during the prune for their sake (its log: every 4-6 s, a sync of up to
    // 0.3 s that a new call's commit waits behind), which no prune in service inherits.
    await admin.query('CHECKPOINT').catch(() => {}); // needs a superuser; else measured as is
    const p = await pruneWithCaller(store, wrapped);
    return { fillMs, ...r, ...p };
  } finally {
    await store.close();
    await admin.query(`DROP TABLE IF EXISTS "${table}"`).catch(() => {});
    await admin.end();
  }
}

// ---- Redis --------------------------------------------------------------------------

// Copies the record at KEYS[1] (key ARGV[1] without the prefix ARGV[2]) to the keys
// ARGV[1] .. '-' .. i for i in ARGV[3] .. ARGV[4]: the value's key field ("k" length ":"
// key, src/redis_store/record.rs) rewritten, its expiry kept.
const COPY = `
local v = redis.call('GET', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
local old = ARGV[1]
local field = 'k' .. #old .. ':' .. old
local s, e = string.find(v, field, 1, true)
for i = tonumber(ARGV[3]), tonumber(ARGV[4]) do
  local key = old .. '-' .. i
  redis.call('SET', ARGV[2] .. key, string.sub(v, 1, s - 1) .. 'k' .. #key .. ':' .. key .. string.sub(v, e + 1), 'PX', ttl)
end
return ttl`;
const UNLINK = `
for i = tonumber(ARGV[3]), tonumber(ARGV[4]) do redis.call('UNLINK', ARGV[2] .. ARGV[1] .. '-' .. i) end
return 0`;

/**
 * The floor of any listing without an index: a bare walk of the prefix with the client
 * alone (SCAN 500 at a time, then MGET of each page, the values counted, not decoded),
 * and the server's CPU it cost (INFO cpu). The store's listRecent and stats do this walk
 * plus decoding every record; no walk can be faster than this one.
 */
async function bareWalk(admin, prefix) {
  const cpu = async () => {
    const info = await admin.sendCommand(['INFO', 'cpu']);
    const of = (k) => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)[1]);
    return of('used_cpu_sys') + of('used_cpu_user');
  };
  const cpu0 = await cpu();
  const t0 = performance.now();
  let cursor = '0';
  let values = 0;
  do {
    const [next, keys] = await admin.sendCommand(['SCAN', cursor, 'MATCH', `${prefix}*`, 'COUNT', '500']);
    if (keys.length > 0) values += (await admin.sendCommand(['MGET', ...keys])).filter((v) => v !== null).length;
    cursor = String(next);
  } while (cursor !== '0');
  return { ms: performance.now() - t0, serverCpuMs: ((await cpu()) - cpu0) * 1000, values };
}

async function redis(size, url) {
  const { createClient } = require('@redis/client');
  const { idempotent, RedisStore } = pkg();
  const prefix = `bench-ops-${process.pid}-${size}:`;
  const admin = await createClient({ url }).connect();
  const store = new RedisStore({ url, prefix });
  let model;
  try {
    const wrapped = idempotent(charge, { store, name: 'charge', ttlMs: DAY });
    await wrapped(freshArgs('model'));
    // The whole keyspace, not one page: a SCAN page of a large, sparse table (the keys of
    // the size before, just deleted) can come back empty while the walk goes on.
    const keys = [];
    let cursor = '0';
    do {
      const [next, page] = await admin.sendCommand(['SCAN', cursor, 'MATCH', `${prefix}*`, 'COUNT', '1000']);
      keys.push(...page);
      cursor = String(next);
    } while (cursor !== '0');
    if (keys.length !== 1) throw new Error(`found ${keys.length} keys under ${prefix}, not the one record`);
    model = keys[0].slice(prefix.length);
    const t0 = performance.now();
    // Scripts of 20k copies: each blocks the server for a moment, as a fill may.
    for (let from = 1; from < size; from += 20_000) {
      const to = Math.min(size - 1, from + 19_999);
      await admin.sendCommand(['EVAL', COPY, '1', keys[0], model, prefix, String(from), String(to)]);
    }
    const fillMs = performance.now() - t0;
    const measured = await reads(store);
    return { fillMs, ...measured, floor: await bareWalk(admin, prefix) };
  } finally {
    await store.close();
    if (model) {
      for (let from = 1; from < size; from += 20_000) {
        await admin.sendCommand(['EVAL', UNLINK, '0', model, prefix, String(from), String(Math.min(size - 1, from + 19_999))]);
      }
      await admin.sendCommand(['UNLINK', `${prefix}${model}`]);
    }
    await admin.quit();
  }
}

// ---- the scenario -------------------------------------------------------------------

const fmt = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);

async function operations(ctx) {
  const sizes = ctx.quick ? [1e3, 1e4] : [1e5, 1e6];
  const pgUrl = process.env.IDEMPOTENT_TOOLS_BENCH_PG || process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/pg_helper';
  const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379/14';
  // IDEMPOTENT_TOOLS_BENCH_STORES=PostgreSQL,Redis runs those stores only (a million
  // records take minutes per store).
  const only = (process.env.IDEMPOTENT_TOOLS_BENCH_STORES || '').split(',').filter(Boolean);
  const dir = tempDir('operations');
  const data = {};
  const rows = [];
  try {
    for (const [kind, run] of [
      ['SQLite', (size) => sqlite(size, dir)],
      ['PostgreSQL', (size) => postgres(size, pgUrl)],
      ['Redis', (size) => redis(size, redisUrl)],
    ]) {
      if (only.length && !only.includes(kind)) continue;
      data[kind] = {};
      for (const size of sizes) {
        process.stdout.write(`  ${kind}, ${size.toLocaleString('en-US')} records ...\n`);
        let m;
        try {
          m = await run(size);
        } catch (err) {
          data[kind][size] = { error: err.message };
          rows.push([kind, size.toLocaleString('en-US'), `failed: ${err.message}`, '', '', '', '', '', '']);
          continue;
        }
        data[kind][size] = m;
        rows.push([
          kind,
          size.toLocaleString('en-US'),
          `${fmt(m.list.ms)}, +${m.list.addedMB.toFixed(0)} MB, loop ${fmt(m.list.maxGapMs)}`,
          `${fmt(m.stats.ms)}, loop ${fmt(m.stats.maxGapMs)}`,
          m.prune ? `${fmt(m.prune.ms)}, +${m.prune.addedMB.toFixed(0)} MB` : 'Redis expires records itself',
          m.caller ? `${fmt(m.caller.worstMs)} (${m.caller.calls} calls, ${m.caller.failures} failed)` : '',
          m.floor ? `${fmt(m.floor.ms)} (server CPU ${fmt(m.floor.serverCpuMs)})` : '',
          fmt(m.fillMs),
        ]);
      }
      const [small, large] = sizes.map((s) => data[kind][s]);
      if (small?.prune && large?.prune) data[kind].pruneRatio = large.prune.ms / small.prune.ms;
    }
  } finally {
    rmrf(dir);
  }
  const ratios = Object.entries(data)
    .filter(([, d]) => d.pruneRatio)
    .map(([kind, d]) => `${kind} ${d.pruneRatio.toFixed(1)}x`)
    .join(', ');
  return {
    id: 'operations',
    title: `Pruning and listing at ${sizes.map((s) => s.toLocaleString('en-US')).join(' and ')} records`,
    note:
      `Records copied from one made through the wrapper (SQL INSERT ... SELECT, a Lua loop in Redis), each with its own key and last change. ` +
      `listRecent asks for the ${LIMIT} newest (inspect --limit ${LIMIT}); "+MB" is this process's RSS at its peak over its RSS before; "loop" is the longest ` +
      `its event loop waited. On Redis, the floor: the same walk done bare with @redis/client, values fetched and not decoded. Then every record is made expired and prune() runs while a caller in this process makes a new call every 10 ms. ` +
      `Time of a prune at ${sizes[1].toLocaleString('en-US')} over one at ${sizes[0].toLocaleString('en-US')}: ${ratios || 'n/a'} (goal: at most 10x).`,
    header: ['store', 'records', `listRecent(${LIMIT})`, 'stats()', 'prune()', "a caller's worst wait during prune", 'bare SCAN + MGET walk, the floor (Redis)', 'fill'],
    rows,
    data,
  };
}

module.exports = { operations };
