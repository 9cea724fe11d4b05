#!/usr/bin/env bash
# The vitest suite under Node 22 and Node 24 with the same native binary that `npm test`
# just ran under this machine's Node 20 (N-API is ABI-stable: one build serves all three).
# Skipped here (they run under Node 20 in `npm test`): the torture and crash-matrix files,
# minutes of killed child processes whose subject is SQLite and the OS, not the Node version;
# the files whose subject is another program (a 6-node Redis Cluster, the MCP reference
# server and Inspector, Chromium, the Claude Agent SDK's runtime); and the fault harness's
# files (__test__/faults/: the network and processes under faults, run by npm test and the
# campaigns), which keep CI under its time budget.
# Prints "node-versions: N passed, M failed" last.
set -uo pipefail
cd "$(dirname "$0")/.."
export NO_COLOR=1 FORCE_COLOR=0
eval "$(.ci/nodes.sh)" || { echo "node-versions: 0 passed, 1 failed"; exit 1; }
passed=0
failed=0
for bin in "$NODE22_BIN" "$NODE24_BIN"; do
  log=$(mktemp)
  echo "--- vitest under $("$bin/node" --version)"
  PATH="$bin:$PATH" node "$PWD/node_modules/vitest/vitest.mjs" run \
    --exclude '__test__/torture.test.ts' --exclude '__test__/crash-matrix.test.ts' \
    --exclude '__test__/redis-cluster.test.ts' --exclude '__test__/mcp-everything.test.ts' \
    --exclude '__test__/ui-browser.test.ts' --exclude '__test__/frameworks-claude-agent-sdk.test.ts' \
    --exclude '__test__/faults/**' 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  summary=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^\s*Tests\s' | tail -1)
  p=$(echo "$summary" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
  f=$(echo "$summary" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || echo 0)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
  if [ "$status" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then failed=$((failed + 1)); fi
  rm -f "$log"
done
echo "node-versions: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
