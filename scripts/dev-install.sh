#!/usr/bin/env bash
# Build and install pyca from this checkout into a private folder, for development:
#   scripts/dev-install.sh NAME        -> installs into /tmp/pyca-NAME (build tree build/dev-NAME)
# then run e.g.  PYTHONPATH=/tmp/pyca-NAME python -m pytest tests/python -p no:cacheprovider
# Several developers can do this at once without touching each other's site-packages.
set -euo pipefail
name=${1:?usage: scripts/dev-install.sh NAME}
cd "$(dirname "$0")/.."
target=/tmp/pyca-$name
rm -rf "$target"
python3 -m pip install --no-build-isolation --no-deps -q \
  -Cbuild-dir="build/dev-$name" ${PYCA_BUILD_TESTS:+-Ccmake.define.PYCA_BUILD_TESTS=$PYCA_BUILD_TESTS} \
  --target "$target" .
echo "installed into $target: use PYTHONPATH=$target"
