"""ca.line(im, axis, radius) in @ca.kernel: t[d] is im at this voxel moved d along axis, clamped to
the grid. Checked against NumPy/SciPy on the CPU (per-voxel body and strips), on the GPU against the
CPU (the tiles in shared memory, offsets beyond the radius, radii too large for a tile, blocks that are
not whole warps, an image of another grid), and its refusals."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.ndimage import correlate1d

import pyca as ca
from pyca.kernels import KernelSyntaxError
from pyca.testing import needs_gpu, parity_params


pytestmark = pytest.mark.usefixtures("kernel_cache")  # one kernel cache per module (conftest.py)


def image(a, mem=ca.MEM_HOST):
    im = ca.Image3D.from_array(np.asfortranarray(a, dtype=np.float32), ca.GridInfo(a.shape))
    return im if mem == ca.MEM_HOST else im.clone(mem)


def rand(seed, shape):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(np.float32)


def half_gauss(sigma):
    r = int(4 * sigma + 0.5)
    d = np.arange(-r, r + 1, dtype=np.float64)
    w = np.exp(-d * d / (2 * sigma * sigma))
    return (w / w.sum())[r:].astype(np.float32), r


@ca.kernel(check_sizes=False, register=False)
def line_pass(out: ca.Image3D, im: ca.Image3D, w: ca.Image3D, r: int, axis: int):
    """A symmetric separable filter pass (the Gaussian's), taps read through ca.line."""
    i, j, k = ca.index()
    t = ca.line(im, axis, r)
    s = w[0, 0, 0] * t[0]
    for d in range(1, r + 1):
        s += w[d, 0, 0] * (t[-d] + t[d])
    out[i, j, k] = s


@ca.kernel(check_sizes=False, register=False)
def line_wide(out: ca.Image3D, im: ca.Image3D, r: int, axis: int):
    """Offsets beyond the radius (read from the image on the GPU), one that varies per voxel (the CPU's
    per-voxel body) and a condition on a voxel's value."""
    i, j, k = ca.index()
    t = ca.line(im, axis, r)
    s = 0.0
    for d in range(-r - 2, r + 3):
        s += (d + 0.25) * t[d]
    if t[0] > 0.0:
        s += t[(i + 2 * j + k) % 7 - 3]
    out[i, j, k] = s


def _example(overload, grid, rng):
    sz = grid.size()
    a = rng.uniform(-1, 1, (sz.x, sz.y, sz.z)).astype(np.float32)
    out = ca.Image3D(grid, ca.MEM_HOST)
    return [out, image(a), 3, int(rng.integers(0, 3))]


@ca.kernel(check_sizes=False, example=_example)
def line_parity(out: ca.Image3D, im: ca.Image3D, r: int, axis: int):
    """Registered: the generated CPU/GPU parity tests run it (a random axis)."""
    i, j, k = ca.index()
    t = ca.line(im, axis, r)
    s = t[0]
    for d in range(1, r + 1):
        s += (t[d] - t[-d]) * d
    out[i, j, k] = s


def np_line(a, axis, d):
    """a moved d along axis, clamped (t[d] for every voxel)."""
    n = a.shape[axis]
    idx = np.clip(np.arange(n) + d, 0, n - 1)
    return np.take(a, idx, axis=axis)


def ref_wide(a, r, axis):
    s = np.zeros(a.shape, np.float64)
    for d in range(-r - 2, r + 3):
        s += (d + 0.25) * np_line(a, axis, d)
    x, y, z = np.indices(a.shape)
    off = (x + 2 * y + z) % 7 - 3
    var = np.choose(off + 3, [np_line(a, axis, d) for d in range(-3, 4)])
    return s + np.where(a > 0, var, 0.0)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_line_pass_matches_scipy_and_the_image_reads(axis):
    """CPU (strips): the Gaussian pass through ca.line is SciPy's correlate1d(mode='nearest')."""
    w, r = half_gauss(2.0)
    a = rand(1, (37, 29, 23))
    im, out = image(a), image(np.zeros_like(a))
    line_pass(out, im, image(w.reshape(-1, 1, 1)), r, axis)
    full = np.concatenate([w[:0:-1], w]).astype(np.float64)
    ref = correlate1d(a.astype(np.float64), full, axis=axis, mode="nearest")
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=2e-6)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_line_beyond_the_radius_and_varying_offsets(axis):
    a = rand(2, (19, 11, 9))
    out = image(np.zeros_like(a))
    line_wide(out, image(a), 2, axis)
    np.testing.assert_allclose(out.numpy(), ref_wide(a, 2, axis), rtol=1e-5, atol=1e-5)


def test_line_axis_out_of_range_raises():
    a = rand(3, (8, 7, 6))
    with pytest.raises(ValueError, match=r"line_pass .*ca.line's axis is not 0, 1 or 2 \(line \d+\)"):
        line_pass(image(a), image(a), image(np.ones((2, 1, 1), np.float32)), 1, 3)


def test_line_device_code():
    """The device code stages tiles (the 32-bit path) and reads the line through line_rd; the host reads
    the image (rows in the strips)."""
    src = line_pass.source
    assert "pyca_k::lineTiles(p_out.size, p_im, pyca_ax, pyca_r" in src
    assert "line_rd<Idx, true>(pyca_line, p_im, v_i, v_j, v_k, p_axis, v_d)" in src
    assert "pyca_k::rdrow<Idx>(p_im" in src and "line_check(p_axis" in src
    # the tap loop's interior copy reads the tile without testing each offset
    assert "(pyca_line.s != nullptr) && (-(pyca_a4) <= pyca_line.r)" in src
    assert "pyca_line.s[(-v_d) * pyca_line.stride] + pyca_line.s[v_d * pyca_line.stride]" in src


def test_line_tiles_are_opt_in(monkeypatch):
    """The tiles (not yet measured on a GPU) are compiled only with PYCA_KERNEL_TILES=1, decided when
    the source is generated; the source is the same either way (the define selects)."""
    assert line_pass._translate().gpu_options == []
    monkeypatch.setenv("PYCA_KERNEL_TILES", "1")
    k = ca.kernel(check_sizes=False, register=False)(line_pass.__wrapped__)
    assert k._translate().gpu_options == ["-DPYCA_K_TILES"] and k.source == line_pass.source
    assert ca.kernel(register=False)(line_parity.__wrapped__)._translate().gpu_options == ["-DPYCA_K_TILES"]


def test_line_cuda_half_compiles():
    try:
        ok = bool(ca.core._cuda_nvrtc_version())
    except Exception:  # noqa: BLE001 - a build without CUDA
        ok = False
    if not ok:
        pytest.skip("pyca built without NVRTC")
    for opts, smem in (([], None), (["-DPYCA_K_TILES"], "16384 bytes smem"),
                       (["-DPYCA_K_TILES", "-DPYCA_K_SPLIT64"], "16384 bytes smem")):
        m = ca.cuda.SourceModule(line_pass.source, opts + ["--ptxas-options=-v"], name="line_pass.cu", arch="sm_90")
        assert "0 bytes spill stores" in m.log and (smem in m.log if smem else "smem" not in m.log), m.log


def _bad(src, path):
    import importlib.util

    path.write_text("import pyca as ca\n\n\n" + src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.k


@pytest.mark.parametrize("body, what", [
    ("t = ca.line(im, 0, 1)\n    t = ca.line(im, 1, 1)\n    out[i, j, k] = t[0]", "a second ca.line"),
    ("if i > 0:\n        t = ca.line(im, 0, 1)\n        out[i, j, k] = t[0]", "ca.line other than as"),
    ("t = ca.line(out, 0, 1)\n    out[i, j, k] = t[0]", "which the kernel also writes"),
    ("t = ca.line(im, 0.5, 1)\n    out[i, j, k] = t[0]", "axis other than an int constant"),
    ("t = ca.line(im, 0, i)\n    out[i, j, k] = t[0]", "radius other than an int constant"),
    ("t = ca.line(im, 0, 1)\n    out[i, j, k] = t[0, 1]", "indexed with other than one offset"),
    ("t = ca.line(im, 0, 1)\n    u = t\n    out[i, j, k] = u[0]", r"used other than as t\[d\]"),
])
def test_line_refusals(body, what, tmp_path):
    k = _bad("@ca.kernel(register=False)\ndef k(out: ca.Image3D, im: ca.Image3D):\n    i, j, k = ca.index()\n"
             f"    {body}\n", tmp_path / "bad_line.py")
    with pytest.raises(KernelSyntaxError, match=what):
        k.source  # noqa: B018


@needs_gpu
@pytest.mark.parametrize("tiles", ["0", "1"])
@pytest.mark.parametrize("shape", [(37, 29, 23), (130, 70, 67)])
def test_line_gpu_matches_cpu(shape, tiles, monkeypatch):
    """Tiles of every axis, radii 0 .. beyond PYCA_K_LINE_RMAX (no tile), a block that is not whole
    warps (no tile), offsets beyond the radius, an input of another grid than the output; with and
    without PYCA_KERNEL_TILES (kernels generated afresh under each)."""
    monkeypatch.setenv("PYCA_KERNEL_TILES", tiles)
    line_pass = ca.kernel(check_sizes=False, register=False)(globals()["line_pass"].__wrapped__)
    line_wide = ca.kernel(check_sizes=False, register=False)(globals()["line_wide"].__wrapped__)
    assert line_pass._translate().gpu_options == (["-DPYCA_K_TILES"] if tiles == "1" else [])
    w, r = half_gauss(2.0)
    a = rand(4, shape)
    wim = image(w.reshape(-1, 1, 1))
    for axis in range(3):
        for rr in (0, 1, r, 33):
            ww = image(np.resize(w, rr + 1).reshape(-1, 1, 1))
            ref, got = image(np.zeros_like(a)), image(np.zeros_like(a), ca.MEM_DEVICE)
            line_pass(ref, image(a), ww, rr, axis)
            line_pass(got, image(a, ca.MEM_DEVICE), ww.clone(ca.MEM_DEVICE), rr, axis)
            np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6, err_msg=f"axis {axis} r {rr}")
        ref, got = image(np.zeros_like(a)), image(np.zeros_like(a), ca.MEM_DEVICE)
        line_pass(ref, image(a), wim, r, axis)
        line_pass(got, image(a, ca.MEM_DEVICE), wim.clone(ca.MEM_DEVICE), r, axis, block=(5, 3, 2))
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
        ref, got = image(np.zeros_like(a)), image(np.zeros_like(a), ca.MEM_DEVICE)
        line_wide(ref, image(a), 2, axis)
        line_wide(got, image(a, ca.MEM_DEVICE), 2, axis)
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)
        small = rand(5, (shape[0] // 2, shape[1] - 3, shape[2] // 3))
        o1, o2 = image(np.zeros_like(a)), image(np.zeros_like(a), ca.MEM_DEVICE)
        line_wide(o1, image(small), 2, axis)
        line_wide(o2, image(small, ca.MEM_DEVICE), 2, axis)
        np.testing.assert_allclose(o2.numpy(), o1.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", parity_params(names=[f"{__name__}.line_parity"]))
def test_line_parity(case):
    case.run()


# ------------------------------------------------------------------------------------------------
# The device code on the CPU: the generated CUDA source compiled by the host compiler under a shim
# that runs each block's threads as std::threads (threadIdx per thread, __syncthreads a barrier,
# __shared__ one static array per block at a time), so that the tiles' indexing and
# synchronisation are checked against the CPU half here, without a GPU. Not a timing.
EMU_SHIM = r"""
#include <atomic>
#include <barrier>
#include <cstring>
#include <thread>
#include <vector>
struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; };
static thread_local uint3 threadIdx;
static uint3 blockIdx;
static dim3 blockDim, gridDim;
static std::barrier<>* emu_sync;
inline void __syncthreads() { emu_sync->arrive_and_wait(); }
static thread_local long emu_visits;  // voxels this thread's body ran for, in the current block
static std::atomic<long> emu_most{0};  // the most of any thread of any block since the last read
inline void emu_visit() { ++emu_visits; }
template <class T> inline T __ldg(const T* p) { return *p; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, sizeof f); return f; }
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __CUDACC__ 1
#define __CUDACC_RTC__ 1
#define __CUDA_ARCH__ 900
"""

EMU_LAUNCH = r"""
template <class F>
static void emu_launch(dim3 g, dim3 b, F kernel) {
  gridDim = g;
  blockDim = b;
  const unsigned nt = b.x * b.y * b.z;
  std::barrier<> sync(nt), start(nt + 1), end(nt + 1);
  emu_sync = &sync;
  bool done = false;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < nt; ++t)
    pool.emplace_back([&, t] {
      threadIdx = uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
      for (;;) {
        start.arrive_and_wait();
        if (done) return;
        emu_visits = 0;
        kernel();
        for (long m = emu_most.load(); emu_visits > m && !emu_most.compare_exchange_weak(m, emu_visits);) {
        }
        end.arrive_and_wait();
      }
    });
  for (unsigned z = 0; z < g.z; ++z)
    for (unsigned y = 0; y < g.y; ++y)
      for (unsigned x = 0; x < g.x; ++x) {
        blockIdx = uint3{x, y, z};
        start.arrive_and_wait();
        end.arrive_and_wait();
      }
  done = true;
  start.arrive_and_wait();
  for (auto& th : pool) th.join();
}
"""


def emulated(kernel, options=(), entry="_gpu"):
    """run(*args, grid, block): `kernel`'s CUDA entry run on the CPU under the shim; run.most_visits() the
    most voxels one thread (of one block) ran the body for since the last call."""
    import ctypes
    import subprocess

    from pyca.kernels import host

    names = list(kernel._kinds)
    ctype = {"Image3D": "const pyca::ImageView*", "Field3D": "const pyca::FieldView*", "float": "float", "int": "int",
             "bool": "bool"}
    params = ", ".join(f"{ctype[kernel._kinds[n]]} a_{n}" for n in names)
    args = ", ".join(f"*a_{n}" if kernel._kinds[n] in ("Image3D", "Field3D") else f"a_{n}" for n in names)
    defines = "".join(f"#define {o[2:]}\n" for o in options)
    body = f"{kernel._cname}_body<"
    src = (defines + EMU_SHIM + kernel.source.replace(body, "emu_visit(), " + body) + EMU_LAUNCH
           + 'extern "C" long emu_most_visits() { return emu_most.exchange(0); }\n'
           + f'extern "C" void emu_run({params}, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, '
           f"unsigned bz) {{\n  emu_launch(dim3{{gx, gy, gz}}, dim3{{bx, by, bz}}, [&] {{ {kernel._cname}{entry}({args}); }});\n}}\n")
    d = Path(ca.cuda.get_cache_dir()) / f"emu_{kernel.name}_{abs(hash(src)) % 10**12}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "k.cpp").write_text(src)
    cmd = ["g++", "-std=c++20", "-O1", "-pthread", "-shared", "-fPIC", "-w",
           *[f"-I{x}" for x in ca.cuda.include_dirs()], str(d / "k.cpp"), "-o", str(d / "k.so")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lib = ctypes.CDLL(str(d / "k.so"))
    fn = lib.emu_run
    lib.emu_most_visits.restype = ctypes.c_long
    packers = {"Image3D": host.image_view, "Field3D": host.field_view}

    def run(*a, grid, block):
        packed = [packers[kernel._kinds[n]](v) if kernel._kinds[n] in packers else v for n, v in zip(names, a)]
        keep = [ctypes.byref(p) if kernel._kinds[n] in packers else (ctypes.c_float(p) if kernel._kinds[n] == "float"
                else ctypes.c_int(int(p))) for n, p in zip(names, packed)]
        fn(*keep, *(ctypes.c_uint(v) for v in (*grid, *block)))

    run.most_visits = lib.emu_most_visits
    return run


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20) for the emulation")
@pytest.mark.parametrize("options", [["-DPYCA_K_TILES"], []], ids=["tiles", "no-tiles"])
def test_line_device_code_on_a_cpu_emulation(options):
    """The CUDA half of ca.line kernels (with and without the tiles) on the emulation against the CPU
    half: every axis, radii 0 .. beyond the tiles' 32, the tiled launch (a block per 2048 voxels), a
    block per 256 voxels (blocks without a tile), a block that is not whole warps, offsets beyond the
    radius and varying per voxel, an input of another grid than the output."""
    w, r = half_gauss(2.0)
    shape = (37, 29, 23)
    a = rand(7, shape)
    small = rand(8, (shape[0] // 2, shape[1] - 3, shape[2] // 3))
    ep, ew = emulated(line_pass, options), emulated(line_wide, options)
    cdiv = lambda p, q: (p + q - 1) // q  # noqa: E731
    per_voxel = ((cdiv(shape[0], 32), cdiv(shape[1], 4), cdiv(shape[2], 2)), (32, 4, 2))
    tiled = ((cdiv(per_voxel[0][0] * per_voxel[0][1] * per_voxel[0][2], 8), 1, 1), (32, 4, 2))
    odd = ((3, 4, 5), (5, 3, 2))
    for axis in range(3):
        for rr, launch in ((0, tiled), (3, per_voxel), (r, tiled), (33, tiled), (r, odd)):
            ww = image(np.resize(w, rr + 1).reshape(-1, 1, 1))
            ref, got = image(np.zeros_like(a)), image(np.full_like(a, np.nan))
            line_pass(ref, image(a), ww, rr, axis)
            ep(got, image(a), ww, rr, axis, grid=launch[0], block=launch[1])
            np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"axis {axis} r {rr} launch {launch}")
        for src in (a, small):
            ref, got = image(np.zeros_like(a)), image(np.full_like(a, np.nan))
            line_wide(ref, image(src), 2, axis)
            ew(got, image(src), 2, axis, grid=tiled[0], block=tiled[1])
            np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20) for the emulation")
def test_the_per_voxel_loop_of_a_tiled_launch_uses_every_thread():
    """With the tiles compiled, a kernel with ca.line is launched with one block per 8 blocks' voxels (a
    linear grid: LINE_VOXELS_PER_THREAD). Where the tiles cannot run (a radius beyond 32, a block that is
    not whole warps, the 64-bit entry) the per-voxel loop must still spread the voxels over every thread of
    that launch: at most ceil(voxels / threads) each (a 3-D grid-stride loop over this linear grid left all
    but the blocks of x idle, each of their threads visiting ~ny nz / 8 voxels: ~100x slower on a GPU). On
    the emulation: the most voxels any thread runs the body for, and the values against the CPU half."""
    from pyca.kernels.voxel import LINE_VOXELS_PER_THREAD

    shape = (40, 24, 20)
    a = rand(11, shape)
    nvox = a.size
    block = (32, 4, 2)
    nb = -(-((-(-shape[0] // 32)) * (-(-shape[1] // 4)) * (-(-shape[2] // 2))) // LINE_VOXELS_PER_THREAD)
    runs = {}
    for options, entry, r, blk in ((["-DPYCA_K_TILES"], "_gpu", 33, block), (["-DPYCA_K_TILES"], "_gpu", 2, (5, 3, 2)),
                                   (["-DPYCA_K_TILES", "-DPYCA_K_SPLIT64", "-DPYCA_K_IDX64"], "_gpu64", 2, block)):
        run = runs.get((tuple(options), entry)) or runs.setdefault((tuple(options), entry),
                                                                    emulated(line_wide, options, entry))
        ref, got = image(np.zeros_like(a)), image(np.full_like(a, np.nan))
        line_wide(ref, image(a), r, 1)
        run.most_visits()  # (the library may be loaded already: a count of an earlier launch is dropped)
        run(got, image(a), r, 1, grid=(nb, 1, 1), block=blk)
        # (sums of up to 71 taps of values up to ~800, in another order: float rounding of the largest)
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6 * np.abs(ref.numpy()).max(),
                                   err_msg=entry)
        threads = nb * blk[0] * blk[1] * blk[2]
        assert run.most_visits() <= -(-nvox // threads), (options, entry, r, blk, threads)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20) for the emulation")
def test_split64_entries_on_a_cpu_emulation():
    """PYCA_KERNEL_SPLIT64's two entries on the emulation (small arrays: the 64-bit one computes the
    same values), with the tiles: the 32-bit kernel alone and the 64-bit one."""
    a = rand(9, (21, 13, 11))
    ref = image(np.zeros_like(a))
    line_wide(ref, image(a), 2, 1)
    for options, entry in ((["-DPYCA_K_TILES", "-DPYCA_K_SPLIT64"], "_gpu"),
                           (["-DPYCA_K_TILES", "-DPYCA_K_SPLIT64", "-DPYCA_K_IDX64"], "_gpu64")):
        got = image(np.full_like(a, np.nan))
        emulated(line_wide, options, entry)(got, image(a), 2, 1, grid=(3, 2, 1), block=(32, 4, 2))
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5, err_msg=entry)
