"""Field operations, copies, constants and reductions of PyCA against NumPy: Copy (masked, by
component), SetMem, Magnitude, SqrMagnitude, ComponentDotProd, Dot, NormalizeSafe, SetToIdentity,
HtoV/VtoH (H-fields in voxel units, V-fields in world units), Sum, Sum2, L1, LInf, Max, Min, MinMax."""
import numpy as np
import pytest

import pyca as ca
from compat_helpers import both_memory, field, grids, identity, image, make_grid, rand, spacing


@grids
@both_memory()
def test_copy_setmem(gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(21)
    A, F = rand(g, rng), rand(g, rng, ncomp=3)
    M = (rng.uniform(size=A.shape) > 0.5).astype(np.float64)
    a, f, m = image(A, g, mem), field(F, g, mem), image(M, g, mem)
    out = image(np.full(A.shape, 5.0), g, mem)
    ca.Copy(out, a, m)  # PyCA's CopyMasked
    np.testing.assert_array_equal(out.numpy(), np.where(M != 0, A, 5.0).astype(np.float32))
    ca.Copy(out, a)
    np.testing.assert_array_equal(out.numpy(), A.astype(np.float32))
    for dim in range(3):
        ca.Copy(out, f, dim)
        np.testing.assert_array_equal(out.numpy(), F[..., dim].astype(np.float32))
    fo = ca.Field3D(g, mem)
    ca.SetMem(fo, 0.0)
    ca.Copy(fo, a, 1)
    np.testing.assert_array_equal(fo.numpy()[..., 1], A.astype(np.float32))
    assert np.all(fo.numpy()[..., [0, 2]] == 0)
    ca.Copy(fo, f, m)
    np.testing.assert_array_equal(fo.numpy(), np.where(M[..., None] != 0, F, fo.numpy()).astype(np.float32))
    ca.SetMem(out, 2.5, m)
    np.testing.assert_array_equal(out.numpy(), np.where(M != 0, 2.5, F[..., 2]).astype(np.float32))
    ca.SetMem(fo, ca.Vec3Df(1, 2, 3))
    np.testing.assert_array_equal(fo.numpy(), np.broadcast_to([1, 2, 3], F.shape).astype(np.float32))
    ca.SetMem(fo, -1.0, m)
    np.testing.assert_array_equal(fo.numpy(), np.where(M[..., None] != 0, -1.0, [1, 2, 3]).astype(np.float32))
    return out, fo


@grids
@both_memory(rtol=1e-5, atol=1e-6)
def test_field_pointwise(gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(22)
    F, G = rand(g, rng, ncomp=3), rand(g, rng, ncomp=3)
    F.reshape(-1, 3)[:3] = [[0, 0, 0], [1e-4, 0, 0], [3, 4, 0]]  # below and above eps
    f, h = field(F, g, mem), field(G, g, mem)
    out = ca.Image3D(g, mem)
    ca.Magnitude(out, f)
    np.testing.assert_allclose(out.numpy(), np.linalg.norm(F, axis=-1), rtol=1e-6, atol=1e-6)
    ca.SqrMagnitude(out, f)
    np.testing.assert_allclose(out.numpy(), (F ** 2).sum(-1), rtol=1e-6, atol=1e-6)
    ca.ComponentDotProd(out, f, h)
    np.testing.assert_allclose(out.numpy(), (F * G).sum(-1), rtol=1e-6, atol=1e-6)
    ca.Dot(out, f, h)
    np.testing.assert_allclose(out.numpy(), (F * G).sum(-1), rtol=1e-6, atol=1e-6)
    assert ca.Dot(f, h) == pytest.approx((F * G).sum(), rel=1e-6, abs=1e-6)
    assert ca.Dot(image(F[..., 0], g, mem), image(G[..., 1], g, mem)) == pytest.approx(
        (F[..., 0] * G[..., 1]).sum(), rel=1e-6, abs=1e-6)
    eps = 1e-3
    norm = np.linalg.norm(F, axis=-1, keepdims=True)
    want = np.where(norm < eps, 0.0, F / np.maximum(norm, 1e-30))
    fo = ca.Field3D(g, mem)
    ca.NormalizeSafe(fo, f, eps)
    np.testing.assert_allclose(fo.numpy(), want, rtol=1e-5, atol=1e-6)
    ca.NormalizeSafe_I(f, eps)
    np.testing.assert_allclose(f.numpy(), want, rtol=1e-5, atol=1e-6)
    return out, fo


@grids
@both_memory(rtol=1e-6, atol=1e-5)
def test_identity_and_h_v_conversions(gid, mem):
    g = make_grid(gid)
    sp = spacing(g)
    ident = identity(g)
    h = ca.Field3D(g, mem)
    ca.SetToIdentity(h)
    np.testing.assert_array_equal(h.numpy(), ident.astype(np.float32))
    rng = np.random.default_rng(23)
    V = rand(g, rng, -2, 2, ncomp=3)
    if g.size().z == 1:
        V[..., 2] = 0.0
    v = field(V, g, mem)
    out = ca.Field3D(g, mem)
    ca.VtoH(out, v)  # h = x + v / spacing
    np.testing.assert_allclose(out.numpy(), ident + V / sp, rtol=1e-6, atol=1e-5)
    ca.VtoH_I(v)
    np.testing.assert_allclose(v.numpy(), ident + V / sp, rtol=1e-6, atol=1e-5)
    back = ca.Field3D(g, mem)
    ca.HtoV(back, v)  # v = (h - x) * spacing
    np.testing.assert_allclose(back.numpy(), V, rtol=1e-5, atol=1e-5)
    ca.HtoV_I(v)
    np.testing.assert_allclose(v.numpy(), V, rtol=1e-5, atol=1e-5)
    return out, back


@grids
@both_memory(rtol=1e-5, atol=1e-4)
def test_reductions(gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(24)
    A, F = rand(g, rng, -2, 2), rand(g, rng, -2, 2, ncomp=3)
    A.flat[5], F.reshape(-1, 3)[7, 1] = 3.5, -4.5  # unique extremes
    a, f = image(A, g, mem), field(F, g, mem)
    results = {}
    for name, obj, ref in [
        ("Sum", a, A.sum()), ("Sum2", a, (A ** 2).sum()), ("L1", a, np.abs(A).sum()), ("LInf", a, np.abs(A).max()),
        ("Max", a, A.max()), ("Min", a, A.min()),
        ("Sum2", f, (F ** 2).sum()), ("L1", f, np.abs(F).sum()), ("LInf", f, np.abs(F).max()),
    ]:
        got = getattr(ca, name)(obj)
        assert got == pytest.approx(ref, rel=1e-5, abs=1e-4), name
        results[name + type(obj).__name__] = got
    np.testing.assert_allclose(ca.Sum(f).tolist(), F.reshape(-1, 3).sum(0), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(ca.Max(f).tolist(), F.reshape(-1, 3).max(0))
    np.testing.assert_allclose(ca.Min(f).tolist(), F.reshape(-1, 3).min(0))
    lo, hi = ca.MinMax(a)
    assert (lo, hi) == (pytest.approx(A.min()), pytest.approx(A.max()))
    lo, hi = ca.MinMax(f)
    assert (lo, hi) == (pytest.approx(F.min()), pytest.approx(F.max()))
    return results
