"""The Python API as NumPy / SimpleITK / PyCA users expect it (issue 17): keyword arguments and
visible signatures, readable enumerations, one-line overload errors, NumPy indexing of host objects,
from_array with spacing and origin."""
from __future__ import annotations

import inspect
import pickle

import numpy as np
import pytest

import pyca as ca
from pyca import registry


def _grid(shape=(6, 5, 4), spacing=(1.0, 1.0, 1.0)):
    return ca.GridInfo(shape, spacing)


def _image(rng, shape=(6, 5, 4)):
    return ca.Image3D.from_array(np.asfortranarray(rng.random(shape, dtype=np.float32)))


def _shifted_h(grid, shift):
    h = ca.Field3D(grid)
    ca.SetToIdentity(h)
    a = np.asarray(h)
    a[..., 0] += shift  # half the samples fall outside the grid along x
    return h


# ---- keyword arguments and signatures
def test_applyh_background_keyword_is_used(rng):
    g = _grid()
    im = _image(rng)
    h = _shifted_h(g, 3.0)
    out_kw, out_pos, out_default = ca.Image3D(g), ca.Image3D(g), ca.Image3D(g)
    ca.ApplyH(out_kw, im, h, bg=ca.BACKGROUND_STRATEGY_ZERO)
    ca.ApplyH(out_pos, im, h, ca.BACKGROUND_STRATEGY_ZERO)
    ca.ApplyH(out_default, im, h)  # default: BACKGROUND_STRATEGY_CLAMP
    np.testing.assert_array_equal(np.asarray(out_kw), np.asarray(out_pos))
    assert np.all(np.asarray(out_kw)[-1] == 0.0)
    assert not np.array_equal(np.asarray(out_kw), np.asarray(out_default))


def test_keywords_pick_the_field_overload_with_its_own_order(rng):
    g = _grid()
    f = ca.Field3D.from_array(np.asfortranarray(rng.random((6, 5, 4, 3), dtype=np.float32)))
    v = ca.Field3D(g)
    v.fill(0.7)
    kw, pos = ca.Field3D(g), ca.Field3D(g)
    # The field overload is ApplyV(out, src, v, bg, delta=1.0, interp): another order than the image one.
    ca.ApplyV(kw, src=f, v=v, delta=0.5, bg=ca.BACKGROUND_STRATEGY_ZERO)
    ca.ApplyV(pos, f, v, ca.BACKGROUND_STRATEGY_ZERO, 0.5)
    np.testing.assert_array_equal(np.asarray(kw), np.asarray(pos))
    im = _image(rng)
    out_kw, out_pos = ca.Image3D(g), ca.Image3D(g)
    ca.ApplyV(out_kw, im, v, bgVal=2.5, bg=ca.BACKGROUND_STRATEGY_VAL)
    ca.ApplyV(out_pos, im, v, 1.0, ca.BACKGROUND_STRATEGY_VAL, ca.INTERP_LINEAR, 2.5)
    np.testing.assert_array_equal(np.asarray(out_kw), np.asarray(out_pos))
    assert np.any(np.asarray(out_kw) == 2.5)


def test_method_keywords(rng):
    g = _grid()
    im = _image(rng)
    a, b = ca.Image3D(g), ca.Image3D(g)
    filt = ca.GaussianFilter()
    filt.updateParams(g.size(), sigma=ca.Vec3Df(1.0, 1.0, 1.0), kRadius=ca.Vec3Di(2, 2, 2))
    filt.filter(a, im)
    filt.filter(out=b, in_=im)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert tuple(ca.Vec3Df(x=1, y=2.5, z=3)) == (1.0, 2.5, 3.0)
    assert im.clone(mem=ca.MEM_HOST).memType() == ca.MEM_HOST


def test_unknown_keyword_is_one_line():
    g = _grid()
    im = ca.Image3D(g)
    with pytest.raises(TypeError) as e:
        ca.ApplyH(im, im, ca.Field3D(g), background=ca.BACKGROUND_STRATEGY_ZERO)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("ApplyH") and "background=" in msg and "bg: BackgroundStrategy" in msg


def test_signatures_are_visible():
    sig = inspect.signature(ca.ApplyH)
    assert list(sig.parameters) == ["out", "im", "h", "bg", "interp", "bgVal"]
    assert sig.parameters["bg"].default is ca.BACKGROUND_STRATEGY_CLAMP
    assert sig.parameters["bgVal"].default == 0.0
    assert "ApplyH(out: Field3D, src: Field3D" in ca.ApplyH.__doc__  # every overload in help()
    assert list(inspect.signature(ca.GaussianFilter.filter).parameters) == ["self", "out", "in_", "tmp"]
    assert list(inspect.signature(ca.GaussianFilter().updateParams).parameters) == ["size", "sigma", "kRadius"]
    for op in registry.ops(builtin=True):
        params = inspect.signature(op.call).parameters.values()
        assert not any(p.kind == p.VAR_POSITIONAL for p in params), op.name
        assert [p.name for p in params] == [p.name.replace("in", "in_") if p.name == "in" else p.name
                                            for p in op.overloads[0].params], op.name


# ---- enumerations
def test_enums_print_their_names_and_stay_ints():
    assert str(ca.MEM_HOST) == "MEM_HOST" and f"{ca.BACKGROUND_STRATEGY_ZERO}" == "BACKGROUND_STRATEGY_ZERO"
    assert repr(ca.INTERP_CUBIC) == "InterpT.INTERP_CUBIC"
    assert ca.MEM_HOST == 1 and isinstance(ca.MEM_HOST, int) and ca.MemoryType(1) is ca.MEM_HOST
    assert ca.MEM_DEVICE > ca.MEM_HOST and {1: "host"}[ca.MEM_HOST] == "host"
    assert f"{ca.MEM_DEVICE:d}" == "3"
    assert ca.DEFAULT_INTERP_METHOD is ca.INTERP_LINEAR
    assert pickle.loads(pickle.dumps(ca.DIFF_CENTRAL)) is ca.DIFF_CENTRAL
    im = ca.Image3D(_grid(), 1)  # a PyCA script passing the int
    assert im.memType() is ca.MEM_HOST and str(im.memType()) == "MEM_HOST"
    assert [m.name for m in ca.BoundaryCondT] == ["BC_APPROX", "BC_WRAP", "BC_CLAMP"]


def test_enum_arguments_take_ints(rng):
    g = _grid()
    im, h = _image(rng), _shifted_h(g, 3.0)
    a, b = ca.Image3D(g), ca.Image3D(g)
    ca.ApplyH(a, im, h, int(ca.BACKGROUND_STRATEGY_ZERO))
    ca.ApplyH(b, im, h, ca.BACKGROUND_STRATEGY_ZERO)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# ---- one-line overload errors
def test_wrong_overload_is_one_line_naming_the_argument():
    g = _grid()
    out, a = ca.Image3D(g), ca.Image3D(g)
    with pytest.raises(TypeError) as e:
        ca.Add(out, a, "2")
    msg = str(e.value)
    assert "\n" not in msg, msg
    assert msg.startswith("Add: no overload takes (Image3D, Image3D, str '2')"), msg
    assert "argument 3 ('b') must be Image3D or float, not str '2'" in msg
    assert "Add(out: Image3D, a: Image3D, b: Image3D)" in msg  # what is accepted
    with pytest.raises(TypeError) as e:
        ca.GaussianFilter().filter(out, "x")
    assert "\n" not in str(e.value) and "GaussianFilter.filter" in str(e.value) and "('in_')" in str(e.value)
    with pytest.raises(TypeError) as e:
        ca.Vec3Df(1.0, "y", 3.0)
    assert "\n" not in str(e.value) and "argument 2 ('y') must be float" in str(e.value)


# ---- indexing
def test_indexing_host_images(rng):
    im = _image(rng)
    a = np.asarray(im)
    assert im[1, 2, 3] == a[1, 2, 3] and isinstance(im[1, 2, 3], np.float32)
    view = im[1:4, :, 2]
    assert view.shape == (3, 5) and np.shares_memory(view, a)
    view[...] = -1.0
    assert np.all(a[1:4, :, 2] == -1.0)
    im[0, 0, 0] = 7.0
    assert a[0, 0, 0] == 7.0
    fancy = im[[0, 1], 0, 0]  # advanced indexing copies, as in NumPy
    assert not np.shares_memory(fancy, a)
    with pytest.raises(IndexError):
        im[6, 0, 0]


def test_indexing_host_fields(rng):
    f = ca.Field3D.from_array(np.asfortranarray(rng.random((6, 5, 4, 3), dtype=np.float32)))
    a = np.asarray(f)
    assert f[1, 2, 3].shape == (3,) and np.array_equal(f[1, 2, 3], a[1, 2, 3, :])  # (vx, vy, vz)
    vx, vy, vz = f.asnp()
    assert np.shares_memory(f[..., 1], vy) and np.array_equal(f[..., 2], vz)
    f[2, 2, 2] = (1.0, 2.0, 3.0)
    assert (vx[2, 2, 2], vy[2, 2, 2], vz[2, 2, 2]) == (1.0, 2.0, 3.0)


def test_indexing_device_objects_says_how_to_move(monkeypatch):
    im = ca.Image3D(_grid())
    monkeypatch.setattr(ca.Image3D, "is_on_device", property(lambda self: True))
    with pytest.raises(TypeError) as e:
        im[0, 0, 0]
    assert "\n" not in str(e.value) and "obj.to(pyca.MEM_HOST)" in str(e.value)
    with pytest.raises(TypeError):
        im[0, 0, 0] = 1.0


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
def test_indexing_real_device_object():
    im = ca.Image3D(_grid(), ca.MEM_DEVICE)
    with pytest.raises(TypeError, match=r"to\(pyca.MEM_HOST\)"):
        im[0, 0, 0]


# ---- from_array with spacing and origin
def test_from_array_spacing_origin(rng):
    a = np.asfortranarray(rng.random((6, 5, 4), dtype=np.float32))
    im = ca.Image3D.from_array(a, spacing=(1.0, 2.0, 2.5), origin=(-3, 0, 4))
    assert tuple(im.spacing()) == (1.0, 2.0, 2.5) and tuple(im.origin()) == (-3.0, 0.0, 4.0)
    assert np.shares_memory(np.asarray(im), a)
    f = ca.Field3D.from_array(np.zeros((6, 5, 3), np.float32), spacing=0.5)
    assert tuple(f.size()) == (6, 5, 1) and tuple(f.spacing()) == (0.5, 0.5, 0.5) and tuple(f.origin()) == (0, 0, 0)
    with pytest.raises(TypeError, match="not both"):
        ca.Image3D.from_array(a, ca.GridInfo((6, 5, 4)), spacing=2.0)
    with pytest.raises(ValueError, match="spacing"):
        ca.Image3D.from_array(a, spacing=(1.0, 0.0, 1.0))
