"""PyCA's object surface: Vec3Df/Vec3Di, GridInfo, Image3D/Field3D methods, as PyCA scripts use them."""
import numpy as np
import pytest

import pyca as ca
from compat_helpers import GRID_IDS, both_memory, make_grid

MEMS = [ca.MEM_HOST, ca.MEM_DEVICE]
needs_gpu = pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
MEM_PARAMS = [pytest.param(ca.MEM_HOST, id="host"), pytest.param(ca.MEM_DEVICE, id="device", marks=needs_gpu)]


# ------------------------------------------------------------------------------------------------
# Vec3Df / Vec3Di
def test_vec3_components_tolist_indexing():
    v = ca.Vec3Df(1.5, -2.0, 3.25)
    assert (v.x, v.y, v.z) == (1.5, -2.0, 3.25)
    assert v.tolist() == [1.5, -2.0, 3.25]
    assert (v[0], v[1], v[2]) == (1.5, -2.0, 3.25)
    i = ca.Vec3Di(4, 5, 6)
    assert i.tolist() == [4, 5, 6] and i[2] == 6
    i.x = 7
    assert i.tolist() == [7, 5, 6]


@pytest.mark.parametrize(
    "a, b",
    [(ca.Vec3Df(1.5, 2.0, -3.0), ca.Vec3Di(2, 3, 4)), (ca.Vec3Di(2, 3, 4), ca.Vec3Df(1.5, 2.0, -3.0)),
     (ca.Vec3Df(1.5, 2.0, -3.0), 2), (ca.Vec3Df(1.5, 2.0, -3.0), 0.5), (ca.Vec3Di(2, 3, 4), 3),
     (ca.Vec3Di(2, 3, 4), 1.5), (ca.Vec3Di(2, 3, 4), ca.Vec3Di(1, 2, 3))],
    ids=["f+i", "i+f", "f+int", "f+float", "i+int", "i+float", "i+i"])
@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_vec3_mixed_arithmetic(a, b, op):
    fn = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide}[op]
    av = np.array(a.tolist(), dtype=float)
    bv = np.array(b.tolist() if not isinstance(b, (int, float)) else [b] * 3, dtype=float)
    for res, ref in ((eval(f"a {op} b"), fn(av, bv)), (eval(f"b {op} a"), fn(bv, av))):
        np.testing.assert_allclose(res.tolist(), ref, rtol=1e-6)
        floaty = op == "/" or isinstance(a, ca.Vec3Df) or isinstance(b, (ca.Vec3Df, float))
        assert isinstance(res, ca.Vec3Df if floaty else ca.Vec3Di)


def test_vec3df_inverse():
    v = ca.Vec3Df(2.0, 4.0, 0.5).inverse()
    assert isinstance(v, ca.Vec3Df)
    np.testing.assert_allclose(v.tolist(), [0.5, 0.25, 2.0])
    sp = ca.Vec3Df(1.5, 2.1, 1.0)
    np.testing.assert_allclose((sp * sp.inverse()).tolist(), [1, 1, 1], rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# GridInfo
def test_gridinfo_pyca_constructor_and_accessors():
    g = ca.GridInfo(ca.Vec3Di(31, 33, 1), ca.Vec3Df(1.5, 2.1, 1.0))
    assert g.size().tolist() == [31, 33, 1]
    np.testing.assert_allclose(g.spacing().tolist(), [1.5, 2.1, 1.0], rtol=1e-6)
    assert g.origin().tolist() == [0, 0, 0]
    assert g.nVox() == 31 * 33
    d = ca.GridInfo(ca.Vec3Di(4, 5, 6))  # spacing 1, origin 0 by default
    assert d.spacing().tolist() == [1, 1, 1] and d.origin().tolist() == [0, 0, 0]
    o = ca.GridInfo(ca.Vec3Di(4, 5, 6), ca.Vec3Df(1, 1, 1), ca.Vec3Df(-1, 2, 3.5))
    assert o.origin().tolist() == [-1, 2, 3.5]
    o.setSize(ca.Vec3Di(2, 2, 2))
    o.setSpacing(ca.Vec3Df(2, 2, 2))
    o.setOrigin(ca.Vec3Df(0, 0, 0))
    assert o.size().tolist() == [2, 2, 2] and o.spacing().tolist() == [2, 2, 2]
    assert o.origin().tolist() == [0, 0, 0]


# ------------------------------------------------------------------------------------------------
# Image3D / Field3D
@pytest.mark.parametrize("gid", GRID_IDS)
@pytest.mark.parametrize("mem", MEM_PARAMS)
@pytest.mark.parametrize("cls", [ca.Image3D, ca.Field3D])
def test_array_pyca_methods(cls, mem, gid):
    g = make_grid(gid, origin=(0.5, -1.0, 2.0))
    a = cls(g, mem)
    assert a.grid() == g and a.size() == g.size() and a.memType() == mem
    assert a.spacing() == g.spacing() and a.origin() == g.origin()
    assert a.nVox() == g.nVox()
    a.setSpacing(ca.Vec3Df(3, 3, 3))
    a.setOrigin(ca.Vec3Df(1, 2, 3))
    assert a.spacing().tolist() == [3, 3, 3] and a.origin().tolist() == [1, 2, 3]
    smaller = ca.GridInfo(ca.Vec3Di(3, 4, 1))
    a.setGrid(smaller)
    assert a.grid() == smaller and a.nVox() == 12
    with pytest.raises(ValueError):
        a.setGrid(ca.GridInfo(ca.Vec3Di(100, 100, 100)))  # more voxels than allocated


@pytest.mark.parametrize("mem", MEM_PARAMS)
def test_totype_in_place_and_copy(mem):
    g = make_grid("2d")
    im = ca.Image3D(g, ca.MEM_HOST)
    ca.SetMem(im, 3.0)
    im.toType(mem)  # in place
    assert im.memType() == mem
    c = im.copy()
    assert c.memType() == mem and c.grid() == g
    ca.SetMem(im, 1.0)  # the copy is deep
    c.toType(ca.MEM_HOST)
    im.toType(ca.MEM_HOST)
    assert np.all(c.asnp() == 3.0) and np.all(im.asnp() == 1.0)


def test_asnp_is_zero_copy():
    g = make_grid("3d")
    im = ca.Image3D(g, ca.MEM_HOST)
    arr = im.asnp()
    assert arr.shape == tuple(g.size()) and arr.dtype == np.float32
    arr[...] = 2.0
    assert ca.Sum(im) == pytest.approx(2.0 * g.nVox())
    ca.SetMem(im, 5.0)
    assert np.all(arr == 5.0)
    arr[1, 2, 3] = -7.0  # index [x, y, z]
    assert ca.Min(im) == -7.0


def test_field_asnp_gives_three_views():
    g = make_grid("2d")
    f = ca.Field3D(g, ca.MEM_HOST)
    vx, vy, vz = f.asnp()
    for v in (vx, vy, vz):
        assert v.shape == tuple(g.size())
    vx[...], vy[...], vz[...] = 1.0, 2.0, 3.0
    np.testing.assert_allclose(ca.Sum(f).tolist(), [g.nVox(), 2.0 * g.nVox(), 3.0 * g.nVox()])
    ca.SetMem(f, ca.Vec3Df(-1, -2, -3))
    assert np.all(vx == -1) and np.all(vy == -2) and np.all(vz == -3)


@needs_gpu
def test_asnp_on_device_raises():
    im = ca.Image3D(make_grid("2d"), ca.MEM_DEVICE)
    with pytest.raises(TypeError):
        im.asnp()


def test_image_from_memtype_and_fromlist():
    # PyCA's Image3D(mem) + fromlist (used in PyCA's Convolve test for a kernel)
    k = np.zeros([3, 3])
    k[1, :] = 1.0
    k[:, 1] = 1.0
    k[1, 1] = -4.0
    k = np.atleast_3d(k)
    hk = ca.Image3D(ca.MEM_HOST)
    hk.fromlist(k.tolist())
    assert hk.size().tolist() == [3, 3, 1]
    np.testing.assert_array_equal(hk.asnp(), k)


@both_memory()
def test_fromlist_any_memory(mem):
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    im = ca.Image3D(mem)
    im.fromlist(data.tolist())
    assert im.memType() == mem and im.size().tolist() == [2, 3, 4]
    np.testing.assert_array_equal(im.numpy(), data)
    return im


# ------------------------------------------------------------------------------------------------
# PyCA surface used by PyCA.Common and PyCA's own tests.
def test_vec3_fromlist():
    v = ca.Vec3Di()
    v.fromlist([3, 4, 5])
    assert v.tolist() == [3, 4, 5]


def test_vec3_set_component():
    v = ca.Vec3Di(1, 2, 3)
    v.set(2, 7)
    assert v.tolist() == [1, 2, 7]


def test_swap():
    a, b = ca.Image3D(ca.GridInfo((2, 2, 2))), ca.Image3D(ca.GridInfo((3, 3, 3)))
    ca.SetMem(a, 1.0)
    ca.SetMem(b, 2.0)
    a.swap(b)
    assert a.size().tolist() == [3, 3, 3] and ca.Max(a) == 2.0 and ca.Max(b) == 1.0


def test_image_from_three_sizes():
    im = ca.Image3D(50, 50, 1)
    assert im.size().tolist() == [50, 50, 1] and im.memType() == ca.MEM_HOST
