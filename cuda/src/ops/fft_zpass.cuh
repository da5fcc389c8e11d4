// The kernel K's middle pass in one kernel (filters_fft.cu): along z, the forward FFT, the operator
// per frequency (math::fluidApplyAt) and the inverse FFT, on columns held in shared memory. cuFFT
// does the x and y passes (a 2-D plan per z-plane); each of its passes, like this one, reads and
// writes the three half spectra once, so K takes 5 passes over them instead of 3 + 1 + 3
// (docs/design/fluid-fft.md).
//
// Layout: component c, frequency (kx, ky, kz) at c * nCplx + kz * plane + ky * nxh + kx, plane =
// ny * nxh. A block takes TX consecutive columns j = ky * nxh + kx (coalesced loads) of all three
// components, NZ (a power of two) values each, into shared memory. The transforms along z are
// four-step FFTs (NZ = R1 * R2, each step a DFT of R1 or R2 points in registers), with cuFFT's sign
// and unnormalised as cuFFT's; the 1 / N is the operator's `scale`. On a band (FluidKernelFFT.setBand)
// the pass runs on the band's columns only (ZColumns), after fft_band.cuh's y pass.
#pragma once

#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <cufft.h>

#include <cstddef>
#include <cstdint>

#include "ops/block_sum.cuh"
#include "pyca/math/filters.h"

namespace pyca {
namespace cuda_impl {

// Column lengths this pass handles (other grids take cuFFT's 3-D transforms).
__host__ __device__ constexpr bool zPassSupports(int nz) {
  return nz >= 8 && nz <= 256 && (nz & (nz - 1)) == 0;
}
// Columns per block at most, for columns of n points: 128 bytes of each z-row for n <= 128, 64 above
// (shared memory).
__host__ __device__ constexpr int zPassColumnsFor(int n) { return n <= 128 ? 16 : 8; }
template <int NZ>
__host__ __device__ constexpr int zPassColumns() {
  return zPassColumnsFor(NZ);
}
// TX columns a block, or the most that columns of N points allow.
template <int N, int TX>
__host__ __device__ constexpr int zPassWidth() {
  return TX <= zPassColumns<N>() ? TX : zPassColumns<N>();
}
// NZ = R1 * R2, the two register transforms of the four-step FFT.
template <int NZ>
__host__ __device__ constexpr int zPassR1() {
  return NZ >= 128 ? 16 : (NZ >= 32 ? 8 : 4);
}
template <int NZ, int TX = zPassColumns<NZ>()>
__host__ __device__ constexpr std::size_t zPassSharedBytes() {
  return std::size_t(3) * NZ * TX * sizeof(float2) + std::size_t(NZ) * sizeof(float2);
}
constexpr int kZPassThreads = 256;

__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ __forceinline__ float2 cmulConj(float2 a, float2 b) {  // a * conj(b)
  return make_float2(a.x * b.x + a.y * b.y, a.y * b.x - a.x * b.y);
}
template <int R>
__host__ __device__ constexpr int bitRev(int i) {
  int r = 0;
  for (int b = 1; b < R; b <<= 1, i >>= 1) r = (r << 1) | (i & 1);
  return r;
}

// exp(-2 pi i m / 16), m < 16: with m known at compile time (the unrolled loops below), a constant.
__device__ __forceinline__ float2 root16(int m) {
  constexpr float c1 = 0.923879532511286756f, s1 = 0.382683432365089772f, h = 0.707106781186547524f;
  switch (m & 15) {
    case 0:
      return make_float2(1.f, 0.f);
    case 1:
      return make_float2(c1, -s1);
    case 2:
      return make_float2(h, -h);
    case 3:
      return make_float2(s1, -c1);
    case 4:
      return make_float2(0.f, -1.f);
    case 5:
      return make_float2(-s1, -c1);
    case 6:
      return make_float2(-h, -h);
    case 7:
      return make_float2(-c1, -s1);
    case 8:
      return make_float2(-1.f, 0.f);
    case 9:
      return make_float2(-c1, s1);
    case 10:
      return make_float2(-h, h);
    case 11:
      return make_float2(-s1, c1);
    case 12:
      return make_float2(0.f, 1.f);
    case 13:
      return make_float2(s1, c1);
    case 14:
      return make_float2(h, h);
    default:
      return make_float2(c1, s1);
  }
}

// In-register DFT of R points (R a power of two <= 16), in natural order in and out: sum_n a[n]
// exp(-+2 pi i n k / R), the sign + when INV.
template <int R, bool INV>
__device__ __forceinline__ void dftRegisters(float2 (&a)[R]) {
  float2 b[R];
#pragma unroll
  for (int i = 0; i < R; ++i) b[i] = a[bitRev<R>(i)];
#pragma unroll
  for (int half = 1; half < R; half <<= 1) {
#pragma unroll
    for (int k = 0; k < R / 2; ++k) {
      const int kk = k & (half - 1), i = (k - kk) * 2 + kk;
      const float2 t = root16(kk * (16 / (2 * half)));
      const float2 v = INV ? cmulConj(b[i + half], t) : cmul(b[i + half], t);
      const float2 u = b[i];
      b[i] = make_float2(u.x + v.x, u.y + v.y);
      b[i + half] = make_float2(u.x - v.x, u.y - v.y);
    }
  }
#pragma unroll
  for (int i = 0; i < R; ++i) a[i] = b[i];
}

// The four steps on the columns in shared memory, each in place per thread (a __syncthreads()
// between steps). Forward, NZ = R1 * R2: (1) for each n2, the R1-point DFT over positions n2 + R2 n1,
// times exp(-2 pi i n2 k1 / NZ), back to positions n2 + R2 k1; (2) for each k1, the R2-point DFT
// over positions k1 R2 + n2, back to positions k1 R2 + k2: frequency k1 + R1 k2 ends at position
// k1 R2 + k2. The inverse runs the same steps backwards with the conjugate roots, from that order to
// the natural one.
template <int NZ, int TX, bool INV>
__device__ __forceinline__ void zPassStep(float2* s, const float2* w, bool first) {
  constexpr int R1 = zPassR1<NZ>(), R2 = NZ / R1;
  // The R1-point transforms (forward step 1, inverse step 2): for each n2, over n2 + R2 n1.
  // The R2-point transforms (forward step 2, inverse step 1): for each k1, over k1 R2 + n2.
  const bool strided = INV ? !first : first;
  const int items = 3 * TX * (strided ? R2 : R1);
  for (int it = int(threadIdx.x); it < items; it += kZPassThreads) {
    const int col = it % TX, rest = it / TX;
    if (strided) {
      const int c = rest / R2, n2 = rest - c * R2;
      float2* x = s + c * NZ * TX + col;
      float2 a[R1];
#pragma unroll
      for (int n1 = 0; n1 < R1; ++n1) a[n1] = x[(n2 + R2 * n1) * TX];
      if (INV) {
#pragma unroll
        for (int k1 = 0; k1 < R1; ++k1) a[k1] = cmulConj(a[k1], w[n2 * k1]);
      }
      dftRegisters<R1, INV>(a);
      if (!INV) {
#pragma unroll
        for (int k1 = 0; k1 < R1; ++k1) a[k1] = cmul(a[k1], w[n2 * k1]);
      }
#pragma unroll
      for (int n1 = 0; n1 < R1; ++n1) x[(n2 + R2 * n1) * TX] = a[n1];
    } else {
      const int c = rest / R1, k1 = rest - c * R1;
      float2* x = s + (c * NZ + k1 * R2) * TX + col;
      float2 a[R2];
#pragma unroll
      for (int n2 = 0; n2 < R2; ++n2) a[n2] = x[n2 * TX];
      dftRegisters<R2, INV>(a);
#pragma unroll
      for (int n2 = 0; n2 < R2; ++n2) x[n2 * TX] = a[n2];
    }
  }
  __syncthreads();
}

// The operator at frequency (kx, ky, kz) on the three components (re, im), in place, from the
// unscaled axis tables tab (t_x, s_x: nx / 2 + 1 each; t_y, s_y: ny; t_z, s_z: nz) and the inverse
// spacings; returns the frequency's share of <in, out> (math::parsevalTerm) when dot, else 0. Used
// by zPassKernel and by filters_fft.cu's fluidKernel.
__device__ __forceinline__ double fluidAtFrequency(const math::FluidParams& P, const float* __restrict__ tab,
                                                   int nx, int ny, int nz, int kx, int ky, int kz, float isx,
                                                   float isy, float isz, float scale, bool dot, float* re,
                                                   float* im) {
  const int nxh = nx / 2 + 1;
  const float* tx = tab;
  const float* sxT = tx + nxh;
  const float* ty = sxT + nxh;
  const float* syT = ty + ny;
  const float* tz = syT + ny;
  const float* szT = tz + nz;
  const float re0[3] = {re[0], re[1], re[2]}, im0[3] = {im[0], im[1], im[2]};
  math::fluidApplyBanded(P, kx, ky, kz, nx, ny, nz, __ldg(tx + kx) * isx * isx, __ldg(ty + ky) * isy * isy,
                         __ldg(tz + kz) * isz * isz, __ldg(sxT + kx) * isx, __ldg(syT + ky) * isy,
                         __ldg(szT + kz) * isz, scale, re, im);
  return dot ? math::parsevalTerm(kx, nx, re0, im0, re, im) : 0.0;
}

// The columns of the z pass: column q (0 <= q < perRow * rows) is frequency (kx, ky) = (q % perRow,
// the row q / perRow), at j = ky * nxh + kx of a z-plane. Every column: perRow = nxh, rows = ny, by =
// ny - 1 (then j = q). A band (FluidKernelFFT.setBand): perRow = bx + 1, rows = 2 by + 1, the rows
// ky = 0..by, then ny - by..ny - 1.
// Rows of a band: row r (0 <= r < rows) is ky = r for r <= by, else ny - (rows - r).
__host__ __device__ __forceinline__ int bandRow(int r, int rows, int by, int ny) {
  return r <= by ? r : ny - (rows - r);
}

struct ZColumns {
  int perRow, rows, by, ny, nxh;
  bool all;  // every column: j = q
  static ZColumns every(int nxh, int ny) { return {nxh, ny, ny - 1, ny, nxh, true}; }
  __device__ __forceinline__ int count() const { return perRow * rows; }
  __device__ __forceinline__ void at(int q, int& kx, int& ky) const {
    const int r = q / perRow;
    kx = q - r * perRow;
    ky = bandRow(r, rows, by, ny);
  }
  __device__ __forceinline__ int j(int q) const {
    if (all) return q;
    int kx, ky;
    at(q, kx, ky);
    return ky * nxh + kx;
  }
};

// dot (may be null): adds <in, out> (math::parsevalTerm over the frequencies) to *dot.
// TX: columns per block (fewer than zPassColumns<NZ>() where a band leaves few columns: more blocks).
template <int NZ, int TX = zPassColumns<NZ>()>
__global__ void __launch_bounds__(kZPassThreads)
    zPassKernel(cufftComplex* __restrict__ C, std::size_t nCplx, int plane, int nx, int ny, ZColumns cols,
                const float2* __restrict__ tw, const float* __restrict__ tab, float isx, float isy, float isz,
                math::FluidParams P, float scale, double* __restrict__ dot) {
  constexpr int R1 = zPassR1<NZ>(), R2 = NZ / R1;
  extern __shared__ __align__(16) float2 smem[];
  float2* s = smem;                // s[(c * NZ + z) * TX + col]
  float2* w = smem + 3 * NZ * TX;  // exp(-2 pi i m / NZ), m < NZ
  const int q0 = int(blockIdx.x) * TX, nq = cols.count();
  const int t = int(threadIdx.x);

  for (int m = t; m < NZ; m += kZPassThreads) w[m] = tw[m];
  // The columns into shared memory by asynchronous copies (cp.async), all of a thread's in flight at
  // once: two columns (16 bytes) a copy where they are neighbours in memory and 16-byte aligned, else
  // one.
  static_assert(TX % 2 == 0, "the copies take columns in pairs");
  const bool pairs = plane % 2 == 0 && nCplx % 2 == 0 && reinterpret_cast<std::uintptr_t>(C) % 16 == 0;
  for (int idx = 2 * t; idx < 3 * NZ * TX; idx += 2 * kZPassThreads) {
    const int col = idx % TX, cz = idx / TX, c = cz / NZ, z = cz - c * NZ;
    const int q = q0 + col;
    const int j = q < nq ? cols.j(q) : 0;
    const cufftComplex* base = C + (std::size_t(c) * nCplx + std::size_t(z) * std::size_t(plane));
    if (pairs && q + 1 < nq && j % 2 == 0 && cols.j(q + 1) == j + 1) {
      __pipeline_memcpy_async(s + idx, base + j, 2 * sizeof(float2));
    } else {
      for (int k = 0; k < 2; ++k) {
        if (q + k < nq) {
          __pipeline_memcpy_async(s + idx + k, base + cols.j(q + k), sizeof(float2));
        } else {
          s[idx + k] = make_float2(0.f, 0.f);
        }
      }
    }
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  zPassStep<NZ, TX, false>(s, w, true);
  zPassStep<NZ, TX, false>(s, w, false);

  // The operator per frequency, its three components together (kz = k1 + R1 k2 at k1 R2 + k2).
  double sum = 0.0;
  for (int idx = t; idx < NZ * TX; idx += kZPassThreads) {
    const int col = idx % TX, pos = idx / TX, q = q0 + col;
    if (q >= nq) continue;
    const int k1 = pos / R2, kz = k1 + R1 * (pos - k1 * R2);
    int kx, ky;
    cols.at(q, kx, ky);
    float re[3], im[3];
    for (int c = 0; c < 3; ++c) {
      const float2 v = s[(c * NZ + pos) * TX + col];
      re[c] = v.x;
      im[c] = v.y;
    }
    sum += fluidAtFrequency(P, tab, nx, ny, NZ, kx, ky, kz, isx, isy, isz, scale, dot != nullptr, re, im);
    for (int c = 0; c < 3; ++c) s[(c * NZ + pos) * TX + col] = make_float2(re[c], im[c]);
  }
  if (dot) blockAddSum<kZPassThreads>(dot, sum);
  __syncthreads();
  zPassStep<NZ, TX, true>(s, w, true);
  zPassStep<NZ, TX, true>(s, w, false);

  for (int idx = 2 * t; idx < 3 * NZ * TX; idx += 2 * kZPassThreads) {  // back in pairs as they came
    const int col = idx % TX, cz = idx / TX, c = cz / NZ, z = cz - c * NZ;
    const int q = q0 + col;
    const int j = q < nq ? cols.j(q) : 0;
    cufftComplex* base = C + (std::size_t(c) * nCplx + std::size_t(z) * std::size_t(plane));
    if (pairs && q + 1 < nq && j % 2 == 0 && cols.j(q + 1) == j + 1) {
      *reinterpret_cast<float4*>(base + j) = *reinterpret_cast<const float4*>(s + idx);
    } else {
      for (int k = 0; k < 2; ++k) {
        if (q + k < nq) base[cols.j(q + k)] = s[idx + k];
      }
    }
  }
}

}  // namespace cuda_impl
}  // namespace pyca
