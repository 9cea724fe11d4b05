// The CLI's Redis URL: a malformed one is bad usage (exit 2), and it can come from the
// environment, so a password need not be in argv where `ps` shows it.

import { afterAll, describe, expect, it } from 'vitest';

import { lib, runNode } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';

const redis = await sharedRedis();
afterAll(() => redis.stop());

describe('the CLI and Redis URLs', () => {
  it('a malformed --redis URL exits 2 with the usage', async () => {
    for (const url of ['http://127.0.0.1:6379', 'redis://bad host:x']) {
      const r = await runNode(['dist/cli.js', '--redis', url, 'inspect']);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/--redis: .*\n[\s\S]*Usage:/);
    }
  });

  it('IDEMPOTENT_TOOLS_REDIS_URL stands for --redis; --db overrides it', async () => {
    const prefix = uniquePrefix();
    const store = new lib.RedisStore({ url: redis.url, prefix });
    const op = lib.idempotent(async function op() {
      return 'done';
    }, { store });
    await op.withKey('cli-env-1')();
    await store.close();
    const r = await runNode(['dist/cli.js', '--prefix', prefix, 'inspect', '--key', 'cli-env-1', '--json'], {
      env: { IDEMPOTENT_TOOLS_REDIS_URL: redis.url },
    });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ key: 'cli-env-1', status: 'completed', result: 'done' });
    const overridden = await runNode(['dist/cli.js', '--db', '/nonexistent/store.db', 'inspect'], {
      env: { IDEMPOTENT_TOOLS_REDIS_URL: redis.url },
    });
    expect(overridden.stderr).toMatch(/no store file at \/nonexistent\/store\.db/);
  });

  it('a malformed URL from the environment is named by its variable, in the CLI and in the library (issue 37, item 4)', async () => {
    for (const [variable, url] of [['IDEMPOTENT_TOOLS_REDIS_URL', 'redis//no-colon'], ['IDEMPOTENT_TOOLS_POSTGRES_URL', 'mysql://x']]) {
      const cli = await runNode(['dist/cli.js', 'inspect'], { env: { [variable]: url } });
      expect(cli.code, cli.stderr).toBe(2);
      expect(cli.stderr).toContain(`${variable} (in the environment): `);
      expect(cli.stderr.split('\n')[0]).not.toMatch(/--redis|--postgres|RedisStore|PostgresStore/);
      const library = await runNode(['-e', "require('./dist/index.js').idempotent(async function f() {})().catch((e) => { console.error(e.message); process.exitCode = 3; })"], { env: { [variable]: url } });
      expect(library.code).toBe(3);
      expect(library.stderr).toMatch(new RegExp(`${variable} \\(in the environment\\): .*fix or unset the variable`));
    }
  });
});
