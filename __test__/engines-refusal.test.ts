// The durable engines' helpers (issue 38) outside any engine: the key is the engine's identity
// of the step, so a call where no engine names a step is refused (a CannotTellError naming
// `key`), nothing runs; a business key names the call by itself. The engines themselves run in
// e2e/engines (npm run test:engines). And loading a helper loads no engine.

import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { ROOT, tempDb, tempDir } from './helpers';

const require = createRequire(import.meta.url);
const { SqliteStore } = require(`${ROOT}/dist/index.js`);
const ENGINES = ['temporal', 'inngest', 'dbos', 'workflow', 'trigger'] as const;
const WRAP = { temporal: 'idempotentActivity', inngest: 'idempotentStep', dbos: 'idempotentStep', workflow: 'idempotentStep', trigger: 'idempotentStep' } as const;

describe('engine helpers outside a step', () => {
  for (const engine of ENGINES) {
    it(`${engine}: refused with a CannotTellError naming key, and the side effect does not run; a business key runs it once`, async () => {
      const helper = require(`${ROOT}/dist/integrations/${engine}.js`);
      const store = new SqliteStore({ path: tempDb() });
      let ran = 0;
      const charge = helper[WRAP[engine]](async function charge(order: string) {
        ran++;
        return `charged ${order}`;
      }, { store });
      const refused = await charge('o-1').then(() => null, (e: unknown) => e);
      if (engine === 'dbos') {
        // Not installed in this project: the helper says what to install (with DBOS, the refusal below).
        expect(String(refused)).toMatch(/cannot load @dbos-inc\/dbos-sdk/);
      } else {
        expect(refused).toMatchObject({ name: 'CannotTellError', code: 'CANNOT_TELL', option: 'key' });
        expect(String((refused as Error).message)).toMatch(/outside .*business key/);
      }
      expect(ran).toBe(0);

      const keyed = helper[WRAP[engine]](async function chargeKeyed(order: string) {
        ran++;
        return `charged ${order}`;
      }, { store, key: (order: string) => `order-${order}` });
      expect(await keyed('o-1')).toBe('charged o-1');
      expect(await keyed('o-1')).toBe('charged o-1');
      expect(ran).toBe(1);
      expect((await store.get('order-o-1')).status).toBe('completed');
      await store.close();
    });
  }

  it('restate: a ctx without an invocation id is refused naming key; options are checked', async () => {
    const { idempotentRun } = require(`${ROOT}/dist/integrations/restate.js`);
    const store = new SqliteStore({ path: tempDb() });
    let ran = 0;
    const ctx = { request: () => ({}), run: (_name: string, action: () => unknown) => action() };
    await expect(idempotentRun(ctx, 'charge', () => ran++, { store })).rejects.toMatchObject({ name: 'CannotTellError', option: 'key' });
    expect(ran).toBe(0);
    expect(() => idempotentRun(ctx, 'charge', () => ran++, { store, onDuplicate: 'raise' })).toThrow(/onDuplicate "raise" is refused/);
    expect(() => idempotentRun(ctx, 'charge', () => ran++, { store, contxt: 1 })).toThrow(/option "contxt" is not an option/);
    await store.close();
  });

  it('loading every helper loads no engine (each engine package here throws when loaded)', () => {
    // Stand-ins for the engines, found through NODE_PATH (this project installs none of them):
    // loading one throws, so a helper that imported its engine at load time fails to load.
    const dir = tempDir();
    const engines = ['@temporalio/activity', 'inngest', '@restatedev/restate-sdk', '@dbos-inc/dbos-sdk', 'workflow', '@trigger.dev/sdk', '@trigger.dev/core'];
    for (const name of engines) {
      mkdirSync(join(dir, name), { recursive: true });
      writeFileSync(join(dir, name, 'package.json'), JSON.stringify({ name, main: 'index.js' }));
      writeFileSync(join(dir, name, 'index.js'), `throw new Error('${name} was loaded');`);
    }
    const helpers = [...ENGINES, 'restate'].map((e) => `${ROOT}/dist/integrations/${e}.js`);
    const probe = `require(${JSON.stringify('@dbos-inc/dbos-sdk')})`;
    const load = (code: string) => spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', env: { ...process.env, NODE_PATH: dir } });
    // The stand-ins are in reach: requiring one fails.
    expect(load(probe).stderr).toMatch(/@dbos-inc\/dbos-sdk was loaded/);
    const r = load(helpers.map((h) => `require(${JSON.stringify(h)});`).join(''));
    expect(r.status, r.stderr).toBe(0);
  });
});
