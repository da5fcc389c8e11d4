// Entry points of the CUDA backend of the `arithmetic` family (defined in cuda/src/ops/arithmetic*.cu).
// Only pyca types here: the core includes this header whether or not CUDA is on.
#pragma once

#include <cstddef>

namespace pyca {
namespace cuda_impl {

// The output of an elementwise operation: `planes` planes (1 for an Image3D, 3 for a Field3D) of `n`
// floats, `stride` floats apart. Where `mask` is not null, only voxels with mask != 0 are written.
struct MapTarget {
  float* p;
  std::size_t stride;
  int planes;
  std::size_t n;
  const float* mask;  // n floats shared by all planes, or nullptr
};

// One operand: with p != nullptr, plane k reads n floats at p + k * stride (stride 0 broadcasts an
// image over the planes of a field); with p == nullptr, plane k is the constant c[k].
struct MapOperand {
  const float* p;
  std::size_t stride;
  float c[3];
};

// out[k][i] = F()(in[0][k][i], ..., in[F::arity - 1][k][i]) on pyca's current stream; `in` holds
// F::arity operands. Instantiated for every functor of PYCA_ARITH_FUNCTORS_* (pyca/math/arithmetic.h).
// Throws CudaError naming `op` if the launch fails.
template <class F>
void map(const char* op, const MapTarget& out, const MapOperand* in);

// Field -> image formulas (pyca/math/arithmetic.h) on n voxels; a and b are fields whose planes lie
// aStride / bStride floats apart.
enum class FieldToImage { kMagnitude, kSqrMagnitude, kDot };
void fieldToImage(const char* op, FieldToImage f, float* out, const float* a, std::size_t aStride,
                  const float* b, std::size_t bStride, std::size_t n);
// out = normalizeSafe(a, eps) voxel by voxel (out may be a).
void normalizeSafe(const char* op, float* out, std::size_t outStride, const float* a, std::size_t aStride,
                   std::size_t n, float eps);

}  // namespace cuda_impl
}  // namespace pyca
