# distutils: language = c++
# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Operations on pyca.Image3D / pyca.Field3D written against pyca's Cython declarations."""
from cython.parallel cimport prange

from pyca cimport ops
from pyca.types cimport (Field3D, Image3D, MEM_HOST, PlainGrid, as_field, as_host_field,
                         as_host_image, as_image, host_field_view, host_image_view, image_to_python,
                         plain_grid)
from libc.math cimport sqrtf
from libcpp.utility cimport pair


def clamp_inplace(im, float lo, float hi):
    """im = min(max(im, lo), hi), voxel by voxel, in place. im: a pyca.Image3D in host memory."""
    if not lo <= hi:
        raise ValueError(f"clamp_inplace: lo ({lo}) must not exceed hi ({hi})")
    # Typed memoryview in (x, y, z) order, x contiguous; TypeError / MemoryTypeError otherwise.
    cdef float[::1, :, :] v = host_image_view(im, "clamp_inplace: argument 'im': ")
    cdef Py_ssize_t i, j, k
    cdef float x
    with nogil:
        for k in prange(v.shape[2], schedule="static"):
            for j in range(v.shape[1]):
                for i in range(v.shape[0]):
                    x = v[i, j, k]
                    v[i, j, k] = lo if x < lo else (hi if x > hi else x)


cdef inline float _d(float a, float b, float h) noexcept nogil:
    return (a - b) / h


def divergence(out, v):
    """out = dvx/dx + dvy/dy + dvz/dz, with the grid's spacing (world units).

    Central differences inside, one-sided (forward at the first voxel, backward at the last) at
    the border -- numpy.gradient(..., edge_order=1) per axis; an axis of size 1 (a 2-D grid's z)
    contributes 0. out: Image3D, v: Field3D, same grid size, host memory.
    """
    cdef Field3D* f = as_host_field(v, "divergence: argument 'v': ")
    cdef Image3D* o = as_host_image(out, "divergence: argument 'out': ")
    if f.size() != o.size():
        raise ValueError("divergence: 'out' and 'v' must have the same grid size")
    cdef PlainGrid g = plain_grid(f.grid())  # plain C values, usable without the GIL
    cdef float[::1, :, :, :] fv = host_field_view(v)
    cdef float[::1, :, :] ov = host_image_view(out)
    cdef Py_ssize_t i, j, k, nx = g.nx, ny = g.ny, nz = g.nz
    cdef float s
    with nogil:
        for k in prange(nz, schedule="static"):
            for j in range(ny):
                for i in range(nx):
                    s = 0
                    if nx > 1:
                        if i == 0:
                            s = s + _d(fv[1, j, k, 0], fv[0, j, k, 0], g.dx)
                        elif i == nx - 1:
                            s = s + _d(fv[i, j, k, 0], fv[i - 1, j, k, 0], g.dx)
                        else:
                            s = s + _d(fv[i + 1, j, k, 0], fv[i - 1, j, k, 0], 2 * g.dx)
                    if ny > 1:
                        if j == 0:
                            s = s + _d(fv[i, 1, k, 1], fv[i, 0, k, 1], g.dy)
                        elif j == ny - 1:
                            s = s + _d(fv[i, j, k, 1], fv[i, j - 1, k, 1], g.dy)
                        else:
                            s = s + _d(fv[i, j + 1, k, 1], fv[i, j - 1, k, 1], 2 * g.dy)
                    if nz > 1:
                        if k == 0:
                            s = s + _d(fv[i, j, 1, 2], fv[i, j, 0, 2], g.dz)
                        elif k == nz - 1:
                            s = s + _d(fv[i, j, k, 2], fv[i, j, k - 1, 2], g.dz)
                        else:
                            s = s + _d(fv[i, j, k + 1, 2], fv[i, j, k - 1, 2], 2 * g.dz)
                    ov[i, j, k] = s


def magnitude(v):
    """A new pyca.Image3D (host memory, v's grid) holding |v| at every voxel.

    Shows the C++ side: the image is made in C++ and handed to Python without a copy; the field's
    components are read through raw pointers (planes planeStride() floats apart).
    """
    cdef Field3D* f = as_host_field(v, "magnitude: argument 'v': ")
    cdef Image3D* m = new Image3D(f.grid(), MEM_HOST)
    cdef const float* px = f.x()
    cdef const float* py = f.y()
    cdef const float* pz = f.z()
    cdef float* out = m.data()
    cdef Py_ssize_t n = <Py_ssize_t>f.nVox(), t
    try:
        with nogil:
            for t in prange(n, schedule="static"):
                out[t] = sqrtf(px[t] * px[t] + py[t] * py[t] + pz[t] * pz[t])
        return image_to_python(m[0])  # shares m's memory; m itself can go
    finally:
        del m


def blend(out, a, b, float t):
    """out = (1 - t) * a + t * b with pyca's MulC_Add_MulC, called without the GIL.

    Images or fields, in host or device memory (pyca runs it where the data is); pyca's own
    argument checks raise Python exceptions (sizes, mixed memory types).
    """
    if isinstance(out, _Field3D):
        _blend_fields(as_field(out), as_field(a), as_field(b), t)
    else:
        _blend_images(as_image(out), as_image(a), as_image(b), t)


cdef int _blend_images(Image3D* o, Image3D* a, Image3D* b, float t) except -1:
    with nogil:
        ops.MulC_Add_MulC(o[0], a[0], 1 - t, b[0], t)
    return 0


cdef int _blend_fields(Field3D* o, Field3D* a, Field3D* b, float t) except -1:
    with nogil:
        ops.MulC_Add_MulC(o[0], a[0], 1 - t, b[0], t)
    return 0


def grid_values(obj):
    """The grid of a pyca.Image3D or pyca.Field3D as the plain C struct PlainGrid (a dict here)."""
    cdef PlainGrid g
    if isinstance(obj, _Field3D):
        g = plain_grid(as_field(obj).grid())
    else:
        g = plain_grid(as_image(obj).grid())
    return g


def minmax(im):
    """(smallest, largest) value of a pyca.Image3D (any memory type), with pyca's MinMax."""
    cdef Image3D* p = as_image(im)
    cdef pair[float, float] r
    with nogil:
        r = ops.MinMax(p[0])
    return r.first, r.second


from pyca import Field3D as _Field3D  # noqa: E402
