"""The `filters` family against independent references (docs/operations/filters.md).

GaussianBlur / GaussianFilter against scipy.ndimage.gaussian_filter (mode='nearest', the same
radius), Convolve against scipy.ndimage.correlate (PyCA's orientation), and the fluid operator against a float64 NumPy
FFT implementation of the documented symbol, closed-form Fourier modes and K(L(v)) = v.
"""
import numpy as np
import pytest
import scipy.ndimage as ndi

import pyca as ca
from memory_helpers import MEMS


def image(arr, grid, mem):
    return ca.Image3D.from_array(np.asarray(arr, np.float32), grid).to(mem)


def field(arr, grid, mem):
    return ca.Field3D.from_array(np.asarray(arr, np.float32), grid).to(mem)


def sp_of(grid):
    return np.array([float(s) for s in grid.spacing()])


# ------------------------------------------------------------------------------- Gaussian
def scipy_gauss(a, sigma_vox, radius):
    return ndi.gaussian_filter(np.asarray(a, np.float64), sigma=tuple(sigma_vox), mode="nearest",
                               radius=tuple(int(r) for r in radius))


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("sigma", [(2.0, 1.5, 3.0), (0.7, 2.5, 1.0), (3.0, 0.0, 2.0)])
def test_gaussian_blur_matches_scipy(grid, rng, mem, sigma):
    a = rng.standard_normal(tuple(grid.size())).astype(np.float32)
    sv = np.asarray(sigma) / sp_of(grid)  # world -> voxels
    im, out = image(a, grid, mem), ca.Image3D(grid, mem)
    # default radius: int(4 * sigma_vox + 0.5), scipy's truncate=4
    ca.GaussianBlur(out, im, ca.Vec3Df(*sigma))
    auto = [int(4 * s + 0.5) if s > 0 else 0 for s in sv]
    np.testing.assert_allclose(out.numpy(), scipy_gauss(a, sv, auto), rtol=1e-5, atol=2e-6)
    # explicit radius, larger than some dimensions (the border clamps)
    rad = (5, 3, 20)
    ca.GaussianBlur(out, im, ca.Vec3Df(*sigma), ca.Vec3Di(*rad))
    np.testing.assert_allclose(out.numpy(), scipy_gauss(a, sv, [r if s > 0 else 0 for r, s in zip(rad, sv)]),
                               rtol=1e-5, atol=2e-6)
    np.testing.assert_array_equal(im.numpy(), a)
    # in place
    ca.GaussianBlur(im, im, ca.Vec3Df(*sigma), ca.Vec3Di(*rad))
    np.testing.assert_allclose(im.numpy(), out.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("mem", MEMS)
def test_gaussian_blur_field_is_componentwise(grid, rng, mem):
    v = rng.standard_normal(tuple(grid.size()) + (3,)).astype(np.float32)
    out = ca.Field3D(grid, mem)
    ca.GaussianBlur(out, field(v, grid, mem), (1.5, 2.0, 2.0), (3, 3, 3))
    sv = np.array([1.5, 2.0, 2.0]) / sp_of(grid)
    ref = np.stack([scipy_gauss(v[..., c], sv, (3, 3, 3)) for c in range(3)], -1)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("mem", MEMS)
def test_gaussian_filter_object_pyca_api(grid, rng, mem):
    a = rng.standard_normal(tuple(grid.size())).astype(np.float32)
    im, out, tmp = image(a, grid, mem), ca.Image3D(grid, mem), ca.Image3D(grid, mem)
    for cls in (ca.GaussianFilter, ca.GaussianFilterCPU, ca.GaussianFilterGPU):
        g = cls()
        sig, rad = ca.Vec3Df(1.2, 0.8, 1.5), ca.Vec3Di(3, 2, 4)  # VOXEL units (PyCA)
        g.updateParams(grid.size(), sig, rad)
        g.filter(out, im, tmp)
        ref = scipy_gauss(a, sig, rad)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=2e-6)
        out.fill(0.0)
        g.Filter(out, im, tmp)  # PyCA's Python spelling
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=2e-6)
        g.filter(out, im)  # no scratch
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=2e-6)
    assert tuple(g.size()) == tuple(grid.size()) and tuple(g.kRadius()) == (3, 2, 4)


def test_gaussian_filter_object_checks(grid):
    g = ca.GaussianFilter()
    im = ca.Image3D(grid, ca.MEM_HOST)
    im.fill(1.0)
    with pytest.raises(ValueError, match="updateParams"):
        g.filter(ca.Image3D(grid, ca.MEM_HOST), im)
    g.updateParams((4, 4, 4), (1, 1, 1), (2, 2, 2))
    with pytest.raises(ValueError, match="size"):
        g.filter(ca.Image3D(grid, ca.MEM_HOST), im)
    with pytest.raises(ValueError, match="kRadius"):
        g.updateParams(grid.size(), (1, 1, 1), (-1, 2, 2))
    g.updateParams(grid.size(), (1, 1, 1), (2, 2, 2))
    with pytest.raises(ValueError, match="tmp"):
        g.filter(im, im, im)


def test_gaussian_blur_rejects_bad_input(grid):
    a = ca.Image3D(grid, ca.MEM_HOST)
    a.fill(2.0)
    with pytest.raises(ValueError, match=r"GaussianBlur.*'in'"):
        ca.GaussianBlur(ca.Image3D(ca.GridInfo((4, 5, 6))), a, (1, 1, 1))
    with pytest.raises(ValueError, match=r"GaussianBlur.*kRadius"):
        ca.GaussianBlur(ca.Image3D(grid), a, (1, 1, 1), (1, -2, 1))
    np.testing.assert_array_equal(np.asarray(a), 2.0)


# ------------------------------------------------------------------------------- Convolve
@pytest.mark.parametrize("mem", MEMS)
def test_convolve_matches_scipy(grid, rng, mem):
    a = rng.standard_normal(tuple(grid.size())).astype(np.float32)
    ks = (3, 5, 3) if grid.size()[2] > 1 else (5, 3, 1)
    k = rng.standard_normal(ks).astype(np.float32)
    out = ca.Image3D(grid, mem)
    ca.Convolve(out, image(a, grid, mem), image(k, ca.GridInfo(ks), mem))
    ref = ndi.correlate(a.astype(np.float64), k.astype(np.float64), mode="nearest")
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_convolve_rejects_even_kernels(grid):
    a = ca.Image3D(grid, ca.MEM_HOST)
    with pytest.raises(ValueError, match=r"Convolve.*odd"):
        ca.Convolve(ca.Image3D(grid), a, ca.Image3D(ca.GridInfo((2, 1, 1))))


# ------------------------------------------------------------------------------- fluid operator
def np_fluid(v, sp, alpha, beta, gamma, lpow, inverse):
    """float64 FFT implementation of the documented symbol of L (periodic finite differences)."""
    shape = v.shape[:3]
    w = [2 * np.pi * np.arange(n) / n for n in shape]
    W = np.meshgrid(*w, indexing="ij")
    c = [(2 - 2 * np.cos(W[d])) / sp[d] ** 2 for d in range(3)]
    s = [np.sin(W[d]) / sp[d] for d in range(3)]
    lam = alpha * (c[0] + c[1] + c[2]) + gamma
    L = np.zeros(shape + (3, 3))
    for i in range(3):
        for j in range(3):
            L[..., i, j] = beta * (c[i] if i == j else s[i] * s[j]) + (lam if i == j else 0)
    if inverse:
        sing = np.abs(np.linalg.det(L)) < 1e-30
        L[sing] = np.eye(3)
        L = np.linalg.inv(L)
        L[sing] = 0
    M = np.linalg.matrix_power(L, lpow) if lpow else np.broadcast_to(np.eye(3), L.shape)
    F = np.stack([np.fft.fftn(v[..., k].astype(np.float64)) for k in range(3)], -1)
    G = np.einsum("...ij,...j->...i", M, F)
    return np.stack([np.fft.ifftn(G[..., k]).real for k in range(3)], -1)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("beta", [0.0, 0.3])
@pytest.mark.parametrize("lpow, inverse", [(1, False), (2, False), (1, True), (2, True), (0, True)])
def test_fluid_operator_matches_numpy_symbol(grid, rng, mem, beta, lpow, inverse):
    v = rng.standard_normal(tuple(grid.size()) + (3,)).astype(np.float32)
    out = ca.Field3D(grid, mem)
    alpha, gamma = 0.6, 0.2
    ca.ApplyFluidOperator(out, field(v, grid, mem), alpha, beta, gamma, lpow, inverse)
    ref = np_fluid(v, sp_of(grid), alpha, beta, gamma, lpow, inverse)
    scale = np.abs(ref).max()
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=2e-5 * scale)


# Grids whose nz is a power of two from 8 to 256: on the GPU these take the fused z pass (cuFFT per
# z-plane, then one kernel for the z transforms and the operator; cuda/src/ops/fft_zpass.cuh).
@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("size", [(9, 6, 8), (5, 7, 16), (12, 10, 32), (6, 5, 64), (4, 3, 128), (3, 2, 256),
                                  (7, 1, 16)])
@pytest.mark.parametrize("beta, lpow, inverse", [(0.0, 1, False), (0.3, 2, True), (0.0, 2, True)])
def test_fluid_operator_on_power_of_two_depths(rng, mem, size, beta, lpow, inverse):
    grid = ca.GridInfo(size, (1.5, 1.0, 0.7))
    v = rng.standard_normal(size + (3,)).astype(np.float32)
    out = ca.Field3D(grid, mem)
    alpha, gamma = 0.6, 0.2
    ca.ApplyFluidOperator(out, field(v, grid, mem), alpha, beta, gamma, lpow, inverse)
    ref = np_fluid(v, sp_of(grid), alpha, beta, gamma, lpow, inverse)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=2e-5 * np.abs(ref).max())


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_fluid_kernel_inverts_operator(grid, rng, mem, beta):
    v = rng.standard_normal(tuple(grid.size()) + (3,)).astype(np.float32)
    k = ca.FluidKernelFFT()
    k.setAlpha(0.5)
    k.setBeta(beta)
    k.setGamma(0.1)
    k.setLPow(2)
    k.setGrid(grid)
    f, w = ca.Field3D(grid, mem), ca.Field3D(grid, mem)
    vin = field(v, grid, mem)
    k.applyOperator(f, vin)
    k.applyInverseOperator(w, f)
    np.testing.assert_allclose(w.numpy(), v, rtol=1e-3, atol=2e-4)
    np.testing.assert_array_equal(vin.numpy(), v)  # input untouched
    # in place
    k.applyInverseOperator(f)
    np.testing.assert_allclose(f.numpy(), v, rtol=1e-3, atol=2e-4)


@pytest.mark.parametrize("mem", MEMS)
def test_fluid_operator_on_a_fourier_mode(mem):
    g = ca.GridInfo((16, 12, 10), (1.5, 1.0, 2.0))
    kx, ky, kz = 3, 2, 1
    X, Y, Z = np.meshgrid(*[np.arange(n) for n in (16, 12, 10)], indexing="ij")
    mode = np.cos(2 * np.pi * (kx * X / 16 + ky * Y / 12 + kz * Z / 10))
    v = np.zeros((16, 12, 10, 3))
    v[..., 0] = mode
    alpha, gamma = 0.8, 0.25
    lam = gamma + alpha * sum((2 - 2 * np.cos(2 * np.pi * k / n)) / h ** 2
                              for k, n, h in zip((kx, ky, kz), (16, 12, 10), (1.5, 1.0, 2.0)))
    out = ca.Field3D(g, mem)
    ca.ApplyFluidOperator(out, field(v, g, mem), alpha, 0.0, gamma)
    got = out.numpy()
    np.testing.assert_allclose(got[..., 0], lam * mode, atol=1e-4)
    np.testing.assert_allclose(got[..., 1:], 0.0, atol=1e-4)
    # With beta, a mode along x only (ky = kz = 0) of the x component: eigenvalue lam + beta c_x.
    mode_x = np.cos(2 * np.pi * kx * X / 16)
    v[..., 0] = mode_x
    beta = 0.4
    cx = (2 - 2 * np.cos(2 * np.pi * kx / 16)) / 1.5 ** 2
    lam_x = gamma + alpha * cx + beta * cx
    ca.ApplyFluidOperator(out, field(v, g, mem), alpha, beta, gamma)
    np.testing.assert_allclose(out.numpy()[..., 0], lam_x * mode_x, atol=1e-4)
    np.testing.assert_allclose(out.numpy()[..., 1:], 0.0, atol=1e-4)


@pytest.mark.parametrize("mem", MEMS)
def test_fluid_operator_is_minus_periodic_laplacian(grid, rng, mem):
    v = rng.standard_normal(tuple(grid.size()) + (3,)).astype(np.float32)
    f, lap = ca.Field3D(grid, mem), ca.Field3D(grid, mem)
    vin = field(v, grid, mem)
    ca.ApplyFluidOperator(f, vin, 1.0, 0.0, 0.0)
    ca.Laplacian(lap, vin, ca.BC_WRAP)
    np.testing.assert_allclose(f.numpy(), -lap.numpy(), atol=2e-4)
    # gamma = 0: the inverse discards the mean
    w = ca.Field3D(grid, mem)
    ca.ApplyFluidOperator(w, f, 1.0, 0.0, 0.0, 1, True)
    np.testing.assert_allclose(w.numpy(), v - v.mean(axis=(0, 1, 2)), atol=2e-3)


@pytest.mark.parametrize("mem", MEMS)
def test_fluid_kernel_object_api_and_divergence_free(grid, rng, mem):
    for cls in (ca.FluidKernelFFT, ca.FluidKernelFFTCPU, ca.FluidKernelFFTGPU):
        k = cls()
        assert (k.getAlpha(), k.getBeta(), k.getGamma(), k.getLPow()) == (1.0, 0.0, 0.0, 1)
    v = rng.standard_normal(tuple(grid.size()) + (3,)).astype(np.float32)
    k.setAlpha(0.4)
    k.setGamma(0.5)
    k.setGrid(grid)
    out, ref = ca.Field3D(grid, mem), ca.Field3D(grid, mem)
    k.applyInverseOperator(out, field(v, grid, mem))
    ca.ApplyFluidOperator(ref, field(v, grid, mem), 0.4, 0.0, 0.5, 1, True)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6, atol=1e-7)
    # Divergence-free option: the periodic central-difference divergence of the result vanishes.
    k.setDivergenceFree(True)
    assert k.getDivergenceFree()
    k.applyInverseOperator(out, field(v, grid, mem))
    div = ca.Image3D(grid, mem)
    ca.Divergence(div, out, ca.DIFF_CENTRAL, ca.BC_WRAP)
    np.testing.assert_allclose(div.numpy(), 0.0, atol=1e-4 * np.abs(out.numpy()).max())


# applyInverseOperatorDot: K's result, and <in, out> from the spectra, against NumPy's sum of the
# products; odd and even nx (the half spectrum's last column counts once when nx is even), 2-D
# grids, beta (components coupled), grids that take the GPU's z pass and grids that do not.
@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("size", [(9, 6, 8), (8, 6, 16), (12, 10, 32), (7, 5, 9), (10, 7, 1), (6, 1, 5)])
@pytest.mark.parametrize("beta", [0.0, 0.4])
def test_fluid_kernel_dot_is_the_sum_of_products(rng, mem, size, beta):
    grid = ca.GridInfo(size, (1.5, 1.0, 0.7))
    k = ca.FluidKernelFFT()
    k.setAlpha(0.5)
    k.setBeta(beta)
    k.setGamma(0.3)
    k.setLPow(2)
    k.setGrid(grid)
    assert k.takeDot() == 0.0
    sums = []
    outs = []
    for _ in range(3):
        v = rng.standard_normal(size + (3,)).astype(np.float32)
        vin, out, ref = field(v, grid, mem), ca.Field3D(grid, mem), ca.Field3D(grid, mem)
        k.applyInverseOperatorDot(out, vin)
        k.applyInverseOperator(ref, vin)
        np.testing.assert_array_equal(out.numpy(), ref.numpy())  # the same result as without the sum
        sums.append(float(np.sum(v.astype(np.float64) * out.numpy().astype(np.float64))))
        outs.append(out)
    got = k.takeDot()  # the three calls' sums together
    np.testing.assert_allclose(got, sum(sums), rtol=2e-5)
    assert k.takeDot() == 0.0  # taken: reset
    k.applyInverseOperatorDot(outs[0], outs[0])  # in place: <in, K in> with in read first
    assert k.takeDot() > 0.0  # K is positive definite (gamma > 0)


# stageDot() moves the sum so far behind the queued work without waiting; takeDot() returns it with
# whatever was added after, once, on both backends (on the CPU stageDot does nothing).
@pytest.mark.parametrize("mem", MEMS)
def test_fluid_kernel_staged_dot_is_taken_with_the_rest(rng, mem):
    grid = ca.GridInfo((8, 6, 16))
    k = ca.FluidKernelFFT()
    k.setGamma(0.5)
    k.setGrid(grid)
    k.stageDot()  # nothing accumulated: nothing to stage
    assert k.takeDot() == 0.0
    vs = [field(rng.standard_normal((8, 6, 16, 3)).astype(np.float32), grid, mem) for _ in range(3)]
    out = ca.Field3D(grid, mem)
    single = []
    for v in vs:
        k.applyInverseOperatorDot(out, v)
        single.append(k.takeDot())
    k.applyInverseOperatorDot(out, vs[0])
    k.stageDot()
    k.applyInverseOperatorDot(out, vs[1])
    k.stageDot()
    k.applyInverseOperatorDot(out, vs[2])
    np.testing.assert_allclose(k.takeDot(), sum(single), rtol=1e-12)
    assert k.takeDot() == 0.0
    k.applyInverseOperatorDot(out, vs[1])
    k.stageDot()
    np.testing.assert_allclose(k.takeDot(), single[1], rtol=1e-12)
    assert k.takeDot() == 0.0
    if mem == ca.MEM_DEVICE:  # taken while another stream is current: it waits for the staging itself
        cupy = pytest.importorskip("cupy")
        k.applyInverseOperatorDot(out, vs[2])
        k.stageDot()
        other, before = cupy.cuda.Stream(non_blocking=True), ca.current_stream()
        ca.set_current_stream(other.ptr)
        try:
            np.testing.assert_allclose(k.takeDot(), single[2], rtol=1e-12)
        finally:
            ca.set_current_stream(before)


def test_fluid_kernel_dot_accumulates_until_taken(rng):
    grid = ca.GridInfo((8, 6, 16))
    k = ca.FluidKernelFFT()
    k.setGamma(0.5)
    k.setGrid(grid)
    v = rng.standard_normal((8, 6, 16, 3)).astype(np.float32)
    out = ca.Field3D(grid, ca.MEM_HOST)
    k.applyInverseOperatorDot(out, field(v, grid, ca.MEM_HOST))
    one = k.takeDot()
    k.applyInverseOperatorDot(out, field(v, grid, ca.MEM_HOST))
    k.applyInverseOperatorDot(out, field(v, grid, ca.MEM_HOST))
    np.testing.assert_allclose(k.takeDot(), 2 * one, rtol=1e-12)


def test_fluid_kernel_rejects_bad_input(grid):
    k = ca.FluidKernelFFT()
    v = ca.Field3D(grid, ca.MEM_HOST)
    v.fill(1.0)
    with pytest.raises(ValueError, match="setGrid"):
        k.applyOperator(ca.Field3D(grid, ca.MEM_HOST), v)
    k.setGrid(ca.GridInfo((4, 5, 6)))
    with pytest.raises(ValueError, match="size"):
        k.applyOperator(ca.Field3D(grid, ca.MEM_HOST), v)
    with pytest.raises(ValueError, match="lpow"):
        k.setLPow(-1)
    with pytest.raises(ValueError, match=r"ApplyFluidOperator.*'in'"):
        ca.ApplyFluidOperator(ca.Field3D(ca.GridInfo((4, 5, 6))), v, 1.0, 0.0, 1.0)
    np.testing.assert_array_equal(np.asarray(v), 1.0)


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
def test_mixed_memory_is_refused(grid):
    h = ca.Image3D(grid, ca.MEM_HOST)
    d = ca.Image3D(grid, ca.MEM_DEVICE)
    with pytest.raises(ca.MemoryTypeError, match="GaussianBlur"):
        ca.GaussianBlur(d, h, (1, 1, 1))
    g = ca.GaussianFilter()
    g.updateParams(grid.size(), (1, 1, 1), (2, 2, 2))
    with pytest.raises(ca.MemoryTypeError):
        g.filter(d, h)
    k = ca.FluidKernelFFT()
    k.setGrid(grid)
    with pytest.raises(ca.MemoryTypeError):
        k.applyOperator(ca.Field3D(grid, ca.MEM_DEVICE), ca.Field3D(grid, ca.MEM_HOST))


# ------------------------------------------------------------------------------- the band (setBand)
def np_band(v, band):
    """v projected onto the frequencies |k_d| <= band[d] (band[d] < 0: every one), in float64."""
    out = []
    for c in range(3):
        F = np.fft.fftn(v[..., c].astype(np.float64))
        for d, (n, b) in enumerate(zip(v.shape[:3], band)):
            if b >= 0:
                shape = [1, 1, 1]
                shape[d] = n
                k = np.arange(n)
                F = F * (np.minimum(k, n - k) <= b).reshape(shape)  # |k|: k and n - k are one frequency
        out.append(np.fft.ifftn(F).real)
    return np.stack(out, -1)


# K on a band is K after the projection onto it. On the GPU: grids whose ny and nz the y and z
# passes handle skip the frequencies outside (cuda/src/ops/fft_band.cuh; odd and even nx, 64 and 256
# points along y, which take other block shapes), with x and y in one pass each way where nx = ny
# (fft_xy.cuh: 32 points, one a lane; 64; 256, where a band unbanded along x leaves too many
# columns for shared memory and takes the passes of fft_band.cuh; 16 points take those too), a
# z-pass grid with another ny and the other grids zero them; bands on one axis, on all, only k = 0,
# and a band wider than the grid (no band).
@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("size", [(32, 16, 8), (15, 32, 16), (16, 64, 16), (8, 256, 16), (16, 16, 8), (32, 32, 8),
                                  (64, 64, 16), (256, 256, 8), (20, 24, 16), (12, 10, 9), (9, 1, 12)])
@pytest.mark.parametrize("band", [(3, 2, 1), (-1, 3, -1), (4, -1, -1), (-1, -1, 2), (0, 0, 0), (100, 100, 100)])
@pytest.mark.parametrize("beta", [0.0, 0.3])
def test_fluid_kernel_band_is_the_projection(rng, mem, size, band, beta):
    grid = ca.GridInfo(size, (1.5, 1.0, 0.7))
    v = rng.standard_normal(size + (3,)).astype(np.float32)
    k = ca.FluidKernelFFT()
    k.setAlpha(0.6)
    k.setBeta(beta)
    k.setGamma(0.2)
    k.setLPow(2)
    k.setGrid(grid)
    assert tuple(k.getBand()) == (-1, -1, -1)
    k.setBand(ca.Vec3Di(*band))
    assert tuple(k.getBand()) == band
    vin, out, lv = field(v, grid, mem), ca.Field3D(grid, mem), ca.Field3D(grid, mem)
    k.applyInverseOperatorDot(out, vin)
    ref = np_band(np_fluid(v, sp_of(grid), 0.6, beta, 0.2, 2, True), band)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=2e-5 * np.abs(ref).max())
    np.testing.assert_allclose(k.takeDot(), np.sum(v.astype(np.float64) * ref), rtol=1e-4)
    k.applyOperator(lv, vin)  # L on the band too
    ref = np_band(np_fluid(v, sp_of(grid), 0.6, beta, 0.2, 2, False), band)
    np.testing.assert_allclose(lv.numpy(), ref, rtol=1e-4, atol=2e-5 * np.abs(ref).max())
    np.testing.assert_array_equal(vin.numpy(), v)  # input untouched


# One grid's transforms are cached and shared; on the CPU a band keeps the spectrum's columns outside
# it zeroed from one call to the next (docs/design/fluid-fft.md, "On the CPU"). Bands that change,
# and calls without a band in between, still give each call's projection.
@pytest.mark.parametrize("mem", MEMS)
def test_fluid_kernel_band_changes_between_calls(rng, mem):
    size = (32, 32, 16)
    grid = ca.GridInfo(size, (1.0, 1.2, 0.8))
    v = rng.standard_normal(size + (3,)).astype(np.float32)
    k = ca.FluidKernelFFT()
    k.setAlpha(0.6)
    k.setBeta(0.0)
    k.setGamma(0.2)
    k.setLPow(2)
    k.setGrid(grid)
    vin, out = field(v, grid, mem), ca.Field3D(grid, mem)
    full = np_fluid(v, sp_of(grid), 0.6, 0.0, 0.2, 2, True)
    for band in [(3, 2, 1), (-1, -1, -1), (3, 2, 1), (5, -1, 2), (2, 4, -1), (3, 2, 1)]:
        k.setBand(ca.Vec3Di(*band))
        k.applyInverseOperator(out, vin)
        ref = np_band(full, band)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=2e-5 * np.abs(ref).max(), err_msg=str(band))


def test_fluid_kernel_band_rejects_bad_values():
    k = ca.FluidKernelFFT()
    with pytest.raises(ValueError, match=r"setBand.*'band'"):
        k.setBand(ca.Vec3Di(2, -2, 0))
    assert tuple(k.getBand()) == (-1, -1, -1)


_K_BITS = """
import hashlib, numpy as np, pyca as ca
n = (98, 116, 94)  # a 2 mm brain's grid: 2^18 voxels and more, where plans could be measured
g = ca.GridInfo(n, (2.0, 2.0, 2.0), (0.0, 0.0, 0.0))
v = np.asfortranarray(np.random.default_rng(0).standard_normal(n + (3,)).astype(np.float32))
k = ca.FluidKernelFFT(); k.setAlpha(0.5); k.setGamma(0.1); k.setLPow(2); k.setGrid(g)
f = ca.Field3D(g, ca.MEM_HOST)
k.applyInverseOperator(f, ca.Field3D.from_array(v, g))
print(hashlib.sha1(np.ascontiguousarray(f.numpy()).tobytes()).hexdigest())
"""


def test_fluid_kernel_host_bits_are_the_same_in_every_process_and_on_any_number_of_threads():
    # FFTW's measured plans are chosen by timing: with them each process gave other bits.
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.dirname(ca.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    env.pop("PYCA_FFTW_MEASURE", None)
    bits = [subprocess.run([sys.executable, "-c", _K_BITS], env=dict(env, OMP_NUM_THREADS=str(t)), capture_output=True,
                           text=True, timeout=300, check=True).stdout.strip() for t in (2, 1, 2, 16)]
    assert len(set(bits)) == 1 and len(bits[0]) == 40, bits
