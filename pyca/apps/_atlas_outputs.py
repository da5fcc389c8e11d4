"""The atlas's PNG report: template mid-slices per iteration, the spread of the subjects around the
template, per-subject registration energies (and the distance to the ground truth for the built-in
cohort)."""
from __future__ import annotations

import os

import numpy as np

from .. import io as pio

__all__ = ["make_report"]

_MAX_PANELS = 6  # template slices shown (first, last and evenly spaced between)


def _mid(arr):
    return arr[:, :, arr.shape[2] // 2]


def make_report(st, out):
    """Writes out/report.png (under a temporary name, renamed when complete); returns its path."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    its = st["iterations"]
    ks = [e["iteration"] for e in its]
    if len(ks) > _MAX_PANELS:
        ks = [ks[int(round(j))] for j in np.linspace(0, len(ks) - 1, _MAX_PANELS)]
    slices = [_mid(np.asarray(pio.load_image(os.path.join(out, "templates", f"template_iter{k:03d}.nii.gz"))))
              for k in ks]
    truth = st.get("truth")
    ncol = max(len(slices) + (1 if truth else 0), 3)
    fig, axes = plt.subplots(2, ncol, figsize=(3.2 * ncol, 6.8), squeeze=False)
    g = st.get("grid") or {}
    sp = g.get("spacing", [1, 1, 1])
    kw = dict(origin="lower", cmap="gray", aspect=sp[1] / sp[0], vmin=0.0,
              vmax=max(float(max(s.max() for s in slices)), 1e-6))
    for ax, k, s in zip(axes[0], ks, slices):
        ax.imshow(s.T, **kw)
        ax.set_title("initial mean" if k == 0 else f"template, iteration {k}")
    if truth:
        axes[0, len(slices)].imshow(_mid(np.asarray(pio.load_image(truth))).T, **kw)
        axes[0, len(slices)].set_title("ground truth")
    for ax in axes[0]:
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in axes[0, len(slices) + (1 if truth else 0):]:
        ax.axis("off")
    x = [e["iteration"] for e in its]
    ax = axes[1, 0]
    ax.plot(x, [e["spread"] for e in its], "o-", label="mean over subjects")
    for name in its[0].get("spread_per_subject", {}):
        ys = [e["spread_per_subject"].get(name, np.nan) for e in its]
        ax.plot(x, ys, color="gray", lw=0.5, alpha=0.6)
    if truth:
        ax.plot(x, [e.get("truth_distance", np.nan) for e in its], "s--", label="template vs ground truth")
    ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_title("mean squared difference per voxel\n(template vs deformed subjects)")
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    reg = [e for e in its if e.get("energies")]
    for name in (reg[-1]["energies"] if reg else {}):
        ax.plot([e["iteration"] for e in reg], [e["energies"].get(name, np.nan) for e in reg], lw=0.8)
    ax.set_xlabel("iteration")
    ax.set_title("LDDMM energy per subject")
    ax = axes[1, 2]
    ax.bar([str(e["iteration"]) for e in its], [e["wall_s"] for e in its], label="wall")
    ax.bar([str(e["iteration"]) for e in its], [e["outside_registration_s"] for e in its], label="outside registration")
    ax.set_xlabel("iteration")
    ax.set_title("time (s)")
    ax.legend(fontsize=8)
    for ax in axes[1, 3:]:
        ax.axis("off")
    n, bad = len(st["names"]), len(st["excluded"])
    red = st.get("spread_reduction")
    fig.suptitle(f"pyca atlas: {n - bad} of {n} subjects, {len(st.get('workers', []))} worker(s)"
                 + (f", spread -{100 * red:.1f}%" if red is not None else ""))
    fig.tight_layout()
    path = os.path.join(out, "report.png")
    tmp = os.path.join(out, f".report.png.tmp-{os.getpid()}")
    fig.savefig(tmp, dpi=72, format="png")
    plt.close(fig)
    os.replace(tmp, path)
    return path
