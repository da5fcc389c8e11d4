"""Python operators on Image3D / Field3D (pyca/_operators.py): results, types, memory types, errors.
The full PyCA operand table is tests/compat/test_binary_table.py."""
import numpy as np
import pytest

import pyca as ca

needs_gpu = pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
GRIDS = [ca.GridInfo((17, 23, 31), (1.5, 1.0, 2.0), (0.5, -1.0, 2.0)), ca.GridInfo((31, 33, 1), (1.5, 2.1, 1.0))]


def _image(g, arr, mem=ca.MEM_HOST):
    im = ca.Image3D.from_array(np.asfortranarray(arr, dtype=np.float32), g)
    return im if mem == ca.MEM_HOST else im.clone(mem)


def _field(g, arr, mem=ca.MEM_HOST):
    f = ca.Field3D.from_array(np.asfortranarray(arr, dtype=np.float32), g)
    return f if mem == ca.MEM_HOST else f.clone(mem)


@pytest.mark.parametrize("g", GRIDS, ids=["3d", "2d"])
def test_results_are_new_objects_on_the_left_grid(g, rng):
    A = rng.uniform(1, 2, g.shape).astype(np.float32).astype(float)
    F = rng.uniform(1, 2, g.shape + (3,)).astype(np.float32).astype(float)
    a, f = _image(g, A), _field(g, F)
    for res, ref in [(a + a, A + A), (a - 1, A - 1), (2 * a, 2 * A), (a / a, A / A), (1 - a, 1 - A), (3 / a, 3 / A)]:
        assert type(res) is ca.Image3D and res.grid() == g and res is not a
        np.testing.assert_allclose(res.numpy(), ref, rtol=1e-6, atol=1e-6)
    for res, ref in [(f * a, F * A[..., None]), (a * f, F * A[..., None]), (a - f, A[..., None] - F),
                     (a / f, A[..., None] / F), (f / a, F / A[..., None]), (f + ca.Vec3Df(1, 2, 3), F + [1, 2, 3]),
                     (ca.Vec3Di(1, 2, 3) - f, [1, 2, 3] - F), (2.0 / f, 2.0 / F), (f - 0.5, F - 0.5)]:
        assert type(res) is ca.Field3D and res.grid() == g
        np.testing.assert_allclose(res.numpy(), ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(a.numpy(), A.astype(np.float32))  # operands unchanged
    np.testing.assert_array_equal(f.numpy(), F.astype(np.float32))


def test_in_place_forms_keep_the_object(rng):
    g = GRIDS[1]
    A, F = rng.uniform(1, 2, g.shape), rng.uniform(1, 2, g.shape + (3,))
    a, f = _image(g, A), _field(g, F)
    view = a.asnp()
    a0, f0 = a, f
    a += 1.0
    a *= a
    a -= _image(g, A)
    a /= 2
    f *= _image(g, A)
    f -= ca.Vec3Df(1, 0, -1)
    f /= f0.copy()
    assert a is a0 and f is f0
    np.testing.assert_allclose(view, ((A + 1) ** 2 - A) / 2, rtol=1e-6)  # the same memory
    np.testing.assert_allclose(f.numpy(), np.ones(F.shape), rtol=1e-6)


def test_errors():
    g = GRIDS[1]
    a, f = ca.Image3D(g), ca.Field3D(g)
    other = ca.Image3D(ca.GridInfo((3, 3, 3)))
    with pytest.raises(TypeError):
        a + ca.Vec3Df(1, 2, 3)
    with pytest.raises(TypeError):
        a + "x"
    with pytest.raises(TypeError):
        a += f
    for arr in (np.zeros(g.shape), [1.0, 2.0]):  # not operands (NumPy arithmetic: np.asarray(a) + arr)
        with pytest.raises(TypeError, match="np.asarray"):
            a + arr
        with pytest.raises(TypeError):
            arr * a
        with pytest.raises(TypeError, match="np.asarray"):
            f -= arr
    with pytest.raises(ValueError, match="Add"):
        a + other  # sizes differ: the operation's own check


def test_numpy_scalars_defer_to_pyca():
    g = GRIDS[1]
    a = ca.Image3D(g)
    a.fill(2.0)
    for s in (np.float32(4), np.float64(4), np.int32(4)):
        for res in (s * a, s + a, s - a, s / a):
            assert isinstance(res, ca.Image3D)
    assert ca.Max(np.float32(4) / a) == 2.0


def test_operators_are_methods_of_both_classes():
    for cls in (ca.Image3D, ca.Field3D):
        for name in ("add", "sub", "mul", "truediv"):
            for form in (f"__{name}__", f"__r{name}__", f"__i{name}__"):
                assert callable(getattr(cls, form)), (cls, form)
    g = GRIDS[1]
    a = ca.Image3D(g)
    a.fill(1.0)
    assert ca.Max(a + a) == 2.0
    assert ca.Image3D.__add__.__doc__ and "memory type" in ca.Image3D.__add__.__doc__


@needs_gpu
@pytest.mark.parametrize("left, right", [(ca.MEM_HOST, ca.MEM_DEVICE), (ca.MEM_DEVICE, ca.MEM_HOST)])
def test_result_in_left_operands_memory(left, right, rng):
    g = GRIDS[0]
    A, B = rng.uniform(1, 2, g.shape), rng.uniform(1, 2, g.shape)
    F = rng.uniform(1, 2, g.shape + (3,))
    a, b, f = _image(g, A, left), _image(g, B, right), _field(g, F, right)
    for res, ref in [(a + b, A + B), (a * f, A[..., None] * F), (a / b, A / B)]:
        assert res.memType() == left
        np.testing.assert_allclose(res.numpy(), ref, rtol=1e-6)
    assert b.memType() == right and f.memType() == right  # the right operand is not moved
    a += b
    assert a.memType() == left
    np.testing.assert_allclose(a.numpy(), A + B, rtol=1e-6)
