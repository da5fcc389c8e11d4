"""Unbiased LDDMM atlas (template) building on Dask (Joshi et al. 2004).

    from pyca.apps import atlas
    res = atlas.build(["s01.nii.gz", "s02.nii.gz", ...], out="atlas-out")   # or a glob, a folder
    res = atlas.build(out="atlas-out")           # the built-in synthetic cohort (known ground truth)
    res = atlas.build(files, client=client)      # any existing Dask cluster
    res.template, res.summary["iterations"][-1]["spread"]

Iteration 0 is the mean of the subjects on the template grid (the first usable subject's). Each
iteration k >= 1 registers every subject I_i to the current template T (pyca.apps.lddmm.register,
fixed = T, moving = I_i: phiinv_i maps the template grid into subject i) and sets

    T <- sum_i |D phiinv_i| (I_i o phiinv_i) / sum_i |D phiinv_i|

the minimiser of sum_i || T o phi_i - I_i ||^2 over T for the current deformations (the match
measured in each subject's own space, hence the Jacobian weights). The registrations are Dask tasks
(one per subject per iteration, pinned to a worker so that its input stays cached there), the sums
a tree reduction of Dask tasks (inside each worker first), the division one task; the client
receives only the new template and small per-subject records. After every iteration the template,
each subject's deformed image, phiinv and Jacobian, and summary.json are written to the output
folder; build(..., resume=True) / `pyca atlas --resume OUT` continues after the last complete
iteration. docs/atlas.md (use) and docs/design/distributed.md (the task graph) say more.
"""
from __future__ import annotations

import glob as _glob
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass

import numpy as np

from .. import core as ca
from .. import io as pio
from .._files import claim_out_dir, fingerprint, safe_name, write_json
from .._progress import progress_bar
from .. import distributed as pdist
from .._provenance import record_cluster
from . import _atlas_tasks as tasks
from ..registration import parameters
from . import lddmm

__all__ = ["build", "AtlasResult", "AtlasError", "DEFAULTS", "resolve_inputs", "subject_names", "add_parser"]

# Registration defaults for each atlas iteration: lddmm's, with fewer iterations per scale (each
# template iteration starts the registrations again; docs/atlas.md).
# The SSD match: the template update, the Jacobian-weighted mean of the deformed subjects, is the
# minimiser of the sum-of-squared-differences atlas energy (Joshi 2004); with a correlation match it is
# not, and the template drifts (tests/python/test_atlas.py measured it). Nor lddmm's histogram matching
# and bias correction: both change each subject's intensities towards the current template, and the
# template update assumes they are the subjects' own; nor the fixed image's blur, constant or matched to
# the interpolation (the template is itself a mean of interpolated images). alpha 1, gamma, lpow, tol and T are
# those the atlas runs of docs/atlas.md were measured with (lpow 2, its heavier-tailed kernel).
# sigma 0.002 is those runs' 0.05 of the unnormalised K in the units of K of gain 1 (docs/lddmm.md, 'The
# kernel's scale'): 0.05 gamma^(lpow / 2), the same registrations.
DEFAULTS = dict(lddmm.DEFAULTS, metric="ssd", scales=(4, 2, 1), iterations=(30, 20, 10), alpha=1.0, gamma=0.04, lpow=2,
                sigma=0.002, tol=1e-2, time_steps=8, normalize="percentiles", bias_sigma=0.0, fixed_blur=0.0,
                interp_blur="none")
ATLAS_DEFAULTS = dict(template_iterations=5, max_failed_fraction=0.25, cohort=16, cohort_size=(32, 32, 32), seed=0)
_IMAGE_EXT = (".nii", ".nii.gz", ".hdr", ".mha", ".mhd", ".nrrd", ".nhdr")


class AtlasError(RuntimeError):
    """The atlas cannot go on (too many subjects failed, an unusable output folder, ...)."""


@dataclass
class AtlasResult:
    template: object  # Image3D (host): the final template
    out: str  # the output folder
    summary: dict  # what summary.json holds


# ------------------------------------------------------------------------------------------------
def resolve_inputs(images):
    """Files, a glob, a folder (or a list mixing them) -> sorted list of paths; Image3D objects pass
    through. Raises FileNotFoundError / ValueError in one line when nothing matches."""
    if images is None:
        return None
    if isinstance(images, (str, os.PathLike)):
        images = [images]
    out = []
    for item in images:
        if isinstance(item, ca.Image3D):
            out.append(item)
            continue
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"atlas: inputs must be file paths, globs, folders or Image3D, not {type(item).__name__}")
        p = os.fspath(item)
        if os.path.isdir(p):
            found = sorted(os.path.join(p, f) for f in os.listdir(p) if f.lower().endswith(_IMAGE_EXT))
            if not found:
                raise FileNotFoundError(f"atlas: folder {p!r} holds no image files ({', '.join(_IMAGE_EXT)})")
            out += found
        elif any(c in p for c in "*?["):
            found = sorted(_glob.glob(p))
            if not found:
                raise FileNotFoundError(f"atlas: no file matches {p!r}")
            out += found
        else:
            out.append(p)  # a missing or bad file is a failing subject, reported by its worker
    seen = {}
    for x in out:
        if isinstance(x, ca.Image3D):
            continue
        r = os.path.realpath(x)
        if r in seen:
            raise ValueError(f"atlas: the same file is given twice ({seen[r]!r} and {x!r}); each subject once")
        seen[r] = x
    if len(out) < 2:
        raise ValueError(f"atlas: an atlas needs at least 2 subjects, got {len(out)}")
    return out


def subject_names(sources):
    """The subjects' names: each file's name without its image extension (subject_NNN for an Image3D),
    made unique by _1, _2, ... in order."""
    names, seen = [], {}
    for i, s in enumerate(sources):
        if isinstance(s, ca.Image3D):
            base = f"subject_{i:03d}"
        else:
            base = os.path.basename(os.fspath(s))
            for ext in sorted(_IMAGE_EXT, key=len, reverse=True):
                if base.lower().endswith(ext):
                    base = base[: -len(ext)]
                    break
        n = seen.get(base, 0)
        seen[base] = n + 1
        names.append(base if n == 0 else f"{base}_{n}")
    return names


def _check_params(params):
    p = parameters.merged(DEFAULTS, params, "atlas")
    parameters.check(p, "atlas", given=parameters.explicit(params, DEFAULTS))
    scales, its = parameters.schedule(p["scales"], p["iterations"], "atlas")
    p["scales"], p["iterations"] = tuple(scales), tuple(its)
    return p


def _jsonable(p):
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in p.items()}


# ------------------------------------------------------------------------------------------------
def _load_state(out):
    path = os.path.join(out, "summary.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"atlas: nothing to resume in {out!r} (no summary.json)")
    try:
        with open(path) as fh:
            st = json.load(fh)
    except (OSError, ValueError) as e:
        raise AtlasError(f"atlas: cannot read {path}: {e}") from None
    if not isinstance(st, dict) or st.get("format") != "pyca-atlas-1":
        raise AtlasError(f"atlas: {path} is not a pyca atlas summary")
    _check_state(st, path)
    return st


def _check_state(st, path):
    """Everything --resume takes from summary.json, checked before it is used (the file may have been
    edited, by mistake or not): the sources, the subject names (derived from them, as a new atlas
    derives them), the iteration counters, the exclusions, and each source file's fingerprint."""
    def bad(why):
        return AtlasError(f"atlas: cannot resume from {path}: {why}")

    src = st.get("sources")
    if not isinstance(src, list) or len(src) < 2:
        raise bad("'sources' must list at least 2 subject files")
    if any(s is None for s in src):
        raise AtlasError("atlas: this atlas was built from in-memory images, which cannot be resumed")
    if not all(isinstance(s, str) and os.path.isabs(s) for s in src):
        raise bad("'sources' must be absolute file paths")
    names = st.get("names")
    if names != subject_names(src):
        raise bad(f"'names' {str(names)[:80]} is not the list of subject names its sources give "
                  f"({str(subject_names(src))[:80]})")
    for n in names:
        safe_name(n, "atlas: subject name")
    for key, lo in (("completed_iteration", 0), ("target_iterations", 0)):
        v = st.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise bad(f"{key!r} must be an integer >= {lo}, got {v!r}")
    done = [e.get("iteration") for e in st.get("iterations", []) if isinstance(e, dict)]
    if not isinstance(st.get("iterations"), list) or done != list(range(st["completed_iteration"] + 1)):
        raise bad(f"'completed_iteration' {st['completed_iteration']} does not match the iterations recorded "
                  f"({done})")
    ex = st.get("excluded")
    if not isinstance(ex, dict) or not set(ex) <= set(names):
        raise bad("'excluded' must map subject names of this atlas to their errors")
    last = st["iterations"][-1].get("records")
    if not isinstance(last, dict) or set(last) != set(names) - {n for n, e in ex.items()
                                                                if isinstance(e, dict) and e.get("iteration", 0) <
                                                                st["completed_iteration"]}:
        raise bad("the subjects of the last iteration are not those 'names' lists")
    if st.get("subject_ext") not in (".nii", ".nii.gz"):
        raise bad(f"'subject_ext' must be .nii or .nii.gz, got {st.get('subject_ext')!r}")
    prints = st.get("fingerprints")
    if not isinstance(prints, dict) or set(prints) != set(names):
        raise bad("'fingerprints' must hold one fingerprint per subject")
    for n, s in zip(names, src):
        if n in ex:
            continue
        try:
            now = fingerprint(s)
        except OSError as e:
            raise bad(f"subject {n}'s file {s!r} cannot be read ({e.strerror or e})") from None
        if now != prints[n]:
            raise bad(f"subject {n}'s file {s!r} has changed since the atlas began; start a new atlas")


def _start(images, out, saved, params, opts, say):
    """The state to run from: a fresh one (inputs resolved, synthetic cohort written) or the saved
    one (resume)."""
    summary_path = os.path.join(out, "summary.json")
    if saved is not None:  # (images with resume: refused by build)
        saved["params"] = _jsonable(params)
        say(f"pyca atlas: resuming {out} after iteration {saved['completed_iteration']} "
            f"({len(saved['names'])} subjects, {len(saved['excluded'])} excluded)")
        return saved
    if os.path.isfile(summary_path):
        raise AtlasError(f"atlas: {out!r} already holds an atlas (summary.json); use resume (--resume {out}) "
                         "or another output folder")
    os.makedirs(out, exist_ok=True)
    truth = None
    sources = resolve_inputs(images)
    if sources is None:
        from ._atlas_cohort import synthetic_cohort

        subjects, gt = synthetic_cohort(opts["cohort"], opts["cohort_size"], opts["seed"])
        folder = os.path.join(out, "cohort")
        os.makedirs(folder, exist_ok=True)
        sources = []
        for i, im in enumerate(subjects):
            sources.append(os.path.join(folder, f"subject_{i:02d}.nii.gz"))
            pio.save_image(im, sources[-1], description="pyca synthetic cohort")
        truth = os.path.join(folder, "ground_truth.nii.gz")
        pio.save_image(gt, truth, description="pyca phantom (cohort ground truth)")
        say(f"pyca atlas: built-in cohort of {len(sources)} subjects "
            f"({'x'.join(map(str, opts['cohort_size']))}, seed {opts['seed']}) written to {folder}")
    names = subject_names(sources)
    prints = {}
    for n, s in zip(names, sources):
        if not isinstance(s, ca.Image3D):
            try:
                prints[n] = fingerprint(s)
            except OSError:
                prints[n] = None  # a missing or unreadable file: the subject fails at iteration 0
    return {"format": "pyca-atlas-1", "sources": [None if isinstance(s, ca.Image3D) else os.path.abspath(s)
                                                  for s in sources],
            "_inputs": sources, "names": names, "fingerprints": prints, "truth": truth, "params": _jsonable(params),
            "max_failed_fraction": opts["max_failed_fraction"], "target_iterations": int(opts["iterations"]),
            "completed_iteration": -1, "excluded": {}, "iterations": [], "grid": None,
            "subject_ext": ".nii.gz" if opts["compress"] else ".nii"}


def build(images=None, *, out="pyca-atlas-out", template_iterations=None, client=None, scheduler=None,
          n_workers=None, max_failed_fraction=None, resume=False, progress=True, report=True, quiet=False, cohort=16,
          cohort_size=(32, 32, 32), seed=0, compress=False, on_iteration=None, worker_log=None, overwrite=False,
          **params):
    """Builds an unbiased template; returns an AtlasResult (template, output folder, summary).

    images: files, a glob, a folder, a list of them, or Image3D objects; None: the built-in
    synthetic cohort (`cohort` subjects on a `cohort_size` grid, `seed`), ground truth known.
    template_iterations: template iterations (each registers every subject once; default 5, or the
    saved count when resuming). client / scheduler: an existing Dask cluster (else an embedded one
    sized to this machine, n_workers caps its workers).
    max_failed_fraction: the atlas stops (AtlasError) when more subjects than this fraction fail (default
    0.25, or the saved fraction when resuming: given, it replaces it, e.g. to continue after failures).
    compress: write the per-subject files (rewritten every iteration) as .nii.gz instead of .nii.
    resume: continue the atlas in `out` after its last complete iteration (`template_iterations` may
    change the count). overwrite: `out` may hold a previous atlas, whose files are removed first (others
    are kept; without it a non-empty `out` is refused). on_iteration(k, summary): called after each
    complete iteration. worker_log: where
    the embedded cluster's processes write their standard error (pyca.distributed.open_client). params:
    registration parameters (DEFAULTS; meanings in docs/lddmm.md), device ('auto' | 'cpu' | 'gpu').
    """
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    if max_failed_fraction is not None and not 0 <= max_failed_fraction < 1:
        raise ValueError(f"atlas: max_failed_fraction must be in [0, 1), got {max_failed_fraction}")
    if resume and compress:
        raise ValueError("atlas: compress is the atlas's own when resuming (its subjects' files keep their type)")
    if resume and images is not None:
        raise ValueError("atlas: give images or resume, not both (resume continues with the atlas's own subjects)")
    if resume and overwrite:
        raise ValueError("atlas: overwrite starts a new atlas in out; resume continues the one there: give one")
    chosen = [k for k, v in (("cohort", cohort), ("cohort_size", tuple(cohort_size)), ("seed", seed))
              if v != ATLAS_DEFAULTS[k]]
    if chosen and (images is not None or resume):
        raise ValueError(f"atlas: {', '.join(chosen)} make the built-in cohort; "
                         + ("resume continues the atlas's own subjects" if resume else "with images they do not apply"))
    iterations = template_iterations
    if iterations is not None and (int(iterations) != iterations or iterations < 0):
        raise ValueError(f"atlas: template_iterations must be an integer >= 0, got {iterations}")
    out = os.path.abspath(os.fspath(out))
    saved = _load_state(out) if resume else None
    if saved:  # the saved registration parameters; only the device may change
        kept = {k: tuple(v) if isinstance(v, list) else v for k, v in saved.get("params", {}).items()}
        if not isinstance(saved.get("params"), dict) or set(kept) - set(DEFAULTS):
            raise AtlasError(f"atlas: cannot resume from {out}/summary.json: 'params' is not a set of registration "
                             "parameters")
        changed = sorted(k for k, v in params.items() if k != "device" and _jsonable({k: v})[k] != saved["params"].get(k))
        if changed:
            diff = ", ".join(f"{k}={params[k]!r} (saved {saved['params'].get(k)!r})" for k in changed)
            raise AtlasError(f"atlas: --resume continues with the atlas's own registration parameters; {diff} would "
                             "change them for the remaining iterations only: start a new atlas instead")
        params = {**kept, **params}
    p = _check_params(params)
    opts = dict(iterations=5 if iterations is None else int(iterations),
                max_failed_fraction=ATLAS_DEFAULTS["max_failed_fraction"] if max_failed_fraction is None
                else max_failed_fraction,
                cohort=cohort, cohort_size=tuple(int(s) for s in cohort_size), seed=seed, compress=compress)
    if saved and iterations is not None:
        saved["target_iterations"] = int(iterations)
    if saved and max_failed_fraction is not None:
        saved["max_failed_fraction"] = max_failed_fraction
    pdist.check_cluster(n_workers, scheduler, client, prog="atlas")
    if not saved and not overwrite and os.path.isfile(os.path.join(out, "summary.json")):
        raise AtlasError(f"atlas: {out!r} already holds an atlas (summary.json); use resume (--resume {out}), "
                         "--overwrite, or another output folder")
    doomed = _previous_outputs(out) if overwrite and not saved else []
    inputs = [] if saved or images is None else [x for x in resolve_inputs(images) if not isinstance(x, ca.Image3D)]
    bad = {os.path.realpath(x) for x in inputs} & {os.path.realpath(d) for d in doomed}
    if bad:
        raise FileExistsError(f"atlas: the input {sorted(bad)[0]!r} would be replaced by an output of the same name; "
                              "move it out of the output folder first")
    with claim_out_dir(out, overwrite or bool(saved)):
        for f in doomed:
            os.remove(f)
        st = _start(images, out, saved, p, opts, say)
        for d in ("templates", "subjects"):
            os.makedirs(os.path.join(out, d), exist_ok=True)
        device = p["device"]
        with pdist.open_client(scheduler=scheduler, client=client, n_workers=n_workers, device=device,
                               tasks=len(st["names"]), worker_log=worker_log) as (c, info):
            say(f"pyca atlas: {info['kind']}: scheduler {info['scheduler']}, {len(info['workers'])} worker(s)"
                + (f", dashboard {info['dashboard']}" if info["dashboard"] else f", {pdist.NO_DASHBOARD}"))
            st.update(scheduler=info["scheduler"], dashboard=info["dashboard"], workers=info["workers"])
            run = _Run(c, st, p, out, say, progress and not quiet, quiet)
            template = run.loop(on_iteration)
        if report:
            from ._atlas_outputs import make_report

            make_report(st, out)
    return AtlasResult(template=template, out=out, summary=_public(st))


_PREVIOUS = [("", r"(template\.nii\.gz|report\.png|summary\.json)"), ("templates", r"template_iter\d+\.nii\.gz"),
             ("cohort", r"(subject_\d+|ground_truth)\.nii\.gz"), ("subjects/*", r"(deformed|phiinv|jacdet)\.nii(\.gz)?")]


def _previous_outputs(out):
    """The files a previous atlas in `out` wrote (what --overwrite removes; anything else is kept)."""
    import re

    found = []
    for folder, pattern in _PREVIOUS:
        for d in sorted(_glob.glob(os.path.join(_glob.escape(out), folder))) if folder else [out]:
            if not os.path.isdir(d) or os.path.islink(d):
                continue
            found += [os.path.join(d, f) for f in sorted(os.listdir(d))
                      if re.fullmatch(pattern, f) and os.path.isfile(os.path.join(d, f))]
    return found


def _public(st):
    return {k: v for k, v in st.items() if not k.startswith("_")}


# ------------------------------------------------------------------------------------------------
class _Run:
    """One atlas run on a Dask client: the iterations, their checkpoints and the failure rules."""

    def __init__(self, client, st, params, out, say, progress, quiet):
        self.c, self.st, self.p, self.out, self.say = client, st, params, out, say
        self.sources = st.get("_inputs") or st["sources"]
        if any(isinstance(s, ca.Image3D) for s in self.sources):
            self.sources = [client.scatter(s) if isinstance(s, ca.Image3D) else s for s in self.sources]
        self.names = st["names"]
        self.ext = st.get("subject_ext", ".nii")
        # Task keys name the run too: two atlases on one cluster never share a result.
        self.tag = uuid.uuid4().hex[:8]
        todo = (st["target_iterations"] - max(st["completed_iteration"], 0)) * self._active_count()
        self.quiet = quiet
        self.prog = progress_bar(max(todo, 0), "pyca atlas", unit="reg", disable=not progress or quiet)

    def _active(self):
        return [i for i, n in enumerate(self.names) if n not in self.st["excluded"]]

    def _active_count(self):
        return len(self._active())

    def _pin(self, idx):
        w = pdist.worker_addresses(self.c)
        return {i: w[k % len(w)] for k, i in enumerate(idx)}

    def _template_path(self, k):
        return os.path.join(self.out, "templates", f"template_iter{k:03d}.nii.gz")

    def _exclude(self, k, name, error):
        self.st["excluded"][name] = {"iteration": k, "error": error}
        if not self.quiet:
            self.prog.write(f"pyca atlas: subject {name} excluded at iteration {k}: {error}", file=sys.stderr)
        n, bad = len(self.names), len(self.st["excluded"])
        if bad > self.st["max_failed_fraction"] * n:
            raise AtlasError(f"atlas: {bad} of {n} subjects failed, more than the allowed fraction "
                             f"{self.st['max_failed_fraction']:g}; stopping (last: {name}: {error})")

    def loop(self, on_iteration):
        st = self.st
        if st["completed_iteration"] < 0:
            self._iteration(0)
            if on_iteration:
                on_iteration(0, _public(st))
        for k in range(st["completed_iteration"] + 1, st["target_iterations"] + 1):
            self._iteration(k)
            if on_iteration:
                on_iteration(k, _public(st))
        self.prog.close()
        return pio.load_image(os.path.join(self.out, "template.nii.gz"))

    def _submit(self, k, idx, pins):
        submit = self.c.submit
        if k == 0:
            grid = self._reference_grid(idx)
            return {i: submit(tasks.initial, self.sources[i], self.names[i], grid, self.out, self.ext,
                              key=f"atlas-0-{self.names[i]}-{self.tag}",
                              workers=[pins[i]], allow_other_workers=True, retries=2) for i in idx}
        tpath = self._template_path(k - 1)
        p = dict(self.p)
        return {i: submit(tasks.register, self.sources[i], tpath, self.names[i], self.out, p, k, self.ext,
                          key=f"atlas-{k}-{self.names[i]}-{self.tag}", workers=[pins[i]],
                          allow_other_workers=True,
                          retries=2) for i in idx}

    def _reference_grid(self, idx):
        for i in idx:
            try:
                g = self.c.submit(tasks.reference_grid, self.sources[i], pure=False).result()
                self.st["grid"] = {"size": list(g.size()), "spacing": list(g.spacing()), "origin": list(g.origin()),
                                   "from": self.names[i]}
                return g
            except tasks.INPUT_ERRORS as e:
                self._exclude(0, self.names[i], str(e))
        raise AtlasError("atlas: no subject could be read")

    def _iteration(self, k):
        from distributed import as_completed

        t0 = time.perf_counter()
        sent0 = pdist.bytes_sent(self.c)
        idx = self._active()
        pins = self._pin(idx)
        futs = self._submit(k, idx, pins)
        recs = {i: self.c.submit(tasks.record, f, key=f"rec-{f.key}", workers=[pins[i]], allow_other_workers=True)
                for i, f in futs.items()}
        total = pdist.tree_reduce(self.c, [futs[i] for i in idx], tasks.combine, [pins[i] for i in idx],
                                  key=f"atlas-sum-{k}-{self.tag}")
        tmpl = self.c.submit(tasks.finish, total, key=f"atlas-template-{k}-{self.tag}")
        # The client keeps no subject result: each leaves its worker's memory once summed and recorded.
        del futs, total
        records = {}
        owner = {f.key: i for i, f in recs.items()}
        try:
            for f in as_completed(list(recs.values())):
                r = f.result()  # a task that raised (not a bad input: those return ok=False) stops the atlas
                i = owner[f.key]
                records[self.names[i]] = r
                if not r["ok"]:
                    self._exclude(k, self.names[i], r["error"])
                if k > 0:
                    self.prog.set_postfix_str(f"it {k}/{self.st['target_iterations']}"
                                              + (f" E={r['energy']:.4g}" if r["ok"] else ""), refresh=False)
                    self.prog.update(1)
            template = tmpl.result()
        except AtlasError:
            raise
        except Exception as e:  # noqa: BLE001 - say which iteration, and how to go on
            raise AtlasError(f"atlas: iteration {k} failed ({type(e).__name__}: {e}); the atlas up to iteration "
                             f"{self.st['completed_iteration']} is in {self.out}: continue with "
                             f"pyca atlas --resume {self.out}") from e
        path = self._template_path(k)
        pio.save_image(template, path, description=f"pyca atlas iteration {k}")
        pio.save_image(template, os.path.join(self.out, "template.nii.gz"), description=f"pyca atlas iteration {k}")
        ok = [i for i in idx if records.get(self.names[i], {}).get("ok")]
        spreads = self.c.gather([
            self.c.submit(tasks.spread, tasks.subject_file(self.out, self.names[i], "deformed", self.ext), path,
                          key=f"atlas-spread-{k}-{self.names[i]}-{self.tag}", workers=[pins[i]],
                          allow_other_workers=True) for i in ok])
        del recs, tmpl
        sent1 = pdist.bytes_sent(self.c)
        moved = max(0, sent1 - sent0) if sent0 is not None and sent1 is not None else None
        self._record(k, t0, template, records, dict(zip((self.names[i] for i in ok), spreads)), len(idx), moved)

    def _record(self, k, t0, template, records, spreads, n_submitted, moved):
        st = self.st
        wall = time.perf_counter() - t0
        ok = [r for r in records.values() if r.get("ok") and "registration_s" in r]
        busy = {}
        for r in ok:
            busy[r["worker"]] = busy.get(r["worker"], 0.0) + r["registration_s"]
        entry = {"iteration": k, "wall_s": wall, "subjects": n_submitted, "succeeded": len(spreads),
                 "spread": float(np.mean(list(spreads.values()))) if spreads else None,
                 "spread_per_subject": spreads,
                 "registration_s_sum": sum(r["registration_s"] for r in ok),
                 "registration_s_per_subject": (sum(r["registration_s"] for r in ok) / len(ok)) if ok else None,
                 "outside_registration_s": wall - max(busy.values()) if busy else wall,
                 "workers_used": sorted(busy),
                 "bytes_sent_by_workers": moved,
                 "energies": {r["name"]: r["energy"] for r in ok},
                 "records": {n: r for n, r in records.items()}}
        if st.get("truth"):
            gt = np.asarray(pio.load_image(st["truth"]))
            entry["truth_distance"] = float(np.mean((np.asarray(template).astype(np.float64) - gt) ** 2))
        st["iterations"] = [e for e in st["iterations"] if e["iteration"] < k] + [entry]
        st["completed_iteration"] = k
        first = st["iterations"][0]
        if first.get("spread") and entry.get("spread") is not None:
            st["spread_reduction"] = 1.0 - entry["spread"] / first["spread"]
        st["files"] = {"template": "template.nii.gz", "templates": "templates/template_iterNNN.nii.gz",
                       "subjects": "subjects/NAME/{deformed,phiinv,jacdet}" + self.ext, "report": "report.png"}
        st["provenance"] = record_cluster(self.c, inputs={f"subjects/{n}": src for n, src in
                                                          zip(st["names"], st["sources"]) if src is not None},
                                          device=self.p["device"])
        write_json(_public(st), os.path.join(self.out, "summary.json"))
        self.say(f"pyca atlas: iteration {k}: spread {entry['spread']:.5g}"
                 + (f", distance to ground truth {entry['truth_distance']:.5g}" if "truth_distance" in entry else "")
                 + f", {wall:.1f} s ({entry['outside_registration_s']:.1f} s outside registration)")


# ------------------------------------------------------------------------------------------------
# The `pyca atlas` subcommand (pyca/cli.py adds it with add_parser).
def add_parser(sub):
    from ._atlas_cli import add_atlas_parser

    return add_atlas_parser(sub)
