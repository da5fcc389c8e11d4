// Interpolation of a volume at a fractional voxel position, with PyCA's background strategies, and
// its transpose (trilinear splatting). Shared by the CPU loops and the CUDA kernels (PYCA_HD).
//
// Semantics (docs/operations/deformation.md, "Interpolation and background strategies"):
// a position p is in voxel (index) units of the grid sampled. Per axis of size n:
//   CLAMP         the coordinate is clamped to [0, n-1] (scipy mode='nearest')
//   WRAP          periodic with period n (scipy mode='grid-wrap')
//   PARTIAL_ZERO  neighbours outside [0, n-1] count as 0 (scipy mode='grid-constant', cval=0)
//   PARTIAL_ID    neighbours outside take their identity coordinate (H-fields; Field3D only)
//   ZERO/VAL/ID   a position outside [0, n-1] on any axis gives 0 / bgVal / the identity (the
//                 position itself); inside, the neighbours are read as with CLAMP (scipy
//                 mode='constant' for ZERO)
// An axis of size 1 (z on a 2-D grid) is not interpolated: its coordinate is ignored and only
// index 0 is read, so a 2-D grid never reads a z-neighbour.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "pyca/config.h"
#include "pyca/enums.h"
#include "pyca/vec3.h"

// Loop unrolling hint for the CUDA device compiler (the host compiler unrolls on its own).
#if defined(__CUDA_ARCH__)
#define PYCA_UNROLL _Pragma("unroll")
#else
#define PYCA_UNROLL
#endif

namespace pyca {
namespace math {

// Taps per axis of each interpolation method.
template <InterpT I>
struct InterpTaps;
template <>
struct InterpTaps<INTERP_NN> {
  static constexpr int n = 1;
};
template <>
struct InterpTaps<INTERP_LINEAR> {
  static constexpr int n = 2;
};
template <>
struct InterpTaps<INTERP_CUBIC> {
  static constexpr int n = 4;
};

// Strategies decided once per sample (outside [0, n-1] -> the background value).
PYCA_HD constexpr bool isSampleLevel(BackgroundStrategy bg) {
  return bg == BACKGROUND_STRATEGY_ZERO || bg == BACKGROUND_STRATEGY_VAL || bg == BACKGROUND_STRATEGY_ID;
}
// Strategies decided per neighbour.
PYCA_HD constexpr bool isPartial(BackgroundStrategy bg) {
  return bg == BACKGROUND_STRATEGY_PARTIAL_ZERO || bg == BACKGROUND_STRATEGY_PARTIAL_ID;
}
// Strategies whose background is the identity (meaningful for H-fields only).
PYCA_HD constexpr bool isIdentityBg(BackgroundStrategy bg) {
  return bg == BACKGROUND_STRATEGY_ID || bg == BACKGROUND_STRATEGY_PARTIAL_ID;
}

// The taps of one axis: the index read (always within [0, n-1]), its weight, its identity
// coordinate (the unclamped index, for PARTIAL_ID) and whether it lies inside the grid.
template <int N>
struct AxisTaps {
  int idx[N];
  float w[N];
  float id[N];
  bool ok[N];
};

// Catmull-Rom weights of the taps at offsets -1, 0, 1, 2 for the fraction t in [0, 1).
PYCA_HD void catmullRom(float t, float w[4]) {
  const float t2 = t * t, t3 = t2 * t;
  w[0] = 0.5f * (-t3 + 2.f * t2 - t);
  w[1] = 0.5f * (3.f * t3 - 5.f * t2 + 2.f);
  w[2] = 0.5f * (-3.f * t3 + 4.f * t2 + t);
  w[3] = 0.5f * (t3 - t2);
}

// The weights w of the taps of a linear (N = 2) or cubic (N = 4) sample at fraction f in [0, 1)
// past floor(x); returns the offset of the first tap from floor(x) (0 linear, -1 cubic).
template <InterpT I, int N>
PYCA_HD int fractionWeights(float f, float (&w)[N]) {
  if constexpr (I == INTERP_LINEAR) {
    w[0] = 1.f - f;
    w[N - 1] = f;
    return 0;
  } else if constexpr (I == INTERP_CUBIC) {
    catmullRom(f, w);
    return -1;
  } else {  // nearest neighbour has no weights to compute
    return 0;
  }
}

PYCA_HD int wrapIndex(int i, int n) {
  int r = i % n;
  return r < 0 ? r + n : r;
}
PYCA_HD int clampIndex(int i, int n) { return i < 0 ? 0 : (i > n - 1 ? n - 1 : i); }

// Computes the taps of axis coordinate x on an axis of n voxels. Returns false when the sample is
// background along this axis (then the whole sample takes the background value).
template <InterpT I, BackgroundStrategy BG>
PYCA_HD bool axisTaps(float x, int n, AxisTaps<InterpTaps<I>::n>& t) {
  constexpr int N = InterpTaps<I>::n;
  if (n == 1) {  // not interpolated along this axis
    PYCA_UNROLL
    for (int k = 0; k < N; ++k) {
      t.idx[k] = 0;
      t.w[k] = 0.f;
      t.id[k] = 0.f;
      t.ok[k] = true;
    }
    t.w[N == 4 ? 1 : 0] = 1.f;
    return true;
  }
  const float last = float(n - 1);
  if (isSampleLevel(BG)) {
    if (!(x >= 0.f && x <= last)) return false;  // also catches NaN
  }
  if (BG == BACKGROUND_STRATEGY_WRAP) {
    float xw = x - float(n) * floorf(x / float(n));
    if (!(xw >= 0.f && xw < float(n))) xw = 0.f;  // NaN, inf or rounding up to n
    if (I == INTERP_NN) {
      int i = int(xw + 0.5f);
      t.idx[0] = i >= n ? 0 : i;
      t.w[0] = 1.f;
      t.id[0] = float(t.idx[0]);
      t.ok[0] = true;
    } else {
      const int i0 = int(xw);  // xw >= 0: truncation is floor
      const float f = xw - float(i0);
      const int first = i0 + fractionWeights<I>(f, t.w);
      PYCA_UNROLL
      for (int k = 0; k < N; ++k) {
        t.idx[k] = wrapIndex(first + k, n);
        t.id[k] = float(t.idx[k]);
        t.ok[k] = true;
      }
    }
    return true;
  }
  if (isPartial(BG)) {
    // Range where at least one tap is inside; outside it every tap is background.
    const float lo = I == INTERP_NN ? -0.5f : (I == INTERP_LINEAR ? -1.f : -2.f);
    const float hi = I == INTERP_NN ? last + 0.5f : (I == INTERP_LINEAR ? float(n) : float(n) + 1.f);
    if (!(x > lo && x < hi)) return false;
    if (I == INTERP_NN) {
      const int i = int(floorf(x + 0.5f));
      t.ok[0] = i >= 0 && i <= n - 1;
      t.idx[0] = t.ok[0] ? i : 0;
      t.w[0] = 1.f;
      t.id[0] = float(i);
      return true;
    }
    const float fl = floorf(x);
    const int i0 = int(fl);
    const float f = x - fl;
    const int first = i0 + fractionWeights<I>(f, t.w);
    PYCA_UNROLL
    for (int k = 0; k < N; ++k) {
      const int i = first + k;
      t.ok[k] = i >= 0 && i <= n - 1;
      t.idx[k] = t.ok[k] ? i : 0;
      t.id[k] = float(i);
    }
    return true;
  }
  // CLAMP, and ZERO / VAL / ID inside the grid: clamp the coordinate, then the tap indices.
  const float xc = x >= 0.f ? (x <= last ? x : last) : 0.f;  // NaN -> 0
  if (I == INTERP_NN) {
    const int i = int(xc + 0.5f);
    t.idx[0] = i > n - 1 ? n - 1 : i;
    t.w[0] = 1.f;
    t.id[0] = float(t.idx[0]);
    t.ok[0] = true;
    return true;
  }
  const int i0 = int(xc);
  const float f = xc - float(i0);
  const int first = i0 + fractionWeights<I>(f, t.w);
  PYCA_UNROLL
  for (int k = 0; k < N; ++k) {
    t.idx[k] = clampIndex(first + k, n);
    t.id[k] = float(t.idx[k]);
    t.ok[k] = true;
  }
  return true;
}

// NC planes of one volume (1 for an image, 3 for a field).
template <int NC>
struct Planes {
  const float* p[NC];
};
template <int NC>
struct MutPlanes {
  float* p[NC];
};
// From the backends' arrays of NC plane pointers.
template <int NC>
inline MutPlanes<NC> mutPlanes(float* const* p) {
  MutPlanes<NC> r;
  for (int c = 0; c < NC; ++c) r.p[c] = p[c];
  return r;
}
template <int NC>
inline Planes<NC> planes(const float* const* p) {
  Planes<NC> r;
  for (int c = 0; c < NC; ++c) r.p[c] = p[c];
  return r;
}
inline std::size_t nVoxOf(const Vec3Di& n) { return std::size_t(n.x) * std::size_t(n.y) * std::size_t(n.z); }

// The identity coordinate of a position: the position, with 0 along axes of size 1.
PYCA_HD Vec3Df identityOf(const Vec3Df& p, const Vec3Di& n) {
  return Vec3Df(n.x == 1 ? 0.f : p.x, n.y == 1 ? 0.f : p.y, n.z == 1 ? 0.f : p.z);
}

// The value of a background sample.
template <BackgroundStrategy BG, int NC>
PYCA_HD void backgroundValue(float out[NC], const Vec3Df& p, const Vec3Di& n, float bgVal) {
  if (isIdentityBg(BG)) {
    const Vec3Df id = identityOf(p, n);
    PYCA_UNROLL
    for (int c = 0; c < NC; ++c) out[c] = id[c];
  } else {
    PYCA_UNROLL
    for (int c = 0; c < NC; ++c) out[c] = BG == BACKGROUND_STRATEGY_VAL ? bgVal : 0.f;
  }
}

// A load of data that nothing writes while the kernel runs: through the read-only data cache on
// the GPU, a plain load on the CPU.
PYCA_HD float loadRO(const float* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

// The linear interpolation a + f (b - a) between two taps at fraction f in [0, 1), the one formula of
// every trilinear sample on both backends (x first, then y, then z). It is exact where a == b (a
// constant stays constant), and f == 0 gives a whatever b holds (a NaN or an infinity in a tap of
// zero weight does not reach the sample). T is float, or a vector of floats on the CPU's SIMD rows
// (core/src/ops/simd16.h: the same arithmetic lane by lane).
template <class T>
struct Lanes {
  // f == 0 ? a : t, lane by lane (a CPU vector type specialises it: simd16.h).
  PYCA_HD_LANES static T zeroOr(T f, T a, T t) { return f == 0.f ? a : t; }
};
template <class T>
PYCA_HD_LANES T lerp(T a, T b, T f) {
  return Lanes<T>::zeroOr(f, a, a + f * (b - a));
}

// The trilinear sample from its eight taps c[z][y][x] at fractions fx, fy, fz: x first, then y, then z.
template <class T>
PYCA_HD_LANES T trilinear(T c000, T c001, T c010, T c011, T c100, T c101, T c110, T c111, T fx, T fy, T fz) {
  return lerp(lerp(lerp(c000, c001, fx), lerp(c010, c011, fx), fy),
              lerp(lerp(c100, c101, fx), lerp(c110, c111, fx), fy), fz);
}

// Trilinear sample of the NC planes src (grid size n) at p when p lies in [0, n - 1) on every axis
// (every axis longer than 1): there every background strategy has the taps floor(p) and
// floor(p) + 1, all inside, and the lerps below are interpolate()'s, in the same order, so the value
// is the same to the bit; without the per-axis strategy logic it takes fewer instructions (the
// gathers are instruction-bound: benchmarks/lab/notes.md). Returns false, writing nothing, elsewhere.
template <int NC, class Index = std::size_t>
PYCA_HD bool interpolateInterior(float out[NC], const Planes<NC>& src, const Vec3Di& n, const Vec3Df& p) {
  if (!(p.x >= 0.f && p.x < float(n.x - 1) && p.y >= 0.f && p.y < float(n.y - 1) && p.z >= 0.f &&
        p.z < float(n.z - 1))) {
    return false;
  }
  const int ix = int(p.x), iy = int(p.y), iz = int(p.z);  // p >= 0: truncation is floor
  const float fx = p.x - float(ix), fy = p.y - float(iy), fz = p.z - float(iz);
  const Index dy = Index(n.x), dz = Index(n.x) * Index(n.y);
  const Index b = Index(iz) * dz + Index(iy) * dy + Index(ix);
  PYCA_UNROLL
  for (int c = 0; c < NC; ++c) {
    const float* s = src.p[c] + b;
    out[c] = trilinear(loadRO(s), loadRO(s + 1), loadRO(s + dy), loadRO(s + dy + 1), loadRO(s + dz),
                       loadRO(s + dz + 1), loadRO(s + dz + dy), loadRO(s + dz + dy + 1), fx, fy, fz);
  }
  return true;
}

// One tap of a trilinear sample: the value of plane c at the taps (kx, ky, kz), or, for a tap
// outside the grid under a PARTIAL strategy, 0 (PARTIAL_ZERO) or its identity coordinate (PARTIAL_ID).
template <BackgroundStrategy BG, int NC, class Index>
PYCA_HD float linearTap(const Planes<NC>& src, int c, const AxisTaps<2>& tx, const AxisTaps<2>& ty,
                        const AxisTaps<2>& tz, int kx, int ky, int kz, Index nx, Index nxy) {
  if (!isPartial(BG) || (tz.ok[kz] && ty.ok[ky] && tx.ok[kx])) {
    return loadRO(src.p[c] + (Index(tz.idx[kz]) * nxy + Index(ty.idx[ky]) * nx + Index(tx.idx[kx])));
  }
  if (BG == BACKGROUND_STRATEGY_PARTIAL_ID) {
    const float idc[3] = {tx.id[kx], ty.id[ky], tz.id[kz]};
    return idc[c < 3 ? c : 0];
  }
  return 0.f;
}

// Interpolates the NC planes `src` (grid size n) at position p (voxel units) into out[NC].
// bgVal is used by BACKGROUND_STRATEGY_VAL only. PARTIAL_ID / ID need NC == 3 (an H-field).
// Index is the type of the linear indices: std::size_t always works; the CUDA kernels use
// uint32_t when the grid has fewer than 2^32 voxels (cheaper index arithmetic, same result).
template <InterpT I, BackgroundStrategy BG, int NC, class Index = std::size_t>
PYCA_HD void interpolate(float out[NC], const Planes<NC>& src, const Vec3Di& n, const Vec3Df& p,
                         float bgVal = 0.f) {
  static_assert(NC == 3 || !isIdentityBg(BG), "identity backgrounds need a field");
  if constexpr (I == INTERP_LINEAR) {
    if (interpolateInterior<NC, Index>(out, src, n, p)) return;
  }
  constexpr int N = InterpTaps<I>::n;
  AxisTaps<N> tx{}, ty{}, tz{};
  const bool in =
      axisTaps<I, BG>(p.x, n.x, tx) & axisTaps<I, BG>(p.y, n.y, ty) & axisTaps<I, BG>(p.z, n.z, tz);
  if (!in) {
    backgroundValue<BG, NC>(out, p, n, bgVal);
    return;
  }
  const Index nx = Index(n.x), nxy = Index(n.x) * Index(n.y);
  if constexpr (I == INTERP_LINEAR) {  // the weights are 1 - f and f: lerps, as interpolateInterior
    const float fx = tx.w[1], fy = ty.w[1], fz = tz.w[1];
    PYCA_UNROLL
    for (int c = 0; c < NC; ++c) {
      float yz[2];
      PYCA_UNROLL
      for (int kz = 0; kz < 2; ++kz) {
        float xy[2];
        PYCA_UNROLL
        for (int ky = 0; ky < 2; ++ky) {
          xy[ky] = lerp(linearTap<BG, NC, Index>(src, c, tx, ty, tz, 0, ky, kz, nx, nxy),
                        linearTap<BG, NC, Index>(src, c, tx, ty, tz, 1, ky, kz, nx, nxy), fx);
        }
        yz[kz] = lerp(xy[0], xy[1], fy);
      }
      out[c] = lerp(yz[0], yz[1], fz);
    }
  } else {  // (an else, not a return above: the rest is then not compiled for INTERP_LINEAR)
    float acc[NC];
    PYCA_UNROLL
    for (int c = 0; c < NC; ++c) acc[c] = 0.f;
    PYCA_UNROLL
    for (int kz = 0; kz < N; ++kz) {
      if (tz.w[kz] == 0.f) continue;
      PYCA_UNROLL
      for (int ky = 0; ky < N; ++ky) {
        if (ty.w[ky] == 0.f) continue;
        const float wzy = tz.w[kz] * ty.w[ky];
        const Index row = Index(tz.idx[kz]) * nxy + Index(ty.idx[ky]) * nx;
        PYCA_UNROLL
        for (int kx = 0; kx < N; ++kx) {
          const float w = wzy * tx.w[kx];
          if (!isPartial(BG) || (tz.ok[kz] && ty.ok[ky] && tx.ok[kx])) {
            const Index id = row + Index(tx.idx[kx]);
            PYCA_UNROLL
            for (int c = 0; c < NC; ++c) acc[c] += w * loadRO(src.p[c] + id);
          } else if (BG == BACKGROUND_STRATEGY_PARTIAL_ID) {
            const float idc[3] = {tx.id[kx], ty.id[ky], tz.id[kz]};
            PYCA_UNROLL
            for (int c = 0; c < NC; ++c) acc[c] += w * idc[c < 3 ? c : 0];
          }
        }
      }
    }
    PYCA_UNROLL
    for (int c = 0; c < NC; ++c) out[c] = acc[c];
  }
}

// Trilinear splat: the exact transpose of interpolate<INTERP_LINEAR, BG> (BG one of CLAMP, WRAP,
// ZERO, PARTIAL_ZERO). For each neighbour of p (linear index id in a grid of size n) with weight w,
// calls add(id, w): the caller adds w * value (and w to its weights) there, with an atomicAdd on
// the GPU. Returns false when nothing was added (the sample is background).
template <BackgroundStrategy BG, class Add>
PYCA_HD bool splatPoint(const Vec3Di& n, const Vec3Df& p, Add&& add) {
  static_assert(!isIdentityBg(BG) && BG != BACKGROUND_STRATEGY_VAL, "splat needs a linear background");
  AxisTaps<2> tx{}, ty{}, tz{};
  const bool in = axisTaps<INTERP_LINEAR, BG>(p.x, n.x, tx) & axisTaps<INTERP_LINEAR, BG>(p.y, n.y, ty) &
                  axisTaps<INTERP_LINEAR, BG>(p.z, n.z, tz);
  if (!in) return false;
  const std::size_t nx = std::size_t(n.x), nxy = std::size_t(n.x) * std::size_t(n.y);
  PYCA_UNROLL
  for (int kz = 0; kz < 2; ++kz) {
    if (tz.w[kz] == 0.f || !tz.ok[kz]) continue;
    PYCA_UNROLL
    for (int ky = 0; ky < 2; ++ky) {
      if (ty.w[ky] == 0.f || !ty.ok[ky]) continue;
      const float wzy = tz.w[kz] * ty.w[ky];
      const std::size_t row = std::size_t(tz.idx[kz]) * nxy + std::size_t(ty.idx[ky]) * nx;
      PYCA_UNROLL
      for (int kx = 0; kx < 2; ++kx) {
        if (tx.w[kx] == 0.f || !tx.ok[kx]) continue;
        add(row + std::size_t(tx.idx[kx]), wzy * tx.w[kx]);
      }
    }
  }
  return true;
}

// The range of indices along one axis that a splat at coordinate x may touch ([lo, hi], empty when
// lo > hi). Used by the CPU splat to size its per-chunk buffers.
template <BackgroundStrategy BG>
PYCA_HD void splatAxisRange(float x, int n, int& lo, int& hi) {
  AxisTaps<2> t{};
  lo = n;
  hi = -1;
  if (!axisTaps<INTERP_LINEAR, BG>(x, n, t)) return;
  for (int k = 0; k < 2; ++k) {
    if (t.w[k] == 0.f || !t.ok[k]) continue;
    lo = t.idx[k] < lo ? t.idx[k] : lo;
    hi = t.idx[k] > hi ? t.idx[k] : hi;
  }
}

}  // namespace math
}  // namespace pyca
