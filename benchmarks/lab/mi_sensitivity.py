"""How far a tiny change of the moving image moves a `pyca register --metric mi` (syn) map: the brain
pair of tests/python/test_syn_mi.py (data.brain_pair, seed 0, a FLAIR-like contrast of the moving brain),
registered as given and with the moving image times 1 + eps N(0, 1) for each --eps; prints the mean and
largest distance between the two maps, in voxels. A smooth Parzen window moves the map by about eps; a
window whose derivative jumps (at knots, or at rounded positions) moves it by a fixed amount whatever
eps, as the GPU's float rounding does against the CPU's (test_gpu_registration_matches_the_cpu).

    python benchmarks/lab/mi_sensitivity.py --resolution 6 --eps 1e-6 1e-7
"""
from __future__ import annotations

import argparse

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resolution", type=float, default=6.0)
    ap.add_argument("--eps", type=float, nargs="+", default=[1e-6, 1e-7])
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args(argv)
    import pyca as ca
    from pyca.apps import data, syn

    pair = data.brain_pair(seed=0, resolution=a.resolution)

    def image(arr, aff):
        sp = np.linalg.norm(aff[:3, :3], axis=0)
        g = ca.GridInfo(ca.Vec3Di(*arr.shape), ca.Vec3Df(*sp), ca.Vec3Df(*aff[:3, 3]))
        return ca.Image3D.from_array(np.asfortranarray(arr, np.float32), g)

    fixed = image(pair["fixed"], pair["fixed_affine"])
    flair = data.other_contrast(pair["moving"], "flair", spacing=(a.resolution,) * 3)
    kw = dict(metric="mi", scales=(2, 1), iterations=(30, 20), device=a.device)
    ref = syn.register(fixed, image(flair, pair["moving_affine"]), **kw)
    for eps in a.eps:
        moved = flair * (1 + eps * np.random.default_rng(1).standard_normal(flair.shape))
        r = syn.register(fixed, image(moved, pair["moving_affine"]), **kw)
        d = np.linalg.norm(ref.phiinv.numpy() - r.phiinv.numpy(), axis=-1)
        print(f"{a.resolution:g} mm, eps {eps:g}: map moved by {d.mean():.4f} voxel on average, {d.max():.4f} at most")


if __name__ == "__main__":
    main()
