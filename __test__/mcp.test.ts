/**
 * `idempotent-tools mcp` with the official SDK's Client over stdio and a counting MCP
 * server of our own: every execution of its tools is a line in a shared log file, so
 * the tests count side effects across proxies, restarts and crashes.
 */

import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';

import { ROOT, lib, lineFrom, runNode, tempDir } from './helpers';
import { RedisServer, sharedRedis, uniquePrefix } from './redis-server';
import { CLI, COUNTING, alive, connect, count, events, text, until, logShows, type Proxied } from './mcp-helpers';

const REPLAYED = 'idempotent-tools/replayed';
const RECORDING = join(ROOT, '__test__', 'fixtures', 'mcp-recording-server.mjs');
const RAW = join(ROOT, '__test__', 'fixtures', 'mcp-raw-server.mjs');

let open: Proxied[] = [];
afterEach(async () => {
  await Promise.allSettled(open.map((p) => p.close()));
  for (const p of open) if (alive(p.pid)) process.kill(p.pid, 'SIGKILL');
  open = [];
});

function setup(extra: string[] = []) {
  const dir = tempDir();
  const db = join(dir, 'store.db');
  const log = join(dir, 'count.log');
  const start = async (more: string[] = []) => {
    const p = await connect({ flags: ['--db', db, ...extra, ...more], env: { COUNT_LOG: log } });
    open.push(p);
    return p;
  };
  const release = () => writeFileSync(`${log}.release`, '');
  return { dir, db, log, start, release };
}

async function records(db: string) {
  const store = new lib.SqliteStore({ path: db });
  try {
    return await store.listRecords();
  } finally {
    await store.close();
  }
}

describe('idempotent-tools mcp (SDK client, counting server)', () => {
  it('a retried call replays the stored result and the server runs it once', async () => {
    const { db, log, start } = setup();
    const p = await start();
    const first = await p.client.callTool({ name: 'act', arguments: { id: 'a' } });
    const again = await p.client.callTool({ name: 'act', arguments: { id: 'a' } });
    expect(count(log, 'start', 'a')).toBe(1);
    expect(first._meta?.[REPLAYED]).toBeUndefined();
    expect(again._meta?.[REPLAYED]).toBe(true);
    const { _meta, ...stored } = again;
    expect(stored).toEqual(first);
    expect(text(again)).toBe('did a (execution 1)');
    // Other arguments are another call.
    await p.client.callTool({ name: 'act', arguments: { id: 'b' } });
    expect(count(log, 'start', 'b')).toBe(1);
    // inspect shows the records under the server's and the tool's name.
    const rs = await records(db);
    expect(rs.map((r) => r.name).sort()).toEqual(['counting/act', 'counting/act']);
    expect(rs.every((r) => r.status === 'completed' && r.expiresAt !== null)).toBe(true);
    const shown = await runNode([CLI, '--db', db, 'inspect']);
    expect(shown.stdout).toContain('counting/act');
    await logShows(p, /executed\s+counting\/act/);
    await logShows(p, /replayed\s+counting\/act/);
    // --log names each call by its keyed id, which inspect resolves; never by the stored
    // key, a hash of the arguments that a reader of the log could reverse (issue 21 item 2).
    const logged = p.stderr();
    for (const r of rs) expect(logged).not.toContain(r.key.slice(0, 12));
    const id = /executed\s+counting\/act\S*\s+(kid_[0-9a-f]{24})/.exec(logged)?.[1];
    expect(id).toBeDefined();
    const found = await runNode([CLI, '--db', db, 'inspect', '--key', id!, '--json']);
    expect(rs.map((r) => r.key)).toContain(JSON.parse(found.stdout).key);
  });

  it("a client's _meta.idempotencyKey is the key; reused for other arguments it is refused", async () => {
    const { log, start } = setup();
    const p = await start();
    const call = (id: string, key: string) =>
      p.client.callTool({ name: 'act', arguments: { id }, _meta: { idempotencyKey: key } });
    await call('k1', 'key-1');
    const again = await call('k1', 'key-1');
    expect(again._meta?.[REPLAYED]).toBe(true);
    expect(count(log, 'start', 'k1')).toBe(1);
    const refused = await call('k2', 'key-1').then(() => null, (e: unknown) => e);
    expect(refused).toBeInstanceOf(McpError);
    expect((refused as McpError).message).toMatch(/already used by a call of "counting\/act" with other arguments/);
    // The guard's own code lies outside MCP's reserved -32020..-32099, in -32000..-32019.
    expect((refused as McpError).code).toBe(-32010);
    expect((refused as McpError).data).toMatchObject({ 'idempotent-tools': 'KEY_MISMATCH' });
    expect(count(log, 'start', 'k2')).toBe(0);
    // SEP-3182's top-level param is honoured too.
    await p.client.request(
      { method: 'tools/call', params: { name: 'act', arguments: { id: 'k3' }, idempotencyKey: 'key-3' } as never },
      (await import('@modelcontextprotocol/sdk/types.js')).CallToolResultSchema,
    );
    await call('k3', 'key-3');
    expect(count(log, 'start', 'k3')).toBe(1);
    const bad = await p.client
      .callTool({ name: 'act', arguments: { id: 'k4' }, _meta: { idempotencyKey: 42 } })
      .then(() => null, (e: unknown) => e);
    expect((bad as McpError).message).toMatch(/idempotencyKey must be a non-empty string/);
    expect(count(log, 'start', 'k4')).toBe(0);
  });

  it('two clients (two proxies, one store) race on one call: one execution, both get its result', async () => {
    const { log, start, release } = setup();
    const [a, b] = await Promise.all([start(), start()]);
    const first = a.client.callTool({ name: 'act', arguments: { id: 'race', hold: true } });
    await until(() => count(log, 'start', 'race') === 1, 'the first call to start');
    const second = b.client.callTool({ name: 'act', arguments: { id: 'race', hold: true } });
    await until(() => /waiting\s+counting\/act/.test(b.stderr()), 'the second proxy to wait for the first call');
    release();
    const [r1, r2] = await Promise.all([first, second]);
    expect(count(log, 'start', 'race')).toBe(1);
    expect(r1._meta?.[REPLAYED]).toBeUndefined();
    expect(r2._meta?.[REPLAYED]).toBe(true);
    expect(r2.structuredContent).toEqual(r1.structuredContent);
  });

  it('with --redis, proxies share the guarantee through Redis (a race, then a replay in a third)', async () => {
    const redis = await sharedRedis();
    const { log, release } = setup();
    const flags = ['--redis', redis.url, '--prefix', uniquePrefix()];
    const [a, b] = await Promise.all([
      connect({ flags, env: { COUNT_LOG: log } }),
      connect({ flags, env: { COUNT_LOG: log } }),
    ]);
    open.push(a, b);
    const first = a.client.callTool({ name: 'act', arguments: { id: 'redis', hold: true } });
    await until(() => count(log, 'start', 'redis') === 1, 'the first call to start');
    const second = b.client.callTool({ name: 'act', arguments: { id: 'redis', hold: true } });
    await until(() => /waiting\s+counting\/act/.test(b.stderr()), 'the second proxy to wait');
    release();
    const [r1, r2] = await Promise.all([first, second]);
    expect(r2._meta?.[REPLAYED]).toBe(true);
    expect(r2.structuredContent).toEqual(r1.structuredContent);
    const c = await connect({ flags, env: { COUNT_LOG: log } });
    open.push(c);
    expect((await c.client.callTool({ name: 'act', arguments: { id: 'redis', hold: true } }))._meta?.[REPLAYED]).toBe(true);
    expect(count(log, 'start', 'redis')).toBe(1);
    await redis.stop();
  });

  it("keys are scoped by the server's command line, unless the config names the server", async () => {
    const { db, dir, log } = setup();
    const otherPath = `${ROOT}/__test__/fixtures/../fixtures/mcp-counting-server.mjs`; // same server, other text
    const proxy = async (server: string[], more: string[] = []) => {
      const p = await connect({ flags: ['--db', db, ...more], server, env: { COUNT_LOG: log } });
      open.push(p);
      return p;
    };
    const call = (p: Proxied, id: string) => p.client.callTool({ name: 'act', arguments: { id } });
    const a = await proxy([process.execPath, COUNTING]);
    const b = await proxy([process.execPath, otherPath]);
    await call(a, 'scoped');
    expect((await call(b, 'scoped'))._meta?.[REPLAYED]).toBeUndefined();
    expect(count(log, 'start', 'scoped')).toBe(2);

    const configFile = join(dir, 'named.json');
    writeFileSync(configFile, JSON.stringify({ server: 'counter' }));
    const c = await proxy([process.execPath, COUNTING], ['--config', configFile]);
    const d = await proxy([process.execPath, otherPath], ['--config', configFile]);
    await call(c, 'named');
    expect((await call(d, 'named'))._meta?.[REPLAYED]).toBe(true);
    expect(count(log, 'start', 'named')).toBe(1);
    expect((await records(db)).map((r) => r.name)).toContain('counter/act');
  });

  it('two configurations of one server (another env, another cwd) never share records; a config "server" shares on purpose', async () => {
    const { db, dir, log } = setup();
    const proxy = async (env: Record<string, string>, cwd?: string, more: string[] = []) => {
      const p = await connect({ flags: ['--db', db, ...more], env: { COUNT_LOG: log, ...env }, cwd });
      open.push(p);
      return p;
    };
    const call = (p: Proxied, id: string) => p.client.callTool({ name: 'act', arguments: { id } });
    const a = await proxy({ ACCOUNT_TOKEN: 'secret-of-a' });
    const b = await proxy({ ACCOUNT_TOKEN: 'secret-of-b' });
    await call(a, 'issue');
    expect((await call(b, 'issue'))._meta?.[REPLAYED]).toBeUndefined();
    expect(count(log, 'start', 'issue')).toBe(2);
    // Account A's configuration in another folder is another configuration too.
    const elsewhere = await proxy({ ACCOUNT_TOKEN: 'secret-of-a' }, dir);
    expect((await call(elsewhere, 'issue'))._meta?.[REPLAYED]).toBeUndefined();
    expect(count(log, 'start', 'issue')).toBe(3);
    // The same configuration again (a restarted proxy, another editor window: variables
    // set per session are not configuration) is the same server.
    const again = await proxy({ ACCOUNT_TOKEN: 'secret-of-a', VSCODE_PID: '4242', TERM_SESSION_ID: 'w2', SHLVL: '9' });
    expect((await call(again, 'issue'))._meta?.[REPLAYED]).toBe(true);
    await logShows(again, /server identity: cmd:[0-9a-f]{12}/);
    expect(count(log, 'start', 'issue')).toBe(3);

    const configFile = join(dir, 'shared.json');
    writeFileSync(configFile, JSON.stringify({ server: 'counter' }));
    const c = await proxy({ ACCOUNT_TOKEN: 'secret-of-a' }, undefined, ['--config', configFile]);
    const d = await proxy({ ACCOUNT_TOKEN: 'secret-of-b' }, dir, ['--config', configFile]);
    await call(c, 'shared');
    expect((await call(d, 'shared'))._meta?.[REPLAYED]).toBe(true);
    expect(count(log, 'start', 'shared')).toBe(1);
    // The identity is a digest: no record holds the environment's values.
    expect(JSON.stringify(await records(db))).not.toContain('secret-of');
  });

  it('a config "keyPath" takes the key from inside the arguments (UCP meta["idempotency-key"]), left out of the fingerprint', async () => {
    const { dir, log, start } = setup();
    const configFile = join(dir, 'ucp.json');
    writeFileSync(configFile, JSON.stringify({ tools: { act: { keyPath: ['meta', 'idempotency-key'] } } }));
    const p = await start(['--config', configFile]);
    const call = (id: string, key: unknown) => p.client.callTool({ name: 'act', arguments: { id, meta: { 'idempotency-key': key } } });
    expect(text(await call('order-1', 'k-1'))).toBe('did order-1 (execution 1)');
    expect((await call('order-1', 'k-1'))._meta?.[REPLAYED]).toBe(true);
    // A new key is a new call, whatever the other arguments.
    expect((await call('order-1', 'k-2'))._meta?.[REPLAYED]).toBeUndefined();
    expect(count(log, 'start', 'order-1')).toBe(2);
    // The key reused with other arguments is refused: it neither runs nor replays.
    const refused = await call('order-2', 'k-1').then(() => null, (e: unknown) => e);
    expect((refused as McpError).code).toBe(-32010);
    expect((refused as McpError).data).toMatchObject({ 'idempotent-tools': 'KEY_MISMATCH' });
    expect(count(log, 'start', 'order-2')).toBe(0);
    // A key that is not a non-empty string is refused with a message that names where.
    const bad = await call('order-3', 7).then(() => null, (e: unknown) => e);
    expect((bad as McpError).code).toBe(-32602);
    expect((bad as McpError).message).toMatch(/arguments\.meta\["idempotency-key"\] must be a non-empty string/);
    expect(count(log, 'start', 'order-3')).toBe(0);
    // Without the key in its arguments, the call is keyed on its arguments as usual.
    await p.client.callTool({ name: 'act', arguments: { id: 'order-4' } });
    expect((await p.client.callTool({ name: 'act', arguments: { id: 'order-4' } }))._meta?.[REPLAYED]).toBe(true);
    // A keyPath that is not a list of names stops the proxy with a clear message.
    writeFileSync(configFile, JSON.stringify({ tools: { act: { keyPath: 'meta.idempotency-key' } } }));
    const wrong = await runNode([CLI, 'mcp', '--config', configFile, '--', process.execPath, COUNTING]);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(/tools\["act"\]\.keyPath must be a list of property names, such as \["meta", "idempotency-key"\]/);
  });

  it('the first call keeps its progress notifications while a duplicate waits', async () => {
    const { log, start, release } = setup();
    const p = await start();
    const progress: number[] = [];
    const first = p.client.callTool({ name: 'act', arguments: { id: 'prog', progress: 3, hold: true } }, undefined, {
      onprogress: (n) => progress.push(n.progress),
    });
    await until(() => progress.length === 3, 'three progress notifications');
    const duplicate = p.client.callTool({ name: 'act', arguments: { id: 'prog', progress: 3, hold: true } });
    await until(() => /waiting\s+counting\/act/.test(p.stderr()), 'the duplicate to wait');
    release();
    const [r1, r2] = await Promise.all([first, duplicate]);
    expect(progress).toEqual([1, 2, 3]);
    expect(r2._meta?.[REPLAYED]).toBe(true);
    expect(text(r2)).toBe(text(r1));
    expect(count(log, 'start', 'prog')).toBe(1);
  });

  it('the proxy killed and restarted between a call and its retry: the retry replays', async () => {
    const { log, start } = setup();
    const p1 = await start();
    const first = await p1.client.callTool({ name: 'act', arguments: { id: 'kill' } });
    const serverPid = events(log).find((e) => e.event === 'start' && e.id === 'kill')!.pid;
    process.kill(p1.pid, 'SIGKILL');
    await until(() => !alive(p1.pid), 'the proxy to die');
    const p2 = await start();
    const retry = await p2.client.callTool({ name: 'act', arguments: { id: 'kill' } });
    expect(retry._meta?.[REPLAYED]).toBe(true);
    expect(retry.structuredContent).toEqual(first.structuredContent);
    expect(count(log, 'start', 'kill')).toBe(1);
    // The orphaned server of the killed proxy sees its stdin close and exits.
    await until(() => !alive(serverPid), 'the killed proxy\'s server to exit');
  });

  it('the proxy killed during a call: after the lease, the retry runs it again (attempt 2)', async () => {
    const { db, log, start, release } = setup();
    const configFile = join(setup().dir, 'lease.json');
    writeFileSync(configFile, JSON.stringify({ lease: '1s' }));
    const p1 = await start(['--config', configFile]);
    void p1.client.callTool({ name: 'act', arguments: { id: 'mid', hold: true } }).catch(() => {});
    await until(() => count(log, 'start', 'mid') === 1, 'the call to start');
    process.kill(p1.pid, 'SIGKILL');
    release();
    const p2 = await start(['--config', configFile]);
    const retry = await p2.client.callTool({ name: 'act', arguments: { id: 'mid', hold: true } });
    expect(retry._meta?.[REPLAYED]).toBeUndefined();
    expect(count(log, 'start', 'mid')).toBe(2);
    const [record] = (await records(db)).filter((r) => r.name === 'counting/act');
    expect(record.attempts).toBe(2);
  });

  it('the upstream server crashing answers every call in flight with a clear error, and the proxy exits', async () => {
    const { db, log, start } = setup();
    const p = await start();
    let closed = false;
    p.client.onclose = () => (closed = true);
    const failure = (e: unknown) => e;
    const held = p.client.callTool({ name: 'act', arguments: { id: 'held', hold: true } }).then(() => null, failure);
    await until(() => count(log, 'start', 'held') === 1, 'the held call to start');
    const waiting = p.client.callTool({ name: 'act', arguments: { id: 'held', hold: true } }).then(() => null, failure);
    await until(() => /waiting\s+counting\/act/.test(p.stderr()), 'the duplicate to wait');
    const err = await p.client.callTool({ name: 'act', arguments: { id: 'boom', crash: true } }).then(() => null, failure);
    const clear = /the MCP server \(.*mcp-counting-server\.mjs\) exited or closed its connection/;
    expect((err as McpError).message).toMatch(clear);
    expect(((await held) as McpError).message).toMatch(clear);
    expect(((await waiting) as McpError).message).toMatch(clear);
    await until(() => closed && !alive(p.pid), 'the proxy to exit');
    await logShows(p, /exited or closed its connection/);
    // Their answers were lost: whether they took effect is unknown, so never `failed`.
    expect((await records(db)).map((r) => r.status)).toEqual(['pending', 'pending']);
  });

  it('closing the client closes the server', async () => {
    const { log, start } = setup();
    const p = await start();
    await p.client.callTool({ name: 'look', arguments: { id: 'x' } });
    const serverPid = events(log).find((e) => e.event === 'look')!.pid;
    await p.close();
    await until(() => !alive(serverPid) && !alive(p.pid), 'the server and the proxy to exit');
  });

  it('read-only and idempotentHint tools pass through; a config rule can guard them', async () => {
    const { db, log, start, dir } = setup();
    const p = await start();
    await p.client.callTool({ name: 'look', arguments: { id: 'r' } });
    const again = await p.client.callTool({ name: 'look', arguments: { id: 'r' } });
    expect(again._meta?.[REPLAYED]).toBeUndefined();
    expect(count(log, 'look', 'r')).toBe(2);
    await p.client.callTool({ name: 'put', arguments: { id: 'p' } });
    await p.client.callTool({ name: 'put', arguments: { id: 'p' } });
    expect(count(log, 'start', 'p')).toBe(2);
    expect(await records(db)).toEqual([]);
    await logShows(p, /passed\s+counting\/look\s+\(readOnlyHint\)/);
    await logShows(p, /passed\s+counting\/put\s+\(idempotentHint\)/);

    const configFile = join(dir, 'guard.json');
    writeFileSync(configFile, JSON.stringify({ tools: { 'p*': { guard: true }, act: { guard: false } } }));
    const q = await start(['--config', configFile]);
    await q.client.callTool({ name: 'put', arguments: { id: 'q' } });
    expect((await q.client.callTool({ name: 'put', arguments: { id: 'q' } }))._meta?.[REPLAYED]).toBe(true);
    expect(count(log, 'start', 'q')).toBe(1);
    await q.client.callTool({ name: 'act', arguments: { id: 'unguarded' } });
    await q.client.callTool({ name: 'act', arguments: { id: 'unguarded' } });
    expect(count(log, 'start', 'unguarded')).toBe(2);
  });

  it('after the window, the same call is new work', async () => {
    const { db, log, start } = setup(['--window', '2s']);
    const p = await start();
    await p.client.callTool({ name: 'act', arguments: { id: 'w' } });
    expect((await p.client.callTool({ name: 'act', arguments: { id: 'w' } }))._meta?.[REPLAYED]).toBe(true);
    const [record] = await records(db);
    // A real wait: the window is the thing under test.
    await until(() => Date.now() > record.expiresAt! + 10, 'the window to pass', 10_000);
    const later = await p.client.callTool({ name: 'act', arguments: { id: 'w' } });
    expect(later._meta?.[REPLAYED]).toBeUndefined();
    expect(text(later)).toBe('did w (execution 2)');
    expect(count(log, 'start', 'w')).toBe(2);
  });

  it('the proxy prunes what its window has expired, on start: the results are gone from the store, live ones stay', async () => {
    const { db, start } = setup();
    // The record that stays first: each proxy prunes on start, this one before `old` exists.
    const long = await start();
    await long.client.callTool({ name: 'act', arguments: { id: 'kept' } });
    await long.close();
    const short = await start(['--window', '1s']);
    await short.client.callTool({ name: 'act', arguments: { id: 'old' } });
    await short.close();
    const [old] = (await records(db)).sort((a, b) => a.expiresAt! - b.expiresAt!);
    // A real wait: the window is the thing under test.
    await until(() => Date.now() > old.expiresAt! + 10, 'the short window to pass', 10_000);
    const later = await start();
    // The SQLite store itself deletes expired records when it opens (issue 21), so the proxy's
    // first pass may find the record gone already: either way it is gone once it has run.
    await logShows(later, /pruned [01] expired record/);
    const left = await records(db);
    expect(left).toHaveLength(1);
    expect(left[0].key).not.toBe(old.key);
    expect(JSON.stringify(left)).not.toContain('did old');
  });

  it('isError results: a failure that runs again by default; replayed under isError: "replay"', async () => {
    const { dir, log, start } = setup();
    const p = await start();
    const r1 = await p.client.callTool({ name: 'act', arguments: { id: 'e', fail: true } });
    const r2 = await p.client.callTool({ name: 'act', arguments: { id: 'e', fail: true } });
    expect(r1.isError).toBe(true);
    expect(r2.isError).toBe(true);
    expect(r2._meta?.[REPLAYED]).toBeUndefined();
    expect(count(log, 'start', 'e')).toBe(2);
    await logShows(p, /isError\s+counting\/act.*a retry runs again/);

    const configFile = join(dir, 'errors.json');
    writeFileSync(configFile, JSON.stringify({ tools: { act: { isError: 'replay' } } }));
    const q = await start(['--config', configFile]);
    const s1 = await q.client.callTool({ name: 'act', arguments: { id: 'e2', fail: true } });
    const s2 = await q.client.callTool({ name: 'act', arguments: { id: 'e2', fail: true } });
    expect(s2.isError).toBe(true);
    expect(s2._meta?.[REPLAYED]).toBe(true);
    expect(s2.content).toEqual(s1.content);
    expect(count(log, 'start', 'e2')).toBe(1);
  });

  it("the SDK client's own timeout is not forwarded: the call finishes upstream, is recorded, and the retry joins it", async () => {
    const { db, log, start, release } = setup();
    const p = await start();
    // The SDK client sends notifications/cancelled when its request timeout fires.
    const timedOut = p.client
      .callTool({ name: 'act', arguments: { id: 't', hold: true } }, undefined, { timeout: 300 })
      .then(() => null, (e: unknown) => e);
    await until(() => count(log, 'start', 't') === 1, 'the call to start upstream');
    expect(((await timedOut) as McpError).message).toMatch(/timed out/i);
    await logShows(p, /cancelled\s+counting\/act\s.*not forwarded/);
    // The model's retry, while the first call still runs upstream: it waits for it.
    const retry = p.client.callTool({ name: 'act', arguments: { id: 't', hold: true } });
    await until(() => /waiting\s+counting\/act/.test(p.stderr()), 'the retry to wait for the first call');
    release();
    const result = await retry;
    expect(result._meta?.[REPLAYED]).toBe(true);
    expect(text(result)).toBe('did t (execution 1)');
    expect(count(log, 'start', 't')).toBe(1);
    expect(count(log, 'done', 't')).toBe(1);
    expect(count(log, 'cancelled', 't')).toBe(0);
    const [record] = await records(db);
    expect(record.status).toBe('completed');
  });

  it('an AbortSignal cancel is not forwarded either: the result is recorded when it arrives, and the retry replays it', async () => {
    const { db, log, start, release } = setup();
    const p = await start();
    const abort = new AbortController();
    const cancelled = p.client
      .callTool({ name: 'act', arguments: { id: 'c', hold: true } }, undefined, { signal: abort.signal })
      .then(() => null, (e: unknown) => e);
    await until(() => count(log, 'start', 'c') === 1, 'the call to start');
    abort.abort('the user pressed stop');
    expect(await cancelled).not.toBeNull();
    await logShows(p, /cancelled\s+counting\/act\s.*not forwarded/);
    release();
    await until(() => count(log, 'done', 'c') === 1, 'the server to finish the call');
    await logShows(p, /executed\s+counting\/act.*its client had cancelled/);
    const [record] = await records(db);
    expect(record.status).toBe('completed');
    const retry = await p.client.callTool({ name: 'act', arguments: { id: 'c', hold: true } });
    expect(retry._meta?.[REPLAYED]).toBe(true);
    expect(text(retry)).toBe('did c (execution 1)');
    expect(count(log, 'start', 'c')).toBe(1);
    expect(count(log, 'cancelled', 'c')).toBe(0);
  });

  it('a client that cancels and leaves: the proxy lets the call finish and records it before it exits', async () => {
    const { db, log, release } = setup();
    const child = spawn(process.execPath, [CLI, 'mcp', '--db', db, '--', process.execPath, COUNTING], {
      env: { ...process.env, COUNT_LOG: log },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const send = (m: object) => child.stdin!.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n');
    send({ id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
    await lineFrom(child, /"id":1\b/);
    send({ method: 'notifications/initialized' });
    send({ id: 2, method: 'tools/call', params: { name: 'act', arguments: { id: 'left', hold: true } } });
    await until(() => count(log, 'start', 'left') === 1, 'the call to start');
    send({ method: 'notifications/cancelled', params: { requestId: 2, reason: 'the user closed the window' } });
    child.stdin!.end();
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    release();
    await new Promise((r) => child.on('close', r));
    expect(count(log, 'done', 'left')).toBe(1);
    expect(count(log, 'cancelled', 'left')).toBe(0);
    expect(out).not.toMatch(/"id":2\b/); // the client gave up: no answer
    const [record] = await records(db);
    expect(record.status).toBe('completed');
  });

  it('an upstream error after a cancel is recorded as failed, and the retry runs again', async () => {
    const { db, log, start, release } = setup();
    const p = await start();
    const abort = new AbortController();
    const cancelled = p.client
      .callTool({ name: 'act', arguments: { id: 'cf', hold: true, fail: true } }, undefined, { signal: abort.signal })
      .then(() => null, (e: unknown) => e);
    await until(() => count(log, 'start', 'cf') === 1, 'the call to start');
    abort.abort();
    await cancelled;
    await logShows(p, /cancelled\s+counting\/act/);
    release();
    await logShows(p, /isError\s+counting\/act/);
    expect((await records(db))[0].status).toBe('failed');
    await p.client.callTool({ name: 'act', arguments: { id: 'cf', hold: true, fail: true } });
    expect(count(log, 'start', 'cf')).toBe(2);
  });

  it('with "cancel": "forward" the server sees the cancel; the outcome is unknown: pending until the lease, then the retry runs', async () => {
    const { db, dir, log, start, release } = setup();
    const configFile = join(dir, 'forward.json');
    writeFileSync(configFile, JSON.stringify({ tools: { act: { cancel: 'forward', lease: '1s' } } }));
    const p = await start(['--config', configFile]);
    const abort = new AbortController();
    const cancelled = p.client
      .callTool({ name: 'act', arguments: { id: 'fw', hold: true } }, undefined, { signal: abort.signal })
      .then(() => null, (e: unknown) => e);
    await until(() => count(log, 'start', 'fw') === 1, 'the call to start');
    abort.abort('the user pressed stop');
    expect(await cancelled).not.toBeNull();
    await until(() => count(log, 'cancelled', 'fw') === 1, 'the server to see the cancellation');
    await logShows(p, /unknown\s+counting\/act.*pending/);
    const [record] = await records(db);
    expect(record.status).toBe('pending');
    release();
    // After the lease, the retry takes the call over and runs it again (attempt 2).
    const retry = await p.client.callTool({ name: 'act', arguments: { id: 'fw', hold: true } });
    expect(retry._meta?.[REPLAYED]).toBeUndefined();
    expect(count(log, 'start', 'fw')).toBe(2);
    const [after] = await records(db);
    expect(after.status).toBe('completed');
    expect(after.attempts).toBe(2);
  });

  it('a result of several MB is stored and replayed whole', async () => {
    const { log, start } = setup();
    const p = await start();
    const size = 6 * 1024 * 1024;
    const first = await p.client.callTool({ name: 'act', arguments: { id: 'big', size } });
    const again = await p.client.callTool({ name: 'act', arguments: { id: 'big', size } });
    expect(text(first).length).toBe(size);
    expect(again._meta?.[REPLAYED]).toBe(true);
    expect(text(again)).toBe(text(first));
    expect(count(log, 'start', 'big')).toBe(1);
  });

  it("a result above the SDK's old 10 MB limit goes through, is stored once and replayed whole", async () => {
    const { dir, log } = setup();
    // The client must read it too: the SDK client's own default limit is 10 MB.
    const p = await connect({ flags: ['--db', join(dir, 'store.db')], env: { COUNT_LOG: log }, maxBufferSize: 64 * 1024 * 1024 });
    open.push(p);
    const size = 12 * 1024 * 1024;
    const first = await p.client.callTool({ name: 'act', arguments: { id: 'huge', size } });
    const again = await p.client.callTool({ name: 'act', arguments: { id: 'huge', size } });
    expect(text(first).length).toBe(size);
    expect(again._meta?.[REPLAYED]).toBe(true);
    expect(text(again).length).toBe(size);
    expect(count(log, 'start', 'huge')).toBe(1);
    expect(events(log).filter((e) => e.event === 'up')).toHaveLength(1);
  });

  it('an answer over --max-message is lost, not the session: a clear error, the record stays pending (never failed), the proxy goes on', async () => {
    const { db, log, start } = setup(['--max-message', '1mb']);
    const p = await start();
    const lost = await p.client
      .callTool({ name: 'act', arguments: { id: 'over', size: 2 * 1024 * 1024 } })
      .then(() => null, (e: unknown) => e);
    expect(lost).toBeInstanceOf(McpError);
    expect((lost as McpError).code).toBe(-32010);
    expect((lost as McpError).data).toMatchObject({ 'idempotent-tools': 'OUTCOME_UNKNOWN' });
    expect((lost as McpError).message).toMatch(/over the proxy's limit of 1\.0 MB.*unknown/);
    expect(count(log, 'done', 'over')).toBe(1);
    const [record] = await records(db);
    expect(record.status).toBe('pending');
    // A request over the limit from the client is refused before anything runs.
    const big = await p.client
      .callTool({ name: 'act', arguments: { id: 'too-big', pad: 'y'.repeat(2 * 1024 * 1024) } })
      .then(() => null, (e: unknown) => e);
    expect((big as McpError).code).toBe(-32600);
    expect((big as McpError).message).toMatch(/from the client, over the proxy's limit of 1\.0 MB per message.*nothing was run/);
    expect(count(log, 'start', 'too-big')).toBe(0);
    // The same server and the same proxy go on.
    expect(text(await p.client.callTool({ name: 'act', arguments: { id: 'after' } }))).toBe('did after (execution 1)');
    expect(events(log).filter((e) => e.event === 'up')).toHaveLength(1);
    expect(alive(p.pid)).toBe(true);
  });

  it('store URLs come from the environment, out of argv; --log names the store in use, its password masked', async () => {
    const redis = await RedisServer.start(['--requirepass', 'pw-secret']);
    try {
      const { dir, log } = setup();
      const url = `redis://:pw-secret@127.0.0.1:${redis.port}`;
      const proxy = async (env: Record<string, string>) => {
        const p = await connect({ flags: [], env: { COUNT_LOG: log, ...env } });
        open.push(p);
        return p;
      };
      const call = (p: Proxied) => p.client.callTool({ name: 'act', arguments: { id: 'env' } });
      const a = await proxy({ IDEMPOTENT_TOOLS_REDIS_URL: url, IDEMPOTENT_TOOLS_DB: join(dir, 'a.db') });
      await logShows(a, new RegExp(`store: Redis redis://:\\*\\*\\*@127\\.0\\.0\\.1:${redis.port}`));
      await call(a);
      // Another proxy on the same Redis (another SQLite default) replays: the store is Redis.
      const b = await proxy({ IDEMPOTENT_TOOLS_REDIS_URL: url, IDEMPOTENT_TOOLS_DB: join(dir, 'b.db') });
      expect((await call(b))._meta?.[REPLAYED]).toBe(true);
      expect(count(log, 'start', 'env')).toBe(1);
      expect(a.stderr() + b.stderr()).not.toContain('pw-secret');
      // IDEMPOTENT_TOOLS_DB alone: that SQLite file, where this call is new.
      const c = await proxy({ IDEMPOTENT_TOOLS_DB: join(dir, 'c.db') });
      await logShows(c, new RegExp(`store: SQLite ${join(dir, 'c.db').replace(/[.\\/]/g, '\\$&')}`));
      expect((await call(c))._meta?.[REPLAYED]).toBeUndefined();
      expect(await records(join(dir, 'c.db'))).toHaveLength(1);
      // Two URLs in the environment and no flag: which one is meant is not guessed.
      const both = await runNode([CLI, 'mcp', '--', process.execPath, COUNTING], {
        env: { IDEMPOTENT_TOOLS_REDIS_URL: url, IDEMPOTENT_TOOLS_POSTGRES_URL: 'postgres://u:pw-secret@127.0.0.1/db' },
      });
      expect(both.code).toBe(2);
      expect(both.stderr).toMatch(/both IDEMPOTENT_TOOLS_REDIS_URL and IDEMPOTENT_TOOLS_POSTGRES_URL are set/);
      expect(both.stderr).not.toContain('pw-secret');
    } finally {
      await redis.kill();
    }
  });

  it('IDEMPOTENT_TOOLS_POSTGRES_URL stands for --postgres', async () => {
    const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
    const { log } = setup();
    const p = await connect({ flags: [], env: { COUNT_LOG: log, IDEMPOTENT_TOOLS_POSTGRES_URL: url } });
    open.push(p);
    await logShows(p, /store: Postgres postgres:\/\//);
    const id = `pg-env-${process.pid}-${Date.now()}`;
    await p.client.callTool({ name: 'act', arguments: { id } });
    expect((await p.client.callTool({ name: 'act', arguments: { id } }))._meta?.[REPLAYED]).toBe(true);
    expect(count(log, 'start', id)).toBe(1);
  });

  it('--postgres: the Postgres store once the package has one, else a clear refusal', async () => {
    const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
    const table = `mcp_test_${process.pid}_${Date.now()}`;
    if (typeof (lib as Record<string, unknown>).PostgresStore !== 'function') {
      const refused = await runNode([CLI, 'mcp', '--postgres', url, '--', 'node', COUNTING]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/--postgres needs a version of idempotent-tools with PostgresStore/);
      return;
    }
    const { log } = setup();
    const p = await connect({ flags: ['--postgres', url, '--table', table], env: { COUNT_LOG: log } });
    open.push(p);
    await p.client.callTool({ name: 'act', arguments: { id: 'pg' } });
    expect((await p.client.callTool({ name: 'act', arguments: { id: 'pg' } }))._meta?.[REPLAYED]).toBe(true);
    expect(count(log, 'start', 'pg')).toBe(1);
  });

  it('messages keep their order through the proxy (initialized after initialize, in one write)', async () => {
    const dir = tempDir();
    const record = join(dir, 'record.txt');
    const child = spawn(process.execPath, [CLI, 'mcp', '--db', join(dir, 'store.db'), '--', process.execPath, RECORDING], {
      env: { ...process.env, RECORD: record },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const init = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } };
    child.stdin!.write(
      [
        { jsonrpc: '2.0', id: 1, method: 'initialize', params: init },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} },
        { jsonrpc: '2.0', method: 'notifications/roots/list_changed' },
      ]
        .map((m) => JSON.stringify(m) + '\n')
        .join(''),
    );
    await lineFrom(child, /"id":2/);
    child.stdin!.end();
    await new Promise((r) => child.on('close', r));
    expect(readFileSync(record, 'utf8').trim().split('\n')).toEqual([
      'initialize',
      'notifications/initialized',
      'tools/list',
      'notifications/roots/list_changed',
    ]);
  });

  it('numbers pass exactly both ways (1790000000000000001), and key two distinct numbers as two calls', async () => {
    const dir = tempDir();
    const record = join(dir, 'record.txt');
    const child = spawn(process.execPath, [CLI, 'mcp', '--db', join(dir, 'store.db'), '--', process.execPath, RAW], {
      env: { ...process.env, RECORD: record },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    // Raw lines: a JavaScript client could not even write these numbers.
    const send = (line: string) => child.stdin!.write(line + '\n');
    const init = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } };
    send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: init }));
    await lineFrom(child, /"id":1\b/);
    send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    const calls = () => (existsSync(record) ? readFileSync(record, 'utf8').trim().split('\n').filter(Boolean) : []);
    const call = async (id: number, args: string, meta = '') => {
      send(`{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"act","arguments":${args}${meta}}}`);
      return lineFrom(child, new RegExp(`"id":${id}\\b`));
    };
    // The server gets the number the client sent, and the client the server's.
    const first = await call(2, '{"order":1790000000000000001,"f":0.1}');
    expect(calls()).toHaveLength(1);
    expect(calls()[0]).toContain('"order":1790000000000000001,');
    expect(first).toContain('"echo":{"order":1790000000000000001,"f":0.1}');
    expect(first).toContain('"big":1790000000000000003');
    // Another number is another call; the same number (however written) is a replay, exact.
    await call(3, '{"order":1790000000000000002,"f":0.1}');
    expect(calls()).toHaveLength(2);
    expect(calls()[1]).toContain('"order":1790000000000000002,');
    const replay = await call(4, '{"order":1.790000000000000001e18,"f":0.1}');
    expect(calls()).toHaveLength(2);
    expect(replay).toContain('"idempotent-tools/replayed":true');
    expect(replay).toContain('"echo":{"order":1790000000000000001,"f":0.1}');
    expect(replay).toContain('"big":1790000000000000003');
    // A string that looks like the proxy's own placeholder is refused, never sent as a number.
    const forged = JSON.parse(await call(5, '{"order":"\\u0000idempotent-tools:number:5"}'));
    expect(forged.error.code).toBe(-32602);
    expect(forged.error.message).toMatch(/not passed on/);
    // A number is no idempotency key, however large.
    const numberKey = JSON.parse(await call(6, '{"order":7}', ',"_meta":{"idempotencyKey":1790000000000000001}'));
    expect(numberKey.error.message).toMatch(/idempotencyKey must be a non-empty string \(the call's idempotency key\), not 1790000000000000001/);
    expect(calls()).toHaveLength(2);
    child.stdin!.end();
    await new Promise((r) => child.on('close', r));
  });

  it('over --url, the numbers of a request reach the server exactly too', async () => {
    const dir = tempDir();
    const record = join(dir, 'record.txt');
    const portFile = join(dir, 'port');
    const server = spawn(process.execPath, [RAW, 'http'], { env: { ...process.env, RECORD: record, PORT_FILE: portFile }, stdio: 'ignore' });
    try {
      await until(() => existsSync(portFile) && readFileSync(portFile, 'utf8').length > 0, 'the HTTP server to listen');
      const url = `http://127.0.0.1:${readFileSync(portFile, 'utf8')}/mcp`;
      const child = spawn(process.execPath, [CLI, 'mcp', '--db', join(dir, 'store.db'), '--url', url], { stdio: ['pipe', 'pipe', 'inherit'] });
      const send = (line: string) => child.stdin!.write(line + '\n');
      const init = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } };
      send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: init }));
      await lineFrom(child, /"id":1\b/);
      send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"act","arguments":{"order":1790000000000000001}}}');
      await lineFrom(child, /"id":2\b/);
      expect(readFileSync(record, 'utf8')).toContain('"order":1790000000000000001}');
      child.stdin!.end();
      await new Promise((r) => child.on('close', r));
    } finally {
      server.kill();
    }
  });

  it('examples/mcp runs offline, and its config files are valid', async () => {
    const example = await runNode(['examples/mcp/index.mjs']);
    expect(example.stderr).toMatch(/replayed\s+email\/send_email/);
    expect(example.stdout).toContain('One email sent; the retry was a replay.');
    expect(example.code).toBe(0);
    // The proxy ships as one bundle (dist/apps/mcp/cli.js); its config reader is read from the source.
    const policy = await import('../lib/apps/mcp/policy');
    const config = policy.loadConfig({ file: join(ROOT, 'examples', 'mcp', 'github.json') });
    expect(policy.policyFor(config, 'search_code', undefined).guard).toBe(false);
    expect(policy.policyFor(config, 'create_issue', undefined).windowMs).toBe(3_600_000);
    for (const f of ['claude_desktop_config.json', 'cursor-mcp.json']) {
      const servers = JSON.parse(readFileSync(join(ROOT, 'examples', 'mcp', f), 'utf8')).mcpServers;
      for (const s of Object.values(servers) as Array<{ args: string[] }>) {
        expect(s.args.slice(0, 4)).toEqual(['-y', 'idempotent-tools', 'mcp', s.args[3]]);
        expect(s.args).toContain('--');
      }
    }
  });

  it('--log escapes control characters: a tool name or an error cannot drive the terminal', async () => {
    const { start } = setup();
    const p = await start();
    const name = 'act\u001b]0;pwned\u0007\u009b2J';
    await p.client.callTool({ name, arguments: { id: 'x' } }).catch(() => {});
    await logShows(p, /counting\/act\\x1b\]0;pwned\\x07\\x9b2J/);
    expect(p.stderr()).not.toMatch(/[\u001b\u0007\u009b]/);
  });

  it('bad command lines and config files are refused with a clear message', async () => {
    const dir = tempDir();
    const none = await runNode([CLI, 'mcp']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/no MCP server given/);
    const window = await runNode([CLI, 'mcp', '--window', 'soon', '--', 'node', COUNTING]);
    expect(window.code).toBe(2);
    expect(window.stderr).toMatch(/--window must be a duration such as 30s, 10m, 2h or 1d, not "soon"/);
    const configFile = join(dir, 'bad.json');
    writeFileSync(configFile, JSON.stringify({ tools: { act: { onDuplicate: 'wait' } } }));
    const config = await runNode([CLI, 'mcp', '--config', configFile, '--', 'node', COUNTING]);
    expect(config.code).toBe(2);
    expect(config.stderr).toMatch(/tools\["act"\]\.onDuplicate must be "block", "raise" or "retry", not "wait"/);
    const two = await runNode([CLI, 'mcp', '--db', join(dir, 'a.db'), '--redis', 'redis://127.0.0.1:1', '--', 'node', COUNTING]);
    expect(two.code).toBe(2);
    expect(two.stderr).toMatch(/give one store, not --db and --redis/);
    const prefix = await runNode([CLI, 'mcp', '--db', join(dir, 'a.db'), '--prefix', 'p', '--', 'node', COUNTING]);
    expect(prefix.code).toBe(2);
    expect(prefix.stderr).toMatch(/--prefix goes with --redis/);
    const header = await runNode([CLI, 'mcp', '--header', 'Authorization: Bearer x', '--', 'node', COUNTING]);
    expect(header.code).toBe(2);
    expect(header.stderr).toMatch(/--header goes with --url/);
    const badHeader = await runNode([CLI, 'mcp', '--url', 'http://127.0.0.1:1/mcp', '--header', 'no colon']);
    expect(badHeader.code).toBe(2);
    expect(badHeader.stderr).toMatch(/--header must be "Name: value"/);
    const size = await runNode([CLI, 'mcp', '--max-message', 'big', '--', 'node', COUNTING]);
    expect(size.code).toBe(2);
    expect(size.stderr).toMatch(/--max-message must be a size of at least 1kb, such as 64mb or 512kb, not "big"/);
    const cancel = join(dir, 'cancel.json');
    writeFileSync(cancel, JSON.stringify({ tools: { act: { cancel: 'drop' } } }));
    const badCancel = await runNode([CLI, 'mcp', '--config', cancel, '--', 'node', COUNTING]);
    expect(badCancel.code).toBe(2);
    expect(badCancel.stderr).toMatch(/tools\["act"\]\.cancel must be "finish" or "forward", not "drop"/);
    const missing = await runNode([CLI, 'mcp', '--db', join(dir, 'a.db'), '--', join(dir, 'no-such-server')]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/cannot start the MCP server/);
  });
});
