"""How much the match energy of an honest registration may end above the linear stage's (the quality
check's "worse than the linear stage", pyca.registration.quality.WORSE_TOL): pairs that are already
aligned or nearly so, where a deformable stage can gain nothing and may lose a little, registered with
every method and metric that the check judges (pyca lddmm: ssd, lncc, mi; pyca register (syn): lncc,
mi), their defaults. Prints each run's linear and final match energies and final / linear - 1.

Pairs (the MNI152 T1 at `--resolution` mm, block means of the 1 mm file; values in [0, 1]):
    itself      the image onto itself
    noise       two copies with independent Gaussian noise of sd `--noise` (a rescan of one brain)
    half        the 1 mm file's block means on two grids half a voxel apart, the headers saying where
                (two exact samplings of one brain: the true map is the identity in the world)
    half+noise  both
    blobs       a sum of 40 Gaussian blobs sampled exactly on two 32^3 grids half a voxel apart (1 mm voxels;
                test_syn's interpolation-blur pair): the images agree exactly in the world, and any
                deformation can only fit the interpolation's blur
    blobs+noise both
    colin, mni  the prepared real pair (benchmarks/_brains.py), that brain moving: not aligned, for scale

    python benchmarks/lab/quality_tol.py --resolution 4
    python benchmarks/lab/quality_tol.py --resolution 2 --pairs half --methods lddmm-ssd,syn-lncc

Results: docs/lddmm.md ('A run that knows when it failed') and benchmarks/lab/notes.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

METHODS = ("lddmm-ssd", "lddmm-lncc", "lddmm-mi", "syn-lncc", "syn-mi")
PAIRS = ("itself", "noise", "half", "half+noise", "blobs", "blobs+noise")


def images(resolution, pair, noise, seed=0):
    """(fixed, moving) Image3D of the pair."""
    import nibabel as nib

    from bench_brain import image

    if pair.startswith("blobs"):
        return blobs(pair.endswith("noise"), noise, seed)
    if pair in ("colin", "mni"):
        import _brains

        pr = _brains.prepared(pair, resolution)
        return image(pr["fixed"], pr["fixed_affine"]), image(pr["moving"], pr["moving_affine"])

    from pyca.apps import data

    img = nib.load(os.path.join(data.mni_dir(), data._MNI_FILES["t1"]))
    a = np.asarray(img.dataobj, np.float32)
    a = a / a.max()
    f = int(resolution)

    def sampled(offset):
        b = data._block_mean(a[offset:, offset:, offset:], f)
        aff = img.affine.copy()
        aff[:3, 3] += aff[:3, :3] @ np.full(3, offset + (f - 1) / 2.0)  # block centres
        aff[:3, :3] *= f
        return b, aff

    fixed, faff = sampled(0)
    moving, maff = sampled(f // 2) if pair.startswith("half") else (fixed.copy(), faff)
    if pair.endswith("noise"):
        rng = np.random.default_rng(seed)
        fixed = fixed + noise * rng.standard_normal(fixed.shape).astype(np.float32)
        moving = moving + noise * rng.standard_normal(moving.shape).astype(np.float32)
    return image(fixed, faff), image(moving, maff)


def blobs(noisy, noise, seed):
    import pyca as ca

    shape = (32, 32, 32)
    rng = np.random.default_rng(3)
    centres, amps, widths = rng.uniform(6, 26, (40, 3)), rng.uniform(0.3, 1.0, 40), rng.uniform(1.0, 2.0, 40)

    def image(q):
        return sum(a * np.exp(-((q - c) ** 2).sum(-1) / (2 * s * s)) for c, a, s in zip(centres, amps, widths))

    idx = np.stack(np.indices(shape), -1).astype(float)
    shift = np.array([0.5, 0.5, 0.5])
    f, m = image(idx), image(idx + shift)
    if noisy:
        r = np.random.default_rng(seed)
        f, m = f + noise * r.standard_normal(shape), m + noise * r.standard_normal(shape)
    return tuple(ca.Image3D.from_array(np.asfortranarray(a, np.float32), ca.GridInfo(shape, (1.0, 1.0, 1.0), o))
                 for a, o in ((f, (0.0, 0.0, 0.0)), (m, tuple(shift))))


def run(method, fixed, moving):
    from pyca.apps import lddmm, syn

    prog, metric = method.split("-")
    mod = syn if prog == "syn" else lddmm
    t0 = time.perf_counter()
    res = mod.register(fixed, moving, device="cpu", metric=metric)
    q = res.quality
    lin, fin = q["linear_match_energy"], q["final_match_energy"]
    return lin, fin, time.perf_counter() - t0, [p["code"] for p in q["problems"]]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resolution", type=int, default=4)
    ap.add_argument("--pairs", default=",".join(PAIRS))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--noise", type=float, default=0.01, help="sd of the noise, the images scaled to [0, 1]")
    a = ap.parse_args(argv)
    print(f"MNI152 T1 at {a.resolution} mm, CPU; noise sd {a.noise:g}", flush=True)
    print("| pair | method | linear energy | final energy | final / linear - 1 | problems | s |\n|---|---|---|---|---|---|---|")
    for pair in a.pairs.split(","):
        fixed, moving = images(a.resolution, pair, a.noise)
        for method in a.methods.split(","):
            lin, fin, sec, probs = run(method, fixed, moving)
            rel = fin / lin - 1.0 if lin != 0 else (0.0 if fin == lin else float("inf"))
            print(f"| {pair} | {method} | {lin:.6g} | {fin:.6g} | {rel:+.3e} | {','.join(probs) or '-'} | "
                  f"{sec:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
