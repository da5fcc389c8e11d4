// CUDA backend of the `reductions` family: CUB DeviceReduce::TransformReduce on pyca's current stream
// (sums accumulate in double), one temporary buffer from cudaMallocAsync on that stream, then one
// synchronisation to bring the values back.
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>

#include <cmath>
#include <cstddef>
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>
#include <string>

#include "ops/reductions_cuda.h"
#include "pyca/errors.h"
#include "pyca/math/arithmetic.h"
#include "pyca/runtime.h"

namespace pyca {
namespace cuda_impl {
namespace {

constexpr std::size_t kResultBytes = 256;  // room for 3 results, keeps the temp storage aligned

void check(cudaError_t e, const char* op, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear a non-sticky error so later calls do not see it
    throw CudaError(std::string(op) + ": " + what + " failed: " + cudaGetErrorString(e));
  }
}

cudaStream_t stream() { return reinterpret_cast<cudaStream_t>(currentStream()); }

// a[i] * b[i] as a double, indexed by a counting iterator.
struct DotAt {
  const float* a;
  const float* b;
  __device__ double operator()(std::size_t i) const { return math::DotTerm{}(a[i], b[i]); }
};

// One sum of kind K over n floats (temp == nullptr: only computes the temp size).
cudaError_t sumOnce(SumKind kind, void* temp, std::size_t& bytes, const float* a, const float* b, double* out,
                    std::size_t n, cudaStream_t s) {
  const cuda::std::plus<double> plus;
  switch (kind) {
    case SumKind::kSum:
      return cub::DeviceReduce::TransformReduce(temp, bytes, a, out, n, plus, math::SumTerm{}, 0.0, s);
    case SumKind::kSum2:
      return cub::DeviceReduce::TransformReduce(temp, bytes, a, out, n, plus, math::Sum2Term{}, 0.0, s);
    case SumKind::kL1:
      return cub::DeviceReduce::TransformReduce(temp, bytes, a, out, n, plus, math::L1Term{}, 0.0, s);
    case SumKind::kDot:
      return cub::DeviceReduce::TransformReduce(temp, bytes, thrust::counting_iterator<std::size_t>(0), out,
                                                n, plus, DotAt{a, b}, 0.0, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t minMaxOnce(void* temp, std::size_t& bytes, const float* a, math::MinMaxAcc* out, std::size_t n,
                       cudaStream_t s) {
  const math::MinMaxAcc init{INFINITY, -INFINITY};
  return cub::DeviceReduce::TransformReduce(temp, bytes, a, out, n, math::MinMaxCombine{}, math::MinMaxOf{},
                                            init, s);
}

// Owns the stream-ordered scratch buffer; frees it (stream-ordered) on every path out.
struct Scratch {
  void* p = nullptr;
  cudaStream_t s;
  Scratch(std::size_t bytes, cudaStream_t st, const char* op) : s(st) {
    check(cudaMallocAsync(&p, bytes, s), op, "cudaMallocAsync");
  }
  ~Scratch() {
    if (p) cudaFreeAsync(p, s);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

}  // namespace

void reduceSum(const char* op, SumKind kind, const float* a, std::size_t aStride, const float* b,
               std::size_t bStride, int planes, std::size_t n, double* out) {
  for (int k = 0; k < planes; ++k) out[k] = 0.0;
  if (n == 0 || planes <= 0) return;
  const cudaStream_t s = stream();
  std::size_t bytes = 0;
  check(sumOnce(kind, nullptr, bytes, a, b, nullptr, n, s), op, "cub::DeviceReduce (size query)");
  double host[3] = {0.0, 0.0, 0.0};
  {
    Scratch buf(kResultBytes + bytes, s, op);
    double* dOut = static_cast<double*>(buf.p);
    void* temp = static_cast<char*>(buf.p) + kResultBytes;
    for (int k = 0; k < planes; ++k) {
      std::size_t b2 = bytes;
      check(sumOnce(kind, temp, b2, a + std::size_t(k) * aStride, b ? b + std::size_t(k) * bStride : nullptr,
                    dOut + k, n, s),
            op, "cub::DeviceReduce");
    }
    check(cudaMemcpyAsync(host, dOut, sizeof(double) * std::size_t(planes), cudaMemcpyDeviceToHost, s), op,
          "cudaMemcpyAsync");
  }
  check(cudaStreamSynchronize(s), op, "cudaStreamSynchronize");
  for (int k = 0; k < planes; ++k) out[k] = host[k];
}

void reduceMinMax(const char* op, const float* a, std::size_t aStride, int planes, std::size_t n, float* lo,
                  float* hi) {
  if (n == 0 || planes <= 0) return;
  const cudaStream_t s = stream();
  std::size_t bytes = 0;
  check(minMaxOnce(nullptr, bytes, a, nullptr, n, s), op, "cub::DeviceReduce (size query)");
  math::MinMaxAcc host[3];
  {
    Scratch buf(kResultBytes + bytes, s, op);
    auto* dOut = static_cast<math::MinMaxAcc*>(buf.p);
    void* temp = static_cast<char*>(buf.p) + kResultBytes;
    for (int k = 0; k < planes; ++k) {
      std::size_t b2 = bytes;
      check(minMaxOnce(temp, b2, a + std::size_t(k) * aStride, dOut + k, n, s), op, "cub::DeviceReduce");
    }
    check(
        cudaMemcpyAsync(host, dOut, sizeof(math::MinMaxAcc) * std::size_t(planes), cudaMemcpyDeviceToHost, s),
        op, "cudaMemcpyAsync");
  }
  check(cudaStreamSynchronize(s), op, "cudaStreamSynchronize");
  for (int k = 0; k < planes; ++k) {
    lo[k] = host[k].lo;
    hi[k] = host[k].hi;
  }
}

}  // namespace cuda_impl
}  // namespace pyca
