// Backends of the deformation family, private to the core. The public functions
// (core/src/ops/deformation*.cpp) check their arguments, describe the work as a job and hand it to
// the CPU loops (namespace cpu_impl, core/src/ops/deformation_*.cpp) or to the CUDA kernels
// (namespace cuda_impl, cuda/src/ops/deformation*.cu), which take the same arguments. Only pyca
// types appear here. The CUDA functions enqueue on pyca::currentStream() without synchronising.
#pragma once

#include "pyca/enums.h"
#include "pyca/math/deformation.h"
#include "pyca/vec3.h"

namespace pyca {
namespace deformation_impl {

// Splat normalisation: voxels whose splatted weight is at most this get 0.
constexpr float kSplatWeightEps = 1e-6f;

// out[c](x) = interp(src[c], pos.at(x)) * post.mul[c] (+ pos when post.addPos), over the voxels
// of outSize. nc is 1 (image) or 3 (field). out may be one of pos's planes (read before written)
// but not src.
struct GatherJob {
  int nc = 1;
  float* out[3] = {nullptr, nullptr, nullptr};
  Vec3Di outSize;
  const float* src[3] = {nullptr, nullptr, nullptr};
  Vec3Di srcSize;
  math::PosSpec pos;
  math::PostSpec post;
  InterpT interp = INTERP_LINEAR;
  BackgroundStrategy bg = BACKGROUND_STRATEGY_CLAMP;
  float bgVal = 0.f;
};

// Trilinear splat of the values of the inSize voxels, input voxel i going to pos.at(i) (output
// voxel units), into out (outSize), which is zeroed first; weights (when not null) receives the
// splatted weights; normalize divides out by them where they exceed kSplatWeightEps (0 elsewhere)
// and then needs weights. bg is one of math::kLinearBgs.
struct SplatJob {
  int nc = 1;
  float* out[3] = {nullptr, nullptr, nullptr};
  float* weights = nullptr;
  Vec3Di outSize;
  const float* val[3] = {nullptr, nullptr, nullptr};
  Vec3Di inSize;
  math::PosSpec pos;
  BackgroundStrategy bg = BACKGROUND_STRATEGY_PARTIAL_ZERO;
  bool normalize = false;
};

}  // namespace deformation_impl

// Each backend (cpu_impl, cuda_impl) defines the same functions, declared once below (op: the
// public operation, named in CUDA errors):
//   gather, splat     run a job (above)
//   ad                out = splat_bg over x of |Dg| Dg_w X(x) at g(x) (math::adValue), out zeroed first
//   coad              out(x) = |Dg| Dg_w^T m(g(x)) (math::coadValue), m interpolated linearly with bg
//                     (ad and coad: bg one of math::kLinearBgs; one grid of `size`, spacing sp)
//   setToIdentity     h(x) = x
//   convertHV         out = HtoV(in) (toV) or VtoH(in); out may be in
//   copyBox           dst[c][dstStart + u] = src[c][srcStart + u] for u in [0, extent)
//   convolveAxis      out = in convolved along `axis` with the 2 * radius + 1 weights (host memory),
//                     clamped border; out must not be in
//   reprojectToUnitVec f = math::reprojectToUnitVec(f), in place
//   composeBorder     out(x) = f(g(x)) over the voxels of outSize, f (of fSize) extended by its border
//                     displacement (math::composeBorderVoxel); out may be g, not f
//   unblurred         out(x) = math::unblurredVoxel: src = (im, curv_x, curv_y, curv_z) of srcSize sampled
//                     at h(x), h on out's grid (outSize); out is none of the inputs
//   fixedPointInverse ginv = math::fixedPointInverseVoxel<PARTIAL_ID>(g, ginv), in place
//   updateInverse     ginv1 = math::updateInverseVoxel(ginv0, w), scratch = its last q
//                     (when numIter > 0); ginv1 and scratch must share memory with neither input
#define PYCA_DEFORMATION_BACKEND_DECLARATIONS                                                            \
  using deformation_impl::GatherJob;                                                                     \
  using deformation_impl::SplatJob;                                                                      \
  void gather(const GatherJob& job, const char* op);                                                     \
  void splat(const SplatJob& job, const char* op);                                                       \
  void ad(float* const out[3], const float* const g[3], const float* const X[3], const Vec3Di& size,     \
          const Vec3Df& sp, BackgroundStrategy bg, const char* op);                                      \
  void coad(float* const out[3], const float* const g[3], const float* const m[3], const Vec3Di& size,   \
            const Vec3Df& sp, BackgroundStrategy bg, const char* op);                                    \
  void setToIdentity(float* const h[3], const Vec3Di& size, const char* op);                             \
  void convertHV(float* const out[3], const float* const in[3], const Vec3Di& size, const Vec3Df& sp,    \
                 bool toV, const char* op);                                                              \
  void copyBox(int nc, float* const dst[3], const Vec3Di& dstSize, const Vec3Di& dstStart,               \
               const float* const src[3], const Vec3Di& srcSize, const Vec3Di& srcStart,                 \
               const Vec3Di& extent, const char* op);                                                    \
  void convolveAxis(int nc, float* const out[3], const float* const in[3], const Vec3Di& size, int axis, \
                    const float* weights, int radius, const char* op);                                   \
  void reprojectToUnitVec(float* const f[3], const Vec3Di& size, const char* op);                        \
  void composeBorder(float* const out[3], const Vec3Di& outSize, const float* const f[3],                \
                     const Vec3Di& fSize, const float* const g[3], const char* op);                      \
  void unblurred(float* out, const Vec3Di& outSize, const float* const src[4], const Vec3Di& srcSize,    \
                 const float* const h[3], const char* op);                                               \
  void fixedPointInverse(float* const ginv[3], const float* const g[3], const Vec3Di& size,              \
                         unsigned numIter, const char* op);                                              \
  void updateInverse(float* const ginv1[3], float* const scratch[3], const float* const ginv0[3],        \
                     const float* const w[3], const Vec3Di& size, const Vec3Df& sp, unsigned numIter,    \
                     const char* op);
namespace cpu_impl {
PYCA_DEFORMATION_BACKEND_DECLARATIONS
}  // namespace cpu_impl
namespace cuda_impl {
PYCA_DEFORMATION_BACKEND_DECLARATIONS
}  // namespace cuda_impl
#undef PYCA_DEFORMATION_BACKEND_DECLARATIONS

}  // namespace pyca
