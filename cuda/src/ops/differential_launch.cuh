// The voxel loop of the CUDA backend of the `differential` family (private to cuda/src), shared by
// differential.cu and differential_extra.cu: f(i, x, y, z) for every voxel of a grid, grid-stride,
// 64-bit linear index, on pyca's current stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "ops/cuda_common.cuh"
#include "pyca/math/differential.h"
#include "pyca/runtime.h"

namespace pyca {
namespace cuda_impl {
namespace differential_detail {

constexpr int kBlock = 256;

template <class F>
__global__ void voxelKernel(math::Grid3 g, F f) {
  const std::size_t nx = std::size_t(g.nx), nxy = nx * std::size_t(g.ny);
  const std::size_t n = nxy * std::size_t(g.nz);
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t z = i / nxy, r = i - z * nxy;
    const std::size_t y = r / nx, x = r - y * nx;
    f(i, int(x), int(y), int(z));
  }
}

// Launches voxelKernel over g (nothing for an empty grid); op is named in launch errors.
template <class F>
void launchVoxels(const math::Grid3& g, const F& f, const char* op) {
  const std::size_t n = std::size_t(g.nx) * std::size_t(g.ny) * std::size_t(g.nz);
  if (n == 0) return;
  voxelKernel<<<blocksFor(n, kBlock), kBlock, 0, stream()>>>(g, f);
  pyca::checkLaunch(op);
}

}  // namespace differential_detail
}  // namespace cuda_impl
}  // namespace pyca
