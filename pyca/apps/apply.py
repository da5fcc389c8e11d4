"""`pyca apply`: images, label maps and points through a registration (pyca's or ANTs').

    pyca apply --reference FIXED --input MOVING --transforms lddmm-out/ --output moved.nii.gz
    pyca apply --reference MOVING --input fixed_labels.nii.gz --transforms lddmm-out/ --inverse \\
               --interpolation label --output labels_on_moving.nii.gz
    pyca apply --reference F --input M --transforms r_1Warp.nii.gz r_0GenericAffine.mat --output out.nii.gz
    pyca apply --points fixed_points.csv --transforms lddmm-out/ --output moving_points.csv

The work is pyca.registration.apply's (docs/transforms.md). Every input is read and checked before
anything is written; the output appears whole or not at all. Exit status: 0 done, 2 bad input (one
line naming the file; nothing written), 1 a failure while working.
"""
from __future__ import annotations

import csv
import os
import sys
import time

import numpy as np

from .._docs import page
from ..registration.parameters import DEVICES

__all__ = ["add_parser", "cmd_apply", "read_points", "write_points"]

_EPILOG = """\
T is a pyca output folder (pyca lddmm, register-batch's OUT/NAME, atlas's subjects/NAME) or ANTs/ITK
transform files in the order ants.apply_transforms takes them ([FILE,1] inverts an affine). Forward:
the input is in the moving space and comes onto the reference (fixed) grid; --inverse: fixed-space
input onto a moving-space reference. Points (--points, a CSV with x, y, z columns, mm, NIfTI's RAS
or ITK's LPS with --lps) go from the fixed space into the moving space, as
ants.apply_transforms_to_points takes them (--inverse: the other way). Exit status: 0 done, 1 failed
while working, 2 bad input (nothing written).
Documentation (files and conventions): """ + page("transforms")


def add_parser(sub):
    p = sub.add_parser("apply", help="apply a registration (pyca's or ANTs') to an image, a label map or points",
                       description="Resample --input onto --reference through --transforms, or map --points.",
                       epilog=_EPILOG)
    p.add_argument("--reference", metavar="REF", help="the image whose grid the output takes")
    p.add_argument("--input", metavar="IMG", help="the image (or label map) to resample")
    p.add_argument("--points", metavar="IN.csv", help="a CSV of points (columns x, y, z) to map instead of an image")
    p.add_argument("--transforms", "-t", nargs="+", required=True, metavar="T",
                   help="a pyca output folder, or ANTs/ITK files in ANTs' order ([FILE,1]: invert an affine)")
    p.add_argument("--inverse", action="store_true", help="a pyca folder's inverse transforms (fixed onto moving)")
    p.add_argument("--interpolation", choices=["linear", "nearest", "label"], default="linear",
                   help="linear (default), nearest, or label (per-label linear, the largest wins; integer maps)")
    p.add_argument("--lps", action="store_true", help="the points are in ITK's LPS world (default: NIfTI's RAS)")
    p.add_argument("--device", choices=DEVICES, default="auto", help="default %(default)s")
    p.add_argument("--output", "-o", required=True, metavar="OUT", help="the output image (or CSV with --points)")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    p.set_defaults(func=cmd_apply)
    return p


class _InputError(Exception):
    pass


def _fail(msg, code=2):
    print(f"pyca apply: error: {msg}", file=sys.stderr)
    return code


def _check_output(out, image, what="--output"):
    """Before any work: the output's folder exists, it is no folder, and (an image) its type is one pyca writes."""
    from .. import io as pio

    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise _InputError(f"{what} {out!r}: folder {folder!r} does not exist")
    if os.path.isdir(out):
        raise _InputError(f"{what} {out!r} is a folder; give a file name")
    if image:
        pio.check_writable(out, what)


def _check_not_an_input(out, inputs, what="--output"):
    """The output replaces no input file: inputs, [(flag, path)] (paths may be None or missing)."""
    if not os.path.exists(out):
        return
    for flag, path in inputs:
        if path is not None and os.path.exists(path) and os.path.samefile(out, path):
            raise _InputError(f"{what} {out!r} is the {flag} file {os.fspath(path)!r}; write the result to another "
                              "file (an input is never replaced)")


def _output_dtype(interpolation, labels):
    """The written type of a float-stored input (an integer-stored one is read as a LabelImage and keeps its
    type): 'label' writes int32 when the label values fit it; 'nearest' and 'linear' write float32."""
    if interpolation == "label":
        lo, hi = (float(labels[0]), float(labels[-1])) if len(labels) else (0.0, 0.0)
        return np.dtype(np.int32) if -2**31 <= lo and hi < 2**31 else np.dtype(np.float32)
    return np.dtype(np.float32)


# ------------------------------------------------------------------------------------------------
# Points
def read_points(path):
    """(header, rows, (n, 3) float64 array of x, y, z) of a CSV file; _InputError naming the file."""
    if not os.path.isfile(path):
        raise _InputError(f"--points: no such file: {path!r}")
    try:
        with open(path, newline="") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise _InputError(f"--points {path!r}: cannot read it as CSV ({e})") from None
    if not rows:
        raise _InputError(f"--points {path!r}: empty file (expected a header with columns x, y, z)")
    header = [h.strip() for h in rows[0]]
    low = [h.lower() for h in header]
    if not all(c in low for c in ("x", "y", "z")):
        raise _InputError(f"--points {path!r}: no x, y, z columns in its header ({', '.join(header) or 'empty'})")
    cols = [low.index(c) for c in ("x", "y", "z")]
    data = [r for r in rows[1:] if any(v.strip() for v in r)]
    pts = np.empty((len(data), 3))
    for i, r in enumerate(data):
        try:
            pts[i] = [float(r[c]) for c in cols]
        except (ValueError, IndexError):
            raise _InputError(f"--points {path!r}: row {i + 2} has no number in its x, y or z column: "
                              f"{','.join(r)!r}") from None
    if not np.all(np.isfinite(pts)):
        raise _InputError(f"--points {path!r}: NaN or infinite coordinates")
    return header, data, cols, pts


def write_points(path, header, data, cols, pts):
    """The CSV with its x, y, z columns replaced by `pts` (other columns kept), written whole."""
    from .._files import atomic_open

    with atomic_open(path, newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r, p in zip(data, pts):
            r = list(r) + [""] * (len(header) - len(r))
            for c, v in zip(cols, p):
                r[c] = repr(float(v))
            w.writerow(r)


# ------------------------------------------------------------------------------------------------
def cmd_apply(a):
    from .. import core as ca
    from .. import io as pio
    from ..registration import apply as pa
    from ..registration.inputs import LabelImage

    say = (lambda *x: None) if a.quiet else (lambda *x: print(*x, flush=True))
    errors = (ValueError, TypeError, OSError, pio.ImageFileError, ca.CudaError, _InputError)
    t0 = time.perf_counter()
    try:
        _check_output(a.output, image=not a.points)
        items = pa.resolve_transforms(a.transforms, a.inverse, what="--transforms")
        folders = [os.path.join(t, n) for t in a.transforms if os.path.isdir(t)
                   for n in ("summary.json", "transforms.json")]
        _check_not_an_input(a.output, [("--input", a.input), ("--reference", a.reference), ("--points", a.points)]
                            + [("--transforms", p) for p, _ in items] + [("--transforms", p) for p in folders])
        if a.points:
            if a.reference or a.input or a.interpolation != "linear":
                raise _InputError("--points maps points: --reference, --input and --interpolation do not apply")
        elif a.lps:
            raise _InputError("--lps says how --points' coordinates are written; it does not apply to an image (its "
                              "header gives its orientation)")
        if a.points:
            header, data, cols, pts = read_points(a.points)
            chain = pa.load_transforms(items, pa.resolve_device(a.device, "pyca apply"), "--transforms")
        else:
            if not a.reference or not a.input:
                raise _InputError("give --reference and --input (or --points)")
            for flag, path in (("--reference", a.reference), ("--input", a.input)):
                if not os.path.exists(path):
                    raise _InputError(f"{flag}: no such file: {path!r}")
            ref = pa.reference_grid(a.reference, "--reference")
            labels = None
            if a.interpolation != "linear" and (pio.stored_dtype(a.input) or np.dtype(np.float32)).kind in "iu":
                img = LabelImage.load(a.input, f"--input {a.input!r}")  # integers as stored, exact at any size
                dtype = img.numpy().dtype
            else:
                img = pio.load_image(a.input)
                labels = pa.check_labels(img, repr(a.input), "--input") if a.interpolation == "label" else None
                dtype = _output_dtype(a.interpolation, labels if labels is not None else [])
            mem = pa.resolve_device(a.device, "pyca apply")
            chain = pa.load_transforms(items, mem, "--transforms")
            pa.check_dimensions(chain, (ref, img.grid()), "--transforms")
    except errors as e:
        return _fail(e)
    try:
        if a.points:
            out = pa.transform_points(pts, chain, lps=a.lps, device=a.device)
            write_points(a.output, header, data, cols, out)
            say(f"pyca apply: {len(pts)} points mapped through {len(chain)} transform(s) -> {a.output} "
                f"({time.perf_counter() - t0:.2f} s)")
            return 0
        res = pa.apply_transforms(ref, img, chain, interpolation=a.interpolation, device=a.device, labels=labels)
        desc = f"pyca apply ({a.interpolation})"
        if isinstance(res, LabelImage):
            pio.save_labels(res, None, a.output, description=desc, dtype=dtype)
        else:
            pio.save_image(res, a.output, description=desc, dtype=dtype)
    except errors as e:  # a grid that the transforms do not cover, found while mapping
        return _fail(e)
    say(f"pyca apply: {a.input} onto {a.reference}'s grid through {len(chain)} transform(s), {a.interpolation} "
        f"-> {a.output} ({np.dtype(dtype).name}, {time.perf_counter() - t0:.2f} s)")
    return 0
