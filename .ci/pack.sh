#!/usr/bin/env bash
# The package as a user gets it. `npm run pack:local` builds this machine's binary (release,
# glibc 2.17 on Linux x64; or reuses the one npm ci built) and writes the two tarballs publishing would upload; they are
# installed into a new project with no cargo/rustc on the PATH and an empty HOME, and that
# installed copy is required, imported, run as `npx idempotent-tools`, and put through the
# store conformance suite, under Node 20 (this machine's), 22 and 24.
# Prints "pack: N passed, M failed" as its last line; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
passed=0
failed=0
check() { # check "what" command...
  local what=$1; shift
  if "$@"; then passed=$((passed + 1)); echo "pack: ok   $what"; else failed=$((failed + 1)); echo "pack: FAIL $what"; fi
}
finish() { echo "pack: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

# Build once: the release binary `npm ci` (prepare) built is what pack:local packs, not a
# second build of the same sources (that took minutes). In CI nothing changed the sources
# since, so the build must be reused; elsewhere (sources edited) pack:local builds again.
fresh_before=no
node -e "process.exit(require('./scripts/build-native.js').fresh({ release: true, requireGlibc217: true }) ? 0 : 1)" && fresh_before=yes
status_before=$(git status --porcelain 2>/dev/null)
pack_log=$(mktemp "${TMPDIR:-/tmp}/idempotent-tools-pack-log-XXXXXX")
npm run pack:local -- --portable 2>&1 | tee "$pack_log"
[ "${PIPESTATUS[0]}" -eq 0 ] || { failed=$((failed + 1)); finish; }
reused_ok() {
  if [ "$fresh_before" = yes ]; then grep -q "reusing the release build" "$pack_log"; return; fi
  [ "${CI:-}" != true ] || { echo "pack: CI's npm ci left no fresh release build in native/ (see scripts/build-native.js)"; return 1; }
  echo "pack: the sources changed since the last release build: pack:local built again"
}
check "pack:local reuses the release build of npm ci when the sources did not change" reused_ok
# It packs dist/ as npm ci built it too: rebuilding rewrote dist/ in place while the tests
# beside this step (.ci/run's lanes) were loading it.
ts_reused_ok() {
  grep -q "reusing the TypeScript build in dist/" "$pack_log" && return
  [ "${CI:-}" != true ] || { echo "pack: pack:local rebuilt dist/ although lib/ did not change since npm ci"; return 1; }
  echo "pack: lib/ changed since the last TypeScript build: pack:local built it again"
}
check "pack:local reuses the TypeScript build of npm ci when lib/ did not change" ts_reused_ok
rm -f "$pack_log"
# pack:local writes no tracked file: the work tree is as it was (in a clean clone: clean).
tree_ok() {
  local after
  after=$(git status --porcelain 2>/dev/null)
  [ "$after" = "$status_before" ] || { echo "pack: pack:local changed the work tree:"; diff <(echo "$status_before") <(echo "$after"); return 1; }
}
check "pack:local leaves the work tree as it was (git status --porcelain unchanged)" tree_ok
# The sizes it measured (pack/sizes.md) and the table committed in docs/installing.md agree.
check "docs/installing.md's size table is what pack:local measured (within 10%)" node scripts/pack-local.js --compare-sizes
main=$(ls pack/idempotent-tools-[0-9]*.tgz)
platform=$(ls pack/idempotent-tools-*-*.tgz | grep -v "^$main$")
ls -l pack/

# The shipped Linux glibc binary must load on glibc 2.17: no symbol may need a newer one.
glibc_ok() {
  local node_file
  node_file=$(tar -tzf "$platform" | grep '\.node$') || return 1
  tar -xzf "$platform" -C "$work" "$node_file" || return 1
  local highest
  highest=$(objdump -T "$work/$node_file" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  echo "pack: highest glibc symbol version: $highest"
  [ -n "$highest" ] && [ "$(printf '%s\nGLIBC_2.17\n' "$highest" | sort -V | tail -1)" = "GLIBC_2.17" ]
}

work=$(mktemp -d "${TMPDIR:-/tmp}/idempotent-tools-pack-XXXXXX")
trap 'rm -rf "$work"' EXIT

# A user's install never compiles: neither published package.json has a script at all.
no_scripts() {
  local tgz
  for tgz in "$main" "$platform"; do
    tar -xzOf "$tgz" package/package.json |
      node -e "const p = JSON.parse(require('fs').readFileSync(0, 'utf8')); if (p.scripts) { console.error(p.name, 'has scripts:', Object.keys(p.scripts)); process.exit(1) }" || return 1
  done
}
check "no scripts (prepare, install, postinstall...) in the published package.json files" no_scripts
optional_ok() { # the main package lists every npm/<platform> package at its exact version
  tar -xzOf "$main" package/package.json | node -e "
    const p = JSON.parse(require('fs').readFileSync(0, 'utf8'));
    const want = require('fs').readdirSync('npm').sort().map((id) => [p.name + '-' + id, p.version]);
    const got = Object.entries(p.optionalDependencies || {}).sort();
    if (JSON.stringify(got) !== JSON.stringify(want)) { console.error('optionalDependencies:', got, 'want', want); process.exit(1); }"
}
check "the main package lists all 7 platform packages in optionalDependencies at its version" optional_ok
if [[ "$platform" == *linux-*-gnu* ]]; then check "the binary needs nothing newer than GLIBC_2.17" glibc_ok; fi

eval "$(.ci/nodes.sh)" || { failed=$((failed + 1)); finish; }
node20_bin=$(dirname "$(command -v node)")

# A PATH with node and npm but without cargo and rustc (rustup puts them in ~/.cargo/bin).
clean_path() { # clean_path <node bin dir>
  local out=$1 dir
  IFS=: read -ra dirs <<< "$PATH"
  for dir in "${dirs[@]}"; do
    [ -x "$dir/cargo" ] || [ -x "$dir/rustc" ] || [ -x "$dir/rustup" ] || out="$out:$dir"
  done
  echo "$out"
}

app="$work/app"
mkdir -p "$app" "$work/home"
echo '{ "name": "user-app", "version": "1.0.0", "private": true }' > "$app/package.json"
as_user() { # as_user <node bin dir> command...: no Rust, an empty HOME, in the app
  local bin=$1; shift
  (cd "$app" && env -u npm_config_prefix PATH="$(clean_path "$bin")" HOME="$work/home" \
    IDEMPOTENT_TOOLS_DB="$work/home/store.db" "$@")
}

install_ok() {
  as_user "$node20_bin" sh -c '! command -v cargo && ! command -v rustc' >/dev/null || { echo "pack: cargo is still on the PATH"; return 1; }
  as_user "$node20_bin" npm install --no-audit --no-fund "$root/$main" "$root/$platform" || return 1
  # Nothing from the clone, nothing compiled: the addon comes from the platform package.
  [ ! -e "$app/node_modules/idempotent-tools/native/"*.node ] &&
    [ -f "$app/node_modules/idempotent-tools/binding.js" ] &&
    ls "$app"/node_modules/idempotent-tools-*/*.node
}
check "npm install of the two tarballs without Rust" install_ok
echo "pack: installed size (kB, apparent):"
(cd "$app/node_modules" && du -sk --apparent-size idempotent-tools idempotent-tools-*)
echo "pack: node_modules in all: $(du -sk --apparent-size "$app/node_modules" | cut -f1) kB apparent, $(du -sk "$app/node_modules" | cut -f1) kB on disk"
# The footprint the README claims: a bare install adds the package and its platform binary,
# nothing else (the MCP proxy's SDK is bundled into dist/apps/mcp/cli.js, see scripts/bundle-mcp.js).
only_binary_ok() {
  local got want
  got=$(cd "$app/node_modules" && ls -A | grep -v -e '^\.package-lock\.json$' -e '^\.bin$' | sort | tr '\n' ' ')
  want="idempotent-tools $(basename "$platform" | sed 's/-[0-9][^-]*\.tgz$//') "
  echo "pack: node_modules holds: $got"
  [ "$got" = "$want" ] || { echo "pack: want only: $want"; return 1; }
}
check "a bare npm install adds only the package and its platform binary" only_binary_ok

cat > "$app/use.cjs" <<'JS'
const { idempotent, SqliteStore } = require('idempotent-tools');
let runs = 0;
const charge = idempotent(async function charge(cents) { runs += 1; return { cents, runs }; });
(async () => {
  const a = await charge(1999);
  const b = await charge(1999);
  if (runs !== 1 || a.runs !== b.runs) throw new Error(`ran ${runs} times`);
  if (typeof SqliteStore !== 'function') throw new Error('no SqliteStore');
  console.log(`require: ok (${process.version})`);
})().catch((e) => { console.error(e); process.exit(1); });
JS
cat > "$app/use.mjs" <<'JS'
import { idempotent, currentKey } from 'idempotent-tools';
import { idempotentTool } from 'idempotent-tools/ai-sdk';
let key;
const f = idempotent(async function f(x) { key = currentKey(); return x; });
if ((await f(1)) !== 1 || typeof key !== 'string' || typeof idempotentTool !== 'function') process.exit(1);
console.log(`import: ok (${process.version})`);
JS
cat > "$app/conformance.mjs" <<'JS'
import { describe, it } from 'node:test';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteStore } from 'idempotent-tools';
import { storeConformance } from 'idempotent-tools/testing';
storeConformance({ describe, it }, {
  name: 'SqliteStore (installed copy)',
  makeStore: () => new SqliteStore({ path: join(mkdtempSync(join(tmpdir(), 'conformance-')), 'store.db') }),
  openSecondHandle: (store) => new SqliteStore({ path: store.path }),
  // Leases of a quarter second would be lost to a loaded machine's pauses: scale the times.
  timeScale: 4,
});
JS

cat > "$app/types.mts" <<'TS'
import { idempotent, SqliteStore, type IdempotencyRecord } from 'idempotent-tools';
import { idempotentTool } from 'idempotent-tools/langgraph';
const store = new SqliteStore({ path: 'types.db' });
const add = idempotent(async function add(x: number) { return x + 1; }, { store });
const n: number = await add(1);
const record: IdempotencyRecord | null = await store.get(add.keyFor(1));
void idempotentTool; void n; void record;
TS
types_ok() { # the installed copy's types, as a TypeScript user compiles against them
  as_user "$node20_bin" node "$root/node_modules/typescript/bin/tsc" --strict --noEmit --skipLibCheck false \
    --module nodenext --moduleResolution nodenext --target es2022 \
    --types node --typeRoots "$root/node_modules/@types" types.mts
}
check "the installed copy's types compile under tsc --strict" types_ok

# TypeScript 7 (the native compiler) lists no @types by default: a project that never names
# Node's types must compile against every entry point's types (issue 37, item 5: two
# internal declarations named node:async_hooks and node:diagnostics_channel, one NodeJS.ProcessEnv).
cat > "$app/types-every-entry.mts" <<'TS'
import * as main from 'idempotent-tools';
import * as testing from 'idempotent-tools/testing';
import * as langgraph from 'idempotent-tools/langgraph';
import * as langchain from 'idempotent-tools/langchain';
import * as aiSdk from 'idempotent-tools/ai-sdk';
import * as openaiAgents from 'idempotent-tools/openai-agents';
import * as mastra from 'idempotent-tools/mastra';
import * as claude from 'idempotent-tools/claude-agent-sdk';
import * as mcpServer from 'idempotent-tools/mcp-server';
import * as pg from 'idempotent-tools/pg';
import * as otel from 'idempotent-tools/otel';
import * as ui from 'idempotent-tools/ui';
const add = main.idempotent(async function add(x: number) { return x + 1; });
const n: number = await add(1);
void [n, testing, langgraph, langchain, aiSdk, openaiAgents, mastra, claude, mcpServer, pg, otel, ui];
TS
ts7_ok() {
  npm install --prefix "$work/ts7" --no-audit --no-fund --no-save typescript@7 >/dev/null || return 1
  "$work/ts7/node_modules/.bin/tsc" --version
  as_user "$node20_bin" node "$work/ts7/node_modules/typescript/bin/tsc" --strict --noEmit --skipLibCheck false \
    --module nodenext --moduleResolution nodenext --target es2022 types-every-entry.mts
}
check "every entry point's types compile under TypeScript 7, without Node's types" ts7_ok

cli_ok() { # the bin, through npx, against the store the require step wrote
  local bin=$1 out
  out=$(as_user "$bin" npx --no-install idempotent-tools inspect --json) || return 1
  echo "$out" | head -c 300; echo
  echo "$out" | grep -q '"name": *"charge"'
}
for bin in "$node20_bin" "$NODE22_BIN" "$NODE24_BIN"; do
  v=$("$bin/node" --version)
  rm -f "$work/home/store.db"*
  check "require() on $v" as_user "$bin" node use.cjs
  check "import on $v" as_user "$bin" node use.mjs
  check "npx idempotent-tools inspect on $v" cli_ok "$bin"
  check "conformance suite against the installed copy on $v" as_user "$bin" node --test conformance.mjs
done
# The MCP proxy from the installed copy, which has no @modelcontextprotocol/sdk of its own: a
# client (the clone's SDK, in a folder of its own) calls a tool with a side effect twice
# through `npx idempotent-tools mcp -- node email-server.mjs`; the email goes out once.
mkdir -p "$work/mcp-client"
ln -s "$root/node_modules" "$work/mcp-client/node_modules"
cp "$root/examples/mcp/email-server.mjs" "$work/mcp-client/"
cat > "$work/mcp-client/client.mjs" <<'JS'
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
const [app, outbox, server] = process.argv.slice(2);
const client = new Client({ name: 'pack-check', version: '1.0.0' });
await client.connect(new StdioClientTransport({
  command: 'npx', args: ['--no-install', 'idempotent-tools', 'mcp', '--', process.execPath, server],
  cwd: app, env: { ...process.env, OUTBOX: outbox }, stderr: 'inherit',
}));
const email = { name: 'send_email', arguments: { to: 'ada@example.com', subject: 'pack check' } };
await client.callTool(email);
const retry = await client.callTool(email);
await client.close();
const sent = readFileSync(outbox, 'utf8').split('\n').filter(Boolean).length;
console.log(`mcp: ${sent} email(s) sent, retry replayed: ${retry._meta?.['idempotent-tools/replayed'] === true}`);
process.exit(sent === 1 && retry._meta?.['idempotent-tools/replayed'] === true ? 0 : 1);
JS
mcp_ok() {
  local bin=$1
  [ ! -e "$app/node_modules/@modelcontextprotocol" ] || { echo "pack: the app has the SDK installed"; return 1; }
  rm -f "$work/outbox.jsonl"
  as_user "$bin" node "$work/mcp-client/client.mjs" "$app" "$work/outbox.jsonl" "$work/mcp-client/email-server.mjs"
}
for bin in "$node20_bin" "$NODE22_BIN"; do
  check "npx idempotent-tools mcp (the bundled proxy, no SDK installed) on $("$bin/node" --version)" mcp_ok "$bin"
done
# A platform package of another version (a half-updated node_modules) is refused by name.
mismatch_ok() {
  local pj out
  pj=$(ls "$app"/node_modules/idempotent-tools-*/package.json)
  cp "$pj" "$work/platform-package.json"
  sed -i 's/"version": "[^"]*"/"version": "0.0.0-other"/' "$pj"
  out=$(as_user "$node20_bin" node -e "require('idempotent-tools')" 2>&1)
  cp "$work/platform-package.json" "$pj"
  echo "$out" | grep -q "@0.0.0-other is installed, but idempotent-tools@" && echo "$out" | grep -q "no native binary loads" &&
    ! echo "$out" | grep -q "npm skipped it"
}
check "a platform package of another version is refused with a message that says so" mismatch_ok
# Without zig and cargo-zigbuild (a contributor's machine), pack:local packs this machine's
# release build, says what it loads on and what a portable pack needs, and builds nothing
# (issue 37, item 3: it failed, and then built the core again). Its build is made to look like
# one made without zig (the stamp says so); PATH and CARGO_HOME hide both tools.
nozig_ok() {
  local bin out status
  bin=$(mktemp -d "$work/nozig-bin-XXXXXX")
  for t in node npm npx cargo; do ln -s "$(command -v "$t")" "$bin/$t"; done
  cp -a native "$work/native-before-nozig"
  node -e "const f='native/.build-stamp.json', s=JSON.parse(require('fs').readFileSync(f)); s.glibc217=false; require('fs').writeFileSync(f, JSON.stringify(s))"
  out=$(PATH="$bin:/usr/bin:/bin" CARGO_HOME=$(mktemp -d "$work/nozig-cargo-XXXXXX") node scripts/pack-local.js 2>&1); status=$?
  rm -rf native && mv "$work/native-before-nozig" native
  echo "$out" | tail -4
  [ "$status" -eq 0 ] && echo "$out" | grep -q "links against this machine's glibc" && echo "$out" | grep -q "reusing the release build" && ! echo "$out" | grep -q "build-native:"
}
check "pack:local without zig packs this machine's build, says so, and builds nothing" nozig_ok
finish
