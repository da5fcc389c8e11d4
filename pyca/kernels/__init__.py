"""Kernel programming in pyca: write an operation once, run it on CPU and GPU.

* ``@ca.kernel``: a per-voxel Python function (``i, j, k = ca.index()``, ``im[i, j, k]``,
  ``f[i, j, k, c]``, ``im.shape``, locals, if/else, for-range, while, arithmetic, comparisons,
  and/or/not, min/max/abs, math.*, float()/int(), ``@ca.func`` helpers, ``ca.line`` for stencils
  along an axis, staged in shared memory on the GPU) compiled into a parallel CPU
  loop and a CUDA kernel, dispatched by memory type like ``@pyca_dispatch`` and registered for the
  parity tests;
* ``ca.map``, ``ca.reduce``, ``ca.scan``: one fused pass each from a lambda or a ``@ca.func``;
* ``ca.on_device({obj: "to" | "from" | "tofrom" | "alloc"})``: a device data context.

The lower layers live beside: :mod:`pyca.cuda` (NVRTC, the kernel cache) and :mod:`pyca.dispatch`
(``@pyca_dispatch``). User guide: docs/kernels.md; design: docs/design/kernels.md.
"""
from __future__ import annotations

from .context import MAP_TYPES, on_device
from .host import HostCompileError, NoCompilerError
from .voxel import Kernel, kernel
from .patterns import map, reduce, scan  # noqa: A004
from .translate import INDEX as index
from .line import LINE as line
from .translate import Func, KernelSyntaxError

__all__ = ["kernel", "func", "index", "line", "map", "reduce", "scan", "on_device", "Kernel", "Func", "KernelSyntaxError",
           "NoCompilerError", "HostCompileError", "MAP_TYPES"]


def func(fn):
    """Decorator: a helper in the kernel subset of Python that kernels (and ca.map/reduce/scan) can
    call; typed scalars in and out (annotate float, int, bool; else typed by each call)."""
    return Func(fn)


index.__doc__ = "Inside a @ca.kernel: i, j, k = ca.index() gives the voxel this call computes."
