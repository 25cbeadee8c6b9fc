#!/usr/bin/env bash
# The local stack (Prefect server, work pool + worker, MLflow server on 127.0.0.1, state in
# .stack/): `up` (default, foreground), `down`, `status`, `env`. See docs/local-stack.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_venv.sh >&2
export OMP_NUM_THREADS=1
exec .venv/bin/python scripts/stack.py "$@"
