// The lddmm family (ops/lddmm.yaml): argument checks, then the CPU loops below or the CUDA kernels
// (cuda/src/ops/lddmm.cu). The per-voxel math is in pyca/math/lddmm.h. Semantics:
// docs/operations/lddmm.md.
#include "pyca/math/lddmm.h"

#include <cstddef>
#include <string>

#include "ops/deformation_simd.h"
#include "ops/lddmm_cuda.h"
#include "ops/lddmm_simd.h"
#include "pyca/array3d.h"
#include "pyca/detail/checks.h"
#include "pyca/detail/parallel.h"
#include "pyca/errors.h"
#include "pyca/ops/lddmm.h"

namespace pyca {

// ---------------------------------------------------------------------------------------------
// CPU loops (OpenMP over rows of x); sixteen voxels at once where the CPU allows (lddmm_simd.cpp)
namespace cpu_impl {

namespace {
template <class F>
void voxelRows(const Vec3Di& n, F&& f) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int z = 0; z < n.z; ++z) {
    for (int y = 0; y < n.y; ++y) {
      std::size_t id = math::linearIndex(0, y, z, n);
      for (int x = 0; x < n.x; ++x, ++id) f(x, y, z, id);
    }
  }
}
}  // namespace

void transportStep(float* const hOut[3], float* J, const float* const h[3], const float* const v[3],
                   const float* im, const math::TransportParams& P, const char*) {
  const math::MutPlanes<3> o = math::mutPlanes<3>(hOut);
  const math::Planes<3> hp = math::planes<3>(h), vp = math::planes<3>(v);
  if (simd16::transportStep(o, J, hp, vp, im, P)) return;
  voxelRows(P.n, [&](int x, int y, int z, std::size_t id) {
    math::transportVoxel(o, J, hp, vp, im, P, x, y, z, id);
  });
}

void composeStep(float* const hOut[3], const float* const h[3], const float* const v[3],
                 const math::ComposeParams& P, const char*) {
  const math::MutPlanes<3> o = math::mutPlanes<3>(hOut);
  const math::Planes<3> hp = math::planes<3>(h), vp = math::planes<3>(v);
  if (simd16::composeStep(o, hp, vp, P)) return;
  voxelRows(P.n, [&](int x, int y, int z, std::size_t id) { math::composeVoxel(o, hp, vp, P, x, y, z, id); });
}

void ssdGradStep(float* const mOut[3], const float* const m[3], const float* const h[3], const float* J0,
                 const float* I1, const math::GradStepParams& P, const math::ComposeOut& C, const char*) {
  const math::MutPlanes<3> o = math::mutPlanes<3>(mOut);
  const math::Planes<3> mp = math::planes<3>(m), hp = math::planes<3>(h);
  if (simd16::ssdGradStep(o, mp, hp, J0, I1, P, C)) return;
  const Vec3Di n(P.g.nx, P.g.ny, P.g.nz);
  voxelRows(n, [&](int x, int y, int z, std::size_t id) {
    math::gradStepVoxel(o, mp, hp, J0, I1, P, C, x, y, z, id);
  });
}

void halveStep(float* m, const float* mOld, float* v, const float* vOld, std::size_t n, double* sum,
               const char*) {
  *sum = detail::orderedSum(std::ptrdiff_t(n), detail::kSumBlock, [&](std::ptrdiff_t lo, std::ptrdiff_t hi) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (std::ptrdiff_t i = lo; i < hi; ++i) s += math::halveElement(m, mOld, v, vOld, std::size_t(i));
    return s;
  });
}

}  // namespace cpu_impl

// ---------------------------------------------------------------------------------------------
// Public operations
namespace {

// The voxel volume (sx * sy * sz; sx * sy on a 2-D grid): JacDetH times it is 1 for the identity.
float voxelVolume(const Array3D& a) {
  const Vec3Df& sp = a.spacing();
  return float(double(sp.x) * double(sp.y) * (a.size().z == 1 ? 1.0 : double(sp.z)));
}

}  // namespace

namespace {
// h == nullptr: the identity (the overloads without h).
void transport(Field3D& hOut, Image3D& J, const Field3D* h, const Field3D& v, const Image3D& im, float delta,
               const Vec3Df* affine) {
  const char* op = "LDDMMTransportStep";
  // im may have any size (as ApplyH's): hOut holds voxel coordinates of its grid (through the affine).
  const bool dev = detail::prepare(op, {{"hOut", &hOut}, {"J", &J}, {"v", &v}});
  detail::onDevice(op, {{"hOut", &hOut}, {"im", &im}});
  if (h != nullptr) {
    detail::prepare(op, {{"hOut", &hOut}, {"h", h}});
    detail::checkNoAlias(op, {"hOut", &hOut}, {"h", h});
    detail::checkNoAlias(op, {"J", &J}, {"h", h});
  }
  detail::checkNoAlias(op, {"hOut", &hOut}, {"im", &im});
  detail::checkNoAlias(op, {"J", &J}, {"v", &v});
  detail::checkNoAlias(op, {"J", &J}, {"im", &im});
  detail::checkNoAlias(op, {"J", &J}, {"hOut", &hOut});
  const Vec3Df sp = hOut.spacing();
  math::TransportParams P;
  P.n = hOut.size();
  P.scale = Vec3Df(delta / sp.x, delta / sp.y, delta / sp.z);
  P.nIm = im.size();
  if (affine != nullptr) {
    P.affine = true;
    P.a0 = affine[0];
    P.a1 = affine[1];
    P.a2 = affine[2];
    P.t = affine[3];
  }
  float* o[3] = {hOut.x(), hOut.y(), hOut.z()};
  const float* hp[3] = {h ? h->x() : nullptr, h ? h->y() : nullptr, h ? h->z() : nullptr};
  const float* vp[3] = {v.x(), v.y(), v.z()};
  PYCA_BACKEND_RUN(dev, op, transportStep(o, J.data(), hp, vp, im.data(), P, op));
}
}  // namespace

void LDDMMTransportStep(Field3D& hOut, Image3D& J, const Field3D& h, const Field3D& v, const Image3D& im,
                        float delta) {
  transport(hOut, J, &h, v, im, delta, nullptr);
}

void LDDMMTransportStep(Field3D& hOut, Image3D& J, const Field3D& h, const Field3D& v, const Image3D& im,
                        float delta, const Vec3Df& a0, const Vec3Df& a1, const Vec3Df& a2, const Vec3Df& t) {
  const Vec3Df affine[4] = {a0, a1, a2, t};
  transport(hOut, J, &h, v, im, delta, affine);
}

void LDDMMTransportStep(Field3D& hOut, Image3D& J, const Field3D& v, const Image3D& im, float delta) {
  transport(hOut, J, nullptr, v, im, delta, nullptr);
}

void LDDMMTransportStep(Field3D& hOut, Image3D& J, const Field3D& v, const Image3D& im, float delta,
                        const Vec3Df& a0, const Vec3Df& a1, const Vec3Df& a2, const Vec3Df& t) {
  const Vec3Df affine[4] = {a0, a1, a2, t};
  transport(hOut, J, nullptr, v, im, delta, affine);
}

void LDDMMComposeStep(Field3D& hOut, const Field3D& h, const Field3D& v, float delta) {
  const char* op = "LDDMMComposeStep";
  const bool dev = detail::prepare(op, {{"hOut", &hOut}, {"h", &h}, {"v", &v}});
  detail::checkNoAlias(op, {"hOut", &hOut}, {"h", &h});  // h is read at neighbouring points
  const Vec3Df sp = hOut.spacing();
  math::ComposeParams P;
  P.n = hOut.size();
  P.scale = Vec3Df(delta / sp.x, delta / sp.y, delta / sp.z);
  float* o[3] = {hOut.x(), hOut.y(), hOut.z()};
  const float* hp[3] = {h.x(), h.y(), h.z()};
  const float* vp[3] = {v.x(), v.y(), v.z()};
  PYCA_BACKEND_RUN(dev, op, composeStep(o, hp, vp, P, op));
}

namespace {
// LDDMMGradStep (residual false: d = J0 - I1(h)) and LDDMMResidualStep (true: I1 is r, d = r(h)).
void gradStep(Field3D& mOut, const Field3D& m, const Field3D& h, const Image3D& J0, const Image3D& I1,
              float a, float s, Field3D* hOut, const Field3D* v, float delta, bool residual = false) {
  const char* op = residual ? "LDDMMResidualStep" : "LDDMMGradStep";
  const char* i1 = residual ? "r" : "I1";
  const bool dev = detail::prepare(op, {{"mOut", &mOut}, {"m", &m}, {"h", &h}, {"J0", &J0}, {i1, &I1}});
  detail::checkNoAlias(op, {"mOut", &mOut}, {"h", &h});
  detail::checkNoAlias(op, {"mOut", &mOut}, {"J0", &J0});
  detail::checkNoAlias(op, {"mOut", &mOut}, {i1, &I1});
  math::ComposeOut C;
  if (hOut != nullptr) {
    detail::prepare(op, {{"mOut", &mOut}, {"hOut", hOut}, {"v", v}});
    detail::checkNoAlias(op, {"hOut", hOut}, {"h", &h});
    detail::checkNoAlias(op, {"hOut", hOut}, {"mOut", &mOut});
    detail::checkNoAlias(op, {"mOut", &mOut}, {"v", v});  // each voxel writes mOut before it reads v
    const Vec3Df& sp = hOut->spacing();
    C.hOut = math::MutPlanes<3>{{hOut->x(), hOut->y(), hOut->z()}};
    C.v = math::Planes<3>{{v->x(), v->y(), v->z()}};
    C.scale = Vec3Df(delta / sp.x, delta / sp.y, delta / sp.z);
    C.on = true;
  }
  math::GradStepParams P;
  const Vec3Di& n = h.size();
  const Vec3Df& sp = h.spacing();
  P.g = math::Grid3{n.x, n.y, n.z, 1.f / sp.x, 1.f / sp.y, 1.f / sp.z};
  P.vol = voxelVolume(h);
  P.a = a;
  P.s = s;
  P.residual = residual;
  float* o[3] = {mOut.x(), mOut.y(), mOut.z()};
  const float* mp[3] = {m.x(), m.y(), m.z()};
  const float* hp[3] = {h.x(), h.y(), h.z()};
  PYCA_BACKEND_RUN(dev, op, ssdGradStep(o, mp, hp, J0.data(), I1.data(), P, C, op));
}
}  // namespace

void LDDMMGradStep(Field3D& mOut, const Field3D& m, const Field3D& h, const Image3D& J0, const Image3D& I1,
                   float a, float s) {
  gradStep(mOut, m, h, J0, I1, a, s, nullptr, nullptr, 0.f);
}

void LDDMMGradStep(Field3D& mOut, const Field3D& m, const Field3D& h, const Image3D& J0, const Image3D& I1,
                   float a, float s, Field3D& hOut, const Field3D& v, float delta) {
  gradStep(mOut, m, h, J0, I1, a, s, &hOut, &v, delta);
}

void LDDMMResidualStep(Field3D& mOut, const Field3D& m, const Field3D& h, const Image3D& J0, const Image3D& r,
                       float a, float s) {
  gradStep(mOut, m, h, J0, r, a, s, nullptr, nullptr, 0.f, true);
}

void LDDMMResidualStep(Field3D& mOut, const Field3D& m, const Field3D& h, const Image3D& J0, const Image3D& r,
                       float a, float s, Field3D& hOut, const Field3D& v, float delta) {
  gradStep(mOut, m, h, J0, r, a, s, &hOut, &v, delta, true);
}

double LDDMMHalveStep(Image3D& m, const Image3D& mOld, Image3D& v, const Image3D& vOld) {
  const char* op = "LDDMMHalveStep";
  const bool dev = detail::prepare(op, {{"m", &m}, {"mOld", &mOld}, {"v", &v}, {"vOld", &vOld}});
  detail::checkNoAlias(op, {"m", &m}, {"v", &v});  // both written
  double sum = 0.0;
  PYCA_BACKEND_RUN(dev, op, halveStep(m.data(), mOld.data(), v.data(), vOld.data(), m.nVox(), &sum, op));
  return sum;
}

}  // namespace pyca
