// CUDA backend of the `similarity` family (ops/similarity.yaml), mutual information: each block splats its
// voxels into a knot table in shared memory (32-bit integer words, math::miSplat), convolves it into the
// bins (math::miTapSum) and adds the result into one global histogram by 64-bit integer atomics (the same
// bits in any order: docs/design/mutual-information.md); then the gradient from the table the host computes
// (pyca/math/similarity.h, miFromHistogram, shared with the CPU) spread onto the knots (math::miSlopeValue).
// LNCC and box sums: similarity.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ops/cuda_common.cuh"
#include "ops/reductions_cuda.h"
#include "ops/similarity_cuda.h"
#include "pyca/math/similarity.h"

namespace pyca {
namespace cuda_impl {
namespace {

constexpr int kBlock = 256;
// Voxels each thread loads before it splats them (loads in flight), and the most voxels one block may
// splat into its 32-bit words: a voxel adds at most kMiFrac^2 = 2^16 to a word, so 65535 voxels cannot
// overflow one.
constexpr int kUnroll = 4;
constexpr std::size_t kMaxBlockVoxels = 65535;

// How a warp adds its 32 voxels' weights: kAggNone each lane its own four; kAggUniform, when all 32 lanes
// share one knot cell (the background), the four sums (__reduce_add_sync: at most 2^21) by one lane, else
// each lane its own; kAggMatch the lanes of each cell (__match_any_sync) summed, one lane per cell adding;
// kAggEdges as kAggUniform, and a voxel whose weights all lie in knot row 0 (I at its range's low end: a
// background) or column 0 (J's) adds them to its lane's private copy of that row or column (32 copies: the
// lanes of a warp never add to one address together, however the background's noise spreads them), merged
// at the end. Every way gives the same integers. Cards before sm_80 (no __reduce_add_sync) add lane by lane.
enum { kAggNone = 0, kAggUniform = 1, kAggMatch = 2, kAggEdges = 3 };

__device__ __forceinline__ void addSplat(unsigned* T, int nfJ, int key, const unsigned* w) {
  unsigned* c = T + key;
  if (w[0]) atomicAdd(c, w[0]);
  if (w[1]) atomicAdd(c + 1, w[1]);
  if (w[2]) atomicAdd(c + nfJ, w[2]);
  if (w[3]) atomicAdd(c + nfJ + 1, w[3]);
}

// A warp's voxels (in: a voxel in this lane) added to its tables T (this lane's copy); EI, EJ: this
// lane's copies of knot row 0 (nfJ words) and column 0 (nfI words), for kAggEdges.
template <int Agg>
__device__ __forceinline__ void addWarp(unsigned* T, unsigned* EI, unsigned* EJ, int nfJ, bool in,
                                        const math::MiSplat& s) {
  const int key = in ? s.key : -1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned lane = threadIdx.x & 31u;
  if (Agg == kAggUniform || Agg == kAggEdges) {
    const int k0 = __shfl_sync(0xffffffffu, key, 0);
    if (__all_sync(0xffffffffu, key == k0)) {
      const unsigned w[4] = {__reduce_add_sync(0xffffffffu, s.w[0]), __reduce_add_sync(0xffffffffu, s.w[1]),
                             __reduce_add_sync(0xffffffffu, s.w[2]), __reduce_add_sync(0xffffffffu, s.w[3])};
      if (lane == 0 && key >= 0) addSplat(T, nfJ, key, w);
      return;
    }
  } else if (Agg == kAggMatch) {
    const unsigned group = __match_any_sync(0xffffffffu, key);
    const unsigned w[4] = {__reduce_add_sync(group, s.w[0]), __reduce_add_sync(group, s.w[1]),
                           __reduce_add_sync(group, s.w[2]), __reduce_add_sync(group, s.w[3])};
    if (lane == unsigned(__ffs(int(group)) - 1) && key >= 0) addSplat(T, nfJ, key, w);
    return;
  }
#endif
  if (key < 0) return;
  if (Agg == kAggEdges && s.uI == 0 && !(s.w[2] | s.w[3])) {
    if (s.w[0]) atomicAdd(EI + s.uJ, s.w[0]);
    if (s.w[1]) atomicAdd(EI + s.uJ + 1, s.w[1]);
  } else if (Agg == kAggEdges && s.uJ == 0 && !(s.w[1] | s.w[3])) {
    if (s.w[0]) atomicAdd(EJ + s.uI, s.w[0]);
    if (s.w[2]) atomicAdd(EJ + s.uI + 1, s.w[2]);
  } else {
    addSplat(T, nfJ, key, s.w);
  }
}

// The joint histogram of the voxels of this block, in units of math::kMiScale, added into H. The block's
// chunks of Block kUnroll voxels are chunks blockIdx.x, blockIdx.x + gridDim.x, ... (every block sees
// brain and background alike), at most kMaxBlockVoxels voxels in all (the launch sees to it). Shared:
// Copies knot tables of nf = nfI nfJ words (lane l adds to copy l % Copies), with kAggEdges 32 copies of
// row 0 (nfJ words each) and of column 0 (nfI words each: the strides odd, so one knot of the 32 copies
// lies in 32 banks); then, after all are summed into the first table, the block's convolution along J
// (nfI x nJ uint64, at word `gAt`).
template <int Block, int Copies, int Agg, bool Masked>
__global__ void __launch_bounds__(Block)
    miHistKnotsKernel(unsigned long long* __restrict__ H, const float* __restrict__ a,
                      const float* __restrict__ b, const float* __restrict__ w, std::size_t nv,
                      math::MiGrid g, int gAt) {
  extern __shared__ unsigned sh[];
  const int nf = g.nfI * g.nfJ;
  const int edges = Agg == kAggEdges ? 32 * (g.nfI + g.nfJ) : 0;
  for (int k = threadIdx.x; k < Copies * nf + edges; k += Block) sh[k] = 0u;
  __syncthreads();
  const unsigned lane = threadIdx.x & 31u;
  unsigned* const T = sh + std::size_t(lane % Copies) * std::size_t(nf);
  unsigned* const EI = sh + std::size_t(Copies) * nf + std::size_t(lane) * g.nfJ;
  unsigned* const EJ = sh + std::size_t(Copies) * nf + std::size_t(32) * g.nfJ + std::size_t(lane) * g.nfI;
  constexpr std::size_t chunk = std::size_t(Block) * kUnroll;
  for (std::size_t c0 = blockIdx.x * chunk; c0 < nv; c0 += std::size_t(gridDim.x) * chunk) {
    const std::size_t i0 = c0 + threadIdx.x;
    float u[kUnroll], v[kUnroll], m[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const std::size_t i = i0 + std::size_t(k) * Block;
      u[k] = i < nv ? a[i] : 0.f;
      v[k] = i < nv ? b[i] : 0.f;
      m[k] = Masked && i < nv ? w[i] : 1.f;
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const math::MiSplat s = math::miSplat(u[k], v[k], Masked ? math::miMaskSteps(m[k]) : math::kMiFrac, g);
      addWarp<Agg>(T, EI, EJ, g.nfJ, i0 + std::size_t(k) * Block < nv, s);
    }
  }
  __syncthreads();
  for (int c = 1; c < Copies; ++c)
    for (int k = threadIdx.x; k < nf; k += Block) sh[k] += sh[std::size_t(c) * nf + k];
  if (Agg == kAggEdges) {  // row 0 from its 32 copies, then column 0 from its
    __syncthreads();
    const unsigned* const rows = sh + std::size_t(Copies) * nf;
    for (int k = threadIdx.x; k < g.nfJ; k += Block) {
      unsigned e = 0u;
      for (int l = 0; l < 32; ++l) e += rows[std::size_t(l) * g.nfJ + k];
      sh[k] += e;
    }
    __syncthreads();
    const unsigned* const cols = rows + std::size_t(32) * g.nfJ;
    for (int k = threadIdx.x; k < g.nfI; k += Block) {
      unsigned e = 0u;
      for (int l = 0; l < 32; ++l) e += cols[std::size_t(l) * g.nfI + k];
      sh[std::size_t(k) * g.nfJ] += e;
    }
  }
  __syncthreads();
  unsigned long long* const G = reinterpret_cast<unsigned long long*>(sh + gAt);
  const int nJ = g.b.nJ;
  for (int k = threadIdx.x; k < g.nfI * nJ; k += Block)
    G[k] = math::miTapSum(sh + std::size_t(k / nJ) * std::size_t(g.nfJ), 1, g.nfJ, k % nJ);
  __syncthreads();
  for (int k = threadIdx.x; k < g.b.nI * nJ; k += Block) {
    const unsigned long long h = math::miTapSum(G + k % nJ, std::size_t(nJ), g.nfI, k / nJ);
    if (h) atomicAdd(H + k, h);
  }
}

// The knot table in global memory (tables too large for shared memory): 64-bit atomics per weight.
__global__ void miHistKnotsGlobalKernel(unsigned long long* __restrict__ F, const float* __restrict__ a,
                                        const float* __restrict__ b, const float* __restrict__ w,
                                        std::size_t nv, math::MiGrid g) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < nv;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const math::MiSplat s = math::miSplat(a[i], b[i], w ? math::miMaskSteps(w[i]) : math::kMiFrac, g);
    unsigned long long* c = F + s.key;
    if (s.w[0]) atomicAdd(c, (unsigned long long)s.w[0]);
    if (s.w[1]) atomicAdd(c + 1, (unsigned long long)s.w[1]);
    if (s.w[2]) atomicAdd(c + g.nfJ, (unsigned long long)s.w[2]);
    if (s.w[3]) atomicAdd(c + g.nfJ + 1, (unsigned long long)s.w[3]);
  }
}

// out[k] = math::miTapSum(in + (k / n) rowStep, step, nf, k % n) for k < rows n: one convolution pass of
// the global knot table (rows: G from F; then H from G).
__global__ void miTapSumKernel(unsigned long long* __restrict__ out,
                               const unsigned long long* __restrict__ in, int rows, int n,
                               std::size_t rowStep, std::size_t colStep, std::size_t step, int nf) {
  const int k = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (k >= rows * n) return;
  out[k] = math::miTapSum(in + std::size_t(k / n) * rowStep + std::size_t(k % n) * colStep, step, nf,
                          (rowStep == 0 ? k / n : k % n));
}

// The histogram kernel's launch: "copies,block,aggregation" (PYCA_MI_HIST; copies 1 or 2 knot tables,
// block 256, 512 or 1024 threads, aggregation none, uniform, match or edges: addWarp), parsed again only when
// the variable changes. For measurement (benchmarks/bench_mi.py); every choice gives the same histogram.
struct HistChoice {
  int copies, block, agg;
};

HistChoice histChoice(const char* op) {
  const HistChoice fallback{2, 1024, kAggUniform};  // docs/performance.md
  thread_local std::string seen;
  thread_local HistChoice parsed = fallback;
  const char* e = std::getenv("PYCA_MI_HIST");
  if (!e || !*e) return fallback;
  if (seen == e) return parsed;
  int copies = 0, block = 0;
  char kind[16] = {0};
  const auto is = [&](const char* k) { return std::strcmp(kind, k) == 0; };
  const bool ok = std::sscanf(e, "%d,%d,%15s", &copies, &block, kind) == 3 && (copies == 1 || copies == 2) &&
                  (block == 256 || block == 512 || block == 1024) &&
                  (is("none") || is("uniform") || is("match"));
  if (!ok)
    throw ValueError(std::string(op) +
                     ": PYCA_MI_HIST must be 'copies,block,aggregation' (copies 1 or 2, block 256, 512 or "
                     "1024, aggregation none, uniform, match or edges), not '" +
                     e + "'");
  parsed = HistChoice{
      copies, block,
      is("none") ? kAggNone : (is("uniform") ? kAggUniform : (is("match") ? kAggMatch : kAggEdges))};
  seen = e;
  return parsed;
}

// Per device: multiprocessors and the shared memory a block may opt in to (queried once per thread).
struct DeviceInfo {
  int sms = 0, optin = 0;
};
DeviceInfo deviceInfo(const char* op) {
  constexpr int kDevices = 64;
  thread_local DeviceInfo info[kDevices];
  int dev = 0;
  check(cudaGetDevice(&dev), op, "cudaGetDevice");
  if (dev < 0 || dev >= kDevices) {
    DeviceInfo q;
    check(cudaDeviceGetAttribute(&q.optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), op,
          "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&q.sms, cudaDevAttrMultiProcessorCount, dev), op, "cudaDeviceGetAttribute");
    return q;
  }
  DeviceInfo& d = info[dev];
  if (d.sms == 0) {
    check(cudaDeviceGetAttribute(&d.optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), op,
          "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev), op, "cudaDeviceGetAttribute");
  }
  return d;
}

// Launches the shared-memory kernel with `bytes` of shared memory: as many blocks as fit on every SM, more
// where one block would splat more than kMaxBlockVoxels voxels.
template <int Block, int Copies, int Agg, bool Masked>
void launchKnots(unsigned long long* H, const float* I, const float* J, const float* mask, std::size_t nv,
                 const math::MiGrid& g, int gAt, std::size_t bytes, const DeviceInfo& dev, const char* op) {
  const auto kernel = miHistKnotsKernel<Block, Copies, Agg, Masked>;
  // the attribute and the occupancy of the last device and size this thread launched with
  thread_local int lastDev = -1;
  thread_local std::size_t lastBytes = 0;
  thread_local int perSm = 0;
  int d = 0;
  check(cudaGetDevice(&d), op, "cudaGetDevice");
  if (d != lastDev || bytes != lastBytes) {
    if (bytes > 48 * 1024)
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), op,
            "cudaFuncSetAttribute");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, Block, bytes), op,
          "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    lastDev = d;
    lastBytes = bytes;
  }
  const std::size_t chunk = std::size_t(Block) * kUnroll;
  const std::size_t chunks = (nv + chunk - 1) / chunk;
  const std::size_t perBlock = kMaxBlockVoxels / chunk;  // chunks a block may take
  const std::size_t need = (chunks + perBlock - 1) / perBlock;
  const std::size_t resident = std::size_t(std::max(1, dev.sms * std::max(1, perSm)));
  const std::size_t blocks = std::max<std::size_t>(1, std::min(chunks, std::max(need, resident)));
  kernel<<<unsigned(blocks), Block, bytes, stream()>>>(H, I, J, mask, nv, g, gAt);
}

template <int Block, int Copies, int Agg>
void launchKnotsMasked(unsigned long long* H, const float* I, const float* J, const float* mask,
                       std::size_t nv, const math::MiGrid& g, int gAt, std::size_t bytes,
                       const DeviceInfo& dev, const char* op) {
  if (mask) {
    launchKnots<Block, Copies, Agg, true>(H, I, J, mask, nv, g, gAt, bytes, dev, op);
  } else {
    launchKnots<Block, Copies, Agg, false>(H, I, J, mask, nv, g, gAt, bytes, dev, op);
  }
}

template <int Block, int Copies>
void launchKnotsAgg(const HistChoice& c, unsigned long long* H, const float* I, const float* J,
                    const float* mask, std::size_t nv, const math::MiGrid& g, int gAt, std::size_t bytes,
                    const DeviceInfo& dev, const char* op) {
  if (c.agg == kAggUniform) {
    launchKnotsMasked<Block, Copies, kAggUniform>(H, I, J, mask, nv, g, gAt, bytes, dev, op);
  } else if (c.agg == kAggMatch) {
    launchKnotsMasked<Block, Copies, kAggMatch>(H, I, J, mask, nv, g, gAt, bytes, dev, op);
  } else if (c.agg == kAggEdges) {
    launchKnotsMasked<Block, Copies, kAggEdges>(H, I, J, mask, nv, g, gAt, bytes, dev, op);
  } else {
    launchKnotsMasked<Block, Copies, kAggNone>(H, I, J, mask, nv, g, gAt, bytes, dev, op);
  }
}

template <int Block>
void launchKnotsCopies(const HistChoice& c, int copies, unsigned long long* H, const float* I, const float* J,
                       const float* mask, std::size_t nv, const math::MiGrid& g, int gAt, std::size_t bytes,
                       const DeviceInfo& dev, const char* op) {
  if (copies == 2) {
    launchKnotsAgg<Block, 2>(c, H, I, J, mask, nv, g, gAt, bytes, dev, op);
  } else {
    launchKnotsAgg<Block, 1>(c, H, I, J, mask, nv, g, gAt, bytes, dev, op);
  }
}

// D(u, v) = math::miSlopeValue(L, nA, nB, u, v) for u < nfA - 1, v < nfB (row-major).
__global__ void miSlopeTableKernel(double* __restrict__ D, const float* __restrict__ L, int nA, int nB,
                                   int nfA, int nfB) {
  const int k = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (k >= (nfA - 1) * nfB) return;
  D[k] = math::miSlopeValue(L, nA, nB, k / nfB, k % nfB);
}

// The slope table of hostL (nA x nB floats) in D ((nfA - 1) nfB doubles), built on the device.
void slopeTable(double* D, float* Ldev, const float* hostL, int nA, int nB, const char* op) {
  const int nfA = math::miKnots(nA), nfB = math::miKnots(nB);
  check(cudaMemcpyAsync(Ldev, hostL, std::size_t(nA) * nB * sizeof(float), cudaMemcpyHostToDevice, stream()),
        op, "cudaMemcpyAsync");
  const int n = (nfA - 1) * nfB;
  miSlopeTableKernel<<<unsigned((n + kBlock - 1) / kBlock), kBlock, 0, stream()>>>(D, Ldev, nA, nB, nfA, nfB);
}

// grad = dMI/dA per voxel (math::miGradI: A the first image of g).
__global__ void miGradKernel(float* __restrict__ grad, const float* __restrict__ a,
                             const float* __restrict__ b, const float* __restrict__ w, std::size_t nv,
                             math::MiGrid g, const double* __restrict__ D, double gk) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < nv;
       i += std::size_t(gridDim.x) * blockDim.x)
    grad[i] = math::miGradI(a[i], b[i], w ? math::miMaskSteps(w[i]) : math::kMiFrac, g, D, gk);
}

// gI = dMI/dI and gJ = dMI/dJ per voxel (math::miGradI, miGradJ).
__global__ void miGradPairKernel(float* __restrict__ gI, float* __restrict__ gJ, const float* __restrict__ a,
                                 const float* __restrict__ b, const float* __restrict__ w, std::size_t nv,
                                 math::MiGrid g, const double* __restrict__ DI, const double* __restrict__ DJ,
                                 double gk) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < nv;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float x = a[i], y = b[i];
    const int mq = w ? math::miMaskSteps(w[i]) : math::kMiFrac;
    gI[i] = math::miGradI(x, y, mq, g, DI, gk);
    gJ[i] = math::miGradJ(x, y, mq, g, DJ, gk);
  }
}

// Blocks of a grid-stride loop that keeps every multiprocessor busy (`perSm` blocks per SM).
unsigned residentBlocks(std::size_t nv, int perSm, const char* op) {
  return blocksFor(nv, kBlock, std::size_t(std::max(1, deviceInfo(op).sms * perSm)));
}
}  // namespace

void MIHistogram(std::uint64_t* hostH, const float* I, const float* J, const float* mask, std::size_t nv,
                 const math::MiBins& b) {
  const char* op = "MutualInformation";
  const std::size_t nb = std::size_t(b.nI) * std::size_t(b.nJ);
  Scratch H(nb * sizeof(unsigned long long), op);
  unsigned long long* h = H.as<unsigned long long>();
  check(cudaMemsetAsync(h, 0, nb * sizeof(unsigned long long), stream()), op, "cudaMemsetAsync");
  if (nv > 0) {
    const math::MiGrid g = math::miGrid(b);
    const std::size_t nf = std::size_t(g.nfI) * std::size_t(g.nfJ);
    const HistChoice choice = histChoice(op);
    const DeviceInfo dev = deviceInfo(op);
    // the knot tables, then (over the second copy, or after the first) the convolution along J, 8-aligned
    const int gAt = int((nf + 1) / 2 * 2);
    const std::size_t edges = choice.agg == kAggEdges ? 32 * std::size_t(g.nfI + g.nfJ) : 0;
    const auto bytesFor = [&](int copies) {
      return std::max(std::size_t(copies) * nf + edges, std::size_t(gAt) + 2 * std::size_t(g.nfI) * b.nJ) *
             sizeof(unsigned);
    };
    const int copies = bytesFor(choice.copies) <= std::size_t(dev.optin) ? choice.copies : 1;
    const std::size_t bytes = bytesFor(copies);
    if (bytes <= std::size_t(dev.optin)) {
      if (choice.block == 256) {
        launchKnotsCopies<256>(choice, copies, h, I, J, mask, nv, g, gAt, bytes, dev, op);
      } else if (choice.block == 512) {
        launchKnotsCopies<512>(choice, copies, h, I, J, mask, nv, g, gAt, bytes, dev, op);
      } else {
        launchKnotsCopies<1024>(choice, copies, h, I, J, mask, nv, g, gAt, bytes, dev, op);
      }
    } else {  // the knot table in global memory, then the two convolution passes
      Scratch F((nf + std::size_t(g.nfI) * b.nJ) * sizeof(unsigned long long), op);
      unsigned long long* f = F.as<unsigned long long>();
      unsigned long long* G = f + nf;
      check(cudaMemsetAsync(f, 0, nf * sizeof(unsigned long long), stream()), op, "cudaMemsetAsync");
      miHistKnotsGlobalKernel<<<residentBlocks(nv, 8, op), kBlock, 0, stream()>>>(f, I, J, mask, nv, g);
      const int rowsG = g.nfI * b.nJ, rowsH = b.nI * b.nJ;
      // G(u, c) = sum_v F(u, v) c(v, c); H(a, c) = sum_u c(u, a) G(u, c)
      miTapSumKernel<<<unsigned((rowsG + kBlock - 1) / kBlock), kBlock, 0, stream()>>>(
          G, f, g.nfI, b.nJ, std::size_t(g.nfJ), 0, 1, g.nfJ);
      miTapSumKernel<<<unsigned((rowsH + kBlock - 1) / kBlock), kBlock, 0, stream()>>>(
          h, G, b.nI, b.nJ, 0, 1, std::size_t(b.nJ), g.nfI);
    }
    check(cudaGetLastError(), op, "histogram kernel launch");
  }
  static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t), "64-bit histogram counts");
  check(cudaMemcpyAsync(hostH, h, nb * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream()), op,
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream()), op, "cudaStreamSynchronize");
}

void MIGradient(float* grad, const float* I, const float* J, const float* mask, std::size_t nv,
                const math::MiBins& b, const float* hostL, double gk) {
  const char* op = "MutualInformation";
  if (nv == 0) return;
  const math::MiGrid g = math::miGrid(b);
  const std::size_t nD = std::size_t(g.nfI - 1) * std::size_t(g.nfJ);
  Scratch D(nD * sizeof(double) + std::size_t(b.nI) * b.nJ * sizeof(float), op);
  double* d = D.as<double>();
  slopeTable(d, reinterpret_cast<float*>(d + nD), hostL, b.nI, b.nJ, op);
  miGradKernel<<<residentBlocks(nv, 8, op), kBlock, 0, stream()>>>(grad, I, J, mask, nv, g, d, gk);
  // No wait: a copy from pageable host memory returns once hostL has been staged.
  check(cudaGetLastError(), op, "gradient kernel launch");
}

void MIGradients(float* gradI, float* gradJ, const float* I, const float* J, const float* mask,
                 std::size_t nv, const math::MiBins& b, const float* hostLI, const float* hostLJ, double gk) {
  const char* op = "MutualInformationGradients";
  if (nv == 0) return;
  const math::MiGrid g = math::miGrid(b);
  const std::size_t nDI = std::size_t(g.nfI - 1) * std::size_t(g.nfJ);
  const std::size_t nDJ = std::size_t(g.nfJ - 1) * std::size_t(g.nfI);
  const std::size_t nb = std::size_t(b.nI) * b.nJ;
  Scratch D((nDI + nDJ) * sizeof(double) + 2 * nb * sizeof(float), op);
  double* dI = D.as<double>();
  double* dJ = dI + nDI;
  float* L = reinterpret_cast<float*>(dJ + nDJ);
  slopeTable(dI, L, hostLI, b.nI, b.nJ, op);
  slopeTable(dJ, L + nb, hostLJ, b.nJ, b.nI, op);
  miGradPairKernel<<<residentBlocks(nv, 8, op), kBlock, 0, stream()>>>(gradI, gradJ, I, J, mask, nv, g, dI,
                                                                       dJ, gk);
  // No wait: a copy from pageable host memory returns once the host's table has been staged.
  check(cudaGetLastError(), op, "gradient kernel launch");
}

void CopyToDevice(float* dst, const float* hostSrc, std::size_t n) {
  check(cudaMemcpyAsync(dst, hostSrc, n * sizeof(float), cudaMemcpyHostToDevice, stream()), "JointHistogram",
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream()), "JointHistogram", "cudaStreamSynchronize");
}

}  // namespace cuda_impl
}  // namespace pyca
