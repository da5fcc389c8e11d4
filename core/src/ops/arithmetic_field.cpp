// Operations of the `arithmetic` family that ops/arithmetic.yaml marks `manual`: those that read whole
// vectors of a Field3D (Magnitude, SqrMagnitude, ComponentDotProd, Dot(out, a, b), NormalizeSafe) and
// the component copies Copy(image, field, dim) / Copy(field, image, dim). Formulas: pyca/math/arithmetic.h.
#include <cstddef>
#include <string>

#include "ops/arithmetic_cuda.h"
#include "ops/arithmetic_loops.h"
#include "pyca/detail/checks.h"
#include "pyca/errors.h"
#include "pyca/math/arithmetic.h"
#include "pyca/ops/arithmetic.h"

namespace pyca {
namespace {

struct MagnitudeOf {
  float operator()(const Vec3Df& a, const Vec3Df&) const { return math::magnitude(a); }
};
struct SqrMagnitudeOf {
  float operator()(const Vec3Df& a, const Vec3Df&) const { return math::sqrMagnitude(a); }
};
struct DotOf {
  float operator()(const Vec3Df& a, const Vec3Df& b) const { return math::dot(a, b); }
};

// out[i] = F(a[i], b[i]) where a[i], b[i] are the vectors of voxel i.
template <class F>
void fieldToImageCpu(Image3D& out, const Field3D& a, const Field3D& b) {
  const F f{};
  const std::ptrdiff_t n = std::ptrdiff_t(out.nVox());
  float* o = out.data();
  const float *ax = a.x(), *ay = a.y(), *az = a.z();
  const float *bx = b.x(), *by = b.y(), *bz = b.z();
#pragma omp parallel for simd schedule(static) if (parallel : n >= arith::kParallelMin)
  for (std::ptrdiff_t i = 0; i < n; ++i) o[i] = f(Vec3Df(ax[i], ay[i], az[i]), Vec3Df(bx[i], by[i], bz[i]));
}

template <class F>
void fieldToImage(const char* op, [[maybe_unused]] cuda_impl::FieldToImage kind, Image3D& out,
                  const Field3D& a, const Field3D& b) {
  const bool dev = detail::prepare(op, {{"out", &out}, {"a", &a}, {"b", &b}});
  if (dev)
    PYCA_CUDA_CALL(op, cuda_impl::fieldToImage(op, kind, out.data(), a.data(), a.planeStride(), b.data(),
                                               b.planeStride(), out.nVox()));
  else
    fieldToImageCpu<F>(out, a, b);
}

template <class F>
void fieldToImage(const char* op, [[maybe_unused]] cuda_impl::FieldToImage kind, Image3D& out,
                  const Field3D& a) {
  const bool dev = detail::prepare(op, {{"out", &out}, {"a", &a}});
  if (dev)
    PYCA_CUDA_CALL(
        op, cuda_impl::fieldToImage(op, kind, out.data(), a.data(), a.planeStride(), nullptr, 0, out.nVox()));
  else
    fieldToImageCpu<F>(out, a, a);
}

void normalizeSafe(const char* op, bool dev, Field3D& out, const Field3D& a, float eps) {
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::normalizeSafe(op, out.data(), out.planeStride(), a.data(), a.planeStride(),
                                                out.nVox(), eps));
    return;
  }
  const std::ptrdiff_t n = std::ptrdiff_t(out.nVox());
  float *ox = out.x(), *oy = out.y(), *oz = out.z();
  const float *ax = a.x(), *ay = a.y(), *az = a.z();
#pragma omp parallel for simd schedule(static) if (parallel : n >= arith::kParallelMin)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const Vec3Df v = math::normalizeSafe(Vec3Df(ax[i], ay[i], az[i]), eps);
    ox[i] = v.x;
    oy[i] = v.y;
    oz[i] = v.z;
  }
}

void checkDim(const char* op, int dim) {
  if (dim < 0 || dim > 2)
    throw IndexError(std::string(op) + ": argument 'dim' must be 0, 1 or 2, got " + std::to_string(dim));
}

}  // namespace

void Magnitude(Image3D& out, const Field3D& a) {
  fieldToImage<MagnitudeOf>("Magnitude", cuda_impl::FieldToImage::kMagnitude, out, a);
}

void SqrMagnitude(Image3D& out, const Field3D& a) {
  fieldToImage<SqrMagnitudeOf>("SqrMagnitude", cuda_impl::FieldToImage::kSqrMagnitude, out, a);
}

void ComponentDotProd(Image3D& out, const Field3D& a, const Field3D& b) {
  fieldToImage<DotOf>("ComponentDotProd", cuda_impl::FieldToImage::kDot, out, a, b);
}

void Dot(Image3D& out, const Field3D& a, const Field3D& b) {
  fieldToImage<DotOf>("Dot", cuda_impl::FieldToImage::kDot, out, a, b);
}

void NormalizeSafe(Field3D& out, const Field3D& a, float eps) {
  const bool dev = detail::prepare("NormalizeSafe", {{"out", &out}, {"a", &a}});
  normalizeSafe("NormalizeSafe", dev, out, a, eps);
}

void NormalizeSafe_I(Field3D& a, float eps) {
  const bool dev = detail::prepare("NormalizeSafe_I", {{"a", &a}});
  normalizeSafe("NormalizeSafe_I", dev, a, a, eps);
}

void Copy(Image3D& out, const Field3D& a, int dim) {
  checkDim("Copy", dim);
  const bool dev = detail::prepare("Copy", {{"out", &out}, {"a", &a}});
  arith::run<math::Identity>("Copy", dev, arith::target(out), arith::component(a, dim));
}

void Copy(Field3D& out, const Image3D& a, int dim) {
  checkDim("Copy", dim);
  const bool dev = detail::prepare("Copy", {{"out", &out}, {"a", &a}});
  arith::run<math::Identity>("Copy", dev, arith::component(out, dim), arith::arr(a));
}

}  // namespace pyca
