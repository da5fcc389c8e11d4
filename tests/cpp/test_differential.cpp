// The `differential` family on the CPU: closed forms (ramps, quadratics, affine maps), boundary
// conditions, 2-D grids and argument checks. docs/operations/differential.md is the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "pyca/errors.h"
#include "pyca/ops/differential.h"
#include "pyca/pyca.h"

using namespace pyca;

namespace {

const GridInfo kGrid3(Vec3Di(9, 8, 7), Vec3Df(1.5f, 0.5f, 2.f), Vec3Df(1.f, -2.f, 0.5f));
const GridInfo kGrid2(Vec3Di(11, 9, 1), Vec3Df(1.5f, 2.1f, 1.f));

std::size_t idx(const GridInfo& g, int x, int y, int z) {
  return (std::size_t(z) * g.size().y + y) * g.size().x + x;
}

// Fills im with f(world x, y, z).
void fillWorld(Image3D& im, const std::function<float(float, float, float)>& f) {
  const GridInfo& g = im.grid();
  for (int z = 0; z < g.size().z; ++z)
    for (int y = 0; y < g.size().y; ++y)
      for (int x = 0; x < g.size().x; ++x) {
        const Vec3Df w = g.voxelToWorld(Vec3Df(float(x), float(y), float(z)));
        im.data()[idx(g, x, y, z)] = f(w.x, w.y, w.z);
      }
}

void fillRandom(float* p, std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (std::size_t i = 0; i < n; ++i) p[i] = u(gen);
}

bool interior(const GridInfo& g, int x, int y, int z) {
  const Vec3Di& s = g.size();
  return x > 0 && x < s.x - 1 && y > 0 && y < s.y - 1 && (s.z == 1 || (z > 0 && z < s.z - 1));
}

template <class F>
void forEach(const GridInfo& g, F f) {
  for (int z = 0; z < g.size().z; ++z)
    for (int y = 0; y < g.size().y; ++y)
      for (int x = 0; x < g.size().x; ++x) f(x, y, z, idx(g, x, y, z));
}

}  // namespace

TEST(Differential, GradientOfRampIsExactInsideAndCentralApproxEverywhere) {
  for (const GridInfo* g : {&kGrid3, &kGrid2}) {
    Image3D im(*g);
    fillWorld(im, [](float x, float y, float z) { return 2.f * x - 3.f * y + 0.5f * z + 1.f; });
    Field3D grad(*g);
    const float gz = g->is2D() ? 0.f : 0.5f;
    for (DiffT d : {DIFF_FORWARD, DIFF_BACKWARD, DIFF_CENTRAL}) {
      for (BoundaryCondT bc : {BC_CLAMP, BC_APPROX, BC_WRAP}) {
        Gradient(grad, im, d, bc);
        // BC_APPROX makes only central differences one-sided at the border (forward/backward: 0
        // there, as BC_CLAMP).
        const bool exactAtBorder = bc == BC_APPROX && d == DIFF_CENTRAL;
        forEach(*g, [&](int x, int y, int z, std::size_t i) {
          if (!exactAtBorder && !interior(*g, x, y, z)) return;
          EXPECT_NEAR(grad.x()[i], 2.f, 1e-3) << x << "," << y << "," << z;
          EXPECT_NEAR(grad.y()[i], -3.f, 1e-3) << x << "," << y << "," << z;
          EXPECT_NEAR(grad.z()[i], gz, 1e-3) << x << "," << y << "," << z;
        });
      }
    }
  }
}

TEST(Differential, FiniteDiffBorderValues) {
  // 1-D profile along x: f = 0, 1, 4, 9, 16 (index squared), spacing 2.
  GridInfo g(Vec3Di(5, 1, 1), Vec3Df(2.f, 1.f, 1.f));
  Image3D im(g), out(g);
  for (int i = 0; i < 5; ++i) im.data()[i] = float(i * i);
  auto run = [&](DiffT d, BoundaryCondT bc) {
    FiniteDiff(out, im, DIM_X, d, bc);
    return std::vector<float>(out.data(), out.data() + 5);
  };
  using V = std::vector<float>;
  EXPECT_EQ(run(DIFF_FORWARD, BC_CLAMP), (V{0.5f, 1.5f, 2.5f, 3.5f, 0.f}));
  EXPECT_EQ(run(DIFF_FORWARD, BC_APPROX), (V{0.5f, 1.5f, 2.5f, 3.5f, 0.f}));  // PyCA: as BC_CLAMP
  EXPECT_EQ(run(DIFF_FORWARD, BC_WRAP), (V{0.5f, 1.5f, 2.5f, 3.5f, -8.f}));
  EXPECT_EQ(run(DIFF_BACKWARD, BC_CLAMP), (V{0.f, 0.5f, 1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(run(DIFF_BACKWARD, BC_APPROX), (V{0.f, 0.5f, 1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(run(DIFF_BACKWARD, BC_WRAP), (V{-8.f, 0.5f, 1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(run(DIFF_CENTRAL, BC_CLAMP), (V{0.25f, 1.f, 2.f, 3.f, 1.75f}));
  EXPECT_EQ(run(DIFF_CENTRAL, BC_APPROX), (V{0.5f, 1.f, 2.f, 3.f, 3.5f}));
  EXPECT_EQ(run(DIFF_CENTRAL, BC_WRAP), (V{-3.75f, 1.f, 2.f, 3.f, -2.25f}));
  // Along an axis of one voxel the derivative is 0, whatever the boundary condition.
  for (BoundaryCondT bc : {BC_CLAMP, BC_APPROX, BC_WRAP}) {
    FiniteDiff(out, im, DIM_Y, DIFF_CENTRAL, bc);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(out.data()[i], 0.f);
  }
}

TEST(Differential, ZDerivativeIsZeroOn2DGrids) {
  Image3D im(kGrid2), out(kGrid2);
  fillRandom(im.data(), im.nVox(), 1);
  for (DiffT d : {DIFF_FORWARD, DIFF_BACKWARD, DIFF_CENTRAL})
    for (BoundaryCondT bc : {BC_CLAMP, BC_APPROX, BC_WRAP}) {
      out.fill(7.f);
      FiniteDiff(out, im, DIM_Z, d, bc);
      for (std::size_t i = 0; i < out.nVox(); ++i) ASSERT_EQ(out.data()[i], 0.f);
    }
}

TEST(Differential, DivergenceLaplacianAndGradientMag) {
  Field3D v(kGrid3);
  Image3D vx(kGrid3), vy(kGrid3), vz(kGrid3);
  fillWorld(vx, [](float x, float, float) { return 1.5f * x; });
  fillWorld(vy, [](float, float y, float) { return -2.f * y; });
  fillWorld(vz, [](float, float, float z) { return 0.25f * z; });
  for (std::size_t i = 0; i < v.nVox(); ++i) {
    v.x()[i] = vx.data()[i];
    v.y()[i] = vy.data()[i];
    v.z()[i] = vz.data()[i];
  }
  Image3D div(kGrid3);
  Divergence(div, v, DIFF_CENTRAL, BC_APPROX);
  for (std::size_t i = 0; i < div.nVox(); ++i) EXPECT_NEAR(div.data()[i], -0.25f, 1e-4);

  Image3D q(kGrid3), lap(kGrid3);
  fillWorld(q, [](float x, float y, float z) { return x * x - 0.5f * y * y + 3.f * z * z; });
  Laplacian(lap, q, BC_APPROX);  // exact for quadratics, borders included
  for (std::size_t i = 0; i < lap.nVox(); ++i) EXPECT_NEAR(lap.data()[i], 2.f - 1.f + 6.f, 2e-3);
  Laplacian(lap, q, BC_CLAMP);
  forEach(kGrid3, [&](int x, int y, int z, std::size_t i) {
    if (interior(kGrid3, x, y, z)) {
      EXPECT_NEAR(lap.data()[i], 7.f, 2e-3);
    }
  });
  // Periodic Laplacian sums to 0.
  Image3D r(kGrid3);
  fillRandom(r.data(), r.nVox(), 2);
  Laplacian(lap, r, BC_WRAP);
  double s = 0;
  for (std::size_t i = 0; i < lap.nVox(); ++i) s += lap.data()[i];
  EXPECT_NEAR(s, 0.0, 1e-3);

  Image3D ramp(kGrid3), mag(kGrid3);
  fillWorld(ramp, [](float x, float y, float z) { return 3.f * x + 4.f * y + 12.f * z; });
  GradientMag(mag, ramp, DIFF_CENTRAL, BC_APPROX);
  for (std::size_t i = 0; i < mag.nVox(); ++i) EXPECT_NEAR(mag.data()[i], 13.f, 1e-3);
}

TEST(Differential, JacDetHOfAffineMapIsDetAOverVoxelVolume) {
  // h(x) = A x + t in voxel coordinates, differentiated per world unit (PyCA's units):
  // det(Dh) = det(A) / (sx * sy * sz) (DIFF_CENTRAL, BC_APPROX: everywhere).
  const float A[3][3] = {{1.2f, 0.1f, -0.2f}, {0.05f, 0.9f, 0.1f}, {0.0f, -0.15f, 1.1f}};
  const double detA = A[0][0] * (A[1][1] * A[2][2] - A[1][2] * A[2][1]) -
                      A[0][1] * (A[1][0] * A[2][2] - A[1][2] * A[2][0]) +
                      A[0][2] * (A[1][0] * A[2][1] - A[1][1] * A[2][0]);
  Field3D h(kGrid3);
  forEach(kGrid3, [&](int x, int y, int z, std::size_t i) {
    const float p[3] = {float(x), float(y), float(z)};
    float* c[3] = {h.x(), h.y(), h.z()};
    for (int r = 0; r < 3; ++r) c[r][i] = A[r][0] * p[0] + A[r][1] * p[1] + A[r][2] * p[2] + 0.3f * r;
  });
  const double vol = 1.5 * 0.5 * 2.0;
  Image3D jd(kGrid3);
  JacDetH(jd, h);  // defaults: DIFF_CENTRAL, BC_APPROX
  for (std::size_t i = 0; i < jd.nVox(); ++i) ASSERT_NEAR(jd.data()[i], detA / vol, 1e-4);

  // Through Jacobian(): the plain determinant of its rows, the same number.
  Field3D Xg(kGrid3), Yg(kGrid3), Zg(kGrid3);
  Jacobian(Xg, Yg, Zg, h);
  Image3D jd2(kGrid3);
  JacDetH(jd2, Xg, Yg, Zg);
  for (std::size_t i = 0; i < jd.nVox(); ++i) ASSERT_NEAR(jd2.data()[i], detA / vol, 1e-4);
  // Jacobian() is per world unit: row 0 of Dh divided by the spacing.
  EXPECT_NEAR(Xg.x()[idx(kGrid3, 4, 4, 3)], A[0][0] / 1.5f, 1e-4);
  EXPECT_NEAR(Xg.y()[idx(kGrid3, 4, 4, 3)], A[0][1] / 0.5f, 1e-4);
  EXPECT_NEAR(Xg.z()[idx(kGrid3, 4, 4, 3)], A[0][2] / 2.0f, 1e-4);
}

TEST(Differential, JacDetHOfIdentityIsOneOverVoxelVolumeOn2DAnd3D) {
  for (const GridInfo* g : {&kGrid3, &kGrid2}) {
    Field3D h(*g);
    forEach(*g, [&](int x, int y, int z, std::size_t i) {
      h.x()[i] = float(x);
      h.y()[i] = float(y);
      h.z()[i] = float(z);
    });
    const Vec3Df& sp = g->spacing();
    const Vec3Di& n = g->size();
    const float vol = g->is2D() ? sp.x * sp.y : sp.x * sp.y * sp.z;
    Image3D jd(*g);
    for (DiffT d : {DIFF_FORWARD, DIFF_BACKWARD, DIFF_CENTRAL}) {
      JacDetH(jd, h, d, BC_APPROX);
      forEach(*g, [&](int x, int y, int z, std::size_t i) {
        // BC_APPROX: a forward difference at the last voxel (backward at the first) is 0, so a row
        // of Dh vanishes there and so does the determinant; central differences are exact.
        bool zeroRow = false;
        if (d == DIFF_FORWARD) zeroRow = x == n.x - 1 || y == n.y - 1 || (!g->is2D() && z == n.z - 1);
        if (d == DIFF_BACKWARD) zeroRow = x == 0 || y == 0 || (!g->is2D() && z == 0);
        ASSERT_NEAR(jd.data()[i], zeroRow ? 0.f : 1.f / vol, 1e-5) << d << ": " << x << "," << y << "," << z;
      });
    }
  }
}

TEST(Differential, JacDetVOfLinearDisplacement) {
  // v(x) = (B - I) x in world units: det(I + Dv) = det(B).
  const float B[3][3] = {{1.1f, 0.2f, 0.f}, {0.f, 0.8f, 0.1f}, {0.05f, 0.f, 1.3f}};
  const double detB = B[0][0] * (B[1][1] * B[2][2] - B[1][2] * B[2][1]) -
                      B[0][1] * (B[1][0] * B[2][2] - B[1][2] * B[2][0]) +
                      B[0][2] * (B[1][0] * B[2][1] - B[1][1] * B[2][0]);
  Field3D v(kGrid3);
  forEach(kGrid3, [&](int x, int y, int z, std::size_t i) {
    const Vec3Df w = kGrid3.voxelToWorld(Vec3Df(float(x), float(y), float(z)));
    const float p[3] = {w.x, w.y, w.z};
    float* c[3] = {v.x(), v.y(), v.z()};
    for (int r = 0; r < 3; ++r) c[r][i] = B[r][0] * p[0] + B[r][1] * p[1] + B[r][2] * p[2] - p[r];
  });
  Image3D jd(kGrid3);
  JacDetV(jd, v);
  for (std::size_t i = 0; i < jd.nVox(); ++i) ASSERT_NEAR(jd.data()[i], detB, 1e-4);
  Field3D Xg(kGrid3), Yg(kGrid3), Zg(kGrid3);
  Jacobian(Xg, Yg, Zg, v);
  JacDetV(jd, Xg, Yg, Zg);
  for (std::size_t i = 0; i < jd.nVox(); ++i) ASSERT_NEAR(jd.data()[i], detB, 1e-4);
}

TEST(Differential, GradientMaskTreatsMaskedNeighboursLikeTheBorder) {
  GridInfo g(Vec3Di(6, 1, 1), Vec3Df(1.f, 1.f, 1.f));
  Image3D im(g), mask(g);
  const float f[6] = {0.f, 1.f, 3.f, 6.f, 10.f, 15.f};
  const float m[6] = {1.f, 1.f, 1.f, 0.f, 1.f, 1.f};
  for (int i = 0; i < 6; ++i) {
    im.data()[i] = f[i];
    mask.data()[i] = m[i];
  }
  Field3D gr(g);
  GradientMask(gr, im, mask, DIFF_CENTRAL, BC_CLAMP);
  const float clamp[6] = {0.5f, 1.5f, 0.5f * (3.f - 1.f), 0.f, 0.5f * (15.f - 10.f), 0.5f * (15.f - 10.f)};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(gr.x()[i], clamp[i]) << i;
  GradientMask(gr, im, mask, DIFF_CENTRAL, BC_APPROX);
  const float approx[6] = {1.f, 1.5f, 2.f, 0.f, 5.f, 5.f};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(gr.x()[i], approx[i]) << i;
  // Forward/backward differences towards a masked voxel or beyond the border are 0, with BC_APPROX
  // as with BC_CLAMP (PyCA's).
  for (BoundaryCondT bc : {BC_CLAMP, BC_APPROX}) {
    GradientMask(gr, im, mask, DIFF_FORWARD, bc);
    const float fwd[6] = {1.f, 2.f, 0.f, 0.f, 5.f, 0.f};
    for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(gr.x()[i], fwd[i]) << i;
    GradientMask(gr, im, mask, DIFF_BACKWARD, bc);
    const float bwd[6] = {0.f, 1.f, 2.f, 0.f, 0.f, 5.f};
    for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(gr.x()[i], bwd[i]) << i;
  }
  // Without masked voxels it is Gradient.
  mask.fill(1.f);
  Field3D g1(g);
  GradientMask(gr, im, mask, DIFF_FORWARD, BC_WRAP);
  Gradient(g1, im, DIFF_FORWARD, BC_WRAP);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(gr.x()[i], g1.x()[i]) << i;
}

TEST(Differential, UpwindDiffAndGradMag) {
  GridInfo g(Vec3Di(5, 1, 1), Vec3Df(0.5f, 1.f, 1.f));
  Image3D im(g), speed(g), out(g);
  const float f[5] = {0.f, 1.f, 4.f, 9.f, 16.f};
  const float s[5] = {1.f, -1.f, 0.f, -2.f, 3.f};
  for (int i = 0; i < 5; ++i) {
    im.data()[i] = f[i];
    speed.data()[i] = s[i];
  }
  UpwindDiff(out, im, speed, DIM_X);
  // speed >= 0: backward (0 at the first voxel); speed < 0: forward (0 at the last voxel).
  const float ud[5] = {0.f, 6.f, 6.f, 14.f, 14.f};
  for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(out.data()[i], ud[i]) << i;

  // Increasing ramp: the upwind gradient magnitude is the slope for both signs of speed.
  Image3D ramp(kGrid3), sp(kGrid3), o(kGrid3);
  fillWorld(ramp, [](float x, float y, float) { return 3.f * x + 4.f * y; });
  fillRandom(sp.data(), sp.nVox(), 3);
  UpwindGradMag(o, ramp, sp);
  for (std::size_t i = 0; i < o.nVox(); ++i) ASSERT_NEAR(o.data()[i], 5.f * sp.data()[i], 1e-3);
}

TEST(Differential, RejectsBadArguments) {
  Image3D a(kGrid3), b(kGrid2);
  Field3D f(kGrid3);
  fillRandom(a.data(), a.nVox(), 4);
  const float before = a.data()[5];
  try {
    FiniteDiff(b, a, DIM_X);
    FAIL() << "no exception";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("FiniteDiff"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'im'"), std::string::npos);
  }
  EXPECT_THROW(FiniteDiff(a, a, DIM_X), ValueError);  // in place
  Image3D c(kGrid2);
  EXPECT_THROW(FiniteDiff(c, b, DimT(7)), ValueError);  // bad enum
  EXPECT_THROW(Gradient(f, a, DiffT(9)), ValueError);   // bad enum
  EXPECT_THROW(Gradient(f, a, DIFF_CENTRAL, BoundaryCondT(5)), ValueError);
  EXPECT_THROW(JacDetH(b, f), ValueError);
  EXPECT_EQ(a.data()[5], before);
}
