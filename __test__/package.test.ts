// The package as users load it: require and import, the public names, no framework code.

import { describe, expect, it } from 'vitest';

import { runNode } from './helpers';

const PUBLIC = [
  'idempotent', 'currentKey', 'SqliteStore', 'RedisStore', 'defaultStore',
  'IdempotencyError', 'DuplicateInFlightError', 'InFlightTimeoutError', 'KeyMismatchError', 'StoreError',
];

describe('the package', () => {
  it('require and import give the same public names', async () => {
    const cjs = await runNode(['-e', `const m = require('idempotent-tools'); console.log(JSON.stringify(${JSON.stringify(PUBLIC)}.filter((n) => m[n] === undefined)))`]);
    expect(cjs.stderr).toBe('');
    expect(JSON.parse(cjs.stdout)).toEqual([]);
    const esm = await runNode(['--input-type=module', '-e', `import { ${PUBLIC.join(', ')} } from 'idempotent-tools'; import * as m from 'idempotent-tools'; console.log(JSON.stringify(${JSON.stringify(PUBLIC)}.filter((n) => m[n] === undefined)))`]);
    expect(esm.stderr).toBe('');
    expect(JSON.parse(esm.stdout)).toEqual([]);
  });

  it('errors carry codes and share one base class', async () => {
    const r = await runNode(['-e', `
      const m = require('idempotent-tools');
      const out = ['DuplicateInFlightError', 'InFlightTimeoutError', 'KeyMismatchError', 'StoreError']
        .map((n) => { const e = new m[n]('x'); return [n, e.code, e instanceof m.IdempotencyError, e instanceof Error, e.name]; });
      console.log(JSON.stringify(out));`]);
    expect(JSON.parse(r.stdout)).toEqual([
      ['DuplicateInFlightError', 'DUPLICATE_IN_FLIGHT', true, true, 'DuplicateInFlightError'],
      ['InFlightTimeoutError', 'IN_FLIGHT_TIMEOUT', true, true, 'InFlightTimeoutError'],
      ['KeyMismatchError', 'KEY_MISMATCH', true, true, 'KeyMismatchError'],
      ['StoreError', 'STORE_ERROR', true, true, 'StoreError'],
    ]);
  });

  it('loading the package opens no store and loads no framework', async () => {
    const r = await runNode(['-e', `
      const before = new Set(Object.keys(require.cache));
      require('idempotent-tools');
      const loaded = Object.keys(require.cache).filter((f) => !before.has(f) && f.includes('node_modules'));
      console.log(JSON.stringify(loaded));`], { env: { HOME: '/nonexistent-home' } });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual([]);
  });
});
