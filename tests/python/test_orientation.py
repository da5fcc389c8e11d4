"""Orientation end to end (docs/design/orientation.md): GridInfo's direction matrix, pyca.io keeping
the full affine (checked with nibabel / SimpleITK), world-space operations against
scipy.ndimage.affine_transform on rotated and flipped grids, and `pyca lddmm` on an LAS pair."""
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import pyca as ca
import pyca.io as pio

nib = pytest.importorskip("nibabel")
ndimage = pytest.importorskip("scipy.ndimage")
try:
    import SimpleITK as sitk
except ImportError:
    sitk = None
needs_sitk = pytest.mark.skipif(sitk is None, reason="needs SimpleITK (optional: pip install SimpleITK)")

DEVICES = [ca.MEM_HOST] + ([ca.MEM_DEVICE] if ca.cuda_available() else [])
DEV_IDS = ["cpu"] + (["gpu"] if ca.cuda_available() else [])


def rot(axis, deg):
    """A rotation by `deg` degrees about world axis 0, 1 or 2."""
    t = np.deg2rad(deg)
    c, s = np.cos(t), np.sin(t)
    i, j = [a for a in range(3) if a != axis]
    m = np.eye(3)
    m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
    return m


OBLIQUE = rot(2, 25.0) @ rot(0, -10.0)
LAS = np.diag([-1.0, 1.0, 1.0])


def _affine(direction, spacing, origin):
    a = np.eye(4)
    a[:3, :3] = np.asarray(direction) * np.asarray(spacing, float)[None, :]
    a[:3, 3] = origin
    return a


# ------------------------------------------------------------------------------------------------
# GridInfo
def test_grid_direction_default_setter_affine_and_equality():
    g = ca.GridInfo((4, 5, 6), (2.0, 1.0, 0.5), (10.0, 0.0, -1.0))
    np.testing.assert_array_equal(g.direction(), np.eye(3))
    assert "direction" not in repr(g)
    h = ca.GridInfo((4, 5, 6), (2.0, 1.0, 0.5), (10.0, 0.0, -1.0), direction=OBLIQUE)
    np.testing.assert_allclose(h.direction(), OBLIQUE, rtol=0, atol=1e-15)
    np.testing.assert_allclose(h.affine(), _affine(OBLIQUE, (2, 1, 0.5), (10, 0, -1)), rtol=0, atol=1e-6)
    assert h != g and "direction=((" in repr(h)
    g.setDirection(OBLIQUE)
    assert g == h
    # voxelToWorld / worldToVoxel agree with the 4x4 affine
    i = np.array([1.0, 2.0, 3.0])
    w = tuple(h.voxelToWorld(ca.Vec3Df(*i)))
    np.testing.assert_allclose(w, (h.affine() @ np.r_[i, 1])[:3], atol=1e-5)
    np.testing.assert_allclose(tuple(h.worldToVoxel(ca.Vec3Df(*w))), i, atol=1e-5)
    # copies keep it: pickling, grids of arrays, from_array
    assert pickle.loads(pickle.dumps(h)) == h
    im = ca.Image3D(h, ca.MEM_HOST)
    assert im.grid() == h and im.clone().grid() == h


@pytest.mark.parametrize("bad", [np.diag([2.0, 1.0, 1.0]), [[1, 0.1, 0], [0, 1, 0], [0, 0, 1]], np.zeros((3, 3)),
                                 np.diag([np.nan, 1.0, 1.0])], ids=["scaled", "shear", "zero", "nan"])
def test_grid_direction_refused(bad):
    g = ca.GridInfo((4, 4, 4))
    with pytest.raises(ValueError, match="orthonormal"):
        g.setDirection(bad)
    np.testing.assert_array_equal(g.direction(), np.eye(3))  # unchanged
    with pytest.raises(ValueError, match="3x3"):
        g.setDirection(np.eye(4))


# ------------------------------------------------------------------------------------------------
# pyca.io keeps the affine
AFFINES = {
    "LAS": _affine(LAS, (1.0, 1.0, 2.0), (0.0, 0.0, 0.0)),
    "LPI-shifted": _affine(np.diag([-1.0, -1.0, -1.0]), (0.9, 1.1, 1.3), (41.25, -17.5, 63.0)),
    "oblique": _affine(OBLIQUE, (1.2, 0.8, 1.5), (-90.123, 12.5, -71.0)),
    "permuted": _affine([[0, 0, 1], [-1, 0, 0], [0, 1, 0]], (1.0, 2.0, 3.0), (5.0, 6.0, 7.0)),
}


@pytest.mark.parametrize("name", sorted(AFFINES))
@pytest.mark.parametrize("ext", [".nii.gz", ".nii"])
def test_nifti_affine_round_trip(tmp_path, rng, name, ext):
    aff = AFFINES[name]
    arr = rng.standard_normal((7, 6, 5)).astype(np.float32)
    nib.save(nib.Nifti1Image(arr, aff), str(tmp_path / f"in{ext}"))
    ref = nib.load(str(tmp_path / f"in{ext}"))
    im = pio.load_image(tmp_path / f"in{ext}")
    np.testing.assert_array_equal(im.numpy(), arr)  # stored order, nothing flipped
    np.testing.assert_allclose(im.grid().affine(), ref.affine, rtol=0, atol=1e-6)
    pio.save_image(im, tmp_path / f"out{ext}")
    out = nib.load(str(tmp_path / f"out{ext}"))
    assert nib.aff2axcodes(out.affine) == nib.aff2axcodes(ref.affine)
    np.testing.assert_allclose(out.affine, ref.affine, rtol=0, atol=1e-6)
    np.testing.assert_allclose(out.get_qform(), ref.affine, rtol=0, atol=1e-5)  # qform too (quaternion)
    np.testing.assert_array_equal(np.asarray(out.dataobj), arr)
    # a field on that grid is written with the same affine
    f = ca.Field3D(im.grid(), ca.MEM_HOST)
    ca.SetToIdentity(f)
    pio.save_field(f, tmp_path / f"f{ext}")
    np.testing.assert_allclose(nib.load(str(tmp_path / f"f{ext}")).affine, ref.affine, rtol=0, atol=1e-6)
    assert pio.load_field(tmp_path / f"f{ext}").grid() == im.grid()


def test_qform_only_file(tmp_path):
    aff = AFFINES["oblique"]
    img = nib.Nifti1Image(np.ones((4, 4, 4), np.float32), None)
    img.set_qform(aff, code=1)
    img.set_sform(None, code=0)
    nib.save(img, str(tmp_path / "q.nii"))
    want = nib.load(str(tmp_path / "q.nii")).affine
    np.testing.assert_allclose(pio.load_image(tmp_path / "q.nii").grid().affine(), want, atol=1e-6)


@pytest.mark.parametrize("lin,match", [
    ([[1.0, 0.3, 0], [0, 1, 0], [0, 0, 1]], "shear"),
    ([[1.0, 1.0, 0], [0, 0, 0], [0, 0, 1]], "not invertible"),
    ([[0.0, 0, 0], [0, 1, 0], [0, 0, 1]], "not invertible"),
], ids=["shear", "repeated-axis", "zero-axis"])
def test_broken_affine_refused_naming_the_file(tmp_path, lin, match):
    aff = np.eye(4)
    aff[:3, :3] = lin
    img = nib.Nifti1Image(np.ones((4, 4, 4), np.float32), None)
    img.set_sform(aff, code=1)  # an sform only (a qform cannot hold such a matrix)
    nib.save(img, str(tmp_path / "bad.nii"))
    with pytest.raises(pio.ImageFileError, match=match) as e:
        pio.load_image(tmp_path / "bad.nii")
    assert "bad.nii" in str(e.value) and "\n" not in str(e.value)


def test_4d_series_refused_before_reading(tmp_path, rng, monkeypatch):
    nib.save(nib.Nifti1Image(rng.random((5, 5, 5, 4)).astype(np.float32), np.eye(4)), str(tmp_path / "t.nii.gz"))
    monkeypatch.setattr(nib.arrayproxy.ArrayProxy, "__array__",
                        lambda *a, **k: pytest.fail("the voxels were read before the shape was refused"))
    with pytest.raises(pio.ImageFileError, match="4-D series") as e:
        pio.load_image(tmp_path / "t.nii.gz")
    assert "t.nii.gz" in str(e.value) and "\n" not in str(e.value)


@needs_sitk
@pytest.mark.parametrize("name", ["LAS", "oblique"])
@pytest.mark.parametrize("ext", [".mha", ".nrrd"])
def test_itk_files_are_lps(tmp_path, rng, name, ext):
    """The same grid written to NIfTI (RAS+) and MetaImage/NRRD (LPS+) places every voxel at the
    same physical point, as nibabel and SimpleITK each compute it."""
    aff = AFFINES[name]
    arr = rng.standard_normal((6, 5, 4)).astype(np.float32)
    nib.save(nib.Nifti1Image(arr, aff), str(tmp_path / "a.nii"))
    im = pio.load_image(tmp_path / "a.nii")
    pio.save_image(im, tmp_path / f"a{ext}")
    s = sitk.ReadImage(str(tmp_path / f"a{ext}"))
    for idx in [(0, 0, 0), (5, 1, 3), (2, 4, 1)]:
        lps = np.array(s.TransformIndexToPhysicalPoint(idx))
        ras = (aff @ np.r_[idx, 1.0])[:3]
        np.testing.assert_allclose(lps * [-1, -1, 1], ras, atol=1e-4)
    back = pio.load_image(tmp_path / f"a{ext}")
    np.testing.assert_array_equal(back.numpy(), arr)
    np.testing.assert_allclose(back.grid().affine(), im.grid().affine(), atol=1e-5)


# ------------------------------------------------------------------------------------------------
# World-space operations against scipy.ndimage.affine_transform
def _resample_ref(arr, g_out, g_in, mode):
    m = np.linalg.inv(g_in.affine()) @ g_out.affine()  # output voxel -> input voxel
    return ndimage.affine_transform(arr.astype(np.float64), m[:3, :3], m[:3, 3], output_shape=tuple(g_out.size()),
                                    order=1, mode=mode)


GRID_PAIRS = {
    # (out grid, in grid)
    "rotated": (ca.GridInfo((14, 12, 10), (1.0, 1.2, 1.5), (-6.0, -5.0, -7.0), direction=OBLIQUE),
                ca.GridInfo((16, 15, 13), (1.1, 1.0, 1.3), (-8.0, -8.5, -9.0))),
    "flipped": (ca.GridInfo((12, 11, 9), (1.0, 1.0, 2.0), (6.0, -5.0, -8.0), direction=LAS),
                ca.GridInfo((12, 11, 9), (1.0, 1.0, 2.0), (-5.0, -5.0, -8.0))),
    "both-rotated": (ca.GridInfo((12, 12, 10), (1.3, 1.0, 1.1), (2.0, -9.0, -4.0), direction=rot(1, 30) @ LAS),
                     ca.GridInfo((15, 14, 12), (1.0, 1.1, 1.2), (3.0, -7.0, -8.0), direction=rot(2, -40))),
}


@pytest.mark.parametrize("mem", DEVICES, ids=DEV_IDS)
@pytest.mark.parametrize("pair", sorted(GRID_PAIRS))
@pytest.mark.parametrize("bg,mode", [(ca.BACKGROUND_STRATEGY_CLAMP, "nearest"),
                                     (ca.BACKGROUND_STRATEGY_ZERO, "constant")], ids=["clamp", "zero"])
def test_resample_world_matches_scipy(rng, mem, pair, bg, mode):
    g_out, g_in = GRID_PAIRS[pair]
    arr = rng.standard_normal(tuple(g_in.size())).astype(np.float32)
    im = ca.Image3D.from_array(np.asfortranarray(arr), g_in).clone(mem)
    out = ca.Image3D(g_out, mem)
    ca.ResampleWorld(out, im, bg, ca.INTERP_LINEAR)
    want = _resample_ref(arr, g_out, g_in, mode)
    if pair == "flipped":  # an exact flip and shift: integer source positions
        assert np.abs(want).max() > 0
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mem", DEVICES, ids=DEV_IDS)
def test_resample_world_flip_is_exact_mirror(mem, rng):
    """An LAS grid and an RAS grid over the same box: the values are the x-mirror, exactly."""
    g_ras = ca.GridInfo((9, 7, 5), (1.0, 1.0, 2.0), (-4.0, -3.0, -4.0))
    g_las = ca.GridInfo((9, 7, 5), (1.0, 1.0, 2.0), (4.0, -3.0, -4.0), direction=LAS)
    arr = rng.standard_normal((9, 7, 5)).astype(np.float32)
    out = ca.Image3D(g_las, mem)
    ca.ResampleWorld(out, ca.Image3D.from_array(np.asfortranarray(arr), g_ras).clone(mem))
    np.testing.assert_allclose(out.numpy(), arr[::-1], rtol=0, atol=1e-6)


@pytest.mark.parametrize("mem", DEVICES, ids=DEV_IDS)
@pytest.mark.parametrize("pair", sorted(GRID_PAIRS))
@pytest.mark.parametrize("bg", [ca.BACKGROUND_STRATEGY_CLAMP, ca.BACKGROUND_STRATEGY_ZERO], ids=["clamp", "zero"])
def test_splat_world_is_the_adjoint(rng, mem, pair, bg):
    """<ResampleWorld(a), b> = <a, SplatWorld(b)> on grids of different directions."""
    g_out, g_in = GRID_PAIRS[pair]
    a = ca.Image3D.from_array(rng.standard_normal(tuple(g_in.size())).astype(np.float32), g_in).clone(mem)
    b = ca.Image3D.from_array(rng.standard_normal(tuple(g_out.size())).astype(np.float32), g_out).clone(mem)
    ra, sb, w = ca.Image3D(g_out, mem), ca.Image3D(g_in, mem), ca.Image3D(g_in, mem)
    ca.ResampleWorld(ra, a, bg, ca.INTERP_LINEAR)
    ca.SplatWorld(sb, b, w, bg)
    lhs = float(np.sum(ra.numpy().astype(np.float64) * b.numpy()))
    rhs = float(np.sum(a.numpy().astype(np.float64) * sb.numpy()))
    assert abs(lhs - rhs) <= 1e-4 * max(1.0, abs(lhs))
    # the weights are the splat of ones: the adjoint applied to a constant image
    ones = ca.Image3D(g_out, mem)
    ones.fill(1.0)
    w1 = ca.Image3D(g_in, mem)
    ca.SplatWorld(w1, ones, bg)
    np.testing.assert_allclose(w.numpy(), w1.numpy(), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------------
# pyca lddmm on an LAS pair, the real command
def _phantom(shape, centre):
    x, y, z = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in shape], indexing="ij")
    c = np.asarray(centre, float)
    r2 = ((x - c[0]) / 4.0) ** 2 + ((y - c[1]) / 3.5) ** 2 + ((z - c[2]) / 3.0) ** 2
    blob = np.exp(-((x - 0.75 * shape[0]) ** 2 + (y - 0.3 * shape[1]) ** 2) / 6.0)  # off-centre in x: not symmetric
    return (np.exp(-r2) + 0.5 * blob).astype(np.float32)


@pytest.mark.parametrize("fixed_dir", ["LAS", "oblique"])
def test_pyca_lddmm_keeps_the_fixed_affine(tmp_path, fixed_dir):
    shape = (20, 18, 16)
    d = LAS if fixed_dir == "LAS" else OBLIQUE @ LAS
    a_fix = _affine(d, (1.0, 1.0, 2.0), (9.5, -8.0, -15.0))
    fixed = _phantom(shape, (10, 9, 8))
    moving_las = _phantom(shape, (11, 9.5, 8))
    # The moving image is stored RAS: its data x-mirrored, its affine placing every voxel where the
    # LAS-stored moving image would be (same world content as on the fixed image's grid when LAS).
    a_las = _affine(LAS, (1.0, 1.0, 2.0), (9.5, -8.0, -15.0))
    a_mov = a_las @ np.array([[-1, 0, 0, shape[0] - 1], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], float)
    nib.save(nib.Nifti1Image(fixed, a_fix), str(tmp_path / "fixed.nii.gz"))
    nib.save(nib.Nifti1Image(np.ascontiguousarray(moving_las[::-1]), a_mov), str(tmp_path / "moving.nii.gz"))
    assert nib.aff2axcodes(a_mov) == ("R", "A", "S")
    out = tmp_path / "out"
    # The `pyca` console script's entry point (pyproject.toml), in a process of its own.
    pyca_cmd = [sys.executable, "-c", "import sys; from pyca.cli import main; sys.exit(main())"]
    r = subprocess.run([*pyca_cmd, "lddmm", "--fixed", str(tmp_path / "fixed.nii.gz"),
                        "--moving", str(tmp_path / "moving.nii.gz"), "--out", str(out), "--scales", "1",
                        "--iterations", "0", "--affine", "none", "--time-steps", "2", "--no-report", "-q", "--device", "cpu"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    ref = nib.load(str(tmp_path / "fixed.nii.gz")).affine
    written = sorted(p for p in os.listdir(out) if p.endswith(".nii.gz"))
    assert {"deformed.nii.gz", "phiinv.nii.gz", "phi.nii.gz", "jacdet.nii.gz"} <= set(written)
    for name in written:
        img = nib.load(str(out / name))
        assert nib.aff2axcodes(img.affine) == nib.aff2axcodes(ref), name
        np.testing.assert_allclose(img.affine, ref, rtol=0, atol=1e-6, err_msg=name)
    # No registration steps: deformed = the moving image brought onto the fixed grid in world
    # coordinates (scipy), never the mirror of it: one trilinear interpolation, the border extended
    # where the oblique grid reaches beyond the moving image's box (ApplyH's CLAMP, docs/lddmm.md).
    deformed = np.asarray(nib.load(str(out / "deformed.nii.gz")).dataobj)
    m = np.linalg.inv(a_mov) @ ref
    want = ndimage.affine_transform(np.ascontiguousarray(moving_las[::-1]).astype(np.float64), m[:3, :3], m[:3, 3],
                                    order=1, mode="nearest")
    if fixed_dir == "LAS":
        np.testing.assert_allclose(want, moving_las, atol=1e-5)  # the reference itself: the LAS-stored image
    np.testing.assert_allclose(deformed, want, atol=1e-4)
    grid = json.loads((out / "summary.json").read_text())["grid"]
    assert grid["size"] == list(shape)
    # The fixed grid's whole geometry: summary.json's vox2world is the NIfTI affine of every output.
    np.testing.assert_allclose(grid["vox2world"], ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.array(grid["direction"]) * grid["spacing"], ref[:3, :3], rtol=0, atol=1e-6)


@pytest.mark.parametrize("bad", ["shear", "series"])
def test_pyca_lddmm_refuses_bad_geometry_in_one_line(tmp_path, capsys, bad):
    from pyca import cli

    good = _phantom((16, 16, 12), (8, 8, 6))
    nib.save(nib.Nifti1Image(good, np.diag([-1.0, 1.0, 1.0, 1.0])), str(tmp_path / "good.nii.gz"))
    if bad == "shear":
        aff = np.eye(4)
        aff[0, 1] = 0.4
        img = nib.Nifti1Image(good, None)
        img.set_sform(aff, code=1)
    else:
        img = nib.Nifti1Image(np.stack([good, good], axis=3), np.eye(4))
    nib.save(img, str(tmp_path / "bad.nii.gz"))
    out = tmp_path / "out"
    rc = cli.main(["lddmm", "--fixed", str(tmp_path / "good.nii.gz"), "--moving", str(tmp_path / "bad.nii.gz"),
                   "--out", str(out), "--no-progress", "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and not out.exists()
    assert err.startswith("pyca lddmm: error:") and "bad.nii.gz" in err and len(err.splitlines()) == 1, err
