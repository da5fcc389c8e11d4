"""A driver for profiling the GPU MI histogram kernels (Nsight Compute): JointHistogram and
MutualInformationGradients on a 1 mm phantom pair (192 x 224 x 192, the built-in phantom and a
non-monotonic map of it plus noise), --calls times each. Run from outside the checkout, e.g.

    ncu --clock-control none -k regex:"miHist|miGradPair" --launch-skip 2 --launch-count 2 \\
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \\
        --section WarpStateStats --section Occupancy python3 benchmarks/lab/mi_hist_profile.py

PYCA_MI_HIST selects the histogram kernel (cuda/src/ops/mutual_information.cu).
"""
import argparse

import numpy as np

import pyca as ca
from pyca.apps import data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="192,224,192")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--device", default="gpu", choices=["gpu", "cpu"], help="cpu: a smoke test of this script")
    a = ap.parse_args()
    size = tuple(int(x) for x in a.size.split(","))
    fixed, _ = data.builtin_pair(size=size)
    f = fixed.numpy()
    rng = np.random.default_rng(0)
    j = (np.sin(3.0 * f / max(float(f.max()), 1e-6)) ** 2 + 0.05 * rng.standard_normal(f.shape)).astype(np.float32)
    g = fixed.grid()
    mem = ca.MEM_DEVICE if a.device == "gpu" else ca.MEM_HOST
    I = fixed.clone(mem)
    J = ca.Image3D.from_array(np.asfortranarray(j), g).clone(mem)
    lo, hi = (float(x) for x in ca.MinMax(I))
    jlo, jhi = float(j.min()), float(j.max())
    h = ca.Image3D(ca.GridInfo(ca.Vec3Di(32, 32, 1)), mem)
    gI, gJ = ca.Image3D(g, mem), ca.Image3D(g, mem)
    for _ in range(a.calls):
        ca.JointHistogram(h, I, J, lo, hi, jlo, jhi)
    for _ in range(a.calls):
        ca.MutualInformationGradients(gI, gJ, I, J, 32, lo, hi, jlo, jhi)
    ca.synchronize()
    print("ok", float(h.numpy().sum()))


if __name__ == "__main__":
    main()
