// A model-based test of the call protocol (issue 19, "The checks that let them through"):
// fast-check generates sequences of commands, runs them against real SQLite, Redis and
// PostgreSQL stores and through idempotentTx, and checks a small model of what must hold
// after every command and inline while fn and its steps run (model/harness.ts).
//
// Commands: a call (explicit key by withKey, by the key option, or derived; arguments from
// a small set, so explicit keys get reused with other arguments; fn does 0-2 step()s and
// then returns, throws, or throws a control-flow interrupt; sometimes slow, outliving its
// lease and ttlMs; on SQLite sometimes another process holds the file's lock right after a
// step's side effect), run once or as 2-3 concurrent duplicates under 'raise' or 'block';
// an owner process killed with SIGKILL inside fn (after its steps, before or after its
// side effect); an owner hung with SIGSTOP and resumed later (its fn returns late), after a
// takeover or not; waiting for the clock to pass every settled record's ttlMs, or every dead
// owner's lease; wrapping a second function under the same name; explicit keys a store may
// not hold (U+0000, 3 kB).
// Invariants: fn and step bodies never run again after a caller (or a run of the same
// unfinished call) saw their result, unless the record may have expired past ttlMs from
// its settle, or the owner died and reconcile was asked; never two live owners at once; no
// call is answered with another call's result, and a step result belongs to its call (key
// and arguments); a reused key with other arguments is KeyMismatchError; a hung owner's late
// settle after a takeover is refused and never overwrites the record; a key without a
// live record runs; idempotentTx commits exactly the writes of calls that succeeded and
// leaves the user's session settings alone; nothing hangs past pollTimeoutMs + a margin.
//
// Replay a failure: IDT_MODEL_SEED=<seed> IDT_MODEL_PATH=<path> IDT_MODEL_REPLAY_PATH=<replayPath>
// (all three as printed with the counterexample) and IDT_MODEL_TARGETS=<the failing target>.
// IDT_MODEL_TARGETS=sqlite,redis,postgres,tx picks targets; IDT_MODEL_RUNS sets the runs per
// target; IDT_MODEL_TIME_MS bounds each target's runs and shrinking (default 20 s);
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
  if (needsPg) await sql(`DROP TABLE IF EXISTS "${recordsTable}_postgres", "${recordsTable}_tx", "${effectsTable}"`);
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
        recordsTable: `${recordsTable}_${target}`, // PostgresStore's and idempotentTx's records, each in its own table
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
