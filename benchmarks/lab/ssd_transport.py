"""The SSD's two discretisations in pyca lddmm's solver, apart from any mask (docs/lddmm.md, 'The
working grid'): without a mask the fused path transports the fixed image and forms the difference at
each time step, b_j = |D phi_{t_j,1}| (J0_j - I1 o phi_{t_j,1}) grad J0_j (LDDMMGradStep); with a mask it
forms the residual once at t = 1, r = w (J0_T - I1), and transports that, b_j = |D phi_{t_j,1}| (r o
phi_{t_j,1}) grad J0_j (LDDMMResidualStep), so the moving image reaches t_j interpolated twice (J0_T o
phi_{t_j,1}) instead of once (J0_j). A mask of ones on the fixed grid (pad 'none') keeps the energy the
same and changes only that.

On the prepared real pair (benchmarks/_brains.py), both directions, at `--resolution` mm:
1. lddmm ssd, pad 'none', without a mask and with a mask of ones: Dice (CSF / GM / WM, mean), det J
   range, iterations per scale, CPU time;
2. at the unmasked run's final velocities, the two paths' gradients b_j: |b_resid - b_plain| / |b_plain|
   per time step (0 at t = 1, where nothing is transported; growing with the distance transported).

    python benchmarks/lab/ssd_transport.py --resolution 2
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resolution", type=int, default=2)
    ap.add_argument("--moving", default="colin,mni")
    a = ap.parse_args(argv)
    import _brains
    from bench_brain import dice, image

    import pyca as ca
    from pyca.apps import lddmm
    from pyca.apps._lddmm_solver import Level
    from pyca.registration import intensities
    from pyca.registration.inputs import on_fixed
    from pyca.registration.metrics import SSD

    for mv in a.moving.split(","):
        pr = _brains.prepared(mv, a.resolution)
        F, M = image(pr["fixed"], pr["fixed_affine"]), image(pr["moving"], pr["moving_affine"])
        L = image(pr["moving_labels"].astype(np.float32), pr["moving_affine"])
        ones = ca.Image3D(F.grid(), ca.MEM_HOST)
        ca.SetMem(ones, 1.0)
        runs = {}
        for name, kw in (("plain", {}), ("mask of ones", {"fixed_mask": ones})):
            c0 = time.process_time()
            r = lddmm.register(F, M, moving_labels=L, device="cpu", pad="none", **kw)
            cpu = time.process_time() - c0
            lab = np.round(r.labels.numpy())
            d = [dice(lab, pr["fixed_labels"], k) for k in (1, 2, 3)]
            q = r.quality
            its = [s["iterations"] for s in r.timings["scales"]]
            print(f"{mv} -> other, {a.resolution} mm, {name:12s}: Dice {np.mean(d):.4f} ({'/'.join(f'{x:.3f}' for x in d)}) "
                  f"det J [{q['jacobian_min']:.3f}, {q['jacobian_max']:.2f}] iterations {its} CPU {cpu:.1f} s", flush=True)
            runs[name] = r

        # 2. both paths' gradients at the plain run's final velocities, on the fixed grid with the moving image
        # resampled once through the linear stage and the fixed image as compared (no interpolation-blur
        # target: the two paths' own difference only)
        r = runs["plain"]
        p = dict(r.params)
        T = int(p["time_steps"])
        g = F.grid()
        I1, Mn = intensities.compared_images(F, M, p, ca.MEM_HOST, None, None)
        I0 = on_fixed(g, Mn, r.affine.hfield(ca.MEM_HOST))
        b = {}
        for name, metric in (("plain", SSD(g, ca.MEM_HOST, p["sigma"])),
                             ("resid", SSD(g, ca.MEM_HOST, p["sigma"], mask=ones))):
            lev = Level(g, ca.MEM_HOST, T, I0, I1, p, metric=metric)
            for j in range(T):
                ca.Copy(lev.v[j], r.velocity[j])
            lev.forward()
            lev.gradients()
            lev.direction_max()  # the fused sweep: m_new[j] = b_j
            b[name] = [lev.m_new[j].numpy().copy() for j in range(T)]
        rel = [np.linalg.norm(b["resid"][j] - b["plain"][j]) / np.linalg.norm(b["plain"][j]) for j in range(T)]
        print(f"   |b_resid - b_plain| / |b_plain| per time step (t_0 .. t_{T - 1}): {' '.join(f'{x:.3f}' for x in rel)}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
