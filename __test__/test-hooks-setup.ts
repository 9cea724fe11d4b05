// Before any test file: the native binary with the test hooks (issue 21 item 9). What
// users install has none (IDEMPOTENT_TOOLS_FAULT, IDEMPOTENT_TOOLS_TEST_WALL_CLOCK_OFFSET_MS
// and IDEMPOTENT_TOOLS_TEST_NATIVE_PANIC do nothing there), so the tests that use them
// run their child processes on this build instead (`testHooks` in helpers.ts), and every
// other test runs on the binary in native/, as users get it.
//
// A debug `cargo build` with the `test-hooks` feature (not `napi build`, which compiles
// the crate again on every run): cargo rebuilds only what changed, so after the first
// run this takes a second. The library is copied (to a new file, then renamed: a process
// may still have the old one loaded) to target/test-hooks-addon/.

import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, renameSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { TestProject } from 'vitest/node';

const ROOT = resolve(__dirname, '..');

function cdylib(): string {
  const target = process.env.CARGO_TARGET_DIR ? resolve(ROOT, process.env.CARGO_TARGET_DIR) : join(ROOT, 'target');
  const file =
    process.platform === 'win32' ? 'idempotent_tools.dll' : process.platform === 'darwin' ? 'libidempotent_tools.dylib' : 'libidempotent_tools.so';
  return join(target, 'debug', file);
}

export default function setup(project: TestProject): void {
  execFileSync('cargo', ['build', '--lib', '--features', 'test-hooks'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  const dir = join(ROOT, 'target', 'test-hooks-addon');
  mkdirSync(dir, { recursive: true });
  const addon = join(dir, 'idempotent-tools.test-hooks.node');
  const fresh = `${addon}.${process.pid}`;
  copyFileSync(cdylib(), fresh);
  renameSync(fresh, addon);
  project.provide('testHooksAddon', addon);
}

declare module 'vitest' {
  export interface ProvidedContext {
    testHooksAddon: string;
  }
}
