#!/usr/bin/env bash
# The whole suite's second lane (scripts/test.sh runs it beside the integration tests): the
# unit tests and the Ray-cluster tests (tests/cluster: workers, placement and runtimes on a
# local Ray cluster, no Prefect or MLflow), then the vLLM stage (the vLLM rollout engine for
# real, in .venv-vllm), then the integration test modules named as arguments
# (scripts/test.sh moves some here to keep the lanes even). .venv-vllm is set up in the
# background meanwhile, or, when RLPIPE_VLLM_SETUP_PID is set, by that process, which
# writes its exit status to outputs/setup-vllm.rc (scripts/test.sh starts it earlier).
# Exits non-zero when a stage failed or collected no tests.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p outputs
setup_pid=${RLPIPE_VLLM_SETUP_PID:-}
if [ -z "$setup_pid" ]; then
  rm -f outputs/setup-vllm.rc
  bash -c 'bash scripts/setup_vllm_cpu.sh > outputs/setup-vllm.log 2>&1
    echo $? > outputs/setup-vllm.rc' &
  setup_pid=$!
fi
unit=0
.venv/bin/python -m pytest tests/unit tests/cluster || unit=$?
while [ ! -f outputs/setup-vllm.rc ] && kill -0 "$setup_pid" 2>/dev/null; do sleep 2; done
setup=$(cat outputs/setup-vllm.rc 2>/dev/null || echo "none: the setup process ended early")
cat outputs/setup-vllm.log
if [ "$setup" != 0 ]; then
  echo "error: setting up .venv-vllm failed, exit $setup (log above, in outputs/setup-vllm.log)" >&2
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
