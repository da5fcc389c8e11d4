"""PyCA's finite differences against NumPy: the FiniteDiff table over every dim x diffType x bc,
Gradient, GradientMask, GradientMag, Divergence, Laplacian, UpwindDiff, UpwindGradMag, Jacobian,
JacDetH (both forms) and JacDetV, on a 2-D grid with anisotropic spacing and a 3-D grid.
Derivatives are per world unit (spacing divides); along z on a 2-D grid they are 0."""
import numpy as np
import pytest

import pyca as ca
from compat_helpers import (GRID_IDS, both_memory, diff_ref, field, gradient_ref, grids, identity, image, make_grid,
                            rand, spacing)

DIMS = [ca.DIM_X, ca.DIM_Y, ca.DIM_Z]
DIFFS = [ca.DIFF_FORWARD, ca.DIFF_BACKWARD, ca.DIFF_CENTRAL]
BCS = [ca.BC_CLAMP, ca.BC_WRAP, ca.BC_APPROX]
DNAME = {ca.DIFF_FORWARD: "fwd", ca.DIFF_BACKWARD: "bwd", ca.DIFF_CENTRAL: "cen"}
BNAME = {ca.BC_CLAMP: "clamp", ca.BC_WRAP: "wrap", ca.BC_APPROX: "approx"}

def _cases(dims=True, bcs=BCS):
    """(dim,) diff, bc, gid parameters over every combination."""
    out = []
    for diff in DIFFS:
        for bc in bcs:
            for dim in (DIMS if dims else [None]):
                for gid in GRID_IDS:
                    args = ((dim,) if dims else ()) + (diff, bc, gid)
                    ident = "-".join(([("x", "y", "z")[int(dim)]] if dims else []) + [DNAME[diff], BNAME[bc], gid])
                    out.append(pytest.param(*args, id=ident))
    return out


@pytest.mark.parametrize("dim, diff, bc, gid", _cases())
@both_memory(rtol=1e-5, atol=1e-5)
def test_finite_diff_table(dim, diff, bc, gid, mem):
    g = make_grid(gid)
    A = rand(g, np.random.default_rng(31))
    out = ca.Image3D(g, mem)
    ca.FiniteDiff(out, image(A, g, mem), dim, diff, bc)
    want = diff_ref(A, int(dim), diff, bc) / spacing(g)[int(dim)]
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
    return out


@pytest.mark.parametrize("diff, bc, gid", _cases(dims=False))
@both_memory(rtol=1e-5, atol=1e-5)
def test_gradient_magnitude_divergence(diff, bc, gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(32)
    A, V = rand(g, rng), rand(g, rng, ncomp=3)
    a, v = image(A, g, mem), field(V, g, mem)
    grad = ca.Field3D(g, mem)
    ca.Gradient(grad, a, diff, bc)
    G = gradient_ref(A, g, diff, bc)
    np.testing.assert_allclose(grad.numpy(), G, rtol=1e-5, atol=1e-5)
    mag = ca.Image3D(g, mem)
    ca.GradientMag(mag, a, diff, bc)
    np.testing.assert_allclose(mag.numpy(), np.linalg.norm(G, axis=-1), rtol=1e-5, atol=1e-5)
    div = ca.Image3D(g, mem)
    ca.Divergence(div, v, diff, bc)
    want = sum(diff_ref(V[..., k], k, diff, bc) / spacing(g)[k] for k in range(3))
    np.testing.assert_allclose(div.numpy(), want, rtol=1e-5, atol=1e-5)
    return grad, mag, div


@grids
@both_memory(rtol=1e-5, atol=1e-5)
def test_defaults_are_pycas(gid, mem):
    # Gradient / FiniteDiff default to central differences with clamped borders
    g = make_grid(gid)
    A = rand(g, np.random.default_rng(33))
    a = image(A, g, mem)
    grad = ca.Field3D(g, mem)
    ca.Gradient(grad, a)
    np.testing.assert_allclose(grad.numpy(), gradient_ref(A, g, ca.DIFF_CENTRAL, ca.BC_CLAMP), rtol=1e-5, atol=1e-5)
    out = ca.Image3D(g, mem)
    ca.FiniteDiff(out, a, ca.DIM_Y)
    np.testing.assert_allclose(out.numpy(), diff_ref(A, 1, ca.DIFF_CENTRAL, ca.BC_CLAMP) / spacing(g)[1],
                               rtol=1e-5, atol=1e-5)
    return grad


def _diff2_ref(f, axis, bc):
    n = f.shape[axis]
    if n == 1:
        return np.zeros_like(f)
    f = np.moveaxis(f, axis, 0)
    if bc == ca.BC_WRAP:
        d2 = np.roll(f, -1, 0) - 2 * f + np.roll(f, 1, 0)
    else:
        nxt = np.concatenate([f[1:], f[-1:]], 0)
        prv = np.concatenate([f[:1], f[:-1]], 0)
        d2 = nxt - 2 * f + prv
        if bc == ca.BC_APPROX:
            if n < 3:
                d2 = np.zeros_like(f)
            else:
                d2[0], d2[-1] = d2[1], d2[-2]  # the nearest centred stencil inside
    return np.moveaxis(d2, 0, axis)


@grids
@pytest.mark.parametrize("bc", BCS, ids=BNAME.get)
@both_memory(rtol=1e-5, atol=1e-4)
def test_laplacian(bc, gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(34)
    A, V = rand(g, rng), rand(g, rng, ncomp=3)
    sp = spacing(g)
    lap = lambda X: sum(_diff2_ref(X, k, bc) / sp[k] ** 2 for k in range(3))  # noqa: E731
    out = ca.Image3D(g, mem)
    ca.Laplacian(out, image(A, g, mem), bc)
    np.testing.assert_allclose(out.numpy(), lap(A), rtol=1e-5, atol=1e-4)
    fo = ca.Field3D(g, mem)
    ca.Laplacian(fo, field(V, g, mem), bc)
    np.testing.assert_allclose(fo.numpy(), np.stack([lap(V[..., c]) for c in range(3)], -1), rtol=1e-5, atol=1e-4)
    return out, fo


def _masked_diff_ref(f, m, axis, diff, bc):
    """PyCA's finiteDiffMask: neighbours read with clamping; a masked-out neighbour takes the centre's
    value; with BC_APPROX a central difference at the border or next to a masked voxel is one-sided
    (no factor 1/2); 0 where the mask is 0."""
    n = f.shape[axis]
    if n == 1:
        return np.zeros_like(f)
    f, m = np.moveaxis(f, axis, 0), np.moveaxis(m, axis, 0)
    idx = np.arange(n)
    nx, pv = np.minimum(idx + 1, n - 1), np.maximum(idx - 1, 0)
    vn = np.where(m[nx] == 0, f, f[nx])
    vp = np.where(m[pv] == 0, f, f[pv])
    if diff == ca.DIFF_FORWARD:
        r = vn - f
    elif diff == ca.DIFF_BACKWARD:
        r = f - vp
    else:
        r = 0.5 * (vn - vp)
        if bc == ca.BC_APPROX:
            edge = np.zeros(f.shape, bool)
            edge[0] = edge[-1] = True
            edge |= (m[nx] == 0) | (m[pv] == 0)
            r = np.where(edge, vn - vp, r)
    r = np.where(m != 0, r, 0.0)
    return np.moveaxis(r, 0, axis)


# PyCA's masked differences do not wrap (BC_WRAP reads clamped neighbours there); pyca's wrap the
# grid border, so BC_WRAP is left out of this comparison
@pytest.mark.parametrize("diff, bc, gid", _cases(dims=False, bcs=[ca.BC_CLAMP, ca.BC_APPROX]))
@both_memory(rtol=1e-5, atol=1e-5)
def test_gradient_mask(diff, bc, gid, mem):
    # PyCA's test_GradMask (central, clamp, a mask 0 within 10 voxels of the border) and random masks
    g = make_grid(gid)
    rng = np.random.default_rng(35)
    A = rand(g, rng)
    border = np.zeros(A.shape)
    border[3:-3, 3:-3] = 1.0
    res = []
    for M in (border, (rng.uniform(size=A.shape) > 0.3).astype(np.float64)):
        out = ca.Field3D(g, mem)
        ca.GradientMask(out, image(A, g, mem), image(M, g, mem), diff, bc)
        want = np.stack([_masked_diff_ref(A, M, k, diff, bc) / spacing(g)[k] for k in range(3)], -1)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
        res.append(out)
    return res


@grids
@both_memory(rtol=1e-5, atol=1e-5)
def test_upwind(gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(36)
    A, S = rand(g, rng), rand(g, rng)
    a, s = image(A, g, mem), image(S, g, mem)
    sp = spacing(g)
    res = []
    for dim in (0, 1, 2):
        out = ca.Image3D(g, mem)
        ca.UpwindDiff(out, a, s, DIMS[dim])
        fwd = diff_ref(A, dim, ca.DIFF_FORWARD, ca.BC_CLAMP)
        bwd = diff_ref(A, dim, ca.DIFF_BACKWARD, ca.BC_CLAMP)
        np.testing.assert_allclose(out.numpy(), np.where(S < 0, fwd, bwd) / sp[dim], rtol=1e-5, atol=1e-5)
        res.append(out)
    # Osher-Sethian upwind gradient magnitude, times the speed
    total = np.zeros_like(A)
    for k in range(3):
        if A.shape[k] == 1:
            continue
        # PyCA's upwindGradMag: forward difference (backward at the last voxel) and backward
        # difference (forward at the first)
        fw = np.moveaxis(np.diff(A, axis=k), k, 0)
        dp = np.moveaxis(np.concatenate([fw, fw[-1:]], 0), 0, k) / sp[k]
        dm = np.moveaxis(np.concatenate([fw[:1], fw], 0), 0, k) / sp[k]
        pos = np.maximum(dp, 0) ** 2 + np.maximum(-dm, 0) ** 2
        neg = np.minimum(dp, 0) ** 2 + np.minimum(-dm, 0) ** 2
        total += np.where(S < 0, neg, pos)
    out = ca.Image3D(g, mem)
    ca.UpwindGradMag(out, a, s)
    np.testing.assert_allclose(out.numpy(), S * np.sqrt(total), rtol=1e-5, atol=1e-5)
    res.append(out)
    return res


def _random_h(g, rng, amp=0.8):
    V = rand(g, rng, -amp, amp, ncomp=3)
    if g.size().z == 1:
        V[..., 2] = 0.0
    return identity(g) + V


def _det(J, is2d):
    if is2d:
        return J[..., 0, 0] * J[..., 1, 1] - J[..., 0, 1] * J[..., 1, 0]
    return np.linalg.det(J)


@pytest.mark.parametrize("diff, bc, gid", _cases(dims=False, bcs=[ca.BC_APPROX, ca.BC_CLAMP]))
@both_memory(rtol=1e-4, atol=1e-4)
def test_jacobian_and_jacdet_v(diff, bc, gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(37)
    H = _random_h(g, rng)
    is2d = g.size().z == 1
    grads = [ca.Field3D(g, mem) for _ in range(3)]
    ca.Jacobian(*grads, field(H, g, mem), diff, bc)  # rows of the Jacobian, per world unit
    Jw = np.stack([gradient_ref(H[..., c], g, diff, bc) for c in range(3)], axis=-2)  # [a][b] = dh_a/dx_b
    for c in range(3):
        np.testing.assert_allclose(grads[c].numpy(), Jw[..., c, :], rtol=1e-5, atol=1e-5)
    # V-field: det(I + Dv), derivatives per world unit
    V = rand(g, rng, -0.5, 0.5, ncomp=3)
    if is2d:
        V[..., 2] = 0.0
    Dv = np.stack([gradient_ref(V[..., c], g, diff, bc) for c in range(3)], axis=-2)
    vg = [ca.Field3D(g, mem) for _ in range(3)]
    ca.Jacobian(*vg, field(V, g, mem), diff, bc)
    jv = ca.Image3D(g, mem)
    ca.JacDetV(jv, *vg)
    np.testing.assert_allclose(jv.numpy(), _det(np.eye(3) + Dv, is2d), rtol=1e-4, atol=1e-4)
    jv2 = ca.Image3D(g, mem)
    ca.JacDetV(jv2, field(V, g, mem), diff, bc)  # pyca's pointwise form
    np.testing.assert_allclose(jv2.numpy(), jv.numpy(), rtol=1e-4, atol=1e-4)
    return grads, jv


@grids
@pytest.mark.parametrize("diff", DIFFS, ids=DNAME.get)
@both_memory(rtol=1e-4, atol=1e-4)
def test_jacdet_h_full_vs_pointwise(diff, gid, mem):
    # PyCA's CpuGpuTestCase.test_JacDet: JacDetH of Jacobian()'s gradients equals the pointwise JacDetH
    g = make_grid(gid)
    h = field(_random_h(g, np.random.default_rng(38)), g, mem)
    grads = [ca.Field3D(g, mem) for _ in range(3)]
    ca.Jacobian(*grads, h, diff, ca.BC_APPROX)
    full, pointwise = ca.Image3D(g, mem), ca.Image3D(g, mem)
    ca.JacDetH(full, *grads)
    ca.JacDetH(pointwise, h, diff, ca.BC_APPROX)
    np.testing.assert_allclose(full.numpy(), pointwise.numpy(), rtol=1e-4, atol=1e-4)
    return full


@grids
@both_memory(rtol=1e-4, atol=1e-4)
def test_jacdet_h_pyca_units(gid, mem):
    # PyCA's NumpyTestCase.test_JacDet: canp.JacDet(h, DIFF_CENTRAL, BC_APPROX, spacing), the determinant
    # of the gradients of h's components per world unit
    g = make_grid(gid)
    H = _random_h(g, np.random.default_rng(39))
    jd = ca.Image3D(g, mem)
    ca.JacDetH(jd, field(H, g, mem), ca.DIFF_CENTRAL, ca.BC_APPROX)
    Jw = np.stack([gradient_ref(H[..., c], g, ca.DIFF_CENTRAL, ca.BC_APPROX) for c in range(3)], axis=-2)
    np.testing.assert_allclose(jd.numpy(), _det(Jw, g.size().z == 1), rtol=1e-4, atol=1e-4)
    return jd


@grids
@both_memory(rtol=1e-4, atol=1e-4)
def test_jacdet_h_from_gradients_is_plain_det(gid, mem):
    # PyCA's CImageFieldOpers::JacDetH(detJ, Xg, Yg, Zg): the determinant of the rows (2x2 on a 2-D grid)
    g = make_grid(gid)
    rng = np.random.default_rng(40)
    rows = [rand(g, rng, ncomp=3) for _ in range(3)]
    jd = ca.Image3D(g, mem)
    ca.JacDetH(jd, *[field(r, g, mem) for r in rows])
    np.testing.assert_allclose(jd.numpy(), _det(np.stack(rows, axis=-2), g.size().z == 1), rtol=1e-4, atol=1e-4)
    return jd


@grids
@both_memory()
def test_jacdet_of_identity(gid, mem):
    # PyCA's units: JacDetH of the identity H-field is 1 / (sx sy sz) (1 / (sx sy) on a 2-D grid),
    # 1 on unit spacing; JacDetV of v = 0 is 1 on any spacing
    g = make_grid(gid)
    sp = spacing(g)
    res = []
    for unit in (True, False):
        if unit:
            g.setSpacing(ca.Vec3Df(1, 1, 1))
        else:
            g.setSpacing(ca.Vec3Df(*sp))
        h = ca.Field3D(g, mem)
        ca.SetToIdentity(h)
        jd = ca.Image3D(g, mem)
        ca.JacDetH(jd, h)  # defaults: central, BC_APPROX
        want = 1.0 if unit else 1.0 / (sp[0] * sp[1] * (1.0 if g.size().z == 1 else sp[2]))
        np.testing.assert_allclose(jd.numpy(), want, rtol=1e-6)
        v = ca.Field3D(g, mem)
        ca.SetMem(v, 0.0)
        jv = ca.Image3D(g, mem)
        ca.JacDetV(jv, v)
        np.testing.assert_allclose(jv.numpy(), 1.0, rtol=1e-6)
        res += [jd, jv]
    return res
