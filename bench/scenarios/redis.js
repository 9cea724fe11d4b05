'use strict';
/**
 * Redis: replays and unique calls with 1 and 64 in flight. idempotent-tools' RedisStore
 * vs AWS Powertools' idempotency utility (CachePersistenceLayer on @redis/client) vs
 * @node-idempotency/core (its Redis storage adapter), on the same server, and the floor:
 * the same number of plain round trips from @redis/client (1 GET per replay; SET NX and
 * SET per unique call). Then the commands each implementation sends per operation are
 * counted twice: by a pass-through that parses what the client sends, and on the server
 * with INFO commandstats before/after (which, in Redis 7, also counts the commands a Lua
 * script runs inside the server).
 */


const { compare, pool, pairedRatio } = require('../lib/compare');
const { pkg, charge, freshArgs } = require('../lib/common');
const { keyOf, nodeIdempotencyWrap } = require('../lib/node-idempotency');
const { commandCounter } = require('../lib/resp-counter');

const TTL_MS = 3600_000;

function parseUrl(url) {
  const u = new URL(url);
  return { host: u.hostname || '127.0.0.1', port: Number(u.port || 6379), db: Number((u.pathname || '/0').slice(1) || 0) };
}

function withPort(url, port) {
  const u = new URL(url);
  u.host = `127.0.0.1:${port}`;
  return u.toString();
}

/** The floor: the same round trips from a plain client, with no protocol around them. */
function rawFloor(client, prefix) {
  const keyIn = (args) => prefix + keyOf('charge', args);
  return {
    replay: async (args) => JSON.parse(await client.get(keyIn(args))),
    unique: async (args) => {
      const key = keyIn(args);
      await client.set(key, '{"status":"pending"}', { NX: true, PX: TTL_MS });
      const result = await charge(args);
      await client.set(key, JSON.stringify(result), { PX: TTL_MS });
      return result;
    },
    seed: async (args) => client.set(keyIn(args), JSON.stringify(await charge(args)), { PX: TTL_MS }),
  };
}

async function makeImpls(url, prefix, ours) {
  const { createClient } = require('@redis/client');
  const { makeIdempotent, IdempotencyConfig } = require('@aws-lambda-powertools/idempotency');
  const { CachePersistenceLayer } = require('@aws-lambda-powertools/idempotency/cache');
  const { Idempotency } = require('@node-idempotency/core');
  const { RedisStorageAdapter } = require('@node-idempotency/storage-adapter-redis');

  const ptClient = await createClient({ url }).connect();
  const ptCharge = async (args) => charge(args);
  // Outside Lambda, Powertools warns on every call unless it is told the remaining
  // time; a 30 s in-flight window, like our default lease.
  const config = new IdempotencyConfig({ lambdaContext: { getRemainingTimeInMillis: () => 30_000 } });
  const pt = makeIdempotent(ptCharge, {
    persistenceStore: new CachePersistenceLayer({ client: ptClient }),
    keyPrefix: `${prefix}pt`,
    config,
  });

  const adapter = new RedisStorageAdapter({ url });
  await adapter.connect();
  const ni = nodeIdempotencyWrap(new Idempotency(adapter, { cacheKeyPrefix: `${prefix}ni`, cacheTTLMS: TTL_MS }), 'charge', charge);

  const rawClient = await createClient({ url }).connect();
  const raw = rawFloor(rawClient, `${prefix}raw:`);

  const impls = [];
  let oursStore;
  if (ours) {
    const { idempotent, RedisStore } = pkg();
    oursStore = new RedisStore({ url, prefix: `${prefix}ours:` });
    // The same one-hour expiry every peer and the floor write (like for like).
    const f = idempotent(charge, { store: oursStore, name: 'charge', ttlMs: TTL_MS });
    impls.push({ name: 'idempotent-tools', replay: f, unique: f, seed: f });
  }
  impls.push({ name: 'Powertools (CachePersistenceLayer)', replay: pt, unique: pt, seed: pt });
  impls.push({ name: '@node-idempotency/core', replay: ni, unique: ni, seed: ni });
  impls.push({ name: 'raw client floor', replay: raw.replay, unique: raw.unique, seed: raw.seed });
  const close = async () => {
    if (oursStore) await oursStore.close();
    await ptClient.quit();
    await adapter.disconnect();
    await rawClient.quit();
  };
  return { impls, close };
}

/** The Redis server's CPU time so far (user + system), in µs. */
async function serverCpuUs(admin) {
  const info = await admin.info('cpu');
  return ['used_cpu_sys', 'used_cpu_user'].reduce((sum, k) => sum + Number(new RegExp(`${k}:([\\d.]+)`).exec(info)[1]), 0) * 1e6;
}

function commandStats(info) {
  const out = {};
  for (const line of info.split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

function diff(after, before) {
  const d = {};
  for (const [k, v] of Object.entries(after)) {
    const x = v - (before[k] ?? 0);
    if (x > 0 && k !== 'info') d[k] = x;
  }
  return d;
}

const perOp = (counts, n) => Object.fromEntries(Object.entries(counts).map(([k, v]) => [k.toLowerCase(), +(v / n).toFixed(2)]));

async function countCommands(url, prefix, ours, admin, n) {
  const target = parseUrl(url);
  const counter = commandCounter(target);
  const port = await counter.listen();
  const { impls, close } = await makeImpls(withPort(url, port), `${prefix}count:`, ours);
  const out = {};
  try {
    for (const impl of impls) {
      const seeds = Array.from({ length: n }, () => freshArgs('count'));
      // warm up: connections, scripts loaded
      await impl.unique(freshArgs('count-warm'));
      await impl.replay(seeds[0]).catch(() => {});
      await impl.seed(seeds[0]);
      const measure = async (what, fn) => {
        const c0 = counter.snapshot();
        const s0 = commandStats(await admin.info('commandstats'));
        for (let i = 0; i < n; i++) await fn(i);
        const s1 = commandStats(await admin.info('commandstats'));
        const c1 = counter.snapshot();
        const sent = diff(c1.counts, c0.counts);
        return {
          clientCommandsPerOp: (c1.total - c0.total) / n,
          clientCommandsByName: perOp(sent, n),
          serverCommandstatsPerOp: perOp(diff(s1, s0), n),
        };
      };
      const unique = await measure('unique', (i) => (i === 0 ? Promise.resolve() : impl.unique(seeds[i])));
      // seeds[1..n-1] are now stored; seeds[0] was seeded: replay all n
      const replay = await measure('replay', (i) => impl.replay(seeds[i]));
      // unique ran n-1 calls: correct its per-op figures
      for (const k of ['clientCommandsPerOp']) unique[k] = (unique[k] * n) / (n - 1);
      unique.clientCommandsByName = Object.fromEntries(Object.entries(unique.clientCommandsByName).map(([k, v]) => [k, +((v * n) / (n - 1)).toFixed(2)]));
      unique.serverCommandstatsPerOp = Object.fromEntries(Object.entries(unique.serverCommandstatsPerOp).map(([k, v]) => [k, +((v * n) / (n - 1)).toFixed(2)]));
      out[impl.name] = { replay, unique };
    }
  } finally {
    await close();
    await counter.close();
  }
  return out;
}

async function cleanup(admin, prefix) {
  let cursor = '0';
  do {
    const r = await admin.scan(cursor, { MATCH: `${prefix}*`, COUNT: 1000 });
    cursor = String(r.cursor);
    if (r.keys.length) await admin.unlink(r.keys);
  } while (cursor !== '0');
}

async function redis(ctx) {
  const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379/14';
  const prefix = `idt-bench:${process.pid}:`;
  const notes = [];
  let ours = false;
  try {
    const { RedisStore } = pkg();
    if (typeof RedisStore === 'function') {
      const probe = new RedisStore({ url, prefix: `${prefix}probe:` });
      await probe.ready();
      await probe.get('nothing');
      await probe.close();
      ours = true;
    }
  } catch (err) {
    notes.push(`idempotent-tools' RedisStore could not run (${err.message.split('\n')[0]}); the alternatives ran without it.`);
  }
  const { createClient } = require('@redis/client');
  let admin;
  try {
    admin = await createClient({ url, socket: { connectTimeout: 2000, reconnectStrategy: false } }).connect();
  } catch (err) {
    return { id: 'redis', title: 'Redis', skipped: `no Redis at ${url}: ${err.message}`, header: [], rows: [], data: {} };
  }
  const rounds = ctx.quick ? 3 : 9;
  const K = ctx.quick ? 200 : 1000;
  const rows = [];
  // Which server answers matters: Valkey 8.1+ and Redis 8.4+ settle a new call with one
  // plain command (SET IFEQ), older servers run the settle script.
  const info = await admin.info('server');
  const server = /valkey_version:(\S+)/.exec(info) ? `Valkey ${/valkey_version:(\S+)/.exec(info)[1]}` : `Redis ${/redis_version:(\S+)/.exec(info)?.[1] ?? '?'}`;
  const data = { url, server, oursAvailable: ours, runs: {} };
  let impls;
  let close;
  try {
    ({ impls, close } = await makeImpls(url, prefix, ours));
    const seeds = new Map();
    for (const impl of impls) {
      const keys = Array.from({ length: K }, () => freshArgs('redis-replay'));
      await pool(K, 64, (i) => impl.seed(keys[i]));
      seeds.set(impl.name, keys);
    }
    for (const op of ['replay', 'unique']) {
      for (const inFlight of [1, 64]) {
        const n = (inFlight === 1 ? 400 : 3200) / (ctx.quick ? 4 : 1) / (op === 'unique' ? 2 : 1);
        let at = 0;
        // CPU per op of each implementation's measured rounds: this process's (the
        // JavaScript thread and every other thread of it: V8's helpers, a Tokio worker)
        // and the Redis server's (INFO cpu; everything else on that server counts too).
        const cpu = new Map(impls.map((impl) => [impl.name, { process: 0, server: 0, ops: 0 }]));
        let mark;
        const res = await compare({
          rounds,
          n,
          baseline: 'raw client floor',
          alts: impls.map((impl) => ({
            name: impl.name,
            before: async () => {
              mark = { process: process.cpuUsage(), server: await serverCpuUs(admin) };
            },
            after: async () => {
              const c = cpu.get(impl.name);
              const used = process.cpuUsage(mark.process);
              c.process += used.user + used.system;
              c.server += (await serverCpuUs(admin)) - mark.server;
              c.ops += n;
            },
            run: async (m) => {
              const keys = seeds.get(impl.name);
              if (op === 'replay') await pool(m, inFlight, (i) => impl.replay(keys[(at + i) % K]));
              else await pool(m, inFlight, () => impl.unique(freshArgs('redis-unique')));
              at += 17;
            },
          })),
        });
        const byName = Object.fromEntries(res.map((r) => [r.name, r]));
        const oursR = byName['idempotent-tools'];
        const ni = byName['@node-idempotency/core'];
        const run = { results: res, cpuUsPerOp: Object.fromEntries([...cpu].map(([k, c]) => [k, { process: c.process / c.ops, server: c.server / c.ops }])) };
        if (oursR) {
          run.fractionOfFloor = 1 / oursR.timeRatioVsBaseline;
          run.speedupVsNodeIdempotency = pairedRatio(ni, oursR);
        }
        data.runs[`${op}/${inFlight}`] = run;
        for (const r of res) {
          const c = run.cpuUsPerOp[r.name];
          rows.push([op, inFlight, r.name, r.medianUsPerOp, r.opsPerSec, c.process, c.server, 1 / r.timeRatioVsBaseline, oursR ? pairedRatio(r, oursR) : '-']);
        }
      }
    }
    await close();
    close = undefined;
    data.commands = await countCommands(url, prefix, ours, admin, ctx.quick ? 50 : 200);
  } finally {
    if (close) await close();
    await cleanup(admin, prefix);
    await admin.quit();
  }
  const cmdRows = Object.entries(data.commands).flatMap(([name, c]) =>
    ['replay', 'unique'].map((op) => [
      name,
      op,
      c[op].clientCommandsPerOp.toFixed(2),
      Object.entries(c[op].clientCommandsByName).map(([k, v]) => `${k} ${v}`).join(', '),
      Object.entries(c[op].serverCommandstatsPerOp).map(([k, v]) => `${k} ${v}`).join(', '),
    ]),
  );
  return [
    {
      id: 'redis',
      title: `Redis (${server} at ${url}), replays and unique calls`,
      note:
        `${rounds} rounds per row group, alternating. "of floor" = floor time / this time (1.00 = as fast as the bare round trips). ` +
        '"process CPU" = this process\'s CPU (every thread: JavaScript, V8\'s helpers, a Tokio worker) per op over the measured rounds; "server CPU" = the Redis server\'s (INFO cpu). ' +
        '"ours faster by" = this time / our time.' + (notes.length ? ` NOTE: ${notes.join(' ')}` : ''),
      header: ['operation', 'in flight', 'implementation', 'median µs/op', 'ops/s', 'process CPU µs/op', 'server CPU µs/op', 'of floor', 'ours faster by'],
      rows,
      data,
    },
    {
      id: 'redis-commands',
      title: 'Redis commands per operation (counted, not timed)',
      note: 'Client = commands the client sent, parsed by a pass-through proxy (each is one request; a replay that sends 1 command is 1 round trip). Server = INFO commandstats delta per op (also counts commands run inside Lua scripts, and anything other clients of this server did meanwhile).',
      header: ['implementation', 'operation', 'client commands/op', 'client, by command', 'server commandstats/op'],
      rows: cmdRows,
      data: data.commands,
    },
  ];
}

module.exports = { redis, makeImpls, cleanup };
