"""The `arithmetic` family against independent NumPy references (docs/operations/arithmetic.md).

Each operation runs on host memory, and on device memory when a GPU is usable, on an odd 3-D grid
and a 2-D grid. References are NumPy in float64 computed from the float32 inputs. Operands are
described by kind letters: i = Image3D, f = Field3D, c = float constant, v = Vec3Df constant; the
output is a field when an operand is a field, else an image.
"""
import math

import numpy as np
import pytest

import pyca as ca
from pyca.testing import ArrayFactory, to_numpy
from memory_helpers import MEMS

BASIC = dict(rtol=1e-6, atol=1e-6)      # + - * / min max compare: one float32 rounding
TRANS = dict(rtol=1e-5, atol=1e-6)      # transcendental functions (C library / CUDA)
FUSED = dict(rtol=1e-5, atol=1e-5)      # several roundings (or an FMA on the GPU)


# ------------------------------------------------------------------------------------ helpers
def _domain_values(rng, shape, domain):
    if domain == "pos":
        return rng.uniform(0.5, 2.0, shape)
    if domain == "nonzero":
        return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    if domain == "unit":
        return rng.uniform(-0.99, 0.99, shape)
    return rng.uniform(-2.0, 2.0, shape)


def _const(rng, kind, domain):
    if kind == "c":
        return float(np.float32(_domain_values(rng, (), domain)))
    return tuple(float(x) for x in np.float32(_domain_values(rng, (3,), domain)))


def _ref_operand(kind, value, out_kind):
    """float64 version of an operand that broadcasts against the output's NumPy shape."""
    if kind == "c":
        return float(value)
    if kind == "v":
        return np.asarray(value, dtype=np.float64)
    a = np.asarray(value, dtype=np.float64)
    return a[..., None] if (kind == "i" and out_kind == "f") else a


def run_case(mem, grid, fn, kinds, ref, *, inplace=False, mask=False, domains=None, seed=0, tol=BASIC,
             out_kind=None):
    """Calls fn with random operands of `kinds` (after the output, or in place on the first) and an
    optional random mask, then compares the output with ref(*float64 operands). `out_kind` overrides
    the kind of the output (an image for Magnitude and the like)."""
    rng = np.random.default_rng(seed)
    fac = ArrayFactory(mem, seed)
    size = tuple(grid.size())
    domains = domains or {}
    out_kind = out_kind or ("f" if "f" in kinds else "i")
    shape_of = {"i": size, "f": size + (3,)}
    host_vals, args = [], []
    for k, kind in enumerate(kinds):
        d = domains.get(k, "any")
        if kind in "if":
            v = np.float32(_domain_values(rng, shape_of[kind], d))
            host_vals.append(v)
            args.append(fac.from_array(v, grid, field=(kind == "f")))
        else:
            c = _const(rng, kind, d)
            host_vals.append(c)
            args.append(ca.Vec3Df(*c) if kind == "v" else c)
    old = np.float32(rng.uniform(-3, 3, shape_of[out_kind]))
    if inplace:
        out = args[0]
        old = host_vals[0]
    else:
        out = fac.from_array(old, grid, field=(out_kind == "f"))
        args = [out] + args
    m = None
    if mask:
        m = np.float32(rng.uniform(size=size) > 0.5)
        args.append(fac.from_array(m, grid, field=False))
    fn(*args)
    got = to_numpy(out)
    with np.errstate(all="ignore"):
        want = ref(*[_ref_operand(kind, v, out_kind) for kind, v in zip(kinds, host_vals)])
    want = np.broadcast_to(want, got.shape)
    if mask:
        mm = m[..., None] if out_kind == "f" else m
        want = np.where(mm != 0, want, old)
    np.testing.assert_allclose(got, want, equal_nan=True, **tol)
    # inputs other than the output are unchanged
    first_input = 1 if inplace else 0
    for kind, v, a in zip(kinds[first_input:], host_vals[first_input:], args[1:]):
        if kind in "if":
            np.testing.assert_array_equal(to_numpy(a), v)


def round_half_away(a):
    return np.sign(a) * np.floor(np.abs(a) + 0.5)


# ------------------------------------------------------------------------------------ unary
# name: (reference, domain of a, defined on fields, tolerance)
UNARY = {
    "Abs": (np.abs, "any", True, BASIC),
    "Neg": (np.negative, "any", True, BASIC),
    "Sqr": (np.square, "any", True, BASIC),
    "Sqrt": (np.sqrt, "pos", True, TRANS),
    "Cube": (lambda a: a ** 3, "any", False, FUSED),
    "Exp": (np.exp, "any", False, TRANS),
    "Log": (np.log, "pos", False, TRANS),
    "Inv": (lambda a: 1.0 / a, "nonzero", False, BASIC),
    "Ramp": (lambda a: np.maximum(a, 0.0), "any", False, BASIC),
    "Sgn": (np.sign, "any", False, BASIC),
    "Step": (lambda a: np.heaviside(a, 0.5), "any", False, BASIC),
    "Ceil": (np.ceil, "any", False, BASIC),
    "Floor": (np.floor, "any", False, BASIC),
    "Round": (round_half_away, "any", False, BASIC),
    "Sin": (np.sin, "any", False, TRANS),
    "Cos": (np.cos, "any", False, TRANS),
    "Tan": (np.tan, "unit", False, TRANS),
    "Asin": (np.arcsin, "unit", False, TRANS),
    "Acos": (np.arccos, "unit", False, TRANS),
    "Atan": (np.arctan, "any", False, TRANS),
    "Csc": (lambda a: 1.0 / np.sin(a), "nonzero", False, TRANS),
    "Sec": (lambda a: 1.0 / np.cos(a), "unit", False, TRANS),
    "Cot": (lambda a: 1.0 / np.tan(a), "nonzero", False, TRANS),
}


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_image(mem, grid, name):
    ref, dom, _, tol = UNARY[name]
    for inplace in (False, True):
        for mask in (False, True):
            fn = getattr(ca, name + ("_I" if inplace else ""))
            run_case(mem, grid, fn, "i", ref, inplace=inplace, mask=mask, domains={0: dom}, tol=tol)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("name", sorted(n for n, u in UNARY.items() if u[2]))
def test_unary_field(mem, grid, name):
    ref, dom, _, tol = UNARY[name]
    run_case(mem, grid, getattr(ca, name), "f", ref, domains={0: dom}, tol=tol)
    run_case(mem, grid, getattr(ca, name + "_I"), "f", ref, inplace=True, domains={0: dom}, tol=tol)


# ------------------------------------------------------------------------------------ binary
# name: (reference, domain of b, also on fields, tolerance)
BINARY = {
    "Add": (np.add, "any", True, BASIC),
    "Sub": (np.subtract, "any", True, BASIC),
    "Mul": (np.multiply, "any", True, BASIC),
    "Div": (np.divide, "nonzero", True, BASIC),
    "Max": (np.maximum, "any", True, BASIC),
    "Min": (np.minimum, "any", True, BASIC),
    "Atan2": (np.arctan2, "any", False, TRANS),
    "GT": (lambda a, b: np.greater(a, b).astype(float), "any", False, BASIC),
    "GTE": (lambda a, b: np.greater_equal(a, b).astype(float), "any", False, BASIC),
    "LT": (lambda a, b: np.less(a, b).astype(float), "any", False, BASIC),
    "LTE": (lambda a, b: np.less_equal(a, b).astype(float), "any", False, BASIC),
    "EQ": (lambda a, b: np.equal(a, b).astype(float), "any", False, BASIC),
    "NEQ": (lambda a, b: np.not_equal(a, b).astype(float), "any", False, BASIC),
}


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_image_table(mem, grid, name):
    """Op, Op_I, OpC, OpC_I and the float overloads of Op / Op_I, each with and without a mask."""
    ref, dom, _, tol = BINARY[name]
    doms = {1: dom}
    for mask in (False, True):
        run_case(mem, grid, getattr(ca, name), "ii", ref, mask=mask, domains=doms, tol=tol)
        run_case(mem, grid, getattr(ca, name), "ic", ref, mask=mask, domains=doms, tol=tol)
        run_case(mem, grid, getattr(ca, name + "_I"), "ii", ref, inplace=True, mask=mask, domains=doms, tol=tol)
        run_case(mem, grid, getattr(ca, name + "_I"), "ic", ref, inplace=True, mask=mask, domains=doms, tol=tol)
        run_case(mem, grid, getattr(ca, name + "C"), "ic", ref, mask=mask, domains=doms, tol=tol)
        run_case(mem, grid, getattr(ca, name + "C_I"), "ic", ref, inplace=True, mask=mask, domains=doms, tol=tol)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("name", sorted(n for n, b in BINARY.items() if b[2]))
def test_binary_field_table(mem, grid, name):
    """field/field, field/image (the image applies to every component), field/Vec3Df, field/float."""
    ref, dom, _, tol = BINARY[name]
    doms = {1: dom}
    run_case(mem, grid, getattr(ca, name), "ff", ref, domains=doms, tol=tol)
    run_case(mem, grid, getattr(ca, name), "fi", ref, domains=doms, tol=tol)
    run_case(mem, grid, getattr(ca, name + "_I"), "ff", ref, inplace=True, domains=doms, tol=tol)
    run_case(mem, grid, getattr(ca, name + "_I"), "fi", ref, inplace=True, domains=doms, tol=tol)
    run_case(mem, grid, getattr(ca, name + "C"), "fv", ref, domains=doms, tol=tol)
    run_case(mem, grid, getattr(ca, name + "C"), "fc", ref, domains=doms, tol=tol)
    run_case(mem, grid, getattr(ca, name + "C_I"), "fv", ref, inplace=True, domains=doms, tol=tol)
    run_case(mem, grid, getattr(ca, name + "C_I"), "fc", ref, inplace=True, domains=doms, tol=tol)


@pytest.mark.parametrize("mem", MEMS)
def test_comparisons_with_equal_voxels(mem, grid):
    """EQ / NEQ / GTE / LTE where a third of the voxels are equal."""
    fac = ArrayFactory(mem, 3)
    rng = np.random.default_rng(3)
    a = np.float32(rng.uniform(-1, 1, tuple(grid.size())))
    b = np.where(rng.uniform(size=a.shape) < 0.3, a, np.float32(rng.uniform(-1, 1, a.shape)))
    A, B, out = fac.from_array(a, grid), fac.from_array(b, grid), fac.image(grid)
    for name, ref in [("EQ", np.equal), ("NEQ", np.not_equal), ("GTE", np.greater_equal), ("LTE", np.less_equal)]:
        getattr(ca, name)(out, A, B)
        np.testing.assert_array_equal(to_numpy(out), ref(a, b).astype(np.float32), err_msg=name)


# ------------------------------------------------------------------------------------ with parameters
def soft_abs(a, eps):
    return np.where(np.abs(a) <= eps, a * a / (2 * eps), np.abs(a) - eps / 2)


def soft_sgn(a, eps):
    return np.where(np.abs(a) <= eps, a / eps, np.sign(a))


PARAM_OPS = [
    ("PowC", "ic", lambda a, c: a ** c, {0: "pos", 1: "pos"}, TRANS),
    ("AbsDiff", "ii", lambda a, b: np.abs(a - b), {}, BASIC),
    ("SqrDiff", "ii", lambda a, b: (a - b) ** 2, {}, FUSED),
    ("SoftAbs", "ic", soft_abs, {1: "pos"}, FUSED),
    ("SoftSgn", "ic", soft_sgn, {1: "pos"}, FUSED),
    ("Shrink", "ic", lambda a, c: np.maximum(a - c, 0) + np.minimum(a + c, 0), {1: "pos"}, BASIC),
    ("Clamp", "icc", lambda a, lo, hi: np.minimum(np.maximum(a, lo), hi), {1: "nonzero", 2: "pos"}, BASIC),
]


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("name,kinds,ref,doms,tol", PARAM_OPS, ids=[p[0] for p in PARAM_OPS])
def test_ops_with_parameters(mem, grid, name, kinds, ref, doms, tol):
    if name == "Clamp":  # lo < hi
        ref0 = ref
        ref = lambda a, lo, hi: ref0(a, min(lo, hi), max(lo, hi))  # noqa: E731
        fn0 = getattr(ca, name)
        fn0i = getattr(ca, name + "_I")
        fn = lambda *a: fn0(*a[:2], min(a[2:4]), max(a[2:4]))  # noqa: E731
        fni = lambda *a: fn0i(a[0], min(a[1:3]), max(a[1:3]))  # noqa: E731
    else:
        fn, fni = getattr(ca, name), getattr(ca, name + "_I")
    run_case(mem, grid, fn, kinds, ref, domains=doms, tol=tol)
    run_case(mem, grid, fni, kinds, ref, inplace=True, domains=doms, tol=tol)


# ------------------------------------------------------------------------------------ fused
def add_mul(a, b, c):
    return a + b * c


FUSED_OPS = [
    # (name, operand kinds of the overloads to test, reference, domains)
    ("MulMulC", ["iic", "ffc", "fic"], lambda a, b, c: a * b * c, {}),
    ("MulMul", ["iii"], lambda a, b, c: a * b * c, {}),
    ("MulAdd", ["iii"], lambda a, b, c: a * b + c, {}),
    ("MulSub", ["iii"], lambda a, b, c: a * b - c, {}),
    ("AddMul", ["iii"], lambda a, b, c: (a + b) * c, {}),
    ("AddDiv", ["iii"], lambda a, b, c: (a + b) / c, {2: "nonzero"}),
    ("SubMul", ["iii"], lambda a, b, c: (a - b) * c, {}),
    ("SubDiv", ["iii"], lambda a, b, c: (a - b) / c, {2: "nonzero"}),
    ("MulCAdd", ["ici", "fcf"], lambda a, c, b: a * c + b, {}),
    ("MulCSub", ["ici", "fcf"], lambda a, c, b: a * c - b, {}),
    ("MulCAddC", ["icc", "fvv"], lambda a, b, c: a * b + c, {}),
    ("AddMulC", ["iic", "ffc"], lambda a, b, c: (a + b) * c, {}),
    ("SubMulC", ["iic", "ffc"], lambda a, b, c: (a - b) * c, {}),
    ("AddCMulC", ["icc", "fvv"], lambda a, b, c: (a + b) * c, {}),
    ("Add_MulC", ["iic", "ffc"], add_mul, {}),
    ("Add_Mul", ["iii", "ffi"], add_mul, {}),
    ("Sub_Mul", ["iii", "ffi"], lambda a, b, c: a - b * c, {}),
    ("Add_AddMulC", ["iiic"], lambda a, b, c, d: a + (b + c) * d, {}),
    ("Add_SubMulC", ["iiic"], lambda a, b, c, d: a + (b - c) * d, {}),
    ("Add_MulMulC", ["iiic", "fffc", "ffic"], lambda a, b, c, d: a + b * c * d, {}),
    ("Sub_AddMulC", ["iiic"], lambda a, b, c, d: a - (b + c) * d, {}),
    ("Sub_SubMulC", ["iiic"], lambda a, b, c, d: a - (b - c) * d, {}),
    ("Sub_MulMulC", ["iiic", "fffc"], lambda a, b, c, d: a - b * c * d, {}),
    ("MulC_Add_MulC", ["icic", "fcfc"], lambda a, b, c, d: a * b + c * d, {}),
    ("AddCMulCAddC", ["iccc", "fccc", "fvvv"], lambda a, b, c, d: (a + b) * c + d, {}),
]


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("name,kinds_list,ref,doms", FUSED_OPS, ids=[f[0] for f in FUSED_OPS])
def test_fused(mem, grid, name, kinds_list, ref, doms):
    for kinds in kinds_list:
        run_case(mem, grid, getattr(ca, name), kinds, ref, domains=doms, tol=FUSED)
        run_case(mem, grid, getattr(ca, name + "_I"), kinds, ref, inplace=True, domains=doms, tol=FUSED)


# ------------------------------------------------------------------------------------ copies, vectors
@pytest.mark.parametrize("mem", MEMS)
def test_copy_and_setmem(mem, grid):
    run_case(mem, grid, ca.Copy, "i", lambda a: a)
    run_case(mem, grid, ca.Copy, "i", lambda a: a, mask=True)
    run_case(mem, grid, ca.Copy, "f", lambda a: a)
    run_case(mem, grid, ca.SetMem, "c", lambda c: c, mask=True)
    run_case(mem, grid, lambda out, c: ca.SetMem(out, c), "c", lambda c: c)
    fac = ArrayFactory(mem, 5)
    f = fac.field(grid)
    ca.SetMem(f, ca.Vec3Df(1.0, -2.0, 3.5))
    np.testing.assert_array_equal(to_numpy(f), np.broadcast_to(np.float32([1.0, -2.0, 3.5]), to_numpy(f).shape))
    ca.SetMem(f, 0.25)
    assert np.all(to_numpy(f) == 0.25)


@pytest.mark.parametrize("mem", MEMS)
def test_component_copies(mem, grid):
    fac = ArrayFactory(mem, 6)
    fv = np.float32(np.random.default_rng(6).uniform(-1, 1, tuple(grid.size()) + (3,)))
    iv = np.float32(np.random.default_rng(7).uniform(-1, 1, tuple(grid.size())))
    for dim in range(3):
        f, im = fac.from_array(fv, grid, field=True), fac.image(grid)
        ca.Copy(im, f, dim)
        np.testing.assert_array_equal(to_numpy(im), fv[..., dim])
        ca.Copy(f, fac.from_array(iv, grid), dim)
        want = fv.copy()
        want[..., dim] = iv
        np.testing.assert_array_equal(to_numpy(f), want)
    with pytest.raises(IndexError):
        ca.Copy(fac.image(grid), fac.field(grid), 3)


@pytest.mark.parametrize("mem", MEMS)
def test_vector_ops(mem, grid):
    img = dict(out_kind="i")
    run_case(mem, grid, ca.Magnitude, "f", lambda a: np.linalg.norm(a, axis=-1), tol=TRANS, **img)
    run_case(mem, grid, ca.SqrMagnitude, "f", lambda a: np.sum(a * a, axis=-1), tol=FUSED, **img)
    run_case(mem, grid, ca.ComponentDotProd, "ff", lambda a, b: np.sum(a * b, axis=-1), tol=FUSED, **img)
    run_case(mem, grid, ca.Dot, "ff", lambda a, b: np.sum(a * b, axis=-1), tol=FUSED, **img)


def _normalize_safe(a, eps):
    n = np.linalg.norm(a, axis=-1, keepdims=True)
    with np.errstate(all="ignore"):
        return np.where(n >= eps, a / n, 0.0)


@pytest.mark.parametrize("mem", MEMS)
def test_normalize_safe(mem, grid):
    run_case(mem, grid, ca.NormalizeSafe, "fc", _normalize_safe, domains={1: "pos"}, tol=TRANS)
    run_case(mem, grid, ca.NormalizeSafe_I, "fc", _normalize_safe, inplace=True, domains={1: "pos"}, tol=TRANS)


# ------------------------------------------------------------------------------------ special values
@pytest.mark.parametrize("mem", MEMS)
def test_special_values(mem):
    g = ca.GridInfo(ca.Vec3Di(8, 1, 1))
    fac = ArrayFactory(mem)
    v = np.float32([-2.0, -0.0, 0.0, 0.5, 2.5, -2.5, np.nan, np.inf]).reshape(8, 1, 1)
    a, out = fac.from_array(v, g), fac.image(g)
    ca.Sgn(out, a)
    np.testing.assert_array_equal(to_numpy(out).ravel(), [-1, 0, 0, 1, 1, -1, np.nan, 1])
    ca.Step(out, a)
    np.testing.assert_array_equal(to_numpy(out).ravel(), [0, 0.5, 0.5, 1, 1, 0, np.nan, 1])
    ca.Round(out, a)
    np.testing.assert_array_equal(to_numpy(out).ravel(), [-2, -0.0, 0, 1, 3, -3, np.nan, np.inf])
    ca.MaxC(out, a, 0.0)  # NaN propagates like numpy.maximum
    np.testing.assert_array_equal(to_numpy(out).ravel(), np.maximum(v.ravel(), 0))
    ca.Max(out, a, a)
    np.testing.assert_array_equal(to_numpy(out).ravel(), v.ravel())
    ca.Inv(out, a)
    np.testing.assert_array_equal(to_numpy(out).ravel()[1:3], [-np.inf, np.inf])


# ------------------------------------------------------------------------------------ aliasing
@pytest.mark.parametrize("mem", MEMS)
def test_output_may_alias_inputs(mem, grid):
    fac = ArrayFactory(mem, 9)
    v = np.float32(np.random.default_rng(9).uniform(-1, 1, tuple(grid.size())))
    a = fac.from_array(v, grid)
    ca.Add(a, a, a)
    np.testing.assert_allclose(to_numpy(a), 2 * v, rtol=1e-6)
    ca.Add_Mul(a, a, a, a)
    w = 2 * v
    np.testing.assert_allclose(to_numpy(a), w + w * w, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------ errors
def test_mismatched_sizes_name_op_and_argument():
    g3 = ca.GridInfo(ca.Vec3Di(17, 23, 31))
    g2 = ca.GridInfo(ca.Vec3Di(31, 33, 1))
    fac = ArrayFactory(ca.MEM_HOST, 1)
    a, b, out = fac.random_image(g3), fac.random_image(g2), fac.random_image(g3)
    before = [to_numpy(x).copy() for x in (a, b, out)]
    with pytest.raises(ValueError, match=r"Add.*'b'"):
        ca.Add(out, a, b)
    with pytest.raises(ValueError, match=r"MulC.*'mask'"):
        ca.MulC(out, a, 2.0, b)
    f = fac.random_field(g2)
    with pytest.raises(ValueError, match=r"Mul.*'a'"):
        ca.Mul(fac.field(g3), f, a)
    for x, v in zip((a, b, out), before):
        np.testing.assert_array_equal(to_numpy(x), v)


def test_wrong_argument_types():
    g = ca.GridInfo(ca.Vec3Di(5, 4, 3))
    fac = ArrayFactory(ca.MEM_HOST, 2)
    im, f = fac.random_image(g), fac.random_field(g)
    with pytest.raises(TypeError):
        ca.Add(im, im, "x")
    with pytest.raises(TypeError):
        ca.Add(im, f, f)  # an image cannot hold a field's result
    with pytest.raises(TypeError):
        ca.AddC(im, im, ca.Vec3Df(1, 2, 3))  # Vec3Df constants are for fields
    with pytest.raises(TypeError):
        ca.Magnitude(f, f)


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
def test_mixed_memory_names_op_and_argument():
    g = ca.GridInfo(ca.Vec3Di(17, 23, 31))
    host = ArrayFactory(ca.MEM_HOST, 3)
    dev = ArrayFactory(ca.MEM_DEVICE, 3)
    a, out = host.random_image(g), host.random_image(g)
    b = dev.random_image(g)
    before = to_numpy(out).copy()
    with pytest.raises(ca.MemoryTypeError, match=r"Sub.*'b'"):
        ca.Sub(out, a, b)
    np.testing.assert_array_equal(to_numpy(out), before)
    with pytest.raises(ca.MemoryTypeError):
        ca.Magnitude(out, dev.random_field(g))
    assert math.isfinite(float(to_numpy(a).sum()))
