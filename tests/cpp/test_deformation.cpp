// Closed-form tests of the deformation family on the CPU (docs/operations/deformation.md).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "pyca/array3d.h"
#include "pyca/errors.h"
#include "pyca/grid_info.h"
#include "pyca/ops/deformation.h"

namespace pyca {
namespace {

using Fn3 = std::function<float(float, float, float)>;

GridInfo grid3() { return GridInfo(Vec3Di(17, 23, 31), Vec3Df(1.5f, 1.f, 2.f)); }
GridInfo grid2() { return GridInfo(Vec3Di(31, 33, 1), Vec3Df(1.5f, 2.1f, 1.f)); }

std::size_t idx(const Vec3Di& n, int x, int y, int z) { return (std::size_t(z) * n.y + y) * n.x + x; }

void fillImage(Image3D& im, const Fn3& f) {
  const Vec3Di n = im.size();
  for (int z = 0; z < n.z; ++z)
    for (int y = 0; y < n.y; ++y)
      for (int x = 0; x < n.x; ++x) im.data()[idx(n, x, y, z)] = f(float(x), float(y), float(z));
}
void fillField(Field3D& f, const Fn3& fx, const Fn3& fy, const Fn3& fz) {
  const Vec3Di n = f.size();
  for (int z = 0; z < n.z; ++z)
    for (int y = 0; y < n.y; ++y)
      for (int x = 0; x < n.x; ++x) {
        const std::size_t i = idx(n, x, y, z);
        f.x()[i] = fx(float(x), float(y), float(z));
        f.y()[i] = fy(float(x), float(y), float(z));
        f.z()[i] = fz(float(x), float(y), float(z));
      }
}
void randomImage(Image3D& im, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (std::size_t i = 0; i < im.nVox(); ++i) im.data()[i] = u(rng);
}
void randomField(Field3D& f, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (std::size_t i = 0; i < f.nVox(); ++i) {
    f.x()[i] = u(rng);
    f.y()[i] = u(rng);
    f.z()[i] = u(rng);
  }
}
// h = identity + uniform noise of amplitude amp (voxels); z untouched on a 2-D grid.
void noisyIdentity(Field3D& h, float amp, unsigned seed) {
  SetToIdentity(h);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-amp, amp);
  for (std::size_t i = 0; i < h.nVox(); ++i) {
    h.x()[i] += u(rng);
    h.y()[i] += u(rng);
    if (!h.grid().is2D()) h.z()[i] += u(rng);
  }
}
double dot(const Image3D& a, const Image3D& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.nVox(); ++i) s += double(a.data()[i]) * b.data()[i];
  return s;
}
double dot(const Field3D& a, const Field3D& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.nVox(); ++i)
    s += double(a.x()[i]) * b.x()[i] + double(a.y()[i]) * b.y()[i] + double(a.z()[i]) * b.z()[i];
  return s;
}

TEST(Deformation, SetToIdentityAndHV) {
  for (const GridInfo& g : {grid3(), grid2()}) {
    Field3D h(g), v(g), h2(g);
    SetToIdentity(h);
    const Vec3Di n = g.size();
    EXPECT_EQ(h.x()[idx(n, 3, 4, 0)], 3.f);
    EXPECT_EQ(h.y()[idx(n, 3, 4, 0)], 4.f);
    EXPECT_EQ(h.z()[idx(n, 3, 4, n.z - 1)], float(n.z - 1));
    // h = x + (1, -2, 0.5) voxels -> v = (1.5, -2 * sp.y, 0.5 * sp.z)
    fillField(
        h, [](float x, float, float) { return x + 1.f; }, [](float, float y, float) { return y - 2.f; },
        [](float, float, float z) { return z + 0.5f; });
    HtoV(v, h);
    const Vec3Df sp = g.spacing();
    for (std::size_t i = 0; i < g.nVox(); i += 97) {
      EXPECT_FLOAT_EQ(v.x()[i], 1.f * sp.x);
      EXPECT_FLOAT_EQ(v.y()[i], -2.f * sp.y);
      EXPECT_FLOAT_EQ(v.z()[i], 0.5f * sp.z);
    }
    VtoH(h2, v);
    for (std::size_t i = 0; i < g.nVox(); i += 97) {
      EXPECT_NEAR(h2.x()[i], h.x()[i], 1e-5);
      EXPECT_NEAR(h2.y()[i], h.y()[i], 1e-5);
      EXPECT_NEAR(h2.z()[i], h.z()[i], 1e-5);
    }
    VtoH_I(v);
    HtoV_I(v);
    EXPECT_NEAR(v.y()[idx(n, 5, 6, 0)], -2.f * sp.y, 1e-5);
  }
}

TEST(Deformation, ApplyHIdentityIsCopy) {
  for (const GridInfo& g : {grid3(), grid2()}) {
    Image3D im(g), out(g);
    Field3D h(g);
    randomImage(im, 1);
    SetToIdentity(h);
    for (InterpT it : {INTERP_NN, INTERP_LINEAR, INTERP_CUBIC}) {
      for (BackgroundStrategy bg :
           {BACKGROUND_STRATEGY_CLAMP, BACKGROUND_STRATEGY_WRAP, BACKGROUND_STRATEGY_ZERO,
            BACKGROUND_STRATEGY_PARTIAL_ZERO, BACKGROUND_STRATEGY_VAL}) {
        out.fill(123.f);
        ApplyH(out, im, h, bg, it, 7.f);
        for (std::size_t i = 0; i < g.nVox(); ++i) ASSERT_NEAR(out.data()[i], im.data()[i], 1e-6) << i;
      }
    }
  }
}

TEST(Deformation, ApplyHReproducesLinearFunctionsInside) {
  const GridInfo g = grid3();
  Image3D im(g), out(g);
  Field3D h(g);
  auto f = [](float x, float y, float z) { return 0.5f * x - 0.25f * y + 0.125f * z + 3.f; };
  fillImage(im, f);
  noisyIdentity(h, 0.9f, 2);
  // keep h inside [1, n-2], where the cubic's four taps are inside too
  const Vec3Di n = g.size();
  for (std::size_t i = 0; i < g.nVox(); ++i) {
    h.x()[i] = std::fmin(std::fmax(h.x()[i], 1.f), float(n.x - 2));
    h.y()[i] = std::fmin(std::fmax(h.y()[i], 1.f), float(n.y - 2));
    h.z()[i] = std::fmin(std::fmax(h.z()[i], 1.f), float(n.z - 2));
  }
  for (InterpT it : {INTERP_LINEAR, INTERP_CUBIC}) {
    ApplyH(out, im, h, BACKGROUND_STRATEGY_ZERO, it);
    for (std::size_t i = 0; i < g.nVox(); ++i) {
      const float e = f(h.x()[i], h.y()[i], h.z()[i]);
      ASSERT_NEAR(out.data()[i], e, 2e-4) << i << " interp " << it;
    }
  }
}

// The source may have any size: h holds voxel coordinates of the source's own grid, and the
// background strategy applies at the source's borders.
TEST(Deformation, ApplyHSamplesASourceOfAnotherSize) {
  const GridInfo g = grid3(), gs(Vec3Di(11, 29, 7), Vec3Df(2.f, 1.f, 3.f));
  Image3D im(gs), out(g);
  Field3D h(g);
  auto f = [](float x, float y, float z) { return 0.5f * x - 0.25f * y + 0.125f * z + 3.f; };
  fillImage(im, f);
  const Vec3Di n = g.size(), m = gs.size();
  // h spans the source's box (scaled identity) plus noise, clamped to [1, m - 2] (cubic taps inside)
  noisyIdentity(h, 0.9f, 7);
  for (std::size_t i = 0; i < g.nVox(); ++i) {
    h.x()[i] = std::fmin(std::fmax(h.x()[i] * float(m.x - 1) / float(n.x - 1), 1.f), float(m.x - 2));
    h.y()[i] = std::fmin(std::fmax(h.y()[i] * float(m.y - 1) / float(n.y - 1), 1.f), float(m.y - 2));
    h.z()[i] = std::fmin(std::fmax(h.z()[i] * float(m.z - 1) / float(n.z - 1), 1.f), float(m.z - 2));
  }
  for (InterpT it : {INTERP_LINEAR, INTERP_CUBIC}) {
    ApplyH(out, im, h, BACKGROUND_STRATEGY_ZERO, it);
    for (std::size_t i = 0; i < g.nVox(); ++i) {
      ASSERT_NEAR(out.data()[i], f(h.x()[i], h.y()[i], h.z()[i]), 2e-4) << i << " interp " << it;
    }
  }
  // Beyond the source's last voxel (inside out's grid): background; CLAMP extends the border.
  h.x()[0] = float(m.x - 1) + 0.5f;
  ApplyH(out, im, h, BACKGROUND_STRATEGY_ZERO);
  EXPECT_EQ(out.data()[0], 0.f);
  ApplyH(out, im, h, BACKGROUND_STRATEGY_CLAMP);
  EXPECT_NEAR(out.data()[0], f(float(m.x - 1), h.y()[0], h.z()[0]), 1e-5);
  // Nearest neighbour reads the source's voxels exactly.
  ApplyH(out, im, h, BACKGROUND_STRATEGY_CLAMP, INTERP_NN);
  for (std::size_t i = 1; i < g.nVox(); ++i) {
    const float e = f(std::floor(h.x()[i] + 0.5f), std::floor(h.y()[i] + 0.5f), std::floor(h.z()[i] + 0.5f));
    ASSERT_NEAR(out.data()[i], e, 1e-5) << i;
  }
}

TEST(Deformation, BackgroundStrategiesAtTheBorder) {
  const GridInfo g(Vec3Di(5, 4, 3));
  Image3D im(g), out(g);
  Field3D h(g);
  im.fill(2.f);
  SetToIdentity(h);
  h.x()[0] = -0.5f;  // half outside along x at voxel 0
  h.x()[1] = 4.25f;  // a quarter beyond the last voxel
  h.x()[2] = -3.f;   // far outside
  auto run = [&](BackgroundStrategy bg) {
    ApplyH(out, im, h, bg, INTERP_LINEAR, 9.f);
    return std::vector<float>{out.data()[0], out.data()[1], out.data()[2]};
  };
  EXPECT_EQ(run(BACKGROUND_STRATEGY_CLAMP), (std::vector<float>{2.f, 2.f, 2.f}));
  EXPECT_EQ(run(BACKGROUND_STRATEGY_WRAP), (std::vector<float>{2.f, 2.f, 2.f}));
  EXPECT_EQ(run(BACKGROUND_STRATEGY_PARTIAL_ZERO), (std::vector<float>{1.f, 1.5f, 0.f}));
  EXPECT_EQ(run(BACKGROUND_STRATEGY_ZERO), (std::vector<float>{0.f, 0.f, 0.f}));
  EXPECT_EQ(run(BACKGROUND_STRATEGY_VAL), (std::vector<float>{9.f, 9.f, 9.f}));
  // Fields: PARTIAL_ID takes the identity coordinate for outside neighbours, ID the position.
  Field3D f(g), fo(g);
  f.fill(Vec3Df(10.f, 20.f, 30.f));
  ApplyH(fo, f, h, BACKGROUND_STRATEGY_PARTIAL_ID);
  EXPECT_FLOAT_EQ(fo.x()[0], 0.5f * 10.f + 0.5f * -1.f);  // neighbour x = -1 contributes its index
  EXPECT_FLOAT_EQ(fo.y()[0], 0.5f * 20.f + 0.5f * 0.f);   // ... in every component: (-1, 0, 0)
  EXPECT_FLOAT_EQ(fo.x()[2], -3.f);                       // fully outside: the identity
  ApplyH(fo, f, h, BACKGROUND_STRATEGY_ID);
  EXPECT_FLOAT_EQ(fo.x()[0], -0.5f);
  EXPECT_FLOAT_EQ(fo.y()[0], 0.f);
  EXPECT_FLOAT_EQ(fo.x()[3], 10.f);
}

TEST(Deformation, TwoDGridNeverReadsZ) {
  const GridInfo g = grid2();
  Image3D im(g), out(g), ref(g);
  Field3D h(g);
  randomImage(im, 3);
  noisyIdentity(h, 1.5f, 4);
  ApplyH(ref, im, h, BACKGROUND_STRATEGY_PARTIAL_ZERO);
  for (std::size_t i = 0; i < g.nVox(); ++i) h.z()[i] = 0.7f * float(i % 5) - 1.f;  // z is ignored
  for (BackgroundStrategy bg : {BACKGROUND_STRATEGY_PARTIAL_ZERO, BACKGROUND_STRATEGY_ZERO}) {
    ApplyH(out, im, h, bg);
    if (bg == BACKGROUND_STRATEGY_PARTIAL_ZERO) {
      for (std::size_t i = 0; i < g.nVox(); ++i) ASSERT_EQ(out.data()[i], ref.data()[i]);
    }
  }
}

TEST(Deformation, ApplyVMatchesApplyH) {
  const GridInfo g = grid3();
  Image3D im(g), a(g), b(g);
  Field3D v(g), h(g);
  randomImage(im, 5);
  randomField(v, 6, -2.f, 2.f);
  VtoH(h, v);
  ApplyV(a, im, v);
  ApplyH(b, im, h);
  for (std::size_t i = 0; i < g.nVox(); ++i) ASSERT_NEAR(a.data()[i], b.data()[i], 1e-5);
  // ApplyVInv with delta = 0.5 is ApplyV with delta = -0.5
  ApplyVInv(a, im, v, 0.5f);
  ApplyV(b, im, v, -0.5f);
  for (std::size_t i = 0; i < g.nVox(); ++i) ASSERT_EQ(a.data()[i], b.data()[i]);
}

TEST(Deformation, ComposeAffineMaps) {
  const GridInfo g = grid3();
  Field3D f(g), gg(g), out(g);
  // f(x) = 0.5 x + (2, 3, 4), g(x) = 0.9 x + (0.3, 0.2, 0.1): g stays inside, f is affine.
  fillField(
      f, [](float x, float, float) { return 0.5f * x + 2.f; },
      [](float, float y, float) { return 0.5f * y + 3.f; },
      [](float, float, float z) { return 0.5f * z + 4.f; });
  fillField(
      gg, [](float x, float, float) { return 0.9f * x + 0.3f; },
      [](float, float y, float) { return 0.9f * y + 0.2f; },
      [](float, float, float z) { return 0.9f * z + 0.1f; });
  ComposeHH(out, f, gg);
  const Vec3Di n = g.size();
  for (int z = 0; z < n.z; ++z)
    for (int y = 0; y < n.y; ++y)
      for (int x = 0; x < n.x; ++x) {
        const std::size_t i = idx(n, x, y, z);
        ASSERT_NEAR(out.x()[i], 0.5f * (0.9f * x + 0.3f) + 2.f, 1e-4);
        ASSERT_NEAR(out.y()[i], 0.5f * (0.9f * y + 0.2f) + 3.f, 1e-4);
        ASSERT_NEAR(out.z()[i], 0.5f * (0.9f * z + 0.1f) + 4.f, 1e-4);
      }
  // ComposeHV with a constant V-field: out(x) = f(x + v / sp)
  Field3D v(g);
  v.fill(Vec3Df(1.5f * 0.5f, -1.f, 2.f * 0.25f));  // 0.5, -1, 0.25 voxels
  ComposeHV(out, f, v);
  const std::size_t i = idx(n, 7, 9, 11);
  EXPECT_NEAR(out.x()[i], 0.5f * 7.5f + 2.f, 1e-5);
  EXPECT_NEAR(out.y()[i], 0.5f * 8.f + 3.f, 1e-5);
  EXPECT_NEAR(out.z()[i], 0.5f * 11.25f + 4.f, 1e-5);
  // ComposeVH: out(x) = g(x) + v(g(x)) / sp with a constant v
  ComposeVH(out, v, gg);
  EXPECT_NEAR(out.x()[i], 0.9f * 7 + 0.3f + 0.5f, 1e-5);
  EXPECT_NEAR(out.y()[i], 0.9f * 9 + 0.2f - 1.f, 1e-5);
  ComposeVInvH(out, v, gg);
  EXPECT_NEAR(out.x()[i], 0.9f * 7 + 0.3f - 0.5f, 1e-5);
}

TEST(Deformation, SplatIsTheAdjointOfApplyH) {
  for (const GridInfo& g : {grid3(), grid2()}) {
    Image3D I(g), J(g), AI(g), SJ(g);
    Field3D h(g);
    randomImage(I, 7);
    randomImage(J, 8);
    noisyIdentity(h, 2.5f, 9);  // some samples fall outside
    ApplyH(AI, I, h, BACKGROUND_STRATEGY_PARTIAL_ZERO);
    Splat(SJ, h, J);
    const double lhs = dot(AI, J), rhs = dot(I, SJ);
    EXPECT_NEAR(lhs, rhs, 1e-5 * std::fabs(lhs)) << g.str();
  }
}

TEST(Deformation, SplatIsDeterministicAndNormalises) {
  const GridInfo g(Vec3Di(40, 37, 35));
  Image3D im(g), a(g), b(g);
  Field3D h(g);
  randomImage(im, 10);
  noisyIdentity(h, 3.f, 11);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Splat(a, h, im);
  omp_set_num_threads(std::max(2, threads));
  Splat(b, h, im);
  omp_set_num_threads(threads);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), g.nVox() * sizeof(float)), 0);
  // normalised splat of a constant is that constant wherever some weight arrived
  im.fill(4.f);
  Splat(a, h, im, true);
  int hit = 0;
  for (std::size_t i = 0; i < g.nVox(); ++i) {
    if (a.data()[i] != 0.f) {
      ++hit;
      ASSERT_NEAR(a.data()[i], 4.f, 1e-5);
    }
  }
  EXPECT_GT(hit, int(g.nVox() / 2));
  // splat through the identity is a copy
  SetToIdentity(h);
  randomImage(im, 12);
  Splat(a, h, im);
  for (std::size_t i = 0; i < g.nVox(); ++i) ASSERT_EQ(a.data()[i], im.data()[i]);
}

TEST(Deformation, AdAndCoAdAreAdjoint) {
  for (const GridInfo& g : {grid3(), grid2()}) {
    Field3D gph(g), X(g), m(g), AdX(g), CoAdm(g);
    noisyIdentity(gph, 0.8f, 13);
    randomField(X, 14);
    randomField(m, 15);
    if (g.is2D()) {
      for (std::size_t i = 0; i < g.nVox(); ++i) X.z()[i] = m.z()[i] = 0.f;
    }
    for (BackgroundStrategy bg : {BACKGROUND_STRATEGY_PARTIAL_ZERO, BACKGROUND_STRATEGY_CLAMP,
                                  BACKGROUND_STRATEGY_WRAP, BACKGROUND_STRATEGY_ZERO}) {
      Ad(AdX, gph, X, bg);
      CoAd(CoAdm, gph, m, bg);
      const double lhs = dot(AdX, m), rhs = dot(X, CoAdm);
      EXPECT_NEAR(lhs, rhs, 1e-5 * std::fabs(lhs)) << g.str() << " bg " << bg;
    }
    // Through the identity both are the identity map inside. At the border PyCA's Jacobian (central
    // differences with BC_CLAMP) of the identity is 1/2 along the axis: Ad X = |J| J X and
    // CoAd m = |J| J^T m with J = diag(f), f = 1/2 at an axis's first and last voxel.
    SetToIdentity(gph);
    Ad(AdX, gph, X);
    CoAd(CoAdm, gph, m);
    const Vec3Di n = g.size();
    for (int z = 0; z < n.z; ++z)
      for (int y = 0; y < n.y; ++y)
        for (int x = 0; x < n.x; ++x) {
          auto f = [](int i, int len) { return len > 1 && (i == 0 || i == len - 1) ? 0.5f : 1.f; };
          const float fx = f(x, n.x), fy = f(y, n.y), det = fx * fy * f(z, n.z);
          const std::size_t i = idx(n, x, y, z);
          ASSERT_NEAR(AdX.x()[i], det * fx * X.x()[i], 1e-6);
          ASSERT_NEAR(CoAdm.y()[i], det * fy * m.y()[i], 1e-6);
        }
  }
}

TEST(Deformation, ResampleRampIsExactInside) {
  const GridInfo gi(Vec3Di(32, 24, 16)), go(Vec3Di(16, 36, 16));
  Image3D in(gi), out(go);
  auto f = [](float x, float y, float z) { return 2.f * x - y + 0.5f * z; };
  fillImage(in, f);
  Resample(out, in);
  const Vec3Di n = go.size();
  for (int z = 0; z < n.z; ++z)
    for (int y = 0; y < n.y; ++y)
      for (int x = 0; x < n.x; ++x) {
        const float px = 2.f * x + 0.5f, py = (24.f / 36.f) * y + 0.5f * (24.f / 36.f - 1.f), pz = float(z);
        if (py < 0.f || py > 23.f) continue;
        ASSERT_NEAR(out.data()[idx(n, x, y, z)], f(px, py, pz), 1e-4);
      }
  // Fields: rescaleVector divides by r
  Field3D fi(gi), fo(go);
  fi.fill(Vec3Df(2.f, 3.f, 4.f));
  Resample(fo, fi, BACKGROUND_STRATEGY_CLAMP, true);
  EXPECT_FLOAT_EQ(fo.x()[5], 1.f);
  EXPECT_FLOAT_EQ(fo.y()[5], 3.f * 36.f / 24.f);
  EXPECT_FLOAT_EQ(fo.z()[5], 4.f);
}

TEST(Deformation, ResampleAASmoothsBeforeDownsampling) {
  const GridInfo gi(Vec3Di(48, 8, 1)), go(Vec3Di(16, 8, 1));
  Image3D in(gi), out(go), plain(go);
  fillImage(in, [](float x, float, float) { return (int(x) % 2) ? 1.f : -1.f; });  // Nyquist pattern
  ResampleAA(out, in);
  Resample(plain, in);
  double eAA = 0, ePlain = 0;  // away from the clamped border
  for (int y = 0; y < 8; ++y) {
    for (int x = 2; x < 14; ++x) {
      eAA = std::max(eAA, double(std::fabs(out.data()[idx(go.size(), x, y, 0)])));
      ePlain = std::max(ePlain, double(std::fabs(plain.data()[idx(go.size(), x, y, 0)])));
    }
  }
  EXPECT_LT(eAA, 0.05);  // the alias is gone
  EXPECT_GT(ePlain, 0.5);
}

TEST(Deformation, ResampleWorldAndSplatWorldAreAdjoint) {
  GridInfo ga(Vec3Di(17, 13, 9), Vec3Df(1.f, 1.5f, 2.f), Vec3Df(0.3f, -1.f, 2.f));
  GridInfo gb(Vec3Di(11, 19, 7), Vec3Df(1.7f, 1.1f, 2.5f), Vec3Df(-1.f, 0.5f, 1.f));
  Image3D a(ga), b(gb), Ra(gb), Sb(ga), w(ga);
  randomImage(a, 16);
  randomImage(b, 17);
  for (BackgroundStrategy bg : {BACKGROUND_STRATEGY_PARTIAL_ZERO, BACKGROUND_STRATEGY_CLAMP,
                                BACKGROUND_STRATEGY_WRAP, BACKGROUND_STRATEGY_ZERO}) {
    ResampleWorld(Ra, a, bg);  // grid b <- grid a
    SplatWorld(Sb, b, bg);     // grid a <- grid b
    const double lhs = dot(Ra, b), rhs = dot(a, Sb);
    EXPECT_NEAR(lhs, rhs, 1e-5 * std::fabs(lhs)) << bg;
  }
  SplatWorld(Sb, b, w);
  double ws = 0;
  for (std::size_t i = 0; i < ga.nVox(); ++i) ws += w.data()[i];
  EXPECT_GT(ws, 0.0);
}

TEST(Deformation, SubVolRoundTrip) {
  const GridInfo g = grid3();
  Image3D im(g), sub(GridInfo(Vec3Di(5, 6, 7))), back(g);
  randomImage(im, 18);
  SubVol(sub, im, Vec3Di(2, 3, 4));
  EXPECT_EQ(sub.data()[0], im.data()[idx(g.size(), 2, 3, 4)]);
  back.fill(0.f);
  SetSubVol_I(back, sub, Vec3Di(2, 3, 4));
  EXPECT_EQ(back.data()[idx(g.size(), 6, 8, 10)], im.data()[idx(g.size(), 6, 8, 10)]);
  EXPECT_EQ(back.data()[idx(g.size(), 1, 8, 10)], 0.f);
  EXPECT_THROW(SubVol(sub, im, Vec3Di(13, 0, 0)), IndexError);
  EXPECT_THROW(SetSubVol_I(back, sub, Vec3Di(-1, 0, 0)), IndexError);
}

TEST(Deformation, ErrorsNameTheOpAndLeaveInputsAlone) {
  const GridInfo g = grid3();
  Image3D im(g), out(GridInfo(Vec3Di(5, 5, 5)));
  Field3D h(g);
  SetToIdentity(h);
  try {
    ApplyH(out, im, h);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("ApplyH"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'h'"), std::string::npos);  // h must have out's size, im need not
  }
  Image3D out2(g);
  EXPECT_THROW(ApplyH(out2, im, h, BACKGROUND_STRATEGY_PARTIAL_ID), ValueError);
  EXPECT_THROW(ApplyH(im, im, h), ValueError);  // aliasing
  Field3D f(g);
  EXPECT_THROW(ComposeVH(f, h, h, 1.f, BACKGROUND_STRATEGY_PARTIAL_ID), ValueError);
  EXPECT_THROW(ApplyH(f, h, f, BACKGROUND_STRATEGY_VAL), ValueError);
  EXPECT_EQ(h.x()[idx(g.size(), 3, 0, 0)], 3.f);
}

}  // namespace
}  // namespace pyca
