// The CPU loops of LDDMMTransportStep and LDDMMGradStep sixteen voxels at once, on CPUs with AVX-512
// (core/src/ops/simd16.h): the same per-voxel math as the scalar loops of lddmm.cpp (pyca/math/lddmm.h,
// its templates on F16), to the bit. The gathers take interiorSamples(), the interior's central
// differences vector loads; a lane that leaves the interior (a sample near or past the border, a voxel
// on the grid's border) takes the scalar function of its voxel. Design: docs/design/cpu-simd.md.
#include "ops/lddmm_simd.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "ops/simd16.h"
#include "pyca/math/lddmm.h"
#include "pyca/runtime.h"

namespace pyca {
namespace simd16 {

namespace {
// Whether the SIMD rows run, and why not: decided once per process.
struct Decision {
  bool on = false;
  const char* why = "";
};
const Decision& decision() {
  static const Decision d = [] {
#if PYCA_HAVE_SIMD16
    const char* env = std::getenv("PYCA_CPU_SIMD");
    if (env != nullptr && std::strcmp(env, "0") == 0) return Decision{false, "PYCA_CPU_SIMD=0"};
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") == 0) return Decision{false, "no AVX-512 on this CPU"};
    return Decision{true, ""};
#else
    return Decision{false, "not an x86-64 build"};
#endif
  }();
  return d;
}
}  // namespace

bool available() { return decision().on; }

}  // namespace simd16

std::string cpuVectorInfo() {
  const simd16::Decision& d = simd16::decision();
  return d.on ? "AVX-512, 16 voxels at once" : std::string("scalar: ") + d.why;
}

namespace simd16 {

#if PYCA_HAVE_SIMD16
namespace {

PYCA_SIMD16 void transportRow(const math::MutPlanes<3>& hOut, float* J, const math::Planes<3>& h,
                              const math::Planes<3>& v, const float* im, const math::TransportParams& P,
                              int y, int z) {
  const Vec3Di& n = P.n;
  forBlocks(n, y, z, [&](int x0, std::size_t id, Mask live) PYCA_SIMD16 {
    // hOut = h(x + scale v): composeHVAt (composeIdentityAt without h)
    F16 p[3], q[3];
    stepPoints(p, v, P.scale, x0, y, z, id, live);
    if (h.p[0] != nullptr) {
      composeAt(q, h, n, p, live);
    } else {  // identityOf(): 0 along an axis of size 1
      q[0] = n.x == 1 ? splat(0.f) : p[0];
      q[1] = n.y == 1 ? splat(0.f) : p[1];
      q[2] = n.z == 1 ? splat(0.f) : p[2];
    }
    for (int c = 0; c < 3; ++c) store(hOut.p[c] + id, live, q[c]);
    // J = im(q), or im(A q + t): sampleClamp
    F16 t[3] = {q[0], q[1], q[2]};
    if (P.affine) {
      t[0] = math::affineCoord(P.a0, P.t.x, q[0], q[1], q[2]);
      t[1] = math::affineCoord(P.a1, P.t.y, q[0], q[1], q[2]);
      t[2] = math::affineCoord(P.a2, P.t.z, q[0], q[1], q[2]);
    }
    F16 j[1];
    const math::Planes<1> src{{im}};
    const Mask done = interiorSamples<1>(j, src, P.nIm, t[0], t[1], t[2], live);
    eachLane(live & Mask(~done),
             [&](int k) { j[0][k] = math::sampleClamp(im, P.nIm, Vec3Df(t[0][k], t[1][k], t[2][k])); });
    store(J + id, live, j[0]);
  });
}

PYCA_SIMD16 void gradStepRow(const math::MutPlanes<3>& mOut, const math::Planes<3>& m,
                             const math::Planes<3>& h, const float* J0, const float* I1,
                             const math::GradStepParams& P, const math::ComposeOut& C, int y, int z) {
  const math::Grid3& g = P.g;
  const Vec3Di n(g.nx, g.ny, g.nz);
  forBlocks(n, y, z, [&](int x0, std::size_t id, Mask live) PYCA_SIMD16 {
    const F16 hx = load(h.p[0] + id, live), hy = load(h.p[1] + id, live), hz = load(h.p[2] + id, live);
    // I1(h): sampleClamp
    F16 j1[1];
    const math::Planes<1> src{{I1}};
    const Mask sampled = interiorSamples<1>(j1, src, n, hx, hy, hz, live);
    eachLane(live & Mask(~sampled),
             [&](int k) { j1[0][k] = math::sampleClamp(I1, n, Vec3Df(hx[k], hy[k], hz[k])); });
    // |D h| vol and grad J0: central differences (jacDetH, gradient; BC_APPROX and BC_CLAMP alike inside)
    const Mask inside = interiorLanes(n, x0, y, z, live);
    F16 jac = splat(0.f), gr[3] = {splat(0.f), splat(0.f), splat(0.f)};
    if (inside != 0) {
      jac = centralJacDet(h, id, g, inside) * P.vol;
      centralGradient(gr, J0, id, g, inside);
    }
    eachLane(live & Mask(~inside), [&](int k) {
      const std::size_t i = id + std::size_t(k);
      const int x = x0 + k;
      jac[k] = math::jacDetH(h.p[0] + i, h.p[1] + i, h.p[2] + i, g, x, y, z, DIFF_CENTRAL, BC_APPROX) * P.vol;
      float a, b, c;
      math::gradient(J0 + i, g, x, y, z, DIFF_CENTRAL, BC_CLAMP, a, b, c);
      gr[0][k] = a;
      gr[1][k] = b;
      gr[2][k] = c;
    });
    // mOut: ssdGradStepVoxel's update
    const F16 d = P.residual ? j1[0] : load(J0 + id, live) - j1[0];
    for (int c = 0; c < 3; ++c) {
      const F16 b = math::ssdTerm(d, gr[c], jac);
      store(mOut.p[c] + id, live, P.a == 0.f ? b * P.s : math::momentumStep(load(m.p[c] + id, live), b, P));
    }
    if (C.on) composeStepAt(C.hOut, h, n, C.v, C.scale, x0, y, z, id, live);  // C.hOut = h(x + scale v)
  });
}

}  // namespace

bool transportStep(const math::MutPlanes<3>& hOut, float* J, const math::Planes<3>& h,
                   const math::Planes<3>& v, const float* im, const math::TransportParams& P) {
  if (!available() || !fits(P.n) || !fits(P.nIm)) return false;
  forRows(P.n, [&](int y, int z) { transportRow(hOut, J, h, v, im, P, y, z); });
  return true;
}

bool ssdGradStep(const math::MutPlanes<3>& mOut, const math::Planes<3>& m, const math::Planes<3>& h,
                 const float* J0, const float* I1, const math::GradStepParams& P, const math::ComposeOut& C) {
  const Vec3Di n(P.g.nx, P.g.ny, P.g.nz);
  if (!available() || !fits(n)) return false;
  forRows(n, [&](int y, int z) { gradStepRow(mOut, m, h, J0, I1, P, C, y, z); });
  return true;
}

#else  // no SIMD rows on this target: the scalar loops run

bool transportStep(const math::MutPlanes<3>&, float*, const math::Planes<3>&, const math::Planes<3>&,
                   const float*, const math::TransportParams&) {
  return false;
}
bool ssdGradStep(const math::MutPlanes<3>&, const math::Planes<3>&, const math::Planes<3>&, const float*,
                 const float*, const math::GradStepParams&, const math::ComposeOut&) {
  return false;
}

#endif

}  // namespace simd16
}  // namespace pyca
