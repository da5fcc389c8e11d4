// CUDA backend of the deformation family: the kernels behind the public functions of
// core/src/ops/deformation.cpp. The per-voxel math is in pyca/math/interp.h and
// pyca/math/deformation.h, shared with the CPU loops. Everything is enqueued on
// pyca::currentStream(); nothing synchronises.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ops/cuda_common.cuh"
#include "ops/deformation_cuda.h"
#include "pyca/errors.h"
#include "pyca/math/deformation.h"
#include "pyca/math/interp.h"
#include "pyca/runtime.h"

namespace pyca {
namespace cuda_impl {

namespace {

using math::MutPlanes;
using math::Planes;

constexpr unsigned kAllBgs = math::kFieldBgs | math::bgBit(BACKGROUND_STRATEGY_VAL);
constexpr int kMaxConvTaps = 255;

using math::mutPlanes;
using math::nVoxOf;
using math::planes;

// Voxel loops: threads along x (coalesced; one warp = 32 consecutive x of one row, which the
// splats rely on), blocks over x, y and z; z grid-strided beyond 65535.
constexpr int kBlockX = 32, kBlockY = 8;
struct Launch {
  dim3 grid, block;
};
// zPerThread > 1: fewer blocks along z, each thread looping over that many slices.
Launch launchFor(const Vec3Di& n, int zPerThread = 1) {
  Launch l;
  l.block = dim3(kBlockX, kBlockY, 1);
  l.grid = dim3(unsigned((n.x + kBlockX - 1) / kBlockX), unsigned((n.y + kBlockY - 1) / kBlockY),
                unsigned(std::min((n.z + zPerThread - 1) / zPerThread, 65535)));
  return l;
}
// Slices per thread of the gathers (ApplyH, ComposeHH, Resample, ...), consecutive
// (PYCA_VOXEL_RUNS): 4 runs ApplyH 10% faster than 1 on an H100 (benchmarks/lab/notes.md).
constexpr int kGatherZPerThread = 4;
// Slices per thread of the splats (a voxel's upper z-taps join the next slice's lower ones).
constexpr int kSplatZRun = 8;
#define PYCA_VOXEL_LOOP(n)                                  \
  const int x = int(blockIdx.x * blockDim.x + threadIdx.x); \
  const int y = int(blockIdx.y * blockDim.y + threadIdx.y); \
  if (x >= (n).x || y >= (n).y) return;                     \
  for (int z = int(blockIdx.z); z < (n).z; z += int(gridDim.z))

// ---------------------------------------------------------------------------------------------
// Kernels

// Index: the type of the source's linear indices (uint32_t when it has fewer than 2^32 voxels).
template <InterpT I, BackgroundStrategy BG, int NC, class Index>
__global__ void gatherKernel(MutPlanes<NC> out, Planes<NC> src, Vec3Di srcSize, Vec3Di outSize,
                             math::PosSpec pos, math::PostSpec post, float bgVal) {
  PYCA_VOXEL_RUNS(outSize, kGatherZPerThread) {
    const std::size_t id = math::linearIndex(x, y, z, outSize);
    math::gatherVoxel<I, BG, NC, Index>(out, src, srcSize, pos, post, bgVal, x, y, z, id);
  }
}

// ---------------------------------------------------------------------------------------------
// Splatting with atomicAdd. The taps and weights are those of math::splatPoint<BG> (the transpose
// of trilinear interpolation); only where and in which order the products are added differs from
// the CPU. The kernel was bound by its own instructions and by the atomics in the L2
// (benchmarks/lab/notes.md), so it sends fewer atomics, with fewer instructions:
// - along x (the lanes of a warp), a lane's second x-tap is usually the next lane's first one: the
//   two are added through a warp shuffle and sent once;
// - along z (each thread walks kSplatZRun consecutive slices), the upper z-taps of a voxel are
//   usually the lower z-taps of the next voxel: they are held in registers until then, added, and
//   sent once;
// - an add of exactly 0 (a zero weight, or a zero value: the background of an image) is not sent;
// - a warp whose 32 samples are finite and have all 8 taps inside the grid takes a short path:
//   there every linear background strategy gives the same taps and weights, and one shuffled
//   index tells whether the neighbouring lane's taps are this lane's.

namespace splatting {
constexpr unsigned kFull = 0xffffffffu;

// One lane's add: NV values at linear index a of the NV destination planes (a < 0: nothing).
template <int NV, class Index>
struct Add {
  Index a;
  float v[NV];
};

// The adds of the 8 taps of one voxel: [kz][ky][kx].
template <int NV, class Index>
struct VoxelAdds {
  Add<NV, Index> e[2][2][2];
};

template <int NV, class Index>
__device__ void send(const Add<NV, Index>& e, float* const dst[NV]) {
  if (e.a < 0) return;
  PYCA_UNROLL
  for (int c = 0; c < NV; ++c) {
    if (e.v[c] != 0.f) atomicAdd(dst[c] + e.a, e.v[c]);
  }
}

// Any position and strategy: the taps of math::axisTaps, and per row (ky, kz) the previous lane's
// second x-tap added to this lane's first one when both land on one voxel.
template <BackgroundStrategy BG, int NV, class Index>
__device__ void generalAdds(bool active, const Vec3Df& p, const float val[NV], const Vec3Di& n,
                            VoxelAdds<NV, Index>& r) {
  const unsigned lane = threadIdx.x & 31u;
  math::AxisTaps<2> tx{}, ty{}, tz{};
  if (active) {
    active = math::axisTaps<INTERP_LINEAR, BG>(p.x, n.x, tx) &
             math::axisTaps<INTERP_LINEAR, BG>(p.y, n.y, ty) &
             math::axisTaps<INTERP_LINEAR, BG>(p.z, n.z, tz);
  }
  const Index nx = Index(n.x), nxy = Index(n.x) * Index(n.y);
  PYCA_UNROLL
  for (int kz = 0; kz < 2; ++kz) {
    PYCA_UNROLL
    for (int ky = 0; ky < 2; ++ky) {
      const bool row = active && tz.w[kz] != 0.f && tz.ok[kz] && ty.w[ky] != 0.f && ty.ok[ky];
      const Index base = Index(tz.idx[kz]) * nxy + Index(ty.idx[ky]) * nx;
      const bool a0 = row && tx.w[0] != 0.f && tx.ok[0];
      const bool a1 = row && tx.w[1] != 0.f && tx.ok[1];
      const Index addr0 = a0 ? base + Index(tx.idx[0]) : Index(-1);
      const Index addr1 = a1 ? base + Index(tx.idx[1]) : Index(-2);
      // Every lane shuffles (no short-circuit before a shuffle: the whole warp must take part).
      const Index prevAddr1 = __shfl_up_sync(kFull, addr1, 1);
      const Index nextAddr0 = __shfl_down_sync(kFull, addr0, 1);
      const bool take = lane != 0 && a0 && prevAddr1 == addr0;
      const bool give = lane != 31 && a1 && nextAddr0 == addr1;
      const float wzy = tz.w[kz] * ty.w[ky];
      const float w0 = wzy * tx.w[0], w1 = wzy * tx.w[1];
      Add<NV, Index>& e0 = r.e[kz][ky][0];
      Add<NV, Index>& e1 = r.e[kz][ky][1];
      PYCA_UNROLL
      for (int c = 0; c < NV; ++c) {
        const float prev = __shfl_up_sync(kFull, w1 * val[c], 1);
        e0.v[c] = w0 * val[c] + (take ? prev : 0.f);
        e1.v[c] = w1 * val[c];
      }
      e0.a = a0 ? addr0 : Index(-1);
      e1.a = (a1 && !give) ? addr1 : Index(-1);
    }
  }
}

// Every lane's sample is finite with its 8 taps inside the grid (or the lane is inactive: then its
// weights and values are 0). Taps along an axis: i = floor(x), weights 1 - f and f, what
// axisTaps gives there for CLAMP, WRAP, ZERO and PARTIAL_ZERO alike. The previous lane's taps are
// this lane's shifted by one x exactly when its first tap's index is this lane's minus 1.
template <int NV, class Index>
__device__ void interiorAdds(bool active, const Vec3Df& p, const float val[NV], const Vec3Di& n,
                             VoxelAdds<NV, Index>& r) {
  const unsigned lane = threadIdx.x & 31u;
  float wx[2] = {0.f, 0.f}, wy[2] = {0.f, 0.f}, wz[2] = {0.f, 0.f};
  const int ix = active ? int(p.x) : 0, iy = active ? int(p.y) : 0, iz = active ? int(p.z) : 0;
  if (active) {  // p >= 0 here, so int() is floor
    math::fractionWeights<INTERP_LINEAR>(p.x - float(ix), wx);
    math::fractionWeights<INTERP_LINEAR>(p.y - float(iy), wy);
    math::fractionWeights<INTERP_LINEAR>(p.z - float(iz), wz);
  }
  const Index nx = Index(n.x), nxy = Index(n.x) * Index(n.y);
  // Inactive lanes get an index that matches no neighbour's (so they neither take nor give).
  const Index first = active ? (Index(iz) * nxy + Index(iy) * nx + Index(ix)) : Index(-4) - Index(lane) * 4;
  const Index prevFirst = __shfl_up_sync(kFull, first, 1);
  const Index nextFirst = __shfl_down_sync(kFull, first, 1);
  const bool take = lane != 0 && prevFirst + 1 == first;
  const bool give = lane != 31 && nextFirst == first + 1;
  PYCA_UNROLL
  for (int kz = 0; kz < 2; ++kz) {
    PYCA_UNROLL
    for (int ky = 0; ky < 2; ++ky) {
      const float wzy = wz[kz] * wy[ky];
      const float w0 = wzy * wx[0], w1 = wzy * wx[1];
      Add<NV, Index>& e0 = r.e[kz][ky][0];
      Add<NV, Index>& e1 = r.e[kz][ky][1];
      PYCA_UNROLL
      for (int c = 0; c < NV; ++c) {
        const float own1 = w1 * val[c];
        const float prev = __shfl_up_sync(kFull, own1, 1);
        e0.v[c] = w0 * val[c] + (take ? prev : 0.f);
        e1.v[c] = give ? 0.f : own1;
      }
      e0.a = active ? first + Index(kz) * nxy + Index(ky) * nx : Index(-1);
      e1.a = active ? e0.a + 1 : Index(-1);
    }
  }
}

// Splats the inSize voxels: source(x, y, z, p, v) gives the position p (output voxel units) and the
// NC values v of input voxel (x, y, z); W: 1 is splatted into weights too. Each thread walks ZRun
// slices along z. Every lane of a warp stays in the loop (lanes past the end of a row are
// inactive) so that the shuffles see full warps.
template <BackgroundStrategy BG, int NC, bool W, int ZRun, class Index, class Source>
__global__ void __launch_bounds__(256)
    splatKernel(MutPlanes<NC> out, float* weights, Vec3Di outSize, Vec3Di inSize, Source source) {
  constexpr int NV = NC + (W ? 1 : 0);
  float* dst[NV];
  PYCA_UNROLL
  for (int c = 0; c < NC; ++c) dst[c] = out.p[c];
  if constexpr (W) dst[NC] = weights;
  const int x = int(blockIdx.x * blockDim.x + threadIdx.x);
  const int y = int(blockIdx.y * blockDim.y + threadIdx.y);
  if (y >= inSize.y) return;  // the whole warp (blockDim.x == 32)
  const bool inX = x < inSize.x;
  const bool canInterior = outSize.x > 1 && outSize.y > 1 && outSize.z > 1;
  const Vec3Df last(float(outSize.x - 1), float(outSize.y - 1), float(outSize.z - 1));
  for (int z0 = int(blockIdx.z) * ZRun; z0 < inSize.z; z0 += int(gridDim.z) * ZRun) {
    const int z1 = min(z0 + ZRun, inSize.z);
    Add<NV, Index> held[2][2];  // the upper z-taps of the previous slice: [ky][kx]
    PYCA_UNROLL
    for (int i = 0; i < 4; ++i) held[i / 2][i % 2].a = Index(-1);
    for (int z = z0; z < z1; ++z) {
      Vec3Df p(0.f, 0.f, 0.f);
      float val[NV];
      PYCA_UNROLL
      for (int c = 0; c < NV; ++c) val[c] = 1.f;
      if (inX) source(x, y, z, p, val);
      bool simple = p.x >= 0.f && p.x < last.x && p.y >= 0.f && p.y < last.y && p.z >= 0.f && p.z < last.z;
      PYCA_UNROLL
      for (int c = 0; c < NC; ++c) simple &= isfinite(val[c]);
      VoxelAdds<NV, Index> r;
      const bool allSimple = __all_sync(kFull, simple || !inX);
      if (canInterior && allSimple) {
        interiorAdds<NV, Index>(inX, p, val, outSize, r);
      } else {
        generalAdds<BG, NV, Index>(inX, p, val, outSize, r);
      }
      // What the previous slice held for the same taps joins these adds; the rest goes out.
      PYCA_UNROLL
      for (int i = 0; i < 4; ++i) {
        Add<NV, Index>& h = held[i / 2][i % 2];
        Add<NV, Index>& e = r.e[0][i / 2][i % 2];
        if (h.a >= 0 && h.a == e.a) {
          PYCA_UNROLL
          for (int c = 0; c < NV; ++c) e.v[c] += h.v[c];
        } else {
          send(h, dst);
        }
        send(e, dst);
        h = r.e[1][i / 2][i % 2];
      }
    }
    PYCA_UNROLL
    for (int i = 0; i < 4; ++i) send(held[i / 2][i % 2], dst);
  }
}
}  // namespace splatting

// Sources of the splat kernels.
template <int NC>
struct ValueSource {  // Splat, SplatWorld: values of an array at pos.at(x)
  Planes<NC> val;
  math::PosSpec pos;
  Vec3Di n;
  __device__ void operator()(int x, int y, int z, Vec3Df& p, float* v) const {
    const std::size_t id = math::linearIndex(x, y, z, n);
    p = pos.at(x, y, z, id);
    PYCA_UNROLL
    for (int c = 0; c < NC; ++c) v[c] = val.p[c][id];
  }
};

struct AdSource {  // Ad: |Dg| Dg_w X at g(x)
  Planes<3> g, X;
  Vec3Di n;
  Vec3Df sp;
  __device__ void operator()(int x, int y, int z, Vec3Df& p, float* v) const {
    const std::size_t id = math::linearIndex(x, y, z, n);
    p = Vec3Df(g.p[0][id], g.p[1][id], g.p[2][id]);
    float J[3][3];
    math::jacobianH(g, n, x, y, z, J);
    const Vec3Df a = math::adValue(J, Vec3Df(X.p[0][id], X.p[1][id], X.p[2][id]), sp);
    v[0] = a.x;
    v[1] = a.y;
    v[2] = a.z;
  }
};

template <int NC>
__global__ void normalizeKernel(MutPlanes<NC> out, const float* __restrict__ weights, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float w = weights[i];
    PYCA_UNROLL
    for (int c = 0; c < NC; ++c) out.p[c][i] = w > deformation_impl::kSplatWeightEps ? out.p[c][i] / w : 0.f;
  }
}

template <BackgroundStrategy BG>
__global__ void coadKernel(MutPlanes<3> out, Planes<3> g, Planes<3> m, Vec3Di n, Vec3Df sp) {
  PYCA_VOXEL_LOOP(n) {
    const std::size_t id = math::linearIndex(x, y, z, n);
    float J[3][3];
    math::jacobianH(g, n, x, y, z, J);
    float mg[3];
    math::interpolate<INTERP_LINEAR, BG, 3>(mg, m, n, Vec3Df(g.p[0][id], g.p[1][id], g.p[2][id]));
    const Vec3Df r = math::coadValue(J, Vec3Df(mg[0], mg[1], mg[2]), sp);
    out.p[0][id] = r.x;
    out.p[1][id] = r.y;
    out.p[2][id] = r.z;
  }
}

__global__ void identityKernel(MutPlanes<3> h, Vec3Di n) {
  PYCA_VOXEL_LOOP(n) {
    const std::size_t id = math::linearIndex(x, y, z, n);
    h.p[0][id] = float(x);
    h.p[1][id] = float(y);
    h.p[2][id] = float(z);
  }
}

__global__ void convertHVKernel(MutPlanes<3> out, Planes<3> in, Vec3Di n, Vec3Df sp, bool toV) {
  PYCA_VOXEL_LOOP(n) {
    const std::size_t id = math::linearIndex(x, y, z, n);
    const Vec3Df a(in.p[0][id], in.p[1][id], in.p[2][id]);
    const Vec3Df r = toV ? math::hToV(a, x, y, z, sp) : math::vToH(a, x, y, z, sp);
    out.p[0][id] = r.x;
    out.p[1][id] = r.y;
    out.p[2][id] = r.z;
  }
}

__global__ void copyBoxKernel(float* __restrict__ dst, Vec3Di dstSize, Vec3Di dstStart,
                              const float* __restrict__ src, Vec3Di srcSize, Vec3Di srcStart, Vec3Di extent) {
  PYCA_VOXEL_LOOP(extent) {
    dst[math::linearIndex(dstStart.x + x, dstStart.y + y, dstStart.z + z, dstSize)] =
        src[math::linearIndex(srcStart.x + x, srcStart.y + y, srcStart.z + z, srcSize)];
  }
}

struct ConvTaps {
  float w[kMaxConvTaps];
};

__global__ void convolveAxisKernel(float* __restrict__ out, const float* __restrict__ in, Vec3Di n, int axis,
                                   ConvTaps taps, int radius) {
  PYCA_VOXEL_LOOP(n) {
    const std::size_t id = math::linearIndex(x, y, z, n);
    const int i = axis == 0 ? x : (axis == 1 ? y : z);
    const int m = axis == 0 ? n.x : (axis == 1 ? n.y : n.z);
    const std::size_t stride =
        axis == 0 ? 1 : (axis == 1 ? std::size_t(n.x) : std::size_t(n.x) * std::size_t(n.y));
    const std::size_t base = id - std::size_t(i) * stride;
    float acc = 0.f;
    for (int k = -radius; k <= radius; ++k) {
      acc += taps.w[k + radius] * in[base + std::size_t(math::clampIndex(i + k, m)) * stride];
    }
    out[id] = acc;
  }
}

__global__ void reprojectKernel(MutPlanes<3> f, Vec3Di n) {
  PYCA_VOXEL_LOOP(n) {
    const std::size_t id = math::linearIndex(x, y, z, n);
    const Vec3Df r = math::reprojectToUnitVec(Vec3Df(f.p[0][id], f.p[1][id], f.p[2][id]));
    f.p[0][id] = r.x;
    f.p[1][id] = r.y;
    f.p[2][id] = r.z;
  }
}

__global__ void composeBorderKernel(MutPlanes<3> out, Vec3Di outSize, Planes<3> f, Vec3Di fSize,
                                    Planes<3> g) {
  PYCA_VOXEL_LOOP(outSize) {
    math::composeBorderVoxel(out, f, g, fSize, math::linearIndex(x, y, z, outSize));
  }
}

__global__ void unblurredKernel(float* out, Vec3Di outSize, Planes<4> src, Vec3Di srcSize, Planes<3> h) {
  PYCA_VOXEL_LOOP(outSize) {
    math::unblurredVoxel(out, src, srcSize, h, math::linearIndex(x, y, z, outSize));
  }
}

__global__ void fixedPointInverseKernel(MutPlanes<3> ginv, Planes<3> g, Vec3Di n, unsigned numIter) {
  PYCA_VOXEL_LOOP(n) {
    const std::size_t id = math::linearIndex(x, y, z, n);
    const Vec3Df h = math::fixedPointInverseVoxel<BACKGROUND_STRATEGY_PARTIAL_ID>(
        g, n, Vec3Df(ginv.p[0][id], ginv.p[1][id], ginv.p[2][id]), x, y, z, numIter);
    ginv.p[0][id] = h.x;
    ginv.p[1][id] = h.y;
    ginv.p[2][id] = h.z;
  }
}

__global__ void updateInverseKernel(MutPlanes<3> ginv1, MutPlanes<3> scratch, Planes<3> ginv0, Planes<3> w,
                                    Vec3Di n, Vec3Df sp, unsigned numIter) {
  PYCA_VOXEL_LOOP(n) {
    const std::size_t id = math::linearIndex(x, y, z, n);
    Vec3Df q(0.f, 0.f, 0.f);
    const Vec3Df h = math::updateInverseVoxel(ginv0, w, n, sp, x, y, z, id, numIter, q);
    PYCA_UNROLL
    for (int c = 0; c < 3; ++c) {
      ginv1.p[c][id] = h[c];
      if (numIter > 0) scratch.p[c][id] = q[c];
    }
  }
}

[[noreturn]] void badBg(const char* op) {
  throw ValueError(std::string(op) + ": unsupported background strategy (CUDA backend)");
}

void zero(float* p, std::size_t n, const char* op) {
  check(cudaMemsetAsync(p, 0, n * sizeof(float), stream()), op, "cudaMemsetAsync");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Entry points

template <class Index>
void gatherWith(const GatherJob& j, const char* op) {
  const Launch l = launchFor(j.outSize, kGatherZPerThread);
  const cudaStream_t s = stream();
  const bool ok = math::withInterp(j.interp, [&](auto I) {
    constexpr InterpT IT = decltype(I)::value;
    if (!math::withBg<kAllBgs>(j.bg, [&](auto B) {
          constexpr BackgroundStrategy BG = decltype(B)::value;
          if (j.nc == 3) {
            gatherKernel<IT, BG, 3, Index><<<l.grid, l.block, 0, s>>>(
                mutPlanes<3>(j.out), planes<3>(j.src), j.srcSize, j.outSize, j.pos, j.post, j.bgVal);
          } else if constexpr (!math::isIdentityBg(BG)) {
            gatherKernel<IT, BG, 1, Index><<<l.grid, l.block, 0, s>>>(
                mutPlanes<1>(j.out), planes<1>(j.src), j.srcSize, j.outSize, j.pos, j.post, j.bgVal);
          } else {
            badBg(op);
          }
        })) {
      badBg(op);
    }
  });
  if (!ok) throw ValueError(std::string(op) + ": unknown interpolation method");
}

void gather(const GatherJob& j, const char* op) {
  if (nVoxOf(j.outSize) == 0) return;
  if (indices32(j.srcSize)) {
    gatherWith<std::uint32_t>(j, op);
  } else {
    gatherWith<std::size_t>(j, op);
  }
  checkLaunch(op);
}

// Launches splatting::splatKernel for the strategy bg: ZRun slices per thread, 32-bit indices when
// the output grid allows.
template <int NC, class Source, int ZRun = kSplatZRun>
void launchSplat(const MutPlanes<NC>& out, float* weights, const Vec3Di& outSize, const Vec3Di& inSize,
                 const Source& src, BackgroundStrategy bg, const char* op) {
  if (nVoxOf(inSize) == 0) return;
  const Launch l = launchFor(inSize, ZRun);
  const cudaStream_t s = stream();
  const bool small = nVoxOf(outSize) < std::size_t(INT32_MAX);
  const bool ok = math::withBg<math::kLinearBgs>(bg, [&](auto B) {
    constexpr BackgroundStrategy BG = decltype(B)::value;
    auto go = [&](auto withWeights, auto index) {
      constexpr bool W = decltype(withWeights)::value;
      using Index = decltype(index);
      splatting::splatKernel<BG, NC, W, ZRun, Index>
          <<<l.grid, l.block, 0, s>>>(out, weights, outSize, inSize, src);
    };
    if (weights) {
      small ? go(std::true_type{}, int{}) : go(std::true_type{}, (long long){});
    } else {
      small ? go(std::false_type{}, int{}) : go(std::false_type{}, (long long){});
    }
  });
  if (!ok) badBg(op);
  checkLaunch(op);
}

void splat(const SplatJob& j, const char* op) {
  const std::size_t nOut = nVoxOf(j.outSize);
  for (int c = 0; c < j.nc; ++c) zero(j.out[c], nOut, op);
  if (j.weights) zero(j.weights, nOut, op);
  if (j.normalize && !j.weights) throw ValueError(std::string(op) + ": normalised splat without weights");
  if (j.nc == 3) {
    launchSplat<3>(mutPlanes<3>(j.out), j.weights, j.outSize, j.inSize,
                   ValueSource<3>{planes<3>(j.val), j.pos, j.inSize}, j.bg, op);
  } else {
    launchSplat<1>(mutPlanes<1>(j.out), j.weights, j.outSize, j.inSize,
                   ValueSource<1>{planes<1>(j.val), j.pos, j.inSize}, j.bg, op);
  }
  if (j.normalize && nOut > 0) {
    const unsigned block = 256;
    const unsigned grid = unsigned(std::min<std::size_t>((nOut + block - 1) / block, 65535u * 8));
    if (j.nc == 3) {
      normalizeKernel<3><<<grid, block, 0, stream()>>>(mutPlanes<3>(j.out), j.weights, nOut);
    } else {
      normalizeKernel<1><<<grid, block, 0, stream()>>>(mutPlanes<1>(j.out), j.weights, nOut);
    }
    checkLaunch(op);
  }
}

void ad(float* const out[3], const float* const g[3], const float* const X[3], const Vec3Di& size,
        const Vec3Df& sp, BackgroundStrategy bg, const char* op) {
  const std::size_t n = nVoxOf(size);
  for (int c = 0; c < 3; ++c) zero(out[c], n, op);
  launchSplat<3>(mutPlanes<3>(out), nullptr, size, size, AdSource{planes<3>(g), planes<3>(X), size, sp}, bg,
                 op);
}

void coad(float* const out[3], const float* const g[3], const float* const m[3], const Vec3Di& size,
          const Vec3Df& sp, BackgroundStrategy bg, const char* op) {
  if (nVoxOf(size) == 0) return;
  const Launch l = launchFor(size);
  if (!math::withBg<math::kLinearBgs>(bg, [&](auto B) {
        coadKernel<decltype(B)::value>
            <<<l.grid, l.block, 0, stream()>>>(mutPlanes<3>(out), planes<3>(g), planes<3>(m), size, sp);
      })) {
    badBg(op);
  }
  checkLaunch(op);
}

void setToIdentity(float* const h[3], const Vec3Di& size, const char* op) {
  if (nVoxOf(size) == 0) return;
  const Launch l = launchFor(size);
  identityKernel<<<l.grid, l.block, 0, stream()>>>(mutPlanes<3>(h), size);
  checkLaunch(op);
}

void convertHV(float* const out[3], const float* const in[3], const Vec3Di& size, const Vec3Df& sp, bool toV,
               const char* op) {
  if (nVoxOf(size) == 0) return;
  const Launch l = launchFor(size);
  convertHVKernel<<<l.grid, l.block, 0, stream()>>>(mutPlanes<3>(out), planes<3>(in), size, sp, toV);
  checkLaunch(op);
}

void copyBox(int nc, float* const dst[3], const Vec3Di& dstSize, const Vec3Di& dstStart,
             const float* const src[3], const Vec3Di& srcSize, const Vec3Di& srcStart, const Vec3Di& extent,
             const char* op) {
  if (nVoxOf(extent) == 0) return;
  const Launch l = launchFor(extent);
  for (int c = 0; c < nc; ++c) {
    copyBoxKernel<<<l.grid, l.block, 0, stream()>>>(dst[c], dstSize, dstStart, src[c], srcSize, srcStart,
                                                    extent);
  }
  checkLaunch(op);
}

void convolveAxis(int nc, float* const out[3], const float* const in[3], const Vec3Di& size, int axis,
                  const float* weights, int radius, const char* op) {
  if (2 * radius + 1 > kMaxConvTaps) {
    throw ValueError(std::string(op) + ": anti-aliasing kernel too long (downsampling factor above 160)");
  }
  if (nVoxOf(size) == 0) return;
  ConvTaps taps{};
  for (int k = 0; k < 2 * radius + 1; ++k) taps.w[k] = weights[k];
  const Launch l = launchFor(size);
  for (int c = 0; c < nc; ++c) {
    convolveAxisKernel<<<l.grid, l.block, 0, stream()>>>(out[c], in[c], size, axis, taps, radius);
  }
  checkLaunch(op);
}

void reprojectToUnitVec(float* const f[3], const Vec3Di& size, const char* op) {
  if (nVoxOf(size) == 0) return;
  const Launch l = launchFor(size);
  reprojectKernel<<<l.grid, l.block, 0, stream()>>>(mutPlanes<3>(f), size);
  checkLaunch(op);
}

void composeBorder(float* const out[3], const Vec3Di& outSize, const float* const f[3], const Vec3Di& fSize,
                   const float* const g[3], const char* op) {
  if (nVoxOf(outSize) == 0) return;
  const Launch l = launchFor(outSize);
  composeBorderKernel<<<l.grid, l.block, 0, stream()>>>(mutPlanes<3>(out), outSize, planes<3>(f), fSize,
                                                        planes<3>(g));
  checkLaunch(op);
}

void unblurred(float* out, const Vec3Di& outSize, const float* const src[4], const Vec3Di& srcSize,
               const float* const h[3], const char* op) {
  if (nVoxOf(outSize) == 0) return;
  const Launch l = launchFor(outSize);
  unblurredKernel<<<l.grid, l.block, 0, stream()>>>(out, outSize, planes<4>(src), srcSize, planes<3>(h));
  checkLaunch(op);
}

void fixedPointInverse(float* const ginv[3], const float* const g[3], const Vec3Di& size, unsigned numIter,
                       const char* op) {
  if (nVoxOf(size) == 0) return;
  const Launch l = launchFor(size);
  fixedPointInverseKernel<<<l.grid, l.block, 0, stream()>>>(mutPlanes<3>(ginv), planes<3>(g), size, numIter);
  checkLaunch(op);
}

void updateInverse(float* const ginv1[3], float* const scratch[3], const float* const ginv0[3],
                   const float* const w[3], const Vec3Di& size, const Vec3Df& sp, unsigned numIter,
                   const char* op) {
  if (nVoxOf(size) == 0) return;
  const Launch l = launchFor(size);
  updateInverseKernel<<<l.grid, l.block, 0, stream()>>>(mutPlanes<3>(ginv1), mutPlanes<3>(scratch),
                                                        planes<3>(ginv0), planes<3>(w), size, sp, numIter);
  checkLaunch(op);
}

}  // namespace cuda_impl
}  // namespace pyca
