"""The mutual information's Parzen joint histogram evaluated densely in NumPy (every voxel against every bin,
the cubic B-spline in float64): the independent reference of tests/python/test_ops_mi.py and
test_syn_mi.py (docs/operations/similarity.md, 'Mutual information')."""
import numpy as np


def bspline3(u):
    a = np.abs(u)
    return np.where(a < 1, 2 / 3 - a**2 + a**3 / 2, np.where(a < 2, (2 - a) ** 3 / 6, 0.0))


SUB, FRAC = 4, 256  # knots per bin; steps of a voxel's position between two knots


def position(v, lo, hi, n, exact=False):
    """The knot cell u and the place f in [0, 1] within it of intensities v on n bins over [lo, hi]: the
    bin coordinate t = 1 + (clamp(v) - lo) / (hi - lo) (n - 3) on knots 1/SUB of a bin apart, rounded to
    1/FRAC of a knot spacing in float32 as the op does (NaN: lo); exact: not rounded (float64), for finite
    differences."""
    nf = (n - 3) * SUB + 1
    if exact:
        s = (np.clip(np.asarray(v, np.float64).ravel(), lo, hi) - lo) / (hi - lo) * (SUB * (n - 3))
        u = np.minimum(np.floor(s), nf - 2)
        return u, s - u
    v = np.asarray(v, np.float32).ravel()
    f32 = np.float32
    x = np.where(v > f32(lo), np.where(v < f32(hi), v, f32(hi)), f32(lo)).astype(np.float32)
    steps = f32(FRAC * SUB * (n - 3) / (np.float64(f32(hi)) - np.float64(f32(lo))))
    R = ((x - f32(lo)) * steps + f32(0.5)).astype(np.int64)
    u = np.minimum(R // FRAC, nf - 2)
    return u.astype(np.float64), np.minimum(R - FRAC * u, FRAC) / FRAC


def mask_steps(w, n):
    """The mask weights clamped to [0, 1] (NaN: 0) in 1/FRAC, rounded as the op does (float32)."""
    if w is None:
        return np.full(n, FRAC, np.int64)
    w = np.asarray(w, np.float32).ravel()
    r = (w * np.float32(FRAC) + np.float32(0.5)).astype(np.int64)
    return np.where(w > 0, np.where(w < 1, r, FRAC), 0)


def hist_ref(I, J, nI, nJ, rI, rJ, w=None, exact=None):
    """The Parzen joint histogram, dense (every voxel against every bin): the window of a voxel at knot
    coordinate u + f is (1 - f) beta3(t_u - a) + f beta3(t_u + 1/SUB - a) (t_u = 1 + u / SUB: the cubic
    B-spline interpolated linearly between knots), its bilinear weights in 1/FRAC^2 times the mask's
    steps / FRAC rounded (halves up) as the op rounds them. exact = (image, k): the position of voxel k
    (a flat index) of image 0 (I) or 1 (J) not rounded, its weight not either (for finite differences);
    exact = "all": no position rounded (no mask)."""
    if exact == "all":
        uI, fI = position(I, *rI, nI, True)
        uJ, fJ = position(J, *rJ, nJ, True)
        w, exact = None, None
        rounded = False
    else:
        uI, fI = position(I, *rI, nI)
        uJ, fJ = position(J, *rJ, nJ)
        rounded = True
    if exact is not None:
        which, k = exact
        X, (lo, hi), n, (u, f) = ((I, rI, nI, (uI, fI)), (J, rJ, nJ, (uJ, fJ)))[which]
        u[k], f[k] = (x[0] for x in position(np.asarray(X, np.float64).ravel()[k:k + 1], lo, hi, n, True))
    mq = mask_steps(w, uI.size)
    H = np.zeros((nI, nJ))
    for dI, wI in ((0, 1 - fI), (1, fI)):
        for dJ, wJ in ((0, 1 - fJ), (1, fJ)):
            p = wI * wJ * FRAC * FRAC
            q = np.floor((mq * np.rint(p) + FRAC // 2) / FRAC) if rounded else p
            if exact is not None:
                q[exact[1]] = p[exact[1]] * mq[exact[1]] / FRAC
            BI = bspline3(1 + (uI + dI)[:, None] / SUB - np.arange(nI)[None, :])
            BJ = bspline3(1 + (uJ + dJ)[:, None] / SUB - np.arange(nJ)[None, :])
            H += (BI * (q / (FRAC * FRAC))[:, None]).T @ BJ
    return H


def mi_ref(I, J, bins, rI, rJ, w=None, exact=None):
    H = hist_ref(I, J, bins, bins, rI, rJ, w, exact)
    p = H / H.sum()
    pI, pJ = p.sum(1, keepdims=True), p.sum(0, keepdims=True)
    nz = p > 0
    return float(np.sum(p[nz] * np.log(p[nz] / (pI * pJ)[nz])))


def near_knot(v, lo, hi, n, h):
    """Whether v lies within 2 h of a knot (where the window's derivative jumps) or of the range's ends."""
    s = (float(v) - lo) / (hi - lo) * (SUB * (n - 3))
    d = 2 * h / (hi - lo) * (SUB * (n - 3))
    return abs(s - round(s)) < d or not (lo + 2 * h < float(v) < hi - 2 * h)
