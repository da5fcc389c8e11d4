"""Kernel lab for the LDDMM time step (GPU): each stage of one time step, unfused (the chain of single
operations) and fused (ops/lddmm.yaml), timed over back-to-back calls with one synchronisation,
with the bytes it must move and its share of the card's copy rate measured in the same run; then one
whole solver iteration split into its phases. Predictions and results: benchmarks/lab/notes.md.

    python benchmarks/lab/lddmm_lab.py [--sizes 128,256] [--time-steps 10]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pyca as ca  # noqa: E402
from _harness import pyca_sync  # noqa: E402


def per_call(fn, calls=20, repeat=9):
    """Median seconds per call over `repeat` batches of `calls` back-to-back calls + one sync."""
    for _ in range(3):
        fn()
    pyca_sync()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        pyca_sync()
        ts.append((time.perf_counter() - t0) / calls)
    return float(np.median(ts))


def row(what, t, nbytes, rate, note=""):
    bw = nbytes / t
    print(f"| {what:<52} | {1e3 * t:8.4f} | {nbytes / 2**20:7.0f} | {bw / 1e9:6.0f} | {100 * bw / rate:4.0f}% | {note}",
          flush=True)


def lab(n, T, rate):
    from pyca.apps import _lddmm_solver
    from pyca.apps import data

    dev = ca.MEM_DEVICE
    g = ca.GridInfo((n, n, n), (64.0 / n,) * 3)
    rng = np.random.default_rng(0)
    vox = n**3
    F = lambda: ca.Field3D(g, dev)  # noqa: E731
    Im = lambda: ca.Image3D(g, dev)  # noqa: E731
    fixed, moving = data.builtin_pair(size=(n, n, n), spacing=(64.0 / n,) * 3, mem=dev)
    v = ca.Field3D.from_array(np.asfortranarray(rng.uniform(-1, 1, (n, n, n, 3)).astype(np.float32)), g).clone(dev)
    m = v.clone()
    h, hn, tmp, b = F(), F(), F(), F()
    ca.SetToIdentity(h)
    ca.ComposeHV(hn, h, v, 0.1)
    ca.Copy(h, hn)
    J, J1, jac, diff = Im(), Im(), Im(), Im()
    K = ca.FluidKernelFFT()
    K.setAlpha(1.0)
    K.setGamma(0.04)
    K.setLPow(2)
    K.setGrid(g)
    ssd = _lddmm_solver._ext_ssd_gradient()
    dt = 1.0 / T

    print(f"\n### {n}^3 (copy rate {rate / 1e9:.0f} GB/s)\n")
    print(f"| {'stage':<52} | {'ms':>8} | {'MiB':>7} | {'GB/s':>6} | copy% | note")
    print("|---|---|---|---|---|---|")

    def fwd_chain():
        ca.ComposeHVInv(hn, h, v, dt)
        ca.ApplyH(J, moving, hn)

    def fwd_fused():
        ca.LDDMMTransportStep(hn, J, h, v, moving, -dt)

    row("forward step: ComposeHVInv + ApplyH", per_call(fwd_chain), (36 + 20) * vox, rate, "56 B/voxel")
    row("forward step: LDDMMTransportStep", per_call(fwd_fused), 44 * vox, rate, "44 B/voxel")

    def bwd_chain():
        ca.ComposeHV(hn, h, v, dt)
        ca.ApplyH(J1, fixed, hn)
        _lddmm_solver._jac_det(jac, hn)
        ca.Gradient(tmp, J)
        if ssd is not None:
            ssd(b, J, J1, tmp)
            ca.Mul_I(b, jac)
        else:
            ca.Sub(diff, J, J1)
            ca.Mul_I(diff, jac)
            ca.Mul(b, tmp, diff)
        ca.MulC_Add_MulC(b, m, 0.9, b, 0.01)

    def bwd_fused():
        ca.ComposeHV(hn, h, v, dt)
        ca.LDDMMGradStep(b, m, hn, J, fixed, 0.9, 0.01)

    row("backward step: ComposeHV + 7 ops (today's chain)", per_call(bwd_chain),
        (36 + 20 + 16 + 8 + 16 + 32 + 28 + 36) * vox, rate, "192 B/voxel")
    row("backward step: ComposeHV + LDDMMGradStep", per_call(bwd_fused), (36 + 44) * vox, rate, "80 B/voxel")
    row("  ComposeHV alone", per_call(lambda: ca.ComposeHV(hn, h, v, dt)), 36 * vox, rate, "36 B/voxel")
    row("  LDDMMGradStep alone", per_call(lambda: ca.LDDMMGradStep(b, m, hn, J, fixed, 0.9, 0.01)), 44 * vox,
        rate, "44 B/voxel")
    cplx = 3 * (n // 2 + 1) * n * n * 8
    row("kernel K: applyInverseOperator (R2C, symbol, C2R)", per_call(lambda: K.applyInverseOperator(tmp, b)),
        12 * vox + 4 * cplx + 12 * vox, rate, "one pass each")
    row("Dot (host value)", per_call(lambda: ca.Dot(m, v)), 24 * vox, rate, "waits for the result")
    row("Sub + Sum2 (host value)", per_call(lambda: (ca.Sub(diff, J, J1), ca.Sum2(diff))), 16 * vox, rate,
        "waits for the result")

    # One solver iteration, split into its phases (fused and unfused).
    for fused in (True, False):
        _lddmm_solver.Level.fused = fused
        p = dict(alpha=1.0, beta=0.0, gamma=0.04, lpow=2, sigma=0.05)
        lev = _lddmm_solver.Level(g, dev, T, moving, fixed, p)
        lev.forward()
        lev.gradients()
        lev.update(1e-3)
        tag = "fused" if fused else "unfused"
        t_fwd = per_call(lambda: lev.forward(), calls=3, repeat=5)

        def sweep():  # as an iteration: the regularisation energy right after the update
            lev.gradients()
            lev.update(1e-4)
            lev.reg_energy()

        t_sw = per_call(sweep, calls=3, repeat=5)
        print(f"| iteration ({tag}): forward {1e3 * t_fwd:.3f} ms, gradients+update+reg energy "
              f"{1e3 * t_sw:.3f} ms; sum {1e3 * (t_fwd + t_sw):.3f} ms | T={T}", flush=True)
    _lddmm_solver.Level.fused = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="128,256")
    ap.add_argument("--time-steps", type=int, default=10)
    a = ap.parse_args()
    g = ca.GridInfo((256, 256, 256))
    x, y = ca.Field3D(g, ca.MEM_DEVICE), ca.Field3D(g, ca.MEM_DEVICE)
    ca.SetMem(x, 1.0)
    rate = 6 * 256**3 * 4 / per_call(lambda: ca.Copy(y, x), calls=20, repeat=15)
    print(f"{ca.device_info()}: copy rate (256^3 field, read + write) {rate / 1e9:.0f} GB/s")
    for n in (int(s) for s in a.sizes.split(",")):
        lab(n, a.time_steps, rate)


if __name__ == "__main__":
    main()
