"""report.png of pyca lddmm (pyca/apps/_lddmm_report.py, docs/design/report.md): its pixels against
the slices, colour maps and curves they show, computed here independently."""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

from pyca.apps._lddmm_report import LAYOUT, draw_report, energy_plot, render  # noqa: E402

NX, NY = 20, 12
RED, BLUE, WHITE, BLACK, ORANGE = (178, 24, 43), (33, 102, 172), (255, 255, 255), (0, 0, 0), (255, 140, 0)


def _data(**over):
    """A report's data with known values: a ramp as fixed, its mirror as moving, deformed = fixed."""
    x, y = np.meshgrid(np.arange(NX), np.arange(NY), indexing="ij")
    fixed = (10.0 + 2.0 * x + 0.5 * y).astype(np.float32)  # 10 .. 53.5: never white, every voxel different
    moving = fixed[::-1, :].copy()
    hinv = np.stack([x, y], axis=-1).astype(np.float32)  # identity phiinv
    jac = np.ones((NX, NY), np.float32)
    d = dict(z=3, fixed=fixed, moving=moving, deformed=fixed.copy(), hinv=hinv, jac=jac, jac_range=(1.0, 1.0),
             lo=0.0, hi=60.0, diff_max=float(np.abs(fixed - moving).max()), aspect=1.0,
             accepted=[dict(energy=10 ** -1.5 * 100, match=10 ** -2.5 * 100, reg=10 ** -3.5 * 100, scale=1)] * 11,
             nvox={1: 100.0}, title="a test report")
    d.update(over)
    return d


def _image_rect(rgb, name):
    """The image's pixels inside panel `name`: within the grey frame drawn one pixel around it."""
    x0, y0, x1, y1 = LAYOUT[name]
    box = rgb[y0:y1, x0:x1]
    frame = np.argwhere((box == 160).all(axis=-1))
    (r0, c0), (r1, c1) = frame.min(axis=0), frame.max(axis=0)
    return y0 + r0 + 1, x0 + c0 + 1, y0 + r1, x0 + c1  # rows r0..r1 (exclusive), cols c0..c1 (exclusive)


def _voxel_pixels(rgb, name, nx=NX, ny=NY):
    """The colour at each voxel's centre (nx, ny, 3), x to the right and y upwards (origin lower)."""
    r0, c0, r1, c1 = _image_rect(rgb, name)
    h, w = r1 - r0, c1 - c0
    cols = (c0 + (np.arange(nx) + 0.5) * w / nx).astype(int)
    rows = (r1 - (np.arange(ny) + 0.5) * h / ny).astype(int)
    return rgb[rows[None, :], cols[:, None]]


def test_the_image_panels_are_their_slices_in_grey_with_y_upwards():
    d = _data()
    rgb = render(d)
    assert rgb.shape == (680, 1280, 3) and rgb.dtype == np.uint8
    for name, img in (("fixed", d["fixed"]), ("moving", d["moving"]), ("deformed", d["deformed"])):
        want = np.round((img - d["lo"]) / (d["hi"] - d["lo"]) * 255).astype(int)
        got = _voxel_pixels(rgb, name).astype(int)
        assert (got == got[..., :1]).all()  # grey
        np.testing.assert_allclose(got[..., 0], want, atol=1)  # y upwards: the ramp grows to the top right


def test_a_panel_keeps_the_slices_aspect():
    for aspect in (1.0, 2.0, 0.5):
        r0, c0, r1, c1 = _image_rect(render(_data(aspect=aspect)), "fixed")
        assert (r1 - r0) / (c1 - c0) == pytest.approx(aspect * NY / NX, rel=0.02)


def test_differences_are_white_at_zero_red_positive_blue_negative():
    d = _data()
    rgb = render(d)
    assert (_voxel_pixels(rgb, "fixed - deformed") == WHITE).all()  # deformed == fixed
    before = _voxel_pixels(rgb, "fixed - moving").astype(int)
    diff = d["fixed"] - d["moving"]  # from -m (x = 0) to +m (x = NX - 1)
    np.testing.assert_allclose(before[-1, 0], RED, atol=1)
    np.testing.assert_allclose(before[0, 0], BLUE, atol=1)
    t = diff / d["diff_max"]  # white to red linearly for t >= 0, white to blue for t < 0
    end = np.where(t[..., None] >= 0, np.array(RED), np.array(BLUE))
    np.testing.assert_allclose(before, 255 - np.abs(t)[..., None] * (255 - end), atol=1)


def test_det_d_phiinv_on_a_log_scale_with_folds_black():
    jac = np.ones((NX, NY), np.float32)
    jac[2, 3], jac[5, 6], jac[7, 8], jac[9, 9] = 4.0, 0.25, 2.0, -0.5  # span: log2(4) = 2
    rgb = render(_data(jac=jac, jac_range=(-0.5, 4.0)))
    got = _voxel_pixels(rgb, "jacobian").astype(int)
    assert (got[0, 0] == WHITE).all()  # 1: the volume kept
    np.testing.assert_allclose(got[2, 3], RED, atol=1)  # 4 = 2 ** span: the end of the scale
    np.testing.assert_allclose(got[5, 6], BLUE, atol=1)  # 1 / 4
    np.testing.assert_allclose(got[7, 8], 255 - 0.5 * (255 - np.array(RED)), atol=1)  # 2: half way on log2
    assert (got[9, 9] == BLACK).all()  # a fold


def test_the_grid_of_an_identity_phiinv_is_on_the_voxel_centres():
    rgb = render(_data())
    r0, c0, r1, c1 = _image_rect(rgb, "grid")
    w = c1 - c0
    orange = (rgb[r0:r1, c0:c1] == ORANGE).all(axis=-1)
    for i in range(NX):  # every row of phiinv (every voxel: the slice is smaller than 24 voxels)
        col = round((i + 0.5) * w / NX)  # the voxel's centre, to a pixel (within one: rounding)
        near = orange[1:-1, max(col - 1, 0):col + 2].any(axis=1)
        assert near.mean() > 0.9, i  # a vertical line at x = i, over the image's height
    assert orange.mean() < 0.5  # the moving image shows between the lines


def test_the_energy_curves_are_where_their_values_say():
    d = _data()
    rgb = render(d)
    x0, y0, x1, y1 = energy_plot(LAYOUT["energy"])
    lo, hi = -4, -1  # the decades around log10 of the energies per voxel: -1.5, -2.5, -3.5
    x = int(x0 + 0.2 * (x1 - x0))  # clear of the legend (centre right)
    for value, color in ((-1.5, (31, 119, 180)), (-2.5, (255, 127, 14)), (-3.5, (44, 160, 44))):
        y = y1 - (value - lo) * (y1 - y0) / (hi - lo)
        rows = [r for r in range(y0, y1) if (rgb[r, x] == color).all()]
        assert rows and abs(np.mean(rows) - y) <= 1.5, (value, rows, y)


def test_a_new_scale_is_a_dashed_line_where_it_starts():
    acc = [dict(energy=1.0, match=0.5, reg=0.5, scale=2)] * 4 + [dict(energy=1.0, match=0.5, reg=0.5, scale=1)] * 7
    rgb = render(_data(accepted=acc, nvox={2: 1.0, 1: 1.0}))
    x0, y0, x1, y1 = energy_plot(LAYOUT["energy"])
    x = x0 + 4 * (x1 - x0) / 10  # the fifth of 11 accepted iterations (to a pixel: either rounding)
    dashes = max((rgb[y0 + 1:y1, c] == (128, 128, 128)).all(axis=-1).mean() for c in {int(x), round(x)})
    assert 0.3 < dashes < 0.7  # dashed, about half on


def test_no_accepted_iteration_still_draws_the_panel():
    rgb = render(_data(accepted=[]))
    x0, y0, x1, y1 = energy_plot(LAYOUT["energy"])
    assert (rgb[y0, x0:x1] == BLACK).all()  # the frame, and no curve
    assert not any((rgb[y0:y1, x0:x1] == c).all(axis=-1).any() for c in ((31, 119, 180), (44, 160, 44)))


def test_draw_report_writes_the_rendered_pixels(tmp_path):
    d = _data()
    draw_report(d, tmp_path / "report.png")
    with Image.open(tmp_path / "report.png") as im:
        assert im.mode == "RGB"
        np.testing.assert_array_equal(np.asarray(im), render(d))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.png"]  # no temporary left


def test_a_real_registrations_report(tmp_path):
    from pyca.apps import data, lddmm
    from pyca.apps._lddmm_report import report_data

    fixed, moving = data.builtin_pair(size=(24, 20, 8))
    res = lddmm.register(fixed, moving, scales=(2, 1), iterations=(3, 3), time_steps=2, device="cpu")
    d = report_data(res, fixed)
    rgb = render(d)
    fx = fixed.numpy()[:, :, d["z"]]
    want = np.round((fx - d["lo"]) / (d["hi"] - d["lo"]) * 255)
    np.testing.assert_allclose(_voxel_pixels(rgb, "fixed", 24, 20)[..., 0], want, atol=1)
    assert math.isfinite(d["jac_range"][0]) and d["jac_range"][0] > 0


def test_reports_drawn_on_several_threads_at_once_are_each_right():
    # Dask's threads (register-batch, atlas) and prepare()'s thread may draw at the same time; the
    # font (one FreeType face) is shared between them.
    from concurrent.futures import ThreadPoolExecutor

    ds = [_data(title=f"report {k}", z=k) for k in range(8)]
    alone = [render(d) for d in ds]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(render, ds))
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a, b)
