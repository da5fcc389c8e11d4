"""The `pyca` console script's entry point (pyproject.toml, [project.scripts]).

It lives outside the pyca package so that it runs before `import pyca`: loading the package (NumPy, the
compiled core, the CUDA libraries) takes a second or two, and a Ctrl-C or SIGTERM then would print
Python's traceback. Here such a signal ends the command with one line (`pyca CMD: interrupted`, exit
130; `pyca CMD: terminated (SIGTERM)`, 143), as pyca.cli.main ends it once the package is loaded.
Nothing has been written by then, so nothing needs discarding. A signal the command inherited as ignored
stays ignored."""
import os
import re
import signal
import sys

__all__ = ["main"]


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


def main():
    """Loads pyca with Ctrl-C and SIGTERM each ending the command in one line, then runs pyca.cli.main."""
    saved = {}
    for sig, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(sig) is default:
            saved[sig] = signal.signal(sig, _quit)
    try:
        from pyca.cli import main as run
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)
    return run()
