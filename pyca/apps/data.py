"""Built-in, deterministically generated test data for the applications (no files, no randomness).

``builtin_pair()`` returns (fixed, moving): a smooth ball with an off-centre inner ellipsoid and a
notch (the fixed image), and the same object carried through a large, smooth, non-rigid and
invertible warp (the moving image): a "banana" bend of up to 9 world units along x, a twist-like
shear along y that varies with z, and a stretch along x. Undoing it needs displacements of many
voxels that vary across the object, the kind of deformation LDDMM is for. The default grid is
64 x 64 x 48 voxels with anisotropic spacing (1, 1, 4/3): a 64 x 64 x 64 world-unit box.

The images are analytic functions of the world coordinates, sampled at voxel centres, so any grid
size gives the same shapes at another resolution (the spacing is chosen to cover the same box
unless given).
"""
from __future__ import annotations

import numpy as np

from .. import core

BOX = 64.0  # world units per axis
DEFAULT_SIZE = (64, 64, 48)
DEFAULT_SPACING = (1.0, 1.0, 4.0 / 3.0)


def _spacing(size, spacing):
    # Default: the same 64^3 world-unit box whatever the size.
    return tuple(BOX / n for n in size) if spacing is None else tuple(float(s) for s in spacing)


def _smooth_step(d, width):
    # 1 inside (d < 0), 0 outside, a smooth logistic edge `width` world units wide.
    return 0.5 * (1.0 - np.tanh(d / width))


def phantom(x, y, z):
    """The fixed object at world points (x, y, z) (centred coordinates): values in [0, 1]."""
    r = np.sqrt(x * x + y * y + z * z)
    ball = _smooth_step(r - 16.0, 1.5)
    # A brighter inner ellipsoid, off centre.
    e = np.sqrt(((x - 4.0) / 7.0) ** 2 + ((y + 3.0) / 5.5) ** 2 + (z / 6.5) ** 2)
    inner = _smooth_step((e - 1.0) * 6.0, 1.5)
    # A notch (a darker cylinder along z cutting into the ball at -x).
    c = np.sqrt((x + 14.5) ** 2 + (y - 4.0) ** 2)
    notch = _smooth_step(c - 6.0, 1.5)
    return np.clip(0.6 * ball * (1.0 - notch) + 0.4 * inner, 0.0, 1.0)


def warp(x, y, z):
    """The inverse of the warp taking the fixed object to the moving one: moving(p) = phantom(warp(p)).

    A composition of invertible maps (shears with unit Jacobian and a stretch), so moving is a
    diffeomorphic image of fixed: x stretched by 1.12, then y sheared by 5 sin(pi z / 40), then x
    bent by 9 (y / 20)^2 - 3."""
    x1 = x / 1.12
    y1 = y - 5.0 * np.sin(np.pi * z / 40.0)
    x2 = x1 + 9.0 * (y1 / 20.0) ** 2 - 3.0
    return x2, y1, z


def _world_coords(size, spacing):
    size = tuple(int(s) for s in size)
    spacing = tuple(float(s) for s in spacing)
    axes = [(np.arange(n) - (n - 1) / 2.0) * sp for n, sp in zip(size, spacing)]
    return np.meshgrid(*axes, indexing="ij")


def builtin_arrays(size=DEFAULT_SIZE, spacing=None):
    """(fixed, moving) as float32 NumPy arrays of shape `size` (x, y, z), Fortran-ordered; spacing
    defaults to covering a 64^3 world-unit box."""
    x, y, z = _world_coords(size, _spacing(size, spacing))
    fixed = phantom(x, y, z)
    moving = phantom(*warp(x, y, z))
    return (np.asfortranarray(fixed, dtype=np.float32), np.asfortranarray(moving, dtype=np.float32))


def builtin_grid(size=DEFAULT_SIZE, spacing=None):
    """The grid of the built-in pair: origin chosen so that world (0, 0, 0) is the box centre."""
    spacing = _spacing(size, spacing)
    origin = tuple(-(n - 1) / 2.0 * sp for n, sp in zip(size, spacing))
    return core.GridInfo(tuple(int(s) for s in size), tuple(float(s) for s in spacing), origin)


def builtin_pair(size=DEFAULT_SIZE, spacing=None, mem=None):
    """(fixed, moving) Image3D objects in memory type `mem` (default MEM_HOST), on builtin_grid()."""
    f, m = builtin_arrays(size, spacing)
    g = builtin_grid(size, spacing)
    fixed, moving = core.Image3D.from_array(f, g), core.Image3D.from_array(m, g)
    if mem is not None and int(mem) != int(core.MEM_HOST):
        fixed, moving = fixed.clone(mem), moving.clone(mem)
    return fixed, moving
