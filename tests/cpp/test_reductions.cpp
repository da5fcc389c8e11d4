// Closed-form tests of the `reductions` family (and the reducing Min / Max / Dot) on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "pyca/pyca.h"

namespace pyca {
namespace {

const GridInfo kGrid3(Vec3Di(17, 23, 31), Vec3Df(1.5f, 1.f, 2.f));
const GridInfo kGrid2(Vec3Di(31, 33, 1), Vec3Df(1.5f, 2.1f, 1.f));

// a[i] = i + 1 - n/2 (exact small integers; the sums have closed forms).
Image3D ramp(const GridInfo& g) {
  Image3D im(g);
  const double n = double(im.nVox());
  for (std::size_t i = 0; i < im.nVox(); ++i) im.data()[i] = float(double(i) + 1.0 - std::floor(n / 2));
  return im;
}

class ReductionGrids : public ::testing::TestWithParam<GridInfo> {};

TEST_P(ReductionGrids, ImageClosedForms) {
  const Image3D a = ramp(GetParam());
  const double n = double(a.nVox());
  const double h = std::floor(n / 2);
  // values are k - h for k = 1..n
  const double sum = n * (n + 1) / 2 - n * h;
  double sum2 = 0, l1 = 0;
  for (double k = 1; k <= n; ++k) {
    sum2 += (k - h) * (k - h);
    l1 += std::fabs(k - h);
  }
  EXPECT_DOUBLE_EQ(Sum(a), sum);
  EXPECT_DOUBLE_EQ(Sum2(a), sum2);
  EXPECT_DOUBLE_EQ(L1(a), l1);
  EXPECT_DOUBLE_EQ(Dot(a, a), sum2);
  EXPECT_EQ(Min(a), float(1 - h));
  EXPECT_EQ(Max(a), float(n - h));
  const std::pair<float, float> mm = MinMax(a);
  EXPECT_EQ(mm.first, float(1 - h));
  EXPECT_EQ(mm.second, float(n - h));
  EXPECT_EQ(LInf(a), float(std::max(h - 1, n - h)));
}

TEST_P(ReductionGrids, FieldPerComponentAndTotals) {
  const GridInfo g = GetParam();
  Field3D f(g);
  f.fill(Vec3Df(1.f, -2.f, 0.5f));
  const double n = double(f.nVox());
  const Vec3Df s = Sum(f);
  EXPECT_FLOAT_EQ(s.x, float(n));
  EXPECT_FLOAT_EQ(s.y, float(-2 * n));
  EXPECT_FLOAT_EQ(s.z, float(0.5 * n));
  EXPECT_DOUBLE_EQ(Sum2(f), n * (1 + 4 + 0.25));
  EXPECT_DOUBLE_EQ(L1(f), n * 3.5);
  EXPECT_EQ(LInf(f), 2.f);
  f.data()[3] = 9.f;
  f.data()[2 * f.planeStride() + 4] = -7.f;
  EXPECT_EQ(Max(f), Vec3Df(9.f, -2.f, 0.5f));
  EXPECT_EQ(Min(f), Vec3Df(1.f, -2.f, -7.f));
  EXPECT_EQ(MinMax(f), std::make_pair(-7.f, 9.f));
  Field3D e(g);
  e.fill(Vec3Df(2.f, 1.f, -1.f));
  f.fill(Vec3Df(1.f, -2.f, 0.5f));
  EXPECT_DOUBLE_EQ(Dot(f, e), n * (2 - 2 - 0.5));
}

INSTANTIATE_TEST_SUITE_P(Reductions, ReductionGrids, ::testing::Values(kGrid3, kGrid2));

TEST(Reductions, SumsAccumulateInDouble) {
  // 2^24 + 1 ones: a float accumulator stops at 2^24, a double one does not.
  const GridInfo g(Vec3Di(4097, 4096, 1));
  Image3D a(g);
  a.fill(1.f);
  EXPECT_EQ(Sum(a), double(a.nVox()));
  a.fill(0.1f);
  EXPECT_NEAR(Sum(a), double(a.nVox()) * double(0.1f), 1e-9 * double(a.nVox()));
}

TEST(Reductions, NaNPropagates) {
  Image3D a = ramp(kGrid3);
  a.data()[100] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(Sum(a)));
  EXPECT_TRUE(std::isnan(Min(a)));
  EXPECT_TRUE(std::isnan(Max(a)));
  EXPECT_TRUE(std::isnan(LInf(a)));
  EXPECT_TRUE(std::isnan(MinMax(a).first));
  EXPECT_TRUE(std::isnan(MinMax(a).second));
}

TEST(Reductions, ShrunkFieldIgnoresTheGap) {
  Field3D f(kGrid3);
  f.fill(100.f);  // the tail beyond the smaller grid keeps 100
  f.setGrid(kGrid2);
  ASSERT_GT(f.planeStride(), f.nVox());
  f.fill(Vec3Df(1.f, 2.f, 3.f));
  const double n = double(f.nVox());
  EXPECT_EQ(Sum(f), Vec3Df(float(n), float(2 * n), float(3 * n)));
  EXPECT_EQ(Max(f), Vec3Df(1.f, 2.f, 3.f));
  EXPECT_DOUBLE_EQ(Dot(f, f), n * 14);
}

TEST(Reductions, Errors) {
  const Image3D a = ramp(kGrid3), b = ramp(kGrid2);
  try {
    Dot(a, b);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Dot"), std::string::npos);
  }
  Field3D f(kGrid3), h(kGrid2);
  EXPECT_THROW(Dot(f, h), ValueError);
}

}  // namespace
}  // namespace pyca
