"""Benchmark of pyca.kernels (issue 39): operations written once in Python with @ca.kernel against
pyca's built-in operations and against the same kernels written in Numba and Warp; ca.reduce and
ca.scan against NumPy (CPU) and CuPy (GPU); first-call compile time and a cached call in a new
process. Medians, side by side in one process (pyca/peer < 1: the @ca.kernel version is faster).

    python benchmarks/bench_kernels.py [--gpu | --gpu-only [--lab]] [--sizes 128,256]

Kernels (benchmarks/_kernels_bench.py):
  apply_h    trilinear ApplyH with BACKGROUND_STRATEGY_CLAMP (pyca.ApplyH's semantics) - vs ca.ApplyH
  gauss_pass one 1-D pass of a separable Gaussian along an axis, half-kernel weights in an image; three passes
             make the 3-D Gaussian - vs GaussianFilter.filter (the same three passes, built in)
Peers: numba.njit(parallel=True) / numba.cuda.jit and warp.kernel (CPU and CUDA devices) with the
same arithmetic on the same float32 data (x fastest), when installed.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import Table, machine_line, optional_import, pyca_env, pyca_sync, timeit_median  # noqa: E402

import pyca as ca  # noqa: E402
from _kernels_bench import (SIGMA, apply_h, gauss3, gauss_pass, gauss_weights, numba_cpu, numba_gpu,  # noqa: E402
                            warp_kernels)
from _kernels_gpu import geodesic_rows, lab_rows, line_rows, startup_rows  # noqa: E402


def data(n, rng):
    g = ca.GridInfo((n, n, n))
    a = np.asfortranarray(rng.random((n, n, n), dtype=np.float32))
    # a smooth displacement of a few voxels, partly outside the grid (the clamp matters)
    x = np.arange(n, dtype=np.float32)
    X, Y, Z = np.meshgrid(x, x, x, indexing="ij")
    h = np.stack([X + 3.3 * np.sin(Y / 9.0), Y + 2.7 * np.cos(Z / 7.0), Z - 1.9 * np.sin(X / 11.0)], axis=-1)
    return g, a, np.asfortranarray(h.astype(np.float32))


def run_cpu(table: Table, n: int):
    rng = np.random.default_rng(0)
    g, a, h = data(n, rng)
    size = f"{n}^3"
    im = ca.Image3D.from_array(a, g)
    hf = ca.Field3D.from_array(h, g)
    out, out2, tmp = (ca.Image3D(g) for _ in range(3))
    # ApplyH
    apply_h(out, im, hf)
    ca.ApplyH(out2, im, hf, ca.BACKGROUND_STRATEGY_CLAMP)
    err = float(np.abs(out.numpy() - out2.numpy()).max())
    t_k = timeit_median(lambda: apply_h(out, im, hf), repeat=9)
    t_b = timeit_median(lambda: ca.ApplyH(out2, im, hf, ca.BACKGROUND_STRATEGY_CLAMP), repeat=9)
    table.add("ApplyH trilinear CLAMP: @ca.kernel", size, t_k, "ca.ApplyH (built-in)", t_b, f"max |diff| {err:.1e}")
    peers_apply(table, size, t_k, a, h)
    # Gaussian
    w, r = gauss_weights(SIGMA)
    wim = ca.Image3D.from_array(np.asfortranarray(w.reshape(-1, 1, 1)))
    filt = ca.GaussianFilter()
    filt.updateParams(g.size(), (SIGMA,) * 3, (r,) * 3)
    gauss3(out, im, tmp, wim, r)
    filt.filter(out2, im, tmp)
    err = float(np.abs(out.numpy() - out2.numpy()).max())
    t_k = timeit_median(lambda: gauss3(out, im, tmp, wim, r), repeat=7)
    t_b = timeit_median(lambda: filt.filter(out2, im, tmp), repeat=7)
    table.add(f"3-D Gaussian sigma={SIGMA} r={r} (3 passes): @ca.kernel", size, t_k, "GaussianFilter.filter", t_b,
              f"max |diff| {err:.1e}")
    t_1 = timeit_median(lambda: gauss_pass(out, im, wim, r, 2), repeat=7)
    peers_gauss(table, size, t_1, a, w, r)
    # reduce / scan
    t_r = timeit_median(lambda: ca.reduce(lambda x, y: x + y, im, 0.0), repeat=9)
    t_n = timeit_median(lambda: a.sum(), repeat=9)
    table.add("ca.reduce(+)", size, t_r, "numpy sum (float32, pairwise)", t_n)
    t_n64 = timeit_median(lambda: a.sum(dtype=np.float64), repeat=9)
    table.add("ca.reduce(+)", size, t_r, "numpy sum(dtype=float64)", t_n64)
    for axis in (0, 2):
        t_s = timeit_median(lambda: ca.scan(lambda x, y: x + y, im, axis, out=out), repeat=9)
        o = np.empty_like(a)
        t_c = timeit_median(lambda: np.cumsum(a, axis=axis, out=o), repeat=9)
        table.add(f"ca.scan(+, axis={axis})", size, t_s, f"numpy cumsum(axis={axis}, out=)", t_c)


def peers_apply(table, size, t_k, a, h, device="cpu"):
    nb = numba_cpu()
    if nb is not None:
        out = np.empty_like(a)
        nb["apply_h"](out, a, h)
        table.add("ApplyH: @ca.kernel", size, t_k, "numba njit(parallel)", timeit_median(lambda: nb["apply_h"](out, a, h), repeat=9))
    wk = warp_kernels()
    if wk is not None:
        fn = wk["apply_h_runner"](a, h, device)
        table.add("ApplyH: @ca.kernel", size, t_k, f"warp ({device})", timeit_median(fn, repeat=9))


def peers_gauss(table, size, t_1, a, w, r, device="cpu"):
    nb = numba_cpu()
    if nb is not None:
        out = np.empty_like(a)
        nb["gauss_z"](out, a, w, r)
        table.add("Gaussian pass along z: @ca.kernel", size, t_1, "numba njit(parallel)",
                  timeit_median(lambda: nb["gauss_z"](out, a, w, r), repeat=7))
    wk = warp_kernels()
    if wk is not None:
        fn = wk["gauss_runner"](a, w, r, device)
        table.add("Gaussian pass along z: @ca.kernel", size, t_1, f"warp ({device})", timeit_median(fn, repeat=7))


def run_gpu(table: Table, n: int, lab: bool = False, line_lab: bool = False):
    rng = np.random.default_rng(0)
    g, a, h = data(n, rng)
    size = f"{n}^3"
    D = ca.MEM_DEVICE
    im = ca.Image3D.from_array(a, g).to(D)
    hf = ca.Field3D.from_array(h, g).to(D)
    out, out2, tmp = (ca.Image3D(g, D) for _ in range(3))
    apply_h(out, im, hf)
    ca.ApplyH(out2, im, hf, ca.BACKGROUND_STRATEGY_CLAMP)
    err = float(np.abs(out.numpy() - out2.numpy()).max())
    t_k = timeit_median(lambda: apply_h(out, im, hf), sync=pyca_sync, repeat=21)
    t_b = timeit_median(lambda: ca.ApplyH(out2, im, hf, ca.BACKGROUND_STRATEGY_CLAMP), sync=pyca_sync, repeat=21)
    table.add("ApplyH trilinear CLAMP: @ca.kernel (GPU)", size, t_k, "ca.ApplyH (built-in)", t_b, f"max |diff| {err:.1e}")
    w, r = gauss_weights(SIGMA)
    wim = ca.Image3D.from_array(np.asfortranarray(w.reshape(-1, 1, 1))).to(D)
    filt = ca.GaussianFilter()
    filt.updateParams(g.size(), (SIGMA,) * 3, (r,) * 3)
    gauss3(out, im, tmp, wim, r)
    filt.filter(out2, im, tmp)
    err = float(np.abs(out.numpy() - out2.numpy()).max())
    t_k3 = timeit_median(lambda: gauss3(out, im, tmp, wim, r), sync=pyca_sync, repeat=21)
    t_b = timeit_median(lambda: filt.filter(out2, im, tmp), sync=pyca_sync, repeat=21)
    table.add(f"3-D Gaussian sigma={SIGMA} r={r} (3 passes): @ca.kernel (GPU)", size, t_k3, "GaussianFilter.filter",
              t_b, f"max |diff| {err:.1e}")
    if lab or line_lab:
        labs = [(lab_rows, (out, im, hf, tmp, wim, r, t_k, t_k3, t_b))] + ([(geodesic_rows, ())] if n >= 256 else [])
        if not lab:
            labs = [(line_rows, (out, im, tmp, wim, r, t_k3, t_b, hf))]
        for rows, extra in labs:
            try:
                rows(table, n, *extra)
            except Exception as e:  # noqa: BLE001 - the lab is optional
                table.skip("lab", size, "-", f"failed: {type(e).__name__}: {e}")
    t_1 = timeit_median(lambda: gauss_pass(out, im, wim, r, 2), sync=pyca_sync, repeat=21)
    nbg = numba_gpu()
    if nbg is not None:
        from numba import cuda

        try:  # a peer that cannot compile here (e.g. numba-cuda against a newer NumPy) is a row, not the end
            da, dh, do, dw = cuda.to_device(a), cuda.to_device(h), cuda.device_array_like(a), cuda.to_device(w)
            fa = nbg["apply_h_launcher"](do, da, dh)
            fg = nbg["gauss_z_launcher"](do, da, dw, r)
            t_fa = timeit_median(fa, sync=cuda.synchronize, repeat=21)
            t_fg = timeit_median(fg, sync=cuda.synchronize, repeat=21)
        except Exception as e:  # noqa: BLE001
            table.skip("ApplyH / Gaussian pass (GPU)", size, "numba", f"numba cuda.jit failed: {type(e).__name__}: {e}")
        else:
            table.add("ApplyH: @ca.kernel (GPU)", size, t_k, "numba cuda.jit", t_fa)
            table.add("Gaussian pass along z: @ca.kernel (GPU)", size, t_1, "numba cuda.jit", t_fg)
    else:
        table.skip("ApplyH / Gaussian pass (GPU)", size, "numba", "numba not installed (carry its wheels in .whl/)")
    if warp_kernels() is not None:
        peers_apply(table, size, t_k, a, h, "cuda")
        peers_gauss(table, size, t_1, a, w, r, "cuda")
    else:
        table.skip("ApplyH / Gaussian pass (GPU)", size, "warp", "warp-lang not installed")
    cp = optional_import("cupy")
    t_r = timeit_median(lambda: ca.reduce(lambda x, y: x + y, im, 0.0), sync=pyca_sync, repeat=21)
    if cp is not None:
        ac = cp.asarray(a)
        sync = cp.cuda.Device().synchronize
        t_c = timeit_median(lambda: float(ac.sum()), sync=sync, repeat=21)
        table.add("ca.reduce(+) (GPU, returns a float)", size, t_r, "float(cupy.sum)", t_c)
        for axis in (0, 2):
            t_s = timeit_median(lambda: ca.scan(lambda x, y: x + y, im, axis, out=out), sync=pyca_sync, repeat=21)
            oc = cp.empty_like(ac)
            t_c = timeit_median(lambda: cp.cumsum(ac, axis=axis, out=oc), sync=sync, repeat=21)
            table.add(f"ca.scan(+, axis={axis}) (GPU)", size, t_s, f"cupy.cumsum(axis={axis})", t_c)
    else:
        table.add("ca.reduce(+) (GPU)", size, t_r, "cupy (not installed)", None)


COMPILE_SCRIPT = r"""
import sys, time
sys.path.insert(0, {here!r})
t0 = time.perf_counter()
import pyca as ca
t1 = time.perf_counter()
from _kernels_bench import apply_h
import numpy as np
g = ca.GridInfo((16, 16, 16))
im, out, h = ca.Image3D(g), ca.Image3D(g), ca.Field3D(g)
ca.SetToIdentity(h)
t2 = time.perf_counter()
{action}
t3 = time.perf_counter()
print(f"{{t1 - t0:.4f}} {{t3 - t2:.4f}}")
"""


NVRTC_CHILD = r"""
import sys, time
import pyca as ca
from pyca import _cuda_libs
ca.cuda.set_cache_dir(sys.argv[1])
t0 = time.perf_counter()
if sys.argv[2] == "module":
    ca.cuda.SourceModule('extern "C" __global__ void q(float* x) {{ x[0] = 1.0f; }}', name="q.cu")
else:
    ca.core._cuda_nvrtc_version()
t1 = time.perf_counter()
print(f"{{t1 - t0:.5f}}", int(_cuda_libs.loaded_nvrtc() is not None))
"""


def nvrtc_key_rows(table: Table, runs: int = 5):
    """A cached CUDA module in a new process (PTX where there is no GPU): the kernel cache's key names
    libnvrtc's file from a record, so a hit does not load libnvrtc; beside what loading it costs."""
    with tempfile.TemporaryDirectory() as cache:
        env = pyca_env()

        def child(what):
            r = subprocess.run([sys.executable, "-c", NVRTC_CHILD.format(), cache, what], env=env, cwd=cache,
                               capture_output=True, text=True, timeout=300)
            if r.returncode:
                raise RuntimeError(r.stderr[-2000:])
            t, loaded = r.stdout.split()
            return float(t), int(loaded)

        try:
            child("module")  # compiles, records libnvrtc's file
            hits = [child("module") for _ in range(runs)]
            loads = [child("version") for _ in range(runs)]
        except Exception as e:  # noqa: BLE001 - no NVRTC here
            table.skip("cached CUDA module in a new process", "-", "-", f"failed: {str(e)[-200:]}")
            return
        med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
        table.add("cached CUDA module in a new process (cache lookup, key included)", "-", med([t for t, _ in hits]),
                  "loading libnvrtc (what the key cost before)", med([t for t, _ in loads]),
                  f"libnvrtc loaded by the hit in {sum(x for _, x in hits)} of {runs} processes")


def compile_times(table: Table, cpu: bool = True):
    """First call with an empty cache (CPU half: host compiler; CUDA half: NVRTC, PTX without a GPU), then
    the first call of a new process with the cache filled."""
    with tempfile.TemporaryDirectory() as cache:
        env = pyca_env(PYCA_KERNEL_CACHE_DIR=cache)

        def run(action):
            r = subprocess.run([sys.executable, "-c", COMPILE_SCRIPT.format(here=HERE, action=action)], env=env,
                               cwd=cache,
                               capture_output=True, text=True, timeout=300)
            if r.returncode:
                raise RuntimeError(r.stderr[-2000:])
            return [float(x) for x in r.stdout.split()]

        if cpu:
            _, t = run("apply_h(out, im, h)")
            table.add("first call, CPU half (translate + g++ -O3)", "16^3", t, "target", 2.0)
        _, t = run("apply_h.compile(cpu=False, gpu=True)")
        table.add("first compile, CUDA half (translate + NVRTC)", "-", t, "target", 2.0)
        _, t = run("from _kernels_bench import gauss_pass; gauss_pass.compile(cpu=False, gpu=True)")
        table.add("first compile, CUDA half, Gaussian pass (ca.line tiles)", "-", t, "target", 2.0)
        if cpu:
            imp, t = run("apply_h(out, im, h)")
            table.add("cached call in a new process (CPU)", "16^3", t, "target", 0.050, f"import pyca {imp:.2f} s apart")
        if ca.cuda_available():
            act = "im, out, h = im.to(ca.MEM_DEVICE), out.to(ca.MEM_DEVICE), h.to(ca.MEM_DEVICE); apply_h(out, im, h); ca.synchronize()"
            run(act)
            imp, t = run(act)
            table.add("cached call in a new process (GPU, incl. copies)", "16^3", t, "target", 0.050)


def run(table: Table, gpu: bool = False):
    """For benchmarks/run_all.py: compile times, the CPU rows at 128^3, the GPU rows at 128^3 and 256^3."""
    compile_times(table)
    run_cpu(table, 128)
    if gpu:
        if ca.cuda_available():
            for n in (128, 256):
                run_gpu(table, n)
        else:
            table.skip("GPU comparisons", "-", "-", "no usable GPU: " + ca.device_info())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="store_true", help="also run the GPU comparisons (needs a GPU)")
    ap.add_argument("--sizes", default="128,256")
    ap.add_argument("--gpu-only", action="store_true", help="only the GPU rows (no CPU rows)")
    ap.add_argument("--lab", action="store_true", help="with the GPU rows: the code-generation lab (variants of the "
                    "generated kernels, launch shapes) and the phases of a cached call in a new process")
    ap.add_argument("--line-lab", action="store_true", help="with the GPU rows: only the lab's ca.line rows (tile "
                    "and launch shapes of the Gaussian)")
    ap.add_argument("--startup", action="store_true", help="with the GPU rows: the phases of a cached call in a "
                    "new process (also part of --lab)")
    ap.add_argument("--no-compile", action="store_true", help="skip the compile-time rows")
    args = ap.parse_args()
    gpu = (args.gpu or args.gpu_only) and ca.cuda_available()
    t = Table("pyca.kernels: @ca.kernel, ca.reduce, ca.scan")

    def stopped(*_):  # killed by a time limit (timeout sends SIGTERM): the rows measured so far
        print(machine_line(), "(stopped by SIGTERM: the rows measured so far)")
        t.print()
        sys.exit(1)

    signal.signal(signal.SIGTERM, stopped)
    if not args.no_compile:
        compile_times(t, cpu=not args.gpu_only)
        nvrtc_key_rows(t)
        if gpu and (args.lab or args.startup):
            startup_rows(t)
    for n in (int(s) for s in args.sizes.split(",")):
        if not args.gpu_only:
            run_cpu(t, n)
        if gpu:
            run_gpu(t, n, lab=args.lab, line_lab=args.line_lab)
    print(machine_line(), f"OMP threads: {os.environ.get('OMP_NUM_THREADS', 'default')}")
    t.print()


if __name__ == "__main__":
    main()
