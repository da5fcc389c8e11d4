// CUDA backend of the `reductions` family, in two launches on pyca's current stream and one wait:
//   1. partialKernel: block (i, k) reduces a grid-strided share of plane k (float4 loads when the
//      plane is 16-byte aligned) to one partial (cub::BlockReduce); at most kMaxBlocks blocks per plane, so
//      the order of the additions depends on the size only, not on the device;
//   2. finalKernel: one block per plane reduces the partials and writes the result straight into a
//      small pinned host buffer of the calling thread (mapped: no separate copy to enqueue).
// (cub::DeviceReduce did the same in more steps: a temp-size query, two kernels, a copy back; this
// is 8 us faster a call on an H100, benchmarks/lab/notes.md.)
// Sums accumulate in double, as on the CPU (the terms are those of pyca/math/arithmetic.h).
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <memory>
#include <string>

#include "ops/cuda_common.cuh"
#include "ops/reductions_cuda.h"
#include "pyca/errors.h"
#include "pyca/math/arithmetic.h"
#include "pyca/runtime.h"

namespace pyca {
namespace cuda_impl {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 1024;
constexpr int kMaxPlanes = 3;

// The reductions: an accumulator type, its identity, the term of element i and how two combine.
template <class Term>
struct SumOf {
  using Acc = double;
  __device__ static Acc identity() { return 0.0; }
  __device__ static Acc term(float a, float) { return Term{}(a); }
  __device__ static Acc combine(Acc x, Acc y) { return x + y; }
};
struct DotOf {
  using Acc = double;
  __device__ static Acc identity() { return 0.0; }
  __device__ static Acc term(float a, float b) { return math::DotTerm{}(a, b); }
  __device__ static Acc combine(Acc x, Acc y) { return x + y; }
};
struct MinMaxReduce {
  using Acc = math::MinMaxAcc;
  __device__ static Acc identity() { return Acc{INFINITY, -INFINITY}; }
  __device__ static Acc term(float a, float) { return math::MinMaxOf{}(a); }
  __device__ static Acc combine(const Acc& x, const Acc& y) { return math::MinMaxCombine{}(x, y); }
};

// The block's accumulators combined with CUB's BlockReduce; valid in thread 0.
template <class R>
struct Combine {
  __device__ typename R::Acc operator()(const typename R::Acc& x, const typename R::Acc& y) const {
    return R::combine(x, y);
  }
};
template <class R>
__device__ typename R::Acc blockReduce(typename R::Acc acc) {
  using BlockReduce = cub::BlockReduce<typename R::Acc, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  return BlockReduce(temp).Reduce(acc, Combine<R>{});
}

template <class R, bool kBinary>
__global__ void __launch_bounds__(kThreads)
    partialKernel(const float* __restrict__ a, std::size_t aStride, const float* __restrict__ b,
                  std::size_t bStride, std::size_t n, typename R::Acc* __restrict__ partials) {
  const unsigned plane = blockIdx.y;
  a += plane * aStride;
  if (kBinary) b += plane * bStride;
  typename R::Acc acc = R::identity();
  const std::size_t tid = std::size_t(blockIdx.x) * kThreads + threadIdx.x;
  const std::size_t nth = std::size_t(gridDim.x) * kThreads;
  std::size_t start = 0;
  const bool vec = (reinterpret_cast<std::uintptr_t>(a) & 15u) == 0 &&
                   (!kBinary || (reinterpret_cast<std::uintptr_t>(b) & 15u) == 0);
  if (vec) {
    const std::size_t n4 = n / 4;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    for (std::size_t i = tid; i < n4; i += nth) {
      const float4 x = __ldg(a4 + i);
      const float4 y = kBinary ? __ldg(b4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
      acc = R::combine(acc, R::combine(R::combine(R::term(x.x, y.x), R::term(x.y, y.y)),
                                       R::combine(R::term(x.z, y.z), R::term(x.w, y.w))));
    }
    start = n4 * 4;
  }
  for (std::size_t i = start + tid; i < n; i += nth)
    acc = R::combine(acc, R::term(a[i], kBinary ? b[i] : 0.f));
  acc = blockReduce<R>(acc);
  if (threadIdx.x == 0) partials[std::size_t(plane) * gridDim.x + blockIdx.x] = acc;
}

template <class R>
__global__ void __launch_bounds__(kThreads)
    finalKernel(const typename R::Acc* __restrict__ partials, unsigned count, typename R::Acc* result) {
  typename R::Acc acc = R::identity();
  const typename R::Acc* p = partials + std::size_t(blockIdx.x) * count;
  for (unsigned i = threadIdx.x; i < count; i += kThreads) acc = R::combine(acc, p[i]);
  acc = blockReduce<R>(acc);
  if (threadIdx.x == 0) result[blockIdx.x] = acc;
}

// The calling thread's pinned, mapped result buffer (room for kMaxPlanes results of any kind).
// A reduction waits for its stream before returning, so one buffer per thread is never shared
// by two reductions in flight.
struct PinnedResult {
  void* host = nullptr;
  void* dev = nullptr;
  ~PinnedResult() {
    if (host) cudaFreeHost(host);  // may fail at process exit, after the runtime is gone: ignored
  }
};
thread_local PinnedResult tlResult;

template <class Acc>
Acc* resultBuffer(const char* op, Acc** dev) {
  static_assert(sizeof(Acc) * kMaxPlanes <= 64, "result buffer too small");
  if (!tlResult.host) {
    check(cudaHostAlloc(&tlResult.host, 64, cudaHostAllocMapped | cudaHostAllocPortable), op,
          "cudaHostAlloc");
    if (cudaHostGetDevicePointer(&tlResult.dev, tlResult.host, 0) != cudaSuccess) {
      cudaFreeHost(tlResult.host);
      tlResult.host = nullptr;
      check(cudaErrorInvalidValue, op, "cudaHostGetDevicePointer");
    }
  }
  *dev = static_cast<Acc*>(tlResult.dev);
  return static_cast<Acc*>(tlResult.host);
}

// Reduces each plane with R into out[0 .. planes); b is read when kBinary.
template <class R, bool kBinary>
void reduce(const char* op, const float* a, std::size_t aStride, const float* b, std::size_t bStride,
            int planes, std::size_t n, typename R::Acc* out) {
  using Acc = typename R::Acc;
  if (planes > kMaxPlanes) throw ValueError(std::string(op) + ": too many planes for the CUDA reduction");
  const cudaStream_t s = stream();
  std::size_t blocks = (n / 4 + kThreads - 1) / kThreads;
  blocks = blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks);
  const unsigned nb = unsigned(blocks);
  Acc* dev = nullptr;
  Acc* host = resultBuffer<Acc>(op, &dev);
  {
    Scratch partials(sizeof(Acc) * nb * std::size_t(planes), op);
    Acc* part = partials.as<Acc>();
    partialKernel<R, kBinary>
        <<<dim3(nb, unsigned(planes)), kThreads, 0, s>>>(a, aStride, b, bStride, n, part);
    finalKernel<R><<<unsigned(planes), kThreads, 0, s>>>(part, nb, dev);
    checkLaunch(op);
  }
  check(cudaStreamSynchronize(s), op, "cudaStreamSynchronize");
  for (int k = 0; k < planes; ++k) out[k] = host[k];
}

// *out += *acc, *acc = 0: an accumulator moved into (mapped) host memory.
__global__ void moveSumKernel(double* acc, double* out) {
  *out += *acc;
  *acc = 0.0;
}

}  // namespace

double takeSum(const char* op, double* acc) {
  double* dev = nullptr;
  double* host = resultBuffer<double>(op, &dev);
  host[0] = 0.0;  // (no reduction is in flight: each waits before it returns)
  const cudaStream_t s = stream();
  moveSumKernel<<<1, 1, 0, s>>>(acc, dev);
  checkLaunch(op);
  check(cudaStreamSynchronize(s), op, "cudaStreamSynchronize");
  return host[0];
}

struct SumStaging {
  double* host = nullptr;
  double* dev = nullptr;  // the same memory, as the device sees it
  cudaEvent_t done = nullptr;
};

void freeStaging(SumStaging* s) {  // (at process exit, after the runtime, the calls fail: ignored)
  if (s == nullptr) return;
  if (s->done) cudaEventDestroy(s->done);
  if (s->host) cudaFreeHost(s->host);
  delete s;
}

SumStaging* createStaging(const char* op) {
  std::unique_ptr<SumStaging, void (*)(SumStaging*)> s(new SumStaging, freeStaging);
  void* p = nullptr;
  check(cudaHostAlloc(&p, sizeof(double), cudaHostAllocMapped | cudaHostAllocPortable), op, "cudaHostAlloc");
  s->host = static_cast<double*>(p);
  *s->host = 0.0;
  void* d = nullptr;
  check(cudaHostGetDevicePointer(&d, p, 0), op, "cudaHostGetDevicePointer");
  s->dev = static_cast<double*>(d);
  check(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming), op, "cudaEventCreateWithFlags");
  return s.release();
}

void stageSum(const char* op, double* acc, SumStaging* s) {
  moveSumKernel<<<1, 1, 0, stream()>>>(acc, s->dev);
  checkLaunch(op);
  check(cudaEventRecord(s->done, stream()), op, "cudaEventRecord");
}

double takeStaged(const char* op, SumStaging* s) {
  check(cudaEventSynchronize(s->done), op, "cudaEventSynchronize");
  const double v = *s->host;
  *s->host = 0.0;
  return v;
}

void reduceSum(const char* op, SumKind kind, const float* a, std::size_t aStride, const float* b,
               std::size_t bStride, int planes, std::size_t n, double* out) {
  for (int k = 0; k < planes; ++k) out[k] = 0.0;
  if (n == 0 || planes <= 0) return;
  switch (kind) {
    case SumKind::kSum:
      return reduce<SumOf<math::SumTerm>, false>(op, a, aStride, nullptr, 0, planes, n, out);
    case SumKind::kSum2:
      return reduce<SumOf<math::Sum2Term>, false>(op, a, aStride, nullptr, 0, planes, n, out);
    case SumKind::kL1:
      return reduce<SumOf<math::L1Term>, false>(op, a, aStride, nullptr, 0, planes, n, out);
    case SumKind::kDot:
      return reduce<DotOf, true>(op, a, aStride, b, bStride, planes, n, out);
  }
}

void reduceMinMax(const char* op, const float* a, std::size_t aStride, int planes, std::size_t n, float* lo,
                  float* hi) {
  if (n == 0 || planes <= 0) return;
  math::MinMaxAcc r[kMaxPlanes];
  reduce<MinMaxReduce, false>(op, a, aStride, nullptr, 0, planes, n, r);
  for (int k = 0; k < planes; ++k) {
    lo[k] = r[k].lo;
    hi[k] = r[k].hi;
  }
}

}  // namespace cuda_impl
}  // namespace pyca
