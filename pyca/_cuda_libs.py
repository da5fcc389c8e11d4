"""Where the NVIDIA wheels (nvidia-cufft, nvidia-cuda-nvrtc: ``pip install pyca3d[cuda]``) put
cuFFT and NVRTC on this interpreter's sys.path, for libpyca's loader (cuda/src/cuda_libs.h), which
loads them at their first use. The loader looks beside the pyca package by itself; this adds the
other folders of sys.path (a venv over system site-packages, the user's site). No library is
loaded here.
"""
from __future__ import annotations

import os
import sys

_WHEEL_LIB_DIRS = ("nvidia/cu13/lib", "nvidia/cufft/lib", "nvidia/cuda_nvrtc/lib")
ENV = "PYCA_CUDA_WHEEL_DIRS"


def wheel_lib_dirs() -> list[str]:
    """The existing NVIDIA wheel library folders under sys.path, in sys.path order."""
    found: list[str] = []
    for entry in sys.path:
        for sub in _WHEEL_LIB_DIRS:
            d = os.path.join(entry or os.curdir, sub)
            if d not in found and os.path.isdir(d):
                found.append(os.path.abspath(d))
    return found


def publish() -> None:
    """Puts wheel_lib_dirs() into PYCA_CUDA_WHEEL_DIRS (kept when the user set it)."""
    if ENV not in os.environ:
        dirs = wheel_lib_dirs()
        if dirs:
            os.environ[ENV] = os.pathsep.join(dirs)
