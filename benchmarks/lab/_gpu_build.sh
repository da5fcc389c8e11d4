# Sourced by the lab's GPU scripts (run_lddmm.sh, run_brains.sh) from the checkout's root, with OUT set:
# checks for a GPU, unpacks the carried dependencies (scripts/offline-deps.sh), builds pyca with CUDA into
# /tmp/pyca-gpu (build tree build/gpu, incremental) and puts it on PYTHONPATH; exits on failure.
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
nvidia-smi -L || { echo "no NVIDIA GPU visible"; exit 2; }
. scripts/offline-deps.sh || exit 2
t0=$(date +%s)
target=/tmp/pyca-gpu
if ! PYCA_WITH_CUDA=ON python3 -m pip install --no-build-isolation --no-deps -q -Cbuild-dir=build/gpu \
    --target "$target" . >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  echo "SUMMARY: build failed"
  exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$target${PYTHONPATH:+:$PYTHONPATH}
