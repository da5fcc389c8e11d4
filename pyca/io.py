"""Reading and writing images and vector fields: NIfTI through nibabel, MetaImage / NRRD through
SimpleITK (when it is installed).

    im = pyca.io.load_image("brain.nii.gz")                 # Image3D in host memory
    im = pyca.io.load_image("brain.nii.gz", ca.MEM_DEVICE)  # ... or on the GPU
    pyca.io.save_image(im, "out.nii.gz")                    # any memory type
    h = pyca.io.load_field("phiinv.nii.gz"); pyca.io.save_field(h, "copy.mha")

The full voxel-to-world affine is kept: a grid's spacing, origin and direction matrix
(world = origin + direction @ (spacing * index)) come from the file and go back into every file
written, so an image saved by pyca has the affine of the one it was read from (same
``nibabel.aff2axcodes``, same matrix to float32 precision). pyca's world is NIfTI's RAS+ (x to the
right, y anterior, z superior, as nibabel gives it); MetaImage/NRRD files hold ITK's LPS+ world, so their
origin and direction are converted (x and y negated) on reading and writing. Voxels are used in stored
order: nothing is resampled or flipped. 2-D images (or a z extent of 1) give a grid with size z = 1.
Other files go to nibabel, then to SimpleITK; pictures (PNG, TIFF, ...) get ITK's grid and one value
per pixel, colour is refused (docs/io.md, 'Pictures').
See docs/io.md and docs/design/orientation.md.

Errors come before any data is used: a missing file raises FileNotFoundError; a file that cannot be
read, data that is not a 2-D/3-D scalar image (or a 3-vector field; 4-D series are refused), a grid
with non-positive spacing, or an affine that is not a rotation/flip times voxel sizes (sheared,
singular, not finite) raises ImageFileError (a ValueError) naming the file and what is wrong.
"""
from __future__ import annotations

import errno
import os
import re
import zlib

import numpy as np

from . import _metaimage, _nrrd, core
from ._files import GzipWriter, atomic_path

__all__ = ["ImageFileError", "load_image", "save_image", "load_field", "save_field", "load_labels", "save_labels",
           "stored_dtype", "read_array", "write_array", "check_writable", "simpleitk_available", "FORMATS", "LPS_TO_RAS"]

# Extensions and the library that handles them.
_NIFTI_EXT = (".nii", ".nii.gz", ".hdr", ".img", ".img.gz")
_ITK_EXT = (".mha", ".mhd", ".nrrd", ".nhdr")
FORMATS = {"nifti": _NIFTI_EXT, "metaimage/nrrd (SimpleITK)": _ITK_EXT}
# ITK's LPS+ world to pyca's (NIfTI's) RAS+ world and back (its own inverse).
LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0])
# Largest |D^T D - I| entry accepted for a direction read from a file (core.GridInfo's tolerance).
_ORTHO_TOL = 1e-4


class ImageFileError(ValueError):
    """A file that cannot be used as a pyca image or field (unreadable, wrong shape or grid)."""


def simpleitk_available() -> bool:
    """True when SimpleITK can be imported (needed for MetaImage and NRRD)."""
    try:
        import SimpleITK  # noqa: F401
    except ImportError:
        return False
    return True


def _kind(path: str) -> str:
    low = path.lower()
    if low.endswith(_NIFTI_EXT):
        return "nifti"
    if low.endswith(_ITK_EXT):
        return "itk"
    return "unknown"


def _sitk(path, what):
    try:
        import SimpleITK as sitk
    except ImportError:
        raise ImageFileError(f"{what} {path!r}: NRRD files need SimpleITK, which is not installed "
                             "(pip install SimpleITK, or pip install 'pyca[itk]'); NIfTI (.nii, .nii.gz) "
                             "needs only nibabel") from None
    return sitk


def _check_grid(path, what, spacing, origin):
    sp = [float(s) for s in spacing]
    org = [float(o) for o in origin]
    if not all(np.isfinite(sp)) or any(s <= 0 for s in sp):
        raise ImageFileError(f"{what} {path!r}: voxel spacing must be positive and finite, got {tuple(sp)}")
    if not all(np.isfinite(org)):
        raise ImageFileError(f"{what} {path!r}: origin must be finite, got {tuple(org)}")
    return sp, org


def split_affine(aff, path="", what="load_image"):
    """(spacing, origin, direction) of a 4x4 voxel-to-world affine: spacing = the lengths of its
    first three columns, direction = those columns normalised. ImageFileError (naming `path`) when
    the affine is not finite, is singular, or has shear (columns not orthogonal within 1e-4)."""
    a = np.asarray(aff, dtype=np.float64)
    if a.shape != (4, 4) or not np.all(np.isfinite(a[:3, :3])):
        raise ImageFileError(f"{what} {path!r}: the voxel-to-world affine must be a finite 4x4 matrix, got "
                             f"{np.array2string(a, separator=', ').replace(chr(10), '')}")
    if not np.all(np.isfinite(a[:3, 3])):
        raise ImageFileError(f"{what} {path!r}: origin must be finite, got {tuple(float(x) for x in a[:3, 3])}")
    lin = a[:3, :3]
    sp = np.sqrt((lin ** 2).sum(axis=0))
    if np.any(sp <= 0) or abs(np.linalg.det(lin)) <= 1e-12 * float(np.prod(np.maximum(sp, 1e-300))):
        raise ImageFileError(f"{what} {path!r}: the voxel-to-world affine is not invertible (a zero or repeated "
                             f"axis): {lin.tolist()}")
    # Spacing is held in float32 (GridInfo): dividing by that value makes direction @ diag(spacing)
    # give the file's matrix back exactly.
    sp = sp.astype(np.float32).astype(np.float64)
    d = lin / sp[None, :]
    err = float(np.abs(d.T @ d - np.eye(3)).max())
    if err > _ORTHO_TOL:
        raise ImageFileError(f"{what} {path!r}: the voxel-to-world affine has shear (its axes are not orthogonal, "
                             f"error {err:.2g}); pyca grids hold rotations and flips only: {lin.tolist()}")
    return [float(x) for x in sp], [float(x) for x in a[:3, 3]], d


# ------------------------------------------------------------------------------------------------
# Raw readers: (array in x, y, z[, c] order, spacing (3), origin (3))
def _read_nifti(path, what, check_shape=None):
    import nibabel as nib

    try:
        img = nib.load(path)
        shape = tuple(int(n) for n in img.shape)
    except Exception as e:  # noqa: BLE001 - every failure of the reader is "cannot read"
        raise ImageFileError(f"{what} {path!r}: cannot read it as NIfTI/Analyze ({type(e).__name__}: {e})") from None
    if check_shape is not None:
        check_shape(path, what, shape)  # before the voxels are read
    zooms = [float(z) for z in list(img.header.get_zooms())[:3]]
    _check_raw_pixdim(img, path, what, min(3, len(shape)))
    _check_grid(path, what, zooms + [1.0] * (3 - len(zooms)), [0.0] * 3)
    sp, org, direction = split_affine(img.affine, path, what)
    try:
        data = _nifti_voxels(img, shape, path, what)
    except ImageFileError:
        raise
    except Exception as e:  # noqa: BLE001
        raise ImageFileError(f"{what} {path!r}: cannot read it as NIfTI/Analyze ({type(e).__name__}: {e})") from None
    if data.dtype.fields is not None or np.iscomplexobj(data):
        raise ImageFileError(f"{what} {path!r}: expected real scalar voxels, got dtype {data.dtype}")
    return data, sp, org, direction


# The most bytes deflate can give per compressed byte (its longest match, 258 bytes, costs at least
# two bits, about 1032x), with room for the gzip header: a header declaring more voxel bytes than this
# allows for the file's size cannot be honest, and is refused before anything is decompressed.
_DEFLATE_RATIO = 1100
_READ_CHUNK = 1 << 22  # bytes decompressed per read: a file's voxels are read in bounded steps


def _declared_bytes(img, shape):
    """(offset, bytes) of the voxels a NIfTI/Analyze header declares."""
    proxy = img.dataobj  # nibabel's view of the stored voxels: offset, dtype and scaling as read
    n = int(np.prod(shape, dtype=object)) * int(np.dtype(proxy.dtype).itemsize)
    return int(proxy.offset), n


def _is_gzip(path):
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _nifti_voxels(img, shape, path, what):
    """The voxels of a NIfTI/Analyze image, read only after its header's declared size has been checked
    against the file: an uncompressed file must hold every declared byte; a gzip file must be large
    enough to expand to them (_DEFLATE_RATIO) and is decompressed in chunks of _READ_CHUNK bytes, so that
    a short stream is found before memory for the whole image is taken."""
    import nibabel as nib

    fm = img.file_map.get("image")
    data_path = fm.filename if fm is not None and fm.filename else path
    offset, nbytes = _declared_bytes(img, shape)
    fsize = os.path.getsize(data_path)
    gz = _is_gzip(data_path)
    if not gz:
        if offset + nbytes > fsize:
            raise ImageFileError(f"{what} {path!r}: the header declares {nbytes} bytes of voxels ({'x'.join(map(str, shape))} "
                                 f"{np.dtype(img.dataobj.dtype)}) from byte {offset}, but the file holds {fsize} bytes "
                                 "(truncated, or a corrupt header)")
        return np.asarray(img.dataobj)
    if nbytes + offset > _DEFLATE_RATIO * fsize + (1 << 16):
        raise ImageFileError(f"{what} {path!r}: the header declares {nbytes} bytes of voxels ({'x'.join(map(str, shape))} "
                             f"{np.dtype(img.dataobj.dtype)}), more than a {fsize}-byte gzip file can hold (a corrupt "
                             "or hostile header)")
    import gzip

    want = offset + nbytes
    chunks, got = [], 0
    with gzip.open(data_path, "rb") as f:
        while got < want:
            c = f.read(min(_READ_CHUNK, want - got))
            if not c:
                break
            chunks.append(c)
            got += len(c)
    if got < want:
        raise ImageFileError(f"{what} {path!r}: the header declares {nbytes} bytes of voxels ({'x'.join(map(str, shape))} "
                             f"{np.dtype(img.dataobj.dtype)}) from byte {offset}, but the file decompresses to {got} "
                             "bytes (truncated, or a corrupt header)")
    buf = bytearray(want)  # the checked size; each chunk is let go once copied
    pos = 0
    while chunks:
        c = chunks.pop(0)
        buf[pos:pos + len(c)] = c
        pos += len(c)
    dtype = np.dtype(img.dataobj.dtype)
    arr = np.frombuffer(buf, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset).reshape(shape, order="F")
    return nib.volumeutils.apply_read_scaling(arr, img.dataobj.slope, img.dataobj.inter)


def _check_raw_pixdim(img, path, what, ndim):
    """nibabel replaces a voxel size of 0 in pixdim by 1 when it reads a header; pyca refuses such a
    file (a guessed spacing is a wrong answer), so the stored values are read again, unchecked."""
    import nibabel as nib

    fm = img.file_map.get("header") or img.file_map.get("image")
    hdr_cls = type(img.header)
    if fm is None or fm.filename is None or "pixdim" not in hdr_cls.template_dtype.names:
        return
    try:
        with nib.openers.ImageOpener(fm.filename) as f:
            raw = hdr_cls.from_fileobj(f, check=False)["pixdim"][1:1 + ndim]
    except Exception:  # noqa: BLE001 - nibabel read it once already; nothing more to learn here
        return
    if not all(np.isfinite(raw)) or any(abs(float(v)) == 0 for v in raw):
        raise ImageFileError(f"{what} {path!r}: voxel spacing must be positive and finite, got pixdim[1:{1 + ndim}] = "
                             f"{tuple(float(v) for v in raw)}")


def _read_metaimage(path, what):
    """MetaImage without SimpleITK: pyca's own reader (pyca/_metaimage.py), LPS+ -> RAS+."""
    try:
        arr, sp, org, d_lps = _metaimage.read(path, what)
    except _metaimage.MetaImageError as e:
        raise ImageFileError(str(e)) from None
    aff = np.eye(4)
    aff[:3, :3] = LPS_TO_RAS @ d_lps * np.asarray(sp, dtype=np.float64)[None, :]
    aff[:3, 3] = LPS_TO_RAS @ np.asarray(org, dtype=np.float64)
    sp2, org2, direction = split_affine(aff, path, what)
    return arr, sp2, org2, direction


# SimpleITK's readers of pictures: pixels with no place in the world (no origin, no direction; a spacing
# only where the format has one that ITK reads: TIFF's resolution). Their images get ITK's grid (origin 0,
# direction the identity in ITK's LPS+ world: diag(-1, -1, 1) in pyca's RAS+ one; x the column, y the row
# from the top), and a pixel of several channels is one grey value only where its channels are equal.
_PICTURE_IOS = {"PNGImageIO": "PNG", "JPEGImageIO": "JPEG", "JPEG2000ImageIO": "JPEG 2000", "BMPImageIO": "BMP",
                "TIFFImageIO": "TIFF", "LSMImageIO": "LSM (TIFF)", "BioRadImageIO": "Bio-Rad PIC"}

# The other formats SimpleITK reads whose voxels are in the file it is given (a picture, DICOM, MINC, ...):
# their header's size is checked against the file's. Deflate expands at most about 1032x, TIFF's LZW about
# 1400x (in theory; 150x on a constant image), JPEG and run-length coding less; JPEG 2000 has no such bound
# (58000x on a constant image) and is not checked.
_SELF_CONTAINED_IOS = (set(_PICTURE_IOS) - {"JPEG2000ImageIO"}) | {
    "GDCMImageIO", "GiplImageIO", "HDF5ImageIO", "MINCImageIO", "MRCImageIO", "VTKImageIO", "GE4ImageIO", "GE5ImageIO"}
_ITK_RATIO = 4096


def _check_before_simpleitk(path, what, sitk):
    """SimpleITK allocates the whole image from the header before it reads the data: pyca reads the
    header first (MetaImage: pyca/_metaimage.py; NRRD: pyca/_nrrd.py) and refuses one that declares more
    voxel bytes than the file can hold (raw: its size; compressed: _DEFLATE_RATIO times it), or a data
    file outside the header's folder. For the formats of _SELF_CONTAINED_IOS, SimpleITK reads the header
    alone (ReadImageInformation) and a size over _ITK_RATIO times the file's (and 16 MiB) is refused."""
    try:
        if _metaimage.is_metaimage(path):
            _metaimage.check(path, what, _DEFLATE_RATIO)
            return
        if path.lower().endswith((".nrrd", ".nhdr")) or _nrrd.is_nrrd(path):
            _nrrd.check(path, what, _DEFLATE_RATIO)
            return
    except (_metaimage.MetaImageError, _nrrd.NrrdError) as e:
        raise ImageFileError(str(e)) from None
    try:
        io_name = sitk.ImageFileReader.GetImageIOFromFileName(path)
    except Exception:  # noqa: BLE001 - no reader for it: ReadImage says so
        return
    if io_name not in _SELF_CONTAINED_IOS:
        return
    reader = sitk.ImageFileReader()
    reader.SetFileName(path)
    try:
        reader.ReadImageInformation()
        size = [int(n) for n in reader.GetSize()]
        pixel = sitk.GetArrayViewFromImage(sitk.Image([1] * len(size), reader.GetPixelID()))
        nbytes = int(np.prod(size, dtype=object)) * int(reader.GetNumberOfComponents()) * pixel.dtype.itemsize
    except Exception as e:  # noqa: BLE001
        raise ImageFileError(f"{what} {path!r}: cannot read it with SimpleITK ({_itk_reason(e)})") from None
    fsize = os.path.getsize(path)
    if nbytes > _ITK_RATIO * fsize + (16 << 20):
        raise ImageFileError(f"{what} {path!r}: the header declares {nbytes} bytes of voxels "
                             f"({'x'.join(map(str, size))}, {reader.GetNumberOfComponents()} x {pixel.dtype}), more than a {fsize}-byte "
                             f"{io_name.replace('ImageIO', '')} file can hold (a corrupt or hostile header)")


def _itk_reason(e):
    """The last, most specific line of an ITK exception (its message runs over several lines: the source
    file, the class, then the reader's own trail), so that the error stays one line."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip().strip("()")]
    if not lines:
        return type(e).__name__
    return re.sub(r"^itk::ERROR:\s*\w+\(0x[0-9a-fA-F]+\):\s*", "", lines[-1])


def _picture_format(sitk, path):
    """The picture format SimpleITK reads `path` as ('PNG', 'TIFF', ...), or None for any other format."""
    try:
        return _PICTURE_IOS.get(sitk.ImageFileReader.GetImageIOFromFileName(path))
    except Exception:  # noqa: BLE001 - no reader for it: ReadImage says so
        return None


def _picture_grey(arr, fmt, path, what):
    """A picture's pixels of several channels (y, x, c) or (z, y, x, c) as one grey value each, when the
    colour channels are equal everywhere (a grey image stored as RGB, or a grey palette) and an alpha
    channel, if any, is constant: nothing is lost. Colour is refused (pyca's images are scalar)."""
    c = arr.shape[-1]
    colour = arr[..., :3] if c in (3, 4) else arr
    same = c in (3, 4) and np.array_equal(colour[..., 0], colour[..., 1]) and \
        np.array_equal(colour[..., 0], colour[..., 2])
    if same and c == 4:
        same = bool(np.all(arr[..., 3] == arr.flat[3]))
    if not same:
        hint = ("save the labels as grey values, one value per label" if what == "load_labels" else
                "convert it to grey first (e.g. Pillow's Image.convert('L'))")
        raise ImageFileError(f"{what} {path!r}: a {fmt} picture with {c} channels per pixel that differ (colour"
                             f"{' or transparency' if c == 4 else ''}); pyca reads one value per voxel: {hint}")
    return np.ascontiguousarray(arr[..., 0])


def _read_itk(path, what):
    if _metaimage.is_metaimage(path) and not simpleitk_available():
        return _read_metaimage(path, what)
    sitk = _sitk(path, what)
    _check_before_simpleitk(path, what, sitk)
    try:
        img = sitk.ReadImage(path)
    except Exception as e:  # noqa: BLE001
        raise ImageFileError(f"{what} {path!r}: cannot read it with SimpleITK ({_itk_reason(e)})") from None
    dim = img.GetDimension()
    if dim not in (2, 3):
        raise ImageFileError(f"{what} {path!r}: expected a 2-D or 3-D image, got a {dim}-D one (pyca does not read "
                             "4-D series; split it into 3-D volumes)")
    arr = sitk.GetArrayFromImage(img)  # (z, y, x[, c]) or (y, x[, c])
    ncomp = img.GetNumberOfComponentsPerPixel()
    if np.iscomplexobj(arr):
        raise ImageFileError(f"{what} {path!r}: expected real voxels, got dtype {arr.dtype}")
    fmt = _picture_format(sitk, path) if ncomp > 1 else None
    if fmt is not None:  # never a vector field: one grey value per pixel, or refused
        arr, ncomp = _picture_grey(arr, fmt, path, what), 1
    if ncomp > 1:  # (..., c): reverse the spatial axes only
        arr = np.transpose(arr, tuple(range(dim - 1, -1, -1)) + (dim,))
        if dim == 2:
            arr = arr[:, :, None, :]  # (x, y, 1, c)
    else:
        arr = arr.T
    sp = list(img.GetSpacing()) + [1.0] * (3 - dim)
    org = list(img.GetOrigin()) + [0.0] * (3 - dim)
    d_lps = np.eye(3)
    d_lps[:dim, :dim] = np.asarray(img.GetDirection(), dtype=np.float64).reshape(dim, dim)
    # ITK's LPS+ world -> pyca's RAS+ one: world_ras = LPS_TO_RAS @ world_lps.
    aff = np.eye(4)
    aff[:3, :3] = LPS_TO_RAS @ d_lps * np.asarray(sp, dtype=np.float64)[None, :]
    aff[:3, 3] = LPS_TO_RAS @ np.asarray(org, dtype=np.float64)
    sp2, org2, direction = split_affine(aff, path, what)
    return arr, sp2, org2, direction


def read_array(path, what="load_image", check_shape=None):
    """(data, spacing, origin, direction) of a file: data in pyca's axis order (x, y, z, ...),
    untouched dtype; spacing, origin and the 3x3 direction in pyca's RAS+ world.
    check_shape(path, what, shape), when given, may refuse the stored shape before the voxels are read."""
    path = os.fspath(path)
    if not os.path.exists(path):
        if os.path.islink(path):
            try:
                os.stat(path)
            except OSError as e:
                if e.errno == errno.ELOOP:
                    raise ImageFileError(f"{what} {path!r}: a loop of symbolic links") from None
            raise FileNotFoundError(f"{what}: {path!r} is a symbolic link to {os.readlink(path)!r}, which does not "
                                    "exist")
        raise FileNotFoundError(f"{what}: no such file: {path!r}")
    if os.path.isdir(path):
        raise ImageFileError(f"{what} {path!r}: is a folder, not an image file")
    kind = _kind(path)
    if kind == "itk":
        return _read_itk(path, what)
    if kind == "nifti":
        return _read_nifti(path, what, check_shape)
    # Unknown extension: nibabel guesses from the content, then SimpleITK if present.
    try:
        return _read_nifti(path, what, check_shape)
    except ImageFileError as first:
        if simpleitk_available():
            return _read_itk(path, what)
        raise ImageFileError(f"{first} (supported: .nii, .nii.gz, .hdr/.img; .mha, .mhd, .nrrd with "
                             "SimpleITK)") from None


def _to_grid(path, what, spacing, origin, direction, spatial_shape):
    sp, org = _check_grid(path, what, spacing, origin)
    if any(n < 1 for n in spatial_shape):
        raise ImageFileError(f"{what} {path!r}: empty image, shape {tuple(spatial_shape)}")
    try:
        return core.GridInfo(tuple(int(n) for n in spatial_shape), tuple(sp), tuple(org), direction)
    except ValueError as e:
        raise ImageFileError(f"{what} {path!r}: {e}") from None


def _finish(cls, arr, grid, mem):
    arr = np.asfortranarray(arr, dtype=np.float32)
    obj = cls.from_array(arr, grid)
    if mem is not None and int(mem) != int(core.MEM_HOST):
        obj = obj.clone(mem)
    return obj


def _image_shape(path, what, data_shape):
    """The (x, y, z) shape of a scalar image stored with `data_shape`, or ImageFileError."""
    shape = list(data_shape)
    while len(shape) > 3 and shape[-1] == 1:
        shape.pop()
    if len(shape) == 2:
        shape.append(1)
    if len(shape) != 3:
        hint = " (a vector field? use load_field)" if data_shape[-1] == 3 else (
            " (a 4-D series: pyca registers 3-D volumes; extract one)" if len(shape) == 4 else "")
        raise ImageFileError(f"{what} {os.fspath(path)!r}: expected a 2-D or 3-D scalar image, got data of shape "
                             f"{tuple(data_shape)}{hint}")
    return shape


def _field_shape(path, what, data_shape):
    """The (x, y, z, c) shape of a vector field stored with `data_shape`, or ImageFileError."""
    shape = list(data_shape)
    if len(shape) == 5 and shape[3] == 1:
        shape = shape[:3] + [shape[4]]
    if len(shape) == 4 and shape[-1] == 2 and shape[2] != 1:
        raise ImageFileError(f"{what} {os.fspath(path)!r}: data of shape {tuple(data_shape)} is a series of 2 volumes, "
                             "not a vector field (a 2-component field is 2-D: shape (x, y, 1, 2) or (x, y, 1, 1, 2))")
    if len(shape) != 4 or shape[-1] not in (2, 3):
        raise ImageFileError(f"{what} {os.fspath(path)!r}: expected a vector field of shape (x, y, z, 3) or "
                             f"(x, y, z, 1, 3), got data of shape {tuple(data_shape)}")
    return shape


def load_image(path, mem=None):
    """Read a scalar image into an Image3D (spacing, origin and direction from the file) in memory
    type `mem` (default MEM_HOST). Accepts 3-D data, 2-D data (a grid with z = 1) and 4-D/5-D data
    whose extra dimensions are 1; anything else (a 4-D series included) raises ImageFileError."""
    what = "load_image"
    data, sp, org, direction = read_array(path, what, _image_shape)
    shape = _image_shape(path, what, data.shape)
    data = np.reshape(data, shape, order="F") if tuple(data.shape) != tuple(shape) else data
    grid = _to_grid(os.fspath(path), what, sp, org, direction, shape)
    return _finish(core.Image3D, data, grid, mem)


def load_field(path, mem=None):
    """Read a vector field into a Field3D in memory type `mem` (default MEM_HOST). Accepts shape
    (x, y, z, 3), NIfTI's vector layout (x, y, z, 1, 3) and 2-D forms (x, y, 1, 1, 3) or (x, y, 1, 3).
    The values are stored as they are (pyca H-fields hold voxel coordinates, V-fields world units
    along the grid's axes); the grid keeps the file's spacing, origin and direction."""
    what = "load_field"
    data, sp, org, direction = read_array(path, what, _field_shape)
    shape = _field_shape(path, what, data.shape)
    data = np.reshape(data, shape, order="F")
    if shape[-1] == 2:  # a 2-D field: z component 0
        data = np.concatenate([data, np.zeros(shape[:3] + [1], dtype=data.dtype)], axis=3)
    grid = _to_grid(os.fspath(path), what, sp, org, direction, shape[:3])
    return _finish(core.Field3D, data, grid, mem)


# ------------------------------------------------------------------------------------------------
# Writers
def _host_array(obj, what):
    if not isinstance(obj, (core.Image3D, core.Field3D)):
        raise TypeError(f"{what}: expected a pyca Image3D or Field3D, got {type(obj).__name__}")
    # host memory: a view (the writers only read it, and the caller holds obj); device memory: one copy
    return obj.numpy() if obj.is_on_device else np.asarray(obj)


def check_writable(path, what="save_image"):
    """The checks write_array makes of `path` before it writes, for a program to make before any work: its
    folder exists, it is no folder, its type is known from its name, and SimpleITK is there if the type
    needs it. FileNotFoundError, IsADirectoryError or ImageFileError naming `what` and the file."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{what}: folder {folder!r} does not exist")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{what}: {path!r} is a folder; give a file name (e.g. {os.path.join(path, 'image.nii.gz')!r})")
    if _kind(path) == "unknown":
        raise ImageFileError(f"{what} {path!r}: unknown file type; name it .nii, .nii.gz, .hdr (NIfTI), .mha, .mhd "
                             "(MetaImage) or .nrrd (NRRD, with SimpleITK)")
    if _kind(path) == "itk" and not _metaimage.is_metaimage(path):
        _sitk(path, what)


def write_array(arr, spacing, origin, path, vector=False, what="save_image", description="", direction=None,
                intent="vector", dtype=np.float32):
    """Write `arr` (x, y, z[, 3]) on the grid (spacing, origin, 3x3 direction; None: the identity) to
    `path` (format from the extension; anything but MetaImage/NRRD is written as NIfTI, with sform and
    qform both holding the affine, code 1 (scanner)) as `dtype` (float32 unless given: an integer type
    for label maps). intent: a vector field's NIfTI intent, 'vector' (NIFTI_INTENT_VECTOR, what ITK
    writes and reads as a displacement field in LPS) or 'pointset' (NIFTI_INTENT_POINTSET: the vectors
    are positions, as a pyca H-field's voxel coordinates are)."""
    path = os.fspath(path)
    check_writable(path, what)
    sp = np.array([float(s) for s in spacing], dtype=np.float64)
    org = np.array([float(o) for o in origin], dtype=np.float64)
    d = np.eye(3) if direction is None else np.asarray(direction, dtype=np.float64)
    if d.shape != (3, 3):
        raise ValueError(f"{what}: direction must be a 3x3 matrix, got shape {d.shape}")
    aff = np.eye(4)
    aff[:3, :3] = d * sp[None, :]
    aff[:3, 3] = org
    if _kind(path) == "itk" and _metaimage.is_metaimage(path) and not simpleitk_available():
        _metaimage.write(path, arr, sp, LPS_TO_RAS @ org, LPS_TO_RAS @ d, channels=3 if vector else 1, what=what)
        return
    if _kind(path) == "itk":
        sitk = _sitk(path, what)
        data = np.asarray(arr, dtype=dtype)
        if vector:
            img = sitk.GetImageFromArray(np.ascontiguousarray(np.moveaxis(data, -1, 0).T), isVector=True)
        else:
            img = sitk.GetImageFromArray(np.ascontiguousarray(data.T))
        # pyca's RAS+ world -> ITK's LPS+ one.
        img.SetSpacing([float(x) for x in sp])
        img.SetOrigin([float(x) for x in LPS_TO_RAS @ org])
        img.SetDirection([float(x) for x in (LPS_TO_RAS @ d).ravel()])
        with atomic_path(path) as tmp:  # written whole or not at all (pyca/_files.py)
            sitk.WriteImage(img, tmp)
        return
    import nibabel as nib

    data = np.asarray(arr, dtype=dtype)
    if vector:
        data = data.reshape(data.shape[:3] + (1, 3), order="F")
    img = nib.Nifti1Image(data, aff)
    img.set_data_dtype(data.dtype)
    hdr = img.header
    hdr.set_xyzt_units("mm", "sec")
    img.set_qform(aff, code=1)
    img.set_sform(aff, code=1)
    if vector:
        hdr.set_intent(intent, (), name=description[:15] or "pyca field")
    elif description:
        hdr["descrip"] = description[:79].encode()
    with atomic_path(path) as tmp:
        low = path.lower()
        if low.endswith(".nii.gz"):
            # What nib.save writes, streamed into a gzip deflated on all cores (pyca/_files.py) with
            # zlib's run-length strategy: on float images and fields 2.2x faster than nibabel's
            # level 1, files 4% larger.
            with GzipWriter(tmp, strategy=zlib.Z_RLE) as w:
                img.to_stream(w)
        else:
            nib.save(img, tmp)


def prepare_writing():
    """Imports nibabel and starts the .nii.gz compression threads on a background thread, and
    returns it: a command that will write NIfTI files calls this before its long work (pyca lddmm:
    before it registers), so that its first save_* does not pay for them (an `import nibabel`
    meanwhile waits for this one)."""
    import threading

    def warm():
        try:
            import nibabel  # noqa: F401

            from ._files import compress_pool

            compress_pool()
        except Exception:  # noqa: BLE001, S110 - the writing imports it again and raises it there, in one line
            pass

    t = threading.Thread(target=warm, name="pyca-prepare-writing", daemon=True)
    t.start()
    return t


def save_image(im, path, description="", dtype=np.float32):
    """Write an Image3D (any memory type) to `path` (.nii, .nii.gz; .mha, .mhd, .nrrd with SimpleITK)
    with its grid's affine (spacing, origin, direction), as `dtype` (float32 unless given; an integer
    dtype for a label map, whose values must then be integers in its range: ValueError otherwise)."""
    arr = _host_array(im, "save_image")
    if not isinstance(im, core.Image3D):
        raise TypeError("save_image: expected an Image3D (use save_field for a Field3D)")
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = (float(v) for v in core.MinMax(im))
        if lo < info.min or hi > info.max or not np.array_equal(arr, np.round(arr)):
            raise ValueError(f"save_image {os.fspath(path)!r}: the values ({lo:g} to {hi:g}) are not integers that "
                             f"{dtype} holds")
    g = im.grid()
    write_array(arr, g.spacing(), g.origin(), path, vector=False, what="save_image", description=description,
                direction=g.direction(), dtype=dtype)


def save_field(f, path, description="", intent="vector"):
    """Write a Field3D (any memory type) to `path` as a 3-vector image (NIfTI: shape (x, y, z, 1, 3),
    with `intent`: 'vector' as ITK writes displacement fields, or 'pointset' for an H-field, whose
    vectors are positions (voxel coordinates), not displacements) with its grid's affine (spacing,
    origin, direction). The vectors are written as they are (not rotated into the world frame): an
    ITK displacement field is written by pyca.registration.transform_files. 'pointset' is NIfTI's: another
    format has no intent to hold it (ValueError, rather than a file read back as a displacement field)."""
    arr = _host_array(f, "save_field")
    if not isinstance(f, core.Field3D):
        raise TypeError("save_field: expected a Field3D (use save_image for an Image3D)")
    if intent not in ("vector", "pointset"):
        raise ValueError(f"save_field: intent must be 'vector' or 'pointset', not {intent!r}")
    if intent == "pointset" and _kind(os.fspath(path)) != "nifti":
        raise ValueError(f"save_field: intent 'pointset' (an H-field's positions) is recorded in NIfTI files only; "
                         f"{os.fspath(path)!r} would be read back as a displacement field: write .nii or .nii.gz")
    g = f.grid()
    write_array(arr, g.spacing(), g.origin(), path, vector=True, what="save_field", description=description,
                direction=g.direction(), intent=intent)


# ------------------------------------------------------------------------------------------------
# Label maps: integer values, never through float32 (a label above 2^24 keeps its value)
def load_labels(path):
    """(values, grid) of a label image: its voxels as stored (an integer array, or the file's float
    values, which pyca.registration.inputs.LabelImage requires to be integers), x, y, z order, and its
    GridInfo (the file's spacing, origin and direction)."""
    what = "load_labels"
    data, sp, org, direction = read_array(path, what, _image_shape)
    _check_palette_labels(os.fspath(path), what, data)
    shape = _image_shape(path, what, data.shape)
    data = np.reshape(data, shape, order="F") if tuple(data.shape) != tuple(shape) else data
    return np.asfortranarray(data), _to_grid(os.fspath(path), what, sp, org, direction, shape)


def stored_dtype(path):
    """The voxel type an image file stores (NIfTI: its header's; float32 when a scaling changes the stored
    values; other formats: SimpleITK's pixel type), without reading the voxels; None when it cannot be
    told (an unreadable file: load_image says why in its own words)."""
    low = os.fspath(path).lower()
    try:
        if low.endswith((".nii", ".nii.gz", ".hdr", ".img", ".img.gz")):
            import nibabel as nib

            img = nib.load(path)
            slope, inter = img.dataobj.slope, img.dataobj.inter
            if (slope not in (None, 1.0) and np.isfinite(slope)) or (inter not in (None, 0.0) and np.isfinite(inter)):
                return np.dtype(np.float32)  # scaled: the values are not the stored integers
            return np.dtype(img.get_data_dtype())
        import SimpleITK as sitk

        r = sitk.ImageFileReader()
        r.SetFileName(os.fspath(path))
        r.ReadImageInformation()
        return np.dtype(sitk.GetArrayViewFromImage(sitk.Image([1] * r.GetDimension(), r.GetPixelID())).dtype)
    except Exception:  # noqa: BLE001 - load_image reports an unreadable file in its own words
        return None


def _check_palette_labels(path, what, data):
    """An indexed-colour picture (a PNG, BMP, GIF or TIFF with a palette) stores labels as palette
    indices, but SimpleITK reads its colours: refused unless each index's colour is the index itself."""
    if _kind(path) != "unknown":
        return
    try:
        from PIL import Image

        with Image.open(path) as pic:
            if pic.mode not in ("P", "PA"):
                return
            index = np.asarray(pic.convert("P") if pic.mode == "PA" else pic)  # (y, x): the first frame
    except Exception:  # noqa: BLE001 - not a picture Pillow reads: nothing to compare
        return
    first = data if data.ndim == 2 else data.reshape(data.shape[:2] + (-1,), order="F")[:, :, 0]
    if first.shape == index.T.shape and np.array_equal(first, index.T):
        return
    raise ImageFileError(f"{what} {path!r}: an indexed-colour picture whose palette colours are not its indices: "
                         "the labels would be read as colours; save them as grey values (Pillow mode 'L' or 'I;16') "
                         "or as NIfTI")


def _label_dtype(values):
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for t in (np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64):
        if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max:
            return t
    return np.uint64


def save_labels(values, grid, path, description="", dtype=None):
    """Write an integer label map (`values`: an integer array x, y, z, or anything with .numpy() and
    .grid(), such as pyca.registration.inputs.LabelImage) on `grid` to `path`, as `dtype` (an integer type
    that holds every value: ValueError otherwise) or by default the smallest integer type that holds its
    values (uint8, int16, ... int64), with the grid's affine."""
    if grid is None and hasattr(values, "grid"):
        grid = values.grid()
    a = np.asarray(values.numpy() if hasattr(values, "numpy") else values)
    if a.dtype.kind not in "iub":
        raise TypeError(f"save_labels: expected integer label values, got dtype {a.dtype}")
    if tuple(a.shape[:3]) != tuple(grid.size())[: a.ndim]:
        raise ValueError(f"save_labels: values of shape {a.shape} on a grid of size {tuple(grid.size())}")
    if dtype is not None:
        dtype = np.dtype(dtype)
        info = np.iinfo(dtype) if dtype.kind in "iu" else None
        if info is None or (a.size and (int(a.min()) < info.min or int(a.max()) > info.max)):
            raise ValueError(f"save_labels: the values ({a.min() if a.size else ''} .. {a.max() if a.size else ''}) "
                             f"do not fit {dtype}")
    write_array(a, grid.spacing(), grid.origin(), path, vector=False, what="save_labels", description=description,
                direction=grid.direction(), dtype=_label_dtype(a) if dtype is None else dtype)
