// idempotent-tools/mcp-server's idempotentTool on fastmcp over HTTP (issue 36, finding 1): who
// is calling. A stateless httpStream server without authenticate cannot tell callers apart,
// and a client may send any mcp-session-id header it likes: the guard refuses, naming
// "scope", instead of keying every caller as one (or by the header). With authenticate
// returning a subject, each account runs its own call and a retry replays. Run by
// .ci/node22-e2e.sh, with this clone's build.
import { appendFileSync, mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { FastMCP } from 'fastmcp';
import { z } from 'zod';
import { SqliteStore } from 'idempotent-tools';
import { idempotentTool } from 'idempotent-tools/mcp-server';

const dir = mkdtempSync(join(tmpdir(), 'e2e-fastmcp-callers-'));
const log = join(dir, 'charges.log');
const store = new SqliteStore({ path: join(dir, 'store.db') });
const charges = () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').filter(Boolean) : []);

function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function server(authenticate) {
  const port = await freePort();
  const app = new FastMCP({ name: 'payments', version: '1.0.0', ...(authenticate ? { authenticate } : {}) });
  app.addTool({
    name: 'send_payment',
    parameters: z.object({ orderId: z.string(), cents: z.number() }),
    execute: idempotentTool(async ({ orderId, cents }, context) => {
      const who = context.session?.sub ?? 'anyone';
      appendFileSync(log, `${who} ${orderId} ${cents}\n`);
      return `charged ${orderId} ${cents} for ${who}`;
    }, { name: 'send_payment', store }),
  });
  await app.start({ transportType: 'httpStream', httpStream: { port, host: '127.0.0.1', stateless: true } });
  return { app, url: new URL(`http://127.0.0.1:${port}/mcp`) };
}

async function client(url, headers) {
  const c = new Client({ name: 'e2e', version: '1.0.0' });
  await c.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));
  return c;
}

const text = (r) => JSON.stringify(r.content);
let ok = true;
const check = (cond, what) => {
  console.log(`${cond ? 'ok  ' : 'FAIL'} fastmcp callers: ${what}`);
  ok &&= cond;
};

{
  const { app, url } = await server(undefined);
  const alice = await client(url, { 'mcp-session-id': 'session-alice' });
  const mallory = await client(url, { 'mcp-session-id': 'session-alice' }); // sends alice's header
  const args = { orderId: 'o-1', cents: 100 };
  const a = await alice.callTool({ name: 'send_payment', arguments: args });
  const m = await mallory.callTool({ name: 'send_payment', arguments: args });
  check(a.isError === true && /\\"scope\\" option/.test(text(a)), 'stateless, no authenticate: refused, naming "scope"');
  check(m.isError === true && !/charged/.test(text(m)), "a client sending another's session header gets no result of theirs");
  check(charges().length === 0, 'nothing ran');
  await alice.close();
  await mallory.close();
  await app.stop();
}
{
  const users = { 'token-alice': 'alice', 'token-bob': 'bob' };
  const { app, url } = await server(async (request) => {
    const token = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
    if (!users[token]) throw new Response(null, { status: 401 });
    return { sub: users[token], token };
  });
  const alice = await client(url, { authorization: 'Bearer token-alice' });
  const bob = await client(url, { authorization: 'Bearer token-bob' });
  const args = { orderId: 'o-2', cents: 200 };
  const a1 = await alice.callTool({ name: 'send_payment', arguments: args });
  const b1 = await bob.callTool({ name: 'send_payment', arguments: args });
  const a2 = await alice.callTool({ name: 'send_payment', arguments: args });
  check(/for alice/.test(text(a1)) && /for bob/.test(text(b1)), 'authenticate with a subject: each account runs its own call');
  check(text(a2) === text(a1), "a repeat gets the account's own first result");
  check(JSON.stringify(charges().sort()) === JSON.stringify(['alice o-2 200', 'bob o-2 200']), 'two charges, one per account');
  await alice.close();
  await bob.close();
  await app.stop();
}
await store.close();
process.exit(ok ? 0 : 1);
