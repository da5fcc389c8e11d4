"""Options and keywords that were accepted and then ignored: each is now used or refused in one line
before any work (pyca apply's --lps with an image, whichtoinvert with a pyca folder, labels without
interpolation 'label', atlas's built-in cohort options with inputs or --resume, --workers with an existing
cluster, overwrite with resume) or honoured (syn.register's progress, pyca register's --no-progress)."""
from __future__ import annotations

import numpy as np
import pytest

import pyca as ca
from pyca.apps import atlas, batch, syn
from pyca.registration import apply as pa

from cli_helpers import assert_one_line_error, run


def _save(path, arr):
    import nibabel as nib

    nib.save(nib.Nifti1Image(arr.astype(np.float32), np.eye(4)), str(path))
    return str(path)


def _box(shape=(16, 16, 8), shift=0):
    z = np.zeros(shape, np.float32)
    z[4:12, 4:12, 2:6] = 1
    return np.roll(z, shift, axis=0)


def test_apply_refuses_lps_with_an_image(tmp_path):
    """--lps says how --points' coordinates are written; with an image it was silently unused."""
    ref, img = _save(tmp_path / "r.nii.gz", _box()), _save(tmp_path / "i.nii.gz", _box(shift=1))
    out = tmp_path / "o.nii.gz"
    p = run("apply", "--reference", ref, "--input", img, "--transforms", str(tmp_path / "none.mat"), "--lps",
            "--output", str(out))
    assert_one_line_error(p, 2, "--lps says how --points' coordinates are written; it does not apply to an image")
    assert not out.exists()


def test_apply_transforms_refuses_keywords_it_would_ignore(tmp_path):
    g = ca.GridInfo(ca.Vec3Di(16, 16, 8))
    im = ca.Image3D.from_array(np.asfortranarray(_box()), g)
    with pytest.raises(ValueError, match="whichtoinvert applies to a list of files; a pyca output folder"):
        pa.resolve_transforms(str(tmp_path), whichtoinvert=[True])
    with pytest.raises(ValueError, match="whichtoinvert applies to a list of files"):
        pa.apply_transforms(g, im, str(tmp_path), whichtoinvert=[False], device="cpu")
    with pytest.raises(ValueError, match="labels applies to interpolation 'label', not 'linear'"):
        pa.apply_transforms(g, im, str(tmp_path), labels=np.array([0.0, 1.0]), device="cpu")


def test_atlas_refuses_the_built_in_cohorts_options_where_they_do_not_apply(tmp_path):
    f, m = _save(tmp_path / "f.nii.gz", _box()), _save(tmp_path / "m.nii.gz", _box(shift=1))
    out = tmp_path / "a"
    for kw, words in ((dict(cohort=4), "atlas: cohort make the built-in cohort; with images they do not apply"),
                      (dict(seed=2, cohort_size=(8, 8, 1)), "atlas: cohort_size, seed make the built-in cohort")):
        with pytest.raises(ValueError, match=words):
            atlas.build([f, m], out=str(out), quiet=True, **kw)
    with pytest.raises(ValueError, match="resume continues the atlas's own subjects"):
        atlas.build(out=str(out), resume=True, seed=1, quiet=True)
    with pytest.raises(ValueError, match="atlas: give images or resume, not both"):
        atlas.build([f, m], out=str(out), resume=True, quiet=True)
    with pytest.raises(ValueError, match="atlas: overwrite starts a new atlas in out; resume continues"):
        atlas.build(out=str(out), resume=True, overwrite=True, quiet=True)
    # the command line: given, even as the default, with inputs
    p = run("atlas", f, m, "--out", str(out), "--seed", "0", "--no-progress")
    assert_one_line_error(p, 2, "--seed make the built-in cohort; with inputs they do not apply")
    p = run("atlas", "--resume", str(out), "--cohort", "3", "--cohort-size", "8,8,1")
    assert_one_line_error(p, 2, "--cohort, --cohort-size make the built-in cohort; --resume continues")
    assert not out.exists()


def test_workers_are_refused_with_an_existing_cluster(tmp_path):
    """--workers sizes the embedded cluster; with --scheduler it was ignored. Refused before any connection."""
    f, m = _save(tmp_path / "f.nii.gz", _box()), _save(tmp_path / "m.nii.gz", _box(shift=1))
    with pytest.raises(ValueError, match=r"atlas: --workers \(n_workers\) sizes the embedded cluster; an existing "
                       r"cluster \(--scheduler\) runs its own workers"):
        atlas.build([f, m], out=str(tmp_path / "a"), scheduler="tcp://127.0.0.1:9", n_workers=1, quiet=True)
    m2 = _save(tmp_path / "m2.nii.gz", _box(shift=2))
    with pytest.raises(ValueError, match="register-batch: --workers"):
        batch.register_batch(f, [m, m2], out=str(tmp_path / "b"), scheduler="tcp://127.0.0.1:9", n_workers=1,
                             quiet=True)
    p = run("register-batch", "--template", f, "--subjects", m, m2, "--out", str(tmp_path / "c"), "--scheduler",
            "tcp://127.0.0.1:9", "--workers", "1")
    assert_one_line_error(p, 2, "--workers (n_workers) sizes the embedded cluster")
    assert not any((tmp_path / d).exists() for d in "abc")


def test_syn_register_shows_the_progress_it_is_asked_for(capsys):
    """progress=True was accepted and ignored by syn.register: now a bar of its iterations (plain lines
    on a stream that is not a terminal), counting the iterations a stop leaves out, as lddmm's does."""
    syn.register(_box(), _box(shift=1), device="cpu", scales=(2, 1), iterations=(4, 4), progress=True)
    err = capsys.readouterr().err.strip().splitlines()
    assert err and all(line.startswith("syn [cpu]: ") for line in err), err
    assert "8/8 it (100%)" in err[-1], err
    syn.register(_box(), _box(shift=1), device="cpu", scales=(2, 1), iterations=(4, 4))
    assert capsys.readouterr().err == ""


def test_pyca_register_honours_no_progress(tmp_path):
    f, m = _save(tmp_path / "f.nii.gz", _box()), _save(tmp_path / "m.nii.gz", _box(shift=1))
    args = ("register", "--fixed", f, "--moving", m, "--device", "cpu", "--scales", "2,1", "--iterations", "3,3",
            "--no-report", "--allow-folds")
    p = run(*args, "--out", str(tmp_path / "o1"))
    assert p.returncode == 0 and "syn [cpu]: 6/6 it (100%)" in p.stderr, p.stderr
    p = run(*args, "--out", str(tmp_path / "o2"), "--no-progress")
    assert p.returncode == 0 and "syn [cpu]" not in p.stderr, p.stderr


@pytest.mark.parametrize("interpolation", ["nearest", "label"])
def test_apply_keeps_label_values_float32_cannot_hold(tmp_path, interpolation):
    """An int32 label map with values above 2^24 through a one-voxel shift: pyca apply wrote 2^24 + 1 as
    2^24 and 2^24 + 3 as 2^24 + 4 (read as float32); now every value is the input's, where NumPy's shift
    puts it, in the input's type. In Python: a LabelImage comes back exact; the file by its path is refused."""
    import nibabel as nib

    from pyca.apps.affine import write_itk
    from pyca.registration.inputs import LabelImage

    a = np.zeros((12, 12, 8), np.int32)
    a[2:9, 3:9, 2:6] = 2**24 + 1
    a[4:7, 5:7, 3:5] = 2**24 + 3
    a[8, 8, 5] = 2**30 + 7
    nib.save(nib.Nifti1Image(a, np.eye(4)), str(tmp_path / "lab.nii.gz"))
    ref = _save(tmp_path / "ref.nii.gz", a.astype(np.float32))
    shift = np.eye(4)
    shift[0, 3] = 1.0  # fixed world x -> moving world x + 1: out[i] = in[i + 1]
    write_itk(shift, str(tmp_path / "shift.txt"))
    want = np.zeros_like(a)
    want[:-1] = a[1:]
    out = tmp_path / f"o_{interpolation}.nii.gz"
    p = run("apply", "--reference", ref, "--input", str(tmp_path / "lab.nii.gz"), "-t", str(tmp_path / "shift.txt"),
            "--interpolation", interpolation, "--output", str(out), "--device", "cpu")
    assert p.returncode == 0, p.stderr
    img = nib.load(str(out))
    assert img.get_data_dtype() == np.int32 and np.array_equal(np.asarray(img.dataobj), want)
    res = pa.apply_transforms(ref, LabelImage.load(str(tmp_path / "lab.nii.gz")), [str(tmp_path / "shift.txt")],
                              interpolation=interpolation, device="cpu")
    assert isinstance(res, LabelImage) and np.array_equal(res.numpy(), want)
    with pytest.raises(ValueError, match="label values such as 16777217 are beyond 2\\^24"):
        pa.apply_transforms(ref, str(tmp_path / "lab.nii.gz"), [str(tmp_path / "shift.txt")],
                            interpolation=interpolation, device="cpu")


def test_regress_atlas_shows_the_progress_it_is_asked_for(capsys):
    """regress.atlas(progress=True) was accepted and ignored: a bar of the subjects' descents now."""
    from pyca.apps import regress

    ims = [_box(shift=s) for s in (0, 1, 2)]
    regress.atlas(ims, template_iterations=2, iterations=2, device="cpu", progress=True)
    err = capsys.readouterr().err.strip().splitlines()
    assert err and all(line.startswith("geodesic atlas: ") for line in err), err
    assert "6/6 fit (100%)" in err[-1], err
    regress.atlas(ims, template_iterations=1, iterations=1, device="cpu")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", ["atlas", "register-batch"])
def test_cohort_commands_refuse_device_twice(tmp_path, command):
    """-p device=... and --device: the -p value was silently replaced by --device's."""
    f, m = _save(tmp_path / "f.nii.gz", _box()), _save(tmp_path / "m.nii.gz", _box(shift=1))
    args = (f, m) if command == "atlas" else ("--template", f, "--subjects", m, f)
    p = run(command, *args, "--out", str(tmp_path / "o"), "-p", "device=gpu", "--device", "cpu")
    assert_one_line_error(p, 2, "give --device cpu or -p device=gpu, not both")
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
def test_label_image_through_apply_on_the_gpu_equals_the_cpu(tmp_path):
    """apply_transforms with a LabelImage (indices resampled, values looked up) on the GPU: the CPU's values."""
    from pyca.apps.affine import write_itk
    from pyca.registration.inputs import LabelImage

    a = np.zeros((12, 12, 8), np.int32)
    a[2:9, 3:9, 2:6] = 2**24 + 1
    a[4:7, 5:7, 3:5] = 2**30 + 7
    lab = LabelImage(a, ca.GridInfo(ca.Vec3Di(12, 12, 8)))
    m = np.eye(4)
    m[:3, 3] = (0.6, -1.3, 0.4)
    write_itk(m, str(tmp_path / "t.txt"))
    for interpolation in ("nearest", "label"):
        cpu, gpu = (pa.apply_transforms(lab.grid(), lab, [str(tmp_path / "t.txt")], interpolation=interpolation,
                                        device=d) for d in ("cpu", "gpu"))
        assert np.array_equal(cpu.numpy(), gpu.numpy()) and set(np.unique(cpu.numpy())) <= {0, 2**24 + 1, 2**30 + 7}


def test_label_image_ties_go_to_the_smallest_label_as_with_values(tmp_path):
    """'label' on a LabelImage (indices: 0 first) breaks a tie as the float path does: the smallest value
    (here -5 before 0 and 7), halfway between voxels of each."""
    from pyca.apps.affine import write_itk
    from pyca.registration.inputs import LabelImage

    g = ca.GridInfo(ca.Vec3Di(4, 1, 1))
    m = np.eye(4)
    m[0, 3] = 0.5  # every point halfway between two voxels of different labels
    t = str(tmp_path / "t.txt")
    write_itk(m, t)
    for pair in ((-5, 0), (0, 7), (-5, 7)):
        a = np.array(pair * 2, np.int32).reshape(4, 1, 1)
        exact = pa.apply_transforms(g, LabelImage(a, g), [t], interpolation="label", device="cpu")
        floats = pa.apply_transforms(g, ca.Image3D.from_array(np.asfortranarray(a.astype(np.float32)), g), [t],
                                     interpolation="label", device="cpu")
        assert np.array_equal(exact.numpy()[:3].ravel(), np.asarray(floats).ravel()[:3].astype(np.int32)), pair
        assert exact.numpy()[0, 0, 0] == min(pair)
    # labels= beside a LabelImage (whose values are its own) would be ignored: refused
    a = np.array((0, 5, 9, 5), np.int32).reshape(4, 1, 1)
    with pytest.raises(ValueError, match="apply_transforms: labels applies to an Image3D"):
        pa.apply_transforms(g, LabelImage(a, g), [t], interpolation="label", labels=[5], device="cpu")
