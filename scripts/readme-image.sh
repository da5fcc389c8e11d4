#!/usr/bin/env bash
# Regenerates the README's picture, docs/images/lddmm-report.png: `pyca lddmm` on the built-in pair
# (CPU, so that it is the same on every machine), its report.png reduced to a 256-colour PNG.
#
#   bash scripts/readme-image.sh
#
# Needs pyca installed (or PYTHONPATH at a built checkout) and Pillow.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pyca lddmm --device cpu --no-progress --out "$tmp/out"
python3 tools/small_png.py "$tmp/out/report.png" docs/images/lddmm-report.png
