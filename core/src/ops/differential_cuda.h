// CUDA entry points of the `differential` family (cuda/src/ops/differential.cu). Private to the
// library: pyca types and raw device pointers only, no CUDA types. All work is queued on pyca's
// current stream, without synchronisation. Argument checks happen in core/src/ops/differential.cpp.
#pragma once

#include <cstddef>

#include "pyca/enums.h"
#include "pyca/math/differential.h"

namespace pyca {
namespace cuda_impl {

// Pointers to the nine planes of Jacobian()'s three gradient fields (rows of the Jacobian).
struct GradPlanes {
  const float* x[3];
  const float* y[3];
  const float* z[3];
};

void FiniteDiff(float* out, const float* im, const math::Grid3& g, DimT dim, DiffT d, BoundaryCondT bc);
// `name`: the operation named in launch errors (Gradient, GradFor, Jacobian, ...).
void Gradient(float* ox, float* oy, float* oz, const float* im, const math::Grid3& g, DiffT d,
              BoundaryCondT bc, const char* name);
void GradientMask(float* ox, float* oy, float* oz, const float* im, const float* mask, const math::Grid3& g,
                  DiffT d, BoundaryCondT bc);
void GradientMag(float* out, const float* im, const math::Grid3& g, DiffT d, BoundaryCondT bc,
                 const char* name);
void Divergence(float* out, const float* vx, const float* vy, const float* vz, const math::Grid3& g, DiffT d,
                BoundaryCondT bc, const char* name);
void Laplacian(float* out, const float* im, const math::Grid3& g, BoundaryCondT bc);
void UpwindDiff(float* out, const float* im, const float* speed, const math::Grid3& g, DimT dim);
void UpwindGradMag(float* out, const float* im, const float* speed, const math::Grid3& g);
void JacDetH(float* out, const float* hx, const float* hy, const float* hz, const math::Grid3& g, DiffT d,
             BoundaryCondT bc);
void JacDetV(float* out, const float* vx, const float* vy, const float* vz, const math::Grid3& g, DiffT d,
             BoundaryCondT bc);
// From gradient fields: H (det, 2x2 when is2D), V (det(I + G)) or VInv (det(I - G)).
void JacDetHGrads(float* out, const GradPlanes& p, std::size_t n, bool is2D);
void JacDetVGrads(float* out, const GradPlanes& p, std::size_t n);
void JacDetVInvGrads(float* out, const GradPlanes& p, std::size_t n);

// The three planes of a field.
struct FieldPlanes {
  const float* c[3];
};
struct OutPlanes {
  float* c[3];
};

// Field products of cuda/src/ops/differential_extra.cu (JacobianXY, JacobianXtY, DivergenceTensor,
// AdInf, CoAdInf): out = op(a, b).
enum class FieldProductOp { JacobianXY, JacobianXtY, DivergenceTensor, AdInf, CoAdInf };
void FieldProduct(FieldProductOp op, const OutPlanes& out, const FieldPlanes& a, const FieldPlanes& b,
                  const math::Grid3& g, const char* name);

}  // namespace cuda_impl
}  // namespace pyca
