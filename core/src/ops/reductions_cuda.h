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

// An accumulator (a double in device memory, which kernels already queued add to) brought to the host
// and reset to 0, on pyca's current stream; one kernel moves it into pinned, mapped host memory (no
// copy to pageable memory).
//   takeSum     now: the move into the calling thread's result buffer, then a wait.
//   SumStaging  in two halves, for a caller that waits for the GPU anyway in between (the LDDMM
//               solver's match energy): stageSum queues the move into the staging's own host memory
//               (adding to what is there) and records an event, without waiting; takeStaged waits for
//               that event, whichever stream is current then, and returns the value, reset to 0.
double takeSum(const char* op, double* acc);
struct SumStaging;
SumStaging* createStaging(const char* op);
void freeStaging(SumStaging* s);  // null: nothing
void stageSum(const char* op, double* acc, SumStaging* s);
double takeStaged(const char* op, SumStaging* s);

}  // namespace cuda_impl
}  // namespace pyca
