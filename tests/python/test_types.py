"""Vec3Df, Vec3Di, GridInfo and the object surface of Image3D/Field3D (no GPU needed)."""
import pickle

import numpy as np
import pytest

import pyca as ca


def test_vec3_arithmetic_and_promotion():
    a, b = ca.Vec3Df(1.5, 2.0, -3.0), ca.Vec3Di(1, 2, 3)
    assert isinstance(a + b, ca.Vec3Df) and (a + b).tolist() == [2.5, 4.0, 0.0]
    assert isinstance(b + 1, ca.Vec3Di) and (b + 1).tolist() == [2, 3, 4]
    assert isinstance(b * 0.5, ca.Vec3Df) and (b * 0.5).tolist() == [0.5, 1.0, 1.5]
    assert isinstance(b / 2, ca.Vec3Df) and (b / 2).tolist() == [0.5, 1.0, 1.5]
    assert (2 - b).tolist() == [1, 0, -1] and (6 / b).tolist() == [6.0, 3.0, 2.0]
    assert (-a).tolist() == [-1.5, -2.0, 3.0]
    assert a * b == ca.Vec3Df(1.5, 4.0, -9.0)
    assert b.inverse().tolist() == pytest.approx([1.0, 0.5, 1.0 / 3.0])
    assert ca.Vec3Df(3, 4, 0).norm() == pytest.approx(5.0)


def test_vec3_sequence_protocol():
    v = ca.Vec3Di(4, 5, 6)
    assert len(v) == 3 and list(v) == [4, 5, 6] and v[0] == 4 and v[-1] == 6
    v[1] = 7
    assert v.y == 7 and tuple(v) == (4, 7, 6)
    assert np.array_equal(np.asarray(v), [4, 7, 6])
    assert pickle.loads(pickle.dumps(v)) == v
    assert repr(ca.Vec3Df(1, 2, 3)).startswith("Vec3Df(1.0")
    with pytest.raises(IndexError):
        v[3]


def test_gridinfo_defaults_and_conversions():
    g = ca.GridInfo(ca.Vec3Di(4, 5, 6))
    assert g.size() == (4, 5, 6) and g.spacing() == (1, 1, 1) and g.origin() == (0, 0, 0)
    assert g.nVox() == 120 and not g.is2D() and g.shape == (4, 5, 6)
    g2 = ca.GridInfo((4, 5, 6), spacing=2.0, origin=(1, 2, 3))
    assert g2.spacing() == (2, 2, 2) and g2.origin() == (1, 2, 3)
    # world = origin + spacing * index, and back
    w = g2.voxelToWorld(ca.Vec3Df(1, 1, 1))
    assert w == (3, 4, 5) and g2.worldToVoxel(w) == (1, 1, 1)
    assert g == ca.GridInfo((4, 5, 6)) and g != g2
    assert pickle.loads(pickle.dumps(g2)) == g2
    assert ca.GridInfo((31, 33, 1)).is2D()


@pytest.mark.parametrize(
    "args, exc",
    [(((0, 5, 6),), ValueError), (((4, 5, 6), 0.0), ValueError), (((4, 5, 6), (1, -1, 1)), ValueError),
     (((4.5, 5, 6),), TypeError), (("abc",), TypeError), (((4, 5, 6), "x"), TypeError)],
)
def test_gridinfo_rejects_bad_input(args, exc):
    with pytest.raises(exc):
        ca.GridInfo(*args)


def test_grid_returned_by_image_is_an_independent_copy():
    im = ca.Image3D(ca.GridInfo((3, 4, 5), 2.0))
    g = im.grid()
    del im  # the grid must not dangle
    assert g.size() == (3, 4, 5) and g.spacing() == (2, 2, 2)


@pytest.mark.parametrize("cls, ncomp", [(ca.Image3D, 1), (ca.Field3D, 3)])
def test_array_surface(cls, ncomp):
    g = ca.GridInfo((3, 4, 5), (1.0, 2.0, 3.0), (1, 1, 1))
    a = cls(g, ca.MEM_HOST)
    assert a.grid() == g and a.size() == (3, 4, 5) and a.spacing() == (1, 2, 3) and a.origin() == (1, 1, 1)
    assert a.memType() == ca.MEM_HOST and a.mem_type == ca.MEM_HOST and a.nVox() == 60
    assert a.shape == ((3, 4, 5) if ncomp == 1 else (3, 4, 5, 3))
    a.setSpacing(ca.Vec3Df(2, 2, 2))
    a.setOrigin((0, 0, 0))
    assert a.spacing() == (2, 2, 2) and a.origin() == (0, 0, 0)
    assert repr(a).startswith(cls.__name__ + "(size=(3, 4, 5)")
    # setGrid within the capacity works, beyond it is an error (PyCA's rule)
    a.setGrid(ca.GridInfo((3, 4, 2)))
    assert a.size() == (3, 4, 2)
    with pytest.raises(ValueError, match="capacity"):
        a.setGrid(ca.GridInfo((30, 4, 5)))
    # keyword construction and the PyCA empty form
    assert cls(grid=g, mem=ca.MEM_HOST).size() == (3, 4, 5)
    assert cls(ca.MEM_HOST).nVox() == 1


def test_image_constructor_errors():
    with pytest.raises(TypeError, match="grid"):
        ca.Image3D("not a grid")
    with pytest.raises(ValueError):
        ca.Image3D(ca.GridInfo((2, 2, 2)), ca.MEM_UNINITIALIZED)


def test_fill_clone_copy_are_deep():
    a = ca.Image3D(ca.GridInfo((5, 4, 3)))
    a.fill(2.5)
    b = a.clone()
    c = a.copy()
    np.asarray(a)[:] = 0
    assert np.all(np.asarray(b) == 2.5) and np.all(np.asarray(c) == 2.5)
    f = ca.Field3D(ca.GridInfo((5, 4, 3)))
    f.fill(ca.Vec3Df(1, 2, 3))
    vx, vy, vz = f.asnp()
    assert np.all(vx == 1) and np.all(vy == 2) and np.all(vz == 3)
    f.fill(7.0)
    assert np.all(np.asarray(f) == 7)


def test_fromlist_pyca_style():
    im = ca.Image3D(ca.MEM_HOST)
    im.fromlist([[[1, 2], [3, 4]], [[5, 6], [7, 8]]])
    assert im.size() == (2, 2, 2)
    ref = np.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], dtype=np.float32)
    assert np.array_equal(im.asnp(), ref)
    assert im.tolist() == ref.tolist()
