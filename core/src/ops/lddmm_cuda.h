// Backends of the lddmm family (ops/lddmm.yaml), private to the core: the public functions
// (core/src/ops/lddmm.cpp) check their arguments and call the CPU loops (namespace cpu_impl, in
// lddmm.cpp) or the CUDA kernels (namespace cuda_impl, cuda/src/ops/lddmm.cu) with the same
// arguments. The CUDA functions enqueue on pyca::currentStream() without synchronising.
#pragma once

#include "pyca/math/lddmm.h"
#include "pyca/vec3.h"

namespace pyca {

//   transportStep  hOut, J = math::transportVoxel(h, v, im, P) over the voxels of P.n
//   ssdGradStep    mOut = math::ssdGradStepVoxel(m, h, J0, I1) (and C's hOut: math::gradStepVoxel) over
//                  the voxels of P.g
//   composeStep    hOut = math::composeVoxel(h, v, P) over the voxels of P.n
//   halveStep      *sum = the sum over i < n of math::halveElement(m, mOld, v, vOld, i)
#define PYCA_LDDMM_BACKEND_DECLARATIONS                                                                     \
  void transportStep(float* const hOut[3], float* J, const float* const h[3], const float* const v[3],      \
                     const float* im, const math::TransportParams& P, const char* op);                      \
  void ssdGradStep(float* const mOut[3], const float* const m[3], const float* const h[3], const float* J0, \
                   const float* I1, const math::GradStepParams& P, const math::ComposeOut& C,               \
                   const char* op);                                                                         \
  void composeStep(float* const hOut[3], const float* const h[3], const float* const v[3],                  \
                   const math::ComposeParams& P, const char* op);                                           \
  void halveStep(float* m, const float* mOld, float* v, const float* vOld, std::size_t n, double* sum,      \
                 const char* op);
namespace cpu_impl {
PYCA_LDDMM_BACKEND_DECLARATIONS
}  // namespace cpu_impl
namespace cuda_impl {
PYCA_LDDMM_BACKEND_DECLARATIONS
}  // namespace cuda_impl
#undef PYCA_LDDMM_BACKEND_DECLARATIONS

}  // namespace pyca
