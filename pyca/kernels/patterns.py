"""``ca.map``, ``ca.reduce`` and ``ca.scan``: element-wise, reduction and inclusive-scan passes over pyca
images from a lambda or a ``@ca.func`` function, each one fused loop on the CPU and one CUDA kernel
(two for reduce), generated like ``@ca.kernel`` (docs/design/kernels.md).

Determinism: reduce's CPU pass adds fixed blocks of voxels (pyca::detail::kSumBlock, as
core/include/pyca/detail/parallel.h's orderedSum) and combines their results in block order, so its
bits do not depend on the number of threads; the GPU pass uses fixed chunks and a fixed tree.
"""
from __future__ import annotations

import ctypes
import numbers

from ..dispatch import DispatchedOp
from . import host as _host
from .voxel import CompiledSource, LazyFunction, assemble, raise_cpu_error
from .translate import Context, Func, FuncTranslator, function_node
from .values import DOUBLE, FLOAT

__all__ = ["map", "reduce", "scan"]

_memo: dict = {}


def _core():
    from .. import core

    return core


def _key(f, *extra):
    fn = f.fn if isinstance(f, Func) else f
    code = fn.__code__
    vals = []
    for n in code.co_names:
        v = fn.__globals__.get(n)
        vals.append(v if isinstance(v, (numbers.Number, str)) else id(v))
    for cell in fn.__closure__ or ():
        try:
            v = cell.cell_contents
        except ValueError:
            v = None
        vals.append(v if isinstance(v, (numbers.Number, str)) else id(v))
    return (code, tuple(vals)) + extra


def _helper(f, types: tuple, ret: str | None, what: str) -> tuple[Context, str, str]:
    """Translates f (a function, lambda or Func) with the given parameter types."""
    fn = f.fn if isinstance(f, Func) else f
    if not callable(fn) or not hasattr(fn, "__code__"):
        raise TypeError(f"pyca.{what}: f must be a Python function, a lambda or a @ca.func function, "
                        f"not {type(f).__name__}")
    if fn.__code__.co_argcount != len(types):
        raise TypeError(f"pyca.{what}: f takes {fn.__code__.co_argcount} arguments, {len(types)} expected")
    node, lines, filename = function_node(fn)
    ctx = Context()
    tr = FuncTranslator(fn, node, lines, filename, ctx, kind="func", param_types=types, ret_type=ret,
                        cname="pyca_fn", what=f"pyca.{what} function")
    ctx.helpers.append(tr.translate())
    return ctx, "pyca_fn", f"{fn.__qualname__} ({filename.rsplit('/', 1)[-1]}:{node.lineno})"


def _check_arrays(what, arrays):
    core = _core()
    for k, a in enumerate(arrays):
        if not isinstance(a, (core.Image3D, core.Field3D)):
            raise TypeError(f"pyca.{what}: argument {k} must be an Image3D or Field3D, not {type(a).__name__}")


# ------------------------------------------------------------------------------------------------
def map(f, *images, out=None):  # noqa: A001 - ca.map, as CLyther's and CudaPy's
    """out[v] = f(images[0][v], images[1][v], ...) for every voxel v (and component, for Field3D), in
    one pass; all arrays of one kind (Image3D or Field3D), size and kind of memory. `out` (default: a
    new array like images[0]) may be one of the images. Returns out."""
    if not images:
        raise TypeError("pyca.map: give at least one image")
    _check_arrays("map", images + ((out,) if out is not None else ()))
    kind = type(images[0]).__name__
    if any(type(a).__name__ != kind for a in images[1:]) or (out is not None and type(out).__name__ != kind):
        raise TypeError(f"pyca.map: all arrays must be of one kind ({kind}); got "
                        f"{', '.join(type(a).__name__ for a in images + ((out,) if out is not None else ()))}")
    key = _key(f, "map", len(images), kind)
    op = _memo.get(key)
    if op is None:
        op = _memo[key] = _map_op(f, len(images), kind)
    if out is None:
        out = type(images[0])(images[0].grid(), images[0].memType())
    op(out, *images)
    return out


def _map_op(f, n: int, kind: str):
    ctx, fname, title = _helper(f, (FLOAT,) * n, None, "map")
    view = "pyca::ImageView" if kind == "Image3D" else "pyca::FieldView"
    planes = ["data"] if kind == "Image3D" else ["x", "y", "z"]
    names = [f"a{k}" for k in range(n + 1)]
    dparams = ", ".join(f"{view} {a}" for a in names)
    dev_body = "".join(f"    a0.{p}[t] = float({fname}({', '.join(f'{a}.{p}[t]' for a in names[1:])}, nullptr));\n"
                       for p in planes)
    device = (f'extern "C" __global__ void pyca_map_gpu({dparams}) {{\n  PYCA_FOR_EACH_VOXEL(a0.size, i, j, k) {{\n'
              f"    const unsigned long long t = a0.index(i, j, k);\n{dev_body}  }}\n}}\n")
    hparams = ", ".join(f"const {view}* {a}" for a in names)
    loops = ""
    for p in planes:
        ptrs = "".join(f"    const float* __restrict__ x{k} = a{k}->{p};\n" for k in range(1, n + 1))
        loops += (f"  {{\n    float* __restrict__ o = a0->{p};\n{ptrs}"
                  f"#pragma omp parallel num_threads(pyca::detail::threadsFor(std::size_t(n)))\n    {{\n"
                  f"      pyca_k::Err mine{{0}};\n#pragma omp for schedule(static)\n"
                  f"      for (long long t = 0; t < n; ++t) o[t] = float({fname}("
                  f"{', '.join(f'x{k}[t]' for k in range(1, n + 1))}, &mine));\n"
                  f"      pyca_k::merge(&err, mine);\n    }}\n  }}\n")
    host = (f'extern "C" int pyca_map_cpu({hparams}, int* pyca_line) {{\n  pyca_k::Err err{{0}};\n'
            f"  const long long n = (long long)a0->nVox();\n{loops}"
            f"  *pyca_line = err.v & 0xffffff;\n  return err.v >> 24;\n}}\n")
    src = assemble(f"map of {title}", ctx.helpers, device, host)
    vc = ctypes.POINTER(_host.ImageViewC if kind == "Image3D" else _host.FieldViewC)
    cs = CompiledSource(src, "pyca_map", {"pyca_map_cpu": ([vc] * (n + 1) + [ctypes.POINTER(ctypes.c_int)], ctypes.c_int)})
    pack = _host.image_view if kind == "Image3D" else _host.field_view
    gpu = LazyFunction("pyca_map_gpu", [(view, a) for a in names], ("I" if kind == "Image3D" else "F") * (n + 1),
                        lambda: cs)

    def cpu(*args):
        line = ctypes.c_int(0)
        code = cs.cpu("pyca_map_cpu")(*[pack(a) for a in args], ctypes.byref(line))
        if code:
            raise_cpu_error(f"map({title})", "", code, line.value)

    sig = "(" + ", ".join(f"{a}: {kind}" for a in names) + ")"
    return DispatchedOp(cpu, gpu, name=f"pyca.map({title})", signature=sig, register=False)


# ------------------------------------------------------------------------------------------------
_RED_CHUNK = 8192  # voxels per CUDA block of reduce's first pass (fixed: the result does not depend on the GPU)
_RED_THREADS = 256


def reduce(f, image, init):  # noqa: A001
    """f(... f(f(init, x0), x1) ..., xn) over the voxels of `image` (an Image3D), for an associative
    and commutative f (sum, product, max, min...), evaluated in double precision in a fixed order:
    the same bits on every run and for any number of CPU threads. Returns a Python float."""
    core = _core()
    if not isinstance(image, core.Image3D):
        raise TypeError(f"pyca.reduce: image must be an Image3D, not {type(image).__name__}")
    if not isinstance(init, numbers.Real):
        raise TypeError(f"pyca.reduce: init must be a number, not {type(init).__name__}")
    key = _key(f, "reduce")
    cs = _memo.get(key)
    if cs is None:
        cs = _memo[key] = _reduce_source(f)
    n = int(image.nVox())
    if image.memType() != core.MEM_DEVICE:
        line = ctypes.c_int(0)
        r = cs.cpu("pyca_reduce_cpu")(ctypes.c_void_p(image.rawptr()), n, float(init), ctypes.byref(line))
        if line.value:
            raise_cpu_error(f"reduce({cs.title})", "", line.value >> 24, line.value & 0xFFFFFF)
        return float(r)
    if n == 0:
        return float(init)
    nb = (n + _RED_CHUNK - 1) // _RED_CHUNK
    part = core.Image3D(core.GridInfo((2 * nb, 1, 1)), core.MEM_DEVICE)
    mod = cs.module
    mod.get_function("pyca_reduce_gpu1")(image, part, _RED_CHUNK, grid=(nb, 1, 1), block=(_RED_THREADS, 1, 1))
    mod.get_function("pyca_reduce_gpu2")(part, nb, float(init), grid=(1, 1, 1), block=(_RED_THREADS, 1, 1))
    import numpy as np

    return float(np.asarray(part.numpy()).ravel(order="F")[:2].copy().view(np.float64)[0])


def _reduce_source(f) -> CompiledSource:
    ctx, fn, title = _helper(f, (DOUBLE, DOUBLE), DOUBLE, "reduce")
    T = _RED_THREADS
    tree = (f"  s[t] = v;\n  h[t] = has;\n  __syncthreads();\n"
            f"  for (int w = {T // 2}; w > 0; w >>= 1) {{\n"
            f"    if (t < w && h[t + w]) {{\n      s[t] = h[t] ? {fn}(s[t], s[t + w], nullptr) : s[t + w];\n"
            f"      h[t] = true;\n    }}\n    __syncthreads();\n  }}\n")
    device = (
        f'extern "C" __global__ void pyca_reduce_gpu1(pyca::ImageView x, pyca::ImageView part, long long chunk) {{\n'
        f"  __shared__ double s[{T}];\n  __shared__ bool h[{T}];\n  const int t = threadIdx.x;\n"
        f"  const long long n = (long long)x.nVox(), lo = (long long)blockIdx.x * chunk;\n"
        f"  const long long hi = lo + chunk < n ? lo + chunk : n;\n  double v = 0.0;\n  bool has = false;\n"
        f"  for (long long q = lo + t; q < hi; q += {T}) {{\n    const double u = x.data[q];\n"
        f"    v = has ? {fn}(v, u, nullptr) : u;\n    has = true;\n  }}\n{tree}"
        f"  if (t == 0) reinterpret_cast<double*>(part.data)[blockIdx.x] = s[0];\n}}\n"
        f'extern "C" __global__ void pyca_reduce_gpu2(pyca::ImageView part, long long nb, double init) {{\n'
        f"  __shared__ double s[{T}];\n  __shared__ bool h[{T}];\n  const int t = threadIdx.x;\n"
        f"  const double* p = reinterpret_cast<const double*>(part.data);\n  double v = 0.0;\n  bool has = false;\n"
        f"  for (long long q = t; q < nb; q += {T}) {{\n    v = has ? {fn}(v, p[q], nullptr) : p[q];\n    has = true;\n  }}\n"
        f"{tree}  if (t == 0) reinterpret_cast<double*>(part.data)[0] = {fn}(init, s[0], nullptr);\n}}\n")
    host = (
        f'#include <cstdlib>\nextern "C" double pyca_reduce_cpu(const float* x, long long n, double init, int* pyca_line) {{\n'
        f"  pyca_k::Err err{{0}};\n  const long long B = pyca::detail::kSumBlock;\n  const long long nb = (n + B - 1) / B;\n"
        f"  if (n <= 0) return init;\n  double* part = static_cast<double*>(std::malloc(sizeof(double) * nb));\n"
        f"  if (!part) {{ *pyca_line = 4 << 24; return 0.0; }}\n"
        f"#pragma omp parallel for schedule(static) num_threads(pyca::detail::threadsFor(std::size_t(n)))\n"
        f"  for (long long b = 0; b < nb; ++b) {{\n    pyca_k::Err mine{{0}};\n"
        f"    const long long lo = b * B, len = (lo + B < n ? lo + B : n) - lo;\n    const float* p = x + lo;\n"
        f"    double acc;\n    long long q = 1;\n"
        f"    if (len >= 16) {{\n      double l[8];\n      for (int u = 0; u < 8; ++u) l[u] = p[u];\n"
        f"      for (q = 8; q + 8 <= len; q += 8)\n        for (int u = 0; u < 8; ++u) l[u] = {fn}(l[u], double(p[q + u]), &mine);\n"
        f"      acc = l[0];\n      for (int u = 1; u < 8; ++u) acc = {fn}(acc, l[u], &mine);\n"
        f"    }} else {{\n      acc = p[0];\n    }}\n"
        f"    for (; q < len; ++q) acc = {fn}(acc, double(p[q]), &mine);\n    part[b] = acc;\n"
        f"    pyca_k::merge(&err, mine);\n  }}\n"
        f"  double r = init;\n  for (long long b = 0; b < nb; ++b) r = {fn}(r, part[b], &err);\n"
        f"  std::free(part);\n  *pyca_line = err.v;\n  return r;\n}}\n")
    cs = CompiledSource(assemble(f"reduce of {title}", ctx.helpers, device, host), "pyca_reduce",
                        {"pyca_reduce_cpu": ([ctypes.c_void_p, ctypes.c_longlong, ctypes.c_double,
                                              ctypes.POINTER(ctypes.c_int)], ctypes.c_double)})
    cs.title = title
    return cs


# ------------------------------------------------------------------------------------------------
def scan(f, image, axis, out=None):
    """Inclusive scan along `axis` (0 = x, 1 = y, 2 = z): out[.., t, ..] = f(out[.., t-1, ..],
    image[.., t, ..]), out[.., 0, ..] = image[.., 0, ..], for an associative f, in float32 (e.g.
    ``lambda a, b: a + b`` gives cumulative sums: integral images). `out` (default: a new Image3D
    like `image`) may be `image`. Returns out."""
    core = _core()
    if not isinstance(image, core.Image3D) or (out is not None and not isinstance(out, core.Image3D)):
        raise TypeError("pyca.scan: image and out must be Image3D")
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral) or not 0 <= int(axis) <= 2:
        raise ValueError(f"pyca.scan: axis must be 0 (x), 1 (y) or 2 (z), not {axis!r}")
    axis = int(axis)
    key = _key(f, "scan")
    op = _memo.get(key)
    if op is None:
        op = _memo[key] = _scan_op(f)
    if out is None:
        out = core.Image3D(image.grid(), image.memType())
    if image.memType() == core.MEM_DEVICE:
        s = image.size()
        if axis == 0:
            rows = s.y * s.z
            op(out, image, axis, grid=(max(1, min((rows + 7) // 8, 1 << 20)), 1, 1), block=(32, 8, 1))
        else:
            other = s.z if axis == 1 else s.y
            op(out, image, axis, grid=((s.x + 63) // 64, max(1, min((other + 3) // 4, 65535)), 1), block=(64, 4, 1))
    else:
        op(out, image, axis)
    return out


def _scan_op(f):
    ctx, fn, title = _helper(f, (FLOAT, FLOAT), FLOAT, "scan")
    device = (
        f'extern "C" __global__ void pyca_scan_gpu(pyca::ImageView out, pyca::ImageView in, int axis) {{\n'
        f"  const int nx = in.size.x, ny = in.size.y, nz = in.size.z;\n"
        f"  if (axis == 0) {{\n    const long long rows = (long long)ny * nz;\n    const int lane = threadIdx.x;\n"
        f"    for (long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y; r < rows;"
        f" r += (long long)gridDim.x * blockDim.y) {{\n"
        f"      const float* src = in.data + r * nx;\n      float* dst = out.data + r * nx;\n      float carry = 0.0f;\n"
        f"      for (int base = 0; base < nx; base += 32) {{\n        const int q = base + lane;\n"
        f"        float v = q < nx ? src[q] : 0.0f;\n"
        f"        for (int d = 1; d < 32; d <<= 1) {{\n          const float u = __shfl_up_sync(0xffffffffu, v, d);\n"
        f"          if (lane >= d) v = {fn}(u, v, nullptr);\n        }}\n"
        f"        if (base > 0) v = {fn}(carry, v, nullptr);\n        if (q < nx) dst[q] = v;\n"
        f"        carry = __shfl_sync(0xffffffffu, v, 31);\n      }}\n    }}\n    return;\n  }}\n"
        f"  const int len = axis == 1 ? ny : nz, nother = axis == 1 ? nz : ny;\n"
        f"  const long long step = axis == 1 ? (long long)nx : (long long)nx * ny;\n"
        f"  for (int o = blockIdx.y * blockDim.y + threadIdx.y; o < nother; o += gridDim.y * blockDim.y)\n"
        f"    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nx; i += gridDim.x * blockDim.x) {{\n"
        f"      const long long base = (axis == 1 ? (long long)o * nx * ny : (long long)o * nx) + i;\n"
        f"      float acc = in.data[base];\n      out.data[base] = acc;\n      int t = 1;\n"
        f"      for (; t + 8 <= len; t += 8) {{\n        float u[8];\n"
        f"        for (int w = 0; w < 8; ++w) u[w] = in.data[base + (t + w) * step];\n"
        f"        for (int w = 0; w < 8; ++w) {{\n          acc = {fn}(acc, u[w], nullptr);\n"
        f"          out.data[base + (t + w) * step] = acc;\n        }}\n      }}\n"
        f"      for (; t < len; ++t) {{\n        acc = {fn}(acc, in.data[base + t * step], nullptr);\n"
        f"        out.data[base + t * step] = acc;\n      }}\n    }}\n}}\n")
    host = (
        f'extern "C" int pyca_scan_cpu(const pyca::ImageView* ao, const pyca::ImageView* ai, int axis, int* pyca_line) {{\n'
        f"  pyca_k::Err err{{0}};\n  const long long nx = ai->size.x, ny = ai->size.y, nz = ai->size.z;\n"
        f"  float* o = ao->data;\n  const float* x = ai->data;\n"
        f"  if (axis == 0) {{\n    const long long rows = ny * nz;\n"
        f"#pragma omp parallel for schedule(static) num_threads(pyca::detail::threadsFor(std::size_t(rows * nx)))\n"
        f"    for (long long r = 0; r < rows; ++r) {{\n      pyca_k::Err mine{{0}};\n      const long long b = r * nx;\n"
        f"      float acc = x[b];\n"
        f"      o[b] = acc;\n      for (long long t = 1; t < nx; ++t) {{\n        acc = {fn}(acc, x[b + t], &mine);\n"
        f"        o[b + t] = acc;\n      }}\n      pyca_k::merge(&err, mine);\n    }}\n  }} else {{\n"
        f"    const long long len = axis == 1 ? ny : nz, nother = axis == 1 ? nz : ny;\n"
        f"    const long long step = axis == 1 ? nx : nx * ny, W = 1024, nxb = (nx + W - 1) / W;\n"
        f"#pragma omp parallel for schedule(static) num_threads(pyca::detail::threadsFor(std::size_t(nx * ny * nz)))\n"
        f"    for (long long task = 0; task < nother * nxb; ++task) {{\n"
        f"      const long long ob = task / nxb, i0 = (task % nxb) * W, i1 = i0 + W < nx ? i0 + W : nx;\n"
        f"      const long long b = (axis == 1 ? ob * nx * ny : ob * nx);\n"
        f"      for (long long i = i0; i < i1; ++i) o[b + i] = x[b + i];\n"
        f"      for (long long t = 1; t < len; ++t) {{\n"
        f"        float* __restrict__ oc = o + b + t * step;\n        const float* op = oc - step;\n"
        f"        const float* xc = x + b + t * step;\n"
        f"        pyca_k::Err mine{{0}};\n"
        f"        for (long long i = i0; i < i1; ++i) oc[i] = {fn}(op[i], xc[i], &mine);\n"
        f"        pyca_k::merge(&err, mine);\n      }}\n    }}\n  }}\n"
        f"  *pyca_line = err.v & 0xffffff;\n  return err.v >> 24;\n}}\n")
    cs = CompiledSource(assemble(f"scan of {title}", ctx.helpers, device, host), "pyca_scan",
                        {"pyca_scan_cpu": ([ctypes.POINTER(_host.ImageViewC)] * 2 + [ctypes.c_int,
                                           ctypes.POINTER(ctypes.c_int)], ctypes.c_int)})
    gpu = LazyFunction("pyca_scan_gpu", [("pyca::ImageView", "out"), ("pyca::ImageView", "in"), ("int", "axis")],
                        "IIi", lambda: cs)

    def cpu(out, image, axis):
        line = ctypes.c_int(0)
        code = cs.cpu("pyca_scan_cpu")(_host.image_view(out), _host.image_view(image), axis, ctypes.byref(line))
        if code:
            raise_cpu_error(f"scan({title})", "", code, line.value)

    return DispatchedOp(cpu, gpu, name=f"pyca.scan({title})", signature="(out: Image3D, image: Image3D, axis: int)",
                        register=False)
