#!/usr/bin/env bash
# The inspector page's browser test (__test__/ui-browser.test.ts, run by `npm test`) drives
# Debian's chromium through playwright-core. Installs chromium when it is missing; in CI a
# browser that cannot start is a failure, never a skip.
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
/usr/bin/chromium --headless --no-sandbox --disable-gpu --version
