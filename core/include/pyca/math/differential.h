// Per-voxel math of the `differential` family (docs/operations/differential.md), shared by the
// OpenMP loops (core/src/ops/differential.cpp) and the CUDA kernels (cuda/src/ops/differential.cu).
//
// Conventions: `p` points at the voxel being computed, `stride` is the distance in floats to the
// next voxel along the axis, `i` the voxel's index along that axis and `n` the number of voxels
// along it. Differences are per index unit here; callers multiply by 1 / spacing.
#pragma once

#include <cmath>
#include <cstddef>

#include "pyca/config.h"
#include "pyca/enums.h"

namespace pyca {
namespace math {

// The two samples and the weight of a one-dimensional finite difference at index i of the samples
// p[k * stride]: the difference is w * (p[next] - p[prev]) (offsets from p[0]).
//  - inside: forward f[i+1]-f[i], backward f[i]-f[i-1], central (f[i+1]-f[i-1])/2;
//  - BC_CLAMP: a sample beyond the border equals the border sample;
//  - BC_WRAP: periodic;
//  - BC_APPROX (PyCA's): a central difference at the border becomes the one-sided difference that
//    stays inside (forward at 0, backward at n-1); a forward difference at n-1 or a backward
//    difference at 0 is 0, as with BC_CLAMP.
// An axis with a single sample has derivative 0 (w = 0).
struct Stencil1 {
  std::ptrdiff_t next, prev;
  float w;
};

PYCA_HD Stencil1 stencil1(std::ptrdiff_t stride, int i, int n, DiffT d, BoundaryCondT bc) {
  if (n <= 1) return Stencil1{0, 0, 0.f};
  const bool hasNext = i + 1 < n, hasPrev = i > 0;
  const std::ptrdiff_t wrap = std::ptrdiff_t(n - 1) * stride;
  if (d == DIFF_FORWARD) {
    if (hasNext) return Stencil1{stride, 0, 1.f};
    if (bc == BC_WRAP) return Stencil1{-wrap, 0, 1.f};
    return Stencil1{0, 0, 0.f};  // BC_CLAMP, BC_APPROX
  }
  if (d == DIFF_BACKWARD) {
    if (hasPrev) return Stencil1{0, -stride, 1.f};
    if (bc == BC_WRAP) return Stencil1{0, wrap, 1.f};
    return Stencil1{0, 0, 0.f};  // BC_CLAMP, BC_APPROX
  }
  // DIFF_CENTRAL
  if (hasNext && hasPrev) return Stencil1{stride, -stride, 0.5f};
  if (bc == BC_APPROX) return hasNext ? Stencil1{stride, 0, 1.f} : Stencil1{0, -stride, 1.f};
  if (bc == BC_WRAP) return Stencil1{hasNext ? stride : -wrap, hasPrev ? -stride : wrap, 0.5f};
  return Stencil1{hasNext ? stride : 0, hasPrev ? -stride : 0, 0.5f};  // BC_CLAMP
}

// w (next - prev): a difference of stencil1's weight (T: float, or a vector of floats on the CPU's
// SIMD rows, where the interior's central difference is weightedDiff(0.5f, ...)).
template <class T>
PYCA_HD_LANES T weightedDiff(float w, T next, T prev) {
  return w * (next - prev);
}

// One-dimensional finite difference (per index unit) at index i of the samples p[k * stride], with
// the stencil of stencil1().
PYCA_HD float diff1(const float* p, std::ptrdiff_t stride, int i, int n, DiffT d, BoundaryCondT bc) {
  const Stencil1 s = stencil1(stride, i, n, d, bc);
  if (s.w == 0.f) return 0.f;
  return weightedDiff(s.w, p[s.next], p[s.prev]);
}

// The same difference of the product a * b (PyCA's finiteDiffProd: the difference of the products,
// not the product rule), per index unit.
PYCA_HD float diffProd1(const float* a, const float* b, std::ptrdiff_t stride, int i, int n, DiffT d,
                        BoundaryCondT bc) {
  const Stencil1 s = stencil1(stride, i, n, d, bc);
  if (s.w == 0.f) return 0.f;
  return s.w * (a[s.next] * b[s.next] - a[s.prev] * b[s.prev]);
}

// diff1 restricted to a mask (m points at the mask value of the same voxel): 0 where the mask is
// 0; a neighbour whose mask is 0 is treated like a neighbour beyond the border: its value is the
// centre's (so a forward/backward difference towards it is 0), except that with BC_APPROX a central
// difference becomes one-sided (0 if neither side is usable). With BC_WRAP the grid border wraps
// and masked neighbours are clamped.
PYCA_HD float diffMask1(const float* p, const float* m, std::ptrdiff_t stride, int i, int n, DiffT d,
                        BoundaryCondT bc) {
  if (m[0] == 0.f || n <= 1) return 0.f;
  const float v = p[0];
  const std::ptrdiff_t wrap = std::ptrdiff_t(n - 1) * stride;
  std::ptrdiff_t on = stride, op = -stride;  // offsets of the next and previous samples
  bool hasNext = i + 1 < n, hasPrev = i > 0;
  if (bc == BC_WRAP) {
    if (!hasNext) on = -wrap;
    if (!hasPrev) op = wrap;
    hasNext = hasPrev = true;
  }
  const bool nextOk = hasNext && m[on] != 0.f;
  const bool prevOk = hasPrev && m[op] != 0.f;
  if (d == DIFF_FORWARD) return nextOk ? p[on] - v : 0.f;
  if (d == DIFF_BACKWARD) return prevOk ? v - p[op] : 0.f;
  if (nextOk && prevOk) return 0.5f * (p[on] - p[op]);
  if (bc == BC_APPROX) return nextOk ? p[on] - v : (prevOk ? v - p[op] : 0.f);
  return 0.5f * ((nextOk ? p[on] : v) - (prevOk ? p[op] : v));
}

// Second difference (per squared index unit) f[i+1] - 2 f[i] + f[i-1] with boundary condition bc
// (BC_CLAMP: the sample beyond the border is the border sample; BC_WRAP: periodic; BC_APPROX: at
// the border the second difference of the nearest centred stencil inside, 0 when n < 3).
PYCA_HD float diff2(const float* p, std::ptrdiff_t stride, int i, int n, BoundaryCondT bc) {
  if (n <= 1) return 0.f;
  const bool hasNext = i + 1 < n, hasPrev = i > 0;
  if (hasNext && hasPrev) return p[stride] - 2.f * p[0] + p[-stride];
  const std::ptrdiff_t wrap = std::ptrdiff_t(n - 1) * stride;
  if (bc == BC_WRAP) {
    const float next = hasNext ? p[stride] : p[-wrap];
    const float prev = hasPrev ? p[-stride] : p[wrap];
    return next - 2.f * p[0] + prev;
  }
  if (bc == BC_APPROX) {
    if (n < 3) return 0.f;
    const float* c = hasNext ? p + stride : p - stride;  // the nearest voxel with two neighbours
    return c[stride] - 2.f * c[0] + c[-stride];
  }
  // BC_CLAMP: the missing neighbour equals the centre
  return hasNext ? p[stride] - p[0] : p[-stride] - p[0];
}

// Grid description handed to the per-voxel functions below: size and inverse spacing.
struct Grid3 {
  int nx, ny, nz;
  float isx, isy, isz;  // 1 / spacing
  PYCA_HD std::ptrdiff_t sy() const { return nx; }
  PYCA_HD std::ptrdiff_t sz() const { return std::ptrdiff_t(nx) * ny; }
};

// Strides and sizes per axis, for the `DimT` overloads.
PYCA_HD std::ptrdiff_t axisStride(const Grid3& g, int dim) {
  return dim == 0 ? 1 : (dim == 1 ? g.sy() : g.sz());
}
PYCA_HD int axisSize(const Grid3& g, int dim) { return dim == 0 ? g.nx : (dim == 1 ? g.ny : g.nz); }
PYCA_HD float axisInvSpacing(const Grid3& g, int dim) {
  return dim == 0 ? g.isx : (dim == 1 ? g.isy : g.isz);
}

// Finite difference along `dim` per world unit at voxel (x, y, z) of `f` (p = f + linear index).
PYCA_HD float finiteDiff(const float* p, const Grid3& g, int x, int y, int z, int dim, DiffT d,
                         BoundaryCondT bc) {
  const int i = dim == 0 ? x : (dim == 1 ? y : z);
  return diff1(p, axisStride(g, dim), i, axisSize(g, dim), d, bc) * axisInvSpacing(g, dim);
}

// Gradient per world unit at voxel (x, y, z).
PYCA_HD void gradient(const float* p, const Grid3& g, int x, int y, int z, DiffT d, BoundaryCondT bc,
                      float& gx, float& gy, float& gz) {
  gx = diff1(p, 1, x, g.nx, d, bc) * g.isx;
  gy = diff1(p, g.sy(), y, g.ny, d, bc) * g.isy;
  gz = diff1(p, g.sz(), z, g.nz, d, bc) * g.isz;
}

PYCA_HD void gradientMask(const float* p, const float* m, const Grid3& g, int x, int y, int z, DiffT d,
                          BoundaryCondT bc, float& gx, float& gy, float& gz) {
  gx = diffMask1(p, m, 1, x, g.nx, d, bc) * g.isx;
  gy = diffMask1(p, m, g.sy(), y, g.ny, d, bc) * g.isy;
  gz = diffMask1(p, m, g.sz(), z, g.nz, d, bc) * g.isz;
}

// Laplacian per squared world unit at voxel (x, y, z).
PYCA_HD float laplacian(const float* p, const Grid3& g, int x, int y, int z, BoundaryCondT bc) {
  return diff2(p, 1, x, g.nx, bc) * (g.isx * g.isx) + diff2(p, g.sy(), y, g.ny, bc) * (g.isy * g.isy) +
         diff2(p, g.sz(), z, g.nz, bc) * (g.isz * g.isz);
}

// Upwind difference along an axis (PyCA's UpwindDiff): backward where speed >= 0, forward where
// speed < 0; the sample beyond the border is the border sample. Per index unit.
PYCA_HD float upwindDiff1(const float* p, std::ptrdiff_t stride, int i, int n, float speed) {
  if (speed < 0.f) return i + 1 < n ? p[stride] - p[0] : 0.f;
  return i > 0 ? p[0] - p[-stride] : 0.f;
}

// Squared contribution of one axis to the Osher-Sethian upwind gradient magnitude (PyCA's
// UpwindGradMag). dplus: forward difference (backward at the last voxel), dminus: backward
// difference (forward at the first voxel); both per world unit (multiplied by `is`).
PYCA_HD float upwindGradSq1(const float* p, std::ptrdiff_t stride, int i, int n, float is, float speed) {
  if (n <= 1) return 0.f;
  const float v = p[0];
  const float fwd = i + 1 < n ? p[stride] - v : v - p[-stride];
  const float bwd = i > 0 ? v - p[-stride] : p[stride] - v;
  const float dplus = fwd * is, dminus = bwd * is;
  float a, b;
  if (speed < 0.f) {
    a = dplus < 0.f ? dplus : 0.f;      // min(D+, 0)
    b = -dminus < 0.f ? -dminus : 0.f;  // min(-D-, 0)
  } else {
    a = dplus > 0.f ? dplus : 0.f;      // max(D+, 0)
    b = -dminus > 0.f ? -dminus : 0.f;  // max(-D-, 0)
  }
  return a * a + b * b;
}

PYCA_HD float upwindGradMag(const float* p, const Grid3& g, int x, int y, int z, float speed) {
  const float s = upwindGradSq1(p, 1, x, g.nx, g.isx, speed) +
                  upwindGradSq1(p, g.sy(), y, g.ny, g.isy, speed) +
                  upwindGradSq1(p, g.sz(), z, g.nz, g.isz, speed);
  return speed * std::sqrt(s);
}

template <class T>
PYCA_HD_LANES T det3(T a00, T a01, T a02, T a10, T a11, T a12, T a20, T a21, T a22) {
  return a00 * (a11 * a22 - a12 * a21) - a01 * (a10 * a22 - a12 * a20) + a02 * (a10 * a21 - a11 * a20);
}

// Jacobian determinant of an H-field at voxel (x, y, z), derivatives per world unit (PyCA's
// JacDetH): det(Dh) / (sx * sy * sz) with Dh per voxel index, so the identity gives
// 1 / (sx * sy * sz). hx/hy/hz point at the voxel in each component plane. On a 2-D grid the 2x2
// determinant of the x and y components and coordinates (1 / (sx * sy) for the identity).
PYCA_HD float jacDetH(const float* hx, const float* hy, const float* hz, const Grid3& g, int x, int y, int z,
                      DiffT d, BoundaryCondT bc) {
  float a00, a01, a02, a10, a11, a12;
  gradient(hx, g, x, y, z, d, bc, a00, a01, a02);
  gradient(hy, g, x, y, z, d, bc, a10, a11, a12);
  if (g.nz == 1) return a00 * a11 - a01 * a10;
  float a20, a21, a22;
  gradient(hz, g, x, y, z, d, bc, a20, a21, a22);
  return det3(a00, a01, a02, a10, a11, a12, a20, a21, a22);
}

// det(I + Dv) of a V-field (derivatives per world unit) at voxel (x, y, z). On a 2-D grid the z
// derivatives are 0, so this is the 2x2 determinant of I + D(v.x, v.y).
PYCA_HD float jacDetV(const float* vx, const float* vy, const float* vz, const Grid3& g, int x, int y, int z,
                      DiffT d, BoundaryCondT bc) {
  float a00, a01, a02, a10, a11, a12, a20, a21, a22;
  gradient(vx, g, x, y, z, d, bc, a00, a01, a02);
  gradient(vy, g, x, y, z, d, bc, a10, a11, a12);
  if (g.nz == 1) return (1.f + a00) * (1.f + a11) - a01 * a10;
  gradient(vz, g, x, y, z, d, bc, a20, a21, a22);
  return det3(1.f + a00, a01, a02, a10, 1.f + a11, a12, a20, a21, 1.f + a22);
}

// From the gradient fields of Jacobian(): rows (x0, x1, x2), (y0, y1, y2), (z0, z1, z2) at one voxel.
// H-field (PyCA's JacDetH): the plain determinant of the rows, 2x2 (x0 y1 - x1 y0) on a 2-D grid.
PYCA_HD float jacDetHFromGrads(float x0, float x1, float x2, float y0, float y1, float y2, float z0, float z1,
                               float z2, bool is2D) {
  if (is2D) return x0 * y1 - x1 * y0;
  return det3(x0, x1, x2, y0, y1, y2, z0, z1, z2);
}

// V-field (PyCA's JacDetV): det(I + G) of the rows, a full 3x3 determinant (on a 2-D grid the z
// derivatives are 0, so it is the 2x2 determinant of I + D(v.x, v.y)).
PYCA_HD float jacDetVFromGrads(float x0, float x1, float x2, float y0, float y1, float y2, float z0, float z1,
                               float z2) {
  return det3(1.f + x0, x1, x2, y0, 1.f + y1, y2, z0, z1, 1.f + z2);
}

// V-field, inverse (PyCA's JacDetVInv): det(I - G) of the rows, the first-order Jacobian
// determinant of x -> x - v(x).
PYCA_HD float jacDetVInvFromGrads(float x0, float x1, float x2, float y0, float y1, float y2, float z0,
                                  float z1, float z2) {
  return det3(1.f - x0, -x1, -x2, -y0, 1.f - y1, -y2, -z0, -z1, 1.f - z2);
}

// ---- Products of Jacobians with fields (PyCA's JacobianXY, JacobianXtY, DivergenceTensor, AdInf,
// CoAdInf). A field is passed as its three component planes f[0..2] and the linear index i of the
// voxel (x, y, z); results go to out[0..2]. PyCA fixes the stencil of these operations to
// DIFF_CENTRAL with BC_CLAMP; derivatives are per world unit.

// J[r][c] = d(f_r)/d(x_c) at the voxel, per world unit (the rows are Gradient(f_r)).
PYCA_HD void jacobianAt(const float* const f[3], std::size_t i, const Grid3& g, int x, int y, int z, DiffT d,
                        BoundaryCondT bc, float J[3][3]) {
  for (int r = 0; r < 3; ++r) gradient(f[r] + i, g, x, y, z, d, bc, J[r][0], J[r][1], J[r][2]);
}

// One row of a 3 x 3 matrix times a vector, a x + b y + c z in that order: jacobianXY's product (T: float, or
// a vector of floats on the CPU's SIMD rows).
template <class T>
PYCA_HD_LANES T rowTimes(T a, T b, T c, T x, T y, T z) {
  return a * x + b * y + c * z;
}

// out = (DX) Y.
PYCA_HD void jacobianXY(const float* const X[3], const float* const Y[3], std::size_t i, const Grid3& g,
                        int x, int y, int z, float out[3]) {
  float J[3][3];
  jacobianAt(X, i, g, x, y, z, DIFF_CENTRAL, BC_CLAMP, J);
  const float y0 = Y[0][i], y1 = Y[1][i], y2 = Y[2][i];
  for (int r = 0; r < 3; ++r) out[r] = rowTimes(J[r][0], J[r][1], J[r][2], y0, y1, y2);
}

// out = (DX)^T Y.
PYCA_HD void jacobianXtY(const float* const X[3], const float* const Y[3], std::size_t i, const Grid3& g,
                         int x, int y, int z, float out[3]) {
  float J[3][3];
  jacobianAt(X, i, g, x, y, z, DIFF_CENTRAL, BC_CLAMP, J);
  const float y0 = Y[0][i], y1 = Y[1][i], y2 = Y[2][i];
  for (int c = 0; c < 3; ++c) out[c] = J[0][c] * y0 + J[1][c] * y1 + J[2][c] * y2;
}

// out_r = sum_c d(X_r Y_c)/d(x_c): the row-wise divergence of the tensor product X (x) Y, each term
// the central difference of the product (diffProd1).
PYCA_HD void divergenceTensor(const float* const X[3], const float* const Y[3], std::size_t i, const Grid3& g,
                              int x, int y, int z, float out[3]) {
  const int idx[3] = {x, y, z};
  const int n[3] = {g.nx, g.ny, g.nz};
  const std::ptrdiff_t st[3] = {1, g.sy(), g.sz()};
  const float is[3] = {g.isx, g.isy, g.isz};
  for (int r = 0; r < 3; ++r) {
    float s = 0.f;
    for (int c = 0; c < 3; ++c) {
      s += diffProd1(X[r] + i, Y[c] + i, st[c], idx[c], n[c], DIFF_CENTRAL, BC_CLAMP) * is[c];
    }
    out[r] = s;
  }
}

// out = ad_X Y = (DX) Y - (DY) X.
PYCA_HD void adInf(const float* const X[3], const float* const Y[3], std::size_t i, const Grid3& g, int x,
                   int y, int z, float out[3]) {
  float a[3], b[3];
  jacobianXY(X, Y, i, g, x, y, z, a);
  jacobianXY(Y, X, i, g, x, y, z, b);
  for (int r = 0; r < 3; ++r) out[r] = a[r] - b[r];
}

// out = ad*_X m = (DX)^T m + div(m (x) X).
PYCA_HD void coAdInf(const float* const X[3], const float* const m[3], std::size_t i, const Grid3& g, int x,
                     int y, int z, float out[3]) {
  float a[3], b[3];
  jacobianXtY(X, m, i, g, x, y, z, a);
  divergenceTensor(m, X, i, g, x, y, z, b);
  for (int r = 0; r < 3; ++r) out[r] = a[r] + b[r];
}

}  // namespace math
}  // namespace pyca
