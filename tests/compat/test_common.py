"""pyca.common (PyCA.Common): NumPy conversion, random volumes, files, slices, ComposeDef."""
import numpy as np
import pytest

import pyca as ca
import pyca.common as common
from compat_helpers import assert_close, both_memory, make_grid, npy

needs_gpu = pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
MEM_PARAMS = [pytest.param(ca.MEM_HOST, id="host"), pytest.param(ca.MEM_DEVICE, id="device", marks=needs_gpu)]


def test_top_level_names():
    assert ca.GetNumberOfCUDADevices() >= 0
    assert common.GetNumberOfCUDADevices() == ca.GetNumberOfCUDADevices()
    assert (ca.GetNumberOfCUDADevices() > 0) == ca.cuda_available()
    for name in ("ManagedImage3D", "ManagedField3D", "ThreadMemoryManager"):
        assert hasattr(common, name)


@pytest.mark.parametrize("mem", MEM_PARAMS)
@pytest.mark.parametrize("shape", [(31, 33), (7, 5, 3)], ids=["2d", "3d"])
def test_ImFromNPArr(shape, mem):
    arr = np.random.default_rng(1).standard_normal(shape)
    sp, orig = ca.Vec3Df(1.5, 2.1, 1.0), ca.Vec3Df(-1, 2, 3)
    im = common.ImFromNPArr(arr, mType=mem, sp=sp, orig=orig)
    assert isinstance(im, ca.Image3D) and im.memType() == mem
    assert im.size().tolist() == list(np.atleast_3d(arr).shape)
    assert im.spacing() == sp and im.origin() == orig
    assert_close(im, np.atleast_3d(arr).astype(np.float32), rtol=0, atol=0)
    np.testing.assert_array_equal(common.AsNPCopy(im), np.atleast_3d(arr).astype(np.float32))
    # PyCA's list spacing
    im2 = common.ImFromNPArr(arr, mem, sp=[1.5, 2.1, 1.0])
    np.testing.assert_allclose(im2.spacing().tolist(), [1.5, 2.1, 1.0], rtol=1e-6)


@pytest.mark.parametrize("mem", MEM_PARAMS)
def test_FieldFromNPArr_shapes(mem):
    rng = np.random.default_rng(2)
    a4 = rng.standard_normal((5, 6, 7, 3))
    f = common.FieldFromNPArr(a4, mType=mem, sp=ca.Vec3Df(1, 2, 3))
    assert isinstance(f, ca.Field3D) and f.memType() == mem and f.size().tolist() == [5, 6, 7]
    assert f.spacing().tolist() == [1, 2, 3]
    np.testing.assert_allclose(common.AsNPCopy(f), a4.astype(np.float32))
    a2 = rng.standard_normal((5, 6, 2))  # 2-D, two components: z = 0
    f2 = common.FieldFromNPArr(a2, mem)
    assert f2.size().tolist() == [5, 6, 1]
    ref = np.concatenate([a2, np.zeros((5, 6, 1))], axis=2)[:, :, None, :]
    np.testing.assert_allclose(common.AsNPCopy(f2), ref.astype(np.float32))
    with pytest.raises(ValueError):
        common.FieldFromNPArr(rng.standard_normal((5, 6, 7, 2)))


@pytest.mark.parametrize("mem", MEM_PARAMS)
def test_AsNPCopy_does_not_move_or_share(mem):
    im = common.ImFromNPArr(np.ones((4, 5, 6)), mem)
    a = common.AsNPCopy(im)
    assert im.memType() == mem  # left where it was
    a[...] = 7.0  # a copy
    assert ca.Max(im) == 1.0
    f = common.FieldFromNPArr(np.ones((4, 5, 6, 3)), mem)
    assert common.AsNPCopy(f).shape == (4, 5, 6, 3) and f.memType() == mem
    with pytest.raises(TypeError):
        common.AsNPCopy(np.zeros(3))


@pytest.mark.parametrize("mem", MEM_PARAMS)
def test_CopyDataFromNPArr(mem):
    g = make_grid("2d")
    im = ca.Image3D(g, mem)
    arr = np.random.default_rng(3).standard_normal((31, 33))
    common.CopyDataFromNPArr(im, arr)
    assert im.memType() == mem
    assert_close(im, arr[:, :, None].astype(np.float32), rtol=0, atol=0)
    with pytest.raises(ValueError):
        common.CopyDataFromNPArr(im, np.zeros((3, 3)))
    f = ca.Field3D(g, mem)
    farr = np.random.default_rng(4).standard_normal((31, 33, 1, 3))
    common.CopyDataFromNPArr(f, farr)
    assert_close(f, farr.astype(np.float32), rtol=0, atol=0)


@pytest.mark.parametrize("mem", MEM_PARAMS)
def test_random_volumes(mem):
    sz = np.array([31, 33])
    sp = ca.Vec3Df(1.5, 2.1, 1.0)
    np.random.seed(0)
    im = common.RandImage(sz, nSig=2.0, gSig=0.0, mType=mem, sp=sp)
    assert im.size().tolist() == [31, 33, 1] and im.memType() == mem and im.spacing() == sp
    a = common.AsNPCopy(im)
    assert abs(a.mean()) < 0.3 and 1.6 < a.std() < 2.4
    nn = common.RandImage([9, 8, 7], NonNeg=True)
    assert ca.Min(nn) >= 0.0
    # PyCA.Common's positional order (sz, mType, sp, ...) and PyCA.ImageGen's (sz, nSig, gSig, NonNeg, mType)
    old = common.RandImage(sz, mem, sp, NonNeg=True)
    assert old.memType() == mem and old.spacing() == sp and ca.Min(old) >= 0.0
    gen = common.RandImage(sz, 3.0, 0.0, True, mem)
    assert gen.memType() == mem and ca.Min(gen) >= 0.0 and common.AsNPCopy(gen).mean() > 1.5
    with pytest.raises(TypeError):
        common.RandImage(sz, mem, nSig=1.0, mType=mem)
    smooth = common.RandImage([40, 40], nSig=1.0, gSig=3.0)
    assert common.AsNPCopy(smooth).std() < 0.5  # smoothing reduces the variance
    u = common.RandUnifImage([9, 8, 7], 2.0, 3.0, mType=mem)
    ua = common.AsNPCopy(u)
    assert ua.min() >= 2.0 and ua.max() <= 3.0 and u.memType() == mem
    f = common.RandField(sz, nSig=5.0, gSig=4.0, mType=mem, sp=sp)
    fa = common.AsNPCopy(f)
    assert f.size().tolist() == [31, 33, 1] and fa.shape == (31, 33, 1, 3)
    assert np.all(fa[..., 2] == 0.0)  # 2-D: no z component
    assert fa[..., 0].std() > 0.0
    fn = common.RandField([5, 6, 7], mem, NonNeg=True)
    assert fn.memType() == mem and ca.Min(fn).tolist() >= [0.0, 0.0, 0.0]
    fg = common.RandField([5, 6, 7], 2.0, 1.0, False, mem)
    assert fg.memType() == mem and fg.size().tolist() == [5, 6, 7]


@pytest.mark.parametrize("mem", MEM_PARAMS)
@pytest.mark.parametrize("ext", [".nii", ".nii.gz"])
def test_itk_file_round_trip(tmp_path, ext, mem):
    pytest.importorskip("nibabel")
    g = ca.GridInfo(ca.Vec3Di(7, 6, 5), ca.Vec3Df(1.5, 2.0, 0.5), ca.Vec3Df(-3.0, 4.0, 1.0))
    arr = np.random.default_rng(5).standard_normal((7, 6, 5)).astype(np.float32)
    im = common.ImFromNPArr(arr, mem, sp=g.spacing(), orig=g.origin())
    fname = str(tmp_path / ("im" + ext))
    common.SaveITKImage(im, fname)
    back = common.LoadITKImage(fname, mem)
    assert back.memType() == mem and back.grid() == g
    np.testing.assert_array_equal(common.AsNPCopy(back), arr)
    assert common.ReadGrid(fname) == g
    farr = np.random.default_rng(6).standard_normal((7, 6, 5, 3)).astype(np.float32)
    f = common.FieldFromNPArr(farr, mem, sp=g.spacing(), orig=g.origin())
    ffile = str(tmp_path / ("f" + ext))
    common.SaveITKField(f, ffile)
    fb = common.LoadITKField(ffile, mem)
    assert fb.memType() == mem and fb.grid() == g
    np.testing.assert_array_equal(common.AsNPCopy(fb), farr)


def test_png_round_trip(tmp_path):
    pytest.importorskip("matplotlib")
    arr = np.linspace(0, 1, 20 * 30).reshape(20, 30)
    im = common.ImFromNPArr(arr)
    fname = str(tmp_path / "im.png")
    common.SavePNGImage(im, fname, rng=[0, 1])
    back = common.LoadPNGImage(fname)
    assert back.size().tolist() == [20, 30, 1]
    np.testing.assert_allclose(common.AsNPCopy(back)[:, :, 0], arr, atol=0.02)
    # a 3-D image: matplotlib took 3 or 4 slices as colour channels (a 6 x 5 x 4 image came back one grey
    # 6 x 5 picture of mixed slices): refused, nothing written
    vol = common.ImFromNPArr(np.random.default_rng(2).random((6, 5, 4)))
    with pytest.raises(ValueError, match="SavePNGImage: a PNG holds one 2-D picture; the image is 6 x 5 x 4"):
        common.SavePNGImage(vol, str(tmp_path / "vol.png"))
    assert not (tmp_path / "vol.png").exists()


@both_memory()
def test_extract_roi_and_slices(mem):
    arr = np.arange(7 * 6 * 5, dtype=np.float32).reshape(7, 6, 5)
    im = common.ImFromNPArr(arr, mem, sp=[1.5, 2.0, 0.5])
    roi = common.ExtractROI(im, [1, 3, 2, 4, 0, 2])
    assert roi.size().tolist() == [3, 3, 3] and roi.memType() == mem
    np.testing.assert_array_equal(common.AsNPCopy(roi), arr[1:4, 2:5, 0:3])
    s = common.ExtractSliceIm(im)  # middle z slice
    assert s.size().tolist() == [7, 6, 1]
    np.testing.assert_array_equal(common.AsNPCopy(s)[:, :, 0], arr[:, :, 2])
    np.testing.assert_array_equal(common.ExtractSliceArrIm(im, 4, "x"), arr[4:5])
    np.testing.assert_array_equal(common.ExtractSliceArr(arr, 1, "y"), arr[:, 1, :])
    farr = np.random.default_rng(0).standard_normal((7, 6, 5, 3)).astype(np.float32)
    f = common.FieldFromNPArr(farr, mem)
    np.testing.assert_array_equal(common.ExtractSliceArrVF(f, 3, "z"), farr[:, :, 3:4, :])
    return roi, s


def test_numpy_helpers():
    assert common.Distribute(10, 3, 0) == [0, 1, 2, 3]
    assert common.Distribute(10, 3, 2) == [7, 8, 9]
    assert sorted(sum((common.Distribute(11, 4, r) for r in range(4)), [])) == list(range(11))
    assert common.Distribute(2, 4, 3) == []
    tw = common.TukeyWindow([8, 9, 10], 3)
    assert tw.shape == (8, 9, 10) and tw.max() == 1.0 and tw[0, 0, 0] == 0.0
    e = common.DrawEllipse([31, 33], [15, 16], 5, 8)
    assert e[15, 16] == 1.0 and e[0, 0] == 0.0 and e[15 + 5, 16] == 1.0 and e[15 + 6, 16] == 0.0
    delta = np.zeros((21, 21))
    delta[10, 10] = 1.0
    b = common.GaussianBlur(delta, 1.0)
    assert b.shape == (21, 21) and abs(b.sum() - 1.0) < 1e-6 and b[10, 10] == b.max()


@both_memory(atol=1e-5)
def test_ComposeDef_matches_compose(mem):
    g = make_grid("2d")
    np.random.seed(3)
    V = [common.RandField(g.size(), nSig=2.0, gSig=3.0, mType=mem, sp=g.spacing()) for _ in range(3)]
    h = common.ComposeDef(V, 2)
    ref = ca.Field3D(g, mem)
    tmp = ca.Field3D(g, mem)
    ca.SetToIdentity(ref)
    for v in V[:2]:
        ca.ComposeVH(tmp, v, ref)
        ca.Copy(ref, tmp)
    assert_close(h, npy(ref), rtol=0, atol=0)
    v = common.ComposeDef(V, 1, asVField=True)
    ident = ca.Field3D(g, mem)
    ca.SetToIdentity(ident)
    ca.ComposeVH(tmp, V[0], ident)
    assert_close(v, npy(tmp) - npy(ident), atol=1e-5)
    return h
