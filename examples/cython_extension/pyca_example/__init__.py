"""Example operations on pyca images and fields, written in Cython against pyca's C++ types.

    import pyca as ca, pyca_example as ex
    ex.clamp_inplace(im, 0.0, 1.0)        # Image3D, in place (host memory)
    ex.divergence(div, v)                 # div = dvx/dx + dvy/dy + dvz/dz (world units)
    m = ex.magnitude(v)                   # a new pyca.Image3D made in C++
    ex.blend(out, a, b, 0.25)             # pyca's own MulC_Add_MulC from nogil code (host or device)
    lo, hi = ex.minmax(im)                # pyca's MinMax from nogil code
    ex.grid_values(im)                    # the grid as plain C values (a dict in Python)
"""
import pyca  # noqa: F401  (first: it loads libpyca, which _ops links without a RUNPATH)

from ._ops import blend, clamp_inplace, divergence, grid_values, magnitude, minmax

__all__ = ["blend", "clamp_inplace", "divergence", "grid_values", "magnitude", "minmax"]
