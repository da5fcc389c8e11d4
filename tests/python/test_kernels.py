"""pyca.kernels: @ca.kernel / @ca.func translated to C++ and run as a CPU loop (here) and a CUDA kernel
(GPU tests skip without one), against references that do not go through the translation: the same
Python function run voxel by voxel by the interpreter over NumPy arrays, and NumPy expressions.
Also: refusals of unsupported constructs, the dispatcher's checks and messages, the registry, the
disk cache across processes, ca.map/reduce/scan against NumPy, ca.on_device."""
from __future__ import annotations

import ctypes
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import pyca as ca
from pyca import registry
from pyca.kernels import KernelSyntaxError, NoCompilerError
from pyca.testing import gpu_available, needs_gpu, nvrtc_available, parity_params

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# Subprocesses import the pyca this test imported (the installed package under scripts/test.sh, a
# build elsewhere), not the checkout's sources, which have no compiled module.
PYCA_PATH = os.pathsep.join(p for p in (os.path.dirname(os.path.dirname(ca.__file__)), os.environ.get("PYTHONPATH")) if p)


pytestmark = pytest.mark.usefixtures("kernel_cache")  # one kernel cache per module (conftest.py)


G = ca.GridInfo((17, 15, 13))


def image(a):
    return ca.Image3D.from_array(np.asfortranarray(a, dtype=np.float32), G if a.shape == (17, 15, 13) else
                                 ca.GridInfo(a.shape))


def rand(seed, shape=(17, 15, 13), lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


# ------------------------------------------------------------------------------------------------
@ca.func
def smooth(a: float, b: float, t: float) -> float:
    if t < 0.0:
        return a
    elif t > 1.0:
        return b
    return a + (b - a) * t


@ca.func
def ipart(n: int) -> int:
    return n // 3 + n % 3 - (-n) // 4 + (-n) % 4 + 2 ** 3 - abs(n)


SCALE = 0.25  # a module constant: compiled in


@ca.kernel
def everything(out: ca.Image3D, im: ca.Image3D, v: ca.Field3D, s: float, n: int, flag: bool):
    """Every construct of the kernel language once."""
    i, j, k = ca.index()
    nx, ny, nz = im.shape
    x = im[i, j, k]
    acc = 0.0
    for d in range(-n, n + 1):  # reads beyond the border are clamped
        acc += im[i + d, j - d, k]
    for d in range(5, 0, -2):
        acc += 0.001 * d
    m = 0
    while m < 3 and not (m == 2 and flag):
        m += 1
        if m > 5:
            break
    y = (math.sqrt(abs(x)) + math.exp(-x * x) - math.atan2(x, 2.0) + math.floor(x * 3) + math.pow(abs(x), 1.5)
         + math.cos(x) ** 2 + math.log(1.0 + abs(x)) + math.tanh(x) + math.pi * SCALE)
    z = min(x, s, 0.5) + max(i, j) + abs(k - 3) + float(i) / 2 + int(x * 10) % 4 + round(x * 2.0)
    if x > 0 and i % 2 == 0 or flag:
        z += 1
    elif j >= ny // 2:
        z -= 1
    else:
        z *= 2
    w = v[i, j, k, 0] * v[i, j, k, 1] - v[i, j, k, 2] if (i + j) % 2 == 0 else -1.0
    q = smooth(x, s, float(m) / 3.0) + ipart(i + j - k)
    a, b = i, j
    a, b = b, a
    if i == 0:
        out[i, j, k] = -5.0
        return
    out[i, j, k] = (acc + y + z + w + q + im.shape[0] + nz + (1 if i == nx - 1 else 0) + (i << 1 ^ 3) + a - b
                    + (not flag) + (x != x))


class _Clamped:
    """A NumPy array indexed like a kernel argument (reads clamped to the grid)."""

    def __init__(self, a, field=False):
        self.a, self.field = a, field
        self.shape = a.shape[:3]

    def __getitem__(self, idx):
        ijk = tuple(min(max(int(v), 0), n - 1) for v, n in zip(idx[:3], self.shape))
        return float(self.a[ijk + tuple(idx[3:])])

    def __setitem__(self, idx, val):
        self.a[tuple(idx)] = val


def python_reference(kern, arrays, scalars, out_shape):
    """Runs the kernel's Python function voxel by voxel with ca.index() answering the voxel."""
    fn = kern.__wrapped__
    out = np.zeros(out_shape, dtype=np.float64)
    vox = [0, 0, 0]
    saved = ca.index
    ca.index = lambda: tuple(vox)
    try:
        for k in range(out_shape[2]):
            for j in range(out_shape[1]):
                for i in range(out_shape[0]):
                    vox[:] = [i, j, k]
                    fn(_Clamped(out), *[_Clamped(a, a.ndim == 4) for a in arrays], *scalars)
    finally:
        ca.index = saved
    return out


@pytest.mark.parametrize("flag", [False, True])
def test_every_construct_matches_python(flag):
    a = rand(1)
    f = rand(2, (17, 15, 13, 3))
    im = image(a)
    v = ca.Field3D.from_array(np.asfortranarray(f), G)
    out = ca.Image3D(G)
    everything(out, im, v, 0.3, 2, flag)
    ref = python_reference(everything, [a.astype(np.float64), f.astype(np.float64)], [0.3, 2, flag], a.shape)
    np.testing.assert_allclose(out.numpy(), ref, rtol=2e-5, atol=2e-4)


@ca.kernel
def saxpy(y: ca.Image3D, a: float, x: ca.Image3D):
    i, j, k = ca.index()
    y[i, j, k] = a * x[i, j, k] + y[i, j, k]


@ca.kernel(inputs={"v": "small"})
def field_ops(out: ca.Field3D, v: ca.Field3D, im: ca.Image3D, mode: int):
    """Field writes; mode 11 writes outside the grid, mode 12 divides an int by zero, mode 13 loops
    with a zero step, mode 14 converts an infinite float to int."""
    i, j, k = ca.index()
    for c in range(3):
        out[i, j, k, c] = v[i, j, k, (c + 1) % 3] * im[i, j, k] + c
    if mode == 11 and i == 3:
        out[i + 100, j, k, 0] = 1.0
    if mode == 12:
        out[i, j, k, 0] = i // (mode - 12)
    if mode == 13:
        for t in range(0, 3, mode - 13):
            out[i, j, k, 0] = t
    if mode == 14:
        out[i, j, k, 1] = int(im[i, j, k] * math.inf)


def test_saxpy_and_field_kernel_vs_numpy():
    x, y = rand(3), rand(4)
    yi = image(y)
    saxpy(yi, 2.5, image(x))
    np.testing.assert_allclose(yi.numpy(), 2.5 * x + y, rtol=1e-6, atol=1e-6)
    f, a = rand(5, (17, 15, 13, 3)), rand(6)
    out = ca.Field3D(G)
    field_ops(out, ca.Field3D.from_array(np.asfortranarray(f), G), image(a), 0)
    ref = np.stack([f[..., (c + 1) % 3] * a + c for c in range(3)], axis=-1)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode, exc, text", [(11, IndexError, "wrote outside the grid"),
                                             (12, ZeroDivisionError, "division or modulo by zero"),
                                             (13, ValueError, "step is 0"),
                                             (14, ValueError, "int\\(\\) of NaN or of a float beyond")])
def test_cpu_run_time_errors_are_exceptions(mode, exc, text):
    out = ca.Field3D(G)
    with pytest.raises(exc, match=text) as e:
        field_ops(out, ca.Field3D(G), image(rand(7)), mode)
    assert "field_ops" in str(e.value) and "line" in str(e.value)


# Kernels whose loops are uniform along x run as strips of a row on the CPU (pyca/kernels/strip.py):
# rows longer than a strip (PYCA_K_W = 256), reads beyond both x borders (also beyond the strip's
# padding), along y and z, of fields, affine and varying locals, helpers, a while loop.
@ca.kernel(check_sizes=False, parity_skip="sizes of its own (strip test kernel)")
def stripped(out: ca.Image3D, f: ca.Field3D, im: ca.Image3D, r: int, axis: int, s: float):
    i, j, k = ca.index()
    acc = 0.0
    if axis == 0:
        for d in range(-r, r + 1):
            acc += (r + 1 - abs(d)) * im[i + d, j, k]
    else:
        for d in range(-r, r + 1):
            acc += im[i, j + d, k - d] * s
    ii = i + 1
    xf = i + 0.5
    a, b = im[ii + 40, j, k], im[i - 45, j, k]
    t = 0
    while t < 2:
        acc += f[i - t, j, k, t] + smooth(a, b, s) - xf * 0.001
        t += 1
    q = int(acc * 10.0) // 3 if acc > 0 else -1
    out[i, j, k] = acc + q + a - b


@ca.kernel(check_sizes=False, parity_skip="sizes of its own (strip test kernel)")
def stripped_errors(out: ca.Image3D, im: ca.Image3D, shift: int, div: int):
    i, j, k = ca.index()
    acc = 0.0
    for d in range(2):
        acc += im[i + d, j, k]
    out[i + shift, j, k] = acc + i // div


def test_the_64_bit_index_build_gives_the_same_result():
    """Arrays of 2^31 voxels or more run a build with 64-bit indices (too big to allocate in a test:
    its entry is called directly on small arrays, against the 32-bit build)."""
    from pyca.kernels import host

    shape = (300, 3, 2)
    a = rand(34, shape)
    out, out64 = (ca.Image3D(ca.GridInfo(shape)) for _ in range(2))
    stripped_errors(out, image(a), 0, 1)
    entry = stripped_errors._translate().cpu("pyca_k_stripped_errors_cpu", wide=True)
    line = ctypes.c_int(0)
    assert entry(host.image_view(out64), host.image_view(image(a)), 0, 1, ctypes.byref(line)) == 0
    np.testing.assert_array_equal(out64.numpy(), out.numpy())


@pytest.mark.parametrize("axis", [0, 1])
def test_strip_kernels_match_python(axis):
    shape = (300, 4, 3)
    a, f = rand(31, shape), rand(32, shape + (3,))
    out = ca.Image3D(ca.GridInfo(shape))
    stripped(out, ca.Field3D.from_array(np.asfortranarray(f), ca.GridInfo(shape)), image(a), 3, axis, 0.7)
    assert "pyca_k_stripped_strip" in stripped.source  # the strip body is the one run on the CPU
    ref = python_reference(stripped, [f.astype(np.float64), a.astype(np.float64)], [3, axis, 0.7], shape)
    np.testing.assert_allclose(out.numpy(), ref, rtol=2e-5, atol=2e-4)


def test_strip_kernels_report_errors():
    shape = (300, 2, 2)
    a = rand(33, shape)
    out = ca.Image3D(ca.GridInfo(shape))
    stripped_errors(out, image(a), 0, 1)
    ref = a + np.concatenate([a[1:], a[-1:]]) + np.arange(300)[:, None, None]
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)
    out2 = ca.Image3D(ca.GridInfo(shape))
    with pytest.raises(IndexError, match="wrote outside the grid"):
        stripped_errors(out2, image(a), 1, 1)
    np.testing.assert_array_equal(out2.numpy()[1:], out.numpy()[:-1])  # the writes inside the grid are done
    with pytest.raises(ZeroDivisionError, match="line"):
        stripped_errors(out2, image(a), 0, 0)


# ------------------------------------------------------------------------------------------------
# Refusals: at the first compilation, one line naming the function, the line and the construct.
def _k_try(out: ca.Image3D):
    i, j, k = ca.index()
    try:
        out[i, j, k] = 1.0
    except Exception:
        pass


def _k_list(out: ca.Image3D):
    i, j, k = ca.index()
    out[i, j, k] = [1.0, 2.0][0]


def _k_call(out: ca.Image3D):
    i, j, k = ca.index()
    out[i, j, k] = np.sin(1.0)


def _k_float_index(out: ca.Image3D):
    i, j, k = ca.index()
    out[i * 0.5, j, k] = 1.0


def _k_return_value(out: ca.Image3D):
    return 1.0


def _k_for_list(out: ca.Image3D):
    i, j, k = ca.index()
    for t in [1, 2]:
        out[i, j, k] = t


def _k_field_3(out: ca.Image3D, f: ca.Field3D):
    i, j, k = ca.index()
    out[i, j, k] = f[i, j, k]


@pytest.mark.parametrize("fn, construct", [
    (_k_try, "try/except"), (_k_list, "a list"), (_k_call, "calling np.sin()"), (_k_float_index, "a float index"),
    (_k_return_value, "returning a value from a kernel"), (_k_for_list, "a for loop over something other than range"),
    (_k_field_3, "indexed with 3 indices"),
])
def test_unsupported_constructs_are_refused_in_one_line(fn, construct):
    k = ca.kernel(fn, register=False)
    with pytest.raises(KernelSyntaxError) as e:
        k.source  # noqa: B018 - translates
    msg = str(e.value)
    assert "\n" not in msg
    assert fn.__name__ in msg and "test_kernels.py:" in msg and construct in msg, msg
    line = int(msg.split("test_kernels.py:")[1].split(":")[0])
    assert open(__file__).read().splitlines()[line - 1].strip() in msg


def test_signature_errors_at_decoration():
    with pytest.raises(TypeError, match="needs a type annotation"):
        ca.kernel(lambda out: None)
    with pytest.raises(TypeError, match="needs an Image3D or Field3D"):
        @ca.kernel
        def nothing(s: float):
            pass


# ------------------------------------------------------------------------------------------------
# Dispatch: the same checks and messages as @pyca_dispatch; the registry entry.
@ca.dispatch.pyca_dispatch(None, register=False)
def saxpy_ref(y: ca.Image3D, a: float, x: ca.Image3D):
    pass


@pytest.mark.parametrize("args", [("no", 1.0, None), (None, "s", None), (None, 1.0, "small")])
def test_argument_errors_are_pyca_dispatch_errors(args):
    y, x, other = ca.Image3D(G), ca.Image3D(G), ca.Image3D(ca.GridInfo((3, 4, 5)))
    call = [y if args[0] is None else args[0], args[1], x if args[2] is None else other]
    msgs = []
    for op in (saxpy, saxpy_ref):
        with pytest.raises((TypeError, ValueError)) as e:
            op(*call)
        msgs.append((type(e.value), str(e.value).replace("saxpy_ref", "saxpy")))
    assert msgs[0] == msgs[1]


def test_kernels_are_registered_for_parity():
    info = registry.get(f"{__name__}.saxpy")
    assert info.call is saxpy and info.gpu is not None and info.family == "kernels"
    assert [p.type for p in info.overloads[0].params] == ["Image3D", "float", "Image3D"]
    cases = registry.parity_cases(names=[f"{__name__}.saxpy", f"{__name__}.everything"])
    assert len(cases) == 4
    if not gpu_available():
        assert all(c.skip_reason == "needs a CUDA GPU" for c in cases)


@ca.kernel
def stores_then_reads(out: ca.Image3D, a: ca.Image3D, b: ca.Image3D):
    """Reads before and after stores: a read-only (before any store: the read-only cache on the GPU),
    b read and stored, out read back after its store."""
    i, j, k = ca.index()
    out[i, j, k] = a[i, j, k] + a[i + 1, j, k]
    b[i, j, k] = out[i, j, k] * 2.0 + b[i, j, k]
    out[i, j, k] = out[i, j, k] + a[i, j - 1, k]


R_STENCIL = 3


@ca.kernel
def stencil(out: ca.Image3D, a: ca.Image3D, f: ca.Field3D):
    """Taps along x, y and z (a field component), a constant index and the loop variable alone: the
    GPU runs interior copies of both loops without clamps, the clamped loops near the borders."""
    i, j, k = ca.index()
    s = 0.0
    for d in range(-R_STENCIL, R_STENCIL + 1):
        s += a[i + d, j, k] * 0.5 + a[i, j - d, k] + f[i, j, d + k, 1]
    for d in range(R_STENCIL):
        s += a[d, j, 3] - a[i - d, j, k]
    out[i, j, k] = s


def test_stencil_loops_and_their_interior_copies():
    src = stencil.source
    assert src.count("#if PYCA_K_INTERIOR\n") == 2
    assert "rdu<Idx, true>(p_a, (v_i + v_d), v_j, v_k)" in src and "rdfu<Idx, true>(p_f, v_i, v_j, (v_d + v_k), 1)" in src
    assert "rdu<Idx, true>(p_a, v_d, v_j, 3)" in src and "rd<Idx, true>(p_a, v_d, v_j, 3)" in src
    a, f, out = image(rand(41)), ca.Field3D.from_array(np.asfortranarray(rand(42, (17, 15, 13, 3))), G), image(rand(1))
    stencil(out, a, f)
    A, F = a.numpy(), f.numpy()[..., 1]
    nx, ny, nz = A.shape
    cl = np.clip
    ref = np.zeros_like(A, dtype=np.float64)
    x, y, z = np.arange(nx)[:, None, None], np.arange(ny)[None, :, None], np.arange(nz)[None, None, :]
    for d in range(-R_STENCIL, R_STENCIL + 1):
        ref += A[cl(x + d, 0, nx - 1), y, z] * 0.5 + A[x, cl(y - d, 0, ny - 1), z] + F[x, y, cl(z + d, 0, nz - 1)]
    for d in range(R_STENCIL):
        ref += A[d, y, 3] - A[cl(x - d, 0, nx - 1), y, z]
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)


@ca.kernel(register=False)
def shifted(out: ca.Image3D, a: ca.Image3D):
    i, j, k = ca.index()
    i = i + 1
    out[i, j, k] = a[i, j, k]


def test_device_code_choices():
    """The CUDA half loads through the read-only cache only arrays never stored into, before the
    first store; stores at this voxel (i, j, k of ca.index(), never reassigned) of the visited grid
    skip the bounds check; 32-bit indices unless an array has 2^31 voxels or more."""
    src = stores_then_reads.source
    assert "rd<Idx, true>(p_a, v_i, v_j, v_k)" in src and "rd<Idx, true>(p_a, (v_i + 1), v_j, v_k)" in src
    assert "rd<Idx>(p_a, v_i, (v_j - 1), v_k)" in src
    assert "true>(p_b" not in src and "true>(p_out" not in src
    assert src.count("wrown<Idx>(p_out, v_i, v_j, v_k") == 2 and "pyca_k::wr<Idx>(p_b, v_i, v_j, v_k" in src
    assert "_body<int>(i, j, k" in src and "_body<long long>(i, j, k" in src
    assert "wrown<Idx>(p_out" not in shifted.source and "pyca_k::wr<Idx>(p_out" in shifted.source
    a, b, out = image(rand(31)), image(rand(32)), image(rand(33))
    a0, b0 = a.numpy().copy(), b.numpy().copy()
    stores_then_reads(out, a, b)
    nx, ny = a0.shape[:2]
    o1 = a0 + a0[np.minimum(np.arange(nx) + 1, nx - 1)]
    np.testing.assert_allclose(b.numpy(), o1 * 2 + b0, rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), o1 + a0[:, np.maximum(np.arange(ny) - 1, 0)], rtol=1e-6)


@pytest.mark.parametrize("case", parity_params(names=[f"{__name__}.{n}" for n in ("saxpy", "everything", "field_ops",
                                                                                  "stores_then_reads", "stencil")]))
def test_kernel_parity(case):
    case.run()


# ------------------------------------------------------------------------------------------------
SCRIPT = """
import sys, time
t0 = time.perf_counter()
import pyca as ca
sys.path.insert(0, {here!r})
t1 = time.perf_counter()
from test_kernels import saxpy, image, rand
y = image(rand(3))
t2 = time.perf_counter()
saxpy(y, 2.0, image(rand(4)))
t3 = time.perf_counter()
print(saxpy._translate().cpu_cache_hit, t3 - t2)
"""


def test_cache_hit_in_a_new_process(kernel_cache):
    saxpy.compile()
    env = dict(os.environ, PYCA_KERNEL_CACHE_DIR=str(kernel_cache), PYTHONPATH=PYCA_PATH)
    r = subprocess.run([sys.executable, "-c", SCRIPT.format(here=HERE)], capture_output=True, text=True, env=env,
                       timeout=120, cwd=str(kernel_cache))
    assert r.returncode == 0, r.stderr
    how, seconds = r.stdout.split()
    assert how == "disk"
    assert float(seconds) < 1.0  # the target (< 50 ms) is measured by benchmarks/bench_kernels.py


def test_no_compiler_is_a_clear_error(monkeypatch):
    from pyca.kernels import host

    monkeypatch.setattr(host, "_compiler", None)
    monkeypatch.setenv("PYCA_CXX", "/nonexistent/c++")
    with pytest.raises(NoCompilerError, match="no C\\+\\+ compiler"):
        host.compiler()
    monkeypatch.setattr(host, "_compiler", None)


# ------------------------------------------------------------------------------------------------
def test_map_images_and_fields():
    a, b = rand(8), rand(9)
    out = ca.map(lambda x, y: x * y + abs(x) - 1, image(a), image(b))
    np.testing.assert_allclose(out.numpy(), a * b + abs(a) - 1, rtol=1e-6, atol=1e-6)
    f = rand(10, (17, 15, 13, 3))
    fo = ca.Field3D.from_array(np.asfortranarray(f), G)
    ca.map(smooth_map, fo, out=fo)  # in place, a @ca.func
    np.testing.assert_allclose(fo.numpy(), np.where(f < 0, 0.0, f * f), rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match="one kind"):
        ca.map(lambda x, y: x, image(a), fo)


@ca.func
def smooth_map(x: float) -> float:
    return x * x if x > 0 else 0.0


def test_reduce_vs_numpy():
    a = rand(11, (64, 64, 64), 0.0, 1.0)
    im = image(a)
    s = ca.reduce(lambda x, y: x + y, im, 0.0)
    assert s == pytest.approx(math.fsum(a.ravel().astype(np.float64)), rel=1e-12)
    assert ca.reduce(lambda x, y: max(x, y), im, -math.inf) == float(a.max())
    assert ca.reduce(lambda x, y: x + y, image(a[:5, :3, :2]), 10.0) == pytest.approx(10.0 + a[:5, :3, :2].sum(dtype=np.float64))


RED_SCRIPT = """
import sys
sys.argv = ["red"]
sys.path.insert(0, {here!r})
import pyca as ca, numpy as np
from test_kernels import image, rand
print(repr(ca.reduce(lambda x, y: x + y, image(rand(12, (96, 96, 64), 0.0, 1.0)), 0.0)))
"""


def test_reduce_bits_do_not_depend_on_threads(kernel_cache):
    outs = set()
    script = kernel_cache / "reduce_threads.py"
    script.write_text(RED_SCRIPT.format(here=HERE))
    for threads in ("1", "2", "3"):
        env = dict(os.environ, PYCA_KERNEL_CACHE_DIR=str(kernel_cache), PYTHONPATH=PYCA_PATH, OMP_NUM_THREADS=threads)
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=env, timeout=120, cwd=str(kernel_cache))
        assert r.returncode == 0, r.stderr
        outs.add(r.stdout.strip())
    assert len(outs) == 1, outs


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_scan_vs_numpy(axis):
    a = rand(13)
    out = ca.scan(lambda x, y: x + y, image(a), axis)
    np.testing.assert_allclose(out.numpy(), np.cumsum(a, axis=axis, dtype=np.float64), rtol=1e-5, atol=1e-5)
    im = image(a)
    ca.scan(lambda x, y: max(x, y), im, axis, out=im)  # in place
    np.testing.assert_array_equal(im.numpy(), np.maximum.accumulate(a, axis=axis))


def test_scan_rejects_bad_axis():
    with pytest.raises(ValueError, match="axis"):
        ca.scan(lambda x, y: x + y, image(rand(1)), 3)


# ------------------------------------------------------------------------------------------------
def test_on_device_without_gpu_fails_at_entry_and_touches_nothing():
    if gpu_available():
        pytest.skip("this machine has a GPU")
    im = image(rand(14))
    before = im.numpy()
    with pytest.raises(ca.CudaError, match="on_device: no usable CUDA GPU"):
        with ca.on_device({im: "tofrom"}):
            raise AssertionError("the block must not run")
    assert im.memType() == ca.MEM_HOST
    np.testing.assert_array_equal(im.numpy(), before)


def test_on_device_checks_its_mapping():
    im = image(rand(15))
    with pytest.raises(ValueError, match="map type 'fro'"):
        ca.on_device({im: "fro"})
    with pytest.raises(TypeError, match="not an Image3D"):
        ca.on_device({3: "to"})


@needs_gpu
def test_on_device_semantics():
    a, b, c, d = (image(rand(s)) for s in (16, 17, 18, 19))
    ref = {n: x.numpy() for n, x in zip("abcd", (a, b, c, d))}
    with ca.on_device({a: "to", b: "from", c: "tofrom", d: "alloc"}):
        assert all(x.memType() == ca.MEM_DEVICE for x in (a, b, c, d))
        np.testing.assert_array_equal(a.numpy(), ref["a"])
        np.testing.assert_array_equal(c.numpy(), ref["c"])
        with ca.on_device({a: "tofrom", b: "to"}):  # nested: already there, nothing copied or restored
            a.fill(1.0)
        assert a.memType() == ca.MEM_DEVICE
        for x in (a, b, c, d):
            x.fill(2.0)
    assert all(x.memType() == ca.MEM_HOST for x in (a, b, c, d))
    np.testing.assert_array_equal(a.numpy(), ref["a"])  # "to": host data as before
    assert (b.numpy() == 2.0).all() and (c.numpy() == 2.0).all()
    np.testing.assert_array_equal(d.numpy(), ref["d"])  # "alloc": untouched
    with pytest.raises(RuntimeError, match="boom"):
        with ca.on_device({c: "tofrom"}):
            c.fill(3.0)
            raise RuntimeError("boom")
    assert c.memType() == ca.MEM_HOST and (c.numpy() == 2.0).all()


@needs_gpu
def test_map_reduce_scan_on_device_match_host():
    a = rand(20, (33, 17, 9), 0.0, 1.0)
    h, dv = image(a), image(a).clone(ca.MEM_DEVICE)
    np.testing.assert_allclose(ca.map(lambda x: x * 2 + 1, dv).numpy(), ca.map(lambda x: x * 2 + 1, h).numpy(), rtol=1e-6)
    assert ca.reduce(lambda x, y: x + y, dv, 0.0) == pytest.approx(ca.reduce(lambda x, y: x + y, h, 0.0), rel=1e-12)
    assert ca.reduce(lambda x, y: max(x, y), dv, -1.0) == ca.reduce(lambda x, y: max(x, y), h, -1.0)
    for axis in range(3):
        np.testing.assert_allclose(ca.scan(lambda x, y: x + y, dv, axis).numpy(),
                                   ca.scan(lambda x, y: x + y, h, axis).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not nvrtc_available(), reason="pyca built without NVRTC")
def test_cuda_half_compiles_with_nvrtc():
    """The CUDA half of every generated source compiles (NVRTC needs no GPU; PTX here)."""
    for k in (everything, saxpy, field_ops, stripped, stripped_errors, stores_then_reads, stencil):
        k.compile(cpu=False, gpu=True)
    from pyca.kernels import patterns

    im = image(rand(21))
    ca.map(lambda x: x + 1, im)
    ca.reduce(lambda x, y: x + y, im, 0.0)
    ca.scan(lambda x, y: x + y, im, 1)
    for v in list(patterns._memo.values()):
        (v if hasattr(v, "module") else v.gpu._build()).module.image  # noqa: B018 - compiles


def test_example_runs(kernel_cache):
    """examples/kernels_demo.py checks its results against NumPy and prints them."""
    env = dict(os.environ, PYCA_KERNEL_CACHE_DIR=str(kernel_cache), PYTHONPATH=PYCA_PATH)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "kernels_demo.py")], capture_output=True,
                       text=True, env=env, timeout=300, cwd=str(kernel_cache))
    assert r.returncode == 0, r.stderr
    found = __import__("re").findall(r"error\W*(\S+?)[;,]?(?:\s|$)", r.stdout)  # one number after each "error"
    errors = [float(x) for x in found]  # "nan" and "inf" read as such, and fail below
    assert len(found) == r.stdout.count("error") and len(errors) >= 5, r.stdout
    assert all(np.isfinite(errors)) and max(errors) < 1e-5, r.stdout


SOURCE_BLOCKS = '''
def deco(**kw):
    return lambda f: f


@deco(
    a=1,
)
def first(x):
    s = """
x"""
    return s


def second(
    x,
):
    return x
def third(x): return x  # noqa


class Holder:
    @staticmethod
    def fourth(x):
        if x:
            return 1

        # a comment at the margin
        return 2
'''


def test_function_source_blocks(tmp_path):
    """function_node finds each definition's own block (decorators, multi-line strings and signatures,
    a def right after another, a method): the same node as parsing the whole file."""
    import ast
    import importlib.util

    from pyca.kernels.translate import function_node

    path = tmp_path / "blocks_mod.py"
    path.write_text(SOURCE_BLOCKS)
    spec = importlib.util.spec_from_file_location("blocks_mod", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tree = ast.parse(SOURCE_BLOCKS)
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    for fn in (mod.first, mod.second, mod.third, mod.Holder.fourth):
        node, _, _ = function_node(fn)
        assert ast.dump(node) == ast.dump(defs[fn.__name__]) and node.lineno == defs[fn.__name__].lineno


@pytest.mark.skipif(not nvrtc_available(), reason="pyca built without NVRTC")
def test_register_cap_is_the_32_bit_paths():
    """On a GPU the module is compiled with the registers of the body's 32-bit instantiation alone
    as its cap (NVRTC makes the sm_90 CUBIN here without a GPU); PTX gets no cap."""
    import re

    from pyca.kernels.voxel import register_cap

    src = everything.source
    cap = register_cap(src, "everything", "sm_90")
    narrow = ca.cuda.SourceModule(src.replace("_body<long long>(", "_body<int>("), ["--ptxas-options=-v"],
                                  name="everything_32.cu", arch="sm_90")
    assert cap == int(re.search(r"Used (\d+) registers", narrow.log).group(1))
    capped = ca.cuda.SourceModule(src, [f"--maxrregcount={cap}", "--ptxas-options=-v"], name="everything.cu",
                                  arch="sm_90")
    assert int(re.search(r"Used (\d+) registers", capped.log).group(1)) <= cap
    assert register_cap(src, "everything", "compute_90") is None


@pytest.mark.skipif(not nvrtc_available(), reason="pyca built without NVRTC")
def test_split64_two_kernels(monkeypatch):
    """PYCA_KERNEL_SPLIT64=1 (opt-in until measured on a GPU): 32-bit voxel indices in one kernel,
    64-bit ones in another (-DPYCA_K_IDX64, compiled when a call has an array of 2^31 voxels or more;
    the dispatch plan picks), without the register cap. NVRTC makes the sm_90 CUBINs here."""
    import re

    assert everything.gpu.wide is None and everything._translate().gpu_options == []
    monkeypatch.setenv("PYCA_KERNEL_SPLIT64", "1")
    k = ca.kernel(register=False)(everything.__wrapped__)
    assert k._translate().gpu_options == ["-DPYCA_K_SPLIT64"] and k.gpu.wide.name == "pyca_k_everything_gpu64"
    src = k.source
    narrow = ca.cuda.SourceModule(src, ["-DPYCA_K_SPLIT64", "--ptxas-options=-v"], name="e.cu", arch="sm_90")
    wide = ca.cuda.SourceModule(src, ["-DPYCA_K_SPLIT64", "-DPYCA_K_IDX64", "--ptxas-options=-v"], name="e64.cu",
                                arch="sm_90")
    both = ca.cuda.SourceModule(src, ["--ptxas-options=-v"], name="e2.cu", arch="sm_90")
    assert re.findall(r"entry function '(\w+)'", narrow.log) == ["pyca_k_everything_gpu"]
    assert re.findall(r"entry function '(\w+)'", wide.log) == ["pyca_k_everything_gpu64"]
    regs = [int(re.search(r"Used (\d+) registers", m.log).group(1)) for m in (narrow, wide, both)]
    assert regs[0] < regs[1] and regs[0] < regs[2]


@ca.kernel(register=False)
def plane_index(out: ca.Image3D):
    i, j, k = ca.index()
    out[i, j, k] = float(k + 1)


@needs_gpu
@pytest.mark.parametrize("split", ["0", "1"])
def test_arrays_of_2_31_voxels_run_the_64_bit_path(split, monkeypatch):
    """An image of 2^31 + 2^21 voxels (8 GiB): the 64-bit path runs (the kernel's branch, or with
    PYCA_KERNEL_SPLIT64 the plan's second kernel; the 32-bit one would return at once and leave the
    image as it was); every voxel written, the last plane too."""
    monkeypatch.setenv("PYCA_KERNEL_SPLIT64", split)
    plane_index = ca.kernel(register=False)(globals()["plane_index"].__wrapped__)
    assert (plane_index.gpu.wide is not None) == (split == "1")
    g = ca.GridInfo((2048, 1024, 1025))
    out = ca.Image3D(g, ca.MEM_DEVICE)
    out.fill(0.0)
    plane_index(out)
    assert ca.reduce(lambda x, y: max(x, y), out, 0.0) == 1025.0
    assert ca.reduce(lambda x, y: min(x, y), out, 5000.0) == 1.0
    small = ca.Image3D(ca.GridInfo((4, 3, 2)), ca.MEM_DEVICE)
    plane_index(small)  # and the 32-bit one for a small image, with the plan holding both
    np.testing.assert_array_equal(small.numpy()[0, 0], [1.0, 2.0])
