#!/usr/bin/env bash
# The identity campaigns (stress/identity/, docs/testing.md): each helper's driver through its
# framework's real runtime, scenarios from one seed for the day (or IDENTITY_SEED), printed by
# each run so any run can be repeated; then both controls (keyed by the tool call id alone, by
# the arguments alone), which the checker must catch (campaign.mjs exits 1 when a control
# comes out clean).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seed="${IDENTITY_SEED:-$(date -u +%Y%m%d)}"
# Scenarios per variant: IDENTITY_SCENARIOS, else the driver's own size (campaign.mjs: 6, and 3
# for a control; fewer for a framework whose runtime takes a second to start, such as the
# Claude Agent SDK's).
scenarios=(${IDENTITY_SCENARIOS:+--scenarios "$IDENTITY_SCENARIOS"})
status=0
for driver in ai-sdk claude-agent-sdk langchain openai-agents mcp-server mcp-proxy; do
  node stress/identity/campaign.mjs --driver "$driver" --seed "$seed" "${scenarios[@]}" || status=1
  for control in id args; do
    node stress/identity/campaign.mjs --driver "$driver" --seed "$seed" --control "$control" || status=1
  done
done

# The drivers of frameworks that need Node 22 (e2e/node22/identity/: ai 7, Mastra 1.x,
# fastmcp), under the Node 22 binary of .ci/nodes.sh; their packages are e2e/node22's, which a
# driver resolves from its own folder. .ci/run runs this step before .ci/node22-e2e.sh, and
# this script runs alone too, so e2e/node22 is installed here when it is not (npm ci, and the
# link to this clone, as .ci/node22-e2e.sh does): a Node 22 driver never skips.
node22_ready() {
  local nodes
  nodes=$(.ci/nodes.sh) || return 1
  eval "$nodes"
  [ -x "${NODE22_BIN:-}/node" ] || return 1
  export PATH="$NODE22_BIN:$PATH"
  if ! (cd e2e/node22 && npm ls --depth=0 >/dev/null 2>&1); then
    (cd e2e/node22 && npm ci --no-audit --no-fund) || return 1
  fi
  ln -sfn "$root" e2e/node22/node_modules/idempotent-tools
}
if node22_ready; then
  for driver in ai-sdk-7 mastra openai-agents fastmcp; do
    node stress/identity/campaign.mjs --driver "e2e/node22/identity/$driver.mjs" --seed "$seed" "${scenarios[@]}" || status=1
    for control in id args; do
      node stress/identity/campaign.mjs --driver "e2e/node22/identity/$driver.mjs" --seed "$seed" --control "$control" || status=1
    done
  done
else
  echo "identity: no Node 22 with e2e/node22 installed (.ci/nodes.sh, npm ci in e2e/node22): its drivers could not run" >&2
  status=1
fi
exit "$status"
