"""A stand-in for the few SimpleITK calls that fireants.io.Image makes when it is given an image
(GetArrayFromImage, the geometry getters), so that bench_brain.py can hand FireANTs in-memory NumPy
arrays on a machine without SimpleITK (its wheel is 53 MB). Installed only when SimpleITK is not
importable; no file I/O is provided."""
import sys
import types

import numpy as np


class Image:
    def __init__(self, array_zyx, spacing, origin, direction):
        self.a = np.ascontiguousarray(array_zyx)
        self.sp, self.org, self.dir = tuple(spacing), tuple(origin), tuple(direction)

    def GetSpacing(self):
        return self.sp

    def GetOrigin(self):
        return self.org

    def GetDirection(self):
        return self.dir

    def GetSize(self):
        return tuple(reversed(self.a.shape))

    def GetDimension(self):
        return self.a.ndim

    def GetNumberOfComponentsPerPixel(self):
        return 1


def install():
    """True when the stand-in is in use (installed now or by an earlier call), False when the real
    SimpleITK is."""
    try:
        import SimpleITK

        return bool(getattr(SimpleITK, "_pyca_stand_in", False))
    except ImportError:
        pass
    m = types.ModuleType("SimpleITK")
    m._pyca_stand_in = True
    m.Image = Image
    m.SimpleITK = types.SimpleNamespace(Image=Image)
    m.GetArrayFromImage = lambda im: im.a

    def _no_io(*a, **k):
        raise NotImplementedError("SimpleITK stand-in: no file I/O")

    for name in ("ReadImage", "WriteImage", "GetImageFromArray", "DICOMOrient", "ReadTransform", "WriteTransform",
                 "AffineTransform"):
        setattr(m, name, _no_io)
    sys.modules["SimpleITK"] = m
    return True
