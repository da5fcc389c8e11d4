"""Transforms as ANTs and ITK files: writing pyca's registrations out, reading ANTs' and ITK's in.

    from pyca.registration import transform_files as tf
    tf.write_affine(M, "affine.mat")                # 4 x 4 RAS world matrix -> ITK/ANTs file
    M = tf.read_affine("0GenericAffine.mat")        # ... and back (.mat as ANTs writes it, or ITK text)
    tf.write_displacement(phiinv, "warp.nii.gz")    # pyca H-field -> ITK displacement field
    h = tf.read_displacement("1Warp.nii.gz")        # ITK/ANTs displacement field -> pyca H-field
    listing = tf.write_registration(res, "out/")    # what pyca lddmm writes: files + summary.json entry

Conventions (docs/transforms.md). An ITK transform maps a point of the fixed (output) space to the
moving (input) space, in ITK's LPS world (x to the left, y posterior, z superior); pyca's world is
NIfTI's RAS one, so a RAS matrix M is written as L M L with L = diag(-1, -1, 1). A displacement field
holds, at each voxel x of its grid, u(x) in world units along the LPS axes, the point going to
x + u(x); it is written as ITK writes one: NIfTI of shape (x, y, z, 1, 3), float32, intent
NIFTI_INTENT_VECTOR (1007), the grid's affine in sform and qform. (ITK 5.4 and later read a file of
intent NIFTI_INTENT_DISPVECT (1006) as holding RAS vectors and negate x and y; pyca reads both as
ITK does.) A pyca H-field holds voxel coordinates of its own grid instead, and is written with
intent NIFTI_INTENT_POINTSET, so that no ITK tool takes it for a displacement field.

Every reader checks what it reads and raises TransformFileError (a ValueError) naming the file:
a file that is not a transform, a transform type pyca does not read, a field whose shape is not a
3-D (or 2-D) vector field.
"""
from __future__ import annotations

import os
import re

import numpy as np

from .. import core as ca
from .. import io as pio
from .._files import atomic_open, atomic_path
from .transforms import vox2world

__all__ = ["TransformFileError", "LPS", "AFFINE_EXT", "write_affine", "read_affine", "read_affine_dim", "itk_text",
           "write_displacement", "read_displacement", "read_displacement_world", "displacement_to_hfield",
           "hfield_to_displacement", "is_affine_file", "registration_jobs", "write_registration",
           "registration_listing", "FORWARD_WARP", "INVERSE_WARP", "AFFINE", "AFFINE_TEXT"]

LPS = np.diag([-1.0, -1.0, 1.0])  # RAS <-> LPS (its own inverse)
AFFINE_EXT = (".mat", ".txt", ".tfm")
_INTENT_VECTOR, _INTENT_DISPVECT, _INTENT_POINTSET = 1007, 1006, 1008
# ITK affine-like types pyca reads: (matrix, translation) parameters with a centre.


def _rot3(ax, ay, az, zyx):
    """ITK's Euler3DTransform matrix: Rz Rx Ry (Rz Ry Rx when ComputeZYX)."""
    cx, sx, cy, sy, cz, sz = np.cos(ax), np.sin(ax), np.cos(ay), np.sin(ay), np.cos(az), np.sin(az)
    Rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    Ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    Rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return Rz @ Ry @ Rx if zyx else Rz @ Rx @ Ry


def _versor(v):
    """The rotation of ITK's versor (the vector part of a unit quaternion, its scalar part >= 0)."""
    x, y, z = v
    w = np.sqrt(max(0.0, 1.0 - (x * x + y * y + z * z)))
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _rot2(a):
    return np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])


# ITK transform types pyca reads: name -> {dimension: (parameter count, (parameters, extra fixed
# parameters) -> (matrix, translation))}; each is T(x) = A (x - c) + c + t with c the centre (the
# first fixed parameters).
_PARAMETRISATIONS = {
    "AffineTransform": {2: (6, lambda p, f: (p[:4].reshape(2, 2), p[4:])),
                        3: (12, lambda p, f: (p[:9].reshape(3, 3), p[9:]))},
    "MatrixOffsetTransformBase": {2: (6, lambda p, f: (p[:4].reshape(2, 2), p[4:])),
                                  3: (12, lambda p, f: (p[:9].reshape(3, 3), p[9:]))},
    "TranslationTransform": {2: (2, lambda p, f: (np.eye(2), p)), 3: (3, lambda p, f: (np.eye(3), p))},
    "Euler3DTransform": {2: None, 3: (6, lambda p, f: (_rot3(*p[:3], bool(f.size and f[0])), p[3:]))},
    "VersorRigid3DTransform": {2: None, 3: (6, lambda p, f: (_versor(p[:3]), p[3:]))},
    "Similarity3DTransform": {2: None, 3: (7, lambda p, f: (p[6] * _versor(p[:3]), p[3:6]))},
    "Euler2DTransform": {2: (3, lambda p, f: (_rot2(p[0]), p[1:])), 3: None},
    "Rigid2DTransform": {2: (3, lambda p, f: (_rot2(p[0]), p[1:])), 3: None},
    "Similarity2DTransform": {2: (4, lambda p, f: (p[0] * _rot2(p[1]), p[2:])), 3: None},
}


class TransformFileError(ValueError):
    """A file that is not a transform pyca can read (or write), named in the message."""


# ------------------------------------------------------------------------------------------------
# Affine transforms
def is_affine_file(path):
    """True for the extensions of ITK affine files (.mat, .txt, .tfm)."""
    return os.fspath(path).lower().endswith(AFFINE_EXT)


def _itk_params(matrix):
    """(parameters, fixed parameters) of ITK's AffineTransform for a 4 x 4 RAS world matrix (centre 0)."""
    M = np.asarray(matrix, dtype=np.float64)
    if M.shape != (4, 4) or not np.all(np.isfinite(M)):
        raise ValueError(f"write_affine: expected a finite 4 x 4 matrix, got {np.array2string(M)}")
    A = LPS @ M[:3, :3] @ LPS
    b = LPS @ M[:3, 3]
    return np.concatenate([A.ravel(), b]), np.zeros(3)


def write_affine(matrix, path):
    """Writes the 4 x 4 world transform `matrix` (a fixed RAS point -> its moving RAS point, pyca's and
    NIfTI's world) as an ITK affine file (AffineTransform_double_3_3 in LPS, centre 0): `.mat` as ANTs
    writes it (MATLAB v4: the 12 parameters and `fixed`), or `.txt`/`.tfm` (Insight Transform File
    V1.0, every digit of a double). Written whole or not at all."""
    path = os.fspath(path)
    p, c = _itk_params(matrix)
    low = path.lower()
    if low.endswith(".mat"):
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                fh.write(_mat4_bytes("AffineTransform_double_3_3", p) + _mat4_bytes("fixed", c))
        return
    if not low.endswith((".txt", ".tfm")):
        raise TransformFileError(f"write_affine {path!r}: give a .mat, .txt or .tfm file name")
    with atomic_open(path) as fh:
        fh.write(itk_text(p, c))


def itk_text(params, fixed, kind="AffineTransform_double_3_3"):
    """An Insight Transform File (V1.0) holding one transform."""
    fmt = " ".join
    return ("#Insight Transform File V1.0\n#Transform 0\n"
            f"Transform: {kind}\nParameters: {fmt(repr(float(x)) for x in params)}\n"
            f"FixedParameters: {fmt(repr(float(x)) for x in fixed)}\n")


def _parse_text(path):
    """[(type, parameters, fixed parameters)] of an ITK text transform file."""
    out = []
    try:
        with open(path, encoding="ascii", errors="strict") as fh:
            text = fh.read(1 << 20)
    except (UnicodeDecodeError, OSError) as e:
        raise TransformFileError(f"read_affine {path!r}: not an ITK text transform file ({e})") from None
    if not text.lstrip().startswith("#Insight Transform File"):
        raise TransformFileError(f"read_affine {path!r}: not an ITK text transform file (no '#Insight Transform File' "
                                 "line)")
    cur = None
    for line in text.splitlines():
        if ":" not in line or line.startswith("#"):
            continue
        k, v = (s.strip() for s in line.split(":", 1))
        try:
            if k == "Transform":
                cur = [v, None, None]
                out.append(cur)
            elif k == "Parameters" and cur is not None:
                cur[1] = np.array(v.split(), dtype=np.float64)
            elif k == "FixedParameters" and cur is not None:
                cur[2] = np.array(v.split(), dtype=np.float64)
        except ValueError:
            raise TransformFileError(f"read_affine {path!r}: the {k} line holds something other than numbers") from None
    return out


# MATLAB v4 (.mat as ANTs writes it): per variable five int32 (type 1000 M + 100 O + 10 P + T with M the
# byte order, 0 little-endian and 1 big-endian, P the number type, T 0 a full numeric matrix; rows;
# columns; 0, no imaginary part; the name's length with its NUL), the name, the values column by column.
_MAT4_TYPES = {0: "f8", 1: "f4", 2: "i4", 3: "i2", 4: "u2", 5: "u1"}


def _mat4_bytes(name, values):
    """One column of float64 values as a little-endian MATLAB v4 variable."""
    v = np.asarray(values, dtype="<f8").ravel()
    nm = name.encode("ascii") + b"\0"
    return np.array([0, v.size, 1, 0, len(nm)], dtype="<i4").tobytes() + nm + v.tobytes()


def _read_mat4(path):
    """{name: float64 values} of a MATLAB v4 file; TransformFileError when it is not one."""
    with open(path, "rb") as fh:
        raw = fh.read(1 << 20)
    out, pos = {}, 0
    while pos < len(raw):
        if pos + 20 > len(raw):
            raise TransformFileError(f"read_affine {path!r}: not a MATLAB v4 .mat file (truncated header)")
        for order in ("<", ">"):
            hdr = np.frombuffer(raw, dtype=order + "i4", count=5, offset=pos)
            mopt, rows, cols, imag, nlen = (int(x) for x in hdr)
            if 0 <= mopt < 2000 and (mopt // 1000 == (0 if order == "<" else 1)):
                break
        else:
            raise TransformFileError(f"read_affine {path!r}: not a MATLAB v4 .mat file (ANTs' format); MATLAB v5+ "
                                     "files are not transforms ANTs writes")
        ptype, kind = (mopt // 10) % 10, mopt % 10
        n = rows * cols
        if kind != 0 or imag != 0 or ptype not in _MAT4_TYPES or not (0 < nlen < 256) or not (0 <= n < 4096):
            raise TransformFileError(f"read_affine {path!r}: a .mat variable that is not a small real matrix")
        dt = np.dtype(order + _MAT4_TYPES[ptype])
        start = pos + 20 + nlen
        if start + n * dt.itemsize > len(raw):
            raise TransformFileError(f"read_affine {path!r}: truncated .mat file")
        name = raw[pos + 20:start].split(b"\0")[0].decode("ascii", "replace")
        out[name] = np.frombuffer(raw, dtype=dt, count=n, offset=start).astype(np.float64)
        pos = start + n * dt.itemsize
    return out


def _parse_mat(path):
    d = _read_mat4(path)
    names = [k for k in d if k != "fixed"]
    if len(names) != 1:
        raise TransformFileError(f"read_affine {path!r}: expected one transform and 'fixed' in the .mat file, got "
                                 f"{sorted(d)}")
    return [(names[0], d[names[0]], d.get("fixed"))]


def read_affine(path):
    """The 4 x 4 RAS world matrix (fixed point -> moving point) of an ITK/ANTs affine file: `.mat`
    (ANTs' MATLAB v4 files, AffineTransform_float_3_3 or _double_3_3 and `fixed`), or ITK text
    (`.txt`, `.tfm`) holding one linear ITK transform: AffineTransform, MatrixOffsetTransformBase,
    TranslationTransform, Euler3DTransform, VersorRigid3DTransform, Similarity3DTransform and the 2-D
    Euler2D / Rigid2D / Similarity2D (any centre); a 2-D one is embedded with z unchanged. Anything
    else raises TransformFileError naming the file."""
    return read_affine_dim(path)[0]


def read_affine_dim(path):
    """(read_affine(path), the transform's dimension: 2 or 3)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"read_affine: no such file: {path!r}")
    if os.path.isdir(path):
        raise TransformFileError(f"read_affine {path!r}: is a folder, not a transform file")
    items = _parse_mat(path) if path.lower().endswith(".mat") else _parse_text(path)
    if len(items) != 1:
        raise TransformFileError(f"read_affine {path!r}: holds {len(items)} transforms; pyca reads a file holding one "
                                 "(give a composite's parts as separate files, in ANTs' order)")
    kind, p, c = items[0]
    m = re.fullmatch(r"(\w+?)_(?:float|double)_(\d)(?:_(\d))?", kind or "")
    base, n = (m.group(1), int(m.group(2))) if m else (None, 0)
    if base not in _PARAMETRISATIONS or n not in (2, 3) or (m.group(3) not in (None, m.group(2))) \
            or _PARAMETRISATIONS[base][n] is None:
        raise TransformFileError(f"read_affine {path!r}: transform type {kind!r} is not one pyca reads "
                                 f"({', '.join(sorted(_PARAMETRISATIONS))}; 2-D or 3-D)")
    npar, to_matrix = _PARAMETRISATIONS[base][n]
    c = np.zeros(n) if c is None or c.size == 0 else c
    nfix = c.size
    if p is None or p.size != npar or nfix not in ((n, n + 1) if base == "Euler3DTransform" else (n,)) \
            or not (np.all(np.isfinite(p)) and np.all(np.isfinite(c))):
        raise TransformFileError(f"read_affine {path!r}: a {n}-D {base} needs {npar} finite parameters and {n} fixed "
                                 f"ones, got {0 if p is None else p.size} and {c.size}")
    A, t = to_matrix(p, c[n:])
    c = c[:n]
    A3, t3, c3 = np.eye(3), np.zeros(3), np.zeros(3)
    A3[:n, :n], t3[:n], c3[:n] = A, t, c
    # ITK: T(x) = A (x - c) + c + t, in LPS.
    M = np.eye(4)
    M[:3, :3] = LPS @ A3 @ LPS
    M[:3, 3] = LPS @ (t3 + c3 - A3 @ c3)
    if not np.all(np.abs(M) < np.finfo(np.float32).max):  # pyca maps points in float32
        raise TransformFileError(f"read_affine {path!r}: the transform's entries must fit float32 (below "
                                 f"{np.finfo(np.float32).max:.3g}), got the world matrix {M.tolist()}")
    with np.errstate(over="ignore", invalid="ignore"):
        det = np.linalg.det(M[:3, :3])
    if not abs(det) >= 1e-12:
        raise TransformFileError(f"read_affine {path!r}: the matrix is singular: {np.asarray(A).tolist()}")
    return M, n


# ------------------------------------------------------------------------------------------------
# Displacement fields
def _lps_matrix(grid):
    """3 x 3: a voxel step of `grid` (index units) -> its LPS world vector."""
    return LPS @ vox2world(grid)[:3, :3]


def hfield_to_displacement(h):
    """The ITK displacement field (a NumPy array (x, y, z, 3), float32, world units along LPS) of the
    pyca H-field `h` (any memory type; voxel coordinates of its own grid): u(i) = L W (h(i) - i),
    with W the grid's voxel-to-world matrix and L = diag(-1, -1, 1)."""
    g = h.grid()
    a = h.numpy() if h.is_on_device else np.asarray(h)
    nx, ny, nz = (int(n) for n in g.size())
    M = _lps_matrix(g).astype(np.float64)
    out = np.empty((nx, ny, nz, 3), dtype=np.float32, order="F")
    ii, jj = np.meshgrid(np.arange(nx, dtype=np.float64), np.arange(ny, dtype=np.float64), indexing="ij")
    for k in range(nz):  # a slab at a time: float64 arithmetic without a float64 copy of the whole field
        d = a[:, :, k, :].astype(np.float64)
        d[..., 0] -= ii
        d[..., 1] -= jj
        d[..., 2] -= k
        out[:, :, k, :] = d @ M.T
    return out


def displacement_to_hfield(u, grid, mem=None):
    """The pyca H-field (Field3D on `grid`, voxel coordinates of `grid`) of the ITK displacement
    field `u` ((x, y, z, 3) world units along LPS, on `grid`): h(i) = i + (L W)^-1 u(i)."""
    nx, ny, nz = (int(n) for n in grid.size())
    Minv = np.linalg.inv(_lps_matrix(grid).astype(np.float64))
    out = np.empty((nx, ny, nz, 3), dtype=np.float32, order="F")
    ii, jj = np.meshgrid(np.arange(nx, dtype=np.float64), np.arange(ny, dtype=np.float64), indexing="ij")
    for k in range(nz):
        d = np.asarray(u[:, :, k, :], dtype=np.float64) @ Minv.T
        d[..., 0] += ii
        d[..., 1] += jj
        d[..., 2] += k
        out[:, :, k, :] = d
    h = ca.Field3D.from_array(out, grid)
    return h.clone(mem) if mem is not None and int(mem) != int(ca.MEM_HOST) else h


def write_displacement(h, path):
    """Writes the pyca H-field `h` (fixed voxel -> voxel coordinates of the same grid, as pyca lddmm's
    phiinv and phi) as an ITK displacement field on h's grid (see the module's docstring): NIfTI
    (.nii, .nii.gz) as ITK writes it, or MetaImage/NRRD (with SimpleITK)."""
    g = h.grid()
    pio.write_array(hfield_to_displacement(h), g.spacing(), g.origin(), path, vector=True,
                    what="write_displacement", direction=g.direction(), intent="vector")


def _field_header(path, what):
    """(intent code, intent name, components) of a NIfTI vector file (None for other formats), after
    checking it is not a pyca H-field."""
    low = path.lower()
    if not low.endswith((".nii", ".nii.gz")):
        return None, "", None
    import nibabel as nib

    try:
        hdr = nib.load(path).header
    except Exception as e:  # noqa: BLE001
        raise TransformFileError(f"{what} {path!r}: cannot read it as NIfTI ({type(e).__name__}: {e})") from None
    code = int(hdr["intent_code"])
    name = hdr["intent_name"].tobytes().split(b"\0")[0].decode("ascii", "replace")
    shape = hdr.get_data_shape()
    if code == _INTENT_POINTSET or name.startswith("pyca H"):
        raise TransformFileError(f"{what} {path!r}: is a pyca H-field (voxel coordinates), not a displacement field; "
                                 "give the warp files pyca writes beside it (warp.nii.gz, inverse_warp.nii.gz)")
    if len(shape) < 4 or shape[-1] not in (2, 3):
        raise TransformFileError(f"{what} {path!r}: not a displacement field: expected shape (x, y, z, 1, 3) (ITK's "
                                 f"layout), got {tuple(shape)}")
    return code, name, int(shape[-1])


def read_displacement_world(path, mem=None):
    """(Field3D on the file's grid holding each voxel's displacement in pyca's RAS world units, the
    field's dimension 2 or 3) of an ITK/ANTs displacement field file. NIfTI of intent
    NIFTI_INTENT_DISPVECT holds RAS vectors (as ITK 5.4 reads it); any other intent, LPS ones."""
    path = os.fspath(path)
    what = "read_displacement"
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what}: no such file: {path!r}")
    code, _, ncomp = _field_header(path, what)
    try:
        f = pio.load_field(path)
    except pio.ImageFileError as e:
        raise TransformFileError(str(e).replace("load_field", what, 1)) from None
    if ncomp is None:  # MetaImage / NRRD: the components are LPS
        import SimpleITK as sitk

        ncomp = sitk.ImageFileReader()
        ncomp.SetFileName(path)
        ncomp.ReadImageInformation()
        ncomp = ncomp.GetNumberOfComponents()
    if mem is not None and int(mem) != int(ca.MEM_HOST):
        f = f.clone(mem)  # the checks and the conversion below run where the field will be used
    if not all(np.isfinite(float(v)) for v in ca.Sum(f)):
        raise TransformFileError(f"{what} {path!r}: the field holds NaN or infinite values")
    if not (code == _INTENT_DISPVECT and ncomp == 3):
        ca.MulC_I(f, ca.Vec3Df(-1.0, -1.0, 1.0))  # LPS -> RAS
    return f, ncomp


def read_displacement(path, mem=None):
    """The pyca H-field (Field3D on the file's grid, voxel coordinates of that grid) of an ITK/ANTs
    displacement field file: what write_displacement wrote gives back its H-field to float precision."""
    f, _ = read_displacement_world(path)
    u = np.asarray(f).copy()
    u[..., 0] *= -1.0  # RAS -> LPS
    u[..., 1] *= -1.0
    return displacement_to_hfield(u, f.grid(), mem)


# ------------------------------------------------------------------------------------------------
# A registration's transforms, as pyca lddmm, register-batch and atlas write them
# The affine is written twice: affine.mat (ANTs' own format, the one listed: ants.apply_transforms
# inverts only .mat files) and affine.txt (the same transform as ITK text, for reading by eye).
FORWARD_WARP, INVERSE_WARP, AFFINE, AFFINE_TEXT = "warp", "inverse_warp", "affine.mat", "affine.txt"


def registration_listing(ext=".nii.gz"):
    """summary.json's "transforms" entry (paths relative to the output folder, in the order
    ants.apply_transforms takes them): forward brings the moving image onto the fixed grid (and maps
    points of the fixed space into the moving one), inverse the fixed image onto the moving grid."""
    return {"forward": {"transformlist": [FORWARD_WARP + ext, AFFINE], "whichtoinvert": [False, False]},
            "inverse": {"transformlist": [AFFINE, INVERSE_WARP + ext], "whichtoinvert": [True, False]},
            "convention": "ITK/ANTs: LPS world, displacement fields in mm (docs/transforms.md)"}


def registration_jobs(affine_matrix, phiinv, phi, out_dir, ext=".nii.gz"):
    """[(path, job)] writing a registration's transforms into out_dir: the affine (fixed world ->
    moving world, 4 x 4 RAS) as ANTs' .mat and as ITK text, and the displacement fields of phiinv (the forward warp, on
    the fixed grid: moving image o (affine after phiinv)) and of phi (the inverse warp). Every program
    that writes a registration (pyca lddmm, register-batch, atlas) calls this (or write_registration),
    so that each writes the same files."""
    import functools

    M = np.eye(4) if affine_matrix is None else np.asarray(affine_matrix, float)
    return [(os.path.join(out_dir, AFFINE), functools.partial(write_affine, M, os.path.join(out_dir, AFFINE))),
            (os.path.join(out_dir, AFFINE_TEXT), functools.partial(write_affine, M, os.path.join(out_dir, AFFINE_TEXT))),
            (os.path.join(out_dir, FORWARD_WARP + ext),
             functools.partial(write_displacement, phiinv, os.path.join(out_dir, FORWARD_WARP + ext))),
            (os.path.join(out_dir, INVERSE_WARP + ext),
             functools.partial(write_displacement, phi, os.path.join(out_dir, INVERSE_WARP + ext)))]


def write_registration(affine_matrix, phiinv, phi, out_dir, ext=".nii.gz"):
    """Writes registration_jobs' files (one after the other) and returns registration_listing(ext)."""
    for _, job in registration_jobs(affine_matrix, phiinv, phi, out_dir, ext):
        job()
    return registration_listing(ext)
