"""The LDDMM solver's working grid (pad='fft': the fixed grid extended to FFT-friendly sizes, outputs
cropped back) and its heavy-ball momentum (docs/lddmm.md, 'The working grid', 'Momentum')."""
from __future__ import annotations

import numpy as np
import pytest

import pyca as ca
from pyca.apps import _lddmm_solver, data, lddmm
from pyca.registration import transforms

needs_gpu = pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")


def _largest_prime(n):
    p, q = 1, 2
    while n > 1:
        while n % q == 0:
            n //= q
            p = q
        q += 1
    return p


@pytest.mark.parametrize("scales", [(1,), (2, 1), (4, 2, 1), (3, 1)])
def test_fft_size_is_the_smallest_size_whose_every_scale_has_no_prime_factor_above_5(scales):
    def friendly(m):
        return all(_largest_prime(transforms.coarse_grid(ca.GridInfo((m, 8, 8)), f).size().x) <= 5 for f in scales)

    for n in range(4, 260):
        m = transforms.fft_size(n, scales)
        assert m >= n and friendly(m), (n, m)
        assert not any(friendly(k) for k in range(n, m)), (n, m)
    assert transforms.fft_size(1, scales) == 1  # a 2-D image's z stays


def test_fft_grid_keeps_spacing_origin_direction_and_voxel_indices():
    d = np.array([[-1.0, 0, 0], [0, 1, 0], [0, 0, 1]])
    g = ca.GridInfo((98, 116, 94), (2.0, 2.0, 2.5), (10.0, -5.0, 3.0), direction=d)
    w = transforms.fft_grid(g, (4, 2, 1))
    assert tuple(w.size()) == (100, 120, 96)
    assert tuple(w.spacing()) == tuple(g.spacing()) and tuple(w.origin()) == tuple(g.origin())
    np.testing.assert_array_equal(w.direction(), g.direction())
    np.testing.assert_array_equal(transforms.vox2world(w), transforms.vox2world(g))
    assert transforms.fft_grid(ca.GridInfo((64, 60, 1)), (4, 2, 1)).size() == ca.Vec3Di(64, 60, 1)


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=needs_gpu)])
def test_extended_repeats_the_border_masks_by_zero_and_cropped_undoes_it(device):
    mem = ca.MEM_DEVICE if device == "gpu" else ca.MEM_HOST
    rng = np.random.default_rng(3)
    a = rng.random((7, 6, 5)).astype(np.float32)
    g = ca.GridInfo((7, 6, 5), (1.5, 1.0, 2.0))
    im = ca.Image3D.from_array(np.asfortranarray(a), g).clone(mem)
    w = transforms.fft_grid(g)
    assert tuple(w.size()) == (8, 6, 5)
    ext = transforms.extended(im, w)
    np.testing.assert_array_equal(ext.numpy(), np.pad(a, ((0, 1), (0, 0), (0, 0)), mode="edge"))
    mask = transforms.extended(im, w, labels=True)
    np.testing.assert_array_equal(mask.numpy(), np.pad(a, ((0, 1), (0, 0), (0, 0))))
    np.testing.assert_array_equal(transforms.cropped(ext, g).numpy(), a)
    f = ca.Field3D(w, mem)
    ca.SetToIdentity(f)
    np.testing.assert_array_equal(transforms.cropped(f, g).numpy(), np.moveaxis(np.indices((7, 6, 5), np.float32), 0, -1))


def _pair(size):
    fixed, moving = data.builtin_pair(size=size, spacing=(2.0, 2.0, 2.0))
    return fixed, moving


def test_padded_registration_returns_the_fixed_grid_and_the_unpadded_answer():
    """pad 'fft' on a grid of sizes 29 and 23: the outputs are on the fixed grid and register as the
    unpadded run does (a different box for K: close, not equal); on a grid already FFT-friendly the
    two runs are the same bits."""
    fixed, moving = _pair((29, 30, 23))
    kw = dict(scales=(2, 1), iterations=(10, 10), affine="none", device="cpu")
    pad = lddmm.register(fixed, moving, pad="fft", **kw)
    ref = lddmm.register(fixed, moving, pad="none", **kw)
    assert [s["grid"] for s in pad.timings["scales"]] == [[15, 15, 12], [30, 30, 24]]
    assert [s["grid"] for s in ref.timings["scales"]] == [[14, 15, 12], [29, 30, 23]]
    for out in (pad.deformed, pad.jacobian, pad.phiinv, pad.phi, *pad.velocity):
        assert tuple(out.grid().size()) == (29, 30, 23)
    assert pad.final_mismatch < 0.5 * pad.initial_mismatch
    assert pad.final_mismatch == pytest.approx(ref.final_mismatch, rel=0.05)
    # maps moving up to 2.3 voxels: within 0.025 voxels on average, 0.09 away from the border, 0.17 at most
    # (where the periodic K sees the added voxels instead of the opposite face; 0.32 at the far face when the
    # added voxels were matched)
    d = np.abs(pad.phiinv.numpy() - ref.phiinv.numpy()).max(axis=-1)
    assert d.mean() < 0.05 and d[3:-3, 3:-3, 3:-3].max() < 0.15 and d.max() < 0.25
    # already friendly: nothing padded, the same bits
    fixed, moving = _pair((30, 30, 24))
    a = lddmm.register(fixed, moving, pad="fft", **kw)
    b = lddmm.register(fixed, moving, pad="none", **kw)
    np.testing.assert_array_equal(a.deformed.numpy(), b.deformed.numpy())


@pytest.mark.parametrize("metric", ["ssd", "mi", "lncc"])
def test_padded_voxels_are_not_matched(metric, monkeypatch):
    """pad 'fft' without a mask: the voxels added beyond the fixed grid's far faces hold no fixed image (its
    border repeated), so the match counts the fixed grid's own voxels only (a mask of 1 on them, 0 on the
    added ones; MI's histogram and LNCC's sum take as many voxels as the fixed grid has). A fixed image cut
    through its object at the far faces, its added voxels filled with a bright value instead of the
    border: with one scale and no bias gain (whose smoothing, like the coarse scales' antialiasing, reads
    the fixed image near its faces) ssd, mi and lncc give the same map (with the added voxels matched, the
    fill moved it by 1.0-3.4 voxels; with lncc's windows reading them near the far faces, by 1.07). The SSD
    keeps its plain difference: the solver compares the deformed moving image with itself there
    (Level.pad); lncc's windows are truncated to the mask (ca.LNCC, docs/operations/similarity.md)."""
    fixed, moving = _pair((29, 30, 23))
    g = ca.GridInfo((19, 30, 17), tuple(fixed.grid().spacing()))  # x 6-22 and z 3-19 hold the object
    fixed, moving = (ca.Image3D.from_array(np.asfortranarray(im.numpy()[:19, :, :17]), g) for im in (fixed, moving))
    kw = dict(scales=(1,), iterations=(12,), affine="none", device="cpu", metric=metric, bias_sigma=0)
    made, level = [], lddmm.Level
    monkeypatch.setattr(lddmm, "Level", lambda *a, **k: made.append(level(*a, **k)) or made[-1])
    ref = lddmm.register(fixed, moving, **kw)
    inside = made[-1].pad if metric == "ssd" else made[-1].metric.mask  # the solver's, on the working grid
    assert (made[-1].metric.mask is None) == (metric == "ssd") and made[-1]._plain == (metric == "ssd")
    assert tuple(inside.grid().size()) == (20, 30, 18)  # 19 x 30 x 17 padded
    assert float(ca.Sum(inside)) == 19 * 30 * 17
    if metric == "lncc":  # its windows' support: the same fixed grid's voxels
        assert made[-1].metric.support is made[-1].metric.mask
    orig, calls = transforms.extended, []

    def bright(im, grid, labels=False):  # the fixed image's pad (lddmm extends it first; then I0, the mask)
        out = orig(im, grid, labels)
        calls.append(labels)
        if len(calls) > 1:
            return out
        b = out.numpy().copy()
        m = tuple(im.grid().size())
        b[m[0]:], b[:, m[1]:], b[:, :, m[2]:] = 1.0, 1.0, 1.0
        return ca.Image3D.from_array(np.asfortranarray(b), grid)

    monkeypatch.setattr(lddmm, "extended", bright)
    got = lddmm.register(fixed, moving, **kw)
    assert np.abs(got.phiinv.numpy() - ref.phiinv.numpy()).max() < 1e-4


def test_lncc_with_a_mask_and_the_pad_takes_the_fixed_grid_as_its_windows_support(monkeypatch):
    """pad 'fft' with a mask of the user's and lncc: the mask (extended by 0) says which windows count, the
    fixed grid's voxels (not the mask) bound the windows (ca.LNCC's support), at every scale."""
    fixed, moving = _pair((29, 30, 23))
    m = np.zeros((29, 30, 23), np.float32)
    m[3:25, 4:27, 2:20] = 1.0
    mask = ca.Image3D.from_array(np.asfortranarray(m), fixed.grid())
    made, level = [], lddmm.Level
    monkeypatch.setattr(lddmm, "Level", lambda *a, **k: made.append(level(*a, **k)) or made[-1])
    lddmm.register(fixed, moving, scales=(2, 1), iterations=(3, 3), affine="none", device="cpu", metric="lncc",
                   fixed_mask=mask)
    fine = made[-1].metric
    assert tuple(fine.support.grid().size()) == (30, 30, 24)  # 29 x 30 x 23 padded
    assert float(ca.Sum(fine.support)) == 29 * 30 * 23 and float(ca.Sum(fine.mask)) == m.sum()
    coarse = made[0].metric
    assert coarse.support is not coarse.mask and float(ca.Sum(coarse.support)) > float(ca.Sum(coarse.mask))


def test_pad_refuses_unknown_values():
    with pytest.raises(ValueError, match="pad"):
        lddmm.register(*_pair((16, 16, 8)), pad="pow2", iterations=0)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=needs_gpu)])
def test_momentum_adds_mu_times_the_last_accepted_step(device, fused, monkeypatch):
    """update(eps) with momentum mu gives the plain update's momenta plus mu (m - m_prev), m_prev the
    momenta before the last update; not at a scale's first step nor after an undo() (a restart)."""
    monkeypatch.setattr(_lddmm_solver.Level, "fused", fused)
    mem = ca.MEM_DEVICE if device == "gpu" else ca.MEM_HOST
    fixed, moving = (im.clone(mem) for im in _pair((24, 24, 16)))
    p = dict(lddmm.DEFAULTS, alpha=0.15, sigma=0.03, gamma=0.02, band_tol=1e-4)
    mu, eps = 0.6, 0.2

    def level(momentum):
        lev = _lddmm_solver.Level(fixed.grid(), mem, 3, moving, fixed, dict(p, momentum=momentum))
        lev.forward()
        lev.gradients()
        lev.direction_max()
        lev.update(eps)  # the first step: plain in both
        lev.forward()
        return lev

    a, b = level(mu), level(0.0)
    m1 = [x.numpy().copy() for x in b.m]
    m0 = [x.numpy().copy() for x in b.m_new]  # the momenta before the first step
    assert any(np.abs(x - y).max() > 0 for x, y in zip(m1, m0))
    for x, y in zip(a.m, b.m):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    for lev in (a, b):
        lev.gradients()
        lev.update(eps)
    for x, y, u, w in zip(a.m, b.m, m1, m0):
        np.testing.assert_allclose(x.numpy(), y.numpy() + np.float32(mu) * (u - w), rtol=1e-5,
                                   atol=1e-6 * float(np.abs(u).max()))
    # v = K m: the velocities of the momenta with momentum
    tmp = ca.Field3D(fixed.grid(), mem)
    for j in range(3):
        a.K.applyInverseOperator(tmp, a.m[j])
        np.testing.assert_allclose(a.v[j].numpy(), tmp.numpy(), rtol=1e-5, atol=1e-6 * float(np.abs(tmp.numpy()).max()))
    # after an undo() the next step is plain again (a restart)
    c = level(mu)
    c.forward()
    c.undo()
    c.gradients()
    c.update(eps)
    d = level(0.0)
    d.forward()
    d.undo()
    d.gradients()
    d.update(eps)
    for x, y in zip(c.m, d.m):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_momentum_refuses_values_outside_0_1():
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="momentum"):
            lddmm.register(*_pair((16, 16, 8)), momentum=bad, iterations=0)


_BITS = """
import hashlib, numpy as np, pyca as ca
from pyca.apps import data, lddmm
f, m = data.builtin_pair(size=(29, 30, 23), spacing=(2.0, 2.0, 2.0))
t2 = ca.Image3D.from_array(np.asfortranarray(data.other_contrast(m.numpy(), "t2")), m.grid())
r = lddmm.register(f, t2, metric="mi", scales=(2, 1), iterations=(8, 8), affine="none", device="cpu")
h = hashlib.sha1()
for a in (r.deformed, r.phiinv, r.phi, r.jacobian):
    h.update(np.ascontiguousarray(a.numpy()).tobytes())
print(h.hexdigest(), sum(not e["accepted"] for e in r.energies), len(r.energies))
"""


def test_mi_registration_has_the_same_bits_on_1_2_and_16_threads():
    """mi's defaults (the padded working grid, momentum): a whole registration, outputs included, gives
    the same bits in processes with 1, 2 and 16 threads."""
    import os
    import subprocess
    import sys

    out = set()
    for threads in (1, 2, 16):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        r = subprocess.run([sys.executable, "-c", _BITS], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        out.add(r.stdout.split("\n")[-2] if r.stdout.endswith("\n") else r.stdout)
    assert len(out) == 1, out
    digest, rejected, total = next(iter(out)).split()
    assert int(total) >= 10  # the run took steps (and the momentum acted after the first)
