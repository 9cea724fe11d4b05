#!/usr/bin/env bash
# The durability test (__test__/processes-sqlite.test.ts) counts the store's fsyncs with
# strace: install it when it is not there. In CI a missing tool is a failure, not a skip.
set -euo pipefail
if ! command -v strace >/dev/null; then
  apt-get update -qq && apt-get install -y -qq strace
fi
strace -V | head -1
