"""Intensities of a pair prepared for registration (docs/lddmm.md, 'Intensities'): robust scaling to
[0, 1], histogram matching of one contrast to another, the fixed image's blur to the warped moving
image's sharpness, and the smooth gain that corrects a bias field. Used by pyca.apps.lddmm and any
method that compares intensities (docs/design/registration.md). Every function routes by memory type.
"""
from __future__ import annotations

import numpy as np

from .. import core as ca
from .metrics import metric_class
from .transforms import same_field_of_view

__all__ = ["robust_range", "normalised", "histogram_matched", "gain_corrected", "fixed_blur_sigma",
           "compared_images"]


def robust_range(im, p, mask=None):
    a = im.numpy()
    vals = a[mask.numpy() > 0] if mask is not None else a.ravel()
    lo, hi = np.percentile(vals, p["percentiles"])
    if not hi > lo:
        lo, hi = float(vals.min()), float(vals.max())
    if not hi > lo:
        lo, hi = float(a.min()), float(a.max())
    return float(lo), float(hi)


def normalised(im, mem, p, mask=None, rng=None):
    """A copy of im in `mem`, scaled so that a robust range (lo, hi) is [0, 1], clamped: `rng`, or
    im's own (percentiles, inside mask) when none is given. Unscaled with normalize 'none'."""
    out = im.clone(mem)
    if p["normalize"] != "none":
        lo, hi = rng if rng is not None else robust_range(im, p, mask)
        ca.SubC_I(out, lo)
        ca.MulC_I(out, 1.0 / (hi - lo))
        ca.Clamp_I(out, 0.0, 1.0)
    return out


def histogram_matched(moving, fixed, mmask=None, fmask=None, levels=1024, sample=1 << 20):
    """The moving image (a host Image3D on its own grid) with its intensities mapped onto the fixed
    image's by matching their quantiles (levels + 1 of them, inside the masks when both are given: with
    one mask only, the two sets of voxels would hold different tissues; without masks, on images of
    different fields of view (transforms.same_field_of_view), over each image's voxels above 1% of its
    robust range (the background left out: two fields of view hold different fractions of background,
    which shifts every quantile of the anatomy:
    Colin27's 76% against the MNI template's 78% mapped its CSF onto the background), the two minima
    mapped onto each other; else over all voxels; at most `sample` voxels, taken at a regular stride):
    a monotone piecewise-linear map
    (docs/lddmm.md, 'Intensities'). pyca.apps.lddmm.register then scales both images by the fixed image's robust
    range, so that a sum of squared differences compares like with like."""
    q = np.linspace(0.0, 100.0, levels + 1)
    if mmask is None or fmask is None:
        mmask = fmask = None

    foreground = mmask is None and not same_field_of_view(fixed.grid(), moving.grid())

    def quantiles(a, mask):
        a = a.ravel(order="K")
        if mask is not None:
            a = a[mask.numpy().ravel(order="K") > 0]
        elif foreground:
            lo = float(a.min())
            fg = a[a > lo + 0.01 * (float(np.percentile(a[:: max(1, a.size // sample)], 99.5)) - lo)]
            a = fg if fg.size >= 0.01 * a.size else a  # (an image that is mostly background: all voxels)
        return np.percentile(a[:: max(1, a.size // sample)], q)

    m, fa = moving.numpy(), fixed.numpy()  # one host copy each, whatever the memory type
    qm, qf = quantiles(m, mmask), quantiles(fa, fmask)
    if foreground:  # the backgrounds (left out of the quantiles) map onto each other
        qm, qf = np.concatenate([[m.min()], qm]), np.concatenate([[fa.min()], qf])
    qm, first = np.unique(qm, return_index=True)  # a plateau (the background) maps to its first level
    matched = np.interp(m, qm, qf[first]).astype(np.float32)
    return ca.Image3D.from_array(np.asfortranarray(matched), moving.grid())


def gain_corrected(I1, W, sigma, mask=None):
    """(I1 g, g's range): the fixed image I1 times the smooth gain g = (G(f W I1) + c) / (G(f I1^2) + c)
    that best maps it onto the warped moving image W locally (G: a Gaussian of `sigma` world units;
    c, 1% of G(f I1^2)'s mean, takes g to 1 where I1 is dark). The weight f = 1 / (1 + |grad I1|^2 / k^2)
    (k^2: the mean of |grad I1|^2 weighted by I1^2, so the background's extent does not enter) measures
    the gain where the anatomy is flat: at an edge a residual misalignment changes W I1 by far more than
    a bias field does. The squared differences then compare anatomy, not a bias field's slow intensity
    changes (docs/lddmm.md, 'Intensities'). mask (0/1 on I1's grid): only its voxels enter the fit (f is
    0 elsewhere; c is 1% of the mean over the mask)."""
    g, mem = I1.grid(), I1.memType()
    f, grad = ca.Image3D(g, mem), ca.Field3D(g, mem)
    ca.Gradient(grad, I1)
    ca.SqrMagnitude(f, grad)
    del grad  # before num and den: at most four images at a time
    num, den = ca.Image3D(g, mem), ca.Image3D(g, mem)
    ca.Mul(num, W, I1)
    ca.Mul(den, I1, I1)
    if mask is not None:
        ca.Mul_I(num, mask)
        ca.Mul_I(den, mask)
    energy = float(ca.Sum(den))
    k2 = float(ca.Dot(f, den)) / energy if energy > 0 else 0.0
    if k2 > 0:
        ca.MulC_I(f, 1.0 / k2)
    ca.AddC_I(f, 1.0)
    ca.Inv_I(f)
    ca.Mul_I(num, f)
    ca.Mul_I(den, f)
    s = ca.Vec3Df(*(sigma if n > 1 else 0.0 for n in tuple(g.size())))
    ca.GaussianBlur(num, num, s)
    ca.GaussianBlur(den, den, s)
    c = 0.01 * float(ca.Sum(den)) / (float(ca.Sum(mask)) if mask is not None else float(g.nVox()))
    ca.AddC_I(num, c)
    ca.AddC_I(den, c)
    ca.Div_I(num, den)
    ca.Mul(f, I1, num)  # f: the corrected image now
    return f, tuple(float(x) for x in ca.MinMax(num))


def fixed_blur_sigma(fg, mg, blur):
    """World sigma per axis of the fixed grid fg for `blur` moving-image voxels: blur times the
    moving voxel's extent along each fixed axis, sqrt(sum_k (d_i . e_k)^2 s_k^2) (d_i, e_k: the
    grids' axis directions, s_k the moving spacings; an axis of size 1 is neither interpolated nor
    smoothed)."""
    sm = np.array([s if n > 1 else 0.0 for s, n in zip(tuple(mg.spacing()), tuple(mg.size()))])
    c = np.asarray(fg.direction()).T @ np.asarray(mg.direction())  # c[i, k] = d_i . e_k
    sig = blur * np.sqrt((c ** 2) @ sm ** 2)
    return tuple(float(x) if n > 1 else 0.0 for x, n in zip(sig, tuple(fg.size())))


def compared_images(fixed, moving, p, mem, fixed_mask=None, moving_mask=None):
    """(I1, Mn): the fixed and moving images as pyca.apps.lddmm.register compares them, copies in `mem`: each scaled by
    `normalize` (with 'histogram', the moving image's intensities first matched to the fixed image's and
    both scaled by the fixed image's range), the fixed one then smoothed by `fixed_blur` (as sharp as the
    warped moving image it is compared with). Mn stays on the moving image's grid (docs/lddmm.md,
    'Intensities'). Also for lab scripts (benchmarks/lab/brain_probe.py)."""
    frange = robust_range(fixed, p, fixed_mask) if p["normalize"] != "none" else None
    I1 = normalised(fixed, mem, p, rng=frange)
    if p["normalize"] == "histogram" and not metric_class(p["metric"]).multimodal:
        Mn = normalised(histogram_matched(moving, fixed, moving_mask, fixed_mask), mem, p, rng=frange)
    else:
        Mn = normalised(moving, mem, p, moving_mask)
    if p["fixed_blur"] > 0:
        ca.GaussianBlur(I1, I1, ca.Vec3Df(*fixed_blur_sigma(fixed.grid(), moving.grid(), float(p["fixed_blur"]))))
    return I1, Mn
