# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# distutils: language = c++
"""CPU loops of pyca.ext's dispatched operations (OpenMP over voxels). The per-voxel math is shared with
the CUDA kernels through pyca/kernels/ext_math.h. The dispatcher has checked the arguments (types,
host memory, equal sizes) before these run; they work on zero-copy typed memoryviews of the pyca
objects' buffers, so out may be the same object as an input (every operation is voxel-wise)."""

from cython.parallel cimport prange

cimport openmp

cdef extern from "ext_math.h" nogil:
    float pyca_ext_voxel_residual(float deformed, float target)
    float pyca_ext_voxel_squared_diff(float a, float b)
    float pyca_ext_voxel_axpby(float a, float x, float b, float y)


cdef int _threads(Py_ssize_t nvox) noexcept nogil:
    # Small volumes run on one thread: starting a parallel region costs more than the work.
    return 1 if nvox < 32768 else openmp.omp_get_max_threads()


cdef float* _plane(float[:, :, :, :] f, int c) except NULL:
    # Base of component c of a field view: each plane is x-fastest contiguous (pyca's layout).
    if f.strides[0] != 4 or f.strides[1] != 4 * f.shape[0] or f.strides[2] != 4 * f.shape[0] * f.shape[1]:
        raise ValueError("pyca._ext.loops: a field plane is not contiguous")
    return &f[0, 0, 0, c]


cdef float* _image(float[:, :, :] a) except NULL:
    if a.strides[0] != 4 or a.strides[1] != 4 * a.shape[0] or a.strides[2] != 4 * a.shape[0] * a.shape[1]:
        raise ValueError("pyca._ext.loops: an image is not contiguous")
    return &a[0, 0, 0]


def ssd_gradient(out, deformed, target, grad):
    """out = (deformed - target) * grad (Field3D, Image3D, Image3D, Field3D)."""
    cdef float[:, :, :, :] o = out
    cdef float[:, :, :, :] g = grad
    cdef float* d = _image(deformed)
    cdef float* t = _image(target)
    cdef float* ox = _plane(o, 0)
    cdef float* oy = _plane(o, 1)
    cdef float* oz = _plane(o, 2)
    cdef float* gx = _plane(g, 0)
    cdef float* gy = _plane(g, 1)
    cdef float* gz = _plane(g, 2)
    cdef Py_ssize_t n = o.shape[0] * o.shape[1] * o.shape[2], i
    cdef float r
    for i in prange(n, nogil=True, schedule="static", num_threads=_threads(n)):
        r = pyca_ext_voxel_residual(d[i], t[i])
        ox[i] = r * gx[i]
        oy[i] = r * gy[i]
        oz[i] = r * gz[i]


def field_axpby(out, double a, x, double b, y):
    """out = a * x + b * y (Field3D, float, Field3D, float, Field3D)."""
    cdef float[:, :, :, :] o = out
    cdef float[:, :, :, :] xv = x
    cdef float[:, :, :, :] yv = y
    cdef float fa = <float>a, fb = <float>b
    cdef Py_ssize_t n = o.shape[0] * o.shape[1] * o.shape[2], i
    cdef int c
    cdef float* po
    cdef float* px
    cdef float* py
    for c in range(3):
        po = _plane(o, c)
        px = _plane(xv, c)
        py = _plane(yv, c)
        for i in prange(n, nogil=True, schedule="static", num_threads=_threads(n)):
            po[i] = pyca_ext_voxel_axpby(fa, px[i], fb, py[i])


def squared_diff(out, a, b):
    """out = (a - b)^2 (Image3D, Image3D, Image3D)."""
    cdef float[:, :, :] ov = out
    cdef float* o = _image(ov)
    cdef float* pa = _image(a)
    cdef float* pb = _image(b)
    cdef Py_ssize_t n = ov.shape[0] * ov.shape[1] * ov.shape[2], i
    for i in prange(n, nogil=True, schedule="static", num_threads=_threads(n)):
        o[i] = pyca_ext_voxel_squared_diff(pa[i], pb[i])
