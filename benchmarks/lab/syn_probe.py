"""Where syn's error on the synthetic brain pair comes from, against pyca lddmm (docs/performance.md, "The
synthetic pair and the interpolation blur"): each method's map against the exact one
(data.brain_pair_true_map), after each scale (the later scales given 0 iterations), split into its smooth
part (a Gaussian of `--lowpass` voxels) and the rest; TRE, Dice; and syn's inverse maps' own error.

    python benchmarks/lab/syn_probe.py --seed 0                       # per scale, both methods
    python benchmarks/lab/syn_probe.py --seed 0 --only final --syn '[{}, {"step": 0.5}]'
    python benchmarks/lab/syn_probe.py --only final --finest '{"step": 0.5}' --lddmm '[]'   # the finest scale only
    python benchmarks/lab/syn_probe.py --real --finest '{"step": 0.5}'   # the real pairs (bench_brain, 2 mm, prepared)

--syn / --lddmm: JSON lists of parameter dicts (one row each). Needs the MNI152 template (nilearn, or
$PYCA_MNI_DIR). CPU, 2 mm: about a minute per syn run on two shared cores.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
from scipy import ndimage

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench_brain import evaluate, image  # noqa: E402


def _split(err, brain, lowpass):
    """Mean |err| (mm) over the brain, of err itself, its Gaussian low-pass and the rest."""
    low = np.stack([ndimage.gaussian_filter(err[..., c], lowpass) for c in range(3)], -1)
    n = lambda e: float(np.linalg.norm(e, axis=-1)[brain].mean())  # noqa: E731
    return n(err), n(low), n(err - low)


def run(method, pair, params, device):
    import pyca as ca
    from pyca.apps import lddmm, syn

    fixed, moving = image(pair["fixed"], pair["fixed_affine"]), image(pair["moving"], pair["moving_affine"])
    labels = image(pair["moving_labels"].astype(np.float32), pair["moving_affine"])
    mod = syn if method == "syn" else lddmm
    t0 = time.perf_counter()
    res = mod.register(fixed, moving, moving_labels=labels, device=device, **params)
    ca.synchronize()
    return res, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resolution", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--lowpass", type=float, default=3.0, help="voxels")
    ap.add_argument("--only", default="scales", choices=["scales", "final"], help="'final': no per-scale rows")
    ap.add_argument("--syn", default="[{}]")
    ap.add_argument("--lddmm", default="[{}]")
    ap.add_argument("--finest", default="{}", help="JSON: syn's parameters changed at the finest scale only (a lab "
                    "patch of syn._optimise)")
    ap.add_argument("--interp", default="cubic", choices=["cubic", "linear"], help="how data.brain_pair makes the "
                    "moving image: cubic B-splines (today's generator) or trilinearly (the check's pairs before "
                    "main 4e2bc1c)")
    ap.add_argument("--real", action="store_true", help="syn (--syn's first dict, --finest) on the two real brains "
                    "instead: bench_brain.py --pairs real --resolution 2 --raw no, both directions")
    a = ap.parse_args(argv)
    from pyca.apps import data, syn

    finest = json.loads(a.finest)
    if finest:
        opt = syn._optimise

        def patched(F, M, p, mask, f, n_it, energies):
            return opt(F, M, dict(p, **finest) if f == 1 else p, mask, f, n_it, energies)

        syn._optimise = patched
    if a.real:
        import bench_brain

        print(f"real pairs, syn {a.syn}, finest scale {a.finest}", flush=True)
        return bench_brain.main(["--pairs", "real", "--resolution", "2", "--methods", "syn", "--peers", "none",
                                 "--raw", "no", "--no-hd95", "--threads", "2", "--params",
                                 json.dumps(json.loads(a.syn)[0])])

    if data.mni_dir() is None:
        print("syn_probe: needs the MNI152 template: pip install nilearn, or set PYCA_MNI_DIR")
        return 0
    pair = data.brain_pair(seed=a.seed, resolution=a.resolution, interp=a.interp)
    true = data.brain_pair_true_map(seed=a.seed, resolution=a.resolution)
    brain = pair["fixed_labels"] > 0
    sp = np.sqrt((pair["moving_affine"][:3, :3] ** 2).sum(0))
    for method, plist in (("syn", json.loads(a.syn)), ("lddmm", json.loads(a.lddmm))):
        for params in plist:
            runs = [params]
            if a.only == "scales":
                if method == "syn":
                    caps = list(params.get("iterations", syn.DEFAULTS["iterations"]))
                else:
                    caps = list(params.get("iterations", (10, 150, 150)))
                runs = [dict(params, iterations=tuple(caps[: k + 1] + [0] * (len(caps) - k - 1)))
                        for k in range(len(caps))]
            for p in runs:
                res, sec = run(method, pair, p, a.device)
                mvox = res.full_map.numpy().astype(float)
                r = evaluate(method, mvox, res.labels.numpy(), sec, pair, brain)
                tot, low, high = _split((mvox - true) * sp, brain, a.lowpass)
                its = [s["iterations"] for s in res.timings["scales"]]
                line = (f"{method} {json.dumps(p)}: GM {r['dice_gm']:.4f} WM {r['dice_wm']:.4f} TRE {r['tre_mean']:.3f} "
                        f"mm | map error {tot:.3f} mm = low-pass {low:.3f} + rest {high:.3f} | iterations {its} "
                        f"| det {r['jac_min']:.3f} / {r['jac_max']:.2f} | {sec:.1f} s")
                if method == "syn":
                    line += f" | IC {res.inverse_consistency[0]:.3f} vox"
                if finest:
                    line += f" | finest scale {a.finest}"
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
