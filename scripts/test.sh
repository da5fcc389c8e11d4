#!/usr/bin/env bash
# Runs every pyca test: builds and installs pyca with its GoogleTest suite, runs ctest, then pytest
# (tests/python and tests/compat). Fails when any test fails or when either runner finds no tests.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# OpenMP threads sleep instead of spinning when waiting: the machine may be shared (CI, parallel builds).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
build=${PYCA_TEST_BUILD_DIR:-build/test}

python3 -m pip install -q ".[test]" -Cbuild-dir="$build" -Ccmake.define.PYCA_BUILD_TESTS=ON

echo "== GoogleTest (ctest)"
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$(nproc)"

echo "== pytest"
# Run from outside the checkout so that `import pyca` is the installed package, not ./pyca.
cd "$(mktemp -d)"
python3 -m pytest "$root/tests/python" "$root/tests/compat" -c "$root/pyproject.toml" --rootdir "$root" "$@"
