// Per-voxel formulas of the `arithmetic` and `reductions` families (docs/operations/arithmetic.md and
// reductions.md define each). Every formula is written once here, as a functor with a PYCA_HD call
// operator, and both the CPU loops (core/src/ops) and the CUDA kernels (cuda/src/ops) call it.
//
// Elementwise functors take `arity` floats and return a float. An operation's operands (images, field
// components, constants) are passed in the order they appear in its C++ declaration, so one functor
// serves several operations: MulAdd computes a * b + c for MulAdd (three images), MulCAdd (a * c + b,
// declared (a, c, b)) and MulCAddC (a * b + c with two constants).
#pragma once

#include <cmath>

#include "pyca/config.h"
#include "pyca/vec3.h"

namespace pyca {
namespace math {

// ---- helpers -------------------------------------------------------------------------------------

// max / min that return NaN when either argument is NaN (like numpy.maximum / numpy.minimum).
PYCA_HD float nanMax(float a, float b) { return (a > b || a != a) ? a : b; }
PYCA_HD float nanMin(float a, float b) { return (a < b || a != a) ? a : b; }

// ---- arity 1 -------------------------------------------------------------------------------------

struct Identity {  // Copy, SetMem
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return a; }
};
struct Abs {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return fabsf(a); }
};
struct Cube {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return a * a * a; }
};
struct Exp {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return expf(a); }
};
struct Log {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return logf(a); }
};
struct Neg {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return -a; }
};
// max(a, 0); NaN stays NaN.
struct Ramp {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return a < 0.f ? 0.f : a; }
};
// -1, 0 or 1 (0 keeps its sign; NaN stays NaN, like numpy.sign).
struct Sgn {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return a > 0.f ? 1.f : (a < 0.f ? -1.f : a); }
};
// Heaviside step: 0 below 0, 1 above, 0.5 at 0 (NaN stays NaN).
struct Step {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return a > 0.f ? 1.f : (a < 0.f ? 0.f : (a == 0.f ? 0.5f : a)); }
};
struct Sqr {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return a * a; }
};
struct Sqrt {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return sqrtf(a); }
};
struct Inv {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return 1.f / a; }
};
struct Ceil {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return ceilf(a); }
};
struct Floor {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return floorf(a); }
};
// Rounds half-way cases away from zero (C's roundf; numpy.round rounds them to even).
struct Round {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return roundf(a); }
};
struct Sin {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return sinf(a); }
};
struct Asin {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return asinf(a); }
};
struct Cos {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return cosf(a); }
};
struct Acos {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return acosf(a); }
};
struct Tan {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return tanf(a); }
};
struct Atan {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return atanf(a); }
};
struct Csc {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return 1.f / sinf(a); }
};
struct Sec {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return 1.f / cosf(a); }
};
struct Cot {
  static constexpr int arity = 1;
  PYCA_HD float operator()(float a) const { return 1.f / tanf(a); }
};

// ---- arity 2 -------------------------------------------------------------------------------------

struct Add {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return a + b; }
};
struct Sub {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return a - b; }
};
struct Mul {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return a * b; }
};
struct Div {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return a / b; }
};
struct Max {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return nanMax(a, b); }
};
struct Min {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return nanMin(a, b); }
};
struct Atan2 {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return atan2f(a, b); }
};
struct Pow {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return powf(a, b); }
};
// Comparisons: 1 where true, 0 where false (any comparison with NaN is false, except NEQ).
struct GT {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return a > b ? 1.f : 0.f; }
};
struct GTE {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return a >= b ? 1.f : 0.f; }
};
struct LT {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return a < b ? 1.f : 0.f; }
};
struct LTE {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return a <= b ? 1.f : 0.f; }
};
struct EQ {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return a == b ? 1.f : 0.f; }
};
struct NEQ {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return a != b ? 1.f : 0.f; }
};
struct AbsDiff {  // |a - b|
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return fabsf(a - b); }
};
struct SqrDiff {  // (a - b)^2
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float b) const { return (a - b) * (a - b); }
};
// Absolute value with a quadratic part near 0 (PyCA's SoftAbs): a^2 / (2 eps) for |a| <= eps, else
// |a| - eps / 2 (continuous with a continuous derivative at |a| = eps).
struct SoftAbs {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float eps) const {
    return a < -eps ? -a - 0.5f * eps : (a > eps ? a - 0.5f * eps : a * a / (2.f * eps));
  }
};
// Sign with a linear part near 0 (PyCA's SoftSgn): a / eps for |a| <= eps, else sgn(a).
struct SoftSgn {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float eps) const { return a < -eps ? -1.f : (a > eps ? 1.f : a / eps); }
};
// Soft thresholding (PyCA's Shrink, the proximal map of c|x|): max(a - c, 0) + min(a + c, 0).
struct Shrink {
  static constexpr int arity = 2;
  PYCA_HD float operator()(float a, float c) const { return a > c ? a - c : (a < -c ? a + c : 0.f * a); }
};

// ---- arity 3 -------------------------------------------------------------------------------------

struct Clamp {  // a limited to [lo, hi] (NaN stays NaN)
  static constexpr int arity = 3;
  PYCA_HD float operator()(float a, float lo, float hi) const { return a < lo ? lo : (a > hi ? hi : a); }
};
struct MulMul {  // a * b * c
  static constexpr int arity = 3;
  PYCA_HD float operator()(float a, float b, float c) const { return a * b * c; }
};
struct MulAdd {  // a * b + c
  static constexpr int arity = 3;
  PYCA_HD float operator()(float a, float b, float c) const { return a * b + c; }
};
struct MulSub {  // a * b - c
  static constexpr int arity = 3;
  PYCA_HD float operator()(float a, float b, float c) const { return a * b - c; }
};
struct AddMul {  // (a + b) * c
  static constexpr int arity = 3;
  PYCA_HD float operator()(float a, float b, float c) const { return (a + b) * c; }
};
struct AddDiv {  // (a + b) / c
  static constexpr int arity = 3;
  PYCA_HD float operator()(float a, float b, float c) const { return (a + b) / c; }
};
struct SubMul {  // (a - b) * c
  static constexpr int arity = 3;
  PYCA_HD float operator()(float a, float b, float c) const { return (a - b) * c; }
};
struct SubDiv {  // (a - b) / c
  static constexpr int arity = 3;
  PYCA_HD float operator()(float a, float b, float c) const { return (a - b) / c; }
};
struct Add_Mul {  // a + b * c
  static constexpr int arity = 3;
  PYCA_HD float operator()(float a, float b, float c) const { return a + b * c; }
};
struct Sub_Mul {  // a - b * c
  static constexpr int arity = 3;
  PYCA_HD float operator()(float a, float b, float c) const { return a - b * c; }
};

// ---- arity 4 -------------------------------------------------------------------------------------

struct Add_AddMul {  // a + (b + c) * d
  static constexpr int arity = 4;
  PYCA_HD float operator()(float a, float b, float c, float d) const { return a + (b + c) * d; }
};
struct Add_SubMul {  // a + (b - c) * d
  static constexpr int arity = 4;
  PYCA_HD float operator()(float a, float b, float c, float d) const { return a + (b - c) * d; }
};
struct Add_MulMul {  // a + b * c * d
  static constexpr int arity = 4;
  PYCA_HD float operator()(float a, float b, float c, float d) const { return a + b * c * d; }
};
struct Sub_AddMul {  // a - (b + c) * d
  static constexpr int arity = 4;
  PYCA_HD float operator()(float a, float b, float c, float d) const { return a - (b + c) * d; }
};
struct Sub_SubMul {  // a - (b - c) * d
  static constexpr int arity = 4;
  PYCA_HD float operator()(float a, float b, float c, float d) const { return a - (b - c) * d; }
};
struct Sub_MulMul {  // a - b * c * d
  static constexpr int arity = 4;
  PYCA_HD float operator()(float a, float b, float c, float d) const { return a - b * c * d; }
};
struct MulAddMul {  // a * b + c * d
  static constexpr int arity = 4;
  PYCA_HD float operator()(float a, float b, float c, float d) const { return a * b + c * d; }
};
struct AddMulAdd {  // (a + b) * c + d
  static constexpr int arity = 4;
  PYCA_HD float operator()(float a, float b, float c, float d) const { return (a + b) * c + d; }
};

// Every elementwise functor above, by arity: the CUDA backend instantiates its kernels for these
// (tools/opgen/family_arithmetic.py checks that ops/arithmetic.yaml names only functors listed here).
// clang-format off
#define PYCA_ARITH_FUNCTORS_1(X)                                                                      \
  X(Identity) X(Abs) X(Cube) X(Exp) X(Log) X(Neg) X(Ramp) X(Sgn) X(Step) X(Sqr) X(Sqrt) X(Inv) X(Ceil) \
      X(Floor) X(Round) X(Sin) X(Asin) X(Cos) X(Acos) X(Tan) X(Atan) X(Csc) X(Sec) X(Cot)
#define PYCA_ARITH_FUNCTORS_2(X)                                                                     \
  X(Add) X(Sub) X(Mul) X(Div) X(Max) X(Min) X(Atan2) X(Pow) X(GT) X(GTE) X(LT) X(LTE) X(EQ) X(NEQ) \
      X(AbsDiff) X(SqrDiff) X(SoftAbs) X(SoftSgn) X(Shrink)
#define PYCA_ARITH_FUNCTORS_3(X) \
  X(Clamp) X(MulMul) X(MulAdd) X(MulSub) X(AddMul) X(AddDiv) X(SubMul) X(SubDiv) X(Add_Mul) X(Sub_Mul)
#define PYCA_ARITH_FUNCTORS_4(X) \
  X(Add_AddMul) X(Add_SubMul) X(Add_MulMul) X(Sub_AddMul) X(Sub_SubMul) X(Sub_MulMul) X(MulAddMul) X(AddMulAdd)
// clang-format on

// ---- vector formulas (one voxel of a Field3D) ------------------------------------------------------

PYCA_HD float sqrMagnitude(const Vec3Df& v) { return v.x * v.x + v.y * v.y + v.z * v.z; }
PYCA_HD float magnitude(const Vec3Df& v) { return sqrtf(sqrMagnitude(v)); }
PYCA_HD float dot(const Vec3Df& a, const Vec3Df& b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
// v / |v|, or 0 where |v| < eps.
PYCA_HD Vec3Df normalizeSafe(const Vec3Df& v, float eps) {
  const float len = magnitude(v);
  if (!(len >= eps)) return Vec3Df(0.f, 0.f, 0.f);
  const float s = 1.f / len;
  return Vec3Df(v.x * s, v.y * s, v.z * s);
}

// ---- reductions ------------------------------------------------------------------------------------

// What each sum-like reduction adds up, in double: Sum (a), Sum2 (a^2), L1 (|a|), Dot (a * b).
struct SumTerm {
  PYCA_HD double operator()(float a) const { return double(a); }
};
struct Sum2Term {
  PYCA_HD double operator()(float a) const { return double(a) * double(a); }
};
struct L1Term {
  PYCA_HD double operator()(float a) const { return fabs(double(a)); }
};
struct DotTerm {
  PYCA_HD double operator()(float a, float b) const { return double(a) * double(b); }
};

// Running minimum and maximum of a set of floats; NaN anywhere makes both NaN.
struct MinMaxAcc {
  float lo, hi;
};
struct MinMaxCombine {
  PYCA_HD MinMaxAcc operator()(const MinMaxAcc& x, const MinMaxAcc& y) const {
    return MinMaxAcc{nanMin(x.lo, y.lo), nanMax(x.hi, y.hi)};
  }
};
struct MinMaxOf {
  PYCA_HD MinMaxAcc operator()(float a) const { return MinMaxAcc{a, a}; }
};

}  // namespace math
}  // namespace pyca
