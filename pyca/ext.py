"""pyca's own operations written with :func:`pyca.dispatch.pyca_dispatch`: a Cython loop on host
data (pyca/_ext/loops.pyx), a CUDA kernel on device data (pyca/kernels/ext.cu), the per-voxel math
shared by both (pyca/kernels/ext_math.h). They serve the LDDMM application and are working examples
of the dispatcher.

    ssd_gradient(out, deformed, target, grad)   out = (deformed - target) * grad
    field_axpby(out, a, x, b, y)                out = a * x + b * y
    squared_diff(out, a, b)                     out = (a - b)^2

All arguments in host (MEM_HOST, MEM_HOST_PINNED) or all in device memory (MEM_DEVICE), all of one
size; every operation is voxel-wise, so `out` may be one of the inputs. Device calls are
asynchronous on ``stream=`` (default: pyca's current stream). Semantics: docs/dispatch.md.
"""
from __future__ import annotations

from pathlib import Path

from . import cuda as _cuda
from .core import Field3D, Image3D
from .dispatch import pyca_dispatch

__all__ = ["ssd_gradient", "field_axpby", "squared_diff", "KERNEL_SOURCE"]

KERNEL_SOURCE = Path(__file__).resolve().parent / "kernels" / "ext.cu"
_module: _cuda.SourceModule | None = None
_loops_mod = None


def _kernel(name: str):
    """The kernel compiled into libpyca when the build put it there, else the same source compiled by
    NVRTC at the first device call (lazily: importing pyca compiles nothing)."""
    global _module
    try:
        if name in _cuda.registered_kernels():
            return _cuda.get_kernel(name)
    except Exception:  # no CUDA build: no registry
        pass
    if _module is None:
        _module = _cuda.SourceModule.from_file(KERNEL_SOURCE, lazy=True)
    return _module.get_function(name)


def _loops():
    global _loops_mod
    if _loops_mod is None:
        try:
            from ._ext import loops
        except ImportError as e:
            raise ImportError(
                "pyca.ext: the compiled CPU loops (pyca._ext.loops, from pyca/_ext/loops.pyx) are missing; "
                "rebuild pyca (pip install .) to compile them"
            ) from e
        _loops_mod = loops
    return _loops_mod


@pyca_dispatch(_kernel("pyca_ext_ssd_gradient"), registry_name="pyca.ext.ssd_gradient", rtol=1e-6, atol=1e-6)
def ssd_gradient(out: Field3D, deformed: Image3D, target: Image3D, grad: Field3D) -> None:
    """out = (deformed - target) * grad, voxel by voxel: the gradient of the sum of squared
    differences 1/2 |deformed - target|^2 with respect to the deformation, given grad = the gradient
    of the deformed image (e.g. from pyca.Gradient). Units: those of grad."""
    _loops().ssd_gradient(out, deformed, target, grad)


@pyca_dispatch(_kernel("pyca_ext_field_axpby"), registry_name="pyca.ext.field_axpby", rtol=1e-6, atol=1e-6)
def field_axpby(out: Field3D, a: float, x: Field3D, b: float, y: Field3D) -> None:
    """out = a * x + b * y, voxel by voxel and component by component (float32 arithmetic)."""
    _loops().field_axpby(out, a, x, b, y)


@pyca_dispatch(_kernel("pyca_ext_squared_diff"), registry_name="pyca.ext.squared_diff", rtol=1e-6, atol=1e-6)
def squared_diff(out: Image3D, a: Image3D, b: Image3D) -> None:
    """out = (a - b)^2, voxel by voxel (sum it with pyca.Sum for an SSD energy)."""
    _loops().squared_diff(out, a, b)
