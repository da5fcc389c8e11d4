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
_cuda_libs.nvrtc_identity(ca.cuda.get_cache_dir(), ca.core)  # cache key
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
# Code-generation lab: the generated source with one choice changed (an edit of the source, or the
# opt-in defines of pyca.kernels.voxel.device_options), compiled and launched directly.
TILES, SPLIT = "-DPYCA_K_TILES", "-DPYCA_K_SPLIT64"
VARIANTS = {
    "64-bit indices, plain loads, checked stores": [("_body<int>(", "_body<long long>("), (", true>(", ">("),
                                                    ("wrown<", "wr<"), ("wrfown<", "wrf<")],
    "clamped reads only (no interior copies of loops)": [("#if PYCA_K_INTERIOR\n", "#if 0\n")],
    "plain loads (no __ldg)": [(", true>(", ">(")],
    "loops unrolled as the compiler chooses (no unroll 4 cap)": [("#define PYCA_K_UNROLL _Pragma(\"unroll 4\")",
                                                                  "#define PYCA_K_UNROLL")],
}


def _variant(kernel, edits=(), add=(), drop=(), cap=True):
    """The kernel's 32-bit entry compiled from its source with `edits`, with its opt-in defines plus
    `add` minus `drop`, and (one kernel with both index paths) the register cap, as shipped."""
    from pyca import cuda
    from pyca.kernels.voxel import register_cap

    c = kernel._translate()
    src = c.source
    for a, b in edits:
        src = src.replace(a, b)
    opts = [o for o in c.gpu_options if o not in drop] + [o for o in add if o not in c.gpu_options]
    if cap and SPLIT not in opts:
        rc = register_cap(src, f"lab_{kernel.name}", cuda.default_arch(), opts)
        opts += [f"--maxrregcount={rc}"] if rc else []
    return cuda.SourceModule(src, opts, name=f"lab_{kernel.name}.cu").get_function(f"pyca_k_{kernel.name}_gpu")


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


# ca.line's tiles (PYCA_KERNEL_TILES; pyca/kernels/kernel_rt.h, lineTiles) with one choice changed.
_TILE = "TX = AX == 0 ? 128 : 32, TY = AX == 0 ? 8 : (AX == 1 ? 64 : 1), TZ = AX == 2 ? 64 : 1"
_SMEM = "#define PYCA_K_LINE_SMEM (32 * (64 + 2 * PYCA_K_LINE_RMAX))"
LINE_VARIANTS = {
    "radius <= 16 staged (12 KiB of shared memory)": [("#define PYCA_K_LINE_RMAX 32", "#define PYCA_K_LINE_RMAX 16")],
    "tiles of 32 along y/z": [(_TILE, _TILE.replace("64", "32"))],
    "tiles of 128 along y/z": [(_TILE, _TILE.replace("64", "128")), (_SMEM, _SMEM.replace("(64 + ", "(128 + "))],
    "tiles of 256 x 4 along x": [(_TILE, _TILE.replace("128 : 32", "256 : 32").replace("AX == 0 ? 8", "AX == 0 ? 4"))],
    "tiles of 64 x 16 along x": [(_TILE, _TILE.replace("128 : 32", "64 : 32").replace("AX == 0 ? 8", "AX == 0 ? 16"))],
}


def line_rows(table, n, out, im, tmp, wim, r, t_gauss, t_builtin=None, hf=None):
    """The 3-D Gaussian through ca.line with and without its tiles (whatever PYCA_KERNEL_TILES says for
    the shipped rows), beside the taps read from the image; tile shapes, launch shapes, the 64-bit
    path in a kernel of its own (PYCA_KERNEL_SPLIT64)."""
    from pyca.kernels.voxel import LINE_VOXELS_PER_THREAD

    from _kernels_bench import apply_h, gauss_pass, gauss_pass_taps

    size = f"{n}^3"
    cdiv = lambda a, b: (a + b - 1) // b  # noqa: E731
    lin = (cdiv(cdiv(n, 32) * cdiv(n, 4) * cdiv(n, 2), LINE_VOXELS_PER_THREAD), 1, 1)  # the tiled kernels' grid

    def g3(f, **kw):
        def run():
            f(out, im, wim, r, 0, **kw)
            f(tmp, out, wim, r, 1, **kw)
            f(out, tmp, wim, r, 2, **kw)
        return timeit_median(run, sync=pyca_sync, repeat=21)

    tiled, plain = _variant(gauss_pass, add=[TILES]), _variant(gauss_pass, drop=[TILES])
    t_tiled, t_plain = g3(tiled, grid=lin), g3(plain)
    table.add("lab 3-D Gaussian, ca.line: tiles in shared memory (PYCA_KERNEL_TILES=1)", size, t_tiled,
              "GaussianFilter.filter", t_builtin, f"shipped in this run: {t_gauss:.3f} ms")
    table.add("lab 3-D Gaussian, ca.line: tiles", size, t_tiled, "no tiles (reads of the image)", t_plain)
    table.add("lab 3-D Gaussian: taps read from the image (no ca.line)", size, g3(gauss_pass_taps), "ca.line, tiles",
              t_tiled)
    for axis in range(3):
        tl = timeit_median(lambda: tiled(out, im, wim, r, axis, grid=lin), sync=pyca_sync, repeat=21)
        tt = timeit_median(lambda: gauss_pass_taps(out, im, wim, r, axis), sync=pyca_sync, repeat=21)
        note = f"{tl / (t_builtin / 3):.2f}x GaussianFilter.filter / 3" if t_builtin else ""
        table.add(f"lab Gaussian pass along {'xyz'[axis]}: ca.line, tiles", size, tl, "taps read from the image", tt,
                  note)
    # A radius beyond the tiles' 32: the tiled launch (a block per 2048 voxels) runs the per-voxel loop,
    # which must keep every thread of it busy (PYCA_K_FOR_EACH_VOXEL): about the time without the tiles.
    import numpy as np

    import pyca as ca

    w33 = ca.Image3D.from_array(np.full((34, 1, 1), 1.0 / 67.0, np.float32)).to(ca.MEM_DEVICE)
    t33 = timeit_median(lambda: tiled(out, im, w33, 33, 2, grid=lin), sync=pyca_sync, repeat=11)
    table.add("lab Gaussian pass along z, r=33 (no tile): tiled launch, per-voxel loop", size, t33,
              "no tiles (a block per 256 voxels)",
              timeit_median(lambda: plain(out, im, w33, 33, 2), sync=pyca_sync, repeat=11))
    grid3 = _variant(gauss_pass, [("PYCA_K_FOR_EACH_VOXEL(int, ", "PYCA_FOR_EACH_VOXEL(")], add=[TILES])
    table.add("lab Gaussian pass along z, r=33, tiled launch: a 3-D grid-stride loop (PYCA_FOR_EACH_VOXEL)", size,
              timeit_median(lambda: grid3(out, im, w33, 33, 2, grid=lin), sync=pyca_sync, repeat=3),
              "the linear loop (shipped)", t33)
    for name, edits in LINE_VARIANTS.items():
        table.add(f"lab 3-D Gaussian, ca.line tiles: {name}", size,
                  g3(_variant(gauss_pass, edits, add=[TILES]), grid=lin), "tiles as shipped", t_tiled)
    for block in ((32, 4, 1), (32, 16, 1), (32, 32, 1)):
        grid = (cdiv(lin[0] * 256, block[0] * block[1] * block[2]), 1, 1)
        table.add(f"lab 3-D Gaussian, ca.line tiles: block {block}", size, g3(tiled, block=block, grid=grid),
                  "256 threads", t_tiled)
    tiles = [cdiv(n, 128) * cdiv(n, 8) * n, cdiv(n, 32) * cdiv(n, 64) * n, cdiv(n, 32) * cdiv(n, 64) * n]

    def exact():
        tiled(out, im, wim, r, 0, grid=(tiles[0], 1, 1))
        tiled(tmp, out, wim, r, 1, grid=(tiles[1], 1, 1))
        tiled(out, tmp, wim, r, 2, grid=(tiles[2], 1, 1))

    table.add("lab 3-D Gaussian, ca.line tiles: grid of exactly the tiles", size,
              timeit_median(exact, sync=pyca_sync, repeat=21), "a block per 2048 voxels", t_tiled)
    table.add("lab 3-D Gaussian, ca.line tiles: a block per 256 voxels (most find no tile)", size, g3(tiled),
              "a block per 2048 voxels", t_tiled)
    table.add("lab 3-D Gaussian, ca.line tiles: 32-bit kernel alone (PYCA_KERNEL_SPLIT64=1)", size,
              g3(_variant(gauss_pass, add=[TILES, SPLIT]), grid=lin), "one kernel, both index paths", t_tiled)
    if hf is not None:  # ApplyH (no loops)
        fa1, fa2 = _variant(apply_h, drop=[SPLIT]), _variant(apply_h, add=[SPLIT])
        t1 = timeit_median(lambda: fa1(out, im, hf), sync=pyca_sync, repeat=21)
        t2 = timeit_median(lambda: fa2(out, im, hf), sync=pyca_sync, repeat=21)
        table.add("lab ApplyH: 32-bit kernel alone (PYCA_KERNEL_SPLIT64=1)", size, t2,
                  "one kernel, both index paths, register cap", t1)


def geodesic_rows(table, n):
    """The 64-bit path in a kernel of its own (PYCA_KERNEL_SPLIT64) against a branch in one kernel
    with and without the register cap, on the fused geodesic passes, the largest @ca.kernel bodies in
    pyca (pyca/registration/_geodesic_kernels.py), on random arrays."""
    import numpy as np

    import pyca as ca
    from pyca.registration import _geodesic_kernels as gk

    g, D, size = ca.GridInfo((n, n, n)), ca.MEM_DEVICE, f"{n}^3"
    rng = np.random.default_rng(1)

    def arg(kind):
        if kind == "Field3D":
            a = rng.standard_normal((n, n, n, 3), dtype=np.float32)
            return ca.Field3D.from_array(np.asfortranarray(a), g).to(D)
        if kind == "Image3D":
            return ca.Image3D.from_array(np.asfortranarray(rng.random((n, n, n), dtype=np.float32)), g).to(D)
        return {"float": 0.5, "int": 1, "bool": True}[kind]

    for name in gk.__all__:
        k = getattr(gk, name)
        args = [arg(kind) for kind in k._kinds.values()]
        t = {}
        for label, kw in (("capped", {}), ("uncapped", {"cap": False}), ("split", {"add": [SPLIT]})):
            f = _variant(k, drop=[SPLIT], **kw) if label != "split" else _variant(k, **kw)
            t[label] = timeit_median(lambda: f(*args), sync=pyca_sync, repeat=11)
        table.add(f"lab fused geodesic {name}: 32-bit kernel alone (PYCA_KERNEL_SPLIT64=1)", size, t["split"],
                  "one kernel, register cap (default)", t["capped"])
        table.add(f"lab fused geodesic {name}: one kernel without the register cap", size, t["uncapped"],
                  "one kernel, register cap (default)", t["capped"])
