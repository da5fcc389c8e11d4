// The CPU loops of the fused LDDMM steps sixteen voxels at once (core/src/ops/lddmm_simd.cpp), private
// to the core. Each returns false, having done nothing, where it cannot run (no AVX-512, PYCA_CPU_SIMD=0,
// a grid of 2^31 voxels or more): the scalar loops of lddmm.cpp run then, with the same result.
#pragma once

#include "pyca/math/lddmm.h"

namespace pyca {
namespace simd16 {

// Whether the CPU has AVX-512 (F) and PYCA_CPU_SIMD is not 0: decided once per process.
bool available();

bool transportStep(const math::MutPlanes<3>& hOut, float* J, const math::Planes<3>& h,
                   const math::Planes<3>& v, const float* im, const math::TransportParams& P);
bool ssdGradStep(const math::MutPlanes<3>& mOut, const math::Planes<3>& m, const math::Planes<3>& h,
                 const float* J0, const float* I1, const math::GradStepParams& P, const math::ComposeOut& C);

}  // namespace simd16
}  // namespace pyca
