#!/usr/bin/env bash
# Creates .venv with Python 3.10 and installs exactly requirements.lock plus this project.
# A second call does nothing while requirements.lock and pyproject.toml are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
STAMP="$VENV/.rankpipe-lock.sha256"
UV_VERSION=0.13.8

works() { "$1" -c 'import sys, venv; assert sys.version_info[:2] == (3, 10)' >/dev/null 2>&1; }

find_python() {
  # A pyenv shim can be on PATH without the version being selected: check that it runs.
  if command -v python3.10 >/dev/null 2>&1 && works python3.10; then
    command -v python3.10
    return
  fi
  local root="${PYENV_ROOT:-$HOME/.pyenv}"
  local candidate
  for candidate in "$root"/versions/3.10*/bin/python3.10; do
    if [ -x "$candidate" ] && works "$candidate"; then
      echo "$candidate"
      return
    fi
  done
  return 1
}

want=$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  exit 0
fi

if ! PYTHON=$(find_python); then
  cat >&2 <<'MSG'
rankpipe setup: no Python 3.10 found (TFX 1.16 supports Python 3.9-3.10 only).
Install one, then run this again, for example:
  pyenv install 3.10.13        (pyenv's versions are found automatically)
  or: sudo apt-get install python3.10 python3.10-venv
MSG
  exit 1
fi

echo "rankpipe setup: creating $VENV with $PYTHON"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet "uv==$UV_VERSION"
# `uv pip sync` installs exactly the lock: extra packages are removed, nothing is resolved anew.
# Bytecode is compiled once here: with PYTHONDONTWRITEBYTECODE set (as on CI machines) every
# process would otherwise recompile TensorFlow's and TFX's Python on import (~15 s each).
"$VENV/bin/uv" pip sync --quiet --compile-bytecode --python "$VENV/bin/python" requirements.lock
"$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --no-deps -e .
echo "$want" > "$STAMP"
echo "rankpipe setup: done"
