#!/usr/bin/env bash
# On any machine with an NVIDIA GPU: build pyca with CUDA, run the whole test suite (ctest and pytest)
# and the GPU benchmarks, and print a summary.
#
#   scripts/gpu-check.sh            # tests + benchmarks
#   scripts/gpu-check.sh --no-bench # tests only
#   scripts/gpu-check.sh --no-tests # build + benchmarks only
#   scripts/gpu-check.sh --memcheck # build + the GPU parity tests under compute-sanitizer memcheck only
#   scripts/gpu-check.sh --no-bench --shard 2/3   # the 2nd third of the test files (ctest in shard 1)
#   PYCA_MEMCHECK=1 scripts/gpu-check.sh ...   # adds the memcheck stage to any of the above
#
# The memcheck stage runs tests/python/test_parity.py (every operation on odd 3-D and 2-D grids)
# under `compute-sanitizer --tool memcheck` (out-of-bounds and misaligned device accesses, leaks of
# device allocations are not reported: pyca's pool keeps memory on purpose), bounded by
# PYCA_MEMCHECK_TIMEOUT seconds (default 480; PYCA_MEMCHECK_K='expr' runs the cases pytest -k selects);
# its log is $OUT/memcheck.log.
#
# Offline machines (no package registry): wheels of missing Python packages (swig, nibabel) in .whl/
# and Debian packages of missing libraries (libfftw3-*, libgtest-dev) in .debs/ are
# unpacked into /tmp first. Logs go to $OUT (default /tmp/pyca-gpu-check).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
OUT=${OUT:-/tmp/pyca-gpu-check}
mkdir -p "$OUT"
bench=1
tests=1
shard=1/1
memcheck=${PYCA_MEMCHECK:-0}
while [ $# -gt 0 ]; do
  case $1 in
    --no-bench) bench=0 ;;
    --no-tests) tests=0 ;;
    --memcheck) memcheck=1; tests=0; bench=0 ;;
    --shard) shard=${2:-}; shift ;;
    *) echo "gpu-check: unknown argument $1"; exit 2 ;;
  esac
  shift
done
shard_k=${shard%/*}
shard_n=${shard#*/}
case "$shard_k/$shard_n" in
  [1-9]/[1-9]) [ "$shard_k" -le "$shard_n" ] || { echo "gpu-check: --shard K/N needs 1 <= K <= N, got $shard"; exit 2; } ;;
  *) echo "gpu-check: --shard K/N needs 1 <= K <= N <= 9, got $shard"; exit 2 ;;
esac
export PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)

nvidia-smi -L || { echo "no NVIDIA GPU visible"; exit 2; }
. scripts/offline-deps.sh || exit 2

status=0
echo "== build (CUDA on)"
target=/tmp/pyca-gpu
rm -rf "$target"
if ! PYCA_WITH_CUDA=ON PYCA_BUILD_TESTS=ON python3 -m pip install --no-build-isolation --no-deps -q \
    -Cbuild-dir=build/gpu --target "$target" . >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  echo "SUMMARY: build failed"
  exit 1
fi
export PYTHONPATH=$target${PYTHONPATH:+:$PYTHONPATH} PATH=$target/bin:$PATH  # the console script: the CLI tests run too

ctest_line="not run"
pytest_line="not run"
if [ $tests = 1 ]; then
if [ "$shard_k" = 1 ]; then
  echo "== ctest"
  ctest --test-dir build/gpu --output-on-failure --no-tests=error -j 8 >"$OUT/ctest.log" 2>&1 || status=1
  ctest_line=$(grep -E "tests passed|tests failed" "$OUT/ctest.log" | tail -1)
  tail -5 "$OUT/ctest.log"
else
  ctest_line="run by shard 1/$shard_n"
fi

# The suite outgrows one bounded call: --shard K/N runs every N-th test file from the K-th
# (sorted), so N calls together run each file once.
mapfile -t files < <(find "$root/tests/python" "$root/tests/compat" -name "test_*.py" | sort | \
  awk -v k="$shard_k" -v n="$shard_n" '(NR - 1) % n == k - 1')
echo "== pytest (shard $shard: ${#files[@]} files)"
(cd "$(mktemp -d)" && python3 -m pytest "${files[@]}" -c "$root/pyproject.toml" \
   --rootdir "$root" -q -p no:cacheprovider --junitxml="$OUT/junit.xml" >"$OUT/pytest.log" 2>&1) || status=1
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -40
pytest_line=$(tail -1 "$OUT/pytest.log")
fi

memcheck_line="not run"
if [ "$memcheck" = 1 ]; then
  echo "== compute-sanitizer memcheck (GPU parity tests)"
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  if [ -z "$cs" ]; then
    echo "compute-sanitizer not found"; memcheck_line="compute-sanitizer not found"; status=1
  else
    # The pool allocator's free-at-exit and CUDA's own allocations are not errors of pyca.
    (cd "$(mktemp -d)" && timeout "${PYCA_MEMCHECK_TIMEOUT:-480}" "$cs" --tool memcheck --error-exitcode 99 \
       --leak-check no --report-api-errors no python3 -m pytest "$root/tests/python/test_parity.py" \
       -c "$root/pyproject.toml" --rootdir "$root" -q -p no:cacheprovider ${PYCA_MEMCHECK_K:+-k "$PYCA_MEMCHECK_K"} \
       >"$OUT/memcheck.log" 2>&1)
    rc=$?
    grep -E "ERROR SUMMARY|Invalid|out of bounds|misaligned" "$OUT/memcheck.log" | head -20
    case $rc in
      0) memcheck_line="clean ($(tail -1 "$OUT/memcheck.log"))" ;;
      124) memcheck_line="timed out after ${PYCA_MEMCHECK_TIMEOUT:-480} s"; status=1 ;;
      99) memcheck_line="memcheck reported errors (see memcheck.log)"; status=1 ;;
      *) memcheck_line="failed (exit $rc; see memcheck.log)"; status=1 ;;
    esac
  fi
fi

if [ $bench = 1 ]; then
  echo "== benchmarks (GPU)"
  python3 benchmarks/run_all.py --gpu >"$OUT/bench.txt" 2>&1 || status=1
  cat "$OUT/bench.txt"
fi

echo
echo "SUMMARY on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1):"
echo "  ctest:  $ctest_line"
echo "  pytest: $pytest_line$([ "$shard_n" = 1 ] || echo " (shard $shard)")"
echo "  memcheck: $memcheck_line"
exit $status
