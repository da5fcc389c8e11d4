// The CPU's SIMD rows of the trilinear gathers, ApplyHUnblurred, ComposeHHBorder, LDDMMComposeStep, JacDetH,
// Gradient and JacobianXY (core/src/ops/deformation_simd.cpp) against the per-voxel functions they stand for
// (pyca/math), bit for bit: grids whose rows are not a multiple of 16, a 2-D grid, samples inside, on and
// past the border, NaN and infinite positions, a source of another size, every background strategy, both
// position forms (an H-field and x + scale v), a post-multiplier and the position added (ComposeVH's form),
// and the outputs written over an input where the operations allow it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/deformation_simd.h"
#include "ops/lddmm_simd.h"
#include "pyca/math/deformation.h"
#include "pyca/math/differential.h"
#include "pyca/math/lddmm.h"
#include "simd_rows_test.h"

namespace pyca {
namespace {

using namespace simd_test;

class DeformationSimd : public SimdRows {};

// gatherVoxel at every voxel, as the scalar loop of deformation_cpu.cpp.
template <BackgroundStrategy BG, int NC>
void scalarGather(const deformation_impl::GatherJob& j) {
  const math::MutPlanes<NC> out = math::mutPlanes<NC>(j.out);
  const math::Planes<NC> src = math::planes<NC>(j.src);
  std::size_t i = 0;
  for (int z = 0; z < j.outSize.z; ++z)
    for (int y = 0; y < j.outSize.y; ++y)
      for (int x = 0; x < j.outSize.x; ++x, ++i)
        math::gatherVoxel<INTERP_LINEAR, BG, NC>(out, src, j.srcSize, j.pos, j.post, j.bgVal, x, y, z, i);
}

template <BackgroundStrategy BG, int NC>
void checkGather(const Vec3Di& n, std::mt19937& rng) {
  const Vec3Di ns(n.x + 5, n.y + 3, n.z == 1 ? 1 : n.z + 2);  // the source: another size
  const std::size_t nv = math::nVoxOf(n), ns_ = math::nVoxOf(ns);
  Planes3 srcH(ns_), srcV(nv);  // sampled through an H-field (another size) or at x + scale v (n)
  for (auto& p : srcH.c) p = randomImage(ns_, rng);
  for (auto& p : srcV.c) p = randomImage(nv, rng);
  for (int form = 0; form < 4; ++form) {  // POS_H or POS_V; plain or with mul and addPos
    const bool vform = form & 1, post = form & 2;
    Planes3 h = randomMap(n, vform ? n : ns, vform ? 4.f : 2.5f, rng);
    deformation_impl::GatherJob j;
    j.nc = NC;
    j.outSize = n;
    j.srcSize = vform ? n : ns;
    j.bg = BG;
    j.bgVal = 0.375f;
    j.pos.mode = vform ? math::POS_V : math::POS_H;
    j.pos.fx = h.c[0].data();
    j.pos.fy = h.c[1].data();
    j.pos.fz = h.c[2].data();
    j.pos.scale = Vec3Df(0.6f, -0.45f, 0.3f);
    if (post) {
      j.post.mul = Vec3Df(0.5f, -2.f, 1.25f);
      j.post.addPos = true;
    }
    Planes3 got(nv), want(nv);
    for (int c = 0; c < NC; ++c) j.src[c] = (vform ? srcV : srcH).c[c].data();
    for (int c = 0; c < NC; ++c) j.out[c] = got.c[c].data();
    ASSERT_TRUE(simd16::gatherLinear(j));
    for (int c = 0; c < NC; ++c) j.out[c] = want.c[c].data();
    scalarGather<BG, NC>(j);
    for (int c = 0; c < NC; ++c)
      EXPECT_TRUE(sameBits(got.c[c], want.c[c])) << "bg " << int(BG) << " NC " << NC << " form " << form;
    if (NC == 3 && !vform && !post) {  // out over the H-field itself (ApplyH of a field allows it)
      Planes3 h2 = h;
      for (int c = 0; c < 3; ++c) j.out[c] = h2.c[c].data();
      j.pos.fx = h2.c[0].data();
      j.pos.fy = h2.c[1].data();
      j.pos.fz = h2.c[2].data();
      ASSERT_TRUE(simd16::gatherLinear(j));
      for (int c = 0; c < 3; ++c) EXPECT_TRUE(sameBits(h2.c[c], want.c[c])) << "in place, component " << c;
    }
  }
}

TEST_P(DeformationSimd, GatherIsTheVoxelFunction) {
  const Vec3Di n = GetParam();
  std::mt19937 rng(3);
  checkGather<BACKGROUND_STRATEGY_CLAMP, 1>(n, rng);
  checkGather<BACKGROUND_STRATEGY_CLAMP, 3>(n, rng);
  checkGather<BACKGROUND_STRATEGY_WRAP, 1>(n, rng);
  checkGather<BACKGROUND_STRATEGY_ZERO, 1>(n, rng);
  checkGather<BACKGROUND_STRATEGY_VAL, 1>(n, rng);
  checkGather<BACKGROUND_STRATEGY_PARTIAL_ZERO, 3>(n, rng);
  checkGather<BACKGROUND_STRATEGY_PARTIAL_ID, 3>(n, rng);
  checkGather<BACKGROUND_STRATEGY_ID, 3>(n, rng);
}

TEST_P(DeformationSimd, GatherLeavesOtherFormsToTheScalarLoop) {
  deformation_impl::GatherJob j;
  j.outSize = j.srcSize = GetParam();
  j.interp = INTERP_CUBIC;
  EXPECT_FALSE(simd16::gatherLinear(j));
  j.interp = INTERP_LINEAR;
  j.pos.mode = math::POS_AFFINE;
  EXPECT_FALSE(simd16::gatherLinear(j));
}

TEST_P(DeformationSimd, ComposeBorderIsTheVoxelFunction) {
  const Vec3Di n = GetParam();
  const Vec3Di nf(n.x + 4, n.y + 2, n.z == 1 ? 1 : n.z + 3);
  const std::size_t nv = math::nVoxOf(n);
  std::mt19937 rng(5);
  const Planes3 f = randomMap(nf, nf, 3.f, rng), g = randomMap(n, nf, 3.f, rng);
  Planes3 got(nv), want(nv);
  ASSERT_TRUE(simd16::composeBorder(got.out(), n, f.in(), nf, g.in()));
  for (std::size_t i = 0; i < nv; ++i) math::composeBorderVoxel(want.out(), f.in(), g.in(), nf, i);
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(sameBits(got.c[c], want.c[c])) << "component " << c;
  Planes3 g2 = g;  // out may be g
  ASSERT_TRUE(simd16::composeBorder(g2.out(), n, f.in(), nf, g2.in()));
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(sameBits(g2.c[c], want.c[c])) << "in place, component " << c;
}

TEST_P(DeformationSimd, UnblurredIsTheVoxelFunction) {
  const Vec3Di n = GetParam();
  const Vec3Di ns(n.x + 4, n.y + 2, n.z == 1 ? 1 : n.z + 3);
  const std::size_t nv = math::nVoxOf(n), nsv = math::nVoxOf(ns);
  std::mt19937 rng(21);
  const Planes3 h = randomMap(n, ns, 2.5f, rng);
  std::vector<float> im = randomImage(nsv, rng), c0 = randomImage(nsv, rng), c1 = randomImage(nsv, rng),
                     c2 = randomImage(nsv, rng);
  const math::Planes<4> src{{im.data(), c0.data(), c1.data(), c2.data()}};
  std::vector<float> got(nv, -1.f), want(nv, -2.f);
  ASSERT_TRUE(simd16::unblurred(got.data(), n, src, ns, h.in()));
  for (std::size_t i = 0; i < nv; ++i) math::unblurredVoxel(want.data(), src, ns, h.in(), i);
  EXPECT_TRUE(sameBits(got, want));
}

TEST_P(DeformationSimd, ComposeStepIsTheVoxelFunction) {
  const Vec3Di n = GetParam();
  const std::size_t nv = math::nVoxOf(n);
  std::mt19937 rng(9);
  const Planes3 h = randomMap(n, n, 3.f, rng), v = randomMap(n, n, 4.f, rng);
  math::ComposeParams P;
  P.n = n;
  P.scale = Vec3Df(0.1f, -0.13f, 0.07f);
  Planes3 got(nv), want(nv);
  ASSERT_TRUE(simd16::composeStep(got.out(), h.in(), v.in(), P));
  std::size_t i = 0;
  for (int z = 0; z < n.z; ++z)
    for (int y = 0; y < n.y; ++y)
      for (int x = 0; x < n.x; ++x, ++i) math::composeVoxel(want.out(), h.in(), v.in(), P, x, y, z, i);
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(sameBits(got.c[c], want.c[c])) << "component " << c;
  Planes3 v2 = v;  // hOut may be v
  ASSERT_TRUE(simd16::composeStep(v2.out(), h.in(), v2.in(), P));
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(sameBits(v2.c[c], want.c[c])) << "in place, component " << c;
}

TEST_P(DeformationSimd, StencilsAreTheVoxelFunctions) {
  const Vec3Di n = GetParam();
  const std::size_t nv = math::nVoxOf(n);
  std::mt19937 rng(13);
  const Planes3 h = randomMap(n, n, 2.f, rng);
  const std::vector<float> im = randomImage(nv, rng);
  const math::Grid3 g{n.x, n.y, n.z, 1.f / 1.5f, 1.f / 0.9f, 1.f / 2.f};
  for (BoundaryCondT bc : {BC_APPROX, BC_CLAMP, BC_WRAP}) {
    std::vector<float> got(nv, -1.f), want(nv, -2.f);
    ASSERT_TRUE(simd16::jacDetH(got.data(), h.in(), g, DIFF_CENTRAL, bc));
    Planes3 gg(nv), gw(nv);
    ASSERT_TRUE(simd16::gradient(gg.out(), im.data(), g, DIFF_CENTRAL, bc));
    std::size_t i = 0;
    for (int z = 0; z < n.z; ++z)
      for (int y = 0; y < n.y; ++y)
        for (int x = 0; x < n.x; ++x, ++i) {
          want[i] = math::jacDetH(h.c[0].data() + i, h.c[1].data() + i, h.c[2].data() + i, g, x, y, z,
                                  DIFF_CENTRAL, bc);
          math::gradient(im.data() + i, g, x, y, z, DIFF_CENTRAL, bc, gw.c[0][i], gw.c[1][i], gw.c[2][i]);
        }
    EXPECT_TRUE(sameBits(got, want)) << "JacDetH, bc " << int(bc);
    for (int c = 0; c < 3; ++c)
      EXPECT_TRUE(sameBits(gg.c[c], gw.c[c])) << "Gradient " << c << ", bc " << int(bc);
  }
  std::vector<float> out(nv);
  EXPECT_FALSE(simd16::jacDetH(out.data(), h.in(), g, DIFF_FORWARD, BC_CLAMP));  // the scalar loop's
  // JacobianXY: (D h) Y
  const Planes3 Y = randomMap(n, n, 1.f, rng);
  Planes3 jg(nv), jw(nv);
  ASSERT_TRUE(simd16::jacobianXY(jg.out(), h.in(), Y.in(), g));
  const float* X[3] = {h.c[0].data(), h.c[1].data(), h.c[2].data()};
  const float* Yp[3] = {Y.c[0].data(), Y.c[1].data(), Y.c[2].data()};
  std::size_t i = 0;
  for (int z = 0; z < n.z; ++z)
    for (int y = 0; y < n.y; ++y)
      for (int x = 0; x < n.x; ++x, ++i) {
        float r[3];
        math::jacobianXY(X, Yp, i, g, x, y, z, r);
        for (int c = 0; c < 3; ++c) jw.c[c][i] = r[c];
      }
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(sameBits(jg.c[c], jw.c[c])) << "JacobianXY " << c;
}

INSTANTIATE_TEST_SUITE_P(Grids, DeformationSimd, simdGrids(), gridName);

}  // namespace
}  // namespace pyca
