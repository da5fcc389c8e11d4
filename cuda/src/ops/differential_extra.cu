// CUDA backend of the `differential` family, continued: the field products (JacobianXY,
// JacobianXtY, DivergenceTensor, AdInf, CoAdInf), one grid-stride kernel per operation, each
// calling the per-voxel math of pyca/math/differential.h (the same functions as the CPU loops in
// core/src/ops/differential_extra.cpp). Work is queued on pyca's current stream; nothing here
// synchronises.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "ops/cuda_common.cuh"
#include "ops/differential_cuda.h"
#include "pyca/math/differential.h"
#include "pyca/runtime.h"

namespace pyca {
namespace cuda_impl {

namespace {

constexpr int kBlock = 256;

// out = K(a, b) at every voxel of g (grid-stride loop, 64-bit linear index).
template <FieldProductOp K>
__global__ void fieldProductKernel(math::Grid3 g, OutPlanes out, FieldPlanes a, FieldPlanes b) {
  const std::size_t nx = std::size_t(g.nx), nxy = nx * std::size_t(g.ny);
  const std::size_t n = nxy * std::size_t(g.nz);
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t z = i / nxy, r = i - z * nxy;
    const std::size_t y = r / nx, x = r - y * nx;
    float o[3] = {0.f, 0.f, 0.f};
    if (K == FieldProductOp::JacobianXY) math::jacobianXY(a.c, b.c, i, g, int(x), int(y), int(z), o);
    if (K == FieldProductOp::JacobianXtY) math::jacobianXtY(a.c, b.c, i, g, int(x), int(y), int(z), o);
    if (K == FieldProductOp::DivergenceTensor)
      math::divergenceTensor(a.c, b.c, i, g, int(x), int(y), int(z), o);
    if (K == FieldProductOp::AdInf) math::adInf(a.c, b.c, i, g, int(x), int(y), int(z), o);
    if (K == FieldProductOp::CoAdInf) math::coAdInf(a.c, b.c, i, g, int(x), int(y), int(z), o);
    out.c[0][i] = o[0];
    out.c[1][i] = o[1];
    out.c[2][i] = o[2];
  }
}

template <FieldProductOp K>
void launchProduct(const OutPlanes& out, const FieldPlanes& a, const FieldPlanes& b, const math::Grid3& g,
                   const char* name) {
  const std::size_t n = std::size_t(g.nx) * std::size_t(g.ny) * std::size_t(g.nz);
  if (n == 0) return;
  fieldProductKernel<K><<<blocksFor(n, kBlock), kBlock, 0, stream()>>>(g, out, a, b);
  pyca::checkLaunch(name);
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
