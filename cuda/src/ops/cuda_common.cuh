// Helpers shared by the CUDA backends of the operation families (private to cuda/src): the stream
// pyca enqueues on, error checks that name the operation, grid sizes of grid-stride loops, and
// stream-ordered scratch memory.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "pyca/errors.h"
#include "pyca/runtime.h"
#include "pyca/vec3.h"

namespace pyca {
namespace cuda_impl {

// pyca's current stream for this thread.
inline cudaStream_t stream() { return reinterpret_cast<cudaStream_t>(pyca::currentStream()); }

// Throws when e is an error: OutOfMemory for a failed allocation, CudaError otherwise, both saying
// "op: what ...". A non-sticky error is cleared first so that later calls do not see it.
inline void check(cudaError_t e, const char* op, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  if (e == cudaErrorMemoryAllocation) {
    throw OutOfMemory(std::string(op) + ": out of device memory (" + what + ")");
  }
  throw CudaError(std::string(op) + ": " + what + " failed: " + cudaGetErrorName(e) + " (" +
                  cudaGetErrorString(e) + ")");
}

// Whether the linear indices of a grid of n voxels fit in 32 bits: the gathers and the LDDMM steps
// then index with uint32_t (cheaper arithmetic, the same result).
inline bool indices32(const Vec3Di& n) {
  return std::size_t(n.x) * std::size_t(n.y) * std::size_t(n.z) <= std::size_t(UINT32_MAX);
}

// Blocks of `block` threads for a grid-stride loop over n items: enough for one item a thread, at
// least 1, at most maxBlocks (the loop covers the rest).
inline unsigned blocksFor(std::size_t n, int block, std::size_t maxBlocks = std::size_t(1) << 20) {
  const std::size_t b = (n + std::size_t(block) - 1) / std::size_t(block);
  return unsigned(std::max<std::size_t>(1, std::min(b, maxBlocks)));
}

// The voxel loop of a kernel launched over (x, y) blocks of threads and gridDim.z blocks along z:
// declares x, y and z (ints) for the body that follows. Each thread takes runs of zRun consecutive
// slices (its block's previous slice stays in L1 for the next one's z-neighbours; the gathers ran 6-26%
// faster than with slices gridDim.z apart, benchmarks/lab/notes.md), grid-strided beyond 65535 blocks.
#define PYCA_VOXEL_RUNS(n, zRun)                                                     \
  const int x = int(blockIdx.x * blockDim.x + threadIdx.x);                          \
  const int y = int(blockIdx.y * blockDim.y + threadIdx.y);                          \
  if (x >= (n).x || y >= (n).y) return;                                              \
  for (int z0 = int(blockIdx.z) * (zRun); z0 < (n).z; z0 += int(gridDim.z) * (zRun)) \
    for (int z = z0, zEnd = z0 + (zRun) < (n).z ? z0 + (zRun) : (n).z; z < zEnd; ++z)

// Device scratch from the stream-ordered pool on pyca's current stream, released in stream order
// when the guard ends (on every path out, exceptions included). 0 bytes: no memory (p == nullptr).
struct Scratch {
  void* p = nullptr;
  cudaStream_t s = nullptr;
  Scratch(std::size_t bytes, const char* op) : s(stream()) {
    if (bytes > 0) check(cudaMallocAsync(&p, bytes, s), op, "cudaMallocAsync");
  }
  ~Scratch() {
    if (p) cudaFreeAsync(p, s);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

}  // namespace cuda_impl
}  // namespace pyca
