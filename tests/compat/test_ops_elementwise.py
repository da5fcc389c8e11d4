"""PyCA's voxel-wise operations against NumPy: unary functions, PowC, comparisons, masked forms,
two-operand helpers and the fused forms (Add_Mul, Sub_Mul, Add_MulC, ...), on a 2-D grid with
anisotropic spacing and a 3-D grid, plain, in place (_I) and masked."""
import numpy as np
import pytest

import pyca as ca
from compat_helpers import both_memory, field, grids, image, make_grid, rand


def _round(a):  # half-way cases away from zero
    return np.sign(a) * np.floor(np.abs(a) + 0.5)


# name: (NumPy reference, input range, has a masked form, has a Field3D form)
UNARY = {
    "Abs": (np.abs, (-2, 2), True, True),
    "Cube": (lambda a: a ** 3, (-2, 2), True, False),
    "Exp": (np.exp, (-2, 2), True, False),
    "Log": (np.log, (0.1, 3), True, False),
    "Neg": (np.negative, (-2, 2), True, True),
    "Ramp": (lambda a: np.maximum(a, 0), (-2, 2), True, False),
    "Sgn": (np.sign, (-2, 2), True, False),
    "Step": (lambda a: np.heaviside(a, 0.5), (-2, 2), True, False),
    "Sqr": (np.square, (-2, 2), True, True),
    "Sqrt": (np.sqrt, (0, 3), True, True),
    "Inv": (lambda a: 1.0 / a, (0.5, 3), True, False),
    "Ceil": (np.ceil, (-3, 3), True, False),
    "Floor": (np.floor, (-3, 3), True, False),
    "Round": (_round, (-3, 3), True, False),
    "Sin": (np.sin, (-3, 3), True, False),
    "Asin": (np.arcsin, (-0.95, 0.95), True, False),
    "Cos": (np.cos, (-3, 3), True, False),
    "Acos": (np.arccos, (-0.95, 0.95), True, False),
    "Tan": (np.tan, (-1.2, 1.2), True, False),
    "Atan": (np.arctan, (-3, 3), True, False),
    "Csc": (lambda a: 1.0 / np.sin(a), (0.2, 1.4), True, False),
    "Sec": (lambda a: 1.0 / np.cos(a), (-1.2, 1.2), True, False),
    "Cot": (lambda a: 1.0 / np.tan(a), (0.2, 1.4), True, False),
}


def _mask(grid, rng):
    return (rng.uniform(size=tuple(grid.size())) > 0.5).astype(np.float64)


@grids
@pytest.mark.parametrize("name", list(UNARY))
@both_memory(rtol=2e-6, atol=1e-6)
def test_unary(name, gid, mem):
    ref, (lo, hi), masked, has_field = UNARY[name]
    g = make_grid(gid)
    rng = np.random.default_rng(11)
    A = rand(g, rng, lo, hi)
    if name in ("Sgn", "Step", "Round"):  # exact zeros and half-way points
        A.flat[:4] = [0.0, 0.5, -0.5, 2.5]
    a = image(A, g, mem)
    out = ca.Image3D(g, mem)
    getattr(ca, name)(out, a)
    np.testing.assert_allclose(out.numpy(), ref(A), rtol=2e-6, atol=1e-6)
    np.testing.assert_array_equal(a.numpy(), A.astype(np.float32))  # input unchanged
    b = a.copy()
    getattr(ca, name + "_I")(b)
    np.testing.assert_allclose(b.numpy(), ref(A), rtol=2e-6, atol=1e-6)
    results = [out]
    if masked:
        M = _mask(g, rng)
        m = image(M, g, mem)
        mo = image(np.full(A.shape, 9.0), g, mem)
        getattr(ca, name)(mo, a, m)
        np.testing.assert_allclose(mo.numpy(), np.where(M != 0, ref(A), 9.0), rtol=2e-6, atol=1e-6)
        mi = a.copy()
        getattr(ca, name + "_I")(mi, m)
        np.testing.assert_allclose(mi.numpy(), np.where(M != 0, ref(A), A), rtol=2e-6, atol=1e-6)
        results.append(mo)
    if has_field:
        F = rand(g, rng, lo, hi, ncomp=3)
        f = field(F, g, mem)
        fo = ca.Field3D(g, mem)
        getattr(ca, name)(fo, f)
        np.testing.assert_allclose(fo.numpy(), ref(F), rtol=2e-6, atol=1e-6)
        getattr(ca, name + "_I")(f)
        np.testing.assert_allclose(f.numpy(), ref(F), rtol=2e-6, atol=1e-6)
        results.append(fo)
    return results


COMPARE = {"GT": np.greater, "GTE": np.greater_equal, "LT": np.less, "LTE": np.less_equal,
           "EQ": np.equal, "NEQ": np.not_equal}


@grids
@pytest.mark.parametrize("name", list(COMPARE))
@both_memory()
def test_comparisons(name, gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(12)
    # small integers so that equality happens
    A = rng.integers(-2, 3, tuple(g.size())).astype(np.float64)
    B = rng.integers(-2, 3, tuple(g.size())).astype(np.float64)
    c = 1.0
    cmp = COMPARE[name]
    a, b = image(A, g, mem), image(B, g, mem)
    out = ca.Image3D(g, mem)
    getattr(ca, name)(out, a, b)
    np.testing.assert_array_equal(out.numpy(), cmp(A, B).astype(np.float32))
    getattr(ca, name)(out, a, c)
    np.testing.assert_array_equal(out.numpy(), cmp(A, c).astype(np.float32))
    getattr(ca, name + "C")(out, a, c)
    np.testing.assert_array_equal(out.numpy(), cmp(A, c).astype(np.float32))
    x = a.copy()
    getattr(ca, name + "_I")(x, b)
    np.testing.assert_array_equal(x.numpy(), cmp(A, B).astype(np.float32))
    x = a.copy()
    getattr(ca, name + "C_I")(x, c)
    np.testing.assert_array_equal(x.numpy(), cmp(A, c).astype(np.float32))
    M = _mask(g, rng)
    m = image(M, g, mem)
    mo = image(np.full(A.shape, 7.0), g, mem)
    getattr(ca, name)(mo, a, b, m)
    np.testing.assert_array_equal(mo.numpy(), np.where(M != 0, cmp(A, B), 7.0).astype(np.float32))
    x = a.copy()
    getattr(ca, name + "C_I")(x, c, m)
    np.testing.assert_array_equal(x.numpy(), np.where(M != 0, cmp(A, c), A).astype(np.float32))
    return out, mo


# name: (reference f(a, b) with b an image or a constant, range of a, range of b, constant)
TWO = {
    "Atan2": (np.arctan2, (-2, 2), (-2, 2), -0.5),
    "PowC": (np.power, (0.1, 2), None, 1.7),
    "AbsDiff": (lambda a, b: np.abs(a - b), (-2, 2), (-2, 2), None),
    "SqrDiff": (lambda a, b: (a - b) ** 2, (-2, 2), (-2, 2), None),
    "SoftAbs": (lambda a, e: np.where(np.abs(a) > e, np.abs(a) - e / 2, a * a / (2 * e)), (-2, 2), None, 0.7),
    "SoftSgn": (lambda a, e: np.where(np.abs(a) > e, np.sign(a), a / e), (-2, 2), None, 0.7),
    "Shrink": (lambda a, c: np.sign(a) * np.maximum(np.abs(a) - c, 0), (-2, 2), None, 0.7),
}


@grids
@pytest.mark.parametrize("name", list(TWO))
@both_memory(rtol=2e-6, atol=2e-6)
def test_two_operand_helpers(name, gid, mem):
    ref, ra, rb, c = TWO[name]
    g = make_grid(gid)
    rng = np.random.default_rng(13)
    A = rand(g, rng, *ra)
    a = image(A, g, mem)
    out = ca.Image3D(g, mem)
    operand = c if rb is None else None
    if rb is not None:
        B = rand(g, rng, *rb)
        operand = image(B, g, mem)
        want = ref(A, B)
    else:
        want = ref(A, c)
    getattr(ca, name)(out, a, operand)
    np.testing.assert_allclose(out.numpy(), want, rtol=2e-6, atol=2e-6)
    getattr(ca, name + "_I")(a, operand)
    np.testing.assert_allclose(a.numpy(), want, rtol=2e-6, atol=2e-6)
    if name == "Atan2":  # constant forms
        a = image(A, g, mem)
        ca.Atan2C(out, a, c)
        np.testing.assert_allclose(out.numpy(), np.arctan2(A, c), rtol=2e-6, atol=2e-6)
        ca.Atan2C_I(a, c)
        np.testing.assert_allclose(a.numpy(), np.arctan2(A, c), rtol=2e-6, atol=2e-6)
    return out


@both_memory()
def test_clamp(mem):
    g = make_grid("2d")
    A = rand(g, np.random.default_rng(14), -3, 3)
    a, out = image(A, g, mem), ca.Image3D(g, mem)
    ca.Clamp(out, a, -1.0, 0.5)
    np.testing.assert_array_equal(out.numpy(), np.clip(A, -1.0, 0.5).astype(np.float32))
    ca.Clamp_I(a, -1.0, 0.5)
    np.testing.assert_array_equal(a.numpy(), out.numpy())
    return out


# Fused forms: name -> (reference on the operands in argument order, operand kinds)
# kinds: i = Image3D, f = Field3D, c = float, v = Vec3Df
FUSED = {
    "MulMulC": [(lambda a, b, c: a * b * c, "iic"), (lambda a, b, c: a * b * c, "ffc"),
                (lambda a, b, c: a * b * c, "fic")],
    "MulMul": [(lambda a, b, c: a * b * c, "iii")],
    "MulAdd": [(lambda a, b, c: a * b + c, "iii")],
    "MulSub": [(lambda a, b, c: a * b - c, "iii")],
    "AddMul": [(lambda a, b, c: (a + b) * c, "iii")],
    "AddDiv": [(lambda a, b, c: (a + b) / c, "iii")],
    "SubMul": [(lambda a, b, c: (a - b) * c, "iii")],
    "SubDiv": [(lambda a, b, c: (a - b) / c, "iii")],
    "MulCAdd": [(lambda a, c, b: a * c + b, "ici"), (lambda a, c, b: a * c + b, "fcf")],
    "MulCSub": [(lambda a, c, b: a * c - b, "ici"), (lambda a, c, b: a * c - b, "fcf")],
    "MulCAddC": [(lambda a, b, c: a * b + c, "icc"), (lambda a, b, c: a * b + c, "fvv")],
    "AddMulC": [(lambda a, b, c: (a + b) * c, "iic"), (lambda a, b, c: (a + b) * c, "ffc")],
    "SubMulC": [(lambda a, b, c: (a - b) * c, "iic"), (lambda a, b, c: (a - b) * c, "ffc")],
    "AddCMulC": [(lambda a, b, c: (a + b) * c, "icc"), (lambda a, b, c: (a + b) * c, "fvv")],
    "Add_MulC": [(lambda a, b, c: a + b * c, "iic"), (lambda a, b, c: a + b * c, "ffc")],
    "Add_Mul": [(lambda a, b, c: a + b * c, "iii"), (lambda a, b, c: a + b * c, "ffi")],
    "Sub_Mul": [(lambda a, b, c: a - b * c, "iii"), (lambda a, b, c: a - b * c, "ffi")],
    "Add_AddMulC": [(lambda a, b, c, d: a + (b + c) * d, "iiic")],
    "Add_SubMulC": [(lambda a, b, c, d: a + (b - c) * d, "iiic")],
    "Add_MulMulC": [(lambda a, b, c, d: a + b * c * d, "iiic"), (lambda a, b, c, d: a + b * c * d, "fffc"),
                    (lambda a, b, c, d: a + b * c * d, "ffic")],
    "Sub_AddMulC": [(lambda a, b, c, d: a - (b + c) * d, "iiic")],
    "Sub_SubMulC": [(lambda a, b, c, d: a - (b - c) * d, "iiic")],
    "Sub_MulMulC": [(lambda a, b, c, d: a - b * c * d, "iiic"), (lambda a, b, c, d: a - b * c * d, "fffc")],
    "MulC_Add_MulC": [(lambda a, b, c, d: a * b + c * d, "icic"), (lambda a, b, c, d: a * b + c * d, "fcfc")],
    "AddCMulCAddC": [(lambda a, b, c, d: (a + b) * c + d, "iccc"), (lambda a, b, c, d: (a + b) * c + d, "fccc"),
                     (lambda a, b, c, d: (a + b) * c + d, "fvvv")],
}
FUSED_CASES = [pytest.param(n, i, id=f"{n}-{kinds}") for n, forms in FUSED.items() for i, (_, kinds) in
               enumerate(forms)]


@grids
@pytest.mark.parametrize("name, k", FUSED_CASES)
@both_memory(rtol=1e-5, atol=1e-5)
def test_fused(name, k, gid, mem):
    ref, kinds = FUSED[name][k]
    g = make_grid(gid)
    rng = np.random.default_rng(15)
    consts = iter([1.5, -0.75, 2.25])
    vecs = iter([ca.Vec3Df(1.5, -0.5, 2.0), ca.Vec3Df(0.25, 2.0, -1.0), ca.Vec3Df(-1.0, 0.5, 3.0)])
    args, vals = [], []
    for kind in kinds:
        if kind in "if":
            X = rand(g, rng, 0.5, 2.0, ncomp=3 if kind == "f" else 1)
            args.append(field(X, g, mem) if kind == "f" else image(X, g, mem))
            vals.append(X)
        elif kind == "c":
            c = next(consts)
            args.append(c)
            vals.append(c)
        else:
            v = next(vecs)
            args.append(v)
            vals.append(np.array(v.tolist()))
    if kinds[0] == "f":  # an image operand of a field operation applies to every component
        vals = [v[..., None] if isinstance(v, np.ndarray) and v.ndim == 3 else v for v in vals]
    want = ref(*vals)
    out = (ca.Field3D if kinds[0] == "f" else ca.Image3D)(g, mem)
    getattr(ca, name)(out, *args)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5, err_msg=name)
    getattr(ca, name + "_I")(*args)
    np.testing.assert_allclose(args[0].numpy(), want, rtol=1e-5, atol=1e-5, err_msg=name + "_I")
    return out
