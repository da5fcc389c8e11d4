#!/usr/bin/env bash
# On a CUDA machine, in one go (one device lease): builds pyca with CUDA the way scripts/gpu-check.sh
# does (no GoogleTest suite), runs the tests of the fused LDDMM operations and solver, the dispatch
# tests, the LDDMM lab (benchmarks/lab/lddmm_lab.py), bench_lddmm.py --gpu and bench_dispatch.py --gpu.
# Logs in $OUT (default /tmp/pyca-lddmm). Test files: PYCA_LDDMM_TESTS (default below).
# PYCA_LDDMM_BASELINE=<another pyca tree> (e.g. main's) also builds that tree without CUDA and times the
# 128^3 CPU registration of both on 2 cores (taskset, OMP_NUM_THREADS=2): the 2-core CPU comparison
# on an otherwise idle machine.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
OUT=${OUT:-/tmp/pyca-lddmm}
. benchmarks/lab/_gpu_build.sh
sel=${PYCA_LDDMM_TESTS:-"tests/python/test_lddmm_ops.py tests/python/test_lddmm.py tests/python/test_dispatch.py
  tests/python/test_ops_deformation.py tests/python/test_parity.py"}
(cd "$(mktemp -d)" && timeout 240 python3 -m pytest $(for f in $sel; do echo "$root/$f"; done) \
  -c "$root/pyproject.toml" --rootdir "$root" -q -p no:cacheprovider >"$OUT/pytest.log" 2>&1)
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20
tail -1 "$OUT/pytest.log"
timeout 120 python3 benchmarks/lab/lddmm_lab.py 2>&1 | tee "$OUT/lab.txt"
timeout 180 python3 benchmarks/bench_lddmm.py --gpu --skip-cpu 2>&1 | tee "$OUT/bench_lddmm.txt"
timeout 120 python3 benchmarks/bench_dispatch.py --gpu 2>&1 | tee "$OUT/bench_dispatch.txt"
timeout 60 python3 benchmarks/lab/dispatch_lab.py 2>&1 | tee "$OUT/dispatch_lab.txt"
base=${PYCA_LDDMM_BASELINE:-}
if [ -n "$base" ]; then
  if (cd "$base" && PYCA_WITH_CUDA=OFF python3 -m pip install --no-build-isolation --no-deps -q -Cbuild-dir=build/cpu \
      --target /tmp/pyca-base . >"$OUT/build_base.log" 2>&1); then
    two="taskset -c 0,1 env OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive"
    for t in /tmp/pyca-base "$target"; do
      echo "== 2 cores, pyca from $t"
      PYTHONPATH=$t${PYTHONPATH#$target} timeout 200 $two python3 benchmarks/bench_lddmm.py --cpu-iterations \
        "${PYCA_LDDMM_CPU_ITERATIONS:-10}" --peer-iterations 0 2>&1 | tail -2
    done 2>&1 | tee "$OUT/cpu2.txt"
  else
    tail -20 "$OUT/build_base.log"
  fi
fi
echo "total: $(( $(date +%s) - t0 )) s"
