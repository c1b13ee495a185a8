#!/usr/bin/env bash
# System packages the test suite needs beyond .venv: Chromium, for the evaluation report
# screenshot test (tests/components/ranking_evaluator/test_plots.py). Idempotent: does nothing
# when a chromium is on PATH. Separate from setup.sh, whose stamp covers only the venv.
# As root it installs the Debian package `chromium` with apt-get; otherwise it says what to run,
# and under CI=true (where the test must run, not skip) it fails.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "rankpipe setup-system: chromium missing: apt-get install -y chromium (report screenshot test)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
  echo "rankpipe setup-system: installed $(command -v chromium)"
  exit 0
fi

msg="rankpipe setup-system: chromium is missing and this user cannot install it; run as root:
  apt-get update && apt-get install -y chromium"
if [ "${CI:-}" = "true" ]; then
  echo "$msg" >&2
  echo "(CI=true: the report screenshot test must run, so this is an error)" >&2
  exit 1
fi
echo "$msg" >&2
echo "(the report screenshot test will be skipped)" >&2
