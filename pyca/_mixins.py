"""Python behaviour of the SWIG proxy classes (pyca.core): Vec3 arithmetic, GridInfo conveniences,
NumPy / CuPy / PyTorch interop of Image3D and Field3D.

The proxies list these mixins as base classes (swig/types.i), so every method here is an ordinary
method of pyca.Vec3Df, pyca.GridInfo, pyca.Image3D, ... . This module must not import pyca.core at
import time (pyca.core imports it)."""
from __future__ import annotations

import enum
import numbers

import numpy as np


def _core():
    from . import core

    return core


# ------------------------------------------------------------------------------------------------
# Enumerations: IntEnum members that print their names (PyCA scripts pass and compare ints).
class PycaEnum(enum.IntEnum):
    """An IntEnum whose str() and f-string form is the member's name (``MEM_HOST``); it compares,
    hashes and converts like its int value, so PyCA code that passes or compares ints keeps working."""

    def __str__(self):
        return self.name

    def __format__(self, spec):
        return self.name if not spec else int.__format__(int(self), spec)

    def __repr__(self):
        return f"{type(self).__name__}.{self.name}"


# Each C++ enum (core/include/pyca/enums.h, mem_type.h) and the prefix its constants share.
ENUM_PREFIXES = {
    "MemoryType": "MEM_",
    "BackgroundStrategy": "BACKGROUND_STRATEGY_",
    "InterpT": "INTERP_",
    "DimT": "DIM_",
    "DiffT": "DIFF_",
    "BoundaryCondT": "BC_",
}


def make_enums(ns):
    """Turns the SWIG integer constants of module namespace `ns` (pyca.core) into members of one
    IntEnum per C++ enum, and tells the C side which member to return for each value."""
    members = {}
    for cls_name, prefix in ENUM_PREFIXES.items():
        pairs = sorted(((k, v) for k, v in ns.items() if k.startswith(prefix) and type(v) is int), key=lambda kv: kv[1])
        cls = PycaEnum(cls_name, pairs, module="pyca.core", qualname=cls_name)
        cls.__doc__ = f"PyCA's {cls_name} (an IntEnum: members compare equal to their int values)."
        ns[cls_name] = cls
        ns.update(cls.__members__)
        table = [None] * (max(v for _, v in pairs) + 1)
        for m in cls:
            table[int(m)] = m
        members[cls_name] = tuple(table)
    ns["_set_enum_members"](members)


def finish_enums(ns):
    """Constants of enum type that SWIG defines after the enumerations (C++ constexpr values)."""
    if "DEFAULT_INTERP_METHOD" in ns:
        ns["DEFAULT_INTERP_METHOD"] = ns["InterpT"](ns["DEFAULT_INTERP_METHOD"])


# ------------------------------------------------------------------------------------------------
# Vec3Df / Vec3Di
def _is_vec3(o) -> bool:
    return isinstance(o, Vec3Mixin)


def _is_float_like(o) -> bool:
    core = _core()
    if isinstance(o, core.Vec3Df):
        return True
    if isinstance(o, core.Vec3Di):
        return False
    if isinstance(o, numbers.Integral):
        return False
    if isinstance(o, numbers.Real):
        return True
    if isinstance(o, (tuple, list)) and len(o) == 3:
        return any(_is_float_like(v) for v in o)
    return True


def _components(o):
    if _is_vec3(o):
        return (o.x, o.y, o.z)
    if isinstance(o, numbers.Real):
        return (o, o, o)
    if isinstance(o, (tuple, list, np.ndarray)) and len(o) == 3:
        return tuple(o)
    return None


class Vec3Mixin:
    """Arithmetic with Vec3Df, Vec3Di, numbers and 3-sequences; a float operand (or true division)
    gives a Vec3Df, integer operands a Vec3Di."""

    __slots__ = ()

    def tolist(self):
        return [self.x, self.y, self.z]

    def totuple(self):
        return (self.x, self.y, self.z)

    def __len__(self):
        return 3

    def __iter__(self):
        return iter((self.x, self.y, self.z))

    def __getitem__(self, i):
        return self.totuple()[i]

    def __setitem__(self, i, v):
        name = ("x", "y", "z")[range(3)[i]]
        setattr(self, name, v)

    def __array__(self, dtype=None, copy=None):
        return np.array(self.totuple(), dtype=dtype)

    def __reduce__(self):
        return (type(self), self.totuple())

    def copy(self):
        """An independent copy (PyCA's Vec3Df/Vec3Di copy; copy.copy gives the same)."""
        return type(self)(*self.totuple())

    __copy__ = copy

    def __deepcopy__(self, memo):
        return self.copy()

    def fromlist(self, seq):
        """Set x, y, z from a sequence of three numbers (PyCA)."""
        x, y, z = seq
        self.x, self.y, self.z = x, y, z
        return self

    def _binary(self, other, fn, reflected=False, true_div=False):
        b = _components(other)
        if b is None:
            return NotImplemented
        a = self.totuple()
        if reflected:
            a, b = b, a
        vals = [fn(x, y) for x, y in zip(a, b)]
        core = _core()
        if true_div or _is_float_like(self) or _is_float_like(other):
            return core.Vec3Df(*[float(v) for v in vals])
        return core.Vec3Di(*[int(v) for v in vals])

    def __add__(self, o):
        return self._binary(o, lambda x, y: x + y)

    def __radd__(self, o):
        return self._binary(o, lambda x, y: x + y, True)

    def __sub__(self, o):
        return self._binary(o, lambda x, y: x - y)

    def __rsub__(self, o):
        return self._binary(o, lambda x, y: x - y, True)

    def __mul__(self, o):
        return self._binary(o, lambda x, y: x * y)

    def __rmul__(self, o):
        return self._binary(o, lambda x, y: x * y, True)

    def __truediv__(self, o):
        return self._binary(o, lambda x, y: x / y, true_div=True)

    def __rtruediv__(self, o):
        return self._binary(o, lambda x, y: x / y, True, true_div=True)

    def __floordiv__(self, o):
        return self._binary(o, lambda x, y: x // y)

    def __neg__(self):
        return type(self)(-self.x, -self.y, -self.z)

    def __abs__(self):
        return type(self)(abs(self.x), abs(self.y), abs(self.z))

    def __eq__(self, o):
        b = _components(o) if not isinstance(o, numbers.Real) else None
        return b is not None and self.totuple() == tuple(b)

    def __ne__(self, o):
        return not self.__eq__(o)

    __hash__ = None

    def inverse(self):
        """(1/x, 1/y, 1/z) as a Vec3Df (PyCA's Vec3Df.inverse())."""
        return _core().Vec3Df(1.0 / self.x, 1.0 / self.y, 1.0 / self.z)


# ------------------------------------------------------------------------------------------------
# GridInfo
def _vec3f(v, what):
    core = _core()
    if v is None:
        return None
    if isinstance(v, numbers.Real):
        return core.Vec3Df(float(v), float(v), float(v))
    c = _components(v)
    if c is None:
        raise TypeError(f"GridInfo: {what} must be a Vec3Df, a number or 3 numbers, not {type(v).__name__}")
    return core.Vec3Df(*[float(x) for x in c])


def grid_args(size, spacing, origin, direction=None):
    """Arguments of GridInfo(size, spacing=1, origin=0), accepting numbers and sequences (the
    direction, when given, is set after construction)."""
    core = _core()
    if size is None:
        if spacing is not None or origin is not None or direction is not None:
            raise TypeError("GridInfo: spacing/origin/direction given without a size")
        return ()
    c = _components(size) if not isinstance(size, numbers.Real) else None
    if c is None or any(not float(x).is_integer() for x in c):
        raise TypeError(f"GridInfo: size must be a Vec3Di or 3 integers, not {size!r}")
    args = [core.Vec3Di(*[int(x) for x in c])]
    if spacing is not None or origin is not None:
        args.append(_vec3f(1.0 if spacing is None else spacing, "spacing"))
    if origin is not None:
        args.append(_vec3f(origin, "origin"))
    return tuple(args)


class GridInfoMixin:
    __slots__ = ()

    @property
    def shape(self):
        """(sx, sy, sz)."""
        return tuple(self.size())

    def direction(self):
        """The 3x3 direction matrix (NumPy float64, a copy): column c is the world direction of
        voxel axis c (ITK's Direction). Identity unless the grid is rotated or flipped."""
        return np.array(self._direction(), dtype=np.float64).reshape(3, 3)

    def setDirection(self, d):
        """Set the direction from a 3x3 matrix (NumPy array or nested sequences); ValueError unless
        its entries are finite and its columns orthonormal (within 1e-4)."""
        import numpy as np

        try:
            m = np.asarray(d, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"GridInfo.setDirection: direction must be a 3x3 matrix of numbers, not {d!r}") from None
        if m.shape != (3, 3):
            raise ValueError(f"GridInfo.setDirection: direction must be a 3x3 matrix, got shape {m.shape}")
        self._setDirection(*(float(v) for v in m.ravel()))

    def affine(self):
        """The 4x4 voxel-to-world matrix (NumPy float64): world = A @ (i, j, k, 1), with
        A[:3, :3] = direction @ diag(spacing) and A[:3, 3] = origin."""
        a = np.eye(4)
        a[:3, :3] = self.direction() * np.array(tuple(self.spacing()), dtype=np.float64)[None, :]
        a[:3, 3] = tuple(self.origin())
        return a

    def __reduce__(self):
        return (type(self), (tuple(self.size()), tuple(self.spacing()), tuple(self.origin()),
                             tuple(map(tuple, self.direction()))))

    def copy(self):
        """An independent copy of the grid: size, spacing, origin and direction (PyCA's GridInfo.copy)."""
        return type(self)(self.size(), self.spacing(), self.origin(), self.direction())

    __copy__ = copy

    def __deepcopy__(self, memo):
        return self.copy()

    __hash__ = None


# ------------------------------------------------------------------------------------------------
# Image3D / Field3D
def array_args(kind, *args, grid=None, mem=None):
    """Image3D(grid, mem), Image3D(mem), Image3D(sx, sy, sz[, mem]) and Image3D(size_tuple, mem)."""
    core = _core()
    if len(args) >= 3 and all(isinstance(a, numbers.Integral) for a in args[:3]):  # PyCA: (sx, sy, sz[, mem])
        if len(args) > 4:
            raise TypeError(f"{kind}: expected (sx, sy, sz[, mem]), got {len(args)} arguments")
        grid = core.GridInfo(tuple(int(a) for a in args[:3]))
        mem = args[3] if len(args) == 4 else mem
        args = ()
    if len(args) > 2:
        raise TypeError(f"{kind}: expected (grid, mem), got {len(args)} arguments")
    if args:
        grid = args[0]
    if len(args) == 2:
        mem = args[1]
    if isinstance(grid, numbers.Integral) and mem is None:  # PyCA's Image3D(mem)
        return (_mem_arg(kind, grid, 1),)
    if grid is None:
        return () if mem is None else (_mem_arg(kind, mem, 2),)
    if not isinstance(grid, core.GridInfo):
        if _components(grid) is not None:  # a size: Image3D((17, 23, 31))
            grid = core.GridInfo(grid)
        else:
            raise TypeError(f"{kind}: argument 1 ('grid') must be a pyca.GridInfo or a size (3 integers), "
                            f"not {type(grid).__name__}")
    return (grid, core.MEM_HOST if mem is None else _mem_arg(kind, mem, 2))


def _mem_arg(kind, mem, pos):
    """A MemoryType argument: a member (pyca.MEM_HOST, ...) or its int value; strings are refused."""
    core = _core()
    if isinstance(mem, numbers.Integral) and not isinstance(mem, bool) and int(mem) in set(core.MemoryType):
        return core.MemoryType(int(mem))
    names = ", ".join(f"pyca.{m.name}" for m in core.MemoryType if m)
    shown = f"{type(mem).__name__} {mem!r}" if isinstance(mem, (str, numbers.Number)) else type(mem).__name__
    raise TypeError(f"{kind}: argument {pos} ('mem') must be a MemoryType ({names}), not {shown}")


_DEVICE_HINT = (
    "{kind} is in device memory (MEM_DEVICE): copy it to the host with obj.to(pyca.MEM_HOST) "
    "(obj.toType(pyca.MEM_HOST) moves it in place), or share it on the GPU with cupy.asarray(obj) or "
    "torch.from_dlpack(obj)"
)


def _operators():
    from . import _operators

    return _operators


class _ArrayMixin:
    __slots__ = ()
    _ncomp = 1
    # NumPy scalars defer to the operators below (np.float32(2) * im calls im.__rmul__).
    __array_priority__ = 1000.0

    # PyCA's operators: the result lives in the left operand's memory type (pyca/_operators.py).
    def __add__(self, o):
        """self + other: a new object in self's memory type (pyca.Add / AddC)."""
        return _operators().binary(self, o, "Add")

    def __sub__(self, o):
        return _operators().binary(self, o, "Sub")

    def __mul__(self, o):
        return _operators().binary(self, o, "Mul")

    def __truediv__(self, o):
        return _operators().binary(self, o, "Div")

    def __radd__(self, o):
        return _operators().reflected(self, o, "Add")

    def __rsub__(self, o):
        return _operators().reflected(self, o, "Sub")

    def __rmul__(self, o):
        return _operators().reflected(self, o, "Mul")

    def __rtruediv__(self, o):
        return _operators().reflected(self, o, "Div")

    def __iadd__(self, o):
        return _operators().inplace(self, o, "Add")

    def __isub__(self, o):
        return _operators().inplace(self, o, "Sub")

    def __imul__(self, o):
        return _operators().inplace(self, o, "Mul")

    def __itruediv__(self, o):
        return _operators().inplace(self, o, "Div")

    def __neg__(self):
        return _operators().neg(self)

    def __pos__(self):
        return _operators().pos(self)

    def __abs__(self):
        return _operators().absolute(self)

    @property
    def shape(self):
        s = tuple(self.size())
        return s if self._ncomp == 1 else s + (3,)

    # NumPy indexing of host objects: im[x, y, z] is a NumPy scalar, slices are views sharing this
    # object's memory wherever NumPy's basic indexing gives views (fancy indexing copies). A field's
    # component axis is the last one: f[x, y, z] is the vector (vx, vy, vz), f[..., 0] the x plane.
    def __getitem__(self, key):
        self._require_host(f"{type(self).__name__}[...]")
        return np.asarray(memoryview(self))[key]

    def __setitem__(self, key, value):
        self._require_host(f"{type(self).__name__}[...] =")
        np.asarray(memoryview(self))[key] = value

    @property
    def mem_type(self):
        return self.memType()

    @property
    def is_on_device(self):
        return self.memType() == _core().MEM_DEVICE

    def _require_host(self, what):
        if self.is_on_device:
            raise TypeError(f"{what}: " + _DEVICE_HINT.format(kind=type(self).__name__))

    def __array__(self, dtype=None, copy=None):
        self._require_host("np.asarray")
        a = np.asarray(memoryview(self))
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return a.copy(order="F") if copy else a

    def to(self, mem):
        """This object if already in `mem`, else a copy in memory type `mem`."""
        return self if self.memType() == mem else self.clone(mem)

    def copy(self):
        """A deep copy in the same memory type (PyCA's copy())."""
        return self.clone()

    def numpy(self):
        """A NumPy copy of the data, from any memory type (one copy: a device object's host copy is
        the array's memory)."""
        if self.is_on_device:
            return np.asarray(self.clone(_core().MEM_HOST))  # the view keeps the host copy alive
        return np.array(self, copy=True, order="F")

    def tolist(self):
        return self.numpy().tolist()

    @property
    def __cuda_array_interface__(self):
        if not self.is_on_device:
            raise AttributeError(f"{type(self).__name__} in {_memname(self.memType())} memory has no "
                                 "__cuda_array_interface__ (only MEM_DEVICE objects do)")
        s = tuple(self.size())
        strides = (4, 4 * s[0], 4 * s[0] * s[1])
        shape = s
        if self._ncomp == 3:
            shape = s + (3,)
            strides = strides + (4 * self.capacity(),)
        stream = _core().current_stream()
        return {
            "shape": shape,
            "typestr": "<f4",
            "data": (self.rawptr(), False),
            "strides": strides,
            "version": 3,
            "stream": stream if stream else 1,
        }

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("pyca exports DLPack without copying; call .clone() first for a copy")
        if self.is_on_device and stream is not None and stream not in (1, _core().current_stream() or 1):
            _core().synchronize()  # the consumer's stream must see our finished data
        return _core().to_dlpack(self)

    def __dlpack_device__(self):
        return _core().dlpack_device(self)

    @classmethod
    def from_array(cls, a, grid=None, *, spacing=None, origin=None):
        """Wrap `a` as a pyca object (shares memory when it can, copies otherwise).

        Accepts NumPy arrays and anything with the buffer protocol (host), objects with
        ``__cuda_array_interface__`` (CuPy, Numba, PyTorch CUDA tensors) and ``__dlpack__`` objects.
        Expected shape: (sx, sy, sz) for Image3D, (sx, sy, sz, 3) for Field3D ((sx, sy) and
        (sx, sy, 3) give 2-D grids with sz = 1).

        Shares (zero copy, writes are seen both ways) when the data is float32 and Fortran-ordered
        (x fastest: strides (4, 4*sx, 4*sx*sy[, 4*sx*sy*sz])). Host data of another dtype or order is
        copied into a new host array (a NumPy conversion). Device data must already be float32 in
        that layout (TypeError / ValueError otherwise: convert it with the library that owns it).
        `grid` (a GridInfo) sets spacing and origin; its size must match the array. Or, without a
        GridInfo, `spacing` and `origin` (a number or 3 numbers, world units) do.
        """
        from . import _arrays

        if spacing is not None or origin is not None:
            if grid is not None:
                raise TypeError(f"{cls.__name__}.from_array: give either grid or spacing/origin, not both")
            shape = np.shape(a) if not hasattr(a, "__cuda_array_interface__") else a.__cuda_array_interface__["shape"]
            sz = tuple(shape[:-1] if cls._ncomp == 3 else shape)
            sz = sz + (1,) if len(sz) == 2 else sz
            if len(sz) == 3:  # else from_array reports the shape
                grid = _core().GridInfo(sz, 1.0 if spacing is None else spacing, 0.0 if origin is None else origin)
        return _arrays.from_array(cls, a, grid)

    def fromlist(self, nested):
        """Fill from a nested list indexed [x][y][z] (or [x][y] for 2-D), resizing the grid (PyCA)."""
        arr = np.asarray(nested, dtype=np.float32)
        if self._ncomp == 3:
            raise TypeError("Field3D.fromlist is not supported; use Field3D.from_array")
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if arr.ndim != 3:
            raise ValueError(f"fromlist: expected a 2-D or 3-D nested list, got {arr.ndim} dimensions")
        core = _core()
        g = core.GridInfo(arr.shape, self.spacing(), self.origin(), self.grid().direction())
        src = type(self).from_array(np.asfortranarray(arr), g)
        if g.nVox() <= self.capacity():
            self.setGrid(g)
            self.copy_from(src)
        else:  # more voxels than this object holds: new memory of the same type
            self.swap(src.to(self.memType()) if src.memType() != self.memType() else src.clone())
        return self


def _memname(m):
    try:
        return _core().MemoryType(int(m)).name
    except ValueError:
        return str(m)


class ImageMixin(_ArrayMixin):
    __slots__ = ()
    _ncomp = 1

    def asnp(self):
        """Zero-copy NumPy view (host memory only), shape (sx, sy, sz), x fastest (PyCA's asnp())."""
        self._require_host("asnp")
        return np.asarray(self)


class FieldMixin(_ArrayMixin):
    __slots__ = ()
    _ncomp = 3

    def asnp(self):
        """Zero-copy NumPy views (vx, vy, vz) of the three components (host memory only)."""
        self._require_host("asnp")
        a = np.asarray(self)
        return (a[..., 0], a[..., 1], a[..., 2])
