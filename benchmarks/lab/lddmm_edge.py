"""pyca lddmm at the grid's edge, MNI152 <-> Colin27 (benchmarks/_brains.py): the prepared pair and the
files as shipped through `pyca lddmm`, with the flow's compositions extending each map beyond the grid
by its border displacement (LDDMMComposeStep, the solver as it is) beside the identity extension they
had before (PyCA's ComposeHV, BACKGROUND_STRATEGY_PARTIAL_ID: the solver's unfused path with
LDDMMComposeStep replaced by ComposeHV), in one process. Prints Dice (bench_brain's scoring), det J over
the brain, and det D phiinv over the whole grid (min, voxels <= 0, their z range): the fold of the
identity extension lies outside the brain, in the grid's lowest slices.

    python benchmarks/lab/lddmm_edge.py --resolution 1 --device gpu --moving mni,colin --raw yes
    python benchmarks/lab/lddmm_edge.py --resolution 2 --device cpu --extension border   # one variant
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import _brains  # noqa: E402
import _real  # noqa: E402


def identity_extension(on):
    """Replaces LDDMMComposeStep by ComposeHV (PARTIAL_ID) and runs the unfused path (on), or restores."""
    import pyca.core as core
    from pyca.apps import _lddmm_solver

    if not hasattr(identity_extension, "saved"):
        identity_extension.saved = core.LDDMMComposeStep
    if on:
        core.LDDMMComposeStep = lambda out, h, v, delta: core.ComposeHV(out, h, v, delta)
        _lddmm_solver.Level.fused = False
    else:
        core.LDDMMComposeStep = identity_extension.saved
        _lddmm_solver.Level.fused = True


def whole_grid(jac):
    """det D phiinv over every voxel: min, max, voxels <= 0 and their z range (or '-')."""
    j = np.asarray(jac)
    bad = np.argwhere(j <= 0)
    zr = f"z {bad[:, 2].min()}-{bad[:, 2].max()}" if len(bad) else "-"
    return f"grid det [{j.min():.3f}, {j.max():.2f}] <=0 {len(bad)} vox {zr}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resolution", type=int, default=1)
    ap.add_argument("--device", default="gpu", choices=["cpu", "gpu"])
    ap.add_argument("--moving", default="mni,colin")
    ap.add_argument("--raw", default="yes", choices=["yes", "no", "only"])
    ap.add_argument("--extension", default="border,identity", help="border (today's), identity (before), or both")
    a = ap.parse_args()
    import pyca as ca

    print(_real.machine_line(), flush=True)
    for moving in a.moving.split(","):
        if a.raw != "only":
            pair = _brains.prepared(moving, a.resolution)
            ref = {k: pair.get(k) for k in ("fixed_labels", "fixed_brain", "fixed_affine", "moving_affine", "prob")}
            ref["hd95"] = False
            d = f"{pair['name']} {a.resolution} mm"
            for ext in a.extension.split(","):
                identity_extension(ext == "identity")
                mvox, lab, sec, peak, res = _real.run_pyca("lddmm", pair, a.device, {})
                r = _real.score(f"lddmm {ext}", mvox, lab, sec, ref, peak)
                _real._print(d, r)
                print(f"{'':<28s} {whole_grid(res.jacobian.numpy())} final mismatch {res.final_mismatch:.6g} "
                      f"iterations {sum(s['iterations'] for s in res.timings['scales'])}", flush=True)
        if a.raw != "no":
            for ext in a.extension.split(","):
                identity_extension(ext == "identity")
                with tempfile.TemporaryDirectory() as tmp:
                    shipped = _brains.as_shipped(moving, a.resolution, tmp)
                    d = f"{shipped['name']} {a.resolution} mm"
                    t0 = time.perf_counter()
                    full, lab, sec, summ = _real.run_cli("lddmm", shipped, a.device, {"allow_folds": True},
                                                         os.path.join(tmp, "out"))
                    r = _real.score(f"lddmm {ext} CLI", full, lab, sec, shipped)
                    _real._print(d, r)
                    q = summ.get("quality") or {}
                    print(f"{'':<28s} CLI: ok {q.get('ok')} grid det [{q.get('jacobian_min', float('nan')):.3f}, "
                          f"{q.get('jacobian_max', float('nan')):.2f}] <=0 {q.get('nonpositive_fraction', 0):.3g} of "
                          f"the voxels; problems {[p['code'] for p in q.get('problems', [])]}; "
                          f"{time.perf_counter() - t0:.1f} s with I/O", flush=True)
    identity_extension(False)
    ca.synchronize()


if __name__ == "__main__":
    main()
