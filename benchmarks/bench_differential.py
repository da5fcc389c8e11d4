"""Benchmark of the `differential` family: pyca vs NumPy/SciPy on the CPU (128^3) and vs PyTorch /
CuPy on the GPU (256^3), side by side in one process (medians; pyca/peer < 1 means pyca is faster).

    python benchmarks/bench_differential.py [--gpu]

Peers compute the same numbers: np.gradient (central inside, one-sided first order at the border)
is Gradient(DIFF_CENTRAL, BC_APPROX); scipy.ndimage.laplace (mode='nearest', unit spacing) is
Laplacian(BC_CLAMP); JacDetH's peer is np.gradient of the three components and the 3x3
determinant written out.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Table, main_for, optional_import, pyca_sync, run_gpu_part, timeit_median  # noqa: E402

import pyca as ca  # noqa: E402

CPU_N, GPU_N = 128, 256


def det3(J):
    (a, b, c), (d, e, f), (g, h, i) = J
    return a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)


def run(table: Table, gpu: bool = False):
    n = CPU_N
    size = f"{n}^3"
    rng = np.random.default_rng(0)
    grid = ca.GridInfo((n, n, n))
    a = np.asfortranarray(rng.random((n, n, n), dtype=np.float32))
    im = ca.Image3D.from_array(a, grid)
    g = ca.Field3D(grid, ca.MEM_HOST)
    out = ca.Image3D(grid, ca.MEM_HOST)

    t_p = timeit_median(lambda: ca.Gradient(g, im, ca.DIFF_CENTRAL, ca.BC_APPROX), repeat=9)
    t_n = timeit_median(lambda: np.gradient(a), repeat=5)
    table.add("Gradient (central, BC_APPROX)", size, t_p, "np.gradient", t_n)

    t_p = timeit_median(lambda: ca.GradientMag(out, im, ca.DIFF_CENTRAL, ca.BC_APPROX), repeat=9)
    t_n = timeit_median(lambda: np.sqrt(sum(x * x for x in np.gradient(a))), repeat=5)
    table.add("GradientMag", size, t_p, "sqrt(sum(np.gradient^2))", t_n)

    h_np = np.asfortranarray(rng.random((n, n, n, 3), dtype=np.float32))
    h = ca.Field3D.from_array(h_np, grid)
    t_p = timeit_median(lambda: ca.Divergence(out, h, ca.DIFF_CENTRAL, ca.BC_APPROX), repeat=9)
    t_n = timeit_median(lambda: sum(np.gradient(h_np[..., k], axis=k) for k in range(3)), repeat=5)
    table.add("Divergence", size, t_p, "sum np.gradient(axis=k)", t_n)

    t_p = timeit_median(lambda: ca.JacDetH(out, h, ca.DIFF_CENTRAL, ca.BC_APPROX), repeat=7)
    t_n = timeit_median(lambda: det3([np.gradient(h_np[..., r]) for r in range(3)]), repeat=3)
    table.add("JacDetH", size, t_p, "np.gradient + det", t_n)

    ndi = optional_import("scipy")
    if ndi is not None:
        import scipy.ndimage as sndi

        t_p = timeit_median(lambda: ca.Laplacian(out, im, ca.BC_CLAMP), repeat=9)
        t_s = timeit_median(lambda: sndi.laplace(a, mode="nearest"), repeat=5)
        table.add("Laplacian (BC_CLAMP)", size, t_p, "scipy.ndimage.laplace", t_s)

    run_gpu_part(table, gpu, f"{GPU_N}^3", run_gpu)


def run_gpu(table: Table):
    n = GPU_N
    size = f"{n}^3"
    grid = ca.GridInfo((n, n, n))
    rng = np.random.default_rng(1)
    a = np.asfortranarray(rng.random((n, n, n), dtype=np.float32))
    im = ca.Image3D.from_array(a, grid).to(ca.MEM_DEVICE)
    g = ca.Field3D(grid, ca.MEM_DEVICE)
    out = ca.Image3D(grid, ca.MEM_DEVICE)
    h = ca.Field3D.from_array(np.asfortranarray(rng.random((n, n, n, 3), dtype=np.float32)), grid).to(ca.MEM_DEVICE)
    t_grad = timeit_median(lambda: ca.Gradient(g, im, ca.DIFF_CENTRAL, ca.BC_APPROX), sync=pyca_sync, repeat=21)
    t_jac = timeit_median(lambda: ca.JacDetH(out, h), sync=pyca_sync, repeat=21)
    t_lap = timeit_median(lambda: ca.Laplacian(out, im, ca.BC_CLAMP), sync=pyca_sync, repeat=21)

    torch = optional_import("torch")
    if torch is not None and torch.cuda.is_available():
        at = torch.from_numpy(np.ascontiguousarray(a)).cuda()
        ht = [torch.from_numpy(np.ascontiguousarray(rng.random((n, n, n), dtype=np.float32))).cuda() for _ in range(3)]
        sync = torch.cuda.synchronize
        t_t = timeit_median(lambda: torch.gradient(at), sync=sync, repeat=21)
        table.add("Gradient (GPU)", size, t_grad, "torch.gradient", t_t)
        t_t = timeit_median(lambda: det3([torch.gradient(x) for x in ht]), sync=sync, repeat=21)
        table.add("JacDetH (GPU)", size, t_jac, "torch.gradient + det", t_t)
    else:
        table.add("Gradient (GPU)", size, t_grad, "torch (not installed)", None)
        table.add("JacDetH (GPU)", size, t_jac, "torch (not installed)", None)
    cp = optional_import("cupy")
    if cp is not None:
        import cupyx.scipy.ndimage as cndi

        ac = cp.asarray(a)
        t_c = timeit_median(lambda: cndi.laplace(ac, mode="nearest"), sync=cp.cuda.Device().synchronize, repeat=21)
        table.add("Laplacian (GPU)", size, t_lap, "cupyx laplace", t_c)
    else:
        table.add("Laplacian (GPU)", size, t_lap, "cupyx (not installed)", None)


if __name__ == "__main__":
    main_for(run, "differential: pyca vs NumPy/SciPy (CPU) and PyTorch/CuPy (GPU)")
