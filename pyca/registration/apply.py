"""Applying transforms: images, label maps and points through a pyca registration or ANTs/ITK files.

    import pyca
    out = pyca.apply_transforms("fixed.nii.gz", "moving.nii.gz", "lddmm-out/")              # moving onto fixed
    out = pyca.apply_transforms("moving.nii.gz", "fixed_labels.nii.gz", "lddmm-out/", inverse=True,
                                interpolation="label")                                     # fixed labels onto moving
    out = pyca.apply_transforms(fixed, moving, ["1Warp.nii.gz", "0GenericAffine.mat"])   # ANTs' registration
    pts = pyca.registration.apply.transform_points(xyz, "lddmm-out/")                   # fixed space -> moving space

`transforms` is a pyca output folder (its summary.json's, or transforms.json's, "transforms" entry:
forward, or inverse with inverse=True) or a list of ANTs/ITK files in the order
ants.apply_transforms takes them (an entry "[file,1]", or (file, True), inverts an affine). As in
antsApplyTransforms, a point x of the reference grid goes through the list from its first entry to
its last (x -> t_last(... t_first(x))), and the image is sampled at the point it ends at; a
displacement field moves a point inside its grid (within half a voxel of its border) and leaves any
other unchanged; the image is 0 outside its grid (more than half a voxel beyond its border voxels).
Everything from the points to the samples runs with pyca operations, on the GPU when the arrays are
there. Conventions and files: docs/transforms.md.
"""
from __future__ import annotations

import json
import os
import re

import numpy as np

from .. import core as ca
from .. import io as pio
from . import transform_files as tf
from .inputs import LabelImage
from .parameters import DEVICES
from .transforms import affine_hfield, scratch_for, vox2world

__all__ = ["apply_transforms", "transform_points", "resolve_transforms", "load_transforms", "transform_hfield",
           "check_labels", "check_float32_labels", "check_dimensions", "resolve_device", "reference_grid", "Chain",
           "INTERPOLATIONS", "MIN_COVERAGE"]

INTERPOLATIONS = ("linear", "nearest", "label")
MIN_COVERAGE = 0.1  # a displacement field must hold at least this fraction of the reference's points


# ------------------------------------------------------------------------------------------------
# Which files, in which order
_BRACKET = re.compile(r"^\[\s*(.+?)\s*,\s*([01]|true|false)\s*\]$", re.IGNORECASE)


def resolve_transforms(transforms, inverse=False, whichtoinvert=None, what="apply_transforms"):
    """[(path, invert)] in ANTs' order. transforms: a pyca output folder (forward, or its inverse list
    with inverse=True), one file, or a list of files / "[file,1]" strings / (file, invert) pairs;
    whichtoinvert: booleans for a list of plain files, as ants.apply_transforms takes them."""
    if isinstance(transforms, (str, os.PathLike)):
        transforms = [transforms]
    items = list(transforms)
    if not items:
        raise ValueError(f"{what}: no transforms given")
    if len(items) == 1 and isinstance(items[0], (str, os.PathLike)) and os.path.isdir(items[0]):
        if whichtoinvert is not None:
            raise ValueError(f"{what}: whichtoinvert applies to a list of files; a pyca output folder's transforms "
                             "are inverted as its list says (inverse=True picks its inverse list)")
        return _folder_list(os.fspath(items[0]), inverse, what)
    if inverse:
        raise ValueError(f"{what}: inverse=True (--inverse) picks a pyca output folder's inverse transforms; for "
                         "ANTs/ITK files give the inverse list itself, in ANTs' order, with [file,1] for an affine to "
                         "invert")
    if whichtoinvert is not None and len(whichtoinvert) != len(items):
        raise ValueError(f"{what}: {len(whichtoinvert)} whichtoinvert flags for {len(items)} transforms")
    out = []
    for k, it in enumerate(items):
        inv = bool(whichtoinvert[k]) if whichtoinvert is not None else False
        if isinstance(it, tuple):
            it, inv = it[0], bool(it[1])
        it = os.fspath(it)
        m = _BRACKET.match(it)
        if m:
            it, inv = m.group(1), m.group(2).lower() in ("1", "true")
        if os.path.isdir(it):
            raise ValueError(f"{what}: {it!r} is a folder: a pyca output folder is given alone")
        out.append((it, inv))
    return out


def _folder_list(folder, inverse, what):
    for name in ("transforms.json", "summary.json"):
        p = os.path.join(folder, name)
        if os.path.isfile(p):
            try:
                with open(p) as fh:
                    entry = json.load(fh).get("transforms")
            except (OSError, ValueError, AttributeError) as e:
                raise ValueError(f"{what}: cannot read {p!r} ({e})") from None
            if entry:
                break
    else:
        raise FileNotFoundError(f"{what}: {folder!r} holds no pyca transforms (no summary.json or transforms.json "
                                "with a 'transforms' entry: a pyca lddmm, register-batch or atlas output folder)")
    d = entry.get("inverse" if inverse else "forward")
    try:
        return [(os.path.join(folder, f), bool(i)) for f, i in zip(d["transformlist"], d["whichtoinvert"], strict=True)]
    except (TypeError, KeyError, ValueError):
        raise ValueError(f"{what}: {p!r}'s 'transforms' entry is not a transformlist with whichtoinvert") from None


# ------------------------------------------------------------------------------------------------
# The files, read
class Chain(list):
    """What load_transforms returns: [(kind, value, dim, path)], in ANTs' order, with the memory type
    its fields are in (`mem`). apply_transforms and transform_points take one in place of files."""

    mem = None


def _chain(transforms, inverse, whichtoinvert, mem, what):
    if isinstance(transforms, Chain):
        if inverse or whichtoinvert is not None:
            raise ValueError(f"{what}: a loaded Chain is applied as it is (inverse and whichtoinvert apply to files)")
        if int(transforms.mem) != int(mem):
            transforms = Chain((k, v.clone(mem) if k == "field" else v, d, p) for k, v, d, p in transforms)
            transforms.mem = mem
        return transforms
    return load_transforms(resolve_transforms(transforms, inverse, whichtoinvert, what), mem, what)


def load_transforms(items, mem=None, what="apply_transforms"):
    """[(kind, value, dim, path)] for resolve_transforms' list: ('affine', 4 x 4 RAS matrix, already
    inverted where asked) or ('field', Field3D of RAS world displacements on the field's grid, in
    `mem`). Missing files and unreadable ones raise before anything is computed."""
    mem = ca.MEM_HOST if mem is None else mem
    for path, _ in items:
        if not os.path.exists(path):
            raise FileNotFoundError(f"{what}: no such transform file: {path!r}")
    chain = Chain()
    chain.mem = mem
    for path, inv in items:
        if tf.is_affine_file(path):
            M, dim = tf.read_affine_dim(path)
            chain.append(("affine", np.linalg.inv(M) if inv else M, dim, path))
        elif path.lower().endswith((".h5", ".hdf5", ".xfm")):
            raise tf.TransformFileError(f"{what} {path!r}: composite HDF5 / MNI .xfm transforms are not read by pyca; "
                                        "give the affine (.mat, .txt) and displacement fields (.nii.gz) as files")
        else:
            if inv:
                raise tf.TransformFileError(f"{what} {path!r}: a displacement field cannot be inverted on the fly (as in "
                                            "ANTs): give its inverse field (pyca's inverse_warp, ANTs' InverseWarp)")
            f, dim = tf.read_displacement_world(path, mem)
            chain.append(("field", f, dim, path))
    return chain


def check_dimensions(chain, grids, what):
    three_d = any(g.size().z > 1 for g in grids)
    for kind, _, dim, path in chain:
        if dim == 2 and three_d:
            raise ValueError(f"{what} {path!r}: a 2-D transform cannot map a 3-D image (dimension mismatch)")


# ------------------------------------------------------------------------------------------------
# Points through the chain, with pyca operations
def _inside(mask, Q, size, tmp, lo):
    """mask = 1 where the voxel coordinates Q lie within half a voxel of the grid of `size` (ITK's
    IsInsideBuffer), else 0. tmp, lo: scratch images on mask's grid."""
    mask.fill(1.0)
    for d in range(3):
        ca.Copy(tmp, Q, d)
        ca.GTEC(lo, tmp, -0.5)
        ca.Mul_I(mask, lo)
        ca.LTEC(lo, tmp, float(size[d]) - 0.5)
        ca.Mul_I(mask, lo)
    return mask


def _map_points(P, chain, what, check=True):
    """P (Field3D of RAS world points, any grid) taken through `chain` in place. check: refuse a
    displacement field that fewer than MIN_COVERAGE of the points reach."""
    g, mem = P.grid(), P.memType()
    scratch = scratch_for(P)
    Q = D = mask = tmp = lo = None
    for kind, val, _, path in chain:
        if kind == "affine":
            affine_hfield(P, val, P, scratch)
            continue
        fg = val.grid()
        if Q is None:
            Q, D = ca.Field3D(g, mem), ca.Field3D(g, mem)
            mask, tmp, lo = ca.Image3D(g, mem), ca.Image3D(g, mem), ca.Image3D(g, mem)
        affine_hfield(Q, np.linalg.inv(vox2world(fg)), P, scratch)
        ca.ApplyH(D, val, Q, ca.BACKGROUND_STRATEGY_CLAMP)
        _inside(mask, Q, tuple(fg.size()), tmp, lo)
        if check:
            frac = float(ca.Sum(mask)) / g.nVox()
            if frac < MIN_COVERAGE:
                raise ValueError(f"{what} {path!r}: the displacement field's grid (size {tuple(fg.size())}, spacing "
                                 f"{tuple(round(float(s), 4) for s in fg.spacing())}, origin "
                                 f"{tuple(round(float(s), 3) for s in fg.origin())}) holds {frac:.1%} of the points "
                                 f"to map (at least {MIN_COVERAGE:.0%} needed): this transform does not belong to "
                                 "this reference image (grid mismatch)")
        ca.Mul_I(D, mask)
        ca.Add_I(P, D)
    return P


def transform_hfield(reference_grid, image_grid, chain, mem, what="apply_transforms"):
    """The H-field on reference_grid (voxel coordinates of image_grid) that `chain` (load_transforms)
    defines: image_grid voxel of T(world point of each reference voxel)."""
    P = ca.Field3D(reference_grid, mem)
    ca.SetToIdentity(P)
    affine_hfield(P, vox2world(reference_grid), P)
    _map_points(P, chain, what)
    return affine_hfield(P, np.linalg.inv(vox2world(image_grid)), P)


# ------------------------------------------------------------------------------------------------
# Images
def reference_grid(x, what="apply_transforms", role="reference"):
    """The grid of a GridInfo, an Image3D or an image file (a NIfTI file's header only: its voxels are
    not read)."""
    if isinstance(x, ca.GridInfo):
        return x
    if isinstance(x, (str, os.PathLike)) and os.fspath(x).lower().endswith((".nii", ".nii.gz")):
        import nibabel as nib

        path = os.fspath(x)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{what}: no such {role} file: {path!r}")
        try:
            hdr = nib.load(path)
            shape = tuple(int(n) for n in hdr.shape)
            sp, org, d = pio.split_affine(hdr.affine, path, what)
        except pio.ImageFileError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure of the reader is "cannot read"
            raise pio.ImageFileError(f"{what} {path!r}: cannot read it as NIfTI ({type(e).__name__}: {e})") from None
        shape = shape + (1,) * (3 - len(shape))
        if len(shape) > 3 and any(n != 1 for n in shape[3:]):
            raise pio.ImageFileError(f"{what} {path!r}: the {role} must be a 3-D image, got shape {shape}")
        return ca.GridInfo(shape[:3], tuple(sp), tuple(org), d)
    return _as_image(x, role, what).grid()


def _as_image(x, role, what):
    if isinstance(x, ca.Image3D):
        return x
    if isinstance(x, (str, os.PathLike)):
        return pio.load_image(x)
    raise TypeError(f"{what}: {role} must be an Image3D or a file path, not {type(x).__name__}")


def resolve_device(device, what):
    d = str(device).lower()
    if d not in DEVICES:
        raise ValueError(f"{what}: device must be 'auto', 'cpu' or 'gpu', not {device!r}")
    if d == "gpu" and not ca.cuda_available():
        raise ca.CudaError(f"{what}: device 'gpu' requested but no GPU can be used: {ca.cuda_unavailable_reason()}")
    return ca.MEM_DEVICE if d == "gpu" or (d == "auto" and ca.cuda_available()) else ca.MEM_HOST


def check_labels(im, name, what="apply_transforms"):
    """The sorted label values of `im`; ValueError naming `name` when any is not an integer."""
    a = im.numpy() if im.is_on_device else np.asarray(im)
    vals = np.unique(a)
    if not np.all(np.isfinite(vals)) or not np.array_equal(vals, np.round(vals)):
        bad = vals[~np.isfinite(vals) | (vals != np.round(vals))][:3]
        raise ValueError(f"{what} {name}: interpolation 'label' needs a label map of integers, got values such as "
                         f"{', '.join(f'{v:g}' for v in bad)}")
    return vals


def apply_transforms(reference, image, transforms, inverse=False, interpolation="linear", *, whichtoinvert=None,
                     device="auto", labels=None):
    """`image` resampled onto `reference`'s grid through `transforms` (see the module's docstring), as
    ants.apply_transforms(reference, image, transformlist, whichtoinvert) does: an Image3D on the
    reference grid, in GPU memory when device is 'gpu' (or 'auto' with a GPU), else host memory. Only the
    reference's grid is used (of a NIfTI file, only its header is read).

    interpolation: 'linear' (trilinear), 'nearest' (the nearest voxel), 'label' (each label's
    indicator interpolated trilinearly, the largest wins: ANTs' genericLabel; the values must be
    integers, the result holds the same labels). reference: a GridInfo, an Image3D or a file; image: an
    Image3D or a file.
    labels: an Image3D's label values when already known (check_labels); refused beside a LabelImage.
    An integer label map whose values an Image3D (float32) cannot hold (beyond 2^24, e.g. 16777217) is given
    as a pyca.registration.inputs.LabelImage (interpolation 'nearest' or 'label'), and comes back as one,
    its values exact; such a file given by its path is refused (ValueError) rather than rounded."""
    what = "apply_transforms"
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"{what}: interpolation must be one of {', '.join(INTERPOLATIONS)}, not {interpolation!r}")
    if labels is not None and interpolation != "label":
        raise ValueError(f"{what}: labels applies to interpolation 'label', not {interpolation!r}")
    mem = resolve_device(device, what)
    rg = reference_grid(reference, what)
    table = None
    if isinstance(image, LabelImage):  # resampled as indices into its table of values (exact in float32)
        if interpolation == "linear":
            raise ValueError(f"{what}: a LabelImage is resampled with interpolation 'nearest' or 'label', not 'linear'")
        if labels is not None:  # (its values are its table's: a list given beside them would be ignored)
            raise ValueError(f"{what}: labels applies to an Image3D or a file; a LabelImage's labels are its own "
                             "values")
        img, table = image.indices()  # (table: 0 first, then the other values in increasing order)
        # the indices in the order of their values: ties go to the smallest label, as with values
        labels = np.argsort(table, kind="stable").astype(np.float64) if interpolation == "label" else None
    else:
        if isinstance(image, (str, os.PathLike)) and interpolation != "linear":
            check_float32_labels(image, what)
        img = _as_image(image, "image", what)
    if interpolation == "label" and labels is None:
        labels = check_labels(img, f"{image!r}" if isinstance(image, (str, os.PathLike)) else "(the image)", what)
    chain = _chain(transforms, inverse, whichtoinvert, mem, what)
    ig = img.grid()
    check_dimensions(chain, (rg, ig), what)
    H = transform_hfield(rg, ig, chain, mem, what)
    src = img if img.memType() == mem else img.clone(mem)
    out, mask, tmp = ca.Image3D(rg, mem), ca.Image3D(rg, mem), ca.Image3D(rg, mem)
    _inside(mask, H, tuple(ig.size()), out, tmp)
    del tmp
    if interpolation == "label":
        _generic_label(out, src, H, labels)
    else:
        ca.ApplyH(out, src, H, ca.BACKGROUND_STRATEGY_CLAMP,
                  ca.INTERP_LINEAR if interpolation == "linear" else ca.INTERP_NN)
    ca.Mul_I(out, mask)
    return out if table is None else LabelImage.from_indices(out, table, image.what)


def check_float32_labels(path, what="apply_transforms"):
    """Refuses (ValueError naming the file) an integer image file holding values float32 cannot hold
    (|v| > 2^24): as an Image3D they would be rounded to other labels (load it as a LabelImage)."""
    hdr = pio.stored_dtype(path)
    if hdr is None or hdr.kind not in "iu" or hdr.itemsize < 4:
        return
    values, _ = pio.load_labels(path)
    big = values[np.abs(values.astype(np.float64)) > (1 << 24)]
    if big.size:
        raise ValueError(f"{what} {os.fspath(path)!r}: label values such as {int(big.flat[0])} are beyond 2^24, "
                         "which an Image3D (float32) cannot hold; load it as pyca.registration.inputs.LabelImage")


def _generic_label(out, src, H, labels):
    """out = the label whose indicator, interpolated trilinearly at H, is largest (the first, in
    increasing order, among equals): ANTs' genericLabel interpolation."""
    g, mem = out.grid(), out.memType()
    ind = ca.Image3D(src.grid(), mem)
    w, best, gt = ca.Image3D(g, mem), ca.Image3D(g, mem), ca.Image3D(g, mem)
    best.fill(-1.0)
    out.fill(0.0)
    for v in labels:
        ca.EQC(ind, src, float(v))
        ca.ApplyH(w, ind, H, ca.BACKGROUND_STRATEGY_CLAMP, ca.INTERP_LINEAR)
        ca.GT(gt, w, best)
        ca.Max_I(best, w)
        # out += gt (v - out), with w free again
        ca.MulC(w, out, -1.0)
        ca.AddC_I(w, float(v))
        ca.Mul_I(w, gt)
        ca.Add_I(out, w)
    return out


# ------------------------------------------------------------------------------------------------
# Points
def transform_points(points, transforms, inverse=False, *, whichtoinvert=None, lps=False, device="auto"):
    """Points (an (n, 3) array of world coordinates, mm; RAS as NIfTI's, or ITK's LPS with lps=True)
    mapped through `transforms` as ants.apply_transforms_to_points maps them: with a pyca output
    folder, forward takes points of the fixed space into the moving space (the map that resamples the
    moving image onto the fixed grid), inverse=True the moving space into the fixed one. Returns an
    (n, 3) float64 array in the input's convention."""
    what = "transform_points"
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ValueError(f"{what}: points must be an (n, 3) array, got shape {pts.shape}")
    if not np.all(np.isfinite(pts)):
        raise ValueError(f"{what}: the points hold NaN or infinite coordinates")
    mem = resolve_device(device, what)
    chain = _chain(transforms, inverse, whichtoinvert, mem, what)
    if len(pts) == 0:
        return pts.copy()
    ras = pts * np.diag(tf.LPS) if lps else pts
    # The points as a field on an (n, 1, 1) grid: the image code path, one point per voxel.
    P = ca.Field3D.from_array(np.asfortranarray(ras.reshape(len(ras), 1, 1, 3), dtype=np.float32),
                              ca.GridInfo((len(ras), 1, 1)))
    P = P.clone(mem) if int(mem) != int(ca.MEM_HOST) else P
    _map_points(P, chain, what, check=False)
    out = (P.numpy() if P.is_on_device else np.asarray(P)).reshape(len(ras), 3).astype(np.float64)
    return out * np.diag(tf.LPS) if lps else out
