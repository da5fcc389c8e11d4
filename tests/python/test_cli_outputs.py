"""What the registration commands write and never overwrite, with untrusted inputs (the brief: "Errors, never
crashes; inputs are not trusted"): `pyca register` keeps label values that float32 cannot hold (as pyca
lddmm does), and `pyca register`, `pyca shoot` and `pyca regress` refuse, in one line with exit 2, an
--overwrite that would replace an input file and an --out that is a file, leaving the input as it was.
Small phantoms (pyca.apps.data.builtin_pair), one or two iterations: these test the commands' plumbing,
not the registrations."""
import contextlib
import io

import nibabel as nib
import numpy as np
import pytest

import pyca as ca
from pyca import cli
from pyca.apps import data

FAST = ["--scales", "1", "--iterations", "2"]


def _cli(*args):
    """pyca ARGS in this process: (exit code, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = cli.main([str(a) for a in args])
        except SystemExit as e:
            rc = e.code
    return rc, err.getvalue()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli-outputs")
    fixed, moving = data.builtin_pair(size=(20, 20, 16))
    ca.io.save_image(fixed, d / "fixed.nii.gz")
    ca.io.save_image(moving, d / "moving.nii.gz")
    # labels above 2^24: 2^24 + 1 and 2^24 + 3 are not float32 values (they round to 2^24 and 2^24 + 4)
    lab = np.where(moving.numpy() > 0.6, 2**24 + 3, np.where(moving.numpy() > 0.2, 2**24 + 1, 0)).astype(np.int32)
    ca.io.save_labels(lab, moving.grid(), str(d / "labels.nii.gz"))
    return d


@pytest.mark.parametrize("method", ["syn", "lddmm"])
def test_register_keeps_labels_that_float32_cannot_hold(files, tmp_path, method):
    rc, err = _cli("register", "--method", method, "--fixed", files / "fixed.nii.gz", "--moving",
                   files / "moving.nii.gz", "--moving-labels", files / "labels.nii.gz", "--out", tmp_path / "o",
                   "--no-report", "--allow-folds", *FAST)
    assert rc == 0, err
    got = np.unique(np.asarray(nib.load(tmp_path / "o" / "labels.nii.gz").dataobj))
    assert set(got.tolist()) == {0, 2**24 + 1, 2**24 + 3}  # (float32 made them 2^24 and 2^24 + 4)


@pytest.mark.parametrize("command", ["register", "shoot", "regress"])
def test_an_input_in_out_is_not_replaced_and_a_file_is_no_out(files, tmp_path, command):
    out = tmp_path / "o"
    out.mkdir()
    (out / "summary.json").write_text("{}")  # a previous run's folder
    moving = out / "deformed.nii.gz" if command != "regress" else out / "m0.nii.gz"  # named as an output
    moving.write_bytes((files / "moving.nii.gz").read_bytes())
    before = moving.read_bytes()
    if command == "regress":
        args = ["regress", f"{files / 'fixed.nii.gz'}:0", f"{moving}:1", "--iterations", "1"]
    else:
        args = [command, "--fixed", files / "fixed.nii.gz", "--moving", moving, *FAST]
        args += ["--no-report"] if command == "register" else []
    rc, err = _cli(*args, "--out", out, "--overwrite")
    assert rc == 2 and err.count("\n") == 1, err
    assert f"pyca {command}: error: --out" in err and "would be replaced by an output" in err, err
    assert moving.read_bytes() == before
    (tmp_path / "afile").write_text("x")
    rc, err = _cli(*args, "--out", tmp_path / "afile")
    assert rc == 2 and err.count("\n") == 1 and "exists and is not a folder" in err, err
    assert (tmp_path / "afile").read_text() == "x"
