"""Geodesic shooting registration by vector momentum (`pyca shoot`): the moving image deformed along
the geodesic of an initial momentum m0, m0 found by gradient descent (Singh, Hinkle, Joshi and Fletcher's
vector-momentum LDDMM, as the vector-momentum clients' matching computes it, at pyca's speed).

    from pyca.apps import shoot
    res = shoot.register(fixed, moving, device="auto")       # Image3D, arrays or file paths
    res.m0, res.phiinv, res.deformed, res.jacobian, res.energies, res.final_energy

Only m0 parametrises the deformation (LDDMM's time-varying velocity needs T fields); the energy,
per voxel as the clients report it, is

    E(m0) = ( 1/2 <m0, K m0> + || I0 o phi_{1,0} - I1 ||^2 / (2 sigma^2) ) / N

with K = (-alpha Laplacian - beta grad div + gamma)^-lpow (PyCA's FluidKernelFFT, unnormalised, the
clients' operator), I0 the moving image, I1 the fixed one, both on the fixed grid. The geodesic and
its adjoint are pyca.registration.geodesic's; the step rule pyca.registration.optimisers.descend's.
docs/shoot.md says what is written and what each parameter does.
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from .. import core as ca
from .. import io as pio
from .._files import atomic_open
from ..registration import intensities, optimisers, quality, transform_files
from ..registration import parameters as _parameters
from ..registration import band as _band
from ..registration.geodesic import Geodesic, GeodesicFit, epdiff_kernel
from ..registration.inputs import as_image, check_world_overlap, on_grid
from ..registration.transforms import jacobian_det, level_images
from ._device import wait

__all__ = ["register", "ShootResult", "DEFAULTS", "check", "kernel_of", "device_of", "write_outputs", "add_parser",
           "add_model_arguments", "model_params", "prepared", "OUTPUTS", "level_fit", "carried_start"]

# The parameters, their defaults and --help texts: pyca.registration.parameters.SHOOT_DECLARED (why these
# defaults: there).
DEFAULTS = dict(_parameters.SHOOT_DEFAULTS)
OUTPUTS = ("m0", "phiinv", "phi", "deformed", "jacdet")


@dataclass
class ShootResult:
    """What register() returns (arrays in the memory type the registration ran in)."""

    m0: object  # Field3D: the initial momentum (world units)
    phiinv: object  # Field3D: phi_{1,0}, an H-field (voxels): deformed = moving o phiinv
    phi: object  # Field3D: phi_{0,1}, its inverse (the forward map of the moving image)
    deformed: object  # Image3D: the moving image (its own intensities) on the fixed grid, deformed
    jacobian: object  # Image3D: det D phiinv
    energies: list  # one dict per iteration (optimisers.descend's records)
    initial_mismatch: float  # sum of squared differences of the compared (normalised) images before
    final_mismatch: float  # ... and after
    timings: dict
    device: str
    params: dict
    report: dict = field(default_factory=dict)  # descend's report
    momentum_energies: list = None  # <m_t, K m_t> at each time step (constant along the geodesic)
    quality: dict = None  # pyca.registration.quality.assess(): folds and collapse of det D phiinv

    @property
    def final_energy(self):
        acc = [e for e in self.energies if e["accepted"]]
        return acc[-1]["energy"] if acc else self.report.get("energy_start", float("nan"))

    def summary(self):
        jmin, jmax = ca.MinMax(self.jacobian)
        p = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.params.items()}
        g = self.deformed.grid()
        return {"device": self.device, "grid": {"size": list(g.size()), "spacing": list(g.spacing()),
                                                "origin": list(g.origin())},
                "params": p, "energy": "(1/2 <m0, K m0> + ||I0 o phiinv - I1||^2 / (2 sigma^2)) / N",
                "initial_mismatch": self.initial_mismatch, "final_mismatch": self.final_mismatch,
                "final_energy": self.final_energy, "jacobian_min": float(jmin), "jacobian_max": float(jmax),
                "momentum_energies": self.momentum_energies, "stop": self.report.get("stop"),
                "folding_steps_rejected": self.report.get("folding_steps_rejected"), "quality": self.quality,
                "iterations": self.report.get("iterations"), "timings": self.timings, "energies": self.energies}


def check(p, prog="shoot", given=(), options=False):
    """Refuses a bad parameter of p (a full dict) in one line naming it, and one of `given` (the names the
    caller set explicitly) that the run would not use (parameters.check_applies: --max-step with a numeric
    --step, --min-jacobian with --folding-steps accept, percentiles with normalize 'none'; options: named as
    the command line's options). The bounds are the declaration's (parameters.SHOOT_DECLARED)."""
    for q in _parameters.SHOOT_DECLARED:  # integers as integers (a float T would reach range())
        v = p[q.name]
        if q.kind == "int" and (isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer))):
            raise ValueError(f"{prog}: {q.name} must be {q.bounds_text()}, got {v!r}")
    _parameters.schedule(p["scales"], 1, prog)
    for k in ("normalize", "folding_steps"):  # (keep: check_value's "must be one of")
        allowed = next(q.choices for q in _parameters.SHOOT_DECLARED if q.name == k)
        if p[k] not in allowed:
            raise ValueError(f"{prog}: {k} must be {' or '.join(repr(c) for c in allowed)}, not {p[k]!r}")
    return _parameters.check_declared(p, _parameters.SHOOT_DECLARED, prog, given, options)


def kernel_of(grid, p):
    """K on grid from the parameters alpha, beta, gamma, lpow (and K_B with band B > 0)."""
    if p.get("band"):
        return _band.band_kernel(grid, p["band"], p["alpha"], p["beta"], p["gamma"], p["lpow"])
    return epdiff_kernel(grid, p["alpha"], p["beta"], p["gamma"], p["lpow"])


def level_fit(g, J0, J1, p, mem, m0=None, v_up=None):
    """(geodesic, fit) of one scale on grid g (images J0 moving, J1 fixed): the full model, or with band B
    > 0 a band-limited geodesic on its coarse grid (registration.band). The start: m0 (a momentum on g),
    or v_up (a coarser scale's initial velocity, world units: m0 = L v_up on the geodesic's grid), or 0."""
    reject = p["folding_steps"] == "reject"
    if not p["band"]:
        K = kernel_of(g, p)
        geo = Geodesic(g, mem, p["time_steps"], K, keep=p["keep"])
        start = m0
        if v_up is not None:  # v0 carried onto this grid, m0 = L v0
            v = ca.Field3D(g, mem)
            ca.Resample(v, v_up, ca.BACKGROUND_STRATEGY_CLAMP, False, ca.INTERP_LINEAR)
            start = ca.Field3D(g, mem)
            K.applyOperator(start, v)
        fit = GeodesicFit(geo, J0, [(geo.T, J1)], p["sigma"], m0=start, reject_folds=reject,
                          min_jacobian=p["min_jacobian"])
        return geo, fit
    gc, _ = _band.band_grid(g, p["band"])
    K = kernel_of(gc, p)
    geo = _band.BandGeodesic(gc, mem, p["time_steps"], K, keep=p["keep"])
    start = None
    if m0 is not None:  # its velocity K_B m0 on g, then m0 = L_B v on the coarse grid
        v_up = ca.Field3D(g, mem)
        kernel_of(g, p).applyInverseOperator(v_up, m0)
    if v_up is not None:
        start = _band.to_coarse(ca.Field3D(gc, mem), v_up, K)
    fit = _band.BandFit(geo, J0, [(geo.T, J1)], p["sigma"], p["band"], m0=start, reject_folds=reject,
                        min_jacobian=p["min_jacobian"])
    return geo, fit


def device_of(p, prog="shoot"):
    """(memory type, description) of p['device'] (lddmm.resolve_device's rule), errors naming prog."""
    from .lddmm import resolve_device

    try:
        return resolve_device(p["device"])
    except (ValueError, ca.CudaError) as e:
        raise type(e)(str(e).replace("lddmm:", f"{prog}:", 1)) from None


def _check_registrable(im, what, prog):
    """A constant image or one holding NaN or infinite values, refused in one line naming it."""
    lo, hi = (float(x) for x in ca.MinMax(im))
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"{prog}: {what} holds NaN or infinite values")
    if not hi > lo:
        raise ValueError(f"{prog}: {what} is constant ({lo:g}): nothing to register")


def prepared(im, mem, p, what, prog="shoot"):
    """im in mem, normalised as p['normalize'] says; a constant image or one holding NaN or infinite
    values is refused in one line."""
    _check_registrable(im, what, prog)
    return intensities.normalised(im, mem, p)


def check_images(images, prog="shoot"):
    """Before any work: the images [(what, Image3D)] are all 2-D (z = 1) or all 3-D, finite and not
    constant; refused in one line naming the image otherwise."""
    first_what, first = images[0]
    for what, im in images:
        _check_registrable(im, what, prog)
        if (im.grid().size().z == 1) != (first.grid().size().z == 1):
            raise ValueError(f"{prog}: cannot register a 2-D image with a 3-D one ({first_what} "
                             f"{tuple(first.grid().size())}, {what} {tuple(im.grid().size())})")


def _check_start(fit):
    """A user's starting m0 under folding_steps='reject': refused in one line when its map folds (the
    result could not be promised free of folds); for one whose det D phiinv is not above min_jacobian
    the margin becomes half its own smallest det D phiinv."""
    fit.forward()
    jmin = fit.det_min()
    if jmin <= 0.0:
        raise ValueError(f"shoot: the starting m0's map folds (det D phiinv down to {jmin:.3g}); start from a "
                         "momentum whose map does not fold, or pass folding_steps='accept' to accept folds")
    if jmin <= fit.min_jacobian:
        fit.min_jacobian = 0.5 * jmin


def carried_start(fit):
    """A coarser scale's velocity carried up (fit.m0) under folding_steps='reject': its map, which did not
    fold on the coarser grid, may on this one (or fall to the margin): halved until it does not, at most
    MAX_REJECTED times, and where it still does, the start is m0 = 0 (the identity, which always
    passes). Returns what the start became: 'carried', 'carried, halved N times' or 'zero (...)'."""
    for n in range(optimisers.MAX_REJECTED + 1):
        fit.forward()
        if fit.admissible():
            return "carried" if n == 0 else f"carried, halved {n} times"
        if n < optimisers.MAX_REJECTED:
            ca.MulC_I(fit.m0, 0.5)
    ca.SetMem(fit.m0, 0.0)
    return (f"zero (the carried velocity's map still fell to det D phiinv <= {fit.min_jacobian:g} after "
            f"{optimisers.MAX_REJECTED} halvings)")


def register(fixed, moving, *, progress=False, m0=None, **params):
    """Registers `moving` onto `fixed` (Image3D, arrays or file paths; the moving image is placed on
    the fixed grid by its affine) by geodesic shooting. m0: an initial momentum to start from (a Field3D
    on the fixed grid). Returns a ShootResult."""
    from .._progress import progress_bar

    p = check(_parameters.merged(DEFAULTS, params, "shoot"), given=_parameters.explicit(params, DEFAULTS))
    t_start = time.perf_counter()
    mem, device = device_of(p)
    I1h, I0h = as_image(fixed, "fixed"), as_image(moving, "moving")
    check_images([("the fixed image", I1h), ("the moving image", I0h)])
    I0h = on_grid(I0h, I1h.grid())
    grid = I1h.grid()
    I1, I0 = prepared(I1h, mem, p, "the fixed image"), prepared(I0h, mem, p, "the moving image")
    diff = ca.Image3D(grid, mem)
    ca.Sub(diff, I0, I1)
    ssd0 = float(ca.Sum2(diff))
    scales = [int(f) for f in p["scales"]]
    if m0 is not None and len(scales) > 1:
        raise ValueError("shoot: a starting m0 is for a single scale (scales=(1,))")
    if m0 is not None and not (isinstance(m0, ca.Field3D) and tuple(m0.grid().size()) == tuple(grid.size())):
        what = f"a Field3D of size {tuple(m0.grid().size())}" if isinstance(m0, ca.Field3D) else type(m0).__name__
        raise TypeError(f"shoot: m0 must be a Field3D on the fixed grid {tuple(grid.size())}, got {what}")
    wait(mem)
    t0 = time.perf_counter()
    records, reports = [], []
    pbar = progress_bar(p["iterations"] * len(scales), "shoot", disable=not progress)
    v_up = None  # the coarser level's initial velocity (world units)
    try:
        for f in scales:
            g, (J0, J1), _ = level_images(grid, f, [I0, I1])
            user_start = m0 is not None and f == 1 and v_up is None
            geo, fit = level_fit(g, J0, J1, p, mem, m0=m0 if user_start else None, v_up=v_up)
            if user_start and fit.reject_folds:
                _check_start(fit)
            start_rule = "carried" if v_up is not None else ("m0" if user_start else "zero")
            if v_up is not None and fit.reject_folds:
                start_rule = carried_start(fit)
            rep = optimisers.descend(fit, p["iterations"], step=p["step"], max_step=p["max_step"], tol=p["tol"],
                                     records=records, tag={"scale": f}, label=f"shoot 1/{f}", pbar=pbar)
            reports.append(dict(rep, folding_steps_rejected=fit.folds_rejected, min_jacobian=fit.min_jacobian,
                                start=start_rule))
            fit.forward()  # the accepted m0's geodesic (the last forward may have been a rejected step's)
            v_up = geo.velocity(0).clone(mem) if f != 1 else None
    finally:
        pbar.close()
    rep = dict(reports[-1], iterations=sum(r["iterations"] for r in reports), energy_start=reports[0]["energy_start"],
               folding_steps_rejected=sum(r["folding_steps_rejected"] for r in reports), scales=reports)
    wait(mem)
    t1 = time.perf_counter()
    phiinv = fit.final_map().clone(mem)
    phi = (fit if p["band"] else geo).forward_map(ca.Field3D(grid, mem))
    deformed_n = ca.Image3D(grid, mem)
    ca.ApplyH(deformed_n, I0, phiinv)
    ca.Sub(diff, deformed_n, I1)
    ssd1 = float(ca.Sum2(diff))
    deformed = ca.Image3D(grid, mem)
    ca.ApplyH(deformed, I0h.clone(mem) if int(I0h.memType()) != int(mem) else I0h, phiinv)
    jac = ca.Image3D(grid, mem)
    jacobian_det(jac, phiinv)
    fg = ca.Image3D(grid, mem)  # the fixed image's foreground, as pyca lddmm judges its maps
    lo, hi = (float(x) for x in ca.MinMax(I1))
    ca.GTC(fg, I1, lo + 0.1 * (hi - lo))
    qual = quality.assess("ssd", jac, fg)
    mom = fit.momentum_energies() if p["band"] else geo.energies()
    m0_out = fit.m0
    if p["band"]:  # the momentum on the fixed grid: L_B of the coarse initial velocity interpolated
        m0_out = _band.to_fine_momentum(ca.Field3D(grid, mem), geo.velocity(0), kernel_of(grid, p))
    wait(mem)
    n_it = max(1, rep["iterations"])
    timings = {"registration_s": t1 - t0, "per_iteration_s": (t1 - t0) / n_it, "total_s": time.perf_counter() - t_start}
    return ShootResult(m0=m0_out, phiinv=phiinv, phi=phi, deformed=deformed, jacobian=jac, energies=records,
                       initial_mismatch=ssd0, final_mismatch=ssd1, timings=timings, device=device, params=p,
                       report=rep, momentum_energies=mom, quality=qual)


def write_outputs(res, out_dir, compress=True, names=None, extra=()):
    """m0 (vector), phiinv (H-field: 'pointset'), deformed, jacdet and summary.json (written last) in
    out_dir; extra: (name, Image3D) pairs written beside them. Returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    ext = ".nii.gz" if compress else ".nii"
    t0 = time.perf_counter()
    paths = []
    items = [(n, getattr(res, a)) for n, a in (("m0", "m0"), ("phiinv", "phiinv"), ("phi", "phi"),
                                                ("deformed", "deformed"), ("jacdet", "jacobian"))
             if getattr(res, a, None) is not None]
    for name, obj in list(items) + list(extra):
        path = os.path.join(out_dir, name + ext)
        if isinstance(obj, ca.Field3D):
            pio.save_field(obj, path, description=f"pyca {name}", intent="pointset" if name in ("phiinv", "phi") else
                           "vector")
        else:
            pio.save_image(obj, path, description=f"pyca {name}")
        paths.append(path)
    # the transforms as ANTs and ITK read them (and `pyca apply --transforms out_dir`): the identity affine
    # (the moving image is placed on the fixed grid by the world) and the two displacement fields
    host = lambda f: f if int(f.memType()) != int(ca.MEM_DEVICE) else f.clone(ca.MEM_HOST)  # noqa: E731
    listing = transform_files.write_registration(None, host(res.phiinv), host(res.phi), out_dir, ext)
    paths += [os.path.join(out_dir, n) for n in (transform_files.FORWARD_WARP + ext, transform_files.INVERSE_WARP + ext,
                                                 transform_files.AFFINE, transform_files.AFFINE_TEXT)]
    res.timings["write_s"] = time.perf_counter() - t0
    summary = res.summary()
    summary["transforms"] = listing
    summary["files"] = [os.path.basename(x) for x in paths] + ["summary.json"]
    if names:
        summary["inputs"] = names
    paths.append(os.path.join(out_dir, "summary.json"))
    with atomic_open(paths[-1]) as fh:
        json.dump(summary, fh, indent=2, default=float)
    return paths


# ------------------------------------------------------------------------------------------------
# The command line
def add_model_arguments(p, declared=_parameters.SHOOT_DECLARED):
    """The geodesic's and the descent's options (`pyca shoot`'s; `pyca regress` leaves out --scales and --band:
    it runs at full resolution), from their declaration (parameters.SHOOT_DECLARED: each option given is
    recorded, parameters.given_of)."""
    _parameters.add_arguments(p, declared, _parameters.SHOOT_GROUPS)
    p.add_argument("--no-compress", action="store_true", help="write .nii instead of .nii.gz")
    p.add_argument("--overwrite", action="store_true", help="replace the outputs of a previous run in --out")


def model_params(a, defaults):
    return {k: getattr(a, k) for k in defaults if hasattr(a, k)}


def add_parser(sub):
    from .._docs import page
    from ..cli import add_verbosity

    p = sub.add_parser("shoot", help="register two images by geodesic shooting (vector-momentum LDDMM)",
                       description="Register --moving onto --fixed along the geodesic of an initial momentum m0 "
                       "(EPDiff), m0 found by gradient descent; writes m0, phiinv, deformed, jacdet and summary.json "
                       "(docs/shoot.md).",
                       epilog="Documentation (outputs, model, parameters): " + page("shoot"))
    p.add_argument("--fixed", required=True, help="fixed (target) image")
    p.add_argument("--moving", required=True, help="moving image (placed on the fixed grid by its affine)")
    p.add_argument("--out", default="pyca-shoot-out", help="output folder (default %(default)s)")
    add_model_arguments(p)
    add_verbosity(p, False)
    p.set_defaults(func=run)
    return p


def start(a, name, load, **extra):
    """The start of `pyca shoot` and `pyca regress`: say (print, silent with --quiet), the model's
    parameters from the arguments (and extra), and load(params) (checks and reads the inputs) with the
    input errors (cli.input_errors()) said in one line. Returns (say, params, load's result), or None
    after such an error (the command then exits 2)."""
    from ..cli import input_errors

    say = (lambda *x: None) if getattr(a, "quiet", False) else (lambda *x: print(*x, flush=True))
    params = dict(model_params(a, DEFAULTS), **extra)
    try:
        return say, params, load(params)
    except input_errors() as e:
        print(f"pyca {name}: error: {e}", file=sys.stderr)
        return None


def claim(a, name, outputs, inputs):
    """--out claimed for `pyca shoot` and `pyca regress` (pyca._files.claim_out_dir: an input that an output
    would replace is refused, the folder locked), its refusals said in one line: an ExitStack holding the
    claim, or None after such an error (the command then exits 2)."""
    import contextlib

    from .._files import claim_out_dir
    from ..cli import input_errors

    stack = contextlib.ExitStack()
    try:
        stack.enter_context(claim_out_dir(a.out, a.overwrite, outputs=outputs, inputs=inputs))
    except input_errors() as e:
        stack.close()
        print(f"pyca {name}: error: {e}", file=sys.stderr)
        return None
    return stack


def _load(a, params):
    device_of(check(_parameters.merged(DEFAULTS, params, "shoot"), given=_parameters.given_of(a), options=True))
    fixed, moving = pio.load_image(a.fixed), pio.load_image(a.moving)
    check_images([("the fixed image", fixed), ("the moving image", moving)])
    check_world_overlap(fixed.grid(), moving.grid(), f"the fixed image {a.fixed}", f"the moving image {a.moving}",
                        "shoot")
    check_images([("the moving image placed on the fixed grid", on_grid(moving, fixed.grid()))])
    return fixed, moving


def run(a):
    started = start(a, "shoot", lambda params: _load(a, params))
    if started is None:
        return 2
    say, params, (fixed, moving) = started
    names = {"fixed": a.fixed, "moving": a.moving}
    outputs = [n + e for n in OUTPUTS + (transform_files.FORWARD_WARP, transform_files.INVERSE_WARP)
               for e in (".nii", ".nii.gz")] + [transform_files.AFFINE, transform_files.AFFINE_TEXT]
    claimed = claim(a, "shoot", outputs, [a.fixed, a.moving])
    if claimed is None:
        return 2
    with claimed:
        res = register(fixed, moving, progress=not getattr(a, "quiet", False), **params)
        paths = write_outputs(res, a.out, compress=not a.no_compress, names=names)
    s = res.summary()
    say(f"pyca shoot: {res.device}; {s['iterations']} iterations ({s['stop']}), energy {res.report['energy_start']:.6g} "
        f"-> {res.final_energy:.6g}, mismatch {res.initial_mismatch:.6g} -> {res.final_mismatch:.6g}")
    say(f"  det D phiinv in [{s['jacobian_min']:.4g}, {s['jacobian_max']:.4g}]; "
        f"{res.timings['per_iteration_s'] * 1e3:.1f} ms per iteration"
        + (f"; {s['folding_steps_rejected']} steps rejected: their map would fold or fall to det D phiinv <= "
           f"{res.params['min_jacobian']:g}" if s["folding_steps_rejected"]
           else ""))
    say(f"  wrote {len(paths)} files to {os.path.abspath(a.out)}")
    if not res.quality["ok"]:
        advice = ("--folding-steps reject undoes the steps whose map folds" if res.params["folding_steps"] == "accept"
                  else "a larger --alpha or more --time-steps")
        print(f"pyca shoot: registration failed: {quality.message(res.quality)} (outputs in {a.out}; {advice})",
              file=sys.stderr)
        return quality.EXIT_FAILED_REGISTRATION
    return 0
