"""Symmetric diffeomorphic registration (greedy SyN, Avants et al. 2008), built from pyca operations.

    from pyca.apps import syn
    res = syn.register(fixed, moving, moving_labels=labels, device="auto")
    res.deformed, res.phiinv, res.phi, res.jacobian, res.labels, res.inverse_consistency

Both images are deformed towards a midpoint: two maps A (midpoint -> fixed) and B (midpoint ->
moving, the moving image already on the fixed grid through the linear stage), H-fields in voxels of
the fixed grid, start at the identity. Each iteration

    F~ = F o A,  M~ = M o B                        (the two images at the midpoint; at the finest scale M
                                                   is the moving image on its own grid, sampled once through
                                                   the linear stage after B, and with interp_blur 'matched'
                                                   the bias trilinear interpolation gives each is removed)
    gF = dS/dF~ grad F~,  gM = dS/dM~ grad M~     (metric lncc: S = sum of the local normalised cross-
                                                   correlation, both forces from one set of window sums,
                                                   _LNCC; mi: S = the mutual information of F~ and M~,
                                                   both forces from one histogram by the MI op's exact
                                                   derivatives, _MI)
    uF = G_s * gF,  uM = G_s * gM                  (Gaussian of `smooth_update` voxels)
    Adam-like steps of about `step` voxels (optimiser; 'greedy': the largest force moves `step`)
    u += det_stiffness grad(excess of log det A over +-max_log_det)   (each map's volume change held back)
    A <- A o (id + uF),  B <- B o (id + uM)        (composition: compose)
    A, B smoothed by `smooth_field` voxels (their displacement; 0: not)
every map is extended beyond the grid by the displacement at the grid's border, in every composition,
as in the smoothing, the gradients and the resampling between scales (compose)
at the end of each scale, A^-1 and B^-1 by Newton's iteration (newton_inverse, warm-started from the
coarser scale's; PyCA's fixed-point iteration diverges where a map stretches more than twofold)

treats both images alike (swap them and A and B swap). The map from fixed to moving voxels is
phiinv = B o A^-1, its inverse phi = A o B^-1; the moving image is sampled once, through the linear
stage after phiinv. Coarse to fine (scales): the displacements (world units) are carried up by
Resample. A scale stops at its iteration cap or when S has gained less than tol of the scale's gain
over the last 5 iterations. Every operation routes by memory type: the same code runs on the CPU
(the reference) and on the GPU. docs/syn.md.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import core as ca
from . import affine, lddmm
from ._device import wait
from ..registration import inputs, intensities, metrics, parameters, quality
from ..registration.inputs import LabelImage
from ..registration.interpolation import InterpTarget
from ..registration.transforms import jacobian_det, level_images

__all__ = ["register", "SyNResult", "DEFAULTS", "check", "intensity_range", "inverse_consistency", "newton_inverse",
           "compose", "add_parser"]

DEFAULTS = dict(parameters.SYN_DEFAULTS)  # each parameter declared once: pyca.registration.parameters.SYN_DECLARED


def add_parser(sub):
    """`pyca register` (its parser and body: _register_cli.py)."""
    from ._register_cli import add_parser as add

    return add(sub)


def check(p, given=(), options=False):
    """Refuses a bad parameter of the dict p (every one of DEFAULTS present) in one line, and one of
    `given` (set explicitly) that the run would not use (parameters.check_applies)."""
    parameters.schedule(p["scales"], p["iterations"], prog="syn")
    parameters.check_declared(p, parameters.SYN_DECLARED, "syn", given, options)
    p["metric"] = str(p["metric"]).lower()


def intensity_range(im, p, mask=None):
    """(lo, hi) that normalize maps onto [0, 1]: 'foreground': the image's minimum and the upper
    percentile (p['percentiles'][1]) of its voxels above 1% of its range (inside mask when given), so
    that the share of background in the field of view does not move it; 'percentiles': both percentiles
    over all voxels (or the mask)."""
    a = im.numpy().ravel(order="K")
    if mask is not None:
        a = a[mask.numpy().ravel(order="K") > 0]
    lo_p, hi_p = p["percentiles"]
    if p["normalize"] == "percentiles" or mask is not None:
        lo, hi = np.percentile(a, [lo_p, hi_p])
    else:
        lo = float(a.min())
        fg = a[a > lo + 0.01 * (float(a.max()) - lo)]
        hi = np.percentile(fg if fg.size else a, hi_p)
    return (float(lo), float(hi)) if hi > lo else (float(a.min()), float(a.max()))


def _sigma(g, vox):
    """World sigma per axis for `vox` voxels (0 on an axis of size 1)."""
    return ca.Vec3Df(*(float(vox * s) if n > 1 else 0.0 for s, n in zip(tuple(g.spacing()), tuple(g.size()))))


class _Side:
    """One image and its map from the midpoint (H-field), the map's inverse, and scratch."""

    def __init__(self, g, mem, image):
        self.g, self.mem, self.I = g, mem, image
        self.H, self.Hinv = ca.Field3D(g, mem), ca.Field3D(g, mem)
        ca.SetToIdentity(self.H)
        ca.SetToIdentity(self.Hinv)
        self.W, self.dS = ca.Image3D(g, mem), ca.Image3D(g, mem)
        self.u, self.tmp = ca.Field3D(g, mem), ca.Field3D(g, mem)
        self.m, self.v = None, None  # Adam's moments (allocated at its first step)
        self.t = 0
        self.source = None  # (image on its own grid, linear stage, scratch field): sample_once()
        self.curv = None  # with interp_blur 'matched': the sampled image's half second differences (Field3D)

    def sample_once(self, image, aff):
        """W = image o aff o H from now on: the image on its own grid sampled once, through the linear
        stage after this side's map (as the outputs are), instead of the linear stage's resampled copy
        self.I o H: two interpolations, whose blur the other side's image does not have."""
        self.source = (image, aff, ca.Field3D(self.g, self.mem))

    def match_interp_blur(self):
        """From now on warp() removes the bias trilinear interpolation gives W (its blur, of variance
        t (1 - t) voxels^2 along an axis at fraction t, docs/lddmm.md 'Interpolation blur'): W then
        compares the images as if sampled exactly, so neither side's varying blur is taken for anatomy.
        One pass: ca.ApplyHUnblurred with the half second differences of the sampled image
        (InterpTarget's), at this side's map (through the linear stage for a source on its own grid)."""
        zero = ca.Image3D(self.g, self.mem)
        ca.SetMem(zero, 0.0)
        src = (self.I,) if self.source is None else (self.source[0], self.source[1].voxel_matrix())
        self.curv = InterpTarget(self.g, self.mem, zero, *src).curvature_field()

    def warp(self):
        if self.source is None:
            image, points = self.I, self.H
        else:
            image, aff, points = self.source
            aff.hfield(self.mem, src=self.H, out=points)
        if self.curv is not None:
            ca.ApplyHUnblurred(self.W, image, self.curv, points)
        elif self.source is None:
            ca.ApplyH(self.W, image, points)
        else:
            inputs.on_fixed(self.g, image, points, out=self.W)

    def force(self, sig):
        """u = G * (dS/dW grad W), world units (unscaled); returns its largest component in voxels."""
        ca.Gradient(self.u, self.W)
        ca.Mul_I(self.u, self.dS)
        ca.GaussianBlur(self.u, self.u, sig)
        return float(ca.LInf(self.u)) / min(x for x, n in zip(tuple(self.g.spacing()), tuple(self.g.size())) if n > 1)

    def adam(self, lr, b1, b2, eps):
        """u <- Adam's direction from the force u: m = b1 m + (1 - b1) u, v = b2 v + (1 - b2) |u|^2 (one
        second moment per voxel: the step keeps the force's direction), u = m^ / (sqrt(v^) + eps) with
        the bias corrections ^; returns the delta for step() that makes a unit of u `lr` voxels."""
        if self.m is None:
            self.m, self.v = ca.Field3D(self.g, self.mem), ca.Image3D(self.g, self.mem)
            ca.SetMem(self.m, 0.0)
            ca.SetMem(self.v, 0.0)
        self.t += 1
        ca.MulC_Add_MulC_I(self.m, b1, self.u, 1.0 - b1)
        ca.SqrMagnitude(self.W, self.u)  # (W is free until the next warp())
        ca.MulC_Add_MulC_I(self.v, b2, self.W, 1.0 - b2)
        ca.MulC(self.W, self.v, 1.0 / (1.0 - b2 ** self.t))
        ca.Sqrt_I(self.W)
        ca.AddC_I(self.W, eps)
        ca.Inv_I(self.W)
        ca.Mul(self.u, self.m, self.W)
        sp = min(x for x, n in zip(tuple(self.g.spacing()), tuple(self.g.size())) if n > 1)
        return lr * sp / (1.0 - b1 ** self.t)

    def restore(self, scale, bound, stiffness, sig):
        """u += (stiffness h^2 / scale) grad phi'(s), s = log det DH, phi'(s) = s - clamp(s, -bound, bound):
        a descent step of sum phi(s) (phi: the squared excess of |log det| over bound / 2), which
        spreads a region compressed beyond e^-bound and gathers one expanded beyond e^bound, by about
        `stiffness` voxels per unit of excess gradient per iteration (W: scratch after adam())."""
        s, t = self.W, self.dS
        jacobian_det(s, self.H)
        ca.MaxC_I(s, 1e-6)
        ca.Log_I(s)
        ca.Clamp(t, s, -bound, bound)
        ca.Sub_I(s, t)
        ca.GaussianBlur(s, s, sig)
        ca.Gradient(self.tmp, s)
        h = min(x for x, n in zip(tuple(self.g.spacing()), tuple(self.g.size())) if n > 1)
        ca.Add_MulC_I(self.u, self.tmp, stiffness * h * h / scale)

    def step(self, scale, field_sig):
        """H <- H o (id + scale u), H extended beyond the grid by its border displacement (LDDMMComposeStep,
        the rule of compose); then its displacement smoothed by field_sig."""
        ca.LDDMMComposeStep(self.tmp, self.H, self.u, float(scale))
        self.H, self.tmp = self.tmp, self.H
        if field_sig is not None:  # smooth the displacement
            ca.HtoV_I(self.H)
            ca.GaussianBlur(self.H, self.H, field_sig)
            ca.VtoH_I(self.H)

    def invert(self, n, newton=True):
        """Hinv <- H^-1 by n iterations from the current Hinv (the coarser scale's)."""
        if not newton:
            ca.FixedPointInverse(self.Hinv, self.H, n)
            return
        newton_inverse(self.Hinv, self.H, n, self.u, self.tmp, self.W)

    def carried_to(self, g, image):
        """A side on the finer grid g with this side's maps (displacements in world units, resampled)."""
        s = _Side(g, self.mem, image)
        for src, dst in ((self.H, s.H), (self.Hinv, s.Hinv)):
            v = src.clone()
            ca.HtoV_I(v)
            ca.Resample(dst, v, ca.BACKGROUND_STRATEGY_CLAMP, False, ca.INTERP_LINEAR)
            ca.VtoH_I(dst)
        return s


def newton_inverse(y, h, n, e, d, m, largest=1.0):
    """y <- h^-1 by n Newton steps from the estimate y: y <- y + (Dy) (x - h(y)), Dy standing for
    (Dh(y))^-1, each voxel's step at most `largest` voxels (e, d: scratch fields, m: a scratch image
    of h's grid)."""
    for _ in range(n):
        compose(e, h, y)  # h(y(x)), h extended beyond the grid by its border displacement
        ca.HtoV_I(e)  # (h(y) - x) spacing: minus the residual, world units
        ca.JacobianXY(d, y, e)  # (Dy)(h(y) - x) in voxels of y
        ca.Magnitude(m, d)
        ca.MaxC_I(m, largest)
        ca.Inv_I(m)
        ca.MulC_I(m, largest)  # min(1, largest / |d|)
        ca.Mul_I(d, m)
        ca.Sub_I(y, d)


def compose(out, f, g):
    """out = f o g (H-fields), f extended beyond its grid by the displacement at the grid's border
    (ca.ComposeHHBorder: the rule of every composition of syn's maps and of pyca lddmm's, written once,
    math::sampleMapBorder). The Gaussian smoothing, the gradients and the resampling between scales
    extend fields the same way; extended by the identity instead (ComposeHH's PARTIAL_ID), a map whose
    border moves by more than a voxel has a jump just outside the grid, and the inverse of a map that
    does not cover the grid's edge (the registration of an image whose anatomy ends inside the field of
    view with one that runs through it) lands there and folds."""
    ca.ComposeHHBorder(out, f, g)
    return out


class _LNCC:
    """Local normalised cross-correlation of two images in windows of 2 r + 1 voxels (truncated at the
    grid's border), and both images' forces from one set of window sums (five BoxSum): with the window
    means mI, mJ, variances vI, vJ and covariance c at x, D = vI vJ + eps, cc = (c^2 + eps) / D (as ca.LNCC:
    1 exactly for two equal windows, flat ones included, with a zero force) and

        dS/dI(x) ~ (2 / D) (c (J - mJ) - cc vJ (I - mI)),   dS/dJ(x) ~ the same with I, J swapped

    (eps: syn's lncc_eps, parameters.SYN_DECLARED; ca.LNCC's default is 1e-5. The derivative of x's own
    window term through I(x), the window's means held fixed: the symmetric gradient ANTs' SyN uses; ca.LNCC
    computes the exact one, for one image, at about three times the cost). w (a 0/1 mask) weights the sum
    S = sum w cc. Where I and J are the same bits, c, vI and vJ are the same numbers, so cc is exactly 1
    and both forces exactly 0: an image registered onto itself does not move."""

    def __init__(self, g, mem, r, mask=None, eps=1e-5):
        self.r = ca.Vec3Di(r, r, r if g.size().z > 1 else 0)
        self.mask, self.eps = mask, eps
        im = lambda: ca.Image3D(g, mem)  # noqa: E731
        self.n, self.mI, self.mJ, self.vI, self.vJ, self.c, self.t, self.cc = (im() for _ in range(8))
        ca.SetMem(self.t, 1.0)
        ca.BoxSum(self.n, self.t, self.r)
        ca.Inv_I(self.n)  # 1 / the window's voxel count

    def window_stats(self, I, J):
        """mI, mJ, vI, vJ, c <- the window means, variances and covariance of I and J (t: scratch)."""
        b, n = self.r, self.n
        ca.BoxSum(self.mI, I, b)
        ca.Mul_I(self.mI, n)
        ca.BoxSum(self.mJ, J, b)
        ca.Mul_I(self.mJ, n)
        for out, x, y, m1, m2 in ((self.vI, I, I, self.mI, self.mI), (self.vJ, J, J, self.mJ, self.mJ),
                                  (self.c, I, J, self.mI, self.mJ)):
            ca.Mul(self.t, x, y)
            ca.BoxSum(out, self.t, b)
            ca.Mul_I(out, n)
            ca.Mul(self.t, m1, m2)
            ca.Sub_I(out, self.t)

    def __call__(self, gI, gJ, I, J):
        eps = self.eps
        self.window_stats(I, J)
        # t = 2 / D (D = vI vJ + eps), cc = (c^2 + eps) / D; S = sum w cc
        ca.Mul(self.t, self.vI, self.vJ)
        ca.AddC_I(self.t, eps)
        ca.Mul(self.cc, self.c, self.c)
        ca.AddC_I(self.cc, eps)
        ca.Div_I(self.cc, self.t)
        ca.Inv_I(self.t)
        ca.MulC_I(self.t, 2.0)
        S = float(ca.Dot(self.cc, self.mask)) if self.mask is not None else float(ca.Sum(self.cc))
        # gI = t (c (J - mJ) - cc vJ (I - mI)), gJ = t (c (I - mI) - cc vI (J - mJ)) (times w)
        ca.Sub(self.mI, I, self.mI)
        ca.Sub(self.mJ, J, self.mJ)
        for out, v, own, other in ((gI, self.vJ, self.mI, self.mJ), (gJ, self.vI, self.mJ, self.mI)):
            ca.Mul(out, self.cc, v)
            ca.Mul_I(out, own)
            ca.Mul(v, self.c, other)  # v is not needed after this side's force
            ca.Sub(out, v, out)
            ca.Mul_I(out, self.t)
            if self.mask is not None:
                ca.Mul_I(out, self.mask)
        return S


class _MI:
    """The mutual information S = MI(I, J) of the two images at the midpoint and both images' forces, each
    the exact derivative of S with respect to that image, from one joint histogram:
    ca.MutualInformationGradients(gI, gJ, I, J) (gI: dMI/dI, gJ: dMI/dJ). The op's joint histogram is a
    Parzen-windowed one accumulated in integers and each gradient a per-voxel lookup of one table
    (docs/operations/similarity.md, 'Mutual information'): the same bits on a rerun, for any number of
    threads, on the CPU and the GPU. w (a 0/1 mask) weights each voxel's histogram entry and force.
    ranges: (lo, hi) of I and of J, fixed for the whole run, so that energies compare. normalized: Studholme's
    normalised MI instead (not a parameter: measured in benchmarks/lab/mi_lab.py, docs/performance.md)."""

    normalized = False

    def __init__(self, bins, ranges, mask=None):
        self.bins, (self.rI, self.rJ), self.mask = int(bins), ranges, mask

    def __call__(self, gI, gJ, I, J):
        m = (self.mask,) if self.mask is not None else ()
        return float(ca.MutualInformationGradients(gI, gJ, I, J, *m, self.bins, *self.rI, *self.rJ,
                                                   bool(self.normalized)))


def _mi_ranges(I1, Mn):
    """(lo, hi) of the fixed and of the moving (normalised) image: the histogram's ranges of metric mi."""
    out = []
    for im in (I1, Mn):
        lo, hi = (float(x) for x in ca.MinMax(im))
        out.append((lo, hi) if hi > lo else (lo, lo + 1.0))
    return tuple(out)


def _optimise(F, M, p, mask, f, n_it, energies, pbar=None):
    """Greedy symmetric iterations of one scale on sides F, M; returns the scale's report. pbar: a progress
    bar (pyca._progress), advanced by each iteration and by the ones a stop leaves out."""
    g = F.g
    sig = _sigma(g, float(p["smooth_update"]))
    fsig = _sigma(g, float(p["smooth_field"])) if p["smooth_field"] > 0 else None
    rsig = _sigma(g, 2.0)
    if p["metric"] == "mi":  # energy: log(bins) - MI >= 0 (nats; MI is at most the entropy of bins bins)
        match, top_energy, nvox = _MI(p["bins"], p["_ranges"], mask), float(np.log(p["bins"])), 1.0
    else:  # energy: 1 - S / n, 0 where the images agree up to a local affine change of intensity
        match, top_energy = _LNCC(g, F.mem, int(p["radius"]), mask, float(p["lncc_eps"])), 1.0
        nvox = float(ca.Sum(mask)) if mask is not None else float(g.nVox())

    hist, stop, it, eps_ref = [], "iteration cap", -1, 0.0
    for it in range(n_it):
        F.warp()
        M.warp()
        e = top_energy - match(F.dS, M.dS, F.W, M.W) / nvox
        hist.append(e)
        energies.append({"scale": f, "iteration": it, "energy": e, "match": e, "reg": 0.0, "step": float(p["step"]),
                         "accepted": True})
        if pbar is not None:
            pbar.set_postfix_str(f"scale 1/{f} E={e:.4g}", refresh=False)
            pbar.update(1)
        if len(hist) > max(5, int(p["min_iterations"])) and (hist[-6] - hist[-1]) < 5 * float(p["tol"]) * (hist[0] - hist[-1]):
            stop = f"converged (the last 5 iterations gained < {5 * p['tol']:g} of the scale's gain)"
            break
        top = max(F.force(sig), M.force(sig))
        if not top > 0:
            stop = "zero gradient"
            break
        if p["optimiser"] == "adam":  # eps: 1e-3 of the largest force the scale has seen, so flat regions stay
            eps_ref = max(eps_ref, top * min(tuple(g.spacing())))
            for side in (F, M):
                scale = side.adam(float(p["step"]), 0.9, 0.99, float(p["adam_eps"]) * eps_ref)
                if p["max_log_det"] > 0:
                    side.restore(scale, float(p["max_log_det"]), float(p["det_stiffness"]), rsig)
                side.step(scale, fsig)
        else:
            scale = float(p["step"]) / top
            for side in (F, M):
                if p["max_log_det"] > 0:
                    side.restore(scale, float(p["max_log_det"]), float(p["det_stiffness"]), rsig)
                side.step(scale, fsig)
    if pbar is not None and it + 1 < n_it:  # a stop: the scale's iterations not run
        pbar.update(n_it - it - 1)
    F.invert(int(p["inverse_iterations"]), p["inverse"] == "newton")  # the inverses are not used by the iterations
    M.invert(int(p["inverse_iterations"]), p["inverse"] == "newton")
    return {"scale": f, "iterations": it + 1, "max_iterations": n_it, "stop": stop,
            "energy_start": hist[0] if hist else float("nan"), "energy_end": hist[-1] if hist else float("nan")}


def _quality(I1, I0, warped, mask, foreground, jac, p):
    """pyca.registration.quality.assess of the result: folds and collapse (det D phiinv over the fixed
    image's foreground), a match worse than the linear stage's (the LNCC energy 1 - S / n of the fixed
    image against the linearly aligned moving image I0, and against `warped`, the moving image sampled
    once through the linear stage after phiinv, as I0 is sampled once: at full resolution; metric mi:
    pyca.registration.metrics.MI's energy, the conditional entropy of the fixed image), and images
    of different contrasts (LNCC compares one)."""
    g, mem = I1.grid(), I1.memType()
    if p["metric"] == "mi":
        (rf, rm) = p["_ranges"]
        judge = metrics.MI(g, mem, 1.0, mask, p["bins"], fixed_range=rf, moving_range=rm)
        linear, final = judge.energy(I0, I1), judge.energy(warped, I1)
        return quality.assess("mi", jac, foreground, linear, final, quality.contrast_agreement(I0, I1, mask))
    lncc = _LNCC(g, mem, int(p["radius"]), mask, float(p["lncc_eps"]))
    n = float(ca.Sum(mask)) if mask is not None else float(g.nVox())
    a, b = ca.Image3D(g, mem), ca.Image3D(g, mem)
    linear = 1.0 - lncc(a, b, I1, I0) / n
    final = 1.0 - lncc(a, b, I1, warped) / n
    return quality.assess("lncc", jac, foreground, linear, final, quality.contrast_agreement(I0, I1, mask))


def inverse_consistency(phi, phiinv, mask=None):
    """(mean, 99th percentile) of |phi o phiinv - id| in voxels, over mask > 0 (all voxels without one)."""
    c = ca.Field3D(phiinv.grid(), phiinv.memType())
    compose(c, phi, phiinv)
    idf = ca.Field3D(phiinv.grid(), phiinv.memType())
    ca.SetToIdentity(idf)
    ca.Sub_I(c, idf)
    m = ca.Image3D(phiinv.grid(), phiinv.memType())
    ca.Magnitude(m, c)  # (on the device: only one image is copied to the host)
    d = m.numpy().ravel(order="K")
    if mask is not None:
        d = d[mask.numpy().ravel(order="K") > 0]
    return float(d.mean(dtype=np.float64)), float(np.percentile(d, 99))


@dataclass
class SyNResult(lddmm.LDDMMResult):
    """lddmm.LDDMMResult (the same outputs) and the inverse consistency of phi and phiinv."""

    inverse_consistency: tuple = (float("nan"), float("nan"))

    def summary(self):
        s = super().summary()
        s["method"] = "syn"
        s["inverse_consistency_voxels"] = {"mean": self.inverse_consistency[0], "p99": self.inverse_consistency[1]}
        return s


def register(fixed, moving, *, progress=False, **params):
    """Registers `moving` onto `fixed`: the linear stage of pyca lddmm, then greedy SyN; returns a
    SyNResult (the fields of lddmm.LDDMMResult, velocity empty). Parameters: DEFAULTS (docs/syn.md).
    progress: a progress bar of the iterations (pyca._progress: tqdm on a terminal, plain lines else)."""
    metric = str(params.get("metric", DEFAULTS["metric"])).lower()  # its own defaults where not given
    defaults = {**DEFAULTS, **parameters.SYN_METRIC_DEFAULTS.get(metric, {})}
    p = parameters.merged(defaults, params, "syn.register")
    given = parameters.explicit(params, defaults)  # a keyword the run would not use is refused
    t_start = time.perf_counter()
    names = p.pop("names", None) or {}
    fixed, moving = inputs.as_image(fixed, "fixed"), inputs.as_image(moving, "moving")
    extra = {k: (inputs.as_image(p[k], k) if p[k] is not None else None) for k in ("fixed_mask", "moving_mask")}
    extra["moving_labels"] = p["moving_labels"]  # read as integers (lddmm.placed_inputs)
    check(p, given)
    scales, iters = parameters.schedule(p["scales"], p["iterations"], prog="syn")
    p["scales"], p["iterations"] = tuple(scales), tuple(iters)
    mem, device = lddmm.resolve_device(p["device"])
    note = inputs.check_inputs(fixed, moving, names=names, **extra)
    extra = inputs.placed_inputs(fixed, moving, names, **extra)  # on their images' grids, each by its own affine
    grid = fixed.grid()
    # Both images alike: each scaled by its own range (intensity_range), clamped to [0, 1].
    lp = dict(normalize="none" if p["normalize"] == "none" else "percentiles")
    I1 = intensities.normalised(fixed, mem, lp, rng=intensity_range(fixed, p, extra["fixed_mask"]))
    Mn = intensities.normalised(moving, mem, lp, rng=intensity_range(moving, p, extra["moving_mask"]))
    fmask = inputs.binary(extra["fixed_mask"], mem)
    p["_ranges"] = _mi_ranges(I1, Mn)  # (the histogram's ranges of metric mi)
    kind = inputs.linear_kind(p["affine"], I1, Mn)
    # The linear stage: squared differences of the normalised images (one contrast); metric mi: MI
    aff = affine.register(I1, Mn, kind, metric="mi" if p["metric"] == "mi" else "ssd", mask=fmask,
                          scales=affine.STAGE_SCALES, iterations=affine.STAGE_ITERATIONS,
                          bins=p["bins"] if p["metric"] == "mi" else None)
    Haff = aff.hfield(mem)
    inputs.check_overlap(Haff, Mn.grid(), names)
    I0 = inputs.on_fixed(grid, Mn, Haff)
    mask = fmask
    if extra["moving_mask"] is not None:
        mm = inputs.on_fixed(grid, inputs.binary(extra["moving_mask"], mem), Haff, labels=True)
        mask = mm if mask is None else (ca.Mul_I(mm, mask) or mm)
    tmp = ca.Image3D(grid, mem)
    ca.Sub(tmp, I0, I1)
    linear_mismatch = ca.Sum2(tmp)
    before = inputs.on_fixed(grid, Mn, affine.identity(grid, Mn.grid()).hfield(mem))  # through world coordinates
    ca.Sub_I(before, I1)
    initial_mismatch = ca.Sum2(before)
    del before
    timings = {"setup_s": time.perf_counter() - t_start - aff.seconds, "affine_s": aff.seconds, "scales": []}
    energies = []
    F = M = None
    pbar = None
    if progress:
        from .._progress import progress_bar  # tqdm on a terminal, a few plain lines in a log file

        pbar = progress_bar(total=sum(iters), desc=f"syn [{device.split(' ')[0]}]")
    try:
        for f, n_it in zip(scales, iters):
            t0 = time.perf_counter()
            g, (J0, J1), mk = level_images(grid, f, (I0, I1), mask)
            if F is None:
                F, M = _Side(g, mem, J1), _Side(g, mem, J0)
            else:
                F, M = F.carried_to(g, J1), M.carried_to(g, J0)
            if f == 1:  # the moving image from its own grid; each image's interpolation blur removed
                M.sample_once(Mn, aff)
                if p["interp_blur"] == "matched":
                    F.match_interp_blur()
                    M.match_interp_blur()
            info = _optimise(F, M, p, mk, f, n_it, energies, pbar)
            wait(mem)
            info.update(grid=list(g.size()), seconds=time.perf_counter() - t0)
            timings["scales"].append(info)
    finally:
        if pbar is not None:
            pbar.close()

    t0 = time.perf_counter()
    phiinv, phi = ca.Field3D(grid, mem), ca.Field3D(grid, mem)
    compose(phiinv, M.H, F.Hinv)  # fixed -> midpoint -> moving (on the fixed grid)
    compose(phi, F.H, M.Hinv)
    full = aff.hfield(mem, src=phiinv)
    warped = inputs.on_fixed(grid, Mn, full)  # normalised, sampled once
    ca.Sub(tmp, warped, I1)
    final_mismatch = ca.Sum2(tmp)
    mv = moving.clone(mem) if moving.memType() != mem else moving
    deformed = inputs.on_fixed(grid, mv, full)
    moved = inputs.on_fixed(grid, mv, Haff)
    labels = None
    if extra["moving_labels"] is not None:  # indices into the label table, warped; values looked up (integers)
        idx, table = extra["moving_labels"].indices(mem)
        labels = LabelImage.from_indices(inputs.on_fixed(grid, idx, full, labels=True), table, "syn: labels")
    jac = ca.Image3D(grid, mem)
    jacobian_det(jac, phiinv)
    wait(mem)
    timings["outputs_s"] = time.perf_counter() - t0
    timings["registration_s"] = sum(s["seconds"] for s in timings["scales"]) + aff.seconds
    ic_mask = fmask
    if ic_mask is None:  # inside the head: the fixed image above 5% of its range
        ic_mask = ca.Image3D(grid, mem)
        ca.GTC(ic_mask, I1, 0.05 if p["normalize"] != "none" else 0.05 * float(ca.MinMax(I1)[1]))
    ic = inverse_consistency(phi, phiinv, ic_mask)
    qual = _quality(I1, I0, warped, mask, ic_mask, jac, p)
    del warped
    timings["total_s"] = time.perf_counter() - t_start
    p["device"] = str(p["device"])
    del p["_ranges"]
    for k in ("fixed_mask", "moving_mask", "moving_labels"):
        p[k] = names.get(k, "given") if p[k] is not None else None
    p["affine"] = f"{p['affine']} ({kind})" if p["affine"] == "auto" else p["affine"]
    p["method"] = "syn"
    return SyNResult(deformed=deformed, phiinv=phiinv, phi=phi, moving=moved, jacobian=jac, velocity=[],
                     energies=energies, initial_mismatch=float(initial_mismatch), final_mismatch=float(final_mismatch),
                     timings=timings, device=device, mem=mem, params=p, notes=[note], affine=aff, full_map=full,
                     labels=labels, linear_mismatch=float(linear_mismatch),
                     final_match=float(energies[-1]["match"]) if energies else float("nan"),
                     inverse_consistency=ic, quality=qual)
