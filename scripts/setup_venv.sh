#!/usr/bin/env bash
# Create or update the project's virtual environment in .venv (safe to rerun).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "creating .venv (first run installs about 5 GB, a few minutes)" >&2
  "$PY" -m venv .venv
fi

# The installers byte-compile what they install: keep it so. Where PYTHONDONTWRITEBYTECODE=1
# is set (as on our 2-core machines) nothing else writes .pyc files, and every process would
# compile torch & co. from source again.
pip_install() {  # quiet pip; hide this machine's notes about absent local indexes
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "^WARNING: Location 'file:" || true; }
  return "${PIPESTATUS[0]}"
}

stamp=.venv/.rlpipe-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ scripts/setup_venv.sh -nt "$stamp" ]; then
  # torch first and exactly pinned, through pip, so it takes the CPU wheel (see
  # docs/quickstart.md, troubleshooting); uv keeps it, as it satisfies the pin.
  pip_install "torch==2.13.0" "uv>=0.13,<0.14"
  # The other ~230 packages through uv: the same versions as pip resolves, in about a
  # quarter of pip's time on 2 cores (parallel downloads, unpacking and byte-compiling).
  # The editable build writes rlpipe.egg-info in the source tree: one build at a time
  # (scripts/test.sh sets up .venv and .venv-vllm side by side).
  # mujoco 4 came in two more packages (mujoco-core, mujoco-studio) that share mujoco's
  # folder: a .venv made when rlpipe pinned mujoco 4 drops them before taking 3.3.0.
  if .venv/bin/uv pip show --quiet --python .venv/bin/python mujoco-core >/dev/null 2>&1; then
    .venv/bin/uv pip uninstall --quiet --python .venv/bin/python mujoco mujoco-core mujoco-studio
  fi
  exec 9> build/.editable-install.lock
  flock 9
  .venv/bin/uv pip install --quiet --python .venv/bin/python --compile-bytecode -e ".[dev,metaworld,maniskill,libero,humaneval]"
  flock -u 9
  touch "$stamp"
fi
