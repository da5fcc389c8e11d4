"""`python -m pyca` and the `pyca` console script while pyca loads: a Ctrl-C or SIGTERM is one line and exit
130 (143), never Python's traceback (test_cli.py also signals the console script from outside).

`python -m pyca` imports the pyca package before its __main__ runs, so the guard starts in
pyca/__init__.py. The signal is sent by the subprocess itself at a chosen import (an audit hook in a
sitecustomize module on PYTHONPATH), so that it certainly arrives while pyca and pyca.cli load: a signal
sent from outside at a fixed delay arrives wherever a loaded machine happens to be. (A signal during
Python's own start-up, before the first line of pyca runs, is Python's to report.)"""
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest

import pyca

INSTALLED = os.path.dirname(os.path.dirname(pyca.__file__))  # the tree under test, never the checkout

SITECUSTOMIZE = textwrap.dedent('''
    # Loaded by the test's subprocess through PYTHONPATH: the signal named in PYCA_TEST_SIGNAL is sent to
    # this process once, when the module named in PYCA_TEST_AT is first imported.
    import os, signal, sys

    _at, _sig = os.environ["PYCA_TEST_AT"], getattr(signal, os.environ["PYCA_TEST_SIGNAL"])

    def _hook(event, args):
        global _at
        if event == "import" and _at and args[0] == _at:
            _at = None
            os.kill(os.getpid(), _sig)

    sys.addaudithook(_hook)
''')

PROBE = textwrap.dedent('''
    import signal
    import pyca  # imported while `python -m probe` finds its package: not pyca's command, no guard
    HANDLER = signal.getsignal(signal.SIGINT)
''')


def _env(site, **extra):
    env = dict(os.environ)
    # the tree under test first (never the checkout), then what the suite runs with (its other packages)
    env["PYTHONPATH"] = os.pathsep.join([str(site), INSTALLED] + [p for p in [env.get("PYTHONPATH")] if p])
    env.update(extra)
    return env


def _sigint_default():
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as in a terminal (a background shell ignores it)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("site")
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return folder


@pytest.mark.parametrize("at, sig", [
    ("pyca._openmp", "SIGINT"),              # the first pyca module the package imports
    ("pyca.core", "SIGINT"),                 # the compiled core (NumPy, the SWIG module)
    ("pyca.registration.apply", "SIGINT"),   # the package's last parts
    ("pyca.cli", "SIGINT"),                  # pyca/__main__.py's import of the command
    ("pyca.core", "SIGTERM"),
    ("pyca.apps.shoot", "SIGINT"),           # pyca.cli.main building its parser: the command is named there too
    ("pyca.apps.shoot", "SIGTERM"),
])
@pytest.mark.parametrize("how", ["python -m pyca", "console script"])
def test_pyca_interrupted_while_it_loads_is_one_line(tmp_path, site, at, sig, how):
    out = tmp_path / "out"
    if how == "console script":  # what pip writes for pyproject.toml's `pyca = "_pyca_console:main"`
        script = tmp_path / "pyca"
        script.write_text(f"#!{sys.executable}\nimport sys\nfrom _pyca_console import main\nsys.exit(main())\n")
        script.chmod(0o755)
        start = [str(script)]
    else:
        start = [sys.executable, "-m", "pyca"]
    p = subprocess.run([*start, "lddmm", "--size", "16,16,8", "--out", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
                       env=_env(site, PYCA_TEST_AT=at, PYCA_TEST_SIGNAL=sig), preexec_fn=_sigint_default)
    word = "interrupted" if sig == "SIGINT" else r"terminated \(SIGTERM\)"
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == (130 if sig == "SIGINT" else 143), (at, p.returncode, p.stderr)
    assert len(lines) == 1 and re.fullmatch(f"pyca lddmm: {word}", lines[0]), (at, p.stderr)
    assert not out.exists()


def test_python_m_pyca_runs_and_keeps_the_guard_to_itself(tmp_path, site):
    # Without a signal the command runs as before: its handlers are pyca.cli's, not the start-up guard's.
    p = subprocess.run([sys.executable, "-m", "pyca", "--version"], capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path), env=_env(site, PYCA_TEST_AT="", PYCA_TEST_SIGNAL="SIGINT"))
    assert p.returncode == 0 and pyca.__version__ in p.stdout, p.stderr
    # Another program run with -m that imports pyca while Python finds it keeps Python's Ctrl-C.
    pkg = tmp_path / "probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(PROBE)
    (pkg / "__main__.py").write_text("import signal\nfrom probe import HANDLER\n"
                                     "print(HANDLER is signal.default_int_handler)\n")
    env = _env(site, PYCA_TEST_AT="", PYCA_TEST_SIGNAL="SIGINT")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    p = subprocess.run([sys.executable, "-m", "probe"], capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path), env=env, preexec_fn=_sigint_default)
    assert p.returncode == 0 and p.stdout.strip() == "True", (p.stdout, p.stderr)
