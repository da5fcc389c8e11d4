#!/usr/bin/env bash
# Installs a pyca wheel into a fresh virtual environment and runs the Python test suite against it
# (from outside the checkout, so `import pyca` is the wheel's):
#
#   bash scripts/test-wheel.sh WHEEL [pytest args...]
#
# PYCA_TEST_VENV_ARGS: extra `python3 -m venv` arguments (e.g. --system-site-packages);
# PYCA_TEST_PIP_ARGS: extra `pip install` arguments (e.g. --no-index --find-links DIR offline).
# The venv is made under ${TMPDIR:-/tmp} and removed afterwards.
set -euo pipefail
whl=$(realpath "${1:?usage: scripts/test-wheel.sh WHEEL [pytest args...]}")
shift
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2086  # word-split on purpose: lists of arguments
python3 -m venv ${PYCA_TEST_VENV_ARGS:-} "$work/venv"
py=$work/venv/bin/python
# shellcheck disable=SC2086
"$py" -m pip install -q ${PYCA_TEST_PIP_ARGS:-} "$whl[test]"
cd "$work"
"$py" -c 'import pyca, sys; print("pyca", pyca.__version__, "from", pyca.__file__, "| CUDA usable:", pyca.cuda_available())'
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
"$py" -m pytest "$root/tests/python" "$root/tests/compat" -c "$root/pyproject.toml" --rootdir "$root" \
  -p no:cacheprovider "$@"
