// The MCP Inspector's CLI mode as a client of `idempotent-tools mcp` (a client nobody here
// wrote): it lists the tools through the proxy, and a retried call (with and without its
// idempotency key) runs the upstream tool once. The Inspector declares Node >= 22.19, so it
// is installed here, apart from the main devDependencies (which stay on what Node 20
// installs). Run by .ci/node22-e2e.sh, with this clone's build.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const CLI = join(root, 'dist', 'cli.js');
const COUNTING = join(root, '__test__', 'fixtures', 'mcp-counting-server.mjs');
const require = createRequire(import.meta.url);
const INSPECTOR = join(dirname(require.resolve('@modelcontextprotocol/inspector/package.json')), 'clients', 'launcher', 'build', 'index.js');
const REPLAYED = 'idempotent-tools/replayed';

let failed = false;
function check(what, ok, detail = '') {
  failed ||= !ok;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${detail ? `: ${detail}` : ''}`);
}

const dir = mkdtempSync(join(tmpdir(), 'e2e-inspector-'));
const log = join(dir, 'count.log');
const config = join(dir, 'mcp.json');
writeFileSync(config, JSON.stringify({
  mcpServers: {
    proxied: {
      command: process.execPath,
      args: [CLI, 'mcp', '--db', join(dir, 'store.db'), '--', process.execPath, COUNTING],
      env: { COUNT_LOG: log },
    },
  },
}));

async function inspector(args) {
  const { stdout } = await run(process.execPath, [INSPECTOR, '--cli', '--config', config, '--server', 'proxied', ...args], {
    cwd: root,
    timeout: 60_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  return JSON.parse(stdout.slice(stdout.indexOf('{')));
}
const starts = (id) => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : [])
  .filter((e) => e.event === 'start' && e.id === id).length;

const tools = await inspector(['--method', 'tools/list']);
check('tools/list goes through the proxy', JSON.stringify(tools.tools.map((t) => t.name)) === '["act","look","put"]', JSON.stringify(tools.tools.map((t) => t.name)));

const call = ['--method', 'tools/call', '--tool-name', 'act', '--tool-arg', 'id=from-inspector'];
const first = await inspector(call);
const second = await inspector(call);
check('the first call runs', first._meta?.[REPLAYED] === undefined);
check('the retry is replayed with the first result', second._meta?.[REPLAYED] === true && JSON.stringify(second.structuredContent) === JSON.stringify(first.structuredContent));
check('the upstream tool ran once', starts('from-inspector') === 1, `${starts('from-inspector')} runs`);

const keyed = ['--method', 'tools/call', '--tool-name', 'act', '--tool-arg', 'id=keyed', '--tool-metadata', 'idempotencyKey=inspector-key-1'];
await inspector(keyed);
const again = await inspector(keyed);
check('a retry under the client\'s idempotency key is replayed', again._meta?.[REPLAYED] === true);
check('the keyed call ran once', starts('keyed') === 1, `${starts('keyed')} runs`);

process.exit(failed ? 1 : 0);
