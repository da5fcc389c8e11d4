"""The `deformation` family against independent references (docs/operations/deformation.md).

Every operation runs on host memory, and on device memory when a GPU is usable. References:
scipy.ndimage.map_coordinates (order=1) for trilinear interpolation with each background strategy,
NumPy implementations written here from the documented definitions (nearest neighbour, Catmull-Rom,
identity backgrounds), closed forms (affine maps, H/V conversions, ramps) and adjointness identities
in float64 (<ApplyH(I, h), J> = <I, Splat(J, h)>, ResampleWorld/SplatWorld, Ad/CoAd).
"""
import numpy as np
import pytest

import pyca as ca
from pyca.testing import both_memory

from deformation_helpers import (MEMS, field, identity, image, is2d, make, map_coords, noisy_identity, origin,
                                 shape, spacing)

RTOL, ATOL = 1e-5, 2e-5
SCIPY_MODE = {
    ca.BACKGROUND_STRATEGY_CLAMP: "nearest",
    ca.BACKGROUND_STRATEGY_WRAP: "grid-wrap",
    ca.BACKGROUND_STRATEGY_PARTIAL_ZERO: "grid-constant",
    ca.BACKGROUND_STRATEGY_ZERO: "constant",
}
LINEAR_BGS = list(SCIPY_MODE)


# ------------------------------------------------------------------------------- helpers
def np_interp(vol, pts, interp, bg, bgval=0.0):
    """Independent NumPy reference of the documented interpolation (docs: "Interpolation and
    background strategies"): separable taps per axis, axes of size 1 ignored. vol: (sx, sy, sz) or
    (sx, sy, sz, 3); pts: (..., 3) voxel coordinates."""
    vol = np.asarray(vol, np.float64)
    field_ = vol.ndim == 4
    n = np.array(vol.shape[:3])
    pts = np.asarray(pts, np.float64)
    flat = pts.reshape(-1, 3)
    out = np.zeros((flat.shape[0], 3) if field_ else flat.shape[0])
    ident_pos = np.where(n == 1, 0.0, flat)
    sample_level = bg in (ca.BACKGROUND_STRATEGY_ZERO, ca.BACKGROUND_STRATEGY_VAL, ca.BACKGROUND_STRATEGY_ID)
    partial = bg in (ca.BACKGROUND_STRATEGY_PARTIAL_ZERO, ca.BACKGROUND_STRATEGY_PARTIAL_ID)
    taps = []  # per axis: (indices raw (P, T), weights (P, T))
    outside = np.zeros(flat.shape[0], bool)
    for a in range(3):
        x = flat[:, a].copy()
        m = n[a]
        if m == 1:
            taps.append((np.zeros((len(x), 1), int), np.ones((len(x), 1))))
            continue
        if sample_level:
            outside |= ~((x >= 0) & (x <= m - 1))
        if bg == ca.BACKGROUND_STRATEGY_CLAMP or sample_level:
            x = np.clip(x, 0, m - 1)
        if bg == ca.BACKGROUND_STRATEGY_WRAP:
            x = np.mod(x, m)
        if interp == ca.INTERP_NN:
            i0 = np.floor(x + 0.5).astype(int)
            idx, w = i0[:, None], np.ones((len(x), 1))
        else:
            i0 = np.floor(x).astype(int)
            t = x - i0
            if interp == ca.INTERP_LINEAR:
                idx = np.stack([i0, i0 + 1], 1)
                w = np.stack([1 - t, t], 1)
            else:
                idx = np.stack([i0 - 1, i0, i0 + 1, i0 + 2], 1)
                w = np.stack([0.5 * (-t ** 3 + 2 * t ** 2 - t), 0.5 * (3 * t ** 3 - 5 * t ** 2 + 2),
                              0.5 * (-3 * t ** 3 + 4 * t ** 2 + t), 0.5 * (t ** 3 - t ** 2)], 1)
        if bg == ca.BACKGROUND_STRATEGY_WRAP:
            idx = np.mod(idx, m)
        elif not partial:
            idx = np.clip(idx, 0, m - 1)
        taps.append((idx, w))
    (ix, wx), (iy, wy), (iz, wz) = taps
    for a in range(ix.shape[1]):
        for b in range(iy.shape[1]):
            for c in range(iz.shape[1]):
                i, j, k = ix[:, a], iy[:, b], iz[:, c]
                w = wx[:, a] * wy[:, b] * wz[:, c]
                ok = (i >= 0) & (i < n[0]) & (j >= 0) & (j < n[1]) & (k >= 0) & (k < n[2])
                v = vol[np.clip(i, 0, n[0] - 1), np.clip(j, 0, n[1] - 1), np.clip(k, 0, n[2] - 1)]
                if bg == ca.BACKGROUND_STRATEGY_PARTIAL_ID:
                    v = np.where(ok[:, None], v, np.stack([i, j, k], 1))
                elif field_:
                    v = np.where(ok[:, None], v, 0.0)
                else:
                    v = np.where(ok, v, 0.0)
                out += (w[:, None] if field_ else w) * v
    if sample_level:
        if bg == ca.BACKGROUND_STRATEGY_ID:
            out[outside] = ident_pos[outside]
        else:
            out[outside] = bgval if bg == ca.BACKGROUND_STRATEGY_VAL else 0.0
    return out.reshape(pts.shape[:-1] + ((3,) if field_ else ()))


def vdot(a, b):
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def assert_adjoint(Ax, y, x, ATy, rtol=1e-5):
    """<A x, y> == <x, A^T y> in float64, relative to the size of the products (|Ax| |y|): the
    inner products themselves may nearly cancel."""
    lhs, rhs = vdot(Ax, y), vdot(x, ATy)
    scale = max(np.linalg.norm(np.asarray(Ax, np.float64)) * np.linalg.norm(np.asarray(y, np.float64)),
                np.linalg.norm(np.asarray(x, np.float64)) * np.linalg.norm(np.asarray(ATy, np.float64)))
    assert abs(lhs - rhs) <= rtol * scale, (lhs, rhs, scale)


# ------------------------------------------------------------------------------- H and V fields
@pytest.mark.parametrize("mem", MEMS)
def test_identity_and_hv_conversions(mem, grid, rng):
    sp = spacing(grid)
    h = field(mem, grid)
    ca.SetToIdentity(h)
    np.testing.assert_array_equal(h.numpy(), identity(grid))
    d = rng.uniform(-2, 2, shape(grid) + (3,)).astype(np.float32)
    hv = make(mem, identity(grid) + d, grid)
    v = field(mem, grid)
    ca.HtoV(v, hv)
    np.testing.assert_allclose(v.numpy(), (identity(grid) + d - identity(grid)) * sp, rtol=RTOL, atol=ATOL)
    back = field(mem, grid)
    ca.VtoH(back, v)
    np.testing.assert_allclose(back.numpy(), identity(grid) + d, rtol=RTOL, atol=ATOL)
    ca.HtoV_I(back)
    np.testing.assert_allclose(back.numpy(), v.numpy(), rtol=RTOL, atol=ATOL)
    ca.VtoH_I(back)
    np.testing.assert_allclose(back.numpy(), identity(grid) + d, rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------------------------- ApplyH
@pytest.mark.parametrize("bg", LINEAR_BGS, ids=lambda b: SCIPY_MODE[b])
@pytest.mark.parametrize("mem", MEMS)
def test_apply_h_matches_scipy(mem, grid, rng, bg):
    a = rng.uniform(-1, 1, shape(grid))
    h = noisy_identity(grid, rng, 3.0)
    out = image(mem, grid)
    ca.ApplyH(out, make(mem, a, grid), make(mem, h, grid), bg, ca.INTERP_LINEAR)
    ref = map_coords(a.astype(np.float32), h, SCIPY_MODE[bg])
    np.testing.assert_allclose(out.numpy(), ref.reshape(shape(grid)), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("interp", [ca.INTERP_NN, ca.INTERP_LINEAR, ca.INTERP_CUBIC], ids=["nn", "linear", "cubic"])
@pytest.mark.parametrize("bg", LINEAR_BGS + [ca.BACKGROUND_STRATEGY_VAL], ids=lambda b: str(int(b)))
@pytest.mark.parametrize("mem", MEMS)
def test_apply_h_all_methods_match_numpy_reference(mem, grid, rng, bg, interp):
    a = rng.uniform(-1, 1, shape(grid)).astype(np.float32)
    h = noisy_identity(grid, rng, 2.0)
    out = image(mem, grid)
    ca.ApplyH(out, make(mem, a, grid), make(mem, h, grid), bg, interp, 2.5)
    ref = np_interp(a, h, interp, bg, 2.5)
    np.testing.assert_allclose(out.numpy(), ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("mem", MEMS)
def test_apply_h_identity_is_a_copy(mem, grid, rng):
    a = rng.uniform(-1, 1, shape(grid)).astype(np.float32)
    im, out, h = make(mem, a, grid), image(mem, grid), field(mem, grid)
    ca.SetToIdentity(h)
    for interp in (ca.INTERP_NN, ca.INTERP_LINEAR, ca.INTERP_CUBIC):
        for bg in LINEAR_BGS + [ca.BACKGROUND_STRATEGY_VAL]:
            ca.ApplyH(out, im, h, bg, interp, 3.0)
            np.testing.assert_allclose(out.numpy(), a, rtol=0, atol=1e-6)
    ca.ApplyH(out, im, h)  # PyCA's defaults: CLAMP, linear
    np.testing.assert_array_equal(out.numpy(), a)


@pytest.mark.parametrize("bg", [ca.BACKGROUND_STRATEGY_PARTIAL_ID, ca.BACKGROUND_STRATEGY_ID,
                                ca.BACKGROUND_STRATEGY_PARTIAL_ZERO, ca.BACKGROUND_STRATEGY_CLAMP],
                         ids=["partial_id", "id", "partial_zero", "clamp"])
@pytest.mark.parametrize("mem", MEMS)
def test_apply_h_field_matches_numpy_reference(mem, grid, rng, bg):
    f = rng.uniform(-1, 1, shape(grid) + (3,)).astype(np.float32)
    h = noisy_identity(grid, rng, 2.0)
    out = field(mem, grid)
    ca.ApplyH(out, make(mem, f, grid), make(mem, h, grid), bg)
    np.testing.assert_allclose(out.numpy(), np_interp(f, h, ca.INTERP_LINEAR, bg), rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------------------------- ApplyV
@pytest.mark.parametrize("mem", MEMS)
def test_apply_v_uses_world_units(mem, grid, rng):
    sp = spacing(grid)
    a = rng.uniform(-1, 1, shape(grid)).astype(np.float32)
    v = rng.uniform(-3, 3, shape(grid) + (3,)).astype(np.float32)
    im, vv, out = make(mem, a, grid), make(mem, v, grid), image(mem, grid)
    for delta in (1.0, 0.4):
        ca.ApplyV(out, im, vv, delta)
        pts = identity(grid) + delta * v.astype(np.float64) / sp
        np.testing.assert_allclose(out.numpy(), map_coords(a, pts, "nearest").reshape(shape(grid)),
                                   rtol=RTOL, atol=ATOL)
        ca.ApplyVInv(out, im, vv, delta, ca.BACKGROUND_STRATEGY_PARTIAL_ZERO)
        pts = identity(grid) - delta * v.astype(np.float64) / sp
        np.testing.assert_allclose(out.numpy(), map_coords(a, pts, "grid-constant").reshape(shape(grid)),
                                   rtol=RTOL, atol=ATOL)
    f = rng.uniform(-1, 1, shape(grid) + (3,)).astype(np.float32)
    fo = field(mem, grid)
    ca.ApplyV(fo, make(mem, f, grid), vv, ca.BACKGROUND_STRATEGY_WRAP, 0.5)
    pts = identity(grid) + 0.5 * v.astype(np.float64) / sp
    ref = np.stack([map_coords(f[..., c], pts, "grid-wrap").reshape(shape(grid)) for c in range(3)], -1)
    np.testing.assert_allclose(fo.numpy(), ref, rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------------------------- composition
def affine(grid, A, b):
    return (identity(grid) @ np.asarray(A, np.float64).T + b).astype(np.float32)


@pytest.mark.parametrize("mem", MEMS)
def test_compose_affine_maps(mem, grid):
    sp = spacing(grid)
    two_d = is2d(grid)
    A1 = np.array([[0.5, 0.1, 0.0], [-0.1, 0.6, 0.05], [0.0, 0.02, 0.5]])
    A2 = np.array([[0.8, 0.05, 0.0], [0.0, 0.85, 0.0], [0.03, 0.0, 0.9]])
    if two_d:  # z stays 0 on a 2-D grid
        A1[2], A1[:, 2], A2[2], A2[:, 2] = 0, 0, 0, 0
    b1, b2 = np.array([2.0, 3.0, 0.0 if two_d else 4.0]), np.array([0.4, 0.3, 0.0 if two_d else 0.2])
    f, g = affine(grid, A1, b1), affine(grid, A2, b2)
    F, G, out = make(mem, f, grid), make(mem, g, grid), field(mem, grid)
    ca.ComposeHH(out, F, G)  # out = f o g; g stays inside, f affine: trilinear is exact
    np.testing.assert_allclose(out.numpy(), g.astype(np.float64) @ A1.T + b1, rtol=RTOL, atol=1e-4)
    # ComposeHV: out(x) = f(x + v / sp), constant v
    vv = np.array([0.5, -1.0, 0.0 if two_d else 0.25])
    V = make(mem, np.broadcast_to(vv * sp, shape(grid) + (3,)), grid)
    ca.ComposeHV(out, F, V, 1.0, ca.BACKGROUND_STRATEGY_PARTIAL_ID)
    inside = identity(grid) + vv
    ok = np.all((inside >= 0) & (inside <= np.array(shape(grid)) - 1), axis=-1)
    np.testing.assert_allclose(out.numpy()[ok], (inside @ A1.T + b1)[ok], rtol=RTOL, atol=1e-4)
    ca.ComposeHVInv(out, F, V, 0.5)
    inside = identity(grid) - 0.5 * vv
    ok = np.all((inside >= 0) & (inside <= np.array(shape(grid)) - 1), axis=-1)
    np.testing.assert_allclose(out.numpy()[ok], (inside @ A1.T + b1)[ok], rtol=RTOL, atol=1e-4)
    # ComposeVH: out(x) = g(x) + delta * v(g(x)) / sp with a V-field linear in x (exact inside)
    C = np.array([[0.2, 0.0, 0.1], [0.0, -0.3, 0.0], [0.1, 0.0, 0.2]])
    if two_d:
        C[2], C[:, 2] = 0, 0
    vfield = (identity(grid) @ C.T) * sp
    ca.ComposeVH(out, make(mem, vfield, grid), G, 0.5)
    np.testing.assert_allclose(out.numpy(), g + 0.5 * (g.astype(np.float64) @ C.T), rtol=RTOL, atol=1e-4)
    ca.ComposeVInvH(out, make(mem, vfield, grid), G)
    np.testing.assert_allclose(out.numpy(), g - (g.astype(np.float64) @ C.T), rtol=RTOL, atol=1e-4)


@pytest.mark.parametrize("mem", MEMS)
def test_compose_hh_partial_id_outside(mem, grid, rng):
    f = noisy_identity(grid, rng, 1.0)
    if is2d(grid):
        f[..., 2] = 0.0
    g = noisy_identity(grid, rng, 3.0)
    out = field(mem, grid)
    ca.ComposeHH(out, make(mem, f, grid), make(mem, g, grid))
    ref = np_interp(f, g, ca.INTERP_LINEAR, ca.BACKGROUND_STRATEGY_PARTIAL_ID)
    np.testing.assert_allclose(out.numpy(), ref, rtol=RTOL, atol=1e-4)


# ------------------------------------------------------------------------------- splatting
@pytest.mark.parametrize("mem", MEMS)
def test_splat_is_the_adjoint_of_apply_h(mem, grid, rng):
    I = rng.uniform(-1, 1, shape(grid))
    J = rng.uniform(-1, 1, shape(grid))
    h = make(mem, noisy_identity(grid, rng, 2.5), grid)
    AI, SJ = image(mem, grid), image(mem, grid)
    ca.ApplyH(AI, make(mem, I, grid), h, ca.BACKGROUND_STRATEGY_PARTIAL_ZERO)
    ca.Splat(SJ, h, make(mem, J, grid))
    assert_adjoint(AI.numpy(), J.astype(np.float32), I.astype(np.float32), SJ.numpy())
    # fields: component by component
    F, K = rng.uniform(-1, 1, shape(grid) + (3,)), rng.uniform(-1, 1, shape(grid) + (3,))
    AF, SK = field(mem, grid), field(mem, grid)
    ca.ApplyH(AF, make(mem, F, grid), h, ca.BACKGROUND_STRATEGY_PARTIAL_ZERO)
    ca.Splat(SK, h, make(mem, K, grid))
    assert_adjoint(AF.numpy(), K.astype(np.float32), F.astype(np.float32), SK.numpy())


@pytest.mark.parametrize("mem", MEMS)
def test_splat_normalized_and_identity(mem, grid, rng):
    h = make(mem, noisy_identity(grid, rng, 2.0), grid)
    out = image(mem, grid)
    ca.Splat(out, h, make(mem, np.full(shape(grid), 3.0), grid), True)
    o = out.numpy()
    hit = o != 0
    assert hit.mean() > 0.5
    np.testing.assert_allclose(o[hit], 3.0, rtol=1e-5)
    ident = field(mem, grid)
    ca.SetToIdentity(ident)
    a = rng.uniform(-1, 1, shape(grid)).astype(np.float32)
    ca.Splat(out, ident, make(mem, a, grid))
    np.testing.assert_allclose(out.numpy(), a, rtol=0, atol=1e-6)


# The CUDA splat takes a short path for warps whose samples are finite with all 8 taps inside the
# grid, the general one otherwise, and carries taps along z between slices (docs/operations/
# deformation.md, "Splat on the GPU"). This grid has a partial last warp along x (70 = 2 * 32 + 6)
# and a z extent that the 8-slice runs do not divide; the positions send every warp down one path
# ("inside"), mix both ("smooth"), or leave the grid ("outside").
SPLAT_GRID_SIZE = (70, 36, 21)


def splat_positions(kind):
    n = np.array(SPLAT_GRID_SIZE)
    idx = np.stack(np.meshgrid(*[np.arange(k, dtype=np.float64) for k in n], indexing="ij"), axis=-1)
    if kind == "identity":
        return idx.astype(np.float32)
    u = idx / n
    d = np.stack([np.sin(2 * np.pi * (u[..., 0] + 2 * u[..., 1]) + k) * np.cos(2 * np.pi * u[..., 2] + k)
                  for k in range(3)], axis=-1)
    h = idx + (6.0 if kind == "outside" else 2.5) * d
    if kind == "inside":
        h = np.clip(h, 0.0, n - 1.01)
    return h.astype(np.float32)


def np_splat(h, vals):
    """Trilinear splat with PARTIAL_ZERO in float64, taps of zero weight skipped (np.add.at)."""
    n = vals.shape[:3]
    out = np.zeros(vals.shape, np.float64)
    i0 = np.floor(h).astype(np.int64)
    f = h - i0
    for corner in np.ndindex(2, 2, 2):
        idx = [i0[..., a] + corner[a] for a in range(3)]
        w = np.prod([f[..., a] if corner[a] else 1 - f[..., a] for a in range(3)], axis=0)
        ok = (w != 0) & np.all([(idx[a] >= 0) & (idx[a] < n[a]) for a in range(3)], axis=0)
        v = vals[ok] * (w[ok][:, None] if vals.ndim == 4 else w[ok])
        np.add.at(out, tuple(idx[a][ok] for a in range(3)), v)
    return out


@pytest.mark.parametrize("kind", ["identity", "inside", "smooth", "outside"])
@pytest.mark.parametrize("ncomp", [1, 3], ids=["image", "field"])
@both_memory(rtol=1e-5, atol=2e-5)
def test_splat_gpu_paths(mem, kind, ncomp):
    grid = ca.GridInfo(SPLAT_GRID_SIZE, (1.0, 1.5, 2.0))
    rng = np.random.default_rng(3)
    hn = splat_positions(kind)
    vals = rng.uniform(1.0, 2.0, SPLAT_GRID_SIZE + ((3,) if ncomp == 3 else ()))
    vals[:20] = 0.0  # a background of zeros (adds of 0 are not sent on the GPU)
    h = make(mem, hn, grid)
    src = make(mem, vals, grid)
    out = field(mem, grid) if ncomp == 3 else image(mem, grid)
    ca.Splat(out, h, src)
    ref = np_splat(hn.astype(np.float64), vals.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=2e-5)
    # normalised: compared where the splatted weight is not tiny (the quotient of two sums)
    norm = field(mem, grid) if ncomp == 3 else image(mem, grid)
    ca.Splat(norm, h, src, True)
    w = np_splat(hn.astype(np.float64), np.ones(SPLAT_GRID_SIZE))
    big = w > 0.05
    expect = ref[big] / (w[big][:, None] if ncomp == 3 else w[big])
    np.testing.assert_allclose(norm.numpy()[big], expect, rtol=1e-4)
    return out, norm.numpy()[big]


@pytest.mark.parametrize("kind", ["identity", "smooth"])
@both_memory(rtol=1e-5, atol=2e-5)
def test_splat_nonfinite_values(mem, kind):
    """An inf or NaN value reaches only the taps of nonzero weight (through the identity: one)."""
    grid = ca.GridInfo(SPLAT_GRID_SIZE)
    hn = splat_positions(kind)
    vals = np.ones(SPLAT_GRID_SIZE)
    vals[35, 18, 10] = np.inf
    vals[10, 5, 3] = np.nan
    out = image(mem, grid)
    ca.Splat(out, make(mem, hn, grid), make(mem, vals, grid))
    ref = np_splat(hn.astype(np.float64), vals)
    o = out.numpy()
    np.testing.assert_array_equal(np.isposinf(o), np.isposinf(ref))
    np.testing.assert_array_equal(np.isnan(o), np.isnan(ref))
    if kind == "identity":
        assert np.isposinf(o).sum() == 1 and np.isnan(o).sum() == 1
    return out


@pytest.mark.parametrize("bg", LINEAR_BGS, ids=lambda b: SCIPY_MODE[b])
@pytest.mark.parametrize("mem", MEMS)
def test_resample_world_and_splat_world_are_adjoint(mem, rng, bg):
    ga = ca.GridInfo(ca.Vec3Di(17, 13, 9), ca.Vec3Df(1.0, 1.5, 2.0), ca.Vec3Df(0.3, -1.0, 2.0))
    gb = ca.GridInfo(ca.Vec3Di(11, 19, 7), ca.Vec3Df(1.7, 1.1, 2.5), ca.Vec3Df(-1.013, 0.517, 1.029))
    a = rng.uniform(-1, 1, shape(ga)).astype(np.float32)
    b = rng.uniform(-1, 1, shape(gb)).astype(np.float32)
    Ra, Sb, w = image(mem, gb), image(mem, ga), image(mem, ga)
    ca.ResampleWorld(Ra, make(mem, a, ga), bg)
    ca.SplatWorld(Sb, make(mem, b, gb), bg)
    assert_adjoint(Ra.numpy(), b, a, Sb.numpy())
    # ResampleWorld reference: out(i) = a((o_b + s_b i - o_a) / s_a)
    pts = (origin(gb) + spacing(gb) * identity(gb) - origin(ga)) / spacing(ga)
    np.testing.assert_allclose(Ra.numpy(), map_coords(a, pts, SCIPY_MODE[bg]).reshape(shape(gb)),
                               rtol=RTOL, atol=ATOL)
    # the weights are the splat of ones
    ones = image(mem, ga)
    ca.SplatWorld(ones, make(mem, np.ones(shape(gb)), gb), bg)
    ca.SplatWorld(Sb, make(mem, b, gb), w, bg)
    np.testing.assert_allclose(w.numpy(), ones.numpy(), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------- Ad / CoAd
@pytest.mark.parametrize("bg", LINEAR_BGS, ids=lambda b: SCIPY_MODE[b])
@pytest.mark.parametrize("mem", MEMS)
def test_ad_and_coad_are_adjoint(mem, grid, rng, bg):
    g = noisy_identity(grid, rng, 0.8)
    if is2d(grid):
        g[..., 2] = 0.0
    X = rng.uniform(-1, 1, shape(grid) + (3,))
    m = rng.uniform(-1, 1, shape(grid) + (3,))
    if is2d(grid):
        X[..., 2] = m[..., 2] = 0.0
    G = make(mem, g, grid)
    AdX, CoAdm = field(mem, grid), field(mem, grid)
    ca.Ad(AdX, G, make(mem, X, grid), bg)
    ca.CoAd(CoAdm, G, make(mem, m, grid), bg)
    assert_adjoint(AdX.numpy(), m.astype(np.float32), X.astype(np.float32), CoAdm.numpy())


@pytest.mark.parametrize("mem", MEMS)
def test_coad_closed_form_for_a_linear_map(mem, grid, rng):
    """g(x) = A x + b (voxel units): Dg = A inside, so CoAd m (x) = det(A) S^-1 A^T S m(g(x)); at the
    border Dg is PyCA's (central differences with BC_CLAMP): the column of an axis at its first or last
    voxel is half of A's."""
    sp = spacing(grid)
    A = np.array([[0.9, 0.1, 0.0], [-0.05, 0.95, 0.0], [0.0, 0.0, 0.8]])
    if is2d(grid):
        A[2, 2] = 1.0
    b = np.array([0.5, 0.7, 0.0 if is2d(grid) else 0.3])
    g = affine(grid, A, b)
    if is2d(grid):
        g[..., 2] = 0.0
    mconst = np.array([0.3, -0.2, 0.0 if is2d(grid) else 0.5])
    M = make(mem, np.broadcast_to(mconst, shape(grid) + (3,)), grid)
    out = field(mem, grid)
    ca.CoAd(out, make(mem, g, grid), M, ca.BACKGROUND_STRATEGY_CLAMP)
    # Dg per voxel: A with the column of each axis halved at that axis's first and last voxel.
    n = shape(grid)
    J = np.broadcast_to(A, n + (3, 3)).copy()
    for b in range(3):
        if n[b] == 1:
            continue
        edge = [slice(None)] * 3
        for i in (0, n[b] - 1):
            edge[b] = i
            J[tuple(edge) + (slice(None), b)] *= 0.5
    expect = np.linalg.det(J)[..., None] * np.einsum("...ab,a->...b", J, sp * mconst) / sp
    np.testing.assert_allclose(out.numpy(), expect, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------- resampling
@pytest.mark.parametrize("mem", MEMS)
def test_resample_of_a_ramp_is_exact_inside(mem):
    gi, go = ca.GridInfo(ca.Vec3Di(32, 24, 15)), ca.GridInfo(ca.Vec3Di(16, 36, 5))
    ramp = lambda p: 2.0 * p[..., 0] - p[..., 1] + 0.5 * p[..., 2]  # noqa: E731
    a = ramp(identity(gi))
    out = image(mem, go)
    ca.Resample(out, make(mem, a, gi))
    r = np.array(shape(gi)) / np.array(shape(go))
    p = r * identity(go) + (r - 1) / 2
    inside = np.all((p >= 0) & (p <= np.array(shape(gi)) - 1), axis=-1)
    assert inside.mean() > 0.8
    np.testing.assert_allclose(out.numpy()[inside], ramp(p)[inside], rtol=1e-5, atol=1e-4)
    ca.Resample(out, make(mem, a, gi), ca.BACKGROUND_STRATEGY_CLAMP, ca.INTERP_LINEAR, False)
    p = r * identity(go)
    inside = np.all(p <= np.array(shape(gi)) - 1, axis=-1)
    np.testing.assert_allclose(out.numpy()[inside], ramp(p)[inside], rtol=1e-5, atol=1e-4)
    # fields, rescaleVector divides component k by r_k
    fo = field(mem, go)
    ca.Resample(fo, make(mem, np.broadcast_to([2.0, 3.0, 6.0], shape(gi) + (3,)), gi),
                ca.BACKGROUND_STRATEGY_CLAMP, True)
    np.testing.assert_allclose(fo.numpy(), np.broadcast_to(np.array([2.0, 3.0, 6.0]) / r, shape(go) + (3,)),
                               rtol=1e-6)


@pytest.mark.parametrize("mem", MEMS)
def test_resample_aa_removes_aliasing(mem):
    gi, go = ca.GridInfo(ca.Vec3Di(48, 9, 1)), ca.GridInfo(ca.Vec3Di(16, 9, 1))
    a = np.where(np.arange(48) % 2, 1.0, -1.0)[:, None, None] * np.ones(shape(gi))
    out, plain = image(mem, go), image(mem, go)
    ca.ResampleAA(out, make(mem, a, gi))
    ca.Resample(plain, make(mem, a, gi))
    assert np.abs(plain.numpy()[2:14]).max() > 0.5
    assert np.abs(out.numpy()[2:14]).max() < 0.01
    # a smooth ramp survives (up to the border)
    b = np.linspace(0, 1, 48)[:, None, None] * np.ones(shape(gi))
    ca.ResampleAA(out, make(mem, b, gi))
    ref = (3 * np.arange(16) + 1) / 47.0
    np.testing.assert_allclose(out.numpy()[3:13, :, 0], np.broadcast_to(ref[3:13, None], (10, 9)), atol=1e-5)


@pytest.mark.parametrize("mem", MEMS)
def test_subvol_round_trip(mem, grid, rng):
    a = rng.uniform(-1, 1, shape(grid)).astype(np.float32)
    im = make(mem, a, grid)
    ext = (5, 6, 1 if is2d(grid) else 7)
    start = (2, 3, 0 if is2d(grid) else 4)
    sub = ca.Image3D(ca.GridInfo(ca.Vec3Di(*ext)), mem)
    ca.SubVol(sub, im, ca.Vec3Di(*start))
    sl = tuple(slice(s, s + e) for s, e in zip(start, ext))
    np.testing.assert_array_equal(sub.numpy(), a[sl])
    back = make(mem, np.zeros(shape(grid)), grid)
    ca.SetSubVol_I(back, sub, ca.Vec3Di(*start))
    expect = np.zeros(shape(grid), np.float32)
    expect[sl] = a[sl]
    np.testing.assert_array_equal(back.numpy(), expect)
    f = rng.uniform(-1, 1, shape(grid) + (3,)).astype(np.float32)
    fsub = ca.Field3D(ca.GridInfo(ca.Vec3Di(*ext)), mem)
    ca.SubVol(fsub, make(mem, f, grid), ca.Vec3Di(*start))
    np.testing.assert_array_equal(fsub.numpy(), f[sl])
    with pytest.raises(IndexError, match="SubVol"):
        ca.SubVol(sub, im, ca.Vec3Di(shape(grid)[0] - 2, 0, 0))
    with pytest.raises(IndexError, match="SetSubVol_I"):
        ca.SetSubVol_I(back, sub, ca.Vec3Di(-1, 0, 0))


# ------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("mem", MEMS)
def test_errors_name_the_op_and_argument_and_leave_inputs_unchanged(mem, grid, rng):
    a = rng.uniform(-1, 1, shape(grid)).astype(np.float32)
    im = make(mem, a, grid)
    h = field(mem, grid)
    ca.SetToIdentity(h)
    small = ca.Image3D(ca.GridInfo(ca.Vec3Di(5, 4, 3)), mem)
    with pytest.raises(ValueError, match=r"ApplyH.*'h'"):  # h must have out's size; im need not
        ca.ApplyH(small, im, h)
    with pytest.raises(ValueError, match=r"Splat.*'h'"):
        ca.Splat(small, h, im)
    out = image(mem, grid)
    with pytest.raises(ValueError, match=r"ApplyH: background strategy BACKGROUND_STRATEGY_PARTIAL_ID"):
        ca.ApplyH(out, im, h, ca.BACKGROUND_STRATEGY_PARTIAL_ID)
    with pytest.raises(ValueError, match=r"ApplyH.*must not share memory"):
        ca.ApplyH(im, im, h)
    with pytest.raises(ValueError, match="ComposeVH"):
        ca.ComposeVH(field(mem, grid), h, h, 1.0, ca.BACKGROUND_STRATEGY_PARTIAL_ID)
    with pytest.raises(ValueError, match="ComposeHH.*must not share memory"):
        ca.ComposeHH(h, h, h)
    np.testing.assert_array_equal(im.numpy(), a)
    np.testing.assert_array_equal(h.numpy(), identity(grid))
    if ca.cuda_available():
        other = ca.MEM_HOST if mem == ca.MEM_DEVICE else ca.MEM_DEVICE
        with pytest.raises(ca.MemoryTypeError, match=r"ApplyH"):
            ca.ApplyH(out, im, ca.Field3D(grid, other))
        np.testing.assert_array_equal(im.numpy(), a)


# ------------------------------------------------------------------------------- PyCA additions
@pytest.mark.parametrize("bg", [ca.BACKGROUND_STRATEGY_CLAMP, ca.BACKGROUND_STRATEGY_PARTIAL_ZERO],
                         ids=lambda b: SCIPY_MODE[b])
@pytest.mark.parametrize("mem", MEMS)
def test_compose_translation_matches_scipy(mem, grid, rng, bg):
    t = np.array([1.3, -0.7, 0.4])  # voxel units; t.z ignored on a 2-D grid
    pts = identity(grid) + t
    a = rng.uniform(-1, 1, shape(grid))
    out = image(mem, grid)
    if bg == ca.BACKGROUND_STRATEGY_CLAMP:
        ca.ComposeTranslation(out, make(mem, a, grid), ca.Vec3Df(*t))  # PyCA's default bg: CLAMP
    else:
        ca.ComposeTranslation(out, make(mem, a, grid), ca.Vec3Df(*t), bg)
    np.testing.assert_allclose(out.numpy(), map_coords(a, pts, SCIPY_MODE[bg]), rtol=RTOL, atol=ATOL)
    f = rng.uniform(-1, 1, shape(grid) + (3,))
    fo = field(mem, grid)
    ca.ComposeTranslation(fo, make(mem, f, grid), ca.Vec3Df(*t), bg)
    ref = np.stack([map_coords(f[..., c], pts, SCIPY_MODE[bg]) for c in range(3)], axis=-1)
    np.testing.assert_allclose(fo.numpy(), ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("mem", MEMS)
def test_splat_field_is_the_adjoint_of_field_apply_h(mem, grid, rng):
    h = make(mem, noisy_identity(grid, rng, 2.5), grid)
    F, K = rng.uniform(-1, 1, shape(grid) + (3,)), rng.uniform(-1, 1, shape(grid) + (3,))
    AF, SK = field(mem, grid), field(mem, grid)
    ca.ApplyH(AF, make(mem, F, grid), h, ca.BACKGROUND_STRATEGY_PARTIAL_ZERO)
    ca.SplatField(SK, make(mem, K, grid), h)  # PyCA's order: out, field, H-field
    assert_adjoint(AF.numpy(), K.astype(np.float32), F.astype(np.float32), SK.numpy())
    ca.SplatField(SK, make(mem, np.full(shape(grid) + (3,), 2.0), grid), h, True)
    o = SK.numpy()
    hit = np.any(o != 0, axis=-1)
    assert hit.mean() > 0.5
    np.testing.assert_allclose(o[hit], 2.0, rtol=1e-5)


@pytest.mark.parametrize("mem", MEMS)
def test_reproject_to_unit_vec(mem, grid, rng):
    f = rng.uniform(-0.9, 0.9, shape(grid) + (3,)).astype(np.float32)
    n = np.linalg.norm(f.astype(np.float64), axis=-1, keepdims=True)
    ref = np.where(n > 1, f / n, f)
    F = make(mem, f, grid)
    ca.ReprojectToUnitVec(F)
    assert (n > 1).mean() > 0.2 and (n <= 1).mean() > 0.2
    np.testing.assert_allclose(F.numpy(), ref, rtol=1e-6, atol=1e-6)


def _affine_2d_safe(grid, A, b):
    A, b = np.array(A, float), np.array(b, float)
    if is2d(grid):
        A[2], A[:, 2], b[2] = 0, 0, 0
        A[2, 2] = 1.0
    return A, b


@pytest.mark.parametrize("mem", MEMS)
def test_fixed_point_inverse_of_an_affine_map(mem, grid, rng):
    A, b = _affine_2d_safe(grid, [[1.05, 0.03, 0.0], [-0.02, 0.97, 0.01], [0.0, 0.02, 1.04]], [0.6, -0.4, 0.3])
    g = (identity(grid) @ A.T + b).astype(np.float32)
    if is2d(grid):
        g[..., 2] = 0.0
    G, ginv = make(mem, g, grid), field(mem, grid)
    # two steps (PyCA's default) against a NumPy reference of the documented iteration
    h0 = noisy_identity(grid, rng, 0.3)
    if is2d(grid):
        h0[..., 2] = 0.0
    ginv = make(mem, h0, grid)
    ca.FixedPointInverse(ginv, G)
    h = h0.astype(np.float64)
    for _ in range(2):
        h = h + identity(grid) - np_interp(g, h, ca.INTERP_LINEAR, ca.BACKGROUND_STRATEGY_PARTIAL_ID)
    np.testing.assert_allclose(ginv.numpy(), h, rtol=1e-5, atol=1e-4)
    # many steps from the identity: the closed-form inverse A^-1 (x - b), away from the border
    ca.SetToIdentity(ginv)
    ca.FixedPointInverse(ginv, G, 25)
    exact = (identity(grid) - b) @ np.linalg.inv(A).T
    n = np.array(shape(grid))
    ok = np.all((exact >= 2) & (exact <= n - 3) | (n == 1), axis=-1)
    assert ok.mean() > 0.3
    np.testing.assert_allclose(ginv.numpy()[ok], exact[ok], atol=1e-3)
    # g o ginv = id there
    gg = field(mem, grid)
    ca.ComposeHH(gg, G, ginv)
    np.testing.assert_allclose(gg.numpy()[ok], identity(grid)[ok], atol=1e-3)


@pytest.mark.parametrize("mem", MEMS)
def test_update_inverse(mem, grid, rng):
    sp = spacing(grid)
    B, d = _affine_2d_safe(grid, [[0.95, 0.02, 0.0], [0.01, 1.03, 0.0], [0.0, 0.01, 0.98]], [0.5, -0.3, 0.2])
    C = np.array([[0.04, 0.01, 0.0], [0.0, -0.03, 0.02], [0.01, 0.0, 0.05]])
    if is2d(grid):
        C[2], C[:, 2] = 0, 0
    ginv0 = (identity(grid) @ B.T + d).astype(np.float32)
    if is2d(grid):
        ginv0[..., 2] = 0.0
    w = ((identity(grid) @ C.T + np.array([0.2, -0.1, 0.0 if is2d(grid) else 0.1])) * sp).astype(np.float32)
    G0, W = make(mem, ginv0, grid), make(mem, w, grid)
    g1, scratch = field(mem, grid), field(mem, grid)
    ca.UpdateInverse(g1, scratch, G0, W)  # PyCA's default: 3 iterations
    h = ginv0.astype(np.float64)
    for _ in range(3):
        q = identity(grid) - np_interp(w, h, ca.INTERP_LINEAR, ca.BACKGROUND_STRATEGY_PARTIAL_ZERO) / sp
        h = np_interp(ginv0, q, ca.INTERP_LINEAR, ca.BACKGROUND_STRATEGY_PARTIAL_ID)
    np.testing.assert_allclose(g1.numpy(), h, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(scratch.numpy(), q, rtol=1e-5, atol=1e-4)
    # converged: ginv1 = ginv0 o (id - w o ginv1 / sp), i.e. the inverse of g1 = g0 + w / sp
    ca.UpdateInverse(g1, scratch, G0, W, 30)
    r = g1.numpy().astype(np.float64)
    n = np.array(shape(grid))
    wr = r @ C.T + np.array([0.2, -0.1, 0.0 if is2d(grid) else 0.1])  # w(r) / sp, exact inside
    q = identity(grid) - wr
    inside = lambda p: np.all((p >= 1) & (p <= n - 2) | (n == 1), axis=-1)  # noqa: E731
    ok = inside(r) & inside(q)
    assert ok.mean() > 0.3
    rhs = q @ B.T + d
    np.testing.assert_allclose(r[ok], rhs[ok], atol=1e-3)


@pytest.mark.parametrize("mem", MEMS)
def test_pyca_additions_reject_bad_inputs(mem, grid, rng):
    a = rng.uniform(-1, 1, shape(grid)).astype(np.float32)
    im = make(mem, a, grid)
    h = field(mem, grid)
    ca.SetToIdentity(h)
    with pytest.raises(ValueError, match=r"ComposeTranslation: background strategy BACKGROUND_STRATEGY_PARTIAL_ID"):
        ca.ComposeTranslation(image(mem, grid), im, ca.Vec3Df(1, 0, 0), ca.BACKGROUND_STRATEGY_PARTIAL_ID)
    with pytest.raises(ValueError, match=r"SplatField.*must not share memory"):
        ca.SplatField(h, field(mem, grid), h)
    with pytest.raises(ValueError, match=r"FixedPointInverse.*must not share memory"):
        ca.FixedPointInverse(h, h)
    small = ca.Field3D(ca.GridInfo(ca.Vec3Di(5, 4, 3)), mem)
    with pytest.raises(ValueError, match=r"UpdateInverse.*'w'"):
        ca.UpdateInverse(field(mem, grid), field(mem, grid), h, small)
    with pytest.raises(TypeError):
        ca.ReprojectToUnitVec(im)
    np.testing.assert_array_equal(im.numpy(), a)
    np.testing.assert_array_equal(h.numpy(), identity(grid))
