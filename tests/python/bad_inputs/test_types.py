"""Bad inputs, types (issue 19): NumPy scalars are accepted wherever Python numbers are, and a
wrong-type call raises one TypeError line that names the operation and the argument, with every
input unchanged."""
from __future__ import annotations

import numpy as np
import pytest

import pyca as ca


def _image(rng, shape=(5, 4, 3)):
    return ca.Image3D.from_array(np.asfortranarray(rng.random(shape, dtype=np.float32)))


@pytest.mark.parametrize("scalar", [np.float32(2), np.float64(2), np.int64(2), np.int32(2), np.uint8(2)],
                         ids=lambda s: type(s).__name__)
def test_numpy_scalars_where_numbers_are(rng, scalar):
    a = _image(rng)
    before = np.array(a)
    out = ca.Image3D(a.grid())
    ca.AddC(out, a, scalar)
    np.testing.assert_allclose(np.asarray(out), before + 2, rtol=1e-6)
    ca.MulC(out, a, scalar)
    np.testing.assert_allclose(np.asarray(out), before * 2, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(a), before)  # input unchanged


def test_numpy_scalars_issue_examples(rng):
    a = _image(rng)
    out = ca.Image3D(a.grid())
    ca.AddC(out, a, np.float32(2))
    np.testing.assert_allclose(np.asarray(out), np.asarray(a) + 2, rtol=1e-6)
    ca.MulC(out, a, np.int64(3))
    np.testing.assert_allclose(np.asarray(out), np.asarray(a) * 3, rtol=1e-6)


def test_numpy_scalars_for_ints_enums_fields_and_methods(rng):
    g = ca.GridInfo((5, 4, 3))
    f = ca.Field3D.from_array(np.asfortranarray(rng.random((5, 4, 3, 3), dtype=np.float32)))
    comp = ca.Image3D(g)
    ca.Copy(comp, f, np.int64(1))  # an int argument
    np.testing.assert_array_equal(np.asarray(comp), np.asarray(f)[..., 1])
    fo = ca.Field3D(g)
    ca.AddC(fo, f, np.float32(0.5))
    np.testing.assert_allclose(np.asarray(fo), np.asarray(f) + 0.5, rtol=1e-6)
    h = ca.Field3D(g)
    ca.SetToIdentity(h)
    out_np, out_py = ca.Image3D(g), ca.Image3D(g)
    ca.ApplyH(out_np, comp, h, np.int64(3), bgVal=np.float32(1.5))  # an enum argument
    ca.ApplyH(out_py, comp, h, ca.BACKGROUND_STRATEGY_ZERO, bgVal=1.5)
    np.testing.assert_array_equal(np.asarray(out_np), np.asarray(out_py))
    comp.fill(np.float32(4))
    assert np.all(np.asarray(comp) == 4)
    assert ca.Vec3Df(np.float32(1), np.int64(2), 3.0).tolist() == [1.0, 2.0, 3.0]


def test_integral_arguments_refuse_fractions(rng):
    f = ca.Field3D(ca.GridInfo((5, 4, 3)))
    comp = ca.Image3D(f.grid())
    with pytest.raises(TypeError, match=r"argument 3 \('dim'\)"):
        ca.Copy(comp, f, np.float32(1.5))


@pytest.mark.parametrize("mem", ["MEM_HOST", 1.5, None.__class__, "1"], ids=["name", "float", "type", "digit"])
def test_image3d_wrong_mem_names_the_argument(mem):
    g = ca.GridInfo((5, 4, 3))
    for cls in (ca.Image3D, ca.Field3D):
        with pytest.raises(TypeError) as e:
            cls(g, mem)
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(cls.__name__) and "argument 2 ('mem')" in msg, msg
        assert "MemoryType" in msg and "pyca.MEM_HOST" in msg
    assert tuple(g.size()) == (5, 4, 3)


def test_image3d_wrong_grid_names_the_argument():
    with pytest.raises(TypeError, match=r"Image3D: argument 1 \('grid'\) must be a pyca.GridInfo"):
        ca.Image3D("grid")


def test_wrong_type_names_operation_and_argument_inputs_unchanged(rng):
    a = _image(rng)
    out = ca.Image3D(a.grid())
    out.fill(9.0)
    before_a = np.array(a)
    with pytest.raises(TypeError) as e:
        ca.AddC(out, a, "2")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("AddC:") and "argument 3 ('b')" in msg and "str '2'" in msg, msg
    np.testing.assert_array_equal(np.asarray(a), before_a)
    assert np.all(np.asarray(out) == 9.0)
    with pytest.raises(TypeError) as e:
        ca.MulC(out, [1, 2], 3.0)
    assert "argument 2 ('a') must be Image3D, not list" in str(e.value), str(e.value)
