// CUDA backend of the `differential` family, continued: the field products (JacobianXY,
// JacobianXtY, DivergenceTensor, AdInf, CoAdInf), one functor per operation run by the shared voxel
// loop (differential_launch.cuh), each calling the per-voxel math of pyca/math/differential.h (the
// same functions as the CPU loops in core/src/ops/differential_extra.cpp). Work is queued on pyca's
// current stream; nothing here synchronises.
#include <cuda_runtime.h>

#include <cstddef>

#include "ops/differential_cuda.h"
#include "ops/differential_launch.cuh"
#include "pyca/math/differential.h"
#include "pyca/runtime.h"

namespace pyca {
namespace cuda_impl {

namespace {

// out = K(a, b) at voxel (x, y, z), linear index i.
template <FieldProductOp K>
struct FieldProductF {
  OutPlanes out;
  FieldPlanes a, b;
  math::Grid3 g;
  __device__ void operator()(std::size_t i, int x, int y, int z) const {
    float o[3] = {0.f, 0.f, 0.f};
    if (K == FieldProductOp::JacobianXY) math::jacobianXY(a.c, b.c, i, g, x, y, z, o);
    if (K == FieldProductOp::JacobianXtY) math::jacobianXtY(a.c, b.c, i, g, x, y, z, o);
    if (K == FieldProductOp::DivergenceTensor) math::divergenceTensor(a.c, b.c, i, g, x, y, z, o);
    if (K == FieldProductOp::AdInf) math::adInf(a.c, b.c, i, g, x, y, z, o);
    if (K == FieldProductOp::CoAdInf) math::coAdInf(a.c, b.c, i, g, x, y, z, o);
    out.c[0][i] = o[0];
    out.c[1][i] = o[1];
    out.c[2][i] = o[2];
  }
};

template <FieldProductOp K>
void launchProduct(const OutPlanes& out, const FieldPlanes& a, const FieldPlanes& b, const math::Grid3& g,
                   const char* name) {
  differential_detail::launchVoxels(g, FieldProductF<K>{out, a, b, g}, name);
}

}  // namespace

void FieldProduct(FieldProductOp op, const OutPlanes& out, const FieldPlanes& a, const FieldPlanes& b,
                  const math::Grid3& g, const char* name) {
  switch (op) {
    case FieldProductOp::JacobianXY:
      launchProduct<FieldProductOp::JacobianXY>(out, a, b, g, name);
      break;
    case FieldProductOp::JacobianXtY:
      launchProduct<FieldProductOp::JacobianXtY>(out, a, b, g, name);
      break;
    case FieldProductOp::DivergenceTensor:
      launchProduct<FieldProductOp::DivergenceTensor>(out, a, b, g, name);
      break;
    case FieldProductOp::AdInf:
      launchProduct<FieldProductOp::AdInf>(out, a, b, g, name);
      break;
    case FieldProductOp::CoAdInf:
      launchProduct<FieldProductOp::CoAdInf>(out, a, b, g, name);
      break;
  }
}

}  // namespace cuda_impl
}  // namespace pyca
