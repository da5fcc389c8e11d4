"""The parameters of registration, each declared once (docs/design/registration.md, docs/lddmm.md).

Every parameter that pyca.apps.lddmm.register (and so `pyca lddmm`, `pyca atlas` and `pyca
register-batch`) takes is one ``Parameter`` in ``DECLARED``: its name, kind, default, bounds or
choices, unit and help text. Built from that one declaration:

- ``DEFAULTS``: name -> default;
- ``check(p, prog)``: the one validation (a bad value is refused in one line naming the parameter);
- ``add_arguments(parser)``: the options of `pyca lddmm`, with their types, choices, bounds and
  --help text; ``from_args(namespace)``: the parameters of a parsed command line;
- ``parse_assignments(["alpha=2", ...])``: the -p KEY=VALUE options of `pyca atlas` and `pyca
  register-batch`, each value read as its declared kind.

The other programs' parameters are declared the same way: ``SYN_DECLARED`` (pyca.apps.syn, `pyca
register`), ``SHOOT_DECLARED`` (pyca.apps.shoot and regress, `pyca shoot` / `pyca regress`) and
``AFFINE_DECLARED`` (pyca.apps.affine's match options). Where a parameter is used only by some runs, its
``applies`` says so, and ``check_applies`` (the one rule) refuses it given where the run would ignore it.
"""
from __future__ import annotations

import argparse
import math
import numbers
from dataclasses import dataclass

import numpy as np

from .metrics import DEFAULT_ALPHA, DEFAULT_ITERATIONS, DEFAULT_MOMENTUM, DEFAULT_SIGMA, DEFAULT_TOL, METRICS, MI_BINS
from .geodesic import KEEP
from .transforms import LINEAR_KINDS

__all__ = ["Parameter", "DEVICES", "DECLARED", "DEFAULTS", "NORMALIZE", "GROUPS", "SYN", "SYN_DECLARED", "SYN_METRICS",
           "SYN_METRIC_DEFAULTS", "SYN_DEFAULTS", "SHOOT_DECLARED", "SHOOT_DEFAULTS", "SHOOT_GROUPS", "AFFINE_DECLARED",
           "get",
           "merged", "check", "check_declared", "check_value", "check_applies", "explicit", "given_of",
           "schedule", "add_arguments", "from_args", "files_of", "parse_value", "parse_assignments"]

DEVICES = ("auto", "cpu", "gpu")  # where a program runs ('auto': the GPU when one can be used)
NORMALIZE = ("percentiles", "histogram", "none")  # the values of normalize (docs/lddmm.md, 'Intensities')
# The blur trilinear interpolation gives the warped moving image, on average: at fraction t along an
# axis the two weights 1 - t, t have variance t (1 - t), whose mean over t is 1/6 (voxels^2).
INTERP_BLUR = float(np.sqrt(1.0 / 6.0))
INTERP_BLURS = ("matched", "none")  # the values of interp_blur (docs/lddmm.md, 'Interpolation blur')
PADS = ("fft", "none")  # the values of pad (docs/lddmm.md, 'The working grid')

# Kinds: 'real' and 'int' (a finite number, not a boolean, within [lo, hi], each end open or closed;
# 'int': an integral value), 'choice' (one of choices), 'ints' (a sequence of integers, or one),
# 'reals' (a sequence of numbers), 'step' ('auto' or a real), 'file' (an image: a path, or an image
# in the library), 'device' ('auto' | 'cpu' | 'gpu', or a MemoryType in the library), 'any'.


@dataclass(frozen=True)
class Parameter:
    name: str
    kind: str
    default: object
    help: str = ""  # the --help text (argparse: %(default)s is the default); '' for 'default %(default)s'
    unit: str = ""
    lo: float = None
    hi: float = None
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple = ()
    group: str = None  # the `pyca lddmm` option group; None: not an option of `pyca lddmm`
    cli_hi: float = None  # a stricter upper bound on the command line (what a run can do in reasonable time)
    assignable: bool = True  # accepted by -p KEY=VALUE
    casefold: bool = False  # a choice in any case ('SSD')
    # when the run uses it: None (always), or a function of the parameters p -> None (p's run uses this
    # parameter's value) or (other parameter, the values of it this one needs[, a note]): a value given
    # explicitly that the run would ignore (or override) is refused (check(..., given=...))
    applies: object = None
    inert: tuple = ()  # values that are accepted even where the parameter does not apply (0: off)

    @property
    def option(self):
        return "--" + self.name.replace("_", "-")

    def bounds_text(self, hi=None):
        hi = self.hi if hi is None else hi
        what = "an integer" if self.kind in ("int", "ints") else "a number"
        if self.lo is not None and hi is not None and math.isfinite(hi):
            return f"{what} in {'(' if self.lo_open else '['}{self.lo:g}, {hi:g}{')' if self.hi_open else ']'}"
        if self.lo is not None:
            return f"{what} {'>' if self.lo_open else '>='} {self.lo:g}"
        return what


_REG = ("regularisation: L = ((-alpha Laplacian - beta grad div + gamma) / gamma)^lpow (K = L^-1 has gain 1 at "
        "the zero frequency and is close to a Gaussian of width sqrt(2 lpow alpha / gamma) world units)")
_OPT = "optimisation"
_MATCH = "match term, linear stage, masks and labels"
GROUPS = (_REG, _OPT, _MATCH)  # in the order of `pyca lddmm --help`


def _per_metric(table):
    """'1 for lncc, 0.05 for ssd' (or '10,150,150 for lncc, ...'): a per-metric default, for --help."""
    text = lambda v: ",".join(str(x) for x in v) if isinstance(v, tuple) else f"{v:g}"  # noqa: E731
    return ", ".join(f"{text(v)} for {k}" for k, v in sorted(table.items()))


def _metric(p):
    return str(p["metric"]).lower()


def _for_metrics(*names):
    """applies: only with a metric among names."""
    return lambda p: None if _metric(p) in names else ("metric", " or ".join(names))


def _when(other, test, wanted):
    """applies: only where test(p[other]) holds (wanted: those values, in words)."""
    return lambda p: None if test(p[other]) else (other, wanted)


_INF = float("inf")
DECLARED = (
    Parameter("device", "device", "auto", "where to run (default: %(default)s: the GPU when one can be used)",
              choices=DEVICES, group=""),
    Parameter("alpha", "real", None, "larger: a wider kernel, a smoother map (default: the metric's, "
              f"{_per_metric(DEFAULT_ALPHA)})",
              unit="per world unit", lo=0, lo_open=True, group=_REG),
    Parameter("beta", "real", 0.0, "weight of -grad div: larger, volume changes cost more (default %(default)s)",
              lo=0, group=_REG),
    Parameter("gamma", "real", 0.02, "larger: a narrower kernel, a less smooth map (default %(default)s)", lo=0,
              group=_REG),
    Parameter("lpow", "int", 8, "higher: K closer to a Gaussian, wider, a smoother map (default %(default)s)",
              lo=1, hi=64, cli_hi=16, group=_REG),
    Parameter("sigma", "real", None, "noise level of the image match (normalised intensities): smaller, a closer "
              "match and a larger deformation; larger, a smoother one (default: the metric's, "
              f"{_per_metric(DEFAULT_SIGMA)})", lo=0, lo_open=True, group=_OPT),
    Parameter("step", "step", "auto", "gradient step eps in (0, 0.5), or 'auto': each scale's first step moves a "
              "velocity by at most --max-step voxels (default %(default)s)",
              lo=0, hi=0.5, lo_open=True, hi_open=True, group=_OPT),
    Parameter("max_step", "real", 0.5, "with --step auto: largest velocity change of a scale's first step, in voxels "
              "(default %(default)s)", unit="voxels", lo=0, lo_open=True, group=_OPT,
              applies=_when("step", lambda v: v == "auto", "auto")),
    Parameter("iterations", "ints", None, "iterations per scale, e.g. 60,40,20 (default: the metric's, "
              f"{_per_metric(DEFAULT_ITERATIONS)})", lo=0, hi=_INF, cli_hi=100_000, group=_OPT),
    Parameter("scales", "ints", (4, 2, 1), "downsampling factors, coarse to fine, ending with 1 (default %(default)s)",
              lo=1, group=_OPT),
    Parameter("time_steps", "int", 4, "time steps T (default %(default)s)", lo=1, hi=10000, cli_hi=1000, group=_OPT),
    Parameter("normalize", "choice", "histogram", "intensities: 'percentiles' scales each image's 0.5-99.5 percentile "
              "range to [0, 1]; 'histogram' maps the moving image's quantiles onto the fixed image's, then scales both "
              "alike (same contrast, e.g. T1 to T1); 'none' (default %(default)s)", choices=NORMALIZE, group=_OPT,
              applies=lambda p: ("metric", "ssd or lncc") if p["normalize"] == "histogram" and _metric(p) == "mi"
              else None),
    Parameter("bias_sigma", "real", 10.0, "bias correction: the fixed image takes, at each scale, the warped moving "
              "image's smooth intensity gain (a Gaussian of this many world units, mm); 0: off (default %(default)s)",
              unit="world units", lo=0, group=_OPT,
              applies=_for_metrics("ssd", "lncc"), inert=(0,)),
    Parameter("band_tol", "real", 1e-4, "the kernel K keeps, per axis, the frequencies where its symbol is above this "
              "fraction of its peak (band-limited velocities: fewer transforms); 0: every frequency "
              "(default %(default)g)", lo=0, hi=1, hi_open=True, group=_OPT),
    Parameter("pad", "choice", "fft", "'fft': the solver works on the fixed grid extended at its far ends (border "
              "values repeated) to sizes with no prime factor above 5 at every scale, where the kernel K's FFTs cost a "
              "half to a third of those on sizes such as 47 or 29; the outputs are on the fixed grid; 'none' "
              "(default %(default)s)", choices=PADS, group=_OPT),
    Parameter("interp_blur", "choice", "matched", "'matched': at each iteration the warped moving image is compared "
              "with the fixed image plus the bias trilinear interpolation gives it at each voxel (t(1 - t) / 2 times "
              "the moving image's second difference per axis, t the fraction of the point where it is sampled: none "
              "at a voxel, so an image registered onto itself stays put); with metric mi (other contrasts) its contrast-free "
              "form, the fixed image smoothed by fixed_blur of at least sqrt(1/6); 'none' (default %(default)s)",
              choices=INTERP_BLURS, group=_OPT),
    Parameter("fixed_blur", "real", 0.0, "the fixed image is also smoothed by a Gaussian of this many moving-image "
              "voxels before any comparison (sqrt(1/6) = 0.41: trilinear interpolation's mean blur, the same for "
              "every voxel); 0: off (default %(default).3g)", unit="moving-image voxels", lo=0, hi=10, group=_OPT,
              applies=lambda p: ("interp_blur", "none", f" (with metric mi, 'matched' smooths the fixed image by at "
                                 f"least sqrt(1/6) = {INTERP_BLUR:.3g})") if p["interp_blur"] == "matched" and
              _metric(p) == "mi" and _real(p["fixed_blur"]) and p["fixed_blur"] < INTERP_BLUR else None),
    Parameter("tol", "real", None, "a scale stops when its last 5 iterations gained less than 5 x this of its gain so "
              f"far (default: the metric's, {_per_metric(DEFAULT_TOL)})", lo=0, group=_OPT),
    Parameter("momentum", "real", None, "each update adds this fraction of the last accepted step (heavy-ball "
              "momentum; 0: plain gradient descent; default: the metric's, "
              f"{_per_metric(DEFAULT_MOMENTUM)})", lo=0, hi=1, hi_open=True, group=_OPT),
    Parameter("metric", "choice", "ssd", "ssd and lncc compare images of one contrast; mi (mutual information) "
              "images of different contrasts, e.g. T1 onto T2 or FLAIR (default %(default)s)", choices=METRICS,
              group=_MATCH, casefold=True),
    Parameter("radius", "int", 3, "LNCC window radius in voxels (default %(default)s)", unit="voxels", lo=1, hi=_INF,
              group=_MATCH,
              applies=_for_metrics("lncc")),
    Parameter("bins", "int", MI_BINS, "mi: bins per image of the joint histogram (default %(default)s)", lo=4, hi=1024,
              group=_MATCH,
              applies=_for_metrics("mi")),
    Parameter("affine", "choice", "auto", "linear stage before LDDMM (default %(default)s: affine when the grids or "
              "the centres of mass differ)", choices=("auto",) + LINEAR_KINDS, group=_MATCH),
    Parameter("fixed_mask", "file", None, "0/1 image on the fixed grid: the match term counts only its voxels",
              group=_MATCH, assignable=False),
    Parameter("moving_mask", "file", None, "0/1 image on the moving grid", group=_MATCH, assignable=False),
    Parameter("moving_labels", "file", None, "integer label image on the moving grid, warped by nearest neighbour "
              "into labels.nii.gz", group=_MATCH, assignable=False),
    Parameter("percentiles", "reals", (0.5, 99.5), "the robust intensity range of normalize 'percentiles' "
              "(low, high)", lo=0, hi=100,
              applies=_when("normalize", lambda v: v != "none", "percentiles or histogram")),
    Parameter("names", "any", None, "role -> file name, for messages", assignable=False),
)
_BY_NAME = {q.name: q for q in DECLARED}
DEFAULTS = {q.name: q.default for q in DECLARED}

# The parameters of pyca.apps.syn.register (`pyca register --method syn`, docs/syn.md). Its group is
# `pyca register`'s option group; scales and iterations are options of `pyca register` for either method
# (their defaults depend on it), so they are not built from here.
SYN = "syn"


def _syn_percentiles(p):
    """applies of syn's percentiles: not with normalize 'none'; with 'foreground' the low end of an image
    without a mask is its minimum (pyca.apps.syn.intensity_range), so a low percentile other than 0 is used only when
    both images have a mask."""
    if p["normalize"] == "none":
        return "normalize", "foreground or percentiles"
    lo, hi = p["percentiles"]
    if p["normalize"] == "foreground" and lo != 0 and (p.get("fixed_mask") is None or p.get("moving_mask") is None):
        return ("normalize", "percentiles", f" (with 'foreground' the low end is the image's minimum where it has no "
                f"mask: give percentiles=(0, {hi:g}) for the high end alone, normalize 'percentiles', or both masks)")
    return None


SYN_METRICS = ("lncc", "mi")  # the values of syn's metric (docs/syn.md, 'Images of different contrasts')
# syn's defaults that differ with its metric, taken where the caller did not give the parameter
# (docs/performance.md, 'The symmetric method with mi': smooth_update 1.5 with mi gained 0.002-0.011 on the
# four 1 mm pairs measured).
SYN_METRIC_DEFAULTS = {"lncc": {}, "mi": {"smooth_update": 1.5, "smooth_field": 0.42}}
_SYN_SMOOTH_UPDATE = 1.0
SYN_DECLARED = (
    Parameter("device", "device", "auto", choices=DEVICES),
    Parameter("scales", "ints", (4, 2, 1), "downsampling factors, coarse to fine, ending with 1", lo=1),
    Parameter("iterations", "ints", (80, 50, 25), "iterations per scale", lo=0, hi=_INF),
    Parameter("metric", "choice", "lncc", "the match of the two images at the midpoint: lncc (local normalised "
              "cross-correlation: one contrast, e.g. T1 onto T1) or mi (mutual information of their joint "
              "histogram: different contrasts, e.g. T1 onto T2 or FLAIR); with --method lddmm: ssd, lncc or mi, "
              "pyca lddmm's metrics, its own when not given (default lncc)",
              choices=SYN_METRICS,
              group=SYN, casefold=True),
    Parameter("bins", "int", 32, "mi: bins per image of the joint histogram (default %(default)s)", lo=4,
              hi=1024, group=SYN,
              applies=_for_metrics("mi")),
    Parameter("radius", "int", 2, "LNCC window radius, voxels (default %(default)s)", unit="voxels", lo=1, hi=16,
              group=SYN,
              applies=_for_metrics("lncc")),
    Parameter("step", "real", 1.0, "largest displacement of one update, voxels (default %(default)s)",
              unit="voxels", lo=0, lo_open=True, group=SYN),
    Parameter("smooth_update", "real", _SYN_SMOOTH_UPDATE, "Gaussian sigma of the update fields, voxels; with "
              f"--metric mi {SYN_METRIC_DEFAULTS['mi']['smooth_update']:g} (default {_SYN_SMOOTH_UPDATE})",
              unit="voxels", lo=0, lo_open=True, group=SYN),
    Parameter("smooth_field", "real", 0.5, "Gaussian sigma applied to the two maps' displacements after each "
              f"update, voxels; 0: off; with --metric mi {SYN_METRIC_DEFAULTS['mi']['smooth_field']:g} (default 0.5)",
              unit="voxels", lo=0, group=SYN),
    Parameter("inverse", "choice", "newton", "how each scale's inverse maps are computed: newton (robust where a "
              "map stretches) or fixed-point (PyCA's FixedPointInverse) (default %(default)s)",
              choices=("newton", "fixed-point"), group=SYN),
    Parameter("max_log_det", "real", 0.5, "each map's volume change beyond e^+-this is pushed back "
              "(a descent step of the squared excess of |log det|); 0: off (default %(default)s)", lo=0, group=SYN),
    Parameter("det_stiffness", "real", 10.0, "with --max-log-det: voxels moved per unit of the excess's gradient "
              "per iteration (default %(default)s)", lo=0, group=SYN,
              applies=_when("max_log_det", lambda v: v > 0, "> 0")),
    Parameter("inverse_iterations", "int", 10, "iterations of each scale's inverse maps (default %(default)s)",
              lo=1, hi=100, group=SYN),
    Parameter("interp_blur", "choice", "matched", "'matched': at the finest scale the bias (blur) trilinear "
              "interpolation gives each warped image is removed, so that the two are compared as if sampled "
              "exactly; 'none': as sampled (default %(default)s)", choices=INTERP_BLURS, group=SYN),
    Parameter("lncc_eps", "real", 1e-6, "LNCC's eps: the product of the two window variances is taken as vI vJ + "
              "eps (each image scaled to [0, 1]); larger: weaker forces where both windows are flat (default "
              "%(default)s)", lo=0, lo_open=True, group=SYN,
              applies=_for_metrics("lncc")),
    Parameter("tol", "real", 1e-3, "a scale stops when its last 5 iterations gained less than 5 x this of its gain "
              "so far (default %(default)s)", lo=0, group=SYN),
    Parameter("optimiser", "choice", "adam", "adam (momentum, per-voxel second moment) or greedy (each update "
              "scaled so that its largest force moves `step` voxels)", choices=("adam", "greedy")),
    Parameter("adam_eps", "real", 1.0, "Adam's eps, relative to the largest force of the scale", lo=0,
              lo_open=True,
              applies=_when("optimiser", lambda v: v == "adam", "adam")),
    Parameter("min_iterations", "int", 10, "iterations of a scale before its stop rule applies", lo=0, hi=_INF),
    Parameter("normalize", "choice", "foreground", "intensities: each image scaled by its own range ('foreground':"
              " its minimum and upper percentile above 1% of its range; 'percentiles'; 'none')",
              choices=("foreground", "percentiles", "none")),
    Parameter("percentiles", "reals", (0.5, 99.5), "the robust intensity range (low, high); with normalize "
              "'foreground' the low end is each image's minimum (low 0) but inside a mask", lo=0, hi=100,
              applies=_syn_percentiles),
    Parameter("affine", "choice", "auto", "linear stage", choices=("auto",) + LINEAR_KINDS),
    Parameter("fixed_mask", "file", None, "0/1 image on the fixed grid", assignable=False),
    Parameter("moving_mask", "file", None, "0/1 image on the moving grid", assignable=False),
    Parameter("moving_labels", "file", None, "integer label image on the moving grid", assignable=False),
    Parameter("names", "any", None, "role -> file name, for messages", assignable=False),
)
SYN_DEFAULTS = {q.name: q.default for q in SYN_DECLARED}

# The parameters of pyca.apps.shoot.register (`pyca shoot`) and pyca.apps.regress.fit (`pyca regress`, which
# takes all but scales and band), docs/shoot.md, with their bounds (pyca.apps.shoot.check applies them); the
# vector-momentum clients' operator and matching parameters (quicksilver's LDDMM settings: alpha 0.01, beta
# 0.01, gamma 0.001, lpow 1); sigma for intensities normalised to [0, 1]; 10 time steps give the clients'
# final energy (RK4, 5 steps) within 1% (docs/shoot.md).
SHOOT_GEODESIC = "geodesic: L = (-alpha Laplacian - beta grad div + gamma)^lpow, K = L^-1"
SHOOT_GROUPS = (SHOOT_GEODESIC, _OPT)  # in the order of `pyca shoot --help`
SHOOT_DECLARED = (
    Parameter("device", "device", "auto", "where to run (default %(default)s)", choices=DEVICES,
              group=""),
    Parameter("alpha", "real", 0.01, "weight of -Laplacian in L (larger: smoother velocities) (default %(default)s)",
              lo=0, lo_open=True, group=SHOOT_GEODESIC),
    Parameter("beta", "real", 0.01, "weight of -grad div in L (default %(default)s)", lo=0,
              group=SHOOT_GEODESIC),
    Parameter("gamma", "real", 0.001, "weight of the identity in L (K's gain at the zero frequency is gamma^-lpow) "
              "(default %(default)s)", lo=0, lo_open=True, group=SHOOT_GEODESIC),
    Parameter("lpow", "int", 1, "power of L (default %(default)s)", lo=1, hi=16, group=SHOOT_GEODESIC),
    Parameter("time_steps", "int", 10, "time steps T of the geodesic (default %(default)s)", lo=1, hi=1000,
              group=SHOOT_GEODESIC),
    Parameter("keep", "choice", "auto", "'all': keep m_t and v_t of every step (fastest); 'maps': only the maps (least "
              "memory); 'auto': 'all' while its fields take at most 6 GiB (default %(default)s)",
              choices=KEEP, group=SHOOT_GEODESIC),
    Parameter("scales", "ints", (1,), "downsampling factors, coarse to fine, ending with 1, e.g. 4,2,1 (the initial "
              "velocity is carried up) (default %(default)s)", group=_OPT),
    Parameter("sigma", "real", 0.1, "noise level of the image match (intensities normalised to [0, 1]): smaller, a "
              "closer match (default %(default)s)", lo=0, lo_open=True, group=_OPT),
    Parameter("iterations", "int", 100, "gradient-descent iterations at most (per scale) (default %(default)s)",
              lo=0, hi=100_000, group=_OPT),
    Parameter("step", "step", "auto", "'auto' (the first step changes the initial velocity by at most --max-step "
              "voxels) or a fixed step on m0, as the clients' stepSize (default %(default)s)", lo=0,
              lo_open=True, group=_OPT),
    Parameter("max_step", "real", 0.5, "with --step auto: the largest change of the initial velocity of the first "
              "step, voxels (default %(default)s)", unit="voxels", lo=0, lo_open=True, group=_OPT,
              applies=_when("step", lambda v: v == "auto", "auto")),
    Parameter("tol", "real", 1e-3, "stop when the last 5 iterations gained less than 5 x this of the gain so far "
              "(default %(default)s)", lo=0, group=_OPT),
    Parameter("normalize", "choice", "percentiles", "'percentiles': each image's 0.5-99.5 percentile range to [0, 1]; "
              "'none': as they are (default %(default)s)", choices=("percentiles", "none"), group=_OPT),
    Parameter("folding_steps", "choice", "reject", "'reject': a descent step whose map would fold (det D phiinv <= "
              "--min-jacobian somewhere) is undone and halved; 'accept': steps are judged by their energy alone "
              "(default %(default)s)", choices=("reject", "accept"), group=_OPT),
    Parameter("min_jacobian", "real", 0.05, "with --folding-steps reject: the det D phiinv a step must stay above "
              "everywhere (0: only folds are refused; a margin keeps the map off the edge of collapse) (default "
              "%(default)s)", lo=0, hi=1, hi_open=True, group=_OPT,
              applies=_when("folding_steps", lambda v: v == "reject", "reject")),
    Parameter("band", "int", 0, "keep the velocity's Fourier coefficients with |k| <= BAND on each axis (cycles over "
              "the image's box): a band-limited geodesic on a coarser grid, FLASH-style, faster (docs/shoot.md); 0: "
              "every frequency (default %(default)s)", lo=0, hi=100_000, group=""),
    Parameter("percentiles", "reals", (0.5, 99.5), "the robust intensity range of normalize 'percentiles' (low, high)",
              lo=0, hi=100, applies=_when("normalize", lambda v: v != "none", "percentiles")),
)
SHOOT_DEFAULTS = {q.name: q.default for q in SHOOT_DECLARED}

# The match term's options of pyca.apps.affine.register (a building block: no command of its own), where
# each applies; their defaults (None): LNCC's radius 2, mi's MI_BINS.
AFFINE_DECLARED = (
    Parameter("radius", "int", None, "LNCC window radius, voxels", applies=_for_metrics("lncc")),
    Parameter("bins", "int", None, "mi: bins per image of the joint histogram", applies=_for_metrics("mi")),
)


def get(name):
    """The Parameter called name."""
    return _BY_NAME[name]


# ------------------------------------------------------------------------------------------------
# Validation
def _real(v):
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) and bool(np.isfinite(v))


def _within(q, v, hi=None):
    hi = q.hi if hi is None else hi
    if not _real(v):
        return False
    if q.kind in ("int", "ints") and v != int(v):
        return False
    if q.lo is not None and (v <= q.lo if q.lo_open else v < q.lo):
        return False
    return hi is None or (v < hi if q.hi_open else v <= hi)


def check_value(q, v, prog="lddmm", hi=None):
    """Refuses v for the parameter q (a Parameter or a name) in one line, 'prog: name ... got v'."""
    q = get(q) if isinstance(q, str) else q
    if q.kind in ("real", "int") and not _within(q, v, hi):
        unit = f" ({q.unit})" if q.unit else ""
        raise ValueError(f"{prog}: {q.name}{unit} must be {q.bounds_text(hi)}, got {v!r}")
    if q.kind == "step" and v != "auto" and not _within(q, v, hi):
        raise ValueError(f"{prog}: {q.name} must be 'auto' or {q.bounds_text(hi)}, got {v!r}")
    if q.kind == "choice" and (str(v).lower() if q.casefold else v) not in q.choices:
        raise ValueError(f"{prog}: {q.name} must be one of {', '.join(q.choices)}, not {v!r}")
    return v


def schedule(scales, iterations, prog="lddmm"):
    """(scales, iterations) as two lists of ints of one length; refuses a bad schedule in one line."""
    scales = [scales] if isinstance(scales, (int, np.integer)) else list(scales)
    if not scales or any(int(s) != s or s < 1 for s in scales):
        raise ValueError(f"{prog}: scales must be integers >= 1 (downsampling factors), got {scales}")
    scales = [int(s) for s in scales]
    if any(a <= b for a, b in zip(scales, scales[1:])) or scales[-1] != 1:
        raise ValueError(f"{prog}: scales must decrease and end with 1 (full resolution), got {scales}")
    its = [iterations] * len(scales) if isinstance(iterations, (int, np.integer)) else list(iterations)
    if len(its) != len(scales):
        raise ValueError(f"{prog}: {len(its)} iteration counts ({its}) for {len(scales)} scales ({scales}): give "
                         "the iterations too, one count per scale or one for every scale")
    if any(int(i) != i or i < 0 for i in its):
        raise ValueError(f"{prog}: iteration counts must be integers >= 0, got {its}")
    return scales, [int(i) for i in its]


def merged(defaults, params, prog, refused=()):
    """dict(defaults) updated by params, or TypeError in one line naming `prog` and every key that is not
    a parameter of `defaults` (or is in `refused`, parameters this program cannot take)."""
    unknown = (set(params) - set(defaults)) | (set(params) & set(refused))
    if unknown:
        known = sorted(set(defaults) - set(refused))
        raise TypeError(f"{prog}: unknown parameter(s) {sorted(unknown)}; known: {known}")
    return {**defaults, **params}


def explicit(params, defaults):
    """The names of params a caller gave with a value other than its default in `defaults` (what
    check()'s `given` takes where the caller's own choices are not known: a program that passes its whole
    parameter set, defaults included, as pyca atlas and register-batch pass theirs to lddmm.register)."""
    def same(a, b):
        if isinstance(a, (list, tuple, np.ndarray)) or isinstance(b, (list, tuple, np.ndarray)):
            try:  # (a NumPy array equal to a tuple default is the default)
                return np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
            except (TypeError, ValueError):
                return False
        try:
            return bool(a == b)
        except (TypeError, ValueError):
            return False

    return {k for k, v in params.items() if k not in defaults or not same(v, defaults[k])}


def check_applies(p, declared, prog, given=(), options=False):
    """Refuses, in one line naming `prog`, a parameter of `given` (names the caller set explicitly) that the
    run the dict p configures would not use (its declared `applies`: e.g. bins with metric ssd, max_step with
    a numeric step); options: named as the command line's options (--bins). Defaults are never refused."""
    spell = (lambda n: "--" + n.replace("_", "-")) if options else (lambda n: n)
    for q in declared:
        if q.applies is None or q.name not in given or q.name not in p:
            continue
        why = q.applies(p)
        if why is None or (q.inert and p[q.name] in q.inert):
            continue
        other, wanted, *why = why  # (and a note: the values of this one concerned, and why)
        text = lambda v: f"{v:g}" if _real(v) else str(v).lower()  # noqa: E731
        what = f"{spell(q.name)} {text(p[q.name])}" if q.kind == "choice" or why else spell(q.name)
        raise ValueError(f"{prog}: {what} applies to {spell(other)} {wanted}, not {text(p[other])}{''.join(why)}")


def check_declared(p, declared, prog, given=(), options=False):
    """Refuses a bad value of the dict p for the parameters `declared` (their numbers, integers and
    choices), and a parameter of `given` the run does not use (check_applies), in one line naming `prog`
    and the parameter; returns p."""
    for q in declared:
        if q.kind in ("real", "int", "step", "choice"):
            check_value(q, p[q.name], prog)
        elif q.kind == "reals" and q.name == "percentiles":
            lo, hi = p[q.name]
            if not 0 <= lo < hi <= 100:
                raise ValueError(f"{prog}: percentiles must satisfy 0 <= low < high <= 100, got {p[q.name]}")
    check_applies(p, declared, prog, given, options)
    return p


def check(p, prog="lddmm", given=(), options=False):
    """Refuses a bad parameter of the dict p (every declared name present) in one line, and one of `given`
    (the names the caller set explicitly) that the run does not use (check_applies; options: named as
    options); fills sigma and alpha given as None with the metric's defaults, and normalize given as True /
    False (its earlier spellings) as 'percentiles' / 'none' (in p); iterations given as None with the
    metric's caps. The schedule (scales, iterations) is schedule()'s."""
    check_value("metric", p["metric"], prog)
    for k, table in (("sigma", DEFAULT_SIGMA), ("alpha", DEFAULT_ALPHA), ("iterations", DEFAULT_ITERATIONS),
                     ("tol", DEFAULT_TOL), ("momentum", DEFAULT_MOMENTUM)):
        if p[k] is None:
            p[k] = table[str(p["metric"]).lower()]
    if isinstance(p["normalize"], (bool, np.bool_)):
        p["normalize"] = "percentiles" if p["normalize"] else "none"
    for q in DECLARED:
        if q.kind in ("real", "int", "step", "choice") and q.name != "metric":
            check_value(q, p[q.name], prog)
    lo, hi = p["percentiles"]
    if not 0 <= lo < hi <= 100:
        raise ValueError(f"{prog}: percentiles must satisfy 0 <= low < high <= 100, got {p['percentiles']}")
    check_applies(p, DECLARED, prog, given, options)
    return p


# ------------------------------------------------------------------------------------------------
# Reading values from text: the command line's options and -p KEY=VALUE
def _ints(text):
    try:
        vals = [int(t) for t in str(text).replace(" ", "").split(",") if t]
    except ValueError:
        raise ValueError(f"expected integers separated by commas, got {text!r}") from None
    if not vals:
        raise ValueError("expected at least one integer")
    return vals


def parse_value(q, text, cli=False):
    """The value of the text given for the parameter q (a Parameter or a name), read as its kind;
    integers (cli: within the command line's bounds, cli_hi) are checked here, at parse time, the
    numbers by check(). ValueError with a message without the name (argparse adds the option)."""
    q = get(q) if isinstance(q, str) else q
    hi = q.cli_hi if cli and q.cli_hi is not None else q.hi
    text = str(text).strip()
    if q.kind == "ints":
        vals = _ints(text)
        if q.name == "iterations" and any(not _within(q, v, hi) for v in vals):
            raise ValueError(f"each count must be in [{q.lo:g}, {hi:g}], got {text!r}")
        return vals
    if q.kind == "reals":
        try:
            return tuple(float(t) for t in text.replace(" ", "").split(",") if t)
        except ValueError:
            raise ValueError(f"expected numbers separated by commas, got {text!r}") from None
    if q.kind == "int":
        try:
            v = int(text)
        except ValueError:
            raise ValueError(f"expected an integer, got {text!r}") from None
        if cli and not _within(q, v, hi):
            raise ValueError(f"must be {q.bounds_text(hi)}, got {v}")
        return v
    if q.kind == "step" and text == "auto":
        return text
    if q.kind in ("real", "step"):
        try:
            v = float(text)
        except ValueError:
            raise ValueError(f"expected {'auto or ' if q.kind == 'step' else ''}a number, got {text!r}") from None
        return v  # (its bounds: check(), which names the parameter)
    return text


def _arg_type(q):
    def parse(text):
        try:
            return parse_value(q, text, cli=True)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = q.name  # argparse names the type in its messages
    return parse


_GIVEN = "_pyca_given"  # the namespace attribute that holds the options given on the command line


class _Given(argparse.Action):
    """argparse's store (or store_const, nargs=0) that also records the option as given (given_of())."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)
        setattr(namespace, _GIVEN, set(getattr(namespace, _GIVEN, ())) | {self.dest})


def given_of(a):
    """The parameters set on a command line parsed by a parser of add_arguments(), by name (whatever
    their value: given as the default, still given)."""
    return set(getattr(a, _GIVEN, ()))


def add_arguments(parser, declared=None, groups=None, unset=False, choices=None):
    """Adds the declared parameters (DECLARED: `pyca lddmm`'s; or `declared`, in option groups
    `groups`: titles, or title -> an existing argument group) that are options to parser: group "" to
    parser itself, the others in their groups, each with its type, choices, default and help. unset: each
    option's parser default is None, so that an option not given stays None (a caller tells given from
    not given, even when given as the declared default); the help still shows the declared default.
    choices: name -> the values the command line accepts in place of the declared choices, for a command
    that passes the option to more than one program (`pyca register --metric`: syn's and lddmm's); the
    program's own check still refuses a value it does not take."""
    declared, titles = (DECLARED, GROUPS) if declared is None else (declared, groups or ())
    groups = {"": parser}
    if isinstance(titles, dict):  # title -> an existing argument group
        groups.update(titles)
    else:
        groups.update({title: parser.add_argument_group(title) for title in titles})
    for q in declared:
        if q.group is None:
            continue
        g = groups[q.group]
        kw = dict(help=q.help or "default %(default)s", action=_Given)
        if q.kind == "file":
            g.add_argument(q.option, **kw)
            continue
        kw["default"] = list(q.default) if isinstance(q.default, tuple) else q.default
        if unset:
            kw["help"] = kw["help"].replace("%(default)s", str(kw["default"]))
            kw["default"] = None
        if q.kind in ("choice", "device"):
            kw["choices"] = list((choices or {}).get(q.name, q.choices))
        else:
            kw["type"] = _arg_type(q)
        if q.name == "normalize":  # and its negation, --no-normalize
            g = g.add_mutually_exclusive_group()
            g.add_argument(q.option, **kw)
            g.add_argument("--no-normalize", dest="normalize", action=_Given, nargs=0, const="none",
                           help="the same as --normalize none")
            continue
        g.add_argument(q.option, **kw)
    return parser


def from_args(a, declared=None):
    """The registration parameters (of DECLARED, or `declared`) of a command line parsed by a parser of
    add_arguments(), but the files (fixed_mask, moving_mask, moving_labels: see files_of()); one
    iteration count stands for every scale."""
    out = {}
    for q in DECLARED if declared is None else declared:
        if q.group is None or q.kind == "file" or not hasattr(a, q.name):
            continue
        v = getattr(a, q.name)
        if q.name == "iterations" and v is not None and len(v) == 1:
            v = v[0]
        out[q.name] = v
    return out


def files_of(a):
    """The file parameters given on a command line parsed by a parser of add_arguments(): name -> path."""
    return {q.name: getattr(a, q.name) for q in DECLARED if q.kind == "file" and getattr(a, q.name, None)}


def parse_assignments(pairs, defaults=None):
    """['alpha=2', 'scales=4,2,1', ...] (-p KEY=VALUE) -> dict, each value read as its declared kind
    (an iteration count alone stands for every scale); defaults: the keys offered (a program's
    DEFAULTS; every declared one by default)."""
    defaults = DEFAULTS if defaults is None else defaults
    out = {}
    for item in pairs or []:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in defaults:
            raise ValueError(f"-p {item!r}: expected KEY=VALUE with KEY one of {', '.join(sorted(defaults))}")
        q = _BY_NAME.get(key)
        if q is not None and not q.assignable:
            raise ValueError(f"-p {key}: not settable by -p")
        try:
            v = parse_value(q, text) if q is not None else text.strip()
        except ValueError:
            raise ValueError(f"-p {key}: cannot read {text.strip()!r}") from None
        if isinstance(v, list):
            v = tuple(v)
        out[key] = v[0] if key == "iterations" and len(v) == 1 else v
    return out
