"""Builds pyca_example._ops against the installed pyca (see docs/cython.md)."""
import sys

import pyca
from Cython.Build import cythonize
from setuptools import Extension, setup

openmp = [] if sys.platform == "darwin" else ["-fopenmp"]
ext = Extension(
    "pyca_example._ops",
    ["pyca_example/_ops.pyx"],
    language="c++",
    include_dirs=pyca.get_include(),          # pyca/*.pxd folder and the C++ headers
    library_dirs=pyca.get_library_dirs(),     # where libpyca.so is, for the link
    libraries=pyca.get_libraries(),           # ["pyca"]
    # No runtime_library_dirs (RUNPATH): pyca_example/__init__.py imports pyca first, which loads
    # libpyca, and the loader then finds it by name, wherever pyca is installed.
    extra_compile_args=["-std=c++17", "-O3", *openmp],
    extra_link_args=openmp,
)
setup(
    ext_modules=cythonize([ext], include_path=pyca.get_include(), language_level=3),
    # The C++ ABI is that of the pyca built against: pin it.
    install_requires=[f"pyca3d=={pyca.__version__}"],
)
