"""Image match terms of registration (used by pyca.apps.lddmm and pyca.apps.affine).

A metric compares the deformed moving image I with the fixed image J on the fixed grid and gives

    energy(I, J)        the match energy E(I, J) (a float; lower is better)
    gradient(out, I, J) the same energy, and out = (sigma^2 / 2) dE/dI(x) for every voxel

(the factor sigma^2 / 2 makes the SSD's gradient the plain difference I - J, as the LDDMM update
has always been written: b = |D phi| (I - J) grad I, times 2 / sigma^2).

- ``SSD``:  E = (1 / sigma^2) sum_x w(x) (I(x) - J(x))^2
- ``LNCC``: E = (1 / sigma^2) sum_x w(x) (1 - cc(x)), cc the local normalised cross-correlation in
  windows of 2 radius + 1 voxels (ca.LNCC, whose gradient is exact); E is 0 for images equal up to
  a local affine change of intensity.

w is an optional mask on the fixed grid (1 inside, 0 outside; None: everywhere). Every call routes
by memory type, so the same metric runs on the CPU and on the GPU. docs/lddmm.md.
"""
from __future__ import annotations

from .. import core as ca

__all__ = ["SSD", "LNCC", "make_metric", "METRICS", "DEFAULT_SIGMA", "DEFAULT_ALPHA"]

METRICS = ("ssd", "lncc")
# sigma and alpha used when none is given (intensities normalised to [0, 1]); chosen by the
# measurements of docs/lddmm.md ("Defaults for T1 brain MRI").
DEFAULT_SIGMA = {"ssd": 0.05, "lncc": 1.0}
DEFAULT_ALPHA = {"ssd": 1.0, "lncc": 2.0}


class SSD:
    name = "ssd"

    def __init__(self, grid, mem, sigma, mask=None):
        self.sigma2 = float(sigma) ** 2
        self.mask = mask
        self._d = ca.Image3D(grid, mem)

    @property
    def fused(self):
        """True when the solver may use its own fused SSD path (no mask)."""
        return self.mask is None

    def energy(self, I, J):
        ca.Sub(self._d, I, J)
        if self.mask is not None:
            ca.Mul_I(self._d, self.mask)
            return ca.Dot(self._d, self._d) / self.sigma2
        return ca.Sum2(self._d) / self.sigma2

    def gradient(self, out, I, J):
        ca.Sub(out, I, J)
        if self.mask is not None:
            ca.Mul_I(out, self.mask)
        return ca.Sum2(out) / self.sigma2  # w is 0 or 1: sum w d^2 = sum (w d)^2


class LNCC:
    name = "lncc"
    fused = False

    def __init__(self, grid, mem, sigma, mask=None, radius=4, eps=1e-5):
        self.sigma2 = float(sigma) ** 2
        self.mask = mask
        r = int(radius)
        if r < 1:
            raise ValueError(f"lncc: the window radius must be >= 1 voxel, got {radius}")
        self.radius = ca.Vec3Di(r, r, r if grid.size().z > 1 else 0)
        self.eps = float(eps)
        self._g = ca.Image3D(grid, mem)
        self.weight = float(ca.Sum(mask)) if mask is not None else float(grid.nVox())

    def _lncc(self, out, I, J):
        if self.mask is not None:
            return ca.LNCC(out, I, J, self.mask, self.radius, self.eps)
        return ca.LNCC(out, I, J, self.radius, self.eps)

    def energy(self, I, J):
        return (self.weight - self._lncc(self._g, I, J)) / self.sigma2

    def gradient(self, out, I, J):
        S = self._lncc(out, I, J)
        ca.MulC_I(out, -0.5)
        return (self.weight - S) / self.sigma2


def make_metric(name, grid, mem, sigma, mask=None, radius=4):
    name = str(name).lower()
    if name == "ssd":
        return SSD(grid, mem, sigma, mask)
    if name == "lncc":
        return LNCC(grid, mem, sigma, mask, radius)
    raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {name!r}")
