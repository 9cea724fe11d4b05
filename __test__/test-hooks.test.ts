// Issue 21 item 9: the test hooks are not in what users install. The binary in native/
// (built by npm install, npm run build or build:debug, as users get it) ignores
// IDEMPOTENT_TOOLS_FAULT, IDEMPOTENT_TOOLS_TEST_WALL_CLOCK_OFFSET_MS and
// IDEMPOTENT_TOOLS_TEST_NATIVE_PANIC; the tests' own build (global-setup.ts) obeys them.

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { ROOT, lib, runNode, tempDb, testHooks } from './helpers';

const A_DAY = 24 * 3600 * 1000;
const HOOKS = {
  IDEMPOTENT_TOOLS_FAULT: 'after-acquire',
  IDEMPOTENT_TOOLS_TEST_WALL_CLOCK_OFFSET_MS: String(A_DAY),
  IDEMPOTENT_TOOLS_TEST_NATIVE_PANIC: 'acquire',
};

/** A child that makes one call and prints what the store recorded. */
function oneCall(db: string, env: Record<string, string>) {
  const script = `
    const { idempotent, SqliteStore, StoreError } = require(${JSON.stringify(ROOT)});
    const native = require(${JSON.stringify(join(ROOT, 'dist', 'core', 'native.js'))});
    const store = new SqliteStore({ path: ${JSON.stringify(db)} });
    const op = idempotent(async function op() { return 'ran'; }, { store });
    op().then(
      async (r) => console.log(JSON.stringify({ hooks: native.testHooks(), r, createdAt: (await store.get(op.keyFor())).createdAt })),
      (e) => console.log(JSON.stringify({ hooks: native.testHooks(), error: e instanceof StoreError ? 'StoreError' : String(e) })),
    ).finally(() => store.close());
  `;
  return runNode(['-e', script], { env });
}

describe('test hooks (issue 21 item 9)', () => {
  it('the binary users install ignores them: no crash, no clock offset, no injected panic', async () => {
    const before = Date.now();
    const r = await oneCall(tempDb(), HOOKS);
    const after = Date.now();
    // Before: the hooks were in every build; this child killed itself after its claim.
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe('');
    const out = JSON.parse(r.stdout);
    expect(out.hooks).toBe(false);
    expect(out.r).toBe('ran');
    expect(out.createdAt).toBeGreaterThanOrEqual(before);
    expect(out.createdAt).toBeLessThanOrEqual(after);
    expect(lib).toBeDefined();
  });

  it('the tests\' own build obeys them', async () => {
    const panics = await oneCall(tempDb(), testHooks({ IDEMPOTENT_TOOLS_TEST_NATIVE_PANIC: 'acquire' }));
    expect(JSON.parse(panics.stdout)).toEqual({ hooks: true, error: 'StoreError' });
    const crashes = await oneCall(tempDb(), testHooks({ IDEMPOTENT_TOOLS_FAULT: 'after-acquire' }));
    expect(crashes.signal).toBe('SIGKILL');
    const before = Date.now();
    const shifted = JSON.parse((await oneCall(tempDb(), testHooks({ IDEMPOTENT_TOOLS_TEST_WALL_CLOCK_OFFSET_MS: String(A_DAY) }))).stdout);
    expect(shifted.createdAt).toBeGreaterThanOrEqual(before + A_DAY);
  });
});
