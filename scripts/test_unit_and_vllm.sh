#!/usr/bin/env bash
# The whole suite's second lane (scripts/test.sh runs it beside the integration tests): the
# unit tests and the Ray-cluster tests (tests/cluster: workers, placement and runtimes on a
# local Ray cluster, no Prefect or MLflow), then the vLLM stage (the vLLM rollout engine for
# real, in .venv-vllm, set up in the background meanwhile), then the integration test
# modules named as arguments (scripts/test.sh moves some here to keep the lanes even).
# Exits non-zero when a stage failed or collected no tests.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p outputs
bash scripts/setup_vllm_cpu.sh > outputs/setup-vllm.log 2>&1 &
setup_pid=$!
unit=0
.venv/bin/python -m pytest tests/unit tests/cluster || unit=$?
setup=0
wait "$setup_pid" || setup=$?
cat outputs/setup-vllm.log
if [ "$setup" -ne 0 ]; then
  echo "error: setting up .venv-vllm failed (log above, in outputs/setup-vllm.log)" >&2
  exit 1
fi
if [ "$unit" -ne 0 ]; then
  echo "error: the unit or Ray-cluster tests failed (exit $unit)" >&2
  exit "$unit"
fi
vllm=0
RLPIPE_VLLM_STAGE=1 .venv-vllm/bin/python -m pytest tests/vllm || vllm=$?
integration=0
if [ "$#" -gt 0 ]; then
  .venv/bin/python -m pytest "$@" || integration=$?
fi
if [ "$vllm" -ne 0 ] || [ "$integration" -ne 0 ]; then
  echo "error: tests failed (vLLM: exit $vllm; integration modules $*: exit $integration)" >&2
  exit 1
fi
