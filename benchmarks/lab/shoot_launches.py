"""Where a band-limited `pyca shoot` iteration's time goes on the GPU: the device's kernel time (CUPTI, through
torch.profiler's trace: every kernel of the process, pyca's included) against the wall time of the same
iterations, eager and replayed as CUDA graphs (pyca.cuda_graph). The kernels' sum is what no launch path
can go below; wall - busy is the host's share.

    python benchmarks/lab/shoot_launches.py [--size 128] [--band 16] [--time-steps 10] [--map coarse|linear|cubic|linear2|cubic2]
                                            [--trace-dir DIR]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def kernel_stats(path, its):
    """(kernel ms, busy ms, kernels) per iteration from a chrome trace: the sum of the kernels' durations,
    the union of their intervals, their count."""
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    ks = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    busy, end = 0.0, -1e30
    for a, b in ks:
        if b > end:
            busy += b - max(a, end)
            end = b
    by = {}
    for e in ev:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            name = e.get("name", "?")[:60]
            c, t = by.get(name, (0, 0.0))
            by[name] = (c + 1, t + e["dur"])
    top = sorted(by.items(), key=lambda kv: -kv[1][1])[:14]
    rows = "\n".join(f"      {t / its / 1e3:7.3f} ms {c / its:5.1f} x  {name}" for name, (c, t) in top)
    return sum(b - a for a, b in ks) / its / 1e3, busy / its / 1e3, len(ks) / its, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--band", type=int, default=16)
    ap.add_argument("--time-steps", type=int, default=10)
    ap.add_argument("--map", default="coarse", choices=["coarse", "linear", "cubic", "linear2", "cubic2"])
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--trace-dir", default=os.environ.get("OUT", "/tmp"))
    a = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    import pyca as ca
    from bench_shoot import CLIENT_KERNEL, pair
    from pyca import cuda_graph
    from pyca.apps import shoot
    from pyca.registration import band as _band

    mem = ca.MEM_DEVICE
    I0, I1 = (ca.Image3D.from_array(np.asfortranarray(x)).clone(mem) for x in pair(a.size))
    torch.zeros(1, device="cuda")
    _band.BandFit.fine_map = None if a.map == "coarse" else a.map.rstrip("2")
    _band.BandFit.trace_stride = 2 if a.map.endswith("2") else 1
    p = dict(shoot.DEFAULTS, time_steps=a.time_steps, band=a.band, sigma=0.5, folding_steps="accept", **CLIENT_KERNEL)
    for graphs in (False, True):
        _band.BandFit.graphs = graphs
        stream = cuda_graph.Stream() if graphs else contextlib.nullcontext()
        with stream:
            fit = shoot.level_fit(I0.grid(), I0, I1, p, mem)[1]

            def it():
                fit.forward()
                fit.gradients()
                fit.update(2e-5)

            for _ in range(3):
                it()
            ca.synchronize()
            t0 = time.perf_counter()
            for _ in range(a.iterations):
                it()
            ca.synchronize()
            wall = (time.perf_counter() - t0) / a.iterations * 1e3
            n = 5
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(n):
                    it()
                ca.synchronize()
            path = os.path.join(a.trace_dir, f"shoot_trace_{'graph' if graphs else 'eager'}.json")
            prof.export_chrome_trace(path)
            k, busy, cnt, rows = kernel_stats(path, n)
            nodes = fit.graph_nodes if graphs else "-"
            print(f"band {a.band} T {a.time_steps} map {a.map} {'graphs' if graphs else 'eager'} (nodes {nodes}): "
                  f"wall {wall:.3f} ms/iteration; device: kernels+copies {k:.3f} ms summed, busy {busy:.3f} ms, "
                  f"{cnt:.0f} per iteration; host share {max(0.0, wall - busy):.3f} ms; energy "
                  f"{fit.match() + fit.reg_energy():.6g}", flush=True)
            if not graphs:
                print(rows, flush=True)
            os.remove(path)


if __name__ == "__main__":
    main()
