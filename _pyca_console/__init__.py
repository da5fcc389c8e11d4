"""The `pyca` console script's entry point (pyproject.toml, [project.scripts]), and the same guard for
`python -m pyca`.

It lives outside the pyca package so that it runs before `import pyca`: loading the package (NumPy, the
compiled core, the CUDA libraries) takes a second or two, and a Ctrl-C or SIGTERM then would print
Python's traceback. Here such a signal ends the command with one line (`pyca CMD: interrupted`, exit
130; `pyca CMD: terminated (SIGTERM)`, 143), as pyca.cli.main ends it once the package is loaded.
Nothing has been written by then, so nothing needs discarding. A signal the command inherited as ignored
stays ignored.

`python -m pyca` imports the package before its `__main__` runs: pyca/__init__.py calls `guard()` first
when it is imported for that (`running_python_m()`), and pyca/__main__.py calls `release()` once
pyca.cli is loaded."""
import os
import re
import signal
import sys

__all__ = ["main", "guard", "release", "running_python_m"]

_saved = {}  # signal -> the handler guard() replaced, until release()


def _command():
    word = sys.argv[1] if len(sys.argv) > 1 else ""
    return "pyca " + word if re.fullmatch(r"[a-z][a-z0-9-]*", word) else "pyca"


def _quit(signum, frame):
    if signum == signal.SIGINT:
        line, code = "interrupted", 130
    else:
        line, code = "terminated (SIGTERM)", 143
    try:
        os.write(2, f"{_command()}: {line}\n".encode())
    finally:
        os._exit(code)


def guard():
    """Ctrl-C and SIGTERM end the process in one line from now until release() (each only where it has
    Python's default handler: one inherited as ignored, or set by the program, is left alone)."""
    for sig, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if sig not in _saved and signal.getsignal(sig) is default:
            _saved[sig] = signal.signal(sig, _quit)


def release():
    """Puts back the handlers guard() replaced (pyca.cli.main then reports a signal itself)."""
    while _saved:
        sig, old = _saved.popitem()
        signal.signal(sig, old)


def running_python_m(package="pyca"):
    """True while `python -m <package>` is importing the package to run it (sys.argv[0] is "-m" until
    the module is found; sys.orig_argv names the module just before the command's own arguments)."""
    if sys.argv[:1] != ["-m"] or not getattr(sys, "orig_argv", None):
        return False
    head = sys.orig_argv[: len(sys.orig_argv) - (len(sys.argv) - 1)]
    if len(head) >= 2 and head[-1] in (package, package + ".__main__"):
        opt = head[-2]
        return opt.startswith("-") and not opt.startswith("--") and opt.endswith("m")
    return bool(head) and re.fullmatch(r"-[A-Za-z]*m" + re.escape(package) + r"(\.__main__)?", head[-1]) is not None


def main():
    """Loads pyca with Ctrl-C and SIGTERM each ending the command in one line, then runs pyca.cli.main."""
    guard()
    try:
        from pyca.cli import main as run
    finally:
        release()
    return run()
