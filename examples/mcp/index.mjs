// idempotent-tools mcp in front of an MCP server with a side effect (email-server.mjs):
// a client retries send_email (as one does after a timeout or a reconnect), and the
// email goes out once; the retry gets the first call's result, marked as a replay.
//
//   node examples/mcp/index.mjs      (offline: a local server, a temp SQLite file)
//
// Exits non-zero if the email was sent more than once.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
// The package's own bin (what `npx idempotent-tools` runs once the package is installed).
const cli = join(dirname(require.resolve('idempotent-tools/package.json')), 'dist', 'cli.js');

const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-mcp-example-'));
const outbox = join(dir, 'outbox.jsonl');
try {
  const client = new Client({ name: 'example-client', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      // What a client's config would say: idempotent-tools mcp [options] -- <the real server>
      args: [cli, 'mcp', '--db', join(dir, 'store.db'), '--log', '--', process.execPath, join(here, 'email-server.mjs')],
      env: { ...process.env, OUTBOX: outbox },
    }),
  );

  const email = { name: 'send_email', arguments: { to: 'ada@example.com', subject: 'Your invoice' } };
  const first = await client.callTool(email);
  const retry = await client.callTool(email); // the client did not see the answer, say
  console.log('first:', first.content[0].text);
  console.log('retry:', retry.content[0].text, retry._meta);
  console.log('outbox:', (await client.callTool({ name: 'list_outbox', arguments: {} })).content[0].text);
  await client.close();

  const sent = readFileSync(outbox, 'utf8').split('\n').filter(Boolean).length;
  if (sent !== 1 || retry._meta?.['idempotent-tools/replayed'] !== true) {
    console.error(`FAILED: ${sent} emails sent`);
    process.exitCode = 1;
  } else {
    console.log('One email sent; the retry was a replay.');
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
