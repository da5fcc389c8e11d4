"""Linear (rigid or affine) image registration, built from pyca operations; the first stage of
``pyca lddmm``.

    from pyca.apps import affine
    res = affine.register(fixed, moving, kind="affine", metric="ssd")
    res.matrix        # 4 x 4: fixed world point -> moving world point (x_m = A x_f + b)
    res.hfield(mem)   # Field3D on the fixed grid: the moving grid's voxel coordinates of every voxel
    affine.write_itk(res.matrix, "affine.txt")

The transform maps world points of the fixed image to world points of the moving image, as ITK's
and ANTs' transforms do (the moving image is resampled as moving(T(x))). It is parameterised about
the fixed image's centre of mass c: T(x) = A (x - c) + c + t, initialised with A = I and t the
difference of the centres of mass (moving - fixed). Each scale (coarse to fine: ResampleAA, then
one voxel of Gaussian smoothing) takes Levenberg-damped Gauss-Newton steps on (A, t) (rigid: a
rotation vector, applied as exp([w]x) A, and t) for the match term of pyca.registration.metrics (SSD or
LNCC): with r = dE/dI the metric's image gradient, g = (grad moving) o T the moving image's gradient
at the mapped points (central differences of the interpolated image, 0.1 voxel either side: the
derivative of what the energy samples) and J_k = dW/dtheta_k the Jacobian images (g_i (x - c)_j and
g_i; rigid: (A (x - c)) x g and g_i), the gradient is sum r J_k and the matrix sum J_k J_l. The step,
measured as the largest displacement it causes in the fixed image's box, doubles after an accepted
step and halves after a rejected one (the energy must fall); a scale ends when an accepted step
moves less than 1/100 voxel, the energy's relative decrease over the last 5 iterations is below
`tol`, or at its iteration cap. Every operation routes by memory type,
so the same code runs on the CPU and on the GPU. Conventions and the ITK text format: docs/lddmm.md.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import core as ca
from ..registration import parameters
from ..registration.metrics import MI_BINS, make_metric
from ..registration.transforms import LINEAR_KINDS as KINDS
from ..registration.transforms import affine_hfield, center_of_mass, centred_affine, coarse_grid, rotation, scratch_for
from ..registration.transforms import vox2world
from ._device import wait

# vox2world, center_of_mass, affine_hfield and scratch_for are pyca.registration.transforms' (also
# importable from here, where they lived first).
__all__ = ["register", "AffineResult", "STAGE_SCALES", "STAGE_ITERATIONS", "vox2world", "center_of_mass",
           "affine_hfield", "scratch_for", "write_itk", "read_itk", "KINDS"]

# The schedule of the linear stage before a deformable registration (pyca lddmm, pyca register).
STAGE_SCALES, STAGE_ITERATIONS = (4, 2), (60, 30)



@dataclass
class AffineResult:
    """What register() returns."""

    matrix: np.ndarray  # 4 x 4, fixed world -> moving world
    kind: str
    fixed_grid: object
    moving_grid: object
    scales: list = field(default_factory=list)  # per scale: scale, iterations, energies, stop
    seconds: float = 0.0

    def voxel_matrix(self):
        """4 x 4: fixed voxel index -> moving voxel index. Entries within 1e-9 of an integer are that
        integer: the identity between one grid and itself (or a flip) stays exact, so no voxel
        centre lands a rounding error outside the moving grid (a zero background would drop it)."""
        M = np.linalg.inv(vox2world(self.moving_grid)) @ self.matrix @ vox2world(self.fixed_grid)
        r = np.round(M)
        return np.where(np.abs(M - r) < 1e-9, r, M)

    def hfield(self, mem, src=None, out=None, scratch=None):
        """Field3D on the fixed grid: moving voxel coordinates of each fixed voxel (of src(x) when an
        H-field src on the fixed grid is given: the affine after src). out: written when given;
        scratch: see affine_hfield."""
        out = out if out is not None else ca.Field3D(self.fixed_grid, mem)
        return affine_hfield(out, self.voxel_matrix(), src, scratch)

    def summary(self):
        return {"kind": self.kind, "matrix_world": self.matrix.tolist(), "seconds": self.seconds,
                "scales": self.scales}


def identity(fixed_grid, moving_grid):
    return AffineResult(np.eye(4), "none", fixed_grid, moving_grid)


class _Scale:
    """Arrays of one scale (allocated once)."""

    def __init__(self, F, Mv, mask, metric, radius, c, rigid, bins=MI_BINS):
        gf, gm, mem = F.grid(), Mv.grid(), F.memType()
        self.F, self.Mv, self.mask, self.c = F, Mv, mask, c
        self.dims = 2 if gm.size().z == 1 else 3
        self.Wp, self.Wm = ca.Image3D(gf, mem), ca.Image3D(gf, mem)
        self.grad_to_world = np.zeros((3, 4))
        self.grad_to_world[:, :3] = np.linalg.inv(vox2world(gm)[:3, :3]).T
        self.metric = make_metric(metric, gf, mem, 1.0, mask, radius, bins)
        self.H, self.G, self.P = ca.Field3D(gf, mem), ca.Field3D(gf, mem), ca.Field3D(gf, mem)
        self.W, self.r, self.pj = ca.Image3D(gf, mem), ca.Image3D(gf, mem), ca.Image3D(gf, mem)
        self.tmpF = ca.Field3D(gf, mem)
        self.J = [ca.Image3D(gf, mem) for _ in range(6 if rigid else 12)]
        self.scratch = scratch_for(self.H)
        # P(x) = world(x) - c
        Wf = vox2world(gf)
        Wf[:3, 3] -= c
        affine_hfield(self.P, Wf, None, self.scratch)
        self.vox = np.linalg.inv(vox2world(gm))
        self.Wf = vox2world(gf)

    def warp(self, T):
        affine_hfield(self.H, self.vox @ T @ self.Wf, None, self.scratch)
        ca.ApplyH(self.W, self.Mv, self.H, ca.BACKGROUND_STRATEGY_CLAMP, ca.INTERP_LINEAR)

    def energy(self, T):
        self.warp(T)
        return self.metric.energy(self.W, self.F)

    def gradient(self, T, A, rigid):
        """(E, gradient, Gauss-Newton matrix sum_x J_k J_l) at T = (A, t) in the parameters of `rigid`
        or affine (the gradient up to the positive factor 2 / sigma^2)."""
        self.warp(T)
        E = self.metric.gradient(self.r, self.W, self.F)
        # g = (grad moving) o T: central differences of the interpolated moving image, +-delta voxel
        # around T(x) (the derivative of what the energy samples, not of a smoothed stand-in).
        delta = 0.1
        for i in range(self.dims):
            ca.Copy(self.G, self.H)
            ca.Copy(self.pj, self.H, i)
            ca.AddC_I(self.pj, delta)
            ca.Copy(self.G, self.pj, i)
            ca.ApplyH(self.Wp, self.Mv, self.G, ca.BACKGROUND_STRATEGY_CLAMP, ca.INTERP_LINEAR)
            ca.AddC_I(self.pj, -2 * delta)
            ca.Copy(self.G, self.pj, i)
            ca.ApplyH(self.Wm, self.Mv, self.G, ca.BACKGROUND_STRATEGY_CLAMP, ca.INTERP_LINEAR)
            ca.Sub_I(self.Wp, self.Wm)
            ca.MulC_I(self.Wp, 1.0 / (2 * delta))
            ca.Copy(self.tmpF, self.Wp, i)
        if self.dims == 2:
            ca.SetMem(self.pj, 0.0)
            ca.Copy(self.tmpF, self.pj, 2)
        affine_hfield(self.G, self.grad_to_world, self.tmpF, self.scratch)  # voxel -> world gradient
        # Jacobian images J_k = dW/dtheta_k: affine (A row-major, then t): g_i P_j and g_i; rigid
        # (rotation vector, then t): (A P x g)_k and g_i.
        J = self.J
        if rigid:
            affine_hfield(self.tmpF, np.hstack([A, np.zeros((3, 1))]), self.P, self.scratch)  # q = A P
            q = [ca.Image3D(self.F.grid(), self.F.memType()) for _ in range(3)]
            g = [ca.Image3D(self.F.grid(), self.F.memType()) for _ in range(3)]
            for d in range(3):
                ca.Copy(q[d], self.tmpF, d)
                ca.Copy(g[d], self.G, d)
            for k, (a, b) in enumerate(((1, 2), (2, 0), (0, 1))):  # (q x g)_k = q_a g_b - q_b g_a
                ca.Mul(J[k], q[a], g[b])
                ca.Mul(self.pj, q[b], g[a])
                ca.Sub_I(J[k], self.pj)
            for i in range(3):
                ca.Copy(J[3 + i], self.G, i)
        else:
            for i in range(3):
                ca.Copy(J[9 + i], self.G, i)
                for j in range(3):
                    ca.Copy(self.pj, self.P, j)
                    ca.Mul(J[3 * i + j], J[9 + i], self.pj)
        n = len(J)
        grad = np.array([ca.Dot(self.r, J[k]) for k in range(n)])
        H = np.zeros((n, n))
        for k in range(n):
            for m in range(k, n):
                H[k, m] = H[m, k] = ca.Dot(J[k], J[m])
        return E, grad, H


def register(fixed, moving, kind="affine", *, metric="ssd", radius=None, mask=None, scales=(4, 2),
             iterations=(100, 50), tol=1e-4, init=None, bins=None):
    """Rigid or affine registration of `moving` onto `fixed` (Image3D, same memory type, any two grids,
    intensities comparable: normalise first, as pyca.apps.lddmm does). mask: optional 0/1 Image3D on the fixed
    grid (the metric counts only its voxels). init: optional 4 x 4 starting matrix (default: the
    centres of mass aligned). radius (metric lncc, default 2) and bins (metric mi, default MI_BINS): given
    with another metric, refused (ValueError). Returns an AffineResult."""
    if kind not in KINDS:
        raise ValueError(f"affine: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    given = {"radius": radius, "bins": bins}
    parameters.check_applies(dict(given, metric=metric), parameters.AFFINE_DECLARED, "affine",
                             {k for k, v in given.items() if v is not None})
    radius, bins = 2 if radius is None else radius, MI_BINS if bins is None else bins
    gf, gm, mem = fixed.grid(), moving.grid(), fixed.memType()
    if kind == "none":
        return identity(gf, gm)
    t0 = time.perf_counter()
    two_d = gf.size().z == 1
    cf = center_of_mass(fixed)
    cm = center_of_mass(moving)
    A = np.eye(3)
    t = cm - cf
    if init is not None:
        Ti = np.asarray(init, float)
        A, t = Ti[:3, :3].copy(), Ti[:3, 3] + Ti[:3, :3] @ cf - cf
    if two_d:
        t[2] = 0.0
    scales = [int(s) for s in scales]
    its = [int(i) for i in (iterations if np.ndim(iterations) else [iterations] * len(scales))]
    # Size of the fixed image's box around c: a change (dA, dt) moves points by up to |dA| R + |dt|.
    lo = vox2world(gf) @ np.array([0, 0, 0, 1.0])
    hi = vox2world(gf) @ np.append(np.array(tuple(gf.size()), float) - 1, 1.0)
    R = max(float(np.max(np.abs(np.stack([lo[:3], hi[:3]]) - cf))), 1e-6)
    info = []
    for f, n_it in zip(scales, its):
        g1, g2 = coarse_grid(gf, f), coarse_grid(gm, f)
        F, Mv = ca.Image3D(g1, mem), ca.Image3D(g2, mem)
        ca.ResampleAA(F, fixed)
        ca.ResampleAA(Mv, moving)
        # One voxel of Gaussian smoothing: the interpolated image's slope then matches the gradient.
        for im in (F, Mv):
            sp = tuple(im.grid().spacing())
            ca.GaussianBlur(im, im, ca.Vec3Df(*(s if n > 1 else 0.0 for s, n in zip(sp, tuple(im.grid().size())))))
        mk = None
        if mask is not None:
            mk = ca.Image3D(g1, mem)
            ca.ResampleAA(mk, mask)
            ca.GTC_I(mk, 0.5)
        S = _Scale(F, Mv, mk, metric, radius, cf, kind == "rigid", bins)
        vox = min(x for x, n in zip(tuple(g1.spacing()), tuple(g1.size())) if n > 1)
        step, min_step = vox, 0.01 * vox
        E, grad, H = S.gradient(centred_affine(A, t, cf), A, kind == "rigid")
        hist, stop, it = [E], "iteration cap", 0
        for it in range(n_it):
            # Gauss-Newton-preconditioned direction (Levenberg damping), scaled by the step size.
            free = np.ones(len(grad), bool)
            if two_d:
                free[[0, 1, 5] if kind == "rigid" else [2, 5, 6, 7, 8, 11]] = False
            d = np.zeros(len(grad))
            Hf = H[np.ix_(free, free)]
            d[free] = -np.linalg.solve(Hf + 1e-3 * np.diag(np.diag(Hf)) + 1e-12 * np.eye(free.sum()), grad[free])
            if kind == "rigid":
                dW, dt = d[:3], d[3:]
                size = np.linalg.norm(dW) * R + np.linalg.norm(dt)
            else:
                dA, dt = d[:9].reshape(3, 3), d[9:]
                size = np.linalg.norm(dA, 2) * R + np.linalg.norm(dt)
            if not size > 0:
                stop = "zero gradient"
                break
            s = min(step / size, 1.0) if S.metric.quadratic else step / size  # the SSD's Gauss-Newton step is 1
            if kind == "rigid":
                A_new, t_new = rotation(s * dW) @ A, t + s * dt
            else:
                A_new, t_new = A + s * dA, t + s * dt
            E_new = S.energy(centred_affine(A_new, t_new, cf))
            if np.isfinite(E_new) and E_new < E:
                A, t = A_new, t_new
                step = min(s * size, step) * 2.0
                E, grad, H = S.gradient(centred_affine(A, t, cf), A, kind == "rigid")
                hist.append(E)
                if s * size < min_step:
                    stop = "step below 1/100 voxel"
                    break
                if len(hist) > 5 and (hist[-6] - hist[-1]) < 5 * tol * abs(hist[-1]):
                    stop = "converged"
                    break
            else:
                step = min(s * size, step) * 0.5
                if step < min_step:
                    stop = "step below 1/100 voxel"
                    break
        info.append({"scale": f, "grid": list(g1.size()), "iterations": it + 1, "energy_start": hist[0],
                     "energy_end": hist[-1], "stop": stop})
    wait(mem)
    return AffineResult(centred_affine(A, t, cf), kind, gf, gm, info, time.perf_counter() - t0)


def write_itk(matrix, path):
    """Writes the 4 x 4 world transform (fixed RAS point -> moving RAS point, pyca's world, which is
    NIfTI's) as an ITK affine file (AffineTransform_double_3_3, LPS physical space; .txt or ANTs'
    .mat), which antsApplyTransforms, ITK and SimpleITK.ReadTransform read:
    pyca.registration.transform_files.write_affine."""
    from ..registration.transform_files import write_affine

    write_affine(matrix, path)


def read_itk(path):
    """The 4 x 4 RAS world matrix of an ITK/ANTs affine file (any centre):
    pyca.registration.transform_files.read_affine."""
    from ..registration.transform_files import read_affine

    return read_affine(path)
