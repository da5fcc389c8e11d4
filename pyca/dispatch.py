"""``@pyca_dispatch``: one operation, a CPU loop for host data and a CUDA kernel for device data.

    scale_kernel = pyca.cuda.SourceModule(SOURCE).get_function("scale")

    @pyca_dispatch(scale_kernel)            # or @pyca_dispatch(None): no CUDA version yet
    def scale(out: Image3D, im: Image3D, s: float):
        np.multiply(np.asarray(im), s, out=np.asarray(out))     # the CPU version (Python or Cython)

    scale(out, im, 2.0)     # host/pinned arguments: the CPU version; device arguments: the kernel

At every call the arguments are checked against the signature (annotations of the CPU function, or
``signature=``): a wrong type raises TypeError naming the parameter; image and field arguments in
different kinds of memory raise pyca.MemoryTypeError naming them; arrays of different sizes raise
ValueError (unless ``check_sizes=False``). Device calls convert Python numbers to the kernel's C
types, pass every Image3D/Field3D as a ``pyca::ImageView``/``pyca::FieldView`` and launch on
``stream=`` (default: pyca's current stream) with a configuration computed from the output's grid
(``block=``, ``grid=``, ``shared_mem=`` override it per call). Nothing synchronises. Dispatched
operations return what the CPU version returns on the host and None on the device: results go to
output arguments. Each operation is registered in :mod:`pyca.registry` (for the parity tests of
:mod:`pyca.testing`). See docs/dispatch.md.
"""
from __future__ import annotations

import functools
import inspect
import numbers
import re
import typing

from . import cuda as _cuda
from . import registry as _registry

__all__ = ["pyca_dispatch", "DispatchedOp", "RESERVED_KEYWORDS"]

# Keyword arguments every dispatched operation takes for itself (launch control).
RESERVED_KEYWORDS = ("stream", "grid", "block", "shared_mem")


def _core():
    from . import core

    return core


# Annotation -> (registry type name, parameter kind on the CPU side)
_SCALAR_ANNOTATIONS = {
    float: ("float", "d"),
    int: ("int", "l"),
    bool: ("bool", "b"),
}
_NAMED_ANNOTATIONS = {
    "Image3D": ("Image3D", "I"),
    "Field3D": ("Field3D", "F"),
    "float": ("float", "d"),
    "double": ("double", "d"),
    "int": ("int", "l"),
    "bool": ("bool", "b"),
    "Vec3Df": ("Vec3Df", "V"),
    "Vec3Di": ("Vec3Di", "v"),
}
# Kernel kinds each annotation accepts.
_COMPATIBLE = {
    "I": "I",
    "F": "F",
    "d": "fd",
    "l": "iulL",
    "b": "bi",
    "V": "V",
    "v": "v",
    "o": "IFfdiulLbVvp",
}
_KIND_TYPES = {"I": "Image3D", "F": "Field3D", "f": "float", "d": "double", "i": "int", "u": "unsigned int",
               "l": "int", "L": "size_t", "b": "bool", "V": "Vec3Df", "v": "Vec3Di", "p": "object", "o": "object"}


def _annotation_kind(ann, globalns) -> tuple[str, str]:
    """(registry type, kind) of an annotation; ('object', 'o') when it says nothing pyca checks."""
    if ann is inspect.Parameter.empty or ann is None:
        return ("object", "o")
    if isinstance(ann, str):
        s = ann.strip().strip("'\"")
        base = s.split(".")[-1]
        if base in _NAMED_ANNOTATIONS:
            return _NAMED_ANNOTATIONS[base]
        try:
            ann = eval(s, globalns)  # noqa: S307 - an annotation of the decorated function
        except Exception:
            return ("object", "o")
    if ann in _SCALAR_ANNOTATIONS:
        return _SCALAR_ANNOTATIONS[ann]
    name = getattr(ann, "__name__", None)
    if name in _NAMED_ANNOTATIONS and getattr(ann, "__module__", "").startswith("pyca"):
        return _NAMED_ANNOTATIONS[name]
    return ("object", "o")


def _parse_signature(sig: str) -> list[tuple[str, str]]:
    """"(out: Image3D, im: Image3D, s: float)" -> [(name, annotation), ...]."""
    s = sig.strip()
    if s.startswith("(") and s.endswith(")"):
        s = s[1:-1]
    out = []
    for part in _cuda.split_top(s):
        part = part.split("=")[0].strip()
        if not part:
            continue
        m = re.match(r"^([A-Za-z_]\w*)\s*(?::\s*(.+))?$", part)
        if not m:
            raise ValueError(f"cannot read parameter {part!r} of signature {sig!r}")
        out.append((m.group(1), (m.group(2) or "").strip()))
    return out


def _launch_dims(op, d, what):
    """A launch keyword (grid=, block=) as 3 positive ints; TypeError/ValueError naming it otherwise."""
    if d is None:
        return None
    items = (d,) if isinstance(d, numbers.Integral) else d
    try:
        items = tuple(items)
    except TypeError:
        items = None
    if (items is None or isinstance(d, (str, bytes)) or not 1 <= len(items) <= 3
            or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in items)):
        raise TypeError(f"{op}: launch keyword {what}= must be an int or 1 to 3 ints, not {d!r}")
    if any(int(v) < 1 for v in items):
        raise ValueError(f"{op}: launch keyword {what}= must be >= 1 in every dimension, not {d!r}")
    return tuple(int(v) for v in items) + (1,) * (3 - len(items))


class DispatchedOp:
    """An operation made by :func:`pyca_dispatch`: call it like the CPU function."""

    def __init__(self, cpu, kernel, *, name=None, signature=None, check_sizes=True, output=None, block=None,
                 register=True, rtol=1e-5, atol=1e-6, inputs=None, example=None, parity_skip=None, family=None,
                 registry_name=None):
        self.cpu = cpu
        self.gpu = kernel
        self.name = name or getattr(cpu, "__name__", "operation")
        self._block = _launch_dims(self.name, block, "block")
        globalns = getattr(cpu, "__globals__", {})
        if signature is not None and not isinstance(signature, (str, inspect.Signature)):
            raise TypeError(f"{self.name}: signature= must be a str such as 'out: Image3D, s: float' or an "
                            f"inspect.Signature, not {type(signature).__name__}")
        if signature is not None:
            pairs = _parse_signature(signature) if isinstance(signature, str) else [
                (p.name, p.annotation) for p in signature.parameters.values()]
            self.__signature__ = inspect.Signature(
                [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n, _ in pairs])
        else:
            sig = inspect.signature(cpu)
            for p in sig.parameters.values():
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
                    raise TypeError(f"{self.name}: a dispatched operation takes positional-or-keyword parameters "
                                    f"only ({p.name!r} is {p.kind.description})")
            try:
                hints = typing.get_type_hints(cpu)
            except Exception:
                hints = {}
            pairs = [(p.name, hints.get(p.name, p.annotation)) for p in sig.parameters.values()]
            self.__signature__ = sig
        for n, _ in pairs:
            if n in RESERVED_KEYWORDS:
                raise ValueError(f"{self.name}: parameter name {n!r} is reserved for launch control "
                                 f"({', '.join(RESERVED_KEYWORDS)}); rename it")
        self.param_names = tuple(n for n, _ in pairs)
        kinds = [_annotation_kind(a, globalns) for _, a in pairs]
        codes = [k for _, k in kinds]
        types = [t for t, _ in kinds]
        if kernel is not None:
            kcodes = kernel.codes
            if len(kcodes) != len(codes):
                raise TypeError(
                    f"{self.name}: the CPU version takes {len(codes)} parameters ({', '.join(self.param_names)}) "
                    f"but kernel {kernel.name} takes {len(kcodes)}"
                )
            for i, (c, k) in enumerate(zip(codes, kcodes)):
                if k not in _COMPATIBLE[c]:
                    raise TypeError(
                        f"{self.name}: parameter {self.param_names[i]!r} is {types[i]} on the CPU but the kernel "
                        f"{kernel.name} takes {_cuda.PARAM_CODES.get(k, k)}"
                    )
                if c == "o":
                    types[i] = _KIND_TYPES[k]
            codes = list(kcodes)
        self.codes = "".join(codes)
        self._n = len(self.codes)
        self._types = types
        if output is not None:
            if output not in self.param_names:
                raise ValueError(f"{self.name}: output {output!r} is not a parameter")
            out_index = self.param_names.index(output)
        else:
            out_index = -1
        self._plan = _core()._DispatchPlan(self.name, self.param_names, self.codes, out_index, bool(check_sizes))
        # The C function behind self._plan.call and the plan's SWIG object: calling them directly
        # skips the proxy's Python frame and its attribute lookup (the checks are the same).
        self._ccall = _core()._core._DispatchPlan_call
        self._this = self._plan.this
        functools.update_wrapper(self, cpu, assigned=("__module__", "__name__", "__qualname__", "__doc__"),
                                 updated=())
        self.__wrapped__ = cpu
        outputs = {self.param_names[out_index if out_index >= 0 else self._first_array()]} if self._has_arrays() else set()
        params = tuple(
            _registry.Param(n, t, output=n in outputs) for n, t in zip(self.param_names, types)
        )
        module = getattr(cpu, "__module__", None) or "__main__"
        self.registry_name = registry_name or f"{module}.{self.name}"
        self.info = _registry.OpInfo(
            name=self.registry_name, call=self, cpu=cpu, gpu=kernel, overloads=(_registry.Overload(params),),
            family=family or module.rsplit(".", 1)[-1], owner=module.split(".")[0], doc=(cpu.__doc__ or "").strip(),
            inputs=dict(inputs or {}), example=example, rtol=float(rtol), atol=float(atol), skip=parity_skip,
        )
        if register:
            _registry.register(self.info)

    def _has_arrays(self) -> bool:
        return any(c in "IF" for c in self.codes)

    def _first_array(self) -> int:
        return next(i for i, c in enumerate(self.codes) if c in "IF")

    def _bind(self, args, kwargs) -> tuple:
        try:
            bound = self.__signature__.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.name}: {e}") from None
        bound.apply_defaults()
        return tuple(bound.arguments[n] for n in self.param_names)

    def __call__(self, *args, **kwargs):
        # Fast path (positional arguments, no launch keywords): one crossing into C++ (the plan's
        # call, taken unbound from the extension module: no proxy frame), which checks every
        # argument and launches. Everything else goes through _call_general.
        if kwargs or len(args) != self._n:
            return self._call_general(args, kwargs)
        r = self._ccall(self._this, args, None, None, self._block, 0)
        if r == 1:
            return None
        if r == 0:
            return self.cpu(*args)
        return self._first_device_call(args, None, None, self._block, 0)

    def _call_general(self, args, kwargs):
        stream = kwargs.pop("stream", None)
        grid = kwargs.pop("grid", None)
        block = kwargs.pop("block", None)
        shared_mem = kwargs.pop("shared_mem", 0)
        if kwargs or len(args) != self._n:
            args = self._bind(args, kwargs)
        if stream is not None and type(stream) is not int:
            stream = _cuda.stream_handle(stream)
        if grid is not None:
            grid = _launch_dims(self.name, grid, "grid")
        block = self._block if block is None else _launch_dims(self.name, block, "block")
        r = self._ccall(self._this, args, stream, grid, block, shared_mem)
        if r == 0:
            return self.cpu(*args)
        if r == 1:
            return None
        return self._first_device_call(args, stream, grid, block, shared_mem)

    def _first_device_call(self, args, stream, grid, block, shared_mem):
        """Device arguments, no kernel loaded yet: load it (or say why there is none) and launch."""
        if self.gpu is None:
            raise NotImplementedError(
                f"{self.name}: only a CPU version exists (no CUDA kernel), and its arguments are in device memory "
                f"(MEM_DEVICE). Move them to the host with obj.toType(pyca.MEM_HOST) (or take host copies with "
                f"obj.to(pyca.MEM_HOST)), call {self.name}, then move the outputs back with "
                f"obj.toType(pyca.MEM_DEVICE)."
            )
        wide = getattr(self.gpu, "wide", None)  # a second kernel for arrays of 2^31 voxels or more
        if not self._plan.has_kernel():
            self._plan.set_kernel(self.gpu.handle)
            if wide is not None:
                self._plan.set_wide_kernel(0)  # declared; loaded by the first call that needs it
        r = self._ccall(self._this, args, stream, grid, block, shared_mem)
        if r == 3:
            self._plan.set_wide_kernel(wide.handle)
            self._ccall(self._this, args, stream, grid, block, shared_mem)
        return None

    @property
    def has_gpu(self) -> bool:
        return self.gpu is not None

    def launch_repeated(self, *args, n: int = 1):
        """Benchmark helper: packs device `args` once and launches the kernel `n` times (no checks per
        launch). Measures the launch alone, for comparison with a dispatched call."""
        if not self._plan.has_kernel():
            self._plan.set_kernel(self.gpu.handle)
            if getattr(self.gpu, "wide", None) is not None:
                self._plan.set_wide_kernel(0)
        self._plan.launch_repeated(tuple(args), int(n))

    def __repr__(self) -> str:
        gpu = self.gpu.name if self.gpu is not None else "none"
        return f"<pyca dispatched operation {self.name}{self.__signature__} cpu={self.cpu.__qualname__} gpu={gpu}>"


def pyca_dispatch(kernel=None, *, name: str | None = None, signature=None, check_sizes: bool = True,
                  output: str | None = None, block=None, register: bool = True, rtol: float = 1e-5,
                  atol: float = 1e-6, inputs: dict | None = None, example=None, parity_skip: str | None = None,
                  family: str | None = None, registry_name: str | None = None):
    """Decorator: the decorated function is the CPU version, `kernel` (a :class:`pyca.cuda.Function`,
    the name of a kernel compiled into libpyca, or None) the GPU version.

    name: the operation's name in messages (default: the function's name).
    signature: the parameters, when the CPU function's annotations do not give them
        (``"(out: Image3D, im: Image3D, s: float)"`` or an inspect.Signature).
    check_sizes: require every Image3D/Field3D argument to have the size of the first (default).
    output: the parameter whose grid sets the launch configuration (default: the first array).
    block: the default block (3 ints) instead of 256 threads shaped after the grid.
    register: add the operation to :mod:`pyca.registry` (key `registry_name`, default
        ``"<module>.<name>"``) so that the parity tests cover it.
    rtol, atol, inputs, example, parity_skip: for the parity tests (tolerance, input hints by
        parameter name, a custom input factory ``example(overload, grid, rng) -> args``, a reason
        not to test).
    """
    if callable(kernel) and not hasattr(kernel, "codes"):
        raise TypeError("pyca_dispatch must be called: @pyca_dispatch(kernel) or @pyca_dispatch(None)")
    if isinstance(kernel, str):
        kernel = _cuda.get_kernel(kernel)
    if kernel is not None and not hasattr(kernel, "codes"):
        raise TypeError(f"pyca_dispatch: kernel must be a pyca.cuda.Function, a registered kernel name or None, "
                        f"got {type(kernel).__name__}")

    def deco(fn):
        return DispatchedOp(fn, kernel, name=name, signature=signature, check_sizes=check_sizes, output=output,
                            block=block, register=register, rtol=rtol, atol=atol, inputs=inputs, example=example,
                            parity_skip=parity_skip, family=family, registry_name=registry_name)

    return deco
