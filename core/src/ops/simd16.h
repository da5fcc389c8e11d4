// Sixteen voxels at once on CPUs with AVX-512 (x86-64): the vector types, and the trilinear samples of
// a row of positions, and the helpers of the rows, for the CPU loops of the gathers
// (core/src/ops/lddmm_simd.cpp, core/src/ops/deformation_simd.cpp). Included only by
// files compiled with -ffp-contract=off (CMakeLists.txt), so that each lane computes what the scalar
// per-voxel functions of pyca/math compute, to the bit: those functions are templates over the value
// type and run here on F16 (the same operations in the same order, no multiply-add contracted).
//
// Every function here carries PYCA_SIMD16 (the instruction set it needs) and runs only after
// simd16::available() (ops/lddmm_simd.h) said yes, so one library runs on any x86-64 CPU. Design:
// docs/design/cpu-simd.md.
#pragma once

#include <cstddef>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#define PYCA_HAVE_SIMD16 1
#include <immintrin.h>
#else
#define PYCA_HAVE_SIMD16 0
#endif

#include "pyca/math/deformation.h"
#include "pyca/math/differential.h"
#include "pyca/math/interp.h"
#include "pyca/math/lddmm.h"
#include "pyca/vec3.h"

namespace pyca {
namespace simd16 {

#if PYCA_HAVE_SIMD16

#define PYCA_SIMD16 __attribute__((target("avx512f")))

using F16 = float __attribute__((vector_size(64)));
using I16 = int __attribute__((vector_size(64)));
using Mask = __mmask16;

PYCA_SIMD16 inline F16 splat(float a) { return _mm512_set1_ps(a); }
PYCA_SIMD16 inline F16 load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
PYCA_SIMD16 inline void store(float* p, Mask m, F16 a) { _mm512_mask_storeu_ps(p, m, a); }
// Lanes of b where m is set, of a elsewhere.
PYCA_SIMD16 inline F16 blend(Mask m, F16 a, F16 b) { return _mm512_mask_blend_ps(m, a, b); }
// The first `count` lanes (0 <= count <= 16).
inline Mask firstLanes(int count) { return Mask((1u << count) - 1u); }
// float(x0 + k) in lane k.
PYCA_SIMD16 inline F16 lanesFrom(int x0) {
  return F16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} + float(x0);
}
// (The masked forms of the intrinsics below: GCC 12 warns of its own undefined vectors in the others.)
constexpr Mask kAll = 0xFFFF;
// int(a) in the lanes of m (truncation, as the scalar cast), 0 in the others; float(i), lane by lane.
PYCA_SIMD16 inline I16 truncate(F16 a, Mask m) { return I16(_mm512_maskz_cvttps_epi32(m, a)); }
PYCA_SIMD16 inline F16 toFloat(I16 i) { return F16(_mm512_maskz_cvtepi32_ps(kAll, __m512i(i))); }
// The smallest of the lanes of v in m (m not empty).
PYCA_SIMD16 inline int minLane(I16 v, Mask m) {
  __m512i t = _mm512_mask_mov_epi32(_mm512_set1_epi32(0x7FFFFFFF), m, __m512i(v));
  // the minimum with the vector rotated by 8, 4, 2 and 1 lanes (immediates, also at -O0)
  t = _mm512_mask_min_epi32(t, kAll, t, _mm512_maskz_alignr_epi32(kAll, t, t, 8));
  t = _mm512_mask_min_epi32(t, kAll, t, _mm512_maskz_alignr_epi32(kAll, t, t, 4));
  t = _mm512_mask_min_epi32(t, kAll, t, _mm512_maskz_alignr_epi32(kAll, t, t, 2));
  t = _mm512_mask_min_epi32(t, kAll, t, _mm512_maskz_alignr_epi32(kAll, t, t, 1));
  return I16(t)[0];
}
// lo <= a < hi, lane by lane (false for NaN).
PYCA_SIMD16 inline Mask inRange(F16 a, float lo, float hi) {
  return _mm512_cmp_ps_mask(a, splat(lo), _CMP_GE_OQ) & _mm512_cmp_ps_mask(a, splat(hi), _CMP_LT_OQ);
}

}  // namespace simd16

// lerp()'s choice f == 0 ? a : t as one masked blend (GCC lowers the vector ?: lane by lane where
// the comparison is shared between lerps).
template <>
struct math::Lanes<simd16::F16> {
  PYCA_SIMD16 static simd16::F16 zeroOr(simd16::F16 f, simd16::F16 a, simd16::F16 t) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(f, _mm512_setzero_ps(), _CMP_EQ_OQ), t, a);
  }
};

namespace simd16 {

// The trilinear samples of the NC planes of src (grid n, fewer than 2^31 voxels) at the positions (px,
// py, pz) of the lanes in `live`: the lanes whose position lies in [0, n - 1) on every axis (where
// interpolateInterior() samples, the same taps for every background strategy) get its value in out[c],
// to the bit; the mask of those lanes is returned, and the other lanes of out are left to the caller.
//
// The taps: a row of positions moves little from one lane to the next, so the lanes that share their
// (y, z) taps read two runs of 16 columns from each of the four rows and pick their taps by a permute
// (up to kRowGroups groups of lanes); any lane left reads its taps with a gather.
template <int NC>
PYCA_SIMD16 Mask interiorSamples(F16 out[NC], const math::Planes<NC>& src, const Vec3Di& n, F16 px, F16 py,
                                 F16 pz, Mask live) {
  constexpr int kRowGroups = 4;
  for (int c = 0; c < NC; ++c) out[c] = splat(0.f);
  const Mask in = live & inRange(px, 0.f, float(n.x - 1)) & inRange(py, 0.f, float(n.y - 1)) &
                  inRange(pz, 0.f, float(n.z - 1));
  if (in == 0) return 0;
  // p >= 0 in these lanes: truncation is floor, as in interpolateInterior() (0 in the other lanes, so
  // that no index arithmetic below overflows).
  const I16 ix = truncate(px, in), iy = truncate(py, in), iz = truncate(pz, in);
  const F16 fx = px - toFloat(ix), fy = py - toFloat(iy), fz = pz - toFloat(iz);
  const int dy = n.x, dz = n.x * n.y;
  const I16 row = iz * n.y + iy;  // the (y, z) taps' first row
  Mask todo = in;
  // Columns w .. w + 31 of a row: w the smallest x tap; lanes whose taps ix, ix + 1 lie in that window.
  const int w = minLane(ix, in);
  const I16 rel = ix - w, rel1 = rel + 1;
  Mask windowed = in & _mm512_cmplt_epi32_mask(__m512i(rel), _mm512_set1_epi32(31));
  const I16 col = I16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} + w;
  const Mask loadA = _mm512_cmplt_epi32_mask(__m512i(col), _mm512_set1_epi32(n.x));
  const Mask loadB = _mm512_cmplt_epi32_mask(__m512i(col + 16), _mm512_set1_epi32(n.x));
  for (int g = 0; g < kRowGroups && windowed != 0; ++g) {
    const int r = row[__builtin_ctz(windowed)];
    const Mask sel = windowed & _mm512_cmpeq_epi32_mask(__m512i(row), _mm512_set1_epi32(r));
    windowed &= Mask(~sel);
    todo &= Mask(~sel);
    const std::ptrdiff_t r0 = std::ptrdiff_t(r) * dy + w;
    const std::ptrdiff_t rows[4] = {r0, r0 + dy, r0 + dz, r0 + dz + dy};
    for (int c = 0; c < NC; ++c) {
      F16 t[4][2];
      for (int q = 0; q < 4; ++q) {
        const __m512 a = _mm512_maskz_loadu_ps(loadA, src.p[c] + rows[q]);
        const __m512 b = _mm512_maskz_loadu_ps(loadB, src.p[c] + rows[q] + 16);
        t[q][0] = F16(_mm512_permutex2var_ps(a, __m512i(rel), b));
        t[q][1] = F16(_mm512_permutex2var_ps(a, __m512i(rel1), b));
      }
      const F16 s =
          math::trilinear(t[0][0], t[0][1], t[1][0], t[1][1], t[2][0], t[2][1], t[3][0], t[3][1], fx, fy, fz);
      out[c] = blend(sel, out[c], s);
    }
  }
  if (todo != 0) {
    const __m512i b0 = __m512i(row * dy + ix);
    const __m512i o[8] = {b0,
                          _mm512_add_epi32(b0, _mm512_set1_epi32(1)),
                          _mm512_add_epi32(b0, _mm512_set1_epi32(dy)),
                          _mm512_add_epi32(b0, _mm512_set1_epi32(dy + 1)),
                          _mm512_add_epi32(b0, _mm512_set1_epi32(dz)),
                          _mm512_add_epi32(b0, _mm512_set1_epi32(dz + 1)),
                          _mm512_add_epi32(b0, _mm512_set1_epi32(dz + dy)),
                          _mm512_add_epi32(b0, _mm512_set1_epi32(dz + dy + 1))};
    for (int c = 0; c < NC; ++c) {
      F16 t[8];
      for (int k = 0; k < 8; ++k)
        t[k] = F16(_mm512_mask_i32gather_ps(_mm512_setzero_ps(), todo, o[k], src.p[c], 4));
      const F16 s = math::trilinear(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], fx, fy, fz);
      out[c] = blend(todo, out[c], s);
    }
  }
  return in;
}

// ---- Helpers of the rows (lddmm_simd.cpp, deformation_simd.cpp)

// Grids whose linear indices fit the 32-bit lanes of interiorSamples().
inline bool fits(const Vec3Di& n) { return double(n.x) * double(n.y) * double(n.z) < 2147483648.0; }

// f(y, z) for every row of x, rows spread over the OpenMP threads (as the scalar loops' rows).
template <class F>
inline void forRows(const Vec3Di& n, F&& f) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int z = 0; z < n.z; ++z) {
    for (int y = 0; y < n.y; ++y) f(y, z);
  }
}

// The lanes of `m`, lowest first.
template <class F>
inline void eachLane(Mask m, F&& f) {
  for (; m != 0; m &= Mask(m - 1)) f(__builtin_ctz(m));
}

// f(x0, id, live) for each block of sixteen voxels of row (y, z) of a grid of size n: x0 its first voxel's
// x, id that voxel's linear index, live the block's lanes inside the row. (f carries PYCA_SIMD16.)
template <class F>
PYCA_SIMD16 inline void forBlocks(const Vec3Di& n, int y, int z, F&& f) {
  const std::size_t row = math::linearIndex(0, y, z, n);
  for (int x0 = 0; x0 < n.x; x0 += 16)
    f(x0, row + std::size_t(x0), firstLanes(n.x - x0 < 16 ? n.x - x0 : 16));
}

// The central difference of p along the axis of stride s, per world unit (is: 1 / spacing), in the lanes
// of m: gradient()'s interior term.
PYCA_SIMD16 inline F16 centralDiff(const float* p, std::ptrdiff_t s, float is, Mask m) {
  return math::weightedDiff(0.5f, load(p + s, m), load(p - s, m)) * is;
}

// The lanes of m whose voxel x0 + k of row (y, z) has both neighbours along every axis (3-D grids): where
// the central differences below are the stencils' (every boundary condition alike there).
PYCA_SIMD16 inline Mask interiorLanes(const Vec3Di& n, int x0, int y, int z, Mask m) {
  if (!(n.z > 1 && y >= 1 && y <= n.y - 2 && z >= 1 && z <= n.z - 2)) return 0;
  return m & inRange(lanesFrom(x0), 1.f, float(n.x - 1));
}

// |D h| by central differences at the voxels id .. id + 15, in the interior lanes m: jacDetH's interior term.
PYCA_SIMD16 inline F16 centralJacDet(const math::Planes<3>& h, std::size_t id, const math::Grid3& g, Mask m) {
  const std::ptrdiff_t dy = g.sy(), dz = g.sz();
  return math::det3(centralDiff(h.p[0] + id, 1, g.isx, m), centralDiff(h.p[0] + id, dy, g.isy, m),
                    centralDiff(h.p[0] + id, dz, g.isz, m), centralDiff(h.p[1] + id, 1, g.isx, m),
                    centralDiff(h.p[1] + id, dy, g.isy, m), centralDiff(h.p[1] + id, dz, g.isz, m),
                    centralDiff(h.p[2] + id, 1, g.isx, m), centralDiff(h.p[2] + id, dy, g.isy, m),
                    centralDiff(h.p[2] + id, dz, g.isz, m));
}

// The gradient of im by central differences at the voxels id .. id + 15, in the interior lanes m:
// gradient()'s interior term.
PYCA_SIMD16 inline void centralGradient(F16 out[3], const float* im, std::size_t id, const math::Grid3& g,
                                        Mask m) {
  out[0] = centralDiff(im + id, 1, g.isx, m);
  out[1] = centralDiff(im + id, g.sy(), g.isy, m);
  out[2] = centralDiff(im + id, g.sz(), g.isz, m);
}

// The points x + scale v(x) of the voxels x0 .. x0 + 15 of row (y, z) (first linear index id): stepPoint.
PYCA_SIMD16 inline void stepPoints(F16 p[3], const math::Planes<3>& v, const Vec3Df& scale, int x0, int y,
                                   int z, std::size_t id, Mask live) {
  p[0] = math::stepCoord(lanesFrom(x0), scale.x, load(v.p[0] + id, live));
  p[1] = math::stepCoord(splat(float(y)), scale.y, load(v.p[1] + id, live));
  p[2] = math::stepCoord(splat(float(z)), scale.z, load(v.p[2] + id, live));
}

// q = h(p) (trilinear, h extended by its border displacement): composeHVAt's sample (sampleMapBorder,
// which inside the grid is interiorSamples' value).
PYCA_SIMD16 inline void composeAt(F16 q[3], const math::Planes<3>& h, const Vec3Di& n, const F16 p[3],
                                  Mask live) {
  const Mask done = interiorSamples<3>(q, h, n, p[0], p[1], p[2], live);
  eachLane(live & Mask(~done), [&](int k) {
    const Vec3Df r = math::sampleMapBorder(h, n, Vec3Df(p[0][k], p[1][k], p[2][k]));
    q[0][k] = r.x;
    q[1][k] = r.y;
    q[2][k] = r.z;
  });
}

// hOut = h(x + scale v(x)) in the lanes `live` of the voxels x0 .. x0 + 15 of row (y, z) (first linear index
// id): composeHVAt. hOut may be v (read first).
PYCA_SIMD16 inline void composeStepAt(const math::MutPlanes<3>& hOut, const math::Planes<3>& h,
                                      const Vec3Di& n, const math::Planes<3>& v, const Vec3Df& scale, int x0,
                                      int y, int z, std::size_t id, Mask live) {
  F16 p[3], q[3];
  stepPoints(p, v, scale, x0, y, z, id, live);
  composeAt(q, h, n, p, live);
  for (int c = 0; c < 3; ++c) store(hOut.p[c] + id, live, q[c]);
}

#endif  // PYCA_HAVE_SIMD16

}  // namespace simd16
}  // namespace pyca
