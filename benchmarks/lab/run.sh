#!/usr/bin/env bash
# Builds and runs the kernel lab (benchmarks/lab/gpu_lab.cu) on a CUDA machine; with --ncu also
# profiles each variant once with Nsight Compute. Output in $OUT (default /tmp/pyca-lab).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/pyca-lab}
mkdir -p "$OUT"
arch=${PYCA_LAB_ARCH:-sm_90}
nvcc -O3 -std=c++17 -arch="$arch" -lineinfo -I core/include -I cuda/include -I cuda/src -I core/src \
  benchmarks/lab/gpu_lab.cu cuda/src/ops/reductions.cu -o /tmp/gpu_lab || exit 1
/tmp/gpu_lab | tee "$OUT/lab.txt"
# which shared-memory atomics the tiled splat compiles to
cuobjdump -sass /tmp/gpu_lab 2>/dev/null | grep -oE "(ATOMS|RED|ATOM)\.[A-Z0-9.]+" | sort | uniq -c
if [ "${1:-}" = "--ncu" ]; then
  ncu --clock-control none -k "regex:${PYCA_LAB_NCU_KERNELS:-gatherKernel|applyH|splatKernel|mapKernel|partialKernel|finalKernel}" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
    --section LaunchStats --section ComputeWorkloadAnalysis --section InstructionStats /tmp/gpu_lab --profile >"$OUT/ncu.txt" 2>&1
  grep -E "^  [a-zA-Z_]+.*\(|Duration|DRAM Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Registers Per|Compute \(SM\) Th|Memory Throughput|Stall" "$OUT/ncu.txt" | head -150
fi
