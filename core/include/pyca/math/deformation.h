// Per-voxel math of the deformation family (docs/operations/deformation.md), shared by the CPU
// loops (core/src/ops/deformation*.cpp) and the CUDA kernels (cuda/src/ops/deformation*.cu).
#pragma once

#include <cmath>
#include <cstddef>
#include <type_traits>

#include "pyca/config.h"
#include "pyca/enums.h"
#include "pyca/grid_info.h"
#include "pyca/math/interp.h"
#include "pyca/vec3.h"

namespace pyca {
namespace math {

// Where a gather samples its source for output voxel (x, y, z) (linear index id), in source
// voxel units:
//   POS_H       p = (fx, fy, fz)[id]                      (an H-field on the output grid)
//   POS_V       p = (x, y, z) + scale * (fx, fy, fz)[id]  (a V-field; scale = +-delta / spacing)
//   POS_AFFINE  p = scale * (x, y, z) + offset           (resampling between grids)
//   POS_MATRIX  p = m * (x, y, z) + offset, m 3x3 row-major (between grids of different directions)
enum PosMode { POS_H = 0, POS_V = 1, POS_AFFINE = 2, POS_MATRIX = 3 };

struct PosSpec {
  int mode = POS_AFFINE;
  const float* fx = nullptr;
  const float* fy = nullptr;
  const float* fz = nullptr;
  Vec3Df scale = Vec3Df(1.f, 1.f, 1.f);
  Vec3Df offset = Vec3Df(0.f, 0.f, 0.f);
  float m[9] = {1.f, 0.f, 0.f, 0.f, 1.f, 0.f, 0.f, 0.f, 1.f};

  PYCA_HD Vec3Df at(int x, int y, int z, std::size_t id) const {
    if (mode == POS_H) return Vec3Df(loadRO(fx + id), loadRO(fy + id), loadRO(fz + id));
    if (mode == POS_V) {
      return Vec3Df(float(x) + scale.x * loadRO(fx + id), float(y) + scale.y * loadRO(fy + id),
                    float(z) + scale.z * loadRO(fz + id));
    }
    if (mode == POS_MATRIX) {
      const float fx_ = float(x), fy_ = float(y), fz_ = float(z);
      return Vec3Df(m[0] * fx_ + m[1] * fy_ + m[2] * fz_ + offset.x,
                    m[3] * fx_ + m[4] * fy_ + m[5] * fz_ + offset.y,
                    m[6] * fx_ + m[7] * fy_ + m[8] * fz_ + offset.z);
    }
    return Vec3Df(scale.x * float(x) + offset.x, scale.y * float(y) + offset.y,
                  scale.z * float(z) + offset.z);
  }
};

// What a gather writes: out[c] = value[c] * mul[c] (+ p[c] when addPos).
struct PostSpec {
  Vec3Df mul = Vec3Df(1.f, 1.f, 1.f);
  bool addPos = false;
};

// Linear index of voxel (x, y, z) in a grid of size n (64-bit: 3 * nVox may exceed 2^31).
PYCA_HD std::size_t linearIndex(int x, int y, int z, const Vec3Di& n) {
  return (std::size_t(z) * std::size_t(n.y) + std::size_t(y)) * std::size_t(n.x) + std::size_t(x);
}

// One output voxel of a gather: interpolate src at pos.at(...) and write it through post.
// Index: as for interpolate (the type of src's linear indices).
template <InterpT I, BackgroundStrategy BG, int NC, class Index = std::size_t>
PYCA_HD void gatherVoxel(const MutPlanes<NC>& out, const Planes<NC>& src, const Vec3Di& srcSize,
                         const PosSpec& pos, const PostSpec& post, float bgVal, int x, int y, int z,
                         std::size_t id) {
  const Vec3Df p = pos.at(x, y, z, id);
  float v[NC];
  interpolate<I, BG, NC, Index>(v, src, srcSize, p, bgVal);
  PYCA_UNROLL
  for (int c = 0; c < NC; ++c) out.p[c][id] = v[c] * post.mul[c] + (post.addPos ? p[c] : 0.f);
}

// H-field <-> V-field at voxel (x, y, z): v = (h - x) * spacing, h = x + v / spacing.
PYCA_HD Vec3Df hToV(const Vec3Df& h, int x, int y, int z, const Vec3Df& sp) {
  return Vec3Df((h.x - float(x)) * sp.x, (h.y - float(y)) * sp.y, (h.z - float(z)) * sp.z);
}
PYCA_HD Vec3Df vToH(const Vec3Df& v, int x, int y, int z, const Vec3Df& sp) {
  return Vec3Df(float(x) + v.x / sp.x, float(y) + v.y / sp.y, float(z) + v.z / sp.z);
}

// Jacobian J[a][b] = d g_a / d x_b of an H-field g at voxel (x, y, z), in voxel units, as PyCA's Ad and
// CoAd take it (central differences with BC_CLAMP): (g[i+1] - g[i-1]) / 2 inside and, at the border,
// the neighbour outside clamped to the border voxel, so half the one-sided difference there
// ((g[1] - g[0]) / 2); along an axis b of size 1 (z on a 2-D grid) row and column b are those of the
// identity (as PyCA did for 2-D images).
PYCA_HD void jacobianH(const Planes<3>& g, const Vec3Di& n, int x, int y, int z, float J[3][3]) {
  const int pos[3] = {x, y, z};
  const int size[3] = {n.x, n.y, n.z};
  const std::size_t stride[3] = {1, std::size_t(n.x), std::size_t(n.x) * std::size_t(n.y)};
  const std::size_t id = linearIndex(x, y, z, n);
  PYCA_UNROLL
  for (int b = 0; b < 3; ++b) {
    const int i = pos[b], m = size[b];
    if (m == 1) {
      PYCA_UNROLL
      for (int a = 0; a < 3; ++a) J[a][b] = a == b ? 1.f : 0.f;
      continue;
    }
    const std::size_t ip = i < m - 1 ? id + stride[b] : id;
    const std::size_t im = i > 0 ? id - stride[b] : id;
    PYCA_UNROLL
    for (int a = 0; a < 3; ++a) J[a][b] = 0.5f * (g.p[a][ip] - g.p[a][im]);
  }
  PYCA_UNROLL
  for (int b = 0; b < 3; ++b) {
    if (size[b] != 1) continue;
    PYCA_UNROLL
    for (int c = 0; c < 3; ++c) J[b][c] = b == c ? 1.f : 0.f;
  }
}

PYCA_HD float det3(const float J[3][3]) {
  return J[0][0] * (J[1][1] * J[2][2] - J[1][2] * J[2][1]) -
         J[0][1] * (J[1][0] * J[2][2] - J[1][2] * J[2][0]) +
         J[0][2] * (J[1][0] * J[2][1] - J[1][1] * J[2][0]);
}

// Ad: the vector splatted at g(x): |Dg| Dg_w X, with Dg_w = S Dg S^-1 the Jacobian acting on world
// vectors (S = diag(spacing)): u_a = |Dg| sp_a sum_b Dg[a][b] X_b / sp_b.
PYCA_HD Vec3Df adValue(const float J[3][3], const Vec3Df& X, const Vec3Df& sp) {
  const float det = det3(J);
  const float xs[3] = {X.x / sp.x, X.y / sp.y, X.z / sp.z};
  float u[3];
  PYCA_UNROLL
  for (int a = 0; a < 3; ++a) u[a] = det * sp[a] * (J[a][0] * xs[0] + J[a][1] * xs[1] + J[a][2] * xs[2]);
  return Vec3Df(u[0], u[1], u[2]);
}

// CoAd at x: |Dg| Dg_w^T m(g(x)) = |Dg| S^-1 Dg^T S m(g(x)): n_b = |Dg| / sp_b sum_a Dg[a][b] sp_a m_a.
PYCA_HD Vec3Df coadValue(const float J[3][3], const Vec3Df& mg, const Vec3Df& sp) {
  const float det = det3(J);
  const float ms[3] = {mg.x * sp.x, mg.y * sp.y, mg.z * sp.z};
  float r[3];
  PYCA_UNROLL
  for (int b = 0; b < 3; ++b) r[b] = det / sp[b] * (J[0][b] * ms[0] + J[1][b] * ms[1] + J[2][b] * ms[2]);
  return Vec3Df(r[0], r[1], r[2]);
}

// ReprojectToUnitVec (PyCA's): a vector longer than 1 is scaled back to unit length; shorter
// vectors (and 1) are unchanged.
PYCA_HD Vec3Df reprojectToUnitVec(const Vec3Df& v) {
  const float l = sqrtf(v.x * v.x + v.y * v.y + v.z * v.z);
  return l > 1.f ? Vec3Df(v.x / l, v.y / l, v.z / l) : v;
}

// How far x lies beyond [0, n - 1] (x - clamp(x)): 0 inside and along an axis of size 1 (not
// interpolated); NaN stays NaN.
PYCA_HD float beyondGrid(float x, int n) {
  if (n == 1) return 0.f;
  const float last = float(n - 1);
  return x - (x >= 0.f ? (x <= last ? x : last) : 0.f);
}

// The H-field h at p (trilinear), h extended beyond its grid by its displacement at the grid's border:
// h(p) = p + u(clamp(p)) with u = h - id, i.e. CLAMP's sample of h plus how far p lies beyond the grid
// along each axis (interpolating h - id under CLAMP and adding p gives the same in exact arithmetic).
// ComposeHHBorder, LDDMMComposeStep and the fused LDDMM steps sample maps so. Inside [0, n - 1] it is
// PARTIAL_ID's sample to the bit. Outside, the identity extension (PARTIAL_ID) makes a map whose border moves
// jump back to the identity just beyond the grid, and a flow that carries points there folds at the grid's
// edge (docs/operations/lddmm.md, "The grid's edge").
template <class Index = std::size_t>
PYCA_HD Vec3Df sampleMapBorder(const Planes<3>& h, const Vec3Di& n, const Vec3Df& p) {
  float r[3];
  interpolate<INTERP_LINEAR, BACKGROUND_STRATEGY_CLAMP, 3, Index>(r, h, n, p);
  return Vec3Df(r[0] + beyondGrid(p.x, n.x), r[1] + beyondGrid(p.y, n.y), r[2] + beyondGrid(p.z, n.z));
}

// ApplyHUnblurred's bias term: acc + t (1 - t) c, with t (1 - t) computed as t - t t (the order of the
// chain of single operations it replaces: Mul, Sub, Add_Mul). T: float, or a vector of floats on the
// CPU's SIMD rows.
template <class T>
PYCA_HD_LANES T blurBiasTerm(T acc, T t, T c) {
  return acc + (t - t * t) * c;
}

// One voxel of ApplyHUnblurred: p = h(x) (voxels of src's grid n); src: the image and its three half
// second differences (curv). out = im(p) - ((0 + t_x (1 - t_x) curv_x(p)) + t_y (1 - t_y) curv_y(p)) + t_z
// (1 - t_z) curv_z(p)), every sample trilinear with CLAMP, t_k = p_k - floor(p_k), an axis of size 1
// left out (not interpolated).
PYCA_HD float unblurredAt(const Planes<4>& src, const Vec3Di& n, const Vec3Df& p) {
  float v[4];
  interpolate<INTERP_LINEAR, BACKGROUND_STRATEGY_CLAMP, 4>(v, src, n, p);
  float acc = 0.f;
  if (n.x > 1) acc = blurBiasTerm(acc, p.x - floorf(p.x), v[1]);
  if (n.y > 1) acc = blurBiasTerm(acc, p.y - floorf(p.y), v[2]);
  if (n.z > 1) acc = blurBiasTerm(acc, p.z - floorf(p.z), v[3]);
  return v[0] - acc;
}

// One voxel of ApplyHUnblurred (h on out's grid, read at voxel id only).
PYCA_HD void unblurredVoxel(float* out, const Planes<4>& src, const Vec3Di& n, const Planes<3>& h,
                            std::size_t id) {
  out[id] = unblurredAt(src, n, Vec3Df(loadRO(h.p[0] + id), loadRO(h.p[1] + id), loadRO(h.p[2] + id)));
}

// One voxel of ComposeHHBorder: out(x) = f(g(x)), f extended by its border displacement
// (sampleMapBorder); g is read at voxel id only (plain loads, not the read-only cache), so out may be g.
template <class Index = std::size_t>
PYCA_HD void composeBorderVoxel(const MutPlanes<3>& out, const Planes<3>& f, const Planes<3>& g,
                                const Vec3Di& n, std::size_t id) {
  const Vec3Df q = sampleMapBorder<Index>(f, n, Vec3Df(g.p[0][id], g.p[1][id], g.p[2][id]));
  out.p[0][id] = q.x;
  out.p[1][id] = q.y;
  out.p[2][id] = q.z;
}

// FixedPointInverse at voxel (x, y, z): starting from the estimate h = ginv(x), numIter times
// h <- h + (x - g(h)), g interpolated trilinearly with BG (voxel units). Only g is read at other
// voxels, so each voxel iterates on its own.
template <BackgroundStrategy BG>
PYCA_HD Vec3Df fixedPointInverseVoxel(const Planes<3>& g, const Vec3Di& n, Vec3Df h, int x, int y, int z,
                                      unsigned numIter) {
  for (unsigned it = 0; it < numIter; ++it) {
    float gh[3];
    interpolate<INTERP_LINEAR, BG, 3>(gh, g, n, h);
    h = Vec3Df(h.x + (float(x) - gh[0]), h.y + (float(y) - gh[1]), h.z + (float(z) - gh[2]));
  }
  return h;
}

// UpdateInverse at voxel (x, y, z): h = ginv0(x); numIter times q = x - w(h) / spacing (w a
// V-field, trilinear, PARTIAL_ZERO), h = ginv0(q) (trilinear, PARTIAL_ID). Returns h; q receives
// the last q (unchanged when numIter is 0).
PYCA_HD Vec3Df updateInverseVoxel(const Planes<3>& ginv0, const Planes<3>& w, const Vec3Di& n,
                                  const Vec3Df& sp, int x, int y, int z, std::size_t id, unsigned numIter,
                                  Vec3Df& q) {
  Vec3Df h(ginv0.p[0][id], ginv0.p[1][id], ginv0.p[2][id]);
  for (unsigned it = 0; it < numIter; ++it) {
    float wh[3], gq[3];
    interpolate<INTERP_LINEAR, BACKGROUND_STRATEGY_PARTIAL_ZERO, 3>(wh, w, n, h);
    q = Vec3Df(float(x) - wh[0] / sp.x, float(y) - wh[1] / sp.y, float(z) - wh[2] / sp.z);
    interpolate<INTERP_LINEAR, BACKGROUND_STRATEGY_PARTIAL_ID, 3>(gq, ginv0, n, q);
    h = Vec3Df(gq[0], gq[1], gq[2]);
  }
  return h;
}

// Resample's index mapping from an output grid of nOut voxels to an input grid of nIn voxels per
// axis: p = r * i + (r - 1) / 2 with r = nIn / nOut (voxel centres aligned, the grids cover the
// same extent), or p = r * i without the origin offset (PyCA's useOriginOffset = false).
inline PosSpec resampleMapping(const Vec3Di& nOut, const Vec3Di& nIn, bool useOriginOffset) {
  PosSpec s;
  s.mode = POS_AFFINE;
  for (int a = 0; a < 3; ++a) {
    const float r = float(nIn[a]) / float(nOut[a]);
    s.scale[a] = r;
    s.offset[a] = useOriginOffset ? 0.5f * (r - 1.f) : 0.f;
  }
  return s;
}

// World-coordinate mapping from the voxels of grid `from` to the voxel coordinates of grid `to`
// (docs/design/orientation.md): p = S_to^-1 D_to^T (origin_from + D_from S_from i - origin_to), with
// D the grids' direction matrices (orthonormal, D^-1 = D^T) and S = diag(spacing). Computed in double;
// POS_AFFINE (per-axis scale and offset) when the 3x3 part is diagonal, as it is for grids of one
// direction, POS_MATRIX otherwise.
inline PosSpec worldMapping(const GridInfo& from, const GridInfo& to) {
  const Mat3d& df = from.direction();
  const Mat3d& dt = to.direction();
  const double sf[3] = {from.spacing().x, from.spacing().y, from.spacing().z};
  const double st[3] = {to.spacing().x, to.spacing().y, to.spacing().z};
  const double dor[3] = {double(from.origin().x) - to.origin().x, double(from.origin().y) - to.origin().y,
                         double(from.origin().z) - to.origin().z};
  double m[9], off[3];
  bool diagonal = true;
  for (int r = 0; r < 3; ++r) {
    // Row r of D_to^T is column r of D_to.
    off[r] = (dt[r] * dor[0] + dt[3 + r] * dor[1] + dt[6 + r] * dor[2]) / st[r];
    for (int c = 0; c < 3; ++c) {
      const double dd =
          dt[r] * df[c] + dt[3 + r] * df[3 + c] + dt[6 + r] * df[6 + c];  // (D_to^T D_from)[r][c]
      m[3 * r + c] = dd * sf[c] / st[r];
      if (r != c && m[3 * r + c] != 0.0) diagonal = false;
    }
  }
  PosSpec s;
  s.mode = diagonal ? POS_AFFINE : POS_MATRIX;
  for (int a = 0; a < 3; ++a) {
    s.scale[a] = float(m[4 * a]);
    s.offset[a] = float(off[a]);
  }
  for (int k = 0; k < 9; ++k) s.m[k] = float(m[k]);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Host-side dispatch from run-time enums to the compile-time parameters of the loops and kernels.

template <InterpT I>
using InterpC = std::integral_constant<InterpT, I>;
template <BackgroundStrategy B>
using BgC = std::integral_constant<BackgroundStrategy, B>;

constexpr unsigned bgBit(BackgroundStrategy b) { return 1u << unsigned(b); }
// Strategies accepted for images with a bgVal argument.
constexpr unsigned kImageBgs = bgBit(BACKGROUND_STRATEGY_CLAMP) | bgBit(BACKGROUND_STRATEGY_WRAP) |
                               bgBit(BACKGROUND_STRATEGY_ZERO) | bgBit(BACKGROUND_STRATEGY_PARTIAL_ZERO) |
                               bgBit(BACKGROUND_STRATEGY_VAL);
// Linear strategies: splatting (the transpose of interpolation), images without bgVal, V-fields.
constexpr unsigned kLinearBgs = bgBit(BACKGROUND_STRATEGY_CLAMP) | bgBit(BACKGROUND_STRATEGY_WRAP) |
                                bgBit(BACKGROUND_STRATEGY_ZERO) | bgBit(BACKGROUND_STRATEGY_PARTIAL_ZERO);
// Strategies accepted for fields (the identity ones are meant for H-fields).
constexpr unsigned kFieldBgs =
    kLinearBgs | bgBit(BACKGROUND_STRATEGY_ID) | bgBit(BACKGROUND_STRATEGY_PARTIAL_ID);

inline bool bgAllowed(unsigned set, BackgroundStrategy bg) {
  return unsigned(bg) < 32u && (set & bgBit(bg)) != 0;
}

// Calls f(BgC<bg>{}) for a strategy in Set; returns false (calling nothing) for any other value.
template <unsigned Set, class F>
bool withBg(BackgroundStrategy bg, F&& f) {
#define PYCA_BG_CASE(B)                    \
  case B:                                  \
    if constexpr ((Set & bgBit(B)) != 0) { \
      f(BgC<B>{});                         \
      return true;                         \
    }                                      \
    return false;
  switch (bg) {
    PYCA_BG_CASE(BACKGROUND_STRATEGY_PARTIAL_ID)
    PYCA_BG_CASE(BACKGROUND_STRATEGY_ID)
    PYCA_BG_CASE(BACKGROUND_STRATEGY_PARTIAL_ZERO)
    PYCA_BG_CASE(BACKGROUND_STRATEGY_ZERO)
    PYCA_BG_CASE(BACKGROUND_STRATEGY_CLAMP)
    PYCA_BG_CASE(BACKGROUND_STRATEGY_WRAP)
    PYCA_BG_CASE(BACKGROUND_STRATEGY_VAL)
  }
#undef PYCA_BG_CASE
  return false;
}

// Calls f(InterpC<interp>{}); returns false for an unknown value.
template <class F>
bool withInterp(InterpT interp, F&& f) {
  switch (interp) {
    case INTERP_NN:
      f(InterpC<INTERP_NN>{});
      return true;
    case INTERP_LINEAR:
      f(InterpC<INTERP_LINEAR>{});
      return true;
    case INTERP_CUBIC:
      f(InterpC<INTERP_CUBIC>{});
      return true;
  }
  return false;
}

}  // namespace math
}  // namespace pyca
