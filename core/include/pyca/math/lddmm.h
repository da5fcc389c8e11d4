// Per-voxel math of the fused LDDMM time steps (ops/lddmm.yaml, docs/operations/lddmm.md), shared
// by the CPU loops (core/src/ops/lddmm.cpp) and the CUDA kernels (cuda/src/ops/lddmm.cu). Each
// function is the chain of single operations it replaces, written with the same per-voxel helpers
// (interpolate, jacDetH, gradient) so that the fused and the unfused solver compute the same numbers.
#pragma once

#include <cstddef>

#include "pyca/config.h"
#include "pyca/enums.h"
#include "pyca/math/deformation.h"
#include "pyca/math/differential.h"
#include "pyca/math/interp.h"
#include "pyca/vec3.h"

namespace pyca {
namespace math {

// One coordinate of the point x + scale * v(x) where a time step samples (T: float, or a vector of
// floats on the CPU's SIMD rows, core/src/ops/lddmm_simd.cpp).
template <class T>
PYCA_HD_LANES T stepCoord(T x, float scale, T v) {
  return x + scale * v;
}

// The point x + scale * v(x) at voxel (x, y, z), linear index id.
PYCA_HD Vec3Df stepPoint(const Planes<3>& v, const Vec3Df& scale, int x, int y, int z, std::size_t id) {
  return Vec3Df(stepCoord(float(x), scale.x, loadRO(v.p[0] + id)),
                stepCoord(float(y), scale.y, loadRO(v.p[1] + id)),
                stepCoord(float(z), scale.z, loadRO(v.p[2] + id)));
}

// hOut(x) = h(x + scale * v(x)) (trilinear, h extended by its border displacement: sampleMapBorder;
// scale = delta / spacing): LDDMMComposeStep's voxel, and the composition of every fused step.
template <class Index = std::size_t>
PYCA_HD Vec3Df composeHVAt(const Planes<3>& h, const Planes<3>& v, const Vec3Di& n, const Vec3Df& scale,
                           int x, int y, int z, std::size_t id) {
  return sampleMapBorder<Index>(h, n, stepPoint(v, scale, x, y, z, id));
}

// im(p) (trilinear, CLAMP): ApplyH's voxel with its defaults.
template <class Index = std::size_t>
PYCA_HD float sampleClamp(const float* im, const Vec3Di& n, const Vec3Df& p) {
  float r;
  const Planes<1> src{{im}};
  interpolate<INTERP_LINEAR, BACKGROUND_STRATEGY_CLAMP, 1, Index>(&r, src, n, p);
  return r;
}

// What LDDMMTransportStep needs besides its arrays: n (the grid of h, v, hOut and J), scale (delta /
// spacing), nIm (the grid of im) and, when affine, the map p = A q + t (A's rows a0, a1, a2) from
// hOut's values q to the voxels of im where J samples it.
struct TransportParams {
  Vec3Di n;
  Vec3Df scale;
  Vec3Di nIm;
  bool affine = false;
  Vec3Df a0, a1, a2, t;
};

// One coordinate of A q + t (a: a row of A), in the order of pyca.apps.affine.affine_hfield's passes:
// ((a.x q.x + a.y q.y) + a.z q.z) + t (T: float, or a vector of floats on the CPU's SIMD rows).
template <class T>
PYCA_HD_LANES T affineCoord(const Vec3Df& a, float t, T qx, T qy, T qz) {
  return ((a.x * qx + a.y * qy) + a.z * qz) + t;
}

// A q + t.
PYCA_HD Vec3Df affineAt(const TransportParams& P, const Vec3Df& q) {
  return Vec3Df(affineCoord(P.a0, P.t.x, q.x, q.y, q.z), affineCoord(P.a1, P.t.y, q.x, q.y, q.z),
                affineCoord(P.a2, P.t.z, q.x, q.y, q.z));
}

// o at voxel id = q (an H-field's three planes).
PYCA_HD void storeAt(const MutPlanes<3>& o, std::size_t id, const Vec3Df& q) {
  o.p[0][id] = q.x;
  o.p[1][id] = q.y;
  o.p[2][id] = q.z;
}

// One voxel of LDDMMComposeStep: hOut = h(x + scale * v(x)), h extended by its border displacement.
struct ComposeParams {
  Vec3Di n;
  Vec3Df scale;  // delta / spacing
};
template <class Index = std::size_t>
PYCA_HD void composeVoxel(const MutPlanes<3>& hOut, const Planes<3>& h, const Planes<3>& v,
                          const ComposeParams& P, int x, int y, int z, std::size_t id) {
  storeAt(hOut, id, composeHVAt<Index>(h, v, P.n, P.scale, x, y, z, id));
}

// The first step of the flow, from the identity, at one voxel: p = x + scale * v(x), 0 along an axis
// of size 1. composeHVAt of the identity gives the same up to the rounding of its lerps (floor(p) +
// (p - floor(p)), one unit in the last place at most): inside the grid every tap holds its own
// coordinate, and outside the identity's border displacement is 0; an axis of size 1 is not
// interpolated (index 0: 0).
PYCA_HD Vec3Df composeIdentityAt(const Planes<3>& v, const Vec3Di& n, const Vec3Df& scale, int x, int y,
                                 int z, std::size_t id) {
  return identityOf(stepPoint(v, scale, x, y, z, id), n);
}

// One voxel of LDDMMTransportStep: hOut = LDDMMComposeStep(h, v, delta) and J = ApplyH(im, hOut) there (of
// A hOut + t with an affine). h.p[0] == nullptr: from the identity, unread (composeIdentityAt).
template <class Index = std::size_t>
PYCA_HD void transportVoxel(const MutPlanes<3>& hOut, float* J, const Planes<3>& h, const Planes<3>& v,
                            const float* im, const TransportParams& P, int x, int y, int z, std::size_t id) {
  const Vec3Df q = h.p[0] ? composeHVAt<Index>(h, v, P.n, P.scale, x, y, z, id)
                          : composeIdentityAt(v, P.n, P.scale, x, y, z, id);
  storeAt(hOut, id, q);
  J[id] = sampleClamp<Index>(im, P.nIm, P.affine ? affineAt(P, q) : q);
}

// The match gradient of the sum of squared differences at one voxel, in the order of the unfused
// solver: b = ((J0 - I1(h)) grad J0) |D h| with grad J0 = Gradient(J0) (central, BC_CLAMP, per
// world unit) and |D h| = JacDetH(h) (central, BC_APPROX) * vol (vol: the voxel volume, so the
// identity gives 1). Then mOut = m * a + b * s (MulC_Add_MulC), or b * s when a == 0 (m unread). With
// P.residual (LDDMMResidualStep), I1 is any match term's residual r = (sigma^2 / 2) dE/dI at t = 1 and
// d = r(h).
struct GradStepParams {
  Grid3 g;
  float vol = 1.f;
  float a = 0.f;
  float s = 1.f;
  bool residual = false;  // LDDMMResidualStep: I1 is the match's residual r, and d = r(h)
};

// (d grad_c J0) |D h| with d = J0 - I1(h), and m a + b s (T: float, or a vector of floats on the
// CPU's SIMD rows).
template <class T>
PYCA_HD_LANES T ssdTerm(T d, T g, T jac) {
  return (d * g) * jac;
}
template <class T>
PYCA_HD_LANES T momentumStep(T m, T b, const GradStepParams& P) {
  return m * P.a + b * P.s;
}

template <class Index = std::size_t>
PYCA_HD void ssdGradStepVoxel(const MutPlanes<3>& mOut, const Planes<3>& m, const Planes<3>& h,
                              const float* J0, const float* I1, const GradStepParams& P, int x, int y, int z,
                              std::size_t id) {
  const Vec3Di n(P.g.nx, P.g.ny, P.g.nz);
  const Vec3Df hp(loadRO(h.p[0] + id), loadRO(h.p[1] + id), loadRO(h.p[2] + id));
  const float j1 = sampleClamp<Index>(I1, n, hp);
  const float jac =
      jacDetH(h.p[0] + id, h.p[1] + id, h.p[2] + id, P.g, x, y, z, DIFF_CENTRAL, BC_APPROX) * P.vol;
  float gr[3];
  gradient(J0 + id, P.g, x, y, z, DIFF_CENTRAL, BC_CLAMP, gr[0], gr[1], gr[2]);
  const float d = P.residual ? j1 : J0[id] - j1;
  PYCA_UNROLL
  for (int c = 0; c < 3; ++c) {
    const float b = ssdTerm(d, gr[c], jac);
    mOut.p[c][id] = P.a == 0.f ? b * P.s : momentumStep(m.p[c][id], b, P);
  }
}

// LDDMMGradStep's overload with hOut, v and delta also writes hOut = LDDMMComposeStep(h, v, delta), the
// backward map of the time step before, in the same pass (h is read once for both). on: that
// overload.
struct ComposeOut {
  MutPlanes<3> hOut{};
  Planes<3> v{};
  Vec3Df scale;  // delta / spacing
  bool on = false;
};

// One voxel of LDDMMGradStep (and of its overload with hOut: LDDMMComposeStep's voxel after it).
template <class Index = std::size_t>
PYCA_HD void gradStepVoxel(const MutPlanes<3>& mOut, const Planes<3>& m, const Planes<3>& h, const float* J0,
                           const float* I1, const GradStepParams& P, const ComposeOut& C, int x, int y, int z,
                           std::size_t id) {
  ssdGradStepVoxel<Index>(mOut, m, h, J0, I1, P, x, y, z, id);
  if (C.on) {
    storeAt(C.hOut, id, composeHVAt<Index>(h, C.v, Vec3Di(P.g.nx, P.g.ny, P.g.nz), C.scale, x, y, z, id));
  }
}

// LDDMMHalveStep at element i: m = (m + mOld) / 2 and v = (v + vOld) / 2 (as MulC_Add_MulC_I(m, 0.5,
// mOld, 0.5): halves are exact, so the same bits), every input read before either output is written;
// returns the product of the new m and v, in double (Dot's term).
PYCA_HD double halveElement(float* m, const float* mOld, float* v, const float* vOld, std::size_t i) {
  const float a = m[i], b = mOld[i], c = v[i], d = vOld[i];
  const float mi = a * 0.5f + b * 0.5f, vi = c * 0.5f + d * 0.5f;
  m[i] = mi;
  v[i] = vi;
  return double(mi) * double(vi);
}

}  // namespace math
}  // namespace pyca
