// The `filters` family, spatial part: GaussianBlur, Convolve (ops/filters.yaml) and the
// GaussianFilter class (pyca/filters.h). The FFT part is in filters_fft.cpp. Semantics:
// docs/operations/filters.md.
#include "pyca/filters.h"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "ops/filters_cuda.h"
#include "pyca/detail/checks.h"
#include "pyca/detail/parallel.h"
#include "pyca/errors.h"
#include "pyca/math/filters.h"
#include "pyca/ops/filters.h"

namespace pyca {

namespace {

using detail::Arg;

using detail::vecStr;

// dst[x] = sum_j w_j (src[x - j] + src[x + j]) along a contiguous row of n samples, clamped
// border; `pad` holds n + 2r floats. dst may be src.
void convRow(float* dst, const float* src, int n, const float* w, int r, float* pad) {
  for (int j = 0; j < r; ++j) {
    pad[j] = src[0];
    pad[r + n + j] = src[n - 1];
  }
  std::memcpy(pad + r, src, sizeof(float) * std::size_t(n));
  const float* c = pad + r;
  const float w0 = w[0];
#pragma omp simd
  for (int x = 0; x < n; ++x) dst[x] = w0 * c[x];
  for (int j = 1; j <= r; ++j) {
    const float wj = w[j];
    const float* a = c - j;
    const float* b = c + j;
#pragma omp simd
    for (int x = 0; x < n; ++x) dst[x] += wj * (a[x] + b[x]);
  }
}

// dst[x] = sum_j w_j (row[i - j][x] + row[i + j][x]) across the n rows of `rows` (nx floats apart),
// clamped border. dst must not be one of the rows.
void convAcross(float* dst, const float* rows, int n, int i, int nx, const float* w, int r) {
  const float* c = rows + std::size_t(i) * nx;
  const float w0 = w[0];
#pragma omp simd
  for (int x = 0; x < nx; ++x) dst[x] = w0 * c[x];
  for (int j = 1; j <= r; ++j) {
    const float wj = w[j];
    const float* a = rows + std::size_t(math::clampIndex(i - j, n)) * nx;
    const float* b = rows + std::size_t(math::clampIndex(i + j, n)) * nx;
#pragma omp simd
    for (int x = 0; x < nx; ++x) dst[x] += wj * (a[x] + b[x]);
  }
}

// Separable Gaussian of one host volume; out may be in. w[d]: half kernels, r[d]: radii.
void gaussianCpu(float* out, const float* in, const Vec3Di& s, const float* const w[3], const int r[3]) {
  const int nx = s.x, ny = s.y, nz = s.z;
  const std::size_t nxy = std::size_t(nx) * ny, n = nxy * std::size_t(nz);
  const bool doX = r[0] > 0 && nx > 1, doY = r[1] > 0 && ny > 1, doZ = r[2] > 0 && nz > 1;
  const int nthreads = detail::threadsFor(n);  // the scratch below is sized for these threads
  const std::size_t padLen = std::size_t(nx) + 2 * std::size_t(std::max(r[0], 0));

  if (!doX && !doY) {
    if (out != in) {
#pragma omp parallel for schedule(static) num_threads(nthreads)
      for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(n); ++i) out[i] = in[i];
    }
  } else if (nz >= 2 * nthreads) {
    // x and y passes slice by slice, in cache. Scratch of every thread is allocated before the
    // parallel region, so that no exception (bad_alloc) can be thrown inside it.
    const std::size_t nS = doY ? nxy : 0;
    std::vector<float> S(nS * std::size_t(nthreads)), pad(padLen * std::size_t(nthreads));
#pragma omp parallel num_threads(nthreads)
    {
      const int t = omp_get_thread_num();
      float* St = S.data() + nS * std::size_t(t);
      float* padt = pad.data() + padLen * std::size_t(t);
#pragma omp for schedule(static)
      for (int z = 0; z < nz; ++z) {
        const float* src = in + std::size_t(z) * nxy;
        float* dst = out + std::size_t(z) * nxy;
        if (doY) {
          for (int y = 0; y < ny; ++y) {
            if (doX) {
              convRow(St + std::size_t(y) * nx, src + std::size_t(y) * nx, nx, w[0], r[0], padt);
            } else {
              std::memcpy(St + std::size_t(y) * nx, src + std::size_t(y) * nx,
                          sizeof(float) * std::size_t(nx));
            }
          }
          for (int y = 0; y < ny; ++y) convAcross(dst + std::size_t(y) * nx, St, ny, y, nx, w[1], r[1]);
        } else {
          for (int y = 0; y < ny; ++y)
            convRow(dst + std::size_t(y) * nx, src + std::size_t(y) * nx, nx, w[0], r[0], padt);
        }
      }
    }
  } else {
    // Thin volumes (2-D images): rows in parallel through a whole-volume temporary.
    std::vector<float> T(doY ? n : 0), pad(padLen * std::size_t(nthreads));
    float* xo = doY ? T.data() : out;
    const std::ptrdiff_t rows = std::ptrdiff_t(ny) * nz;
#pragma omp parallel num_threads(nthreads)
    {
      float* padt = pad.data() + padLen * std::size_t(omp_get_thread_num());
#pragma omp for schedule(static)
      for (std::ptrdiff_t row = 0; row < rows; ++row) {
        const std::size_t o = std::size_t(row) * nx;
        if (doX) {
          convRow(xo + o, in + o, nx, w[0], r[0], padt);
        } else {
          std::memcpy(xo + o, in + o, sizeof(float) * std::size_t(nx));
        }
      }
      if (doY) {
#pragma omp for schedule(static)
        for (std::ptrdiff_t row = 0; row < rows; ++row) {
          const int z = int(row / ny), y = int(row - std::ptrdiff_t(z) * ny);
          convAcross(out + std::size_t(row) * nx, T.data() + std::size_t(z) * nxy, ny, y, nx, w[1], r[1]);
        }
      }
    }
  }

  if (doZ) {
    // z pass in place: each y-plane of columns is copied out, then written back.
    const std::size_t nG = std::size_t(nz) * nx;
    std::vector<float> G(nG * std::size_t(nthreads));
#pragma omp parallel num_threads(nthreads)
    {
      float* Gt = G.data() + nG * std::size_t(omp_get_thread_num());
#pragma omp for schedule(static)
      for (int y = 0; y < ny; ++y) {
        for (int z = 0; z < nz; ++z) {
          std::memcpy(Gt + std::size_t(z) * nx, out + std::size_t(z) * nxy + std::size_t(y) * nx,
                      sizeof(float) * std::size_t(nx));
        }
        for (int z = 0; z < nz; ++z) {
          convAcross(out + std::size_t(z) * nxy + std::size_t(y) * nx, Gt, nz, z, nx, w[2], r[2]);
        }
      }
    }
  }
}

// Largest Gaussian radius (voxels) pyca computes weights for: the weights cost O(radius), so a
// larger one (given, or 4 sigma from a huge sigma or a tiny spacing) is refused before any work.
constexpr int kMaxGaussianRadius = 1 << 20;

// Half kernels of the three axes (sigma and radius in voxels) for a grid of `size`. Taps beyond
// n - 1 on an axis of n voxels read the border values for every output voxel (clamped border),
// as tap n - 1 does, so their weights are added to tap n - 1: the same result, and work bounded by
// the image size instead of the radius.
struct Kernels {
  std::vector<float> w[3];
  int r[3];
  Kernels(const Vec3Df& sigmaVox, const Vec3Di& radius, const Vec3Di& size) {
    for (int d = 0; d < 3; ++d) {
      const float s = sigmaVox[d];
      const int full = s > 0.f ? radius[d] : 0;
      std::vector<float> h(std::size_t(full) + 1);
      math::gaussianHalfKernel(s, full, h.data());
      r[d] = std::min(full, std::max(size[d] - 1, 0));
      w[d].assign(h.begin(), h.begin() + r[d] + 1);
      double tail = w[d][std::size_t(r[d])];
      for (int j = r[d] + 1; j <= full; ++j) tail += h[std::size_t(j)];
      w[d][std::size_t(r[d])] = float(tail);
    }
  }
  void ptrs(const float* p[3]) const {
    for (int d = 0; d < 3; ++d) p[d] = w[d].data();
  }
};

void runGaussian(bool dev, float* out, const float* in, float* tmp, const Vec3Di& size,
                 const float* const w[3], const int r[3], const char* op) {
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::GaussianFilter(out, in, tmp, size, w, r));
  } else {
    gaussianCpu(out, in, size, w, r);
  }
  (void)op;
  (void)tmp;
}

void checkSigma(const char* op, const Vec3Df& sigma) {
  for (int d = 0; d < 3; ++d) {
    if (!std::isfinite(sigma[d])) throw ValueError(std::string(op) + ": argument 'sigma' must be finite");
  }
}

void checkRadius(const char* op, const Vec3Di& r) {
  if (r.x < 0 || r.y < 0 || r.z < 0 || r.maxElm() > kMaxGaussianRadius) {
    throw ValueError(std::string(op) + ": argument 'kRadius' must be >= 0 and <= " +
                     std::to_string(kMaxGaussianRadius) + " on every axis, not " + vecStr(r));
  }
}

// sigma (world units) in voxels of `spacing`; ValueError naming sigma when the automatic radius
// (4 sigma, scipy's truncate) of an axis would exceed kMaxGaussianRadius.
Vec3Df toVoxels(const char* op, const Vec3Df& sigmaWorld, const Vec3Df& spacing, bool automatic) {
  Vec3Df sv;
  for (int d = 0; d < 3; ++d) {
    const double v = double(sigmaWorld[d]) / double(spacing[d]);
    if (!std::isfinite(float(v)) || (automatic && 4.0 * v + 0.5 >= double(kMaxGaussianRadius))) {
      std::ostringstream os;
      os << op << ": argument 'sigma' of " << sigmaWorld[d] << " world units along axis " << d << " is " << v
         << " voxels at spacing " << spacing[d] << "; its kernel radius would exceed " << kMaxGaussianRadius
         << " voxels (give a smaller sigma, or a kRadius)";
      throw ValueError(os.str());
    }
    sv[d] = float(v);
  }
  return sv;
}

Vec3Di autoRadius(const Vec3Df& sigmaVox) {
  return Vec3Di(math::gaussianAutoRadius(sigmaVox.x), math::gaussianAutoRadius(sigmaVox.y),
                math::gaussianAutoRadius(sigmaVox.z));
}

template <class A>
void gaussianBlur(A& out, const A& in, const Vec3Df& sigma, const Vec3Di* kRadius) {
  const char* op = "GaussianBlur";
  const bool dev = detail::prepare(op, {{"out", &out}, {"in", &in}});
  checkSigma(op, sigma);
  if (kRadius) checkRadius(op, *kRadius);
  const Vec3Df sv = toVoxels(op, sigma, in.spacing(), kRadius == nullptr);
  const Kernels k(sv, kRadius ? *kRadius : autoRadius(sv), in.size());
  const float* w[3];
  k.ptrs(w);
  const int nc = in.nComponents();
  const std::size_t inStride = in.capacity(), outStride = out.capacity();
  for (int c = 0; c < nc; ++c) {
    runGaussian(dev, out.data() + c * outStride, in.data() + c * inStride, nullptr, in.size(), w, k.r, op);
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Plain functions

void GaussianBlur(Image3D& out, const Image3D& in, const Vec3Df& sigma) {
  gaussianBlur(out, in, sigma, nullptr);
}
void GaussianBlur(Image3D& out, const Image3D& in, const Vec3Df& sigma, const Vec3Di& kRadius) {
  gaussianBlur(out, in, sigma, &kRadius);
}
void GaussianBlur(Field3D& out, const Field3D& in, const Vec3Df& sigma) {
  gaussianBlur(out, in, sigma, nullptr);
}
void GaussianBlur(Field3D& out, const Field3D& in, const Vec3Df& sigma, const Vec3Di& kRadius) {
  gaussianBlur(out, in, sigma, &kRadius);
}

void Convolve(Image3D& out, const Image3D& im, const Image3D& kernel) {
  const char* op = "Convolve";
  const bool dev = detail::prepare(op, {{"out", &out}, {"im", &im}});
  detail::onDevice(op, {{"out", &out}, {"kernel", &kernel}});
  detail::checkNoAlias(op, {"out", &out}, {"im", &im});
  detail::checkNoAlias(op, {"out", &out}, {"kernel", &kernel});
  const Vec3Di ks = kernel.size();
  if (kernel.nVox() > std::size_t(INT_MAX)) {  // the GPU kernel counts taps in an int
    throw ValueError(std::string(op) + ": argument 'kernel' of size " + vecStr(ks) +
                     " has more than 2^31 taps");
  }
  if (ks.x % 2 == 0 || ks.y % 2 == 0 || ks.z % 2 == 0) {
    throw ValueError(std::string(op) + ": argument 'kernel' must have odd sizes, not " + vecStr(ks));
  }
  const Vec3Di s = im.size();
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::Convolve(out.data(), im.data(), s, kernel.data(), ks));
    return;
  }
  float* o = out.data();
  const float *p = im.data(), *K = kernel.data();
  const int cx = ks.x / 2, cy = ks.y / 2, cz = ks.z / 2;
  const std::size_t nxy = std::size_t(s.x) * s.y;
#pragma omp parallel for collapse(2) schedule(static) num_threads(detail::threadsFor(nxy * std::size_t(s.z)))
  for (int z = 0; z < s.z; ++z) {
    for (int y = 0; y < s.y; ++y) {
      float* orow = o + std::size_t(z) * nxy + std::size_t(y) * s.x;
      for (int x = 0; x < s.x; ++x) orow[x] = 0.f;
      for (int kz = 0; kz < ks.z; ++kz) {
        const int zz = math::clampIndex(z + (kz - cz), s.z);
        for (int ky = 0; ky < ks.y; ++ky) {
          const int yy = math::clampIndex(y + (ky - cy), s.y);
          const float* irow = p + std::size_t(zz) * nxy + std::size_t(yy) * s.x;
          const float* krow = K + (std::size_t(kz) * ks.y + ky) * ks.x;
          for (int kx = 0; kx < ks.x; ++kx) {
            const float kv = krow[kx];
            const int off = cx - kx;  // out(x) += kv * im(x - off) = kv * im(x + (kx - cx))
            const int x0 = std::min(std::max(off, 0), s.x), x1 = std::max(std::min(s.x + off, s.x), x0);
            for (int x = 0; x < x0; ++x) orow[x] += kv * irow[math::clampIndex(x - off, s.x)];
#pragma omp simd
            for (int x = x0; x < x1; ++x) orow[x] += kv * irow[x - off];
            for (int x = x1; x < s.x; ++x) orow[x] += kv * irow[math::clampIndex(x - off, s.x)];
          }
        }
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// GaussianFilter

GaussianFilter::GaussianFilter() : size_(0, 0, 0), sigma_(0.f, 0.f, 0.f), kRadius_(0, 0, 0) {
  for (auto& w : w_) w.assign(1, 1.f);
}

void GaussianFilter::updateParams(const Vec3Di& size, const Vec3Df& sigma, const Vec3Di& kRadius) {
  const char* op = "GaussianFilter.updateParams";
  if (size.x < 1 || size.y < 1 || size.z < 1) {
    throw ValueError(std::string(op) + ": argument 'size' must be >= 1 on every axis, not " + vecStr(size));
  }
  checkSigma(op, sigma);
  checkRadius(op, kRadius);
  size_ = size;
  sigma_ = sigma;
  kRadius_ = kRadius;
  const Kernels k(sigma, kRadius, size);
  for (int d = 0; d < 3; ++d) w_[d] = k.w[d];
}

void GaussianFilter::check(const char* op, const Array3D& out, const Array3D& in) const {
  if (size_.x < 1) throw ValueError(std::string(op) + ": call updateParams(size, sigma, kRadius) first");
  if (in.size() != size_) {
    throw ValueError(std::string(op) + ": size of 'in' " + vecStr(in.size()) +
                     " does not match the size given to updateParams " + vecStr(size_));
  }
  (void)out;
}

void GaussianFilter::filter(Image3D& out, const Image3D& in, Image3D& tmp) const {
  const char* op = "GaussianFilter.filter";
  const bool dev = detail::prepare(op, {{"out", &out}, {"in", &in}, {"tmp", &tmp}});
  check(op, out, in);
  detail::checkNoAlias(op, {"tmp", &tmp}, {"in", &in});
  detail::checkNoAlias(op, {"tmp", &tmp}, {"out", &out});
  const float* w[3] = {w_[0].data(), w_[1].data(), w_[2].data()};
  const int r[3] = {int(w_[0].size()) - 1, int(w_[1].size()) - 1, int(w_[2].size()) - 1};
  runGaussian(dev, out.data(), in.data(), tmp.data(), size_, w, r, op);
}

void GaussianFilter::filter(Image3D& out, const Image3D& in) const {
  const char* op = "GaussianFilter.filter";
  const bool dev = detail::prepare(op, {{"out", &out}, {"in", &in}});
  check(op, out, in);
  const float* w[3] = {w_[0].data(), w_[1].data(), w_[2].data()};
  const int r[3] = {int(w_[0].size()) - 1, int(w_[1].size()) - 1, int(w_[2].size()) - 1};
  runGaussian(dev, out.data(), in.data(), nullptr, size_, w, r, op);
}

void GaussianFilter::filter(Field3D& out, const Field3D& in) const {
  const char* op = "GaussianFilter.filter";
  const bool dev = detail::prepare(op, {{"out", &out}, {"in", &in}});
  check(op, out, in);
  const float* w[3] = {w_[0].data(), w_[1].data(), w_[2].data()};
  const int r[3] = {int(w_[0].size()) - 1, int(w_[1].size()) - 1, int(w_[2].size()) - 1};
  for (int c = 0; c < 3; ++c) {
    runGaussian(dev, out.data() + c * out.planeStride(), in.data() + c * in.planeStride(), nullptr, size_, w,
                r, op);
  }
}

}  // namespace pyca
