"""Helpers of the PyCA compatibility suite: PyCA's test grids, conversions and NumPy references.

The grids are those of PyCA's own tests: a 2-D grid with anisotropic spacing (31 x 33, spacing
1.5 x 2.1) and a 3-D grid with odd sizes and anisotropic spacing. Every reference here is written
with NumPy/SciPy from the documented formula, never from numbers pyca produced.
"""
import numpy as np
import pytest

import pyca as ca
from pyca.testing import both_memory  # noqa: F401 - re-exported for the test modules

GRID_PARAMS = {
    "2d": ((31, 33, 1), (1.5, 2.1, 1.0), (0.0, 0.0, 0.0)),
    "3d": ((17, 13, 11), (1.5, 1.0, 2.0), (0.0, 0.0, 0.0)),
}
GRID_IDS = list(GRID_PARAMS)


def make_grid(gid, origin=None):
    size, sp, org = GRID_PARAMS[gid]
    return ca.GridInfo(ca.Vec3Di(*size), ca.Vec3Df(*sp), ca.Vec3Df(*(origin or org)))


grids = pytest.mark.parametrize("gid", GRID_IDS)


def image(arr, grid, mem):
    """An Image3D in `mem` holding `arr` (shape (sx, sy, sz))."""
    im = ca.Image3D(grid, ca.MEM_HOST)
    im.asnp()[...] = arr
    im.toType(mem)
    return im


def field(arr, grid, mem):
    """A Field3D in `mem` holding `arr` (shape (sx, sy, sz, 3))."""
    f = ca.Field3D(grid, ca.MEM_HOST)
    np.asarray(f)[...] = arr
    f.toType(mem)
    return f


def npy(obj):
    """NumPy copy (float64) of an Image3D / Field3D in any memory type."""
    return obj.numpy().astype(np.float64)


def rand(grid, rng, lo=-1.0, hi=1.0, ncomp=1):
    shape = tuple(grid.size()) + ((3,) if ncomp == 3 else ())
    return rng.uniform(lo, hi, shape).astype(np.float32).astype(np.float64)


def assert_close(obj, ref, rtol=1e-5, atol=1e-5, what=""):
    got = npy(obj) if isinstance(obj, (ca.Image3D, ca.Field3D)) else np.asarray(obj, dtype=np.float64)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, err_msg=what)


def spacing(grid):
    return np.array(grid.spacing().tolist(), dtype=np.float64)


def identity(grid):
    """The identity H-field of `grid` as an array (sx, sy, sz, 3) of voxel coordinates."""
    return np.stack(np.meshgrid(*[np.arange(n, dtype=np.float64) for n in grid.size()], indexing="ij"), axis=-1)


# ------------------------------------------------------------------------------------------------
# Finite differences as PyCA's FiniteDiff.h computes them, per index unit, along `axis` of `f`:
# the neighbours are read with clamping (BC_CLAMP, BC_APPROX) or periodically (BC_WRAP); BC_APPROX
# changes only central differences at the border, which become one-sided (no factor 1/2). A forward
# difference at the last voxel (backward at the first) is therefore 0 with BC_CLAMP and BC_APPROX.
def diff_ref(f, axis, diff, bc):
    n = f.shape[axis]
    if n == 1:
        return np.zeros_like(f)
    f = np.moveaxis(f, axis, 0)
    if bc == ca.BC_WRAP:
        nxt, prv = np.roll(f, -1, axis=0), np.roll(f, 1, axis=0)
    else:
        nxt = np.concatenate([f[1:], f[-1:]], axis=0)
        prv = np.concatenate([f[:1], f[:-1]], axis=0)
    fwd, bwd, cen = nxt - f, f - prv, 0.5 * (nxt - prv)
    if bc == ca.BC_APPROX:
        cen[0], cen[-1] = nxt[0] - prv[0], nxt[-1] - prv[-1]
    out = {ca.DIFF_FORWARD: fwd, ca.DIFF_BACKWARD: bwd, ca.DIFF_CENTRAL: cen}[diff]
    return np.moveaxis(out, 0, axis)


def gradient_ref(f, grid, diff=None, bc=None):
    diff = ca.DIFF_CENTRAL if diff is None else diff
    bc = ca.BC_CLAMP if bc is None else bc
    sp = spacing(grid)
    return np.stack([diff_ref(f, a, diff, bc) / sp[a] for a in range(3)], axis=-1)


# ------------------------------------------------------------------------------------------------
# Interpolation (PyCA's background strategies) with scipy.ndimage.map_coordinates, order 1
def interp_ref(src, pos, bg, bgval=0.0):
    """Trilinear interpolation of `src` (sx, sy, sz) at voxel positions pos (..., 3)."""
    from scipy import ndimage

    coords = [pos[..., a] for a in range(3)]
    if src.shape[2] == 1:  # 2-D: z is not interpolated
        coords[2] = np.zeros_like(coords[2])
    mode = {ca.BACKGROUND_STRATEGY_CLAMP: "nearest", ca.BACKGROUND_STRATEGY_WRAP: "grid-wrap",
            ca.BACKGROUND_STRATEGY_PARTIAL_ZERO: "grid-constant", ca.BACKGROUND_STRATEGY_ZERO: "constant",
            ca.BACKGROUND_STRATEGY_VAL: "constant"}[bg]
    cval = bgval if bg == ca.BACKGROUND_STRATEGY_VAL else 0.0
    if mode == "constant":
        # outside [0, n-1] on any axis -> cval; inside, neighbours read as with clamping
        inside = np.ones(pos.shape[:-1], dtype=bool)
        for a in range(3):
            if src.shape[a] > 1:
                inside &= (coords[a] >= 0) & (coords[a] <= src.shape[a] - 1)
        val = ndimage.map_coordinates(src, coords, order=1, mode="nearest")
        return np.where(inside, val, cval)
    return ndimage.map_coordinates(src, coords, order=1, mode=mode, cval=cval)


def interp_field_ref(src, pos, bg):
    """Interpolation of each component of a field (sx, sy, sz, 3); PARTIAL_ID / ID for H-fields."""
    if bg in (ca.BACKGROUND_STRATEGY_PARTIAL_ID, ca.BACKGROUND_STRATEGY_ID):
        # interpolate the displacement src - id with zero outside, then add the position back
        ident = np.stack(np.meshgrid(*[np.arange(n, dtype=np.float64) for n in src.shape[:3]], indexing="ij"),
                         axis=-1)
        sub = ca.BACKGROUND_STRATEGY_PARTIAL_ZERO if bg == ca.BACKGROUND_STRATEGY_PARTIAL_ID else \
            ca.BACKGROUND_STRATEGY_ZERO
        out = np.stack([interp_ref(src[..., c] - ident[..., c], pos, sub) for c in range(3)], axis=-1)
        p = pos.copy()
        if src.shape[2] == 1:
            p[..., 2] = 0.0
        return out + p
    return np.stack([interp_ref(src[..., c], pos, bg) for c in range(3)], axis=-1)


# ------------------------------------------------------------------------------------------------
# PyCA's GaussianFilter: a normalised Gaussian of sigma_vox[axis] voxels truncated at radius[axis],
# correlated along each axis with the border voxel repeated (axes of size 1 untouched)
def gauss_ref(A, sigma_vox, radius):
    from scipy import ndimage

    out = A.copy()
    for axis in range(3):
        s, r = float(sigma_vox[axis]), int(radius[axis])
        if s <= 0 or r == 0 or A.shape[axis] == 1:
            continue
        k = np.arange(-r, r + 1, dtype=np.float64)
        w = np.exp(-0.5 * (k / s) ** 2)
        out = ndimage.correlate1d(out, w / w.sum(), axis=axis, mode="nearest")
    return out


def resample_ref(src, out_shape, origin_offset=True):
    """PyCA's Resample in index space: out(i) = src(r i + (r - 1) / 2) per axis (r = n_in / n_out;
    without the origin offset src(r i)), trilinear, clamped; applied per component to a field."""
    if src.ndim == 4:
        return np.stack([resample_ref(src[..., c], out_shape, origin_offset) for c in range(src.shape[3])], axis=-1)
    r = np.array(src.shape, dtype=np.float64) / np.array(out_shape, dtype=np.float64)
    axes = [np.arange(n) * r[a] + ((r[a] - 1) / 2 if origin_offset else 0.0) for a, n in enumerate(out_shape)]
    pos = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
    return interp_ref(src, pos, ca.BACKGROUND_STRATEGY_CLAMP)
