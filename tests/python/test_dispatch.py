"""pyca_dispatch, pyca.cuda (NVRTC, disk cache, compiled-in kernels), the registry and the test
helpers of pyca.testing. References are NumPy; GPU parts skip without a GPU (compilation does not
need one: it targets compute_90 then)."""
import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pyca as ca
from pyca import cuda, registry
from pyca.dispatch import pyca_dispatch
from pyca.testing import both_memory

GPU = ca.cuda_available()
needs_gpu = pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
needs_cuda_build = pytest.mark.skipif(not ca.built_with_cuda(), reason="pyca was built without CUDA (no NVRTC)")

SCALE_SRC = r"""
#include <pyca/kernel.cuh>
extern "C" __global__ void scale_add(pyca::ImageView out, pyca::ImageView im, pyca::FieldView v, int n, float dt) {
  PYCA_FOR_EACH_VOXEL(out.size, x, y, z) {
    const unsigned long long i = out.index(x, y, z);
    out.data[i] = n * dt * im.data[i] + v.x[i] + v.y[i] + v.z[i];
  }
}
"""


def _scale_module():
    return cuda.SourceModule(SCALE_SRC, name="scale_add.cu", lazy=True)


CALLS = []


@pyca_dispatch(_scale_module().get_function("scale_add"), register=False)
def scale_add(out: ca.Image3D, im: ca.Image3D, v: ca.Field3D, n: int, dt: float):
    CALLS.append("cpu")
    o = np.asarray(out)
    o[...] = n * dt * np.asarray(im) + np.asarray(v).sum(axis=-1)


@pyca_dispatch(None, register=False)
def cpu_only(out: ca.Image3D, a: ca.Image3D):
    np.asarray(out)[...] = 2 * np.asarray(a)


def _ref(im, v, n, dt):
    return n * dt * im + v.sum(axis=-1)


@pytest.fixture(params=[(17, 23, 31), (31, 33, 1)], ids=["3d", "2d"])
def g(request):
    size = request.param
    sp = (1.5, 2.1, 1.0) if size[2] == 1 else (1.5, 1.0, 2.0)
    return ca.GridInfo(ca.Vec3Di(*size), ca.Vec3Df(*sp), ca.Vec3Df(0.5, -1.0, 2.0))


def _host_inputs(g, rng):
    size = tuple(g.size())
    im = ca.Image3D.from_array(np.asfortranarray(rng.uniform(-1, 1, size).astype(np.float32)), g)
    v = ca.Field3D.from_array(np.asfortranarray(rng.uniform(-1, 1, size + (3,)).astype(np.float32)), g)
    out = ca.Image3D(g, ca.MEM_HOST)
    return out, im, v


MEMS = {"host": "MEM_HOST", "pinned": "MEM_HOST_PINNED", "device": "MEM_DEVICE"}


def _needs(mem_names):
    return any(m != "host" for m in mem_names) and not GPU


# ------------------------------------------------------------------------------------------------
# Routing
@pytest.mark.parametrize("m_out", list(MEMS))
@pytest.mark.parametrize("m_im", list(MEMS))
@pytest.mark.parametrize("m_v", list(MEMS))
def test_routing_every_memory_combination(m_out, m_im, m_v, rng):
    if _needs((m_out, m_im, m_v)):
        pytest.skip("needs a CUDA GPU (pinned and device memory)")
    g = ca.GridInfo(ca.Vec3Di(17, 23, 31), ca.Vec3Df(1.5, 1, 2))
    out, im, v = _host_inputs(g, rng)
    ref = _ref(np.asarray(im), np.asarray(v), 3, 0.25)
    out, im, v = (a.clone(getattr(ca, MEMS[m])) for a, m in ((out, m_out), (im, m_im), (v, m_v)))
    sides = {m == "device" for m in (m_out, m_im, m_v)}
    CALLS.clear()
    if len(sides) > 1:
        before = [a.numpy() for a in (out, im, v)]
        with pytest.raises(ca.MemoryTypeError) as e:
            scale_add(out, im, v, 3, 0.25)
        msg = str(e.value)
        assert "scale_add" in msg
        # Names the argument that differs from the first one and the first one.
        assert "'out'" in msg and ("'im'" in msg or "'v'" in msg)
        for b, a in zip(before, (out, im, v)):
            np.testing.assert_array_equal(a.numpy(), b)
        assert CALLS == []
        return
    r = scale_add(out, im, v, 3, 0.25)
    assert r is None
    if sides == {True}:
        assert CALLS == []  # the kernel ran
        ca.synchronize()
    else:
        assert CALLS == ["cpu"]
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6, atol=1e-6)


def test_host_call_runs_cpu_version_with_keywords(g, rng):
    out, im, v = _host_inputs(g, rng)
    CALLS.clear()
    scale_add(out, im, v=v, dt=0.5, n=2)
    assert CALLS == ["cpu"]
    np.testing.assert_allclose(np.asarray(out), _ref(np.asarray(im), np.asarray(v), 2, 0.5), rtol=1e-6, atol=1e-6)


def test_numpy_scalars_accepted(g, rng):
    out, im, v = _host_inputs(g, rng)
    scale_add(out, im, v, np.int32(2), np.float32(0.5))
    np.testing.assert_allclose(np.asarray(out), _ref(np.asarray(im), np.asarray(v), 2, 0.5), rtol=1e-6, atol=1e-6)


@needs_gpu
def test_device_call_launches_kernel_on_stream(g, rng):
    out, im, v = _host_inputs(g, rng)
    ref = _ref(np.asarray(im), np.asarray(v), 3, 0.25)
    d = [a.clone(ca.MEM_DEVICE) for a in (out, im, v)]
    CALLS.clear()
    scale_add(*d, 3, 0.25, stream=ca.current_stream())
    ca.synchronize()
    assert CALLS == []
    np.testing.assert_allclose(d[0].numpy(), ref, rtol=1e-6, atol=1e-6)
    # Launch configuration overridden per call: any configuration covers the grid.
    d[0].fill(0.0)
    scale_add(*d, 3, 0.25, block=(8, 2, 1), grid=(1, 1, 1))
    ca.synchronize()
    np.testing.assert_allclose(d[0].numpy(), ref, rtol=1e-6, atol=1e-6)


@needs_gpu
def test_python_int_converted_to_kernel_int_and_range_checked(rng):
    g = ca.GridInfo(ca.Vec3Di(5, 4, 3))
    d = [a.clone(ca.MEM_DEVICE) for a in _host_inputs(g, rng)]
    with pytest.raises(ValueError, match="'n'.*32 bits"):
        scale_add(*d, 2**40, 1.0)


# ------------------------------------------------------------------------------------------------
# CPU-only operations
def test_cpu_only_host_call_works(g, rng):
    out, im, _ = _host_inputs(g, rng)
    cpu_only(out, im)
    np.testing.assert_array_equal(np.asarray(out), 2 * np.asarray(im))


@needs_gpu
def test_cpu_only_device_call_raises_not_implemented(rng):
    g = ca.GridInfo(ca.Vec3Di(5, 4, 3))
    out, im, _ = (a.clone(ca.MEM_DEVICE) for a in _host_inputs(g, rng))
    with pytest.raises(NotImplementedError) as e:
        cpu_only(out, im)
    msg = str(e.value)
    assert "cpu_only" in msg and "only a CPU version" in msg and "toType(pyca.MEM_HOST)" in msg


def test_cpu_only_device_message_without_gpu(monkeypatch, rng):
    # The message itself, with the plan's call answering "device arguments, no kernel" (2).
    monkeypatch.setattr(cpu_only, "_ccall", lambda *a: 2)
    with pytest.raises(NotImplementedError, match=r"cpu_only: only a CPU version exists.*toType\(pyca.MEM_HOST\)"):
        cpu_only(None, None)


# ------------------------------------------------------------------------------------------------
# Signature checks
@pytest.mark.parametrize(
    "pos, bad, expect",
    [
        (0, "field", "argument 'out' must be a pyca.Image3D, got pyca.Field3D"),
        (1, 3.0, "argument 'im' must be a pyca.Image3D, got float"),
        (2, "image", "argument 'v' must be a pyca.Field3D, got pyca.Image3D"),
        (3, 2.5, "argument 'n' must be an int, got float"),
        (3, "2", "argument 'n' must be an int, got str"),
        (4, "0.5", "argument 'dt' must be a real number, got str"),
        (4, None, "argument 'dt' must be a real number, got NoneType"),
    ],
)
def test_wrong_type_names_parameter_and_leaves_inputs(pos, bad, expect, rng):
    g = ca.GridInfo(ca.Vec3Di(7, 5, 3))
    out, im, v = _host_inputs(g, rng)
    args = [out, im, v, 2, 0.5]
    args[pos] = {"field": ca.Field3D(g, ca.MEM_HOST), "image": ca.Image3D(g, ca.MEM_HOST)}.get(bad, bad)
    before = [np.array(np.asarray(a)) for a in (out, im, v)]
    CALLS.clear()
    with pytest.raises(TypeError) as e:
        scale_add(*args)
    assert str(e.value).startswith("scale_add: ")
    assert expect in str(e.value)
    assert CALLS == []
    for b, a in zip(before, (out, im, v)):
        np.testing.assert_array_equal(np.asarray(a), b)


def test_wrong_argument_count_and_unknown_keyword(rng):
    g = ca.GridInfo(ca.Vec3Di(7, 5, 3))
    out, im, v = _host_inputs(g, rng)
    with pytest.raises(TypeError, match="scale_add: missing a required argument: 'dt'"):
        scale_add(out, im, v, 2)
    with pytest.raises(TypeError, match="scale_add: .*unexpected keyword argument 'bogus'"):
        scale_add(out, im, v, 2, 0.5, bogus=1)


def test_size_mismatch_names_both_arguments(rng):
    out, im, v = _host_inputs(ca.GridInfo(ca.Vec3Di(7, 5, 3)), rng)
    small = ca.Field3D(ca.GridInfo(ca.Vec3Di(7, 5, 2)), ca.MEM_HOST)
    with pytest.raises(ValueError, match=r"scale_add: size of 'v' \(7x5x2\) does not match size of 'out' \(7x5x3\)"):
        scale_add(out, im, small, 1, 1.0)


def test_size_check_can_be_disabled():
    @pyca_dispatch(None, check_sizes=False, register=False)
    def copy_corner(out: ca.Image3D, a: ca.Image3D):
        np.asarray(out)[0, 0, 0] = np.asarray(a)[0, 0, 0]

    a = ca.Image3D(ca.GridInfo(ca.Vec3Di(3, 3, 3)), ca.MEM_HOST)
    a.fill(5.0)
    out = ca.Image3D(ca.GridInfo(ca.Vec3Di(2, 2, 1)), ca.MEM_HOST)
    copy_corner(out, a)
    assert np.asarray(out)[0, 0, 0] == 5.0


def test_declared_signature_for_unannotated_function():
    @pyca_dispatch(None, signature="(out: Image3D, s: float)", register=False)
    def fill(out, s):
        np.asarray(out)[...] = s

    im = ca.Image3D(ca.GridInfo(ca.Vec3Di(3, 2, 1)), ca.MEM_HOST)
    fill(im, 2)
    assert np.all(np.asarray(im) == 2)
    with pytest.raises(TypeError, match="fill: argument 's' must be a real number"):
        fill(im, "x")
    with pytest.raises(TypeError, match="fill: argument 'out' must be a pyca.Image3D"):
        fill(np.zeros((3, 2, 1), np.float32), 1.0)


def test_vec3_and_bool_parameters():
    seen = []

    @pyca_dispatch(None, register=False)
    def op(out: ca.Image3D, v: ca.Vec3Df, k: ca.Vec3Di, flag: bool):
        seen.append((tuple(v), tuple(k), bool(flag)))

    im = ca.Image3D(ca.GridInfo(ca.Vec3Di(3, 2, 1)), ca.MEM_HOST)
    op(im, ca.Vec3Df(1, 2, 3), (1, 2, 3), True)
    op(im, (1.5, 2, 3), ca.Vec3Di(1, 1, 1), np.bool_(False))
    assert seen[0] == ((1.0, 2.0, 3.0), (1, 2, 3), True)
    with pytest.raises(TypeError, match="argument 'k' must be a Vec3Di or 3 ints"):
        op(im, (1, 2, 3), (1.5, 2, 3), True)
    with pytest.raises(TypeError, match="argument 'v' must be a Vec3Df or 3 numbers"):
        op(im, (1, 2), (1, 2, 3), True)
    with pytest.raises(TypeError, match="argument 'flag' must be a bool"):
        op(im, (1, 2, 3), (1, 2, 3), "yes")


def test_decoration_errors():
    f = _scale_module().get_function("scale_add")
    with pytest.raises(TypeError, match="CPU version takes 4 parameters .* kernel scale_add takes 5"):
        pyca_dispatch(f, register=False)(lambda out, im, v, n: None)
    with pytest.raises(TypeError, match="parameter 'v' is Image3D on the CPU but the kernel scale_add takes pyca::FieldView"):

        @pyca_dispatch(f, register=False)
        def bad(out: ca.Image3D, im: ca.Image3D, v: ca.Image3D, n: int, dt: float):
            pass

    with pytest.raises(TypeError, match="parameter 'n' is float on the CPU"):

        @pyca_dispatch(f, register=False)
        def bad2(out: ca.Image3D, im: ca.Image3D, v: ca.Field3D, n: float, dt: float):
            pass

    with pytest.raises(ValueError, match="parameter name 'stream' is reserved"):

        @pyca_dispatch(None, register=False)
        def bad3(out: ca.Image3D, stream: int):
            pass

    with pytest.raises(TypeError, match="must be called"):

        @pyca_dispatch
        def bad4(out: ca.Image3D):
            pass


def test_unannotated_parameters_take_kernel_types(rng):
    f = _scale_module().get_function("scale_add")

    @pyca_dispatch(f, register=False)
    def loose(out, im, v, n, dt):
        pass

    out, im, v = _host_inputs(ca.GridInfo(ca.Vec3Di(3, 3, 3)), rng)
    with pytest.raises(TypeError, match="loose: argument 'v' must be a pyca.Field3D"):
        loose(out, im, im, 1, 1.0)
    assert loose.codes == "IIFif"


def test_stream_argument_forms(rng):
    out, im, v = _host_inputs(ca.GridInfo(ca.Vec3Di(3, 3, 3)), rng)

    class ProtoStream:
        def __cuda_stream__(self):
            return (0, 0)

    class TorchLike:
        cuda_stream = 0

    for s in (None, 0, ProtoStream(), TorchLike()):
        scale_add(out, im, v, 1, 1.0, stream=s)  # host calls ignore the stream
    assert cuda.stream_handle(ProtoStream()) == 0 and cuda.stream_handle(TorchLike()) == 0
    with pytest.raises(TypeError, match="stream must be"):
        scale_add(out, im, v, 1, 1.0, stream="default")


# ------------------------------------------------------------------------------------------------
# Kernel sources: parsing, compilation, cache
def test_parse_kernel_params():
    src = r"""
    // __global__ void commented(int x) {}
    #include <pyca/kernel.cuh>
    namespace ns { __global__ void k1(pyca::ImageView a, float s) {} }
    template <class T> __global__ void k2(T* p) {}
    extern "C" { __global__ void k3(const float* __restrict__ p, unsigned n, pyca::Vec3Df v) {} }
    __global__ void __launch_bounds__(256) k4(pyca::FieldView f, size_t n, bool b, double d, long long q,
                                               const pyca::Vec3Di k) {}
    """
    ks = cuda._find_kernels(src)
    assert sorted(ks) == ["k1", "k2", "k3", "k4"]
    assert ks["k1"]["qualified"] == "ns::k1" and not ks["k1"]["extern_c"]
    assert ks["k2"]["template"] and ks["k3"]["extern_c"]
    assert cuda.parse_kernel_params(src, "k1") == [("pyca::ImageView", "a"), ("float", "s")]
    assert cuda._codes_of(cuda.parse_kernel_params(src, "k3"), "k3") == "puV"
    assert cuda._codes_of(cuda.parse_kernel_params(src, "k4"), "k4") == "FLbdlv"
    with pytest.raises(ValueError, match="no __global__ function named 'nope'"):
        cuda.parse_kernel_params(src, "nope")
    with pytest.raises(TypeError, match="cannot pass kernel parameter 'm' of type 'Matrix'"):
        cuda._codes_of([("Matrix", "m")], "k")


@needs_cuda_build
def test_compile_without_gpu_for_explicit_arch(tmp_path):
    cuda.set_cache_dir(tmp_path)
    try:
        m = cuda.SourceModule(SCALE_SRC, arch="compute_90")
        assert m.cache_hit is None
        assert b".entry scale_add" in m.image  # PTX
        f = m.get_function("scale_add")
        assert f.codes == "IIFif" and f.param_names == ("out", "im", "v", "n", "dt")
        # C++ linkage: lowered (mangled) names through name expressions.
        m2 = cuda.SourceModule("#include <pyca/kernel.cuh>\nnamespace q { __global__ void k(pyca::ImageView a) {} }",
                               arch="compute_90")
        assert m2._lowered("k").startswith("_ZN1q1k")
    finally:
        cuda.set_cache_dir(None)


@needs_cuda_build
def test_lazy_module_compiles_at_first_use(tmp_path):
    cuda.set_cache_dir(tmp_path)
    try:
        m = cuda.SourceModule(SCALE_SRC + "// lazy\n", arch="compute_90", lazy=True)
        f = m.get_function("scale_add")  # parsing only
        assert m._compiled is None and f.codes == "IIFif"
        if GPU:
            assert f.handle  # compiles, loads, checks the parameters
        else:
            with pytest.raises(ca.CudaError):
                f.handle  # compiles, then cannot load without a GPU
        assert m._compiled is not None
    finally:
        cuda.set_cache_dir(None)


@needs_cuda_build
def test_compile_error_carries_log(tmp_path):
    cuda.set_cache_dir(tmp_path)
    try:
        with pytest.raises(cuda.CompileError) as e:
            cuda.SourceModule('extern "C" __global__ void k(float* p) { p[0] = undefined_name; }', name="broken.cu",
                              arch="compute_90")
        err = e.value
        assert err.name == "broken.cu"
        assert "undefined_name" in err.log and "error" in err.log
        assert "--gpu-architecture=compute_90" in err.options
        assert "broken.cu" in str(err) and "undefined_name" in str(err)
        with pytest.raises(cuda.CompileError, match="cannot open source file"):
            cuda.SourceModule('#include "missing_header.cuh"\n', name="inc.cu", arch="compute_90")
        assert not list(tmp_path.glob("*.pycak"))  # failures are not cached
    finally:
        cuda.set_cache_dir(None)


_CACHE_CHILD = r"""
import json, sys
import pyca
from pyca import cuda
m = cuda.SourceModule(sys.argv[1], arch="compute_90")
print(json.dumps({"hit": m.cache_hit, "size": len(m.image)}))
"""


@needs_cuda_build
def test_disk_cache_is_hit_by_another_process(tmp_path):
    src = SCALE_SRC + "\n// cache test %d\n" % os.getpid()
    env = dict(os.environ, PYCA_KERNEL_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("PYCA_KERNEL_CACHE", None)

    def child():
        r = subprocess.run([sys.executable, "-c", _CACHE_CHILD, src], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    first = child()
    assert first["hit"] is None
    files = list((tmp_path / "cache").glob("*.pycak"))
    assert len(files) == 1
    assert not list((tmp_path / "cache").glob(".tmp-*"))  # written to a temp file, renamed
    second = child()
    assert second == {"hit": "disk", "size": first["size"]}
    # Other options: another entry.
    cuda.set_cache_dir(tmp_path / "cache")
    try:
        m = cuda.SourceModule(src, ["-DOTHER=1"], arch="compute_90")
        assert m.cache_hit is None
        assert len(list((tmp_path / "cache").glob("*.pycak"))) == 2
        # A corrupted entry is ignored and rewritten.
        cuda.clear_cache(memory_only=True)
        files[0].write_bytes(b"garbage")
        m = cuda.SourceModule(src, arch="compute_90")
        assert m.cache_hit is None
        cuda.clear_cache(memory_only=True)
        assert cuda.SourceModule(src, arch="compute_90").cache_hit == "disk"
    finally:
        cuda.set_cache_dir(None)


@needs_cuda_build
def test_concurrent_processes_share_cache(tmp_path):
    src = SCALE_SRC + "\n// concurrent %d\n" % os.getpid()
    env = dict(os.environ, PYCA_KERNEL_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", _CACHE_CHILD, src], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    sizes = {json.loads(o[0].strip().splitlines()[-1])["size"] for o in outs}
    assert len(sizes) == 1
    assert len(list(tmp_path.glob("*.pycak"))) == 1 and not list(tmp_path.glob(".tmp-*"))


def test_cache_dir_configuration(monkeypatch, tmp_path):
    monkeypatch.setenv("PYCA_KERNEL_CACHE_DIR", str(tmp_path / "x"))
    assert cuda.get_cache_dir() == tmp_path / "x"
    monkeypatch.setenv("PYCA_KERNEL_CACHE", "0")
    assert cuda.get_cache_dir() is None
    cuda.set_cache_dir(tmp_path / "y")
    try:
        assert cuda.get_cache_dir() == tmp_path / "y"
    finally:
        cuda.set_cache_dir(None)


# ------------------------------------------------------------------------------------------------
# Compiled-in kernels, launch errors
@needs_cuda_build
def test_registered_kernels_found_from_python():
    reg = cuda.registered_kernels()
    if "pyca_ext_ssd_gradient" not in reg:
        pytest.skip("pyca/kernels/*.cu not compiled into libpyca in this build")
    assert reg["pyca_ext_ssd_gradient"] == "FIIF"
    assert reg["pyca_ext_field_axpby"] == "FfFfF"
    f = cuda.get_kernel("pyca_ext_squared_diff")
    assert f.codes == "III"
    with pytest.raises(KeyError, match="no compiled-in kernel registered as 'nope'"):
        cuda.get_kernel("nope")


@needs_gpu
def test_launch_error_names_operation(rng):
    g = ca.GridInfo(ca.Vec3Di(5, 4, 3))
    d = [a.clone(ca.MEM_DEVICE) for a in _host_inputs(g, rng)]
    with pytest.raises(ca.CudaError, match="scale_add: CUDA kernel launch failed"):
        scale_add(*d, 1, 1.0, block=(2048, 1, 1))
    # The failed launch does not poison later ones.
    scale_add(*d, 1, 1.0)
    ca.synchronize()


@needs_gpu
def test_function_direct_launch_and_host_refusal(rng):
    f = cuda.SourceModule(SCALE_SRC).get_function("scale_add")
    g = ca.GridInfo(ca.Vec3Di(9, 7, 5))
    out, im, v = _host_inputs(g, rng)
    with pytest.raises(ca.MemoryTypeError, match="scale_add: a kernel needs"):
        f(out, im, v, 1, 1.0)
    d = [a.clone(ca.MEM_DEVICE) for a in (out, im, v)]
    f(*d, 2, 0.5)
    ca.synchronize()
    np.testing.assert_allclose(d[0].numpy(), _ref(np.asarray(im), np.asarray(v), 2, 0.5), rtol=1e-6, atol=1e-6)


@needs_gpu
def test_kernel_parameter_mismatch_detected_at_load(rng):
    m = cuda.SourceModule(SCALE_SRC)
    f = m.get_function("scale_add", signature="(pyca::ImageView out, pyca::ImageView im, pyca::ImageView v, int n, "
                                              "float dt)")
    with pytest.raises(TypeError, match="kernel parameter 2 has 64 bytes"):
        f.handle
    g = m.get_function("scale_add", signature="(pyca::ImageView out, pyca::ImageView im, pyca::FieldView v, int n, "
                                              "float dt, float extra)")
    with pytest.raises(TypeError, match="the kernel takes 5 parameters, but 6 are declared"):
        g.handle


# ------------------------------------------------------------------------------------------------
# pyca.ext against NumPy
def _rand(shape, rng):
    return np.asfortranarray(rng.uniform(-1, 1, shape).astype(np.float32))


@both_memory(rtol=1e-6, atol=1e-6)
def test_ext_ssd_gradient(factory, g):
    shape = tuple(g.size())
    d, t, gr = _rand(shape, factory.rng), _rand(shape, factory.rng), _rand(shape + (3,), factory.rng)
    out = factory.field(g)
    ca.ext.ssd_gradient(out, factory.from_array(d, g), factory.from_array(t, g), factory.from_array(gr, g))
    np.testing.assert_allclose(out.numpy(), (d - t)[..., None] * gr, rtol=1e-6, atol=1e-6)
    return out


@both_memory(rtol=1e-6, atol=1e-6)
def test_ext_field_axpby_in_place(factory, g):
    shape = tuple(g.size()) + (3,)
    x, y = _rand(shape, factory.rng), _rand(shape, factory.rng)
    fx, fy = factory.from_array(x, g), factory.from_array(y, g)
    ca.ext.field_axpby(fx, 0.5, fx, -2, fy)  # out aliases x
    np.testing.assert_allclose(fx.numpy(), np.float32(0.5) * x + np.float32(-2) * y, rtol=1e-6, atol=1e-6)
    return fx


@both_memory(rtol=1e-6, atol=1e-6)
def test_ext_squared_diff(factory, g):
    shape = tuple(g.size())
    a, b = _rand(shape, factory.rng), _rand(shape, factory.rng)
    out = factory.image(g)
    ca.ext.squared_diff(out, factory.from_array(a, g), factory.from_array(b, g))
    np.testing.assert_allclose(out.numpy(), (a - b) ** 2, rtol=1e-6, atol=1e-6)
    return out


def test_ext_errors_name_operation_and_argument():
    g = ca.GridInfo(ca.Vec3Di(3, 3, 3))
    with pytest.raises(TypeError, match="field_axpby: argument 'a' must be a real number"):
        ca.ext.field_axpby(ca.Field3D(g), "1", ca.Field3D(g), 1.0, ca.Field3D(g))
    with pytest.raises(TypeError, match="squared_diff: argument 'b' must be a pyca.Image3D, got pyca.Field3D"):
        ca.ext.squared_diff(ca.Image3D(g), ca.Image3D(g), ca.Field3D(g))


# ------------------------------------------------------------------------------------------------
# Registry
def test_registry_lists_ext_operations():
    names = {o.name for o in registry.ops(owner="pyca", builtin=False)}
    assert {"pyca.ext.ssd_gradient", "pyca.ext.field_axpby", "pyca.ext.squared_diff"} <= names
    info = registry.get("pyca.ext.ssd_gradient")
    assert info.call is ca.ext.ssd_gradient and info.has_gpu and info.cpu is ca.ext.ssd_gradient.cpu
    assert [p.type for p in info.overloads[0].params] == ["Field3D", "Image3D", "Image3D", "Field3D"]
    assert info.overloads[0].params[0].output and (info.rtol, info.atol) == (1e-6, 1e-6)
    with pytest.raises(KeyError):
        registry.get("no.such.op")


def test_registry_user_operation_and_cases():
    @pyca_dispatch(None, registry_name="testpkg.double", inputs={"a": "positive"})
    def double(out: ca.Image3D, a: ca.Image3D):
        np.asarray(out)[...] = 2 * np.asarray(a)

    try:
        info = registry.get("testpkg.double")
        assert info.owner == "tests" or info.owner  # owner is the module's top-level package
        cases = registry.parity_cases(names=["testpkg.double"], gpu_available=True)
        assert {c.grid_kind for c in cases} == {"3d", "2d"}
        assert all(c.skip_reason == "testpkg.double has no GPU implementation (CPU only)" for c in cases)
        args = cases[0].inputs()
        assert np.all(np.asarray(args[1]) >= 0.5)  # "positive" hint
        sizes = {tuple(c.inputs()[0].size()) for c in cases}
        assert sizes == {(17, 15, 13), (31, 33, 1)}
    finally:
        registry.unregister("testpkg.double")


def test_parity_cases_without_gpu_skip_with_reason():
    cases = registry.parity_cases(owner="pyca", builtin=False, gpu_available=False)
    assert cases and all(c.skip_reason == "needs a CUDA GPU" for c in cases)


def test_builtin_operations_in_registry():
    try:
        import pyca._opspec as spec
    except ImportError:
        pytest.skip("pyca._opspec not generated in this build")
    if not spec.OPS:
        pytest.skip("no built-in operations described")
    name = spec.OPS[0]["name"]
    info = registry.get(name)
    assert info.builtin and info.owner == "pyca" and info.family == spec.OPS[0]["family"]
    assert len(info.overloads) == len(spec.OPS[0]["overloads"])


# ------------------------------------------------------------------------------------------------
# The pytest plugin, as a user's package would use it
def _plugin_is_installed() -> bool:
    return any(ep.value == "pyca.testing" for ep in importlib.metadata.entry_points(group="pytest11"))


def test_plugin_generates_parity_tests_for_user_package(tmp_path):
    (tmp_path / "userops.py").write_text(textwrap.dedent('''
        import numpy as np
        import pyca
        from pyca.dispatch import pyca_dispatch
        from pyca.cuda import SourceModule

        SRC = r"""
        #include <pyca/kernel.cuh>
        extern "C" __global__ void neg(pyca::ImageView out, pyca::ImageView a) {
          PYCA_FOR_EACH_VOXEL(out.size, x, y, z) { out(x, y, z) = -a(x, y, z); }
        }"""

        @pyca_dispatch(SourceModule(SRC, lazy=True).get_function("neg"), registry_name="userops.neg")
        def neg(out: pyca.Image3D, a: pyca.Image3D):
            np.negative(np.asarray(a), out=np.asarray(out))

        @pyca_dispatch(None, registry_name="userops.twice")
        def twice(out: pyca.Image3D, a: pyca.Image3D):
            np.multiply(np.asarray(a), 2, out=np.asarray(out))
        '''))
    (tmp_path / "test_user.py").write_text(textwrap.dedent('''
        import pytest
        import userops

        @pytest.mark.pyca_parity(owner="userops")
        def test_parity(pyca_parity_case):
            pyca_parity_case.run()
        '''))
    args = [sys.executable, "-m", "pytest", "-rs", "-v", "-p", "no:cacheprovider", str(tmp_path)]
    if not _plugin_is_installed():
        args[3:3] = ["-p", "pyca.testing"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path)] + sys.path))
    r = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "test_parity[userops.neg(Image3D,Image3D)-3d]" in out
    assert "test_parity[userops.neg(Image3D,Image3D)-2d]" in out
    assert "userops.twice has no GPU implementation (CPU only)" in out
    if GPU:
        assert "2 passed" in out
    else:
        assert "needs a CUDA GPU" in out and "4 skipped" in out


# ------------------------------------------------------------------------------------------------
# both_memory itself
@both_memory(rtol=0, atol=0)
def test_both_memory_passes_memory_type(mem, factory):
    assert factory.mem == mem
    im = factory.image(ca.GridInfo(ca.Vec3Di(3, 2, 1)), 1.5)
    assert im.memType() == mem
    return {"im": im, "n": 3, "t": (1.0, np.arange(3))}


def test_both_memory_requires_injected_parameter():
    with pytest.raises(TypeError, match="must take a parameter named 'mem' or 'factory'"):

        @both_memory()
        def body(x):
            pass


def test_assert_results_close_reports_differences():
    from pyca.testing import assert_results_close

    assert_results_close({"a": (1.0, np.ones(3))}, {"a": (1.0 + 1e-9, np.ones(3))})
    with pytest.raises(AssertionError, match="r\\['a'\\]\\[1\\]"):
        assert_results_close({"a": (1.0, np.zeros(3))}, {"a": (1.0, np.ones(3))}, what="r")
