// The `similarity` family (ops/similarity.yaml): BoxSum and LNCC. CPU here (OpenMP, the reference);
// CUDA in cuda/src/ops/similarity.cu; the per-voxel math of both in pyca/math/similarity.h.
// Semantics: docs/operations/similarity.md.
#include "pyca/ops/similarity.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "ops/similarity_cuda.h"
#include "pyca/detail/checks.h"
#include "pyca/detail/parallel.h"
#include "pyca/errors.h"
#include "pyca/math/similarity.h"

namespace pyca {

namespace {

using detail::vecStr;

// Truncated running sums along one axis of a volume seen as [outer][n][inner] (inner contiguous):
// out[o][i][k] = sum over j in [i - r, i + r] within [0, n) of in[o][j][k]. Blocks of up to 256 inner
// items are copied first (so out may be in) and summed in double (no drift along the axis).
void boxAxis(float* out, const float* in, std::size_t outer, int n, std::size_t inner, int r) {
  if (r <= 0 || n <= 1) {
    if (out != in) std::copy(in, in + outer * std::size_t(n) * inner, out);
    return;
  }
  const std::size_t C = std::min<std::size_t>(inner, 256);
  const std::size_t chunks = (inner + C - 1) / C;
  const std::ptrdiff_t items = std::ptrdiff_t(outer * chunks);
#pragma omp parallel
  {
    std::vector<float> buf(std::size_t(n) * C);
    std::vector<double> acc(C);
#pragma omp for schedule(static)
    for (std::ptrdiff_t it = 0; it < items; ++it) {
      const std::size_t o = std::size_t(it) / chunks, k0 = (std::size_t(it) % chunks) * C;
      const std::size_t c = std::min(C, inner - k0);
      const float* src = in + o * std::size_t(n) * inner + k0;
      float* dst = out + o * std::size_t(n) * inner + k0;
      for (int i = 0; i < n; ++i)
        std::copy(src + std::size_t(i) * inner, src + std::size_t(i) * inner + c, &buf[std::size_t(i) * c]);
      std::fill(acc.begin(), acc.begin() + std::ptrdiff_t(c), 0.0);
      for (int i = 0; i < std::min(r, n); ++i)
        for (std::size_t k = 0; k < c; ++k) acc[k] += buf[std::size_t(i) * c + k];
      for (int i = 0; i < n; ++i) {
        if (i + r < n)
          for (std::size_t k = 0; k < c; ++k) acc[k] += buf[std::size_t(i + r) * c + k];
        if (i - r - 1 >= 0)
          for (std::size_t k = 0; k < c; ++k) acc[k] -= buf[std::size_t(i - r - 1) * c + k];
        for (std::size_t k = 0; k < c; ++k) dst[std::size_t(i) * inner + k] = float(acc[k]);
      }
    }
  }
}

void boxCpu(float* out, const float* in, const Vec3Di& s, const Vec3Di& r) {
  const std::size_t nx = std::size_t(s.x), ny = std::size_t(s.y), nz = std::size_t(s.z);
  boxAxis(out, in, ny * nz, s.x, 1, r.x);
  boxAxis(out, out, nz, s.y, nx, r.y);
  boxAxis(out, out, 1, s.z, nx * ny, r.z);
}

void checkRadius(const char* op, const Vec3Di& r) {
  if (r.x < 0 || r.y < 0 || r.z < 0) {
    throw ValueError(std::string(op) + ": argument 'radius' must be >= 0 on every axis, not " + vecStr(r));
  }
}

double lncc(Image3D& grad, const Image3D& I, const Image3D& J, const Image3D* mask, const Vec3Di& radius,
            float eps) {
  const char* op = "LNCC";
  const bool dev = mask ? detail::prepare(op, {{"grad", &grad}, {"I", &I}, {"J", &J}, {"mask", mask}})
                        : detail::prepare(op, {{"grad", &grad}, {"I", &I}, {"J", &J}});
  detail::checkNoAlias(op, {"grad", &grad}, {"I", &I});
  detail::checkNoAlias(op, {"grad", &grad}, {"J", &J});
  if (mask) detail::checkNoAlias(op, {"grad", &grad}, {"mask", mask});
  checkRadius(op, radius);
  if (!(std::isfinite(eps) && eps > 0.f)) {
    throw ValueError(std::string(op) + ": argument 'eps' must be > 0, not " + std::to_string(eps));
  }
  const Vec3Di s = I.size();
  if (dev) {
    PYCA_CUDA_CALL(op, return cuda_impl::LNCC(grad.data(), I.data(), J.data(), mask ? mask->data() : nullptr,
                                              s, radius, eps));
  }
  const std::size_t n = I.nVox(), nx = std::size_t(s.x), nxy = nx * std::size_t(s.y);
  const float* a = I.data();
  const float* b = J.data();
  const float* w = mask ? mask->data() : nullptr;
  std::vector<float> t0(n), t1(n), t2(n), t3(n), t4(n);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(n); ++i) {
    t0[i] = a[i];
    t1[i] = b[i];
    t2[i] = a[i] * a[i];
    t3[i] = b[i] * b[i];
    t4[i] = a[i] * b[i];
  }
  for (std::vector<float>* t : {&t0, &t1, &t2, &t3, &t4}) boxCpu(t->data(), t->data(), s, radius);
  // The rows' sums added in order (the same bits for any number of threads).
  const double S = detail::orderedRowSum(std::ptrdiff_t(s.y) * s.z, s.x, [&](std::ptrdiff_t row) {
    const int y = int(row % s.y), z = int(row / s.y);
    const int cyz = math::boxCount(y, radius.y, s.y) * math::boxCount(z, radius.z, s.z);
    double part = 0.0;
    for (int x = 0; x < s.x; ++x) {
      const std::size_t i = std::size_t(z) * nxy + std::size_t(y) * nx + std::size_t(x);
      float k[4];
      const float cnt = float(cyz * math::boxCount(x, radius.x, s.x));
      part += math::lnccCoeffs(t0[i], t1[i], t2[i], t3[i], t4[i], cnt, w ? w[i] : 1.f, eps, k);
      t0[i] = k[0];
      t1[i] = k[1];
      t2[i] = k[2];
      t3[i] = k[3];
    }
    return part;
  });
  for (std::vector<float>* t : {&t0, &t1, &t2, &t3}) boxCpu(t->data(), t->data(), s, radius);
  float* g = grad.data();
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(n); ++i)
    g[i] = math::lnccGradAt(a[i], b[i], t0[i], t1[i], t2[i], t3[i]);
  return S;
}

}  // namespace

void BoxSum(Image3D& out, const Image3D& im, const Vec3Di& radius) {
  const char* op = "BoxSum";
  const bool dev = detail::prepare(op, {{"out", &out}, {"im", &im}});
  checkRadius(op, radius);
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::BoxSum(out.data(), im.data(), im.size(), radius));
    return;
  }
  boxCpu(out.data(), im.data(), im.size(), radius);
}

double LNCC(Image3D& grad, const Image3D& I, const Image3D& J, const Vec3Di& radius, float eps) {
  return lncc(grad, I, J, nullptr, radius, eps);
}

double LNCC(Image3D& grad, const Image3D& I, const Image3D& J, const Image3D& mask, const Vec3Di& radius,
            float eps) {
  return lncc(grad, I, J, &mask, radius, eps);
}

}  // namespace pyca
