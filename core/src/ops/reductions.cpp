// The `reductions` family (ops/reductions.yaml) and the reducing overloads of Min, Max and Dot
// (declared in ops/arithmetic.yaml). CPU: OpenMP reductions accumulating in double (the reference);
// GPU: CUB (cuda/src/ops/reductions.cu). Semantics: docs/operations/reductions.md.
#include "pyca/ops/reductions.h"

#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>

#include "ops/arithmetic_loops.h"
#include "ops/reductions_cuda.h"
#include "pyca/detail/checks.h"
#include "pyca/detail/parallel.h"
#include "pyca/math/arithmetic.h"
#include "pyca/ops/arithmetic.h"

namespace pyca {
namespace {

using cuda_impl::SumKind;
constexpr std::ptrdiff_t kParallelMin = arith::kParallelMin;

// Sums in blocks added in order (detail::orderedSum): the same bits on every run and thread count.
template <class Term>
double cpuSum(const float* a, std::ptrdiff_t n) {
  const Term t{};
  return detail::orderedSum(n, detail::kSumBlock, [&](std::ptrdiff_t lo, std::ptrdiff_t hi) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (std::ptrdiff_t i = lo; i < hi; ++i) s += t(a[i]);
    return s;
  });
}

double cpuDot(const float* a, const float* b, std::ptrdiff_t n) {
  const math::DotTerm t{};
  return detail::orderedSum(n, detail::kSumBlock, [&](std::ptrdiff_t lo, std::ptrdiff_t hi) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (std::ptrdiff_t i = lo; i < hi; ++i) s += t(a[i], b[i]);
    return s;
  });
}

// Minimum and maximum of n floats; both NaN if one of them is NaN.
math::MinMaxAcc cpuMinMax(const float* a, std::ptrdiff_t n) {
  float lo = std::numeric_limits<float>::infinity();
  float hi = -lo;
  int nan = 0;
#pragma omp parallel for simd schedule(static) reduction(min                   \
                                                         : lo) reduction(max   \
                                                                         : hi) \
    reduction(|                                                                \
              : nan) if (parallel                                              \
                         : n >= kParallelMin)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const float v = a[i];
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    nan |= int(v != v);
  }
  if (nan) lo = hi = std::numeric_limits<float>::quiet_NaN();
  return math::MinMaxAcc{lo, hi};
}

// Per-plane sums of `kind` over the planes of a (and b for kDot).
void sums(const char* op, bool dev, SumKind kind, const float* a, const float* b, std::size_t stride,
          int planes, std::size_t n, double* out) {
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::reduceSum(op, kind, a, stride, b, stride, planes, n, out));
    return;
  }
  for (int k = 0; k < planes; ++k) {
    const float* ak = a + std::size_t(k) * stride;
    const std::ptrdiff_t m = std::ptrdiff_t(n);
    switch (kind) {
      case SumKind::kSum:
        out[k] = cpuSum<math::SumTerm>(ak, m);
        break;
      case SumKind::kSum2:
        out[k] = cpuSum<math::Sum2Term>(ak, m);
        break;
      case SumKind::kL1:
        out[k] = cpuSum<math::L1Term>(ak, m);
        break;
      case SumKind::kDot:
        out[k] = cpuDot(ak, b + std::size_t(k) * stride, m);
        break;
    }
  }
}

void minMaxes(const char* op, bool dev, const float* a, std::size_t stride, int planes, std::size_t n,
              math::MinMaxAcc* out) {
  if (dev) {
    float lo[3], hi[3];
    PYCA_CUDA_CALL(op, cuda_impl::reduceMinMax(op, a, stride, planes, n, lo, hi));
    for (int k = 0; k < planes; ++k) out[k] = math::MinMaxAcc{lo[k], hi[k]};
    return;
  }
  for (int k = 0; k < planes; ++k) out[k] = cpuMinMax(a + std::size_t(k) * stride, std::ptrdiff_t(n));
}

double imageSum(const char* op, SumKind kind, const Image3D& a) {
  const bool dev = detail::onDevice(op, {{"a", &a}});
  double s = 0.0;
  sums(op, dev, kind, a.data(), nullptr, 0, 1, a.nVox(), &s);
  return s;
}

// The three per-component sums of a field.
Vec3Df fieldSums3(const char* op, SumKind kind, const Field3D& a, double* s) {
  const bool dev = detail::onDevice(op, {{"a", &a}});
  sums(op, dev, kind, a.data(), nullptr, a.planeStride(), 3, a.nVox(), s);
  return Vec3Df(float(s[0]), float(s[1]), float(s[2]));
}

double fieldSum(const char* op, SumKind kind, const Field3D& a) {
  double s[3];
  fieldSums3(op, kind, a, s);
  return s[0] + s[1] + s[2];
}

math::MinMaxAcc imageMinMax(const char* op, const Image3D& a) {
  const bool dev = detail::onDevice(op, {{"a", &a}});
  math::MinMaxAcc r;
  minMaxes(op, dev, a.data(), 0, 1, a.nVox(), &r);
  return r;
}

void fieldMinMax(const char* op, const Field3D& a, math::MinMaxAcc* r) {
  const bool dev = detail::onDevice(op, {{"a", &a}});
  minMaxes(op, dev, a.data(), a.planeStride(), 3, a.nVox(), r);
}

math::MinMaxAcc combined(const math::MinMaxAcc* r) {
  const math::MinMaxCombine c{};
  return c(c(r[0], r[1]), r[2]);
}

float largestAbs(const math::MinMaxAcc& r) { return math::nanMax(-r.lo, r.hi); }

}  // namespace

double Sum(const Image3D& a) { return imageSum("Sum", SumKind::kSum, a); }
Vec3Df Sum(const Field3D& a) {
  double s[3];
  return fieldSums3("Sum", SumKind::kSum, a, s);
}

double Sum2(const Image3D& a) { return imageSum("Sum2", SumKind::kSum2, a); }
double Sum2(const Field3D& a) { return fieldSum("Sum2", SumKind::kSum2, a); }

double L1(const Image3D& a) { return imageSum("L1", SumKind::kL1, a); }
double L1(const Field3D& a) { return fieldSum("L1", SumKind::kL1, a); }

double Dot(const Image3D& a, const Image3D& b) {
  const bool dev = detail::prepare("Dot", {{"a", &a}, {"b", &b}});
  double s = 0.0;
  sums("Dot", dev, SumKind::kDot, a.data(), b.data(), 0, 1, a.nVox(), &s);
  return s;
}

double Dot(const Field3D& a, const Field3D& b) {
  const bool dev = detail::prepare("Dot", {{"a", &a}, {"b", &b}});
  // The kernels take one stride for a and b; the planes of a and b may lie at different strides.
  double s[3] = {0.0, 0.0, 0.0};
  if (a.planeStride() == b.planeStride()) {
    sums("Dot", dev, SumKind::kDot, a.data(), b.data(), a.planeStride(), 3, a.nVox(), s);
  } else {
    for (int k = 0; k < 3; ++k)
      sums("Dot", dev, SumKind::kDot, a.data() + std::size_t(k) * a.planeStride(),
           b.data() + std::size_t(k) * b.planeStride(), 0, 1, a.nVox(), &s[k]);
  }
  return s[0] + s[1] + s[2];
}

float Min(const Image3D& a) { return imageMinMax("Min", a).lo; }
float Max(const Image3D& a) { return imageMinMax("Max", a).hi; }

Vec3Df Min(const Field3D& a) {
  math::MinMaxAcc r[3];
  fieldMinMax("Min", a, r);
  return Vec3Df(r[0].lo, r[1].lo, r[2].lo);
}

Vec3Df Max(const Field3D& a) {
  math::MinMaxAcc r[3];
  fieldMinMax("Max", a, r);
  return Vec3Df(r[0].hi, r[1].hi, r[2].hi);
}

std::pair<float, float> MinMax(const Image3D& a) {
  const math::MinMaxAcc r = imageMinMax("MinMax", a);
  return {r.lo, r.hi};
}

std::pair<float, float> MinMax(const Field3D& a) {
  math::MinMaxAcc r[3];
  fieldMinMax("MinMax", a, r);
  const math::MinMaxAcc c = combined(r);
  return {c.lo, c.hi};
}

float LInf(const Image3D& a) { return largestAbs(imageMinMax("LInf", a)); }

float LInf(const Field3D& a) {
  math::MinMaxAcc r[3];
  fieldMinMax("LInf", a, r);
  return largestAbs(combined(r));
}

}  // namespace pyca
