#!/usr/bin/env bash
# Runs the commands of docs/tutorial-brains.md (on the CPU, so that the pictures are the same on
# every machine) in WORKDIR and copies their pictures into docs/images/tutorial-*.png.
#
#   bash scripts/tutorial-brains.sh [WORKDIR]     # default: a temporary folder
#
# Needs pyca, nilearn (the MNI152 template) and Debian's mricron-data (Colin27). About 20 minutes
# on this project's shared 2-core machine (the atlas most of it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=${1:-$(mktemp -d)}
mkdir -p "$work"
cd "$work"
rm -rf mni-to-colin mni-to-colin-close colin-to-mni atlas
python3 "$root/examples/brains/prepare.py" brains
pyca lddmm --fixed brains/colin.nii.gz --moving brains/mni.nii.gz --moving-labels brains/mni_tissues.nii.gz \
  --out mni-to-colin --device cpu --no-progress
pyca lddmm --fixed brains/colin.nii.gz --moving brains/mni.nii.gz --sigma 0.001 --out mni-to-colin-close \
  --device cpu --no-progress || [ $? -eq 3 ]  # (it folds: exit status 3, the outputs written)
pyca lddmm --fixed brains/mni.nii.gz --moving brains/colin.nii.gz --out colin-to-mni --device cpu --no-progress
pyca atlas brains/colin.nii.gz brains/mni.nii.gz --out atlas --template-iterations 3 --device cpu --no-progress
python3 "$root/tools/small_png.py" mni-to-colin/report.png "$root/docs/images/tutorial-mni-to-colin.png" 900
python3 "$root/tools/small_png.py" colin-to-mni/report.png "$root/docs/images/tutorial-colin-to-mni.png" 900
python3 "$root/tools/small_png.py" atlas/report.png "$root/docs/images/tutorial-atlas.png" 900
python3 - <<'PY'
import json
for run in ("mni-to-colin", "mni-to-colin-close", "colin-to-mni"):
    s = json.load(open(f"{run}/summary.json"))
    print(f"{run}: mismatch -{100 * s['mismatch_reduction']:.1f}%, det D phiinv in [{s['jacobian_min']:.3g}, "
          f"{s['jacobian_max']:.3g}], non-positive {100 * s['jacobian_nonpositive_fraction']:.3f}%, "
          f"registration {s['timings']['registration_s']:.0f} s")
s = json.load(open("atlas/summary.json"))
it = s["iterations"]
print(f"atlas: spread {it[0]['spread']:.4g} -> {it[-1]['spread']:.4g} in {len(it)} iterations")
PY
echo "tutorial: outputs in $work; pictures in docs/images/tutorial-*.png"
