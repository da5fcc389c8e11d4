"""Parameter sweeps of pyca lddmm on the synthetic brain pairs (bench_brain.py's pairs, metrics and
runners), in one process: one row per pair and setting, with the scales' stops and the rejected steps,
and FireANTs beside it on request. What docs/lddmm.md's sweeps ("Defaults for T1 brain MRI") ran.

    python benchmarks/lab/brain_lab.py --seeds 2,0,1L --resolution 1 --device gpu \\
        --params '[{}, {"iterations": [10, 150, 150]}, {"_bias": 0.15}]' [--fireants]

A seed with the suffix L is that pair with its moving image stored LAS. In a setting, "_bias": b
multiplies the moving image by a smooth field of +-b (noise smoothed over 40 mm, seeded by the pair);
the other keys are lddmm.register's parameters. Needs the MNI152 template (nilearn, or
$PYCA_MNI_DIR naming a folder with its three files).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench_brain import evaluate, run_fireants, run_pyca  # noqa: E402


def with_bias(pair, amplitude, seed):
    """The pair with its moving image times 1 + amplitude * (smooth noise scaled to [-1, 1])."""
    from scipy.ndimage import gaussian_filter

    mv = pair["moving"]
    sp = np.sqrt((pair["moving_affine"][:3, :3] ** 2).sum(0))
    f = gaussian_filter(np.random.default_rng(100 + seed).standard_normal(mv.shape), 40.0 / sp, mode="reflect")
    return dict(pair, moving=(mv * (1.0 + amplitude * f / np.abs(f).max())).astype(np.float32))


def row(label, r):
    return (f"{label}: GM {r['dice_gm']:.4f} WM {r['dice_wm']:.4f} {r['seconds']:6.2f} s det {r['jac_max']:.2f} / "
            f"{r['jac_min']:.2f} folds {r['folds']:.4f} TRE {r['tre_mean']:.3f} mm")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,2,1L", help="comma-separated; suffix L: the moving image stored LAS")
    ap.add_argument("--resolution", type=int, default=1)
    ap.add_argument("--device", default="gpu", choices=["cpu", "gpu"])
    ap.add_argument("--params", default="[{}]", help="JSON list of settings (see above)")
    ap.add_argument("--fireants", action="store_true", help="FireANTs beside pyca on each pair (GPU)")
    a = ap.parse_args(argv)
    from pyca.apps import data

    if data.mni_dir() is None:
        print("brain_lab: needs the MNI152 template: pip install nilearn, or set PYCA_MNI_DIR")
        return 0
    settings = json.loads(a.params)
    for spec in a.seeds.split(","):
        seed, las = int(spec.rstrip("L")), spec.endswith("L")
        name = f"seed {seed}{' LAS' if las else ''}"
        pair = data.brain_pair(seed=seed, resolution=a.resolution, las=las)
        brain = pair["fixed_labels"] > 0
        for prm in settings:
            kw = dict(prm)
            bias = float(kw.pop("_bias", 0.0))
            p = with_bias(pair, bias, seed) if bias else pair
            mvox, lab, sec, res = run_pyca(p, a.device, kw)
            stops = [s["stop"].split(" (")[0] + f" @{s['iterations']}" for s in res.timings["scales"]]
            rejected = sum(not e["accepted"] for e in res.energies)
            print(row(f"{name} {json.dumps(prm)}", evaluate("pyca", mvox, lab, sec, p, brain)) +
                  f" iterations {len(res.energies)} ({rejected} rejected) {stops}", flush=True)
        if a.fireants:
            out = run_fireants(pair)
            print(row(f"{name} FireANTs", evaluate("fireants", *out, pair, brain)) if out is not None else
                  f"{name} FireANTs: not installed or no GPU", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
