// CUDA entry points of the `similarity` family (cuda/src/ops/similarity.cu). Private to the library:
// pyca types and raw device pointers only. Work is queued on pyca's current stream; LNCC waits for
// its sum. Argument checks happen in core/src/ops/similarity.cpp.
#pragma once

#include "pyca/vec3.h"

namespace pyca {
namespace cuda_impl {

// Truncated box sums (pyca/math/similarity.h) of a size.x * size.y * size.z device volume; out may be in.
void BoxSum(float* out, const float* in, const Vec3Di& size, const Vec3Di& radius);

// S = sum w cc and grad = dS/dI (mask may be null: w = 1). grad is distinct from I, J, mask.
double LNCC(float* grad, const float* I, const float* J, const float* mask, const Vec3Di& size, const Vec3Di& radius,
            float eps);

}  // namespace cuda_impl
}  // namespace pyca
