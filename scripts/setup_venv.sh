#!/usr/bin/env bash
# Create or update the project's virtual environment in .venv (safe to rerun).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "creating .venv (first run installs ~2.4 GB, a few minutes)" >&2
  "$PY" -m venv .venv
fi

# pip byte-compiles what it installs: keep it so (no --no-compile). Where
# PYTHONDONTWRITEBYTECODE=1 is set (as on our 2-core machines) nothing else writes .pyc files,
# and every process would compile torch & co. from source again.
pip_install() {  # quiet pip; hide this machine's notes about absent local indexes
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "^WARNING: Location 'file:" || true; }
  return "${PIPESTATUS[0]}"
}

stamp=.venv/.rlpipe-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  # torch first and exactly pinned, so pip takes the CPU wheel (see docs/quickstart.md, troubleshooting).
  pip_install "torch==2.13.0"
  pip_install -e ".[dev]"
  touch "$stamp"
fi
