// CUDA kernels of the `arithmetic` family that read whole vectors of a Field3D (Magnitude,
// SqrMagnitude, ComponentDotProd / Dot, NormalizeSafe). The formulas are in pyca/math/arithmetic.h.
#include <cuda_runtime.h>

#include <cstddef>

#include "ops/arithmetic_cuda.h"
#include "ops/cuda_common.cuh"
#include "pyca/math/arithmetic.h"
#include "pyca/runtime.h"

namespace pyca {
namespace cuda_impl {
namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 1u << 16;

struct MagnitudeOf {
  __device__ float operator()(const Vec3Df& a, const Vec3Df&) const { return math::magnitude(a); }
};
struct SqrMagnitudeOf {
  __device__ float operator()(const Vec3Df& a, const Vec3Df&) const { return math::sqrMagnitude(a); }
};
struct DotOf {
  __device__ float operator()(const Vec3Df& a, const Vec3Df& b) const { return math::dot(a, b); }
};

template <class F>
__global__ void __launch_bounds__(kThreads)
    fieldToImageKernel(float* out, const float* a, std::size_t as, const float* b, std::size_t bs,
                       std::size_t n) {
  const F f{};
  for (std::size_t i = std::size_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * kThreads) {
    const Vec3Df va(a[i], a[i + as], a[i + 2 * as]);
    const Vec3Df vb(b[i], b[i + bs], b[i + 2 * bs]);
    out[i] = f(va, vb);
  }
}

__global__ void __launch_bounds__(kThreads)
    normalizeKernel(float* out, std::size_t os, const float* a, std::size_t as, std::size_t n, float eps) {
  for (std::size_t i = std::size_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * kThreads) {
    const Vec3Df v = math::normalizeSafe(Vec3Df(a[i], a[i + as], a[i + 2 * as]), eps);
    out[i] = v.x;
    out[i + os] = v.y;
    out[i + 2 * os] = v.z;
  }
}

}  // namespace

void fieldToImage(const char* op, FieldToImage f, float* out, const float* a, std::size_t aStride,
                  const float* b, std::size_t bStride, std::size_t n) {
  if (n == 0) return;
  if (!b) {
    b = a;
    bStride = aStride;
  }
  const unsigned blocks = blocksFor(n, kThreads, kMaxBlocks);
  switch (f) {
    case FieldToImage::kMagnitude:
      fieldToImageKernel<MagnitudeOf><<<blocks, kThreads, 0, stream()>>>(out, a, aStride, b, bStride, n);
      break;
    case FieldToImage::kSqrMagnitude:
      fieldToImageKernel<SqrMagnitudeOf><<<blocks, kThreads, 0, stream()>>>(out, a, aStride, b, bStride, n);
      break;
    case FieldToImage::kDot:
      fieldToImageKernel<DotOf><<<blocks, kThreads, 0, stream()>>>(out, a, aStride, b, bStride, n);
      break;
  }
  checkLaunch(op);
}

void normalizeSafe(const char* op, float* out, std::size_t outStride, const float* a, std::size_t aStride,
                   std::size_t n, float eps) {
  if (n == 0) return;
  normalizeKernel<<<blocksFor(n, kThreads, kMaxBlocks), kThreads, 0, stream()>>>(out, outStride, a, aStride,
                                                                                 n, eps);
  checkLaunch(op);
}

}  // namespace cuda_impl
}  // namespace pyca
