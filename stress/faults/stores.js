'use strict';
// The store of a fault run, as a worker or a test opens it. `redis-tokio` is RedisStore on
// its Tokio transport (see tokioRedisStore).

const { join } = require('node:path');

const ROOT = join(__dirname, '..', '..');
const lib = require(ROOT);

/** The store the worker calls through. `redis-tokio` forces RedisStore's Tokio transport. */
function openStore(config) {
  switch (config.store) {
    case 'sqlite':
      return new lib.SqliteStore({ path: config.db });
    case 'redis':
      return new lib.RedisStore({ url: config.url, prefix: config.prefix, connectTimeoutMs: config.connectTimeoutMs, commandTimeoutMs: config.commandTimeoutMs });
    case 'redis-cluster':
      return new lib.RedisStore({ url: config.url, prefix: config.prefix, cluster: true, connectTimeoutMs: config.connectTimeoutMs, commandTimeoutMs: config.commandTimeoutMs });
    case 'redis-tokio':
      return tokioRedisStore({ url: config.url, prefix: config.prefix, connectTimeoutMs: config.connectTimeoutMs, commandTimeoutMs: config.commandTimeoutMs });
    case 'postgres':
      return new lib.PostgresStore({ url: config.url, table: config.table, connectTimeoutMs: config.connectTimeoutMs, commandTimeoutMs: config.commandTimeoutMs, pruneIntervalMs: 0 });
    default:
      throw new Error(`unknown store ${config.store}`);
  }
}

/**
 * A RedisStore on the Tokio transport, under Node: `IDEMPOTENT_TOOLS_REDIS_TRANSPORT=tokio`
 * (internal, lib/stores/redis-store.ts) is read when a store is made, so it is set for the
 * constructor's length only.
 */
function tokioRedisStore(options) {
  const before = process.env.IDEMPOTENT_TOOLS_REDIS_TRANSPORT;
  process.env.IDEMPOTENT_TOOLS_REDIS_TRANSPORT = 'tokio';
  try {
    return new lib.RedisStore(options);
  } finally {
    if (before === undefined) delete process.env.IDEMPOTENT_TOOLS_REDIS_TRANSPORT;
    else process.env.IDEMPOTENT_TOOLS_REDIS_TRANSPORT = before;
  }
}

/** How often the native addon's Tokio thread (`idempotent-io`) has run in this process (Linux). */
function tokioSwitches() {
  const { readFileSync, readdirSync } = require('node:fs');
  let n = 0;
  try {
    for (const tid of readdirSync('/proc/self/task')) {
      const status = readFileSync(`/proc/self/task/${tid}/status`, 'utf8');
      if (!/^Name:\s+idempotent-io$/m.test(status)) continue;
      n += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)[1]) + Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)[1]);
    }
  } catch {
    return undefined; // not Linux
  }
  return n;
}

/**
 * Which transport the Redis store uses: a renew (of no record: refused) after a first one
 * that connected wakes the Tokio thread only on the Tokio transport. Undefined when it
 * cannot tell (not Linux, or the renews failed under the nemesis).
 */
async function usesTokio(store) {
  try {
    await store.renew('faults:transport-probe', 'none', 1);
    const before = tokioSwitches();
    await store.renew('faults:transport-probe', 'none', 1);
    const after = tokioSwitches();
    return before === undefined ? undefined : after > before;
  } catch {
    return undefined;
  }
}

module.exports = { ROOT, openStore, tokioRedisStore, usesTokio };
