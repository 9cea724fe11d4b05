#!/usr/bin/env bash
# zig and cargo-zigbuild, so that `npm ci` (prepare) and `npm run pack:local` link the Linux
# glibc binary against glibc 2.17. Both come from PyPI as prebuilt wheels, pinned: ziglang is
# zig's own distribution, cargo-zigbuild is the same binary `cargo install cargo-zigbuild`
# would compile (a wheel installs in seconds; compiling it takes minutes of CI).
set -euo pipefail
ZIG=0.17.0
ZIGBUILD=0.24.0
have() { python3 -m ziglang version 2>/dev/null | grep -qx "$ZIG" && cargo-zigbuild --version 2>/dev/null | grep -q " $ZIGBUILD\$"; }
if ! have; then
  python3 -m pip install --quiet --disable-pip-version-check "ziglang==$ZIG" "cargo-zigbuild==$ZIGBUILD"
fi
echo "zig $(python3 -m ziglang version), $(cargo-zigbuild --version)"
cargo zigbuild --help >/dev/null
