// The MCP proxy as idempotentMcpServers runs it (`--tool-call-id`): who the calls belong to
// (IDEMPOTENT_TOOLS_MCP_SCOPE), and a numbered tool call id, which tells no call from a later
// one (issue 36: the identity harness's Claude driver found both). A real SDK client, the
// built CLI, the counting server, one SQLite file shared by two users' proxies.

import { join } from 'node:path';

import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';

import { tempDir } from './helpers';
import { COUNTING, connect, count, type Proxied } from './mcp-helpers';

const open: Proxied[] = [];
afterEach(async () => {
  for (const p of open.splice(0)) await p.close();
});

async function proxyFor(dir: string, user: string | undefined, extraFlags: string[] = []) {
  const p = await connect({
    flags: ['--db', join(dir, 'store.db'), '--tool-call-id', ...extraFlags],
    server: [process.execPath, COUNTING],
    env: { COUNT_LOG: join(dir, 'count.log'), ...(user === undefined ? {} : { IDEMPOTENT_TOOLS_MCP_SCOPE: JSON.stringify(user) }) },
    cwd: dir,
  });
  open.push(p);
  return p;
}

const act = (p: Proxied, id: string, meta: Record<string, unknown>) =>
  p.client.request({ method: 'tools/call', params: { name: 'act', arguments: { id }, _meta: meta } as never }, CallToolResultSchema);

describe('the MCP proxy under idempotentMcpServers: callers and calls', () => {
  it("two users' proxies of one server on one store, each sending the same client key: two calls with the scope, one without it (the control)", async () => {
    const dir = tempDir();
    const unique = (n: number) => ({ 'claudecode/toolUseId': `toolu_0${n}A09q90qw90lq917835lq9`, idempotencyKey: 'order-42' });
    await act(await proxyFor(dir, 'alice'), 'o-42', unique(1));
    await act(await proxyFor(dir, 'bob'), 'o-42', unique(2));
    expect(count(join(dir, 'count.log'), 'start', 'o-42')).toBe(2);
    const control = tempDir();
    await act(await proxyFor(control, undefined), 'o-42', unique(1));
    await act(await proxyFor(control, undefined), 'o-42', unique(2));
    expect(count(join(control, 'count.log'), 'start', 'o-42')).toBe(1);
  });

  it('a numbered tool call id (a gateway that counts) without a client key is refused, and runs nothing; with a key it runs once', async () => {
    const dir = tempDir();
    const p = await proxyFor(dir, 'alice');
    await expect(act(p, 'o-7', { 'claudecode/toolUseId': 'toolu_01' })).rejects.toMatchObject({ code: -32602, message: expect.stringMatching(/a number its model's gateway counts/) });
    expect(count(join(dir, 'count.log'), 'start', 'o-7')).toBe(0);
    await act(p, 'o-7', { 'claudecode/toolUseId': 'toolu_01', idempotencyKey: 'order-7' });
    await act(p, 'o-7', { 'claudecode/toolUseId': 'toolu_01', idempotencyKey: 'order-7' });
    expect(count(join(dir, 'count.log'), 'start', 'o-7')).toBe(1);
  });
});
