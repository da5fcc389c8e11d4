// The CPU's SIMD rows of the fused LDDMM steps (core/src/ops/lddmm_simd.cpp) against the per-voxel
// functions they stand for (pyca/math/lddmm.h), bit for bit: grids whose rows are not a multiple of
// 16, a 2-D grid, samples inside, on and past the border, NaN and infinite positions, an image of
// another size, the affine form, a = 0 (m unread).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/lddmm_simd.h"
#include "pyca/math/lddmm.h"

namespace pyca {
namespace {

struct Planes3 {
  std::vector<float> c[3];
  explicit Planes3(std::size_t n) {
    for (auto& p : c) p.assign(n, 0.f);
  }
  math::Planes<3> in() const { return math::Planes<3>{{c[0].data(), c[1].data(), c[2].data()}}; }
  math::MutPlanes<3> out() { return math::MutPlanes<3>{{c[0].data(), c[1].data(), c[2].data()}}; }
};

// The same bits, but for NaNs, which match any NaN (which operand's NaN an operation passes on may
// differ when the compiler orders a commutative operation's operands otherwise).
::testing::AssertionResult sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << ", " << b.size();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " against " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// A map x + u(x): smooth displacements of up to `amp` voxels (past the border near it), and a few
// NaN and infinite positions.
Planes3 randomMap(const Vec3Di& n, float amp, std::mt19937& rng) {
  Planes3 h(math::nVoxOf(n));
  std::uniform_real_distribution<float> ph(0.f, 6.f), noise(-0.05f, 0.05f);
  const float a = ph(rng), b = ph(rng), c = ph(rng);
  std::size_t i = 0;
  for (int z = 0; z < n.z; ++z)
    for (int y = 0; y < n.y; ++y)
      for (int x = 0; x < n.x; ++x, ++i) {
        h.c[0][i] = float(x) + amp * std::sin(0.21f * y + 0.13f * z + a) + noise(rng);
        h.c[1][i] = float(y) + amp * std::cos(0.17f * x + 0.11f * z + b) + noise(rng);
        h.c[2][i] = n.z == 1 ? 0.f : float(z) + amp * std::sin(0.19f * x + 0.23f * y + c) + noise(rng);
      }
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::uniform_int_distribution<std::size_t> pick(0, i - 1);
  for (int k = 0; k < 5; ++k) {
    h.c[k % 3][pick(rng)] = nan;
    h.c[(k + 1) % 3][pick(rng)] = k % 2 ? inf : -inf;
  }
  return h;
}

std::vector<float> randomImage(std::size_t n, std::mt19937& rng) {
  std::vector<float> im(n);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& x : im) x = d(rng);
  return im;
}

class LddmmSimd : public ::testing::TestWithParam<Vec3Di> {
 protected:
  void SetUp() override {
    if (!simd16::available())
      GTEST_SKIP() << "no AVX-512 on this CPU (or PYCA_CPU_SIMD=0): the scalar loops run";
  }
};

TEST_P(LddmmSimd, TransportStepIsTheVoxelFunction) {
  const Vec3Di n = GetParam();
  const std::size_t nv = math::nVoxOf(n);
  std::mt19937 rng(7);
  const Vec3Di nIm(n.x + 5, n.y + 3, n.z == 1 ? 1 : n.z + 2);
  const std::vector<float> im = randomImage(math::nVoxOf(nIm), rng);
  for (int form = 0; form < 4; ++form) {  // with h or from the identity; with or without the affine
    const bool fromId = form & 1, affine = form & 2;
    const Planes3 h = randomMap(n, 3.f, rng), v = randomMap(n, 4.f, rng);
    math::TransportParams P;
    P.n = n;
    P.scale = Vec3Df(0.1f, -0.13f, 0.07f);
    P.nIm = nIm;
    P.affine = affine;
    P.a0 = Vec3Df(1.02f, 0.05f, -0.03f);
    P.a1 = Vec3Df(-0.04f, 0.97f, 0.02f);
    P.a2 = Vec3Df(0.01f, 0.03f, 1.05f);
    P.t = Vec3Df(1.5f, -0.7f, 0.4f);
    math::Planes<3> hp = h.in();
    if (fromId) hp.p[0] = hp.p[1] = hp.p[2] = nullptr;
    Planes3 got(nv), want(nv);
    std::vector<float> J(nv, -1.f), Jwant(nv, -1.f);
    ASSERT_TRUE(simd16::transportStep(got.out(), J.data(), hp, v.in(), im.data(), P));
    const math::MutPlanes<3> w = want.out();
    std::size_t i = 0;
    for (int z = 0; z < n.z; ++z)
      for (int y = 0; y < n.y; ++y)
        for (int x = 0; x < n.x; ++x, ++i)
          math::transportVoxel(w, Jwant.data(), hp, v.in(), im.data(), P, x, y, z, i);
    for (int c = 0; c < 3; ++c)
      EXPECT_TRUE(sameBits(got.c[c], want.c[c])) << "hOut component " << c << ", form " << form;
    EXPECT_TRUE(sameBits(J, Jwant)) << "J, form " << form;
  }
}

TEST_P(LddmmSimd, GradStepIsTheVoxelFunction) {
  const Vec3Di n = GetParam();
  const std::size_t nv = math::nVoxOf(n);
  std::mt19937 rng(11);
  for (int form = 0; form < 4; ++form) {  // with or without the compose; a = 0 (m unread) or not
    const bool compose = form & 1, zeroA = form & 2;
    const Planes3 h = randomMap(n, 2.5f, rng), v = randomMap(n, 4.f, rng);
    Planes3 m(nv);
    for (auto& p : m.c) p = randomImage(nv, rng);
    const std::vector<float> J0 = randomImage(nv, rng), I1 = randomImage(nv, rng);
    math::GradStepParams P;
    P.g = math::Grid3{n.x, n.y, n.z, 1.f / 1.5f, 1.f / 0.9f, 1.f / 2.f};
    P.vol = 1.5f * 0.9f * (n.z == 1 ? 1.f : 2.f);
    P.a = zeroA ? 0.f : 0.93f;
    P.s = 0.21f;
    Planes3 got(nv), want(nv), hGot(nv), hWant(nv);
    math::ComposeOut C, Cwant;
    if (compose) {
      C.hOut = hGot.out();
      Cwant.hOut = hWant.out();
      C.v = Cwant.v = v.in();
      C.scale = Cwant.scale = Vec3Df(0.2f, 0.1f, -0.15f);
      C.on = Cwant.on = true;
    }
    ASSERT_TRUE(simd16::ssdGradStep(got.out(), m.in(), h.in(), J0.data(), I1.data(), P, C));
    const math::MutPlanes<3> w = want.out();
    std::size_t i = 0;
    for (int z = 0; z < n.z; ++z)
      for (int y = 0; y < n.y; ++y)
        for (int x = 0; x < n.x; ++x, ++i)
          math::gradStepVoxel(w, m.in(), h.in(), J0.data(), I1.data(), P, Cwant, x, y, z, i);
    for (int c = 0; c < 3; ++c) {
      EXPECT_TRUE(sameBits(got.c[c], want.c[c])) << "mOut component " << c << ", form " << form;
      EXPECT_TRUE(sameBits(hGot.c[c], hWant.c[c])) << "hOut component " << c << ", form " << form;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grids, LddmmSimd,
                         ::testing::Values(Vec3Di(37, 23, 19), Vec3Di(16, 4, 3), Vec3Di(5, 6, 7),
                                           Vec3Di(70, 9, 5), Vec3Di(33, 17, 1), Vec3Di(2, 2, 2)),
                         [](const ::testing::TestParamInfo<Vec3Di>& i) {
                           return std::to_string(i.param.x) + "x" + std::to_string(i.param.y) + "x" +
                                  std::to_string(i.param.z);
                         });

}  // namespace
}  // namespace pyca
