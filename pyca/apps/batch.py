"""Batch registration: every subject onto one template, in parallel on Dask.

    from pyca.apps import batch
    res = batch.register_batch("template.nii.gz", "subjects/*.nii.gz", out="batch-out")
    pyca register-batch --template T --subjects S1 S2 ... [--out DIR] [-p KEY=VALUE] [--scheduler ADDR]

Each subject is one task (its worker reads the template and the subject itself; only paths travel)
running pyca.apps.lddmm.register(template, subject) and writing the same files as `pyca lddmm`
(deformed, phiinv, phi, jacdet, summary.json, report.png) into out/NAME/. A subject that fails (a bad
file) is reported in one line and listed in out/summary.json; the run fails (exit 1) when more than
max_failed_fraction of the subjects do.
"""
from __future__ import annotations

import json
import os
import sys
import time
import uuid

import numpy as np

from .. import core as ca
from .. import distributed as pdist
from .. import io as pio
from .._files import claim_out_dir, clear_previous, write_json
from ._lddmm_outputs import output_names
from .._progress import progress_bar
from .._provenance import record_cluster
from . import _atlas_tasks as tasks
from ..registration import parameters
from . import lddmm
from .atlas import AtlasError, resolve_inputs, subject_names

__all__ = ["register_batch", "add_parser"]


def register_batch(template, subjects, out="pyca-batch-out", *, client=None, scheduler=None, n_workers=None,
                   max_failed_fraction=0.25, progress=True, report=True, quiet=False, worker_log=None, overwrite=False,
                   **params):
    """Registers every subject (files, globs, folders) onto `template` (a file); returns the summary
    dict (also written to out/summary.json). Parameters: lddmm.DEFAULTS (fixed_mask: the template's
    mask). `out` follows pyca lddmm's rule: an existing, non-empty folder is refused unless `overwrite`,
    which removes only the previous run's outputs; the template, the subjects' count against
    `n_workers`, and the free space are checked before the cluster starts."""
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    p = parameters.merged(lddmm.DEFAULTS, params, "register-batch",
                          refused=("moving_mask", "moving_labels", "names"))
    parameters.check(p, "register-batch", given=parameters.explicit(params, lddmm.DEFAULTS))
    parameters.schedule(p["scales"], p["iterations"], "register-batch")
    template = os.path.abspath(os.fspath(template))
    if not os.path.isfile(template):
        raise FileNotFoundError(f"register-batch: no such template file: {template!r}")
    tmpl = _check_template(template)  # before the cluster starts: one line, not one per subject
    if p["fixed_mask"] is not None:  # the template's mask: checked (and placed) here too
        p["fixed_mask"] = os.path.abspath(os.fspath(p["fixed_mask"]))
        lddmm.check_inputs(tmpl, tmpl, names={"fixed": template, "moving": template, "fixed_mask": p["fixed_mask"]},
                           fixed_mask=pio.load_image(p["fixed_mask"]))
    sources = resolve_inputs(subjects) if not isinstance(subjects, (str, os.PathLike)) or \
        not os.path.isfile(subjects) else [subjects]
    sources = [os.path.abspath(s) for s in sources]
    names = subject_names(sources)
    out = os.path.abspath(os.fspath(out))
    pdist.check_cluster(n_workers, scheduler, client, len(sources), prog="register-batch")
    previous = _previous_subjects(out) if overwrite else []
    # each subject's folder holds lddmm's outputs: floats per template voxel (fields: 3)
    need = len(sources) * 16 * 4 * int(tmpl.grid().nVox())
    with claim_out_dir(out, overwrite, outputs=output_names(), folders=sorted(set(previous) | set(names)),
                       inputs=[template, p["fixed_mask"], *sources], need_bytes=need):
        clear_previous(out, output_names(), folders=sorted(set(previous) | set(names)))
        return _run(template, sources, names, out, p, client, scheduler, n_workers, max_failed_fraction, progress,
                    report, quiet, worker_log, say)


def _check_template(template):
    tmpl = pio.load_image(template)
    lo, hi = (float(v) for v in ca.MinMax(tmpl))
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"register-batch: the template {template!r} holds NaN or infinite values")
    if hi <= lo:
        raise ValueError(f"register-batch: the template {template!r} is constant ({lo}): nothing to register onto")
    return tmpl


def _previous_subjects(out):
    """The subject folders a previous register-batch run in `out` lists in its summary.json."""
    try:
        with open(os.path.join(out, "summary.json")) as fh:
            s = json.load(fh)
        return [n for n in s.get("subjects", {}) if isinstance(n, str)]
    except (OSError, ValueError, AttributeError):
        return []


def _run(template, sources, names, out, p, client, scheduler, n_workers, max_failed_fraction, progress, report,
         quiet, worker_log, say):
    t0 = time.perf_counter()
    with pdist.open_client(scheduler=scheduler, client=client, n_workers=n_workers, device=p["device"],
                           tasks=len(sources), worker_log=worker_log) as (c, info):
        say(f"pyca register-batch: {len(sources)} subjects onto {template}; {info['kind']}: scheduler "
            f"{info['scheduler']}, {len(info['workers'])} worker(s)"
            + (f", dashboard {info['dashboard']}" if info["dashboard"] else f", {pdist.NO_DASHBOARD}"))
        tag = uuid.uuid4().hex[:8]  # keys unique to this run
        futs = [c.submit(tasks.register_one, template, s, n, out, p, report, key=f"batch-{n}-{tag}", retries=2,
                         pure=False) for s, n in zip(sources, names)]
        prog = progress_bar(len(futs), "pyca register-batch", unit="reg", disable=not progress or quiet)
        records, failed = {}, {}
        from distributed import as_completed

        owner = {f.key: n for f, n in zip(futs, names)}
        for f in as_completed(futs):
            n = owner[f.key]
            r = f.result() if f.status != "error" else {"ok": False,
                                                         "error": f"task failed: {f.exception()!r}"}
            if r["ok"]:
                records[n] = r
                prog.set_postfix_str(f"{n}: -{100 * r['mismatch_reduction']:.0f}%", refresh=False)
            else:
                failed[n] = r["error"]
                if not quiet:
                    prog.write(f"pyca register-batch: subject {n} failed: {r['error']}", file=sys.stderr)
                prog.set_postfix_str(f"{n}: failed", refresh=False)
            prog.update(1)
        prog.close()
        prov = record_cluster(c, inputs={"template": template, **{f"subjects/{n}": s for n, s in zip(names, sources)}},
                              device=p["device"])
    summary = {"template": template, "subjects": dict(zip(names, sources)), "results": records, "failed": failed,
               "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in p.items()},
               "scheduler": info["scheduler"], "workers": info["workers"], "wall_s": time.perf_counter() - t0, "provenance": prov}
    write_json(summary, os.path.join(out, "summary.json"))
    if len(failed) > max_failed_fraction * len(sources):
        raise AtlasError(f"register-batch: {len(failed)} of {len(sources)} subjects failed (more than "
                         f"{max_failed_fraction:g}); see {out}/summary.json")
    return summary


# ------------------------------------------------------------------------------------------------
def add_parser(sub):
    from .._docs import page
    from ._atlas_cli import add_common_options, cohort_defaults

    bp = sub.add_parser("register-batch", help="register every subject onto one template, in parallel on Dask",
                        description="Register every --subjects image onto --template with LDDMM, one Dask task per "
                        "subject; each subject gets the outputs of `pyca lddmm` in OUT/NAME/.",
                        epilog="Documentation: " + page("atlas"))
    bp.add_argument("--template", required=True, help="the template (fixed) image")
    bp.add_argument("--subjects", nargs="+", required=True, help="subject images: files, globs (quoted) or folders")
    bp.add_argument("--out", default="pyca-batch-out", help="output folder (default: %(default)s); an existing, "
                    "non-empty one is refused unless --overwrite")
    bp.add_argument("--overwrite", action="store_true", help="replace the outputs of a previous run in --out (its "
                    "summary.json and subject folders' files; other files are kept)")
    bp.add_argument("--max-failed", type=float, default=0.25,
                    help="fail when more than this fraction of the subjects fail (default %(default)s)")
    add_common_options(bp, cohort_defaults(lddmm.DEFAULTS))
    bp.set_defaults(func=cmd_register_batch)
    return bp


def cmd_register_batch(a):
    from ._atlas_cli import cohort_defaults, command_params, run_command

    def work(session):
        params = command_params(a, cohort_defaults(lddmm.DEFAULTS))
        return register_batch(a.template, a.subjects, a.out, scheduler=a.scheduler, n_workers=a.workers,
                              max_failed_fraction=a.max_failed, progress=not a.no_progress, report=not a.no_report,
                              quiet=a.quiet, worker_log=session["worker_log"], overwrite=a.overwrite, **params)

    code, s = run_command("pyca register-batch", work, a.out, failure_types=(AtlasError,), failure_code=1)
    if code:
        return code
    if not a.quiet:
        print(f"pyca register-batch: {len(s['results'])} registered, {len(s['failed'])} failed, "
              f"{s['wall_s']:.1f} s; outputs in {os.path.abspath(a.out)}/NAME/")
    return 0
