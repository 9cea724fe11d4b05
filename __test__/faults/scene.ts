/**
 * A scene for the deterministic fault tests: a real server (a redis-server of the test
 * file's own, with an append-only file, or the shared PostgreSQL; a SQLite file), a fault
 * proxy in front of it, callers in this process (or owners in child processes) that write
 * the fault harness's ledger (stress/faults/), and the checker's verdict over it. Tests
 * wait on events (a claim seen going up, a run started, a reply held), never on times.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import { afterAll, afterEach } from 'vitest';

import { ROOT, lib, tempDir } from '../helpers';
import { PG_URL, dropTables, uniqueTable } from '../postgres-server';

const require = createRequire(import.meta.url);
const FAULTS = join(ROOT, 'stress', 'faults');
export const { FaultProxy } = require(join(FAULTS, 'proxy.js'));
export const { Ledger, readLedger } = require(join(FAULTS, 'ledger.js'));
const { makeCall, makeSideEffect, reconcileFromEffects, recordingStore } = require(join(FAULTS, 'caller.js'));
const { openStore, usesTokio } = require(join(FAULTS, 'stores.js'));
export const { check, details, verdictLine } = require(join(FAULTS, 'checker.js'));
export const { RedisProcess } = require(join(FAULTS, 'servers.js'));
const { terminateBackends } = require(join(FAULTS, 'nemesis.js'));

export type Kind = 'sqlite' | 'redis' | 'redis-tokio' | 'postgres';
export const NETWORK: Kind[] = ['redis', 'redis-tokio', 'postgres'];
export const REDIS: Kind[] = ['redis', 'redis-tokio'];

let scenes = 0;

/** What a call gave: a result's run, or the error. */
export interface Got {
  run?: string;
  error?: { name: string; code?: string; message: string; result?: { run: string } };
}

export interface CallerOptions {
  /** 'proxy' (default): through the fault proxy; 'direct': straight to the server. */
  via?: 'proxy' | 'direct';
  mode?: 'block' | 'raise';
  leaseMs?: number;
  reconcile?: boolean;
  pollTimeoutMs?: number;
  /** Called as each run of this caller starts (its side effect is in the ledger). */
  onRun?: (run: string, key: string) => void;
  /** What the run waits for before it returns (a gate of the test's). */
  work?: (run: string, key: string) => Promise<void>;
  decline?: (key: string) => boolean;
}

export interface Caller {
  who: string;
  store: any;
  call(key: string): Promise<Got>;
  /** Calls until the call gives a result (a StoreError or DuplicateInFlightError is retried), at most `tries` times. */
  untilResult(key: string, tries?: number): Promise<Got[]>;
}

/** One Redis server per test file (restartable), started on first use. */
let redisServer: Promise<any> | undefined;
export function testRedis(): Promise<any> {
  redisServer ??= RedisProcess.start();
  return redisServer;
}
export async function stopTestRedis(): Promise<void> {
  if (redisServer) await (await redisServer).stop();
  redisServer = undefined;
}

/**
 * A test file's scenes: `scene(kind)` opens one, closed after its test; the file's Redis
 * server and Postgres tables go after its last test.
 */
export function scenesOfThisFile(): (kind: Kind) => Promise<Scene> {
  const open: Scene[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });
  afterAll(async () => {
    await stopTestRedis();
    await dropTables();
  });
  return async (kind) => {
    const s = await Scene.open(kind);
    open.push(s);
    return s;
  };
}

export class Scene {
  readonly dir: string;
  readonly ledger: any;
  readonly callers: Caller[] = [];
  readonly stores: any[] = [];
  readonly children: ChildProcess[] = [];
  /** The name this scene's Postgres connections carry (for pg_terminate_backend). */
  readonly application: string;

  private constructor(
    readonly kind: Kind,
    readonly proxy: any,
    readonly server: any,
    readonly config: Record<string, unknown>,
    readonly directConfig: Record<string, unknown>,
  ) {
    this.dir = join(tempDir(), 'ledger');
    mkdirSync(this.dir);
    this.ledger = new Ledger(this.dir, 'conductor');
    this.application = String(config.application ?? '');
  }

  /** A scene on `kind`: its server, a proxy in front of it (network stores), a fresh prefix or table. */
  static async open(kind: Kind, seed = 1): Promise<Scene> {
    const n = ++scenes;
    if (kind === 'sqlite') {
      const db = join(tempDir(), 'store.db');
      return new Scene(kind, undefined, undefined, { store: kind, db }, { store: kind, db });
    }
    if (kind === 'postgres') {
      const admin = new URL(PG_URL);
      const proxy = await FaultProxy.start({ target: { host: admin.hostname, port: Number(admin.port || 5432) }, seed });
      const table = uniqueTable();
      const application = `idt-faults-test-${process.pid}-${n}`;
      const viaProxy = new URL(PG_URL);
      viaProxy.hostname = '127.0.0.1';
      viaProxy.port = String(proxy.port);
      viaProxy.searchParams.set('application_name', application);
      // In clear text, so a test can tell a claim from other requests at the proxy (a fault
      // on the TCP stream is the same fault under TLS).
      viaProxy.searchParams.set('sslmode', 'disable');
      const scene = new Scene(kind, proxy, undefined, { store: kind, url: viaProxy.toString(), table, application }, { store: kind, url: PG_URL, table });
      // The table exists before the callers race to make it.
      await scene.direct().get('faults:warm-up');
      return scene;
    }
    const server = await testRedis();
    const proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port: server.port }, seed });
    const prefix = `faults-test:${process.pid}:${n}:`;
    return new Scene(kind, proxy, server, { store: kind, url: proxy.url('redis://127.0.0.1:%PORT%/0'), prefix }, { store: kind, url: server.url, prefix });
  }

  /** A store straight to the server (no proxy, no recording): for finals and setup. */
  direct(): any {
    if (this.directStore === undefined) {
      this.directStore = openStore(this.directConfig);
      this.stores.push(this.directStore);
    }
    return this.directStore;
  }

  private directStore: any;

  /** The store config a child process (fixtures/fault-owner.js) opens. */
  childConfig(via: 'proxy' | 'direct' = 'direct'): Record<string, unknown> {
    return { ...(via === 'proxy' ? this.config : this.directConfig), dir: this.dir };
  }

  /** A caller in this process, writing the ledger as `who`. */
  caller(who: string, o: CallerOptions = {}): Caller {
    const ledger = new Ledger(this.dir, who);
    const config = o.via === 'direct' || this.proxy === undefined ? this.directConfig : this.config;
    const store = recordingStore(openStore({ ...config, connectTimeoutMs: 1000, commandTimeoutMs: 2000 }), ledger);
    this.stores.push(store);
    const mode = o.mode ?? 'block';
    const leaseMs = o.leaseMs ?? 300;
    const sideEffect = makeSideEffect({
      dir: this.dir,
      who,
      work: async (run: string, key: string) => {
        o.onRun?.(run, key);
        await o.work?.(run, key);
      },
      decline: o.decline ?? (() => false),
    });
    const wrapped = lib.idempotent(sideEffect, {
      store,
      name: 'faultEffect',
      onDuplicate: mode,
      leaseMs,
      pollIntervalMs: 20,
      pollTimeoutMs: o.pollTimeoutMs ?? 20_000,
      payload: (key: string) => key,
      reconcile: o.reconcile ? reconcileFromEffects(this.dir, ledger) : undefined,
    });
    let calls = 0;
    const call = (key: string): Promise<Got> =>
      makeCall({ ledger, wrapped, key, callId: `${who}:${++calls}`, mode, reconcile: o.reconcile === true, leaseMs });
    const caller: Caller = {
      who,
      store,
      call,
      async untilResult(key, tries = 10) {
        const got: Got[] = [];
        for (let i = 0; i < tries; i++) {
          const g = await call(key);
          got.push(g);
          if (g.error === undefined || !['STORE_ERROR', 'DUPLICATE_IN_FLIGHT', 'IN_FLIGHT_TIMEOUT'].includes(g.error.code ?? '')) break;
        }
        return got;
      },
    };
    this.callers.push(caller);
    return caller;
  }

  /** Resolves once a chunk going up (client to server) on any connection contains `text`. */
  sawUp(text: string): Promise<any> {
    return new Promise((resolve) => {
      let done = false;
      const watch = (conn: any) =>
        conn.onChunk('up', (chunk: Buffer) => {
          if (!done && chunk.includes(text)) {
            done = true;
            resolve(conn);
          }
        });
      for (const conn of this.proxy.connections) watch(conn);
      this.proxy.onConnection(watch);
    });
  }

  /**
   * The next request that goes up on any connection of the proxy (once armed): `fault` runs
   * on its connection synchronously, before the request is forwarded (so a hold('down') is
   * in place before the reply can come). `match`: only a chunk containing it counts.
   */
  onNextRequest(fault: (conn: any, chunk: Buffer) => void, match?: string): Promise<any> {
    return new Promise((resolve) => {
      let done = false;
      const watch = (conn: any) =>
        conn.onChunk('up', (chunk: Buffer) => {
          if (done || (match !== undefined && !chunk.includes(match))) return;
          done = true;
          fault(conn, chunk);
          resolve(conn);
        });
      for (const conn of this.proxy.connections) watch(conn);
      this.proxy.onConnection(watch);
    });
  }

  /** Resolves with the next chunk that arrives from the server on `conn`. */
  nextReply(conn: any): Promise<Buffer> {
    return new Promise((resolve) => {
      let done = false;
      conn.onChunk('down', (chunk: Buffer) => {
        if (done) return;
        done = true;
        resolve(chunk);
      });
    });
  }

  /** Starts fixtures/fault-owner.js on `key`; resolves with the child once its run has started. */
  async owner(who: string, key: string, o: { leaseMs?: number; reconcile?: boolean; via?: 'proxy' | 'direct' } = {}): Promise<{ child: ChildProcess; run: string; done: Promise<string> }> {
    const config = { ...this.childConfig(o.via), who, key, leaseMs: o.leaseMs ?? 300, reconcile: o.reconcile === true };
    const child = spawn(process.execPath, [join(ROOT, '__test__', 'fixtures', 'fault-owner.js'), JSON.stringify(config)], {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    this.children.push(child);
    let out = '';
    const lines: ((line: string) => void)[] = [];
    child.stdout!.on('data', (d) => {
      out += d;
      let nl;
      while ((nl = out.indexOf('\n')) >= 0) {
        const line = out.slice(0, nl);
        out = out.slice(nl + 1);
        for (const l of lines) l(line);
      }
    });
    const line = (prefix: string) =>
      new Promise<string>((resolve, reject) => {
        lines.push((l) => l.startsWith(prefix) && resolve(l.slice(prefix.length)));
        child.once('exit', (code, signal) => reject(new Error(`the owner exited (${code ?? signal}) before it said ${prefix.trim()}`)));
      });
    const ran = line('RAN ');
    const done = line('DONE ');
    done.catch(() => {});
    return { child, run: await ran, done };
  }

  /** SIGKILLs a child and waits for it; writes `kill` to the ledger after it is gone. */
  async kill(child: ChildProcess, who: string): Promise<void> {
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    child.kill('SIGCONT');
    await gone;
    this.ledger.write({ ev: 'kill', worker: who });
  }

  stop(child: ChildProcess, who: string): void {
    child.kill('SIGSTOP');
    this.ledger.write({ ev: 'stop', worker: who });
  }

  cont(child: ChildProcess, who: string): void {
    child.kill('SIGCONT');
    this.ledger.write({ ev: 'cont', worker: who });
  }

  /** Polls the record until a claim of `key` is on the server (the request passing the proxy is not yet the claim made). */
  async claimed(key: string): Promise<void> {
    const store = this.direct();
    while ((await store.get(key))?.status !== 'pending') await new Promise((resolve) => setTimeout(resolve, 5));
  }

  /** Polls the record (no sleep in place of an event: the lease's end is the server's to say). */
  async leaseOver(key: string): Promise<void> {
    const store = this.direct();
    for (;;) {
      const r = await store.get(key);
      if (r === null || r.status !== 'pending' || (r.leaseExpiresAt !== null && r.leaseExpiresAt < Date.now())) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** pg_terminate_backend on every backend of this scene's callers (found by application_name). */
  terminate(): Promise<number> {
    return terminateBackends({ adminUrl: PG_URL, application: this.application });
  }

  /** Whether a Redis caller's store is on the Tokio transport (stores.js, usesTokio). */
  usesTokio(caller: Caller): Promise<boolean | undefined> {
    return usesTokio(caller.store);
  }

  /** The checker's verdict on everything written so far, with the store's final records. */
  async verdict(o: { hangBoundMs?: number } = {}) {
    const { entries: before } = readLedger(this.dir);
    const keys = [...new Set(before.filter((e: any) => e.ev === 'call').map((e: any) => e.key as string))];
    const store = this.direct();
    const finals: Record<string, { status: string; run?: string }> = {};
    for (const key of keys) {
      const r = await store.get(key);
      if (r) finals[key] = { status: r.status, run: r.result?.run };
    }
    const { entries } = readLedger(this.dir);
    const result = check(entries, { finals, hangBoundMs: o.hangBoundMs ?? 30_000 });
    const runs = (key: string) => entries.filter((e: any) => e.ev === 'run' && e.key === key).map((e: any) => e.run as string);
    return { ...result, text: [verdictLine(this.kind, result), ...details(result)].join('\n'), runs, finals, entries };
  }

  async close(): Promise<void> {
    for (const child of this.children) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        child.kill('SIGCONT');
      }
    }
    this.proxy?.all.resume();
    this.proxy?.all.release('both');
    this.proxy?.refuse(false);
    for (const store of this.stores) await store.close?.().catch(() => {});
    await this.proxy?.close();
    this.ledger.close();
  }
}
