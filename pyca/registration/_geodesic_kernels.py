"""Fused passes of the geodesic's shooting and adjoint sweep (pyca.registration.geodesic,
Geodesic.fused): each kernel does in one pass over the grid what a chain of pyca operations does in
several, with the same arithmetic (central differences with clamped reads, PyCA's border rule;
trilinear sampling with the same background strategies). tests/python/test_shoot.py compares them
with the chains."""
from __future__ import annotations

import math

import pyca as ca  # (the kernels: pyca.kernel; imported by geodesic.py when first used)

__all__ = ["step", "transport", "force", "momentum_update"]

# The GPU launch's thread block: 32 x 4 x 1 took 2-6% less than pyca's default 256 threads in each of the
# four kernels (H200, 128^3, the same outputs bit for bit: benchmarks/bench_shoot_floor.py, docs/performance.md)
BLOCK = (32, 4, 1)


@ca.func  # (also _band_kernels'; __all__ lists the kernels)
def lerp3(q000, q100, q010, q110, q001, q101, q011, q111, fx: float, fy: float, fz: float) -> float:
    """Trilinear interpolation of the corner values q_xyz at the fractions (fx, fy, fz)."""
    q00 = q000 + fx * (q100 - q000)
    q10 = q010 + fx * (q110 - q010)
    q01 = q001 + fx * (q101 - q001)
    q11 = q011 + fx * (q111 - q011)
    q0 = q00 + fy * (q10 - q00)
    q1 = q01 + fy * (q11 - q01)
    return q0 + fz * (q1 - q0)


@ca.func
def corner_weights(x0: int, y0: int, z0: int, nx: int, ny: int, nz: int, zero: bool):
    """The factors of the eight trilinear corners from (x0, y0, z0), (w000, w100, w010, w110, w001, w101, w011,
    w111) as lerp3 takes them: 1, or with zero 0 for a corner outside the grid (PyCA's
    BACKGROUND_STRATEGY_PARTIAL_ZERO)."""
    ax0 = 1.0 if not zero or (x0 >= 0 and x0 < nx) else 0.0
    ax1 = 1.0 if not zero or (x0 + 1 >= 0 and x0 + 1 < nx) else 0.0
    ay0 = 1.0 if not zero or (y0 >= 0 and y0 < ny) else 0.0
    ay1 = 1.0 if not zero or (y0 + 1 >= 0 and y0 + 1 < ny) else 0.0
    az0 = 1.0 if not zero or (z0 >= 0 and z0 < nz) else 0.0
    az1 = 1.0 if not zero or (z0 + 1 >= 0 and z0 + 1 < nz) else 0.0
    return (ax0 * ay0 * az0, ax1 * ay0 * az0, ax0 * ay1 * az0, ax1 * ay1 * az0, ax0 * ay0 * az1, ax1 * ay0 * az1,
            ax0 * ay1 * az1, ax1 * ay1 * az1)


@ca.kernel(register=False, block=BLOCK)
def step(out: ca.Field3D, h: ca.Field3D, v: ca.Field3D, vp: ca.Field3D, a: float, b: float, dt: float, sign: float,
         sx: float, sy: float, sz: float, compose: bool):
    """p = x + sign dt d(x) / spacing, d(x) = w(x + sign dt/2 w(x) / spacing), w = a v + b vp (sampled
    with its border clamped, as ApplyV / ApplyVInv); out = p (not compose: sign +1, the step back
    x + dt w(x + dt/2 w) of the adjoint sweep; sign -1 from the identity, the first shooting step) or
    out = h(p) (compose: h trilinear, extended beyond the grid by its border displacement, h(q) = q +
    (h - id)(clamp(q)): LDDMMComposeStep's rule; sign -1, a shooting step)."""
    i, j, k = ca.index()
    nx, ny, nz = out.shape
    wx = a * v[i, j, k, 0] + b * vp[i, j, k, 0]
    wy = a * v[i, j, k, 1] + b * vp[i, j, k, 1]
    wz = a * v[i, j, k, 2] + b * vp[i, j, k, 2]
    px = min(max(i + sign * 0.5 * dt * wx / sx, 0.0), nx - 1.0)
    py = min(max(j + sign * 0.5 * dt * wy / sy, 0.0), ny - 1.0)
    pz = min(max(k + sign * 0.5 * dt * wz / sz, 0.0), nz - 1.0)
    x0 = int(math.floor(px))
    y0 = int(math.floor(py))
    z0 = int(math.floor(pz))
    fx = px - x0
    fy = py - y0
    fz = pz - z0
    qx = 0.0
    qy = 0.0
    qz = 0.0
    for c in range(3):
        q = lerp3(a * v[x0, y0, z0, c] + b * vp[x0, y0, z0, c], a * v[x0 + 1, y0, z0, c] + b * vp[x0 + 1, y0, z0, c],
                   a * v[x0, y0 + 1, z0, c] + b * vp[x0, y0 + 1, z0, c],
                   a * v[x0 + 1, y0 + 1, z0, c] + b * vp[x0 + 1, y0 + 1, z0, c],
                   a * v[x0, y0, z0 + 1, c] + b * vp[x0, y0, z0 + 1, c],
                   a * v[x0 + 1, y0, z0 + 1, c] + b * vp[x0 + 1, y0, z0 + 1, c],
                   a * v[x0, y0 + 1, z0 + 1, c] + b * vp[x0, y0 + 1, z0 + 1, c],
                   a * v[x0 + 1, y0 + 1, z0 + 1, c] + b * vp[x0 + 1, y0 + 1, z0 + 1, c], fx, fy, fz)
        if c == 0:
            qx = i + sign * dt * q / sx
        elif c == 1:
            qy = j + sign * dt * q / sy
        else:
            qz = k + sign * dt * q / sz
    if not compose:
        out[i, j, k, 0] = qx
        out[i, j, k, 1] = qy
        out[i, j, k, 2] = qz
        return
    u0 = int(math.floor(qx))  # the corner and the fractions of the departure point, per axis
    gx = qx - u0
    v0 = int(math.floor(qy))
    gy = qy - v0
    t0 = int(math.floor(qz))
    gz = qz - t0
    for c in range(3):
        acc = 0.0
        for dz in range(2):
            for dy in range(2):
                for dx in range(2):
                    ti = u0 + dx
                    tj = v0 + dy
                    tk = t0 + dz
                    ci = min(max(ti, 0), nx - 1)
                    cj = min(max(tj, 0), ny - 1)
                    ck = min(max(tk, 0), nz - 1)
                    # a tap beyond the grid: the border's displacement continued (h - id at the clamped tap)
                    shift = float(ti - ci) if c == 0 else (float(tj - cj) if c == 1 else float(tk - ck))
                    wgt = (gx if dx == 1 else 1.0 - gx) * (gy if dy == 1 else 1.0 - gy) * (gz if dz == 1 else 1.0 - gz)
                    acc += wgt * (h[ci, cj, ck, c] + shift)
        out[i, j, k, c] = acc


@ca.kernel(register=False, block=BLOCK)
def transport(I_out: ca.Image3D, m_out: ca.Field3D, I_in: ca.Image3D, m_in: ca.Field3D, s: ca.Field3D,
              with_m: bool):
    """I_out = |D s| I_in o s, m_out = m_in o s (trilinear, corners outside the grid count as 0: PyCA's
    BACKGROUND_STRATEGY_PARTIAL_ZERO); m only when with_m. |D s|: the determinant of the H-field's
    differences in voxels, central inside, one-sided at the border (JacDetH's DIFF_CENTRAL, BC_APPROX,
    times the voxel volume: transforms.jacobian_det); 2 x 2 on a 2-D grid."""
    i, j, k = ca.index()
    nx, ny, nz = I_in.shape
    cx = 0.5 if i > 0 and i < nx - 1 else 1.0
    cy = 0.5 if j > 0 and j < ny - 1 else 1.0
    cz = 0.5 if k > 0 and k < nz - 1 else 1.0
    a00 = cx * (s[i + 1, j, k, 0] - s[i - 1, j, k, 0])
    a10 = cx * (s[i + 1, j, k, 1] - s[i - 1, j, k, 1])
    a20 = cx * (s[i + 1, j, k, 2] - s[i - 1, j, k, 2])
    a01 = cy * (s[i, j + 1, k, 0] - s[i, j - 1, k, 0])
    a11 = cy * (s[i, j + 1, k, 1] - s[i, j - 1, k, 1])
    a21 = cy * (s[i, j + 1, k, 2] - s[i, j - 1, k, 2])
    jac = a00 * a11 - a01 * a10
    if nz > 1:
        a02 = cz * (s[i, j, k + 1, 0] - s[i, j, k - 1, 0])
        a12 = cz * (s[i, j, k + 1, 1] - s[i, j, k - 1, 1])
        a22 = cz * (s[i, j, k + 1, 2] - s[i, j, k - 1, 2])
        jac = a00 * (a11 * a22 - a12 * a21) - a01 * (a10 * a22 - a12 * a20) + a02 * (a10 * a21 - a11 * a20)
    px = s[i, j, k, 0]
    py = s[i, j, k, 1]
    pz = s[i, j, k, 2]
    x0 = int(math.floor(px))
    y0 = int(math.floor(py))
    z0 = int(math.floor(pz))
    fx = px - x0
    fy = py - y0
    fz = pz - z0
    # PARTIAL_ZERO: a corner outside the grid counts as 0
    w000, w100, w010, w110, w001, w101, w011, w111 = corner_weights(x0, y0, z0, nx, ny, nz, True)
    xa = min(max(x0, 0), nx - 1)
    xb = min(max(x0 + 1, 0), nx - 1)
    ya = min(max(y0, 0), ny - 1)
    yb = min(max(y0 + 1, 0), ny - 1)
    za = min(max(z0, 0), nz - 1)
    zb = min(max(z0 + 1, 0), nz - 1)
    I_out[i, j, k] = jac * lerp3(w000 * I_in[xa, ya, za], w100 * I_in[xb, ya, za], w010 * I_in[xa, yb, za],
                                  w110 * I_in[xb, yb, za], w001 * I_in[xa, ya, zb], w101 * I_in[xb, ya, zb],
                                  w011 * I_in[xa, yb, zb], w111 * I_in[xb, yb, zb], fx, fy, fz)
    if with_m:
        for c in range(3):
            m_out[i, j, k, c] = lerp3(w000 * m_in[xa, ya, za, c], w100 * m_in[xb, ya, za, c],
                                       w010 * m_in[xa, yb, za, c], w110 * m_in[xb, yb, za, c],
                                       w001 * m_in[xa, ya, zb, c], w101 * m_in[xb, ya, zb, c],
                                       w011 * m_in[xa, yb, zb, c], w111 * m_in[xb, yb, zb, c], fx, fy, fz)


@ca.kernel(register=False, block=BLOCK)
def momentum_update(mhat: ca.Field3D, mt: ca.Field3D, f: ca.Field3D, v: ca.Field3D, dt: float, sx: float,
                    sy: float, sz: float):
    """mhat = mt - dt (f + (D v) mt), D v by central differences per world unit with clamped reads
    (JacobianXY's rule; no z derivative on a 2-D grid)."""
    i, j, k = ca.index()
    nx, ny, nz = v.shape
    ax = mt[i, j, k, 0]
    ay = mt[i, j, k, 1]
    az = mt[i, j, k, 2]
    for c in range(3):
        dx = (v[i + 1, j, k, c] - v[i - 1, j, k, c]) / (2.0 * sx)
        dy = (v[i, j + 1, k, c] - v[i, j - 1, k, c]) / (2.0 * sy)
        dz = (v[i, j, k + 1, c] - v[i, j, k - 1, c]) / (2.0 * sz) if nz > 1 else 0.0
        mhat[i, j, k, c] = mt[i, j, k, c] - dt * (f[i, j, k, c] + dx * ax + dy * ay + dz * az)


@ca.kernel(register=False, block=BLOCK)
def force(f: ca.Field3D, I0: ca.Image3D, h: ca.Field3D, Ihat: ca.Image3D, X: ca.Field3D, m: ca.Field3D, J: ca.Field3D,
          sx: float, sy: float, sz: float, sampled: bool, with_ad: bool, covector: bool):
    """f = Ihat grad(I) - ad*_X m with I = I0 o h (sampled: trilinear with the coordinate clamped,
    ApplyH's default; else I = I0), ad*_X m = (DX)^T m + div(m (x) X) (CoAdInf's meaning: Gradient,
    JacobianXtY and DivergenceTensor, central differences per world unit with clamped reads; no z term on
    a 2-D grid); without with_ad, f = Ihat grad(I); covector: f = J - ad*_X m (the band-limited
    geodesic's sweep, pyca.registration.band; I0, h and Ihat unread). Each neighbour is read once: (DX)^T m
    is the difference of X . m(x) (m at the voxel itself), div(m (x) X)_c the difference of m_c X_axis."""
    i, j, k = ca.index()
    nx, ny, nz = f.shape
    mx = m[i, j, k, 0]
    my = m[i, j, k, 1]
    mz = m[i, j, k, 2]
    g0 = 0.0  # the differences of I, of X . m(x), of m (x) X along x, y, z
    g1 = 0.0
    g2 = 0.0
    t0 = 0.0
    t1 = 0.0
    t2 = 0.0
    d0 = 0.0
    d1 = 0.0
    d2 = 0.0
    for n in range(6 if nz > 1 else 4):  # the six neighbours (indices clamped), -x, +x, -y, ...
        ax = n // 2
        sg = 2 * (n % 2) - 1
        ii = i + sg if ax == 0 else i
        jj = j + sg if ax == 1 else j
        kk = k + sg if ax == 2 else k
        w = sg / (2.0 * (sx if ax == 0 else (sy if ax == 1 else sz)))
        val = 0.0  # (covector: no image)
        if not covector and not sampled:
            val = I0[ii, jj, kk]
        elif not covector:
            px = min(max(h[ii, jj, kk, 0], 0.0), nx - 1.0)
            py = min(max(h[ii, jj, kk, 1], 0.0), ny - 1.0)
            pz = min(max(h[ii, jj, kk, 2], 0.0), nz - 1.0)
            x0 = int(math.floor(px))
            y0 = int(math.floor(py))
            z0 = int(math.floor(pz))
            val = lerp3(I0[x0, y0, z0], I0[x0 + 1, y0, z0], I0[x0, y0 + 1, z0], I0[x0 + 1, y0 + 1, z0],
                         I0[x0, y0, z0 + 1], I0[x0 + 1, y0, z0 + 1], I0[x0, y0 + 1, z0 + 1],
                         I0[x0 + 1, y0 + 1, z0 + 1], px - x0, py - y0, pz - z0)
        tx = 0.0
        dd = 0.0
        if with_ad:
            xa = X[ii, jj, kk, 0]
            xb = X[ii, jj, kk, 1]
            xc = X[ii, jj, kk, 2]
            tx = w * (xa * mx + xb * my + xc * mz)
            dd = w * (xa if ax == 0 else (xb if ax == 1 else xc))
            d0 += dd * m[ii, jj, kk, 0]
            d1 += dd * m[ii, jj, kk, 1]
            d2 += dd * m[ii, jj, kk, 2]
        if ax == 0:
            g0 += w * val
            t0 += tx
        elif ax == 1:
            g1 += w * val
            t1 += tx
        else:
            g2 += w * val
            t2 += tx
    if covector:
        f[i, j, k, 0] = J[i, j, k, 0] - (t0 + d0)
        f[i, j, k, 1] = J[i, j, k, 1] - (t1 + d1)
        f[i, j, k, 2] = J[i, j, k, 2] - (t2 + d2)
        return
    ih = Ihat[i, j, k]
    f[i, j, k, 0] = ih * g0 - (t0 + d0)
    f[i, j, k, 1] = ih * g1 - (t1 + d1)
    f[i, j, k, 2] = ih * g2 - (t2 + d2)
