"""Transforms of registration: grids and their pyramids, affine maps and their H-fields, flows of
velocity fields, Jacobian determinants (docs/design/registration.md).

PyCA's conventions hold throughout: an H-field holds, at each voxel of its grid, the voxel
coordinates of the point it maps to; a V-field (velocity, displacement) is in world units; a 2-D
image has z = 1. A grid's world is origin + direction diag(spacing) index (docs/design/orientation.md).
Every function routes by memory type, so the same code runs on the CPU and on the GPU.

    from pyca.registration import transforms
    g2 = transforms.coarse_grid(grid, 2)        # half resolution, same box
    M = transforms.vox2world(grid)              # 4 x 4 voxel index -> world point
    transforms.affine_hfield(h, M_vox)          # h(x) = M_vox x, voxel to voxel
    transforms.jacobian_det(jac, h)             # det D h, 1 for the identity on any spacing
"""
from __future__ import annotations

import numpy as np

from .. import core as ca

__all__ = ["LINEAR_KINDS", "COARSE_MIN", "coarse_grid", "pyramid", "fft_size", "fft_grid", "extended", "cropped",
           "level_images", "voxel_volume", "same_grid", "same_field_of_view",
           "vox2world", "affine_hfield", "scratch_for", "center_of_mass", "rotation", "centred_affine", "flow_forward",
           "jacobian_det"]

LINEAR_KINDS = ("none", "rigid", "affine")  # the linear transforms pyca.apps.affine estimates
COARSE_MIN = 8  # a scale never shrinks an axis below this (or below its size when smaller)


# ------------------------------------------------------------------------------------------------
# Grids
def coarse_grid(g, f):
    """The grid of scale 1/f of `g`: each axis of n > 1 voxels shrunk to round(n / f) (never below
    COARSE_MIN, or n when smaller), the same box in the world (spacings scaled by n / size, the voxel
    centres placed so that the first and last voxels' outer faces stay where they were). f = 1: g."""
    if f == 1:
        return g
    size = np.array(tuple(g.size()))
    sp = np.array(tuple(g.spacing()), float)
    org = np.array(tuple(g.origin()), float)
    sc = np.array([_coarse_size(int(n), f) for n in size])
    r = size / sc
    d = g.direction()  # the coarse voxel centres, in the world (docs/design/orientation.md)
    return ca.GridInfo(tuple(int(n) for n in sc), tuple(sp * r), tuple(org + d @ (0.5 * (r - 1) * sp)), direction=d)


def pyramid(g, scales):
    """[coarse_grid(g, f) for f in scales]: the grids of a coarse-to-fine schedule."""
    return [coarse_grid(g, int(f)) for f in scales]


def _smooth(n):
    """True when n has no prime factor above 5 (a size FFTW transforms fastest)."""
    for q in (2, 3, 5):
        while n % q == 0:
            n //= q
    return n == 1


def _coarse_size(n, f):
    """coarse_grid's size of an axis of n voxels at scale 1/f."""
    return n if n == 1 or f == 1 else max(int(round(n / f)), min(n, COARSE_MIN))


def fft_size(n, scales=(1,)):
    """The smallest size m >= n of an axis whose grid at every scale 1/f of `scales` (coarse_grid's
    rule) has a size with no prime factor above 5; n itself when it is 1 (a 2-D image's z)."""
    if n <= 1:
        return n
    m = n
    while not all(_smooth(_coarse_size(m, int(f))) for f in scales):
        m += 1
    return m


def fft_grid(g, scales=(1,)):
    """`g` extended at the far end of each axis to fft_size(n, scales) voxels (same spacing, origin and
    direction: the voxel indices of g are unchanged), or g itself when every size already is one. The
    fluid kernel's FFTs on such grids cost half to a third of those on sizes with large prime factors
    (98 x 116 x 94: 29 and 47)."""
    size = tuple(int(n) for n in g.size())
    new = tuple(fft_size(n, scales) for n in size)
    if new == size:
        return g
    return ca.GridInfo(new, tuple(g.spacing()), tuple(g.origin()), direction=g.direction())


def extended(im, grid, labels=False):
    """The image `im` on `grid`, a grid with im's voxels first along each axis (fft_grid): im's values
    where it has them, beyond its far ends its border extended (BACKGROUND_STRATEGY_CLAMP), or 0 with
    labels=True (a mask: the added voxels are outside it)."""
    mem = im.memType()
    h = ca.Field3D(grid, mem)
    ca.SetToIdentity(h)  # whole voxels: the samples are im's values themselves
    out = ca.Image3D(grid, mem)
    if labels:
        ca.ApplyH(out, im, h, ca.BACKGROUND_STRATEGY_ZERO, ca.INTERP_NN)
    else:
        ca.ApplyH(out, im, h, ca.BACKGROUND_STRATEGY_CLAMP, ca.INTERP_LINEAR)
    return out


def cropped(x, grid):
    """The first voxels of the image or field x along each axis, as many as `grid` has (the inverse of
    extended() on fft_grid(grid)): a copy on `grid`."""
    out = type(x)(grid, x.memType())
    ca.SubVol(out, x, ca.Vec3Di(0, 0, 0))
    return out


def level_images(grid, f, images, mask=None):
    """One level of a coarse-to-fine schedule: its grid coarse_grid(grid, f) and, on it, each image
    downsampled with antialiasing (ca.ResampleAA) and the 0/1 `mask` resampled and thresholded at 0.5;
    at f = 1 the inputs themselves. Returns (grid, list of images, mask or None)."""
    if f == 1:
        return grid, list(images), mask
    g = coarse_grid(grid, f)
    mem = (images[0] if images else mask).memType()
    out = []
    for im in images:
        out.append(ca.Image3D(g, mem))
        ca.ResampleAA(out[-1], im)
    mk = None
    if mask is not None:
        mk = ca.Image3D(g, mem)
        ca.ResampleAA(mk, mask)
        ca.GTC_I(mk, 0.5)
    return g, out, mk


def voxel_volume(g):
    """sx * sy * sz (sx * sy on a 2-D grid): JacDetH differentiates an H-field per world unit (PyCA's
    units), so JacDetH times this is det D phi with phi in voxel coordinates (1 for the identity)."""
    sp = tuple(float(x) for x in g.spacing())
    return sp[0] * sp[1] * (1.0 if g.size().z == 1 else sp[2])


def same_field_of_view(g1, g2):
    """True when the two grids cover the same box of the world (to a voxel), whatever their storage
    order (a LAS copy of a RAS image covers the same box)."""
    def box(g):
        M = vox2world(g)
        n = np.array(tuple(g.size()), float) - 1
        c = np.array([[i, j, k] for i in (0, n[0]) for j in (0, n[1]) for k in (0, n[2])])
        w = c @ M[:3, :3].T + M[:3, 3]
        return np.concatenate([w.min(0), w.max(0)])

    tol = max(max(tuple(g1.spacing())), max(tuple(g2.spacing())))
    return bool(np.allclose(box(g1), box(g2), rtol=0, atol=tol))


def same_grid(a, b, tol=1e-4):
    """The two grids have the same size and the same voxel-to-world map (within tol): an image on one
    is an image on the other, voxel for voxel."""
    return tuple(a.size()) == tuple(b.size()) and np.allclose(vox2world(a), vox2world(b), rtol=tol, atol=tol)


# ------------------------------------------------------------------------------------------------
# Affine maps
def vox2world(grid):
    """4 x 4 matrix taking voxel indices of `grid` to world coordinates: origin + D diag(spacing) i
    (D the grid's direction matrix where GridInfo has one, else the identity)."""
    sp = np.array(tuple(grid.spacing()), float)
    D = np.eye(3)
    if hasattr(grid, "direction"):
        D = np.array(grid.direction(), float).reshape(3, 3)
    M = np.eye(4)
    M[:3, :3] = D @ np.diag(sp)
    M[:3, 3] = np.array(tuple(grid.origin()), float)
    return M


def affine_hfield(out, M, src=None, scratch=None):
    """out(x) = M[:3, :3] src(x) + M[:3, 3] for a Field3D src (default: the identity, voxel indices
    of out's grid), with pyca operations; out may be src. scratch: optional scratch_for(out), so that
    a caller in a loop allocates nothing."""
    idf, c = scratch if scratch is not None else scratch_for(out)
    if src is None:
        ca.SetToIdentity(idf)
        src = idf
    for d in range(3):  # the components first: out may be src
        ca.Copy(c[d], src, d)
    row = c[3]
    for i in range(3):
        ca.MulC_Add_MulC(row, c[0], float(M[i, 0]), c[1], float(M[i, 1]))
        ca.Add_MulC_I(row, c[2], float(M[i, 2]))
        ca.AddC_I(row, float(M[i, 3]))
        ca.Copy(out, row, i)
    return out


def scratch_for(field):
    """The scratch affine_hfield uses on field's grid: a Field3D and four Image3D."""
    g, mem = field.grid(), field.memType()
    return ca.Field3D(g, mem), [ca.Image3D(g, mem) for _ in range(4)]


def center_of_mass(im):
    """World coordinates of the intensity-weighted centre of an image of non-negative values."""
    g = im.grid()
    h = ca.Field3D(g, im.memType())
    ca.SetToIdentity(h)
    ca.Mul_I(h, im)
    s = float(ca.Sum(im))
    if not s > 0:
        raise ValueError("affine: the image has no positive intensity: no centre of mass")
    v = np.array(tuple(ca.Sum(h)), float) / s
    return (vox2world(g) @ np.append(v, 1.0))[:3]


def rotation(w):
    """exp([w]x), the rotation of the rotation vector w (angle |w| radians about w / |w|): Rodrigues'
    formula (I + [w]x below 1e-12 radians)."""
    th = float(np.linalg.norm(w))
    K = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]], float)
    if th < 1e-12:
        return np.eye(3) + K
    K /= th
    return np.eye(3) + np.sin(th) * K + (1 - np.cos(th)) * K @ K


def centred_affine(A, t, c):
    """The 4 x 4 map x -> A (x - c) + c + t (A 3 x 3 about the centre c, then the translation t)."""
    T = np.eye(4)
    T[:3, :3] = A
    T[:3, 3] = c + t - A @ c
    return T


# ------------------------------------------------------------------------------------------------
# Velocity fields and Jacobians
def flow_forward(h, hn, v, dt):
    """phi_{0,1} of the time-varying velocity v (a list of T V-fields, world units, v[j] on [j dt,
    (j + 1) dt)): from the identity, phi_{t_j,1} = phi_{t_{j+1},1} o (x + dt v_j) for j = T-1 .. 0
    (semi-Lagrangian; LDDMMComposeStep: each map extended beyond the grid by its border displacement,
    as the LDDMM solver's backward maps). h, hn: two Field3D on v's grid (overwritten); returns the one
    that holds the result."""
    ca.SetToIdentity(h)
    for j in range(len(v) - 1, -1, -1):
        ca.LDDMMComposeStep(hn, h, v[j], dt)
        h, hn = hn, h
    return h


def jacobian_det(out, h):
    """out = det D h of an H-field h (voxel coordinates), 1 for the identity on any spacing."""
    ca.JacDetH(out, h)
    vol = voxel_volume(h.grid())
    if vol != 1.0:
        ca.MulC_I(out, vol)
    return out
