"""Parameter sweeps of pyca's mutual information (pyca lddmm's, or with --method syn pyca register's) on the real
multi-modal pairs of bench_multimodal.py (Colin27 and the MNI152 template, a T2-/FLAIR-like contrast of the
moving brain onto the other's T1), in one process: one row per direction, contrast and setting, with each
scale's stop. What docs/performance.md's "Multi-modal registration" sweeps ran.

    python benchmarks/lab/mi_lab.py --resolution 2 --directions colin->mni --contrasts flair \\
        --params '[{}, {"sigma": 0.05}, {"iterations": [30, 30, 30]}]'

A setting is a dict of lddmm.register's (syn.register's with --method syn) parameters (metric mi unless given;
contrast t1 takes pyca's defaults plus the setting); "_fixed_mask": true passes the fixed image's support
(> 0) as fixed_mask; "_nmi": true (--method syn) matches by Studholme's normalised MI instead of MI
(syn._MI.normalized); "_moving_bias": true runs lddmm with mi_self.py's moving-side interpolation-bias
correction (tried, not kept).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from multimodal_pairs import Pairs, add_arguments

from bench_multimodal import dice, dice_class  # noqa: E402 (multimodal_pairs put benchmarks/ on the path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(ap, plural=True, direction="colin->mni", contrast="flair")
    ap.add_argument("--params", default="[{}]")
    ap.add_argument("--method", default="lddmm", choices=["lddmm", "syn"])
    a = ap.parse_args(argv)
    from pyca.apps import lddmm, syn

    mod = syn if a.method == "syn" else lddmm
    pairs = Pairs(a.resolution)
    im = pairs.image
    for direction, contrast, p in pairs.each(a.directions, a.contrasts):
        F, Fl, M, Ml = p.fixed, p.fixed_labels, p.moving, p.moving_labels
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
