"""LDDMM image registration: Beg et al.'s time-varying velocity algorithm, built from pyca operations.

    import pyca as ca
    from pyca.apps import lddmm, data
    fixed, moving = data.builtin_pair()
    res = lddmm.register(fixed, moving, device="auto", progress=True)
    res.deformed, res.phiinv, res.phi, res.jacobian, res.energies, res.timings, res.device

Finds velocity fields v_t (t in [0, 1], T piecewise-constant steps, world units) minimising

    E(v) = sum_j dt <L v_j, v_j> + (1 / sigma^2) || I0 o phi_{1,0} - I1 ||^2

(sums over voxels) with I0 the moving image, I1 the fixed one, L = ((-alpha Laplacian - beta grad div
+ gamma) / gamma)^lpow the fluid operator (ca.FluidKernelFFT; divided by gamma^lpow so that K = L^-1
has gain 1 at the zero frequency and sigma weighs the match against a regulariser of a fixed scale;
gamma = 0: not divided), by gradient descent in the V metric:

    v_j <- v_j - eps (2 v_j - K b_j),   b_j = (2 / sigma^2) |D phi_{t_j,1}| (J0_j - J1_j) grad J0_j

with J0_j = I0 o phi_{t_j,0}, J1_j = I1 o phi_{t_j,1} and K = L^-1. The flows are integrated
semi-Lagrangianly (LDDMMComposeStep: each map extended beyond the grid by its border displacement),
J0 / J1 by ApplyH, |D phi| by JacDetH (per world unit, as PyCA's, so times the voxel volume: 1 for
the identity), grad J0 by Gradient. A coarse-to-fine schedule runs the same algorithm on downsampled images
(ResampleAA) and carries the velocities up (Resample). Every operation routes by memory type, so
the same code runs on the CPU (MEM_HOST) and on the GPU (MEM_DEVICE). Algorithm and parameters:
docs/lddmm.md.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from .. import core as ca
from . import affine
from ._device import wait
from ._lddmm_outputs import make_report, write_outputs
from ..registration import intensities, optimisers, parameters
from ..registration import quality as _quality
from ..registration.inputs import (LabelImage, as_image, binary, check_inputs, check_overlap, linear_kind,
                                   on_fixed, placed_inputs)
from ..registration.metrics import SSD, make_metric, metric_class
from ..registration.parameters import INTERP_BLUR, NORMALIZE
from ..registration.transforms import cropped, extended, fft_grid, jacobian_det, level_images
from ._lddmm_solver import Level

__all__ = ["register", "LDDMMResult", "DEFAULTS", "NORMALIZE", "resolve_device", "check_inputs", "write_outputs",
           "make_report"]

# Defaults: pyca.registration.parameters declares each parameter (and docs/lddmm.md explains each,
# and the measurements that chose them: 'T1 brain MRI'). INTERP_BLUR and NORMALIZE are importable from
# here too.
DEFAULTS = parameters.DEFAULTS
# The intensity preparation is pyca.registration.intensities'; the names it had here (the tests use them).
_normalised, _histogram_matched = intensities.normalised, intensities.histogram_matched
_gain_corrected, _fixed_blur_sigma = intensities.gain_corrected, intensities.fixed_blur_sigma



# ------------------------------------------------------------------------------------------------
# Inputs, device and parameters
def resolve_device(device):
    """'auto' | 'cpu' | 'gpu' (or a MemoryType) -> (memory type, description)."""
    if isinstance(device, str):
        d = device.lower()
        if d not in ("auto", "cpu", "gpu", "cuda"):
            raise ValueError(f"lddmm: device must be 'auto', 'cpu' or 'gpu', not {device!r}")
        if d == "auto":
            mem = ca.MEM_DEVICE if ca.cuda_available() else ca.MEM_HOST
        elif d == "cpu":
            mem = ca.MEM_HOST
        else:
            if not ca.cuda_available():
                raise ca.CudaError(f"lddmm: device 'gpu' requested but no GPU can be used: "
                                   f"{ca.cuda_unavailable_reason()}")
            mem = ca.MEM_DEVICE
    else:
        mem = device
        if int(mem) == int(ca.MEM_DEVICE) and not ca.cuda_available():
            raise ca.CudaError(f"lddmm: MEM_DEVICE requested but {ca.cuda_unavailable_reason()}")
    if int(mem) == int(ca.MEM_DEVICE):
        return ca.MEM_DEVICE, f"gpu ({ca.device_info()})"
    return ca.MEM_HOST, f"cpu ({os.cpu_count()} cores; {ca.cpu_vector_info()})"


def _ssd_before(I1, Mn, grid, mem, ssd=None):
    """Sum of squared differences (the metric `ssd`, an SSD of sigma 1 on the fixed grid; None: a new
    one) of the normalised images before any registration (moving on the fixed grid through world
    coordinates)."""
    ssd = ssd if ssd is not None else SSD(grid, mem, 1.0)
    return ssd.energy(on_fixed(grid, Mn, affine.identity(grid, Mn.grid()).hfield(mem)), I1)


@dataclass
class LDDMMResult:
    """What register() returns. Arrays live in the memory type the registration ran in (`mem`)."""

    deformed: object  # Image3D: the moving image (original intensities) deformed onto the fixed grid
    phiinv: object  # Field3D: phi_{1,0}, H-field (voxel coordinates), deformed = moving o phiinv
    phi: object  # Field3D: phi_{0,1}, its inverse (the forward map of the moving image)
    moving: object  # Image3D: the moving image on the fixed grid, before deformation
    jacobian: object  # Image3D: det D phiinv
    velocity: list  # Field3D per time step (world units), full resolution, on the fixed grid (cropped from the
    # solver's working grid when pad="fft" extended it: the velocities there, not a fresh solve on the fixed grid)
    energies: list  # one dict per iteration: scale, iteration, energy, match, reg, step, accepted
    initial_mismatch: float  # sum of squared differences (normalised intensities) before
    final_mismatch: float  # ... and after
    timings: dict
    device: str
    mem: object
    params: dict
    notes: list = field(default_factory=list)
    affine: object = None  # affine.AffineResult: the linear stage
    full_map: object = None  # Field3D on the fixed grid: moving voxel coordinates (affine after phiinv)
    labels: object = None  # LabelImage (integer values): the moving labels through full_map (nearest), or None
    linear_mismatch: float = float("nan")  # SSD (normalised) after the linear stage
    final_match: float = float("nan")  # the metric's energy at the end
    quality: dict = None  # pyca.registration.quality.assess(): did the registration fail, and why

    @property
    def mismatch_reduction(self):
        """1 - final / initial sum of squared differences (0.9: the mismatch fell by 90%)."""
        return 1.0 - self.final_mismatch / self.initial_mismatch if self.initial_mismatch > 0 else 0.0

    @property
    def final_energy(self):
        acc = [e for e in self.energies if e["accepted"]]
        return acc[-1]["energy"] if acc else float("nan")

    def summary(self):
        """A JSON-serialisable dict (what summary.json holds)."""
        jmin, jmax = ca.MinMax(self.jacobian)
        nonpos = ca.Image3D(self.jacobian.grid(), self.jacobian.memType())
        ca.LTEC(nonpos, self.jacobian, 0.0)
        frac = float(ca.Sum(nonpos)) / self.jacobian.grid().nVox()
        p = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.params.items()}
        g = self.deformed.grid()  # the fixed image's grid, the grid of every output image
        return {
            "device": self.device,
            "grid": {"size": list(g.size()), "spacing": list(g.spacing()), "origin": list(g.origin()),
                     "direction": np.array(g.direction(), float).reshape(3, 3).tolist(),  # columns: the axes
                     "vox2world": affine.vox2world(g).tolist()},
            "params": p,
            "initial_mismatch": self.initial_mismatch,
            "final_mismatch": self.final_mismatch,
            "mismatch_reduction": self.mismatch_reduction,
            "final_energy": self.final_energy,
            "jacobian_min": float(jmin),
            "jacobian_max": float(jmax),
            "jacobian_nonpositive_fraction": frac,
            "linear_mismatch": self.linear_mismatch,
            "final_match_energy": self.final_match,
            "quality": self.quality,
            "affine": self.affine.summary() if self.affine is not None else None,
            "timings": self.timings,
            "energies": self.energies,
            "notes": self.notes,
        }


def _multimodal(p):
    """True for a match term that compares images of different contrasts (mi): the moving image is then
    not histogram-matched to the fixed one (each is scaled by its own range), the linear stage uses the
    same term instead of squared differences, and no bias gain is estimated (it assumes one contrast)."""
    return metric_class(p["metric"]).multimodal


def _contrast(I1, Mn, I0, mask, p, grid, mem, tmp):
    """pyca.registration.quality.contrast_agreement of the fixed image and the moving one aligned whatever
    their contrasts: I0 after mi's own linear stage; for ssd and lncc, whose linear stage may have failed
    on different contrasts, the better aligned (quality.better_aligned) of the inputs as given (through
    world coordinates) and a rigid mi alignment at 1/4 resolution (into tmp)."""
    if _multimodal(p):
        return _quality.contrast_agreement(I0, I1, mask)
    given = _quality.contrast_agreement(on_fixed(grid, Mn, affine.identity(grid, Mn.grid()).hfield(mem), out=tmp),
                                        I1, mask)
    probe = affine.register(I1, Mn, "rigid", metric="mi", mask=mask, scales=(4,), iterations=(40,))
    aligned = _quality.contrast_agreement(on_fixed(grid, Mn, probe.hfield(mem), out=tmp), I1, mask)
    return _quality.better_aligned(given=given, aligned=aligned)


def _step_refused(p, f, eps, tries):
    """The refusal of a fixed step that lowered the energy in none of its halvings: the scale would end
    where it began, and the run report success."""
    if p["gamma"] > 0:  # K normalised to gain 1 (_lddmm_solver.kernel_scale): the match term's weight is the size
        why = (f"the match term's weight 2 / sigma^2 = {2.0 / float(p['sigma']) ** 2:.3g} makes each step move the "
               f"velocities too far")
    else:
        why = "without gamma K's gain at the lowest frequencies is unbounded"
    return (f"lddmm: step={p['step']:g} lowered the energy at scale 1/{f} in none of {tries} tries (down to "
            f"{eps * 2:g}): {why}; use step='auto', which sizes each scale's first step to max_step voxels")


def _optimise_scale(lev, f, n_it, p, energies, pbar, forwarded=False):
    """Gradient descent of one scale (pyca.registration.optimisers.descend; docs/lddmm.md, 'Optimiser');
    returns the scale's report. forwarded: lev.forward() has run with the current velocities (only I1
    may have changed since)."""
    try:
        return optimisers.descend(lev, n_it, step=p["step"], max_step=p["max_step"], tol=p["tol"], records=energies,
                                  tag={"scale": f}, label=f"scale 1/{f}", pbar=pbar, forwarded=forwarded)
    except optimisers.NoDescent as e:  # a fixed step that lowered nothing: the scale would end as it began
        raise ValueError(_step_refused(p, f, e.eps, e.tries)) from None


def register(fixed, moving, *, progress=False, **params):
    """Registers `moving` onto `fixed`: a linear stage (pyca.apps.affine), then LDDMM; returns an
    LDDMMResult.

    fixed, moving: Image3D (any memory type), NumPy arrays or file paths. Neither is modified.
    Parameters (defaults in DEFAULTS, meanings in docs/lddmm.md): alpha, beta, gamma, lpow (the
    fluid operator L; alpha None: the metric's default), metric ('lncc' | 'ssd' | 'mi'), radius (LNCC
    window radius, voxels), bins (mi: bins per image of the joint histogram), sigma (weight of the match
    term; None: the metric's default), step
    ('auto' or eps in (0, 0.5)), max_step (voxels: the largest velocity change of the first step of
    each scale when step='auto'), tol (stop a scale when the energy falls by less than tol per
    iteration), time_steps (T), scales (downsampling factors, decreasing, ending with 1), iterations
    (caps per scale, or one for every scale; None: the metric's), normalize ('percentiles': per-image robust scaling
    to [0, 1] at `percentiles`; 'histogram': the moving image's quantiles matched to the fixed
    image's, then both scaled by the fixed image's range; 'none'; True / False as 'percentiles' /
    'none'), band_tol (the kernel K keeps, per axis, the frequencies where its symbol is above this
    fraction of its peak: a band-limited K, fewer transforms; 0: every frequency), bias_sigma
    (world units of the smooth gain that corrects a bias field at each scale; 0: off), interp_blur
    ('matched': the warped moving image compared with the fixed image plus the bias trilinear
    interpolation gives it, voxel by voxel; 'none'), fixed_blur (moving-image voxels of a Gaussian
    that also smooths the fixed image before any comparison; 0: off), affine ('auto' | 'none' |
    'rigid' | 'affine'), fixed_mask, moving_mask (0/1 images on their image's grid),
    moving_labels (integer label image on the moving grid, warped by
    nearest neighbour), device ('auto' | 'cpu' | 'gpu').
    """
    p = parameters.merged(DEFAULTS, params, "lddmm.register")
    t_start = time.perf_counter()
    names = p.pop("names", None) or {}
    names = {**{k: os.fspath(p[k]) for k in ("fixed_mask", "moving_mask", "moving_labels")
                if isinstance(p[k], (str, os.PathLike))}, **names}  # files given by name are named so
    fixed, moving = as_image(fixed, "fixed"), as_image(moving, "moving")
    extra = {k: (as_image(p[k], k) if p[k] is not None else None) for k in ("fixed_mask", "moving_mask")}
    extra["moving_labels"] = p["moving_labels"]  # a file's labels are read as integers (placed_inputs)
    parameters.check(p, given=parameters.explicit(params, DEFAULTS))  # (a keyword the run would not use: refused)
    scales, iters = parameters.schedule(p["scales"], p["iterations"])
    p["scales"], p["iterations"] = tuple(scales), tuple(iters)
    mem, device = resolve_device(p["device"])
    note = check_inputs(fixed, moving, names=names, **extra)
    extra = placed_inputs(fixed, moving, names, **extra)  # on their images' grids, each by its own affine
    T = int(p["time_steps"])
    grid = fixed.grid()

    # Normalised copies in working memory (each image by its own robust range), binary masks. The
    # moving image, its mask and labels stay on their own grid: ApplyH samples a source of any size,
    # so each image brought onto the fixed grid is interpolated once, through one map (fixed voxel ->
    # the moving image's own voxels: the affine, then the affine after phiinv for the outputs).
    # With normalize 'histogram' the moving image's intensities are first matched to the fixed
    # image's, and both images take the fixed image's range.
    # interp_blur 'matched' adds the moving image's own curvature to the fixed image: one contrast only.
    # Images of different contrasts (mi) take its contrast-free form, the fixed image smoothed by
    # trilinear interpolation's mean blur (fixed_blur sqrt(1/6), if no larger one is given), as mi's
    # defaults were measured (docs/performance.md, 'Multi-modal registration').
    interp = p["interp_blur"] == "matched" and not _multimodal(p)
    matched = p["interp_blur"] == "matched"
    blur = dict(p, fixed_blur=max(float(p["fixed_blur"]), INTERP_BLUR)) if matched and not interp else p
    I1, Mn = intensities.compared_images(fixed, moving, blur, mem, extra["fixed_mask"], extra["moving_mask"])
    blur_note = [f"the fixed image was smoothed by fixed_blur {blur['fixed_blur']:.3g} moving-image voxels "
                 f"(interp_blur 'matched' with metric {p['metric']}: its contrast-free form)"] if blur is not p else []
    fmask = binary(extra["fixed_mask"], mem)
    mmask = binary(extra["moving_mask"], mem)
    kind = linear_kind(p["affine"], I1, Mn)
    # The linear stage matches the normalised images by their squared differences, whatever the
    # LDDMM match: the per-image normalisation has removed each image's linear intensity change, and
    # LNCC's windows of a few voxels ignore flat regions and let it shrink an object (a phantom by
    # 21%: tests/python/test_registration.py, docs/lddmm.md).
    aff = affine.register(I1, Mn, kind, metric="mi" if _multimodal(p) else "ssd", mask=fmask,
                          scales=affine.STAGE_SCALES, iterations=affine.STAGE_ITERATIONS,
                          bins=p["bins"] if _multimodal(p) else None)
    Haff = aff.hfield(mem)
    check_overlap(Haff, Mn.grid(), names)
    I0 = on_fixed(grid, Mn, Haff)
    # At full resolution the solver samples the moving image itself through the affine after each
    # phi_{t,0} (one interpolation, as the outputs do), unless I0 is the moving image voxel for voxel.
    same = tuple(Mn.grid().size()) == tuple(grid.size()) and np.array_equal(aff.voxel_matrix(), np.eye(4))
    source = None if same else (Mn, aff.voxel_matrix())
    mask = fmask
    if mmask is not None:
        mm = on_fixed(grid, mmask, Haff, labels=True)
        if mask is not None:
            ca.Mul_I(mm, mask)
        mask = mm
    if mask is not None and not ca.Sum(mask) > 0:
        raise ValueError("lddmm: the masks do not overlap after the linear stage: nothing to register")
    # The solver's grid (pad 'fft'): the fixed grid extended at its far ends, so that every scale's grid has
    # sizes the FFTs of K handle well; the fixed voxels keep their indices (the affine M and the H-fields
    # hold), and the outputs below are cropped back to the fixed grid (docs/lddmm.md, 'The working grid').
    work = fft_grid(grid, scales) if p["pad"] == "fft" else grid
    W0, W1, wmask = I0, I1, mask
    pad_only = mask is None and work is not grid  # the only mask is the working grid's (pad's)
    pad_plain = pad_only and metric_class(p["metric"]).plain_without_mask  # the SSD: Level's pad, not a mask
    if work is not grid:
        W1 = extended(I1, work)
        if source is None:
            W0 = extended(I0, work)
        else:  # the moving image through the affine at every voxel of the working grid, as the solver samples it
            W0 = on_fixed(work, Mn, aff.hfield(mem, out=ca.Field3D(work, mem)))
        # The match counts the fixed grid's own voxels only (a mask of 0 on the added ones, whatever the
        # metric): there the fixed image is its far border repeated, nothing to compare the moving image with.
        # The SSD without a mask of the user's keeps its plain difference (the solver's fused path): the solver
        # compares the deformed moving image with itself on the added voxels (Level's pad) instead.
        inside = mask
        if inside is None:
            inside = ca.Image3D(grid, mem)
            ca.SetMem(inside, 1.0)
        wmask = extended(inside, work, labels=True)
        if mask is not None:  # the fixed grid's voxels alone (LNCC's support; wmask when there is no mask)
            ones = ca.Image3D(grid, mem)
            ca.SetMem(ones, 1.0)
            inside_work = extended(ones, work, labels=True)
    tmp = ca.Image3D(grid, mem)
    # The checks of pyca.registration.quality: the match term at full resolution after the linear stage
    # (compared with the end), the contrasts of the aligned images, the fixed image's foreground.
    judge = make_metric(p["metric"], grid, mem, p["sigma"], mask, p["radius"], p["bins"])
    linear_match = judge.energy(I0, I1)
    contrast = _contrast(I1, Mn, I0, mask, p, grid, mem, tmp)
    ssd = SSD(grid, mem, 1.0)  # the mismatch reported before and after, whatever the metric
    linear_mismatch = ssd.energy(I0, I1)
    initial_mismatch = _ssd_before(I1, Mn, grid, mem, ssd)
    timings = {"setup_s": 0.0, "affine_s": aff.seconds, "scales": []}

    energies = []
    pbar = None
    if progress:
        from .._progress import progress_bar  # tqdm on a terminal, a few plain lines in a log file

        pbar = progress_bar(total=sum(iters), desc=f"lddmm [{device.split(' ')[0]}]")
    timings["setup_s"] = time.perf_counter() - t_start - aff.seconds
    prev = None
    try:
        for f, n_it in zip(scales, iters):
            t0 = time.perf_counter()
            g, (J0, J1), mk = level_images(work, f, (W0, W1), wmask)
            # the fixed grid's voxels on this level (pad): LNCC's windows hold only them (support)
            support = None if work is grid else (mk if pad_only else level_images(work, f, (), inside_work)[2])
            metric = make_metric(p["metric"], g, mem, p["sigma"], None if pad_plain else mk, p["radius"], p["bins"],
                                 support=support)
            pad = mk if pad_plain else None
            lev = Level(g, mem, T, J0, J1, p, metric=metric, source=source if f == 1 else None,
                         interp=interp, pad=pad)
            if prev is not None:
                lev.take_velocities(prev)
            prev = None
            gain = None
            # the fixed image given the current warped moving image's bias
            if p["bias_sigma"] > 0 and not _multimodal(p):
                lev.forward()
                corrected, gain = intensities.gain_corrected(J1, lev.J0[T], float(p["bias_sigma"]), mk)
                lev.set_fixed(corrected)
            info = _optimise_scale(lev, f, n_it, p, energies, pbar, forwarded=gain is not None)
            wait(mem)
            info.update(grid=list(g.size()), seconds=time.perf_counter() - t0)
            if gain is not None:
                info["bias_gain"] = list(gain)
            timings["scales"].append(info)
            prev = lev
    finally:
        if pbar is not None:
            pbar.close()

    # Outputs at full resolution (prev is the level of scale 1).
    t0 = time.perf_counter()
    lev = prev
    final_match, h = lev.forward()
    phiinv = h.clone() if work is grid else cropped(h, grid)
    phi = lev.forward_map()
    phi = phi.clone() if work is grid else cropped(phi, grid)
    velocity = list(lev.v) if work is grid else [cropped(v, grid) for v in lev.v]
    # Every output on the fixed grid samples the moving image (or its labels) once, in its own voxels.
    full = aff.hfield(mem, src=phiinv)  # fixed voxel -> moving voxel: the affine after phiinv
    on_fixed(grid, Mn, full, out=tmp)
    final_match_full = judge.energy(tmp, I1)
    del judge
    final_mismatch = ssd.energy(tmp, I1)
    del ssd
    mv = moving.clone(mem) if moving.memType() != mem else moving
    deformed = on_fixed(grid, mv, full)
    moved = on_fixed(grid, mv, Haff)
    labels = None
    if extra["moving_labels"] is not None:  # indices into the label table, warped; values looked up (integers)
        idx, table = extra["moving_labels"].indices(mem)
        labels = LabelImage.from_indices(on_fixed(grid, idx, full, labels=True), table, "lddmm: labels")
    jac = ca.Image3D(grid, mem)
    jacobian_det(jac, phiinv)
    lo, hi = (float(x) for x in ca.MinMax(I1))
    ca.GTC(tmp, I1, lo + 0.1 * (hi - lo))  # the fixed image's foreground
    if mask is not None:
        ca.Mul_I(tmp, mask)
    quality = _quality.assess(p["metric"], jac, tmp, float(linear_match), float(final_match_full), contrast,
                              advice=_quality.MULTIMODAL_ADVICE)
    wait(mem)
    timings["outputs_s"] = time.perf_counter() - t0
    timings["registration_s"] = sum(s["seconds"] for s in timings["scales"]) + aff.seconds
    timings["total_s"] = time.perf_counter() - t_start
    p["device"] = str(p["device"])
    for k in ("fixed_mask", "moving_mask", "moving_labels"):
        p[k] = names.get(k, "given") if p[k] is not None else None
    p["affine"] = f"{p['affine']} ({kind})" if p["affine"] == "auto" else p["affine"]
    return LDDMMResult(deformed=deformed, phiinv=phiinv, phi=phi, moving=moved, jacobian=jac, velocity=velocity,
                       energies=energies, initial_mismatch=float(initial_mismatch),
                       final_mismatch=float(final_mismatch), timings=timings, device=device, mem=mem, params=p,
                       notes=[note] + blur_note, affine=aff, full_map=full, labels=labels,
                       linear_mismatch=float(linear_mismatch), final_match=float(final_match), quality=quality)
