"""The cohort commands (`pyca atlas`, `pyca register-batch`) and `pyca lddmm` against hostile inputs and
interruptions (issue 41), through the real console script: an edited summary.json, mirrored masks and
labels, Dask's tracebacks, unbounded --workers, a bad template, outputs replaced, signals, an
unwritable --out, label values above 2^24. Small on purpose: 2-D 16 x 16 cohorts, one template
iteration, one worker."""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest

pytest.importorskip("distributed")
nib = pytest.importorskip("nibabel")

import pyca as ca  # noqa: E402
from pyca import io as pio  # noqa: E402
from cli_helpers import assert_one_line_error, cli_env, console_script, run  # noqa: E402

QUICK = ["--workers", "1", "--device", "cpu", "--no-report", "--no-progress", "-p", "iterations=3,2,1",
         "-p", "time_steps=2"]
TMP_PREFIX = ".pyca-tmp-"


def listing(folder):
    """Every path under `folder` (relative), with its size and mtime: what a command must not change."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for f in dirs + files:
            p = os.path.join(root, f)
            st = os.lstat(p)
            out[os.path.relpath(p, folder)] = (st.st_size, st.st_mtime_ns)
    return out


# ------------------------------------------------------------------------------------------------
# Item 1: --resume trusts nothing in summary.json (and item 13: a constant subject is excluded)
def _box_subjects(folder):
    """Three 16 x 16 2-D subjects (boxes shifted by a voxel) and a constant one, flat.nii.gz."""
    g = ca.GridInfo((16, 16, 1))
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(3):
        a = np.zeros((16, 16, 1), np.float32)
        a[4 + i:10, 5:11] = 1.0
        paths.append(str(folder / f"s{i}.nii.gz"))
        pio.save_image(ca.Image3D.from_array(np.asfortranarray(a), g), paths[-1])
    flat = ca.Image3D(g)
    flat.fill(3.0)
    pio.save_image(flat, str(folder / "flat.nii.gz"))
    return paths, str(folder / "flat.nii.gz")


@pytest.fixture(scope="module")
def scheduler():
    """One Dask cluster (one worker) the commands whose test is not about the embedded cluster share
    (--scheduler ADDRESS): a cluster's start is most of such a command's time. The embedded cluster is
    what the signal tests start and stop."""
    distributed = pytest.importorskip("distributed")
    from pyca.distributed import local_cluster

    with local_cluster(n_workers=1, device="cpu", dashboard=False) as c, distributed.Client(c) as client:
        client.wait_for_workers(1)
        yield c.scheduler_address


SHARED = [a for a in QUICK if a not in ("--workers", "1")]  # QUICK for a command given --scheduler


@pytest.fixture(scope="module")
def built_atlas(tmp_path_factory, scheduler):
    """One atlas iteration of the three boxes and the constant subject (excluded at iteration 0)."""
    base = tmp_path_factory.mktemp("atlas")
    paths, flat = _box_subjects(base / "inputs")
    p = run("atlas", *paths, flat, "--out", base / "a", "--template-iterations", "1", "--max-failed", "0.5",
            "--scheduler", scheduler, *SHARED)
    assert p.returncode == 0, p.stderr
    return base / "a"


def _edited_copy(built, tmp_path, edit):
    """A copy of the atlas and of its inputs (so that a test may change one), its summary.json edited."""
    a = tmp_path / "shared" / "a"
    shutil.copytree(built, a)
    shutil.copytree(built.parent / "inputs", tmp_path / "shared" / "inputs")
    with open(a / "summary.json") as fh:
        s = json.load(fh)
    s["sources"] = [str(tmp_path / "shared" / "inputs" / os.path.basename(x)) for x in s["sources"]]
    edit(s)
    with open(a / "summary.json", "w") as fh:
        json.dump(s, fh)
    return a


def _resume_refused(a, needle, via, *extra):
    """--resume refused in one line through the console script (via 'cli'), or the same check through
    atlas.build (via 'api': the command line adds nothing but its one line, proven by the 'cli' cases)."""
    if via == "cli":
        assert_one_line_error(run("atlas", "--resume", a, "--template-iterations", "2", *QUICK, *extra), 2, needle)
        return
    from pyca.apps import atlas

    with pytest.raises(atlas.AtlasError, match=re.escape(needle)):
        atlas.build(out=str(a), resume=True, template_iterations=2, quiet=True, progress=False)


@pytest.mark.parametrize("name,via", [("../victim", "cli"), ("/ABS/victim", "api")])
def test_resume_refuses_subject_names_that_leave_out(built_atlas, tmp_path, name, via):
    victim = tmp_path / "shared" / "victim"

    def edit(s):
        s["names"][0] = name.replace("/ABS", str(tmp_path / "shared"))
        s["completed_iteration"] = 1

    a = _edited_copy(built_atlas, tmp_path, edit)
    before = listing(tmp_path)
    _resume_refused(a, "cannot resume", via)
    assert listing(tmp_path) == before  # nothing written, inside --out or out of it
    assert not victim.exists()


@pytest.mark.parametrize("key,value,needle,via", [("completed_iteration", "two", "integer", "api"),
                                                  ("completed_iteration", 99, "does not match", "cli"),
                                                  ("completed_iteration", -5, "integer >= 0", "api"),
                                                  ("names", "short", "not the list of subject names", "api")])
def test_resume_refuses_edited_counters_and_lists(built_atlas, tmp_path, key, value, needle, via):
    def edit(s):
        if value == "short":
            s["names"] = s["names"][:2]
        else:
            s[key] = value

    a = _edited_copy(built_atlas, tmp_path, edit)
    before = listing(a)
    _resume_refused(a, needle, via)
    assert listing(a) == before


def test_resume_refuses_a_replaced_subject_and_changed_parameters(built_atlas, tmp_path):
    a = _edited_copy(built_atlas, tmp_path, lambda s: None)
    before = listing(a)
    _resume_refused(a, "alpha=5.0 (saved", "cli", "-p", "alpha=5")
    src = tmp_path / "shared" / "inputs" / "s1.nii.gz"
    im = pio.load_image(str(src))
    np.asarray(im)[...] *= 2
    pio.save_image(im, str(src))
    before = listing(a)
    _resume_refused(a, "s1's file", "cli")
    assert listing(a) == before


def test_resume_takes_a_new_max_failed_and_refuses_compress(built_atlas, tmp_path, scheduler):
    """--max-failed given with --resume was ignored (the saved fraction ruled): now it replaces it (to
    continue after failures); not given, the saved one stays. --compress with --resume is refused (the
    subjects' files keep their type)."""
    a = _edited_copy(built_atlas, tmp_path, lambda s: None)
    assert json.loads((a / "summary.json").read_text())["max_failed_fraction"] == 0.5
    for iters, given, want in (("2", ["--max-failed", "0.75"], 0.75), ("3", [], 0.75)):  # (one more iteration each)
        p = run("atlas", "--resume", a, "--template-iterations", iters, "--scheduler", scheduler, *SHARED, *given)
        assert p.returncode == 0, p.stderr
        assert json.loads((a / "summary.json").read_text())["max_failed_fraction"] == want
    before = listing(a)
    assert_one_line_error(run("atlas", "--resume", a, "--compress", *QUICK), 2, "compress is the atlas's own")
    assert listing(a) == before


# ------------------------------------------------------------------------------------------------
# Items 2 and 11: masks and labels placed by their own affine; label values kept as integers
LDDMM_QUICK = ["--scales", "2,1", "--iterations", "3,3", "--time-steps", "2", "--device", "cpu", "--no-report",
               "--no-progress", "-q"]


def _save(a, aff, path):
    nib.save(nib.Nifti1Image(a, aff), str(path))
    return str(path)


def _las(a, aff):
    """The same image stored LAS: voxels flipped along x, the affine flipped with them (same world)."""
    flip = np.eye(4)
    flip[0, 0], flip[0, 3] = -1.0, a.shape[0] - 1
    return np.ascontiguousarray(a[::-1]), aff @ flip


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory):
    from pyca.apps import data

    d = tmp_path_factory.mktemp("pair")
    fixed, moving = data.builtin_pair(size=(20, 18, 12))
    aff = np.diag([2.0, 2.0, 2.5, 1.0])
    aff[:3, 3] = (-20.0, -18.0, -15.0)
    f, m = fixed.numpy(), moving.numpy()
    big = 16777217  # 2^24 + 1: float32 would make it 2^24
    lab = np.where(m > 0.5, big, np.where(m > 0.2, 7, 0)).astype(np.int32)
    lab[:9] = np.where(lab[:9] > 0, big + 2, 0)  # one more value above 2^24, on the left only (asymmetric)
    mask = np.zeros(f.shape, np.uint8)
    mask[2:12, 2:16, 1:10] = 1  # an asymmetric box
    files = {"fixed": _save(f, aff, d / "f.nii.gz"), "moving": _save(m, aff, d / "m.nii.gz"),
             "labels": _save(lab, aff, d / "lab.nii.gz"), "labels_las": _save(*_las(lab, aff), d / "lab_las.nii.gz"),
             "mask": _save(mask, aff, d / "mask.nii.gz"), "mask_las": _save(*_las(mask, aff), d / "mask_las.nii.gz")}
    return files, lab


def test_masks_and_labels_stored_las_give_the_same_results_and_keep_labels_above_2_24(pair_files, tmp_path):
    """The same masks and labels stored RAS and LAS (voxels flipped, the affine with them): the same
    deformation and the same labels, not mirrored; label values above 2^24 kept, in an integer file.
    (One run per storage: a mirrored mask changes the deformation, a mirrored label map the labels.)"""
    files, lab = pair_files
    fields, labels = {}, {}
    for key in ("", "_las"):
        p = run("lddmm", "--fixed", files["fixed"], "--moving", files["moving"], "--fixed-mask", files["mask" + key],
                "--moving-mask", files["mask" + key], "--moving-labels", files["labels" + key],
                "--out", tmp_path / f"out{key}", *LDDMM_QUICK)
        assert p.returncode == 0, p.stderr
        img = nib.load(str(tmp_path / f"out{key}" / "labels.nii.gz"))
        assert img.get_data_dtype().kind in "iu", img.get_data_dtype()  # an integer file
        labels[key] = np.asarray(img.dataobj)
        fields[key] = np.asarray(nib.load(str(tmp_path / f"out{key}" / "phiinv.nii.gz")).dataobj)
    np.testing.assert_allclose(fields["_las"], fields[""], atol=1e-5)
    np.testing.assert_array_equal(labels["_las"], labels[""])  # not mirrored
    assert set(np.unique(labels[""])) == set(np.unique(lab)) == {0, 7, 16777217, 16777219}


def test_masks_and_labels_on_other_grids_are_placed_in_the_world():
    from pyca.registration.inputs import LabelImage, on_grid

    g = ca.GridInfo((6, 5, 4), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0))
    a = np.arange(6 * 5 * 4, dtype=np.float32).reshape(6, 5, 4)
    im = ca.Image3D.from_array(np.asfortranarray(a), g)
    # the same world content on a flipped (LAS) grid: voxel i holds a[5 - i]
    d = np.diag([-1.0, 1.0, 1.0])
    g_las = ca.GridInfo((6, 5, 4), (1.0, 1.0, 1.0), (5.0, 0.0, 0.0), d)
    im_las = ca.Image3D.from_array(np.asfortranarray(a[::-1]), g_las)
    np.testing.assert_array_equal(on_grid(im_las, g, nearest=True).numpy(), a)
    np.testing.assert_allclose(on_grid(im_las, g).numpy(), a, atol=1e-4)
    lab = LabelImage(np.asfortranarray(a[::-1].astype(np.int64) + 2**40), g_las)
    np.testing.assert_array_equal(lab.on_grid(g).numpy(), a.astype(np.int64) + 2**40)


# ------------------------------------------------------------------------------------------------
# Item 4 and 9: Ctrl-C and SIGTERM are one line, whenever they come; nothing half-written is left
def _sigint_default():
    # As in a terminal: a suite started in the background of a non-interactive shell inherits SIGINT
    # ignored, and a command that inherits it ignored rightly keeps ignoring it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(*args, env=None):
    return subprocess.Popen([console_script(), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env or cli_env(), start_new_session=True, preexec_fn=_sigint_default)


def _signal_after(p, needle, sig, group, extra_s=0.0, timeout=120):
    """Reads p's stderr until a line holds `needle` (None: at once), waits extra_s, sends `sig` (to p's
    process group, as a terminal's Ctrl-C does, or to p alone); returns (rc, the whole stderr)."""
    seen = []
    t0 = time.perf_counter()
    while needle is not None:
        ln = p.stderr.readline()
        assert ln or p.poll() is None, f"ended before {needle!r}: {''.join(seen)}"
        seen.append(ln)
        if needle in ln:
            break
        assert time.perf_counter() - t0 < timeout
    time.sleep(extra_s)
    (os.killpg if group else os.kill)(p.pid, sig)
    _, err = p.communicate(timeout=120)
    return p.returncode, "".join(seen) + err


def _no_temporary(folder):
    for root, dirs, _ in os.walk(folder):
        assert not [d for d in dirs if d.startswith(TMP_PREFIX)], root


@pytest.mark.parametrize("group,extra_s", [(True, 0.0), (False, 0.3)],
                         ids=["ctrl-c-at-cluster-start", "sigint-to-the-command"])
def test_ctrl_c_while_the_atlas_starts_dask_is_one_line(tmp_path, group, extra_s):
    out = tmp_path / "a"
    p = _start("atlas", "--out", out, "--cohort", "3", "--cohort-size", "16,16,1", "--template-iterations", "1",
               "--workers", "2", "--device", "cpu", "--no-report", "--no-progress")
    rc, err = _signal_after(p, "built-in cohort", signal.SIGINT, group, extra_s)
    lines = [ln for ln in err.splitlines() if ln.strip() and "built-in cohort" not in ln]
    assert rc == 130 and "Traceback" not in err, (rc, err)
    assert len(lines) == 1 and lines[0].startswith("pyca atlas: interrupted"), err
    _no_temporary(out)


def test_register_batch_ctrl_c_and_sigterm_are_one_line(pair_files, tmp_path):
    files, _ = pair_files
    for sig, code, word in ((signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")):
        out = tmp_path / f"b{code}"
        p = _start("register-batch", "--template", files["fixed"], "--subjects", files["moving"], files["fixed"],
                   "--out", out, "--workers", "1", "--device", "cpu", "--no-report", "--no-progress",
                   "-p", "iterations=200,200", "-p", "scales=2,1", "-p", "tol=0")
        # At once on the start line: the two small registrations end within a second on a fast host (the
        # step rule stops them), and a signal after the command's last line changes nothing by design.
        rc, err = _signal_after(p, "subjects onto", sig, sig == signal.SIGINT, 0.0)
        lines = [ln for ln in err.splitlines() if ln.strip() and "subjects onto" not in ln]
        assert rc == code and "Traceback" not in err, (rc, err)
        assert lines == [f"pyca register-batch: {word}" + ("" if sig == signal.SIGINT else " (SIGTERM)")], err
        _no_temporary(out)


def _start_at_marker(tmp_path, sitecustomize, *args):
    """Starts the command with `sitecustomize` loaded first; returns once it has created the file named by
    PYCA_TEST_MARKER (the moment the test acts)."""
    site, marker = tmp_path / "site", tmp_path / "marker"
    site.mkdir()
    (site / "sitecustomize.py").write_text(sitecustomize)
    env = dict(cli_env(), PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
               PYCA_TEST_MARKER=str(marker))
    p = _start(*args, env=env)
    t0 = time.perf_counter()
    while not marker.exists():
        assert p.poll() is None and time.perf_counter() - t0 < 120, p.stderr.read() if p.poll() is not None else ""
        time.sleep(0.02)
    return p


SLOW_SAVE = '''
import os, time
import pyca.io

class _Slow(pyca.io.GzipWriter):
    def close(self):
        super().close()
        open(os.environ["PYCA_TEST_MARKER"], "a").close()
        time.sleep(3.0)

pyca.io.GzipWriter = _Slow
'''


def test_sigterm_while_lddmm_writes_leaves_no_temporary_folder(tmp_path):
    out = tmp_path / "out"
    p = _start_at_marker(tmp_path, SLOW_SAVE, "lddmm", "--size", "16,16,8", "--scales", "2,1", "--iterations", "2,2",
                         "--time-steps", "2", "--no-progress", "--no-report", "--device", "cpu", "--out", out)
    os.kill(p.pid, signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, (p.returncode, err)
    assert [ln for ln in err.splitlines() if ln.strip() and "lddmm [" not in ln] == \
        ["pyca lddmm: terminated (SIGTERM)"], err
    _no_temporary(out)
    assert "summary.json" not in os.listdir(out)  # not reported complete


# A gc callback that holds the main thread inside the command (as Dask's GCDiagnosis does): a signal that
# lands there raises where Python can only ignore the exception ("Exception ignored in ...").
GC_CALLBACK = '''
import gc, os, sys, time

_armed = [True]

def _in_command():
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "cmd_lddmm":
            return True
        f = f.f_back
    return False

def _hold(phase, info):
    if _armed[0] and phase == "start" and _in_command():
        _armed[0] = False
        open(os.environ["PYCA_TEST_MARKER"], "a").close()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5.0:
            time.sleep(0.01)

gc.callbacks.append(_hold)
'''


@pytest.mark.parametrize("sig,code,word", [(signal.SIGINT, 130, "interrupted"),
                                           (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_a_signal_inside_a_gc_callback_still_ends_the_command(tmp_path, sig, code, word):
    out = tmp_path / "out"
    p = _start_at_marker(tmp_path, GC_CALLBACK, "lddmm", "--size", "24,24,16", "--scales", "2,1", "--iterations",
                         "400,400", "--no-progress", "--no-report", "--device", "cpu", "--out", out)
    os.kill(p.pid, sig)
    _, err = p.communicate(timeout=120)
    # Without the redelivery the exception is printed as ignored and the registration runs to its end (exit 0).
    assert p.returncode == code, (p.returncode, err)
    assert [ln for ln in err.splitlines() if ln.strip()] == [f"pyca lddmm: {word}"], err
    _no_temporary(out)


def test_a_redelivered_signal_is_not_raised_after_the_command_ended():
    from types import SimpleNamespace

    from pyca.cli import _Redelivery

    others = []
    r = _Redelivery(others.append)
    r.hook(SimpleNamespace(exc_value=ValueError("x")))
    assert len(others) == 1  # anything else goes to the previous hook
    r.hook(SimpleNamespace(exc_value=KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):  # delivered again, in this (the main) thread
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 5:
            time.sleep(0.001)
    r.hook(SimpleNamespace(exc_value=KeyboardInterrupt()))
    r.close()  # the command returned before the redelivery: nothing is raised in the caller's code
    time.sleep(0.2)


# ------------------------------------------------------------------------------------------------
# Items 5, 6, 7: refused before Dask starts, in one line
@pytest.mark.parametrize("workers,needle", [("1000", "got 1000"), ("-1", "got -1")])
def test_workers_are_bounded(tmp_path, workers, needle):
    t0 = time.perf_counter()
    p = run("atlas", "--out", tmp_path / "a", "--cohort", "3", "--cohort-size", "16,16,1", "--workers", workers,
            "--device", "cpu")
    assert_one_line_error(p, 2, f"--workers must be an integer from 1 to {os.cpu_count()}")
    assert needle in p.stderr and time.perf_counter() - t0 < 30
    assert not (tmp_path / "a").exists()


def test_register_batch_checks_its_template_first(pair_files, tmp_path):
    files, _ = pair_files
    cut = tmp_path / "cut.nii.gz"
    cut.write_bytes(open(files["fixed"], "rb").read()[:200])
    nan = tmp_path / "nan.nii.gz"
    a = np.asarray(nib.load(files["fixed"]).dataobj).copy()
    a[3, 3, 3] = np.nan
    nib.save(nib.Nifti1Image(a, nib.load(files["fixed"]).affine), str(nan))
    for tmpl, needle in ((cut, "cut.nii.gz"), (nan, "nan.nii.gz")):
        p = run("register-batch", "--template", tmpl, "--subjects", files["moving"], files["fixed"], "--out",
                tmp_path / "b", *QUICK)
        msg = assert_one_line_error(p, 2, needle)
        assert "subjects onto" not in p.stderr, msg  # no cluster was started
        assert not (tmp_path / "b").exists()


def test_cohort_parameters_that_cannot_be_used_are_refused_and_not_offered(pair_files, tmp_path):
    files, _ = pair_files
    for cmd in ("atlas", "register-batch"):
        h = run(cmd, "--help").stdout
        assert "moving_mask" not in h and "moving_labels" not in h and "names=" not in h, h
    assert_one_line_error(run("register-batch", "--template", files["fixed"], "--subjects", files["moving"], files["fixed"],
                       "--out", tmp_path / "x", *QUICK, "-p", f"moving_labels={files['labels']}"), 2,
                   "takes no moving_labels")
    assert_one_line_error(run("atlas", "--out", tmp_path / "y", "-p", f"fixed_mask={files['mask']}"), 2, "fixed_mask")
    # (the template's mask is a usable -p value of register-batch: test_register_batch_follows_lddmms_out_rule)


# ------------------------------------------------------------------------------------------------
# Items 8 and 10: --out is claimed before any work
def test_register_batch_follows_lddmms_out_rule(pair_files, tmp_path, scheduler):
    files, _ = pair_files
    out = tmp_path / "out"
    p = run("lddmm", "--fixed", files["fixed"], "--moving", files["moving"], "--out", out, *LDDMM_QUICK)
    assert p.returncode == 0, p.stderr
    before = listing(out)
    args = ["register-batch", "--template", files["fixed"], "--subjects", files["moving"], files["fixed"], "--out",
            out, *QUICK]
    assert_one_line_error(run(*args), 2, "pass --overwrite")
    assert listing(out) == before  # its summary.json is lddmm's still
    (out / "notes.txt").write_text("mine")
    # (with the template's mask, a -p value register-batch takes: item 7)
    p = run(*args[:-len(QUICK)], *SHARED, "--scheduler", scheduler, "--overwrite", "-p", f"fixed_mask={files['mask']}")
    assert p.returncode == 0, p.stderr
    names = set(os.listdir(out))
    assert {"m", "f", "summary.json", "notes.txt"} <= names and "deformed.nii.gz" not in names, names
    assert (out / "notes.txt").read_text() == "mine"
    assert json.loads((out / "summary.json").read_text())["params"]["fixed_mask"] == files["mask"]
    assert json.loads((out / "m" / "summary.json").read_text())["params"]["fixed_mask"] == files["mask"]


def test_overwrite_never_removes_an_input(pair_files, tmp_path):
    files, _ = pair_files
    out = tmp_path / "out"
    out.mkdir()
    inside = out / "deformed.nii.gz"
    shutil.copy(files["moving"], inside)
    before = listing(out)
    assert_one_line_error(run("lddmm", "--fixed", files["fixed"], "--moving", inside, "--out", out, "--overwrite",
                       *LDDMM_QUICK), 2, "would be replaced")
    assert listing(out) == before


def test_a_second_run_on_the_same_out_is_refused_while_the_first_writes(pair_files, tmp_path):
    files, _ = pair_files
    out = tmp_path / "out"
    first = _start("lddmm", "--fixed", files["fixed"], "--moving", files["moving"], "--out", out, "--scales", "1",
                   "--iterations", "100000", "--tol", "0", "--step", "0.0001", "--metric", "lncc", "--lpow", "2",
                   "--alpha", "2", "--time-steps", "2", "--device", "cpu", "--no-progress", "--no-report")
    try:
        t0 = time.perf_counter()
        while not (out / ".pyca-lock").exists():
            assert first.poll() is None and time.perf_counter() - t0 < 60
            time.sleep(0.05)
        second = run("lddmm", "--fixed", files["fixed"], "--moving", files["moving"], "--out", out, "--overwrite",
                     *LDDMM_QUICK)
        assert_one_line_error(second, 2, "being written by another pyca command")
    finally:
        os.kill(first.pid, signal.SIGINT)
        first.communicate(timeout=60)


def test_out_that_cannot_be_written_is_found_before_any_work(tmp_path, monkeypatch):
    from pyca import _files

    f = tmp_path / "afile"
    f.write_text("x")
    assert_one_line_error(run("lddmm", "--size", "16,16,8", "--out", f, "--device", "cpu"), 2, "is not a folder")
    probe = "/sys/pyca-t41-probe"
    if os.path.exists("/sys") and not os.access("/sys", os.W_OK | os.X_OK) or _cannot_mkdir(probe):
        assert_one_line_error(run("lddmm", "--size", "16,16,8", "--out", probe, "--device", "cpu"), 2, "--out")
    # a full file system: the claim measures the free space against the outputs' size
    monkeypatch.setattr(_files.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10 << 30, 10 << 30, 1 << 20))
    with pytest.raises(OSError, match=r"1 MiB free .* need about 64 MiB"):
        with _files.claim_out_dir(str(tmp_path / "o"), False, need_bytes=64 << 20):
            pass
    assert not (tmp_path / "o").exists()


def _cannot_mkdir(path):
    try:
        os.mkdir(path)
    except OSError:
        return True
    os.rmdir(path)
    return False


# ------------------------------------------------------------------------------------------------
# Item 13: the same file twice, a constant subject
def test_same_subject_twice_and_a_constant_subject(built_atlas, tmp_path):
    paths, _ = _box_subjects(tmp_path / "in")
    link = tmp_path / "again.nii.gz"
    os.symlink(paths[0], link)
    assert_one_line_error(run("atlas", paths[0], paths[1], str(link), "--out", tmp_path / "o", *QUICK), 2,
                   "the same file is given twice")
    # the module's atlas had a constant subject: excluded at iteration 0, the others built on
    s = json.loads((built_atlas / "summary.json").read_text())
    assert s["excluded"]["flat"]["iteration"] == 0 and "constant" in s["excluded"]["flat"]["error"]
    assert s["completed_iteration"] == 1 and set(s["iterations"][-1]["records"]) == {"s0", "s1", "s2"}


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
def test_labels_above_2_24_on_the_gpu(pair_files):
    from pyca.apps import lddmm

    files, lab = pair_files
    kw = dict(scales=(2, 1), iterations=(3, 3), time_steps=2, moving_labels=files["labels"])
    cpu = lddmm.register(files["fixed"], files["moving"], device="cpu", **kw).labels.numpy()
    gpu = lddmm.register(files["fixed"], files["moving"], device="gpu", **kw).labels.numpy()
    assert gpu.dtype.kind in "iu" and set(np.unique(gpu)) == set(np.unique(lab))
    assert np.mean(gpu == cpu) > 0.99  # nearest neighbour: float rounding may move a boundary voxel


def test_pyca_register_keeps_integer_labels_and_places_a_las_mask(pair_files):
    from pyca.apps import syn

    files, lab = pair_files
    kw = dict(scales=(2, 1), iterations=(3, 3), device="cpu")
    a = syn.register(files["fixed"], files["moving"], moving_labels=files["labels"], moving_mask=files["mask"], **kw)
    b = syn.register(files["fixed"], files["moving"], moving_labels=files["labels_las"], moving_mask=files["mask_las"],
                     **kw)
    assert a.labels.numpy().dtype.kind in "iu" and set(np.unique(a.labels.numpy())) == set(np.unique(lab))
    np.testing.assert_array_equal(b.labels.numpy(), a.labels.numpy())
    np.testing.assert_allclose(b.phiinv.numpy(), a.phiinv.numpy(), atol=1e-5)
