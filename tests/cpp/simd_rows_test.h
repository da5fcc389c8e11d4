// Helpers of the tests of the CPU's SIMD rows (test_deformation_simd.cpp, test_lddmm_simd.cpp): random
// planes, maps and images, the bitwise comparison, the fixture that skips without AVX-512, and the grids
// every row is run on.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/lddmm_simd.h"
#include "pyca/math/deformation.h"

namespace pyca {
namespace simd_test {

// Three planes of n floats (a field), zero-filled.
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
inline ::testing::AssertionResult sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << ", " << b.size();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " against " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// A map x + u(x) of a grid of size n onto a grid of size m (x scaled by m / n): smooth displacements
// of up to `amp` voxels (past the border near it), and, with `bad`, a few NaN and infinite positions.
inline Planes3 randomMap(const Vec3Di& n, const Vec3Di& m, float amp, std::mt19937& rng, bool bad = true) {
  Planes3 h(math::nVoxOf(n));
  std::uniform_real_distribution<float> ph(0.f, 6.f), noise(-0.05f, 0.05f);
  const float a = ph(rng), b = ph(rng), c = ph(rng);
  const float sx = float(m.x) / float(n.x), sy = float(m.y) / float(n.y), sz = float(m.z) / float(n.z);
  std::size_t i = 0;
  for (int z = 0; z < n.z; ++z)
    for (int y = 0; y < n.y; ++y)
      for (int x = 0; x < n.x; ++x, ++i) {
        h.c[0][i] = sx * float(x) + amp * std::sin(0.21f * y + 0.13f * z + a) + noise(rng);
        h.c[1][i] = sy * float(y) + amp * std::cos(0.17f * x + 0.11f * z + b) + noise(rng);
        h.c[2][i] = m.z == 1 ? 0.f : sz * float(z) + amp * std::sin(0.19f * x + 0.23f * y + c) + noise(rng);
      }
  if (!bad) return h;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::uniform_int_distribution<std::size_t> pick(0, i - 1);
  for (int k = 0; k < 5; ++k) {
    h.c[k % 3][pick(rng)] = nan;
    h.c[(k + 1) % 3][pick(rng)] = k % 2 ? inf : -inf;
  }
  return h;
}

// n standard normal values.
inline std::vector<float> randomImage(std::size_t n, std::mt19937& rng) {
  std::vector<float> im(n);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& x : im) x = d(rng);
  return im;
}

// The fixture of the rows' tests: one grid a test (simdGrids()); skipped where the rows do not run.
class SimdRows : public ::testing::TestWithParam<Vec3Di> {
 protected:
  void SetUp() override {
    if (!simd16::available())
      GTEST_SKIP() << "no AVX-512 on this CPU (or PYCA_CPU_SIMD=0): the scalar loops run";
  }
};

// Rows that are not a multiple of 16 (and one that is), short rows, a 2-D grid, a 2x2x2 grid.
inline auto simdGrids() {
  return ::testing::Values(Vec3Di(37, 23, 19), Vec3Di(16, 4, 3), Vec3Di(5, 6, 7), Vec3Di(70, 9, 5),
                           Vec3Di(33, 17, 1), Vec3Di(2, 2, 2));
}

inline std::string gridName(const ::testing::TestParamInfo<Vec3Di>& i) {
  return std::to_string(i.param.x) + "x" + std::to_string(i.param.y) + "x" + std::to_string(i.param.z);
}

}  // namespace simd_test
}  // namespace pyca
