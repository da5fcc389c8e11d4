// CUDA backend of the `similarity` family (ops/similarity.yaml), mutual information: a per-block integer
// joint histogram in shared memory (up to one table of 32-bit low words per lane of a warp, so that lanes in
// the same bin add to different addresses, and one table of high words for the carries), merged into one
// global histogram by integer atomics (the same bits in any order: docs/design/mutual-information.md), then
// the gradient from the table the host computes (pyca/math/similarity.h, miFromHistogram, shared with the
// CPU). LNCC and box sums: similarity.cu.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/cuda_common.cuh"
#include "ops/reductions_cuda.h"
#include "ops/similarity_cuda.h"
#include "pyca/math/similarity.h"

namespace pyca {
namespace cuda_impl {
namespace {

constexpr int kBlock = 256;
// Shared memory a kernel may use without opting in, and what the histogram kernel asks for (opt-in).
constexpr std::size_t kSharedBytes = 48 * 1024;
constexpr std::size_t kHistSharedBytes = 96 * 1024;
// Copies of the per-block histogram in shared memory (lane l adds to copy l % copies: the lanes of a
// warp that add to one bin at once -- neighbours of similar intensity -- queue on fewer addresses).
constexpr int kHistCopies = 8;
// Consecutive voxels per thread and pass of the histogram's grid-stride loop (neighbours often share
// their 4 x 4 bins: their weights are summed in registers, one atomic per bin for the lot).
constexpr int kHistChunk = 8;

// a += v in a 64-bit count kept as two 32-bit words of shared memory (native 32-bit atomics): the
// carry out of the low word is read from atomicAdd's old value. Each add's carry is exact, so the
// pair holds the same integer in any order of adds (sum < 2^64).
__device__ inline void sharedAdd64(unsigned* lo, unsigned* hi, unsigned long long v) {
  const unsigned vl = unsigned(v), vh = unsigned(v >> 32);
  unsigned carry = 0u;
  if (vl) {
    const unsigned old = atomicAdd(lo, vl);
    carry = old + vl < old ? 1u : 0u;
  }
  if (vh + carry) atomicAdd(hi, vh + carry);
}

// Parzen joint histogram, integer counts in math::kMiScale units. Shared: per-block histograms in
// shared memory (`copies` of them, each its low words then its high words, `pitch` words apart, then
// merged into H by 64-bit atomics); else 64-bit atomics straight into H. Each thread takes kHistChunk
// consecutive voxels per pass: runs of equal (I, J, mask) (math::MiRuns: the background) are
// weighed once, and the weights of successive runs with the same 4 x 4 bins are summed in registers
// (uint64) until the bins change. Integer sums: the same H for any grouping, order or launch.
template <bool Shared>
__global__ void __launch_bounds__(kBlock)
    miHistKernel(unsigned long long* __restrict__ H, const float* __restrict__ a, const float* __restrict__ b,
                 const float* __restrict__ w, std::size_t nv, math::MiBins bins, int copies, int pitch) {
  extern __shared__ unsigned sh[];
  const int nb = bins.nI * bins.nJ;
  unsigned* lo = nullptr;
  if (Shared) {
    for (int k = threadIdx.x; k < pitch * copies; k += blockDim.x) sh[k] = 0u;
    __syncthreads();
    lo = sh + std::size_t(threadIdx.x % 32 % copies) * std::size_t(pitch);
  }
  int key = -1;  // the first bin (bI nJ + bJ) of the weights in acc; -1: none
  unsigned long long acc[16];
  const auto flush = [&]() {
    if (key < 0) return;
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const unsigned long long v = acc[4 * r + c];
        if (!v) continue;
        const int k = key + r * bins.nJ + c;
        if (Shared) {
          sharedAdd64(lo + k, lo + nb + k, v);
        } else {
          atomicAdd(H + k, v);
        }
      }
  };
  // Adds the weights of n voxels equal to (u, v, m), a run of math::MiRuns.
  const auto add = [&](float u, float v, float m, unsigned long long n) {
    int bI, bJ;
    std::uint64_t q[16];
    math::miVoxelWeights(u, v, m, bins, &bI, &bJ, q);
    const int k = bI * bins.nJ + bJ;
    if (k != key) {
      flush();
      key = k;
#pragma unroll
      for (int j = 0; j < 16; ++j) acc[j] = (unsigned long long)q[j] * n;
    } else {
#pragma unroll
      for (int j = 0; j < 16; ++j) acc[j] += (unsigned long long)q[j] * n;
    }
  };
  math::MiRuns<unsigned long long> runs;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x * kHistChunk;
  for (std::size_t i0 = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) * kHistChunk; i0 < nv;
       i0 += stride) {
    if (nv - i0 >= std::size_t(kHistChunk)) {  // the chunk's loads first, all in flight at once
      float u[kHistChunk], v[kHistChunk], m[kHistChunk];
#pragma unroll
      for (int j = 0; j < kHistChunk; ++j) {
        u[j] = a[i0 + j];
        v[j] = b[i0 + j];
        m[j] = w ? w[i0 + j] : 1.f;
      }
#pragma unroll 1
      for (int j = 0; j < kHistChunk; ++j) runs.push(u[j], v[j], m[j], add);
    } else {
      for (std::size_t i = i0; i < nv; ++i) runs.push(a[i], b[i], w ? w[i] : 1.f, add);
    }
  }
  runs.finish(add);
  flush();
  if (Shared) {
    __syncthreads();
    for (int k = threadIdx.x; k < nb; k += blockDim.x) {
      unsigned long long s = 0ull;
      for (int c = 0; c < copies; ++c) {
        const unsigned* cp = sh + std::size_t(c) * std::size_t(pitch);
        s += (static_cast<unsigned long long>(cp[nb + k]) << 32) + cp[k];
      }
      if (s) atomicAdd(H + k, s);
    }
  }
}

// Parzen joint histogram, integer counts in math::kMiScale units, in per-block tables of shared memory:
// `copies` tables of 32-bit low words (`pitch` = nb + 1 words apart, so that one bin of different copies
// lies in different banks; lane l of a warp adds to copy l % copies: with 32 copies the lanes of a warp
// never add to one address together), and one table of high words that takes each add's high half and
// the carry out of its low word (read from atomicAdd's old value; each carry is exact, so the tables
// hold the same integer in any order). A voxel's weights are below 2^31 (math::kMiScale 4/9), so one
// voxel adds 16 32-bit words and a carry now and then. The block then adds its tables into H by 64-bit
// integer atomics: the same H for any grouping, order or launch.

// A weight's integer: trunc of miVoxelProducts' double (below 2^31), by a conversion or, with Magic, by
// double additions (math::miTruncU32: the same integer).
template <bool Magic>
__device__ __forceinline__ unsigned miWeightWord(double x) {
  return Magic ? math::miTruncU32(x) : __double2uint_rz(x);
}

// One voxel's 16 fixed-point weights (math::miVoxelProducts: doubles below 2^31, truncated by the caller)
// and `key`, the first of its 4 x 4 bins (bI nJ + bJ); NJ the bins of J when known at compile time (the
// block's offsets then constants of the instructions), else 0 (bins.nJ).
template <int NJ>
struct MiVoxel {
  double d[16];
  int key;
  __device__ __forceinline__ MiVoxel(const math::MiBins& bins, float u, float v, float m) {
    int bI, bJ;
    math::miVoxelProducts(double(u), double(v), double(m), bins, &bI, &bJ, d);
    key = bI * (NJ ? NJ : bins.nJ) + bJ;
  }
};

// Adds one voxel's weights d to its bins, row = the first in this lane's copy (toHigh: the high table's
// offset from it), each carry out of a low word to the high table. Always: each carry added whether 0 or 1
// (twice the atomics, no branch per weight), else only when 1.
template <int NJ, bool Magic, bool Always>
__device__ __forceinline__ void miAddWeights(unsigned* row, int toHigh, int nJ, const double* d) {
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int k = r * (NJ ? NJ : nJ) + c;
      const unsigned x = miWeightWord<Magic>(d[4 * r + c]);
      const unsigned old = atomicAdd(row + k, x);
      if (Always) {  // the carry (0 or 1) added in every case: no branch
        atomicAdd(row + toHigh + k, old > ~x ? 1u : 0u);
      } else if (old > ~x) {
        atomicAdd(row + toHigh + k, 1u);
      }
    }
}

// The weights of one voxel (u, v, m) added to the tables (lo: this lane's copy).
template <int NJ, bool Magic, bool Always>
__device__ __forceinline__ void miAddOne(unsigned* lo, int toHigh, const math::MiBins& bins, float u, float v,
                                         float m) {
  const MiVoxel<NJ> vx(bins, u, v, m);
  miAddWeights<NJ, Magic, Always>(lo + vx.key, toHigh, bins.nJ, vx.d);
}

// miAddOne for a whole warp (all 32 lanes call it) whose lanes may share a voxel's 4 x 4 bins (the
// background's few bins): the lanes with the same bins (__match_any_sync) sum each weight in the group
// (__reduce_add_sync of its two 16-bit halves: exact), and one lane of the group adds the sums, so that a
// crowded bin takes one atomic per group instead of one per lane. A lane alone in its bins adds as miAddOne.
template <int NJ>
__device__ __forceinline__ void miAddOneGrouped(unsigned* lo, int toHigh, const math::MiBins& bins, float u,
                                                float v, float m) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
  // __reduce_add_sync needs sm_80: older cards add lane by lane (the same sums).
  miAddOne<NJ, false, false>(lo, toHigh, bins, u, v, m);
#else
  const MiVoxel<NJ> vx(bins, u, v, m);
  const unsigned group = __match_any_sync(0xffffffffu, vx.key);
  const unsigned lane = threadIdx.x % 32;
  unsigned* const row = lo + vx.key;
  if (group == (1u << lane)) {
    miAddWeights<NJ, false, false>(row, toHigh, bins.nJ, vx.d);
    return;
  }
  const bool first = lane == unsigned(__ffs(int(group)) - 1);
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int k = r * (NJ ? NJ : bins.nJ) + c;
      const unsigned x = __double2uint_rz(vx.d[4 * r + c]);
      const unsigned low = __reduce_add_sync(group, x & 0xffffu), high = __reduce_add_sync(group, x >> 16);
      if (first) {
        const unsigned long long sum = low + (static_cast<unsigned long long>(high) << 16);
        const unsigned sl = unsigned(sum);
        unsigned up = unsigned(sum >> 32);
        if (atomicAdd(row + k, sl) > ~sl) ++up;
        if (up) atomicAdd(row + toHigh + k, up);
      }
    }
#endif
}

// The weights of n equal voxels (u, v, m): each weight times n, its low word to this lane's copy and its
// high word plus the low word's carry to the high table.
template <int NJ, bool Magic>
__device__ __forceinline__ void miAddRun(unsigned* lo, int toHigh, const math::MiBins& bins, float u, float v,
                                         float m, unsigned n) {
  const MiVoxel<NJ> vx(bins, u, v, m);
  unsigned* const row = lo + vx.key;
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int k = r * (NJ ? NJ : bins.nJ) + c;
      const unsigned long long x = static_cast<unsigned long long>(miWeightWord<Magic>(vx.d[4 * r + c])) * n;
      const unsigned xl = unsigned(x);
      unsigned up = unsigned(x >> 32);
      if (atomicAdd(row + k, xl) > ~xl) ++up;
      if (up) atomicAdd(row + toHigh + k, up);
    }
}

// Zeroes the block's tables (copies low-word tables `pitch` words apart, then nb high words).
__device__ __forceinline__ void miZeroTables(unsigned* sh, int copies, int pitch, int nb) {
  for (int k = threadIdx.x; k < copies * pitch + nb; k += blockDim.x) sh[k] = 0u;
  __syncthreads();
}

// This lane's tables in the block's shared memory, zeroed (miZeroTables' layout): lo its copy of the low
// words (copy lane % copies), toHigh the high table's offset from lo, nb the bins.
struct MiLaneTables {
  unsigned* lo;
  int toHigh, nb;
};
template <int NJ>
__device__ __forceinline__ MiLaneTables miLaneTables(unsigned* sh, const math::MiBins& bins, int copies,
                                                     int pitch) {
  const int nb = bins.nI * (NJ ? NJ : bins.nJ);
  miZeroTables(sh, copies, pitch, nb);
  const int copy = int(threadIdx.x % 32) % copies;
  return MiLaneTables{sh + std::size_t(copy) * std::size_t(pitch), (copies - copy) * pitch, nb};
}

// Adds the block's tables into H (64-bit integer atomics).
__device__ __forceinline__ void miMergeTables(unsigned long long* H, const unsigned* sh, int copies,
                                              int pitch, int nb) {
  __syncthreads();
  const unsigned* const hi = sh + std::size_t(copies) * std::size_t(pitch);
  for (int k = threadIdx.x; k < nb; k += blockDim.x) {
    unsigned long long s = static_cast<unsigned long long>(hi[k]) << 32;
    for (int c = 0; c < copies; ++c) s += sh[std::size_t(c) * std::size_t(pitch) + std::size_t(k)];
    if (s) atomicAdd(H + k, s);
  }
}

// The tables kernel, one voxel per thread and pass (the lanes of a warp on consecutive voxels, the next
// pass's voxel loaded before this one is weighed); runs of equal (I, J, mask) in a thread's sequence
// (math::MiRuns) are weighed once.
template <int Block, int NJ, bool Magic, bool Always>
__global__ void __launch_bounds__(Block)
    miHistTablesKernel(unsigned long long* __restrict__ H, const float* __restrict__ a,
                       const float* __restrict__ b, const float* __restrict__ w, std::size_t nv,
                       math::MiBins bins, int copies, int pitch) {
  extern __shared__ unsigned sh[];
  const MiLaneTables t = miLaneTables<NJ>(sh, bins, copies, pitch);
  unsigned* const lo = t.lo;
  const int toHigh = t.toHigh, nb = t.nb;
  const auto add = [&](float u, float v, float m, unsigned n) {
    if (n == 1) {
      miAddOne<NJ, Magic, Always>(lo, toHigh, bins, u, v, m);
    } else {
      miAddRun<NJ, Magic>(lo, toHigh, bins, u, v, m, n);
    }
  };
  math::MiRuns<unsigned> runs;
  const std::size_t stride = std::size_t(gridDim.x) * Block;
  std::size_t i = blockIdx.x * std::size_t(Block) + threadIdx.x;
  if (i < nv) {
    float u = a[i], v = b[i], m = w ? w[i] : 1.f;
    for (;;) {
      const std::size_t next = i + stride;
      const bool more = next < nv;
      float un = 0.f, vn = 0.f, mn = 1.f;
      if (more) {
        un = a[next];
        vn = b[next];
        mn = w ? w[next] : 1.f;
      }
      runs.push(u, v, m, add);
      if (!more) break;
      i = next;
      u = un;
      v = vn;
      m = mn;
    }
  }
  runs.finish(add);
  miMergeTables(H, sh, copies, pitch, nb);
}

// Entries of each of a warp's two queues (kMiRing, a power of 2 >= 64), and the steps of 32 voxels in a
// warp's segment (kMiSegment).
constexpr int kMiRing = 64;
constexpr int kMiSegment = 32;
// Shared words of one warp's queues: single voxels (I, J, mask) and runs (I, J, mask, count).
constexpr int kMiQueueWords = 7 * kMiRing;

// The compacting tables kernel. Each warp takes segments of 32 kMiSegment consecutive voxels (segments
// dealt round-robin over the grid's warps, a block's warps far apart, so that every multiprocessor sees
// brain and background alike), the lanes on consecutive voxels, each lane keeping a run of equal (I, J,
// mask) (math::MiRuns' rule: a NaN is a run of its own). A lane whose run ends queues it (a single voxel
// or a run of n) in its warp's queue in shared memory; whenever 32 entries are queued, the 32 lanes weigh
// them together: the weighing, nearly all the work, runs with every lane busy however brain and
// background are mixed. Masked: a mask is given (else its weight is the constant 1).
template <int Block, int NJ, bool Grouped, bool Masked>
__global__ void __launch_bounds__(Block)
    miHistCompactKernel(unsigned long long* __restrict__ H, const float* __restrict__ a,
                        const float* __restrict__ b, const float* __restrict__ w, std::size_t nv,
                        math::MiBins bins, int copies, int pitch) {
  extern __shared__ unsigned sh[];
  const MiLaneTables t = miLaneTables<NJ>(sh, bins, copies, pitch);
  unsigned* const lo = t.lo;
  const int toHigh = t.toHigh, nb = t.nb;
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
  float* const q = reinterpret_cast<float*>(sh + copies * pitch + nb) + std::size_t(warp) * kMiQueueWords;
  float *const oneU = q, *const oneV = q + kMiRing, *const oneM = q + 2 * kMiRing;
  float *const runU = q + 3 * kMiRing, *const runV = q + 4 * kMiRing, *const runM = q + 5 * kMiRing;
  unsigned* const runN = reinterpret_cast<unsigned*>(q + 6 * kMiRing);
  const unsigned below = (1u << lane) - 1u;
  unsigned headOne = 0, tailOne = 0, headRun = 0, tailRun = 0;  // the same in every lane of the warp
  float ru = 0.f, rv = 0.f, rm = 0.f;
  unsigned rn = 0;  // this lane's run: (ru, rv, rm) n times; 0: none
  // Every lane calls it; `ends`: this lane's run ends (queued). Weighs 32 queued entries when there are.
  const auto queue = [&](bool ends) {
    const bool one = ends && rn == 1, many = ends && rn > 1;
    const unsigned mOne = __ballot_sync(0xffffffffu, one), mRun = __ballot_sync(0xffffffffu, many);
    if (one) {
      const unsigned p = (headOne + __popc(mOne & below)) % kMiRing;
      oneU[p] = ru;
      oneV[p] = rv;
      oneM[p] = rm;
    } else if (many) {
      const unsigned p = (headRun + __popc(mRun & below)) % kMiRing;
      runU[p] = ru;
      runV[p] = rv;
      runM[p] = rm;
      runN[p] = rn;
    }
    headOne += __popc(mOne);
    headRun += __popc(mRun);
    __syncwarp();
    if (headOne - tailOne >= 32) {
      const unsigned p = (tailOne + lane) % kMiRing;
      if (Grouped) {
        miAddOneGrouped<NJ>(lo, toHigh, bins, oneU[p], oneV[p], oneM[p]);
      } else {
        miAddOne<NJ, false, false>(lo, toHigh, bins, oneU[p], oneV[p], oneM[p]);
      }
      tailOne += 32;
    }
    if (headRun - tailRun >= 32) {
      const unsigned p = (tailRun + lane) % kMiRing;
      miAddRun<NJ, false>(lo, toHigh, bins, runU[p], runV[p], runM[p], runN[p]);
      tailRun += 32;
    }
    __syncwarp();  // the weighed entries are read before their slots are written again
  };
  const std::size_t warps = std::size_t(gridDim.x) * (Block / 32);
  const std::size_t seg = std::size_t(32) * kMiSegment;
  for (std::size_t s0 = (std::size_t(warp) * gridDim.x + blockIdx.x) * seg; s0 < nv; s0 += warps * seg) {
    const std::size_t end = s0 + seg < nv ? s0 + seg : nv;
    for (std::size_t i0 = s0; i0 < end; i0 += 32) {
      const std::size_t i = i0 + std::size_t(lane);
      const bool valid = i < end;
      float u = 0.f, v = 0.f, m = 1.f;
      if (valid) {
        u = a[i];
        v = b[i];
        if (Masked) m = w[i];
      }
      const bool same = valid && rn && u == ru && v == rv && m == rm;
      queue(valid && rn && !same);
      if (same) {
        ++rn;
      } else if (valid) {
        ru = u;
        rv = v;
        rm = m;
        rn = 1;
      }
    }
  }
  queue(rn > 0);  // every lane's last run
  if (lane < int(headOne - tailOne)) {
    const unsigned p = (tailOne + lane) % kMiRing;
    miAddOne<NJ, false, false>(lo, toHigh, bins, oneU[p], oneV[p], oneM[p]);
  }
  if (lane < int(headRun - tailRun)) {
    const unsigned p = (tailRun + lane) % kMiRing;
    miAddRun<NJ, false>(lo, toHigh, bins, runU[p], runV[p], runM[p], runN[p]);
  }
  miMergeTables(H, sh, copies, pitch, nb);
}

// The histogram kernel and its launch shape: "copies,block,kind" (PYCA_MI_HIST; copies 1..32 low-word
// tables, block 256 | 512 | 1024 threads, kind plain (miHistTablesKernel), magic (the same with
// math::miTruncU32), always (the same adding every carry, 0 or 1), compact (miHistCompactKernel) or
// compact-grouped (the same, a warp's lanes in the same bins summed before the atomics)), or "legacy"
// (miHistKernel: 8 copies of 64-bit counts as word pairs, 256 threads, successive voxels with the same bins
// summed in registers). Unset: 32,1024,compact, the fastest on a brain with its background
// (docs/performance.md). For measurement (benchmarks/bench_mi.py); every choice gives the same histogram.
struct HistChoice {
  bool legacy;
  int copies, block;
  bool magic, compact, always, grouped;
};

HistChoice parseHistChoice(const char* op, const char* e) {
  HistChoice c{false, 32, 1024, false, true, false, false};  // the compacting walk (docs/performance.md)
  if (!e || !*e) return c;
  if (std::strcmp(e, "legacy") == 0) {
    c.legacy = true;
    return c;
  }
  int copies = 0, block = 0;
  char kind[24] = {0};
  const auto is = [&](const char* k) { return std::strcmp(kind, k) == 0; };
  const bool ok = std::sscanf(e, "%d,%d,%23s", &copies, &block, kind) == 3 && copies >= 1 && copies <= 32 &&
                  (block == 256 || block == 512 || block == 1024) &&
                  (is("plain") || is("magic") || is("always") || is("compact") || is("compact-grouped"));
  if (!ok)
    throw ValueError(std::string(op) +
                     ": PYCA_MI_HIST must be 'legacy' or 'copies,block,kind' (copies 1-32, block 256, 512 "
                     "or 1024, kind plain, magic, always, compact or compact-grouped), not '" +
                     e + "'");
  c.copies = copies;
  c.block = block;
  c.magic = is("magic");
  c.compact = is("compact") || is("compact-grouped");
  c.grouped = is("compact-grouped");
  c.always = is("always");
  return c;
}

// parseHistChoice of PYCA_MI_HIST, parsed again only when the variable's value changes (per thread).
HistChoice histChoice(const char* op) {
  const char* e = std::getenv("PYCA_MI_HIST");
  thread_local std::string seen;
  thread_local HistChoice parsed = parseHistChoice(op, nullptr);
  const std::string now = e ? e : "";
  if (now != seen) {
    parsed = parseHistChoice(op, e);  // throws on a malformed value: nothing cached
    seen = now;
  }
  return parsed;
}

// The current device's multiprocessors and the shared memory a block may opt in to, queried once per
// device (and thread).
struct DeviceInfo {
  int dev = -1, sms = 0, optin = 0;
};
DeviceInfo deviceInfo(const char* op) {
  int dev = 0;
  check(cudaGetDevice(&dev), op, "cudaGetDevice");
  thread_local std::vector<DeviceInfo> known;
  for (const DeviceInfo& d : known)
    if (d.dev == dev) return d;
  DeviceInfo d;
  d.dev = dev;
  check(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev), op, "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&d.optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), op,
        "cudaDeviceGetAttribute");
  known.push_back(d);
  return d;
}

// Blocks of `kernel` (Block threads, `bytes` of shared memory) resident on one multiprocessor of the current
// device, the shared-memory attribute set first where `bytes` needs the opt-in: once per kernel, device and
// size (and thread).
int blocksPerSm(const void* kernel, int dev, int block, std::size_t bytes, const char* op) {
  struct Known {
    const void* kernel;
    int dev, block;
    std::size_t bytes;
    int perSm;
  };
  thread_local std::vector<Known> known;
  for (const Known& k : known)
    if (k.kernel == kernel && k.dev == dev && k.block == block && k.bytes == bytes) return k.perSm;
  if (bytes > kSharedBytes)
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), op,
          "cudaFuncSetAttribute");
  int perSm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, block, bytes), op,
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  known.push_back(Known{kernel, dev, block, bytes, perSm});
  return perSm;
}

// Launches kernel with `bytes` of shared memory on every multiprocessor, as many blocks as fit (the
// occupancy calculator), no more than `items` (one per thread) need.
template <class Kernel>
void launchResident(Kernel kernel, int block, std::size_t bytes, std::size_t items, const char* op,
                    unsigned long long* H, const float* I, const float* J, const float* mask, std::size_t nv,
                    const math::MiBins& b, int copies, int pitch) {
  const DeviceInfo d = deviceInfo(op);
  const int perSm = blocksPerSm(reinterpret_cast<const void*>(kernel), d.dev, block, bytes, op);
  const unsigned blocks = blocksFor(items, block, std::size_t(std::max(1, d.sms * std::max(1, perSm))));
  kernel<<<blocks, block, bytes, stream()>>>(H, I, J, mask, nv, b, copies, pitch);
}

// The tables kernel of `choice` with Block threads and J's bins NJ (0: any).
template <int Block, int NJ>
void launchTables(const HistChoice& choice, unsigned long long* H, const float* I, const float* J,
                  const float* mask, std::size_t nv, const math::MiBins& b, int copies, int pitch,
                  std::size_t bytes, const char* op) {
  if (choice.compact) {
    const std::size_t items = (nv + kMiSegment - 1) / kMiSegment;  // a thread per kMiSegment voxels
    const auto go = [&](auto grouped) {
      constexpr bool kA = decltype(grouped)::value;
      if (mask) {
        launchResident(miHistCompactKernel<Block, NJ, kA, true>, Block, bytes, items, op, H, I, J, mask, nv,
                       b, copies, pitch);
      } else {
        launchResident(miHistCompactKernel<Block, NJ, kA, false>, Block, bytes, items, op, H, I, J, mask, nv,
                       b, copies, pitch);
      }
    };
    choice.grouped ? go(std::true_type{}) : go(std::false_type{});
  } else if (choice.magic) {
    launchResident(miHistTablesKernel<Block, NJ, true, false>, Block, bytes, nv, op, H, I, J, mask, nv, b,
                   copies, pitch);
  } else if (choice.always) {
    launchResident(miHistTablesKernel<Block, NJ, false, true>, Block, bytes, nv, op, H, I, J, mask, nv, b,
                   copies, pitch);
  } else {
    launchResident(miHistTablesKernel<Block, NJ, false, false>, Block, bytes, nv, op, H, I, J, mask, nv, b,
                   copies, pitch);
  }
}

template <int Block>
void launchTablesFor(const HistChoice& choice, unsigned long long* H, const float* I, const float* J,
                     const float* mask, std::size_t nv, const math::MiBins& b, int copies, int pitch,
                     std::size_t bytes, const char* op) {
  if (b.nJ == 32) {
    launchTables<Block, 32>(choice, H, I, J, mask, nv, b, copies, pitch, bytes, op);
  } else {
    launchTables<Block, 0>(choice, H, I, J, mask, nv, b, copies, pitch, bytes, op);
  }
}

// grad = dMI/dI per voxel; the table L in shared memory as doubles when it fits (Shared: the same values,
// converted once per block), else read from L.
template <bool Shared>
__global__ void miGradKernel(float* __restrict__ g, const float* __restrict__ a, const float* __restrict__ b,
                             const float* __restrict__ w, std::size_t nv, math::MiBins bins,
                             const float* __restrict__ L, float gscale) {
  extern __shared__ double shL[];
  if (Shared) {
    const int nb = bins.nI * bins.nJ;
    for (int k = threadIdx.x; k < nb; k += blockDim.x) shL[k] = L[k];
    __syncthreads();
  }
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < nv;
       i += std::size_t(gridDim.x) * blockDim.x)
    g[i] = math::miClamped(a[i], bins.iLo, bins.iHi)
               ? 0.f  // what the formula gives there (math::miClamped)
               : (Shared ? math::miGradAt(a[i], b[i], w ? w[i] : 1.f, bins, static_cast<const double*>(shL),
                                          gscale)
                         : math::miGradAt(a[i], b[i], w ? w[i] : 1.f, bins, L, gscale));
}

// gI = dMI/dI and gJ = dMI/dJ per voxel from one pair of Parzen windows (math::miGradPairAt); the
// tables LI and LJ (nb floats each) in shared memory as doubles when they fit (Shared: converted once
// per block, not 32 times per voxel; the same values), else read from global memory.
template <bool Shared>
__global__ void miGradPairKernel(float* __restrict__ gI, float* __restrict__ gJ, const float* __restrict__ a,
                                 const float* __restrict__ b, const float* __restrict__ w, std::size_t nv,
                                 math::MiBins bins, const float* __restrict__ LI,
                                 const float* __restrict__ LJ, float gscale) {
  extern __shared__ double shD[];
  if (Shared) {
    const int nb = bins.nI * bins.nJ;
    for (int k = threadIdx.x; k < nb; k += blockDim.x) {
      shD[k] = LI[k];
      shD[nb + k] = LJ[k];
    }
    __syncthreads();
  }
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < nv;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float x = a[i], y = b[i];
    float u = 0.f, v = 0.f;  // both clamped (the background): +0, what the formula gives (math::miClamped)
    if (!math::miClamped(x, bins.iLo, bins.iHi) || !math::miClamped(y, bins.jLo, bins.jHi)) {
      if (Shared) {
        math::miGradPairAt(x, y, w ? w[i] : 1.f, bins, shD, shD + bins.nI * bins.nJ, gscale, &u, &v);
      } else {
        math::miGradPairAt(x, y, w ? w[i] : 1.f, bins, LI, LJ, gscale, &u, &v);
      }
    }
    gI[i] = u;
    gJ[i] = v;
  }
}

// Blocks of a grid-stride loop that keeps every multiprocessor busy: `perSm` blocks per SM, no more
// than the data needs.
unsigned residentBlocks(std::size_t nv, int perSm, const char* op) {
  return blocksFor(nv, kBlock, std::size_t(std::max(1, deviceInfo(op).sms * perSm)));
}
}  // namespace

void MIHistogram(std::uint64_t* hostH, const float* I, const float* J, const float* mask, std::size_t nv,
                 const math::MiBins& b) {
  const char* op = "MutualInformation";
  const std::size_t nb = std::size_t(b.nI) * std::size_t(b.nJ);
  Scratch H(nb * sizeof(unsigned long long), op);
  check(cudaMemsetAsync(H.p, 0, nb * sizeof(unsigned long long), stream()), op, "cudaMemsetAsync");
  const HistChoice choice = histChoice(op);
  if (nv > 0 && !choice.legacy) {
    // copies tables of nb low words, each padded by one word (a bin's copies in different banks), then
    // the high words: as many copies as the multiprocessor's shared memory holds, at most choice.copies.
    const int pitch = int(nb + 1);
    const std::size_t one = std::size_t(pitch) * sizeof(unsigned), high = nb * sizeof(unsigned);
    const std::size_t room = std::size_t(deviceInfo(op).optin);
    // the compacting kernel's queues after the tables
    const std::size_t queues =
        choice.compact ? std::size_t(choice.block / 32) * kMiQueueWords * sizeof(float) : 0;
    const int copies =
        room > high + queues
            ? int(std::min<std::size_t>(std::size_t(choice.copies), (room - high - queues) / one))
            : 0;
    unsigned long long* h = H.as<unsigned long long>();
    if (copies >= 1) {
      const std::size_t bytes = one * std::size_t(copies) + high + queues;
      if (choice.block == 256) {
        launchTablesFor<256>(choice, h, I, J, mask, nv, b, copies, pitch, bytes, op);
      } else if (choice.block == 512) {
        launchTablesFor<512>(choice, h, I, J, mask, nv, b, copies, pitch, bytes, op);
      } else {
        launchTablesFor<1024>(choice, h, I, J, mask, nv, b, copies, pitch, bytes, op);
      }
    } else {
      const std::size_t chunks = (nv + kHistChunk - 1) / kHistChunk;
      miHistKernel<false><<<residentBlocks(chunks, 8, op), kBlock, 0, stream()>>>(h, I, J, mask, nv, b, 1, 0);
    }
    check(cudaGetLastError(), op, "histogram kernel launch");
  } else if (nv > 0) {
    // One copy: the low and high words of nb counts, padded by one word so that the copies of a bin
    // fall in different banks.
    const int pitch = int(2 * nb + 1);
    const std::size_t one = std::size_t(pitch) * sizeof(unsigned);
    const int copies = int(std::min<std::size_t>(kHistCopies, kHistSharedBytes / one));
    const std::size_t chunks = (nv + kHistChunk - 1) / kHistChunk;
    if (copies >= 1) {
      const std::size_t bytes = one * std::size_t(copies);
      // the opt-in shared-memory attribute, set once (with the occupancy, unused here)
      blocksPerSm(reinterpret_cast<const void*>(miHistKernel<true>), deviceInfo(op).dev, kBlock, bytes, op);
      miHistKernel<true><<<residentBlocks(chunks, 2, op), kBlock, bytes, stream()>>>(
          H.as<unsigned long long>(), I, J, mask, nv, b, copies, pitch);
    } else {
      miHistKernel<false><<<residentBlocks(chunks, 8, op), kBlock, 0, stream()>>>(H.as<unsigned long long>(),
                                                                                  I, J, mask, nv, b, 1, 0);
    }
    check(cudaGetLastError(), op, "histogram kernel launch");
  }
  static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t), "64-bit histogram counts");
  check(cudaMemcpyAsync(hostH, H.p, nb * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream()), op,
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream()), op, "cudaStreamSynchronize");
}

void MIGradient(float* grad, const float* I, const float* J, const float* mask, std::size_t nv,
                const math::MiBins& b, const float* hostL, float gscale) {
  const char* op = "MutualInformation";
  if (nv == 0) return;
  const std::size_t nb = std::size_t(b.nI) * std::size_t(b.nJ);
  Scratch L(nb * sizeof(float), op);
  check(cudaMemcpyAsync(L.p, hostL, nb * sizeof(float), cudaMemcpyHostToDevice, stream()), op,
        "cudaMemcpyAsync");
  if (nb * sizeof(double) <= kSharedBytes) {
    miGradKernel<true><<<residentBlocks(nv, 4, op), kBlock, nb * sizeof(double), stream()>>>(
        grad, I, J, mask, nv, b, L.as<float>(), gscale);
  } else {
    miGradKernel<false>
        <<<blocksFor(nv, kBlock), kBlock, 0, stream()>>>(grad, I, J, mask, nv, b, L.as<float>(), gscale);
  }
  // No wait: a copy from pageable host memory returns once hostL has been staged.
  check(cudaGetLastError(), op, "gradient kernel launch");
}

void MIGradients(float* gradI, float* gradJ, const float* I, const float* J, const float* mask,
                 std::size_t nv, const math::MiBins& b, const float* hostLI, const float* hostLJ,
                 float gscale) {
  const char* op = "MutualInformationGradients";
  if (nv == 0) return;
  const std::size_t nb = std::size_t(b.nI) * std::size_t(b.nJ);
  Scratch L(2 * nb * sizeof(float), op);
  check(cudaMemcpyAsync(L.as<float>(), hostLI, nb * sizeof(float), cudaMemcpyHostToDevice, stream()), op,
        "cudaMemcpyAsync");
  check(cudaMemcpyAsync(L.as<float>() + nb, hostLJ, nb * sizeof(float), cudaMemcpyHostToDevice, stream()), op,
        "cudaMemcpyAsync");
  const unsigned blocks = residentBlocks(nv, 4, op);  // a few blocks per SM: each reads the tables once
  if (2 * nb * sizeof(double) <= kSharedBytes) {
    miGradPairKernel<true><<<blocks, kBlock, 2 * nb * sizeof(double), stream()>>>(
        gradI, gradJ, I, J, mask, nv, b, L.as<float>(), L.as<float>() + nb, gscale);
  } else {
    miGradPairKernel<false><<<blocks, kBlock, 0, stream()>>>(gradI, gradJ, I, J, mask, nv, b, L.as<float>(),
                                                             L.as<float>() + nb, gscale);
  }
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
