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
    library_dirs=pyca.get_library_dirs(),     # where libpyca.so is
    libraries=pyca.get_libraries(),           # ["pyca"]
    runtime_library_dirs=pyca.get_library_dirs(),
    extra_compile_args=["-std=c++17", "-O3", *openmp],
    extra_link_args=openmp,
)
setup(ext_modules=cythonize([ext], include_path=pyca.get_include(), language_level=3))
