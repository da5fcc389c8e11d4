#!/usr/bin/env bash
# On a CUDA machine, in one go: builds pyca with CUDA (as run_lddmm.sh does), runs the symmetric
# registration's tests on the GPU, then bench_brain.py --pairs real at 1 mm: pyca syn and lddmm beside
# FireANTs SyN and greedy (torch), the prepared pair and the files as shipped through the CLI, both
# directions. Needs, carried in the tree: .data/ (ch2bet.nii.gz and nilearn's three
# mni_icbm152_*_09a files: benchmarks/_brains.py) and .whl/ (fireants, nibabel: scripts/offline-deps.sh).
# Logs and JSON in $OUT (default /tmp/pyca-brains). PYCA_BRAINS_MOVING=colin (or mni) runs one direction,
# PYCA_BRAINS_SKIP_TESTS=1 skips the tests, PYCA_BRAINS_RAW=no|only, PYCA_BRAINS_METHODS, PYCA_BRAINS_PEERS,
# PYCA_BRAINS_PARAMS (JSON, e.g. '{"syn": {"step": 0.7, "smooth_update": 3, "smooth_field": 1}}').
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
OUT=${OUT:-/tmp/pyca-brains}
. benchmarks/lab/_gpu_build.sh
[ -n "${PYCA_BRAINS_SKIP_TESTS:-}" ] || (cd "$(mktemp -d)" && timeout 200 python3 -m pytest "$root/tests/python/test_syn.py" -c "$root/pyproject.toml" \
  --rootdir "$root" -q -p no:cacheprovider >"$OUT/pytest.log" 2>&1)
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" 2>/dev/null | head -20
tail -1 "$OUT/pytest.log" 2>/dev/null
timeout ${PYCA_BRAINS_TIMEOUT:-420} python3 benchmarks/bench_brain.py --pairs real --resolution ${PYCA_BRAINS_MM:-1} \
  --device gpu --peers ${PYCA_BRAINS_PEERS:-fireants,fireants-greedy} --methods ${PYCA_BRAINS_METHODS:-syn,lddmm} \
  --raw ${PYCA_BRAINS_RAW:-yes} --moving ${PYCA_BRAINS_MOVING:-colin,mni} --params "${PYCA_BRAINS_PARAMS:-{\}}" \
  --json "$OUT/real.json" 2>&1 | tee "$OUT/real.txt"
