"""PyCA's MultiscaleManager and MultiscaleResampler* (as GreedyReg.py and ElastReg.py use them)
against NumPy/SciPy transcriptions of PyCA's MultiscaleManager.cxx / MultiscaleResampler.cxx."""
import math

import numpy as np
import pytest
from compat_helpers import both_memory, field, gauss_ref, identity, image, make_grid, npy, resample_ref, spacing

import pyca as ca


def test_manager_levels_and_grids():
    grid = make_grid("3d")  # 17 x 13 x 11, spacing (1.5, 1, 2)
    sm = ca.MultiscaleManager(grid)
    for f in (1, 4, 2):
        sm.addScaleLevel(f)
    with pytest.raises(ValueError, match="same downsample factor"):
        sm.addScaleLevel(2)
    assert sm.nScale() == 3
    sizes = []
    for level in range(3):
        sm.set(level)
        f = [4, 2, 1][level]
        assert sm.getScaleFactor() == f and sm.getCurLevel() == level
        assert sm.isFirstScale() == (level == 0) and sm.isLastScale() == (level == 2)
        assert sm.isIdentityScale() == (f == 1)
        cur = sm.getCurGrid()
        want = [max(n // f, 1) for n in (17, 13, 11)]
        assert cur.size().tolist() == want
        np.testing.assert_allclose(cur.spacing().tolist(),
                                   np.array([1.5, 1, 2]) * np.array([17, 13, 11]) / np.array(want), rtol=1e-6)
        assert cur.origin().tolist() == grid.origin().tolist()
        if sizes:
            assert sm.getPreGrid().size().tolist() == sizes[-1]
            np.testing.assert_allclose(sm.getCurFactor().tolist(), np.array(sizes[-1]) / np.array(want), rtol=1e-6)
        sizes.append(want)
    sm.set(99)  # clamped to the last level, as PyCA
    assert sm.getCurLevel() == 2
    sm.start()
    assert sm.getCurLevel() == 0
    sm.next()
    assert sm.getCurLevel() == 1
    assert sm.curNVox() == math.prod(sizes[1])
    assert ca.Multiscale.downScale(grid, 2).size().tolist() == [8, 6, 5]


@pytest.mark.parametrize("gauss", [True, False])
@both_memory(rtol=1e-5, atol=1e-5)
def test_resampler_downsamples_images_and_fields(mem, gauss):
    grid = make_grid("3d")
    rng = np.random.default_rng(11)
    a = rng.uniform(-1, 1, tuple(grid.size())).astype(np.float32).astype(np.float64)
    fa = rng.uniform(-1, 1, tuple(grid.size()) + (3,)).astype(np.float32).astype(np.float64)
    sm = ca.MultiscaleManager(grid)
    sm.addScaleLevel(2)
    sm.addScaleLevel(1)
    ca.ThreadMemoryManager.init(grid, mem, 8)  # as the examples do
    try:
        rs = (ca.MultiscaleResamplerGaussGPU if gauss else ca.MultiscaleResamplerGPU)(grid) if mem == ca.MEM_DEVICE \
            else (ca.MultiscaleResamplerGaussCPU if gauss else ca.MultiscaleResamplerCPU)(grid)
        sm.set(0)
        rs.setScaleLevel(sm)
        I, F = ca.Image3D(grid, mem), ca.Field3D(grid, mem)
        rs.downsampleImage(I, image(a, grid, mem))
        rs.downsampleField(F, field(fa, grid, mem))
    finally:
        ca.ThreadMemoryManager.destroy()
    cur = sm.getCurGrid()
    assert I.grid() == cur and F.grid() == cur
    src, fsrc = a, fa
    if gauss:
        r = sm.getCurFactor().tolist()  # previous (original) grid / current grid
        sig = [math.sqrt(x / 2.0) for x in r]
        rad = [2 * math.ceil(s) for s in sig]
        src = gauss_ref(a, sig, rad)
        fsrc = np.stack([gauss_ref(fa[..., c], sig, rad) for c in range(3)], axis=-1)
    np.testing.assert_allclose(npy(I), resample_ref(src, tuple(cur.size())), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(npy(F), resample_ref(fsrc, tuple(cur.size())), rtol=1e-5, atol=1e-5)
    return I, F


@both_memory(rtol=1e-5, atol=1e-5)
def test_resampler_upsamples_h_and_v_fields(mem):
    grid = make_grid("3d")
    sm = ca.MultiscaleManager(grid)
    sm.addScaleLevel(2)
    sm.addScaleLevel(1)
    rs = ca.MultiscaleResamplerGauss(grid)
    sm.set(0)
    rs.setScaleLevel(sm)
    h, v, im = ca.Field3D(grid, mem), ca.Field3D(grid, mem), ca.Image3D(grid, mem)
    rs.updateHField(h)  # first level: identity on the coarse grid
    rs.updateVField(v)
    rs.upsampleImage(im)
    coarse = sm.getCurGrid()
    np.testing.assert_allclose(npy(h), identity(coarse), atol=0)
    assert np.all(npy(v) == 0) and np.all(npy(im) == 0)
    # a smooth displacement on the coarse grid (voxels), carried up as PyCA does: to world units,
    # resampled (no vector rescaling), back to voxels of the fine grid
    rng = np.random.default_rng(12)
    d = rng.uniform(-0.5, 0.5, tuple(coarse.size()) + (3,)).astype(np.float32).astype(np.float64)
    hc = field(identity(coarse) + d, coarse, mem)
    vc = field(d, coarse, mem)
    h.setGrid(coarse)
    ca.Copy(h, hc)
    v.setGrid(coarse)
    ca.Copy(v, vc)
    sm.set(1)
    rs.setScaleLevel(sm)
    rs.updateHField(h)
    rs.updateVField(v)
    assert h.grid() == grid and v.grid() == grid
    world = resample_ref(d * spacing(coarse), tuple(grid.size()))
    np.testing.assert_allclose(npy(h), identity(grid) + world / spacing(grid), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(npy(v), resample_ref(d, tuple(grid.size())), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="previous level"):
        rs.updateVField(ca.Field3D(grid, mem))
    return h, v
