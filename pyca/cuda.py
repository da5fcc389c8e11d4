"""CUDA kernels for pyca objects: run-time compilation (NVRTC), a disk cache, kernels compiled into
libpyca, and launches on pyca's stream.

    mod = pyca.cuda.SourceModule(r'''
    #include <pyca/kernel.cuh>
    extern "C" __global__ void scale(pyca::ImageView out, pyca::ImageView in, float s) {
      PYCA_FOR_EACH_VOXEL(out.size, x, y, z) { out(x, y, z) = s * in(x, y, z); }
    }''')
    scale = mod.get_function("scale")
    scale(out, im, 2.0)          # device Image3D arguments; launched on pyca.current_stream()

Every Image3D argument reaches the kernel as a ``pyca::ImageView`` and every Field3D as a
``pyca::FieldView`` (see ``pyca/kernel.cuh``); Python numbers are converted to the kernel's declared
C types. Most code uses these kernels through :func:`pyca.dispatch.pyca_dispatch`, which adds the
CPU version. Compilation works without a GPU (for ``compute_90`` then), loading and launching need
one. Nothing here synchronises.

Environment: ``PYCA_KERNEL_CACHE_DIR`` (cache directory), ``PYCA_KERNEL_CACHE=0`` (no disk cache),
``PYCA_INCLUDE_DIRS`` (extra include directories, ``os.pathsep``-separated).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import tempfile
import threading
import warnings
from pathlib import Path

from . import _cuda_libs

__all__ = [
    "CompileError",
    "SourceModule",
    "Function",
    "get_kernel",
    "registered_kernels",
    "include_dirs",
    "default_arch",
    "get_cache_dir",
    "set_cache_dir",
    "clear_cache",
    "stream_handle",
    "parse_kernel_params",
    "PARAM_CODES",
]


def _core():
    from . import core

    return core


class CompileError(RuntimeError):
    """NVRTC rejected the source. ``log`` holds the compiler's log, ``name`` the source's name and
    ``options`` the options it was compiled with."""

    def __init__(self, name: str, log: str, options: list[str]):
        self.name = name
        self.log = log
        self.options = list(options)
        super().__init__(f"compiling {name} with NVRTC failed:\n{log.rstrip()}")


# ------------------------------------------------------------------------------------------------
# Kernel parameters: C++ types -> one-letter kinds shared with the C++ side (swig/cuda_module.i)
PARAM_CODES = {
    "I": "pyca::ImageView (an Image3D argument)",
    "F": "pyca::FieldView (a Field3D argument)",
    "f": "float",
    "d": "double",
    "i": "int (32 bits)",
    "u": "unsigned int (32 bits)",
    "l": "long long (64 bits)",
    "L": "unsigned long long / size_t (64 bits)",
    "b": "bool",
    "V": "pyca::Vec3Df",
    "v": "pyca::Vec3Di",
    "p": "a pointer (a device address as an int)",
}

_TYPE_CODES = {
    "ImageView": "I",
    "FieldView": "F",
    "float": "f",
    "double": "d",
    "int": "i",
    "signed": "i",
    "signed int": "i",
    "int32_t": "i",
    "unsigned": "u",
    "unsigned int": "u",
    "uint32_t": "u",
    "long": "l",
    "long int": "l",
    "long long": "l",
    "long long int": "l",
    "int64_t": "l",
    "ptrdiff_t": "l",
    "unsigned long": "L",
    "unsigned long int": "L",
    "unsigned long long": "L",
    "unsigned long long int": "L",
    "uint64_t": "L",
    "size_t": "L",
    "bool": "b",
    "Vec3Df": "V",
    "Vec3Di": "v",
}

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"')


def _strip_comments(src: str) -> str:
    return _COMMENTS.sub(lambda m: " " if m.group(0).startswith("/*") else "", src)


def split_top(s: str, sep: str = ",") -> list[str]:
    """s split at each `sep` outside brackets (a C parameter list; pyca.dispatch reads signatures with it)."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def type_code(ctype: str) -> str | None:
    """The parameter kind of a C++ parameter type, or None when pyca cannot pass it."""
    t = ctype.replace("__restrict__", " ").replace("__restrict", " ").strip()
    if t.endswith("*"):
        return "p"
    if "&" in t:
        return None
    words = [w for w in t.split() if w not in ("const", "volatile")]
    t = " ".join(words)
    for prefix in ("::pyca::", "pyca::", "::std::", "std::", "::"):
        if t.startswith(prefix):
            t = t[len(prefix):]
    return _TYPE_CODES.get(t)


def _parse_param_list(params: str, where: str) -> list[tuple[str, str]]:
    """[(C++ type, name), ...] of a parameter list (without the parentheses)."""
    out = []
    items = split_top(params)
    if len(items) == 1 and items[0].strip() in ("", "void"):
        return out
    for k, p in enumerate(items):
        p = p.split("=")[0].strip()
        m = re.match(r"^(.*?)([A-Za-z_]\w*)\s*$", p, re.S)
        if m and m.group(1).strip() and m.group(2) not in ("float", "double", "int", "bool", "unsigned", "long"):
            ctype, name = " ".join(m.group(1).split()), m.group(2)
        else:
            ctype, name = " ".join(p.split()), f"arg{k}"
        if not ctype:
            raise ValueError(f"{where}: cannot read parameter {p!r}")
        out.append((ctype, name))
    return out


def _find_kernels(src: str) -> dict[str, dict]:
    """{name: {"qualified": "ns::name", "params": "...", "template": bool}} of the __global__
    functions of `src` (comments removed first)."""
    code = _strip_comments(src)
    masked = _STRINGS.sub(lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', code)
    kernels: dict[str, dict] = {}
    ns_stack: list[tuple[str, int]] = []  # namespaces and extern "C" blocks ("extern C"), with depth
    depth = 0
    token = re.compile(r'\bnamespace\s+([\w:]*)\s*\{|\bextern\s+"\s*"\s*\{|\{|\}|\b__global__\b')
    head_re = re.compile(
        r"\s*(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
        r"([A-Za-z_]\w*)\s*\("
    )
    pos = 0
    while True:
        m = token.search(masked, pos)
        if not m:
            break
        pos = m.end()
        t = m.group(0)
        if t.startswith("namespace"):
            depth += 1
            ns_stack.append((m.group(1) or "", depth))
        elif t.startswith("extern"):
            depth += 1
            ns_stack.append(("extern C", depth))
        elif t == "{":
            depth += 1
        elif t == "}":
            if ns_stack and ns_stack[-1][1] == depth:
                ns_stack.pop()
            depth -= 1
        else:  # __global__
            head = head_re.match(masked, m.end())
            if not head:
                continue
            name = head.group(1)
            start = head.end()
            level, i = 1, start
            while i < len(masked) and level:
                if masked[i] == "(":
                    level += 1
                elif masked[i] == ")":
                    level -= 1
                i += 1
            params = code[start : i - 1]
            before = code[max(0, m.start() - 400) : m.start()]
            extern_c = bool(re.search(r'extern\s+"C"\s*(?:(?:static|inline)\s+)*$', before)) or any(
                n == "extern C" for n, _ in ns_stack)
            before = re.sub(r'extern\s+"C"|\bstatic\b|\binline\b|__launch_bounds__\s*\([^)]*\)', " ", before)
            is_template = bool(re.search(r"template\s*<[^;{}]*>\s*$", before))
            qual = "::".join([n for n, _ in ns_stack if n and n != "extern C"] + [name])
            kernels[name] = {"qualified": qual, "params": params, "template": is_template, "extern_c": extern_c}
            pos = i
    return kernels


def parse_kernel_params(source: str, name: str) -> list[tuple[str, str]]:
    """[(C++ type, parameter name), ...] of __global__ function `name` in `source`."""
    ks = _find_kernels(source)
    if name not in ks:
        raise ValueError(f"no __global__ function named {name!r} in the source (found: {sorted(ks) or 'none'})")
    return _parse_param_list(ks[name]["params"], name)


def _codes_of(params: list[tuple[str, str]], where: str) -> str:
    codes = []
    for ctype, pname in params:
        c = type_code(ctype)
        if c is None:
            raise TypeError(
                f"{where}: pyca cannot pass kernel parameter {pname!r} of type {ctype!r}; use pyca::ImageView, "
                f"pyca::FieldView, a number type, pyca::Vec3Df/Vec3Di or a pointer, or give signature="
            )
        codes.append(c)
    return "".join(codes)


def _signature_params(signature: str, where: str) -> list[tuple[str, str]]:
    s = signature.strip()
    m = re.match(r"^(?:.*?\b[A-Za-z_]\w*\s*)?\((.*)\)\s*$", s, re.S)
    return _parse_param_list(m.group(1) if m else s, where)


# ------------------------------------------------------------------------------------------------
# Streams
def stream_handle(stream) -> int | None:
    """A cudaStream_t as an int from None (pyca's current stream, returned as None), an int, an
    object with ``__cuda_stream__`` (CUDA stream protocol), a PyTorch stream (``cuda_stream``) or a
    CuPy stream (``ptr``)."""
    if stream is None or isinstance(stream, int):
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        v = proto() if callable(proto) else proto
        return int(v[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    try:
        import operator

        return operator.index(stream)
    except TypeError:
        raise TypeError(f"stream must be None, an int or a CUDA stream object, got {type(stream).__name__}") from None


# ------------------------------------------------------------------------------------------------
# Include directories and architecture
_PKG_DIR = Path(__file__).resolve().parent


def include_dirs() -> list[str]:
    """Directories holding ``pyca/kernel.cuh`` and the headers it includes: the installed package's
    ``include`` folder, else the source tree's ``core/include`` and ``cuda/include``, after
    ``PYCA_INCLUDE_DIRS``."""
    dirs = [d for d in os.environ.get("PYCA_INCLUDE_DIRS", "").split(os.pathsep) if d]
    installed = _PKG_DIR / "include"
    if (installed / "pyca" / "kernel.cuh").exists():
        dirs.append(str(installed))
    else:
        root = _PKG_DIR.parent
        for sub in ("core/include", "cuda/include"):
            if (root / sub / "pyca").is_dir():
                dirs.append(str(root / sub))
    return dirs


# Standard headers that NVRTC lacks and pyca/vec3.h includes: small stand-ins.
_STUB_HEADERS = {
    "cmath": "#pragma once\nnamespace std {\n"
    + "".join(
        f"using ::{f};\n"
        for f in "sqrt fabs abs floor ceil exp log log2 log10 pow sin cos tan asin acos atan atan2 sinh cosh tanh "
        "fmin fmax fmod round trunc isnan isinf isfinite copysign hypot cbrt".split()
    )
    + "}\n",
    "cstddef": "#pragma once\nnamespace std { typedef decltype(sizeof(0)) size_t; "
    "typedef decltype((char*)0 - (char*)0) ptrdiff_t; }\nusing std::size_t;\n",
    "cstdint": "#pragma once\nnamespace std { typedef signed char int8_t; typedef short int16_t; typedef int int32_t; "
    "typedef long long int64_t; typedef unsigned char uint8_t; typedef unsigned short uint16_t; "
    "typedef unsigned int uint32_t; typedef unsigned long long uint64_t; }\n"
    "using std::int32_t; using std::int64_t; using std::uint32_t; using std::uint64_t;\n",
}


def default_arch() -> str:
    """``sm_XY`` of the current GPU (CUBIN), or ``compute_90`` (PTX) when no GPU can be used."""
    arch = _core()._cuda_device_arch()
    return f"sm_{arch}" if arch else "compute_90"


# ------------------------------------------------------------------------------------------------
# Disk cache
_cache_dir_override: str | None = None
_cache_lock = threading.Lock()
_memory_cache: dict[str, "_Compiled"] = {}
_MAGIC = b"PYCAKERNEL1\n"
_warned_cache = False


def get_cache_dir() -> Path | None:
    """The kernel cache directory, or None when the disk cache is off (``PYCA_KERNEL_CACHE=0``)."""
    if _cache_dir_override is not None:
        return Path(_cache_dir_override) if _cache_dir_override else None
    if os.environ.get("PYCA_KERNEL_CACHE", "1").lower() in ("0", "off", "false", "no"):
        return None
    env = os.environ.get("PYCA_KERNEL_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pyca" / "kernels"


def set_cache_dir(path) -> None:
    """Uses `path` as the kernel cache directory (None: back to the default, "": no disk cache)."""
    global _cache_dir_override
    _cache_dir_override = None if path is None else str(path)


def clear_cache(memory_only: bool = False) -> None:
    """Forgets compiled kernels: in this process and (unless `memory_only`) on disk."""
    with _cache_lock:
        _memory_cache.clear()
    d = get_cache_dir()
    if not memory_only and d is not None and d.is_dir():
        for p in d.glob("*.pycak"):
            try:
                p.unlink()
            except OSError:
                pass


class _Compiled:
    __slots__ = ("image", "cubin", "lowered", "log", "cache_hit")

    def __init__(self, image: bytes, cubin: bool, lowered: dict, log: str, cache_hit: str | None):
        self.image, self.cubin, self.lowered, self.log, self.cache_hit = image, cubin, lowered, log, cache_hit


def _cache_read(path: Path) -> _Compiled | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        if not data.startswith(_MAGIC):
            return None
        (n,) = struct.unpack_from("<I", data, len(_MAGIC))
        start = len(_MAGIC) + 4
        meta = json.loads(data[start : start + n].decode())
        image = data[start + n :]
        if len(image) != meta["size"] or hashlib.sha256(image).hexdigest() != meta["sha256"]:
            return None
        return _Compiled(image, bool(meta["cubin"]), dict(meta["lowered"]), meta.get("log", ""), "disk")
    except (ValueError, KeyError, struct.error, UnicodeDecodeError):
        return None


def _cache_write(path: Path, c: _Compiled) -> None:
    global _warned_cache
    meta = json.dumps(
        {"cubin": c.cubin, "lowered": c.lowered, "log": c.log, "size": len(c.image),
         "sha256": hashlib.sha256(c.image).hexdigest()}
    ).encode()
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".pycak", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + struct.pack("<I", len(meta)) + meta + c.image)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # atomic: readers see the old file, the new one, or none
        tmp = None
    except OSError as e:
        if not _warned_cache:
            _warned_cache = True
            warnings.warn(f"pyca: cannot write the kernel cache in {path.parent}: {e}", RuntimeWarning, stacklevel=3)
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


_dir_digests: dict[str, tuple] = {}


def _dir_digest(d: str) -> str:
    """Digest of the headers directly in `d` and in `d/pyca` (so edits invalidate the cache)."""
    h = hashlib.sha256()
    for sub in ("", "pyca"):
        p = Path(d) / sub
        if not p.is_dir():
            continue
        for f in sorted(p.iterdir()):
            if f.suffix in (".h", ".cuh", ".hpp", ".inl") and f.is_file():
                st = f.stat()
                memo = _dir_digests.get(str(f))
                if memo is None or memo[0] != (st.st_mtime_ns, st.st_size):
                    memo = ((st.st_mtime_ns, st.st_size), hashlib.sha256(f.read_bytes()).hexdigest())
                    _dir_digests[str(f)] = memo
                h.update(f.name.encode() + b"\0" + memo[1].encode())
    return h.hexdigest()


def _compile(source: str, name: str, options: list[str], name_expressions: list[str], dirs: list[str],
             cache: bool) -> _Compiled:
    core = _core()
    from . import __version__

    # The compiler in the key is libnvrtc's file (path, size, mtime), known without loading it when the
    # cache directory records it (a process whose kernels all come from the cache never loads it).
    cdir = get_cache_dir() if cache else None
    nvrtc = _cuda_libs.nvrtc_identity(cdir, core)

    def key_of(nvrtc):
        key_src = json.dumps(
            {"source": source, "name": name, "options": options, "names": name_expressions, "nvrtc": list(nvrtc),
             "pyca": __version__, "headers": [_dir_digest(d) for d in dirs], "stubs": _STUB_HEADERS},
            sort_keys=True,
        )
        return hashlib.sha256(key_src.encode()).hexdigest()

    key = key_of(nvrtc)
    with _cache_lock:
        hit = _memory_cache.get(key)
    if hit is not None:
        return _Compiled(hit.image, hit.cubin, hit.lowered, hit.log, "memory")
    path = cdir / f"{key}.pycak" if cdir is not None else None
    if path is not None:
        c = _cache_read(path)
        if c is not None:
            with _cache_lock:
                _memory_cache[key] = c
            return c
    ok, log, image, cubin, lowered = core._cuda_compile(
        source, name, list(options), list(_STUB_HEADERS.items()), list(name_expressions)
    )
    if not ok:
        raise CompileError(name, log, options)
    c = _Compiled(bytes(image), bool(cubin), dict(zip(name_expressions, lowered)), log, None)
    actual = _cuda_libs.check_nvrtc_identity(nvrtc, core)
    if actual != nvrtc:  # the recorded library was not the one that compiled
        key = key_of(actual)
        path = cdir / f"{key}.pycak" if cdir is not None else None
    if path is not None:
        _cache_write(path, c)
    with _cache_lock:
        _memory_cache[key] = c
    return c


# ------------------------------------------------------------------------------------------------
# Modules and functions
class SourceModule:
    """CUDA C++ source compiled with NVRTC (through the disk cache) and, once a kernel is first
    launched, loaded into the CUDA runtime.

    options: extra NVRTC options (``-DNAME=1``, ``--use_fast_math``, ...); ``-std=c++17``, the
        architecture (``arch``, default :func:`default_arch`) and ``-I`` to pyca's headers are added.
    include_dirs: more ``-I`` directories.
    name_expressions: kernels with C++ linkage to look up (templates: ``"scale<float>"``); by default
        every non-template ``__global__`` function found in the source.
    cache: use the disk cache (:func:`get_cache_dir`).
    lazy: compile at the first :meth:`get_function` launch instead of now.

    Raises :class:`CompileError` (with the compiler's ``log``) when NVRTC rejects the source.
    """

    def __init__(self, source: str, options=(), *, name: str = "pyca_module.cu", arch: str | None = None,
                 include_dirs=(), name_expressions=None, cache: bool = True, lazy: bool = False):
        self.source = source
        self.name = name
        self._user_options = list(options)
        self._arch = arch
        self._extra_dirs = [str(d) for d in include_dirs]
        self._kernels = _find_kernels(source)
        if name_expressions is None:
            name_expressions = [k["qualified"] for k in self._kernels.values()
                                if not k["template"] and not k["extern_c"]]
        self.name_expressions = list(name_expressions)
        self._cache = cache
        self._compiled: _Compiled | None = None
        self._library = None
        self._lock = threading.RLock()
        self._functions: dict[str, Function] = {}
        if not lazy:
            self._compile()

    @classmethod
    def from_file(cls, path, options=(), **kwargs) -> "SourceModule":
        """Compiles the file at `path`; its directory is added to the include path."""
        p = Path(path)
        dirs = [str(p.resolve().parent)] + [str(d) for d in kwargs.pop("include_dirs", ())]
        return cls(p.read_text(), options, name=kwargs.pop("name", p.name), include_dirs=dirs, **kwargs)

    @property
    def arch(self) -> str:
        for o in self._user_options:
            m = re.match(r"^(?:--gpu-architecture|-arch)[= ]?(\S+)$", o)
            if m:
                return m.group(1)
        return self._arch or default_arch()

    @property
    def options(self) -> list[str]:
        """The full NVRTC options."""
        opts = ["-std=c++17"]
        if not any(re.match(r"^(?:--gpu-architecture|-arch)", o) for o in self._user_options):
            opts.append(f"--gpu-architecture={self.arch}")
        opts.append("--diag-suppress=20012")  # __host__ __device__ on defaulted constructors (pyca/vec3.h)
        opts += [f"-I{d}" for d in self._extra_dirs + include_dirs()]
        return opts + self._user_options

    def _compile(self) -> _Compiled:
        if self._compiled is None:
            with self._lock:
                if self._compiled is None:
                    dirs = self._extra_dirs + include_dirs()
                    self._compiled = _compile(self.source, self.name, self.options, self.name_expressions, dirs,
                                              self._cache)
        return self._compiled

    @property
    def image(self) -> bytes:
        """The compiled CUBIN (``sm_XY``) or PTX (``compute_XY``)."""
        return self._compile().image

    @property
    def log(self) -> str:
        """The compiler's log (warnings)."""
        return self._compile().log

    @property
    def cache_hit(self) -> str | None:
        """Where the compiled code came from: ``"disk"``, ``"memory"`` or None (compiled now)."""
        return self._compile().cache_hit

    def _lowered(self, name: str) -> str:
        c = self._compile()
        k = self._kernels.get(name)
        for expr in (name, k["qualified"] if k else None):
            if expr in c.lowered:
                return c.lowered[expr]
        return name  # extern "C" or a name the caller knows

    def _load(self):
        if self._library is None:
            image = self._compile().image
            with self._lock:
                if self._library is None:
                    self._library = _core()._CudaLibrary(image)
        return self._library

    def get_function(self, name: str, signature: str | None = None) -> "Function":
        """The kernel `name`. Its parameter kinds come from the source, or from `signature` (a C++
        parameter list such as ``"(pyca::ImageView out, float s)"``) for kernels the source parser
        cannot read (templates, macros)."""
        key = (name, signature)
        f = self._functions.get(key)
        if f is None:
            if signature is not None:
                params = _signature_params(signature, name)
            else:
                if name not in self._kernels:
                    base = name.split("<")[0].split("::")[-1]
                    if base not in self._kernels:
                        raise ValueError(
                            f"{self.name}: no __global__ function named {name!r} (found: {sorted(self._kernels)})"
                        )
                    params = _parse_param_list(self._kernels[base]["params"], name)
                else:
                    params = _parse_param_list(self._kernels[name]["params"], name)
            f = Function(name, params, _codes_of(params, name), module=self)
            self._functions[key] = f
        return f

    def __repr__(self) -> str:
        return f"<pyca.cuda.SourceModule {self.name} arch={self.arch} kernels={sorted(self._kernels)}>"


class Function:
    """A kernel that takes pyca objects: calling it with device Image3D/Field3D arguments (as
    ``pyca::ImageView``/``pyca::FieldView``) and Python numbers launches it.

    ``fn(*args, grid=None, block=None, shared_mem=0, stream=None)``: the launch configuration comes
    from the grid of the first array argument unless given; ``stream`` defaults to pyca's current
    stream. Returns None at once (asynchronous)."""

    def __init__(self, name: str, params: list[tuple[str, str]], codes: str, *, module: SourceModule | None = None,
                 handle: int | None = None):
        self.name = name
        self.params = list(params)
        self.param_names = tuple(p[1] for p in params)
        self.codes = codes
        self.module = module
        self._handle = handle
        self._plan = None

    @property
    def handle(self) -> int:
        """The kernel's handle (cudaKernel_t or host stub address); loads the module. Needs a GPU."""
        if self._handle is None:
            h = self.module._load().kernel(self.module._lowered(self.name))
            _core()._cuda_check_params(self.name, h, self.codes)
            self._handle = h
        return self._handle

    def _get_plan(self):
        if self._plan is None:
            plan = _core()._DispatchPlan(self.name, self.param_names, self.codes, -1, False)
            self._plan = plan
        return self._plan

    def __call__(self, *args, grid=None, block=None, shared_mem: int = 0, stream=None):
        plan = self._get_plan()
        if not plan.has_kernel():
            plan.set_kernel(self.handle)
        r = plan.call(args, stream_handle(stream), _dims(grid, "grid"), _dims(block, "block"), shared_mem)
        if r != 1:
            core = _core()
            raise core.MemoryTypeError(
                f"{self.name}: a kernel needs its image and field arguments in device memory (MEM_DEVICE); "
                f"these are on the host: move them with toType(pyca.MEM_DEVICE), or call the dispatched "
                f"operation instead"
            )

    def __repr__(self) -> str:
        sig = ", ".join(f"{t} {n}" for t, n in self.params)
        return f"<pyca.cuda.Function {self.name}({sig})>"


def _dims(d, what):
    if d is None:
        return None
    if isinstance(d, int):
        return (d, 1, 1)
    t = tuple(int(v) for v in d)
    if not 1 <= len(t) <= 3:
        raise ValueError(f"{what} must have 1 to 3 dimensions")
    return t + (1,) * (3 - len(t))


_registered_functions: dict[str, Function] = {}


def registered_kernels() -> dict[str, str]:
    """{name: parameter kinds} of the kernels compiled into libpyca (PYCA_REGISTER_KERNEL)."""
    return {k: v[1] for k, v in _core()._cuda_registered_kernels().items()}


def get_kernel(name: str) -> Function:
    """The kernel compiled into libpyca and registered as `name` (KeyError if there is none)."""
    f = _registered_functions.get(name)
    if f is None:
        reg = _core()._cuda_registered_kernels()
        if name not in reg:
            raise KeyError(f"no compiled-in kernel registered as {name!r} (registered: {sorted(reg) or 'none'})")
        handle, codes = reg[name]
        params = [(PARAM_CODES[c], f"arg{i}") for i, c in enumerate(codes)]
        f = Function(name, params, codes, handle=handle)
        _registered_functions[name] = f
    return f
