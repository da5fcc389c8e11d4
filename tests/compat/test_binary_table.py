"""PyCA's binary-operation table: every binary op in function, _I, C, C_I and Python-operator form,
for Image3D and Field3D left operands and Image3D, Field3D, Vec3Df, Vec3Di, int and float right
operands, against NumPy. Unsupported combinations must raise TypeError."""
import numpy as np
import pytest

import pyca as ca
from compat_helpers import both_memory, field, image, make_grid

OPS = {
    "Add": (np.add, "+"),
    "Sub": (np.subtract, "-"),
    "Mul": (np.multiply, "*"),
    "Div": (np.divide, "/"),
    "Max": (np.maximum, None),
    "Min": (np.minimum, None),
}
RIGHT = ["image", "field", "vec3df", "vec3di", "int", "float"]
CONSTS = {"vec3df": ca.Vec3Df(1.5, -2.0, 0.5), "vec3di": ca.Vec3Di(2, -3, 1), "int": 3, "float": -2.5}

# Forms valid for (left, right): func = Op(out, a, b), I = Op_I(a, b), C = OpC(out, a, c),
# C_I = OpC_I(a, c), op = a OP b, rop = b OP a (the reflected operator), iop = a OP= b.
VALID = {
    ("image", "image"): ["func", "I", "op", "iop"],
    ("image", "field"): ["op"],  # a Field3D result; field OP image is the (field, image) row
    ("image", "int"): ["func", "I", "C", "C_I", "op", "rop", "iop"],
    ("image", "float"): ["func", "I", "C", "C_I", "op", "rop", "iop"],
    ("field", "image"): ["func", "I", "op", "rop", "iop"],
    ("field", "field"): ["func", "I", "op", "iop"],
    ("field", "vec3df"): ["C", "C_I", "op", "rop", "iop"],
    ("field", "vec3di"): ["C", "C_I", "op", "rop", "iop"],
    ("field", "int"): ["C", "C_I", "op", "rop", "iop"],
    ("field", "float"): ["C", "C_I", "op", "rop", "iop"],
}
INVALID_OPERATORS = [("image", "vec3df"), ("image", "vec3di")]


def _cases():
    for name, (_, sym) in OPS.items():
        for (left, right), forms in VALID.items():
            for form in forms:
                if sym is None and form in ("op", "rop", "iop"):
                    continue
                yield pytest.param(name, left, right, form, id=f"{name}-{left}-{right}-{form}")


def _operands(left, right, gid, mem, rng):
    g = make_grid(gid)
    shape = tuple(g.size())
    # values away from 0 so that every division is well conditioned
    sgn = lambda s: np.where(rng.uniform(size=s) < 0.5, -1.0, 1.0)  # noqa: E731
    ashape = shape + ((3,) if left == "field" else ())
    A = (rng.uniform(0.5, 2.0, ashape) * sgn(ashape)).astype(np.float32)
    a = field(A, g, mem) if left == "field" else image(A, g, mem)
    if right in ("image", "field"):
        bshape = shape + ((3,) if right == "field" else ())
        B = (rng.uniform(0.5, 2.0, bshape) * sgn(bshape)).astype(np.float32)
        b = field(B, g, mem) if right == "field" else image(B, g, mem)
        Bb = B if right == "field" or left == "image" else B[..., None]
    else:
        b = CONSTS[right]
        Bb = np.array(b.tolist(), dtype=np.float32) if right.startswith("vec") else np.float32(b)
    Ab = A[..., None] if (left == "image" and right == "field") else A
    return g, a, b, Ab.astype(np.float64), np.asarray(Bb, dtype=np.float64)


@pytest.mark.parametrize("gid", ["2d", "3d"])
@pytest.mark.parametrize("name, left, right, form", list(_cases()))
@both_memory(rtol=1e-6, atol=1e-6)
def test_binary_table(name, left, right, form, gid, mem):
    rng = np.random.default_rng(7)
    g, a, b, A, B = _operands(left, right, gid, mem, rng)
    fn, sym = OPS[name]
    a_before = a.numpy()
    cls = ca.Field3D if "field" in (left, right) else ca.Image3D
    if form == "func":
        res = cls(g, mem)
        getattr(ca, name)(res, a, b)
    elif form == "I":
        getattr(ca, name + "_I")(a, b)
        res = a
    elif form == "C":
        res = cls(g, mem)
        getattr(ca, name + "C")(res, a, b)
    elif form == "C_I":
        getattr(ca, name + "C_I")(a, b)
        res = a
    elif form == "op":
        res = eval(f"a {sym} b")
    elif form == "rop":
        res = eval(f"b {sym} a")
    else:  # iop
        keep = a
        exec(f"a {sym}= b", {}, loc := {"a": a, "b": b})
        res = loc["a"]
        assert res is keep  # in place: the same object
    ref = fn(B, A) if form == "rop" else fn(A, B)
    assert isinstance(res, cls) and res.memType() == mem and res.grid() == g
    np.testing.assert_allclose(res.numpy(), ref, rtol=2e-6, atol=1e-6, err_msg=f"{name} {form}")
    if form in ("func", "C", "op", "rop"):  # inputs unchanged
        np.testing.assert_array_equal(a.numpy(), a_before)
    return res


@pytest.mark.parametrize("left, right", INVALID_OPERATORS)
@pytest.mark.parametrize("sym", ["+", "-", "*", "/"])
def test_image_with_vec3_is_a_type_error(left, right, sym):
    g = make_grid("2d")
    a = ca.Image3D(g, ca.MEM_HOST)
    b = CONSTS[right]
    with pytest.raises(TypeError):
        eval(f"a {sym} b")
    with pytest.raises(TypeError):
        eval(f"b {sym} a")
    with pytest.raises(TypeError):
        exec(f"a {sym}= b", {}, {"a": a, "b": b})


@pytest.mark.parametrize("sym", ["+", "-", "*", "/"])
def test_image_in_place_with_field_is_a_type_error(sym):
    g = make_grid("2d")
    a, f = ca.Image3D(g, ca.MEM_HOST), ca.Field3D(g, ca.MEM_HOST)
    ca.SetMem(a, 1.0)
    ca.SetMem(f, 2.0)
    with pytest.raises(TypeError):
        exec(f"a {sym}= f", {}, {"a": a, "f": f})
    assert ca.Max(a) == 1.0 and ca.Min(a) == 1.0  # unchanged


@both_memory(rtol=1e-6, atol=1e-6)
def test_unary_operators(mem):
    g = make_grid("3d")
    rng = np.random.default_rng(1)
    A = rng.uniform(-2, 2, tuple(g.size())).astype(np.float32)
    F = rng.uniform(-2, 2, tuple(g.size()) + (3,)).astype(np.float32)
    a, f = image(A, g, mem), field(F, g, mem)
    for obj, ref in ((-a, -A), (+a, A), (abs(a), np.abs(A)), (-f, -F), (+f, F), (abs(f), np.abs(F))):
        assert obj.memType() == mem
        np.testing.assert_array_equal(obj.numpy(), ref)
    pos = +a
    ca.SetMem(pos, 0.0)  # +a is a copy
    np.testing.assert_array_equal(a.numpy(), A)
    return -a, abs(f)


def test_numpy_scalars_and_sum():
    g = make_grid("2d")
    a = ca.Image3D(g, ca.MEM_HOST)
    ca.SetMem(a, 2.0)
    for s in (np.float32(3.0), np.float64(3.0), np.int64(3)):
        for res in (a * s, s * a, s - a, s / a, a + s):
            assert isinstance(res, ca.Image3D)
        assert ca.Max(s * a) == 6.0 and ca.Max(s - a) == 1.0 and ca.Max(s / a) == 1.5
    total = sum([a, a, a])  # 0 + a + a + a
    assert isinstance(total, ca.Image3D) and ca.Max(total) == 6.0
