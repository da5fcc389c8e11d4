"""Image match terms of registration (used by pyca.apps.lddmm and pyca.apps.affine).

A metric compares the deformed moving image I with the fixed image J on the fixed grid and gives

    energy(I, J)        the match energy E(I, J) (a float; lower is better)
    gradient(out, I, J) the same energy, and out = (sigma^2 / 2) dE/dI(x) for every voxel

(the factor sigma^2 / 2 makes the SSD's gradient the plain difference I - J, as the LDDMM update
has always been written: b = |D phi| (I - J) grad I, times 2 / sigma^2).

- ``SSD``:  E = (1 / sigma^2) sum_x w(x) (I(x) - J(x))^2
- ``LNCC``: E = (1 / sigma^2) sum_x w(x) (1 - cc(x)), cc the local normalised cross-correlation in
  windows of 2 radius + 1 voxels, truncated to the grid and, given a support (0/1: where the images
  exist, e.g. the fixed grid's voxels within a larger working grid), to it (ca.LNCC, whose gradient is
  exact: a voxel outside the support is in no window); E is 0 for images equal up to a local affine
  change of intensity.
- ``MI``:   E = (W / sigma^2) (H(J) - MI(I, J)), MI the mutual information of the Parzen-windowed
  joint histogram (ca.MutualInformation: integer histogram, the same bits on every run and thread
  count, exact gradient), H(J) the fixed image's entropy, W the voxels (or the mask's weight): the
  conditional entropy H(J | I), 0 when J is a function of I whatever their contrasts. For images of
  different contrasts (T1 onto T2, FLAIR, CT). docs/design/mutual-information.md.

w is an optional mask on the fixed grid (1 inside, 0 outside; None: everywhere). Every call routes
by memory type, so the same metric runs on the CPU and on the GPU. docs/lddmm.md.

A metric's public interface (docs/design/registration.md): name, sigma2 (sigma^2), energy(),
gradient(), and the facts programs choose by (never by the metric's name):

- plain_difference: True when gradient(out, I, J) is exactly out = I - J at every voxel (the SSD
  without a mask), so that a solver may use its own fused kernels for it (the LDDMM solver
  transports J instead of the residual);
- plain_without_mask (on the class): True when an instance without a mask has plain_difference (the
  SSD): a program asks the class before building one (lddmm's working-grid pad);
- multimodal (on the class): True when it compares images of different contrasts (MI): no
  histogram matching or bias gain before it, and no single-contrast quality check after;
- quadratic (on the class): True when the energy is quadratic in the image (SSD): a Gauss-Newton
  step of 1 is exact;
- fused_residual (on an instance, as plain_difference: the SSD's depends on its mask; MI's is a
  class attribute): True when a solver may transport the metric's residual (the gradient image)
  through its own fused steps (the LDDMM solver's LDDMMResidualStep): MI, whose
  residual is one global table lookup per voxel, and the SSD with a mask (w (I - J)); the SSD without
  a mask and lncc keep the paths their defaults were measured on.

A new metric subclasses Metric and joins CLASSES (make_metric, METRICS).
"""
from __future__ import annotations

from .. import core as ca

__all__ = ["Metric", "SSD", "LNCC", "MI", "make_metric", "metric_class", "CLASSES", "METRICS", "DEFAULT_SIGMA",
           "DEFAULT_ALPHA", "DEFAULT_ITERATIONS", "DEFAULT_TOL", "DEFAULT_MOMENTUM"]

METRICS = ("ssd", "lncc", "mi")
# sigma and alpha used when none is given (intensities normalised to [0, 1]); chosen by the
# measurements of docs/lddmm.md ("Defaults for T1 brain MRI"; sigma: "The kernel's scale", for K
# of gain 1 at the zero frequency; alpha: "The kernel: lpow 8, alpha 0.15"); mi's by docs/performance.md,
# "Multi-modal registration".
DEFAULT_SIGMA = {"ssd": 0.003, "lncc": 0.03, "mi": 0.02}
DEFAULT_ALPHA = {"ssd": 0.15, "lncc": 0.15, "mi": 0.1}
# iteration caps per scale (4, 2, 1) when none are given (docs/lddmm.md; mi: docs/performance.md,
# "Multi-modal registration").
DEFAULT_ITERATIONS = {"ssd": (10, 150, 150), "lncc": (10, 150, 150), "mi": (10, 150, 150)}
# the stop rule's tolerance and the optimiser's momentum (pyca.registration.optimisers) when none are
# given; mi's by docs/performance.md, "Multi-modal registration" (ssd and lncc: plain descent, as measured
# in docs/lddmm.md).
DEFAULT_TOL = {"ssd": 2e-3, "lncc": 2e-3, "mi": 8e-3}
DEFAULT_MOMENTUM = {"ssd": 0.0, "lncc": 0.0, "mi": 0.8}
MI_BINS = 24  # bins per image of the MI metric (docs/lddmm.md; docs/performance.md, "Multi-modal registration")


class Metric:
    """The interface of a match term (see the module's docstring)."""

    name = None
    plain_difference = False  # gradient(out, I, J) is out = I - J everywhere
    plain_without_mask = False  # an instance without a mask has plain_difference
    multimodal = False  # compares images of different contrasts
    quadratic = False  # the energy is quadratic in the image (a Gauss-Newton step of 1 is exact)
    fused_residual = False  # a solver may transport its residual through fused steps

    def energy(self, I, J):
        raise NotImplementedError

    def gradient(self, out, I, J):
        raise NotImplementedError

    def last_gradient(self, out):
        """out = gradient(out, I, J)'s image for the I, J of the last energy() call, where the metric kept
        it from that call (True); False (out untouched) where it did not. A solver calls it only when
        neither image has changed since that energy()."""
        return False


class SSD(Metric):
    name = "ssd"
    quadratic = True
    plain_without_mask = True

    def __init__(self, grid, mem, sigma, mask=None):
        self.sigma2 = float(sigma) ** 2
        self.mask = mask
        self._d = ca.Image3D(grid, mem)

    @property
    def plain_difference(self):
        """True without a mask: gradient() is then I - J at every voxel."""
        return self.mask is None

    @property
    def fused_residual(self):
        """True with a mask: the residual w (I - J) is transported as MI's is (the same passes as the
        general path's, fused)."""
        return self.mask is not None

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


class LNCC(Metric):
    name = "lncc"

    def __init__(self, grid, mem, sigma, mask=None, radius=4, eps=1e-5, support=None):
        self.sigma2 = float(sigma) ** 2
        self.mask = mask
        self.support = support
        r = int(radius)
        if r < 1:
            raise ValueError(f"lncc: the window radius must be >= 1 voxel, got {radius}")
        self.radius = ca.Vec3Di(r, r, r if grid.size().z > 1 else 0)
        self.eps = float(eps)
        self._g = ca.Image3D(grid, mem)
        w = mask if mask is not None else support
        self.weight = float(ca.Sum(w)) if w is not None else float(grid.nVox())

    def _lncc(self, out, I, J):
        if self.support is not None:  # (a mask of the support's weights where none is given)
            mask = self.mask if self.mask is not None else self.support
            return ca.LNCC(out, I, J, mask, self.support, self.radius, self.eps)
        if self.mask is not None:
            return ca.LNCC(out, I, J, self.mask, self.radius, self.eps)
        return ca.LNCC(out, I, J, self.radius, self.eps)

    def energy(self, I, J):
        return (self.weight - self._lncc(self._g, I, J)) / self.sigma2

    def gradient(self, out, I, J):
        S = self._lncc(out, I, J)
        ca.MulC_I(out, -0.5)
        return (self.weight - S) / self.sigma2


class MI(Metric):
    name = "mi"
    multimodal = True
    fused_residual = True

    def __init__(self, grid, mem, sigma, mask=None, bins=MI_BINS, fixed_range=None, moving_range=None):
        self.sigma2 = float(sigma) ** 2
        self.mask = mask
        self.bins = int(bins)
        if not 4 <= self.bins <= 1024:
            raise ValueError(f"mi: bins must be in [4, 1024], got {bins}")
        self.fixed_range = fixed_range
        self.moving_range = moving_range
        self.grid = grid
        self.mem = mem
        self._g = ca.Image3D(grid, mem)
        self.weight = float(ca.Sum(mask)) if mask is not None else float(grid.nVox())
        self._hJ = None
        self._fixed = None

    @staticmethod
    def _range(im):
        lo, hi = ca.MinMax(im)
        lo, hi = float(lo), float(hi)
        if not hi > lo:
            hi = lo + 1.0
        return (lo, hi)

    def _setup(self, I, J):
        """Ranges (the images' own, once: energies must compare across iterations) and H(J)."""
        if self.moving_range is None:
            self.moving_range = self._range(I)
        if self.fixed_range is None:
            self.fixed_range = self._range(J)
        import numpy as np

        h = ca.Image3D(ca.GridInfo(ca.Vec3Di(self.bins, self.bins, 1)), self.mem)
        args = (J, J) + ((self.mask,) if self.mask is not None else ())
        ca.JointHistogram(h, *args, *self.fixed_range, *self.fixed_range)
        pJ = np.asarray(h.numpy(), np.float64).sum(axis=(0, 2))
        pJ = pJ[pJ > 0] / pJ.sum()
        self._hJ = float(-(pJ * np.log(pJ)).sum())

    def _mi(self, out, I, J):
        if self._hJ is None:
            self._setup(I, J)
        args = (out, I, J) + ((self.mask,) if self.mask is not None else ())
        return ca.MutualInformation(*args, self.bins, *self.moving_range, *self.fixed_range)

    def mutual_information(self, I, J):
        """MI(I, J) in nats."""
        self._kept = False
        return self._mi(self._g, I, J)

    def energy(self, I, J):
        mi = self._mi(self._g, I, J)  # (the op computes dMI/dI with the value: kept for last_gradient)
        self._kept = True
        return self.weight * (self._hJ - mi) / self.sigma2

    def gradient(self, out, I, J):
        mi = self._mi(out, I, J)
        self._kept = False
        ca.MulC_I(out, -0.5 * self.weight)
        return self.weight * (self._hJ - mi) / self.sigma2

    def last_gradient(self, out):
        if not getattr(self, "_kept", False):
            return False
        ca.MulC(out, self._g, -0.5 * self.weight)
        return True


CLASSES = {"ssd": SSD, "lncc": LNCC, "mi": MI}  # name -> class, in the order of METRICS


def metric_class(name):
    """The class of the metric called name (any case): its facts (multimodal, quadratic) without an
    instance."""
    cls = CLASSES.get(str(name).lower())
    if cls is None:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {name!r}")
    return cls


def make_metric(name, grid, mem, sigma, mask=None, radius=4, bins=MI_BINS, support=None):
    """The metric called name; support (0/1, where the images exist) truncates LNCC's windows (the other
    metrics read each voxel alone: their mask is enough)."""
    cls = metric_class(name)
    if cls is LNCC:
        return LNCC(grid, mem, sigma, mask, radius, support=support)
    if cls is MI:
        return MI(grid, mem, sigma, mask, bins)
    return cls(grid, mem, sigma, mask)
