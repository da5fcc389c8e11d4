// The `filters` family on the CPU: Gaussian (constants, ramps, a brute-force reference, the
// object API), Convolve, and the fluid operator (inverse, Fourier modes, the discrete Laplacian).
// docs/operations/filters.md is the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "pyca/errors.h"
#include "pyca/filters.h"
#include "pyca/ops/differential.h"
#include "pyca/ops/filters.h"
#include "pyca/pyca.h"

using namespace pyca;

namespace {

const GridInfo kGrid3(Vec3Di(13, 10, 9), Vec3Df(1.5f, 1.f, 2.f));
const GridInfo kGrid2(Vec3Di(15, 12, 1), Vec3Df(1.5f, 2.1f, 1.f));

void fillRandom(float* p, std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (std::size_t i = 0; i < n; ++i) p[i] = u(gen);
}

void fillRandom(Field3D& f, unsigned seed) {
  fillRandom(f.x(), f.nVox(), seed);
  fillRandom(f.y(), f.nVox(), seed + 1);
  fillRandom(f.z(), f.nVox(), seed + 2);
}

int clampi(int i, int n) { return std::min(std::max(i, 0), n - 1); }

// Brute-force separable Gaussian (double precision), clamped border; sigma and radius in voxels.
std::vector<double> bruteGaussian(const Image3D& im, const Vec3Df& sig, const Vec3Di& rad) {
  const Vec3Di s = im.size();
  std::vector<double> cur(im.data(), im.data() + im.nVox()), nxt(cur.size());
  for (int d = 0; d < 3; ++d) {
    const int r = sig[d] > 0 ? rad[d] : 0;
    std::vector<double> w(2 * r + 1);
    double sum = 0;
    for (int j = -r; j <= r; ++j) sum += (w[j + r] = std::exp(-0.5 * j * j / (double(sig[d]) * sig[d])));
    for (auto& v : w) v /= sum;
    for (int z = 0; z < s.z; ++z)
      for (int y = 0; y < s.y; ++y)
        for (int x = 0; x < s.x; ++x) {
          double acc = 0;
          for (int j = -r; j <= r; ++j) {
            int p[3] = {x, y, z};
            p[d] = clampi(p[d] + j, s[d]);
            acc += w[j + r] * cur[(std::size_t(p[2]) * s.y + p[1]) * s.x + p[0]];
          }
          nxt[(std::size_t(z) * s.y + y) * s.x + x] = acc;
        }
    std::swap(cur, nxt);
  }
  return cur;
}

}  // namespace

TEST(Filters, GaussianKeepsConstantsAndMatchesBruteForce) {
  for (const GridInfo* g : {&kGrid3, &kGrid2}) {
    Image3D c(*g), out(*g);
    c.fill(3.25f);
    GaussianBlur(out, c, Vec3Df(2.f, 1.5f, 3.f), Vec3Di(5, 4, 6));
    for (std::size_t i = 0; i < out.nVox(); ++i) ASSERT_NEAR(out.data()[i], 3.25f, 1e-5);

    Image3D im(*g);
    fillRandom(im.data(), im.nVox(), 7);
    const Vec3Df sigmaWorld(2.f, 1.5f, 3.f);
    const Vec3Df sv = sigmaWorld / g->spacing();
    const Vec3Di rad(4, 3, 5);  // radius larger than some dimensions: the border clamps
    GaussianBlur(out, im, sigmaWorld, rad);
    const std::vector<double> ref = bruteGaussian(im, sv, rad);
    for (std::size_t i = 0; i < out.nVox(); ++i) ASSERT_NEAR(out.data()[i], ref[i], 2e-6) << i;

    // In place gives the same.
    Image3D ip = im.clone();
    GaussianBlur(ip, ip, sigmaWorld, rad);
    for (std::size_t i = 0; i < out.nVox(); ++i) ASSERT_EQ(ip.data()[i], out.data()[i]);

    // Default radius: int(4 sigma / spacing + 0.5).
    GaussianBlur(out, im, sigmaWorld);
    const Vec3Di autoRad(int(4 * sv.x + 0.5f), int(4 * sv.y + 0.5f), int(4 * sv.z + 0.5f));
    const std::vector<double> ref2 = bruteGaussian(im, sv, autoRad);
    for (std::size_t i = 0; i < out.nVox(); ++i) ASSERT_NEAR(out.data()[i], ref2[i], 2e-6) << i;
  }
}

TEST(Filters, GaussianOfRampIsTheRampInside) {
  GridInfo g(Vec3Di(40, 12, 10), Vec3Df(1.f, 1.f, 1.f));
  Image3D ramp(g), out(g);
  for (int z = 0; z < 10; ++z)
    for (int y = 0; y < 12; ++y)
      for (int x = 0; x < 40; ++x) ramp.data()[(std::size_t(z) * 12 + y) * 40 + x] = 0.5f * x;
  GaussianBlur(out, ramp, Vec3Df(2.f, 1.f, 1.f), Vec3Di(6, 2, 2));
  for (int x = 6; x < 34; ++x) EXPECT_NEAR(out.data()[(std::size_t(5) * 12 + 6) * 40 + x], 0.5f * x, 1e-4);
}

TEST(Filters, GaussianFilterObjectUsesVoxelUnits) {
  Image3D im(kGrid3), a(kGrid3), b(kGrid3), tmp(kGrid3);
  fillRandom(im.data(), im.nVox(), 11);
  GaussianFilter gf;
  const Vec3Df sv(1.2f, 0.8f, 1.5f);
  const Vec3Di rad(3, 2, 4);
  gf.updateParams(kGrid3.size(), sv, rad);
  gf.filter(a, im, tmp);
  GaussianBlur(b, im, sv * kGrid3.spacing(), rad);  // world sigma = voxel sigma * spacing
  for (std::size_t i = 0; i < a.nVox(); ++i) ASSERT_NEAR(a.data()[i], b.data()[i], 1e-6);
  // Zero sigma on an axis: that axis is left alone (PyCA scripts pass sigma.z = 0 for 2-D).
  gf.updateParams(kGrid3.size(), Vec3Df(0.f, 0.f, 0.f), Vec3Di(2, 2, 2));
  gf.filter(a, im);
  for (std::size_t i = 0; i < a.nVox(); ++i) ASSERT_EQ(a.data()[i], im.data()[i]);
  // Fields, component by component.
  Field3D f(kGrid3), fo(kGrid3);
  fillRandom(f, 3);
  gf.updateParams(kGrid3.size(), sv, rad);
  gf.filter(fo, f);
  Image3D fx(kGrid3), fxo(kGrid3);
  std::copy(f.x(), f.x() + f.nVox(), fx.data());
  gf.filter(fxo, fx);
  for (std::size_t i = 0; i < fx.nVox(); ++i) ASSERT_EQ(fo.x()[i], fxo.data()[i]);
  // Errors: wrong size, negative radius, no updateParams.
  Image3D small(kGrid2);
  EXPECT_THROW(gf.filter(small, small), ValueError);
  EXPECT_THROW(gf.updateParams(kGrid3.size(), sv, Vec3Di(-1, 2, 2)), ValueError);
  GaussianFilter fresh;
  EXPECT_THROW(fresh.filter(a, im), ValueError);
  EXPECT_THROW(gf.filter(a, im, a), ValueError);  // tmp aliases out
}

TEST(Filters, ConvolveDeltaShiftAndBorder) {
  Image3D im(kGrid3), out(kGrid3);
  fillRandom(im.data(), im.nVox(), 5);
  Image3D k(GridInfo(Vec3Di(3, 1, 1)));
  k.data()[0] = 0.f;
  k.data()[1] = 1.f;
  k.data()[2] = 0.f;
  Convolve(out, im, k);
  for (std::size_t i = 0; i < im.nVox(); ++i) ASSERT_EQ(out.data()[i], im.data()[i]);
  // PyCA's orientation (a correlation): kernel(u) at u = 2 (offset +1): out(x) = im(x + 1), clamped at
  // the last voxel.
  k.data()[1] = 0.f;
  k.data()[2] = 1.f;
  Convolve(out, im, k);
  const Vec3Di s = kGrid3.size();
  for (int z = 0; z < s.z; ++z)
    for (int y = 0; y < s.y; ++y)
      for (int x = 0; x < s.x; ++x) {
        const std::size_t row = (std::size_t(z) * s.y + y) * s.x;
        ASSERT_EQ(out.data()[row + x], im.data()[row + std::min(x + 1, s.x - 1)]);
      }
  Image3D even(GridInfo(Vec3Di(2, 1, 1)));
  EXPECT_THROW(Convolve(out, im, even), ValueError);
  EXPECT_THROW(Convolve(im, im, k), ValueError);
}

TEST(Filters, FluidInverseUndoesOperator) {
  for (const GridInfo* g : {&kGrid3, &kGrid2}) {
    for (float beta : {0.f, 0.4f}) {
      Field3D v(*g), f(*g), w(*g);
      fillRandom(v, 21);
      FluidKernelFFT k;
      k.setAlpha(0.7f);
      k.setBeta(beta);
      k.setGamma(0.3f);
      k.setLPow(2);
      k.setGrid(*g);
      k.applyOperator(f, v);
      k.applyInverseOperator(w, f);
      for (int c = 0; c < 3; ++c) {
        const float* a = c == 0 ? v.x() : (c == 1 ? v.y() : v.z());
        const float* b = c == 0 ? w.x() : (c == 1 ? w.y() : w.z());
        for (std::size_t i = 0; i < v.nVox(); ++i) ASSERT_NEAR(a[i], b[i], 2e-4) << c << " " << i;
      }
      // The function form gives the same, and in place works.
      Field3D f2(*g);
      ApplyFluidOperator(f2, v, 0.7f, beta, 0.3f, 2, false);
      for (std::size_t i = 0; i < v.nVox(); ++i)
        ASSERT_NEAR(f2.y()[i], f.y()[i], 1e-4 * (1 + std::fabs(f.y()[i])));
      k.applyOperator(v);
      for (std::size_t i = 0; i < v.nVox(); ++i)
        ASSERT_NEAR(v.z()[i], f.z()[i], 1e-4 * (1 + std::fabs(f.z()[i])));
    }
  }
}

TEST(Filters, FluidOperatorOnAFourierMode) {
  // v.x = cos(2 pi (kx x / nx + ky y / ny + kz z / nz)): L v = lambda v (beta = 0), with
  // lambda = alpha sum_d (2 - 2 cos(2 pi k_d / n_d)) / h_d^2 + gamma.
  const GridInfo g(Vec3Di(16, 12, 10), Vec3Df(1.5f, 1.f, 2.f));
  const int k[3] = {3, 2, 1};
  const double pi = 3.14159265358979323846;
  Field3D v(g), f(g);
  v.fill(0.f);
  const Vec3Di s = g.size();
  for (int z = 0; z < s.z; ++z)
    for (int y = 0; y < s.y; ++y)
      for (int x = 0; x < s.x; ++x)
        v.x()[(std::size_t(z) * s.y + y) * s.x + x] = float(
            std::cos(2 * pi * (double(k[0]) * x / s.x + double(k[1]) * y / s.y + double(k[2]) * z / s.z)));
  const float alpha = 0.8f, gamma = 0.25f;
  double lambda = gamma;
  for (int d = 0; d < 3; ++d) {
    const double h = g.spacing()[d];
    lambda += alpha * (2 - 2 * std::cos(2 * pi * k[d] / s[d])) / (h * h);
  }
  ApplyFluidOperator(f, v, alpha, 0.f, gamma, 1, false);
  for (std::size_t i = 0; i < v.nVox(); ++i) {
    ASSERT_NEAR(f.x()[i], lambda * v.x()[i], 1e-4);
    ASSERT_NEAR(f.y()[i], 0.f, 1e-4);
  }
  ApplyFluidOperator(f, v, alpha, 0.f, gamma, 3, true);
  for (std::size_t i = 0; i < v.nVox(); ++i) ASSERT_NEAR(f.x()[i], v.x()[i] / std::pow(lambda, 3), 1e-5);
}

TEST(Filters, FluidOperatorIsMinusPeriodicLaplacian) {
  for (const GridInfo* g : {&kGrid3, &kGrid2}) {
    Field3D v(*g), f(*g), lap(*g);
    fillRandom(v, 31);
    ApplyFluidOperator(f, v, 1.f, 0.f, 0.f, 1, false);
    Laplacian(lap, v, BC_WRAP);
    for (std::size_t i = 0; i < v.nVox(); ++i) {
      ASSERT_NEAR(f.x()[i], -lap.x()[i], 2e-4);
      ASSERT_NEAR(f.z()[i], -lap.z()[i], 2e-4);
    }
    // gamma = 0: the inverse discards the mean, K L v = v - mean(v).
    Field3D w(*g);
    ApplyFluidOperator(w, f, 1.f, 0.f, 0.f, 1, true);
    double mean = 0;
    for (std::size_t i = 0; i < v.nVox(); ++i) mean += v.y()[i];
    mean /= double(v.nVox());
    for (std::size_t i = 0; i < v.nVox(); ++i) ASSERT_NEAR(w.y()[i], v.y()[i] - mean, 2e-3);
  }
}

TEST(Filters, FluidKernelChecks) {
  FluidKernelFFT k;
  EXPECT_EQ(k.getAlpha(), 1.f);
  EXPECT_EQ(k.getBeta(), 0.f);
  EXPECT_EQ(k.getGamma(), 0.f);
  EXPECT_EQ(k.getLPow(), 1);
  Field3D v(kGrid3), f(kGrid3);
  fillRandom(v, 1);
  EXPECT_THROW(k.applyOperator(f, v), ValueError);  // no grid yet
  k.setGrid(kGrid2);
  EXPECT_THROW(k.applyOperator(f, v), ValueError);  // wrong size
  EXPECT_THROW(k.setLPow(-1), ValueError);
  EXPECT_THROW(ApplyFluidOperator(f, v, 1.f, 0.f, 1.f, -2, false), ValueError);
  // lpow = 0: identity.
  ApplyFluidOperator(f, v, 1.f, 0.f, 1.f, 0, false);
  for (std::size_t i = 0; i < v.nVox(); ++i) ASSERT_NEAR(f.x()[i], v.x()[i], 1e-5);
}

TEST(Filters, FluidHostPlansThreadOverRowsNotInsideThem) {
#ifdef _OPENMP
  // FFTW's estimated threaded plan for these sizes splits each 1-D transform along x (odd, composite
  // lengths) over the threads, thousands of times a call (100-500x slower than one thread); the
  // plans must thread over rows, or run on one thread. An even x keeps its threads.
  const int before = omp_get_max_threads();
  omp_set_num_threads(2);
  for (const Vec3Di& n : {Vec3Di(49, 58, 47), Vec3Di(99, 40, 40)}) {
    const std::string text = detail::fftwPlanText(n);
    EXPECT_EQ(text.find("thr-ct"), std::string::npos) << n.x << "x" << n.y << "x" << n.z << ":\n" << text;
  }
  EXPECT_NE(detail::fftwPlanText(Vec3Di(48, 58, 47)).find("thr-"), std::string::npos);
  omp_set_num_threads(before);
#else
  GTEST_SKIP() << "built without OpenMP: the host plans run on one thread";
#endif
}
