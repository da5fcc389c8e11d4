"""PyCA's filter objects and filter functions against NumPy/SciPy: GaussianFilterCPU/GPU
(updateParams(size, sigma, kernelSize), Filter(out, in, tmp)), GaussianBlur, Convolve (PyCA's
Laplacian-stencil test), FluidKernelFFTCPU/GPU (setAlpha/setBeta/setGamma, setGrid, applyOperator,
applyInverseOperator) and ApplyFluidOperator; 2-D grids (z = 1) are filtered as 2-D images."""
import numpy as np
import pytest
from scipy import ndimage

import pyca as ca
from compat_helpers import assert_close, both_memory, field, grids, image, make_grid, npy, rand, spacing
from compat_helpers import gauss_ref as _gauss_ref


def _filter_cls(mem):
    return ca.GaussianFilterGPU if mem == ca.MEM_DEVICE else ca.GaussianFilterCPU


@grids
@both_memory(rtol=1e-5, atol=1e-5)
def test_gaussian_filter_object(gid, mem):
    g = make_grid(gid)
    rng = np.random.default_rng(61)
    A = rand(g, rng)
    sigma, krad = ca.Vec3Df(1.5, 1.0, 2.0), ca.Vec3Di(4, 3, 5)
    gf = _filter_cls(mem)()
    gf.updateParams(g.size(), sigma, krad)
    out, tmp = ca.Image3D(g, mem), ca.Image3D(g, mem)
    gf.Filter(out, image(A, g, mem), tmp)
    want = _gauss_ref(A, sigma.tolist(), krad.tolist())
    np.testing.assert_allclose(npy(out), want, rtol=1e-5, atol=1e-5)
    gf.filter(out, image(A, g, mem))
    np.testing.assert_allclose(npy(out), want, rtol=1e-5, atol=1e-5)
    F = rand(g, rng, ncomp=3)
    fo = ca.Field3D(g, mem)
    gf.Filter(fo, field(F, g, mem))
    np.testing.assert_allclose(npy(fo), np.stack([_gauss_ref(F[..., c], sigma.tolist(), krad.tolist())
                                                  for c in range(3)], -1), rtol=1e-5, atol=1e-5)
    # the kernel is normalised: constants stay constant
    gf.Filter(out, image(np.full(A.shape, 2.0), g, mem), tmp)
    assert_close(out, np.full(A.shape, 2.0), atol=1e-5)
    return out, fo


@grids
@both_memory(rtol=1e-5, atol=1e-5)
def test_gaussian_blur_world_units(gid, mem):
    g = make_grid(gid)
    A = rand(g, np.random.default_rng(62))
    sigma = np.array([2.0, 1.5, 3.0])  # world units
    out = ca.Image3D(g, mem)
    ca.GaussianBlur(out, image(A, g, mem), ca.Vec3Df(*sigma))
    svox = sigma / spacing(g)
    want = ndimage.gaussian_filter(A, [s if n > 1 else 0 for s, n in zip(svox, A.shape)], mode="nearest",
                                   truncate=4.0)
    np.testing.assert_allclose(npy(out), want, rtol=1e-5, atol=1e-5)
    return out


@grids
@both_memory(rtol=1e-5, atol=1e-5)
def test_convolve(gid, mem):
    # PyCA's test_Convolve: a Laplacian stencil made with Image3D(mem).fromlist
    g = make_grid(gid)
    A = rand(g, np.random.default_rng(63))
    k = np.zeros([3, 3])
    k[1, :] = 1.0
    k[:, 1] = 1.0
    k[1, 1] = -4.0
    k = np.atleast_3d(k)
    if g.size().z > 1:  # a kernel symmetric about its centre (convolution = correlation)
        r = np.random.default_rng(64).uniform(-1, 1, (3, 5, 3))
        k = r + r[::-1, ::-1, ::-1]
    K = ca.Image3D(mem)
    K.fromlist(k.tolist())
    out = ca.Image3D(g, mem)
    ca.Convolve(out, image(A, g, mem), K)
    want = ndimage.convolve(A, k.astype(np.float32).astype(np.float64), mode="nearest")
    np.testing.assert_allclose(npy(out), want, rtol=1e-5, atol=1e-5)
    return out


@grids
@both_memory(rtol=1e-5, atol=1e-5)
def test_convolve_pyca_orientation(gid, mem):
    # PyCA's NumpyTestCase.test_Convolve: the kernel [0, 0, 1] along x shifts everything one voxel
    # to the left: out[x] = im[x + 1] (the last one clamped)
    g = make_grid(gid)
    A = rand(g, np.random.default_rng(66))
    K = ca.Image3D(mem)
    K.fromlist(np.array([[[0.0]], [[0.0]], [[1.0]]]).tolist())
    out = ca.Image3D(g, mem)
    ca.Convolve(out, image(A, g, mem), K)
    want = A.copy()
    want[:-1] = A[1:]
    np.testing.assert_allclose(npy(out), want, rtol=1e-6, atol=1e-6)
    k = np.random.default_rng(67).uniform(-1, 1, (3, 5, 3 if g.size().z > 1 else 1)).astype(np.float32)
    K.fromlist(k.tolist())
    ca.Convolve(out, image(A, g, mem), K)
    np.testing.assert_allclose(npy(out), ndimage.correlate(A, k.astype(np.float64), mode="nearest"), rtol=1e-5,
                               atol=1e-5)
    return out


# ------------------------------------------------------------------------------------------------
# FluidKernelFFT: L = -alpha Laplacian - beta grad(div) + gamma, periodic finite differences
def _d2(f, axis, h):
    if f.shape[axis] == 1:
        return np.zeros_like(f)
    return (np.roll(f, -1, axis) - 2 * f + np.roll(f, 1, axis)) / h ** 2


def _d1(f, axis, h):
    if f.shape[axis] == 1:
        return np.zeros_like(f)
    return (np.roll(f, -1, axis) - np.roll(f, 1, axis)) / (2 * h)


def _fluid_L(V, sp, alpha, beta, gamma):
    out = np.empty_like(V)
    for i in range(3):
        lap = sum(_d2(V[..., i], d, sp[d]) for d in range(3))
        graddiv = _d2(V[..., i], i, sp[i]) + sum(_d1(_d1(V[..., j], j, sp[j]), i, sp[i]) for j in range(3) if j != i)
        out[..., i] = -alpha * lap - beta * graddiv + gamma * V[..., i]
    return out


def _kernel(mem, grid, alpha, beta, gamma):
    k = (ca.FluidKernelFFTGPU if mem == ca.MEM_DEVICE else ca.FluidKernelFFTCPU)()
    k.setAlpha(alpha)
    k.setBeta(beta)
    k.setGamma(gamma)
    k.setGrid(grid)
    return k


@grids
@pytest.mark.parametrize("params", [(1.0, 0.0, 0.0), (1.0, 1.0, 0.0), (0.5, 0.3, 0.2)],
                         ids=["lap", "lap+graddiv", "all"])
@both_memory(rtol=1e-4, atol=1e-4)
def test_fluid_kernel(params, gid, mem):
    alpha, beta, gamma = params
    g = make_grid(gid)
    rng = np.random.default_rng(65)
    V = rand(g, rng, ncomp=3)
    if g.size().z == 1:
        V[..., 2] = 0.0
    sp = spacing(g)
    k = _kernel(mem, g, alpha, beta, gamma)
    Lv = ca.Field3D(g, mem)
    k.applyOperator(Lv, field(V, g, mem))
    want = _fluid_L(V, sp, alpha, beta, gamma)
    np.testing.assert_allclose(npy(Lv), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    # K = L^-1: L K v = v (minus the mean, which K discards when gamma = 0)
    Kv, LKv = ca.Field3D(g, mem), ca.Field3D(g, mem)
    k.applyInverseOperator(Kv, field(V, g, mem))
    k.applyOperator(LKv, Kv)
    expect = V - V.mean(axis=(0, 1, 2)) if gamma == 0 else V
    np.testing.assert_allclose(npy(LKv), expect, rtol=1e-4, atol=1e-4)
    # the function form
    f = ca.Field3D(g, mem)
    ca.ApplyFluidOperator(f, field(V, g, mem), alpha, beta, gamma)
    np.testing.assert_allclose(npy(f), npy(Lv), rtol=1e-4, atol=1e-4)
    ca.ApplyFluidOperator(f, field(V, g, mem), alpha, beta, gamma, 1, True)
    np.testing.assert_allclose(npy(f), npy(Kv), rtol=1e-4, atol=1e-4)
    return Lv, Kv


@both_memory(rtol=1e-4, atol=1e-4)
def test_fluid_kernel_pyca_diffop_test(mem):
    # PyCA's test_DiffOp: the inverse operator of a gradient, then the operator, gives the gradient back
    g = make_grid("2d")
    x, y = np.meshgrid(np.arange(31), np.arange(33), indexing="ij")
    I0 = ndimage.gaussian_filter((((x - 15) / 7.0) ** 2 + ((y - 16) / 11.0) ** 2 <= 1).astype(float), 1.5)
    grad = ca.Field3D(g, mem)
    ca.Gradient(grad, image(I0[:, :, None], g, mem))
    k = _kernel(mem, g, 1.0, 1.0, 0.0)
    kg, lkg = ca.Field3D(g, mem), ca.Field3D(g, mem)
    k.applyInverseOperator(kg, grad)
    k.applyOperator(lkg, kg)
    G = npy(grad)
    np.testing.assert_allclose(npy(lkg), G - G.mean(axis=(0, 1, 2)), atol=1e-5)
    return lkg
