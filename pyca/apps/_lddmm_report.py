"""report.png of pyca lddmm: what it shows and how it is drawn.

report_data() gathers what the report shows (mid z-slices as small NumPy arrays, the energies) on the
calling thread; render() draws the figure, or one of its PARTS, into pixels (matplotlib's Agg, about
1 s to import); compose() adds parts up and write_png() writes the PNG. draw_report() does all of it
in this process. `pyca lddmm` has the parts drawn side by side by helper processes started before
the registration (pyca/apps/_report_process.py, docs/design/report-process.md).
"""
from __future__ import annotations

import numpy as np

__all__ = ["report_data", "render", "compose", "write_png", "draw_report", "PARTS"]


def report_data(res, fixed, host=None):
    """What the report shows, as host NumPy arrays (mid z-slices) and numbers: gathered on the
    calling thread, so that the drawing can run on another one. host: obj -> its host copy (the
    copies write_outputs makes for the files; None: copies made here)."""
    view = (lambda o: o.numpy()) if host is None else (lambda o: np.asarray(host(o)))
    fx = view(fixed)
    z = fx.shape[2] // 2
    jac = view(res.jacobian)
    acc = [e for e in res.energies if e["accepted"]]
    parts = res.device.split(" (")  # "gpu (NAME (details...)...)" -> "gpu (NAME)"
    short = f"{parts[0]} ({parts[1].rstrip(')')})" if len(parts) > 1 else res.device
    sp = tuple(res.deformed.grid().spacing())
    mov = view(res.moving)
    return dict(z=z, fixed=fx[:, :, z], moving=mov[:, :, z], deformed=view(res.deformed)[:, :, z],
                hinv=view(res.phiinv)[:, :, z, :2], jac=jac[:, :, z], jac_range=(float(jac.min()), float(jac.max())),
                lo=float(min(fx.min(), mov.min())), hi=float(max(fx.max(), mov.max())),
                diff_max=float(max(np.abs(fx - mov).max(), 1e-12)), aspect=sp[1] / sp[0], accepted=acc,
                nvox={s["scale"]: float(np.prod(s["grid"])) for s in res.timings.get("scales", [])},
                title=f"pyca lddmm on {short}: mismatch -{100 * res.mismatch_reduction:.1f}%, "
                f"{res.timings.get('registration_s', 0):.1f} s")


# The report in parts, drawn side by side by the helper processes: indices into fig.axes (the 2 x 4
# panels row by row, then the colorbar, 8); the figure's title goes with the last part. Each part is
# the whole figure with the other parts' axes hidden, on the white background, and the panels do not
# overlap, so the parts' pixels add up exactly to the whole figure's (compose()): the same report.png
# however many processes drew it (tests/python/test_cli.py checks it). The energy curve (ticks, legend)
# alone costs about a third of the drawing; the image panels, the deformed grid and det D phiinv with
# its colorbar share the rest.
PARTS = ((0, 1, 2, 3, 4), (5, 6, 8), (7,))


def render(d, part=None, frame=None):
    """The report's pixels (height x width x 4, RGBA, uint8): the whole figure (part None) or the
    part PARTS[part] on a blank figure of the same layout. frame: an unused _frame(), built ahead of
    time (by a helper process)."""
    fig = _figure(d, frame, None if part is None else PARTS[part], title=part in (None, len(PARTS) - 1))
    if part is not None:
        keep = set(PARTS[part])
        for k, ax in enumerate(fig.axes):
            ax.set_visible(k in keep)
    fig.canvas.draw()
    return np.array(fig.canvas.buffer_rgba())


def compose(parts):
    """The whole figure's pixels from render()'s parts: each part is white where it draws nothing."""
    out = parts[0].astype(np.int16)
    for p in parts[1:]:
        out += p.astype(np.int16) - 255
    return np.clip(out, 0, 255).astype(np.uint8)


def write_png(rgba, path):
    """Writes the pixels as a PNG (zlib level 1: faster than Pillow's default 6, files about 1.2x
    larger), whole or not at all."""
    from PIL import Image  # matplotlib's own PNG writer

    from .._files import atomic_path

    with atomic_path(path) as tmp:
        Image.fromarray(rgba, "RGBA").save(tmp, format="png", compress_level=1)


def draw_report(d, path, frame=None):
    """Draws report.png from report_data's dict in this process, written whole or not at all."""
    write_png(render(d, None, frame), path)


def _frame():
    """The report's empty figure, its 2 x 4 axes and the colorbar of det D phiinv (its norm is set by
    the drawing): what does not depend on the data, about half of the figure's construction."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(16, 8.5), dpi=80)
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 4, gridspec_kw=dict(left=0.02, right=0.96, bottom=0.07, top=0.9, wspace=0.2,
                                               hspace=0.18))
    cbar = fig.colorbar(ScalarMappable(Normalize(), "viridis"), ax=axes[1, 2], fraction=0.046,
                        ticks=MaxNLocator(5))
    return fig, axes, cbar


def _figure(d, frame=None, keep=None, title=True):
    # matplotlib's object interface (no pyplot: usable from any thread), fixed margins (no
    # tight_layout: it draws the figure twice), titles at a given height (else each is placed by
    # measuring its axes' tick labels), no ticks on the image panels; the deformed grid is one
    # LineCollection (docs/performance.md, "Writing the outputs of pyca lddmm"). keep: the panels
    # (indices into fig.axes) to fill; None: all. title: the figure's title too.
    from matplotlib.collections import LineCollection

    fig, axes, cbar = frame or _frame()
    keep = set(range(9) if keep is None else keep)
    z, aspect = d["z"], d["aspect"]
    kw = dict(origin="lower", cmap="gray", vmin=d["lo"], vmax=d["hi"], aspect=aspect)
    m = d["diff_max"]
    dkw = dict(origin="lower", cmap="RdBu_r", vmin=-m, vmax=m, aspect=aspect)
    panels = ((0, d["fixed"], kw, f"fixed (z = {z})"), (1, d["moving"], kw, f"moving (z = {z})"),
              (2, d["deformed"], kw, f"deformed moving (z = {z})"),
              (3, d["fixed"] - d["deformed"], dkw, "fixed - deformed"),
              (4, d["fixed"] - d["moving"], dkw, "fixed - moving (before)"),
              (5, d["moving"], kw, "fixed grid mapped by phiinv, on moving"))
    for k, img, style, name in panels:
        if k in keep:
            ax = axes.flat[k]
            ax.imshow(img.T, **style)
            ax.set_title(name, y=1.0)
            ax.set_axis_off()
    if 5 in keep:
        ax = axes[1, 1]
        hx, hy = d["hinv"][..., 0], d["hinv"][..., 1]
        step = max(1, min(hx.shape) // 24)
        lines = [np.column_stack([hx[i, :], hy[i, :]]) for i in range(0, hx.shape[0], step)]
        lines += [np.column_stack([hx[:, j], hy[:, j]]) for j in range(0, hx.shape[1], step)]
        ax.add_collection(LineCollection(lines, colors="orange", linewidths=0.6))
        ax.set_xlim(-0.5, hx.shape[0] - 0.5)
        ax.set_ylim(-0.5, hx.shape[1] - 0.5)
    if 6 in keep:
        ax = axes[1, 2]
        norm = cbar.norm  # the slice's range, as imshow would scale it
        norm.vmin, norm.vmax = float(d["jac"].min()), float(d["jac"].max())
        cbar.update_normal(ax.imshow(d["jac"].T, origin="lower", cmap="viridis", norm=norm, aspect=aspect))
        ax.set_axis_off()
        ax.set_title("det D phiinv (min {:.3g}, max {:.3g})".format(*d["jac_range"]), y=1.0)
    if 7 in keep:
        _energy_panel(axes[1, 3], d)
    if title:
        fig.suptitle(d["title"])
    return fig


def _energy_panel(ax, d):
    from matplotlib.ticker import LogFormatter, LogLocator, MaxNLocator, NullLocator

    acc = d["accepted"]
    if acc:
        # Per voxel, so that the scales (with 8x fewer voxels each) share one curve.
        x = np.arange(len(acc))
        for key, label in (("energy", "total"), ("match", "match"), ("reg", "regularisation")):
            ax.semilogy(x, [max(e[key], 1e-30) / d["nvox"].get(e["scale"], 1.0) for e in acc], label=label)
        for s in (i for i in range(1, len(acc)) if acc[i]["scale"] != acc[i - 1]["scale"]):
            ax.axvline(s, color="gray", lw=0.5, ls="--")
        ax.legend(loc="center right")  # a fixed place: "best" tests every spot against the curves
        # Decades only, labelled 1e-03 (no minor ticks, no mathtext), and few ticks elsewhere: each
        # tick is a few artists; together a third of the drawing's time.
        ax.xaxis.set_major_locator(MaxNLocator(5, integer=True))
        ax.yaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0,)))
        ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=True))
        ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.tick_right()  # clear of the colorbar on its left
    ax.set_xlabel("accepted iteration (dashed: next scale)")
    ax.set_title("energy per voxel", y=1.0)
