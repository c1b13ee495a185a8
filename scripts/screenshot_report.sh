#!/usr/bin/env bash
# Renders an HTML report (e.g. RankingEvaluator's report.html) in headless Chromium and saves a
# PNG screenshot, to check what a person sees. Chromium from Debian's packages:
#   apt-get update && apt-get install -y chromium
# Usage: scripts/screenshot_report.sh REPORT.html OUT.png [WIDTHxHEIGHT]   (default 1280x4000)
# No network: the report is self-contained, and the flags below keep Chromium from calling out.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]" >&2
  exit 2
fi
report=$(realpath "$1")
out=$(realpath -m "$2")
size=${3:-1280x4000}
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "$0: chromium not found (apt-get install -y chromium)" >&2
  exit 1
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size="${size/x/,}" \
  --screenshot="$out" "file://$report" >/dev/null 2>&1
test -s "$out"
echo "$out"
