"""PyCA's multi-scale helpers: MultiscaleManager (the grids of a coarse-to-fine schedule) and the
MultiscaleResampler classes (images down, deformations up), with PyCA's semantics.

    scales = ca.MultiscaleManager(grid)
    for f in (4, 2, 1):
        scales.addScaleLevel(f)            # kept sorted, coarsest first
    resampler = ca.MultiscaleResamplerGaussCPU(grid)   # or ...GPU / MultiscaleResamplerGauss
    for level in range(scales.nScale()):
        scales.set(level)
        resampler.setScaleLevel(scales)
        resampler.downsampleImage(I0, I0orig)     # I0 takes the current grid
        resampler.updateHField(h)                 # identity at the first level, else upsampled

Grids: level factor f gives size max(size // f, 1) and spacing scaled by size / new size, the
origin kept (PyCA's Multiscale::downScale). Downsampling blurs on the original grid with a Gaussian
of sigma sqrt(r / 2) voxels and radius 2 ceil(sigma) per axis (r = the factor between the previous
and the current grid), then resamples (trilinear, clamp, voxel centres aligned). Upsampling of an
H-field resamples its displacement in world units and turns it back into an H-field on the new
grid; a V-field is resampled as is. The *CPU and *GPU names are aliases: each call runs where its
arguments live.
"""
from __future__ import annotations

import math

from . import core

__all__ = ["Multiscale", "MultiscaleManager", "MultiscaleResampler", "MultiscaleResamplerGauss",
           "MultiscaleResamplerCPU", "MultiscaleResamplerGPU", "MultiscaleResamplerGaussCPU",
           "MultiscaleResamplerGaussGPU"]


class Multiscale:
    @staticmethod
    def downScale(grid, factor):
        """The grid `grid` downsampled by the integer `factor` (PyCA's Multiscale::downScale)."""
        f = int(factor)
        if f < 1:
            raise ValueError(f"Multiscale.downScale: factor must be a positive integer, got {factor!r}")
        size = [max(int(s) // f, 1) for s in grid.size().tolist()]
        sp = [float(p) * (float(s) / float(n)) for p, s, n in zip(grid.spacing().tolist(), grid.size().tolist(), size)]
        return core.GridInfo(core.Vec3Di(*size), core.Vec3Df(*sp), grid.origin(), grid.direction())


class MultiscaleManager:
    """The grids of a multi-scale schedule on `origGrid` (PyCA's MultiscaleManager)."""

    def __init__(self, origGrid):
        if not isinstance(origGrid, core.GridInfo):
            raise TypeError(f"MultiscaleManager: expected a GridInfo, not {type(origGrid).__name__}")
        self._org = origGrid.copy()
        self._pre = origGrid.copy()
        self._cur = origGrid.copy()
        self._factors: list[int] = []
        self._level = 0
        self._factor = core.Vec3Df(1.0, 1.0, 1.0)

    def addScaleLevel(self, downsampleFactor):
        """Adds a level downsampling by the integer factor; levels stay sorted coarsest (largest
        factor) first. A factor given twice is a ValueError."""
        f = int(downsampleFactor)
        if f != downsampleFactor or f < 1:
            raise ValueError(f"MultiscaleManager.addScaleLevel: the factor must be a positive integer, "
                             f"got {downsampleFactor!r}")
        if f in self._factors:
            raise ValueError("MultiscaleManager.addScaleLevel: cannot add multiple scale levels with the same "
                             f"downsample factor ({f})")
        self._factors.append(f)
        self._factors.sort(reverse=True)

    def _update(self):
        f = self.getScaleFactor()
        self._pre = self._cur
        self._cur = Multiscale.downScale(self._org, f)
        p, c = self._pre.size().tolist(), self._cur.size().tolist()
        self._factor = core.Vec3Df(*[float(a) / float(b) for a, b in zip(p, c)])

    def _require_levels(self, what):
        if not self._factors:
            raise ValueError(f"MultiscaleManager.{what}: no scale level (call addScaleLevel first)")

    def start(self):
        if not self._factors:
            self.addScaleLevel(1)
        self._level = 0
        self._update()

    def next(self):
        if not self.isLastScale():
            self._level += 1
            self._update()

    def set(self, level):
        """Makes `level` (clamped to the last one) current."""
        self._require_levels("set")
        level = int(level)
        if level < 0:
            raise ValueError(f"MultiscaleManager.set: level must be >= 0, got {level}")
        self._level = min(level, self.nScale() - 1)
        self._update()

    def getCurLevel(self):
        return self._level

    def nScale(self):
        return len(self._factors)

    def getScaleFactor(self):
        self._require_levels("getScaleFactor")
        return self._factors[self._level]

    def isLastScale(self):
        return self._level == self.nScale() - 1

    def isFirstScale(self):
        return self._level == 0

    def isIdentityScale(self):
        return self.getScaleFactor() == 1

    def getCurFactor(self):
        """The size ratio of the previous grid to the current one, per axis (a Vec3Df)."""
        return self._factor.copy()

    def getOrgGrid(self):
        return self._org.copy()

    def getCurGrid(self):
        return self._cur.copy()

    def getPreGrid(self):
        return self._pre.copy()

    def getOrgSize(self):
        return self._org.size()

    def getCurSize(self):
        return self._cur.size()

    def getOrgSpace(self):
        return self._org.spacing()

    def getCurSpace(self):
        return self._cur.spacing()

    def origNVox(self):
        return self._org.nVox()

    def curNVox(self):
        return self._cur.nVox()

    def origVoxelVol(self):
        return float(math.prod(self._org.spacing().tolist()))

    def curVoxelVol(self):
        return float(math.prod(self._cur.spacing().tolist()))


def _same_grid_size(a, grid):
    return tuple(a.size()) == tuple(grid.size())


class MultiscaleResampler:
    """PyCA's MultiscaleResampler with the identity filter (no smoothing before downsampling)."""

    _smooth = False

    def __init__(self, origGrid):
        if not isinstance(origGrid, core.GridInfo):
            raise TypeError(f"{type(self).__name__}: expected a GridInfo, not {type(origGrid).__name__}")
        self._orig = origGrid.copy()
        self._cur = origGrid.copy()
        self._scales = None
        self._filter = core.GaussianFilter() if self._smooth else None

    def setScaleLevel(self, scaleManager):
        """Takes the current level of `scaleManager` (call after scaleManager.set / next)."""
        if not isinstance(scaleManager, MultiscaleManager):
            raise TypeError(f"setScaleLevel: expected a MultiscaleManager, not {type(scaleManager).__name__}")
        self._scales = scaleManager
        self._cur = scaleManager.getCurGrid()
        if self._smooth and not scaleManager.isIdentityScale():
            f = scaleManager.getCurFactor().tolist()
            sig = [math.sqrt(x / 2.0) for x in f]
            rad = [2 * int(math.ceil(s)) for s in sig]
            self._filter.updateParams(self._orig.size(), core.Vec3Df(*sig), core.Vec3Di(*rad))

    def _manager(self, what):
        if self._scales is None:
            raise ValueError(f"{type(self).__name__}.{what}: call setScaleLevel(scaleManager) first")
        return self._scales

    def _check_orig(self, what, a):
        if not _same_grid_size(a, self._orig):
            raise ValueError(f"{type(self).__name__}.{what}: the input has size {tuple(a.size())}, not the original "
                             f"grid's {tuple(self._orig.size())}")

    def downsampleImage(self, sI, orgI):
        """sI <- orgI (on the original grid) on the current grid: a copy at factor 1, else smoothed
        (Gauss resamplers) and resampled. sI takes the current grid."""
        sm = self._manager("downsampleImage")
        self._check_orig("downsampleImage", orgI)
        if sm.isIdentityScale():
            sI.setGrid(self._cur)
            core.Copy(sI, orgI)
            return
        src = orgI
        if self._smooth:
            src = core.Image3D(self._orig, sI.memType())
            self._filter.filter(src, orgI, core.Image3D(self._orig, sI.memType()))
        sI.setGrid(self._cur)
        core.Resample(sI, src, core.BACKGROUND_STRATEGY_CLAMP, core.INTERP_LINEAR, True)

    def downsampleField(self, sF, orgF):
        """As downsampleImage, component by component, for a Field3D (values unchanged)."""
        sm = self._manager("downsampleField")
        self._check_orig("downsampleField", orgF)
        if sm.isIdentityScale():
            sF.setGrid(self._cur)
            core.Copy(sF, orgF)
            return
        src = orgF
        if self._smooth:
            src = core.Field3D(self._orig, sF.memType())
            tmp = core.Image3D(self._orig, sF.memType())
            comp = core.Image3D(self._orig, sF.memType())
            blurred = core.Image3D(self._orig, sF.memType())
            for c in range(3):
                core.Copy(comp, orgF, c)
                self._filter.filter(blurred, comp, tmp)
                core.Copy(src, blurred, c)
        sF.setGrid(self._cur)
        core.Resample(sF, src, core.BACKGROUND_STRATEGY_CLAMP, False)

    def upsampleImage(self, sI):
        """sI (on the previous grid) resampled onto the current grid; zero at the first level."""
        sm = self._manager("upsampleImage")
        if sm.isFirstScale():
            sI.setGrid(self._cur)
            core.SetMem(sI, 0.0)
            return
        self._check_prev("upsampleImage", sI, sm)
        im = core.Image3D(self._cur, sI.memType())
        core.Resample(im, sI, core.BACKGROUND_STRATEGY_CLAMP, core.INTERP_LINEAR, True)
        sI.setGrid(self._cur)
        core.Copy(sI, im)

    def _check_prev(self, what, a, sm):
        if not _same_grid_size(a, sm.getPreGrid()):
            raise ValueError(f"{type(self).__name__}.{what}: the input has size {tuple(a.size())}, not the previous "
                             f"level's {tuple(sm.getPreGrid().size())}")

    def updateImage(self, orgI, sI):
        """The image to use at this level: orgI itself at factor 1, else sI holding orgI downsampled."""
        sm = self._manager("updateImage")
        if sm.isIdentityScale():
            return orgI
        self.downsampleImage(sI, orgI)
        return sI

    def updateHField(self, h):
        """h (an H-field on the previous grid) carried to the current grid: the identity at the first
        level; else its displacement, in world units, resampled and made an H-field on the new grid."""
        sm = self._manager("updateHField")
        if sm.isFirstScale():
            h.setGrid(self._cur)
            core.SetToIdentity(h)
            return
        self._check_prev("updateHField", h, sm)
        tmp = core.Field3D(self._cur, h.memType())
        core.HtoV_I(h)
        core.Resample(tmp, h, core.BACKGROUND_STRATEGY_CLAMP, False)
        h.setGrid(self._cur)
        core.Copy(h, tmp)
        core.VtoH_I(h)

    def updateVField(self, v):
        """v (a V-field on the previous grid) resampled onto the current grid; zero at the first level."""
        sm = self._manager("updateVField")
        if sm.isFirstScale():
            v.setGrid(self._cur)
            core.SetMem(v, 0.0)
            return
        self._check_prev("updateVField", v, sm)
        tmp = core.Field3D(self._cur, v.memType())
        core.Resample(tmp, v, core.BACKGROUND_STRATEGY_CLAMP, False)
        v.setGrid(self._cur)
        core.Copy(v, tmp)


class MultiscaleResamplerGauss(MultiscaleResampler):
    """PyCA's MultiscaleResamplerGauss: a Gaussian blur on the original grid before downsampling."""

    _smooth = True


MultiscaleResamplerCPU = MultiscaleResamplerGPU = MultiscaleResampler
MultiscaleResamplerGaussCPU = MultiscaleResamplerGaussGPU = MultiscaleResamplerGauss
