#!/usr/bin/env bash
# What Node 20 cannot install, run under Node 22: Mastra 1.x end to end (approval, then
# interrupt and resume, a charge counted once), ai 7 (an approved history submitted twice),
# the OpenAI Agents tool set (e2e/node22/openai-agents.mjs) and example against the current @openai/agents,
# approvals bound to one execution in all three (e2e/node22/approvals.mjs), and the MCP
# Inspector's CLI as a client of the proxy (e2e/node22/mcp-inspector.mjs; it declares Node
# >= 22.19), and fastmcp (e2e/node22/fastmcp.mjs, fastmcp-waits.mjs). e2e/node22 is a
# project of its own (package.json, lockfile), so the
# main devDependencies stay on what Node 20 installs. It uses this clone's build.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
eval "$(.ci/nodes.sh)" || exit 1
export PATH="$NODE22_BIN:$PATH"
node --version
cd e2e/node22
npm ci --no-audit --no-fund || exit 1
ln -sfn "$root" node_modules/idempotent-tools
status=0
node mastra.mjs || status=1
node ai-sdk-7.mjs || status=1
node openai-agents.mjs || status=1
node approvals.mjs || status=1
node mcp-inspector.mjs || status=1
node fastmcp.mjs || status=1
node fastmcp-callers.mjs || status=1
node fastmcp-waits.mjs || status=1
# The repository's OpenAI Agents example (written against @openai/agents-core, a dev
# dependency) run here against the current @openai/agents, which re-exports it.
mkdir -p .run
sed "s#'@openai/agents-core'#'@openai/agents'#" "$root/examples/openai-agents/index.mjs" > .run/openai-agents.mjs
node .run/openai-agents.mjs || status=1
# The README's OpenAI Agents and Mastra sections (examples/*/quickstart.mjs), and its AI SDK
# section against ai 7, each on a store of its own: the first run charges once.
for example in openai-agents mastra ai-sdk; do
  # The example's folder (its quickstart imports its offline fake model from beside it).
  rm -rf ".run/$example" && cp -r "$root/examples/$example" ".run/$example"
  rm -f .run/quickstart.db*
  out=$(IDEMPOTENT_TOOLS_DB="$PWD/.run/quickstart.db" node ".run/$example/quickstart.mjs") || status=1
  echo "examples/$example/quickstart.mjs: $out"
  [ "$out" = "Paid. charged 1 time(s)" ] || { echo "node22-e2e: examples/$example/quickstart.mjs did not charge once" >&2; status=1; }
done
exit $status
