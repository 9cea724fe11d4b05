'use strict';
/**
 * PostgreSQL: replays and unique calls with 1 and 64 in flight, on one server, side by
 * side:
 * - idempotent-tools' PostgresStore (its defaults: 4 pipelined connections);
 * - @node-idempotency/core, the peer with a pluggable storage, on a pg storage adapter
 *   written to its StorageAdapter interface (it ships Redis and memory adapters only; no
 *   Postgres adapter is on npm), on a node-postgres Pool (its default of 10 connections);
 * - a hand-rolled decorator on the same kind of Pool: INSERT … ON CONFLICT DO NOTHING
 *   RETURNING to claim, SELECT on conflict, UPDATE to complete (2 round trips a call).
 * The table of each is its own, created before timing; everything is deleted after.
 */


const { compare, pool, pairedRatio } = require('../lib/compare');
const { CPU_HEADER, cpuCells } = require('../lib/cpu');
const { pkg, charge, freshArgs } = require('../lib/common');
const { keyOf, nodeIdempotencyWrap } = require('../lib/node-idempotency');

const TTL_MS = 3600_000;


/** @node-idempotency's StorageAdapter on a pg Pool (the obvious three statements). */
function pgStorageAdapter(pgPool, table) {
  const now = 'floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint';
  return {
    async setIfNotExists(key, val, { ttl } = {}) {
      const { rowCount } = await pgPool.query(
        `INSERT INTO ${table} (key, val, expires_at) VALUES ($1, $2, ${now} + $3::bigint)
         ON CONFLICT (key) DO UPDATE SET val = excluded.val, expires_at = excluded.expires_at
         WHERE ${table}.expires_at <= ${now}`,
        [key, val, ttl ?? null],
      );
      return rowCount === 1;
    },
    async set(key, val, { ttl } = {}) {
      await pgPool.query(
        `INSERT INTO ${table} (key, val, expires_at) VALUES ($1, $2, ${now} + $3::bigint)
         ON CONFLICT (key) DO UPDATE SET val = excluded.val, expires_at = excluded.expires_at`,
        [key, val, ttl ?? null],
      );
    },
    async get(key) {
      const { rows } = await pgPool.query(`SELECT val FROM ${table} WHERE key = $1 AND NOT coalesce(expires_at <= ${now}, false)`, [key]);
      return rows[0]?.val;
    },
  };
}

/** The hand-rolled decorator most teams would write first. */
function handRolled(pgPool, table, name, fn) {
  return async (args) => {
    const key = keyOf(name, args);
    const claimed = await pgPool.query(
      `INSERT INTO ${table} (key, status) VALUES ($1, 'pending') ON CONFLICT (key) DO NOTHING RETURNING key`,
      [key],
    );
    if (claimed.rowCount === 0) {
      const { rows } = await pgPool.query(`SELECT status, result FROM ${table} WHERE key = $1`, [key]);
      if (rows[0]?.status === 'completed') return JSON.parse(rows[0].result);
      throw new Error(`call ${key} is in flight`);
    }
    const result = await fn(args);
    await pgPool.query(`UPDATE ${table} SET status = 'completed', result = $2 WHERE key = $1`, [key, JSON.stringify(result)]);
    return result;
  };
}

/**
 * `url` with `application_name` set: how the server's backends of one implementation are
 * told apart. Without an `sslmode` in the URL, every implementation talks plain TCP:
 * node-postgres does by default, and ours would use TLS when the server offers it
 * (sslmode=prefer, libpq's default), which costs both ends CPU on every statement.
 */
function named(url, app) {
  const u = new URL(url);
  u.searchParams.set('application_name', app);
  if (!u.searchParams.has('sslmode')) u.searchParams.set('sslmode', 'disable');
  return u.toString();
}

async function makeImpls(url, tag) {
  const { Pool } = require('pg');
  const { Idempotency } = require('@node-idempotency/core');
  const { idempotent, PostgresStore } = pkg();
  const apps = { ours: `idt-bench-ours-${tag}`, ni: `idt-bench-ni-${tag}`, hr: `idt-bench-hr-${tag}` };
  const niPool = new Pool({ connectionString: named(url, apps.ni) });
  const hrPool = new Pool({ connectionString: named(url, apps.hr) });
  const ni = `bench_ni_${tag}`;
  const hr = `bench_hr_${tag}`;
  const ours = `bench_ours_${tag}`;
  await niPool.query(`CREATE TABLE ${ni} (key text PRIMARY KEY, val text NOT NULL, expires_at bigint)`);
  await hrPool.query(`CREATE TABLE ${hr} (key text PRIMARY KEY, status text NOT NULL, result text)`);
  const store = new PostgresStore({ url: named(url, apps.ours), table: ours });
  await store.get('warm'); // creates the table
  const f = idempotent(charge, { store, name: 'charge' });
  const niCall = nodeIdempotencyWrap(new Idempotency(pgStorageAdapter(niPool, ni), { cacheTTLMS: TTL_MS }), 'charge', charge);
  const hrCall = handRolled(hrPool, hr, 'charge', charge);
  // The server's CPU of each implementation: its backends' (found by application_name
  // before each round; the WAL writer and other shared processes are not counted).
  const backends = async (app) => (await hrPool.query('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [app])).rows.map((r) => r.pid);
  const impls = [
    { name: 'idempotent-tools', call: f, app: apps.ours },
    { name: '@node-idempotency/core (pg adapter)', call: niCall, app: apps.ni },
    { name: 'hand-rolled pg decorator', call: hrCall, app: apps.hr },
  ];
  for (const impl of impls) {
    impl.pids = [];
    impl.findBackends = async () => {
      impl.pids = await backends(impl.app);
    };
  }
  const close = async () => {
    await store.close();
    await hrPool.query(`DROP TABLE IF EXISTS ${ni}, ${hr}, ${ours}`);
    await niPool.end();
    await hrPool.end();
  };
  return { impls, close };
}

async function postgres(ctx) {
  const url = process.env.IDEMPOTENT_TOOLS_BENCH_PG || process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/pg_helper';
  try {
    const { Client } = require('pg');
    const probe = new Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    await probe.connect();
    await probe.end();
  } catch (err) {
    return { id: 'postgres', title: 'PostgreSQL', skipped: `no PostgreSQL at ${url}: ${err.message}`, header: [], rows: [], data: {} };
  }
  const rounds = ctx.quick ? 3 : 9;
  const K = ctx.quick ? 200 : 1000;
  const rows = [];
  const data = { url: url.replace(/:[^:@/]*@/, ':***@'), runs: {} };
  const { impls, close } = await makeImpls(url, `${process.pid}`);
  try {
    const seeds = new Map();
    for (const impl of impls) {
      const keys = Array.from({ length: K }, () => freshArgs('pg-replay'));
      await pool(K, 64, (i) => impl.call(keys[i]));
      seeds.set(impl.name, keys);
    }
    for (const op of ['replay', 'unique']) {
      for (const inFlight of [1, 64]) {
        const n = (inFlight === 1 ? 400 : 3200) / (ctx.quick ? 4 : 1) / (op === 'unique' ? 2 : 1);
        let at = 0;
        const res = await compare({
          rounds,
          n,
          baseline: 'hand-rolled pg decorator',
          alts: impls.map((impl) => ({
            name: impl.name,
            before: impl.findBackends,
            serverPids: () => impl.pids,
            run: async (m) => {
              const keys = seeds.get(impl.name);
              if (op === 'replay') await pool(m, inFlight, (i) => impl.call(keys[(at + i) % K]));
              else await pool(m, inFlight, () => impl.call(freshArgs('pg-unique')));
              at += 17;
            },
          })),
        });
        const byName = Object.fromEntries(res.map((r) => [r.name, r]));
        const oursR = byName['idempotent-tools'];
        data.runs[`${op}/${inFlight}`] = {
          results: res,
          speedupVsHandRolled: pairedRatio(byName['hand-rolled pg decorator'], oursR),
          speedupVsNodeIdempotency: pairedRatio(byName['@node-idempotency/core (pg adapter)'], oursR),
        };
        for (const r of res) rows.push([op, inFlight, r.name, r.medianUsPerOp, r.opsPerSec, pairedRatio(r, oursR), ...cpuCells(r.cpuUsPerOp)]);
      }
    }
  } finally {
    await close();
  }
  return {
    id: 'postgres',
    title: `PostgreSQL (${data.url}), replays and unique calls`,
    note:
      `${rounds} rounds per row group, alternating. "ours faster by" = this time / our time (paired per round). ` +
      'idempotent-tools: a replay is 1 statement, a unique call 2; hand-rolled: 2 and 2; @node-idempotency: 1 and 2 (plus its own bookkeeping). ' +
      'All three over the same transport (plain TCP unless the URL names an sslmode). CPU per op: this process\'s threads by kind, ' +
      "and the server's (the backends of each implementation's connections).",
    header: ['operation', 'in flight', 'implementation', 'median µs/op', 'ops/s', 'ours faster by', ...CPU_HEADER, 'server CPU µs/op'],
    rows,
    data,
  };
}

module.exports = { postgres };
