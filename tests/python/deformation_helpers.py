"""Helpers of the deformation tests (test_ops_deformation.py, test_border_maps.py): pyca arrays from NumPy,
a grid's size, spacing and origin, identity maps, and SciPy's trilinear sample as the reference. Importable
by name because tests/python/conftest.py puts this folder on sys.path (pytest's importlib mode does not let
one test module import another)."""
import numpy as np
import scipy.ndimage as ndi

import pyca as ca
from memory_helpers import MEMS  # noqa: F401 - re-exported (test_ops_deformation, test_border_maps)


def make(mem, a, grid):
    """A pyca array holding `a` ((sx, sy, sz) -> Image3D, (sx, sy, sz, 3) -> Field3D) in `mem`."""
    a = np.asarray(a, dtype=np.float32)
    cls = ca.Field3D if a.ndim == 4 else ca.Image3D
    host = cls(grid, ca.MEM_HOST)
    np.asarray(host)[...] = a
    return host if mem == ca.MEM_HOST else host.clone(mem)


def image(mem, grid):
    return ca.Image3D(grid, mem)


def field(mem, grid):
    return ca.Field3D(grid, mem)


def shape(grid):
    s = grid.size()
    return (s.x, s.y, s.z)


def spacing(grid):
    s = grid.spacing()
    return np.array([s.x, s.y, s.z])


def origin(grid):
    o = grid.origin()
    return np.array([o.x, o.y, o.z])


def is2d(grid):
    return shape(grid)[2] == 1


def identity(grid):
    """The identity map of `grid` in voxels, (sx, sy, sz, 3) float64."""
    return np.stack(np.meshgrid(*[np.arange(n, dtype=np.float64) for n in shape(grid)], indexing="ij"), axis=-1)


def noisy_identity(grid, rng, amp):
    """identity + uniform(-amp, amp) voxels; on a 2-D grid z gets garbage, which must be ignored."""
    h = identity(grid) + rng.uniform(-amp, amp, shape(grid) + (3,))
    if is2d(grid):
        h[..., 2] = rng.uniform(-5, 5, shape(grid))
    return h.astype(np.float32)


def map_coords(vol, pts, mode, order=1):
    """SciPy's sample of vol ((sx, sy, sz)) at pts ((..., 3) voxels); on a grid of one plane z is not
    interpolated (the documented behaviour)."""
    vol = np.asarray(vol, np.float64)
    pts = np.asarray(pts, np.float64)
    if vol.shape[2] == 1:
        return ndi.map_coordinates(vol[:, :, 0], [pts[..., 0], pts[..., 1]], order=order, mode=mode)
    return ndi.map_coordinates(vol, [pts[..., 0], pts[..., 1], pts[..., 2]], order=order, mode=mode)
