"""Running the pyca console script in tests (a helper module, not a test module: conftest.py puts this
folder on sys.path): the script next to this Python or on PATH, an environment without OMP_WAIT_POLICY,
and the check that a command failed in one line."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

__all__ = ["SMALL", "console_script", "cli_env", "run", "nonblank_lines", "assert_one_line_error"]

# `pyca lddmm`'s built-in pair, small and quick (one or two seconds on CI's 2 cores)
SMALL = ["--size", "16,16,8", "--scales", "2,1", "--iterations", "2,2", "--time-steps", "2"]


def console_script():
    """The pyca console script (the test is skipped where it is not installed)."""
    for cand in (os.path.join(os.path.dirname(sys.executable), "pyca"), shutil.which("pyca")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    pytest.skip("the pyca console script is not installed next to this Python or on PATH")


def cli_env(**extra):
    """os.environ without OMP_WAIT_POLICY (a worker's spin would slow the 2-core CI), with `extra` set."""
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(*args, timeout=180, env=None, cwd=None):
    """`pyca ARGS...` (each argument as text), its output captured."""
    return subprocess.run([console_script(), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=env or cli_env(), cwd=cwd)


def nonblank_lines(text):
    return [ln for ln in text.splitlines() if ln.strip()]


def assert_one_line_error(p, code=2, needle=None):
    """p failed with exit status `code` and one line on stderr (no traceback), holding `needle`; returns it."""
    err = nonblank_lines(p.stderr)
    assert p.returncode == code, (p.returncode, p.stderr)
    assert len(err) == 1 and "Traceback" not in p.stderr, p.stderr
    if needle:
        assert needle in err[0], err[0]
    return err[0]
