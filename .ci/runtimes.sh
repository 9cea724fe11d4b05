#!/usr/bin/env bash
# Bun and Deno (the README's runtimes table). Both come from the npm registry (the `bun` and
# `deno` packages carry the official binaries); they are installed once into $CI_RUNTIMES_DIR.
# Under each runtime, against this clone's build (a project whose node_modules/idempotent-tools
# links here, as an installed copy would sit):
#   - the store conformance suite on SQLite and on Redis (node:test, as a user's suite would),
#   - the public API from ESM and from CommonJS: a replay, step(), a framework helper,
#   - the CLI (inspect, stats) on the SQLite file and the Redis prefix they wrote, run the way
#     each runtime runs a package's bin (bun --bun x idempotent-tools, deno run npm:idempotent-tools),
#   - the MCP proxy run by the runtime, a client calling a tool with a side effect twice.
# Deno runs with the permissions the README lists, not -A. Needs Redis at $REDIS_URL (default
# redis://127.0.0.1:6379/15; .ci/run starts it). Prints "runtimes: N passed, M failed" last.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=${CI_RUNTIMES_DIR:-${TMPDIR:-/tmp}/idempotent-tools-ci-runtimes}
want_bun=1.4.5
want_deno=2.9.6
redis_url=${REDIS_URL:-redis://127.0.0.1:6379/15}
passed=0
failed=0
check() { # check "what" command...
  local what=$1; shift
  if "$@"; then passed=$((passed + 1)); echo "runtimes: ok   $what"; else failed=$((failed + 1)); echo "runtimes: FAIL $what"; fi
}
finish() { echo "runtimes: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

if [ "$("$dir/node_modules/.bin/bun" --version 2>/dev/null)" != "$want_bun" ] ||
   ! "$dir/node_modules/.bin/deno" --version 2>/dev/null | grep -q "^deno $want_deno "; then
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] || echo '{ "private": true }' > "$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund --no-save "bun@$want_bun" "deno@$want_deno" ||
    { failed=$((failed + 1)); finish; }
fi
bun=$dir/node_modules/.bin/bun
deno=$dir/node_modules/.bin/deno
"$bun" --version && "$deno" --version | head -1
[ -f "$root/dist/index.js" ] || { echo "runtimes: build first (npm ci)"; failed=$((failed + 1)); finish; }

work=$(mktemp -d "${TMPDIR:-/tmp}/idempotent-tools-runtimes-XXXXXX")
trap 'rm -rf "$work"' EXIT
app=$work/app
mkdir -p "$app/node_modules/.bin" "$app/home"
# A user's project: the package as a dependency, in node_modules (Deno reads package.json).
echo '{ "name": "runtime-app", "private": true, "type": "module", "dependencies": { "idempotent-tools": "*" } }' > "$app/package.json"
ln -s "$root" "$app/node_modules/idempotent-tools"
ln -s ../idempotent-tools/dist/cli.js "$app/node_modules/.bin/idempotent-tools"
# What the smoke's framework helper and the MCP client need, from this clone's devDependencies.
for dep in zod @modelcontextprotocol; do ln -s "$root/node_modules/$dep" "$app/node_modules/$dep"; done
base_prefix="idempotent-tools-runtimes-$$"

cat > "$app/conformance.test.mjs" <<'JS'
import { describe, it } from 'node:test';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RedisStore, SqliteStore } from 'idempotent-tools';
import { storeConformance } from 'idempotent-tools/testing';
storeConformance({ describe, it }, {
  name: 'SqliteStore',
  makeStore: () => new SqliteStore({ path: join(mkdtempSync(join(tmpdir(), 'conformance-')), 'store.db') }),
  openSecondHandle: (store) => new SqliteStore({ path: store.path }),
});
let n = 0;
const prefixes = new WeakMap();
storeConformance({ describe, it }, {
  name: 'RedisStore',
  makeStore: () => {
    const prefix = `${process.env.PREFIX}conformance-${++n}:`;
    const store = new RedisStore({ url: process.env.REDIS_URL, prefix });
    prefixes.set(store, prefix);
    return store;
  },
  openSecondHandle: (store) => new RedisStore({ url: process.env.REDIS_URL, prefix: prefixes.get(store) }),
  timeScale: 2,
});
JS

# The public API as an ES module: a replay on SQLite and on Redis, step(), a framework helper.
cat > "$app/smoke.mjs" <<'JS'
import { RedisStore, SqliteStore, idempotent, step } from 'idempotent-tools';
import { idempotentTools } from 'idempotent-tools/ai-sdk';
const runtime = typeof Deno !== 'undefined' ? `Deno ${Deno.version.deno}` : typeof Bun !== 'undefined' ? `Bun ${Bun.version}` : `Node ${process.version}`;
const stores = [new SqliteStore({ path: 'store.db' }), new RedisStore({ url: process.env.REDIS_URL, prefix: process.env.PREFIX })];
for (const store of stores) {
  let charges = 0;
  let steps = 0;
  const charge = idempotent(async function charge(order, cents) {
    const receipt = await step('receipt', async () => `r_${++steps}`);
    return { chargeId: `ch_${++charges}`, order, cents, receipt };
  }, { store });
  const first = await charge('o-42', 1999);
  const again = await charge('o-42', 1999);
  if (charges !== 1 || steps !== 1 || JSON.stringify(first) !== JSON.stringify(again)) throw new Error(`${store.constructor.name}: ran ${charges} times`);
  let sent = 0;
  const tools = idempotentTools({ send: { execute: async ({ to }) => `sent ${++sent} to ${to}` } }, { store, scope: 'chat-1' });
  // A provider's unique call id: a numbered one ('call_1') in a turn with no earlier answer is
  // refused since issue 36 (nothing tells a retry from a later request in the same words).
  const options = { toolCallId: 'call_Qw8rT2mZp4Lk9vXn3Bc7Hd1s', messages: [] };
  await tools.send.execute({ to: 'ada' }, options);
  await tools.send.execute({ to: 'ada' }, options);
  if (sent !== 1) throw new Error(`${store.constructor.name}: the AI SDK tool ran ${sent} times`);
  console.log(`${runtime}: ${store.constructor.name} replays (a call, a step, a tool)`);
  await store.close();
}
JS
# The same from CommonJS (require), as a CommonJS project would load it.
cat > "$app/smoke.cjs" <<'JS'
const { idempotent, SqliteStore } = require('idempotent-tools');
const store = new SqliteStore({ path: 'store-cjs.db' });
let runs = 0;
const f = idempotent(async function f(x) { runs += 1; return x; }, { store });
f(1).then(() => f(1)).then(() => {
  if (runs !== 1) throw new Error(`ran ${runs} times`);
  console.log('require: replays');
  return store.close();
});
JS

# The MCP proxy, run by the runtime; the client and the upstream server run on Node.
cp "$root/examples/mcp/email-server.mjs" "$app/"
cat > "$app/mcp-client.mjs" <<'JS'
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
const [outbox, ...proxy] = process.argv.slice(2);
const client = new Client({ name: 'runtimes-check', version: '1.0.0' });
await client.connect(new StdioClientTransport({
  command: proxy[0], args: [...proxy.slice(1), 'mcp', '--db', 'mcp.db', '--', process.execPath, 'email-server.mjs'],
  env: { ...process.env, OUTBOX: outbox }, stderr: 'inherit',
}));
const email = { name: 'send_email', arguments: { to: 'ada@example.com', subject: 'runtimes' } };
await client.callTool(email);
const retry = await client.callTool(email);
await client.close();
const sent = readFileSync(outbox, 'utf8').split('\n').filter(Boolean).length;
console.log(`mcp: ${sent} email(s) sent, the retry replayed: ${retry._meta?.['idempotent-tools/replayed'] === true}`);
process.exit(sent === 1 && retry._meta?.['idempotent-tools/replayed'] === true ? 0 : 1);
JS

in_app() { (cd "$app" && timeout 300 env HOME="$app/home" REDIS_URL="$redis_url" PREFIX="$prefix" IDEMPOTENT_TOOLS_DB="$app/home/default.db" "$@"); }
cli_shows_charge() { # cli_shows_charge <runner...>: inspect --json on the SQLite file and the Redis prefix
  local out
  out=$(in_app "$@" --db store.db inspect --json) && echo "$out" | grep -q '"name": *"charge"' || { echo "$out" | head -c 400; return 1; }
  out=$(in_app "$@" --redis "$redis_url" --prefix "$prefix" inspect --json) && echo "$out" | grep -q '"name": *"charge"' || { echo "$out" | head -c 400; return 1; }
  in_app "$@" --db store.db stats >/dev/null
}
mcp_ok() { rm -f "$app/outbox.jsonl" "$app"/mcp.db*; in_app node mcp-client.mjs "$app/outbox.jsonl" "$@"; }

# Deno: the permissions the README lists (no -A). --allow-ffi loads the native addon (whose own
# file and network I/O Deno's permissions do not see); read and write for the store's file;
# env for IDEMPOTENT_TOOLS_*; sys for the home folder. The proxy adds --allow-run (its server).
deno_flags=(--allow-ffi --allow-read --allow-write --allow-env --allow-sys --no-prompt)

rm -f "$app"/store*.db*
prefix="$base_prefix-bun:" # each runtime starts from no records
check "Bun: the public API (ESM), on SQLite and Redis" in_app "$bun" smoke.mjs
check "Bun: require()" in_app "$bun" smoke.cjs
check "Bun: the conformance suite on SQLite and Redis (bun test)" in_app "$bun" test ./conformance.test.mjs
check "Bun: the CLI (bun --bun x idempotent-tools inspect, stats)" cli_shows_charge "$bun" --bun x idempotent-tools
check "Bun: the MCP proxy (bun --bun x idempotent-tools mcp)" mcp_ok "$bun" --bun x idempotent-tools

rm -f "$app"/store*.db*
prefix="$base_prefix-deno:"
check "Deno: the public API (ESM), on SQLite and Redis" in_app "$deno" run "${deno_flags[@]}" smoke.mjs
check "Deno: require()" in_app "$deno" run "${deno_flags[@]}" smoke.cjs
# --no-check: the suite is JavaScript; type-checking it would need @types/node in the project.
check "Deno: the conformance suite on SQLite and Redis (deno test)" in_app "$deno" test "${deno_flags[@]}" --no-check conformance.test.mjs
check "Deno: the CLI (deno run npm:idempotent-tools inspect, stats)" cli_shows_charge "$deno" run "${deno_flags[@]}" npm:idempotent-tools
check "Deno: the MCP proxy (deno run --allow-run npm:idempotent-tools mcp)" mcp_ok "$deno" run "${deno_flags[@]}" --allow-run npm:idempotent-tools

# Leave nothing on the shared Redis.
redis-cli -u "$redis_url" --scan --pattern "$base_prefix-*" | xargs -r redis-cli -u "$redis_url" unlink >/dev/null || true
finish
