// The CPU loops of the mutual information (JointHistogram, MutualInformation) eight voxels at once, on
// CPUs with AVX-512 (core/src/ops/similarity_simd.cpp), private to the core. Each returns false, having
// done nothing, where it cannot run (no AVX-512 F and DQ, PYCA_CPU_SIMD=0): the scalar loops of
// similarity.cpp run then, with the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pyca/math/similarity.h"

namespace pyca {
namespace simd16 {

// Adds to H (bins.nI x bins.nJ, row-major by the bin of I) the fixed-point Parzen weights of the voxels
// [begin, end) of a, b (and mask weights w, or none).
bool miHistogramRange(std::uint64_t* H, const float* a, const float* b, const float* w, std::size_t begin,
                      std::size_t end, const math::MiBins& bins);
// g[i] = math::miGradAt(a[i], b[i], w[i] or 1, ...) for i in [begin, end).
bool miGradientRange(float* g, const float* a, const float* b, const float* w, std::size_t begin,
                     std::size_t end, const math::MiBins& bins, const float* L, float gscale);

}  // namespace simd16
}  // namespace pyca
