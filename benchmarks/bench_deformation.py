"""Benchmark of the `deformation` family: pyca vs NumPy/SciPy on the CPU (128^3) and vs PyTorch /
CuPy on the GPU (256^3), side by side in one process (medians; pyca/peer < 1 means pyca is faster).

    python benchmarks/bench_deformation.py [--gpu]

Peers compute the same numbers:
- ApplyH (trilinear, BACKGROUND_STRATEGY_CLAMP) is scipy/cupyx `map_coordinates(order=1,
  mode='nearest')` with the H-field as coordinates, and torch `grid_sample(mode='bilinear',
  padding_mode='border', align_corners=True)` on the GPU;
- ComposeHH is map_coordinates of each component (PARTIAL_ID has no peer: CLAMP is timed);
- Splat is the adjoint of trilinear interpolation with zero padding: its GPU peer is the input
  gradient of torch grid_sample (`aten.grid_sampler_3d_backward`, padding_mode='zeros'); on the CPU
  a NumPy `np.add.at` splat;
- Resample (2x down, voxel centres aligned) is `scipy.ndimage.zoom(order=1, grid_mode=True,
  mode='nearest')` on the CPU and torch `interpolate(mode='trilinear', align_corners=False)` on the GPU.
The H-fields are the identity plus a smooth displacement of up to 3 voxels (a product of sines, as a
registration produces); the GPU Splat is also timed with i.i.d. uniform noise of +-3 voxels (a
worst case for atomics).
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Table, main_for, optional_import, pyca_sync, run_gpu_part, timeit_median  # noqa: E402

import pyca as ca  # noqa: E402

CPU_N, GPU_N = 128, 256


def identity(n):
    return np.stack(np.meshgrid(*[np.arange(n, dtype=np.float32)] * 3, indexing="ij"), axis=-1)


def noisy_identity(n, rng, amp=3.0):
    idx = identity(n)
    return np.asfortranarray(idx + rng.uniform(-amp, amp, idx.shape).astype(np.float32))


def smooth_identity(n, rng, amp=3.0):
    """identity + a smooth displacement: per component a product of low-frequency sines."""
    idx = identity(n)
    d = np.empty_like(idx)
    for k in range(3):
        f = rng.uniform(0.8, 2.0, 3)
        ph = rng.uniform(0, 2 * np.pi, 3)
        d[..., k] = amp * np.prod([np.sin(2 * np.pi * f[a] * idx[..., a] / n + ph[a]) for a in range(3)], axis=0)
    return np.asfortranarray(idx + d)


def np_splat(out, hx, hy, hz, vals):
    """Trilinear splat with zero padding (the reference semantics of ca.Splat), with np.add.at."""
    n = out.shape
    out[...] = 0
    x0, y0, z0 = np.floor(hx).astype(np.int64), np.floor(hy).astype(np.int64), np.floor(hz).astype(np.int64)
    fx, fy, fz = hx - x0, hy - y0, hz - z0
    for dx in (0, 1):
        for dy in (0, 1):
            for dz in (0, 1):
                i, j, k = x0 + dx, y0 + dy, z0 + dz
                w = (fx if dx else 1 - fx) * (fy if dy else 1 - fy) * (fz if dz else 1 - fz)
                ok = (i >= 0) & (i < n[0]) & (j >= 0) & (j < n[1]) & (k >= 0) & (k < n[2])
                np.add.at(out, (i[ok], j[ok], k[ok]), (w * vals)[ok])


def run(table: Table, gpu: bool = False):
    n = CPU_N
    size = f"{n}^3"
    rng = np.random.default_rng(0)
    grid = ca.GridInfo((n, n, n))
    a = np.asfortranarray(rng.random((n, n, n), dtype=np.float32))
    h_np = smooth_identity(n, rng)
    im = ca.Image3D.from_array(a, grid)
    h = ca.Field3D.from_array(h_np, grid)
    out = ca.Image3D(grid, ca.MEM_HOST)
    fo = ca.Field3D(grid, ca.MEM_HOST)
    coords = np.stack([h_np[..., k] for k in range(3)])

    t_p = timeit_median(lambda: ca.ApplyH(out, im, h, ca.BACKGROUND_STRATEGY_CLAMP), repeat=9)
    ndi = optional_import("scipy")
    if ndi is not None:
        import scipy.ndimage as sndi

        t_s = timeit_median(lambda: sndi.map_coordinates(a, coords, order=1, mode="nearest"), repeat=3)
        table.add("ApplyH (linear, CLAMP)", size, t_p, "scipy map_coordinates(order=1)", t_s)
        t_p = timeit_median(lambda: ca.ComposeHH(fo, h, h, ca.BACKGROUND_STRATEGY_CLAMP), repeat=7)
        t_s = timeit_median(lambda: [sndi.map_coordinates(h_np[..., k], coords, order=1, mode="nearest")
                                     for k in range(3)], repeat=3)
        table.add("ComposeHH", size, t_p, "3x scipy map_coordinates(order=1)", t_s)
        small = ca.Image3D(ca.GridInfo((n // 2, n // 2, n // 2)), ca.MEM_HOST)
        t_p = timeit_median(lambda: ca.Resample(small, im), repeat=9)
        t_s = timeit_median(lambda: sndi.zoom(a, 0.5, order=1, mode="nearest", grid_mode=True), repeat=3)
        table.add("Resample (2x down)", size, t_p, "scipy zoom(order=1, grid_mode)", t_s)
    else:
        table.add("ApplyH (linear, CLAMP)", size, t_p, "scipy (not installed)", None)

    t_p = timeit_median(lambda: ca.Splat(out, h, im), repeat=7)
    ref = np.zeros_like(a)
    t_n = timeit_median(lambda: np_splat(ref, h_np[..., 0], h_np[..., 1], h_np[..., 2], a), repeat=1, warmup=0)
    table.add("Splat", size, t_p, "NumPy np.add.at splat", t_n)

    run_gpu_part(table, gpu, f"{GPU_N}^3", run_gpu)


def run_gpu(table: Table):
    n = GPU_N
    size = f"{n}^3"
    rng = np.random.default_rng(1)
    grid = ca.GridInfo((n, n, n))
    a = np.asfortranarray(rng.random((n, n, n), dtype=np.float32))
    h_np = smooth_identity(n, rng)
    im = ca.Image3D.from_array(a, grid).to(ca.MEM_DEVICE)
    h = ca.Field3D.from_array(h_np, grid).to(ca.MEM_DEVICE)
    out = ca.Image3D(grid, ca.MEM_DEVICE)
    fo = ca.Field3D(grid, ca.MEM_DEVICE)
    small = ca.Image3D(ca.GridInfo((n // 2, n // 2, n // 2)), ca.MEM_DEVICE)
    t_apply = timeit_median(lambda: ca.ApplyH(out, im, h, ca.BACKGROUND_STRATEGY_CLAMP), sync=pyca_sync, repeat=21)
    t_compose = timeit_median(lambda: ca.ComposeHH(fo, h, h, ca.BACKGROUND_STRATEGY_CLAMP), sync=pyca_sync,
                              repeat=21)
    t_splat = timeit_median(lambda: ca.Splat(out, h, im), sync=pyca_sync, repeat=21)
    t_resample = timeit_median(lambda: ca.Resample(small, im), sync=pyca_sync, repeat=21)
    h_noise_np = noisy_identity(n, rng)
    h_noise = ca.Field3D.from_array(h_noise_np, grid).to(ca.MEM_DEVICE)
    t_splat_noise = timeit_median(lambda: ca.Splat(out, h_noise, im), sync=pyca_sync, repeat=21)

    cp = optional_import("cupy")
    if cp is not None:
        import cupyx.scipy.ndimage as cndi

        ac = cp.asarray(a)
        cc = cp.asarray(np.stack([h_np[..., k] for k in range(3)]))
        hc = [cp.asarray(h_np[..., k]) for k in range(3)]
        sync = cp.cuda.Device().synchronize
        t_c = timeit_median(lambda: cndi.map_coordinates(ac, cc, order=1, mode="nearest"), sync=sync, repeat=21)
        table.add("ApplyH (GPU, linear, CLAMP)", size, t_apply, "cupyx map_coordinates(order=1)", t_c)
        t_c = timeit_median(lambda: [cndi.map_coordinates(x, cc, order=1, mode="nearest") for x in hc], sync=sync,
                            repeat=21)
        table.add("ComposeHH (GPU)", size, t_compose, "3x cupyx map_coordinates(order=1)", t_c)
    else:
        table.add("ApplyH (GPU, linear, CLAMP)", size, t_apply, "cupyx (not installed)", None)

    torch = optional_import("torch")
    if torch is not None and torch.cuda.is_available():
        F = torch.nn.functional
        sync = torch.cuda.synchronize
        # pyca's x-fastest volume is torch's (z, y, x) C-order volume
        at = torch.from_numpy(np.ascontiguousarray(a.T)).cuda()[None, None]
        # grid_sample's grid: (1, D, H, W, 3) with (x, y, z) in [-1, 1] (align_corners: -1 = voxel 0)
        gt = torch.from_numpy(np.ascontiguousarray(np.transpose(h_np, (2, 1, 0, 3)))).cuda()
        gt = (gt / (n - 1) * 2 - 1)[None]
        t_t = timeit_median(lambda: F.grid_sample(at, gt, mode="bilinear", padding_mode="border", align_corners=True),
                            sync=sync, repeat=21)
        table.add("ApplyH (GPU, linear, CLAMP)", size, t_apply, "torch grid_sample", t_t)
        go = torch.rand_like(at)
        bwd = torch.ops.aten.grid_sampler_3d_backward
        t_t = timeit_median(lambda: bwd(go, at, gt, 0, 0, True, [True, False]), sync=sync, repeat=21)
        table.add("Splat (GPU)", size, t_splat, "torch grid_sample backward (input grad)", t_t)
        gn = torch.from_numpy(np.ascontiguousarray(np.transpose(h_noise_np, (2, 1, 0, 3)))).cuda()
        gn = (gn / (n - 1) * 2 - 1)[None]
        t_t = timeit_median(lambda: bwd(go, at, gn, 0, 0, True, [True, False]), sync=sync, repeat=21)
        table.add("Splat (GPU)", size, t_splat_noise, "torch grid_sample backward (input grad)", t_t,
                  "i.i.d. noise +-3 voxels")
        t_t = timeit_median(lambda: F.interpolate(at, scale_factor=0.5, mode="trilinear", align_corners=False),
                            sync=sync, repeat=21)
        table.add("Resample (GPU, 2x down)", size, t_resample, "torch interpolate(trilinear)", t_t)
    else:
        table.add("Splat (GPU)", size, t_splat, "torch (not installed)", None)
        table.add("Resample (GPU, 2x down)", size, t_resample, "torch (not installed)", None)


if __name__ == "__main__":
    main_for(run, "deformation: pyca vs NumPy/SciPy (CPU) and PyTorch/CuPy (GPU)")
