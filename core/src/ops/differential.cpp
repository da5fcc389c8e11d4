// The `differential` family (ops/differential.yaml): argument checks, then the OpenMP loop over
// voxels or the CUDA backend. The per-voxel math is in pyca/math/differential.h; the semantics in
// docs/operations/differential.md.
#include "pyca/ops/differential.h"

#include <cmath>
#include <cstddef>

#include "ops/deformation_simd.h"
#include "ops/differential_cuda.h"
#include "ops/differential_impl.h"
#include "pyca/detail/checks.h"
#include "pyca/math/differential.h"

namespace pyca {

namespace {

using detail::Arg;
using diff_detail::checkBc;
using diff_detail::checkDiffBc;
using diff_detail::checkDim;
using diff_detail::forEachVoxel;
using diff_detail::gridOf;

void finiteDiffCpu(float* out, const float* im, const math::Grid3& g, DimT dim, DiffT d, BoundaryCondT bc) {
  forEachVoxel(g, [&](std::size_t i, int x, int y, int z) {
    out[i] = math::finiteDiff(im + i, g, x, y, z, int(dim), d, bc);
  });
}

void gradientCpu(float* ox, float* oy, float* oz, const float* im, const math::Grid3& g, DiffT d,
                 BoundaryCondT bc) {
  if (simd16::gradient(math::MutPlanes<3>{{ox, oy, oz}}, im, g, d, bc)) return;
  forEachVoxel(g, [&](std::size_t i, int x, int y, int z) {
    math::gradient(im + i, g, x, y, z, d, bc, ox[i], oy[i], oz[i]);
  });
}

void laplacianCpu(float* out, const float* im, const math::Grid3& g, BoundaryCondT bc) {
  forEachVoxel(g,
               [&](std::size_t i, int x, int y, int z) { out[i] = math::laplacian(im + i, g, x, y, z, bc); });
}

}  // namespace

void FiniteDiff(Image3D& out, const Image3D& im, DimT dim, DiffT diffType, BoundaryCondT bc) {
  const char* op = "FiniteDiff";
  const bool dev = detail::prepare(op, {{"out", &out}, {"im", &im}});
  detail::checkNoAlias(op, {"out", &out}, {"im", &im});
  checkDim(op, dim);
  checkDiffBc(op, diffType, bc);
  const math::Grid3 g = gridOf(im);
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::FiniteDiff(out.data(), im.data(), g, dim, diffType, bc));
  } else {
    finiteDiffCpu(out.data(), im.data(), g, dim, diffType, bc);
  }
}

namespace {

void gradientOp(const char* op, Field3D& out, const Image3D& im, DiffT diffType, BoundaryCondT bc) {
  const bool dev = detail::prepare(op, {{"out", &out}, {"im", &im}});
  detail::checkNoAlias(op, {"out", &out}, {"im", &im});
  checkDiffBc(op, diffType, bc);
  const math::Grid3 g = gridOf(im);
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::Gradient(out.x(), out.y(), out.z(), im.data(), g, diffType, bc, op));
  } else {
    gradientCpu(out.x(), out.y(), out.z(), im.data(), g, diffType, bc);
  }
}

void gradientMagOp(const char* op, Image3D& out, const Image3D& im, DiffT diffType, BoundaryCondT bc) {
  const bool dev = detail::prepare(op, {{"out", &out}, {"im", &im}});
  detail::checkNoAlias(op, {"out", &out}, {"im", &im});
  checkDiffBc(op, diffType, bc);
  const math::Grid3 g = gridOf(im);
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::GradientMag(out.data(), im.data(), g, diffType, bc, op));
    return;
  }
  float* o = out.data();
  const float* p = im.data();
  forEachVoxel(g, [&](std::size_t i, int x, int y, int z) {
    float gx, gy, gz;
    math::gradient(p + i, g, x, y, z, diffType, bc, gx, gy, gz);
    o[i] = std::sqrt(gx * gx + gy * gy + gz * gz);
  });
}

void divergenceOp(const char* op, Image3D& out, const Field3D& v, DiffT diffType, BoundaryCondT bc) {
  const bool dev = detail::prepare(op, {{"out", &out}, {"v", &v}});
  detail::checkNoAlias(op, {"out", &out}, {"v", &v});
  checkDiffBc(op, diffType, bc);
  const math::Grid3 g = gridOf(v);
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::Divergence(out.data(), v.x(), v.y(), v.z(), g, diffType, bc, op));
    return;
  }
  float* o = out.data();
  const float *vx = v.x(), *vy = v.y(), *vz = v.z();
  forEachVoxel(g, [&](std::size_t i, int x, int y, int z) {
    o[i] = math::finiteDiff(vx + i, g, x, y, z, 0, diffType, bc) +
           math::finiteDiff(vy + i, g, x, y, z, 1, diffType, bc) +
           math::finiteDiff(vz + i, g, x, y, z, 2, diffType, bc);
  });
}

}  // namespace

void Gradient(Field3D& out, const Image3D& im, DiffT diffType, BoundaryCondT bc) {
  gradientOp("Gradient", out, im, diffType, bc);
}

// PyCA's GradFor: forward differences with the given boundary condition.
void GradFor(Field3D& out, const Image3D& im, BoundaryCondT bc) {
  gradientOp("GradFor", out, im, DIFF_FORWARD, bc);
}

void GradientMask(Field3D& out, const Image3D& im, const Image3D& mask, DiffT diffType, BoundaryCondT bc) {
  const char* op = "GradientMask";
  const bool dev = detail::prepare(op, {{"out", &out}, {"im", &im}, {"mask", &mask}});
  detail::checkNoAlias(op, {"out", &out}, {"im", &im});
  detail::checkNoAlias(op, {"out", &out}, {"mask", &mask});
  checkDiffBc(op, diffType, bc);
  const math::Grid3 g = gridOf(im);
  if (dev) {
    PYCA_CUDA_CALL(
        op, cuda_impl::GradientMask(out.x(), out.y(), out.z(), im.data(), mask.data(), g, diffType, bc));
    return;
  }
  float *ox = out.x(), *oy = out.y(), *oz = out.z();
  const float *p = im.data(), *m = mask.data();
  forEachVoxel(g, [&](std::size_t i, int x, int y, int z) {
    math::gradientMask(p + i, m + i, g, x, y, z, diffType, bc, ox[i], oy[i], oz[i]);
  });
}

void GradientMag(Image3D& out, const Image3D& im, DiffT diffType, BoundaryCondT bc) {
  gradientMagOp("GradientMag", out, im, diffType, bc);
}

// PyCA's GradForMag: DIFF_FORWARD with BC_APPROX (0 beyond the last voxel, as BC_CLAMP).
void GradForMag(Image3D& out, const Image3D& im) {
  gradientMagOp("GradForMag", out, im, DIFF_FORWARD, BC_APPROX);
}

void Divergence(Image3D& out, const Field3D& v, DiffT diffType, BoundaryCondT bc) {
  divergenceOp("Divergence", out, v, diffType, bc);
}

// PyCA's DivBack: backward differences with the given boundary condition.
void DivBack(Image3D& out, const Field3D& v, BoundaryCondT bc) {
  divergenceOp("DivBack", out, v, DIFF_BACKWARD, bc);
}

void Laplacian(Image3D& out, const Image3D& im, BoundaryCondT bc) {
  const char* op = "Laplacian";
  const bool dev = detail::prepare(op, {{"out", &out}, {"im", &im}});
  detail::checkNoAlias(op, {"out", &out}, {"im", &im});
  checkBc(op, bc);
  const math::Grid3 g = gridOf(im);
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::Laplacian(out.data(), im.data(), g, bc));
  } else {
    laplacianCpu(out.data(), im.data(), g, bc);
  }
}

void Laplacian(Field3D& out, const Field3D& v, BoundaryCondT bc) {
  const char* op = "Laplacian";
  const bool dev = detail::prepare(op, {{"out", &out}, {"v", &v}});
  detail::checkNoAlias(op, {"out", &out}, {"v", &v});
  checkBc(op, bc);
  const math::Grid3 g = gridOf(v);
  float* o[3] = {out.x(), out.y(), out.z()};
  const float* p[3] = {v.x(), v.y(), v.z()};
  for (int c = 0; c < 3; ++c) {
    if (dev) {
      PYCA_CUDA_CALL(op, cuda_impl::Laplacian(o[c], p[c], g, bc));
    } else {
      laplacianCpu(o[c], p[c], g, bc);
    }
  }
}

void UpwindDiff(Image3D& out, const Image3D& im, const Image3D& speed, DimT dim) {
  const char* op = "UpwindDiff";
  const bool dev = detail::prepare(op, {{"out", &out}, {"im", &im}, {"speed", &speed}});
  detail::checkNoAlias(op, {"out", &out}, {"im", &im});
  checkDim(op, dim);
  const math::Grid3 g = gridOf(im);
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::UpwindDiff(out.data(), im.data(), speed.data(), g, dim));
    return;
  }
  float* o = out.data();
  const float *p = im.data(), *s = speed.data();
  const std::ptrdiff_t stride = math::axisStride(g, dim);
  const int n = math::axisSize(g, dim);
  const float is = math::axisInvSpacing(g, dim);
  forEachVoxel(g, [&](std::size_t i, int x, int y, int z) {
    const int k = dim == DIM_X ? x : (dim == DIM_Y ? y : z);
    o[i] = math::upwindDiff1(p + i, stride, k, n, s[i]) * is;
  });
}

void UpwindGradMag(Image3D& out, const Image3D& im, const Image3D& speed) {
  const char* op = "UpwindGradMag";
  const bool dev = detail::prepare(op, {{"out", &out}, {"im", &im}, {"speed", &speed}});
  detail::checkNoAlias(op, {"out", &out}, {"im", &im});
  const math::Grid3 g = gridOf(im);
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::UpwindGradMag(out.data(), im.data(), speed.data(), g));
    return;
  }
  float* o = out.data();
  const float *p = im.data(), *s = speed.data();
  forEachVoxel(
      g, [&](std::size_t i, int x, int y, int z) { o[i] = math::upwindGradMag(p + i, g, x, y, z, s[i]); });
}

void Jacobian(Field3D& Xg, Field3D& Yg, Field3D& Zg, const Field3D& h, DiffT diffType, BoundaryCondT bc) {
  const char* op = "Jacobian";
  const bool dev = detail::prepare(op, {{"Xg", &Xg}, {"Yg", &Yg}, {"Zg", &Zg}, {"h", &h}});
  detail::checkNoAlias(op, {"Xg", &Xg}, {"h", &h});
  detail::checkNoAlias(op, {"Yg", &Yg}, {"h", &h});
  detail::checkNoAlias(op, {"Zg", &Zg}, {"h", &h});
  checkDiffBc(op, diffType, bc);
  const math::Grid3 g = gridOf(h);
  Field3D* outs[3] = {&Xg, &Yg, &Zg};
  const float* comps[3] = {h.x(), h.y(), h.z()};
  for (int c = 0; c < 3; ++c) {
    Field3D& o = *outs[c];
    if (dev) {
      PYCA_CUDA_CALL(op, cuda_impl::Gradient(o.x(), o.y(), o.z(), comps[c], g, diffType, bc, op));
    } else {
      gradientCpu(o.x(), o.y(), o.z(), comps[c], g, diffType, bc);
    }
  }
}

void JacDetH(Image3D& out, const Field3D& h, DiffT diffType, BoundaryCondT bc) {
  const char* op = "JacDetH";
  const bool dev = detail::prepare(op, {{"out", &out}, {"h", &h}});
  detail::checkNoAlias(op, {"out", &out}, {"h", &h});
  checkDiffBc(op, diffType, bc);
  const math::Grid3 g = gridOf(h);
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::JacDetH(out.data(), h.x(), h.y(), h.z(), g, diffType, bc));
    return;
  }
  float* o = out.data();
  const float *hx = h.x(), *hy = h.y(), *hz = h.z();
  if (simd16::jacDetH(o, math::Planes<3>{{hx, hy, hz}}, g, diffType, bc)) return;
  forEachVoxel(g, [&](std::size_t i, int x, int y, int z) {
    o[i] = math::jacDetH(hx + i, hy + i, hz + i, g, x, y, z, diffType, bc);
  });
}

void JacDetV(Image3D& out, const Field3D& v, DiffT diffType, BoundaryCondT bc) {
  const char* op = "JacDetV";
  const bool dev = detail::prepare(op, {{"out", &out}, {"v", &v}});
  detail::checkNoAlias(op, {"out", &out}, {"v", &v});
  checkDiffBc(op, diffType, bc);
  const math::Grid3 g = gridOf(v);
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::JacDetV(out.data(), v.x(), v.y(), v.z(), g, diffType, bc));
    return;
  }
  float* o = out.data();
  const float *vx = v.x(), *vy = v.y(), *vz = v.z();
  forEachVoxel(g, [&](std::size_t i, int x, int y, int z) {
    o[i] = math::jacDetV(vx + i, vy + i, vz + i, g, x, y, z, diffType, bc);
  });
}

namespace {

// Shared preamble of the JacDetH/JacDetV overloads taking Jacobian()'s gradient fields.
cuda_impl::GradPlanes gradPlanes(const char* op, bool* dev, Image3D& out, const Field3D& Xg,
                                 const Field3D& Yg, const Field3D& Zg) {
  *dev = detail::prepare(op, {{"out", &out}, {"Xg", &Xg}, {"Yg", &Yg}, {"Zg", &Zg}});
  detail::checkNoAlias(op, {"out", &out}, {"Xg", &Xg});
  detail::checkNoAlias(op, {"out", &out}, {"Yg", &Yg});
  detail::checkNoAlias(op, {"out", &out}, {"Zg", &Zg});
  return cuda_impl::GradPlanes{{Xg.x(), Xg.y(), Xg.z()}, {Yg.x(), Yg.y(), Yg.z()}, {Zg.x(), Zg.y(), Zg.z()}};
}

}  // namespace

void JacDetH(Image3D& out, const Field3D& Xg, const Field3D& Yg, const Field3D& Zg) {
  const char* op = "JacDetH";
  bool dev = false;
  const cuda_impl::GradPlanes p = gradPlanes(op, &dev, out, Xg, Yg, Zg);
  const bool is2D = Xg.grid().is2D();
  const std::size_t n = out.nVox();
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::JacDetHGrads(out.data(), p, n, is2D));
    return;
  }
  float* o = out.data();
#pragma omp parallel for schedule(static) num_threads(detail::threadsFor(n))
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(n); ++i) {
    o[i] = math::jacDetHFromGrads(p.x[0][i], p.x[1][i], p.x[2][i], p.y[0][i], p.y[1][i], p.y[2][i], p.z[0][i],
                                  p.z[1][i], p.z[2][i], is2D);
  }
}

void JacDetV(Image3D& out, const Field3D& Xg, const Field3D& Yg, const Field3D& Zg) {
  const char* op = "JacDetV";
  bool dev = false;
  const cuda_impl::GradPlanes p = gradPlanes(op, &dev, out, Xg, Yg, Zg);
  const std::size_t n = out.nVox();
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::JacDetVGrads(out.data(), p, n));
    return;
  }
  float* o = out.data();
#pragma omp parallel for schedule(static) num_threads(detail::threadsFor(n))
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(n); ++i) {
    o[i] = math::jacDetVFromGrads(p.x[0][i], p.x[1][i], p.x[2][i], p.y[0][i], p.y[1][i], p.y[2][i], p.z[0][i],
                                  p.z[1][i], p.z[2][i]);
  }
}

void JacDetVInv(Image3D& out, const Field3D& Xg, const Field3D& Yg, const Field3D& Zg) {
  const char* op = "JacDetVInv";
  bool dev = false;
  const cuda_impl::GradPlanes p = gradPlanes(op, &dev, out, Xg, Yg, Zg);
  const std::size_t n = out.nVox();
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::JacDetVInvGrads(out.data(), p, n));
    return;
  }
  float* o = out.data();
#pragma omp parallel for schedule(static) num_threads(detail::threadsFor(n))
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(n); ++i) {
    o[i] = math::jacDetVInvFromGrads(p.x[0][i], p.x[1][i], p.x[2][i], p.y[0][i], p.y[1][i], p.y[2][i],
                                     p.z[0][i], p.z[1][i], p.z[2][i]);
  }
}

}  // namespace pyca
