"""Files: bad files are refused naming the function and the file, before any data is used; a bad
target writes nothing (issue 19, docs/io.md's error table)."""
import os
import struct

import numpy as np
import pytest

import pyca as ca

pio = pytest.importorskip("pyca.io")
nib = pytest.importorskip("nibabel")


def _nifti_with_pixdim(path, pixdim):
    """A NIfTI-1 file whose stored pixdim[1:4] are `pixdim` (written byte by byte: nibabel would fix 0)."""
    img = nib.Nifti1Image(np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6), np.eye(4))
    nib.save(img, path)
    with open(path, "r+b") as f:
        f.seek(76 + 4)  # pixdim[1] (pixdim starts at byte 76 of the header)
        f.write(struct.pack("<3f", *pixdim))
    return path


@pytest.mark.parametrize("pixdim", [(0.0, 1.0, 1.0), (1.0, 1.0, 0.0), (1.0, float("nan"), 1.0)])
def test_nifti_voxel_size_zero_is_refused(refused, tmp_path, pixdim):
    path = _nifti_with_pixdim(str(tmp_path / "p.nii"), pixdim)
    size = os.path.getsize(path)
    msg = refused(lambda: pio.load_image(path), pio.ImageFileError, ["load_image", "p.nii", "spacing"])
    assert "pixdim" in msg
    assert os.path.getsize(path) == size


def test_nifti_2d_image_ignores_the_unused_third_voxel_size(tmp_path):
    img = nib.Nifti1Image(np.ones((4, 5), dtype=np.float32), np.diag([2.0, 3.0, 1.0, 1.0]))
    path = str(tmp_path / "flat.nii")
    nib.save(img, path)
    with open(path, "r+b") as f:
        f.seek(76 + 12)  # pixdim[3]: not a spatial size of a 2-D image
        f.write(struct.pack("<f", 0.0))
    im = pio.load_image(path)
    assert tuple(im.grid().size()) == (4, 5, 1) and tuple(im.grid().spacing())[:2] == (2.0, 3.0)


@pytest.mark.parametrize("save", ["save_image", "save_field"])
def test_saving_onto_an_existing_folder_writes_nothing(refused, tmp_path, save):
    target = tmp_path / "out"
    target.mkdir()
    obj = ca.Image3D((3, 4, 5)) if save == "save_image" else ca.Field3D((3, 4, 5))
    obj.fill(1.5)
    refused(lambda: getattr(pio, save)(obj, str(target)), IsADirectoryError, [save, "out", "folder"], obj)
    assert sorted(os.listdir(tmp_path)) == ["out"] and os.listdir(target) == []


def test_loading_a_folder_is_refused(refused, tmp_path):
    refused(lambda: pio.load_image(str(tmp_path)), pio.ImageFileError, ["load_image", "folder"])


def test_truncated_file_is_refused(refused, tmp_path):
    path = tmp_path / "cut.nii"
    nib.save(nib.Nifti1Image(np.ones((8, 8, 8), dtype=np.float32), np.eye(4)), str(path))
    path.write_bytes(path.read_bytes()[:600])
    refused(lambda: pio.load_image(str(path)), pio.ImageFileError, ["load_image", "cut.nii"])
