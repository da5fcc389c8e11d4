"""Did a registration fail? Checks of a finished registration that users would otherwise find only by
looking (docs/lddmm.md, 'A run that knows when it failed'):

- ``folds``: det D phiinv <= 0 somewhere (the map is not invertible there);
- ``collapse``: a tissue-like structure squeezed to (almost) nothing or blown up: det D phiinv below
  COLLAPSE_DET (or above its inverse) over more than COLLAPSE_FRACTION of the fixed image's foreground;
- ``worse_than_linear``: the match term's energy at the end is higher than after the linear stage, by
  more than WORSE_TOL[metric] of it (the deformable stage made the match worse; what an honest run of an
  already aligned pair may add is no failure: see WORSE_TOL);
- ``contrast``: a single-modality match term (ssd, lncc) was asked for images whose joint histogram
  says that their contrasts differ (T1 onto T2 or FLAIR): intensities that do not rise together over
  the foreground (contrast_agreement: eta2 above 0.1 and a falling line, or a line that explains less
  than half of what any function does). pyca lddmm judges the inputs as given and after a rigid mi
  probe, where they agree best (better_aligned: the higher eta2). The suggestion is ``--metric mi``
  (from pyca lddmm: ``pyca register --metric mi``, the symmetric method, MULTIMODAL_ADVICE).

Each check is a small function of pyca arrays; :func:`assess` gathers them into the dict that
summary.json holds under "quality". The CLI prints its one-line message on stderr and exits with
EXIT_FAILED_REGISTRATION unless ``--allow-folds``.
"""
from __future__ import annotations

import numpy as np

from .. import core as ca
from .metrics import CLASSES

__all__ = ["contrast_agreement", "better_aligned", "jacobian_problems", "assess", "message", "verdict",
           "EXIT_FAILED_REGISTRATION", "MULTIMODAL_ADVICE", "COLLAPSE_DET", "COLLAPSE_FRACTION", "WORSE_TOL",
           "SINGLE_MODALITY"]

# The CLI's exit status for a registration that ran to the end but failed a check (outputs written).
EXIT_FAILED_REGISTRATION = 3
# What pyca lddmm's single-contrast runs on images of different contrasts are told to use: the symmetric
# method with mutual information, more accurate than pyca lddmm --metric mi on the real pairs
# (docs/performance.md, 'The symmetric method with mi').
MULTIMODAL_ADVICE = ("pyca register --metric mi (the symmetric method, more accurate on different contrasts) or "
                     "--metric mi")
COLLAPSE_DET = 0.05
COLLAPSE_FRACTION = 0.005
# The relative rise of the match energy over the linear stage's that counts as worse, per metric.
# Measured on honest runs of pairs already aligned (benchmarks/lab/quality_tol.py; docs/lddmm.md, 'A run
# that knows when it failed'): an image onto itself ends equal (a rounding: 8e-9 with syn mi) or lower, two
# noisy copies, and block means half a voxel apart, lower (-0.7% to -47%), for every method and metric.
# Only ssd rises: two exact samplings of one image half a voxel apart, where the interpolation's blur
# is all that differs, end +4.2% (+7.5% with --affine none) with pyca lddmm, a map 0.04 voxel from the
# truth (the solver matches the images with that blur removed, the check reads the raw SSD). A result
# genuinely worse, the moving image 0.5 voxel off (a smooth random displacement, MNI 4 mm), reads
# ssd +40%, lncc +37% (lddmm's; syn's +2.4%, 1 voxel +59%), mi +1.9% (0.25 voxel: +0.3%).
WORSE_TOL = {"ssd": 0.1, "lncc": 0.01, "mi": 1e-3}
SINGLE_MODALITY = tuple(name for name, cls in CLASSES.items() if not cls.multimodal)  # ("ssd", "lncc")
_BINS = 32


def contrast_agreement(I, J, mask=None):
    """How the intensities of two aligned images relate over the foreground (voxels where both are
    above 10% of their range, times `mask`), from their joint histogram (ca.JointHistogram, 32 bins):
    eta2, the share of J's variance that any function of I explains (the correlation ratio); r2 and
    slope of the best straight line J ~ I. Images of one contrast have a rising line that explains
    about as much as any function (r2 close to eta2); different contrasts (T1 / T2, T1 / FLAIR) have
    a falling line, or one far worse than the best function. Returns a dict with `different`."""
    g, mem = J.grid(), J.memType()
    (ilo, ihi), (jlo, jhi) = (float(x) for x in ca.MinMax(I)), (float(x) for x in ca.MinMax(J))
    if not (ihi > ilo and jhi > jlo):
        return {"eta2": 0.0, "r2": 0.0, "slope": 0.0, "different": False}
    fg, tmp = ca.Image3D(g, mem), ca.Image3D(g, mem)
    ca.GTC(fg, I, ilo + 0.1 * (ihi - ilo))
    ca.GTC(tmp, J, jlo + 0.1 * (jhi - jlo))
    ca.Mul_I(fg, tmp)
    if mask is not None:
        ca.Mul_I(fg, mask)
    h = ca.Image3D(ca.GridInfo(ca.Vec3Di(_BINS, _BINS, 1)), mem)
    ca.JointHistogram(h, I, J, fg, ilo, ihi, jlo, jhi)
    H = np.asarray(h.numpy(), np.float64)[:, :, 0]
    n = H.sum()
    if n <= 0:
        return {"eta2": 0.0, "r2": 0.0, "slope": 0.0, "different": False}
    # bin centres (the Parzen coordinates t = 1 .. bins - 2 span the range)
    x = ilo + (np.arange(_BINS) - 1) / (_BINS - 3) * (ihi - ilo)
    y = jlo + (np.arange(_BINS) - 1) / (_BINS - 3) * (jhi - jlo)
    pa, pb = H.sum(1) / n, H.sum(0) / n
    mx, my = pa @ x, pb @ y
    vy = pb @ (y - my) ** 2
    vx = pa @ (x - mx) ** 2
    cxy = ((x - mx)[:, None] * (y - my)[None, :] * H).sum() / n
    with np.errstate(invalid="ignore", divide="ignore"):
        cond = np.where(H.sum(1) > 0, (H * y[None, :]).sum(1) / H.sum(1), my)
    eta2 = float(pa @ (cond - my) ** 2 / vy) if vy > 0 else 0.0
    r2 = float(cxy**2 / (vx * vy)) if vx > 0 and vy > 0 else 0.0
    slope = float(cxy / vx) if vx > 0 else 0.0
    different = bool(eta2 > 0.1 and (slope <= 0 or r2 < 0.5 * eta2))
    return {"eta2": eta2, "r2": r2, "slope": slope, "different": different}


def better_aligned(**contrasts):
    """The contrast_agreement() of the alignment, among `contrasts` (name -> its dict), where the images
    agree best: the highest eta2 (the correlation ratio is itself a measure of alignment across
    contrasts: a misaligned pair mixes tissues in each bin and explains less). Its name is added as
    "judged_on". pyca lddmm judges ssd and lncc runs on the inputs as given and after a rigid mi
    probe: a probe that fails (6 mm: 8 x 9 x 8 voxels at 1/4) must not hide a T2 pair whose inputs
    already say so (eta2 0.23 with a falling line as given, 0.079 after the probe), nor a pair given
    far apart be judged where its tissues are mixed (docs/lddmm.md, 'A run that knows when it failed')."""
    name, c = max(contrasts.items(), key=lambda kv: kv[1]["eta2"])
    out = dict(c, judged_on=name)
    for other, d in contrasts.items():  # every alignment's numbers, for summary.json
        out.update({f"{other}_{k}": v for k, v in d.items() if k != "different"})
    return out


def jacobian_problems(jac, foreground=None):
    """(fraction of voxels with det <= 0, fraction of the foreground with det < COLLAPSE_DET or
    > 1 / COLLAPSE_DET, det min, det max) of det D phiinv `jac` (foreground: an optional 0/1 image)."""
    g, mem = jac.grid(), jac.memType()
    lo, hi = (float(x) for x in ca.MinMax(jac))
    t = ca.Image3D(g, mem)
    ca.LTEC(t, jac, 0.0)
    folds = float(ca.Sum(t)) / g.nVox()
    bad, t2 = ca.Image3D(g, mem), ca.Image3D(g, mem)
    ca.LTC(bad, jac, COLLAPSE_DET)
    ca.GTC(t2, jac, 1.0 / COLLAPSE_DET)
    ca.Add_I(bad, t2)
    if foreground is not None:
        ca.Mul_I(bad, foreground)
        total = float(ca.Sum(foreground))
    else:
        total = float(g.nVox())
    squeezed = float(ca.Sum(bad)) / total if total > 0 else 0.0
    return folds, squeezed, lo, hi


def assess(metric, jac, foreground=None, linear_energy=None, final_energy=None, contrast=None, advice="--metric mi"):
    """The quality dict of a registration: ok, problems (each {code, message}), and the numbers
    checked. metric: the match term's name; jac: det D phiinv (Image3D); foreground: 0/1 image of the
    fixed image's foreground (None: every voxel); linear_energy / final_energy: the match term's energy
    after the linear stage and at the end, on the same grid and images; contrast: contrast_agreement()
    of the aligned images (pyca lddmm: better_aligned() of the inputs as given and after a rigid mi
    probe); advice: what a single-contrast run on different contrasts is told to use (the calling
    program's best command for them: MULTIMODAL_ADVICE for pyca lddmm)."""
    folds, squeezed, lo, hi = jacobian_problems(jac, foreground)
    problems = []
    if folds > 0:
        problems.append({"code": "folds", "message": f"the map folds (det D phiinv <= 0 at {100 * folds:.3g}% of "
                                                     f"the voxels, min {lo:.3g})"})
    if squeezed > COLLAPSE_FRACTION:
        problems.append({"code": "collapse", "message": f"structures collapse (det D phiinv below {COLLAPSE_DET:g} "
                                                        f"or above {1 / COLLAPSE_DET:g} over {100 * squeezed:.3g}% "
                                                        f"of the foreground)"})
    tol = WORSE_TOL.get(str(metric).lower(), min(WORSE_TOL.values()))
    if linear_energy is not None and final_energy is not None and (
            final_energy - linear_energy > tol * abs(linear_energy)):
        problems.append({"code": "worse_than_linear",
                         "message": f"the match is worse than after the linear stage ({metric} energy "
                                    f"{final_energy:.6g} > {linear_energy:.6g} by more than {100 * tol:g}%)"})
    if contrast is not None and contrast["different"] and str(metric).lower() in SINGLE_MODALITY:
        problems.append({"code": "contrast",
                         "message": f"the images have different contrasts (joint histogram: a straight line "
                                    f"explains {contrast['r2']:.2f} of the fixed intensities' variance, slope "
                                    f"{contrast['slope']:.2g}, any function {contrast['eta2']:.2f}) but --metric "
                                    f"{metric} compares one contrast: use {advice}"})
    elif problems and str(metric).lower() in SINGLE_MODALITY and any(p["code"] == "collapse" for p in problems):
        problems[-1]["message"] += f"; for images of different contrasts use {advice}"
    return {"ok": not problems, "problems": problems, "jacobian_min": lo, "jacobian_max": hi,
            "nonpositive_fraction": folds, "collapsed_fraction": squeezed, "linear_match_energy": linear_energy,
            "final_match_energy": final_energy, "contrast": contrast}


def message(quality):
    """One line naming every problem (empty when ok)."""
    return "; ".join(p["message"] for p in quality.get("problems", []))


def verdict(res, allow_folds, prog, out):
    """A command's exit status for the registration result `res`: 0, or EXIT_FAILED_REGISTRATION after
    one line on stderr ("PROG: registration failed: ...") when it failed its checks (0 with allow_folds,
    the line still printed). A result without `quality` (a method that does not assess itself) is
    judged by its Jacobian (folds, collapse), and the assessment is stored on it."""
    import sys

    q = getattr(res, "quality", None)
    if q is None:
        q = assess(res.params.get("metric", "?"), res.jacobian)
        res.quality = q
    if q["ok"]:
        return 0
    accepted = "accepted by --allow-folds" if allow_folds else "--allow-folds accepts it"
    print(f"{prog}: registration failed: {message(q)} (outputs in {out}; {accepted})", file=sys.stderr, flush=True)
    return 0 if allow_folds else EXIT_FAILED_REGISTRATION
