"""The registration stages of pyca.apps.lddmm added for scanner images (docs/lddmm.md): per-image
robust intensity normalisation, the LNCC metric, the linear (rigid / affine) stage and its ITK file,
masks, label transport, the optimiser's report, and bad inputs refused before any work. Small
phantoms (pyca.apps.data.builtin_pair at 32 x 32 x 24); the MNI brain pair only when nilearn is
installed."""
import json

import numpy as np
import pytest

import pyca as ca
from pyca import cli
from pyca.apps import affine, data, lddmm

FAST = dict(scales=(2, 1), iterations=(30, 10), time_steps=4, device="cpu")


@pytest.fixture(scope="module")
def pair():
    return data.builtin_pair(size=(32, 32, 24), spacing=(2.0, 2.0, 8.0 / 3.0))


def one_minus_corr(a, b):
    return 1.0 - np.corrcoef(np.ravel(a), np.ravel(b))[0, 1]


def moved_by(im, T):
    """im resampled through the world transform T (4 x 4), on its own grid."""
    H = affine.AffineResult(T, "affine", im.grid(), im.grid()).hfield(ca.MEM_HOST)
    out = ca.Image3D(im.grid(), ca.MEM_HOST)
    ca.ApplyH(out, im, H)
    return out


# ------------------------------------------------------------------------------------------------
# Intensities
@pytest.mark.parametrize("metric", ["ssd", "lncc"])
def test_affine_intensity_change_makes_images_more_alike(pair, metric):
    # The phantom: moving = 0.4 I + 25 (other scanner). 1 - correlation must fall.
    fixed, moving = pair
    m2 = ca.Image3D.from_array(0.4 * moving.numpy() + 25.0, moving.grid())
    res = lddmm.register(fixed, m2, metric=metric, **FAST)
    before = one_minus_corr(fixed.numpy(), m2.numpy())
    after = one_minus_corr(fixed.numpy(), res.deformed.numpy())
    assert after < 0.35 * before, (before, after)
    assert ca.MinMax(res.jacobian)[0] > 0
    # The deformed image keeps the moving image's own intensities.
    assert res.deformed.numpy().min() >= 25.0 - 1e-3


def test_normalisation_is_per_image_percentiles(pair):
    fixed, moving = pair
    a = moving.numpy()
    lo, hi = np.percentile(a, [0.5, 99.5])
    out = lddmm._normalised(ca.Image3D.from_array(3 * a + 7, moving.grid()), ca.MEM_HOST, lddmm.DEFAULTS)
    np.testing.assert_allclose(out.numpy(), np.clip((a - lo) / (hi - lo), 0, 1), atol=1e-4)


def test_histogram_normalisation_undoes_a_monotone_intensity_change(pair):
    # moving = 0.4 I^1.2 + 25 on the fixed image's grid: matching its quantiles onto the fixed
    # image's gives back the fixed image (to 2e-3 of its robust range).
    fixed, _ = pair
    a = fixed.numpy()
    m = ca.Image3D.from_array(0.4 * a**1.2 + 25.0, fixed.grid())
    out = lddmm._histogram_matched(m, fixed)
    lo, hi = np.percentile(a, [0.5, 99.5])
    np.testing.assert_allclose(out.numpy(), a, atol=2e-3 * (hi - lo))
    assert out.grid() == fixed.grid() and m.numpy().min() == 25.0  # the input is left as it was
    # and so the sum of squared differences sees no mismatch left, where per-image scaling leaves one
    # (the fixed image unblurred: the intensities alone are compared)
    kw = dict(metric="ssd", affine="none", scales=1, iterations=0, fixed_blur=0.0)
    res = lddmm.register(fixed, m, normalize="histogram", **kw)
    base = lddmm.register(fixed, m, normalize="percentiles", **kw)
    assert res.initial_mismatch < 1e-3 * base.initial_mismatch, (res.initial_mismatch, base.initial_mismatch)


def _gain_reference(I1, W, spacing, sigma, flat=True):
    """SciPy's g = (G(f W I1) + c) / (G(f I1^2) + c): G a Gaussian of sigma world units (border extended,
    truncated at 4 sigma as pyca's), c 1% of the mean of G(f I1^2), f = 1 / (1 + |grad I1|^2 / k^2) with
    central differences per world unit over a clamped border and k^2 the mean of |grad I1|^2 weighted by
    I1^2 (f = 1 when not flat)."""
    from scipy import ndimage

    sd = sigma / np.asarray(spacing)
    G = lambda a: ndimage.gaussian_filter(a, sd, mode="nearest", truncate=4.0)  # noqa: E731
    f = np.ones_like(I1)
    if flat:
        p, g2 = np.pad(I1, 1, mode="edge"), 0.0
        for k, h in enumerate(spacing):
            hi, lo = [slice(1, -1)] * 3, [slice(1, -1)] * 3
            hi[k], lo[k] = slice(2, None), slice(None, -2)
            g2 = g2 + ((p[tuple(hi)] - p[tuple(lo)]) / (2 * h)) ** 2
        f = 1.0 / (1.0 + g2 / np.average(g2, weights=I1 * I1))
    num, den = G(f * W * I1), G(f * I1 * I1)
    c = 0.01 * den.mean()
    return (num + c) / (den + c)


@pytest.mark.parametrize("dims", [3, 2])
def test_gain_correction_is_the_flat_weighted_smoothed_ratio(pair, dims):
    # 2-D as z = 1: no gradient and no blur along z
    fixed, moving = pair if dims == 3 else data.builtin_pair(size=(40, 36, 1), spacing=(1.5, 2.0, 1.0))
    I1, W = fixed.numpy().astype(np.float64), moving.numpy().astype(np.float64)
    g = _gain_reference(I1, W, tuple(fixed.grid().spacing()), 10.0)
    out, (lo, hi) = lddmm._gain_corrected(fixed, moving, 10.0)
    np.testing.assert_allclose(out.numpy(), I1 * g, rtol=1e-4, atol=1e-5 * I1.max())
    assert (lo, hi) == pytest.approx((g.min(), g.max()), rel=1e-4)


def test_gain_correction_leans_on_flat_anatomy_not_misaligned_edges(pair):
    """With no bias at all, a moving image one voxel out of place along x moves the gain away from 1
    only through its edges; the flatness weight keeps that error inside the object at under two
    thirds of what the plain smoothed ratio (f = 1) gives (0.042 against 0.070 here)."""
    fixed, _ = pair
    I1 = fixed.numpy().astype(np.float64)
    W = np.asfortranarray(np.roll(I1, 1, axis=0), np.float32)
    out, _ = lddmm._gain_corrected(fixed, ca.Image3D.from_array(W, fixed.grid()), 5.0)
    inside = I1 > 0.5 * I1.max()
    g = out.numpy()[inside] / I1[inside]
    plain = _gain_reference(I1, W.astype(np.float64), tuple(fixed.grid().spacing()), 5.0, flat=False)[inside]
    assert np.abs(g - 1).mean() < 0.67 * np.abs(plain - 1).mean(), (np.abs(g - 1).mean(), np.abs(plain - 1).mean())


def test_gain_correction_takes_a_smooth_bias_field(pair):
    """The warped moving image is the fixed one times a smooth gain (+-25% along x, on a 64-unit box):
    with sigma 5 the corrected fixed image is within 3.5% of it at 90% of the object's voxels, and its
    mean error is well under half the uncorrected one (near the object's border the Gaussian's average
    leans to the interior's gain, the more so as the flatness weight favours the interior: 3.0% and
    1.5% here, 2.6% and 1.3% without the weight)."""
    fixed, _ = pair
    a = fixed.numpy()
    x = np.linspace(-1.0, 1.0, a.shape[0])[:, None, None]
    Wa = np.asfortranarray(a * (1.0 + 0.25 * x), np.float32)
    out, (lo, hi) = lddmm._gain_corrected(fixed, ca.Image3D.from_array(Wa, fixed.grid()), 5.0)
    inside = a > 0.5 * a.max()
    err = np.abs(out.numpy() - Wa)[inside] / Wa[inside]
    err0 = np.abs(a - Wa)[inside] / Wa[inside]
    assert np.percentile(err, 90) < 0.035 and err.mean() < 0.4 * err0.mean(), (err.mean(), err0.mean())
    assert lo < 0.92 and hi > 1.08


@pytest.mark.parametrize("bad", [-1.0, float("nan"), "10", True])
def test_bias_sigma_refuses_bad_values(pair, bad):
    with pytest.raises(ValueError, match="bias_sigma"):
        lddmm.register(*pair, bias_sigma=bad, iterations=0)


def test_bias_correction_reported_per_scale(pair):
    res = lddmm.register(*pair, **FAST)
    assert [len(s["bias_gain"]) for s in res.timings["scales"]] == [2, 2]
    off = lddmm.register(*pair, **dict(FAST, bias_sigma=0.0))
    assert all("bias_gain" not in s for s in off.timings["scales"])


def test_fixed_blur_follows_the_moving_voxels():
    b = lddmm.INTERP_BLUR
    assert b == pytest.approx(np.sqrt(1.0 / 6.0))
    f = ca.GridInfo((20, 20, 20), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0))
    m = ca.GridInfo((10, 12, 14), (1.0, 2.0, 3.0), (0.0, 0.0, 0.0))
    np.testing.assert_allclose(lddmm._fixed_blur_sigma(f, m, b), b * np.array([1.0, 2.0, 3.0]), rtol=1e-6)
    # the moving grid's axes permuted in the world (x along world y and y along world x)
    mp = ca.GridInfo((10, 12, 14), (1.0, 2.0, 3.0), (0.0, 0.0, 0.0), direction=[[0, 1, 0], [1, 0, 0], [0, 0, 1]])
    np.testing.assert_allclose(lddmm._fixed_blur_sigma(f, mp, 1.0), [2.0, 1.0, 3.0], rtol=1e-6)
    # rotated by 45 degrees about z: the x and y spacings mix
    c = np.sqrt(0.5)
    mr = ca.GridInfo((10, 12, 14), (1.0, 2.0, 3.0), (0.0, 0.0, 0.0), direction=[[c, -c, 0], [c, c, 0], [0, 0, 1]])
    np.testing.assert_allclose(lddmm._fixed_blur_sigma(f, mr, 1.0), [np.sqrt(2.5), np.sqrt(2.5), 3.0], rtol=1e-6)
    # 2-D: an axis of size 1 is neither interpolated nor smoothed
    f2, m2 = ca.GridInfo((20, 20, 1), (1.0, 1.0, 1.0)), ca.GridInfo((10, 12, 1), (1.0, 2.0, 5.0))
    assert lddmm._fixed_blur_sigma(f2, m2, 1.0) == pytest.approx((1.0, 2.0, 0.0))


def test_fixed_blur_smooths_the_fixed_image_as_scipy(pair):
    """The moving image is the fixed one and nothing is registered: the mismatch before registration is
    then that of the fixed image against its own smoothed copy, computed here with SciPy."""
    ndimage = pytest.importorskip("scipy.ndimage")
    fixed = pair[0]
    p = dict(lddmm.DEFAULTS, normalize="percentiles")
    In = lddmm._normalised(fixed, ca.MEM_HOST, p).numpy().astype(np.float64)
    want = ndimage.gaussian_filter(In, lddmm.INTERP_BLUR, mode="nearest", truncate=4.0)  # sigma: voxels (same grid)
    kw = dict(normalize="percentiles", bias_sigma=0.0, affine="none", scales=1, iterations=0, device="cpu")
    res = lddmm.register(fixed, fixed, fixed_blur=lddmm.INTERP_BLUR, **kw)
    assert res.params["fixed_blur"] == lddmm.INTERP_BLUR
    assert res.initial_mismatch == pytest.approx(((want - In) ** 2).sum(), rel=1e-3)
    assert res.initial_mismatch > 0.1
    assert lddmm.register(fixed, fixed, **dict(kw, fixed_blur=0.0)).initial_mismatch == 0.0
    assert lddmm.register(fixed, fixed, **kw).initial_mismatch == 0.0  # the default: no constant blur


@pytest.mark.parametrize("bad", [-0.1, float("nan"), "0.4", True, 11.0])
def test_fixed_blur_refuses_bad_values(pair, bad):
    with pytest.raises(ValueError, match="fixed_blur"):
        lddmm.register(*pair, fixed_blur=bad, iterations=0)


def test_cli_fixed_blur_reaches_the_registration(tmp_path, capsys, pair):
    f = tmp_path / "f.nii.gz"
    ca.io.save_image(pair[0], f)
    out = tmp_path / "out"
    rc = cli.main(["lddmm", "--out", str(out), "--no-progress", "--no-report", "--device", "cpu", "--fixed", str(f),
                   "--moving", str(f), "--scales", "1", "--iterations", "0", "--fixed-blur", "0.25"])
    capsys.readouterr()
    assert rc == 0 and json.loads((out / "summary.json").read_text())["params"]["fixed_blur"] == 0.25


@pytest.mark.parametrize("flags, want", [(["--normalize", "percentiles"], "percentiles"), (["--no-normalize"], "none"),
                                         ([], lddmm.DEFAULTS["normalize"])])
def test_cli_normalize_reaches_the_registration(tmp_path, capsys, pair, flags, want):
    fixed, moving = pair
    f, m = tmp_path / "f.nii.gz", tmp_path / "m.nii.gz"
    ca.io.save_image(fixed, f)
    ca.io.save_image(ca.Image3D.from_array(0.4 * moving.numpy() ** 1.2 + 25.0, moving.grid()), m)
    out = tmp_path / "out"
    rc = cli.main(["lddmm", "--out", str(out), "--no-progress", "--no-report", "--device", "cpu", "--fixed", str(f),
                   "--moving", str(m), "--metric", "ssd", "--scales", "1", "--iterations", "0", *flags])
    capsys.readouterr()
    s = json.loads((out / "summary.json").read_text())
    assert rc == 0 and s["params"]["normalize"] == want


@pytest.mark.parametrize("bad", ["hist", 2, None])
def test_normalize_refuses_unknown_values(pair, bad):
    with pytest.raises(ValueError, match="normalize"):
        lddmm.register(*pair, normalize=bad, iterations=0)


@pytest.mark.parametrize("given, want", [(True, "percentiles"), (False, "none")])
def test_normalize_keeps_its_boolean_spellings(pair, given, want):
    res = lddmm.register(*pair, normalize=given, scales=1, iterations=0, device="cpu")
    assert res.params["normalize"] == want


def test_cli_normalize_flags_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["lddmm", "--normalize", "percentiles", "--no-normalize"])
    err = capsys.readouterr().err
    assert e.value.code != 0 and err.count("\n") == 1 and "not allowed with" in err, err


# ------------------------------------------------------------------------------------------------
# LNCC metric
def test_lncc_registration(pair):
    res = lddmm.register(*pair, metric="lncc", **FAST)
    assert res.mismatch_reduction > 0.6
    assert ca.MinMax(res.jacobian)[0] > 0
    acc = [e["energy"] for e in res.energies if e["accepted"] and e["scale"] == 1]
    assert acc and all(b <= a for a, b in zip(acc, acc[1:]))


def test_lncc_metric_energy_matches_its_gradient(pair):
    # The metric's image gradient r = (sigma^2 / 2) dE/dI against central differences of E.
    from pyca.registration.metrics import make_metric

    fixed, moving = pair
    I = fixed.clone()
    ca.GaussianBlur(I, I, ca.Vec3Df(2.0, 2.0, 2.0))
    m = make_metric("lncc", fixed.grid(), ca.MEM_HOST, 0.5, None, 2)
    r = ca.Image3D(fixed.grid(), ca.MEM_HOST)
    m.gradient(r, I, moving)
    for idx in [(16, 16, 12), (10, 20, 5)]:
        h = 1e-2
        a = I.numpy()
        vals = []
        for s in (h, -h):
            b = a.copy()
            b[idx] += s
            vals.append(m.energy(ca.Image3D.from_array(b, fixed.grid()), moving))
        fd = (vals[0] - vals[1]) / (2 * h)
        assert r.numpy()[idx] * 2 / 0.25 == pytest.approx(fd, rel=2e-2, abs=1e-3)


# ------------------------------------------------------------------------------------------------
# Linear stage
def test_affine_recovers_a_known_transform(pair):
    fixed = pair[1]  # the bent phantom: no symmetry axis
    c, s = np.cos(0.12), np.sin(0.12)
    T = np.eye(4)
    T[:3, :3] = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ np.diag([1.05, 0.97, 1.0])
    T[:3, 3] = [3.0, -2.0, 1.5]
    moving = moved_by(fixed, T)  # moving(x) = fixed(T x): the answer is T^-1
    res = affine.register(fixed, moving, "affine", scales=(2, 1), iterations=(50, 20))
    np.testing.assert_allclose(res.matrix, np.linalg.inv(T), atol=0.04)
    rig = affine.register(fixed, moving, "rigid", scales=(2, 1), iterations=(50, 20))
    A = rig.matrix[:3, :3]
    np.testing.assert_allclose(A @ A.T, np.eye(3), atol=1e-6)
    assert np.degrees(np.arccos(np.clip(A[0, 0], -1, 1))) == pytest.approx(np.degrees(0.12), abs=1.5)


def test_itk_file_convention(tmp_path):
    T = np.eye(4)
    T[:3, :3] = [[1.1, 0.1, 0.0], [0.0, 0.9, 0.2], [0.05, 0.0, 1.0]]
    T[:3, 3] = [1.0, 2.0, 3.0]
    affine.write_itk(T, tmp_path / "a.txt")
    text = (tmp_path / "a.txt").read_text()
    assert "AffineTransform_double_3_3" in text
    p = [float(x) for x in text.split("Parameters:")[1].split("\n")[0].split()]
    # LPS = diag(-1, -1, 1) RAS: A' = F A F, t' = F t
    F = np.diag([-1.0, -1.0, 1.0])
    np.testing.assert_allclose(np.reshape(p[:9], (3, 3)), F @ T[:3, :3] @ F)
    np.testing.assert_allclose(p[9:], F @ T[:3, 3])
    np.testing.assert_allclose(affine.read_itk(tmp_path / "a.txt"), T, atol=1e-9)
    sitk = pytest.importorskip("SimpleITK")
    tr = sitk.ReadTransform(str(tmp_path / "a.txt"))
    x = np.array([10.0, -20.0, 5.0])
    y = np.array(tr.TransformPoint(tuple(F @ x)))
    np.testing.assert_allclose(F @ y, T[:3, :3] @ x + T[:3, 3], atol=1e-6)


def test_lddmm_starts_from_the_linear_result(pair):
    fixed = pair[0]
    T = np.eye(4)
    T[:3, 3] = [6.0, -4.0, 0.0]
    moving = moved_by(fixed, T)
    # affine="auto": the centres of mass differ; the SSD match, so that the mismatch below (a sum of
    # squared differences) is what the registration lowers
    res = lddmm.register(fixed, moving, **dict(FAST, metric="ssd"))
    assert res.affine.kind == "affine" and "auto (affine)" == res.params["affine"]
    np.testing.assert_allclose(res.affine.matrix[:3, 3], -T[:3, 3], atol=0.5)
    assert res.linear_mismatch < 0.2 * res.initial_mismatch
    assert res.final_mismatch <= res.linear_mismatch
    # full_map = affine after phiinv: deformed is the moving image through it.
    ref = ca.Image3D(fixed.grid(), ca.MEM_HOST)
    ca.ApplyH(ref, moving, res.full_map)
    np.testing.assert_allclose(res.deformed.numpy(), ref.numpy(), atol=1e-5)


def test_solver_samples_the_moving_image_once(pair):
    """At full resolution the solver's deformed image J0_1 is the moving image sampled once through
    the affine after phiinv (what the outputs use), not the affine-resampled image warped again: its
    final match energy equals the mismatch of the moving image through full_map (same sampling, same
    numbers). Warping the resampled copy (a second interpolation, at half-voxel offsets here) gave an
    energy 56% away."""
    fixed = pair[0]
    T = np.eye(4)
    T[:3, 3] = [5.0, -3.0, 0.0]  # 2.5 and -1.5 voxels
    moving = moved_by(fixed, T)
    # (no bias correction and no interpolation-matched target: with them the solver matches a gain-corrected
    # fixed image, or the fixed image as interpolation would show it, not the fixed image)
    res = lddmm.register(fixed, moving, **dict(FAST, metric="ssd", sigma=0.05, bias_sigma=0.0, interp_blur="none"))
    assert res.affine.kind == "affine"
    np.testing.assert_allclose(res.final_match * 0.05**2, res.final_mismatch, rtol=1e-5)


def test_moving_image_of_another_grid_is_interpolated_once(pair, tmp_path):
    """A moving image of another size and spacing: deformed.nii.gz is the moving image sampled once
    (trilinear, border extended) by the written full map, phiinv_full.nii.gz (fixed voxel -> the
    moving image's own voxels), not resampled first onto a grid of the fixed size and warped again."""
    from scipy import ndimage

    fixed, moving = pair
    g = ca.GridInfo((26, 41, 15), (2.5, 1.5, 4.0), (3.0, -2.0, 1.0))
    moving2 = ca.Image3D(g, ca.MEM_HOST)
    ca.ResampleWorld(moving2, moving, ca.BACKGROUND_STRATEGY_ZERO, ca.INTERP_CUBIC)
    res = lddmm.register(fixed, moving2, **FAST)
    assert res.affine.kind == "affine" and res.final_mismatch < res.initial_mismatch
    lddmm.write_outputs(res, fixed, moving2, tmp_path, report=False)
    import nibabel as nib

    full = np.asarray(nib.load(str(tmp_path / "phiinv_full.nii.gz")).dataobj, np.float64).reshape(
        tuple(fixed.grid().size()) + (3,))
    deformed = np.asarray(nib.load(str(tmp_path / "deformed.nii.gz")).dataobj)
    inside = np.all([(full[..., d] >= 0) & (full[..., d] <= n - 1) for d, n in enumerate(g.size())], axis=0)
    assert 0.1 < inside.mean() < 0.95  # the map reaches beyond the moving image's box too
    want = ndimage.map_coordinates(moving2.numpy().astype(np.float64), [full[..., d] for d in range(3)], order=1,
                                   mode="nearest")
    np.testing.assert_allclose(deformed, want, rtol=0, atol=1e-5)
    # The affine-only output (moving on the fixed grid) is one interpolation too, by the linear map.
    lin = res.affine.hfield(ca.MEM_HOST).numpy().astype(np.float64)
    want = ndimage.map_coordinates(moving2.numpy().astype(np.float64), [lin[..., d] for d in range(3)], order=1,
                                   mode="nearest")
    np.testing.assert_allclose(res.moving.numpy(), want, rtol=0, atol=1e-5)


# ------------------------------------------------------------------------------------------------
# Masks, labels, summary
def test_labels_masks_and_summary(pair, tmp_path):
    fixed, moving = pair
    fl, ml = np.rint(3 * fixed.numpy()), np.rint(3 * moving.numpy())
    labels = ca.Image3D.from_array(ml.astype(np.float32), moving.grid())
    mask = ca.Image3D.from_array((fixed.numpy() > 0.05).astype(np.float32), fixed.grid())
    res = lddmm.register(fixed, moving, moving_labels=labels, fixed_mask=mask, **FAST)
    out = res.labels.numpy()
    assert set(np.unique(out)) <= set(np.unique(ml))  # nearest neighbour: no new values

    def dice(a, b):
        return 2 * np.sum((a > 0) & (b > 0)) / (np.sum(a > 0) + np.sum(b > 0))
    assert dice(out, fl) > dice(ml, fl) + 0.05
    paths = lddmm.write_outputs(res, fixed, moving, tmp_path, report=False)
    names = {p.split("/")[-1] for p in paths}
    assert {"labels.nii.gz", "affine.txt", "phiinv_full.nii.gz"} <= names
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["jacobian_nonpositive_fraction"] == 0.0
    assert s["jacobian_min"] > 0 and s["jacobian_max"] > 1
    for sc in s["timings"]["scales"]:
        assert sc["stop"] and sc["iterations"] <= sc["max_iterations"]
    steps = [e["step"] for e in s["energies"] if e["scale"] == 1]
    assert max(steps) > steps[0]  # the step grew after accepted steps


def test_convergence_stops_before_the_cap(pair):
    res = lddmm.register(*pair, scales=(1,), iterations=400, time_steps=4, tol=2e-2, affine="none", device="cpu")
    sc = res.timings["scales"][0]
    assert sc["stop"].startswith(("converged", "step too small")) and sc["iterations"] < 400
    acc = [res.timings["scales"][0]["energy_start"]] + [e["energy"] for e in res.energies if e["accepted"]]
    if sc["stop"].startswith("converged"):
        assert (acc[-6] - acc[-1]) < 5 * 2e-2 * (acc[0] - acc[-1])


# ------------------------------------------------------------------------------------------------
# Bad inputs: one line naming the file, nothing written
def test_cli_bad_inputs_name_the_file(tmp_path, capsys, pair):
    fixed, moving = pair
    f, m = tmp_path / "f.nii.gz", tmp_path / "m.nii.gz"
    ca.io.save_image(fixed, f)
    ca.io.save_image(moving, m)
    a = moving.numpy().copy()
    a[3, 3, 3] = np.nan
    ca.io.save_image(ca.Image3D.from_array(a, moving.grid()), tmp_path / "nan.nii.gz")
    ca.io.save_image(ca.Image3D.from_array(np.zeros_like(a), moving.grid()), tmp_path / "empty.nii.gz")
    ca.io.save_image(ca.Image3D.from_array(moving.numpy() * 2.5, moving.grid()), tmp_path / "frac.nii.gz")
    far = ca.Image3D.from_array(moving.numpy(), ca.GridInfo((32, 32, 24), (2.0, 2.0, 8 / 3), (900.0, 0.0, 0.0)))
    ca.io.save_image(far, tmp_path / "far.nii.gz")
    lab = ca.Image3D.from_array(np.rint(3 * moving.numpy()), far.grid())  # labels 900 mm from the moving image
    ca.io.save_image(lab, tmp_path / "far_labels.nii.gz", dtype=np.int16)
    flat = ca.GridInfo((32, 32, 1), (2.0, 2.0, 8 / 3))  # one plane: its z would be repeated through the volume
    ca.io.save_image(ca.Image3D.from_array(np.ones((32, 32, 1), np.float32), flat), tmp_path / "flat_mask.nii.gz")
    ca.io.save_image(ca.Image3D.from_array(np.rint(3 * moving.numpy()[:, :, 12:13]), flat),
                     tmp_path / "flat_labels.nii.gz", dtype=np.int16)
    out = tmp_path / "out"
    base = ["lddmm", "--out", str(out), "--no-progress", "--device", "cpu", "--fixed", str(f)]
    cases = [
        (["--moving", str(tmp_path / "nan.nii.gz")], "nan.nii.gz"),
        (["--moving", str(m), "--fixed-mask", str(tmp_path / "empty.nii.gz")], "empty.nii.gz"),
        (["--moving", str(m), "--moving-labels", str(tmp_path / "frac.nii.gz")], "non-integer"),
        (["--moving", str(m), "--moving-labels", str(tmp_path / "far_labels.nii.gz")], "lie outside the moving image"),
        (["--moving", str(m), "--moving-labels", str(tmp_path / "empty.nii.gz")], "hold no label (every voxel 0)"),
        (["--moving", str(m), "--fixed-mask", str(tmp_path / "flat_mask.nii.gz")], "one voxel along z"),
        (["--moving", str(m), "--moving-labels", str(tmp_path / "flat_labels.nii.gz")], "one voxel along z"),
        (["--moving", str(m), "--size", "8,8,8"], "--size is the built-in pair's grid"),  # not silently ignored
        (["--moving", str(tmp_path / "far.nii.gz"), "--affine", "none"], "do not overlap"),
        (["--moving", str(m), "--metric", "nmi"], None),
    ]
    for args, match in cases:
        if match is None:
            with pytest.raises(SystemExit):
                cli.main(base + args)
            capsys.readouterr()
        else:
            rc = cli.main(base + args)
            err = capsys.readouterr().err
            assert rc == 2 and match in err and err.startswith("pyca lddmm: error:"), (args, err)
            assert err.count("\n") == 1
        assert not out.exists(), args


# ------------------------------------------------------------------------------------------------
# MNI brain pairs (nilearn's template)
def _cubic_bspline_at(a, pts):
    """The prefiltered cubic B-spline of `a` at points (n, 3) voxel coordinates away from the border: SciPy's
    coefficients (ndimage.spline_filter), the 4^3 taps weighed by B3's closed form."""
    from scipy import ndimage

    c = ndimage.spline_filter(np.asarray(a, np.float64), order=3, mode="mirror")

    def b3(t):
        t = np.abs(t)
        return np.where(t < 1, 2 / 3 - t**2 + t**3 / 2, np.where(t < 2, (2 - t) ** 3 / 6, 0.0))

    base = np.floor(pts).astype(int) - 1
    out = np.zeros(len(pts))
    for o in np.ndindex(4, 4, 4):
        i = base + np.array(o)
        w = np.prod(b3(pts - i), axis=1)
        out += w * c[i[:, 0], i[:, 1], i[:, 2]]
    return out


@pytest.mark.skipif(data.mni_dir() is None, reason="needs nilearn (ships the MNI152 template)")
def test_brain_pair_known_map(tmp_path, monkeypatch):
    monkeypatch.setenv("PYCA_CACHE", str(tmp_path))
    d = data.brain_pair(seed=1, resolution=4)
    assert d["fixed"].shape == d["moving"].shape
    # moving(y) = a template(psi(y))^gamma + b at the landmarks y (psi(y): their fixed world points).
    from scipy import ndimage

    W = d["fixed_affine"]
    vox = (d["landmarks_fixed_world"] - W[:3, 3]) @ np.linalg.inv(W[:3, :3]).T
    # The template is a prefiltered cubic B-spline (interp 'cubic', the default): its value at psi(y) is evaluated
    # here from the spline's coefficients and the cubic B-spline's closed form, not by map_coordinates.
    y = d["landmarks"]
    far = np.all((vox >= 4) & (vox <= np.array(d["fixed"].shape) - 5), axis=1)  # the prefilter's border rule aside
    assert far.sum() > 0.95 * len(y)
    t = _cubic_bspline_at(d["fixed"], vox[far])
    yf = y[far]
    np.testing.assert_allclose(d["moving"][yf[:, 0], yf[:, 1], yf[:, 2]], 0.6 * np.clip(t, 0, None) ** 1.1 + 0.15,
                               rtol=1e-4, atol=1e-3)
    # The spline interpolates: at the voxel centres it is the template itself (the prefilter's check).
    idx = np.argwhere(d["fixed_labels"] > 0)[::97].astype(float)
    np.testing.assert_allclose(_cubic_bspline_at(d["fixed"], idx), d["fixed"][tuple(idx.astype(int).T)], atol=1e-5)
    assert set(np.unique(d["moving_labels"])) <= {0.0, 1.0, 2.0}
    d2 = data.brain_pair(seed=1, resolution=4)  # from the cache
    np.testing.assert_array_equal(d2["moving"], d["moving"])
    # interp 'linear' (the generator of the rows recorded before main 4e2bc1c): trilinear, cached apart, the same
    # warp, labels and landmarks.
    lin = data.brain_pair(seed=1, resolution=4, interp="linear")
    t = ndimage.map_coordinates(d["fixed"], vox.T, order=1, mode="constant")
    np.testing.assert_allclose(lin["moving"][y[:, 0], y[:, 1], y[:, 2]], 0.6 * t ** 1.1 + 0.15, rtol=1e-4, atol=1e-3)
    assert np.abs(lin["moving"] - d["moving"]).max() > 1.0
    for k in ("moving_labels", "landmarks", "landmarks_fixed_world"):
        np.testing.assert_array_equal(lin[k], d[k])
    with pytest.raises(ValueError, match="brain_pair: interp must be one of cubic, linear"):
        data.brain_pair(seed=1, resolution=4, interp="nearest")
    # The exact answer (psi^-1 in moving voxels) takes the landmarks' fixed points back to them, also
    # with the moving image stored LAS.
    for las in (False, True):
        d = data.brain_pair(seed=1, resolution=4, las=las)
        m = data.brain_pair_true_map(seed=1, resolution=4, las=las)
        vox = (d["landmarks_fixed_world"] - W[:3, 3]) @ np.linalg.inv(W[:3, :3]).T
        back = np.stack([ndimage.map_coordinates(m[..., k], vox.T, order=1) for k in range(3)], -1)
        np.testing.assert_allclose(back, d["landmarks"], atol=0.05)
