"""Image3D.from_array / Field3D.from_array: wrapping NumPy, CuPy, PyTorch and buffer objects."""
from __future__ import annotations

import numpy as np

from . import core


def _grid_for(kind, shape, grid):
    ncomp = 3 if kind == "Field3D" else 1
    spatial = shape[:-1] if ncomp == 3 else shape
    if ncomp == 3 and (len(shape) < 3 or shape[-1] != 3):
        raise ValueError(f"Field3D.from_array: expected shape (sx, sy, sz, 3) or (sx, sy, 3), got {tuple(shape)}")
    if len(spatial) == 2:
        spatial = tuple(spatial) + (1,)
    if len(spatial) != 3:
        want = "(sx, sy, sz, 3)" if ncomp == 3 else "(sx, sy, sz) or (sx, sy)"
        raise ValueError(f"{kind}.from_array: expected shape {want}, got {tuple(shape)}")
    if grid is None:
        return core.GridInfo(spatial)
    if not isinstance(grid, core.GridInfo):
        raise TypeError(f"{kind}.from_array: grid must be a pyca.GridInfo, not {type(grid).__name__}")
    if tuple(grid.size()) != tuple(spatial):
        raise ValueError(f"{kind}.from_array: grid size {tuple(grid.size())} does not match array shape {tuple(shape)}")
    return grid


def _fortran_strides(shape, itemsize=4):
    strides, acc = [], itemsize
    for n in shape:
        strides.append(acc)
        acc *= n
    return tuple(strides)


def _layout_ok(shape, strides_bytes):
    # Dimensions of extent 1 may carry any stride.
    want = _fortran_strides(shape)
    return all(n == 1 or s == w for n, s, w in zip(shape, strides_bytes, want))


def _wrap(cls, ptr, nbytes, mem, device, grid, owner):
    wrap = core.wrap_field if cls.__name__ == "Field3D" else core.wrap_image
    return wrap(int(ptr), int(nbytes), int(mem), int(device), grid, owner)


def from_array(cls, a, grid=None):
    kind = cls.__name__
    if isinstance(a, (core.Image3D, core.Field3D)):
        raise TypeError(f"{kind}.from_array: got a pyca object; use .clone() or .to(mem)")
    cai = getattr(a, "__cuda_array_interface__", None) if not isinstance(a, np.ndarray) else None
    if cai is not None:
        if np.dtype(cai["typestr"]) != np.float32:
            raise TypeError(f"{kind}.from_array: expected float32 device data, got {np.dtype(cai['typestr'])}")
        shape = tuple(cai["shape"])
        g = _grid_for(kind, shape, grid)
        strides = cai.get("strides") or tuple(reversed(_fortran_strides(tuple(reversed(shape)))))
        if not _layout_ok(shape, strides):
            raise ValueError(f"{kind}.from_array: device data must be Fortran-ordered (x fastest, strides "
                             f"{_fortran_strides(shape)} bytes), got strides {tuple(strides)}; "
                             "transpose/copy it first (e.g. cupy.asfortranarray)")
        if not core.cuda_available():
            raise core.CudaError(f"{kind}.from_array: device data given but {core.cuda_unavailable_reason()}")
        nbytes = int(np.prod(shape)) * 4
        return _wrap(cls, cai["data"][0], nbytes, core.MEM_DEVICE, 0, g, a)
    if hasattr(a, "__dlpack__") and not isinstance(a, np.ndarray):
        dev = a.__dlpack_device__() if hasattr(a, "__dlpack_device__") else (1, 0)
        if dev[0] != 1:  # not plain CPU memory: consume the capsule ourselves
            ptr, nbytes, mem, device, shape, strides, owner = core.from_dlpack_capsule(a.__dlpack__())
            g = _grid_for(kind, shape, grid)
            if not _layout_ok(shape, tuple(s * 4 for s in strides)):
                raise ValueError(f"{kind}.from_array: DLPack data must be Fortran-ordered (x fastest)")
            return _wrap(cls, ptr, nbytes, mem, device, g, owner)
    try:
        arr = np.asarray(a)
    except Exception as e:  # noqa: BLE001 - report what was given
        raise TypeError(f"{kind}.from_array: cannot read {type(a).__name__} as an array ({e})") from None
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"{kind}.from_array: expected numeric data, got dtype {arr.dtype}")
    g = _grid_for(kind, arr.shape, grid)
    if arr.dtype != np.float32 or not arr.flags.f_contiguous or not arr.flags.writeable:
        arr = np.array(arr, dtype=np.float32, order="F", copy=True)  # the documented copy
    return _wrap(cls, arr.ctypes.data, arr.nbytes, core.MEM_HOST, -1, g, arr)
