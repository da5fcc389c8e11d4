"""Testing helpers for pyca and for packages built on it; also a pytest plugin.

The plugin (enabled by pyca's ``pytest11`` entry point, or with ``pytest_plugins = ["pyca.testing"]``)
generates CPU/GPU parity tests from :mod:`pyca.registry`: a test that requests the fixture
``pyca_parity_case`` is parametrized (visibly, one test per case) over every registered operation
with both implementations, per overload, grid (odd 3-D sizes and a 2-D grid) and enum value::

    import pytest

    @pytest.mark.pyca_parity(owner="mypkg")     # optional filter: owner=, names=, families=, builtin=
    def test_parity(pyca_parity_case):
        pyca_parity_case.run()

Each case runs the operation on seeded random host inputs and on device copies of them and compares
every array argument and the return value within the operation's tolerance. Operations without a
GPU version are listed as skipped with that reason; without a GPU every case is skipped with
"needs a CUDA GPU".

:func:`both_memory` runs one test body on host and device memory and compares what it returns.
Importing this module does not import pyca (the plugin loads in every pytest run of an environment
where pyca is installed).
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

__all__ = ["both_memory", "ArrayFactory", "to_numpy", "assert_results_close", "needs_gpu", "gpu_available",
           "nvrtc_available", "parity_params"]


def _pyca():
    import pyca

    return pyca


def gpu_available() -> bool:
    try:
        return bool(_pyca().cuda_available())
    except Exception:
        return False


def nvrtc_available() -> bool:
    """Whether pyca was built with NVRTC (it compiles the CUDA half of generated kernels without a GPU)."""
    try:
        return bool(_pyca().core._cuda_nvrtc_version())
    except Exception:  # noqa: BLE001 - a build without CUDA
        return False


def needs_gpu(fn=None):
    """``@needs_gpu``: skip the test with "needs a CUDA GPU" when none can be used."""
    import pytest

    mark = pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
    return mark(fn) if fn is not None else mark


# ------------------------------------------------------------------------------------------------
# Results
def to_numpy(x):
    """NumPy copies of pyca arrays (any memory type), numbers, Vec3s, and nested tuples/lists/dicts
    of them; other objects as they are."""
    p = _pyca()
    core = p.core
    if isinstance(x, (core.Image3D, core.Field3D)):
        return x.numpy()
    if isinstance(x, (core.Vec3Df, core.Vec3Di)):
        return np.array([x.x, x.y, x.z])
    if isinstance(x, dict):
        return {k: to_numpy(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(to_numpy(v) for v in x)
    if hasattr(x, "__cuda_array_interface__") and not isinstance(x, np.ndarray):
        try:
            import cupy

            return cupy.asnumpy(x)
        except ImportError:
            pass
    return x


def assert_results_close(actual, desired, *, rtol=1e-5, atol=1e-6, what="result"):
    """Compares nested results (after :func:`to_numpy`): arrays and numbers within rtol/atol (NaNs
    equal), everything else with ==."""
    if isinstance(desired, dict):
        assert isinstance(actual, dict) and actual.keys() == desired.keys(), f"{what}: keys differ"
        for k in desired:
            assert_results_close(actual[k], desired[k], rtol=rtol, atol=atol, what=f"{what}[{k!r}]")
        return
    if isinstance(desired, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(desired), f"{what}: lengths differ"
        for i, (a, d) in enumerate(zip(actual, desired)):
            assert_results_close(a, d, rtol=rtol, atol=atol, what=f"{what}[{i}]")
        return
    if desired is None or isinstance(desired, (str, bytes, bool)):
        assert actual == desired, f"{what}: {actual!r} != {desired!r}"
        return
    a = np.asarray(actual)
    d = np.asarray(desired)
    if d.dtype.kind in "fciu" and a.dtype.kind in "fciub":
        np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        assert np.array_equal(a, d), f"{what}: {actual!r} != {desired!r}"


# ------------------------------------------------------------------------------------------------
# both_memory
class ArrayFactory:
    """Makes pyca arrays in one memory type, with a random generator that restarts from the same
    seed for each memory type (so both runs of a :func:`both_memory` test see the same data).

    mem: the memory type; rng: a numpy Generator.
    image(grid, values=None) / field(grid, values=None): zeros, a constant, a NumPy array (shape
    (sx, sy, sz) or (sx, sy, sz, 3)) or a callable ``values(shape, rng)``.
    random_image / random_field(grid, low=-1, high=1): uniform random data.
    from_array(a, grid=None): a pyca array holding `a`, in `mem`.
    """

    def __init__(self, mem, seed=0):
        self.mem = mem
        self.rng = np.random.default_rng(seed)

    def _make(self, kind, grid, values):
        core = _pyca().core
        cls = core.Image3D if kind == "Image3D" else core.Field3D
        host = cls(grid, core.MEM_HOST)
        shape = tuple(grid.size()) + ((3,) if kind == "Field3D" else ())
        if values is None:
            values = 0.0
        if callable(values):
            values = values(shape, self.rng)
        np.asarray(host)[...] = np.asarray(values, dtype=np.float32)
        return host if self.mem == core.MEM_HOST else host.clone(self.mem)

    def image(self, grid, values=None):
        return self._make("Image3D", grid, values)

    def field(self, grid, values=None):
        return self._make("Field3D", grid, values)

    def random_image(self, grid, low=-1.0, high=1.0):
        return self.image(grid, lambda s, rng: rng.uniform(low, high, s))

    def random_field(self, grid, low=-1.0, high=1.0):
        return self.field(grid, lambda s, rng: rng.uniform(low, high, s))

    def from_array(self, a, grid=None, *, field=None):
        """A new array holding a copy of `a`: shape (sx, sy, sz) gives an Image3D, (sx, sy, sz, 3)
        a Field3D (`field` decides for 3-D shapes that could be either)."""
        core = _pyca().core
        a = np.asarray(a, dtype=np.float32)
        is_field = a.ndim == 4 if field is None else field
        cls = core.Field3D if is_field else core.Image3D
        host = cls.from_array(np.array(a, order="F", copy=True), grid)
        return host if self.mem == core.MEM_HOST else host.clone(self.mem)


def both_memory(rtol=1e-5, atol=1e-6, *, seed=0, mem_arg="mem", factory_arg="factory"):
    """Decorator (like CuPy's numpy_cupy_allclose): the test body, written once, receives a memory
    type (parameter named `mem_arg`, default ``mem``) and/or an :class:`ArrayFactory` (parameter
    named `factory_arg`, default ``factory``) and returns its results (pyca arrays, NumPy arrays,
    numbers, or tuples/lists/dicts of them).

    The test appears twice: ``[host]`` runs the body on MEM_HOST; ``[device]`` runs it on MEM_HOST
    and on MEM_DEVICE and compares the two results (as NumPy) within rtol/atol, and is skipped with
    "needs a CUDA GPU" when none can be used. Other fixtures and parameters work as usual::

        @both_memory(rtol=1e-6)
        def test_scale(factory):
            g = pyca.GridInfo((17, 23, 31))
            im = factory.random_image(g)
            out = factory.image(g)
            pyca.MulC(out, im, 2.0)
            return out
    """

    def deco(fn):
        import pytest

        sig = inspect.signature(fn)
        injected = [n for n in sig.parameters if n in (mem_arg, factory_arg)]
        if not injected:
            raise TypeError(f"both_memory: {fn.__name__} must take a parameter named {mem_arg!r} or {factory_arg!r}")
        others = [p for n, p in sig.parameters.items() if n not in injected]

        def run(mem, args, kwargs):
            f = ArrayFactory(mem, seed)
            inject = {}
            if mem_arg in injected:
                inject[mem_arg] = mem
            if factory_arg in injected:
                inject[factory_arg] = f
            out = fn(*args, **kwargs, **inject)
            _pyca().synchronize()
            return to_numpy(out)

        @functools.wraps(fn)
        def wrapper(*args, _pyca_memory, **kwargs):
            core = _pyca().core
            if _pyca_memory == "host":
                run(core.MEM_HOST, args, kwargs)
                return
            if not gpu_available():
                pytest.skip("needs a CUDA GPU")
            host = run(core.MEM_HOST, args, kwargs)
            dev = run(core.MEM_DEVICE, args, kwargs)
            assert_results_close(dev, host, rtol=rtol, atol=atol, what=f"{fn.__name__}: device vs host")

        wrapper.__signature__ = sig.replace(
            parameters=others + [inspect.Parameter("_pyca_memory", inspect.Parameter.KEYWORD_ONLY)]
        )
        return pytest.mark.parametrize("_pyca_memory", ["host", "device"])(wrapper)

    return deco


# ------------------------------------------------------------------------------------------------
# pytest plugin
def parity_params(*, owner=None, names=None, families=None, builtin=None):
    """pytest.param objects, one per parity case of the registered operations (filtered), with
    skip marks carrying the reason; usable directly with ``pytest.mark.parametrize``."""
    import pytest

    from pyca import registry

    names = [names] if isinstance(names, str) else names
    families = [families] if isinstance(families, str) else families
    cases = registry.parity_cases(owner=owner, names=names, families=families, builtin=builtin)
    params = [
        pytest.param(c, id=c.id, marks=[pytest.mark.skip(reason=c.skip_reason)] if c.skip_reason else [])
        for c in cases
    ]
    if not params:
        params = [pytest.param(None, id="no-operations", marks=pytest.mark.skip(reason="no registered operations"))]
    return params


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "pyca_parity(owner=None, names=None, families=None, builtin=None): restricts the CPU/GPU parity cases "
        "given to the fixture pyca_parity_case",
    )


def pytest_generate_tests(metafunc):
    if "pyca_parity_case" not in metafunc.fixturenames:
        return
    import pytest

    from pyca import registry

    marker = metafunc.definition.get_closest_marker("pyca_parity")
    metafunc.parametrize("pyca_parity_case", parity_params(**(dict(marker.kwargs) if marker else {})))
