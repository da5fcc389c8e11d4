"""Where the GPU time of an LDDMM iteration goes: every kernel and copy of one registration, recorded
by PyTorch's profiler (CUPTI records all of the process's GPU work, pyca's kernels and cuFFT's
included), summed per kernel, per iteration.

    python benchmarks/lab/lddmm_profile.py [N] [--iterations 30]

The built-in pair on an N^3 grid (default 128), one scale, T = 10, the SSD match (the fused path),
tol = 0 and no linear stage, as benchmarks/bench_lddmm.py times it. Needs a CUDA GPU and PyTorch.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pyca as ca  # noqa: E402
from bench_lddmm import RUN, synthetic_pair  # noqa: E402
from pyca.apps import lddmm  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=128)
    ap.add_argument("--iterations", type=int, default=30)
    a = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    fixed, moving = synthetic_pair(a.n, ca.MEM_DEVICE)
    kw = dict(scales=(1,), time_steps=10, device="gpu", tol=0.0, affine="none", **RUN)
    lddmm.register(fixed, moving, iterations=3, **kw)  # warm-up: FFT plans, kernel caches
    t0 = time.perf_counter()
    res = lddmm.register(fixed, moving, iterations=a.iterations, **kw)
    print(f"{a.n}^3, T = 10: {len(res.energies)} iterations, registration {res.timings['registration_s']:.3f} s "
          f"({time.perf_counter() - t0:.3f} s with the outputs' copies)")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        res = lddmm.register(fixed, moving, iterations=a.iterations, **kw)
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if us > 0:
            rows.append((us, e.count, e.key))
    rows.sort(reverse=True)
    total, it = sum(r[0] for r in rows), len(res.energies)
    print(f"GPU time {total / 1e3:.1f} ms, {total / 1e3 / it:.3f} ms per iteration (the final copies to the host "
          "included); per kernel: ms per iteration, share, calls per iteration, us per call")
    for us, count, key in rows[:20]:
        print(f"  {us / 1e3 / it:7.3f} {100 * us / total:5.1f}% {count / it:6.2f} {us / count:9.1f}  {key[:100]}")


if __name__ == "__main__":
    main()
