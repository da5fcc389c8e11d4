"""Where the NVIDIA wheels (nvidia-cufft, nvidia-cuda-nvrtc: ``pip install pyca3d[cuda]``) put
cuFFT and NVRTC on this interpreter's sys.path, for libpyca's loader (cuda/src/cuda_libs.h), which
loads them at their first use. The loader looks beside the pyca package by itself; this adds the
other folders of sys.path (a venv over system site-packages, the user's site). No library is
loaded here. Also: which libnvrtc compiles (its file), for the kernel cache key, without loading it
when an earlier process recorded it (nvrtc_identity).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

_WHEEL_LIB_DIRS = ("nvidia/cu13/lib", "nvidia/cufft/lib", "nvidia/cuda_nvrtc/lib")
ENV = "PYCA_CUDA_WHEEL_DIRS"


def wheel_lib_dirs() -> list[str]:
    """The existing NVIDIA wheel library folders under sys.path, in sys.path order."""
    found: list[str] = []
    for entry in sys.path:
        for sub in _WHEEL_LIB_DIRS:
            d = os.path.join(entry or os.curdir, sub)
            if d not in found and os.path.isdir(d):
                found.append(os.path.abspath(d))
    return found


def publish() -> None:
    """Puts wheel_lib_dirs() into PYCA_CUDA_WHEEL_DIRS (kept when the user set it)."""
    if ENV not in os.environ:
        dirs = wheel_lib_dirs()
        if dirs:
            os.environ[ENV] = os.pathsep.join(dirs)


# ------------------------------------------------------------------------------------------------
# Which libnvrtc compiles: part of pyca.cuda's kernel cache key, found without loading it.
_RECORD = "nvrtc-library.json"
_identity: tuple | None = None
_record: list = []  # [record file, search state] of this process's identity


def _mapped(match) -> str | None:
    """The path of the first file mapped into this process whose file name satisfies `match`, or None
    (Linux: /proc/self/maps)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                i = line.find("/")
                if i >= 0 and match(os.path.basename(line[i:].strip())):
                    return line[i:].strip()
    except OSError:
        pass
    return None


def loaded_nvrtc(soname: str | None = None) -> str | None:
    """The path of the libnvrtc mapped into this process (`soname`, e.g. libnvrtc.so.13, or a file
    whose name continues it with a dot; any libnvrtc.so.* when None), or None."""
    if soname is None:
        return _mapped(lambda n: n.startswith("libnvrtc.so"))
    return _mapped(lambda n: n == soname or n.startswith(soname + "."))


def _file_id(path: str):
    st = os.stat(path)
    return [os.path.realpath(path), st.st_size, st.st_mtime_ns]


def _search_state(core_file: str) -> str:
    """What decides which libnvrtc libpyca's loader would open (cuda/src/cuda_libs.cpp): the variables
    it reads, where libpyca is, and the folders it searches with their modification times (a file
    added to or removed from a folder changes its time), /etc/ld.so.cache's included."""
    env = {v: os.environ.get(v) for v in ("PYCA_CUDA_LIB_DIRS", ENV, "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH")}
    lib = _mapped(lambda n: n.startswith("libpyca.")) or core_file  # the loader looks beside libpyca
    here = os.path.dirname(os.path.realpath(lib))
    dirs = [os.path.join(here, "..", w) for w in _WHEEL_LIB_DIRS]
    for v in ("PYCA_CUDA_LIB_DIRS", ENV, "LD_LIBRARY_PATH"):
        dirs += [d for d in (os.environ.get(v) or "").split(os.pathsep) if d]
    dirs += [os.path.join(os.environ[v], "lib64") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    dirs += ["/usr/local/cuda/lib64", "/etc/ld.so.cache"]
    times = []
    for d in dirs:
        try:
            times.append([d, os.stat(d).st_mtime_ns])
        except OSError:
            times.append([d, None])
    return json.dumps([env, here, times])


def _loaded_path(core) -> str | None:
    """The libnvrtc libpyca loaded (it is loaded now): from libpyca, else from the process's maps."""
    f = getattr(core, "_cuda_nvrtc_path", None)
    if f is not None:
        return f()
    return loaded_nvrtc(_soname(core))


def _soname(core) -> str | None:
    f = getattr(core, "_cuda_nvrtc_soname", None)
    return f() if f is not None else None


def nvrtc_identity(cache_dir, core) -> tuple:
    """(path, size, mtime_ns) of the libnvrtc that compiles in this process (`core`: pyca.core), for
    the kernel cache key: the copy of pyca's libnvrtc (its soname) already loaded, if any; else the
    one recorded in `cache_dir` by the process that last loaded it, when nothing that decides the
    search has changed since and the file is unchanged; else libnvrtc is loaded and the file
    recorded. A process whose kernels all come from the cache thus never loads libnvrtc. Falls back
    to ("version", major, minor) where the loaded file cannot be found."""
    global _identity
    if _identity is not None:
        return _identity
    soname = _soname(core)
    path = loaded_nvrtc(soname)
    if path is not None:
        try:
            _identity = tuple(_file_id(path))
            return _identity
        except OSError:
            pass
    state = _search_state(core.__file__)
    _record[:] = []
    rec_path = os.path.join(str(cache_dir), _RECORD) if cache_dir is not None else None
    if rec_path is not None:
        try:
            with open(rec_path, encoding="utf-8") as f:
                rec = json.load(f)
            if (rec.get("search") == state and rec.get("soname") == soname
                    and _file_id(rec["library"][0]) == rec["library"]):
                _identity = tuple(rec["library"])
                _record[:] = [rec_path, state, soname]
                return _identity
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            pass
    version = core._cuda_nvrtc_version()  # loads libnvrtc
    path = _loaded_path(core)
    try:
        _identity = tuple(_file_id(path)) if path is not None else ("version", *version)
    except OSError:
        _identity = ("version", *version)
    _record[:] = [rec_path, state, soname]
    _write_record()
    return _identity


def _write_record():
    rec_path, state, soname = _record if _record else (None, None, None)
    if rec_path is None or _identity is None or _identity[0] == "version":
        return
    try:
        os.makedirs(os.path.dirname(rec_path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=os.path.dirname(rec_path))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"search": state, "soname": soname, "library": list(_identity)}, f)
        os.replace(tmp, rec_path)  # atomic for concurrent processes
    except OSError:
        pass


def check_nvrtc_identity(identity: tuple, core) -> tuple:
    """After a compile (libnvrtc is loaded now): the identity of the library that did compile. When a
    recorded identity was wrong, this process and the record take the right one (the caller keys its
    result on the returned identity)."""
    global _identity
    if identity[0] == "version":
        return identity
    try:
        path = _loaded_path(core)
        if path is None:
            return identity
        actual = tuple(_file_id(path))
    except OSError:
        return identity
    if actual != tuple(identity):
        _identity = actual
        _write_record()
    return actual
