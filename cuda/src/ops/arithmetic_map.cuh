// The elementwise kernel of the `arithmetic` family: one template, instantiated per formula (functor of
// pyca/math/arithmetic.h) in arithmetic_map_*.cu. Grid-stride; each thread handles one index of every
// plane; float4 loads and stores when every pointer of every plane is 16-byte aligned (the tail of
// n % 4 floats is scalar).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "ops/arithmetic_cuda.h"
#include "ops/cuda_common.cuh"
#include "pyca/math/arithmetic.h"
#include "pyca/runtime.h"

namespace pyca {
namespace cuda_impl {
namespace map_detail {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 1u << 16;  // the grid-stride loop covers the rest

template <int N>
struct Params {
  float* out;
  std::size_t outStride;
  std::size_t n;  // floats per plane
  int planes;     // 1 or 3
  const float* mask;
  const float* p[N];  // nullptr: constant operand
  std::size_t stride[N];
  float c[N][3];
};

template <class F, std::size_t... I>
__device__ __forceinline__ float call(const F& f, const float (&v)[F::arity], std::index_sequence<I...>) {
  return f(v[I]...);
}

template <class F>
__device__ __forceinline__ float call(const F& f, const float (&v)[F::arity]) {
  return call(f, v, std::make_index_sequence<F::arity>());
}

// One thread computes index i (four consecutive floats with kVec) of every plane, so an image operand
// of a field operation is read from memory once, not once per plane. The plane loop is unrolled so
// that the parameter block is only ever indexed with constants (a runtime index would copy it to
// local memory in every thread).
template <class F, bool kVec>
__global__ void __launch_bounds__(kThreads, 4) mapKernel(const Params<F::arity> P) {
  constexpr int N = F::arity;
  const F f{};
  const std::size_t n = P.n;
  const std::size_t tid = std::size_t(blockIdx.x) * kThreads + threadIdx.x;
  const std::size_t nth = std::size_t(gridDim.x) * kThreads;
  std::size_t start = 0;
  if constexpr (kVec) {
    const std::size_t n4 = n / 4;
    for (std::size_t i = tid; i < n4; i += nth) {
      const float4 m = P.mask ? reinterpret_cast<const float4*>(P.mask)[i] : make_float4(1.f, 1.f, 1.f, 1.f);
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        if (k >= P.planes) break;
        float v0[N], v1[N], v2[N], v3[N];
#pragma unroll
        for (int j = 0; j < N; ++j) {
          if (P.p[j]) {
            const float4 t = reinterpret_cast<const float4*>(P.p[j] + std::size_t(k) * P.stride[j])[i];
            v0[j] = t.x;
            v1[j] = t.y;
            v2[j] = t.z;
            v3[j] = t.w;
          } else {
            v0[j] = v1[j] = v2[j] = v3[j] = P.c[j][k];
          }
        }
        float4* o = reinterpret_cast<float4*>(P.out + std::size_t(k) * P.outStride) + i;
        float4 r = make_float4(call(f, v0), call(f, v1), call(f, v2), call(f, v3));
        if (P.mask) {
          const float4 old = *o;
          r.x = m.x != 0.f ? r.x : old.x;
          r.y = m.y != 0.f ? r.y : old.y;
          r.z = m.z != 0.f ? r.z : old.z;
          r.w = m.w != 0.f ? r.w : old.w;
        }
        *o = r;
      }
    }
    start = n4 * 4;
  }
  for (std::size_t i = start + tid; i < n; i += nth) {
    if (P.mask && P.mask[i] == 0.f) continue;
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      if (k >= P.planes) break;
      float v[N];
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = P.p[j] ? P.p[j][std::size_t(k) * P.stride[j] + i] : P.c[j][k];
      P.out[std::size_t(k) * P.outStride + i] = call(f, v);
    }
  }
}

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// True when plane k of a pointer with this stride stays 16-byte aligned for every k < planes.
inline bool planesAligned(const void* p, std::size_t stride, int planes) {
  return aligned16(p) && (planes == 1 || stride % 4 == 0);
}

}  // namespace map_detail

template <class F>
void map(const char* op, const MapTarget& t, const MapOperand* in) {
  using namespace map_detail;
  constexpr int N = F::arity;
  if (t.n == 0 || t.planes <= 0) return;
  // Planes that lie back to back (fields with planeStride == nVox, all operands alike, one constant
  // for all planes, no mask) are one plane of 3n floats: one launch, and float4 access whatever n is.
  bool flat = t.planes > 1 && t.stride == t.n && !t.mask;
  for (int j = 0; j < N && flat; ++j)
    flat = in[j].p ? in[j].stride == t.n : (in[j].c[0] == in[j].c[1] && in[j].c[1] == in[j].c[2]);
  const int planes = flat ? 1 : t.planes;
  Params<N> P;
  P.out = t.p;
  P.outStride = t.stride;
  P.n = flat ? t.n * std::size_t(t.planes) : t.n;
  P.planes = planes;
  P.mask = t.mask;
  bool vec = planesAligned(t.p, t.stride, planes) && (!t.mask || aligned16(t.mask));
  for (int j = 0; j < N; ++j) {
    P.p[j] = in[j].p;
    P.stride[j] = in[j].stride;
    for (int k = 0; k < 3; ++k) P.c[j][k] = in[j].c[k];
    if (in[j].p) vec = vec && planesAligned(in[j].p, in[j].stride, planes);
  }
  const std::size_t work = vec ? (P.n + 3) / 4 : P.n;
  const unsigned grid = blocksFor(work, kThreads, kMaxBlocks);
  const cudaStream_t s = stream();
  if (vec)
    mapKernel<F, true><<<grid, kThreads, 0, s>>>(P);
  else
    mapKernel<F, false><<<grid, kThreads, 0, s>>>(P);
  checkLaunch(op);
}

}  // namespace cuda_impl
}  // namespace pyca

#define PYCA_ARITH_INSTANTIATE_MAP(F)                                                               \
  template void pyca::cuda_impl::map<pyca::math::F>(const char*, const pyca::cuda_impl::MapTarget&, \
                                                    const pyca::cuda_impl::MapOperand*);
