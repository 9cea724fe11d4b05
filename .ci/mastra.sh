#!/usr/bin/env bash
# The Mastra end-to-end test: Mastra 1.x is not a dev dependency (it declares Node >= 22.13),
# so it is installed into its own fixture folder, and the test runs against a real Mastra
# agent (on Node 20 too: IDEMPOTENT_TOOLS_MASTRA_E2E=1 lifts the version skip).
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --prefix __test__/fixtures/mastra --no-audit --no-fund
IDEMPOTENT_TOOLS_MASTRA_E2E=1 npx vitest run __test__/frameworks-mastra-agent.test.ts __test__/approvals-mastra.test.ts
