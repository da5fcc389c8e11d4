"""pyca.io: NIfTI (nibabel) and MetaImage/NRRD (SimpleITK) reading and writing.

References are independent of pyca: files are written or read back with nibabel / SimpleITK
directly, and the values compared with the NumPy arrays they came from."""
import os
import warnings

import numpy as np
import pytest

import pyca as ca
import pyca.io as pio

nib = pytest.importorskip("nibabel")

GRIDS = {
    "3d": ((17, 23, 31), (1.5, 1.0, 2.0), (0.5, -1.0, 2.0)),
    "2d": ((31, 33, 1), (1.5, 2.1, 1.0), (-3.0, 4.5, 0.0)),
}

needs_gpu = pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
try:
    import SimpleITK as sitk
except ImportError:
    sitk = None
needs_sitk = pytest.mark.skipif(sitk is None, reason="needs SimpleITK (optional: pip install SimpleITK)")


@pytest.fixture(params=sorted(GRIDS), ids=sorted(GRIDS))
def grid(request):
    size, sp, org = GRIDS[request.param]
    return ca.GridInfo(size, sp, org)


def _image(grid, rng):
    arr = np.asfortranarray(rng.standard_normal(tuple(grid.size())).astype(np.float32))
    return arr, ca.Image3D.from_array(arr.copy(order="F"), grid)


def _field(grid, rng):
    arr = np.asfortranarray(rng.standard_normal(tuple(grid.size()) + (3,)).astype(np.float32))
    if grid.size().z == 1:
        arr[..., 2] = 0
    return arr, ca.Field3D.from_array(arr.copy(order="F"), grid)


def _same_grid(g, size, sp, org):
    assert tuple(g.size()) == tuple(size)
    np.testing.assert_allclose(tuple(g.spacing()), sp, rtol=1e-6)
    np.testing.assert_allclose(tuple(g.origin()), org, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------------
# NIfTI
@pytest.mark.parametrize("ext", [".nii", ".nii.gz"])
def test_nifti_image_round_trip(tmp_path, grid, rng, ext):
    arr, im = _image(grid, rng)
    path = tmp_path / f"im{ext}"
    pio.save_image(im, path)
    # Independent reader: nibabel sees the values, voxel sizes and the origin as the affine's translation.
    img = nib.load(str(path))
    np.testing.assert_array_equal(np.asarray(img.dataobj).reshape(arr.shape, order="F"), arr)
    np.testing.assert_allclose(img.header.get_zooms()[:3], tuple(grid.spacing()), rtol=1e-6)
    np.testing.assert_allclose(img.affine[:3, 3], tuple(grid.origin()), rtol=1e-6)
    back = pio.load_image(path)
    assert isinstance(back, ca.Image3D) and back.memType() == ca.MEM_HOST
    _same_grid(back.grid(), grid.size(), tuple(grid.spacing()), tuple(grid.origin()))
    np.testing.assert_array_equal(np.asarray(back), arr)


def test_nifti_written_by_nibabel(tmp_path, rng):
    # int16 data with a scale factor, affine with spacing and a translation, as scanners write.
    data = rng.integers(-300, 300, size=(9, 8, 7)).astype(np.int16)
    aff = np.diag([0.8, 1.2, 2.5, 1.0])
    aff[:3, 3] = (-10.0, 20.0, 5.5)
    img = nib.Nifti1Image(data, aff)
    img.header.set_slope_inter(0.5, 10.0)
    path = tmp_path / "scan.nii.gz"
    nib.save(img, str(path))
    im = pio.load_image(path)
    _same_grid(im.grid(), (9, 8, 7), (0.8, 1.2, 2.5), (-10.0, 20.0, 5.5))
    np.testing.assert_allclose(np.asarray(im), data * 0.5 + 10.0, rtol=1e-6)


def test_nifti_2d_and_4d_singleton(tmp_path, rng):
    a2 = rng.random((12, 10)).astype(np.float32)
    nib.save(nib.Nifti1Image(a2, np.diag([2.0, 3.0, 1.0, 1.0])), str(tmp_path / "a.nii"))
    im = pio.load_image(tmp_path / "a.nii")
    assert tuple(im.grid().size()) == (12, 10, 1)
    np.testing.assert_array_equal(np.asarray(im)[:, :, 0], a2)
    a4 = rng.random((6, 5, 4, 1)).astype(np.float32)
    nib.save(nib.Nifti1Image(a4, np.eye(4)), str(tmp_path / "b.nii"))
    im = pio.load_image(tmp_path / "b.nii")
    np.testing.assert_array_equal(np.asarray(im), a4[..., 0])


def test_nifti_field_round_trip(tmp_path, grid, rng):
    arr, f = _field(grid, rng)
    path = tmp_path / "f.nii.gz"
    pio.save_field(f, path)
    img = nib.load(str(path))
    # ITK's layout of a vector image: (x, y, z, 1, 3), intent 'vector'.
    assert img.shape == tuple(grid.size()) + (1, 3)
    assert img.header.get_intent()[0] == "vector"
    np.testing.assert_array_equal(np.asarray(img.dataobj)[:, :, :, 0, :], arr)
    back = pio.load_field(path)
    assert isinstance(back, ca.Field3D)
    _same_grid(back.grid(), grid.size(), tuple(grid.spacing()), tuple(grid.origin()))
    np.testing.assert_array_equal(np.asarray(back), arr)


def test_nifti_field_4d_layout(tmp_path, rng):
    arr = rng.random((7, 6, 5, 3)).astype(np.float32)
    nib.save(nib.Nifti1Image(arr, np.diag([1.0, 2.0, 3.0, 1.0])), str(tmp_path / "f.nii"))
    f = pio.load_field(tmp_path / "f.nii")
    np.testing.assert_array_equal(np.asarray(f), arr)
    np.testing.assert_allclose(tuple(f.grid().spacing()), (1.0, 2.0, 3.0))


def test_rotated_affine_is_kept(tmp_path):
    # (the full affine is kept: tests/python/test_orientation.py checks it in detail)
    aff = np.eye(4)
    aff[:2, :2] = [[0.0, -1.0], [1.0, 0.0]]
    nib.save(nib.Nifti1Image(np.ones((5, 5, 5), np.float32), aff), str(tmp_path / "r.nii"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        im = pio.load_image(tmp_path / "r.nii")
    assert tuple(im.grid().size()) == (5, 5, 5)
    np.testing.assert_allclose(im.grid().affine(), aff, atol=1e-7)


def test_axis_aligned_affine_does_not_warn(tmp_path):
    nib.save(nib.Nifti1Image(np.ones((5, 5, 5), np.float32), np.diag([2.0, 2.0, 2.0, 1.0])), str(tmp_path / "a.nii"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pio.load_image(tmp_path / "a.nii")


@pytest.mark.parametrize("n", [0, 1, 1000, 1 << 18, (1 << 18) + 1, 3 * (1 << 18) + 17])
@pytest.mark.parametrize("level,strategy", [(1, "Z_DEFAULT_STRATEGY"), (6, "Z_DEFAULT_STRATEGY"), (1, "Z_RLE")])
def test_parallel_gzip_is_one_gzip_stream_of_the_same_bytes(tmp_path, n, level, strategy):
    # Chunk edges (the chunk is 256 KiB) on either side; the reference readers are Python's gzip
    # module (the whole file, and streamed) and zlib with gzip framing.
    import gzip
    import zlib

    from pyca._files import GzipWriter

    data = np.random.default_rng(n).normal(size=n // 4 + 1).astype(np.float32).tobytes()[:n]
    path = tmp_path / "d.gz"
    with GzipWriter(path, level=level, strategy=getattr(zlib, strategy)) as w:
        w.write(data)
    raw = path.read_bytes()
    assert gzip.decompress(raw) == data
    assert zlib.decompress(raw, wbits=31) == data  # one member: nothing after its trailer
    with gzip.open(path, "rb") as fh:
        assert b"".join(iter(lambda: fh.read(4099), b"")) == data
    if n > 1 << 18:  # priming each chunk with the 32 KiB before it keeps one stream's ratio
        one = zlib.compressobj(level, zlib.DEFLATED, 31, 8, getattr(zlib, strategy))
        assert len(raw) <= 1.002 * len(one.compress(data) + one.flush()) + 64


@pytest.mark.parametrize("n", [0, 1, 1000, 1 << 18, (1 << 18) + 1, 3 * (1 << 18) + 17])
def test_parallel_zlib_is_one_zlib_stream_of_the_same_bytes(n):
    # report.png's pixel rows: the zlib format (RFC 1950), chunks deflated side by side; zlib reads it.
    import zlib

    from pyca._files import zlib_compress

    data = np.random.default_rng(n).integers(0, 4, size=n, dtype=np.uint8).tobytes()
    out = zlib_compress(data)
    assert zlib.decompress(out) == data  # the header's check bits and the Adler-32 trailer are verified
    d = zlib.decompressobj()
    assert d.decompress(out) == data and d.eof and d.unused_data == b""  # one stream, nothing after it
    if n > 1 << 18:  # each chunk primed with the 32 KiB before it: one stream's ratio
        assert len(out) <= 1.002 * len(zlib.compress(data, 1)) + 64


def test_gzip_writer_takes_the_data_in_any_pieces(tmp_path):
    # As nibabel streams an image: a header, then a slice at a time, each seek to where it already is.
    import gzip

    from pyca._files import GzipWriter

    data = np.random.default_rng(1).normal(size=600_000).astype(np.float32).tobytes()
    cuts = [0, 348, 352, 1000, 70_000, 70_001, 1_500_000, len(data)]
    with GzipWriter(tmp_path / "p.gz") as w:
        for a, b in zip(cuts[:-1], cuts[1:]):
            assert w.seek(a) == a == w.tell()  # nibabel seeks to where it is
            w.write(data[a:b])
        with pytest.raises(OSError):
            w.seek(0)
    assert gzip.decompress((tmp_path / "p.gz").read_bytes()) == data


@pytest.mark.parametrize("ext", [".nii", ".nii.gz"])
def test_nifti_bytes_are_those_nibabel_writes(tmp_path, rng, ext):
    # pyca writes the bytes of nib.save (header, extension-free offset, data), deflated on several
    # threads for .nii.gz; nibabel's own file of the same image is the reference.
    import gzip

    g = ca.GridInfo((40, 50, 70), (1.5, 1.0, 2.0), (0.5, -1.0, 2.0))  # a field of 1.7 MB: 7 chunks
    arr, f = _field(g, rng)
    pio.save_field(f, tmp_path / f"f{ext}", description="phi")
    ours = (tmp_path / f"f{ext}").read_bytes()
    img = nib.load(str(tmp_path / f"f{ext}"))
    nib.save(img, str(tmp_path / "ref.nii"))
    assert (gzip.decompress(ours) if ext == ".nii.gz" else ours) == (tmp_path / "ref.nii").read_bytes()
    np.testing.assert_array_equal(np.asarray(img.dataobj)[:, :, :, 0, :], arr)
    pio.save_field(f, tmp_path / f"again{ext}", description="phi")
    assert (tmp_path / f"again{ext}").read_bytes() == ours  # no time stamp: the same image, the same file


@needs_gpu
def test_load_into_device_memory_and_save_from_it(tmp_path, rng):
    g = ca.GridInfo(*GRIDS["3d"])
    arr, im = _image(g, rng)
    pio.save_image(im, tmp_path / "a.nii.gz")
    d = pio.load_image(tmp_path / "a.nii.gz", ca.MEM_DEVICE)
    assert d.memType() == ca.MEM_DEVICE
    pio.save_image(d, tmp_path / "b.nii.gz")  # from device memory
    np.testing.assert_array_equal(np.asarray(nib.load(str(tmp_path / "b.nii.gz")).dataobj), arr)
    farr, f = _field(g, rng)
    pio.save_field(f.clone(ca.MEM_DEVICE), tmp_path / "f.nii.gz")
    np.testing.assert_array_equal(np.asarray(pio.load_field(tmp_path / "f.nii.gz", ca.MEM_DEVICE).numpy()), farr)


# ------------------------------------------------------------------------------------------------
# Errors: before any data is used, naming the file and what is wrong
def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        pio.load_image(tmp_path / "nope.nii.gz")
    with pytest.raises(FileNotFoundError):
        pio.load_field(tmp_path / "nope.nii.gz")


def test_folder_is_not_an_image(tmp_path):
    with pytest.raises(pio.ImageFileError, match="folder"):
        pio.load_image(tmp_path)


@pytest.mark.parametrize("name", ["junk.nii.gz", "junk.nii", "junk.dat"])
def test_unreadable_file(tmp_path, name):
    p = tmp_path / name
    p.write_bytes(b"this is not an image" * 20)
    with pytest.raises(pio.ImageFileError, match="cannot read"):
        pio.load_image(p)
    assert issubclass(pio.ImageFileError, ValueError)


def test_non_3d_data(tmp_path, rng):
    nib.save(nib.Nifti1Image(rng.random((5, 5, 5, 4)).astype(np.float32), np.eye(4)), str(tmp_path / "t.nii"))
    with pytest.raises(pio.ImageFileError, match="2-D or 3-D"):
        pio.load_image(tmp_path / "t.nii")
    nib.save(nib.Nifti1Image(rng.random((5, 5, 5, 1, 3)).astype(np.float32), np.eye(4)), str(tmp_path / "v.nii"))
    with pytest.raises(pio.ImageFileError, match="load_field"):
        pio.load_image(tmp_path / "v.nii")
    nib.save(nib.Nifti1Image(rng.random((5, 5, 5)).astype(np.float32), np.eye(4)), str(tmp_path / "s.nii"))
    with pytest.raises(pio.ImageFileError, match="vector field"):
        pio.load_field(tmp_path / "s.nii")


def test_complex_data_refused(tmp_path):
    nib.save(nib.Nifti1Image(np.ones((4, 4, 4), np.complex64), np.eye(4)), str(tmp_path / "c.nii"))
    with pytest.raises(pio.ImageFileError, match="real"):
        pio.load_image(tmp_path / "c.nii")


def test_bad_grid_refused(tmp_path):
    # (nibabel itself replaces a zero voxel size by 1; an infinite one or a NaN origin reach us.)
    img = nib.Nifti1Image(np.ones((4, 4, 4), np.float32), np.eye(4))
    img.header["pixdim"][1:4] = (1.0, 1.0, np.inf)
    nib.save(img, str(tmp_path / "z.nii"))
    with pytest.raises(pio.ImageFileError, match="spacing"):
        pio.load_image(tmp_path / "z.nii")
    aff = np.eye(4)
    aff[0, 3] = np.nan
    nib.save(nib.Nifti1Image(np.ones((4, 4, 4), np.float32), aff), str(tmp_path / "o.nii"))
    with pytest.raises(pio.ImageFileError, match="origin"):
        pio.load_image(tmp_path / "o.nii")


def test_save_errors(tmp_path, rng):
    g = ca.GridInfo(*GRIDS["3d"])
    _, im = _image(g, rng)
    _, f = _field(g, rng)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        pio.save_image(im, tmp_path / "no" / "such" / "a.nii")
    with pytest.raises(TypeError, match="save_field"):
        pio.save_image(f, tmp_path / "a.nii")
    with pytest.raises(TypeError, match="save_image"):
        pio.save_field(im, tmp_path / "a.nii")
    with pytest.raises(TypeError):
        pio.save_image(np.zeros((3, 3, 3)), tmp_path / "a.nii")


def test_metaimage_without_simpleitk_uses_pycas_own_reader(tmp_path, monkeypatch, rng):
    """Without SimpleITK, MetaImage goes through pyca/_metaimage.py (same grid, voxels exact); NRRD
    still says SimpleITK is needed; a broken MetaImage header is an ImageFileError naming the file."""
    import sys

    monkeypatch.setitem(sys.modules, "SimpleITK", None)  # import fails as if not installed
    g = ca.GridInfo(*GRIDS["3d"])
    g.setDirection(np.diag([-1.0, 1.0, 1.0]))
    arr, im = _image(g, rng)
    pio.save_image(im, tmp_path / "a.mha")
    back = pio.load_image(tmp_path / "a.mha")
    assert back.grid() == im.grid()
    np.testing.assert_array_equal(back.numpy(), arr)
    with pytest.raises(pio.ImageFileError, match="SimpleITK"):
        pio.save_image(im, tmp_path / "a.nrrd")
    (tmp_path / "b.mha").write_text("ObjectType = Image\n")
    with pytest.raises(pio.ImageFileError, match=r"b\.mha.*ElementDataFile"):
        pio.load_image(tmp_path / "b.mha")


# ------------------------------------------------------------------------------------------------
# MetaImage / NRRD through SimpleITK (optional)
@needs_sitk
@pytest.mark.parametrize("ext", [".mha", ".mhd", ".nrrd"])
def test_itk_image_round_trip(tmp_path, grid, rng, ext):
    arr, im = _image(grid, rng)
    path = tmp_path / f"im{ext}"
    pio.save_image(im, path)
    ref = sitk.ReadImage(str(path))  # independent reader; its arrays are (z, y, x)
    np.testing.assert_array_equal(sitk.GetArrayFromImage(ref).T.reshape(arr.shape), arr)
    np.testing.assert_allclose(ref.GetSpacing()[:2], tuple(grid.spacing())[:2], rtol=1e-6)
    # ITK's world is LPS+, pyca's RAS+: x and y negated (docs/design/orientation.md)
    np.testing.assert_allclose(ref.GetOrigin()[:2], -np.array(tuple(grid.origin())[:2]), rtol=1e-6)
    np.testing.assert_allclose(np.reshape(ref.GetDirection(), (3, 3)), np.diag([-1.0, -1.0, 1.0]))
    back = pio.load_image(path)
    _same_grid(back.grid(), grid.size(), tuple(grid.spacing()), tuple(grid.origin()))
    np.testing.assert_array_equal(np.asarray(back), arr)


@needs_sitk
def test_itk_written_by_simpleitk(tmp_path, rng):
    zyx = rng.random((7, 6, 5)).astype(np.float32)  # SimpleITK order: (z, y, x)
    img = sitk.GetImageFromArray(zyx)
    img.SetSpacing((0.5, 0.75, 2.0))
    img.SetOrigin((1.0, -2.0, 3.0))
    sitk.WriteImage(img, str(tmp_path / "a.mha"))
    im = pio.load_image(tmp_path / "a.mha")
    _same_grid(im.grid(), (5, 6, 7), (0.5, 0.75, 2.0), (-1.0, 2.0, 3.0))  # LPS+ -> RAS+
    np.testing.assert_array_equal(im.grid().direction(), np.diag([-1.0, -1.0, 1.0]))
    np.testing.assert_array_equal(np.asarray(im), zyx.T)
    # A 2-D vector image (y, x, 2) -> a 2-D field with z component 0.
    vec = sitk.GetImageFromArray(rng.random((6, 5, 2)).astype(np.float32), isVector=True)
    sitk.WriteImage(vec, str(tmp_path / "v.mha"))
    f = pio.load_field(tmp_path / "v.mha")
    assert tuple(f.grid().size()) == (5, 6, 1)
    a = np.asarray(f)
    np.testing.assert_array_equal(a[:, :, 0, :2], np.transpose(sitk.GetArrayFromImage(vec), (1, 0, 2)))
    assert np.all(a[..., 2] == 0)


@needs_sitk
def test_itk_field_round_trip(tmp_path, grid, rng):
    arr, f = _field(grid, rng)
    pio.save_field(f, tmp_path / "f.mha")
    ref = sitk.ReadImage(str(tmp_path / "f.mha"))
    assert ref.GetNumberOfComponentsPerPixel() == 3
    back = pio.load_field(tmp_path / "f.mha")
    _same_grid(back.grid(), grid.size(), tuple(grid.spacing()), tuple(grid.origin()))
    np.testing.assert_array_equal(np.asarray(back), arr)


@needs_sitk
def test_nifti_and_metaimage_agree(tmp_path, rng):
    g = ca.GridInfo(*GRIDS["3d"])
    arr, im = _image(g, rng)
    pio.save_image(im, tmp_path / "a.nii.gz")
    pio.save_image(im, tmp_path / "a.mha")
    a, b = pio.load_image(tmp_path / "a.nii.gz"), pio.load_image(tmp_path / "a.mha")
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_allclose(a.grid().affine(), b.grid().affine(), atol=1e-6)
    assert os.path.getsize(tmp_path / "a.mha") > 0


def test_save_field_refuses_an_intent_the_file_cannot_hold(tmp_path):
    """intent 'pointset' (an H-field) to a MetaImage was written as a plain vector image, the intent dropped;
    an unknown intent raised nibabel's KeyError (NIfTI) or was ignored (MetaImage). Both refused in one line."""
    f = ca.Field3D(ca.GridInfo(ca.Vec3Di(4, 4, 3)), ca.MEM_HOST)
    ca.SetToIdentity(f)
    for name, intent, words in (("h.mha", "pointset", "recorded in NIfTI files only"),
                                ("h.nrrd", "pointset", "recorded in NIfTI files only"),
                                ("h.nii", "other", "intent must be 'vector' or 'pointset', not 'other'"),
                                ("h.mha", "other", "intent must be")):
        with pytest.raises(ValueError, match=f"save_field: .*{words}"):
            pio.save_field(f, str(tmp_path / name), intent=intent)
        assert not (tmp_path / name).exists()
    pio.save_field(f, str(tmp_path / "h.nii"), intent="pointset")
    assert nib.load(str(tmp_path / "h.nii")).header.get_intent()[0] == "pointset"
