"""PyCA.Common's file helpers beside LoadITKImage & co. (PyCA's PyCAIO): NumPy .npy / .npz files of
images and fields and the extension-dispatching LoadImage / SaveImage / LoadField / SaveField.

The .npz layout is PyCA's: arrays ``data`` ([x, y, z] for an image, [x, y, z, 3] for a field),
``origin`` and ``spacing`` (3 numbers each), so files written by PyCA load here and back. A grid whose
direction is not the identity (an oblique or flipped scan, which PyCA's grids could not hold) also
writes ``direction`` (3 x 3, its columns the axes' world directions), read back here (PyCA's own
loader ignores it) rather than dropped. Exported by pyca.common.
"""
from __future__ import annotations

import os

import numpy as np

from . import core

__all__ = ["SaveImageNPY", "LoadImageNPY", "SaveImageNPZ", "LoadImageNPZ", "SaveFieldNPZ", "LoadFieldNPZ",
           "LoadImageDCM", "SaveImage", "LoadImage", "SaveField", "LoadField"]


def _common():
    from . import common

    return common


def _vec3(npz, key, fname, what):
    try:
        v = np.asarray(npz[key], dtype=np.float64).ravel()
    except KeyError:
        raise ValueError(f"{what}: {fname!r} has no {key!r} array (not a PyCA .npz file)") from None
    if v.shape != (3,) or not np.all(np.isfinite(v)):
        raise ValueError(f"{what}: {fname!r}: {key} must be 3 finite numbers, got {v.tolist()}")
    return core.Vec3Df(*v.tolist())


def _save_npz(obj, fname, useCompression):
    """data, origin, spacing (PyCA's layout) and, when not the identity, direction."""
    g = obj.grid()
    save = np.savez_compressed if useCompression else np.savez
    extra = {}
    d = np.asarray(g.direction(), dtype=np.float64)
    if not np.array_equal(d, np.eye(3)):
        extra["direction"] = d
    save(fname, data=obj.numpy(), origin=g.origin().tolist(), spacing=g.spacing().tolist(), **extra)


def _with_direction(obj, npz, fname, what):
    """obj with the file's direction (when it has one: 3 x 3 finite, invertible)."""
    if "direction" not in npz:
        return obj
    d = np.asarray(npz["direction"], dtype=np.float64)
    if d.shape != (3, 3) or not np.all(np.isfinite(d)) or abs(np.linalg.det(d)) < 1e-6:
        raise ValueError(f"{what}: {fname!r}: direction must be an invertible 3 x 3 matrix, got {d.tolist()}")
    g = obj.grid()
    obj.setGrid(core.GridInfo(g.size(), g.spacing(), g.origin(), d))
    return obj


def SaveImageNPY(Im, fname):
    """Writes the voxels of an Image3D (any memory type) as a .npy array [x, y, z] (no spacing/origin)."""
    np.save(fname, Im.numpy())


def LoadImageNPY(fname, mType=core.MEM_HOST):
    """An Image3D (unit spacing, zero origin) from a .npy array of 2 or 3 dimensions."""
    return _common().ImFromNPArr(np.load(fname, allow_pickle=False), mType=mType)


def SaveImageNPZ(Im, fname, useCompression=True):
    """Writes an Image3D as PyCA's .npz: data [x, y, z], origin, spacing (and direction, when not the
    identity)."""
    _save_npz(Im, fname, useCompression)


def LoadImageNPZ(fname, mType=core.MEM_HOST):
    """An Image3D from PyCA's .npz (data, origin, spacing)."""
    with np.load(fname, allow_pickle=False) as npz:
        sp, org = _vec3(npz, "spacing", fname, "LoadImageNPZ"), _vec3(npz, "origin", fname, "LoadImageNPZ")
        if "data" not in npz:
            raise ValueError(f"LoadImageNPZ: {fname!r} has no 'data' array (not a PyCA .npz file)")
        im = _with_direction(_common().ImFromNPArr(npz["data"], mType=core.MEM_HOST, sp=sp, orig=org), npz, fname,
                             "LoadImageNPZ")
    im.toType(mType)
    return im


def SaveFieldNPZ(v, fname, useCompression=True):
    """Writes a Field3D as PyCA's .npz: data [x, y, z, 3], origin, spacing (and direction, when not the
    identity)."""
    _save_npz(v, fname, useCompression)


def LoadFieldNPZ(fname, mType=core.MEM_HOST):
    """A Field3D from PyCA's .npz (data [x, y, z, 3], origin, spacing)."""
    with np.load(fname, allow_pickle=False) as npz:
        sp, org = _vec3(npz, "spacing", fname, "LoadFieldNPZ"), _vec3(npz, "origin", fname, "LoadFieldNPZ")
        if "data" not in npz:
            raise ValueError(f"LoadFieldNPZ: {fname!r} has no 'data' array (not a PyCA .npz file)")
        f = _with_direction(_common().FieldFromNPArr(npz["data"], mType=core.MEM_HOST, sp=sp, orig=org), npz, fname,
                            "LoadFieldNPZ")
    f.toType(mType)
    return f


def LoadImageDCM(fname, mType=core.MEM_HOST):
    """PyCA read a DICOM series with pydicom; pyca does not (convert it to NIfTI first, e.g. dcm2niix)."""
    raise NotImplementedError(f"LoadImageDCM: pyca does not read DICOM ({fname!r}); convert it to NIfTI "
                              "(e.g. with dcm2niix) and use LoadITKImage")


def _ext(fname):
    return os.path.splitext(str(fname))[1].lower()


def SaveImage(Im, fname, useCompression=True):
    """Writes an Image3D by extension: .npy, .npz, .png, else as SaveITKImage (NIfTI, MetaImage, ...)."""
    ext, c = _ext(fname), _common()
    if ext == ".npy":
        return SaveImageNPY(Im, fname)
    if ext == ".npz":
        return SaveImageNPZ(Im, fname, useCompression=useCompression)
    if ext == ".png":
        return c.SavePNGImage(Im, fname)
    return c.SaveITKImage(Im, fname, useCompression=useCompression)


def LoadImage(fname, mType=core.MEM_HOST):
    """Reads an Image3D by extension: .npy, .npz, .png, .dcm (refused), else as LoadITKImage."""
    ext, c = _ext(fname), _common()
    if ext == ".npy":
        return LoadImageNPY(fname, mType=mType)
    if ext == ".npz":
        return LoadImageNPZ(fname, mType=mType)
    if ext == ".png":
        return c.LoadPNGImage(fname, mType=mType)
    if ext == ".dcm":
        return LoadImageDCM(fname, mType=mType)
    return c.LoadITKImage(fname, mType=mType)


def SaveField(v, fname, useCompression=True):
    """Writes a Field3D by extension: .npz, else as SaveITKField (.npy is refused, as in PyCA)."""
    ext = _ext(fname)
    if ext == ".npy":
        raise ValueError("SaveField: the .npy field format is not implemented (PyCA had none); use .npz")
    if ext == ".npz":
        return SaveFieldNPZ(v, fname, useCompression=useCompression)
    return _common().SaveITKField(v, fname, useCompression=useCompression)


def LoadField(fname, mType=core.MEM_HOST):
    """Reads a Field3D by extension: .npz, else as LoadITKField (.npy is refused, as in PyCA)."""
    ext = _ext(fname)
    if ext == ".npy":
        raise ValueError("LoadField: the .npy field format is not implemented (PyCA had none); use .npz")
    if ext == ".npz":
        return LoadFieldNPZ(fname, mType=mType)
    return _common().LoadITKField(fname, mType=mType)
