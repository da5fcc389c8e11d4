// CPU backend of the deformation family (OpenMP): the loops behind the public functions of
// deformation.cpp. The per-voxel math is in pyca/math/interp.h and pyca/math/deformation.h.
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "ops/deformation_cuda.h"
#include "ops/deformation_simd.h"
#include "pyca/detail/omp_guard.h"
#include "pyca/detail/parallel.h"
#include "pyca/errors.h"
#include "pyca/math/deformation.h"
#include "pyca/math/interp.h"

namespace pyca {
namespace cpu_impl {

namespace {

using math::MutPlanes;
using math::Planes;

constexpr unsigned kAllBgs = math::kFieldBgs | math::bgBit(BACKGROUND_STRATEGY_VAL);

using math::mutPlanes;
using math::nVoxOf;
using math::planes;

// ---------------------------------------------------------------------------------------------
// Gather: one output voxel per iteration, rows of x in parallel.

template <InterpT I, BackgroundStrategy BG, int NC>
void gatherLoop(const GatherJob& j) {
  const MutPlanes<NC> out = mutPlanes<NC>(j.out);
  const Planes<NC> src = planes<NC>(j.src);
  const Vec3Di n = j.outSize;
#pragma omp parallel for collapse(2) schedule(static) num_threads(detail::threadsFor(nVoxOf(n)))
  for (int z = 0; z < n.z; ++z) {
    for (int y = 0; y < n.y; ++y) {
      std::size_t id = math::linearIndex(0, y, z, n);
      for (int x = 0; x < n.x; ++x, ++id) {
        math::gatherVoxel<I, BG, NC>(out, src, j.srcSize, j.pos, j.post, j.bgVal, x, y, z, id);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Splat: deterministic without atomics. The input rows are cut into at most kMaxChunks chunks (a
// number that depends on the sizes and the data, never on the thread count); each chunk splats, in
// order, into a private buffer covering the output planes (along the slowest output axis of size >
// 1) its samples reach; the buffers are then summed plane by plane in chunk order. When the
// buffers would need more than the memory budget, neighbouring chunks are merged.

constexpr int kMaxChunks = 16;

struct Chunk {
  long r0 = 0, r1 = 0;  // input rows [r0, r1) (row = y + ny * z)
  int lo = 0, hi = -1;  // output planes touched, [lo, hi]
  std::vector<float> buf;
};

// Source: pos(x, y, z, id) -> Vec3Df (output voxel units) and value(x, y, z, id, float v[NC]).
template <BackgroundStrategy BG, int NC, class Source>
void splatEngine(float* const out[NC], float* weights, const Vec3Di& outSize, const Vec3Di& inSize,
                 const Source& src) {
  const int slow = outSize.z > 1 ? 2 : (outSize.y > 1 ? 1 : (outSize.x > 1 ? 0 : 2));
  const std::size_t planeSize =
      slow == 2 ? std::size_t(outSize.x) * std::size_t(outSize.y) : (slow == 1 ? std::size_t(outSize.x) : 1);
  const int nPlanes = outSize[slow];
  const int nPlanesOut = NC + (weights ? 1 : 0);
  const long nRows = long(inSize.y) * long(inSize.z);
  const std::size_t nOut = nVoxOf(outSize);

  auto runRows = [&](long r0, long r1, auto&& add) {
    for (long r = r0; r < r1; ++r) {
      const int y = int(r % inSize.y), z = int(r / inSize.y);
      std::size_t id = math::linearIndex(0, y, z, inSize);
      for (int x = 0; x < inSize.x; ++x, ++id) {
        const Vec3Df p = src.pos(x, y, z, id);
        float v[NC] = {};
        bool have = false;
        math::splatPoint<BG>(outSize, p, [&](std::size_t o, float w) {
          if (!have) {
            src.value(x, y, z, id, v);
            have = true;
          }
          add(o, w, v);
        });
      }
    }
  };

  int nChunks = int(std::min<long>(kMaxChunks, std::max<long>(1, nRows)));
  if (nVoxOf(inSize) < std::size_t(detail::kParallelMin))
    nChunks = 1;  // small problems: one chunk, straight into out

  std::vector<Chunk> chunks;
  if (nChunks > 1) {
    chunks.resize(std::size_t(nChunks));
    for (int k = 0; k < nChunks; ++k) {
      chunks[k].r0 = nRows * k / nChunks;
      chunks[k].r1 = nRows * (k + 1) / nChunks;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(detail::threadsFor(nVoxOf(inSize)))
    for (int k = 0; k < nChunks; ++k) {
      Chunk& ch = chunks[std::size_t(k)];
      for (long r = ch.r0; r < ch.r1; ++r) {
        const int y = int(r % inSize.y), z = int(r / inSize.y);
        std::size_t id = math::linearIndex(0, y, z, inSize);
        for (int x = 0; x < inSize.x; ++x, ++id) {
          const Vec3Df p = src.pos(x, y, z, id);
          int lo, hi;
          math::splatAxisRange<BG>(p[slow], nPlanes, lo, hi);
          if (lo <= hi) {
            ch.lo = ch.hi < ch.lo ? lo : std::min(ch.lo, lo);
            ch.hi = std::max(ch.hi, hi);
          }
        }
      }
    }
    auto bytes = [&]() {
      std::size_t b = 0;
      for (const Chunk& ch : chunks) {
        if (ch.hi >= ch.lo)
          b += std::size_t(ch.hi - ch.lo + 1) * planeSize * std::size_t(nPlanesOut) * sizeof(float);
      }
      return b;
    };
    const std::size_t budget = std::max<std::size_t>(std::size_t(512) << 20, 2 * nOut * sizeof(float) * NC);
    while (chunks.size() > 1 && bytes() > budget) {
      std::vector<Chunk> merged;
      for (std::size_t k = 0; k < chunks.size(); k += 2) {
        Chunk m = chunks[k];
        if (k + 1 < chunks.size()) {
          const Chunk& b = chunks[k + 1];
          m.r1 = b.r1;
          if (b.hi >= b.lo) {
            m.lo = m.hi < m.lo ? b.lo : std::min(m.lo, b.lo);
            m.hi = std::max(m.hi, b.hi);
          }
        }
        merged.push_back(m);
      }
      chunks.swap(merged);
    }
    nChunks = int(chunks.size());
  }

  if (nChunks == 1) {
    for (int c = 0; c < NC; ++c) std::fill(out[c], out[c] + nOut, 0.f);
    if (weights) std::fill(weights, weights + nOut, 0.f);
    runRows(0, nRows, [&](std::size_t o, float w, const float* v) {
      for (int c = 0; c < NC; ++c) out[c][o] += w * v[c];
      if (weights) weights[o] += w;
    });
    return;
  }

  // The chunk buffers are allocated inside the region: an allocation failure is carried out of it.
  detail::OmpGuard guard;
#pragma omp parallel for schedule(dynamic, 1) num_threads(detail::threadsFor(nVoxOf(inSize)))
  for (int k = 0; k < nChunks; ++k) {
    Chunk& ch = chunks[std::size_t(k)];
    if (ch.hi < ch.lo || guard.failed()) continue;
    const std::size_t base = std::size_t(ch.lo) * planeSize;
    const std::size_t len = std::size_t(ch.hi - ch.lo + 1) * planeSize;
    bool ok = false;
    guard.run([&] {
      ch.buf.assign(len * std::size_t(nPlanesOut), 0.f);
      ok = true;
    });
    if (!ok) continue;
    float* b = ch.buf.data();
    const bool w = weights != nullptr;
    runRows(ch.r0, ch.r1, [&](std::size_t o, float wt, const float* v) {
      const std::size_t i = o - base;
      if (o < base || i >= len) return;  // cannot happen: the range was computed from the same p
      for (int c = 0; c < NC; ++c) b[std::size_t(c) * len + i] += wt * v[c];
      if (w) b[std::size_t(NC) * len + i] += wt;
    });
  }
  guard.rethrow();

#pragma omp parallel for schedule(static) num_threads(detail::threadsFor(nOut))
  for (int P = 0; P < nPlanes; ++P) {
    for (int c = 0; c < nPlanesOut; ++c) {
      float* dst = (c < NC ? out[c] : weights) + std::size_t(P) * planeSize;
      std::fill(dst, dst + planeSize, 0.f);
      for (const Chunk& ch : chunks) {
        if (ch.hi < ch.lo || P < ch.lo || P > ch.hi) continue;
        const std::size_t len = std::size_t(ch.hi - ch.lo + 1) * planeSize;
        const float* s = ch.buf.data() + std::size_t(c) * len + std::size_t(P - ch.lo) * planeSize;
        for (std::size_t i = 0; i < planeSize; ++i) dst[i] += s[i];
      }
    }
  }
}

template <int NC>
void normalizeBy(float* const out[NC], const float* weights, std::size_t n) {
#pragma omp parallel for schedule(static) num_threads(detail::threadsFor(n))
  for (long i = 0; i < long(n); ++i) {
    const float w = weights[i];
    for (int c = 0; c < NC; ++c) out[c][i] = w > deformation_impl::kSplatWeightEps ? out[c][i] / w : 0.f;
  }
}

template <int NC>
struct JobSource {
  const SplatJob* j;
  Vec3Df pos(int x, int y, int z, std::size_t id) const { return j->pos.at(x, y, z, id); }
  void value(int, int, int, std::size_t id, float v[NC]) const {
    for (int c = 0; c < NC; ++c) v[c] = j->val[c][id];
  }
};

struct AdSource {
  Planes<3> g;
  const float* X[3];
  Vec3Di n;
  Vec3Df sp;
  Vec3Df pos(int, int, int, std::size_t id) const { return Vec3Df(g.p[0][id], g.p[1][id], g.p[2][id]); }
  void value(int x, int y, int z, std::size_t id, float v[3]) const {
    float J[3][3];
    math::jacobianH(g, n, x, y, z, J);
    const Vec3Df u = math::adValue(J, Vec3Df(X[0][id], X[1][id], X[2][id]), sp);
    v[0] = u.x;
    v[1] = u.y;
    v[2] = u.z;
  }
};

[[noreturn]] void badBg(const char* what) {
  throw ValueError(std::string("deformation backend: unsupported background strategy for ") + what);
}

}  // namespace

void gather(const GatherJob& j, const char*) {
  if (simd16::gatherLinear(j)) return;  // sixteen voxels at once where the CPU allows (deformation_simd.cpp)
  bool ok = math::withInterp(j.interp, [&](auto I) {
    if (!math::withBg<kAllBgs>(j.bg, [&](auto B) {
          if constexpr (math::isIdentityBg(decltype(B)::value)) {
            if (j.nc != 3) badBg("images");
            gatherLoop<decltype(I)::value, decltype(B)::value, 3>(j);
          } else {
            if (j.nc == 1) {
              gatherLoop<decltype(I)::value, decltype(B)::value, 1>(j);
            } else {
              gatherLoop<decltype(I)::value, decltype(B)::value, 3>(j);
            }
          }
        })) {
      badBg("gather");
    }
  });
  if (!ok) throw ValueError("deformation backend: unknown interpolation method");
}

void splat(const SplatJob& j, const char*) {
  const std::size_t nOut = nVoxOf(j.outSize);
  std::vector<float> tmpW;
  float* weights = j.weights;
  if (j.normalize && !weights) {
    tmpW.resize(nOut);
    weights = tmpW.data();
  }
  if (!math::withBg<math::kLinearBgs>(j.bg, [&](auto B) {
        constexpr BackgroundStrategy BG = decltype(B)::value;
        if (j.nc == 1) {
          splatEngine<BG, 1>(j.out, weights, j.outSize, j.inSize, JobSource<1>{&j});
          if (j.normalize) normalizeBy<1>(j.out, weights, nOut);
        } else {
          splatEngine<BG, 3>(j.out, weights, j.outSize, j.inSize, JobSource<3>{&j});
          if (j.normalize) normalizeBy<3>(j.out, weights, nOut);
        }
      })) {
    badBg("splatting");
  }
}

void ad(float* const out[3], const float* const g[3], const float* const X[3], const Vec3Di& size,
        const Vec3Df& sp, BackgroundStrategy bg, const char*) {
  AdSource s{planes<3>(g), {X[0], X[1], X[2]}, size, sp};
  if (!math::withBg<math::kLinearBgs>(
          bg, [&](auto B) { splatEngine<decltype(B)::value, 3>(out, nullptr, size, size, s); })) {
    badBg("Ad");
  }
}

void coad(float* const out[3], const float* const g[3], const float* const m[3], const Vec3Di& size,
          const Vec3Df& sp, BackgroundStrategy bg, const char*) {
  const Planes<3> gp = planes<3>(g), mp = planes<3>(m);
  if (!math::withBg<math::kLinearBgs>(bg, [&](auto B) {
#pragma omp parallel for collapse(2) schedule(static) num_threads(detail::threadsFor(nVoxOf(size)))
        for (int z = 0; z < size.z; ++z) {
          for (int y = 0; y < size.y; ++y) {
            std::size_t id = math::linearIndex(0, y, z, size);
            for (int x = 0; x < size.x; ++x, ++id) {
              float J[3][3];
              math::jacobianH(gp, size, x, y, z, J);
              float mg[3];
              math::interpolate<INTERP_LINEAR, decltype(B)::value, 3>(
                  mg, mp, size, Vec3Df(gp.p[0][id], gp.p[1][id], gp.p[2][id]));
              const Vec3Df r = math::coadValue(J, Vec3Df(mg[0], mg[1], mg[2]), sp);
              out[0][id] = r.x;
              out[1][id] = r.y;
              out[2][id] = r.z;
            }
          }
        }
      })) {
    badBg("CoAd");
  }
}

void setToIdentity(float* const h[3], const Vec3Di& n, const char*) {
#pragma omp parallel for collapse(2) schedule(static) num_threads(detail::threadsFor(nVoxOf(n)))
  for (int z = 0; z < n.z; ++z) {
    for (int y = 0; y < n.y; ++y) {
      std::size_t id = math::linearIndex(0, y, z, n);
      for (int x = 0; x < n.x; ++x, ++id) {
        h[0][id] = float(x);
        h[1][id] = float(y);
        h[2][id] = float(z);
      }
    }
  }
}

void convertHV(float* const out[3], const float* const in[3], const Vec3Di& n, const Vec3Df& sp, bool toV,
               const char*) {
#pragma omp parallel for collapse(2) schedule(static) num_threads(detail::threadsFor(nVoxOf(n)))
  for (int z = 0; z < n.z; ++z) {
    for (int y = 0; y < n.y; ++y) {
      std::size_t id = math::linearIndex(0, y, z, n);
      for (int x = 0; x < n.x; ++x, ++id) {
        const Vec3Df a(in[0][id], in[1][id], in[2][id]);
        const Vec3Df r = toV ? math::hToV(a, x, y, z, sp) : math::vToH(a, x, y, z, sp);
        out[0][id] = r.x;
        out[1][id] = r.y;
        out[2][id] = r.z;
      }
    }
  }
}

void copyBox(int nc, float* const dst[3], const Vec3Di& dstSize, const Vec3Di& dstStart,
             const float* const src[3], const Vec3Di& srcSize, const Vec3Di& srcStart, const Vec3Di& extent,
             const char*) {
  for (int c = 0; c < nc; ++c) {
#pragma omp parallel for collapse(2) schedule(static) num_threads(detail::threadsFor(nVoxOf(extent)))
    for (int z = 0; z < extent.z; ++z) {
      for (int y = 0; y < extent.y; ++y) {
        const float* s = src[c] + math::linearIndex(srcStart.x, srcStart.y + y, srcStart.z + z, srcSize);
        float* d = dst[c] + math::linearIndex(dstStart.x, dstStart.y + y, dstStart.z + z, dstSize);
        std::copy(s, s + extent.x, d);
      }
    }
  }
}

void convolveAxis(int nc, float* const out[3], const float* const in[3], const Vec3Di& n, int axis,
                  const float* weights, int radius, const char*) {
  const std::size_t stride =
      axis == 0 ? 1 : (axis == 1 ? std::size_t(n.x) : std::size_t(n.x) * std::size_t(n.y));
  const int m = n[axis];
  for (int c = 0; c < nc; ++c) {
    const float* src = in[c];
    float* dst = out[c];
#pragma omp parallel for collapse(2) schedule(static) num_threads(detail::threadsFor(nVoxOf(n)))
    for (int z = 0; z < n.z; ++z) {
      for (int y = 0; y < n.y; ++y) {
        std::size_t id = math::linearIndex(0, y, z, n);
        for (int x = 0; x < n.x; ++x, ++id) {
          const int i = axis == 0 ? x : (axis == 1 ? y : z);
          const std::size_t base = id - std::size_t(i) * stride;
          float acc = 0.f;
          for (int k = -radius; k <= radius; ++k) {
            const int j = math::clampIndex(i + k, m);
            acc += weights[k + radius] * src[base + std::size_t(j) * stride];
          }
          dst[id] = acc;
        }
      }
    }
  }
}

void reprojectToUnitVec(float* const f[3], const Vec3Di& n, const char*) {
#pragma omp parallel for schedule(static) num_threads(detail::threadsFor(nVoxOf(n)))
  for (long i = 0; i < long(nVoxOf(n)); ++i) {
    const Vec3Df r = math::reprojectToUnitVec(Vec3Df(f[0][i], f[1][i], f[2][i]));
    f[0][i] = r.x;
    f[1][i] = r.y;
    f[2][i] = r.z;
  }
}

void composeBorder(float* const out[3], const Vec3Di& outSize, const float* const f[3], const Vec3Di& fSize,
                   const float* const g[3], const char*) {
  const MutPlanes<3> o = mutPlanes<3>(out);
  const Planes<3> fp = planes<3>(f), gp = planes<3>(g);
  if (simd16::composeBorder(o, outSize, fp, fSize, gp)) return;
  const long n = long(nVoxOf(outSize));
#pragma omp parallel for schedule(static) num_threads(detail::threadsFor(nVoxOf(outSize)))
  for (long i = 0; i < n; ++i) math::composeBorderVoxel(o, fp, gp, fSize, std::size_t(i));
}

void unblurred(float* out, const Vec3Di& outSize, const float* const src[4], const Vec3Di& srcSize,
               const float* const h[3], const char*) {
  const Planes<4> sp = planes<4>(src);
  const Planes<3> hp = planes<3>(h);
  if (simd16::unblurred(out, outSize, sp, srcSize, hp)) return;
  const long n = long(nVoxOf(outSize));
#pragma omp parallel for schedule(static) num_threads(detail::threadsFor(nVoxOf(outSize)))
  for (long i = 0; i < n; ++i) math::unblurredVoxel(out, sp, srcSize, hp, std::size_t(i));
}

void fixedPointInverse(float* const ginv[3], const float* const g[3], const Vec3Di& n, unsigned numIter,
                       const char*) {
  const Planes<3> gp = planes<3>(g);
#pragma omp parallel for collapse(2) schedule(static) num_threads(detail::threadsFor(nVoxOf(n)))
  for (int z = 0; z < n.z; ++z) {
    for (int y = 0; y < n.y; ++y) {
      std::size_t id = math::linearIndex(0, y, z, n);
      for (int x = 0; x < n.x; ++x, ++id) {
        const Vec3Df h = math::fixedPointInverseVoxel<BACKGROUND_STRATEGY_PARTIAL_ID>(
            gp, n, Vec3Df(ginv[0][id], ginv[1][id], ginv[2][id]), x, y, z, numIter);
        ginv[0][id] = h.x;
        ginv[1][id] = h.y;
        ginv[2][id] = h.z;
      }
    }
  }
}

void updateInverse(float* const ginv1[3], float* const scratch[3], const float* const ginv0[3],
                   const float* const w[3], const Vec3Di& n, const Vec3Df& sp, unsigned numIter,
                   const char*) {
  const Planes<3> g0 = planes<3>(ginv0), wp = planes<3>(w);
#pragma omp parallel for collapse(2) schedule(static) num_threads(detail::threadsFor(nVoxOf(n)))
  for (int z = 0; z < n.z; ++z) {
    for (int y = 0; y < n.y; ++y) {
      std::size_t id = math::linearIndex(0, y, z, n);
      for (int x = 0; x < n.x; ++x, ++id) {
        Vec3Df q(0.f, 0.f, 0.f);
        const Vec3Df h = math::updateInverseVoxel(g0, wp, n, sp, x, y, z, id, numIter, q);
        for (int c = 0; c < 3; ++c) {
          ginv1[c][id] = h[c];
          if (numIter > 0) scratch[c][id] = q[c];
        }
      }
    }
  }
}

}  // namespace cpu_impl
}  // namespace pyca
