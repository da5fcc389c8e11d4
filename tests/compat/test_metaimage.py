"""MetaImage (.mhd / .mha) as PyCA wrote and read it, through pyca's own reader and writer
(pyca/_metaimage.py): PyCA.Common's functions keep the file's origin, spacing and direction as
written; pyca.io (RAS+ world) reads and writes them without SimpleITK too. SimpleITK, where
installed, is the independent reference for the bytes."""
import os

import numpy as np
import pytest

import pyca as ca
import pyca.common as common
from pyca import _metaimage

sitk = pytest.importorskip("SimpleITK", reason="SimpleITK is the reference MetaImage implementation here")


def pyca_style_mhd(path, arr, spacing, origin, channels=1):
    """A header as PyCA (ITK's MetaImageIO) wrote it for a grid of spacing/origin (identity
    TransformMatrix, AnatomicalOrientation RAI), with its .raw beside it."""
    base = os.path.splitext(os.path.basename(path))[0] + ".raw"
    lines = ["ObjectType = Image", "NDims = 3", "BinaryData = True", "BinaryDataByteOrderMSB = False",
             "CompressedData = False", "TransformMatrix = 1 0 0 0 1 0 0 0 1",
             "Offset = " + " ".join(str(o) for o in origin), "CenterOfRotation = 0 0 0",
             "AnatomicalOrientation = RAI", "ElementSpacing = " + " ".join(str(s) for s in spacing),
             "DimSize = " + " ".join(str(n) for n in arr.shape[:3])]
    if channels > 1:
        lines.append(f"ElementNumberOfChannels = {channels}")
    lines += ["ElementType = MET_FLOAT", f"ElementDataFile = {base}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    data = np.moveaxis(arr, -1, 0) if channels > 1 else arr
    with open(os.path.join(os.path.dirname(path), base), "wb") as f:
        f.write(np.asarray(data, dtype="<f4").tobytes(order="F"))


def test_a_pyca_written_mhd_loads_as_written(tmp_path):
    a = np.random.default_rng(1).uniform(0, 1, (6, 5, 4)).astype(np.float32)
    p = str(tmp_path / "I0.mhd")
    pyca_style_mhd(p, a, (1.5, 2.0, 2.5), (10.0, -20.0, 30.5))
    im = common.LoadITKImage(p)
    assert im.spacing().tolist() == [1.5, 2.0, 2.5]
    assert im.origin().tolist() == [10.0, -20.0, 30.5]
    np.testing.assert_array_equal(im.grid().direction(), np.eye(3))
    np.testing.assert_array_equal(im.numpy(), a)
    assert common.ReadGrid(p) == im.grid()
    # SimpleITK agrees on the bytes and the header
    s = sitk.ReadImage(p)
    np.testing.assert_array_equal(sitk.GetArrayFromImage(s).T, a)
    assert s.GetOrigin() == (10.0, -20.0, 30.5)


@pytest.mark.parametrize("ext", ["mhd", "mha"])
@pytest.mark.parametrize("mem", [ca.MEM_HOST] + ([ca.MEM_DEVICE] if ca.cuda_available() else []))
def test_fresh_grid_round_trip_is_exact_and_not_mirrored(tmp_path, ext, mem):
    rng = np.random.default_rng(2)
    grid = ca.GridInfo(ca.Vec3Di(7, 6, 5), ca.Vec3Df(0.9, 1.1, 1.7), ca.Vec3Df(-3.25, 4.5, 12.0))
    im = ca.Image3D.from_array(np.asfortranarray(rng.uniform(-1, 1, (7, 6, 5)).astype(np.float32)), grid)
    f = ca.Field3D.from_array(np.asfortranarray(rng.uniform(-1, 1, (7, 6, 5, 3)).astype(np.float32)), grid)
    im, f = im.clone(mem), f.clone(mem)
    pi, pf = str(tmp_path / f"I.{ext}"), str(tmp_path / f"phiinv.{ext}")
    common.SaveITKImage(im, pi)
    common.SaveITKField(f, pf)
    im2, f2 = common.LoadITKImage(pi, mem), common.LoadITKField(pf, mem)
    assert im2.grid() == grid and f2.grid() == grid and im2.memType() == mem
    np.testing.assert_array_equal(im2.numpy(), im.numpy())
    np.testing.assert_array_equal(f2.numpy(), f.numpy())
    # in the file: PyCA's header (identity direction, the origin as it is)
    for p, comps in ((pi, 1), (pf, 3)):
        s = sitk.ReadImage(p)
        assert s.GetDirection() == (1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0)
        np.testing.assert_allclose(s.GetOrigin(), (-3.25, 4.5, 12.0))
        np.testing.assert_allclose(s.GetSpacing(), grid.spacing().tolist(), rtol=1e-7)
        assert s.GetNumberOfComponentsPerPixel() == comps
    np.testing.assert_array_equal(np.transpose(sitk.GetArrayFromImage(sitk.ReadImage(pf)), (2, 1, 0, 3)), f.numpy())


def test_reader_matches_simpleitk_on_its_variants(tmp_path):
    a = np.random.default_rng(3).uniform(-5, 5, (4, 3, 2)).astype(np.float32)
    img = sitk.GetImageFromArray(a)
    img.SetSpacing([1.5, 2.0, 3.0])
    img.SetOrigin([1.0, 2.0, 3.0])
    R = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    img.SetDirection(R.ravel().tolist())
    for name, compress in (("a.mhd", False), ("b.mha", False), ("c.mha", True), ("d.mhd", True)):
        p = str(tmp_path / name)
        sitk.WriteImage(img, p, compress)
        data, sp, org, d = _metaimage.read(p)
        np.testing.assert_array_equal(data, a.T)
        assert sp == [1.5, 2.0, 3.0] and org == [1.0, 2.0, 3.0]
        np.testing.assert_array_equal(d, R)
    # 2-D, short integers
    b = np.arange(12, dtype=np.int16).reshape(3, 4)
    sitk.WriteImage(sitk.GetImageFromArray(b), str(tmp_path / "e.mha"))
    data, sp, org, d = _metaimage.read(str(tmp_path / "e.mha"))
    assert data.dtype == np.int16 and data.shape == (4, 3, 1)
    np.testing.assert_array_equal(data[..., 0], b.T)
    # what pyca writes, SimpleITK reads with the same direction
    p = str(tmp_path / "w.mha")
    _metaimage.write(p, a.T, [1.5, 2.0, 3.0], [1.0, 2.0, 3.0], R)
    s = sitk.ReadImage(p)
    np.testing.assert_array_equal(np.array(s.GetDirection()).reshape(3, 3), R)
    np.testing.assert_array_equal(sitk.GetArrayFromImage(s), a)


def test_bad_headers_are_refused_before_reading(tmp_path):
    a = np.zeros((4, 4, 4), np.float32)
    p = str(tmp_path / "t.mhd")
    pyca_style_mhd(p, a, (1, 1, 1), (0, 0, 0))
    with open(str(tmp_path / "t.raw"), "r+b") as f:
        f.truncate(100)
    with pytest.raises(ca.io.ImageFileError, match="truncated"):
        common.LoadITKImage(p)
    text = open(p).read().replace("DimSize = 4 4 4", "DimSize = 400000 400000 400000")
    open(p, "w").write(text)
    with pytest.raises(ca.io.ImageFileError, match="more than pyca reads|truncated"):
        common.LoadITKImage(p)
    open(p, "w").write(text.replace("DimSize = 400000 400000 400000", "DimSize = 4 4 4")
                       .replace("ElementDataFile = t.raw", "ElementDataFile = LIST"))
    with pytest.raises(ca.io.ImageFileError, match="not supported"):
        common.LoadITKImage(p)
    open(p, "w").write("not a header at all\n")
    with pytest.raises(ca.io.ImageFileError, match="not a MetaImage header"):
        common.LoadITKImage(p)
    v = str(tmp_path / "v.mhd")
    pyca_style_mhd(v, np.zeros((3, 3, 3, 3), np.float32), (1, 1, 1), (0, 0, 0), channels=3)
    with pytest.raises(ca.io.ImageFileError, match="LoadITKField"):
        common.LoadITKImage(v)
    with pytest.raises(FileNotFoundError):
        common.LoadITKImage(str(tmp_path / "missing.mhd"))


def test_pyca_io_reads_and_writes_metaimage_without_simpleitk(tmp_path, monkeypatch):
    """pyca.io converts MetaImage's LPS+ world to its RAS+ one; its own reader gives what SimpleITK's
    path gives, so a fresh clone without SimpleITK reads a PyCA user's files."""
    a = np.random.default_rng(4).uniform(0, 1, (5, 4, 3)).astype(np.float32)
    p = str(tmp_path / "x.mhd")
    pyca_style_mhd(p, a, (1.5, 2.0, 2.5), (10.0, -20.0, 30.0))
    with_sitk = ca.io.load_image(p)
    monkeypatch.setattr(ca.io, "simpleitk_available", lambda: False)
    own = ca.io.load_image(p)
    assert own.grid() == with_sitk.grid()
    np.testing.assert_array_equal(own.numpy(), a)
    out = str(tmp_path / "y.mha")
    ca.io.save_image(own, out)  # own writer (SimpleITK "absent")
    s = sitk.ReadImage(out)
    assert s.GetOrigin() == (10.0, -20.0, 30.0)  # back in the file's LPS frame: as written
    np.testing.assert_array_equal(sitk.GetArrayFromImage(s).T, a)


# ------------------------------------------------------------------------------------------------
# PyCA's .npz / .npy files (PyCAIO) and the extension dispatch
def test_npz_files_in_pycas_layout(tmp_path):
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (6, 5, 4)).astype(np.float32)
    f = rng.uniform(-1, 1, (6, 5, 4, 3)).astype(np.float32)
    # as PyCA wrote them: data [x, y, z] (fields [x, y, z, 3]), origin, spacing
    np.savez_compressed(str(tmp_path / "i.npz"), data=a, origin=[1.0, 2.0, 3.0], spacing=[0.5, 1.5, 2.0])
    np.savez(str(tmp_path / "f.npz"), data=f, origin=[-1.0, 0.0, 4.0], spacing=[1.0, 1.0, 3.0])
    im = common.LoadImage(str(tmp_path / "i.npz"))
    fl = common.LoadField(str(tmp_path / "f.npz"))
    assert im.origin().tolist() == [1.0, 2.0, 3.0] and im.spacing().tolist() == [0.5, 1.5, 2.0]
    assert fl.origin().tolist() == [-1.0, 0.0, 4.0] and fl.spacing().tolist() == [1.0, 1.0, 3.0]
    np.testing.assert_array_equal(im.numpy(), a)
    np.testing.assert_array_equal(fl.numpy(), f)
    common.SaveImage(im, str(tmp_path / "j.npz"))
    common.SaveField(fl, str(tmp_path / "g.npz"), useCompression=False)
    with np.load(str(tmp_path / "j.npz")) as z:
        assert sorted(z.files) == ["data", "origin", "spacing"]
        np.testing.assert_array_equal(z["data"], a)
        np.testing.assert_array_equal(z["spacing"], [0.5, 1.5, 2.0])
    with np.load(str(tmp_path / "g.npz")) as z:
        np.testing.assert_array_equal(z["data"], f)
    common.SaveImage(im, str(tmp_path / "k.npy"))
    np.testing.assert_array_equal(np.load(str(tmp_path / "k.npy")), a)
    assert common.LoadImage(str(tmp_path / "k.npy")).grid() == ca.GridInfo(ca.Vec3Di(6, 5, 4))
    common.SaveImage(im, str(tmp_path / "m.mhd"))  # anything else: SaveITKImage
    assert common.LoadImage(str(tmp_path / "m.mhd")).grid() == im.grid()
    with pytest.raises(ValueError, match="npy field format"):
        common.SaveField(fl, str(tmp_path / "x.npy"))
    with pytest.raises(NotImplementedError, match="DICOM"):
        common.LoadImage(str(tmp_path / "x.dcm"))
    np.savez(str(tmp_path / "bad.npz"), data=a, origin=[1.0, 2.0], spacing=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="origin must be 3 finite numbers"):
        common.LoadImageNPZ(str(tmp_path / "bad.npz"))


def test_npz_keeps_an_oblique_grids_direction(tmp_path):
    """PyCA's .npz has no direction: an image or field on a rotated, flipped grid was written without it
    and read back on the identity (its world positions silently moved). The direction is now written
    beside PyCA's three arrays and read back; an identity grid's file stays PyCA's layout (above)."""
    d = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
    g = ca.GridInfo(ca.Vec3Di(6, 5, 4), ca.Vec3Df(0.5, 1.5, 2.0), ca.Vec3Df(1.0, 2.0, 3.0), d)
    a = np.random.default_rng(6).uniform(-1, 1, (6, 5, 4)).astype(np.float32)
    im = ca.Image3D.from_array(np.asfortranarray(a), g)
    fl = ca.Field3D(g, ca.MEM_HOST)
    ca.SetToIdentity(fl)
    common.SaveImage(im, str(tmp_path / "o.npz"))
    common.SaveField(fl, str(tmp_path / "f.npz"))
    with np.load(str(tmp_path / "o.npz")) as z:
        assert sorted(z.files) == ["data", "direction", "origin", "spacing"]
    back, fb = common.LoadImage(str(tmp_path / "o.npz")), common.LoadField(str(tmp_path / "f.npz"))
    assert back.grid() == g and fb.grid() == g
    np.testing.assert_array_equal(back.grid().direction(), d)
    np.testing.assert_array_equal(back.numpy(), a)
    np.testing.assert_array_equal(fb.numpy(), fl.numpy())
    np.savez(str(tmp_path / "bad.npz"), data=a, origin=[1.0, 2.0, 3.0], spacing=[1.0, 1.0, 1.0],
             direction=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="LoadImageNPZ: .*direction must be an invertible 3 x 3 matrix"):
        common.LoadImageNPZ(str(tmp_path / "bad.npz"))
