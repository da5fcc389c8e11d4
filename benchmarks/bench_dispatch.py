"""Benchmark of the dispatcher (pyca.dispatch) and of pyca's dispatched operations (pyca.ext).

    python benchmarks/bench_dispatch.py [--gpu]

CPU (128^3): pyca.ext.ssd_gradient / field_axpby / squared_diff (Cython loops) vs the same NumPy
expressions; the cost of a dispatched call over calling the CPU function directly (8^3 volume).
GPU (256^3, with --gpu and a GPU): the same operations vs PyTorch and CuPy; the overhead of a
dispatched call over a direct kernel launch, on an 8^3 volume (launch-bound): per call, the
dispatched operation, pyca.cuda.Function (same kernel, no CPU fallback), a loop of cudaLaunchKernel
with pre-packed arguments (the floor) and CuPy's RawKernel launch of an equivalent kernel. The
target is at most 10 us per call of overhead over the direct launch.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Table, gpu_available, main_for, optional_import, pyca_sync, timeit_median  # noqa: E402

import pyca as ca  # noqa: E402

CPU_N, GPU_N, TINY_N = 128, 256, 8
CALLS = 2000


def _f32(rng, shape):
    return np.asfortranarray(rng.uniform(-1, 1, shape).astype(np.float32))


def per_call(fn, n=CALLS, sync=None):
    """Seconds per call of fn() over n back-to-back calls (then one sync), best of 5."""
    best = float("inf")
    for _ in range(5):
        if sync:
            sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if sync:
            sync()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def run_cpu(table: Table):
    rng = np.random.default_rng(0)
    n = CPU_N
    g = ca.GridInfo((n, n, n))
    size = f"{n}^3"
    d, t, gr = _f32(rng, (n, n, n)), _f32(rng, (n, n, n)), _f32(rng, (n, n, n, 3))
    x, y = _f32(rng, (n, n, n, 3)), _f32(rng, (n, n, n, 3))
    D, T = ca.Image3D.from_array(d.copy(order="F"), g), ca.Image3D.from_array(t.copy(order="F"), g)
    G, X, Y = (ca.Field3D.from_array(a.copy(order="F"), g) for a in (gr, x, y))
    OF, OI = ca.Field3D(g, ca.MEM_HOST), ca.Image3D(g, ca.MEM_HOST)
    of, oi = np.empty_like(gr), np.empty_like(d)

    t_p = timeit_median(lambda: ca.ext.ssd_gradient(OF, D, T, G), repeat=9)
    t_n = timeit_median(lambda: np.multiply((d - t)[..., None], gr, out=of), repeat=9)
    table.add("ext.ssd_gradient", size, t_p, "numpy (d - t)[..., None] * g", t_n)
    t_p = timeit_median(lambda: ca.ext.field_axpby(OF, 0.5, X, -2.0, Y), repeat=9)
    t_n = timeit_median(lambda: np.add(np.float32(0.5) * x, np.float32(-2.0) * y, out=of), repeat=9)
    table.add("ext.field_axpby", size, t_p, "numpy a * x + b * y", t_n)
    t_p = timeit_median(lambda: ca.ext.squared_diff(OI, D, T), repeat=9)
    t_n = timeit_median(lambda: np.square(d - t, out=oi), repeat=9)
    table.add("ext.squared_diff", size, t_p, "numpy (a - b) ** 2", t_n)

    # Dispatch overhead on the host: the dispatched call vs the CPU function called directly.
    gt = ca.GridInfo((TINY_N,) * 3)
    a, b, o = (ca.Image3D(gt, ca.MEM_HOST) for _ in range(3))
    op = ca.ext.squared_diff
    t_d = per_call(lambda: op(o, a, b))
    t_c = per_call(lambda: op.cpu(o, a, b))
    table.add("dispatched call, host", f"{TINY_N}^3", t_d, "CPU function called directly", t_c,
              f"overhead {1e6 * (t_d - t_c):.2f} us/call")


def run_gpu(table: Table):
    rng = np.random.default_rng(0)
    n = GPU_N
    g = ca.GridInfo((n, n, n))
    size = f"{n}^3"
    dev = ca.MEM_DEVICE
    d, t, gr = _f32(rng, (n, n, n)), _f32(rng, (n, n, n)), _f32(rng, (n, n, n, 3))
    D, T = ca.Image3D.from_array(d, g).clone(dev), ca.Image3D.from_array(t, g).clone(dev)
    G = ca.Field3D.from_array(gr, g).clone(dev)
    X, Y = G.clone(dev), G.clone(dev)
    OF, OI = ca.Field3D(g, dev), ca.Image3D(g, dev)
    ops = [
        ("ext.ssd_gradient", lambda: ca.ext.ssd_gradient(OF, D, T, G)),
        ("ext.field_axpby", lambda: ca.ext.field_axpby(OF, 0.5, X, -2.0, Y)),
        ("ext.squared_diff", lambda: ca.ext.squared_diff(OI, D, T)),
    ]
    times = {name: timeit_median(fn, sync=pyca_sync, repeat=21) for name, fn in ops}

    torch = optional_import("torch")
    if torch is not None and torch.cuda.is_available():
        td, tt = torch.from_numpy(d).cuda(), torch.from_numpy(t).cuda()
        tg = torch.from_numpy(gr).cuda()
        tx, ty = tg.clone(), tg.clone()
        tof, toi = torch.empty_like(tg), torch.empty_like(td)
        sync = torch.cuda.synchronize
        peers = {
            "ext.ssd_gradient": lambda: torch.mul((td - tt).unsqueeze(-1), tg, out=tof),
            "ext.field_axpby": lambda: torch.add(tx, ty, alpha=-4.0, out=tof).mul_(0.5),
            "ext.squared_diff": lambda: torch.square(torch.sub(td, tt, out=toi), out=toi),
        }
        for name, _ in ops:
            table.add(name + " (GPU)", size, times[name], "torch", timeit_median(peers[name], sync=sync, repeat=21))
    else:
        for name, _ in ops:
            table.skip(name + " (GPU)", size, "torch", "PyTorch with CUDA not available")

    cp = optional_import("cupy")
    if cp is not None:
        cd, ct, cg = cp.asarray(d), cp.asarray(t), cp.asarray(gr)
        cx, cy = cg.copy(), cg.copy()
        cof, coi = cp.empty_like(cg), cp.empty_like(cd)
        sync = cp.cuda.Device().synchronize
        peers = {
            "ext.ssd_gradient": lambda: cp.multiply((cd - ct)[..., None], cg, out=cof),
            "ext.field_axpby": lambda: cp.add(cp.float32(0.5) * cx, cp.float32(-2.0) * cy, out=cof),
            "ext.squared_diff": lambda: cp.square(cp.subtract(cd, ct, out=coi), out=coi),
        }
        for name, _ in ops:
            table.add(name + " (GPU)", size, times[name], "cupy", timeit_median(peers[name], sync=sync, repeat=21))

    # Launch overhead on a launch-bound volume.
    gt = ca.GridInfo((TINY_N,) * 3)
    a, b, o = (ca.Image3D(gt, dev) for _ in range(3))
    op = ca.ext.squared_diff
    op(o, a, b)
    pyca_sync()
    fn = op.gpu
    t_dispatch = per_call(lambda: op(o, a, b), sync=pyca_sync)
    t_function = per_call(lambda: fn(o, a, b), sync=pyca_sync)
    best = float("inf")
    for _ in range(5):
        pyca_sync()
        t0 = time.perf_counter()
        op.launch_repeated(o, a, b, n=CALLS)
        pyca_sync()
        best = min(best, (time.perf_counter() - t0) / CALLS)
    t_raw = best
    tiny = f"{TINY_N}^3"
    table.add("dispatched call, device", tiny, t_dispatch, "cudaLaunchKernel loop (packed once)", t_raw,
              f"overhead {1e6 * (t_dispatch - t_raw):.2f} us/call (target <= 10)")
    table.add("pyca.cuda.Function call", tiny, t_function, "cudaLaunchKernel loop (packed once)", t_raw,
              f"overhead {1e6 * (t_function - t_raw):.2f} us/call")
    if cp is not None:
        k = cp.RawKernel(r'''
        extern "C" __global__ void sqd(float* o, const float* a, const float* b, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) { float d = a[i] - b[i]; o[i] = d * d; }
        }''', "sqd")
        ca_, cb_, co_ = (cp.zeros(TINY_N ** 3, cp.float32) for _ in range(3))
        nn = np.int32(TINY_N ** 3)
        k((2,), (256,), (co_, ca_, cb_, nn))
        t_cupy = per_call(lambda: k((2,), (256,), (co_, ca_, cb_, nn)), sync=cp.cuda.Device().synchronize)
        table.add("dispatched call, device", tiny, t_dispatch, "cupy.RawKernel call", t_cupy,
                  f"{1e6 * t_dispatch:.2f} vs {1e6 * t_cupy:.2f} us/call")


def run(table: Table, gpu: bool = False):
    run_cpu(table)
    if gpu:
        if gpu_available():
            run_gpu(table)
        else:
            table.skip("GPU comparisons", f"{GPU_N}^3", "torch/cupy", "no CUDA GPU")


if __name__ == "__main__":
    main_for(run, "pyca.dispatch and pyca.ext")
