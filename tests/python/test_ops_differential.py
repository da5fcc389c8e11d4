"""The `differential` family against independent NumPy references (docs/operations/differential.md).

Every operation runs on host memory, and on device memory when a GPU is usable. The references are
written here from the documented stencils (np.roll for BC_WRAP, edge padding for BC_CLAMP and
BC_APPROX, with one-sided central differences at the border for BC_APPROX), in float64. They follow
PyCA: with BC_APPROX a forward difference at the last voxel (backward at the first) is 0, and
JacDetH differentiates the H-field per world unit.
"""
import itertools

import numpy as np
import pytest

import pyca as ca
from memory_helpers import MEMS

DIMS = [ca.DIM_X, ca.DIM_Y, ca.DIM_Z]
DIFFS = [ca.DIFF_FORWARD, ca.DIFF_BACKWARD, ca.DIFF_CENTRAL]
BCS = [ca.BC_CLAMP, ca.BC_WRAP, ca.BC_APPROX]
RTOL, ATOL = 1e-5, 2e-5


# ------------------------------------------------------------------------------- references
def _take(a, i, axis):
    return np.take(a, i, axis=axis)


def np_diff(a, axis, diff, bc, h=1.0):
    """One finite difference along `axis` per world unit, with the documented boundary handling."""
    a = np.asarray(a, dtype=np.float64)
    n = a.shape[axis]
    if n == 1:
        return np.zeros_like(a)
    i = np.arange(n)
    if bc == ca.BC_WRAP:
        nxt, prv = np.roll(a, -1, axis), np.roll(a, 1, axis)
    else:  # edge padding: the value beyond the border is the border value
        nxt, prv = _take(a, np.minimum(i + 1, n - 1), axis), _take(a, np.maximum(i - 1, 0), axis)
    if diff == ca.DIFF_FORWARD:
        d = nxt - a
    elif diff == ca.DIFF_BACKWARD:
        d = a - prv
    else:
        d = 0.5 * (nxt - prv)
    if bc == ca.BC_APPROX and diff == ca.DIFF_CENTRAL:  # one-sided central differences at the border
        d = np.moveaxis(d, axis, 0).copy()
        b = np.moveaxis(a, axis, 0)
        d[-1] = b[-1] - b[-2]
        d[0] = b[1] - b[0]
        d = np.moveaxis(d, 0, axis)
    return d / h


def np_grad(a, diff, bc, sp):
    return np.stack([np_diff(a, k, diff, bc, sp[k]) for k in range(3)], axis=-1)


def np_diff_mask(a, m, axis, diff, bc, h):
    """Masked difference: masked neighbours behave like neighbours beyond the border (their value is
    the centre's; with BC_APPROX a central difference becomes one-sided)."""
    a = np.moveaxis(np.asarray(a, np.float64), axis, 0)
    m = np.moveaxis(np.asarray(m) != 0, axis, 0)
    n = a.shape[0]
    out = np.zeros_like(a)
    if n > 1:
        for i in range(n):
            v = a[i]
            if bc == ca.BC_WRAP:
                jn, jp, hn, hp = (i + 1) % n, (i - 1) % n, True, True
            else:
                jn, jp, hn, hp = min(i + 1, n - 1), max(i - 1, 0), i + 1 < n, i > 0
            nok = hn & m[jn]
            pok = hp & m[jp]
            fn, fp = np.where(nok, a[jn], v), np.where(pok, a[jp], v)
            if diff == ca.DIFF_FORWARD:
                d = fn - v
            elif diff == ca.DIFF_BACKWARD:
                d = v - fp
            elif bc == ca.BC_APPROX:
                d = np.where(nok & pok, 0.5 * (a[jn] - a[jp]),
                             np.where(nok, a[jn] - v, np.where(pok, v - a[jp], 0.0)))
            else:
                d = 0.5 * (fn - fp)
            out[i] = np.where(m[i], d, 0.0)
    return np.moveaxis(out, 0, axis) / h


def np_lap(a, bc, sp):
    a = np.asarray(a, np.float64)
    out = np.zeros_like(a)
    for k in range(3):
        n = a.shape[k]
        if n == 1:
            continue
        i = np.arange(n)
        if bc == ca.BC_WRAP:
            d2 = np.roll(a, -1, k) - 2 * a + np.roll(a, 1, k)
        elif bc == ca.BC_CLAMP:
            d2 = _take(a, np.minimum(i + 1, n - 1), k) - 2 * a + _take(a, np.maximum(i - 1, 0), k)
        else:  # BC_APPROX: the nearest centred stencil inside, 0 when n < 3
            if n < 3:
                continue
            c = np.clip(i, 1, n - 2)
            d2 = _take(a, c + 1, k) - 2 * _take(a, c, k) + _take(a, c - 1, k)
        out += d2 / sp[k] ** 2
    return out


def np_det(J):
    return np.linalg.det(J)


# ------------------------------------------------------------------------------- helpers
def image(arr, grid, mem):
    return ca.Image3D.from_array(np.asarray(arr, np.float32), grid).to(mem)


def field(arr, grid, mem):
    return ca.Field3D.from_array(np.asarray(arr, np.float32), grid).to(mem)


def sp_of(grid):
    return tuple(float(s) for s in grid.spacing())


def world_coords(grid):
    s, sp, o = grid.size(), grid.spacing(), grid.origin()
    ix = np.meshgrid(*[np.arange(s[k], dtype=np.float64) for k in range(3)], indexing="ij")
    return [o[k] + sp[k] * ix[k] for k in range(3)], ix


@pytest.fixture
def im_np(grid, rng):
    return rng.standard_normal(tuple(grid.size())).astype(np.float32)


# ------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("dim, diff, bc", list(itertools.product(DIMS, DIFFS, BCS)))
def test_finite_diff_table(grid, im_np, mem, dim, diff, bc):
    im = image(im_np, grid, mem)
    out = ca.Image3D(grid, mem)
    ca.FiniteDiff(out, im, dim, diff, bc)
    ref = np_diff(im_np, int(dim), diff, bc, sp_of(grid)[int(dim)])
    np.testing.assert_allclose(out.numpy(), ref, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(im.numpy(), im_np)  # input untouched


@pytest.mark.parametrize("mem", MEMS)
def test_finite_diff_defaults_are_central_clamp(grid, im_np, mem):
    im, out = image(im_np, grid, mem), ca.Image3D(grid, mem)
    ca.FiniteDiff(out, im, ca.DIM_Y)
    ref = np_diff(im_np, 1, ca.DIFF_CENTRAL, ca.BC_CLAMP, sp_of(grid)[1])
    np.testing.assert_allclose(out.numpy(), ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("diff, bc", list(itertools.product(DIFFS, BCS)))
def test_gradient_magnitude_divergence(grid, im_np, rng, mem, diff, bc):
    sp = sp_of(grid)
    im = image(im_np, grid, mem)
    g = ca.Field3D(grid, mem)
    ca.Gradient(g, im, diff, bc)
    ref = np_grad(im_np, diff, bc, sp)
    np.testing.assert_allclose(g.numpy(), ref, rtol=RTOL, atol=ATOL)

    mag = ca.Image3D(grid, mem)
    ca.GradientMag(mag, im, diff, bc)
    np.testing.assert_allclose(mag.numpy(), np.sqrt((ref ** 2).sum(-1)), rtol=RTOL, atol=ATOL)

    v_np = rng.standard_normal(tuple(grid.size()) + (3,)).astype(np.float32)
    v = field(v_np, grid, mem)
    div = ca.Image3D(grid, mem)
    ca.Divergence(div, v, diff, bc)
    ref_div = sum(np_diff(v_np[..., k], k, diff, bc, sp[k]) for k in range(3))
    np.testing.assert_allclose(div.numpy(), ref_div, rtol=RTOL, atol=5 * ATOL)


@pytest.mark.parametrize("mem", MEMS)
def test_gradient_of_ramp_is_exact_inside(grid, mem):
    (X, Y, Z), _ = world_coords(grid)
    im = image(2 * X - 3 * Y + 0.5 * Z + 1, grid, mem)
    g = ca.Field3D(grid, mem)
    ca.Gradient(g, im)  # DIFF_CENTRAL, BC_CLAMP
    got = g.numpy()
    inner = got[1:-1, 1:-1, 1:-1] if grid.size()[2] > 1 else got[1:-1, 1:-1, :]
    want = [2.0, -3.0, 0.5 if grid.size()[2] > 1 else 0.0]
    for k in range(3):
        np.testing.assert_allclose(inner[..., k], want[k], atol=1e-3)
    ca.Gradient(g, im, ca.DIFF_CENTRAL, ca.BC_APPROX)  # one-sided at the border: exact everywhere
    for k in range(3):
        np.testing.assert_allclose(g.numpy()[..., k], want[k], atol=1e-3)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("bc", BCS)
def test_laplacian(grid, im_np, rng, mem, bc):
    sp = sp_of(grid)
    im, out = image(im_np, grid, mem), ca.Image3D(grid, mem)
    ca.Laplacian(out, im, bc)
    np.testing.assert_allclose(out.numpy(), np_lap(im_np, bc, sp), rtol=RTOL, atol=1e-4)
    v_np = rng.standard_normal(tuple(grid.size()) + (3,)).astype(np.float32)
    v, lv = field(v_np, grid, mem), ca.Field3D(grid, mem)
    ca.Laplacian(lv, v, bc)
    ref = np.stack([np_lap(v_np[..., k], bc, sp) for k in range(3)], -1)
    np.testing.assert_allclose(lv.numpy(), ref, rtol=RTOL, atol=1e-4)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("diff, bc", list(itertools.product(DIFFS, BCS)))
def test_gradient_mask(grid, im_np, rng, mem, diff, bc):
    sp = sp_of(grid)
    m_np = (rng.random(tuple(grid.size())) > 0.3).astype(np.float32)
    im, m, g = image(im_np, grid, mem), image(m_np, grid, mem), ca.Field3D(grid, mem)
    ca.GradientMask(g, im, m, diff, bc)
    ref = np.stack([np_diff_mask(im_np, m_np, k, diff, bc, sp[k]) for k in range(3)], -1)
    np.testing.assert_allclose(g.numpy(), ref, rtol=RTOL, atol=ATOL)
    # An all-ones mask gives Gradient.
    ca.GradientMask(g, im, image(np.ones_like(m_np), grid, mem), diff, bc)
    np.testing.assert_allclose(g.numpy(), np_grad(im_np, diff, bc, sp), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("dim", DIMS)
def test_upwind_diff(grid, im_np, rng, mem, dim):
    k = int(dim)
    h = sp_of(grid)[k]
    s_np = rng.standard_normal(tuple(grid.size())).astype(np.float32)
    s_np[::3] = 0.0  # speed 0 counts as positive (backward difference)
    out = ca.Image3D(grid, mem)
    ca.UpwindDiff(out, image(im_np, grid, mem), image(s_np, grid, mem), dim)
    fwd = np_diff(im_np, k, ca.DIFF_FORWARD, ca.BC_CLAMP, h)
    bwd = np_diff(im_np, k, ca.DIFF_BACKWARD, ca.BC_CLAMP, h)
    np.testing.assert_allclose(out.numpy(), np.where(s_np < 0, fwd, bwd), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("mem", MEMS)
def test_upwind_grad_mag(grid, im_np, rng, mem):
    sp = sp_of(grid)
    s_np = rng.standard_normal(tuple(grid.size())).astype(np.float32)
    out = ca.Image3D(grid, mem)
    ca.UpwindGradMag(out, image(im_np, grid, mem), image(s_np, grid, mem))
    tot = np.zeros(im_np.shape)
    for k in range(3):
        if im_np.shape[k] == 1:
            continue
        fw = np.moveaxis(np.diff(im_np.astype(np.float64), axis=k), k, 0) / sp[k]
        dplus = np.moveaxis(np.concatenate([fw, fw[-1:]], 0), 0, k)   # backward at the last voxel
        dminus = np.moveaxis(np.concatenate([fw[:1], fw], 0), 0, k)  # forward at the first voxel
        pos = np.maximum(dplus, 0) ** 2 + np.maximum(-dminus, 0) ** 2
        neg = np.minimum(dplus, 0) ** 2 + np.minimum(-dminus, 0) ** 2
        tot += np.where(s_np < 0, neg, pos)
    np.testing.assert_allclose(out.numpy(), s_np * np.sqrt(tot), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("diff, bc", list(itertools.product(DIFFS, BCS)))
def test_jacobian_and_determinants(grid, rng, mem, diff, bc):
    sp = sp_of(grid)
    is2d = grid.size()[2] == 1
    _, ix = world_coords(grid)
    h_np = np.stack(ix, -1) + 0.3 * rng.standard_normal(tuple(grid.size()) + (3,))
    h = field(h_np, grid, mem)
    h_np = h.numpy().astype(np.float64)
    Xg, Yg, Zg = (ca.Field3D(grid, mem) for _ in range(3))
    ca.Jacobian(Xg, Yg, Zg, h, diff, bc)
    J = np.stack([np_grad(h_np[..., r], diff, bc, sp) for r in range(3)], -2)  # [..., row, col], per world unit
    for r, G in enumerate((Xg, Yg, Zg)):
        np.testing.assert_allclose(G.numpy(), J[..., r, :], rtol=1e-5, atol=1e-4)

    jd = ca.Image3D(grid, mem)
    ca.JacDetH(jd, h, diff, bc)
    ref = np_det(J[..., :2, :2]) if is2d else np_det(J)  # per world unit, as PyCA
    np.testing.assert_allclose(jd.numpy(), ref, rtol=1e-4, atol=1e-4)
    ca.JacDetH(jd, Xg, Yg, Zg)  # from the gradient fields: the plain determinant, the same number
    np.testing.assert_allclose(jd.numpy(), ref, rtol=1e-4, atol=1e-4)

    v_np = 0.2 * rng.standard_normal(tuple(grid.size()) + (3,))
    v = field(v_np, grid, mem)
    v_np = v.numpy().astype(np.float64)
    ca.JacDetV(jd, v, diff, bc)
    Jv = np.stack([np_grad(v_np[..., r], diff, bc, sp) for r in range(3)], -2) + np.eye(3)
    refv = np_det(Jv[..., :2, :2]) if is2d else np_det(Jv)
    np.testing.assert_allclose(jd.numpy(), refv, rtol=1e-4, atol=1e-4)
    ca.Jacobian(Xg, Yg, Zg, v, diff, bc)
    ca.JacDetV(jd, Xg, Yg, Zg)
    np.testing.assert_allclose(jd.numpy(), refv, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mem", MEMS)
def test_jacdeth_of_affine_map_is_det_a(grid, mem):
    A = np.array([[1.2, 0.1, -0.2], [0.05, 0.9, 0.1], [0.0, -0.15, 1.1]])
    _, ix = world_coords(grid)
    p = np.stack(ix, -1)
    h = field(p @ A.T + np.array([0.3, -0.2, 0.1]), grid, mem)
    jd = ca.Image3D(grid, mem)
    ca.JacDetH(jd, h)  # DIFF_CENTRAL, BC_APPROX: exact for affine maps, borders included
    sp = np.asarray(sp_of(grid))
    if grid.size()[2] == 1:
        want, vol = np.linalg.det(A[:2, :2]), sp[0] * sp[1]
    else:
        want, vol = np.linalg.det(A), np.prod(sp)
    # derivatives per world unit (PyCA): det(A) divided by the voxel volume
    np.testing.assert_allclose(jd.numpy(), want / vol, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(jd.numpy() * vol, want, rtol=1e-4, atol=1e-4)
    # The identity gives 1 / voxel volume (1 on unit spacing).
    ca.JacDetH(jd, field(p, grid, mem))
    np.testing.assert_allclose(jd.numpy(), 1.0 / vol, rtol=1e-5)


# ------------------------------------------------------------------------------- PyCA's fixed-stencil forms
@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("bc", BCS)
def test_grad_for_grad_for_mag_div_back(grid, im_np, rng, mem, bc):
    sp = sp_of(grid)
    im = image(im_np, grid, mem)
    g = ca.Field3D(grid, mem)
    ca.GradFor(g, im, bc)
    np.testing.assert_allclose(g.numpy(), np_grad(im_np, ca.DIFF_FORWARD, bc, sp), rtol=RTOL, atol=ATOL)
    ca.GradFor(g, im)  # default BC_CLAMP: 0 at the last voxel of each axis
    ref = np_grad(im_np, ca.DIFF_FORWARD, ca.BC_CLAMP, sp)
    np.testing.assert_allclose(g.numpy(), ref, rtol=RTOL, atol=ATOL)
    assert np.all(g.numpy()[-1, :, :, 0] == 0) and np.all(g.numpy()[:, -1, :, 1] == 0)

    mag = ca.Image3D(grid, mem)
    ca.GradForMag(mag, im)  # DIFF_FORWARD, BC_APPROX (= BC_CLAMP for forward differences)
    np.testing.assert_allclose(mag.numpy(), np.sqrt((ref ** 2).sum(-1)), rtol=RTOL, atol=ATOL)

    v_np = rng.standard_normal(tuple(grid.size()) + (3,)).astype(np.float32)
    div = ca.Image3D(grid, mem)
    ca.DivBack(div, field(v_np, grid, mem), bc)
    ref_div = sum(np_diff(v_np[..., k], k, ca.DIFF_BACKWARD, bc, sp[k]) for k in range(3))
    np.testing.assert_allclose(div.numpy(), ref_div, rtol=RTOL, atol=5 * ATOL)
    ca.DivBack(div, field(v_np, grid, mem))  # default BC_CLAMP
    ref_div = sum(np_diff(v_np[..., k], k, ca.DIFF_BACKWARD, ca.BC_CLAMP, sp[k]) for k in range(3))
    np.testing.assert_allclose(div.numpy(), ref_div, rtol=RTOL, atol=5 * ATOL)


@pytest.mark.parametrize("mem", MEMS)
def test_div_back_is_minus_adjoint_of_grad_for_with_wrap(grid, im_np, rng, mem):
    v_np = rng.standard_normal(tuple(grid.size()) + (3,)).astype(np.float32)
    g, div = ca.Field3D(grid, mem), ca.Image3D(grid, mem)
    ca.GradFor(g, image(im_np, grid, mem), ca.BC_WRAP)
    ca.DivBack(div, field(v_np, grid, mem), ca.BC_WRAP)
    lhs = np.sum(g.numpy().astype(np.float64) * v_np)
    rhs = -np.sum(im_np.astype(np.float64) * div.numpy())
    scale = np.sum(np.abs(g.numpy().astype(np.float64) * v_np))
    assert abs(lhs - rhs) <= 1e-5 * scale


# ------------------------------------------------------------------------------- Jacobian-field products
def np_jac_central_clamp(f, sp):
    """[..., i, j] = d(f_i)/dx_j per world unit, central differences with BC_CLAMP."""
    return np.stack([np_grad(f[..., r], ca.DIFF_CENTRAL, ca.BC_CLAMP, sp) for r in range(3)], -2)


def np_div_tensor(X, Y, sp):
    """out_i = sum_j D_j(X_i Y_j): central difference (BC_CLAMP) of the product."""
    return np.stack([sum(np_diff(X[..., i] * Y[..., j], j, ca.DIFF_CENTRAL, ca.BC_CLAMP, sp[j])
                         for j in range(3)) for i in range(3)], -1)


@pytest.mark.parametrize("mem", MEMS)
def test_jacobian_field_products(grid, rng, mem):
    sp = sp_of(grid)
    shape = tuple(grid.size()) + (3,)
    X_np = rng.standard_normal(shape).astype(np.float32)
    Y_np = rng.standard_normal(shape).astype(np.float32)
    X, Y = field(X_np, grid, mem), field(Y_np, grid, mem)
    X64, Y64 = X_np.astype(np.float64), Y_np.astype(np.float64)
    JX, JY = np_jac_central_clamp(X64, sp), np_jac_central_clamp(Y64, sp)
    out = ca.Field3D(grid, mem)
    tol = dict(rtol=1e-5, atol=1e-4)

    ca.JacobianXY(out, X, Y)
    np.testing.assert_allclose(out.numpy(), np.einsum("...ij,...j->...i", JX, Y64), **tol)
    ca.JacobianXtY(out, X, Y)
    np.testing.assert_allclose(out.numpy(), np.einsum("...ji,...j->...i", JX, Y64), **tol)
    ca.DivergenceTensor(out, X, Y)
    np.testing.assert_allclose(out.numpy(), np_div_tensor(X64, Y64, sp), **tol)
    ca.AdInf(out, X, Y)
    ref_ad = np.einsum("...ij,...j->...i", JX, Y64) - np.einsum("...ij,...j->...i", JY, X64)
    np.testing.assert_allclose(out.numpy(), ref_ad, **tol)
    ca.CoAdInf(out, X, Y)  # Y plays m
    ref_coad = np.einsum("...ji,...j->...i", JX, Y64) + np_div_tensor(Y64, X64, sp)
    np.testing.assert_allclose(out.numpy(), ref_coad, **tol)
    if grid.size()[2] == 1:  # no z derivatives on a 2-D grid
        ca.JacobianXY(out, X, field(np.tile([0.0, 0.0, 1.0], tuple(grid.size()) + (1,)), grid, mem))
        np.testing.assert_array_equal(out.numpy(), 0.0)
    np.testing.assert_array_equal(X.numpy(), X_np)  # inputs untouched
    np.testing.assert_array_equal(Y.numpy(), Y_np)


def _bump_fields(grid, rng):
    """Smooth fields that vanish (with their derivatives) near the border: sums of Gaussians."""
    (X, Y, Z), _ = world_coords(grid)
    ext = [grid.spacing()[k] * (grid.size()[k] - 1) for k in range(3)]
    org = [grid.origin()[k] for k in range(3)]
    is2d = grid.size()[2] == 1
    out = []
    for _ in range(3):
        comps = []
        for _c in range(3):
            c = [org[k] + ext[k] * rng.uniform(0.4, 0.6) for k in range(3)]
            s = [ext[k] / 9.0 for k in range(3)]
            r2 = ((X - c[0]) / s[0]) ** 2 + ((Y - c[1]) / s[1]) ** 2
            if not is2d:
                r2 = r2 + ((Z - c[2]) / s[2]) ** 2
            comps.append(rng.uniform(0.5, 1.5) * np.exp(-r2))
        out.append(np.stack(comps, -1))
    return out


@pytest.mark.parametrize("mem", MEMS)
def test_adinf_coadinf_adjoint_relation(grid, rng, mem):
    X_np, Y_np, m_np = _bump_fields(grid, rng)
    X, Y, m = (field(a, grid, mem) for a in (X_np, Y_np, m_np))
    ad, coad = ca.Field3D(grid, mem), ca.Field3D(grid, mem)
    ca.AdInf(ad, X, Y)
    ca.CoAdInf(coad, X, m)
    lhs = np.sum(ad.numpy().astype(np.float64) * m.numpy())
    rhs = np.sum(Y.numpy().astype(np.float64) * coad.numpy())
    scale = np.sum(np.abs(ad.numpy().astype(np.float64) * m.numpy()))
    assert scale > 0
    assert abs(lhs - rhs) <= 1e-3 * scale, (lhs, rhs, scale)


@pytest.mark.parametrize("mem", MEMS)
def test_jacdetvinv(grid, rng, mem):
    sp = sp_of(grid)
    is2d = grid.size()[2] == 1
    v = field(0.2 * rng.standard_normal(tuple(grid.size()) + (3,)), grid, mem)
    v_np = v.numpy().astype(np.float64)
    Xg, Yg, Zg = (ca.Field3D(grid, mem) for _ in range(3))
    ca.Jacobian(Xg, Yg, Zg, v)
    G = np.stack([np_grad(v_np[..., r], ca.DIFF_CENTRAL, ca.BC_APPROX, sp) for r in range(3)], -2)
    jd = ca.Image3D(grid, mem)
    ca.JacDetVInv(jd, Xg, Yg, Zg)
    ref = np.linalg.det(np.eye(3) - G)
    np.testing.assert_allclose(jd.numpy(), ref, rtol=1e-4, atol=1e-4)
    if is2d:
        np.testing.assert_allclose(jd.numpy(), np.linalg.det(np.eye(2) - G[..., :2, :2]), rtol=1e-4, atol=1e-4)
    # Arbitrary rows (a full 3x3 with off-diagonal terms): det(I - G), and 1 for G = 0.
    rows = [rng.uniform(-0.3, 0.3, tuple(grid.size()) + (3,)).astype(np.float32) for _ in range(3)]
    ca.JacDetVInv(jd, *(field(r, grid, mem) for r in rows))
    np.testing.assert_allclose(jd.numpy(), np.linalg.det(np.eye(3) - np.stack(rows, -2).astype(np.float64)),
                               rtol=1e-4, atol=1e-5)
    zero = field(np.zeros(tuple(grid.size()) + (3,)), grid, mem)
    ca.JacDetVInv(jd, zero, zero, zero)
    np.testing.assert_array_equal(jd.numpy(), 1.0)


# ------------------------------------------------------------------------------- bad input
def test_mismatched_sizes_name_the_op_and_argument(grid, im_np):
    im = image(im_np, grid, ca.MEM_HOST)
    other = ca.Image3D(ca.GridInfo((5, 6, 7)), ca.MEM_HOST)
    with pytest.raises(ValueError, match=r"FiniteDiff.*'im'"):
        ca.FiniteDiff(other, im, ca.DIM_X)
    g = ca.Field3D(ca.GridInfo((5, 6, 7)), ca.MEM_HOST)
    with pytest.raises(ValueError, match=r"Gradient.*'im'"):
        ca.Gradient(g, im)
    m = ca.Image3D(ca.GridInfo((5, 6, 7)), ca.MEM_HOST)
    with pytest.raises(ValueError, match=r"GradientMask.*'mask'"):
        ca.GradientMask(ca.Field3D(grid, ca.MEM_HOST), im, m)
    with pytest.raises(ValueError, match=r"JacDetH.*'h'"):
        ca.JacDetH(ca.Image3D(grid, ca.MEM_HOST), g)
    np.testing.assert_array_equal(np.asarray(im), im_np)


def test_in_place_is_refused(grid, im_np):
    im = image(im_np, grid, ca.MEM_HOST)
    with pytest.raises(ValueError, match=r"FiniteDiff.*must not share memory"):
        ca.FiniteDiff(im, im, ca.DIM_X)
    with pytest.raises(ValueError, match="Laplacian"):
        ca.Laplacian(im, im)
    np.testing.assert_array_equal(np.asarray(im), im_np)


def test_bad_enum_values_are_refused(grid, im_np):
    im, out = image(im_np, grid, ca.MEM_HOST), ca.Image3D(grid, ca.MEM_HOST)
    with pytest.raises((ValueError, TypeError)):
        ca.FiniteDiff(out, im, 7)
    with pytest.raises((ValueError, TypeError)):
        ca.Gradient(ca.Field3D(grid, ca.MEM_HOST), im, ca.DIFF_CENTRAL, 9)


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
def test_mixed_memory_is_refused(grid, im_np):
    im = image(im_np, grid, ca.MEM_HOST)
    out = ca.Image3D(grid, ca.MEM_DEVICE)
    with pytest.raises(ca.MemoryTypeError, match=r"FiniteDiff.*'im'"):
        ca.FiniteDiff(out, im, ca.DIM_X)
    with pytest.raises(ca.MemoryTypeError, match="JacDetH"):
        ca.JacDetH(out, ca.Field3D(grid, ca.MEM_HOST))
    np.testing.assert_array_equal(np.asarray(im), im_np)


def test_new_ops_bad_input(grid, im_np):
    """One bad input per operation added for PyCA parity: wrong size names the op and argument;
    outputs sharing memory with an input are refused."""
    H = ca.MEM_HOST
    im = image(im_np, grid, H)
    small = ca.GridInfo((5, 6, 7))
    with pytest.raises(ValueError, match=r"GradFor.*'im'"):
        ca.GradFor(ca.Field3D(small, H), im)
    with pytest.raises(ValueError, match=r"GradForMag.*must not share memory"):
        ca.GradForMag(im, im)
    with pytest.raises(ValueError, match=r"DivBack.*'v'"):
        ca.DivBack(ca.Image3D(grid, H), ca.Field3D(small, H))
    f = ca.Field3D.from_array(np.zeros(tuple(grid.size()) + (3,), np.float32), grid)
    g = ca.Field3D.from_array(np.ones(tuple(grid.size()) + (3,), np.float32), grid)
    with pytest.raises(ValueError, match=r"JacDetVInv.*'Zg'"):
        ca.JacDetVInv(ca.Image3D(grid, H), f, f, ca.Field3D(small, H))
    with pytest.raises(ValueError, match=r"JacobianXY.*'Y'"):
        ca.JacobianXY(ca.Field3D(grid, H), f, ca.Field3D(small, H))
    with pytest.raises(ValueError, match=r"JacobianXtY.*must not share memory"):
        ca.JacobianXtY(f, f, g)
    with pytest.raises(ValueError, match=r"DivergenceTensor.*must not share memory"):
        ca.DivergenceTensor(g, f, g)
    with pytest.raises(ValueError, match=r"AdInf.*'X'"):
        ca.AdInf(ca.Field3D(grid, H), ca.Field3D(small, H), f)
    with pytest.raises(ValueError, match=r"CoAdInf.*must not share memory"):
        ca.CoAdInf(g, f, g)
    np.testing.assert_array_equal(f.numpy(), 0.0)
    np.testing.assert_array_equal(g.numpy(), 1.0)
