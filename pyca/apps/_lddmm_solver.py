"""The LDDMM solver of one scale (pyca.apps.lddmm's inner loop): every array of a level, allocated
once, and the passes of one gradient-descent iteration (forward transport, gradients, update).
The algorithm and its notation are in pyca/apps/lddmm.py's docstring and docs/lddmm.md.

The level is the problem pyca.registration.optimisers.descend() optimises (forward, gradients,
update, undo, halve, ...); its match term is a pyca.registration.metrics metric, its geometry
pyca.registration.transforms' (docs/design/registration.md)."""
from __future__ import annotations

import numpy as np

from .. import core as ca
from ..registration.metrics import SSD
from ..registration.interpolation import InterpTarget
from ..registration.transforms import affine_hfield, flow_forward, jacobian_det, scratch_for

# det D h of an H-field (the name tests and lab scripts know it by in this module)
_jac_det = jacobian_det


def _ext_ssd_gradient():
    ext = getattr(ca, "ext", None)
    if ext is None:
        try:
            from .. import ext  # noqa: F811
        except ImportError:
            return None
    return getattr(ext, "ssd_gradient", None)


def _field_stack(n, grid, mem):
    """n Field3D sharing one zeroed allocation (each laid out as a Field3D of its own: components
    contiguous, the field starting on a 256-byte boundary), and that allocation as one Image3D: a
    reduction over it (one launch, one wait) is the sum of the reductions over the n fields (the zero
    padding between them adds nothing)."""
    nvox = int(grid.nVox())
    step = -(-3 * nvox // 64) * 64  # floats from one field to the next
    flat = ca.Image3D(ca.GridInfo((step, n, 1)), mem)
    ca.SetMem(flat, 0.0)
    dev = ca.dlpack_device(flat)[1] if mem == ca.MEM_DEVICE else -1
    base = int(flat.rawptr())
    return [ca.wrap_field(base + 4 * j * step, 12 * nvox, mem, dev, grid, flat) for j in range(n)], flat


def kernel_scale(p):
    """The factor L's weights are divided by: gamma (K's gain at the zero frequency is then 1), or 1
    when gamma is 0."""
    g = float(p["gamma"])
    return g if g > 0 else 1.0


def kernel_band(grid, p):
    """K's band on `grid` (FluidKernelFFT.setBand): per axis the largest |k| kept, -1 for all. The
    frequencies dropped are those where K's symbol along that axis, (lambda_ref / (alpha c(k) +
    gamma))^lpow with c(k) = (2 - 2 cos(2 pi k / n)) / h^2, has fallen to p['band_tol'] of its peak
    (lambda_ref: the value at k = 0, or at k = 1 when gamma is 0); beta only makes K smaller there. K at
    any frequency outside the box is at most that fraction of its peak (docs/lddmm.md, 'The kernel's
    band')."""
    tol, alpha, gamma, lpow = float(p["band_tol"]), float(p["alpha"]), float(p["gamma"]), int(p["lpow"])
    band = []
    for n, h in zip(tuple(grid.size()), tuple(grid.spacing())):
        if tol <= 0 or lpow <= 0 or alpha <= 0 or n < 4:
            band.append(-1)
            continue
        k = np.arange(n // 2 + 1)
        lam = alpha * (2.0 - 2.0 * np.cos(2.0 * np.pi * k / n)) / float(h) ** 2 + gamma
        ratio = (lam[0 if gamma > 0 else 1] / lam[1:]) ** lpow  # k = 1 .. n // 2, decreasing
        drop = np.nonzero(ratio <= tol)[0]
        band.append(int(drop[0]) if drop.size else -1)  # the first k dropped is drop[0] + 1
    return band


class Level:
    """All arrays of one scale, allocated once; the iterations allocate nothing.

    Two paths compute the same iteration. The fused path (the sum-of-squared-differences match, and
    a metric whose residual it transports, metric.fused_residual: MI, through LDDMMResidualStep)
    runs one LDDMMTransportStep per forward time step and, per backward time step, one LDDMMGradStep
    (match gradient and momentum update, and LDDMMComposeStep's backward map of the step before, in
    one pass) and the kernel K: gradients() then only marks the gradients as due, and update(eps) computes them together with the update
    (direction_max() computes them alone when the step size is not known yet). The general path
    runs the chain of single operations (any match term). `fused = False` (on the class or an
    instance) selects the general path, for comparisons (tests, benchmarks)."""

    fused = True
    momentum = 0.0  # heavy-ball weight mu of the last accepted step added to each update (0: plain descent)

    def __init__(self, grid, mem, T, I0, I1, p, metric=None, source=None, interp=False, pad=None):
        F = lambda: ca.Field3D(grid, mem)  # noqa: E731
        Im = lambda: ca.Image3D(grid, mem)  # noqa: E731
        self.grid, self.mem, self.T, self.dt = grid, mem, T, 1.0 / T
        if p.get("momentum") is not None:
            self.momentum = float(p["momentum"])
        self.I0, self.I1 = I0, I1
        # interp: I0 o phi_{1,0} is compared with I1 plus the bias trilinear interpolation gives it at the
        # points where I0 is sampled (InterpTarget; docs/lddmm.md, 'Interpolation blur'): I1 itself where
        # those points are voxels (the identity of equal images).
        self.target = None
        if interp:
            self.target = InterpTarget(grid, mem, I1, *((I0,) if source is None else source))
        if self.target is not None:
            self.I1 = self.target.image
        # pad: a 0/1 image, 1 on the fixed grid's voxels of a working grid extended beyond them (lddmm's
        # pad='fft'), for a match that takes no mask (the SSD's plain difference): there the solver compares
        # I0 o phi_{1,0} with I1, on the added voxels with itself (I1 := J0_T there after each forward(),
        # _pad_fixed()), so that the added voxels, which hold no fixed image, add nothing to the match.
        self.pad, self._fixed = pad, self.I1
        self._padded = Im() if pad is not None else None
        # v, m and m_new each in one allocation, so that the regularisation energy sum_j <m_j, v_j>,
        # where K has not accumulated it (reg_energy()), is one reduction (one wait, not T). v_prev
        # and J0_prev keep the state before the last update and forward(), so that undo() swaps it
        # back instead of recomputing it.
        self._flat = {}
        self.v, self.v_prev, self.m, self.m_new = (self._stack(grid, mem) for _ in range(4))
        # (m_new also holds the gradients b_j during a sweep)
        # J0_0 is I0 itself in both lists (read only: the passes write J0_1 .. J0_T).
        self.J0 = [I0] + [Im() for _ in range(T)]
        self.J0_prev = [I0] + [Im() for _ in range(T)]
        self.h = [F(), F()]
        self.J1, self.jac = Im(), Im()
        self.grad, self.tmp = F(), F()
        # K normalised to gain 1 at the zero frequency (docs/lddmm.md, 'The kernel's scale'): the
        # operator's weights divided by gamma, L = ((-alpha Lap - beta grad div + gamma) / gamma)^lpow,
        # so that sigma weighs the match against a regulariser of a fixed scale (unnormalised, K's gain
        # gamma^-lpow, 4e13 with the defaults, made the regulariser ~1e-7 of the energy and sigma a
        # no-op under the auto step). gamma = 0 keeps the unnormalised operator (no finite peak).
        norm = kernel_scale(p)
        self.K = ca.FluidKernelFFT()
        self.K.setAlpha(float(p["alpha"]) / norm)
        self.K.setBeta(float(p["beta"]) / norm)
        self.K.setGamma(float(p["gamma"]) / norm)
        self.K.setLPow(int(p["lpow"]))
        self.K.setGrid(grid)
        self.K.setBand(ca.Vec3Di(*kernel_band(grid, p)))
        self.ssd_gradient = _ext_ssd_gradient()
        # The match term (pyca.registration.metrics; None: the SSD of p['sigma']). Its energy is always
        # the metric's; where its gradient is the plain difference I - J (metric.plain_difference: the
        # SSD without a mask) the SSD paths below transport I1 instead of the residual, and the fused
        # path (LDDMMGradStep) computes the difference itself. Another metric runs the general path.
        self.metric = metric if metric is not None else SSD(grid, mem, p["sigma"])
        self.sigma2 = self.metric.sigma2
        self._plain = bool(self.metric.plain_difference)
        self.resid = Im() if not self._plain else None
        # A metric whose residual the fused steps transport (metric.fused_residual: MI) runs the fused
        # path too: LDDMMTransportStep forwards, and per backward step LDDMMResidualStep with the
        # residual r (computed once per gradient, at t = 1) in place of I1.
        self._resid_fused = (not self._plain and bool(getattr(self.metric, "fused_residual", False))
                             and hasattr(ca, "LDDMMResidualStep"))
        # source = (the moving image on its own grid, M: the 4 x 4 map of the linear stage from fixed
        # voxels into that image's voxels): J0_j samples the moving image once, through M after
        # phi_{t_j,0}, instead of I0 (itself the moving image sampled through M) through phi_{t_j,0}.
        self.source = source
        self._fast = bool(self.fused) and hasattr(ca, "LDDMMGradStep") and (self._plain or self._resid_fused)
        self.diff = Im() if self._plain and not self._fast else None
        if source is not None and self._fast:  # LDDMMTransportStep's affine: A's rows, then t
            M = np.asarray(source[1], float)
            self._rows = [ca.Vec3Df(*(float(x) for x in M[i, :3])) for i in range(3)] + [
                ca.Vec3Df(*(float(x) for x in M[:3, 3]))]
        elif source is not None:  # M after h by affine_hfield's passes
            hs, scratch = F(), scratch_for(self.I1)
            self._to_source = lambda h: affine_hfield(hs, source[1], h, scratch)
        self._due = False  # gradients() was called; the fused path has not computed them yet
        self._matched = False  # the metric's last energy() was of the current images (match())
        self._dot_due = False  # update() accumulated sum_j <m_j, v_j> in K (reg_energy() takes it)
        self._halved = None  # halve()'s sum_j <m_j, v_j> (reg_energy() takes it)
        # momentum: dm_j = the last update's step of m_j (used while that update stands: not after an undo(), nor
        # at the scale's first step)
        self._mom_ok = False
        self.dm = self._stack(grid, mem) if self.momentum > 0 else None

    def _stack(self, grid, mem):
        fields, flat = _field_stack(self.T, grid, mem)
        self._flat[id(fields)] = flat
        return fields

    # J0_j = I0 o phi_{t_j,0} for j = 0..T; returns (match energy, phiinv = phi_{1,0}). The previous
    # J0 is kept (J0_prev) for undo().
    def forward(self):
        self.J0, self.J0_prev = self.J0_prev, self.J0
        h, hn = self.h
        if not self._fast:
            ca.SetToIdentity(h)
        for j in range(self.T):
            if self._fast:  # the lines below in one pass (from the identity, unread, at j = 0)
                hj = (h,) if j else ()
                if self.source is None:
                    ca.LDDMMTransportStep(hn, self.J0[j + 1], *hj, self.v[j], self.I0, -self.dt)
                else:
                    ca.LDDMMTransportStep(hn, self.J0[j + 1], *hj, self.v[j], self.source[0], -self.dt, *self._rows)
                h, hn = hn, h
                continue
            ca.LDDMMComposeStep(hn, h, self.v[j], -self.dt)  # phi_{t+dt,0} = phi_{t,0} o (x - dt v_t)
            h, hn = hn, h
            if self.source is None:
                ca.ApplyH(self.J0[j + 1], self.I0, h)
            else:
                ca.ApplyH(self.J0[j + 1], self.source[0], self._to_source(h))
        if self.target is not None:  # I1 as seen through the interpolation at phi_{1,0}'s points
            self._fixed = self.target.update(h)
        self._pad_fixed()
        return self.match(), h

    # I1 = the fixed image (self._fixed) where pad is 1, J0_T where it is 0 (none: the fixed image itself).
    def _pad_fixed(self):
        if self.pad is None:
            self.I1 = self._fixed
            return
        J = self.J0[self.T]
        ca.SubMul(self._padded, self._fixed, J, self.pad)  # (fixed - J) pad + J: two passes
        ca.Add_I(self._padded, J)
        self.I1 = self._padded

    # A new fixed image (the bias correction's, right after forward()): the target follows it at the points
    # of that forward().
    def set_fixed(self, I1):
        self._fixed = I1 if self.target is None else self.target.set_base(I1)
        self._pad_fixed()
        self._matched = False  # the metric's last energy was of the fixed image before

    # The match energy of the last forward()'s J0_1 against I1 (after a change of I1 alone, without
    # transporting again).
    def match(self):
        self._matched = True  # the metric's last energy is of the current J0_1 and I1
        return self.metric.energy(self.J0[self.T], self.I1)

    # dt sum_j <m_j, v_j>: after update(), the sum its kernel applications accumulated from the
    # spectra (FluidKernelFFT.applyInverseOperatorDot: no pass of its own); after halve(), the sum its
    # pass computed; else one Dot.
    def reg_energy(self):
        if self._dot_due:
            self._dot_due = False
            return self.dt * self.K.takeDot()
        if self._halved is not None:
            r, self._halved = self._halved, None
            return self.dt * r
        return self.dt * ca.Dot(self._flat[id(self.m)], self._flat[id(self.v)])

    # phi_{0,1} (composition only, for the outputs).
    def forward_map(self):
        return flow_forward(*self.h, self.v, self.dt)  # phi_{t,1} = phi_{t+dt,1} o (x + dt v_t)

    # b_j = |D phi_{t_j,1}| (J0_j - J1_j) grad J0_j into m_new[j] (without the 2 / sigma^2), all j,
    # with the current v (J0 from the last forward()). With a metric: b_j = |D phi_{t_j,1}|
    # (r o phi_{t_j,1}) grad J0_j, r = (sigma^2 / 2) dE/dI at t = 1 (for the SSD, r o phi_{t_j,1} = J0_j - J1_j).
    def gradients(self):
        if self._fast:
            # The residual at t = 1, transported by the sweep; the metric's own from the last match
            # energy where it kept one and the images are those of that energy (forward() or match()
            # since the last undo()).
            if not self._plain and not (self._matched and self.metric.last_gradient(self.resid)):
                self.metric.gradient(self.resid, self.J0[self.T], self.I1)
            self._due = True
            return
        h, hn = self.h
        if not self._plain:
            self.metric.gradient(self.resid, self.J0[self.T], self.I1)
        ca.SetToIdentity(h)
        for j in range(self.T - 1, -1, -1):
            ca.LDDMMComposeStep(hn, h, self.v[j], self.dt)
            h, hn = hn, h
            ca.ApplyH(self.J1, self.I1 if self._plain else self.resid, h)
            jacobian_det(self.jac, h)
            ca.Gradient(self.grad, self.J0[j])
            b = self.m_new[j]
            if not self._plain:
                ca.Mul_I(self.J1, self.jac)
                ca.Mul(b, self.grad, self.J1)
            elif self.ssd_gradient is not None:
                self.ssd_gradient(b, self.J0[j], self.J1, self.grad)
                ca.Mul_I(b, self.jac)
            else:
                ca.Sub(self.diff, self.J0[j], self.J1)
                ca.Mul_I(self.diff, self.jac)
                ca.Mul(b, self.grad, self.diff)

    # Largest component of the update direction K (2 / sigma^2) b_j - 2 v_j over j, in voxels (of
    # the finest spacing) per unit of eps.
    def direction_max(self):
        if self._due:
            self._fused_sweep(None)
        c = 2.0 / self.sigma2
        sp = min(x for x, n in zip(tuple(self.grid.spacing()), tuple(self.grid.size())) if n > 1)
        worst = 0.0
        for j in range(self.T):
            self.K.applyInverseOperator(self.tmp, self.m_new[j])
            ca.MulC_Add_MulC_I(self.tmp, c, self.v[j], -2.0)
            worst = max(worst, float(ca.LInf(self.tmp)))
        return worst / sp

    # m <- (1 - 2 eps) m + eps (2 / sigma^2) b; v = K m (with sum_j <m_j, v_j> accumulated in K for
    # reg_energy()). The previous m and v stay in m_new, v_prev.
    def update(self, eps):
        c = 2.0 / self.sigma2
        self._halved = None
        if self._dot_due:  # an update whose energy nobody took: drop its sum
            self.K.takeDot()
        mom = self.momentum if (self.dm is not None and self._mom_ok) else 0.0
        if self._due:
            self._fused_sweep(eps, mom)
        else:
            for j in range(self.T):
                ca.MulC_Add_MulC(self.m_new[j], self.m[j], 1.0 - 2.0 * eps, self.m_new[j], eps * c)
                if mom:
                    ca.Add_MulC_I(self.m_new[j], self.dm[j], mom)
                self.K.applyInverseOperatorDot(self.v_prev[j], self.m_new[j])
        self.K.stageDot()  # the sum to host memory behind the sweep: the match energy's wait brings it
        self.m, self.m_new = self.m_new, self.m
        self.v, self.v_prev = self.v_prev, self.v
        self._dot_due = True
        if self.dm is not None:  # this step, for the next update's momentum (if this one stands)
            for j in range(self.T):
                ca.Sub(self.dm[j], self.m[j], self.m_new[j])
            self._mom_ok = True

    # The fused backward sweep with the current v (J0 from the last forward()): with eps None,
    # m_new[j] = b_j (what gradients() computes); else m_new[j] = (1 - 2 eps) m_j + eps (2 / sigma^2)
    # b_j and v_prev[j] = K m_new[j] (update() then swaps v and v_prev).
    def _fused_sweep(self, eps, mom=0.0):
        self._due = False
        a, s = (0.0, 1.0) if eps is None else (1.0 - 2.0 * eps, eps * (2.0 / self.sigma2))
        h, hn = self.h
        # phi_{t_{T-1},1} = id o (x + dt v_{T-1}) = x + dt v_{T-1} / spacing: two elementwise passes
        # instead of a gather of the identity (whose sample at a point is the point, up to the rounding
        # of the lerps; on a 2-D grid v_z is 0).
        ca.MulC(h, self.v[self.T - 1], self.dt)
        ca.VtoH_I(h)
        step, target = (ca.LDDMMGradStep, self.I1) if self._plain else (ca.LDDMMResidualStep, self.resid)
        for j in range(self.T - 1, -1, -1):
            if j > 0:  # and, in the same pass, phi_{t_{j-1},1} = phi_{t_j,1} o (x + dt v_{j-1}) into hn
                step(self.m_new[j], self.m[j], h, self.J0[j], target, a, s, hn, self.v[j - 1], self.dt)
                h, hn = hn, h
            else:
                step(self.m_new[j], self.m[j], h, self.J0[j], target, a, s)
            if eps is not None:
                if mom:
                    ca.Add_MulC_I(self.m_new[j], self.dm[j], mom)
                self.K.applyInverseOperatorDot(self.v_prev[j], self.m_new[j])

    # Back to the state before the last update() and forward(): m, v and J0 (and so the match
    # energy the caller kept) as they were; nothing is recomputed.
    def undo(self):
        self._halved = None
        self._mom_ok = False
        self._matched = False
        if self._dot_due:
            self.K.takeDot()
            self._dot_due = False
        self.m, self.m_new = self.m_new, self.m
        self.v, self.v_prev = self.v_prev, self.v
        self.J0, self.J0_prev = self.J0_prev, self.J0
        if self.target is not None:
            self._fixed = self.target.undo()
        self._pad_fixed()

    # After update(eps), forward() and undo(): the state update(eps / 2) would give, without its
    # backward sweep and kernel applications. The rejected momenta are m + eps d (d = (2 / sigma^2) b
    # - 2 m, b the gradients of the current v), so half the step is their midpoint with m; K is linear,
    # so v = K m moves to the midpoint of v and the rejected velocities. The same as update(eps / 2)
    # in exact arithmetic (tests/python/test_lddmm_ops.py compares the two). One pass over the four
    # stacks (LDDMMHalveStep), which also sums sum_j <m_j, v_j> for reg_energy().
    def halve(self):
        flat = self._flat
        self._halved = ca.LDDMMHalveStep(flat[id(self.m_new)], flat[id(self.m)], flat[id(self.v_prev)], flat[id(self.v)])
        self.m, self.m_new = self.m_new, self.m
        self.v, self.v_prev = self.v_prev, self.v

    # Velocities from a coarser level (world units: values unchanged), then m = L v, v = K m.
    def take_velocities(self, coarse):
        for j in range(self.T):
            ca.Resample(self.v[j], coarse.v[j], ca.BACKGROUND_STRATEGY_CLAMP, False, ca.INTERP_LINEAR)
            self.K.applyOperator(self.m[j], self.v[j])
            self.K.applyInverseOperator(self.v[j], self.m[j])
