"""PyCA's pooled temporaries: ManagedImage3D, ManagedField3D, MemoryManager and ThreadMemoryManager.

A ManagedImage3D / ManagedField3D is an ordinary Image3D / Field3D (every operation, operator and
method accepts it). When this thread's ThreadMemoryManager has been initialised with
``ThreadMemoryManager.init(grid, mType, nPools)`` and the object's memory type matches the manager's,
its memory is drawn from the manager's pool of preallocated volumes of the manager's grid size and is
given back to the pool when the object is deleted; otherwise (no manager, or another memory type)
it allocates its own memory exactly like ``Image3D(grid, mType)``. A grid with more voxels than the
manager's grid is a ValueError (PyCA's "Grid too large"); smaller grids use part of a pool volume.

Pool counting follows PyCA: a pooled image uses one image-sized pool, a pooled field three
(``getNumPools()`` counts image-sized pools; a field's three share one allocation, since a pyca
Field3D keeps its three components in one block).

As in PyCA, a pooled object's memory is reused by the next managed object once the first is deleted:
do not keep NumPy views (asnp()) of a managed object after deleting it.

Differences from PyCA: pure Python (the pool holds pyca objects); ThreadMemoryManager is per Python
thread (threading.local), as PyCA's was per OS thread.
"""
from __future__ import annotations

import threading

from . import core

__all__ = ["MemoryManager", "ThreadMemoryManager", "ManagedImage3D", "ManagedField3D"]


class MemoryManager:
    """A pool of preallocated volumes of one grid size in one memory type.

    MemoryManager(grid, mType, nPools=0) preallocates `nPools` image-sized pools; more are
    allocated on demand and kept for reuse."""

    def __init__(self, grid, mType=core.MEM_HOST, nPools=0):
        if not isinstance(grid, core.GridInfo):
            raise TypeError(f"MemoryManager: grid must be a pyca.GridInfo, not {type(grid).__name__}")
        if int(nPools) < 0:
            raise ValueError(f"MemoryManager: nPools must be >= 0, got {nPools}")
        self._grid = core.GridInfo(grid.size(), grid.spacing(), grid.origin(), grid.direction())
        self._mem = mType
        self._images = []  # [Image3D of the pool grid]
        self._image_locked = []
        self._fields = []  # [Field3D of the pool grid]: each counts as 3 pools
        self._field_locked = []
        self._max_used = 0
        for _ in range(int(nPools)):
            self._add_image()

    # PyCA's accessors
    def memType(self):
        return self._mem

    def grid(self):
        return core.GridInfo(self._grid.size(), self._grid.spacing(), self._grid.origin(),
                             self._grid.direction())

    def getNumPools(self) -> int:
        """Image-sized pools allocated so far (a field pool counts 3)."""
        return len(self._images) + 3 * len(self._fields)

    def getNumLockedPools(self) -> int:
        """Image-sized pools in use now (a field counts 3)."""
        return sum(self._image_locked) + 3 * sum(self._field_locked)

    def getMaxUsed(self) -> int:
        """Most image-sized pools in use at once so far."""
        return self._max_used

    # Pool management (used by ManagedImage3D / ManagedField3D)
    def _add_image(self):
        self._images.append(core.Image3D(self._grid, self._mem))
        self._image_locked.append(False)

    def _check(self, grid, what):
        if grid.nVox() > self._grid.nVox():
            raise ValueError(
                f"{what}: grid {tuple(grid.size())} has more voxels than the memory manager's grid "
                f"{tuple(self._grid.size())} (Grid too large)")

    def _take(self, objs, locked, make):
        for i, used in enumerate(locked):
            if not used:
                locked[i] = True
                break
        else:
            objs.append(make())
            locked.append(True)
            i = len(objs) - 1
        self._max_used = max(self._max_used, self.getNumLockedPools())
        return i

    def getPool(self, grid, what="ManagedImage3D"):
        """(id, an Image3D sharing the pool's memory on `grid`); the pool stays locked until
        releasePool(id)."""
        self._check(grid, what)
        i = self._take(self._images, self._image_locked, lambda: core.Image3D(self._grid, self._mem))
        im = self._images[i]._share()
        im.setGrid(grid)
        return i, im

    def getFieldPool(self, grid, what="ManagedField3D"):
        """(id, a Field3D sharing a field pool's memory on `grid`); locked until releaseFieldPool(id)."""
        self._check(grid, what)
        i = self._take(self._fields, self._field_locked, lambda: core.Field3D(self._grid, self._mem))
        f = self._fields[i]._share()
        f.setGrid(grid)
        return i, f

    def releasePool(self, i):
        self._image_locked[i] = False

    def acquirePool(self, i):
        self._image_locked[i] = True

    def releaseFieldPool(self, i):
        self._field_locked[i] = False

    def __repr__(self):
        return (f"MemoryManager(grid size {tuple(self._grid.size())}, {core.memTypeName(self._mem)}, "
                f"{self.getNumPools()} pools, {self.getNumLockedPools()} in use)")


class ThreadMemoryManager:
    """The memory manager of the calling thread, used by ManagedImage3D / ManagedField3D (PyCA's
    static interface: init, isInitialized, instance, destroy)."""

    _local = threading.local()

    @staticmethod
    def init(grid, mType=core.MEM_HOST, nPools=0):
        ThreadMemoryManager._local.mm = MemoryManager(grid, mType, nPools)

    @staticmethod
    def isInitialized() -> bool:
        return getattr(ThreadMemoryManager._local, "mm", None) is not None

    @staticmethod
    def instance() -> MemoryManager:
        mm = getattr(ThreadMemoryManager._local, "mm", None)
        if mm is None:
            raise RuntimeError("ThreadMemoryManager.instance(): not initialised in this thread; "
                               "call ThreadMemoryManager.init(grid, mType, nPools) first")
        return mm

    @staticmethod
    def destroy():
        ThreadMemoryManager._local.mm = None


def _manager_for(mType, mm, what):
    if mm is not None:
        if int(mm.memType()) != int(mType):
            raise ValueError(f"{what}: the memory manager's memType does not match {core.memTypeName(mType)}")
        return mm
    if ThreadMemoryManager.isInitialized():
        mm = ThreadMemoryManager.instance()
        if int(mm.memType()) == int(mType):
            return mm
    return None  # not managed: own memory, like a plain object


def _adopt(self, cls, obj):
    """Make `self` (a new proxy) the owner of `obj`'s C++ object."""
    cls_init = getattr(core._core, f"{cls.__name__}_swiginit")
    cls_init(self, obj.this)  # both proxies share one SwigPyObject, which owns the C++ object


class ManagedImage3D(core.Image3D):
    """ManagedImage3D(grid, mType[, memoryManager]): an Image3D whose memory comes from the thread's
    memory pool when one is initialised for mType (see pyca.managed), else its own."""

    def __init__(self, grid, mType=core.MEM_HOST, mm=None):
        self._mm = _manager_for(mType, mm, "ManagedImage3D")
        self._pool_id = None
        if self._mm is None:
            core.Image3D.__init__(self, grid, mType)
            return
        self._pool_id, im = self._mm.getPool(grid, "ManagedImage3D")
        _adopt(self, core.Image3D, im)

    def __del__(self):
        mm, i = getattr(self, "_mm", None), getattr(self, "_pool_id", None)
        if mm is not None and i is not None:
            mm.releasePool(i)
            self._pool_id = None

    def isManaged(self) -> bool:
        return self._pool_id is not None


class ManagedField3D(core.Field3D):
    """ManagedField3D(grid, mType[, memoryManager]): a Field3D whose memory comes from the thread's
    memory pool when one is initialised for mType (see pyca.managed), else its own."""

    def __init__(self, grid, mType=core.MEM_HOST, mm=None):
        self._mm = _manager_for(mType, mm, "ManagedField3D")
        self._pool_id = None
        if self._mm is None:
            core.Field3D.__init__(self, grid, mType)
            return
        self._pool_id, f = self._mm.getFieldPool(grid, "ManagedField3D")
        _adopt(self, core.Field3D, f)

    def __del__(self):
        mm, i = getattr(self, "_mm", None), getattr(self, "_pool_id", None)
        if mm is not None and i is not None:
            mm.releaseFieldPool(i)
            self._pool_id = None

    def isManaged(self) -> bool:
        return self._pool_id is not None
