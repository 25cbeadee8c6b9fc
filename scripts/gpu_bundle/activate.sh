# Source on the GPU machine (bash): makes python3 run rlpipe with the packages carried in
# .gpu/ (built by scripts/gpu_bundle.sh) on top of the machine's own torch. From the
# project root:
#   source .gpu/activate.sh && python3 flows/train.py --config grpo_arith model.dtype=bfloat16
# The first time (and after a rebuilt bundle) it unpacks site.tar.xz into
# $RLPIPE_GPU_SITE (default /tmp/rlpipe-gpu-site, ~20 s), points its console scripts
# (prefect, ray, mlflow) at this python3 and checks that the main packages import.
_rlpipe_gpu=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_rlpipe_site=${RLPIPE_GPU_SITE:-/tmp/rlpipe-gpu-site}
_rlpipe_stamp=$(cat "$_rlpipe_gpu/stamp" 2> /dev/null) || {
  echo "error: $_rlpipe_gpu has no stamp: an unfinished bundle, rebuild it" >&2
  return 1
}
python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' \
  || echo "warning: the bundle holds Python 3.12 packages; python3 is $(python3 -V 2>&1)" >&2
if [ "$(cat "$_rlpipe_site/.stamp" 2> /dev/null)" != "$_rlpipe_stamp" ]; then
  echo "unpacking $_rlpipe_gpu/site.tar.xz into $_rlpipe_site" >&2
  rm -rf "$_rlpipe_site.partial" && mkdir -p "$_rlpipe_site.partial" \
    && tar -C "$_rlpipe_site.partial" -xJf "$_rlpipe_gpu/site.tar.xz" \
    && sed -i "1s|^#!.*python.*|#!$(command -v python3)|" "$_rlpipe_site.partial"/bin/* \
    && rm -rf "$_rlpipe_site" && mv "$_rlpipe_site.partial" "$_rlpipe_site" \
    && echo "$_rlpipe_stamp" > "$_rlpipe_site/.stamp" || {
    echo "error: could not unpack the bundle into $_rlpipe_site" >&2
    return 1
  }
  _rlpipe_check=1
fi
export PYTHONPATH="$_rlpipe_site:$(dirname "$_rlpipe_gpu")${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$_rlpipe_site/bin:$PATH"
export HOME=${HOME:-/tmp/home} PYTHONUNBUFFERED=1
export PREFECT_UI_ENABLED=false # the UI bundle is not carried
mkdir -p "$HOME"
if [ -n "${_rlpipe_check:-}" ]; then
  python3 -c 'import importlib.metadata as m, torch, prefect, ray, mlflow, transformers
print("rlpipe GPU bundle:", ", ".join(f"{p} {m.version(p)}" for p in ("torch",
"transformers", "prefect", "ray", "mlflow")), "| CUDA", torch.cuda.is_available())' >&2 \
    || echo "warning: the carried packages do not import on this python3 (see above)" >&2
fi
unset _rlpipe_gpu _rlpipe_site _rlpipe_stamp _rlpipe_check
