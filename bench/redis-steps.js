'use strict';
/**
 * What one Redis call is made of, one call at a time: a plain node-redis round trip, our
 * native read, claim script and settle script on their own, and the whole wrapped call.
 * Medians of 400 sequential calls, three rounds. `node bench/redis-steps.js` (REDIS_URL).
 */
const { createClient } = require('@redis/client');
const native = require('../native/index.js');
const { idempotent, RedisStore } = require('..');
const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379/14';
const N = 400;
const med = (xs) => xs.sort((a, b) => a - b)[xs.length >> 1];
async function time(fn) { const xs = []; for (let i = 0; i < N; i++) { const t = process.hrtime.bigint(); await fn(i); xs.push(Number(process.hrtime.bigint() - t) / 1000); } return med(xs).toFixed(0); }
(async () => {
  const c = await createClient({ url }).connect();
  const n = new native.NativeRedisStore({ url, prefix: `decomp:${process.pid}:` });
  const s = new RedisStore({ url, prefix: `decomp2:${process.pid}:` });
  const f = idempotent(async function charge(i) { return { i }; }, { store: s });
  await n.get('x'); await f(-1); await c.ping();
  for (let round = 0; round < 3; round++) {
    const out = {};
    out.nodeRedisPing = await time(() => c.ping());
    out.nodeRedisSetNx = await time((i) => c.set(`decomp:raw:${round}:${i}`, 'x', { NX: true, PX: 60000 }));
    out.nativeGetMiss = await time((i) => n.get(`miss${i}`));
    const toks = [];
    out.nativeAcquire = await time(async (i) => { const o = await n.acquire({ key: `k${round}:${i}`, name: 'charge', fingerprint: 'f', leaseMs: 30000, force: false }); toks[i] = o.token; });
    out.nativeComplete = await time((i) => n.complete({ key: `k${round}:${i}`, token: toks[i], result: '{"i":1}' }));
    out.wrappedNewCall = await time((i) => f(round * 10000 + i));
    out.wrappedReplay = await time((i) => f(round * 10000 + i));
    console.log(JSON.stringify(out));
  }
  await n.clear(); await s.clear(); await s.close(); await c.quit();
})();
