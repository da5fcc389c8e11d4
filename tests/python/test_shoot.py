"""Geodesic shooting by vector momentum (pyca.registration.geodesic, `pyca shoot`, `pyca regress`)
against independent references: EPDiff's conserved energy <m_t, K m_t>, finite differences of the
energy (the adjoint sweep's gradient), a known shooting (an image shot along a known geodesic is
registered back: the map is recovered, checked with SciPy's interpolation), the two memory modes
(identical numbers), and the command lines on files. The vector-momentum client's energies on the same
inputs: tests/compat/test_public_clients.py (where the client code is fetched)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import ndimage

import pyca as ca
import pyca.common as common
from pyca.apps import regress, shoot
from pyca.registration.geodesic import Geodesic, GeodesicFit, epdiff_kernel

N = 40
MEM = ca.MEM_HOST


def _blob(n=N, c=(20, 20), r=(8, 11), blur=1.0):
    x, y = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return ndimage.gaussian_filter((((x - c[0]) / r[0]) ** 2 + ((y - c[1]) / r[1]) ** 2 <= 1).astype(float), blur)


def _momentum(n=N, seed=0, vmax=1.5, K=None, grid=None):
    """A smooth momentum zero near the border, scaled so that its velocity K m is at most vmax voxels."""
    rng = np.random.default_rng(seed)
    w = np.zeros((n, n))
    w[n // 5:-n // 5, n // 5:-n // 5] = 1
    w = ndimage.gaussian_filter(w, 2)
    a = ndimage.gaussian_filter(rng.standard_normal((n, n, 2)), (3, 3, 0)) * w[..., None]
    m = common.FieldFromNPArr(a, MEM)
    v = m.clone()
    K.applyInverseOperator(v)
    ca.MulC_I(m, vmax / float(ca.LInf(v)))
    return m


def _setup(T=10, keep="all", blur=1.0):
    I0 = common.ImFromNPArr(_blob(blur=blur), MEM)
    grid = I0.grid()
    K = epdiff_kernel(grid, 0.01, 0.01, 0.001, 1)
    return I0, grid, K, Geodesic(grid, MEM, T, K, keep=keep)


def test_epdiff_conserves_the_momentum_energy():
    """<m_t, K m_t> is constant along the geodesic up to the discretisation's error, which shrinks with T;
    without the coadjoint action's Jacobian factors (m0 merely carried along, m0 o phi_{t,0}) it is not.
    A radial momentum (grad I0: the blob grows and shrinks, so the Jacobian factors matter)."""
    drift, carried = {}, {}
    for T in (5, 20):
        I0, grid, K, G = _setup(T)
        m0 = ca.Field3D(grid, MEM)
        ca.Gradient(m0, I0)
        v = m0.clone()
        K.applyInverseOperator(v)
        ca.MulC_I(m0, 2.0 / float(ca.LInf(v)))  # 2 voxels at most
        G.shoot(m0)
        e = np.array(G.energies())
        assert e[0] == pytest.approx(float(ca.Dot(m0, G.velocity(0))))
        drift[T] = float(np.abs(e / e[0] - 1).max())
        bad = []
        for j in range(T):
            m = m0.clone()
            if j:
                ca.ApplyH(m, m0, G.h(j), ca.BACKGROUND_STRATEGY_CLAMP)
            v = m.clone()
            K.applyInverseOperator(v)
            bad.append(float(ca.Dot(m, v)))
        carried[T] = float(np.abs(np.array(bad) / bad[0] - 1).max())
    for T in drift:
        assert drift[T] < 0.04, drift
        assert carried[T] > 3 * drift[T], (drift, carried)


def test_an_unknown_coad_border_is_refused(monkeypatch):
    """Geodesic.coad_border other than its two rules (a typo went one-sided, silently) is refused by name."""
    monkeypatch.setattr(Geodesic, "coad_border", "pyca-halved")
    grid = ca.GridInfo(ca.Vec3Di(8, 8, 1))
    G = Geodesic(grid, MEM, 2, epdiff_kernel(grid, 0.01, 0.01, 0.001, 1), keep="maps")
    with pytest.raises(ValueError, match="coad_border must be 'one-sided' or 'pyca', not 'pyca-halved'"):
        G.shoot(ca.Field3D(grid, MEM))


@pytest.mark.parametrize("border", ["one-sided", "pyca"])
def test_the_momentum_at_the_border_is_carried_one_sided_or_halved_as_pyca(border, monkeypatch):
    """Geodesic.coad_border. "one-sided" (pyca shoot's): CoAd(id, m0) = m0 on every voxel, border included, and
    a geodesic whose momentum reaches the border keeps its energy <m_t, K m_t> within 16% over t in [0, 1).
    "pyca" (ca.CoAd: PyCA's halved difference at the border, the vector-momentum client's rule): the
    identity scales m0 by 1/4 to 1/2 at the border (m_1 drops there at once), and the same geodesic loses over 20%."""
    monkeypatch.setattr(Geodesic, "coad_border", border)
    grid = ca.GridInfo(ca.Vec3Di(N, N, 1))
    K = epdiff_kernel(grid, 0.01, 0.01, 0.001, 1)
    rng = np.random.default_rng(0)
    v0 = ndimage.gaussian_filter(rng.standard_normal((N, N, 1, 3)), (5, 5, 0, 0), mode="wrap") * 60
    v0[..., 2] = 0
    V = ca.Field3D.from_array(np.asfortranarray(v0.astype(np.float32)), grid=grid)
    m0 = ca.Field3D(grid, MEM)
    K.applyOperator(m0, V)
    G = Geodesic(grid, MEM, 10, K, keep="maps")
    G.shoot(m0)
    e = np.array(G.energies())
    loss = 1 - e.min() / e[0]
    ca.SetToIdentity(G.h(1))
    m1, m = G.momentum(1).numpy()[..., :2], m0.numpy()[..., :2]
    inside = (slice(1, -1), slice(1, -1))
    np.testing.assert_allclose(m1[inside], m[inside], rtol=1e-5, atol=1e-5 * np.abs(m).max())
    if border == "one-sided":
        np.testing.assert_allclose(m1, m, rtol=1e-5, atol=1e-5 * np.abs(m).max())
        assert loss < 0.16, loss
    else:
        # at x = 0 (off the corners) det and D_x h_x are halved: m_x quartered, m_y halved
        np.testing.assert_allclose(m1[0, 1:-1, :, 0], 0.25 * m[0, 1:-1, :, 0], rtol=1e-4, atol=1e-6 * np.abs(m).max())
        np.testing.assert_allclose(m1[0, 1:-1, :, 1], 0.5 * m[0, 1:-1, :, 1], rtol=1e-4, atol=1e-6 * np.abs(m).max())
        assert loss > 0.2, loss


def test_shoot_moves_points_along_the_initial_velocity():
    """For a small momentum, phi_{1,0} = x - v0 / spacing to first order (the geodesic's initial velocity)."""
    I0, grid, K, G = _setup(10)
    m0 = _momentum(K=K, vmax=0.05)
    h = common.AsNPCopy(G.shoot(m0))
    v0 = common.AsNPCopy(G.velocity(0))
    ident = np.stack(np.indices((N, N, 1)), -1).astype(float)
    np.testing.assert_allclose(h - ident, -v0, atol=0.05 * 0.05)


@pytest.mark.parametrize("stride", [1, 2])
def test_adjoint_gradient_matches_finite_differences(stride):
    """The adjoint sweep's gradient K m0 - m^_0 against central differences of the energy, within 5%,
    with the sweep stepping back one time step at a time or two (the default: the midpoint rule).
    (The adjoint differentiates the continuous model: on smooth images. Near a sharp edge the discrete
    energy's derivative is that of the trilinear interpolant, one-sided differences, and differs more.)"""
    I0, grid, K, G = _setup(10, blur=2.5)
    G.adjoint_stride = stride
    I1 = common.ImFromNPArr(_blob(c=(21, 19), r=(11, 9), blur=2.5), MEM)
    fit = GeodesicFit(G, I0, [(G.T, I1)], 0.5, m0=_momentum(K=K, vmax=1.0))

    def energy():
        m, _ = fit.forward()
        return m + fit.reg_energy()

    energy()
    fit.gradients()
    g = common.AsNPCopy(fit.g).copy()
    m_saved = fit.m0.clone()
    for seed in (1, 2, 4):
        d = _momentum(K=K, seed=seed, vmax=0.2)
        pred = float((g * common.AsNPCopy(d)).sum()) / fit.N
        eps = 1e-2
        ca.Add_MulC(fit.m0, m_saved, d, eps)
        ep = energy()
        ca.Add_MulC(fit.m0, m_saved, d, -eps)
        em = energy()
        fd = (ep - em) / (2 * eps)
        assert pred == pytest.approx(fd, rel=0.05), (seed, pred, fd)
        ca.Copy(fit.m0, m_saved)


def _disc(c, r, n=N):
    x, y = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return ndimage.gaussian_filter(((x - c[0]) ** 2 + (y - c[1]) ** 2 <= r * r).astype(float), 1.0)[..., None]


def test_steps_whose_map_would_fold_are_rejected():
    """Two discs swapped across a gap, a rough kernel and two time steps: judged by its energy alone
    (folding_steps='accept') the descent ends with a folded map (det D phiinv < 0); with folding_steps='reject' (the
    default) the steps that fold are undone and halved: the map does not fold, the match still
    improves, and the report counts the rejected steps; also from a coarser level's velocity."""
    moving = (_disc((20, 14), 5) + _disc((20, 27), 5)).astype(np.float32)
    fixed = (_disc((14, 20), 5) + _disc((27, 20), 5)).astype(np.float32)
    kw = dict(device="cpu", iterations=40, alpha=0.002, time_steps=2)
    allowed = shoot.register(fixed, moving, folding_steps="accept", **kw)
    assert ca.MinMax(allowed.jacobian)[0] < 0 and allowed.report["folding_steps_rejected"] == 0
    res = shoot.register(fixed, moving, **kw)
    assert ca.MinMax(res.jacobian)[0] > 0
    assert res.report["folding_steps_rejected"] > 0
    assert res.summary()["folding_steps_rejected"] == res.report["folding_steps_rejected"]
    assert res.final_mismatch < 0.5 * res.initial_mismatch
    assert any(r.get("inadmissible") for r in res.energies) and not any(r.get("inadmissible") for r in allowed.energies)
    # the run judges itself as pyca lddmm does (pyca.registration.quality): the folded map fails, with its
    # determinant's minimum as computed here; the other passes
    codes = [q["code"] for q in allowed.quality["problems"]]
    assert not allowed.quality["ok"] and "folds" in codes
    assert allowed.quality["jacobian_min"] == pytest.approx(float(ca.MinMax(allowed.jacobian)[0]))
    assert res.quality["ok"] and allowed.summary()["quality"] is allowed.quality
    # coarse to fine: the coarse map, which does not fold, folds on the finer grid (det -0.38 when carried
    # up as it is): its velocity is halved until it does not
    res2 = shoot.register(fixed, moving, scales=(2, 1), **kw)
    assert ca.MinMax(res2.jacobian)[0] > 0 and res2.final_mismatch < 0.5 * res2.initial_mismatch


def _two_discs():
    moving = (_disc((20, 14), 5) + _disc((20, 27), 5)).astype(np.float32)
    fixed = (_disc((14, 20), 5) + _disc((27, 20), 5)).astype(np.float32)
    return fixed, moving, dict(device="cpu", iterations=40, alpha=0.002, time_steps=2)


def test_min_jacobian_keeps_the_map_off_the_edge_of_collapse():
    """The two discs above: with folding steps rejected and no margin (min_jacobian 0) the descent ends at the
    edge of folding (det D phiinv below 1e-3 somewhere); with a margin every accepted step keeps det D
    phiinv above it, the match still more than halved; regress takes the same option."""
    fixed, moving, kw = _two_discs()
    edge = shoot.register(fixed, moving, min_jacobian=0.0, **kw)
    assert 0 < ca.MinMax(edge.jacobian)[0] < 1e-3
    for margin in (0.05, 0.2):
        res = shoot.register(fixed, moving, min_jacobian=margin, **kw)
        assert ca.MinMax(res.jacobian)[0] > margin and res.report["folding_steps_rejected"] > 0
        assert res.final_mismatch < 0.5 * res.initial_mismatch and res.params["min_jacobian"] == margin
    assert shoot.DEFAULTS["min_jacobian"] == 0.05 and regress.DEFAULTS["min_jacobian"] == 0.05
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(ValueError, match="shoot: min_jacobian must be a number"):
            shoot.register(fixed, moving, min_jacobian=bad, **kw)
    with pytest.raises(ValueError, match="regress: min_jacobian must be a number"):
        regress.fit([(0.0, fixed), (1.0, moving)], min_jacobian=1.5)


def test_a_folded_starting_m0_is_refused_up_front():
    """A user's m0 whose map folds: with folding steps rejected (the default) the result could not be
    promised free of folds, so it is refused in one line before the descent; with folding_steps='accept' it is
    the start. A start that does not fold but lies below the margin lowers the margin to half its own
    det D phiinv: the result stays unfolded."""
    fixed, moving, kw = _two_discs()
    folded = shoot.register(fixed, moving, folding_steps="accept", **kw)
    assert ca.MinMax(folded.jacobian)[0] < 0
    with pytest.raises(ValueError, match=r"shoot: the starting m0's map folds \(det D phiinv down to -"):
        shoot.register(fixed, moving, m0=folded.m0, **kw)
    again = shoot.register(fixed, moving, m0=folded.m0, folding_steps="accept", **dict(kw, iterations=2))
    assert ca.MinMax(again.jacobian)[0] < 0
    edge = shoot.register(fixed, moving, min_jacobian=0.0, **kw)
    jmin = float(ca.MinMax(edge.jacobian)[0])
    res = shoot.register(fixed, moving, m0=edge.m0, **dict(kw, iterations=5))
    assert float(ca.MinMax(res.jacobian)[0]) > 0.5 * jmin > 0
    assert res.report["scales"][-1]["min_jacobian"] == pytest.approx(0.5 * jmin)  # the margin used, reported
    near = shoot.register(fixed, moving, min_jacobian=0.06, **kw)  # a start above the default margin keeps it
    assert 0.06 < float(ca.MinMax(near.jacobian)[0]) < 0.1
    res = shoot.register(fixed, moving, m0=near.m0, **dict(kw, iterations=5))
    assert res.report["scales"][-1]["min_jacobian"] == 0.05


@pytest.mark.parametrize("band_", [0, 4])
def test_a_carried_velocity_that_still_folds_after_its_halvings_restarts_from_zero(monkeypatch, band_):
    """Coarse to fine: the coarser scale's velocity carried up whose map folds on the finer grid is halved
    at most MAX_REJECTED times; one that folds even then is dropped for m0 = 0 (before, the descent started
    from the folded map: every step was rejected and the result folded). Here the coarse scale's result is
    blown up (its descent replaced) so that 2^8 halvings do not undo it."""
    fixed, moving, kw = _two_discs()
    real = shoot.optimisers.descend

    def descend(fit, *a, **k):
        rep = real(fit, *a, **k)
        if k.get("tag", {}).get("scale") == 2:
            ca.MulC_I(fit.m0, 1e5)
        return rep

    monkeypatch.setattr(shoot.optimisers, "descend", descend)
    r = shoot.register(fixed, moving, scales=(2, 1), band=band_, **dict(kw, iterations=20))
    start = r.report["scales"][-1]["start"]
    assert start.startswith("zero (the carried velocity's map still fell to det D phiinv <= 0.05 after 8 halvings")
    assert r.quality["ok"] and float(ca.MinMax(r.jacobian)[0]) > 0.05
    assert r.final_mismatch < 0.9 * r.initial_mismatch
    monkeypatch.setattr(shoot.optimisers, "descend", real)
    r = shoot.register(fixed, moving, scales=(2, 1), band=band_, **dict(kw, iterations=20))
    assert r.report["scales"][-1]["start"].startswith("carried")


def test_cli_shoot_says_in_one_line_that_a_run_failed(tmp_path):
    """`pyca shoot` whose map folds (folding_steps accept, the two discs of the test above) exits 3 with one
    line that names the problem and the option that avoids it, and records the verdict in summary.json;
    with the default (reject) the same pair exits 0."""
    nib = pytest.importorskip("nibabel")
    moving = (_disc((20, 14), 5) + _disc((20, 27), 5)).astype(np.float32)
    fixed = (_disc((14, 20), 5) + _disc((27, 20), 5)).astype(np.float32)
    for name, arr in (("m.nii.gz", moving), ("f.nii.gz", fixed)):
        nib.save(nib.Nifti1Image(arr, np.eye(4)), str(tmp_path / name))
    args = ("shoot", "--fixed", "f.nii.gz", "--moving", "m.nii.gz", "--iterations", "40", "--alpha", "0.002",
            "--time-steps", "2", "--device", "cpu", "-q")
    r = _pyca(*args, "--out", "accept", "--folding-steps", "accept", cwd=tmp_path)
    line = r.stderr.strip().splitlines()
    assert r.returncode == 3 and len(line) == 1, r.stderr
    assert "registration failed: the map folds" in line[0] and "--folding-steps reject" in line[0]
    q = json.load(open(tmp_path / "accept" / "summary.json"))["quality"]
    assert not q["ok"] and q["jacobian_min"] < 0
    r = _pyca(*args, "--out", "reject", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
    assert json.load(open(tmp_path / "reject" / "summary.json"))["quality"]["ok"]


@pytest.mark.parametrize("fused", [False, True])
def test_the_map_continues_its_border_displacement_beyond_the_grid(fused):
    """A shooting step composes h_j with the step x - dt d(x), d = w(x - dt/2 w(x)), w = 3/2 v_1 - 1/2 v_0
    (clamped samples), h_j extended beyond the grid by its displacement at the border: h_2 against SciPy
    (map_coordinates of h_1 - id, order 1, mode 'nearest', plus the point) for a momentum that moves
    the border, so that the steps reach outside the grid. (The identity beyond the grid made the
    map's border displacement jump back to zero there, and pyca lddmm's 1 mm maps fold.)"""
    if fused:
        pytest.importorskip("pyca.kernels")
    rng = np.random.default_rng(5)
    I0, grid, K, G = _setup(2)
    G.fused = fused
    a = ndimage.gaussian_filter(rng.standard_normal((N, N, 2)), (4, 4, 0)) + np.array([0.3, -0.2])
    m0 = common.FieldFromNPArr(a, MEM)
    v = m0.clone()
    K.applyInverseOperator(v)
    ca.MulC_I(m0, 2.0 / float(ca.LInf(v)))  # 2 voxels at most, the border included
    G.shoot(m0)
    v0, v1 = (common.AsNPCopy(G.velocity(j))[:, :, 0, :2].astype(float) for j in (0, 1))
    h1 = common.AsNPCopy(G.h(1))[:, :, 0, :2].astype(float)
    X = np.stack(np.indices((N, N)), -1).astype(float)

    def sample(f, p):  # trilinear (bilinear here) with the coordinates clamped: 'nearest'
        return np.stack([ndimage.map_coordinates(f[..., c], [p[..., 0], p[..., 1]], order=1, mode="nearest")
                         for c in range(f.shape[-1])], -1)

    w = 1.5 * v1 - 0.5 * v0
    p = X - 0.25 * w  # dt = 1/2, unit spacing: w at x - dt/2 w
    d = sample(w, p)
    q = X - 0.5 * d
    assert (q < 0).any() or (q > N - 1).any()  # the step reaches beyond the grid
    ref = q + sample(h1 - X, q)
    h2 = common.AsNPCopy(G.h(2))[:, :, 0, :2]
    np.testing.assert_allclose(h2, ref, atol=2e-4)


def test_the_sweep_steps_back_two_time_steps_at_once_except_over_a_measurement():
    """Geodesic.sweep_steps: (j, steps) from t_{j+steps} back to t_j, covering [0, T] once."""
    _, grid, K, _ = _setup()
    G = Geodesic(grid, MEM, 10, K)
    assert G.adjoint_stride == 2
    assert G.sweep_steps({10: 0}) == [(8, 2), (6, 2), (4, 2), (2, 2), (0, 2)]
    assert Geodesic(grid, MEM, 5, K).sweep_steps({5: 0}) == [(3, 2), (1, 2), (0, 1)]
    G6 = Geodesic(grid, MEM, 6, K)
    assert G6.sweep_steps({3: 0, 6: 0}) == [(4, 2), (3, 1), (1, 2), (0, 1)]
    assert G6.sweep_steps({5: 0, 6: 0}) == [(5, 1), (3, 2), (1, 2), (0, 1)]
    G6.adjoint_stride = 1
    assert G6.sweep_steps({6: 0}) == [(j, 1) for j in range(5, -1, -1)]


@pytest.mark.parametrize("fused,stride", [(False, 1), (False, 2), (True, 2)])
def test_low_memory_mode_gives_the_same_numbers(fused, stride):
    I0, grid, K, Ga = _setup(6, "all")
    Gm = Geodesic(grid, MEM, 6, K, keep="maps")
    Ga.fused = Gm.fused = fused
    Ga.adjoint_stride = Gm.adjoint_stride = stride
    I1 = common.ImFromNPArr(_blob(c=(21, 19), r=(11, 9)), MEM)
    m0 = _momentum(K=K, vmax=1.0)
    out = []
    for G in (Ga, Gm):
        f = GeodesicFit(G, I0, [(G.T, I1)], 0.5, m0=m0)
        e = f.forward()[0]
        f.gradients()
        out.append((e, common.AsNPCopy(f.g).copy(), common.AsNPCopy(G.hs[-1]).copy()))
    assert out[0][0] == out[1][0]
    np.testing.assert_array_equal(out[0][1], out[1][1])
    np.testing.assert_array_equal(out[0][2], out[1][2])


def _known_pair(vmax=1.5):
    """I0 and I1 = I0 o phi_{1,0} of a known geodesic (m0 along grad I0, the form of a matching's
    optimal momentum), with phi_{1,0}."""
    I0, grid, K, G = _setup(10)
    grad = ca.Field3D(grid, MEM)
    ca.Gradient(grad, I0)
    w = common.ImFromNPArr(np.cos(np.arange(N) / 6.0)[:, None] * np.ones((N, N)), MEM)
    ca.Mul_I(grad, w)  # a non-uniform normal motion of the boundary
    v = grad.clone()
    K.applyInverseOperator(v)
    ca.MulC_I(grad, vmax / float(ca.LInf(v)))
    h = common.AsNPCopy(G.shoot(grad)).copy()
    # I1 by SciPy's interpolation of I0 at phi_{1,0}
    I1 = ndimage.map_coordinates(_blob(), [h[..., 0, 0], h[..., 0, 1]], order=1, mode="nearest")
    return I0, common.ImFromNPArr(I1, MEM), h, grad


def test_known_shooting_is_recovered():
    """An image shot along a known geodesic is registered back: the mismatch falls by > 98% and the map
    is the known one within 0.25 voxel where the image has an edge."""
    I0, I1, h_true, m_true = _known_pair()
    res = shoot.register(I1, I0, device="cpu", normalize="none", sigma=0.02, iterations=80)
    assert res.final_mismatch < 0.02 * res.initial_mismatch
    h = common.AsNPCopy(res.phiinv)
    edge = np.abs(np.gradient(_blob()))
    where = (edge[0] + edge[1]) > 0.05
    err = np.abs(h - h_true)[..., 0, :2][where]
    assert err.max() < 0.25, err.max()
    assert float(ca.Min(res.jacobian)) > 0
    # the momentum found points the known one's way (it is not unique where the image is flat)
    a, b = common.AsNPCopy(res.m0).ravel(), common.AsNPCopy(m_true).ravel()
    assert np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b) > 0.7


def test_coarse_to_fine_reaches_the_single_scale_match():
    """scales (2, 1): the initial velocity of the coarse level carried up; the match is as close as the
    single scale's, with fewer full-resolution iterations, and the map does not fold."""
    I0, I1, h_true, _ = _known_pair()
    one = shoot.register(I1, I0, device="cpu", normalize="none", sigma=0.02, iterations=80)
    two = shoot.register(I1, I0, device="cpu", normalize="none", sigma=0.02, iterations=40, scales=(2, 1))
    assert [r["scale"] for r in two.energies][0] == 2 and two.energies[-1]["scale"] == 1
    assert two.final_mismatch < 1.5 * one.final_mismatch
    assert two.final_mismatch < 0.05 * two.initial_mismatch
    assert float(ca.Min(two.jacobian)) > 0
    with pytest.raises(ValueError, match="scales"):
        shoot.register(I1, I0, device="cpu", scales=(1, 2))


def test_regression_fits_images_along_a_known_geodesic():
    """Three images on a known geodesic (t = 0, 1.5, 3): the fitted images are the observed ones
    (mismatch down > 98%), the times fall on steps 0, T/2, T, with the base image estimated too."""
    I0, grid, K, G = _setup(10)
    G.shoot(_momentum(K=K, seed=3, vmax=1.5))
    obs = [(0.0, I0.clone())]
    for j, t in ((5, 1.5), (10, 3.0)):
        out = ca.Image3D(grid, MEM)
        ca.ApplyH(out, I0, G.h(j))
        obs.append((t, out))
    for est in (False, True):
        res = regress.fit(obs, device="cpu", normalize="none", sigma=0.05, iterations=60, estimate_base=est)
        assert res.steps == [0, 5, 10]
        assert res.final_mismatch < 0.02 * res.initial_mismatch, (est, res.initial_mismatch, res.final_mismatch)


def test_parameters_are_refused_in_one_line():
    with pytest.raises(ValueError, match="shoot: sigma"):
        shoot.register(np.zeros((8, 8, 8)), np.zeros((8, 8, 8)), sigma=0)
    with pytest.raises(TypeError, match="unknown parameter"):
        shoot.register(np.zeros((8, 8, 8)), np.zeros((8, 8, 8)), metric="mi")
    with pytest.raises(ValueError, match="shoot: folding_steps must be 'reject' or 'accept'"):
        shoot.register(np.zeros((8, 8, 8)), np.zeros((8, 8, 8)), folding_steps="never")
    with pytest.raises(ValueError, match="shoot: the fixed image is constant"):
        shoot.register(np.zeros((8, 8, 8)), np.zeros((8, 8, 8)))
    bad = np.ones((8, 8, 8))
    bad[2, 2, 2] = np.nan
    with pytest.raises(ValueError, match="shoot: the moving image holds NaN"):
        shoot.register(np.arange(512.0).reshape(8, 8, 8), bad)
    with pytest.raises(TypeError, match="shoot: m0 must be a Field3D on the fixed grid"):
        shoot.register(np.arange(512.0).reshape(8, 8, 8), np.arange(512.0).reshape(8, 8, 8), device="cpu",
                       m0=ca.Field3D(ca.GridInfo(ca.Vec3Di(8, 8, 1)), ca.MEM_HOST))
    with pytest.raises(ValueError, match="regress: need at least two"):
        regress.fit([(0.0, np.zeros((8, 8, 8)))])
    # regression runs at full resolution: scales are refused, not ignored
    with pytest.raises(ValueError, match="regress: scales"):
        regress.fit([(0.0, np.zeros((8, 8, 8))), (1.0, np.zeros((8, 8, 8)))], scales=(2, 1))
    with pytest.raises(ValueError, match="atlas: scales"):
        regress.atlas([np.zeros((8, 8, 8))] * 2, scales=(2, 1))
    # two different times on one time step would fit one image at the other's time
    assert regress.time_steps_of([0, 1, 2], 10) == [0, 5, 10]
    with pytest.raises(ValueError, match="0.01 fall on the same time step of 10"):
        regress.time_steps_of([0, 0.01, 2], 10)
    assert regress.time_steps_of([0, 0.01, 2], 400) == [0, 2, 400]
    with pytest.raises(ValueError, match="keep"):
        Geodesic(ca.GridInfo(ca.Vec3Di(8, 8, 1)), MEM, 4, None, keep="some")


def _pyca(*args, cwd):
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(ca.__file__)))  # the imported pyca, never the checkout
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.run([sys.executable, "-m", "pyca", *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=300)


def test_cli_shoot_and_regress(tmp_path):
    nib = pytest.importorskip("nibabel")
    aff = np.diag([2.0, 2.0, 2.0, 1.0])
    I0, I1, _, _ = _known_pair(vmax=1.0)
    a0 = np.repeat(common.AsNPCopy(I0).reshape(N, N, 1), 4, axis=2)[:24, :24]  # a small 3-D pair
    a1 = np.repeat(common.AsNPCopy(I1).reshape(N, N, 1), 4, axis=2)[:24, :24]
    a0, a1 = (np.pad(x, ((0, 0), (0, 0), (0, 0))) for x in (a0, a1))
    for name, arr in (("m.nii.gz", a0), ("f.nii.gz", a1)):
        nib.save(nib.Nifti1Image(arr.astype(np.float32), aff), str(tmp_path / name))
    r = _pyca("shoot", "--fixed", "f.nii.gz", "--moving", "m.nii.gz", "--out", "out", "--iterations", "15",
              "--device", "cpu", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s = json.load(open(tmp_path / "out" / "summary.json"))
    assert s["final_mismatch"] < s["initial_mismatch"]
    assert set(s["files"]) >= {"m0.nii.gz", "phiinv.nii.gz", "phi.nii.gz", "deformed.nii.gz", "jacdet.nii.gz",
                               "warp.nii.gz", "inverse_warp.nii.gz", "affine.mat"}
    # deformed = moving o phiinv (SciPy's interpolation of the moving image at phiinv)
    phiinv = np.asarray(nib.load(str(tmp_path / "out" / "phiinv.nii.gz")).dataobj).reshape(24, 24, 4, 3)
    deformed = np.asarray(nib.load(str(tmp_path / "out" / "deformed.nii.gz")).dataobj)
    ref = ndimage.map_coordinates(a0, np.moveaxis(phiinv, -1, 0), order=1, mode="nearest")
    np.testing.assert_allclose(deformed, ref, atol=1e-4)
    assert np.allclose(nib.load(str(tmp_path / "out" / "deformed.nii.gz")).affine, aff)
    # phi is phiinv's inverse: phiinv o phi = id (SciPy's interpolation of phiinv at phi) inside the grid
    phi = np.asarray(nib.load(str(tmp_path / "out" / "phi.nii.gz")).dataobj).reshape(24, 24, 4, 3)
    back = np.stack([ndimage.map_coordinates(phiinv[..., c], np.moveaxis(phi, -1, 0), order=1, mode="nearest")
                     for c in range(3)], -1)
    ident = np.stack(np.indices((24, 24, 4)), -1)
    assert np.abs(back - ident)[2:-2, 2:-2, :, :2].max() < 0.1
    # the ANTs/ITK transforms it wrote: `pyca apply` brings the moving image onto the fixed grid as deformed
    r = _pyca("apply", "--reference", "f.nii.gz", "--input", "m.nii.gz", "--transforms", "out", "--output",
              "applied.nii.gz", "--device", "cpu", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    applied = np.asarray(nib.load(str(tmp_path / "applied.nii.gz")).dataobj)
    np.testing.assert_allclose(applied, deformed, atol=1e-3)
    r = _pyca("shoot", "--fixed", "f.nii.gz", "--moving", "m.nii.gz", "--out", "out", cwd=tmp_path)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1  # an existing folder: one line
    r = _pyca("regress", "m.nii.gz:0", "f.nii.gz:2", "m.nii.gz:4", "--out", "reg", "--iterations", "5", "--device",
              "cpu", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s = json.load(open(tmp_path / "reg" / "summary.json"))
    assert s["time_steps_of_inputs"] == [0, 5, 10]
    assert os.path.isfile(tmp_path / "reg" / "fitted_2.nii.gz")
    r = _pyca("regress", "m.nii.gz:0", "--out", "reg2", cwd=tmp_path)
    assert r.returncode == 2 and "at least two" in r.stderr
    # a 2-D image with a 3-D one, and a constant image: one line, exit 2, before --out is claimed
    nib.save(nib.Nifti1Image(np.random.default_rng(1).random((24, 24, 8), dtype=np.float32), np.eye(4)),
             str(tmp_path / "m3.nii.gz"))
    nib.save(nib.Nifti1Image(np.ones((24, 24, 8), np.float32), np.eye(4)), str(tmp_path / "c3.nii.gz"))
    far = np.eye(4)
    far[:3, 3] = 1000.0  # the same image 1 m away in the world: no overlap
    nib.save(nib.Nifti1Image(np.random.default_rng(2).random((24, 24, 8), dtype=np.float32), far),
             str(tmp_path / "far3.nii.gz"))
    far_x = np.eye(4)
    far_x[0, 3] = 500.0  # 500 mm along x only: placed with its border extended, a noisy border is not constant
    nib.save(nib.Nifti1Image(np.random.default_rng(3).random((24, 24, 8), dtype=np.float32), far_x),
             str(tmp_path / "farx.nii.gz"))
    nib.save(nib.Nifti1Image(a1[:, :, 0].astype(np.float32), aff), str(tmp_path / "f2.nii.gz"))
    for args, says in ((("shoot", "--fixed", "f2.nii.gz", "--moving", "m3.nii.gz"), "2-D image with a 3-D one"),
                       (("shoot", "--fixed", "m3.nii.gz", "--moving", "c3.nii.gz"), "is constant"),
                       (("regress", "m3.nii.gz:0", "c3.nii.gz:1"), "c3.nii.gz (time 1) is constant"),
                       (("shoot", "--fixed", "m3.nii.gz", "--moving", "far3.nii.gz"), "do not overlap in the world"),
                       (("shoot", "--fixed", "m3.nii.gz", "--moving", "farx.nii.gz"), "do not overlap in the world"),
                       (("regress", "m3.nii.gz:0", "farx.nii.gz:1"), "do not overlap in the world")):
        r = _pyca(*args, "--out", "bad", "--device", "cpu", cwd=tmp_path)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not os.path.exists(tmp_path / "bad")
    r = _pyca("regress", "m.nii.gz:0", "f.nii.gz:2", "--out", "reg3", "--scales", "2,1", cwd=tmp_path)
    assert r.returncode == 2 and "--scales" in r.stderr  # not an option of regress


def test_world_overlap_is_the_fraction_of_the_fixed_grid_inside_the_moving_box():
    from pyca.registration.inputs import world_overlap

    g = ca.GridInfo((10, 8, 6), (2.0, 1.0, 1.0), (0.0, 0.0, 0.0))
    half = ca.GridInfo((10, 8, 6), (2.0, 1.0, 1.0), (10.0, 0.0, 0.0))  # 5 voxels along x: centres 5..9 inside
    assert world_overlap(g, half) == pytest.approx(0.5)
    flipped = ca.GridInfo((10, 8, 6), (2.0, 1.0, 1.0), (18.0, 0.0, 0.0), np.diag([-1.0, 1.0, 1.0]))  # LAS, same box
    assert world_overlap(g, flipped) == 1.0
    assert world_overlap(g, ca.GridInfo((10, 8, 6), (2.0, 1.0, 1.0), (500.0, 0.0, 0.0))) == 0.0
    big = ca.GridInfo((200, 10, 10), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0))  # sampled (48 per axis): about a quarter
    assert world_overlap(big, ca.GridInfo((50, 10, 10), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0))) == pytest.approx(0.25, abs=0.02)


_ANISO = ((20, 18, 12), (1.0, 1.2, 1.5))


def _fused_case(aniso, fused, mem=MEM):
    """phi_{1,0} and the gradients (momentum, base image) of a regression with two measurements, on
    the 2-D test grid or a 3-D grid of anisotropic spacing, computed on `mem` by the chains of operations
    (fused False) or the fused passes (True: I0 o h_j sampled inside the force pass; 'sample apart': by
    ApplyH before it, the default)."""
    if not aniso:
        I0, grid, K, _ = _setup(6)
        m0 = _momentum(K=K, vmax=1.0)
        I1 = common.ImFromNPArr(_blob(c=(21, 19), r=(11, 9)), MEM)
    else:
        size, sp = _ANISO
        grid = ca.GridInfo(ca.Vec3Di(*size), ca.Vec3Df(*sp), ca.Vec3Df(0, 0, 0))
        rng = np.random.default_rng(7)
        I0 = common.ImFromNPArr(ndimage.gaussian_filter(rng.random(size), 2), MEM)
        I1 = common.ImFromNPArr(ndimage.gaussian_filter(rng.random(size), 2), MEM)
        I0.setGrid(grid)
        I1.setGrid(grid)
        K = epdiff_kernel(grid, 0.01, 0.01, 0.001, 1)
        a = ndimage.gaussian_filter(rng.standard_normal(size + (3,)), (2, 2, 2, 0))
        m0 = common.FieldFromNPArr(a, MEM, sp=sp)
        v = m0.clone()
        K.applyInverseOperator(v)
        ca.MulC_I(m0, 1.5 / float(ca.LInf(v)))  # velocities of 1.5 world units at most
    if mem != MEM:
        I0, I1, m0 = I0.clone(mem), I1.clone(mem), m0.clone(mem)
        K = epdiff_kernel(grid, 0.01, 0.01, 0.001, 1)
    G = Geodesic(grid, mem, 6, K)
    G.fused, G.fuse_sample = bool(fused), fused is True
    f = GeodesicFit(G, I0, [(3, I1), (6, I1)], 0.5, m0=m0, estimate_base=True)
    f.forward()
    f.gradients()
    return [common.AsNPCopy(x.clone(MEM) if mem != MEM else x).copy() for x in (f.g, f.gI, G.hs[-1])]


def _assert_same(ref, other):
    for a, b in zip(ref, other):
        np.testing.assert_allclose(b, a, atol=1e-5 * np.abs(a).max())  # float32 positions, rounded apart


def test_fused_adjoint_passes_equal_the_chain_of_operations():
    """The fused passes of the shooting and of the adjoint sweep (pyca/registration/_geodesic_kernels.py,
    Geodesic.fused) give the chains of operations' map phi_{1,0} and gradients (momentum and base image),
    on a 2-D and a 3-D grid of anisotropic spacing: their CPU loops, here."""
    pytest.importorskip("pyca.kernels")
    from pyca.kernels import NoCompilerError

    for aniso in (False, True):
        ref = _fused_case(aniso, False)
        for fused in (True, "sample apart"):
            try:
                _assert_same(ref, _fused_case(aniso, fused))
            except NoCompilerError as e:
                pytest.skip(f"no C++ compiler for the kernels' CPU loops: {e}")


def test_the_fused_passes_are_the_default_on_the_gpu_only():
    """Geodesic.fused = None: a geodesic on the GPU runs the fused passes (their CUDA kernels equal the
    CPU's chains: the test below, both ways of sampling the image), one on the CPU the chains of
    operations (faster there)."""
    _, grid, K, G = _setup()
    assert Geodesic.fused is None and G.fused is False
    assert Geodesic.fuse_sample is False  # the image sampled by ApplyH before the force pass
    if ca.cuda_available():
        assert Geodesic(grid, ca.MEM_DEVICE, 4, epdiff_kernel(grid, 0.01, 0.01, 0.001, 1)).fused is True


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("fused", [False, True, "sample apart"])
def test_geodesic_on_the_gpu_equals_the_cpu_chains(fused):
    """The same cases on the GPU (the chains of operations, or the fused passes' CUDA kernels) against
    the CPU's chains of operations."""
    for aniso in (False, True):
        _assert_same(_fused_case(aniso, False), _fused_case(aniso, fused, ca.MEM_DEVICE))


def test_atlas_finds_the_centre_of_two_geodesics():
    """Two images shot from one blob along opposite geodesics (m and -m): the atlas energy falls at every
    template update, and the template is closer to the blob they came from than their mean image is."""
    I0, grid, K, G = _setup(10)
    m = _momentum(K=K, seed=3, vmax=2.0)
    subjects = []
    for sign in (1.0, -1.0):
        mm = m.clone()
        ca.MulC_I(mm, sign)
        G.shoot(mm)
        out = ca.Image3D(grid, MEM)
        ca.ApplyH(out, I0, G.h(10))
        subjects.append(out)
    res = regress.atlas(subjects, device="cpu", normalize="none", sigma=0.05, template_iterations=4, iterations=15)
    assert all(b < a for a, b in zip(res.energies, res.energies[1:])), res.energies
    ref = common.AsNPCopy(I0)
    mean = 0.5 * (common.AsNPCopy(subjects[0]) + common.AsNPCopy(subjects[1]))
    assert np.linalg.norm(common.AsNPCopy(res.template) - ref) < 0.8 * np.linalg.norm(mean - ref)
