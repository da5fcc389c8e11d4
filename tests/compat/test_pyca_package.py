"""What stopped PyCA's clients at their first lines: the `PyCA` package (PyCA.Core, PyCA.Common,
PyCA.Display), `from pyca import *`, SetCUDADevice / GetCUDADevice, PyCA.Common's debugging and
version helpers, GridInfo / Vec3D copies, SumComp, Gradient2, ShiftCoordinate and pyca.display.
Values are checked against NumPy."""
import importlib
import subprocess
import sys
import warnings

import numpy as np
import pytest
from compat_helpers import both_memory, field, gradient_ref, image, make_grid, npy

import pyca as ca
import pyca.common as common


def test_pyca_package_resolves_to_pyca_with_one_note():
    code = (
        "import warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    import PyCA.Core as ca\n"
        "    import PyCA.Common as common\n"
        "    import PyCA.Display as display\n"
        "    from PyCA.Core import *\n"
        "import pyca, pyca.common, pyca.display\n"
        "assert ca.Image3D is pyca.Image3D and ca.ApplyH is pyca.ApplyH\n"
        "assert common.AsNPCopy is pyca.common.AsNPCopy and display.DispImage is pyca.display.DispImage\n"
        "assert Field3D is pyca.Field3D and 'io' not in dir() and 'common' in dir()\n"
        "notes = [str(x.message) for x in w if type(x.message).__name__ == 'PyCACompatibilityNote']\n"
        "assert len(notes) == 1 and 'import pyca as ca' in notes[0], notes\n"
        "import matplotlib.pyplot as plt; plt.hold(True)\n"  # PyCA-era scripts call it between plots
        "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=_env_headless())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def _env_headless():
    import os

    env = dict(os.environ)
    for k in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND"):
        env.pop(k, None)
    return env


def test_star_import_exports_no_modules_over_a_clients_own():
    ns = {"io": "client's io", "common": "client's common"}
    exec("from pyca import *", ns)
    assert ns["io"] == "client's io" and ns["common"] == "client's common"
    assert ns["Image3D"] is ca.Image3D and ns["MultiscaleManager"] is ca.MultiscaleManager
    import types

    assert not [n for n in ca.__all__ if isinstance(getattr(ca, n), types.ModuleType)]
    # the modules stay attributes
    assert ca.io.load_image and ca.common.AsNPCopy


def test_gridinfo_and_vec3_copies_are_independent():
    g = ca.GridInfo(ca.Vec3Di(5, 6, 7), ca.Vec3Df(1.5, 2.0, 0.5), ca.Vec3Df(1, -2, 3))
    g.setDirection(np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]]))
    c = g.copy()
    assert c == g and c is not g
    np.testing.assert_array_equal(c.direction(), g.direction())
    c.setSpacing(ca.Vec3Df(9, 9, 9))
    assert g.spacing().tolist() == [1.5, 2.0, 0.5]
    for v in (ca.Vec3Df(1.5, 2, 3), ca.Vec3Di(1, 2, 3)):
        w = v.copy()
        assert type(w) is type(v) and w == v
        w.x = 7
        assert v.x != 7
    import copy

    assert copy.copy(g) == g and copy.deepcopy(ca.Vec3Df(1, 2, 3)) == ca.Vec3Df(1, 2, 3)


def test_cuda_device_choice():
    n = ca.GetNumberOfCUDADevices()
    if not ca.cuda_available():
        assert ca.GetCUDADevice() == -1
        with pytest.raises(ca.CudaError, match="SetCUDADevice"):
            ca.SetCUDADevice(0)
        return
    with pytest.raises(ValueError, match=r"SetCUDADevice: device .* out of range"):
        ca.SetCUDADevice(n)
    prev = ca.GetCUDADevice()
    try:
        ca.SetCUDADevice(n - 1)
        assert ca.GetCUDADevice() == n - 1
        im = ca.Image3D(ca.GridInfo(ca.Vec3Di(4, 4, 4)), ca.MEM_DEVICE)
        assert im.__dlpack_device__() == (2, n - 1)  # allocated on the chosen GPU
        ca.SetMem(im, 2.0)
        assert float(ca.Sum(im)) == 128.0
        assert f"device {n - 1} of" in ca.device_info()
        # another thread (a Dask worker thread, say) works on the chosen GPU too
        import threading

        seen = []
        t = threading.Thread(target=lambda: seen.append(
            ca.Image3D(ca.GridInfo(ca.Vec3Di(2, 2, 2)), ca.MEM_DEVICE).__dlpack_device__()))
        t.start()
        t.join()
        assert seen == [(2, n - 1)]
    finally:
        ca.SetCUDADevice(prev)


def test_common_debug_and_version_helpers():
    assert common.PyCAVersion() == "v" + ca.__version__
    assert common.PyCAVersionMajor() == int(ca.__version__.split(".")[0])
    assert common.PyCAVersionMinor() == int(ca.__version__.split(".")[1])
    assert isinstance(common.PyCABranch(), str) and isinstance(common.PyCACommit(), str)
    common.CheckCUDAError("inside a loop")  # nothing failed: returns
    ca.CheckCUDAError(__file__, 1, "core form")

    def inner():
        return common.GetOuterFrame()

    def outer():
        return inner()

    fname, line, func = outer()  # PyCA's: the frame two above GetOuterFrame's caller
    assert func == "outer" and fname == __file__
    assert callable(common.DebugHere)


@both_memory()
def test_sumcomp_is_the_sum_per_component(mem):
    grid = make_grid("3d")
    a = np.random.default_rng(1).uniform(-1, 1, tuple(grid.size()) + (3,)).astype(np.float32)
    s = ca.SumComp(field(a, grid, mem))
    assert isinstance(s, ca.Vec3Df)
    np.testing.assert_allclose(s.tolist(), a.astype(np.float64).sum(axis=(0, 1, 2)), rtol=1e-5)
    return np.array(s.tolist())


@pytest.mark.parametrize("gid", ["2d", "3d"])
@pytest.mark.parametrize("bc", [ca.BC_CLAMP, ca.BC_APPROX, ca.BC_WRAP])
@both_memory()
def test_gradient2_is_pycas_gradient(mem, gid, bc):
    grid = make_grid(gid)
    a = np.random.default_rng(2).uniform(-1, 1, tuple(grid.size())).astype(np.float32).astype(np.float64)
    out = ca.Field3D(grid, mem)
    ca.Gradient2(out, image(a, grid, mem), ca.DIFF_CENTRAL, bc)
    np.testing.assert_allclose(npy(out), gradient_ref(a, grid, ca.DIFF_CENTRAL, bc), rtol=1e-5, atol=1e-5)
    return out


@pytest.mark.parametrize("direction", [True, False])
@both_memory()
def test_shift_coordinate_rotates_the_axes(mem, direction):
    a = np.random.default_rng(3).uniform(-1, 1, (5, 4, 3)).astype(np.float32)
    im = image(a, ca.GridInfo(ca.Vec3Di(5, 4, 3)), mem)
    size = (3, 5, 4) if direction else (4, 3, 5)
    out = ca.Image3D(ca.GridInfo(ca.Vec3Di(*size)), mem)
    ca.ShiftCoordinate(out, im, direction)
    # PyCA's loop: dir -> out[z + (x + y sx) sz] = in[x, y, z], i.e. out(z, x, y) = in(x, y, z)
    ref = np.empty(size, dtype=np.float32)
    for x in range(5):
        for y in range(4):
            for z in range(3):
                if direction:
                    ref[z, x, y] = a[x, y, z]
                else:
                    ref[y, z, x] = a[x, y, z]
    np.testing.assert_array_equal(npy(out), ref)
    assert out.memType() == mem
    with pytest.raises(ValueError, match="ShiftCoordinate: out has size"):
        ca.ShiftCoordinate(im, im, direction)
    return out


# ------------------------------------------------------------------------------------------------
# pyca.display (matplotlib, headless here)
@pytest.fixture
def display():
    import matplotlib

    matplotlib.use("Agg")
    mod = importlib.import_module("pyca.display")
    yield mod
    mod.plt.close("all")


def test_dispimage_shows_the_middle_slice(display):
    a = np.random.default_rng(4).uniform(0, 1, (7, 6, 5)).astype(np.float32)
    im = image(a, ca.GridInfo(ca.Vec3Di(7, 6, 5)), ca.MEM_HOST)
    art = display.DispImage(im, "I0")
    np.testing.assert_array_equal(art.get_array(), a[:, :, 2])
    art = display.DispImage(im, "I0", sliceIdx=1, dim="x", newFig=False, t=True)
    np.testing.assert_array_equal(art.get_array(), a[1].T)


def test_gridplot_draws_the_deformed_grid(display):
    grid = ca.GridInfo(ca.Vec3Di(6, 5, 1))
    v = np.zeros((6, 5, 1, 3), np.float32)
    v[..., 0], v[..., 1] = 0.25, -0.5  # a translation (voxels, unit spacing)
    display.plt.figure()
    display.GridPlot(field(v, grid, ca.MEM_HOST), every=1, plotBase=False)
    lines = display.plt.gca().get_lines()
    # rows then columns: line j of the first set runs along x at column y=j, moved by the field
    xs = np.array([ln.get_xdata() for ln in lines[:5]])  # plotted x = y index + v_y
    ys = np.array([ln.get_ydata() for ln in lines[:5]])  # plotted y = x index + v_x
    np.testing.assert_allclose(xs, np.arange(5)[:, None] - 0.5 + 0 * np.arange(6)[None, :])
    np.testing.assert_allclose(ys, np.arange(6)[None, :] + 0.25 + 0 * np.arange(5)[:, None])


def test_jacdetplot_of_a_scaling(display):
    grid = ca.GridInfo(ca.Vec3Di(8, 8, 1), ca.Vec3Df(2.0, 2.0, 1.0))
    x = np.stack(np.meshgrid(np.arange(8.0), np.arange(8.0), [0.0], indexing="ij"), axis=-1)
    v = np.zeros((8, 8, 1, 3))
    v[..., 0] = 0.2 * x[..., 0] * 2.0  # world units: d(v_x)/dx = 0.2
    jd = display.JacDetPlot(field(v, grid, ca.MEM_HOST))
    np.testing.assert_allclose(npy(jd)[2:-2, 2:-2], 1.2, rtol=1e-5)


def test_display_helpers_write_files(display, tmp_path):
    a = np.random.default_rng(5).uniform(0, 1, (6, 5, 4)).astype(np.float32)
    im = image(a, ca.GridInfo(ca.Vec3Di(6, 5, 4)), ca.MEM_HOST)
    display.SaveSlice(str(tmp_path / "s.png"), im)
    display.SaveThreePaneArr(a, str(tmp_path / "t.png"))
    from matplotlib import image as mpimg

    assert mpimg.imread(str(tmp_path / "s.png")).shape[:2] == (5, 6)  # transposed by default
    # x, y and z middle slices side by side: (5 x 4), (6 x 4), (6 x 5) -> 6 rows, 4 + 4 + 5 columns
    assert mpimg.imread(str(tmp_path / "t.png")).shape[:2] == (6, 4 + 4 + 5)
    display.EnergyPlot([[3.0, 2.0, 1.0], [1.0, 0.5, 0.2]], legend=["a", "b"])
    V = [field(np.full((6, 5, 4, 3), 0.1, np.float32), im.grid(), ca.MEM_HOST) for _ in range(2)]
    frames = display.GenDefFrames(im, V, [0.0, 1.0, 2.0])
    assert tuple(frames.size()) == (6, 5, 3)
    np.testing.assert_allclose(npy(frames)[..., 0], a[:, :, 2], atol=1e-6)  # t = 0: undeformed
    assert len(display.SampleCMap(4)) == 4


def test_display_is_headless_safe():
    r = subprocess.run([sys.executable, "-c", "import pyca.display as d, matplotlib; print(matplotlib.get_backend())"],
                       capture_output=True, text=True, timeout=120, env=_env_headless())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().lower() == "agg"


def test_unchanged_warnings_free_import():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.import_module("pyca.display")
