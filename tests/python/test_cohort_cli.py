"""The cohort commands (`pyca atlas`, `pyca register-batch`) and `pyca lddmm` against hostile inputs and
interruptions (issue 41), through the real console script: an edited summary.json, mirrored masks and
labels, Dask's tracebacks, unbounded --workers, a bad template, outputs replaced, signals, an
unwritable --out, label values above 2^24. Small on purpose: 2-D 16 x 16 cohorts, one template
iteration, one worker."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("distributed")
nib = pytest.importorskip("nibabel")

import pyca as ca  # noqa: E402
from pyca import io as pio  # noqa: E402

QUICK = ["--workers", "1", "--device", "cpu", "--no-report", "--no-progress", "-p", "iterations=3,2,1",
         "-p", "time_steps=2"]
TMP_PREFIX = ".pyca-tmp-"


def _console_script():
    for cand in (os.path.join(os.path.dirname(sys.executable), "pyca"), shutil.which("pyca")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    pytest.skip("the pyca console script is not installed next to this Python or on PATH")


def _env():
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    return env


def run(*args, timeout=180, cwd=None):
    return subprocess.run([_console_script(), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=_env(), cwd=cwd)


def one_line_error(p, code=2, needle=None):
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == code, (p.returncode, p.stderr)
    assert len(err) == 1 and "Traceback" not in p.stderr, p.stderr
    if needle:
        assert needle in err[0], err[0]
    return err[0]


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
# Item 1: --resume trusts nothing in summary.json
@pytest.fixture(scope="module")
def built_atlas(tmp_path_factory):
    base = tmp_path_factory.mktemp("atlas")
    p = run("atlas", "--out", base / "a", "--cohort", "3", "--cohort-size", "16,16,1", "--template-iterations", "1",
            *QUICK)
    assert p.returncode == 0, p.stderr
    return base / "a"


def _edited_copy(built, tmp_path, edit):
    a = tmp_path / "shared" / "a"
    shutil.copytree(built, a)
    with open(a / "summary.json") as fh:
        s = json.load(fh)
    s["sources"] = [str(a / "cohort" / os.path.basename(x)) for x in s["sources"]]  # the copy's own cohort
    s["truth"] = str(a / "cohort" / "ground_truth.nii.gz")
    edit(s)
    with open(a / "summary.json", "w") as fh:
        json.dump(s, fh)
    return a


@pytest.mark.parametrize("name", ["../victim", "/ABS/victim", "subject_00/../../victim", ".."])
def test_resume_refuses_subject_names_that_leave_out(built_atlas, tmp_path, name):
    victim = tmp_path / "shared" / "victim"

    def edit(s):
        s["names"][0] = name.replace("/ABS", str(tmp_path / "shared"))
        s["completed_iteration"] = 1

    a = _edited_copy(built_atlas, tmp_path, edit)
    before = listing(tmp_path)
    p = run("atlas", "--resume", a, "--template-iterations", "2", *QUICK)
    one_line_error(p, 2, "cannot resume")
    assert listing(tmp_path) == before  # nothing written, inside --out or out of it
    assert not victim.exists()


@pytest.mark.parametrize("key,value,needle", [("completed_iteration", "two", "integer"),
                                              ("completed_iteration", 99, "does not match"),
                                              ("completed_iteration", -5, "integer >= 0"),
                                              ("names", "short", "not the list of subject names")])
def test_resume_refuses_edited_counters_and_lists(built_atlas, tmp_path, key, value, needle):
    def edit(s):
        if value == "short":
            s["names"] = s["names"][:2]
        else:
            s[key] = value

    a = _edited_copy(built_atlas, tmp_path, edit)
    before = listing(a)
    one_line_error(run("atlas", "--resume", a, "--template-iterations", "2", *QUICK), 2, needle)
    assert listing(a) == before


def test_resume_refuses_a_replaced_subject_and_changed_parameters(built_atlas, tmp_path):
    a = _edited_copy(built_atlas, tmp_path, lambda s: None)
    before = listing(a)
    one_line_error(run("atlas", "--resume", a, "--template-iterations", "2", *QUICK, "-p", "alpha=5"), 2,
                   "alpha=5.0 (saved")
    src = a / "cohort" / "subject_01.nii.gz"
    im = pio.load_image(str(src))
    np.asarray(im)[...] *= 2
    pio.save_image(im, str(src))
    before = listing(a)
    one_line_error(run("atlas", "--resume", a, "--template-iterations", "2", *QUICK), 2,
                   "subject_01's file")
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


def test_labels_stored_las_give_the_same_labels_and_keep_values_above_2_24(pair_files, tmp_path):
    files, lab = pair_files
    outs = {}
    for key in ("labels", "labels_las"):
        p = run("lddmm", "--fixed", files["fixed"], "--moving", files["moving"], "--moving-labels", files[key],
                "--out", tmp_path / key, *LDDMM_QUICK)
        assert p.returncode == 0, p.stderr
        img = nib.load(str(tmp_path / key / "labels.nii.gz"))
        assert img.get_data_dtype().kind in "iu", img.get_data_dtype()  # an integer file
        outs[key] = np.asarray(img.dataobj)
    np.testing.assert_array_equal(outs["labels_las"], outs["labels"])  # not mirrored
    assert set(np.unique(outs["labels"])) == set(np.unique(lab)) == {0, 7, 16777217, 16777219}


def test_a_mask_stored_las_gives_the_same_deformation(pair_files, tmp_path):
    files, _ = pair_files
    fields = {}
    for key in ("mask", "mask_las"):
        p = run("lddmm", "--fixed", files["fixed"], "--moving", files["moving"], "--fixed-mask", files[key],
                "--moving-mask", files[key], "--out", tmp_path / key, *LDDMM_QUICK)
        assert p.returncode == 0, p.stderr
        fields[key] = np.asarray(nib.load(str(tmp_path / key / "phiinv.nii.gz")).dataobj)
    np.testing.assert_allclose(fields["mask_las"], fields["mask"], atol=1e-5)


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
