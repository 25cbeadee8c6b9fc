#!/usr/bin/env bash
# Set up .venv (scripts/setup_venv.sh) plus the benchmark anchors (TRL, Stable-Baselines3).
# Safe to rerun. Then: .venv/bin/python benchmarks/llm_step.py (or cartpole_solve.py, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_venv.sh
stamp=.venv/.rlpipe-bench-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  # torch stays the CPU build installed by setup_venv.sh (exact pin, no upgrade)
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev,bench]" "torch==2.13.0" 2>&1 \
    | { grep -v "^WARNING: Location 'file:" || true; }
  touch "$stamp"
fi
