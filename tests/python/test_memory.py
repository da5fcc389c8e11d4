"""Memory types, zero-copy buffers (PEP 3118, DLPack, CUDA array interface), lifetimes and copies."""
import ctypes
import gc

import numpy as np
import pytest

import pyca as ca

needs_gpu = pytest.mark.skipif(not ca.cuda_available(), reason=f"needs a CUDA GPU ({ca.device_info()})")

GPU_MEMS = [ca.MEM_HOST_PINNED, ca.MEM_DEVICE]


def _fill_ramp(a):
    v = np.asarray(a)
    v[...] = np.arange(v.size, dtype=np.float32).reshape(v.shape, order="F")
    return v.copy(order="F")


# ---------------------------------------------------------------- host buffers
@pytest.mark.parametrize("cls", [ca.Image3D, ca.Field3D])
def test_numpy_view_shares_memory_both_ways(cls):
    a = cls(ca.GridInfo((5, 6, 7)), ca.MEM_HOST)
    v = np.asarray(a)
    assert v.dtype == np.float32 and v.flags.f_contiguous and v.base is not None
    assert v.shape == a.shape
    v[1, 2, 3] = 42.0  # a write through the view is seen by the object (and its clones)
    assert np.asarray(a)[1, 2, 3].ravel()[0] == 42.0 and a.clone().numpy()[1, 2, 3].ravel()[0] == 42.0
    assert np.shares_memory(v, np.asarray(a))


@pytest.mark.parametrize("cls", [ca.Image3D, ca.Field3D])
def test_numpy_is_an_independent_copy(cls):
    a = cls(ca.GridInfo((5, 6, 7)), ca.MEM_HOST)
    ref = _fill_ramp(a)
    c = a.numpy()
    assert c.flags.f_contiguous and c.shape == a.shape and np.array_equal(c, ref)
    assert not np.shares_memory(c, np.asarray(a))
    c[...] = -1.0
    assert np.array_equal(np.asarray(a), ref)


def test_layout_is_x_fastest():
    im = ca.Image3D(ca.GridInfo((4, 3, 2)))
    m = memoryview(im)
    assert m.format == "f" and m.shape == (4, 3, 2) and m.strides == (4, 16, 48) and not m.readonly
    f = ca.Field3D(ca.GridInfo((4, 3, 2)))
    mf = memoryview(f)
    assert mf.shape == (4, 3, 2, 3) and mf.strides == (4, 16, 48, 96)  # three planes, x plane first
    f.fill(0.0)  # new objects are not initialised (like PyCA and np.empty)
    vx, vy, vz = f.asnp()
    vy[...] = 1.0
    raw = np.frombuffer(ctypes.string_at(f.rawptr(), 72 * 4), dtype=np.float32)  # memory order
    assert raw[:24].sum() == 0 and raw[24:48].sum() == 24 and raw[48:].sum() == 0


def test_view_keeps_memory_alive_after_delete():
    im = ca.Image3D(ca.GridInfo((8, 8, 8)))
    ref = _fill_ramp(im)
    v = np.asarray(im)
    m = memoryview(im)
    del im
    gc.collect()
    assert np.array_equal(v, ref) and np.array_equal(np.asarray(m), ref)


def test_view_survives_totype_but_detaches():
    im = ca.Image3D(ca.GridInfo((4, 4, 4)))
    ref = _fill_ramp(im)
    v = np.asarray(im)
    im.toType(ca.MEM_HOST)  # same type: a no-op, still shared
    v[0, 0, 0] = -1
    assert np.asarray(im)[0, 0, 0] == -1
    assert np.array_equal(v.ravel()[1:], ref.ravel()[1:])


def test_buffer_is_fortran_contiguous_not_c_contiguous():
    # What a Cython typed memoryview float[::1, :, :] asks for: a strided, formatted, writable buffer.
    im = ca.Image3D(ca.GridInfo((3, 4, 5)))
    m = memoryview(im)
    assert m.f_contiguous and not m.c_contiguous and not m.readonly
    assert np.asarray(m).flags.f_contiguous


def test_dlpack_host_roundtrip():
    im = ca.Image3D(ca.GridInfo((3, 4, 5)))
    ref = _fill_ramp(im)
    assert im.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(im)
    assert np.array_equal(a, ref) and np.shares_memory(a, np.asarray(im))
    del im
    gc.collect()
    assert np.array_equal(a, ref)  # the capsule keeps the memory


# ---------------------------------------------------------------- from_array
def test_from_array_shares_fortran_float32():
    x = np.asfortranarray(np.random.default_rng(0).random((5, 6, 7), dtype=np.float32))
    im = ca.Image3D.from_array(x)
    x[1, 1, 1] = 99
    assert np.asarray(im)[1, 1, 1] == 99 and im.size() == (5, 6, 7)
    del x
    gc.collect()
    assert np.asarray(im)[1, 1, 1] == 99  # the image keeps the NumPy array alive


@pytest.mark.parametrize("cls,shape", [(ca.Image3D, (5, 6, 7)), (ca.Field3D, (5, 6, 7, 3))])
def test_from_array_releases_its_source_when_deleted(cls, shape):
    """The wrapper owns the C++ object: deleting it lets go of the NumPy array it shares (a leak
    before: every from_array kept its source alive for the rest of the process)."""
    import sys

    x = np.asfortranarray(np.ones(shape, np.float32))
    before = sys.getrefcount(x)
    w = cls.from_array(x)
    assert w.thisown and np.shares_memory(np.asarray(w), x)
    assert sys.getrefcount(x) == before + 1  # the wrapper holds the array...
    del w
    gc.collect()
    assert sys.getrefcount(x) == before  # ...and lets go of it with the wrapper

def test_from_array_copies_other_layouts_and_dtypes():
    x = np.random.default_rng(1).random((5, 6, 7))  # float64, C order: copied
    im = ca.Image3D.from_array(x)
    assert np.allclose(np.asarray(im), x) and not np.shares_memory(np.asarray(im), x)
    f = ca.Field3D.from_array(np.ones((4, 5, 6, 3), dtype=np.float32))
    assert f.size() == (4, 5, 6) and np.all(np.asarray(f) == 1)
    two_d = ca.Image3D.from_array(np.zeros((31, 33), np.float32))
    assert two_d.size() == (31, 33, 1) and two_d.grid().is2D()


def test_from_array_with_grid():
    g = ca.GridInfo((4, 5, 6), (1.5, 2.0, 1.0), (1, 2, 3))
    im = ca.Image3D.from_array(np.zeros((4, 5, 6), np.float32, order="F"), grid=g)
    assert im.grid() == g
    with pytest.raises(ValueError, match="does not match"):
        ca.Image3D.from_array(np.zeros((4, 5, 7), np.float32), grid=g)


@pytest.mark.parametrize(
    "cls, arr, exc, match",
    [
        (ca.Image3D, np.zeros((4, 5, 6, 7), np.float32), ValueError, "expected shape"),
        (ca.Field3D, np.zeros((4, 5, 6, 2), np.float32), ValueError, "expected shape"),
        (ca.Image3D, np.array(["a", "b"]), TypeError, "numeric"),
        (ca.Image3D, np.zeros((4, 5, 6), np.complex64), TypeError, "numeric"),
    ],
)
def test_from_array_errors(cls, arr, exc, match):
    with pytest.raises(exc, match=match):
        cls.from_array(arr)


# ---------------------------------------------------------------- no GPU
@pytest.mark.skipif(ca.cuda_available(), reason="checks the behaviour without a GPU")
def test_without_gpu_device_memory_says_why():
    assert "device" in ca.device_info().lower() or "cuda" in ca.device_info().lower()
    for mem in GPU_MEMS:
        with pytest.raises(ca.CudaError, match="MEM_"):
            ca.Image3D(ca.GridInfo((2, 2, 2)), mem)
    im = ca.Image3D(ca.GridInfo((2, 2, 2)))
    with pytest.raises(ca.CudaError):
        im.toType(ca.MEM_DEVICE)
    assert im.memType() == ca.MEM_HOST  # unchanged after the failed move
    assert ca.best_memory_type() == ca.MEM_HOST


def test_host_object_has_no_cuda_array_interface():
    im = ca.Image3D(ca.GridInfo((2, 2, 2)))
    assert not hasattr(im, "__cuda_array_interface__")


# ---------------------------------------------------------------- with a GPU
@needs_gpu
@pytest.mark.parametrize("cls", [ca.Image3D, ca.Field3D])
@pytest.mark.parametrize("path", [[ca.MEM_HOST_PINNED, ca.MEM_DEVICE, ca.MEM_HOST],
                                  [ca.MEM_DEVICE, ca.MEM_HOST_PINNED, ca.MEM_DEVICE, ca.MEM_HOST]])
def test_roundtrip_between_memory_types(cls, path):
    a = cls(ca.GridInfo((17, 23, 31)), ca.MEM_HOST)
    ref = _fill_ramp(a)
    for mem in path:
        b = a.to(mem)
        assert b.memType() == mem
        a.toType(mem)
        assert a.memType() == mem
        assert np.array_equal(b.numpy(), ref) and np.array_equal(a.numpy(), ref)


# The current device's primary context before any work, after synchronize(), and after a device
# allocation and synchronize(), as the driver reports it (cuDevicePrimaryCtxGetState).
_CONTEXT_PROBE = """
import ctypes
import pyca as ca
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
def active():
    dev, flags, on = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
    assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cu.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(on)) == 0
    return on.value
seen = [active()]
ca.synchronize()
seen.append(active())
im = ca.Image3D(ca.GridInfo((8, 8, 8)), ca.MEM_DEVICE)
ca.synchronize()
seen.append(active())
print(*seen)
"""


@needs_gpu
def test_synchronize_starts_no_cuda_context_before_any_device_work():
    # A CPU-only program that calls synchronize() must not pay a context's device memory; once pyca has
    # put work on the device, synchronize() waits for it (the context exists).
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _CONTEXT_PROBE], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["0", "0", "1"], run.stdout


@needs_gpu
def test_pinned_memory_is_a_host_buffer():
    im = ca.Image3D(ca.GridInfo((4, 4, 4)), ca.MEM_HOST_PINNED)
    ref = _fill_ramp(im)
    assert np.array_equal(np.asarray(im), ref)
    assert im.__dlpack_device__() == (3, 0)


@needs_gpu
def test_device_buffer_export_raises_with_advice():
    im = ca.Image3D(ca.GridInfo((4, 4, 4)), ca.MEM_DEVICE)
    with pytest.raises(BufferError, match="MEM_HOST"):
        memoryview(im)
    with pytest.raises(TypeError, match="to\\(pyca.MEM_HOST\\)"):
        np.asarray(im)
    with pytest.raises(TypeError, match="device memory"):
        im.asnp()
    cai = im.__cuda_array_interface__
    assert cai["version"] == 3 and cai["typestr"] == "<f4" and cai["shape"] == (4, 4, 4)
    assert cai["strides"] == (4, 16, 64) and cai["data"][0] == im.rawptr()


@needs_gpu
def test_cupy_shares_device_memory():
    cp = pytest.importorskip("cupy")
    im = ca.Image3D(ca.GridInfo((17, 23, 31)), ca.MEM_DEVICE)
    c = cp.asarray(im)
    c[...] = 3.0
    assert np.all(im.numpy() == 3.0)
    x = cp.asfortranarray(cp.random.random((5, 6, 7, 3), dtype=cp.float32))
    f = ca.Field3D.from_array(x)
    assert f.memType() == ca.MEM_DEVICE and f.rawptr() == x.data.ptr
    assert np.array_equal(f.numpy(), cp.asnumpy(x))


@needs_gpu
def test_torch_dlpack_shares_device_memory():
    torch = pytest.importorskip("torch")
    im = ca.Image3D(ca.GridInfo((17, 23, 31)), ca.MEM_DEVICE)
    t = torch.from_dlpack(im)
    assert t.is_cuda and t.shape == (17, 23, 31) and t.stride() == (1, 17, 17 * 23)
    t.fill_(5.0)
    torch.cuda.synchronize()
    assert np.all(im.numpy() == 5.0)
    del im
    gc.collect()
    assert float(t.sum()) == 5.0 * 17 * 23 * 31  # the capsule keeps the memory
    # and back: a Fortran-ordered CUDA tensor wraps without a copy
    src = torch.rand(31, 23, 17, device="cuda").permute(2, 1, 0)  # x fastest
    w = ca.Image3D.from_array(src)
    assert w.memType() == ca.MEM_DEVICE and w.rawptr() == src.data_ptr()
    assert np.allclose(w.numpy(), src.cpu().numpy())


@needs_gpu
def test_device_out_of_memory_is_memoryerror():
    with pytest.raises(MemoryError):
        ca.Image3D(ca.GridInfo((4096, 4096, 4096)), ca.MEM_DEVICE)  # 256 GiB
    ca.Image3D(ca.GridInfo((8, 8, 8)), ca.MEM_DEVICE)  # and the device still works
