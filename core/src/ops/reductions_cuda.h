// Entry points of the CUDA backend of the `reductions` family (defined in cuda/src/ops/reductions.cu).
// Only pyca types here. Each call reduces on pyca's current stream and waits for the result.
#pragma once

#include <cstddef>

namespace pyca {
namespace cuda_impl {

// What a sum-like reduction adds up, in double (terms in pyca/math/arithmetic.h).
enum class SumKind { kSum, kSum2, kL1, kDot };

// For each of `planes` planes (n floats each; plane k of a starts at a + k * aStride, of b at
// b + k * bStride): out[k] = the sum of the terms of `kind`. b is read only for kDot.
void reduceSum(const char* op, SumKind kind, const float* a, std::size_t aStride, const float* b,
               std::size_t bStride, int planes, std::size_t n, double* out);

// For each plane: lo[k] = its minimum and hi[k] = its maximum (both NaN if the plane holds a NaN).
void reduceMinMax(const char* op, const float* a, std::size_t aStride, int planes, std::size_t n, float* lo,
                  float* hi);

// Returns *acc (a double in device memory, written by kernels already enqueued) and sets *acc = 0, on
// pyca's current stream: one kernel writes it into the calling thread's pinned result buffer (no
// copy to pageable memory), then a wait.
double takeSum(const char* op, double* acc);

}  // namespace cuda_impl
}  // namespace pyca
