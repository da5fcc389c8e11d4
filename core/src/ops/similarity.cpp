// The `similarity` family (ops/similarity.yaml): BoxSum, LNCC, JointHistogram and MutualInformation. CPU here
// (OpenMP, the reference); CUDA in cuda/src/ops/similarity.cu and mutual_information.cu; the per-voxel math
// of both in pyca/math/similarity.h. Semantics: docs/operations/similarity.md.
#include "pyca/ops/similarity.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/similarity_cuda.h"
#include "ops/similarity_simd.h"
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

double lncc(Image3D& grad, const Image3D& I, const Image3D& J, const Image3D* mask, const Image3D* support,
            const Vec3Di& radius, float eps) {
  const char* op = "LNCC";
  const bool dev =
      support
          ? detail::prepare(op, {{"grad", &grad}, {"I", &I}, {"J", &J}, {"mask", mask}, {"support", support}})
      : mask ? detail::prepare(op, {{"grad", &grad}, {"I", &I}, {"J", &J}, {"mask", mask}})
             : detail::prepare(op, {{"grad", &grad}, {"I", &I}, {"J", &J}});
  detail::checkNoAlias(op, {"grad", &grad}, {"I", &I});
  detail::checkNoAlias(op, {"grad", &grad}, {"J", &J});
  if (mask) detail::checkNoAlias(op, {"grad", &grad}, {"mask", mask});
  if (support) detail::checkNoAlias(op, {"grad", &grad}, {"support", support});
  checkRadius(op, radius);
  if (!(std::isfinite(eps) && eps > 0.f)) {
    throw ValueError(std::string(op) + ": argument 'eps' must be > 0, not " + std::to_string(eps));
  }
  const Vec3Di s = I.size();
  if (dev) {
    PYCA_CUDA_CALL(op, return cuda_impl::LNCC(grad.data(), I.data(), J.data(), mask ? mask->data() : nullptr,
                                              support ? support->data() : nullptr, s, radius, eps));
  }
  const std::size_t n = I.nVox(), nx = std::size_t(s.x), nxy = nx * std::size_t(s.y);
  const float* a = I.data();
  const float* b = J.data();
  const float* w = mask ? mask->data() : nullptr;
  const float* u = support ? support->data() : nullptr;
  // With a support the windows hold its voxels only (weighted by it): t5 sums to each window's weight.
  std::vector<float> t0(n), t1(n), t2(n), t3(n), t4(n), t5(u ? n : 0);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(n); ++i)
    math::lnccTerms(std::size_t(i), a[i], b[i], u, t0.data(), t1.data(), t2.data(), t3.data(), t4.data(),
                    t5.data());
  for (std::vector<float>* t : {&t0, &t1, &t2, &t3, &t4}) boxCpu(t->data(), t->data(), s, radius);
  if (u) boxCpu(t5.data(), t5.data(), s, radius);
  // The rows' sums added in order (the same bits for any number of threads).
  const double S = detail::orderedRowSum(std::ptrdiff_t(s.y) * s.z, s.x, [&](std::ptrdiff_t row) {
    const int y = int(row % s.y), z = int(row / s.y);
    const int cyz = math::boxCount(y, radius.y, s.y) * math::boxCount(z, radius.z, s.z);
    double part = 0.0;
    for (int x = 0; x < s.x; ++x) {
      const std::size_t i = std::size_t(z) * nxy + std::size_t(y) * nx + std::size_t(x);
      float k[4];
      const float cnt = u ? t5[i] : float(cyz * math::boxCount(x, radius.x, s.x));
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
    g[i] = u ? math::lnccMaskedGradAt(a[i], b[i], u[i], t0[i], t1[i], t2[i], t3[i])
             : math::lnccGradAt(a[i], b[i], t0[i], t1[i], t2[i], t3[i]);
  return S;
}

// ---- Mutual information (docs/design/mutual-information.md) ---------------------------------------

math::MiBins miBins(const char* op, int nI, int nJ, float iMin, float iMax, float jMin, float jMax) {
  if (nI < 4 || nJ < 4 || nI > 1024 || nJ > 1024) {
    throw ValueError(std::string(op) + ": the number of bins must be in [4, 1024] per image, not " +
                     std::to_string(nI) + (nI == nJ ? "" : " x " + std::to_string(nJ)));
  }
  const auto range = [op](const char* lo, const char* hi, float a, float b) {
    if (!(std::isfinite(a) && std::isfinite(b) && a < b)) {
      throw ValueError(std::string(op) + ": arguments '" + lo + "' < '" + hi +
                       "' must be finite and increasing, not " + std::to_string(a) + ", " +
                       std::to_string(b));
    }
  };
  range("iMin", "iMax", iMin, iMax);
  range("jMin", "jMax", jMin, jMax);
  return math::MiBins{nI, nJ, iMin, iMax, jMin, jMax};
}

// Voxels per block of the CPU's MI loops (a block is one call of the SIMD loops).
constexpr std::size_t kMiBlock = 4096;

// The integer joint histogram H (nI nJ entries, row-major by the bin of I) of I and J on the CPU:
// one private histogram per thread, added into H; integer sums, so the same bits for any number of
// threads and any order.
void miHistogramCpu(std::vector<std::uint64_t>& H, const float* a, const float* b, const float* w,
                    std::size_t n, const math::MiBins& bins) {
  const std::size_t nb = std::size_t(bins.nI) * std::size_t(bins.nJ);
  H.assign(nb, 0);
#pragma omp parallel num_threads(detail::threadsFor(n))
  {
    std::vector<std::uint64_t> local(nb, 0);
    // Adds the weights of `count` voxels equal to (u, v, m): a run of math::MiRuns.
    const auto add = [&](float u, float v, float m, std::uint64_t count) {
      int bI, bJ;
      std::uint64_t q[16];
      math::miVoxelWeights(u, v, m, bins, &bI, &bJ, q);
      for (int r = 0; r < 4; ++r) {
        std::uint64_t* row = &local[std::size_t(bI + r) * std::size_t(bins.nJ) + std::size_t(bJ)];
        for (int c = 0; c < 4; ++c) row[c] += q[4 * r + c] * count;
      }
    };
    // Blocks of kMiBlock voxels, eight at once where the CPU has AVX-512 (ops/similarity_simd.cpp: the
    // same integers), else one by one.
    const std::ptrdiff_t blocks = std::ptrdiff_t((n + kMiBlock - 1) / kMiBlock);
#pragma omp for schedule(static)
    for (std::ptrdiff_t k = 0; k < blocks; ++k) {
      const std::size_t i0 = std::size_t(k) * kMiBlock, i1 = std::min(n, i0 + kMiBlock);
      if (simd16::miHistogramRange(local.data(), a, b, w, i0, i1, bins)) continue;
      math::MiRuns<std::uint64_t> runs;
      for (std::size_t i = i0; i < i1; ++i) runs.push(a[i], b[i], w ? w[i] : 1.f, add);
      runs.finish(add);
    }
#pragma omp critical(pyca_mi_histogram)
    for (std::size_t k = 0; k < nb; ++k) H[k] += local[k];
  }
}

// The integer histogram on either backend (arguments already checked).
void miHistogram(std::vector<std::uint64_t>& H, bool dev, const char* op, const Image3D& I, const Image3D& J,
                 const Image3D* mask, const math::MiBins& bins) {
  (void)op;  // named by the CUDA call's errors only
  const float* w = mask ? mask->data() : nullptr;
  if (dev) {
    H.assign(std::size_t(bins.nI) * std::size_t(bins.nJ), 0);
    PYCA_CUDA_CALL(op, cuda_impl::MIHistogram(H.data(), I.data(), J.data(), w, I.nVox(), bins));
    return;
  }
  miHistogramCpu(H, I.data(), J.data(), w, I.nVox(), bins);
}

void jointHistogram(Image3D& hist, const Image3D& I, const Image3D& J, const Image3D* mask, float iMin,
                    float iMax, float jMin, float jMax) {
  const char* op = "JointHistogram";
  const bool dev = mask ? detail::prepare(op, {{"I", &I}, {"J", &J}, {"mask", mask}})
                        : detail::prepare(op, {{"I", &I}, {"J", &J}});
  detail::onDevice(op, {{"hist", &hist}, {"I", &I}});  // one memory type (MemoryTypeError otherwise)
  detail::checkNoAlias(op, {"hist", &hist}, {"I", &I});
  detail::checkNoAlias(op, {"hist", &hist}, {"J", &J});
  const Vec3Di hs = hist.size();
  if (hs.z != 1) {
    throw ValueError(std::string(op) + ": argument 'hist' must be bins(I) x bins(J) x 1, not " +
                     detail::sizeStr(hs));
  }
  const math::MiBins bins = miBins(op, hs.x, hs.y, iMin, iMax, jMin, jMax);
  std::vector<std::uint64_t> H;
  miHistogram(H, dev, op, I, J, mask, bins);
  // hist(a, b) at x = a, y = b: Parzen-weighted voxel counts.
  std::vector<float> out(H.size());
  for (int a = 0; a < bins.nI; ++a)
    for (int b = 0; b < bins.nJ; ++b)
      out[std::size_t(b) * std::size_t(bins.nI) + std::size_t(a)] =
          float(double(H[std::size_t(a) * std::size_t(bins.nJ) + std::size_t(b)]) / math::kMiScale);
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::CopyToDevice(hist.data(), out.data(), out.size()));
    return;
  }
  std::copy(out.begin(), out.end(), hist.data());
}

// grad = the derivative of the match of the table L (miFromHistogram's or nmiFromHistogram's) with respect
// to every voxel of A (B the other image, bins: A's first), on either backend (arguments already checked).
void miGradientPass(Image3D& grad, bool dev, const char* op, const Image3D& A, const Image3D& B,
                    const float* w, const math::MiBins& bins, const std::vector<float>& L, float gscale) {
  (void)op;  // named by the CUDA call's errors only
  if (dev) {
    PYCA_CUDA_CALL(
        op, cuda_impl::MIGradient(grad.data(), A.data(), B.data(), w, A.nVox(), bins, L.data(), gscale));
    return;
  }
  const float* a = A.data();
  const float* b = B.data();
  float* g = grad.data();
  const std::size_t n = A.nVox();
  const std::ptrdiff_t blocks = std::ptrdiff_t((n + kMiBlock - 1) / kMiBlock);
#pragma omp parallel for schedule(static) num_threads(detail::threadsFor(n))
  for (std::ptrdiff_t k = 0; k < blocks; ++k) {
    const std::size_t i0 = std::size_t(k) * kMiBlock, i1 = std::min(n, i0 + kMiBlock);
    if (simd16::miGradientRange(g, a, b, w, i0, i1, bins, L.data(), gscale)) continue;
    for (std::size_t i = i0; i < i1; ++i)
      g[i] = math::miGradAt(a[i], b[i], w ? w[i] : 1.f, bins, L.data(), gscale);
  }
}

double mutualInformation(Image3D& grad, const Image3D& I, const Image3D& J, const Image3D* mask, int nbins,
                         float iMin, float iMax, float jMin, float jMax) {
  const char* op = "MutualInformation";
  const bool dev = mask ? detail::prepare(op, {{"grad", &grad}, {"I", &I}, {"J", &J}, {"mask", mask}})
                        : detail::prepare(op, {{"grad", &grad}, {"I", &I}, {"J", &J}});
  detail::checkNoAlias(op, {"grad", &grad}, {"I", &I});
  detail::checkNoAlias(op, {"grad", &grad}, {"J", &J});
  if (mask) detail::checkNoAlias(op, {"grad", &grad}, {"mask", mask});
  const math::MiBins bins = miBins(op, nbins, nbins, iMin, iMax, jMin, jMax);
  std::vector<std::uint64_t> H;
  miHistogram(H, dev, op, I, J, mask, bins);
  std::vector<float> L(H.size());
  float gscale = 0.f;
  const double mi = math::miFromHistogram(H.data(), bins.nI, bins.nJ, L.data(), &gscale);
  miGradientPass(grad, dev, op, I, J, mask ? mask->data() : nullptr, bins, L, gscale);
  return mi;
}

// Both images' derivatives from one histogram: I's table from H, J's from H transposed (its rows the
// bins of J), each pass the MutualInformation gradient's with that image first.
double mutualInformationGradients(Image3D& gradI, Image3D& gradJ, const Image3D& I, const Image3D& J,
                                  const Image3D* mask, int nbins, float iMin, float iMax, float jMin,
                                  float jMax, bool normalized) {
  const char* op = "MutualInformationGradients";
  const bool dev =
      mask ? detail::prepare(op, {{"gradI", &gradI}, {"gradJ", &gradJ}, {"I", &I}, {"J", &J}, {"mask", mask}})
           : detail::prepare(op, {{"gradI", &gradI}, {"gradJ", &gradJ}, {"I", &I}, {"J", &J}});
  for (const Image3D* g : {&gradI, &gradJ}) {
    const char* gn = g == &gradI ? "gradI" : "gradJ";
    detail::checkNoAlias(op, {gn, g}, {"I", &I});
    detail::checkNoAlias(op, {gn, g}, {"J", &J});
    if (mask) detail::checkNoAlias(op, {gn, g}, {"mask", mask});
  }
  detail::checkNoAlias(op, {"gradI", &gradI}, {"gradJ", &gradJ});
  const math::MiBins bins = miBins(op, nbins, nbins, iMin, iMax, jMin, jMax);
  const math::MiBins binsT{bins.nJ, bins.nI, jMin, jMax, iMin, iMax};
  std::vector<std::uint64_t> H;
  miHistogram(H, dev, op, I, J, mask, bins);
  std::vector<std::uint64_t> HT(H.size());
  for (int a = 0; a < bins.nI; ++a)
    for (int b = 0; b < bins.nJ; ++b)
      HT[std::size_t(b) * std::size_t(bins.nI) + std::size_t(a)] =
          H[std::size_t(a) * std::size_t(bins.nJ) + std::size_t(b)];
  std::vector<float> LI(H.size()), LJ(H.size());
  float gscale = 0.f;
  const auto table = normalized ? math::nmiFromHistogram : math::miFromHistogram;
  const double value = table(H.data(), bins.nI, bins.nJ, LI.data(), &gscale);
  table(HT.data(), bins.nJ, bins.nI, LJ.data(), &gscale);
  const float* w = mask ? mask->data() : nullptr;
  if (dev) {  // one pass for both (math::miGradPairAt: the same expressions as the two passes below)
    PYCA_CUDA_CALL(op, cuda_impl::MIGradients(gradI.data(), gradJ.data(), I.data(), J.data(), w, I.nVox(),
                                              bins, LI.data(), LJ.data(), gscale));
    return value;
  }
  miGradientPass(gradI, dev, op, I, J, w, bins, LI, gscale);
  miGradientPass(gradJ, dev, op, J, I, w, binsT, LJ, gscale);
  return value;
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
  return lncc(grad, I, J, nullptr, nullptr, radius, eps);
}

double LNCC(Image3D& grad, const Image3D& I, const Image3D& J, const Image3D& mask, const Vec3Di& radius,
            float eps) {
  return lncc(grad, I, J, &mask, nullptr, radius, eps);
}

double LNCC(Image3D& grad, const Image3D& I, const Image3D& J, const Image3D& mask, const Image3D& support,
            const Vec3Di& radius, float eps) {
  return lncc(grad, I, J, &mask, &support, radius, eps);
}

void JointHistogram(Image3D& hist, const Image3D& I, const Image3D& J, float iMin, float iMax, float jMin,
                    float jMax) {
  jointHistogram(hist, I, J, nullptr, iMin, iMax, jMin, jMax);
}

void JointHistogram(Image3D& hist, const Image3D& I, const Image3D& J, const Image3D& mask, float iMin,
                    float iMax, float jMin, float jMax) {
  jointHistogram(hist, I, J, &mask, iMin, iMax, jMin, jMax);
}

double MutualInformation(Image3D& grad, const Image3D& I, const Image3D& J, int bins, float iMin, float iMax,
                         float jMin, float jMax) {
  return mutualInformation(grad, I, J, nullptr, bins, iMin, iMax, jMin, jMax);
}

double MutualInformation(Image3D& grad, const Image3D& I, const Image3D& J, const Image3D& mask, int bins,
                         float iMin, float iMax, float jMin, float jMax) {
  return mutualInformation(grad, I, J, &mask, bins, iMin, iMax, jMin, jMax);
}

double MutualInformationGradients(Image3D& gradI, Image3D& gradJ, const Image3D& I, const Image3D& J,
                                  int bins, float iMin, float iMax, float jMin, float jMax, bool normalized) {
  return mutualInformationGradients(gradI, gradJ, I, J, nullptr, bins, iMin, iMax, jMin, jMax, normalized);
}

double MutualInformationGradients(Image3D& gradI, Image3D& gradJ, const Image3D& I, const Image3D& J,
                                  const Image3D& mask, int bins, float iMin, float iMax, float jMin,
                                  float jMax, bool normalized) {
  return mutualInformationGradients(gradI, gradJ, I, J, &mask, bins, iMin, iMax, jMin, jMax, normalized);
}

}  // namespace pyca
