"""Reductions (docs/operations/reductions.md) against NumPy in float64.

Sum, Sum2, L1, Dot accumulate in double, so they match NumPy's float64 sums of the float32 data to
~1e-12; Min, Max, MinMax, LInf are exact. Runs on host memory, and on device memory with a GPU.
"""
import numpy as np
import pytest

import pyca as ca
from pyca.testing import ArrayFactory, to_numpy
from memory_helpers import MEMS

SUM_RTOL = 1e-10


def _data(grid, seed, field=False, low=-2.0, high=3.0):
    shape = tuple(grid.size()) + ((3,) if field else ())
    return np.float32(np.random.default_rng(seed).uniform(low, high, shape))


def _vec(v):
    return np.array([v.x, v.y, v.z], dtype=np.float64)


@pytest.mark.parametrize("mem", MEMS)
def test_image_reductions(mem, grid):
    fac = ArrayFactory(mem)
    x = _data(grid, 1)
    y = _data(grid, 2)
    a, b = fac.from_array(x, grid), fac.from_array(y, grid)
    d = x.astype(np.float64)
    np.testing.assert_allclose(ca.Sum(a), d.sum(), rtol=SUM_RTOL)
    np.testing.assert_allclose(ca.Sum2(a), (d * d).sum(), rtol=SUM_RTOL)
    np.testing.assert_allclose(ca.L1(a), np.abs(d).sum(), rtol=SUM_RTOL)
    np.testing.assert_allclose(ca.Dot(a, b), (d * y.astype(np.float64)).sum(), rtol=SUM_RTOL)
    assert ca.Min(a) == x.min()
    assert ca.Max(a) == x.max()
    assert tuple(ca.MinMax(a)) == (x.min(), x.max())
    assert ca.LInf(a) == np.abs(x).max()
    assert isinstance(ca.Sum(a), float)


@pytest.mark.parametrize("mem", MEMS)
def test_field_reductions(mem, grid):
    fac = ArrayFactory(mem)
    x = _data(grid, 3, field=True)
    y = _data(grid, 4, field=True)
    a, b = fac.from_array(x, grid, field=True), fac.from_array(y, grid, field=True)
    d = x.astype(np.float64).reshape(-1, 3)
    np.testing.assert_allclose(_vec(ca.Sum(a)), d.sum(axis=0), rtol=1e-6)  # per component, as float
    np.testing.assert_allclose(ca.Sum2(a), (d * d).sum(), rtol=SUM_RTOL)
    np.testing.assert_allclose(ca.L1(a), np.abs(d).sum(), rtol=SUM_RTOL)
    np.testing.assert_allclose(ca.Dot(a, b), (d * y.astype(np.float64).reshape(-1, 3)).sum(), rtol=SUM_RTOL)
    np.testing.assert_array_equal(_vec(ca.Min(a)), x.reshape(-1, 3).min(axis=0))
    np.testing.assert_array_equal(_vec(ca.Max(a)), x.reshape(-1, 3).max(axis=0))
    assert tuple(ca.MinMax(a)) == (x.min(), x.max())
    assert ca.LInf(a) == np.abs(x).max()


@pytest.mark.parametrize("mem", MEMS)
def test_sums_accumulate_in_double(mem):
    g = ca.GridInfo(ca.Vec3Di(4097, 4096, 1))  # 2^24 + 4096 voxels: a float accumulator would stall
    fac = ArrayFactory(mem)
    a = fac.image(g, 1.0)
    assert ca.Sum(a) == float(g.size().x * g.size().y)
    a = fac.image(g, 0.1)
    n = g.size().x * g.size().y
    np.testing.assert_allclose(ca.Sum(a), n * float(np.float32(0.1)), rtol=1e-9)
    np.testing.assert_allclose(ca.Sum2(a), n * float(np.float32(0.1)) ** 2, rtol=1e-9)


@pytest.mark.parametrize("mem", MEMS)
def test_nan_propagates(mem, grid):
    x = _data(grid, 5)
    x.flat[7] = np.nan
    a = ArrayFactory(mem).from_array(x, grid)
    for f in (ca.Sum, ca.Sum2, ca.L1, ca.Min, ca.Max, ca.LInf):
        assert np.isnan(f(a)), f.__name__
    assert all(np.isnan(v) for v in ca.MinMax(a))
    assert np.isnan(ca.Dot(a, a))


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("where", [0, 1_000_003, -1], ids=["first", "middle", "last"])
def test_large_volume(mem, where):
    """A volume larger than one pass of the GPU grid (1024 blocks x 256 threads x 4 floats), whose
    size is not a multiple of 4: the strided float4 loop and the scalar tail both count, in every
    plane of a field; a NaN anywhere (first, middle, last voxel of the last plane) reaches MinMax."""
    g = ca.GridInfo(ca.Vec3Di(257, 131, 67))
    fac = ArrayFactory(mem)
    x = _data(g, 7)
    fx = _data(g, 8, field=True)
    a, f = fac.from_array(x, g), fac.from_array(fx, g, field=True)
    d = x.astype(np.float64)
    np.testing.assert_allclose(ca.Sum(a), d.sum(), rtol=SUM_RTOL)
    np.testing.assert_allclose(ca.Dot(a, a), (d * d).sum(), rtol=SUM_RTOL)
    assert tuple(ca.MinMax(a)) == (x.min(), x.max())
    fd = fx.astype(np.float64).reshape(-1, 3)
    np.testing.assert_allclose(_vec(ca.Sum(f)), fd.sum(axis=0), rtol=1e-6)  # per component, as float
    np.testing.assert_allclose(ca.Sum2(f), (fd * fd).sum(), rtol=SUM_RTOL)
    np.testing.assert_array_equal(_vec(ca.Min(f)), fx.reshape(-1, 3).min(axis=0))
    assert tuple(ca.MinMax(f)) == (fx.min(), fx.max())
    # voxel `where` in memory order (x fastest), component z: the last plane on the device
    nvox = x.size
    fx[np.unravel_index(where % nvox, x.shape, order="F") + (2,)] = np.nan
    f = fac.from_array(fx, g, field=True)
    assert all(np.isnan(v) for v in ca.MinMax(f))
    lo = ca.Min(f)
    assert np.isnan(lo.z) and not np.isnan(lo.x) and not np.isnan(lo.y)


@pytest.mark.parametrize("mem", MEMS)
def test_infinities(mem):
    g = ca.GridInfo(ca.Vec3Di(5, 1, 1))
    a = ArrayFactory(mem).from_array(np.float32([1, -np.inf, 2, 3, np.inf]).reshape(5, 1, 1), g)
    assert tuple(ca.MinMax(a)) == (-np.inf, np.inf)
    assert ca.LInf(a) == np.inf
    assert np.isnan(ca.Sum(a))


@pytest.mark.parametrize("mem", MEMS)
def test_reductions_leave_input_unchanged(mem, grid):
    x = _data(grid, 6)
    a = ArrayFactory(mem).from_array(x, grid)
    ca.Sum(a), ca.MinMax(a), ca.Dot(a, a)
    np.testing.assert_array_equal(to_numpy(a), x)


def test_errors():
    g3, g2 = ca.GridInfo(ca.Vec3Di(17, 23, 31)), ca.GridInfo(ca.Vec3Di(31, 33, 1))
    fac = ArrayFactory(ca.MEM_HOST)
    with pytest.raises(ValueError, match=r"Dot.*'b'"):
        ca.Dot(fac.image(g3), fac.image(g2))
    with pytest.raises(ValueError, match=r"Dot.*'b'"):
        ca.Dot(fac.field(g3), fac.field(g2))
    with pytest.raises(TypeError):
        ca.Sum("x")
    with pytest.raises(TypeError):
        ca.Dot(fac.image(g3), fac.field(g3))


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
def test_mixed_memory():
    g = ca.GridInfo(ca.Vec3Di(17, 23, 31))
    a = ArrayFactory(ca.MEM_HOST).random_image(g)
    b = ArrayFactory(ca.MEM_DEVICE).random_image(g)
    with pytest.raises(ca.MemoryTypeError, match=r"Dot.*'b'"):
        ca.Dot(a, b)


# Every CPU sum of the core, printed to the bit, in a process with OMP_NUM_THREADS threads.
_SUMS_PROBE = """
import numpy as np
import pyca as ca
g = ca.GridInfo((67, 61, 59), (1.0, 1.2, 0.9))
r = np.random.default_rng(5)
def im(lo=-2.0, hi=3.0):
    return ca.Image3D.from_array(np.asfortranarray(r.uniform(lo, hi, g.size()).astype(np.float32)), g)
a, b = im(), im()
out = [ca.Sum(a), ca.Sum2(a), ca.L1(a), ca.Dot(a, b)]
out.append(ca.LNCC(ca.Image3D(g), a, b, ca.Vec3Di(2, 2, 2)))
K = ca.FluidKernelFFT()
K.setAlpha(1.0); K.setGamma(0.1); K.setGrid(g)
m = ca.Field3D.from_array(np.asfortranarray(r.uniform(-1, 1, tuple(g.size()) + (3,)).astype(np.float32)), g)
v = ca.Field3D(g)
K.applyInverseOperatorDot(v, m)
K.stageDot()
out.append(K.takeDot())
out.append(ca.LDDMMHalveStep(im(), im(), im(), im()))
print(" ".join(float(x).hex() for x in out))
"""


@pytest.mark.parametrize("threads", ["1", "3"])
def test_cpu_sums_have_the_same_bits_for_any_number_of_threads(threads):
    # Against 2 threads: an OpenMP reduction clause adds the threads' partial sums in whatever order
    # they finish, which changes the last bits with the number of threads and from run to run.
    import os
    import subprocess
    import sys

    def run(n):
        env = {**os.environ, "OMP_NUM_THREADS": n, "OMP_DYNAMIC": "false"}
        return subprocess.run([sys.executable, "-c", _SUMS_PROBE], env=env, capture_output=True, text=True,
                              timeout=300, check=True).stdout.split()

    ref = run("2")
    assert len(ref) == 7
    assert run(threads) == ref
