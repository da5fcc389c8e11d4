"""report.png of pyca lddmm: what it shows and how it is drawn.

report_data() gathers what the report shows (mid z-slices as small NumPy arrays, the energies) on the
calling thread; render() draws the figure into pixels with NumPy (the image panels: each voxel a block
of pixels, coloured by a look-up) and Pillow (lines and text), in milliseconds and without matplotlib,
whose import alone takes longer than a registration on a GPU (docs/design/report.md); write_png()
writes it whole or not at all. draw_report() does both.
"""
from __future__ import annotations

import functools
import math
import threading

import numpy as np

__all__ = ["report_data", "render", "write_png", "draw_report", "ReportError", "LAYOUT", "energy_plot"]


class ReportError(RuntimeError):
    """report.png could not be drawn or written; the message names why, in one line."""


def report_data(res, fixed, host=None):
    """What the report shows, as host NumPy arrays (mid z-slices) and numbers: gathered on the
    calling thread, so that the drawing can run on another one. host: obj -> its host copy (the
    copies write_outputs makes for the files; None: copies made here)."""
    from ..registration.metrics import CLASSES

    view = (lambda o: o.numpy()) if host is None else (lambda o: np.asarray(host(o)))
    fx = view(fixed)
    z = fx.shape[2] // 2
    jac = view(res.jacobian)
    acc = [e for e in res.energies if e["accepted"]]
    parts = res.device.split(" (")  # "gpu (NAME (details...)...)" -> "gpu (NAME)"
    short = f"{parts[0]} ({parts[1].rstrip(')')})" if len(parts) > 1 else res.device
    sp = tuple(res.deformed.grid().spacing())
    mov = view(res.moving)
    # Each image on its own scale (a 0-1 fixed image beside a 0-1400 moving one); the differences of
    # the images so scaled; for different contrasts a checkerboard instead of a difference.
    lo, hi, mlo, mhi = float(fx.min()), float(fx.max()), float(mov.min()), float(mov.max())
    q = getattr(res, "quality", None) or {}
    cls = CLASSES.get(str(res.params.get("metric", "")).lower())
    multimodal = cls is not None and cls.multimodal
    different = multimodal or bool((q.get("contrast") or {}).get("different"))
    diff = _unit(fx, lo, hi) - _unit(mov, mlo, mhi)
    return dict(z=z, fixed=fx[:, :, z], moving=mov[:, :, z], deformed=view(res.deformed)[:, :, z],
                hinv=view(res.phiinv)[:, :, z, :2], jac=jac[:, :, z], jac_range=(float(jac.min()), float(jac.max())),
                lo=lo, hi=hi, moving_lo=mlo, moving_hi=mhi, overlay="checkerboard" if different else "difference",
                diff_max=float(max(np.abs(diff).max(), 1e-12)), aspect=sp[1] / sp[0], accepted=acc,
                nvox={s["scale"]: float(np.prod(s["grid"])) for s in res.timings.get("scales", [])},
                title=_title(res, short))


def _unit(a, lo, hi):
    """a scaled so that [lo, hi] is [0, 1]."""
    return (np.asarray(a, np.float64) - lo) / ((hi - lo) or 1.0)


def _checkerboard(a, b, tiles=8):
    """RGB slices a and b in alternating squares (about `tiles` along the longer axis)."""
    t = max(1, max(a.shape[:2]) // tiles)
    i, j = np.meshgrid(np.arange(a.shape[0]) // t, np.arange(a.shape[1]) // t, indexing="ij")
    return np.where((((i + j) % 2) == 0)[..., None], a, b)


def _title(res, short):
    """The headline: the mismatch's change, or, for a run that failed its checks (pyca.registration.quality),
    FAILED and why: such a run is never headlined as a success."""
    q = getattr(res, "quality", None) or {"ok": True}
    secs = f"{res.timings.get('registration_s', 0):.3g} s"
    if not q["ok"]:
        return f"pyca lddmm on {short}: FAILED ({', '.join(p['code'].replace('_', ' ') for p in q['problems'])}), {secs}"
    lin, fin = q.get("linear_match_energy"), q.get("final_match_energy")
    if str(getattr(res, "params", {}).get("metric", "")).lower() == "mi" and lin and fin is not None:
        # squared differences mean nothing between contrasts: the MI energy's change since the linear stage
        return f"pyca lddmm on {short}: mi energy -{100 * (1 - fin / lin):.1f}% after the linear stage, {secs}"
    return f"pyca lddmm on {short}: mismatch -{100 * res.mismatch_reduction:.1f}%, {secs}"


# ------------------------------------------------------------------------------------------------
# Colours: a slice (x, y) -> RGB (x, y, 3) uint8.
_RED, _BLUE = np.array([178.0, 24.0, 43.0]), np.array([33.0, 102.0, 172.0])  # the ends of the diverging maps
_GRID, _FOLD = (255, 140, 0), (0, 0, 0)  # the deformed grid's lines; det D phiinv <= 0
_SERIES = (("energy", "total", (31, 119, 180)), ("match", "match", (255, 127, 14)),
           ("reg", "regularisation", (44, 160, 44)))


def _gray(a, lo, hi):
    """lo -> black, hi -> white, linear between, clipped."""
    t = np.clip((np.asarray(a, np.float64) - lo) / ((hi - lo) or 1.0), 0.0, 1.0)
    return np.repeat((t * 255.0 + 0.5).astype(np.uint8)[..., None], 3, axis=-1)


def _diverging(t):
    """t in [-1, 1]: -1 blue, 0 white, 1 red, linear between (clipped)."""
    t = np.clip(np.asarray(t, np.float64), -1.0, 1.0)[..., None]
    rgb = 255.0 - np.maximum(t, 0.0) * (255.0 - _RED) - np.maximum(-t, 0.0) * (255.0 - _BLUE)
    return (rgb + 0.5).astype(np.uint8)


def _difference_colors(a, m):
    """A difference image: 0 white, +m red, -m blue."""
    return _diverging(np.asarray(a, np.float64) / m)


def _jacobian_span(jac):
    """The half-range of log2(det) that jacobian_colors spans: the slice's largest |log2 det| over
    its positive values, at least log2(1.05)."""
    pos = jac[jac > 0]
    return max(float(np.abs(np.log2(pos)).max()) if pos.size else 0.0, math.log2(1.05))


def _jacobian_colors(jac, span):
    """det D phiinv on a log scale: 1 (volume kept) white, growth red, shrinkage blue, 2**+-span at
    the ends; a fold (det <= 0) black."""
    jac = np.asarray(jac, np.float64)
    rgb = _diverging(np.log2(np.where(jac > 0, jac, 1.0)) / span)
    rgb[jac <= 0] = _FOLD
    return rgb


# ------------------------------------------------------------------------------------------------
# Layout (pixels): the title, then 2 rows of 4 panels, each with its title line above its box.
_W, _H, _TOP, _MARGIN, _GAP, _LINE = 1280, 680, 36, 12, 20, 20
_CELL_W = (_W - 2 * _MARGIN - 3 * _GAP) // 4
_CELL_H = (_H - _TOP - _MARGIN) // 2


def _box(k):
    """Panel k's box (x0, y0, x1, y1) below its title line, row by row."""
    x0 = _MARGIN + (k % 4) * (_CELL_W + _GAP)
    y0 = _TOP + (k // 4) * _CELL_H + _LINE
    return x0, y0, x0 + _CELL_W, y0 + _CELL_H - _LINE - 8


#: Where each panel is: name -> its box. The image panels are centred in theirs at the slice's aspect.
LAYOUT = {name: _box(k) for k, name in enumerate(("fixed", "moving", "deformed", "fixed - deformed", "fixed - moving",
                                                     "grid", "jacobian", "energy"))}
_BAR = 14  # the colorbar's width; its labels take 56 more pixels to the right
_SMALL, _BIG = 13, 16  # font sizes: labels, the title


def _place(img, rgb, box, aspect):
    """Pastes the slice's colours (x, y, 3) into box at the slice's aspect (y spacing / x spacing),
    as large as fits, centred, y upwards (each voxel a block of pixels: Pillow's nearest-neighbour
    resize). Returns the rectangle it fills (x0, y0, x1, y1, exclusive ends) and voxel -> pixel: a
    function of (x, y) in voxels (voxel centres at integers)."""
    from PIL import Image

    nx, ny = rgb.shape[:2]
    bw, bh = box[2] - box[0], box[3] - box[1]
    s = min(bw / nx, bh / (ny * aspect))
    w, h = max(1, int(nx * s)), max(1, int(ny * aspect * s))
    x0, y0 = box[0] + (bw - w) // 2, box[1] + (bh - h) // 2
    rows = np.ascontiguousarray(rgb.transpose(1, 0, 2)[::-1])  # (y, x), the top row the largest y
    img.paste(Image.fromarray(rows, "RGB").resize((w, h), Image.NEAREST), (x0, y0))
    return (x0, y0, x0 + w, y0 + h), lambda x, y: (x0 + (np.asarray(x) + 0.5) * w / nx,
                                                   y0 + h - (np.asarray(y) + 0.5) * h / ny)


@functools.lru_cache(maxsize=None)
def _font(size):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)  # Pillow >= 10.1 with FreeType: a scalable font
    except (TypeError, ImportError, OSError):
        return ImageFont.load_default()


_FONT_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1024)
def _text_mask(s, size):
    """The text's coverage (an "L" image, drawn at its origin as ImageDraw.text draws it) and its
    advance width: rasterised once per string and size (FreeType's rendering was half of a
    drawing; prepare() renders the report's fixed strings ahead)."""
    from PIL import Image, ImageDraw

    with _FONT_LOCK:  # one FreeType face, shared: prepare()'s thread, writer threads, Dask's threads
        font = _font(size)
        box = font.getbbox(s)
        mask = Image.new("L", (max(int(box[2]), 1), max(int(box[3]), 1)), 0)
        ImageDraw.Draw(mask).text((0, 0), s, fill=255, font=font)
        return mask, font.getlength(s)


def _text(draw, x, y, s, size=_SMALL, align="left", fill=(0, 0, 0)):
    """Text with its top at y, starting (left), centred (center) or ending (right) at x."""
    mask, w = _text_mask(s, size)
    x = x - {"left": 0.0, "center": w / 2, "right": w}[align]
    draw.bitmap((round(x), round(y)), mask, fill=fill)


def _dashed(draw, x, y0, y1, fill, dash=4):
    for y in range(int(y0), int(y1), 2 * dash):
        draw.line([(x, y), (x, min(y + dash, y1))], fill=fill)


def _nice_step(span, n=5):
    """A step of 1, 2 or 5 times a power of ten giving at most about n ticks over span."""
    raw = max(span / n, 1e-12)
    p = 10.0 ** math.floor(math.log10(raw))
    return next(m * p for m in (1, 2, 5, 10) if m * p >= raw)


def render(d):
    """The report's pixels (height x width x 3, RGB, uint8) from report_data's dict."""
    return np.asarray(_render(d))


def _render(d):
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (_W, _H), (255, 255, 255))
    z, aspect, m = d["z"], d["aspect"], d["diff_max"]
    lo, hi = d["lo"], d["hi"]
    mlo, mhi = d.get("moving_lo", lo), d.get("moving_hi", hi)  # each image on its own scale
    g = lambda a: _gray(a, lo, hi)  # noqa: E731
    gm = lambda a: _gray(a, mlo, mhi)  # noqa: E731
    if (mlo, mhi) == (lo, hi):
        dif = lambda a: _difference_colors(d["fixed"] - a, m)  # noqa: E731
    else:
        dif = lambda a: _difference_colors(_unit(d["fixed"], lo, hi) - _unit(a, mlo, mhi), m)  # noqa: E731
    if d.get("overlay") == "checkerboard":  # different contrasts: a difference means nothing
        after = (_checkerboard(g(d["fixed"]), gm(d["deformed"])), "checkerboard fixed / deformed")
        before = (_checkerboard(g(d["fixed"]), gm(d["moving"])), "checkerboard fixed / moving (before)")
    else:
        after = (dif(d["deformed"]), "fixed - deformed" + ("" if (mlo, mhi) == (lo, hi) else " (each scaled)"))
        before = (dif(d["moving"]), "fixed - moving (before)")
    panels = (("fixed", g(d["fixed"]), f"fixed (z = {z}; {lo:.3g} to {hi:.3g})"),
              ("moving", gm(d["moving"]), f"moving (z = {z}; {mlo:.3g} to {mhi:.3g})"),
              ("deformed", gm(d["deformed"]), f"deformed moving (z = {z})"),
              ("fixed - deformed", *after), ("fixed - moving", *before),
              ("grid", gm(d["moving"]), "fixed grid mapped by phiinv, on moving"))
    placed = {name: _place(img, rgb, LAYOUT[name], aspect) for name, rgb, _ in panels}
    span = _jacobian_span(d["jac"])
    x0, y0, x1, y1 = LAYOUT["jacobian"]
    placed["jacobian"] = _place(img, _jacobian_colors(d["jac"], span), (x0, y0, x1 - _BAR - 62, y1), aspect)
    bar = (x1 - _BAR - 56, y0 + 10, x1 - 56, y1 - 10)  # log2 det from +span (top) to -span
    t = np.linspace(1.0, -1.0, bar[3] - bar[1])[:, None]
    img.paste(Image.fromarray(_diverging(np.repeat(t, _BAR, axis=1)), "RGB"), bar[:2])
    draw = ImageDraw.Draw(img)
    _text(draw, _W / 2, 8, d["title"], _BIG, "center")
    for name, _, title in panels:
        bx0, by0, bx1, _ = LAYOUT[name]
        _text(draw, (bx0 + bx1) / 2, by0 - _LINE + 2, title, align="center")
    # the deformed grid: every few rows and columns of phiinv's mid-slice (moving voxels), over
    # moving, clipped to its image (drawn on a crop of it)
    rect, to_pixel = placed["grid"]
    hx, hy = d["hinv"][..., 0], d["hinv"][..., 1]
    step = max(1, min(hx.shape) // 24)
    px, py = to_pixel(hx, hy)
    px, py = px - rect[0], py - rect[1]
    crop = img.crop(rect)
    lines = ImageDraw.Draw(crop)
    for i in range(0, hx.shape[0], step):
        lines.line(list(zip(px[i, :].tolist(), py[i, :].tolist())), fill=_GRID)
    for j in range(0, hx.shape[1], step):
        lines.line(list(zip(px[:, j].tolist(), py[:, j].tolist())), fill=_GRID)
    img.paste(crop, rect[:2])
    for (rx0, ry0, rx1, ry1), _ in placed.values():  # a thin frame around each image
        draw.rectangle([rx0 - 1, ry0 - 1, rx1, ry1], outline=(160, 160, 160))
    # det D phiinv's title and colorbar
    _text(draw, (x0 + x1) / 2, y0 - _LINE + 2, "det D phiinv (min {:.3g}, max {:.3g})".format(*d["jac_range"]),
          align="center")
    draw.rectangle([bar[0] - 1, bar[1] - 1, bar[2], bar[3]], outline=(0, 0, 0))
    for frac, value in ((0.0, 2.0 ** span), (0.5, 1.0), (1.0, 2.0 ** -span)):
        y = bar[1] + frac * (bar[3] - bar[1] - 1)
        draw.line([(bar[2], y), (bar[2] + 3, y)], fill=(0, 0, 0))
        _text(draw, bar[2] + 6, y - 7, f"{value:.3g}")
    if d["jac_range"][0] <= 0:
        _text(draw, bar[0] - 4, bar[3] + 3, "black: det <= 0")
    _energy_panel(draw, LAYOUT["energy"], d)
    return img


def energy_plot(box):
    """The energy panel's plot (x0, y0, x1, y1, its frame) in the panel's box: tick labels to its
    right and below."""
    return box[0] + 4, box[1] + 4, box[2] - 48, box[3] - 34


def _energy_panel(draw, box, d):
    """The energies per voxel (so that the scales, with 8x fewer voxels each, share one curve) of the
    accepted iterations, on a log axis labelled at its decades (right); dashed: a new scale."""
    bx0, by0, bx1, by1 = box
    x0, y0, x1, y1 = energy_plot(box)
    _text(draw, (bx0 + bx1) / 2, by0 - _LINE + 2, "energy per voxel", align="center")
    draw.rectangle([x0, y0, x1, y1], outline=(0, 0, 0))
    _text(draw, (x0 + x1) / 2, y1 + 18, "accepted iteration (dashed: next scale)", align="center")
    acc = d["accepted"]
    if not acc:
        _text(draw, (x0 + x1) / 2, (y0 + y1) / 2 - 7, "no accepted iteration", align="center")
        return
    logs = {key: np.log10([max(e[key], 1e-30) / d["nvox"].get(e["scale"], 1.0) for e in acc]) for key, _, _ in _SERIES}
    lo = math.floor(min(v.min() for v in logs.values()))
    hi = max(math.ceil(max(v.max() for v in logs.values())), lo + 1)
    n = len(acc)
    xs = x0 + np.arange(n) * (x1 - x0) / max(n - 1, 1)

    def ys(v):
        return y1 - (v - lo) * (y1 - y0) / (hi - lo)

    for k in range(lo, hi + 1, max(1, math.ceil((hi - lo) / 8))):  # decades: a light line, a tick, 1e-3
        y = ys(k)
        draw.line([(x0 + 1, y), (x1 - 1, y)], fill=(225, 225, 225))
        draw.line([(x1, y), (x1 + 4, y)], fill=(0, 0, 0))
        _text(draw, x1 + 6, y - 7, f"1e{k}")
    step = _nice_step(max(n - 1, 1))
    for i in np.arange(0, n, step):
        x = x0 + i * (x1 - x0) / max(n - 1, 1)
        draw.line([(x, y1), (x, y1 + 4)], fill=(0, 0, 0))
        _text(draw, x, y1 + 4, f"{i:g}", align="center")
    for i in range(1, n):
        if acc[i]["scale"] != acc[i - 1]["scale"]:
            _dashed(draw, xs[i], y0 + 1, y1 - 1, (128, 128, 128))
    for key, _, color in _SERIES:
        draw.line(list(zip(xs.tolist(), ys(logs[key]).tolist())), fill=color, width=2)
    ly = (y0 + y1) / 2 - 30  # the legend, centre right
    draw.rectangle([x1 - 128, ly - 4, x1 - 6, ly + 58], fill=(255, 255, 255), outline=(160, 160, 160))
    for k, (_, label, color) in enumerate(_SERIES):
        y = ly + 4 + 18 * k
        draw.line([(x1 - 120, y + 7), (x1 - 98, y + 7)], fill=color, width=2)
        _text(draw, x1 - 92, y, label)


def png_bytes(rgb):
    """A PNG file's bytes for (height, width, 3) uint8 pixels: 8-bit RGB, each row unfiltered (filter
    type 0) and the rows deflated at zlib level 1 on all cores (pyca._files.zlib_compress). Pillow's
    encoder spends 2-3x as long, choosing a filter per row on one core."""
    import struct
    import zlib

    from .._files import zlib_compress

    h, w, _ = rgb.shape
    rows = np.zeros((h, 1 + 3 * w), np.uint8)  # a filter-type byte (0), then the row's pixels
    rows[:, 1:] = rgb.reshape(h, 3 * w)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib_compress(rows)) + chunk(b"IEND", b""))


def write_png(rgb, path):
    """Writes the pixels as a PNG (png_bytes), whole or not at all."""
    from .._files import atomic_open

    with atomic_open(path, "wb") as fh:
        fh.write(png_bytes(np.asarray(rgb)))


def prepare():
    """Imports Pillow, loads the fonts and draws and encodes a tiny report on a background thread (its
    fixed strings are then rasterised: _text_mask), and returns the thread: pyca lddmm calls this
    before it registers, so that its report does not pay for a process's first drawing."""

    def warm():
        try:
            tiny = np.zeros((2, 2), np.float32)
            png_bytes(render(dict(z=0, fixed=tiny, moving=tiny, deformed=tiny, hinv=np.zeros((2, 2, 2), np.float32),
                                  jac=tiny + 1, jac_range=(1.0, 1.0), lo=0.0, hi=1.0, diff_max=1.0, aspect=1.0,
                                  accepted=[dict(energy=1.0, match=1.0, reg=1.0, scale=1)], nvox={}, title="")))
        except Exception:  # noqa: BLE001, S110 - the report's own drawing raises it again, in one line
            pass

    t = threading.Thread(target=warm, name="pyca-prepare-report", daemon=True)
    t.start()
    return t


def draw_report(d, path):
    """Draws report.png from report_data's dict, written whole or not at all. A failure to draw it
    (Pillow missing, say) raises ReportError naming the file and the cause in one line."""
    import os

    try:
        rgb = render(d)
    except Exception as e:  # noqa: BLE001 - any cause, named in the error
        raise ReportError(f"{os.path.basename(str(path))} could not be drawn: {type(e).__name__}: {e}") from e
    write_png(rgb, path)
