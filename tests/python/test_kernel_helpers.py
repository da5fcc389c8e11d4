"""@ca.func helpers that read the kernel's arrays and return several numbers (pyca.kernels): against the
same Python functions run voxel by voxel over NumPy arrays, on the CPU and (where there is one) the GPU;
their refusals; their CUDA half compiled by NVRTC (no GPU needed). pyca's band-limited geodesic samples
through such a helper (pyca/registration/_band_kernels.py)."""
from __future__ import annotations

import numpy as np
import pytest

import pyca as ca
from pyca.kernels import KernelSyntaxError
from pyca.testing import gpu_available, nvrtc_available

pytestmark = pytest.mark.usefixtures("kernel_cache")  # one kernel cache per module (conftest.py)

G = ca.GridInfo((9, 8, 7))


@ca.func
def _grad(im: ca.Image3D, i: int, j: int, k: int):
    """The central differences of im at (i, j, k) (reads clamped), three numbers."""
    return 0.5 * (im[i + 1, j, k] - im[i - 1, j, k]), 0.5 * (im[i, j + 1, k] - im[i, j - 1, k]), \
        0.5 * (im[i, j, k + 1] - im[i, j, k - 1])


@ca.func
def _at(f: ca.Field3D, px: float, py: float, pz: float, c: int) -> float:
    """Component c of f at the voxel nearest p, by a helper that calls a helper with the array."""
    nx, ny, nz = f.shape
    return f[min(max(int(round(px)), 0), nx - 1), min(max(int(round(py)), 0), ny - 1), int(round(pz)), c] \
        + 0.0 * _grad_x(f, c)


@ca.func
def _grad_x(f: ca.Field3D, c: int) -> float:
    return f[0, 0, 0, c]


@ca.func
def _two(a: float, b: float):
    if a > b:
        return a, b
    return b, a


@ca.kernel(register=False)
def helpers(out: ca.Field3D, im: ca.Image3D, f: ca.Field3D, s: float):
    i, j, k = ca.index()
    gx, gy, gz = _grad(im, i, j, k)
    hi, lo = _two(gx, gy)
    out[i, j, k, 0] = hi - lo + s * gz
    out[i, j, k, 1] = _at(f, i + gx * 3.0, j - gy * 3.0, k, 1)
    out[i, j, k, 2] = _at(f, i + 0.4, j, k, 2)


def _clamped(a):
    def get(*idx):
        ijk = tuple(min(max(int(v), 0), n - 1) for v, n in zip(idx[:3], a.shape))
        return float(a[ijk + tuple(idx[3:])])
    return get


def _reference(im, f, s):
    I, F = _clamped(im), _clamped(f)
    out = np.zeros(im.shape + (3,))
    for i, j, k in np.ndindex(im.shape):
        gx = 0.5 * (I(i + 1, j, k) - I(i - 1, j, k))
        gy = 0.5 * (I(i, j + 1, k) - I(i, j - 1, k))
        gz = 0.5 * (I(i, j, k + 1) - I(i, j, k - 1))
        hi, lo = max(gx, gy), min(gx, gy)
        out[i, j, k, 0] = hi - lo + s * gz
        out[i, j, k, 1] = F(round(i + gx * 3.0), round(j - gy * 3.0), k, 1)
        out[i, j, k, 2] = F(round(i + 0.4), j, k, 2)
    return out


def test_helpers_read_arrays_and_return_tuples():
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (9, 8, 7)).astype(np.float32)
    f = rng.uniform(-1, 1, (9, 8, 7, 3)).astype(np.float32)
    ref = _reference(a, f, 0.7)
    mems = [ca.MEM_HOST] + ([ca.MEM_DEVICE] if gpu_available() else [])
    for mem in mems:
        out = ca.Field3D(G, mem)
        helpers(out, ca.Image3D.from_array(np.asfortranarray(a), G).clone(mem),
                ca.Field3D.from_array(np.asfortranarray(f), G).clone(mem), 0.7)
        np.testing.assert_allclose(out.clone(ca.MEM_HOST).numpy(), ref, rtol=1e-5, atol=1e-6, err_msg=str(mem))


@ca.func
def _writes(f: ca.Field3D, i: int) -> float:
    f[i, 0, 0, 0] = 1.0
    return 0.0


def _k_helper_writes(out: ca.Field3D):
    i, j, k = ca.index()
    out[i, j, k, 0] = _writes(out, i)


def _k_unpack_count(out: ca.Image3D):
    i, j, k = ca.index()
    a, b, c = _two(1.0, 2.0)
    out[i, j, k] = a + b + c


@ca.func
def _mixed(a: float):
    if a > 0:
        return a, a
    return a


def _k_mixed(out: ca.Image3D):
    i, j, k = ca.index()
    x, y = _mixed(1.0)
    out[i, j, k] = x + y


def _k_tuple_value(out: ca.Image3D):
    i, j, k = ca.index()
    out[i, j, k] = _two(1.0, 2.0) + 1.0


@ca.func
def _number(x: float) -> float:
    return x * 2.0


def _k_array_for_number(out: ca.Image3D, im: ca.Image3D):
    i, j, k = ca.index()
    out[i, j, k] = _number(im)


@pytest.mark.parametrize("fn, construct", [
    (_k_helper_writes, "storing into the array 'f' in a helper"), (_k_unpack_count, "unpacking into 3 names"),
    (_k_array_for_number, "the float parameter 'x' given the Image3D"),
    (_k_mixed, "a helper returning tuples of different lengths, or a tuple and a number"),
    (_k_tuple_value, "arithmetic on something other than numbers"),
])
def test_helper_misuse_is_refused_in_one_line(fn, construct):
    k = ca.kernel(fn, register=False)
    with pytest.raises(KernelSyntaxError) as e:
        k.source  # noqa: B018 - translates
    msg = str(e.value)
    assert "\n" not in msg and construct in msg, msg


@pytest.mark.skipif(not nvrtc_available(), reason="pyca built without NVRTC")
def test_the_cuda_half_compiles_with_nvrtc():
    """Helpers with arrays are templates on the kernel's index type; their tuples a struct: NVRTC
    compiles both (no GPU needed), as it does the band-limited geodesic's kernels."""
    from pyca.registration import _band_kernels as bk

    for k in (helpers, bk.coad, bk.step, bk.upsample):
        k.compile(cpu=False, gpu=True)
