// Math of the `filters` family (docs/operations/filters.md), shared by the CPU implementation
// (core/src/ops/filters*.cpp) and the CUDA kernels (cuda/src/ops/filters*.cu): Gaussian kernel
// weights, clamped indexing, and the Fourier symbol of the fluid operator
//   L = -alpha Laplacian - beta grad(div) + gamma
// with its periodic finite-difference discretisation (PyCA's FluidKernelFFT).
#pragma once

#include <cmath>

#include "pyca/config.h"

namespace pyca {
namespace math {

PYCA_HD int clampIndex(int i, int n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

// Radius (voxels) used when none is given: scipy.ndimage's default truncate = 4 standard deviations.
PYCA_HD int gaussianAutoRadius(float sigmaVox) { return sigmaVox > 0.f ? int(4.f * sigmaVox + 0.5f) : 0; }

// Half of a normalised, symmetric Gaussian kernel of radius r in voxels: w[0] is the centre
// weight, w[j] the weight of the samples at -j and +j (j = 1..r), with w[0] + 2 sum w[j] = 1.
// sigmaVox <= 0 or r == 0 gives the identity (w[0] = 1). Computed in double, like scipy.
inline void gaussianHalfKernel(float sigmaVox, int r, float* w) {
  if (sigmaVox <= 0.f || r <= 0) {
    w[0] = 1.f;
    for (int j = 1; j <= r; ++j) w[j] = 0.f;
    return;
  }
  const double s2 = double(sigmaVox) * double(sigmaVox);
  double sum = 1.0;
  for (int j = 1; j <= r; ++j) sum += 2.0 * std::exp(-0.5 * double(j) * double(j) / s2);
  w[0] = float(1.0 / sum);
  for (int j = 1; j <= r; ++j) w[j] = float(std::exp(-0.5 * double(j) * double(j) / s2) / sum);
}

// ------------------------------------------------------------------------------------------------
// Fluid operator in Fourier space.
//
// For the frequency (kx, ky, kz) of an nx x ny x nz periodic grid with spacing (hx, hy, hz):
//   c_d = (2 - 2 cos(2 pi k_d / n_d)) / h_d^2   (symbol of -d^2/dx_d^2, 3-point stencil)
//   s_d = sin(2 pi k_d / n_d) / h_d              (symbol of d/dx_d, central difference, / i)
//   lambda = alpha (c_x + c_y + c_z) + gamma
//   L = lambda I + beta [[c_x, s_x s_y, s_x s_z], [s_x s_y, c_y, s_y s_z], [s_x s_z, s_y s_z, c_z]]
// (the diagonal of -grad(div) uses the 3-point second difference, the off-diagonal terms the
// product of central differences, as PyCA did). L is real, symmetric and even in k, positive
// definite for alpha > 0, beta >= 0, gamma > 0; at k = 0 with gamma = 0 it is 0 and the inverse
// returns 0 there (the mean of the field is discarded).

struct FluidParams {
  float alpha = 1.f, beta = 0.f, gamma = 0.f;
  int lpow = 1;          // power of L (>= 0)
  bool inverse = false;  // apply K = L^-lpow instead of L^lpow
  bool divFree =
      false;  // afterwards, project out the component along (s_x, s_y, s_z) (PyCA's divergence-free option)
  // The band: per axis (x, y, z) the largest |k| kept (k and n - k are one frequency, |k| = min(k,
  // n - k)); every frequency with a larger |k| on some axis is set to 0 (and adds nothing to <in,
  // out>). -1: the whole axis. FluidKernelFFT.setBand.
  int band[3] = {-1, -1, -1};
};

// Whether frequency (kx, ky, kz) of an nx x ny x nz grid lies outside P's band.
PYCA_HD bool outsideBand(const FluidParams& P, int kx, int ky, int kz, int nx, int ny, int nz) {
  const int k[3] = {kx <= nx / 2 ? kx : nx - kx, ky <= ny / 2 ? ky : ny - ky, kz <= nz / 2 ? kz : nz - kz};
  for (int a = 0; a < 3; ++a) {
    if (P.band[a] >= 0 && k[a] > P.band[a]) return true;
  }
  return false;
}

// Whether P's band drops frequencies along axis a, of n points (n / 2: the largest |k| there).
PYCA_HD bool axisBanded(const FluidParams& P, int a, int n) { return P.band[a] >= 0 && P.band[a] < n / 2; }

// Whether P's band drops any frequency of an nx x ny x nz grid.
PYCA_HD bool bandActive(const FluidParams& P, int nx, int ny, int nz) {
  return axisBanded(P, 0, nx) || axisBanded(P, 1, ny) || axisBanded(P, 2, nz);
}

// Unscaled per-axis tables: t = 2 - 2 cos(2 pi k / n) and s = sin(2 pi k / n), k = 0..n-1.
inline void fluidAxisTable(int n, float* t, float* s) {
  const double pi = 3.14159265358979323846;
  for (int k = 0; k < n; ++k) {
    const double w = 2.0 * pi * double(k) / double(n);
    t[k] = float(2.0 - 2.0 * std::cos(w));
    s[k] = float(std::sin(w));
  }
}

// One frequency's share of <in, out> = sum over voxels and components of in * out, from the
// half spectrum of a real-to-complex transform along x (nx points): in = (re0, im0) before the
// operator, out = (re, im) after it (times 1/N, as the operator's scale), so that the sum over the
// half spectrum of these terms is <in, out> (Parseval). kx = 0 and, for an even nx, kx = nx / 2
// count once; the other kx stand for themselves and their conjugates.
PYCA_HD double parsevalTerm(int kx, int nx, const float* re0, const float* im0, const float* re,
                            const float* im) {
  const double w = (kx == 0 || 2 * kx == nx) ? 1.0 : 2.0;
  double t = 0.0;
  for (int c = 0; c < 3; ++c) t += double(re0[c]) * double(re[c]) + double(im0[c]) * double(im[c]);
  return w * t;
}

// Applies L^lpow (or its inverse), times `scale`, to the complex 3-vector (re[i] + i im[i]) of one
// frequency whose scaled symbols are (cx, cy, cz) and (sx, sy, sz). `zeroFreq` marks k = 0.
PYCA_HD void fluidApplyAt(const FluidParams& P, float cx, float cy, float cz, float sx, float sy, float sz,
                          float scale, bool zeroFreq, float* re, float* im) {
  const float lambda = P.alpha * (cx + cy + cz) + P.gamma;
  if (P.lpow == 0) {
    for (int i = 0; i < 3; ++i) {
      re[i] *= scale;
      im[i] *= scale;
    }
  } else if (P.beta == 0.f) {
    // L = lambda I: a scalar per frequency.
    float f;
    if (P.inverse) {
      f = lambda != 0.f ? 1.f / lambda : 0.f;
    } else {
      f = lambda;
    }
    float fp = f;
    for (int k = 1; k < P.lpow; ++k) fp *= f;
    fp *= scale;
    for (int i = 0; i < 3; ++i) {
      re[i] *= fp;
      im[i] *= fp;
    }
  } else {
    // Symmetric 3x3 matrix L (a00, a01, a02, a11, a12, a22).
    float a00 = lambda + P.beta * cx, a11 = lambda + P.beta * cy, a22 = lambda + P.beta * cz;
    float a01 = P.beta * sx * sy, a02 = P.beta * sx * sz, a12 = P.beta * sy * sz;
    if (P.inverse) {
      // Inverse by the adjugate (L is symmetric, so is its inverse).
      const float c00 = a11 * a22 - a12 * a12, c01 = a02 * a12 - a01 * a22, c02 = a01 * a12 - a02 * a11;
      const float c11 = a00 * a22 - a02 * a02, c12 = a01 * a02 - a00 * a12, c22 = a00 * a11 - a01 * a01;
      const float det = a00 * c00 + a01 * c01 + a02 * c02;
      const float id = det != 0.f ? 1.f / det : 0.f;
      a00 = c00 * id;
      a01 = c01 * id;
      a02 = c02 * id;
      a11 = c11 * id;
      a12 = c12 * id;
      a22 = c22 * id;
    }
    for (int k = 0; k < P.lpow; ++k) {
      const float r0 = a00 * re[0] + a01 * re[1] + a02 * re[2];
      const float r1 = a01 * re[0] + a11 * re[1] + a12 * re[2];
      const float r2 = a02 * re[0] + a12 * re[1] + a22 * re[2];
      const float i0 = a00 * im[0] + a01 * im[1] + a02 * im[2];
      const float i1 = a01 * im[0] + a11 * im[1] + a12 * im[2];
      const float i2 = a02 * im[0] + a12 * im[1] + a22 * im[2];
      re[0] = r0;
      re[1] = r1;
      re[2] = r2;
      im[0] = i0;
      im[1] = i1;
      im[2] = i2;
    }
    for (int i = 0; i < 3; ++i) {
      re[i] *= scale;
      im[i] *= scale;
    }
  }
  if (P.divFree && !zeroFreq) {
    const float nsq = sx * sx + sy * sy + sz * sz;
    if (nsq > 0.f) {
      const float pr = (re[0] * sx + re[1] * sy + re[2] * sz) / nsq;
      const float pi = (im[0] * sx + im[1] * sy + im[2] * sz) / nsq;
      re[0] -= pr * sx;
      re[1] -= pr * sy;
      re[2] -= pr * sz;
      im[0] -= pi * sx;
      im[1] -= pi * sy;
      im[2] -= pi * sz;
    }
  }
}

// fluidApplyAt at frequency (kx, ky, kz) of an nx x ny x nz grid, or 0 there when it lies outside
// P's band: the per-frequency step of every FluidKernelFFT path, CPU and GPU.
PYCA_HD void fluidApplyBanded(const FluidParams& P, int kx, int ky, int kz, int nx, int ny, int nz, float cx,
                              float cy, float cz, float sx, float sy, float sz, float scale, float* re,
                              float* im) {
  if (outsideBand(P, kx, ky, kz, nx, ny, nz)) {
    for (int i = 0; i < 3; ++i) re[i] = im[i] = 0.f;
    return;
  }
  fluidApplyAt(P, cx, cy, cz, sx, sy, sz, scale, kx == 0 && ky == 0 && kz == 0, re, im);
}

}  // namespace math
}  // namespace pyca
