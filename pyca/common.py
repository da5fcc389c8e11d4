"""PyCA.Common for pyca: NumPy conversion, random test volumes, file input/output and slice helpers.

``import pyca.common as common`` replaces ``import PyCA.Common as common``; the names, argument orders
and defaults are PyCA's. Arrays are indexed [x, y, z] (x fastest in memory), as ``asnp()`` gives them.

Differences from PyCA (see docs/pyca-migration.md):
  * LoadITKImage / SaveITKImage / LoadITKField / SaveITKField read and write through pyca.io
    (nibabel: NIfTI; SimpleITK when installed: MetaImage, NRRD, ...) instead of a compiled ITK.
  * GaussianBlur here is PyCA's NumPy helper (scipy.ndimage.gaussian_filter on an array); the pyca
    operation on Image3D/Field3D is pyca.GaussianBlur.
"""
from __future__ import annotations

import errno
import math
import numbers
import os

import numpy as np

from . import core
from .managed import ManagedField3D, ManagedImage3D, MemoryManager, ThreadMemoryManager  # noqa: F401

__all__ = [
    "GetNumberOfCUDADevices", "ManagedImage3D", "ManagedField3D", "MemoryManager", "ThreadMemoryManager",
    "IsImage3D", "IsField3D", "ImFromNPArr", "FieldFromNPArr", "AsNPCopy", "CopyDataFromNPArr", "RandImage",
    "RandUnifImage", "RandField", "LoadITKImage", "LoadITKField", "SaveITKImage", "SaveITKField", "ReadGrid",
    "LoadPNGImage", "SavePNGImage", "TukeyWindow1D", "TukeyWindow", "AddWhiteNoise", "GaussianBlur", "DrawEllipse",
    "DIMMAP", "ExtractROI", "ExtractSliceArr", "ExtractSliceIm", "ExtractSliceArrIm", "ExtractSliceVF",
    "ExtractSliceArrVF", "ComposeDef", "SaveSliceStack", "Distribute", "Mkdir_p",
    "CheckCUDAError", "DebugHere", "GetOuterFrame", "PyCAVersion", "PyCAVersionMajor", "PyCAVersionMinor",
    "PyCACommit", "PyCABranch",
]

GetNumberOfCUDADevices = core.GetNumberOfCUDADevices

_ONE = (1.0, 1.0, 1.0)
_ZERO = (0.0, 0.0, 0.0)


def _vec3f(v, what):
    if isinstance(v, numbers.Real):
        return core.Vec3Df(float(v), float(v), float(v))
    try:
        vals = [float(x) for x in v]
    except TypeError:
        raise TypeError(f"{what} must be a Vec3Df or 3 numbers, not {type(v).__name__}") from None
    if len(vals) == 2:  # PyCA scripts pass 2-D spacings as [sx, sy]
        vals.append(1.0 if what.endswith("sp") else 0.0)
    if len(vals) != 3:
        raise ValueError(f"{what} must have 3 components, got {len(vals)}")
    return core.Vec3Df(*vals)


def _size3(sz, what="sz"):
    vals = [int(x) for x in np.atleast_1d(np.asarray(sz)).tolist()]
    if len(vals) == 2:
        vals.append(1)
    if len(vals) != 3 or min(vals) < 1:
        raise ValueError(f"{what} must give 2 or 3 positive sizes, got {sz!r}")
    return tuple(vals)


def _grid(shape, sp, orig):
    return core.GridInfo(core.Vec3Di(*shape), _vec3f(sp, "sp"), _vec3f(orig, "orig"))


# ------------------------------------------------------------------------------------------------
# Type tests and NumPy conversion
def IsImage3D(ob) -> bool:
    return isinstance(ob, core.Image3D)


def IsField3D(ob) -> bool:
    return isinstance(ob, core.Field3D)


def ImFromNPArr(arr, mType=core.MEM_HOST, sp=_ONE, orig=_ZERO):
    """A new Image3D holding a copy of `arr` (2-D arrays give a grid with z = 1), in memory mType,
    with spacing `sp` and origin `orig`."""
    arr3d = np.atleast_3d(np.asarray(arr))
    if arr3d.ndim != 3:
        raise ValueError(f"ImFromNPArr: expected a 2-D or 3-D array, got shape {np.shape(arr)}")
    im = core.Image3D(_grid(arr3d.shape, sp, orig), core.MEM_HOST)
    im.asnp()[:, :, :] = arr3d
    im.toType(mType)
    return im


def _ComponentArraysFromField(arr):
    arr = np.asarray(arr)
    if arr.ndim == 4:
        if arr.shape[3] != 3:
            raise ValueError("Expected X-by-Y-by-Z-by-3 array")
        return arr[:, :, :, 0], arr[:, :, :, 1], arr[:, :, :, 2]
    if arr.ndim == 3 and arr.shape[2] in (2, 3):
        ax = np.atleast_3d(arr[:, :, 0])
        ay = np.atleast_3d(arr[:, :, 1])
        az = np.atleast_3d(arr[:, :, 2]) if arr.shape[2] == 3 else np.zeros(ax.shape)
        return ax, ay, az
    raise ValueError(f"Expected X-by-Y-by-Z-by-3 or X-by-Y-by-2 array, got shape {arr.shape}")


def FieldFromNPArr(arr, mType=core.MEM_HOST, sp=_ONE, orig=_ZERO):
    """A new Field3D from an X-by-Y-by-Z-by-3 array (or X-by-Y-by-2 / X-by-Y-by-3 for 2-D; a 2-D field
    given with 2 components gets z components 0)."""
    ax, ay, az = _ComponentArraysFromField(arr)
    f = core.Field3D(_grid(ax.shape, sp, orig), core.MEM_HOST)
    fx, fy, fz = f.asnp()
    fx[:, :, :] = ax
    fy[:, :, :] = ay
    fz[:, :, :] = az
    f.toType(mType)
    return f


def AsNPCopy(indata):
    """A NumPy copy of an Image3D (float32, shape (sx, sy, sz)) or a Field3D (float64, shape
    (sx, sy, sz, 3)), from any memory type (the object itself is not moved). The dtypes are PyCA's:
    its AsNPCopy copied an image's float32 array and filled a new float64 array for a field."""
    if IsImage3D(indata):
        return indata.numpy()
    if IsField3D(indata):
        return indata.numpy().astype(np.float64)
    raise TypeError(f"AsNPCopy: expected an Image3D or a Field3D, not {type(indata).__name__}")


def CopyDataFromNPArr(out, arrIn):
    """Copies array data into an existing Image3D / Field3D of the same size (any memory type)."""
    if IsImage3D(out):
        arr3d = np.atleast_3d(np.asarray(arrIn))
        if tuple(arr3d.shape) != tuple(out.size()):
            raise ValueError(f"CopyDataFromNPArr: out and arrIn must have compatible sizes: "
                             f"{arr3d.shape} != {tuple(out.size())}")
        out.copy_from(core.Image3D.from_array(np.asfortranarray(arr3d, dtype=np.float32)))
    elif IsField3D(out):
        ax, ay, az = _ComponentArraysFromField(arrIn)
        if tuple(ax.shape) != tuple(out.size()):
            raise ValueError(f"CopyDataFromNPArr: out and arrIn must have compatible sizes: "
                             f"{ax.shape} != {tuple(out.size())}")
        full = np.stack([ax, ay, az], axis=-1)
        out.copy_from(core.Field3D.from_array(np.asfortranarray(full, dtype=np.float32)))
    else:
        raise TypeError("CopyDataFromNPArr: expected `out` to be Image3D or Field3D")


# ------------------------------------------------------------------------------------------------
# Random volumes (NumPy's global generator, as PyCA: seed it with np.random.seed)
def _blur(arr, gSig):
    if gSig > 0:
        from scipy import ndimage

        arr = ndimage.gaussian_filter(arr, gSig, mode="nearest")
    return arr


_RAND_NAMES_GEN = ("nSig", "gSig", "NonNeg", "mType", "sp", "orig")  # PyCA.ImageGen's positional order
_RAND_NAMES_COMMON = ("mType", "sp", "orig", "NonNeg", "nSig", "gSig")  # PyCA.Common's positional order


def _rand_args(what, args, kw, names_common, names_gen):
    """PyCA had two positional orders for the random volumes: PyCA.Common's (sz, mType, sp, ...)
    and PyCA.ImageGen's (sz, nSig, gSig, NonNeg, mType, ...). A second positional argument that is an
    int (a memory type: MEM_HOST, MEM_DEVICE, ...) selects the first, a float the second."""
    names = names_common
    if args and isinstance(args[0], float):
        names = names_gen
    if len(args) > len(names):
        raise TypeError(f"{what}: too many positional arguments")
    out = dict(zip(names, args))
    for k, v in kw.items():
        if k in out:
            raise TypeError(f"{what}: got multiple values for argument {k!r}")
        if k not in names_common:
            raise TypeError(f"{what}: unexpected keyword argument {k!r}")
        out[k] = v
    return out


def RandImage(sz, *args, **kw):
    """RandImage(sz, mType=MEM_HOST, sp=(1,1,1), orig=(0,0,0), NonNeg=False, nSig=1.0, gSig=0.0):
    an Image3D of size sz (2 or 3 sizes) of Gaussian noise with standard deviation nSig, smoothed by a
    Gaussian of gSig voxels when gSig > 0, made non-negative (absolute value) when NonNeg.
    PyCA.ImageGen's positional order RandImage(sz, nSig, gSig, NonNeg, mType, sp, orig) works too
    (a float second argument selects it)."""
    a = _rand_args("RandImage", args, kw, _RAND_NAMES_COMMON, _RAND_NAMES_GEN)
    shape = _size3(sz)
    arr = _blur(a.get("nSig", 1.0) * np.random.randn(*shape), a.get("gSig", 0.0))
    if a.get("NonNeg", False):
        arr = np.abs(arr)
    return ImFromNPArr(arr, mType=a.get("mType", core.MEM_HOST), sp=a.get("sp", _ONE), orig=a.get("orig", _ZERO))


def RandUnifImage(sz, lbound=0.0, ubound=1.0, mType=core.MEM_HOST, sp=_ONE, orig=_ZERO):
    """An Image3D of size sz of values uniform in [lbound, ubound)."""
    shape = _size3(sz)
    arr = np.random.uniform(lbound, ubound, size=shape)
    return ImFromNPArr(arr, mType=mType, sp=sp, orig=orig)


def RandField(sz, *args, **kw):
    """RandField(sz, mType=MEM_HOST, sp=(1,1,1), orig=(0,0,0), NonNeg=False, nSig=1.0, gSig=0.0):
    a Field3D of size sz of Gaussian noise (std nSig per component), smoothed by a Gaussian of gSig
    voxels when gSig > 0, absolute values when NonNeg. On a 2-D size the z components are 0, as
    PyCA's. PyCA.ImageGen's order RandField(sz, nSig, gSig, NonNeg, mType, sp, orig) works too."""
    a = _rand_args("RandField", args, kw, _RAND_NAMES_COMMON, _RAND_NAMES_GEN)
    shape = _size3(sz)
    nSig, gSig = a.get("nSig", 1.0), a.get("gSig", 0.0)
    comps = [_blur(nSig * np.random.randn(*shape), gSig) for _ in range(3)]
    if shape[2] == 1:
        comps[2] = np.zeros(shape)
    arr = np.stack(comps, axis=-1)
    if a.get("NonNeg", False):
        arr = np.abs(arr)
    return FieldFromNPArr(arr, mType=a.get("mType", core.MEM_HOST), sp=a.get("sp", _ONE), orig=a.get("orig", _ZERO))


# ------------------------------------------------------------------------------------------------
# Files (through pyca.io)
def _io():
    try:
        from . import io as pio
    except ModuleNotFoundError as e:  # pragma: no cover - pyca.io is part of the package
        raise NotImplementedError("pyca.common file input/output needs pyca.io") from e
    return pio


def _metaimage_file(fname):
    from . import _metaimage

    return _metaimage.is_metaimage(str(fname))


def _load_metaimage(fname, cls, mType, what):
    """A MetaImage as PyCA (ITK) read it: origin, spacing and direction as written in the file."""
    from . import _metaimage

    fname = str(fname)
    if not os.path.exists(fname):
        raise FileNotFoundError(f"{what}: no such file: {fname!r}")
    try:
        data, sp, org, direction = _metaimage.read(fname, what)
    except _metaimage.MetaImageError as e:
        raise _io().ImageFileError(str(e)) from None
    if cls is core.Image3D and data.ndim != 3:
        raise _io().ImageFileError(f"{what} {fname!r}: expected a scalar image, got {data.shape[-1]} channels "
                                   "(a vector field? use LoadITKField)")
    if cls is core.Field3D:
        if data.ndim != 4 or data.shape[3] not in (2, 3):
            raise _io().ImageFileError(f"{what} {fname!r}: expected a vector field of 3 (or 2) channels, got data of "
                                       f"shape {data.shape}")
        if data.shape[3] == 2:
            data = np.concatenate([data, np.zeros(data.shape[:3] + (1,), dtype=data.dtype)], axis=3)
    try:
        grid = core.GridInfo(tuple(int(n) for n in data.shape[:3]), tuple(sp), tuple(org), direction)
    except ValueError as e:
        raise _io().ImageFileError(f"{what} {fname!r}: {e}") from None
    obj = cls.from_array(np.asfortranarray(data, dtype=np.float32), grid)
    if int(mType) != int(core.MEM_HOST):
        obj = obj.clone(mType)
    return obj


def _save_metaimage(obj, fname, channels):
    from . import _metaimage

    g = obj.grid()
    _metaimage.write(str(fname), obj.numpy(), g.spacing().tolist(), g.origin().tolist(), g.direction(),
                     channels=channels, what="SaveITKField" if channels > 1 else "SaveITKImage")


def LoadITKImage(fname, mType=core.MEM_HOST):
    """Reads an image file. MetaImage (.mhd, .mha) as PyCA read it: the grid's origin, spacing and
    direction are the file's as written (pyca's own reader; SimpleITK is not needed). NIfTI
    (.nii/.nii.gz) through pyca.io (pyca's RAS+ world), NRRD with SimpleITK installed."""
    if _metaimage_file(fname):
        return _load_metaimage(fname, core.Image3D, mType, "LoadITKImage")
    return _io().load_image(str(fname), mType)


def LoadITKField(fname, mType=core.MEM_HOST):
    """Reads a vector field file (as LoadITKImage, three components per voxel)."""
    if _metaimage_file(fname):
        return _load_metaimage(fname, core.Field3D, mType, "LoadITKField")
    return _io().load_field(str(fname), mType)


def SaveITKImage(im, fname, useCompression=False):
    """Writes an Image3D (any memory type); the format follows the file name's extension. MetaImage
    (.mhd with a .raw beside it, or .mha) as PyCA wrote it: the grid's origin, spacing and direction
    as they are (a fresh grid gives Offset = its origin and the identity TransformMatrix).
    useCompression is accepted for PyCA compatibility (a .gz name compresses NIfTI)."""
    if _metaimage_file(fname):
        if not IsImage3D(im):
            raise TypeError(f"SaveITKImage: expected an Image3D, not {type(im).__name__}")
        return _save_metaimage(im, fname, 1)
    _io().save_image(im, str(fname))


def SaveITKField(f, fname, useCompression=False):
    """Writes a Field3D (any memory type); see SaveITKImage (MetaImage: 3 channels per voxel)."""
    if _metaimage_file(fname):
        if not IsField3D(f):
            raise TypeError(f"SaveITKField: expected a Field3D, not {type(f).__name__}")
        return _save_metaimage(f, fname, 3)
    _io().save_field(f, str(fname))


def ReadGrid(fname):
    """The GridInfo of an image file (MetaImage: as written, as LoadITKImage)."""
    if _metaimage_file(fname):
        from . import _metaimage

        data, sp, org, direction = _metaimage.read(str(fname), "ReadGrid")
        return core.GridInfo(tuple(int(n) for n in data.shape[:3]), tuple(sp), tuple(org), direction)
    pio = _io()
    if hasattr(pio, "read_grid"):
        return pio.read_grid(str(fname))
    return pio.load_image(str(fname)).grid()


def LoadPNGImage(fname, mType=core.MEM_HOST, sp=_ONE, orig=_ZERO):
    from matplotlib import image as mpimg

    arr = mpimg.imread(fname)
    if arr.ndim == 3:  # colour: mean of the colour channels
        arr = arr[:, :, :3].mean(axis=2)
    return ImFromNPArr(arr, mType=mType, sp=sp, orig=orig)


def SavePNGImage(im, fname, rng=None, cmap="gray"):
    """A 2-D image (z = 1, or any one axis of size > 1 dropped) as a PNG picture through `cmap`. A 3-D
    image is refused (matplotlib would take 3 or 4 slices for RGB(A) colour channels): save a slice."""
    from matplotlib import image as mpimg

    arr = np.squeeze(AsNPCopy(im))
    if arr.ndim != 2:
        size = " x ".join(str(int(n)) for n in im.size())
        raise ValueError(f"SavePNGImage: a PNG holds one 2-D picture; the image is {size} voxels ({fname!r}: save "
                         "a slice, e.g. with pyca.display.SaveSlice, or use NIfTI)")
    vmin, vmax = (None, None) if rng is None else (rng[0], rng[1])
    mpimg.imsave(fname, arr, cmap=cmap, vmin=vmin, vmax=vmax)


# ------------------------------------------------------------------------------------------------
# NumPy helpers of PyCA.Common
def TukeyWindow1D(N, alpha):
    tw = np.ones([1, N])
    b = 0.5 - 0.5 * np.cos(np.pi * np.arange(alpha) / (alpha - 1.0))
    tw[0, 0:alpha] = b
    tw[0, -1:-1 - alpha:-1] = b
    return tw


def TukeyWindow(imSz, alpha):
    tx = TukeyWindow1D(imSz[0], alpha)
    if len(imSz) < 2:
        return tx
    ty = TukeyWindow1D(imSz[1], alpha)
    tw = np.dot(tx.T, ty)
    if len(imSz) > 2:
        tz = TukeyWindow1D(imSz[2], alpha)
        tz = np.transpose(np.expand_dims(tz, 2), (2, 0, 1))
        tw = np.tile(np.expand_dims(tw, 2), (1, 1, imSz[2])) * np.tile(tz, (imSz[0], imSz[1], 1))
    return tw


def AddWhiteNoise(im, sig):
    if sig > 0:
        im = im + np.random.normal(0.0, sig, im.shape)
    return im


def GaussianBlur(im, sig, mode="nearest"):
    """PyCA's NumPy helper: scipy.ndimage.gaussian_filter(im, sig, mode=mode) on an ARRAY."""
    from scipy import ndimage

    return ndimage.gaussian_filter(im, sig, mode=mode)


def DrawEllipse(sz, center, a, b, val=1.0):
    """A 2-D array of size sz, `val` inside the axis-aligned ellipse of semi-axes a (along x) and b
    (along y) centred at `center` (array indices), 0 outside."""
    x, y = np.meshgrid(np.arange(sz[0]), np.arange(sz[1]), indexing="ij")
    inside = ((x - center[0]) / float(a)) ** 2 + ((y - center[1]) / float(b)) ** 2 <= 1.0
    return np.where(inside, float(val), 0.0)


DIMMAP = {0: 0, "x": 0, 1: 1, "y": 1, 2: 2, "z": 2}


def ExtractROI(im, extent):
    """The sub-image [x0..x1] x [y0..y1] x [z0..z1] (inclusive) of an Image3D, extent =
    (x0, x1, y0, y1, z0, z1), on the same spacing and origin."""
    start = core.Vec3Di(extent[0], extent[2], extent[4])
    size = core.Vec3Di(extent[1] - extent[0] + 1, extent[3] - extent[2] + 1, extent[5] - extent[4] + 1)
    roi = core.Image3D(core.GridInfo(size, im.spacing(), im.origin(), im.grid().direction()), im.memType())
    core.SubVol(roi, im, start)
    return roi


def ExtractSliceArr(arr, sliceIdx=None, dim="z"):
    """Slice `sliceIdx` (default: the middle one) of a NumPy array along dim, squeezed."""
    arr = np.atleast_3d(arr)
    d = DIMMAP[dim]
    if sliceIdx is None:
        sliceIdx = arr.shape[d] // 2
    index = [slice(None)] * 3
    index[d] = slice(sliceIdx, sliceIdx + 1)
    return np.squeeze(arr[tuple(index)])


def _slice_of(obj, cls, sliceIdx, dim):
    sz = list(obj.size())
    d = DIMMAP[dim]
    if sliceIdx is None:
        sliceIdx = sz[d] // 2
    start = [0, 0, 0]
    start[d] = int(sliceIdx)
    sz[d] = 1
    out = cls(core.GridInfo(core.Vec3Di(*sz), obj.spacing(), obj.origin(), obj.grid().direction()), obj.memType())
    core.SubVol(out, obj, core.Vec3Di(*start))
    return out


def ExtractSliceIm(im, sliceIdx=None, dim="z"):
    """Slice `sliceIdx` (default: middle) of an Image3D along dim, as an Image3D of that dim size 1."""
    return _slice_of(im, core.Image3D, sliceIdx, dim)


def ExtractSliceArrIm(im, sliceIdx=None, dim="z"):
    return AsNPCopy(ExtractSliceIm(im, sliceIdx, dim))


def ExtractSliceVF(vf, sliceIdx=None, dim="z"):
    """Slice `sliceIdx` (default: middle) of a Field3D along dim, as a Field3D."""
    return _slice_of(vf, core.Field3D, sliceIdx, dim)


def ExtractSliceArrVF(vf, sliceIdx=None, dim="z"):
    return AsNPCopy(ExtractSliceVF(vf, sliceIdx, dim))


def ComposeDef(V, t, asVField=False, inverse=False, scratchV1=None, scratchV2=None):
    """Composes the velocity fields V[0], V[1], ... up to (non-integer) time t: the deformation
    (H-field) h = (id + V[s]) o ... o (id + V[0]) (or its inverse), or h - id when asVField."""
    vlen = len(V)
    grid = V[0].grid()
    mType = V[0].memType()
    t = min(t, vlen)
    t_int = int(math.floor(t))
    t_frac = t - t_int
    h = core.Field3D(grid, mType)
    if scratchV1 is None:
        scratchV1 = core.Field3D(grid, mType)
    core.SetToIdentity(h)
    for s in range(t_int):
        if inverse:
            core.ComposeHVInv(scratchV1, h, V[s])
        else:
            core.ComposeVH(scratchV1, V[s], h)
        core.Copy(h, scratchV1)
    if t_frac != 0.0:
        if scratchV2 is None:
            scratchV2 = core.Field3D(grid, mType)
        core.Copy(scratchV2, V[t_int])
        core.MulC_I(scratchV2, core.Vec3Df(t_frac, t_frac, t_frac))
        if inverse:
            core.ComposeHVInv(scratchV1, h, scratchV2)
        else:
            core.ComposeVH(scratchV1, scratchV2, h)
        core.Copy(h, scratchV1)
    if asVField:
        core.SetToIdentity(scratchV1)
        core.Sub_I(h, scratchV1)
    return h


def SaveSliceStack(fname, imList, sliceIdx=None, dim="z"):
    """Stacks one slice of each image of imList (or the images themselves when they are slices)
    along dim and writes the stack with SaveITKImage."""
    d = DIMMAP[dim]
    sz = list(imList[0].size())
    vsz = list(sz)
    vsz[d] = len(imList)
    vol = core.Image3D(core.GridInfo(core.Vec3Di(*vsz)), imList[0].memType())
    for i, im in enumerate(imList):
        if sz[d] > 1:
            im = ExtractSliceIm(im, sliceIdx, dim)
        start = [0, 0, 0]
        start[d] = i
        core.SetSubVol_I(vol, im, core.Vec3Di(*start))
    SaveITKImage(vol, fname)


def Distribute(nEl, size, rank):
    """The indices of the nEl elements that process `rank` of `size` handles (contiguous blocks)."""
    if size < 1:
        raise ValueError("size cannot be zero")
    if size == 1:
        return list(range(nEl))
    if nEl < size:
        return [rank] if rank < nEl else []
    nProcEl = nEl // size
    remaining = nEl % size
    if rank < remaining:
        nProcEl += 1
        startEl = nProcEl * rank
    else:
        startEl = (nProcEl + 1) * remaining + nProcEl * (rank - remaining)
    return list(range(startEl, startEl + nProcEl))


def Mkdir_p(dir):  # noqa: A002 - PyCA's argument name
    try:
        os.makedirs(dir)
    except OSError as exc:
        if exc.errno != errno.EEXIST:
            raise


# ------------------------------------------------------------------------------------------------
# PyCA.Common's debugging and version helpers
def GetOuterFrame():
    """(file, line, function) of the caller's caller."""
    import inspect

    frame = inspect.currentframe()
    try:
        outer = inspect.getouterframes(frame)[2][0]
        return inspect.getframeinfo(outer)[:3]
    finally:
        del frame


def CheckCUDAError(msg=""):
    """Raises pyca.CudaError, naming the calling file, line and function and `msg`, if GPU work queued on
    pyca's current stream failed (PyCA.Common's CheckCUDAError); returns at once without a GPU."""
    from .legacy import CheckCUDAError as _check

    fname, line, func = GetOuterFrame()
    _check(fname, line, f"{func}: {msg}")


def DebugHere():
    """Starts the debugger at the caller's line (IPython's when installed, else pdb)."""
    import sys

    frame = sys._getframe(1)
    try:
        from IPython.core.debugger import Pdb
    except ImportError:
        import pdb

        pdb.Pdb().set_trace(frame)
    else:
        Pdb().set_trace(frame)


def _version_parts():
    from . import __version__

    parts = [int(p) if p.isdigit() else 0 for p in __version__.split(".")[:2]]
    return (parts + [0, 0])[:2]


def PyCAVersion():
    """The version of the library behind this PyCA API: 'v' and pyca's version (e.g. 'v0.1.0')."""
    from . import __version__

    return "v" + __version__


def PyCAVersionMajor():
    return _version_parts()[0]


def PyCAVersionMinor():
    return _version_parts()[1]


def PyCACommit():
    """'': pyca does not record the source commit of a build (use PyCAVersion)."""
    return ""


def PyCABranch():
    """Where this build comes from: 'pyca' (PyCA returned its git branch)."""
    return "pyca"


# PyCA.Common's NumPy file helpers and extension dispatch (PyCA's PyCAIO)
from ._common_io import (  # noqa: E402
    LoadField, LoadFieldNPZ, LoadImage, LoadImageDCM, LoadImageNPY, LoadImageNPZ, SaveField, SaveFieldNPZ, SaveImage,
    SaveImageNPY, SaveImageNPZ)

__all__ += ["SaveImageNPY", "LoadImageNPY", "SaveImageNPZ", "LoadImageNPZ", "SaveFieldNPZ", "LoadFieldNPZ",
            "LoadImageDCM", "SaveImage", "LoadImage", "SaveField", "LoadField"]
