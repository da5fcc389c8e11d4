"""Where a third-party build finds pyca: the Cython declarations, the C++ headers and libpyca.

    import pyca
    pyca.get_include()       # [folder holding pyca/types.pxd, folder holding pyca/*.h]
    pyca.get_library_dirs()  # [folder holding libpyca.so]
    pyca.get_libraries()     # ["pyca"]  (link with -lpyca)

Like numpy.get_include(): give the first list to Cython (include_path) and to the C++ compiler
(include_dirs), the other two to the linker. docs/cython.md has a setuptools and a CMake recipe.
Found from the installed package, whatever its layout (a normal install, --target, editable).
"""
from __future__ import annotations

import glob
import importlib.util
import os
import sys

__all__ = ["get_include", "get_library_dirs", "get_libraries"]

_PKG = "pyca"


def _package_dirs() -> list[str]:
    """Folders that may hold the installed package's files, most likely first."""
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [here]
    pkg = sys.modules.get(_PKG)
    for p in getattr(pkg, "__path__", []) or []:
        dirs.append(os.path.abspath(p))
    try:  # the compiled module's folder (differs from `here` in editable installs)
        spec = importlib.util.find_spec(f"{_PKG}._core")
        if spec is not None and spec.origin:
            dirs.append(os.path.dirname(os.path.abspath(spec.origin)))
    except (ImportError, ValueError):
        pass
    for p in sys.path:
        dirs.append(os.path.join(os.path.abspath(p or os.curdir), _PKG))
    return list(dict.fromkeys(d for d in dirs if os.path.isdir(d)))


def _find(what: str, test) -> str:
    for d in _package_dirs():
        if test(d):
            return d
    raise FileNotFoundError(f"pyca: cannot find {what} in the installed package (looked in "
                            f"{', '.join(_package_dirs())}); reinstall pyca")


def get_include() -> list[str]:
    """[the folder to put on Cython's include path (it holds pyca/types.pxd and pyca/ops.pxd),
    the folder to put on the C++ include path (it holds pyca/*.h and pyca_capi.h)]."""
    pxd = _find("pyca/types.pxd", lambda d: os.path.isfile(os.path.join(d, "types.pxd")))
    inc = _find("include/pyca/array3d.h", lambda d: os.path.isfile(os.path.join(d, "include", "pyca", "array3d.h")))
    return [os.path.dirname(pxd), os.path.join(inc, "include")]


def get_library_dirs() -> list[str]:
    """[the folder holding libpyca.so] (link with -L<it> -lpyca and an rpath to it)."""
    return [_find("libpyca.so", lambda d: bool(glob.glob(os.path.join(d, "libpyca.so*"))))]


def get_libraries() -> list[str]:
    """The libraries to link: ["pyca"]."""
    return ["pyca"]
