"""Registration inputs on their reference grids: the one place where an image, a mask or a label map
given on a grid of its own is brought onto the grid it is compared with, by its own voxel-to-world
affine (never matched by its size), and where label maps keep their integer values.

    from pyca.registration import inputs
    m = inputs.on_grid(mask, image.grid(), nearest=True)   # a mask stored LAS, its image RAS: placed
    lab = inputs.LabelImage.load("labels.nii.gz")          # integer values, any magnitude (int64)
    lab = lab.on_grid(moving.grid())                       # nearest neighbour, 0 outside its box
    idx, table = lab.indices(mem)                          # float32 indices 0..K-1 to warp with ApplyH
    out = inputs.LabelImage.from_indices(warped_idx, table)

A registration's inputs are also checked here before any work (check_inputs, placed_inputs) and
brought onto the fixed grid through the linear stage (on_fixed, binary, linear_kind, check_overlap),
for pyca lddmm and pyca register alike.

Every program that takes masks or labels (pyca lddmm, register-batch, atlas; pyca register and apply
through lddmm's input handling) goes through here, so a mask or label map stored in another
orientation, origin or resolution than its image is placed where it lies in the world, as the images
themselves are (docs/design/orientation.md).

Label values travel as indices into a table of the distinct values (0 first: the background that
nearest-neighbour sampling gives outside the image), so a label above 2^24, which float32 cannot hold,
comes out as it went in; the table is int64 (or the file's unsigned type) and the output file keeps an
integer type (pyca.io.save_labels).
"""
from __future__ import annotations

import os

import numpy as np

from .. import core as ca
from .. import io as pio
from .transforms import center_of_mass, same_grid, vox2world

__all__ = ["on_grid", "LabelImage", "MAX_LABELS", "MIN_SIZE", "as_image", "describe", "check_finite",
           "placed_inputs", "check_inputs", "check_overlap", "world_overlap", "check_world_overlap", "binary",
           "linear_kind", "on_fixed"]

MIN_SIZE = 4  # smallest extent of a registered axis (z may be 1: a 2-D image)
MAX_LABELS = 1 << 24  # distinct label values: each index must be exact in float32


def on_grid(im, grid, nearest=False, background=None):
    """`im` (an Image3D of any grid and memory type) on `grid`, placed by its own affine: `im` itself when
    its grid is `grid` (same size and affine), else resampled in world coordinates (ResampleWorld:
    trilinear with the border extended, or, with `nearest` (masks, label indices), nearest neighbour with
    0 outside im's box). background: ResampleWorld's background strategy instead of those."""
    if same_grid(im.grid(), grid):
        return im
    out = ca.Image3D(grid, im.memType())
    if nearest:
        bg = ca.BACKGROUND_STRATEGY_ZERO if background is None else background
        ca.ResampleWorld(out, im, bg, ca.INTERP_NN)
    else:
        bg = ca.BACKGROUND_STRATEGY_CLAMP if background is None else background
        ca.ResampleWorld(out, im, bg, ca.INTERP_LINEAR)
    return out


def _integer_values(a, what):
    """An integer array of a label map's values: integer arrays as they are, float ones when every value
    is an integer (exactly representable)."""
    a = np.asarray(a)
    if a.dtype.kind in "iu":
        return a
    if a.dtype.kind == "b":
        return a.astype(np.uint8)
    if a.dtype.kind != "f" or not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: labels must be finite integers, got dtype {a.dtype}"
                         + ("" if a.dtype.kind != "f" else " with NaN or infinite values"))
    if not np.array_equal(a, np.round(a)):
        raise ValueError(f"{what} holds non-integer values: labels must be integers")
    return a.astype(np.int64)


class LabelImage:
    """An integer label map on a grid (host memory). values: an integer NumPy array (x, y, z), never
    converted to float32; grid(): its GridInfo."""

    def __init__(self, values, grid, what="labels"):
        v = _integer_values(values, what)
        if v.ndim == 2:
            v = v[:, :, None]
        if tuple(v.shape) != tuple(grid.size()):
            raise ValueError(f"{what}: values of shape {v.shape} on a grid of size {tuple(grid.size())}")
        self._values, self._grid, self.what = np.asfortranarray(v), grid, what

    # construction -------------------------------------------------------------------------------
    @classmethod
    def load(cls, path, what=None):
        """The label map in a file, its values read as stored (pyca.io.load_labels)."""
        values, grid = pio.load_labels(path)
        return cls(values, grid, what or f"labels {os.fspath(path)!r}")

    @classmethod
    def of(cls, x, what="labels"):
        """A LabelImage from a LabelImage, a file path, an Image3D (its values must be integers) or an
        integer NumPy array (on a unit grid)."""
        if isinstance(x, LabelImage):
            return x
        if isinstance(x, (str, os.PathLike)):
            return cls.load(x, what)
        if isinstance(x, ca.Image3D):
            return cls(x.numpy(), x.grid(), what)
        if isinstance(x, np.ndarray):
            shape = x.shape if x.ndim == 3 else tuple(x.shape) + (1,)
            return cls(x, ca.GridInfo(tuple(int(n) for n in shape)), what)
        raise TypeError(f"{what}: expected a label image (file, Image3D, LabelImage or integer array), "
                        f"not {type(x).__name__}")

    @classmethod
    def from_indices(cls, idx, table, what="labels"):
        """The label map whose voxel i holds table[idx(i)] (idx: an Image3D of indices, any memory type)."""
        a = np.rint(idx.numpy()).astype(np.int64)
        np.clip(a, 0, len(table) - 1, out=a)
        return cls(np.asarray(table)[a], idx.grid(), what)

    # access ---------------------------------------------------------------------------------------
    def grid(self):
        return self._grid

    def numpy(self):
        """The values (an integer array, x, y, z)."""
        return self._values

    def __array__(self, dtype=None, copy=None):
        """np.asarray(labels): the integer values, as np.asarray(image) gives an Image3D's voxels."""
        return self._values if dtype is None else self._values.astype(dtype)

    def memType(self):  # noqa: N802 - pyca's spelling, so a LabelImage passes where images are listed
        return ca.MEM_HOST

    def indices(self, mem=None):
        """(Image3D of float32 indices into table, table): table holds the distinct values, 0 first,
        as the file's integer type; indices are exact (fewer than MAX_LABELS values)."""
        v = self._values
        u = np.unique(v)
        nz = u[u != 0]  # sorted
        table = np.concatenate([np.zeros(1, v.dtype), nz])
        inv = np.where(v == 0, 0, np.searchsorted(nz, v) + 1)
        if table.size >= MAX_LABELS:
            raise ValueError(f"{self.what}: {table.size} distinct labels; at most {MAX_LABELS - 1} are supported")
        idx = ca.Image3D.from_array(np.asfortranarray(inv.reshape(self._values.shape).astype(np.float32)), self._grid)
        if mem is not None and int(mem) != int(ca.MEM_HOST):
            idx = idx.clone(mem)
        return idx, table

    def on_grid(self, grid):
        """The label map on `grid`, placed by its own affine (nearest neighbour, 0 outside its box)."""
        if same_grid(self._grid, grid):
            return self
        idx, table = self.indices()
        return LabelImage.from_indices(on_grid(idx, grid, nearest=True), table, self.what)

    def __repr__(self):
        return f"LabelImage({self._values.dtype}, {tuple(self._values.shape)}, {np.unique(self._values).size} values)"


# ------------------------------------------------------------------------------------------------
# A registration's inputs: checked before any work, and brought onto the fixed grid (pyca lddmm, pyca register)
def as_image(x, name):
    if isinstance(x, ca.Image3D):
        return x
    if isinstance(x, ca.Field3D):
        raise TypeError(f"lddmm: {name} must be an image (Image3D), got a Field3D")
    if isinstance(x, (str, os.PathLike)):
        return pio.load_image(x)
    if isinstance(x, np.ndarray):
        if x.ndim not in (2, 3):
            raise ValueError(f"lddmm: {name} must be a 2-D or 3-D array, got shape {x.shape}")
        return ca.Image3D.from_array(np.asfortranarray(x, dtype=np.float32))
    raise TypeError(f"lddmm: {name} must be an Image3D, a NumPy array or a file path, not {type(x).__name__}")


def describe(role, names):
    """'the moving image (m.nii.gz)' for messages: the file when one was given."""
    what = {"fixed": "the fixed image", "moving": "the moving image", "fixed_mask": "the fixed mask",
            "moving_mask": "the moving mask", "moving_labels": "the moving labels"}[role]
    return f"{what} ({names[role]})" if names.get(role) else what


def check_finite(im, role, names):
    lo, hi = ca.MinMax(im)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"lddmm: {describe(role, names)} holds NaN or infinite values")
    return lo, hi


def placed_inputs(fixed, moving, names=None, fixed_mask=None, moving_mask=None, moving_labels=None):
    """{'fixed_mask', 'moving_mask': Image3D or None, 'moving_labels': LabelImage or None}: each mask and
    label map on its image's grid, placed by its own affine (pyca.registration.inputs: a mask stored in
    another orientation, origin or resolution is resampled where it lies in the world, never matched by
    size); labels keep their integer values."""
    names = names or {}
    out = {}
    for role, im, g in (("fixed_mask", fixed_mask, fixed.grid()), ("moving_mask", moving_mask, moving.grid())):
        if im is not None:
            check_finite(im, role, names)
        out[role] = on_grid(im, g, nearest=True) if im is not None else None
    out["moving_labels"] = None
    if moving_labels is not None:
        lab = LabelImage.of(moving_labels, f"lddmm: {describe('moving_labels', names)}")
        out["moving_labels"] = lab.on_grid(moving.grid())
    return out


def check_inputs(fixed, moving, names=None, fixed_mask=None, moving_mask=None, moving_labels=None):
    """Checks that the images (and masks, labels) can be registered, before any work; returns a note
    on how the moving image is brought onto the fixed grid. names: role -> file name, for messages."""
    names = names or {}
    gf, gm = fixed.grid(), moving.grid()
    for role, g in (("fixed", gf), ("moving", gm)):
        s = tuple(g.size())
        if (s[2] != 1 and min(s) < MIN_SIZE) or min(s[:2]) < MIN_SIZE:
            raise ValueError(f"lddmm: {describe(role, names)}'s grid {s} is too small to register (each axis needs "
                             f"at least {MIN_SIZE} voxels; z = 1 for a 2-D image)")
    if (gf.size().z == 1) != (gm.size().z == 1):
        raise ValueError(f"lddmm: cannot register a 2-D image with a 3-D one (fixed {tuple(gf.size())}, moving "
                         f"{tuple(gm.size())})")
    for role, im in (("fixed", fixed), ("moving", moving)):
        lo, hi = check_finite(im, role, names)
        if hi <= lo:
            raise ValueError(f"lddmm: {describe(role, names)} is constant ({lo}): nothing to register")
    for role, x, g in (("fixed_mask", fixed_mask, gf), ("moving_mask", moving_mask, gm),
                       ("moving_labels", moving_labels, gm)):
        if x is None:
            continue
        xs = tuple((x.grid() if hasattr(x, "grid") else LabelImage.of(x, describe(role, names)).grid()).size())
        flat = [a for a, n, m in zip("xyz", xs, tuple(g.size())) if n == 1 and m > 1]
        if flat:  # an axis of one voxel is not interpolated (the 2-D convention): it would fill its image
            image = "the fixed image" if role == "fixed_mask" else "the moving image"
            raise ValueError(f"lddmm: {describe(role, names)} has one voxel along {', '.join(flat)} (grid {xs}) where "
                             f"{image} has more ({tuple(g.size())}): placed by its affine it would be repeated "
                             f"through the whole image; give it on a grid of {image}'s dimension")
    placed = placed_inputs(fixed, moving, names, fixed_mask, moving_mask, moving_labels)
    for role in ("fixed_mask", "moving_mask"):
        if placed[role] is not None:
            lo, hi = check_finite(placed[role], role, names)
            if not hi > 0:
                raise ValueError(f"lddmm: {describe(role, names)} is empty on its image's grid (no voxel > 0)")
    lab = placed["moving_labels"]
    if lab is not None and not np.any(lab.numpy()):  # the output labels would be 0 everywhere
        given = LabelImage.of(moving_labels, describe("moving_labels", names))
        why = ("hold no label (every voxel 0)" if not np.any(given.numpy()) else
               "lie outside the moving image: placed by their affine, no labelled voxel falls on the moving grid "
               f"(labels grid {given.grid()}, moving grid {gm})")
        raise ValueError(f"lddmm: {describe('moving_labels', names)} {why}")
    if same_grid(gf, gm):
        return "same grid (voxel to voxel)"
    return f"moving resampled onto the fixed grid in world coordinates (moving grid {gm})"


def check_overlap(H, gm, names):
    """After the linear stage: some fixed voxels must map inside the moving grid."""
    s = np.array(tuple(gm.size()), float)
    inside = 0.0
    mem = H.memType()
    c = ca.Image3D(H.grid(), mem)
    acc = ca.Image3D(H.grid(), mem)
    ca.SetMem(acc, 1.0)
    for d in range(3 if gm.size().z > 1 else 2):
        ca.Copy(c, H, d)
        lo = ca.Image3D(H.grid(), mem)
        ca.GTC(lo, c, -0.5)
        ca.Mul_I(acc, lo)
        ca.LTC(lo, c, float(s[d]) - 0.5)
        ca.Mul_I(acc, lo)
    inside = float(ca.Sum(acc))
    if inside < 0.01 * H.grid().nVox():
        raise ValueError(f"lddmm: the fields of view of {describe('fixed', names)} and {describe('moving', names)} do "
                         f"not overlap after the linear stage ({inside / H.grid().nVox():.1%} of the fixed grid "
                         "maps inside the moving image)")


def world_overlap(fixed_grid, moving_grid, samples=48):
    """The fraction of `fixed_grid`'s voxel centres (at most `samples` per axis, evenly spread) whose world
    position lies inside `moving_grid`'s box (its voxels' extent), each grid placed by its own affine."""
    axes = [np.unique(np.linspace(0, n - 1, min(n, samples)).round()) for n in tuple(fixed_grid.size())]
    i = np.stack([a.ravel() for a in np.meshgrid(*axes, indexing="ij")] + [np.ones(axes[0].size * axes[1].size *
                                                                                  axes[2].size)])
    j = np.linalg.solve(vox2world(moving_grid), vox2world(fixed_grid) @ i)[:3]
    n = np.array(tuple(moving_grid.size()), float)[:, None]
    inside = np.all((j >= -0.5) & (j <= n - 0.5), axis=0)
    return float(inside.mean())


def check_world_overlap(fixed_grid, moving_grid, fixed_what, moving_what, prog):
    """Before any work: refused in one line when less than 1% of the fixed grid lies inside the moving
    image's box in the world (the moving image would be its own border, smeared over the fixed grid)."""
    f = world_overlap(fixed_grid, moving_grid)
    if f < 0.01:
        raise ValueError(f"{prog}: {fixed_what} and {moving_what} do not overlap in the world ({f:.1%} of the "
                         "first's grid lies inside the second's box): check their affines (qform/sform)")


def binary(im, mem):
    if im is None:
        return None
    out = im.clone(mem)
    ca.GTC_I(out, 0.0)
    return out


def linear_kind(choice, I1, I0):
    """'auto': affine when the grids or the centres of mass differ (by more than one voxel)."""
    if choice != "auto":
        return choice
    gf, gm = I1.grid(), I0.grid()
    if not same_grid(gf, gm):
        return "affine"
    d = np.linalg.norm(center_of_mass(I1) - center_of_mass(I0))
    return "affine" if d > max(tuple(gf.spacing())) else "none"


def on_fixed(grid, im, H, labels=False, out=None):
    """im (the moving image, its mask or labels, on its own grid, of any size) brought onto the fixed
    grid through the H-field H (fixed voxel -> im's own voxel coordinates), in one interpolation:
    images trilinear with the border extended (BACKGROUND_STRATEGY_CLAMP, ApplyH's default, as the
    solver's J0), labels and masks by nearest neighbour with 0 (no label) outside im's box."""
    out = out if out is not None else ca.Image3D(grid, H.memType())
    if labels:
        ca.ApplyH(out, im, H, ca.BACKGROUND_STRATEGY_ZERO, ca.INTERP_NN)
    else:
        ca.ApplyH(out, im, H, ca.BACKGROUND_STRATEGY_CLAMP, ca.INTERP_LINEAR)
    return out
