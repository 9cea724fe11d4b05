// recordApproval and the approval errors, by their public names (as users import them), on
// every built-in store (a SQLite file, Redis, Postgres) and the MemoryStore: the first
// decision for a call wins, the same decision again is a no-op, another one is refused with
// a clear error; a decision recorded without a turn belongs to the first turn that runs it;
// recording publishes an event on the channel.

import diagnostics_channel from 'node:diagnostics_channel';
import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, collect, lib, tempDb, testing } from './helpers';
import { PG_URL, uniqueTable } from './postgres-server';
import { sharedRedis, uniquePrefix } from './redis-server';

const require = createRequire(import.meta.url);
const pkg: typeof import('../dist/index.js') = require(ROOT);

const redis = await sharedRedis();
afterAll(() => redis.stop());

const stores: Array<[string, () => import('../dist/index.js').Store]> = [
  ['SqliteStore', () => new lib.SqliteStore({ path: tempDb() })],
  ['RedisStore', () => new lib.RedisStore({ url: redis.url, prefix: uniquePrefix() })],
  ['PostgresStore', () => new lib.PostgresStore({ url: PG_URL, table: uniqueTable() })],
  ['MemoryStore', () => new testing.MemoryStore()],
];

describe('the public names', () => {
  it('idempotent-tools exports recordApproval and the approval errors (require and import)', async () => {
    expect(typeof pkg.recordApproval).toBe('function');
    for (const name of ['ApprovalMismatchError', 'ApprovalConflictError', 'ToolCallRejectedError'] as const) {
      expect(new pkg[name]('m')).toBeInstanceOf(pkg.IdempotencyError);
    }
    expect(new pkg.ApprovalMismatchError('m').code).toBe('APPROVAL_MISMATCH');
    const esm = await import(join(ROOT, 'dist', 'index.js'));
    expect(esm.recordApproval).toBe(pkg.recordApproval);
  });
});

for (const [storeName, open] of stores) {
  describe(`recordApproval on ${storeName}`, () => {
    const call = { scope: 'chat-1', toolCallId: 'call_0', toolName: 'charge', turn: 'ai-1' };

    it('the first decision wins; the same one again is a no-op; another is an ApprovalConflictError', async () => {
      const store = open();
      try {
        const first = await pkg.recordApproval(store, { ...call, args: { cents: 5 }, decision: 'approve', by: 'alice' });
        expect(first).toEqual(expect.objectContaining({ decision: 'approve', recorded: true, by: 'alice', toolCallId: 'call_0', turn: 'ai-1', source: 'recordApproval' }));
        expect(first.key.startsWith('approval|charge|call_0|')).toBe(true);
        const again = await pkg.recordApproval(store, { ...call, args: { cents: 5 }, decision: 'approve', by: 'bob' });
        expect(again).toEqual(expect.objectContaining({ recorded: false, by: 'alice', key: first.key }));
        // An edit to the very arguments approved allows the same: one decision.
        expect((await pkg.recordApproval(store, { ...call, args: { cents: 5 }, decision: 'edit' })).recorded).toBe(false);
        await expect(pkg.recordApproval(store, { ...call, decision: 'reject', reason: 'too much' })).rejects.toThrow(pkg.ApprovalConflictError);
        await expect(pkg.recordApproval(store, { ...call, args: { cents: 9 }, decision: 'edit' })).rejects.toThrow(
          /tool "charge" call call_0 already has a decision \(approved by alice\); the first decision stands/,
        );
        const record = await store.get(first.key);
        expect(record).toEqual(expect.objectContaining({ name: 'approval:approved:charge', status: 'completed' }));
        expect(record!.result).toEqual(expect.objectContaining({ decision: 'approve', by: 'alice', scope: 'chat-1' }));
      } finally {
        await store.close();
      }
    });

    it('a rejection is final; another turn (the same call id) has decisions of its own', async () => {
      const store = open();
      try {
        const rejected = await pkg.recordApproval(store, { ...call, decision: 'reject', reason: 'not today' });
        expect(rejected.recorded).toBe(true);
        expect((await store.get(rejected.key))!.name).toBe('approval:rejected:charge');
        await expect(pkg.recordApproval(store, { ...call, args: { cents: 5 }, decision: 'approve' })).rejects.toThrow(/already has a decision \(rejected: "not today"\)/);
        const later = await pkg.recordApproval(store, { ...call, turn: 'ai-2', args: { cents: 5 }, decision: 'approve' });
        expect(later.recorded).toBe(true);
        expect(later.key).not.toBe(rejected.key);
      } finally {
        await store.close();
      }
    });
  });
}

describe('two processes record opposite decisions for one call at once', () => {
  it('exactly one wins; the other gets ApprovalConflictError (a SQLite file)', async () => {
    const db = tempDb();
    const script = `
      const { SqliteStore, recordApproval } = require(${JSON.stringify(ROOT)});
      const store = new SqliteStore({ path: ${JSON.stringify(db)} });
      const decision = process.argv[1];
      process.stdin.once('data', async () => {
        try {
          const r = await recordApproval(store, { scope: 'chat-1', toolCallId: 'call_0', toolName: 'charge', turn: 'ai-1', args: { cents: 5 }, decision });
          console.log('RECORDED ' + r.decision);
        } catch (err) {
          console.log('REFUSED ' + err.code);
        }
        await store.close();
      });
      console.log('READY');
    `;
    const children = ['approve', 'reject'].map((d) => spawn(process.execPath, ['-e', script, d], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] }));
    const done = Promise.all(children.map(collect));
    await Promise.all(children.map((c) => new Promise<void>((r) => c.stdout!.once('data', () => r()))));
    for (const c of children) c.stdin!.end('go\n');
    const outs = (await done).map((f) => (expect(f.stderr).toBe(''), f.stdout.trim().split('\n').at(-1)));
    expect(outs.filter((o) => o!.startsWith('RECORDED'))).toHaveLength(1);
    expect(outs.filter((o) => o === 'REFUSED APPROVAL_CONFLICT')).toHaveLength(1);
    const store = new lib.SqliteStore({ path: db });
    const records = await store.listRecords();
    expect(records).toHaveLength(1);
    expect(outs).toContain(`RECORDED ${(records[0].result as { decision: string }).decision}`);
    await store.close();
  });
});

describe('a decision recorded without a turn', () => {
  it('belongs to the first turn that runs the call: a later turn reusing the id is not covered, and recording for it says to pass turn', async () => {
    const store = new lib.SqliteStore({ path: tempDb() });
    const { idempotentTool } = require(join(ROOT, 'dist', 'integrations', 'ai-sdk.js')) as typeof import('../dist/integrations/ai-sdk.js');
    const charges: unknown[] = [];
    const execute = idempotentTool(async function charge(input: { cents: number }) {
      charges.push(input);
      return 'ok';
    }, { store, scope: 'chat-1' });
    await pkg.recordApproval(store, { scope: 'chat-1', toolCallId: 'call_0', toolName: 'charge', decision: 'reject' });
    // After a greeting: a numbered id in a history that shows no earlier answer is refused (issue 36).
    const turn = (n: number) => [
      { role: 'assistant', content: 'hello' },
      ...Array.from({ length: n }, () => ({ role: 'user', content: 'x' })),
    ];
    // Turn 1 (one message before the call): rejected, does not run.
    await expect(execute({ cents: 5 }, { toolCallId: 'call_0', messages: turn(1) })).rejects.toThrow(pkg.ToolCallRejectedError);
    // Turn 2 reuses call_0 (three messages before it): the rejection was turn 1's.
    await expect(execute({ cents: 5 }, { toolCallId: 'call_0', messages: turn(3) })).resolves.toBe('ok');
    expect(charges).toHaveLength(1);
    await expect(pkg.recordApproval(store, { scope: 'chat-1', toolCallId: 'call_0', toolName: 'charge', args: { cents: 5 }, decision: 'approve' })).rejects.toThrow(/pass "turn"/);
    await store.close();
  });
});

describe('events and bad input', () => {
  it('recording publishes an "approved" / "rejected" event on the idempotent-tools:call channel', async () => {
    const seen: Array<{ type: string; decision?: string; name: string }> = [];
    const onMessage = (e: unknown) => seen.push(e as { type: string; decision?: string; name: string });
    diagnostics_channel.subscribe(pkg.CHANNEL_NAME, onMessage);
    try {
      const store = new lib.SqliteStore({ path: tempDb() });
      await pkg.recordApproval(store, { scope: 's', toolCallId: 'c1', toolName: 'charge', args: {}, decision: 'edit' });
      await pkg.recordApproval(store, { scope: 's', toolCallId: 'c2', toolName: 'charge', decision: 'reject' });
      await pkg.recordApproval(store, { scope: 's', toolCallId: 'c2', toolName: 'charge', decision: 'reject' }); // no-op: no event
      await store.close();
    } finally {
      diagnostics_channel.unsubscribe(pkg.CHANNEL_NAME, onMessage);
    }
    expect(seen.map((e) => [e.type, e.decision, e.name])).toEqual([['edited', 'edit', 'charge'], ['rejected', 'reject', 'charge']]);
  });

  it('bad input is a TypeError that says what to give', async () => {
    const store = new lib.SqliteStore({ path: tempDb() });
    const ok = { scope: 's', toolCallId: 'c', toolName: 't', args: {}, decision: 'approve' as const };
    await expect(pkg.recordApproval(store, { ...ok, scope: '' })).rejects.toThrow(/"scope" is an empty string; give the conversation/);
    await expect(pkg.recordApproval(store, { ...ok, decision: 'maybe' as never })).rejects.toThrow(/"decision" must be "approve", "edit" or "reject"/);
    await expect(pkg.recordApproval(store, { ...ok, args: undefined })).rejects.toThrow(/"args" is required to approve/);
    await expect(pkg.recordApproval(store, { ...ok, args: { n: 1n } })).rejects.toThrow(/"args" cannot be fingerprinted: args\.n is a BigInt/);
    await expect(pkg.recordApproval(store, { ...ok, toolCallId: 7 as never })).rejects.toThrow(/"toolCallId" must be a non-empty string, not number/);
    await expect(pkg.recordApproval(store, { ...ok, approver: 'x' } as never)).rejects.toThrow(/"approver" is not a field/);
    await expect(pkg.recordApproval({} as never, ok)).rejects.toThrow(/store must be a store/);
    await store.close();
  });
});
