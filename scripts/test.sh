#!/usr/bin/env bash
# Runs every pyca test: installs the system packages the build needs (scripts/install-deps.sh),
# builds and installs pyca with its GoogleTest suite, runs ctest, then pytest (tests/python and
# tests/compat). Fails when any test fails or when either runner finds no tests.
#
# The build folder is outside the checkout (a read-only checkout works) and kept between runs, so
# rebuilds are incremental: ${XDG_CACHE_HOME:-~/.cache}/pyca/<checkout path digest>/test, or
# PYCA_TEST_BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# OpenMP threads sleep instead of spinning when waiting: the machine may be shared (CI, parallel builds).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
digest=$(printf %s "$root" | cksum | cut -d' ' -f1)
build=${PYCA_TEST_BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pyca/$digest/test}

bash scripts/install-deps.sh
# pyca was called `pyca` on the package index before it became pyca3d: drop such an install (only
# ours, recognised by its pyca/_core extension) so that two distributions do not own one package.
if python3 -c 'import importlib.metadata as m, sys
try:
    files = m.distribution("pyca").files or []
except m.PackageNotFoundError:
    sys.exit(1)
sys.exit(not any(str(f).startswith("pyca/_core") for f in files))' 2>/dev/null; then
  python3 -m pip uninstall -q -y pyca || true
fi
python3 -m pip install -q ".[test]" -Cbuild-dir="$build" -Ccmake.define.PYCA_BUILD_TESTS=ON

echo "== GoogleTest (ctest)"
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$(nproc)"

echo "== pytest"
# Run from outside the checkout so that `import pyca` is the installed package, not ./pyca.
cd "$(mktemp -d)"
python3 -m pytest "$root/tests/python" "$root/tests/compat" -c "$root/pyproject.toml" --rootdir "$root" "$@"
