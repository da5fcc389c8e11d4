// CUDA entry points of the `similarity` family (cuda/src/ops/similarity.cu, mutual_information.cu). Private
// to the library: pyca types and raw device pointers only. Work is queued on pyca's current stream; LNCC
// waits for its sum. Argument checks happen in core/src/ops/similarity.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pyca/math/similarity.h"
#include "pyca/vec3.h"

namespace pyca {
namespace cuda_impl {

// Truncated box sums (pyca/math/similarity.h) of a size.x * size.y * size.z device volume; out may be in.
void BoxSum(float* out, const float* in, const Vec3Di& size, const Vec3Di& radius);

// S = sum w cc and grad = dS/dI (mask may be null: w = 1). grad is distinct from I, J, mask.
double LNCC(float* grad, const float* I, const float* J, const float* mask, const float* support,
            const Vec3Di& size, const Vec3Di& radius, float eps);

// The integer Parzen joint histogram (pyca/math/similarity.h) of nv voxels of I and J (mask may be
// null), copied into hostH (b.nI b.nJ entries, zeroed by the caller); waits for it.
void MIHistogram(std::uint64_t* hostH, const float* I, const float* J, const float* mask, std::size_t nv,
                 const math::MiBins& b);

// grad = dMI/dI from the table hostL (b.nI b.nJ floats of miFromHistogram) and gscale.
void MIGradient(float* grad, const float* I, const float* J, const float* mask, std::size_t nv,
                const math::MiBins& b, const float* hostL, float gscale);

// gradI = dMI/dI and gradJ = dMI/dJ from one pass: the tables hostLI (of H) and hostLJ (of H transposed),
// b.nI b.nJ floats each, and gscale (math::miGradPairAt).
void MIGradients(float* gradI, float* gradJ, const float* I, const float* J, const float* mask,
                 std::size_t nv, const math::MiBins& b, const float* hostLI, const float* hostLJ,
                 float gscale);

// n floats from host memory to a device array (waits).
void CopyToDevice(float* dst, const float* hostSrc, std::size_t n);

}  // namespace cuda_impl
}  // namespace pyca
