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
# Node 22 and Node 24 run side by side, each its own vitest with one worker (as npm test runs
# under Node 20): the tests wait on child processes, servers and timers far more than they
# compute, and one after the other they took 13 minutes of CI's budget (issue 37, item 8). The
# tests share nothing that two runs could trip over: every Redis test starts its own server on
# a free port or uses a unique key prefix, every Postgres test its own table, every SQLite
# test its own temp folder, and the global setup tolerates a database made meanwhile.
run_one() { # run_one <node bin dir> <log>
  PATH="$1:$PATH" node "$PWD/node_modules/vitest/vitest.mjs" run \
    --exclude '__test__/torture.test.ts' --exclude '__test__/crash-matrix.test.ts' \
    --exclude '__test__/redis-cluster.test.ts' --exclude '__test__/mcp-everything.test.ts' \
    --exclude '__test__/ui-browser.test.ts' --exclude '__test__/frameworks-claude-agent-sdk.test.ts' \
    --exclude '__test__/faults/**' > "$2" 2>&1
}
# The test-hooks build once, before both (each run's global setup then finds it fresh).
cargo build --lib --features test-hooks 2>&1 | tail -1
logs=()
pids=()
for bin in "$NODE22_BIN" "$NODE24_BIN"; do
  log=$(mktemp)
  logs+=("$log")
  run_one "$bin" "$log" &
  pids+=($!)
done
passed=0
failed=0
for i in 0 1; do
  wait "${pids[$i]}"
  status=$?
  log=${logs[$i]}
  echo "--- vitest under $([ "$i" -eq 0 ] && "$NODE22_BIN/node" --version || "$NODE24_BIN/node" --version)"
  cat "$log"
  summary=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^\s*Tests\s' | tail -1)
  p=$(echo "$summary" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
  f=$(echo "$summary" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || echo 0)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
  if [ "$status" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then failed=$((failed + 1)); fi
  rm -f "$log"
done
echo "node-versions: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
