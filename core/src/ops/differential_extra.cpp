// The `differential` family, continued (ops/differential.yaml): products of Jacobians with fields
// (PyCA's JacobianXY, JacobianXtY, DivergenceTensor, AdInf, CoAdInf). Argument checks, then the
// OpenMP loop over voxels or the CUDA backend; the per-voxel math is in pyca/math/differential.h,
// the semantics in docs/operations/differential.md.
#include <cstddef>

#include "ops/deformation_simd.h"
#include "ops/differential_cuda.h"
#include "ops/differential_impl.h"
#include "pyca/detail/checks.h"
#include "pyca/math/differential.h"
#include "pyca/ops/differential.h"

namespace pyca {

namespace {

using cuda_impl::FieldProductOp;
using diff_detail::forEachVoxel;
using diff_detail::gridOf;

// out = op(a, b) for two fields, e.g. JacobianXY(out, X, Y); aName/bName name the arguments.
void fieldProduct(FieldProductOp kind, const char* op, Field3D& out, const Field3D& a, const char* aName,
                  const Field3D& b, const char* bName) {
  const bool dev = detail::prepare(op, {{"out", &out}, {aName, &a}, {bName, &b}});
  detail::checkNoAlias(op, {"out", &out}, {aName, &a});
  detail::checkNoAlias(op, {"out", &out}, {bName, &b});
  const math::Grid3 g = gridOf(a);
  const cuda_impl::OutPlanes o{{out.x(), out.y(), out.z()}};
  const cuda_impl::FieldPlanes pa{{a.x(), a.y(), a.z()}};
  const cuda_impl::FieldPlanes pb{{b.x(), b.y(), b.z()}};
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::FieldProduct(kind, o, pa, pb, g, op));
    return;
  }
  const float* const* A = pa.c;
  const float* const* B = pb.c;
  if (kind == FieldProductOp::JacobianXY &&
      simd16::jacobianXY(math::MutPlanes<3>{{o.c[0], o.c[1], o.c[2]}}, math::Planes<3>{{A[0], A[1], A[2]}},
                         math::Planes<3>{{B[0], B[1], B[2]}}, g)) {
    return;  // sixteen voxels at once where the CPU allows (deformation_simd.cpp: the same bits)
  }
  forEachVoxel(g, [&](std::size_t i, int x, int y, int z) {
    float r[3] = {0.f, 0.f, 0.f};
    switch (kind) {
      case FieldProductOp::JacobianXY:
        math::jacobianXY(A, B, i, g, x, y, z, r);
        break;
      case FieldProductOp::JacobianXtY:
        math::jacobianXtY(A, B, i, g, x, y, z, r);
        break;
      case FieldProductOp::DivergenceTensor:
        math::divergenceTensor(A, B, i, g, x, y, z, r);
        break;
      case FieldProductOp::AdInf:
        math::adInf(A, B, i, g, x, y, z, r);
        break;
      case FieldProductOp::CoAdInf:
        math::coAdInf(A, B, i, g, x, y, z, r);
        break;
    }
    o.c[0][i] = r[0];
    o.c[1][i] = r[1];
    o.c[2][i] = r[2];
  });
}

}  // namespace

void JacobianXY(Field3D& out, const Field3D& X, const Field3D& Y) {
  fieldProduct(FieldProductOp::JacobianXY, "JacobianXY", out, X, "X", Y, "Y");
}

void JacobianXtY(Field3D& out, const Field3D& X, const Field3D& Y) {
  fieldProduct(FieldProductOp::JacobianXtY, "JacobianXtY", out, X, "X", Y, "Y");
}

void DivergenceTensor(Field3D& out, const Field3D& X, const Field3D& Y) {
  fieldProduct(FieldProductOp::DivergenceTensor, "DivergenceTensor", out, X, "X", Y, "Y");
}

void AdInf(Field3D& out, const Field3D& X, const Field3D& Y) {
  fieldProduct(FieldProductOp::AdInf, "AdInf", out, X, "X", Y, "Y");
}

void CoAdInf(Field3D& out, const Field3D& X, const Field3D& m) {
  fieldProduct(FieldProductOp::CoAdInf, "CoAdInf", out, X, "X", m, "m");
}

}  // namespace pyca
