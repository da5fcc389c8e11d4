"""The CPU cost of pyca shoot's one-sided CoAd (docs/shoot.md, "The border"): the band's coad kernel
against ca.CoAd (PyCA's border rule) on one 64^3 field, then the full model's iteration at 64^3 with
either rule, alternating, in one process.

    python benchmarks/lab/shoot_coad_cpu.py [--size 64] [--calls 40] [--iterations 4]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pyca as ca  # noqa: E402
from bench_shoot import pair, shoot_run  # noqa: E402
from pyca.registration import _band_kernels as bk  # noqa: E402
from pyca.registration.geodesic import Geodesic  # noqa: E402


def per_call(f, calls):
    f()
    t0 = time.perf_counter()
    for _ in range(calls):
        f()
    return (time.perf_counter() - t0) / calls * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--iterations", type=int, default=4)
    a = ap.parse_args()
    n = a.size
    g = ca.GridInfo(ca.Vec3Di(n, n, n))
    rng = np.random.default_rng(0)
    idx = np.stack(np.indices((n, n, n)), -1).astype(np.float32)
    h = ca.Field3D.from_array(np.asfortranarray(idx + 0.5 * rng.standard_normal(idx.shape).astype(np.float32)), grid=g)
    m = ca.Field3D.from_array(np.asfortranarray(rng.standard_normal(idx.shape).astype(np.float32)), grid=g)
    out = ca.Field3D(g, ca.MEM_HOST)
    sp = tuple(float(x) for x in g.spacing())
    print(f"threads: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'default')}, {os.cpu_count()} cores")
    for _ in range(2):
        c = per_call(lambda: ca.CoAd(out, h, m), a.calls)
        b = per_call(lambda: bk.coad(out, h, m, out, m, 1.0, *sp, False, False), a.calls)
        print(f"{n}^3 CPU: ca.CoAd {c:.1f} ms, _band_kernels.coad {b:.1f} ms, ratio {b / c:.2f}")
    I0, I1 = [ca.Image3D.from_array(np.asfortranarray(x)) for x in pair(n)]
    for rule in ("pyca", "one-sided", "pyca", "one-sided"):
        Geodesic.coad_border = rule
        dt, e, _ = shoot_run(ca, I0, I1, ca.MEM_HOST, a.iterations, 3e-6, 10, 0.5)
        print(f"full model, {n}^3, T 10, border {rule}: {dt * 1e3:.0f} ms/iteration, energy {e[-1]:.6g}", flush=True)


if __name__ == "__main__":
    main()
