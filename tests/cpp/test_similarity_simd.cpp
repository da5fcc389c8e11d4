// The CPU's SIMD loops of the mutual information (core/src/ops/similarity_simd.cpp) against the
// per-voxel functions they stand for (pyca/math/similarity.h), bit for bit: ranges whose length is no
// multiple of 8, runs of equal voxels, NaN and infinite intensities, values outside the ranges, mask
// weights outside [0, 1], with and without a mask.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/similarity_simd.h"
#include "pyca/math/similarity.h"

namespace pyca {
namespace {

struct Pair {
  std::vector<float> a, b, w;
};

Pair randomPair(std::size_t n, std::mt19937& rng) {
  Pair p{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
  std::uniform_real_distribution<float> u(-0.3f, 1.3f), m(-0.2f, 1.2f);
  for (std::size_t i = 0; i < n; ++i) {
    p.a[i] = u(rng);
    p.b[i] = 0.6f * p.a[i] + 0.4f * u(rng);
    p.w[i] = m(rng);
  }
  for (std::size_t i = 5; i < 40 && i < n; ++i) p.a[i] = p.b[i] = 0.f, p.w[i] = 1.f;  // a run
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (std::size_t i = 3; i < n; i += 97) p.a[i] = nan;
  for (std::size_t i = 7; i < n; i += 89) p.b[i] = inf;
  for (std::size_t i = 11; i < n; i += 83) p.a[i] = -inf;
  for (std::size_t i = 13; i < n; i += 79) p.w[i] = nan;
  return p;
}

TEST(SimilaritySimd, HistogramIsTheVoxelWeights) {
  std::mt19937 rng(5);
  for (const int bins : {4, 24, 200}) {
    const math::MiBins B{bins, bins + 3, 0.f, 1.f, -0.1f, 0.9f};
    for (const std::size_t n : {std::size_t(7), std::size_t(8), std::size_t(1001)}) {
      const Pair p = randomPair(n, rng);
      for (const bool masked : {false, true}) {
        const float* w = masked ? p.w.data() : nullptr;
        std::vector<std::uint64_t> got(std::size_t(B.nI) * B.nJ, 0), want(got.size(), 0);
        if (!simd16::miHistogramRange(got.data(), p.a.data(), p.b.data(), w, 0, n, B))
          GTEST_SKIP() << "no AVX-512 F and DQ on this CPU (or PYCA_CPU_SIMD=0): the scalar loops run";
        for (std::size_t i = 0; i < n; ++i) {
          int bI, bJ;
          std::uint64_t q[16];
          math::miVoxelWeights(p.a[i], p.b[i], w ? w[i] : 1.f, B, &bI, &bJ, q);
          for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 4; ++c)
              want[std::size_t(bI + r) * B.nJ + std::size_t(bJ + c)] += q[4 * r + c];
        }
        EXPECT_EQ(got, want) << bins << " bins, " << n << " voxels, masked " << masked;
      }
    }
  }
}

TEST(SimilaritySimd, GradientIsTheVoxelFunction) {
  std::mt19937 rng(9);
  std::normal_distribution<float> d(-2.f, 1.f);
  for (const int bins : {4, 24, 200}) {
    const math::MiBins B{bins, bins, 0.f, 1.f, -0.1f, 0.9f};
    std::vector<float> L(std::size_t(bins) * bins);
    for (auto& x : L) x = d(rng);
    for (const std::size_t n : {std::size_t(7), std::size_t(8), std::size_t(1001)}) {
      Pair p = randomPair(n, rng);
      for (std::size_t i = 48; i < 64 && i < n; ++i) p.a[i] = -0.5f;  // chunks below the range: +0
      for (const bool masked : {false, true}) {
        const float* w = masked ? p.w.data() : nullptr;
        std::vector<float> got(n, -1.f), want(n);
        if (!simd16::miGradientRange(got.data(), p.a.data(), p.b.data(), w, 0, n, B, L.data(), 3.5e-3f))
          GTEST_SKIP() << "no AVX-512 F and DQ on this CPU (or PYCA_CPU_SIMD=0): the scalar loops run";
        for (std::size_t i = 0; i < n; ++i)
          want[i] = math::miGradAt(p.a[i], p.b[i], w ? w[i] : 1.f, B, L.data(), 3.5e-3f);
        for (std::size_t i = 0; i < n; ++i)
          EXPECT_EQ(0, std::memcmp(&got[i], &want[i], sizeof(float)))
              << "voxel " << i << ": " << got[i] << " against " << want[i] << " (" << bins << " bins, masked "
              << masked << ")";
      }
    }
  }
}

// The GPU's one-pass pair (math::miGradientPair) against the two single gradients the CPU computes, bit
// for bit (the same expressions: a change to one that the other does not follow fails here).
TEST(SimilaritySimd, GradientPairIsTheTwoGradients) {
  std::mt19937 rng(11);
  for (const int bins : {4, 24, 33}) {
    const math::MiBins B{bins, bins + 3, 0.f, 1.f, -0.1f, 0.9f};
    const math::MiBins BT{B.nJ, B.nI, B.jLo, B.jHi, B.iLo, B.iHi};
    std::vector<float> LI(std::size_t(B.nI) * B.nJ), LJ(LI.size());
    std::uniform_real_distribution<float> t(-3.f, 0.f);
    for (auto& x : LI) x = t(rng);
    for (auto& x : LJ) x = t(rng);
    const Pair p = randomPair(1001, rng);
    for (std::size_t i = 0; i < p.a.size(); ++i) {
      float gI, gJ;
      math::miGradPairAt(p.a[i], p.b[i], p.w[i], B, LI.data(), LJ.data(), 0.37f, &gI, &gJ);
      const float wI = math::miGradAt(p.a[i], p.b[i], p.w[i], B, LI.data(), 0.37f);
      const float wJ = math::miGradAt(p.b[i], p.a[i], p.w[i], BT, LJ.data(), 0.37f);
      EXPECT_EQ(std::memcmp(&gI, &wI, sizeof(float)), 0)
          << bins << " bins, voxel " << i << ": " << gI << " " << wI;
      EXPECT_EQ(std::memcmp(&gJ, &wJ, sizeof(float)), 0)
          << bins << " bins, voxel " << i << ": " << gJ << " " << wJ;
    }
  }
}

// miTruncU32 (the GPU histogram's conversion by double additions) is uint32_t(y) on [0, 2^31): random
// values, integers, halves and their neighbours one ulp away.
TEST(SimilaritySimd, TruncByAdditionsIsTheConversion) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0.0, 2147483647.0), e(-30.0, 31.0);
  std::vector<double> ys = {0.0, 0.5, 1.0, 2147483647.0, 2147483646.5, 1e-300};
  for (int k = 0; k < 200000; ++k) ys.push_back(k % 2 ? u(rng) : std::exp2(e(rng)));
  for (int k = 0; k < 20000; ++k) {
    const double base = std::floor(k % 2 ? u(rng) : std::exp2(e(rng)));
    for (const double c : {base, base + 0.5}) {
      ys.push_back(c);
      ys.push_back(std::nextafter(c, 0.0));
      ys.push_back(std::nextafter(c, 3e9));
    }
  }
  for (const double y : ys) {
    if (!(y >= 0.0 && y < 2147483648.0)) continue;
    ASSERT_EQ(math::miTruncU32(y), std::uint32_t(y)) << std::hexfloat << y;
  }
}

// Where miClamped says an image is clamped, its gradient is +0 bit for bit (the GPU writes +0 there without
// evaluating it); elsewhere the test data give nonzero gradients.
TEST(SimilaritySimd, ClampedGradientIsPlusZero) {
  std::mt19937 rng(13);
  const math::MiBins B{24, 27, 0.f, 1.f, -0.1f, 0.9f};
  const math::MiBins BT{B.nJ, B.nI, B.jLo, B.jHi, B.iLo, B.iHi};
  std::vector<float> L(std::size_t(B.nI) * B.nJ);
  std::uniform_real_distribution<float> t(-3.f, 0.f);
  for (auto& x : L) x = t(rng);
  Pair p = randomPair(2001, rng);
  for (std::size_t i = 0; i < p.a.size(); i += 5) p.a[i] = (i % 2) ? 0.f : 1.f;  // at the ends: clamped
  int clamped = 0, nonzero = 0;
  for (std::size_t i = 0; i < p.a.size(); ++i) {
    for (const bool forI : {true, false}) {
      const float g = forI ? math::miGradAt(p.a[i], p.b[i], p.w[i], B, L.data(), 0.37f)
                           : math::miGradAt(p.b[i], p.a[i], p.w[i], BT, L.data(), 0.37f);
      const bool c = forI ? math::miClamped(p.a[i], B.iLo, B.iHi) : math::miClamped(p.b[i], B.jLo, B.jHi);
      if (c) {
        const float zero = 0.f;
        EXPECT_EQ(std::memcmp(&g, &zero, sizeof(float)), 0) << i << " " << forI << ": " << g;
        ++clamped;
      } else {
        nonzero += g != 0.f;
      }
    }
  }
  EXPECT_GT(clamped, 400);
  EXPECT_GT(nonzero, 1000);
}

}  // namespace
}  // namespace pyca
