"""The band-limited geodesic's passes on its coarse grid (pyca.registration.band), each sampling by
Catmull-Rom cubics (cubic=True, BandGeodesic.cubic) or trilinearly (the full model's operations' rule:
CoAd, LDDMMComposeStep, Resample): a trilinear sample smooths, and a grid twice as coarse doubles that
at each step. Every pass samples through one helper, _sample; the sweep's force J - ad*_m~ m is
_geodesic_kernels.force's (as a covector). coad (trilinear) is also the full model's CoAd (Geodesic,
one-sided at the border); trace carries the map on the images' grid through the coarse velocities
(BandFit.fine_map). The full model's own step (_geodesic_kernels.step) stays apart from step(cubic=False):
the same meaning, but it composes h as LDDMMComposeStep does (h + the tap's shift, trilinear), which the
full model's chains of operations (the CPU's reference) must equal to the last bits. One source for the
CPU and the GPU (pyca's kernels); tests/python/test_shoot_band.py checks them against NumPy references
and pyca's operations."""
from __future__ import annotations

import math

import pyca as ca

from ._geodesic_kernels import corner_weights, lerp3

__all__ = ["coad", "step", "upsample", "trace"]

BLOCK = (32, 4, 1)


@ca.func
def _cr(t: float, i: int) -> float:
    """The Catmull-Rom weight of tap i (0 .. 3, at floor(p) - 1 + i) at the fraction t."""
    w = 0.0
    if i == 0:
        w = ((2.0 - t) * t - 1.0) * t * 0.5
    elif i == 1:
        w = ((3.0 * t - 5.0) * t * t + 2.0) * 0.5
    elif i == 2:
        w = ((4.0 - 3.0 * t) * t + 1.0) * t * 0.5
    else:
        w = (t - 1.0) * t * t * 0.5
    return w


@ca.func
def _sample_linear(f: ca.Field3D, g: ca.Field3D, both: bool, px: float, py: float, pz: float, zero: bool,
                   disp: bool):
    """_sample's trilinear case with its eight taps written out (lerp3; no loop over the taps, which ran
    the trilinear passes at about half the speed of pyca's own operations): the same meaning."""
    nx, ny, nz = f.shape
    x0 = int(math.floor(px))
    y0 = int(math.floor(py))
    z0 = int(math.floor(pz)) if nz > 1 else 0
    fx = px - x0
    fy = py - y0
    fz = pz - z0 if nz > 1 else 0.0
    xa = min(max(x0, 0), nx - 1)
    xb = min(max(x0 + 1, 0), nx - 1)
    ya = min(max(y0, 0), ny - 1)
    yb = min(max(y0 + 1, 0), ny - 1)
    za = min(max(z0, 0), nz - 1)
    zb = min(max(z0 + 1, 0), nz - 1)
    # zero: a tap outside the grid counts 0 (its weight's factor 0); else the clamped tap
    w000, w100, w010, w110, w001, w101, w011, w111 = corner_weights(x0, y0, z0, nx, ny, nz, zero)
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    r0 = 0.0
    r1 = 0.0
    r2 = 0.0
    for c in range(3):
        val = lerp3(w000 * f[xa, ya, za, c], w100 * f[xb, ya, za, c], w010 * f[xa, yb, za, c],
                    w110 * f[xb, yb, za, c], w001 * f[xa, ya, zb, c], w101 * f[xb, ya, zb, c],
                    w011 * f[xa, yb, zb, c], w111 * f[xb, yb, zb, c], fx, fy, fz)
        if disp:  # f - id: the taps' own coordinate along c, interpolated, taken off (the weights sum to 1)
            val -= (xa + fx * (xb - xa)) if c == 0 else ((ya + fy * (yb - ya)) if c == 1 else (za + fz * (zb - za)))
        rv = 0.0
        if both:
            rv = lerp3(w000 * g[xa, ya, za, c], w100 * g[xb, ya, za, c], w010 * g[xa, yb, za, c],
                       w110 * g[xb, yb, za, c], w001 * g[xa, ya, zb, c], w101 * g[xb, ya, zb, c],
                       w011 * g[xa, yb, zb, c], w111 * g[xb, yb, zb, c], fx, fy, fz)
        if c == 0:
            s0 = val
            r0 = rv
        elif c == 1:
            s1 = val
            r1 = rv
        else:
            s2 = val
            r2 = rv
    return s0, s1, s2, r0, r1, r2


@ca.func
def _sample(f: ca.Field3D, g: ca.Field3D, both: bool, px: float, py: float, pz: float, cubic: bool, zero: bool,
            disp: bool):
    """The three components of f (disp: of f - id, f an H-field in voxels), and with both those of g, at
    the position p (voxels), sampled by a Catmull-Rom cubic (taps floor(p) - 1 .. floor(p) + 2 per axis) or
    trilinearly (floor(p), floor(p) + 1: _sample_linear); a tap outside the grid counts 0 (zero: CoAd's
    PARTIAL_ZERO) or reads the nearest voxel (its displacement, with disp: LDDMMComposeStep's and
    Resample's CLAMP). On a grid of one voxel in z, z is 0. Returns (f0, f1, f2, g0, g1, g2), g's 0 without
    both. The one sampler of every pass below; the cubic taps in two loops, not three (three nested loops
    made NVRTC take minutes)."""
    nx, ny, nz = f.shape
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    r0 = 0.0
    r1 = 0.0
    r2 = 0.0
    if not cubic:
        s0, s1, s2, r0, r1, r2 = _sample_linear(f, g, both, px, py, pz, zero, disp)
    else:
        x0 = int(math.floor(px))
        y0 = int(math.floor(py))
        z0 = int(math.floor(pz)) if nz > 1 else 0
        fx = px - x0
        fy = py - y0
        fz = pz - z0
        for t in range(16 if nz > 1 else 4):  # the rows of taps (y, z), then x along each
            dy = t & 3
            dz = t >> 2
            ty = y0 - 1 + dy
            tz = z0 - 1 + dz if nz > 1 else 0
            if not zero:
                ty = min(max(ty, 0), ny - 1)
                tz = min(max(tz, 0), nz - 1)
            if ty >= 0 and ty < ny and tz >= 0 and tz < nz:
                wy = _cr(fy, dy) * (_cr(fz, dz) if nz > 1 else 1.0)
                for dx in range(4):
                    tx = x0 - 1 + dx
                    if not zero:
                        tx = min(max(tx, 0), nx - 1)
                    if tx >= 0 and tx < nx:
                        w = _cr(fx, dx) * wy
                        if disp:
                            s0 += w * (f[tx, ty, tz, 0] - tx)
                            s1 += w * (f[tx, ty, tz, 1] - ty)
                            s2 += w * (f[tx, ty, tz, 2] - tz)
                        else:
                            s0 += w * f[tx, ty, tz, 0]
                            s1 += w * f[tx, ty, tz, 1]
                            s2 += w * f[tx, ty, tz, 2]
                        if both:
                            r0 += w * g[tx, ty, tz, 0]
                            r1 += w * g[tx, ty, tz, 1]
                            r2 += w * g[tx, ty, tz, 2]
    return s0, s1, s2, r0, r1, r2


@ca.func
def _image_at(I0: ca.Image3D, qx: float, qy: float, qz: float) -> float:
    """I0 at the position q (voxels): trilinear, q clamped into the grid (ApplyH's default)."""
    nx, ny, nz = I0.shape
    cx = min(max(qx, 0.0), nx - 1.0)
    cy = min(max(qy, 0.0), ny - 1.0)
    cz = min(max(qz, 0.0), nz - 1.0) if nz > 1 else 0.0
    a0 = int(math.floor(cx))
    b0 = int(math.floor(cy))
    c0 = int(math.floor(cz))
    a1 = min(a0 + 1, nx - 1)
    b1 = min(b0 + 1, ny - 1)
    c1 = min(c0 + 1, nz - 1)
    return lerp3(I0[a0, b0, c0], I0[a1, b0, c0], I0[a0, b1, c0], I0[a1, b1, c0], I0[a0, b0, c1], I0[a1, b0, c1],
                 I0[a0, b1, c1], I0[a1, b1, c1], cx - a0, cy - b0, cz - c0)


@ca.func
def _along(v: ca.Field3D, vp: ca.Field3D, a: float, b: float, dt: float, sign: float, px: float, py: float, pz: float,
           wx: float, wy: float, wz: float, rx: float, ry: float, rz: float, sx: float, sy: float, sz: float,
           cubic: bool):
    """The midpoint rule's step from p (voxels of a grid r times finer than v's, per axis, the same box):
    p + sign dt d / spacing, d = w(p + sign dt/2 w_p / spacing), w_p = (wx, wy, wz) the velocity at p and
    w = a v + b vp sampled at the position's centre on v's grid, r q + (r - 1) / 2 (Resample's centres),
    clamped into it. On a grid of one voxel in z, z stays."""
    mx, my, mz = v.shape
    cx = min(max(rx * (px + sign * 0.5 * dt * wx / sx) + 0.5 * (rx - 1.0), 0.0), mx - 1.0)
    cy = min(max(ry * (py + sign * 0.5 * dt * wy / sy) + 0.5 * (ry - 1.0), 0.0), my - 1.0)
    cz = min(max(rz * (pz + sign * 0.5 * dt * wz / sz) + 0.5 * (rz - 1.0), 0.0), mz - 1.0)
    d0, d1, d2, e0, e1, e2 = _sample(v, vp, b != 0.0, cx, cy, cz, cubic, False, False)
    qx = px + sign * dt * (a * d0 + b * e0) / sx
    qy = py + sign * dt * (a * d1 + b * e1) / sy
    qz = pz + sign * dt * (a * d2 + b * e2) / sz if mz > 1 else pz
    return qx, qy, qz


@ca.kernel(register=False, block=BLOCK)
def coad(out: ca.Field3D, g: ca.Field3D, m: ca.Field3D, out2: ca.Field3D, m2: ca.Field3D, c2: float, sx: float,
         sy: float, sz: float, with2: bool, cubic: bool):
    """out(x) = |Dg(x)| Dg_w(x)^T m(g(x)) (CoAd's meaning: Dg in voxels by central differences, the
    identity's row and column along an axis of one voxel; Dg_w = S Dg S^-1) with m sampled by a
    Catmull-Rom cubic or trilinearly, taps outside the grid counting 0 (CoAd's PARTIAL_ZERO). Trilinear, it
    is ca.CoAd off the border; at the border Dg takes the one-sided difference (the identity maps m to m),
    where ca.CoAd halves it as PyCA did (test_shoot_band pins both). with2: also out2 = c2 m2 o g, sampled
    the same way (the adjoint sweep's momentum carried back)."""
    i, j, k = ca.index()
    nx, ny, nz = out.shape
    cx = 0.5 if i > 0 and i < nx - 1 else 1.0
    cy = 0.5 if j > 0 and j < ny - 1 else 1.0
    cz = 0.5 if k > 0 and k < nz - 1 else 1.0
    a00 = cx * (g[i + 1, j, k, 0] - g[i - 1, j, k, 0])
    a10 = cx * (g[i + 1, j, k, 1] - g[i - 1, j, k, 1])
    a20 = cx * (g[i + 1, j, k, 2] - g[i - 1, j, k, 2])
    a01 = cy * (g[i, j + 1, k, 0] - g[i, j - 1, k, 0])
    a11 = cy * (g[i, j + 1, k, 1] - g[i, j - 1, k, 1])
    a21 = cy * (g[i, j + 1, k, 2] - g[i, j - 1, k, 2])
    a02 = 0.0
    a12 = 0.0
    a22 = 1.0
    a20 = a20 if nz > 1 else 0.0
    a21 = a21 if nz > 1 else 0.0
    if nz > 1:
        a02 = cz * (g[i, j, k + 1, 0] - g[i, j, k - 1, 0])
        a12 = cz * (g[i, j, k + 1, 1] - g[i, j, k - 1, 1])
        a22 = cz * (g[i, j, k + 1, 2] - g[i, j, k - 1, 2])
    det = a00 * (a11 * a22 - a12 * a21) - a01 * (a10 * a22 - a12 * a20) + a02 * (a10 * a21 - a11 * a20)
    px = g[i, j, k, 0]
    py = g[i, j, k, 1]
    pz = g[i, j, k, 2]
    m0, m1, n2, b0, b1, b2 = _sample(m, m2, with2, px, py, pz, cubic, True, False)
    # (Dg_w^T m)_d = sum_c (s_c / s_d) a_cd m_c
    out[i, j, k, 0] = det * (a00 * m0 + (sy / sx) * a10 * m1 + (sz / sx) * a20 * n2)
    out[i, j, k, 1] = det * ((sx / sy) * a01 * m0 + a11 * m1 + (sz / sy) * a21 * n2)
    out[i, j, k, 2] = det * ((sx / sz) * a02 * m0 + (sy / sz) * a12 * m1 + a22 * n2)
    if with2:
        out2[i, j, k, 0] = c2 * b0
        out2[i, j, k, 1] = c2 * b1
        out2[i, j, k, 2] = c2 * b2


@ca.kernel(register=False, block=BLOCK, check_sizes=False)
def upsample(out: ca.Field3D, h: ca.Field3D, rx: float, ry: float, rz: float, I_out: ca.Image3D, I0: ca.Image3D,
             r: ca.Image3D, J: ca.Image3D, with_image: bool, cubic: bool):
    """out = the H-field h (voxels of its grid, a coarser one of the same box) on out's grid (voxels of
    out's): at out's voxel x the coarse position p = r x + (r - 1) / 2 per axis, clamped into h's grid
    (Resample's centres and CLAMP), r = coarse size / fine size; out(x) = x + (h - id)(p) / r with the
    displacement sampled by a Catmull-Rom cubic (or trilinearly), taps clamped. with_image: also I_out = I0 o out (ApplyH's
    default: trilinear, the position clamped into the grid) and r = I_out - J (images of out's grid)."""
    i, j, k = ca.index()
    mx, my, mz = h.shape
    px = min(max(rx * i + 0.5 * (rx - 1.0), 0.0), mx - 1.0)
    py = min(max(ry * j + 0.5 * (ry - 1.0), 0.0), my - 1.0)
    pz = min(max(rz * k + 0.5 * (rz - 1.0), 0.0), mz - 1.0)
    e0, e1, e2, _0, _1, _2 = _sample(h, h, False, px, py, pz, cubic, False, True)
    qx = i + e0 / rx
    qy = j + e1 / ry
    qz = k + e2 / rz
    out[i, j, k, 0] = qx
    out[i, j, k, 1] = qy
    out[i, j, k, 2] = qz
    if with_image:
        val = _image_at(I0, qx, qy, qz)
        I_out[i, j, k] = val
        r[i, j, k] = val - J[i, j, k]


@ca.kernel(register=False, block=BLOCK)
def step(out: ca.Field3D, h: ca.Field3D, v: ca.Field3D, vp: ca.Field3D, a: float, b: float, dt: float, sign: float,
         sx: float, sy: float, sz: float, compose: bool, cubic: bool):
    """_geodesic_kernels.step with cubic samples (or trilinear ones), in one pass: q = x + sign dt d(x) / spacing with d = w(x +
    sign dt/2 w(x) / spacing), w = a v + b vp (the midpoint clamped into the grid, w sampled there by a
    Catmull-Rom cubic with clamped taps), then out = q, or out = h(q) (compose: h extended beyond the grid
    by its border displacement, LDDMMComposeStep's rule; its displacement h - id sampled cubically, taps clamped)."""
    i, j, k = ca.index()
    qx, qy, qz = _along(v, vp, a, b, dt, sign, 1.0 * i, 1.0 * j, 1.0 * k, a * v[i, j, k, 0] + b * vp[i, j, k, 0],
                        a * v[i, j, k, 1] + b * vp[i, j, k, 1], a * v[i, j, k, 2] + b * vp[i, j, k, 2], 1.0, 1.0, 1.0,
                        sx, sy, sz, cubic)
    if not compose:
        out[i, j, k, 0] = qx
        out[i, j, k, 1] = qy
        out[i, j, k, 2] = qz
        return
    e0, e1, e2, _0, _1, _2 = _sample(h, h, False, qx, qy, qz, cubic, False, True)
    out[i, j, k, 0] = qx + e0
    out[i, j, k, 1] = qy + e1
    out[i, j, k, 2] = qz + e2


@ca.kernel(register=False, block=BLOCK, check_sizes=False)
def trace(y: ca.Field3D, v: ca.Field3D, vp: ca.Field3D, a: float, b: float, dt: float, sign: float, rx: float,
          ry: float, rz: float, sx: float, sy: float, sz: float, first: bool, cubic: bool, I_out: ca.Image3D,
          I0: ca.Image3D, r: ca.Image3D, J: ca.Image3D, with_image: bool):
    """One step along the characteristics of a map on the images' grid (y's, voxels), with the velocity
    w = a v + b vp of a coarser grid of the same box (world units): sign -1, a step back of phi_{1,0}:
    y <- y - dt d(y) / spacing,
    d(p) = w(p - dt/2 w(p) / spacing) (Geodesic's step: the midpoint rule), w sampled at the coarse
    position c = r p + (r - 1) / 2 (Resample's centres, clamped into the coarse grid; r = coarse size / fine
    size) by a Catmull-Rom cubic or trilinearly, taps clamped. first: y starts as the identity. T such steps,
    from the last velocity to the first, give phi_{1,0}(x) = h_T(x) with no sample of a map (the band's
    map on the images' grid, as FLASH integrates it); sign +1, from the first to the last, phi_{0,1}
    (Geodesic.forward_map's steps s_j). with_image: then I_out = I0 o y (ApplyH's default) and r = I_out - J."""
    i, j, k = ca.index()
    mx, my, mz = v.shape
    px = 1.0 * i
    py = 1.0 * j
    pz = 1.0 * k
    if not first:
        px = y[i, j, k, 0]
        py = y[i, j, k, 1]
        pz = y[i, j, k, 2]
    cx = min(max(rx * px + 0.5 * (rx - 1.0), 0.0), mx - 1.0)
    cy = min(max(ry * py + 0.5 * (ry - 1.0), 0.0), my - 1.0)
    cz = min(max(rz * pz + 0.5 * (rz - 1.0), 0.0), mz - 1.0)
    d0, d1, d2, e0, e1, e2 = _sample(v, vp, b != 0.0, cx, cy, cz, cubic, False, False)  # w at p (vp unread when b = 0)
    px, py, pz = _along(v, vp, a, b, dt, sign, px, py, pz, a * d0 + b * e0, a * d1 + b * e1, a * d2 + b * e2, rx, ry,
                        rz, sx, sy, sz, cubic)
    y[i, j, k, 0] = px
    y[i, j, k, 1] = py
    y[i, j, k, 2] = pz
    if with_image:
        val = _image_at(I0, px, py, pz)
        I_out[i, j, k] = val
        r[i, j, k] = val - J[i, j, k]
