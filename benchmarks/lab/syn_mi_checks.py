"""Reruns and per-iteration cost of `pyca register --metric mi` (syn) on a real multi-modal pair of
bench_multimodal.py: the SHA-1 of phiinv and the deformed image of each of --reruns identical runs (one
process; run the script twice to compare processes), and, with --cost, the finest scale's seconds per
iteration of syn mi against syn lncc on the same pair (the issue's "MI's cost per iteration within 2x
of LNCC's").

    python benchmarks/lab/syn_mi_checks.py --resolution 1 --device gpu --reruns 3 --cost
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys

import numpy as np
from multimodal_pairs import Pairs, add_arguments


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(ap, plural=False, direction="mni->colin", contrast="flair")
    ap.add_argument("--reruns", type=int, default=2)
    ap.add_argument("--cost", action="store_true", help="also time syn lncc (T1 onto T1) per iteration")
    a = ap.parse_args(argv)
    from pyca.apps import syn

    pairs = Pairs(a.resolution)
    im = pairs.image
    p = pairs.pair(a.direction, a.contrast)
    F, M, Mt1 = p.fixed, p.moving, p.moving_t1

    def finest(r):
        s = r.timings["scales"][-1]
        return s["seconds"] / max(s["iterations"], 1), s["iterations"]

    threads = os.environ.get("OMP_NUM_THREADS", "default")
    shas = []
    for k in range(a.reruns):
        r = syn.register(im(F), im(M), metric="mi", device=a.device)
        h = hashlib.sha1()
        for x in (r.phiinv, r.deformed):
            h.update(np.ascontiguousarray(x.numpy()).tobytes())
        shas.append(h.hexdigest())
        per, n = finest(r)
        print(f"{a.direction} {a.contrast} {a.resolution} mm {a.device} (OMP_NUM_THREADS {threads}) run {k}: "
              f"SHA-1 {shas[-1]}, finest scale {per * 1e3:.1f} ms/iteration ({n} iterations), "
              f"registration {r.timings['registration_s']:.2f} s", flush=True)
    print(f"reruns identical: {len(set(shas)) == 1} ({len(set(shas))} distinct of {len(shas)})", flush=True)
    if a.cost:
        rows = {}
        for metric, moving in (("mi", M), ("lncc", Mt1)):
            syn.register(im(F), im(moving), metric=metric, device=a.device)  # warm-up
            rows[metric] = finest(syn.register(im(F), im(moving), metric=metric, device=a.device))
            print(f"syn {metric}: finest scale {rows[metric][0] * 1e3:.2f} ms/iteration", flush=True)
        print(f"mi / lncc per iteration at the finest scale: {rows['mi'][0] / rows['lncc'][0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
