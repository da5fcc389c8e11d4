"""MetaImage (.mhd + raw data file, or .mha with the data inline) read and written by pyca itself,
without SimpleITK: the format PyCA (through ITK) wrote its images and fields in.

Values are in the file's own frame, as written: `Offset` (origin), `ElementSpacing`, and the
direction from `TransformMatrix` (listed column by column: its first three numbers are the world
direction of voxel axis x, as ITK writes them). The world frame of a MetaImage is ITK's LPS+;
pyca.io converts it to pyca's RAS+ at the file boundary, while PyCA's own functions
(pyca.common.LoadITKImage & co.) keep the file's frame, as PyCA did.

Supported: 2-D and 3-D images, scalar or with several channels per voxel (vector fields), the
element types MET_(U)CHAR ... MET_DOUBLE in either byte order, zlib-compressed data, a header
followed by the data (.mha, ElementDataFile = LOCAL) or a separate data file (.mhd). The header is
checked (sizes, type, data size) before any voxel is read or memory allocated for it.
"""
from __future__ import annotations

import os
import zlib

import numpy as np

from ._files import atomic_path

__all__ = ["MetaImageError", "read", "check", "write", "is_metaimage", "data_file"]

_TYPES = {
    "MET_UCHAR": np.uint8, "MET_CHAR": np.int8, "MET_USHORT": np.uint16, "MET_SHORT": np.int16,
    "MET_UINT": np.uint32, "MET_INT": np.int32, "MET_ULONG": np.uint64, "MET_LONG": np.int64,
    "MET_ULONG_LONG": np.uint64, "MET_LONG_LONG": np.int64, "MET_FLOAT": np.float32, "MET_DOUBLE": np.float64,
}
_MAX_HEADER = 1 << 16  # a MetaImage header is a few hundred bytes
_MAX_VOXELS = 1 << 34


class MetaImageError(ValueError):
    """A MetaImage file pyca cannot read (named, with the reason)."""


def is_metaimage(path) -> bool:
    return os.fspath(path).lower().endswith((".mhd", ".mha"))


def _read_header(path, what):
    """({key: value string}, byte offset of the data in the header file)."""
    with open(path, "rb") as f:
        head = f.read(_MAX_HEADER)
    fields: dict[str, str] = {}
    pos = 0
    while pos < len(head):
        end = head.find(b"\n", pos)
        if end < 0:
            end = len(head)
        line = head[pos:end].decode("latin-1").strip()
        pos = end + 1
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise MetaImageError(f"{what} {path!r}: not a MetaImage header (line {line[:40]!r} has no '=')")
        key, value = key.strip(), value.strip()
        fields[key] = value
        if key == "ElementDataFile":  # the last header line
            return fields, pos
    raise MetaImageError(f"{what} {path!r}: MetaImage header without ElementDataFile (truncated or not MetaImage)")


def _numbers(fields, key, n, path, what, cast=float, default=None):
    if key not in fields:
        if default is None:
            raise MetaImageError(f"{what} {path!r}: the MetaImage header has no {key}")
        return list(default)
    try:
        vals = [cast(float(x)) if cast is int else cast(x) for x in fields[key].split()]
    except ValueError:
        raise MetaImageError(f"{what} {path!r}: {key} = {fields[key]!r} is not {n} numbers") from None
    if len(vals) != n:
        raise MetaImageError(f"{what} {path!r}: {key} = {fields[key]!r} should hold {n} numbers")
    return vals


def _flag(fields, key):
    return fields.get(key, "False").strip().lower() in ("true", "1", "yes")


def data_file(path, what="load_image", fields=None):
    """The data file a MetaImage header names (ElementDataFile; None for LOCAL or a list/pattern), a
    path read from a file: resolved and kept in the header's folder (pyca._files.confined), so a header
    cannot make pyca read a file elsewhere. MetaImageError otherwise."""
    from ._files import PathError, confined

    if fields is None:
        fields, _ = _read_header(path, what)
    datafile = fields.get("ElementDataFile", "LOCAL").strip()
    if datafile.upper() == "LOCAL" or datafile.upper().startswith("LIST") or "%" in datafile \
            or len(datafile.split()) > 1:
        return None
    try:
        return confined(os.path.dirname(os.path.abspath(path)), datafile, what="ElementDataFile")
    except PathError as e:
        raise MetaImageError(f"{what} {path!r}: {e}") from None


def _layout(path, what):
    """The checked header of a MetaImage file: (fields, ndim, dims, nchan, dtype, nbytes, src, offset,
    compressed, avail): the voxel bytes it declares, where they are (src from byte offset, avail bytes
    there). Nothing is allocated for the voxels."""
    path = os.fspath(path)
    fields, data_offset = _read_header(path, what)
    if fields.get("ObjectType", "Image").lower() != "image":
        raise MetaImageError(f"{what} {path!r}: ObjectType = {fields['ObjectType']!r}, not an image")
    try:
        ndim = int(fields.get("NDims", ""))
    except ValueError:
        raise MetaImageError(f"{what} {path!r}: NDims = {fields.get('NDims')!r} is not 2 or 3") from None
    if ndim not in (2, 3):
        raise MetaImageError(f"{what} {path!r}: expected a 2-D or 3-D image, got NDims = {ndim} (pyca does not "
                             "read 4-D series)")
    dims = _numbers(fields, "DimSize", ndim, path, what, int)
    if min(dims) < 1:
        raise MetaImageError(f"{what} {path!r}: DimSize = {dims} must be positive")
    try:
        nchan = int(fields.get("ElementNumberOfChannels", "1"))
    except ValueError:
        nchan = 0
    if nchan < 1 or nchan > 16:
        raise MetaImageError(f"{what} {path!r}: ElementNumberOfChannels = "
                             f"{fields.get('ElementNumberOfChannels')!r} is not supported")
    etype = fields.get("ElementType", "")
    if etype not in _TYPES:
        raise MetaImageError(f"{what} {path!r}: ElementType = {etype!r} is not supported ({', '.join(_TYPES)})")
    if not _flag(fields, "BinaryData") and "BinaryData" in fields:
        raise MetaImageError(f"{what} {path!r}: text (BinaryData = False) MetaImage data is not supported")
    nvox = int(np.prod(dims, dtype=object)) * nchan
    if nvox > _MAX_VOXELS:
        raise MetaImageError(f"{what} {path!r}: DimSize = {dims} x {nchan} channels is more than pyca reads")
    dtype = np.dtype(_TYPES[etype]).newbyteorder(">" if _flag(fields, "BinaryDataByteOrderMSB")
                                                 or _flag(fields, "ElementByteOrderMSB") else "<")
    nbytes = nvox * dtype.itemsize
    datafile = fields["ElementDataFile"]
    if datafile.upper() == "LOCAL":
        src, offset = path, data_offset
    elif datafile.upper().startswith("LIST") or "%" in datafile or len(datafile.split()) > 1:
        raise MetaImageError(f"{what} {path!r}: ElementDataFile = {datafile!r} (a list or pattern of slice files) "
                             "is not supported; convert the image to one file")
    else:
        src = data_file(path, what, fields)
        offset = 0
        if not os.path.isfile(src):
            raise MetaImageError(f"{what} {path!r}: its data file {datafile!r} does not exist")
    try:
        header_size = int(float(fields.get("HeaderSize", "0")))
    except (ValueError, OverflowError):
        raise MetaImageError(f"{what} {path!r}: HeaderSize = {fields.get('HeaderSize')!r} is not a number") from None
    compressed = _flag(fields, "CompressedData")
    if header_size == -1 and not compressed:
        offset = os.path.getsize(src) - nbytes
    elif header_size > 0:
        offset += header_size
    avail = os.path.getsize(src) - offset
    if not compressed and (avail < nbytes or offset < 0):
        raise MetaImageError(f"{what} {path!r}: the header declares {nbytes} bytes of voxels, the file holds "
                             f"{max(avail, 0)} (truncated, or a corrupt or hostile header)")
    return fields, ndim, dims, nchan, dtype, nbytes, src, offset, compressed, avail


def check(path, what, deflate_ratio):
    """Refuses (MetaImageError) a MetaImage file whose header declares more voxel bytes than its data
    can hold: uncompressed, the bytes in the file; compressed, `deflate_ratio` times its compressed
    bytes (deflate's largest ratio is about 1032). For a header read by another library (SimpleITK),
    before it allocates the image."""
    fields, *_, nbytes, src, offset, compressed, avail = _layout(path, what)
    if compressed:
        csize = _compressed_size(fields, avail, path, what)
        if nbytes > deflate_ratio * csize + (1 << 16):
            raise MetaImageError(f"{what} {path!r}: the header declares {nbytes} bytes of voxels, more than "
                                 f"{csize} bytes of compressed data can hold (a corrupt or hostile header)")


def _compressed_size(fields, avail, path, what):
    try:
        csize = int(float(fields.get("CompressedDataSize", avail)))
    except (ValueError, OverflowError):
        csize = -1
    if csize > avail or csize < 1:
        raise MetaImageError(f"{what} {path!r}: CompressedDataSize = {fields.get('CompressedDataSize')} but the "
                             f"file holds {avail} bytes")
    return csize


def read(path, what="load_image"):
    """(data, spacing, origin, direction) of a MetaImage file, in the file's frame: data indexed
    [x, y, z] (or [x, y, z, c] with several channels; z = 1 for a 2-D file) in the stored dtype,
    spacing and origin as 3 floats, direction a 3x3 float64 matrix whose column c is voxel axis c."""
    path = os.fspath(path)
    fields, ndim, dims, nchan, dtype, nbytes, src, offset, compressed, avail = _layout(path, what)
    nvox = nbytes // dtype.itemsize
    sp_key = "ElementSpacing" if "ElementSpacing" in fields else "ElementSize"
    sp = _numbers(fields, sp_key, ndim, path, what, default=[1.0] * ndim)
    org_key = next((k for k in ("Offset", "Origin", "Position") if k in fields), "Offset")
    org = _numbers(fields, org_key, ndim, path, what, default=[0.0] * ndim)
    tm_key = next((k for k in ("TransformMatrix", "Rotation", "Orientation") if k in fields), "TransformMatrix")
    tm = _numbers(fields, tm_key, ndim * ndim, path, what, default=np.eye(ndim).ravel())
    if not all(np.isfinite(sp)) or min(sp) <= 0:
        raise MetaImageError(f"{what} {path!r}: {sp_key} = {sp} must be positive and finite")
    if not all(np.isfinite(org)) or not all(np.isfinite(tm)):
        raise MetaImageError(f"{what} {path!r}: {org_key} / {tm_key} must be finite")
    if compressed:
        csize = _compressed_size(fields, avail, path, what)
        with open(src, "rb") as f:
            f.seek(offset)
            raw = f.read(csize)
        d = zlib.decompressobj(zlib.MAX_WBITS | 32)  # zlib or gzip stream
        try:
            buf = d.decompress(raw, nbytes + 1)
        except zlib.error as e:
            raise MetaImageError(f"{what} {path!r}: its compressed data cannot be read ({e})") from None
        if len(buf) != nbytes:
            raise MetaImageError(f"{what} {path!r}: the compressed data holds {len(buf)} bytes, the header says "
                                 f"{nbytes}")
        flat = np.frombuffer(buf, dtype=dtype)
    else:
        flat = np.fromfile(src, dtype=dtype, count=nvox, offset=offset)
    shape3 = list(dims) + [1] * (3 - ndim)
    if nchan > 1:
        data = flat.reshape([nchan] + shape3, order="F")  # channels fastest, then x, y, z
        data = np.moveaxis(data, 0, -1)
    else:
        data = flat.reshape(shape3, order="F")
    direction = np.eye(3)
    direction[:ndim, :ndim] = np.asarray(tm, dtype=np.float64).reshape(ndim, ndim).T
    spacing = [float(x) for x in sp] + [1.0] * (3 - ndim)
    origin = [float(x) for x in org] + [0.0] * (3 - ndim)
    return data.astype(data.dtype.newbyteorder("="), copy=False), spacing, origin, direction


def _orientation_code(direction):
    """ITK's AnatomicalOrientation letters for a direction (LPS+ world): per voxel axis, the side it
    runs from (+x from Right, +y from Anterior, +z from Inferior)."""
    letters = (("R", "L"), ("A", "P"), ("I", "S"))
    out = []
    for c in range(3):
        col = direction[:, c]
        k = int(np.argmax(np.abs(col)))
        out.append(letters[k][0 if col[k] > 0 else 1])
    return "".join(out)


def _fmt(vals):
    return " ".join(repr(float(v)) if not float(v).is_integer() else str(int(v)) for v in vals)


def write(path, data, spacing, origin, direction=None, channels=1, what="save_image"):
    """Writes `data` ([x, y, z] or [x, y, z, c] with c = channels) as float32 MetaImage to `path`
    (.mha: one file; .mhd: the header and a .raw data file beside it, same base name), with the
    spacing, origin and direction (3x3, column c = voxel axis c; None: identity) as given, in the file's
    frame. Files appear whole or not at all."""
    path = os.fspath(path)
    arr = np.asarray(data, dtype=np.float32)
    shape = arr.shape[:3]
    if channels > 1 and (arr.ndim != 4 or arr.shape[3] != channels):
        raise ValueError(f"{what}: expected data of shape (x, y, z, {channels}), got {arr.shape}")
    d = np.eye(3) if direction is None else np.asarray(direction, dtype=np.float64)
    header = [
        "ObjectType = Image", "NDims = 3", "BinaryData = True", "BinaryDataByteOrderMSB = False",
        "CompressedData = False",
        "TransformMatrix = " + _fmt(d.T.ravel()),
        "Offset = " + _fmt(origin), "CenterOfRotation = 0 0 0",
        "AnatomicalOrientation = " + _orientation_code(d),
        "ElementSpacing = " + _fmt(spacing), "DimSize = " + " ".join(str(int(n)) for n in shape),
    ]
    if channels > 1:
        header.append(f"ElementNumberOfChannels = {int(channels)}")
    header.append("ElementType = MET_FLOAT")
    if channels > 1:
        payload = np.moveaxis(arr, -1, 0).astype("<f4").tobytes(order="F")
    else:
        payload = arr.astype("<f4").tobytes(order="F")
    if path.lower().endswith(".mha"):
        text = "\n".join(header + ["ElementDataFile = LOCAL"]) + "\n"
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            f.write(text.encode("ascii"))
            f.write(payload)
        return
    base = os.path.splitext(os.path.basename(path))[0] + ".raw"
    raw_path = os.path.join(os.path.dirname(os.path.abspath(path)), base)
    text = "\n".join(header + [f"ElementDataFile = {base}"]) + "\n"
    with atomic_path(raw_path) as tmp, open(tmp, "wb") as f:
        f.write(payload)
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(text.encode("ascii"))
