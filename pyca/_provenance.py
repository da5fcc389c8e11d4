"""How a result was made, for the summary.json of every pyca program (lddmm, atlas, register-batch,
and the next ones): one helper, record(), whose dict each program stores under "provenance".

    {"pyca": {"version", "git_revision", "git_dirty", "location"}, "python", "command", "cwd",
     "written", "inputs": {role: {"path", "bytes", "sha256"}}, "device",
     "peak_memory": {"gpu_bytes", "cpu_rss_bytes", "scope"}}

The git revision is known when pyca runs from a git checkout (the folder above the package); an
installed copy has none (None). Checksums are SHA-256 of the files' bytes, read in 1 MiB blocks
(a file of any size costs 1 MiB of memory). Peak memory: the GPU's is the stream-ordered pool's
high-water mark of this process on its current device (pyca.device_memory_peak(); 0 where no GPU
was used), the CPU's the process's peak resident set (getrusage), both since the process started.
"""
from __future__ import annotations

import datetime
import os
import shlex
import subprocess
import sys

from ._files import fingerprint

_SUMS = {}  # (absolute path, size, mtime_ns) -> sha256: a summary rewritten per iteration reads each file once


def sha256(path):
    """SHA-256 of a file's bytes, hex, read in 1 MiB blocks (remembered while the file's size and
    modification time stay the same)."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if key not in _SUMS:
        _SUMS[key] = fingerprint(path).split(":", 1)[1]
    return _SUMS[key]


def describe_input(path):
    """{'path': absolute path, 'bytes': size, 'sha256': ...} of a file, or {'path': str(path)} for
    something that is not a file (the built-in pair, an in-memory image's name)."""
    p = os.fspath(path)
    if not os.path.isfile(p):
        return {"path": p}
    try:
        return {"path": os.path.abspath(p), "bytes": os.path.getsize(p), "sha256": sha256(p)}
    except OSError as e:  # read when the registration had it; say why not now
        return {"path": os.path.abspath(p), "error": str(e)}


def git_revision():
    """(revision, dirty) of the git checkout pyca is imported from, or (None, None)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.exists(os.path.join(here, ".git")):
        return None, None
    try:
        rev = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return None, None
        st = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True, timeout=10)
        return rev.stdout.strip(), (bool(st.stdout.strip()) if st.returncode == 0 else None)
    except (OSError, subprocess.SubprocessError):
        return None, None


def peak_memory():
    """{'gpu_bytes': the pool's peak on this process's device (0: no GPU used), 'cpu_rss_bytes': the
    process's peak resident memory, 'scope': 'process'}."""
    from . import core

    gpu = int(core.device_memory_peak()) if hasattr(core, "device_memory_peak") else None
    try:
        import resource

        rss = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # KiB on Linux
    except (ImportError, OSError):
        rss = None
    return {"gpu_bytes": gpu, "cpu_rss_bytes": rss, "scope": "process"}


def record(inputs=None, device=None, command=None):
    """The provenance dict (module docstring). inputs: role -> path (None values skipped); command:
    the argument list (default: this process's sys.argv, the program's name first)."""
    from . import __version__

    rev, dirty = git_revision()
    argv = list(sys.argv if command is None else command)
    if argv and command is None:  # the program's name: pyca, or python -m pyca
        argv[0] = "python3 -m pyca" if argv[0].endswith("__main__.py") else os.path.basename(argv[0])
    argv[:1] = shlex.split(argv[0]) if argv else []
    return {
        "pyca": {"version": __version__, "git_revision": rev, "git_dirty": dirty,
                 "location": os.path.dirname(os.path.abspath(__file__))},
        "python": sys.version.split()[0],
        "command": shlex.join(argv),
        "cwd": os.getcwd(),
        "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "inputs": {k: describe_input(v) for k, v in (inputs or {}).items() if v is not None},
        "device": device,
        "peak_memory": peak_memory(),
    }


def record_cluster(client, inputs=None, device=None, command=None):
    """record() for a program whose registrations ran on Dask workers: peak_memory also gives each
    worker's ('workers': address -> peak_memory()), asked of the workers when the summary is written."""
    rec = record(inputs=inputs, device=device, command=command)
    try:
        rec["peak_memory"]["workers"] = client.run(peak_memory)
    except Exception as e:  # noqa: BLE001 - a summary is still written when a worker cannot answer
        rec["peak_memory"]["workers"] = f"not available: {type(e).__name__}: {e}"
    return rec
