// Reliability (issue 19): checked size arithmetic, grid validation, aliasing by memory overlap,
// bounded filter parameters and exceptions carried out of OpenMP regions. Rules:
// docs/design/errors.md. Run under ASan + UBSan by scripts/sanitize.sh.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "pyca/detail/checks.h"
#include "pyca/detail/omp_guard.h"
#include "pyca/detail/sizes.h"
#include "pyca/filters.h"
#include "pyca/ops.h"
#include "pyca/pyca.h"

using namespace pyca;

namespace {

// The message of the ValueError `f` throws ("" and a test failure when it throws none).
template <class E = ValueError, class F>
std::string messageOf(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void fillRamp(Array3D& a) {
  float* p = a.data();
  const std::size_t n = std::size_t(a.nComponents()) * a.capacity();
  for (std::size_t i = 0; i < n; ++i) p[i] = float(i % 97) * 0.25f - 3.f;
}

std::vector<float> copyOf(const Array3D& a) {
  const float* p = a.data();
  return std::vector<float>(p, p + std::size_t(a.nComponents()) * a.capacity());
}

// An Image3D sharing the floats at `p` (what from_array or a component view makes).
Image3D viewAt(float* p, const GridInfo& g) {
  return Image3D(g, Buffer::wrap(p, g.nVox() * sizeof(float), MEM_HOST, -1, nullptr));
}

}  // namespace

// ---- sizes -------------------------------------------------------------------------------------
TEST(Sizes, CheckedMulRefusesOverflowAndLimit) {
  EXPECT_EQ(detail::checkedMul(6, 7, "op", "bytes"), 42u);
  const std::string m = messageOf([] { detail::checkedMul(SIZE_MAX / 2, 3, "Resize", "bytes"); });
  EXPECT_TRUE(contains(m, "Resize")) << m;
  EXPECT_TRUE(contains(m, "bytes")) << m;
  EXPECT_THROW(detail::checkedMul(100, 100, "op", "floats", 9999), ValueError);
  EXPECT_EQ(detail::checkedMul(100, 100, "op", "floats", 10000), 10000u);
}

TEST(Sizes, VoxelCountOfAGridIsBounded) {
  // 2^21 x 2^21 x 2^20 voxels: 2^62; as floats 2^64 bytes, which wrapped to 0 before.
  const std::string m = messageOf([] { (void)GridInfo(Vec3Di(1 << 21, 1 << 21, 1 << 20)); });
  EXPECT_TRUE(contains(m, "GridInfo")) << m;
  EXPECT_TRUE(contains(m, "2097152")) << m;
  EXPECT_THROW(GridInfo(Vec3Di(INT_MAX, INT_MAX, INT_MAX)), ValueError);
  EXPECT_THROW(GridInfo(Vec3Di(1 << 20, 1 << 20, 2)), ValueError);      // kMaxVoxels + 1 voxel rows
  EXPECT_EQ(GridInfo(Vec3Di(1 << 20, 1 << 20, 1)).nVox(), kMaxVoxels);  // the limit itself is a grid
  GridInfo g(Vec3Di(4, 5, 6));
  EXPECT_THROW(g.setSize(Vec3Di(INT_MAX, INT_MAX, 3)), ValueError);
  EXPECT_EQ(g.size(), Vec3Di(4, 5, 6));  // unchanged by the refused call
}

TEST(Sizes, AllocationsBeyondTheLimitAreRefusedBeforeAnyArithmetic) {
  for (MemoryType m : {MEM_HOST, MEM_HOST_PINNED, MEM_DEVICE}) {
    const std::string msg = messageOf([m] { Buffer::allocate(m, SIZE_MAX); });
    EXPECT_TRUE(contains(msg, std::to_string(SIZE_MAX))) << msg;
    EXPECT_TRUE(contains(msg, memTypeName(m))) << msg;
  }
  EXPECT_THROW(Buffer::allocate(MEM_HOST, kMaxAllocBytes + 1), ValueError);
}

// ---- grid values -------------------------------------------------------------------------------
TEST(GridValues, NonFiniteSpacingAndOriginAreRefused) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(GridInfo(Vec3Di(2, 2, 2), Vec3Df(1.f, inf, 1.f)), ValueError);
  EXPECT_THROW(GridInfo(Vec3Di(2, 2, 2), Vec3Df(nan, 1.f, 1.f)), ValueError);
  EXPECT_THROW(GridInfo(Vec3Di(2, 2, 2), Vec3Df(1.f, 1.f, -1.f)), ValueError);
  const std::string m =
      messageOf([nan] { (void)GridInfo(Vec3Di(2, 2, 2), Vec3Df(1.f), Vec3Df(0.f, nan, 0.f)); });
  EXPECT_TRUE(contains(m, "origin")) << m;
  EXPECT_THROW(GridInfo(Vec3Di(2, 2, 2), Vec3Df(1.f), Vec3Df(-inf, 0.f, 0.f)), ValueError);
  GridInfo g(Vec3Di(2, 2, 2), Vec3Df(1.f, 2.f, 3.f), Vec3Df(4.f, 5.f, 6.f));
  EXPECT_THROW(g.setSpacing(Vec3Df(inf, 1.f, 1.f)), ValueError);
  EXPECT_THROW(g.setOrigin(Vec3Df(nan, 1.f, 1.f)), ValueError);
  EXPECT_EQ(g, GridInfo(Vec3Di(2, 2, 2), Vec3Df(1.f, 2.f, 3.f), Vec3Df(4.f, 5.f, 6.f)));
  Image3D im(g);
  EXPECT_THROW(im.setOrigin(Vec3Df(0.f, inf, 0.f)), ValueError);
  EXPECT_THROW(im.setSpacing(Vec3Df(0.f, 1.f, 1.f)), ValueError);
  EXPECT_EQ(im.grid(), g);
}

// ---- aliasing ----------------------------------------------------------------------------------
TEST(Aliasing, OverlapOfMemoryNotIdentityOfBuffers) {
  const GridInfo g(Vec3Di(5, 6, 7));
  Image3D a(g), b(g);
  Image3D va = viewAt(a.data(), g);  // another buffer over a's memory
  EXPECT_THROW(detail::checkNoAlias("Op", {"out", &va}, {"in", &a}), ValueError);
  EXPECT_NO_THROW(detail::checkNoAlias("Op", {"out", &b}, {"in", &a}));
  // A part of a's memory (from its second row on), and memory right after a: only the first overlaps.
  std::vector<float> big(2 * g.nVox());
  Image3D lo = viewAt(big.data(), g), hi = viewAt(big.data() + g.nVox(), g), mid = viewAt(big.data() + 5, g);
  EXPECT_NO_THROW(detail::checkNoAlias("Op", {"out", &lo}, {"in", &hi}));
  EXPECT_THROW(detail::checkNoAlias("Op", {"out", &mid}, {"in", &hi}), ValueError);
  EXPECT_THROW(detail::checkNoAlias("Op", {"out", &lo}, {"in", &mid}), ValueError);
}

TEST(Aliasing, GradientIntoTheFieldItReadsIsRefusedAndNothingChanges) {
  const GridInfo g(Vec3Di(5, 6, 7));
  Field3D out(g);
  fillRamp(out);
  for (float* plane : {out.x(), out.y(), out.z()}) {
    Image3D im = viewAt(plane, g);  // the field's component as an image
    const std::vector<float> before = copyOf(out);
    const std::string m = messageOf([&] { Gradient(out, im); });
    EXPECT_TRUE(contains(m, "Gradient")) << m;
    EXPECT_TRUE(contains(m, "'im'")) << m;
    EXPECT_EQ(copyOf(out), before);
  }
}

TEST(Aliasing, SplatIntoAViewOfItsInputIsRefused) {
  const GridInfo g(Vec3Di(5, 6, 7));
  Image3D im(g);
  Field3D h(g);
  fillRamp(im);
  SetToIdentity(h);
  Image3D out = viewAt(im.data(), g);
  const std::vector<float> before = copyOf(im);
  const std::string m = messageOf([&] { Splat(out, h, im); });
  EXPECT_TRUE(contains(m, "Splat")) << m;
  EXPECT_EQ(copyOf(im), before);
}

// ---- bounded filter parameters -----------------------------------------------------------------
TEST(FilterBounds, HugeRadiusSigmaOrSpacingAreRefusedAtOnce) {
  const GridInfo g(Vec3Di(5, 6, 7));
  Image3D in(g), out(g);
  fillRamp(in);
  fillRamp(out);
  const std::vector<float> before = copyOf(out);
  std::string m = messageOf([&] { GaussianBlur(out, in, Vec3Df(1.f), Vec3Di(1000000000, 2, 2)); });
  EXPECT_TRUE(contains(m, "GaussianBlur") && contains(m, "kRadius")) << m;
  m = messageOf([&] { GaussianBlur(out, in, Vec3Df(1e9f, 1.f, 1.f)); });
  EXPECT_TRUE(contains(m, "GaussianBlur") && contains(m, "sigma")) << m;
  Image3D tiny(GridInfo(Vec3Di(5, 6, 7), Vec3Df(1e-30f, 1.f, 1.f)));
  Image3D tinyOut(tiny.grid());
  m = messageOf([&] { GaussianBlur(tinyOut, tiny, Vec3Df(1.f)); });
  EXPECT_TRUE(contains(m, "sigma")) << m;
  EXPECT_EQ(copyOf(out), before);
  GaussianFilter f;
  m = messageOf([&] { f.updateParams(g.size(), Vec3Df(1.f), Vec3Di(2, INT_MAX, 2)); });
  EXPECT_TRUE(contains(m, "kRadius")) << m;
}

// A radius beyond the image: the folded kernel gives the clamped convolution with the full radius,
// computed here directly (double precision, every tap) as the reference.
TEST(FilterBounds, RadiusBeyondTheImageEqualsTheFullClampedSum) {
  const Vec3Di s(5, 4, 3);
  const GridInfo g(s);
  Image3D in(g), out(g);
  fillRamp(in);
  const Vec3Df sigma(3.f, 2.5f, 4.f);
  const Vec3Di r(40, 9, 25);
  GaussianBlur(out, in, sigma, r);
  auto weights = [](float sg, int rad) {
    std::vector<double> w(std::size_t(2 * rad + 1));
    double sum = 0;
    for (int j = -rad; j <= rad; ++j)
      sum += w[std::size_t(j + rad)] = std::exp(-0.5 * j * j / (double(sg) * sg));
    for (double& v : w) v /= sum;
    return w;
  };
  const std::vector<double> wx = weights(sigma.x, r.x), wy = weights(sigma.y, r.y),
                            wz = weights(sigma.z, r.z);
  auto at = [&](int x, int y, int z) { return double(in.data()[(std::size_t(z) * s.y + y) * s.x + x]); };
  auto clampi = [](int i, int n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); };
  for (int z = 0; z < s.z; ++z)
    for (int y = 0; y < s.y; ++y)
      for (int x = 0; x < s.x; ++x) {
        double acc = 0;
        for (int k = -r.z; k <= r.z; ++k)
          for (int j = -r.y; j <= r.y; ++j)
            for (int i = -r.x; i <= r.x; ++i)
              acc += wx[std::size_t(i + r.x)] * wy[std::size_t(j + r.y)] * wz[std::size_t(k + r.z)] *
                     at(clampi(x + i, s.x), clampi(y + j, s.y), clampi(z + k, s.z));
        EXPECT_NEAR(out.data()[(std::size_t(z) * s.y + y) * s.x + x], acc, 2e-5) << x << "," << y << "," << z;
      }
}

TEST(FilterBounds, FluidOperatorPowerIsBounded) {
  const GridInfo g(Vec3Di(4, 4, 4));
  Field3D in(g), out(g);
  fillRamp(in);
  const std::string m = messageOf([&] { ApplyFluidOperator(out, in, 1.f, 0.f, 1.f, INT_MAX); });
  EXPECT_TRUE(contains(m, "ApplyFluidOperator") && contains(m, "lpow")) << m;
  FluidKernelFFT k;
  EXPECT_THROW(k.setLPow(INT_MAX), ValueError);
  EXPECT_THROW(k.setLPow(65), ValueError);
  EXPECT_NO_THROW(k.setLPow(64));
  EXPECT_EQ(k.getLPow(), 64);
}

// ---- OpenMP ------------------------------------------------------------------------------------
TEST(OmpGuard, CarriesTheFirstExceptionOutOfAParallelRegion) {
  detail::OmpGuard guard;
  int done = 0;
#pragma omp parallel for reduction(+ : done)
  for (int i = 0; i < 64; ++i) {
    guard.run([&] {
      if (i % 7 == 3) throw OutOfMemory("item " + std::to_string(i));
      ++done;
    });
  }
  EXPECT_TRUE(guard.failed());
  EXPECT_EQ(done, 64 - 9);
  EXPECT_THROW(guard.rethrow(), OutOfMemory);
  detail::OmpGuard quiet;
  EXPECT_NO_THROW(quiet.rethrow());
}
