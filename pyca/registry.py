"""The registry of pyca operations: every operation with its CPU and GPU implementations, signature,
an example-input factory and a CPU/GPU tolerance.

Two kinds of entries:

* the built-in operations (``pyca.Add``, ``pyca.ApplyH``, ...), read from ``pyca._opspec`` (generated
  from ``ops/*.yaml`` by the build); each routes by memory type itself;
* operations defined with :func:`pyca.dispatch.pyca_dispatch` (pyca's own in :mod:`pyca.ext`, and
  those of any package that uses the decorator), registered when they are defined.

:mod:`pyca.testing` turns the registry into CPU/GPU parity tests. ``pyca.registry.ops()`` lists
everything; ``pyca.registry.get(name)`` finds one entry.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import threading
from typing import Any, Callable

import numpy as np

__all__ = ["Param", "Overload", "OpInfo", "register", "unregister", "get", "ops", "parity_cases", "ParityCase",
           "make_inputs", "PARITY_GRIDS", "CPU_ONLY_REASON"]

CPU_ONLY_REASON = "{name} has no GPU implementation (CPU only)"


def _core():
    from . import core

    return core


@dataclasses.dataclass(frozen=True)
class Param:
    """One parameter. `type`: Image3D, Field3D, float, double, int, unsigned int, size_t, bool,
    Vec3Df, Vec3Di, GridInfo, an enum name (BackgroundStrategy, ...) or ``object``."""

    name: str
    type: str
    output: bool = False  # written by the operation (non-const Image3D&/Field3D&)
    default: Any = None  # C++ default (a string) for built-ins, a Python value otherwise
    has_default: bool = False

    @property
    def is_array(self) -> bool:
        return self.type in ("Image3D", "Field3D")


@dataclasses.dataclass(frozen=True)
class Overload:
    params: tuple[Param, ...]
    ret: str = "void"  # void, float, double, int, Vec3Df, std::pair<float, float>
    signature: str = ""


@dataclasses.dataclass
class OpInfo:
    """A registered operation.

    name: registry key (``"Add"``; ``"pyca.ext.ssd_gradient"`` for dispatched operations).
    call: the operation as users call it (routes by memory type).
    cpu / gpu: the implementations: the CPU function and the kernel (a :class:`pyca.cuda.Function`),
        ``"built-in"`` for built-in operations, or None when there is no such implementation.
    overloads: signatures (built-ins may have several; dispatched operations have one).
    example: ``example(overload_index, grid, rng) -> list of host arguments`` or None for the
        default factory (:func:`make_inputs`, driven by types and `inputs` hints).
    rtol / atol: CPU/GPU tolerance of the parity tests; `skip`: a reason not to test parity.
    any_size: names of input arrays that may have another size than the output (ApplyH's source);
        the parity cases then include grids where they do ("3d-any-size", "2d-any-size").
    fixed: example values by argument name for the default factory: an array's size ([x, y, z], e.g.
        a joint histogram's bins) or a scalar's value (a number of bins, an intensity range).
    """

    name: str
    call: Callable
    cpu: Any
    gpu: Any
    overloads: tuple[Overload, ...]
    family: str = ""
    owner: str = ""
    doc: str = ""
    inputs: dict = dataclasses.field(default_factory=dict)
    example: Callable | None = None
    rtol: float = 1e-5
    atol: float = 1e-6
    skip: str | None = None
    builtin: bool = False
    any_size: tuple = ()
    fixed: dict = dataclasses.field(default_factory=dict)

    @property
    def has_gpu(self) -> bool:
        return self.gpu is not None


_lock = threading.Lock()
_ops: dict[str, OpInfo] = {}
_builtins_loaded = False


def register(info: OpInfo, *, replace: bool = True) -> OpInfo:
    """Adds (or, with `replace`, replaces) an operation."""
    with _lock:
        if not replace and info.name in _ops:
            raise ValueError(f"an operation named {info.name!r} is already registered")
        _ops[info.name] = info
    return info


def unregister(name: str) -> None:
    with _lock:
        _ops.pop(name, None)


def _load_builtins() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    try:
        from . import _opspec
    except ImportError:
        return
    import pyca

    for op in _opspec.OPS:
        overloads = []
        for ov in op["overloads"]:
            params = tuple(
                Param(a["name"], a["type"], output=a["ref"] == "&" and not a["const"] and a["type"] in ("Image3D", "Field3D"),
                      default=a["default"], has_default=a["default"] is not None)
                for a in ov["args"]
            )
            overloads.append(Overload(params, ov["ret"], ov.get("signature", "")))
        parity = dict(op.get("parity") or {})
        fn = getattr(pyca, op["name"], None)
        skip = parity.get("skip")
        if fn is None:
            skip = skip or f"pyca.{op['name']} is described in ops/{op['family']}.yaml but not wrapped"
        info = OpInfo(
            name=op["name"], call=fn, cpu="built-in", gpu="built-in", overloads=tuple(overloads),
            family=op["family"], owner="pyca", doc=op.get("doc", ""), inputs=dict(op.get("inputs") or {}),
            rtol=float(parity.get("rtol", 1e-5)), atol=float(parity.get("atol", 1e-6)), skip=skip, builtin=True,
            any_size=tuple(op.get("any_size") or ()), fixed=dict(op.get("fixed") or {}),
        )
        with _lock:
            _ops.setdefault(info.name, info)


def get(name: str) -> OpInfo:
    _load_builtins()
    with _lock:
        if name not in _ops:
            raise KeyError(f"no operation named {name!r} is registered")
        return _ops[name]


def ops(*, owner: str | None = None, family: str | None = None, builtin: bool | None = None) -> list[OpInfo]:
    """Registered operations (built-ins included), optionally filtered."""
    _load_builtins()
    with _lock:
        out = list(_ops.values())
    if owner is not None:
        out = [o for o in out if o.owner == owner]
    if family is not None:
        out = [o for o in out if o.family == family]
    if builtin is not None:
        out = [o for o in out if o.builtin == builtin]
    return sorted(out, key=lambda o: (not o.builtin, o.family, o.name))


# ------------------------------------------------------------------------------------------------
# Example inputs
# Grids of the parity tests: odd sizes, anisotropic spacing, a 2-D grid.
PARITY_GRIDS = {
    "3d": dict(size=(17, 15, 13), spacing=(1.5, 1.0, 2.0), origin=(0.5, -1.0, 2.0)),
    "2d": dict(size=(31, 33, 1), spacing=(1.5, 2.1, 1.0), origin=(0.0, 0.0, 0.0)),
}
# The grids of an operation's `any_size` arrays in its "<kind>-any-size" cases: smaller along some
# axes and larger along others than PARITY_GRIDS[kind], so that positions near the identity fall
# both inside and beyond the source's borders.
OTHER_SIZE_GRIDS = {
    "3d": dict(size=(11, 19, 9), spacing=(2.0, 0.8, 3.0), origin=(-1.0, 0.5, 0.0)),
    "2d": dict(size=(23, 40, 1), spacing=(2.0, 1.7, 1.0), origin=(1.0, 0.0, 0.0)),
}
_ANY_SIZE = "-any-size"

_ENUM_VALUES = {
    "BackgroundStrategy": ["BACKGROUND_STRATEGY_PARTIAL_ID", "BACKGROUND_STRATEGY_ID", "BACKGROUND_STRATEGY_PARTIAL_ZERO",
                           "BACKGROUND_STRATEGY_ZERO", "BACKGROUND_STRATEGY_CLAMP", "BACKGROUND_STRATEGY_WRAP"],
    "InterpT": ["INTERP_NN", "INTERP_LINEAR", "INTERP_CUBIC"],
    "DimT": ["DIM_X", "DIM_Y", "DIM_Z"],
    "DiffT": ["DIFF_FORWARD", "DIFF_BACKWARD", "DIFF_CENTRAL"],
    "BoundaryCondT": ["BC_APPROX", "BC_WRAP", "BC_CLAMP"],
    "MemoryType": ["MEM_HOST"],
}
_MAX_ENUM_CASES = 8


def make_grid(kind: str = "3d", *, other_size: bool = False):
    """The grid of a parity case kind ("3d", "2d", "3d-any-size", ...); other_size: the grid of the
    operation's `any_size` arrays in that case (OTHER_SIZE_GRIDS) when the kind ends with -any-size."""
    core = _core()
    base = kind.removesuffix(_ANY_SIZE)
    g = (OTHER_SIZE_GRIDS if other_size and kind.endswith(_ANY_SIZE) else PARITY_GRIDS)[base]
    return core.GridInfo(core.Vec3Di(*g["size"]), core.Vec3Df(*g["spacing"]), core.Vec3Df(*g["origin"]))


def _values(hint: str | None, shape, rng: np.random.Generator, kind: str, grid=None) -> np.ndarray:
    """Random float32 values for an array of `shape` (fields: last axis 3) following `hint`."""
    h = hint or "any"
    if h == "positive":
        v = rng.uniform(0.5, 2.0, shape)
    elif h == "nonzero":
        v = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    elif h == "unit":
        if kind == "Field3D":
            v = rng.normal(size=shape)
            v /= np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-6)
        else:
            v = rng.uniform(0.0, 1.0, shape)
    elif h == "mask":
        v = (rng.uniform(size=shape) > 0.5).astype(np.float64)
    elif h == "small":
        v = rng.uniform(-0.1, 0.1, shape)
    elif h == "angle":
        v = rng.uniform(-math.pi, math.pi, shape)
    elif h in ("identity_h", "small_v") and kind == "Field3D" and grid is not None:
        sx, sy, sz = shape[:3]
        idx = np.stack(np.meshgrid(np.arange(sx), np.arange(sy), np.arange(sz), indexing="ij"), axis=-1).astype(float)
        pert = rng.uniform(-0.5, 0.5, shape)
        if sz == 1:
            pert[..., 2] = 0.0
        if h == "identity_h":
            v = idx + pert
        else:
            sp = np.array(tuple(grid.spacing()), dtype=float)
            v = pert * sp
    else:
        v = rng.uniform(-1.0, 1.0, shape)
    return np.asfortranarray(v, dtype=np.float32)


def _scalar(p: Param, hint: str | None, rng: np.random.Generator, grid):
    core = _core()
    t = p.type
    if t in ("float", "double"):
        if hint == "any":
            return float(rng.uniform(-1.0, 1.0))
        if hint == "small":
            return float(rng.uniform(-0.1, 0.1))
        if hint == "angle":
            return float(rng.uniform(-math.pi, math.pi))
        if hint == "nonzero":
            return float(rng.uniform(0.5, 2.0) * rng.choice([-1.0, 1.0]))
        if hint == "unit":
            return float(rng.uniform(0.0, 1.0))
        return float(rng.uniform(0.5, 1.5))  # default and "positive"
    if t in ("int", "unsigned int", "size_t"):
        if hint in ("positive", "nonzero"):
            return int(rng.integers(1, 4))
        if hint == "any":
            return int(rng.integers(-3, 4))
        return 1
    if t == "bool":
        return bool(hint == "positive")
    if t == "Vec3Df":
        if hint == "small":
            v = rng.uniform(-0.1, 0.1, 3)
        elif hint == "any":
            v = rng.uniform(-1.0, 1.0, 3)
        else:
            v = rng.uniform(0.5, 1.5, 3)
        if grid is not None and grid.size().z == 1:
            v[2] = 0.0 if hint in ("small", "any") else v[2]
        return core.Vec3Df(*(float(x) for x in v))
    if t == "Vec3Di":
        return core.Vec3Di(1, 1, 1) if hint != "any" else core.Vec3Di(*(int(x) for x in rng.integers(-2, 3, 3)))
    if t == "GridInfo":
        return core.GridInfo(grid.size(), grid.spacing(), grid.origin(), grid.direction())
    return None


def _array(core, kind: str, grid, values: np.ndarray):
    cls = core.Image3D if kind == "Image3D" else core.Field3D
    a = cls(grid, core.MEM_HOST)
    np.asarray(a)[...] = values
    return a


def make_inputs(op: OpInfo, overload: int, grid, rng: np.random.Generator, enum_choice: dict | None = None,
                other_grid=None) -> list:
    """Host arguments for `op`'s overload `overload` on `grid`: arrays filled after the `inputs`
    hints (default: uniform in [-1, 1]; outputs too, so in-place operations read defined data),
    scalars after their hint (default: uniform in [0.5, 1.5] for floats, 1 for ints), enums from
    `enum_choice` (default: their C++ default, or the first value). Arguments with a C++ default
    and no choice are left out, as C++ callers would. other_grid: the grid of the arrays named in
    op.any_size (default: `grid`)."""
    if op.example is not None:
        return list(op.example(overload, grid, rng))
    core = _core()
    ov = op.overloads[overload]
    args = []
    for p in ov.params:
        hint = op.inputs.get(p.name)
        fixed = op.fixed.get(p.name)
        if p.is_array:
            g = other_grid if other_grid is not None and p.name in op.any_size else grid
            if fixed is not None:
                g = core.GridInfo(core.Vec3Di(*fixed))
            shape = tuple(g.size()) + ((3,) if p.type == "Field3D" else ())
            args.append(_array(core, p.type, g, _values(hint, shape, rng, p.type, g)))
            continue
        if enum_choice and p.name in enum_choice:
            args.append(getattr(core, enum_choice[p.name]))
            continue
        if fixed is not None:
            args.append(int(fixed) if p.type in ("int", "unsigned int", "size_t") else type(fixed)(fixed))
            continue
        if p.has_default and op.builtin:
            break  # the rest take their C++ defaults
        if p.type in _ENUM_VALUES:
            args.append(getattr(core, _ENUM_VALUES[p.type][0]))
            continue
        v = _scalar(p, hint, rng, grid)
        if v is None:
            raise TypeError(f"{op.name}: no example value for parameter {p.name!r} of type {p.type}; register the "
                            "operation with example=")
        args.append(v)
    return args


# ------------------------------------------------------------------------------------------------
# Parity cases
@dataclasses.dataclass
class ParityCase:
    """One CPU/GPU comparison: operation, overload, grid and enum values."""

    op: OpInfo
    overload: int
    grid_kind: str
    enum_choice: dict
    skip_reason: str | None = None
    seed: int = 0

    @property
    def id(self) -> str:
        ov = self.op.overloads[self.overload]
        types = ",".join(p.type for p in ov.params if p.is_array or not p.has_default)
        enums = "".join(f",{v}" for v in self.enum_choice.values())
        return f"{self.op.name}({types}{enums})-{self.grid_kind}"

    def inputs(self, rng=None):
        rng = rng if rng is not None else np.random.default_rng(self.seed)
        return make_inputs(self.op, self.overload, make_grid(self.grid_kind), rng, self.enum_choice,
                           make_grid(self.grid_kind, other_size=True))

    def run(self):
        """Runs the operation on host and device copies of the same random inputs and compares
        every array argument (and the return value) within the operation's tolerance."""
        from .testing import assert_results_close, to_numpy

        core = _core()
        host_args = self.inputs()
        dev_args = [a.clone(core.MEM_DEVICE) if _is_pyca_array(a) else a for a in host_args]
        r_host = self.op.call(*host_args)
        r_dev = self.op.call(*dev_args)
        core.synchronize()
        names = [p.name for p in self.op.overloads[self.overload].params]
        for i, (h, d) in enumerate(zip(host_args, dev_args)):
            if _is_pyca_array(h):
                assert_results_close(to_numpy(d), to_numpy(h), rtol=self.op.rtol, atol=self.op.atol,
                                     what=f"{self.id}: argument '{names[i]}' (device vs host)")
        assert_results_close(to_numpy(r_dev), to_numpy(r_host), rtol=self.op.rtol, atol=self.op.atol,
                             what=f"{self.id}: return value (device vs host)")


def _is_pyca_array(a) -> bool:
    core = _core()
    return isinstance(a, (core.Image3D, core.Field3D))


def parity_cases(*, owner: str | None = None, names=None, families=None, builtin: bool | None = None,
                 gpu_available: bool | None = None) -> list[ParityCase]:
    """The parity cases of the registered operations (one per overload, grid and enum value),
    each with the reason it is skipped, if any."""
    if gpu_available is None:
        gpu_available = bool(_core().cuda_available())
    out = []
    for op in ops(owner=owner, builtin=builtin):
        if names is not None and op.name not in names:
            continue
        if families is not None and op.family not in families:
            continue
        if op.gpu is None:
            reason = CPU_ONLY_REASON.format(name=op.name)
        elif op.skip:
            reason = f"{op.name}: {op.skip}"
        elif not gpu_available:
            reason = "needs a CUDA GPU"
        else:
            reason = None
        for k, ov in enumerate(op.overloads):
            enum_params = [p for p in ov.params if p.type in _ENUM_VALUES and not p.has_default and p.type != "MemoryType"]
            choices = [dict(zip([p.name for p in enum_params], combo))
                       for combo in itertools.product(*[_ENUM_VALUES[p.type] for p in enum_params])][:_MAX_ENUM_CASES]
            kinds = list(PARITY_GRIDS)
            if any(p.name in op.any_size for p in ov.params):
                kinds += [g + _ANY_SIZE for g in PARITY_GRIDS]
            for choice in choices or [{}]:
                for g in kinds:
                    out.append(ParityCase(op, k, g, choice, reason, seed=_seed(op.name, k, g)))
    return out


def _seed(*parts) -> int:
    import zlib

    return zlib.crc32("|".join(map(str, parts)).encode())
