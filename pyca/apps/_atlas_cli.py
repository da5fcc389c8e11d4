"""The `pyca atlas` subcommand, and the options it shares with `pyca register-batch`: the Dask
cluster (--scheduler, --workers) and registration parameters as -p KEY=VALUE (their kinds are those
declared in pyca.registration.parameters, so they stay in sync with `pyca lddmm` by construction)."""
from __future__ import annotations

import argparse
import sys


# Registration parameters that are no -p values of the cohort commands: per-subject files (one value
# would apply to every subject) and lddmm's internal file names; the atlas's template changes every
# iteration, so it takes no fixed mask either. register-batch's fixed_mask is the template's (a file).
PER_SUBJECT = ("moving_mask", "moving_labels", "names")
FILE_KEYS = ("fixed_mask",)
ATLAS_EXCLUDE = ("fixed_mask",)


def cohort_defaults(defaults, exclude=()):
    """The -p keys a cohort command accepts: `defaults` without PER_SUBJECT and `exclude`."""
    return {k: v for k, v in defaults.items() if k not in PER_SUBJECT + tuple(exclude)}


def registration_params(pairs, defaults):
    """['alpha=2', 'scales=4,2,1', ...] -> dict, each value read as its declared kind
    (pyca.registration.parameters.parse_assignments); defaults: the program's DEFAULTS (its keys).
    A FILE_KEYS key among `defaults` takes a file name; a PER_SUBJECT key is refused in one line."""
    from ..registration.parameters import parse_assignments

    files, rest = {}, []
    for item in pairs or []:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if sep and key in PER_SUBJECT:
            raise ValueError(f"-p {key}: a cohort command takes no {key} (it would be the same file for every "
                             "subject); register such a subject with pyca lddmm")
        if sep and key in FILE_KEYS and key in defaults:
            if not text.strip():
                raise ValueError(f"-p {key}: expected a file name")
            files[key] = text.strip()
        else:
            rest.append(item)
    return {**parse_assignments(rest, defaults), **files}


def command_params(a, defaults):
    """The registration parameters of a cohort command line: -p KEY=VALUE (registration_params) and
    --device (-p device=... and --device together: refused, one would be ignored)."""
    params = registration_params(a.param, defaults)
    if a.device:
        if "device" in params:
            raise ValueError(f"give --device {a.device} or -p device={params['device']}, not both")
        params["device"] = a.device
    return params


def add_common_options(p, defaults):
    from ..cli import add_verbosity
    from ..registration.parameters import DECLARED, DEVICES

    settable = {q.name for q in DECLARED if q.assignable}
    keys = ", ".join(f"{k}={','.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in defaults.items()
                     if k in settable)
    files = [k for k in FILE_KEYS if k in defaults]
    p.add_argument("-p", "--param", action="append", metavar="KEY=VALUE", default=[],
                   help=f"a registration parameter (pyca lddmm --help), repeatable; defaults: {keys}"
                   + (f"; files: {', '.join(f'{k}=FILE' for k in files)} (the template's)" if files else ""))
    p.add_argument("--device", choices=DEVICES, default=None,
                   help="where registrations run (default auto: each worker's GPU when it has one)")
    g = p.add_argument_group("Dask cluster")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="address of an existing Dask scheduler (tcp://host:8786); default: an embedded "
                   "LocalCluster sized to this machine")
    g.add_argument("--workers", type=int, default=None,
                   help="workers of the embedded cluster (default: one per GPU, else one per core)")
    p.add_argument("--no-report", action="store_true", help="skip report.png")
    p.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    add_verbosity(p)  # -q/-v before or after the command, as every pyca command


def _ints(text):
    return tuple(int(t) for t in text.split(","))


def add_atlas_parser(sub):
    from .._docs import page
    from .atlas import ATLAS_DEFAULTS as A, DEFAULTS

    ap = sub.add_parser(
        "atlas", help="build an unbiased LDDMM template of a cohort on Dask (built-in cohort by default)",
        description="Unbiased LDDMM template (Joshi et al. 2004) of the INPUTS (files, globs or folders), on a "
        "Dask cluster. Without inputs, a built-in synthetic cohort with a known ground truth is used.",
        epilog="outputs (in --out): template.nii.gz, templates/template_iterNNN.nii.gz, "
        "subjects/NAME/{deformed,phiinv,jacdet}.nii, summary.json, report.png.\nDocumentation: " + page("atlas"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="*", help="subject images: files, globs (quoted) or folders")
    ap.add_argument("--out", default="pyca-atlas-out", help="output folder (default: %(default)s)")
    ap.add_argument("--resume", metavar="OUT", help="continue the atlas in OUT after its last complete iteration")
    ap.add_argument("--template-iterations", type=int, default=None,
                    help=f"template iterations (default {A['template_iterations']}, or the saved count with --resume)")
    ap.add_argument("--compress", action="store_true",
                    help="write the per-subject files as .nii.gz (default .nii: gzip of fields is slow)")
    ap.add_argument("--max-failed", type=float, default=None,
                    help=f"stop when more than this fraction of the subjects fail (default {A['max_failed_fraction']}, "
                    "or the atlas's own with --resume)")
    # (not given: None, so that one given with inputs or --resume, where it would not apply, is refused)
    g = ap.add_argument_group("built-in cohort (without inputs)")
    g.add_argument("--cohort", type=int, default=None, help=f"subjects (default {A['cohort']})")
    g.add_argument("--cohort-size", type=_ints, default=None,
                   help=f"grid x,y,z (default {','.join(map(str, A['cohort_size']))}; z = 1 for 2-D)")
    g.add_argument("--seed", type=int, default=None, help=f"random seed (default {A['seed']})")
    ap.add_argument("--overwrite", action="store_true", help="replace the outputs of a previous atlas in --out "
                    "(template, templates/, subjects/, cohort/, summary.json, report.png; other files are kept)")
    add_common_options(ap, cohort_defaults(DEFAULTS, ATLAS_EXCLUDE))
    ap.set_defaults(func=cmd_atlas)
    return ap


def input_errors():
    from .. import core
    from ..io import ImageFileError

    return (ValueError, TypeError, FileNotFoundError, ImageFileError, core.CudaError, ConnectionError, OSError)


def run_command(cmd, work, out, failure_types=(), failure_code=1, resume_hint=None):
    """Runs work(session) inside pyca.distributed.command_session and turns whatever it raises, from
    Dask's start, run or shutdown included, into one line on standard error and an exit code:
    `failure_code` for `failure_types`, 2 for bad input (input_errors()), 1 for anything unexpected
    (named by its type), 130 for Ctrl-C, 143 for SIGTERM. Files being written are discarded (pyca/_files.py) and temporary
    folders under `out` removed. Returns (exit code, work's result or None)."""
    from ..distributed import Terminated, command_session

    session = {}

    def line(text):
        print(f"{cmd}: {text}", file=sys.stderr, flush=True)

    try:
        with command_session(cmd, out) as session:
            return 0, work(session)
    except Terminated:
        line("terminated (SIGTERM)" + (f"; continue with: {resume_hint}" if resume_hint else ""))
        return 143, None
    except KeyboardInterrupt:
        line("interrupted" + (f"; continue with: {resume_hint}" if resume_hint else ""))
        return 130, None
    except failure_types as e:
        line(f"error: {_one_line(e)}")
        return failure_code, None
    except input_errors() as e:
        line(f"error: {_one_line(e)}")
        return 2, None
    except Exception as e:  # noqa: BLE001 - Dask's own errors included: one line, never a traceback
        log = session.get("log_kept")
        line(f"error: {type(e).__name__}: {_one_line(e)}" + (f" (worker messages: {log})" if log else ""))
        return 1, None


def _one_line(e):
    return " ".join(str(e).split()) or type(e).__name__


def cmd_atlas(a):
    from . import atlas

    code, res = run_command("pyca atlas", lambda session: _build(a, session), a.resume or a.out,
                            failure_types=(atlas.AtlasError,), failure_code=2,
                            resume_hint=f"pyca atlas --resume {a.resume or a.out}")
    if code:
        return code
    if not a.quiet:
        s = res.summary
        last = s["iterations"][-1]
        red = s.get("spread_reduction")
        print(f"pyca atlas: {len(s['names']) - len(s['excluded'])} subjects, {last['iteration']} iterations; "
              f"spread {s['iterations'][0]['spread']:.5g} -> {last['spread']:.5g}"
              + (f" (-{100 * red:.1f}%)" if red is not None else "")
              + f"; wrote {res.out}/template.nii.gz, summary.json" + ("" if a.no_report else ", report.png"))
    return 0


def _build(a, session):
    from . import atlas

    params = command_params(a, cohort_defaults(atlas.DEFAULTS, ATLAS_EXCLUDE))
    if a.resume and a.inputs:
        raise ValueError("give inputs or --resume OUT, not both")
    given = [f"--{k.replace('_', '-')}" for k in ("cohort", "cohort_size", "seed") if getattr(a, k) is not None]
    if given and (a.inputs or a.resume):
        raise ValueError(f"{', '.join(given)} make the built-in cohort; "
                         + ("--resume continues the atlas's own subjects" if a.resume
                            else "with inputs they do not apply"))
    for k in ("cohort", "cohort_size", "seed"):
        if getattr(a, k) is None:
            setattr(a, k, atlas.ATLAS_DEFAULTS[k])
    if a.cohort < 2 or len(a.cohort_size) != 3 or min(a.cohort_size) < 1:
        raise ValueError("--cohort needs >= 2 subjects and --cohort-size three positive integers")
    return atlas.build(a.inputs or None, out=a.resume or a.out, template_iterations=a.template_iterations,
                       scheduler=a.scheduler, n_workers=a.workers, max_failed_fraction=a.max_failed,
                       resume=bool(a.resume), progress=not a.no_progress, report=not a.no_report, quiet=a.quiet,
                       cohort=a.cohort, cohort_size=a.cohort_size, seed=a.seed, compress=a.compress,
                       worker_log=session["worker_log"], overwrite=a.overwrite, **params)
