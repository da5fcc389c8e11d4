"""Band-limited geodesics (`pyca shoot --band B`): the vector-momentum geodesic with the velocity kept to
its low frequencies, after Zhang and Fletcher's FLASH (finite-dimensional Lie algebras for fast
diffeomorphic registration): the geodesic and its adjoint sweep run on a coarse grid, only the image
match at t = 1 on the images' own grid.

The model. The velocity v_t = K_B m_t keeps the Fourier coefficients with |k| <= B on every axis (k in
cycles over the grid's box; K_B is K with FluidKernelFFT.setBand(B)), so it is represented exactly on
a grid that samples those frequencies: the coarse grid transforms.coarse_grid(grid, f) (the same box)
with the largest power of two f that leaves every axis at least 3 B + 1 voxels (a product of two
band-limited fields, then cut back to the band, is computed there without aliasing: the 3/2 rule).
On that grid the EPDiff flow is Geodesic's (m_t = CoAd(h_t, m0), v_t = K_B m_t, the semi-Lagrangian map
steps) with the coarse grid's finite differences; the map phi_{1,0} is brought to the images' grid by
trilinear interpolation of its displacement, and the energy

    E = ( 1/2 <m0, K_B m0> (N / N_c) + || I0 o phi_{1,0} - I1 ||^2 / (2 sigma^2) ) / N

(N voxels of the images, N_c of the coarse grid: the coarse sum scaled to the fine one) is evaluated
with the match on the images' grid.

The gradient. The image term's force at t = 1, G = -(I0 o phi_{1,0} - I1) grad(I0 o phi_{1,0}) / sigma^2
(a covector on the images' grid), is cut to the band (FluidKernelFFT with L = 1 and setBand(B)),
sampled onto the coarse grid, and carried back to t = 0 as a covector, J_j = CoAd(s_j, J_{j+1}) with
Geodesic's steps back s_j, in place of the image adjoint's I^ grad I_j (which is the same covector for
the full model: I^ grad I is carried so); the momentum adjoint is Geodesic.adjoint's. So no image and
no full-resolution field enters the sweep. docs/shoot.md ("band-limited geodesics") says what this
costs and buys.

Options (class attributes): BandGeodesic.cubic (Catmull-Rom samples on the coarse grid); BandFit.fine_map
(phi_{1,0} traced on the images' grid through the T coarse velocities, FLASH's way, in place of h_T
brought over by a cubic; trace_stride 2: two time steps a pass); BandFit.graphs (on the GPU, forward's
and gradients' device work recorded once as CUDA graphs and replayed: pyca.cuda_graph).
"""
from __future__ import annotations

from .. import core as ca
from .geodesic import Geodesic, GeodesicFit, epdiff_kernel
from .transforms import coarse_grid

__all__ = ["BandGeodesic", "BandFit", "band_factor", "band_grid", "band_kernel", "projector", "to_coarse",
           "to_fine_momentum"]

MAX_FACTOR = 8
OVERSAMPLE = 3  # the coarse grid's voxels per axis at least OVERSAMPLE B + 1
INTERP = ca.INTERP_CUBIC  # the resampling between the grids


def band_factor(grid, band):
    """The coarse factor f (1, 2, 4 or 8) of band B on `grid`: the largest that leaves every axis of
    more than one voxel at least 3 B + 1 voxels."""
    def fits(f):  # every axis of n > 1 voxels smaller than at f / 2 and still holding the band
        c, prev = tuple(coarse_grid(grid, f).size()), tuple(coarse_grid(grid, f // 2).size())
        return all(int(nc) >= OVERSAMPLE * int(band) + 1 and int(nc) < int(npv)
                   for n, nc, npv in zip(tuple(grid.size()), c, prev) if int(n) > 1)

    f = 1
    while 2 * f <= MAX_FACTOR and fits(2 * f):
        f *= 2
    return f


def band_grid(grid, band):
    """(coarse grid, factor) of band B on `grid`."""
    f = band_factor(grid, band)
    return coarse_grid(grid, f), f


def _band_vec(grid, band):
    # per axis the largest |k| kept; an axis the band covers whole (or of one voxel): -1
    return ca.Vec3Di(*[-1 if int(n) == 1 or 2 * int(band) >= int(n) else int(band) for n in tuple(grid.size())])


def band_kernel(grid, band, alpha, beta, gamma, lpow=1):
    """K_B on `grid`: epdiff_kernel with the band |k| <= B."""
    K = epdiff_kernel(grid, alpha, beta, gamma, lpow)
    K.setBand(_band_vec(grid, band))
    return K


def projector(grid, band):
    """P_B on `grid`: the projection onto the fields whose Fourier coefficients lie in |k| <= B (a
    FluidKernelFFT with L = 1 and the band)."""
    P = ca.FluidKernelFFT()
    P.setAlpha(0.0)
    P.setBeta(0.0)
    P.setGamma(1.0)
    P.setLPow(1)
    P.setGrid(grid)
    P.setBand(_band_vec(grid, band))
    return P


def to_coarse(m_c, v, K_c):
    """m_c = L_B (v sampled onto m_c's grid): the momentum on the coarse grid of a velocity v (world
    units, any grid of the same box)."""
    ca.Resample(m_c, v, ca.BACKGROUND_STRATEGY_CLAMP, False, INTERP)
    K_c.applyOperator(m_c)
    return m_c


def to_fine_momentum(out, v_c, K_fine):
    """out = L_B (v_c interpolated onto out's grid): the momentum on the images' grid of the coarse
    velocity v_c (K_fine: K_B on out's grid)."""
    ca.Resample(out, v_c, ca.BACKGROUND_STRATEGY_CLAMP, False, INTERP)
    K_fine.applyOperator(out)
    return out


class BandGeodesic(Geodesic):
    """Geodesic on the coarse grid of a band-limited model, with the adjoint sweep of a covector
    (adjoint_covector) in place of the image adjoint; every pass one of _band_kernels'."""

    # the momentum m_j = CoAd(h_j, m0), the map's steps, the sweep's transports and the map brought to the
    # images' grid sampled by Catmull-Rom cubics (True) or trilinearly, as the full model's operations (False)
    cubic = False

    def __init__(self, grid, mem, T, K, keep="auto"):
        super().__init__(grid, mem, T, K, keep=keep)
        self._cov = [ca.Field3D(grid, mem) for _ in range(2)]
        self.cubic = bool(BandGeodesic.cubic)
        self._dot_pending = False  # False, "spectra" (K's staged sum) or "dot" (ca.Dot when read)
        # <m0, K m0> from the kernel's spectra (staged on the host by shoot itself: not for a recorded graph,
        # pyca.cuda_graph) or by ca.Dot when read
        self.dot_from_spectra = True

    @property
    def v0_dot(self):
        """<m0, K m0> of the last shoot (taken from the kernel's spectra, no pass of its own; or, without
        dot_from_spectra, by ca.Dot when first read)."""
        if self._dot_pending == "spectra":
            self._v0_dot = self.K.takeDot()
        elif self._dot_pending == "dot":
            self._v0_dot = float(ca.Dot(*self._at(0)))
        self._dot_pending = False
        return self._v0_dot

    def dot_stale(self):
        """<m0, K m0> to be read again by ca.Dot (after shoot() ran as a replayed graph, pyca.cuda_graph)."""
        self._dot_pending = "dot"

    @v0_dot.setter
    def v0_dot(self, value):
        self._v0_dot, self._dot_pending = value, False

    def _mv(self, j, out_m, out_v):
        if j == 0:
            return super()._mv(j, out_m, out_v)
        from . import _band_kernels as bk

        bk.coad(out_m, self.hs[j - 1], self.m0, out_m, self.m0, 1.0, *self._sp, False, self.cubic)
        self.K.applyInverseOperator(out_v, out_m)

    def shoot(self, m0):
        from . import _band_kernels as bk

        self.m0 = m0
        m, v = self._mvs[0]  # step 0: m0 itself and K m0, <m0, K m0> taken from K's spectra
        if self.keep == "all":  # (m_0 is m0: not copied)
            self._mvs[0] = m, v = m0, v
        else:
            ca.Copy(m, m0)
        if self._dot_pending == "spectra":  # the last shoot's sum, never read: taken so that it does not add to
            self.v0_dot  # this one
        if self.dot_from_spectra:
            self.K.applyInverseOperatorDot(v, m)
            self.K.stageDot()
        else:
            self.K.applyInverseOperator(v, m)
        self._dot_pending = "spectra" if self.dot_from_spectra else "dot"
        self._cached = [None, None] if self.keep == "all" else [0, None]
        for j in range(self.T):
            if self.keep == "all" and j > 0:
                self._mv(j, *self._mvs[j])
            a, b, k = self._weights(j)
            v = self._at(j)[1]
            bk.step(self.hs[j], self.hs[j - 1] if j else v, v, self._at(k)[1], a, b, self.dt, -1.0, *self._sp, j > 0,
                    self.cubic)
        return self.hs[-1]

    def forward_map(self, out):
        """Geodesic.forward_map, each step back out(s_j) one pass (uses scratch[0])."""
        from . import _band_kernels as bk

        a_, b_ = out, self.scratch[0]
        ca.SetToIdentity(a_)
        for j in range(self.T - 1, -1, -1):
            a, b, k = self._weights(j)
            bk.step(b_, a_, self._at(j)[1], self._at(k)[1], a, b, self.dt, 1.0, *self._sp, True, self.cubic)
            a_, b_ = b_, a_
        if a_ is not out:
            ca.Copy(out, a_)
        return out

    def adjoint_covector(self, J1):
        """The backward sweep after shoot(m0) for an image term at t = 1 whose force there is the
        covector J1 (a field of this grid, read only): J_j = CoAd(s_j, J_{j+1}) takes the place of
        I^ grad I_j in Geodesic.adjoint's momentum adjoint. Returns m^_0 (scratch, as adjoint's)."""
        from . import _band_kernels as bk
        from . import _geodesic_kernels as gk

        mhat, mt, f, s = self.scratch
        J, J2 = self._cov
        sp, cubic = self._sp, self.cubic
        src = J1  # J_{j+st}: J1 at first (read, not copied)
        scale = 1.0  # m^ is scale times what mhat holds (the first step's -dt, applied when m^ is next read)
        for n, (j, st) in enumerate(self.sweep_steps()):
            # s = x + dt w(x + dt/2 w), the step back; J <- CoAd(s, J), m~ = m^ o s
            dt, a, b, v, vk = self.sweep_field(j, st)
            bk.step(s, v, v, vk, a, b, dt, 1.0, *sp, False, cubic)
            bk.coad(J2, s, src, mt, mhat, scale, *sp, n > 0, cubic)
            scale = 1.0
            J, J2 = J2, J
            src = J
            m, v = self._at(j)
            if n == 0:  # m^ = -dt K J
                self.K.applyInverseOperator(mhat, J)
                scale = -dt
                continue
            # f = K(J - ad*_m~ m_j) (CoAdInf's meaning, the full model's force pass); m^ = m~ - dt (f + (D v_j) m~)
            gk.force(f, self._im[0], m, self._im[0], mt, m, J, *sp, False, True, True)
            self.K.applyInverseOperator(f)
            gk.momentum_update(mhat, mt, f, v, dt, *sp)
        if scale != 1.0:  # (a sweep of one step)
            ca.MulC_I(mhat, scale)
        return mhat


class BandFit(GeodesicFit):
    """GeodesicFit of one image at t = 1 (matching) for a band-limited geodesic: geo a BandGeodesic on
    the coarse grid, base and the measurement on the images' grid, m0 on the coarse grid."""

    # phi_{1,0} on the images' grid: traced there through the coarse velocities sampled trilinearly ("linear")
    # or by Catmull-Rom cubics ("cubic"): T passes of the fine grid, no map sampled, FLASH's way; or (None) the
    # coarse map h_T brought over by a cubic
    fine_map = None
    # the traced map's steps: 1 (the shooting's T steps) or 2 (two time steps at once along the mid-step
    # velocity, the adjoint sweep's steps: about T / 2 passes of the fine grid)
    trace_stride = 1
    # forward's and gradients' device work as two CUDA graphs, recorded at their second call (the GPU only; every
    # call inside the one pyca.cuda_graph.Stream: a replay outside it is refused)
    graphs = False

    def __init__(self, geo, base, measurements, sigma, band, m0=None, reject_folds=False, min_jacobian=0.0):
        if len(measurements) != 1 or int(measurements[0][0]) != geo.T:
            raise ValueError("band-limited geodesic fit: one measurement, at t = 1 (matching)")
        super().__init__(geo, base, measurements, sigma, m0=m0, reject_folds=reject_folds,
                         min_jacobian=min_jacobian, image_grid=base.grid())
        g, mem = base.grid(), self.mem
        self.band = int(band)
        self.phi = ca.Field3D(g, mem)  # phi_{1,0} on the images' grid (an H-field)
        self._G = ca.Field3D(g, mem)  # the force at t = 1 (and the upsampling's scratch)
        self._IT = ca.Image3D(g, mem)
        self._Jc, self._dc = ca.Field3D(geo.grid, mem), ca.Field3D(geo.grid, mem)
        self.P = projector(g, band)
        # graphs (the GPU, pyca's current stream a pyca.cuda_graph.Stream's): forward's and gradients' device
        # work recorded once as CUDA graphs and replayed (one launch each in place of about 60)
        if self.graphs and geo.keep != "all":  # (a replay runs no Python: which m_j a slot holds is not tracked)
            raise ValueError(f"band-limited geodesic fit: graphs need the geodesic's keep 'all', not {geo.keep!r}")
        self._graphs_on = bool(self.graphs) and int(self.mem) == int(ca.MEM_DEVICE)
        self._graphs = {}
        if self._graphs_on:
            geo.dot_from_spectra = False
        self._spf = tuple(float(x) for x in g.spacing())
        self._ratio = tuple(float(c) / float(n) for c, n in zip(tuple(geo.grid.size()), tuple(g.size())))

    def images(self, j, out):
        if j == 0:
            ca.Copy(out, self.base)
        elif j == self.geo.T:
            ca.ApplyH(out, self.base, self.phi)
        else:
            raise ValueError("band-limited geodesic fit: images at t = 0 and 1 only")
        return out

    def _upsample(self, out, h):
        from . import _band_kernels as bk

        bk.upsample(out, h, *self._ratio, self._IT, self._IT, self._IT, self._IT, False, True)
        return out

    def _run(self, name, fn):
        """fn() (device work only); with graphs on the GPU, eagerly on the first call, recorded as a CUDA graph
        on the second (pyca.cuda_graph) and replayed from then on."""
        if not self._graphs_on:
            return fn()
        g = self._graphs.get(name)
        if g is None and name in self._graphs:
            from .. import cuda_graph

            g = self._graphs[name] = cuda_graph.Graph(fn)
        if g is None:
            self._graphs[name] = None
            fn()
        else:
            g.launch()

    def _check_map(self):
        if self.fine_map not in (None, "linear", "cubic") or self.trace_stride not in (1, 2):
            raise ValueError(f"band-limited geodesic fit: fine_map must be None, 'linear' or 'cubic' and trace_stride "
                             f"1 or 2, not {self.fine_map!r}, {self.trace_stride!r}")

    def forward(self):
        geo = self.geo
        self._check_map()
        self._run("forward", self._forward_device)
        if self._graphs_on:  # a replay runs no Python: <m0, K m0> is read afresh (ca.Dot)
            geo.dot_stale()
        self._det_min = self._admissible = None
        r = self.resid[0]
        self._match = float(ca.Sum2(r)) / (2.0 * self.sigma2 * self.N)
        self._reg = 0.5 * geo.v0_dot * self._reg_scale / self.N
        return self._match, self.phi

    def _forward_device(self):
        from . import _band_kernels as bk

        geo = self.geo
        h = geo.shoot(self.m0)
        (_, J), r = self.meas[0], self.resid[0]
        if self.fine_map:  # phi_{1,0} traced on the fixed grid through the coarse velocities, last first
            for n, (j, st) in enumerate(self._trace_steps()):
                dt, a, b, v, vk = geo.sweep_field(j, st)
                bk.trace(self.phi, v, vk, a, b, dt, -1.0, *self._ratio, *self._spf, n == 0, self.fine_map == "cubic",
                         self._IT, self.base, r, J, j == 0)
        else:  # phi_{1,0} on the fixed grid (cubic, as every transfer between the grids), I0 o phi_{1,0} and
            # the residual in one pass
            bk.upsample(self.phi, h, *self._ratio, self._IT, self.base, r, J, True, True)

    def final_map(self):
        return self.phi

    def gradients(self):
        self._run("gradients", self._gradients_device)
        return None

    def _gradients_device(self):
        from . import _geodesic_kernels as gk

        r = self.resid[0]
        # r grad(I0 o phi_{1,0}) (Gradient's differences), cut to the band, on the coarse grid: the force at t = 1
        # is -1 / sigma^2 of it, and the sweep is linear in it
        gk.force(self._G, self._IT, self._G, r, self._G, self._G, self._G, *self._spf, False, False, False)
        self.P.applyInverseOperator(self._G)
        ca.Resample(self._Jc, self._G, ca.BACKGROUND_STRATEGY_CLAMP, False, INTERP)
        mhat = self.geo.adjoint_covector(self._Jc)
        ca.Add_MulC(self.g, self.geo.velocity(0), mhat, 1.0 / self.sigma2)  # K_B m0 - m^_0

    @property
    def graph_nodes(self):
        """The recorded graphs' node counts [forward's, gradients'] (graphs; empty before they are recorded)."""
        return [g.nodes for g in self._graphs.values() if g is not None]

    def _trace_steps(self):
        """The traced map's steps back [(j, st)], last first (one or two time steps each: trace_stride)."""
        geo = self.geo
        return [(j, 1) for j in range(geo.T - 1, -1, -1)] if self.trace_stride == 1 else geo.sweep_steps()

    def forward_map(self, out):
        """phi_{0,1} on the images' grid (after forward()): with fine_map traced there, first step first (the
        inverse steps of phi_{1,0}'s); else the coarse forward map brought over by a cubic."""
        self._check_map()
        if not self.fine_map:
            self.geo.forward_map(self._dc)
            return self._upsample(out, self._dc)
        from . import _band_kernels as bk

        for n, (j, st) in enumerate(reversed(self._trace_steps())):
            dt, a, b, v, vk = self.geo.sweep_field(j, st)
            bk.trace(out, v, vk, a, b, dt, 1.0, *self._ratio, *self._spf, n == 0, self.fine_map == "cubic", self._IT,
                     self._IT, self._IT, self._IT, False)
        return out

    def momentum_energies(self):
        """<m_t, K_B m_t> at each time step, scaled to the images' grid."""
        return [e * self._reg_scale for e in self.geo.energies()]
