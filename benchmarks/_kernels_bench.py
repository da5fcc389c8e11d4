"""The kernels of benchmarks/bench_kernels.py, written once with @ca.kernel, and the same arithmetic in
Numba (njit(parallel=True), cuda.jit) and Warp for the side-by-side comparison. Arrays are float32
with x fastest (pyca's layout): NumPy arrays in Fortran order indexed [x, y, z]; Warp arrays are the
same memory seen as C-order [z, y, x]."""
from __future__ import annotations

import math

import numpy as np

import pyca as ca

SIGMA = 2.0


@ca.func
def lerp(a: float, b: float, f: float) -> float:
    return a + f * (b - a)


@ca.kernel(check_sizes=False, inputs={"h": "identity_h"})
def apply_h(out: ca.Image3D, im: ca.Image3D, h: ca.Field3D):
    """out = im(h(x)), trilinear, positions clamped to the grid (BACKGROUND_STRATEGY_CLAMP)."""
    i, j, k = ca.index()
    nx, ny, nz = im.shape
    x = min(max(h[i, j, k, 0], 0.0), nx - 1.0)
    y = min(max(h[i, j, k, 1], 0.0), ny - 1.0)
    z = min(max(h[i, j, k, 2], 0.0), nz - 1.0)
    x0, y0, z0 = int(x), int(y), int(z)  # x, y, z >= 0: truncation is floor
    fx, fy, fz = x - x0, y - y0, z - z0
    c00 = lerp(im[x0, y0, z0], im[x0 + 1, y0, z0], fx)  # x0 + 1 beyond the grid reads the border (clamped)
    c01 = lerp(im[x0, y0 + 1, z0], im[x0 + 1, y0 + 1, z0], fx)
    c10 = lerp(im[x0, y0, z0 + 1], im[x0 + 1, y0, z0 + 1], fx)
    c11 = lerp(im[x0, y0 + 1, z0 + 1], im[x0 + 1, y0 + 1, z0 + 1], fx)
    out[i, j, k] = lerp(lerp(c00, c01, fy), lerp(c10, c11, fy), fz)


@ca.kernel(check_sizes=False, parity_skip="the weights image needs its own size (benchmark kernel)")
def gauss_pass(out: ca.Image3D, im: ca.Image3D, w: ca.Image3D, r: int, axis: int):
    """One pass of a symmetric separable filter along `axis`, as pyca's GaussianFilter computes it:
    out = w[0] im + sum_{d=1..r} w[d] (im[. - d] + im[. + d]) along axis, w the half kernel (the
    border value beyond the border). The taps read a ca.line (a tile in shared memory on the GPU)."""
    i, j, k = ca.index()
    t = ca.line(im, axis, r)
    s = w[0, 0, 0] * t[0]
    for d in range(1, r + 1):
        s += w[d, 0, 0] * (t[-d] + t[d])
    out[i, j, k] = s


@ca.kernel(check_sizes=False, register=False)
def gauss_pass_taps(out: ca.Image3D, im: ca.Image3D, w: ca.Image3D, r: int, axis: int):
    """gauss_pass with the taps read from the image (im[i - d, j, k], ...: the L1 cache, no tile)."""
    i, j, k = ca.index()
    s = w[0, 0, 0] * im[i, j, k]
    if axis == 0:
        for d in range(1, r + 1):
            s += w[d, 0, 0] * (im[i - d, j, k] + im[i + d, j, k])
    elif axis == 1:
        for d in range(1, r + 1):
            s += w[d, 0, 0] * (im[i, j - d, k] + im[i, j + d, k])
    else:
        for d in range(1, r + 1):
            s += w[d, 0, 0] * (im[i, j, k - d] + im[i, j, k + d])
    out[i, j, k] = s


def gauss_pass_fixed(radius: int):
    """gauss_pass with the radius a closure constant (the translator folds it in: a loop of known
    length, unrolled by the CUDA compiler)."""

    @ca.kernel(check_sizes=False, register=False)
    def gauss_pass_r(out: ca.Image3D, im: ca.Image3D, w: ca.Image3D, axis: int):
        i, j, k = ca.index()
        t = ca.line(im, axis, radius)
        s = w[0, 0, 0] * t[0]
        for d in range(1, radius + 1):
            s += w[d, 0, 0] * (t[-d] + t[d])
        out[i, j, k] = s

    return gauss_pass_r


def gauss3(out, im, tmp, w, r):
    """The 3-D Gaussian as three passes (x, y, z), as GaussianFilter.filter does."""
    gauss_pass(out, im, w, r, 0)
    gauss_pass(tmp, out, w, r, 1)
    gauss_pass(out, tmp, w, r, 2)


def gauss_weights(sigma):
    """(half kernel w[0..r], r): w[0] the centre weight, w[d] that of the samples at -d and +d, the
    full kernel summing to 1, radius 4 sigma (math::gaussianHalfKernel's weights)."""
    r = int(4 * sigma + 0.5)
    d = np.arange(-r, r + 1, dtype=np.float64)
    w = np.exp(-d * d / (2 * sigma * sigma))
    return (w / w.sum())[r:].astype(np.float32), r


_numba_cpu = None


def numba_cpu():
    """{"apply_h": f(out, a, h), "gauss_z": f(out, a, w, r)} compiled with numba.njit(parallel=True)."""
    global _numba_cpu
    if _numba_cpu is None:
        try:
            import numba
            from numba import prange
        except ImportError:
            _numba_cpu = False
            return None

        @numba.njit(parallel=True, fastmath=False, cache=False)
        def nb_apply_h(out, a, h):
            nx, ny, nz = a.shape
            for k in prange(out.shape[2]):
                for j in range(out.shape[1]):
                    for i in range(out.shape[0]):
                        x = min(max(h[i, j, k, 0], np.float32(0)), np.float32(nx - 1))
                        y = min(max(h[i, j, k, 1], np.float32(0)), np.float32(ny - 1))
                        z = min(max(h[i, j, k, 2], np.float32(0)), np.float32(nz - 1))
                        x0, y0, z0 = int(x), int(y), int(z)
                        x1, y1, z1 = min(x0 + 1, nx - 1), min(y0 + 1, ny - 1), min(z0 + 1, nz - 1)
                        fx, fy, fz = x - np.float32(x0), y - np.float32(y0), z - np.float32(z0)
                        c00 = a[x0, y0, z0] + fx * (a[x1, y0, z0] - a[x0, y0, z0])
                        c01 = a[x0, y1, z0] + fx * (a[x1, y1, z0] - a[x0, y1, z0])
                        c10 = a[x0, y0, z1] + fx * (a[x1, y0, z1] - a[x0, y0, z1])
                        c11 = a[x0, y1, z1] + fx * (a[x1, y1, z1] - a[x0, y1, z1])
                        c0 = c00 + fy * (c01 - c00)
                        c1 = c10 + fy * (c11 - c10)
                        out[i, j, k] = c0 + fz * (c1 - c0)

        @numba.njit(parallel=True, fastmath=False, cache=False)
        def nb_gauss_z(out, a, w, r):
            nx, ny, nz = a.shape
            for k in prange(nz):
                for j in range(ny):
                    for i in range(nx):
                        s = w[0] * a[i, j, k]
                        for d in range(1, r + 1):
                            s += w[d] * (a[i, j, max(k - d, 0)] + a[i, j, min(k + d, nz - 1)])
                        out[i, j, k] = s

        _numba_cpu = {"apply_h": nb_apply_h, "gauss_z": nb_gauss_z}
    return _numba_cpu or None


_numba_gpu = None


def numba_gpu():
    """Launchers of the same kernels with numba.cuda.jit (one thread a voxel, x fastest)."""
    global _numba_gpu
    if _numba_gpu is None:
        if not hasattr(np, "row_stack"):  # NumPy 2.5 removed this alias of vstack; numba-cuda builds before it
            np.row_stack = np.vstack      # still register it, and fail at the first cuda.jit compile without it
        try:
            from numba import cuda
            if not cuda.is_available():
                raise ImportError
        except ImportError:
            _numba_gpu = False
            return None

        @cuda.jit
        def k_apply_h(out, a, h):
            i, j, k = cuda.grid(3)
            nx, ny, nz = a.shape
            if i >= out.shape[0] or j >= out.shape[1] or k >= out.shape[2]:
                return
            x = min(max(h[i, j, k, 0], 0.0), nx - 1.0)
            y = min(max(h[i, j, k, 1], 0.0), ny - 1.0)
            z = min(max(h[i, j, k, 2], 0.0), nz - 1.0)
            x0, y0, z0 = int(x), int(y), int(z)
            x1, y1, z1 = min(x0 + 1, nx - 1), min(y0 + 1, ny - 1), min(z0 + 1, nz - 1)
            fx, fy, fz = x - x0, y - y0, z - z0
            c00 = a[x0, y0, z0] + fx * (a[x1, y0, z0] - a[x0, y0, z0])
            c01 = a[x0, y1, z0] + fx * (a[x1, y1, z0] - a[x0, y1, z0])
            c10 = a[x0, y0, z1] + fx * (a[x1, y0, z1] - a[x0, y0, z1])
            c11 = a[x0, y1, z1] + fx * (a[x1, y1, z1] - a[x0, y1, z1])
            c0 = c00 + fy * (c01 - c00)
            c1 = c10 + fy * (c11 - c10)
            out[i, j, k] = c0 + fz * (c1 - c0)

        @cuda.jit
        def k_gauss_z(out, a, w, r):
            i, j, k = cuda.grid(3)
            nx, ny, nz = a.shape
            if i >= nx or j >= ny or k >= nz:
                return
            s = w[0] * a[i, j, k]
            for d in range(1, r + 1):
                s += w[d] * (a[i, j, max(k - d, 0)] + a[i, j, min(k + d, nz - 1)])
            out[i, j, k] = s

        def launcher(kern):
            def make(out, *args):
                n = out.shape
                block = (32, 4, 2)
                grid = tuple(math.ceil(a / b) for a, b in zip(n, block))
                return lambda: kern[grid, block](out, *args)
            return make

        _numba_gpu = {"apply_h_launcher": launcher(k_apply_h), "gauss_z_launcher": launcher(k_gauss_z)}
    return _numba_gpu or None


_warp = None


def warp_kernels():
    """Runners of the same kernels in Warp: runner(data..., device) -> a no-argument function that
    launches once (and, on the CPU, returns when done)."""
    global _warp
    if _warp is None:
        try:
            import warp as wp
            wp.config.quiet = True
            wp.init()
        except Exception:  # noqa: BLE001
            _warp = False
            return None

        @wp.kernel
        def w_apply_h(out: wp.array3d(dtype=float), a: wp.array3d(dtype=float), h: wp.array4d(dtype=float)):
            k, j, i = wp.tid()
            nz, ny, nx = a.shape[0], a.shape[1], a.shape[2]
            x = wp.min(wp.max(h[0, k, j, i], 0.0), float(nx - 1))
            y = wp.min(wp.max(h[1, k, j, i], 0.0), float(ny - 1))
            z = wp.min(wp.max(h[2, k, j, i], 0.0), float(nz - 1))
            x0, y0, z0 = int(x), int(y), int(z)
            x1, y1, z1 = wp.min(x0 + 1, nx - 1), wp.min(y0 + 1, ny - 1), wp.min(z0 + 1, nz - 1)
            fx, fy, fz = x - float(x0), y - float(y0), z - float(z0)
            c00 = a[z0, y0, x0] + fx * (a[z0, y0, x1] - a[z0, y0, x0])
            c01 = a[z0, y1, x0] + fx * (a[z0, y1, x1] - a[z0, y1, x0])
            c10 = a[z1, y0, x0] + fx * (a[z1, y0, x1] - a[z1, y0, x0])
            c11 = a[z1, y1, x0] + fx * (a[z1, y1, x1] - a[z1, y1, x0])
            c0 = c00 + fy * (c01 - c00)
            c1 = c10 + fy * (c11 - c10)
            out[k, j, i] = c0 + fz * (c1 - c0)

        @wp.kernel
        def w_gauss_z(out: wp.array3d(dtype=float), a: wp.array3d(dtype=float), w: wp.array(dtype=float), r: int):
            k, j, i = wp.tid()
            nz = a.shape[0]
            s = w[0] * a[k, j, i]
            for d in range(1, r + 1):
                s += w[d] * (a[wp.max(k - d, 0), j, i] + a[wp.min(k + d, nz - 1), j, i])
            out[k, j, i] = s

        def c_view(x):  # Fortran [x, y, z(, c)] -> C [(c,) z, y, x], the same bytes
            return np.ascontiguousarray(x.T)

        def apply_runner(a, h, device):
            da = wp.array(c_view(a), dtype=float, device=device)
            dh = wp.array(c_view(h), dtype=float, device=device)
            do = wp.zeros_like(da)
            return lambda: (wp.launch(w_apply_h, dim=da.shape, inputs=[do, da, dh], device=device), wp.synchronize())

        def gauss_runner(a, w, r, device):
            da = wp.array(c_view(a), dtype=float, device=device)
            dw = wp.array(w, dtype=float, device=device)
            do = wp.zeros_like(da)
            return lambda: (wp.launch(w_gauss_z, dim=da.shape, inputs=[do, da, dw, r], device=device), wp.synchronize())

        _warp = {"apply_h_runner": apply_runner, "gauss_runner": gauss_runner}
    return _warp or None
