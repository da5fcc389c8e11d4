"""GPU parts of benchmarks/bench_kernels.py: where the time of a cached first call in a new process goes
(pyca and CuPy's RawKernel, each in fresh processes), and the code-generation lab (the same generated
kernel with one choice undone, and launch shapes), so that one short GPU run answers which choice
matters."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

from _harness import pyca_env, pyca_sync, timeit_median

HERE = os.path.dirname(os.path.abspath(__file__))

# A new process: the phases of the first call of a cached @ca.kernel on the GPU, each timed alone.
PYCA_CHILD = r"""
import sys, time
T = [time.perf_counter()]
import numpy as np
T.append(time.perf_counter())
import pyca as ca
T.append(time.perf_counter())
sys.path.insert(0, {here!r})
g = ca.GridInfo((16, 16, 16))
im, out, h = ca.Image3D(g), ca.Image3D(g), ca.Field3D(g)
ca.SetToIdentity(h)
T.append(time.perf_counter())
d = ca.Image3D(ca.GridInfo((1, 1, 1)), ca.MEM_DEVICE)  # creates the CUDA context
ca.synchronize()
T.append(time.perf_counter())
from _kernels_bench import apply_h
T.append(time.perf_counter())
c = apply_h._translate()  # Python AST -> C++
T.append(time.perf_counter())
from pyca import _cuda_libs
_cuda_libs.nvrtc_identity(ca.cuda.get_cache_dir(), ca.core.__file__, ca.core._cuda_nvrtc_version)  # cache key
T.append(time.perf_counter())
c.module.image  # cache lookup (header digest, sha256 of the source, read)
T.append(time.perf_counter())
apply_h.gpu.handle  # load the module into the context
T.append(time.perf_counter())
im, out, h = im.to(ca.MEM_DEVICE), out.to(ca.MEM_DEVICE), h.to(ca.MEM_DEVICE)
T.append(time.perf_counter())
apply_h(out, im, h)
ca.synchronize()
T.append(time.perf_counter())
print(" ".join(f"{{b - a:.5f}}" for a, b in zip(T, T[1:])), c.module.cache_hit, "nvrtc-loaded" if _cuda_libs.loaded_nvrtc() else "nvrtc-not-loaded")
"""
PYCA_PHASES = ["import numpy", "import pyca", "host data", "CUDA context", "import the kernel's module",
               "translate", "libnvrtc's file (cache key; recorded: not loaded)", "cache lookup", "module load",
               "copies to the device", "launch + sync"]

# The same in CuPy: a RawKernel (its own disk cache) doing SAXPY.
CUPY_CHILD = r"""
import time
T = [time.perf_counter()]
import numpy as np
T.append(time.perf_counter())
import cupy as cp
T.append(time.perf_counter())
x = cp.empty(1)  # creates the CUDA context
cp.cuda.Device().synchronize()
T.append(time.perf_counter())
k = cp.RawKernel(r'''extern "C" __global__ void saxpy(float* y, const float* x, float a, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }}''', "saxpy")
k.compile()  # cache lookup and module load
T.append(time.perf_counter())
n = 4096
y, x = cp.asarray(np.ones(n, np.float32)), cp.asarray(np.ones(n, np.float32))
T.append(time.perf_counter())
k(((n + 255) // 256,), (256,), (y, x, np.float32(2), np.int32(n)))
cp.cuda.Device().synchronize()
T.append(time.perf_counter())
print(" ".join(f"{{b - a:.5f}}" for a, b in zip(T, T[1:])))
"""
CUPY_PHASES = ["import numpy", "import cupy", "CUDA context", "RawKernel compile (cache) + load", "copies to the device",
               "launch + sync"]


def _children(script, env, cwd, runs=2):
    """Phase times (s) of `runs` new processes after a first one that fills the caches: the median per phase."""
    out = []
    for r in range(runs + 1):
        p = subprocess.run([sys.executable, "-c", script], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
        if p.returncode:
            raise RuntimeError(p.stderr[-1500:])
        if r:
            out.append([float(v) for v in p.stdout.split() if v[0].isdigit()])
    return [statistics.median(col) for col in zip(*out)]


def startup_rows(table):
    """Cached first call in a new process on the GPU, phase by phase, beside CuPy's RawKernel."""
    with tempfile.TemporaryDirectory() as cache:
        env = pyca_env(PYCA_KERNEL_CACHE_DIR=cache, CUPY_CACHE_DIR=os.path.join(cache, "cupy"))
        try:
            ph = _children(PYCA_CHILD.format(here=HERE), env, cache)
        except Exception as e:  # noqa: BLE001
            table.skip("cached call in a new process (GPU), phases", "16^3", "-", f"failed: {e}")
            return
        for name, t in zip(PYCA_PHASES, ph):
            table.add(f"new process, pyca: {name}", "16^3", t, "-", None)
        first = sum(ph[3:])  # from the CUDA context to the result
        table.add("new process, pyca: CUDA context .. result", "16^3", first, "target", 0.050,
                  f"without the context: {1e3 * sum(ph[4:]):.1f} ms")
        try:
            cq = _children(CUPY_CHILD.format(), env, cache)
        except Exception as e:  # noqa: BLE001
            table.skip("new process, cupy RawKernel", "-", "-", f"cupy failed: {str(e)[-200:]}")
            return
        for name, t in zip(CUPY_PHASES, cq):
            table.add(f"new process, cupy: {name}", "4096", t, "-", None)
        table.add("new process: CUDA context .. result", "-", first, "cupy RawKernel (cached), same span",
                  sum(cq[2:]), f"without the context: pyca {1e3 * sum(ph[4:]):.1f} ms, cupy {1e3 * sum(cq[3:]):.1f} ms")


# ------------------------------------------------------------------------------------------------
# Code-generation lab: the shipped source with one choice undone, compiled and launched directly.
VARIANTS = {
    "64-bit indices, plain loads, checked stores": [("_body<int>(", "_body<long long>("), (", true>(", ">("),
                                                    ("wrown<", "wr<"), ("wrfown<", "wrf<")],
    "clamped reads only (no interior copies of loops)": [("#if PYCA_K_INTERIOR\n", "#if 0\n")],
    "plain loads (no __ldg)": [(", true>(", ">(")],
    "the 64-bit path in the same kernel (a branch on the sizes)": [lambda src: with_wide_branch(src)],
    "loops unrolled as the compiler chooses (no unroll 4 cap)": [("#define PYCA_K_UNROLL _Pragma(\"unroll 4\")",
                                                                  "#define PYCA_K_UNROLL")],
}


def with_wide_branch(src: str) -> str:
    """The 32-bit kernel of a generated source with the 64-bit path inside it again (one kernel that
    branches on the arrays' sizes, the compiler giving it the registers of the hungrier path)."""
    import re

    m = re.search(r"  if \(!\((.*)\)\) return;\n", src)
    loop = re.search(r"  (PYCA_FOR_EACH_VOXEL\(.*_body)<int>(\(.*\n)", src[m.end():])
    both = f"  if ({m.group(1)}) {{\n    {loop.group(1)}<int>{loop.group(2)}  }} else {{\n    " \
           f"{loop.group(1)}<long long>{loop.group(2)}  }}\n"
    a = m.end() + loop.start()
    return src[:m.start()] + src[m.end():a] + both + src[a + len(loop.group(0)):]


def _variant(kernel, edits):
    from pyca import cuda

    src = kernel.source
    for e in edits:
        src = e(src) if callable(e) else src.replace(*e)
    return cuda.SourceModule(src, name=f"lab_{kernel.name}.cu").get_function(f"pyca_k_{kernel.name}_gpu")


def lab_rows(table, n, out, im, hf, tmp, wim, r, t_apply, t_gauss, t_builtin):
    """Each variant beside the shipped kernel (ratio: variant / shipped; > 1: the shipped choice is faster)."""
    from _kernels_bench import apply_h, gauss_pass, gauss_pass_fixed

    size = f"{n}^3"
    for axis in range(3):
        tp = timeit_median(lambda: gauss_pass(out, im, wim, r, axis), sync=pyca_sync, repeat=21)
        table.add(f"lab Gaussian pass along {'xyz'[axis]}: @ca.kernel", size, tp, "GaussianFilter.filter / 3",
                  t_builtin / 3)
    gr = gauss_pass_fixed(r)

    def g3r():
        gr(out, im, wim, 0)
        gr(tmp, out, wim, 1)
        gr(out, tmp, wim, 2)

    table.add("lab 3-D Gaussian: radius a closure constant (a loop of known length)", size,
              timeit_median(g3r, sync=pyca_sync, repeat=21), "shipped @ca.kernel (radius a parameter)", t_gauss)
    for name, edits in VARIANTS.items():
        fa, fg = _variant(apply_h, edits), _variant(gauss_pass, edits)
        ta = timeit_median(lambda: fa(out, im, hf), sync=pyca_sync, repeat=21)
        table.add(f"lab ApplyH: {name}", size, ta, "shipped @ca.kernel", t_apply)

        def g3():
            fg(out, im, wim, r, 0)
            fg(tmp, out, wim, r, 1)
            fg(out, tmp, wim, r, 2)

        tg = timeit_median(g3, sync=pyca_sync, repeat=21)
        table.add(f"lab 3-D Gaussian: {name}", size, tg, "shipped @ca.kernel", t_gauss)
    line_rows(table, n, out, im, tmp, wim, r, t_gauss, t_builtin, hf)


# ca.line's tiles (pyca/kernels/kernel_rt.h, lineTiles) with one choice changed.
_TILE = "TX = AX == 0 ? 128 : 32, TY = AX == 0 ? 8 : (AX == 1 ? 64 : 1), TZ = AX == 2 ? 64 : 1"
_SMEM = "#define PYCA_K_LINE_SMEM (32 * (64 + 2 * PYCA_K_LINE_RMAX))"
LINE_VARIANTS = {
    "no tile (ca.line read from the image)": [("pyca_ax >= 0 && pyca_ax <= 2", "false && pyca_ax <= 2")],
    "radius <= 16 staged (12 KiB of shared memory)": [("#define PYCA_K_LINE_RMAX 32", "#define PYCA_K_LINE_RMAX 16")],
    "tiles of 32 along y/z": [(_TILE, _TILE.replace("64", "32"))],
    "tiles of 128 along y/z": [(_TILE, _TILE.replace("64", "128")),
                               (_SMEM, _SMEM.replace("(64 + ", "(128 + "))],
    "tiles of 256 x 4 along x": [(_TILE, _TILE.replace("128 : 32", "256 : 32").replace("AX == 0 ? 8", "AX == 0 ? 4"))],
    "tiles of 64 x 16 along x": [(_TILE, _TILE.replace("128 : 32", "64 : 32").replace("AX == 0 ? 8", "AX == 0 ? 16"))],
    "the 64-bit path in the same kernel (a branch on the sizes)": [with_wide_branch],
}


def line_rows(table, n, out, im, tmp, wim, r, t_gauss, t_builtin=None, hf=None):
    """The 3-D Gaussian through ca.line (shipped) beside the taps read from the image, tile shapes,
    launch shapes, and a grid of exactly the tiles (no blocks that find no tile)."""
    from _kernels_bench import gauss_pass, gauss_pass_taps

    size = f"{n}^3"

    def g3(f, **kw):
        def run():
            f(out, im, wim, r, 0, **kw)
            f(tmp, out, wim, r, 1, **kw)
            f(out, tmp, wim, r, 2, **kw)
        return timeit_median(run, sync=pyca_sync, repeat=21)

    table.add("lab 3-D Gaussian: taps read from the image (no ca.line)", size, g3(gauss_pass_taps),
              "shipped @ca.kernel (ca.line)", t_gauss)
    for axis in range(3):
        tl = timeit_median(lambda: gauss_pass(out, im, wim, r, axis), sync=pyca_sync, repeat=21)
        tt = timeit_median(lambda: gauss_pass_taps(out, im, wim, r, axis), sync=pyca_sync, repeat=21)
        note = f"{tl / (t_builtin / 3):.2f}x GaussianFilter.filter / 3" if t_builtin else ""
        table.add(f"lab Gaussian pass along {'xyz'[axis]}: ca.line", size, tl, "taps read from the image", tt, note)
    base = _variant(gauss_pass, [])
    t_base = g3(base)
    table.add("lab 3-D Gaussian: shipped source, no register cap", size, t_base, "shipped @ca.kernel", t_gauss)
    for name, edits in LINE_VARIANTS.items():
        table.add(f"lab 3-D Gaussian, ca.line: {name}", size, g3(_variant(gauss_pass, edits)),
                  "shipped source, no register cap", t_base)
    for block in ((32, 4, 1), (32, 16, 1), (32, 32, 1)):
        table.add(f"lab 3-D Gaussian, ca.line: block {block}", size, g3(gauss_pass, block=block),
                  "shipped (256 threads)", t_gauss)
    if hf is not None:  # ApplyH (no loops): the 64-bit path in its own kernel or behind a branch
        from _kernels_bench import apply_h

        t_a = timeit_median(lambda: apply_h(out, im, hf), sync=pyca_sync, repeat=21)
        fa = _variant(apply_h, [with_wide_branch])
        table.add("lab ApplyH: the 64-bit path in the same kernel (a branch on the sizes)", size,
                  timeit_median(lambda: fa(out, im, hf), sync=pyca_sync, repeat=21), "shipped (two kernels)", t_a)
    cdiv = lambda a, b: (a + b - 1) // b  # noqa: E731
    tiles = [cdiv(n, 128) * cdiv(n, 8) * n, cdiv(n, 32) * cdiv(n, 64) * n, cdiv(n, 32) * cdiv(n, 64) * n]

    def exact():
        gauss_pass(out, im, wim, r, 0, grid=(tiles[0], 1, 1))
        gauss_pass(tmp, out, wim, r, 1, grid=(tiles[1], 1, 1))
        gauss_pass(out, tmp, wim, r, 2, grid=(tiles[2], 1, 1))

    table.add("lab 3-D Gaussian, ca.line: grid of exactly the tiles", size,
              timeit_median(exact, sync=pyca_sync, repeat=21), "shipped (a block per 2048 voxels)", t_gauss)
    one = (cdiv(n, 32), cdiv(n, 4), cdiv(n, 2))  # the default launch of kernels without a ca.line

    def per_voxel():
        gauss_pass(out, im, wim, r, 0, grid=one)
        gauss_pass(tmp, out, wim, r, 1, grid=one)
        gauss_pass(out, tmp, wim, r, 2, grid=one)

    table.add("lab 3-D Gaussian, ca.line: a block per 256 voxels (most find no tile)", size,
              timeit_median(per_voxel, sync=pyca_sync, repeat=21), "shipped (a block per 2048 voxels)", t_gauss)


def geodesic_rows(table, n):
    """The 64-bit path in its own kernel (shipped) against inside the 32-bit one, on the fused geodesic
    passes, the largest @ca.kernel bodies in pyca (pyca/registration/_geodesic_kernels.py), on random
    fields."""
    import numpy as np

    import pyca as ca
    from pyca import cuda
    from pyca.registration import _geodesic_kernels as gk

    g, D, size = ca.GridInfo((n, n, n)), ca.MEM_DEVICE, f"{n}^3"
    rng = np.random.default_rng(1)

    def fld(scale=1.0):
        a = rng.standard_normal((n, n, n, 3), dtype=np.float32) * np.float32(scale)
        return ca.Field3D.from_array(np.asfortranarray(a), g).to(D)

    def img():
        return ca.Image3D.from_array(np.asfortranarray(rng.random((n, n, n), dtype=np.float32)), g).to(D)

    h = ca.Field3D(g)
    ca.SetToIdentity(h)
    h = h.to(D)
    cases = {"force": (gk.force, (fld(), img(), img(), fld(), fld(), 1.0, 1.0, 1.0, True)),
             "step_forward": (gk.step_forward, (fld(), h, fld(0.5), fld(0.5), 0.5, 0.5, 0.1, 1.0, 1.0, 1.0, False))}
    for name, (k, args) in cases.items():
        t_ship = timeit_median(lambda: k(*args), sync=pyca_sync, repeat=11)
        f_both = cuda.SourceModule(with_wide_branch(k.source), name=f"lab_{k.name}_both.cu").get_function(
            f"pyca_k_{k.name}_gpu")
        t_both = timeit_median(lambda: f_both(*args), sync=pyca_sync, repeat=11)
        table.add(f"lab fused geodesic {name}: 32-bit kernel alone (shipped)", size, t_ship,
                  "64-bit path in the same kernel", t_both)
