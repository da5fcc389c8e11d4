"""Pickling and copying of Image3D and Field3D (pickle, copy.copy, copy.deepcopy, Dask).

What travels is the grid (GridInfo, pickled by its own __reduce__), the memory type and the voxels.

- Host (MEM_HOST, MEM_HOST_PINNED): the object's own buffer is handed to pickle as a
  ``pickle.PickleBuffer`` (protocol 5): ``pickle.dumps`` writes it into the stream (the one copy a
  byte string needs) and an out-of-band consumer (``pickle.dumps(im, protocol=5,
  buffer_callback=...)``, Dask) gets the buffer itself, no copy at all. On load the bytes received
  become the new object's memory when they are writable (a bytearray from an in-band protocol-5
  pickle, a Dask frame); read-only bytes (protocols < 5) are copied once. A pinned object is restored
  into new pinned memory (one copy).
- Device (MEM_DEVICE): the voxels are copied to host memory and pickled as above; loading copies
  them back to a new device object. Loading a device object where no GPU can be used raises
  pyca.CudaError (the object is not silently demoted to host memory).
- copy.copy and copy.deepcopy give ``obj.clone()``: a deep copy in the same memory type (PyCA's
  copy() is deep; there is no shallow copy that would share voxels).

Subclasses (ManagedImage3D, ...) pickle as their base type. register_dask() adds Image3D and
Field3D to Dask's own serialization (one header, one frame that is the object's buffer); pyca
calls it when dask.distributed is loaded (pyca.distributed imports it). See docs/design/distributed.md.
"""
from __future__ import annotations

import pickle
import sys

import numpy as np

from . import core

__all__ = ["register_dask", "host_frame", "rebuild"]


def _base(obj):
    return core.Field3D if isinstance(obj, core.Field3D) else core.Image3D


def host_frame(obj):
    """(host object, contiguous memoryview of its voxels): the buffer that travels. The host object
    is `obj` itself for host memory (no copy), a host clone for device memory."""
    host = obj.clone(core.MEM_HOST) if obj.memType() == core.MEM_DEVICE else obj
    # A view of the object's memory, flattened in its own (x fastest) order; a copy only for a Field3D
    # whose capacity exceeds its grid (strided components).
    flat = np.asarray(host).reshape(-1, order="F")
    return host, memoryview(flat).cast("B")


def rebuild(kind, grid, mem, data):
    """The object of type `kind` ('Image3D' | 'Field3D') on `grid` in memory type `mem` from the bytes
    `data` (any buffer of float32 voxels, x fastest, components last)."""
    cls = core.Field3D if kind == "Field3D" else core.Image3D
    mem = int(mem)
    shape = tuple(grid.size()) + ((3,) if kind == "Field3D" else ())
    arr = np.frombuffer(data, dtype=np.float32)
    if arr.size != int(np.prod(shape)):
        raise pickle.UnpicklingError(f"{kind}: {arr.size} voxels in the pickle, the grid {tuple(grid.size())} "
                                     f"needs {int(np.prod(shape))}")
    arr = arr.reshape(shape, order="F")
    if mem == int(core.MEM_DEVICE) and not core.cuda_available():
        raise core.CudaError(f"unpickling {kind}: it was in device memory (MEM_DEVICE) but no GPU can be used "
                             f"here ({core.cuda_unavailable_reason()}); unpickle it where a GPU is, or move it "
                             "to the host (obj.to(pyca.MEM_HOST)) before pickling")
    if mem == int(core.MEM_HOST) and arr.flags.writeable:
        return cls.from_array(arr, grid)  # the received bytes become the object's memory
    out = cls(grid, core.MEM_HOST if mem == int(core.MEM_DEVICE) else mem)
    np.asarray(out)[...] = arr
    if mem == int(core.MEM_DEVICE):
        out.toType(core.MEM_DEVICE)
    return out


def _reduce_ex(self, protocol):
    host, mv = host_frame(self)
    data = pickle.PickleBuffer(mv) if protocol >= 5 else mv.tobytes()
    return (rebuild, (_base(self).__name__, self.grid(), int(self.memType()), data))


def _copy(self):
    return self.clone()


def _deepcopy(self, memo):
    out = self.clone()
    memo[id(self)] = out
    return out


for _cls in (core.Image3D, core.Field3D):
    _cls.__reduce_ex__ = _reduce_ex
    _cls.__copy__ = _copy
    _cls.__deepcopy__ = _deepcopy


# ------------------------------------------------------------------------------------------------
# Dask's serialization family ("dask"): a small header and the voxel buffer as the one frame.
_registered = False


def register_dask():
    """Registers Image3D and Field3D with distributed's dask_serialize / dask_deserialize."""
    global _registered
    if _registered:
        return
    from distributed.protocol import dask_deserialize, dask_serialize

    def serialize(obj):
        _, mv = host_frame(obj)
        header = {"kind": _base(obj).__name__, "grid": pickle.dumps(obj.grid()), "mem": int(obj.memType())}
        return header, [mv]

    def deserialize(header, frames):
        data = frames[0] if len(frames) == 1 else b"".join(frames)
        return rebuild(header["kind"], pickle.loads(header["grid"]), header["mem"], data)

    for cls in (core.Image3D, core.Field3D):
        dask_serialize.register(cls)(serialize)
        dask_deserialize.register(cls)(deserialize)
    _registered = True


if "distributed" in sys.modules:  # dask.distributed loaded before pyca: register now
    register_dask()
