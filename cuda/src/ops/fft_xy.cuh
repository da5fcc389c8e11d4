// The kernel K on a band, x and y in one pass each way (FluidKernelFFT.setBand; filters_fft.cu;
// docs/design/fluid-fft.md, "x and y together"). On grids with nx = ny = N, a power of two from 32
// to 256, where the band's columns fit in shared memory: xyForwardKernel reads a z-plane of one
// component, transforms its rows along x, keeps the columns kx < nkx, transforms them along y and
// writes the band's rows |ky| <= by into the half spectrum (layout of fft_zpass.cuh); the z pass
// runs on the band as before; xyInverseKernel reads the band's rows back, transforms them along y,
// rebuilds each row's spectrum (the columns kx < nkx, their Hermitian mirrors N - kx, zeros
// elsewhere), transforms it back along x and writes the plane. So K reads and writes the field once
// each and touches only the band of the spectrum: no cuFFT pass and no zeros written.
//
// Along x a warp takes two rows at a time as one complex row (a + i b) in registers, V = N / 32
// values a lane (x = lane + 32 j): a V-point DFT in registers, the twiddles, and a 32-point FFT
// across the lanes by shuffles (frequency k1 + V k2 ends in lane bitrev(k2)); the two rows' spectra
// are then (Z[k] + conj Z[N - k]) / 2 and (Z[k] - conj Z[N - k]) / 2i. The way back is the same
// steps reversed, with the imaginary parts of kx = 0 and N / 2 dropped as cuFFT's C2R drops them.
// Along y, the band's columns in shared memory, zPassStep's layout: column kx, row y at ((kx / 8) N
// + y) 8 + kx % 8, 24 columns a call. cuFFT's sign, unnormalised (the operator's `scale` is the 1 / n).
#pragma once

#include <cstddef>

#include "ops/fft_zpass.cuh"

namespace pyca {
namespace cuda_impl {

constexpr int kXYCols = 8;             // columns a group of zPassStep's layout
constexpr int kXYGroup = 3 * kXYCols;  // columns one zPassStep call transforms
constexpr int kXYWarps = kZPassThreads / 32;
__host__ __device__ constexpr bool xySupports(int n) { return n >= 32 && zPassSupports(n); }
__host__ __device__ constexpr int xyCalls(int nkx) { return (nkx + kXYGroup - 1) / kXYGroup; }
// Shared memory of both kernels for N points along x and y and nkx band columns: the columns, the
// twiddles, and each warp's Z[k] and Z[N - k] (k < nkx).
inline std::size_t xySharedBytes(int n, int nkx) {
  return (std::size_t(xyCalls(nkx)) * kXYGroup * n + std::size_t(n) + std::size_t(2 * kXYWarps) * nkx) *
         sizeof(float2);
}
// Blocks an SM should hold (registers; zPassStep's 16-point transforms need 64 for their values).
template <int N>
__host__ __device__ constexpr int xyBlocks() {
  return N >= 256 ? 2 : 3;
}

__device__ __forceinline__ int xySlot(int n, int kx, int y) {
  return ((kx >> 3) * n + y) * kXYCols + (kx & 7);
}
// Where zPassStep's forward transform leaves frequency k along y (k1 + R1 k2 at k1 R2 + k2).
template <int N>
__device__ __forceinline__ int xyPos(int k) {
  constexpr int R1 = zPassR1<N>(), R2 = N / R1;
  return (k % R1) * R2 + k / R1;
}
__device__ __forceinline__ float2 xyShuffle(float2 v, int mask) {
  return make_float2(__shfl_xor_sync(0xffffffffu, v.x, mask), __shfl_xor_sync(0xffffffffu, v.y, mask));
}

// The warp's complex row a (a[j] at x = lane + 32 j, w the N twiddles exp(-2 pi i m / N)) to its
// spectrum: a[k1] = Z[k1 + V bitrev5(lane)].
template <int N>
__device__ __forceinline__ void xRowForward(float2 (&a)[N / 32], const float2* w, int lane) {
  constexpr int V = N / 32;
  dftRegisters<V, false>(a);
#pragma unroll
  for (int k1 = 1; k1 < V; ++k1) a[k1] = cmul(a[k1], w[lane * k1]);
#pragma unroll
  for (int h = 16; h >= 1; h >>= 1) {  // decimation in frequency across the lanes
    const bool up = (lane & h) != 0;
    const float2 tw = w[(lane & (h - 1)) * (N / (2 * h))];
#pragma unroll
    for (int k1 = 0; k1 < V; ++k1) {
      const float2 p = xyShuffle(a[k1], h), v = a[k1];
      a[k1] = up ? cmul(make_float2(p.x - v.x, p.y - v.y), tw) : make_float2(v.x + p.x, v.y + p.y);
    }
  }
}
// The inverse of xRowForward, unnormalised (times N): from a[k1] = Z[k1 + V bitrev5(lane)] to the
// row, a[j] at x = lane + 32 j.
template <int N>
__device__ __forceinline__ void xRowInverse(float2 (&a)[N / 32], const float2* w, int lane) {
  constexpr int V = N / 32;
#pragma unroll
  for (int h = 1; h <= 16; h <<= 1) {  // xRowForward's stages undone, in reverse (each times 2)
    const bool up = (lane & h) != 0;
    const float2 tw = w[(lane & (h - 1)) * (N / (2 * h))];
#pragma unroll
    for (int k1 = 0; k1 < V; ++k1) {
      const float2 p = xyShuffle(a[k1], h), v = a[k1];
      const float2 q = cmulConj(up ? v : p, tw);
      a[k1] = up ? make_float2(p.x - q.x, p.y - q.y) : make_float2(v.x + q.x, v.y + q.y);
    }
  }
#pragma unroll
  for (int k1 = 1; k1 < V; ++k1) a[k1] = cmulConj(a[k1], w[lane * k1]);
  dftRegisters<V, true>(a);
}

// Block (blockIdx.x: z, blockIdx.y: component c). in: the three components, nReal apart; C: the half
// spectra, nCplx apart. Writes the rows |ky| <= by (`rows` of them, bandRow) of the columns kx < nkx.
template <int N>
__global__ void __launch_bounds__(kZPassThreads, xyBlocks<N>())
    xyForwardKernel(const float* __restrict__ in, cufftComplex* __restrict__ C, std::size_t nReal,
                    std::size_t nCplx, int nkx, int rows, int by, const float2* __restrict__ tw) {
  constexpr int V = N / 32;
  extern __shared__ __align__(16) float2 smem[];
  const int calls = xyCalls(nkx), t = int(threadIdx.x), lane = t & 31, warp = t >> 5;
  const int z = int(blockIdx.x), c = int(blockIdx.y);
  float2* B = smem;
  float2* w = B + calls * kXYGroup * N;
  float2* lo = w + N + warp * 2 * nkx;  // Z[k], k < nkx
  float2* hi = lo + nkx;                // Z[N - m], 0 < m < nkx
  for (int m = t; m < N; m += kZPassThreads) w[m] = tw[m];
  const int spare = calls * kXYGroup - nkx;  // B's columns past the band: zeros (transformed, never read)
  for (int it = t; it < spare * N; it += kZPassThreads)
    B[xySlot(N, nkx + it % spare, it / spare)] = make_float2(0.f, 0.f);
  __syncthreads();

  const float* src = in + std::size_t(c) * nReal + std::size_t(z) * N * N;
  const int k2 = int(__brev(unsigned(lane)) >> 27);
  float ra[V], rb[V];  // the warp's next two rows, in flight while it transforms these
  auto fetch = [&](int y) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      ra[j] = __ldg(src + y * N + lane + 32 * j);
      rb[j] = __ldg(src + (y + 1) * N + lane + 32 * j);
    }
  };
  if (2 * warp < N) fetch(2 * warp);
  for (int y = 2 * warp; y < N; y += 2 * kXYWarps) {
    float2 a[V];
#pragma unroll
    for (int j = 0; j < V; ++j) a[j] = make_float2(ra[j], rb[j]);
    if (y + 2 * kXYWarps < N) fetch(y + 2 * kXYWarps);
    xRowForward<N>(a, w, lane);
#pragma unroll
    for (int k1 = 0; k1 < V; ++k1) {
      const int k = k1 + V * k2, m = N - k;
      if (k < nkx) lo[k] = a[k1];
      if (m > 0 && m < nkx) hi[m] = a[k1];
    }
    __syncwarp();
    for (int k = lane; k < nkx; k += 32) {  // rows y and y + 1 apart, at column k
      const float2 p = lo[k], q = k == 0 ? p : hi[k];
      B[xySlot(N, k, y)] = make_float2(0.5f * (p.x + q.x), 0.5f * (p.y - q.y));
      B[xySlot(N, k, y + 1)] = make_float2(0.5f * (p.y + q.y), 0.5f * (q.x - p.x));
    }
    __syncwarp();
  }
  __syncthreads();
  for (int k = 0; k < calls; ++k) {  // along y
    zPassStep<N, kXYCols, false>(B + k * kXYGroup * N, w, true);
    zPassStep<N, kXYCols, false>(B + k * kXYGroup * N, w, false);
  }
  constexpr int nxh = N / 2 + 1;
  cufftComplex* dst = C + std::size_t(c) * nCplx + std::size_t(z) * N * nxh;
  for (int it = t; it < rows * nkx; it += kZPassThreads) {
    const int kx = it % nkx, y = bandRow(it / nkx, rows, by, N);
    dst[y * nxh + kx] = B[xySlot(N, kx, xyPos<N>(y))];
  }
}

// The way back (same blocks): the band's rows of the columns kx < nkx, from C, to the real plane of
// component c in out (nReal apart), every value written.
template <int N>
__global__ void __launch_bounds__(kZPassThreads, xyBlocks<N>())
    xyInverseKernel(const cufftComplex* __restrict__ C, float* __restrict__ out, std::size_t nReal,
                    std::size_t nCplx, int nkx, int rows, int by, const float2* __restrict__ tw) {
  constexpr int V = N / 32;
  extern __shared__ __align__(16) float2 smem[];
  const int calls = xyCalls(nkx), t = int(threadIdx.x), lane = t & 31, warp = t >> 5;
  const int z = int(blockIdx.x), c = int(blockIdx.y);
  float2* B = smem;
  float2* w = B + calls * kXYGroup * N;
  for (int m = t; m < N; m += kZPassThreads) w[m] = tw[m];
  for (int it = t; it < calls * kXYGroup * N; it += kZPassThreads) B[it] = make_float2(0.f, 0.f);
  __syncthreads();
  constexpr int nxh = N / 2 + 1;
  const cufftComplex* src = C + std::size_t(c) * nCplx + std::size_t(z) * N * nxh;
  for (int it = t; it < rows * nkx; it += kZPassThreads) {  // in the four-step order along y
    const int kx = it % nkx, y = bandRow(it / nkx, rows, by, N);
    B[xySlot(N, kx, xyPos<N>(y))] = src[y * nxh + kx];
  }
  __syncthreads();
  for (int k = 0; k < calls; ++k) {
    zPassStep<N, kXYCols, true>(B + k * kXYGroup * N, w, true);
    zPassStep<N, kXYCols, true>(B + k * kXYGroup * N, w, false);
  }
  float* dst = out + std::size_t(c) * nReal + std::size_t(z) * N * N;
  const int k2 = int(__brev(unsigned(lane)) >> 27);
  for (int y = 2 * warp; y < N; y += 2 * kXYWarps) {
    float2 a[V];  // Z[k] = A[k] + i B[k] of rows y and y + 1, k = k1 + V k2
#pragma unroll
    for (int k1 = 0; k1 < V; ++k1) {
      const int k = k1 + V * k2;
      float2 p = make_float2(0.f, 0.f), q = p;
      if (k < nkx) {
        p = B[xySlot(N, k, y)];
        q = B[xySlot(N, k, y + 1)];
        if (k == 0 || 2 * k == N) p.y = q.y = 0.f;  // (as cuFFT's C2R)
      } else if (2 * k > N && N - k < nkx) {
        p = B[xySlot(N, N - k, y)];
        q = B[xySlot(N, N - k, y + 1)];
        p.y = -p.y;
        q.y = -q.y;
      }
      a[k1] = make_float2(p.x - q.y, p.y + q.x);
    }
    xRowInverse<N>(a, w, lane);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      dst[y * N + lane + 32 * j] = a[j].x;
      dst[(y + 1) * N + lane + 32 * j] = a[j].y;
    }
  }
}

}  // namespace cuda_impl
}  // namespace pyca
