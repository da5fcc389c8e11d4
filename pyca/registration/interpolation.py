"""The bias trilinear interpolation gives a sampled image, as a match's target (docs/lddmm.md,
'Interpolation blur').

Sampling an image by trilinear interpolation blurs it, by an amount that changes from point to point
(none at a voxel, most halfway between voxels). A match that compares a warped image with another
image takes that varying blur for anatomy. ``InterpTarget`` is the other image plus the same bias,
point by point, so that the difference is the unblurred image against the other one. Used by
``pyca lddmm``'s solver (the fixed image plus the warped moving image's bias) and by ``pyca register``
(syn: each warped image's bias, with a zero base, subtracted). Routes by memory type: the same code
runs on the CPU and on the GPU.

    from pyca.registration.interpolation import InterpTarget
    target = InterpTarget(grid, mem, fixed, moving)      # moving on `grid`, sampled through h
    J1 = target.update(h)                                 # fixed + the bias of moving o h
"""
from __future__ import annotations

import numpy as np

from .. import core as ca
from .transforms import affine_hfield

__all__ = ["InterpTarget"]


class InterpTarget:
    """The fixed image plus the bias trilinear interpolation gives the warped moving image, point by point.

    Trilinear interpolation at fraction t along an axis is the image plus (1/2) t (1 - t) times its second
    difference along that axis (to second order; exactly for a quadratic): a blur of variance t (1 - t)
    voxels^2, 0 at a voxel, 1/4 halfway. The warped moving image J = I0 o phi_{1,0} carries that bias; its
    target is the fixed image with the same bias added,

        target(x) = I1(x) + (1/2) sum_k t_k(x) (1 - t_k(x)) (D_k^2 I0)(y(x)),

    y(x) the point where I0 is sampled (A phi_{1,0}(x) + t through the linear stage's map into the moving
    image's voxels, or phi_{1,0}(x) itself), t_k its fractional parts and D_k^2 I0 the moving image's
    second differences along its own axes (BC_CLAMP), computed once per scale and sampled at y (trilinear,
    CLAMP). J - target is then the difference of the moving image as it is (unblurred) and the fixed image.
    The target is recomputed once per forward() (update()), double-buffered so that the solver's undo()
    restores it with J0. Where every sampling point is a voxel (equal images on one grid, at the identity)
    the target is I1 itself.

    grid, mem: the fixed grid (of the level) and memory type; base: I1; src: the image the solver samples
    (I0 on the level's grid, or the moving image on its own grid); M: the 4 x 4 map from fixed voxels into
    src's voxels (None: src is on `grid`, sampled through phi_{1,0} itself)."""

    def __init__(self, grid, mem, base, src, M=None):
        Im = lambda: ca.Image3D(grid, mem)  # noqa: E731
        self.grid, self.mem = grid, mem
        sg = self._src_grid = src.grid()
        self._axes = [k for k in range(3) if tuple(sg.size())[k] > 1]  # an axis of size 1 is not interpolated
        self.curv = {k: ca.Image3D(sg, mem) for k in self._axes}
        field, a = ca.Field3D(sg, mem), ca.Image3D(sg, mem)
        for k in self._axes:  # curv_k = (src(x + e_k) + src(x - e_k) - 2 src(x)) / 2
            c = self.curv[k]
            for sign, out in ((1.0, c), (-1.0, a)):
                ca.SetToIdentity(field)
                ca.AddC_I(field, ca.Vec3Df(*(sign if i == k else 0.0 for i in range(3))))
                ca.ApplyH(out, src, field)  # exact at whole-voxel shifts; CLAMP at the borders
            ca.Add_I(c, a)
            ca.Add_MulC_I(c, src, -2.0)
            ca.MulC_I(c, 0.5)
        del field, a
        self._M = None if M is None else np.asarray(M, float)
        if self._M is not None:  # y = A h + t, and h's components for it
            self._points, self._comp = ca.Field3D(grid, mem), [Im() for _ in range(3)]
        self._bufs = [Im(), Im()]
        self._t, self._w = Im(), Im()
        self._last = None
        self.image = self._bufs[0]
        self.set_base(base)

    def curvature_field(self):
        """The half second differences of src as one Field3D on src's grid (component k: axis k; 0 along an
        axis of size 1): ca.ApplyHUnblurred's curv, which samples src with this bias removed in one pass."""
        f = ca.Field3D(self._src_grid, self.mem)
        ca.SetMem(f, 0.0)
        for k in self._axes:
            ca.Copy(f, self.curv[k], k)
        return f

    def set_base(self, base):
        """A new fixed image (the bias correction's): the target at the points of the last update() (base
        itself before any). Returns the target."""
        self.base = base
        if self._last is None:
            ca.Copy(self.image, base)
        else:
            self._compute(self.image, self._last)
        return self.image

    def update(self, h):
        """The target for the map h (phi_{1,0}, fixed voxels), in the other buffer; returns it."""
        self._bufs.reverse()
        self.image, self._last = self._bufs[0], h
        self._compute(self.image, h)
        return self.image

    def undo(self):
        """The target before the last update()."""
        self._bufs.reverse()
        self.image, self._last = self._bufs[0], None
        return self.image

    def _compute(self, out, h):
        t, w = self._t, self._w
        y = h
        if self._M is not None:  # y = A h + t (affine_hfield's scratch: h's components and t; no identity)
            y = affine_hfield(self._points, self._M, h, (None, self._comp + [t]))
        ca.Copy(out, self.base)
        for k in self._axes:
            ca.Copy(t, y, k)
            ca.Floor(w, t)
            ca.Sub_I(t, w)  # t_k
            ca.Mul(w, t, t)
            ca.Sub_I(t, w)  # t_k (1 - t_k)
            ca.ApplyH(w, self.curv[k], y)  # (D_k^2 src)(y) / 2
            ca.Add_Mul_I(out, t, w)
