"""Pictures (PNG, TIFF, BMP, JPEG) handed to SimpleITK by pyca.io's fallback for unknown extensions.

A picture's pixels have no place in the world: pyca takes SimpleITK's grid for them (origin 0, the
identity direction in ITK's LPS+ world, so diag(-1, -1, 1) in pyca's RAS+ one; spacing 1 or TIFF's
resolution), x the column and y the row from the top, a 2-D picture as z = 1, and one value per pixel:
channels that are equal become that value, colour is refused in one line, as is a picture given to
load_field, a palette whose colours are not the label indices given to load_labels, and writing to a
picture's extension. References: the pixels as Pillow reads them, and SimpleITK's own index-to-world
map (TransformIndexToPhysicalPoint), in LPS+, turned into RAS+."""
import os
import subprocess
import sys

import numpy as np
import pytest

import pyca
import pyca.io as pio

sitk = pytest.importorskip("SimpleITK")
Image = pytest.importorskip("PIL.Image")

INSTALLED = os.path.dirname(os.path.dirname(pyca.__file__))  # the tree under test, never the checkout


def _env():
    """A subprocess's environment: the tree under test first, then the suite's own PYTHONPATH."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([INSTALLED] + [p for p in [os.environ.get("PYTHONPATH")] if p]))


def _grey(h=7, w=12, dtype=np.uint8):
    return ((np.arange(h * w).reshape(h, w) * 37) % 251).astype(dtype)  # rows (y) x columns (x)


def _world(grid, idx):
    """pyca's world point (RAS+) of voxel index idx of grid."""
    d, sp, org = np.asarray(grid.direction()), np.asarray(grid.spacing()), np.asarray(grid.origin())
    return org + d @ (sp * np.asarray(idx, dtype=np.float64))


def _itk_world(path, idx2):
    """SimpleITK's world point of a 2-D picture's pixel, in RAS+ (z 0)."""
    img = sitk.ReadImage(str(path))
    x, y = img.TransformIndexToPhysicalPoint([int(i) for i in idx2])
    return np.array([-x, -y, 0.0])


@pytest.mark.parametrize("name, dtype", [("grey.png", np.uint8), ("grey16.png", np.uint16), ("grey.tif", np.uint8),
                                         ("float.tif", np.float32)])
def test_a_grey_picture_is_a_2d_image_with_itks_grid(tmp_path, name, dtype):
    a = _grey(dtype=dtype)
    if dtype == np.uint16:
        a = a * 257
    elif dtype == np.float32:
        a = a * np.float32(0.25) - 3
    path = tmp_path / name
    Image.fromarray(a).save(path)
    im = pio.load_image(path)
    g = im.grid()
    assert tuple(g.size()) == (12, 7, 1)  # x the column, y the row, 2-D as z = 1
    np.testing.assert_array_equal(im.numpy()[:, :, 0], a.T.astype(np.float32))  # row 0 is y = 0
    np.testing.assert_array_equal(np.asarray(g.direction()), np.diag([-1.0, -1.0, 1.0]))
    for idx in [(0, 0), (11, 0), (3, 6)]:
        np.testing.assert_allclose(_world(g, idx + (0,)), _itk_world(path, idx), atol=1e-6)


def test_a_tiffs_resolution_is_its_spacing(tmp_path):
    path = tmp_path / "res.tif"
    Image.fromarray(_grey()).save(path, dpi=(100, 100))
    g = pio.load_image(path).grid()
    np.testing.assert_allclose(g.spacing()[:2], [25.4 / 100] * 2, rtol=1e-6)  # mm per pixel at 100 dots per inch
    np.testing.assert_allclose(_world(g, (5, 3, 0)), _itk_world(path, (5, 3)), atol=1e-5)


def test_a_multipage_tiff_is_a_3d_image(tmp_path):
    pages = [_grey() + i for i in range(3)]
    path = tmp_path / "stack.tif"
    Image.fromarray(pages[0]).save(path, save_all=True, append_images=[Image.fromarray(p) for p in pages[1:]])
    im = pio.load_image(path)
    assert tuple(im.grid().size()) == (12, 7, 3)
    np.testing.assert_array_equal(im.numpy(), np.stack([p.T for p in pages], axis=-1).astype(np.float32))


@pytest.mark.parametrize("name, mode", [("rgb.png", "RGB"), ("rgba.png", "RGBA"), ("grey.bmp", "L"), ("rgb.tif", "RGB"),
                                        ("palette.png", "P")])
def test_grey_stored_in_several_channels_is_read_as_one_value(tmp_path, name, mode):
    a = _grey()
    pic = Image.fromarray(a)
    pic = pic.convert(mode) if mode != "L" else pic  # (a mode-L BMP is stored with a grey palette: RGB to ITK)
    path = tmp_path / name
    pic.save(path)
    np.testing.assert_array_equal(pio.load_image(path).numpy()[:, :, 0], a.T.astype(np.float32))


@pytest.mark.parametrize("name, mode", [("colour.png", "RGB"), ("colour.tif", "RGB"), ("alpha.png", "RGBA")])
def test_colour_is_refused_in_one_line(tmp_path, name, mode):
    a = _grey()
    rgb = np.stack([a, a[::-1], a], axis=-1) if mode == "RGB" else np.stack([a, a, a, a], axis=-1)  # alpha varies
    path = tmp_path / name
    Image.fromarray(rgb, mode=mode).save(path)
    for load in (pio.load_image, pio.load_field, pio.load_labels):
        with pytest.raises(pio.ImageFileError) as e:
            load(path)
        msg = str(e.value)
        assert "\n" not in msg and repr(str(path)) in msg and "channels per pixel that differ" in msg, msg


def test_a_picture_is_never_a_vector_field(tmp_path):
    a = _grey()
    path = tmp_path / "grey3.png"
    Image.fromarray(np.stack([a, a, a], axis=-1)).save(path)  # three equal channels: a grey picture
    with pytest.raises(pio.ImageFileError, match="expected a vector field"):
        pio.load_field(path)


def test_palette_labels_are_read_as_indices_or_refused(tmp_path):
    lab = (np.arange(35).reshape(5, 7) % 3).astype(np.uint8)
    same, other = tmp_path / "labels.png", tmp_path / "labels50.png"
    for path, pal in ((same, [0, 0, 0, 1, 1, 1, 2, 2, 2]), (other, [0, 0, 0, 50, 50, 50, 100, 100, 100])):
        p = Image.fromarray(lab, mode="P")
        p.putpalette(pal)
        p.save(path)
    values, grid = pio.load_labels(same)
    np.testing.assert_array_equal(values[:, :, 0], lab.T)
    assert tuple(grid.size()) == (7, 5, 1)
    with pytest.raises(pio.ImageFileError, match="palette colours are not its indices"):
        pio.load_labels(other)
    np.testing.assert_array_equal(pio.load_image(other).numpy()[:, :, 0], lab.T * 50.0)  # as an image: its colours


@pytest.mark.parametrize("name", ["out.png", "out.tif", "out.jpg"])
def test_writing_a_picture_is_refused_in_one_line(tmp_path, name):
    im = pyca.Image3D(pyca.GridInfo(pyca.Vec3Di(4, 3, 1)), pyca.MEM_HOST)
    with pytest.raises(pio.ImageFileError, match="unknown file type; name it .nii") as e:
        pio.save_image(im, tmp_path / name)
    assert "\n" not in str(e.value)
    assert os.listdir(tmp_path) == []


def test_without_simpleitk_a_picture_is_refused_naming_the_formats(tmp_path, monkeypatch):
    path = tmp_path / "grey.png"
    Image.fromarray(_grey()).save(path)
    monkeypatch.setattr(pio, "simpleitk_available", lambda: False)
    with pytest.raises(pio.ImageFileError, match=r"supported: \.nii"):
        pio.load_image(path)


def test_the_command_refuses_a_colour_picture_in_one_line(tmp_path):
    a = _grey(16, 16)
    Image.fromarray(a).save(tmp_path / "fixed.png")
    Image.fromarray(np.stack([a, a.T, a], axis=-1)).save(tmp_path / "moving.png")
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "pyca", "lddmm", "--fixed", str(tmp_path / "fixed.png"), "--moving",
                        str(tmp_path / "moving.png"), "--out", str(out)], capture_output=True, text=True, timeout=120,
                       env=_env())
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "channels per pixel that differ" in lines[0], p.stderr
    assert not out.exists()


def _png_header_only(path, w, h, depth=16, colour_type=6):
    """A valid PNG header declaring w x h pixels (16-bit RGBA: 8 bytes each) and almost no pixel data."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, colour_type, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b""))
    return path


def test_a_picture_whose_header_declares_gigabytes_is_refused_before_allocating(tmp_path):
    """74 bytes declaring 20 GB: refused from the header (SimpleITK's ReadImageInformation), in a child
    whose address space would not hold the image, so that an allocation would be seen failing there."""
    path = _png_header_only(tmp_path / "bomb.png", 50000, 50000)
    child = ("import resource, pyca.io, SimpleITK\n"
             "used = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
             "resource.setrlimit(resource.RLIMIT_AS, (used + 2**29, used + 2**29))\n"
             f"try:\n    pyca.io.load_image({str(path)!r})\n"
             "except pyca.io.ImageFileError as e:\n    print('REFUSED', e)\n")
    p = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60,
                       env=_env())
    out = p.stdout.strip()
    assert p.returncode == 0 and out.startswith("REFUSED"), (out, p.stderr)
    assert "bomb.png" in out and "declares 20000000000 bytes" in out and "74-byte PNG" in out, out


def test_honest_pictures_that_compress_well_still_read(tmp_path):
    # A constant picture compresses far (PNG's deflate about 1000x, TIFF's LZW 150x): 20 MB from a few KB.
    a = np.full((4500, 4500), 7, np.uint8)
    for name, kw in [("flat.png", {}), ("flat.tif", {"compression": "tiff_lzw"})]:
        Image.fromarray(a).save(tmp_path / name, **kw)
        assert os.path.getsize(tmp_path / name) * 100 < a.nbytes > 16 << 20  # beyond the check's 16 MiB allowance
        im = pio.load_image(tmp_path / name)
        assert tuple(im.grid().size()) == (4500, 4500, 1) and float(pyca.Max(im)) == 7.0 == float(pyca.Min(im))
