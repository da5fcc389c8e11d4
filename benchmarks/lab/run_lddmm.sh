#!/usr/bin/env bash
# On a CUDA machine, in one go (one device lease): builds pyca with CUDA the way scripts/gpu-check.sh
# does (no GoogleTest suite), runs the tests of the fused LDDMM operations and solver, the dispatch
# tests, the LDDMM lab (benchmarks/lab/lddmm_lab.py), bench_lddmm.py --gpu and bench_dispatch.py --gpu.
# Logs in $OUT (default /tmp/pyca-lddmm). Extra pytest selection: PYCA_LDDMM_TESTS (default below).
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
OUT=${OUT:-/tmp/pyca-lddmm}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
nvidia-smi -L || { echo "no NVIDIA GPU visible"; exit 2; }
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 2
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
fi
if ls .debs/*.deb >/dev/null 2>&1; then
  deps=/tmp/pyca-deps
  for f in .debs/*.deb; do dpkg -x "$f" "$deps"; done
  arch=$(ls "$deps/usr/lib" | grep -m1 linux-gnu)
  export CMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH:+$CMAKE_PREFIX_PATH:}$deps/usr
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$deps/usr/lib/$arch
  command -v pkg-config >/dev/null || export PATH=$PATH:$deps/usr/bin
  if ! pkg-config --exists fftw3f 2>/dev/null; then
    export PKG_CONFIG_PATH=$deps/usr/lib/$arch/pkgconfig PKG_CONFIG_SYSROOT_DIR=$deps
  fi
fi
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
sel=${PYCA_LDDMM_TESTS:-"tests/python/test_lddmm_ops.py tests/python/test_lddmm.py tests/python/test_dispatch.py"}
(cd "$(mktemp -d)" && timeout 240 python3 -m pytest $(for f in $sel; do echo "$root/$f"; done) \
  "$root/tests/python/test_parity.py" -k "not test_parity or LDDMM" -c "$root/pyproject.toml" --rootdir "$root" \
  -q -p no:cacheprovider -x >"$OUT/pytest.log" 2>&1)
tail -15 "$OUT/pytest.log"
timeout 120 python3 benchmarks/lab/lddmm_lab.py 2>&1 | tee "$OUT/lab.txt"
timeout 180 python3 benchmarks/bench_lddmm.py --gpu --skip-cpu 2>&1 | tee "$OUT/bench_lddmm.txt"
timeout 120 python3 benchmarks/bench_dispatch.py --gpu 2>&1 | tee "$OUT/bench_dispatch.txt"
echo "total: $(( $(date +%s) - t0 )) s"
