// A block's sum of one double per thread, added to an accumulator in device memory: the kernels that
// reduce in the same pass as they compute (K's Parseval sum in filters_fft.cu and fft_zpass.cuh,
// LDDMMHalveStep in lddmm.cu). cub::BlockReduce, as the reductions (reductions.cu), then one atomic.
#pragma once

#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>

namespace pyca {
namespace cuda_impl {

// Every thread of the block (of Threads threads) calls this with its value v.
template <int Threads>
__device__ __forceinline__ void blockAddSum(double* acc, double v) {
  using BlockReduce = cub::BlockReduce<double, Threads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const double sum = BlockReduce(temp).Sum(v);
  if (threadIdx.x == 0) atomicAdd(acc, sum);
}

}  // namespace cuda_impl
}  // namespace pyca
