// Closed-form tests of the `arithmetic` family on the CPU (docs/operations/arithmetic.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "pyca/pyca.h"

namespace pyca {
namespace {

const GridInfo kGrid3(Vec3Di(17, 23, 31), Vec3Df(1.5f, 1.f, 2.f));
const GridInfo kGrid2(Vec3Di(31, 33, 1), Vec3Df(1.5f, 2.1f, 1.f));

// Deterministic values in [lo, hi): a fixed function of the index and a seed.
float valueAt(std::size_t i, int seed, float lo = -2.f, float hi = 2.f) {
  const std::uint32_t h = std::uint32_t(i) * 2654435761u + std::uint32_t(seed) * 40503u + 12345u;
  return lo + (hi - lo) * float((h >> 8) & 0xFFFF) / 65536.f;
}

Image3D image(const GridInfo& g, int seed, float lo = -2.f, float hi = 2.f) {
  Image3D im(g, MEM_HOST);
  for (std::size_t i = 0; i < im.nVox(); ++i) im.data()[i] = valueAt(i, seed, lo, hi);
  return im;
}

Field3D field(const GridInfo& g, int seed, float lo = -2.f, float hi = 2.f) {
  Field3D f(g, MEM_HOST);
  for (int c = 0; c < 3; ++c)
    for (std::size_t i = 0; i < f.nVox(); ++i)
      f.data()[c * f.planeStride() + i] = valueAt(i, seed + 7 * c, lo, hi);
  return f;
}

// 1 on a checkerboard-like pattern, 0 elsewhere.
Image3D maskImage(const GridInfo& g) {
  Image3D m(g, MEM_HOST);
  for (std::size_t i = 0; i < m.nVox(); ++i) m.data()[i] = (i % 3 == 0) ? 1.f : 0.f;
  return m;
}

float at(const Field3D& f, int c, std::size_t i) { return f.data()[c * f.planeStride() + i]; }

void expectImage(const Image3D& im, const std::function<float(std::size_t)>& want, float rtol = 1e-6f) {
  for (std::size_t i = 0; i < im.nVox(); ++i) {
    const float w = want(i);
    ASSERT_NEAR(im.data()[i], w, rtol * (1.f + std::fabs(w))) << "voxel " << i;
  }
}

void expectField(const Field3D& f, const std::function<float(int, std::size_t)>& want, float rtol = 1e-6f) {
  for (int c = 0; c < 3; ++c)
    for (std::size_t i = 0; i < f.nVox(); ++i) {
      const float w = want(c, i);
      ASSERT_NEAR(at(f, c, i), w, rtol * (1.f + std::fabs(w))) << "component " << c << " voxel " << i;
    }
}

class Grids : public ::testing::TestWithParam<GridInfo> {};

TEST_P(Grids, BinaryImageOps) {
  const GridInfo g = GetParam();
  const Image3D a = image(g, 1), b = image(g, 2, 0.5f, 3.f);
  Image3D out(g);
  const float* A = a.data();
  const float* B = b.data();
  Add(out, a, b);
  expectImage(out, [&](std::size_t i) { return A[i] + B[i]; });
  Sub(out, a, b);
  expectImage(out, [&](std::size_t i) { return A[i] - B[i]; });
  Mul(out, a, b);
  expectImage(out, [&](std::size_t i) { return A[i] * B[i]; });
  Div(out, a, b);
  expectImage(out, [&](std::size_t i) { return A[i] / B[i]; });
  Max(out, a, b);
  expectImage(out, [&](std::size_t i) { return std::max(A[i], B[i]); });
  Min(out, a, b);
  expectImage(out, [&](std::size_t i) { return std::min(A[i], B[i]); });
  Atan2(out, a, b);
  expectImage(
      out, [&](std::size_t i) { return std::atan2(A[i], B[i]); }, 1e-5f);
  GT(out, a, b);
  expectImage(out, [&](std::size_t i) { return A[i] > B[i] ? 1.f : 0.f; });
  LTE(out, a, b);
  expectImage(out, [&](std::size_t i) { return A[i] <= B[i] ? 1.f : 0.f; });
}

TEST_P(Grids, ConstantAndInPlaceForms) {
  const GridInfo g = GetParam();
  const Image3D a = image(g, 3);
  Image3D out(g);
  const float* A = a.data();
  AddC(out, a, 2.5f);
  expectImage(out, [&](std::size_t i) { return A[i] + 2.5f; });
  Sub(out, a, 2.5f);  // PyCA's overload of the plain name with a float
  expectImage(out, [&](std::size_t i) { return A[i] - 2.5f; });
  Image3D x = a.clone();
  MulC_I(x, -3.f);
  expectImage(x, [&](std::size_t i) { return A[i] * -3.f; });
  x.copyFrom(a);
  Div_I(x, 4.f);
  expectImage(x, [&](std::size_t i) { return A[i] / 4.f; });
  x.copyFrom(a);
  Sub_I(x, a);
  expectImage(x, [](std::size_t) { return 0.f; });
  GTEC(out, a, 0.f);
  expectImage(out, [&](std::size_t i) { return A[i] >= 0.f ? 1.f : 0.f; });
  x.copyFrom(a);
  NEQC_I(x, A[5]);
  expectImage(x, [&](std::size_t i) { return A[i] != A[5] ? 1.f : 0.f; });
}

TEST_P(Grids, MaskedFormsChangeOnlyMaskedVoxels) {
  const GridInfo g = GetParam();
  const Image3D a = image(g, 4), b = image(g, 5), m = maskImage(g);
  const float* A = a.data();
  const float* B = b.data();
  const float* M = m.data();
  Image3D out = image(g, 6);
  const Image3D before = out.clone();
  const float* O = before.data();
  Add(out, a, b, m);
  expectImage(out, [&](std::size_t i) { return M[i] != 0.f ? A[i] + B[i] : O[i]; });
  out.copyFrom(before);
  MulC(out, a, 2.f, m);
  expectImage(out, [&](std::size_t i) { return M[i] != 0.f ? A[i] * 2.f : O[i]; });
  out.copyFrom(before);
  Abs_I(out, m);
  expectImage(out, [&](std::size_t i) { return M[i] != 0.f ? std::fabs(O[i]) : O[i]; });
  out.copyFrom(before);
  Copy(out, a, m);
  expectImage(out, [&](std::size_t i) { return M[i] != 0.f ? A[i] : O[i]; });
  out.copyFrom(before);
  SetMem(out, 7.f, m);
  expectImage(out, [&](std::size_t i) { return M[i] != 0.f ? 7.f : O[i]; });
  out.copyFrom(before);
  Sqr(out, a, m);
  expectImage(out, [&](std::size_t i) { return M[i] != 0.f ? A[i] * A[i] : O[i]; });
}

TEST_P(Grids, FieldOps) {
  const GridInfo g = GetParam();
  const Field3D a = field(g, 10), b = field(g, 20, 0.5f, 2.f);
  const Image3D s = image(g, 30);
  const float* S = s.data();
  Field3D out(g);
  Add(out, a, b);
  expectField(out, [&](int c, std::size_t i) { return at(a, c, i) + at(b, c, i); });
  Mul(out, a, s);  // the image scales every component
  expectField(out, [&](int c, std::size_t i) { return at(a, c, i) * S[i]; });
  const Vec3Df v(1.f, -2.f, 3.5f);
  AddC(out, a, v);  // one constant per component
  expectField(out, [&](int c, std::size_t i) { return at(a, c, i) + v[c]; });
  DivC(out, a, 2.f);
  expectField(out, [&](int c, std::size_t i) { return at(a, c, i) / 2.f; });
  Field3D x = a.clone();
  Sub_I(x, s);
  expectField(x, [&](int c, std::size_t i) { return at(a, c, i) - S[i]; });
  x.copyFrom(a);
  MaxC_I(x, Vec3Df(0.f, 0.5f, -0.5f));
  expectField(x, [&](int c, std::size_t i) { return std::max(at(a, c, i), Vec3Df(0.f, 0.5f, -0.5f)[c]); });
  Sqrt(out, b);
  expectField(out, [&](int c, std::size_t i) { return std::sqrt(at(b, c, i)); });
  SetMem(out, v);
  expectField(out, [&](int c, std::size_t) { return v[c]; });
}

TEST_P(Grids, FusedOps) {
  const GridInfo g = GetParam();
  const Image3D a = image(g, 40), b = image(g, 41), c = image(g, 42), d = image(g, 43, 0.5f, 2.f);
  const float *A = a.data(), *B = b.data(), *C = c.data(), *D = d.data();
  Image3D out(g);
  Add_MulC(out, a, b, 3.f);
  expectImage(out, [&](std::size_t i) { return A[i] + B[i] * 3.f; });
  Add_Mul(out, a, b, c);
  expectImage(out, [&](std::size_t i) { return A[i] + B[i] * C[i]; });
  MulCAdd(out, a, 2.f, b);  // a * c + b with the constant declared second
  expectImage(out, [&](std::size_t i) { return A[i] * 2.f + B[i]; });
  MulC_Add_MulC(out, a, 2.f, b, -3.f);
  expectImage(out, [&](std::size_t i) { return A[i] * 2.f + B[i] * -3.f; });
  AddCMulCAddC(out, a, 1.f, 2.f, 3.f);
  expectImage(out, [&](std::size_t i) { return (A[i] + 1.f) * 2.f + 3.f; });
  Add_SubMulC(out, a, b, c, 0.5f);
  expectImage(out, [&](std::size_t i) { return A[i] + (B[i] - C[i]) * 0.5f; });
  SubDiv(out, a, b, d);
  expectImage(out, [&](std::size_t i) { return (A[i] - B[i]) / D[i]; });
  Image3D x = a.clone();
  MulC_Add_MulC_I(x, 0.5f, b, 2.f);
  expectImage(x, [&](std::size_t i) { return A[i] * 0.5f + B[i] * 2.f; });
  x.copyFrom(a);
  Sub_MulMulC_I(x, b, c, 2.f);
  expectImage(x, [&](std::size_t i) { return A[i] - B[i] * C[i] * 2.f; });

  const Field3D fa = field(g, 50), fb = field(g, 51);
  Field3D fo(g);
  Add_Mul(fo, fa, fb, c);  // field + field * image
  expectField(fo, [&](int k, std::size_t i) { return at(fa, k, i) + at(fb, k, i) * C[i]; });
  AddCMulCAddC(fo, fa, Vec3Df(1, 2, 3), Vec3Df(4, 5, 6), Vec3Df(7, 8, 9));
  expectField(
      fo, [&](int k, std::size_t i) { return (at(fa, k, i) + float(1 + k)) * float(4 + k) + float(7 + k); });
  Add_MulMulC(fo, fa, fb, c, 2.f);
  expectField(fo, [&](int k, std::size_t i) { return at(fa, k, i) + at(fb, k, i) * C[i] * 2.f; });
}

TEST_P(Grids, UnaryOps) {
  const GridInfo g = GetParam();
  const Image3D a = image(g, 60), p = image(g, 61, 0.1f, 4.f);
  const float *A = a.data(), *P = p.data();
  Image3D out(g);
  struct Case {
    const char* name;
    std::function<void(Image3D&, const Image3D&)> op;
    std::function<float(float)> ref;
    bool positive;
  };
  const std::vector<Case> cases = {
      {"Abs", [](Image3D& o, const Image3D& x) { Abs(o, x); }, [](float v) { return std::fabs(v); }, false},
      {"Neg", [](Image3D& o, const Image3D& x) { Neg(o, x); }, [](float v) { return -v; }, false},
      {"Cube", [](Image3D& o, const Image3D& x) { Cube(o, x); }, [](float v) { return v * v * v; }, false},
      {"Exp", [](Image3D& o, const Image3D& x) { Exp(o, x); }, [](float v) { return std::exp(v); }, false},
      {"Log", [](Image3D& o, const Image3D& x) { Log(o, x); }, [](float v) { return std::log(v); }, true},
      {"Sqrt", [](Image3D& o, const Image3D& x) { Sqrt(o, x); }, [](float v) { return std::sqrt(v); }, true},
      {"Inv", [](Image3D& o, const Image3D& x) { Inv(o, x); }, [](float v) { return 1.f / v; }, true},
      {"Sin", [](Image3D& o, const Image3D& x) { Sin(o, x); }, [](float v) { return std::sin(v); }, false},
      {"Cos", [](Image3D& o, const Image3D& x) { Cos(o, x); }, [](float v) { return std::cos(v); }, false},
      {"Tan", [](Image3D& o, const Image3D& x) { Tan(o, x); }, [](float v) { return std::tan(v); }, false},
      {"Atan", [](Image3D& o, const Image3D& x) { Atan(o, x); }, [](float v) { return std::atan(v); }, false},
      {"Sec", [](Image3D& o, const Image3D& x) { Sec(o, x); }, [](float v) { return 1.f / std::cos(v); },
       false},
      {"Csc", [](Image3D& o, const Image3D& x) { Csc(o, x); }, [](float v) { return 1.f / std::sin(v); },
       true},
      {"Cot", [](Image3D& o, const Image3D& x) { Cot(o, x); }, [](float v) { return 1.f / std::tan(v); },
       true},
      {"Ceil", [](Image3D& o, const Image3D& x) { Ceil(o, x); }, [](float v) { return std::ceil(v); }, false},
      {"Floor", [](Image3D& o, const Image3D& x) { Floor(o, x); }, [](float v) { return std::floor(v); },
       false},
      {"Ramp", [](Image3D& o, const Image3D& x) { Ramp(o, x); }, [](float v) { return v > 0 ? v : 0.f; },
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Image3D& in = c.positive ? p : a;
    const float* I = c.positive ? P : A;
    c.op(out, in);
    expectImage(
        out, [&](std::size_t i) { return c.ref(I[i]); }, 1e-5f);
  }
}

INSTANTIATE_TEST_SUITE_P(Arithmetic, Grids, ::testing::Values(kGrid3, kGrid2));

TEST(Arithmetic, SpecialValues) {
  const GridInfo g(Vec3Di(8, 1, 1));
  Image3D a(g), out(g);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float in[8] = {-2.f, -0.f, 0.f, 0.5f, 2.5f, -2.5f, nan, 3.f};
  for (int i = 0; i < 8; ++i) a.data()[i] = in[i];
  Sgn(out, a);
  EXPECT_EQ(out.data()[0], -1.f);
  EXPECT_EQ(out.data()[2], 0.f);
  EXPECT_EQ(out.data()[3], 1.f);
  EXPECT_TRUE(std::isnan(out.data()[6]));
  Step(out, a);
  EXPECT_EQ(out.data()[0], 0.f);
  EXPECT_EQ(out.data()[1], 0.5f);
  EXPECT_EQ(out.data()[2], 0.5f);
  EXPECT_EQ(out.data()[3], 1.f);
  Round(out, a);  // half-way cases away from zero
  EXPECT_EQ(out.data()[3], 1.f);
  EXPECT_EQ(out.data()[4], 3.f);
  EXPECT_EQ(out.data()[5], -3.f);
  Ramp(out, a);
  EXPECT_EQ(out.data()[0], 0.f);
  EXPECT_EQ(out.data()[4], 2.5f);
  MaxC(out, a, 1.f);  // NaN propagates, like numpy.maximum
  EXPECT_TRUE(std::isnan(out.data()[6]));
  EXPECT_EQ(out.data()[0], 1.f);
  Clamp(out, a, -1.f, 1.f);
  EXPECT_EQ(out.data()[0], -1.f);
  EXPECT_EQ(out.data()[3], 0.5f);
  EXPECT_EQ(out.data()[7], 1.f);
  Shrink(out, a, 1.f);
  EXPECT_EQ(out.data()[0], -1.f);
  EXPECT_EQ(out.data()[3], 0.f);
  EXPECT_EQ(out.data()[4], 1.5f);
  SoftAbs(out, a, 1.f);
  EXPECT_FLOAT_EQ(out.data()[0], 1.5f);    // |a| - eps / 2
  EXPECT_FLOAT_EQ(out.data()[3], 0.125f);  // a^2 / (2 eps)
  SoftSgn(out, a, 1.f);
  EXPECT_EQ(out.data()[0], -1.f);
  EXPECT_FLOAT_EQ(out.data()[3], 0.5f);
  PowC(out, a, 2.f);
  EXPECT_FLOAT_EQ(out.data()[4], 6.25f);
  EQC(out, a, nan);
  EXPECT_EQ(out.data()[6], 0.f);
  NEQ(out, a, a);
  EXPECT_EQ(out.data()[6], 1.f);
  EXPECT_EQ(out.data()[0], 0.f);
}

TEST(Arithmetic, VectorOps) {
  const GridInfo g(Vec3Di(5, 3, 1));
  Field3D a(g), b(g);
  a.fill(Vec3Df(3.f, 4.f, 0.f));
  b.fill(Vec3Df(1.f, 2.f, 3.f));
  a.data()[0] = 1e-4f;  // voxel 0 becomes (1e-4, 0, 0): shorter than eps below
  a.data()[a.planeStride()] = 0.f;
  Image3D out(g);
  Magnitude(out, a);
  EXPECT_FLOAT_EQ(out.data()[1], 5.f);
  SqrMagnitude(out, a);
  EXPECT_FLOAT_EQ(out.data()[1], 25.f);
  Dot(out, a, b);
  EXPECT_FLOAT_EQ(out.data()[1], 11.f);
  ComponentDotProd(out, a, b);
  EXPECT_FLOAT_EQ(out.data()[2], 11.f);
  Field3D n(g);
  NormalizeSafe(n, a, 1e-3f);
  EXPECT_FLOAT_EQ(at(n, 0, 1), 0.6f);
  EXPECT_FLOAT_EQ(at(n, 1, 1), 0.8f);
  EXPECT_EQ(at(n, 0, 0), 0.f);  // |v| = 1e-4 < eps
  NormalizeSafe_I(a, 1e-3f);
  EXPECT_FLOAT_EQ(at(a, 1, 4), 0.8f);
}

TEST(Arithmetic, ComponentCopies) {
  const Field3D f = field(kGrid2, 70);
  Image3D im(kGrid2);
  Copy(im, f, 2);
  expectImage(im, [&](std::size_t i) { return at(f, 2, i); });
  Field3D g = f.clone();
  const Image3D s = image(kGrid2, 71);
  Copy(g, s, 1);
  expectField(g, [&](int c, std::size_t i) { return c == 1 ? s.data()[i] : at(f, c, i); });
  EXPECT_THROW(Copy(im, f, 3), IndexError);
}

TEST(Arithmetic, AliasedOutputs) {
  Image3D a = image(kGrid3, 80);
  const Image3D a0 = a.clone();
  Add(a, a, a);
  expectImage(a, [&](std::size_t i) { return 2.f * a0.data()[i]; });
  Field3D f = field(kGrid3, 81);
  const Field3D f0 = f.clone();
  Mul(f, f, f);
  expectField(f, [&](int c, std::size_t i) { return at(f0, c, i) * at(f0, c, i); });
}

// A field whose planes lie further apart than nVox (after setGrid to a smaller grid).
TEST(Arithmetic, ShrunkFieldPlaneStride) {
  Field3D a = field(kGrid3, 90), b = field(kGrid3, 91);
  a.setGrid(kGrid2);
  b.setGrid(kGrid2);
  ASSERT_GT(a.planeStride(), a.nVox());
  Field3D out(kGrid3);
  out.setGrid(kGrid2);
  Sub(out, a, b);
  expectField(out, [&](int c, std::size_t i) { return at(a, c, i) - at(b, c, i); });
  Image3D m(kGrid2);
  Magnitude(m, a);
  expectImage(m, [&](std::size_t i) {
    return std::sqrt(at(a, 0, i) * at(a, 0, i) + at(a, 1, i) * at(a, 1, i) + at(a, 2, i) * at(a, 2, i));
  });
}

TEST(Arithmetic, ErrorsNameOpAndArgumentAndLeaveInputs) {
  const Image3D a = image(kGrid3, 100), b = image(kGrid2, 101);
  Image3D out = image(kGrid3, 102);
  const Image3D before = out.clone();
  try {
    Add(out, a, b);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Add"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'b'"), std::string::npos) << msg;
  }
  expectImage(
      out, [&](std::size_t i) { return before.data()[i]; }, 0.f);
  Image3D mask(kGrid2);
  EXPECT_THROW(Add_I(out, a, mask), ValueError);
  Field3D f(kGrid2);
  EXPECT_THROW(Mul(f, f, a), ValueError);
  Image3D empty(MEM_HOST);
  EXPECT_THROW(Abs(out, empty), ValueError);
}

}  // namespace
}  // namespace pyca
