// The mutual information's integer Parzen window (pyca/math/similarity.h, docs/design/mutual-information.md):
// the knots' taps are a partition of unity, a voxel's position on its axis is where the float arithmetic
// puts it, and the histogram through the knot table (splat, then the two convolution passes) equals the
// direct sum of each voxel's weights on its 4 x 4 bins (the window written out), integer for integer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "pyca/math/similarity.h"

namespace pyca {
namespace {

TEST(MutualInformation, KnotTapsArePartitionOfUnity) {
  for (int n : {4, 5, 12, 32, 256}) {
    for (int u = 0; u < math::miKnots(n); ++u) {
      std::int64_t sum = 0;
      for (int a = 0; a < n; ++a) {
        const std::int64_t c = math::miTap(math::kMiSub * (1 - a) + u);
        EXPECT_GE(c, 0);
        sum += c;
      }
      EXPECT_EQ(sum, math::kMiTapOne) << n << " " << u;
    }
  }
  // the cubic B-spline's values at the knots: beta3(0) = 2/3, beta3(1) = 1/6
  EXPECT_EQ(math::miTap(0) * 3, 2 * math::kMiTapOne);
  EXPECT_EQ(math::miTap(math::kMiSub) * 6, math::kMiTapOne);
  EXPECT_EQ(math::miTap(2 * math::kMiSub), 0);
}

TEST(MutualInformation, KnotsCoverTheRange) {
  const math::MiGrid g = math::miGrid(math::MiBins{12, 7, -1.f, 3.f, 0.f, 1.f});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float v : {-1.f, -5.f, nan, -std::numeric_limits<float>::infinity()}) {
    const math::MiKnot k = math::miKnot(v, -1.f, 3.f, g.nfI, g.sI);
    EXPECT_EQ(k.u, 0);
    EXPECT_EQ(k.f, 0);
    EXPECT_FALSE(k.inside);
  }
  for (float v : {3.f, 7.f, std::numeric_limits<float>::infinity()}) {
    const math::MiKnot k = math::miKnot(v, -1.f, 3.f, g.nfI, g.sI);
    EXPECT_EQ(k.u, g.nfI - 2);
    EXPECT_EQ(k.f, math::kMiFrac);
    EXPECT_FALSE(k.inside);
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.f, 3.f);
  for (int t = 0; t < 10000; ++t) {
    const float v = u(rng);
    const math::MiKnot k = math::miKnot(v, -1.f, 3.f, g.nfI, g.sI);
    const double s = (double(v) + 1.0) * double(g.sI) / math::kMiFrac;  // the exact knot coordinate
    EXPECT_LE(std::abs(k.u + double(k.f) / math::kMiFrac - s), 0.5 / math::kMiFrac + 1e-4);
    EXPECT_GE(k.u, 0);
    EXPECT_LE(k.u, g.nfI - 2);
  }
}

TEST(MutualInformation, KnotTableHistogramIsTheDirectWindow) {
  const math::MiBins bins{9, 6, 0.f, 1.f, -0.5f, 2.f};
  const math::MiGrid g = math::miGrid(bins);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-0.2f, 1.2f), v(-0.7f, 2.2f), m(-0.2f, 1.2f);
  std::vector<std::uint64_t> F(std::size_t(g.nfI) * g.nfJ, 0), direct(std::size_t(bins.nI) * bins.nJ, 0);
  for (int t = 0; t < 3000; ++t) {
    const math::MiSplat s = math::miSplat(u(rng), v(rng), math::miMaskSteps(m(rng)), g);
    const int uI = s.key / g.nfJ, uJ = s.key % g.nfJ;
    std::uint64_t total = 0;
    for (int q = 0; q < 4; ++q) {
      const int ki = uI + q / 2, kj = uJ + q % 2;
      F[std::size_t(ki) * g.nfJ + kj] += s.w[q];
      total += s.w[q];
      for (int a = 0; a < bins.nI; ++a)
        for (int b = 0; b < bins.nJ; ++b)
          direct[std::size_t(a) * bins.nJ + b] += std::uint64_t(s.w[q]) *
                                                  std::uint64_t(math::miTap(math::kMiSub * (1 - a) + ki)) *
                                                  std::uint64_t(math::miTap(math::kMiSub * (1 - b) + kj));
    }
    EXPECT_LE(total, std::uint64_t(math::kMiFrac) * math::kMiFrac);
  }
  std::vector<std::uint64_t> G(std::size_t(g.nfI) * bins.nJ);
  for (int k = 0; k < g.nfI * bins.nJ; ++k)
    G[std::size_t(k)] = math::miTapSum(&F[std::size_t(k / bins.nJ) * g.nfJ], 1, g.nfJ, k % bins.nJ);
  for (int k = 0; k < bins.nI * bins.nJ; ++k)
    EXPECT_EQ(math::miTapSum(&G[std::size_t(k % bins.nJ)], std::size_t(bins.nJ), g.nfI, k / bins.nJ),
              direct[std::size_t(k)])
        << k;
}

TEST(MutualInformation, GradientOfAClampedVoxelIsPlusZero) {
  const math::MiGrid g = math::miGrid(math::MiBins{8, 8, 0.f, 1.f, 0.f, 1.f});
  std::vector<double> D(std::size_t(g.nfI - 1) * g.nfJ, -1.0);
  for (float v : {0.f, -1.f, 1.f, 2.f, std::numeric_limits<float>::quiet_NaN()}) {
    const float r = math::miGradI(v, 0.5f, math::kMiFrac, g, D.data(), 1.0);
    EXPECT_EQ(r, 0.f);
    EXPECT_FALSE(std::signbit(r));
  }
  EXPECT_NE(math::miGradI(0.5f, 0.5f, math::kMiFrac, g, D.data(), 1.0), 0.f);
}

}  // namespace
}  // namespace pyca
