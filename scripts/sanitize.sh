#!/usr/bin/env bash
# Builds the C++ core (CPU backend) and its GoogleTest suite with AddressSanitizer and
# UndefinedBehaviorSanitizer, then runs the suite: any heap overflow, use after free, leak, signed
# overflow, misaligned or out-of-bounds access fails it. Only libpyca and the test program are
# built (no Python module); the build folder lives outside the source tree and is reused.
#
#   bash scripts/sanitize.sh                 # build + run every C++ test
#   bash scripts/sanitize.sh --gtest_filter='Sizes.*'   # arguments go to the test program
#
# PYCA_SANITIZE_BUILD_DIR overrides the build folder (default ${TMPDIR:-/tmp}/pyca-sanitize-<checkout path digest>).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# One build folder per checkout (CMake refuses a folder configured from another source tree).
digest=$(printf %s "$root" | cksum | cut -d' ' -f1)
build=${PYCA_SANITIZE_BUILD_DIR:-${TMPDIR:-/tmp}/pyca-sanitize-$digest}
jobs=$(nproc 2>/dev/null || echo 2)
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

flags="-O0 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
echo "== sanitize: configure ($build)"
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=None -DPYCA_WITH_CUDA=OFF -DPYCA_BUILD_PYTHON=OFF \
  -DPYCA_BUILD_TESTS=ON -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
echo "== sanitize: build (libpyca + pyca_tests, $jobs jobs)"
cmake --build "$build" --target pyca_tests -j "$jobs"

echo "== sanitize: run"
# OpenMP's thread pool and FFTW's plan cache live until exit on purpose: only definite leaks count.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/sanitize.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
"$build/pyca_tests" "$@"
echo "SANITIZE: ASan+UBSan clean"
