// GridInfo's direction matrix and the world mapping between two grids (docs/design/orientation.md).
#include <gtest/gtest.h>

#include <cmath>

#include "pyca/math/deformation.h"
#include "pyca/pyca.h"

using namespace pyca;

namespace {
// A rotation by `a` radians about z composed with a flip of x: columns orthonormal, det -1.
Mat3d rotFlip(double a) {
  const double c = std::cos(a), s = std::sin(a);
  return {-c, -s, 0, -s, c, 0, 0, 0, 1};
}
}  // namespace

TEST(GridInfoDirection, DefaultIdentityValidatedAndCompared) {
  GridInfo g(Vec3Di(4, 5, 6), Vec3Df(2.f, 1.f, 0.5f), Vec3Df(10.f, 0.f, -1.f));
  EXPECT_TRUE(g.hasIdentityDirection());
  EXPECT_EQ(g.str(), "GridInfo(size=(4, 5, 6), spacing=(2, 1, 0.5), origin=(10, 0, -1))");
  GridInfo r = g;
  r.setDirection(rotFlip(0.3));
  EXPECT_FALSE(r.hasIdentityDirection());
  EXPECT_NE(r, g);  // equality includes the direction
  EXPECT_FALSE(r.sameDirection(g));
  EXPECT_TRUE(
      r.sameDirection(GridInfo(Vec3Di(1, 1, 1), Vec3Df(1.f, 1.f, 1.f), Vec3Df(0.f, 0.f, 0.f), rotFlip(0.3))));
  EXPECT_NE(r.str().find("direction=((-"), std::string::npos);
  // Not orthonormal, a scaled column, a NaN: refused, the grid unchanged.
  EXPECT_THROW(r.setDirection({1, 0.1, 0, 0, 1, 0, 0, 0, 1}), ValueError);
  EXPECT_THROW(r.setDirection({2, 0, 0, 0, 1, 0, 0, 0, 1}), ValueError);
  EXPECT_THROW(r.setDirection({NAN, 0, 0, 0, 1, 0, 0, 0, 1}), ValueError);
  EXPECT_THROW(r.setDirection({0, 0, 0, 0, 0, 0, 0, 0, 0}), ValueError);
  EXPECT_EQ(r.direction(), rotFlip(0.3));
}

TEST(GridInfoDirection, VoxelWorldRoundTrip) {
  GridInfo g(Vec3Di(4, 5, 6), Vec3Df(2.f, 1.f, 0.5f), Vec3Df(10.f, 0.f, -1.f), rotFlip(0.3));
  const Vec3Df i(1.f, 2.f, 4.f);
  const double c = std::cos(0.3), s = std::sin(0.3);
  // world = origin + D (spacing * i) with spacing * i = (2, 2, 2).
  const Vec3Df w = g.voxelToWorld(i);
  EXPECT_NEAR(w.x, 10.0 - 2 * c - 2 * s, 1e-5);
  EXPECT_NEAR(w.y, -2 * s + 2 * c, 1e-5);
  EXPECT_NEAR(w.z, -1.0 + 2, 1e-5);
  const Vec3Df back = g.worldToVoxel(w);
  EXPECT_NEAR(back.x, 1.f, 1e-5);
  EXPECT_NEAR(back.y, 2.f, 1e-5);
  EXPECT_NEAR(back.z, 4.f, 1e-5);
}

TEST(GridInfoDirection, WorldMappingMatchesVoxelWorld) {
  GridInfo from(Vec3Di(8, 9, 10), Vec3Df(1.5f, 1.f, 2.f), Vec3Df(3.f, -4.f, 1.f), rotFlip(0.4));
  GridInfo to(Vec3Di(7, 7, 7), Vec3Df(1.f, 2.f, 1.f), Vec3Df(-1.f, 2.f, 0.5f), rotFlip(-0.2));
  const math::PosSpec p = math::worldMapping(from, to);
  EXPECT_EQ(p.mode, math::POS_MATRIX);
  for (int x : {0, 3, 7}) {
    for (int z : {0, 9}) {
      const Vec3Df got = p.at(x, 2, z, 0);
      const Vec3Df want = to.worldToVoxel(from.voxelToWorld(Vec3Df(float(x), 2.f, float(z))));
      EXPECT_NEAR(got.x, want.x, 1e-4);
      EXPECT_NEAR(got.y, want.y, 1e-4);
      EXPECT_NEAR(got.z, want.z, 1e-4);
    }
  }
  // One direction on both grids (identity): the per-axis form.
  const math::PosSpec q = math::worldMapping(
      GridInfo(Vec3Di(4, 4, 4), Vec3Df(2.f, 2.f, 2.f), Vec3Df(1.f, 0.f, 0.f)), GridInfo(Vec3Di(8, 8, 8)));
  EXPECT_EQ(q.mode, math::POS_AFFINE);
  EXPECT_FLOAT_EQ(q.scale.x, 2.f);
  EXPECT_FLOAT_EQ(q.offset.x, 1.f);
}
