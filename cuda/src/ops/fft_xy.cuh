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
// Along x a warp takes two rows as one complex row (a + i b) in registers (xyPairs such pairs at
// once), V = N / 32 values a lane (x = lane + 32 j): a V-point DFT in registers, the twiddles, and
// a 32-point FFT across the lanes by shuffles (frequency k1 + V k2 ends in lane bitrev(k2)); the two
// rows' spectra are then (Z[k] + conj Z[N - k]) / 2 and (Z[k] - conj Z[N - k]) / 2i. The way back is
// the same steps reversed, with the imaginary parts of kx = 0 and N / 2 dropped as cuFFT's C2R drops
// them. Along y, the band's columns in shared memory, zPassStep's layout: column kx, row y at
// ((kx / 8) N + y) 8 + kx % 8, 24 columns a call. cuFFT's sign, unnormalised (the operator's
// `scale` is the 1 / n).
#pragma once

#include <cstddef>
#include <type_traits>

#include "ops/fft_zpass.cuh"

namespace pyca {
namespace cuda_impl {

constexpr int kXYCols = 8;             // columns a group of zPassStep's layout
constexpr int kXYGroup = 3 * kXYCols;  // columns one zPassStep call transforms
constexpr int kXYWarps = kZPassThreads / 32;
__host__ __device__ constexpr bool xySupports(int n) { return n >= 32 && zPassSupports(n); }
__host__ __device__ constexpr int xyCalls(int nkx) { return (nkx + kXYGroup - 1) / kXYGroup; }
// Pairs of rows a warp transforms at once (independent shuffles to overlap; registers at N = 256).
__host__ __device__ constexpr int xyPairs(int n) { return n >= 256 ? 1 : 2; }
// Shared memory of both kernels for N points along x and y and nkx band columns: the columns, the
// twiddles, and each warp's Z[k] and Z[N - k] (k < nkx) of each pair.
inline std::size_t xySharedBytes(int n, int nkx) {
  return (std::size_t(xyCalls(nkx)) * kXYGroup * n + std::size_t(n) +
          std::size_t(2 * kXYWarps * xyPairs(n)) * nkx) *
         sizeof(float2);
}
// Blocks an SM should hold (registers; zPassStep's 16-point transforms need 64 for their values).
template <int N>
__host__ __device__ constexpr int xyBlocks() {
  return 3;
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

// One stage, at lane distance h, of the 32-point FFT across the lanes of the M rows a[m]: forward,
// the decimation in frequency (lower lane v + p, upper (p - v) W, W = exp(-2 pi i (lane mod h) /
// 2h)); INV, that stage undone, times 2 (lower v + p conj W, upper p - v conj W).
template <int N, int M, bool INV>
__device__ __forceinline__ void xLaneStage(float2 (&a)[M][N / 32], const float2* w, int lane, int h) {
  const bool up = (lane & h) != 0;
  const float2 tw = w[(lane & (h - 1)) * (N / (2 * h))];
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int k1 = 0; k1 < N / 32; ++k1) {
      const float2 p = xyShuffle(a[m][k1], h), v = a[m][k1];
      if (INV) {
        const float2 q = cmulConj(up ? v : p, tw);
        a[m][k1] = up ? make_float2(p.x - q.x, p.y - q.y) : make_float2(v.x + q.x, v.y + q.y);
      } else {
        a[m][k1] = up ? cmul(make_float2(p.x - v.x, p.y - v.y), tw) : make_float2(v.x + p.x, v.y + p.y);
      }
    }
  }
}

// The warp's M complex rows a[m] (a[m][j] at x = lane + 32 j; w the N twiddles exp(-2 pi i m / N))
// to their spectra, a[m][k1] = Z[k1 + V bitrev5(lane)]: per lane the V-point DFTs over j and the
// twiddles exp(-2 pi i lane k1 / N), then the 32-point FFT across the lanes. INV: the inverse,
// unnormalised (times N), the same steps undone in reverse.
template <int N, int M, bool INV>
__device__ __forceinline__ void xRows(float2 (&a)[M][N / 32], const float2* w, int lane) {
  constexpr int V = N / 32;
  if (INV) {
#pragma unroll
    for (int h = 1; h <= 16; h <<= 1) xLaneStage<N, M, true>(a, w, lane, h);
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    if (!INV) dftRegisters<V, false>(a[m]);
#pragma unroll
    for (int k1 = 1; k1 < V; ++k1)
      a[m][k1] = INV ? cmulConj(a[m][k1], w[lane * k1]) : cmul(a[m][k1], w[lane * k1]);
    if (INV) dftRegisters<V, true>(a[m]);
  }
  if (!INV) {
#pragma unroll
    for (int h = 16; h >= 1; h >>= 1) xLaneStage<N, M, false>(a, w, lane, h);
  }
}

// What both kernels' blocks share: a block per z-plane (blockIdx.x) and component (blockIdx.y), the
// band's columns B and the twiddles w in shared memory (w loaded by the constructor).
template <int N>
struct XYBlock {
  int calls, t, lane, warp, z, c;
  float2* B;
  float2* w;
  __device__ XYBlock(float2* smem, int nkx, const float2* __restrict__ tw)
      : calls(xyCalls(nkx)),
        t(int(threadIdx.x)),
        lane(t & 31),
        warp(t >> 5),
        z(int(blockIdx.x)),
        c(int(blockIdx.y)),
        B(smem),
        w(smem + calls * kXYGroup * N) {
    for (int m = t; m < N; m += kZPassThreads) w[m] = tw[m];
  }
  // B's columns transformed along y (zPassStep, 24 columns a call); barriers after.
  template <bool INV>
  __device__ void alongY() const {
    for (int k = 0; k < calls; ++k) {
      zPassStep<N, kXYCols, INV>(B + k * kXYGroup * N, w, true);
      zPassStep<N, kXYCols, INV>(B + k * kXYGroup * N, w, false);
    }
  }
  // The band's rows of the columns kx < nkx between B (the four-step order along y) and the half
  // spectrum of the block's plane (C + c nCplx): into the spectrum for a Spectrum of cufftComplex*,
  // from it for const cufftComplex*.
  template <class Spectrum>
  __device__ void bandRows(Spectrum C, std::size_t nCplx, int nkx, int rows, int by) const {
    constexpr int nxh = N / 2 + 1;
    const auto S = C + std::size_t(c) * nCplx + std::size_t(z) * N * nxh;
    for (int it = t; it < rows * nkx; it += kZPassThreads) {
      const int kx = it % nkx, y = bandRow(it / nkx, rows, by, N);
      float2& b = B[xySlot(N, kx, xyPos<N>(y))];
      if constexpr (std::is_const_v<std::remove_pointer_t<Spectrum>>) {
        b = S[y * nxh + kx];
      } else {
        S[y * nxh + kx] = b;
      }
    }
  }
};

// Block (blockIdx.x: z, blockIdx.y: component c). in: the three components, nReal apart; C: the half
// spectra, nCplx apart. Writes the rows |ky| <= by (`rows` of them, bandRow) of the columns kx < nkx.
template <int N>
__global__ void __launch_bounds__(kZPassThreads, xyBlocks<N>())
    xyForwardKernel(const float* __restrict__ in, cufftComplex* __restrict__ C, std::size_t nReal,
                    std::size_t nCplx, int nkx, int rows, int by, const float2* __restrict__ tw) {
  constexpr int V = N / 32, M = xyPairs(N);
  extern __shared__ __align__(16) float2 smem[];
  const XYBlock<N> blk(smem, nkx, tw);
  const int calls = blk.calls, t = blk.t, lane = blk.lane, warp = blk.warp;
  float2* B = blk.B;
  const float2* w = blk.w;
  float2* lo = blk.w + N + warp * M * 2 * nkx;  // pair m: Z[k] at lo[2 m nkx + k] (k < nkx), Z[N - k]
                                                // at lo[(2 m + 1) nkx + k] (0 < k < nkx)
  const int spare = calls * kXYGroup - nkx;     // B's columns past the band: zeros (transformed, never read)
  for (int it = t; it < spare * N; it += kZPassThreads)
    B[xySlot(N, nkx + it % spare, it / spare)] = make_float2(0.f, 0.f);
  __syncthreads();

  const float* src = in + std::size_t(blk.c) * nReal + std::size_t(blk.z) * N * N;
  const int k2 = int(__brev(unsigned(lane)) >> 27);
  float r[M][2][V];  // the warp's next 2 M rows, in flight while it transforms these
  auto fetch = [&](int y) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        r[m][0][j] = __ldg(src + (y + 2 * m) * N + lane + 32 * j);
        r[m][1][j] = __ldg(src + (y + 2 * m + 1) * N + lane + 32 * j);
      }
    }
  };
  constexpr int kStep = 2 * M * kXYWarps;  // rows the block takes at once
  if (2 * M * warp < N) fetch(2 * M * warp);
  for (int y = 2 * M * warp; y < N; y += kStep) {
    float2 a[M][V];  // rows y + 2 m and y + 2 m + 1 as one complex row
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int j = 0; j < V; ++j) a[m][j] = make_float2(r[m][0][j], r[m][1][j]);
    }
    if (y + kStep < N) fetch(y + kStep);
    xRows<N, M, false>(a, w, lane);
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int k1 = 0; k1 < V; ++k1) {
        const int k = k1 + V * k2;
        if (k < nkx) lo[2 * m * nkx + k] = a[m][k1];
        if (k > 0 && N - k < nkx) lo[(2 * m + 1) * nkx + N - k] = a[m][k1];
      }
    }
    __syncwarp();
    for (int it = lane; it < M * nkx; it += 32) {  // the two rows of pair m apart, at column k
      const int m = it / nkx, k = it - m * nkx, ya = y + 2 * m;
      const float2 p = lo[2 * m * nkx + k], q = k == 0 ? p : lo[(2 * m + 1) * nkx + k];
      B[xySlot(N, k, ya)] = make_float2(0.5f * (p.x + q.x), 0.5f * (p.y - q.y));
      B[xySlot(N, k, ya + 1)] = make_float2(0.5f * (p.y + q.y), 0.5f * (q.x - p.x));
    }
    __syncwarp();
  }
  __syncthreads();
  blk.template alongY<false>();
  blk.bandRows(C, nCplx, nkx, rows, by);
}

// The way back (same blocks): the band's rows of the columns kx < nkx, from C, to the real plane of
// component c in out (nReal apart), every value written.
template <int N>
__global__ void __launch_bounds__(kZPassThreads, xyBlocks<N>())
    xyInverseKernel(const cufftComplex* __restrict__ C, float* __restrict__ out, std::size_t nReal,
                    std::size_t nCplx, int nkx, int rows, int by, const float2* __restrict__ tw) {
  constexpr int V = N / 32, M = xyPairs(N);
  extern __shared__ __align__(16) float2 smem[];
  const XYBlock<N> blk(smem, nkx, tw);
  const int lane = blk.lane, warp = blk.warp;
  const float2* B = blk.B;
  for (int it = blk.t; it < blk.calls * kXYGroup * N; it += kZPassThreads) blk.B[it] = make_float2(0.f, 0.f);
  __syncthreads();
  blk.bandRows(C, nCplx, nkx, rows, by);
  __syncthreads();
  blk.template alongY<true>();
  const float2* w = blk.w;
  float* dst = out + std::size_t(blk.c) * nReal + std::size_t(blk.z) * N * N;
  const int k2 = int(__brev(unsigned(lane)) >> 27);
  for (int y = 2 * M * warp; y < N; y += 2 * M * kXYWarps) {
    float2 a[M][V];  // Z[k] = A[k] + i B[k] of rows ya = y + 2 m and ya + 1, k = k1 + V k2
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int ya = y + 2 * m;
#pragma unroll
      for (int k1 = 0; k1 < V; ++k1) {
        const int k = k1 + V * k2;
        float2 p = make_float2(0.f, 0.f), q = p;
        if (k < nkx) {
          p = B[xySlot(N, k, ya)];
          q = B[xySlot(N, k, ya + 1)];
          if (k == 0 || 2 * k == N) p.y = q.y = 0.f;  // (as cuFFT's C2R)
        } else if (2 * k > N && N - k < nkx) {
          p = B[xySlot(N, N - k, ya)];
          q = B[xySlot(N, N - k, ya + 1)];
          p.y = -p.y;
          q.y = -q.y;
        }
        a[m][k1] = make_float2(p.x - q.y, p.y + q.x);
      }
    }
    xRows<N, M, true>(a, w, lane);
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        dst[(y + 2 * m) * N + lane + 32 * j] = a[m][j].x;
        dst[(y + 2 * m + 1) * N + lane + 32 * j] = a[m][j].y;
      }
    }
  }
}

}  // namespace cuda_impl
}  // namespace pyca
