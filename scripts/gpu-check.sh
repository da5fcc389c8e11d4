#!/usr/bin/env bash
# On any machine with an NVIDIA GPU: build pyca with CUDA, run the whole test suite (ctest and pytest)
# and the GPU benchmarks, and print a summary.
#
#   scripts/gpu-check.sh            # tests + benchmarks
#   scripts/gpu-check.sh --no-bench # tests only
#   scripts/gpu-check.sh --no-tests # build + benchmarks only
#
# Offline machines (no package registry): wheels of missing Python packages (swig, nibabel) in .whl/
# and Debian packages of missing libraries (libfftw3-*, libdlpack-dev, libgtest-dev) in .debs/ are
# unpacked into /tmp first. Logs go to $OUT (default /tmp/pyca-gpu-check).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
OUT=${OUT:-/tmp/pyca-gpu-check}
mkdir -p "$OUT"
bench=1
tests=1
[ "${1:-}" = "--no-bench" ] && bench=0
[ "${1:-}" = "--no-tests" ] && tests=0
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
export PYTHONPATH=$target${PYTHONPATH:+:$PYTHONPATH}

ctest_line="not run"
pytest_line="not run"
if [ $tests = 1 ]; then
echo "== ctest"
ctest --test-dir build/gpu --output-on-failure --no-tests=error -j 8 >"$OUT/ctest.log" 2>&1 || status=1
ctest_line=$(grep -E "tests passed|tests failed" "$OUT/ctest.log" | tail -1)
tail -5 "$OUT/ctest.log"

echo "== pytest"
(cd "$(mktemp -d)" && python3 -m pytest "$root/tests/python" "$root/tests/compat" -c "$root/pyproject.toml" \
   --rootdir "$root" -q -p no:cacheprovider --junitxml="$OUT/junit.xml" >"$OUT/pytest.log" 2>&1) || status=1
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -40
pytest_line=$(tail -1 "$OUT/pytest.log")
fi

if [ $bench = 1 ]; then
  echo "== benchmarks (GPU)"
  python3 benchmarks/run_all.py --gpu >"$OUT/bench.txt" 2>&1 || status=1
  cat "$OUT/bench.txt"
fi

echo
echo "SUMMARY on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1):"
echo "  ctest:  $ctest_line"
echo "  pytest: $pytest_line"
exit $status
