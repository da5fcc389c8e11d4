"""The `pyca register` subcommand: symmetric diffeomorphic registration (pyca.apps.syn, the default)
or LDDMM (pyca.apps.lddmm) of two files, with the outputs of `pyca lddmm` (docs/syn.md)."""
from __future__ import annotations

import argparse
import os
import sys

from .._docs import page

_EPILOG = """\
outputs (in --out): deformed.nii.gz (moving deformed onto fixed), phiinv.nii.gz and phi.nii.gz
(H-fields, voxel coordinates: phiinv maps the fixed grid into the moving image on the fixed grid, phi
back), phiinv_full.nii.gz (moving voxel of each fixed voxel, linear stage included), jacdet.nii.gz
(det D phiinv), labels.nii.gz (with --moving-labels), affine.txt, report.png, summary.json (with
--method syn also the inverse consistency of phi and phiinv). Each file appears only when complete;
summary.json is written last. Exit status: 0 done, 1 failed while working, 2 bad command line or
input (nothing done), 3 the registration ran but its map folds or collapses, or it matches worse than
the linear stage (one line on stderr,
"quality" in summary.json; 0 with --allow-folds), 130 interrupted (Ctrl-C).
Documentation (algorithm, parameters): """ + page("syn")


# the syn group's options that --method lddmm takes with the same meaning (mi's bins, LNCC's window radius)
_LDDMM_SHARED = ("bins", "radius")


def _floats_or_ints(kind):
    def parse(text):
        try:
            return [kind(t) for t in str(text).replace(" ", "").split(",") if t]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind.__name__}s separated by commas, got {text!r}") from None

    return parse


def add_output_options(p):
    """The output options of `pyca lddmm` and `pyca register` (their outputs are the same files)."""
    g = p.add_argument_group("output")
    g.add_argument("--no-report", action="store_true", help="skip report.png")
    g.add_argument("--allow-folds", action="store_true", help="exit 0 even when the registration failed its checks "
                   "(folds, collapse, a match worse than the linear stage's, different contrasts: the line on stderr "
                   "and summary.json's 'quality' still say so); without it such a run exits with 3")
    g.add_argument("--no-compress", action="store_true", help="write .nii instead of .nii.gz (faster; 15%% larger)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar (a few plain lines when stderr is "
                   "not a terminal)")
    return g


def add_parser(sub):
    from ..registration import parameters
    from ..registration.metrics import METRICS
    from ..registration.transforms import LINEAR_KINDS

    S = parameters.SYN_DEFAULTS

    p = sub.add_parser("register", help="register two 3-D images: symmetric diffeomorphic (SyN, default) or LDDMM",
                       description="Register --moving onto --fixed: a linear stage, then greedy symmetric "
                       "diffeomorphic registration with local normalised cross-correlation (--method syn, the "
                       "default) or LDDMM (--method lddmm, pyca lddmm's defaults), on the GPU when there is one.",
                       epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fixed", required=True, help="fixed (target) image: NIfTI (.nii, .nii.gz) or MetaImage "
                   "(.mha, .mhd); NRRD, DICOM, MINC and pictures with SimpleITK")
    p.add_argument("--moving", required=True, help="moving image, deformed onto the fixed one")
    p.add_argument("--out", default="pyca-register-out", help="output folder (default: %(default)s); an existing, "
                   "non-empty one is refused unless --overwrite")
    p.add_argument("--overwrite", action="store_true", help="replace the outputs of a previous run in --out")
    p.add_argument("--method", default="syn", choices=["syn", "lddmm"], help="default %(default)s")
    p.add_argument("--device", default="auto", choices=parameters.DEVICES, help="default %(default)s")
    g = p.add_argument_group(parameters.SYN)
    g.add_argument("--scales", type=_floats_or_ints(int), default=None,
                   help=f"downsampling factors, coarse to fine, ending with 1 (default {','.join(map(str, S['scales']))};"
                   " with --method lddmm, its own)")
    g.add_argument("--iterations", type=_floats_or_ints(int), default=None,
                   help=f"iterations per scale (default {','.join(map(str, S['iterations']))}; with --method lddmm, "
                   "its own)")
    # the rest: from their declaration; not given: None (syn's default for the metric, or lddmm's own)
    # (--metric: syn's or lddmm's, as --method says; run() refuses one syn does not take)
    parameters.add_arguments(p, parameters.SYN_DECLARED, {parameters.SYN: g}, unset=True,
                             choices={"metric": tuple(dict.fromkeys(parameters.SYN_METRICS + METRICS))})
    p.set_defaults(metric=None)  # --metric: syn's default, or pyca lddmm's with --method lddmm
    # the parameters whose default depends on the metric (parameters.SYN_METRIC_DEFAULTS): given or not
    p.set_defaults(**{k: None for d in parameters.SYN_METRIC_DEFAULTS.values() for k in d})
    g = p.add_argument_group("linear stage, masks and labels")
    g.add_argument("--affine", default="auto", choices=("auto",) + LINEAR_KINDS,
                   help="linear stage (default %(default)s: affine when the grids or the centres of mass differ)")
    g.add_argument("--fixed-mask", help="0/1 image on the fixed grid: the match term counts only its voxels")
    g.add_argument("--moving-mask", help="0/1 image on the moving grid")
    g.add_argument("--moving-labels", help="integer label image on the moving grid, warped by nearest neighbour "
                   "into labels.nii.gz")
    add_output_options(p)
    m = p.add_mutually_exclusive_group()
    m.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS, help="say more")
    m.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="print nothing but errors")
    p.set_defaults(func=run)
    return p


def _fail(e, code=2):
    print(f"pyca register: error: {e}", file=sys.stderr)
    return code


def run(a):
    import contextlib

    import pyca as ca

    from .. import cli
    from .._files import check_out_dir, claim_out_dir
    from ..registration import parameters
    from . import lddmm, syn
    from ._lddmm_outputs import output_names

    quiet = getattr(a, "quiet", False)
    say = (lambda *x: None) if quiet else (lambda *x: print(*x, flush=True))
    mod = syn if a.method == "syn" else lddmm
    params = {"device": a.device, "affine": a.affine}
    if a.scales is not None:
        params["scales"] = a.scales
    if a.iterations is not None:
        params["iterations"] = a.iterations if len(a.iterations) > 1 else a.iterations[0]
    if a.method == "syn":
        params.update(parameters.from_args(a, parameters.SYN_DECLARED))
    else:  # lddmm takes the syn group's options that mean the same to it; any other one given is refused
        for q in parameters.SYN_DECLARED:
            v = getattr(a, q.name, None)
            if q.group != parameters.SYN or q.name == "metric" or v is None:  # None: not given
                continue
            if q.name not in _LDDMM_SHARED:
                return _fail(f"{q.option} is a parameter of --method syn; --method lddmm does not take it "
                             "(pyca lddmm --help lists its parameters)")
            params[q.name] = v
    params = {k: v for k, v in params.items() if v is not None}  # (not given: syn's default for the metric)
    if a.method == "syn" and a.metric is not None and a.metric.lower() not in parameters.SYN_METRICS:
        return _fail(f"--metric {a.metric} is a metric of --method lddmm; --method syn takes "
                     f"{' or '.join(parameters.SYN_METRICS)}")
    if a.metric is not None:  # given: for either method
        params["metric"] = a.metric
    extra = {k: getattr(a, k) for k in ("fixed_mask", "moving_mask", "moving_labels") if getattr(a, k)}
    if not cli.importable("nibabel"):
        return _fail("nibabel, which writes the outputs, cannot be imported: pip install nibabel")
    claim = contextlib.ExitStack()  # --out, locked for this run (as pyca lddmm's)
    try:
        check_out_dir(a.out, a.overwrite)
        checked = {**mod.DEFAULTS, **params}
        given = parameters.given_of(a)  # an option given that the run would not use is refused
        if a.method == "syn":
            syn.check(checked, given=given, options=True)
        else:
            parameters.check(checked, given=given, options=True)
            parameters.schedule(checked["scales"], checked["iterations"])
        _, device = lddmm.resolve_device(a.device)
        fixed = ca.io.load_image(a.fixed)
        moving = ca.io.load_image(a.moving)
        names = {"fixed": a.fixed, "moving": a.moving, **extra}
        from ..registration.inputs import LabelImage  # labels read as integers, whatever their magnitude

        extra = {k: LabelImage.load(v) if k == "moving_labels" else ca.io.load_image(v) for k, v in extra.items()}
        note = lddmm.check_inputs(fixed, moving, names=names, **extra)
        # no input among the files an --overwrite replaces; the folder locked while the run writes it
        claim.enter_context(claim_out_dir(a.out, a.overwrite, outputs=output_names(), inputs=list(names.values()),
                                          need_bytes=16 * 4 * int(fixed.grid().nVox())))
    except cli.input_errors() as e:
        claim.close()
        return _fail(e)
    with claim:
        return _run(a, mod, fixed, moving, names, extra, params, device, note, say)


def _run(a, mod, fixed, moving, names, extra, params, device, note, say):
    from .._files import clear_previous
    from ..registration import quality
    from . import lddmm
    from ._lddmm_outputs import output_names
    from ._lddmm_report import ReportError

    say(f"pyca register ({a.method}): fixed {a.fixed}, moving {a.moving}")
    say(f"  device: {device}; {note}")
    try:
        res = mod.register(fixed, moving, progress=not (a.no_progress or getattr(a, "quiet", False)), names=names,
                           **extra, **params)
    except ValueError as e:
        return _fail(e)
    if getattr(res, "quality", None) is None:  # a method that does not assess itself: its Jacobian
        res.quality = quality.assess(res.params.get("metric", "?"), res.jacobian)
    clear_previous(a.out, output_names())
    try:
        paths = lddmm.write_outputs(res, fixed, moving, a.out, report=not a.no_report, compress=not a.no_compress,
                                    inputs=names)  # every input file (masks, labels) in summary.json's provenance
    except ReportError as e:
        return _fail(e, 1)
    s = res.summary()
    say(f"  det D phiinv in [{s['jacobian_min']:.4g}, {s['jacobian_max']:.4g}]")
    if "inverse_consistency_voxels" in s:
        ic = s["inverse_consistency_voxels"]
        say(f"  inverse consistency |phi o phiinv - id|: mean {ic['mean']:.3g}, 99th percentile {ic['p99']:.3g} voxels")
    say(f"  time: registration {res.timings['registration_s']:.2f} s, total {res.timings['total_s']:.2f} s")
    say(f"  wrote {len(paths)} files to {os.path.abspath(a.out)}: " + ", ".join(os.path.basename(x) for x in paths))
    return quality.verdict(res, a.allow_folds, "pyca register", a.out)
