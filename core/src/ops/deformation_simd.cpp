// The CPU loops of the trilinear gathers (ApplyH, ComposeHH, ...), ApplyHUnblurred, ComposeHHBorder,
// LDDMMComposeStep, JacDetH, Gradient and JacobianXY sixteen voxels at once, on CPUs with AVX-512
// (core/src/ops/simd16.h): the same per-voxel math as the scalar loops (pyca/math/deformation.h, lddmm.h,
// differential.h), to the bit. A sample whose eight taps lie inside the grid takes interiorSamples(), an
// interior voxel's central differences vector loads; any other lane (a sample near or past the border, a
// voxel on the grid's border, a 2-D grid) takes the scalar function of its voxel. Design:
// docs/design/cpu-simd.md.
#include "ops/deformation_simd.h"

#include "ops/lddmm_simd.h"
#include "ops/simd16.h"

namespace pyca {
namespace simd16 {

#if PYCA_HAVE_SIMD16
namespace {

using deformation_impl::GatherJob;

// The positions of gatherVoxel (PosSpec::at) of the voxels x0 .. x0 + 15 of row (y, z).
PYCA_SIMD16 void gatherPoints(F16 p[3], const math::PosSpec& pos, int x0, int y, int z, std::size_t id,
                              Mask live) {
  const F16 a = load(pos.fx + id, live), b = load(pos.fy + id, live), c = load(pos.fz + id, live);
  if (pos.mode == math::POS_H) {
    p[0] = a;
    p[1] = b;
    p[2] = c;
  } else {  // POS_V: x + scale v (stepCoord's order)
    p[0] = math::stepCoord(lanesFrom(x0), pos.scale.x, a);
    p[1] = math::stepCoord(splat(float(y)), pos.scale.y, b);
    p[2] = math::stepCoord(splat(float(z)), pos.scale.z, c);
  }
}

template <BackgroundStrategy BG, int NC>
PYCA_SIMD16 void gatherRow(const GatherJob& j, int y, int z) {
  const math::MutPlanes<NC> out = math::mutPlanes<NC>(j.out);
  const math::Planes<NC> src = math::planes<NC>(j.src);
  forBlocks(j.outSize, y, z, [&](int x0, std::size_t id, Mask live) PYCA_SIMD16 {
    F16 p[3], s[NC];
    gatherPoints(p, j.pos, x0, y, z, id, live);
    const Mask done = interiorSamples<NC>(s, src, j.srcSize, p[0], p[1], p[2], live);
    // gatherVoxel's write, value * mul (+ p); out may be one of the position planes: every lane's
    // position was read above, and the scalar lanes below read only their own
    for (int c = 0; c < NC; ++c)
      store(out.p[c] + id, done, s[c] * j.post.mul[c] + (j.post.addPos ? p[c] : splat(0.f)));
    eachLane(live & Mask(~done), [&](int k) {
      math::gatherVoxel<INTERP_LINEAR, BG, NC>(out, src, j.srcSize, j.pos, j.post, j.bgVal, x0 + k, y, z,
                                               id + std::size_t(k));
    });
  });
}

PYCA_SIMD16 void composeBorderRow(const math::MutPlanes<3>& out, const Vec3Di& n, const math::Planes<3>& f,
                                  const Vec3Di& fSize, const math::Planes<3>& g, int y, int z) {
  forBlocks(n, y, z, [&](int, std::size_t id, Mask live) PYCA_SIMD16 {
    const F16 p[3] = {load(g.p[0] + id, live), load(g.p[1] + id, live), load(g.p[2] + id, live)};
    F16 q[3];
    composeAt(q, f, fSize, p, live);  // (out may be g: read above)
    for (int c = 0; c < 3; ++c) store(out.p[c] + id, live, q[c]);
  });
}

PYCA_SIMD16 void unblurredRow(float* out, const Vec3Di& n, const math::Planes<4>& src, const Vec3Di& ns,
                              const math::Planes<3>& h, int y, int z) {
  forBlocks(n, y, z, [&](int, std::size_t id, Mask live) PYCA_SIMD16 {
    const F16 p[3] = {load(h.p[0] + id, live), load(h.p[1] + id, live), load(h.p[2] + id, live)};
    F16 v[4];
    const Mask done = interiorSamples<4>(v, src, ns, p[0], p[1], p[2], live);
    if (done != 0) {  // unblurredAt; p >= 0 in these lanes (every axis longer than 1): floor is truncation
      F16 acc = splat(0.f);
      for (int k = 0; k < 3; ++k)
        acc = math::blurBiasTerm(acc, p[k] - toFloat(truncate(p[k], done)), v[1 + k]);
      store(out + id, done, v[0] - acc);
    }
    eachLane(live & Mask(~done), [&](int k) { math::unblurredVoxel(out, src, ns, h, id + std::size_t(k)); });
  });
}

PYCA_SIMD16 void composeStepRow(const math::MutPlanes<3>& hOut, const math::Planes<3>& h,
                                const math::Planes<3>& v, const math::ComposeParams& P, int y, int z) {
  forBlocks(P.n, y, z, [&](int x0, std::size_t id, Mask live) PYCA_SIMD16 {
    composeStepAt(hOut, h, P.n, v, P.scale, x0, y, z, id, live);
  });
}

// A row of a central-difference stencil on grid g: interior(id, inside) computes the block's interior
// lanes (interiorLanes: every neighbour inside the grid) sixteen at once, voxel(i, x) each other lane.
template <class Interior, class Voxel>
PYCA_SIMD16 void stencilRow(const math::Grid3& g, int y, int z, Interior&& interior, Voxel&& voxel) {
  const Vec3Di n(g.nx, g.ny, g.nz);
  forBlocks(n, y, z, [&](int x0, std::size_t id, Mask live) PYCA_SIMD16 {
    const Mask inside = interiorLanes(n, x0, y, z, live);
    if (inside != 0) interior(id, inside);
    eachLane(live & Mask(~inside), [&](int k) { voxel(id + std::size_t(k), x0 + k); });
  });
}

PYCA_SIMD16 void jacDetRow(float* out, const math::Planes<3>& h, const math::Grid3& g, DiffT d,
                           BoundaryCondT bc, int y, int z) {
  stencilRow(
      g, y, z, [&](std::size_t id, Mask m) PYCA_SIMD16 { store(out + id, m, centralJacDet(h, id, g, m)); },
      [&](std::size_t i, int x) {
        out[i] = math::jacDetH(h.p[0] + i, h.p[1] + i, h.p[2] + i, g, x, y, z, d, bc);
      });
}

PYCA_SIMD16 void gradientRow(const math::MutPlanes<3>& out, const float* im, const math::Grid3& g, DiffT d,
                             BoundaryCondT bc, int y, int z) {
  stencilRow(
      g, y, z,
      [&](std::size_t id, Mask m) PYCA_SIMD16 {
        F16 gr[3];
        centralGradient(gr, im, id, g, m);
        for (int c = 0; c < 3; ++c) store(out.p[c] + id, m, gr[c]);
      },
      [&](std::size_t i, int x) {
        math::gradient(im + i, g, x, y, z, d, bc, out.p[0][i], out.p[1][i], out.p[2][i]);
      });
}

PYCA_SIMD16 void jacobianXYRow(const math::MutPlanes<3>& out, const math::Planes<3>& X,
                               const math::Planes<3>& Y, const math::Grid3& g, int y, int z) {
  const std::ptrdiff_t st[3] = {1, g.sy(), g.sz()};
  const float is[3] = {g.isx, g.isy, g.isz};
  stencilRow(
      g, y, z,
      [&](std::size_t id, Mask m)
          PYCA_SIMD16 {  // jacobianXY: out_r = J_r0 y0 + J_r1 y1 + J_r2 y2, J_rc = d X_r / d x_c
            const F16 y0 = load(Y.p[0] + id, m), y1 = load(Y.p[1] + id, m), y2 = load(Y.p[2] + id, m);
            for (int r = 0; r < 3; ++r) {
              const F16 j0 = centralDiff(X.p[r] + id, st[0], is[0], m);
              const F16 j1 = centralDiff(X.p[r] + id, st[1], is[1], m);
              const F16 j2 = centralDiff(X.p[r] + id, st[2], is[2], m);
              store(out.p[r] + id, m, math::rowTimes(j0, j1, j2, y0, y1, y2));
            }
          },
      [&](std::size_t i, int x) {
        float r[3];
        math::jacobianXY(X.p, Y.p, i, g, x, y, z, r);
        for (int c = 0; c < 3; ++c) out.p[c][i] = r[c];
      });
}

}  // namespace

bool gatherLinear(const GatherJob& j) {
  if (!available() || j.interp != INTERP_LINEAR || !fits(j.outSize) || !fits(j.srcSize)) return false;
  if (j.pos.mode != math::POS_H && j.pos.mode != math::POS_V) return false;
  constexpr unsigned kAll = math::kFieldBgs | math::bgBit(BACKGROUND_STRATEGY_VAL);
  bool ran = false;
  math::withBg<kAll>(j.bg, [&](auto B) {
    constexpr BackgroundStrategy BG = decltype(B)::value;
    if (j.nc == 3) {
      forRows(j.outSize, [&](int y, int z) { gatherRow<BG, 3>(j, y, z); });
      ran = true;
    } else if constexpr (!math::isIdentityBg(BG)) {
      if (j.nc == 1) {
        forRows(j.outSize, [&](int y, int z) { gatherRow<BG, 1>(j, y, z); });
        ran = true;
      }
    }
  });
  return ran;
}

bool composeBorder(const math::MutPlanes<3>& out, const Vec3Di& outSize, const math::Planes<3>& f,
                   const Vec3Di& fSize, const math::Planes<3>& g) {
  if (!available() || !fits(outSize) || !fits(fSize)) return false;
  forRows(outSize, [&](int y, int z) { composeBorderRow(out, outSize, f, fSize, g, y, z); });
  return true;
}

bool unblurred(float* out, const Vec3Di& outSize, const math::Planes<4>& src, const Vec3Di& srcSize,
               const math::Planes<3>& h) {
  if (!available() || !fits(outSize) || !fits(srcSize)) return false;
  forRows(outSize, [&](int y, int z) { unblurredRow(out, outSize, src, srcSize, h, y, z); });
  return true;
}

bool composeStep(const math::MutPlanes<3>& hOut, const math::Planes<3>& h, const math::Planes<3>& v,
                 const math::ComposeParams& P) {
  if (!available() || !fits(P.n)) return false;
  forRows(P.n, [&](int y, int z) { composeStepRow(hOut, h, v, P, y, z); });
  return true;
}

bool jacDetH(float* out, const math::Planes<3>& h, const math::Grid3& g, DiffT d, BoundaryCondT bc) {
  const Vec3Di n(g.nx, g.ny, g.nz);
  if (!available() || d != DIFF_CENTRAL || !fits(n)) return false;
  forRows(n, [&](int y, int z) { jacDetRow(out, h, g, d, bc, y, z); });
  return true;
}

bool gradient(const math::MutPlanes<3>& out, const float* im, const math::Grid3& g, DiffT d,
              BoundaryCondT bc) {
  const Vec3Di n(g.nx, g.ny, g.nz);
  if (!available() || d != DIFF_CENTRAL || !fits(n)) return false;
  forRows(n, [&](int y, int z) { gradientRow(out, im, g, d, bc, y, z); });
  return true;
}

bool jacobianXY(const math::MutPlanes<3>& out, const math::Planes<3>& X, const math::Planes<3>& Y,
                const math::Grid3& g) {
  const Vec3Di n(g.nx, g.ny, g.nz);
  if (!available() || !fits(n)) return false;
  forRows(n, [&](int y, int z) { jacobianXYRow(out, X, Y, g, y, z); });
  return true;
}

#else  // no SIMD rows on this target: the scalar loops run

bool jacobianXY(const math::MutPlanes<3>&, const math::Planes<3>&, const math::Planes<3>&,
                const math::Grid3&) {
  return false;
}

bool gatherLinear(const deformation_impl::GatherJob&) { return false; }
bool composeBorder(const math::MutPlanes<3>&, const Vec3Di&, const math::Planes<3>&, const Vec3Di&,
                   const math::Planes<3>&) {
  return false;
}
bool composeStep(const math::MutPlanes<3>&, const math::Planes<3>&, const math::Planes<3>&,
                 const math::ComposeParams&) {
  return false;
}
bool unblurred(float*, const Vec3Di&, const math::Planes<4>&, const Vec3Di&, const math::Planes<3>&) {
  return false;
}
bool jacDetH(float*, const math::Planes<3>&, const math::Grid3&, DiffT, BoundaryCondT) { return false; }
bool gradient(const math::MutPlanes<3>&, const float*, const math::Grid3&, DiffT, BoundaryCondT) {
  return false;
}

#endif

}  // namespace simd16
}  // namespace pyca
