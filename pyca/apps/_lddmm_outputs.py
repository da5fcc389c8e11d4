"""Outputs of pyca.apps.lddmm: NIfTI files, a PNG report and a JSON summary."""
from __future__ import annotations

import os
import time

import numpy as np

from .. import io as pio

__all__ = ["write_outputs", "make_report"]


def write_outputs(res, fixed, moving, out_dir, report=True, save_inputs=False):
    """Writes deformed.nii.gz, affine.txt, labels.nii.gz (with labels), phiinv_full.nii.gz,
    phiinv.nii.gz, phi.nii.gz, jacdet.nii.gz, summary.json and (report) report.png into out_dir
    (created); save_inputs also writes fixed.nii.gz and moving.nii.gz.
    Returns the list of paths written."""
    import json

    os.makedirs(out_dir, exist_ok=True)
    t0 = time.perf_counter()
    paths = []

    def out(name):
        paths.append(os.path.join(out_dir, name))
        return paths[-1]

    if save_inputs:
        pio.save_image(fixed, out("fixed.nii.gz"))
        pio.save_image(moving, out("moving.nii.gz"))
    pio.save_image(res.deformed, out("deformed.nii.gz"), description="pyca lddmm: moving o phiinv")
    if res.affine is not None:
        from .affine import write_itk

        write_itk(res.affine.matrix, out("affine.txt"))
    if res.labels is not None:
        pio.save_image(res.labels, out("labels.nii.gz"), description="pyca lddmm: moving labels (nearest)")
    if res.full_map is not None:
        pio.save_field(res.full_map, out("phiinv_full.nii.gz"), description="pyca H moving voxel of fixed voxel")
    pio.save_field(res.phiinv, out("phiinv.nii.gz"), description="pyca H phiinv")
    pio.save_field(res.phi, out("phi.nii.gz"), description="pyca H phi")
    pio.save_image(res.jacobian, out("jacdet.nii.gz"), description="pyca lddmm: det D phiinv")
    if report:
        make_report(res, fixed, out("report.png"))
    res.timings["write_s"] = time.perf_counter() - t0
    summary = res.summary()
    summary["files"] = [os.path.basename(p) for p in paths] + ["summary.json"]
    with open(out("summary.json"), "w") as fh:
        json.dump(summary, fh, indent=2, default=float)
    return paths


def make_report(res, fixed, path):
    """A PNG: mid-slices (z) of fixed, moving (on the fixed grid), deformed and fixed - deformed, the
    deformed grid (phiinv's mid-slice) over the deformed image, det D phiinv, and the energy curve."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fx = fixed.numpy()
    dfm = res.deformed.numpy()
    g = res.deformed.grid()
    mov = res.moving.numpy()
    hinv = res.phiinv.numpy()
    jac = res.jacobian.numpy()
    z = fx.shape[2] // 2
    sp = tuple(g.spacing())
    aspect = sp[1] / sp[0]
    lo, hi = float(min(fx.min(), mov.min())), float(max(fx.max(), mov.max()))
    fig, axes = plt.subplots(2, 4, figsize=(16, 8.5))
    kw = dict(origin="lower", cmap="gray", vmin=lo, vmax=hi, aspect=aspect)
    for ax, img, title in ((axes[0, 0], fx, "fixed"), (axes[0, 1], mov, "moving"),
                           (axes[0, 2], dfm, "deformed moving")):
        ax.imshow(img[:, :, z].T, **kw)
        ax.set_title(f"{title} (z = {z})")
    d_before = fx - mov
    d_after = fx - dfm
    m = float(max(np.abs(d_before).max(), 1e-12))
    axes[0, 3].imshow(d_after[:, :, z].T, origin="lower", cmap="RdBu_r", vmin=-m, vmax=m, aspect=aspect)
    axes[0, 3].set_title("fixed - deformed")
    axes[1, 0].imshow(d_before[:, :, z].T, origin="lower", cmap="RdBu_r", vmin=-m, vmax=m, aspect=aspect)
    axes[1, 0].set_title("fixed - moving (before)")
    ax = axes[1, 1]
    ax.imshow(mov[:, :, z].T, **kw)
    step = max(1, min(fx.shape[0], fx.shape[1]) // 24)
    hx, hy = hinv[:, :, z, 0], hinv[:, :, z, 1]
    for i in range(0, hx.shape[0], step):
        ax.plot(hx[i, :], hy[i, :], color="orange", lw=0.6)
    for j in range(0, hx.shape[1], step):
        ax.plot(hx[:, j], hy[:, j], color="orange", lw=0.6)
    ax.set_xlim(-0.5, fx.shape[0] - 0.5)
    ax.set_ylim(-0.5, fx.shape[1] - 0.5)
    ax.set_title("fixed grid mapped by phiinv, on moving")
    jm = axes[1, 2].imshow(jac[:, :, z].T, origin="lower", cmap="viridis", aspect=aspect)
    fig.colorbar(jm, ax=axes[1, 2], fraction=0.046)
    axes[1, 2].set_title(f"det D phiinv (min {jac.min():.3g}, max {jac.max():.3g})")
    ax = axes[1, 3]
    acc = [e for e in res.energies if e["accepted"]]
    if acc:
        # Per voxel, so that the scales (with 8x fewer voxels each) share one curve.
        nvox = {s["scale"]: float(np.prod(s["grid"])) for s in res.timings.get("scales", [])}
        x = np.arange(len(acc))
        for key, label in (("energy", "total"), ("match", "match"), ("reg", "regularisation")):
            ax.semilogy(x, [max(e[key], 1e-30) / nvox.get(e["scale"], 1.0) for e in acc], label=label)
        starts = [i for i in range(1, len(acc)) if acc[i]["scale"] != acc[i - 1]["scale"]]
        for s in starts:
            ax.axvline(s, color="gray", lw=0.5, ls="--")
        ax.legend()
    ax.set_xlabel("accepted iteration (dashed: next scale)")
    ax.set_title("energy per voxel")
    parts = res.device.split(" (")  # "gpu (NAME (details...)...)" -> "gpu (NAME)"
    short = f"{parts[0]} ({parts[1].rstrip(')')})" if len(parts) > 1 else res.device
    fig.suptitle(f"pyca lddmm on {short}: mismatch -{100 * res.mismatch_reduction:.1f}%, "
                 f"{res.timings.get('registration_s', 0):.1f} s")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
