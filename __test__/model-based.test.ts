// A model-based test of the call protocol (issue 19, "The checks that let them through"):
// random sequences of calls (explicit keys reused with other arguments, derived keys),
// concurrent duplicates under 'raise' and 'block', steps, interrupts, failures, slow
// calls that outlive their lease, owners killed with SIGKILL inside fn, lease expiry and
// TTL expiry, run by fast-check against real SQLite, Redis and PostgreSQL stores and
// through idempotentTx. A small model of what must hold (model/checker.ts) is checked
// after every command, and inline while fn and its steps run.
//
// Replay a failure: IDT_MODEL_SEED=<seed> IDT_MODEL_PATH=<path> IDT_MODEL_REPLAY_PATH=<replayPath>
// (all three as printed with the counterexample) and IDT_MODEL_TARGETS=<the failing target>.
// IDT_MODEL_TARGETS=sqlite,redis,postgres,tx picks targets; IDT_MODEL_RUNS sets the runs per
// target; IDT_MODEL_TIME_MS bounds each target's runs and shrinking (default 30 s);
// IDT_MODEL_TTL=none|only fixes the runs' ttlMs; IDT_MODEL_EXCLUDE leaves features out
// (to look past a fault already found; see model/harness.ts); IDT_MODEL_STATS=1 prints
// what the runs did.

import { afterAll, describe, it } from 'vitest';
import fc from 'fast-check';

import { sharedRedis } from './redis-server';
import { PG_URL, sql } from './postgres-server';
import { TARGETS, type Target, printStats, runModel } from './model/harness';

const chosen = (process.env.IDT_MODEL_TARGETS ?? TARGETS.join(','))
  .split(',')
  .map((s) => s.trim())
  .filter((s): s is Target => (TARGETS as readonly string[]).includes(s));

const needsRedis = chosen.includes('redis');
const needsPg = chosen.includes('postgres') || chosen.includes('tx');
const redis = needsRedis ? sharedRedis() : undefined;

const suffix = `${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
const recordsTable = `model_test_${suffix}`;
const effectsTable = `model_fx_${suffix}`;

if (needsPg) {
  await sql(`CREATE TABLE "${effectsTable}" (id bigserial PRIMARY KEY, ns text NOT NULL, key text NOT NULL, kind text NOT NULL, args_id text NOT NULL, run text NOT NULL)`);
}

afterAll(async () => {
  if (needsPg) await sql(`DROP TABLE IF EXISTS "${recordsTable}", "${effectsTable}"`);
  if (redis !== undefined) await (await redis).stop();
});

const runs = process.env.IDT_MODEL_RUNS === undefined ? undefined : Number(process.env.IDT_MODEL_RUNS);
const seed = process.env.IDT_MODEL_SEED === undefined ? undefined : Number(process.env.IDT_MODEL_SEED);
const path = process.env.IDT_MODEL_PATH;

describe('model-based test of the call protocol', () => {
  it.each(chosen)('%s: random command sequences keep the model', async (target) => {
    const started = Date.now();
    try {
      await runModel(fc, {
      target,
      redisUrl: redis === undefined ? undefined : (await redis).url,
      pgUrl: PG_URL,
      recordsTable,
      effectsTable,
      numRuns: runs,
      seed,
      path,
        timeLimitMs: process.env.IDT_MODEL_TIME_MS === undefined ? undefined : Number(process.env.IDT_MODEL_TIME_MS),
      });
    } finally {
      printStats(`${target}, ${Date.now() - started} ms`);
    }
  }, 600_000);
});
