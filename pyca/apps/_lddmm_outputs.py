"""Outputs of pyca.apps.lddmm: NIfTI files, a PNG report and a JSON summary.

Every file is written whole or not at all (pyca/_files.py). The results are copied to host memory
first, on the calling thread; then the files are encoded side by side on a few threads (zlib and
PNG encoding release the GIL; each .nii.gz is deflated in chunks on all cores, pyca/_files.py),
report.png drawn beside them (NumPy and Pillow, _lddmm_report.py), and summary.json is written last,
once everything else is complete.
Timings: docs/performance.md ("Writing the outputs of pyca lddmm").
"""
from __future__ import annotations

import functools
import os
import time

from .. import core as ca
from .. import io as pio
from .._files import atomic_open, write_parallel
from ..registration import transform_files
from .._provenance import record
from ._lddmm_report import ReportError, draw_report, report_data

__all__ = ["write_outputs", "make_report", "output_names"]

_DESCRIPTIONS = {"deformed": "pyca lddmm: moving o phiinv", "phiinv": "pyca H phiinv", "phi": "pyca H phi",
                 "jacdet": "pyca lddmm: det D phiinv", "fixed": "", "moving": "",
                 "phiinv_full": "pyca H full", "labels": "pyca lddmm: moving labels (nearest)"}


_HFIELDS = ("phiinv", "phi", "phiinv_full")  # voxel coordinates: NIfTI intent POINTSET, not a displacement


def output_names(compress=True):
    """Every file name write_outputs can write (the CLI removes them from a folder it overwrites)."""
    ext = ".nii.gz" if compress else ".nii"
    warps = (transform_files.FORWARD_WARP, transform_files.INVERSE_WARP)
    return [n + e for n in tuple(_DESCRIPTIONS) + warps for e in (ext, ".nii", ".nii.gz")] + \
        [transform_files.AFFINE, transform_files.AFFINE_TEXT, "report.png", "summary.json"]


def _host_copies():
    """obj -> obj in host memory: a device object is copied once (its copy kept for the next call),
    a host one is itself."""
    copies = {}

    def host(obj):
        if int(obj.memType()) != int(ca.MEM_DEVICE):
            return obj
        if id(obj) not in copies:
            copies[id(obj)] = (obj, obj.clone(ca.MEM_HOST))  # (obj kept alive: its id stays its own)
        return copies[id(obj)][1]

    return host


def write_outputs(res, fixed, moving, out_dir, report=True, save_inputs=False, compress=True, workers=None,
                  inputs=None, command=None):
    """Writes deformed, phiinv, phi, jacdet (.nii.gz, or .nii when not compress), summary.json and
    (report) report.png into out_dir (created); save_inputs also writes fixed and moving. Returns
    the list of paths written (summary.json's last). workers: threads encoding the files (default:
    write_parallel's default). inputs (role -> file path) and command (an argument list; default
    sys.argv) go into summary.json's "provenance" (pyca/_provenance.py: version, command, inputs'
    SHA-256, device, peak memory). A report that cannot be drawn raises ReportError
    (_lddmm_report.py) once the other files are written; summary.json is then not written."""
    import json

    os.makedirs(out_dir, exist_ok=True)
    t0 = time.perf_counter()
    ext = ".nii.gz" if compress else ".nii"
    items = [("fixed", fixed), ("moving", moving)] if save_inputs else []
    items += [("deformed", res.deformed), ("phiinv", res.phiinv), ("phi", res.phi), ("jacdet", res.jacobian)]
    items += [(n, o) for n, o in (("phiinv_full", res.full_map), ("labels", res.labels)) if o is not None]
    paths, jobs = [], []
    host = _host_copies()  # each device array copied to the host once, for its file and the report
    if report:  # the report's slices are read from the files' host copies
        png = os.path.join(out_dir, "report.png")
        jobs.append(functools.partial(_report_job, report_data(res, fixed, host), png))
    # The transforms as ANTs and ITK read them: the affine, the forward and inverse displacement fields
    # (pyca.registration.transform_files, docs/transforms.md).
    for path, job in transform_files.registration_jobs(res.affine.matrix if res.affine is not None else None,
                                                       host(res.phiinv), host(res.phi), out_dir, ext):
        paths.append(path)
        jobs.append(job)
    for name, obj in items:
        paths.append(os.path.join(out_dir, name + ext))
        if name == "labels" and not isinstance(obj, ca.Image3D):  # a LabelImage: written as integers
            jobs.append(functools.partial(pio.save_labels, obj, None, paths[-1], description=_DESCRIPTIONS[name]))
        elif isinstance(obj, ca.Field3D):
            jobs.append(functools.partial(pio.save_field, host(obj), paths[-1], description=_DESCRIPTIONS[name],
                                          intent="pointset" if name in _HFIELDS else "vector"))
        else:
            jobs.append(functools.partial(pio.save_image, host(obj), paths[-1], description=_DESCRIPTIONS[name]))
    if report:
        paths.append(png)
    t1 = time.perf_counter()
    failed = [r for r in write_parallel(jobs, workers) if isinstance(r, ReportError)]
    t2 = time.perf_counter()
    if failed:  # raised once the NIfTI files are written whole
        raise failed[0]
    # where the writing went: host copies (and the report's slices), then the files and the report
    res.timings.update(write_s=t2 - t0, write_host_s=t1 - t0, write_files_s=t2 - t1)
    summary = res.summary()
    summary["files"] = [os.path.basename(p) for p in paths] + ["summary.json"]
    summary["transforms"] = transform_files.registration_listing(ext)
    summary["provenance"] = record(inputs=inputs, device=res.device, command=command)
    paths.append(os.path.join(out_dir, "summary.json"))
    with atomic_open(paths[-1]) as fh:
        json.dump(summary, fh, indent=2, default=float)
    return paths


def _report_job(d, path):
    """draw_report, its ReportError returned: the other files' jobs are not cancelled for it."""
    try:
        draw_report(d, path)
    except ReportError as e:
        return e
    return None


def make_report(res, fixed, path):
    """A PNG: mid-slices (z) of fixed, moving (on the fixed grid), deformed and fixed - deformed, the
    deformed grid (phiinv's mid-slice) over the deformed image, det D phiinv, and the energy curve."""
    draw_report(report_data(res, fixed), path)
