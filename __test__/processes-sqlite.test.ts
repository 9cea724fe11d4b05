// Real processes against one SQLite file: races, kills, and takeovers.

import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { ROOT, collect, lib, lineFrom, tempDb, tempDir, testHooks } from './helpers';

const WORKER = join(ROOT, '__test__', 'fixtures', 'worker.js');

function worker(mode: string, opts: Record<string, unknown>) {
  return spawn(process.execPath, [WORKER, mode, JSON.stringify(opts)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Starts `n` race workers on a barrier: each loads, says READY, and starts only when all
 * are ready. Returns their results and the phases log (`start`/`end` lines in the order
 * they happened, by O_APPEND). */
async function raceOnBarrier(n: number, opts: Record<string, unknown>) {
  const phases = join(tempDir(), 'phases.log');
  const children = Array.from({ length: n }, () =>
    spawn(process.execPath, [WORKER, 'race', JSON.stringify({ ...opts, phases })], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] }),
  );
  const finished = Promise.all(children.map(collect));
  await Promise.all(children.map((c) => lineFrom(c, /^READY$/)));
  for (const c of children) c.stdin!.write('go\n');
  return { finished: await finished, phases: logLines(phases) };
}

/** How many processes had started before the first one ended. */
function overlapping(phases: string[]): number {
  const firstEnd = phases.findIndex((l) => l.startsWith('end '));
  return phases.slice(0, firstEnd === -1 ? phases.length : firstEnd).filter((l) => l.startsWith('start ')).length;
}

function logLines(log: string): string[] {
  return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
}

async function clockPast(epochMs: number) {
  while (Date.now() <= epochMs) await new Promise((r) => setTimeout(r, epochMs - Date.now() + 1));
}

describe('many processes, one SQLite file', () => {
  it('4 processes racing on the same 200 keys (600 calls in flight each): every side effect runs exactly once', async () => {
    const db = tempDb();
    const log = join(tempDir(), 'effects.log');
    const { finished, phases } = await raceOnBarrier(4, { db, log, keys: 200, rounds: 3 });
    for (const f of finished) expect(f.stderr).toBe('');
    expect(finished.map((f) => f.code)).toEqual([0, 0, 0, 0]);
    // The race was real: all four had started before the first one finished its calls.
    expect(phases.filter((l) => l.startsWith('end ')).length).toBe(4);
    expect(overlapping(phases)).toBe(4);

    const ran = logLines(log).map((l) => l.split(' ')[0]);
    expect(ran.length).toBe(200);
    expect(new Set(ran).size).toBe(200);

    // Every process got the one stored result: the same executing pid per key.
    const views = finished.map((f) => JSON.parse(f.stdout.split('RESULTS ')[1]));
    const byKey = new Map(logLines(log).map((l) => l.split(' ') as [string, string]));
    for (const view of views) {
      for (const [key, by] of Object.entries(view)) expect(String(by)).toBe(byKey.get(key));
    }
  });

  it('a process SIGKILLed mid-call leaves a pending record; after the lease the next call takes over and runs once', async () => {
    const db = tempDb();
    const log = join(tempDir(), 'effects.log');
    const key = 'order-7';
    const child = worker('hang', { db, log, key, leaseMs: 1500 });
    const exited = collect(child);
    await lineFrom(child, /RUNNING/);
    child.kill('SIGKILL');
    expect((await exited).signal).toBe('SIGKILL');

    const store = new lib.SqliteStore({ path: db });
    const pending = await store.get(key);
    expect(pending?.status).toBe('pending');
    expect(pending?.attempts).toBe(1);

    let runs = 0;
    const tool = lib.idempotent(async function tool(k: string) {
      runs++;
      return { k, by: 'parent' };
    }, { store, leaseMs: 1500 });

    await clockPast(pending!.leaseExpiresAt!);
    expect(await tool.withKey(key)(key)).toEqual({ k: key, by: 'parent' });
    expect(await tool.withKey(key)(key)).toEqual({ k: key, by: 'parent' });
    expect(runs).toBe(1);
    const record = await store.get(key);
    expect(record?.status).toBe('completed');
    expect(record?.attempts).toBe(2);
    expect(logLines(log).length).toBe(1); // the dead child's one run; the parent's is `runs`
    await store.close();
  });

  it("a dead owner's fencing token is refused after a takeover", async () => {
    const db = tempDb();
    const key = 'order-8';
    const child = worker('acquire-and-hang', { db, key, fingerprint: 'fp', leaseMs: 300 });
    const exited = collect(child);
    const token = (await lineFrom(child, /^TOKEN /)).slice('TOKEN '.length).trim();
    child.kill('SIGKILL');
    await exited;

    const store = new lib.SqliteStore({ path: db });
    const pending = await store.get(key);
    await clockPast(pending!.leaseExpiresAt!);
    const claim = await store.acquire({ key, name: 'tool', fingerprint: 'fp', leaseMs: 60_000, force: false });
    expect(claim.acquired && claim.takenOver).toBe(true);
    expect(await store.complete({ key, token, resultJson: '"from the dead"' })).toBe(false);
    expect(await store.renew(key, token, 60_000)).toBe(false);
    expect(await store.fail({ key, token, error: { name: 'E', message: 'late' } })).toBe(false);
    expect((await store.get(key))?.status).toBe('pending');
    await store.close();
  });

  // What this shows: the completion is committed (visible to every other process) before the
  // promise resolves. What it cannot show: that it reached the disk. SIGKILL keeps the OS
  // page cache, so this passes with or without fsync; the strace test below shows the sync.
  it('a completion is committed before the promise resolves: a process killed right after it sees the result never runs again', async () => {
    const db = tempDb();
    const log = join(tempDir(), 'effects.log');
    for (let i = 0; i < 3; i++) {
      const child = worker('complete-then-die', { db, log, key: 'charge-1' });
      const f = await collect(child);
      expect(f.signal).toBe('SIGKILL');
      expect(f.stdout).toMatch(/^DONE /);
    }
    expect(logLines(log).length).toBe(1);
  });

  /** The syscalls of one `complete-then-die` worker under strace: writes and syncs, with paths. */
  async function traced(durability: 'full' | 'normal'): Promise<string[]> {
    const dir = tempDir();
    const trace = join(dir, 'trace');
    const opts = { db: join(dir, 'store.db'), log: join(dir, 'effects.log'), key: 'charge-1', durability };
    const args = ['-f', '-y', '-qq', '-e', 'trace=fsync,fdatasync,write,writev', '-o', trace, process.execPath, WORKER, 'complete-then-die', JSON.stringify(opts)];
    const f = await collect(spawn('strace', args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] }));
    expect(f.stdout, `strace must be installed (CI installs it): ${f.stderr}`).toMatch(/^DONE /);
    return readFileSync(trace, 'utf8').split('\n');
  }

  /** The lines between fn's side effect (its write to effects.log) and the write of "DONE". */
  function afterTheEffectBeforeTheCallerSawIt(lines: string[]): string[] {
    const effect = lines.findIndex((l) => /writev?\(\d+<[^>]*effects\.log>/.test(l));
    const done = lines.findIndex((l) => /writev?\(1<[^>]*>, (\[\{iov_base=)?"DONE /.test(l));
    expect(effect).toBeGreaterThan(-1);
    expect(done).toBeGreaterThan(effect);
    return lines.slice(effect + 1, done);
  }

  const walSynced = (lines: string[]) =>
    lines.some((l) => /f(data)?sync\(\d+<[^>]*store\.db-wal>\)\s+= 0$/.test(l)) ||
    (lines.some((l) => /f(data)?sync\(\d+<[^>]*store\.db-wal> <unfinished/.test(l)) &&
      lines.some((l) => /<\.\.\. f(data)?sync resumed>\)\s+= 0$/.test(l)));

  it("durability 'full': the completion's WAL is fsynced after fn ran and before the caller sees the result (strace)", async () => {
    expect(walSynced(afterTheEffectBeforeTheCallerSawIt(await traced('full')))).toBe(true);
    // The check can fail: with 'normal' (no sync at commit) the same window has no WAL sync.
    expect(walSynced(afterTheEffectBeforeTheCallerSawIt(await traced('normal')))).toBe(false);
  });

  it('8 processes opening one brand-new file at the same moment all succeed', async () => {
    const db = tempDb();
    const log = join(tempDir(), 'effects.log');
    // Started on a barrier, so no process has opened the file before the others are loaded.
    // Opening takes milliseconds, so how many overlapped is not checked (it depends on load).
    const { finished } = await raceOnBarrier(8, { db, log, keys: 1, rounds: 1 });
    for (const f of finished) expect(f.stderr).toBe('');
    expect(finished.map((f) => f.code)).toEqual(Array(8).fill(0));
    expect(logLines(log).length).toBe(1);
  });
});

describe('records of different projects (issue 9 item 14)', () => {
  const CALL = join(ROOT, '__test__', 'fixtures', 'project-call.js');
  const CLI = join(ROOT, 'dist', 'cli.js');

  function project(root: string, name: string): string {
    const dir = join(root, name);
    mkdirSync(join(dir, 'src'), { recursive: true });
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, private: true }));
    return join(dir, 'src'); // run from a subfolder: the nearest package.json names the project
  }

  function inProject(cwd: string, db: string, args: string[]) {
    const env: Record<string, string | undefined> = { ...process.env, IDEMPOTENT_TOOLS_DB: db };
    delete env.IDEMPOTENT_TOOLS_NAMESPACE;
    return collect(spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] }));
  }

  it('two projects on one default file each run their own call; the CLI in a project finds its records', async () => {
    const root = tempDir();
    const db = join(root, 'shared', 'store.db');
    const a = project(root, 'project-a');
    const b = project(root, 'project-b');

    // Each project's own program (its entry script names the project).
    const [callA, callB] = [a, b].map((dir) => {
      copyFileSync(CALL, join(dir, 'call.js'));
      return join(dir, 'call.js');
    });
    const first = await inProject(a, db, [callA, ROOT]);
    const second = await inProject(b, db, [callB, ROOT]);
    const again = await inProject(a, db, [callA, ROOT]);
    for (const f of [first, second, again]) expect(f.stderr).toBe('');
    const [ra, rb, ra2] = [first, second, again].map((f) => JSON.parse(f.stdout));
    expect(ra).toEqual({ ran: true, result: { email: 'bob@example.com', sentFrom: a }, namespace: 'project-a' });
    // Before namespaces, B got A's result back here and its email was never sent.
    expect(rb).toEqual({ ran: true, result: { email: 'bob@example.com', sentFrom: b }, namespace: 'project-b' });
    expect(ra2).toEqual({ ran: false, result: { email: 'bob@example.com', sentFrom: a }, namespace: 'project-a' });

    // `inspect` run in project A: A's record only, saying whose it is.
    const inA = await inProject(a, db, [CLI, 'inspect', '--json']);
    expect(inA.code).toBe(0);
    const recordsA = JSON.parse(inA.stdout);
    expect(recordsA.map((r: { namespace: string; result: unknown }) => [r.namespace, r.result])).toEqual([
      ['project-a', { email: 'bob@example.com', sentFrom: a }],
    ]);
    const table = await inProject(a, db, [CLI, 'inspect']);
    expect(table.stdout).toMatch(/PROJECT/);
    expect(table.stdout).toMatch(/project-a/);
    expect(table.stdout).not.toMatch(/project-b/);

    // The file named with --db: every project's records, each with its project.
    const all = await inProject(root, db, [CLI, '--db', db, 'inspect', '--json']);
    const namespaces = JSON.parse(all.stdout).map((r: { namespace: string }) => r.namespace).sort();
    expect(namespaces).toEqual(['project-a', 'project-b']);
    const onlyB = await inProject(root, db, [CLI, '--db', db, '--project', 'project-b', 'inspect', '--json']);
    expect(JSON.parse(onlyB.stdout).map((r: { namespace: string }) => r.namespace)).toEqual(['project-b']);
  });

  it('a program is its own project wherever it is started from: its folder, /, or through a tool under node_modules (issue 37, item 1)', async () => {
    const root = tempDir();
    const db = join(root, 'shared', 'store.db');
    const shop = project(root, 'shop');
    copyFileSync(CALL, join(shop, 'worker.js'));
    const worker = join(shop, 'worker.js');
    // A test runner or a loader under the project's node_modules that starts the program.
    const runner = join(root, 'shop', 'node_modules', 'fake-runner');
    mkdirSync(runner, { recursive: true });
    writeFileSync(join(runner, 'package.json'), JSON.stringify({ name: 'fake-runner' }));
    writeFileSync(join(runner, 'run.js'), "const [script, ...rest] = process.argv.slice(2); process.argv = [process.argv[0], __filename, ...rest]; require(script);\n");
    const fromItsFolder = JSON.parse((await inProject(shop, db, [worker, ROOT])).stdout);
    const fromRoot = JSON.parse((await inProject('/', db, [worker, ROOT])).stdout);
    const throughRunner = JSON.parse((await inProject('/', db, [join(runner, 'run.js'), worker, ROOT])).stdout);
    expect(fromItsFolder).toMatchObject({ ran: true, namespace: 'shop' });
    // Started from / (a cron job, a service unit): the same program, the same project: replayed, not charged again.
    expect(fromRoot).toMatchObject({ ran: false, namespace: 'shop', result: { sentFrom: shop } });
    expect(throughRunner).toMatchObject({ ran: false, namespace: 'shop' });
  });

  it('IDEMPOTENT_TOOLS_NAMESPACE names the project; without any package.json the folder does', () => {
    const root = tempDir();
    const saved = process.env.IDEMPOTENT_TOOLS_NAMESPACE;
    try {
      process.env.IDEMPOTENT_TOOLS_NAMESPACE = 'billing';
      expect(lib.projectNamespace(root)).toBe('billing');
      delete process.env.IDEMPOTENT_TOOLS_NAMESPACE;
      expect(lib.projectNamespace(root)).toBe(root); // no package.json above a temp folder
      expect(lib.projectNamespace(project(root, 'shop'))).toBe('shop');
      // A package.json without a name (a {"type":"module"} marker) is passed over.
      const marked = join(root, 'shop', 'src', 'esm');
      mkdirSync(marked);
      writeFileSync(join(marked, 'package.json'), '{"type":"module"}');
      expect(lib.projectNamespace(marked)).toBe('shop');
    } finally {
      if (saved === undefined) delete process.env.IDEMPOTENT_TOOLS_NAMESPACE;
      else process.env.IDEMPOTENT_TOOLS_NAMESPACE = saved;
    }
  });

  it('a store opened for every project refuses to run calls, naming the way out', async () => {
    const db = tempDb();
    const viewer = new lib.SqliteStore({ path: db, allNamespaces: true });
    const tool = lib.idempotent(async function tool() {
      return 1;
    }, { store: viewer });
    await expect(tool()).rejects.toThrow(/every project.*namespace/);
    await viewer.close();
    expect(() => new lib.SqliteStore({ path: db, namespace: 'x', allNamespaces: true })).toThrow(TypeError);
  });
});

describe('leases and the wall clock (issue 9 item 6)', () => {
  const HOLDER = join(ROOT, '__test__', 'fixtures', 'lease-holder.js');

  function holder(mode: 'hold' | 'try', opts: Record<string, unknown>, wallOffsetMs = 0) {
    const env = { ...process.env, ...testHooks({ IDEMPOTENT_TOOLS_TEST_WALL_CLOCK_OFFSET_MS: String(wallOffsetMs) }) };
    return spawn(process.execPath, [HOLDER, mode, JSON.stringify(opts)], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  }

  it('a wall clock stepped past the lease does not let a second process take over a live owner', async () => {
    const opts = { db: tempDb(), log: join(tempDir(), 'effects.log'), key: 'order-9', leaseMs: 3000 };
    const a = holder('hold', opts);
    const aDone = collect(a);
    await lineFrom(a, /RUNNING/);
    // B's wall clock is 5 s ahead: past A's lease (3 s) on the wall clock, though A is alive.
    const b = await collect(holder('try', opts, 5000));
    a.stdin!.write('go\n');
    const aFinished = await aDone;
    expect(b.stderr).toBe('');
    // Before leases moved to the monotonic clock: "OUTCOME ran", fn running twice at once.
    expect(b.stdout.trim()).toBe('OUTCOME DuplicateInFlightError');
    expect(aFinished.stdout).toContain('OUTCOME ran {"key":"order-9","by":"hold"}');
    expect(logLines(opts.log).map((l) => l.split(' ')[0])).toEqual(['hold']);
    const store = new lib.SqliteStore({ path: opts.db });
    const record = await store.get(opts.key);
    expect([record?.status, record?.attempts, record?.result]).toEqual(['completed', 1, { key: 'order-9', by: 'hold' }]);
    await store.close();
  });
});

describe('a panic in the native store (internal fault switch)', () => {
  const PANIC = join(ROOT, '__test__', 'fixtures', 'native-panic.js');

  async function panicAt(point: string, ...extra: string[]) {
    const env = { ...process.env, ...testHooks({ IDEMPOTENT_TOOLS_TEST_NATIVE_PANIC: point }) };
    const f = await collect(spawn(process.execPath, [PANIC, tempDb(), ...extra], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] }));
    expect(f.signal).toBeNull();
    expect(f.code).toBe(0); // the process lived through it
    expect(f.stderr).toContain(`injected panic at ${point}`); // the panic really happened
    return f.stdout.trim().split('\n');
  }

  it('in acquire (a writer job): the call rejects with StoreError, fn does not run, the store goes on', async () => {
    const lines = await panicAt('acquire');
    expect(lines[0]).toMatch(/^first StoreError ".*internal error in the native store.*injected panic at acquire/);
    expect(lines.slice(1)).toEqual(['second ok {"n":1}', 'third ok {"n":1}', 'get ok "completed"', 'get-again ok "completed"', 'runs 1']);
  });

  it('in one of the claims taken together: only that call rejects; the others claim, run and complete', async () => {
    // The claims of one turn reach the writer as one job; each must still fail alone.
    const lines = await panicAt('acquire', 'together');
    expect(lines[0]).toMatch(/^together-a StoreError ".*internal error in the native store.*injected panic at acquire/);
    expect(lines.slice(1)).toEqual([
      'together-b ok {"n":"b"}',
      'together-c ok {"n":"c"}',
      'first ok {"n":1}',
      'second ok {"n":1}',
      'third ok {"n":1}',
      'get ok "completed"',
      'get-again ok "completed"',
      'runs 3',
    ]);
  });

  it('in one of the completes taken together: that complete is tried again and recorded; fn ran once per key', async () => {
    // The completes of one turn reach the writer as one job; the one that panicked rolled
    // back alone and was retried (see settle.ts), the others were recorded the first time
    // (the injected panic fires once: runs 4 says fn ran once for each of a, b, c and 1).
    const lines = await panicAt('complete', 'together');
    // The retried one answers last, and which one panicked is up to the timing.
    expect(lines.slice(0, 3).sort()).toEqual(['together-a ok {"n":"a"}', 'together-b ok {"n":"b"}', 'together-c ok {"n":"c"}']);
    expect(lines.slice(3)).toEqual([
      'first ok {"n":1}',
      'second ok {"n":1}',
      'third ok {"n":1}',
      'get ok "completed"',
      'get-again ok "completed"',
      'runs 4',
    ]);
  });

  it('in a read: get rejects with StoreError, and the next read works', async () => {
    const lines = await panicAt('get');
    expect(lines.slice(0, 3)).toEqual(['first ok {"n":1}', 'second ok {"n":1}', 'third ok {"n":1}']);
    expect(lines[3]).toMatch(/^get StoreError ".*internal error in the native store.*injected panic at get/);
    expect(lines.slice(4)).toEqual(['get-again ok "completed"', 'runs 1']);
  });

  it('on the synchronous replay read: the call falls back to the async path and replays', async () => {
    const lines = await panicAt('peek');
    expect(lines).toEqual(['first ok {"n":1}', 'second ok {"n":1}', 'third ok {"n":1}', 'get ok "completed"', 'get-again ok "completed"', 'runs 1']);
  });
});
