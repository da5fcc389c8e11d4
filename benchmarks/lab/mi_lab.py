"""Parameter sweeps of pyca's mutual information (pyca lddmm's, or with --method syn pyca register's) on the real multi-modal pairs of
bench_multimodal.py (Colin27 and the MNI152 template, a T2-/FLAIR-like contrast of the moving brain onto
the other's T1), in one process: one row per direction, contrast and setting, with each scale's stop.
What docs/performance.md's "Multi-modal registration" sweeps ran.

    python benchmarks/lab/mi_lab.py --resolution 2 --directions colin->mni --contrasts flair \\
        --params '[{}, {"sigma": 0.05}, {"iterations": [30, 30, 30]}]'

A setting is a dict of lddmm.register's (syn.register's with --method syn) parameters (metric mi unless given; contrast t1 takes pyca's
defaults plus the setting); "_fixed_mask": true passes the fixed image's support (> 0) as fixed_mask;
"_nmi": true (--method syn) matches by Studholme's normalised MI instead of MI (syn._MI.normalized);
"_moving_bias": true runs lddmm with mi_self.py's moving-side interpolation-bias correction (tried, not kept).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench_multimodal import brains, dice, dice_class  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resolution", type=int, default=2)
    ap.add_argument("--directions", default="colin->mni")
    ap.add_argument("--contrasts", default="flair")
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--params", default="[{}]")
    ap.add_argument("--method", default="lddmm", choices=["lddmm", "syn"])
    a = ap.parse_args(argv)
    import pyca as ca
    from pyca.apps import data, lddmm, syn

    mod = syn if a.method == "syn" else lddmm

    imgs, aff = brains(a.resolution)
    sp = np.linalg.norm(aff[:3, :3], axis=0)
    g = ca.GridInfo(ca.Vec3Di(*imgs["mni"][0].shape), ca.Vec3Df(*sp), ca.Vec3Df(*aff[:3, 3]))

    def im(x):
        return ca.Image3D.from_array(np.asfortranarray(x, np.float32), g)

    for direction in a.directions.split(","):
        mv, fx = direction.split("->")
        Mt1, Ml, Mc = imgs[mv]
        F, Fl, _ = imgs[fx]
        for contrast in a.contrasts.split(","):
            M = Mt1 if contrast == "t1" else data.other_contrast(Mt1, contrast, seed=1, centres=Mc,
                                                                  spacing=(a.resolution,) * 3)
            for prm in json.loads(a.params):
                kw = dict(prm)
                if kw.pop("_fixed_mask", False):  # the fixed image's support (> 0) as fixed_mask
                    kw["fixed_mask"] = im((F > 0).astype(np.float32))
                syn._MI.normalized = bool(kw.pop("_nmi", False))
                moving_bias = kw.pop("_moving_bias", False)  # mi_self.py's variant (lddmm, tried, not kept)
                kw = {k.lstrip("_"): v for k, v in kw.items()}  # ("_bins": the spelling before bins was a parameter)
                if contrast != "t1":
                    kw.setdefault("metric", "mi")
                t0, c0 = time.perf_counter(), time.process_time()
                if moving_bias:
                    from mi_self import register as moving_bias_register

                    r = moving_bias_register(im(F), im(M), "moving", moving_labels=im(Ml), device=a.device, **kw)
                else:
                    r = mod.register(im(F), im(M), moving_labels=im(Ml), device=a.device, **kw)
                sec, cpu = time.perf_counter() - t0, time.process_time() - c0
                lab = np.round(r.labels.numpy())
                stops = [f"{s['stop'].split(' (')[0]}@{s['iterations']}" for s in r.timings["scales"]]
                print(f"{direction} {contrast:5s} {json.dumps(prm):48s} Dice {dice(lab, Fl):.4f} "
                      f"({'/'.join(f'{dice_class(lab, Fl, k):.3f}' for k in (1, 2, 3))}) det J min "
                      f"{r.quality['jacobian_min']:.3f} {sec:6.1f} s (CPU {cpu:.1f} s) {stops} "
                      f"{[q['code'] for q in r.quality['problems']]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
