"""Benchmark of the `filters` family: pyca vs SciPy/NumPy on the CPU (128^3) and vs CuPy/PyTorch on
the GPU (256^3), side by side in one process (medians; pyca/peer < 1 means pyca is faster).

    python benchmarks/bench_filters.py [--gpu]

Peers: GaussianBlur vs scipy.ndimage.gaussian_filter (same sigma in voxels, mode='nearest', the
same radius); Convolve vs scipy.ndimage.convolve; ApplyFluidOperator (inverse, beta = 0) vs
np.fft.rfftn * K * irfftn with K precomputed (float32 data); GPU: cupyx.scipy.ndimage.gaussian_filter
and torch.fft.rfftn * K * irfftn.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Table, main_for, optional_import, pyca_sync, run_gpu_part, timeit_median  # noqa: E402

import pyca as ca  # noqa: E402

CPU_N, GPU_N = 128, 256
SIGMA = 2.0  # voxels; radius int(4 * 2 + 0.5) = 8, scipy's default truncate
ALPHA, GAMMA = 0.01, 0.001


def fluid_symbol(n, dtype=np.float32):
    """1 / (alpha * sum_d (2 - 2 cos(2 pi k_d / n)) + gamma) on the rfftn grid of an (n, n, n) array."""
    t = 2 - 2 * np.cos(2 * np.pi * np.arange(n) / n)
    th = t[: n // 2 + 1]
    lam = ALPHA * (t[:, None, None] + t[None, :, None] + th[None, None, :]) + GAMMA
    return (1.0 / lam).astype(dtype)


def run(table: Table, gpu: bool = False):
    rng = np.random.default_rng(0)
    n = CPU_N
    grid = ca.GridInfo((n, n, n))
    a = rng.random((n, n, n), dtype=np.float32)
    im = ca.Image3D.from_array(np.asfortranarray(a), grid)
    out = ca.Image3D(grid, ca.MEM_HOST)
    size = f"{n}^3"

    try:
        import scipy.ndimage as ndi
    except ImportError:
        ndi = None
    if ndi is not None:
        r = int(4 * SIGMA + 0.5)
        t_p = timeit_median(lambda: ca.GaussianBlur(out, im, (SIGMA,) * 3, (r,) * 3), repeat=9)
        t_s = timeit_median(lambda: ndi.gaussian_filter(a, SIGMA, mode="nearest"), repeat=5)
        table.add(f"GaussianBlur sigma={SIGMA} r={r}", size, t_p, "scipy.ndimage.gaussian_filter", t_s)
        g = ca.GaussianFilter()
        g.updateParams(grid.size(), (SIGMA,) * 3, (r,) * 3)
        tmp = ca.Image3D(grid, ca.MEM_HOST)
        t_p = timeit_median(lambda: g.filter(out, im, tmp), repeat=9)
        table.add("GaussianFilter.filter", size, t_p, "scipy.ndimage.gaussian_filter", t_s)
        k = rng.random((3, 3, 3), dtype=np.float32)
        kim = ca.Image3D.from_array(k)
        t_p = timeit_median(lambda: ca.Convolve(out, im, kim), repeat=7)
        t_s = timeit_median(lambda: ndi.convolve(a, k, mode="nearest"), repeat=3)
        table.add("Convolve 3x3x3", size, t_p, "scipy.ndimage.convolve", t_s)
    else:
        table.skip("GaussianBlur", size, "scipy", "scipy not installed")

    # Fluid kernel: K v on a field, pyca (FFTW float, threads) vs NumPy (pocketfft, one thread).
    v = rng.random((n, n, n, 3), dtype=np.float32)
    vf = ca.Field3D.from_array(np.asfortranarray(v), grid)
    fo = ca.Field3D(grid, ca.MEM_HOST)
    ca.ApplyFluidOperator(fo, vf, ALPHA, 0.0, GAMMA, 1, True)  # plans (FFTW_MEASURE) made here
    t_p = timeit_median(lambda: ca.ApplyFluidOperator(fo, vf, ALPHA, 0.0, GAMMA, 1, True), repeat=7)
    K = fluid_symbol(n)
    vc = np.ascontiguousarray(np.moveaxis(v, 3, 0).transpose(0, 3, 2, 1))  # (3, z, y, x), C order

    def numpy_path():
        F = np.fft.rfftn(vc, axes=(1, 2, 3))
        F *= K
        return np.fft.irfftn(F, s=(n, n, n), axes=(1, 2, 3))

    t_n = timeit_median(numpy_path, repeat=3, warmup=1)
    table.add("ApplyFluidOperator inverse (beta=0)", size, t_p, "np.fft.rfftn*K*irfftn", t_n)
    t_b = timeit_median(lambda: ca.ApplyFluidOperator(fo, vf, ALPHA, 0.01, GAMMA, 1, True), repeat=7)
    table.add("ApplyFluidOperator inverse (beta=0.01)", size, t_b, "np.fft.rfftn*K*irfftn (beta=0)", t_n)
    kf = ca.FluidKernelFFT()
    kf.setAlpha(ALPHA)
    kf.setGamma(GAMMA)
    kf.setGrid(grid)
    t_p = timeit_median(lambda: kf.applyInverseOperator(fo, vf), repeat=7)
    table.add("FluidKernelFFT.applyInverseOperator", size, t_p, "np.fft.rfftn*K*irfftn", t_n)

    run_gpu_part(table, gpu, f"{GPU_N}^3", run_gpu)


def run_gpu(table: Table):
    n = GPU_N
    size = f"{n}^3"
    grid = ca.GridInfo((n, n, n))
    rng = np.random.default_rng(1)
    a = np.asfortranarray(rng.random((n, n, n), dtype=np.float32))
    im = ca.Image3D.from_array(a, grid).to(ca.MEM_DEVICE)
    out = ca.Image3D(grid, ca.MEM_DEVICE)
    r = int(4 * SIGMA + 0.5)
    t_p = timeit_median(lambda: ca.GaussianBlur(out, im, (SIGMA,) * 3, (r,) * 3), sync=pyca_sync, repeat=21)
    cp = optional_import("cupy")
    if cp is not None:
        import cupyx.scipy.ndimage as cndi

        ca_ = cp.asarray(a)
        sync = cp.cuda.Device().synchronize
        t_c = timeit_median(lambda: cndi.gaussian_filter(ca_, SIGMA, mode="nearest"), sync=sync, repeat=21)
        table.add(f"GaussianBlur sigma={SIGMA} r={r} (GPU)", size, t_p, "cupyx gaussian_filter", t_c)
        k = rng.random((3, 3, 3), dtype=np.float32)
        kd = ca.Image3D.from_array(k).to(ca.MEM_DEVICE)
        kc = cp.asarray(k)
        t_p = timeit_median(lambda: ca.Convolve(out, im, kd), sync=pyca_sync, repeat=21)
        t_c = timeit_median(lambda: cndi.convolve(ca_, kc, mode="nearest"), sync=sync, repeat=21)
        table.add("Convolve 3x3x3 (GPU)", size, t_p, "cupyx convolve", t_c)
    else:
        table.add(f"GaussianBlur sigma={SIGMA} r={r} (GPU)", size, t_p, "cupyx (not installed)", None)

    v = np.asfortranarray(rng.random((n, n, n, 3), dtype=np.float32))
    vf = ca.Field3D.from_array(v, grid).to(ca.MEM_DEVICE)
    fo = ca.Field3D(grid, ca.MEM_DEVICE)
    t_p = timeit_median(lambda: ca.ApplyFluidOperator(fo, vf, ALPHA, 0.0, GAMMA, 1, True), sync=pyca_sync, repeat=21)
    torch = optional_import("torch")
    if torch is not None and torch.cuda.is_available():
        vt = torch.from_numpy(np.ascontiguousarray(np.moveaxis(v, 3, 0).transpose(0, 3, 2, 1))).cuda()
        Kt = torch.from_numpy(fluid_symbol(n)).cuda()

        def torch_path():
            F = torch.fft.rfftn(vt, dim=(1, 2, 3))
            F *= Kt
            return torch.fft.irfftn(F, s=(n, n, n), dim=(1, 2, 3))

        t_t = timeit_median(torch_path, sync=torch.cuda.synchronize, repeat=21)
        table.add("ApplyFluidOperator inverse (GPU)", size, t_p, "torch.fft.rfftn*K*irfftn", t_t)
    else:
        table.add("ApplyFluidOperator inverse (GPU)", size, t_p, "torch (not installed)", None)


if __name__ == "__main__":
    main_for(run, "filters: pyca vs SciPy/NumPy (CPU) and CuPy/PyTorch (GPU)")
