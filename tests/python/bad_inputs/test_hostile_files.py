"""Hostile files (issue 41): a header that declares more voxels than its file holds is refused before
memory is taken for them, a 2-volume series is not read as a field, a symbolic-link loop and an
unknown output type are named as such, and a failed write names the final file, not a temporary one."""
import errno
import gzip
import os
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest

import pyca as ca

pio = pytest.importorskip("pyca.io")
nib = pytest.importorskip("nibabel")


def _header_only(path, shape, dtype=np.float32, body=b"\0" * 4, compress=True):
    hdr = nib.Nifti1Header()
    hdr.set_data_dtype(dtype)
    hdr.set_data_shape(shape)
    raw = hdr.binaryblock + b"\0" * 4 + body
    with open(path, "wb") as f:
        f.write(gzip.compress(raw) if compress else raw)
    return path


def _run_limited(code, limit_gib=1.0):
    """Runs `code` in a child whose address space is capped (beyond what the interpreter and pyca use),
    so that an allocation of gigabytes fails there instead of taking this machine's memory."""
    child = textwrap.dedent(f"""
        import resource, sys
        import pyca, pyca.io, nibabel, numpy
        with open('/proc/self/statm') as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        lim = used + int({limit_gib} * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    """) + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)


def _load_refused(path):
    """pyca.io.load_image(path) in a child capped at 0.5 GiB of address space: its stdout, 'REFUSED <message>'
    when the load raised ImageFileError."""
    proc = _run_limited(f"""
        try:
            pyca.io.load_image({path!r})
        except pyca.io.ImageFileError as e:
            print('REFUSED', e)
    """, limit_gib=0.5)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize("shape", [(1200, 1200, 1200), (2000, 2000, 2000)])
def test_tiny_gzip_with_a_huge_header_is_refused_before_allocating(tmp_path, shape):
    path = _header_only(str(tmp_path / "bomb.nii.gz"), shape)
    assert os.path.getsize(path) < 200
    out = _load_refused(path)
    assert out.startswith("REFUSED") and "bomb.nii.gz" in out and "declares" in out, out
    assert len(out.splitlines()) == 1


def test_gzip_whose_stream_is_shorter_than_declared_is_refused_in_bounded_memory(tmp_path):
    # 4 MB that compress to ~200 KB (inside deflate's ratio for 64 MB), but the header declares 64 MB
    body = np.random.default_rng(0).bytes(200 << 10) + b"\0" * (4 << 20)
    path = _header_only(str(tmp_path / "short.nii.gz"), (256, 256, 256), body=body)
    proc = _run_limited(f"""
        import tracemalloc
        tracemalloc.start()
        try:
            pyca.io.load_image({path!r})
        except pyca.io.ImageFileError as e:
            print('REFUSED', e)
        print('PEAK', tracemalloc.get_traced_memory()[1])
    """)
    assert proc.returncode == 0, proc.stderr
    assert "REFUSED" in proc.stdout and "decompresses to" in proc.stdout, proc.stdout
    peak = int(proc.stdout.split("PEAK")[1])
    assert peak < 16 << 20, f"{peak} bytes allocated for a refused 64 MB header"


def test_uncompressed_file_shorter_than_its_header_declares_is_refused(tmp_path):
    path = _header_only(str(tmp_path / "cut.nii"), (512, 512, 512), body=b"\0" * 1000, compress=False)
    with pytest.raises(pio.ImageFileError, match=r"cut.nii.*declares .* but the file holds"):
        pio.load_image(path)


def test_gzip_reader_gives_nibabels_values(tmp_path):
    for dt in (">i2", "<f4", "u1", "<f8"):
        a = (np.arange(5 * 6 * 7).reshape(5, 6, 7) % 200).astype(dt)
        img = nib.Nifti1Image(a, np.diag([2, 3, 4, 1.0]))
        img.header.set_slope_inter(0.5, 3.0)
        img.set_data_dtype(dt)
        nib.save(img, str(tmp_path / "g.nii.gz"))
        ref = np.asarray(nib.load(str(tmp_path / "g.nii.gz")).dataobj).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(pio.load_image(str(tmp_path / "g.nii.gz"))), ref)


def test_two_volume_series_is_not_a_field(tmp_path):
    path = str(tmp_path / "series.nii.gz")
    nib.save(nib.Nifti1Image(np.ones((6, 5, 4, 2), np.float32), np.eye(4)), path)
    with pytest.raises(pio.ImageFileError, match=r"load_field .*series.nii.gz.*2 volumes"):
        pio.load_field(path)
    flat = str(tmp_path / "flat.nii.gz")  # a 2-D field of 2 components is still read
    nib.save(nib.Nifti1Image(np.ones((6, 5, 1, 2), np.float32), np.eye(4)), flat)
    f = pio.load_field(flat)
    assert tuple(f.grid().size()) == (6, 5, 1) and np.all(np.asarray(f)[..., 2] == 0)


def test_symlink_loop_and_dangling_link_are_named(tmp_path):
    a, b = tmp_path / "a.nii", tmp_path / "b.nii"
    os.symlink(b, a)
    os.symlink(a, b)
    with pytest.raises(pio.ImageFileError, match="loop of symbolic links"):
        pio.load_image(str(a))
    d = tmp_path / "d.nii"
    os.symlink(tmp_path / "gone.nii", d)
    with pytest.raises(FileNotFoundError, match="symbolic link to .*gone.nii"):
        pio.load_image(str(d))


def test_unknown_output_type_is_refused_naming_the_file(tmp_path):
    im = ca.Image3D((4, 4, 4))
    im.fill(1.0)
    with pytest.raises(pio.ImageFileError) as e:
        pio.save_image(im, str(tmp_path / "x.txt"))
    assert "x.txt" in str(e.value) and ".pyca-tmp" not in str(e.value)
    assert os.listdir(tmp_path) == []


def test_failed_write_names_the_final_file(tmp_path, monkeypatch):
    import pyca._files as files

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device", src)

    im = ca.Image3D((4, 4, 4))
    im.fill(1.0)
    monkeypatch.setattr(files.os, "replace", full)
    with pytest.raises(OSError) as e:
        pio.save_image(im, str(tmp_path / "out.nii.gz"))
    assert "out.nii.gz" in str(e.value) and ".pyca-tmp" not in str(e.value) and e.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("where", ["parent", "absolute"])
def test_metaimage_data_file_must_stay_beside_its_header(tmp_path, where):
    im = ca.Image3D((4, 4, 4))
    im.fill(2.0)
    sub = tmp_path / "sub"
    sub.mkdir()
    pio.save_image(im, str(sub / "x.mhd"))
    raw = [f for f in os.listdir(sub) if not f.endswith(".mhd")][0]
    os.replace(sub / raw, tmp_path / raw)  # the data now lies outside the header's folder
    ref = f"../{raw}" if where == "parent" else str(tmp_path / raw)
    text = (sub / "x.mhd").read_text()
    lines = [ln if not ln.startswith("ElementDataFile") else f"ElementDataFile = {ref}" for ln in text.splitlines()]
    (sub / "x.mhd").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"x.mhd.*ElementDataFile .* (leads outside|must be a relative path)"):
        pio.load_image(str(sub / "x.mhd"))


def test_paths_from_untrusted_pieces_stay_inside_their_folder(tmp_path):
    from pyca._files import PathError, confined, safe_name

    root = tmp_path / "out"
    (root / "subjects").mkdir(parents=True)
    os.symlink(tmp_path, root / "subjects" / "link")  # a planted link leading out
    for name in ("../victim", "subject_00/../../victim", "..", ".", "", "a\0b", str(tmp_path / "abs")):
        with pytest.raises(PathError):
            safe_name(name)
    for parts in (("..", "x"), ("subjects", "..", "..", "x"), (str(tmp_path / "x"),), ("subjects", "link", "x")):
        with pytest.raises(PathError):
            confined(str(root), *parts)
    assert confined(str(root), "subjects", "s01", "deformed.nii") == os.path.realpath(
        root / "subjects" / "s01" / "deformed.nii")


# ------------------------------------------------------------------------------------------------
# Files SimpleITK reads (.nrrd, .nhdr; .mha, .mhd when it is installed): SimpleITK allocates the whole
# image from the header before it reads the data, so pyca checks the declared size first.
def _nrrd(path, sizes, encoding="raw", body=b"\0" * 64, typ="float", extra=""):
    head = (f"NRRD0004\n# hostile\ntype: {typ}\ndimension: {len(sizes)}\nsizes: {' '.join(map(str, sizes))}\n"
            f"endian: little\nencoding: {encoding}\n{extra}")
    with open(path, "wb") as f:
        f.write(head.encode() + (b"\n" + body if "data file" not in extra else b""))
    return path


def _mha(path, dims, body=b"\0" * 64, extra=""):
    head = (f"ObjectType = Image\nNDims = {len(dims)}\nBinaryData = True\n{extra}DimSize = {' '.join(map(str, dims))}\n"
            "ElementType = MET_FLOAT\nElementDataFile = LOCAL\n")
    with open(path, "wb") as f:
        f.write(head.encode() + body)
    return path


def _hostile_cases(tmp_path):
    big = (2000, 2000, 2000)  # 32 GB of float32
    deflated = gzip.compress(b"\0" * (1 << 20))  # ~1 KB that a gzip reader expands to 1 MiB
    zlibbed = zlib.compress(b"\0" * (1 << 20))
    return [
        ("raw.nrrd", _nrrd(str(tmp_path / "raw.nrrd"), big)),
        ("gz.nrrd", _nrrd(str(tmp_path / "gz.nrrd"), big, "gzip", deflated)),
        ("vector.nrrd", _nrrd(str(tmp_path / "vector.nrrd"), (3, 1200, 1200, 1200), "raw")),
        ("text.nrrd", _nrrd(str(tmp_path / "text.nrrd"), big, "ascii", b"0 " * 100)),
        ("raw.mha", _mha(str(tmp_path / "raw.mha"), big)),
        ("zlib.mha", _mha(str(tmp_path / "zlib.mha"), big, zlibbed,
                          f"CompressedData = True\nCompressedDataSize = {len(zlibbed)}\n")),
    ]


@pytest.mark.parametrize("name", ["raw.nrrd", "gz.nrrd", "vector.nrrd", "text.nrrd", "raw.mha", "zlib.mha"])
def test_simpleitk_files_with_a_huge_header_are_refused_before_allocating(tmp_path, name):
    """A few hundred bytes declaring gigabytes: refused from the header, naming the file, in a child whose
    address space would not hold the image (SimpleITK's own allocation would fail there, and be seen)."""
    pytest.importorskip("SimpleITK")
    path = dict(_hostile_cases(tmp_path))[name]
    out = _load_refused(path)
    assert out.startswith("REFUSED") and name in out and "declares" in out, out
    assert "alloc" not in out.lower() and "memory" not in out.lower(), out


def test_simpleitk_files_that_hold_their_declared_size_still_read(tmp_path):
    """The check refuses no honest file: NRRD raw, gzip, ascii, hex and detached (.nhdr), MetaImage .mha,
    compressed .mha and .mhd, written by SimpleITK, read to the same values."""
    sitk = pytest.importorskip("SimpleITK")
    a = np.arange(4 * 3 * 2, dtype=np.float32).reshape(2, 3, 4) / 7
    img = sitk.GetImageFromArray(a)
    for name, compress in [("a.nrrd", False), ("b.nrrd", True), ("c.nhdr", False), ("d.mha", False),
                           ("e.mha", True), ("f.mhd", False), ("g.mhd", True)]:
        sitk.WriteImage(img, str(tmp_path / name), compress)
        np.testing.assert_array_equal(np.asarray(pio.load_image(str(tmp_path / name))), a.T, err_msg=name)
    raw = (tmp_path / "a.nrrd").read_bytes()
    head, body = raw.split(b"\n\n", 1)
    for enc, data in [("ascii", b" ".join(repr(float(x)).encode() for x in np.frombuffer(body, "<f4"))),
                      ("hex", body.hex().encode())]:
        (tmp_path / f"{enc}.nrrd").write_bytes(head.replace(b"encoding: raw", f"encoding: {enc}".encode())
                                               + b"\n\n" + data)
        np.testing.assert_allclose(np.asarray(pio.load_image(str(tmp_path / f"{enc}.nrrd"))), a.T, rtol=1e-6)


def test_simpleitk_files_shorter_than_declared_or_unreadable_are_named(tmp_path):
    sitk = pytest.importorskip("SimpleITK")
    img = sitk.GetImageFromArray(np.ones((8, 8, 8), np.float32))
    sitk.WriteImage(img, str(tmp_path / "cut.nrrd"))
    raw = (tmp_path / "cut.nrrd").read_bytes()
    (tmp_path / "cut.nrrd").write_bytes(raw[:-100])
    with pytest.raises(pio.ImageFileError, match=r"cut\.nrrd.*declares 2048 bytes.*holds 1948 bytes"):
        pio.load_image(str(tmp_path / "cut.nrrd"))
    (tmp_path / "bz.nrrd").write_bytes(raw.replace(b"encoding: raw", b"encoding: bzip2"))
    with pytest.raises(pio.ImageFileError, match=r"bz\.nrrd.*encoding 'bzip2' is not supported"):
        pio.load_image(str(tmp_path / "bz.nrrd"))
    (tmp_path / "neg.nrrd").write_bytes(raw.replace(b"sizes: 8 8 8", b"sizes: 8 -8 8"))
    with pytest.raises(pio.ImageFileError, match=r"neg\.nrrd.*sizes \[8, -8, 8\] must be positive"):
        pio.load_image(str(tmp_path / "neg.nrrd"))
    (tmp_path / "notnrrd.nrrd").write_bytes(b"P5 8 8 255\n" + b"\0" * 64)
    with pytest.raises(pio.ImageFileError, match=r"notnrrd\.nrrd.*not a NRRD file"):
        pio.load_image(str(tmp_path / "notnrrd.nrrd"))


def test_a_file_simpleitk_cannot_read_is_one_line_naming_the_reason(tmp_path):
    """SimpleITK's exception runs over several lines (source file, class, the reader's trail): the error
    keeps its last, specific one, so that the CLI's error is one line."""
    sitk = pytest.importorskip("SimpleITK")
    sitk.WriteImage(sitk.GetImageFromArray(np.ones((8, 8, 8), np.float32)), str(tmp_path / "ok.nrrd"))
    raw = (tmp_path / "ok.nrrd").read_bytes()
    assert b"endian: little\n" in raw
    (tmp_path / "noendian.nrrd").write_bytes(raw.replace(b"endian: little\n", b""))  # raw float needs it
    with pytest.raises(pio.ImageFileError) as e:
        pio.load_image(str(tmp_path / "noendian.nrrd"))
    msg = str(e.value)
    assert "noendian.nrrd" in msg and "endian" in msg.split("SimpleITK", 1)[1] and "\n" not in msg, msg


@pytest.mark.parametrize("where", ["../secret.raw", "ABSOLUTE"])
def test_nrrd_data_file_must_stay_beside_its_header(tmp_path, where):
    """A detached header (.nhdr) names its data file: a path read from a file, kept in the header's folder
    (as MetaImage's ElementDataFile), so a header cannot make pyca read a file elsewhere."""
    sitk = pytest.importorskip("SimpleITK")
    sub = tmp_path / "sub"
    sub.mkdir()
    sitk.WriteImage(sitk.GetImageFromArray(np.ones((2, 3, 4), np.float32)), str(sub / "x.nhdr"))
    (tmp_path / "secret.raw").write_bytes((sub / "x.raw").read_bytes())
    ref = str(tmp_path / "secret.raw") if where == "ABSOLUTE" else where
    text = (sub / "x.nhdr").read_text().replace("data file: x.raw", f"data file: {ref}")
    assert ref in text
    (sub / "x.nhdr").write_text(text)
    with pytest.raises(pio.ImageFileError, match=r"x\.nhdr.*NRRD data file"):
        pio.load_image(str(sub / "x.nhdr"))
