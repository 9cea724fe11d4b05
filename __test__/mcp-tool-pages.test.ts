// Issue 36 finding 8, in the MCP proxy: to decide whether a tool is guarded, the proxy
// reads the server's tool list (its annotations), page after page until a page has no
// nextCursor. A server that always gives one (the same cursor, or a new one each time)
// kept that walk going forever, and the call with it. The walk now ends: a repeated
// cursor at once, and never more than 1000 pages; the call fails with an error that says
// why, and is not sent (whether it is safe to guard is not known).

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { ROOT, tempDir } from './helpers';
import { alive, connect, type Proxied } from './mcp-helpers';

const PAGING = join(ROOT, '__test__', 'fixtures', 'mcp-paging-server.mjs');

let open: Proxied[] = [];
afterEach(async () => {
  await Promise.allSettled(open.map((p) => p.close()));
  for (const p of open) if (alive(p.pid)) process.kill(p.pid, 'SIGKILL');
  open = [];
});

async function callThrough(paging: 'same' | 'new', config?: object) {
  const dir = tempDir();
  const record = join(dir, 'pages.log');
  const flags = ['--db', join(dir, 'store.db')];
  if (config !== undefined) {
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
    flags.push('--config', join(dir, 'config.json'));
  }
  const p = await connect({ flags, server: [process.execPath, PAGING], env: { PAGING: paging, RECORD: record } });
  open.push(p);
  const outcome = await p.client.callTool({ name: 'act', arguments: {} }).then(
    (result) => ({ result }),
    (e: Error) => ({ message: e.message }),
  );
  const pages = existsSync(record) ? readFileSync(record, 'utf8').trim().split('\n') : [];
  return { outcome, pages, p };
}

describe("the MCP proxy reads a tool list that never ends", () => {
  it('the same cursor again: the call fails at once, saying so', async () => {
    const { outcome, pages } = await callThrough('same');
    // Before: it paged on until the server gave up (20,000 pages), and the call failed as the server left.
    expect(outcome).toEqual({ message: expect.stringMatching(/tools\/list repeated a cursor \("again"\) after 2 pages.*broken or hostile server.*"act" was not sent/) });
    expect(pages).toHaveLength(2);
  });

  it('a new cursor each time: the call fails after 1000 pages, saying so', async () => {
    const { outcome, pages } = await callThrough('new');
    expect(outcome).toEqual({ message: expect.stringMatching(/tools\/list went on for more than 1000 pages.*broken or hostile server.*"act" was not sent/) });
    expect(pages).toHaveLength(1000);
  });

  it('a config rule that says whether the tool is guarded: the list is not read, the call runs', async () => {
    const { outcome, pages } = await callThrough('same', { tools: { act: { guard: true } } });
    expect(outcome).toEqual({ result: expect.objectContaining({ content: [{ type: 'text', text: 'ran' }] }) });
    expect(pages).toEqual([]);
  });
});
