// The CPU loops of the mutual information eight voxels at once, on CPUs with AVX-512 (F and DQ): the
// per-voxel formulas of pyca/math/similarity.h (miVoxelProducts, miGradient: templates over the value
// type) on GCC's vector of 8 doubles, whose + - * and comparisons act lane by lane, so that every lane
// computes the doubles the scalar loops compute, to the bit (this file is compiled with
// -ffp-contract=off: no multiply-add fused where the scalar code has none). The histogram's integer
// weights are then added lane by lane into the thread's histogram; a chunk of 8 equal voxels (the
// background) is weighed once, as the scalar loop's runs are. Design: docs/design/cpu-simd.md.
#include "ops/similarity_simd.h"

#include <cstdlib>
#include <cstring>

#include "ops/lddmm_simd.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#define PYCA_HAVE_MI8 1
#include <immintrin.h>
#else
#define PYCA_HAVE_MI8 0
#endif

namespace pyca {

#if PYCA_HAVE_MI8
#define PYCA_MI8 __attribute__((target("avx512f,avx512dq")))

namespace simd16 {
using D8 = double __attribute__((vector_size(64)));
using L8 = long long __attribute__((vector_size(64)));
using M8 = decltype(D8{} > D8{});  // a comparison's lanes
using I8 = int __attribute__((vector_size(32)));
using F8 = float __attribute__((vector_size(32)));
using F8u = float __attribute__((vector_size(32), aligned(4)));  // an unaligned load or store
}  // namespace simd16

// The lane operations of the MI formulas on eight doubles (pyca/math/similarity.h's MiLanes), as
// AVX-512 instructions: the formulas (always inlined) call them once inlined into the loops below
// (GCC's generic vector comparisons and ?: would be lowered lane by lane).
template <>
struct math::MiLanes<simd16::D8> {
  using T = simd16::D8;
  using Int = simd16::I8;
  using Mask = __mmask8;
  PYCA_MI8 static T splat(double a) { return T(_mm512_set1_pd(a)); }
  PYCA_MI8 static Mask greater(T a, double b) {
    return _mm512_cmp_pd_mask(__m512d(a), _mm512_set1_pd(b), _CMP_GT_OQ);
  }
  PYCA_MI8 static Mask less(T a, double b) {
    return _mm512_cmp_pd_mask(__m512d(a), _mm512_set1_pd(b), _CMP_LT_OQ);
  }
  PYCA_MI8 static Mask both(Mask a, Mask b) { return Mask(a & b); }
  PYCA_MI8 static T select(Mask c, T a, T b) { return T(_mm512_mask_blend_pd(c, __m512d(b), __m512d(a))); }
  PYCA_MI8 static Int truncate(T t) { return Int(_mm512_maskz_cvttpd_epi32(0xFF, __m512d(t))); }
  PYCA_MI8 static T toReal(Int k) { return T(_mm512_maskz_cvtepi32_pd(0xFF, __m256i(k))); }
  PYCA_MI8 static Int clampInt(Int k, int hi) {
    return Int(_mm256_min_epi32(_mm256_max_epi32(__m256i(k), _mm256_setzero_si256()), _mm256_set1_epi32(hi)));
  }
  PYCA_MI8 static T table(const float* L, Int k) {
    return T(_mm512_maskz_cvtps_pd(0xFF, _mm256_i32gather_ps(L, __m256i(k), 4)));
  }
};
#endif

namespace simd16 {

namespace {
// AVX-512 F (the vectors) and DQ (doubles to 64-bit integers), unless PYCA_CPU_SIMD=0 (available()).
bool miOn() {
#if PYCA_HAVE_MI8
  static const bool on = [] {
    __builtin_cpu_init();
    return available() && __builtin_cpu_supports("avx512dq") != 0;
  }();
  return on;
#else
  return false;
#endif
}
}  // namespace

#if PYCA_HAVE_MI8
namespace {

PYCA_MI8 inline D8 load8(const float* p) {
  F8u v;
  std::memcpy(&v, p, sizeof v);
  return __builtin_convertvector(F8(v), D8);
}
// All 8 floats at p equal (false where one is NaN).
PYCA_MI8 inline bool uniform8(const float* p) {
  const __m256 v = _mm256_loadu_ps(p);
  return _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(p[0]), _CMP_EQ_OQ)) == 0xFF;
}

PYCA_MI8 void histRange(std::uint64_t* H, const float* a, const float* b, const float* w, std::size_t begin,
                        std::size_t end, const math::MiBins& bins) {
  const std::size_t nJ = std::size_t(bins.nJ);
  // Adds the weights of `count` voxels equal to (u, v, m) (scalar: a run of math::MiRuns).
  const auto add = [&](float u, float v, float m, std::uint64_t count) {
    int bI, bJ;
    std::uint64_t q[16];
    math::miVoxelWeights(u, v, m, bins, &bI, &bJ, q);
    for (int r = 0; r < 4; ++r) {
      std::uint64_t* row = H + std::size_t(bI + r) * nJ + std::size_t(bJ);
      for (int c = 0; c < 4; ++c) row[c] += q[4 * r + c] * count;
    }
  };
  math::MiRuns<std::uint64_t> runs;
  alignas(64) long long q[16][8];
  alignas(32) int bI[8], bJ[8];
  std::size_t i = begin;
  for (; i + 8 <= end; i += 8) {
    if (uniform8(a + i) && uniform8(b + i) && (!w || uniform8(w + i))) {
      const float m = w ? w[i] : 1.f;
      for (int l = 0; l < 8; ++l) runs.push(a[i], b[i], m, add);
      continue;
    }
    runs.finish(add);
    D8 d[16];
    I8 vI, vJ;
    const D8 m = w ? load8(w + i) : D8{} + 1.0;
    math::miVoxelProducts(load8(a + i), load8(b + i), m, bins, &vI, &vJ, d);
    for (int k = 0; k < 16; ++k) {
      const L8 qk = __builtin_convertvector(d[k], L8);  // (each below 2^63: as the scalar cast)
      std::memcpy(q[k], &qk, sizeof qk);
    }
    std::memcpy(bI, &vI, sizeof vI);
    std::memcpy(bJ, &vJ, sizeof vJ);
    for (int l = 0; l < 8; ++l) {
      std::uint64_t* base = H + std::size_t(bI[l]) * nJ + std::size_t(bJ[l]);
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c)
          base[std::size_t(r) * nJ + std::size_t(c)] += std::uint64_t(q[4 * r + c][l]);
    }
  }
  for (; i < end; ++i) runs.push(a[i], b[i], w ? w[i] : 1.f, add);
  runs.finish(add);
}

PYCA_MI8 void gradRange(float* g, const float* a, const float* b, const float* w, std::size_t begin,
                        std::size_t end, const math::MiBins& bins, const float* L, float gscale) {
  const __m256 lo = _mm256_set1_ps(bins.iLo);
  std::size_t i = begin;
  for (; i + 8 <= end; i += 8) {
    // I at or below its range (or NaN) in every lane: the clamp's slope is 0, the gradient +0 (the
    // scalar formula's sum of signed zeros is +0 too)
    if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(a + i), lo, _CMP_GT_OQ)) == 0) {
      _mm256_storeu_ps(g + i, _mm256_setzero_ps());
      continue;
    }
    const D8 m = w ? load8(w + i) : D8{} + 1.0;
    const D8 r = math::miGradient(load8(a + i), load8(b + i), m, bins, L, gscale);
    const F8u f = __builtin_convertvector(r, F8);
    std::memcpy(g + i, &f, sizeof f);
  }
  for (; i < end; ++i) g[i] = math::miGradAt(a[i], b[i], w ? w[i] : 1.f, bins, L, gscale);
}

}  // namespace
#endif

bool miHistogramRange(std::uint64_t* H, const float* a, const float* b, const float* w, std::size_t begin,
                      std::size_t end, const math::MiBins& bins) {
#if PYCA_HAVE_MI8
  if (!miOn()) return false;
  histRange(H, a, b, w, begin, end, bins);
  return true;
#else
  (void)H, (void)a, (void)b, (void)w, (void)begin, (void)end, (void)bins;
  return false;
#endif
}

bool miGradientRange(float* g, const float* a, const float* b, const float* w, std::size_t begin,
                     std::size_t end, const math::MiBins& bins, const float* L, float gscale) {
#if PYCA_HAVE_MI8
  if (!miOn()) return false;
  gradRange(g, a, b, w, begin, end, bins, L, gscale);
  return true;
#else
  (void)g, (void)a, (void)b, (void)w, (void)begin, (void)end, (void)bins, (void)L, (void)gscale;
  return false;
#endif
}

}  // namespace simd16
}  // namespace pyca
