"""cuFFT and NVRTC are loaded at their first use (cuda/src/cuda_libs.cpp), not linked: libpyca
names no CUDA library and no absolute RUNPATH, `import pyca` loads neither, and without them the
CUDA operations that need them raise pyca.CudaError naming the library while all else still runs.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pyca as ca

LIBPYCA = next(Path(ca.get_library_dirs()[0]).glob("libpyca.so*"))
CUDA_BUILD = b"libcufft.so." in LIBPYCA.read_bytes()  # the loader's library names are in CUDA builds only


def _run(code: str, **env) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, **env}, cwd=os.path.dirname(os.path.abspath(os.sep)))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs readelf")
def test_libpyca_links_no_cuda_library_and_no_absolute_runpath():
    dyn = subprocess.run(["readelf", "-d", str(LIBPYCA)], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\).*\[(.+)\]", dyn)
    assert needed, dyn
    assert not [n for n in needed if re.match(r"lib(cufft|nvrtc|cudart|cuda)\.so", n)], needed
    for entry in re.findall(r"\(R(?:UN)?PATH\).*\[(.+)\]", dyn):
        for p in entry.split(":"):
            assert p.startswith("$ORIGIN"), f"absolute RUNPATH entry {p!r} in {LIBPYCA}"


@pytest.mark.skipif(not CUDA_BUILD, reason="pyca was built without CUDA")
def test_import_and_cpu_work_load_neither_library():
    out = _run("import numpy as np, pyca as ca\n"
               "g = ca.GridInfo(ca.Vec3Di(8, 8, 8), ca.Vec3Df(1, 1, 1))\n"
               "k = ca.FluidKernelFFT(); k.setGrid(g)\n"
               "f = ca.Field3D(g, ca.MEM_HOST); f.fill(1.0); k.applyInverseOperator(f)\n"
               "maps = open('/proc/self/maps').read()\n"
               "print('cufft' in maps, 'nvrtc' in maps)")
    assert out.split() == ["False", "False"]


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
def test_missing_libraries_raise_cuda_error_naming_them(tmp_path):
    # PYCA_CUDA_LIB_DIRS names the only folders searched: an empty one hides both libraries.
    code = f"""
import numpy as np, pyca as ca
ca.cuda.set_cache_dir({str(tmp_path / "cache")!r})
g = ca.GridInfo(ca.Vec3Di(8, 8, 8), ca.Vec3Df(1, 1, 1))
k = ca.FluidKernelFFT(); k.setGrid(g)
f = ca.Field3D(g, ca.MEM_DEVICE); f.fill(1.0)
for what, call in [("FFT", lambda: k.applyInverseOperator(f)),
                   ("NVRTC", lambda: ca.cuda.SourceModule('extern "C" __global__ void q(float* x) {{ x[0] = 1; }}')
                                         .get_function("q"))]:
    try:
        call()
        print(what, "no error")
    except ca.CudaError as e:
        print(what, "CudaError:", e)
a = ca.Image3D(g, ca.MEM_DEVICE); a.fill(2.0)
b = ca.Image3D(g, ca.MEM_DEVICE); ca.Add(b, a, a)
print("device add", float(np.asarray(b.to(ca.MEM_HOST)).max()))
"""
    empty = tmp_path / "no-libs"
    empty.mkdir()
    out = _run(code, PYCA_CUDA_LIB_DIRS=str(empty))
    assert re.search(r"^FFT CudaError: cuFFT is not available: libcufft\.so\.\d+ is not in PYCA_CUDA_LIB_DIRS", out,
                     re.M), out
    assert re.search(r"^NVRTC CudaError: NVRTC is not available: libnvrtc\.so\.\d+ is not in PYCA_CUDA_LIB_DIRS",
                     out, re.M), out
    assert "device add 4.0" in out


def test_wheel_lib_dirs_follow_sys_path(tmp_path, monkeypatch):
    from pyca import _cuda_libs

    a, b = tmp_path / "site_a", tmp_path / "site_b"
    (a / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    (b / "nvidia" / "cufft" / "lib").mkdir(parents=True)
    (b / "nvidia" / "cuda_nvrtc" / "lib").mkdir(parents=True)
    (tmp_path / "site_c" / "nvidia").mkdir(parents=True)  # no lib folder: not listed
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site_c"), str(b), str(a), str(b)])
    assert _cuda_libs.wheel_lib_dirs() == [str(b / "nvidia" / "cufft" / "lib"),
                                           str(b / "nvidia" / "cuda_nvrtc" / "lib"),
                                           str(a / "nvidia" / "cu13" / "lib")]
    monkeypatch.delenv(_cuda_libs.ENV, raising=False)
    _cuda_libs.publish()
    assert os.environ[_cuda_libs.ENV].split(os.pathsep)[-1] == str(a / "nvidia" / "cu13" / "lib")
    monkeypatch.setenv(_cuda_libs.ENV, "/chosen")  # the user's choice is kept
    _cuda_libs.publish()
    assert os.environ[_cuda_libs.ENV] == "/chosen"


def _nvrtc_available() -> bool:
    try:
        return bool(ca.core._cuda_nvrtc_version())
    except Exception:  # noqa: BLE001 - a build without CUDA or without libnvrtc
        return False


# A new process compiling one source through the kernel cache: the cache's answer, whether libnvrtc
# is mapped into the process afterwards, and the recorded library.
NVRTC_CHILD = """
import ctypes, json, os, sys
import pyca as ca
from pyca import _cuda_libs
ca.cuda.set_cache_dir(sys.argv[1])
if len(sys.argv) > 2:
    ctypes.CDLL(sys.argv[2])  # another library mapped under a libnvrtc name
soname = getattr(ca.core, "_cuda_nvrtc_soname", lambda: None)()
m = ca.cuda.SourceModule('extern "C" __global__ void q(float* x) {{ x[0] = {value}; }}', name="q.cu")
rec = json.load(open(os.path.join(sys.argv[1], "nvrtc-library.json")))
print(m.cache_hit, _cuda_libs.loaded_nvrtc(soname) is not None, os.path.basename(rec["library"][0]))
"""


@pytest.mark.skipif(not _nvrtc_available(), reason="pyca built without NVRTC (or libnvrtc not found)")
def test_cache_hit_in_a_new_process_does_not_load_nvrtc(tmp_path):
    """The kernel cache key names libnvrtc's file (path, size, mtime), recorded by the process that
    loaded it: a later process whose kernel is in the cache never loads libnvrtc (6-15 ms)."""
    cache = str(tmp_path / "cache")

    def child(value="1.0f", *preload, **env):
        r = subprocess.run([sys.executable, "-c", NVRTC_CHILD.format(value=value), cache, *preload],
                           capture_output=True, text=True, timeout=300, env={**os.environ, **env}, cwd=str(tmp_path))
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    hit, loaded, lib = child()
    assert (hit, loaded) == ("None", "True") and lib.startswith("libnvrtc.so")
    assert child() == ["disk", "False", lib]
    if hasattr(ca.core, "_cuda_nvrtc_soname"):  # a libnvrtc of another major version mapped (CuPy's, ...)
        import _ctypes

        major = int(ca.core._cuda_nvrtc_soname().rsplit(".", 1)[1])
        other = tmp_path / f"libnvrtc.so.{major - 1}"
        shutil.copy(_ctypes.__file__, other)
        assert child("1.0f", str(other)) == ["disk", "False", lib]
    # The search changed (another LD_LIBRARY_PATH): the record is not trusted, libnvrtc is loaded,
    # and it is the same file, so the cached kernel still serves.
    assert child(LD_LIBRARY_PATH=str(tmp_path)) == ["disk", "True", lib]
    # A record naming another file (the search unchanged): a new source compiles with the library
    # that is really loaded, and the record is corrected.
    rec_path = os.path.join(cache, "nvrtc-library.json")
    with open(rec_path) as f:
        rec = __import__("json").load(f)
    other = tmp_path / "libnvrtc.so.0"
    other.write_bytes(b"not a library")
    st = other.stat()
    rec["library"] = [str(other), st.st_size, st.st_mtime_ns]
    with open(rec_path, "w") as f:
        __import__("json").dump(rec, f)
    assert child("2.0f") == ["None", "True", lib]
    assert child("2.0f") == ["disk", "False", lib]
