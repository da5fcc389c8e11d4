// The CPU loops of the trilinear gathers, ComposeHHBorder, LDDMMComposeStep, JacDetH, Gradient and JacobianXY
// sixteen voxels at once (core/src/ops/deformation_simd.cpp), private to the core. Each returns false,
// having done nothing, where it cannot run (no AVX-512, PYCA_CPU_SIMD=0, a grid of 2^31 voxels or more,
// a form it does not take): the scalar loops run then, with the same result, to the bit.
#pragma once

#include "ops/deformation_cuda.h"
#include "pyca/math/differential.h"
#include "pyca/math/lddmm.h"

namespace pyca {
namespace simd16 {

// A gather (ApplyH, ApplyV, ComposeHH, ComposeHV, ComposeVH, ...) with INTERP_LINEAR and positions
// from an H-field (POS_H) or x + scale v (POS_V): gatherVoxel at every voxel.
bool gatherLinear(const deformation_impl::GatherJob& j);
// ComposeHHBorder: composeBorderVoxel at every voxel of outSize.
bool composeBorder(const math::MutPlanes<3>& out, const Vec3Di& outSize, const math::Planes<3>& f,
                   const Vec3Di& fSize, const math::Planes<3>& g);
// ApplyHUnblurred: unblurredVoxel at every voxel of outSize.
bool unblurred(float* out, const Vec3Di& outSize, const math::Planes<4>& src, const Vec3Di& srcSize,
               const math::Planes<3>& h);
// LDDMMComposeStep: composeVoxel at every voxel.
bool composeStep(const math::MutPlanes<3>& hOut, const math::Planes<3>& h, const math::Planes<3>& v,
                 const math::ComposeParams& P);
// JacDetH and Gradient with DIFF_CENTRAL (any boundary condition): math::jacDetH, math::gradient.
bool jacDetH(float* out, const math::Planes<3>& h, const math::Grid3& g, DiffT d, BoundaryCondT bc);
bool gradient(const math::MutPlanes<3>& out, const float* im, const math::Grid3& g, DiffT d,
              BoundaryCondT bc);
// JacobianXY (central, BC_CLAMP): math::jacobianXY; out is not X or Y.
bool jacobianXY(const math::MutPlanes<3>& out, const math::Planes<3>& X, const math::Planes<3>& Y,
                const math::Grid3& g);

}  // namespace simd16
}  // namespace pyca
