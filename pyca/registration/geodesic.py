"""Geodesics of diffeomorphisms by vector momentum: the EPDiff flow from an initial momentum m0, and
the adjoint (Jacobi-field) sweep that gives an image match's gradient with respect to m0 (Miller,
Trouve and Younes; Vialard et al.; Singh, Hinkle, Joshi and Fletcher's vector-momentum LDDMM).
Building block of `pyca shoot` (matching) and `pyca regress` (geodesic regression); the models and
their discretisation are in docs/shoot.md.

A geodesic is fixed by its initial momentum m0 (a Field3D, world units): with K = L^-1 the fluid
kernel (FluidKernelFFT: L = (-alpha Laplacian - beta grad div + gamma)^lpow, PyCA's operator, not
normalised), the momentum is carried by the coadjoint action and the velocity is its smoothing,

    m_t = Ad*_{phi_{t,0}} m0 = |D phi_{t,0}| (D phi_{t,0})^T m0 o phi_{t,0}    (CoAd)
    v_t = K m_t,      d/dt phi_{t,0} = -D phi_{t,0} v_t

and <m_t, v_t> is the same at every t (EPDiff conserves the energy). `Geodesic.shoot` integrates this
in T steps (dt = 1 / T): m_j = CoAd(h_j, m0) (D h_j one-sided at the border, Geodesic.coad_border),
v_j = K m_j, h_{j+1} = h_j o (x - dt v_j)
(LDDMMComposeStep: h_j extended beyond the grid by its border displacement), h_j the H-field
phi_{t_j,0}.

`Geodesic.adjoint` runs the adjoint equations backwards from t = 1 to 0, Eulerian, semi-Lagrangian as
the forward flow: the image adjoint (a density) I^_j = |D s_j| I^_{j+1} o s_j with s_j = x + dt v_j,
plus -r_k / sigma^2 at a measurement's time; the momentum adjoint

    m^_j = m~ - dt (v^ + (D v_j) m~),   m~ = m^_{j+1} o s_j,   v^ = K(I^ grad I_j - ad*_{m~} m_j)

(ca.ApplyV, ca.JacobianXY, ca.CoAdInf), I_j = I0 o h_j. The energy

    E(m0) = 1/2 <m0, K m0> + sum_k 1/(2 sigma^2) || I0 o phi_{t_k,0} - J_k ||^2

has the L2 gradient K m0 - m^_0 with respect to m0, and -I^_0 with respect to I0 (regression).

Memory: the T maps h_j are kept (one field each); with keep='all' also m_j and v_j (2 T fields more,
no recomputation in the sweep). keep='maps' recomputes m_j and v_j during the sweep (one CoAd and one
kernel application per step): about 3 + T fields of the grid in all plus the sweep's scratch, which
is what lets a 512^3 grid fit on one GPU.
"""
from __future__ import annotations


from .. import core as ca
from .transforms import jacobian_det

__all__ = ["Geodesic", "GeodesicFit", "epdiff_kernel", "KEEP"]

KEEP = ("auto", "all", "maps")
_AUTO_BYTES = 6 << 30  # keep='auto' keeps m_j and v_j while their 2 T fields take at most this


def epdiff_kernel(grid, alpha, beta, gamma, lpow=1):
    """K = L^-1 with L = (-alpha Laplacian - beta grad div + gamma)^lpow on `grid` (world units; PyCA's
    FluidKernelFFT as the vector-momentum clients set it, not normalised)."""
    if not (alpha > 0 and beta >= 0 and gamma > 0 and int(lpow) >= 1):
        raise ValueError(f"geodesic: need alpha > 0, beta >= 0, gamma > 0, lpow >= 1; got alpha={alpha}, "
                         f"beta={beta}, gamma={gamma}, lpow={lpow}")
    K = ca.FluidKernelFFT()
    K.setAlpha(float(alpha))
    K.setBeta(float(beta))
    K.setGamma(float(gamma))
    K.setLPow(int(lpow))
    K.setGrid(grid)
    return K


class Geodesic:
    """The EPDiff geodesic of one grid and memory type with T time steps (all arrays allocated once).

    shoot(m0) -> h_T = phi_{1,0}; h(j) -> phi_{t_j,0}; momentum(j) / velocity(j) -> m_j, v_j (after
    shoot; with keep='maps' computed again, two steps cached); adjoint(I0, jumps) -> (m^_0, I^_0).

    A step moves the map along the characteristics of the velocity at mid-step, extrapolated from the
    last two (Adams-Bashforth), from the mid-point departure point (second order in dt, one kernel
    application per step): w_j = 3/2 v_j - 1/2 v_{j-1}, d_j = w_j(x - dt/2 w_j(x)),
    h_{j+1} = h_j(x - dt d_j(x)); the first step, without v_{-1}, takes w_0 = v_0. (A Heun first step,
    w_0 = (v_0 + v_1) / 2 with the v_1 of a first try, brings the energies nearer their T -> infinity
    limit but further from the vector-momentum client's at 128^3, for one kernel application more:
    docs/performance.md.) The adjoint sweep steps back two time steps at once along the stored
    mid-step velocity, x + 2 dt v_{j+1}(x + dt v_{j+1}(x)) (the midpoint rule: second order, one kernel
    application per two steps; adjoint_stride = 1: one step at a time along x + dt w_j(x + dt/2 w_j(x)),
    the shooting's own steps reversed); a measurement at t_{j+1} makes that step two single ones."""

    # the fused passes (pyca/registration/_geodesic_kernels.py) instead of the chains of operations:
    # None (the default: on the GPU, where they equal the CPU's chains and are faster; the CPU runs the
    # chains, faster there), True (both backends) or False (the chains on both: the reference)
    fused = None
    # fused: I_j = I0 o h_j sampled by ApplyH before the force pass (False; on an H200 0.88x the chains'
    # time against 0.93x with the sample inside it, True: six trilinear samples per voxel)
    fuse_sample = False
    # the adjoint sweep's step in time steps: 2 (two at once where no measurement lies between: about T / 2
    # kernel applications K) or 1 (one per time step, the discrete adjoint of the shooting)
    adjoint_stride = 2
    # m_j = CoAd(h_j, m0) at the grid's border: "one-sided" (D h_j by the one-sided difference there, so the
    # identity carries m0 to itself: _band_kernels.coad with trilinear samples, ca.CoAd's meaning inside) or
    # "pyca" (ca.CoAd, which halves the one-sided difference as PyCA and the vector-momentum clients did:
    # m_1 loses half of m0's momentum at the border, and the geodesic's energy with it; docs/shoot.md)
    coad_border = "one-sided"

    def __init__(self, grid, mem, T, K, keep="auto"):
        if int(T) < 1:
            raise ValueError(f"geodesic: time_steps must be >= 1, got {T}")
        if keep not in KEEP:
            raise ValueError(f"geodesic: keep must be one of {', '.join(KEEP)}, not {keep!r}")
        self.grid, self.mem, self.T, self.dt, self.K = grid, mem, int(T), 1.0 / int(T), K
        self._sp = tuple(float(x) for x in grid.spacing())  # (the fused kernels' spacing arguments)
        if keep == "auto":
            keep = "all" if 2 * self.T * 12 * int(grid.nVox()) <= _AUTO_BYTES else "maps"
        self.keep = keep
        F = lambda: ca.Field3D(grid, mem)  # noqa: E731
        self.hs = [F() for _ in range(self.T)]  # h_1 .. h_T (h_0 is the identity)
        n = self.T if keep == "all" else 2
        self._mvs = [(F(), F()) for _ in range(n)]  # keep='all': (m_j, v_j); 'maps': two cached steps
        self._cached = [None, None]  # keep='maps': the step each slot holds
        self.m0 = None
        self.v0_dot = None  # <m0, K m0> of the last shoot
        self.scratch = [F() for _ in range(4)]  # the sweeps' (and callers') scratch fields
        self._im = [ca.Image3D(grid, mem) for _ in range(3)]
        # the fused passes: the same arithmetic as the chains of operations (the reference)
        self.fused = Geodesic.fused if Geodesic.fused is not None else int(mem) == int(ca.MEM_DEVICE)
        self._im2 = None

    def h(self, j):
        """phi_{t_j,0} (j >= 1; j = 0 is the identity)."""
        if j == 0:
            raise ValueError("geodesic: h(0) is the identity (not stored)")
        return self.hs[j - 1]

    def _mv(self, j, out_m, out_v):
        if j == 0:
            ca.Copy(out_m, self.m0)
        elif self.coad_border == "pyca":
            ca.CoAd(out_m, self.hs[j - 1], self.m0)
        elif self.coad_border != "one-sided":
            raise ValueError(f"geodesic: coad_border must be 'one-sided' or 'pyca', not {self.coad_border!r}")
        else:
            from . import _band_kernels as bk

            bk.coad(out_m, self.hs[j - 1], self.m0, out_m, self.m0, 1.0, *self._sp, False, False)
        self.K.applyInverseOperator(out_v, out_m)

    def momentum(self, j):
        """m_j (after shoot())."""
        return self._at(j)[0]

    def velocity(self, j):
        """v_j = K m_j (after shoot())."""
        return self._at(j)[1]

    def _at(self, j):
        if self.keep == "all":
            return self._mvs[j]
        if j in self._cached:
            return self._mvs[self._cached.index(j)]
        # the slot not holding j + 1 or j - 1 (the sweeps' neighbours)
        slot = 0 if self._cached[0] not in (j - 1, j + 1) else 1
        self._cached[slot] = None
        self._mv(j, *self._mvs[slot])
        self._cached[slot] = j
        return self._mvs[slot]

    def _weights(self, j):
        """(a, b, k): w_j = a v_j + b v_k (the velocity of step j)."""
        return (1.5, -0.5, j - 1) if j > 0 else (1.0, 0.0, 0)

    def _step_field(self, j, w):
        """w_j into w (after shoot()); returns w."""
        a, b, k = self._weights(j)
        ca.MulC_Add_MulC(w, self._at(j)[1], a, self._at(k)[1], b)
        return w

    def _step(self, j, w, d, a, b, vk):
        """h_{j+1} = h_j(x - dt d(x)), d = w(x - dt/2 w), w = a v_j + b vk (w, d: scratch)."""
        v = self._at(j)[1]
        if self.fused:
            from . import _geodesic_kernels as gk

            gk.step(self.hs[j], self.hs[j - 1] if j else v, v, vk, a, b, self.dt, -1.0,
                    *self._sp, j > 0)
            return
        ca.MulC_Add_MulC(w, v, a, vk, b)
        ca.ApplyVInv(d, w, w, ca.BACKGROUND_STRATEGY_CLAMP, 0.5 * self.dt)  # w at x - dt/2 w
        if j == 0:  # h_1 = x - dt d
            ca.MulC(self.hs[0], d, -self.dt)
            ca.VtoH_I(self.hs[0])
        else:  # h_j(x - dt d), h_j extended beyond the grid by its border displacement
            ca.LDDMMComposeStep(self.hs[j], self.hs[j - 1], d, -self.dt)

    def shoot(self, m0):
        """Integrates the geodesic of m0 (kept by reference: not to be changed before adjoint());
        returns phi_{1,0} (an H-field, voxels), and sets v0_dot = <m0, K m0>."""
        self.m0 = m0
        self._cached = [None, None]
        w, d = self.scratch[0], self.scratch[1]
        for j in range(self.T):
            if self.keep == "all":
                self._mv(j, *self._mvs[j])
            m, v = self._at(j)
            if j == 0:
                self.v0_dot = float(ca.Dot(m, v))
            a, b, k = self._weights(j)
            self._step(j, w, d, a, b, self._at(k)[1])
        return self.hs[-1]

    def forward_map(self, out):
        """phi_{0,1} (an H-field, voxels: the inverse of phi_{1,0} = shoot()'s map) into out, after
        shoot(): phi_{t_j,1} = phi_{t_{j+1},1} o s_j with the sweep's steps back s_j = x + dt w_j(x + dt/2
        w_j(x)) (LDDMMComposeStep: each map extended beyond the grid by its border displacement). Uses
        scratch[0:3]."""
        w, s, tmp = self.scratch[0], self.scratch[1], self.scratch[2]
        ca.SetToIdentity(out)
        for j in range(self.T - 1, -1, -1):
            self._step_field(j, w)
            ca.ApplyV(s, w, w, ca.BACKGROUND_STRATEGY_CLAMP, 0.5 * self.dt)
            ca.LDDMMComposeStep(tmp, out, s, self.dt)
            ca.Copy(out, tmp)
        return out

    def energies(self):
        """<m_t, K m_t> at t_0 .. t_{T-1} (after shoot()): constant along a geodesic, up to the
        integration's error."""
        return [float(ca.Dot(*self._at(j))) for j in range(self.T)]

    def sweep_steps(self, jumps=()):
        """The adjoint sweep's steps back, [(j, st)] from t_{j+st} to t_j, last step first: two time steps
        at once (st = 2, the midpoint rule with the stored v_{j+1}) where adjoint_stride is 2 and no
        measurement lies at t_{j+1}, else one (st = 1)."""
        out, t = [], self.T
        while t > 0:
            st = 2 if int(self.adjoint_stride) == 2 and t >= 2 and (t - 1) not in jumps else 1
            t -= st
            out.append((t, st))
        return out

    def sweep_field(self, j, st):
        """(dt, a, b, v, vk) of the sweep's step back from t_{j+st} to t_j (sweep_steps), with the velocity
        w = a v + b vk: st = 1: w_j, the shooting's velocity of step j; st = 2: v_{j+1}, the velocity at
        mid-step (after shoot())."""
        if st == 1:
            a, b, k = self._weights(j)
            return self.dt, a, b, self._at(j)[1], self._at(k)[1]
        v = self._at(j + st // 2)[1]
        return self.dt * st, 1.0, 0.0, v, v

    def adjoint(self, I0, jumps):
        """The backward sweep after shoot(m0): jumps maps a step j (0 .. T) to an image adjoint
        jump at t_j, -(sigma^2 / 2) dE/dI_j / sigma^2 = -r_j / sigma^2 (an Image3D; for matching {T:
        -r / sigma^2}). Returns (mhat, Ihat): the L2 gradient of the match terms with respect to m0 is
        -mhat (the energy's: K m0 - mhat), with respect to I0 -Ihat (both are scratch of this object,
        overwritten by the next call or shoot())."""
        mhat, mt, f, s = self.scratch
        Ihat, It, jac = self._im
        ca.SetMem(mhat, 0.0)
        if self.T in jumps:
            ca.Copy(Ihat, jumps[self.T])
        else:
            ca.SetMem(Ihat, 0.0)
        bg0 = ca.BACKGROUND_STRATEGY_PARTIAL_ZERO
        fused = bool(self.fused)
        if fused:
            from . import _geodesic_kernels as gk

            sp = self._sp
            if self._im2 is None:
                self._im2 = ca.Image3D(self.grid, self.mem)
            Ihat2 = self._im2
        zero_m = True
        for j, st in self.sweep_steps(jumps):
            # s_j = x + dt w(x + dt/2 w) (an H-field), the step back from t_{j+st} to t_j
            dt, a, b, v, vk = self.sweep_field(j, st)
            if fused:
                gk.step(s, v, v, vk, a, b, dt, 1.0, *sp, False)
            else:
                ca.MulC_Add_MulC(f, v, a, vk, b)
                ca.ApplyV(s, f, f, ca.BACKGROUND_STRATEGY_CLAMP, 0.5 * dt)
                ca.MulC_I(s, dt)
                ca.VtoH_I(s)
            # I^ <- |D s_j| I^ o s_j ;  m~ = m^ o s_j
            if fused:
                gk.transport(Ihat2, mt, Ihat, mhat, s, not zero_m)
                Ihat, Ihat2 = Ihat2, Ihat
            else:
                jacobian_det(jac, s)
                ca.ApplyH(It, Ihat, s, bg0)
                ca.Mul(Ihat, It, jac)
                if not zero_m:
                    ca.ApplyH(mt, mhat, s, bg0)
            # f = I^ grad I_j - ad*_{m~} m_j ; v^ = K f
            m, v = self._at(j)
            if fused and (self.fuse_sample or j == 0):  # the five operations below in one pass
                gk.force(f, I0, self.hs[j - 1] if j else m, Ihat, mt, m, m, *sp, j > 0, not zero_m, False)
            elif fused:
                ca.ApplyH(It, I0, self.hs[j - 1])
                gk.force(f, It, m, Ihat, mt, m, m, *sp, False, not zero_m, False)
            else:
                if j > 0:
                    ca.ApplyH(It, I0, self.hs[j - 1])
                ca.Gradient(f, It if j else I0)
                ca.Mul_I(f, Ihat)
                if not zero_m:
                    ca.CoAdInf(s, mt, m)
                    ca.Sub_I(f, s)
            self.K.applyInverseOperator(f)
            # m^ = m~ - dt (v^ + (D v_j) m~)
            if zero_m:
                ca.MulC(mhat, f, -dt)
                zero_m = False
            elif fused:
                gk.momentum_update(mhat, mt, f, v, dt, *sp)
            else:
                ca.JacobianXY(s, v, mt)
                ca.Add_I(f, s)
                ca.Add_MulC(mhat, mt, f, -dt)
            if j in jumps:
                ca.Add_I(Ihat, jumps[j])
        return mhat, Ihat


class GeodesicFit:
    """Images along one geodesic fitted to measurements: the problem pyca.registration.optimisers'
    descend() optimises for `pyca shoot` (one measurement, the fixed image, at t = 1) and `pyca regress`
    (images at several times). The energy, per voxel as the vector-momentum clients report it,

        E = ( 1/2 <m0, K m0> + sum_k || I0 o phi_{t_k,0} - J_k ||^2 / (2 sigma^2) ) / N

    (N voxels) is lowered along -(K m0 - m^_0) (Geodesic.adjoint), and, with estimate_base, the base
    image I0 along Ihat_0 (a damped Gauss-Newton step: sigma^2 / (2 n) at the first step size, n the
    number of measurements). measurements: [(j, J)] with j the time step (0 .. T) of image J.
    reject_folds: admissible() bars a step whose map phi_{1,0} has det D phi_{1,0} <= min_jacobian
    somewhere (0: only folds; a margin keeps the descent off the edge of collapse)."""

    def __init__(self, geo, base, measurements, sigma, m0=None, estimate_base=False, reject_folds=False,
                 min_jacobian=0.0, image_grid=None):
        if not measurements:
            raise ValueError("geodesic fit: no measurements")
        for j, J in measurements:
            if not 0 <= int(j) <= geo.T:
                raise ValueError(f"geodesic fit: a measurement's time step must be in [0, {geo.T}], got {j}")
        self.geo, self._grid, self.mem = geo, geo.grid, geo.mem  # (no .grid: descend would show E / N again)
        self.sigma2 = float(sigma) ** 2
        # image_grid: the images' grid where it is not the geodesic's (band.BandFit: a coarser geodesic); the
        # energy is per voxel of the images, the regulariser's sum over the geodesic's grid scaled to theirs
        self._img_grid = self._grid if image_grid is None else image_grid
        self.N = float(self._img_grid.nVox())
        self._reg_scale = self.N / float(self._grid.nVox())
        F = lambda: ca.Field3D(self._grid, self.mem)  # noqa: E731
        Im = lambda: ca.Image3D(self._img_grid, self.mem)  # noqa: E731
        self.m0, self.g = F(), F()
        if m0 is None:
            ca.SetMem(self.m0, 0.0)
        else:
            ca.Copy(self.m0, m0)
        self.base, self.base_prev = base.clone(self.mem), None
        self.estimate_base = bool(estimate_base)
        if self.estimate_base:
            self.base_prev, self.gI = Im(), Im()
        self.reject_folds = bool(reject_folds)
        self.min_jacobian = float(min_jacobian)
        if not (self.min_jacobian >= 0.0 and self.min_jacobian < 1.0):
            raise ValueError(f"geodesic fit: min_jacobian must be in [0, 1), got {min_jacobian!r}")
        self.folds_rejected = 0  # steps admissible() barred: det D phi_{1,0} <= min_jacobian somewhere
        self._det_min = None
        self._admissible = None
        self.meas = [(int(j), J) for j, J in measurements]
        self.resid = [Im() for _ in self.meas]
        self._It = Im()
        self._match = None
        self._reg = None
        self._eps = None
        self._eps0 = None

    def images(self, j, out):
        """I0 o phi_{t_j,0} into out (after forward())."""
        if j == 0:
            ca.Copy(out, self.base)
        else:
            ca.ApplyH(out, self.base, self.geo.h(j))
        return out

    def forward(self):
        h = self.geo.shoot(self.m0)
        self._det_min = self._admissible = None
        e = 0.0
        for (j, J), r in zip(self.meas, self.resid):
            self.images(j, self._It)
            ca.Sub(r, self._It, J)
            e += float(ca.Sum2(r))
        self._match = e / (2.0 * self.sigma2 * self.N)
        self._reg = 0.5 * self.geo.v0_dot / self.N
        return self._match, h

    def match(self):
        return self._match

    def final_map(self):
        """phi_{1,0} of the last forward() (an H-field on the images' grid)."""
        return self.geo.hs[-1]

    def det_min(self):
        """The smallest det D phi_{1,0} of the last forward()'s map (transforms.jacobian_det, as `pyca shoot`
        reports it)."""
        if self._det_min is None:
            jacobian_det(self._It, self.final_map())
            self._det_min = float(ca.MinMax(self._It)[0])
        return self._det_min

    def admissible(self):
        """With reject_folds: False when the last forward()'s map phi_{1,0} has det D phi_{1,0} <= min_jacobian
        somewhere (0: a fold), and descend() rejects the step. (A fold is the T time steps failing to follow
        a deformation too large for them: the geodesic itself is a diffeomorphism; a det near 0 is the
        edge of it.)"""
        if not self.reject_folds:
            return True
        if self._admissible is None:
            self._admissible = self.det_min() > self.min_jacobian
            self.folds_rejected += not self._admissible
        return self._admissible

    def reg_energy(self):
        return self._reg

    def gradients(self):
        jumps = {}
        for (j, _), r in zip(self.meas, self.resid):
            ca.MulC_I(r, -1.0 / self.sigma2)  # the image adjoint's jump at t_j
            if j in jumps:
                ca.Add_I(jumps[j], r)
            else:
                jumps[j] = r
        mhat, Ihat = self.geo.adjoint(self.base, jumps)
        ca.Sub(self.g, self.geo.velocity(0), mhat)  # K m0 - m^_0
        if self.estimate_base:
            ca.Copy(self.gI, Ihat)
        return Ihat  # -dE/dI0 (the geodesic's scratch: valid until its next sweep)

    def direction_max(self):
        """The largest change of the initial velocity K m0, in voxels (of the finest spacing) per unit of
        step."""
        kg = self.geo.scratch[0]
        self.geo.K.applyInverseOperator(kg, self.g)
        g = self._img_grid
        sp = min(x for x, n in zip(tuple(g.spacing()), tuple(g.size())) if n > 1)
        return float(ca.LInf(kg)) / sp

    def update(self, eps):
        self._eps = float(eps)
        if self._eps0 is None:
            self._eps0 = self._eps
        ca.Add_MulC_I(self.m0, self.g, -self._eps)
        if self.estimate_base:
            self.base, self.base_prev = self.base_prev, self.base
            c = 0.5 * self.sigma2 / len(self.meas) * min(1.0, self._eps / self._eps0)
            ca.Add_MulC(self.base, self.base_prev, self.gI, c)

    def undo(self):
        ca.Add_MulC_I(self.m0, self.g, self._eps)  # (no copy of m0 kept: one field less on a large grid)
        if self.estimate_base:
            self.base, self.base_prev = self.base_prev, self.base

    def halve(self):
        self.update(0.5 * self._eps)
