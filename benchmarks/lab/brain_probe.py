"""Probes of where pyca's error on the synthetic brain pairs comes from (docs/performance.md, "A narrower,
Gaussian-like kernel": "Where the gap was not"), over bench_brain.py's pairs, runner and metrics:

    python benchmarks/lab/brain_probe.py ssd --seed 2        # the match at the exact map and at pyca's
    python benchmarks/lab/brain_probe.py refine --seed 2     # demons steps after pyca's map
    python benchmarks/lab/brain_probe.py sharp --seed 2      # the moving image trilinear, then cubic
    python benchmarks/lab/brain_probe.py blur --seed 2       # both images blurred first

--resolution (2), --device (cpu), --params (JSON: lddmm.register's parameters for pyca's run), --interp
(the generator's resampling: linear, the pairs these probes were written for, or cubic). Needs
the MNI152 template (nilearn, or $PYCA_MNI_DIR).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
from scipy import ndimage

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench_brain import evaluate, image, run_pyca  # noqa: E402


def _warp(a, vox, order=1):
    return ndimage.map_coordinates(a, np.moveaxis(vox, -1, 0), order=order, mode="nearest")


def _row(label, r):
    return (f"{label}: GM {r['dice_gm']:.4f} WM {r['dice_wm']:.4f} TRE {r['tre_mean']:.3f} mm det "
            f"{r['jac_max']:.2f} / {r['jac_min']:.2f} {r['seconds']:.1f} s")


def solver_images(pair):
    """(I1, M) as the solver compares them at the finest scale, float64 arrays: the fixed image scaled to
    [0, 1] by its robust range and blurred by fixed_blur; the moving image histogram-matched to it and
    scaled the same way (on its own grid). No bias correction (these pairs have no bias field)."""
    import pyca as ca
    from pyca.apps import lddmm
    from pyca.registration import intensities

    fixed, moving = image(pair["fixed"], pair["fixed_affine"]), image(pair["moving"], pair["moving_affine"])
    I1, M = intensities.compared_images(fixed, moving, dict(lddmm.DEFAULTS), ca.MEM_HOST)
    return I1.numpy().astype(np.float64), M.numpy().astype(np.float64)


def probe_ssd(pair, seed, a, params):
    from pyca.apps import data

    true = data.brain_pair_true_map(seed=seed, resolution=a.resolution)
    mvox, _, _, _ = run_pyca(pair, a.device, params)
    I1, M = solver_images(pair)
    brain = pair["fixed_labels"] > 0
    for blur in (0.0, 0.41, 0.58, 0.8):  # extra blur of I1, voxels (0.41: what the solver adds itself)
        ref = ndimage.gaussian_filter(I1, blur) if blur else I1
        cols = [f"{name} {np.sum((_warp(M, m) - ref)[brain] ** 2):.1f}"
                for name, m in (("exact map", true), ("pyca", mvox))]
        print(f"seed {seed}, I1 blurred by {blur} more voxels: sum of squared differences over the brain: "
              + ", ".join(cols), flush=True)


def probe_refine(pair, seed, a, params, steps=20, step=0.3):
    """Demons steps (Thirion's normalised SSD force) on pyca's map: the update smoothed by `fluid` voxels, the
    added displacement by `elastic` voxels (0: not)."""
    brain = pair["fixed_labels"] > 0
    mvox, lab, sec, _ = run_pyca(pair, a.device, params)
    print(_row(f"seed {seed} pyca", evaluate("pyca", mvox, lab, sec, pair, brain)), flush=True)
    I1, M = solver_images(pair)
    idx = np.stack(np.meshgrid(*[np.arange(n, dtype=float) for n in I1.shape], indexing="ij"), -1)
    for fluid, elastic in ((1.0, 1.0), (1.0, 0.0)):
        phi = mvox.copy()
        for _ in range(steps):
            W = _warp(M, phi)
            r, g = W - I1, np.stack(np.gradient(W), -1)
            den = (g ** 2).sum(-1) + r ** 2
            u = np.where(den[..., None] > 1e-9, -(r / np.maximum(den, 1e-9))[..., None] * g, 0.0)
            u = np.stack([ndimage.gaussian_filter(u[..., c], fluid) for c in range(3)], -1)
            u *= min(1.0, step / max(np.abs(u).max(), 1e-12))
            phi = np.stack([_warp(phi[..., c], idx + u) for c in range(3)], -1)
            if elastic:
                d = phi - mvox
                phi = mvox + np.stack([ndimage.gaussian_filter(d[..., c], elastic) for c in range(3)], -1)
        labels = _warp(pair["moving_labels"].astype(np.float32), phi, order=0)
        print(_row(f"seed {seed} + {steps} demons steps (fluid {fluid}, elastic {elastic})",
                   evaluate("refined", phi, labels, 0.0, pair, brain)), flush=True)


def probe_sharp(pair, seed, a, params):
    """The same warp with the moving image resampled from the template trilinearly and by cubic B-splines
    (data.brain_pair's interp)."""
    from pyca.apps import data

    brain = pair["fixed_labels"] > 0
    for interp in ("linear", "cubic"):
        p = data.brain_pair(seed=seed, resolution=a.resolution, interp=interp)
        mvox, lab, sec, _ = run_pyca(p, a.device, params)
        print(_row(f"seed {seed}, moving image by {interp} resampling", evaluate("pyca", mvox, lab, sec, p, brain)),
              flush=True)


def probe_blur(pair, seed, a, params):
    brain = pair["fixed_labels"] > 0
    for s in (0.0, 0.5, 0.75, 1.0):
        blurred = {k: ndimage.gaussian_filter(pair[k].astype(np.float64), s).astype(np.float32)
                   for k in ("fixed", "moving")}
        p = dict(pair, **blurred) if s else pair
        mvox, lab, sec, _ = run_pyca(p, a.device, params)
        print(_row(f"seed {seed}, both images blurred by {s} voxels", evaluate("pyca", mvox, lab, sec, pair, brain)),
              flush=True)


PROBES = {"ssd": probe_ssd, "refine": probe_refine, "sharp": probe_sharp, "blur": probe_blur}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("probe", choices=sorted(PROBES))
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--resolution", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--params", default="{}", help="JSON: lddmm.register's parameters for pyca's run")
    ap.add_argument("--interp", default="linear", choices=["linear", "cubic"], help="data.brain_pair's resampling")
    a = ap.parse_args(argv)
    from pyca.apps import data

    if data.mni_dir() is None:
        print("brain_probe: needs the MNI152 template: pip install nilearn, or set PYCA_MNI_DIR")
        return 0
    pair = data.brain_pair(seed=a.seed, resolution=a.resolution, interp=a.interp)
    PROBES[a.probe](pair, a.seed, a, json.loads(a.params))
    return 0


if __name__ == "__main__":
    sys.exit(main())
