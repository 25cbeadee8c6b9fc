#!/usr/bin/env bash
# Set up (or update) .venv, then train: arguments go to flows/train.py. Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_venv.sh
export OMP_NUM_THREADS=1
exec .venv/bin/python flows/train.py "$@"
