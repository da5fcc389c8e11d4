"""PyCA's deformation operations against NumPy/SciPy: ApplyH / ApplyV / ApplyVInv on images and
fields with every background strategy, the Compose* identities of PyCA's own tests (ComposeVH(v, h)
= ApplyH(v, h, PARTIAL_ZERO) / spacing + h, ...), Splat / ApplyH, SplatWorld / ResampleWorld and
Ad / CoAd adjointness, CoAd's formula, Resample, SubVol and SetSubVol_I.

H-fields hold voxel coordinates; V-fields world units (voxel displacement = v / spacing)."""
import numpy as np
import pytest

import pyca as ca
from compat_helpers import (assert_close, both_memory, diff_ref, field, grids, identity, image, interp_field_ref,
                            interp_ref, make_grid, npy, rand, spacing)

BG = {"clamp": ca.BACKGROUND_STRATEGY_CLAMP, "wrap": ca.BACKGROUND_STRATEGY_WRAP,
      "zero": ca.BACKGROUND_STRATEGY_ZERO, "partial_zero": ca.BACKGROUND_STRATEGY_PARTIAL_ZERO,
      "val": ca.BACKGROUND_STRATEGY_VAL}


def _h(g, rng, amp):
    """An H-field: identity plus a random displacement of up to `amp` voxels (0 along z in 2-D)."""
    D = rand(g, rng, -amp, amp, ncomp=3)
    if g.size().z == 1:
        D[..., 2] = 0.0
    return identity(g) + D


def _v(g, rng, amp):
    """A V-field (world units) moving voxels by up to `amp` voxels."""
    V = rand(g, rng, -amp, amp, ncomp=3) * spacing(g)
    if g.size().z == 1:
        V[..., 2] = 0.0
    return V


@grids
@pytest.mark.parametrize("bg", list(BG))
@both_memory(rtol=1e-5, atol=1e-5)
def test_apply_h_image(bg, gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(41)
    A, H = rand(g, rng), _h(g, rng, 3.0)  # positions reach beyond the border
    out = ca.Image3D(g, mem)
    if bg == "val":
        ca.ApplyH(out, image(A, g, mem), field(H, g, mem), BG[bg], ca.INTERP_LINEAR, 2.5)
    else:
        ca.ApplyH(out, image(A, g, mem), field(H, g, mem), BG[bg])
    np.testing.assert_allclose(out.numpy(), interp_ref(A, H, BG[bg], 2.5), rtol=1e-5, atol=1e-5)
    return out


@grids
@both_memory(rtol=1e-5, atol=1e-5)
def test_apply_defaults_and_v_forms(gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(42)
    A, H, V = rand(g, rng), _h(g, rng, 2.0), _v(g, rng, 2.0)
    a, h, v = image(A, g, mem), field(H, g, mem), field(V, g, mem)
    clamp = ca.BACKGROUND_STRATEGY_CLAMP
    out = ca.Image3D(g, mem)
    ca.ApplyH(out, a, h)  # PyCA's default: clamp, trilinear
    np.testing.assert_allclose(out.numpy(), interp_ref(A, H, clamp), rtol=1e-5, atol=1e-5)
    pos = identity(g) + V / spacing(g)
    ca.ApplyV(out, a, v)
    np.testing.assert_allclose(out.numpy(), interp_ref(A, pos, clamp), rtol=1e-5, atol=1e-5)
    ca.ApplyV(out, a, v, 0.5)  # delta scales the displacement
    np.testing.assert_allclose(out.numpy(), interp_ref(A, identity(g) + 0.5 * V / spacing(g), clamp),
                               rtol=1e-5, atol=1e-5)
    ca.ApplyVInv(out, a, v)
    np.testing.assert_allclose(out.numpy(), interp_ref(A, identity(g) - V / spacing(g), clamp), rtol=1e-5, atol=1e-5)
    return out


@grids
@both_memory(rtol=1e-5, atol=1e-5)
def test_apply_to_fields(gid, mem):
    # ApplyH / ApplyV / ApplyVInv also deform Field3D arguments (H-fields with the identity strategies)
    g = make_grid(gid)
    rng = np.random.default_rng(43)
    S, H, V = _h(g, rng, 1.0), _h(g, rng, 2.5), _v(g, rng, 2.0)
    s, h, v = field(S, g, mem), field(H, g, mem), field(V, g, mem)
    out = ca.Field3D(g, mem)
    res = []
    for bg in (ca.BACKGROUND_STRATEGY_PARTIAL_ID, ca.BACKGROUND_STRATEGY_ID, ca.BACKGROUND_STRATEGY_CLAMP,
               ca.BACKGROUND_STRATEGY_PARTIAL_ZERO):
        ca.ApplyH(out, s, h, bg)
        np.testing.assert_allclose(out.numpy(), interp_field_ref(S, H, bg), rtol=1e-5, atol=1e-5, err_msg=str(bg))
        res.append(out.copy())
    bg = ca.BACKGROUND_STRATEGY_PARTIAL_ID
    ca.ApplyV(out, s, v, bg)
    np.testing.assert_allclose(out.numpy(), interp_field_ref(S, identity(g) + V / spacing(g), bg), rtol=1e-5,
                               atol=1e-5)
    ca.ApplyVInv(out, s, v, bg)
    np.testing.assert_allclose(out.numpy(), interp_field_ref(S, identity(g) - V / spacing(g), bg), rtol=1e-5,
                               atol=1e-5)
    return res


@grids
@both_memory(rtol=1e-5, atol=1e-5)
def test_nearest_and_cubic(gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(44)
    A = rand(g, rng)
    H = _h(g, rng, 2.0)
    out = ca.Image3D(g, mem)
    ca.ApplyH(out, image(A, g, mem), field(H, g, mem), ca.BACKGROUND_STRATEGY_CLAMP, ca.INTERP_NN)
    idx = [np.clip(np.floor(H[..., k] + 0.5), 0, A.shape[k] - 1).astype(int) for k in range(3)]
    idx[2] = idx[2] * 0 if A.shape[2] == 1 else idx[2]
    np.testing.assert_allclose(out.numpy(), A[tuple(idx)], rtol=0, atol=0)
    # Catmull-Rom reproduces linear functions at positions whose 4 taps lie inside
    coef = np.array([0.3, -0.7, 0.45])
    L = identity(g) @ coef
    lo, hi = 1.0, np.array(tuple(g.size()), dtype=float) - 2.0
    P = identity(g).copy()
    for k in range(3):
        if A.shape[k] >= 4:
            P[..., k] = rng.uniform(lo, hi[k], A.shape)
    ca.ApplyH(out, image(L, g, mem), field(P, g, mem), ca.BACKGROUND_STRATEGY_CLAMP, ca.INTERP_CUBIC)
    np.testing.assert_allclose(out.numpy(), P @ coef, rtol=1e-5, atol=1e-4)
    return out


@grids
@both_memory(rtol=1e-5, atol=2e-5)
def test_compose_identities(gid, mem):
    """PyCA's test_ComposeVH, ComposeVInvH, ComposeHH, ComposeHV and ComposeHVInv relations."""
    g = make_grid(gid)
    rng = np.random.default_rng(45)
    H, G, V = _h(g, rng, 2.0), _h(g, rng, 1.5), _v(g, rng, 1.5)
    h, gg, v = field(H, g, mem), field(G, g, mem), field(V, g, mem)
    sp = spacing(g)
    out, tmp = ca.Field3D(g, mem), ca.Field3D(g, mem)
    pz, pid = ca.BACKGROUND_STRATEGY_PARTIAL_ZERO, ca.BACKGROUND_STRATEGY_PARTIAL_ID
    res = {}
    ca.ComposeVH(out, v, h)  # (id + v / sp) o h
    ca.ApplyH(tmp, v, h, pz)
    ca.MulC_I(tmp, g.spacing().inverse())
    ca.Add_I(tmp, h)
    assert_close(out, npy(tmp), atol=2e-5)
    assert_close(out, H + interp_field_ref(V, H, pz) / sp, atol=2e-5)
    res["VH"] = out.copy()
    ca.ComposeVInvH(out, v, h)  # (id - v / sp) o h
    ca.ApplyH(tmp, v, h, pz)
    ca.MulC_I(tmp, g.spacing().inverse())
    ca.Sub(tmp, h, tmp)
    assert_close(out, npy(tmp), atol=2e-5)
    res["VInvH"] = out.copy()
    ca.ComposeHH(out, h, gg)  # h o g
    ca.ApplyH(tmp, h, gg, pid)
    assert_close(out, npy(tmp), atol=2e-5)
    assert_close(out, interp_field_ref(H, G, pid), atol=2e-5)
    res["HH"] = out.copy()
    ca.ComposeHV(out, h, v)  # h o (id + v / sp)
    ca.ApplyV(tmp, h, v, pid)
    assert_close(out, npy(tmp), atol=2e-5)
    assert_close(out, interp_field_ref(H, identity(g) + V / sp, pid), atol=2e-5)
    res["HV"] = out.copy()
    ca.ComposeHVInv(out, h, v)  # h o (id - v / sp)
    ca.ApplyVInv(tmp, h, v, pid)
    assert_close(out, npy(tmp), atol=2e-5)
    res["HVInv"] = out.copy()
    return res


def _dot(a, b):
    return float(np.sum(npy(a) * npy(b)))


@grids
@both_memory(rtol=1e-4, atol=1e-3)
def test_splat_is_adjoint_of_apply_h(gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(46)
    I, J, H = rand(g, rng), rand(g, rng), _h(g, rng, 2.5)
    h = field(H, g, mem)
    warped, splatted = ca.Image3D(g, mem), ca.Image3D(g, mem)
    ca.ApplyH(warped, image(J, g, mem), h, ca.BACKGROUND_STRATEGY_PARTIAL_ZERO)
    ca.Splat(splatted, h, image(I, g, mem))
    lhs, rhs = float(np.sum(npy(warped) * I)), float(np.sum(J * npy(splatted)))
    assert lhs == pytest.approx(rhs, rel=1e-4, abs=1e-3)
    # the identity splats every voxel onto itself; normalize divides by the weights
    ident = field(identity(g), g, mem)
    ca.Splat(splatted, ident, image(I, g, mem))
    assert_close(splatted, I, atol=1e-5)
    ca.Splat(splatted, h, image(np.full(I.shape, 3.0), g, mem), True)
    vals = npy(splatted)
    assert np.allclose(vals[vals != 0], 3.0, atol=1e-4)
    # fields: component by component
    F = rand(g, rng, ncomp=3)
    fs = ca.Field3D(g, mem)
    ca.Splat(fs, h, field(F, g, mem))
    for c in range(3):
        ca.Splat(splatted, h, image(F[..., c], g, mem))
        assert_close(npy(fs)[..., c], npy(splatted), atol=1e-5)
    return warped, fs


@pytest.mark.parametrize("bg", ["clamp", "partial_zero"])
@pytest.mark.parametrize("gid", ["2d", "3d"])
@both_memory(rtol=1e-4, atol=1e-3)
def test_resample_world_and_splat_world(bg, gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(47)
    fac = 0.66
    size = [max(1, int(fac * n)) for n in g.size()]
    sp = [s / fac if n > 1 else s for s, n in zip(spacing(g), g.size())]
    g2 = ca.GridInfo(ca.Vec3Di(*size), ca.Vec3Df(*sp), ca.Vec3Df(1.0, -2.0, 0.0))  # PyCA's test_ResampleWorld
    I = rand(g, rng)
    out = ca.Image3D(g2, mem)
    ca.ResampleWorld(out, image(I, g, mem), BG[bg])
    pos = (identity(g2) * np.array(sp) + np.array([1.0, -2.0, 0.0]) - 0.0) / spacing(g)
    np.testing.assert_allclose(npy(out), interp_ref(I, pos, BG[bg]), rtol=1e-5, atol=1e-5)
    J = rand(g2, rng)
    back = ca.Image3D(g, mem)
    ca.SplatWorld(back, image(J, g2, mem), BG[bg])  # the adjoint: <R I, J> = <I, S J>
    assert float(np.sum(npy(out) * J)) == pytest.approx(float(np.sum(I * npy(back))), rel=1e-4, abs=1e-3)
    w = ca.Image3D(g, mem)
    ca.SplatWorld(back, image(J, g2, mem), w, BG[bg])
    ones = ca.Image3D(g, mem)
    ca.SplatWorld(ones, image(np.ones(J.shape), g2, mem), BG[bg])
    assert_close(w, npy(ones), atol=1e-5)
    return out, back, w


def _jacobian_index(H):
    """Dg[a][b] = d H_a / d i_b as PyCA's Ad / CoAd take it: central differences with BC_CLAMP (half
    the one-sided difference at the border), identity along size-1 axes."""
    J = np.zeros(H.shape[:3] + (3, 3))
    for b in range(3):
        if H.shape[b] == 1:
            J[..., :, b] = 0.0
            J[..., b, b] = 1.0
            continue
        for a in range(3):
            J[..., a, b] = diff_ref(H[..., a], b, ca.DIFF_CENTRAL, ca.BC_CLAMP)
    for b in range(3):
        if H.shape[b] == 1:
            J[..., b, :] = np.eye(3)[b]
    return J


@grids
@both_memory(rtol=1e-4, atol=1e-3)
def test_ad_coad(gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(48)
    G, V, M = _h(g, rng, 0.4), _v(g, rng, 1.0), _v(g, rng, 1.0)
    gg, v, m = field(G, g, mem), field(V, g, mem), field(M, g, mem)
    sp = spacing(g)
    co = ca.Field3D(g, mem)
    ca.CoAd(co, gg, m)  # |Dg| S^-1 Dg^T S m(g(x))
    Dg = _jacobian_index(G)
    det = np.linalg.det(Dg)
    mg = interp_field_ref(M, G, ca.BACKGROUND_STRATEGY_PARTIAL_ZERO)
    want = det[..., None] / sp * np.einsum("...ab,...a->...b", Dg, sp * mg)
    np.testing.assert_allclose(npy(co), want, rtol=1e-4, atol=1e-4)
    ad = ca.Field3D(g, mem)
    ca.Ad(ad, gg, v)  # the exact adjoint of CoAd: <Ad v, m> = <v, CoAd m>
    assert _dot(ad, m) == pytest.approx(float(np.sum(V * npy(co))), rel=1e-4, abs=1e-3)
    ident = field(identity(g), g, mem)
    # the identity leaves v and m unchanged inside; at the border PyCA's Jacobian of the identity is
    # 1/2 along the axis (half differences), so |Dg| Dg v and |Dg| Dg^T m scale accordingly
    Jid = _jacobian_index(identity(g))
    did = np.linalg.det(Jid)[..., None]
    ca.Ad(ad, ident, v)
    assert_close(ad, did * np.einsum("...ab,...b->...a", Jid, V), atol=1e-4)
    ca.CoAd(co, ident, m)
    assert_close(co, did * np.einsum("...ab,...a->...b", Jid, M), atol=1e-4)
    inner = (slice(1, -1), slice(1, -1), slice(1, -1) if g.size().z > 1 else slice(None))
    np.testing.assert_allclose(npy(co)[inner], M[inner], atol=1e-4)
    return ad, co


@grids
@both_memory(rtol=1e-5, atol=1e-5)
def test_resample(gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(49)
    I = rand(g, rng)
    size = [max(1, int(0.66 * n)) for n in g.size()]
    out = ca.Image3D(ca.GridInfo(ca.Vec3Di(*size)), mem)
    ca.Resample(out, image(I, g, mem))  # PyCA's test_Resample: voxel centres aligned
    r = np.array(I.shape, dtype=float) / np.array(size)
    pos = identity(out.grid()) * r + (r - 1.0) / 2.0
    np.testing.assert_allclose(npy(out), interp_ref(I, pos, ca.BACKGROUND_STRATEGY_CLAMP), rtol=1e-5, atol=1e-5)
    ca.Resample(out, image(I, g, mem), ca.BACKGROUND_STRATEGY_CLAMP, ca.INTERP_LINEAR, False)
    np.testing.assert_allclose(npy(out), interp_ref(I, identity(out.grid()) * r, ca.BACKGROUND_STRATEGY_CLAMP),
                               rtol=1e-5, atol=1e-5)
    same = ca.Image3D(g, mem)
    ca.Resample(same, image(I, g, mem))  # same size: a copy
    assert_close(same, I, atol=0)
    # fields: component by component; rescaleVector divides each component by r of its axis
    F = rand(g, rng, ncomp=3)
    fo = ca.Field3D(ca.GridInfo(ca.Vec3Di(*size)), mem)
    want = np.stack([interp_ref(F[..., c], pos, ca.BACKGROUND_STRATEGY_CLAMP) for c in range(3)], -1)
    ca.Resample(fo, field(F, g, mem))
    np.testing.assert_allclose(npy(fo), want, rtol=1e-5, atol=1e-5)
    ca.Resample(fo, field(F, g, mem), ca.BACKGROUND_STRATEGY_CLAMP, True)
    np.testing.assert_allclose(npy(fo), want / r, rtol=1e-5, atol=1e-5)
    return out, fo


@grids
@both_memory(rtol=0, atol=0)
def test_subvol_setsubvol(gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(50)
    I = rand(g, rng)
    F = rand(g, rng, ncomp=3)
    size = [max(1, int(0.66 * n)) for n in g.size()]
    start = (5, 4, 0 if g.size().z == 1 else 2)  # PyCA's test_SubVol uses (5, 7, 0)
    sl = tuple(slice(s, s + n) for s, n in zip(start, size))
    sub = ca.Image3D(ca.GridInfo(ca.Vec3Di(*size)), mem)
    ca.SubVol(sub, image(I, g, mem), ca.Vec3Di(*start))
    assert_close(sub, I[sl], atol=0)
    fsub = ca.Field3D(ca.GridInfo(ca.Vec3Di(*size)), mem)
    ca.SubVol(fsub, field(F, g, mem), ca.Vec3Di(*start))
    assert_close(fsub, F[sl], atol=0)
    big = image(I, g, mem)
    four = ca.Image3D(ca.GridInfo(ca.Vec3Di(*size)), mem)
    ca.SetMem(four, 4.0)
    ca.SetSubVol_I(big, four, ca.Vec3Di(*start))  # PyCA's test_SetSubVol_I
    want = I.copy()
    want[sl] = 4.0
    assert_close(big, want, atol=0)
    fb = field(F, g, mem)
    ca.SetSubVol_I(fb, fsub, ca.Vec3Di(0, 0, 0))
    fw = F.copy()
    fw[tuple(slice(0, n) for n in size)] = F[sl]
    assert_close(fb, fw, atol=0)
    with pytest.raises(IndexError):
        ca.SubVol(sub, image(I, g, mem), ca.Vec3Di(*[n for n in g.size()]))
    return sub, big
