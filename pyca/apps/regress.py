"""Geodesic regression of images over time by vector momentum (`pyca regress`; Singh, Hinkle, Joshi and
Fletcher, ISBI 2013): one geodesic, fixed by a base image I0 and an initial momentum m0, that passes
closest to images J_k observed at times t_k.

    from pyca.apps import regress
    res = regress.fit([(0.0, "t0.nii.gz"), (1.5, "t1.nii.gz"), (3.0, "t2.nii.gz")])
    res.m0, res.base, res.fitted (the geodesic's image at each t_k), res.final_energy

The times are mapped onto [0, 1] (the first time to 0, the last to 1) and onto the geodesic's T time
steps (each to the nearest; summary.json says where they fell). The energy, per voxel,

    E(I0, m0) = ( 1/2 <m0, K m0> + sum_k || I0 o phi_{t_k,0} - J_k ||^2 / (2 sigma^2) ) / N

is lowered by gradient descent in m0 (the adjoint sweep of pyca.registration.geodesic, with the image
adjoint's jumps at every t_k) and, with estimate_base (the default), in I0 too; I0 starts as the
earliest image. Every image is placed on the first image's grid by its affine. docs/shoot.md.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from .. import core as ca
from .. import io as pio
from ..registration import optimisers
from ..registration import parameters as _parameters
from ..registration.geodesic import Geodesic, GeodesicFit
from ..registration.inputs import as_image, check_world_overlap, on_grid
from ._device import wait
from . import shoot

__all__ = ["fit", "atlas", "RegressionResult", "AtlasResult", "DEFAULTS", "add_parser", "time_steps_of"]

DEFAULTS = dict(shoot.DEFAULTS, estimate_base=True)


@dataclass
class RegressionResult:
    m0: object  # Field3D: the initial momentum at the base time
    base: object  # Image3D: I0, the geodesic's image at the first time (normalised intensities)
    fitted: list  # Image3D per input: I0 o phi_{t_k,0}
    times: list  # the input times
    steps: list  # the time step each input fell on
    energies: list
    initial_mismatch: float
    final_mismatch: float
    timings: dict
    device: str
    params: dict
    report: dict
    momentum_energies: list

    @property
    def final_energy(self):
        acc = [e for e in self.energies if e["accepted"]]
        return acc[-1]["energy"] if acc else self.report.get("energy_start", float("nan"))

    def summary(self):
        g = self.base.grid()
        p = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.params.items()}
        return {"device": self.device, "grid": {"size": list(g.size()), "spacing": list(g.spacing()),
                                                "origin": list(g.origin())},
                "params": p, "times": self.times, "time_steps_of_inputs": self.steps,
                "energy": "(1/2 <m0, K m0> + sum_k ||I0 o phi_{t_k,0} - J_k||^2 / (2 sigma^2)) / N",
                "initial_mismatch": self.initial_mismatch, "final_mismatch": self.final_mismatch,
                "final_energy": self.final_energy, "momentum_energies": self.momentum_energies,
                "stop": self.report.get("stop"), "iterations": self.report.get("iterations"),
                "folding_steps_rejected": self.report.get("folding_steps_rejected"),
                "timings": self.timings, "energies": self.energies}


def time_steps_of(times, T):
    """The time step (0 .. T) of each time, the first mapped to 0 and the last to T."""
    t = np.asarray([float(x) for x in times])
    if t.size < 2 or not np.all(np.isfinite(t)):
        raise ValueError(f"regress: need at least two finite times, got {list(times)}")
    lo, hi = float(t.min()), float(t.max())
    if not hi > lo:
        raise ValueError(f"regress: the times must not all be equal, got {list(times)}")
    steps = [int(round((x - lo) / (hi - lo) * T)) for x in t]
    for i in range(t.size):
        for j in range(i):
            if steps[i] == steps[j] and t[i] != t[j]:
                raise ValueError(f"regress: the times {t[j]:g} and {t[i]:g} fall on the same time step of {T} "
                                 "(raise time_steps / --time-steps)")
    return steps


def _checked(params, prog, given=None, options=False):
    """The full parameters of params, checked (shoot.check's rules; given: the names set explicitly, by
    default the keywords whose value differs from DEFAULTS)."""
    given = _parameters.explicit(params, DEFAULTS) if given is None else given
    p = shoot.check(_parameters.merged(DEFAULTS, params, prog), prog, given, options)
    if tuple(int(f) for f in p["scales"]) != (1,):
        raise ValueError(f"{prog}: scales {tuple(p['scales'])} are not supported: geodesic regression runs at full "
                         "resolution (scales=(1,)); coarse to fine is pyca shoot's")
    if p["band"]:
        raise ValueError(f"{prog}: band {p['band']} is not supported: the band-limited geodesic is pyca shoot's (band=0)")
    return p


def fit(observations, *, progress=False, **params):
    """Geodesic regression of observations [(time, image), ...] (images: Image3D, arrays or paths).
    Returns a RegressionResult."""
    from .._progress import progress_bar

    p = _checked(params, "regress")
    obs = sorted(((float(t), im) for t, im in observations), key=lambda o: o[0])
    t_start = time.perf_counter()
    mem, device = shoot.device_of(p, "regress")
    steps = time_steps_of([t for t, _ in obs], p["time_steps"])
    hosts = [(f"the image at time {t:g}", as_image(im, f"image {k}")) for k, (t, im) in enumerate(obs)]
    shoot.check_images(hosts, "regress")
    grid = hosts[0][1].grid()
    ims = [shoot.prepared(on_grid(im, grid), mem, p, what, "regress") for what, im in hosts]
    base = ims[0].clone(mem)
    K = shoot.kernel_of(grid, p)
    geo = Geodesic(grid, mem, p["time_steps"], K, keep=p["keep"])
    prob = GeodesicFit(geo, base, list(zip(steps, ims)), p["sigma"], estimate_base=p["estimate_base"],
                       reject_folds=p["folding_steps"] == "reject",
                       min_jacobian=p["min_jacobian"])
    m_start = prob.forward()[0] * 2 * prob.sigma2 * prob.N
    wait(mem)
    t0 = time.perf_counter()
    records = []
    pbar = progress_bar(p["iterations"], "regress", disable=not progress)
    try:
        rep = optimisers.descend(prob, p["iterations"], step=p["step"], max_step=p["max_step"], tol=p["tol"],
                                 records=records, label="regress", pbar=pbar, forwarded=True)
    finally:
        pbar.close()
    rep["folding_steps_rejected"] = prob.folds_rejected
    m_end = prob.forward()[0] * 2 * prob.sigma2 * prob.N
    wait(mem)
    t1 = time.perf_counter()
    fitted = [prob.images(j, ca.Image3D(grid, mem)) for j in steps]
    mom = geo.energies()
    n_it = max(1, rep["iterations"])
    timings = {"registration_s": t1 - t0, "per_iteration_s": (t1 - t0) / n_it, "total_s": time.perf_counter() - t_start}
    return RegressionResult(m0=prob.m0, base=prob.base, fitted=fitted, times=[t for t, _ in obs], steps=steps,
                            energies=records, initial_mismatch=m_start, final_mismatch=m_end, timings=timings,
                            device=device, params=p, report=rep, momentum_energies=mom)


@dataclass
class AtlasResult:
    template: object  # Image3D: the template (normalised intensities)
    m0: list  # Field3D per subject: the momentum from the template to it
    energies: list  # the atlas energy (sum over subjects, per voxel) after each template update
    params: dict


def atlas(images, *, template_iterations=5, iterations=10, progress=False, **params):
    """A template and one geodesic from it to each image (Singh et al.'s vector-momentum atlas), by
    alternating `iterations` descent steps of every subject's initial momentum (GeodesicFit, the
    template as base image) with a damped Gauss-Newton update of the template from the subjects' base
    image gradients (the adjoint's I^_0: T <- T + sigma^2 / n sum_i I^_0,i, which is the Jacobian-weighted
    mean of the subjects pulled back when the Jacobians are near 1). images: Image3D, arrays or paths,
    placed on the first one's grid; the template starts as their mean. progress: a bar of the subjects'
    descents (template_iterations x subjects). Python only (no command)."""
    from .._progress import progress_bar

    p = _checked(dict(params, iterations=iterations), "atlas")
    mem, _ = shoot.device_of(p, "atlas")
    hosts = [(f"image {k}", as_image(im, f"image {k}")) for k, im in enumerate(images)]
    shoot.check_images(hosts, "atlas")
    grid = hosts[0][1].grid()
    ims = [shoot.prepared(on_grid(im, grid), mem, p, what, "atlas") for what, im in hosts]
    n = len(ims)
    if n < 2:
        raise ValueError(f"atlas: need at least two images, got {n}")
    T = p["time_steps"]
    template = ca.Image3D(grid, mem)
    ca.SetMem(template, 0.0)
    for im in ims:
        ca.Add_MulC_I(template, im, 1.0 / n)
    geo = Geodesic(grid, mem, T, shoot.kernel_of(grid, p), keep=p["keep"])
    ms = [None] * n
    acc = ca.Image3D(grid, mem)
    energies = []
    pbar = progress_bar(int(template_iterations) * n, "geodesic atlas", unit="fit", disable=not progress)
    try:
        for k in range(int(template_iterations)):
            ca.SetMem(acc, 0.0)
            total = 0.0
            for i, J in enumerate(ims):
                fit_i = GeodesicFit(geo, template, [(T, J)], p["sigma"], m0=ms[i],
                                    reject_folds=p["folding_steps"] == "reject", min_jacobian=p["min_jacobian"])
                optimisers.descend(fit_i, p["iterations"], step=p["step"], max_step=p["max_step"], tol=p["tol"])
                m, _ = fit_i.forward()
                total += m + fit_i.reg_energy()
                ca.Add_I(acc, fit_i.gradients())  # the base image's I^_0 for this subject
                ms[i] = fit_i.m0
                pbar.set_postfix_str(f"template iteration {k + 1}, subject {i + 1}", refresh=False)
                pbar.update(1)
            energies.append(total)
            ca.Add_MulC_I(template, acc, fit_i.sigma2 / n)
    finally:
        pbar.close()
    return AtlasResult(template=template, m0=ms, energies=energies, params=p)


def _observation(text):
    import argparse

    path, sep, t = text.rpartition(":")
    if not sep or not path:
        raise argparse.ArgumentTypeError(f"expected IMAGE:TIME, got {text!r}")
    try:
        return float(t), path
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected IMAGE:TIME with a number after the last ':', got {text!r}") from None


def add_parser(sub):
    from .._docs import page
    from ..cli import add_verbosity

    p = sub.add_parser("regress", help="geodesic regression of images over time (vector momentum)",
                       description="Fit one geodesic (a base image and an initial momentum) to images observed at "
                       "several times; writes m0, base, fitted_<k> for each input and summary.json (docs/shoot.md).",
                       epilog="Documentation (outputs, model, parameters): " + page("shoot"))
    p.add_argument("observations", nargs="+", type=_observation, metavar="IMAGE:TIME",
                   help="an image and its time (any unit), at least two")
    p.add_argument("--out", default="pyca-regress-out", help="output folder (default %(default)s)")
    p.add_argument("--fixed-base", action="store_true", help="keep the earliest image as the base image I0 (default: "
                   "estimate it)")
    # (full resolution, no band: regress takes neither --scales nor --band)
    shoot.add_model_arguments(p, [q for q in _parameters.SHOOT_DECLARED if q.name not in ("scales", "band")])
    add_verbosity(p, False)
    p.set_defaults(func=run)
    return p


def _load(a, params):
    shoot.device_of(_checked(params, "regress", _parameters.given_of(a), options=True), "regress")
    obs = [(t, pio.load_image(path)) for t, path in a.observations]
    shoot.check_images([(f"{path} (time {t:g})", im) for (t, im), (_, path) in zip(obs, a.observations)], "regress")
    (t0, first), first_path = obs[0], a.observations[0][1]
    for (t, im), (_, path) in list(zip(obs, a.observations))[1:]:
        check_world_overlap(first.grid(), im.grid(), f"{first_path} (time {t0:g})", f"{path} (time {t:g})", "regress")
    time_steps_of([t for t, _ in obs], params["time_steps"])
    return obs


def run(a):
    started = shoot.start(a, "regress", lambda params: _load(a, params), estimate_base=not a.fixed_base)
    if started is None:
        return 2
    say, params, obs = started
    n = len(obs)
    outputs = [f"{x}{e}" for x in ["m0", "base"] + [f"fitted_{k}" for k in range(n)] for e in (".nii", ".nii.gz")]
    claimed = shoot.claim(a, "regress", outputs, [path for _, path in a.observations])
    if claimed is None:
        return 2
    with claimed:
        res = fit(obs, progress=not getattr(a, "quiet", False), **params)
        ext = ".nii" if a.no_compress else ".nii.gz"
        os.makedirs(a.out, exist_ok=True)
        paths = []
        items = [("m0", res.m0), ("base", res.base)] + [(f"fitted_{k}", f) for k, f in enumerate(res.fitted)]
        for name, obj in items:
            paths.append(os.path.join(a.out, name + ext))
            if isinstance(obj, ca.Field3D):
                pio.save_field(obj, paths[-1], description=f"pyca regress {name}")
            else:
                pio.save_image(obj, paths[-1], description=f"pyca regress {name}")
        import json

        from .._files import atomic_open

        summary = res.summary()
        summary["inputs"] = [path for _, path in sorted(a.observations, key=lambda o: o[0])]
        summary["files"] = [os.path.basename(x) for x in paths] + ["summary.json"]
        paths.append(os.path.join(a.out, "summary.json"))
        with atomic_open(paths[-1]) as fh:
            json.dump(summary, fh, indent=2, default=float)
    say(f"pyca regress: {res.device}; {n} images at steps {res.steps} of {res.params['time_steps']}; "
        f"{res.report['iterations']} iterations ({res.report['stop']}); mismatch {res.initial_mismatch:.6g} -> "
        f"{res.final_mismatch:.6g}")
    say(f"  wrote {len(paths)} files to {os.path.abspath(a.out)}")
    return 0
