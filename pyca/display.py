"""PyCA.Display for pyca: slices of images and fields drawn with matplotlib.

``import pyca.display as display`` replaces ``import PyCA.Display as display``; the names, argument
orders and defaults are PyCA's (``DispImage``, ``GridPlot``, ``JacDetPlot``, ``Quiver``,
``EnergyPlot``, ``SaveSlice``, ``SaveThreePaneArr``, ``GenDefFrames``, ...). Arrays are indexed
[x, y, z] as ``asnp()`` gives them; a slice is shown with x down the rows, as PyCA did.

Headless-safe: importing this module on a machine without a display (no ``DISPLAY`` or
``WAYLAND_DISPLAY``, no ``MPLBACKEND``) selects matplotlib's Agg backend before pyplot is loaded, so
a script that draws while it registers runs unchanged on a cluster node; figures can then be saved
with ``plt.savefig``. ``plt.hold`` (removed in matplotlib 3, called by PyCA-era scripts) is added
back as a no-op where it is missing. Objects in device memory are copied to the host for drawing (they are not moved).
"""
from __future__ import annotations

import os
import sys

import numpy as np

from . import common
from . import core

__all__ = ["DispImage", "GridPlot", "JacDetPlot", "JacDetCMap", "Quiver", "EnergyPlot", "SaveSlice",
           "SaveThreePaneArr", "DefSeriesIter", "ExtractSliceFunc", "GenDefFrames", "SampleCMap", "hold"]


def _headless() -> bool:
    if os.environ.get("MPLBACKEND"):
        return False
    if sys.platform in ("darwin", "win32"):
        return False
    return not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _pyplot():
    """matplotlib.pyplot, with the Agg backend chosen first on a headless machine."""
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules and _headless():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


plt = _pyplot()
import matplotlib  # noqa: E402
import matplotlib.colors  # noqa: E402

_INTERACTIVE = matplotlib.get_backend().lower() not in ("agg", "pdf", "ps", "svg", "cairo", "template")
if _INTERACTIVE:
    plt.ion()  # PyCA drew interactively: results appear while the script runs


def _draw():
    """plt.draw() where there is a screen to update (a headless backend renders on savefig)."""
    if _INTERACTIVE:
        plt.draw()


def hold(*args, **kwargs):
    """Does nothing. matplotlib 3 removed ``pyplot.hold`` (axes always hold now); PyCA-era scripts
    call ``plt.hold(True)`` / ``plt.hold(False)`` between plots. Importing this module installs it as
    ``matplotlib.pyplot.hold`` where matplotlib has none, so such scripts run unchanged (a missing
    name is added; nothing of matplotlib's is replaced)."""
    return None


if not hasattr(plt, "hold"):
    plt.hold = hold


def _host_slice_array(im, sliceIdx, dim):
    """A 2-D float array of one slice of an Image3D (any memory type), [x, y] indexed."""
    sz = im.size().tolist()
    if sz[common.DIMMAP[dim]] > 1:
        im = common.ExtractSliceIm(im, sliceIdx, dim)
    return np.squeeze(im.numpy())


def DispImage(im, title=None, sliceIdx=None, dim="z", cmap="gray", newFig=True, rng=None, t=False,
              log=False):
    """Shows slice `sliceIdx` (default: the middle one) of `im` along `dim` ('x', 'y', 'z' or 0..2)
    with imshow: x down the rows (``t=True`` transposes), grey values over `rng` = [min, max] (default:
    the slice's range), on a log scale when `log`. ``newFig`` opens a figure named `title` first."""
    if not common.IsImage3D(im):
        raise TypeError(f"DispImage: expected an Image3D, not {type(im).__name__}")
    arr = _host_slice_array(im, sliceIdx, dim)
    if newFig:
        if title is None:
            plt.figure()
        else:
            plt.figure(title)
        plt.clf()
    vmin, vmax = (None, None) if rng is None else (rng[0], rng[1])
    if log:
        norm = matplotlib.colors.LogNorm(vmin=vmin, vmax=vmax)
    else:
        norm = matplotlib.colors.Normalize(vmin=vmin, vmax=vmax)
    if t:
        arr = arr.T
    img = plt.imshow(np.atleast_2d(arr), cmap=cmap, norm=norm, interpolation="nearest")
    plt.axis("tight")
    plt.axis("image")
    if title is not None:
        plt.title(title)
    plt.xticks([])
    plt.yticks([])
    _draw()
    return img


def _yaxis_down():
    ax = plt.gca()
    if not ax.yaxis_inverted():
        ax.invert_yaxis()
    _draw()


def Quiver(vf, sliceIdx=None, dim="z"):
    """Arrows of the first two components of a slice of the Field3D `vf`."""
    arr = common.ExtractSliceArrVF(vf, sliceIdx, dim)
    q = plt.quiver(np.squeeze(arr[:, :, 0]).T, np.squeeze(arr[:, :, 1]).T, scale=None)
    _yaxis_down()
    return q


def GridPlot(vf, sliceIdx=None, dim="z", every=1, isVF=True, color="g", plotBase=True, colorbase="#A0A0FF"):
    """Draws the deformed grid of a slice of `vf`: every `every`-th grid line moved by the field
    (``isVF=True``: a displacement added to the identity, in voxels) or placed at the field's values
    (``isVF=False``: an H-field); the undeformed grid in `colorbase` when `plotBase`. Axes as
    DispImage's (x down the rows)."""
    if not common.IsField3D(vf):
        raise TypeError(f"GridPlot: expected a Field3D, not {type(vf).__name__}")
    arr = np.squeeze(common.ExtractSliceArrVF(vf, sliceIdx, dim))
    if arr.ndim != 3:
        raise ValueError(f"GridPlot: the slice of a field of size {vf.size().tolist()} along {dim!r} is not 2-D")
    sz = arr.shape
    hid = np.mgrid[0:sz[0], 0:sz[1]]
    d1 = np.squeeze(hid[1, ::every, ::every])
    d2 = np.squeeze(hid[0, ::every, ::every])
    arr = arr[::every, ::every, :]
    if plotBase:
        plt.plot(d1, d2, colorbase)
        plt.plot(d1.T, d2.T, colorbase)
    if not isVF:
        d1 = np.zeros(d1.shape)
        d2 = np.zeros(d2.shape)
    # the in-plane components of the slice (x, y for dim z; the two others for dim x / y)
    a, b = [c for c in range(3) if c != common.DIMMAP[dim]]
    plt.plot(d1 + arr[:, :, b], d2 + arr[:, :, a], color)
    plt.plot((d1 + arr[:, :, b]).T, (d2 + arr[:, :, a]).T, color)
    _yaxis_down()


def JacDetCMap(jd_max=10.0, cmap="PRGn", nonpos_clr=(1.0, 0.0, 0.0, 1.0)):
    """A colormap for Jacobian determinants: values beyond the range clamp to its end colours and
    'bad' values (the log of zero or a negative determinant) are drawn in `nonpos_clr`."""
    base = matplotlib.colormaps[cmap] if isinstance(cmap, str) else cmap
    return base.with_extremes(over=base(1.0), under=base(0.0), bad=nonpos_clr)


def JacDetPlot(vf, title="Jac. Det.", jd_max=10.0, cmap="PRGn", nonpos_clr=(1.0, 0.0, 0.0, 1.0), sliceIdx=None,
               dim="z", isVF=True, newFig=False):
    """Shows the Jacobian determinant of `vf` on a log colour scale over [1/jd_max, jd_max] (1 at the
    centre of the colormap), non-positive values in `nonpos_clr`. `vf` is a Field3D (a displacement
    in world units when ``isVF``, else an H-field) or an Image3D holding the determinant. Returns the
    determinant image."""
    if common.IsField3D(vf):
        grid, mType = vf.grid(), vf.memType()
        h = core.Field3D(grid, mType)
        jacdet = core.Image3D(grid, mType)
        core.Copy(h, vf)
        if isVF:
            core.VtoH_I(h)
        core.JacDetH(jacdet, h)
        # PyCA's JacDetH is per world unit (the identity gives 1 / voxel volume): the plot shows the
        # volume ratio, so it is scaled back to voxel units here.
        core.MulC_I(jacdet, float(np.prod(grid.spacing().tolist())))
    elif common.IsImage3D(vf):
        jacdet = vf
    else:
        raise TypeError(f"JacDetPlot: expected a Field3D or an Image3D, not {type(vf).__name__}")
    DispImage(jacdet, title=title, sliceIdx=sliceIdx, dim=dim, rng=[1.0 / jd_max, jd_max],
              cmap=JacDetCMap(jd_max=jd_max, cmap=cmap, nonpos_clr=nonpos_clr), log=True, newFig=newFig)
    return jacdet


def EnergyPlot(energy, trim=0.05, legend=None):
    """Plots each energy series of `energy` (a list of lists), hiding the largest `trim` fraction of
    the last series' values (the first iterations' spikes)."""
    ttl = np.asarray(energy[-1], dtype=float)
    ntrim = int(len(ttl) * trim)
    trimval = np.sort(ttl)[-(1 + ntrim)] if len(ttl) else np.inf
    en = np.array(energy, dtype=float)
    en[en > trimval] = np.nan
    colors = ["r", "g", "b", "k", "m", "c", "y"]
    for i in range(len(en)):
        plt.plot(en[i][:], colors[i % len(colors)])
    if legend is not None:
        plt.legend(legend)
    _draw()


def SaveSlice(fname, im, sliceIdx=None, dim="z", cmap="gray", rng=None, t=True):
    """Writes one slice of `im` as an image file (PNG, ...), transposed when `t` (PyCA's default)."""
    arr = _host_slice_array(im, sliceIdx, dim)
    vmin, vmax = (None, None) if rng is None else (rng[0], rng[1])
    plt.imsave(fname, np.atleast_2d(arr.T if t else arr), cmap=cmap, vmin=vmin, vmax=vmax)


def SaveThreePaneArr(npim, outname, cmap="gray", rng=None):
    """Writes the three middle slices (x, y, z) of a 3-D array side by side as one image file."""
    sz = npim.shape
    panes = [np.squeeze(npim[sz[0] // 2, :, :]), np.squeeze(npim[:, sz[1] // 2, :]),
             np.squeeze(npim[:, :, sz[2] // 2])]
    panes = [np.atleast_2d(p) for p in panes]
    maxy = max(p.shape[0] for p in panes)
    out = np.zeros([maxy, sum(p.shape[1] for p in panes)])
    x0 = 0
    for p in panes:
        y0 = (maxy - p.shape[0]) // 2
        out[y0:y0 + p.shape[0], x0:x0 + p.shape[1]] = p
        x0 += p.shape[1]
    vmin, vmax = (None, None) if rng is None else (rng[0], rng[1])
    plt.imsave(outname, out, cmap=cmap, vmin=vmin, vmax=vmax)


def DefSeriesIter(I, V, t, func, args):
    """For each time of `t`: I deformed by the inverse of the flow of the velocity fields V up to that
    time (common.ComposeDef), passed to func(Idef, time, *args); returns the list of results."""
    grid, mType = I.grid(), I.memType()
    idef = core.Image3D(grid, mType)
    s1, s2 = core.Field3D(grid, mType), core.Field3D(grid, mType)
    out = []
    for curt in t:
        h = common.ComposeDef(V, curt, inverse=True, asVField=False, scratchV1=s1, scratchV2=s2)
        core.ApplyH(idef, I, h)
        out.append(func(idef, curt, *args))
    return out


def ExtractSliceFunc(IDef, t):
    """The middle z slice of IDef (a DefSeriesIter function)."""
    return common.ExtractSliceIm(IDef)


def GenDefFrames(I, V, t):
    """An image stacking, along z, the middle z slice of I deformed to each time of `t`."""
    slices = DefSeriesIter(I, V, t, func=ExtractSliceFunc, args=())
    grid = I.grid()
    size = grid.size()
    out = core.Image3D(core.GridInfo(core.Vec3Di(size.x, size.y, len(slices)), grid.spacing(), grid.origin()),
                       I.memType())
    for k, s in enumerate(slices):
        core.SetSubVol_I(out, s, core.Vec3Di(0, 0, k))
    return out


def SampleCMap(nSamples, cmap=None):
    """nSamples RGBA colours evenly spaced over a colormap (default jet)."""
    import matplotlib.cm

    cmap = matplotlib.colormaps["jet"] if cmap is None else cmap
    sm = matplotlib.cm.ScalarMappable(norm=matplotlib.colors.Normalize(vmin=0, vmax=nSamples), cmap=cmap)
    return sm.to_rgba(np.arange(nSamples))
