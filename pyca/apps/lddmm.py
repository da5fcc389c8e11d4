"""LDDMM image registration: Beg et al.'s time-varying velocity algorithm, built from pyca operations.

    import pyca as ca
    from pyca.apps import lddmm, data
    fixed, moving = data.builtin_pair()
    res = lddmm.register(fixed, moving, device="auto", progress=True)
    res.deformed, res.phiinv, res.phi, res.jacobian, res.energies, res.timings, res.device

Finds velocity fields v_t (t in [0, 1], T piecewise-constant steps, world units) minimising

    E(v) = sum_j dt <L v_j, v_j> + (1 / sigma^2) || I0 o phi_{1,0} - I1 ||^2

(sums over voxels) with I0 the moving image, I1 the fixed one, L = (-alpha Laplacian - beta grad div
+ gamma)^lpow the fluid operator (ca.FluidKernelFFT), by gradient descent in the V metric:

    v_j <- v_j - eps (2 v_j - K b_j),   b_j = (2 / sigma^2) |D phi_{t_j,1}| (J0_j - J1_j) grad J0_j

with J0_j = I0 o phi_{t_j,0}, J1_j = I1 o phi_{t_j,1} and K = L^-1. The flows are integrated
semi-Lagrangianly (ComposeHVInv forwards, ComposeHV backwards), J0 / J1 by ApplyH, |D phi| by
JacDetH (per world unit, as PyCA's, so times the voxel volume: 1 for the identity), grad J0 by
Gradient. A coarse-to-fine schedule runs the same algorithm on downsampled images
(ResampleAA) and carries the velocities up (Resample). Every operation routes by memory type, so
the same code runs on the CPU (MEM_HOST) and on the GPU (MEM_DEVICE). Algorithm and parameters:
docs/lddmm.md.
"""
from __future__ import annotations

import numbers
import os
import time
from dataclasses import dataclass, field

import numpy as np

from .. import core as ca
from .. import io as pio
from ._lddmm_outputs import make_report, write_outputs
from ._lddmm_solver import _coarse_grid, _jac_det, _Level

__all__ = ["register", "LDDMMResult", "DEFAULTS", "resolve_device", "check_inputs", "write_outputs",
           "make_report"]

# Defaults (docs/lddmm.md explains each). sigma applies to intensities scaled to [0, 1] when
# normalize is on; alpha, gamma are per world unit (the fluid operator's spacing enters).
DEFAULTS = dict(
    alpha=1.0, beta=0.0, gamma=0.04, lpow=2, sigma=0.05,
    step="auto", max_step=0.5, time_steps=8,
    scales=(4, 2, 1), iterations=(60, 40, 20),
    normalize=True, device="auto",
)

_MIN_SIZE = 4  # smallest extent of a registered axis (z may be 1: a 2-D image)


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
    return ca.MEM_HOST, f"cpu ({os.cpu_count()} cores)"


def _as_image(x, name):
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


def _schedule(scales, iterations):
    scales = [scales] if isinstance(scales, (int, np.integer)) else list(scales)
    if not scales or any(int(s) != s or s < 1 for s in scales):
        raise ValueError(f"lddmm: scales must be integers >= 1 (downsampling factors), got {scales}")
    scales = [int(s) for s in scales]
    if any(a <= b for a, b in zip(scales, scales[1:])) or scales[-1] != 1:
        raise ValueError(f"lddmm: scales must decrease and end with 1 (full resolution), got {scales}")
    its = [iterations] * len(scales) if isinstance(iterations, (int, np.integer)) else list(iterations)
    if len(its) != len(scales):
        raise ValueError(f"lddmm: {len(its)} iteration counts for {len(scales)} scales ({scales})")
    if any(int(i) != i or i < 0 for i in its):
        raise ValueError(f"lddmm: iteration counts must be integers >= 0, got {its}")
    return scales, [int(i) for i in its]


def _int_in(v, lo, hi):
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and np.isfinite(v) and v == int(v) and lo <= v <= hi


def _check_params(p):
    for k in ("alpha", "sigma"):
        if not (np.isfinite(p[k]) and p[k] > 0):
            raise ValueError(f"lddmm: {k} must be > 0, got {p[k]}")
    for k in ("beta", "gamma"):
        if not (np.isfinite(p[k]) and p[k] >= 0):
            raise ValueError(f"lddmm: {k} must be >= 0, got {p[k]}")
    # Upper bounds too (rel, issue 19): each is work per voxel, refused at once rather than run for hours.
    if not _int_in(p["lpow"], 1, 64):
        raise ValueError(f"lddmm: lpow must be an integer in [1, 64], got {p['lpow']}")
    if not _int_in(p["time_steps"], 1, 10000):
        raise ValueError(f"lddmm: time_steps must be an integer in [1, 10000], got {p['time_steps']}")
    if p["step"] != "auto" and not (isinstance(p["step"], (int, float)) and 0 < p["step"] < 0.5):
        raise ValueError(f"lddmm: step must be 'auto' or a number in (0, 0.5), got {p['step']!r}")
    if not (np.isfinite(p["max_step"]) and p["max_step"] > 0):
        raise ValueError(f"lddmm: max_step must be > 0 (voxels), got {p['max_step']}")


def _box(g):
    """The world bounding box (lo, hi) of a grid's voxel centres, its direction included."""
    n = np.array(tuple(g.size()), float) - 1
    corners = np.array([[i, j, k, 1.0] for i in (0, n[0]) for j in (0, n[1]) for k in (0, n[2])])
    w = corners @ g.affine()[:3].T
    return w.min(axis=0), w.max(axis=0)


def check_inputs(fixed, moving):
    """Checks that the two images can be registered (before any work); returns a note on how the
    moving image will be brought onto the fixed grid ('same grid' or 'resampled ...')."""
    gf, gm = fixed.grid(), moving.grid()
    for name, g in (("fixed", gf), ("moving", gm)):
        s = tuple(g.size())
        if (s[2] != 1 and min(s) < _MIN_SIZE) or min(s[:2]) < _MIN_SIZE:
            raise ValueError(f"lddmm: the {name} image's grid {s} is too small to register (each axis needs at "
                             f"least {_MIN_SIZE} voxels; z = 1 for a 2-D image)")
    if (gf.size().z == 1) != (gm.size().z == 1):
        raise ValueError(f"lddmm: cannot register a 2-D image with a 3-D one (fixed {tuple(gf.size())}, moving "
                         f"{tuple(gm.size())})")
    for name, im in (("fixed", fixed), ("moving", moving)):
        lo, hi = ca.MinMax(im)
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(f"lddmm: the {name} image holds NaN or infinite values")
        if hi <= lo:
            raise ValueError(f"lddmm: the {name} image is constant ({lo}): nothing to register")
    same_size = tuple(gf.size()) == tuple(gm.size())
    sf, sm = np.array(tuple(gf.spacing())), np.array(tuple(gm.spacing()))
    if same_size and np.allclose(sf, sm, rtol=1e-4) and np.allclose(gf.direction(), gm.direction(), atol=1e-6):
        return "same grid (voxel to voxel)"
    (flo, fhi), (mlo, mhi) = _box(gf), _box(gm)
    if gf.size().z == 1:
        flo, fhi, mlo, mhi = flo[:2], fhi[:2], mlo[:2], mhi[:2]
    if np.any(np.minimum(fhi, mhi) < np.maximum(flo, mlo)):
        raise ValueError(f"lddmm: the images' grids do not overlap in world coordinates (fixed {gf}, moving {gm}); "
                         "give images on the same grid or with overlapping origin/spacing")
    return f"moving resampled onto the fixed grid in world coordinates (moving grid {gm})"


@dataclass
class LDDMMResult:
    """What register() returns. Arrays live in the memory type the registration ran in (`mem`)."""

    deformed: object  # Image3D: the moving image (original intensities) deformed onto the fixed grid
    phiinv: object  # Field3D: phi_{1,0}, H-field (voxel coordinates), deformed = moving o phiinv
    phi: object  # Field3D: phi_{0,1}, its inverse (the forward map of the moving image)
    moving: object  # Image3D: the moving image on the fixed grid, before deformation
    jacobian: object  # Image3D: det D phiinv
    velocity: list  # Field3D per time step (world units), full resolution
    energies: list  # one dict per iteration: scale, iteration, energy, match, reg, step, accepted
    initial_mismatch: float  # sum of squared differences (normalised intensities) before
    final_mismatch: float  # ... and after
    timings: dict
    device: str
    mem: object
    params: dict
    notes: list = field(default_factory=list)

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
        p = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.params.items()}
        return {
            "device": self.device,
            "grid": {"size": list(self.deformed.grid().size()), "spacing": list(self.deformed.grid().spacing()),
                     "origin": list(self.deformed.grid().origin())},
            "params": p,
            "initial_mismatch": self.initial_mismatch,
            "final_mismatch": self.final_mismatch,
            "mismatch_reduction": self.mismatch_reduction,
            "final_energy": self.final_energy,
            "jacobian_min": float(jmin),
            "jacobian_max": float(jmax),
            "timings": self.timings,
            "energies": self.energies,
            "notes": self.notes,
        }


def register(fixed, moving, *, progress=False, **params):
    """Registers `moving` onto `fixed` with LDDMM; returns an LDDMMResult.

    fixed, moving: Image3D (any memory type), NumPy arrays or file paths. Neither is modified.
    Parameters (defaults in DEFAULTS, meanings in docs/lddmm.md): alpha, beta, gamma, lpow (the fluid
    operator L), sigma (noise level of the image match, in normalised intensity when normalize),
    step ('auto' or eps in (0, 0.5)), max_step (voxels: the largest velocity change of the first step
    of each scale when step='auto'), time_steps (T), scales (downsampling factors, decreasing, ending
    with 1), iterations (per scale, or one count for every scale), normalize (scale both images'
    intensities jointly to [0, 1]), device ('auto' | 'cpu' | 'gpu').
    """
    unknown = set(params) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"lddmm.register: unknown parameter(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    p = dict(DEFAULTS)
    p.update(params)
    t_start = time.perf_counter()
    fixed, moving = _as_image(fixed, "fixed"), _as_image(moving, "moving")
    _check_params(p)
    scales, iters = _schedule(p["scales"], p["iterations"])
    p["scales"], p["iterations"] = tuple(scales), tuple(iters)
    mem, device = resolve_device(p["device"])
    note = check_inputs(fixed, moving)
    T = int(p["time_steps"])

    # Inputs in working memory, moving on the fixed grid; normalised copies for the registration.
    grid = fixed.grid()
    I1 = fixed.clone(mem)
    mv = moving.clone(mem) if moving.memType() != mem else moving
    if note.startswith("same grid"):
        I0_orig = mv.clone() if mv is moving else mv
        I0_orig.setGrid(grid)
    else:
        I0_orig = ca.Image3D(grid, mem)
        ca.ResampleWorld(I0_orig, mv, ca.BACKGROUND_STRATEGY_ZERO, ca.INTERP_LINEAR)
    I0 = I0_orig.clone()
    if p["normalize"]:
        (lo0, hi0), (lo1, hi1) = ca.MinMax(I0), ca.MinMax(I1)
        lo, hi = min(lo0, lo1), max(hi0, hi1)
        for im in (I0, I1):
            ca.SubC_I(im, float(lo))
            ca.MulC_I(im, float(1.0 / (hi - lo)))
    tmp = ca.Image3D(grid, mem)
    ca.Sub(tmp, I0, I1)
    initial_mismatch = ca.Sum2(tmp)
    timings = {"setup_s": 0.0, "scales": []}

    energies = []
    pbar = None
    if progress:
        from .._progress import progress_bar  # tqdm on a terminal, a few plain lines in a log file

        pbar = progress_bar(total=sum(iters), desc=f"lddmm [{device.split(' ')[0]}]")
    timings["setup_s"] = time.perf_counter() - t_start
    prev = None
    try:
        for f, n_it in zip(scales, iters):
            t0 = time.perf_counter()
            g = _coarse_grid(grid, f)
            if f == 1:
                J0, J1 = I0, I1
            else:
                J0, J1 = ca.Image3D(g, mem), ca.Image3D(g, mem)
                ca.ResampleAA(J0, I0)
                ca.ResampleAA(J1, I1)
            lev = _Level(g, mem, T, J0, J1, p)
            if prev is not None:
                lev.take_velocities(prev)
            prev = None
            match, _ = lev.forward()
            reg = lev.reg_energy()
            E = match + reg
            eps = None if p["step"] == "auto" else float(p["step"])
            fails = 0
            for it in range(n_it):
                lev.gradients()
                if eps is None:
                    dmax = lev.direction_max()
                    eps = min(0.25, float(p["max_step"]) / dmax) if dmax > 0 else 0.25
                lev.update(eps)
                m_new, _ = lev.forward()
                r_new = lev.reg_energy()
                E_new = m_new + r_new
                accepted = bool(np.isfinite(E_new) and E_new <= E)
                rec = {"scale": f, "iteration": it, "energy": E_new, "match": m_new, "reg": r_new, "step": eps,
                       "accepted": accepted}
                energies.append(rec)
                if accepted:
                    E, match, reg, fails = E_new, m_new, r_new, 0
                else:  # back to the previous velocities, half the step
                    lev.undo()
                    lev.forward()
                    eps *= 0.5
                    fails += 1
                if pbar is not None:
                    pbar.set_postfix_str(f"scale 1/{f} E={E:.4g} match={match:.4g} step={eps:.2g}", refresh=False)
                    pbar.update(1)
                if fails >= 8:  # the step no longer decreases the energy: this scale has converged
                    if pbar is not None:
                        pbar.update(n_it - it - 1)
                    break
            ca.synchronize()
            timings["scales"].append({"scale": f, "grid": list(g.size()), "iterations": n_it,
                                      "seconds": time.perf_counter() - t0})
            prev = lev
    finally:
        if pbar is not None:
            pbar.close()

    # Outputs at full resolution (prev is the level of scale 1).
    t0 = time.perf_counter()
    lev = prev
    final_match, h = lev.forward()
    final_mismatch = final_match * lev.sigma2
    phiinv = h.clone()
    phi = lev.forward_map().clone()
    deformed = ca.Image3D(grid, mem)
    ca.ApplyH(deformed, I0_orig, phiinv)
    jac = ca.Image3D(grid, mem)
    _jac_det(jac, phiinv)
    ca.synchronize()
    timings["outputs_s"] = time.perf_counter() - t0
    timings["registration_s"] = sum(s["seconds"] for s in timings["scales"])
    timings["total_s"] = time.perf_counter() - t_start
    p["device"] = str(p["device"])
    return LDDMMResult(deformed=deformed, phiinv=phiinv, phi=phi, moving=I0_orig, jacobian=jac, velocity=list(lev.v),
                       energies=energies, initial_mismatch=float(initial_mismatch),
                       final_mismatch=float(final_mismatch), timings=timings, device=device, mem=mem, params=p,
                       notes=[note])
