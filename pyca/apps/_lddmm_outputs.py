"""Outputs of pyca.apps.lddmm: NIfTI files, a PNG report and a JSON summary.

Every file is written whole or not at all (pyca/_files.py). The results are copied to host memory
first, on the calling thread; then the files are encoded side by side on a few threads (zlib and
PNG encoding release the GIL) and summary.json is written last, once everything else is complete.
Timings: docs/performance.md ("Writing the outputs of pyca lddmm").
"""
from __future__ import annotations

import functools
import os
import time

import numpy as np

from .. import core as ca
from .. import io as pio
from .._files import atomic_open, write_parallel

__all__ = ["write_outputs", "make_report", "output_names"]

_DESCRIPTIONS = {"deformed": "pyca lddmm: moving o phiinv", "phiinv": "pyca H phiinv", "phi": "pyca H phi",
                 "jacdet": "pyca lddmm: det D phiinv", "fixed": "", "moving": ""}


def output_names(compress=True):
    """Every file name write_outputs can write (the CLI removes them from a folder it overwrites)."""
    ext = ".nii.gz" if compress else ".nii"
    return [n + e for n in _DESCRIPTIONS for e in (ext, ".nii", ".nii.gz")] + ["report.png", "summary.json"]


def _host(obj):
    return obj if int(obj.memType()) != int(ca.MEM_DEVICE) else obj.clone(ca.MEM_HOST)


def write_outputs(res, fixed, moving, out_dir, report=True, save_inputs=False, compress=True, workers=None):
    """Writes deformed, phiinv, phi, jacdet (.nii.gz, or .nii when not compress), summary.json and
    (report) report.png into out_dir (created); save_inputs also writes fixed and moving. Returns
    the list of paths written (summary.json's last). workers: threads encoding the files (default:
    one per file, at most the CPU count)."""
    import json

    os.makedirs(out_dir, exist_ok=True)
    t0 = time.perf_counter()
    ext = ".nii.gz" if compress else ".nii"
    items = [("fixed", fixed), ("moving", moving)] if save_inputs else []
    items += [("deformed", res.deformed), ("phiinv", res.phiinv), ("phi", res.phi), ("jacdet", res.jacobian)]
    paths, jobs = [], []
    for name, obj in items:
        save = pio.save_field if isinstance(obj, ca.Field3D) else pio.save_image
        paths.append(os.path.join(out_dir, name + ext))
        jobs.append(functools.partial(save, _host(obj), paths[-1], description=_DESCRIPTIONS[name]))
    if report:
        paths.append(os.path.join(out_dir, "report.png"))
        jobs.insert(0, functools.partial(_draw_report, _report_data(res, fixed), paths[-1]))  # the longest first
    write_parallel(jobs, workers)
    res.timings["write_s"] = time.perf_counter() - t0
    summary = res.summary()
    summary["files"] = [os.path.basename(p) for p in paths] + ["summary.json"]
    paths.append(os.path.join(out_dir, "summary.json"))
    with atomic_open(paths[-1]) as fh:
        json.dump(summary, fh, indent=2, default=float)
    return paths


def make_report(res, fixed, path):
    """A PNG: mid-slices (z) of fixed, moving (on the fixed grid), deformed and fixed - deformed, the
    deformed grid (phiinv's mid-slice) over the deformed image, det D phiinv, and the energy curve."""
    _draw_report(_report_data(res, fixed), path)


def _report_data(res, fixed):
    """What the report shows, as host NumPy arrays (mid z-slices) and numbers: gathered on the
    calling thread, so that the drawing can run on another one."""
    fx = fixed.numpy()
    z = fx.shape[2] // 2
    jac = res.jacobian.numpy()
    acc = [e for e in res.energies if e["accepted"]]
    parts = res.device.split(" (")  # "gpu (NAME (details...)...)" -> "gpu (NAME)"
    short = f"{parts[0]} ({parts[1].rstrip(')')})" if len(parts) > 1 else res.device
    sp = tuple(res.deformed.grid().spacing())
    mov = res.moving.numpy()
    return dict(z=z, fixed=fx[:, :, z], moving=mov[:, :, z], deformed=res.deformed.numpy()[:, :, z],
                hinv=res.phiinv.numpy()[:, :, z, :2], jac=jac[:, :, z], jac_range=(float(jac.min()), float(jac.max())),
                lo=float(min(fx.min(), mov.min())), hi=float(max(fx.max(), mov.max())),
                diff_max=float(max(np.abs(fx - mov).max(), 1e-12)), aspect=sp[1] / sp[0], accepted=acc,
                nvox={s["scale"]: float(np.prod(s["grid"])) for s in res.timings.get("scales", [])},
                title=f"pyca lddmm on {short}: mismatch -{100 * res.mismatch_reduction:.1f}%, "
                f"{res.timings.get('registration_s', 0):.1f} s")


def _draw_report(d, path):
    # matplotlib's object interface (no pyplot: usable from any thread), fixed margins (no
    # tight_layout: it draws the figure twice), titles at a given height (else each is placed by
    # measuring its axes' tick labels), no ticks on the image panels; the deformed grid is one
    # LineCollection. About 5x faster than pyplot + tight_layout (docs/performance.md).
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure

    from .._files import atomic_path

    fig = Figure(figsize=(16, 8.5), dpi=80)
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 4, gridspec_kw=dict(left=0.02, right=0.96, bottom=0.07, top=0.9, wspace=0.2,
                                               hspace=0.18))
    z, aspect = d["z"], d["aspect"]
    kw = dict(origin="lower", cmap="gray", vmin=d["lo"], vmax=d["hi"], aspect=aspect)
    m = d["diff_max"]
    dkw = dict(origin="lower", cmap="RdBu_r", vmin=-m, vmax=m, aspect=aspect)
    panels = ((axes[0, 0], d["fixed"], kw, f"fixed (z = {z})"), (axes[0, 1], d["moving"], kw, f"moving (z = {z})"),
              (axes[0, 2], d["deformed"], kw, f"deformed moving (z = {z})"),
              (axes[0, 3], d["fixed"] - d["deformed"], dkw, "fixed - deformed"),
              (axes[1, 0], d["fixed"] - d["moving"], dkw, "fixed - moving (before)"),
              (axes[1, 1], d["moving"], kw, "fixed grid mapped by phiinv, on moving"))
    for ax, img, style, title in panels:
        ax.imshow(img.T, **style)
        ax.set_title(title, y=1.0)
        ax.set_axis_off()
    ax = axes[1, 1]
    hx, hy = d["hinv"][..., 0], d["hinv"][..., 1]
    step = max(1, min(hx.shape) // 24)
    lines = [np.column_stack([hx[i, :], hy[i, :]]) for i in range(0, hx.shape[0], step)]
    lines += [np.column_stack([hx[:, j], hy[:, j]]) for j in range(0, hx.shape[1], step)]
    ax.add_collection(LineCollection(lines, colors="orange", linewidths=0.6))
    ax.set_xlim(-0.5, hx.shape[0] - 0.5)
    ax.set_ylim(-0.5, hx.shape[1] - 0.5)
    ax = axes[1, 2]
    jm = ax.imshow(d["jac"].T, origin="lower", cmap="viridis", aspect=aspect)
    fig.colorbar(jm, ax=ax, fraction=0.046)
    ax.set_axis_off()
    ax.set_title("det D phiinv (min {:.3g}, max {:.3g})".format(*d["jac_range"]), y=1.0)
    ax = axes[1, 3]
    acc = d["accepted"]
    if acc:
        # Per voxel, so that the scales (with 8x fewer voxels each) share one curve.
        x = np.arange(len(acc))
        for key, label in (("energy", "total"), ("match", "match"), ("reg", "regularisation")):
            ax.semilogy(x, [max(e[key], 1e-30) / d["nvox"].get(e["scale"], 1.0) for e in acc], label=label)
        for s in (i for i in range(1, len(acc)) if acc[i]["scale"] != acc[i - 1]["scale"]):
            ax.axvline(s, color="gray", lw=0.5, ls="--")
        ax.legend()
    ax.yaxis.tick_right()  # clear of the colorbar on its left
    ax.set_xlabel("accepted iteration (dashed: next scale)")
    ax.set_title("energy per voxel", y=1.0)
    fig.suptitle(d["title"])
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
