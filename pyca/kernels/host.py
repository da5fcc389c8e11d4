"""The CPU half of generated kernels: the host C++ compiler (``g++ -O3 -fopenmp -shared``), an on-disk
cache of the shared libraries it makes (next to pyca.cuda's NVRTC cache), loading with ctypes, and
the ctypes mirrors of ``pyca::ImageView``/``pyca::FieldView`` that carry pyca arrays into the loops.

Environment: ``PYCA_CXX`` (or ``CXX``) picks the compiler (default: g++, then c++, then clang++);
``PYCA_KERNEL_CACHE_DIR`` / ``PYCA_KERNEL_CACHE=0`` as for pyca.cuda (pyca.cuda.get_cache_dir).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from .. import cuda as _cuda

__all__ = ["HostCompileError", "NoCompilerError", "compiler", "compile_shared", "ImageViewC", "FieldViewC",
           "image_view", "field_view", "FLAGS"]

FLAGS = ["-std=c++17", "-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fopenmp", "-fPIC", "-shared",
         "-w"]
# x86-64 with AVX-512: 256-bit vectors (gathers of 512 bits were slower: trilinear ApplyH 15-20% slower
# on a Xeon, the Gaussian unchanged; docs/design/kernels.md), and shorter compiles.
if platform.machine().lower() in ("x86_64", "amd64"):
    FLAGS.append("-mprefer-vector-width=256")


class NoCompilerError(RuntimeError):
    """No C++ compiler for the CPU half of a kernel."""


class HostCompileError(RuntimeError):
    """The host compiler rejected generated code (a bug of pyca's translation: please report it)."""


class ImageViewC(ctypes.Structure):
    """pyca::ImageView (cuda/include/pyca/kernel.cuh): 48 bytes."""

    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_int * 3), ("spacing", ctypes.c_float * 3),
                ("origin", ctypes.c_float * 3)]


class FieldViewC(ctypes.Structure):
    """pyca::FieldView: three plane pointers, then the grid; 64 bytes."""

    _fields_ = [("x", ctypes.c_void_p), ("y", ctypes.c_void_p), ("z", ctypes.c_void_p), ("size", ctypes.c_int * 3),
                ("spacing", ctypes.c_float * 3), ("origin", ctypes.c_float * 3)]


assert ctypes.sizeof(ImageViewC) == 48 and ctypes.sizeof(FieldViewC) == 64


def image_view(im) -> ImageViewC:
    """The view of a host Image3D (data and size; the generated loops use nothing else)."""
    s = im.size()
    v = ImageViewC()
    v.data = im.rawptr()
    v.size[0], v.size[1], v.size[2] = s.x, s.y, s.z
    return v


def field_view(f) -> FieldViewC:
    s = f.size()
    v = FieldViewC()
    p = f.rawptr()
    stride = 4 * f.planeStride()
    v.x, v.y, v.z = p, p + stride, p + 2 * stride
    v.size[0], v.size[1], v.size[2] = s.x, s.y, s.z
    return v


_compiler: tuple | None = None


def compiler() -> tuple[str, str]:
    """(path of the host C++ compiler, its identity for the cache key); NoCompilerError if none."""
    global _compiler
    if _compiler is None:
        want = os.environ.get("PYCA_CXX") or os.environ.get("CXX")
        cands = [want] if want else ["g++", "c++", "clang++"]
        for c in cands:
            exe = shutil.which(shlex.split(c)[0]) if c else None
            if exe:
                st = os.stat(exe)
                _compiler = (exe, f"{os.path.realpath(exe)}:{st.st_size}:{st.st_mtime_ns}")
                break
        else:
            _compiler = ("", "")
    if not _compiler[0]:
        raise NoCompilerError(
            "no C++ compiler found for the CPU half of pyca kernels (looked for "
            f"{os.environ.get('PYCA_CXX') or os.environ.get('CXX') or 'g++, c++, clang++'}); install one "
            "(e.g. apt install g++) or set PYCA_CXX, or call the kernel with device (MEM_DEVICE) arguments")
    return _compiler


def _cpu_id() -> str:
    """The CPU's feature flags (the code is built with -march=native, so the cache is per CPU kind)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return hashlib.sha256(line.encode()).hexdigest()[:16]
    except OSError:
        pass
    return platform.machine() + platform.processor()


_digest_memo: dict[str, tuple] = {}


def _headers_digest(dirs) -> str:
    h = hashlib.sha256()
    for d in dirs:
        for sub in ("pyca", "pyca/detail", "pyca/math"):
            p = Path(d) / sub
            if not p.is_dir():
                continue
            for f in sorted(p.iterdir()):
                if f.suffix in (".h", ".cuh") and f.is_file():
                    st = f.stat()
                    memo = _digest_memo.get(str(f))
                    if memo is None or memo[0] != (st.st_mtime_ns, st.st_size):
                        memo = ((st.st_mtime_ns, st.st_size), hashlib.sha256(f.read_bytes()).hexdigest())
                        _digest_memo[str(f)] = memo
                    h.update(f.name.encode() + memo[1].encode())
    return h.hexdigest()


_lock = threading.Lock()
_loaded: dict[str, ctypes.CDLL] = {}


def compile_shared(source: str, name: str) -> tuple[ctypes.CDLL, str]:
    """The shared library built from `source` (from the disk cache when there); (library, how:
    "memory", "disk" or "compiled")."""
    exe, ident = compiler()
    dirs = _cuda.include_dirs()
    from .. import __version__

    key = hashlib.sha256("\0".join([source, ident, " ".join(FLAGS), _cpu_id(), __version__,
                                    _headers_digest(dirs)]).encode()).hexdigest()
    with _lock:
        lib = _loaded.get(key)
        if lib is not None:
            return lib, "memory"
        cdir = _cuda.get_cache_dir()
        tmpdir = None
        if cdir is None:
            tmpdir = tempfile.mkdtemp(prefix="pyca-kernels-")
            cdir = Path(tmpdir)
        path = Path(cdir) / f"{key}.so"
        how = "disk"
        if not path.is_file():
            how = "compiled"
            _build(exe, source, dirs, path, name)
        lib = ctypes.CDLL(str(path))
        _loaded[key] = lib
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
        return lib, how


def _build(exe: str, source: str, dirs, path: Path, name: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_so = tempfile.mkstemp(prefix=".tmp-", suffix=".so", dir=path.parent)
    os.close(fd)
    with tempfile.TemporaryDirectory(prefix="pyca-kernel-src-") as d:
        src = Path(d) / f"{name}.cpp"
        src.write_text(source)
        cmd = [exe, *FLAGS, *[f"-I{x}" for x in dirs], str(src), "-o", tmp_so]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            os.unlink(tmp_so)
            raise NoCompilerError(f"cannot run the C++ compiler {exe}: {e}") from None
        if r.returncode != 0:
            os.unlink(tmp_so)
            raise HostCompileError(f"compiling the CPU half of {name} failed ({' '.join(cmd[:2])} ...):\n"
                                   f"{r.stderr.strip()[-4000:]}")
    os.replace(tmp_so, path)  # atomic: a concurrent process sees the old file, the new one, or none
