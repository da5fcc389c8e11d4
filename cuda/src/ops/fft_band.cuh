// The kernel K on a band (FluidKernelFFT.setBand): the passes along y, in shared memory, that let
// K skip the frequencies outside the band (docs/design/fluid-fft.md). cuFFT transforms along x
// (real to complex, every row); yPassKernel<NY, false> transforms along y only the columns kx <=
// bx and keeps the rows |ky| <= by; the z pass (fft_zpass.cuh, ZColumns) runs on those columns
// alone; yPassKernel<NY, true> brings them back along y; zeroColumnsKernel writes zeros in the
// columns kx > bx; cuFFT transforms back along x. Everything in place in the half spectra (layout of
// fft_zpass.cuh), with the four-step transforms of the z pass (zPassStep) along y.
#pragma once

#include <type_traits>

#include "ops/fft_zpass.cuh"

namespace pyca {
namespace cuda_impl {

// Column lengths the y passes handle: as the z pass.
__host__ __device__ constexpr bool yPassSupports(int ny) { return zPassSupports(ny); }

// Columns per block of the passes on a band: the most of 16, 8 and 4 (at most zPassColumns<N>(),
// for shared memory) that still gives `target` blocks for `columns` columns (times `perColumn`
// blocks each), else 4: a band leaves few columns, and a few large blocks would leave SMs idle.
inline int bandColumns(int n, long columns, long perColumn, long target) {
  const int most = zPassColumnsFor(n);
  for (int tx = most; tx > 4; tx /= 2) {
    if ((columns + tx - 1) / tx * perColumn >= target) return tx;
  }
  return 4;
}

// Calls f(std::integral_constant<int, tx>) for tx = 16, 8 or 4.
template <class F>
void withColumns(int tx, F&& f) {
  if (tx == 16) {
    f(std::integral_constant<int, 16>{});
  } else if (tx == 8) {
    f(std::integral_constant<int, 8>{});
  } else {
    f(std::integral_constant<int, 4>{});
  }
}

// Block (blockIdx.x: TX consecutive kx from blockIdx.x * TX; blockIdx.y: z). Forward: the columns
// kx < nkx of z-plane z, all NY rows, transformed along y (cuFFT's sign, unnormalised), the band
// rows written back. Inverse: the band rows of the columns kx < nkx (the others 0) transformed back
// along y, all NY rows written (the block's columns from nkx up as 0). Launched on the blocks of the
// columns kx < nkx only: zeroColumnsKernel writes the other columns.
template <int NY, bool INV, int TX>
__global__ void __launch_bounds__(kZPassThreads)
    yPassKernel(cufftComplex* __restrict__ C, std::size_t nCplx, int plane, int nxh, int nkx, int rows,
                int by, const float2* __restrict__ tw) {
  constexpr int R1 = zPassR1<NY>(), R2 = NY / R1;
  extern __shared__ __align__(16) float2 smem[];
  float2* s = smem;                // s[(c * NY + y) * TX + col]
  float2* w = smem + 3 * NY * TX;  // exp(-2 pi i m / NY), m < NY
  const int kx0 = int(blockIdx.x) * TX, z = int(blockIdx.y), t = int(threadIdx.x);
  const std::size_t zOff = std::size_t(z) * std::size_t(plane);
  for (int m = t; m < NY; m += kZPassThreads) w[m] = tw[m];
  // In: every row (forward) or the band rows at their places in the four-step order (inverse: ky =
  // k1 + R1 k2 at position k1 R2 + k2), zeros elsewhere.
  if (INV) {
    for (int idx = t; idx < 3 * NY * TX; idx += kZPassThreads) s[idx] = make_float2(0.f, 0.f);
    __syncthreads();
  }
  const int nIn = INV ? rows : NY;
  for (int idx = t; idx < 3 * nIn * TX; idx += kZPassThreads) {
    const int col = idx % TX, cr = idx / TX, c = cr / nIn, r = cr - c * nIn;
    const int kx = kx0 + col;
    const int y = INV ? bandRow(r, rows, by, NY) : r;
    const int pos = INV ? (y % R1) * R2 + y / R1 : y;
    float2* dst = s + (c * NY + pos) * TX + col;
    if (kx < nkx) {
      __pipeline_memcpy_async(dst, C + (std::size_t(c) * nCplx + zOff + std::size_t(y) * nxh + kx),
                              sizeof(float2));
    } else {
      *dst = make_float2(0.f, 0.f);
    }
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  zPassStep<NY, TX, INV>(s, w, true);
  zPassStep<NY, TX, INV>(s, w, false);
  // Out: the band rows (forward, from the four-step order) or every row (inverse).
  const int nOut = INV ? NY : rows;
  for (int idx = t; idx < 3 * nOut * TX; idx += kZPassThreads) {
    const int col = idx % TX, cr = idx / TX, c = cr / nOut, r = cr - c * nOut;
    const int kx = kx0 + col;
    if (kx >= (INV ? nxh : nkx)) continue;
    const int y = INV ? r : bandRow(r, rows, by, NY);
    const int pos = INV ? y : (y % R1) * R2 + y / R1;
    C[std::size_t(c) * nCplx + zOff + std::size_t(y) * nxh + kx] = s[(c * NY + pos) * TX + col];
  }
}

// Zeros in the columns nkx <= kx < nxh of `rows` consecutive rows of nxh complex values (the three
// half spectra: 3 ny nz rows), which cuFFT's x transform back reads. A warp per row, its lanes along
// the row: the stores of a warp are contiguous (the inverse y pass, whose blocks hold TX columns of
// every row, wrote these columns at about 60% of the copy rate).
__global__ void __launch_bounds__(256)
    zeroColumnsKernel(cufftComplex* __restrict__ C, unsigned rows, int nxh, int nkx) {
  const unsigned lane = threadIdx.x & 31u, warps = gridDim.x * (blockDim.x / 32u);
  for (unsigned r = (blockIdx.x * blockDim.x + threadIdx.x) / 32u; r < rows; r += warps) {
    cufftComplex* row = C + std::size_t(r) * std::size_t(nxh);
    for (int kx = nkx + int(lane); kx < nxh; kx += 32) row[kx] = make_float2(0.f, 0.f);
  }
}

}  // namespace cuda_impl
}  // namespace pyca
