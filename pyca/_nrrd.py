"""NRRD headers read by pyca before SimpleITK reads the file (.nrrd: header and data in one file;
.nhdr: a detached header naming its data file).

SimpleITK (ITK's NrrdIO) allocates the whole image from the header's `sizes` and `type` before it
reads a byte of data, so a header of a few hundred bytes declaring 2000^3 voxels takes 32 GB. check()
reads the header (at most _MAX_HEADER bytes, nothing allocated for the voxels) and refuses, naming the
file, one that declares more bytes than its data can hold: raw, the bytes after the header; gzip,
deflate's largest ratio times them (the caller's `deflate_ratio`); ascii/text, one character per
value; hex, two per byte. It also keeps a detached data file in the header's folder (pyca._files.confined),
as for MetaImage, and refuses what NrrdIO cannot read or pyca cannot check (bzip2, block types, lists
or patterns of data files). See http://teem.sourceforge.net/nrrd/format.html for the format.
"""
from __future__ import annotations

import os
import re

__all__ = ["NrrdError", "is_nrrd", "read_header", "check"]

_MAX_HEADER = 1 << 20  # an NRRD header is a few hundred bytes (comments may make it longer)
_ENCODINGS = {"raw": "raw", "gz": "gzip", "gzip": "gzip", "txt": "text", "text": "text", "ascii": "text",
              "hex": "hex", "bz2": "bzip2", "bzip2": "bzip2"}


class NrrdError(ValueError):
    """An NRRD file pyca will not hand to SimpleITK (named, with the reason)."""


def is_nrrd(path) -> bool:
    """Whether the file starts with NRRD's magic (NRRD0001 ... NRRD0005)."""
    try:
        with open(path, "rb") as f:
            return re.fullmatch(rb"NRRD000\d", f.read(8)) is not None
    except OSError:
        return False


def read_header(path, what="load_image"):
    """({field: value} with field names lower case and spaces removed, byte offset of the data in the
    file or None for a header that ends at its end (a detached header))."""
    with open(path, "rb") as f:
        head = f.read(_MAX_HEADER + 1)
    if re.match(rb"NRRD000\d\r?\n", head) is None:
        raise NrrdError(f"{what} {path!r}: not a NRRD file (it does not start with NRRD000N)")
    fields: dict[str, str] = {}
    pos = head.index(b"\n") + 1
    while pos < len(head):
        end = head.find(b"\n", pos)
        if end < 0:
            if len(head) > _MAX_HEADER:
                raise NrrdError(f"{what} {path!r}: a NRRD header longer than {_MAX_HEADER} bytes")
            end = len(head)
        line = head[pos:end].decode("latin-1").rstrip("\r")
        pos = end + 1
        if not line:  # the blank line before attached data
            return fields, pos
        if line.startswith("#") or ":=" in line.partition(": ")[0]:  # comments, key/value pairs
            continue
        key, sep, value = line.partition(": ")
        if not sep:
            raise NrrdError(f"{what} {path!r}: not a NRRD header line: {line[:60]!r}")
        fields[key.strip().lower().replace(" ", "")] = value.strip()
    return fields, None


def _type_size(name):
    t = " ".join(name.lower().replace("_t", "").split())
    if t == "block":
        return None
    if t == "float":
        return 4
    if t == "double":
        return 8
    sizes = {"char": 1, "int8": 1, "uint8": 1, "short": 2, "int16": 2, "uint16": 2, "int": 4, "int32": 4,
             "uint32": 4, "longlong": 8, "long long": 8, "int64": 8, "uint64": 8}
    t = re.sub(r"^(signed|unsigned|u)\s*", "", t)
    t = re.sub(r"\s+int$", "", t)  # "short int" -> "short"
    return sizes.get(t)


def check(path, what, deflate_ratio):
    """Refuses (NrrdError) an NRRD file whose header declares more voxel bytes than its data can hold,
    or that pyca cannot check; returns the declared voxel bytes otherwise."""
    path = os.fspath(path)
    fields, data_offset = read_header(path, what)
    try:
        dim = int(fields["dimension"])
        sizes = [int(s) for s in fields["sizes"].split()]
    except KeyError as e:
        raise NrrdError(f"{what} {path!r}: the NRRD header has no {e.args[0]!r} field") from None
    except ValueError:
        raise NrrdError(f"{what} {path!r}: NRRD dimension / sizes ({fields.get('dimension')!r}, "
                        f"{fields.get('sizes')!r}) are not whole numbers") from None
    if len(sizes) != dim or dim < 1:
        raise NrrdError(f"{what} {path!r}: NRRD sizes {sizes} do not match dimension {dim}")
    if min(sizes) < 1:
        raise NrrdError(f"{what} {path!r}: NRRD sizes {sizes} must be positive")
    size = _type_size(fields.get("type", ""))
    if size is None:
        raise NrrdError(f"{what} {path!r}: NRRD type {fields.get('type')!r} is not supported")
    encoding = _ENCODINGS.get(fields.get("encoding", "").lower())
    if encoding is None or encoding == "bzip2":
        raise NrrdError(f"{what} {path!r}: NRRD encoding {fields.get('encoding')!r} is not supported "
                        "(raw, gzip, ascii, hex)")
    nvox = 1
    for s in sizes:
        nvox *= s
    nbytes = nvox * size
    src, offset = path, data_offset
    datafile = fields.get("datafile")
    if datafile is not None:
        if datafile.upper().startswith("LIST") or "%" in datafile or len(datafile.split()) > 1:
            raise NrrdError(f"{what} {path!r}: data file {datafile!r} (a list or pattern of files) is not "
                            "supported; convert the image to one file")
        from ._files import PathError, confined

        try:
            src = confined(os.path.dirname(os.path.abspath(path)), datafile, what="NRRD data file")
        except PathError as e:
            raise NrrdError(f"{what} {path!r}: {e}") from None
        if not os.path.isfile(src):
            raise NrrdError(f"{what} {path!r}: its data file {datafile!r} does not exist")
        offset = 0
    elif offset is None:
        raise NrrdError(f"{what} {path!r}: the NRRD header has neither data after it nor a data file")
    try:
        skip = int(fields.get("byteskip", "0"))
    except ValueError:
        raise NrrdError(f"{what} {path!r}: NRRD byte skip {fields.get('byteskip')!r} is not a number") from None
    avail = os.path.getsize(src) - offset
    shape = "x".join(map(str, sizes))
    if encoding == "gzip":
        ok, holds = nbytes + max(skip, 0) <= deflate_ratio * avail + (1 << 16), f"{avail} bytes of gzip data"
    elif encoding == "raw":
        ok, holds = nbytes + max(skip, 0) <= avail, f"{avail} bytes"
    elif encoding == "hex":
        ok, holds = 2 * nbytes <= avail, f"{avail} hex characters"
    else:
        ok, holds = nvox <= avail, f"{avail} characters of text"
    if not ok:
        raise NrrdError(f"{what} {path!r}: the NRRD header declares {nbytes} bytes of voxels ({shape} "
                        f"{fields.get('type')}, {encoding}), but the file holds {holds} (truncated, or a corrupt "
                        "or hostile header)")
    return nbytes
