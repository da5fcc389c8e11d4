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
#include "simd_rows_test.h"

namespace pyca {
namespace {

using namespace simd_test;

class LddmmSimd : public SimdRows {};

TEST_P(LddmmSimd, TransportStepIsTheVoxelFunction) {
  const Vec3Di n = GetParam();
  const std::size_t nv = math::nVoxOf(n);
  std::mt19937 rng(7);
  const Vec3Di nIm(n.x + 5, n.y + 3, n.z == 1 ? 1 : n.z + 2);
  const std::vector<float> im = randomImage(math::nVoxOf(nIm), rng);
  for (int form = 0; form < 4; ++form) {  // with h or from the identity; with or without the affine
    const bool fromId = form & 1, affine = form & 2;
    const Planes3 h = randomMap(n, n, 3.f, rng), v = randomMap(n, n, 4.f, rng);
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
    const Planes3 h = randomMap(n, n, 2.5f, rng), v = randomMap(n, n, 4.f, rng);
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

INSTANTIATE_TEST_SUITE_P(Grids, LddmmSimd, simdGrids(), gridName);

}  // namespace
}  // namespace pyca
