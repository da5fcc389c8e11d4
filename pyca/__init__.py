"""pyca: 3-D imaging data structures for computational anatomy, on CPU and CUDA GPUs.

The successor of PyCA: ``import pyca as ca`` gives PyCA's types (Vec3Df, Vec3Di, GridInfo, Image3D,
Field3D), memory types (MEM_HOST, MEM_HOST_PINNED, MEM_DEVICE), enumerations and operations
(``ca.Add(out, a, b)``, ``ca.ApplyH(out, im, h, ca.BACKGROUND_STRATEGY_CLAMP)``, ...). Each operation
runs on the CPU for host arguments and on the GPU for device arguments.
"""
from __future__ import annotations

import sys as _sys

if _sys.argv[:1] == ["-m"]:  # `python -m pyca`: a Ctrl-C while the package loads is one line (pyca/__main__.py)
    try:
        import _pyca_console
    except ImportError:  # (a tree without the console entry's package: Python's own traceback)
        pass
    else:
        if _pyca_console.running_python_m("pyca"):
            _pyca_console.guard()

__version__ = "0.1.0"

from . import _openmp  # noqa: F401,I001 - before the core loads the OpenMP runtime (see the module)
from . import core as _core_module
from .core import *  # noqa: F401,F403 - types, enums and operations, as in PyCA
from .core import CudaError, MemoryTypeError  # noqa: F401


def cuda_available() -> bool:
    """True when a CUDA GPU can be used now (pyca built with CUDA, a driver and a device)."""
    return _core_module.cuda_available()


def device_info() -> str:
    """A line describing the GPU pyca uses, or why there is none."""
    return _core_module.device_info()


def cpu_vector_info() -> str:
    """How the CPU loops of the fused LDDMM steps run here: "AVX-512, 16 voxels at once", or "scalar: "
    and why (no AVX-512 on this CPU, PYCA_CPU_SIMD=0); the same results either way."""
    return _core_module.cpu_vector_info()


def SetToZero(v):
    """Sets every element of an Image3D or Field3D to 0 (PyCA's SetToZero), in any memory type."""
    v.fill(0.0)


def best_memory_type():
    """MEM_DEVICE when a GPU can be used, else MEM_HOST."""
    return MEM_DEVICE if cuda_available() else MEM_HOST  # noqa: F405


# The package's parts (each importable on its own too).
from . import common, cuda, dispatch, ext, io, registry  # noqa: E402,F401
from .legacy import CheckCUDAError, Gradient2, ShiftCoordinate, SumComp  # noqa: E402,F401 - PyCA.Core names
from .multiscale import (  # noqa: E402,F401 - PyCA's multi-scale classes
    Multiscale, MultiscaleManager, MultiscaleResampler, MultiscaleResamplerCPU, MultiscaleResamplerGauss,
    MultiscaleResamplerGaussCPU, MultiscaleResamplerGaussGPU, MultiscaleResamplerGPU)
from . import _pickle  # noqa: E402,F401 - pickle / copy / Dask serialization of Image3D and Field3D
from .kernels import func, index, kernel, line, map, on_device, reduce, scan  # noqa: E402,F401,A004
from ._paths import get_include, get_libraries, get_library_dirs  # noqa: E402,F401
from .managed import ManagedField3D, ManagedImage3D, MemoryManager, ThreadMemoryManager  # noqa: E402,F401
from .registration.apply import apply_transforms  # noqa: E402,F401 - pyca's registrations and ANTs' (docs/transforms.md)

# Where pip put cuFFT/NVRTC (pyca3d[cuda]), for libpyca to load them at their first use (not now).
from . import _cuda_libs  # noqa: E402

_cuda_libs.publish()


def _public_names(ns):
    """What `from pyca import *` gives: PyCA's types, constants and operations and pyca's functions,
    never a module: `io`, `common`, `cuda`, ... stay attributes (ca.io, ca.common) and do not replace
    a client's own modules of those names."""
    import types

    return sorted(n for n, v in ns.items()
                  if not n.startswith("_") and n != "annotations" and not isinstance(v, types.ModuleType))


__all__ = _public_names(globals())
