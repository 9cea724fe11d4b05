/** Shared by the tests: the built package (one instance, as users load it), temp folders, child processes. */

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, inject } from 'vitest';

export const ROOT = resolve(__dirname, '..');
const require = createRequire(import.meta.url);

/** The package as `require('idempotent-tools')` gives it (built: run `npm run build` first). */
export const lib: typeof import('../dist/index.js') = require(ROOT);
export const testing: typeof import('../dist/testing.js') = require(join(ROOT, 'dist', 'testing.js'));

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) {
    try {
      rmSync(d, { recursive: true, force: true });
    } catch {
      // a mount point still in use: the mounting test's own afterAll unmounts it
    }
  }
});

/**
 * What to add to a child process's environment for a test hook (IDEMPOTENT_TOOLS_FAULT,
 * IDEMPOTENT_TOOLS_TEST_WALL_CLOCK_OFFSET_MS, IDEMPOTENT_TOOLS_TEST_NATIVE_PANIC): the
 * hooks, and the native build that has them (global-setup.ts). The binary users install
 * ignores them.
 */
export function testHooks(hooks: Record<string, string>): Record<string, string> {
  return { NAPI_RS_NATIVE_LIBRARY_PATH: inject('testHooksAddon'), ...hooks };
}

/** A new temp folder, removed after the test file. */
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-test-'));
  dirs.push(dir);
  return dir;
}

export function tempDb(): string {
  return join(tempDir(), 'store.db');
}

export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs `node script args` from the repo root and collects its output. */
export function runNode(args: string[], options: { env?: Record<string, string>; input?: string } = {}): Promise<Finished> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    collect(child).then(done, fail);
    child.stdin!.end(options.input ?? '');
  });
}

export function collect(child: ChildProcess): Promise<Finished> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d) => (stdout += d));
  child.stderr?.on('data', (d) => (stderr += d));
  return new Promise((done, fail) => {
    child.on('error', fail);
    child.on('close', (code, signal) => done({ code, signal, stdout, stderr }));
  });
}

/** Resolves with the first line of the child's stdout that matches. */
export function lineFrom(child: ChildProcess, pattern: RegExp): Promise<string> {
  return new Promise((done, fail) => {
    let buffered = '';
    const onData = (d: Buffer) => {
      buffered += d;
      const line = buffered.split('\n').find((l) => pattern.test(l));
      if (line !== undefined) {
        child.stdout!.off('data', onData);
        done(line);
      }
    };
    child.stdout!.on('data', onData);
    child.on('close', (code) => fail(new Error(`child exited (${code}) before printing ${pattern}; stdout: ${buffered}`)));
  });
}

type RedisStoreOptions = ConstructorParameters<typeof lib.RedisStore>[0];

/** The store Bun or Deno would get: the Tokio transport (the loop transport needs Node's libuv). */
export function tokioStore(options: RedisStoreOptions) {
  const g = globalThis as { Bun?: unknown };
  g.Bun = {};
  try {
    return new lib.RedisStore(options);
  } finally {
    delete g.Bun;
  }
}

/** Both transports a RedisStore has, for `describe.each`: on Node's event loop, and Tokio's. */
export const transports = [
  ['on the event loop', (o: RedisStoreOptions) => new lib.RedisStore(o)],
  ['on Tokio', tokioStore],
] as const;
