// CUDA backend of the lddmm family (ops/lddmm.yaml): one kernel per fused step, the per-voxel math
// in pyca/math/lddmm.h (shared with the CPU loops of core/src/ops/lddmm.cpp). Everything is
// enqueued on pyca::currentStream(); nothing synchronises. Launch shape as the gathers of
// deformation.cu: 32 x 8 threads over x and y, each thread walking runs of kZPerThread consecutive
// slices along z.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "ops/block_sum.cuh"
#include "ops/cuda_common.cuh"
#include "ops/lddmm_cuda.h"
#include "ops/reductions_cuda.h"
#include "pyca/math/lddmm.h"
#include "pyca/runtime.h"

namespace pyca {
namespace cuda_impl {

namespace {

constexpr int kBlockX = 32, kBlockY = 8, kZPerThread = 4, kBlockThreads = kBlockX * kBlockY;

struct Launch {
  dim3 grid, block;
};
Launch launchFor(const Vec3Di& n) {
  Launch l;
  l.block = dim3(kBlockX, kBlockY, 1);
  l.grid = dim3(unsigned((n.x + kBlockX - 1) / kBlockX), unsigned((n.y + kBlockY - 1) / kBlockY),
                unsigned(std::min((n.z + kZPerThread - 1) / kZPerThread, 65535)));
  return l;
}

// Five blocks of 256 threads per SM (at most 48 registers: no spills on sm_90 with 32-bit indices; the
// compiler took 56-64 without the bound, four blocks): the gathers wait on memory, and the fifth block
// hides more of it (H100: 256^3 0.348 -> 0.328 ms, 192 x 224 x 192 0.176 -> 0.168 ms, 128^3 the same;
// benchmarks/lab/notes.md). LDDMMGradStep spills under that bound and runs slower (0.097 -> 0.110 ms
// at 128^3), so it has none.
template <class Index>
__global__ void __launch_bounds__(kBlockThreads, 5)
    transportKernel(math::MutPlanes<3> hOut, float* __restrict__ J, math::Planes<3> h, math::Planes<3> v,
                    const float* __restrict__ im, math::TransportParams P) {
  PYCA_VOXEL_RUNS(P.n, kZPerThread) {
    const std::size_t id = math::linearIndex(x, y, z, P.n);
    math::transportVoxel<Index>(hOut, J, h, v, im, P, x, y, z, id);
  }
}

template <class Index>
__global__ void ssdGradStepKernel(math::MutPlanes<3> mOut, math::Planes<3> m, math::Planes<3> h,
                                  const float* __restrict__ J0, const float* __restrict__ I1,
                                  math::GradStepParams P, math::ComposeOut C) {
  const Vec3Di n(P.g.nx, P.g.ny, P.g.nz);
  PYCA_VOXEL_RUNS(n, kZPerThread) {
    const std::size_t id = math::linearIndex(x, y, z, n);
    math::gradStepVoxel<Index>(mOut, m, h, J0, I1, P, C, x, y, z, id);
  }
}

template <class Index>
__global__ void composeKernel(math::MutPlanes<3> hOut, math::Planes<3> h, math::Planes<3> v,
                              math::ComposeParams P) {
  PYCA_VOXEL_RUNS(P.n, kZPerThread) {
    const std::size_t id = math::linearIndex(x, y, z, P.n);
    math::composeVoxel<Index>(hOut, h, v, P, x, y, z, id);
  }
}

constexpr int kHalveThreads = 256;

template <class Index>
__global__ void __launch_bounds__(kHalveThreads)
    halveKernel(float* m, const float* mOld, float* v, const float* vOld, Index n, double* acc) {
  double s = 0.0;
  for (Index i = Index(blockIdx.x) * kHalveThreads + threadIdx.x; i < n;
       i += Index(gridDim.x) * kHalveThreads)
    s += math::halveElement(m, mOld, v, vOld, i);
  blockAddSum<kHalveThreads>(acc, s);
}

}  // namespace

void transportStep(float* const hOut[3], float* J, const float* const h[3], const float* const v[3],
                   const float* im, const math::TransportParams& P, const char* op) {
  if (math::nVoxOf(P.n) == 0) return;
  const Launch l = launchFor(P.n);
  const auto o = math::mutPlanes<3>(hOut);
  const auto hp = math::planes<3>(h), vp = math::planes<3>(v);
  if (indices32(P.n) && indices32(P.nIm)) {
    transportKernel<std::uint32_t><<<l.grid, l.block, 0, stream()>>>(o, J, hp, vp, im, P);
  } else {
    transportKernel<std::size_t><<<l.grid, l.block, 0, stream()>>>(o, J, hp, vp, im, P);
  }
  checkLaunch(op);
}

void ssdGradStep(float* const mOut[3], const float* const m[3], const float* const h[3], const float* J0,
                 const float* I1, const math::GradStepParams& P, const math::ComposeOut& C, const char* op) {
  const Vec3Di n(P.g.nx, P.g.ny, P.g.nz);
  if (math::nVoxOf(n) == 0) return;
  const Launch l = launchFor(n);
  const auto o = math::mutPlanes<3>(mOut);
  const auto mp = math::planes<3>(m), hp = math::planes<3>(h);
  if (indices32(n)) {
    ssdGradStepKernel<std::uint32_t><<<l.grid, l.block, 0, stream()>>>(o, mp, hp, J0, I1, P, C);
  } else {
    ssdGradStepKernel<std::size_t><<<l.grid, l.block, 0, stream()>>>(o, mp, hp, J0, I1, P, C);
  }
  checkLaunch(op);
}

void composeStep(float* const hOut[3], const float* const h[3], const float* const v[3],
                 const math::ComposeParams& P, const char* op) {
  if (math::nVoxOf(P.n) == 0) return;
  const Launch l = launchFor(P.n);
  const auto o = math::mutPlanes<3>(hOut);
  const auto hp = math::planes<3>(h), vp = math::planes<3>(v);
  if (indices32(P.n)) {
    composeKernel<std::uint32_t><<<l.grid, l.block, 0, stream()>>>(o, hp, vp, P);
  } else {
    composeKernel<std::size_t><<<l.grid, l.block, 0, stream()>>>(o, hp, vp, P);
  }
  checkLaunch(op);
}

void halveStep(float* m, const float* mOld, float* v, const float* vOld, std::size_t n, double* sum,
               const char* op) {
  *sum = 0.0;
  if (n == 0) return;
  Scratch acc(sizeof(double), op);
  check(cudaMemsetAsync(acc.p, 0, sizeof(double), stream()), op, "cudaMemsetAsync");
  // A grid-stride loop over enough blocks to fill the card; one atomic per block.
  const unsigned blocks = unsigned(std::min<std::size_t>((n + kHalveThreads - 1) / kHalveThreads, 8192));
  if (n < (std::size_t(1) << 32) - std::size_t(blocks) * kHalveThreads) {
    halveKernel<std::uint32_t>
        <<<blocks, kHalveThreads, 0, stream()>>>(m, mOld, v, vOld, std::uint32_t(n), acc.as<double>());
  } else {
    halveKernel<std::size_t><<<blocks, kHalveThreads, 0, stream()>>>(m, mOld, v, vOld, n, acc.as<double>());
  }
  checkLaunch(op);
  *sum = takeSum(op, acc.as<double>());
}

}  // namespace cuda_impl
}  // namespace pyca
