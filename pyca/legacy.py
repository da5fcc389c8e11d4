"""PyCA.Core names that pyca provides in Python over its own operations.

They are exported at the top level (``ca.SumComp``, ``ca.Gradient2``, ``ca.ShiftCoordinate``,
``ca.CheckCUDAError``), as PyCA had them; each runs for host and device arguments.
"""
from __future__ import annotations

import numpy as np

from . import core

__all__ = ["SumComp", "Gradient2", "ShiftCoordinate", "CheckCUDAError"]


def SumComp(f):
    """The sum over the voxels of each component of the Field3D `f`, as a Vec3Df (PyCA's SumComp)."""
    if not isinstance(f, core.Field3D):
        raise TypeError(f"SumComp: expected a Field3D, not {type(f).__name__}")
    return core.Sum(f)


def Gradient2(out, im, diffType=core.DIFF_CENTRAL, bc=core.BC_CLAMP):
    """PyCA's Gradient2: the gradient of `im` into `out` (per world unit), computed voxel by voxel. Its
    values are Gradient's (PyCA computed the same finite differences two ways and had no GPU version
    of this one); here it runs on both sides."""
    core.Gradient(out, im, diffType, bc)


def _shifted_shape(size, direction):
    sx, sy, sz = size
    return (sz, sx, sy) if direction else (sy, sz, sx)


def ShiftCoordinate(out, im, dir=True):  # noqa: A002 - PyCA's argument name
    """Rotates the axes of the Image3D `im` into `out` (PyCA's ShiftCoordinate): with `dir` True,
    out(z, x, y) = im(x, y, z) (out's size is (sz, sx, sy)); with `dir` False, out(y, z, x) =
    im(x, y, z) (size (sy, sz, sx)). out's grid (spacing, origin) is left as it is. Any memory type:
    device data goes through the host (the arguments are not moved)."""
    if not isinstance(out, core.Image3D) or not isinstance(im, core.Image3D):
        raise TypeError("ShiftCoordinate: out and im must be Image3D")
    want = _shifted_shape(tuple(im.size()), bool(dir))
    if tuple(out.size()) != want:
        raise ValueError(f"ShiftCoordinate: out has size {tuple(out.size())}, expected {want} for an input of size "
                         f"{tuple(im.size())} and dir={bool(dir)}")
    a = im.numpy()
    b = np.transpose(a, (2, 0, 1) if dir else (1, 2, 0))
    src = core.Image3D.from_array(np.asfortranarray(b, dtype=np.float32))
    out.copy_from(src)


def CheckCUDAError(file="", line=0, msg=""):
    """PyCA's CheckCUDAError: raises pyca.CudaError (naming file, line and msg) if GPU work queued on
    pyca's current stream failed. pyca reports a failed launch at the operation itself, so this only
    waits for the queued work; without a GPU (or a CUDA context) it returns at once."""
    if not core.cuda_available():
        return
    try:
        core.synchronize()
    except core.CudaError as e:
        where = f"{file}:{line}: " if file else ""
        raise core.CudaError(f"{where}{msg}: {e}" if msg else f"{where}{e}") from e
