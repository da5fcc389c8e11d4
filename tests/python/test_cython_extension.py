"""Cython integration: the installed .pxd files, pyca.get_include() & co., and the example package
examples/cython_extension built in a temporary folder against the installed pyca, by the recipes of
docs/cython.md followed literally (pip wheel --no-build-isolation; CMake).

Results are checked against NumPy; bad inputs (wrong type, device memory, mismatched sizes) must
raise clear Python exceptions and leave the inputs unchanged.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

import pyca as ca

pytest.importorskip("Cython")
pytest.importorskip("setuptools")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cython_extension"

GRID3 = ((17, 23, 31), (1.5, 1.0, 2.0))
GRID2 = ((31, 33, 1), (1.5, 2.1, 1.0))


def _grid(size, spacing, origin=(0.0, 0.0, 0.0)):
    return ca.GridInfo(ca.Vec3Di(*size), ca.Vec3Df(*spacing), ca.Vec3Df(*origin))


def _image(arr, g):
    return ca.Image3D.from_array(np.asfortranarray(arr, dtype=np.float32), grid=g)


def _field(arr, g):
    f = ca.Field3D(g, ca.MEM_HOST)
    np.asarray(f)[...] = arr
    return f


def _pyca_env():
    env = dict(os.environ)
    # Builds import the same pyca as this test (an installed one, or one on PYTHONPATH).
    pyca_parent = str(Path(ca.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([pyca_parent, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _elf_dynamic(path):
    """readelf -d of a file (None without readelf)."""
    if shutil.which("readelf") is None:
        return None
    return subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def example_wheel(tmp_path_factory):
    """examples/cython_extension built as docs/cython.md says (pip, --no-build-isolation, against the
    installed pyca), in a temporary folder: the wheel file."""
    if not EXAMPLE.is_dir():
        pytest.skip("examples/cython_extension is not in this checkout")
    if shutil.which(os.environ.get("CXX", "c++")) is None and shutil.which("g++") is None:
        pytest.skip("no C++ compiler")
    try:  # pip's metadata, not find_spec("pip"): that runs setuptools' distutils hook, which warns
        importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the recipe needs pip in this environment")
    src = tmp_path_factory.mktemp("cython_ext") / "cython_extension"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.so", "*.cpp", "__pycache__"))
    dist = tmp_path_factory.mktemp("cython_ext_dist")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
                        "-w", str(dist), "."], cwd=src, env=_pyca_env(), capture_output=True, text=True,
                       timeout=900)
    if r.returncode != 0:
        pytest.fail(f"pip wheel --no-build-isolation examples/cython_extension failed:\n{r.stdout[-4000:]}\n"
                    f"{r.stderr[-8000:]}")
    (whl,) = dist.glob("*.whl")
    return whl


@pytest.fixture(scope="module")
def ex(example_wheel, tmp_path_factory):
    """The example package, from its wheel unpacked into a temporary folder."""
    site = tmp_path_factory.mktemp("cython_ext_site")
    with zipfile.ZipFile(example_wheel) as z:
        z.extractall(site)
    sys.path.insert(0, str(site))
    try:
        import pyca_example
    finally:
        sys.path.remove(str(site))
    return pyca_example


def test_example_wheel_metadata_and_no_runpath(example_wheel):
    # The recipe's wheel is named from its [project] table (not UNKNOWN) and pins the pyca3d it was
    # built against.
    assert example_wheel.name.startswith("pyca_example-0.1.0-"), example_wheel.name
    with zipfile.ZipFile(example_wheel) as z:
        meta = z.read("pyca_example-0.1.0.dist-info/METADATA").decode()
        names = z.namelist()
    assert "Name: pyca-example" in meta
    assert f"Requires-Dist: pyca3d=={ca.__version__}" in meta
    (so,) = [n for n in names if n.startswith("pyca_example/_ops") and n.endswith(".so")]
    dyn = _elf_dynamic_from_zip(example_wheel, so)
    if dyn is None:
        pytest.skip("needs readelf")
    assert "libpyca.so" in dyn
    # No RUNPATH/RPATH: nothing points into the builder's environment.
    assert "RUNPATH" not in dyn and "RPATH" not in dyn, dyn


def _elf_dynamic_from_zip(whl, member):
    with tempfile.TemporaryDirectory() as d, zipfile.ZipFile(whl) as z:
        return _elf_dynamic(z.extract(member, d))


@pytest.fixture(scope="module")
def ex_cmake(tmp_path_factory):
    """pyca_example._ops built with the example's CMakeLists.txt (the CMake recipe of docs/cython.md)."""
    if not (EXAMPLE / "CMakeLists.txt").is_file() or shutil.which("cmake") is None:
        pytest.skip("needs cmake and examples/cython_extension/CMakeLists.txt")
    build = tmp_path_factory.mktemp("cython_ext_cmake")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    for cmd in (["cmake", "-S", str(EXAMPLE), "-B", str(build), *gen, f"-DPython_EXECUTABLE={sys.executable}"],
                ["cmake", "--build", str(build)]):
        r = subprocess.run(cmd, env=_pyca_env(), capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} failed:\n{r.stdout[-4000:]}\n{r.stderr[-8000:]}")
    (so,) = (build / "pyca_example").glob("_ops*.so")
    dyn = _elf_dynamic(so)
    assert dyn is None or ("RUNPATH" not in dyn and "RPATH" not in dyn), dyn
    spec = importlib.util.spec_from_file_location("pyca_example_cmake._ops", so)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------------------------------------
# What the installed package offers a third-party build


def test_get_include_and_library():
    pxd_dir, inc_dir = ca.get_include()
    assert (Path(pxd_dir) / "pyca" / "types.pxd").is_file()
    assert (Path(pxd_dir) / "pyca" / "ops.pxd").is_file()
    for h in ("pyca/array3d.h", "pyca/grid_info.h", "pyca/vec3.h", "pyca/ops.h", "pyca_capi.h"):
        assert (Path(inc_dir) / h).is_file(), h
    (libdir,) = ca.get_library_dirs()
    assert list(Path(libdir).glob("libpyca.so*"))
    assert ca.get_libraries() == ["pyca"]


def _pxd(name):
    return (Path(ca.get_include()[0]) / "pyca" / name).read_text()


def test_types_pxd_declares_the_core_types():
    text = _pxd("types.pxd")
    for cls in ("GridInfo", "Array3D", "Image3D(Array3D)", "Field3D(Array3D)", "Vec3[T]"):
        assert re.search(rf"^\s*cdef cppclass {re.escape(cls)}:", text, re.M), cls
    for td in ("Vec3[float] Vec3Df", "Vec3[int] Vec3Di"):
        assert f"ctypedef {td}" in text
    for enum in ("MemoryType", "BackgroundStrategy", "InterpT", "DimT", "DiffT", "BoundaryCondT"):
        assert re.search(rf"^\s*cdef enum {enum}:", text, re.M), enum
    # Every enumerator the Python module exports is declared.
    for name in ("MEM_HOST", "MEM_HOST_PINNED", "MEM_DEVICE", "BACKGROUND_STRATEGY_CLAMP", "INTERP_LINEAR",
                 "DIFF_CENTRAL", "BC_WRAP", "DIM_Z"):
        assert hasattr(ca, name) and re.search(rf"^\s+{name}$", text, re.M), name
    assert 'cdef extern from "pyca/array3d.h" namespace "pyca" nogil:' in text
    assert "Image3D* as_host_image(object obj" in text


def test_ops_pxd_declares_every_operation():
    text = _pxd("ops.pxd")
    declared = set(re.findall(r"^\s+\S.*? (\w+)\(.*\) except \+raise_py_error$", text, re.M))
    spec = ROOT / "tools" / "opgen" / "spec.py"
    if not spec.is_file():
        pytest.skip("tools/opgen is not in this checkout")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from opgen import spec as opspec

        names = {op.name for fam in opspec.load_all(ROOT / "ops") for op in fam.ops}
    finally:
        sys.path.remove(str(ROOT / "tools"))
    assert names and names <= declared, sorted(names - declared)


def test_installed_pxd_files_are_not_stale():
    gen = ROOT / "cython" / "gen_pxd.py"
    if not gen.is_file() or shutil.which(os.environ.get("SWIG_EXECUTABLE", "swig")) is None:
        pytest.skip("needs the checkout's cython/gen_pxd.py and SWIG")
    r = subprocess.run([sys.executable, str(gen), "--check", "--out", ca.get_include()[0]],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------------------------------------
# The example package against NumPy


@pytest.mark.parametrize("size,spacing", [GRID3, GRID2])
def test_clamp_inplace(ex, size, spacing):
    a = np.random.default_rng(1).standard_normal(size).astype(np.float32)
    im = _image(a, _grid(size, spacing))
    ex.clamp_inplace(im, -0.5, 0.25)
    np.testing.assert_array_equal(np.asarray(im), np.clip(a, -0.5, 0.25))


def test_cmake_recipe_builds_the_same_extension(ex_cmake):
    size, spacing = GRID2
    g = _grid(size, spacing)
    a = np.random.default_rng(7).standard_normal(size).astype(np.float32)
    im = _image(a, g)
    ex_cmake.clamp_inplace(im, -0.1, 0.1)
    np.testing.assert_array_equal(np.asarray(im), np.clip(a, -0.1, 0.1))
    with pytest.raises(TypeError, match=r"expected pyca\.Image3D"):
        ex_cmake.clamp_inplace(a, 0.0, 1.0)


@pytest.mark.parametrize("size,spacing", [GRID3, GRID2])
def test_divergence(ex, size, spacing):
    g = _grid(size, spacing, origin=(3.0, -1.0, 2.0))
    f = np.random.default_rng(2).standard_normal(size + (3,)).astype(np.float32)
    out = ca.Image3D(g, ca.MEM_HOST)
    ex.divergence(out, _field(f, g))
    ref = np.zeros(size, np.float64)
    for ax in range(3):
        if size[ax] > 1:  # numpy.gradient: central inside, one-sided at the border
            ref += np.gradient(f[..., ax].astype(np.float64), spacing[ax], axis=ax, edge_order=1)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-5)


def test_divergence_of_linear_field_is_its_trace(ex):
    size, spacing = GRID3  # v(x) = (2x, -3y, z/2) in world units: div v = 2 - 3 + 0.5 everywhere
    g = _grid(size, spacing)
    x, y, z = np.meshgrid(*(np.arange(n) * s for n, s in zip(size, spacing)), indexing="ij")
    f = np.stack([2 * x, -3 * y, 0.5 * z], axis=-1).astype(np.float32)
    out = ca.Image3D(g, ca.MEM_HOST)
    ex.divergence(out, _field(f, g))
    np.testing.assert_allclose(np.asarray(out), 2 - 3 + 0.5, atol=1e-4)


@pytest.mark.parametrize("size,spacing", [GRID3, GRID2])
def test_magnitude_returns_new_image(ex, size, spacing):
    g = _grid(size, spacing, origin=(1.0, 2.0, 3.0))
    f = np.random.default_rng(3).standard_normal(size + (3,)).astype(np.float32)
    v = _field(f, g)
    m = ex.magnitude(v)
    assert isinstance(m, ca.Image3D)
    assert m.memType() == ca.MEM_HOST
    assert tuple(m.size()) == size
    assert tuple(m.grid().spacing()) == pytest.approx(spacing)
    assert tuple(m.grid().origin()) == pytest.approx((1.0, 2.0, 3.0))
    np.testing.assert_allclose(np.asarray(m), np.linalg.norm(f.astype(np.float64), axis=-1), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(v), f)  # input unchanged


def test_blend_images_and_fields(ex):
    size, spacing = GRID3
    g = _grid(size, spacing)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2,) + size).astype(np.float32)
    out = ca.Image3D(g, ca.MEM_HOST)
    ex.blend(out, _image(a, g), _image(b, g), 0.25)
    np.testing.assert_allclose(np.asarray(out), 0.75 * a + 0.25 * b, rtol=1e-6, atol=1e-6)
    fa, fb = rng.standard_normal((2,) + size + (3,)).astype(np.float32)
    fout = ca.Field3D(g, ca.MEM_HOST)
    ex.blend(fout, _field(fa, g), _field(fb, g), 0.5)
    np.testing.assert_allclose(np.asarray(fout), 0.5 * fa + 0.5 * fb, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("size,spacing", [GRID3, GRID2])
def test_minmax_and_grid_values(ex, size, spacing):
    g = _grid(size, spacing, origin=(-1.0, 0.5, 4.0))
    a = np.random.default_rng(5).standard_normal(size).astype(np.float32)
    im = _image(a, g)
    assert ex.minmax(im) == (pytest.approx(a.min()), pytest.approx(a.max()))
    gv = ex.grid_values(im)
    assert (gv["nx"], gv["ny"], gv["nz"]) == size
    assert (gv["dx"], gv["dy"], gv["dz"]) == pytest.approx(spacing)
    assert (gv["ox"], gv["oy"], gv["oz"]) == pytest.approx((-1.0, 0.5, 4.0))
    assert gv["nvox"] == np.prod(size)
    assert bool(gv["is2d"]) == (size[2] == 1)
    assert ex.grid_values(ca.Field3D(g, ca.MEM_HOST))["nvox"] == np.prod(size)


# ------------------------------------------------------------------------------------------------
# Bad inputs: clear exceptions, inputs unchanged


@pytest.mark.parametrize("bad", [np.zeros((3, 4, 5), np.float32), None, 3.0, "im"])
def test_wrong_type_raises_type_error(ex, bad):
    with pytest.raises(TypeError, match=r"clamp_inplace: argument 'im': expected pyca\.Image3D"):
        ex.clamp_inplace(bad, 0.0, 1.0)
    with pytest.raises(TypeError, match=r"expected pyca\.Field3D"):
        ex.magnitude(bad)
    with pytest.raises(TypeError, match=r"expected pyca\.Image3D"):
        ex.minmax(bad)


def test_field_where_image_expected_and_back(ex):
    g = _grid(*GRID3)
    f = ca.Field3D(g, ca.MEM_HOST)
    f.fill(1.0)
    im = ca.Image3D(g, ca.MEM_HOST)
    im.fill(2.0)
    with pytest.raises(TypeError, match=r"expected pyca\.Image3D, got .*Field3D"):
        ex.clamp_inplace(f, 0.0, 0.5)
    with pytest.raises(TypeError, match=r"divergence: argument 'v': expected pyca\.Field3D"):
        ex.divergence(f, im)
    np.testing.assert_array_equal(np.asarray(f), 1.0)
    np.testing.assert_array_equal(np.asarray(im), 2.0)


def test_core_op_errors_come_through_from_nogil_code(ex):
    g = _grid(*GRID3)
    a = _image(np.ones(GRID3[0]), g)
    small = ca.Image3D(_grid((3, 4, 5), (1, 1, 1)), ca.MEM_HOST)
    small.fill(7.0)
    out = ca.Image3D(g, ca.MEM_HOST)
    out.fill(-1.0)
    # pyca's own size check inside MulC_Add_MulC (C++ exception -> ValueError naming op and argument)
    with pytest.raises(ValueError, match=r"MulC_Add_MulC.*'c'"):
        ex.blend(out, a, small, 0.5)
    np.testing.assert_array_equal(np.asarray(out), -1.0)
    np.testing.assert_array_equal(np.asarray(small), 7.0)
    with pytest.raises(ValueError, match="same grid size"):
        ex.divergence(small, ca.Field3D(g, ca.MEM_HOST))
    with pytest.raises(ValueError, match="lo"):
        ex.clamp_inplace(a, 1.0, 0.0)


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
def test_device_memory_raises_memory_type_error(ex):
    g = _grid(*GRID3)
    a = np.random.default_rng(6).standard_normal(GRID3[0]).astype(np.float32)
    dev = _image(a, g).to(ca.MEM_DEVICE)
    assert dev.memType() == ca.MEM_DEVICE
    msg = r"expected host memory, got MEM_DEVICE: call x\.toType\(pyca\.MEM_HOST\)"
    with pytest.raises(ca.MemoryTypeError, match=msg):
        ex.clamp_inplace(dev, 0.0, 1.0)
    with pytest.raises(TypeError, match=r"clamp_inplace: argument 'im': expected host memory"):
        ex.clamp_inplace(dev, 0.0, 1.0)
    dv = ca.Field3D(g, ca.MEM_DEVICE)
    with pytest.raises(ca.MemoryTypeError, match=msg):
        ex.magnitude(dv)
    np.testing.assert_array_equal(dev.numpy(), a)  # unchanged
    # Core operations run on the device from nogil code; mixing memory types is pyca's error.
    dout = ca.Image3D(g, ca.MEM_DEVICE)
    ex.blend(dout, dev, dev, 0.3)
    np.testing.assert_allclose(dout.numpy(), a, rtol=1e-6, atol=1e-6)
    assert ex.minmax(dev) == (pytest.approx(a.min()), pytest.approx(a.max()))
    with pytest.raises(ca.MemoryTypeError):
        ex.blend(dout, dev, _image(a, g), 0.3)
