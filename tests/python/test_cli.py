"""The ``pyca`` command as a user meets it: the real console script, run in a subprocess.

Small grids and few iterations (each run is one or two seconds of work on CI's 2 cores). Ctrl-C is
os.kill(pid, SIGINT); a write interrupted half-way is made certain by a sitecustomize module that
makes nibabel's save stop for a while with the file half-written (the helper _slow_save below).
"""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import nibabel as nib
import numpy as np
import pytest

import pyca
from cli_helpers import SMALL, assert_one_line_error, cli_env, console_script, nonblank_lines, run

TMP_PREFIX = ".pyca-tmp-"


def _assert_complete(folder):
    """Every file under a final name in `folder` is whole (NIfTI: the data decompress and the gzip CRC
    checks; JSON parses; a PNG decodes) and no temporary folder is left."""
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        assert not name.startswith(TMP_PREFIX), f"temporary folder left behind: {name}"
        if name.endswith((".nii", ".nii.gz")):
            img = nib.load(path)
            assert np.asarray(img.dataobj).shape[:3] == img.shape[:3]
        elif name.endswith(".json"):
            with open(path) as fh:
                json.load(fh)
        elif name.endswith(".png"):
            from PIL import Image

            with Image.open(path) as im:
                im.load()  # a truncated PNG raises


# ------------------------------------------------------------------------------------------------
# --version, -v / -q, python -m pyca
def test_version_from_the_package():
    p = run("--version")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"pyca {pyca.__version__}"


def test_python_m_pyca_is_the_same_command():
    p = subprocess.run([sys.executable, "-m", "pyca", "--version"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"pyca {pyca.__version__}"
    p = subprocess.run([sys.executable, "-m", "pyca", "lddmm", "--help"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "usage: pyca lddmm" in p.stdout


def test_quiet_and_verbose(tmp_path):
    q = run("-q", "lddmm", *SMALL, "--no-report", "--out", str(tmp_path / "q"))
    assert q.returncode == 0, q.stderr
    assert q.stdout == "" and q.stderr == ""
    assert os.path.isfile(tmp_path / "q" / "summary.json")
    v = run("lddmm", "-v", *SMALL, "--no-report", "--out", str(tmp_path / "v"))
    assert v.returncode == 0, v.stderr
    out = v.stdout
    assert re.search(r"scale 1/2: grid \d+x\d+x\d+, [0-9.]+ s", out) and "scale 1/1: grid 16x16x8" in out, out
    assert "writing outputs to" in out
    n = run("lddmm", *SMALL, "--no-report", "--out", str(tmp_path / "n"))
    assert n.returncode == 0 and "scale 1/2: grid" not in n.stdout  # -v says more than the default
    assert "iterations=[2, 2]\n" in n.stdout, n.stdout
    # without --iterations the parameter line gives the caps the run used (the metric's), not "None"
    d = run("lddmm", "--size", "16,16,8", "--time-steps", "2", "--tol", "0.5", "--no-report",
            "--out", str(tmp_path / "d"))
    assert d.returncode == 0 and "scales=[4, 2, 1] iterations=[10, 150, 150]\n" in d.stdout, d.stdout
    assert len(nonblank_lines(n.stdout)) < len(nonblank_lines(out))


@pytest.mark.parametrize("where", ["before", "after"])
def test_demo_is_quiet_with_q(where):
    args = ["-q", "demo", "--size", "8", "--device", "cpu"] if where == "before" else \
        ["demo", "--size", "8", "--device", "cpu", "-q"]
    q = run(*args)
    assert q.returncode == 0, q.stderr
    assert q.stdout == "" and q.stderr == ""
    loud = run("demo", "--size", "8", "--device", "cpu")
    assert loud.returncode == 0 and "GaussianBlur" in loud.stdout and loud.stdout.rstrip().endswith("(MEM_HOST).")


def test_verbose_and_quiet_together_is_an_error():
    assert_one_line_error(run("-v", "-q", "info"), 2, "not allowed with argument")


# ------------------------------------------------------------------------------------------------
# --out and --overwrite
def test_existing_nonempty_out_is_refused_before_any_work(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    t0 = time.perf_counter()
    p = run("lddmm", *SMALL, "--out", str(out))
    line = assert_one_line_error(p, 2, "--overwrite")
    assert "pyca lddmm: error:" in line
    assert sorted(os.listdir(out)) == ["mine.txt"]  # nothing written, nothing removed
    assert (out / "mine.txt").read_text() == "keep me"
    assert "pyca lddmm: built-in pair" not in p.stdout  # refused before the registration started
    assert time.perf_counter() - t0 < 60


def test_empty_out_folder_is_used(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    p = run("lddmm", *SMALL, "--no-report", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "summary.json" in os.listdir(out)


def test_overwrite_replaces_the_previous_run_without_stale_files(tmp_path):
    out = tmp_path / "out"
    first = run("lddmm", *SMALL, "--out", str(out))  # built-in data: fixed/moving, report.png, .nii.gz
    assert first.returncode == 0, first.stderr
    assert {"report.png", "fixed.nii.gz", "phi.nii.gz"} <= set(os.listdir(out))
    (out / "notes.txt").write_text("mine")
    second = run("lddmm", *SMALL, "--no-report", "--no-compress", "--overwrite", "--out", str(out))
    assert second.returncode == 0, second.stderr
    names = set(os.listdir(out))
    with open(out / "summary.json") as fh:
        listed = set(json.load(fh)["files"])
    assert names == listed | {"notes.txt"}, names  # the new run's files, and the user's file
    assert not any(n.endswith(".nii.gz") for n in names) and "report.png" not in names
    _assert_complete(out)


def test_fixed_step_that_lowers_nothing_is_refused(tmp_path):
    # With a match term weighted 2 / sigma^2 = 2e12 a step of 0.1 overshoots in every halving: one line,
    # a non-zero exit and no output folder, not an identity map reported as a registration.
    out = tmp_path / "out"
    line = assert_one_line_error(run("lddmm", "--size", "24,24,16", "--scales", "1", "--iterations", "5", "--step",
                                      "0.1", "--sigma", "1e-6", "--no-progress", "--out", str(out)), 2, "step='auto'")
    assert "none of 5 tries" in line and "2 / sigma^2 = 2e+12" in line, line
    assert not out.exists()


def test_out_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    assert_one_line_error(run("lddmm", *SMALL, "--out", str(f)), 2, "not a folder")


# ------------------------------------------------------------------------------------------------
# Ctrl-C
def _sigint_default():
    # As in a terminal: a suite started in the background of a non-interactive shell inherits SIGINT
    # ignored, and a command that inherits it ignored rightly keeps ignoring it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(args, env=None):
    return subprocess.Popen([console_script(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env or cli_env(), preexec_fn=_sigint_default)


def _interrupt(p, ready, timeout=90):
    """Waits until ready() is true (or the process ends), sends SIGINT, returns (rc, stdout, stderr)."""
    t0 = time.perf_counter()
    while not ready() and p.poll() is None:
        assert time.perf_counter() - t0 < timeout, "the command never reached the point to interrupt"
        time.sleep(0.05)
    assert p.poll() is None, "the command ended before it could be interrupted"
    os.kill(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=60)
    return p.returncode, out, err


def test_ctrl_c_during_the_registration(tmp_path):
    out = tmp_path / "out"
    # A small fixed step: every iteration is accepted, the registration runs until interrupted (LNCC:
    # the SSD's larger weight makes this step converge, and stop, within a second).
    # (lpow 2, alpha 2: a kernel whose gain suits this fixed step; the defaults' would refuse it.)
    p = _start(["lddmm", "--size", "24,24,16", "--scales", "1", "--iterations", "100000", "--step", "0.0001",
                "--metric", "lncc", "--lpow", "2", "--alpha", "2", "--time-steps", "2", "--tol", "0", "--no-progress",
                "--out", str(out)])
    started = []

    def ready():  # the first line is printed when the inputs are checked and the work starts
        if not started:
            started.append(p.stdout.readline())
            time.sleep(1.0)
        return True

    rc, _, err = _interrupt(p, ready)
    assert rc == 130, (rc, err)
    assert nonblank_lines(err) == ["pyca lddmm: interrupted"], err
    assert not out.exists() or os.listdir(out) == []  # no output under a final name


def _declaredconsole_script(folder):
    """The `pyca` console script of pyproject.toml's [project.scripts] entry: the installed one when it
    calls that entry (a pip install of this checkout, as in CI), else the lines pip writes for that entry,
    in `folder` (an installed script older than the checkout's entry)."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "pyproject.toml"), encoding="utf-8") as fh:
        module, func = re.search(r'^\[project\.scripts\]\s*\npyca = "([\w.]+):(\w+)"', fh.read(), re.M).groups()
    installed = console_script()
    with open(installed, encoding="utf-8", errors="replace") as fh:
        if f"from {module} import {func}" in fh.read():
            return installed
    path = os.path.join(folder, "pyca")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f"#!{sys.executable}\nimport sys\nfrom {module} import {func}\n"
                 f"if __name__ == '__main__':\n    sys.exit({func}())\n")
    os.chmod(path, 0o755)
    return path


def _signals_caught(pid):
    """The process's caught-signal set (Linux /proc), empty when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            mask = int(next(ln for ln in fh if ln.startswith("SigCgt:")).split()[1], 16)
    except (OSError, StopIteration, ValueError):
        return set()
    return {s for s in (signal.SIGINT, signal.SIGTERM) if mask >> (s - 1) & 1}


def _core_loaded(pid):
    """Whether pyca's compiled core is mapped into the process yet (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/maps", encoding="ascii", errors="replace") as fh:
            return any("libpyca" in ln or "pyca/_core." in ln for ln in fh)
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc to watch the command start")
def test_ctrl_c_and_sigterm_while_pyca_loads_are_one_line(tmp_path):
    """A signal in the first second of a command, while `import pyca` runs (before pyca.cli.main): one
    line and exit 130 (SIGTERM: 143), never Python's traceback. The console script's entry sets its
    handlers before it imports pyca; the signals go at several delays after that, the first ones before
    pyca's compiled core is even loaded (the later ones may reach pyca.cli.main instead: the same line)."""
    script = _declaredconsole_script(tmp_path)
    args = ["lddmm", "--size", "24,24,16", "--scales", "1", "--iterations", "100000", "--step", "0.0001",
            "--metric", "lncc", "--lpow", "2", "--alpha", "2", "--time-steps", "2", "--tol", "0", "--no-progress"]
    early = 0
    for i, (sig, delay) in enumerate([(signal.SIGINT, 0.0), (signal.SIGINT, 0.1), (signal.SIGINT, 0.3),
                                      (signal.SIGINT, 0.8), (signal.SIGTERM, 0.0), (signal.SIGTERM, 0.2)]):
        out = tmp_path / f"out{i}"
        p = subprocess.Popen([script, *args, "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=cli_env(), preexec_fn=_sigint_default)
        t0 = time.perf_counter()
        # SIGTERM caught while pyca's core is not loaded: the entry runs, the import has not finished.
        while not (signal.SIGTERM in _signals_caught(p.pid) and not _core_loaded(p.pid)):
            assert p.poll() is None and time.perf_counter() - t0 < 60, \
                "the console script never set its signal handlers before loading pyca"
            time.sleep(0.002)
        time.sleep(delay)
        early += not _core_loaded(p.pid)
        os.kill(p.pid, sig)
        _, err = p.communicate(timeout=60)
        word = "interrupted" if sig == signal.SIGINT else r"terminated \(SIGTERM\)"
        lines = nonblank_lines(err)  # (pyca.cli names the command once its arguments are parsed)
        assert p.returncode == (130 if sig == signal.SIGINT else 143) and len(lines) == 1 \
            and re.fullmatch(f"pyca( lddmm)?: {word}", lines[0]), (sig, delay, p.returncode, err)
        assert not out.exists() or os.listdir(out) == []
    assert early >= 2  # at least the two signals sent at once arrived before the core was loaded


SLOW_SAVE = textwrap.dedent('''
    # Loaded by the test's subprocess through PYTHONPATH: pyca.io's .nii.gz writer finishes the file,
    # cuts it in half, says so in a marker file and waits (Ctrl-C arrives here), then writes it whole.
    import os, time
    import pyca.io

    class _Slow(pyca.io.GzipWriter):
        def __init__(self, path, *args, **kwargs):
            super().__init__(path, *args, **kwargs)
            self._path = path

        def close(self):
            super().close()
            with open(self._path, "rb") as fh:
                whole = fh.read()
            with open(self._path, "r+b") as fh:
                fh.truncate(len(whole) // 2)
            open(os.environ["PYCA_TEST_MARKER"], "a").close()
            time.sleep(3.0)
            with open(self._path, "wb") as fh:
                fh.write(whole)

    pyca.io.GzipWriter = _Slow
''')


@pytest.mark.parametrize("report", [False, True], ids=["no-report", "report"])
def test_ctrl_c_while_writing_leaves_no_half_written_file(tmp_path, report):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_SAVE)
    marker = tmp_path / "writing"
    out = tmp_path / "out"
    env = cli_env(PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
               PYCA_TEST_MARKER=marker)
    p = _start(["lddmm", *SMALL, "--out", str(out)] + ([] if report else ["--no-report"]), env=env)
    rc, _, err = _interrupt(p, marker.exists)
    assert rc == 130, (rc, err)
    assert [ln for ln in nonblank_lines(err) if not re.match(r"lddmm \[(cpu|gpu)\]: ", ln)] == ["pyca lddmm: interrupted"], err
    assert out.is_dir()
    _assert_complete(out)  # files finished by other writer threads are whole; no half file, no temporary
    assert "summary.json" not in os.listdir(out)  # written last, only by a complete run


# ------------------------------------------------------------------------------------------------
# A missing dependency of the outputs: one line
NO_PIL = "import sys\nsys.modules['PIL'] = None  # import PIL raises ImportError\n"


def test_a_report_that_cannot_be_drawn_is_one_line_and_exit_1(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_PIL)
    out = tmp_path / "out"
    env = cli_env(PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    p = run("lddmm", *SMALL, "--no-progress", "--out", str(out), env=env, timeout=120)
    assert_one_line_error(p, 1, "report.png could not be drawn: ")
    names = os.listdir(out)
    assert "summary.json" not in names and "report.png" not in names  # the run is not reported complete
    assert {"phi.nii.gz", "phiinv.nii.gz", "deformed.nii.gz", "jacdet.nii.gz"} <= set(names)  # written whole
    _assert_complete(out)


def test_without_nibabel_the_error_is_one_line(tmp_path):
    # nibabel is imported ahead on a thread of the command (pyca.io.prepare_writing): its failure
    # there must stay silent, and the command say it once, before any work.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['nibabel'] = None\n")
    env = cli_env(PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    p = run("lddmm", *SMALL, "--no-report", "--no-progress", "--device", "cpu", "--out", str(tmp_path / "out"), env=env,
            timeout=120)
    assert_one_line_error(p, 2, "nibabel")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------
# Progress in a log file
def test_progress_in_a_log_file_is_a_few_plain_lines(tmp_path):
    log = tmp_path / "log.txt"
    with open(log, "w") as fh:
        p = subprocess.run([console_script(), "lddmm", "--size", "16,16,8", "--scales", "2,1", "--iterations",
                            "30,20", "--time-steps", "2", "--no-report", "--out", str(tmp_path / "out")],
                           stdout=fh, stderr=subprocess.STDOUT, timeout=120, env=cli_env())
    assert p.returncode == 0
    text = log.read_text()
    assert "\r" not in text
    progress = [ln for ln in text.splitlines() if re.match(r"lddmm \[(cpu|gpu)\]", ln)]
    assert 1 <= len(progress) <= 5, progress
    assert "50/50 it (100%)" in progress[-1]


# ------------------------------------------------------------------------------------------------
# Numbers that cannot run (issue 19): one line, exit code 2, before any work
@pytest.mark.parametrize("args", [
    ["--size", "0,4,4"],
    ["--size", "100000,100000,100000"],
    ["--size", "4,4"],
    ["--lpow", "1000000000000"],
    ["--lpow", "0"],
    ["--time-steps", "1000000000000"],
    ["--time-steps", "10**12"],
    ["--iterations", "1000000000000"],
], ids=lambda a: " ".join(a))
def test_impossible_numbers_are_one_line_and_exit_2(tmp_path, args):
    out = tmp_path / "out"
    t0 = time.perf_counter()
    p = run("lddmm", *args, "--out", str(out), timeout=60)
    line = assert_one_line_error(p, 2)
    assert line.startswith("pyca lddmm: error: argument " + args[0]), line
    assert not out.exists()
    assert time.perf_counter() - t0 < 60


def test_bad_value_of_a_library_check_is_one_line(tmp_path):
    p = run("lddmm", *SMALL, "--alpha", "nan", "--out", str(tmp_path / "o"))
    assert_one_line_error(p, 2, "alpha")


# ------------------------------------------------------------------------------------------------
# OpenMP: threads sleep while waiting unless the user chose otherwise
def test_openmp_wait_policy_is_passive_unless_chosen():
    code = "import os, pyca; print(os.environ.get('OMP_WAIT_POLICY'))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=cli_env())
    assert p.stdout.strip() == "passive", p.stderr
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=cli_env(OMP_WAIT_POLICY="active"))
    assert p.stdout.strip() == "active", p.stderr


# ------------------------------------------------------------------------------------------------
# The helpers behind it, in process
def test_atomic_path_keeps_the_old_file_when_the_write_fails(tmp_path):
    from pyca._files import atomic_path

    final = tmp_path / "a.nii.gz"
    final.write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(final) as tmp:
            with open(tmp, "wb") as fh:
                fh.write(b"half")
            raise KeyboardInterrupt
    assert final.read_bytes() == b"old" and os.listdir(tmp_path) == ["a.nii.gz"]
    with atomic_path(final) as tmp:
        assert os.path.dirname(os.path.dirname(tmp)) == str(tmp_path) and os.path.basename(tmp) == "a.nii.gz"
        with open(tmp, "wb") as fh:
            fh.write(b"new")
        assert final.read_bytes() == b"old"  # not before the block ends
    assert final.read_bytes() == b"new" and os.listdir(tmp_path) == ["a.nii.gz"]


def test_two_file_formats_keep_their_pair(tmp_path, rng):
    a = np.asfortranarray(rng.random((5, 6, 7), dtype=np.float32))
    pyca.io.save_image(pyca.Image3D.from_array(a), tmp_path / "im.hdr")
    assert sorted(os.listdir(tmp_path)) == ["im.hdr", "im.img"]
    np.testing.assert_array_equal(pyca.io.load_image(tmp_path / "im.hdr").numpy(), a)


def test_clear_previous_removes_only_the_previous_runs_files(tmp_path):
    from pyca._files import TMP_PREFIX, clear_previous

    for n in ("phi.nii.gz", "extra.txt", "mine.txt", "summary.json"):
        (tmp_path / n).write_text("x")
    (tmp_path / "summary.json").write_text(json.dumps({"files": ["extra.txt", "summary.json"]}))
    (tmp_path / (TMP_PREFIX + "abc")).mkdir()
    kept = clear_previous(tmp_path, ["phi.nii.gz", "report.png"])
    assert kept == ["mine.txt"] and os.listdir(tmp_path) == ["mine.txt"]


def test_plain_progress_prints_a_line_per_quarter():
    import io

    from pyca._progress import PlainProgress, progress_bar

    buf = io.StringIO()
    bar = progress_bar(total=10, desc="job", file=buf)  # a StringIO is not a terminal
    assert isinstance(bar, PlainProgress)
    for i in range(7):
        bar.set_postfix_str(f"i={i}", refresh=False)
        bar.update(1)
    bar.update(5)  # past the total (a converged scale skips its remaining iterations)
    bar.close()
    lines = buf.getvalue().splitlines()
    # Quarters at 3, 5, 8, 10: the jump from 7 to 10 crosses two of them and prints one line.
    assert [ln.split(",")[0] for ln in lines] == ["job: 3/10 it (30%)", "job: 5/10 it (50%)", "job: 10/10 it (100%)"]
    assert "\r" not in buf.getvalue() and lines[1].endswith("i=4")


def test_progress_of_atlas_and_batch_is_the_shared_one():
    import io

    from pyca._progress import progress_bar

    buf = io.StringIO()
    bar = progress_bar(total=8, desc="pyca atlas", file=buf, unit="reg")
    for i in range(8):
        bar.set_postfix_str(f"it 1/1 E={i}", refresh=False)
        bar.update(1)
    bar.write("pyca atlas: subject s1 excluded", file=buf)
    bar.close()
    lines = buf.getvalue().splitlines()
    assert [ln.split(",")[0] for ln in lines[:-1]] == [f"pyca atlas: {n}/8 reg ({25 * n // 2}%)" for n in (2, 4, 6, 8)]
    assert lines[-1] == "pyca atlas: subject s1 excluded"
    quiet = io.StringIO()
    off = progress_bar(total=8, desc="x", file=quiet, disable=True)  # --no-progress: no lines, messages still
    off.update(8)
    off.write("a message", file=quiet)
    assert quiet.getvalue() == "a message\n"
    import pyca.distributed as pdist

    assert not hasattr(pdist, "Progress")  # one progress implementation
