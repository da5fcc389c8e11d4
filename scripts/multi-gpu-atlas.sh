#!/usr/bin/env bash
# Atlas scaling over GPUs: builds pyca with CUDA on any CUDA host, then runs `pyca atlas` on an embedded
# Dask LocalCluster with one worker per visible GPU, for each GPU count asked for (CUDA_VISIBLE_DEVICES =
# the first k GPUs), and prints a scaling table: wall time per template iteration, speed-up and parallel
# efficiency against 1 GPU, bytes the workers sent per iteration (to each other and to the client), peak GPU memory per worker.
#
#   scripts/multi-gpu-atlas.sh                      # 64 subjects at 128^3, 5 iterations, on 1,2,4,8 GPUs
#   scripts/multi-gpu-atlas.sh --subjects 8 --size 64 --iterations 2 --gpus 1   # a quick check
#   options: --subjects N --size S --iterations K --gpus 1,2,4,8 --param KEY=VALUE (repeatable, registration)
#            --no-build (use the pyca already importable)
#
# Counts above the GPUs present are skipped (and said so). Offline hosts: wheels of missing Python
# packages (dask, distributed and their needs; swig, nibabel) in .whl/, Debian packages in
# .debs/, as scripts/gpu-check.sh. Logs, summaries and the table go to $OUT (default /tmp/pyca-multi-gpu).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/pyca-multi-gpu}
mkdir -p "$OUT"
subjects=64 size=128 iters=5 gpus=1,2,4,8 build=1 params=()
while [ $# -gt 0 ]; do
  case $1 in
    --subjects) subjects=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --iterations) iters=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --param) params+=(-p "$2"); shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "multi-gpu-atlas.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
export PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
nvidia-smi -L >"$OUT/gpus.txt" 2>&1 || { echo "multi-gpu-atlas.sh: no NVIDIA GPU visible" >&2; exit 2; }
ngpu=$(grep -c '^GPU ' "$OUT/gpus.txt")
echo "== $ngpu GPU(s): $(head -1 "$OUT/gpus.txt")"

. scripts/offline-deps.sh || exit 2  # wheels in .whl/ (dask's too), Debian packages in .debs/
if [ $build = 1 ]; then
  echo "== build (CUDA on) -> /tmp/pyca-gpu"
  t0=$SECONDS
  rm -rf /tmp/pyca-gpu
  if ! PYCA_WITH_CUDA=ON PYCA_BUILD_TESTS=OFF python3 -m pip install --no-build-isolation --no-deps -q \
      -Cbuild-dir=build/multi-gpu --target /tmp/pyca-gpu . >"$OUT/build.log" 2>&1; then
    tail -30 "$OUT/build.log"; echo "multi-gpu-atlas.sh: build failed" >&2; exit 1
  fi
  echo "   built in $((SECONDS - t0)) s"
  export PYTHONPATH=/tmp/pyca-gpu${PYTHONPATH:+:$PYTHONPATH}
fi
# Python runs from $OUT: from the checkout, its ./pyca (the sources) would hide the built package.
(cd "$OUT" && python3 -c "import pyca, distributed; assert pyca.cuda_available(), pyca.device_info()") || exit 2

pyca_cli() { (cd "$OUT" && python3 -c 'import sys; from pyca.cli import main; sys.exit(main(sys.argv[1:]))' "$@"); }
all=$(seq -s, 0 $((ngpu - 1)))
cohort=""
for k in ${gpus//,/ }; do
  if [ "$k" -gt "$ngpu" ]; then echo "== $k GPUs: skipped (only $ngpu present)"; continue; fi
  echo "== $k GPU(s): $subjects subjects at ${size}^3, $iters iterations"
  run=$OUT/atlas-gpu$k
  rm -rf "$run"
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 500 >"$OUT/mem-gpu$k.csv" 2>/dev/null &
  smi=$!
  if [ -z "$cohort" ]; then  # the first run writes the built-in cohort; the others read the same files
    inputs=(--cohort "$subjects" --cohort-size "$size,$size,$size")
  else
    inputs=("$cohort"/subject_*.nii.gz)
  fi
  CUDA_VISIBLE_DEVICES=$(echo "$all" | cut -d, -f1-"$k") pyca_cli atlas "${inputs[@]}" --out "$run" \
    --template-iterations "$iters" --device gpu --no-report --no-progress "${params[@]}" 2>&1 | tee "$OUT/atlas-gpu$k.log"
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  [ -z "$cohort" ] && [ -d "$run/cohort" ] && cohort=$run/cohort
done

python3 - "$OUT" "$gpus" <<'EOF'
import csv, json, os, sys
out, counts = sys.argv[1], [int(k) for k in sys.argv[2].split(",")]
rows = []
for k in counts:
    path = os.path.join(out, f"atlas-gpu{k}", "summary.json")
    if not os.path.isfile(path):
        continue
    s = json.load(open(path))
    its = [e for e in s["iterations"] if e["iteration"] > 0]
    if not its:
        continue
    wall = sum(e["wall_s"] for e in its) / len(its)
    sent = [e.get("bytes_sent_by_workers") or 0 for e in its]
    peak = {}
    for row in csv.reader(open(os.path.join(out, f"mem-gpu{k}.csv"))):
        if len(row) == 2:
            i, mib = int(row[0]), float(row[1])
            peak[i] = max(peak.get(i, 0.0), mib)
    used = [peak[i] for i in sorted(peak)[:k]]
    rows.append((k, wall, sum(sent) / len(sent), max(used) if used else float("nan"),
                 its[0]["registration_s_per_subject"], len(s["names"]) - len(s["excluded"])))
if not rows:
    sys.exit("no run completed")
t1 = next((r[1] for r in rows if r[0] == 1), None)
print("\n| GPUs | subjects | s / iteration | speed-up | parallel efficiency | MiB sent by workers / iteration | "
      "peak GPU MiB per worker | registration s / subject |")
print("|---|---|---|---|---|---|---|---|")
for k, wall, sent, mem, reg, n in rows:
    sp = t1 / wall if t1 else float("nan")
    print(f"| {k} | {n} | {wall:.2f} | {sp:.2f} | {sp / k:.0%} | {sent / 2**20:.1f} | {mem:.0f} | {reg:.3f} |")
EOF
