"""pyca lddmm's contrast check (quality.contrast_agreement, judged by quality.better_aligned) on
same-contrast pairs (false alarms) and T2-like / FLAIR-like pairs (hits): for ssd and lncc the pair is
judged on the inputs as given and after lddmm's rigid mi probe, at the higher eta2 (docs/lddmm.md, 'A run
that knows when it failed'). Prints eta2 / slope of both and the verdict, per pair.

    PYTHONPATH=$PWD python benchmarks/lab/contrast_check.py       # 2 mm real pairs need MNI and Colin27
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pyca as ca  # noqa: E402
from pyca.apps import data, lddmm  # noqa: E402
from pyca.registration import intensities, parameters  # noqa: E402


def image(a, aff=None):
    a = np.asfortranarray(a, np.float32)
    if aff is None:
        return ca.Image3D.from_array(a, ca.GridInfo(a.shape))
    sp = np.linalg.norm(aff[:3, :3], axis=0)
    return ca.Image3D.from_array(a, ca.GridInfo(ca.Vec3Di(*a.shape), ca.Vec3Df(*sp), ca.Vec3Df(*aff[:3, 3])))


def judge(name, fixed, moving, metric="ssd"):
    p = parameters.merged(lddmm.DEFAULTS, {"metric": metric}, "contrast_check")
    I1, Mn = intensities.compared_images(fixed, moving, p, ca.MEM_HOST, None, None)
    c = lddmm._contrast(I1, Mn, None, None, p, fixed.grid(), ca.MEM_HOST, ca.Image3D(fixed.grid()))
    print(f"{name:44s} {metric:4s} given eta2 {c['given_eta2']:.3f} slope {c['given_slope']:+.3f} | aligned eta2 "
          f"{c['aligned_eta2']:.3f} slope {c['aligned_slope']:+.3f} | judged on {c['judged_on']:7s} r2 {c['r2']:.3f} "
          f"different {c['different']}", flush=True)


def synthetic(res, seeds, interps, shift=0.0):
    for interp in interps:
        for seed in seeds:
            p = data.brain_pair(seed=seed, resolution=res, interp=interp)
            maff = p["moving_affine"].copy()
            maff[0, 3] += shift
            F = image(p["fixed"], p["fixed_affine"])
            tag = f"synthetic {interp} {res}mm seed {seed}" + (f" shifted {shift:g}mm" if shift else "")
            judge(f"{tag} T1", F, image(p["moving"], maff))
            for k in ("t2", "flair"):
                judge(f"{tag} {k}", F, image(data.other_contrast(p["moving"], k, spacing=(res,) * 3), maff))


def real(res):
    from bench_multimodal import brains

    imgs, aff = brains(res)
    for mv, fx in (("colin", "mni"), ("mni", "colin")):
        F = image(imgs[fx][0], aff)
        t1, _, c = imgs[mv]
        for metric in ("ssd", "lncc"):
            judge(f"real {res}mm {mv}->{fx} T1", F, image(t1, aff), metric)
        for k in ("t2", "flair"):
            m = data.other_contrast(t1, k, seed=1, centres=c, spacing=(res,) * 3)
            for metric in ("ssd", "lncc"):
                judge(f"real {res}mm {mv}->{fx} {k}", F, image(m, aff), metric)


if __name__ == "__main__":
    f, m = data.builtin_pair()
    judge("builtin pair", f, m)
    synthetic(6, (0, 1, 2), ("cubic", "linear"))
    synthetic(6, (0,), ("cubic",), shift=18.0)
    synthetic(2, (0,), ("cubic",))
    if data.mni_dir() is not None:
        real(2)
    import _brains

    if _brains.available() is None:  # the files as shipped (1 mm, other grids and intensity scales)
        from pyca import io as pio

        ps = _brains.paths()
        col, mni = pio.load_image(ps["colin"]), pio.load_image(ps["t1"])
        judge("shipped colin->mni T1", mni, col)
        judge("shipped mni->colin T1", col, mni)
