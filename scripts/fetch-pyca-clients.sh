#!/usr/bin/env bash
# Fetches public code written for PyCA into a cache folder, for tests/compat/test_public_clients.py
# (nothing of it is vendored into pyca; the tests skip, saying why, when the cache is empty):
#   - quicksilver (github.com/rkwitt/quicksilver): the vector-momentum library (code/vectormomentum:
#     Configs, Libraries/CAvmCommon.py), its matching tool (code/tools/LDDMM_optimization/
#     CAvmMatching.py), its prediction script (code/applications/qs_predict.py) and the PyCA copy it
#     vendors, whose Examples/ (GreedyReg.py, ElastReg.py, ElastRegSingleScale.py, ROFTV.py,
#     PrimalDualTV.py) are PyCA's own example scripts.
#
#   scripts/fetch-pyca-clients.sh [CACHE]     (default: $PYCA_CLIENTS_DIR or ~/.cache/pyca-clients)
#
# QUICKSILVER_URL overrides the source (a git URL or a local clone/mirror). Only the code paths are
# checked out (sparse, blobs on demand): the repository's large data and network weights are not
# downloaded. Then run:  PYCA_CLIENTS_DIR=CACHE python -m pytest tests/compat/test_public_clients.py
set -euo pipefail
cache=${1:-${PYCA_CLIENTS_DIR:-$HOME/.cache/pyca-clients}}
url=${QUICKSILVER_URL:-https://github.com/rkwitt/quicksilver.git}
dest="$cache/quicksilver"
mkdir -p "$cache"
paths=(code/vectormomentum code/tools/LDDMM_optimization code/applications code/library
       3rd_party_software/pyca/Examples 3rd_party_software/pyca/Code/Python)
if [ -d "$dest/.git" ]; then
  git -C "$dest" fetch -q --depth 1 origin
  git -C "$dest" reset -q --hard FETCH_HEAD
else
  rm -rf "$dest"
  if ! git clone -q --depth 1 --filter=blob:none --no-checkout "$url" "$dest" 2>/dev/null; then
    # a local mirror or a server without partial clone
    rm -rf "$dest"
    git clone -q --no-checkout "$url" "$dest"
  fi
  git -C "$dest" sparse-checkout init --no-cone
  printf '/%s/\n' "${paths[@]}" | git -C "$dest" sparse-checkout set --no-cone --stdin
  git -C "$dest" checkout -q
fi
echo "PyCA clients in $dest (commit $(git -C "$dest" rev-parse --short HEAD))"
echo "run: PYCA_CLIENTS_DIR=$cache python -m pytest tests/compat/test_public_clients.py"
