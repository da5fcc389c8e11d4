"""ManagedImage3D / ManagedField3D / ThreadMemoryManager (port of PyCA's MemMgrUnitTest)."""
import gc
import threading

import numpy as np
import pytest

import pyca as ca
from pyca.common import ManagedField3D, ManagedImage3D, MemoryManager, ThreadMemoryManager
from compat_helpers import assert_close, both_memory, make_grid, npy

needs_gpu = pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
MEM_PARAMS = [pytest.param(ca.MEM_HOST, id="host"), pytest.param(ca.MEM_DEVICE, id="device", marks=needs_gpu)]


@pytest.fixture(autouse=True)
def no_manager():
    ThreadMemoryManager.destroy()
    yield
    ThreadMemoryManager.destroy()


def grid2d():
    return ca.GridInfo(ca.Vec3Di(128, 120, 1), ca.Vec3Df(1.5, 2.1, 1.0))


@pytest.mark.parametrize("mem", MEM_PARAMS)
def test_unmanaged_without_manager(mem):
    # PyCA's MemManAlloc: plain objects when no manager is set up
    g = grid2d()
    assert not ThreadMemoryManager.isInitialized()
    I = ManagedImage3D(g, mem)
    J = ManagedImage3D(g, mem)
    ca.SetMem(J, 1.5)
    ca.MulC(I, J, 2.0)
    assert isinstance(I, ca.Image3D) and I.memType() == mem and I.grid() == g
    assert not I.isManaged()
    assert ca.Max(I) == 3.0 and ca.Min(I) == 3.0
    F = ManagedField3D(g, mem)
    assert isinstance(F, ca.Field3D) and not F.isManaged()
    assert not ThreadMemoryManager.isInitialized()


def test_release_on_delete():
    # PyCA's MemManDeAlloc: deleting a managed image gives its pool back
    g = grid2d()
    ThreadMemoryManager.init(g, ca.MEM_HOST, 0)
    tmm = ThreadMemoryManager.instance()
    I = ManagedImage3D(g, ca.MEM_HOST)
    n_after_first = tmm.getNumPools()
    del I
    gc.collect()
    J = ManagedImage3D(g, ca.MEM_HOST)
    assert tmm.getNumPools() == n_after_first
    assert J.isManaged()


@pytest.mark.parametrize("mem", MEM_PARAMS)
def test_thread_memory_manager_pool_counts(mem):
    # PyCA's test_ThreadMemMan
    g = ca.GridInfo(ca.Vec3Di(16, 12, 1), ca.Vec3Df(1.5, 2.1, 1.0))
    ThreadMemoryManager.init(g, mem, 0)
    assert ThreadMemoryManager.isInitialized()
    tmm = ThreadMemoryManager.instance()
    assert tmm.memType() == mem
    n_images, n_fields = 10, 10
    for _ in range(4):
        ims = [ManagedImage3D(g, mem) for _ in range(n_images)]
        fields = [ManagedField3D(g, mem) for _ in range(n_fields)]
        assert tmm.getNumPools() == n_fields * 3 + n_images
        assert all(im.isManaged() for im in ims) and all(f.isManaged() for f in fields)
        del ims, fields
        gc.collect()
    assert tmm.getNumLockedPools() == 0


def test_preallocated_pools_and_reuse():
    g = make_grid("3d")
    ThreadMemoryManager.init(g, ca.MEM_HOST, 4)
    tmm = ThreadMemoryManager.instance()
    assert tmm.getNumPools() == 4
    a = ManagedImage3D(g, ca.MEM_HOST)
    b = ManagedImage3D(g, ca.MEM_HOST)
    assert tmm.getNumPools() == 4 and tmm.getNumLockedPools() == 2
    ca.SetMem(a, 1.0)
    ca.SetMem(b, 2.0)  # distinct memory
    assert ca.Max(a) == 1.0
    del a, b
    gc.collect()
    assert tmm.getNumLockedPools() == 0


def test_other_memtype_or_smaller_grid():
    g = make_grid("3d")
    ThreadMemoryManager.init(g, ca.MEM_DEVICE, 0)  # (allocates nothing yet)
    other = ManagedImage3D(g, ca.MEM_HOST)  # not the manager's type: its own memory
    assert not other.isManaged() and other.memType() == ca.MEM_HOST
    assert ThreadMemoryManager.instance().getNumPools() == 0
    ThreadMemoryManager.init(g, ca.MEM_HOST, 0)
    small_grid = ca.GridInfo(ca.Vec3Di(5, 4, 3), ca.Vec3Df(2, 2, 2), ca.Vec3Df(1, 1, 1))
    s = ManagedImage3D(small_grid, ca.MEM_HOST)
    assert s.isManaged() and s.grid() == small_grid and s.asnp().shape == (5, 4, 3)
    sf = ManagedField3D(small_grid, ca.MEM_HOST)
    assert sf.grid() == small_grid and len(sf.asnp()) == 3
    big = ca.GridInfo(ca.Vec3Di(100, 100, 100))
    with pytest.raises(ValueError, match="ManagedImage3D"):
        ManagedImage3D(big, ca.MEM_HOST)
    with pytest.raises(ValueError, match="ManagedField3D"):
        ManagedField3D(big, ca.MEM_HOST)


def test_explicit_memory_manager():
    g = make_grid("2d")
    mm = MemoryManager(g, ca.MEM_HOST, 1)
    im = ManagedImage3D(g, ca.MEM_HOST, mm)
    assert im.isManaged() and mm.getNumLockedPools() == 1
    with pytest.raises(ValueError):
        ManagedImage3D(g, ca.MEM_HOST_PINNED, mm)
    assert not ThreadMemoryManager.isInitialized()


def test_manager_is_per_thread():
    ThreadMemoryManager.init(make_grid("2d"), ca.MEM_HOST, 0)
    seen = []
    t = threading.Thread(target=lambda: seen.append(ThreadMemoryManager.isInitialized()))
    t.start()
    t.join()
    assert seen == [False] and ThreadMemoryManager.isInitialized()
    with pytest.raises(RuntimeError):
        ThreadMemoryManager.destroy()
        ThreadMemoryManager.instance()


@both_memory()
def test_managed_objects_work_with_ops_and_operators(mem):
    g = make_grid("2d")
    ThreadMemoryManager.init(g, mem, 2)
    rng = np.random.default_rng(0)
    arr = rng.standard_normal(tuple(g.size()))
    a = ManagedImage3D(g, mem)
    b = ManagedImage3D(g, mem)
    tmp = ca.Image3D(g, ca.MEM_HOST)
    tmp.asnp()[...] = arr
    ca.Copy(a, tmp.to(mem))
    ca.MulC(b, a, 3.0)
    c = a + b  # a plain Image3D
    assert type(c) is ca.Image3D and c.memType() == mem
    assert_close(c, 4.0 * arr.astype(np.float32), rtol=1e-6, atol=1e-6)
    f = ManagedField3D(g, mem)
    ca.Gradient(f, a)
    f *= b
    return npy(c), f
