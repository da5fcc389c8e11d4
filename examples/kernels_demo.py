"""pyca.kernels in one file: operations written once in Python, run as a compiled CPU loop on host
arrays and as a CUDA kernel on device arrays (docs/kernels.md).

    python examples/kernels_demo.py            # CPU; the GPU half too when a GPU can be used

1. SAXPY (CudaPy's first example) as a per-voxel kernel;
2. a pairwise-distance loop (the Cython offload proposal's example): points in the rows of an image,
   distances in another, then the same computed row by row inside a device data context;
3. an integral image with ca.scan, a sum and a maximum with ca.reduce, an element-wise ca.map;
4. a 3-D Gaussian blur as three passes of one stencil kernel reading ca.line (on the GPU each block
   stages its tile of the image in shared memory).
Each result is checked against NumPy/SciPy.
"""
from __future__ import annotations

import math

import numpy as np

import pyca as ca


# 1. SAXPY --------------------------------------------------------------------------------------
@ca.kernel
def saxpy(y: ca.Image3D, a: float, x: ca.Image3D):
    """y = a * x + y, voxel by voxel."""
    i, j, k = ca.index()
    y[i, j, k] = a * x[i, j, k] + y[i, j, k]


# 2. Pairwise distances ---------------------------------------------------------------------------
# X holds M points of N coordinates: X[c, p, 0] is coordinate c of point p (an Image3D of size (N, M, 1)).
@ca.func
def sq(v: float) -> float:
    return v * v


@ca.kernel(check_sizes=False)
def pairwise(d: ca.Image3D, x: ca.Image3D):
    """d[p, q, 0] = |X_p - X_q| for every pair of points (d of size (M, M, 1))."""
    p, q, k = ca.index()
    n = x.shape[0]
    s = 0.0
    for c in range(n):
        s += sq(x[c, p, 0] - x[c, q, 0])
    d[p, q, k] = math.sqrt(s)


@ca.kernel(check_sizes=False)
def pairwise_row(drow: ca.Image3D, x: ca.Image3D, p: int):
    """drow[q, 0, 0] = |X_p - X_q|: one row of the distance matrix."""
    q, j, k = ca.index()
    s = 0.0
    for c in range(x.shape[0]):
        s += sq(x[c, p, 0] - x[c, q, 0])
    drow[q, j, k] = math.sqrt(s)


def pairwise_blocked(x: ca.Image3D, m: int, on_gpu: bool) -> np.ndarray:
    """The distance matrix computed row by row (the rows could come from a matrix too large for the
    GPU); with a GPU, X is copied to the device once for all rows and each row comes back once."""
    out = np.empty((m, m), dtype=np.float32)
    drow = ca.Image3D(ca.GridInfo((m, 1, 1)))
    if not on_gpu:
        for p in range(m):
            pairwise_row(drow, x, p)
            out[p] = drow.numpy()[:, 0, 0]
        return out
    with ca.on_device({x: "to"}):                    # X: to the device once
        for p in range(m):
            with ca.on_device({drow: "from"}):       # the row: computed there, copied back at the end
                pairwise_row(drow, x, p)
            out[p] = drow.numpy()[:, 0, 0]
    return out


# 4. A separable blur: one pass along `axis`, its taps read through ca.line ------------------------
@ca.kernel(check_sizes=False)
def blur_pass(out: ca.Image3D, im: ca.Image3D, w: ca.Image3D, r: int, axis: int):
    i, j, k = ca.index()
    t = ca.line(im, axis, r)  # t[d]: im at this voxel moved d along axis (clamped to the grid)
    s = w[0, 0, 0] * t[0]
    for d in range(1, r + 1):
        s += w[d, 0, 0] * (t[-d] + t[d])
    out[i, j, k] = s


def gaussian(im: ca.Image3D, sigma: float) -> ca.Image3D:
    r = int(4 * sigma + 0.5)
    x = np.arange(r + 1, dtype=np.float64)
    full = np.exp(-np.concatenate([x[:0:-1], x]) ** 2 / (2 * sigma * sigma))
    w = ca.Image3D.from_array(np.asfortranarray((full / full.sum())[r:].astype(np.float32).reshape(-1, 1, 1)))
    w = w.to(im.memType())
    a, b = ca.Image3D(im.grid(), im.memType()), ca.Image3D(im.grid(), im.memType())
    blur_pass(a, im, w, r, 0)
    blur_pass(b, a, w, r, 1)
    blur_pass(a, b, w, r, 2)
    return a


def main():
    gpu = ca.cuda_available()
    mems = [ca.MEM_HOST] + ([ca.MEM_DEVICE] if gpu else [])
    print("GPU:", ca.device_info())
    rng = np.random.default_rng(0)

    g = ca.GridInfo((64, 48, 32))
    xa = rng.random(tuple(g.size()), dtype=np.float32)
    ya = rng.random(tuple(g.size()), dtype=np.float32)
    for mem in mems:
        x = ca.Image3D.from_array(np.asfortranarray(xa), g).to(mem)
        y = ca.Image3D.from_array(np.asfortranarray(ya), g).to(mem)
        saxpy(y, 2.0, x)
        err = np.abs(y.numpy() - (2.0 * xa + ya)).max()
        print(f"saxpy on {mem.name}: max |error| {err:.1e}")

    n, m = 16, 200
    pts = rng.random((m, n), dtype=np.float32)
    ref = np.sqrt(((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1))
    x = ca.Image3D.from_array(np.asfortranarray(pts.T[:, :, None]))
    d = ca.Image3D(ca.GridInfo((m, m, 1)))
    pairwise(d, x)
    print(f"pairwise distances: max |error| {np.abs(d.numpy()[:, :, 0] - ref).max():.1e}")
    blocked = pairwise_blocked(x, m, gpu)
    print(f"pairwise, row by row{' in a device data context' if gpu else ''}: max |error| "
          f"{np.abs(blocked - ref).max():.1e}")

    for mem in mems:
        im = ca.Image3D.from_array(np.asfortranarray(xa), g).to(mem)
        integral = im
        for axis in range(3):  # an integral image: inclusive sums along x, then y, then z
            integral = ca.scan(lambda a, b: a + b, integral, axis)
        ref = xa.astype(np.float64).cumsum(0).cumsum(1).cumsum(2)
        rel = np.abs(integral.numpy() - ref).max() / ref.max()
        total = ca.reduce(lambda a, b: a + b, im, 0.0)
        peak = ca.reduce(lambda a, b: max(a, b), im, -math.inf)
        clipped = ca.map(lambda v, w: min(v, w) - 0.5, im, im)
        print(f"{mem.name}: integral image rel. error {rel:.1e}; sum {total:.6f} (NumPy {xa.sum(dtype=np.float64):.6f}); "
              f"max {peak} (NumPy {xa.max()}); map max |error| {np.abs(clipped.numpy() - (xa - 0.5)).max():.1e}")

    from scipy.ndimage import gaussian_filter

    ref = gaussian_filter(xa.astype(np.float64), 1.5, mode="nearest", truncate=4.0)
    for mem in mems:
        blurred = gaussian(ca.Image3D.from_array(np.asfortranarray(xa), g).to(mem), 1.5)
        print(f"Gaussian blur (ca.line) on {mem.name}: max |error| {np.abs(blurred.numpy() - ref).max():.1e}")


if __name__ == "__main__":
    main()
