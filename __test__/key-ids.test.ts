// Telemetry and logs never carry a derived key (issue 21 item 2, SPEC "Telemetry and logs
// never carry a derived key that can be reversed to its arguments"). A derived key is an
// unsalted SHA-256 of the name and the arguments: with it, a low-entropy argument (a
// four-digit code) is recovered by hashing every guess. Events, spans and log lines carry
// a keyed id instead (an HMAC under a secret kept in the store), which the CLI resolves.
// Before this change, the first test found the code in the event (every guess was tried
// against event.key, and code 4821 matched).

import diagnostics_channel from 'node:diagnostics_channel';
import { Pool } from 'pg';
import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib, runNode, tempDb, testing } from './helpers';
import { PG_URL, uniqueTable } from './postgres-server';
import { sharedRedis, uniquePrefix } from './redis-server';

const { idempotent, SqliteStore, RedisStore, PostgresStore, CHANNEL_NAME, keyId } = lib;
const { idempotentTx } = require(`${ROOT}/dist/pg.js`) as typeof import('../dist/pg.js');
const CLI = `${ROOT}/dist/cli.js`;
const redis = await sharedRedis();
afterAll(() => redis.stop());

type Event = import('../dist/index.js').IdempotencyEvent;

/** Every four-digit code whose derived key appears anywhere in `seen` (what an attacker with the trace would do). */
function recovered(wrapped: { keyFor(code: string): string }, seen: string): string[] {
  const found: string[] = [];
  for (let n = 0; n < 10_000; n++) {
    const code = String(n).padStart(4, '0');
    if (seen.includes(wrapped.keyFor(code))) found.push(code);
  }
  return found;
}

const stores: Array<[string, () => import('../dist/core/store.js').Store]> = [
  ['SqliteStore', () => new SqliteStore({ path: tempDb() })],
  ['RedisStore', () => new RedisStore({ url: redis.url, prefix: uniquePrefix() })],
  ['PostgresStore', () => new PostgresStore({ url: PG_URL, table: uniqueTable() })],
  ['MemoryStore', () => new testing.MemoryStore()],
];

for (const [storeName, open] of stores) {
  describe(`keyed ids on ${storeName}`, () => {
    it('events (onEvent and the diagnostics channel) cannot be reversed to a low-entropy argument', async () => {
      const store = open();
      const seen: Event[] = [];
      const onChannel = (e: unknown) => seen.push(e as Event);
      diagnostics_channel.subscribe(CHANNEL_NAME, onChannel);
      try {
        const verify = idempotent(async function verifyPin(pin: string) {
          return { ok: pin.length === 4 };
        }, { store, onEvent: (e) => seen.push(e) });
        await verify('4821');
        await verify('4821');
        const text = JSON.stringify(seen);
        expect(seen.map((e) => e.type)).toEqual(['executed', 'executed', 'replayed', 'replayed']);
        expect(recovered(verify, text)).toEqual([]);
        // The id names the record: keyId() gives it, and it is the same in every event.
        const id = await keyId(store, verify.keyFor('4821'));
        expect(id).toMatch(/^kid_[0-9a-f]{24}$/);
        expect(new Set(seen.map((e) => e.key))).toEqual(new Set([id]));
        expect(new Set(seen.map((e) => e.keyId))).toEqual(new Set([id]));
        // Stored keys do not change: an upgrade never re-runs a finished call.
        expect((await store.get(verify.keyFor('4821')))?.status).toBe('completed');
      } finally {
        diagnostics_channel.unsubscribe(CHANNEL_NAME, onChannel);
        await store.close();
      }
    });

    it('an explicit key is carried as given (the caller chose it), with its keyed id beside it', async () => {
      const store = open();
      const seen: Event[] = [];
      const send = idempotent(async function send(to: string) {
        return to;
      }, { store, onEvent: (e) => seen.push(e) });
      await send.withKey('welcome-email-7')('a@example.com');
      expect(seen[0].key).toBe('welcome-email-7');
      expect(seen[0].keyId).toBe(await keyId(store, 'welcome-email-7'));
      await store.close();
    });
  });
}

describe('error messages', () => {
  it('an in-flight refusal does not print a derived key (errors end up in logs); error.key keeps it for programs', async () => {
    const store = new SqliteStore({ path: tempDb() });
    let release!: () => void;
    const gate = new Promise<void>((done) => (release = done));
    const check = idempotent(async function check(_code: string) {
      await gate;
      return 1;
    }, { store });
    const first = check('0042');
    const err = await check('0042').then(() => null, (e) => e);
    release();
    await first;
    expect(err).toBeInstanceOf(lib.DuplicateInFlightError);
    expect(err.message).not.toContain(check.keyFor('0042'));
    expect(err.key).toBe(check.keyFor('0042'));
    await store.close();
  });
});

describe('the CLI resolves keyed ids', () => {
  it('inspect --key takes an event\'s id (or its start), and no listing shows the secret\'s record', async () => {
    const path = tempDb();
    const store = new SqliteStore({ path });
    const seen: Event[] = [];
    const verify = idempotent(async function verifyPin(pin: string) {
      return { ok: pin.length === 4 };
    }, { store, onEvent: (e) => seen.push(e) });
    await verify('1234');
    await store.close();
    const id = seen[0].keyId;
    const whole = await runNode([CLI, '--db', path, 'inspect', '--key', id, '--json']);
    expect(whole.code).toBe(0);
    expect(JSON.parse(whole.stdout).key).toBe(verify.keyFor('1234'));
    const start = await runNode([CLI, '--db', path, 'inspect', '--key', id.slice(0, 10), '--json']);
    expect(JSON.parse(start.stdout).result).toEqual({ ok: true });
    const listing = await runNode([CLI, '--db', path, 'inspect', '--json']);
    expect((JSON.parse(listing.stdout) as Array<{ name: string }>).map((r) => r.name)).toEqual(['verifyPin']);
    const table = await runNode([CLI, '--db', path, 'inspect']);
    expect(table.stdout).not.toContain('key-id-secret');
    const missing = await runNode([CLI, '--db', path, 'inspect', '--key', 'kid_000000000000000000000000']);
    expect(missing.code).not.toBe(0);
  });
});

describe('one id per record: inspect shows the keyed id that events, traces and logs carry (issue 31 item 5)', () => {
  const places: Array<[string, () => { store: import('../dist/core/store.js').Store; flags: string[] }]> = [
    ['SqliteStore', () => {
      const path = tempDb();
      return { store: new SqliteStore({ path }), flags: ['--db', path] };
    }],
    ['RedisStore', () => {
      const prefix = uniquePrefix();
      return { store: new RedisStore({ url: redis.url, prefix }), flags: ['--redis', redis.url, '--prefix', prefix] };
    }],
    ['PostgresStore', () => {
      const table = uniqueTable();
      return { store: new PostgresStore({ url: PG_URL, table }), flags: ['--postgres', PG_URL, '--table', table] };
    }],
  ];
  for (const [storeName, open] of places) {
    it(`${storeName}: the table, --key (text and --json) and --json listings`, async () => {
      const { store, flags } = open();
      const seen: Event[] = [];
      const verify = idempotent(async function verifyPin(pin: string) {
        return { ok: pin.length === 4 };
      }, { store, onEvent: (e) => seen.push(e) });
      await verify('2468');
      await store.close();
      const id = seen[0].keyId;
      const key = verify.keyFor('2468');
      const table = await runNode([CLI, ...flags, 'inspect']);
      expect(table.stdout.split('\n')[0]).toMatch(/^KEY\s+ID\s+NAME\s/);
      expect(table.stdout).toMatch(new RegExp(`^${key}\\s+${id}\\s+verifyPin\\s`, 'm'));
      const text = await runNode([CLI, ...flags, 'inspect', '--key', key]);
      expect(text.stdout).toMatch(new RegExp(`^keyed id\\s+${id}$`, 'm'));
      expect(JSON.parse((await runNode([CLI, ...flags, 'inspect', '--key', key, '--json'])).stdout).keyId).toBe(id);
      expect(JSON.parse((await runNode([CLI, ...flags, 'inspect', '--json'])).stdout).map((r: { keyId: string }) => r.keyId)).toEqual([id]);
      expect(JSON.parse((await runNode([CLI, ...flags, 'inspect', '--jsonl'])).stdout).keyId).toBe(id);
    });
  }

  it('a file shared by projects: each record under its own project\'s secret; before any id was asked for, "-"', async () => {
    const path = tempDb();
    const ids: Record<string, string> = {};
    for (const namespace of ['shop', 'crm']) {
      const store = new SqliteStore({ path, namespace });
      const sync = idempotent(async function sync(n: number) {
        return n;
      }, { store, onEvent: (e) => (ids[namespace] = e.keyId) });
      await sync(1);
      await store.close();
    }
    expect(ids.shop).not.toBe(ids.crm); // one key, two projects, two secrets
    const every = JSON.parse((await runNode([CLI, '--db', path, 'inspect', '--json'])).stdout) as Array<{ namespace: string; keyId: string }>;
    expect(Object.fromEntries(every.map((r) => [r.namespace, r.keyId]))).toEqual(ids);
    const shop = JSON.parse((await runNode([CLI, '--db', path, '--project', 'shop', 'inspect', '--json'])).stdout);
    expect(shop.map((r: { keyId: string }) => r.keyId)).toEqual([ids.shop]);

    const quiet = tempDb(); // nothing listened: no secret, no id anywhere
    const store = new SqliteStore({ path: quiet });
    await idempotent(async function sync(n: number) {
      return n;
    }, { store })(1);
    await store.close();
    expect((await runNode([CLI, '--db', quiet, 'inspect'])).stdout).toMatch(/^\S+\s+-\s+sync\s/m);
    expect(JSON.parse((await runNode([CLI, '--db', quiet, 'inspect', '--json'])).stdout)[0].keyId).toBeNull();
  });
});

describe('steps carry their call\'s scope (issue 31 item 5)', () => {
  it('inspect --scope finds a thread\'s steps beside its calls; a step keeps no argument preview', async () => {
    const path = tempDb();
    const store = new SqliteStore({ path });
    const refund = idempotent(async function refund(order: string) {
      const id = await lib.step('refund at the bank', async () => `re_${order}`);
      await lib.step('email', async () => 'sent');
      return id;
    }, { store, meta: () => ({ scope: 'thread-7', toolCallId: 'call_1', framework: 'langgraph' }), preview: true });
    const other = idempotent(async function refund2(order: string) {
      return lib.step('refund at the bank', async () => `re_${order}`);
    }, { store, meta: () => ({ scope: 'thread-8' }) });
    await refund('o-1');
    await other('o-2');
    const steps = (await store.listRecords()).filter((r) => r.name.startsWith('refund.step('));
    expect(steps.map((r) => r.meta)).toEqual([
      { scope: 'thread-7', toolCallId: 'call_1', framework: 'langgraph' },
      { scope: 'thread-7', toolCallId: 'call_1', framework: 'langgraph' },
    ]);
    expect((await store.get(refund.keyFor('o-1')))?.meta?.argsPreview).toBe('["o-1"]');
    await store.close();
    const found = JSON.parse((await runNode([CLI, '--db', path, 'inspect', '--scope', 'thread-7', '--json'])).stdout) as Array<{ name: string }>;
    expect(found.map((r) => r.name).sort()).toEqual(['refund', 'refund.step("email")', 'refund.step("refund at the bank")']);
  });
});

describe('idempotentTx', () => {
  it('its events carry keyed ids too, and the secret is written outside the call\'s transaction', async () => {
    const pool = new Pool({ connectionString: PG_URL });
    const table = uniqueTable();
    try {
      const seen: Event[] = [];
      const verify = idempotentTx(async function verifyPin(_client: unknown, pin: string) {
        return { ok: pin.length === 4 };
      }, { pool, table, onEvent: (e) => seen.push(e) });
      await verify('7777');
      await verify('7777');
      expect(seen.map((e) => e.type)).toEqual(['executed', 'replayed']);
      expect(recovered(verify, JSON.stringify(seen))).toEqual([]);
      const store = new PostgresStore({ url: PG_URL, table });
      expect(seen[0].keyId).toBe(await keyId(store, verify.keyFor('7777')));
      await store.close();
    } finally {
      await pool.end();
    }
  });
});

// The secret could be planted (issue 29, item 4): it was read from any completed record at
// the reserved key whose result was 64 hex digits, and an explicit key could be that key,
// so a caller who controls a key (an Idempotency-Key header) chose the secret before the
// first traced call, and keyed ids became reversible again. Reserved keys and names are
// refused for calls; the secret is read only from a record whose name and fingerprint are its own.
describe('the keyed-id secret cannot be planted', () => {
  const PLANTED = 'ab'.repeat(32);
  const SECRET_KEY = 'idempotent-tools:key-id-secret';

  it('a call under the reserved key (withKey, or the key option) is a TypeError that says so, and runs nothing', async () => {
    const store = new SqliteStore({ path: tempDb() });
    let ran = 0;
    const echo = idempotent(async function echo(value: string) { ran++; return value; }, { store });
    // What a request handler that passes a client's Idempotency-Key through does.
    expect(() => echo.withKey(SECRET_KEY)).toThrow(/idempotent-tools: withKey\(key\) "idempotent-tools:key-id-secret" is reserved/);
    const keyed = idempotent(async function keyed(value: string) { ran++; return value; }, { store, key: (value) => value });
    await expect(keyed(SECRET_KEY)).rejects.toThrow(/is reserved: keys starting with "idempotent-tools:" are the package's own records/);
    await expect(keyed('approval|send|call_0|0123')).rejects.toThrow(/keys starting with "approval\|" are the package's own records \(approval decisions\)/);
    expect(ran).toBe(0);
    expect(await store.get(SECRET_KEY)).toBeNull();
    // Calls after that still get a secret of the store's own making.
    const seen: Event[] = [];
    const traced = idempotent(async function traced(pin: string) { return pin.length; }, { store, onEvent: (e) => seen.push(e) });
    await traced('4821');
    expect(seen[0].keyId).not.toBe(`kid_${'0'.repeat(24)}`);
    const secret = await store.get(SECRET_KEY);
    expect(secret?.result).toMatch(/^[0-9a-f]{64}$/);
    expect(secret?.result).not.toBe(PLANTED);
    await store.close();
  });

  it('a reserved name (the secret\'s, approval decisions\') is a TypeError at wrap time', () => {
    const store = new SqliteStore({ path: tempDb() });
    expect(() => idempotent(async function f() { return PLANTED; }, { store, name: SECRET_KEY })).toThrow(/the name "idempotent-tools:key-id-secret" is reserved/);
    expect(() => idempotent(async function f() { return 1; }, { store, name: 'approval:approved:charge' })).toThrow(/names starting with "approval:" are the package's own records/);
  });

  it('a record written at the reserved key by other means is ignored: ids are not made from it, and the CLI does not resolve by it', async () => {
    const path = tempDb();
    const store = new SqliteStore({ path });
    // Planted through the store interface (what a call under the key would have written before).
    const claim = await store.acquire({ key: SECRET_KEY, name: 'plant', fingerprint: 'f'.repeat(64), leaseMs: 30_000, force: false });
    if (!claim.acquired) throw new Error('expected to claim');
    await store.complete({ key: SECRET_KEY, token: claim.token, resultJson: JSON.stringify(PLANTED) });
    const seen: Event[] = [];
    const verify = idempotent(async function verifyPin(pin: string) { return { ok: pin.length === 4 }; }, { store, onEvent: (e) => seen.push(e) });
    await verify('4821');
    // Under the planted secret, the attacker's own HMAC would name the call.
    const { createHmac } = await import('node:crypto');
    const underPlanted = `kid_${createHmac('sha256', PLANTED).update(verify.keyFor('4821')).digest('hex').slice(0, 24)}`;
    expect(JSON.stringify(seen)).not.toContain(underPlanted);
    expect(seen[0].keyId).toMatch(/^kid_[0-9a-f]{24}$/);
    // keyId() says what is wrong instead of making an id from it.
    await expect(keyId(store, verify.keyFor('4821'))).rejects.toThrow(/holds a record that is not the store's keyed-id secret .*it is ignored. Clear it/);
    const lookup = await runNode([CLI, '--db', path, 'inspect', '--key', underPlanted]);
    expect(lookup.code).not.toBe(0);
    await store.close();
  });
});
