// The one elementwise engine behind every operation of the `arithmetic` family: the generated glue
// (tools/opgen/family_arithmetic.py -> build/generated/src/arithmetic_gen_*.cpp) and the hand-written
// operations call arith::run<F>(...) with a target and the operands, and run() either loops on the
// CPU (OpenMP, vectorised) or calls the CUDA backend. The formula F comes from pyca/math/arithmetic.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "ops/arithmetic_cuda.h"
#include "pyca/array3d.h"
#include "pyca/detail/checks.h"
#include "pyca/detail/parallel.h"
#include "pyca/errors.h"
#include "pyca/math/arithmetic.h"
#include "pyca/vec3.h"

namespace pyca {
namespace arith {

using cuda_impl::MapOperand;
using cuda_impl::MapTarget;

// Below this many floats per plane the CPU loop runs on one thread (thread start-up would dominate).
using detail::kParallelMin;

// ---- targets and operands --------------------------------------------------------------------------

inline MapTarget target(Image3D& out) { return MapTarget{out.data(), 0, 1, out.nVox(), nullptr}; }
inline MapTarget target(Field3D& out) {
  return MapTarget{out.data(), out.planeStride(), 3, out.nVox(), nullptr};
}
// Only voxels where mask != 0 are written.
template <class T>
MapTarget target(T& out, const Image3D& mask) {
  MapTarget t = target(out);
  t.mask = mask.data();
  return t;
}
// One component (dim 0, 1 or 2) of a field as an image-like target.
inline MapTarget component(Field3D& out, int dim) {
  return MapTarget{out.data() + std::size_t(dim) * out.planeStride(), 0, 1, out.nVox(), nullptr};
}

// An operand read from memory; plane k starts at p + k * stride (an image has stride 0, so it is
// broadcast over the three planes of a field target).
struct Arr {
  const float* p;
  std::size_t stride;
};
// A constant operand; plane k uses v[k].
struct Cst {
  float v[3];
};

inline Arr arr(const Image3D& a) { return Arr{a.data(), 0}; }
inline Arr arr(const Field3D& a) { return Arr{a.data(), a.planeStride()}; }
inline Arr component(const Field3D& a, int dim) {
  return Arr{a.data() + std::size_t(dim) * a.planeStride(), 0};
}
inline Cst cst(float c) { return Cst{{c, c, c}}; }
inline Cst cst(double c) { return cst(float(c)); }
inline Cst cst(int c) { return cst(float(c)); }
inline Cst cst(const Vec3Df& c) { return Cst{{c.x, c.y, c.z}}; }

inline MapOperand devOperand(const Arr& a) { return MapOperand{a.p, a.stride, {0.f, 0.f, 0.f}}; }
inline MapOperand devOperand(const Cst& c) { return MapOperand{nullptr, 0, {c.v[0], c.v[1], c.v[2]}}; }

// ---- CPU loops -------------------------------------------------------------------------------------

// Operands bound to one plane: what the inner loop indexes.
struct PlaneArr {
  const float* p;
  float operator[](std::ptrdiff_t i) const { return p[i]; }
};
struct PlaneCst {
  float v;
  float operator[](std::ptrdiff_t) const { return v; }
};
inline PlaneArr bind(const Arr& a, int k) { return PlaneArr{a.p + std::size_t(k) * a.stride}; }
inline PlaneCst bind(const Cst& c, int k) { return PlaneCst{c.v[k]}; }

// c ? a : b as a bitwise blend: evaluated everywhere, so the masked loop vectorises (a plain ?: on
// out[i] becomes a conditional store, which does not).
inline float select(bool c, float a, float b) {
  std::uint32_t ua, ub;
  std::memcpy(&ua, &a, sizeof ua);
  std::memcpy(&ub, &b, sizeof ub);
  const std::uint32_t m = 0u - std::uint32_t(c);
  const std::uint32_t r = (ua & m) | (ub & ~m);
  float out;
  std::memcpy(&out, &r, sizeof out);
  return out;
}

// out[i] = f(in[i]...) for i < n (where mask[i] != 0 when there is a mask). Same-index aliasing of out
// and an input is fine: iteration i reads index i of the inputs before it writes out[i].
template <class F, class... P>
void cpuPlane(float* out, const float* mask, std::ptrdiff_t n, P... in) {
  const F f{};
  if (mask) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMin)
    for (std::ptrdiff_t i = 0; i < n; ++i) out[i] = select(mask[i] != 0.f, f(in[i]...), out[i]);
  } else {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMin)
    for (std::ptrdiff_t i = 0; i < n; ++i) out[i] = f(in[i]...);
  }
}

template <class F, class... Ops>
void cpuMap(const MapTarget& t, const Ops&... ops) {
  for (int k = 0; k < t.planes; ++k)
    cpuPlane<F>(t.p + std::size_t(k) * t.stride, t.mask, std::ptrdiff_t(t.n), bind(ops, k)...);
}

// ---- dispatch --------------------------------------------------------------------------------------

// Runs F over the target on the CPU or, when `dev`, on the GPU. The caller has run the checks
// (detail::prepare), which is where `dev` comes from.
template <class F, class... Ops>
void run(const char* op, bool dev, const MapTarget& t, const Ops&... ops) {
  static_assert(sizeof...(Ops) == F::arity, "operand count does not match the formula's arity");
  if (dev) {
    const MapOperand in[] = {devOperand(ops)...};
    (void)in;
    PYCA_CUDA_CALL(op, (cuda_impl::map<F>(op, t, in)));
  } else {
    cpuMap<F>(t, ops...);
  }
}

}  // namespace arith
}  // namespace pyca
